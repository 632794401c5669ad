//! A tool change on a continuation step right after an assistant message (no user message, no
//! tool result): the Messages API takes a system message only after a user / tool-result turn,
//! so the change waits for the next such turn (SPEC §7 queue, departure 7) and every request is
//! accepted.

use mektpoy::route_for;

use crate::agent::{Agent, Reply, tool};

fn change_waits_for_the_next_user_turn(key: &str, route: mektpoy::Route) {
    let mut agent = Agent::new(key, route);
    let prompt = "You are a headless agent.";
    let read = tool("read", 1, false);
    let search = tool("search", 1, false);
    let refused = |step: u32| {
        move |r: crate::standin::Refused| -> crate::agent::Sent {
            panic!("{key} step {step}: refused ({}): {}", r.status, r.message)
        }
    };

    let first = agent
        .step(
            prompt,
            std::slice::from_ref(&read),
            Some("Start."),
            Reply::Text,
        )
        .unwrap_or_else(refused(1));
    // The model stopped mid-answer; the loop continues with a new tool and no user message.
    let second = agent
        .step(prompt, &[read.clone(), search.clone()], None, Reply::Text)
        .unwrap_or_else(refused(2));
    assert!(
        !second.wire.body.contains("tool_addition"),
        "{key}: the addition waits; it cannot follow the assistant turn"
    );
    assert!(
        second
            .wire
            .body
            .ends_with(r#"{"type":"text","text":"ok 1"}]}]}"#),
        "{key}: the request ends with the assistant turn: {}",
        second.wire.body
    );
    assert_eq!(second.usage.cached_bytes, first.usage.total_bytes, "{key}");

    let third = agent
        .step(prompt, &[read, search], Some("Go on."), Reply::Text)
        .unwrap_or_else(refused(3));
    assert!(
        third.wire.body.ends_with(
            r#"{"role":"system","content":[{"type":"tool_addition","tool":{"type":"tool_reference","name":"search"}}]}]}"#
        ),
        "{key}: the addition goes out after the next user turn: {}",
        third.wire.body
    );
    // The two assistant messages are one wire turn, so the second request's last turn is
    // reopened: everything but its closing `]}` is read from the cache.
    assert_eq!(
        third.usage.cached_bytes,
        second.usage.total_bytes - 2,
        "{key}"
    );
}

#[test]
fn continuation_after_an_assistant_message_defers_the_tool_change_to_the_next_user_turn() {
    change_waits_for_the_next_user_turn(
        "continuation/flash",
        route_for("deepseek", "deepseek-flash"),
    );
    change_waits_for_the_next_user_turn(
        "continuation/opus",
        route_for("anthropic", "claude-opus-5"),
    );
}
