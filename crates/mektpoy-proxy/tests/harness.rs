//! The scripted harness-like client (`mektpoy_proxy::demo`) through the proxy against the
//! loopback stand-in, and straight to the stand-in: it re-sends its whole tool list and history
//! on every request while an MCP server connects, a plugin is disabled and enabled again, the
//! tools come in another order, a schema changes and the history is compacted. Through the
//! proxy nothing is refused and the cache is kept; the same client alone loses it (or, on a
//! model that binds thinking, is refused).

use mektpoy_proxy::demo::{Rig, Speaks, conversation};
use serde_json::Value;

const STEPS: usize = 16;

/// The conversation's report from the proxy, read with `key`.
async fn get_report(rig: &Rig, session: &str, key: &str) -> reqwest::Response {
    let id = format!(
        "{}:session:{session}",
        mektpoy_proxy::conversation::scope(b"sk-demo")
    );
    reqwest::Client::new()
        .get(format!("{}/mektpoy/sessions/{id}", rig.url))
        .header("x-api-key", key)
        .send()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_harness_keeps_its_cache_through_the_proxy_and_is_never_refused() {
    let dir = tempfile::tempdir().unwrap();
    let rig = Rig::start(&dir.path().join("proxy.db")).await.unwrap();
    for (model, speaks) in [
        ("claude-opus-5", Speaks::Messages { stream: false }),
        ("claude-opus-5", Speaks::Messages { stream: true }),
        ("deepseek-flash", Speaks::Messages { stream: false }),
        ("claude-fable-5-1", Speaks::Messages { stream: true }),
        ("deepseek-v4-pro", Speaks::Chat),
    ] {
        let session = format!("harness-{model}-{speaks:?}");
        let proxied = conversation(&rig.url, &session, model, STEPS, speaks)
            .await
            .unwrap();
        let direct = conversation(
            &rig.standin,
            &format!("direct-{session}"),
            model,
            STEPS,
            speaks,
        )
        .await
        .unwrap();
        eprintln!("{model} {speaks:?}: proxied {proxied:?}; direct {direct:?}");
        assert_eq!(
            proxied.refused, 0,
            "{model} {speaks:?}: refused through the proxy: {:?}",
            proxied.first_refusal
        );
        assert!(
            proxied.cached_bytes > direct.cached_bytes,
            "{model} {speaks:?}: the proxy keeps more cached ({}) than the client alone ({})",
            proxied.cached_bytes,
            direct.cached_bytes
        );
        if model == "claude-fable-5-1" {
            assert!(direct.refused > 0, "the client alone is refused on Fable");
        }

        let report: Value = get_report(&rig, &session, "sk-demo")
            .await
            .json()
            .await
            .unwrap();
        let measured = &report["proxied"]["measured"];
        assert_eq!(measured["requests"], STEPS, "{report}");
        // The generic OpenAI-compatible route meters OpenAI's cache; the stand-in caches a
        // `deepseek-*` model's chat prompts in DeepSeek's 64-token units (the catalog has no
        // DeepSeek chat route), so only the Messages routes' estimates are exact.
        if speaks != Speaks::Chat {
            assert_eq!(
                measured["cached_tokens"], report["proxied"]["cached_tokens"],
                "{model}: the meter's estimate is the provider's measured read: {report}"
            );
        }
        if model.starts_with("claude") {
            let hit = report["proxied"]["hit_ratio"].as_f64().unwrap();
            let best = report["proxied"]["best_tokens"].as_f64().unwrap()
                / report["proxied"]["input_tokens"].as_f64().unwrap();
            assert!(
                best - hit < 0.01,
                "{model}: the proxied hit ratio {hit} is within a point of the best possible {best}"
            );
        }
        assert_eq!(
            get_report(&rig, &session, "sk-other").await.status(),
            404,
            "another key does not read the report"
        );
    }
}

/// A client that already announces its tool changes in history (the vendor's beta) is
/// understood: the proxy sends the changes once, its own way, and the stand-in accepts them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_sending_its_own_tool_changes_is_not_doubled() {
    let dir = tempfile::tempdir().unwrap();
    let rig = Rig::start(&dir.path().join("own.db")).await.unwrap();
    let tools = serde_json::json!([
        {"name": "read", "description": "Read", "input_schema": {"type": "object"}},
        {"name": "search", "description": "Search", "input_schema": {"type": "object"}, "defer_loading": true},
    ]);
    let post = |messages: Value| {
        let body = serde_json::json!({"model": "claude-opus-5", "max_tokens": 16,
            "system": format!("Be brief. {}", "rule ".repeat(2000)), "tools": tools, "messages": messages});
        let url = rig.url.clone();
        async move {
            let r = reqwest::Client::new()
                .post(format!("{url}/v1/messages"))
                .header("x-api-key", "sk-demo")
                .header("anthropic-version", "2023-06-01")
                .header("anthropic-beta", "mid-conversation-tool-changes-2026-07-01")
                .header("content-type", "application/json")
                .header("x-mektpoy-session", "own-changes")
                .header("x-mektpoy-test-session", "own-changes")
                .body(body.to_string())
                .send()
                .await
                .unwrap();
            let status = r.status();
            let cached: u64 = r
                .headers()
                .get("x-standin-cached-bytes")
                .and_then(|v| v.to_str().ok()?.parse().ok())
                .unwrap_or(0);
            let v: Value = r.json().await.unwrap();
            (status, cached, v)
        }
    };
    let first = vec![serde_json::json!({"role": "user", "content": "hi"})];
    let (status, _, answer) = post(Value::Array(first.clone())).await;
    assert!(status.is_success(), "{answer}");
    let mut second = first;
    second.push(serde_json::json!({"role": "assistant", "content": answer["content"]}));
    second.push(serde_json::json!({"role": "system", "content": [
        {"type": "tool_addition", "tool": {"type": "tool_reference", "name": "search"}}]}));
    second.push(serde_json::json!({"role": "user", "content": "search now"}));
    let (status, cached, answer) = post(Value::Array(second)).await;
    assert!(status.is_success(), "{answer}");
    assert!(
        cached > 0,
        "the prefix kept: the change went in history once"
    );
}
