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
