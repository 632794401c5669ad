//! Conversations leave memory when idle and come back from the store; a bound on how many are
//! held; the retention limit deletes old ones from the store.

use std::time::Duration;

use mektpoy_proxy::Settings;
use mektpoy_proxy::demo::{Rig, Speaks, conversation};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_conversation_leaves_memory_and_comes_back_from_the_store() {
    let dir = tempfile::tempdir().unwrap();
    // A long idle time (housekeeping then runs once a minute): this test evicts by hand, every
    // conversation being past the bound of 0.
    let settings = Settings {
        idle: Duration::from_secs(3600),
        max_sessions: 0,
        ..Settings::default()
    };
    let rig = Rig::start_with(&dir.path().join("p.db"), settings)
        .await
        .unwrap();
    let fable = Speaks::Messages { stream: false };
    // Four steps, then out of memory, then the conversation goes on from the store: still
    // nothing refused on a model that binds thinking, and the cache kept.
    let first = conversation(&rig.url, "idle", "claude-fable-5-1", 4, fable)
        .await
        .unwrap();
    assert_eq!(rig.proxy.sessions_in_memory(), 1);
    assert_eq!(rig.proxy.evict_idle(), 1);
    assert_eq!(rig.proxy.sessions_in_memory(), 0);
    let again = conversation(&rig.url, "idle", "claude-fable-5-1", 16, fable)
        .await
        .unwrap();
    assert_eq!(
        first.refused + again.refused,
        0,
        "{:?}",
        again.first_refusal
    );
    assert!(again.cached_bytes > 0);

    // The bound: with the idle time long, only the least recently used leave.
    let rig = Rig::start_with(
        &dir.path().join("q.db"),
        Settings {
            max_sessions: 2,
            ..Settings::default()
        },
    )
    .await
    .unwrap();
    for n in 0..5 {
        conversation(&rig.url, &format!("c{n}"), "claude-opus-5", 1, fable)
            .await
            .unwrap();
    }
    assert_eq!(rig.proxy.sessions_in_memory(), 5);
    assert_eq!(rig.proxy.evict_idle(), 3);
    assert_eq!(rig.proxy.sessions_in_memory(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_retention_limit_deletes_conversations_not_in_memory() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.db");
    // Housekeeping runs every minute with a long idle time: this test drives it by hand.
    let settings = Settings {
        idle: Duration::from_secs(3600),
        max_sessions: 0,
        retention: Some(Duration::ZERO),
        ..Settings::default()
    };
    let rig = Rig::start_with(&path, settings).await.unwrap();
    let speaks = Speaks::Messages { stream: false };
    conversation(&rig.url, "old", "claude-opus-5", 2, speaks)
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert!(
        rig.proxy.apply_retention().unwrap().is_empty(),
        "held in memory: kept"
    );
    assert_eq!(rig.proxy.evict_idle(), 1, "past the bound of 0");
    assert_eq!(rig.proxy.apply_retention().unwrap().len(), 1);
    let store = mektpoy_proxy::Store::open(&path).unwrap();
    assert!(store.conversations().unwrap().is_empty());
}
