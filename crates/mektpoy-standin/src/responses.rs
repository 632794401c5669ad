//! OpenAI's Responses API: `POST /v1/responses`.
//!
//! Vendor pages read 2026-12-06 through the search tool:
//!
//! - The API reference, <https://platform.openai.com/docs/api-reference/responses>, as
//!   OpenAI's OpenAPI document is rendered by the generated `openai-client-base` 0.14.0 on
//!   docs.rs: the input item union, and `AdditionalToolsItemParam` (`type` "Always
//!   `additional_tools`", `role` "Only `developer` is supported", `tools` "made available at
//!   this item"); the function tool's `name` and `parameters` as on chat (module [`crate::chat`]).
//! - The tool-search guide, <https://developers.openai.com/api/docs/guides/tools-tool-search>:
//!   "Only `gpt-5.4` and later models support `tool_search`"; discovered tools "are injected at
//!   the end of the context window" so as to "preserve the model's cache". It is the page that
//!   documents tools added in the middle of the input; it says nothing of `additional_tools` on
//!   other models, nor of where such an item may not stand.
//! - The prompt-caching guide, <https://developers.openai.com/api/docs/guides/prompt-caching>:
//!   caching "for prompts that are 1024 tokens or longer", "exact prefix matches", tools
//!   included; requests are routed by a hash of the prefix, and `prompt_cache_key` is
//!   "combined with the prefix hash"; reads in `usage.input_tokens_details.cached_tokens`; the
//!   128-token step from OpenAI's cookbook `examples/Prompt_Caching_201.ipynb` ("cache hits
//!   occurring in increments of 128 tokens"). GPT-5.6's explicit breakpoints and
//!   `cache_write_tokens` are not modelled (as on chat).
//! - The streaming guide, <https://developers.openai.com/api/docs/guides/streaming-responses>,
//!   and the event types of the reference (see `mektpoy::response`'s `responses` module).
//! - The error codes guide, <https://developers.openai.com/api/docs/guides/error-codes> (500
//!   "The server had an error while processing your request", 503 "The engine is currently
//!   overloaded, please try again later"), read in copies of the page.
//! - The vendor's refusals as its answers are quoted in public issues (the reference gives no
//!   wording): `continuedev/continue#10092` and `leookun/cursor-byok#307` ("No tool call found
//!   for function call output with call_id ...", `param` `input`, `code` null);
//!   `openai/openai-support-agent-demo#12` and `router-for-me/CLIProxyAPI#2368` ("No tool output
//!   found for function call ..."); `vercel/ai#7543`, `openai/openai-agents-js#546` (status
//!   404) and `NousResearch/hermes-agent#10217` ("Item with id 'rs_...' not found. Items are not
//!   persisted when `store` is set to false. Try again with `store` set to true, or remove this
//!   item from your input."); `maximhq/bifrost#2441` and `bigduu/Bamboo-agent#513` ("Previous
//!   response with id '...' not found.", `param` `previous_response_id`, `code`
//!   `previous_response_not_found`); `langchain-ai/langchain#35702` and `lobehub/lobehub#14031`
//!   ("Invalid value: ''. Supported values are: 'apply_patch_call', ..., 'message', ...",
//!   `param` `input[1]`, `code` `invalid_value`; OpenAI's own endpoint takes an item with a
//!   `role` and no `type` as a message).
//!
//! # What it refuses
//!
//! In OpenAI's error shape `{"error":{"message","type":"invalid_request_error","param","code"}}`:
//! a body that is not JSON; no `model`; no `input`; a body key of chat completions the API
//! does not take ([`CHAT_PARAMETERS`]: `max_tokens` and the like); an input item of a type the
//! API does not list ([`ITEM_TYPES`]); a message without a known role; a `function_call` without `call_id`,
//! a string `arguments` or a name the vendor takes; a `function_call_output` whose `call_id`
//! no earlier `function_call` of the input made ([`NO_TOOL_CALL`]), and a `function_call`
//! whose output never comes ([`NO_TOOL_OUTPUT`]); a `reasoning` item without
//! `encrypted_content` (404, [`ITEM_NOT_FOUND`]: the stand-in keeps no item, so its `id` names
//! nothing; under `store: false` the vendor's sentence about persistence follows), and an
//! `item_reference` (the same); a reasoning item whose `encrypted_content` is not the one the
//! stand-in gave that item id ([`encrypted`]; the vendor's 400 `invalid_encrypted_content`, "The
//! encrypted content for item ... could not be verified.", quoted in `openai/codex#8145` and
//! `smallmain/vscode-unify-chat-provider#178`); a `previous_response_id` (the stand-in keeps no response:
//! [`PREVIOUS_NOT_FOUND`]); a tool that is not a flat function (`{"type":"function","name",
//! "parameters"}`), `tool_search` or one of [`OTHER_TOOL_TYPES`] (Codex's; a `custom` tool
//! without a name or with a `format` other than `text` or a `lark` / `regex` grammar), a
//! function or custom tool name outside `^[a-zA-Z0-9_-]{1,64}$`,
//! `parameters` that is not an object or whose `type` is not `object`, a name declared twice;
//! a `custom_tool_call` without `call_id`, name or string `input`, a `local_shell_call` without
//! `call_id` or `action`; a `custom_tool_call_output` whose call is no earlier
//! `custom_tool_call` ([`NO_CUSTOM_TOOL_CALL`]), a `local_shell_call_output` whose `id` names no
//! earlier `local_shell_call` ([`NO_LOCAL_SHELL_CALL`]), a `function_call_output` answering a
//! custom call, and a custom call whose output never comes ([`NO_CUSTOM_TOOL_OUTPUT`]) (a
//! `function_call_output` answers a `local_shell_call`, as Codex sends it); a message `phase`
//! other than `commentary` or `final_answer` (`MessagePhase`);
//! and an `additional_tools` item ([`ADDITIONAL_TOOLS_MODEL`]) on a model before `gpt-5.4`
//! (the safe side: the only page on tools added mid-input names `gpt-5.4` and later), with a
//! role other than `developer`, with a tool refused as above, or standing between a
//! `function_call` and its output (the pages are silent on where it may stand; a call and its
//! output are one exchange, so the safe side keeps tools out of it). A refusal leaves the
//! session's cache unchanged, whatever `stream` says.
//!
//! [`crate::FAIL_HEADER`] `500` answers a request that passed every check with OpenAI's 500
//! `server_error`, `503` or `529` with its 503 overload; no state changes.
//!
//! # What it answers
//!
//! A response object `{"id":"resp_standin_N","object":"response","created_at","status":
//! "completed","error":null,"incomplete_details":null,"model","output","store","usage"}`:
//! with `include: ["reasoning.encrypted_content"]` first a `reasoning` item (`id`, a one-part
//! `summary`, `encrypted_content`), then the `message` (`output_text` "ok N") and, with
//! [`crate::TOOL_USE_HEADER`], a `function_call` (`call_id` `call_standin_N`, arguments
//! `{"arg":"x"}`); when that header names a declared `custom` tool, a `custom_tool_call` whose
//! `input` is [`CUSTOM_INPUT`] instead, `local_shell` a `local_shell_call`, `web_search` a
//! `web_search_call` before the message. On a model named `…codex…` the message carries a
//! `phase` (`commentary` before a call, else `final_answer`). With `"stream": true`, the
//! semantic events: `response.created`, `response.in_progress`, for each item
//! `response.output_item.added`, its parts and deltas (a custom call's
//! `response.custom_tool_call_input.delta` / `.done`)
//! split as on the other paths, and `response.output_item.done`, then `response.completed`
//! with the whole response; each event with its `event:` line and a `sequence_number`.
//!
//! Cached input: the prompt is each tool's JSON, the `instructions`, then each input item's
//! JSON as sent (or the input string's JSON); tokens are ⌈bytes / 4⌉. OpenAI's rule: the
//! longest common prefix with any earlier accepted prompt of the same session, model and
//! `prompt_cache_key` (the key is part of the routing), from 1,024 tokens in 128-token steps.
//! [`crate::TOTAL_BYTES_HEADER`], [`crate::CACHED_BYTES_HEADER`], [`crate::CONTENT_HEADER`]
//! (here the `output` array) and [`crate::CUT_OFF_HEADER`] as on the other paths.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;
use std::io::Read;
use std::net::TcpStream;
use std::sync::{Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};

use crate::chat::{
    Refusal, Reply, Vendor, cached_bytes, check_name, missing, quoted, serve_with, wrong_type,
};
use crate::{
    CUT_OFF_HEADER, FAIL_HEADER, FNV_START, Headers, Rng, SESSION_HEADER, TOOL_USE_HEADER, fnv,
    header,
};

/// Chat completions' body keys the Responses API does not take: the vendor answers 400
/// "Unknown parameter: 'max_tokens'." (`param` the key, `code` `unknown_parameter`; the same for
/// `n`, `seed`, `logprobs` and `stop`), as quoted from its answers in public code (a conformance
/// test of a local API proxy recording direct answers of 2026-08-30, and the PHP and Go
/// bridges that rename `max_tokens` for this reason); HKUDS/DeepTutor#438 (2026-05-03): "the
/// Responses API only accepts `max_output_tokens`". The API reference lists no other name of
/// the limit. Other unknown keys are accepted: the pages read list no complete key set.
pub const CHAT_PARAMETERS: [&str; 6] = [
    "max_tokens",
    "max_completion_tokens",
    "n",
    "stop",
    "seed",
    "logprobs",
];

/// The `input` of the custom tool call [`crate::TOOL_USE_HEADER`] asks for when it names a
/// `custom` tool: a patch whose quotes, backslashes, tab, non-ASCII letters and lines must come
/// back byte for byte.
pub const CUSTOM_INPUT: &str = "*** Begin Patch\n*** Update File: a \"b\".txt\n@@\n-\told\\path\n+\tnew \u{e9}t\u{e9} \u{1f600}\n*** End Patch\n";

/// The request path this module answers.
pub const PATH: &str = "/v1/responses";

/// The input item types the API reference lists (`InputItem` in OpenAI's OpenAPI document).
pub const ITEM_TYPES: [&str; 27] = [
    "additional_tools",
    "apply_patch_call",
    "apply_patch_call_output",
    "code_interpreter_call",
    "compaction",
    "computer_call",
    "computer_call_output",
    "custom_tool_call",
    "custom_tool_call_output",
    "file_search_call",
    "function_call",
    "function_call_output",
    "image_generation_call",
    "item_reference",
    "local_shell_call",
    "local_shell_call_output",
    "mcp_approval_request",
    "mcp_approval_response",
    "mcp_call",
    "mcp_list_tools",
    "message",
    "reasoning",
    "shell_call",
    "shell_call_output",
    "tool_search_call",
    "tool_search_output",
    "web_search_call",
];

/// The start of the vendor's refusal of an output without its call.
pub const NO_TOOL_CALL: &str = "No tool call found for function call output with call_id";
/// The start of the vendor's refusal of a call without its output.
pub const NO_TOOL_OUTPUT: &str = "No tool output found for function call";
/// The start of the vendor's refusal of a custom tool call without its output, as quoted from
/// its answers ("No tool output found for custom tool call call_…", Soju06/codex-lb#1168 and
/// diegosouzapw/OmniRoute#8946, read 2026-12-07).
pub const NO_CUSTOM_TOOL_OUTPUT: &str = "No tool output found for custom tool call";
/// The stand-in's refusal of an output without its custom tool call: the function call's
/// wording, for the custom call (the vendor's own wording was not found).
pub const NO_CUSTOM_TOOL_CALL: &str = "No tool call found for custom tool call output with call_id";
/// The stand-in's refusal of a local shell call's output without its call (the vendor's
/// wording was not found).
pub const NO_LOCAL_SHELL_CALL: &str = "No tool call found for local shell call output with id";

/// Tool types besides `function` and `tool_search` the stand-in takes, those Codex declares
/// (openai/codex `codex-rs/core/src/tools/spec.rs`: `custom` freeform tools such as
/// `apply_patch` with a grammar `format`, `local_shell`, `web_search`, `image_generation`), as
/// the API reference lists them (`Tool` in OpenAI's OpenAPI document, read 2026-12-07 at
/// <https://developers.openai.com/api/reference/resources/responses/methods/create> through
/// copies of the reference).
pub const OTHER_TOOL_TYPES: [&str; 5] = [
    "custom",
    "local_shell",
    "web_search",
    "web_search_preview",
    "image_generation",
];
/// The end of the vendor's refusal of an item it does not hold, under `store: false`.
pub const ITEM_NOT_FOUND: &str = "Items are not persisted when `store` is set to false. Try again with `store` set to true, or remove this item from your input.";
/// The start of the vendor's refusal of an unknown `previous_response_id`.
pub const PREVIOUS_NOT_FOUND: &str = "Previous response with id";
/// The stand-in's refusal of an `additional_tools` item on a model not documented for it (the
/// vendor's wording was not found).
pub const ADDITIONAL_TOOLS_MODEL: &str =
    "'additional_tools' input items are not supported with this model.";

/// Whether a request line asks for [`PATH`].
pub(crate) fn is_responses(request_line: &str) -> bool {
    request_line.split_whitespace().nth(1) == Some(PATH)
}

/// Whether `model` is `gpt-5.4` or later (`gpt-5.4`, `gpt-5.5-mini`, `gpt-5.10`, `gpt-6`, ...):
/// the models the tool-search guide documents for tools loaded mid-input.
pub fn takes_additional_tools(model: &str) -> bool {
    let Some(rest) = model.strip_prefix("gpt-") else {
        return false;
    };
    let version = rest.split('-').next().unwrap_or_default();
    let mut parts = version.split('.');
    let major: Option<u32> = parts.next().and_then(|m| m.parse().ok());
    let minor: u32 = parts.next().and_then(|m| m.parse().ok()).unwrap_or(0);
    match major {
        Some(major) => major > 5 || (major == 5 && minor >= 4),
        None => false,
    }
}

fn invalid(message: impl Into<String>, param: String) -> Refusal {
    Refusal::new(message, Some(param), Some("invalid_value"))
}

/// One tool (of `tools` or of an `additional_tools` item at `at`); its function name.
fn check_tool<'v>(at: &str, tool: &'v Value) -> Result<Option<&'v str>, Refusal> {
    let kind = tool
        .get("type")
        .ok_or_else(|| missing(format!("{at}.type")))?;
    match kind.as_str() {
        Some("function") => {}
        Some("tool_search") => return Ok(None),
        Some("custom") => return check_custom_tool(at, tool).map(Some),
        Some(other) if OTHER_TOOL_TYPES.contains(&other) => return Ok(None),
        _ => {
            return Err(invalid(
                format!(
                    "Invalid value: {}. The stand-in models 'function' and 'tool_search' tools.",
                    quoted(kind)
                ),
                format!("{at}.type"),
            ));
        }
    }
    let name = tool
        .get("name")
        .ok_or_else(|| missing(format!("{at}.name")))?;
    check_name(format!("{at}.name"), name)?;
    match tool.get("parameters") {
        None | Some(Value::Null) => {}
        Some(Value::Object(schema)) => {
            if let Some(kind) = schema.get("type")
                && kind != "object"
            {
                return Err(Refusal::new(
                    format!(
                        "Invalid schema for function '{}': schema must be a JSON Schema of 'type: \"object\"', got 'type: {kind}'.",
                        name.as_str().unwrap_or_default()
                    ),
                    Some(format!("{at}.parameters")),
                    Some("invalid_function_parameters"),
                ));
            }
        }
        Some(other) => return Err(wrong_type(format!("{at}.parameters"), "an object", other)),
    }
    Ok(name.as_str())
}

/// A custom tool: `name`, an optional string `description`, an optional `format` `{"type":
/// "text"}` or `{"type":"grammar","syntax":"lark"|"regex","definition"}` (the reference's
/// `CustomTool`).
fn check_custom_tool<'v>(at: &str, tool: &'v Value) -> Result<&'v str, Refusal> {
    let name = tool
        .get("name")
        .ok_or_else(|| missing(format!("{at}.name")))?;
    check_name(format!("{at}.name"), name)?;
    match tool.get("description") {
        None | Some(Value::Null | Value::String(_)) => {}
        Some(other) => return Err(wrong_type(format!("{at}.description"), "a string", other)),
    }
    match tool.get("format") {
        None | Some(Value::Null) => {}
        Some(format) => match format.get("type").and_then(Value::as_str) {
            Some("text") => {}
            Some("grammar") => {
                let syntax = format.get("syntax").unwrap_or(&Value::Null);
                if !matches!(syntax.as_str(), Some("lark" | "regex")) {
                    return Err(invalid(
                        format!(
                            "Invalid value: {}. Supported values are: 'lark' and 'regex'.",
                            quoted(syntax)
                        ),
                        format!("{at}.format.syntax"),
                    ));
                }
                match format.get("definition") {
                    Some(Value::String(_)) => {}
                    None => return Err(missing(format!("{at}.format.definition"))),
                    Some(other) => {
                        return Err(wrong_type(
                            format!("{at}.format.definition"),
                            "a string",
                            other,
                        ));
                    }
                }
            }
            _ => {
                return Err(invalid(
                    format!(
                        "Invalid value: {}. Supported values are: 'text' and 'grammar'.",
                        quoted(format.get("type").unwrap_or(&Value::Null))
                    ),
                    format!("{at}.format.type"),
                ));
            }
        },
    }
    Ok(name.as_str().unwrap_or_default())
}

fn check_tools(v: &Value) -> Result<(), Refusal> {
    let tools = match v.get("tools") {
        None | Some(Value::Null) => return Ok(()),
        Some(Value::Array(tools)) => tools,
        Some(other) => return Err(wrong_type("tools".to_owned(), "an array", other)),
    };
    let mut names = HashSet::new();
    for (i, tool) in tools.iter().enumerate() {
        let at = format!("tools[{i}]");
        if let Some(name) = check_tool(&at, tool)?
            && !names.insert(name)
        {
            return Err(invalid(
                format!("Invalid 'tools': the function name '{name}' is declared more than once."),
                format!("{at}.name"),
            ));
        }
    }
    Ok(())
}

/// The `encrypted_content` the stand-in gives reasoning item `id`: checked statelessly when it
/// comes back, so a blob altered or moved to another item is refused as the vendor refuses
/// one it cannot verify.
pub fn encrypted(id: &str) -> String {
    format!("enc_standin_{:016x}", fnv(FNV_START, id.as_bytes()))
}

/// The item `id` the vendor's not-found refusal names, and the refusal.
fn not_found(item: &Value, store: bool) -> Refusal {
    let id = item.get("id").and_then(Value::as_str).unwrap_or_default();
    let mut message = format!("Item with id '{id}' not found.");
    if !store {
        message.push(' ');
        message.push_str(ITEM_NOT_FOUND);
    }
    Refusal {
        status: 404,
        ..Refusal::new(message, Some("input".to_owned()), None)
    }
}

fn check_input(v: &Value, model: &str) -> Result<(), Refusal> {
    let items = match v.get("input") {
        None | Some(Value::Null) => return Err(missing("input".to_owned())),
        Some(Value::String(_)) => return Ok(()),
        Some(Value::Array(items)) => items,
        Some(other) => {
            return Err(wrong_type(
                "input".to_owned(),
                "a string or an array",
                other,
            ));
        }
    };
    let store = v.get("store") != Some(&Value::Bool(false));
    // Calls made so far (call id, item type), and those still waiting for their output.
    let mut calls: HashMap<&str, &str> = HashMap::new();
    let mut pending: Vec<(&str, &str)> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let at = |key: &str| format!("input[{i}].{key}");
        let kind = match item.get("type") {
            None if item.get("role").is_some() => "message",
            None => return Err(missing(at("type"))),
            Some(kind) => match kind.as_str() {
                Some(k) if ITEM_TYPES.contains(&k) => k,
                _ => {
                    let listed: Vec<String> = ITEM_TYPES.iter().map(|t| format!("'{t}'")).collect();
                    let (last, rest) = listed.split_last().unwrap_or((&listed[0], &[]));
                    return Err(invalid(
                        format!(
                            "Invalid value: {}. Supported values are: {}, and {last}.",
                            quoted(kind),
                            rest.join(", ")
                        ),
                        format!("input[{i}]"),
                    ));
                }
            },
        };
        match kind {
            "message" => {
                let role = item.get("role").ok_or_else(|| missing(at("role")))?;
                if !matches!(
                    role.as_str(),
                    Some("user" | "assistant" | "system" | "developer")
                ) {
                    return Err(invalid(
                        format!(
                            "Invalid value: {}. Supported values are: 'assistant', 'system', 'developer', and 'user'.",
                            quoted(role)
                        ),
                        at("role"),
                    ));
                }
                match item.get("content") {
                    Some(Value::String(_) | Value::Array(_)) => {}
                    None | Some(Value::Null) => return Err(missing(at("content"))),
                    Some(other) => {
                        return Err(wrong_type(at("content"), "a string or an array", other));
                    }
                }
                // `MessagePhase`: `commentary` or `final_answer`.
                if let Some(phase) = item.get("phase").filter(|p| !p.is_null())
                    && !matches!(phase.as_str(), Some("commentary" | "final_answer"))
                {
                    return Err(invalid(
                        format!(
                            "Invalid value: {}. Supported values are: 'commentary' and 'final_answer'.",
                            quoted(phase)
                        ),
                        at("phase"),
                    ));
                }
            }
            "custom_tool_call" | "local_shell_call" => {
                let id = match item.get("call_id") {
                    None | Some(Value::Null) => return Err(missing(at("call_id"))),
                    Some(Value::String(id)) => id.as_str(),
                    Some(other) => return Err(wrong_type(at("call_id"), "a string", other)),
                };
                if kind == "custom_tool_call" {
                    let name = item.get("name").ok_or_else(|| missing(at("name")))?;
                    check_name(at("name"), name)?;
                    match item.get("input") {
                        Some(Value::String(_)) => {}
                        None => return Err(missing(at("input"))),
                        Some(other) => return Err(wrong_type(at("input"), "a string", other)),
                    }
                } else if !item.get("action").is_some_and(Value::is_object) {
                    return Err(missing(at("action")));
                }
                calls.insert(id, kind);
                pending.push((id, kind));
            }
            "custom_tool_call_output" | "local_shell_call_output" => {
                // A local shell call's output names the call's `call_id` in its `id`.
                let (key, call, refusal) = if kind == "custom_tool_call_output" {
                    ("call_id", "custom_tool_call", NO_CUSTOM_TOOL_CALL)
                } else {
                    ("id", "local_shell_call", NO_LOCAL_SHELL_CALL)
                };
                let id = match item.get(key) {
                    None | Some(Value::Null) => return Err(missing(at(key))),
                    Some(Value::String(id)) => id.as_str(),
                    Some(other) => return Err(wrong_type(at(key), "a string", other)),
                };
                if calls.get(id) != Some(&call) {
                    return Err(Refusal::new(
                        format!("{refusal} {id}."),
                        Some("input".to_owned()),
                        None,
                    ));
                }
                pending.retain(|(p, _)| *p != id);
                if item.get("output").is_none_or(Value::is_null) {
                    return Err(missing(at("output")));
                }
            }
            "function_call" => {
                let id = match item.get("call_id") {
                    None | Some(Value::Null) => return Err(missing(at("call_id"))),
                    Some(Value::String(id)) => id.as_str(),
                    Some(other) => return Err(wrong_type(at("call_id"), "a string", other)),
                };
                let name = item.get("name").ok_or_else(|| missing(at("name")))?;
                check_name(at("name"), name)?;
                match item.get("arguments") {
                    Some(Value::String(_)) => {}
                    None => return Err(missing(at("arguments"))),
                    Some(other) => return Err(wrong_type(at("arguments"), "a string", other)),
                }
                calls.insert(id, kind);
                pending.push((id, kind));
            }
            "function_call_output" => {
                let id = match item.get("call_id") {
                    None | Some(Value::Null) => return Err(missing(at("call_id"))),
                    Some(Value::String(id)) => id.as_str(),
                    Some(other) => return Err(wrong_type(at("call_id"), "a string", other)),
                };
                // Codex answers a local shell call with a function call output.
                if !matches!(calls.get(id), Some(&("function_call" | "local_shell_call"))) {
                    return Err(Refusal::new(
                        format!("{NO_TOOL_CALL} {id}."),
                        Some("input".to_owned()),
                        None,
                    ));
                }
                pending.retain(|(p, _)| *p != id);
                if item.get("output").is_none_or(Value::is_null) {
                    return Err(missing(at("output")));
                }
            }
            "reasoning" => match item.get("encrypted_content") {
                Some(Value::String(blob)) => {
                    let id = item.get("id").and_then(Value::as_str).unwrap_or_default();
                    if *blob != encrypted(id) {
                        return Err(Refusal::new(
                            format!(
                                "The encrypted content for item {id} could not be verified. Reason: Encrypted content could not be decrypted or parsed."
                            ),
                            None,
                            Some("invalid_encrypted_content"),
                        ));
                    }
                }
                _ => return Err(not_found(item, store)),
            },
            "item_reference" => return Err(not_found(item, store)),
            "additional_tools" => {
                if !takes_additional_tools(model) {
                    return Err(invalid(ADDITIONAL_TOOLS_MODEL, format!("input[{i}]")));
                }
                if item.get("role").and_then(Value::as_str) != Some("developer") {
                    return Err(invalid(
                        format!(
                            "Invalid value: {}. Supported values are: 'developer'.",
                            quoted(item.get("role").unwrap_or(&Value::Null))
                        ),
                        at("role"),
                    ));
                }
                if let Some((call, _)) = pending.first() {
                    return Err(invalid(
                        format!(
                            "An 'additional_tools' item cannot stand between function call {call} and its output."
                        ),
                        format!("input[{i}]"),
                    ));
                }
                let tools = match item.get("tools") {
                    Some(Value::Array(tools)) => tools,
                    None => return Err(missing(at("tools"))),
                    Some(other) => return Err(wrong_type(at("tools"), "an array", other)),
                };
                for (j, tool) in tools.iter().enumerate() {
                    check_tool(&format!("input[{i}].tools[{j}]"), tool)?;
                }
            }
            _ => {}
        }
    }
    if let Some((call, kind)) = pending.first() {
        let refusal = if *kind == "custom_tool_call" {
            NO_CUSTOM_TOOL_OUTPUT
        } else {
            NO_TOOL_OUTPUT
        };
        return Err(Refusal::new(
            format!("{refusal} {call}."),
            Some("input".to_owned()),
            None,
        ));
    }
    Ok(())
}

/// The stateless checks.
fn check(v: &Value) -> Result<(), Refusal> {
    let model = match v.get("model") {
        Some(Value::String(m)) if !m.is_empty() => m.as_str(),
        _ => return Err(missing("model".to_owned())),
    };
    if let Some(key) = CHAT_PARAMETERS.iter().find(|k| v.get(**k).is_some()) {
        return Err(Refusal::new(
            format!("Unknown parameter: '{key}'."),
            Some((*key).to_owned()),
            Some("unknown_parameter"),
        ));
    }
    if let Some(id) = v.get("previous_response_id").filter(|id| !id.is_null()) {
        return Err(Refusal::new(
            format!("{PREVIOUS_NOT_FOUND} {} not found.", quoted(id)),
            Some("previous_response_id".to_owned()),
            Some("previous_response_not_found"),
        ));
    }
    check_tools(v)?;
    check_input(v, model)
}

/// The prompt's bytes: each tool's JSON, the instructions, each input item's JSON, as sent.
fn prompt_bytes(body: &str) -> Vec<u8> {
    #[derive(Deserialize)]
    struct Prompt<'a> {
        #[serde(borrow, default)]
        tools: Option<Vec<&'a RawValue>>,
        #[serde(borrow, default)]
        instructions: Option<&'a RawValue>,
        #[serde(borrow)]
        input: &'a RawValue,
    }
    let Ok(prompt) = serde_json::from_str::<Prompt<'_>>(body) else {
        return Vec::new();
    };
    let items: Vec<&RawValue> = serde_json::from_str(prompt.input.get()).unwrap_or_default();
    let mut out = Vec::with_capacity(body.len());
    for part in prompt.tools.iter().flatten().chain(&prompt.instructions) {
        out.extend_from_slice(part.get().as_bytes());
    }
    if items.is_empty() {
        out.extend_from_slice(prompt.input.get().as_bytes());
    }
    for item in items {
        out.extend_from_slice(item.get().as_bytes());
    }
    out
}

/// Where OpenAI's cache is looked up: session, model, `prompt_cache_key`.
type CacheKey = (String, String, String);

/// Per cache key: every accepted prompt.
static PROMPTS: Mutex<BTreeMap<CacheKey, Vec<Vec<u8>>>> = Mutex::new(BTreeMap::new());
/// Per session: how many requests were answered.
static REQUESTS: Mutex<BTreeMap<String, u64>> = Mutex::new(BTreeMap::new());

/// An accepted request's answer: the vendor's body, the test figures, and how to send it.
#[derive(Clone, Debug, PartialEq)]
struct Answered {
    body: Value,
    total: u64,
    cached: u64,
    stream: bool,
    cut: bool,
    seed: u64,
}

/// The server error [`FAIL_HEADER`] asks for, if any.
fn failure(headers: &Headers) -> Result<(), Refusal> {
    let (status, message, kind, code) = match header(headers, FAIL_HEADER) {
        None => return Ok(()),
        Some("500") => (
            500,
            "The server had an error while processing your request. Sorry about that!",
            "server_error",
            None,
        ),
        Some("503" | "529") => (
            503,
            "The engine is currently overloaded, please try again later.",
            "service_unavailable_error",
            Some("server_is_overloaded"),
        ),
        Some(other) => {
            return Err(Refusal::new(
                format!("test support: bad {FAIL_HEADER}: `{other}`"),
                None,
                None,
            ));
        }
    };
    Err(Refusal {
        status,
        kind,
        ..Refusal::new(message, None, code)
    })
}

fn answer(headers: &Headers, body: &str) -> Result<Answered, Refusal> {
    let v: Value = serde_json::from_str(body).map_err(|_| {
        Refusal::new(
            "We could not parse the JSON body of your request.",
            None,
            None,
        )
    })?;
    check(&v)?;
    failure(headers)?;
    let keyed;
    let session = match header(headers, SESSION_HEADER) {
        Some(session) => session,
        None => {
            let key = header(headers, "authorization").unwrap_or_default();
            keyed = format!("key:{:016x}", fnv(FNV_START, key.as_bytes()));
            &keyed
        }
    };
    let model = v["model"].as_str().unwrap_or_default().to_owned();
    let cache_key = v
        .get("prompt_cache_key")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let bytes = prompt_bytes(body);
    let total = bytes.len() as u64;

    // Accepted: from here on the session's state changes.
    let mut prompts = PROMPTS.lock().unwrap_or_else(PoisonError::into_inner);
    let earlier = prompts
        .entry((session.to_owned(), model.clone(), cache_key))
        .or_default();
    let cached = cached_bytes(earlier, &bytes, Vendor::OpenAi);
    earlier.push(bytes);
    drop(prompts);
    let mut requests = REQUESTS.lock().unwrap_or_else(PoisonError::into_inner);
    let n = requests.entry(session.to_owned()).or_default();
    *n += 1;
    let n = *n;
    drop(requests);
    let seed = fnv(fnv(FNV_START, session.as_bytes()), &n.to_le_bytes());

    let mut output = Vec::new();
    let include = v.get("include").and_then(Value::as_array);
    if include.is_some_and(|i| i.iter().any(|x| x == "reasoning.encrypted_content")) {
        output.push(json!({
            "id": format!("rs_standin_{n:04}"),
            "type": "reasoning",
            "summary": [{"type": "summary_text", "text": format!("Thinking {n}.")}],
            "encrypted_content": encrypted(&format!("rs_standin_{n:04}"))
        }));
    }
    output.push(json!({
        "id": format!("msg_standin_{n:04}"),
        "type": "message",
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "text": format!("ok {n}"), "annotations": []}]
    }));
    if let Some(name) = header(headers, TOOL_USE_HEADER) {
        // The declared tool of that name (a `local_shell` tool is named by its type).
        let declared = v.get("tools").and_then(Value::as_array).and_then(|tools| {
            tools.iter().find_map(|t| {
                let kind = t.get("type").and_then(Value::as_str)?;
                let named = t.get("name").and_then(Value::as_str).unwrap_or(kind);
                (named == name).then_some(kind)
            })
        });
        let item = match declared {
            Some("custom") => json!({
                "id": format!("ctc_standin_{n:04}"),
                "type": "custom_tool_call",
                "status": "completed",
                "call_id": format!("call_standin_{n:04}"),
                "name": name,
                "input": CUSTOM_INPUT
            }),
            // A built-in tool's call needs no output: it goes before the message.
            Some("web_search") => {
                let call = json!({
                    "id": format!("ws_standin_{n:04}"),
                    "type": "web_search_call",
                    "status": "completed",
                    "action": {"type": "search", "query": format!("query {n}")}
                });
                let at = output.len() - 1;
                output.insert(at, call);
                Value::Null
            }
            Some("local_shell") => json!({
                "id": format!("lsh_standin_{n:04}"),
                "type": "local_shell_call",
                "status": "completed",
                "call_id": format!("call_standin_{n:04}"),
                "action": {"type": "exec", "command": ["echo", "ok"], "env": {}}
            }),
            _ => json!({
                "id": format!("fc_standin_{n:04}"),
                "type": "function_call",
                "status": "completed",
                "call_id": format!("call_standin_{n:04}"),
                "name": name,
                "arguments": r#"{"arg":"x"}"#
            }),
        };
        if !item.is_null() {
            output.push(item);
        }
    }
    // gpt-5.3-codex and later label each assistant message (`MessagePhase`).
    if model.contains("codex") {
        let phase = if output.last().is_some_and(|o| o["type"] != "message") {
            "commentary"
        } else {
            "final_answer"
        };
        if let Some(message) = output.iter_mut().find(|o| o["type"] == "message") {
            message["phase"] = json!(phase);
        }
    }
    let tokens = |b: u64| b.div_ceil(4);
    let (input, hit) = (tokens(total), tokens(cached));
    let reasoning = if output.len() > 1 && output[0]["type"] == "reasoning" {
        tokens(output[0].to_string().len() as u64)
    } else {
        0
    };
    let produced = tokens(Value::Array(output.clone()).to_string().len() as u64);
    let created = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let reply = json!({
        "id": format!("resp_standin_{n:04}"),
        "object": "response",
        "created_at": created,
        "status": "completed",
        "error": null,
        "incomplete_details": null,
        "model": model,
        "output": output,
        "store": v.get("store") != Some(&Value::Bool(false)),
        "usage": {
            "input_tokens": input,
            "input_tokens_details": {"cached_tokens": hit},
            "output_tokens": produced,
            "output_tokens_details": {"reasoning_tokens": reasoning},
            "total_tokens": input + produced
        }
    });
    Ok(Answered {
        body: reply,
        total,
        cached,
        stream: v.get("stream") == Some(&Value::Bool(true)),
        cut: header(headers, CUT_OFF_HEADER) == Some("true"),
        seed,
    })
}

/// The answer as the vendor streams it: semantic events, each with its `event:` line.
fn sse(answered: &Answered) -> String {
    let body = &answered.body;
    let mut rng = Rng(answered.seed);
    let mut events: Vec<(String, Value)> = Vec::new();
    let mut push = |kind: &str, mut data: Value| {
        data["type"] = json!(kind);
        events.push((kind.to_owned(), data));
    };
    let mut head = body.clone();
    head["status"] = json!("in_progress");
    head["output"] = json!([]);
    head["usage"] = Value::Null;
    push("response.created", json!({"response": head}));
    push("response.in_progress", json!({"response": head}));
    for (i, item) in body["output"].as_array().into_iter().flatten().enumerate() {
        let id = &item["id"];
        let mut added = item.clone();
        match item["type"].as_str() {
            Some("message") => added["content"] = json!([]),
            Some("function_call") => added["arguments"] = json!(""),
            Some("custom_tool_call") => added["input"] = json!(""),
            Some("reasoning") => added["summary"] = json!([]),
            _ => {}
        }
        added["status"] = json!("in_progress");
        push(
            "response.output_item.added",
            json!({"output_index": i, "item": added}),
        );
        match item["type"].as_str() {
            Some("message") => {
                for (j, part) in item["content"].as_array().into_iter().flatten().enumerate() {
                    let at = |extra: Value| {
                        let mut v = json!({"item_id": id, "output_index": i, "content_index": j});
                        for (k, x) in extra.as_object().into_iter().flatten() {
                            v[k] = x.clone();
                        }
                        v
                    };
                    let text = part["text"].as_str().unwrap_or_default();
                    let mut opened = part.clone();
                    opened["text"] = json!("");
                    push("response.content_part.added", at(json!({"part": opened})));
                    for piece in rng.pieces(text) {
                        push("response.output_text.delta", at(json!({"delta": piece})));
                    }
                    push("response.output_text.done", at(json!({"text": text})));
                    push("response.content_part.done", at(json!({"part": part})));
                }
            }
            Some("function_call") => {
                let arguments = item["arguments"].as_str().unwrap_or_default();
                for piece in rng.pieces(arguments) {
                    push(
                        "response.function_call_arguments.delta",
                        json!({"item_id": id, "output_index": i, "delta": piece}),
                    );
                }
                push(
                    "response.function_call_arguments.done",
                    json!({"item_id": id, "output_index": i, "arguments": arguments}),
                );
            }
            Some("custom_tool_call") => {
                let input = item["input"].as_str().unwrap_or_default();
                for piece in rng.pieces(input) {
                    push(
                        "response.custom_tool_call_input.delta",
                        json!({"item_id": id, "output_index": i, "delta": piece}),
                    );
                }
                push(
                    "response.custom_tool_call_input.done",
                    json!({"item_id": id, "output_index": i, "input": input}),
                );
            }
            Some("reasoning") => {
                for (j, part) in item["summary"].as_array().into_iter().flatten().enumerate() {
                    let at = json!({"item_id": id, "output_index": i, "summary_index": j});
                    let with = |k: &str, x: Value| {
                        let mut v = at.clone();
                        v[k] = x;
                        v
                    };
                    let text = part["text"].as_str().unwrap_or_default();
                    push(
                        "response.reasoning_summary_part.added",
                        with("part", json!({"type": "summary_text", "text": ""})),
                    );
                    for piece in rng.pieces(text) {
                        push(
                            "response.reasoning_summary_text.delta",
                            with("delta", json!(piece)),
                        );
                    }
                    push(
                        "response.reasoning_summary_text.done",
                        with("text", json!(text)),
                    );
                    push(
                        "response.reasoning_summary_part.done",
                        with("part", part.clone()),
                    );
                }
            }
            _ => {}
        }
        push(
            "response.output_item.done",
            json!({"output_index": i, "item": item}),
        );
    }
    push("response.completed", json!({"response": body}));
    let mut text = String::new();
    for (n, (kind, mut data)) in events.into_iter().enumerate() {
        data["sequence_number"] = json!(n);
        let _ = write!(text, "event: {kind}\ndata: {data}\n\n");
    }
    text
}

/// Answers one request on [`PATH`] (the connection's request line and headers read).
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
            content: answered.body["output"].clone(),
            cut: answered.cut,
            seed: answered.seed,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client;

    fn headers(session: &str) -> Headers {
        vec![
            (SESSION_HEADER.to_owned(), session.to_owned()),
            ("content-type".to_owned(), "application/json".to_owned()),
        ]
    }

    fn user(text: &str) -> Value {
        json!({"type": "message", "role": "user", "content": text})
    }

    fn call(id: &str) -> Value {
        json!({"type": "function_call", "call_id": id, "name": "a", "arguments": "{}"})
    }

    fn output(id: &str) -> Value {
        json!({"type": "function_call_output", "call_id": id, "output": "done"})
    }

    fn tool(name: &str) -> Value {
        json!({"type": "function", "name": name, "description": "d", "parameters": {"type": "object"}})
    }

    fn more_tools(tools: &[Value]) -> Value {
        json!({"type": "additional_tools", "role": "developer", "tools": tools})
    }

    fn reasoning(with_state: bool) -> Value {
        let mut item = json!({"type": "reasoning", "id": "rs_1", "summary": []});
        if with_state {
            item["encrypted_content"] = json!(encrypted("rs_1"));
        }
        item
    }

    fn body(model: &str, tools: &[Value], input: &[Value]) -> Value {
        let mut v = json!({"model": model, "input": input, "store": false});
        if !tools.is_empty() {
            v["tools"] = json!(tools);
        }
        v
    }

    fn verdict(v: &Value) -> Result<Answered, Refusal> {
        answer(&headers("responses-verdicts"), &v.to_string())
    }

    fn custom(name: &str) -> Value {
        json!({"type": "custom", "name": name, "description": "d",
            "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"}})
    }

    fn custom_call(id: &str) -> Value {
        json!({"type": "custom_tool_call", "call_id": id, "name": "apply_patch", "input": "*** Begin Patch"})
    }

    fn custom_output(id: &str) -> Value {
        json!({"type": "custom_tool_call_output", "call_id": id, "output": "done"})
    }

    fn shell_call(id: &str) -> Value {
        json!({"type": "local_shell_call", "call_id": id, "status": "completed",
            "action": {"type": "exec", "command": ["ls"]}})
    }

    /// (case, body, refusal: status, the message's start or a part of it, and `param`)
    type Row<'a> = (&'a str, Value, Option<(u16, &'a str, Option<&'a str>)>);

    /// Every refusal of the module doc, and the nearest accepted requests.
    #[test]
    fn responses_refuses_what_openai_refuses_and_accepts_the_rest() {
        let gpt = |input: &[Value]| body("gpt-5.5", &[tool("a")], input);
        let old = |input: &[Value]| body("gpt-5.2", &[tool("a")], input);
        let with_tools = |tools: &[Value]| body("gpt-5.5", tools, &[user("u")]);
        let mut stored = gpt(&[user("u"), reasoning(false), user("v")]);
        stored["store"] = json!(true);
        let mut previous = gpt(&[user("u")]);
        previous["previous_response_id"] = json!("resp_9");
        let mut chat_limit = gpt(&[user("u")]);
        chat_limit["max_tokens"] = json!(1024);
        let mut output_limit = gpt(&[user("u")]);
        output_limit["max_output_tokens"] = json!(1024);
        let mut string_schema = tool("a");
        string_schema["parameters"] = json!({"type": "string"});
        let mut text_parameters = tool("a");
        text_parameters["parameters"] = json!("object");
        let mut nested = tool("a");
        nested["function"] = json!({"name": "a"});
        nested.as_object_mut().unwrap().remove("name");
        let mut user_tools = more_tools(&[tool("b")]);
        user_tools["role"] = json!("user");
        #[rustfmt::skip]
        let rows: Vec<Row> = vec![
            ("a plain turn", gpt(&[user("u")]), None),
            ("a string input", json!({"model": "gpt-5.5", "input": "hi"}), None),
            ("a message without a type", gpt(&[json!({"role": "user", "content": "u"})]), None),
            ("no model", json!({"input": "hi"}), Some((400, "Missing required parameter: 'model'.", Some("model")))),
            ("no input", json!({"model": "gpt-5.5"}), Some((400, "Missing required parameter: 'input'.", Some("input")))),
            ("chat's output limit", chat_limit, Some((400, "Unknown parameter: 'max_tokens'.", Some("max_tokens")))),
            ("the Responses output limit", output_limit, None),
            ("an unknown item type", gpt(&[user("u"), json!({"type": "tool_result", "call_id": "c1"})]),
                Some((400, "Invalid value: 'tool_result'. Supported values are: 'additional_tools', 'apply_patch_call',", Some("input[1]")))),
            ("an empty item type", gpt(&[json!({"type": "", "content": "u"})]), Some((400, "Invalid value: ''.", Some("input[0]")))),
            ("an unknown role", gpt(&[json!({"type": "message", "role": "robot", "content": "u"})]), Some((400, "Invalid value: 'robot'.", Some("input[0].role")))),
            ("a call and its output", gpt(&[user("u"), call("c1"), output("c1"), user("v")]), None),
            ("two calls, outputs in another order", gpt(&[user("u"), call("c1"), call("c2"), output("c2"), output("c1")]), None),
            ("an output without its call", gpt(&[user("u"), output("c1")]),
                Some((400, "No tool call found for function call output with call_id c1.", Some("input")))),
            ("an output before its call", gpt(&[user("u"), output("c1"), call("c1")]), Some((400, NO_TOOL_CALL, Some("input")))),
            ("a call without its output", gpt(&[user("u"), call("c1"), user("v")]),
                Some((400, "No tool output found for function call c1.", Some("input")))),
            ("a call to a dotted name", gpt(&[user("u"), json!({"type": "function_call", "call_id": "c1", "name": "a.b", "arguments": "{}"}), output("c1")]),
                Some((400, "Invalid 'input[1].name': string does not match pattern.", Some("input[1].name")))),
            ("arguments that are not a string", gpt(&[user("u"), json!({"type": "function_call", "call_id": "c1", "name": "a", "arguments": {}}), output("c1")]),
                Some((400, "Invalid type for 'input[1].arguments': expected a string", Some("input[1].arguments")))),
            ("reasoning sent back with its state", gpt(&[user("u"), reasoning(true), json!({"type": "message", "role": "assistant", "content": "ok"}), user("v")]), None),
            ("reasoning with another item's state", gpt(&[user("u"), {
                let mut moved = reasoning(true);
                moved["encrypted_content"] = json!(encrypted("rs_2"));
                moved
            }, user("v")]),
                Some((400, "The encrypted content for item rs_1 could not be verified.", None))),
            ("reasoning with a state not the stand-in's", gpt(&[user("u"), {
                let mut forged = reasoning(true);
                forged["encrypted_content"] = json!("gAAAA==");
                forged
            }, user("v")]),
                Some((400, "The encrypted content for item rs_1 could not be verified.", None))),
            ("reasoning without its state under store: false", gpt(&[user("u"), reasoning(false), user("v")]),
                Some((404, "Item with id 'rs_1' not found. Items are not persisted when `store` is set to false.", Some("input")))),
            ("reasoning without its state, stored", stored, Some((404, "Item with id 'rs_1' not found.", Some("input")))),
            ("an item reference", gpt(&[json!({"type": "item_reference", "id": "msg_1"})]), Some((404, "Item with id 'msg_1' not found.", Some("input")))),
            ("a previous response", previous,
                Some((400, "Previous response with id 'resp_9' not found.", Some("previous_response_id")))),
            ("a dotted function name", with_tools(&[tool("fs.read")]),
                Some((400, "Invalid 'tools[0].name': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.", Some("tools[0].name")))),
            ("a chat-shaped tool", with_tools(&[nested]), Some((400, "Missing required parameter: 'tools[0].name'.", Some("tools[0].name")))),
            ("parameters of another type", with_tools(&[string_schema]),
                Some((400, "Invalid schema for function 'a': schema must be a JSON Schema of 'type: \"object\"'", Some("tools[0].parameters")))),
            ("parameters that are not an object", with_tools(&[text_parameters]),
                Some((400, "Invalid type for 'tools[0].parameters': expected an object", Some("tools[0].parameters")))),
            ("a name declared twice", with_tools(&[tool("a"), tool("a")]), Some((400, "Invalid 'tools': the function name 'a' is declared more than once.", Some("tools[1].name")))),
            ("tool search", with_tools(&[tool("a"), json!({"type": "tool_search"})]), None),
            ("a built-in tool the stand-in does not model", with_tools(&[json!({"type": "computer_use_preview"})]), Some((400, "Invalid value: 'computer_use_preview'.", Some("tools[0].type")))),
            ("Codex's tools", with_tools(&[tool("shell"), custom("apply_patch"), json!({"type": "local_shell"}), json!({"type": "web_search"})]), None),
            ("a custom tool with a regex", with_tools(&[json!({"type": "custom", "name": "n", "format": {"type": "grammar", "syntax": "regex", "definition": "[0-9]+"}})]), None),
            ("a custom tool of another syntax", with_tools(&[json!({"type": "custom", "name": "n", "format": {"type": "grammar", "syntax": "peg", "definition": "x"}})]),
                Some((400, "Invalid value: 'peg'. Supported values are: 'lark' and 'regex'.", Some("tools[0].format.syntax")))),
            ("a custom tool without a name", with_tools(&[json!({"type": "custom"})]), Some((400, "Missing required parameter: 'tools[0].name'.", Some("tools[0].name")))),
            ("a custom name declared twice", with_tools(&[tool("a"), custom("a")]), Some((400, "Invalid 'tools': the function name 'a' is declared more than once.", Some("tools[1].name")))),
            ("a custom call and its output", gpt(&[user("u"), custom_call("c1"), custom_output("c1"), user("v")]), None),
            ("a custom output without its call", gpt(&[user("u"), custom_output("c1")]),
                Some((400, "No tool call found for custom tool call output with call_id c1.", Some("input")))),
            ("a custom output answering a function call", gpt(&[user("u"), call("c1"), custom_output("c1")]), Some((400, NO_CUSTOM_TOOL_CALL, Some("input")))),
            ("a function output answering a custom call", gpt(&[user("u"), custom_call("c1"), output("c1")]), Some((400, NO_TOOL_CALL, Some("input")))),
            ("a custom call without its output", gpt(&[user("u"), custom_call("c1"), user("v")]),
                Some((400, "No tool output found for custom tool call c1.", Some("input")))),
            ("a custom call without input", gpt(&[user("u"), json!({"type": "custom_tool_call", "call_id": "c1", "name": "apply_patch"}), custom_output("c1")]),
                Some((400, "Missing required parameter: 'input[1].input'.", Some("input[1].input")))),
            ("a local shell call, answered as a function", gpt(&[user("u"), shell_call("c1"), output("c1"), user("v")]), None),
            ("a local shell call and its own output", gpt(&[user("u"), shell_call("c1"), json!({"type": "local_shell_call_output", "id": "c1", "output": "ok"}), user("v")]), None),
            ("a local shell output without its call", gpt(&[user("u"), json!({"type": "local_shell_call_output", "id": "c1", "output": "ok"})]),
                Some((400, NO_LOCAL_SHELL_CALL, Some("input")))),
            ("a local shell call without its output", gpt(&[user("u"), shell_call("c1"), user("v")]), Some((400, "No tool output found for function call c1.", Some("input")))),
            ("a web search call sent back", gpt(&[user("u"), json!({"type": "web_search_call", "status": "completed", "action": {"type": "search", "query": "q"}}), user("v")]), None),
            ("a phase", gpt(&[user("u"), json!({"type": "message", "role": "assistant", "content": "ok", "phase": "commentary"}), user("v")]), None),
            ("an unknown phase", gpt(&[user("u"), json!({"type": "message", "role": "assistant", "content": "ok", "phase": "draft"}), user("v")]),
                Some((400, "Invalid value: 'draft'. Supported values are: 'commentary' and 'final_answer'.", Some("input[1].phase")))),
            ("a developer message mid-way", gpt(&[user("u"), json!({"type": "message", "role": "developer", "content": "d"}), user("v")]), None),
            ("more tools on gpt-5.5", gpt(&[user("u"), more_tools(&[tool("b")]), user("v")]), None),
            ("more tools after a call's output", gpt(&[user("u"), call("c1"), output("c1"), more_tools(&[tool("b")])]), None),
            ("more tools on gpt-5.4", body("gpt-5.4", &[], &[more_tools(&[tool("b")]), user("u")]), None),
            ("more tools on gpt-6", body("gpt-6", &[], &[more_tools(&[tool("b")]), user("u")]), None),
            ("more tools on gpt-5.2", old(&[user("u"), more_tools(&[tool("b")])]), Some((400, ADDITIONAL_TOOLS_MODEL, Some("input[1]")))),
            ("more tools on gpt-4.1", body("gpt-4.1", &[], &[more_tools(&[tool("b")]), user("u")]), Some((400, ADDITIONAL_TOOLS_MODEL, Some("input[0]")))),
            ("more tools on o3", body("o3", &[], &[more_tools(&[tool("b")]), user("u")]), Some((400, ADDITIONAL_TOOLS_MODEL, Some("input[0]")))),
            ("more tools from the user", gpt(&[user("u"), user_tools]), Some((400, "Invalid value: 'user'. Supported values are: 'developer'.", Some("input[1].role")))),
            ("more tools between a call and its output", gpt(&[user("u"), call("c1"), more_tools(&[tool("b")]), output("c1")]),
                Some((400, "An 'additional_tools' item cannot stand between function call c1 and its output.", Some("input[2]")))),
            ("more tools with a refused name", gpt(&[user("u"), more_tools(&[tool("b c")])]),
                Some((400, "Invalid 'input[1].tools[0].name': string does not match pattern.", Some("input[1].tools[0].name")))),
        ];
        for (case, v, refusal) in rows {
            crate::chat::tests::assert_verdict(case, verdict(&v), refusal);
        }
        let broken = answer(&headers("responses-verdicts"), "{").unwrap_err();
        assert_eq!(
            broken.message,
            "We could not parse the JSON body of your request."
        );
    }

    #[test]
    fn additional_tools_from_gpt_5_4_on() {
        for model in [
            "gpt-5.4",
            "gpt-5.4-mini",
            "gpt-5.5",
            "gpt-5.10",
            "gpt-6",
            "gpt-6.1-pro",
        ] {
            assert!(takes_additional_tools(model), "{model}");
        }
        for model in [
            "gpt-5",
            "gpt-5.2",
            "gpt-5.3-codex",
            "gpt-4.1",
            "gpt-4o",
            "o3",
            "gpt-x",
            "deepseek-v4-pro",
            "",
        ] {
            assert!(!takes_additional_tools(model), "{model}");
        }
    }

    fn exchange(session: &str, v: &Value) -> Answered {
        answer(&headers(session), &v.to_string()).unwrap()
    }

    /// OpenAI's rule: the longest common prefix from 1,024 tokens in 128-token steps, per
    /// session, model and `prompt_cache_key`; a refused request changes nothing.
    #[test]
    fn responses_reads_openais_cache_by_prefix_model_and_key() {
        let long =
            json!({"type": "message", "role": "developer", "content": "Be brief. ".repeat(500)});
        let first = body("gpt-5.5", &[tool("a")], &[long.clone(), user("u1")]);
        let session = "responses-cache";
        let a = exchange(session, &first);
        assert_eq!(a.cached, 0);
        assert_eq!(
            a.total,
            (tool("a").to_string() + &long.to_string() + &user("u1").to_string()).len() as u64,
            "each tool's and each item's JSON, as sent"
        );
        verdict(&body(
            "gpt-5.5",
            &[tool("a")],
            &[long.clone(), output("c9")],
        ))
        .unwrap_err();
        let mut second = body(
            "gpt-5.5",
            &[tool("a")],
            &[
                long.clone(),
                user("u1"),
                json!({"type": "message", "role": "assistant", "content": "ok 1"}),
                user("u2"),
            ],
        );
        let b = exchange(session, &second);
        assert_eq!(
            b.cached,
            a.total / 512 * 512,
            "whole 128-token steps of the first"
        );
        assert_eq!(b.body["output"][0]["content"][0]["text"], "ok 2");
        let usage = &b.body["usage"];
        assert_eq!(usage["input_tokens"], b.total.div_ceil(4));
        assert_eq!(usage["input_tokens_details"]["cached_tokens"], b.cached / 4);
        // Another key, another model: another cache.
        second["prompt_cache_key"] = json!("thread-2");
        assert_eq!(exchange(session, &second).cached, 0, "a new key");
        assert_eq!(
            exchange(session, &second).cached,
            b.total / 512 * 512,
            "the key's own prompt"
        );
        second["model"] = json!("gpt-5.4");
        assert_eq!(exchange(session, &second).cached, 0, "a new model");
        // Below 1,024 tokens nothing is read.
        let short = body("gpt-5.5", &[], &[user("short")]);
        exchange("responses-cache-short", &short);
        assert_eq!(exchange("responses-cache-short", &short).cached, 0);
        // Instructions are part of the prefix.
        let mut instructed =
            json!({"model": "gpt-5.5", "instructions": "x".repeat(5000), "input": "a"});
        exchange("responses-cache-instructions", &instructed);
        instructed["input"] = json!("b");
        let c = exchange("responses-cache-instructions", &instructed);
        assert!(
            c.cached >= 4096 && c.cached.is_multiple_of(512),
            "{}",
            c.cached
        );
    }

    /// The JSON body and the stream of one answer decode to the same answer in the crate, the
    /// reasoning item (with `include`) and the call included.
    #[test]
    fn responses_streams_the_answer_it_sends_as_json() {
        let mut v = body("gpt-5.5", &[tool("read")], &[user("u")]);
        v["include"] = json!(["reasoning.encrypted_content"]);
        let mut h = headers("responses-json");
        h.push((TOOL_USE_HEADER.to_owned(), "read".to_owned()));
        let json_answer = answer(&h, &v.to_string()).unwrap();
        let output = &json_answer.body["output"];
        assert_eq!(output[0]["type"], "reasoning");
        assert_eq!(output[0]["encrypted_content"], encrypted("rs_standin_0001"));
        assert_eq!(output[2]["call_id"], "call_standin_0001");
        let decoded =
            mektpoy::response::decode_responses(&json_answer.body.to_string(), "openai", None)
                .unwrap();
        assert_eq!(decoded.stop_reason.as_ref().unwrap().as_str(), "tool_calls");
        let mut h = headers("responses-sse");
        h.push((TOOL_USE_HEADER.to_owned(), "read".to_owned()));
        v["stream"] = json!(true);
        let streamed = answer(&h, &v.to_string()).unwrap();
        let text = sse(&streamed);
        assert!(text.starts_with("event: response.created\ndata: {"));
        assert!(text.contains("\"sequence_number\":0"));
        let mut stream = mektpoy::response::ResponsesStream::new("openai", None);
        stream.push_text(&text).unwrap();
        let from_stream = stream.finish().unwrap();
        let from_body =
            mektpoy::response::decode_responses(&streamed.body.to_string(), "openai", None)
                .unwrap();
        assert_eq!(from_stream, from_body);
        assert_eq!(from_stream.message.text(), decoded.message.text());
    }

    fn post(session: &str, body: &str, headers: &[(String, String)]) -> crate::Response {
        client::post_to(PATH, session, 0, body, headers).unwrap()
    }

    /// Over HTTP: refusals in OpenAI's shape, the server errors of the fail switch (no state
    /// changed), a cut-off stream that was accepted all the same.
    #[test]
    fn responses_over_http_refuses_fails_and_cuts_off() {
        let h = vec![("content-type".to_owned(), "application/json".to_owned())];
        let v = body("gpt-5.5", &[tool("a")], &[user("u"), output("c1")]);
        let refused = post("responses-http", &v.to_string(), &h);
        assert_eq!(refused.status, 400);
        let error: Value = serde_json::from_str(&refused.body).unwrap();
        assert_eq!(error["error"]["type"], "invalid_request_error");
        assert!(
            error["error"]["message"]
                .as_str()
                .unwrap()
                .starts_with(NO_TOOL_CALL)
        );
        let missing_state = body("gpt-5.5", &[], &[user("u"), reasoning(false), user("v")]);
        assert_eq!(
            post("responses-http", &missing_state.to_string(), &h).status,
            404
        );

        let ok = body("gpt-5.5", &[], &[user("u")]);
        for (fail, status, kind) in [
            ("500", 500, "server_error"),
            ("529", 503, "service_unavailable_error"),
        ] {
            let mut failing = h.clone();
            failing.push((FAIL_HEADER.to_owned(), fail.to_owned()));
            let failed = post("responses-http", &ok.to_string(), &failing);
            assert_eq!(failed.status, status);
            let error: Value = serde_json::from_str(&failed.body).unwrap();
            assert_eq!(error["error"]["type"], kind);
            // As a body the crate decodes it as the provider's error.
            assert!(matches!(
                mektpoy::response::decode_responses(&failed.body, "openai", None),
                Err(mektpoy::response::ResponseError::Provider { .. })
            ));
        }
        let first = post("responses-http", &ok.to_string(), &h);
        assert_eq!(first.status, 200);
        assert_eq!(
            first.content[0]["content"][0]["text"], "ok 1",
            "failed requests were not answered"
        );

        let mut streamed = ok.clone();
        streamed["stream"] = json!(true);
        let mut cut = h.clone();
        cut.push((CUT_OFF_HEADER.to_owned(), "true".to_owned()));
        let torn = post("responses-http", &streamed.to_string(), &cut);
        assert_eq!(torn.status, 200, "accepted");
        assert!(
            torn.body.starts_with("event: response.created")
                && !torn.body.contains("response.completed\ndata")
        );
        let mut stream = mektpoy::response::ResponsesStream::new("openai", None);
        let _ = stream.push_text(&torn.body);
        assert!(matches!(
            stream.finish(),
            Err(mektpoy::response::ResponseError::CutOff { .. })
        ));
        let next = post("responses-http", &ok.to_string(), &h);
        assert_eq!(
            next.content[0]["content"][0]["text"], "ok 3",
            "the cut-off request was answered"
        );
    }

    /// The way back over HTTP, with the items built in the test the way a Responses serializer
    /// must build them from the log: a decoded reasoning block goes back as a `reasoning` item
    /// (`type` and its `extra` fields), a tool call as a `function_call` with its output after
    /// it. The stand-in verifies the blob, and the first prompt is read from the cache.
    #[test]
    fn responses_over_http_takes_a_decoded_answer_back() {
        use mektpoy::vocab::ContentBlock;
        let h = vec![("content-type".to_owned(), "application/json".to_owned())];
        let mut called = h.clone();
        called.push((TOOL_USE_HEADER.to_owned(), "read".to_owned()));
        let developer =
            json!({"type": "message", "role": "developer", "content": "Be brief. ".repeat(500)});
        let mut first = body("gpt-5.5", &[tool("read")], &[developer.clone(), user("u")]);
        first["include"] = json!(["reasoning.encrypted_content"]);
        first["prompt_cache_key"] = json!("session-1");
        let reply = post("responses-http-back", &first.to_string(), &called);
        assert_eq!(reply.status, 200, "{}", reply.body);
        let (total, _) = reply.bytes.unwrap();
        let answer = mektpoy::response::decode_responses(&reply.body, "openai", None).unwrap();
        let mut input = vec![developer, user("u")];
        let mut call_id = String::new();
        for block in answer.message.content() {
            match block {
                ContentBlock::Reasoning { extra, .. } => {
                    let mut item = serde_json::Map::new();
                    item.insert("type".to_owned(), json!("reasoning"));
                    item.extend(extra.iter().map(|(k, v)| (k.clone(), v.clone())));
                    input.push(Value::Object(item));
                }
                ContentBlock::Text { text } => {
                    input.push(json!({"type": "message", "role": "assistant", "content": text}))
                }
                ContentBlock::ToolCall(call) => {
                    let (id, name, arguments) = (call.id(), call.name(), call.arguments());
                    call_id = id.to_owned();
                    input.push(json!({"type": "function_call", "call_id": id, "name": name, "arguments": arguments}));
                }
                other => panic!("unexpected block {other:?}"),
            }
        }
        input.push(json!({"type": "function_call_output", "call_id": call_id, "output": "done"}));
        let mut second = body("gpt-5.5", &[tool("read")], &input);
        second["include"] = json!(["reasoning.encrypted_content"]);
        second["prompt_cache_key"] = json!("session-1");
        let next = post("responses-http-back", &second.to_string(), &h);
        assert_eq!(next.status, 200, "{}", next.body);
        assert_eq!(
            next.bytes.unwrap().1,
            total / 512 * 512,
            "the first prompt, in 128-token steps"
        );
        let usage = mektpoy::response::decode_responses(&next.body, "openai", None)
            .unwrap()
            .usage
            .unwrap();
        assert_eq!(usage.cache_read_tokens, Some(total / 512 * 128));
        // The same items with the blob of another item: refused.
        let mut moved = second.clone();
        let at = input.iter().position(|i| i["type"] == "reasoning").unwrap();
        moved["input"][at]["encrypted_content"] = json!(encrypted("rs_other"));
        assert_eq!(
            post("responses-http-back", &moved.to_string(), &h).status,
            400
        );
    }
}
