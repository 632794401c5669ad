//! Kill and resume over server-sent events: the loop's process dies, and a new process opens
//! the session file (`Session::create` at the start, `Session::open` after) and carries on with
//! a new `AgentLoop` over it.
//!
//! - **A request in flight**: the request was recorded and sent, the provider accepted it, and
//!   the stream was cut off mid-way (`MessagesStream::finish` reports the cut; nothing is
//!   appended). The new loop resends the step with `AgentLoop::retry`: the same bytes — on
//!   `claude-fable-5-2`, which binds thinking, after a tool change moved the thinking floor, so
//!   the retry must leave out the same thinking blocks (the floor comes from the log) and put
//!   the cache breakpoint where the dead process did — and gets a whole answer.
//! - **Between a tool call and its result**: the answer calling a tool was appended, its result
//!   was not. The new loop runs the call it finds at the end of the log, appends the result and
//!   continues with `AgentLoop::next_step`; the provider reads the whole previous request from
//!   its cache.
//!
//! A resumed loop's `Meter` starts cold (it never saw the dead process's requests), while the
//! stand-in read them: its first row reads nothing from the cache (checked in `Agent::send`).

use mektpoy::{
    ContentBlock, Session,
    response::{ResponseError, StopReason},
    route_for,
    vocab::Role,
};
use serde_json::Value;

use crate::agent::{Agent, Reply, Unsent, arg_params, assert_strip_thinking, prompt, tool_of};

#[test]
fn resume_with_a_request_in_flight_resends_the_same_bytes_and_gets_a_whole_answer() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("session.jsonl");
    let key = "resume/in-flight/claude-fable-5-2";
    let route = route_for("anthropic", "claude-fable-5-2");
    assert!(route.binds_thinking() && route.tool_update().is_none());
    let p = prompt("You are an agent that may be restarted at any time.");
    let read = tool_of("read", 1, false, arg_params());
    let tools = [read.clone(), tool_of("grep", 1, false, arg_params())];
    let session = Session::create(&path, key).unwrap();
    let mut agent = Agent::over(key, route.clone(), session)
        .with_redacted_thinking()
        .streaming();

    let first = agent
        .step(
            &p,
            std::slice::from_ref(&read),
            Some("Look around."),
            Reply::Text,
        )
        .unwrap();
    // A tool change rewrites `tools` on this route: the thinking floor moves here, and every
    // later request leaves out the first answer's two signed blocks.
    let second = agent
        .step(&p, &tools, Some("Now grep for TODOs."), Reply::Text)
        .unwrap();
    assert!(second.request.rewrite.is_some(), "{key}");
    assert_eq!(second.wire.report().thinking_left_out, 2, "{key}");

    agent.cut_off_next();
    let in_flight = agent.try_step(&p, &tools, Some("Carry on."), Reply::Text);
    let Err(Unsent::Broken {
        request,
        wire,
        error,
    }) = in_flight
    else {
        panic!("{key}: the cut-off answer was taken: {in_flight:?}")
    };
    assert!(
        matches!(error, ResponseError::CutOff { .. }),
        "{key}: a stream cut off mid-way is reported as cut off: {error:?}"
    );
    let last = agent.session().messages().last().unwrap().clone();
    assert_eq!(
        (last.id(), last.role()),
        ("u3", Role::User),
        "{key}: nothing of the answer was appended"
    );
    assert_eq!(wire.report().thinking_left_out, 2, "{key}");
    // The process dies (its lock on the file goes with it).
    drop(agent);

    let session = Session::open(&path).unwrap().session;
    let mut agent = Agent::over(key, route, session)
        .with_redacted_thinking()
        .streaming()
        .resumed_at(3);
    let resent = agent.retry(&p, &tools, Reply::Text).unwrap();
    assert_eq!(
        resent.wire.body(),
        wire.body(),
        "{key}: the retry sends the bytes the dead process sent"
    );
    assert_eq!(resent.wire.headers(), wire.headers(), "{key}");
    assert_eq!(
        request.to_wire().unwrap().body(),
        wire.body(),
        "{key}: the dead request"
    );
    assert_eq!(
        resent.request.rewrite, None,
        "{key}: nothing changed since the request in flight"
    );
    assert!(resent.streamed, "{key}");
    assert_eq!(
        resent.answer.stop_reason,
        Some(StopReason::EndTurn),
        "{key}: a whole answer"
    );
    assert_eq!(resent.answer.message.id(), "a3", "{key}");
    // The stand-in answered the dead request too (its third answer, never seen) and read it
    // all from its cache now.
    assert_eq!(resent.content.last().unwrap()["text"], "ok 4", "{key}");
    assert_eq!(resent.usage.cached_bytes, resent.usage.total_bytes, "{key}");

    let fourth = agent
        .step(&p, &tools, Some("Anything else?"), Reply::Text)
        .unwrap();
    assert_eq!(fourth.usage.cached_bytes, resent.usage.total_bytes, "{key}");
    assert_strip_thinking(key, [&first, &second, &resent, &fourth], 2);
}

#[test]
fn resume_between_a_tool_call_and_its_result_runs_the_call_and_continues() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("session.jsonl");
    let key = "resume/tool-call/claude-fable-5-1";
    let route = route_for("anthropic", "claude-fable-5-1");
    assert!(route.binds_thinking() && route.inline_definitions());
    let p = prompt("You are an agent that may be restarted at any time.");
    let tools = [
        tool_of("read", 1, false, arg_params()),
        tool_of("search", 1, false, arg_params()),
    ];
    let session = Session::create(&path, key).unwrap();
    let mut agent = Agent::over(key, route.clone(), session).streaming();

    agent
        .step(&p, &tools, Some("Look around."), Reply::Text)
        .unwrap();
    agent.die_before_results();
    let called = agent
        .step(&p, &tools, Some("Search for TODOs."), Reply::Call("search"))
        .unwrap();
    assert!(called.streamed, "{key}");
    let call_id = match called.answer.message.content() {
        [
            ContentBlock::Reasoning { .. },
            ContentBlock::Text { .. },
            ContentBlock::ToolCall(call),
        ] => {
            assert_eq!(
                (call.name(), call.arguments()),
                ("search", r#"{"arg":"x"}"#),
                "{key}: the streamed input, as a body would have carried it"
            );
            call.id().to_owned()
        }
        other => panic!("{key}: {other:?}"),
    };
    let last = agent.session().messages().last().unwrap().clone();
    assert_eq!(
        (last.id(), last.role()),
        ("a2", Role::Assistant),
        "{key}: the answer is logged, its result is not"
    );
    drop(agent);

    let session = Session::open(&path).unwrap().session;
    let mut agent = Agent::over(key, route, session).streaming().resumed_at(2);
    agent.run_pending_tool_calls(&tools);
    let continued = agent.step(&p, &tools, None, Reply::Text).unwrap();
    let body: Value = serde_json::from_str(continued.wire.body()).unwrap();
    let messages = body["messages"].as_array().unwrap();
    let n = messages.len();
    assert_eq!(
        messages[n - 2],
        serde_json::json!({"role": "assistant", "content": called.content}),
        "{key}: the answer goes back as it came"
    );
    assert_eq!(messages[n - 1]["role"], "user", "{key}");
    assert_eq!(
        messages[n - 1]["content"][0]["tool_use_id"],
        call_id,
        "{key}: the resumed loop's result answers the call"
    );
    assert_eq!(continued.wire.report().thinking_left_out, 0, "{key}");
    assert_eq!(
        continued.usage.cached_bytes, called.usage.total_bytes,
        "{key}: the continuation keeps the whole previous request"
    );
    assert_eq!(continued.answer.stop_reason, Some(StopReason::EndTurn));
}
