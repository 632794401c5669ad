//! OpenAI-compatible chat completions (OpenAI, DeepSeek's chat endpoint): a JSON body, or the
//! `data:` chunks of a streamed one.
//!
//! Shapes, read 2026-12-01:
//! - body: `{"id","model","choices":[{"index","message":{"role","content","tool_calls":[{"id",
//!   "type":"function","function":{"name","arguments"}}]},"finish_reason"}],"usage":{...}}`;
//!   an error is `{"error":{"message","type","code"}}`
//!   (<https://platform.openai.com/docs/api-reference/chat>, read in copies of the reference).
//! - stream: chunks `{"id","model","choices":[{"index","delta":{"role"?,"content"?,
//!   "tool_calls"?:[{"index","id"?,"type"?,"function":{"name"?,"arguments"?}}]},
//!   "finish_reason"}]}`; a tool call's `id` and `name` come on its first delta, its
//!   `arguments` in fragments; with `stream_options.include_usage` one more chunk before
//!   `data: [DONE]` carries `usage` and an empty `choices`, every other chunk `"usage": null`
//!   (the same reference, `stream_options.include_usage`).
//! - DeepSeek adds `reasoning_content` next to `content`, in the message and in the delta
//!   (<https://api-docs.deepseek.com/guides/thinking_mode>), and `prompt_cache_hit_tokens` /
//!   `prompt_cache_miss_tokens` to `usage` (<https://api-docs.deepseek.com/guides/kv_cache>).
//!
//! The message's blocks come in one order, since the API has no interleaving: the reasoning
//! (unsigned: this API has no signature to send back), the text, then the tool calls in
//! `index` order. Arguments are kept as the string the provider sent, unparsed (the chat
//! serializer sends them back the same way; the Messages serializer checks them). Only the
//! choice with `index` 0 is decoded: one request, one answer in the log.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::sse::Framer;
use super::usage::ChatUsage;
use super::{
    Answer, Malformation, MissingPart, ProviderError, ResponseError, StopReason, assistant_message,
    reasoning,
};
use crate::vocab::ContentBlock;

const BODY: &str = "response body";

/// Decodes a chat-completions response body.
///
/// The message id is `message_id` when given, else the response's `id`; the source is
/// `{"kind":"model","provider":provider,"model":<the response's model>}`.
///
/// ```
/// use mektpoy::response::decode_chat;
/// let body = r#"{"id":"r1","model":"deepseek-flash","choices":[{"index":0,"message":{"role":"assistant",
///   "reasoning_content":"Think.","content":"Hi"},"finish_reason":"stop"}],
///   "usage":{"prompt_tokens":10,"completion_tokens":3}}"#;
/// let answer = decode_chat(body, "deepseek", None)?;
/// assert_eq!(answer.message.id(), "r1");
/// assert_eq!(answer.message.text(), "Hi");
/// assert_eq!(answer.message.content().len(), 2, "the reasoning, then the text");
/// # Ok::<(), mektpoy::response::ResponseError>(())
/// ```
///
/// # Errors
/// [`ResponseError::Provider`] for an `error` body; [`ResponseError::Json`] /
/// [`ResponseError::Malformed`] for a body of another shape (no `id`, `model` or choice 0, a
/// tool call without `id`, `function.name` or `function.arguments`);
/// [`ResponseError::EmptyAnswer`].
pub fn decode_chat(
    body: &str,
    provider: &str,
    message_id: Option<&str>,
) -> Result<Answer, ResponseError> {
    let body: Body = serde_json::from_str(body).map_err(|e| ResponseError::json(BODY, e))?;
    if let Some(error) = body.error {
        return Err(error.into_error());
    }
    let (id, model) = head(body.id, body.model, BODY)?;
    let choice = body
        .choices
        .into_iter()
        .flatten()
        .find(|c| c.index.unwrap_or(0) == 0)
        .ok_or_else(|| ResponseError::malformed(BODY, Malformation::NoChoice))?;
    let message = choice
        .message
        .ok_or_else(|| ResponseError::malformed(BODY, Malformation::ChoiceWithoutMessage))?;
    let mut calls = Vec::new();
    for (i, call) in message.tool_calls.into_iter().flatten().enumerate() {
        let context = || format!("tool call {i}");
        let function = call.function.ok_or_else(|| {
            ResponseError::malformed(context(), Malformation::Missing("function"))
        })?;
        calls.push(Call {
            id: call.id,
            name: function.name,
            arguments: function.arguments,
        });
    }
    let content = blocks(
        message.reasoning_content.unwrap_or_default(),
        message.content.unwrap_or_default(),
        calls,
    )?;
    let usage = body.usage.map(|u| u.normalize(BODY)).transpose()?;
    Ok(Answer {
        message: assistant_message(message_id.unwrap_or(&id), content, provider, &model)?,
        response_id: id,
        model,
        usage,
        stop_reason: choice.finish_reason.as_deref().map(StopReason::chat),
        stop_sequence: None,
        diagnostics: None,
        input_transformations: None,
        invalid_tool_calls: Vec::new(),
    }
    .listing_invalid_calls())
}

fn head(
    id: Option<String>,
    model: Option<String>,
    context: &str,
) -> Result<(String, String), ResponseError> {
    let id = id.ok_or_else(|| ResponseError::malformed(context, Malformation::NotAString("id")))?;
    let model = model
        .ok_or_else(|| ResponseError::malformed(context, Malformation::NotAString("model")))?;
    Ok((id, model))
}

#[derive(Deserialize)]
struct Body {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    choices: Option<Vec<Choice>>,
    #[serde(default)]
    usage: Option<ChatUsage>,
    #[serde(default)]
    error: Option<ProviderError>,
}

#[derive(Deserialize)]
struct Choice {
    #[serde(default)]
    index: Option<u64>,
    #[serde(default)]
    message: Option<ChatMessage>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct ChatMessage {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    reasoning_content: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<ToolCall>>,
}

#[derive(Deserialize)]
struct ToolCall {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<Function>,
}

#[derive(Deserialize)]
struct Function {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<String>,
}

/// A tool call as decoded so far.
#[derive(Debug, Default)]
struct Call {
    id: Option<String>,
    name: Option<String>,
    arguments: Option<String>,
}

/// The message's blocks: reasoning, text, tool calls (see the module doc).
fn blocks(
    reasoning_text: String,
    text: String,
    calls: Vec<Call>,
) -> Result<Vec<ContentBlock>, ResponseError> {
    let mut out = Vec::with_capacity(calls.len() + 2);
    if !reasoning_text.is_empty() {
        out.push(reasoning(reasoning_text, Default::default()));
    }
    if !text.is_empty() {
        out.push(ContentBlock::text(text));
    }
    for (i, call) in calls.into_iter().enumerate() {
        let context = || format!("tool call {i}");
        let missing = |field: &'static str| {
            ResponseError::malformed(context(), Malformation::NotAString(field))
        };
        let name = call.name.ok_or_else(|| missing("function.name"))?;
        let id = call.id.ok_or_else(|| missing("id"))?;
        let arguments = call
            .arguments
            .ok_or_else(|| missing("function.arguments"))?;
        // The log's own check: the one way to build a call refuses an empty name.
        let block = ContentBlock::tool_call(id, name, arguments).map_err(|_| {
            ResponseError::malformed(context(), Malformation::EmptyToolName("function.name"))
        })?;
        out.push(block);
    }
    Ok(out)
}

/// A chat-completions stream, decoded as its chunks arrive.
///
/// Feed it chunks ([`push_chunk`](Self::push_chunk), the `data:` payloads, `[DONE]`
/// included), or raw SSE text ([`push_text`](Self::push_text), [`push_line`](Self::push_line)),
/// then call [`finish`](Self::finish). The answer equals what [`decode_chat`] makes of the same
/// response's body. Once a chunk is refused, every later call fails with
/// [`ResponseError::Failed`].
///
/// ```
/// use mektpoy::response::ChatStream;
///
/// let mut stream = ChatStream::new("deepseek", None);
/// for data in [
///     r#"{"id":"c1","model":"deepseek-v4-flash","choices":[{"index":0,"delta":{"role":"assistant","reasoning_content":"Think."},"finish_reason":null}]}"#,
///     r#"{"id":"c1","model":"deepseek-v4-flash","choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":"stop"}]}"#,
///     r#"{"id":"c1","model":"deepseek-v4-flash","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":3,"prompt_cache_hit_tokens":8,"prompt_cache_miss_tokens":2}}"#,
///     "[DONE]",
/// ] {
///     stream.push_chunk(data)?;
/// }
/// let answer = stream.finish()?;
/// assert_eq!(answer.message.text(), "Hi");
/// assert_eq!(answer.usage.unwrap().cache_read_tokens, Some(8));
/// # Ok::<(), mektpoy::response::ResponseError>(())
/// ```
#[derive(Debug)]
pub struct ChatStream {
    provider: String,
    message_id: Option<String>,
    framer: Framer,
    id: Option<String>,
    model: Option<String>,
    reasoning: String,
    content: String,
    calls: BTreeMap<u64, Call>,
    finish_reason: Option<String>,
    usage: Option<ChatUsage>,
    done: bool,
    failed: bool,
}

#[derive(Deserialize)]
struct Chunk {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    choices: Option<Vec<ChunkChoice>>,
    #[serde(default)]
    usage: Option<ChatUsage>,
    #[serde(default)]
    error: Option<ProviderError>,
}

#[derive(Deserialize)]
struct ChunkChoice {
    #[serde(default)]
    index: Option<u64>,
    #[serde(default)]
    delta: Option<ChunkDelta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct ChunkDelta {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    reasoning_content: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<CallDelta>>,
}

#[derive(Deserialize)]
struct CallDelta {
    #[serde(default)]
    index: Option<u64>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<Function>,
}

impl ChatStream {
    /// A stream from `provider`'s chat endpoint; the message id is `message_id` when given,
    /// else the response's `id` (from its chunks).
    ///
    /// ```
    /// use mektpoy::response::ChatStream;
    /// let mut stream = ChatStream::new("acme", Some("a1"));
    /// stream.push_chunk(r#"{"id":"c1","model":"acme-1","choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":"stop"}]}"#)?;
    /// stream.push_chunk("[DONE]")?;
    /// assert_eq!(stream.finish()?.message.id(), "a1");
    /// # Ok::<(), mektpoy::response::ResponseError>(())
    /// ```
    pub fn new(provider: &str, message_id: Option<&str>) -> Self {
        ChatStream {
            provider: provider.to_owned(),
            message_id: message_id.map(str::to_owned),
            framer: Framer::default(),
            id: None,
            model: None,
            reasoning: String::new(),
            content: String::new(),
            calls: BTreeMap::new(),
            finish_reason: None,
            usage: None,
            done: false,
            failed: false,
        }
    }

    /// One chunk: the JSON of a `data:` line, or `[DONE]`.
    ///
    /// ```
    /// use mektpoy::response::{ChatStream, ResponseError};
    /// let mut stream = ChatStream::new("acme", None);
    /// assert!(matches!(stream.push_chunk("{oops"), Err(ResponseError::Json { .. })));
    /// // Once a chunk is refused, the stream is over.
    /// assert!(matches!(stream.push_chunk("[DONE]"), Err(ResponseError::Failed)));
    /// ```
    ///
    /// # Errors
    /// [`ResponseError::Provider`] for an `error` chunk; [`ResponseError::Json`] for a chunk of
    /// another shape; [`ResponseError::AfterEnd`] after `[DONE]`; [`ResponseError::Failed`]
    /// after any of these.
    pub fn push_chunk(&mut self, data: &str) -> Result<(), ResponseError> {
        if self.failed {
            return Err(ResponseError::Failed);
        }
        let result = self.chunk(data);
        self.failed = result.is_err();
        result
    }

    /// One line of SSE text, without its line end; a blank line ends an event.
    ///
    /// ```
    /// use mektpoy::response::ChatStream;
    /// let mut stream = ChatStream::new("acme", None);
    /// for line in [
    ///     r#"data: {"id":"c1","model":"acme-1","choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":"stop"}]}"#,
    ///     "",
    ///     "data: [DONE]",
    ///     "",
    /// ] {
    ///     stream.push_line(line)?;
    /// }
    /// assert_eq!(stream.finish()?.message.text(), "Hi");
    /// # Ok::<(), mektpoy::response::ResponseError>(())
    /// ```
    ///
    /// # Errors
    /// As [`push_chunk`](Self::push_chunk), for the chunk the line completes.
    pub fn push_line(&mut self, line: &str) -> Result<(), ResponseError> {
        match self.framer.line(line) {
            Some((_, data)) => self.push_chunk(&data),
            None if self.failed => Err(ResponseError::Failed),
            None => Ok(()),
        }
    }

    /// SSE text as it arrives, split anywhere.
    ///
    /// ```
    /// use mektpoy::response::ChatStream;
    /// let sse = concat!(
    ///     r#"data: {"id":"c1","model":"acme-1","choices":[{"index":0,"delta":{"content":"Hel"},"finish_reason":null}]}"#, "\n\n",
    ///     r#"data: {"id":"c1","model":"acme-1","choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":"stop"}]}"#, "\n\n",
    ///     "data: [DONE]\n\n",
    /// );
    /// let mut stream = ChatStream::new("acme", None);
    /// let (a, b) = sse.split_at(50); // network reads split anywhere
    /// stream.push_text(a)?;
    /// stream.push_text(b)?;
    /// assert_eq!(stream.finish()?.message.text(), "Hello");
    /// # Ok::<(), mektpoy::response::ResponseError>(())
    /// ```
    ///
    /// # Errors
    /// As [`push_chunk`](Self::push_chunk), for the first refused chunk the text completes.
    pub fn push_text(&mut self, text: &str) -> Result<(), ResponseError> {
        if self.failed {
            return Err(ResponseError::Failed);
        }
        for (_, data) in self.framer.text(text) {
            self.push_chunk(&data)?;
        }
        Ok(())
    }

    /// The answer, once `[DONE]` came.
    ///
    /// ```
    /// use mektpoy::response::{ChatStream, ResponseError};
    /// let mut stream = ChatStream::new("acme", None);
    /// stream.push_chunk(r#"{"id":"c1","model":"acme-1","choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}"#)?;
    /// // The connection dropped before the last chunk.
    /// assert!(matches!(stream.finish(), Err(ResponseError::CutOff { .. })));
    /// # Ok::<(), ResponseError>(())
    /// ```
    ///
    /// # Errors
    /// [`ResponseError::CutOff`] without `[DONE]` (or when SSE text ends inside a chunk that
    /// is not JSON); [`ResponseError::Malformed`] when no chunk
    /// named the `id` or `model`, or a tool call never got its `id` or name;
    /// [`ResponseError::EmptyAnswer`]; [`ResponseError::Failed`] after a refused chunk.
    pub fn finish(mut self) -> Result<Answer, ResponseError> {
        if let Some((_, data)) = self.framer.end()
            && let Err(error) = self.push_chunk(&data)
        {
            return Err(super::messages::torn(error));
        }
        if self.failed {
            return Err(ResponseError::Failed);
        }
        if !self.done {
            return Err(ResponseError::CutOff {
                missing: MissingPart::Event("data: [DONE]"),
            });
        }
        let (id, model) = head(self.id, self.model, "stream")?;
        let content = blocks(
            self.reasoning,
            self.content,
            self.calls.into_values().collect(),
        )?;
        let usage = self.usage.map(|u| u.normalize("stream")).transpose()?;
        Ok(Answer {
            message: assistant_message(
                self.message_id.as_deref().unwrap_or(&id),
                content,
                &self.provider,
                &model,
            )?,
            response_id: id,
            model,
            usage,
            stop_reason: self.finish_reason.as_deref().map(StopReason::chat),
            stop_sequence: None,
            diagnostics: None,
            input_transformations: None,
            invalid_tool_calls: Vec::new(),
        }
        .listing_invalid_calls())
    }

    fn chunk(&mut self, data: &str) -> Result<(), ResponseError> {
        if self.done {
            return Err(ResponseError::AfterEnd {
                event: "chunk".to_owned(),
            });
        }
        if data.trim() == "[DONE]" {
            self.done = true;
            return Ok(());
        }
        let chunk: Chunk =
            serde_json::from_str(data).map_err(|e| ResponseError::json("chunk", e))?;
        if let Some(error) = chunk.error {
            return Err(error.into_error());
        }
        if self.id.is_none() {
            self.id = chunk.id;
        }
        if self.model.is_none() {
            self.model = chunk.model;
        }
        if chunk.usage.is_some() {
            self.usage = chunk.usage;
        }
        for choice in chunk.choices.into_iter().flatten() {
            if choice.index.unwrap_or(0) != 0 {
                continue;
            }
            if choice.finish_reason.is_some() {
                self.finish_reason = choice.finish_reason;
            }
            let Some(delta) = choice.delta else { continue };
            if let Some(text) = delta.reasoning_content {
                self.reasoning.push_str(&text);
            }
            if let Some(text) = delta.content {
                self.content.push_str(&text);
            }
            for call in delta.tool_calls.into_iter().flatten() {
                self.call_delta(call);
            }
        }
        Ok(())
    }

    /// A tool-call delta. Without an `index` (some compatible servers send none), a delta with
    /// an `id` opens the next call and one without continues the latest.
    fn call_delta(&mut self, delta: CallDelta) {
        let last = self.calls.keys().next_back().copied();
        let index = match (delta.index, &delta.id, last) {
            (Some(index), _, _) => index,
            (None, Some(_), Some(last)) => last.saturating_add(1),
            (None, None, Some(last)) => last,
            (None, _, None) => 0,
        };
        let call = self.calls.entry(index).or_default();
        if call.id.is_none() {
            call.id = delta.id;
        }
        if let Some(function) = delta.function {
            if call.name.is_none() {
                call.name = function.name;
            }
            if let Some(part) = function.arguments {
                call.arguments
                    .get_or_insert_with(String::new)
                    .push_str(&part);
            }
        }
    }
}
