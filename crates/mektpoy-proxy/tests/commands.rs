//! `mektpoy-proxy report` and `purge` on a store a proxy wrote.

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
    let store = format!("sqlite:{}", path.display());
    let (ok, text) = run(&["report", "--store", &store]);
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

    let key = mektpoy_proxy::Store::open(&path)
        .unwrap()
        .conversations()
        .unwrap()[0]
        .clone();
    let (ok, text) = run(&["purge", "--store", &store, "--conversation", &key]);
    assert!(ok && text.contains("1 conversations deleted"), "{text}");
    let (ok, text) = run(&["purge", "--store", &store]);
    assert!(!ok && text.contains("--older-than"), "{text}");
    let (ok, text) = run(&["purge", "--store", &store, "--all"]);
    assert!(ok && text.contains("1 conversations deleted"), "{text}");
}
