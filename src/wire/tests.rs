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
    let config = Config::new("deepseek", "deepseek-flash").with("max_tokens", json!(1024));
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

/// Decision 95: an assistant message that leaving reasoning out empties sends nothing, and a
/// pass resumed from the route's previous request passes over the same messages as a pass
/// from the first one (the same body; every debug build also compares the resume points).
/// Thinking-only answers sit right before and after the points the passes resume from.
#[test]
fn a_resumed_pass_passes_over_the_messages_a_fresh_pass_does() {
    let route = crate::route_for("anthropic", "claude-fable-5-2");
    assert!(route.binds_thinking());
    let config = Config::new("anthropic", "claude-fable-5-2").with("max_tokens", json!(64));
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
        resumed += usize::from(from.is_some());
        resume = next;
    }
    assert!(resumed >= 3, "the passes resumed ({resumed})");
}
