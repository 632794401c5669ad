//! The Responses API serializer (`route_for("openai", …)`): the exact body, each rule it
//! enforces, and the pairing of calls and outputs on random conversations.

use super::*;
use proptest::prelude::*;

fn gpt() -> Route {
    route_for("openai", "gpt-5.4")
}

fn oa(id: &str, blocks: Vec<ContentBlock>) -> Message {
    Message::new(
        id,
        Role::Assistant,
        blocks,
        MessageSource::Model {
            provider: "openai".into(),
            model: "gpt-5.4".into(),
        },
    )
}

fn reasoning(id: &str, sealed: &str) -> ContentBlock {
    let mut extra = IndexMap::new();
    extra.insert("id".to_owned(), json!(id));
    extra.insert(
        "summary".to_owned(),
        json!([{"type": "summary_text", "text": "plan"}]),
    );
    extra.insert("encrypted_content".to_owned(), json!(sealed));
    ContentBlock::Reasoning {
        text: "plan".into(),
        extra,
    }
}

fn gpt_config() -> Config {
    Config::new("openai", "gpt-5.4")
        .with("parallel_tool_calls", json!(false))
        .unwrap()
}

fn send(
    route: &Route,
    messages: Vec<Message>,
    tools: Vec<ToolSchema>,
) -> Result<WireRequest, WireError> {
    let context = WireContext::default().with_prompt_cache_key("session-1");
    serialize_with(
        &gpt_config(),
        &projected(messages, Some(tools)),
        route,
        &context,
    )
}

#[test]
fn responses_body_exact() {
    let read = object_tool("read");
    let messages = vec![
        s("s0", "be brief"),
        u("u1", "go"),
        oa(
            "a1",
            vec![
                reasoning("rs_1", "gAAA"),
                text("looking"),
                call("c1", "read", r#"{ "path": "/x" }"#),
            ],
        ),
        result("t1", "c1", "data"),
        oa("a2", vec![text(""), text("done")]),
        u("u2", "thanks"),
    ];
    let req = send(&gpt(), messages, vec![read]).unwrap();
    assert_eq!(
        req.body(),
        concat!(
            r#"{"model":"gpt-5.4","include":["reasoning.encrypted_content"],"parallel_tool_calls":false,"#,
            r#""prompt_cache_key":"session-1","store":false,"instructions":"be brief","#,
            r#""tools":[{"type":"function","name":"read","description":"read","parameters":{"type":"object"},"strict":false}],"#,
            r#""input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"go"}]},"#,
            r#"{"type":"reasoning","id":"rs_1","summary":[{"text":"plan","type":"summary_text"}],"encrypted_content":"gAAA"},"#,
            r#"{"type":"message","role":"assistant","content":"looking"},"#,
            r#"{"type":"function_call","call_id":"c1","name":"read","arguments":"{ \"path\": \"/x\" }"},"#,
            r#"{"type":"function_call_output","call_id":"c1","output":"data"},"#,
            r#"{"type":"message","role":"assistant","content":"done"},"#,
            r#"{"type":"message","role":"user","content":[{"type":"input_text","text":"thanks"}]}]}"#,
        )
    );
    assert_eq!(req.header("content-type"), Some("application/json"));
    assert_eq!(req.report().unverifiable_reasoning_left_out, 0);
}

#[test]
fn the_config_overrides_the_defaults_and_reserved_keys_are_refused() {
    let config = Config::new("openai", "gpt-5.4")
        .with("store", json!(true))
        .unwrap()
        .with("include", json!([]))
        .unwrap();
    let req = serialize(&config, &projected(vec![u("u1", "hi")], None), &gpt()).unwrap();
    let b = body(&req);
    assert_eq!(
        (b["store"].clone(), b["include"].clone()),
        (json!(true), json!([]))
    );
    assert!(
        b.get("prompt_cache_key").is_none(),
        "no key without a context"
    );
    // `tools` (reserved on every route) is refused by `Config::with` itself.
    for key in [
        "instructions",
        "input",
        "previous_response_id",
        "conversation",
    ] {
        let config = Config::new("openai", "gpt-5.4")
            .with(key, json!("x"))
            .unwrap();
        let err = serialize(&config, &projected(vec![u("u1", "hi")], None), &gpt()).unwrap_err();
        assert!(
            matches!(err, WireError::ReservedConfigKey { key: k } if k == key),
            "{key}"
        );
    }
}

/// The chat and Messages names of the output limit, which the Responses API refuses as unknown
/// parameters, go out as `max_output_tokens`; two names for the limit are refused.
#[test]
fn the_output_limit_goes_out_under_the_responses_name() {
    for key in ["max_tokens", "max_completion_tokens", "max_output_tokens"] {
        let config = Config::new("openai", "gpt-5.4")
            .with(key, json!(1024))
            .unwrap();
        let req = serialize(&config, &projected(vec![u("u1", "hi")], None), &gpt()).unwrap();
        let b = body(&req);
        assert_eq!(b["max_output_tokens"], json!(1024), "{key}");
        assert!(b.get("max_tokens").is_none() && b.get("max_completion_tokens").is_none());
        // In the key's sorted place, once.
        assert_eq!(req.body().matches("max_output_tokens").count(), 1, "{key}");
    }
    for (a, b) in [
        ("max_tokens", "max_output_tokens"),
        ("max_tokens", "max_completion_tokens"),
    ] {
        let config = Config::new("openai", "gpt-5.4")
            .with(a, json!(1))
            .unwrap()
            .with(b, json!(2))
            .unwrap();
        let err = serialize(&config, &projected(vec![u("u1", "hi")], None), &gpt()).unwrap_err();
        assert!(
            matches!(err, WireError::ReservedConfigKey { .. }),
            "{a} and {b}: {err}"
        );
    }
}

#[test]
fn no_key_on_a_route_that_takes_none() {
    let route = Route::plain("openai", "gpt-x", WireApi::Responses);
    let req = send(&route, vec![u("u1", "hi")], vec![]).unwrap();
    assert!(body(&req).get("prompt_cache_key").is_none());
    assert!(gpt().prompt_cache_key());
}

#[test]
fn reasoning_goes_back_only_sealed_and_from_the_provider() {
    let unsealed = ContentBlock::Reasoning {
        text: "t".into(),
        extra: IndexMap::new(),
    };
    let foreign = Message::new(
        "a2",
        Role::Assistant,
        vec![reasoning("rs_2", "gBBB"), text("x")],
        MessageSource::Model {
            provider: "anthropic".into(),
            model: "m".into(),
        },
    );
    let messages = vec![
        u("u1", "go"),
        oa("a1", vec![unsealed, text("y")]),
        u("u2", "more"),
        foreign,
        u("u3", "end"),
    ];
    let req = send(&gpt(), messages, vec![]).unwrap();
    assert!(
        !req.body().contains(r#""type":"reasoning""#),
        "{}",
        req.body()
    );
    assert_eq!(req.report().unverifiable_reasoning_left_out, 2);
}

#[test]
fn a_missing_summary_comes_from_the_text() {
    let mut extra = IndexMap::new();
    extra.insert("id".to_owned(), json!("rs_1"));
    extra.insert("encrypted_content".to_owned(), json!("gA"));
    let block = ContentBlock::Reasoning {
        text: "why".into(),
        extra,
    };
    let req = send(
        &gpt(),
        vec![
            u("u1", "go"),
            oa("a1", vec![block, text("ok")]),
            u("u2", "n"),
        ],
        vec![],
    )
    .unwrap();
    assert!(req.body().contains(
        r#"{"type":"reasoning","id":"rs_1","encrypted_content":"gA","summary":[{"type":"summary_text","text":"why"}]}"#
    ));
}

#[test]
fn additions_go_as_additional_tools_items_where_the_developer_message_stands() {
    let read = object_tool("read");
    let grep = object_tool("grep").with_defer_loading(true);
    let messages = vec![
        u("u1", "go"),
        oa("a1", vec![text("ok")]),
        u("u2", "now grep"),
        d("d1", vec![add("grep"), text("grep is back")]),
    ];
    let req = send(&gpt(), messages, vec![read, grep]).unwrap();
    let b = body(&req);
    let tools: Vec<&str> = b["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        tools,
        ["read"],
        "the deferred declaration is not in `tools`"
    );
    let input = b["input"].as_array().unwrap();
    assert_eq!(
        input[3],
        json!({"type":"additional_tools","role":"developer","tools":[
            {"type":"function","name":"grep","description":"grep","parameters":{"type":"object"},"strict":false}
        ]})
    );
    assert_eq!(
        input[4],
        json!({"type":"message","role":"developer","content":[{"type":"input_text","text":"grep is back"}]})
    );
    assert!(!req.body().contains("defer_loading"));
}

#[test]
fn tool_changes_the_route_cannot_send_are_refused() {
    let grep = object_tool("grep");
    for (block, route) in [
        (remove("grep"), gpt()),
        (add("grep"), route_for("openai", "gpt-9-unknown")),
        (add("nope"), gpt()),
    ] {
        let messages = vec![u("u1", "go"), d("d1", vec![block.clone()])];
        let err = send(&route, messages, vec![grep.clone()]).unwrap_err();
        assert_eq!(err.message_id(), Some("d1"), "{block:?}: {err}");
    }
    let err = send(
        &gpt(),
        vec![u("u1", "go"), d("d1", vec![add("nope")])],
        vec![grep],
    )
    .unwrap_err();
    assert!(matches!(
        err,
        WireError::Message {
            kind: MessageFault::AdditionWithoutDeclaration { index: 0, .. },
            ..
        }
    ));
}

#[test]
fn outputs_pair_with_their_calls() {
    // An output without its call.
    let err = send(&gpt(), vec![u("u1", "go"), result("t1", "c9", "x")], vec![]).unwrap_err();
    assert!(matches!(
        err,
        WireError::Message {
            kind: MessageFault::OrphanToolResult { .. },
            ..
        }
    ));
    // A call without its output before the next user message.
    let messages = vec![
        u("u1", "go"),
        oa("a1", vec![call("c1", "read", "{}")]),
        u("u2", "x"),
    ];
    let err = send(&gpt(), messages, vec![object_tool("read")]).unwrap_err();
    assert!(matches!(
        err,
        WireError::Message {
            kind: MessageFault::MissingToolResult { .. },
            ..
        }
    ));
    // An additional_tools item between a call and its output.
    let messages = vec![
        u("u1", "go"),
        oa("a1", vec![call("c1", "read", "{}")]),
        d("d1", vec![add("read")]),
        result("t1", "c1", "x"),
    ];
    let err = send(&gpt(), messages, vec![object_tool("read")]).unwrap_err();
    assert!(matches!(
        err,
        WireError::Message {
            kind: MessageFault::MissingToolResult { .. },
            ..
        }
    ));
    // An empty user message.
    let err = send(&gpt(), vec![msg("u1", Role::User, vec![])], vec![]).unwrap_err();
    assert!(matches!(
        err,
        WireError::Message {
            kind: MessageFault::EmptyTurn,
            ..
        }
    ));
}

#[test]
fn strict_comes_from_the_tool_and_multi_part_outputs_are_parts() {
    let strict: ToolSchema = serde_json::from_str(
        r#"{"name":"s","description":"d","parameters":{"type":"object"},"strict":true}"#,
    )
    .unwrap();
    let messages = vec![
        u("u1", "go"),
        oa("a1", vec![call("c1", "s", "{}")]),
        msg("t1", Role::Tool, vec![text("a"), text("b")]),
    ];
    let req = send(&gpt(), messages, vec![strict]).unwrap();
    let b = body(&req);
    assert_eq!(b["tools"][0]["strict"], json!(true));
    assert_eq!(
        b["input"][2]["output"],
        json!([{"type":"input_text","text":"a"},{"type":"input_text","text":"b"}])
    );
}

#[test]
fn the_catalog_s_openai_routes() {
    // The GPT-5.4 family, and GPT-5.6 Sol with its alias (decision 144).
    for model in [
        "gpt-5.4",
        "gpt-5.4-pro",
        "gpt-5.4-mini",
        "gpt-5.4-nano",
        "gpt-5.6-sol",
        "gpt-5.6",
    ] {
        let r = route_for("openai", model);
        assert_eq!((r.model.as_ref(), r.api), (model, WireApi::Responses));
        assert_eq!(
            r.tool_update(),
            Some(ToolUpdateMode::AdditionOnly),
            "{model}"
        );
        assert!(r.prompt_cache_key() && !r.inline_definitions() && !r.system_prompt_in_history());
        assert_eq!((r.min_cache_tokens(), r.cache_block_tokens()), (1024, 128));
    }
    // GPT-5.6 Terra: no model page read.
    let unknown = route_for("openai", "gpt-5.6-terra");
    assert_eq!(
        (unknown.model.as_ref(), unknown.api),
        (ANY_MODEL, WireApi::Responses)
    );
    assert_eq!(
        unknown.tool_update(),
        None,
        "no page names it: no additional_tools"
    );
}

/// A random conversation of user turns, tool rounds and answers.
fn conversation() -> impl Strategy<Value = Vec<Message>> {
    prop::collection::vec((0usize..3, 0usize..3, "[a-z \"\\\\]{0,8}"), 1..8).prop_map(|turns| {
        let mut out = Vec::new();
        let mut n = 0;
        for (i, (calls, texts, t)) in turns.into_iter().enumerate() {
            out.push(u(&format!("u{i}"), &t));
            let mut blocks: Vec<ContentBlock> = (0..texts).map(|_| text(&t)).collect();
            let ids: Vec<String> = (0..calls)
                .map(|_| {
                    n += 1;
                    format!("c{n}")
                })
                .collect();
            blocks.extend(
                ids.iter()
                    .map(|id| call(id, "read", &format!("{{\"p\":\"{t}\"}}"))),
            );
            if !blocks.is_empty() {
                out.push(oa(&format!("a{i}"), blocks));
            }
            for id in &ids {
                out.push(result(&format!("t{id}"), id, &t));
            }
        }
        out
    })
}

proptest! {
    /// Every body is JSON, and every `function_call_output` follows the `function_call` of its
    /// `call_id`, whose arguments are the model's text byte for byte.
    #[test]
    fn bodies_are_json_and_outputs_follow_their_calls(messages in conversation()) {
        let req = send(&gpt(), messages.clone(), vec![object_tool("read")]).unwrap();
        let b = body(&req);
        let mut called = HashSet::new();
        for item in b["input"].as_array().unwrap() {
            match item["type"].as_str().unwrap() {
                "function_call" => {
                    prop_assert!(called.insert(item["call_id"].as_str().unwrap().to_owned()));
                }
                "function_call_output" => {
                    prop_assert!(called.contains(item["call_id"].as_str().unwrap()));
                }
                _ => {}
            }
        }
        let sent: Vec<&str> = b["input"].as_array().unwrap().iter()
            .filter_map(|i| i["arguments"].as_str()).collect();
        let written: Vec<&str> = messages.iter().flat_map(|m| m.content().iter()).filter_map(|c| match c {
            ContentBlock::ToolCall(call) => Some(call.arguments()),
            _ => None,
        }).collect();
        prop_assert_eq!(sent, written);
        // The meter reads the same body through the serializer's spans and by parsing it.
        let mut meter = Meter::new(&gpt());
        prop_assert!(meter.observe(req.body(), None).is_ok());
    }
}

/// OpenAI's chat completions take `prompt_cache_key` too: a chat route that claims it sends the
/// context's key, a config key wins, and a route that does not claim it sends none.
#[test]
fn a_chat_route_that_claims_the_key_sends_it() {
    let claims = Route::builder("openai", "gpt-4.1", WireApi::OpenAiChat)
        .prompt_cache_key(true)
        .build()
        .unwrap();
    let context = WireContext::default().with_prompt_cache_key("sess");
    let config = Config::new("openai", "gpt-4.1")
        .with("temperature", json!(0))
        .unwrap();
    let p = projected(vec![u("u1", "hi")], None);
    let req = serialize_with(&config, &p, &claims, &context).unwrap();
    assert!(
        req.body()
            .starts_with(r#"{"model":"gpt-4.1","prompt_cache_key":"sess","temperature":0,"#),
        "{}",
        req.body()
    );
    let own = config
        .clone()
        .with("prompt_cache_key", json!("mine"))
        .unwrap();
    let req = serialize_with(&own, &p, &claims, &context).unwrap();
    assert_eq!(body(&req)["prompt_cache_key"], json!("mine"));
    let req = serialize_with(&config, &p, &chat(), &context).unwrap();
    assert!(body(&req).get("prompt_cache_key").is_none());
}
