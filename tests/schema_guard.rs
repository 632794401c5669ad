//! The registration-time schema guard (`Session::check_tool`, `check_tools`): a tool about to
//! be registered conflicts when the surface shows calls of its name made against another
//! definition, the definition in force for a call being the one the latest header before its
//! assistant message gave the tool. Calls a replace removed do not count.

use mektpoy::{
    AgentLoop, Config, ContentBlock, Event, Message, Route, Session, ToolSchema,
    event::{Reason, RequestHeader, SeriesStart},
    route::{ToolUpdateMode, WireApi},
    session::{ConflictingCall, SchemaConflict},
    vocab::{MessageSource, Role, Seq},
};
use proptest::prelude::*;
use serde_json::{Value, json};

fn params(v: Value) -> serde_json::Map<String, Value> {
    v.as_object().expect("an object").clone()
}

/// `edit` taking a path (the definition the model first calls).
fn edit_v1() -> ToolSchema {
    ToolSchema::new(
        "edit",
        "Edit a file",
        params(
            json!({"type": "object", "properties": {"path": {"type": "string", "maxLength": 256}}}),
        ),
    )
}

/// `edit` taking a path and a dry-run flag.
fn edit_v2() -> ToolSchema {
    ToolSchema::new(
        "edit",
        "Edit a file",
        params(json!({"type": "object", "properties": {
            "path": {"type": "string", "maxLength": 256},
            "dry_run": {"type": "boolean"}
        }})),
    )
}

fn read_tool() -> ToolSchema {
    ToolSchema::new("read", "Read a file", params(json!({"type": "object"})))
}

fn header(tools: Vec<ToolSchema>) -> Event {
    Event::header(
        RequestHeader::new(Config::new("p", "m"), tools),
        Reason::Change,
    )
}

fn model() -> MessageSource {
    MessageSource::Model {
        provider: "p".into(),
        model: "m".into(),
    }
}

/// An assistant message holding one tool call per `(call id, tool name)`.
fn answer(id: &str, calls: &[(&str, &str)]) -> Message {
    let content = calls
        .iter()
        .map(|(call, name)| {
            ContentBlock::tool_call(
                (*call).to_owned(),
                (*name).to_owned(),
                r#"{"path":"a.rs"}"#.to_owned(),
            )
            .unwrap()
        })
        .collect();
    Message::new(id, Role::Assistant, content, model())
}

fn result(id: &str, call: &str) -> Message {
    Message::tool_result(id, call, "done")
}

fn session_of(events: Vec<Event>) -> Session {
    let s = Session::new("s");
    for (i, e) in events.into_iter().enumerate() {
        if let Err(err) = s.append(e) {
            panic!("fixture event {i} refused: {err}");
        }
    }
    s
}

/// The conflicting calls as `(message id, call id, seq, header)`.
fn calls_of(conflict: &SchemaConflict) -> Vec<(String, String, u64, u64)> {
    conflict
        .calls
        .iter()
        .map(|c| (c.message_id.clone(), c.call_id.clone(), c.seq.0, c.header.0))
        .collect()
}

fn row(message: &str, call: &str, seq: u64, header: u64) -> (String, String, u64, u64) {
    (message.to_owned(), call.to_owned(), seq, header)
}

/// header [edit v1] · u1 · a1 calls edit (c1) · its result.
fn edited_once() -> Session {
    session_of(vec![
        header(vec![edit_v1(), read_tool()]),
        Event::append(Message::user("u1", "fix a.rs")),
        Event::append(answer("a1", &[("c1", "edit")])),
        Event::append(result("r1", "c1")),
    ])
}

#[test]
fn a_called_tool_registered_with_another_definition_conflicts() {
    let s = edited_once();
    assert_eq!(
        s.check_tool(&edit_v1()),
        Ok(()),
        "the definition it was called with"
    );
    let conflict = s.check_tool(&edit_v2()).unwrap_err();
    assert_eq!(conflict.tool, edit_v2(), "names the new definition");
    assert_eq!(calls_of(&conflict), [row("a1", "c1", 2, 0)]);
    assert_eq!(
        conflict.calls[0].defined_as,
        edit_v1(),
        "and the one in force"
    );
    assert_eq!(
        conflict.to_string(),
        "`edit` is already called on the surface under another definition: \
         call c1 in message a1 (event 2, defined by header 0)"
    );
    // Another description is another definition too, and so is a changed unknown field.
    let described = ToolSchema::new("edit", "Edit one file", edit_v1().parameters().clone());
    assert!(s.check_tool(&described).is_err());
    let mut annotated = serde_json::to_value(edit_v1()).unwrap();
    annotated["annotations"] = json!({"destructiveHint": true});
    let annotated = ToolSchema::from_value(annotated).unwrap();
    assert!(s.check_tool(&annotated).is_err(), "unknown fields count");
}

#[test]
fn an_equivalent_definition_is_no_conflict() {
    let s = edited_once();
    // Keys in another order at every depth, 256 spelled 256.0.
    let respelled: ToolSchema = serde_json::from_str(
        r#"{"parameters":{"properties":{"path":{"maxLength":256.0,"type":"string"}},"type":"object"},
            "description":"Edit a file","name":"edit"}"#,
    )
    .unwrap();
    assert_eq!(respelled, edit_v1());
    assert_eq!(s.check_tool(&respelled), Ok(()));
    // `defer_loading` alone says when the tool may be used, not what a call looks like.
    assert_eq!(s.check_tool(&edit_v1().with_defer_loading(true)), Ok(()));
    assert!(
        s.check_tool(&edit_v2().with_defer_loading(true)).is_err(),
        "deferral does not hide a changed definition"
    );
}

#[test]
fn a_tool_never_called_is_no_conflict() {
    let s = session_of(vec![
        header(vec![edit_v1(), read_tool()]),
        Event::append(Message::user("u1", "look")),
        Event::append(answer("a1", &[("c1", "read")])),
        Event::append(result("r1", "c1")),
        // An assistant message in the log only: never on the surface, never seen.
        Event::Message(mektpoy::event::MessageEvent::new(
            answer("a2", &[("c2", "edit")]),
            None,
        )),
    ]);
    assert_eq!(s.check_tool(&edit_v2()), Ok(()));
    let new = ToolSchema::new("grep", "Search", params(json!({})));
    assert_eq!(s.check_tool(&new), Ok(()), "a name nobody called");
    assert_eq!(Session::new("empty").check_tool(&edit_v2()), Ok(()));
}

#[test]
fn every_call_is_listed_in_surface_order() {
    let s = session_of(vec![
        header(vec![edit_v1(), read_tool()]),
        Event::append(Message::user("u1", "fix")),
        Event::append(answer(
            "a1",
            &[("c1", "edit"), ("c2", "read"), ("c3", "edit")],
        )),
        Event::append(result("r1", "c1")),
        Event::append(result("r2", "c2")),
        Event::append(result("r3", "c3")),
        Event::append(answer("a2", &[("c4", "edit")])),
        Event::append(result("r4", "c4")),
        Event::append(answer("a3", &[("c5", "edit"), ("c6", "edit")])),
        Event::append(result("r5", "c5")),
        Event::append(result("r6", "c6")),
    ]);
    let conflict = s.check_tool(&edit_v2()).unwrap_err();
    assert_eq!(
        calls_of(&conflict),
        [
            row("a1", "c1", 2, 0),
            row("a1", "c3", 2, 0),
            row("a2", "c4", 6, 0),
            row("a3", "c5", 8, 0),
            row("a3", "c6", 8, 0),
        ]
    );
    assert_eq!(
        conflict.to_string(),
        "`edit` is already called on the surface under another definition: \
         call c1 in message a1 (event 2, defined by header 0), \
         call c3 in message a1 (event 2, defined by header 0), \
         call c4 in message a2 (event 6, defined by header 0) and 2 more calls"
    );
}

#[test]
fn the_definition_in_force_is_the_latest_header_before_the_call() {
    let s = session_of(vec![
        header(vec![edit_v1()]),
        Event::append(Message::user("u1", "fix")),
        Event::append(answer("a1", &[("c1", "edit")])),
        Event::append(result("r1", "c1")),
        header(vec![edit_v2()]),
        Event::append(answer("a2", &[("c2", "edit")])),
        Event::append(result("r2", "c2")),
    ]);
    let v3 = ToolSchema::new("edit", "Edit v3", params(json!({})));
    let against_v2 = s.check_tool(&edit_v2()).unwrap_err();
    assert_eq!(calls_of(&against_v2), [row("a1", "c1", 2, 0)]);
    assert_eq!(against_v2.calls[0].defined_as, edit_v1());
    let against_v1 = s.check_tool(&edit_v1()).unwrap_err();
    assert_eq!(calls_of(&against_v1), [row("a2", "c2", 5, 4)]);
    assert_eq!(against_v1.calls[0].defined_as, edit_v2());
    // A header logged after the calls moves neither.
    s.append(header(vec![v3.clone()])).unwrap();
    assert_eq!(s.check_tool(&edit_v2()), Err(against_v2));
    assert_eq!(s.check_tool(&edit_v1()), Err(against_v1));
    assert_eq!(calls_of(&s.check_tool(&v3).unwrap_err()).len(), 2);
}

#[test]
fn an_invalid_call_and_a_call_before_any_header_are_not_compared() {
    // Before any header the log knows no definition.
    let s = session_of(vec![
        Event::append(Message::user("u1", "fix")),
        Event::append(answer("a1", &[("c1", "edit")])),
        Event::append(result("r1", "c1")),
    ]);
    assert_eq!(s.check_tool(&edit_v2()), Ok(()));
    // Its header did not declare `edit`: an invalid call (an unknown tool), not compared;
    // the call after the header that did declare it is.
    s.append(header(vec![read_tool()])).unwrap();
    s.append(Event::append(answer("a2", &[("c2", "edit")])))
        .unwrap();
    s.append(Event::append(result("r2", "c2"))).unwrap();
    assert_eq!(s.check_tool(&edit_v2()), Ok(()));
    s.append(header(vec![edit_v1()])).unwrap();
    s.append(Event::append(answer("a3", &[("c3", "edit")])))
        .unwrap();
    s.append(Event::append(result("r3", "c3"))).unwrap();
    assert_eq!(
        calls_of(&s.check_tool(&edit_v2()).unwrap_err()),
        [row("a3", "c3", 7, 6)]
    );
}

#[test]
fn a_call_a_replace_removed_does_not_count_and_one_it_kept_does() {
    // A compaction that removes the call and its result.
    let s = edited_once();
    s.append(Event::replace(
        Message::user("sum", "summary: a.rs fixed"),
        0,
        2,
    ))
    .unwrap();
    assert_eq!(s.check_tool(&edit_v2()), Ok(()));

    // The same when the replace removes fewer nodes than it keeps (the index forgets the
    // removed ones one by one instead of being rebuilt from the rest).
    let s = edited_once();
    for e in [
        Event::append(Message::user("u2", "now read b.rs")),
        Event::append(answer("a2", &[("c2", "read")])),
        Event::append(result("r2", "c2")),
        Event::append(Message::user("u3", "thanks")),
    ] {
        s.append(e).unwrap();
    }
    s.append(Event::replace(
        Message::user("sum", "summary: a.rs fixed"),
        1,
        2,
    ))
    .unwrap();
    assert_eq!(s.check_tool(&edit_v2()), Ok(()));
    let read_v2 = ToolSchema::new("read", "Read v2", params(json!({})));
    assert_eq!(
        calls_of(&s.check_tool(&read_v2).unwrap_err()),
        [row("a2", "c2", 5, 0)],
        "the calls the replace kept still count"
    );

    // A replace elsewhere keeps the call: still a conflict, unchanged.
    let s = edited_once();
    s.append(Event::append(Message::user("u2", "thanks")))
        .unwrap();
    s.append(Event::replace(Message::user("u2b", "thanks!"), 3, 3))
        .unwrap();
    assert_eq!(
        calls_of(&s.check_tool(&edit_v2()).unwrap_err()),
        [row("a1", "c1", 2, 0)]
    );

    // A replace that removes only the user turn before the call keeps it too.
    let s = edited_once();
    s.append(Event::replace(Message::user("u1b", "fix it"), 0, 0))
        .unwrap();
    assert!(s.check_tool(&edit_v2()).is_err());

    // A rewritten answer that keeps its call: the message is the replace's, and the header in
    // force is the latest before the replace.
    let s = edited_once();
    s.append(header(vec![edit_v2(), read_tool()])).unwrap();
    s.append(Event::replace(answer("a1b", &[("c1", "edit")]), 1, 1))
        .unwrap();
    assert_eq!(s.check_tool(&edit_v2()), Ok(()), "re-placed under v2");
    let conflict = s.check_tool(&edit_v1()).unwrap_err();
    assert_eq!(calls_of(&conflict), [row("a1b", "c1", 5, 4)]);
}

#[test]
fn forks_see_the_calls_they_inherit() {
    let parent = edited_once();
    let before = Session::fork(&parent, 2, "before").unwrap();
    assert_eq!(
        before.check_tool(&edit_v2()),
        Ok(()),
        "forked before the call"
    );
    let after = Session::fork(&parent, 3, "after").unwrap();
    assert_eq!(
        calls_of(&after.check_tool(&edit_v2()).unwrap_err()),
        [row("a1", "c1", 2, 0)]
    );
    // Each goes on its own way: the fork compacts the call away, the parent keeps it.
    after
        .append(Event::replace(Message::user("sum", "summary"), 0, 1))
        .unwrap();
    assert_eq!(after.check_tool(&edit_v2()), Ok(()));
    assert!(parent.check_tool(&edit_v2()).is_err());
    // And a call made only in the earlier fork is only there.
    before
        .append(Event::append(answer("a9", &[("c9", "edit")])))
        .unwrap();
    let conflict = before.check_tool(&edit_v2()).unwrap_err();
    assert_eq!(calls_of(&conflict), [row("a9", "c9", 2, 0)]);
    assert_eq!(
        calls_of(&parent.check_tool(&edit_v2()).unwrap_err()),
        [row("a1", "c1", 2, 0)]
    );
}

#[test]
fn after_save_and_load_the_guard_gives_the_same_answer() {
    let s = session_of(vec![
        header(vec![edit_v1(), read_tool()]),
        Event::append(Message::user("u1", "fix")),
        Event::append(answer("a1", &[("c1", "edit"), ("c2", "read")])),
        Event::append(result("r1", "c1")),
        Event::append(result("r2", "c2")),
        header(vec![edit_v2(), read_tool()]),
        Event::append(answer("a2", &[("c3", "edit")])),
        Event::append(result("r3", "c3")),
        Event::append(Message::user("u2", "and b.rs")),
        Event::replace(Message::user("u2b", "and b.rs too"), 6, 6),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    s.save(&path).unwrap();
    let loaded = Session::load(&path).unwrap().session;
    let opened = Session::open(&path).unwrap().session;
    let candidates = [
        edit_v1(),
        edit_v2(),
        read_tool(),
        ToolSchema::new("read", "r", params(json!({}))),
    ];
    for tool in &candidates {
        assert_eq!(
            loaded.check_tool(tool),
            s.check_tool(tool),
            "{}",
            tool.name()
        );
        assert_eq!(
            opened.check_tool(tool),
            s.check_tool(tool),
            "{}",
            tool.name()
        );
    }
    assert_eq!(loaded.check_tools(&candidates), s.check_tools(&candidates));
    assert!(s.check_tool(&edit_v1()).is_err() && s.check_tool(&edit_v2()).is_err());
}

#[test]
fn check_tools_reports_each_conflicting_tool_in_set_order() {
    let s = session_of(vec![
        header(vec![edit_v1(), read_tool()]),
        Event::append(Message::user("u1", "fix")),
        Event::append(answer("a1", &[("c1", "edit"), ("c2", "read")])),
        Event::append(result("r1", "c1")),
        Event::append(result("r2", "c2")),
    ]);
    let read_v2 = ToolSchema::new("read", "Read a file, or a range", params(json!({})));
    let grep = ToolSchema::new("grep", "Search", params(json!({})));
    assert_eq!(
        s.check_tools(&[edit_v1(), read_tool(), grep.clone()]),
        Ok(())
    );
    assert_eq!(s.check_tools(&[]), Ok(()));
    let all = s
        .check_tools(&[read_v2.clone(), grep.clone(), edit_v2()])
        .unwrap_err();
    let names: Vec<&str> = all.conflicts.iter().map(|c| c.tool.name()).collect();
    assert_eq!(names, ["read", "edit"]);
    assert_eq!(all.conflicts[0], s.check_tool(&read_v2).unwrap_err());
    assert_eq!(
        all.to_string(),
        "2 tools are already called on the surface under other definitions; \
         `read` is already called on the surface under another definition: \
         call c2 in message a1 (event 2, defined by header 0); \
         `edit` is already called on the surface under another definition: \
         call c1 in message a1 (event 2, defined by header 0)"
    );
    let one = s.check_tools(&[grep, edit_v2()]).unwrap_err();
    assert_eq!(
        one.to_string(),
        s.check_tool(&edit_v2()).unwrap_err().to_string()
    );
}

/// A loop on `route` that registered `edit` v1 and saw the model call it once; returns the
/// loop and whether the guard objects to v2.
fn called_edit_on(route: Route) -> AgentLoop {
    let mut agent = AgentLoop::builder(Session::new("s"), route)
        .config(Config::new("anthropic", "m"))
        .tools([edit_v1(), read_tool()])
        .build()
        .unwrap();
    agent.user_turn([Message::user("u1", "fix a.rs")]).unwrap();
    agent.append(answer("a1", &[("c1", "edit")])).unwrap();
    agent.append(result("r1", "c1")).unwrap();
    agent
}

#[test]
fn a_conflict_costs_the_cache_by_reference_and_not_inline_but_is_a_conflict_on_both() {
    let by_reference = Route::builder("anthropic", "m", WireApi::Messages)
        .tool_update(Some(ToolUpdateMode::InHistory))
        .build()
        .unwrap();
    let inline = Route::builder("anthropic", "m", WireApi::Messages)
        .tool_update(Some(ToolUpdateMode::InHistory))
        .inline_definitions(true)
        .build()
        .unwrap();
    for (route, rewrites) in [(by_reference, true), (inline, false)] {
        let mut agent = called_edit_on(route);
        let conflicts = agent.check_tools(&[edit_v2(), read_tool()]).unwrap_err();
        assert_eq!(conflicts.conflicts.len(), 1);
        assert_eq!(
            conflicts.conflicts[0]
                .calls
                .iter()
                .map(|c: &ConflictingCall| c.seq)
                .collect::<Vec<_>>(),
            [Seq(2)]
        );
        // Registered anyway: by reference a declaration series (the prefix is rewritten),
        // inline a by-value redefinition in the history (the prefix kept).
        agent.set_tools([edit_v2(), read_tool()]).unwrap();
        let request = agent.next_step().unwrap();
        assert_eq!(request.starts_series, rewrites);
        assert_eq!(
            request.series_start,
            rewrites.then_some(SeriesStart::Redeclared)
        );
        // Either way the earlier call is still there, against the old definition.
        assert!(agent.check_tools(&[edit_v2()]).is_err());
        assert_eq!(agent.check_tools(&[edit_v1()]), Ok(()));
    }
}

// ---------------------------------------------------------------------------------------
// The guard against a naive scan of the surface, on random logs.

/// One step of a random log.
#[derive(Clone, Debug)]
enum Op {
    /// A header declaring, for each name of `NAMES`, nothing or one of `VERSIONS`.
    Header([Option<u8>; 3]),
    User,
    /// An assistant message calling these names (indexes into `NAMES`, 3 being undeclared).
    Answer(Vec<u8>),
    /// An assistant message in the log only.
    LogOnlyAnswer(Vec<u8>),
    /// A result for the oldest call on the surface without one.
    Result,
    /// A replace of `start..=start+len` (each taken modulo the surface) by a user message, or
    /// by an assistant message calling these names.
    Replace(usize, usize, Option<Vec<u8>>),
    /// A fork at this fraction of the log, continuing there.
    Fork(u8),
}

const NAMES: [&str; 4] = ["edit", "read", "grep", "ghost"];

/// Version `v` of tool `name`: 0 and 1 are different definitions, 2 is 0 respelled, 3 is 0
/// deferred.
fn version(name: &str, v: u8) -> ToolSchema {
    match v {
        0 => ToolSchema::new(name, "v0", params(json!({"a": 1, "b": {"c": 2}}))),
        1 => ToolSchema::new(name, "v1", params(json!({"a": 1}))),
        2 => serde_json::from_value(json!({
            "parameters": {"b": {"c": 2.0}, "a": 1.0}, "description": "v0", "name": name
        }))
        .unwrap(),
        _ => version(name, 0).with_defer_loading(true),
    }
}

fn op() -> impl Strategy<Value = Op> {
    let names = || proptest::collection::vec(0u8..4, 1..3);
    prop_oneof![
        2 => proptest::array::uniform3(proptest::option::of(0u8..4)).prop_map(Op::Header),
        2 => Just(Op::User),
        4 => names().prop_map(Op::Answer),
        1 => names().prop_map(Op::LogOnlyAnswer),
        3 => Just(Op::Result),
        2 => (0usize..16, 0usize..4, proptest::option::of(names()))
            .prop_map(|(s, l, m)| Op::Replace(s, l, m)),
        1 => any::<u8>().prop_map(Op::Fork),
    ]
}

/// Plays `ops`, skipping what `append` refuses; returns the session (a fork, after a `Fork`).
fn play(ops: &[Op]) -> Session {
    let mut s = Session::new("p");
    let mut n = 0usize;
    let mut next_id = || {
        n += 1;
        n
    };
    for op in ops {
        let event = match op {
            Op::Header(versions) => {
                let tools = versions
                    .iter()
                    .zip(NAMES)
                    .filter_map(|(v, name)| v.map(|v| version(name, v)))
                    .collect();
                header(tools)
            }
            Op::User => Event::append(Message::user(format!("u{}", next_id()), "go")),
            Op::Answer(names) | Op::LogOnlyAnswer(names) => {
                let id = next_id();
                let calls: Vec<(String, &str)> = names
                    .iter()
                    .enumerate()
                    .map(|(i, &k)| (format!("c{id}-{i}"), NAMES[k as usize]))
                    .collect();
                let calls: Vec<(&str, &str)> =
                    calls.iter().map(|(c, n)| (c.as_str(), *n)).collect();
                let message = answer(&format!("a{id}"), &calls);
                if matches!(op, Op::LogOnlyAnswer(_)) {
                    Event::Message(mektpoy::event::MessageEvent::new(message, None))
                } else {
                    Event::append(message)
                }
            }
            Op::Result => {
                let Some(call) = pending_call(&s) else {
                    continue;
                };
                Event::append(result(&format!("r{}", next_id()), &call))
            }
            Op::Replace(start, len, with) => {
                let surface = s.surface().len();
                if surface == 0 {
                    continue;
                }
                let start = start % surface;
                let end = (start + len).min(surface - 1);
                let id = next_id();
                let message = match with {
                    None => Message::user(format!("s{id}"), "summary"),
                    Some(names) => {
                        // Puts back calls of the surface when it can (a rewritten answer).
                        let calls: Vec<(String, &str)> = names
                            .iter()
                            .enumerate()
                            .map(|(i, &k)| (format!("c{id}-{i}"), NAMES[k as usize]))
                            .collect();
                        let calls: Vec<(&str, &str)> =
                            calls.iter().map(|(c, n)| (c.as_str(), *n)).collect();
                        answer(&format!("a{id}"), &calls)
                    }
                };
                Event::replace(message, start, end)
            }
            Op::Fork(at) => {
                let upto = (s.len() * usize::from(*at)) / 255;
                s = Session::fork(&s, upto as u64, format!("f{}", next_id())).unwrap();
                continue;
            }
        };
        let _ = s.append(event);
    }
    s
}

/// The first call on the surface with no result after it on the surface.
fn pending_call(s: &Session) -> Option<String> {
    let messages = s.messages();
    let answered: std::collections::HashSet<&str> = messages
        .iter()
        .filter_map(|m| match m.source() {
            MessageSource::Tool { call_id } => Some(call_id.as_str()),
            _ => None,
        })
        .collect();
    messages
        .iter()
        .filter(|m| m.role() == Role::Assistant)
        .flat_map(|m| m.tool_calls())
        .map(|c| c.id())
        .find(|c| !answered.contains(c))
        .map(str::to_owned)
}

/// The guard's answer computed the slow way: every assistant message on the surface, the
/// event that holds it found by scanning the log, the header before it by scanning back.
fn naive(s: &Session, tool: &ToolSchema) -> Vec<(String, String, Seq, Seq, ToolSchema)> {
    let events: Vec<Event> = s.events().iter().cloned().collect();
    let mut out = Vec::new();
    for node in s.surface().iter() {
        let mektpoy::session::SurfaceNode::Message(m) = node else {
            continue;
        };
        if m.role() != Role::Assistant {
            continue;
        }
        let seq = events
            .iter()
            .position(|e| matches!(e, Event::Message(e) if e.message.id() == m.id()))
            .expect("a surface message is in the log");
        let Some((h, Event::Header(header))) = events[..seq]
            .iter()
            .enumerate()
            .rev()
            .find(|(_, e)| matches!(e, Event::Header(_)))
        else {
            continue;
        };
        let Some(defined) = header.header.tools.iter().find(|t| t.name() == tool.name()) else {
            continue;
        };
        if defined.same_definition(tool) {
            continue;
        }
        for call in m.tool_calls().filter(|c| c.name() == tool.name()) {
            out.push((
                m.id().to_owned(),
                call.id().to_owned(),
                Seq(seq as u64),
                Seq(h as u64),
                defined.clone(),
            ));
        }
    }
    out
}

fn guard(s: &Session, tool: &ToolSchema) -> Vec<(String, String, Seq, Seq, ToolSchema)> {
    match s.check_tool(tool) {
        Ok(()) => Vec::new(),
        Err(conflict) => {
            assert!(!conflict.calls.is_empty(), "a conflict names a call");
            assert_eq!(&conflict.tool, tool);
            conflict
                .calls
                .into_iter()
                .map(|c| (c.message_id, c.call_id, c.seq, c.header, c.defined_as))
                .collect()
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn the_guard_agrees_with_a_naive_scan_of_the_surface(
        ops in proptest::collection::vec(op(), 0..40)
    ) {
        let s = play(&ops);
        let candidates: Vec<ToolSchema> = NAMES
            .iter()
            .flat_map(|name| (0..4).map(move |v| version(name, v)))
            .collect();
        let mut conflicting = 0;
        for tool in &candidates {
            let expected = naive(&s, tool);
            conflicting += usize::from(!expected.is_empty());
            prop_assert_eq!(guard(&s, tool), expected, "{:?}", tool);
        }
        let batch = s.check_tools(&candidates).err().map_or(0, |c| c.conflicts.len());
        prop_assert_eq!(batch, conflicting);
        // The same after a round trip through a file.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        s.save(&path).unwrap();
        let loaded = Session::load(&path).unwrap().session;
        for tool in &candidates {
            prop_assert_eq!(loaded.check_tool(tool), s.check_tool(tool));
        }
    }
}

/// The random logs above reach every case the guard distinguishes: calls with no header,
/// invalid calls, calls under an equivalent and under a different definition, replaces that
/// removed calls and forks.
#[test]
fn the_naive_scan_property_is_exercised() {
    use proptest::strategy::ValueTree;
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let strategy = proptest::collection::vec(op(), 0..40);
    let mut seen = std::collections::HashMap::<&str, usize>::new();
    for _ in 0..128 {
        let ops = strategy.new_tree(&mut runner).unwrap().current();
        let s = play(&ops);
        let events: Vec<Event> = s.events().iter().cloned().collect();
        if s.parent().is_some() {
            *seen.entry("fork").or_default() += 1;
        }
        // Calls that were put on the surface and are not on it any more.
        let on_surface: std::collections::HashSet<String> =
            s.messages().iter().map(|m| m.id().to_owned()).collect();
        let removed = events.iter().any(|e| {
            matches!(e, Event::Message(m) if m.surface_op.is_some()
                && m.message.tool_calls().next().is_some()
                && !on_surface.contains(m.message.id()))
        });
        if removed {
            *seen.entry("a replace removed a call").or_default() += 1;
        }
        for m in s.messages().iter().filter(|m| m.role() == Role::Assistant) {
            let seq = events
                .iter()
                .position(|e| matches!(e, Event::Message(e) if e.message.id() == m.id()))
                .unwrap();
            let header = events[..seq].iter().rev().find_map(|e| match e {
                Event::Header(h) => Some(h.clone()),
                _ => None,
            });
            for call in m.tool_calls() {
                let case = match &header {
                    None => "no header",
                    Some(h) => match h.header.tools.iter().find(|t| t.name() == call.name()) {
                        None => "invalid call",
                        Some(t) if t.same_definition(&version(call.name(), 0)) => "version 0",
                        Some(_) => "another version",
                    },
                };
                *seen.entry(case).or_default() += 1;
            }
        }
    }
    for case in [
        "fork",
        "a replace removed a call",
        "no header",
        "invalid call",
        "version 0",
        "another version",
    ] {
        assert!(
            seen.get(case).copied().unwrap_or(0) >= 5,
            "{case}: {seen:?}"
        );
    }
}
