//! Faults: a proxy killed mid-stream (SIGKILL) and restarted on the same store, a proxy
//! stopped mid-stream (SIGTERM: the stream finishes first), an upstream cut off mid-stream, and
//! hostile bodies. The conversation goes on every time: nothing refused, nothing lost,
//! duplicated or half-written in the log.

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
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

#[test]
fn hostile_bodies_get_the_providers_error_shape_and_change_nothing() {
    let standin = format!("http://{}", mektpoy_standin::start("127.0.0.1:0").unwrap());
    let dir = tempfile::tempdir().unwrap();
    let proxy = ProxyProcess::start(
        &format!("sqlite:{}", dir.path().join("p.db").display()),
        &standin,
    );
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .proxy(None)
        .build()
        .into();
    let send = |body: String| {
        let mut r = agent
            .post(format!("{}/v1/messages", proxy.url))
            .header("x-api-key", "sk-test")
            .header("x-mektpoy-session", "hostile")
            .header("content-type", "application/json")
            .send(body)
            .unwrap();
        let status = r.status().as_u16();
        (status, r.body_mut().read_to_string().unwrap_or_default())
    };
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    for (body, want) in [
        ("{".to_owned(), 400),
        ("[]".to_owned(), 400),
        (json!({"model": 3, "messages": []}).to_string(), 400),
        (json!({"model": "claude-opus-5", "max_tokens": 8, "messages": [{"role": "robot", "content": "x"}]}).to_string(), 400),
        (json!({"model": "claude-opus-5", "max_tokens": 8, "messages": [{"role": "user", "content": "x"}], "tools": [{"name": "github.search", "input_schema": {"type": "object"}}]}).to_string(), 400),
        (json!({"model": "claude-opus-5", "max_tokens": 8, "messages": []}).to_string(), 400),
        (deep, 400),
        (format!("{{\"model\":\"{}\"}}", "x".repeat(33 << 20)), 413),
    ] {
        let (status, text) = send(body);
        assert_eq!(status, want, "{text}");
        if status == 400 {
            let v: Value = serde_json::from_str(&text).unwrap();
            assert_eq!(v["type"], "error");
            assert_eq!(v["error"]["type"], "invalid_request_error");
        }
    }
    // None of it reached the store.
    let db = rusqlite::Connection::open(dir.path().join("p.db")).unwrap();
    let rows: i64 = db
        .query_row("SELECT count(*) FROM batches", [], |r| r.get(0))
        .unwrap();
    assert_eq!(rows, 0);
}

/// A slow upstream: each request goes to `upstream` (`host:port` of the stand-in, which closes
/// every connection after its answer), and the answer comes back one line every `pause`.
fn slow_relay(upstream: String, pause: Duration) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for client in listener.incoming() {
            let Ok(mut client) = client else { continue };
            let upstream = upstream.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(client.try_clone().unwrap());
                let mut request = Vec::new();
                let mut length = 0;
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
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
                request.extend_from_slice(&body);
                let mut up = TcpStream::connect(&upstream).unwrap();
                up.write_all(&request).unwrap();
                let mut answer = Vec::new();
                up.read_to_end(&mut answer).unwrap();
                for line in answer.split_inclusive(|&b| b == b'\n') {
                    if client
                        .write_all(line)
                        .and_then(|()| client.flush())
                        .is_err()
                    {
                        return;
                    }
                    std::thread::sleep(pause);
                }
            });
        }
    });
    format!("http://{addr}")
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
