//! `mektpoy-proxy report` and `purge` on a store a proxy wrote (SQLite, Postgres), a store
//! that cannot be opened, and `--config` files.

mod support;

use std::process::Command;

use mektpoy_proxy::demo::{Rig, Speaks, conversation};

fn run(args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_mektpoy-proxy"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn report_replays_each_stored_conversation_and_purge_deletes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.db");
    let rig = Rig::start(&path).await.unwrap();
    report_and_purge(&rig, &format!("sqlite:{}", path.display())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn report_and_purge_on_postgres() {
    let Some(pg) = support::cluster() else { return };
    let store = mektpoy_proxy::Store::connect(&pg.url()).unwrap();
    let rig = Rig::start_on(store, Default::default()).await.unwrap();
    report_and_purge(&rig, &pg.url()).await;
}

async fn report_and_purge(rig: &Rig, store: &str) {
    for (session, model) in [("a", "claude-opus-5"), ("b", "deepseek-flash")] {
        let met = conversation(
            &rig.url,
            session,
            model,
            6,
            Speaks::Messages { stream: false },
        )
        .await
        .unwrap();
        assert_eq!(met.refused, 0);
    }
    let (ok, text) = run(&["report", "--store", store]);
    assert!(ok, "{text}");
    assert!(
        text.contains("anthropic/claude-opus-5: 6 requests"),
        "{text}"
    );
    assert!(
        text.contains("deepseek/deepseek-flash: 6 requests"),
        "{text}"
    );
    assert!(!text.contains("sk-demo"), "no key in a report");

    let key = mektpoy_proxy::Store::connect(store)
        .unwrap()
        .conversations()
        .unwrap()[0]
        .clone();
    let (ok, text) = run(&["purge", "--store", store, "--conversation", &key]);
    assert!(ok && text.contains("1 conversations deleted"), "{text}");
    let (ok, text) = run(&["purge", "--store", store]);
    assert!(!ok && text.contains("--older-than"), "{text}");
    let (ok, text) = run(&["purge", "--store", store, "--all"]);
    assert!(ok && text.contains("1 conversations deleted"), "{text}");
}

#[test]
fn a_store_that_cannot_be_opened_is_a_clear_error_without_its_password() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    // Nothing listens there any more: refused at once.
    let (ok, text) = run(&[
        "--store",
        &format!("postgres://proxy:hunter2@127.0.0.1:{port}/db"),
    ]);
    assert!(!ok, "{text}");
    assert!(text.contains("cannot open the store"), "{text}");
    assert!(text.contains("proxy:***@"), "{text}");
    assert!(!text.contains("hunter2"), "{text}");
    let (ok, text) = run(&["--store", "mysql://x"]);
    assert!(!ok && text.contains("sqlite:PATH or postgres://"), "{text}");
}

/// A `--config` file sets what the flags set (a proxy served from one answers through the
/// upstream it names); a flag wins over the file, wherever it is given; a bad line is named.
#[test]
fn a_config_file_is_equivalent_to_the_flags_and_the_flags_win() {
    use std::io::{BufRead, BufReader};
    let dir = tempfile::tempdir().unwrap();
    let from_file = dir.path().join("file.db");
    let from_flag = dir.path().join("flag.db");
    let standin = format!("http://{}", mektpoy_standin::start("127.0.0.1:0").unwrap());
    let config = dir.path().join("proxy.conf");
    std::fs::write(
        &config,
        format!(
            "# the proxy's settings\nlisten = 127.0.0.1:0\n\nupstream = anthropic={standin}\n\
             store = \"sqlite:{}\"\nidle = 60\nmax-sessions = 100\nshutdown-grace = 5\n",
            from_file.display()
        ),
    )
    .unwrap();
    let config = config.display().to_string();

    // A flag before or after `--config` wins over the file.
    let flag_store = format!("sqlite:{}", from_flag.display());
    let (ok, text) = run(&["report", "--store", &flag_store, "--config", &config]);
    assert!(ok, "{text}");
    assert!(from_flag.exists() && !from_file.exists());
    std::fs::remove_file(&from_flag).unwrap();
    let (ok, text) = run(&["report", "--config", &config, "--store", &flag_store]);
    assert!(ok, "{text}");
    assert!(from_flag.exists() && !from_file.exists());

    // Served from the file alone: its address, upstream and store.
    let mut child = Command::new(env!("CARGO_BIN_EXE_mektpoy-proxy"))
        .args(["--config", &config])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line.trim().rsplit(' ').next().unwrap().to_owned();
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .proxy(None)
        .build()
        .into();
    let answer = agent
        .post(format!("{url}/v1/messages"))
        .header("x-api-key", "sk-test")
        .header("anthropic-version", "2023-06-01")
        .header("x-mektpoy-session", "config")
        .header(mektpoy_standin::SESSION_HEADER, "config")
        .send(
            serde_json::json!({"model": "claude-opus-5", "max_tokens": 8,
                "messages": [{"role": "user", "content": "hi"}]})
            .to_string(),
        )
        .unwrap();
    let status = answer.status();
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(status, 200);
    assert!(from_file.exists(), "the file's store");

    // A bad line is named; so is a missing file.
    let bad = dir.path().join("bad.conf");
    std::fs::write(&bad, "listen = 127.0.0.1:0\n\ncolour = blue\n").unwrap();
    let (ok, text) = run(&["report", "--config", &bad.display().to_string()]);
    assert!(
        !ok && text.contains("bad.conf:3: unknown key `colour`"),
        "{text}"
    );
    std::fs::write(&bad, "idle = soon\n").unwrap();
    let (ok, text) = run(&["report", "--config", &bad.display().to_string()]);
    assert!(
        !ok && text.contains("bad.conf:1: --idle soon: a number expected"),
        "{text}"
    );
    std::fs::write(&bad, "store\n").unwrap();
    let (ok, text) = run(&["report", "--config", &bad.display().to_string()]);
    assert!(
        !ok && text.contains("bad.conf:1: `store`: KEY = VALUE expected"),
        "{text}"
    );
    let (ok, text) = run(&["report", "--config", "/nonexistent/proxy.conf"]);
    assert!(!ok && text.contains("cannot read it"), "{text}");
}

/// The log: one line per request with the conversation's scoped key, route, outcome,
/// statuses and times, refusals at `warn`; never the API key, and no body unless
/// `--log-bodies` (then the bodies, still never the key). Messages (streamed and not), chat,
/// a refusal quoting the client's values and a body that is not JSON, each carrying the key
/// and the text.
#[test]
fn the_log_never_holds_the_key_nor_a_body_unless_asked() {
    use serde_json::{Value, json};
    const KEY: &str = "sk-ant-api03-NEVER-IN-A-LOG-7f3a";
    const TEXT: &str = "the purple elephant sleeps at noon";
    let standin = format!("http://{}", mektpoy_standin::start("127.0.0.1:0").unwrap());
    let dir = tempfile::tempdir().unwrap();
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .proxy(None)
        .build()
        .into();
    let run = |name: &str, extra: &[&str]| -> String {
        let log = dir.path().join(format!("{name}.log"));
        let store = format!("sqlite:{}", dir.path().join(format!("{name}.db")).display());
        let chat_upstream = format!("openai-compatible={standin}");
        let mut args = vec!["--upstream", chat_upstream.as_str()];
        args.extend_from_slice(extra);
        let mut proxy = support::ProxyProcess::start_logging(&store, &standin, &args, &log);
        let send = |path: &str, auth: (&str, String), body: String| {
            let mut r = agent
                .post(format!("{}{path}", proxy.url))
                .header(auth.0, &auth.1)
                .header("anthropic-version", "2023-06-01")
                .header("content-type", "application/json")
                .header("x-mektpoy-session", "logs")
                .send(body)
                .unwrap();
            let status = r.status().as_u16();
            let content = r
                .headers()
                .get(mektpoy_standin::CONTENT_HEADER)
                .and_then(|v| serde_json::from_str::<Value>(v.to_str().ok()?).ok());
            let _ = r.body_mut().read_to_string();
            (status, content)
        };
        let messages = |history: &[Value], stream: bool| {
            json!({"model": "claude-opus-5", "max_tokens": 64, "stream": stream,
                "messages": history})
            .to_string()
        };
        let key = || ("x-api-key", KEY.to_owned());
        let mut history = vec![json!({"role": "user", "content": TEXT})];
        let (status, content) = send("/v1/messages", key(), messages(&history, false));
        assert_eq!(status, 200);
        history.push(json!({"role": "assistant", "content": content.unwrap()}));
        history.push(json!({"role": "user", "content": format!("again: {TEXT}")}));
        assert_eq!(send("/v1/messages", key(), messages(&history, true)).0, 200);
        let chat =
            json!({"model": "deepseek-v4-pro", "messages": [{"role": "user", "content": TEXT}]});
        let bearer = ("authorization", format!("Bearer {KEY}"));
        assert_eq!(
            send("/v1/chat/completions", bearer, chat.to_string()).0,
            200
        );
        let robot = json!({"model": "claude-opus-5", "max_tokens": 8,
            "messages": [{"role": TEXT, "content": TEXT}]});
        assert_eq!(send("/v1/messages", key(), robot.to_string()).0, 400);
        let broken = format!("{{\"model\": \"claude-opus-5\", \"messages\": [\"{TEXT}");
        assert_eq!(send("/v1/messages", key(), broken).0, 400);
        proxy.terminate();
        assert!(proxy.child.wait().unwrap().success());
        std::fs::read_to_string(&log).unwrap()
    };

    let log = run("plain", &["--log-format", "json"]);
    assert!(!log.contains(KEY), "the key in the log:\n{log}");
    assert!(!log.contains("purple"), "a body in the log:\n{log}");
    let lines: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .filter(|l: &Value| l["message"] == "request")
        .collect();
    assert_eq!(lines.len(), 5, "one line per request:\n{log}");
    let scope = mektpoy_proxy::conversation::scope(KEY.as_bytes());
    let first = &lines[0];
    assert_eq!(first["level"], "INFO");
    assert_eq!(first["api"], "messages");
    assert_eq!(first["conversation"], format!("{scope}:session:logs"));
    assert_eq!(first["route"], "anthropic/claude-opus-5");
    assert_eq!(first["outcome"], "extend");
    assert_eq!(first["answer"], "logged");
    assert_eq!(first["status"], 200);
    assert_eq!(first["upstream_status"], 200);
    assert!(first["proxy_us"].as_u64().unwrap() > 0);
    assert!(
        first["store_us"].as_u64().unwrap() > 0,
        "the batch written: {first}"
    );
    assert!(first["store_us"].as_u64() < first["proxy_us"].as_u64());
    assert_eq!(
        lines[1]["answer"], "logged",
        "the streamed answer, at its end"
    );
    assert_eq!(lines[2]["api"], "chat");
    assert_eq!(
        lines[2]["conversation"],
        format!("{scope}:session:logs"),
        "the key as a bearer token is the same caller (decision 131)"
    );
    for refused in &lines[3..] {
        assert_eq!(refused["level"], "WARN", "{refused}");
        assert_eq!(refused["outcome"], "refused");
        assert_eq!(refused["status"], 400);
        assert!(refused["reason"].as_str().is_some_and(|r| !r.is_empty()));
    }
    assert!(lines.iter().all(|l| l.get("body").is_none()));

    let log = run("bodies", &["--log-bodies"]);
    assert!(!log.contains(KEY), "the key in the log:\n{log}");
    assert!(
        log.contains(TEXT),
        "--log-bodies: the bodies in the log:\n{log}"
    );
    let requests = log.lines().filter(|l| l.contains(" request ")).count();
    assert_eq!(requests, 5, "text lines, one per request:\n{log}");
}
