//! v4: Anthropic routes (inline definitions, thinking, caching lookback).

use super::*;

/// A v4 Anthropic entry as the catalog builds one: in-history with inline definitions, prompts
/// in history, beta on every request, binds thinking, automatic caching, no forced tool
/// choice, no prefill.
fn claude() -> Route {
    Route::builder("anthropic", "claude-test", WireApi::Messages)
        .tool_update(Some(ToolUpdateMode::InHistory))
        .system_prompt_in_history(true)
        .beta_always(true)
        .deferred_section_bytes(64)
        .inline_definitions(true)
        .binds_thinking(true)
        .auto_cache(true)
        .forced_tool_choice(false)
        .assistant_prefill(false)
        .build()
        .unwrap()
}

/// [`claude`] without `beta_always` (the beta then follows the tool-change blocks sent).
fn claude_no_beta() -> Route {
    claude().into_builder().beta_always(false).build().unwrap()
}

/// [`claude`] that accepts assistant prefill (to show what happens at the end of a request).
fn claude_prefill() -> Route {
    claude()
        .into_builder()
        .assistant_prefill(true)
        .build()
        .unwrap()
}

fn claude_config() -> Config {
    Config::new("anthropic", "claude-test")
        .with("max_tokens", json!(1024))
        .unwrap()
}

/// An assistant message produced by the Anthropic route's provider.
fn ca(id: &str, blocks: Vec<ContentBlock>) -> Message {
    Message::new(
        id,
        Role::Assistant,
        blocks,
        MessageSource::Model {
            provider: "anthropic".into(),
            model: "claude-test".into(),
        },
    )
}

fn reasoning_with(text: &str, fields: &[(&str, Value)]) -> ContentBlock {
    ContentBlock::Reasoning {
        text: text.into(),
        extra: fields
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect(),
    }
}

fn signed(text: &str, signature: &str) -> ContentBlock {
    reasoning_with(text, &[("signature", json!(signature))])
}

fn redacted(data: &str) -> ContentBlock {
    ContentBlock::other(json!({"type": "redacted_thinking", "data": data})).unwrap()
}

/// The by-value addition of `tool`, as the inline projection builds it (there is no public
/// constructor): a session whose header change adds `tool`, folded by value and projected
/// inline.
fn by_value(tool: &ToolSchema) -> ContentBlock {
    let session = Session::new("by-value");
    let header = |tools: Vec<ToolSchema>, reason| {
        Event::header(RequestHeader::new(Config::new("p", "m"), tools), reason)
    };
    session.append(header(Vec::new(), Reason::Initial)).unwrap();
    let seq = session
        .append(header(vec![tool.clone()], Reason::Change))
        .unwrap();
    let addition = Message::developer("d", vec![ContentBlock::addition(tool.name()).unwrap()]);
    session
        .append(Event::developer(addition, Some(seq)))
        .unwrap();
    let messages = session.messages();
    let history = session.tool_history_by_value();
    let projected = project_tool_updates_inline(&messages, None, Some(&history));
    match &projected.messages.to_vec()[..] {
        [m] => match m.content() {
            [block @ ContentBlock::InlineAddition(a)] => {
                assert_eq!(a.definition(), &tool.with_defer_loading(false));
                block.clone()
            }
            other => panic!("not one by-value addition: {other:?}"),
        },
        other => panic!("not one message: {other:?}"),
    }
}

fn thinking_block(text: &str, signature: &str) -> Value {
    json!({"type": "thinking", "thinking": text, "signature": signature})
}

fn ser(
    route: &Route,
    config: &Config,
    messages: Vec<Message>,
    tools: Option<Vec<ToolSchema>>,
    context: &WireContext<'_>,
) -> Result<WireRequest, WireError> {
    serialize_with(config, &projected(messages, tools), route, context)
}

fn ids(ids: &[&str]) -> HashSet<String> {
    ids.iter().map(|s| (*s).to_owned()).collect()
}

fn plan(policy: ThinkingPolicy, before_floor: &HashSet<String>) -> WireContext<'_> {
    let mut context = WireContext::default();
    context.thinking = Some(ThinkingPlan {
        policy,
        before_floor,
        rewrite: Rewrite::Tools,
    });
    context
}

fn lookback_context(previous: usize) -> WireContext<'static> {
    let mut context = WireContext::default();
    context.previous_blocks = Some(previous);
    context
}

const INLINE_BETA: &str = "inline-tools-2026-09-15";
const TOOL_CHANGE_BETA: &str = "mid-conversation-tool-changes-2026-07-01";
const THINKING_BETA: &str = "thinking-binding-controls-2026-08-01";

const POLICIES: [ThinkingPolicy; 3] = [
    ThinkingPolicy::StripThinking,
    ThinkingPolicy::DropBlock,
    ThinkingPolicy::Refuse,
];

#[test]
fn example_w9_automatic_cache_control_among_sorted_config_keys() {
    let config = claude_config().with("temperature", json!(0.5)).unwrap();
    let tools = Some(vec![object_tool("A"), object_tool("Bd")]);
    let req = ser(
        &claude(),
        &config,
        vec![u("u1", "hi")],
        tools.clone(),
        &WireContext::default(),
    )
    .unwrap();
    assert!(
        req.body().starts_with(
            r#"{"model":"claude-test","cache_control":{"type":"ephemeral"},"max_tokens":1024,"temperature":0.5,"tools":"#
        ),
        "{}",
        req.body()
    );
    assert_eq!(
        req.body().matches("cache_control").count(),
        1,
        "none on a tool"
    );
    assert_eq!(req.report().lookback_breakpoint, None);
    // The config's own `cache_control` is kept and not doubled.
    let own = config
        .with("cache_control", json!({"type": "ephemeral", "ttl": "1h"}))
        .unwrap();
    let req = ser(
        &claude(),
        &own,
        vec![u("u1", "hi")],
        tools.clone(),
        &WireContext::default(),
    )
    .unwrap();
    assert!(
        req.body().starts_with(
            r#"{"model":"claude-test","cache_control":{"ttl":"1h","type":"ephemeral"},"max_tokens":1024,"#
        ),
        "{}",
        req.body()
    );
    assert_eq!(req.body().matches("cache_control").count(), 1);
    // A route that caches by itself gets none.
    let no_auto = claude().into_builder().auto_cache(false).build().unwrap();
    let req = ser(
        &no_auto,
        &claude_config(),
        vec![u("u1", "hi")],
        tools,
        &WireContext::default(),
    )
    .unwrap();
    assert!(!req.body().contains("cache_control"), "{}", req.body());
}

/// `u1`, `a1`, then a user turn of `after` text blocks: `2 + after` blocks in all.
fn long_tail(after: usize) -> Vec<Message> {
    let blocks = (0..after).map(|i| text(&format!("b{i}"))).collect();
    vec![
        u("u1", "hi"),
        ca("a1", vec![text("ok")]),
        msg("u2", Role::User, blocks),
    ]
}

#[test]
fn example_w9_lookback_marks_the_previous_last_block_when_20_blocks_follow() {
    // The previous request sent `u1`, `a1` (2 blocks); 20 blocks follow: block 1 is marked.
    let req = ser(
        &claude_prefill(),
        &claude_config(),
        long_tail(20),
        None,
        &lookback_context(2),
    )
    .unwrap();
    assert_eq!(req.report().lookback_breakpoint, Some(1));
    let b = body(&req);
    assert_eq!(
        b["messages"][1],
        assistant_turn(json!([
            {"type": "text", "text": "ok", "cache_control": {"type": "ephemeral"}}
        ]))
    );
    assert!(
        req.body()
            .contains(r#"{"type":"text","text":"ok","cache_control":{"type":"ephemeral"}}"#),
        "written after the block's own fields: {}",
        req.body()
    );
    assert_eq!(
        req.body().matches("cache_control").count(),
        2,
        "top level + one block"
    );
    // 19 blocks after it: within the window, nothing marked.
    for (context, after) in [
        (lookback_context(2), 19),
        (WireContext::default(), 40),
        (lookback_context(0), 40),
        (lookback_context(60), 40),
    ] {
        let req = ser(
            &claude_prefill(),
            &claude_config(),
            long_tail(after),
            None,
            &context,
        )
        .unwrap();
        assert_eq!(req.report().lookback_breakpoint, None, "{after}");
        assert_eq!(req.body().matches("cache_control").count(), 1, "{after}");
    }
    // The config's ttl goes with it.
    let config = claude_config()
        .with("cache_control", json!({"type": "ephemeral", "ttl": "1h"}))
        .unwrap();
    let req = ser(
        &claude_prefill(),
        &config,
        long_tail(25),
        None,
        &lookback_context(2),
    )
    .unwrap();
    assert_eq!(
        body(&req)["messages"][1]["content"][0]["cache_control"],
        json!({"type": "ephemeral", "ttl": "1h"})
    );
    // Not on a route without automatic caching.
    let no_auto = claude_prefill()
        .into_builder()
        .auto_cache(false)
        .build()
        .unwrap();
    let req = ser(
        &no_auto,
        &claude_config(),
        long_tail(25),
        None,
        &lookback_context(2),
    )
    .unwrap();
    assert_eq!(req.report().lookback_breakpoint, None);
    assert!(!req.body().contains("cache_control"));
}

#[test]
fn lookback_counts_blocks_over_every_wire_message_and_skips_thinking() {
    let mut messages = vec![
        u("u1", "go"),
        ca(
            "a1",
            vec![signed("t", "s1"), text("x"), call("c1", "read", "{}")],
        ),
        result("t1", "c1", "out"),
        d("d1", vec![add("B"), text("note")]),
    ];
    messages.push(msg(
        "u2",
        Role::User,
        (0..20).map(|i| text(&format!("b{i}"))).collect(),
    ));
    let req = ser(
        &claude(),
        &claude_config(),
        messages.clone(),
        Some(vec![object_tool("A"), object_tool("Bd")]),
        &lookback_context(7),
    )
    .unwrap();
    // Wire blocks: u1 [0]; a1: thinking [1], text [2], tool_use [3]; one user turn (the result
    // and u2's 20 texts merged) [4..=24]; the system message flushed at the end [25, 26]. The
    // previous request's last block is 7 - 1 = 6, inside the merged user turn.
    let b = body(&req);
    let flat: Vec<&Value> = b["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["content"].as_array().unwrap())
        .collect();
    assert_eq!(flat.len(), 27);
    assert_eq!(req.report().lookback_breakpoint, Some(6));
    assert!(flat[6].get("cache_control").is_some(), "{}", req.body());
    assert_eq!(
        flat.iter()
            .filter(|v| v.get("cache_control").is_some())
            .count(),
        1
    );
    // The previous request ended on the thinking block (index 1): it cannot carry
    // `cache_control`, so the block before it takes it.
    let req = ser(
        &claude(),
        &claude_config(),
        messages,
        Some(vec![object_tool("A"), object_tool("Bd")]),
        &lookback_context(2),
    )
    .unwrap();
    assert_eq!(req.report().lookback_breakpoint, Some(0));
    let b = body(&req);
    assert_eq!(
        b["messages"][0]["content"][0]["cache_control"],
        json!({"type": "ephemeral"})
    );
    assert!(
        b["messages"][1]["content"][0]
            .get("cache_control")
            .is_none()
    );
}

#[test]
fn example_w10_by_value_block_and_inline_beta() {
    let req = ser(
        &claude(),
        &claude_config(),
        vec![u("u1", "hi"), d("d1", vec![by_value(&object_tool("B"))])],
        Some(vec![object_tool("A")]),
        &WireContext::default(),
    )
    .unwrap();
    assert!(
        req.body().ends_with(concat!(
            r#""tools":[{"name":"A","description":"A","input_schema":{"type":"object"}}],"#,
            r#""messages":[{"role":"user","content":[{"type":"text","text":"hi"}]},"#,
            r#"{"role":"system","content":[{"type":"tool_addition","tool":{"type":"tool_definition","definition":{"name":"B","description":"B","input_schema":{"type":"object"}}}}]}]}"#
        )),
        "{}",
        req.body()
    );
    assert_eq!(req.header("anthropic-beta"), Some(INLINE_BETA));
    // Exactly three fields in the definition: no `defer_loading`, no unknown field.
    let fancy: ToolSchema = serde_json::from_value(json!({
        "name": "X", "description": "x", "parameters": {"type": "object"},
        "deferLoading": true, "strict": true, "title": "X tool"
    }))
    .unwrap();
    let req = ser(
        &claude(),
        &claude_config(),
        vec![u("u1", "hi"), d("d1", vec![by_value(&fancy)])],
        Some(vec![object_tool("A")]),
        &WireContext::default(),
    )
    .unwrap();
    assert_eq!(
        body(&req)["messages"][1]["content"][0]["tool"]["definition"],
        json!({"name": "X", "description": "x", "input_schema": {"type": "object"}})
    );
}

#[test]
fn inline_routes_send_the_inline_beta_only_with_a_tool_change_and_never_the_placeholder() {
    let with_placeholder = claude_no_beta()
        .into_builder()
        .deferred_placeholder(true)
        .build()
        .unwrap();
    let cases: Vec<(&str, Vec<Message>, Option<&str>)> = vec![
        ("no change", vec![u("u1", "hi")], None),
        (
            "by reference",
            vec![u("u1", "hi"), d("d1", vec![remove("A")])],
            Some(INLINE_BETA),
        ),
        (
            "by value",
            vec![u("u1", "hi"), d("d1", vec![by_value(&object_tool("B"))])],
            Some(INLINE_BETA),
        ),
        (
            "by value, left out behind an assistant turn",
            vec![
                u("u1", "hi"),
                ca("a1", vec![text("ok")]),
                d("d1", vec![by_value(&object_tool("B"))]),
                u("u2", "more"),
            ],
            Some(INLINE_BETA),
        ),
    ];
    for (name, messages, beta) in cases {
        let req = ser(
            &with_placeholder,
            &claude_config(),
            messages,
            Some(vec![object_tool("A")]),
            &WireContext::default(),
        )
        .unwrap();
        assert_eq!(req.header("anthropic-beta"), beta, "{name}");
        assert!(!req.body().contains(DEFERRED_PLACEHOLDER_NAME), "{name}");
    }
    // On `beta_always`, every request carries the inline beta, never the by-reference one.
    let req = ser(
        &claude(),
        &claude_config(),
        vec![u("u1", "hi")],
        None,
        &WireContext::default(),
    )
    .unwrap();
    assert_eq!(req.header("anthropic-beta"), Some(INLINE_BETA));
}

#[test]
fn inline_definition_unsupported() {
    // `anthropic()` is an in-history route without inline definitions.
    for route in [flash(), anthropic()] {
        let err = ser(
            &route,
            &config(),
            vec![
                u("u1", "hi"),
                d("d1", vec![text("x"), by_value(&object_tool("B"))]),
            ],
            None,
            &WireContext::default(),
        )
        .unwrap_err();
        assert!(
            matches!(&err, WireError::Message { message_id, kind: MessageFault::InlineDefinitionUnsupported { index: 1, tool } }
                if message_id == "d1" && tool == "B"),
            "{err:?}"
        );
    }
}

#[test]
fn a_redefinition_reaching_the_serializer_is_refused() {
    let err = ser(
        &claude(),
        &claude_config(),
        vec![
            u("u1", "hi"),
            d("d1", vec![ContentBlock::redefinition("A").unwrap()]),
        ],
        Some(vec![object_tool("A")]),
        &WireContext::default(),
    )
    .unwrap_err();
    assert!(
        matches!(&err, WireError::Message { message_id, kind: MessageFault::DeveloperBlock { index: 0, block_type } }
            if message_id == "d1" && block_type == "tool-redefinition"),
        "{err:?}"
    );
}

#[test]
fn example_w18_schema_root_not_object() {
    let schema = |parameters: Value| -> ToolSchema {
        serde_json::from_value(json!({"name": "T", "description": "t", "parameters": parameters}))
            .unwrap()
    };
    for bad in [
        json!({}),
        json!({"type": "string"}),
        json!({"type": ["object"]}),
    ] {
        let err = ser(
            &claude(),
            &claude_config(),
            vec![u("u1", "hi")],
            Some(vec![object_tool("A"), schema(bad.clone())]),
            &WireContext::default(),
        )
        .unwrap_err();
        assert!(
            matches!(&err, WireError::SchemaRootNotObject { tool, message_id: None, index: None }
                if tool == "T"),
            "{bad}: {err:?}"
        );
        let err = ser(
            &claude(),
            &claude_config(),
            vec![
                u("u1", "hi"),
                d("d1", vec![text("x"), by_value(&schema(bad))]),
            ],
            Some(vec![object_tool("A")]),
            &WireContext::default(),
        )
        .unwrap_err();
        assert!(
            matches!(&err, WireError::SchemaRootNotObject { tool, message_id: Some(m), index: Some(1) }
                if tool == "T" && m == "d1"),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            "tool `T` (defined by value in message d1, block 1): its `parameters` must be a JSON \
             object with `\"type\": \"object\"` at its root"
        );
    }
    // Other providers keep their own rules: DeepSeek takes `{}`.
    assert!(wire_tools(&flash(), vec![tool("T")]).is_ok());
}

fn wire_tools(route: &Route, tools: Vec<ToolSchema>) -> Result<WireRequest, WireError> {
    serialize(
        &config(),
        &projected(vec![u("u1", "hi")], Some(tools)),
        route,
    )
}

#[test]
fn anthropic_tool_fields_are_sent_in_a_fixed_order_and_no_other_unknown_field() {
    let rich: ToolSchema = serde_json::from_value(json!({
        "name": "R", "description": "r", "parameters": {"type": "object"},
        "title": "Rich", "eager_input_streaming": true, "cache_control": {"type": "ephemeral"},
        "input_examples": [{"q": "x"}], "strict": true, "deferLoading": true
    }))
    .unwrap();
    let req = ser(
        &claude(),
        &claude_config(),
        vec![u("u1", "hi")],
        Some(vec![object_tool("A"), rich.clone()]),
        &WireContext::default(),
    )
    .unwrap();
    assert!(
        req.body().contains(concat!(
            r#"{"name":"R","description":"r","input_schema":{"type":"object"},"#,
            r#""strict":true,"input_examples":[{"q":"x"}],"eager_input_streaming":true,"defer_loading":true}"#
        )),
        "{}",
        req.body()
    );
    assert_eq!(
        req.body().matches("cache_control").count(),
        1,
        "only the top-level one: never on a (deferred) tool"
    );
    // Not on other providers.
    let req = wire_tools(&flash(), vec![rich]).unwrap();
    assert!(
        req.body().contains(
            r#"{"name":"R","description":"r","input_schema":{"type":"object"},"defer_loading":true}"#
        ),
        "{}",
        req.body()
    );
}

#[test]
fn tool_limit_exceeded() {
    // Deferred declarations: 10,000 are accepted, 10,001 are not.
    let mut tools: Vec<ToolSchema> = (0..ToolLimit::MAX_TOOLS)
        .map(|i| object_tool(&format!("t{i}")).with_defer_loading(true))
        .collect();
    tools.push(object_tool("A"));
    assert!(wire_tools(&claude(), tools.clone()).is_ok());
    tools.push(object_tool("one_more").with_defer_loading(true));
    let err = ser(
        &claude(),
        &claude_config(),
        vec![u("u1", "hi")],
        Some(tools.clone()),
        &WireContext::default(),
    )
    .unwrap_err();
    assert!(
        matches!(
            err,
            WireError::ToolLimitExceeded {
                limit: ToolLimit::DeferredTools,
                found: 10_001,
                message_id: None
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("open a request series"), "{err}");
    // The limits are the Anthropic API's: DeepSeek's endpoint is not held to them.
    assert!(wire_tools(&flash(), tools).is_ok());

    // By-value tools: a removal makes a name unavailable; a redefinition replaces it.
    let defs = |range: std::ops::Range<usize>| -> Vec<ContentBlock> {
        range
            .map(|i| by_value(&object_tool(&format!("v{i}"))))
            .collect()
    };
    let mut d2 = vec![
        remove("v0"),
        by_value(&object_tool("w")),
        by_value(&object_tool("v1")),
    ];
    let ok = vec![
        u("u1", "hi"),
        d("d1", defs(0..ToolLimit::MAX_TOOLS)),
        ca("a1", vec![text("ok")]),
        u("u2", "more"),
        d("d2", d2.clone()),
    ];
    let req = ser(
        &claude(),
        &claude_config(),
        ok,
        Some(vec![object_tool("A")]),
        &WireContext::default(),
    );
    assert!(req.is_ok(), "{:?}", req.err());
    d2.remove(0);
    let over = vec![
        u("u1", "hi"),
        d("d1", defs(0..ToolLimit::MAX_TOOLS)),
        ca("a1", vec![text("ok")]),
        u("u2", "more"),
        d("d2", d2),
    ];
    let err = ser(
        &claude(),
        &claude_config(),
        over,
        Some(vec![object_tool("A")]),
        &WireContext::default(),
    )
    .unwrap_err();
    assert!(
        matches!(&err, WireError::ToolLimitExceeded { limit: ToolLimit::ByValueTools, found: 10_001, message_id: Some(m) }
            if m == "d2"),
        "{err:?}"
    );
    // A definition left out of the request (waiting behind the last assistant turn) is not
    // counted.
    let waiting = vec![
        u("u1", "hi"),
        d("d1", defs(0..ToolLimit::MAX_TOOLS)),
        ca("a1", vec![text("ok")]),
        d("d2", vec![by_value(&object_tool("w"))]),
    ];
    assert!(
        ser(
            &claude_prefill(),
            &claude_config(),
            waiting,
            Some(vec![object_tool("A")]),
            &WireContext::default()
        )
        .is_ok()
    );

    // Bytes: two definitions of 2.5 MB each are over 4 MB; redefining the first instead is not.
    let big = |name: &str| -> ToolSchema {
        let mut parameters = serde_json::Map::new();
        parameters.insert("type".into(), json!("object"));
        ToolSchema::new(name, "x".repeat(2_500_000), parameters)
    };
    let err = ser(
        &claude(),
        &claude_config(),
        vec![
            u("u1", "hi"),
            d("d1", vec![by_value(&big("p")), by_value(&big("q"))]),
        ],
        Some(vec![object_tool("A")]),
        &WireContext::default(),
    )
    .unwrap_err();
    assert!(
        matches!(&err, WireError::ToolLimitExceeded { limit: ToolLimit::ByValueBytes, found, message_id: Some(m) }
            if *found > ToolLimit::MAX_DEFINITION_BYTES && m == "d1"),
        "{err:?}"
    );
    assert!(
        ser(
            &claude(),
            &claude_config(),
            vec![
                u("u1", "hi"),
                d("d1", vec![by_value(&big("p")), by_value(&big("p"))]),
            ],
            Some(vec![object_tool("A")]),
            &WireContext::default(),
        )
        .is_ok()
    );
}

#[test]
fn example_w13_forced_tool_choice() {
    for choice in [json!({"type": "any"}), json!({"type": "tool", "name": "A"})] {
        let config = claude_config().with("tool_choice", choice.clone()).unwrap();
        let err = ser(
            &claude(),
            &config,
            vec![u("u1", "hi")],
            Some(vec![object_tool("A")]),
            &WireContext::default(),
        )
        .unwrap_err();
        let ty = choice["type"].as_str().unwrap();
        assert!(
            matches!(&err, WireError::ForcedToolChoice { choice_type } if choice_type == ty),
            "{err:?}"
        );
        let text = err.to_string();
        assert!(
            text.contains(r#"{"type":"auto"}"#) && text.contains("strict"),
            "{text}"
        );
        // A route that accepts it sends it.
        let ok = claude()
            .into_builder()
            .forced_tool_choice(true)
            .build()
            .unwrap();
        assert!(
            ser(
                &ok,
                &config,
                vec![u("u1", "hi")],
                Some(vec![object_tool("A")]),
                &WireContext::default()
            )
            .is_ok()
        );
    }
    for choice in [json!({"type": "auto"}), json!({"type": "none"})] {
        let config = claude_config().with("tool_choice", choice).unwrap();
        assert!(
            ser(
                &claude(),
                &config,
                vec![u("u1", "hi")],
                Some(vec![object_tool("A")]),
                &WireContext::default()
            )
            .is_ok()
        );
    }
}

#[test]
fn example_w3_assistant_prefill_refused_where_the_model_refuses_it() {
    let history = || {
        vec![
            u("u1", "hi"),
            ca("a1", vec![text("ok")]),
            d("d1", vec![add("X")]),
        ]
    };
    let err = ser(
        &claude(),
        &claude_config(),
        history(),
        None,
        &WireContext::default(),
    )
    .unwrap_err();
    assert!(
        matches!(&err, WireError::Message { message_id, kind: MessageFault::AssistantPrefill } if message_id == "a1"),
        "{err:?}"
    );
    assert!(err.to_string().contains("must end with a user message"));
    // The route accepting prefill sends it as before (the update waits).
    let req = ser(
        &claude_prefill(),
        &claude_config(),
        history(),
        None,
        &WireContext::default(),
    )
    .unwrap();
    assert_eq!(
        body(&req)["messages"],
        json!([
            user_turn(json!([t("hi")])),
            assistant_turn(json!([t("ok")]))
        ])
    );
    // Ending with a user turn or a tool result is fine.
    for end in [u("u2", "more"), result("t1", "c1", "x")] {
        let mut messages = vec![u("u1", "hi"), ca("a1", vec![call("c1", "r", "{}")])];
        if end.role() == Role::User {
            messages.push(result("t1", "c1", "x"));
        }
        messages.push(end);
        assert!(
            ser(
                &claude(),
                &claude_config(),
                messages,
                None,
                &WireContext::default()
            )
            .is_ok()
        );
    }
}

#[test]
fn example_w17_unverifiable_reasoning_left_out_and_counted() {
    let other_provider = Message::new(
        "a2",
        Role::Assistant,
        vec![signed("theirs", "sig"), redacted("zzz"), text("b")],
        MessageSource::Model {
            provider: "deepseek".into(),
            model: "deepseek-flash".into(),
        },
    );
    let messages = vec![
        u("u1", "hi"),
        ca(
            "a1",
            vec![
                reasoning_with("no signature", &[]),
                reasoning_with("empty", &[("signature", json!(""))]),
                reasoning_with("not a string", &[("signature", json!(7))]),
                signed("good", "s1"),
                text("a"),
            ],
        ),
        u("u2", "more"),
        other_provider,
        u("u3", "again"),
    ];
    let req = ser(
        &claude(),
        &claude_config(),
        messages,
        None,
        &WireContext::default(),
    )
    .unwrap();
    assert_eq!(req.report().unverifiable_reasoning_left_out, 5);
    assert_eq!(req.report().thinking_left_out, 0);
    let b = body(&req);
    assert_eq!(
        b["messages"][1],
        assistant_turn(json!([thinking_block("good", "s1"), t("a")]))
    );
    assert_eq!(b["messages"][3], assistant_turn(json!([t("b")])));
    assert!(!req.body().contains("theirs") && !req.body().contains("zzz"));
}

#[test]
fn redacted_thinking_is_sent_back_verbatim_in_place() {
    let messages = vec![
        u("u1", "hi"),
        ca(
            "a1",
            vec![
                signed("t", "s1"),
                ContentBlock::other(
                    json!({"type": "redacted_thinking", "data": "EnC=", "z": {"b": 1, "a": 2}}),
                )
                .unwrap(),
                text("ok"),
            ],
        ),
        u("u2", "more"),
    ];
    let req = ser(
        &claude(),
        &claude_config(),
        messages,
        None,
        &WireContext::default(),
    )
    .unwrap();
    assert!(
        req.body().contains(concat!(
            r#"{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"s1"},"#,
            r#"{"data":"EnC=","type":"redacted_thinking","z":{"a":2,"b":1}},"#,
            r#"{"type":"text","text":"ok"}]}"#
        )),
        "{}",
        req.body()
    );
    assert_eq!(*req.report(), WireReport::default());
    // Any other `Other` in an assistant message is still refused.
    let err = ser(
        &claude(),
        &claude_config(),
        vec![u("u1", "hi"), ca("a1", vec![other("image")]), u("u2", "x")],
        None,
        &WireContext::default(),
    )
    .unwrap_err();
    assert!(
        matches!(
            err,
            WireError::Message {
                kind: MessageFault::UnsupportedBlock { index: 0, .. },
                ..
            }
        ),
        "{err:?}"
    );
}

/// Issue 20 item 8: an assistant message that leaving reasoning out empties sends nothing. The
/// API refuses an empty assistant turn, and the policy that empties it holds for every later
/// request, so refusing stopped the session: the message opens no turn and the user turns
/// around it merge (decision 95).
#[test]
fn an_assistant_message_left_empty_sends_nothing() {
    // Leaving unverifiable reasoning out empties a message in the middle...
    let req = ser(
        &claude(),
        &claude_config(),
        vec![
            u("u1", "hi"),
            ca("a1", vec![reasoning_with("r", &[])]),
            u("u2", "more"),
        ],
        None,
        &WireContext::default(),
    )
    .unwrap();
    assert_eq!(
        body(&req)["messages"],
        json!([{"role": "user", "content": [t("hi"), t("more")]}])
    );
    assert_eq!(req.report().unverifiable_reasoning_left_out, 1);
    // ... or at the end (where an empty final turn is otherwise allowed); and stripping does
    // the same.
    let floor = ids(&["a1"]);
    let req = ser(
        &claude_prefill(),
        &claude_config(),
        vec![
            u("u1", "hi"),
            ca("a1", vec![signed("r", "s"), redacted("x")]),
        ],
        None,
        &plan(ThinkingPolicy::StripThinking, &floor),
    )
    .unwrap();
    assert_eq!(
        body(&req)["messages"],
        json!([{"role": "user", "content": [t("hi")]}])
    );
    assert_eq!(req.report().thinking_left_out, 2);
    // Between two tool rounds: the results and the next user message make one user turn.
    let floor2 = ids(&["a2"]);
    let req = ser(
        &claude(),
        &claude_config(),
        vec![
            u("u1", "hi"),
            ca("a1", vec![call("c1", "read", "{}")]),
            result("t1", "c1", "ok"),
            ca("a2", vec![signed("r", "s")]),
            u("u2", "more"),
        ],
        None,
        &plan(ThinkingPolicy::StripThinking, &floor2),
    )
    .unwrap();
    let messages = &body(&req)["messages"];
    assert_eq!(messages.as_array().unwrap().len(), 3, "{messages}");
    assert_eq!(messages[2]["content"][1], t("more"));
    // A second message of the same turn keeps it non-empty: the API sees turns.
    let req = ser(
        &claude(),
        &claude_config(),
        vec![
            u("u1", "hi"),
            ca("a1", vec![signed("r", "s")]),
            ca("a2", vec![text("ok")]),
            u("u2", "more"),
        ],
        None,
        &plan(ThinkingPolicy::StripThinking, &floor),
    )
    .unwrap();
    assert_eq!(body(&req)["messages"][1], assistant_turn(json!([t("ok")])));
}

/// W11's history: a signed block and text before the floor, then the user's turn.
fn w11() -> Vec<Message> {
    vec![
        u("u1", "hi"),
        ca("a1", vec![signed("pre", "s1"), text("ok")]),
        u("u2", "more"),
    ]
}

#[test]
fn example_w11_strip_thinking_leaves_pre_floor_blocks_out() {
    let floor = ids(&["u1", "a1"]);
    let req = ser(
        &claude(),
        &claude_config(),
        w11(),
        None,
        &plan(ThinkingPolicy::StripThinking, &floor),
    )
    .unwrap();
    assert_eq!(body(&req)["messages"][1], assistant_turn(json!([t("ok")])));
    assert_eq!(req.report().thinking_left_out, 1);
    assert!(!req.report().drop_block);
    assert!(!req.body().contains("block_binding"));
    assert_eq!(req.header("anthropic-beta"), Some(INLINE_BETA));
}

#[test]
fn example_w11_drop_block_sends_them_with_block_binding_and_its_beta() {
    let floor = ids(&["u1", "a1"]);
    let config = claude_config()
        .with(
            "thinking",
            json!({"type": "enabled", "budget_tokens": 2048}),
        )
        .unwrap();
    let req = ser(
        &claude(),
        &config,
        w11(),
        None,
        &plan(ThinkingPolicy::DropBlock, &floor),
    )
    .unwrap();
    assert!(
        req.body().starts_with(concat!(
            r#"{"model":"claude-test","cache_control":{"type":"ephemeral"},"max_tokens":1024,"#,
            r#""thinking":{"block_binding":{"prefix_mismatch_behavior":"drop_block"},"budget_tokens":2048,"type":"enabled"},"#,
            r#""messages":"#
        )),
        "{}",
        req.body()
    );
    assert_eq!(
        body(&req)["messages"][1],
        assistant_turn(json!([thinking_block("pre", "s1"), t("ok")]))
    );
    assert!(req.report().drop_block);
    assert_eq!(req.report().thinking_left_out, 0);
    assert_eq!(
        req.header("anthropic-beta"),
        Some("inline-tools-2026-09-15,thinking-binding-controls-2026-08-01")
    );
    // Without a config `thinking`: adaptive. An existing `block_binding` keeps its other keys.
    let req = ser(
        &claude(),
        &claude_config(),
        w11(),
        None,
        &plan(ThinkingPolicy::DropBlock, &floor),
    )
    .unwrap();
    assert_eq!(
        body(&req)["thinking"],
        json!({"type": "adaptive", "block_binding": {"prefix_mismatch_behavior": "drop_block"}})
    );
    let config = claude_config().with(
        "thinking",
        json!({"type": "adaptive", "block_binding": {"prefix_mismatch_behavior": "error", "x": 1}}),
    ).unwrap();
    let req = ser(
        &claude(),
        &config,
        w11(),
        None,
        &plan(ThinkingPolicy::DropBlock, &floor),
    )
    .unwrap();
    assert_eq!(
        body(&req)["thinking"],
        json!({"type": "adaptive", "block_binding": {"prefix_mismatch_behavior": "drop_block", "x": 1}})
    );
    // The thinking beta alone where no tool-change beta applies; after the by-reference one on
    // a by-reference route.
    let req = ser(
        &claude_no_beta(),
        &claude_config(),
        w11(),
        None,
        &plan(ThinkingPolicy::DropBlock, &floor),
    )
    .unwrap();
    assert_eq!(req.header("anthropic-beta"), Some(THINKING_BETA));
    let by_reference = claude()
        .into_builder()
        .inline_definitions(false)
        .build()
        .unwrap();
    let req = ser(
        &by_reference,
        &claude_config(),
        w11(),
        None,
        &plan(ThinkingPolicy::DropBlock, &floor),
    )
    .unwrap();
    assert_eq!(
        req.header("anthropic-beta"),
        Some(format!("{TOOL_CHANGE_BETA},{THINKING_BETA}").as_str())
    );
    // Redacted blocks are bound the same way.
    let history = vec![
        u("u1", "hi"),
        ca("a1", vec![redacted("r"), text("ok")]),
        u("u2", "x"),
    ];
    let req = ser(
        &claude_no_beta(),
        &claude_config(),
        history,
        None,
        &plan(ThinkingPolicy::DropBlock, &floor),
    )
    .unwrap();
    assert!(req.report().drop_block && req.body().contains("redacted_thinking"));
}

#[test]
fn example_w11_refuse_is_a_thinking_rewrite_error() {
    let floor = ids(&["u1", "a1"]);
    for rewrite in [
        Rewrite::Tools,
        Rewrite::System,
        Rewrite::History { message: 3 },
    ] {
        let mut context = WireContext::default();
        context.thinking = Some(ThinkingPlan {
            policy: ThinkingPolicy::Refuse,
            before_floor: &floor,
            rewrite,
        });
        let err = ser(&claude(), &claude_config(), w11(), None, &context).unwrap_err();
        assert!(
            matches!(&err, WireError::Message { message_id, kind: MessageFault::ThinkingRewrite { index: 0, rewrite: r } }
                if message_id == "a1" && *r == rewrite),
            "{err:?}"
        );
        assert!(err.to_string().contains(&rewrite.to_string()), "{err}");
    }
    // A redacted block counts too.
    let history = vec![
        u("u1", "hi"),
        ca("a1", vec![text("ok"), redacted("r")]),
        u("u2", "x"),
    ];
    let err = ser(
        &claude(),
        &claude_config(),
        history,
        None,
        &plan(ThinkingPolicy::Refuse, &floor),
    )
    .unwrap_err();
    assert!(
        matches!(
            err,
            WireError::Message {
                kind: MessageFault::ThinkingRewrite { index: 1, .. },
                ..
            }
        ),
        "{err:?}"
    );
}

#[test]
fn drop_block_thinking_type() {
    let floor = ids(&["a1"]);
    for (thinking, found) in [
        (json!({"type": "disabled"}), "`disabled`"),
        (json!({"budget_tokens": 1}), "missing"),
        (json!(true), "missing (`thinking` is true, not an object)"),
    ] {
        let config = claude_config().with("thinking", thinking.clone()).unwrap();
        let err = ser(
            &claude(),
            &config,
            w11(),
            None,
            &plan(ThinkingPolicy::DropBlock, &floor),
        )
        .unwrap_err();
        assert!(
            matches!(&err, WireError::DropBlockThinkingType { found: f } if f == found),
            "{thinking}: {err:?}"
        );
        assert!(err.to_string().contains("StripThinking"), "{err}");
        // Nothing to bind: the request is sent as it is.
        let floor = ids(&["u1"]);
        assert!(
            ser(
                &claude(),
                &config,
                w11(),
                None,
                &plan(ThinkingPolicy::DropBlock, &floor)
            )
            .is_ok()
        );
    }
}

#[test]
fn example_w12_no_pre_floor_thinking_sends_the_request_unchanged() {
    let plain = ser(
        &claude(),
        &claude_config(),
        w11(),
        None,
        &WireContext::default(),
    )
    .unwrap();
    // The floor is before `a1` (only `u1` precedes it): the block was produced after it.
    for floor in [ids(&[]), ids(&["u1"])] {
        for policy in POLICIES {
            let req = ser(
                &claude(),
                &claude_config(),
                w11(),
                None,
                &plan(policy, &floor),
            )
            .unwrap();
            assert_eq!(req, plain, "{policy:?} {floor:?}");
        }
    }
    assert!(plain.body().contains(r#""signature":"s1""#));
}

#[test]
fn example_w12_prime_a_pre_floor_block_stays_out_and_later_thinking_is_sent() {
    // W11's rewrite set the floor after `u2`; the series continued with `a2`.
    let history = || {
        vec![
            u("u1", "hi"),
            ca("a1", vec![signed("pre", "s1"), text("ok")]),
            u("u2", "more"),
            ca("a2", vec![signed("post", "s2"), text("fine")]),
            u("u3", "again"),
        ]
    };
    let floor = ids(&["u1", "a1", "u2"]);
    let req = ser(
        &claude(),
        &claude_config(),
        history(),
        None,
        &plan(ThinkingPolicy::StripThinking, &floor),
    )
    .unwrap();
    let b = body(&req);
    assert_eq!(b["messages"][1], assistant_turn(json!([t("ok")])));
    assert_eq!(
        b["messages"][3],
        assistant_turn(json!([thinking_block("post", "s2"), t("fine")]))
    );
    assert_eq!(req.report().thinking_left_out, 1);
    let req = ser(
        &claude(),
        &claude_config(),
        history(),
        None,
        &plan(ThinkingPolicy::DropBlock, &floor),
    )
    .unwrap();
    assert!(req.report().drop_block && req.body().contains("block_binding"));
    assert!(
        req.body().contains(r#""signature":"s1""#) && req.body().contains(r#""signature":"s2""#)
    );
    assert_eq!(
        req.header("anthropic-beta"),
        Some("inline-tools-2026-09-15,thinking-binding-controls-2026-08-01")
    );
}

#[test]
fn example_w14_the_last_assistant_message_is_stripped_too() {
    let floor = ids(&["u1", "a1"]);
    // A tool-use turn waiting for its result's answer: the last assistant message.
    let req = ser(
        &claude(),
        &claude_config(),
        vec![
            u("u1", "go"),
            ca("a1", vec![signed("pre", "s1"), call("c1", "read", "{}")]),
            result("t1", "c1", "out"),
        ],
        None,
        &plan(ThinkingPolicy::StripThinking, &floor),
    )
    .unwrap();
    assert_eq!(
        body(&req)["messages"][1],
        assistant_turn(json!([{"type": "tool_use", "id": "c1", "name": "read", "input": {}}]))
    );
    assert_eq!(req.report().thinking_left_out, 1);
    // The last message itself, where prefill is accepted.
    let req = ser(
        &claude_prefill(),
        &claude_config(),
        vec![
            u("u1", "go"),
            ca("a1", vec![signed("pre", "s1"), text("par")]),
        ],
        None,
        &plan(ThinkingPolicy::StripThinking, &floor),
    )
    .unwrap();
    assert_eq!(body(&req)["messages"][1], assistant_turn(json!([t("par")])));
    assert_eq!(req.report().thinking_left_out, 1);
}

#[test]
fn example_w16_blocks_outside_the_floor_or_routes_without_binding_are_never_altered() {
    // A series start that changed no byte: the caller's floor names no thinking message.
    let history = vec![
        u("u1", "hi"),
        ca("a1", vec![text("no thinking here")]),
        u("u2", "more"),
        ca("a2", vec![signed("t", "s2"), text("ok")]),
        u("u3", "again"),
    ];
    let plain = ser(
        &claude(),
        &claude_config(),
        history.clone(),
        None,
        &WireContext::default(),
    )
    .unwrap();
    let floor = ids(&["u1", "a1", "u2"]);
    for policy in POLICIES {
        let req = ser(
            &claude(),
            &claude_config(),
            history.clone(),
            None,
            &plan(policy, &floor),
        )
        .unwrap();
        assert_eq!(req, plain, "{policy:?}");
    }
    // A plan passed for a route that does not bind thinking is ignored.
    let unbound = claude()
        .into_builder()
        .binds_thinking(false)
        .build()
        .unwrap();
    let plain = ser(
        &unbound,
        &claude_config(),
        w11(),
        None,
        &WireContext::default(),
    )
    .unwrap();
    let floor = ids(&["u1", "a1"]);
    for policy in POLICIES {
        let req = ser(
            &unbound,
            &claude_config(),
            w11(),
            None,
            &plan(policy, &floor),
        )
        .unwrap();
        assert_eq!(req, plain, "{policy:?}");
    }
}

/// Issue 20, item 2: a name the vendor refuses (`^[a-zA-Z0-9_-]{1,128}$` on the Messages API,
/// 64 bytes on OpenAI chat) is a typed error before any I/O, in `tools` and by value.
#[test]
fn tool_names_the_vendor_refuses_are_not_sent() {
    let long = "a".repeat(129);
    for bad in ["github.search_issues", "b c", long.as_str(), "é", "a/b"] {
        for route in [claude(), flash()] {
            let err = wire_tools(&route, vec![named(bad)]).unwrap_err();
            assert!(
                matches!(&err, WireError::InvalidToolName { tool, max_len: 128, message_id: None, index: None } if tool == bad),
                "{bad:?} on {}: {err:?}",
                route.model
            );
        }
        let err = ser(
            &claude(),
            &claude_config(),
            vec![
                u("u1", "hi"),
                d("d1", vec![text("x"), by_value(&named(bad))]),
            ],
            Some(vec![object_tool("A")]),
            &WireContext::default(),
        )
        .unwrap_err();
        assert!(
            matches!(&err, WireError::InvalidToolName { tool, message_id: Some(m), index: Some(1), .. } if tool == bad && m == "d1"),
            "{bad:?} by value: {err:?}"
        );
    }
    assert!(wire_tools(&claude(), vec![named(&"a".repeat(128))]).is_ok());
    assert!(wire_tools(&flash(), vec![named("mcp__github__search-issues_2")]).is_ok());
    let chat = route_for("openai-compatible", "*");
    assert_eq!(chat.api, WireApi::OpenAiChat);
    let err = wire_tools(&chat, vec![named(&"a".repeat(65))]).unwrap_err();
    assert!(
        matches!(&err, WireError::InvalidToolName { max_len: 64, .. }),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        format!(
            "tool `{}` (declared in `tools`): a name is 1 to 64 ASCII letters, digits, `_` or `-`",
            "a".repeat(65)
        )
    );
    assert!(wire_tools(&chat, vec![named(&"a".repeat(64))]).is_ok());
}

fn named(name: &str) -> ToolSchema {
    ToolSchema::from_value(
        json!({"name": name, "description": "d", "parameters": {"type": "object"}}),
    )
    .unwrap()
}
