//! A loop on the Responses route (`route_for("openai", …)`): tool churn keeps the cached
//! prefix where the route sends additions as `additional_tools` items, and rewrites `tools`
//! where it cannot; the session id goes out as `prompt_cache_key`.

use mektpoy::{AgentLoop, Config, Message, Session, ToolSchema, route_for};
use serde_json::{Value, json};

fn tool(name: &str) -> ToolSchema {
    let params = json!({"type": "object", "properties": {"path": {"type": "string"}}});
    let Value::Object(params) = params else {
        unreachable!()
    };
    ToolSchema::new(name, format!("{name} a file"), params)
}

fn body(wire: &mektpoy::WireRequest) -> Value {
    serde_json::from_str(wire.body()).unwrap()
}

/// Three turns: the second adds `grep`, the third removes `read`. Returns each turn's body and
/// meter row (cached, best) bytes.
fn churn(model: &str) -> Vec<(Value, u64, u64)> {
    let config = Config::new("openai", model);
    let mut agent = AgentLoop::builder(Session::new("sess-42"), route_for("openai", model))
        .config(config)
        .system_prompt("You are careful. ".repeat(400))
        .tools([tool("read"), tool("edit")])
        .build()
        .unwrap();
    let mut out = Vec::new();
    for (i, tools) in [
        None,
        Some(vec![tool("read"), tool("edit"), tool("grep")]),
        Some(vec![tool("edit"), tool("grep")]),
    ]
    .into_iter()
    .enumerate()
    {
        if let Some(tools) = tools {
            agent.set_tools(tools).unwrap();
        }
        let request = agent
            .user_turn([Message::user(format!("u{i}"), "go on ".repeat(50))])
            .unwrap();
        let wire = request.to_wire().unwrap();
        let row = agent.observe(&wire).unwrap();
        out.push((body(&wire), row.cached_bytes, row.best_bytes));
        agent
            .append(Message::assistant(format!("a{i}"), "ok", "openai", model))
            .unwrap();
    }
    out
}

fn names(tools: &Value) -> Vec<&str> {
    tools
        .as_array()
        .map(|a| a.iter().map(|t| t["name"].as_str().unwrap()).collect())
        .unwrap_or_default()
}

#[test]
fn an_addition_keeps_the_prefix_on_gpt_5_4_and_a_removal_rewrites_tools() {
    let turns = churn("gpt-5.4");
    let (first, second, third) = (&turns[0].0, &turns[1].0, &turns[2].0);
    assert_eq!(first["prompt_cache_key"], json!("sess-42"));
    assert_eq!(first["store"], json!(false));
    // The addition: `tools` unchanged, an `additional_tools` item at the end.
    assert_eq!(names(&second["tools"]), ["read", "edit"]);
    let input = second["input"].as_array().unwrap();
    let last = input.last().unwrap();
    assert_eq!(last["type"], json!("additional_tools"), "{input:?}");
    assert_eq!(names(&last["tools"]), ["grep"]);
    // The whole previous request is read back from the cache, in 128-token units.
    let (cached, best) = (turns[1].1, turns[1].2);
    assert!(cached > 0 && cached == best, "{cached} of best {best}");
    // OpenAI's cache reads whole 128-token increments (512 bytes at the meter's 4 per token).
    assert_eq!(cached % 512, 0, "{cached}");
    assert_eq!(
        mektpoy::meter::min_cache_tokens(&route_for("openai", "gpt-5.4")),
        1024
    );
    // The removal: no input item removes a tool; `tools` loses `read`, the addition stays.
    assert_eq!(names(&third["tools"]), ["edit"]);
    assert!(third.to_string().contains(r#""type":"additional_tools""#));
}

#[test]
fn an_unknown_openai_model_rewrites_tools_on_an_addition() {
    // GPT-5.6 Terra: no model page read (decision 144), so the generic entry.
    let turns = churn("gpt-5.6-terra");
    let second = &turns[1].0;
    assert_eq!(names(&second["tools"]), ["read", "edit", "grep"]);
    assert!(!second.to_string().contains("additional_tools"));
    let known = churn("gpt-5.4");
    assert!(
        turns[1].1 < known[1].1,
        "the rewrite costs the cache: {} vs {}",
        turns[1].1,
        known[1].1
    );
}

/// Writes the bodies of the churn loops, and one with reasoning, calls and multi-part outputs,
/// to `$MEKTPOY_RESPONSES_BODIES/*.json` when that variable is set: what
/// `crates/mektpoy-proxy/clients/responses_types.py` and `.ts` check against the official SDKs'
/// `ResponseCreateParams`. Without it, checks only that each body is JSON.
#[test]
fn bodies_for_the_sdk_type_checks() {
    use mektpoy::ContentBlock;
    use mektpoy::vocab::{MessageSource, Role};
    let mut bodies: Vec<(String, Value)> = Vec::new();
    for model in ["gpt-5.4", "gpt-5.6-terra"] {
        for (i, (b, _, _)) in churn(model).into_iter().enumerate() {
            bodies.push((format!("churn-{model}-{i}"), b));
        }
    }
    let config = Config::new("openai", "gpt-5.4")
        .with("tool_choice", json!("auto"))
        .unwrap();
    let mut agent = AgentLoop::builder(Session::new("s-7"), route_for("openai", "gpt-5.4"))
        .config(config)
        .system_prompt("Be brief.")
        .tools([tool("read")])
        .build()
        .unwrap();
    let request = agent.user_turn([Message::user("u1", "read x")]).unwrap();
    bodies.push(("tools-first".into(), body(&request.to_wire().unwrap())));
    let mut extra = indexmap::IndexMap::new();
    extra.insert("id".to_owned(), json!("rs_1"));
    extra.insert(
        "summary".to_owned(),
        json!([{"type": "summary_text", "text": "plan"}]),
    );
    extra.insert("encrypted_content".to_owned(), json!("gAAAA"));
    let answer = Message::new(
        "a1",
        Role::Assistant,
        vec![
            ContentBlock::Reasoning {
                text: "plan".into(),
                extra,
            },
            ContentBlock::text("reading"),
            ContentBlock::tool_call("call_1", "read", r#"{"path": "x"}"#).unwrap(),
        ],
        MessageSource::Model {
            provider: "openai".into(),
            model: "gpt-5.4".into(),
        },
    );
    agent.append(answer).unwrap();
    agent
        .append(Message::new(
            "t1",
            Role::Tool,
            vec![ContentBlock::text("line 1"), ContentBlock::text("line 2")],
            MessageSource::Tool {
                call_id: "call_1".into(),
            },
        ))
        .unwrap();
    let request = agent.next_step().unwrap();
    bodies.push((
        "reasoning-call-output".into(),
        body(&request.to_wire().unwrap()),
    ));
    let wire = request.to_wire().unwrap();
    assert!(
        wire.body().contains(r#""arguments":"{\"path\": \"x\"}""#),
        "{}",
        wire.body()
    );
    assert!(wire.body().contains(r#""encrypted_content":"gAAAA""#));
    if let Some(dir) = std::env::var_os("MEKTPOY_RESPONSES_BODIES") {
        std::fs::create_dir_all(&dir).unwrap();
        for (name, b) in &bodies {
            let path = std::path::Path::new(&dir).join(format!("{name}.json"));
            std::fs::write(path, b.to_string()).unwrap();
        }
    }
}

/// A chat route that claims `prompt_cache_key` gets the session id from the loop, on every
/// request (the chat serializer resumes from the previous request: the key is in the head).
#[test]
fn a_loop_on_a_chat_route_that_claims_the_key_sends_the_session_id() {
    use mektpoy::route::WireApi;
    let route = mektpoy::Route::builder("openai", "gpt-4.1", WireApi::OpenAiChat)
        .prompt_cache_key(true)
        .build()
        .unwrap();
    let mut agent = AgentLoop::builder(Session::new("chat-9"), route)
        .config(Config::new("openai", "gpt-4.1"))
        .build()
        .unwrap();
    for i in 0..2 {
        let request = agent
            .user_turn([Message::user(format!("u{i}"), "hi")])
            .unwrap();
        let wire = request.to_wire().unwrap();
        assert_eq!(
            body(&wire)["prompt_cache_key"],
            json!("chat-9"),
            "{}",
            wire.body()
        );
        agent.observe(&wire).unwrap();
        agent
            .append(Message::assistant(
                format!("a{i}"),
                "ok",
                "openai",
                "gpt-4.1",
            ))
            .unwrap();
    }
}
