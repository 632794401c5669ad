//! One test per `WireError` variant.

use super::*;

#[test]
fn missing_max_tokens() {
    let p = projected(vec![u("u1", "hi")], None);
    let no_max = Config::new("deepseek", "deepseek-flash")
        .with("temperature", json!(1))
        .unwrap();
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
        // Refused where it is written (issue 21)...
        assert_eq!(
            config().with(key, json!("x")).unwrap_err(),
            mektpoy::event::ConfigError::ReservedKey { key },
            "{key}"
        );
    }
    // ...and by the wire when a log holds one (decoding keeps what the log holds; `provider`
    // and `model` can only be the config's own fields there).
    for key in ["system", "tools", "messages"] {
        let line = format!(
            r#"{{"type":"request/header","data":{{"header":{{"config":{{"provider":"deepseek","model":"deepseek-flash","max_tokens":1024,"{key}":"x"}}}},"reason":"initial"}}}}"#
        );
        let mektpoy::Event::Header(h) = mektpoy::Event::from_json(&line).unwrap() else {
            panic!("{line}")
        };
        for route in [flash(), chat()] {
            let err = serialize(&h.header.config, &p, &route).unwrap_err();
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
    let p = projected(vec![u("u1", "hi")], Some(vec![tool("A"), tool("Bd")]));
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
