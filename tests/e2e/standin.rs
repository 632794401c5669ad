//! A loopback stand-in for a Messages-API provider (DeepSeek's Anthropic-compatible endpoint,
//! Anthropic), for end-to-end tests.
//!
//! One stand-in per test process, started on first use: `std::net` on 127.0.0.1, one thread per
//! connection, `connection: close`. State is kept per value of the `x-mektpoy-test-session`
//! header, which each test sets to its own key, so parallel tests do not mix.
//!
//! It refuses, with a 400 and an `invalid_request_error`, what the vendor documents as refused
//! for mid-conversation tool changes:
//! - a `tool_addition` that does not name a tool declared with `defer_loading: true` and not
//!   currently offered (offered: every non-deferred declaration, plus every earlier addition of
//!   the request not removed since);
//! - a `tool_removal` of a tool that is not offered;
//! - a `system` message not directly followed by an assistant message or the end of the array,
//!   or not preceded (directly or through other `system` messages) by a user / tool-result turn;
//! - change blocks without the `mid-conversation-tool-changes-2026-07-01` beta header (and change
//!   blocks outside a `system` message);
//! - deferred declarations with no non-deferred declaration.
//!
//! It also refuses what any Messages-API request must not be (no `model`, no `max_tokens`, a tool
//! with a key the API does not take, an empty text block, ...), so a serializer that drifts from
//! the API shows up here rather than on the real endpoint.
//!
//! Accepted requests get a usage block whose cached input follows SPEC §9, computed here from
//! the raw body bytes independently of the crate's `Meter`: the concatenation of each
//! non-deferred tool's JSON, a fixed deferred section of the size the test announces in
//! `x-mektpoy-deferred-section-bytes` (the route's `deferred_section_bytes`) when any declaration
//! is deferred, `system`, and each message; cached = the longest common byte prefix with the
//! session's previous accepted request. Tokens are estimated as ⌈bytes / 4⌉; the exact bytes are
//! in a non-standard `mektpoy` object beside `usage`. A refused request leaves the session's
//! state unchanged (the provider caches nothing of it).

use std::collections::{BTreeMap, HashSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::thread;
use std::time::Duration;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};

/// The beta that lets a conversation add and remove tools mid-way.
pub const BETA: &str = "mid-conversation-tool-changes-2026-07-01";
/// The header that keys the stand-in's state.
pub const SESSION_HEADER: &str = "x-mektpoy-test-session";
/// The header that announces the route's deferred section size (SPEC §9).
pub const SECTION_HEADER: &str = "x-mektpoy-deferred-section-bytes";

/// What the stand-in reports about one accepted request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Usage {
    /// Bytes of the request's SPEC §9 segments.
    pub total_bytes: u64,
    /// Bytes shared, as a prefix, with the session's previous accepted request.
    pub cached_bytes: u64,
    /// `usage.input_tokens`: ⌈total / 4⌉ − ⌈cached / 4⌉ (input not read from the cache).
    pub input_tokens: u64,
    /// `usage.cache_read_input_tokens`: ⌈cached / 4⌉.
    pub cache_read_input_tokens: u64,
}

/// An accepted request's answer.
#[derive(Clone, Debug)]
pub struct Answer {
    /// The usage block.
    pub usage: Usage,
    /// The assistant's text.
    pub text: String,
}

/// A refused request: the HTTP status and the error message.
#[derive(Clone, Debug)]
pub struct Refused {
    pub status: u16,
    pub message: String,
}

/// Per-session state: the section size the session announced and the previous request's
/// segments.
struct SessionState {
    section: u32,
    previous: Vec<u8>,
    requests: u64,
}

static SESSIONS: Mutex<BTreeMap<String, SessionState>> = Mutex::new(BTreeMap::new());
static URL: OnceLock<String> = OnceLock::new();

/// The stand-in's endpoint URL (`http://127.0.0.1:PORT/v1/messages`); starts it on first use.
pub fn url() -> &'static str {
    URL.get_or_init(|| {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        let addr = listener.local_addr().expect("local address");
        thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                thread::spawn(move || {
                    // A broken connection only fails the request that used it.
                    let _ = serve(stream);
                });
            }
        });
        format!("http://{addr}/v1/messages")
    })
}

/// Sends a serialized request to the stand-in through a real HTTP client (`ureq`), keyed by
/// `session`, announcing the route's deferred section size.
pub fn send(
    session: &str,
    section_bytes: u32,
    request: &mektpoy::WireRequest,
) -> Result<Answer, Refused> {
    let mut call = agent()
        .post(url())
        .header(SESSION_HEADER, session)
        .header(SECTION_HEADER, section_bytes.to_string());
    for (name, value) in &request.headers {
        call = call.header(name, value);
    }
    let transport = |e: ureq::Error| Refused {
        status: 0,
        message: e.to_string(),
    };
    let mut response = call.send(request.body.as_str()).map_err(transport)?;
    let status = response.status().as_u16();
    let text = response.body_mut().read_to_string().map_err(transport)?;
    let reply: Value = serde_json::from_str(&text).map_err(|e| Refused {
        status,
        message: format!("reply is not JSON ({e}): {text}"),
    })?;
    if status != 200 {
        let message = reply
            .pointer("/error/message")
            .and_then(Value::as_str)
            .unwrap_or(&text)
            .to_owned();
        return Err(Refused { status, message });
    }
    let n = |pointer: &str| reply.pointer(pointer).and_then(Value::as_u64).unwrap();
    Ok(Answer {
        usage: Usage {
            total_bytes: n("/mektpoy/total_bytes"),
            cached_bytes: n("/mektpoy/cached_bytes"),
            input_tokens: n("/usage/input_tokens"),
            cache_read_input_tokens: n("/usage/cache_read_input_tokens"),
        },
        text: reply
            .pointer("/content/0/text")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
    })
}

/// One HTTP client for the process: no proxy (loopback), no redirects, no retries (ureq never
/// retries), a timeout so a stuck stand-in fails the test instead of hanging it.
fn agent() -> &'static ureq::Agent {
    static AGENT: OnceLock<ureq::Agent> = OnceLock::new();
    AGENT.get_or_init(|| {
        ureq::Agent::config_builder()
            .http_status_as_error(false)
            .proxy(None)
            .max_redirects(0)
            .timeout_global(Some(Duration::from_secs(20)))
            .build()
            .into()
    })
}

/// Lowercase header names with their values; a repeated header keeps every value.
type Headers = Vec<(String, String)>;

fn header<'h>(headers: &'h Headers, name: &str) -> Option<&'h str> {
    headers
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

fn serve(stream: TcpStream) -> std::io::Result<()> {
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
    let (status, reply) = match http_request(&request_line, &headers, &mut reader) {
        Ok(body) => match answer(&headers, &body) {
            Ok(reply) => (200, reply),
            Err(message) => (400, error_body("invalid_request_error", &message)),
        },
        Err((status, message)) => (status, error_body("invalid_request_error", &message)),
    };
    let reason = match status {
        200 => "OK",
        404 => "Not Found",
        411 => "Length Required",
        _ => "Bad Request",
    };
    let reply = reply.to_string();
    let mut stream = stream;
    write!(
        stream,
        "HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{reply}",
        reply.len()
    )?;
    stream.flush()
}

/// The body of a `POST /v1/messages` with a `content-length`, as UTF-8.
fn http_request(
    request_line: &str,
    headers: &Headers,
    reader: &mut impl Read,
) -> Result<String, (u16, String)> {
    let mut parts = request_line.split_whitespace();
    let (method, path) = (parts.next(), parts.next());
    if method != Some("POST") || path != Some("/v1/messages") {
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

fn error_body(kind: &str, message: &str) -> Value {
    json!({"type": "error", "error": {"type": kind, "message": message}})
}

fn answer(headers: &Headers, body: &str) -> Result<Value, String> {
    let session = header(headers, SESSION_HEADER)
        .ok_or_else(|| format!("test support: missing {SESSION_HEADER}"))?;
    let section: u32 = header(headers, SECTION_HEADER)
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| format!("test support: missing or bad {SECTION_HEADER}"))?;
    let v: Value = serde_json::from_str(body).map_err(|e| format!("the body is not JSON: {e}"))?;
    check_shape(headers, &v)?;
    check_tool_changes(headers, &v)?;
    let bytes = segments(body, &v, section)?;

    let mut sessions = SESSIONS.lock().unwrap_or_else(PoisonError::into_inner);
    let state = sessions
        .entry(session.to_owned())
        .or_insert_with(|| SessionState {
            section,
            previous: Vec::new(),
            requests: 0,
        });
    if state.section != section {
        return Err(format!(
            "test support: session {session} announced a deferred section of {} bytes, now {section}",
            state.section
        ));
    }
    let cached = state
        .previous
        .iter()
        .zip(&bytes)
        .take_while(|(a, b)| a == b)
        .count() as u64;
    let total = bytes.len() as u64;
    state.previous = bytes;
    state.requests += 1;
    let tokens = |b: u64| b.div_ceil(4);
    Ok(json!({
        "id": format!("msg_standin_{}", state.requests),
        "type": "message",
        "role": "assistant",
        "model": v["model"],
        "content": [{"type": "text", "text": format!("ok {}", state.requests)}],
        "stop_reason": "end_turn",
        "stop_sequence": null,
        "usage": {
            "input_tokens": tokens(total) - tokens(cached),
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": tokens(cached),
            "output_tokens": 2
        },
        "mektpoy": {"total_bytes": total, "cached_bytes": cached}
    }))
}

/// The raw JSON of the parts SPEC §9 cuts a body into.
#[derive(Deserialize)]
struct RawBody<'a> {
    #[serde(borrow, default)]
    tools: Vec<&'a RawValue>,
    #[serde(borrow, default)]
    system: Option<&'a RawValue>,
    #[serde(borrow)]
    messages: Vec<&'a RawValue>,
}

/// SPEC §9: non-deferred tools, the fixed deferred section when any declaration is deferred,
/// `system`, each message — concatenated, as sent.
fn segments(body: &str, v: &Value, section: u32) -> Result<Vec<u8>, String> {
    let raw: RawBody<'_> = serde_json::from_str(body).map_err(|e| e.to_string())?;
    let mut out = Vec::with_capacity(body.len());
    let mut any_deferred = false;
    for (i, tool) in raw.tools.iter().enumerate() {
        if is_deferred(&v["tools"][i]) {
            any_deferred = true;
        } else {
            out.extend_from_slice(tool.get().as_bytes());
        }
    }
    if any_deferred {
        out.resize(out.len() + section as usize, b'#');
    }
    if let Some(system) = raw.system {
        out.extend_from_slice(system.get().as_bytes());
    }
    for m in raw.messages {
        out.extend_from_slice(m.get().as_bytes());
    }
    Ok(out)
}

fn is_deferred(tool: &Value) -> bool {
    tool.get("defer_loading") == Some(&Value::Bool(true))
}

fn role(m: &Value) -> Option<&str> {
    m.get("role").and_then(Value::as_str)
}

/// What any Messages-API request must be.
fn check_shape(headers: &Headers, v: &Value) -> Result<(), String> {
    if header(headers, "anthropic-version").is_none() {
        return Err("missing anthropic-version header".into());
    }
    if header(headers, "content-type") != Some("application/json") {
        return Err("content-type must be application/json".into());
    }
    if v.get("model")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        return Err("model: a non-empty string is required".into());
    }
    if v.get("max_tokens")
        .and_then(Value::as_u64)
        .is_none_or(|n| n == 0)
    {
        return Err("max_tokens: a positive integer is required".into());
    }
    match v.get("system") {
        None | Some(Value::String(_)) => {}
        Some(_) => return Err("system: must be a string".into()),
    }
    let mut names = HashSet::new();
    if let Some(tools) = v.get("tools") {
        let tools = tools.as_array().ok_or("tools: must be an array")?;
        for (i, t) in tools.iter().enumerate() {
            let t = t
                .as_object()
                .ok_or(format!("tools.{i}: must be an object"))?;
            if let Some(k) = t.keys().find(|k| {
                !["name", "description", "input_schema", "defer_loading"].contains(&k.as_str())
            }) {
                return Err(format!("tools.{i}.{k}: extra inputs are not permitted"));
            }
            let name = t
                .get("name")
                .and_then(Value::as_str)
                .filter(|n| {
                    (1..=64).contains(&n.len())
                        && n.bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
                })
                .ok_or(format!(
                    "tools.{i}.name: must match ^[a-zA-Z0-9_-]{{1,64}}$"
                ))?;
            if !names.insert(name) {
                return Err(format!("tools: tool names must be unique (`{name}`)"));
            }
            if t.get("input_schema").and_then(|s| s.get("type")) != Some(&json!("object")) {
                return Err(format!("tools.{i}.input_schema.type: must be \"object\""));
            }
            if t.get("defer_loading").is_some_and(|d| !d.is_boolean()) {
                return Err(format!("tools.{i}.defer_loading: must be a boolean"));
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
            return Err(format!(
                "messages.{i}.role: must be user, assistant or system"
            ));
        }
        let blocks = match m.get("content") {
            Some(Value::String(s)) if !s.is_empty() => continue,
            Some(Value::Array(blocks)) if !blocks.is_empty() => blocks,
            _ => {
                return Err(format!(
                    "messages.{i}.content: must be a non-empty string or array"
                ));
            }
        };
        for (j, b) in blocks.iter().enumerate() {
            match b.get("type").and_then(Value::as_str) {
                Some("text")
                    if b.get("text")
                        .and_then(Value::as_str)
                        .is_some_and(|t| !t.is_empty()) => {}
                Some("text") => {
                    return Err(format!(
                        "messages.{i}.content.{j}: text content blocks must be non-empty"
                    ));
                }
                Some(_) => {}
                None => return Err(format!("messages.{i}.content.{j}.type: required")),
            }
        }
    }
    Ok(())
}

/// The vendor's refusals for mid-conversation tool changes.
fn check_tool_changes(headers: &Headers, v: &Value) -> Result<(), String> {
    let beta = headers
        .iter()
        .filter(|(n, _)| n == "anthropic-beta")
        .flat_map(|(_, v)| v.split(','))
        .any(|b| b.trim() == BETA);
    let no_tools = Vec::new();
    let tools = v
        .get("tools")
        .and_then(Value::as_array)
        .unwrap_or(&no_tools);
    let mut deferred = HashSet::new();
    let mut offered = HashSet::new();
    for t in tools {
        let name = t["name"].as_str().unwrap_or_default();
        if is_deferred(t) {
            deferred.insert(name);
        } else {
            offered.insert(name);
        }
    }
    if !deferred.is_empty() && offered.is_empty() {
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
                ));
            }
            continue;
        }
        match messages.get(i + 1).and_then(role) {
            None | Some("assistant") => {}
            Some(next) => {
                return Err(format!(
                    "messages.{i}: a system message must be followed by an assistant message or end the conversation, not a {next} message"
                ));
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
            ));
        }
        for (j, b) in blocks.iter().enumerate() {
            if !is_change(b) {
                continue;
            }
            let ty = b["type"].as_str().unwrap_or_default();
            if !beta {
                return Err(format!(
                    "messages.{i}.content.{j}: {ty} requires the {BETA} beta"
                ));
            }
            if b.pointer("/tool/type").and_then(Value::as_str) != Some("tool_reference") {
                return Err(format!(
                    "messages.{i}.content.{j}.tool: must be a tool_reference"
                ));
            }
            let name = b
                .pointer("/tool/name")
                .and_then(Value::as_str)
                .ok_or(format!("messages.{i}.content.{j}.tool.name: required"))?;
            if ty == "tool_addition" {
                if !deferred.contains(name) || offered.contains(name) {
                    return Err(format!(
                        "messages.{i}.content.{j}: tool_addition of `{name}`, which is not a deferred declaration that is not offered"
                    ));
                }
                offered.insert(name);
            } else if !offered.remove(name) {
                return Err(format!(
                    "messages.{i}.content.{j}: tool_removal of `{name}`, which is not offered"
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(beta: bool) -> Headers {
        let mut h = vec![
            ("content-type".to_owned(), "application/json".to_owned()),
            ("anthropic-version".to_owned(), "2023-06-01".to_owned()),
        ];
        if beta {
            h.push(("anthropic-beta".to_owned(), BETA.to_owned()));
        }
        h
    }

    /// `"a b*"`: tools `a` and `b`, `b` with `defer_loading: true`.
    fn tools(spec: &str) -> Value {
        spec.split_whitespace()
            .map(|t| {
                let (name, deferred) = t.strip_suffix('*').map_or((t, false), |n| (n, true));
                let mut tool =
                    json!({"name": name, "description": name, "input_schema": {"type": "object"}});
                if deferred {
                    tool["defer_loading"] = json!(true);
                }
                tool
            })
            .collect()
    }

    /// `"u S(+b,-a) a"`: a user text, a system message adding `b` and removing `a`, an assistant
    /// text; `U(+b)` is a user message holding a change block.
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
                                let ty = if b.starts_with('+') { "tool_addition" } else { "tool_removal" };
                                json!({"type": ty, "tool": {"type": "tool_reference", "name": &b[1..]}})
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

    fn verdict(beta: bool, v: &Value) -> Result<(), String> {
        let h = headers(beta);
        check_shape(&h, v).and_then(|()| check_tool_changes(&h, v))
    }

    fn expect(name: &str, got: Result<(), String>, refusal: Option<&str>) {
        match (got, refusal) {
            (Ok(()), None) => {}
            (Err(e), Some(expected)) => {
                assert!(
                    e.contains(expected),
                    "{name}: refused with `{e}`, expected `{expected}`"
                )
            }
            (got, expected) => panic!("{name}: got {got:?}, expected refusal {expected:?}"),
        }
    }

    /// Each vendor refusal of the issue, and the nearest accepted requests.
    #[test]
    fn standin_refuses_the_documented_tool_change_faults_and_accepts_the_rest() {
        // (case, beta header, tools, messages, refusal)
        #[rustfmt::skip]
        let rows = [
            ("addition at the end, after a user turn", true, "a b* c*", "u S(+b)", None),
            ("addition before an assistant turn", true, "a b* c*", "u S(+b) a", None),
            ("addition after a later user turn", true, "a b* c*", "u a u S(+b)", None),
            ("removal of a non-deferred declaration", true, "a b* c*", "u S(-a)", None),
            ("an added tool removed and added again", true, "a b*", "u S(+b,-b,+b)", None),
            ("no beta header", false, "a b*", "u S(+b)", Some("requires the")),
            ("addition of a non-deferred declaration", true, "a b*", "u S(+a)", Some("tool_addition of `a`")),
            ("addition of an undeclared tool", true, "a b*", "u S(+z)", Some("tool_addition of `z`")),
            ("addition of a tool already offered", true, "a b*", "u S(+b) a u S(+b)", Some("tool_addition of `b`")),
            ("removal of a deferred tool never added", true, "a b*", "u S(-b)", Some("tool_removal of `b`")),
            ("removal of a removed tool", true, "a b*", "u S(-a,-a)", Some("tool_removal of `a`")),
            ("removal of an undeclared tool", true, "a b*", "u S(-z)", Some("tool_removal of `z`")),
            ("system message followed by a user message", true, "a b*", "u S(+b) u", Some("followed by an assistant")),
            // Literally "not directly followed by an assistant message or the end": a system
            // message followed by another one is refused, even right after a user turn.
            ("two system messages in a row", true, "a b* c*", "u S(+b) S(+c)", Some("followed by an assistant")),
            ("system message after an assistant turn", true, "a b*", "u a S(+b)", Some("after a user or tool-result turn")),
            ("system message first", true, "a b*", "S(+b) a", Some("first message")),
            ("tool change in a user message", true, "a b*", "U(+b)", Some("only allowed in system messages")),
            ("only deferred declarations", true, "b*", "u", Some("need at least one declaration")),
            ("two tools with one name", true, "a a", "u", Some("unique")),
        ];
        for (name, beta, tool_spec, message_spec, refusal) in rows {
            expect(name, verdict(beta, &body(tool_spec, message_spec)), refusal);
        }
    }

    /// What any Messages-API request must be.
    #[test]
    fn standin_refuses_bodies_the_messages_api_does_not_take() {
        let user = messages("u");
        let mut titled = tools("a");
        titled[0]["title"] = json!("A");
        let empty_text = json!([{"role": "user", "content": [{"type": "text", "text": ""}]}]);
        let untyped_schema = json!([{"name": "a", "description": "a", "input_schema": {}}]);
        #[rustfmt::skip]
        let rows = [
            ("accepted", json!({"model": "m", "max_tokens": 8, "system": "S", "messages": user}), None),
            ("no max_tokens", json!({"model": "m", "messages": user}), Some("max_tokens")),
            ("no model", json!({"max_tokens": 8, "messages": user}), Some("model")),
            ("no messages", json!({"model": "m", "max_tokens": 8, "messages": []}), Some("messages")),
            ("system as blocks", json!({"model": "m", "max_tokens": 8, "system": [], "messages": user}), Some("system")),
            ("a tool key the API does not take", json!({"model": "m", "max_tokens": 8, "tools": titled, "messages": user}), Some("extra inputs")),
            ("an input schema without type object", json!({"model": "m", "max_tokens": 8, "tools": untyped_schema, "messages": user}), Some("input_schema.type")),
            ("an empty text block", json!({"model": "m", "max_tokens": 8, "messages": empty_text}), Some("non-empty")),
        ];
        for (name, v, refusal) in rows {
            expect(name, verdict(false, &v), refusal);
        }
    }

    /// SPEC §9 segments: non-deferred tools, a fixed section when any declaration is deferred,
    /// `system`, each message, as raw bytes.
    #[test]
    fn standin_cuts_bodies_into_spec_9_segments() {
        let body = r#"{"model":"m","max_tokens":1,"system":"S","tools":[{"name":"a"},{"name":"b","defer_loading":true},{"name":"c"}],"messages":[{"role":"user","content":"hi"}]}"#;
        let v: Value = serde_json::from_str(body).unwrap();
        assert_eq!(
            String::from_utf8(segments(body, &v, 3).unwrap()).unwrap(),
            r#"{"name":"a"}{"name":"c"}###"S"{"role":"user","content":"hi"}"#
        );
        let plain = r#"{"tools":[{"name":"a"}],"messages":[]}"#;
        let v: Value = serde_json::from_str(plain).unwrap();
        assert_eq!(segments(plain, &v, 3).unwrap(), br#"{"name":"a"}"#);
    }

    fn wire(body: &Value, beta: bool) -> mektpoy::WireRequest {
        mektpoy::WireRequest::new(body.to_string(), headers(beta))
    }

    /// Over HTTP: a refusal is a 400 that leaves the session's cache state alone; sessions do
    /// not share state.
    #[test]
    fn standin_over_http_keys_state_by_session_and_caches_nothing_of_a_refused_request() {
        let one = body("a b*", "u");
        let two = body("a b*", "u S(+b)");

        let first = send("standin-http-1", 0, &wire(&one, false)).unwrap();
        assert_eq!(first.usage.cached_bytes, 0);
        assert_eq!(first.text, "ok 1", "the session's first accepted request");
        let refused = send("standin-http-1", 0, &wire(&two, false)).unwrap_err();
        assert_eq!(refused.status, 400, "{}", refused.message);
        assert!(
            refused.message.contains("requires the"),
            "{}",
            refused.message
        );
        let second = send("standin-http-1", 0, &wire(&two, true)).unwrap();
        assert_eq!(
            second.usage.cached_bytes, first.usage.total_bytes,
            "the refused request did not replace the cached one"
        );
        assert_eq!(
            second.usage.cache_read_input_tokens,
            first.usage.total_bytes.div_ceil(4)
        );
        assert_eq!(
            second.usage.input_tokens,
            second.usage.total_bytes.div_ceil(4) - first.usage.total_bytes.div_ceil(4)
        );

        let other = send("standin-http-2", 0, &wire(&one, false)).unwrap();
        assert_eq!(other.usage.cached_bytes, 0, "another session starts cold");

        let mut broken = wire(&one, false);
        broken.body = "{".into();
        assert_eq!(send("standin-http-3", 0, &broken).unwrap_err().status, 400);
        let resized = send("standin-http-2", 512, &wire(&one, false)).unwrap_err();
        assert!(
            resized.message.contains("test support"),
            "{}",
            resized.message
        );
    }
}
