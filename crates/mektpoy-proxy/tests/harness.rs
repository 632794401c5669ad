//! A harness-like client through the proxy against the loopback stand-in: it re-sends its whole
//! tool list and history on every request, as Claude Code does, while an MCP server connects, a
//! plugin is disabled and enabled again, the tools come in another order, a schema changes and
//! the history is compacted. Through the proxy nothing is refused and the cache is kept; the
//! same client sent directly loses it (or, on a model that binds thinking, is refused).

use std::sync::Arc;

use mektpoy_proxy::{Proxy, Settings, Store};
use serde_json::{Value, json};

/// The stand-in's switches and figures (its crate documents them).
use mektpoy_standin::{CACHED_BYTES_HEADER, CONTENT_HEADER, SESSION_HEADER, TOOL_USE_HEADER};

struct Proxied {
    url: String,
    standin: String,
    dir: tempfile::TempDir,
}

async fn start_proxy() -> Proxied {
    let standin = mektpoy_standin::start("127.0.0.1:0").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("proxy.db")).unwrap();
    let mut settings = Settings::default();
    for provider in ["anthropic", "deepseek", "openai-compatible"] {
        settings
            .upstreams
            .insert(provider.to_owned(), format!("http://{standin}"));
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let proxy = Proxy::new(settings, store);
    tokio::spawn(mektpoy_proxy::serve(
        listener,
        Arc::clone(&proxy),
        std::future::pending(),
    ));
    Proxied {
        url: format!("http://{addr}"),
        standin: format!("http://{standin}"),
        dir,
    }
}

fn tool(name: &str, description: &str) -> Value {
    json!({"name": name, "description": description,
        "input_schema": {"type": "object", "properties": {"arg": {"type": "string"}}}})
}

/// The harness's tool list at step `i`: the churn of a real session.
fn tools_at(i: usize) -> Vec<Value> {
    let mut tools = vec![tool("read", "Read a file"), tool("shell", "Run a command")];
    let plugin = tool("lint", "Lint the tree");
    let mcp = [
        tool("mcp__gh__search", "Search issues"),
        tool("mcp__gh__issue", "Open an issue"),
    ];
    if !(5..7).contains(&i) {
        tools.push(plugin); // disabled at steps 5 and 6, enabled again at 7
    }
    if i >= 3 {
        tools.extend(mcp.iter().cloned()); // an MCP server connects at step 3
    }
    if i >= 9 {
        tools.reverse(); // reconnects with its tools in another order
    }
    if i >= 11 {
        tools[0]["description"] = json!("Read a file (v2)"); // a schema change
    }
    tools
}

struct Outcome {
    refused: usize,
    cached: u64,
    input: u64,
}

/// Runs the harness for `steps` steps against `base` (`/v1/messages`), keyed `session`.
async fn harness(base: &str, session: &str, model: &str, steps: usize, stream: bool) -> Outcome {
    let http = reqwest::Client::new();
    let mut history: Vec<Value> = Vec::new();
    let mut pending: Vec<Value> = Vec::new();
    let mut out = Outcome {
        refused: 0,
        cached: 0,
        input: 0,
    };
    for i in 0..steps {
        if i == 13 {
            // A compaction: the client replaces its history with a summary.
            history = vec![
                json!({"role": "user", "content": "Summary of the work so far."}),
                json!({"role": "assistant", "content": [{"type": "text", "text": "Understood."}]}),
            ];
        }
        // The results of the previous answer's calls, then the user's words.
        let mut user: Vec<Value> = std::mem::take(&mut pending);
        user.push(
            json!({"type": "text", "text": format!("step {i}: go on. {}", "context ".repeat(40))}),
        );
        history.push(json!({"role": "user", "content": user}));
        let body = json!({"model": model, "max_tokens": 256,
            "system": [{"type": "text", "text": format!("You are a coding agent. {}", "rules ".repeat(300))}],
            "tools": tools_at(i), "messages": history, "stream": stream});
        let mut request = http
            .post(format!("{base}/v1/messages"))
            .header("x-api-key", "sk-test")
            .header("anthropic-version", "2023-06-01")
            .header("x-mektpoy-session", session)
            .header(SESSION_HEADER, session)
            .header("content-type", "application/json")
            .body(body.to_string());
        let call = i % 4 == 2;
        if call {
            request = request.header(TOOL_USE_HEADER, "read");
        }
        let response = request.send().await.unwrap();
        let status = response.status();
        let cached: u64 = response
            .headers()
            .get(CACHED_BYTES_HEADER)
            .and_then(|v| v.to_str().ok()?.parse().ok())
            .unwrap_or(0);
        let content: Option<Value> = response
            .headers()
            .get(CONTENT_HEADER)
            .and_then(|v| serde_json::from_str(v.to_str().ok()?).ok());
        let text = response.text().await.unwrap();
        if !status.is_success() {
            out.refused += 1;
            eprintln!("{model} step {i}: {status} {text}");
            history.pop();
            continue;
        }
        let content = content.expect("an accepted answer names its content");
        if !stream {
            let v: Value = serde_json::from_str(&text).unwrap();
            assert_eq!(v["content"], content);
            out.input += v["usage"]["input_tokens"].as_u64().unwrap()
                + v["usage"]["cache_read_input_tokens"].as_u64().unwrap();
        } else {
            assert!(text.contains("event: message_stop"), "{text}");
        }
        out.cached += cached;
        pending = content
            .as_array()
            .unwrap()
            .iter()
            .filter(|b| b["type"] == "tool_use")
            .map(|c| json!({"type": "tool_result", "tool_use_id": c["id"], "content": "file contents"}))
            .collect();
        history.push(json!({"role": "assistant", "content": content}));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_harness_keeps_its_cache_through_the_proxy_and_is_never_refused() {
    let proxy = start_proxy().await;
    for (model, stream) in [
        ("claude-opus-5", false),
        ("claude-opus-5", true),
        ("deepseek-flash", false),
        ("claude-fable-5-1", true),
    ] {
        let session = format!("harness-{model}-{stream}");
        let proxied = harness(&proxy.url, &session, model, 16, stream).await;
        assert_eq!(
            proxied.refused, 0,
            "{model} stream={stream}: refused through the proxy"
        );
        let direct = harness(
            &proxy.standin,
            &format!("direct-{session}"),
            model,
            16,
            stream,
        )
        .await;
        eprintln!(
            "{model} stream={stream}: proxied {} cached bytes, {} refused; direct {} cached bytes, {} refused",
            proxied.cached, proxied.refused, direct.cached, direct.refused
        );
        let key = format!(
            "{}:session:{session}",
            mektpoy_proxy::conversation::scope(b"sk-test")
        );
        let report: Value = reqwest::Client::new()
            .get(format!("{}/mektpoy/sessions/{key}", proxy.url))
            .header("x-api-key", "sk-test")
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        eprintln!("{report:#}");
        let measured = &report["proxied"]["measured"];
        assert_eq!(measured["requests"], 16, "{report}");
        assert_eq!(
            measured["cached_tokens"], report["proxied"]["cached_tokens"],
            "{model}: the meter's estimate is the provider's measured read: {report}"
        );
        if model.starts_with("claude") {
            let (hit, best) = (
                report["proxied"]["hit_ratio"].as_f64().unwrap(),
                report["proxied"]["best_tokens"].as_f64().unwrap()
                    / report["proxied"]["input_tokens"].as_f64().unwrap(),
            );
            assert!(
                best - hit < 0.01,
                "{model}: the proxied hit ratio {hit} is within a point of the best possible {best}"
            );
        }
        let other = reqwest::Client::new()
            .get(format!("{}/mektpoy/sessions/{key}", proxy.url))
            .header("x-api-key", "sk-other")
            .send()
            .await
            .unwrap();
        assert_eq!(other.status(), 404, "another key does not read the report");
        assert!(
            proxied.cached > direct.cached,
            "{model}: the proxy keeps more cached ({}) than the client alone ({})",
            proxied.cached,
            direct.cached
        );
    }
    drop(proxy.dir);
}

/// The same churn on OpenAI-compatible chat completions (a route without a mode): the tools go
/// out in their first-seen order, so the reordered list keeps the prefix the client alone loses.
async fn chat_harness(base: &str, session: &str, model: &str, steps: usize) -> Outcome {
    let http = reqwest::Client::new();
    let mut history: Vec<Value> = vec![
        json!({"role": "system", "content": format!("You are a coding agent. {}", "rules ".repeat(300))}),
    ];
    let mut out = Outcome {
        refused: 0,
        cached: 0,
        input: 0,
    };
    for i in 0..steps {
        history.push(json!({"role": "user", "content": format!("step {i}: go on. {}", "context ".repeat(40))}));
        let tools: Vec<Value> = tools_at(i)
            .into_iter()
            .map(|t| json!({"type": "function", "function": {"name": t["name"], "description": t["description"], "parameters": t["input_schema"]}}))
            .collect();
        let body = json!({"model": model, "tools": tools, "messages": history});
        let mut request = http
            .post(format!("{base}/v1/chat/completions"))
            .header("authorization", "Bearer sk-test")
            .header("x-mektpoy-session", session)
            .header(SESSION_HEADER, session)
            .header("content-type", "application/json")
            .body(body.to_string());
        if i % 4 == 2 {
            request = request.header(TOOL_USE_HEADER, "read");
        }
        let response = request.send().await.unwrap();
        let status = response.status();
        let cached: u64 = response
            .headers()
            .get(CACHED_BYTES_HEADER)
            .and_then(|v| v.to_str().ok()?.parse().ok())
            .unwrap_or(0);
        let text = response.text().await.unwrap();
        if !status.is_success() {
            eprintln!("chat {model} step {i}: {status} {text}");
            out.refused += 1;
            history.pop();
            continue;
        }
        out.cached += cached;
        let v: Value = serde_json::from_str(&text).unwrap();
        let message = v["choices"][0]["message"].clone();
        let calls: Vec<Value> = message["tool_calls"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        history.push(message);
        for c in calls {
            history
                .push(json!({"role": "tool", "tool_call_id": c["id"], "content": "file contents"}));
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chat_harness_keeps_its_order_through_the_proxy() {
    let proxy = start_proxy().await;
    let model = "deepseek-v4-pro";
    let proxied = chat_harness(&proxy.url, "chat-harness", model, 16).await;
    let direct = chat_harness(&proxy.standin, "direct-chat-harness", model, 16).await;
    eprintln!(
        "chat {model}: proxied {} cached bytes, {} refused; direct {} cached bytes, {} refused",
        proxied.cached, proxied.refused, direct.cached, direct.refused
    );
    assert_eq!(proxied.refused, 0);
    assert!(proxied.cached > direct.cached);
    drop(proxy.dir);
}
