//! reference §1 item 16: the log refuses, at `append`, what would make every later request of
//! the session fail: an empty assistant message on the surface, a tool result answering no call
//! on the surface, and a replace that leaves a result without its call. Each rule has its
//! accepted twin (the rule's boundary). Loading applies none of them: a file written before the
//! rules still loads byte for byte, and the serializers refuse its requests as before.

mod support;

use mektpoy::{
    Config, ContentBlock, Event, Message, Route, Session,
    agent::{RecordError, Recorder, Step},
    event::MessageEvent,
    project::ProjectedToolUpdates,
    route::WireApi,
    session::{AppendError, AppendErrorKind},
    vocab::{MessageSource, Role, Seq},
    wire::{MessageFault, WireError, serialize},
};
use proptest::prelude::*;
use serde_json::json;
use support::*;

fn model() -> MessageSource {
    MessageSource::Model {
        provider: "p".into(),
        model: "m".into(),
    }
}

/// An assistant message: a text block, then a tool call per id.
fn answer(id: &str, calls: &[&str]) -> Message {
    let mut content = vec![ContentBlock::text("on it")];
    content.extend(calls.iter().map(|c| {
        ContentBlock::tool_call((*c).to_owned(), "read".to_owned(), "{}".to_owned()).unwrap()
    }));
    Message::new(id, Role::Assistant, content, model())
}

fn assistant_of(id: &str, content: Vec<ContentBlock>) -> Message {
    Message::new(id, Role::Assistant, content, model())
}

fn result(id: &str, call: &str) -> Message {
    Message::tool_result(id, call, "ok")
}

fn log_only(message: Message) -> Event {
    Event::Message(MessageEvent::new(message, None))
}

/// A session holding `events`, each appended (panics on a refusal: a fixture must be valid).
fn session_of(events: Vec<Event>) -> Session {
    let s = Session::new("s");
    for (i, e) in events.into_iter().enumerate() {
        if let Err(err) = s.append(e) {
            panic!("fixture event {i} refused: {err}");
        }
    }
    s
}

/// Appends `event`, expects a refusal at the next `Seq` that leaves the log as it was, and
/// returns its kind.
fn refused(s: &Session, event: Event) -> AppendErrorKind {
    let before = s.len();
    let surface = s.surface();
    let err: AppendError = s.append(event).unwrap_err();
    assert_eq!(err.seq(), Seq(before as u64));
    assert_eq!(s.len(), before, "a refusal leaves the log unchanged");
    assert_eq!(s.surface(), surface);
    err.into_kind()
}

#[test]
fn an_empty_assistant_message_is_refused_at_append() {
    let empties = [
        assistant_of("a1", vec![]),
        assistant_of("a1", vec![ContentBlock::text("")]),
        assistant_of("a1", vec![ContentBlock::text(""), ContentBlock::text("")]),
    ];
    for empty in empties {
        let s = session_of(vec![Event::append(Message::user("u1", "hi"))]);
        let kind = refused(&s, Event::append(empty.clone()));
        assert!(
            matches!(&kind, AppendErrorKind::EmptyAssistantMessage { id } if id == "a1"),
            "{kind:?}"
        );
        assert_eq!(
            kind.to_string(),
            "assistant message a1 has no content (no block, or only empty text)"
        );
        // Put in place by a replace, too.
        let kind = refused(&s, Event::replace(empty.clone(), 0, 0));
        assert!(matches!(
            kind,
            AppendErrorKind::EmptyAssistantMessage { .. }
        ));
        // As text, the same refusal.
        let err = s
            .append_json(&Event::append(empty.clone()).to_json())
            .unwrap_err();
        assert!(matches!(
            err.kind(),
            AppendErrorKind::EmptyAssistantMessage { .. }
        ));
        // The boundary: in the log only (never sent), it is accepted.
        s.append(log_only(empty)).unwrap();
    }

    // The boundary: any block but empty text is content (whether the route sends reasoning or
    // an unknown block is the serializer's decision).
    let s = session_of(vec![Event::append(Message::user("u1", "hi"))]);
    let signed = ContentBlock::Reasoning {
        text: "thinking".into(),
        extra: [("signature".to_owned(), json!("sig"))]
            .into_iter()
            .collect(),
    };
    let contents = [
        vec![ContentBlock::text(" ")],
        vec![ContentBlock::text(""), ContentBlock::text("x")],
        vec![signed],
        vec![ContentBlock::other(json!({"type": "redacted_thinking", "data": "d"})).unwrap()],
    ];
    for (i, content) in contents.into_iter().enumerate() {
        s.append(Event::append(assistant_of(&format!("ok{i}"), content)))
            .unwrap();
    }
    s.append(Event::append(answer("a-call", &["c1"]))).unwrap();
    // Not this rule: an empty user message (the serializer refuses it on its own).
    s.append(Event::append(Message::new(
        "u-empty",
        Role::User,
        vec![],
        MessageSource::User,
    )))
    .unwrap();
}

#[test]
fn a_tool_result_must_answer_a_call_on_the_surface() {
    // No call anywhere.
    let s = session_of(vec![Event::append(Message::user("u1", "hi"))]);
    let kind = refused(&s, Event::append(result("t1", "c1")));
    assert!(
        matches!(&kind, AppendErrorKind::OrphanToolResult { id, call_id } if id == "t1" && call_id == "c1"),
        "{kind:?}"
    );
    assert_eq!(
        kind.to_string(),
        "tool result t1 answers no tool call c1 on the surface"
    );
    let err = s.append_json(&Event::append(result("t1", "c1")).to_json());
    assert!(matches!(
        err.unwrap_err().kind(),
        AppendErrorKind::OrphanToolResult { .. }
    ));

    // A call of another id, a call in the log only, a call in a user message: none answers.
    s.append(Event::append(answer("a1", &["c2"]))).unwrap();
    s.append(log_only(answer("a-log", &["c1"]))).unwrap();
    let in_user = Message::new(
        "u-call",
        Role::User,
        answer("x", &["c1"]).content().to_vec(),
        MessageSource::User,
    );
    s.append(Event::append(in_user)).unwrap();
    let kind = refused(&s, Event::append(result("t1", "c1")));
    assert!(matches!(kind, AppendErrorKind::OrphanToolResult { .. }));

    // The boundary: the call on the surface.
    s.append(Event::append(result("t2", "c2"))).unwrap();
    // In the log only, a result is never sent: accepted without a call.
    s.append(log_only(result("t-log", "c9"))).unwrap();

    // A result put in place by a replace needs its call before the replaced range.
    // Surface: u1 a1(c2) u-call t2.
    let kind = refused(&s, Event::replace(result("t3", "c2"), 1, 3));
    assert!(matches!(kind, AppendErrorKind::OrphanToolResult { .. }));
    // The boundary: replacing the result alone (a compaction that shortens a tool result).
    s.append(Event::replace(result("t3", "c2"), 3, 3)).unwrap();
    assert_eq!(ids(&s), ["u1", "a1", "u-call", "t3"]);

    // A call a compaction removed answers nothing any more.
    s.append(Event::replace(Message::user("summary", "so far"), 0, 3))
        .unwrap();
    let kind = refused(&s, Event::append(result("t4", "c2")));
    assert!(matches!(kind, AppendErrorKind::OrphanToolResult { .. }));
}

#[test]
fn a_replace_may_not_orphan_a_tool_result() {
    // Surface: u1 a1(c1,c2) t1 t2 u2.
    let fixture = || {
        session_of(vec![
            Event::append(Message::user("u1", "hi")),
            Event::append(answer("a1", &["c1", "c2"])),
            Event::append(result("t1", "c1")),
            Event::append(result("t2", "c2")),
            Event::append(Message::user("u2", "more")),
        ])
    };
    let s = fixture();
    let kind = refused(&s, Event::replace(Message::user("summary", "so far"), 0, 1));
    match &kind {
        AppendErrorKind::ReplaceOrphansToolResult {
            start,
            end,
            call_id,
            result,
        } => assert_eq!(
            (*start, *end, call_id.as_str(), result.as_str()),
            (0, 1, "c1", "t1")
        ),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        kind.to_string(),
        "replace 0..=1 removes tool call c1 and leaves its result t1 on the surface"
    );
    // Removing the call and one of its two results still orphans the other.
    let kind = refused(&s, Event::replace(Message::user("summary", "x"), 1, 2));
    assert!(
        matches!(&kind, AppendErrorKind::ReplaceOrphansToolResult { call_id, result, .. } if call_id == "c2" && result == "t2"),
        "{kind:?}"
    );
    // An opaque node replacing the call orphans just the same.
    let err = s
        .append_json(&opaque("note/x", &replace_op(1, 1)))
        .unwrap_err();
    assert!(matches!(
        err.kind(),
        AppendErrorKind::ReplaceOrphansToolResult { .. }
    ));

    // The boundary: a compaction that removes the call and all its results.
    let s = fixture();
    s.append(Event::replace(Message::user("summary", "so far"), 0, 3))
        .unwrap();
    assert_eq!(ids(&s), ["summary", "u2"]);
    // So does an opaque node.
    let s = fixture();
    s.append_json(&opaque("note/x", &replace_op(1, 3))).unwrap();
    // A replace that puts the calls back (the answer rewritten, its calls kept).
    let s = fixture();
    s.append(Event::replace(answer("a1-short", &["c2", "c1"]), 1, 1))
        .unwrap();
    assert_eq!(ids(&s), ["u1", "a1-short", "t1", "t2", "u2"]);
    // Also when the replace removes most of the surface.
    let s2 = session_of(vec![
        Event::append(Message::user("u0", "a")),
        Event::append(Message::user("u1", "b")),
        Event::append(answer("a1", &["c1"])),
        Event::append(result("t1", "c1")),
    ]);
    let kind = refused(&s2, Event::replace(Message::user("summary", "x"), 0, 2));
    assert!(matches!(
        kind,
        AppendErrorKind::ReplaceOrphansToolResult { .. }
    ));
    s2.append(Event::replace(answer("a1-short", &["c1"]), 0, 2))
        .unwrap();
    assert_eq!(ids(&s2), ["a1-short", "t1"]);
    // …but one that keeps only one of them does not.
    let kind = refused(&s, Event::replace(answer("a1-shorter", &["c1"]), 1, 1));
    assert!(
        matches!(&kind, AppendErrorKind::ReplaceOrphansToolResult { call_id, .. } if call_id == "c2")
    );
    // Replacing what lies between a call and its results, or after them, is fine.
    let s = session_of(vec![
        Event::append(answer("a1", &["c1"])),
        Event::append(Message::developer("d1", vec![ContentBlock::text("note")])),
        Event::append(result("t1", "c1")),
    ]);
    s.append(Event::replace(Message::system("s1", "prompt"), 1, 1))
        .unwrap();
    s.append(Event::replace(result("t1-short", "c1"), 2, 2))
        .unwrap();
    // A call repeated earlier on the surface keeps the result answered (the serializers refuse
    // the repeated id on their own).
    let s = session_of(vec![
        Event::append(answer("a0", &["c1"])),
        Event::append(answer("a1", &["c1"])),
        Event::append(result("t1", "c1")),
    ]);
    s.append(Event::replace(Message::user("u", "x"), 1, 1))
        .unwrap();
    assert_eq!(ids(&s), ["a0", "u", "t1"]);
    let kind = refused(&s, Event::replace(Message::user("u2", "x"), 0, 0));
    assert!(matches!(
        kind,
        AppendErrorKind::ReplaceOrphansToolResult { .. }
    ));
}

#[test]
fn forks_count_inherited_calls_and_results() {
    let parent = session_of(vec![
        Event::append(Message::user("u1", "hi")),
        Event::append(answer("a1", &["c1"])),
        Event::append(result("t1", "c1")),
    ]);
    // The inherited call answers the fork's result.
    let fork = Session::fork(&parent, 2, "f").unwrap();
    fork.append(Event::append(result("t1-fork", "c1"))).unwrap();
    // Before the call, the fork has no call to answer.
    let early = Session::fork(&parent, 1, "e").unwrap();
    let kind = refused(&early, Event::append(result("t1-early", "c1")));
    assert!(matches!(kind, AppendErrorKind::OrphanToolResult { .. }));
    // An inherited result is kept from being orphaned by the fork's replace.
    let whole = Session::fork(&parent, 3, "w").unwrap();
    let kind = refused(&whole, Event::replace(Message::user("x", "x"), 1, 1));
    assert!(matches!(
        kind,
        AppendErrorKind::ReplaceOrphansToolResult { .. }
    ));
    whole
        .append(Event::replace(Message::user("x", "x"), 1, 2))
        .unwrap();
}

#[test]
fn a_batch_with_an_orphan_result_commits_nothing() {
    let session = Session::new("s");
    let mut recorder = Recorder::attach(&session);
    let config = Config::new("deepseek", "deepseek-flash");
    let route = Route::plain("deepseek", "deepseek-flash", WireApi::Messages);
    let tools = [tool("A")];
    let orphan = [Message::user("u1", "hi"), result("t1", "c1")];
    let step = Step::new(&config, "be brief", &tools, &route)
        .at(1, 1, 0)
        .user_messages(&orphan);
    let err = recorder.record(&session, step).unwrap_err();
    assert!(
        matches!(&err, RecordError::Append(e) if matches!(e.kind(), AppendErrorKind::OrphanToolResult { .. })),
        "{err:?}"
    );
    assert_eq!(session.len(), 0, "nothing of the batch is committed");
    // The boundary: the call earlier in the log, the result in the batch.
    session
        .append(Event::append(answer("a0", &["c1"])))
        .unwrap();
    let step = Step::new(&config, "be brief", &tools, &route)
        .at(1, 1, 0)
        .user_messages(&orphan);
    recorder.record(&session, step).unwrap();
}

/// The three rules, broken by lines an older crate wrote.
fn old_file() -> LogBuilder {
    let line = |e: Event| e.to_json();
    LogBuilder::new("old").lines([
        line(Event::append(Message::user("u1", "hi"))),
        line(Event::append(answer("a1", &["c1"]))),
        line(Event::append(result("t1", "c1"))),
        line(Event::append(assistant_of("a-empty", vec![]))),
        line(Event::append(result("t-orphan", "c9"))),
        line(Event::replace(Message::user("summary", "x"), 1, 1)),
        line(Event::append(Message::user("u2", "more"))),
    ])
}

#[test]
fn old_files_that_break_the_rules_still_load_and_the_wire_still_refuses_them() {
    let file = old_file();
    let loaded = Session::load_bytes(file.text().as_bytes()).unwrap();
    let s = loaded.session;
    assert_eq!(s.len(), 7);
    assert_eq!(
        ids(&s),
        ["u1", "summary", "t1", "a-empty", "t-orphan", "u2"]
    );
    // Byte for byte.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("saved.jsonl");
    s.save(&path).unwrap();
    assert_eq!(std::fs::read_to_string(&path).unwrap(), file.text());
    // `open` keeps it too, and appends after it.
    let opened = Session::open(file.write(dir.path(), "old.jsonl"))
        .unwrap()
        .session;
    assert_eq!(opened.len(), 7);
    // New events are held to the rules against the loaded surface.
    let kind = refused(&opened, Event::append(result("t-new", "c1")));
    assert!(matches!(kind, AppendErrorKind::OrphanToolResult { .. }));
    opened.append(Event::append(answer("a2", &["c2"]))).unwrap();
    opened.append(Event::append(result("t2", "c2"))).unwrap();
    // A replace is refused only for a result it orphans, not for one the file already held
    // orphaned: a small replace before it, and a compaction of most of the surface.
    let line = |e: Event| e.to_json();
    let legacy = LogBuilder::new("legacy").lines([
        line(Event::append(Message::user("u1", "a"))),
        line(Event::append(Message::user("u2", "b"))),
        line(Event::append(Message::user("u3", "c"))),
        line(Event::append(result("t-orphan", "c9"))),
    ]);
    let s2 = Session::load_bytes(legacy.text().as_bytes())
        .unwrap()
        .session;
    s2.append(Event::replace(Message::user("v1", "a"), 0, 0))
        .unwrap();
    s2.append(Event::replace(Message::user("v2", "x"), 0, 2))
        .unwrap();
    assert_eq!(ids(&s2), ["v2", "t-orphan"]);

    // The serializers still refuse the loaded surface, with their own typed errors.
    let config = Config::new("deepseek", "deepseek-flash")
        .with("max_tokens", 64.into())
        .unwrap();
    let messages = s.messages();
    let projected = ProjectedToolUpdates::new(&messages);
    let route = Route::plain("deepseek", "deepseek-flash", WireApi::Messages);
    let err = serialize(&config, &projected, &route).unwrap_err();
    assert!(
        matches!(
            &err,
            WireError::Message { message_id, kind: MessageFault::OrphanToolResult { call_id } }
                if message_id == "t1" && call_id == "c1"
        ),
        "{err:?}"
    );
    // With the orphans compacted away, the empty assistant message is what the wire refuses.
    s.append(Event::replace(Message::user("summary2", "y"), 1, 2))
        .unwrap();
    s.append(Event::replace(Message::user("summary3", "z"), 3, 3))
        .unwrap();
    assert_eq!(ids(&s), ["u1", "summary2", "a-empty", "summary3", "u2"]);
    let messages = s.messages();
    let projected = ProjectedToolUpdates::new(&messages);
    let err = serialize(&config, &projected, &route).unwrap_err();
    assert!(
        matches!(
            &err,
            WireError::Message { message_id, kind: MessageFault::EmptyTurn } if message_id == "a-empty"
        ),
        "{err:?}"
    );
}

/// The surface's message ids, in order.
fn ids(s: &Session) -> Vec<String> {
    s.messages().iter().map(|m| m.id().to_owned()).collect()
}

/// One attempted event of the property test.
#[derive(Clone, Debug)]
enum Op {
    User,
    /// An assistant message with calls of these ids (from a small pool, so ids repeat);
    /// without calls it is empty when `empty`.
    Answer {
        calls: Vec<u8>,
        empty: bool,
    },
    /// A tool result for call `c{n}`.
    Result(u8),
    /// A replace of `len` nodes from `at` (both taken modulo the surface) by a user message,
    /// an assistant message with calls, a tool result, or an opaque node.
    Replace {
        at: usize,
        len: usize,
        by: Box<Op>,
        opaque: bool,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let leaf = prop_oneof![
        Just(Op::User),
        (prop::collection::vec(0u8..4, 0..3), any::<bool>())
            .prop_map(|(calls, empty)| Op::Answer { calls, empty }),
        (0u8..4).prop_map(Op::Result),
    ];
    prop_oneof![
        3 => leaf.clone(),
        1 => (0usize..16, 1usize..4, leaf, any::<bool>()).prop_map(|(at, len, by, opaque)| {
            Op::Replace {
                at,
                len,
                by: Box::new(by),
                opaque,
            }
        }),
    ]
}

/// The message an op puts on the surface, with id `m{n}`.
fn message_of(op: &Op, n: usize) -> Message {
    let id = format!("m{n}");
    match op {
        Op::User | Op::Replace { .. } => Message::user(id, "x"),
        Op::Answer { calls, empty } if calls.is_empty() && *empty => assistant_of(&id, vec![]),
        Op::Answer { calls, .. } => {
            let calls: Vec<String> = calls.iter().map(|c| format!("c{c}")).collect();
            let calls: Vec<&str> = calls.iter().map(String::as_str).collect();
            answer(&id, &calls)
        }
        Op::Result(c) => result(&id, &format!("c{c}")),
    }
}

/// Whether every tool result on `surface` has an assistant message holding its call before it.
fn no_orphan(surface: &[Option<Message>]) -> bool {
    surface.iter().enumerate().all(|(q, node)| {
        let Some(MessageSource::Tool { call_id }) = node.as_ref().map(Message::source) else {
            return true;
        };
        surface[..q]
            .iter()
            .flatten()
            .any(|m| m.role() == Role::Assistant && m.tool_calls().any(|c| c.id() == call_id))
    })
}

fn is_empty_assistant(m: &Message) -> bool {
    m.role() == Role::Assistant
        && m.content()
            .iter()
            .all(|b| matches!(b, ContentBlock::Text { text } if text.is_empty()))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Against a model that rescans the surface: an event is accepted exactly when it puts no
    /// empty assistant message on the surface and leaves no tool result there without an
    /// earlier call, so no sequence of appends and replaces ever leaves an orphan.
    #[test]
    fn appends_and_replaces_never_leave_an_orphan_result(ops in prop::collection::vec(op(), 1..40)) {
        let s = Session::new("p");
        let mut model: Vec<Option<Message>> = Vec::new();
        for (n, op) in ops.iter().enumerate() {
            let (event, node, range) = match op {
                Op::Replace { at, len, by, opaque } if !model.is_empty() => {
                    let start = at % model.len();
                    let end = (start + len - 1).min(model.len() - 1);
                    if *opaque {
                        (None, None, Some((start, end)))
                    } else {
                        let m = message_of(by, n);
                        (Some(Event::replace(m.clone(), start, end)), Some(m), Some((start, end)))
                    }
                }
                Op::Replace { .. } => continue,
                other => {
                    let m = message_of(other, n);
                    (Some(Event::append(m.clone())), Some(m), None)
                }
            };
            let mut after = model.clone();
            match range {
                Some((start, end)) => {
                    after.splice(start..=end, [node.clone()]);
                }
                None => after.push(node.clone()),
            }
            let expected = node.as_ref().is_none_or(|m| !is_empty_assistant(m)) && no_orphan(&after);
            let outcome = match event {
                Some(e) => s.append(e),
                None => {
                    let (start, end) = range.unwrap_or_default();
                    s.append_json(&opaque("note/x", &replace_op(start, end)))
                }
            };
            prop_assert_eq!(outcome.is_ok(), expected, "op {} {:?} on {:?}: {:?}", n, op, ids(&s), outcome);
            if let Err(e) = outcome {
                prop_assert!(matches!(
                    e.kind(),
                    AppendErrorKind::EmptyAssistantMessage { .. }
                        | AppendErrorKind::OrphanToolResult { .. }
                        | AppendErrorKind::ReplaceOrphansToolResult { .. }
                ), "{:?}", e);
            } else {
                model = after;
            }
            let surface_ids: Vec<String> = model.iter().flatten().map(|m| m.id().to_owned()).collect();
            prop_assert_eq!(ids(&s), surface_ids);
        }
        prop_assert!(no_orphan(&model));
    }
}
