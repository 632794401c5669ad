//! OpenAI's Responses API (`POST /v1/responses`): a JSON response object, or the semantic
//! server-sent events of a streamed one.
//!
//! Shapes, read 2026-12-06 through the search tool:
//! - response object: `{"id","object":"response","status","error","incomplete_details":
//!   {"reason"},"model","output":[items],"usage"}`; output items `message` (`role`
//!   `assistant`, `content` of `output_text` `{"text","annotations"}` and `refusal`
//!   `{"refusal"}` parts), `function_call` (`id`, `call_id`, `name`, `arguments`: a string,
//!   `status`), `reasoning` (`id`, `summary` of `summary_text` parts, `encrypted_content` when
//!   the request had `include: ["reasoning.encrypted_content"]`, optional `content`, `status`)
//!   and the built-in tools' items (`web_search_call`, `tool_search_call`, `additional_tools`,
//!   ...). Read in the API reference <https://platform.openai.com/docs/api-reference/responses>
//!   as the OpenAPI-generated types render it (`openai-client-base` 0.14.0 on docs.rs:
//!   `ResponseUsageInputTokensDetails`, `AdditionalTools`; `openai-protocol` 1.13.0
//!   `ResponseOutputItem`; the openai SDKs' `Response` / `ResponseStreamEvent` types), the
//!   stored reference page itself holding only its navigation.
//! - errors: an HTTP error body `{"error":{"message","type","param","code"}}`; a failed
//!   response `status: "failed"` with `error: {"code","message"}`; the stream's `error` event
//!   `{"type":"error","code","message","param","sequence_number"}` (`ResponseErrorEvent` in
//!   the same generated types).
//! - stream: <https://developers.openai.com/api/docs/guides/streaming-responses> ("semantic
//!   events", each "typed with a predefined schema") and the streaming reference as the
//!   generated types render it: `response.created` / `response.in_progress` (`response`),
//!   `response.output_item.added` / `.done` (`output_index`, `item`),
//!   `response.content_part.added` / `.done` (`content_index`, `part`),
//!   `response.output_text.delta` / `.done`, `response.refusal.delta` / `.done`,
//!   `response.function_call_arguments.delta` / `.done` (`arguments`),
//!   `response.reasoning_summary_part.added` / `.done` and
//!   `response.reasoning_summary_text.delta` / `.done` (`summary_index`), then one of
//!   `response.completed`, `response.incomplete`, `response.failed` carrying the final
//!   `response`; there is no `data: [DONE]`.
//! - usage and caching: `usage.input_tokens` (cached tokens included),
//!   `input_tokens_details.cached_tokens`, `output_tokens`,
//!   `output_tokens_details.reasoning_tokens`; the prompt-caching guide
//!   <https://developers.openai.com/api/docs/guides/prompt-caching> adds, for GPT-5.6 and
//!   later, "OpenAI reports writes in cache_write_tokens and reads in cached_tokens"
//!   (`input_tokens_details.cache_write_tokens`, the field also in Azure's
//!   `ResponseUsageInputTokensDetails`). Neither page documents why a cache missed: no cache
//!   diagnostics are decoded.
//!
//! **The blocks.** Each `output_text` part is a text block (empty ones skipped), each `refusal`
//! part is kept verbatim (`{"type":"refusal","refusal"}`, the only other part type the API
//! documents; any other part type is refused as not of the documented shape), each
//! `function_call` a tool call whose `id` is the item's `call_id` and whose `arguments` are the
//! string as received, each `reasoning` item a reasoning block whose text is its summary texts
//! (joined by a blank line) and whose extra fields are every field of the item but `type`, in
//! order (`id`, `summary`, `encrypted_content`, ...), so a serializer can send the item back as
//! it came. Any other item type is kept verbatim (one private helper builds every unknown
//! block): the API takes its output items back as input items, and a built-in tool's item
//! dropped from the log would make the next request differ from the conversation. Not kept:
//! the `id` of message and `function_call` items (under `store: false` nothing is persisted;
//! an id sent back names an item the server cannot find) and their `status`. A message's
//! `phase` (`commentary` / `final_answer`), which the OpenAPI document's `MessagePhase` says
//! to "preserve and resend" on gpt-5.3-codex and later ("dropping it can degrade
//! performance"), is a `{"type":"phase","phase"}` block before the item's text (and one with a
//! `null` phase before a later message item without one), which the Responses wire reads
//! back into the items it writes ([decision 141](crate::manual::decisions#decision-141)).
//!
//! **The stream.** An item is what its `response.output_item.done` says; an item the stream
//! never closed is rebuilt from its `added` item and its deltas. When no item event came at
//! all, the terminal `response`'s `output` is used. So a stream decodes to what the body of
//! the same answer decodes to.

use std::collections::BTreeMap;

use indexmap::IndexMap;
use serde::Deserialize;
use serde_json::Value;

use super::sse::Framer;
use super::usage::ResponsesUsage;
use super::{
    Answer, Malformation, MissingPart, ProviderError, ResponseError, StopReason, assistant_message,
    reasoning, unknown_block,
};
use crate::vocab::ContentBlock;

const BODY: &str = "response body";

/// One output item, its fields in order.
type Item = IndexMap<String, Value>;

/// Decodes a Responses-API response body.
///
/// The message id is `message_id` when given, else the response's `id`; the source is
/// `{"kind":"model","provider":provider,"model":<the response's model>}`.
///
/// ```
/// use mektpoy::response::{StopReason, decode_responses};
/// let body = r#"{"id":"resp_1","model":"gpt-5.4","status":"completed","output":[
///   {"type":"message","id":"msg_1","role":"assistant","content":[{"type":"output_text","text":"Hi"}]}],
///   "usage":{"input_tokens":2048,"input_tokens_details":{"cached_tokens":1024},"output_tokens":2}}"#;
/// let answer = decode_responses(body, "openai", None)?;
/// assert_eq!(answer.message.text(), "Hi");
/// assert_eq!(answer.stop_reason, Some(StopReason::Completed));
/// assert_eq!(answer.usage.unwrap().cache_read_tokens, Some(1024));
/// # Ok::<(), mektpoy::response::ResponseError>(())
/// ```
///
/// # Errors
/// [`ResponseError::Provider`] for an error body or a response whose `status` is `failed`;
/// [`ResponseError::Json`] / [`ResponseError::Malformed`] for a body of another shape (no
/// `id`, `model`, `output` or `usage`, an item of a known type missing a field, a message
/// part of an undocumented type); [`ResponseError::UnrepresentableBlock`];
/// [`ResponseError::EmptyAnswer`].
pub fn decode_responses(
    body: &str,
    provider: &str,
    message_id: Option<&str>,
) -> Result<Answer, ResponseError> {
    let body: Body = serde_json::from_str(body).map_err(|e| ResponseError::json(BODY, e))?;
    body.check_failed()?;
    let output = body
        .output
        .clone()
        .ok_or_else(|| ResponseError::malformed(BODY, Malformation::Missing("output")))?;
    finished(body, output, provider, message_id, BODY)
}

/// The response object, as a body or as the `response` of a stream's lifecycle event.
#[derive(Clone, Debug, Default, Deserialize)]
struct Body {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    output: Option<Vec<Item>>,
    #[serde(default)]
    usage: Option<ResponsesUsage>,
    #[serde(default)]
    error: Option<ProviderError>,
    #[serde(default)]
    incomplete_details: Option<IncompleteDetails>,
}

#[derive(Clone, Debug, Deserialize)]
struct IncompleteDetails {
    #[serde(default)]
    reason: Option<String>,
}

impl Body {
    /// An error body, or a response that failed, as the provider's error.
    fn check_failed(&self) -> Result<(), ResponseError> {
        if let Some(error) = &self.error {
            return Err(error.clone().into_error());
        }
        if self.status.as_deref() == Some("failed") {
            return Err(ResponseError::Provider {
                error_type: "failed".to_owned(),
                message: "the response failed without an error object".to_owned(),
            });
        }
        Ok(())
    }
}

/// The answer of a finished response whose items are `output`.
fn finished(
    body: Body,
    output: Vec<Item>,
    provider: &str,
    message_id: Option<&str>,
    context: &str,
) -> Result<Answer, ResponseError> {
    let id = body
        .id
        .ok_or_else(|| ResponseError::malformed(context, Malformation::NotAString("id")))?;
    let model = body
        .model
        .ok_or_else(|| ResponseError::malformed(context, Malformation::NotAString("model")))?;
    let mut seen = Seen::default();
    let mut content = Vec::with_capacity(output.len());
    for (index, item) in output.into_iter().enumerate() {
        push_item(index, item, &mut content, &mut seen)?;
    }
    let usage = body
        .usage
        .ok_or_else(|| ResponseError::malformed(context, Malformation::Missing("usage")))?
        .normalize(context)?;
    let stop_reason = match body.status.as_deref() {
        Some("incomplete") => StopReason::Incomplete {
            reason: body.incomplete_details.and_then(|d| d.reason),
        },
        _ if seen.calls => StopReason::ToolCalls,
        _ if seen.refusal => StopReason::Refusal,
        Some("completed") | None => StopReason::Completed,
        Some(other) => StopReason::Other(other.to_owned()),
    };
    Ok(Answer {
        message: assistant_message(message_id.unwrap_or(&id), content, provider, &model)?,
        response_id: id,
        model,
        usage: Some(usage),
        stop_reason: Some(stop_reason),
        stop_sequence: None,
        diagnostics: None,
        input_transformations: None,
        invalid_tool_calls: Vec::new(),
    }
    .listing_invalid_calls())
}

/// What the items held that decides the stop reason.
#[derive(Default)]
struct Seen {
    calls: bool,
    refusal: bool,
    /// Whether the latest `phase` marker set one ([decision
    /// 141](crate::manual::decisions#decision-141)).
    phase: bool,
}

fn string_field(item: &Item, field: &'static str, context: &str) -> Result<String, ResponseError> {
    match item.get(field) {
        Some(Value::String(s)) => Ok(s.clone()),
        _ => Err(ResponseError::malformed(
            context,
            Malformation::NotAString(field),
        )),
    }
}

/// The blocks of one output item (see the module doc).
fn push_item(
    index: usize,
    mut item: Item,
    out: &mut Vec<ContentBlock>,
    seen: &mut Seen,
) -> Result<(), ResponseError> {
    let context = format!("output item {index}");
    let kind = string_field(&item, "type", &context)?;
    match kind.as_str() {
        "message" => {
            if let Some(role) = item.get("role")
                && role != "assistant"
            {
                return Err(ResponseError::malformed(
                    context,
                    Malformation::MessageRole(role.to_string()),
                ));
            }
            let parts = match item.shift_remove("content") {
                Some(Value::Array(parts)) => parts,
                _ => {
                    return Err(ResponseError::malformed(
                        context,
                        Malformation::ContentNotArray,
                    ));
                }
            };
            // The item's `phase`, as a marker before its text (decision 141); a message
            // without one after one with it gets a marker that clears it.
            match item.get("phase").filter(|p| !p.is_null()) {
                Some(phase) => {
                    let marker = serde_json::json!({"type": "phase", "phase": phase});
                    out.push(unknown_block(out.len(), marker)?);
                    seen.phase = true;
                }
                None if seen.phase => {
                    let marker = serde_json::json!({"type": "phase", "phase": null});
                    out.push(unknown_block(out.len(), marker)?);
                    seen.phase = false;
                }
                None => {}
            }
            for (j, part) in parts.into_iter().enumerate() {
                let context = format!("{context}, part {j}");
                match part.get("type").and_then(Value::as_str) {
                    Some("output_text") => match part.get("text") {
                        Some(Value::String(text)) if text.is_empty() => {}
                        Some(Value::String(text)) => out.push(ContentBlock::text(text.clone())),
                        _ => {
                            return Err(ResponseError::malformed(
                                context,
                                Malformation::NotAString("text"),
                            ));
                        }
                    },
                    Some("refusal") => {
                        if !part.get("refusal").is_some_and(Value::is_string) {
                            return Err(ResponseError::malformed(
                                context,
                                Malformation::NotAString("refusal"),
                            ));
                        }
                        seen.refusal = true;
                        out.push(unknown_block(out.len(), part)?);
                    }
                    other => {
                        return Err(ResponseError::malformed(
                            context,
                            Malformation::UndocumentedPart(other.map(str::to_owned)),
                        ));
                    }
                }
            }
        }
        "function_call" => {
            let name = string_field(&item, "name", &context)?;
            let id = string_field(&item, "call_id", &context)?;
            let arguments = string_field(&item, "arguments", &context)?;
            // The log's own check: the one way to build a call refuses an empty name.
            let call = ContentBlock::tool_call(id, name, arguments).map_err(|_| {
                ResponseError::malformed(&context, Malformation::EmptyToolName("name"))
            })?;
            seen.calls = true;
            out.push(call);
        }
        "reasoning" => {
            item.shift_remove("type");
            let mut texts = Vec::new();
            match item.get("summary") {
                None | Some(Value::Null) => {}
                Some(Value::Array(parts)) => {
                    for part in parts {
                        match part.get("text") {
                            Some(Value::String(text)) => texts.push(text.as_str()),
                            _ => {
                                return Err(ResponseError::malformed(
                                    context,
                                    Malformation::SummaryPartWithoutText,
                                ));
                            }
                        }
                    }
                }
                Some(_) => {
                    return Err(ResponseError::malformed(
                        context,
                        Malformation::SummaryNotArray,
                    ));
                }
            }
            let text = texts.join("\n\n");
            out.push(reasoning(text, item));
        }
        _ => {
            let block = unknown_block(out.len(), Value::Object(item.into_iter().collect()))?;
            out.push(block);
        }
    }
    Ok(())
}

/// A Responses-API stream, decoded as its events arrive.
///
/// Feed it events ([`push_event`](Self::push_event): the event type and its `data:` JSON), or
/// raw SSE text ([`push_text`](Self::push_text), [`push_line`](Self::push_line)), then call
/// [`finish`](Self::finish). The answer equals what [`decode_responses`] makes of the same
/// response's body. Once an event is refused, every later call fails with
/// [`ResponseError::Failed`].
///
/// ```
/// use mektpoy::response::ResponsesStream;
///
/// let mut stream = ResponsesStream::new("openai", None);
/// for (event, data) in [
///     ("response.created", r#"{"type":"response.created","response":{"id":"resp_1","model":"gpt-5.5","status":"in_progress","output":[]}}"#),
///     ("response.output_item.added", r#"{"type":"response.output_item.added","output_index":0,"item":{"type":"function_call","id":"fc_1","call_id":"call_1","name":"read","arguments":""}}"#),
///     ("response.function_call_arguments.delta", r#"{"type":"response.function_call_arguments.delta","output_index":0,"delta":"{\"path\":"}"#),
///     ("response.function_call_arguments.delta", r#"{"type":"response.function_call_arguments.delta","output_index":0,"delta":"\"a.rs\"}"}"#),
///     ("response.completed", r#"{"type":"response.completed","response":{"id":"resp_1","model":"gpt-5.5","status":"completed","output":[],"usage":{"input_tokens":2048,"input_tokens_details":{"cached_tokens":1024},"output_tokens":9,"output_tokens_details":{"reasoning_tokens":0}}}}"#),
/// ] {
///     stream.push_event(event, data)?;
/// }
/// let answer = stream.finish()?;
/// assert_eq!(answer.usage.unwrap().cache_read_tokens, Some(1024));
/// assert_eq!(answer.stop_reason.unwrap().as_str(), "tool_calls");
/// # Ok::<(), mektpoy::response::ResponseError>(())
/// ```
#[derive(Debug)]
pub struct ResponsesStream {
    provider: String,
    message_id: Option<String>,
    framer: Framer,
    head: Option<Body>,
    slots: Vec<Slot>,
    end: Option<Body>,
    failed: bool,
}

/// An output item as streamed so far.
#[derive(Debug)]
struct Slot {
    added: Item,
    done: Option<Item>,
    parts: BTreeMap<u64, Part>,
    arguments: Option<String>,
    summary: BTreeMap<u64, String>,
}

/// A message part as streamed so far: its `content_part.added` part (or a bare one), the
/// deltas, and what its `done` events said.
#[derive(Debug, Default)]
struct Part {
    part: Item,
    deltas: String,
    done: Option<String>,
    closed: Option<Item>,
}

#[derive(Deserialize)]
struct Event {
    #[serde(default)]
    response: Option<Body>,
    #[serde(default)]
    output_index: Option<u64>,
    #[serde(default)]
    content_index: Option<u64>,
    #[serde(default)]
    summary_index: Option<u64>,
    #[serde(default)]
    item: Option<Item>,
    #[serde(default)]
    part: Option<Item>,
    #[serde(default)]
    delta: Option<String>,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    refusal: Option<String>,
    #[serde(default)]
    arguments: Option<String>,
    #[serde(default)]
    code: Option<Value>,
    #[serde(default)]
    message: Option<String>,
}

#[derive(Deserialize)]
struct EventKind {
    #[serde(rename = "type")]
    kind: String,
}

/// Which text of a message part an event carries.
#[derive(Clone, Copy)]
enum PartText {
    Output,
    Refusal,
}

impl PartText {
    fn part_type(self) -> &'static str {
        match self {
            PartText::Output => "output_text",
            PartText::Refusal => "refusal",
        }
    }

    fn field(self) -> &'static str {
        match self {
            PartText::Output => "text",
            PartText::Refusal => "refusal",
        }
    }
}

impl ResponsesStream {
    /// A stream from `provider`'s Responses endpoint; the message id is `message_id` when
    /// given, else the response's `id` (from `response.created`).
    ///
    /// ```
    /// use mektpoy::response::ResponsesStream;
    /// let mut stream = ResponsesStream::new("openai", Some("a1"));
    /// stream.push_event("response.completed", r#"{"type":"response.completed","response":{"id":"resp_1","model":"gpt-5.4","status":"completed","output":[{"type":"message","id":"m1","role":"assistant","content":[{"type":"output_text","text":"Hi"}]}],"usage":{"input_tokens":5,"output_tokens":1}}}"#)?;
    /// assert_eq!(stream.finish()?.message.id(), "a1");
    /// # Ok::<(), mektpoy::response::ResponseError>(())
    /// ```
    pub fn new(provider: &str, message_id: Option<&str>) -> Self {
        ResponsesStream {
            provider: provider.to_owned(),
            message_id: message_id.map(str::to_owned),
            framer: Framer::default(),
            head: None,
            slots: Vec::new(),
            end: None,
            failed: false,
        }
    }

    /// One event: its type (the `event:` field, or the data's own `type`) and its data.
    ///
    /// ```
    /// use mektpoy::response::{ResponseError, ResponsesStream};
    /// let mut stream = ResponsesStream::new("openai", None);
    /// stream.push_event("response.queued_new_kind", r#"{"type":"response.queued_new_kind"}"#)?; // unknown: ignored
    /// assert!(matches!(stream.push_event("response.created", "{"), Err(ResponseError::Json { .. })));
    /// # Ok::<(), ResponseError>(())
    /// ```
    ///
    /// # Errors
    /// [`ResponseError::Provider`] for an `error` event or `response.failed`;
    /// [`ResponseError::Json`] for an event of another shape; [`ResponseError::NotStarted`]
    /// for an item event before `response.created`; [`ResponseError::BlockOutOfOrder`],
    /// [`ResponseError::UnknownIndex`], [`ResponseError::BlockStopped`],
    /// [`ResponseError::UnexpectedDelta`] for item events that do not fit;
    /// [`ResponseError::AfterEnd`] after the terminal event; [`ResponseError::Failed`] after
    /// any of these.
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
    /// use mektpoy::response::ResponsesStream;
    /// let mut stream = ResponsesStream::new("openai", None);
    /// for line in [
    ///     "event: response.completed",
    ///     r#"data: {"type":"response.completed","response":{"id":"resp_1","model":"gpt-5.4","status":"completed","output":[{"type":"message","id":"m1","role":"assistant","content":[{"type":"output_text","text":"Hi"}]}],"usage":{"input_tokens":5,"output_tokens":1}}}"#,
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

    /// SSE text as it arrives, split anywhere.
    ///
    /// ```
    /// use mektpoy::response::ResponsesStream;
    /// let sse = concat!(
    ///     "event: response.completed\n",
    ///     r#"data: {"type":"response.completed","response":{"id":"resp_1","model":"gpt-5.4","status":"completed","output":[{"type":"message","id":"m1","role":"assistant","content":[{"type":"output_text","text":"Hi"}]}],"usage":{"input_tokens":5,"output_tokens":1}}}"#,
    ///     "\n\n",
    /// );
    /// let mut stream = ResponsesStream::new("openai", None);
    /// let (a, b) = sse.split_at(30);
    /// stream.push_text(a)?;
    /// stream.push_text(b)?;
    /// assert_eq!(stream.finish()?.usage.unwrap().prompt_tokens, 5);
    /// # Ok::<(), mektpoy::response::ResponseError>(())
    /// ```
    ///
    /// # Errors
    /// As [`push_event`](Self::push_event), for the first refused event the text completes.
    pub fn push_text(&mut self, text: &str) -> Result<(), ResponseError> {
        if self.failed {
            return Err(ResponseError::Failed);
        }
        for frame in self.framer.text(text) {
            self.frame(frame)?;
        }
        Ok(())
    }

    /// The answer, once `response.completed` or `response.incomplete` came.
    ///
    /// ```
    /// use mektpoy::response::{ResponseError, ResponsesStream};
    /// let mut stream = ResponsesStream::new("openai", None);
    /// stream.push_event("response.created", r#"{"type":"response.created","response":{"id":"resp_1","model":"gpt-5.4","status":"in_progress","output":[]}}"#)?;
    /// assert!(matches!(stream.finish(), Err(ResponseError::CutOff { .. })), "no response.completed");
    /// # Ok::<(), ResponseError>(())
    /// ```
    ///
    /// # Errors
    /// [`ResponseError::CutOff`] without a terminal event (or when SSE text ends inside an
    /// event that is not JSON); [`ResponseError::Malformed`] when the responses named no `id`,
    /// `model` or `usage`, or an item lacks a field; [`ResponseError::EmptyAnswer`];
    /// [`ResponseError::Failed`] after a refused event.
    pub fn finish(mut self) -> Result<Answer, ResponseError> {
        if let Some(frame) = self.framer.end()
            && let Err(error) = self.frame(frame)
        {
            return Err(super::messages::torn(error));
        }
        if self.failed {
            return Err(ResponseError::Failed);
        }
        let Some(mut end) = self.end else {
            return Err(ResponseError::CutOff {
                missing: MissingPart::Event("response.completed"),
            });
        };
        if let Some(head) = self.head {
            end.id = end.id.or(head.id);
            end.model = end.model.or(head.model);
        }
        let output = if self.slots.is_empty() {
            end.output.clone().unwrap_or_default()
        } else {
            self.slots.into_iter().map(Slot::item).collect()
        };
        finished(
            end,
            output,
            &self.provider,
            self.message_id.as_deref(),
            "stream",
        )
    }

    fn frame(&mut self, (event, data): super::sse::Frame) -> Result<(), ResponseError> {
        let kind = match event {
            Some(event) => event,
            None => match serde_json::from_str::<EventKind>(&data) {
                Ok(kind) => kind.kind,
                Err(e) => {
                    self.failed = true;
                    return Err(ResponseError::json("event without a type", e));
                }
            },
        };
        self.push_event(&kind, &data)
    }

    fn event(&mut self, event: &str, data: &str) -> Result<(), ResponseError> {
        let context = || format!("`{event}` event");
        let e: Event = serde_json::from_str(data).map_err(|e| ResponseError::json(context(), e))?;
        if event == "error" {
            return Err(ProviderError {
                error_type: None,
                message: e.message,
                code: e.code,
            }
            .into_error());
        }
        if self.end.is_some() {
            return Err(ResponseError::AfterEnd {
                event: event.to_owned(),
            });
        }
        let response = || {
            e.response.clone().ok_or_else(|| {
                ResponseError::malformed(context(), Malformation::Missing("response"))
            })
        };
        match event {
            "response.created" | "response.in_progress" | "response.queued" => {
                let head = response()?;
                head.check_failed()?;
                self.head = Some(head);
                return Ok(());
            }
            "response.completed" | "response.incomplete" | "response.failed" => {
                let end = response()?;
                end.check_failed()?;
                if event == "response.failed" {
                    return Err(ResponseError::Provider {
                        error_type: "failed".to_owned(),
                        message: "the response failed without an error object".to_owned(),
                    });
                }
                self.end = Some(end);
                return Ok(());
            }
            _ => {}
        }
        let item_event = event.starts_with("response.output_item.")
            || event.starts_with("response.content_part.")
            || event.starts_with("response.output_text.")
            || event.starts_with("response.refusal.")
            || event.starts_with("response.function_call_arguments.")
            || event.starts_with("response.reasoning_summary_");
        if !item_event {
            // Other events (annotations, built-in tools' progress, keep-alives) carry nothing the
            // log keeps, and an added event type must not break an old decoder.
            return Ok(());
        }
        if self.head.is_none() {
            return Err(ResponseError::NotStarted {
                event: event.to_owned(),
            });
        }
        let index = e.output_index.ok_or_else(|| {
            ResponseError::malformed(context(), Malformation::Missing("output_index"))
        })?;
        if event == "response.output_item.added" {
            let expected = self.slots.len();
            if usize::try_from(index).ok() != Some(expected) {
                return Err(ResponseError::BlockOutOfOrder { index, expected });
            }
            let added = e.item.ok_or_else(|| {
                ResponseError::malformed(context(), Malformation::Missing("item"))
            })?;
            string_field(&added, "type", &context())?;
            self.slots.push(Slot {
                added,
                done: None,
                parts: BTreeMap::new(),
                arguments: None,
                summary: BTreeMap::new(),
            });
            return Ok(());
        }
        let slot = usize::try_from(index)
            .ok()
            .and_then(|i| self.slots.get_mut(i))
            .ok_or(ResponseError::UnknownIndex { index })?;
        if slot.done.is_some() {
            return Err(ResponseError::BlockStopped {
                index: index as usize,
            });
        }
        let item_type = slot.added.get("type").and_then(Value::as_str).unwrap_or("");
        let needs = |wanted: &str| {
            if item_type == wanted {
                Ok(())
            } else {
                Err(ResponseError::UnexpectedDelta {
                    index: index as usize,
                    delta_type: event.to_owned(),
                    block_type: item_type.to_owned(),
                })
            }
        };
        let content_index = || {
            e.content_index.ok_or_else(|| {
                ResponseError::malformed(context(), Malformation::Missing("content_index"))
            })
        };
        let summary_index = || {
            e.summary_index.ok_or_else(|| {
                ResponseError::malformed(context(), Malformation::Missing("summary_index"))
            })
        };
        let text = |value: Option<String>, field: &'static str| {
            value
                .ok_or_else(|| ResponseError::malformed(context(), Malformation::NotAString(field)))
        };
        match event {
            "response.output_item.done" => {
                slot.done = Some(e.item.ok_or_else(|| {
                    ResponseError::malformed(context(), Malformation::Missing("item"))
                })?);
            }
            "response.content_part.added" | "response.content_part.done" => {
                needs("message")?;
                let part = e.part.ok_or_else(|| {
                    ResponseError::malformed(context(), Malformation::Missing("part"))
                })?;
                let entry = slot.parts.entry(content_index()?).or_default();
                if event.ends_with("added") {
                    entry.part = part;
                } else {
                    entry.closed = Some(part);
                }
            }
            "response.output_text.delta" | "response.refusal.delta" => {
                needs("message")?;
                let which = if event.starts_with("response.output_text") {
                    PartText::Output
                } else {
                    PartText::Refusal
                };
                let delta = text(e.delta, "delta")?;
                slot.part(content_index()?, which).deltas.push_str(&delta);
            }
            "response.output_text.done" => {
                needs("message")?;
                let done = text(e.text, "text")?;
                slot.part(content_index()?, PartText::Output).done = Some(done);
            }
            "response.refusal.done" => {
                needs("message")?;
                let done = text(e.refusal, "refusal")?;
                slot.part(content_index()?, PartText::Refusal).done = Some(done);
            }
            "response.function_call_arguments.delta" => {
                needs("function_call")?;
                let delta = text(e.delta, "delta")?;
                slot.arguments
                    .get_or_insert_with(String::new)
                    .push_str(&delta);
            }
            "response.function_call_arguments.done" => {
                needs("function_call")?;
                slot.arguments = Some(text(e.arguments, "arguments")?);
            }
            "response.reasoning_summary_text.delta" => {
                needs("reasoning")?;
                let delta = text(e.delta, "delta")?;
                slot.summary
                    .entry(summary_index()?)
                    .or_default()
                    .push_str(&delta);
            }
            "response.reasoning_summary_text.done" => {
                needs("reasoning")?;
                let done = text(e.text, "text")?;
                slot.summary.insert(summary_index()?, done);
            }
            "response.reasoning_summary_part.added" | "response.reasoning_summary_part.done" => {
                needs("reasoning")?;
                slot.summary.entry(summary_index()?).or_default();
            }
            // Other item events (`output_text.annotation.added`, ...) carry nothing kept.
            _ => {}
        }
        Ok(())
    }
}

impl Slot {
    /// The part at `index`, opened bare when no `content_part.added` came.
    fn part(&mut self, index: u64, which: PartText) -> &mut Part {
        self.parts.entry(index).or_insert_with(|| Part {
            part: Item::from_iter([("type".to_owned(), Value::from(which.part_type()))]),
            ..Part::default()
        })
    }

    /// The item: what `output_item.done` said, else the `added` item with its deltas.
    fn item(self) -> Item {
        if let Some(done) = self.done {
            return done;
        }
        let mut item = self.added;
        match item.get("type").and_then(Value::as_str) {
            Some("message") if !self.parts.is_empty() => {
                let parts = self.parts.into_values().map(Part::value).collect();
                item.insert("content".to_owned(), Value::Array(parts));
            }
            Some("function_call") => {
                if let Some(arguments) = self.arguments {
                    item.insert("arguments".to_owned(), Value::String(arguments));
                }
            }
            Some("reasoning") if !self.summary.is_empty() => {
                let summary = self
                    .summary
                    .into_values()
                    .map(|text| serde_json::json!({"type": "summary_text", "text": text}))
                    .collect();
                item.insert("summary".to_owned(), Value::Array(summary));
            }
            _ => {}
        }
        item
    }
}

impl Part {
    /// The part: what `content_part.done` said, else the opened part with its text.
    fn value(self) -> Value {
        if let Some(closed) = self.closed {
            return Value::Object(closed.into_iter().collect());
        }
        let mut part = self.part;
        let field = match part.get("type").and_then(Value::as_str) {
            Some("refusal") => PartText::Refusal.field(),
            _ => PartText::Output.field(),
        };
        let text = self.done.unwrap_or(self.deltas);
        part.insert(field.to_owned(), Value::String(text));
        Value::Object(part.into_iter().collect())
    }
}
