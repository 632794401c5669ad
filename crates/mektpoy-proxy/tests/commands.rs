//! `mektpoy-proxy report` and `purge` on a store a proxy wrote (SQLite, Postgres), and a
//! store that cannot be opened.

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
