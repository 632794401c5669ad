//! A loopback stand-in for a Messages-API provider (DeepSeek's Anthropic-compatible endpoint,
//! Anthropic), for end-to-end tests of mektpoy and of anything put between a client and a
//! provider (the `mektpoy-proxy`).
//!
//! In a test process it is started on first use ([`url`]); as a program,
//! `mektpoy-standin --listen ADDR`. `std::net`, one thread per connection, `connection: close`.
//! State is kept per value of the `x-mektpoy-test-session` header, which each test sets to its
//! own key, so parallel tests do not mix; a request without it (an official SDK pointed at the
//! program) is keyed by a hash of its API key, as a provider's cache is per account.
//!
//! It refuses, with a 400 and an `invalid_request_error`, what the vendor documents as refused
//! (vendor pages read 2026-12-01), with the vendor's message where the pages give one:
//!
//! - **Mid-conversation tool changes** (every model): change blocks without the
//!   `mid-conversation-tool-changes-2026-07-01` or the `inline-tools-2026-09-15` beta, or
//!   outside a `system` message; a `system` message not directly followed by an assistant
//!   message or the end of the array, or not preceded (directly or through other `system`
//!   messages) by a user / tool-result turn; a by-reference `tool_addition` of a tool that is
//!   offered already, a `tool_removal` of a tool that is not offered, and a reference to a tool
//!   neither declared in `tools` nor defined earlier by value (`error.details.error_code`
//!   `tool_reference_unresolved`). *Offered*: every non-deferred declaration, then what the
//!   blocks do in order — an addition (by reference: a deferred declaration, a removed tool, a
//!   removed by-value tool) offers, a removal withdraws.
//! - **Definitions by value** (`{"type":"tool_addition","tool":{"type":"tool_definition",
//!   "definition":{..}}}`): only with `inline-tools-2026-09-15` (the 07-01 beta does not take
//!   them); the definition is a `tools` entry and is checked as one. It offers the tool with
//!   that definition from there on (an identical re-send is a no-op; `defer_loading: true`
//!   withholds it until a by-reference addition); `tool_removal` only takes a reference.
//! - Deferred declarations with no non-deferred declaration — except with the inline beta,
//!   which takes all-deferred or empty declarations.
//! - **`cache_control`** (Claude models; DeepSeek ignores it): on a deferred tool, in `tools`
//!   or in a by-value definition, or both on a by-value block and inside its definition.
//! - **Forced `tool_choice`** (`any`, `tool`) on Claude Fable 5.1 / 5.2, Mythos 5.1 / 5.2,
//!   Opus 5.5, Sonnet 5.5: `tool_choice: type "tool" and "any" are not supported for this model.`
//! - **Assistant prefill** (every `claude-*` model): a request whose last message is an
//!   assistant message: `This model does not support assistant message prefill. The
//!   conversation must end with a user message.`
//! - **Thinking bound to the conversation** (the vendor's prefix-check models: Claude Fable
//!   5.2 / 5.1, Mythos 5.2 / 5.1, Opus 5.5, Sonnet 5.5, Haiku 5.5). On these models every
//!   answer starts with a signed `thinking` block (unless `thinking.type` is `disabled`); its
//!   signature is a hash of the request's `system`, `tools` and messages, with thinking blocks
//!   and `cache_control` markers ignored, plus a block counter. A `thinking` or
//!   `redacted_thinking` block sent back must be one the session produced, unchanged
//!   (otherwise ``Invalid `signature` in `thinking` block``), and passes the *prefix check*
//!   when: the `system`, `tools` and messages before it hash as when it was produced; the
//!   thinking blocks kept before it in the request are a suffix of those kept when it was
//!   produced (leaving out a leading run, a trailing run or all of them is valid; a gap, a
//!   moved block or a block put back is not); and it was never left out of an accepted request
//!   of the session whose history held its assistant message (a block left out once is never
//!   sent again). A failed check is ``messages.I.content.J: Invalid `signature` in `thinking`
//!   block. The block is bound to a different conversation. Remove the block, or set
//!   `thinking.block_binding.prefix_mismatch_behavior` to "drop_block".`` (then, without the
//!   `thinking-binding-controls-2026-08-01` beta, a sentence saying the setting needs it; then
//!   a sentence naming what changed) — unless the request sets `drop_block` with that beta:
//!   then the failing block and every later thinking block are dropped, left out of the usage
//!   and listed in `input_transformations`. `thinking.block_binding` without the beta, or with
//!   a `thinking.type` other than `adaptive` / `enabled`, ends
//!   `block_binding: Extra inputs are not permitted`.
//!
//! It also refuses what any Messages-API request must not be (no `model`, no `max_tokens`, a tool
//! with a key the API does not take, a tool schema without a root `"type": "object"` —
//! `tools.N.custom.input_schema.type: Field required` —, an empty text block, a `tool_use`
//! block without its `tool_result` in the next message — ``messages.I: `tool_use` ids were
//! found without `tool_result` blocks immediately after: ...``, the vendor's wording as quoted
//! in public issues —, ...), so a
//! serializer that drifts from the API shows up here rather than on the real endpoint.
//!
//! Accepted requests get a usage block whose cached input follows reference §9, computed here from
//! the raw body bytes independently of the crate's `Meter`: the concatenation of each
//! non-deferred tool's JSON, a fixed deferred section of the size the test announces in
//! `x-mektpoy-deferred-section-bytes` (the route's `deferred_section_bytes`) when any declaration
//! is deferred, `system`, and each message (by-value definitions are part of their message;
//! thinking blocks dropped by `drop_block` are not counted). Cached, per vendor: on Claude
//! models, entries are written at breakpoints (a content block with `cache_control`; with a
//! top-level `cache_control`, the last block) from the model's minimum cacheable length, and a
//! request reads the longest entry ending at one of the 20 blocks that end at one of its
//! breakpoints — a request without any reads and writes nothing; on DeepSeek, the longest
//! common prefix with any earlier request of the session, in 64-token units. A cache is per
//! model (the cache-diagnostics page's `model_changed`: another model reads nothing), so
//! loops of several models sharing one session (one account, one conversation log) each read
//! only their own model's entries; the deferred section size is announced per model. Entries
//! live as long as the session's state (the stand-in has no clock). Tokens are estimated as
//! ⌈bytes / 4⌉. A refused request leaves the session's state unchanged (the provider caches
//! nothing of it).
//!
//! # What it answers
//!
//! The body of an accepted request is exactly a Messages-API response and nothing else (vendor
//! pages read 2026-12-01: the Messages API response,
//! <https://platform.claude.com/docs/en/api/messages> — "Anthropic messages API response usage
//! cache_read_input_tokens" —, read in the vendor's OpenAPI-generated types of
//! `anthropics/anthropic-sdk-python`, `types/usage.py`, `types/message_delta_usage.py`,
//! `types/thinking_block.py`, `types/beta/beta_message.py`,
//! `types/beta/beta_thinking_dropped_input_transformation.py`; and the streaming page,
//! <https://platform.claude.com/docs/en/build-with-claude/streaming> — "Anthropic streaming
//! message_start content_block_delta signature_delta" —, read in a copy of the page):
//!
//! - JSON (`content-type: application/json`): `{"id","type":"message","role":"assistant",
//!   "model","content","stop_reason","stop_sequence","usage"}`, `usage` being
//!   `{"input_tokens","cache_creation_input_tokens","cache_read_input_tokens",
//!   "cache_creation":{"ephemeral_5m_input_tokens","ephemeral_1h_input_tokens"},
//!   "output_tokens","service_tier"}` ("total input tokens in a request is the summation of
//!   `input_tokens`, `cache_creation_input_tokens`, and `cache_read_input_tokens`"; nothing is
//!   written to the cache here, so `cache_creation_input_tokens` is 0); `diagnostics` as
//!   described below; `input_transformations` (`[]` when empty,
//!   entries `{"type":"thinking_dropped","path":"messages.{i}.content.{j}","reason"}`) on every
//!   answer of a Claude model to a request with the `thinking-binding-controls-2026-08-01`
//!   beta. `content`: on the models that bind thinking a `thinking` block with its `signature`
//!   (and, with [`REDACTED_HEADER`], a `redacted_thinking` block), then a `text` block, then,
//!   with [`TOOL_USE_HEADER`], a `tool_use` block calling that tool with `{"arg":"x"}`
//!   (`stop_reason` `tool_use`, else `end_turn`).
//! - Server-sent events, when the body sets `"stream": true` (`content-type:
//!   text/event-stream; charset=utf-8`, the body delimited by the end of the connection): the
//!   same answer as `message_start` (the message with empty `content`, null `stop_reason`, its
//!   `usage` with `output_tokens` 1 and `input_transformations`), per block
//!   `content_block_start` / `content_block_delta`* / `content_block_stop` (`text_delta`;
//!   `thinking_delta` then one `signature_delta` just before the stop, the start carrying
//!   `"thinking":"","signature":""`; `input_json_delta`, a first empty `partial_json` then the
//!   input's text with whitespace between its tokens; a `redacted_thinking` block whole in its
//!   start), `message_delta` (`stop_reason`, `stop_sequence`, the cumulative usage), and
//!   `message_stop`, with `ping` events among them. Deltas are split at points drawn from the
//!   session and the request's number, so a stream is the same for the same request.
//!   A refusal is a JSON error body whatever `stream` says (the vendor's errors before a
//!   stream starts are ordinary responses).
//!
//! **Cache diagnostics** (<https://platform.claude.com/docs/en/build-with-claude/cache-diagnostics>,
//! read 2026-12-01 in a copy of the English page fetched 2026-09-20, and the vendor's
//! OpenAPI-generated types of `anthropics/anthropic-sdk-python`: `types/beta/beta_diagnostics.py`,
//! `beta_diagnostics_param.py`, `beta_cache_miss_model_changed.py`,
//! `beta_cache_miss_messages_changed.py`, `beta_cache_miss_previous_message_not_found.py`, and
//! the `diagnostics` field of the beta message, "Present (possibly null) whenever the caller
//! supplied `diagnostics` on the request"). A request opts in with the `diagnostics` object on
//! a Claude model ("Claude API only"; the field is ignored on the DeepSeek models, whose field
//! table was not read for it): without it, the response has no `diagnostics` field. The beta
//! header [`DIAGNOSIS_BETA`] is no longer needed: the vendor's release notes of 2026-09-23 say
//! cache diagnostics are out of beta on the Claude API and no longer require it
//! (<https://platform.claude.com/docs/en/release-notes/overview>, read 2026-12-06; the page's
//! translated copies carry `status: ga`), and a request that still sends it is answered the
//! same. Each opted-in accepted request leaves a fingerprint under its response `id`
//! (hashes and sizes of its parts, as the vendor's holds "only hashes and token-count
//! estimates"). `diagnostics.previous_message_id`: `null` (the first turn) answers
//! `diagnostics: null`; an id this session did not answer with a fingerprint answers
//! `previous_message_not_found`; one not starting with `msg_` is refused
//! ([`PREVIOUS_ID_MESSAGE`], the vendor's wording as quoted in public code). Otherwise the
//! request is compared with the named one and "the earliest divergence only" is reported: the
//! page is about "exactly where the prompt prefix diverged", so after `model_changed` (the
//! cache is per model, in no prefix) the stand-in takes the prefix's order, `tools_changed`
//! (each tool, the deferred section as one) before `system_changed`, where the page's table
//! lists `system_changed` first (it states no order of checks: an inference, which only a
//! request changing both tells apart); then `unavailable` when model, system and tools match
//! but `tool_choice`, `thinking`, `context_management`, `output_config`, `output_format` or the
//! set of betas differ; then `messages_changed` when an earlier message was "altered,
//! reordered, or removed rather than appended to"; `null` when nothing diverged. `cache_missed_input_tokens`
//! is the stand-in's estimate: the named request's tokens (⌈bytes / 4⌉ of its reference §9
//! bytes, as the usage) from its first part that differs, in the order of the bytes. The
//! comparison is synchronous, so `{"cache_miss_reason": null}` (still pending) never occurs
//! here, nor the comparison horizon. In a stream `diagnostics` is on `message_start`.
//!
//! What only the tests need goes in response headers, never in the body:
//! [`TOTAL_BYTES_HEADER`] and [`CACHED_BYTES_HEADER`] (the exact reference §9 bytes behind
//! the token counts) and [`CONTENT_HEADER`] (the answer's `content` as JSON, which a stream
//! only spells out in pieces). Test switches in the request: [`REDACTED_HEADER`],
//! [`TOOL_USE_HEADER`], [`THINKING_ONLY_HEADER`], [`FORK_FROM_HEADER`], [`CUT_OFF_HEADER`],
//! which cuts the response body off mid-way (a connection lost after the provider accepted the
//! request: its state changes all the same), and [`FAIL_HEADER`] (`529` or `500`), which
//! answers a request that passed every check with the vendor's server error —
//! `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}` with status
//! 529, or `api_error` with 500 — and changes no state (a retry of the same bytes is answered
//! as the failed send would have been).
//!
//! # OpenAI-compatible chat completions
//!
//! `POST /v1/chat/completions` and `POST /chat/completions` (DeepSeek's base URL has no `/v1`)
//! speak the chat-completions API, in [`chat`] (vendor pages read 2026-12-06, cited there). It
//! refuses, in OpenAI's error shape `{"error":{"message","type","param","code"}}`, a request
//! without `model` or `messages`, an unknown role, a tool message answering no pending call, an
//! assistant `tool_calls` not followed by a tool message for each id, a function name outside
//! `^[a-zA-Z0-9_-]{1,64}$`, `parameters` that is not an object and a name declared twice; it
//! answers a `chat.completion` body, or `chat.completion.chunk` events ending `data: [DONE]`
//! (the usage chunk with `stream_options.include_usage`), with the same test headers and
//! switches as here where they apply ([`SESSION_HEADER`], [`TOOL_USE_HEADER`],
//! [`CUT_OFF_HEADER`], and [`FAIL_HEADER`] with `500` or `503`, each vendor's server errors;
//! [`CONTENT_HEADER`] holds the assistant message). Cached input follows DeepSeek's 64-token
//! units on `deepseek-*` models and OpenAI's rule (from 1,024 tokens, in 128-token steps) on
//! the others, over the session's earlier chat prompts to the same model.
//!
//! # OpenAI's Responses API
//!
//! `POST /v1/responses`, in [`responses`] (vendor pages read 2026-12-06, cited there). It
//! refuses, in OpenAI's error shape, an input item of a type the API does not list, a
//! `function_call_output` without its call and a call without its output, a reasoning item
//! without `encrypted_content` or an `item_reference` (404: the stand-in keeps no item) or
//! whose `encrypted_content` is not the one the stand-in gave that item (400), a
//! `previous_response_id` (it keeps no response), tools that are not valid flat functions, and
//! an `additional_tools` item on a model before `gpt-5.4`, from another role than `developer`
//! or between a call and its output; it answers a `response` object, or its semantic events
//! (`response.created` ... `response.completed`), with the test headers and switches of the
//! chat path ([`FAIL_HEADER`]: OpenAI's 500 `server_error` and 503 overload). Cached input
//! follows OpenAI's rule over the earlier prompts of the same session, model and
//! `prompt_cache_key`, reported in `usage.input_tokens_details.cached_tokens`.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::thread;
use std::time::Duration;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};

/// The beta that lets a conversation add and remove tools mid-way, by reference.
pub const BETA: &str = "mid-conversation-tool-changes-2026-07-01";
/// The beta that also lets a `tool_addition` carry a definition by value; it covers the
/// by-reference changes too.
pub const INLINE_BETA: &str = "inline-tools-2026-09-15";
/// The beta that lets a request set `thinking.block_binding` and get `input_transformations`.
pub const BINDING_BETA: &str = "thinking-binding-controls-2026-08-01";
/// The header that keys the stand-in's state.
pub const SESSION_HEADER: &str = "x-mektpoy-test-session";
/// The header that announces the route's deferred section size (reference §9).
pub const SECTION_HEADER: &str = "x-mektpoy-deferred-section-bytes";
/// Test support: with this header set to `true`, an answer on a model that binds thinking also
/// carries a `redacted_thinking` block after its `thinking` block.
pub const REDACTED_HEADER: &str = "x-mektpoy-test-redacted-thinking";
/// Test support: the answer also calls the tool this header names (a `tool_use` block after
/// the text, input `{"arg":"x"}`, `stop_reason` `tool_use`).
pub const TOOL_USE_HEADER: &str = "x-mektpoy-test-tool-use";
/// Test support: with this header set to `true`, an answer on a model that binds thinking holds
/// its thinking blocks only (no text), as a model may answer (issue 20 item 8).
pub const THINKING_ONLY_HEADER: &str = "x-mektpoy-test-thinking-only";
/// Test support: with this header set to `true`, the response body is cut off mid-way (at a
/// point drawn like the deltas' splits) and the connection closed; the request was accepted.
pub const CUT_OFF_HEADER: &str = "x-mektpoy-test-cut-off";
/// Test support: a session first seen with this header starts with the thinking blocks the
/// named session produced (not its cache, nor the blocks it left out): another conversation
/// that carries the same answers, as a replay of a log on another route is.
pub const FORK_FROM_HEADER: &str = "x-mektpoy-test-fork-from";
/// Test support: a request with this header set to `529` or `500` fails with that status and
/// the vendor's error body (`overloaded_error` / `api_error`) after it was checked (a request
/// the stand-in refuses is refused all the same), and changes no state: a provider that failed
/// cached nothing of the request, so a retry of the same bytes is answered as the first send
/// would have been.
pub const FAIL_HEADER: &str = "x-mektpoy-test-fail";
/// Response header: the request's reference §9 bytes.
pub const TOTAL_BYTES_HEADER: &str = "x-standin-total-bytes";
/// Response header: of those, the bytes read from the cache.
pub const CACHED_BYTES_HEADER: &str = "x-standin-cached-bytes";
/// Response header: the answer's `content`, as JSON.
pub const CONTENT_HEADER: &str = "x-standin-content";

/// The vendor's refusal of a forced `tool_choice`.
pub const FORCED_TOOL_CHOICE_MESSAGE: &str =
    "tool_choice: type \"tool\" and \"any\" are not supported for this model.";
/// The vendor's refusal of a request that ends with an assistant message (wording from the
/// vendor's answers quoted in public issues; the pages give none).
pub const PREFILL_MESSAGE: &str = "This model does not support assistant message prefill. The conversation must end with a user message.";
/// The stable part of a failed prefix check's message.
pub const BOUND_ELSEWHERE: &str = "The block is bound to a different conversation.";

/// Models that refuse a `tool_choice` of `any` / `tool` (Fable 5.2 and Mythos 5.2 inferred:
/// their what's-new page lists no change from 5.1 there).
const FORCED_TOOL_CHOICE_REFUSED: &[&str] = &[
    "claude-fable-5-1",
    "claude-mythos-5-1",
    "claude-opus-5-5",
    "claude-sonnet-5-5",
    "claude-fable-5-2",
    "claude-mythos-5-2",
];
/// The models of the vendor's "prefix checks on thinking blocks" page.
const BINDS_THINKING: &[&str] = &[
    "claude-fable-5-2",
    "claude-mythos-5-2",
    "claude-fable-5-1",
    "claude-mythos-5-1",
    "claude-opus-5-5",
    "claude-sonnet-5-5",
    "claude-haiku-5-5",
];

/// `model` is one of `ids`, or one of them with a `-YYYYMMDD` snapshot suffix.
fn is_model(model: &str, ids: &[&str]) -> bool {
    ids.iter().any(|id| {
        model.strip_prefix(id).is_some_and(|rest| {
            rest.is_empty()
                || rest
                    .strip_prefix('-')
                    .is_some_and(|d| d.len() == 8 && d.bytes().all(|b| b.is_ascii_digit()))
        })
    })
}

/// Claude models get Anthropic's rules (opt-in caching, prefill, `cache_control` placement);
/// the others are DeepSeek's, which ignores `cache_control` and caches by itself.
fn is_anthropic(model: &str) -> bool {
    model.starts_with("claude-")
}

/// What the stand-in reports about one accepted request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Usage {
    /// Bytes of the request's reference §9 segments ([`TOTAL_BYTES_HEADER`]).
    pub total_bytes: u64,
    /// Bytes read from the session's cache entries by the vendor's rule (see the module doc;
    /// 0 when the request asks for no caching on a Claude model) ([`CACHED_BYTES_HEADER`]).
    pub cached_bytes: u64,
    /// `usage.input_tokens`: ⌈total / 4⌉ − ⌈cached / 4⌉ (input not read from the cache).
    pub input_tokens: u64,
    /// `usage.cache_read_input_tokens`: ⌈cached / 4⌉.
    pub cache_read_input_tokens: u64,
}

/// An accepted request's answer, read from a JSON body (the stand-in's own tests; the agent
/// loop decodes with the crate).
#[derive(Clone, Debug)]
pub struct Answer {
    /// The usage block.
    pub usage: Usage,
    /// The assistant's text (its text block).
    pub text: String,
    /// The answer's content blocks as the vendor returns them: on models that bind thinking, a
    /// `thinking` block with its `signature` (and, with [`REDACTED_HEADER`], a
    /// `redacted_thinking` block), then the text block.
    pub content: Vec<Value>,
    /// The response's `input_transformations` (empty without the binding beta): one
    /// `thinking_dropped` entry per block `drop_block` dropped.
    pub input_transformations: Vec<Value>,
}

impl Answer {
    /// The answer as the assistant message a loop sends back: its content, in order.
    pub fn message(&self) -> Value {
        json!({"role": "assistant", "content": self.content})
    }
}

/// A refused request: the HTTP status, the error message and, where the vendor documents one,
/// `error.details.error_code`.
#[derive(Clone, Debug)]
pub struct Refused {
    pub status: u16,
    pub message: String,
    pub code: Option<String>,
}

impl Refused {
    /// A refusal without an `error_code`.
    pub fn new(status: u16, message: String) -> Self {
        Refused {
            status,
            message,
            code: None,
        }
    }
}

/// A response as the HTTP client received it: the bytes for the loop, the test figures from
/// the stand-in's own headers.
#[derive(Clone, Debug)]
pub struct Response {
    pub status: u16,
    /// The `content-type`.
    pub content_type: String,
    /// The body, as received (cut off when [`CUT_OFF_HEADER`] asked for it).
    pub body: String,
    /// [`TOTAL_BYTES_HEADER`] and [`CACHED_BYTES_HEADER`], on an accepted request.
    pub bytes: Option<(u64, u64)>,
    /// [`CONTENT_HEADER`], on an accepted request.
    pub content: Vec<Value>,
}

impl Response {
    /// Whether the body is a stream of server-sent events.
    pub fn is_event_stream(&self) -> bool {
        self.content_type.starts_with("text/event-stream")
    }
}

/// Why a request is refused: the HTTP status and `error.type` (a 400
/// `invalid_request_error`, unless [`FAIL_HEADER`] asked for a server error), the error
/// message and, where the vendor documents one, its `error.details.error_code`.
#[derive(Debug)]
struct Fault {
    status: u16,
    kind: &'static str,
    message: String,
    code: Option<&'static str>,
}

impl Fault {
    fn coded(code: &'static str, message: String) -> Self {
        Fault {
            code: Some(code),
            ..message.into()
        }
    }
}

impl From<String> for Fault {
    fn from(message: String) -> Self {
        Fault {
            status: 400,
            kind: "invalid_request_error",
            message,
            code: None,
        }
    }
}

/// The server error [`FAIL_HEADER`] asks for, if any: the vendor's errors page (read
/// 2026-12-01) gives 500 `api_error` ("An unexpected error has occurred internal to
/// Anthropic's systems") and 529 `overloaded_error` ("The API is temporarily overloaded"); the
/// messages are the ones its error bodies carry.
fn failure(headers: &Headers) -> Checked<Option<Fault>> {
    let (kind, message) = match header(headers, FAIL_HEADER) {
        None => return Ok(None),
        Some("500") => ("api_error", "Internal server error"),
        Some("529") => ("overloaded_error", "Overloaded"),
        Some(other) => return Err(format!("test support: bad {FAIL_HEADER}: `{other}`").into()),
    };
    let status = if kind == "api_error" { 500 } else { 529 };
    Ok(Some(Fault {
        status,
        kind,
        message: message.to_owned(),
        code: None,
    }))
}

impl From<&str> for Fault {
    fn from(message: &str) -> Self {
        message.to_owned().into()
    }
}

type Checked<T = ()> = Result<T, Fault>;

/// A thinking block the session produced, with what its signature binds.
#[derive(Clone)]
struct Produced {
    /// The text of the answer it came with (how the stand-in recognizes that answer's
    /// assistant message when a loop sends it back without its thinking).
    answer: String,
    /// `thinking` text or `redacted_thinking` data, which the signature covers.
    content: String,
    redacted: bool,
    bound: Bound,
    /// The signatures of the thinking blocks kept before it in the request that produced it.
    before: Vec<String>,
}

/// One model's cache in a session (a provider's cache is per model): the section size
/// announced for it and its entries.
struct ModelCache {
    section: u32,
    /// Claude models: the prefixes written at breakpoints (long enough), as bytes.
    entries: Vec<Vec<u8>>,
    /// DeepSeek: every accepted request's bytes (each of their prefixes is cached).
    prompts: Vec<Vec<u8>>,
    /// Whether the previous cached request carried a tool defined by value.
    previous_by_value: bool,
}

/// Per-session state: each model's cache, and the thinking blocks produced and left out.
struct SessionState {
    /// By model id, as the request names it.
    caches: BTreeMap<String, ModelCache>,
    requests: u64,
    /// Thinking blocks produced so far (the signature's counter).
    blocks: u64,
    produced: HashMap<String, Produced>,
    /// An answer's text → the signatures of its thinking blocks, in order.
    answers: HashMap<String, Vec<String>>,
    /// Signatures left out of an accepted request whose history held their assistant message.
    omitted: HashSet<String>,
    /// The cache-diagnostics fingerprint of each accepted request that opted in, by its
    /// response `id`.
    fingerprints: HashMap<String, Fingerprint>,
}

static SESSIONS: Mutex<BTreeMap<String, SessionState>> = Mutex::new(BTreeMap::new());
static URL: OnceLock<String> = OnceLock::new();

/// The stand-in's endpoint URL (`http://127.0.0.1:PORT/v1/messages`) in this process; starts
/// it on first use.
pub fn url() -> &'static str {
    URL.get_or_init(|| {
        let addr = start("127.0.0.1:0").expect("bind a loopback port");
        format!("http://{addr}/v1/messages")
    })
}

/// Binds `addr` and serves on a background thread; the bound address (a port of 0 picks one).
/// Every stand-in of a process shares its sessions' state.
pub fn start(addr: impl std::net::ToSocketAddrs) -> std::io::Result<std::net::SocketAddr> {
    let listener = TcpListener::bind(addr)?;
    let addr = listener.local_addr()?;
    thread::spawn(move || serve(listener));
    Ok(addr)
}

/// Serves the stand-in on `listener` until the process ends: one thread per connection.
pub fn serve(listener: TcpListener) {
    for stream in listener.incoming().flatten() {
        thread::spawn(move || {
            // A broken connection only fails the request that used it.
            let _ = serve_connection(stream);
        });
    }
}

/// Lowercase header names with their values; a repeated header keeps every value.
type Headers = Vec<(String, String)>;

fn header<'h>(headers: &'h Headers, name: &str) -> Option<&'h str> {
    headers
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

/// The `anthropic-beta` values, over every such header, comma-separated.
fn betas(headers: &Headers) -> HashSet<&str> {
    headers
        .iter()
        .filter(|(n, _)| n == "anthropic-beta")
        .flat_map(|(_, v)| v.split(','))
        .map(str::trim)
        .collect()
}

fn serve_connection(stream: TcpStream) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(20)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    let mut headers = Headers::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            break;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_owned()));
        }
    }
    if chat::is_chat(&request_line) {
        return chat::serve(stream, &request_line, &headers, &mut reader);
    }
    if responses::is_responses(&request_line) {
        return responses::serve(stream, &request_line, &headers, &mut reader);
    }
    let answered = match http_request(&request_line, &headers, &mut reader) {
        Ok(body) => answer(&headers, &body).map_err(|fault| (fault.status, error_body(&fault))),
        Err((status, message)) => Err((status, error_body(&message.into()))),
    };
    let mut stream = stream;
    let answered = match answered {
        Ok(answered) => answered,
        Err((status, reply)) => return write_error(&mut stream, status, &reply),
    };
    let (content_type, body) = if answered.stream {
        ("text/event-stream; charset=utf-8", sse(&answered))
    } else {
        ("application/json", answered.body.to_string())
    };
    let head = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\nrequest-id: req_standin_{:016x}\r\n{TOTAL_BYTES_HEADER}: {}\r\n{CACHED_BYTES_HEADER}: {}\r\n{CONTENT_HEADER}: {}\r\nconnection: close\r\n",
        answered.seed, answered.total, answered.cached, answered.body["content"]
    );
    write_answer(
        &mut stream,
        head,
        &body,
        answered.stream,
        answered.cut,
        answered.seed,
    )
}

/// A refused or failed request's JSON error body, with its status (every path's errors).
pub(crate) fn write_error(
    stream: &mut TcpStream,
    status: u16,
    reply: &Value,
) -> std::io::Result<()> {
    let reason = match status {
        404 => "Not Found",
        411 => "Length Required",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        529 => "Site Overloaded",
        _ => "Bad Request",
    };
    let reply = reply.to_string();
    write!(
        stream,
        "HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{reply}",
        reply.len()
    )?;
    stream.flush()
}

/// An accepted answer after its `head` (the status line and headers so far). A stream's body
/// ends with the connection, as does a body cut off ([`CUT_OFF_HEADER`], at a point drawn from
/// `seed`); a JSON body says its length.
pub(crate) fn write_answer(
    stream: &mut TcpStream,
    mut head: String,
    body: &str,
    streamed: bool,
    cut: bool,
    seed: u64,
) -> std::io::Result<()> {
    let body = match cut {
        true => &body[..Rng(seed).cut_point(body)],
        false => body,
    };
    if streamed {
        head.push_str("cache-control: no-cache\r\n\r\n");
    } else if !cut {
        let _ = write!(head, "content-length: {}\r\n\r\n", body.len());
    } else {
        head.push_str("\r\n");
    }
    stream.write_all(head.as_bytes())?;
    stream.write_all(body.as_bytes())?;
    stream.flush()
}

/// The body of a `POST /v1/messages` (or of a chat path, [`chat::PATHS`]) with a
/// `content-length`, as UTF-8.
fn http_request(
    request_line: &str,
    headers: &Headers,
    reader: &mut impl Read,
) -> Result<String, (u16, String)> {
    let mut parts = request_line.split_whitespace();
    let (method, path) = (parts.next(), parts.next());
    let known = path
        .is_some_and(|p| p == "/v1/messages" || chat::PATHS.contains(&p) || p == responses::PATH);
    if method != Some("POST") || !known {
        return Err((404, format!("no route for `{}`", request_line.trim_end())));
    }
    let len: usize = header(headers, "content-length")
        .ok_or((411, "a content-length is required".to_owned()))?
        .parse()
        .map_err(|_| (400, "content-length is not a number".to_owned()))?;
    let mut body = vec![0; len];
    reader
        .read_exact(&mut body)
        .map_err(|e| (400, format!("short body: {e}")))?;
    String::from_utf8(body).map_err(|_| (400, "the body is not UTF-8".to_owned()))
}

fn error_body(fault: &Fault) -> Value {
    let mut error = json!({"type": fault.kind, "message": fault.message});
    if let Some(code) = fault.code {
        error["details"] = json!({"error_code": code});
    }
    json!({"type": "error", "error": error})
}

fn answer(headers: &Headers, body: &str) -> Checked<Answered> {
    // A client that does not name a test session (an SDK pointed at the binary) gets one per
    // API key, as a provider's cache is per account.
    let keyed;
    let session = match header(headers, SESSION_HEADER) {
        Some(session) => session,
        None => {
            let key = header(headers, "x-api-key")
                .or_else(|| header(headers, "authorization"))
                .unwrap_or_default();
            keyed = format!("key:{:016x}", fnv(FNV_START, key.as_bytes()));
            &keyed
        }
    };
    let section: u32 = match header(headers, SECTION_HEADER) {
        None => 0,
        Some(v) => v
            .parse()
            .map_err(|_| format!("test support: bad {SECTION_HEADER}"))?,
    };
    let v: Value = serde_json::from_str(body).map_err(|e| format!("the body is not JSON: {e}"))?;
    check_shape(headers, &v)?;
    check_model_rules(headers, &v)?;
    check_tool_changes(headers, &v)?;
    let model = v["model"].as_str().unwrap_or_default();
    let betas = betas(headers);
    let conversation = is_model(model, BINDS_THINKING).then(|| Conversation::of(&v));

    let mut sessions = SESSIONS.lock().unwrap_or_else(PoisonError::into_inner);
    let forked = header(headers, FORK_FROM_HEADER)
        .and_then(|from| sessions.get(from))
        .map(|s| (s.blocks, s.produced.clone(), s.answers.clone()));
    let fail = failure(headers)?;
    let known = sessions.contains_key(session);
    let state = sessions.entry(session.to_owned()).or_insert_with(|| {
        let (blocks, produced, answers) = forked.unwrap_or_default();
        SessionState {
            caches: BTreeMap::new(),
            requests: 0,
            blocks,
            produced,
            answers,
            omitted: HashSet::new(),
            fingerprints: HashMap::new(),
        }
    });
    let announced = state.caches.get(model).map(|c| c.section);
    let checked = (|| {
        if let Some(announced) = announced.filter(|&a| a != section) {
            return Err(format!(
                "test support: session {session} announced a deferred section of {announced} bytes for {model}, now {section}"
            )
            .into());
        }
        let thinking = match &conversation {
            Some(c) => check_thinking(state, &betas, &v, c)?,
            None => ThinkingVerdict::default(),
        };
        let (bytes, units, ends) = cut(body, &v, section, &thinking.dropped)?;
        let asking = asks_diagnostics(model, &v)?
            .map(|previous_id| (previous_id, Fingerprint::of(&v, &betas, &bytes, &units)));
        Ok((thinking, bytes, ends, asking))
    })();
    // A request refused, or failed by the test switch, leaves the session as it was.
    let (thinking, bytes, ends, asking) = match (checked, fail) {
        (Err(fault), _) | (Ok(_), Some(fault)) => {
            if !known {
                sessions.remove(session);
            }
            return Err(fault);
        }
        (Ok(checked), None) => checked,
    };
    let state = sessions.get_mut(session).expect("the session's state");

    // Accepted: from here on the session's state changes.
    let total = bytes.len() as u64;
    // Without a non-deferred tool, the first tool defined by value changes the start of the
    // rendered prompt: one full miss (the vendor's tool-changes page).
    let by_value = body.contains(r#""type":"tool_definition""#);
    let immediate = v["tools"]
        .as_array()
        .is_some_and(|t| t.iter().any(|t| !is_deferred(t)));
    let cache = state
        .caches
        .entry(model.to_owned())
        .or_insert_with(|| ModelCache {
            section,
            entries: Vec::new(),
            prompts: Vec::new(),
            previous_by_value: false,
        });
    let first_definition = by_value && !cache.previous_by_value && !immediate;
    cache.previous_by_value = by_value;
    let read = if is_anthropic(model) {
        claude_cache(
            cache,
            &bytes,
            &ends,
            v.get("cache_control").is_some(),
            model,
        )
    } else {
        deepseek_cache(cache, &bytes)
    };
    let cached = if first_definition { 0 } else { read };
    state.requests += 1;
    let text = format!("ok {}", state.requests);
    let mut content = Vec::new();
    if let Some(conversation) = &conversation {
        state.omitted.extend(thinking.omitted);
        if v.pointer("/thinking/type") != Some(&json!("disabled")) {
            content = produce(state, conversation, thinking.kept, &text, headers);
        }
    }
    if content.is_empty() || header(headers, THINKING_ONLY_HEADER) != Some("true") {
        content.push(json!({"type": "text", "text": text}));
    }
    let tool = header(headers, TOOL_USE_HEADER);
    if let Some(name) = tool {
        content.push(json!({
            "type": "tool_use",
            "id": format!("toolu_standin_{:04}", state.requests),
            "name": name,
            "input": {"arg": "x"}
        }));
    }
    let tokens = |b: u64| b.div_ceil(4);
    let output_tokens = tokens(Value::from(content.clone()).to_string().len() as u64);
    let mut reply = json!({
        "id": format!("msg_standin_{:04}", state.requests),
        "type": "message",
        "role": "assistant",
        "model": v["model"],
        "content": content,
        "stop_reason": if tool.is_some() { "tool_use" } else { "end_turn" },
        "stop_sequence": null,
        "usage": {
            "input_tokens": tokens(total) - tokens(cached),
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": tokens(cached),
            "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 0},
            "output_tokens": output_tokens,
            "service_tier": "standard"
        }
    });
    if let Some((previous_id, now)) = asking {
        reply["diagnostics"] = match previous_id {
            // The first turn: nothing to compare.
            None => Value::Null,
            Some(id) => match state.fingerprints.get(&id) {
                None => json!({"cache_miss_reason": {"type": "previous_message_not_found"}}),
                Some(previous) => previous.compare(&now),
            },
        };
        let id = reply["id"].as_str().unwrap_or_default().to_owned();
        state.fingerprints.insert(id, now);
    }
    if is_anthropic(model) && betas.contains(BINDING_BETA) {
        reply["input_transformations"] = Value::Array(thinking.transformations);
    }
    Ok(Answered {
        body: reply,
        total,
        cached,
        stream: v.get("stream") == Some(&Value::Bool(true)),
        cut: header(headers, CUT_OFF_HEADER) == Some("true"),
        seed: fnv(
            fnv(FNV_START, session.as_bytes()),
            &state.requests.to_le_bytes(),
        ),
    })
}

/// Claude's cache (prompt-caching page, read 2026-12-01): a breakpoint is a content block with
/// `cache_control`, or with top-level automatic caching the last block; a request reads the
/// longest entry that ends at one of the 20 blocks ending at a breakpoint (the breakpoint's
/// own and the 19 before it), then writes an entry at each breakpoint whose prefix reaches
/// the model's minimum cacheable length. An entry ends at a block; a read of a message's last
/// block also covers its closing bytes. Returns the bytes read.
fn claude_cache(
    state: &mut ModelCache,
    bytes: &[u8],
    ends: &[End],
    automatic: bool,
    model: &str,
) -> u64 {
    let breakpoints: Vec<usize> = (0..ends.len())
        .filter(|&i| ends[i].mark || (automatic && i + 1 == ends.len()))
        .collect();
    let mut read = 0;
    for &i in &breakpoints {
        for j in (i + 1).saturating_sub(20)..=i {
            let prefix = &bytes[..ends[j].block];
            if state.entries.iter().any(|e| e.as_slice() == prefix) {
                read = read.max(ends[j].message as u64);
            }
        }
    }
    for &i in &breakpoints {
        let prefix = &bytes[..ends[i].block];
        let long_enough = (prefix.len() as u64).div_ceil(4) >= min_cache_tokens(model);
        if long_enough && !state.entries.iter().any(|e| e.as_slice() == prefix) {
            state.entries.push(prefix.to_vec());
        }
    }
    read
}

/// DeepSeek's cache (the 2024-08-02 announcement: "64 tokens as a storage unit"; its guide,
/// read 2026-12-02, keeps every earlier prompt's prefix units): the longest common prefix with
/// any earlier request, in whole units of 64 tokens (256 bytes at four bytes a token).
fn deepseek_cache(state: &mut ModelCache, bytes: &[u8]) -> u64 {
    let common = state
        .prompts
        .iter()
        .map(|p| p.iter().zip(bytes).take_while(|(a, b)| a == b).count())
        .max()
        .unwrap_or(0);
    state.prompts.push(bytes.to_vec());
    (common / 256 * 256) as u64
}

/// Where one content block of the cut ends: `block` just past it, `message` what a read there
/// covers (its message's end when it is the message's last block), `mark` whether it carries
/// `cache_control`.
#[derive(Clone, Copy, Debug)]
struct End {
    block: usize,
    message: usize,
    mark: bool,
}

/// The ends of one message's blocks, `stripped` its bytes in the cut (markers left out) at
/// `at`, `raw` as sent (less dropped blocks): a message whose content is no array, or an
/// empty one, is one block.
fn message_ends(stripped: &str, raw: &str, at: usize) -> Vec<End> {
    #[derive(Deserialize)]
    struct Blocks<'a> {
        #[serde(borrow, default)]
        content: Option<Vec<&'a RawValue>>,
    }
    let whole = vec![End {
        block: at + stripped.len(),
        message: at + stripped.len(),
        mark: false,
    }];
    let Ok(Blocks {
        content: Some(blocks),
    }) = serde_json::from_str::<Blocks<'_>>(stripped)
    else {
        return whole;
    };
    let marks: Vec<bool> = serde_json::from_str::<Value>(raw)
        .ok()
        .and_then(|m| m["content"].as_array().cloned())
        .unwrap_or_default()
        .iter()
        .map(|b| b.get("cache_control").is_some())
        .collect();
    if blocks.is_empty() || marks.len() != blocks.len() {
        return whole;
    }
    let last = blocks.len() - 1;
    blocks
        .iter()
        .enumerate()
        .map(|(j, b)| {
            let end = b.get().as_ptr() as usize - stripped.as_ptr() as usize + b.get().len();
            End {
                block: at + end,
                message: if j == last {
                    at + stripped.len()
                } else {
                    at + end
                },
                mark: marks[j],
            }
        })
        .collect()
}

/// What a request that keeps all of an earlier one of `total` bytes reads on `model`: all of
/// it on a Claude model (its last block is the entry); on DeepSeek, whole 64-token units.
pub fn kept(model: &str, total: u64) -> u64 {
    if is_anthropic(model) {
        total
    } else {
        total / 256 * 256
    }
}

/// [`kept`] on the model a request body names.
pub fn kept_by(body: &str, total: u64) -> u64 {
    let v: Value = serde_json::from_str(body).unwrap_or_default();
    kept(v["model"].as_str().unwrap_or_default(), total)
}

/// The beta that turned cache diagnostics on while they were in beta: accepted, no longer
/// needed (generally available since 2026-09-23).
pub const DIAGNOSIS_BETA: &str = "cache-diagnosis-2026-04-07";
/// The vendor's refusal of a `previous_message_id` that is not a response id (wording quoted
/// from the vendor's answers in public code: a transcript repair tool's doc comment and a
/// proxy's troubleshooting page).
pub const PREVIOUS_ID_MESSAGE: &str = "diagnostics.previous_message_id: must be the `id` from a prior /v1/messages response (starts with `msg_`)";

/// The request parameters other than model, system, tools and messages that affect the
/// prompt, per the vendor's `unavailable` reason.
const PROMPT_PARAMETERS: [&str; 5] = [
    "tool_choice",
    "thinking",
    "context_management",
    "output_config",
    "output_format",
];

/// Whether the request opts in to cache diagnostics (a Claude model and the `diagnostics`
/// object; the beta is no longer needed): `Some(previous_message_id)`, `None` when it does not; a malformed
/// `diagnostics` object is refused.
fn asks_diagnostics(model: &str, v: &Value) -> Checked<Option<Option<String>>> {
    let Some(diagnostics) = v.get("diagnostics") else {
        return Ok(None);
    };
    if !is_anthropic(model) {
        return Ok(None);
    }
    let fields = diagnostics
        .as_object()
        .ok_or("diagnostics: Input should be a valid dictionary")?;
    for key in fields.keys() {
        if key != "previous_message_id" {
            return Err(format!("diagnostics.{key}: Extra inputs are not permitted").into());
        }
    }
    match fields.get("previous_message_id") {
        None | Some(Value::Null) => Ok(Some(None)),
        Some(Value::String(id)) if id.starts_with("msg_") => Ok(Some(Some(id.clone()))),
        Some(_) => Err(PREVIOUS_ID_MESSAGE.into()),
    }
}

/// What the stand-in keeps of an opted-in request for the cache diagnostics: as the vendor's,
/// hashes and sizes only — of the model, `system`, each tool (the deferred section as one),
/// each message (`cache_control` markers and dropped thinking left out, as in the usage), and
/// of the other prompt-affecting parameters with the set of betas.
struct Fingerprint {
    model: String,
    /// `(part, hash, bytes)` in the order of the request's bytes.
    units: Vec<(Part, u64, u64)>,
    parameters: u64,
    total: u64,
}

impl Fingerprint {
    fn of(v: &Value, betas: &HashSet<&str>, bytes: &[u8], units: &Units) -> Self {
        let mut parameters = String::new();
        for key in PROMPT_PARAMETERS {
            canonical(v.get(key).unwrap_or(&Value::Null), &mut parameters);
        }
        // The diagnostics' own (no longer needed) beta changes nothing of the prompt.
        let mut betas: Vec<&str> = betas
            .iter()
            .copied()
            .filter(|b| *b != DIAGNOSIS_BETA)
            .collect();
        betas.sort_unstable();
        parameters.push_str(&betas.join(","));
        Fingerprint {
            model: v["model"].as_str().unwrap_or_default().to_owned(),
            units: units
                .iter()
                .map(|&(part, a, b)| (part, fnv(FNV_START, &bytes[a..b]), (b - a) as u64))
                .collect(),
            parameters: fnv(FNV_START, parameters.as_bytes()),
            total: bytes.len() as u64,
        }
    }

    fn part(&self, part: Part) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.units
            .iter()
            .filter(move |u| u.0 == part)
            .map(|&(_, hash, len)| (hash, len))
    }

    /// `diagnostics` for `now` against this earlier request: the first divergence, the model
    /// first (it is in no prefix: the cache is per model), then where the prompt prefix
    /// diverges, in its order (the tools, `system`), then the other prompt-affecting
    /// parameters (`unavailable`), then the messages, of which this request's must be a prefix
    /// of `now`'s (appended to, not altered, reordered or removed).
    /// `cache_missed_input_tokens` is the stand-in's estimate: this request's tokens
    /// (⌈bytes / 4⌉, as the usage) from the first unit that differs.
    fn compare(&self, now: &Fingerprint) -> Value {
        let same = |part: Part| self.part(part).map(|u| u.0).eq(now.part(part).map(|u| u.0));
        let reason = |kind: &str, from: u64| {
            json!({"cache_miss_reason": {
                "type": kind,
                "cache_missed_input_tokens": self.total.saturating_sub(from).div_ceil(4),
            }})
        };
        if self.model != now.model {
            return reason("model_changed", 0);
        }
        // Where the requests' units first differ (a unit one of them lacks differs).
        let mut from = 0;
        for (i, &(part, hash, len)) in self.units.iter().enumerate() {
            match now.units.get(i) {
                Some(&(p, h, _)) if p == part && h == hash => from += len,
                _ => break,
            }
        }
        if !same(Part::Tool) {
            return reason("tools_changed", from);
        }
        if !same(Part::System) {
            return reason("system_changed", from);
        }
        if self.parameters != now.parameters {
            return json!({"cache_miss_reason": {"type": "unavailable"}});
        }
        let appended = self
            .part(Part::Message)
            .map(|u| u.0)
            .zip(now.part(Part::Message).map(|u| u.0))
            .all(|(a, b)| a == b)
            && self.part(Part::Message).count() <= now.part(Part::Message).count();
        if !appended {
            return reason("messages_changed", from);
        }
        Value::Null
    }
}

/// An accepted request's answer: the vendor's body, the test figures, and how to send it.
#[derive(Debug, PartialEq)]
struct Answered {
    /// The Messages-API response body.
    body: Value,
    total: u64,
    cached: u64,
    /// Whether the request set `"stream": true`.
    stream: bool,
    /// Whether [`CUT_OFF_HEADER`] asked for the body to be cut off.
    cut: bool,
    /// Where the deltas are split and the body is cut: the same for the same request of a
    /// session.
    seed: u64,
}

impl std::ops::Index<&str> for Answered {
    type Output = Value;

    fn index(&self, key: &str) -> &Value {
        &self.body[key]
    }
}

/// xorshift64, seeded per request: where a stream's deltas are split.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self.0.max(1);
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }

    /// `text` in one to four pieces, split at char boundaries.
    fn pieces(&mut self, text: &str) -> Vec<String> {
        let mut cuts: Vec<usize> = (0..self.below(4))
            .map(|_| self.below(text.len() + 1))
            .filter(|&i| 0 < i && i < text.len() && text.is_char_boundary(i))
            .collect();
        cuts.sort_unstable();
        cuts.dedup();
        let mut out = Vec::with_capacity(cuts.len() + 1);
        let mut from = 0;
        for at in cuts {
            out.push(text[from..at].to_owned());
            from = at;
        }
        out.push(text[from..].to_owned());
        out
    }

    /// A char boundary of `text` in its middle half: where a body is cut off.
    fn cut_point(&mut self, text: &str) -> usize {
        let at = text.len() / 4 + self.below(text.len() / 2 + 1);
        (at..=text.len())
            .find(|&i| text.is_char_boundary(i))
            .unwrap_or(text.len())
    }
}

/// The answer as the vendor streams it: `message_start`, each block's start, deltas and stop,
/// `message_delta`, `message_stop`, with `ping`s among them; SSE text.
fn sse(answered: &Answered) -> String {
    let body = &answered.body;
    let mut rng = Rng(answered.seed);
    let mut events = Vec::new();
    let mut start = body.clone();
    start["content"] = json!([]);
    start["stop_reason"] = Value::Null;
    start["stop_sequence"] = Value::Null;
    start["usage"]["output_tokens"] = json!(1);
    events.push(json!({"type": "message_start", "message": start}));
    let ping = json!({"type": "ping"});
    for (index, block) in body["content"].as_array().into_iter().flatten().enumerate() {
        if index > 0 && rng.below(2) == 0 {
            events.push(ping.clone());
        }
        let delta =
            |delta: Value| json!({"type": "content_block_delta", "index": index, "delta": delta});
        let string = |key: &str| block[key].as_str().unwrap_or_default().to_owned();
        match block["type"].as_str() {
            Some("text") => {
                let opening = json!({"type": "text", "text": ""});
                events.push(json!({"type": "content_block_start", "index": index, "content_block": opening}));
                for piece in rng.pieces(&string("text")) {
                    events.push(delta(json!({"type": "text_delta", "text": piece})));
                }
            }
            Some("thinking") => {
                let opening = json!({"type": "thinking", "thinking": "", "signature": ""});
                events.push(json!({"type": "content_block_start", "index": index, "content_block": opening}));
                for piece in rng.pieces(&string("thinking")) {
                    events.push(delta(json!({"type": "thinking_delta", "thinking": piece})));
                }
                let signature = string("signature");
                events.push(delta(
                    json!({"type": "signature_delta", "signature": signature}),
                ));
            }
            Some("tool_use") => {
                let mut opening = block.clone();
                opening["input"] = json!({});
                events.push(json!({"type": "content_block_start", "index": index, "content_block": opening}));
                events.push(delta(
                    json!({"type": "input_json_delta", "partial_json": ""}),
                ));
                let input = serde_json::to_string_pretty(&block["input"]).unwrap();
                for piece in rng.pieces(&input) {
                    events.push(delta(
                        json!({"type": "input_json_delta", "partial_json": piece}),
                    ));
                }
            }
            // `redacted_thinking`: whole in its start, no delta.
            _ => {
                events.push(
                    json!({"type": "content_block_start", "index": index, "content_block": block}),
                );
            }
        }
        if index == 0 {
            // The vendor's examples: a `ping` right after the first block's start.
            let start = events
                .iter()
                .rposition(|e| e["type"] == "content_block_start")
                .unwrap();
            events.insert(start + 1, ping.clone());
        }
        events.push(json!({"type": "content_block_stop", "index": index}));
    }
    let usage = &body["usage"];
    events.push(json!({
        "type": "message_delta",
        "delta": {"stop_reason": body["stop_reason"], "stop_sequence": body["stop_sequence"]},
        "usage": {
            "input_tokens": usage["input_tokens"],
            "cache_creation_input_tokens": usage["cache_creation_input_tokens"],
            "cache_read_input_tokens": usage["cache_read_input_tokens"],
            "output_tokens": usage["output_tokens"]
        }
    }));
    if rng.below(2) == 0 {
        events.push(ping);
    }
    events.push(json!({"type": "message_stop"}));
    let mut text = String::new();
    for event in events {
        let _ = write!(
            text,
            "event: {}\ndata: {event}\n\n",
            event["type"].as_str().unwrap()
        );
    }
    text
}

/// The thinking blocks of an answer on a model that binds thinking, recorded in the session:
/// a `thinking` block and, with [`REDACTED_HEADER`], a `redacted_thinking` block, both bound
/// to the request's conversation and to the thinking blocks it kept.
fn produce(
    state: &mut SessionState,
    conversation: &Conversation,
    mut kept: Vec<String>,
    text: &str,
    headers: &Headers,
) -> Vec<Value> {
    let bound = conversation.answer();
    let redacted_too = header(headers, REDACTED_HEADER) == Some("true");
    let mut content = Vec::new();
    let mut signatures = Vec::new();
    for redacted in [false, true]
        .into_iter()
        .take(1 + usize::from(redacted_too))
    {
        state.blocks += 1;
        let signature = bound.signature(state.blocks);
        let (block, covered) = if redacted {
            let block = json!({"type": "redacted_thinking", "data": signature});
            (block, signature.clone())
        } else {
            let thinking = format!("Thinking about request {}.", state.requests);
            let block = json!({"type": "thinking", "thinking": thinking, "signature": signature});
            (block, thinking)
        };
        state.produced.insert(
            signature.clone(),
            Produced {
                answer: text.to_owned(),
                content: covered,
                redacted,
                bound,
                before: kept.clone(),
            },
        );
        kept.push(signature.clone());
        signatures.push(signature);
        content.push(block);
    }
    state.answers.insert(text.to_owned(), signatures);
    content
}

/// The vendor's minimum cacheable prompt length, in tokens (prompt-caching page, read
/// 2026-12-01): 1,024 on Opus 4.8 and Sonnet 5, 512 on the other current Claude models. A
/// model the page does not list (a later one) is given the largest figure it documents: the
/// stand-in cannot know it, and the larger minimum caches less.
fn min_cache_tokens(model: &str) -> u64 {
    const LISTED_512: &[&str] = &[
        "claude-fable-5-2",
        "claude-mythos-5-2",
        "claude-fable-5-1",
        "claude-mythos-5-1",
        "claude-fable-5",
        "claude-mythos-5",
        "claude-opus-5-5",
        "claude-opus-5",
        "claude-sonnet-5-5",
        "claude-haiku-5-5",
    ];
    let family = model
        .len()
        .checked_sub(9)
        .filter(|&i| {
            model[i..].starts_with(['-', '@']) && model[i + 1..].bytes().all(|b| b.is_ascii_digit())
        })
        .map_or(model, |i| &model[..i]);
    match family {
        m if !is_anthropic(m) => 0,
        m if LISTED_512.contains(&m) => 512,
        _ => 1024,
    }
}

/// `text` without its `,"cache_control":{...}` breakpoints: a breakpoint is not part of the
/// prompt, and the crate moves it from request to request (a quote inside a JSON string is
/// escaped, so the unescaped key is always a key). The vendor's breakpoint is the parameter
/// `{"type": "ephemeral"}`, with an optional `ttl` (prompt-caching page, read 2026-12-06): a
/// key of that name whose value is anything else (a property of a tool's `input_schema`) is
/// part of the tool's definition, which the vendor counts as prompt.
fn without_markers(text: &str) -> String {
    const KEY: &str = "\"cache_control\":{";
    if !text.contains(KEY) {
        return text.into();
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find(KEY) {
        let after = &rest[i + KEY.len()..];
        let Some(j) = after.find('}') else { break };
        let value = &after[..j];
        let breakpoint = !value.contains('{')
            && value
                .split(',')
                .any(|entry| entry.trim() == r#""type":"ephemeral""#);
        if !breakpoint {
            out.push_str(&rest[..i + KEY.len()]);
            rest = &rest[i + KEY.len()..];
            continue;
        }
        let tail = &after[j + 1..];
        if rest[..i].ends_with(',') {
            // `,"cache_control":{...}`: the entry and the comma before it.
            out.push_str(&rest[..i - 1]);
            rest = tail;
        } else if let Some(tail) = tail.strip_prefix(',') {
            // `{"cache_control":{...},`: the entry and the comma after it.
            out.push_str(&rest[..i]);
            rest = tail;
        } else {
            out.push_str(&rest[..i]);
            rest = tail;
        }
    }
    out.push_str(rest);
    out
}

/// The raw JSON of the parts reference §9 cuts a body into.
#[derive(Deserialize)]
struct RawBody<'a> {
    #[serde(borrow, default)]
    tools: Vec<&'a RawValue>,
    #[serde(borrow, default)]
    system: Option<&'a RawValue>,
    #[serde(borrow)]
    messages: Vec<&'a RawValue>,
}

/// reference §9: non-deferred tools, the fixed deferred section when any declaration is deferred,
/// `system`, each message — concatenated, as sent (a by-value definition is part of its
/// message), without the content blocks at `dropped` (`(message, block)` indices). The tests'
/// reading of the body (the stand-in itself cuts it with [`cut`]).
#[cfg(test)]
fn segments(
    body: &str,
    v: &Value,
    section: u32,
    dropped: &[(usize, usize)],
) -> Result<Vec<u8>, String> {
    cut(body, v, section, dropped).map(|(bytes, _, _)| bytes)
}

/// A part of the request the cache diagnostics compare, in the order of the bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Part {
    /// One non-deferred tool, or the deferred section.
    Tool,
    System,
    Message,
}

/// [`segments`], and the part each range of the bytes is: `(part, start, end)`.
type Units = Vec<(Part, usize, usize)>;

fn cut(
    body: &str,
    v: &Value,
    section: u32,
    dropped: &[(usize, usize)],
) -> Result<(Vec<u8>, Units, Vec<End>), String> {
    let raw: RawBody<'_> = serde_json::from_str(body).map_err(|e| e.to_string())?;
    let mut out = Vec::with_capacity(body.len());
    let mut units = Units::new();
    let mut ends = Vec::new();
    let mut unit = |out: &mut Vec<u8>, part: Part, bytes: &[u8]| {
        let start = out.len();
        out.extend_from_slice(bytes);
        units.push((part, start, out.len()));
    };
    let mut any_deferred = false;
    for (i, tool) in raw.tools.iter().enumerate() {
        if is_deferred(&v["tools"][i]) {
            any_deferred = true;
        } else {
            unit(&mut out, Part::Tool, without_markers(tool.get()).as_bytes());
        }
    }
    if any_deferred {
        unit(&mut out, Part::Tool, &vec![b'#'; section as usize]);
    }
    if let Some(system) = raw.system {
        unit(&mut out, Part::System, system.get().as_bytes());
    }
    for (i, m) in raw.messages.iter().enumerate() {
        let drop: Vec<usize> = dropped
            .iter()
            .filter(|(k, _)| *k == i)
            .map(|&(_, j)| j)
            .collect();
        let sent = if drop.is_empty() {
            m.get().to_owned()
        } else {
            without_blocks(m.get(), &drop)?
        };
        let message = without_markers(&sent);
        ends.extend(message_ends(&message, &sent, out.len()));
        unit(&mut out, Part::Message, message.as_bytes());
    }
    Ok((out, units, ends))
}

/// A message's raw JSON without its content blocks at `drop`; every other byte as sent.
fn without_blocks(message: &str, drop: &[usize]) -> Result<String, String> {
    #[derive(Deserialize)]
    struct RawMessage<'a> {
        #[serde(borrow)]
        content: &'a RawValue,
    }
    let raw: RawMessage<'_> = serde_json::from_str(message).map_err(|e| e.to_string())?;
    let content = raw.content.get();
    let blocks: Vec<&RawValue> = serde_json::from_str(content).map_err(|e| e.to_string())?;
    // `content` borrows from `message`: its offset is where the array starts.
    let start = content.as_ptr() as usize - message.as_ptr() as usize;
    let end = start + content.len();
    let kept: Vec<&str> = blocks
        .iter()
        .enumerate()
        .filter(|(j, _)| !drop.contains(j))
        .map(|(_, b)| b.get())
        .collect();
    Ok(format!(
        "{}[{}]{}",
        &message[..start],
        kept.join(","),
        &message[end..]
    ))
}

fn is_deferred(tool: &Value) -> bool {
    tool.get("defer_loading") == Some(&Value::Bool(true))
}

fn is_thinking(block: &Value) -> bool {
    matches!(
        block.get("type").and_then(Value::as_str),
        Some("thinking" | "redacted_thinking")
    )
}

fn role(m: &Value) -> Option<&str> {
    m.get("role").and_then(Value::as_str)
}

/// The API versions the vendor lists (<https://platform.claude.com/docs/en/api/versioning>,
/// read 2026-12-06): `2023-01-01`, `2023-06-01` and `2026-10-21`.
const API_VERSIONS: [&str; 3] = ["2023-01-01", "2023-06-01", "2026-10-21"];

/// What `anthropic-version: 2026-10-21` refuses on the Claude API (the versioning page and its
/// migration guide, <https://platform.claude.com/docs/en/api/migration-2026-10-21>, read
/// 2026-12-06): the `temperature`, `top_p` and `top_k` parameters, whatever their value; a
/// `document` block directly in an assistant message; a `text` block with a non-empty
/// `citations` array in a user message, directly or inside a `search_result` block. The
/// official SDKs' new majors (Python 2.x, TypeScript 1.x) send this version by default. The
/// wording of the sampling refusal is the one quoted from the vendor's answers in public
/// write-ups ("temperature: Extra inputs are not permitted"); the other two are the stand-in's.
fn check_api_version(version: &str, v: &Value) -> Checked {
    if !API_VERSIONS.contains(&version) {
        return Err(format!("anthropic-version: unknown version `{version}`").into());
    }
    if version != "2026-10-21" {
        return Ok(());
    }
    for key in ["temperature", "top_p", "top_k"] {
        if v.get(key).is_some() {
            return Err(format!("{key}: Extra inputs are not permitted").into());
        }
    }
    let cited =
        |b: &Value| b["type"] == "text" && b["citations"].as_array().is_some_and(|c| !c.is_empty());
    for (i, m) in v["messages"].as_array().into_iter().flatten().enumerate() {
        for (j, b) in m["content"].as_array().into_iter().flatten().enumerate() {
            let at = format!("messages.{i}.content.{j}");
            match role(m) {
                Some("assistant") if b["type"] == "document" => {
                    return Err(format!(
                        "{at}: document blocks are not allowed in assistant messages"
                    )
                    .into());
                }
                Some("user")
                    if cited(b)
                        || (b["type"] == "search_result"
                            && b["content"].as_array().into_iter().flatten().any(cited)) =>
                {
                    return Err(format!(
                        "{at}: text blocks with citations are not allowed in user messages"
                    )
                    .into());
                }
                _ => {}
            }
        }
    }
    Ok(())
}

/// What any Messages-API request must be.
fn check_shape(headers: &Headers, v: &Value) -> Checked {
    if header(headers, "anthropic-version").is_none() {
        return Err("missing anthropic-version header".into());
    }
    if header(headers, "content-type") != Some("application/json") {
        return Err("content-type must be application/json".into());
    }
    let model = v
        .get("model")
        .and_then(Value::as_str)
        .filter(|m| !m.is_empty())
        .ok_or("model: a non-empty string is required")?;
    let anthropic = is_anthropic(model);
    if anthropic {
        check_api_version(header(headers, "anthropic-version").unwrap_or_default(), v)?;
    }
    if v.get("max_tokens")
        .and_then(Value::as_u64)
        .is_none_or(|n| n == 0)
    {
        return Err("max_tokens: a positive integer is required".into());
    }
    // `string | TextBlockParam[]` (the Messages API reference, read 2026-12-06): harnesses such
    // as Claude Code send text blocks, with their own breakpoints.
    match v.get("system") {
        None | Some(Value::String(_)) => {}
        Some(Value::Array(blocks)) => {
            if blocks.is_empty() {
                return Err("system: at least one text block is required".into());
            }
            for (i, b) in blocks.iter().enumerate() {
                if b["type"] != "text" || b["text"].as_str().is_none_or(str::is_empty) {
                    return Err(format!("system.{i}: a non-empty text block is required").into());
                }
                if let Some(c) = b.get("cache_control") {
                    check_cache_control(&format!("system.{i}.cache_control"), c)?;
                }
            }
        }
        Some(_) => return Err("system: must be a string or a list of text blocks".into()),
    }
    if let Some(c) = v.get("cache_control") {
        check_cache_control("cache_control", c)?;
    }
    if v.get("stream").is_some_and(|x| !x.is_boolean()) {
        return Err("stream: Input should be a valid boolean".into());
    }
    if let Some(choice) = v.get("tool_choice") {
        let ty = choice
            .get("type")
            .and_then(Value::as_str)
            .ok_or("tool_choice.type: Field required")?;
        match ty {
            "auto" | "any" | "none" => {}
            "tool" => {
                choice
                    .get("name")
                    .and_then(Value::as_str)
                    .ok_or("tool_choice.tool.name: Field required")?;
            }
            _ => return Err(format!("tool_choice.type: Input tag '{ty}' does not match any of the expected tags: 'auto', 'any', 'tool', 'none'").into()),
        }
    }
    if let Some(thinking) = v.get("thinking") {
        let ty = thinking
            .get("type")
            .and_then(Value::as_str)
            .ok_or("thinking.type: Field required")?;
        // `between_tools`: Sonnet 5.5's lowest setting (its "what's new" page, read 2026-12-06).
        if !matches!(ty, "adaptive" | "enabled" | "disabled" | "between_tools") {
            return Err(format!("thinking.type: Input tag '{ty}' does not match any of the expected tags: 'adaptive', 'enabled', 'disabled', 'between_tools'").into());
        }
    }
    let mut names = HashSet::new();
    if let Some(tools) = v.get("tools") {
        let tools = tools
            .as_array()
            .ok_or("tools: Input should be a valid list")?;
        for (i, t) in tools.iter().enumerate() {
            let (name, _) = check_tool(&format!("tools.{i}.custom"), t)?;
            if !names.insert(name) {
                return Err("tools: Tool names must be unique.".into());
            }
        }
    }
    let messages = v
        .get("messages")
        .and_then(Value::as_array)
        .filter(|m| !m.is_empty())
        .ok_or("messages: a non-empty array is required")?;
    if role(&messages[0]) != Some("user") {
        return Err("messages.0: the first message must use the user role".into());
    }
    for (i, m) in messages.iter().enumerate() {
        if !matches!(role(m), Some("user" | "assistant" | "system")) {
            return Err(format!("messages.{i}.role: must be user, assistant or system").into());
        }
        let blocks = match m.get("content") {
            Some(Value::String(s)) if !s.is_empty() => continue,
            Some(Value::Array(blocks)) if !blocks.is_empty() => blocks,
            _ => {
                return Err(
                    format!("messages.{i}.content: must be a non-empty string or array").into(),
                );
            }
        };
        for (j, b) in blocks.iter().enumerate() {
            let at = format!("messages.{i}.content.{j}");
            let string = |key: &str| b.get(key).and_then(Value::as_str);
            match b.get("type").and_then(Value::as_str) {
                Some("text") if string("text").is_some_and(|t| !t.is_empty()) => {}
                Some("text") => {
                    return Err(format!("{at}: text content blocks must be non-empty").into());
                }
                Some(ty @ ("thinking" | "redacted_thinking")) if role(m) != Some("assistant") => {
                    return Err(format!(
                        "{at}: {ty} blocks are only allowed in assistant messages"
                    )
                    .into());
                }
                Some("thinking") if string("thinking").is_none() => {
                    return Err(format!("{at}.thinking.thinking: Field required").into());
                }
                Some("thinking") if anthropic && string("signature").is_none_or(str::is_empty) => {
                    return Err(format!("{at}.thinking.signature: Field required").into());
                }
                Some("redacted_thinking") if string("data").is_none() => {
                    return Err(format!("{at}.redacted_thinking.data: Field required").into());
                }
                Some(_) => {}
                None => return Err(format!("{at}.type: required").into()),
            }
            if let Some(c) = b.get("cache_control") {
                check_cache_control(&format!("{at}.cache_control"), c)?;
            }
        }
        check_tool_results(messages, i)?;
    }
    Ok(())
}

/// Each `tool_use` block of the assistant message `messages[i]` has its `tool_result` in the
/// next message (wording from the vendor's answers quoted in public issues, e.g.
/// anthropics/claude-code#5989).
fn check_tool_results(messages: &[Value], i: usize) -> Checked {
    fn blocks(m: &Value) -> &[Value] {
        m["content"].as_array().map_or(&[][..], Vec::as_slice)
    }
    if role(&messages[i]) != Some("assistant") {
        return Ok(());
    }
    let answered: HashSet<&str> = messages
        .get(i + 1)
        .filter(|next| role(next) == Some("user"))
        .map(blocks)
        .unwrap_or_default()
        .iter()
        .filter(|b| b["type"] == "tool_result")
        .filter_map(|b| b["tool_use_id"].as_str())
        .collect();
    let missing: Vec<&str> = blocks(&messages[i])
        .iter()
        .filter(|b| b["type"] == "tool_use")
        .filter_map(|b| b["id"].as_str())
        .filter(|id| !answered.contains(id))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(format!(
        "messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: {}. Each `tool_use` block must have a corresponding `tool_result` block in the next message.",
        missing.join(", ")
    )
    .into())
}

/// One custom tool, a `tools` entry or a by-value definition, at `path` (`tools.0.custom`):
/// its name and whether it is deferred.
fn check_tool<'v>(path: &str, t: &'v Value) -> Checked<(&'v str, bool)> {
    const KEYS: &[&str] = &[
        "type",
        "name",
        "description",
        "input_schema",
        "defer_loading",
        "strict",
        "input_examples",
        "eager_input_streaming",
        "allowed_callers",
        "cache_control",
    ];
    let t = t
        .as_object()
        .ok_or(format!("{path}: Input should be a valid dictionary"))?;
    if let Some(k) = t.keys().find(|k| !KEYS.contains(&k.as_str())) {
        return Err(format!("{path}.{k}: Extra inputs are not permitted").into());
    }
    if t.get("type").is_some_and(|ty| ty != "custom") {
        return Err(format!("{path}.type: the stand-in takes custom tools only").into());
    }
    let name = t
        .get("name")
        .and_then(Value::as_str)
        .filter(|n| {
            (1..=128).contains(&n.len())
                && n.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        })
        .ok_or(format!(
            "{path}.name: String should match pattern '^[a-zA-Z0-9_-]{{1,128}}$'"
        ))?;
    if t.get("description").is_some_and(|d| !d.is_string()) {
        return Err(format!("{path}.description: Input should be a valid string").into());
    }
    let schema = t
        .get("input_schema")
        .ok_or(format!("{path}.input_schema: Field required"))?
        .as_object()
        .ok_or(format!(
            "{path}.input_schema: Input should be a valid dictionary"
        ))?;
    match schema.get("type") {
        None => return Err(format!("{path}.input_schema.type: Field required").into()),
        Some(ty) if ty != "object" => {
            return Err(format!("{path}.input_schema.type: Input should be 'object'").into());
        }
        Some(_) => {}
    }
    for k in ["defer_loading", "strict", "eager_input_streaming"] {
        if t.get(k).is_some_and(|x| !x.is_boolean()) {
            return Err(format!("{path}.{k}: Input should be a valid boolean").into());
        }
    }
    for k in ["input_examples", "allowed_callers"] {
        if t.get(k).is_some_and(|x| !x.is_array()) {
            return Err(format!("{path}.{k}: Input should be a valid list").into());
        }
    }
    if let Some(c) = t.get("cache_control") {
        check_cache_control(&format!("{path}.cache_control"), c)?;
    }
    Ok((name, t.get("defer_loading") == Some(&Value::Bool(true))))
}

/// `{"type":"ephemeral"}` with an optional `ttl` of `5m` or `1h`.
fn check_cache_control(path: &str, c: &Value) -> Checked {
    let c = c
        .as_object()
        .ok_or(format!("{path}: Input should be a valid dictionary"))?;
    if c.get("type").and_then(Value::as_str) != Some("ephemeral") {
        return Err(format!("{path}.type: Input should be 'ephemeral'").into());
    }
    if let Some(k) = c.keys().find(|k| !matches!(k.as_str(), "type" | "ttl")) {
        return Err(format!("{path}.{k}: Extra inputs are not permitted").into());
    }
    if c.get("ttl").is_some_and(|t| t != "5m" && t != "1h") {
        return Err(format!("{path}.ttl: Input should be '5m' or '1h'").into());
    }
    Ok(())
}

/// What the vendor refuses on some models: forced `tool_choice`, assistant prefill,
/// `cache_control` on a deferred tool, `thinking.block_binding` without its beta.
fn check_model_rules(headers: &Headers, v: &Value) -> Checked {
    let model = v["model"].as_str().unwrap_or_default();
    if !is_anthropic(model) {
        return Ok(());
    }
    if is_model(model, FORCED_TOOL_CHOICE_REFUSED)
        && matches!(
            v.pointer("/tool_choice/type").and_then(Value::as_str),
            Some("any" | "tool")
        )
    {
        return Err(FORCED_TOOL_CHOICE_MESSAGE.into());
    }
    if v["messages"]
        .as_array()
        .and_then(|m| m.last())
        .and_then(role)
        == Some("assistant")
    {
        return Err(PREFILL_MESSAGE.into());
    }
    for (i, t) in v["tools"].as_array().into_iter().flatten().enumerate() {
        if is_deferred(t) && t.get("cache_control").is_some() {
            return Err(
                format!("tools.{i}.custom: A deferred tool can't carry `cache_control`.").into(),
            );
        }
    }
    if let Some(binding) = v.pointer("/thinking/block_binding") {
        let ty = v.pointer("/thinking/type").and_then(Value::as_str);
        let ty = ty.unwrap_or_default();
        if !matches!(ty, "adaptive" | "enabled") || !betas(headers).contains(BINDING_BETA) {
            return Err(
                format!("thinking.{ty}.block_binding: Extra inputs are not permitted").into(),
            );
        }
        let binding = binding
            .as_object()
            .ok_or("thinking.block_binding: Input should be a valid dictionary")?;
        for (k, x) in binding {
            if k != "prefix_mismatch_behavior" {
                return Err(
                    format!("thinking.block_binding.{k}: Extra inputs are not permitted").into(),
                );
            }
            if x != "error" && x != "drop_block" {
                return Err("thinking.block_binding.prefix_mismatch_behavior: Input should be 'error' or 'drop_block'".into());
            }
        }
    }
    Ok(())
}

/// The vendor's refusals for mid-conversation tool changes, by reference and by value.
fn check_tool_changes(headers: &Headers, v: &Value) -> Checked {
    let betas = betas(headers);
    let inline = betas.contains(INLINE_BETA);
    let changes_beta = inline || betas.contains(BETA);
    let anthropic = is_anthropic(v["model"].as_str().unwrap_or_default());
    // Names a reference can resolve: declared in `tools` or defined earlier by value.
    let mut known = HashSet::new();
    let mut offered = HashSet::new();
    for t in v["tools"].as_array().into_iter().flatten() {
        let name = t["name"].as_str().unwrap_or_default();
        known.insert(name);
        if !is_deferred(t) {
            offered.insert(name);
        }
    }
    if !inline && !known.is_empty() && offered.is_empty() {
        return Err(
            "tools: deferred declarations need at least one declaration without defer_loading"
                .into(),
        );
    }
    let messages = v["messages"].as_array().map_or(&[][..], Vec::as_slice);
    for (i, m) in messages.iter().enumerate() {
        let blocks = m
            .get("content")
            .and_then(Value::as_array)
            .map_or(&[][..], Vec::as_slice);
        let is_change = |b: &Value| {
            matches!(
                b.get("type").and_then(Value::as_str),
                Some("tool_addition" | "tool_removal")
            )
        };
        if role(m) != Some("system") {
            if blocks.iter().any(is_change) {
                return Err(format!(
                    "messages.{i}: tool changes are only allowed in system messages"
                )
                .into());
            }
            continue;
        }
        match messages.get(i + 1).and_then(role) {
            None | Some("assistant") => {}
            Some(next) => {
                return Err(format!(
                    "messages.{i}: a system message must be followed by an assistant message or end the conversation, not a {next} message"
                ).into());
            }
        }
        if messages[..i]
            .iter()
            .rev()
            .find(|p| role(p) != Some("system"))
            .and_then(role)
            != Some("user")
        {
            return Err(format!(
                "messages.{i}: a system message must come after a user or tool-result turn"
            )
            .into());
        }
        for (j, b) in blocks.iter().enumerate() {
            if !is_change(b) {
                continue;
            }
            let at = format!("messages.{i}.content.{j}");
            let ty = b["type"].as_str().unwrap_or_default();
            if !changes_beta {
                return Err(
                    format!("{at}: {ty} requires the {BETA} or the {INLINE_BETA} beta").into(),
                );
            }
            match b.pointer("/tool/type").and_then(Value::as_str) {
                Some("tool_reference") => {
                    let name = b
                        .pointer("/tool/name")
                        .and_then(Value::as_str)
                        .ok_or(format!("{at}.tool.name: Field required"))?;
                    if !known.contains(name) {
                        return Err(Fault::coded(
                            "tool_reference_unresolved",
                            format!(
                                "{at}: {ty} of `{name}`, which names no tool declared in `tools` or defined earlier"
                            ),
                        ));
                    }
                    if ty == "tool_addition" {
                        if !offered.insert(name) {
                            return Err(format!(
                                "{at}: tool_addition of `{name}`, which is already offered"
                            )
                            .into());
                        }
                    } else if !offered.remove(name) {
                        return Err(format!(
                            "{at}: tool_removal of `{name}`, which is not offered"
                        )
                        .into());
                    }
                }
                Some("tool_definition") if ty == "tool_removal" => {
                    return Err(format!("{at}.tool: tool_removal takes a tool_reference").into());
                }
                Some("tool_definition") => {
                    if !inline {
                        return Err(format!(
                            "{at}: a tool_definition requires the {INLINE_BETA} beta ({BETA} does not support definitions by value)"
                        ).into());
                    }
                    let definition = b
                        .pointer("/tool/definition")
                        .ok_or(format!("{at}.tool.definition: Field required"))?;
                    let (name, deferred) =
                        check_tool(&format!("{at}.tool.definition.custom"), definition)?;
                    if anthropic && definition.get("cache_control").is_some() {
                        if deferred {
                            return Err(format!(
                                "{at}.tool.definition: A deferred definition can't carry `cache_control`."
                            ).into());
                        }
                        if b.get("cache_control").is_some() {
                            return Err(format!(
                                "{at}: `cache_control` goes on the block or in the definition, not both."
                            ).into());
                        }
                    }
                    // A new definition replaces the name's earlier one from here on (an
                    // identical re-send changes nothing); a deferred one is withheld until a
                    // by-reference addition surfaces it.
                    known.insert(name);
                    if deferred {
                        offered.remove(name);
                    } else {
                        offered.insert(name);
                    }
                }
                _ => {
                    return Err(format!(
                        "{at}.tool.type: must be tool_reference or tool_definition"
                    )
                    .into());
                }
            }
        }
    }
    Ok(())
}

/// FNV-1a, 64 bits: a hash that stays the same across processes and Rust versions.
fn fnv(mut h: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

const FNV_START: u64 = 0xcbf2_9ce4_8422_2325;

/// JSON with object keys sorted, so that key order is not a change.
fn canonical(v: &Value, out: &mut String) {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push('{');
            for (n, k) in keys.into_iter().enumerate() {
                if n > 0 {
                    out.push(',');
                }
                let _ = write!(out, "{}:", Value::String(k.clone()));
                canonical(&m[k], out);
            }
            out.push('}');
        }
        Value::Array(a) => {
            out.push('[');
            for (n, x) in a.iter().enumerate() {
                if n > 0 {
                    out.push(',');
                }
                canonical(x, out);
            }
            out.push(']');
        }
        scalar => {
            let _ = write!(out, "{scalar}");
        }
    }
}

/// A tool or content block as a thinking block binds it: without its `cache_control` (a cache
/// breakpoint changes no prompt text), a by-value definition's included.
fn unmarked(block: &Value) -> Value {
    let mut block = block.clone();
    if let Some(m) = block.as_object_mut() {
        m.remove("cache_control");
    }
    if let Some(Value::Object(d)) = block.pointer_mut("/tool/definition") {
        d.remove("cache_control");
    }
    block
}

/// Content blocks as a thinking block binds them: no thinking blocks, no cache breakpoints.
fn bound_blocks(blocks: &[Value]) -> Value {
    blocks
        .iter()
        .filter(|b| !is_thinking(b))
        .map(unmarked)
        .collect()
}

/// What a thinking block's signature binds: hashes of `system`, `tools` and the messages
/// before it.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Bound {
    system: u64,
    tools: u64,
    messages: u64,
}

impl Bound {
    /// Hex of the three hashes' hash, then the block counter.
    fn signature(&self, counter: u64) -> String {
        format!("{:016x}{counter:08x}", self.digest())
    }

    fn digest(&self) -> u64 {
        [self.system, self.tools, self.messages]
            .iter()
            .fold(FNV_START, |h, x| fnv(h, &x.to_le_bytes()))
    }
}

/// A request's `system` and `tools` hashes, and the hash of its messages up to each index
/// (`prefixes[k]` covers messages `0..k`), thinking blocks and cache breakpoints ignored.
struct Conversation {
    system: u64,
    tools: u64,
    prefixes: Vec<u64>,
}

impl Conversation {
    fn of(v: &Value) -> Self {
        let hash = |x: &Value| {
            let mut s = String::new();
            canonical(x, &mut s);
            fnv(FNV_START, s.as_bytes())
        };
        let tools: Value = v["tools"]
            .as_array()
            .map(|t| t.iter().map(unmarked).collect())
            .unwrap_or(Value::Null);
        let mut prefixes = vec![FNV_START];
        for m in v["messages"].as_array().into_iter().flatten() {
            let content = match &m["content"] {
                Value::String(s) => json!([{"type": "text", "text": s}]),
                Value::Array(blocks) => bound_blocks(blocks),
                other => other.clone(),
            };
            let mut s = String::new();
            canonical(&json!({"role": m["role"], "content": content}), &mut s);
            s.push('\n');
            let last = *prefixes.last().unwrap();
            prefixes.push(fnv(last, s.as_bytes()));
        }
        Conversation {
            system: hash(&v["system"]),
            tools: hash(&tools),
            prefixes,
        }
    }

    /// What a block at `messages[k]`, after the content blocks `before` of its message, binds.
    fn bound(&self, k: usize, before: &[Value]) -> Bound {
        let mut s = String::from("|");
        canonical(&bound_blocks(before), &mut s);
        Bound {
            system: self.system,
            tools: self.tools,
            messages: fnv(self.prefixes[k], s.as_bytes()),
        }
    }

    /// What the answer's first block binds: every message of the request.
    fn answer(&self) -> Bound {
        self.bound(self.prefixes.len() - 1, &[])
    }
}

/// The thinking blocks of an accepted request: which ones `drop_block` dropped (and their
/// `input_transformations` entries), which ones are kept (signatures, in order), and which
/// ones the request leaves out of an answer it holds.
#[derive(Default)]
struct ThinkingVerdict {
    dropped: Vec<(usize, usize)>,
    transformations: Vec<Value>,
    kept: Vec<String>,
    omitted: Vec<String>,
}

/// The prefix check on every `thinking` and `redacted_thinking` block the request sends back.
fn check_thinking(
    state: &SessionState,
    betas: &HashSet<&str>,
    v: &Value,
    conversation: &Conversation,
) -> Checked<ThinkingVerdict> {
    let beta = betas.contains(BINDING_BETA);
    let drop = beta
        && v.pointer("/thinking/block_binding/prefix_mismatch_behavior")
            == Some(&json!("drop_block"));
    let mut out = ThinkingVerdict::default();
    // Signatures of the answers the request holds, recognized by their text or their blocks.
    let mut held: Vec<&str> = Vec::new();
    let mut failed = false;
    for (k, m) in v["messages"].as_array().into_iter().flatten().enumerate() {
        if role(m) != Some("assistant") {
            continue;
        }
        let blocks = m["content"].as_array().map_or(&[][..], Vec::as_slice);
        for (j, b) in blocks.iter().enumerate() {
            let at = format!("messages.{k}.content.{j}");
            if !is_thinking(b) {
                if let Some(signatures) = b["text"].as_str().and_then(|t| state.answers.get(t)) {
                    held.extend(signatures.iter().map(String::as_str));
                }
                continue;
            }
            let redacted = b["type"] == "redacted_thinking";
            let (ty, field, signature, covered) = if redacted {
                let data = b["data"].as_str().unwrap_or_default();
                ("redacted_thinking", "data", data, data)
            } else {
                let signature = b["signature"].as_str().unwrap_or_default();
                let thinking = b["thinking"].as_str().unwrap_or_default();
                ("thinking", "signature", signature, thinking)
            };
            // Not a block of this session, or changed since: the signature does not verify,
            // whatever `prefix_mismatch_behavior` says.
            let produced = state
                .produced
                .get(signature)
                .filter(|p| p.redacted == redacted && p.content == covered)
                .ok_or(format!("{at}: Invalid `{field}` in `{ty}` block."))?;
            if let Some(signatures) = state.answers.get(&produced.answer) {
                held.extend(signatures.iter().map(String::as_str));
            }
            let now = conversation.bound(k, &blocks[..j]);
            // Once a block failed under `drop_block`, every later one is dropped unchecked.
            let reason = if failed {
                None
            } else if state.omitted.contains(signature) {
                Some(
                    "The block was left out of an earlier request; once left out, a block must stay out.",
                )
            } else if signature.get(..16) != Some(&format!("{:016x}", now.digest())) {
                Some(if now.system != produced.bound.system {
                    "`system` changed after the block was produced."
                } else if now.tools != produced.bound.tools {
                    "`tools` changed after the block was produced."
                } else {
                    "A message before the block changed after it was produced, or the block moved."
                })
            } else if !produced.before.ends_with(&out.kept) {
                Some(
                    "The thinking blocks before it are not the ones it was produced after: one was left out between them, moved or put back.",
                )
            } else {
                None
            };
            match reason {
                None if !failed => out.kept.push(signature.to_owned()),
                Some(reason) if !drop => {
                    let mut message = format!(
                        "{at}: Invalid `{field}` in `{ty}` block. {BOUND_ELSEWHERE} Remove the block, or set `thinking.block_binding.prefix_mismatch_behavior` to \"drop_block\"."
                    );
                    if !beta {
                        message.push_str(" That setting requires the thinking-binding-controls-2026-08-01 value in the anthropic-beta header.");
                    }
                    message.push(' ');
                    message.push_str(reason);
                    return Err(message.into());
                }
                _ => {
                    failed = true;
                    out.dropped.push((k, j));
                    out.transformations.push(dropped(k, j));
                }
            }
        }
    }
    let mut seen = HashSet::new();
    out.omitted = held
        .into_iter()
        .filter(|s| seen.insert(*s) && !out.kept.iter().any(|k| k == s))
        .map(str::to_owned)
        .collect();
    Ok(out)
}

/// An `input_transformations` entry for a block `drop_block` dropped.
fn dropped(k: usize, j: usize) -> Value {
    json!({
        "type": "thinking_dropped",
        "path": format!("messages.{k}.content.{j}"),
        "reason": "prefix_binding_mismatch"
    })
}

pub mod chat;
#[cfg(any(test, feature = "client"))]
pub mod client;
pub mod responses;

#[cfg(test)]
mod tests {
    use super::*;

    fn post(
        session: &str,
        section_bytes: u32,
        request: &mektpoy::WireRequest,
    ) -> Result<Response, Refused> {
        client::post(session, section_bytes, request.body(), request.headers())
    }

    fn send(
        session: &str,
        section_bytes: u32,
        request: &mektpoy::WireRequest,
    ) -> Result<Answer, Refused> {
        client::send(session, section_bytes, request.body(), request.headers())
    }

    fn headers(betas: &[&str]) -> Headers {
        let mut h = vec![
            ("content-type".to_owned(), "application/json".to_owned()),
            ("anthropic-version".to_owned(), "2023-06-01".to_owned()),
        ];
        if !betas.is_empty() {
            h.push(("anthropic-beta".to_owned(), betas.join(",")));
        }
        h
    }

    fn tool(name: &str, description: &str, deferred: bool) -> Value {
        let mut tool =
            json!({"name": name, "description": description, "input_schema": {"type": "object"}});
        if deferred {
            tool["defer_loading"] = json!(true);
        }
        tool
    }

    /// `"a b*"`: tools `a` and `b`, `b` with `defer_loading: true`.
    fn tools(spec: &str) -> Value {
        spec.split_whitespace()
            .map(|t| {
                let (name, deferred) = t.strip_suffix('*').map_or((t, false), |n| (n, true));
                tool(name, name, deferred)
            })
            .collect()
    }

    /// `"u S(+b,-a) a"`: a user text, a system message adding `b` and removing `a` by
    /// reference, an assistant text; `U(+b)` is a user message holding a change block. By value:
    /// `=b` adds `b` with definition `b` (`=b~` with another description, `=b*` deferred), `!b`
    /// is a removal carrying a definition.
    fn messages(spec: &str) -> Value {
        spec.split_whitespace()
            .map(|m| {
                let text = |role| json!({"role": role, "content": [{"type": "text", "text": "hi"}]});
                match m {
                    "u" => text("user"),
                    "a" => text("assistant"),
                    _ => {
                        let role = if m.starts_with('S') { "system" } else { "user" };
                        let blocks: Vec<Value> = m[2..m.len() - 1]
                            .split(',')
                            .map(|b| {
                                let (op, name) = b.split_at(1);
                                let defined = |name: &str| {
                                    let (name, deferred) = name.strip_suffix('*').map_or((name, false), |n| (n, true));
                                    let (name, description) = name.strip_suffix('~').map_or((name, name), |n| (n, "another"));
                                    json!({"type": "tool_definition", "definition": tool(name, description, deferred)})
                                };
                                match op {
                                    "+" => json!({"type": "tool_addition", "tool": {"type": "tool_reference", "name": name}}),
                                    "-" => json!({"type": "tool_removal", "tool": {"type": "tool_reference", "name": name}}),
                                    "=" => json!({"type": "tool_addition", "tool": defined(name)}),
                                    _ => json!({"type": "tool_removal", "tool": defined(name)}),
                                }
                            })
                            .collect();
                        json!({"role": role, "content": blocks})
                    }
                }
            })
            .collect()
    }

    fn body(tool_spec: &str, message_spec: &str) -> Value {
        json!({"model": "m", "max_tokens": 8, "tools": tools(tool_spec), "messages": messages(message_spec)})
    }

    /// The stateless checks; a refusal's message, then its `[error_code]` if any.
    fn verdict(betas: &[&str], v: &Value) -> Result<(), String> {
        let h = headers(betas);
        check_shape(&h, v)
            .and_then(|()| check_model_rules(&h, v))
            .and_then(|()| check_tool_changes(&h, v))
            .map_err(|f| match f.code {
                Some(code) => format!("{} [{code}]", f.message),
                None => f.message,
            })
    }

    fn expect<T: std::fmt::Debug>(name: &str, got: Result<T, String>, refusal: Option<&str>) {
        match (got, refusal) {
            (Ok(_), None) => {}
            (Err(e), Some(expected)) => {
                assert!(
                    e.contains(expected),
                    "{name}: refused with `{e}`, expected `{expected}`"
                )
            }
            (got, expected) => panic!("{name}: got {got:?}, expected refusal {expected:?}"),
        }
    }

    /// (case, beta headers, tools, messages, refusal)
    type ChangeRow<'a> = (&'a str, &'a [&'a str], &'a str, &'a str, Option<&'a str>);

    /// Each vendor refusal for tool changes by reference, and the nearest accepted requests.
    #[test]
    fn standin_refuses_the_documented_tool_change_faults_and_accepts_the_rest() {
        const IN: &str = INLINE_BETA;
        #[rustfmt::skip]
        let rows: &[ChangeRow] = &[
            ("addition at the end, after a user turn", &[BETA], "a b* c*", "u S(+b)", None),
            ("addition before an assistant turn", &[BETA], "a b* c*", "u S(+b) a", None),
            ("addition after a later user turn", &[BETA], "a b* c*", "u a u S(+b)", None),
            ("addition under the inline beta alone", &[IN], "a b* c*", "u S(+b)", None),
            ("addition under both betas", &[BETA, IN], "a b* c*", "u S(+b)", None),
            ("removal of a non-deferred declaration", &[BETA], "a b* c*", "u S(-a)", None),
            ("an added tool removed and added again", &[BETA], "a b*", "u S(+b,-b,+b)", None),
            // v4: an addition re-offers a tool a removal withdrew, non-deferred ones included.
            ("a removed non-deferred declaration re-offered", &[BETA], "a b*", "u S(-a) a u S(+a)", None),
            ("no beta header", &[], "a b*", "u S(+b)", Some("requires the")),
            ("only an unrelated beta", &[BINDING_BETA], "a b*", "u S(+b)", Some("requires the")),
            ("addition of an offered non-deferred declaration", &[BETA], "a b*", "u S(+a)", Some("tool_addition of `a`, which is already offered")),
            ("addition of an undeclared tool", &[BETA], "a b*", "u S(+z)", Some("tool_addition of `z`, which names no tool declared in `tools` or defined earlier [tool_reference_unresolved]")),
            ("addition of a tool already offered", &[BETA], "a b*", "u S(+b) a u S(+b)", Some("tool_addition of `b`, which is already offered")),
            ("removal of a deferred tool never added", &[BETA], "a b*", "u S(-b)", Some("tool_removal of `b`, which is not offered")),
            ("removal of a removed tool", &[BETA], "a b*", "u S(-a,-a)", Some("tool_removal of `a`")),
            ("removal of an undeclared tool", &[BETA], "a b*", "u S(-z)", Some("tool_removal of `z`, which names no tool declared in `tools` or defined earlier [tool_reference_unresolved]")),
            ("system message followed by a user message", &[BETA], "a b*", "u S(+b) u", Some("followed by an assistant")),
            // Literally "not directly followed by an assistant message or the end": a system
            // message followed by another one is refused, even right after a user turn.
            ("two system messages in a row", &[BETA], "a b* c*", "u S(+b) S(+c)", Some("followed by an assistant")),
            ("system message after an assistant turn", &[BETA], "a b*", "u a S(+b)", Some("after a user or tool-result turn")),
            ("system message first", &[BETA], "a b*", "S(+b) a", Some("first message")),
            ("tool change in a user message", &[BETA], "a b*", "U(+b)", Some("only allowed in system messages")),
            ("only deferred declarations", &[BETA], "b*", "u", Some("need at least one declaration")),
            ("only deferred declarations, no beta", &[], "b*", "u", Some("need at least one declaration")),
            // reference §5.1: the inline beta takes all-deferred (or no) declarations.
            ("only deferred declarations under the inline beta", &[IN], "b*", "u S(+b)", None),
            ("two tools with one name", &[BETA], "a a", "u", Some("Tool names must be unique")),
        ];
        for (name, betas, tool_spec, message_spec, refusal) in rows {
            expect(
                name,
                verdict(betas, &body(tool_spec, message_spec)),
                *refusal,
            );
        }
    }

    /// Definitions by value: only with the inline beta; replace, re-offer, withhold; checked
    /// like a `tools` entry.
    #[test]
    fn standin_takes_definitions_by_value_only_with_the_inline_beta() {
        const IN: &str = INLINE_BETA;
        #[rustfmt::skip]
        let rows: &[ChangeRow] = &[
            ("by value under the inline beta", &[IN], "a", "u S(=b)", None),
            ("by value under both betas", &[BETA, IN], "a", "u S(=b)", None),
            ("by value under the 07-01 beta alone", &[BETA], "a", "u S(=b)", Some("a tool_definition requires the inline-tools-2026-09-15 beta")),
            ("by value without a beta", &[], "a", "u S(=b)", Some("requires the")),
            ("a new definition of an offered tool replaces it", &[IN], "a b", "u S(=b~)", None),
            ("a new definition of a deferred declaration", &[IN], "a b*", "u S(=b~)", None),
            ("an identical re-send is a no-op", &[IN], "a", "u S(=b) a u S(=b)", None),
            ("a by-value tool removed by reference", &[IN], "a", "u S(=b) a u S(-b)", None),
            ("a removed by-value tool defined again", &[IN], "a", "u S(=b) a u S(-b) a u S(=b~)", None),
            ("a removed by-value tool re-offered by reference", &[IN], "a", "u S(=b) a u S(-b) a u S(+b)", None),
            ("an offered by-value tool added by reference", &[IN], "a", "u S(=b) a u S(+b)", Some("tool_addition of `b`, which is already offered")),
            ("a removal by value", &[IN], "a", "u S(=b) a u S(!b)", Some("tool_removal takes a tool_reference")),
            ("a removal of a tool never defined", &[IN], "a", "u S(-b)", Some("[tool_reference_unresolved]")),
            ("a deferred definition surfaced by reference", &[IN], "a", "u S(=b*) a u S(+b)", None),
            ("a deferred definition removed before it is surfaced", &[IN], "a", "u S(=b*,-b)", Some("tool_removal of `b`, which is not offered")),
            ("by value over all-deferred declarations", &[IN], "b*", "u S(=c)", None),
            ("by value over no declarations", &[IN], "", "u S(=c)", None),
        ];
        for (name, betas, tool_spec, message_spec, refusal) in rows {
            expect(
                name,
                verdict(betas, &body(tool_spec, message_spec)),
                *refusal,
            );
        }

        let with_definition = |definition: Value| {
            let mut v = body("a", "u S(=b)");
            v["messages"][1]["content"][0]["tool"]["definition"] = definition;
            v
        };
        let full = json!({
            "name": "b", "description": "b", "input_schema": {"type": "object"},
            "defer_loading": false, "strict": true, "input_examples": [{}],
            "eager_input_streaming": true
        });
        #[rustfmt::skip]
        let rows = [
            ("a definition with every tool key", full, None),
            ("a definition without a root object", json!({"name": "b", "input_schema": {}}), Some("messages.1.content.0.tool.definition.custom.input_schema.type: Field required")),
            ("a definition with a key the API does not take", json!({"name": "b", "input_schema": {"type": "object"}, "title": "B"}), Some("messages.1.content.0.tool.definition.custom.title: Extra inputs are not permitted")),
            ("a definition with a bad name", json!({"name": "b c", "input_schema": {"type": "object"}}), Some("definition.custom.name: String should match pattern")),
        ];
        for (name, definition, refusal) in rows {
            expect(name, verdict(&[IN], &with_definition(definition)), refusal);
        }
    }

    /// `cache_control` never on a deferred tool, and on a by-value block or inside its
    /// definition, not both (Claude models; DeepSeek ignores `cache_control`).
    #[test]
    fn standin_refuses_cache_control_on_deferred_tools_and_twice_on_a_definition() {
        let cc = json!({"type": "ephemeral"});
        let model = |v: &mut Value, m: &str| v["model"] = json!(m);
        let on_tool = |i: usize, deferred: bool, m: &str| {
            let mut v = body("a b", "u");
            model(&mut v, m);
            v["tools"][i]["cache_control"] = cc.clone();
            if deferred {
                v["tools"][i]["defer_loading"] = json!(true);
            }
            v
        };
        let by_value = |deferred: bool, on_block: bool, in_definition: bool| {
            let mut v = body("a", if deferred { "u S(=b*)" } else { "u S(=b)" });
            model(&mut v, "claude-opus-5");
            let block = &mut v["messages"][1]["content"][0];
            if on_block {
                block["cache_control"] = cc.clone();
            }
            if in_definition {
                block["tool"]["definition"]["cache_control"] = cc.clone();
            }
            v
        };
        let mut ttl = on_tool(0, false, "claude-opus-5");
        ttl["tools"][0]["cache_control"]["ttl"] = json!("1h");
        let mut bad_ttl = ttl.clone();
        bad_ttl["tools"][0]["cache_control"]["ttl"] = json!("2h");
        let mut bad_type = ttl.clone();
        bad_type["tools"][0]["cache_control"] = json!({"type": "persistent"});
        #[rustfmt::skip]
        let rows = [
            ("on a non-deferred tool", on_tool(0, false, "claude-opus-5"), None),
            ("on a deferred tool", on_tool(1, true, "claude-opus-5"), Some("tools.1.custom: A deferred tool can't carry `cache_control`.")),
            ("on a deferred tool, DeepSeek", on_tool(1, true, "deepseek-flash"), None),
            ("with a one-hour ttl", ttl, None),
            ("with another ttl", bad_ttl, Some("tools.0.custom.cache_control.ttl: Input should be '5m' or '1h'")),
            ("of another type", bad_type, Some("tools.0.custom.cache_control.type: Input should be 'ephemeral'")),
            ("in a by-value definition", by_value(false, false, true), None),
            ("on a by-value block", by_value(false, true, false), None),
            ("in a deferred by-value definition", by_value(true, false, true), Some("messages.1.content.0.tool.definition: A deferred definition can't carry `cache_control`.")),
            ("on the block of a deferred definition", by_value(true, true, false), None),
            ("on a by-value block and in its definition", by_value(false, true, true), Some("messages.1.content.0: `cache_control` goes on the block or in the definition, not both.")),
        ];
        for (name, v, refusal) in rows {
            expect(name, verdict(&[INLINE_BETA], &v), refusal);
        }
    }

    /// Forced `tool_choice` on the models the vendor documents (Fable 5.2 / Mythos 5.2
    /// inferred), `auto` and `none` everywhere, forced choices elsewhere.
    #[test]
    fn standin_refuses_forced_tool_choice_on_the_models_that_do_not_take_it() {
        let choice = |model: &str, choice: Value| {
            let mut v = body("a", "u");
            v["model"] = json!(model);
            v["tool_choice"] = choice;
            v
        };
        let forced = [json!({"type": "any"}), json!({"type": "tool", "name": "a"})];
        let free = [json!({"type": "auto"}), json!({"type": "none"})];
        for model in FORCED_TOOL_CHOICE_REFUSED
            .iter()
            .copied()
            .chain(["claude-opus-5-5-20260922"])
        {
            for c in &forced {
                let name = format!("{model} {c}");
                let got = verdict(&[], &choice(model, c.clone()));
                assert_eq!(got, Err(FORCED_TOOL_CHOICE_MESSAGE.to_owned()), "{name}");
            }
            for c in &free {
                expect(
                    &format!("{model} {c}"),
                    verdict(&[], &choice(model, c.clone())),
                    None,
                );
            }
        }
        for model in [
            "claude-opus-5",
            "claude-haiku-5-5",
            "claude-opus-5-50",
            "deepseek-flash",
        ] {
            for c in &forced {
                expect(
                    &format!("{model} {c}"),
                    verdict(&[], &choice(model, c.clone())),
                    None,
                );
            }
        }
        #[rustfmt::skip]
        let rows = [
            ("a choice without a type", choice("claude-opus-5", json!({})), Some("tool_choice.type: Field required")),
            ("a tool choice without a name", choice("claude-opus-5", json!({"type": "tool"})), Some("tool_choice.tool.name: Field required")),
        ];
        for (name, v, refusal) in rows {
            expect(name, verdict(&[], &v), refusal);
        }
    }

    /// A request that ends with an assistant message, on Claude models.
    #[test]
    fn standin_refuses_assistant_prefill_on_claude_models() {
        let on = |model: &str, spec: &str| {
            let mut v = body("a b*", spec);
            v["model"] = json!(model);
            v
        };
        #[rustfmt::skip]
        let rows = [
            ("ends with an assistant message", on("claude-opus-5", "u a"), Some(PREFILL_MESSAGE)),
            ("ends with an assistant message, binding model", on("claude-haiku-5-5", "u a u a"), Some(PREFILL_MESSAGE)),
            ("ends with a user message", on("claude-opus-5", "u a u"), None),
            ("ends with a system message after a user turn", on("claude-opus-5", "u a u S(+b)"), None),
            ("ends with an assistant message, DeepSeek", on("deepseek-flash", "u a"), None),
        ];
        for (name, v, refusal) in rows {
            expect(name, verdict(&[BETA], &v), refusal);
        }
    }

    /// `anthropic-version: 2026-10-21` refuses the sampling parameters, documents in assistant
    /// messages and cited text in user messages; `2023-06-01` takes them; an unknown version
    /// is refused; DeepSeek's endpoint is not held to the Claude API's versions.
    #[test]
    fn standin_applies_the_rules_of_the_api_version_sent() {
        let on = |version: &str, model: &str, edit: &dyn Fn(&mut Value)| {
            let mut v = body("a", "u");
            v["model"] = json!(model);
            edit(&mut v);
            let mut h = headers(&[BETA]);
            h[1].1 = version.to_owned();
            exchange_with("standin-version", h, &v).err()
        };
        let nothing = |_: &mut Value| {};
        let temperature = |v: &mut Value| v["temperature"] = json!(1.0);
        let top_k = |v: &mut Value| v["top_k"] = json!(5);
        let document = |v: &mut Value| {
            v["messages"] = json!([
                {"role": "user", "content": "read"},
                {"role": "assistant", "content": [{"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "d"}}]},
                {"role": "user", "content": "go on"},
            ]);
        };
        let cited = |v: &mut Value| {
            v["messages"] = json!([{"role": "user", "content": [
                {"type": "text", "text": "q", "citations": [{"type": "char_location", "cited_text": "c", "document_index": 0, "start_char_index": 0, "end_char_index": 1}]},
            ]}]);
        };
        let search = |v: &mut Value| {
            v["messages"] = json!([{"role": "user", "content": [
                {"type": "search_result", "source": "s", "title": "t", "content": [
                    {"type": "text", "text": "r", "citations": [{"type": "char_location"}]},
                ]},
            ]}]);
        };
        let uncited = |v: &mut Value| {
            v["messages"] = json!([{"role": "user", "content": [{"type": "text", "text": "q", "citations": []}]}]);
        };
        let new = "2026-10-21";
        for (edit, name) in [
            (&temperature as &dyn Fn(&mut Value), "temperature"),
            (&top_k, "top_k"),
            (&document, "a document in an assistant message"),
            (&cited, "cited text in a user message"),
            (&search, "cited text in a search result"),
        ] {
            assert!(on(new, "claude-opus-5", edit).is_some(), "{name} on {new}");
            assert_eq!(
                on("2023-06-01", "claude-opus-5", edit),
                None,
                "{name} on 2023-06-01"
            );
            assert_eq!(on(new, "deepseek-flash", edit), None, "{name} on DeepSeek");
        }
        assert_eq!(
            on(new, "claude-opus-5", &temperature).as_deref(),
            Some("temperature: Extra inputs are not permitted")
        );
        assert_eq!(on(new, "claude-opus-5", &nothing), None);
        assert_eq!(
            on(new, "claude-opus-5", &uncited),
            None,
            "an empty list cites nothing"
        );
        assert!(on("2099-01-01", "claude-opus-5", &nothing).is_some());
    }

    /// What any Messages-API request must be.
    #[test]
    fn standin_refuses_bodies_the_messages_api_does_not_take() {
        let user = messages("u");
        let empty_text = json!([{"role": "user", "content": [{"type": "text", "text": ""}]}]);
        let thinking_from_user = json!([{"role": "user", "content": [{"type": "thinking", "thinking": "t", "signature": "s"}]}]);
        #[rustfmt::skip]
        let rows = [
            ("accepted", json!({"model": "m", "max_tokens": 8, "system": "S", "messages": user}), None),
            ("no max_tokens", json!({"model": "m", "messages": user}), Some("max_tokens")),
            ("no model", json!({"max_tokens": 8, "messages": user}), Some("model")),
            ("no messages", json!({"model": "m", "max_tokens": 8, "messages": []}), Some("messages")),
            ("system as no blocks", json!({"model": "m", "max_tokens": 8, "system": [], "messages": user}), Some("system")),
            ("system block without text", json!({"model": "m", "max_tokens": 8, "system": [{"type": "text", "text": ""}], "messages": user}), Some("system.0")),
            ("system as blocks", json!({"model": "m", "max_tokens": 8, "system": [{"type": "text", "text": "S", "cache_control": {"type": "ephemeral"}}], "messages": user}), None),
            ("an empty text block", json!({"model": "m", "max_tokens": 8, "messages": empty_text}), Some("non-empty")),
            ("a thinking block in a user message", json!({"model": "m", "max_tokens": 8, "messages": thinking_from_user}), Some("only allowed in assistant messages")),
            ("a top-level cache_control", json!({"model": "m", "max_tokens": 8, "cache_control": {"type": "ephemeral"}, "messages": user}), None),
            ("a top-level cache_control of another type", json!({"model": "m", "max_tokens": 8, "cache_control": {"type": "x"}, "messages": user}), Some("cache_control.type")),
            ("an unknown thinking type", json!({"model": "m", "max_tokens": 8, "thinking": {"type": "on"}, "messages": user}), Some("thinking.type")),
        ];
        for (name, v, refusal) in rows {
            expect(name, verdict(&[], &v), refusal);
        }
    }

    /// A tool schema needs a root `"type": "object"`; the tool keys the vendor takes are taken.
    #[test]
    fn standin_refuses_tool_schemas_without_a_root_object_and_takes_the_vendor_tool_keys() {
        let with = |key: &str, value: Value| {
            let mut v = body("a", "u");
            v["model"] = json!("claude-opus-5");
            if key == "input_schema" && value.is_null() {
                v["tools"][0].as_object_mut().unwrap().remove(key);
            } else {
                v["tools"][0][key] = value;
            }
            v
        };
        let schema = |s: Value| with("input_schema", s);
        #[rustfmt::skip]
        let rows = [
            ("a root object", schema(json!({"type": "object", "properties": {}})), None),
            ("an empty schema", schema(json!({})), Some("tools.0.custom.input_schema.type: Field required")),
            ("a schema without a type", schema(json!({"properties": {}})), Some("tools.0.custom.input_schema.type: Field required")),
            ("a root string", schema(json!({"type": "string"})), Some("tools.0.custom.input_schema.type: Input should be 'object'")),
            ("no schema", schema(Value::Null), Some("tools.0.custom.input_schema: Field required")),
            ("a schema that is not an object", schema(json!("object")), Some("tools.0.custom.input_schema: Input should be a valid dictionary")),
            ("strict", with("strict", json!(true)), None),
            ("strict, not a boolean", with("strict", json!("yes")), Some("tools.0.custom.strict: Input should be a valid boolean")),
            ("input_examples", with("input_examples", json!([{"arg": "x"}])), None),
            ("input_examples, not a list", with("input_examples", json!({})), Some("tools.0.custom.input_examples: Input should be a valid list")),
            ("eager_input_streaming", with("eager_input_streaming", json!(true)), None),
            ("cache_control", with("cache_control", json!({"type": "ephemeral"})), None),
            ("allowed_callers", with("allowed_callers", json!(["direct"])), None),
            ("defer_loading false", with("defer_loading", json!(false)), None),
            ("type custom", with("type", json!("custom")), None),
            ("a key the API does not take", with("title", json!("A")), Some("tools.0.custom.title: Extra inputs are not permitted")),
            ("a name of 128 characters", with("name", json!("n".repeat(128))), None),
            ("a name of 129 characters", with("name", json!("n".repeat(129))), Some("tools.0.custom.name: String should match pattern")),
        ];
        for (name, v, refusal) in rows {
            expect(name, verdict(&[], &v), refusal);
        }
    }

    /// reference §9 segments: non-deferred tools, a fixed section when any declaration is deferred,
    /// `system`, each message, as raw bytes; a by-value definition is part of its message; a
    /// dropped block is cut out of its message, every other byte kept.
    #[test]
    fn standin_cuts_bodies_into_spec_9_segments() {
        let body = r#"{"model":"m","max_tokens":1,"system":"S","tools":[{"name":"a"},{"name":"b","defer_loading":true},{"name":"c"}],"messages":[{"role":"user","content":"hi"}]}"#;
        let v: Value = serde_json::from_str(body).unwrap();
        assert_eq!(
            String::from_utf8(segments(body, &v, 3, &[]).unwrap()).unwrap(),
            r#"{"name":"a"}{"name":"c"}###"S"{"role":"user","content":"hi"}"#
        );
        let plain = r#"{"tools":[{"name":"a"}],"messages":[]}"#;
        let v: Value = serde_json::from_str(plain).unwrap();
        assert_eq!(segments(plain, &v, 3, &[]).unwrap(), br#"{"name":"a"}"#);

        let inline = r#"{"tools":[{"name":"a"}],"messages":[{"role":"user","content":"hi"},{"role":"system","content":[{"type":"tool_addition","tool":{"type":"tool_definition","definition":{"name":"b"}}}]}]}"#;
        let v: Value = serde_json::from_str(inline).unwrap();
        assert_eq!(
            String::from_utf8(segments(inline, &v, 3, &[]).unwrap()).unwrap(),
            r#"{"name":"a"}{"role":"user","content":"hi"}{"role":"system","content":[{"type":"tool_addition","tool":{"type":"tool_definition","definition":{"name":"b"}}}]}"#,
            "the definition stays in its message"
        );

        let thinking = r#"{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"s"},{"type":"text","text":"ok"},{"type":"thinking","thinking":"u","signature":"v"}]}]}"#;
        let v: Value = serde_json::from_str(thinking).unwrap();
        assert_eq!(
            String::from_utf8(segments(thinking, &v, 0, &[(1, 0), (1, 2)]).unwrap()).unwrap(),
            r#"{"role":"user","content":"hi"}{"role":"assistant","content":[{"type":"text","text":"ok"}]}"#
        );
    }

    fn exchange_with(session: &str, mut h: Headers, v: &Value) -> Result<Answered, String> {
        h.push((SESSION_HEADER.to_owned(), session.to_owned()));
        h.push((SECTION_HEADER.to_owned(), "0".to_owned()));
        answer(&h, &v.to_string()).map_err(|f| f.message)
    }

    /// One request to the stand-in, without HTTP: the reply, or the refusal's message.
    fn exchange(session: &str, betas: &[&str], v: &Value) -> Result<Answered, String> {
        exchange_with(session, headers(betas), v)
    }

    fn cached(reply: &Answered) -> u64 {
        reply.cached
    }

    fn total(reply: &Answered) -> u64 {
        reply.total
    }

    /// Claude models read the cache only when a request asks for it; DeepSeek always does.
    #[test]
    fn standin_reads_the_cache_only_when_a_claude_request_asks_for_it() {
        let request = |model: &str, spec: &str, top: bool, on_block: bool| {
            let mut v = body("a", spec);
            v["model"] = json!(model);
            v["system"] = json!(long_system());
            if top {
                v["cache_control"] = json!({"type": "ephemeral"});
            }
            if on_block {
                v["messages"][0]["content"][0]["cache_control"] = json!({"type": "ephemeral"});
            }
            v
        };
        let run = |session: &str, model: &str, top: bool, on_block: bool| {
            let first = exchange(session, &[], &request(model, "u", top, on_block)).unwrap();
            let second = exchange(session, &[], &request(model, "u a u", top, on_block)).unwrap();
            (total(&first), cached(&first), cached(&second))
        };

        let (_, first, second) = run("standin-cache-none", "claude-opus-5", false, false);
        assert_eq!((first, second), (0, 0), "no cache_control: nothing cached");
        // The session's earlier requests wrote nothing: the first request asking for caching
        // finds nothing either.
        let third = exchange(
            "standin-cache-none",
            &[],
            &request("claude-opus-5", "u a u a u", true, false),
        )
        .unwrap();
        assert_eq!(cached(&third), 0);

        let (total, first, second) = run("standin-cache-top", "claude-opus-5", true, false);
        assert_eq!((first, second), (0, total), "top-level cache_control");
        let (total, first, second) = run("standin-cache-block", "claude-opus-5", false, true);
        assert_eq!((first, second), (0, total), "cache_control on a block");
        let (total, first, second) = run("standin-cache-deepseek", "deepseek-flash", false, false);
        assert_eq!(
            (first, second),
            (0, total / 256 * 256),
            "DeepSeek caches by itself, in 64-token units"
        );
    }

    /// Entries outlive the next request: DeepSeek reads an older prompt (in 64-token units),
    /// a Claude model an older entry at a block its breakpoint looks back to, and after a
    /// change of the first message nothing.
    #[test]
    fn standin_reads_older_entries_by_the_vendors_rule() {
        let v = |model: &str, system: &str, spec: &str| {
            let mut v = body("a", spec);
            v["model"] = json!(model);
            v["system"] = json!(system);
            v["cache_control"] = json!({"type": "ephemeral"});
            v
        };
        let (p1, p2) = (long_system(), "Be quick. ".repeat(400));
        let s = "standin-older-deepseek";
        let first = exchange(s, &[], &v("deepseek-flash", &p1, "u")).unwrap();
        exchange(s, &[], &v("deepseek-flash", &p2, "u")).unwrap();
        let back = exchange(s, &[], &v("deepseek-flash", &p1, "u a u")).unwrap();
        assert_eq!(
            cached(&back),
            total(&first) / 256 * 256,
            "the first prompt's units"
        );
        let s = "standin-older-claude";
        let first = exchange(s, &[], &v("claude-opus-5", &p1, "u")).unwrap();
        exchange(s, &[], &v("claude-opus-5", &p2, "u")).unwrap();
        let back = exchange(s, &[], &v("claude-opus-5", &p1, "u a u")).unwrap();
        assert_eq!(cached(&back), total(&first), "the first request's entry");
        let mut changed = v("claude-opus-5", &p1, "u a u a u");
        changed["messages"][0]["content"][0]["text"] = json!("a compacted summary");
        let compacted = exchange(s, &[], &changed).unwrap();
        assert_eq!(
            cached(&compacted),
            0,
            "no entry ends where the prefix is shared"
        );
    }

    /// Below the model's minimum cacheable length nothing is cached; 20 blocks past the
    /// previous request's last one, automatic caching no longer finds it unless a block
    /// breakpoint marks it; a breakpoint is not part of the prompt.
    #[test]
    fn standin_models_the_minimum_length_and_the_lookback() {
        let short = |spec: &str| {
            let mut v = body("a", spec);
            v["model"] = json!("claude-opus-5");
            v["cache_control"] = json!({"type": "ephemeral"});
            v
        };
        let s = "standin-min-length";
        exchange(s, &[], &short("u")).unwrap();
        let second = exchange(s, &[], &short("u a u")).unwrap();
        assert_eq!(cached(&second), 0, "a short prompt is not cached");
        let long = |spec: &str| {
            let mut v = short(spec);
            v["system"] = json!(long_system());
            v
        };
        let s = "standin-lookback";
        let first = exchange(s, &[], &long("u")).unwrap();
        // 21 blocks after the previous last block, no breakpoint: out of the window.
        let far = ["u a"; 10].join(" ") + " u";
        let beyond = exchange(s, &[], &long(&far)).unwrap();
        assert_eq!(cached(&beyond), 0, "past the lookback");
        assert!(total(&first) > 0);
        // The same jump with the previous last block marked: found.
        let farther = vec!["u a"; 20].join(" ") + " u";
        let mut marked = long(&farther);
        marked["messages"][20]["content"][0]["cache_control"] = json!({"type": "ephemeral"});
        let found = exchange(s, &[], &marked).unwrap();
        assert!(cached(&found) > 0, "a breakpoint marks the entry");
        // The marker is not part of the prompt: the same request without it is all cached.
        let unmarked = exchange(s, &[], &long(&farther)).unwrap();
        assert_eq!(cached(&unmarked), total(&unmarked));
    }

    const BINDING_MODEL: &str = "claude-fable-5-2";

    fn user(text: &str) -> Value {
        json!({"role": "user", "content": [{"type": "text", "text": text}]})
    }

    /// A system prompt above the minimum cacheable length of every Claude model (1,024
    /// tokens), so that what a test caches is not cut by it.
    fn long_system() -> String {
        "Be careful. ".repeat(400)
    }

    fn chat(messages: &[Value]) -> Value {
        json!({
            "model": BINDING_MODEL, "max_tokens": 8, "cache_control": {"type": "ephemeral"},
            "system": long_system(), "tools": tools("a"), "messages": messages
        })
    }

    fn assistant(reply: &Answered) -> Value {
        json!({"role": "assistant", "content": reply["content"]})
    }

    /// `turns` accepted exchanges on `session`, each sending the whole history back with its
    /// thinking: `u0 a1 u1 … a{turns} u{turns}`.
    fn history(session: &str, turns: usize) -> Vec<Value> {
        let mut messages = vec![user("u0")];
        for t in 1..=turns {
            let reply = exchange(session, &[], &chat(&messages)).unwrap();
            messages.push(assistant(&reply));
            messages.push(user(&format!("u{t}")));
        }
        messages
    }

    /// `messages` with the thinking blocks of the `n`-th assistant message left out wherever
    /// `kept[n]` is false.
    fn keep(messages: &[Value], kept: &[bool]) -> Vec<Value> {
        let mut n = 0;
        messages
            .iter()
            .map(|m| {
                if role(m) != Some("assistant") {
                    return m.clone();
                }
                n += 1;
                if kept[n - 1] {
                    return m.clone();
                }
                let content: Vec<Value> = m["content"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|b| !is_thinking(b))
                    .cloned()
                    .collect();
                json!({"role": "assistant", "content": content})
            })
            .collect()
    }

    fn drop_block(mut v: Value) -> Value {
        v["thinking"] = json!({"type": "adaptive", "block_binding": {"prefix_mismatch_behavior": "drop_block"}});
        v
    }

    /// Binding models answer with a signed thinking block, then the text; other models, and a
    /// request with thinking disabled, with the text alone.
    #[test]
    fn standin_answers_with_a_signed_thinking_block_on_models_that_bind_thinking() {
        let reply = exchange("standin-answer-1", &[], &chat(&[user("u0")])).unwrap();
        let content = reply["content"].as_array().unwrap();
        assert_eq!(content.len(), 2, "{}", reply.body);
        assert_eq!(content[0]["type"], "thinking");
        assert_eq!(content[0]["thinking"], "Thinking about request 1.");
        let signature = content[0]["signature"].as_str().unwrap();
        assert!(
            signature.len() == 24 && signature.bytes().all(|b| b.is_ascii_hexdigit()),
            "{signature}: a hash and a counter, in hex"
        );
        assert_eq!(content[1], json!({"type": "text", "text": "ok 1"}));
        assert!(
            reply.body.get("input_transformations").is_none(),
            "no binding beta"
        );

        let mut other = chat(&[user("u0")]);
        other["model"] = json!("claude-opus-5");
        let reply = exchange("standin-answer-2", &[], &other).unwrap();
        assert_eq!(reply["content"], json!([{"type": "text", "text": "ok 1"}]));

        let mut disabled = chat(&[user("u0")]);
        disabled["thinking"] = json!({"type": "disabled"});
        let reply = exchange("standin-answer-3", &[], &disabled).unwrap();
        assert_eq!(reply["content"], json!([{"type": "text", "text": "ok 1"}]));

        let mut h = headers(&[BINDING_BETA]);
        h.push((REDACTED_HEADER.to_owned(), "true".to_owned()));
        let reply = exchange_with("standin-answer-4", h, &chat(&[user("u0")])).unwrap();
        let types: Vec<&Value> = reply["content"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| &b["type"])
            .collect();
        assert_eq!(types, ["thinking", "redacted_thinking", "text"]);
        assert_eq!(reply["input_transformations"], json!([]), "binding beta");
    }

    type Change = fn(&mut Value);

    /// A thinking block sent back after `system`, `tools` or an earlier message changed is
    /// refused; the same change without the block, or the block without the change, is not.
    #[test]
    fn standin_refuses_a_thinking_block_bound_to_another_conversation() {
        const TOOLS: &str = "`tools` changed after the block was produced.";
        const SYSTEM: &str = "`system` changed after the block was produced.";
        const MESSAGE: &str =
            "A message before the block changed after it was produced, or the block moved.";
        // (what changed, the change, the sentence naming it)
        let changes: [(&str, Change, &str); 5] = [
            ("tools", |v| v["tools"] = tools("a b"), TOOLS),
            (
                "a tool's definition",
                |v| v["tools"][0]["description"] = json!("another"),
                TOOLS,
            ),
            ("system", |v| v["system"] = json!("S2"), SYSTEM),
            (
                "no system",
                |v| {
                    v.as_object_mut().unwrap().remove("system");
                },
                SYSTEM,
            ),
            (
                "the first user message",
                |v| v["messages"][0] = user("u0, edited"),
                MESSAGE,
            ),
        ];
        for (n, (what, change, reason)) in changes.into_iter().enumerate() {
            let session = format!("standin-bound-{n}");
            let messages = history(&session, 1);
            let mut changed = chat(&messages);
            change(&mut changed);
            let got = exchange(&session, &[], &changed);
            let expected = format!(
                "messages.1.content.0: Invalid `signature` in `thinking` block. The block is bound to a different conversation. Remove the block, or set `thinking.block_binding.prefix_mismatch_behavior` to \"drop_block\". That setting requires the thinking-binding-controls-2026-08-01 value in the anthropic-beta header. {reason}"
            );
            assert_eq!(got, Err(expected), "{what} changed");
            let with_beta = exchange(&session, &[BINDING_BETA], &changed).unwrap_err();
            assert!(
                with_beta.contains(BOUND_ELSEWHERE) && !with_beta.contains("That setting"),
                "{what}: with the beta the message does not ask for it: {with_beta}"
            );
            expect(what, exchange(&session, &[], &chat(&messages)), None);
            let mut stripped = chat(&keep(&messages, &[false]));
            change(&mut stripped);
            expect(what, exchange(&session, &[], &stripped), None);
        }

        // Not a change: a cache breakpoint on an earlier block, the string form of a text
        // content, tool changes after the block.
        let session = "standin-bound-same";
        let mut messages = history(session, 1);
        messages[0]["content"][0]["cache_control"] = json!({"type": "ephemeral"});
        expect(
            "a cache breakpoint",
            exchange(session, &[], &chat(&messages)),
            None,
        );
        messages[0] = json!({"role": "user", "content": "u0"});
        expect(
            "text as a string",
            exchange(session, &[], &chat(&messages)),
            None,
        );
        let mut declared = chat(&messages);
        declared["tools"] = tools("a b*");
        expect(
            "a deferred declaration added to `tools` is a change",
            exchange(session, &[BETA], &declared),
            Some("`tools` changed"),
        );
        messages.push(json!({"role": "system", "content": [{"type": "tool_removal", "tool": {"type": "tool_reference", "name": "a"}}]}));
        expect(
            "a tool change after the block",
            exchange(session, &[BETA], &chat(&messages)),
            None,
        );
    }

    /// `drop_block` with the beta drops the failing block and every later one, counts none of
    /// them and lists them in `input_transformations`; `block_binding` needs the beta and an
    /// adaptive or enabled `thinking`.
    #[test]
    fn standin_drops_failing_thinking_blocks_with_drop_block_and_the_beta() {
        let session = "standin-drop-1";
        let messages = history(session, 3);
        let mut changed = chat(&messages);
        changed["tools"] = tools("a b");
        let changed = drop_block(changed);

        expect(
            "drop_block without the beta",
            exchange(session, &[], &changed),
            Some("thinking.adaptive.block_binding: Extra inputs are not permitted"),
        );
        let mut disabled = changed.clone();
        disabled["thinking"]["type"] = json!("disabled");
        expect(
            "drop_block with thinking disabled",
            exchange(session, &[BINDING_BETA], &disabled),
            Some("thinking.disabled.block_binding: Extra inputs are not permitted"),
        );
        let mut error = changed.clone();
        error["thinking"]["block_binding"]["prefix_mismatch_behavior"] = json!("error");
        expect(
            "prefix_mismatch_behavior error",
            exchange(session, &[BINDING_BETA], &error),
            Some(
                "messages.1.content.0: Invalid `signature` in `thinking` block. The block is bound to a different conversation.",
            ),
        );
        let mut enabled = changed.clone();
        enabled["thinking"]["type"] = json!("enabled");
        let reply = exchange(session, &[BINDING_BETA], &enabled).unwrap();
        let at = |k: usize| json!({"type": "thinking_dropped", "path": format!("messages.{k}.content.0"), "reason": "prefix_binding_mismatch"});
        assert_eq!(reply["input_transformations"], json!([at(1), at(3), at(5)]));
        let mut stripped = chat(&keep(&messages, &[false; 3]));
        stripped["tools"] = tools("a b");
        let stripped = stripped.to_string();
        let v: Value = serde_json::from_str(&stripped).unwrap();
        assert_eq!(
            total(&reply),
            segments(&stripped, &v, 0, &[]).unwrap().len() as u64,
            "dropped blocks are not counted"
        );

        // Only the block after the change fails: it and every later one are dropped.
        let session = "standin-drop-2";
        let mut messages = history(session, 3);
        messages[2] = user("u1, edited");
        let reply = exchange(session, &[BINDING_BETA], &drop_block(chat(&messages))).unwrap();
        assert_eq!(reply["input_transformations"], json!([at(3), at(5)]));
        // The next request sends them again: dropped again, and so is the new block.
        messages.push(assistant(&reply));
        messages.push(user("u4"));
        let reply = exchange(session, &[BINDING_BETA], &drop_block(chat(&messages))).unwrap();
        assert_eq!(reply["input_transformations"], json!([at(3), at(5), at(7)]));
        // Left out instead, together with the later ones, the request is accepted as it is.
        let kept = keep(&messages, &[true, false, false, false]);
        let reply = exchange(session, &[BINDING_BETA], &chat(&kept)).unwrap();
        assert_eq!(reply["input_transformations"], json!([]));
    }

    /// Kept thinking blocks are an unbroken run of those each was produced after; a block left
    /// out once stays out.
    #[test]
    fn standin_keeps_thinking_blocks_an_unbroken_run_and_a_block_left_out_out() {
        let gap = "The thinking blocks before it are not the ones it was produced after";
        #[rustfmt::skip]
        let rows: [(&str, [bool; 3], Option<&str>); 8] = [
            ("all kept", [true, true, true], None),
            ("a leading run left out", [false, true, true], None),
            ("a trailing run left out", [true, true, false], None),
            ("both ends left out", [false, true, false], None),
            ("one kept at the end", [false, false, true], None),
            ("all left out", [false, false, false], None),
            ("a gap", [true, false, true], Some(gap)),
            ("a gap, refused at the block after it", [true, false, true], Some("messages.5.content.0: Invalid `signature` in `thinking` block. The block is bound to a different conversation.")),
        ];
        for (n, (name, kept, refusal)) in rows.iter().enumerate() {
            let session = format!("standin-run-{n}");
            let messages = history(&session, 3);
            expect(
                name,
                exchange(&session, &[], &chat(&keep(&messages, kept))),
                *refusal,
            );
        }
        let session = "standin-run-drop";
        let messages = history(session, 3);
        let reply = exchange(
            session,
            &[BINDING_BETA],
            &drop_block(chat(&keep(&messages, &[true, false, true]))),
        )
        .unwrap();
        assert_eq!(
            reply["input_transformations"],
            json!([{"type": "thinking_dropped", "path": "messages.5.content.0", "reason": "prefix_binding_mismatch"}]),
            "drop_block drops the block after the gap"
        );

        // A block left out once is never sent again.
        let session = "standin-run-out";
        let messages = history(session, 3);
        let leading = chat(&keep(&messages, &[false, true, true]));
        expect("leading run out", exchange(session, &[], &leading), None);
        expect(
            "put back",
            exchange(session, &[], &chat(&messages)),
            Some(
                "messages.1.content.0: Invalid `signature` in `thinking` block. The block is bound to a different conversation. Remove the block, or set `thinking.block_binding.prefix_mismatch_behavior` to \"drop_block\". That setting requires the thinking-binding-controls-2026-08-01 value in the anthropic-beta header. The block was left out of an earlier request",
            ),
        );
        expect("still out", exchange(session, &[], &leading), None);

        // A trailing run left out, then the conversation goes on: the new block was produced
        // after it, so leaving the run out is still unbroken; putting it back is refused.
        let session = "standin-run-trailing";
        let mut messages = keep(&history(session, 3), &[true, true, false]);
        let reply = exchange(session, &[], &chat(&messages)).unwrap();
        messages.push(assistant(&reply));
        messages.push(user("u4"));
        expect(
            "a block produced after a trailing run was left out",
            exchange(session, &[], &chat(&messages)),
            None,
        );
        let session = "standin-run-back";
        let full = history(session, 3);
        let mut messages = keep(&full, &[true, true, false]);
        let reply = exchange(session, &[], &chat(&messages)).unwrap();
        messages[5] = full[5].clone();
        messages.push(assistant(&reply));
        messages.push(user("u4"));
        expect(
            "the left-out block put back before a block produced without it",
            exchange(session, &[], &chat(&messages)),
            Some("messages.5.content.0: Invalid `signature`"),
        );
    }

    /// A block the session did not produce, or changed since, does not verify, whatever
    /// `prefix_mismatch_behavior` says; `redacted_thinking` is checked like `thinking`.
    #[test]
    fn standin_refuses_a_changed_or_foreign_thinking_block_whatever_drop_block_says() {
        let session = "standin-tamper-1";
        let messages = history(session, 1);
        let mut edited = messages.clone();
        edited[1]["content"][0]["thinking"] = json!("Something else.");
        let mut foreign = messages.clone();
        foreign[1]["content"][0]["signature"] = json!("00000000000000000000ffff");
        for (name, m) in [
            ("edited thinking", &edited),
            ("foreign signature", &foreign),
        ] {
            for (betas, v) in [
                (&[][..], chat(m)),
                (&[BINDING_BETA][..], drop_block(chat(m))),
            ] {
                let got = exchange(session, betas, &v);
                assert_eq!(
                    got,
                    Err(
                        "messages.1.content.0: Invalid `signature` in `thinking` block.".to_owned()
                    ),
                    "{name}"
                );
            }
        }
        expect("unchanged", exchange(session, &[], &chat(&messages)), None);

        let mut h = headers(&[]);
        h.push((REDACTED_HEADER.to_owned(), "true".to_owned()));
        let session = "standin-tamper-2";
        let reply = exchange_with(session, h, &chat(&[user("u0")])).unwrap();
        let messages = vec![user("u0"), assistant(&reply), user("u1")];
        let mut edited = messages.clone();
        edited[1]["content"][1]["data"] = json!("AAAA");
        expect(
            "edited redacted_thinking",
            exchange(session, &[], &chat(&edited)),
            Some("messages.1.content.1: Invalid `data` in `redacted_thinking` block."),
        );
        // Its thinking block left out (a leading run), the redacted block still binds `system`.
        let mut without_thinking = messages.clone();
        without_thinking[1]["content"]
            .as_array_mut()
            .unwrap()
            .remove(0);
        let mut changed = chat(&without_thinking);
        changed["system"] = json!("S2");
        expect(
            "redacted_thinking after a system change",
            exchange(session, &[], &changed),
            Some(
                "messages.1.content.0: Invalid `data` in `redacted_thinking` block. The block is bound to a different conversation.",
            ),
        );
        expect(
            "redacted_thinking sent back unchanged",
            exchange(session, &[], &chat(&without_thinking)),
            None,
        );
    }

    /// A request to `claude-opus-5` (no thinking bound) asking for the cache diagnostics
    /// against `previous` (a response id, or `null`).
    fn diagnosed(system: &str, tool_spec: &str, messages: &[Value], previous: Value) -> Value {
        json!({
            "model": "claude-opus-5", "max_tokens": 8, "cache_control": {"type": "ephemeral"},
            "system": system, "tools": tools(tool_spec), "messages": messages,
            "diagnostics": {"previous_message_id": previous}
        })
    }

    /// The cache diagnostics (vendor page read 2026-12-01, GA since 2026-09-23): only for a
    /// Claude request with the `diagnostics` object, beta or not; `null` on the first turn and when nothing diverged;
    /// the earliest divergence (the model, then the prompt prefix in its order: tools,
    /// system; the other prompt-affecting parameters; messages) against the request the id
    /// names, with the tokens of that request from the first differing part on.
    #[test]
    fn standin_reports_the_first_divergence_against_the_named_request() {
        let session = "standin-diagnostics";
        let d = |reply: &Answered| reply.body.get("diagnostics").cloned();
        let id = |reply: &Answered| json!(reply["id"].as_str().unwrap());
        let system = long_system();
        let u0 = [user("u0")];
        let first = exchange(
            session,
            &[DIAGNOSIS_BETA],
            &diagnosed(&system, "a b", &u0, Value::Null),
        )
        .unwrap();
        assert_eq!(
            d(&first),
            Some(Value::Null),
            "the first turn compares nothing"
        );
        // Generally available since 2026-09-23: the object alone opts in.
        let mut without_beta = diagnosed(&system, "a b", &u0, id(&first));
        assert_eq!(
            d(&exchange(session, &[], &without_beta).unwrap()),
            Some(Value::Null),
            "no beta needed"
        );
        without_beta["model"] = json!("deepseek-v4-pro");
        assert_eq!(
            d(&exchange(session, &[DIAGNOSIS_BETA], &without_beta).unwrap()),
            None,
            "the Claude API only"
        );

        let turn = [
            user("u0"),
            json!({"role": "assistant", "content": "ok"}),
            user("u1"),
        ];
        let ask = |v: &Value| exchange(session, &[DIAGNOSIS_BETA], v).unwrap();
        let extended = ask(&diagnosed(&system, "a b", &turn, id(&first)));
        assert_eq!(
            d(&extended),
            Some(Value::Null),
            "appended to: no divergence"
        );

        let reason = |reply: &Answered| d(reply).unwrap()["cache_miss_reason"].clone();
        let lost = |from_bytes: u64| (first.total - from_bytes).div_ceil(4);
        let tool_bytes = |spec: &str| -> u64 {
            tools(spec)
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t.to_string().len() as u64)
                .sum()
        };
        // Against the first request, whatever came between.
        let changed = ask(&diagnosed("Be quick.", "a b", &turn, id(&first)));
        assert_eq!(
            reason(&changed),
            json!({"type": "system_changed", "cache_missed_input_tokens": lost(tool_bytes("a b"))})
        );
        let removed = ask(&diagnosed(&system, "a", &turn, id(&first)));
        assert_eq!(
            reason(&removed),
            json!({"type": "tools_changed", "cache_missed_input_tokens": lost(tool_bytes("a"))})
        );
        // Both changed: the earliest divergence of the prompt prefix is in the tools.
        let both = ask(&diagnosed("Be quick.", "a", &turn, id(&first)));
        assert_eq!(
            reason(&both),
            json!({"type": "tools_changed", "cache_missed_input_tokens": lost(tool_bytes("a"))})
        );
        let mut thinking = diagnosed(&system, "a b", &turn, id(&first));
        thinking["thinking"] = json!({"type": "disabled"});
        assert_eq!(reason(&ask(&thinking)), json!({"type": "unavailable"}));
        let mut betas = diagnosed(&system, "a b", &turn, id(&first));
        let other_betas = exchange(session, &[DIAGNOSIS_BETA, BETA], &betas).unwrap();
        assert_eq!(
            reason(&other_betas),
            json!({"type": "unavailable"}),
            "the set of betas"
        );
        let edited = [user("u0 edited"), user("u1")];
        let rewritten = ask(&diagnosed(&system, "a b", &edited, id(&first)));
        assert_eq!(
            reason(&rewritten),
            json!({"type": "messages_changed", "cache_missed_input_tokens": lost(tool_bytes("a b") + system.len() as u64 + 2)})
        );
        betas["model"] = json!("claude-sonnet-5");
        assert_eq!(
            reason(&ask(&betas)),
            json!({"type": "model_changed", "cache_missed_input_tokens": first.total.div_ceil(4)})
        );
        assert_eq!(
            reason(&ask(&diagnosed(
                &system,
                "a b",
                &turn,
                json!("msg_unknown")
            ))),
            json!({"type": "previous_message_not_found"})
        );
        let refused = exchange(
            session,
            &[DIAGNOSIS_BETA],
            &diagnosed(&system, "a b", &turn, json!("a1")),
        );
        assert_eq!(refused.unwrap_err(), PREVIOUS_ID_MESSAGE);
        let mut extra = diagnosed(&system, "a b", &turn, Value::Null);
        extra["diagnostics"]["other"] = json!(1);
        assert!(exchange(session, &[DIAGNOSIS_BETA], &extra).is_err());
        // A request that did not opt in left no fingerprint to compare with.
        let mut not_asking = diagnosed(&system, "a b", &turn, Value::Null);
        not_asking.as_object_mut().unwrap().remove("diagnostics");
        let plain = exchange(session, &[DIAGNOSIS_BETA], &not_asking).unwrap();
        let after = ask(&diagnosed(&system, "a b", &turn, id(&plain)));
        assert_eq!(
            reason(&after),
            json!({"type": "previous_message_not_found"})
        );
    }

    fn wire(body: &Value, betas: &[&str]) -> mektpoy::WireRequest {
        mektpoy::WireRequest::new(body.to_string(), headers(betas))
    }

    /// Over HTTP: a refusal is a 400 that leaves the session's cache state alone; sessions do
    /// not share state.
    #[test]
    fn standin_over_http_keys_state_by_session_and_caches_nothing_of_a_refused_request() {
        // A system prompt long enough for DeepSeek's 64-token units.
        let long = |mut v: Value| {
            v["system"] = json!("Be brief. ".repeat(100));
            v
        };
        let one = long(body("a b*", "u"));
        let two = long(body("a b*", "u S(+b)"));

        let first = send("standin-http-1", 0, &wire(&one, &[])).unwrap();
        assert_eq!(first.usage.cached_bytes, 0);
        assert_eq!(first.text, "ok 1", "the session's first accepted request");
        let refused = send("standin-http-1", 0, &wire(&two, &[])).unwrap_err();
        assert_eq!(refused.status, 400, "{}", refused.message);
        assert!(
            refused.message.contains("requires the"),
            "{}",
            refused.message
        );
        let second = send("standin-http-1", 0, &wire(&two, &[BETA])).unwrap();
        assert!(first.usage.total_bytes > 1000);
        assert_eq!(
            second.usage.cached_bytes,
            kept("m", first.usage.total_bytes),
            "the refused request did not replace the cached one"
        );
        assert_eq!(
            second.usage.cache_read_input_tokens,
            second.usage.cached_bytes.div_ceil(4)
        );
        assert_eq!(
            second.usage.input_tokens,
            second.usage.total_bytes.div_ceil(4) - second.usage.cached_bytes.div_ceil(4)
        );

        let other = send("standin-http-2", 0, &wire(&one, &[])).unwrap();
        assert_eq!(other.usage.cached_bytes, 0, "another session starts cold");

        let broken = mektpoy::WireRequest::new("{", wire(&one, &[]).headers().to_vec());
        assert_eq!(send("standin-http-3", 0, &broken).unwrap_err().status, 400);
        let resized = send("standin-http-2", 512, &wire(&one, &[])).unwrap_err();
        assert!(
            resized.message.contains("test support"),
            "{}",
            resized.message
        );

        let unresolved = send("standin-http-4", 0, &wire(&body("a", "u S(+z)"), &[BETA]));
        let unresolved = unresolved.unwrap_err();
        assert_eq!(
            unresolved.code.as_deref(),
            Some("tool_reference_unresolved")
        );
        assert_eq!(first.input_transformations, Vec::<Value>::new());
    }

    /// Over HTTP: the fail switch answers a checked request with the vendor's server error,
    /// its status and its body, and changes nothing: the next send of the same bytes is
    /// answered as the failed one would have been. A request the stand-in refuses is refused
    /// whatever the switch says.
    #[test]
    fn standin_fails_a_request_with_the_vendors_server_error_and_keeps_its_state() {
        let long = |mut v: Value| {
            v["system"] = json!(long_system());
            v["cache_control"] = json!({"type": "ephemeral"});
            v["model"] = json!("claude-opus-5");
            v
        };
        let one = wire(&long(body("a", "u")), &[]);
        let two = wire(&long(body("a", "u a u")), &[]);
        let failing =
            |w: &mektpoy::WireRequest, status: &str| w.clone().with_header(FAIL_HEADER, status);
        let session = "standin-fail";

        let failed = post(session, 0, &failing(&one, "529")).unwrap();
        assert_eq!(failed.status, 529);
        assert_eq!(failed.content_type, "application/json");
        assert_eq!(
            serde_json::from_str::<Value>(&failed.body).unwrap(),
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
        );
        assert_eq!(failed.bytes, None, "no figures for a failed request");
        let first = send(session, 0, &one).unwrap();
        assert_eq!((first.text.as_str(), first.usage.cached_bytes), ("ok 1", 0));

        let failed = post(session, 0, &failing(&two, "500")).unwrap();
        assert_eq!(failed.status, 500);
        assert_eq!(
            serde_json::from_str::<Value>(&failed.body).unwrap(),
            json!({"type": "error", "error": {"type": "api_error", "message": "Internal server error"}})
        );
        let second = send(session, 0, &two).unwrap();
        assert_eq!(second.text, "ok 2", "the failed request was not counted");
        assert_eq!(
            second.usage.cached_bytes, first.usage.total_bytes,
            "the failed request wrote no entry"
        );

        let mut broken = long(body("a", "u"));
        broken.as_object_mut().unwrap().remove("max_tokens");
        let refused = send(session, 0, &failing(&wire(&broken, &[]), "529"));
        let refused = refused.unwrap_err();
        assert_eq!(refused.status, 400, "checked first: {}", refused.message);
        let bad = send("standin-fail-bad", 0, &failing(&one, "503")).unwrap_err();
        assert_eq!(bad.status, 400);
        assert!(bad.message.contains("test support"), "{}", bad.message);
        // A session first seen by a failed request does not exist after it.
        post("standin-fail-new", 512, &failing(&one, "529")).unwrap();
        let other_section = send("standin-fail-new", 0, &one).unwrap();
        assert_eq!(other_section.text, "ok 1");
    }

    /// A breakpoint is not prompt, a tool schema's property named `cache_control` is: the
    /// total counts the property and leaves the tool's own breakpoint out.
    #[test]
    fn standin_counts_a_schema_property_named_cache_control() {
        let property = json!({"cache_control": {"type": "string", "description": "v1"}});
        let tool = |marked: bool| {
            let mut t = json!({"name": "marked", "input_schema": {"type": "object", "properties": property}});
            if marked {
                t["cache_control"] = json!({"type": "ephemeral"});
            }
            t
        };
        let request = |marked: bool| {
            let mut v = body("a", "u");
            v["model"] = json!("claude-opus-5");
            v["tools"] = json!([tool(marked)]);
            v
        };
        let plain = exchange("standin-schema-property", &[], &request(false)).unwrap();
        let marked = exchange("standin-schema-property-marked", &[], &request(true)).unwrap();
        assert_eq!(total(&plain), total(&marked), "the breakpoint is left out");
        let property = r#""cache_control":{"description":"v1","type":"string"}"#;
        let without = request(false).to_string().replace(property, "");
        let shorter = exchange(
            "standin-schema-property-none",
            &[],
            &serde_json::from_str(&without).unwrap(),
        )
        .unwrap();
        assert_eq!(
            total(&plain),
            total(&shorter) + property.len() as u64,
            "the property is prompt"
        );
    }

    /// A cache is per model: in one session, a request to another model reads nothing the
    /// first model's requests wrote, and each model announces its own deferred section size.
    #[test]
    fn standin_keeps_one_cache_per_model() {
        let request = |model: &str, spec: &str| {
            let mut v = body("a", spec);
            v["model"] = json!(model);
            v["system"] = json!(long_system());
            v["cache_control"] = json!({"type": "ephemeral"});
            v
        };
        let session = "standin-cache-per-model";
        let first = exchange(session, &[], &request("claude-opus-5", "u")).unwrap();
        let other = exchange(session, &[], &request("claude-nova-6", "u")).unwrap();
        assert_eq!(cached(&other), 0, "another model reads nothing");
        let again = exchange(session, &[], &request("claude-opus-5", "u a u")).unwrap();
        assert_eq!(cached(&again), total(&first));
        let deepseek = |spec: &str| {
            let mut v = request("deepseek-flash", spec);
            v.as_object_mut().unwrap().remove("cache_control");
            v
        };
        let d1 = exchange(session, &[], &deepseek("u")).unwrap();
        assert_eq!(cached(&d1), 0);
        let mut h = headers(&[]);
        h.push((SESSION_HEADER.to_owned(), session.to_owned()));
        h.push((SECTION_HEADER.to_owned(), "512".to_owned()));
        let resized = answer(&h, &request("claude-opus-5", "u a u a u").to_string());
        assert!(
            resized.is_err_and(|f| f.message.contains("test support")),
            "one model, one section size"
        );
        let sized = answer(&h, &request("claude-haiku-5", "u").to_string());
        assert!(sized.is_ok(), "another model announces its own");
    }

    /// Over HTTP on a binding model: the answer's content goes back as the assistant message;
    /// a rewrite of `tools` is refused unless `drop_block` drops the block.
    #[test]
    fn standin_over_http_binds_thinking_to_the_conversation() {
        let session = "standin-http-bind";
        let first = send(session, 0, &wire(&chat(&[user("u0")]), &[])).unwrap();
        assert_eq!(first.text, "ok 1");
        assert_eq!(first.content.len(), 2);
        assert_eq!(first.content[0]["type"], "thinking");
        assert_eq!(first.usage.cached_bytes, 0);
        let messages = [user("u0"), first.message(), user("u1")];

        let mut rewritten = chat(&messages);
        rewritten["tools"] = tools("a b");
        let refused = send(session, 0, &wire(&rewritten, &[])).unwrap_err();
        assert_eq!(refused.status, 400);
        assert!(
            refused.message.contains(BOUND_ELSEWHERE),
            "{}",
            refused.message
        );
        let dropped = send(session, 0, &wire(&drop_block(rewritten), &[BINDING_BETA])).unwrap();
        assert_eq!(dropped.input_transformations.len(), 1);

        let session = "standin-http-bind-2";
        let first = send(session, 0, &wire(&chat(&[user("u0")]), &[])).unwrap();
        let second = send(
            session,
            0,
            &wire(&chat(&[user("u0"), first.message(), user("u1")]), &[]),
        )
        .unwrap();
        assert_eq!(second.text, "ok 2");
        assert_eq!(second.usage.cached_bytes, first.usage.total_bytes);
    }

    /// The JSON body holds the vendor's fields and nothing else; `diagnostics` only when a
    /// request to a Claude model opted in, `input_transformations` only on a Claude model with
    /// the binding beta; a tool call when the test asks for one.
    #[test]
    fn standin_answers_with_exactly_the_vendor_body() {
        let keys = |v: &Value| -> Vec<String> { v.as_object().unwrap().keys().cloned().collect() };
        let reply = exchange("standin-shape-1", &[], &body("a", "u")).unwrap();
        let mut expected = [
            "content",
            "id",
            "model",
            "role",
            "stop_reason",
            "stop_sequence",
            "type",
            "usage",
        ]
        .map(str::to_owned)
        .to_vec();
        let mut got = keys(&reply.body);
        got.sort();
        assert_eq!(got, expected);
        let mut usage = keys(&reply["usage"]);
        usage.sort();
        assert_eq!(
            usage,
            [
                "cache_creation",
                "cache_creation_input_tokens",
                "cache_read_input_tokens",
                "input_tokens",
                "output_tokens",
                "service_tier"
            ]
        );
        assert_eq!(
            (&reply["type"], &reply["role"], &reply["stop_reason"]),
            (&json!("message"), &json!("assistant"), &json!("end_turn"))
        );

        let mut asking = body("a", "u");
        asking["diagnostics"] = json!({"previous_message_id": null});
        let reply = exchange("standin-shape-2", &[BINDING_BETA, DIAGNOSIS_BETA], &asking).unwrap();
        assert!(
            reply.body.get("diagnostics").is_none(),
            "not a Claude model: the field is ignored"
        );
        assert!(
            reply.body.get("input_transformations").is_none(),
            "not a Claude model"
        );
        asking["model"] = json!("claude-opus-5");
        asking["system"] = json!(long_system());
        let reply = exchange("standin-shape-2", &[DIAGNOSIS_BETA], &asking).unwrap();
        assert_eq!(reply.body.get("diagnostics"), Some(&Value::Null));
        expected.push("diagnostics".to_owned());
        expected.sort();
        let mut got = keys(&reply.body);
        got.sort();
        assert_eq!(got, expected);

        let mut h = headers(&[]);
        h.push((TOOL_USE_HEADER.to_owned(), "a".to_owned()));
        let reply = exchange_with("standin-shape-3", h, &chat(&[user("u0")])).unwrap();
        let content = reply["content"].as_array().unwrap();
        let types: Vec<&Value> = content.iter().map(|b| &b["type"]).collect();
        assert_eq!(types, ["thinking", "text", "tool_use"]);
        assert_eq!(
            content[2],
            json!({"type": "tool_use", "id": "toolu_standin_0001", "name": "a", "input": {"arg": "x"}})
        );
        assert_eq!(reply["stop_reason"], "tool_use");
    }

    /// The stream is the JSON answer in the vendor's events, and the crate decodes both to the
    /// same answer; the splits are the same for the same request.
    #[test]
    fn standin_streams_the_answer_it_sends_as_json() {
        let mut h = headers(&[BINDING_BETA]);
        h.push((REDACTED_HEADER.to_owned(), "true".to_owned()));
        h.push((TOOL_USE_HEADER.to_owned(), "a".to_owned()));
        let mut streamed = chat(&[user("u0")]);
        streamed["stream"] = json!(true);
        let reply = exchange_with("standin-sse-1", h, &streamed).unwrap();
        assert!(reply.stream);
        let text = sse(&reply);
        assert_eq!(text, sse(&reply), "the same request streams the same");

        let mut events = Vec::new();
        for event in text.split_terminator("\n\n") {
            let (name, data) = event.split_once('\n').unwrap();
            let data: Value = serde_json::from_str(data.strip_prefix("data: ").unwrap()).unwrap();
            assert_eq!(name.strip_prefix("event: "), data["type"].as_str());
            events.push(data);
        }
        let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
        assert_eq!(kinds[0], "message_start");
        let start = &events[0]["message"];
        assert_eq!(
            (&start["content"], &start["stop_reason"]),
            (&json!([]), &Value::Null)
        );
        assert_eq!(start["usage"]["output_tokens"], 1);
        assert_eq!(start["input_transformations"], json!([]));
        assert_eq!(&kinds[1..3], ["content_block_start", "ping"]);
        let tail: Vec<&str> = kinds.iter().copied().filter(|k| *k != "ping").collect();
        assert_eq!(&tail[tail.len() - 2..], ["message_delta", "message_stop"]);
        let delta = |kind: &str| {
            events
                .iter()
                .enumerate()
                .filter(|(_, e)| e.pointer("/delta/type") == Some(&json!(kind)))
                .map(|(i, _)| i)
                .collect::<Vec<_>>()
        };
        let signature = delta("signature_delta");
        assert_eq!(signature.len(), 1);
        assert_eq!(
            kinds[signature[0] + 1],
            "content_block_stop",
            "just before the stop"
        );
        let json_deltas = delta("input_json_delta");
        assert_eq!(events[json_deltas[0]]["delta"]["partial_json"], "");
        let input: String = json_deltas
            .iter()
            .map(|&i| events[i]["delta"]["partial_json"].as_str().unwrap())
            .collect();
        assert_eq!(
            input, "{\n  \"arg\": \"x\"\n}",
            "whitespace between the tokens"
        );
        let redacted = events
            .iter()
            .find(|e| e.pointer("/content_block/type") == Some(&json!("redacted_thinking")))
            .unwrap();
        assert_eq!(
            redacted["content_block"], reply["content"][1],
            "whole in its start"
        );
        assert_eq!(events.last().unwrap(), &json!({"type": "message_stop"}));
        let message_delta = events
            .iter()
            .find(|e| e["type"] == "message_delta")
            .unwrap();
        assert_eq!(
            message_delta["usage"]["output_tokens"],
            reply["usage"]["output_tokens"]
        );
        assert_eq!(message_delta["delta"]["stop_reason"], "tool_use");

        let mut stream = mektpoy::response::MessagesStream::new("anthropic", Some("a1"));
        stream.push_text(&text).unwrap();
        let from_stream = stream.finish().unwrap();
        let from_body =
            mektpoy::response::decode_messages(&reply.body.to_string(), "anthropic", Some("a1"))
                .unwrap();
        assert_eq!(from_stream, from_body);
        assert_eq!(from_body.message.content().len(), 4);
    }

    /// Over HTTP: a request with `"stream": true` gets an event stream (and the test headers);
    /// one cut off is shorter, accepted all the same; a tool call without its result in the
    /// next message is refused as the vendor refuses it.
    #[test]
    fn standin_over_http_streams_cuts_off_and_wants_tool_results() {
        let mut streamed = chat(&[user("u0")]);
        streamed["stream"] = json!(true);
        let json = post("standin-http-sse-json", 0, &wire(&chat(&[user("u0")]), &[])).unwrap();
        let sse = post("standin-http-sse", 0, &wire(&streamed, &[])).unwrap();
        assert!(!json.is_event_stream() && sse.is_event_stream());
        assert_eq!(sse.content_type, "text/event-stream; charset=utf-8");
        assert_eq!(sse.bytes, json.bytes);
        assert_eq!(sse.content, json.content);
        let mut stream = mektpoy::response::MessagesStream::new("anthropic", None);
        stream.push_text(&sse.body).unwrap();
        assert_eq!(
            stream.finish().unwrap(),
            mektpoy::response::decode_messages(&json.body, "anthropic", None).unwrap()
        );

        let cut = wire(&streamed, &[]).with_header(CUT_OFF_HEADER, "true");
        let torn = post("standin-http-cut", 0, &cut).unwrap();
        assert_eq!(torn.status, 200, "accepted");
        assert!(
            torn.body.starts_with("event: message_start\n")
                && !torn.body.contains("event: message_stop"),
            "cut off mid-way: {}",
            torn.body
        );
        let mut stream = mektpoy::response::MessagesStream::new("anthropic", None);
        stream.push_text(&torn.body).unwrap();
        assert!(matches!(
            stream.finish(),
            Err(mektpoy::response::ResponseError::CutOff { .. })
        ));
        let next = send("standin-http-cut", 0, &wire(&chat(&[user("u0")]), &[])).unwrap();
        assert_eq!(next.text, "ok 2", "the cut-off request was answered");

        let called = wire(&chat(&[user("u0")]), &[]).with_header(TOOL_USE_HEADER, "a");
        let answer = send("standin-http-tool", 0, &called).unwrap();
        let id = answer.content[2]["id"].as_str().unwrap().to_owned();
        let unanswered = [user("u0"), answer.message(), user("u1")];
        let refused = send("standin-http-tool", 0, &wire(&chat(&unanswered), &[])).unwrap_err();
        assert_eq!(
            refused.message,
            format!(
                "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: {id}. Each `tool_use` block must have a corresponding `tool_result` block in the next message."
            )
        );
        let result = json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": id, "content": "done"}]});
        let answered = [user("u0"), answer.message(), result];
        send("standin-http-tool", 0, &wire(&chat(&answered), &[])).unwrap();
    }
}
