//! Table-driven tests of both serializers: the worked W rows, one test per
//! `WireError` variant, key order, and the mapping of every block kind.

use std::borrow::Cow;

use indexmap::IndexMap;
use serde_json::{Value, json};

use super::*;
use crate::route::ToolUpdateMode;

// --- fixtures ------------------------------------------------------------------------------

/// `deepseek-flash` as the catalog describes it: addition-only, prompts in history, no beta_always.
fn flash() -> Route {
    Route::builder("deepseek", "deepseek-flash", WireApi::Messages)
        .tool_update(Some(ToolUpdateMode::AdditionOnly))
        .system_prompt_in_history(true)
        .build()
        .unwrap()
}

/// An Anthropic-style entry: in-history, prompts in history, beta on every request.
fn anthropic() -> Route {
    Route::builder("anthropic", "claude-test", WireApi::Messages)
        .tool_update(Some(ToolUpdateMode::InHistory))
        .system_prompt_in_history(true)
        .beta_always(true)
        .deferred_section_bytes(64)
        .build()
        .unwrap()
}

/// A Messages route without a mode and without prompts in history.
fn plain() -> Route {
    Route::plain("deepseek", "deepseek-v4-pro", WireApi::Messages)
}

fn chat() -> Route {
    Route::plain("openai", "gpt-test", WireApi::OpenAiChat)
}

fn config() -> Config {
    Config::new("deepseek", "deepseek-flash").with("max_tokens", json!(1024))
}

fn tool(name: &str) -> ToolSchema {
    ToolSchema::new(name, name, serde_json::Map::new())
}

fn deferred(name: &str) -> ToolSchema {
    tool(name).with_defer_loading(true)
}

/// A tool as the worked rows write `A`: `parameters` `{"type":"object"}` (what Anthropic routes
/// require at the root).
fn otool(name: &str) -> ToolSchema {
    let mut parameters = serde_json::Map::new();
    parameters.insert("type".into(), json!("object"));
    ToolSchema::new(name, name, parameters)
}

fn odeferred(name: &str) -> ToolSchema {
    otool(name).with_defer_loading(true)
}

fn u(id: &str, text: &str) -> Message {
    Message::user(id, text)
}

fn a(id: &str, text: &str) -> Message {
    Message::assistant(id, text, "deepseek", "deepseek-flash")
}

fn s(id: &str, text: &str) -> Message {
    Message::system(id, text)
}

fn d(id: &str, blocks: Vec<ContentBlock>) -> Message {
    Message::developer(id, blocks)
}

fn msg(id: &str, role: Role, blocks: Vec<ContentBlock>) -> Message {
    let source = match role {
        Role::System => MessageSource::SystemPrompt,
        Role::Developer => MessageSource::ToolRegistry,
        Role::User => MessageSource::User,
        Role::Assistant => MessageSource::Model {
            provider: "deepseek".into(),
            model: "deepseek-flash".into(),
        },
        Role::Tool => MessageSource::Tool {
            call_id: "c1".into(),
        },
    };
    Message::new(id, role, blocks, source)
}

fn call(call_id: &str, name: &str, arguments: &str) -> ContentBlock {
    ContentBlock::ToolCall {
        id: call_id.into(),
        name: name.into(),
        arguments: arguments.into(),
    }
}

fn calls(id: &str, blocks: Vec<ContentBlock>) -> Message {
    msg(id, Role::Assistant, blocks)
}

fn result(id: &str, call_id: &str, text: &str) -> Message {
    Message::tool_result(id, call_id, text)
}

fn text(t: &str) -> ContentBlock {
    ContentBlock::text(t)
}

fn add(name: &str) -> ContentBlock {
    ContentBlock::addition(name)
}

fn remove(name: &str) -> ContentBlock {
    ContentBlock::removal(name)
}

fn other(ty: &str) -> ContentBlock {
    ContentBlock::Other(json!({"type": ty, "data": "x"}))
}

fn projected(
    messages: Vec<Message>,
    tools: Option<Vec<ToolSchema>>,
) -> ProjectedToolUpdates<'static> {
    ProjectedToolUpdates {
        messages: Cow::Owned(messages),
        tools: tools.map(Cow::Owned),
    }
}

fn wire(route: &Route, messages: Vec<Message>) -> Result<WireRequest, WireError> {
    serialize(&config(), &projected(messages, None), route)
}

fn body(req: &WireRequest) -> Value {
    serde_json::from_str(&req.body).expect("the body is JSON")
}

fn beta(req: &WireRequest) -> bool {
    req.header("anthropic-beta") == Some("mid-conversation-tool-changes-2026-07-01")
}

// Wire-block shorthands for expectations.

fn user_turn(content: Value) -> Value {
    json!({"role": "user", "content": content})
}

fn assistant_turn(content: Value) -> Value {
    json!({"role": "assistant", "content": content})
}

fn system_turn(content: Value) -> Value {
    json!({"role": "system", "content": content})
}

fn t(text: &str) -> Value {
    json!({"type": "text", "text": text})
}

fn addition(name: &str) -> Value {
    json!({"type": "tool_addition", "tool": {"type": "tool_reference", "name": name}})
}

fn removal(name: &str) -> Value {
    json!({"type": "tool_removal", "tool": {"type": "tool_reference", "name": name}})
}

// --- worked W rows ---------------------------------------------------------------------------

#[test]
fn examples_w1_to_w8() {
    /// (row, projected history, top-level system, wire messages, beta header)
    type Row = (
        &'static str,
        Vec<Message>,
        Option<&'static str>,
        Value,
        bool,
    );
    let rows: Vec<Row> = vec![
        (
            "W1",
            vec![
                u("u1", "hello"),
                d(
                    "d1",
                    vec![
                        add("search"),
                        remove("fetch"),
                        text(""),
                        text("search replaces fetch"),
                    ],
                ),
                a("a1", "ok"),
            ],
            None,
            json!([
                user_turn(json!([t("hello")])),
                system_turn(json!([
                    addition("search"),
                    removal("fetch"),
                    t("search replaces fetch")
                ])),
                assistant_turn(json!([t("ok")])),
            ]),
            true,
        ),
        (
            "W2",
            vec![d("d1", vec![add("X")]), u("u1", "hello")],
            None,
            json!([
                user_turn(json!([t("hello")])),
                system_turn(json!([addition("X")]))
            ]),
            true,
        ),
        (
            "W3",
            vec![u("u1", "hi"), a("a1", "ok"), d("d1", vec![add("X")])],
            None,
            json!([
                user_turn(json!([t("hi")])),
                assistant_turn(json!([t("ok")]))
            ]),
            false,
        ),
        (
            "W4",
            vec![u("u1", "hi"), d("d1", vec![text("")])],
            None,
            json!([user_turn(json!([t("hi")]))]),
            false,
        ),
        (
            "W7",
            vec![
                s("s0", "P1"),
                u("u1", "hi"),
                s("s1", "P2"),
                d("d1", vec![add("X")]),
            ],
            Some("P1"),
            json!([
                user_turn(json!([t("hi")])),
                system_turn(json!([t("P2"), addition("X")])),
            ]),
            true,
        ),
        (
            "W8",
            vec![u("u1", "hi"), s("s0", "P1")],
            None,
            json!([user_turn(json!([t("hi")])), system_turn(json!([t("P1")]))]),
            false,
        ),
    ];
    for (row, messages, system, expected, expect_beta) in rows {
        let req = wire(&flash(), messages).unwrap_or_else(|e| panic!("{row}: {e}"));
        let b = body(&req);
        assert_eq!(b["messages"], expected, "{row}");
        assert_eq!(b.get("system").and_then(Value::as_str), system, "{row}");
        assert_eq!(beta(&req), expect_beta, "{row}");
    }
}

#[test]
fn example_w5_tools_with_deferred_declaration() {
    let req = serialize(
        &config(),
        &projected(vec![u("u1", "hi")], Some(vec![tool("A"), deferred("B")])),
        &flash(),
    )
    .unwrap();
    assert!(req.body.contains(
        r#""tools":[{"name":"A","description":"A","input_schema":{}},{"name":"B","description":"B","input_schema":{},"defer_loading":true}],"#
    ), "{}", req.body);
}

#[test]
fn example_w6_unknown_developer_block() {
    let err = wire(
        &flash(),
        vec![u("u1", "hi"), d("d1", vec![add("X"), other("image")])],
    )
    .unwrap_err();
    assert!(
        matches!(&err, WireError::DeveloperBlock { message_id, index: 1, block_type }
            if message_id == "d1" && block_type == "image"),
        "{err:?}"
    );
    // Every block kind a developer message cannot carry.
    for block in [
        call("c1", "read", "{}"),
        ContentBlock::Reasoning {
            text: "r".into(),
            extra: IndexMap::new(),
        },
    ] {
        let err = wire(&flash(), vec![u("u1", "hi"), d("d1", vec![block])]).unwrap_err();
        assert!(
            matches!(&err, WireError::DeveloperBlock { index: 0, .. }),
            "{err:?}"
        );
    }
}

// --- body and header shape ------------------------------------------------------------------

#[test]
fn body_keys_in_spec_order_and_exact_bytes() {
    let config = Config::new("deepseek", "deepseek-flash")
        .with("temperature", json!(0.5))
        .with("max_tokens", json!(100))
        .with("metadata", json!({"user_id": "x"}));
    let p = projected(
        vec![s("s0", "be brief"), u("u1", "hi")],
        Some(vec![tool("A")]),
    );
    let req = serialize(&config, &p, &flash()).unwrap();
    assert_eq!(
        req.body,
        concat!(
            r#"{"model":"deepseek-flash","max_tokens":100,"metadata":{"user_id":"x"},"temperature":0.5,"#,
            r#""system":"be brief","tools":[{"name":"A","description":"A","input_schema":{}}],"#,
            r#""messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}"#
        )
    );
    assert_eq!(
        req.headers,
        [
            ("content-type".to_owned(), "application/json".to_owned()),
            ("anthropic-version".to_owned(), "2023-06-01".to_owned()),
        ]
    );
}

#[test]
fn config_insertion_order_never_reaches_the_body() {
    let entries = [
        ("max_tokens", json!(1024)),
        ("temperature", json!(0.2)),
        ("top_p", json!(0.9)),
        ("stop_sequences", json!(["x"])),
        ("metadata", json!({"user_id": "u", "b": {"z": 1, "a": 2}})),
        ("Z_upper", json!(true)),
    ];
    let p = projected(vec![u("u1", "hi")], None);
    let mut bodies = Vec::new();
    // Every rotation and its reverse: the first key differs in each.
    for start in 0..entries.len() {
        for reverse in [false, true] {
            let mut order: Vec<_> = entries
                .iter()
                .cycle()
                .skip(start)
                .take(entries.len())
                .collect();
            if reverse {
                order.reverse();
            }
            let mut config = Config::new("deepseek", "deepseek-flash");
            for (k, v) in order {
                config = config.with(*k, v.clone());
            }
            bodies.push(serialize(&config, &p, &flash()).unwrap().body);
        }
    }
    assert!(bodies.windows(2).all(|w| w[0] == w[1]), "{bodies:#?}");
    assert!(bodies[0].starts_with(
        r#"{"model":"deepseek-flash","Z_upper":true,"max_tokens":1024,"metadata":{"b":{"a":2,"z":1},"user_id":"u"},"stop_sequences":["x"],"temperature":0.2,"top_p":0.9,"messages":"#
    ), "{}", bodies[0]);
}

#[test]
fn tool_parameters_and_call_arguments_are_written_with_sorted_keys() {
    // Parsed from text whose key order is not sorted. Under default features the `Map` sorts
    // on its own; under `--features serde_json/preserve_order` this checks our sorting.
    let schema: ToolSchema = serde_json::from_str(
        r#"{"name":"read","description":"d","parameters":{"type":"object","properties":{"path":{"type":"string"},"limit":{"type":"integer"}},"required":["path"]},"title":"Read"}"#,
    )
    .unwrap();
    let p = projected(
        vec![
            u("u1", "go"),
            calls(
                "a1",
                vec![call(
                    "c1",
                    "read",
                    r#"{"path":"/x","limit":3,"opts":{"z":0,"a":1}}"#,
                )],
            ),
            result("t1", "c1", "ok"),
        ],
        Some(vec![schema]),
    );
    let req = serialize(&config(), &p, &flash()).unwrap();
    assert!(req.body.contains(
        r#"{"name":"read","description":"d","input_schema":{"properties":{"limit":{"type":"integer"},"path":{"type":"string"}},"required":["path"],"type":"object"}}"#
    ), "{}", req.body);
    assert!(
        !req.body.contains("title"),
        "unknown tool fields are not sent"
    );
    assert!(req.body.contains(
        r#"{"type":"tool_use","id":"c1","name":"read","input":{"limit":3,"opts":{"a":1,"z":0},"path":"/x"}}"#
    ), "{}", req.body);
}

#[test]
fn tools_key_omitted_when_none_or_empty() {
    for tools in [None, Some(vec![])] {
        for route in [flash(), chat()] {
            let req = serialize(
                &config(),
                &projected(vec![u("u1", "hi")], tools.clone()),
                &route,
            )
            .unwrap();
            assert!(!req.body.contains("\"tools\""), "{}", req.body);
        }
    }
}

#[test]
fn beta_header_always_on_beta_always_routes_else_only_with_a_sent_tool_change() {
    let cases: [(&str, Route, Vec<Message>, bool); 5] = [
        (
            "beta_always, no change",
            anthropic(),
            vec![u("u1", "hi")],
            true,
        ),
        ("no change", flash(), vec![u("u1", "hi")], false),
        (
            "sent change",
            flash(),
            vec![u("u1", "hi"), d("d1", vec![remove("A")])],
            true,
        ),
        (
            "change left out after an assistant message",
            flash(),
            vec![u("u1", "hi"), a("a1", "ok"), d("d1", vec![add("A")])],
            false,
        ),
        (
            "text-only developer message",
            flash(),
            vec![u("u1", "hi"), d("d1", vec![text("note")])],
            false,
        ),
    ];
    for (name, route, messages, expect) in cases {
        let req = wire(&route, messages).unwrap();
        assert_eq!(beta(&req), expect, "{name}");
        assert_eq!(req.headers.len(), 2 + usize::from(expect), "{name}");
        assert_eq!(
            req.headers.last().map(|h| h.0 == "anthropic-beta"),
            Some(expect),
            "{name}"
        );
    }
}

// --- system prompt and queue rules ----------------------------------------------------------

#[test]
fn system_prompts_and_queue_flushes() {
    /// (case, route, history, top-level system, wire messages)
    type Case = (
        &'static str,
        Route,
        Vec<Message>,
        Option<&'static str>,
        Value,
    );
    let cases: Vec<Case> = vec![
        (
            "not in history: only the latest node, as system",
            plain(),
            vec![
                s("s0", "P1"),
                u("u1", "hi"),
                a("a1", "ok"),
                s("s1", "P2"),
                u("u2", "more"),
            ],
            Some("P2"),
            json!([
                user_turn(json!([t("hi")])),
                assistant_turn(json!([t("ok")])),
                user_turn(json!([t("more")])),
            ]),
        ),
        (
            "not in history: a latest empty node sends no system",
            plain(),
            vec![s("s0", "P1"), u("u1", "hi"), s("s1", "")],
            None,
            json!([user_turn(json!([t("hi")]))]),
        ),
        (
            "empty node 0 is consumed, not queued",
            flash(),
            vec![s("s0", ""), u("u1", "hi")],
            None,
            json!([user_turn(json!([t("hi")]))]),
        ),
        (
            "empty later nodes are not queued",
            flash(),
            vec![s("s0", "P1"), u("u1", "hi"), s("s1", "")],
            Some("P1"),
            json!([user_turn(json!([t("hi")]))]),
        ),
        (
            "flush before the next assistant message",
            flash(),
            vec![s("s0", "P1"), u("u1", "hi"), s("s1", "P2"), a("a1", "ok")],
            Some("P1"),
            json!([
                user_turn(json!([t("hi")])),
                system_turn(json!([t("P2")])),
                assistant_turn(json!([t("ok")])),
            ]),
        ),
        (
            "a queue behind an assistant message waits for the next user turn",
            flash(),
            vec![
                u("u1", "hi"),
                a("a1", "ok"),
                d("d1", vec![add("X")]),
                s("s1", "P2"),
                u("u2", "more"),
                a("a2", "fine"),
            ],
            None,
            json!([
                user_turn(json!([t("hi")])),
                assistant_turn(json!([t("ok")])),
                user_turn(json!([t("more")])),
                system_turn(json!([addition("X"), t("P2")])),
                assistant_turn(json!([t("fine")])),
            ]),
        ),
        (
            "a queue before any turn waits for the first user turn",
            flash(),
            vec![d("d1", vec![add("X")]), a("a1", "prefill"), u("u1", "hi")],
            None,
            json!([
                assistant_turn(json!([t("prefill")])),
                user_turn(json!([t("hi")])),
                system_turn(json!([addition("X")])),
            ]),
        ),
        (
            "consecutive user messages are one turn, the queue after it",
            flash(),
            vec![u("u1", "a"), d("d1", vec![add("X")]), u("u2", "b")],
            None,
            json!([
                user_turn(json!([t("a"), t("b")])),
                system_turn(json!([addition("X")])),
            ]),
        ),
        (
            "flush after a tool-result turn",
            flash(),
            vec![
                u("u1", "go"),
                calls("a1", vec![call("c1", "read", "{}")]),
                d("d1", vec![add("X")]),
                result("t1", "c1", "out"),
                a("a2", "done"),
            ],
            None,
            json!([
                user_turn(json!([t("go")])),
                assistant_turn(
                    json!([{"type": "tool_use", "id": "c1", "name": "read", "input": {}}])
                ),
                user_turn(
                    json!([{"type": "tool_result", "tool_use_id": "c1", "content": [t("out")]}])
                ),
                system_turn(json!([addition("X")])),
                assistant_turn(json!([t("done")])),
            ]),
        ),
    ];
    for (name, route, messages, system, expected) in cases {
        let req = wire(&route, messages).unwrap_or_else(|e| panic!("{name}: {e}"));
        let b = body(&req);
        assert_eq!(b["messages"], expected, "{name}");
        assert_eq!(b.get("system").and_then(Value::as_str), system, "{name}");
    }
}

// --- content mapping ------------------------------------------------------------------------

#[test]
fn tool_calls_results_reasoning_and_merging() {
    let mut extra = IndexMap::new();
    extra.insert("signature".to_owned(), json!("sig=="));
    let messages = vec![
        u("u1", "go"),
        calls(
            "a1",
            vec![
                ContentBlock::Reasoning {
                    text: "think".into(),
                    extra,
                },
                text(""),
                text("calling"),
                call("c1", "read", r#"{"p":1}"#),
            ],
        ),
        // A second assistant message right after the first joins its turn.
        calls("a2", vec![call("c2", "grep", "{}")]),
        result("t1", "c1", "one").with_is_error(true),
        result("t2", "c2", "two").with_is_error(false),
        u("u2", "thanks"),
        msg("u3", Role::User, vec![text(""), text("and")]),
    ];
    let req = wire(&flash(), messages).unwrap();
    assert_eq!(
        body(&req)["messages"],
        json!([
            user_turn(json!([t("go")])),
            assistant_turn(json!([
                {"type": "thinking", "thinking": "think", "signature": "sig=="},
                t("calling"),
                {"type": "tool_use", "id": "c1", "name": "read", "input": {"p": 1}},
                {"type": "tool_use", "id": "c2", "name": "grep", "input": {}},
            ])),
            user_turn(json!([
                {"type": "tool_result", "tool_use_id": "c1", "content": [t("one")], "is_error": true},
                {"type": "tool_result", "tool_use_id": "c2", "content": [t("two")]},
                t("thanks"),
                t("and"),
            ])),
        ])
    );
    assert!(
        req.body
            .contains(r#"{"type":"thinking","thinking":"think","signature":"sig=="}"#)
    );
}

// --- one test per WireError variant ---------------------------------------------------------

#[test]
fn missing_max_tokens() {
    let p = projected(vec![u("u1", "hi")], None);
    let no_max = Config::new("deepseek", "deepseek-flash").with("temperature", json!(1));
    assert!(matches!(
        serialize(&no_max, &p, &flash()),
        Err(WireError::MissingMaxTokens)
    ));
    // OpenAI-compatible chat does not require it.
    assert!(serialize(&no_max, &p, &chat()).is_ok());
}

#[test]
fn reserved_config_keys() {
    let p = projected(vec![u("u1", "hi")], None);
    for key in ["model", "provider", "system", "tools", "messages"] {
        for route in [flash(), chat()] {
            let c = config().with(key, json!("x"));
            let err = serialize(&c, &p, &route).unwrap_err();
            assert!(
                matches!(&err, WireError::ReservedConfigKey { key: k } if k == key),
                "{key}: {err:?}"
            );
        }
    }
}

#[test]
fn reserved_placeholder_name_on_every_route() {
    let with_placeholder = flash()
        .into_builder()
        .deferred_placeholder(true)
        .build()
        .unwrap();
    for route in [flash(), anthropic(), plain(), chat(), with_placeholder] {
        let p = projected(
            vec![u("u1", "hi")],
            Some(vec![tool("A"), tool(DEFERRED_PLACEHOLDER_NAME)]),
        );
        let err = serialize(&config(), &p, &route).unwrap_err();
        assert!(
            matches!(err, WireError::ReservedToolName { index: 1 }),
            "{err:?}"
        );
    }
}

#[test]
fn duplicate_tool() {
    for route in [flash(), chat()] {
        let p = projected(
            vec![u("u1", "hi")],
            Some(vec![tool("A"), tool("B"), tool("A")]),
        );
        let err = serialize(&config(), &p, &route).unwrap_err();
        assert!(
            matches!(&err, WireError::DuplicateTool { name } if name == "A"),
            "{err:?}"
        );
    }
}

#[test]
fn deferred_tool_on_chat() {
    let p = projected(vec![u("u1", "hi")], Some(vec![tool("A"), deferred("B")]));
    let err = serialize(&config(), &p, &chat()).unwrap_err();
    assert!(
        matches!(&err, WireError::DeferredTool { name } if name == "B"),
        "{err:?}"
    );
}

#[test]
fn developer_message_on_chat() {
    for blocks in [vec![add("X")], vec![text("")]] {
        let err = wire(&chat(), vec![u("u1", "hi"), d("d1", blocks)]).unwrap_err();
        assert!(
            matches!(&err, WireError::DeveloperMessage { message_id } if message_id == "d1"),
            "{err:?}"
        );
    }
}

#[test]
fn misplaced_tool_change() {
    for route in [flash(), chat()] {
        for (role, index) in [
            (Role::User, 1),
            (Role::Assistant, 0),
            (Role::System, 1),
            (Role::Tool, 0),
        ] {
            let blocks = if index == 0 {
                vec![remove("A")]
            } else {
                vec![text("x"), add("A")]
            };
            let mut messages = vec![u("u0", "hi")];
            if role == Role::Tool {
                messages.push(calls("a0", vec![call("c1", "read", "{}")]));
            }
            messages.push(msg("m", role, blocks));
            let err = wire(&route, messages).unwrap_err();
            assert!(
                matches!(&err, WireError::MisplacedToolChange { message_id, index: i, role: r }
                    if message_id == "m" && *i == index && *r == role),
                "{role}: {err:?}"
            );
        }
    }
}

#[test]
fn unsupported_blocks() {
    // Signed, so that it would be sent (unsigned reasoning is left out, never refused).
    let mut clashing = IndexMap::new();
    clashing.insert("signature".to_owned(), json!("sig"));
    clashing.insert("thinking".to_owned(), json!("x"));
    let reasoning = || ContentBlock::Reasoning {
        text: "r".into(),
        extra: IndexMap::new(),
    };
    /// (routes, role, blocks, failing index, block type)
    type Case = (Vec<Route>, Role, Vec<ContentBlock>, usize, &'static str);
    let cases: Vec<Case> = vec![
        (
            vec![flash(), chat()],
            Role::User,
            vec![text("a"), other("image")],
            1,
            "image",
        ),
        (
            vec![flash(), chat()],
            Role::User,
            vec![call("c9", "read", "{}")],
            0,
            "tool-call",
        ),
        (
            vec![flash(), chat()],
            Role::User,
            vec![reasoning()],
            0,
            "reasoning",
        ),
        (
            // The Messages API sends `redacted_thinking` back (see `redacted_thinking_*`).
            vec![chat()],
            Role::Assistant,
            vec![other("redacted_thinking")],
            0,
            "redacted_thinking",
        ),
        (
            vec![flash()],
            Role::Assistant,
            vec![text("a"), other("image")],
            1,
            "image",
        ),
        (
            vec![flash(), chat()],
            Role::Tool,
            vec![other("image")],
            0,
            "image",
        ),
        (
            vec![flash(), plain(), chat()],
            Role::System,
            vec![other("cache_control")],
            0,
            "cache_control",
        ),
        (
            vec![flash()],
            Role::Assistant,
            vec![ContentBlock::Reasoning {
                text: "r".into(),
                extra: clashing,
            }],
            0,
            "reasoning",
        ),
        (
            vec![flash(), chat()],
            Role::User,
            vec![ContentBlock::Other(json!({"no": "type"}))],
            0,
            "(no type)",
        ),
    ];
    for (routes, role, blocks, index, ty) in cases {
        for route in routes {
            let mut messages = vec![u("u0", "hi")];
            if role == Role::Tool {
                messages.push(calls("a0", vec![call("c1", "read", "{}")]));
            }
            messages.push(msg("m", role, blocks.clone()));
            let err = wire(&route, messages).unwrap_err();
            assert!(
                matches!(&err, WireError::UnsupportedBlock { message_id, index: i, role: r, block_type }
                    if message_id == "m" && *i == index && *r == role && block_type == ty),
                "{role} {ty} on {:?}: {err:?}",
                route.api
            );
        }
    }
}

#[test]
fn invalid_and_non_object_arguments() {
    for bad in ["{not json", "", "{\"a\":1} trailing"] {
        let err = wire(
            &flash(),
            vec![u("u1", "go"), calls("a1", vec![call("c1", "read", bad)])],
        )
        .unwrap_err();
        assert!(
            matches!(&err, WireError::InvalidArguments { message_id, call_id, .. }
                if message_id == "a1" && call_id == "c1"),
            "{bad:?}: {err:?}"
        );
        assert!(
            std::error::Error::source(&err).is_some(),
            "the parser error is the source"
        );
    }
    for bad in ["[1]", "\"x\"", "null", "3"] {
        let err = wire(
            &flash(),
            vec![u("u1", "go"), calls("a1", vec![call("c1", "read", bad)])],
        )
        .unwrap_err();
        assert!(
            matches!(&err, WireError::ArgumentsNotObject { message_id, call_id }
                if message_id == "a1" && call_id == "c1"),
            "{bad:?}: {err:?}"
        );
    }
}

#[test]
fn duplicate_call_id() {
    let cases = [
        vec![
            u("u1", "go"),
            calls("a1", vec![call("c1", "r", "{}"), call("c1", "r", "{}")]),
        ],
        vec![
            u("u1", "go"),
            calls("a1", vec![call("c1", "r", "{}")]),
            result("t1", "c1", "x"),
            calls("a2", vec![call("c1", "r", "{}")]),
            result("t2", "c1", "y"),
        ],
    ];
    for route in [flash(), chat()] {
        for messages in cases.clone() {
            let err = wire(&route, messages).unwrap_err();
            assert!(
                matches!(&err, WireError::DuplicateCallId { call_id, .. } if call_id == "c1"),
                "{err:?}"
            );
        }
    }
}

#[test]
fn missing_tool_result() {
    let two = || calls("a1", vec![call("c1", "r", "{}"), call("c2", "r", "{}")]);
    let cases: Vec<(&str, Vec<Message>, &str)> = vec![
        (
            "call at the end",
            vec![u("u1", "go"), calls("a1", vec![call("c1", "r", "{}")])],
            "c1",
        ),
        (
            "user answers instead",
            vec![u("u1", "go"), two(), u("u2", "stop")],
            "c1",
        ),
        (
            "one of two answered, then the user",
            vec![
                u("u1", "go"),
                two(),
                result("t1", "c1", "x"),
                u("u2", "stop"),
            ],
            "c2",
        ),
        (
            "one of two answered, then the end",
            vec![u("u1", "go"), two(), result("t2", "c2", "x")],
            "c1",
        ),
    ];
    for route in [flash(), chat()] {
        for (name, messages, missing) in cases.clone() {
            let err = wire(&route, messages).unwrap_err();
            assert!(
                matches!(&err, WireError::MissingToolResult { message_id, call_id }
                    if message_id == "a1" && call_id == missing),
                "{name}: {err:?}"
            );
        }
    }
    // On chat an assistant message right after an unanswered call is refused too; on the
    // Messages API it joins the turn of the call (see `tool_calls_results_reasoning_and_merging`).
    let err = wire(
        &chat(),
        vec![
            u("u1", "go"),
            calls("a1", vec![call("c1", "r", "{}")]),
            a("a2", "hm"),
        ],
    )
    .unwrap_err();
    assert!(
        matches!(err, WireError::MissingToolResult { .. }),
        "{err:?}"
    );
}

#[test]
fn orphan_tool_result() {
    let cases: Vec<(&str, Vec<Message>)> = vec![
        (
            "no call at all",
            vec![u("u1", "go"), result("t1", "c9", "x")],
        ),
        (
            "unknown id",
            vec![
                u("u1", "go"),
                calls("a1", vec![call("c1", "r", "{}")]),
                result("t1", "c9", "x"),
            ],
        ),
        (
            "answered twice",
            vec![
                u("u1", "go"),
                calls("a1", vec![call("c1", "r", "{}")]),
                result("t0", "c1", "x"),
                result("t1", "c1", "again"),
            ],
        ),
        (
            "call of an earlier turn",
            vec![
                u("u1", "go"),
                calls("a1", vec![call("c1", "r", "{}")]),
                result("t0", "c1", "x"),
                a("a2", "ok"),
                u("u2", "more"),
                result("t1", "c1", "late"),
            ],
        ),
    ];
    for route in [flash(), chat()] {
        for (name, messages) in cases.clone() {
            let err = wire(&route, messages).unwrap_err();
            assert!(
                matches!(&err, WireError::OrphanToolResult { message_id, .. } if message_id == "t1"),
                "{name}: {err:?}"
            );
        }
    }
}

#[test]
fn result_without_call_id() {
    let stray = Message::new("t1", Role::Tool, vec![text("x")], MessageSource::User);
    for route in [flash(), chat()] {
        let err = wire(
            &route,
            vec![
                u("u1", "go"),
                calls("a1", vec![call("c1", "r", "{}")]),
                stray.clone(),
            ],
        )
        .unwrap_err();
        assert!(
            matches!(&err, WireError::ResultWithoutCallId { message_id } if message_id == "t1"),
            "{err:?}"
        );
    }
}

#[test]
fn error_messages_name_the_fault() {
    let err = wire(
        &flash(),
        vec![u("u1", "hi"), d("d7", vec![text("x"), other("image")])],
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "message d7: developer block 1 of type `image` cannot be sent (only tool additions, removals and text can)"
    );
    let err = serialize(
        &config(),
        &projected(vec![], Some(vec![tool(DEFERRED_PLACEHOLDER_NAME)])),
        &flash(),
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "tool 0 is named `mektpoy_deferred_placeholder`, which is reserved"
    );
}

// --- OpenAI-compatible chat -----------------------------------------------------------------

#[test]
fn chat_body_exact() {
    let schema: ToolSchema = serde_json::from_str(
        r#"{"name":"read","description":"Read a file","parameters":{"type":"object"},"annotations":{"x":1}}"#,
    )
    .unwrap();
    let messages = vec![
        s("s0", "old prompt"),
        u("u1", "go"),
        calls(
            "a1",
            vec![
                ContentBlock::Reasoning {
                    text: "hidden".into(),
                    extra: IndexMap::new(),
                },
                call("c1", "read", r#"{ "path": "/x" }"#),
            ],
        ),
        result("t1", "c1", "data").with_is_error(true),
        s("s1", "new prompt"),
        msg("a2", Role::Assistant, vec![text("part 1"), text("part 2")]),
        msg("u2", Role::User, vec![]),
        msg("a3", Role::Assistant, vec![]),
    ];
    let config = Config::new("openai", "gpt-test").with("temperature", json!(0));
    let req = serialize(&config, &projected(messages, Some(vec![schema])), &chat()).unwrap();
    assert_eq!(
        req.body,
        concat!(
            r#"{"model":"gpt-test","temperature":0,"#,
            r#""tools":[{"type":"function","function":{"name":"read","description":"Read a file","parameters":{"type":"object"}}}],"#,
            r#""messages":[{"role":"system","content":"new prompt"},"#,
            r#"{"role":"user","content":"go"},"#,
            r#"{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"read","arguments":"{ \"path\": \"/x\" }"}}]},"#,
            r#"{"role":"tool","tool_call_id":"c1","content":"data"},"#,
            r#"{"role":"assistant","content":[{"type":"text","text":"part 1"},{"type":"text","text":"part 2"}]},"#,
            r#"{"role":"user","content":""},"#,
            r#"{"role":"assistant","content":""}]}"#
        )
    );
    assert_eq!(
        req.headers,
        [("content-type".to_owned(), "application/json".to_owned())]
    );
}

#[test]
fn chat_without_system_or_with_an_empty_latest_one_sends_no_system_message() {
    for messages in [
        vec![u("u1", "hi")],
        vec![s("s0", "P1"), u("u1", "hi"), s("s1", "")],
    ] {
        let req = wire(&chat(), messages).unwrap();
        assert_eq!(
            body(&req)["messages"],
            json!([{"role": "user", "content": "hi"}])
        );
    }
}

#[test]
fn serialize_dispatches_on_the_route_api() {
    let p = projected(vec![s("s0", "P"), u("u1", "hi")], Some(vec![tool("A")]));
    assert_eq!(
        serialize(&config(), &p, &chat()).unwrap(),
        serialize_openai_chat(&config(), &p).unwrap()
    );
    assert_eq!(
        serialize(&config(), &p, &flash()).unwrap(),
        serialize_messages(&config(), &p, &flash()).unwrap()
    );
    assert_ne!(
        serialize(&config(), &p, &chat()).unwrap().body,
        serialize(&config(), &p, &flash()).unwrap().body
    );
}

#[test]
fn deferred_placeholder_appended_exactly_on_mode_routes_with_an_immediate_tool() {
    const PLACEHOLDER: &str = r#"{"name":"mektpoy_deferred_placeholder","description":"Reserved; never call.","input_schema":{"type":"object","properties":{}},"defer_loading":true}"#;
    let with = anthropic()
        .into_builder()
        .deferred_placeholder(true)
        .build()
        .unwrap();
    let no_mode = with
        .clone()
        .into_builder()
        .tool_update(None)
        .beta_always(false)
        .build_unchecked();
    let tools_of = |route: &Route, tools: Option<Vec<ToolSchema>>| -> Value {
        let p = projected(vec![u("u1", "hi")], tools);
        let body = serialize(&config(), &p, route).unwrap().body;
        serde_json::from_str::<Value>(&body).unwrap()["tools"].clone()
    };
    // Main path and fallbacks alike: any projection holding a non-deferred tool.
    for tools in [vec![otool("A")], vec![otool("A"), odeferred("B")]] {
        let n = tools.len();
        let got = tools_of(&with, Some(tools.clone()));
        assert_eq!(got.as_array().unwrap().len(), n + 1);
        assert_eq!(got[n]["name"], DEFERRED_PLACEHOLDER_NAME, "appended last");
        let p = projected(vec![u("u1", "hi")], Some(tools.clone()));
        let body = serialize(&config(), &p, &with).unwrap().body;
        assert!(
            body.contains(&format!("{PLACEHOLDER}],")),
            "the spec's bytes: {body}"
        );
        assert_eq!(
            tools_of(&anthropic(), Some(tools.clone()))
                .as_array()
                .unwrap()
                .len(),
            n
        );
        assert_eq!(tools_of(&no_mode, Some(tools)).as_array().unwrap().len(), n);
    }
    // Without a non-deferred tool (or without tools) there is nothing to keep stable.
    assert_eq!(
        tools_of(&with, Some(vec![odeferred("B")]))
            .as_array()
            .unwrap()
            .len(),
        1
    );
    assert_eq!(tools_of(&with, None), Value::Null);
}

#[test]
fn system_messages_that_are_not_prompts() {
    let summary = Message::new(
        "sum",
        Role::System,
        vec![text("summary of turns 1-9")],
        MessageSource::Other(json!({"kind": "compaction"})),
    );
    let messages = vec![summary, u("u1", "hi"), s("s1", "P")];
    // Without prompts in history only the latest prompt can be sent: the summary would be
    // silently dropped, so it is refused, on both APIs.
    for route in [plain(), chat()] {
        let err = serialize(&config(), &projected(messages.clone(), None), &route).unwrap_err();
        assert!(
            matches!(&err, WireError::SystemMessageNotPrompt { message_id } if message_id == "sum"),
            "{err:?}"
        );
    }
    // In history, a leading summary is the top-level `system` and the prompt is queued.
    let body = serialize(&config(), &projected(messages, None), &flash())
        .unwrap()
        .body;
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["system"], "summary of turns 1-9");
    assert_eq!(
        v["messages"][1],
        json!({"role": "system", "content": [{"type": "text", "text": "P"}]})
    );
    // On a plain route the latest prompt node is the `system`.
    let later = vec![s("s0", "P"), u("u1", "hi"), s("s1", "P2")];
    let body = serialize(&config(), &projected(later, None), &plain())
        .unwrap()
        .body;
    assert!(body.contains(r#""system":"P2""#), "{body}");
}

#[test]
fn thinking_extra_fields_are_written_in_sorted_order() {
    let mut extra = IndexMap::new();
    extra.insert("zeta".to_owned(), json!(1));
    extra.insert("signature".to_owned(), json!("sig"));
    extra.insert("alpha".to_owned(), json!({"y": 2, "b": 1}));
    let reasoning = ContentBlock::Reasoning {
        text: "t".into(),
        extra,
    };
    let messages = vec![
        u("u1", "hi"),
        msg("a1", Role::Assistant, vec![reasoning, text("ok")]),
    ];
    let body = serialize(&config(), &projected(messages, None), &flash())
        .unwrap()
        .body;
    assert!(
        body.contains(
            r#"{"type":"thinking","thinking":"t","alpha":{"b":1,"y":2},"signature":"sig","zeta":1}"#
        ),
        "{body}"
    );
}

#[test]
fn turns_left_empty_are_refused_except_a_final_assistant_turn() {
    let empty_user = msg("u2", Role::User, vec![text("")]);
    let err = serialize(
        &config(),
        &projected(vec![u("u1", "hi"), a("a1", "ok"), empty_user], None),
        &flash(),
    )
    .unwrap_err();
    assert!(
        matches!(&err, WireError::EmptyTurn { message_id } if message_id == "u2"),
        "{err:?}"
    );
    let empty_assistant = msg("a1", Role::Assistant, vec![text("")]);
    let err = serialize(
        &config(),
        &projected(
            vec![u("u1", "hi"), empty_assistant.clone(), u("u2", "more")],
            None,
        ),
        &flash(),
    )
    .unwrap_err();
    assert!(
        matches!(&err, WireError::EmptyTurn { message_id } if message_id == "a1"),
        "{err:?}"
    );
    // A final assistant turn may be empty: the model continues it.
    let body = serialize(
        &config(),
        &projected(vec![u("u1", "hi"), empty_assistant], None),
        &flash(),
    )
    .unwrap()
    .body;
    assert!(
        body.ends_with(r#"{"role":"assistant","content":[]}]}"#),
        "{body}"
    );
}
