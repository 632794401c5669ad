//! Regression tests named after the fault they pin.

use mektpoy::{Event, Message, Session};

/// `save` of a persisting session over its own file used to rename a copy over it, leaving the
/// writer appending to the unlinked old file: later appends silently disappeared.
#[test]
fn save_over_own_file_keeps_later_appends() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let session = Session::create(&path, "s").unwrap();
    session
        .append(Event::append(Message::user("u1", "one")))
        .unwrap();
    session.save(&path).unwrap();
    session.save(dir.path().join(".").join("s.jsonl")).unwrap();
    session
        .append(Event::append(Message::user("u2", "two")))
        .unwrap();
    let loaded = Session::load(&path).unwrap().session;
    assert_eq!(loaded.len(), 2);
    assert_eq!(loaded.to_jsonl(), session.to_jsonl());
    // Saving elsewhere still writes a copy.
    let copy = dir.path().join("copy.jsonl");
    session.save(&copy).unwrap();
    assert_eq!(std::fs::read_to_string(&copy).unwrap(), session.to_jsonl());
}

/// `append_json` used to re-encode the event, dropping unknown fields that `load` keeps.
#[test]
fn append_json_keeps_the_line_and_its_unknown_fields() {
    let session = Session::new("s");
    let line = r#"{"type":"user/message","x":1,"data":{"message":{"id":"u1","role":"user","content":[{"type":"text","text":"a\nb","lang":"en"}],"source":{"kind":"user"},"meta":{"k":1.50}}},"surfaceOp":"append"}"#;
    session.append_json(&format!("  {line}\n")).unwrap();
    assert_eq!(session.to_jsonl().lines().nth(1), Some(line));
    // A pretty-printed line becomes one JSONL line, strings untouched.
    let pretty = "{\n  \"type\": \"note/x\",\n  \"data\": {\"s\": \"two  spaces \\\" quote\"}\n}";
    session.append_json(pretty).unwrap();
    assert_eq!(
        session.to_jsonl().lines().nth(2),
        Some(r#"{"type":"note/x","data":{"s":"two  spaces \" quote"}}"#)
    );
    let reloaded = Session::load_bytes(session.to_jsonl().as_bytes())
        .unwrap()
        .session;
    assert_eq!(reloaded.to_jsonl(), session.to_jsonl());
}

/// The fold catch-up narrowed an `im` focus to an empty range, which panics: a retry (attempt
/// 1, so no user message) that changes the tools appends a header first in its batch.
#[test]
fn a_retry_whose_batch_starts_with_the_header_records() {
    use mektpoy::{
        Config, ToolSchema,
        agent::{Recorder, Step},
        route_for,
    };
    let session = Session::new("s");
    let mut recorder = Recorder::attach(&session);
    let config = Config::new("deepseek", "deepseek-flash");
    let route = route_for("deepseek", "deepseek-flash");
    let a = ToolSchema::no_input("a", "a");
    let b = ToolSchema::no_input("b", "b");
    for (attempt, tools) in [(0, vec![a.clone()]), (1, vec![a, b])] {
        recorder
            .record(
                &session,
                Step::new(&config, "", &tools, &route)
                    .at(1, 1, attempt)
                    .user_messages(&[Message::user("u1", "hi")]),
            )
            .unwrap();
    }
    assert_eq!(session.len(), 4, "user, header, header, developer message");
    assert_eq!(session.tool_history().updates().len(), 1);
}

/// reference §4.1 counts prompt nodes (system messages with source `system-prompt`); any system
/// message used to count, so a compaction summary written as a system message became the
/// "effective prompt" and the next record replaced it with the prompt.
#[test]
fn a_system_role_compaction_summary_survives_the_next_record() {
    use mektpoy::{
        Config, ContentBlock,
        agent::{Recorder, Step},
        route_for,
        session::SurfaceNode,
        vocab::{MessageSource, Role},
    };
    let session = Session::new("s");
    let mut recorder = Recorder::attach(&session);
    let config = Config::new("deepseek", "deepseek-flash");
    let route = route_for("deepseek", "deepseek-flash");
    let step = |recorder: &mut Recorder, turn: u64| {
        recorder
            .record(
                &session,
                Step::new(&config, "P", &[], &route)
                    .at(turn, 0, 0)
                    .user_messages(&[Message::user(format!("u{turn}"), "hi")]),
            )
            .unwrap()
    };
    step(&mut recorder, 1);
    session
        .append(Event::append(Message::assistant("a1", "ok", "p", "m")))
        .unwrap();
    let summary = Message::new(
        "summary",
        Role::System,
        vec![ContentBlock::text("the user said hi")],
        MessageSource::other(serde_json::json!({"kind": "compaction"})).unwrap(),
    );
    let n = session.surface().len();
    session.append(Event::replace(summary, 0, n - 1)).unwrap();
    step(&mut recorder, 2);
    let ids: Vec<String> = session
        .surface()
        .iter()
        .map(|node| match node {
            SurfaceNode::Message(m) => m.id().to_owned(),
            SurfaceNode::Opaque(s) => s.to_string(),
        })
        .collect();
    assert_eq!(ids[0], "summary", "{ids:?}");
    assert!(
        ids.contains(&"u2".to_owned()) && ids.len() == 3,
        "summary, prompt, u2: {ids:?}"
    );
}

/// A `create` whose session line could not be written used to leave an empty file behind,
/// which then blocked both `create` (the file exists) and `open` (no session line).
#[test]
fn a_failed_create_leaves_no_file() {
    struct Full;
    impl mektpoy::store::JsonlSink for Full {
        fn append(&mut self, _: &[u8]) -> std::io::Result<()> {
            Err(std::io::Error::other("disk full"))
        }
        fn truncate(&mut self, _: u64) -> std::io::Result<()> {
            Ok(())
        }
        fn sync(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let err = mektpoy::session::FileOptions::new()
        .sink(|_| Full)
        .create(&path, "s")
        .unwrap_err();
    assert!(
        matches!(err, mektpoy::store::PersistError::Write { .. }),
        "{err:?}"
    );
    assert!(!path.exists());
    Session::create(&path, "s").expect("the path is free again");
}

/// Two threads saving one session to one path used to share a temporary file name.
#[test]
fn concurrent_saves_to_one_path_each_publish_a_whole_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let session = Session::new("s");
    for i in 0..200 {
        session
            .append(Event::append(Message::user(
                format!("u{i}"),
                "x".repeat(100),
            )))
            .unwrap();
    }
    std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| {
                for _ in 0..10 {
                    session.save(&path).unwrap();
                }
            });
        }
    });
    assert_eq!(std::fs::read_to_string(&path).unwrap(), session.to_jsonl());
    let leftovers = std::fs::read_dir(dir.path()).unwrap().count();
    assert_eq!(leftovers, 1, "no temporary file left behind");
}

/// reference §1: a `tool/result` carries `{"kind":"tool","callId"}`. One without it used to be
/// accepted and fail only at the wire, far from its cause.
#[test]
fn a_tool_result_without_a_call_id_is_refused_at_append() {
    use mektpoy::{
        ContentBlock,
        session::AppendErrorKind,
        vocab::{MessageSource, Role},
    };
    let session = Session::new("s");
    let result = Message::new(
        "t1",
        Role::Tool,
        vec![ContentBlock::text("ok")],
        MessageSource::User,
    );
    let err = session.append(Event::append(result)).unwrap_err();
    assert!(
        matches!(err.kind(), AppendErrorKind::ToolResultWithoutCallId { .. }),
        "{err:?}"
    );
    assert!(err.to_string().starts_with("event 0:"), "{err}");
    assert_eq!(session.len(), 0);
    let line = r#"{"type":"tool/result","data":{"message":{"id":"t1","role":"tool","content":[],"source":{"kind":"user"}}}}"#;
    let file = format!("{{\"type\":\"session\",\"version\":0,\"id\":\"s\"}}\n{line}\n");
    let err = Session::load_bytes(file.as_bytes()).unwrap_err();
    assert!(
        matches!(
            err,
            mektpoy::session::LoadError::Event { line: 2, ref source }
                if matches!(source.kind(), AppendErrorKind::ToolResultWithoutCallId { .. })
        ),
        "{err:?}"
    );
    // The boundary: a `{"kind":"tool","callId"}` source, answering a call on the surface.
    let call = Message::new(
        "a1",
        Role::Assistant,
        vec![ContentBlock::tool_call("c1", "read", "{}").unwrap()],
        MessageSource::Model {
            provider: "p".into(),
            model: "m".into(),
        },
    );
    session.append(Event::append(call)).unwrap();
    session
        .append(Event::append(Message::tool_result("t1", "c1", "ok")))
        .unwrap();
}
