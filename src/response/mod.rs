//! Provider responses decoded: the way back from a response body (or its event stream) to the
//! assistant [`Message`] the log records, with what the request cost ([`Usage`]).
//!
//! The glue every loop wrote by hand (walk `content`, rebuild reasoning blocks, re-encode tool
//! inputs) got the one thing that matters wrong in small ways: a tool input re-encoded from a
//! parsed value is not the text the provider sent, and a signature copied into the wrong field
//! is never sent back. Here each block is decoded the way the serializers send it back:
//!
//! | response block | log block |
//! |---|---|
//! | Messages `text` | [`ContentBlock::Text`] (citations are not kept) |
//! | Messages `thinking` | [`ContentBlock::Reasoning`], `signature` (and any other field) in `extra` |
//! | Messages `tool_use` | [`ContentBlock::ToolCall`], `arguments` = the text of `input` as received |
//! | Messages `redacted_thinking`, any other type | kept verbatim as an unknown block |
//! | chat `reasoning_content` (DeepSeek) | [`ContentBlock::Reasoning`] without a signature |
//! | chat `content` | [`ContentBlock::Text`] |
//! | chat `tool_calls[]` | [`ContentBlock::ToolCall`], `arguments` = `function.arguments` as received |
//! | Responses `message` `output_text` parts | [`ContentBlock::Text`] |
//! | Responses `refusal` parts, any other output item type | kept verbatim as unknown blocks |
//! | Responses `function_call` | [`ContentBlock::ToolCall`], `id` = `call_id`, `arguments` as received |
//! | Responses `reasoning` | [`ContentBlock::Reasoning`], summary as text, `id`, `summary`, `encrypted_content` (every field but `type`) in `extra` |
//!
//! Everything is pure: bodies and events go in as text, an [`Answer`] comes out. The streams
//! ([`MessagesStream`], [`ChatStream`], [`ResponsesStream`]) are push-based accumulators the
//! caller feeds from whatever transport it has.
//!
//! # Vendor pages
//!
//! Each shape was encoded from the vendor's text, all read 2026-12-01. Where the stored copy
//! of a vendor page held only its navigation, the text was read in the vendor's own generated
//! SDK types (which quote the API reference) or in copies of the page; that is said below.
//! - Messages response (`id`, `model`, `content`, `stop_reason` values, `usage`, `diagnostics`,
//!   `input_transformations`): <https://platform.claude.com/docs/en/api/beta/messages.md>
//!   (beta names, `cache-diagnosis-2026-04-07` among them), and the fields' text in the
//!   vendor's OpenAPI-generated types of `anthropics/anthropic-sdk-python`: `types/usage.py`,
//!   `types/stop_reason.py`, `types/beta/beta_message.py`, `beta_raw_message_delta_event.py`,
//!   `beta_diagnostics.py`, `beta_cache_miss_*.py`, `beta_input_transformation.py`,
//!   `beta_thinking_dropped_input_transformation.py`,
//!   `beta_thinking_mismatch_allowed_input_transformation.py`.
//! - Messages streaming (event order, `text_delta`, `thinking_delta`, `signature_delta`,
//!   `input_json_delta`, `ping`, `error`):
//!   <https://platform.claude.com/docs/en/build-with-claude/streaming>, its examples read in
//!   copies of the page.
//! - Cache diagnostics (`diagnostics.cache_miss_reason`, `cache_missed_input_tokens`, `null`
//!   while pending): <https://platform.claude.com/docs/en/build-with-claude/cache-diagnostics>.
//! - DeepSeek's Anthropic-compatible endpoint (same request and response shapes, its field
//!   support table): <https://api-docs.deepseek.com/guides/anthropic_api>.
//! - DeepSeek chat: `reasoning_content` next to `content`
//!   (<https://api-docs.deepseek.com/guides/thinking_mode>); context caching
//!   (<https://api-docs.deepseek.com/guides/kv_cache>), with the usage field names
//!   `prompt_cache_hit_tokens` / `prompt_cache_miss_tokens` read in captured DeepSeek responses.
//! - OpenAI-compatible chat (`choices[].delta`, `tool_calls[].index`, `finish_reason` values,
//!   `stream_options.include_usage`, `prompt_tokens_details.cached_tokens`):
//!   <https://platform.openai.com/docs/api-reference/chat>, read in copies of the reference
//!   text (the page itself was not stored).
//! - OpenAI's Responses API, read 2026-12-06: the response object, output items, streaming
//!   events and error event in the reference's generated types, the streaming guide
//!   (<https://developers.openai.com/api/docs/guides/streaming-responses>) and the
//!   prompt-caching guide (<https://developers.openai.com/api/docs/guides/prompt-caching>);
//!   the `responses` module says which page gave what.
//!
//! The usage arithmetic per vendor is on [`Usage`]; `docs/responses.md` has the whole design.

use std::fmt;

use serde::Deserialize;
use serde_json::Value;

use crate::vocab::{ContentBlock, Message, MessageSource, Role};
use crate::wire::{ArgumentsFault, arguments_fault};

mod chat;
mod messages;
mod responses;
mod sse;
mod usage;

pub use chat::{ChatStream, decode_chat};
pub use messages::{MessagesStream, decode_messages};
pub use responses::{ResponsesStream, decode_responses};
pub use usage::{CacheCreation, Usage};

/// A decoded answer: the assistant message to append to the log and what the response said
/// about it.
///
/// The message's source is `{"kind":"model","provider":<the caller's provider>,"model":<the
/// response's model>}`: the serializer sends signed reasoning back only to the provider that
/// produced it, so the provider must be the route's, not whatever the response calls itself.
///
/// ```
/// use mektpoy::response::{StopReason, decode_messages};
/// let body = r#"{"id":"msg_1","type":"message","role":"assistant","model":"claude-fable-5-1",
///   "content":[{"type":"text","text":"Hi"}],"stop_reason":"end_turn",
///   "usage":{"input_tokens":10,"cache_read_input_tokens":2048,"output_tokens":2}}"#;
/// let answer = decode_messages(body, "anthropic", Some("a1"))?;
/// assert_eq!((answer.message.id(), answer.response_id.as_str()), ("a1", "msg_1"));
/// assert_eq!(answer.stop_reason, Some(StopReason::EndTurn));
/// assert_eq!(answer.usage.unwrap().prompt_tokens, 2058);
/// assert!(answer.invalid_tool_calls.is_empty());
/// # Ok::<(), mektpoy::response::ResponseError>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Answer {
    /// The assistant message, never empty (an answer without content is refused).
    pub message: Message,
    /// The response's own `id` (the message id unless the caller gave one).
    pub response_id: String,
    /// The model that answered, as the response names it.
    pub model: String,
    /// The request's usage; `None` only for a chat stream without the usage chunk
    /// (`stream_options.include_usage` not set).
    pub usage: Option<Usage>,
    /// Why the model stopped, when the response says.
    pub stop_reason: Option<StopReason>,
    /// The custom stop sequence that ended the answer (Messages API).
    pub stop_sequence: Option<String>,
    /// Anthropic's cache diagnostics, when the request asked for them and a comparison
    /// reported something (`null` and absent both decode to `None`).
    pub diagnostics: Option<CacheDiagnostics>,
    /// Anthropic's `input_transformations`: what the provider changed in the request's input
    /// (thinking it dropped). `None` when the response has no such field.
    pub input_transformations: Option<Vec<InputTransformation>>,
    /// The tool calls of [`message`](Self::message) whose arguments are not what a tool can
    /// take ([`arguments_fault`]), in order. The message keeps
    /// them as the model sent them (refusing the answer would lose it, and the log must hold
    /// what the model said); answer each with an error tool result instead of running it.
    pub invalid_tool_calls: Vec<InvalidToolCall>,
}

/// A tool call of an answer whose arguments fail [`arguments_fault`]
/// ([`Answer::invalid_tool_calls`]).
///
/// ```
/// use mektpoy::response::decode_chat;
/// use mektpoy::wire::ArgumentsFault;
/// let body = r#"{"id":"r1","model":"acme-1","choices":[{"index":0,"message":{"role":"assistant",
///   "tool_calls":[{"id":"c1","type":"function","function":{"name":"read","arguments":"{\"path\":"}}]},
///   "finish_reason":"length"}]}"#;
/// let answer = decode_chat(body, "acme", None)?;
/// let invalid = &answer.invalid_tool_calls[0];
/// assert_eq!(invalid.call_id, "c1");
/// assert!(matches!(invalid.fault, ArgumentsFault::NotJson { end_of_input: true, .. }));
/// # Ok::<(), mektpoy::response::ResponseError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct InvalidToolCall {
    /// The call's id.
    pub call_id: String,
    /// The tool the call names.
    pub name: String,
    /// What is wrong with its arguments.
    pub fault: ArgumentsFault,
}

/// An answer's tool calls whose arguments cannot be run.
///
/// ```
/// use mektpoy::response::decode_chat;
/// let body = r#"{"id":"r1","model":"acme-1","choices":[{"index":0,"message":{"role":"assistant",
///   "tool_calls":[{"id":"c1","type":"function","function":{"name":"read","arguments":"[1]"}}]},
///   "finish_reason":"tool_calls"}]}"#;
/// let answer = decode_chat(body, "acme", None)?;
/// assert_eq!(answer.message.tool_calls().count(), 1, "the message keeps the call as sent");
/// assert_eq!(answer.invalid_tool_calls[0].name, "read");
/// # Ok::<(), mektpoy::response::ResponseError>(())
/// ```
impl Answer {
    /// Fills [`invalid_tool_calls`](Self::invalid_tool_calls) from the message.
    fn listing_invalid_calls(mut self) -> Self {
        self.invalid_tool_calls = self
            .message
            .content()
            .iter()
            .filter_map(ContentBlock::as_tool_call)
            .filter_map(|call| {
                arguments_fault(call.arguments()).map(|fault| InvalidToolCall {
                    call_id: call.id().to_owned(),
                    name: call.name().to_owned(),
                    fault,
                })
            })
            .collect();
        self
    }
}

/// Why the model stopped, in the vendor's own terms: the two APIs do not mean the same thing
/// by their values, so they are not merged.
///
/// ```
/// use mektpoy::response::{StopReason, decode_chat};
/// let body = r#"{"id":"r1","model":"acme-1","choices":[{"index":0,"message":{"role":"assistant",
///   "content":"cut"},"finish_reason":"length"}]}"#;
/// assert_eq!(decode_chat(body, "acme", None)?.stop_reason, Some(StopReason::Length));
/// # Ok::<(), mektpoy::response::ResponseError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StopReason {
    /// Messages `end_turn`: a natural stopping point.
    EndTurn,
    /// Messages `max_tokens`: the requested or the model's maximum was reached.
    MaxTokens,
    /// Messages `stop_sequence`: a custom stop sequence was generated.
    StopSequence,
    /// Messages `tool_use`: the model called tools.
    ToolUse,
    /// Messages `pause_turn`: a long turn was paused; send the answer back to continue.
    PauseTurn,
    /// Messages `refusal`; also a complete Responses answer without a function call that holds
    /// a `refusal` content part.
    Refusal,
    /// Messages `model_context_window_exceeded`.
    ModelContextWindowExceeded,
    /// Chat `stop`: a natural stop point or a stop sequence.
    Stop,
    /// Chat `length`: the token limit was reached.
    Length,
    /// Chat `tool_calls`: the model called tools. Also a Responses answer that is complete and
    /// holds a `function_call` item.
    ToolCalls,
    /// Chat `content_filter`: content was omitted by a filter.
    ContentFilter,
    /// Responses `status: "completed"`, with neither a function call nor a refusal.
    Completed,
    /// Responses `status: "incomplete"`, with `incomplete_details.reason` (the API names
    /// `max_output_tokens` and `content_filter`). It takes precedence over tool calls: a call
    /// cut off is not a call to run blindly.
    Incomplete {
        /// `incomplete_details.reason`, when given.
        reason: Option<String>,
    },
    /// Any other value, kept as sent.
    Other(String),
}

/// Spelling a stop reason.
///
/// ```
/// use mektpoy::response::StopReason;
/// assert_eq!(StopReason::Incomplete { reason: Some("max_output_tokens".into()) }.as_str(), "incomplete");
/// ```
impl StopReason {
    fn messages(value: &str) -> Self {
        match value {
            "end_turn" => StopReason::EndTurn,
            "max_tokens" => StopReason::MaxTokens,
            "stop_sequence" => StopReason::StopSequence,
            "tool_use" => StopReason::ToolUse,
            "pause_turn" => StopReason::PauseTurn,
            "refusal" => StopReason::Refusal,
            "model_context_window_exceeded" => StopReason::ModelContextWindowExceeded,
            other => StopReason::Other(other.to_owned()),
        }
    }

    fn chat(value: &str) -> Self {
        match value {
            "stop" => StopReason::Stop,
            "length" => StopReason::Length,
            "tool_calls" => StopReason::ToolCalls,
            "content_filter" => StopReason::ContentFilter,
            other => StopReason::Other(other.to_owned()),
        }
    }

    /// The wire spelling.
    ///
    /// ```
    /// use mektpoy::response::StopReason;
    /// assert_eq!(StopReason::ToolUse.as_str(), "tool_use");
    /// assert_eq!(StopReason::Other("paused".into()).to_string(), "paused");
    /// ```
    pub fn as_str(&self) -> &str {
        match self {
            StopReason::EndTurn => "end_turn",
            StopReason::MaxTokens => "max_tokens",
            StopReason::StopSequence => "stop_sequence",
            StopReason::ToolUse => "tool_use",
            StopReason::PauseTurn => "pause_turn",
            StopReason::Refusal => "refusal",
            StopReason::ModelContextWindowExceeded => "model_context_window_exceeded",
            StopReason::Stop => "stop",
            StopReason::Length => "length",
            StopReason::ToolCalls => "tool_calls",
            StopReason::ContentFilter => "content_filter",
            StopReason::Completed => "completed",
            StopReason::Incomplete { .. } => "incomplete",
            StopReason::Other(s) => s,
        }
    }
}

impl fmt::Display for StopReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Anthropic's cache diagnostics (generally available since 2026-09-23, before that the beta
/// `cache-diagnosis-2026-04-07`): why the prompt cache could
/// not reuse the prefix of the request named by `diagnostics.previous_message_id`. This is the
/// provider's own answer to the question this crate exists for, so it is kept typed.
///
/// ```
/// use mektpoy::response::{CacheMissKind, decode_messages};
/// let body = r#"{"id":"msg_2","type":"message","role":"assistant","model":"claude-fable-5-1",
///   "content":[{"type":"text","text":"Hi"}],"stop_reason":"end_turn",
///   "usage":{"input_tokens":900,"output_tokens":2},
///   "diagnostics":{"cache_miss_reason":{"type":"system_changed","cache_missed_input_tokens":850}}}"#;
/// let diagnostics = decode_messages(body, "anthropic", None)?.diagnostics.unwrap();
/// let reason = diagnostics.cache_miss_reason.unwrap();
/// assert_eq!((reason.kind, reason.cache_missed_input_tokens), (CacheMissKind::SystemChanged, Some(850)));
/// # Ok::<(), mektpoy::response::ResponseError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct CacheDiagnostics {
    /// The first divergence; `None` while the provider's comparison is still pending (the
    /// response was written before it finished).
    pub cache_miss_reason: Option<CacheMissReason>,
}

/// Where two consecutive requests diverged.
///
/// ```
/// use mektpoy::response::{CacheMissKind, decode_messages};
/// let body = r#"{"id":"msg_2","type":"message","role":"assistant","model":"claude-fable-5-1",
///   "content":[{"type":"text","text":"Hi"}],"usage":{"input_tokens":900,"output_tokens":2},
///   "diagnostics":{"cache_miss_reason":{"type":"previous_message_not_found"}}}"#;
/// let reason = decode_messages(body, "anthropic", None)?.diagnostics.unwrap().cache_miss_reason.unwrap();
/// assert_eq!(reason.kind, CacheMissKind::PreviousMessageNotFound);
/// assert_eq!(reason.cache_missed_input_tokens, None);
/// # Ok::<(), mektpoy::response::ResponseError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct CacheMissReason {
    /// What changed.
    pub kind: CacheMissKind,
    /// The provider's estimate of the input tokens that would have been read from the cache had
    /// the prefix matched (documented for the four `*_changed` kinds).
    pub cache_missed_input_tokens: Option<u64>,
}

/// `cache_miss_reason.type`.
///
/// ```
/// use mektpoy::response::{CacheMissKind, decode_messages};
/// let body = r#"{"id":"msg_2","type":"message","role":"assistant","model":"claude-fable-5-1",
///   "content":[{"type":"text","text":"Hi"}],"usage":{"input_tokens":900,"output_tokens":2},
///   "diagnostics":{"cache_miss_reason":{"type":"ttl_expired"}}}"#;
/// let reason = decode_messages(body, "anthropic", None)?.diagnostics.unwrap().cache_miss_reason.unwrap();
/// assert_eq!(reason.kind, CacheMissKind::Other("ttl_expired".into()), "a type added later, kept");
/// # Ok::<(), mektpoy::response::ResponseError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CacheMissKind {
    /// `model_changed`.
    ModelChanged,
    /// `system_changed`.
    SystemChanged,
    /// `tools_changed`.
    ToolsChanged,
    /// `messages_changed`.
    MessagesChanged,
    /// `previous_message_not_found`: the previous request's fingerprint is gone.
    PreviousMessageNotFound,
    /// `unavailable`: the comparison could not be made.
    Unavailable,
    /// Any other type, kept as sent.
    Other(String),
}

/// A miss kind, as Anthropic's diagnostics report it.
///
/// ```
/// use mektpoy::response::{CacheMissKind, decode_messages};
/// let body = r#"{"id":"m1","type":"message","role":"assistant","model":"claude-fable-5-1",
///   "content":[{"type":"text","text":"Hi"}],"usage":{"input_tokens":9,"output_tokens":2},
///   "diagnostics":{"cache_miss_reason":{"type":"tools_changed"}}}"#;
/// let kind = decode_messages(body, "anthropic", None)?.diagnostics.unwrap().cache_miss_reason.unwrap().kind;
/// assert_eq!(kind, CacheMissKind::ToolsChanged);
/// # Ok::<(), mektpoy::response::ResponseError>(())
/// ```
impl CacheMissKind {
    fn new(value: &str) -> Self {
        match value {
            "model_changed" => CacheMissKind::ModelChanged,
            "system_changed" => CacheMissKind::SystemChanged,
            "tools_changed" => CacheMissKind::ToolsChanged,
            "messages_changed" => CacheMissKind::MessagesChanged,
            "previous_message_not_found" => CacheMissKind::PreviousMessageNotFound,
            "unavailable" => CacheMissKind::Unavailable,
            other => CacheMissKind::Other(other.to_owned()),
        }
    }
}

/// One entry of Anthropic's `input_transformations` (beta
/// `thinking-binding-controls-2026-08-01`): a block of the request the provider changed or
/// flagged before showing the prompt to the model. A dropped thinking block silently changes
/// what the model saw, so a loop should see it.
///
/// ```
/// use mektpoy::response::{BindingCheck, TransformationKind, decode_messages};
/// let body = r#"{"id":"msg_3","type":"message","role":"assistant","model":"claude-fable-5-1",
///   "content":[{"type":"text","text":"Hi"}],"usage":{"input_tokens":9,"output_tokens":2},
///   "input_transformations":[{"type":"thinking_dropped","path":"messages.1.content.0","reason":"prefix_binding_mismatch"}]}"#;
/// let t = &decode_messages(body, "anthropic", None)?.input_transformations.unwrap()[0];
/// assert_eq!((&t.kind, &t.reason), (&TransformationKind::ThinkingDropped, &Some(BindingCheck::Prefix)));
/// # Ok::<(), mektpoy::response::ResponseError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct InputTransformation {
    /// The entry type.
    pub kind: TransformationKind,
    /// Where the block was in the request, `messages.{i}.content.{j}` (wire indices).
    pub path: Option<String>,
    /// Which binding check the block failed.
    pub reason: Option<BindingCheck>,
}

/// Where a transformed block was in the request.
///
/// ```
/// use mektpoy::response::decode_messages;
/// let body = r#"{"id":"m1","type":"message","role":"assistant","model":"claude-fable-5-1",
///   "content":[{"type":"text","text":"Hi"}],"usage":{"input_tokens":9,"output_tokens":2},
///   "input_transformations":[{"type":"thinking_dropped","path":"messages.4.content.2"}]}"#;
/// let t = &decode_messages(body, "anthropic", None)?.input_transformations.unwrap()[0];
/// assert_eq!(t.wire_position(), Some((4, 2)));
/// # Ok::<(), mektpoy::response::ResponseError>(())
/// ```
impl InputTransformation {
    /// `path` as `(i, j)`: the index in the request's wire `messages` and in that message's
    /// `content`.
    ///
    /// ```
    /// use mektpoy::response::decode_messages;
    /// let body = r#"{"id":"msg_3","type":"message","role":"assistant","model":"claude-fable-5-1",
    ///   "content":[{"type":"text","text":"Hi"}],"usage":{"input_tokens":9,"output_tokens":2},
    ///   "input_transformations":[{"type":"thinking_dropped","path":"messages.1.content.0"}]}"#;
    /// let t = &decode_messages(body, "anthropic", None)?.input_transformations.unwrap()[0];
    /// assert_eq!(t.wire_position(), Some((1, 0)));
    /// # Ok::<(), mektpoy::response::ResponseError>(())
    /// ```
    pub fn wire_position(&self) -> Option<(usize, usize)> {
        let rest = self.path.as_deref()?.strip_prefix("messages.")?;
        let (i, rest) = rest.split_once('.')?;
        let j = rest.strip_prefix("content.")?;
        Some((i.parse().ok()?, j.parse().ok()?))
    }
}

/// An `input_transformations` entry type.
///
/// ```
/// use mektpoy::response::{TransformationKind, decode_messages};
/// let body = r#"{"id":"msg_3","type":"message","role":"assistant","model":"claude-fable-5-1",
///   "content":[{"type":"text","text":"Hi"}],"usage":{"input_tokens":9,"output_tokens":2},
///   "input_transformations":[{"type":"thinking_mismatch_allowed","path":"messages.3.content.1"}]}"#;
/// let t = &decode_messages(body, "anthropic", None)?.input_transformations.unwrap()[0];
/// assert_eq!(t.kind, TransformationKind::ThinkingMismatchAllowed);
/// # Ok::<(), mektpoy::response::ResponseError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TransformationKind {
    /// `thinking_dropped`: a `thinking`, `redacted_thinking` or `connector_text` block was removed
    /// from the prompt because it failed a binding check.
    ThinkingDropped,
    /// `thinking_mismatch_allowed`: a block failed the conversation check and was shown to the
    /// model all the same.
    ThinkingMismatchAllowed,
    /// Any other type (the vendor says more may be added), kept as sent.
    Other(String),
}

/// The binding check an `input_transformations` entry names.
///
/// ```
/// use mektpoy::response::{BindingCheck, decode_messages};
/// let body = r#"{"id":"msg_3","type":"message","role":"assistant","model":"claude-fable-5-1",
///   "content":[{"type":"text","text":"Hi"}],"usage":{"input_tokens":9,"output_tokens":2},
///   "input_transformations":[{"type":"thinking_dropped","reason":"model_binding_mismatch"}]}"#;
/// let t = &decode_messages(body, "anthropic", None)?.input_transformations.unwrap()[0];
/// assert_eq!(t.reason, Some(BindingCheck::Model));
/// # Ok::<(), mektpoy::response::ResponseError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BindingCheck {
    /// `model_binding_mismatch`.
    Model,
    /// `prefix_binding_mismatch`: the conversation before the block differs from the one it was
    /// created in.
    Prefix,
    /// `organization_binding_mismatch`.
    Organization,
    /// `end_user_binding_mismatch`.
    EndUser,
    /// Any other value, kept as sent.
    Other(String),
}

/// Everything a response or a stream can be refused for. The input comes from the network:
/// every fault is an error, none a panic.
///
/// ```
/// use mektpoy::response::{ResponseError, decode_chat};
/// assert!(matches!(decode_chat("not json", "acme", None), Err(ResponseError::Json { .. })));
/// let refused = r#"{"error":{"message":"rate limited","type":"rate_limit_error"}}"#;
/// assert!(matches!(decode_chat(refused, "acme", None), Err(ResponseError::Provider { .. })));
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ResponseError {
    /// A body or an event is not JSON of the documented shape.
    #[error("{context}: not JSON of the expected shape: {source}")]
    Json {
        /// What was being decoded (`response body`, or the event type).
        context: String,
        /// The parser's error.
        #[source]
        source: serde_json::Error,
    },
    /// A body or an event is JSON, but a field the decoding needs is missing or wrong.
    #[error("{context}: {reason}")]
    Malformed {
        /// What was being decoded.
        context: String,
        /// What is wrong, one case per fault (its message is what this variant prints after
        /// the context).
        reason: Malformation,
    },
    /// The provider answered with an error object (a Messages `error` event or body, a chat
    /// `error` object).
    #[error("the provider reported an error: {error_type}: {message}")]
    Provider {
        /// The provider's error type (e.g. `overloaded_error`); empty when it sent none.
        error_type: String,
        /// The provider's message.
        message: String,
    },
    /// The answer holds no block, or only empty text blocks: an empty assistant message would
    /// go into the log and every later request would carry a turn the API refuses.
    #[error("the answer holds no content")]
    EmptyAnswer,
    /// A block of an unknown type that the log cannot keep verbatim (it names a type of the
    /// log's own vocabulary, or has no string `type`).
    #[error("block {index}: a `{block_type}` block cannot be kept verbatim in the log")]
    UnrepresentableBlock {
        /// The block's index in the answer.
        index: usize,
        /// Its `type`, or empty.
        block_type: String,
    },
    /// An event names a block that was never started.
    #[error("an event for block {index}, which was never started")]
    UnknownIndex {
        /// The event's `index`.
        index: u64,
    },
    /// A block starts at another index than the next one.
    #[error("block {index} starts out of order (the next block is {expected})")]
    BlockOutOfOrder {
        /// The event's `index`.
        index: u64,
        /// The next index.
        expected: usize,
    },
    /// An event for a block after its `content_block_stop`.
    #[error("an event for block {index} after it stopped")]
    BlockStopped {
        /// The block's index.
        index: usize,
    },
    /// A delta that does not apply to its block (e.g. `input_json_delta` on a text block).
    #[error("block {index}: a `{delta_type}` delta does not apply to a `{block_type}` block")]
    UnexpectedDelta {
        /// The block's index.
        index: usize,
        /// The delta's `type`.
        delta_type: String,
        /// The block's `type`.
        block_type: String,
    },
    /// An event that needs `message_start` came before it.
    #[error("`{event}` before `message_start`")]
    NotStarted {
        /// The event type.
        event: String,
    },
    /// An event after the stream's end (`message_stop`, `[DONE]`).
    #[error("`{event}` after the end of the stream")]
    AfterEnd {
        /// The event type (or `chunk`).
        event: String,
    },
    /// The stream ended before it was complete: the answer would be partial.
    #[error("the stream was cut off: {missing} never came")]
    CutOff {
        /// What was still missing.
        missing: MissingPart,
    },
    /// The stream already refused an event; a refused stream cannot be resumed.
    #[error("the stream already failed")]
    Failed,
}

/// A refused response, as a loop reads it.
///
/// ```
/// use mektpoy::response::{ResponseError, decode_messages};
/// let err = decode_messages(r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#, "anthropic", None).unwrap_err();
/// assert!(matches!(err, ResponseError::Provider { .. }));
/// assert_eq!(err.to_string(), "the provider reported an error: overloaded_error: Overloaded");
/// ```
impl ResponseError {
    fn json(context: impl Into<String>, source: serde_json::Error) -> Self {
        ResponseError::Json {
            context: context.into(),
            source,
        }
    }

    fn malformed(context: impl Into<String>, reason: Malformation) -> Self {
        ResponseError::Malformed {
            context: context.into(),
            reason,
        }
    }
}

/// What a cut-off stream still lacked ([`ResponseError::CutOff`]): a case per end a stream can
/// miss, displayed as the event's own name.
///
/// ```
/// use mektpoy::response::{MessagesStream, MissingPart, ResponseError};
/// let err = MessagesStream::new("anthropic", None).finish().unwrap_err();
/// assert!(matches!(err, ResponseError::CutOff { missing: MissingPart::Event("message_start") }));
/// assert_eq!(err.to_string(), "the stream was cut off: message_start never came");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MissingPart {
    /// The event that opens or ends the stream (`message_start`, `message_stop`,
    /// `data: [DONE]`, `response.completed`).
    #[error("{0}")]
    Event(&'static str),
    /// The `content_block_stop` of the block at this index (Messages API).
    #[error("content_block_stop of block {0}")]
    BlockStop(usize),
    /// The rest of an event the text ended inside (its data is cut short); the event's
    /// context, as [`ResponseError::Json`] names it.
    #[error("the rest of the {0}")]
    RestOf(String),
}

/// What is wrong with a body or an event that is JSON ([`ResponseError::Malformed`]): a case
/// per fault, so that a caller can tell a missing field from a wrong value without reading the
/// message.
///
/// ```
/// use mektpoy::response::{Malformation, ResponseError, decode_chat};
/// let err = decode_chat(r#"{"id":"x","model":"m","choices":[]}"#, "deepseek", None).unwrap_err();
/// let ResponseError::Malformed { reason, .. } = &err else { panic!("{err}") };
/// assert_eq!(reason, &Malformation::NoChoice);
/// assert_eq!(err.to_string(), "response body: no choice 0");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Malformation {
    /// A field the decoding needs is absent (or `null`).
    #[error("no `{0}`")]
    Missing(&'static str),
    /// A field that must be a string is absent or is not one.
    #[error("no string `{0}`")]
    NotAString(&'static str),
    /// A usage object lacks one of its counts.
    #[error("usage needs `{0}`")]
    UsageField(&'static str),
    /// A field holds a value other than the one the API documents there (a Messages body's
    /// `type` or `role`).
    #[error("`{field}` is `{found}`, not `{expected}`")]
    UnexpectedValue {
        /// The field.
        field: &'static str,
        /// Its value.
        found: String,
        /// The value the API documents.
        expected: &'static str,
    },
    /// A tool call naming no tool: the log refuses it ([`ContentBlock::tool_call`]), and no
    /// tool could run it.
    #[error("an empty `{0}`")]
    EmptyToolName(&'static str),
    /// A Messages `thinking` block without its text.
    #[error("a `thinking` block needs a string `thinking`")]
    ThinkingWithoutText,
    /// A chat body without `choices[0]`.
    #[error("no choice 0")]
    NoChoice,
    /// A chat body whose `choices[0]` has no `message`.
    #[error("choice 0 has no `message`")]
    ChoiceWithoutMessage,
    /// A Messages stream with a second `message_start`.
    #[error("a second `message_start`")]
    SecondMessageStart,
    /// A Responses `message` item of another role than `assistant`.
    #[error("a message of role {0}")]
    MessageRole(String),
    /// A Responses `message` item without a `content` array.
    #[error("no `content` array")]
    ContentNotArray,
    /// A Responses message part of a type the API does not document there (it documents
    /// `output_text` and `refusal`); `None` when the part has no string `type`.
    #[error("a part of type {} (the API documents `output_text` and `refusal`)", .0.as_deref().unwrap_or("(none)"))]
    UndocumentedPart(Option<String>),
    /// A Responses reasoning `summary` part without a string `text`.
    #[error("a summary part without a string `text`")]
    SummaryPartWithoutText,
    /// A Responses reasoning `summary` that is not an array.
    #[error("a `summary` that is not an array")]
    SummaryNotArray,
}

/// `{"type","message"}`: the error object the APIs nest under `error` (the Responses API's
/// failed response and `error` event name a `code` instead of a `type`).
#[derive(Clone, Debug, Deserialize)]
struct ProviderError {
    #[serde(rename = "type", default)]
    error_type: Option<String>,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    code: Option<Value>,
}

impl ProviderError {
    fn into_error(self) -> ResponseError {
        let code = || match &self.code {
            Some(Value::String(s)) => Some(s.clone()),
            Some(Value::Number(n)) => Some(n.to_string()),
            _ => None,
        };
        ResponseError::Provider {
            error_type: self.error_type.clone().or_else(code).unwrap_or_default(),
            message: self.message.unwrap_or_default(),
        }
    }
}

#[derive(Deserialize)]
struct RawDiagnostics {
    #[serde(default)]
    cache_miss_reason: Option<RawMissReason>,
}

#[derive(Deserialize)]
struct RawMissReason {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    cache_missed_input_tokens: Option<u64>,
}

impl RawDiagnostics {
    fn typed(self) -> CacheDiagnostics {
        CacheDiagnostics {
            cache_miss_reason: self.cache_miss_reason.map(|r| CacheMissReason {
                kind: CacheMissKind::new(&r.kind),
                cache_missed_input_tokens: r.cache_missed_input_tokens,
            }),
        }
    }
}

#[derive(Deserialize)]
struct RawTransformation {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    reason: Option<String>,
}

impl RawTransformation {
    fn typed(self) -> InputTransformation {
        InputTransformation {
            kind: match self.kind.as_str() {
                "thinking_dropped" => TransformationKind::ThinkingDropped,
                "thinking_mismatch_allowed" => TransformationKind::ThinkingMismatchAllowed,
                _ => TransformationKind::Other(self.kind),
            },
            path: self.path,
            reason: self.reason.map(|r| match r.as_str() {
                "model_binding_mismatch" => BindingCheck::Model,
                "prefix_binding_mismatch" => BindingCheck::Prefix,
                "organization_binding_mismatch" => BindingCheck::Organization,
                "end_user_binding_mismatch" => BindingCheck::EndUser,
                _ => BindingCheck::Other(r),
            }),
        }
    }
}

fn transformations(raw: Option<Vec<RawTransformation>>) -> Option<Vec<InputTransformation>> {
    raw.map(|list| list.into_iter().map(RawTransformation::typed).collect())
}

/// The one place an unknown block is built: the log's checked constructor, which refuses what
/// the log would refuse (a known `type` in an unknown shape, or none).
fn unknown_block(index: usize, value: Value) -> Result<ContentBlock, ResponseError> {
    let block_type = value.get("type").and_then(Value::as_str).map(str::to_owned);
    ContentBlock::other(value).map_err(|_| ResponseError::UnrepresentableBlock {
        index,
        block_type: block_type.unwrap_or_default(),
    })
}

/// Whether the blocks carry nothing a request could send back.
fn is_empty_answer(blocks: &[ContentBlock]) -> bool {
    blocks
        .iter()
        .all(|b| matches!(b, ContentBlock::Text { text } if text.is_empty()))
}

/// The assistant message of an answer, refusing an empty one.
fn assistant_message(
    id: &str,
    content: Vec<ContentBlock>,
    provider: &str,
    model: &str,
) -> Result<Message, ResponseError> {
    if is_empty_answer(&content) {
        return Err(ResponseError::EmptyAnswer);
    }
    Ok(Message::new(
        id,
        Role::Assistant,
        content,
        MessageSource::Model {
            provider: provider.to_owned(),
            model: model.to_owned(),
        },
    ))
}

/// A reasoning block from its fields: `text` and every field but `type` and the text's own,
/// in order.
fn reasoning(text: String, extra: indexmap::IndexMap<String, Value>) -> ContentBlock {
    ContentBlock::Reasoning { text, extra }
}
