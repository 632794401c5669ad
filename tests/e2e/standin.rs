//! A loopback stand-in for a Messages-API provider, for end-to-end tests.
//!
//! It listens on 127.0.0.1 (`std::net`, one thread per connection), keeps state per value of the
//! `x-mektpoy-test-session` header so parallel tests do not mix, and refuses what the vendor
//! documents as refused for mid-conversation tool changes:
//! - a `tool_addition` that does not name a tool declared with `defer_loading: true` and not
//!   currently offered;
//! - a `tool_removal` of a tool that is not offered;
//! - a `system` message not directly followed by an assistant message or the end of the array,
//!   or not preceded (directly or through other `system` messages) by a user / tool-result turn;
//! - change blocks without the beta header;
//! - deferred declarations with no non-deferred declaration.
//!
//! Accepted requests get a usage block whose cached input is computed by SPEC §9 (the crate's
//! `Meter`, with the deferred section size the test announces in
//! `x-mektpoy-deferred-section-bytes`), as ⌈bytes / 4⌉ tokens.

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread;

use mektpoy::{Meter, Route, WireApi};
use serde_json::{Value, json};

pub const BETA: &str = "mid-conversation-tool-changes-2026-07-01";

/// What the stand-in saw of one accepted request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Seen {
    pub total_bytes: u64,
    pub cached_bytes: u64,
}

#[derive(Default)]
struct State {
    meters: HashMap<String, Meter>,
    seen: HashMap<String, Vec<Seen>>,
}

pub struct StandIn {
    pub url: String,
    state: Arc<Mutex<State>>,
}

impl StandIn {
    pub fn start() -> StandIn {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        let url = format!("http://{}/v1/messages", listener.local_addr().expect("addr"));
        let state = Arc::new(Mutex::new(State::default()));
        let shared = Arc::clone(&state);
        thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let state = Arc::clone(&shared);
                thread::spawn(move || {
                    let _ = serve(stream, &state);
                });
            }
        });
        StandIn { url, state }
    }

    /// Accepted requests of one test session, in order.
    pub fn seen(&self, session: &str) -> Vec<Seen> {
        self.state
            .lock()
            .unwrap()
            .seen
            .get(session)
            .cloned()
            .unwrap_or_default()
    }
}

fn serve(stream: TcpStream, state: &Mutex<State>) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    let mut headers = HashMap::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line)?;
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_owned());
        }
    }
    let len: usize = headers
        .get("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; len];
    reader.read_exact(&mut body)?;
    let body = String::from_utf8_lossy(&body).into_owned();
    let (status, reply) = match answer(&headers, &body, state) {
        Ok(v) => (200, v),
        Err(message) => (
            400,
            json!({"type": "error", "error": {"type": "invalid_request_error", "message": message}}),
        ),
    };
    let reply = reply.to_string();
    let mut stream = stream;
    write!(
        stream,
        "HTTP/1.1 {status} {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{reply}",
        if status == 200 { "OK" } else { "Bad Request" },
        reply.len()
    )?;
    stream.flush()
}

fn answer(headers: &HashMap<String, String>, body: &str, state: &Mutex<State>) -> Result<Value, String> {
    let session = headers
        .get("x-mektpoy-test-session")
        .ok_or("missing x-mektpoy-test-session")?
        .clone();
    let section: u32 = headers
        .get("x-mektpoy-deferred-section-bytes")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let v: Value = serde_json::from_str(body).map_err(|e| format!("body is not JSON: {e}"))?;
    check(headers, &v)?;
    let mut state = state.lock().map_err(|_| "poisoned")?;
    let meter = state.meters.entry(session.clone()).or_insert_with(|| {
        let mut r = Route::plain("standin", "standin", WireApi::Messages);
        r.deferred_section_bytes = section;
        Meter::new(&r)
    });
    let row = meter.observe(body, false).map_err(|e| e.to_string())?;
    state.seen.entry(session).or_default().push(Seen {
        total_bytes: row.total_bytes,
        cached_bytes: row.cached_bytes,
    });
    let cached = row.cached_bytes.div_ceil(4);
    let total = row.total_bytes.div_ceil(4);
    Ok(json!({
        "id": "msg_standin",
        "type": "message",
        "role": "assistant",
        "model": v.get("model").cloned().unwrap_or(Value::Null),
        "content": [{"type": "text", "text": "ok"}],
        "stop_reason": "end_turn",
        "usage": {
            "input_tokens": total.saturating_sub(cached),
            "cache_read_input_tokens": cached,
            "cache_creation_input_tokens": 0,
            "output_tokens": 1
        }
    }))
}

/// The vendor's refusals for this feature.
fn check(headers: &HashMap<String, String>, v: &Value) -> Result<(), String> {
    let empty = Vec::new();
    let tools = v.get("tools").and_then(Value::as_array).unwrap_or(&empty);
    let mut deferred = HashSet::new();
    let mut offered = HashSet::new();
    for t in tools {
        let name = t.get("name").and_then(Value::as_str).ok_or("tool without name")?;
        if t.get("defer_loading") == Some(&Value::Bool(true)) {
            deferred.insert(name.to_owned());
        } else {
            offered.insert(name.to_owned());
        }
    }
    if !deferred.is_empty() && offered.is_empty() {
        return Err("deferred declarations need at least one non-deferred declaration".into());
    }
    let beta = headers
        .get("anthropic-beta")
        .is_some_and(|b| b.split(',').any(|x| x.trim() == BETA));
    let messages = v
        .get("messages")
        .and_then(Value::as_array)
        .ok_or("no messages array")?;
    for (i, m) in messages.iter().enumerate() {
        if m.get("role").and_then(Value::as_str) != Some("system") {
            continue;
        }
        match messages.get(i + 1).and_then(|n| n.get("role")).and_then(Value::as_str) {
            None | Some("assistant") => {}
            Some(other) => return Err(format!("system message {i} is followed by a {other} message")),
        }
        let before = messages[..i]
            .iter()
            .rev()
            .find(|p| p.get("role").and_then(Value::as_str) != Some("system"));
        if before.and_then(|p| p.get("role")).and_then(Value::as_str) != Some("user") {
            return Err(format!("system message {i} does not follow a user or tool-result turn"));
        }
        let blocks = m.get("content").and_then(Value::as_array).ok_or("system content must be blocks")?;
        for b in blocks {
            let ty = b.get("type").and_then(Value::as_str).unwrap_or("");
            if ty != "tool_addition" && ty != "tool_removal" {
                continue;
            }
            if !beta {
                return Err(format!("{ty} without the {BETA} beta header"));
            }
            let name = b
                .pointer("/tool/name")
                .and_then(Value::as_str)
                .ok_or("change block without tool.name")?;
            if ty == "tool_addition" {
                if !deferred.contains(name) || offered.contains(name) {
                    return Err(format!("tool_addition of `{name}`: not a deferred declaration that is not offered"));
                }
                offered.insert(name.to_owned());
            } else if !offered.remove(name) {
                return Err(format!("tool_removal of `{name}`, which is not offered"));
            }
        }
    }
    Ok(())
}

/// Sends a serialized request to the stand-in through a real HTTP client.
pub fn send(
    url: &str,
    session: &str,
    section_bytes: u32,
    request: &mektpoy::WireRequest,
) -> Result<Value, (u16, String)> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .proxy(None)
        .build()
        .into();
    let mut call = agent
        .post(url)
        .header("x-mektpoy-test-session", session)
        .header("x-mektpoy-deferred-section-bytes", &section_bytes.to_string());
    for (k, v) in &request.headers {
        call = call.header(k, v);
    }
    let mut response = call.send(request.body.as_str()).map_err(|e| (0, e.to_string()))?;
    let status = response.status().as_u16();
    let text = response.body_mut().read_to_string().map_err(|e| (status, e.to_string()))?;
    if status != 200 {
        return Err((status, text));
    }
    serde_json::from_str(&text).map_err(|e| (status, e.to_string()))
}

/// Unit checks of the stand-in's own refusals.
pub fn self_test() {
    let h = |beta: bool| {
        let mut m = HashMap::new();
        if beta {
            m.insert("anthropic-beta".into(), BETA.into());
        }
        m
    };
    let tools = json!([{"name": "a"}, {"name": "b", "defer_loading": true}]);
    let add_b = json!({"role": "system", "content": [{"type": "tool_addition", "tool": {"type": "tool_reference", "name": "b"}}]});
    let user = json!({"role": "user", "content": "hi"});
    let body = |msgs: Value| json!({"tools": tools, "messages": msgs});
    assert!(check(&h(true), &body(json!([user, add_b]))).is_ok());
    assert!(check(&h(false), &body(json!([user, add_b]))).is_err(), "no beta");
    assert!(check(&h(true), &body(json!([add_b, user]))).is_err(), "system before user");
    assert!(check(&h(true), &body(json!([user, add_b, user]))).is_err(), "followed by user");
    assert!(check(&h(true), &body(json!([user, add_b, {"role": "assistant", "content": "x"}, user, add_b]))).is_err(), "b already offered");
    let remove_a = json!({"role": "system", "content": [{"type": "tool_removal", "tool": {"type": "tool_reference", "name": "a"}}]});
    assert!(check(&h(true), &body(json!([user, remove_a]))).is_ok());
    let remove_b = json!({"role": "system", "content": [{"type": "tool_removal", "tool": {"type": "tool_reference", "name": "b"}}]});
    assert!(check(&h(true), &body(json!([user, remove_b]))).is_err(), "b not offered");
    let only_deferred = json!({"tools": [{"name": "b", "defer_loading": true}], "messages": [user]});
    assert!(check(&h(true), &only_deferred).is_err());
}
