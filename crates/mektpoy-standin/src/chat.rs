//! OpenAI-compatible chat completions: `POST /v1/chat/completions` and `POST /chat/completions`
//! (DeepSeek's base URL, `https://api.deepseek.com`, has no `/v1`; its `/v1` is an alias "for
//! compatibility with OpenAI", with no relation to a model version).
//!
//! Vendor pages read 2026-12-06 (through the search tool, in the vendors' own pages where the
//! index held them and in copies or OpenAPI-generated types where it did not):
//!
//! - OpenAI's chat completions reference, <https://platform.openai.com/docs/api-reference/chat>,
//!   read in the OpenAPI-generated types of `openai-ruby` (`ChatCompletionStreamOptions`),
//!   `openai-struct` (`ChatCompletionFunctions`, `ChatCompletionStreamOptions`),
//!   `openai-client-base` (`ChatCompletionFunctions`: the function name "Must be a-z, A-Z, 0-9,
//!   or contain underscores and dashes, with a maximum length of 64"; `parameters` "described as
//!   a JSON Schema object") and `ex_openai` (`CreateChatCompletionStreamResponse`: `object`
//!   `chat.completion.chunk`, "Each chunk has the same ID", the same `created`).
//! - OpenAI's prompt-caching guide, <https://developers.openai.com/api/docs/guides/prompt-caching>
//!   ("Caching is enabled automatically for prompts that are 1024 tokens or longer"; "Cache hits
//!   are only possible for exact prefix matches within a prompt", tools included), with the
//!   128-token step from OpenAI's cookbook `examples/Prompt_Caching_201.ipynb` ("cache hits
//!   occurring in increments of 128 tokens"). The guide's later revision adds explicit cache
//!   breakpoints and `cache_write_tokens` on GPT-5.6 and later; they are not modelled.
//! - DeepSeek's context-caching guide, <https://api-docs.deepseek.com/guides/kv_cache> (and its
//!   `.md` and `zh-cn` copies): a request hits "if it fully matches a cache prefix unit",
//!   units being persisted at request boundaries, at common prefixes and "at fixed token
//!   intervals". The stand-in keeps the unit of lib.rs's `deepseek_cache` (the 2024-08-02
//!   announcement's 64-token storage unit, taken as the fixed interval): the longest common
//!   prefix with any earlier accepted prompt of the session, in whole 64-token units. So a
//!   prompt sent again reads its whole units, not its end, and `A + C` after `A + B` reads the
//!   units of `A` at once, where the guide persists `A` for a third request: the same
//!   simplification the Messages path makes, and the crate's meter models it the same way.
//! - DeepSeek's chat completion reference, <https://api-docs.deepseek.com/api/create-chat-completion>,
//!   read in copies (`share.apidog.com` "Create Chat Completion", `POST
//!   https://api.deepseek.com/chat/completions`; the `deepseek-sdk` crate's response types:
//!   `prompt_tokens` "equals prompt_cache_hit_tokens + prompt_cache_miss_tokens",
//!   `prompt_tokens_details.cached_tokens` "Same as `prompt_cache_hit_tokens`"); roles
//!   `system`, `user`, `assistant`, `tool`.
//! - The vendors' refusals, as their answers are quoted in public issues (the references give no
//!   wording): `agno-agi/agno#3105` and `langgenius/dify#32222` (DeepSeek: "An assistant message
//!   with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'.
//!   (insufficient tool messages following tool_calls message)"), `aliasrobotics/cai#111`
//!   (OpenAI: the same sentence, then "The following tool_call_ids did not have response
//!   messages: ..."), `smarter-sh/smarter#264` (OpenAI: "Invalid parameter: messages with role
//!   'tool' must be a response to a preceeding message with 'tool_calls'.", `param`
//!   `messages.[4].role`), `qwersyk/Newelle#425` (DeepSeek: "Messages with role 'tool' must be
//!   a response to a preceding message with 'tool_calls'", `param` null, `code`
//!   `invalid_request_error`), `brekkylab/ailoy#109` and `nikkigallery/Whimbox#61` (OpenAI and
//!   DeepSeek: "Invalid 'tools\[0\].function.name': string does not match pattern. Expected a
//!   string that matches the pattern '^\[a-zA-Z0-9_-\]+$'."), `mcp-use/mcp-use#90` (the same on
//!   `messages[9].tool_calls[0].function.name`), `SilasMarvin/lsp-ai#108` ("Missing required
//!   parameter: 'messages'.", `missing_required_parameter`), `irudnyts/openai#68` ("you must
//!   provide a model parameter"), `nanbingxyz/5ire#33` (the `string too long. Expected a string
//!   with maximum length ..., but got a string with length ... instead.` pattern).
//!
//! # What it refuses
//!
//! A 400 with `{"error":{"message","type":"invalid_request_error","param","code"}}` (DeepSeek's
//! errors carry `param` null and `code` `invalid_request_error`, as quoted): a body that is not
//! JSON; no `model`; no `messages`, or an empty array; a message without a known `role` (OpenAI:
//! `system`, `developer`, `user`, `assistant`, `tool`, `function`; DeepSeek: `system`, `user`,
//! `assistant`, `tool`) or, but for an assistant message with `tool_calls`, without `content`;
//! a tool message without `tool_call_id`, or whose id answers no call of the assistant message
//! its run of tool messages follows ([`ORPHAN_TOOL_MESSAGE`]); an assistant `tool_calls` not
//! followed by a tool message for each id before the next other message or the end
//! ([`UNANSWERED_TOOL_CALLS`]); a tool call without `id`, or whose `function.arguments` is not a
//! string, or whose name the vendor refuses; a tool that is not `{"type":"function","function":
//! {..}}`, a function name outside `^[a-zA-Z0-9_-]{1,64}$`, `parameters` that is not an object,
//! and a name declared twice (the pages give no wording for this one: the message is the
//! stand-in's own). The wordings not quoted above (invalid types, an unknown role, a missing
//! content, a duplicate name) follow OpenAI's patterns but were not read in a vendor answer. A
//! refusal is a JSON error body whatever `stream` says, and leaves the session's cache unchanged.
//! With [`FAIL_HEADER`] (`500` or `503`) a request that passes every check is answered with
//! the vendor's server error instead, in the same shape, and changes nothing either.
//!
//! # What it answers
//!
//! - JSON: `{"id","object":"chat.completion","created","model","choices":[{"index":0,
//!   "message":{"role":"assistant","content":"ok N"[,"tool_calls"]},"finish_reason"}],
//!   "usage"}`, `usage` being `{"prompt_tokens","completion_tokens","total_tokens",
//!   "prompt_tokens_details":{"cached_tokens"}}` and, on DeepSeek, `prompt_cache_hit_tokens` /
//!   `prompt_cache_miss_tokens`. With [`TOOL_USE_HEADER`] the message
//!   also calls that tool (`{"id":"call_standin_N","type":"function","function":{"name",
//!   "arguments":"{\"arg\":\"x\"}"}}`) and `finish_reason` is `tool_calls` (else `stop`).
//! - With `"stream": true`, `data: {...}` chunks (`object` `chat.completion.chunk`, the same
//!   `id`, `created` and `model`): a first delta `{"role":"assistant","content":""}`, the text
//!   in pieces, each tool call opened with its `index`, `id`, `type`, name and empty
//!   `arguments` then its arguments in pieces, a last delta `{}` with the `finish_reason`; with
//!   `stream_options.include_usage` every chunk has `"usage": null` and one more chunk with
//!   empty `choices` carries the usage; then `data: [DONE]`. The pieces are drawn from the
//!   session and the request's number, as on the Messages path.
//!
//! Cached input: the prompt is the concatenation of each tool's JSON and each message's JSON,
//! as sent (reference §9: this wire has no deferred section and its system prompt is a
//! message); tokens are ⌈bytes / 4⌉. On `deepseek-*` models, the longest common prefix with any
//! earlier accepted prompt of the session to the same model (a provider's cache is per model,
//! as on the Messages path) in whole 64-token units (256 bytes); on the others
//! OpenAI's rule: that prefix from 1,024 tokens (4,096 bytes) in 128-token steps (512 bytes),
//! nothing below. The session is keyed as on the Messages path ([`SESSION_HEADER`], else the
//! API key's hash); chat and Messages requests keep separate prompts.
//!
//! Response headers, as on the Messages path: [`TOTAL_BYTES_HEADER`], [`CACHED_BYTES_HEADER`],
//! and [`CONTENT_HEADER`] (here the assistant message as JSON); [`CUT_OFF_HEADER`] cuts the body
//! off mid-way, the request accepted all the same.

use std::collections::{BTreeMap, HashSet};
use std::fmt::Write as _;
use std::io::Read;
use std::net::TcpStream;
use std::sync::{Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};

use crate::{
    CACHED_BYTES_HEADER, CONTENT_HEADER, CUT_OFF_HEADER, FAIL_HEADER, FNV_START, Headers, Rng,
    SESSION_HEADER, TOOL_USE_HEADER, TOTAL_BYTES_HEADER, fnv, header, http_request,
};

/// The request paths this module answers.
pub const PATHS: [&str; 2] = ["/v1/chat/completions", "/chat/completions"];

/// The first sentence of both vendors' refusal of unanswered tool calls.
pub const UNANSWERED_TOOL_CALLS: &str = "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'.";

/// The stable part of both vendors' refusal of a tool message that answers no pending call
/// (OpenAI spells it "preceeding", DeepSeek "preceding").
pub const ORPHAN_TOOL_MESSAGE: &str = "must be a response to a";

/// OpenAI's limit on a function name.
const MAX_NAME: usize = 64;

/// Whether a request line asks for one of [`PATHS`].
pub(crate) fn is_chat(request_line: &str) -> bool {
    request_line
        .split_whitespace()
        .nth(1)
        .is_some_and(|path| PATHS.contains(&path))
}

/// Whose rules and wording apply: DeepSeek's on `deepseek-*` models, OpenAI's otherwise.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Vendor {
    DeepSeek,
    OpenAi,
}

impl Vendor {
    fn of(model: &str) -> Self {
        if model.starts_with("deepseek-") {
            Vendor::DeepSeek
        } else {
            Vendor::OpenAi
        }
    }

    fn roles(self) -> &'static [&'static str] {
        match self {
            Vendor::OpenAi => &[
                "system",
                "assistant",
                "user",
                "function",
                "tool",
                "developer",
            ],
            Vendor::DeepSeek => &["system", "user", "assistant", "tool"],
        }
    }
}

/// A refusal in OpenAI's error shape (the Responses path, [`crate::responses`], answers in it
/// too).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Refusal {
    pub(crate) status: u16,
    pub(crate) message: String,
    pub(crate) param: Option<String>,
    pub(crate) code: Option<String>,
    /// The error `type`: `invalid_request_error` but for the server errors of
    /// [`crate::FAIL_HEADER`] on the Responses path.
    pub(crate) kind: &'static str,
}

impl Refusal {
    pub(crate) fn new(
        message: impl Into<String>,
        param: Option<String>,
        code: Option<&str>,
    ) -> Self {
        Refusal {
            status: 400,
            kind: "invalid_request_error",
            message: message.into(),
            param,
            code: code.map(str::to_owned),
        }
    }

    /// As `vendor` answers: DeepSeek's errors have no `param` and the code
    /// `invalid_request_error`.
    fn from(mut self, vendor: Vendor) -> Self {
        if vendor == Vendor::DeepSeek {
            self.param = None;
            self.code = Some("invalid_request_error".to_owned());
        }
        self
    }

    pub(crate) fn body(&self) -> Value {
        json!({"error": {
            "message": self.message,
            "type": self.kind,
            "param": self.param,
            "code": self.code,
        }})
    }
}

pub(crate) fn missing(param: String) -> Refusal {
    Refusal::new(
        format!("Missing required parameter: '{param}'."),
        Some(param),
        Some("missing_required_parameter"),
    )
}

/// What a JSON value is, as OpenAI's type errors name it.
fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A value as OpenAI's errors quote it: a string in single quotes, anything else as JSON.
pub(crate) fn quoted(v: &Value) -> String {
    match v {
        Value::String(s) => format!("'{s}'"),
        other => other.to_string(),
    }
}

pub(crate) fn wrong_type(param: String, expected: &str, got: &Value) -> Refusal {
    Refusal::new(
        format!(
            "Invalid type for '{param}': expected {expected}, but got {} instead.",
            kind(got)
        ),
        Some(param),
        Some("invalid_type"),
    )
}

/// A function name the vendors take: `^[a-zA-Z0-9_-]{1,64}$`.
pub(crate) fn check_name(param: String, name: &Value) -> Result<(), Refusal> {
    let Some(name) = name.as_str() else {
        return Err(wrong_type(param, "a string", name));
    };
    let allowed = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b'-';
    if name.is_empty() || !name.bytes().all(allowed) {
        return Err(Refusal::new(
            format!(
                "Invalid '{param}': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'."
            ),
            Some(param),
            Some("invalid_value"),
        ));
    }
    if name.len() > MAX_NAME {
        return Err(Refusal::new(
            format!(
                "Invalid '{param}': string too long. Expected a string with maximum length {MAX_NAME}, but got a string with length {} instead.",
                name.len()
            ),
            Some(param),
            Some("string_above_max_length"),
        ));
    }
    Ok(())
}

/// The stateless checks; the vendor whose rules apply.
fn check(v: &Value) -> Result<Vendor, Refusal> {
    let model = v.get("model").and_then(Value::as_str).unwrap_or_default();
    if model.is_empty() {
        return Err(Refusal::new(
            "you must provide a model parameter",
            None,
            None,
        ));
    }
    let vendor = Vendor::of(model);
    check_tools(v).map_err(|r| r.from(vendor))?;
    check_messages(v, vendor).map_err(|r| r.from(vendor))?;
    Ok(vendor)
}

fn check_tools(v: &Value) -> Result<(), Refusal> {
    let tools = match v.get("tools") {
        None | Some(Value::Null) => return Ok(()),
        Some(Value::Array(tools)) => tools,
        Some(other) => return Err(wrong_type("tools".to_owned(), "an array", other)),
    };
    let mut names = HashSet::new();
    for (i, tool) in tools.iter().enumerate() {
        let at = |key: &str| format!("tools[{i}].{key}");
        let Some(kind) = tool.get("type") else {
            return Err(missing(at("type")));
        };
        if kind != "function" {
            return Err(Refusal::new(
                format!(
                    "Invalid value: {}. Supported values are: 'function' and 'custom'.",
                    quoted(kind)
                ),
                Some(at("type")),
                Some("invalid_value"),
            ));
        }
        let function = match tool.get("function") {
            None => return Err(missing(at("function"))),
            Some(Value::Object(f)) => f,
            Some(other) => return Err(wrong_type(at("function"), "an object", other)),
        };
        let Some(name) = function.get("name") else {
            return Err(missing(at("function.name")));
        };
        check_name(at("function.name"), name)?;
        match function.get("parameters") {
            None | Some(Value::Object(_)) => {}
            Some(other) => {
                return Err(wrong_type(at("function.parameters"), "an object", other));
            }
        }
        let name = name.as_str().unwrap_or_default();
        if !names.insert(name) {
            return Err(Refusal::new(
                format!("Invalid 'tools': the function name '{name}' is declared more than once."),
                Some(at("function.name")),
                Some("invalid_value"),
            ));
        }
    }
    Ok(())
}

fn check_messages(v: &Value, vendor: Vendor) -> Result<(), Refusal> {
    let messages = match v.get("messages") {
        None | Some(Value::Null) => return Err(missing("messages".to_owned())),
        Some(Value::Array(m)) => m,
        Some(other) => return Err(wrong_type("messages".to_owned(), "an array", other)),
    };
    if messages.is_empty() {
        return Err(Refusal::new(
            "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead.",
            Some("messages".to_owned()),
            Some("empty_array"),
        ));
    }
    // The calls of the latest assistant message still waiting for their tool message, and
    // where that message is.
    let mut pending: Vec<&str> = Vec::new();
    let mut pending_at = 0;
    for (i, m) in messages.iter().enumerate() {
        let at = |key: &str| format!("messages[{i}].{key}");
        let Some(role) = m.get("role") else {
            return Err(missing(at("role")));
        };
        let role = match role.as_str() {
            Some(r) if vendor.roles().contains(&r) => r,
            _ => {
                let supported: Vec<String> =
                    vendor.roles().iter().map(|r| format!("'{r}'")).collect();
                let (last, rest) = supported.split_last().unwrap_or((&supported[0], &[]));
                return Err(Refusal::new(
                    format!(
                        "Invalid value: {}. Supported values are: {}, and {last}.",
                        quoted(role),
                        rest.join(", ")
                    ),
                    Some(at("role")),
                    Some("invalid_value"),
                ));
            }
        };
        if role != "tool" && !pending.is_empty() {
            return Err(unanswered(vendor, pending_at, &pending));
        }
        let content = m.get("content").filter(|c| !c.is_null());
        match role {
            "tool" => {
                let id = match m.get("tool_call_id") {
                    None | Some(Value::Null) => return Err(missing(at("tool_call_id"))),
                    Some(Value::String(id)) => id.as_str(),
                    Some(other) => return Err(wrong_type(at("tool_call_id"), "a string", other)),
                };
                match pending.iter().position(|p| *p == id) {
                    Some(k) => {
                        pending.remove(k);
                    }
                    None => return Err(orphan(vendor, i)),
                }
                if content.is_none() {
                    return Err(missing(at("content")));
                }
            }
            "assistant" => {
                let calls = match m.get("tool_calls") {
                    None | Some(Value::Null) => &[][..],
                    Some(Value::Array(calls)) => calls,
                    Some(other) => return Err(wrong_type(at("tool_calls"), "an array", other)),
                };
                if content.is_none() && calls.is_empty() {
                    return Err(Refusal::new(
                        "Invalid value for 'content': expected a string, got null.",
                        Some(at("content")),
                        None,
                    ));
                }
                for (j, call) in calls.iter().enumerate() {
                    let at = |key: &str| format!("messages[{i}].tool_calls[{j}].{key}");
                    let id = match call.get("id") {
                        None | Some(Value::Null) => return Err(missing(at("id"))),
                        Some(Value::String(id)) => id.as_str(),
                        Some(other) => return Err(wrong_type(at("id"), "a string", other)),
                    };
                    let function = match call.get("function") {
                        None => return Err(missing(at("function"))),
                        Some(f) if f.is_object() => f,
                        Some(other) => return Err(wrong_type(at("function"), "an object", other)),
                    };
                    let Some(name) = function.get("name") else {
                        return Err(missing(at("function.name")));
                    };
                    check_name(at("function.name"), name)?;
                    match function.get("arguments") {
                        None => return Err(missing(at("function.arguments"))),
                        Some(Value::String(_)) => {}
                        Some(other) => {
                            return Err(wrong_type(at("function.arguments"), "a string", other));
                        }
                    }
                    pending.push(id);
                }
                pending_at = i;
            }
            _ => {
                if content.is_none() {
                    return Err(missing(at("content")));
                }
            }
        }
    }
    if !pending.is_empty() {
        return Err(unanswered(vendor, pending_at, &pending));
    }
    Ok(())
}

/// The refusal of calls left without their tool messages, in `vendor`'s words.
fn unanswered(vendor: Vendor, at: usize, ids: &[&str]) -> Refusal {
    match vendor {
        Vendor::OpenAi => Refusal::new(
            format!(
                "{UNANSWERED_TOOL_CALLS} The following tool_call_ids did not have response messages: {}",
                ids.join(", ")
            ),
            Some(format!("messages.[{at}].role")),
            None,
        ),
        Vendor::DeepSeek => Refusal::new(
            format!(
                "{UNANSWERED_TOOL_CALLS} (insufficient tool messages following tool_calls message)"
            ),
            None,
            None,
        ),
    }
}

/// The refusal of a tool message that answers no pending call, in `vendor`'s words.
fn orphan(vendor: Vendor, at: usize) -> Refusal {
    match vendor {
        Vendor::OpenAi => Refusal::new(
            format!(
                "Invalid parameter: messages with role 'tool' {ORPHAN_TOOL_MESSAGE} preceeding message with 'tool_calls'."
            ),
            Some(format!("messages.[{at}].role")),
            None,
        ),
        Vendor::DeepSeek => Refusal::new(
            format!(
                "Messages with role 'tool' {ORPHAN_TOOL_MESSAGE} preceding message with 'tool_calls'"
            ),
            None,
            None,
        ),
    }
}

/// The prompt's bytes (reference §9): each tool's JSON, then each message's, as sent.
fn prompt_bytes(body: &str) -> Vec<u8> {
    #[derive(Deserialize)]
    struct Prompt<'a> {
        #[serde(borrow, default)]
        tools: Option<Vec<&'a RawValue>>,
        #[serde(borrow, default)]
        messages: Vec<&'a RawValue>,
    }
    let prompt: Prompt<'_> = serde_json::from_str(body).unwrap_or(Prompt {
        tools: None,
        messages: Vec::new(),
    });
    let mut out = Vec::with_capacity(body.len());
    for part in prompt.tools.iter().flatten().chain(&prompt.messages) {
        out.extend_from_slice(part.get().as_bytes());
    }
    out
}

/// What `vendor` reads of `bytes` from the session's earlier prompts: the longest common
/// prefix in whole units (DeepSeek 64 tokens; OpenAI 128 tokens from 1,024), four bytes a token.
pub(crate) fn cached_bytes(prompts: &[Vec<u8>], bytes: &[u8], vendor: Vendor) -> u64 {
    let common = prompts
        .iter()
        .map(|p| p.iter().zip(bytes).take_while(|(a, b)| a == b).count())
        .max()
        .unwrap_or(0) as u64;
    match vendor {
        Vendor::DeepSeek => common / 256 * 256,
        Vendor::OpenAi if common >= 1024 * 4 => common / 512 * 512,
        Vendor::OpenAi => 0,
    }
}

/// Per-session state: every accepted prompt, by model, and how many requests were answered.
#[derive(Default)]
struct ChatState {
    prompts: BTreeMap<String, Vec<Vec<u8>>>,
    requests: u64,
}

static CHATS: Mutex<BTreeMap<String, ChatState>> = Mutex::new(BTreeMap::new());

/// An accepted request's answer: the vendor's body, the test figures, and how to send it.
#[derive(Clone, Debug, PartialEq)]
struct Answered {
    body: Value,
    total: u64,
    cached: u64,
    stream: bool,
    include_usage: bool,
    cut: bool,
    seed: u64,
}

impl Answered {
    /// The assistant message ([`CONTENT_HEADER`]).
    fn message(&self) -> &Value {
        &self.body["choices"][0]["message"]
    }
}

/// The server error [`FAIL_HEADER`] asks for on a request that passed every check, if any:
/// `500` or `503`, the statuses both vendors' error pages give for a server fault and an
/// overload (read 2026-12-06: DeepSeek's <https://api-docs.deepseek.com/quick_start/error_codes>,
/// "500 - Server Error: Our server encounters an issue", "503 - Server Overloaded: The server
/// is overloaded due to high traffic", both "retry your request after a brief wait"; OpenAI's
/// <https://platform.openai.com/docs/guides/error-codes>, read in the copy quoted on
/// `community.openai.com/t/error-code-500-and-health-check/696299` and in third-party error
/// catalogues: 500 "The server had an error while processing your request", 503 "The engine is
/// currently overloaded, please try again later"). The pages give no body: the stand-in answers
/// in the refusals' shape, `error.type` `server_error` or `service_unavailable_error`, and
/// changes no state (a retry of the same bytes is answered as the failed send would have been).
fn failure(headers: &Headers, vendor: Vendor) -> Result<Option<Refusal>, Refusal> {
    let (status, kind, message) = match (header(headers, FAIL_HEADER), vendor) {
        (None, _) => return Ok(None),
        (Some("500"), Vendor::OpenAi) => (
            500,
            "server_error",
            "The server had an error while processing your request. Sorry about that!",
        ),
        (Some("500"), Vendor::DeepSeek) => (500, "server_error", "Server Error"),
        (Some("503"), Vendor::OpenAi) => (
            503,
            "service_unavailable_error",
            "The engine is currently overloaded, please try again later",
        ),
        (Some("503"), Vendor::DeepSeek) => (503, "service_unavailable_error", "Server Overloaded"),
        (Some(other), _) => {
            let message = format!("test support: bad {FAIL_HEADER}: `{other}`");
            return Err(Refusal::new(message, None, None));
        }
    };
    Ok(Some(Refusal {
        status,
        kind,
        message: message.to_owned(),
        param: None,
        code: None,
    }))
}

fn answer(headers: &Headers, body: &str) -> Result<Answered, Refusal> {
    let v: Value = serde_json::from_str(body).map_err(|_| {
        Refusal::new(
            "We could not parse the JSON body of your request.",
            None,
            None,
        )
    })?;
    let vendor = check(&v)?;
    if let Some(failed) = failure(headers, vendor)? {
        return Err(failed);
    }
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
    let bytes = prompt_bytes(body);
    let total = bytes.len() as u64;

    // Accepted: from here on the session's state changes.
    let mut chats = CHATS.lock().unwrap_or_else(PoisonError::into_inner);
    let state = chats.entry(session.to_owned()).or_default();
    // A provider's cache is per model (as on the Messages path): a request reads only the
    // prompts its own model was sent.
    let model = v["model"].as_str().unwrap_or_default().to_owned();
    let prompts = state.prompts.entry(model).or_default();
    let cached = cached_bytes(prompts, &bytes, vendor);
    prompts.push(bytes);
    state.requests += 1;
    let n = state.requests;
    let seed = fnv(fnv(FNV_START, session.as_bytes()), &n.to_le_bytes());
    drop(chats);

    let mut message = json!({"role": "assistant", "content": format!("ok {n}")});
    let tool = header(headers, TOOL_USE_HEADER);
    if let Some(name) = tool {
        message["tool_calls"] = json!([{
            "id": format!("call_standin_{n:04}"),
            "type": "function",
            "function": {"name": name, "arguments": r#"{"arg":"x"}"#}
        }]);
    }
    let tokens = |b: u64| b.div_ceil(4);
    let (prompt, hit) = (tokens(total), tokens(cached));
    let completion = tokens(message.to_string().len() as u64);
    let mut usage = json!({
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": hit}
    });
    if vendor == Vendor::DeepSeek {
        usage["prompt_cache_hit_tokens"] = json!(hit);
        usage["prompt_cache_miss_tokens"] = json!(prompt - hit);
    }
    let created = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let reply = json!({
        "id": format!("chatcmpl-standin-{n:04}"),
        "object": "chat.completion",
        "created": created,
        "model": v["model"],
        "choices": [{
            "index": 0,
            "message": message,
            "finish_reason": if tool.is_some() { "tool_calls" } else { "stop" }
        }],
        "usage": usage
    });
    Ok(Answered {
        body: reply,
        total,
        cached,
        stream: v.get("stream") == Some(&Value::Bool(true)),
        include_usage: v.pointer("/stream_options/include_usage") == Some(&Value::Bool(true)),
        cut: header(headers, CUT_OFF_HEADER) == Some("true"),
        seed,
    })
}

/// The answer as the vendor streams it: `data:` chunks, then `data: [DONE]`.
fn sse(answered: &Answered) -> String {
    let body = &answered.body;
    let mut rng = Rng(answered.seed);
    let chunk = |choices: Value| {
        let mut chunk = json!({
            "id": body["id"],
            "object": "chat.completion.chunk",
            "created": body["created"],
            "model": body["model"],
            "choices": choices
        });
        if answered.include_usage {
            chunk["usage"] = Value::Null;
        }
        chunk
    };
    let delta = |delta: Value, finish: Value| json!([{"index": 0, "delta": delta, "finish_reason": finish}]);
    let message = answered.message();
    let mut chunks = vec![chunk(delta(
        json!({"role": "assistant", "content": ""}),
        Value::Null,
    ))];
    for piece in rng.pieces(message["content"].as_str().unwrap_or_default()) {
        chunks.push(chunk(delta(json!({"content": piece}), Value::Null)));
    }
    for (index, call) in message["tool_calls"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let mut opening = call.clone();
        opening["index"] = json!(index);
        opening["function"]["arguments"] = json!("");
        chunks.push(chunk(delta(json!({"tool_calls": [opening]}), Value::Null)));
        let arguments = call["function"]["arguments"].as_str().unwrap_or_default();
        for piece in rng.pieces(arguments) {
            let part = json!({"index": index, "function": {"arguments": piece}});
            chunks.push(chunk(delta(json!({"tool_calls": [part]}), Value::Null)));
        }
    }
    chunks.push(chunk(delta(
        json!({}),
        body["choices"][0]["finish_reason"].clone(),
    )));
    if answered.include_usage {
        let mut last = chunk(json!([]));
        last["usage"] = body["usage"].clone();
        chunks.push(last);
    }
    let mut text = String::new();
    for chunk in chunks {
        let _ = write!(text, "data: {chunk}\n\n");
    }
    text.push_str("data: [DONE]\n\n");
    text
}

/// An accepted answer on an OpenAI path, ready to send: its body text and the test figures.
pub(crate) struct Reply {
    pub(crate) text: String,
    pub(crate) stream: bool,
    pub(crate) total: u64,
    pub(crate) cached: u64,
    /// [`CONTENT_HEADER`]'s value.
    pub(crate) content: Value,
    pub(crate) cut: bool,
    pub(crate) seed: u64,
}

/// Answers one request on an OpenAI path (the connection's request line and headers read):
/// `answer` turns the body into a [`Reply`] or a [`Refusal`].
pub(crate) fn serve_with(
    mut stream: TcpStream,
    request_line: &str,
    headers: &Headers,
    reader: &mut impl Read,
    answer: impl FnOnce(&str) -> Result<Reply, Refusal>,
) -> std::io::Result<()> {
    let replied = match http_request(request_line, headers, reader) {
        Ok(body) => answer(&body),
        Err((status, message)) => Err(Refusal {
            status,
            ..Refusal::new(message, None, None)
        }),
    };
    let reply = match replied {
        Ok(reply) => reply,
        Err(refusal) => {
            return crate::write_error(&mut stream, refusal.status, &refusal.body());
        }
    };
    let content_type = match reply.stream {
        true => "text/event-stream; charset=utf-8",
        false => "application/json",
    };
    let head = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\nx-request-id: req_standin_{:016x}\r\n{TOTAL_BYTES_HEADER}: {}\r\n{CACHED_BYTES_HEADER}: {}\r\n{CONTENT_HEADER}: {}\r\nconnection: close\r\n",
        reply.seed, reply.total, reply.cached, reply.content
    );
    crate::write_answer(
        &mut stream,
        head,
        &reply.text,
        reply.stream,
        reply.cut,
        reply.seed,
    )
}

/// Answers one request on a chat path (the connection's request line and headers read).
pub(crate) fn serve(
    stream: TcpStream,
    request_line: &str,
    headers: &Headers,
    reader: &mut impl Read,
) -> std::io::Result<()> {
    serve_with(stream, request_line, headers, reader, |body| {
        let answered = answer(headers, body)?;
        Ok(Reply {
            text: match answered.stream {
                true => sse(&answered),
                false => answered.body.to_string(),
            },
            stream: answered.stream,
            total: answered.total,
            cached: answered.cached,
            content: answered.message().clone(),
            cut: answered.cut,
            seed: answered.seed,
        })
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::client;

    fn headers(session: &str) -> Headers {
        vec![
            (SESSION_HEADER.to_owned(), session.to_owned()),
            ("content-type".to_owned(), "application/json".to_owned()),
        ]
    }

    fn user(text: &str) -> Value {
        json!({"role": "user", "content": text})
    }

    fn call(id: &str, name: &str) -> Value {
        json!({"id": id, "type": "function", "function": {"name": name, "arguments": "{}"}})
    }

    /// An assistant message calling `a` once per id, without content.
    fn calling(ids: &[&str]) -> Value {
        let calls: Vec<Value> = ids.iter().map(|id| call(id, "a")).collect();
        json!({"role": "assistant", "tool_calls": calls})
    }

    fn result(id: &str) -> Value {
        json!({"role": "tool", "tool_call_id": id, "content": "done"})
    }

    fn tool(name: &str) -> Value {
        json!({"type": "function", "function": {"name": name, "description": "d", "parameters": {"type": "object"}}})
    }

    fn body(model: &str, tools: &[Value], messages: &[Value]) -> Value {
        let mut v = json!({"model": model, "messages": messages});
        if !tools.is_empty() {
            v["tools"] = json!(tools);
        }
        v
    }

    fn verdict(v: &Value) -> Result<Answered, Refusal> {
        answer(&headers("chat-verdicts"), &v.to_string())
    }

    /// Checks one verdict against the refusal expected (status, the message's start, `param`),
    /// or its acceptance; a refusal must be in OpenAI's error shape.
    pub(crate) fn assert_verdict<T: std::fmt::Debug>(
        case: &str,
        got: Result<T, Refusal>,
        expected: Option<(u16, &str, Option<&str>)>,
    ) {
        match (got, expected) {
            (Ok(_), None) => {}
            (Err(got), Some((status, message, param))) => {
                assert_eq!(got.status, status, "{case}");
                assert!(
                    got.message.starts_with(message),
                    "{case}: refused with `{}`, expected `{message}`",
                    got.message
                );
                assert_eq!(got.param.as_deref(), param, "{case}");
                let error = got.body();
                let mut keys: Vec<&String> = error["error"].as_object().unwrap().keys().collect();
                keys.sort();
                assert_eq!(keys, ["code", "message", "param", "type"], "{case}");
                assert_eq!(error["error"]["type"], "invalid_request_error", "{case}");
            }
            (got, expected) => panic!("{case}: got {got:?}, expected refusal {expected:?}"),
        }
    }

    /// (case, body, refusal: the message's start or a part of it, and `param`)
    type Row<'a> = (&'a str, Value, Option<(&'a str, Option<&'a str>)>);

    /// Every refusal of the module doc on an OpenAI model, and the nearest accepted requests.
    #[test]
    fn chat_refuses_what_openai_refuses_and_accepts_the_rest() {
        let gpt = |messages: &[Value]| body("gpt-5", &[tool("a")], messages);
        let with_tools = |tools: &[Value]| body("gpt-5", tools, &[user("u")]);
        let long = "n".repeat(64);
        let too_long = "n".repeat(65);
        let mut bad_arguments = calling(&["c1"]);
        bad_arguments["tool_calls"][0]["function"]["arguments"] = json!({"arg": "x"});
        let mut unnamed = tool("a");
        unnamed["function"].as_object_mut().unwrap().remove("name");
        let mut unparameterized = tool("a");
        unparameterized["function"]
            .as_object_mut()
            .unwrap()
            .remove("parameters");
        let mut string_parameters = tool("a");
        string_parameters["function"]["parameters"] = json!("object");
        #[rustfmt::skip]
        let rows: Vec<Row> = vec![
            ("a plain turn", gpt(&[user("u")]), None),
            ("no model", json!({"messages": [user("u")]}), Some(("you must provide a model parameter", None))),
            ("an empty model", json!({"model": "", "messages": [user("u")]}), Some(("you must provide a model parameter", None))),
            ("no messages", json!({"model": "gpt-5"}), Some(("Missing required parameter: 'messages'.", Some("messages")))),
            ("empty messages", gpt(&[]), Some(("Invalid 'messages': empty array.", Some("messages")))),
            ("an unknown role", gpt(&[json!({"role": "robot", "content": "x"})]),
                Some(("Invalid value: 'robot'. Supported values are: 'system', 'assistant', 'user', 'function', 'tool', and 'developer'.", Some("messages[0].role")))),
            ("no role", gpt(&[json!({"content": "x"})]), Some(("Missing required parameter: 'messages[0].role'.", Some("messages[0].role")))),
            ("a developer message", gpt(&[json!({"role": "developer", "content": "x"}), user("u")]), None),
            ("a user message without content", gpt(&[json!({"role": "user"})]), Some(("Missing required parameter: 'messages[0].content'.", Some("messages[0].content")))),
            ("an assistant message without content or calls", gpt(&[user("u"), json!({"role": "assistant"})]),
                Some(("Invalid value for 'content': expected a string, got null.", Some("messages[1].content")))),
            ("calls answered, content omitted", gpt(&[user("u"), calling(&["c1", "c2"]), result("c2"), result("c1"), user("v")]), None),
            ("calls answered at the end", gpt(&[user("u"), calling(&["c1"]), result("c1")]), None),
            ("a tool message first", gpt(&[result("c1"), user("u")]),
                Some(("Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.", Some("messages.[0].role")))),
            ("a tool message answering another id", gpt(&[user("u"), calling(&["c1"]), result("c9")]),
                Some(("Invalid parameter: messages with role 'tool'", Some("messages.[2].role")))),
            ("a call answered twice", gpt(&[user("u"), calling(&["c1"]), result("c1"), result("c1")]),
                Some(("Invalid parameter: messages with role 'tool'", Some("messages.[3].role")))),
            ("a tool message after the next user turn", gpt(&[user("u"), calling(&["c1"]), result("c1"), user("v"), result("c1")]),
                Some(("Invalid parameter: messages with role 'tool'", Some("messages.[4].role")))),
            ("a tool message without its id", gpt(&[user("u"), calling(&["c1"]), json!({"role": "tool", "content": "x"})]),
                Some(("Missing required parameter: 'messages[2].tool_call_id'.", Some("messages[2].tool_call_id")))),
            ("a call left unanswered before a user turn", gpt(&[user("u"), calling(&["c1"]), user("v")]),
                Some(("An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: c1", Some("messages.[1].role")))),
            ("one of two calls left unanswered at the end", gpt(&[user("u"), calling(&["c1", "c2"]), result("c1")]),
                Some(("An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: c2", Some("messages.[1].role")))),
            ("arguments that are not a string", gpt(&[user("u"), bad_arguments, result("c1")]),
                Some(("Invalid type for 'messages[1].tool_calls[0].function.arguments': expected a string, but got an object instead.", Some("messages[1].tool_calls[0].function.arguments")))),
            ("a call to a name the vendor refuses", gpt(&[user("u"), json!({"role": "assistant", "tool_calls": [call("c1", "a.b")]}), result("c1")]),
                Some(("Invalid 'messages[1].tool_calls[0].function.name': string does not match pattern.", Some("messages[1].tool_calls[0].function.name")))),
            ("a dotted function name", with_tools(&[tool("fs.read")]),
                Some(("Invalid 'tools[0].function.name': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.", Some("tools[0].function.name")))),
            ("an empty function name", with_tools(&[tool("a"), tool("")]),
                Some(("Invalid 'tools[1].function.name': string does not match pattern.", Some("tools[1].function.name")))),
            ("a 64-byte name", with_tools(&[tool(&long)]), None),
            ("a 65-byte name", with_tools(&[tool(&too_long)]),
                Some(("Invalid 'tools[0].function.name': string too long. Expected a string with maximum length 64, but got a string with length 65 instead.", Some("tools[0].function.name")))),
            ("no name", with_tools(&[unnamed]), Some(("Missing required parameter: 'tools[0].function.name'.", Some("tools[0].function.name")))),
            ("no parameters", with_tools(&[unparameterized]), None),
            ("parameters that are not an object", with_tools(&[string_parameters]),
                Some(("Invalid type for 'tools[0].function.parameters': expected an object, but got a string instead.", Some("tools[0].function.parameters")))),
            ("a tool that is not a function", with_tools(&[json!({"type": "web_search"})]),
                Some(("Invalid value: 'web_search'.", Some("tools[0].type")))),
            ("a name declared twice", with_tools(&[tool("a"), tool("b"), tool("a")]),
                Some(("Invalid 'tools': the function name 'a' is declared more than once.", Some("tools[2].function.name")))),
        ];
        for (case, v, refusal) in rows {
            assert_verdict(case, verdict(&v), refusal.map(|(m, p)| (400, m, p)));
        }
        let broken = answer(&headers("chat-verdicts"), "{").unwrap_err();
        assert_eq!(
            broken.message,
            "We could not parse the JSON body of your request."
        );
    }

    /// DeepSeek's wording for the tool-message refusals, its roles, and its errors' `param`
    /// and `code`.
    #[test]
    fn chat_refuses_in_deepseeks_words_on_deepseek_models() {
        let ds = |messages: &[Value]| body("deepseek-v4-pro", &[tool("a")], messages);
        let unanswered = verdict(&ds(&[user("u"), calling(&["c1"]), user("v")])).unwrap_err();
        assert_eq!(
            unanswered.message,
            "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. (insufficient tool messages following tool_calls message)"
        );
        assert_eq!(
            (unanswered.param, unanswered.code.as_deref()),
            (None, Some("invalid_request_error"))
        );
        let orphan = verdict(&ds(&[user("u"), result("c1")])).unwrap_err();
        assert_eq!(
            orphan.message,
            "Messages with role 'tool' must be a response to a preceding message with 'tool_calls'"
        );
        let name = verdict(&body("deepseek-v4-flash", &[tool("a b")], &[user("u")])).unwrap_err();
        assert!(
            name.message.contains("does not match pattern"),
            "{}",
            name.message
        );
        assert_eq!(name.body()["error"]["param"], Value::Null);
        let developer = verdict(&ds(&[
            json!({"role": "developer", "content": "x"}),
            user("u"),
        ]));
        assert_eq!(
            developer.unwrap_err().message,
            "Invalid value: 'developer'. Supported values are: 'system', 'user', 'assistant', and 'tool'."
        );
        verdict(&ds(&[user("u"), calling(&["c1"]), result("c1"), user("v")])).unwrap();
    }

    fn exchange(session: &str, v: &Value) -> Answered {
        answer(&headers(session), &v.to_string()).unwrap()
    }

    /// A server error asked for with [`FAIL_HEADER`]: each vendor's status, type and words,
    /// after every check (a request the vendor refuses is refused all the same), and nothing
    /// kept: the retry is answered as the failed send would have been.
    #[test]
    fn chat_fails_in_each_vendors_words_and_keeps_nothing_of_the_failed_request() {
        let system = json!({"role": "system", "content": "Be brief. ".repeat(500)});
        for (model, status, kind, message) in [
            ("deepseek-v4-pro", "500", "server_error", "Server Error"),
            (
                "deepseek-v4-pro",
                "503",
                "service_unavailable_error",
                "Server Overloaded",
            ),
            (
                "gpt-5",
                "500",
                "server_error",
                "The server had an error while processing your request. Sorry about that!",
            ),
            (
                "gpt-5",
                "503",
                "service_unavailable_error",
                "The engine is currently overloaded, please try again later",
            ),
        ] {
            let session = format!("chat-fail-{model}-{status}");
            let v = body(model, &[tool("a")], &[system.clone(), user("u1")]);
            let mut failing = headers(&session);
            failing.push((FAIL_HEADER.to_owned(), status.to_owned()));
            let failed = answer(&failing, &v.to_string()).unwrap_err();
            assert_eq!(failed.status.to_string(), status, "{model}");
            assert_eq!(
                (failed.kind, failed.message.as_str()),
                (kind, message),
                "{model}"
            );
            assert_eq!(failed.body()["error"]["type"], kind, "{model}");
            // Refused before it could fail.
            let orphan = body(model, &[], &[user("u"), result("c9")]);
            assert_eq!(
                answer(&failing, &orphan.to_string()).unwrap_err().status,
                400
            );
            // The retry is the session's first request: nothing cached, answer number 1.
            let retried = exchange(&session, &v);
            assert_eq!(
                (retried.cached, retried.message()["content"].as_str()),
                (0, Some("ok 1"))
            );
            let again = exchange(&session, &v);
            let unit = if model == "gpt-5" { 512 } else { 256 };
            assert_eq!(again.cached, again.total / unit * unit, "{model}");
        }
        let mut bad = headers("chat-fail-bad");
        bad.push((FAIL_HEADER.to_owned(), "529".to_owned()));
        let v = body("gpt-5", &[], &[user("u")]);
        assert_eq!(answer(&bad, &v.to_string()).unwrap_err().status, 400);
    }

    /// A cache is per model: in one session, a request to another model (another vendor's,
    /// or the same vendor's) reads nothing the first model was sent.
    #[test]
    fn chat_caches_per_model() {
        let system = json!({"role": "system", "content": "Be brief. ".repeat(500)});
        let session = "chat-cache-per-model";
        let v = |model: &str| body(model, &[tool("a")], &[system.clone(), user("u1")]);
        assert_eq!(exchange(session, &v("gpt-5")).cached, 0);
        assert_eq!(exchange(session, &v("deepseek-v4-pro")).cached, 0);
        assert_eq!(exchange(session, &v("deepseek-flash")).cached, 0);
        let again = exchange(session, &v("deepseek-v4-pro"));
        assert_eq!(again.cached, again.total / 256 * 256);
        let again = exchange(session, &v("gpt-5"));
        assert_eq!(again.cached, again.total / 512 * 512);
    }

    /// DeepSeek: the longest common prefix with any earlier prompt of the session, in 64-token
    /// units; a refused request leaves the session's prompts alone; sessions do not share.
    #[test]
    fn chat_reads_deepseeks_cache_in_64_token_units() {
        let system = json!({"role": "system", "content": "Be brief. ".repeat(100)});
        let one = [system.clone(), user("u1")];
        let first = body("deepseek-v4-pro", &[tool("a")], &one);
        let session = "chat-cache-deepseek";
        let a = exchange(session, &first);
        assert_eq!(a.cached, 0);
        assert_eq!(a.total, prompt_bytes(&first.to_string()).len() as u64);
        assert_eq!(
            a.total,
            (tool("a").to_string() + &system.to_string() + &user("u1").to_string()).len() as u64,
            "each tool's and each message's JSON, as sent"
        );
        let message = a.message().clone();
        let bad = body(
            "deepseek-v4-pro",
            &[tool("a")],
            &[system.clone(), user("u1"), calling(&["c1"])],
        );
        answer(&headers(session), &bad.to_string()).unwrap_err();
        let two = [system.clone(), user("u1"), message, user("u2")];
        let b = exchange(session, &body("deepseek-v4-pro", &[tool("a")], &two));
        assert_eq!(
            b.message()["content"],
            "ok 2",
            "the refused request was not answered"
        );
        assert!(a.total > 1000);
        assert_eq!(
            b.cached,
            a.total / 256 * 256,
            "whole 64-token units of the first"
        );
        let usage = &b.body["usage"];
        assert_eq!(usage["prompt_tokens"], b.total.div_ceil(4));
        assert_eq!(usage["prompt_cache_hit_tokens"], b.cached / 4);
        assert_eq!(
            usage["prompt_tokens_details"]["cached_tokens"],
            b.cached / 4
        );
        assert_eq!(
            usage["prompt_cache_miss_tokens"],
            b.total.div_ceil(4) - b.cached / 4
        );
        // Another system prompt, then the first one again: an older prompt is still read.
        let other = [
            json!({"role": "system", "content": "Be long. ".repeat(100)}),
            user("u1"),
        ];
        let c = exchange(session, &body("deepseek-v4-pro", &[tool("a")], &other));
        assert!(
            c.cached < 256 * 2,
            "only the tool and the system's first bytes: {}",
            c.cached
        );
        let d = exchange(session, &body("deepseek-v4-pro", &[tool("a")], &two));
        assert_eq!(d.cached, d.total / 256 * 256, "the second prompt, whole");
        let cold = exchange(
            "chat-cache-deepseek-2",
            &body("deepseek-v4-pro", &[tool("a")], &two),
        );
        assert_eq!(cold.cached, 0, "another session starts cold");
    }

    /// OpenAI: nothing below 1,024 tokens of common prefix, then 128-token steps; no DeepSeek
    /// fields in the usage.
    #[test]
    fn chat_reads_openais_cache_from_1024_tokens_in_128_token_steps() {
        let session = "chat-cache-openai";
        let system = |n: usize| json!({"role": "system", "content": "You review code. ".repeat(n)});
        // A prompt just under 4,096 bytes: sent again and extended, it reads nothing.
        let short = [system(200), user("u1")];
        let a = exchange(session, &body("gpt-5", &[], &short));
        assert!(a.total < 4096);
        let b = exchange(
            session,
            &body("gpt-5", &[], &[system(200), user("u1"), user("u2")]),
        );
        assert_eq!((a.cached, b.cached), (0, 0));
        assert!(b.body["usage"].get("prompt_cache_hit_tokens").is_none());
        assert_eq!(b.body["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
        let long = [system(300), user("u1")];
        let c = exchange(session, &body("gpt-5", &[tool("a")], &long));
        assert!(c.total > 4096);
        assert_eq!(c.cached, 0);
        let d = exchange(
            session,
            &body(
                "gpt-5",
                &[tool("a")],
                &[system(300), user("u1"), user("u2")],
            ),
        );
        assert_eq!(d.cached, c.total / 512 * 512);
        assert_eq!(
            d.body["usage"]["prompt_tokens_details"]["cached_tokens"],
            d.cached / 4
        );
        assert_eq!(d.body["usage"]["prompt_tokens"], d.total.div_ceil(4));
    }

    /// The JSON body holds the vendor's fields; a tool call when the test asks for one.
    #[test]
    fn chat_answers_with_the_vendor_body() {
        let keys = |v: &Value| -> Vec<String> {
            let mut keys: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
            keys.sort();
            keys
        };
        let a = exchange("chat-shape-1", &body("gpt-5", &[], &[user("u")]));
        assert_eq!(
            keys(&a.body),
            ["choices", "created", "id", "model", "object", "usage"]
        );
        assert_eq!(a.body["object"], "chat.completion");
        assert_eq!(a.body["model"], "gpt-5");
        assert_eq!(
            a.body["choices"],
            json!([{"index": 0, "message": {"role": "assistant", "content": "ok 1"}, "finish_reason": "stop"}])
        );
        assert_eq!(
            keys(&a.body["usage"]),
            [
                "completion_tokens",
                "prompt_tokens",
                "prompt_tokens_details",
                "total_tokens"
            ]
        );
        let mut h = headers("chat-shape-2");
        h.push((TOOL_USE_HEADER.to_owned(), "read".to_owned()));
        let v = body("deepseek-v4-flash", &[tool("read")], &[user("u")]);
        let b = answer(&h, &v.to_string()).unwrap();
        assert_eq!(
            b.message()["tool_calls"],
            json!([{"id": "call_standin_0001", "type": "function", "function": {"name": "read", "arguments": "{\"arg\":\"x\"}"}}])
        );
        assert_eq!(b.body["choices"][0]["finish_reason"], "tool_calls");
        assert_eq!(
            keys(&b.body["usage"]),
            [
                "completion_tokens",
                "prompt_cache_hit_tokens",
                "prompt_cache_miss_tokens",
                "prompt_tokens",
                "prompt_tokens_details",
                "total_tokens"
            ]
        );
    }

    /// The stream: chunks of the same id, the usage chunk only with `include_usage`, `[DONE]`
    /// last; the crate decodes it to the answer it decodes from the JSON body.
    #[test]
    fn chat_streams_the_answer_it_sends_as_json() {
        let mut h = headers("chat-sse-1");
        h.push((TOOL_USE_HEADER.to_owned(), "read".to_owned()));
        let mut v = body("deepseek-v4-pro", &[tool("read")], &[user("u")]);
        v["stream"] = json!(true);
        v["stream_options"] = json!({"include_usage": true});
        let a = answer(&h, &v.to_string()).unwrap();
        assert!(a.stream && a.include_usage);
        let text = sse(&a);
        assert_eq!(text, sse(&a), "the same request streams the same");
        let events: Vec<&str> = text.split_terminator("\n\n").collect();
        assert_eq!(events.last(), Some(&"data: [DONE]"));
        let chunks: Vec<Value> = events[..events.len() - 1]
            .iter()
            .map(|e| serde_json::from_str(e.strip_prefix("data: ").unwrap()).unwrap())
            .collect();
        for chunk in &chunks {
            assert_eq!(chunk["object"], "chat.completion.chunk");
            assert_eq!(
                (&chunk["id"], &chunk["created"]),
                (&a.body["id"], &a.body["created"])
            );
        }
        let (last, rest) = chunks.split_last().unwrap();
        assert!(rest.iter().all(|c| c.get("usage") == Some(&Value::Null)));
        assert_eq!(last["choices"], json!([]));
        assert_eq!(last["usage"], a.body["usage"]);
        assert_eq!(
            rest[0]["choices"][0]["delta"],
            json!({"role": "assistant", "content": ""})
        );
        let finish = rest.last().unwrap();
        assert_eq!(
            finish["choices"][0],
            json!({"index": 0, "delta": {}, "finish_reason": "tool_calls"})
        );
        let opening = rest
            .iter()
            .find(|c| c.pointer("/choices/0/delta/tool_calls/0/id").is_some())
            .unwrap();
        assert_eq!(
            opening["choices"][0]["delta"]["tool_calls"][0],
            json!({"index": 0, "id": "call_standin_0001", "type": "function", "function": {"name": "read", "arguments": ""}})
        );

        let mut stream = mektpoy::response::ChatStream::new("deepseek", None);
        stream.push_text(&text).unwrap();
        let from_stream = stream.finish().unwrap();
        let from_body =
            mektpoy::response::decode_chat(&a.body.to_string(), "deepseek", None).unwrap();
        assert_eq!(from_stream, from_body);
        assert_eq!(from_body.message.text(), "ok 1");
        assert_eq!(from_body.usage.unwrap().cache_read_tokens, Some(0));

        v.as_object_mut().unwrap().remove("stream_options");
        let b = answer(&headers("chat-sse-2"), &v.to_string()).unwrap();
        let text = sse(&b);
        assert!(
            !text.contains("\"usage\""),
            "no usage without include_usage"
        );
        let mut stream = mektpoy::response::ChatStream::new("deepseek", None);
        stream.push_text(&text).unwrap();
        let from_stream = stream.finish().unwrap();
        assert_eq!(from_stream.usage, None);
        assert_eq!(
            from_stream.message,
            mektpoy::response::decode_chat(&b.body.to_string(), "deepseek", None)
                .unwrap()
                .message
        );
    }

    fn post(
        path: &str,
        session: &str,
        body: &str,
        headers: &[(String, String)],
    ) -> crate::Response {
        client::post_to(path, session, 0, body, headers).unwrap()
    }

    /// The crate's own chat serializer, over HTTP: its requests are accepted on both paths, the
    /// tool call and its result go back, the first prompt stays cached, and the crate decodes
    /// the JSON body and the stream of the same request to the same answer.
    #[test]
    fn chat_over_http_accepts_the_crates_serializer_and_its_answers_decode()
    -> Result<(), Box<dyn std::error::Error>> {
        use mektpoy::{AgentLoop, Config, Message, Session, ToolSchema, route_for};
        let route = route_for("openai-compatible", "deepseek-v4-pro");
        assert_eq!(route.api, mektpoy::route::WireApi::OpenAiChat);
        let config = Config::new("deepseek", "deepseek-v4-pro");
        let mut agent = AgentLoop::builder(Session::new("s"), route)
            .config(config)
            .system_prompt("Be brief. ".repeat(100))
            .tools([
                ToolSchema::no_input("read", "Read a file"),
                ToolSchema::no_input("grep", "Search"),
            ])
            .build()
            .unwrap();
        let session = "chat-http-serializer";
        let wire = agent.user_turn([Message::user("u1", "hi")])?.to_wire()?;
        let called = wire.clone().with_header(TOOL_USE_HEADER, "read");
        let first = post(PATHS[1], session, called.body(), called.headers());
        assert_eq!(first.status, 200, "{}", first.body);
        assert_eq!(first.content_type, "application/json");
        let (total, cached) = first.bytes.unwrap();
        assert_eq!((total, cached), (prompt_bytes(wire.body()).len() as u64, 0));
        let answer = mektpoy::response::decode_chat(&first.body, "deepseek", None)?;
        let reply: Value = serde_json::from_str(&first.body)?;
        assert_eq!(first.content, [reply["choices"][0]["message"].clone()]);
        let call_id = answer.message.tool_calls().next().unwrap().id().to_owned();
        assert_eq!(call_id, "call_standin_0001");
        agent.observe(&wire)?;
        agent.append(answer.message)?;
        agent.append(Message::tool_result("t1", call_id, "done"))?;
        let wire = agent.next_step()?.to_wire()?;
        let second = post(PATHS[0], session, wire.body(), wire.headers());
        assert_eq!(second.status, 200, "{}", second.body);
        assert_eq!(
            second.bytes.unwrap().1,
            total / 256 * 256,
            "the first prompt, whole units"
        );
        let second = mektpoy::response::decode_chat(&second.body, "deepseek", None)?;
        assert_eq!(second.message.text(), "ok 2");
        assert_eq!(
            second.usage.unwrap().cache_read_tokens,
            Some(total / 256 * 64)
        );

        // The same request as JSON in one session and streamed in another: one answer.
        let mut streamed: Value = serde_json::from_str(wire.body())?;
        streamed["stream"] = json!(true);
        streamed["stream_options"] = json!({"include_usage": true});
        let json_reply = post(PATHS[0], "chat-http-json", wire.body(), wire.headers());
        let sse_reply = post(
            PATHS[0],
            "chat-http-sse",
            &streamed.to_string(),
            wire.headers(),
        );
        assert_eq!(sse_reply.content_type, "text/event-stream; charset=utf-8");
        assert_eq!(sse_reply.content, json_reply.content);
        let mut stream = mektpoy::response::ChatStream::new("deepseek", None);
        stream.push_text(&sse_reply.body)?;
        assert_eq!(
            stream.finish()?,
            mektpoy::response::decode_chat(&json_reply.body, "deepseek", None)?
        );
        Ok(())
    }

    /// Over HTTP: a refusal is a 400 in OpenAI's shape on either path; a cut-off stream is
    /// shorter, has no `[DONE]`, and was accepted all the same.
    #[test]
    fn chat_over_http_refuses_in_openais_shape_and_cuts_off() {
        let h = vec![("content-type".to_owned(), "application/json".to_owned())];
        for path in PATHS {
            let v = body("gpt-5", &[tool("a")], &[user("u"), calling(&["c1"])]);
            let refused = post(path, "chat-http-refused", &v.to_string(), &h);
            assert_eq!(refused.status, 400);
            assert_eq!(refused.bytes, None);
            let error: Value = serde_json::from_str(&refused.body).unwrap();
            assert_eq!(error["error"]["type"], "invalid_request_error");
            assert_eq!(error["error"]["param"], "messages.[1].role");
            assert!(
                error["error"]["message"]
                    .as_str()
                    .unwrap()
                    .starts_with(UNANSWERED_TOOL_CALLS)
            );
        }
        let mut v = body("gpt-5", &[], &[user("u")]);
        v["stream"] = json!(true);
        let mut cut = h.clone();
        cut.push((CUT_OFF_HEADER.to_owned(), "true".to_owned()));
        let torn = post(PATHS[0], "chat-http-cut", &v.to_string(), &cut);
        assert_eq!(torn.status, 200, "accepted");
        assert!(
            torn.body.starts_with("data: {") && !torn.body.contains("[DONE]"),
            "cut off mid-way: {}",
            torn.body
        );
        let mut stream = mektpoy::response::ChatStream::new("openai", None);
        let _ = stream.push_text(&torn.body);
        assert!(matches!(
            stream.finish(),
            Err(mektpoy::response::ResponseError::CutOff { .. })
        ));
        let next = post(
            PATHS[0],
            "chat-http-cut",
            &body("gpt-5", &[], &[user("u")]).to_string(),
            &h,
        );
        assert_eq!(
            next.content[0]["content"], "ok 2",
            "the cut-off request was answered"
        );
    }
}
