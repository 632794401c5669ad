//! Input from a log file or a caller never panics: arbitrary bytes, mutated valid logs and
//! arbitrary JSON go through loading, `append_json` and the JSON entry points, and arbitrary
//! message sequences through projection and every serializer; each comes back as a value or a
//! typed error.

use mektpoy::{Event, Session, history::ToolHistory};
use proptest::prelude::*;

/// A valid log to mutate: every event type, a replace, a header with tools, a developer
/// message naming it.
const LOG: &str = concat!(
    r#"{"type":"session","version":0,"id":"s"}"#,
    "\n",
    r#"{"type":"system/message","data":{"message":{"id":"p","role":"system","content":[{"type":"text","text":"P"}],"source":{"kind":"system-prompt"}}},"surfaceOp":"append"}"#,
    "\n",
    r#"{"type":"user/message","data":{"turn":1,"message":{"id":"u","role":"user","content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}}},"surfaceOp":"append"}"#,
    "\n",
    r#"{"type":"request/header","data":{"header":{"config":{"provider":"p","model":"m"},"tools":[{"name":"a","description":"d","parameters":{}},{"name":"b","description":"d","parameters":{},"deferLoading":true}]},"reason":"initial"}}"#,
    "\n",
    r#"{"type":"developer/message","data":{"message":{"id":"d","role":"developer","content":[{"type":"tool-addition","toolName":"b"},{"type":"tool-removal","toolName":"a"}],"source":{"kind":"tool-registry"}},"headerSeq":2},"surfaceOp":"append"}"#,
    "\n",
    r#"{"type":"assistant/message","data":{"message":{"id":"x","role":"assistant","content":[{"type":"tool-call","id":"c","name":"b","arguments":"{}"}],"source":{"kind":"model","provider":"p","model":"m"}}},"surfaceOp":{"op":"replace","start":1,"end":2}}"#,
    "\n",
    r#"{"type":"tool/result","data":{"message":{"id":"t","role":"tool","content":[],"source":{"kind":"tool","callId":"c"},"isError":true}}}"#,
    "\n",
    r#"{"type":"plugin/x","data":{},"surfaceOp":"append"}"#,
    "\n",
);

fn json_value() -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        any::<i64>().prop_map(serde_json::Value::from),
        prop_oneof![
            Just("type"),
            Just("data"),
            Just("message"),
            Just("append"),
            Just("tool-addition"),
            Just("x")
        ]
        .prop_map(serde_json::Value::from),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::from),
            proptest::collection::btree_map(
                prop_oneof![
                    Just("type".to_owned()),
                    Just("data".to_owned()),
                    Just("surfaceOp".to_owned()),
                    Just("message".to_owned()),
                    Just("header".to_owned()),
                    Just("config".to_owned()),
                    Just("tools".to_owned()),
                    Just("reason".to_owned()),
                    Just("id".to_owned()),
                    Just("role".to_owned()),
                    Just("content".to_owned()),
                    Just("op".to_owned()),
                ],
                inner,
                0..5,
            )
            .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn arbitrary_bytes_load_without_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        let _ = Session::load_bytes(&bytes);
    }

    #[test]
    fn mutated_logs_load_without_panic(
        cuts in proptest::collection::vec((0usize..LOG.len(), any::<u8>(), 0u8..3), 1..6),
    ) {
        let mut bytes = LOG.as_bytes().to_vec();
        for (at, byte, kind) in cuts {
            if bytes.is_empty() {
                break;
            }
            let at = at.min(bytes.len() - 1);
            match kind {
                0 => bytes[at] = byte,
                1 => bytes.truncate(at),
                _ => bytes.insert(at, byte),
            }
        }
        if let Ok(loaded) = Session::load_bytes(&bytes) {
            // Whatever loads folds and saves without panicking either.
            let _ = loaded.session.tool_history();
            let _ = loaded.session.to_jsonl();
        }
    }

    #[test]
    fn arbitrary_json_events_are_values_or_typed_errors(v in json_value()) {
        let _ = Event::from_value(v.clone());
        let session = Session::load_bytes(LOG.as_bytes()).unwrap().session;
        let before = session.len();
        match session.append_json(&v.to_string()) {
            Ok(_) => prop_assert_eq!(session.len(), before + 1),
            Err(_) => prop_assert_eq!(session.len(), before),
        }
        let _ = serde_json::from_value::<ToolHistory>(v);
    }

    /// Text and `Value` go through one decoder: the same event or the same fault. The text of
    /// a `Value` has its keys sorted, so `data` comes before `type` and the decoder's deferred
    /// path (raw `data`, decoded once the type is known) is the one exercised.
    #[test]
    fn text_and_value_decode_alike(v in json_value()) {
        let text = serde_json::to_string(&v).unwrap();
        let from_text = format!("{:?}", Event::from_json(&text));
        let from_value = format!("{:?}", Event::from_value(v));
        prop_assert_eq!(from_text, from_value, "{}", text);
    }
}

fn block() -> impl Strategy<Value = mektpoy::ContentBlock> {
    use mektpoy::ContentBlock;
    prop_oneof![
        prop_oneof![Just(""), Just("hi"), Just("x y")].prop_map(ContentBlock::text),
        prop_oneof![Just("a"), Just("b")].prop_map(|n| ContentBlock::addition(n).unwrap()),
        prop_oneof![Just("a"), Just("b")].prop_map(|n| ContentBlock::removal(n).unwrap()),
        (
            prop_oneof![Just("c1"), Just("c2")],
            prop_oneof![Just("{}"), Just("[1]"), Just("{"), Just("{\"p\":1}")]
        )
            .prop_map(|(id, args)| ContentBlock::tool_call(id, "a", args).unwrap()),
        Just(ContentBlock::other(serde_json::json!({"type": "image"})).unwrap()),
        Just(ContentBlock::Reasoning {
            text: "r".into(),
            extra: Default::default()
        }),
    ]
}

/// A message of role `role` (two kinds of system message), id `m{i}`.
fn message(
    i: usize,
    role: u8,
    content: Vec<mektpoy::ContentBlock>,
    call: &str,
) -> mektpoy::Message {
    use mektpoy::{
        Message,
        vocab::{MessageSource, Role},
    };
    let id = format!("m{i}");
    match role {
        0 => Message::new(id, Role::User, content, MessageSource::User),
        1 => Message::new(
            id,
            Role::Assistant,
            content,
            MessageSource::Model {
                provider: "p".into(),
                model: "m".into(),
            },
        ),
        2 => Message::new(
            id,
            Role::Tool,
            content,
            MessageSource::Tool {
                call_id: call.into(),
            },
        ),
        3 => Message::new(id, Role::Developer, content, MessageSource::ToolRegistry),
        4 => Message::new(id, Role::System, content, MessageSource::SystemPrompt),
        _ => Message::new(
            id,
            Role::System,
            content,
            MessageSource::other(serde_json::json!({"kind": "note"})).unwrap(),
        ),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Whatever a caller projects, every serializer answers with a body or a typed error.
    #[test]
    fn serializers_never_panic(
        specs in proptest::collection::vec(
            (0u8..6, proptest::collection::vec(block(), 0..3), prop_oneof![Just("c1"), Just("c2")]),
            0..8,
        ),
    ) {
        let messages: Vec<mektpoy::Message> = specs
            .into_iter()
            .enumerate()
            .map(|(i, (role, content, call))| message(i, role, content, call))
            .collect();
        let tools = [
            mektpoy::ToolSchema::no_input("a", "a"),
            mektpoy::ToolSchema::no_input("b", "b").with_defer_loading(true),
        ];
        let config = mektpoy::Config::new("p", "m").with("max_tokens", 16.into()).unwrap();
        for (provider, model) in [
            ("deepseek", "deepseek-flash"),
            ("deepseek", "deepseek-v4-pro"),
            ("anthropic", "claude-opus-5"),
            ("acme", "x"),
        ] {
            let route = mektpoy::route_for(provider, model);
            let history = mektpoy::history::ToolHistory::new(
                [tools[0].clone()],
                [mektpoy::history::ToolUpdate::new("m1", [tools[1].clone()]), mektpoy::history::ToolUpdate::new("m3", [])],
            );
            for tools in [None, Some(&tools[..])] {
                let raw = mektpoy::project::ProjectedToolUpdates::new(&messages[..]);
                let raw = match tools {
                    Some(tools) => raw.with_tools(tools),
                    None => raw,
                };
                let _ = mektpoy::wire::serialize(&config, &raw, &route);
                for history in [None, Some(&history)] {
                    let projected =
                        mektpoy::project::project_tool_updates(&messages, tools, route.tool_update(), history);
                    let _ = mektpoy::wire::serialize(&config, &projected, &route);
                }
            }
        }
    }
}
