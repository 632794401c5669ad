//! The Postgres store against a real PostgreSQL server (a throwaway cluster per test, see
//! `support`): the store's contract, two proxies on one database, the database stopped and
//! started again mid-conversation. Without PostgreSQL these tests say what they need and pass,
//! unless `MEKTPOY_REQUIRE_POSTGRES=1`.

mod support;

use mektpoy::session::FileOptions;
use mektpoy::store::JsonlSink;
use mektpoy::{Event, Message};
use mektpoy_proxy::Store;
use mektpoy_proxy::demo::{Rig, Speaks};
use mektpoy_proxy::store::now;
use serde_json::{Value, json};
use support::ProxyProcess;

/// The store's contract, the same on both backends: a conversation reads back byte for byte,
/// a stale writer is refused, a sink cuts back only its own rows, retention keeps what is held.
fn contract(store: &Store, reopen: impl Fn() -> Store) {
    let s = FileOptions::new()
        .create_in(store.sink("c").unwrap(), "c")
        .unwrap();
    s.append(Event::append(Message::user("u1", "hi ünïcödé")))
        .unwrap();
    let bytes = store.load("c").unwrap().unwrap();
    assert_eq!(bytes, s.to_jsonl().into_bytes());
    assert_eq!(store.load("other").unwrap(), None);

    let taken = FileOptions::new()
        .open_in(&bytes, store.sink("c").unwrap())
        .unwrap()
        .session;
    taken
        .append(Event::append(Message::user("u2", "mine")))
        .unwrap();
    assert!(
        s.append(Event::append(Message::user("u3", "stale")))
            .is_err(),
        "a stale writer is refused"
    );
    let reopened = reopen();
    assert_eq!(
        reopened.load("c").unwrap().unwrap(),
        taken.to_jsonl().into_bytes(),
        "byte for byte, from another handle"
    );
    assert_eq!(reopened.conversations().unwrap(), ["c"]);
    let summary = &reopened.summaries().unwrap()[0];
    assert_eq!(summary.batches, 3);
    assert_eq!(summary.bytes, taken.to_jsonl().len() as u64);
    assert!(summary.written_at + 60 > now());
    assert!(
        reopened
            .delete_written_before(now() + 1, &|c| c == "c")
            .unwrap()
            .is_empty(),
        "a conversation held in memory is kept"
    );

    // A sink cuts back its own bytes only.
    let mut sink = store.sink("c").unwrap();
    let end = taken.to_jsonl().len() as u64;
    sink.truncate(3).unwrap();
    assert_eq!(store.load("c").unwrap().unwrap().len() as u64, end);
    sink.append(b"x\n").unwrap();
    sink.truncate(end).unwrap();
    assert_eq!(
        store.load("c").unwrap().unwrap().len() as u64,
        end,
        "its own batch"
    );
    sink.append(b"x\n").unwrap();
    sink.append(b"yyyy\n").unwrap();
    sink.truncate(end + 4).unwrap();
    let log = store.load("c").unwrap().unwrap();
    assert_eq!(
        &log[end as usize..],
        b"x\nyy",
        "a row of its own spanning the cut keeps its head"
    );
    sink.truncate(end + 2).unwrap();
    let mut other = store.sink("c").unwrap();
    assert!(other.append(b"y\n").is_ok(), "at the end as it now is");
    assert!(
        sink.append(b"z\n").is_err(),
        "behind another writer's batch"
    );
    assert!(
        sink.truncate(end).is_err(),
        "not under another writer's batch"
    );
    assert_eq!(store.load("c").unwrap().unwrap().len() as u64, end + 4);
    assert_eq!(
        store.delete_written_before(now() + 1, &|_| false).unwrap(),
        ["c"],
        "the retention limit deletes what is idle"
    );
    assert_eq!(store.load("c").unwrap(), None);
    assert!(
        other.append(b"w\n").is_err(),
        "a sink whose conversation was deleted writes no gap"
    );
    // Many writers at once on one new conversation: exactly one wins each offset.
    let winners: usize = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..8)
            .map(|_| scope.spawn(|| store.sink("race").unwrap().append(b"r\n").is_ok()))
            .collect();
        handles
            .into_iter()
            .map(|h| usize::from(h.join().unwrap()))
            .sum()
    });
    assert!(winners >= 1);
    let race = store.load("race").unwrap().unwrap();
    assert_eq!(race.len(), 2 * winners, "whole batches, one after another");
    store.delete("race").unwrap();
}

#[test]
fn the_store_contract_holds_on_sqlite_and_postgres() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.db");
    contract(&Store::open(&path).unwrap(), || Store::open(&path).unwrap());
    let Some(pg) = support::cluster() else { return };
    let url = pg.url();
    let store = Store::connect(&url).unwrap();
    contract(&store, || Store::connect(&url).unwrap());
    assert!(
        Store::connect("mysql://x").is_err(),
        "an unknown store is an error"
    );
}

/// Two proxies on one Postgres, a load balancer that alternates between them: each takes the
/// conversation over from what the store holds, nothing is refused, nothing interleaved.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_proxies_on_one_postgres_take_a_conversation_over_from_each_other() {
    let Some(pg) = support::cluster() else { return };
    let url = pg.url();
    let a = Rig::start_on(Store::connect(&url).unwrap(), Default::default())
        .await
        .unwrap();
    let b = Rig::start_on(Store::connect(&url).unwrap(), Default::default())
        .await
        .unwrap();
    support::alternate_over(&a, &b, &Store::connect(&url).unwrap()).await;
}

fn post(url: &str, history: &[Value], step: usize) -> (u16, Value) {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .proxy(None)
        .build()
        .into();
    let tools: Vec<Value> = (0..2 + step % 3)
        .map(|i| json!({"name": format!("t{i}"), "description": format!("tool {i}"), "input_schema": {"type": "object"}}))
        .collect();
    let body = json!({"model": "claude-fable-5-1", "max_tokens": 64, "system": "Be careful.",
        "tools": tools, "messages": history});
    let mut response = agent
        .post(format!("{url}/v1/messages"))
        .header("x-api-key", "sk-test")
        .header("anthropic-version", "2023-06-01")
        .header("content-type", "application/json")
        .header("x-mektpoy-session", "restart")
        .header(mektpoy_standin::SESSION_HEADER, "restart")
        .send(body.to_string())
        .expect("the proxy answers");
    let status = response.status().as_u16();
    let content = response
        .headers()
        .get(mektpoy_standin::CONTENT_HEADER)
        .and_then(|v| serde_json::from_str(v.to_str().ok()?).ok());
    let text = response.body_mut().read_to_string().unwrap_or_default();
    match content {
        Some(content) if status == 200 => (status, content),
        _ => (status, serde_json::from_str(&text).unwrap_or(Value::Null)),
    }
}

/// The database stopped mid-conversation: the next request gets a 503 in the provider's error
/// shape and nothing is logged half-way; the database started again, the next request goes on
/// without a restart of the proxy.
#[test]
fn the_database_stopped_then_started_mid_conversation_gives_a_503_then_goes_on() {
    let Some(mut pg) = support::cluster() else {
        return;
    };
    let standin = format!("http://{}", mektpoy_standin::start("127.0.0.1:0").unwrap());
    let proxy = ProxyProcess::start(&pg.url(), &standin);
    let mut history: Vec<Value> = Vec::new();
    let steps = 6;
    for step in 0..steps {
        history.push(json!({"role": "user", "content": format!("step {step}")}));
        if step == 3 {
            pg.stop();
            let (status, error) = post(&proxy.url, &history, step);
            assert_eq!(status, 503, "{error}");
            assert_eq!(error["type"], "error", "{error}");
            assert_eq!(error["error"]["type"], "api_error", "{error}");
            let message = error["error"]["message"].as_str().unwrap_or_default();
            assert!(message.contains("store"), "{message}");
            pg.start();
        }
        let (status, content) = post(&proxy.url, &history, step);
        assert_eq!(status, 200, "step {step}: {content}");
        history.push(json!({"role": "assistant", "content": content}));
    }
    let store = Store::connect(&pg.url()).unwrap();
    let keys = store.conversations().unwrap();
    assert_eq!(keys.len(), 1);
    let bytes = store.load(&keys[0]).unwrap().unwrap();
    let loaded = mektpoy::Session::load_bytes(&bytes).expect("the stored log loads");
    assert!(loaded.torn_tail.is_none(), "no half-written batch");
    let users = loaded
        .session
        .messages()
        .iter()
        .filter(|m| m.role() == mektpoy::vocab::Role::User)
        .count();
    assert_eq!(users, steps, "every user turn once");
}

/// On Postgres too: an idle conversation leaves memory and comes back from the database, and
/// the retention limit deletes what is not held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgres_an_idle_conversation_comes_back_and_retention_deletes() {
    let Some(pg) = support::cluster() else { return };
    let settings = mektpoy_proxy::Settings {
        idle: std::time::Duration::from_secs(3600),
        max_sessions: 0,
        retention: Some(std::time::Duration::ZERO),
        ..Default::default()
    };
    let rig = Rig::start_on(Store::connect(&pg.url()).unwrap(), settings)
        .await
        .unwrap();
    let fable = Speaks::Messages { stream: false };
    let first = mektpoy_proxy::demo::conversation(&rig.url, "idle", "claude-fable-5-1", 4, fable)
        .await
        .unwrap();
    assert_eq!(rig.proxy.evict_idle(), 1);
    let again = mektpoy_proxy::demo::conversation(&rig.url, "idle", "claude-fable-5-1", 16, fable)
        .await
        .unwrap();
    assert_eq!(
        first.refused + again.refused,
        0,
        "{:?}",
        again.first_refusal
    );
    assert!(again.cached_bytes > 0);
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    assert!(
        rig.proxy.apply_retention().unwrap().is_empty(),
        "held in memory: kept"
    );
    assert_eq!(rig.proxy.evict_idle(), 1);
    assert_eq!(rig.proxy.apply_retention().unwrap().len(), 1);
    assert!(
        Store::connect(&pg.url())
            .unwrap()
            .conversations()
            .unwrap()
            .is_empty()
    );
}
