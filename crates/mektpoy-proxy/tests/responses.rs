//! `POST /v1/responses` through the proxy against the stand-in: a Codex-like client that
//! re-sends its whole input (reasoning items with their `encrypted_content`, function calls
//! and outputs) and its whole tool list on every request while its tools churn.

use mektpoy_proxy::demo::{Rig, tools_at};
use mektpoy_standin::{
    CACHED_BYTES_HEADER, CONTENT_HEADER, SESSION_HEADER, TOOL_USE_HEADER, TOTAL_BYTES_HEADER,
};
use serde_json::{Value, json};

const STEPS: usize = 8;

/// What each step met: status, the stand-in's total and cached bytes.
#[derive(Debug)]
struct Step {
    status: u16,
    total: u64,
    cached: u64,
    body: String,
}

fn tools(i: usize) -> Vec<Value> {
    tools_at(i)
        .into_iter()
        .map(|t| {
            json!({"type": "function", "name": t["name"], "description": t["description"],
                "parameters": t["input_schema"], "strict": false})
        })
        .collect()
}

fn client() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().unwrap()
}

/// A Codex-like conversation of `steps` steps against `base` (`/v1` appended), thread `thread`.
async fn conversation(base: &str, thread: &str, model: &str, stream: bool) -> Vec<Step> {
    let http = client();
    let instructions = format!("You are a coding agent. {}", "rules ".repeat(600));
    let mut input: Vec<Value> = Vec::new();
    let mut steps = Vec::new();
    for i in 0..STEPS {
        input.push(json!({"type": "message", "role": "user",
            "content": [{"type": "input_text", "text": format!("step {i}: go on")}]}));
        let body = json!({"model": model, "instructions": instructions, "input": input,
            "tools": tools(i), "tool_choice": "auto", "parallel_tool_calls": false,
            "store": false, "stream": stream, "include": ["reasoning.encrypted_content"],
            "prompt_cache_key": thread});
        let mut request = http
            .post(format!("{base}/v1/responses"))
            .header("authorization", "Bearer sk-codex")
            .header("session_id", "codex-session")
            .header("thread_id", thread)
            .header(SESSION_HEADER, thread)
            .header("content-type", "application/json")
            .body(body.to_string());
        if i % 3 == 1 {
            request = request.header(TOOL_USE_HEADER, "read");
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let figure = |name: &str| -> u64 {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok()?.parse().ok())
                .unwrap_or(0)
        };
        let (total, cached) = (figure(TOTAL_BYTES_HEADER), figure(CACHED_BYTES_HEADER));
        let output: Option<Value> = response
            .headers()
            .get(CONTENT_HEADER)
            .and_then(|v| serde_json::from_str(v.to_str().ok()?).ok());
        let text = response.text().await.unwrap();
        if status == 200 {
            // The answer's items go back as Codex sends them: every item, ids and all.
            for item in output.unwrap().as_array().unwrap() {
                input.push(item.clone());
                if item["type"] == "function_call" {
                    input.push(json!({"type": "function_call_output",
                        "call_id": item["call_id"], "output": "file contents"}));
                }
            }
        } else {
            input.pop();
        }
        steps.push(Step {
            status,
            total,
            cached,
            body: text,
        });
    }
    steps
}

/// How many events the stored log of the conversation of thread `thread` holds (its JSONL
/// lines but batch markers).
async fn log_lines(rig: &Rig, thread: &str) -> usize {
    let id = format!(
        "{}:codex:{thread}",
        mektpoy_proxy::conversation::scope(b"sk-codex")
    );
    let text = client()
        .get(format!("{}/mektpoy/sessions/{id}/log.jsonl", rig.url))
        .header("authorization", "Bearer sk-codex")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .filter(|l| l.starts_with(r#"{"type":"#))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_codex_like_client_keeps_its_cache_through_the_proxy_and_is_never_refused() {
    let dir = tempfile::tempdir().unwrap();
    let rig = Rig::start(&dir.path().join("proxy.db")).await.unwrap();
    for (model, stream) in [
        ("gpt-5.4", false),
        ("gpt-5.4", true),
        ("gpt-4.1", false),
        ("gpt-4.1", true),
    ] {
        let thread = format!("thread-{model}-{stream}");
        let proxied = conversation(&rig.url, &thread, model, stream).await;
        let direct = conversation(&rig.standin, &format!("direct-{thread}"), model, stream).await;
        for (i, s) in proxied.iter().enumerate() {
            eprintln!(
                "{model} stream={stream} step {i}: proxied {}/{} cached, direct {}/{}",
                s.cached, s.total, direct[i].cached, direct[i].total
            );
            assert_eq!(s.status, 200, "{model} step {i}: {}", s.body);
        }
        assert!(
            proxied[1].cached > 0,
            "{model}: the second request reads the first from the cache"
        );
        if model == "gpt-5.4" {
            // Step 3 adds two tools: through the proxy an `additional_tools` item at the end,
            // so the prefix stays; the client alone rewrites `tools`, its first bytes.
            assert!(
                proxied[3].cached > 0,
                "{model}: an addition keeps the cache"
            );
            assert_eq!(direct[3].cached, 0, "{model}: the client alone loses it");
        } else {
            assert_eq!(
                proxied[3].cached, 0,
                "{model}: no mode, so an addition rewrites `tools`"
            );
        }
        // Step 5 removes a tool: `tools` rewritten on either model.
        assert!(
            proxied[5].cached < proxied[5].total / 2,
            "{model}: a removal rewrites tools"
        );
        // The client alone re-sends more (every item's id), so compare hit ratios.
        let ratio = |s: &[Step]| {
            s.iter().map(|s| s.cached).sum::<u64>() as f64
                / s.iter().map(|s| s.total).sum::<u64>() as f64
        };
        eprintln!(
            "{model} stream={stream}: hit ratio proxied {:.3}, direct {:.3}",
            ratio(&proxied),
            ratio(&direct)
        );
        assert!(ratio(&proxied) >= ratio(&direct), "{model}");
        if model == "gpt-5.4" {
            assert!(ratio(&proxied) > ratio(&direct) + 0.05, "{model}");
        }
    }
}

/// The log grows by the new items (and the answer) only: the echoed answer items (reasoning
/// with its `encrypted_content`, text, call) are read as the logged answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_log_grows_by_the_new_items_only() {
    let dir = tempfile::tempdir().unwrap();
    let rig = Rig::start(&dir.path().join("proxy.db")).await.unwrap();
    let http = client();
    let send = |input: &Value| {
        let body = json!({"model": "gpt-5.4", "instructions": "Be brief.", "input": input,
            "tools": tools(0), "store": false, "include": ["reasoning.encrypted_content"]});
        http.post(format!("{}/v1/responses", rig.url))
            .header("authorization", "Bearer sk-codex")
            .header("thread-id", "grow")
            .header(SESSION_HEADER, "grow")
            .header(TOOL_USE_HEADER, "read")
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
    };
    let mut input = vec![json!({"role": "user", "content": "hi"})];
    let first = send(&Value::Array(input.clone())).await.unwrap();
    assert_eq!(first.status(), 200);
    let answer: Value = first.json().await.unwrap();
    let after_first = log_lines(&rig, "grow").await;
    for item in answer["output"].as_array().unwrap() {
        input.push(item.clone());
        if item["type"] == "function_call" {
            input.push(
                json!({"type": "function_call_output", "call_id": item["call_id"],
                "output": "file contents"}),
            );
        }
    }
    let second = send(&Value::Array(input.clone())).await.unwrap();
    assert_eq!(second.status(), 200, "{}", second.text().await.unwrap());
    let after_second = log_lines(&rig, "grow").await;
    // One tool output and one answer: the echoed reasoning, text and call are the log's.
    assert_eq!(after_second, after_first + 2, "grows by what is new");
    let answer: Value = second.json().await.unwrap();
    input.extend(answer["output"].as_array().unwrap().iter().cloned());
    input.push(
        json!({"type": "function_call_output", "call_id": input.last().unwrap()["call_id"],
        "output": "more"}),
    );
    input.push(json!({"role": "user", "content": "and now?"}));
    let third = send(&Value::Array(input)).await.unwrap();
    assert_eq!(third.status(), 200);

    assert_eq!(
        log_lines(&rig, "grow").await,
        after_second + 3,
        "a tool output, a user message and the answer"
    );
}

/// Bodies the proxy cannot take get OpenAI's error shape and change nothing stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_bodies_get_openais_error_shape_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let rig = Rig::start(&dir.path().join("proxy.db")).await.unwrap();
    let http = client();
    let post = |body: String| {
        http.post(format!("{}/responses", rig.url))
            .header("authorization", "Bearer sk-codex")
            .header("thread_id", "hostile")
            .header(SESSION_HEADER, "hostile")
            .header("content-type", "application/json")
            .body(body)
            .send()
    };
    let ok = json!({"model": "gpt-5.4", "input": "hi", "store": false});
    let first = post(ok.to_string()).await.unwrap();
    assert_eq!(first.status(), 200, "a string input is one user message");
    let before = log_lines(&rig, "hostile").await;
    assert!(before > 0);
    for bad in [
        json!({"model": "gpt-5.4"}),
        json!({"model": "gpt-5.4", "input": 5}),
        json!({"model": "gpt-5.4", "input": []}),
        json!({"model": 5, "input": "hi"}),
        json!({"model": "gpt-5.4", "input": "hi", "previous_response_id": "resp_1"}),
        json!({"model": "gpt-5.4", "input": "hi", "conversation": "conv_1"}),
        json!({"model": "gpt-5.4", "input": [{"role": "robot", "content": "x"}]}),
        json!({"model": "gpt-5.4", "input": [{"type": "item_reference", "id": "x"}]}),
        json!({"model": "gpt-5.4", "input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]}),
        json!({"model": "gpt-5.4", "input": [{"type": "function_call_output", "output": "x"}]}),
        json!({"model": "gpt-5.4", "input": "hi", "tools": [{"type": "web_search"}]}),
        json!({"model": "gpt-5.4", "input": "hi", "instructions": 3}),
        json!({"model": "gpt-5.4", "input": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok"}, {"role": "developer", "content": "later"}]}),
    ] {
        let response = post(bad.to_string()).await.unwrap();
        assert_eq!(response.status(), 400, "{bad}");
        let error: Value = response.json().await.unwrap();
        let e = &error["error"];
        assert_eq!(e["type"], "invalid_request_error", "{bad}: {error}");
        assert!(e["message"].as_str().is_some_and(|m| !m.is_empty()));
        assert!(
            e.get("param").is_some() && e.get("code").is_some(),
            "{error}"
        );
        assert_eq!(
            log_lines(&rig, "hostile").await,
            before,
            "{bad}: nothing stored"
        );
    }
    let not_json = post("{".into()).await.unwrap();
    assert_eq!(not_json.status(), 400);
    let error: Value = not_json.json().await.unwrap();
    assert_eq!(error["error"]["type"], "invalid_request_error");
}
