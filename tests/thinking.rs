//! The thinking floor on routes that bind signed thinking to the conversation before it: which
//! requests rewrite, where the floor goes, that it is written with the batch that caused it
//! and survives a reopen, and that the policy is chosen once per session.

use mektpoy::{
    AgentLoop, Config, Event, Message, Request, Session, ToolSchema,
    event::{Rewrite, ThinkingEvent, ThinkingPolicy},
    route_for,
    session::AppendErrorKind,
};

mod support;
use support::{object_tool, signed_answer};

fn config(model: &str) -> Config {
    Config::new("anthropic", model)
        .with("max_tokens", 1024.into())
        .unwrap()
}

/// A loop that answers every turn with a signed thinking block.
struct Loop {
    agent: AgentLoop,
    /// Names the turn's messages (`u{turn}`, `a{turn}`).
    turn: u64,
}

impl Loop {
    fn new(session: Session, model: &str) -> Self {
        let agent = AgentLoop::builder(session, route_for("anthropic", model))
            .config(config(model))
            .system_prompt("Be brief.")
            .build()
            .unwrap();
        Loop { agent, turn: 0 }
    }

    fn session(&self) -> &Session {
        self.agent.session()
    }

    fn step(&mut self, tools: &[ToolSchema], new_series: bool) -> Request {
        self.turn += 1;
        self.agent.set_tools(tools.iter().cloned()).unwrap();
        if new_series {
            self.agent.new_series();
        }
        let user = Message::user(format!("u{}", self.turn), "go on");
        self.agent.user_turn([user]).unwrap()
    }

    fn answer(&mut self) {
        let id = format!("a{}", self.turn);
        let model = self.agent.config().model.clone();
        self.agent.append(signed_answer(&id, &model)).unwrap();
    }

    fn floors(&self) -> usize {
        self.session()
            .events()
            .iter()
            .filter(|e| matches!(e, Event::Thinking(t) if matches!(**t, ThinkingEvent::Floor(_))))
            .count()
    }
}

/// A no-mode route that binds thinking: every tool change rewrites `tools`.
const BINDING_NO_MODE: &str = "claude-fable-5-2";
/// An inline route that binds thinking: tool changes never rewrite.
const BINDING_INLINE: &str = "claude-fable-5-1";

#[test]
fn a_tools_rewrite_before_signed_thinking_sets_the_floor_in_the_same_batch() {
    let mut l = Loop::new(Session::new("s"), BINDING_NO_MODE);
    let first = l.step(&[object_tool("read")], false);
    assert_eq!(first.rewrite, None, "a first request rewrites nothing");
    l.answer();
    let same = l.step(&[object_tool("read")], false);
    assert_eq!(same.rewrite, None);
    assert_eq!(l.floors(), 0);
    let before = l.session().len();
    let changed = l.step(&[object_tool("read"), object_tool("grep")], false);
    assert_eq!(changed.rewrite, Some(Rewrite::Tools));
    assert_eq!(l.floors(), 1);
    // The floor is the last event of the batch that rewrote.
    let (floor, rewrite) = l
        .session()
        .thinking_floor("anthropic", BINDING_NO_MODE)
        .unwrap();
    assert_eq!(rewrite, Rewrite::Tools);
    assert_eq!(floor.index(), l.session().len() - 1);
    assert!(floor.index() >= before);
    // Another rewrite with no signed thinking since the floor moves nothing.
    l.step(&[object_tool("read")], false);
    assert_eq!(l.floors(), 1, "no thinking after the floor: no new floor");
    l.answer();
    l.step(&[object_tool("read"), object_tool("grep")], false);
    assert_eq!(
        l.floors(),
        2,
        "signed thinking after the floor: the floor moves"
    );
}

#[test]
fn on_an_inline_route_tool_churn_never_rewrites() {
    let mut l = Loop::new(Session::new("s"), BINDING_INLINE);
    l.step(&[object_tool("read"), object_tool("shell")], false);
    for tools in [
        vec![object_tool("read")],
        vec![object_tool("read"), object_tool("shell")],
        vec![
            object_tool("read"),
            object_tool("shell"),
            object_tool("grep"),
        ],
    ] {
        l.answer();
        let r = l.step(&tools, false);
        assert_eq!(r.rewrite, None, "{:?}", r.tools);
    }
    assert_eq!(l.floors(), 0);
}

#[test]
fn a_series_start_that_changes_no_byte_is_not_a_rewrite() {
    let mut l = Loop::new(Session::new("s"), BINDING_NO_MODE);
    l.step(&[object_tool("read")], false);
    l.answer();
    let r = l.step(&[object_tool("read")], true);
    assert!(r.starts_series, "a `series` header was logged");
    assert_eq!(r.rewrite, None);
    assert_eq!(l.floors(), 0);
}

#[test]
fn a_compaction_is_a_history_rewrite() {
    let mut l = Loop::new(Session::new("s"), BINDING_NO_MODE);
    l.step(&[object_tool("read")], false);
    l.answer();
    l.step(&[object_tool("read")], false);
    l.answer();
    // Replace the first user turn (node 1, after the prompt node) with a summary.
    l.session()
        .append(Event::replace(Message::user("sum", "summary"), 1, 1))
        .unwrap();
    let r = l.step(&[object_tool("read")], false);
    assert!(
        matches!(r.rewrite, Some(Rewrite::History { .. })),
        "{:?}",
        r.rewrite
    );
    assert_eq!(l.floors(), 1, "signed answers remain after the summary");
}

#[test]
fn the_floor_survives_a_reopen_and_a_resumed_loop_sends_the_same_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let copy = dir.path().join("copy.jsonl");
    let tools = [object_tool("read"), object_tool("grep")];
    let mut a = Loop::new(Session::create(&path, "s").unwrap(), BINDING_NO_MODE);
    a.step(&tools[..1], false);
    a.answer();
    a.step(&tools, false);
    a.answer();
    assert_eq!(a.floors(), 1);
    // The file as a process killed right here left it.
    std::fs::copy(&path, &copy).unwrap();
    let continued = a.step(&tools, false).to_wire().unwrap();

    let mut b = Loop::new(Session::open(&copy).unwrap().session, BINDING_NO_MODE);
    b.turn = 2;
    assert!(
        b.session()
            .thinking_floor("anthropic", BINDING_NO_MODE)
            .is_some(),
        "the floor comes from the log"
    );
    let resumed = b.step(&tools, false);
    assert_eq!(
        resumed.rewrite, None,
        "nothing changed since the dead process's request"
    );
    assert_eq!(resumed.to_wire().unwrap().body(), continued.body());
    assert_eq!(b.floors(), 1);
}

#[test]
fn a_replace_the_dead_process_appended_after_its_last_record_is_a_rewrite() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let mut a = Loop::new(Session::create(&path, "s").unwrap(), BINDING_NO_MODE);
    a.step(&[object_tool("read")], false);
    a.answer();
    a.step(&[object_tool("read")], false);
    a.answer();
    // A compaction, then the process dies before its next record.
    a.session()
        .append(Event::replace(Message::user("sum", "summary"), 1, 1))
        .unwrap();
    drop(a);
    let mut b = Loop::new(Session::open(&path).unwrap().session, BINDING_NO_MODE);
    b.turn = 2;
    let r = b.step(&[object_tool("read")], false);
    assert_eq!(r.rewrite, Some(Rewrite::History { message: 0 }));
    assert_eq!(b.floors(), 1);
}

#[test]
fn the_policy_is_chosen_once_before_any_floor_and_is_logged() {
    let session = Session::new("s");
    assert_eq!(session.thinking_policy(), ThinkingPolicy::StripThinking);
    session
        .set_thinking_policy(ThinkingPolicy::DropBlock)
        .unwrap();
    let err = session
        .set_thinking_policy(ThinkingPolicy::Refuse)
        .unwrap_err();
    assert!(
        matches!(
            err.kind(),
            AppendErrorKind::ThinkingPolicyChosen {
                chosen: "drop-block",
                ..
            }
        ),
        "{err}"
    );
    // The policy round-trips through the file.
    let reread = Session::load_bytes(session.to_jsonl().as_bytes())
        .unwrap()
        .session;
    assert_eq!(reread.thinking_policy(), ThinkingPolicy::DropBlock);

    // After a floor the default has acted: choosing now is refused.
    let mut l = Loop::new(Session::new("t"), BINDING_NO_MODE);
    l.step(&[object_tool("read")], false);
    l.answer();
    l.step(&[object_tool("read"), object_tool("grep")], false);
    assert!(matches!(
        l.session().set_thinking_policy(ThinkingPolicy::DropBlock),
        Err(e) if matches!(e.kind(), AppendErrorKind::ThinkingPolicyChosen {
            chosen: "strip-thinking",
        })
    ));
}

/// The policies as a loop meets them through `Request::to_wire`: `StripThinking` leaves the
/// earlier blocks out of this request and every later one, `DropBlock` sends them with
/// `block_binding` and its beta, `Refuse` returns the typed error naming the rewrite.
#[test]
fn each_policy_acts_on_every_request_after_the_floor() {
    let run = |policy: Option<ThinkingPolicy>| {
        let session = Session::new("s");
        if let Some(p) = policy {
            session.set_thinking_policy(p).unwrap();
        }
        let mut l = Loop::new(session, BINDING_NO_MODE);
        l.step(&[object_tool("read")], false);
        l.answer();
        let unchanged = l.step(&[object_tool("read")], false);
        let before = unchanged.to_wire().unwrap();
        assert!(
            before.body().contains(r#""type":"thinking""#),
            "no floor yet: sent as is"
        );
        assert_eq!(before.report().thinking_left_out, 0);
        l.answer();
        let rewrite = l.step(&[object_tool("read"), object_tool("grep")], false);
        let wire = rewrite.to_wire();
        l.answer();
        let next = l
            .step(&[object_tool("read"), object_tool("grep")], false)
            .to_wire();
        (wire, next)
    };

    let (wire, next) = run(None);
    let (wire, next) = (wire.unwrap(), next.unwrap());
    assert!(
        !wire.body().contains(r#""type":"thinking""#),
        "{}",
        wire.body()
    );
    assert_eq!(wire.report().thinking_left_out, 2);
    // The next request still leaves out the two pre-floor blocks; the new answer's block,
    // produced after the rewrite, is sent.
    assert_eq!(next.report().thinking_left_out, 2);
    assert_eq!(next.body().matches(r#""type":"thinking""#).count(), 1);

    let (wire, next) = run(Some(ThinkingPolicy::DropBlock));
    for w in [wire.unwrap(), next.unwrap()] {
        assert!(w.report().drop_block);
        assert!(
            w.body()
                .contains(r#""prefix_mismatch_behavior":"drop_block""#)
        );
        assert!(
            w.header("anthropic-beta")
                .is_some_and(|b| b.contains("thinking-binding-controls-2026-08-01"))
        );
    }

    let (wire, _) = run(Some(ThinkingPolicy::Refuse));
    let err = wire.unwrap_err();
    assert!(
        matches!(
            err,
            mektpoy::wire::WireError::Message {
                kind: mektpoy::wire::MessageFault::ThinkingRewrite {
                    rewrite: Rewrite::Tools,
                    ..
                },
                ..
            }
        ),
        "{err}"
    );
}

/// Issue 20, item 3: a model the catalog does not know (a newer one, say) gets the vendor's
/// most restrictive known behaviour, so a tool change after a signed thinking turn does not
/// resend the block after a rewritten `tools` (decision 87).
#[test]
fn an_unknown_anthropic_model_binds_thinking() {
    for model in ["claude-nova-6", "claude-fable-5-2-20261101"] {
        let mut l = Loop::new(Session::new("s"), model);
        l.step(&[object_tool("read"), object_tool("shell")], false);
        l.answer();
        let changed = l.step(&[object_tool("read")], false);
        let body = changed.to_wire().unwrap().into_parts().0;
        assert!(!body.contains("sig-a1"), "{model}: {body}");
        assert!(
            body.contains(r#""text":"done""#),
            "{model}: the answer's text is kept"
        );
    }
    assert!(route_for("anthropic", "claude-nova-6").binds_thinking());
    assert!(!route_for("anthropic", "claude-nova-6").forced_tool_choice());
}

/// Issue 20, item 1: a schema property named `cache_control` is prompt, not a breakpoint: its
/// change rewrites `tools`, so the signed thinking before it is left out.
#[test]
fn a_schema_property_named_cache_control_is_a_tool_change() {
    let tool = |description: &str| {
        let parameters = serde_json::json!({
            "type": "object",
            "properties": {"cache_control": {"type": "string", "description": description}},
        });
        ToolSchema::new("read", "Read", parameters.as_object().unwrap().clone())
    };
    let mut l = Loop::new(Session::new("s"), BINDING_NO_MODE);
    l.step(&[tool("v1")], false);
    l.answer();
    let changed = l.step(&[tool("v2")], false);
    assert_eq!(changed.rewrite, Some(Rewrite::Tools));
    let body = changed.to_wire().unwrap().into_parts().0;
    assert!(!body.contains("sig-a1"), "{body}");
}

/// A signature another model produced was bound to another conversation's bytes: on a route
/// that binds thinking only the configured model's own (a snapshot date aside) is sent back
/// (decision 102).
#[test]
fn only_the_configured_models_signed_thinking_is_sent_back() {
    for (model, kept) in [
        (BINDING_NO_MODE, true),
        ("claude-fable-5-2-20261101", true),
        ("claude-fable-5-1", false),
    ] {
        let mut l = Loop::new(Session::new("s"), BINDING_NO_MODE);
        l.step(&[object_tool("read")], false);
        l.agent.append(signed_answer("a1", model)).unwrap();
        l.turn += 1;
        let body = l
            .step(&[object_tool("read")], false)
            .to_wire()
            .unwrap()
            .into_parts()
            .0;
        assert_eq!(body.contains("sig-a1"), kept, "{model}: {body}");
        assert!(body.contains(r#""text":"done""#), "{model}");
    }
}
