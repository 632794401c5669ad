//! A tool change on a continuation step right after an assistant message (no user message, no
//! tool result): the Messages API takes a system message only after a user / tool-result turn,
//! so the change waits for the next such turn (reference §7 queue, departure 7).
//!
//! On DeepSeek flash the continuation is sent as it is (it ends with the assistant's turn) and
//! the addition follows the next user turn. Claude models refuse a request that ends with an
//! assistant turn (assistant prefill, reference §7): there the crate refuses the continuation before
//! any I/O (`MessageFault::AssistantPrefill`), and the next step, with a user message, is accepted
//! and carries the addition — by reference on `claude-opus-5` as Bedrock and Google Cloud serve
//! it, by value on the Claude API's `claude-opus-5` and `claude-fable-5-1` (which also gets its
//! signed thinking back).

use mektpoy::{
    Route, route_for,
    wire::{MessageFault, WireError},
};
use serde_json::{Value, json};

use crate::standin::kept_by;

use crate::agent::{Agent, Reply, Unsent, arg_params, opus_by_reference, prompt, tool_of};

/// The addition block of `search` on `route`'s wire.
fn search_addition(route: &Route) -> Value {
    if route.inline_definitions() {
        json!({"type": "tool_addition", "tool": {"type": "tool_definition", "definition": {
            "name": "search",
            "description": "search",
            "input_schema": {"type": "object", "properties": {"arg": {"type": "string"}}}
        }}})
    } else {
        json!({"type": "tool_addition", "tool": {"type": "tool_reference", "name": "search"}})
    }
}

fn change_waits_for_the_next_user_turn(key: &str, route: Route) {
    let prefill = route.assistant_prefill();
    let addition = search_addition(&route);
    let binds = route.binds_thinking();
    let mut agent = Agent::new(key, route);
    let prompt = prompt("You are a headless agent.");
    let read = tool_of("read", 1, false, arg_params());
    let search = tool_of("search", 1, false, arg_params());
    let refused = |step: u32| {
        move |r: crate::standin::Refused| -> crate::agent::Sent {
            panic!("{key} step {step}: refused ({}): {}", r.status, r.message)
        }
    };

    let first = agent
        .step(
            &prompt,
            std::slice::from_ref(&read),
            Some("Start."),
            Reply::Text,
        )
        .unwrap_or_else(refused(1));
    // The model stopped mid-answer; the loop continues with a new tool and no user message.
    let second = agent.try_step(&prompt, &[read.clone(), search.clone()], None, Reply::Text);
    let second = match second {
        Ok(second) => {
            assert!(
                prefill,
                "{key}: the route refuses prefill, the crate must refuse"
            );
            second
        }
        Err(Unsent::Crate {
            request, error: e, ..
        }) => {
            assert!(!prefill, "{key}: {e}");
            assert!(
                matches!(&e, WireError::Message { message_id, kind: MessageFault::AssistantPrefill } if message_id == "a1"),
                "{key}: {e:?}"
            );
            // Refused again, the same way, however often it is asked.
            let again = request.to_wire();
            assert!(
                matches!(&again, Err(WireError::Message { message_id, kind: MessageFault::AssistantPrefill }) if message_id == "a1"),
                "{key}: {again:?}"
            );
            return next_user_turn_carries_the_addition(
                key, agent, &prompt, &first, addition, binds,
            );
        }
        Err(Unsent::Refused(r) | Unsent::Failed { refused: r, .. }) => refused(2)(r),
        Err(Unsent::Broken { error, .. }) => panic!("{key} step 2: the answer: {error}"),
    };
    assert!(
        !second.wire.body().contains("tool_addition"),
        "{key}: the addition waits; it cannot follow the assistant turn"
    );
    assert!(
        second
            .wire
            .body()
            .ends_with(r#"{"type":"text","text":"ok 1"}]}]}"#),
        "{key}: the request ends with the assistant turn: {}",
        second.wire.body()
    );
    assert_eq!(
        second.usage.cached_bytes,
        kept_by(second.wire.body(), first.usage.total_bytes),
        "{key}"
    );

    let third = agent
        .step(&prompt, &[read, search], Some("Go on."), Reply::Text)
        .unwrap_or_else(refused(3));
    assert!(
        third.wire.body().ends_with(
            r#"{"role":"system","content":[{"type":"tool_addition","tool":{"type":"tool_reference","name":"search"}}]}]}"#
        ),
        "{key}: the addition goes out after the next user turn: {}",
        third.wire.body()
    );
    // The two assistant messages are one wire turn, so the second request's last turn is
    // reopened: everything but its closing `]}` is read from the cache (in DeepSeek's units).
    assert_eq!(
        third.usage.cached_bytes,
        kept_by(third.wire.body(), second.usage.total_bytes - 2),
        "{key}"
    );
}

/// After the continuation the crate refused: nothing was sent (the stand-in's next answer is
/// its second), and the next step, with a user message, carries the addition after that turn
/// and reads the whole first request from the cache.
fn next_user_turn_carries_the_addition(
    key: &str,
    mut agent: Agent,
    prompt: &str,
    first: &crate::agent::Sent,
    addition: Value,
    binds: bool,
) {
    let tools = [
        tool_of("read", 1, false, arg_params()),
        tool_of("search", 1, false, arg_params()),
    ];
    let third = agent
        .step(prompt, &tools, Some("Go on."), Reply::Text)
        .unwrap_or_else(|r| panic!("{key} step 3: refused ({}): {}", r.status, r.message));
    let text = third.content.last().unwrap();
    assert_eq!(
        text["text"], "ok 2",
        "{key}: the refused continuation was never sent"
    );
    let body: Value = serde_json::from_str(third.wire.body()).unwrap();
    let messages = body["messages"].as_array().unwrap();
    let roles: Vec<&str> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "assistant", "user", "system"], "{key}");
    assert_eq!(
        messages[1],
        json!({"role": "assistant", "content": first.content}),
        "{key}: the answer goes back as it came"
    );
    assert_eq!(
        messages[3],
        json!({"role": "system", "content": [addition]}),
        "{key}: the addition goes out after the next user turn"
    );
    if binds {
        assert_eq!(first.content[0]["type"], "thinking", "{key}");
        assert_eq!(third.wire.report().thinking_left_out, 0, "{key}");
    }
    assert_eq!(
        third.usage.cached_bytes,
        kept_by(third.wire.body(), first.usage.total_bytes),
        "{key}"
    );
}

#[test]
fn continuation_after_an_assistant_message_defers_the_tool_change_to_the_next_user_turn() {
    change_waits_for_the_next_user_turn(
        "continuation/flash",
        route_for("deepseek", "deepseek-flash"),
    );
}

#[test]
fn continuation_after_an_assistant_message_is_refused_before_any_io_on_claude_and_the_next_user_turn_carries_the_change()
 {
    change_waits_for_the_next_user_turn("continuation/opus/by-reference", opus_by_reference(true));
    change_waits_for_the_next_user_turn(
        "continuation/opus",
        route_for("anthropic", "claude-opus-5"),
    );
    change_waits_for_the_next_user_turn(
        "continuation/fable-5-1",
        route_for("anthropic", "claude-fable-5-1"),
    );
}
