//! Issue 20 item 8: an answer of thinking alone, on a model that binds thinking. While no
//! rewrite intervenes its signed block goes back as the assistant turn; once the tools and the
//! system prompt are rewritten the `StripThinking` policy leaves it out, and the turn it was
//! would be empty, which the API refuses. The crate sends nothing for it (the user turns around
//! it merge, decision 95): every later request serializes and the stand-in accepts it.

use mektpoy::route_for;
use serde_json::Value;

use crate::agent::{Agent, Reply, arg_params, prompt, tool_of};

/// The roles of a Messages body's wire messages, in order.
fn roles(body: &str) -> Vec<String> {
    let v: Value = serde_json::from_str(body).unwrap();
    v["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn a_thinking_only_answer_left_out_after_a_rewrite_does_not_stop_the_loop() {
    for (key, model, streamed) in [
        ("thinking-only/fable-5-2", "claude-fable-5-2", false),
        ("thinking-only/fable-5-2-sse", "claude-fable-5-2", true),
    ] {
        let route = route_for("anthropic", model);
        assert!(route.binds_thinking(), "{key}");
        let mut agent = Agent::new(key, route);
        if streamed {
            agent = agent.streaming();
        }
        let first = prompt("You are a headless agent.");
        let read = tool_of("read", 1, false, arg_params());
        let shell = tool_of("shell", 1, false, arg_params());
        let only_read = [read.clone()];
        let answer = agent
            .step(&first, &only_read, Some("think"), Reply::ThinkingOnly)
            .unwrap();
        assert!(
            answer
                .answer
                .message
                .content()
                .iter()
                .all(|b| !matches!(b, mektpoy::ContentBlock::Text { .. })),
            "{key}: a thinking-only answer"
        );
        // No rewrite yet: the thinking-only turn goes back, signed.
        let back = agent
            .step(&first, &only_read, Some("go on"), Reply::Text)
            .unwrap();
        assert_eq!(
            roles(back.wire.body()),
            ["user", "assistant", "user"],
            "{key}"
        );
        // A second thinking-only answer, then a rewrite of the tools and the prompt: both
        // thinking-only answers are left out, and their neighbours merge.
        agent
            .step(&first, &only_read, Some("think again"), Reply::ThinkingOnly)
            .unwrap();
        let second = prompt("You are a careful headless agent.");
        let tools = [read.clone(), shell.clone()];
        let rewritten = agent
            .step(
                &second,
                &tools,
                Some("now with a shell"),
                Reply::Call("shell"),
            )
            .unwrap();
        assert!(rewritten.request.rewrite.is_some(), "{key}: a rewrite");
        assert!(rewritten.wire.report().thinking_left_out >= 2, "{key}");
        let r = roles(rewritten.wire.body());
        assert!(
            r.windows(2).all(|w| w[0] != w[1]),
            "{key}: roles alternate: {r:?}"
        );
        // The loop goes on: a continuation after the tool result, a user turn, another
        // thinking-only answer and a turn after it.
        agent.step(&second, &tools, None, Reply::Text).unwrap();
        agent
            .step(&second, &tools, Some("and then"), Reply::ThinkingOnly)
            .unwrap();
        let last = agent
            .step(&second, &tools, Some("finish"), Reply::Text)
            .unwrap();
        assert!(
            !last.wire.body().contains(r#""content":[]"#),
            "{key}: no empty turn"
        );
    }
}
