//! Table-driven tests of both serializers: the worked W rows, one test per
//! `WireError` variant, key order, and the mapping of every block kind.

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
    ContentBlock::other(json!({"type": ty, "data": "x"})).unwrap()
}

fn projected(
    messages: Vec<Message>,
    tools: Option<Vec<ToolSchema>>,
) -> ProjectedToolUpdates<'static> {
    let projected = ProjectedToolUpdates::new(messages);
    match tools {
        Some(tools) => projected.with_tools(tools),
        None => projected,
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
        matches!(&err, WireError::Message { message_id, kind: MessageFault::DeveloperBlock { index: 1, block_type } }
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
            matches!(
                &err,
                WireError::Message {
                    kind: MessageFault::DeveloperBlock { index: 0, .. },
                    ..
                }
            ),
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
fn tool_parameters_are_written_with_sorted_keys_and_call_arguments_as_written() {
    // Parsed from text whose key order is not sorted. Under default features the `Map` sorts
    // on its own; under `--features serde_json/preserve_order` this checks our sorting. The
    // arguments are the model's text: their key order is kept (issue 10).
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
        r#"{"type":"tool_use","id":"c1","name":"read","input":{"path":"/x","limit":3,"opts":{"z":0,"a":1}}}"#
    ), "{}", req.body);
}

/// Issue 10 item 3: the history the model sees is the call it made. The Messages API gets the
/// arguments text token for token; the chat API gets the same text as its string.
#[test]
fn call_arguments_go_out_as_the_model_wrote_them() {
    let send = |route: &Route, arguments: &str| {
        wire(
            route,
            vec![
                u("u1", "go"),
                calls("a1", vec![call("c1", "read", arguments)]),
                result("t1", "c1", "ok"),
            ],
        )
    };
    for (arguments, sent) in [
        // Beyond f64: every digit, not `1.2345678901234568e+29`.
        (
            r#"{"n":123456789012345678901234567890}"#,
            r#"{"n":123456789012345678901234567890}"#,
        ),
        // Number spelling, key order, escapes: all the model's.
        (
            r#"{"z":1.50,"a":1e5,"s":"\u00e9\n\"","t":-0}"#,
            r#"{"z":1.50,"a":1e5,"s":"\u00e9\n\"","t":-0}"#,
        ),
        // Whitespace between tokens is dropped (the body is compact); inside strings kept.
        (
            "{ \"path\" : \"/a b\" ,\n  \"opts\" : [ 1 , { } ] }",
            r#"{"path":"/a b","opts":[1,{}]}"#,
        ),
        ("{}", "{}"),
    ] {
        let req = send(&flash(), arguments).unwrap();
        let expect = format!(r#""input":{sent}}}"#);
        assert!(req.body.contains(&expect), "{arguments}: {}", req.body);
        // The chat route sends the text itself, whitespace included.
        let chat_req = send(&chat(), arguments).unwrap();
        let chat_body = body(&chat_req);
        assert_eq!(
            chat_body["messages"][1]["tool_calls"][0]["function"]["arguments"],
            Value::from(arguments),
            "{arguments}"
        );
    }
}

#[test]
fn call_arguments_that_cannot_go_out_unchanged_are_refused() {
    let send = |arguments: String| {
        wire(
            &flash(),
            vec![
                u("u1", "go"),
                calls("a1", vec![call("c1", "read", &arguments)]),
                result("t1", "c1", "ok"),
            ],
        )
    };
    let limit = ContentBlock::ARGUMENTS_DEPTH_LIMIT;
    // `{"a":[[…]]}` nesting `depth` levels.
    let nested = |depth: usize| {
        format!(
            r#"{{"a":{}{}}}"#,
            "[".repeat(depth - 1),
            "]".repeat(depth - 1)
        )
    };
    assert!(send(nested(limit)).is_ok());
    for (arguments, check) in [
        (
            r#"{"path":"/safe","path":"/etc/passwd"}"#.to_owned(),
            (|e: &WireError| {
                matches!(e, WireError::Message { message_id, kind: MessageFault::DuplicateArgumentKey { call_id, key } }
                if message_id == "a1" && call_id == "c1" && key == "path")
            }) as fn(&WireError) -> bool,
        ),
        (
            r#"{"o":[{"k":1,"\u006b":2}]}"#.to_owned(),
            |e| matches!(e, WireError::Message { kind: MessageFault::DuplicateArgumentKey { key, .. }, .. } if key == "k"),
        ),
        (
            nested(limit + 1),
            |e| matches!(e, WireError::Message { kind: MessageFault::ArgumentsTooDeep { limit, .. }, .. } if *limit == ContentBlock::ARGUMENTS_DEPTH_LIMIT),
        ),
        // Past serde_json's own recursion limit too: still the typed error, not a parse error.
        (nested(200), |e| {
            matches!(
                e,
                WireError::Message {
                    kind: MessageFault::ArgumentsTooDeep { .. },
                    ..
                }
            )
        }),
        ("[1]".to_owned(), |e| {
            matches!(
                e,
                WireError::Message {
                    kind: MessageFault::ArgumentsNotObject { .. },
                    ..
                }
            )
        }),
        (r#"{"a":1} x"#.to_owned(), |e| {
            matches!(
                e,
                WireError::Message {
                    kind: MessageFault::InvalidArguments { .. },
                    ..
                }
            )
        }),
        (r#"{"a":"#.to_owned(), |e| {
            matches!(
                e,
                WireError::Message {
                    kind: MessageFault::InvalidArguments { .. },
                    ..
                }
            )
        }),
    ] {
        let err = send(arguments.clone()).unwrap_err();
        assert!(check(&err), "{arguments}: {err:?}");
    }
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
            matches!(&err, WireError::DuplicateToolName { tool } if tool == "A"),
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
            matches!(&err, WireError::Message { message_id, kind: MessageFault::DeveloperMessage } if message_id == "d1"),
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
                matches!(&err, WireError::Message { message_id, kind: MessageFault::ToolChangeOutsideDeveloper { index: i, role: r } }
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
            vec![ContentBlock::other(json!({"type": "audio"})).unwrap()],
            0,
            "audio",
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
                matches!(&err, WireError::Message { message_id, kind: MessageFault::UnsupportedBlock { index: i, role: r, block_type } }
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
            matches!(&err, WireError::Message { message_id, kind: MessageFault::InvalidArguments { call_id, .. } }
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
            matches!(&err, WireError::Message { message_id, kind: MessageFault::ArgumentsNotObject { call_id } }
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
                matches!(&err, WireError::Message { kind: MessageFault::DuplicateCallId { call_id, .. }, .. } if call_id == "c1"),
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
                matches!(&err, WireError::Message { message_id, kind: MessageFault::MissingToolResult { call_id } }
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
        matches!(
            err,
            WireError::Message {
                kind: MessageFault::MissingToolResult { .. },
                ..
            }
        ),
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
                matches!(&err, WireError::Message { message_id, kind: MessageFault::OrphanToolResult { .. } } if message_id == "t1"),
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
            matches!(&err, WireError::Message { message_id, kind: MessageFault::ToolResultWithoutCallId } if message_id == "t1"),
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
        MessageSource::other(json!({"kind": "compaction"})).unwrap(),
    );
    let messages = vec![summary, u("u1", "hi"), s("s1", "P")];
    // Without prompts in history only the latest prompt can be sent: the summary would be
    // silently dropped, so it is refused, on both APIs.
    for route in [plain(), chat()] {
        let err = serialize(&config(), &projected(messages.clone(), None), &route).unwrap_err();
        assert!(
            matches!(&err, WireError::Message { message_id, kind: MessageFault::SystemMessageNotPrompt } if message_id == "sum"),
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
        matches!(&err, WireError::Message { message_id, kind: MessageFault::EmptyTurn } if message_id == "u2"),
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
        matches!(&err, WireError::Message { message_id, kind: MessageFault::EmptyTurn } if message_id == "a1"),
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

// --- v4: Anthropic routes ---------------------------------------------------------------------

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
    Config::new("anthropic", "claude-test").with("max_tokens", json!(1024))
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

fn by_value(tool: &ToolSchema) -> ContentBlock {
    ContentBlock::InlineAddition(crate::vocab::InlineAddition::new(tool))
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
    WireContext {
        previous_blocks: None,
        thinking: Some(ThinkingPlan {
            policy,
            before_floor,
            rewrite: Rewrite::Tools,
        }),
    }
}

fn lookback_context(previous: usize) -> WireContext<'static> {
    WireContext {
        previous_blocks: Some(previous),
        thinking: None,
    }
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
    let config = claude_config().with("temperature", json!(0.5));
    let tools = Some(vec![otool("A"), odeferred("B")]);
    let req = ser(
        &claude(),
        &config,
        vec![u("u1", "hi")],
        tools.clone(),
        &WireContext::default(),
    )
    .unwrap();
    assert!(
        req.body.starts_with(
            r#"{"model":"claude-test","cache_control":{"type":"ephemeral"},"max_tokens":1024,"temperature":0.5,"tools":"#
        ),
        "{}",
        req.body
    );
    assert_eq!(
        req.body.matches("cache_control").count(),
        1,
        "none on a tool"
    );
    assert_eq!(req.report.lookback_breakpoint, None);
    // The config's own `cache_control` is kept and not doubled.
    let own = config.with("cache_control", json!({"type": "ephemeral", "ttl": "1h"}));
    let req = ser(
        &claude(),
        &own,
        vec![u("u1", "hi")],
        tools.clone(),
        &WireContext::default(),
    )
    .unwrap();
    assert!(
        req.body.starts_with(
            r#"{"model":"claude-test","cache_control":{"ttl":"1h","type":"ephemeral"},"max_tokens":1024,"#
        ),
        "{}",
        req.body
    );
    assert_eq!(req.body.matches("cache_control").count(), 1);
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
    assert!(!req.body.contains("cache_control"), "{}", req.body);
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
    assert_eq!(req.report.lookback_breakpoint, Some(1));
    let b = body(&req);
    assert_eq!(
        b["messages"][1],
        assistant_turn(json!([
            {"type": "text", "text": "ok", "cache_control": {"type": "ephemeral"}}
        ]))
    );
    assert!(
        req.body
            .contains(r#"{"type":"text","text":"ok","cache_control":{"type":"ephemeral"}}"#),
        "written after the block's own fields: {}",
        req.body
    );
    assert_eq!(
        req.body.matches("cache_control").count(),
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
        assert_eq!(req.report.lookback_breakpoint, None, "{after}");
        assert_eq!(req.body.matches("cache_control").count(), 1, "{after}");
    }
    // The config's ttl goes with it.
    let config = claude_config().with("cache_control", json!({"type": "ephemeral", "ttl": "1h"}));
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
    assert_eq!(req.report.lookback_breakpoint, None);
    assert!(!req.body.contains("cache_control"));
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
        Some(vec![otool("A"), odeferred("B")]),
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
    assert_eq!(req.report.lookback_breakpoint, Some(6));
    assert!(flat[6].get("cache_control").is_some(), "{}", req.body);
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
        Some(vec![otool("A"), odeferred("B")]),
        &lookback_context(2),
    )
    .unwrap();
    assert_eq!(req.report.lookback_breakpoint, Some(0));
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
        vec![u("u1", "hi"), d("d1", vec![by_value(&otool("B"))])],
        Some(vec![otool("A")]),
        &WireContext::default(),
    )
    .unwrap();
    assert!(
        req.body.ends_with(concat!(
            r#""tools":[{"name":"A","description":"A","input_schema":{"type":"object"}}],"#,
            r#""messages":[{"role":"user","content":[{"type":"text","text":"hi"}]},"#,
            r#"{"role":"system","content":[{"type":"tool_addition","tool":{"type":"tool_definition","definition":{"name":"B","description":"B","input_schema":{"type":"object"}}}}]}]}"#
        )),
        "{}",
        req.body
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
        Some(vec![otool("A")]),
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
            vec![u("u1", "hi"), d("d1", vec![by_value(&otool("B"))])],
            Some(INLINE_BETA),
        ),
        (
            "by value, left out behind an assistant turn",
            vec![
                u("u1", "hi"),
                ca("a1", vec![text("ok")]),
                d("d1", vec![by_value(&otool("B"))]),
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
            Some(vec![otool("A")]),
            &WireContext::default(),
        )
        .unwrap();
        assert_eq!(req.header("anthropic-beta"), beta, "{name}");
        assert!(!req.body.contains(DEFERRED_PLACEHOLDER_NAME), "{name}");
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
                d("d1", vec![text("x"), by_value(&otool("B"))]),
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
            d("d1", vec![ContentBlock::redefinition("A")]),
        ],
        Some(vec![otool("A")]),
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
            Some(vec![otool("A"), schema(bad.clone())]),
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
            Some(vec![otool("A")]),
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
        Some(vec![otool("A"), rich.clone()]),
        &WireContext::default(),
    )
    .unwrap();
    assert!(
        req.body.contains(concat!(
            r#"{"name":"R","description":"r","input_schema":{"type":"object"},"#,
            r#""strict":true,"input_examples":[{"q":"x"}],"eager_input_streaming":true,"defer_loading":true}"#
        )),
        "{}",
        req.body
    );
    assert_eq!(
        req.body.matches("cache_control").count(),
        1,
        "only the top-level one: never on a (deferred) tool"
    );
    // Not on other providers.
    let req = wire_tools(&flash(), vec![rich]).unwrap();
    assert!(
        req.body.contains(
            r#"{"name":"R","description":"r","input_schema":{"type":"object"},"defer_loading":true}"#
        ),
        "{}",
        req.body
    );
}

#[test]
fn tool_limit_exceeded() {
    // Deferred declarations: 10,000 are accepted, 10,001 are not.
    let mut tools: Vec<ToolSchema> = (0..ToolLimit::MAX_TOOLS)
        .map(|i| odeferred(&format!("t{i}")))
        .collect();
    tools.push(otool("A"));
    assert!(wire_tools(&claude(), tools.clone()).is_ok());
    tools.push(odeferred("one_more"));
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
        range.map(|i| by_value(&otool(&format!("v{i}")))).collect()
    };
    let mut d2 = vec![remove("v0"), by_value(&otool("w")), by_value(&otool("v1"))];
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
        Some(vec![otool("A")]),
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
        Some(vec![otool("A")]),
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
        d("d2", vec![by_value(&otool("w"))]),
    ];
    assert!(
        ser(
            &claude_prefill(),
            &claude_config(),
            waiting,
            Some(vec![otool("A")]),
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
        Some(vec![otool("A")]),
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
            Some(vec![otool("A")]),
            &WireContext::default(),
        )
        .is_ok()
    );
}

#[test]
fn example_w13_forced_tool_choice() {
    for choice in [json!({"type": "any"}), json!({"type": "tool", "name": "A"})] {
        let config = claude_config().with("tool_choice", choice.clone());
        let err = ser(
            &claude(),
            &config,
            vec![u("u1", "hi")],
            Some(vec![otool("A")]),
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
                Some(vec![otool("A")]),
                &WireContext::default()
            )
            .is_ok()
        );
    }
    for choice in [json!({"type": "auto"}), json!({"type": "none"})] {
        let config = claude_config().with("tool_choice", choice);
        assert!(
            ser(
                &claude(),
                &config,
                vec![u("u1", "hi")],
                Some(vec![otool("A")]),
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
    assert_eq!(req.report.unverifiable_reasoning_left_out, 5);
    assert_eq!(req.report.thinking_left_out, 0);
    let b = body(&req);
    assert_eq!(
        b["messages"][1],
        assistant_turn(json!([thinking_block("good", "s1"), t("a")]))
    );
    assert_eq!(b["messages"][3], assistant_turn(json!([t("b")])));
    assert!(!req.body.contains("theirs") && !req.body.contains("zzz"));
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
        req.body.contains(concat!(
            r#"{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"s1"},"#,
            r#"{"data":"EnC=","type":"redacted_thinking","z":{"a":2,"b":1}},"#,
            r#"{"type":"text","text":"ok"}]}"#
        )),
        "{}",
        req.body
    );
    assert_eq!(req.report, WireReport::default());
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

#[test]
fn assistant_turn_left_empty() {
    // Leaving unverifiable reasoning out empties a turn in the middle...
    let err = ser(
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
    .unwrap_err();
    assert!(
        matches!(&err, WireError::Message { message_id, kind: MessageFault::AssistantTurnLeftEmpty { left_out: 1 } } if message_id == "a1"),
        "{err:?}"
    );
    // ... or at the end (where an empty final turn is otherwise allowed); and stripping does
    // the same.
    let floor = ids(&["a1"]);
    let err = ser(
        &claude_prefill(),
        &claude_config(),
        vec![
            u("u1", "hi"),
            ca("a1", vec![signed("r", "s"), redacted("x")]),
        ],
        None,
        &plan(ThinkingPolicy::StripThinking, &floor),
    )
    .unwrap_err();
    assert!(
        matches!(&err, WireError::Message { message_id, kind: MessageFault::AssistantTurnLeftEmpty { left_out: 2 } } if message_id == "a1"),
        "{err:?}"
    );
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
    assert_eq!(req.report.thinking_left_out, 1);
    assert!(!req.report.drop_block);
    assert!(!req.body.contains("block_binding"));
    assert_eq!(req.header("anthropic-beta"), Some(INLINE_BETA));
}

#[test]
fn example_w11_drop_block_sends_them_with_block_binding_and_its_beta() {
    let floor = ids(&["u1", "a1"]);
    let config = claude_config().with(
        "thinking",
        json!({"type": "enabled", "budget_tokens": 2048}),
    );
    let req = ser(
        &claude(),
        &config,
        w11(),
        None,
        &plan(ThinkingPolicy::DropBlock, &floor),
    )
    .unwrap();
    assert!(
        req.body.starts_with(concat!(
            r#"{"model":"claude-test","cache_control":{"type":"ephemeral"},"max_tokens":1024,"#,
            r#""thinking":{"block_binding":{"prefix_mismatch_behavior":"drop_block"},"budget_tokens":2048,"type":"enabled"},"#,
            r#""messages":"#
        )),
        "{}",
        req.body
    );
    assert_eq!(
        body(&req)["messages"][1],
        assistant_turn(json!([thinking_block("pre", "s1"), t("ok")]))
    );
    assert!(req.report.drop_block);
    assert_eq!(req.report.thinking_left_out, 0);
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
    );
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
    assert!(req.report.drop_block && req.body.contains("redacted_thinking"));
}

#[test]
fn example_w11_refuse_is_a_thinking_rewrite_error() {
    let floor = ids(&["u1", "a1"]);
    for rewrite in [
        Rewrite::Tools,
        Rewrite::System,
        Rewrite::History { message: 3 },
    ] {
        let context = WireContext {
            previous_blocks: None,
            thinking: Some(ThinkingPlan {
                policy: ThinkingPolicy::Refuse,
                before_floor: &floor,
                rewrite,
            }),
        };
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
        let config = claude_config().with("thinking", thinking.clone());
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
    assert!(plain.body.contains(r#""signature":"s1""#));
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
    assert_eq!(req.report.thinking_left_out, 1);
    let req = ser(
        &claude(),
        &claude_config(),
        history(),
        None,
        &plan(ThinkingPolicy::DropBlock, &floor),
    )
    .unwrap();
    assert!(req.report.drop_block && req.body.contains("block_binding"));
    assert!(req.body.contains(r#""signature":"s1""#) && req.body.contains(r#""signature":"s2""#));
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
    assert_eq!(req.report.thinking_left_out, 1);
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
    assert_eq!(req.report.thinking_left_out, 1);
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
