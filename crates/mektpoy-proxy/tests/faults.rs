//! Faults: a proxy killed mid-stream (SIGKILL) and restarted on the same store, a proxy
//! stopped mid-stream (SIGTERM: the stream finishes first), an upstream cut off mid-stream, and
//! hostile bodies. The conversation goes on every time: nothing refused, nothing lost,
//! duplicated or half-written in the log.

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use mektpoy::Session;
use mektpoy_standin::{CACHED_BYTES_HEADER, CONTENT_HEADER, CUT_OFF_HEADER, SESSION_HEADER};
use serde_json::{Value, json};
use support::ProxyProcess;

fn body(history: &[Value], tools: usize, stream: bool) -> Value {
    let tools: Vec<Value> = (0..tools)
        .map(|i| json!({"name": format!("t{i}"), "description": format!("tool {i}"), "input_schema": {"type": "object"}}))
        .collect();
    json!({"model": "claude-fable-5-1", "max_tokens": 64, "system": format!("Be careful. {}", "rule ".repeat(5000)),
        "tools": tools, "messages": history, "stream": stream})
}

fn post(
    url: &str,
    session: &str,
    body: &Value,
    extra: &[(&str, &str)],
) -> ureq::http::Response<ureq::Body> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .proxy(None)
        .build()
        .into();
    let mut request = agent
        .post(format!("{url}/v1/messages"))
        .header("x-api-key", "sk-test")
        .header("anthropic-version", "2023-06-01")
        .header("content-type", "application/json")
        .header("x-mektpoy-session", session)
        .header(SESSION_HEADER, session);
    for (k, v) in extra {
        request = request.header(*k, *v);
    }
    request.send(body.to_string()).expect("the proxy answers")
}

fn content(response: &ureq::http::Response<ureq::Body>) -> Value {
    serde_json::from_str(
        response
            .headers()
            .get(CONTENT_HEADER)
            .expect("an accepted answer")
            .to_str()
            .unwrap(),
    )
    .unwrap()
}

/// `trials` kills, each mid-stream at a different step, then the same conversation goes on
/// through a restarted proxy on the same store (`sqlite:PATH` or `postgres://...`).
fn kill_and_go_on(trials: usize, store: &str) {
    let standin = format!("http://{}", mektpoy_standin::start("127.0.0.1:0").unwrap());
    let session = format!("kill-{}", std::process::id());
    let mut proxy = ProxyProcess::start(store, &standin);
    let mut history: Vec<Value> = Vec::new();
    let mut cached_after_restart = 0;
    for step in 0..trials * 2 {
        history.push(json!({"role": "user", "content": format!("step {step}")}));
        // The tool list changes at every step after a signed thinking block: sent as is, a
        // request the provider refuses.
        let tools = 2 + step % 3;
        if step % 2 == 1 {
            // Killed once the client has the first bytes of the answer.
            let response = post(&proxy.url, &session, &body(&history, tools, true), &[]);
            assert_eq!(response.status(), 200);
            let mut reader = BufReader::new(response.into_body().into_reader());
            let mut first = String::new();
            reader.read_line(&mut first).unwrap();
            proxy.kill();
            proxy = ProxyProcess::start(store, &standin);
            // The client retries the request whose answer it did not get whole.
        }
        let response = post(&proxy.url, &session, &body(&history, tools, false), &[]);
        let status = response.status();
        let cached: u64 = response
            .headers()
            .get(CACHED_BYTES_HEADER)
            .and_then(|v| v.to_str().ok()?.parse().ok())
            .unwrap_or(0);
        if status != 200 {
            let text = response.into_body().read_to_string().unwrap();
            panic!("step {step}: refused after a kill: {status} {text}");
        }
        if step % 2 == 1 {
            cached_after_restart += cached;
        }
        history.push(json!({"role": "assistant", "content": content(&response)}));
    }
    assert!(
        cached_after_restart > 0,
        "the cache is kept across restarts"
    );

    // The log: whole batches only, every message once, and it reads back.
    proxy.kill();
    let stored = mektpoy_proxy::Store::connect(store).unwrap();
    let keys = stored.conversations().unwrap();
    assert_eq!(keys.len(), 1, "one conversation: {keys:?}");
    let bytes = stored.load(&keys[0]).unwrap().unwrap();
    let loaded = Session::load_bytes(&bytes).expect("the stored log loads");
    assert!(loaded.torn_tail.is_none(), "no half-written batch");
    let users = loaded
        .session
        .messages()
        .iter()
        .filter(|m| m.role() == mektpoy::vocab::Role::User)
        .count();
    assert_eq!(users, trials * 2, "every user turn once");
}

fn sqlite(dir: &tempfile::TempDir) -> String {
    format!("sqlite:{}", dir.path().join("proxy.db").display())
}

#[test]
fn a_proxy_killed_mid_stream_restarts_and_the_conversation_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    kill_and_go_on(3, &sqlite(&dir));
}

/// The same on Postgres (a throwaway cluster; see `support`).
#[test]
fn a_proxy_killed_mid_stream_restarts_on_the_same_postgres_and_goes_on() {
    let Some(pg) = support::cluster() else { return };
    kill_and_go_on(3, &pg.url());
}

/// The long run: `cargo test -p mektpoy-proxy --test faults -- --ignored`.
#[test]
#[ignore]
fn fifty_kills_mid_stream() {
    let dir = tempfile::tempdir().unwrap();
    kill_and_go_on(50, &sqlite(&dir));
}

/// The long run on Postgres.
#[test]
#[ignore]
fn fifty_kills_mid_stream_on_postgres() {
    let Some(pg) = support::cluster() else { return };
    kill_and_go_on(50, &pg.url());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_cut_off_mid_stream_logs_no_half_answer_and_a_retry_goes_on() {
    let standin = format!("http://{}", mektpoy_standin::start("127.0.0.1:0").unwrap());
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite:{}", dir.path().join("p.db").display());
    let url = tokio::task::spawn_blocking(move || {
        let proxy = ProxyProcess::start(&store, &standin);
        let history = vec![json!({"role": "user", "content": "hi"})];
        let cut = post(
            &proxy.url,
            "cut",
            &body(&history, 2, true),
            &[(CUT_OFF_HEADER, "true")],
        );
        let text = cut.into_body().read_to_string().unwrap_or_default();
        assert!(!text.contains("message_stop"), "the client sees the cut");
        let retry = post(&proxy.url, "cut", &body(&history, 3, false), &[]);
        assert_eq!(retry.status(), 200, "the retry goes on");
        let export = ureq::get(format!("{}/mektpoy/sessions/{}/log.jsonl", proxy.url, "x")).call();
        assert!(
            export.is_err(),
            "another key's or an unknown session is not found"
        );
        proxy.url.clone()
    })
    .await
    .unwrap();
    assert!(url.starts_with("http://127.0.0.1:"));
}

/// Every stored conversation, with its length and a hash of its bytes.
fn snapshot(store: &mektpoy_proxy::Store) -> std::collections::BTreeMap<String, (usize, u64)> {
    use std::hash::{Hash, Hasher};
    store
        .conversations()
        .unwrap()
        .into_iter()
        .map(|c| {
            let bytes = store.load(&c).unwrap().unwrap_or_default();
            let mut h = std::collections::hash_map::DefaultHasher::new();
            bytes.hash(&mut h);
            (c, (bytes.len(), h.finish()))
        })
        .collect()
}

/// Stands for a body over the proxy's 32 MiB limit.
const OVER: &str = "(over the limit)";

/// A POST of a body one byte over the 32 MiB limit, sent whole: the proxy reads it all before
/// it answers, so the connection closes cleanly (a longer body's rest would be cut off by the
/// proxy's close, and with it, at times, the answer).
fn over_the_limit(url: &str, path: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(url.trim_start_matches("http://")).unwrap();
    let length = (32 << 20) + 1;
    let head = "{\"model\":\"";
    write!(
        stream,
        "POST {path} HTTP/1.1\r\nhost: proxy\r\nx-api-key: sk-test\r\ncontent-type: application/json\r\ncontent-length: {length}\r\n\r\n{head}"
    )
    .unwrap();
    stream.write_all(&vec![b'x'; length - head.len()]).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut reader = BufReader::new(stream);
    let mut status = String::new();
    reader.read_line(&mut status).unwrap();
    let mut length = 0;
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = v.trim().parse().unwrap();
        }
        if line == "\r\n" {
            break;
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).unwrap();
    let code = status.split(' ').nth(1).unwrap().parse().unwrap();
    (code, String::from_utf8(body).unwrap())
}

/// Hostile bodies on both APIs, sent on conversations that exist: each gets its API's error
/// shape with the proxy's message and changes no stored conversation. A forged conversation id
/// or another key's id names another conversation; another key's log is not exported.
#[test]
fn hostile_bodies_get_the_providers_error_shape_and_change_nothing() {
    let standin = format!("http://{}", mektpoy_standin::start("127.0.0.1:0").unwrap());
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(&dir);
    let chat_upstream = format!("openai-compatible={standin}");
    let proxy = ProxyProcess::start_with(&store, &standin, &["--upstream", &chat_upstream]);
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .proxy(None)
        .build()
        .into();
    let send = |path: &str, key: &str, session: &str, body: String| {
        if body == OVER {
            return over_the_limit(&proxy.url, path);
        }
        let mut r = agent
            .post(format!("{}{path}", proxy.url))
            .header("x-api-key", key)
            .header("x-mektpoy-session", session)
            .header("content-type", "application/json")
            .send(body)
            .unwrap();
        let status = r.status().as_u16();
        (status, r.body_mut().read_to_string().unwrap_or_default())
    };
    // A conversation on each API to keep.
    let messages = |m: Value| json!({"model": "claude-opus-5", "max_tokens": 8, "messages": m});
    let chat = |m: Value| json!({"model": "deepseek-v4-pro", "messages": m});
    let hello = json!([{"role": "user", "content": "hello"}]);
    let (status, text) = send(
        "/v1/messages",
        "sk-test",
        "hostile",
        messages(hello.clone()).to_string(),
    );
    assert_eq!(status, 200, "{text}");
    let (status, text) = send(
        "/v1/chat/completions",
        "sk-test",
        "hostile-chat",
        chat(hello.clone()).to_string(),
    );
    assert_eq!(status, 200, "{text}");
    let stored = mektpoy_proxy::Store::connect(&store).unwrap();
    let kept = snapshot(&stored);
    assert_eq!(kept.len(), 2);

    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    // A schema nested past serde_json's recursion limit (128): a clear refusal.
    let mut schema = json!({"type": "string"});
    for _ in 0..70 {
        schema = json!({"type": "object", "properties": {"a": schema}});
    }
    // More deferred tools than the provider takes (Anthropic: 10,000; wire/limits.rs).
    let many: Vec<Value> = (0..10_001)
        .map(|i| json!({"name": format!("t{i}"), "input_schema": {"type": "object"}, "defer_loading": true}))
        .collect();
    let user = |text: &str| json!([{"role": "user", "content": text}]);
    let m = |v: Value| v.to_string();
    // On both APIs, each model its API's.
    let common = |model: &str, wrap: &dyn Fn(Value) -> Value| -> Vec<(&str, String, u16)> {
        vec![
            ("not JSON", "{".to_owned(), 400),
            ("not an object", "[]".to_owned(), 400),
            (
                "a number for the model",
                m(json!({"model": 3, "messages": hello})),
                400,
            ),
            (
                "a string for the messages",
                m(json!({"model": model, "messages": "hello"})),
                400,
            ),
            (
                "a number for a content",
                m(wrap(json!([{"role": "user", "content": 7}]))),
                400,
            ),
            (
                "an unknown role",
                m(wrap(json!([{"role": "robot", "content": "x"}]))),
                400,
            ),
            ("no messages", m(wrap(json!([]))), 400),
            ("nested past the limit", deep.clone(), 400),
            ("over the body limit", OVER.to_owned(), 413),
        ]
    };
    let mut messages_cases = common("claude-opus-5", &messages);
    let tools = |tools: Value| json!({"model": "claude-opus-5", "max_tokens": 8, "messages": user("x"), "tools": tools});
    messages_cases.extend([
        ("a string for the tools", m(tools(json!("all"))), 400),
        (
            "a tool name the provider refuses",
            m(tools(
                json!([{"name": "github.search", "input_schema": {"type": "object"}}]),
            )),
            400,
        ),
        (
            "a schema nested past the limit",
            m(tools(json!([{"name": "deep", "input_schema": schema}]))),
            400,
        ),
        ("too many deferred tools", m(tools(Value::Array(many))), 400),
    ]);
    let mut chat_cases = common("deepseek-v4-pro", &chat);
    chat_cases.push((
        "a tool call without its function",
        m(chat(json!([{"role": "user", "content": "x"},
            {"role": "assistant", "tool_calls": [{"id": "c", "type": "function"}]}]))),
        400,
    ));
    for (path, session, cases) in [
        ("/v1/messages", "hostile", messages_cases),
        ("/v1/chat/completions", "hostile-chat", chat_cases),
    ] {
        for (what, body, want) in cases {
            let (status, text) = send(path, "sk-test", session, body);
            assert_eq!(status, want, "{path} {what}: {text}");
            let v: Value = serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("{path} {what}: not the error shape ({e}): {text}"));
            let message = if path == "/v1/messages" {
                assert_eq!(v["type"], "error", "{what}: {v}");
                let kind = if want == 413 {
                    "request_too_large"
                } else {
                    "invalid_request_error"
                };
                assert_eq!(v["error"]["type"], kind, "{what}: {v}");
                &v["error"]["message"]
            } else {
                assert_eq!(v["error"]["type"], "invalid_request_error", "{what}: {v}");
                assert!(v["error"].get("param").is_some() && v["error"].get("code").is_some());
                &v["error"]["message"]
            };
            let message = message.as_str().unwrap_or_default();
            assert!(
                message.starts_with("mektpoy-proxy: "),
                "{path} {what}: {message}"
            );
            assert!(
                message.len() > "mektpoy-proxy: ".len() + 10,
                "{path} {what}: {message}"
            );
            assert_eq!(
                snapshot(&stored),
                kept,
                "{path} {what} changed a stored conversation"
            );
        }
    }

    // Counted by API and status, the 413s too.
    let metrics = agent
        .get(format!("{}/metrics", proxy.url))
        .call()
        .unwrap()
        .body_mut()
        .read_to_string()
        .unwrap();
    for api in ["messages", "chat"] {
        let line = format!("mektpoy_proxy_requests_total{{api=\"{api}\",status=\"413\"}} 1");
        assert!(metrics.lines().any(|l| l == line), "{line} in\n{metrics}");
    }

    // Forged ids: the other conversation's whole key as an id, and its id under another key,
    // each name a conversation of their own; the kept ones are untouched.
    let victim = kept
        .keys()
        .find(|k| k.ends_with(":session:hostile"))
        .unwrap()
        .clone();
    for (key, session) in [
        ("sk-test", victim.as_str()),
        ("sk-other", "hostile"),
        ("sk-other", victim.as_str()),
    ] {
        let (status, text) = send(
            "/v1/messages",
            key,
            session,
            messages(user("forged")).to_string(),
        );
        assert_eq!(status, 200, "{text}");
    }
    let now = snapshot(&stored);
    assert_eq!(
        now.len(),
        kept.len() + 3,
        "three new conversations: {:?}",
        now.keys()
    );
    for (k, bytes) in &kept {
        assert_eq!(now.get(k), Some(bytes), "{k} untouched");
    }
    let export = |key: &str| {
        let mut r = agent
            .get(format!("{}/mektpoy/sessions/{victim}/log.jsonl", proxy.url))
            .header("x-api-key", key)
            .call()
            .unwrap();
        (
            r.status().as_u16(),
            r.body_mut().read_to_vec().unwrap_or_default(),
        )
    };
    let (status, bytes) = export("sk-test");
    assert_eq!(status, 200);
    assert_eq!(
        bytes.len(),
        kept[&victim].0,
        "the owner's export is the stored log"
    );
    let (status, body) = export("sk-other");
    assert_eq!(status, 404, "another key's log");
    let v: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(v["error"]["type"], "not_found_error");
}

/// A slow upstream: each request goes to `upstream` (`host:port` of the stand-in, which closes
/// every connection after its answer), and the answer comes back one line every `pause`.
fn slow_relay(upstream: String, pause: Duration) -> String {
    watched_relay(upstream, pause, false).0
}

/// A request header the proxy passes upstream: `wait` makes [`watched_relay`] wait before the
/// answer, `stream` only slows its lines.
const SLOW: &str = "x-test-slow";

/// As [`slow_relay`], but only requests carrying [`SLOW`] are slow (when `marked`), a `wait`
/// one waits `pause` before its first line (watching its connection: one closed ends the wait
/// at once), and the count is how many connections the proxy closed before their answer's end.
fn watched_relay(upstream: String, pause: Duration, marked: bool) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let closed = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&closed);
    std::thread::spawn(move || {
        for client in listener.incoming() {
            let Ok(mut client) = client else { continue };
            let upstream = upstream.clone();
            let count = Arc::clone(&count);
            std::thread::spawn(move || {
                let Some((request, head)) = read_request(&client) else {
                    return;
                };
                let pause = if !marked || head.contains(&format!("{SLOW}:")) {
                    pause
                } else {
                    Duration::ZERO
                };
                // Nothing to read until the answer's end: a read that ends is the proxy gone.
                let gone = |client: &mut TcpStream| {
                    if pause.is_zero() || !marked {
                        std::thread::sleep(pause);
                        return false;
                    }
                    client.set_read_timeout(Some(pause)).unwrap();
                    let closed = match client.read(&mut [0; 1]) {
                        Ok(n) => n == 0,
                        Err(e) => !matches!(
                            e.kind(),
                            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                        ),
                    };
                    if closed {
                        count.fetch_add(1, Ordering::SeqCst);
                    }
                    closed
                };
                if head.contains(&format!("{SLOW}: wait")) && gone(&mut client) {
                    return;
                }
                let mut up = TcpStream::connect(&upstream).unwrap();
                up.write_all(&request).unwrap();
                let mut answer = Vec::new();
                up.read_to_end(&mut answer).unwrap();
                // A marked answer's head goes at once: only its body is slow.
                let head = match answer.windows(4).position(|w| w == b"\r\n\r\n") {
                    Some(end) if marked => end + 4,
                    _ => 0,
                };
                if client.write_all(&answer[..head]).is_err() {
                    return;
                }
                for line in answer[head..].split_inclusive(|&b| b == b'\n') {
                    if client
                        .write_all(line)
                        .and_then(|()| client.flush())
                        .is_err()
                    {
                        count.fetch_add(1, Ordering::SeqCst);
                        return;
                    }
                    if gone(&mut client) {
                        return;
                    }
                }
            });
        }
    });
    (format!("http://{addr}"), closed)
}

/// One request from `client`: its bytes, and its head in lower case.
fn read_request(client: &TcpStream) -> Option<(Vec<u8>, String)> {
    let mut reader = BufReader::new(client.try_clone().unwrap());
    let mut request = Vec::new();
    let mut length = 0;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return None;
        }
        request.extend_from_slice(line.as_bytes());
        let lower = line.to_ascii_lowercase();
        if let Some(v) = lower.strip_prefix("content-length:") {
            length = v.trim().parse().unwrap();
        }
        if line == "\r\n" {
            break;
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).unwrap();
    let head = String::from_utf8_lossy(&request).to_ascii_lowercase();
    request.extend_from_slice(&body);
    Some((request, head))
}

/// An upstream whose end of stream comes `hold` after its last event: each request goes to
/// `upstream` (the stand-in), whose whole answer is sent at once, then the connection is held.
fn holding_relay(upstream: String, hold: Duration) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for client in listener.incoming() {
            let Ok(mut client) = client else { continue };
            let upstream = upstream.clone();
            std::thread::spawn(move || {
                let Some((request, _)) = read_request(&client) else {
                    return;
                };
                let mut up = TcpStream::connect(&upstream).unwrap();
                up.write_all(&request).unwrap();
                let mut answer = Vec::new();
                up.read_to_end(&mut answer).unwrap();
                if client
                    .write_all(&answer)
                    .and_then(|()| client.flush())
                    .is_ok()
                {
                    std::thread::sleep(hold);
                }
            });
        }
    });
    format!("http://{addr}")
}

/// Codex (0.171) closes a stream once it reads `response.completed`, before the upstream's
/// end of stream: the answer, whole, is logged all the same. A client gone before the end
/// event leaves none (`a_client_gone_from_a_slow_upstream_…`).
#[test]
fn an_answer_whole_when_the_client_leaves_is_logged() {
    let standin = mektpoy_standin::start("127.0.0.1:0").unwrap().to_string();
    let upstream = holding_relay(standin, Duration::from_secs(30));
    let dir = tempfile::tempdir().unwrap();
    let openai = format!("openai={upstream}/v1");
    let proxy = ProxyProcess::start_with(&sqlite(&dir), &upstream, &["--upstream", &openai]);
    let agent: ureq::Agent = ureq::Agent::config_builder().proxy(None).build().into();
    let body = json!({"model": "gpt-5.4", "input": "hi", "stream": true, "store": false});
    let response = agent
        .post(format!("{}/v1/responses", proxy.url))
        .header("authorization", "Bearer sk-test")
        .header("x-mektpoy-session", "whole")
        .header(SESSION_HEADER, "whole")
        .header("content-type", "application/json")
        .send(body.to_string())
        .unwrap();
    let mut reader = BufReader::new(response.into_body().into_reader());
    loop {
        let mut line = String::new();
        assert!(reader.read_line(&mut line).unwrap() > 0, "the stream ended");
        if line.starts_with("data:") && line.contains(r#""type":"response.completed""#) {
            break;
        }
    }
    drop(reader);
    let id = format!(
        "{}:session:whole",
        mektpoy_proxy::conversation::scope(b"sk-test")
    );
    let log = || {
        agent
            .get(format!("{}/mektpoy/sessions/{id}/log.jsonl", proxy.url))
            .header("authorization", "Bearer sk-test")
            .call()
            .map(|mut r| r.body_mut().read_to_string().unwrap())
            .unwrap_or_default()
    };
    eventually("the whole answer is logged", || {
        log().contains(r#""type":"assistant/message""#)
    });
    proxy.terminate();
}

/// Waits (at most 10 s) until `done`.
fn eventually(what: &str, done: impl Fn() -> bool) {
    let until = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < until, "{what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A slow upstream (30 s before an answer, or between its lines) and a client that leaves,
/// once while the proxy waits for the answer and once mid-stream: each time the proxy closes
/// its upstream connection at once (the upstream sees it), logs no half answer and keeps no
/// task holding the conversation: the client's retry on the same conversation is answered at
/// once, and the log holds each turn once.
#[test]
fn a_client_gone_from_a_slow_upstream_is_propagated_and_the_retry_goes_on_at_once() {
    let standin = mektpoy_standin::start("127.0.0.1:0").unwrap().to_string();
    let (upstream, closed) = watched_relay(standin, Duration::from_secs(30), true);
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(&dir);
    let log = dir.path().join("proxy.log");
    let proxy = ProxyProcess::start_logging(&store, &upstream, &["--log-format", "json"], &log);
    let impatient: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_millis(500)))
        .proxy(None)
        .build()
        .into();
    let mut history = vec![json!({"role": "user", "content": "step 0"})];
    for (step, leave) in ["wait", "stream"].into_iter().enumerate() {
        if leave == "wait" {
            // Mid-wait: the client gives up before the first byte of the answer.
            let gone = impatient
                .post(format!("{}/v1/messages", proxy.url))
                .header("x-api-key", "sk-test")
                .header("x-mektpoy-session", "gone")
                .header(SLOW, "wait")
                .send(body(&history, 2, true).to_string());
            assert!(gone.is_err(), "the client timed out");
        } else {
            // Mid-stream: the first line, then the client leaves.
            let response = post(
                &proxy.url,
                "gone",
                &body(&history, 2, true),
                &[(SLOW, "stream")],
            );
            assert_eq!(response.status(), 200);
            let mut reader = BufReader::new(response.into_body().into_reader());
            let mut first = String::new();
            reader.read_line(&mut first).unwrap();
            assert!(!first.is_empty());
        }
        eventually(
            &format!("{leave}: the upstream sees its connection closed"),
            || closed.load(Ordering::SeqCst) == step + 1,
        );
        // The retry, on the same conversation: answered at once (the relay would have held
        // a leaked request 30 s), and the conversation goes on.
        let asked = Instant::now();
        let retry = post(&proxy.url, "gone", &body(&history, 2, false), &[]);
        assert_eq!(retry.status(), 200, "{leave}: the retry goes on");
        assert!(
            asked.elapsed() < Duration::from_secs(10),
            "{leave}: the conversation was still held: {:?}",
            asked.elapsed()
        );
        history.push(json!({"role": "assistant", "content": content(&retry)}));
        history.push(json!({"role": "user", "content": format!("step {}", step + 1)}));
    }
    proxy.terminate();
    let mut proxy = proxy;
    assert!(proxy.child.wait().unwrap().success());

    // Each turn once, each answer the retry's: no half answer.
    let stored = mektpoy_proxy::Store::connect(&store).unwrap();
    let keys = stored.conversations().unwrap();
    assert_eq!(keys.len(), 1, "{keys:?}");
    let loaded = Session::load_bytes(&stored.load(&keys[0]).unwrap().unwrap()).unwrap();
    assert!(loaded.torn_tail.is_none());
    use mektpoy::vocab::Role::{Assistant, System, User};
    let roles: Vec<_> = loaded
        .session
        .messages()
        .iter()
        .map(|m| m.role())
        .filter(|r| *r != System)
        .collect();
    assert_eq!(roles, [User, Assistant, User, Assistant]);
    // One line per request; the two left are said so, and logged nothing.
    let lines: Vec<Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .filter(|l: &Value| l["message"] == "request")
        .collect();
    let answers: Vec<&str> = lines
        .iter()
        .map(|l| l["answer"].as_str().unwrap())
        .collect();
    assert_eq!(
        answers,
        ["client_gone", "logged", "client_gone", "logged"],
        "{lines:?}"
    );
    assert_eq!(
        lines[0]["status"],
        Value::Null,
        "left before the answer's status"
    );
    assert_eq!(lines[2]["status"], 200, "left mid-stream");
}

/// SIGTERM while an answer is being streamed from a slow upstream: the proxy stops accepting,
/// the client gets the whole stream, the answer is logged, and the proxy exits 0.
#[test]
fn sigterm_mid_stream_finishes_the_stream_logs_it_and_exits_0() {
    let standin = mektpoy_standin::start("127.0.0.1:0").unwrap().to_string();
    let upstream = slow_relay(standin, Duration::from_millis(40));
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(&dir);
    let mut proxy = ProxyProcess::start(&store, &upstream);
    let history = vec![json!({"role": "user", "content": "a slow answer, please"})];
    let response = post(&proxy.url, "term", &body(&history, 2, true), &[]);
    assert_eq!(response.status(), 200);
    let mut reader = BufReader::new(response.into_body().into_reader());
    let mut first = String::new();
    reader.read_line(&mut first).unwrap();
    let signalled = Instant::now();
    proxy.terminate();
    // No new connections once the signal is taken, while the stream goes on.
    std::thread::sleep(Duration::from_millis(300));
    let address = proxy.url.trim_start_matches("http://").to_owned();
    assert!(
        TcpStream::connect(&address).is_err(),
        "the proxy stops accepting"
    );
    let mut rest = String::new();
    reader
        .read_to_string(&mut rest)
        .expect("the stream is not cut");
    assert!(
        signalled.elapsed() > Duration::from_millis(400),
        "the stream was still going when the signal came"
    );
    assert!(rest.contains("message_stop"), "the whole stream: {rest}");
    let status = proxy.child.wait().unwrap();
    assert!(status.success(), "exit status {status:?}");

    let stored = mektpoy_proxy::Store::connect(&store).unwrap();
    let keys = stored.conversations().unwrap();
    assert_eq!(keys.len(), 1, "{keys:?}");
    let bytes = stored.load(&keys[0]).unwrap().unwrap();
    let loaded = Session::load_bytes(&bytes).expect("the stored log loads");
    assert!(loaded.torn_tail.is_none());
    let roles: Vec<_> = loaded.session.messages().iter().map(|m| m.role()).collect();
    assert_eq!(
        roles.last(),
        Some(&mektpoy::vocab::Role::Assistant),
        "the streamed answer is logged: {roles:?}"
    );
}

/// A stream slower than `--shutdown-grace`: the proxy exits 0 when the grace period is over,
/// the client sees the cut, and the log keeps no half answer.
#[test]
fn sigterm_waits_at_most_the_shutdown_grace() {
    let standin = mektpoy_standin::start("127.0.0.1:0").unwrap().to_string();
    let upstream = slow_relay(standin, Duration::from_millis(400));
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(&dir);
    let mut proxy = ProxyProcess::start_with(&store, &upstream, &["--shutdown-grace", "1"]);
    let history = vec![json!({"role": "user", "content": "a very slow answer"})];
    let response = post(&proxy.url, "grace", &body(&history, 2, true), &[]);
    assert_eq!(response.status(), 200);
    let mut reader = BufReader::new(response.into_body().into_reader());
    let mut first = String::new();
    reader.read_line(&mut first).unwrap();
    let signalled = Instant::now();
    proxy.terminate();
    let status = proxy.child.wait().unwrap();
    let waited = signalled.elapsed();
    assert!(status.success(), "exit status {status:?}");
    assert!(
        waited >= Duration::from_millis(900) && waited < Duration::from_secs(4),
        "exited after {waited:?}"
    );
    let mut rest = String::new();
    let _ = reader.read_to_string(&mut rest);
    assert!(!rest.contains("message_stop"), "the client sees the cut");

    let stored = mektpoy_proxy::Store::connect(&store).unwrap();
    for key in stored.conversations().unwrap() {
        let bytes = stored.load(&key).unwrap().unwrap();
        let loaded = Session::load_bytes(&bytes).expect("the stored log loads");
        assert!(loaded.torn_tail.is_none(), "no half-written batch");
        assert!(
            loaded
                .session
                .messages()
                .iter()
                .all(|m| m.role() != mektpoy::vocab::Role::Assistant),
            "no half answer logged"
        );
    }
}
