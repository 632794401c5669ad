//! A loop reopened over its log continues from what the log holds (issue 20, items 11, 12).

use mektpoy::{AgentLoop, Config, ContentBlock, Event, Message, Session, ToolSchema, route_for};

mod support;
use support::object_tool;

const MODEL: &str = "claude-opus-5";

fn config() -> Config {
    Config::new("anthropic", MODEL)
        .with("max_tokens", 256.into())
        .unwrap()
}

/// The tool names of the log's headers, in order.
fn headers(session: &Session) -> Vec<Vec<String>> {
    session
        .events()
        .iter()
        .filter_map(|e| match e {
            Event::Header(h) => Some(h.header.tools.iter().map(|t| t.name().to_owned()).collect()),
            _ => None,
        })
        .collect()
}

/// How many developer messages (tool changes) the log holds.
fn tool_changes(session: &Session) -> usize {
    session
        .messages()
        .iter()
        .filter(|m| m.role() == mektpoy::vocab::Role::Developer)
        .count()
}

/// The process dies with a request in flight and a call pending; the file is reopened.
fn killed(dir: &tempfile::TempDir, calls: bool) -> (std::path::PathBuf, String) {
    let path = dir.path().join("s.jsonl");
    let session = Session::create(&path, "s").unwrap();
    let mut agent = AgentLoop::builder(session, route_for("anthropic", MODEL))
        .config(config())
        .system_prompt("Be careful.")
        .tools([object_tool("read"), object_tool("shell")])
        .build()
        .unwrap();
    let first = agent.user_turn([Message::user("u1", "hi")]).unwrap();
    agent.observe(&first.to_wire().unwrap()).unwrap();
    if calls {
        let call = ContentBlock::tool_call("c1", "shell", r#"{"cmd":"ls"}"#).unwrap();
        let answer = Message::new(
            "a1",
            mektpoy::vocab::Role::Assistant,
            vec![call],
            mektpoy::vocab::MessageSource::Model {
                provider: "anthropic".into(),
                model: MODEL.into(),
            },
        );
        agent.append(answer).unwrap();
        return (path, String::new());
    }
    let body = agent
        .user_turn([Message::user("u2", "go on")])
        .unwrap()
        .to_wire()
        .unwrap()
        .into_parts()
        .0;
    (path, body.to_owned())
}

/// Item 11: a reopened loop that sets nothing resends the request it died with; its resume
/// header holds the same tools, and no tool change is logged (it dropped the tools, and the
/// attribution blamed the crate).
#[test]
fn a_retry_after_a_reopen_resends_the_same_bytes_without_a_new_header() {
    let dir = tempfile::tempdir().unwrap();
    let (path, sent) = killed(&dir, false);
    let session = Session::open(&path).unwrap().session;
    let (before, changes) = (headers(&session), tool_changes(&session));
    let mut agent = AgentLoop::builder(session, route_for("anthropic", MODEL))
        .config(config())
        .build()
        .unwrap();
    assert_eq!(agent.system_prompt(), "Be careful.");
    let names: Vec<&str> = agent.tools().iter().map(ToolSchema::name).collect();
    assert_eq!(names, ["read", "shell"]);
    let retry = agent.retry().unwrap();
    assert_eq!(retry.to_wire().unwrap().body(), sent);
    let after = headers(agent.session());
    assert_eq!(
        after.last(),
        before.last(),
        "the resume header holds the same tools"
    );
    assert_eq!(
        tool_changes(agent.session()),
        changes,
        "no tool change logged"
    );
}

/// Item 12: calls left pending by a kill are checked against the request they answer.
#[test]
fn calls_left_pending_by_a_kill_are_validated_from_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = killed(&dir, true);
    let session = Session::open(&path).unwrap().session;
    let agent = AgentLoop::builder(session, route_for("anthropic", MODEL))
        .config(config())
        .build()
        .unwrap();
    assert!(agent.validate_tool_call("shell").is_ok());
    assert!(agent.validate_tool_call("write").is_err());
}

/// A log another model's loop shares: the reopened loop takes its own model's last tools.
#[test]
fn a_shared_log_reopens_with_the_loops_own_tools() {
    let session = Session::new("s");
    let mut main = AgentLoop::builder(&session, route_for("anthropic", MODEL))
        .config(config())
        .tools([object_tool("read"), object_tool("shell")])
        .build()
        .unwrap();
    main.user_turn([Message::user("u1", "hi")]).unwrap();
    let aux_config = Config::new("anthropic", "claude-fable-5")
        .with("max_tokens", 64.into())
        .unwrap();
    let mut aux = AgentLoop::builder(&session, route_for("anthropic", "claude-fable-5"))
        .config(aux_config)
        .tools([object_tool("read")])
        .build()
        .unwrap();
    aux.next_step().unwrap();
    let reopened = AgentLoop::builder(&session, route_for("anthropic", MODEL))
        .config(config())
        .build()
        .unwrap();
    assert_eq!(reopened.tools().len(), 2);
}

/// Item 6: the first request after a reopen has the lookback breakpoint when 20 or more
/// blocks were appended since the last request.
#[test]
fn the_first_request_after_a_reopen_keeps_the_lookback_breakpoint() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let session = Session::create(&path, "s").unwrap();
    let mut agent = AgentLoop::builder(session, route_for("anthropic", MODEL))
        .config(config())
        .tools([object_tool("read")])
        .build()
        .unwrap();
    agent.user_turn([Message::user("u1", "hi")]).unwrap();
    for i in 0..11 {
        agent
            .append(Message::assistant(
                format!("a{i}"),
                "part",
                "anthropic",
                MODEL,
            ))
            .unwrap();
        agent
            .append(Message::user(format!("n{i}"), "more"))
            .unwrap();
    }
    drop(agent);
    let session = Session::open(&path).unwrap().session;
    let mut agent = AgentLoop::builder(session, route_for("anthropic", MODEL))
        .config(config())
        .build()
        .unwrap();
    let body = agent.next_step().unwrap().to_wire().unwrap().into_parts().0;
    assert_eq!(body.matches(r#""cache_control""#).count(), 2, "{body}");
}

/// Item 7: a log two routes share, reopened: the main loop compares with its own route's
/// last request, not with the auxiliary call logged after it.
#[test]
fn a_reopened_loop_compares_with_its_own_routes_last_request() {
    let fable = "claude-fable-5-2";
    let fable_config = Config::new("anthropic", fable)
        .with("max_tokens", 256.into())
        .unwrap();
    let session = Session::new("s");
    let mut main = AgentLoop::builder(&session, route_for("anthropic", fable))
        .config(fable_config.clone())
        .tools([object_tool("read"), object_tool("shell")])
        .build()
        .unwrap();
    main.user_turn([Message::user("u1", "hi")]).unwrap();
    main.append(support::signed_answer("a1", fable)).unwrap();
    let mut aux = AgentLoop::builder(&session, route_for("anthropic", MODEL))
        .config(config())
        .tools([object_tool("read")])
        .build()
        .unwrap();
    aux.user_turn([Message::user("x1", "summarise")]).unwrap();
    // The process dies; the main loop reopens with one tool fewer.
    let log = session.to_jsonl();
    let session = Session::load_bytes(log.as_bytes()).unwrap().session;
    let mut main = AgentLoop::builder(&session, route_for("anthropic", fable))
        .config(fable_config)
        .build()
        .unwrap();
    main.set_tools([object_tool("read")]).unwrap();
    let request = main.user_turn([Message::user("u2", "go on")]).unwrap();
    assert_eq!(request.rewrite, Some(mektpoy::event::Rewrite::Tools));
    let body = request.to_wire().unwrap().into_parts().0;
    assert!(
        !body.contains("sig-a1"),
        "signed thinking resent after a rewrite: {body}"
    );
}

/// A retry after a reopen sends the failed attempt's bytes when the steps since the log's
/// latest header logged none (every turn's tools unchanged): the previous request is the last
/// one answered, not the one that logged the header, whose end lies more than 20 blocks back
/// and drew a lookback breakpoint the dead process never sent (found by the random loop).
#[test]
fn a_retry_after_a_reopen_compares_with_the_last_answered_request_not_the_last_header() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let session = Session::create(&path, "s").unwrap();
    let mut agent = AgentLoop::builder(session, route_for("anthropic", MODEL))
        .config(config())
        .system_prompt("Be careful.")
        .tools([object_tool("read")])
        .build()
        .unwrap();
    for i in 1..=12 {
        let request = agent
            .user_turn([Message::user(format!("u{i}"), "go on")])
            .unwrap();
        agent.observe(&request.to_wire().unwrap()).unwrap();
        let answer = Message::assistant(format!("a{i}"), "ok", "anthropic", MODEL);
        agent.append(answer).unwrap();
    }
    // The provider fails the 13th request (overloaded); the process dies before the retry.
    let failed = agent
        .user_turn([Message::user("u13", "and then")])
        .unwrap()
        .to_wire()
        .unwrap();
    assert_eq!(failed.body().matches(r#""cache_control""#).count(), 1);
    assert_eq!(
        headers(agent.session()).len(),
        1,
        "one header: tools never changed"
    );
    drop(agent);
    let session = Session::open(&path).unwrap().session;
    let mut agent = AgentLoop::builder(session, route_for("anthropic", MODEL))
        .config(config())
        .build()
        .unwrap();
    let retried = agent.retry().unwrap().to_wire().unwrap();
    assert_eq!(retried.body(), failed.body(), "the retry's bytes");
    // Moving on after the retry: the request extends the answered retry, one breakpoint.
    agent
        .append(Message::assistant("a13", "ok", "anthropic", MODEL))
        .unwrap();
    let next = agent
        .user_turn([Message::user("u14", "more")])
        .unwrap()
        .to_wire()
        .unwrap();
    assert_eq!(next.body().matches(r#""cache_control""#).count(), 1);
}

/// A retry after a reopen on a route that binds thinking, after a rewrite moved the thinking
/// floor: the previous request rebuilt from the log is serialized under the floor it was sent
/// under (the earlier thinking-only answer left out, which merges the user turns around it),
/// so it does not read as a rewrite, and the
/// retry keeps the later answer's thinking as the failed attempt did (found by the random
/// loop).
#[test]
fn a_retry_after_a_reopen_rebuilds_the_previous_request_under_its_thinking_floor() {
    let fable = "claude-fable-5-2";
    let config = Config::new("anthropic", fable)
        .with("max_tokens", 256.into())
        .unwrap();
    let route = route_for("anthropic", fable);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let session = Session::create(&path, "s").unwrap();
    let mut agent = AgentLoop::builder(session, route.clone())
        .config(config.clone())
        .system_prompt("Be careful.")
        .tools([object_tool("read")])
        .build()
        .unwrap();
    agent.user_turn([Message::user("u1", "hi")]).unwrap();
    // A thinking-only answer: left out, it sends nothing, and u1 and u2 go as one message.
    let mut thinking_only = support::signed_answer("a1", fable);
    let blocks = thinking_only.content()[..1].to_vec();
    thinking_only = thinking_only.with_content(blocks);
    agent.append(thinking_only).unwrap();
    // A prompt change rewrites before a1's signed thinking: the floor moves here.
    agent.set_system_prompt("Be brief.");
    let second = agent.user_turn([Message::user("u2", "go on")]).unwrap();
    assert!(second.rewrite.is_some());
    assert!(!second.to_wire().unwrap().body().contains("sig-a1"));
    agent.append(support::signed_answer("a2", fable)).unwrap();
    // The third request fails; the process dies before the retry.
    let failed = agent
        .user_turn([Message::user("u3", "and then")])
        .unwrap()
        .to_wire()
        .unwrap();
    assert!(failed.body().contains("sig-a2"), "{}", failed.body());
    drop(agent);
    let session = Session::open(&path).unwrap().session;
    let mut agent = AgentLoop::builder(session, route)
        .config(config)
        .build()
        .unwrap();
    let retried = agent.retry().unwrap();
    assert_eq!(
        retried.rewrite, None,
        "nothing changed since the failed attempt"
    );
    assert_eq!(
        retried.to_wire().unwrap().body(),
        failed.body(),
        "the retry's bytes"
    );
}
