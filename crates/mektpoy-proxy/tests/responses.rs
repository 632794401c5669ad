//! `POST /v1/responses` through the proxy against the stand-in: a Codex-like client that
//! re-sends its whole input (reasoning items with their `encrypted_content`, function calls
//! and outputs) and its whole tool list on every request while its tools churn.

use mektpoy_proxy::demo::{Rig, tools_at};
use mektpoy_standin::responses::CUSTOM_INPUT;
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
        json!({"model": "gpt-5.4", "input": [{"type": "function_call_output", "output": "x"}]}),
        json!({"model": "gpt-5.4", "input": "hi", "instructions": 3}),
        json!({"model": "gpt-5.4", "input": [{"role": "user", "content": "hi"}, {"type": "custom_tool_call_output", "call_id": "nope", "output": "x"}]}),
        json!({"model": "gpt-5.4", "input": [{"role": "user", "content": "hi"}, {"type": "local_shell_call_output", "id": "nope", "output": "x"}]}),
        json!({"model": "gpt-5.4", "input": "hi", "tools": [{"type": 5}]}),
        json!({"model": "gpt-5.4", "input": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok"}, {"role": "developer", "content": 5}]}),
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

/// Codex's tools as `codex-rs` declares them: a function, the freeform `apply_patch` with its
/// Lark grammar, `local_shell` and `web_search`.
fn codex_tools() -> Vec<Value> {
    vec![
        json!({"type": "function", "name": "shell", "description": "Runs a command.",
            "strict": false, "parameters": {"type": "object",
                "properties": {"command": {"type": "array", "items": {"type": "string"}}},
                "required": ["command"], "additionalProperties": false}}),
        json!({"type": "custom", "name": "apply_patch",
            "description": "Use the `apply_patch` tool to edit files.",
            "format": {"type": "grammar", "syntax": "lark",
                "definition": "start: begin_patch hunk+ end_patch\nbegin_patch: \"*** Begin Patch\" LF\n"}}),
        json!({"type": "local_shell"}),
        json!({"type": "web_search"}),
    ]
}

/// One step of a Codex-shaped conversation: what the client adds before sending, and which
/// tool the stand-in calls in its answer.
struct CodexStep {
    add: Vec<Value>,
    call: Option<&'static str>,
}

/// A Codex-shaped conversation through `base`: items echoed without their `id` (as
/// `codex-rs` serializes them, reasoning aside, whose `id` the stand-in needs to check its
/// state), every call answered as Codex answers it. Returns each step's status, figures and
/// body, and the whole input of the last request.
async fn codex_conversation(
    base: &str,
    thread: &str,
    model: &str,
    stream: bool,
) -> (Vec<Step>, Vec<Value>) {
    let http = client();
    let instructions = format!("You are Codex. {}", "rules ".repeat(700));
    let user = |text: &str| json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]});
    let developer = json!({"type": "message", "role": "developer",
        "content": [{"type": "input_text", "text": "<permissions instructions>approval: never</permissions instructions>"}]});
    let image = json!({"type": "message", "role": "user", "content": [
        {"type": "input_text", "text": "what is in this picture?"},
        {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo="}]});
    let plan = [
        CodexStep {
            add: vec![
                user("<environment_context>cwd</environment_context>"),
                user("fix the bug"),
            ],
            call: Some("apply_patch"),
        },
        CodexStep {
            add: vec![],
            call: Some("local_shell"),
        },
        CodexStep {
            add: vec![developer, user("now search the docs")],
            call: Some("web_search"),
        },
        CodexStep {
            add: vec![image],
            call: Some("shell"),
        },
        CodexStep {
            add: vec![],
            call: Some("apply_patch"),
        },
        CodexStep {
            add: vec![user("thanks")],
            call: None,
        },
    ];
    let mut input: Vec<Value> = Vec::new();
    let mut steps = Vec::new();
    for step in plan {
        input.extend(step.add);
        let body = json!({"model": model, "instructions": instructions, "input": input,
            "tools": codex_tools(), "tool_choice": "auto", "parallel_tool_calls": false,
            "reasoning": {"effort": "medium", "summary": "auto"}, "store": false,
            "stream": stream, "include": ["reasoning.encrypted_content"],
            "prompt_cache_key": thread});
        let mut request = http
            .post(format!("{base}/v1/responses"))
            .header("authorization", "Bearer sk-codex")
            .header("session_id", "codex-session")
            .header("thread_id", thread)
            .header(SESSION_HEADER, thread)
            .header("content-type", "application/json")
            .body(body.to_string());
        if let Some(tool) = step.call {
            request = request.header(TOOL_USE_HEADER, tool);
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
        let text = response.text().await.unwrap();
        // The answer's output, from the body or the stream's last event (the figures'
        // header cannot carry the custom call's non-ASCII input).
        let output = if stream {
            text.lines()
                .filter_map(|l| l.strip_prefix("data: "))
                .filter_map(|d| serde_json::from_str::<Value>(d).ok())
                .find(|e| e["type"] == "response.completed")
                .map(|e| e["response"]["output"].clone())
        } else {
            serde_json::from_str::<Value>(&text)
                .ok()
                .map(|b| b["output"].clone())
        };
        steps.push(Step {
            status,
            total,
            cached,
            body: text,
        });
        if status != 200 {
            break;
        }
        for item in output.unwrap().as_array().unwrap() {
            let mut echoed = item.clone();
            if item["type"] != "reasoning" {
                echoed.as_object_mut().unwrap().remove("id");
            }
            input.push(echoed);
            match item["type"].as_str().unwrap() {
                "custom_tool_call" => input.push(json!({"type": "custom_tool_call_output",
                    "call_id": item["call_id"], "output": "Success. Updated the following files:\nM a.txt\n"})),
                // Codex answers a local shell call with a function call output.
                "local_shell_call" | "function_call" => input.push(json!({"type": "function_call_output",
                    "call_id": item["call_id"], "output": "exit 0"})),
                _ => {}
            }
        }
    }
    (steps, input)
}

/// Codex through the proxy: its tools that are not functions, its custom and local shell
/// calls and their outputs, a web search, a message's `phase`, a developer message mid-way
/// and an image are taken, sent on so the stand-in (which refuses an output without its call,
/// a call without its output, an unknown phase) accepts every request, the custom call's
/// input comes back byte for byte, and each request reads the whole previous one from the
/// cache.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_tools_and_items_pass_the_proxy_and_keep_the_cache() {
    let dir = tempfile::tempdir().unwrap();
    let rig = Rig::start(&dir.path().join("proxy.db")).await.unwrap();
    // gpt-5.3-codex: no tool additions in input; gpt-5.5-codex: additions (decision 130).
    for (model, stream) in [
        ("gpt-5.5-codex", false),
        ("gpt-5.5-codex", true),
        ("gpt-5.3-codex", false),
    ] {
        let thread = format!("codex-{model}-{stream}");
        let (steps, input) = codex_conversation(&rig.url, &thread, model, stream).await;
        assert_eq!(
            steps.len(),
            6,
            "stream={stream}: {}",
            steps.last().unwrap().body
        );
        for (i, s) in steps.iter().enumerate() {
            eprintln!("stream={stream} step {i}: {}/{} cached", s.cached, s.total);
            assert_eq!(s.status, 200, "stream={stream} step {i}: {}", s.body);
        }
        // The stand-in called every kind of tool and labelled its messages.
        let kinds: Vec<&str> = input.iter().filter_map(|i| i["type"].as_str()).collect();
        for kind in [
            "custom_tool_call",
            "custom_tool_call_output",
            "local_shell_call",
            "web_search_call",
        ] {
            assert!(
                kinds.contains(&kind),
                "stream={stream}: {kind} in {kinds:?}"
            );
        }
        assert!(
            input.iter().any(|i| i["phase"] == "commentary"),
            "stream={stream}"
        );
        // Each request's prompt is the previous one and what followed: all of the previous
        // one is read from the cache, but for OpenAI's last partial 128-token step.
        for i in 1..steps.len() {
            assert!(
                steps[i].cached + 512 > steps[i - 1].total,
                "stream={stream} step {i}: {} cached of the previous {}",
                steps[i].cached,
                steps[i - 1].total
            );
        }
        // The custom calls' input, byte for byte, in the log the proxy sent from.
        let id = format!(
            "{}:codex:{thread}",
            mektpoy_proxy::conversation::scope(b"sk-codex")
        );
        let log = client()
            .get(format!("{}/mektpoy/sessions/{id}/log.jsonl", rig.url))
            .header("authorization", "Bearer sk-codex")
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let escaped = serde_json::to_string(CUSTOM_INPUT).unwrap();
        assert_eq!(
            log.matches(&escaped).count(),
            2,
            "stream={stream}: two custom calls"
        );
        assert!(log.contains(r#""phase":"commentary""#), "stream={stream}");
        // The log grew by the new items only: the developer message and what follows it
        // were never written again.
        assert_eq!(
            log.matches("now search the docs").count(),
            1,
            "stream={stream}"
        );
        assert_eq!(log.matches("approval: never").count(), 1, "stream={stream}");
    }
}
