//! Conversations leave memory when idle and come back from the store; a bound on how many are
//! held; the retention limit deletes old ones from the store.

mod support;

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
    // The bound holds as new conversations arrive, not only when housekeeping runs
    // (decision 148): the least recently used leave to make room, and come back from the
    // store.
    for n in 0..5 {
        conversation(&rig.url, &format!("c{n}"), "claude-opus-5", 1, fable)
            .await
            .unwrap();
        assert!(rig.proxy.sessions_in_memory() <= 2, "after c{n}");
    }
    assert_eq!(rig.proxy.sessions_in_memory(), 2);
    assert_eq!(rig.proxy.evict_idle(), 0);
    let back = conversation(&rig.url, "c0", "claude-opus-5", 3, fable)
        .await
        .unwrap();
    assert_eq!(back.refused, 0, "{:?}", back.first_refusal);
    assert!(back.cached_bytes > 0, "c0 came back from the store");
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

/// Two proxies on one store, a load balancer that alternates between them: each takes the
/// conversation over from what the store holds, nothing is refused, nothing interleaved.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_proxies_on_one_store_take_a_conversation_over_from_each_other() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shared.db");
    let a = Rig::start(&path).await.unwrap();
    let b = Rig::start(&path).await.unwrap();
    support::alternate_over(&a, &b, &mektpoy_proxy::Store::open(&path).unwrap()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_requests_tokens_and_the_proxys_own_time() {
    let dir = tempfile::tempdir().unwrap();
    let rig = Rig::start(&dir.path().join("m.db")).await.unwrap();
    conversation(
        &rig.url,
        "m",
        "claude-opus-5",
        3,
        Speaks::Messages { stream: true },
    )
    .await
    .unwrap();
    let text = reqwest::get(format!("{}/metrics", rig.url))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for line in [
        "mektpoy_proxy_requests_total{api=\"messages\",status=\"200\"} 3",
        "mektpoy_proxy_upstream_responses_total{status=\"200\"} 3",
        "mektpoy_proxy_sessions_in_memory 1",
        "mektpoy_proxy_added_seconds_count 3",
    ] {
        assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
    }
    assert!(text.contains("mektpoy_proxy_cached_tokens_total{route=\"anthropic/claude-opus-5\"}"));
    assert!(text.contains("mektpoy_proxy_store_write_seconds_count"));
    assert!(!text.contains("sk-demo"));
}

/// Two requests of one conversation at once queue (decision 111): both are answered, one
/// after the other, and the log holds both turns in the order the proxy took them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_requests_of_one_conversation_at_once_queue() {
    let dir = tempfile::tempdir().unwrap();
    let rig = Rig::start(&dir.path().join("q.db")).await.unwrap();
    let send = |text: &'static str| {
        let url = rig.url.clone();
        async move {
            let body = serde_json::json!({"model": "claude-opus-5", "max_tokens": 16,
                "messages": [{"role": "user", "content": text}]});
            reqwest::Client::new()
                .post(format!("{url}/v1/messages"))
                .header("x-api-key", "sk-demo")
                .header("anthropic-version", "2023-06-01")
                .header("content-type", "application/json")
                .header("x-mektpoy-session", "queue")
                .header("x-mektpoy-test-session", "queue")
                .body(body.to_string())
                .send()
                .await
                .unwrap()
                .status()
        }
    };
    let (a, b) = tokio::join!(send("first"), send("second"));
    assert!(a.is_success() && b.is_success(), "{a} {b}");
    let store = mektpoy_proxy::Store::open(dir.path().join("q.db")).unwrap();
    let key = store.conversations().unwrap().remove(0);
    let log = mektpoy::Session::load_bytes(&store.load(&key).unwrap().unwrap())
        .unwrap()
        .session;
    let roles: Vec<_> = log.messages().iter().map(|m| m.role()).collect();
    use mektpoy::vocab::Role::{Assistant, User};
    // Each request was a whole step: its user turn, then its answer, before the other's.
    assert_eq!(
        roles,
        [User, Assistant],
        "the second replaced the first: {roles:?}"
    );
    assert!(
        log.len() > 4,
        "both requests were logged: {} events",
        log.len()
    );
}
