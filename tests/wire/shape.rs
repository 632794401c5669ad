//! Body and header shape: key order, headers, betas.

use super::*;

#[test]
fn body_keys_in_spec_order_and_exact_bytes() {
    let config = Config::new("deepseek", "deepseek-flash")
        .with("temperature", json!(0.5))
        .unwrap()
        .with("max_tokens", json!(100))
        .unwrap()
        .with("metadata", json!({"user_id": "x"}))
        .unwrap();
    let p = projected(
        vec![s("s0", "be brief"), u("u1", "hi")],
        Some(vec![tool("A")]),
    );
    let req = serialize(&config, &p, &flash()).unwrap();
    assert_eq!(
        req.body(),
        concat!(
            r#"{"model":"deepseek-flash","max_tokens":100,"metadata":{"user_id":"x"},"temperature":0.5,"#,
            r#""system":"be brief","tools":[{"name":"A","description":"A","input_schema":{"type":"object"}}],"#,
            r#""messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}"#
        )
    );
    assert_eq!(
        req.headers(),
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
                config = config.with(*k, v.clone()).unwrap();
            }
            bodies.push(serialize(&config, &p, &flash()).unwrap().into_parts().0);
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
    assert!(req.body().contains(
        r#"{"name":"read","description":"d","input_schema":{"properties":{"limit":{"type":"integer"},"path":{"type":"string"}},"required":["path"],"type":"object"}}"#
    ), "{}", req.body());
    assert!(
        !req.body().contains("title"),
        "unknown tool fields are not sent"
    );
    assert!(req.body().contains(
        r#"{"type":"tool_use","id":"c1","name":"read","input":{"path":"/x","limit":3,"opts":{"z":0,"a":1}}}"#
    ), "{}", req.body());
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
        assert!(req.body().contains(&expect), "{arguments}: {}", req.body());
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

/// Issue 20 item 13: arguments that cannot go out token for token are what a model wrote, so
/// they never fail the request (that stopped the session): the Messages API gets them as
/// `{"invalid_arguments":"<the text>"}`, the same bytes every time; chat gets the text itself.
#[test]
fn call_arguments_that_cannot_go_out_unchanged_go_out_as_invalid_arguments() {
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
    let limit = ContentBlock::ARGUMENTS_DEPTH_LIMIT;
    // `{"a":[[…]]}` nesting `depth` levels.
    let nested = |depth: usize| {
        format!(
            r#"{{"a":{}{}}}"#,
            "[".repeat(depth - 1),
            "]".repeat(depth - 1)
        )
    };
    let kept = send(&flash(), &nested(limit)).unwrap();
    assert!(
        kept.body()
            .contains(&format!(r#""input":{}}}"#, nested(limit)))
    );
    for arguments in [
        r#"{"path":"/safe","path":"/etc/passwd"}"#.to_owned(),
        r#"{"o":[{"k":1,"\u006b":2}]}"#.to_owned(),
        nested(limit + 1),
        // Past serde_json's own recursion limit too.
        nested(200),
        "[1]".to_owned(),
        "null".to_owned(),
        r#"{"a":1} x"#.to_owned(),
        r#"{"a":"#.to_owned(),
        String::new(),
        r#"{"a":1e400}"#.to_owned(),
        r#"{"a":"\ud800"}"#.to_owned(),
        "{ \"spaced\" : [1, 2] , \"k\": 1, \"k\": 2 }".to_owned(),
    ] {
        assert!(
            mektpoy::wire::arguments_fault(&arguments).is_some(),
            "{arguments}"
        );
        let req = send(&flash(), &arguments).unwrap();
        let expect = format!(
            r#""input":{{"invalid_arguments":{}}}}}"#,
            serde_json::to_string(&arguments).unwrap()
        );
        assert!(req.body().contains(&expect), "{arguments}: {}", req.body());
        assert_eq!(send(&flash(), &arguments).unwrap().body(), req.body());
        let chat_req = send(&chat(), &arguments).unwrap();
        assert_eq!(
            body(&chat_req)["messages"][1]["tool_calls"][0]["function"]["arguments"],
            Value::from(arguments.as_str()),
            "{arguments}"
        );
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
            assert!(!req.body().contains("\"tools\""), "{}", req.body());
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
        assert_eq!(req.headers().len(), 2 + usize::from(expect), "{name}");
        assert_eq!(
            req.headers().last().map(|h| h.0 == "anthropic-beta"),
            Some(expect),
            "{name}"
        );
    }
}
