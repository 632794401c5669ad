//! Messages API responses (Anthropic, DeepSeek's Anthropic-compatible endpoint): a JSON body, or
//! the server-sent events of a streamed one.
//!
//! Shapes, read 2026-12-01:
//! - body: `{"id","type":"message","role":"assistant","model","content":[...],"stop_reason",
//!   "stop_sequence","usage":{...},"diagnostics"?,"input_transformations"?}`; an error body is
//!   `{"type":"error","error":{"type","message"}}`
//!   (<https://platform.claude.com/docs/en/api/beta/messages.md>, the vendor's generated
//!   `BetaMessage`).
//! - stream: `message_start` (a message with empty `content`, its `usage`), then per block
//!   `content_block_start` / `content_block_delta`* / `content_block_stop` (`index` is the
//!   block's position in the final `content`), `message_delta` (`delta.stop_reason`,
//!   `delta.stop_sequence`, cumulative `usage`, and `input_transformations` only after a
//!   server-side fallback, replacing those of `message_start`), `message_stop`; `ping` anywhere;
//!   `error` with `{"error":{"type","message"}}`. Deltas: `text_delta` (`text`),
//!   `thinking_delta` (`thinking`), `signature_delta` (`signature`), `input_json_delta`
//!   (`partial_json`) (<https://platform.claude.com/docs/en/build-with-claude/streaming>).
//! - DeepSeek's endpoint answers in the same shapes
//!   (<https://api-docs.deepseek.com/guides/anthropic_api>).
//!
//! **Tool inputs.** A body's `input` is kept as the exact text the provider sent (a
//! [`RawValue`] of the body): its tokens go back on the next request unchanged, so a signature
//! bound to the conversation still matches. A stream sends the same input as `partial_json`
//! fragments that need not be split at token boundaries and may hold whitespace between tokens
//! that the body's compact `input` does not. The fragments are concatenated and, when they are
//! one JSON value, only the whitespace between tokens is removed (every token keeps its bytes):
//! that is the text the body would have carried, and what the serializer sends either way.
//! Input that is not an object or not JSON at all is kept as the model sent it and listed in
//! [`Answer::invalid_tool_calls`] ([decision 94](crate::manual::decisions#decision-94)). A
//! stream whose tool block has no `input_json_delta` keeps the `input` of its
//! `content_block_start`.

use indexmap::IndexMap;
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

use super::sse::Framer;
use super::usage::MessagesUsage;
use super::{
    Answer, Malformation, MissingPart, ProviderError, RawDiagnostics, RawTransformation,
    ResponseError, StopReason, assistant_message, reasoning, transformations, unknown_block,
};
use crate::vocab::ContentBlock;
use crate::wire::compact_json;

const BODY: &str = "response body";

/// Decodes a Messages-API response body.
///
/// The message id is `message_id` when given, else the response's `id`; the source is
/// `{"kind":"model","provider":provider,"model":<the response's model>}`.
///
/// ```
/// use mektpoy::response::{StopReason, decode_messages};
/// let body = r#"{"id":"msg_1","type":"message","role":"assistant","model":"claude-fable-5-1",
///   "content":[{"type":"tool_use","id":"toolu_1","name":"read","input":{"path":"a.rs"}}],
///   "stop_reason":"tool_use","usage":{"input_tokens":10,"output_tokens":5}}"#;
/// let answer = decode_messages(body, "anthropic", None)?;
/// let call = answer.message.tool_calls().next().unwrap();
/// assert_eq!((call.name(), call.arguments()), ("read", r#"{"path":"a.rs"}"#));
/// assert_eq!(answer.stop_reason, Some(StopReason::ToolUse));
/// # Ok::<(), mektpoy::response::ResponseError>(())
/// ```
///
/// # Errors
/// [`ResponseError::Provider`] for an error body; [`ResponseError::Json`] /
/// [`ResponseError::Malformed`] for a body of another shape (no `id`, `model`, `content` or
/// `usage`, a role other than `assistant`, a block of a known type missing a field);
/// [`ResponseError::UnrepresentableBlock`];
/// [`ResponseError::EmptyAnswer`].
pub fn decode_messages(
    body: &str,
    provider: &str,
    message_id: Option<&str>,
) -> Result<Answer, ResponseError> {
    let body: Body<'_> = serde_json::from_str(body).map_err(|e| ResponseError::json(BODY, e))?;
    if let Some(error) = body.error {
        return Err(error.into_error());
    }
    let head = body.head(BODY)?;
    let content = body
        .content
        .ok_or_else(|| ResponseError::malformed(BODY, Malformation::Missing("content")))?;
    let blocks = content
        .iter()
        .enumerate()
        .map(|(index, raw)| block(index, raw))
        .collect::<Result<Vec<_>, _>>()?;
    let usage = body
        .usage
        .ok_or_else(|| ResponseError::malformed(BODY, Malformation::Missing("usage")))?
        .normalize(BODY)?;
    let id = message_id.unwrap_or(&head.id);
    Ok(Answer {
        message: assistant_message(id, blocks, provider, &head.model)?,
        response_id: head.id,
        model: head.model,
        usage: Some(usage),
        stop_reason: body.stop_reason.as_deref().map(StopReason::messages),
        stop_sequence: body.stop_sequence,
        diagnostics: body.diagnostics.map(RawDiagnostics::typed),
        input_transformations: transformations(body.input_transformations),
        invalid_tool_calls: Vec::new(),
    }
    .listing_invalid_calls())
}

/// A message object: the body, or `message_start.message`.
#[derive(Deserialize)]
struct Body<'a> {
    #[serde(rename = "type", default)]
    kind: Option<String>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    role: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(borrow, default)]
    content: Option<Vec<&'a RawValue>>,
    #[serde(default)]
    stop_reason: Option<String>,
    #[serde(default)]
    stop_sequence: Option<String>,
    #[serde(default)]
    usage: Option<MessagesUsage>,
    #[serde(default)]
    diagnostics: Option<RawDiagnostics>,
    #[serde(default)]
    input_transformations: Option<Vec<RawTransformation>>,
    #[serde(default)]
    error: Option<ProviderError>,
}

struct Head {
    id: String,
    model: String,
}

impl Body<'_> {
    /// The id and model, checking that this is an assistant message.
    fn head(&self, context: &str) -> Result<Head, ResponseError> {
        if let Some(kind) = self.kind.as_deref().filter(|k| *k != "message") {
            return Err(ResponseError::malformed(
                context,
                Malformation::UnexpectedValue {
                    field: "type",
                    found: kind.to_owned(),
                    expected: "message",
                },
            ));
        }
        if let Some(role) = self.role.as_deref().filter(|r| *r != "assistant") {
            return Err(ResponseError::malformed(
                context,
                Malformation::UnexpectedValue {
                    field: "role",
                    found: role.to_owned(),
                    expected: "assistant",
                },
            ));
        }
        let field = |value: &Option<String>, name: &'static str| {
            value
                .clone()
                .ok_or_else(|| ResponseError::malformed(context, Malformation::NotAString(name)))
        };
        Ok(Head {
            id: field(&self.id, "id")?,
            model: field(&self.model, "model")?,
        })
    }
}

#[derive(Deserialize)]
struct Kind<'a> {
    #[serde(rename = "type", borrow)]
    kind: std::borrow::Cow<'a, str>,
}

#[derive(Deserialize)]
struct TextBlock {
    text: String,
}

#[derive(Deserialize)]
struct ToolUse<'a> {
    id: String,
    name: String,
    #[serde(borrow)]
    input: &'a RawValue,
}

/// `content[index]` of a body.
fn block(index: usize, raw: &RawValue) -> Result<ContentBlock, ResponseError> {
    let context = || format!("content block {index}");
    let json = |e| ResponseError::json(context(), e);
    let kind: Kind<'_> = serde_json::from_str(raw.get()).map_err(json)?;
    Ok(match &*kind.kind {
        "text" => ContentBlock::text(
            serde_json::from_str::<TextBlock>(raw.get())
                .map_err(json)?
                .text,
        ),
        "thinking" => {
            let (text, extra) = thinking_fields(raw.get(), &context())?;
            reasoning(text, extra)
        }
        "tool_use" => {
            let call: ToolUse<'_> = serde_json::from_str(raw.get()).map_err(json)?;
            tool_call(call.id, call.name, call.input.get().to_owned(), &context())?
        }
        _ => unknown_block(index, serde_json::from_str(raw.get()).map_err(json)?)?,
    })
}

/// A thinking block's text and its other fields (`signature` among them), in order.
fn thinking_fields(
    json: &str,
    context: &str,
) -> Result<(String, IndexMap<String, Value>), ResponseError> {
    let mut fields: IndexMap<String, Value> =
        serde_json::from_str(json).map_err(|e| ResponseError::json(context, e))?;
    fields.shift_remove("type");
    let text = match fields.shift_remove("thinking") {
        Some(Value::String(text)) => text,
        _ => {
            return Err(ResponseError::malformed(
                context,
                Malformation::ThinkingWithoutText,
            ));
        }
    };
    Ok((text, fields))
}

/// A tool call whose input text is `input`, refusing a call without a name (the log refuses
/// it). An input that is not an object is kept (and listed in
/// [`Answer::invalid_tool_calls`]): it is what the model sent.
fn tool_call(
    id: String,
    name: String,
    input: String,
    context: &str,
) -> Result<ContentBlock, ResponseError> {
    // The log's own check: the one way to build a call refuses an empty name.
    ContentBlock::tool_call(id, name, input)
        .map_err(|_| ResponseError::malformed(context, Malformation::EmptyToolName("name")))
}

/// A Messages-API stream, decoded as its events arrive.
///
/// Feed it events ([`push_event`](Self::push_event)), or raw SSE text
/// ([`push_text`](Self::push_text), [`push_line`](Self::push_line)), then call
/// [`finish`](Self::finish). The answer equals what [`decode_messages`] makes of the same
/// response's body. Once an event is refused, every later call fails with
/// [`ResponseError::Failed`]: a stream with a hole must not become a message.
///
/// ```
/// use mektpoy::response::MessagesStream;
///
/// let mut stream = MessagesStream::new("anthropic", None);
/// stream.push_text(concat!(
///     "event: message_start\n",
///     r#"data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-opus-5","content":[],"usage":{"input_tokens":3,"output_tokens":1}}}"#, "\n\n",
///     "event: content_block_start\n",
///     r#"data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#, "\n\n",
///     "event: content_block_delta\n",
///     r#"data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}"#, "\n\n",
///     "event: content_block_stop\n",
///     r#"data: {"type":"content_block_stop","index":0}"#, "\n\n",
///     "event: message_delta\n",
///     r#"data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":2}}"#, "\n\n",
///     "event: message_stop\n",
///     r#"data: {"type":"message_stop"}"#, "\n\n",
/// ))?;
/// let answer = stream.finish()?;
/// assert_eq!(answer.message.text(), "Hi");
/// assert_eq!(answer.usage.unwrap().output_tokens, 2);
/// # Ok::<(), mektpoy::response::ResponseError>(())
/// ```
#[derive(Debug)]
pub struct MessagesStream {
    provider: String,
    message_id: Option<String>,
    framer: Framer,
    start: Option<Start>,
    blocks: Vec<Slot>,
    stop_reason: Option<String>,
    stop_sequence: Option<String>,
    stopped: bool,
    failed: bool,
}

#[derive(Debug)]
struct Start {
    id: String,
    model: String,
    usage: MessagesUsage,
    diagnostics: Option<super::CacheDiagnostics>,
    input_transformations: Option<Vec<super::InputTransformation>>,
}

#[derive(Debug)]
enum Slot {
    Done(ContentBlock),
    Text(String),
    Thinking {
        text: String,
        extra: IndexMap<String, Value>,
    },
    ToolUse {
        id: String,
        name: String,
        /// The `input` of `content_block_start`.
        start: String,
        /// The `partial_json` fragments so far (`None` before the first).
        partial: Option<String>,
    },
    /// A block of another type, with the `partial_json` of its `input`, if any came.
    Other {
        value: Value,
        partial: Option<String>,
    },
}

impl Slot {
    fn kind(&self) -> &str {
        match self {
            Slot::Done(_) => "stopped",
            Slot::Text(_) => "text",
            Slot::Thinking { .. } => "thinking",
            Slot::ToolUse { .. } => "tool_use",
            Slot::Other { value, .. } => value.get("type").and_then(Value::as_str).unwrap_or(""),
        }
    }
}

#[derive(Deserialize)]
struct MessageStart<'a> {
    #[serde(borrow)]
    message: Body<'a>,
}

#[derive(Deserialize)]
struct BlockStart<'a> {
    index: u64,
    #[serde(borrow)]
    content_block: &'a RawValue,
}

#[derive(Deserialize)]
struct BlockDelta {
    index: u64,
    delta: Delta,
}

#[derive(Deserialize)]
struct Delta {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    thinking: Option<String>,
    #[serde(default)]
    signature: Option<String>,
    #[serde(default)]
    partial_json: Option<String>,
}

#[derive(Deserialize)]
struct BlockStop {
    index: u64,
}

#[derive(Deserialize)]
struct MessageDelta {
    #[serde(default)]
    delta: Option<MessageDeltaFields>,
    #[serde(default)]
    usage: Option<MessagesUsage>,
    #[serde(default)]
    input_transformations: Option<Vec<RawTransformation>>,
}

#[derive(Deserialize)]
struct MessageDeltaFields {
    #[serde(default)]
    stop_reason: Option<String>,
    #[serde(default)]
    stop_sequence: Option<String>,
}

#[derive(Deserialize)]
struct ErrorEvent {
    error: ProviderError,
}

#[derive(Deserialize)]
struct EventKind<'a> {
    #[serde(rename = "type", borrow)]
    kind: std::borrow::Cow<'a, str>,
}

impl MessagesStream {
    /// A stream from `provider`'s Messages endpoint; the message id is `message_id` when given,
    /// else the response's `id` (from `message_start`).
    ///
    /// ```
    /// use mektpoy::response::MessagesStream;
    /// let mut stream = MessagesStream::new("anthropic", Some("a1"));
    /// stream.push_event("message_start", r#"{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-fable-5-1","content":[],"usage":{"input_tokens":3,"output_tokens":1}}}"#)?;
    /// stream.push_event("content_block_start", r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":"Hi"}}"#)?;
    /// stream.push_event("content_block_stop", r#"{"type":"content_block_stop","index":0}"#)?;
    /// stream.push_event("message_stop", r#"{"type":"message_stop"}"#)?;
    /// let answer = stream.finish()?;
    /// assert_eq!((answer.message.id(), answer.response_id.as_str()), ("a1", "msg_1"));
    /// # Ok::<(), mektpoy::response::ResponseError>(())
    /// ```
    pub fn new(provider: &str, message_id: Option<&str>) -> Self {
        MessagesStream {
            provider: provider.to_owned(),
            message_id: message_id.map(str::to_owned),
            framer: Framer::default(),
            start: None,
            blocks: Vec::new(),
            stop_reason: None,
            stop_sequence: None,
            stopped: false,
            failed: false,
        }
    }

    /// One event: its SSE `event:` name and its `data:` JSON.
    ///
    /// Unknown event types are ignored (an event type added later must not break a decoder);
    /// `ping` is ignored.
    ///
    /// ```
    /// use mektpoy::response::{MessagesStream, ResponseError};
    /// let mut stream = MessagesStream::new("anthropic", None);
    /// stream.push_event("ping", r#"{"type":"ping"}"#)?; // ignored
    /// let overloaded = r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
    /// let err = stream.push_event("error", overloaded).unwrap_err();
    /// assert!(matches!(err, ResponseError::Provider { ref error_type, .. } if error_type == "overloaded_error"));
    /// # Ok::<(), ResponseError>(())
    /// ```
    ///
    /// # Errors
    /// [`ResponseError::Provider`] for an `error` event; [`ResponseError::Json`] /
    /// [`ResponseError::Malformed`] for an event of another shape;
    /// [`ResponseError::NotStarted`], [`ResponseError::UnknownIndex`],
    /// [`ResponseError::BlockOutOfOrder`], [`ResponseError::BlockStopped`],
    /// [`ResponseError::UnexpectedDelta`], [`ResponseError::AfterEnd`] for events out of
    /// place; [`ResponseError::UnrepresentableBlock`] when a block stops; [`ResponseError::Failed`]
    /// after any of these.
    pub fn push_event(&mut self, event_type: &str, data: &str) -> Result<(), ResponseError> {
        if self.failed {
            return Err(ResponseError::Failed);
        }
        let result = self.event(event_type, data);
        self.failed = result.is_err();
        result
    }

    /// One line of SSE text, without its line end; a blank line ends an event.
    ///
    /// ```
    /// use mektpoy::response::MessagesStream;
    /// let mut stream = MessagesStream::new("anthropic", None);
    /// for line in [
    ///     "event: message_start",
    ///     r#"data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-fable-5-1","content":[],"usage":{"input_tokens":3,"output_tokens":1}}}"#,
    ///     "",
    ///     "event: content_block_start",
    ///     r#"data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":"Hi"}}"#,
    ///     "",
    ///     "event: content_block_stop",
    ///     r#"data: {"type":"content_block_stop","index":0}"#,
    ///     "",
    ///     "event: message_stop",
    ///     r#"data: {"type":"message_stop"}"#,
    ///     "",
    /// ] {
    ///     stream.push_line(line)?;
    /// }
    /// assert_eq!(stream.finish()?.message.text(), "Hi");
    /// # Ok::<(), mektpoy::response::ResponseError>(())
    /// ```
    ///
    /// # Errors
    /// As [`push_event`](Self::push_event), for the event the line completes.
    pub fn push_line(&mut self, line: &str) -> Result<(), ResponseError> {
        match self.framer.line(line) {
            Some(frame) => self.frame(frame),
            None if self.failed => Err(ResponseError::Failed),
            None => Ok(()),
        }
    }

    /// SSE text as it arrives, split anywhere (a line may continue in the next call).
    ///
    /// ```
    /// use mektpoy::response::MessagesStream;
    /// let sse = concat!(
    ///     "event: message_start\n",
    ///     r#"data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-fable-5-1","content":[],"usage":{"input_tokens":3,"output_tokens":1}}}"#, "\n\n",
    ///     "event: content_block_start\n",
    ///     r#"data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":"Hi"}}"#, "\n\n",
    ///     "event: content_block_stop\n",
    ///     r#"data: {"type":"content_block_stop","index":0}"#, "\n\n",
    ///     "event: message_stop\n",
    ///     r#"data: {"type":"message_stop"}"#, "\n\n",
    /// );
    /// let mut stream = MessagesStream::new("anthropic", None);
    /// for piece in sse.as_bytes().chunks(40) {
    ///     stream.push_text(std::str::from_utf8(piece).unwrap())?; // ASCII: any split is UTF-8
    /// }
    /// assert_eq!(stream.finish()?.message.text(), "Hi");
    /// # Ok::<(), mektpoy::response::ResponseError>(())
    /// ```
    ///
    /// # Errors
    /// As [`push_event`](Self::push_event), for the first event the text completes that is
    /// refused.
    pub fn push_text(&mut self, text: &str) -> Result<(), ResponseError> {
        if self.failed {
            return Err(ResponseError::Failed);
        }
        for frame in self.framer.text(text) {
            self.frame(frame)?;
        }
        Ok(())
    }

    /// The answer, once the stream is complete.
    ///
    /// ```
    /// use mektpoy::response::{MessagesStream, ResponseError};
    /// let mut stream = MessagesStream::new("anthropic", None);
    /// stream.push_event("message_start", r#"{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-fable-5-1","content":[],"usage":{"input_tokens":3,"output_tokens":1}}}"#)?;
    /// // No `message_stop`: the connection was lost.
    /// assert!(matches!(stream.finish(), Err(ResponseError::CutOff { .. })));
    /// # Ok::<(), ResponseError>(())
    /// ```
    ///
    /// # Errors
    /// [`ResponseError::CutOff`] before `message_stop` (or with a block never stopped, or
    /// when SSE text ends inside an event whose data is not JSON: the connection was lost
    /// mid-event); [`ResponseError::EmptyAnswer`]; [`ResponseError::Failed`] after a refused
    /// event; and the other errors of the last event when SSE text left one open.
    pub fn finish(mut self) -> Result<Answer, ResponseError> {
        if let Some(frame) = self.framer.end()
            && let Err(error) = self.frame(frame)
        {
            return Err(torn(error));
        }
        if self.failed {
            return Err(ResponseError::Failed);
        }
        let Some(start) = self.start else {
            return Err(ResponseError::CutOff {
                missing: MissingPart::Event("message_start"),
            });
        };
        if !self.stopped {
            return Err(ResponseError::CutOff {
                missing: MissingPart::Event("message_stop"),
            });
        }
        let mut content = Vec::with_capacity(self.blocks.len());
        for (index, slot) in self.blocks.into_iter().enumerate() {
            match slot {
                Slot::Done(block) => content.push(block),
                _ => {
                    return Err(ResponseError::CutOff {
                        missing: MissingPart::BlockStop(index),
                    });
                }
            }
        }
        let usage = start.usage.normalize("stream")?;
        let id = self.message_id.as_deref().unwrap_or(&start.id);
        Ok(Answer {
            message: assistant_message(id, content, &self.provider, &start.model)?,
            response_id: start.id,
            model: start.model,
            usage: Some(usage),
            stop_reason: self.stop_reason.as_deref().map(StopReason::messages),
            stop_sequence: self.stop_sequence,
            diagnostics: start.diagnostics,
            input_transformations: start.input_transformations,
            invalid_tool_calls: Vec::new(),
        }
        .listing_invalid_calls())
    }

    fn frame(&mut self, (event, data): super::sse::Frame) -> Result<(), ResponseError> {
        match event {
            Some(event) => self.push_event(&event, &data),
            None => {
                let kind = serde_json::from_str::<EventKind<'_>>(&data)
                    .map_err(|e| ResponseError::json("event without a name", e));
                match kind {
                    Ok(kind) => self.push_event(&kind.kind, &data),
                    Err(e) => {
                        self.failed = true;
                        Err(e)
                    }
                }
            }
        }
    }

    fn event(&mut self, event: &str, data: &str) -> Result<(), ResponseError> {
        let json = |e| ResponseError::json(format!("`{event}` event"), e);
        if event == "ping" {
            return Ok(());
        }
        if event == "error" {
            let error: ErrorEvent = serde_json::from_str(data).map_err(json)?;
            return Err(error.error.into_error());
        }
        let known = matches!(
            event,
            "message_start"
                | "content_block_start"
                | "content_block_delta"
                | "content_block_stop"
                | "message_delta"
                | "message_stop"
        );
        if !known {
            return Ok(());
        }
        if self.stopped {
            return Err(ResponseError::AfterEnd {
                event: event.to_owned(),
            });
        }
        if event == "message_start" {
            return self.message_start(data);
        }
        if self.start.is_none() {
            return Err(ResponseError::NotStarted {
                event: event.to_owned(),
            });
        }
        match event {
            "content_block_start" => {
                let start: BlockStart<'_> = serde_json::from_str(data).map_err(json)?;
                self.block_start(start)
            }
            "content_block_delta" => {
                let delta: BlockDelta = serde_json::from_str(data).map_err(json)?;
                self.block_delta(delta)
            }
            "content_block_stop" => {
                let stop: BlockStop = serde_json::from_str(data).map_err(json)?;
                self.block_stop(stop.index)
            }
            "message_delta" => {
                let delta: MessageDelta = serde_json::from_str(data).map_err(json)?;
                if let Some(fields) = delta.delta {
                    if fields.stop_reason.is_some() {
                        self.stop_reason = fields.stop_reason;
                    }
                    if fields.stop_sequence.is_some() {
                        self.stop_sequence = fields.stop_sequence;
                    }
                }
                if let Some(start) = &mut self.start {
                    if let Some(usage) = delta.usage {
                        start.usage.update(usage);
                    }
                    if delta.input_transformations.is_some() {
                        start.input_transformations = transformations(delta.input_transformations);
                    }
                }
                Ok(())
            }
            _ => {
                self.stopped = true;
                Ok(())
            }
        }
    }

    fn message_start(&mut self, data: &str) -> Result<(), ResponseError> {
        const CONTEXT: &str = "`message_start` event";
        if self.start.is_some() {
            return Err(ResponseError::malformed(
                CONTEXT,
                Malformation::SecondMessageStart,
            ));
        }
        let start: MessageStart<'_> =
            serde_json::from_str(data).map_err(|e| ResponseError::json(CONTEXT, e))?;
        let message = start.message;
        let head = message.head(CONTEXT)?;
        // The vendor sends an empty `content` here; blocks it did send are complete ones.
        for (index, raw) in message.content.iter().flatten().enumerate() {
            self.blocks.push(Slot::Done(block(index, raw)?));
        }
        self.stop_reason = message.stop_reason;
        self.stop_sequence = message.stop_sequence;
        self.start = Some(Start {
            id: head.id,
            model: head.model,
            usage: message.usage.unwrap_or_default(),
            diagnostics: message.diagnostics.map(RawDiagnostics::typed),
            input_transformations: transformations(message.input_transformations),
        });
        Ok(())
    }

    fn block_start(&mut self, start: BlockStart<'_>) -> Result<(), ResponseError> {
        let expected = self.blocks.len();
        if usize::try_from(start.index).ok() != Some(expected) {
            return Err(ResponseError::BlockOutOfOrder {
                index: start.index,
                expected,
            });
        }
        let context = format!("`content_block_start` of block {expected}");
        let raw = start.content_block.get();
        let json = |e| ResponseError::json(context.clone(), e);
        let kind: Kind<'_> = serde_json::from_str(raw).map_err(json)?;
        let slot = match &*kind.kind {
            "text" => Slot::Text(serde_json::from_str::<TextBlock>(raw).map_err(json)?.text),
            "thinking" => {
                let (text, extra) = thinking_fields(raw, &context)?;
                Slot::Thinking { text, extra }
            }
            "tool_use" => {
                let call: ToolUse<'_> = serde_json::from_str(raw).map_err(json)?;
                Slot::ToolUse {
                    id: call.id,
                    name: call.name,
                    start: call.input.get().to_owned(),
                    partial: None,
                }
            }
            _ => Slot::Other {
                value: serde_json::from_str(raw).map_err(json)?,
                partial: None,
            },
        };
        self.blocks.push(slot);
        Ok(())
    }

    fn slot(&mut self, index: u64) -> Result<(usize, &mut Slot), ResponseError> {
        let i = usize::try_from(index)
            .ok()
            .filter(|&i| i < self.blocks.len())
            .ok_or(ResponseError::UnknownIndex { index })?;
        match &mut self.blocks[i] {
            Slot::Done(_) => Err(ResponseError::BlockStopped { index: i }),
            slot => Ok((i, slot)),
        }
    }

    fn block_delta(&mut self, event: BlockDelta) -> Result<(), ResponseError> {
        let (index, slot) = self.slot(event.index)?;
        let delta = event.delta;
        let missing = |field: &'static str| {
            ResponseError::malformed(
                format!("`{}` delta of block {index}", delta.kind),
                Malformation::NotAString(field),
            )
        };
        match (delta.kind.as_str(), &mut *slot) {
            ("text_delta", Slot::Text(text)) => {
                text.push_str(delta.text.as_deref().ok_or_else(|| missing("text"))?);
            }
            // Citations are not kept in the log (see the module doc), streamed or not.
            ("citations_delta", Slot::Text(_)) => {}
            ("thinking_delta", Slot::Thinking { text, .. }) => {
                text.push_str(
                    delta
                        .thinking
                        .as_deref()
                        .ok_or_else(|| missing("thinking"))?,
                );
            }
            ("signature_delta", Slot::Thinking { extra, .. }) => {
                let part = delta
                    .signature
                    .as_deref()
                    .ok_or_else(|| missing("signature"))?;
                match extra.get_mut("signature") {
                    Some(Value::String(signature)) => signature.push_str(part),
                    _ => {
                        extra.insert("signature".to_owned(), Value::from(part));
                    }
                }
            }
            ("input_json_delta", Slot::ToolUse { partial, .. } | Slot::Other { partial, .. }) => {
                let part = delta
                    .partial_json
                    .as_deref()
                    .ok_or_else(|| missing("partial_json"))?;
                partial.get_or_insert_with(String::new).push_str(part);
            }
            (_, slot) => {
                return Err(ResponseError::UnexpectedDelta {
                    index,
                    delta_type: delta.kind.clone(),
                    block_type: slot.kind().to_owned(),
                });
            }
        }
        Ok(())
    }

    fn block_stop(&mut self, index: u64) -> Result<(), ResponseError> {
        let (index, slot) = self.slot(index)?;
        let context = || format!("block {index}");
        let block = match std::mem::replace(slot, Slot::Text(String::new())) {
            Slot::Text(text) => ContentBlock::text(text),
            Slot::Thinking { text, extra } => reasoning(text, extra),
            Slot::ToolUse {
                id,
                name,
                start,
                partial,
            } => {
                let input = match partial.filter(|p| !p.trim().is_empty()) {
                    Some(partial) => streamed_input(&partial),
                    None => start,
                };
                tool_call(id, name, input, &context())?
            }
            Slot::Other { mut value, partial } => {
                let partial = partial.filter(|p| !p.trim().is_empty());
                if let (Some(partial), Some(map)) = (partial, value.as_object_mut()) {
                    let input: Value = serde_json::from_str(&partial)
                        .map_err(|e| ResponseError::json(context(), e))?;
                    map.insert("input".to_owned(), input);
                }
                unknown_block(index, value)?
            }
            Slot::Done(block) => block,
        };
        self.blocks[index] = Slot::Done(block);
        Ok(())
    }
}

/// The error of an event the SSE text left open at its end (no blank line after it): one
/// whose data is not JSON was torn by the end of the input, which is a cut-off, not a
/// malformed event.
pub(super) fn torn(error: ResponseError) -> ResponseError {
    match error {
        ResponseError::Json { context, .. } => ResponseError::CutOff {
            missing: MissingPart::RestOf(context),
        },
        error => error,
    }
}

/// The text of a streamed input: the concatenated fragments, whitespace between tokens removed
/// when they are one JSON value (the serializer's own rule, so the next request sends what a
/// JSON answer would have); otherwise as they came, since that is what the model wrote.
fn streamed_input(partial: &str) -> String {
    match serde_json::from_str::<&RawValue>(partial) {
        Ok(_) => compact_json(partial).into_owned(),
        Err(_) => partial.to_owned(),
    }
}
