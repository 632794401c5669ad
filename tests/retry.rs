//! A retry is serialized against the route's last accepted request (issue 20, item 5).

use mektpoy::{AgentLoop, Config, Message, Session, route_for};

mod support;
use support::object_tool;

const MODEL: &str = "claude-opus-5";

/// Breakpoints in a body: the top-level automatic one, and the lookback's on a block.
fn breakpoints(body: &str) -> usize {
    body.matches(r#""cache_control""#).count()
}

#[test]
fn a_retry_after_a_failed_request_keeps_the_lookback_breakpoint() {
    let config = Config::new("anthropic", MODEL)
        .with("max_tokens", 256.into())
        .unwrap();
    let mut agent = AgentLoop::builder(Session::new("s"), route_for("anthropic", MODEL))
        .config(config)
        .tools([object_tool("read")])
        .build()
        .unwrap();
    let first = agent.user_turn([Message::user("u0", "hi")]).unwrap();
    agent.observe(&first.to_wire().unwrap()).unwrap();
    agent
        .append(Message::assistant("a0", "ok", "anthropic", MODEL))
        .unwrap();
    // Twenty-two new blocks: the lookback would not reach the first request's last block.
    let users: Vec<Message> = (1..=22)
        .map(|i| Message::user(format!("u{i}"), format!("note {i}")))
        .collect();
    let failed = agent.user_turn(users).unwrap().to_wire().unwrap();
    assert_eq!(breakpoints(failed.body()), 2, "{}", failed.body());
    // The provider answered 529: the loop retries.
    let retry = agent.retry().unwrap().to_wire().unwrap();
    assert_eq!(
        retry.body(),
        failed.body(),
        "a retry resends the same bytes"
    );
    // A second failure and retry: still against the first request.
    let again = agent.retry().unwrap().to_wire().unwrap();
    assert_eq!(again.body(), failed.body());
}
