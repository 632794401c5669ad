//! The one serializer test that needs a private item: `RouteBuilder::build_unchecked`, to
//! build a route no one can build. Everything else is in `tests/wire.rs`, over the public API.

use serde_json::{Value, json};

use super::*;
use crate::route::ToolUpdateMode;

fn anthropic() -> Route {
    Route::builder("anthropic", "claude-test", WireApi::Messages)
        .tool_update(Some(ToolUpdateMode::InHistory))
        .system_prompt_in_history(true)
        .beta_always(true)
        .deferred_section_bytes(64)
        .build()
        .unwrap()
}

fn otool(name: &str) -> ToolSchema {
    let mut parameters = serde_json::Map::new();
    parameters.insert("type".into(), json!("object"));
    ToolSchema::new(name, name, parameters)
}

/// Moved from `deferred_placeholder_appended_exactly_on_mode_routes_with_an_immediate_tool`
/// (tests/wire.rs): a route asking for the placeholder but without a tool-update mode (a
/// combination `build` refuses) gets no placeholder.
#[test]
fn deferred_placeholder_not_appended_without_a_mode() {
    let no_mode = anthropic()
        .into_builder()
        .deferred_placeholder(true)
        .tool_update(None)
        .beta_always(false)
        .build_unchecked();
    let config = Config::new("deepseek", "deepseek-flash")
        .with("max_tokens", json!(1024))
        .unwrap();
    for tools in [
        vec![otool("A")],
        vec![otool("A"), otool("B").with_defer_loading(true)],
    ] {
        let n = tools.len();
        let p = ProjectedToolUpdates::new(vec![Message::user("u1", "hi")]).with_tools(tools);
        let body = serialize(&config, &p, &no_mode).unwrap().body;
        let got = serde_json::from_str::<Value>(&body).unwrap()["tools"].clone();
        assert_eq!(got.as_array().unwrap().len(), n);
    }
}

/// [Decision 95](crate::manual::decisions#decision-95): an assistant message that leaving reasoning
/// out empties sends nothing, and a pass resumed from the route's previous request passes over the
/// same messages as a pass from the first one (the same body; every debug build also compares the
/// resume points). Thinking-only answers sit right before and after the points the passes resume
/// from.
#[test]
fn a_resumed_pass_passes_over_the_messages_a_fresh_pass_does() {
    let route = crate::route_for("anthropic", "claude-fable-5-2");
    assert!(route.binds_thinking());
    let config = Config::new("anthropic", "claude-fable-5-2")
        .with("max_tokens", json!(64))
        .unwrap();
    let source = || MessageSource::Model {
        provider: "anthropic".into(),
        model: "claude-fable-5-2".into(),
    };
    let thinking_only = |id: &str| {
        let extra = [("signature".to_owned(), json!(format!("sig-{id}")))]
            .into_iter()
            .collect();
        Message::new(
            id,
            Role::Assistant,
            vec![ContentBlock::Reasoning {
                text: "thinking".into(),
                extra,
            }],
            source(),
        )
    };
    let text = |id: &str| {
        Message::new(
            id,
            Role::Assistant,
            vec![ContentBlock::text("ok")],
            source(),
        )
    };
    let user = |id: &str| Message::user(id, format!("text of {id}"));
    let messages = vec![
        user("u1"),
        thinking_only("a1"),
        user("u2"),
        text("a2"),
        user("u3"),
        thinking_only("a3"),
        thinking_only("a3b"),
        user("u4"),
        text("a4"),
        thinking_only("a4b"),
        user("u5"),
        thinking_only("a5"),
        user("u6"),
    ];
    let floor: HashSet<String> = ["a1", "a3", "a3b", "a4b", "a5"]
        .into_iter()
        .map(String::from)
        .collect();
    let context = WireContext {
        previous_blocks: None,
        thinking: Some(ThinkingPlan {
            policy: crate::event::ThinkingPolicy::StripThinking,
            before_floor: &floor,
            rewrite: Rewrite::Tools,
        }),
        floor_key: Some(7),
        prompt_cache_key: None,
    };
    let mut resume = None;
    let mut resumed = 0;
    for n in 1..=messages.len() {
        if messages[n - 1].role() != Role::User {
            continue; // the route refuses assistant prefill
        }
        let p = ProjectedToolUpdates::new(messages[..n].to_vec());
        let (request, next, from) = serialize_resuming(&config, &p, &route, &context, resume);
        let request = request.unwrap();
        assert_eq!(
            request,
            serialize_with(&config, &p, &route, &context).unwrap(),
            "{n}"
        );
        let body: Value = serde_json::from_str(&request.body).unwrap();
        let roles: Vec<&str> = body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["role"].as_str().unwrap())
            .collect();
        assert!(roles.windows(2).all(|w| w[0] != w[1]), "{n}: {roles:?}");
        let carried = &request.segments.as_deref().unwrap().carried;
        check_carried(&body, carried, &messages[..n]);
        for passed_over in [1, 5, 6, 9, 11].into_iter().filter(|&i| i < n) {
            assert_eq!(carried.wire_of(passed_over), None, "{n}: {passed_over}");
        }
        resumed += usize::from(from.is_some());
        resume = next;
    }
    assert!(resumed >= 3, "the passes resumed ({resumed})");
}

/// Checks what the serializer says each wire message of `body` carries: as many wire messages
/// as the body has, each text block written from the block it names, each named message
/// among the wire message's messages, and the messages of every wire message in order.
fn check_carried(body: &Value, carried: &Carried, messages: &[Message]) {
    let wire = body["messages"].as_array().unwrap();
    assert_eq!(carried.turns(), wire.len(), "{body}");
    for (w, message) in wire.iter().enumerate() {
        let carries: Vec<usize> = carried.messages_of(w).collect();
        assert!(
            !carries.is_empty(),
            "wire message {w} carries nothing: {body}"
        );
        assert!(carries.windows(2).all(|p| p[0] < p[1]), "{carries:?}");
        let Some(blocks) = message["content"].as_array() else {
            continue;
        };
        for (j, block) in blocks.iter().enumerate() {
            let (m, b) = carried.block_of(w, j).unwrap();
            assert!(carries.contains(&m), "{w}/{j}: {m} not in {carries:?}");
            if block["type"] == "text" {
                let ContentBlock::Text { text } = &messages[m].content()[b] else {
                    panic!("{w}/{j}: block {b} of {} is not text", messages[m].id());
                };
                assert_eq!(block["text"].as_str(), Some(text.as_str()), "{w}/{j}");
            }
        }
        assert_eq!(carried.block_of(w, blocks.len()), None);
    }
}

/// [Decision 104](crate::manual::decisions#decision-104): the serializer's pass records which
/// messages and blocks each wire message carries: a prompt update queued into a system message, a
/// tool round, merged user turns, and on a chat route the system message and the text parts.
#[test]
fn the_pass_records_what_each_wire_message_carries() {
    let config = Config::new("anthropic", "claude-test")
        .with("max_tokens", json!(64))
        .unwrap();
    let assistant = |id: &str, content| {
        Message::new(
            id,
            Role::Assistant,
            content,
            MessageSource::Model {
                provider: "anthropic".into(),
                model: "claude-test".into(),
            },
        )
    };
    let call = ContentBlock::tool_call("c1", "read", "{}").unwrap();
    let messages = vec![
        Message::system("s0", "be brief"),
        Message::user("u1", "hi"),
        assistant(
            "a1",
            vec![ContentBlock::text(""), ContentBlock::text("x"), call],
        ),
        Message::tool_result("t1", "c1", "file"),
        Message::system("s1", "be briefer"),
        Message::user("u2", "more"),
        assistant("a2", vec![ContentBlock::text("ok")]),
        Message::new(
            "u3",
            Role::User,
            vec![ContentBlock::text("one"), ContentBlock::text("two")],
            MessageSource::User,
        ),
    ];
    let p = ProjectedToolUpdates::new(messages.clone()).with_tools(vec![otool("read")]);
    let wire = serialize(&config, &p, &anthropic()).unwrap();
    let body: Value = serde_json::from_str(&wire.body).unwrap();
    let carried = &wire.segments.as_deref().unwrap().carried;
    check_carried(&body, carried, &messages);
    let groups: Vec<Vec<usize>> = (0..carried.turns())
        .map(|w| carried.messages_of(w).collect())
        .collect();
    // s0 is `system`; t1 and u2 are one user turn; s1 waits for the next assistant turn.
    assert_eq!(
        groups,
        [vec![1], vec![2], vec![3, 5], vec![4], vec![6], vec![7]]
    );
    assert_eq!(
        carried.block_of(1, 1),
        Some((2, 2)),
        "the call after the empty text"
    );
    assert_eq!(carried.block_of(2, 0), Some((3, 0)), "the tool result");

    // Chat: the system message carries the latest prompt; a message of two texts has parts.
    let chat = crate::route_for("acme", "acme-1");
    let config = Config::new("acme", "acme-1");
    let chat_messages: Vec<Message> = messages
        .iter()
        .filter(|m| m.id() != "s1")
        .cloned()
        .collect();
    let p = ProjectedToolUpdates::new(chat_messages.clone()).with_tools(vec![otool("read")]);
    let wire = serialize(&config, &p, &chat).unwrap();
    let body: Value = serde_json::from_str(&wire.body).unwrap();
    let carried = &wire.segments.as_deref().unwrap().carried;
    check_carried(&body, carried, &chat_messages);
    let groups: Vec<Vec<usize>> = (0..carried.turns())
        .map(|w| carried.messages_of(w).collect())
        .collect();
    assert_eq!(
        groups,
        (0..chat_messages.len())
            .map(|i| vec![i])
            .collect::<Vec<_>>()
    );
    assert_eq!(
        carried.block_of(1, 0),
        None,
        "one text goes out as a string"
    );
    assert_eq!(
        carried.block_of(2, 0),
        Some((2, 0)),
        "a1's two texts are parts"
    );
    assert_eq!(carried.block_of(2, 1), Some((2, 1)));
}
