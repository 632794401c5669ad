//! The OpenAI-compatible chat serializer.

use super::*;

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
    let config = Config::new("openai", "gpt-test")
        .with("temperature", json!(0))
        .unwrap();
    let req = serialize(&config, &projected(messages, Some(vec![schema])), &chat()).unwrap();
    assert_eq!(
        req.body(),
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
        req.headers(),
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
        serialize(&config(), &p, &chat()).unwrap().body(),
        serialize(&config(), &p, &flash()).unwrap().body()
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
    let tools_of = |route: &Route, tools: Option<Vec<ToolSchema>>| -> Value {
        let p = projected(vec![u("u1", "hi")], tools);
        let body = serialize(&config(), &p, route).unwrap().into_parts().0;
        serde_json::from_str::<Value>(&body).unwrap()["tools"].clone()
    };
    // Main path and fallbacks alike: any projection holding a non-deferred tool.
    for tools in [
        vec![object_tool("A")],
        vec![object_tool("A"), object_tool("Bd")],
    ] {
        let n = tools.len();
        let got = tools_of(&with, Some(tools.clone()));
        assert_eq!(got.as_array().unwrap().len(), n + 1);
        assert_eq!(got[n]["name"], DEFERRED_PLACEHOLDER_NAME, "appended last");
        let p = projected(vec![u("u1", "hi")], Some(tools.clone()));
        let body = serialize(&config(), &p, &with).unwrap().into_parts().0;
        assert!(
            body.contains(&format!("{PLACEHOLDER}],")),
            "the spec's bytes: {body}"
        );
        assert_eq!(
            tools_of(&anthropic(), Some(tools))
                .as_array()
                .unwrap()
                .len(),
            n
        );
        // A route without a mode (which no one can build) is checked in the crate: see
        // `wire::tests::deferred_placeholder_not_appended_without_a_mode`.
    }
    // Without a non-deferred tool (or without tools) there is nothing to keep stable.
    assert_eq!(
        tools_of(&with, Some(vec![object_tool("Bd")]))
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
        .into_parts()
        .0;
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
        .into_parts()
        .0;
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
        .into_parts()
        .0;
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
    .into_parts()
    .0;
    assert!(
        body.ends_with(r#"{"role":"assistant","content":[]}]}"#),
        "{body}"
    );
}
