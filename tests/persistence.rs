//! Session files under kills, two writers and hostile input: batch frames (every cut of a
//! framed file, corrupt frames), the writer's lock and length check, load limits, a second
//! session line and a fork's `upto` beyond the file.

mod support;

use std::fs;
use std::io::Write;
use std::path::Path;

use mektpoy::{
    Config, Event, Message, Route, Session, ToolSchema,
    agent::{RecordError, Recorder, Step},
    event::DecodeError,
    route::{ToolUpdateMode, WireApi},
    session::{AppendErrorKind, FileOptions, LoadError},
    store::{FrameFault, PersistError, WriteError},
    vocab::Seq,
};
use support::*;

fn route() -> Route {
    Route::builder("deepseek", "deepseek-flash", WireApi::Messages)
        .tool_update(Some(ToolUpdateMode::AdditionOnly))
        .system_prompt_in_history(true)
        .build()
        .unwrap()
}

/// Records step `turn` with `tools` and one user message: a batch of several events (system
/// node on the first, user message, header, developer message on a change).
fn record(session: &Session, recorder: &mut Recorder, turn: u64, tools: &[ToolSchema]) {
    let config = Config::new("p", "m");
    recorder
        .record(
            session,
            Step::new(&config, "P", tools, &route())
                .at(turn, 0, 0)
                .user_messages(&[Message::user(format!("u{turn}"), format!("hello {turn}"))]),
        )
        .unwrap();
}

/// A persisting session at `path` with batches of 3 (system, user, header), 1 (an append),
/// 3 (user, header, developer) and 1 events; returns the event count after each batch.
fn write_batches(path: &Path) -> (Session, Vec<usize>) {
    let session = Session::create(path, "s").unwrap();
    let mut recorder = Recorder::attach(&session);
    let mut bounds = Vec::new();
    record(&session, &mut recorder, 0, &[tool("A")]);
    bounds.push(session.len());
    session.append_json(&assistant("a0")).unwrap();
    bounds.push(session.len());
    record(&session, &mut recorder, 1, &[tool("A"), tool("B")]);
    bounds.push(session.len());
    session.append_json(&assistant("a1")).unwrap();
    bounds.push(session.len());
    (session, bounds)
}

fn load_err(bytes: impl AsRef<[u8]>) -> LoadError {
    match Session::load_bytes(bytes.as_ref()) {
        Ok(l) => panic!("loaded {} events", l.session.len()),
        Err(e) => e,
    }
}

#[test]
fn multi_event_batches_are_framed_single_events_stay_plain() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let (session, bounds) = write_batches(&path);
    assert_eq!(bounds, [3, 4, 7, 8]);
    let text = fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines.len(),
        1 + 8 + 2,
        "the session line, 8 events, 2 frames"
    );
    assert_eq!(lines[1], r#"{"batch":3}"#);
    assert_eq!(lines[5], assistant("a0"), "a single append is a plain line");
    assert_eq!(lines[6], r#"{"batch":3}"#);
    assert_eq!(lines[10], assistant("a1"));
    // The in-memory rendering is the file, and loading it round-trips byte for byte.
    assert_eq!(session.to_jsonl(), text);
    let loaded = Session::load(&path).unwrap();
    assert_eq!((loaded.torn_tail, loaded.unterminated), (None, false));
    assert_eq!(loaded.session.events(), session.events());
    assert_eq!(loaded.session.to_jsonl(), text);
    let copy = dir.path().join("copy.jsonl");
    loaded.session.save(&copy).unwrap();
    assert_eq!(fs::read_to_string(&copy).unwrap(), text);

    // A session without a file frames its batches the same way when saved.
    let mem = Session::new("s");
    let mut recorder = Recorder::attach(&mem);
    record(&mem, &mut recorder, 0, &[tool("A")]);
    mem.append_json(&assistant("a0")).unwrap();
    record(&mem, &mut recorder, 1, &[tool("A"), tool("B")]);
    mem.append_json(&assistant("a1")).unwrap();
    assert_eq!(mem.to_jsonl(), text);
}

#[test]
fn a_frame_line_is_neither_an_event_nor_appendable() {
    // What a reader without framing does with a frame line: refuse it, never read it as an
    // event (which would shift every later `Seq`).
    assert!(matches!(
        Event::from_json(r#"{"batch":3}"#),
        Err(DecodeError::MissingType)
    ));
    let session = Session::new("s");
    assert!(matches!(
        session.append_json(r#"{"batch":3}"#),
        Err(e) if matches!(e.kind(), AppendErrorKind::Decode { .. })
    ));
    // An event whose first key is `batch` is an event, not a frame.
    let line = r#"{"batch":2,"type":"note/x"}"#;
    session.append_json(line).unwrap();
    let text = LogBuilder::new("s").lines([line, line]).text();
    let loaded = Session::load_bytes(text.as_bytes()).unwrap();
    assert_eq!(loaded.session.len(), 2);
    assert_eq!(loaded.session.to_jsonl(), text);
}

/// Where each batch of `text` starts and ends (end past its `\n`), whether it is framed, and
/// its event lines' ends (past the content, before the `\n`).
struct Layout {
    session_end: usize,
    batches: Vec<BatchLayout>,
}

struct BatchLayout {
    start: usize,
    end: usize,
    /// Line number and length of the frame line.
    frame: Option<(usize, usize, u64)>,
    /// End of each event line's content.
    line_ends: Vec<usize>,
}

fn layout(text: &str, bounds: &[usize]) -> Layout {
    let mut lines = Vec::new();
    let mut at = 0;
    for l in text.split_inclusive('\n') {
        lines.push((at, l.trim_end_matches('\n').len()));
        at += l.len();
    }
    let session_end = lines[0].1 + 1;
    let mut batches = Vec::new();
    let mut next = 1;
    let mut prev = 0;
    for &b in bounds {
        let n = b - prev;
        let start = lines[next].0;
        let frame = (n > 1).then(|| {
            let f = (next + 1, lines[next].1, n as u64);
            next += 1;
            f
        });
        let line_ends = (next..next + n).map(|i| lines[i].0 + lines[i].1).collect();
        next += n;
        let end = lines.get(next).map_or(text.len(), |l| l.0);
        batches.push(BatchLayout {
            start,
            end,
            frame,
            line_ends,
        });
        prev = b;
    }
    Layout {
        session_end,
        batches,
    }
}

#[test]
fn every_cut_of_a_framed_file_keeps_whole_batches_only() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let (session, bounds) = write_batches(&path);
    let text = fs::read_to_string(&path).unwrap();
    let all = session.events().to_vec();
    let lay = layout(&text, &bounds);
    let mut torn_batches = 0;
    for cut in 0..=text.len() {
        let prefix = &text.as_bytes()[..cut];
        if cut < lay.session_end - 1 {
            assert!(
                matches!(load_err(prefix), LoadError::NoSessionLine),
                "{cut}"
            );
            continue;
        }
        let loaded = Session::load_bytes(prefix).unwrap_or_else(|e| panic!("cut {cut}: {e}"));
        // The batches the cut keeps: whole, or missing only their final `\n`.
        let kept = lay.batches.iter().take_while(|b| b.end - 1 <= cut).count();
        let len = if kept == 0 { 0 } else { bounds[kept - 1] };
        assert_eq!(loaded.session.len(), len, "cut {cut}");
        assert_eq!(loaded.session.events().to_vec(), all[..len], "cut {cut}");
        let kept_end = if kept == 0 {
            lay.session_end
        } else {
            lay.batches[kept - 1].end
        };
        let unterminated = cut + 1 == kept_end || cut + 1 == lay.session_end;
        assert_eq!(loaded.unterminated, unterminated, "cut {cut}");
        let expected_torn = if cut <= kept_end {
            None
        } else {
            let b = &lay.batches[kept];
            let batch = b.frame.and_then(|(line, frame_len, announced)| {
                let into = cut - b.start;
                if into <= 2 {
                    // `{` or `{"`: any line starts so.
                    None
                } else if into < frame_len {
                    Some((line, None, 0))
                } else {
                    Some((
                        line,
                        Some(announced),
                        b.line_ends.iter().filter(|e| **e <= cut).count(),
                    ))
                }
            });
            Some((kept_end as u64, (cut - kept_end) as u64, batch))
        };
        assert_eq!(torn(loaded.torn_tail), expected_torn, "cut {cut}");
        torn_batches += usize::from(expected_torn.is_some_and(|t| t.2.is_some()));
        // What was kept saves byte for byte.
        assert_eq!(
            loaded.session.to_jsonl(),
            &text[..cut.min(kept_end)],
            "cut {cut}"
        );
    }
    assert!(torn_batches > 100, "{torn_batches}");
}

#[test]
fn open_drops_an_incomplete_batch_whole_then_appends() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let (session, bounds) = write_batches(&path);
    drop(session);
    let text = fs::read_to_string(&path).unwrap();
    let lay = layout(&text, &bounds);
    // The second framed batch lost its last line: two of its three lines are whole.
    let b = &lay.batches[2];
    let cut = b.line_ends[1] + 1;
    fs::write(&path, &text[..cut]).unwrap();
    let loaded = Session::open(&path).unwrap();
    assert_eq!(
        torn(loaded.torn_tail),
        Some((
            b.start as u64,
            (cut - b.start) as u64,
            Some((7, Some(3), 2))
        ))
    );
    assert_eq!(fs::read_to_string(&path).unwrap(), &text[..b.start]);
    let s = loaded.session;
    assert_eq!(s.len(), bounds[1]);
    // The next batch goes where the dropped one was; the file loads clean.
    let mut recorder = Recorder::attach(&s);
    record(&s, &mut recorder, 1, &[tool("A"), tool("B")]);
    let again = Session::load(&path).unwrap();
    assert_eq!(again.torn_tail, None);
    assert_eq!(again.session.events(), s.events());
    assert_eq!(fs::read_to_string(&path).unwrap(), s.to_jsonl());
}

#[test]
fn a_frame_announcing_more_lines_than_the_file_holds_is_torn() {
    let base = LogBuilder::new("s").line(user("u1"));
    let prefix = base.text();
    for (tail, announced, dropped) in [
        (
            format!("{{\"batch\":5}}\n{}\n{}\n", user("u2"), user("u3")),
            5,
            2,
        ),
        // The frame's own line, whole but without its `\n`.
        ("{\"batch\":2}".to_owned(), 2, 0),
        ("{\"batch\":2}\n".to_owned(), 2, 0),
    ] {
        let text = format!("{prefix}{tail}");
        let loaded = Session::load_bytes(text.as_bytes()).unwrap();
        assert_eq!(loaded.session.len(), 1, "{tail}");
        assert_eq!(
            torn(loaded.torn_tail),
            Some((
                prefix.len() as u64,
                tail.len() as u64,
                Some((3, Some(announced), dropped))
            )),
            "{tail}"
        );
        assert!(!loaded.unterminated);
        assert_eq!(loaded.session.to_jsonl(), prefix);
    }
    // The frame's own line cut in half.
    for tail in ["{\"bat", "{\"batch\":1", "{\"batch\":12"] {
        let text = format!("{prefix}{tail}");
        let loaded = Session::load_bytes(text.as_bytes()).unwrap();
        assert_eq!(loaded.session.len(), 1);
        assert_eq!(
            torn(loaded.torn_tail),
            Some((prefix.len() as u64, tail.len() as u64, Some((3, None, 0)))),
            "{tail}"
        );
    }
    // A complete batch that lacks only its final `\n` is kept, unterminated.
    let text = format!("{prefix}{{\"batch\":2}}\n{}\n{}", user("u2"), user("u3"));
    let loaded = Session::load_bytes(text.as_bytes()).unwrap();
    assert_eq!((loaded.session.len(), loaded.torn_tail), (3, None));
    assert!(loaded.unterminated);
    assert_eq!(loaded.session.to_jsonl(), text);
}

#[test]
fn corrupt_frames_in_the_middle_are_errors_naming_the_line() {
    let after = [user("u2"), user("u3"), user("u4")];
    for (frame, fault) in [
        (r#"{"batch":0}"#, FrameFault::Count),
        (r#"{"batch":-1}"#, FrameFault::Count),
        (r#"{"batch":1.5}"#, FrameFault::Count),
        (r#"{"batch":"2"}"#, FrameFault::Count),
        (r#"{"batch":null}"#, FrameFault::Count),
        (r#"{"batch":2,"x":1}"#, FrameFault::Keys),
        (r#"{"batch":2,"batch":2}"#, FrameFault::Keys),
    ] {
        let text = LogBuilder::new("s")
            .line(user("u1"))
            .line(frame)
            .lines(after.clone())
            .text();
        match load_err(&text) {
            LoadError::BadFrame { line: 3, fault: f } => assert_eq!(f, fault, "{frame}"),
            other => panic!("{frame}: {other:?}"),
        }
        assert!(load_err(&text).to_string().contains("line 3"));
        // Also as the last line, `\n`-terminated.
        let text = LogBuilder::new("s").line(user("u1")).line(frame).text();
        assert!(
            matches!(load_err(&text), LoadError::BadFrame { line: 3, .. }),
            "{frame}"
        );
    }
    for frame in [r#"{"batch":2"#, r#"{"batch":2}x"#, r#"{"batch":2]"#] {
        let text = LogBuilder::new("s").line(frame).lines(after.clone()).text();
        assert!(
            matches!(
                load_err(&text),
                LoadError::BadFrame {
                    line: 2,
                    fault: FrameFault::Malformed(_)
                }
            ),
            "{frame}"
        );
    }
    // A frame inside another's batch.
    let text = LogBuilder::new("s")
        .lines([
            r#"{"batch":3}"#.to_owned(),
            user("u1"),
            r#"{"batch":2}"#.to_owned(),
        ])
        .lines(after.clone())
        .text();
    assert!(matches!(
        load_err(&text),
        LoadError::BadFrame {
            line: 4,
            fault: FrameFault::Nested { outer: 2 }
        }
    ));
    // A `\n`-terminated event line of a batch that does not parse names its line and `Seq`
    // (frame lines take no `Seq`).
    let text = LogBuilder::new("s")
        .lines([
            r#"{"batch":2}"#.to_owned(),
            user("u1"),
            user("u2"),
            r#"{"batch":2}"#.to_owned(),
            user("u3"),
            r#"{"type":"user/message","data":"#.to_owned(),
        ])
        .text();
    match load_err(&text) {
        LoadError::Event { line: 7, source } => assert_eq!(source.seq(), Seq(3)),
        other => panic!("{other:?}"),
    }
    // A frame announcing one line is well-formed, though the crate writes none.
    let text = LogBuilder::new("s")
        .lines([r#"{"batch":1}"#.to_owned(), user("u1"), user("u2")])
        .text();
    let loaded = Session::load_bytes(text.as_bytes()).unwrap();
    assert_eq!(loaded.session.len(), 2);
    assert_eq!(loaded.session.to_jsonl(), text);
}

#[test]
fn loaded_frames_keep_their_bytes() {
    let text = LogBuilder::new("s")
        .lines([
            "  { \"batch\" : 2 }\t".to_owned(),
            user("u1"),
            user("u2"),
            user("u3"),
        ])
        .text();
    let loaded = Session::load_bytes(text.as_bytes()).unwrap();
    assert_eq!(loaded.session.len(), 3);
    assert_eq!(loaded.session.to_jsonl(), text);
}

#[test]
fn a_fork_keeps_the_frames_of_the_batches_it_inherits_whole() {
    let dir = tempfile::tempdir().unwrap();
    let (parent, bounds) = write_batches(&dir.path().join("p.jsonl"));
    let text = parent.to_jsonl();
    let lay = layout(&text, &bounds);
    // At a batch boundary, the inherited part is a byte copy of the parent's file.
    let f = Session::fork(&parent, bounds[2] as u64, "f").unwrap();
    let own = f.to_jsonl();
    let (_, inherited) = own.split_once('\n').unwrap();
    let (_, parent_events) = text.split_once('\n').unwrap();
    assert_eq!(
        inherited,
        &parent_events[..lay.batches[2].end - lay.session_end]
    );
    // Inside a batch, that batch's frame is left out: the fork's file has no torn batch.
    let f = Session::fork(&parent, 5, "f").unwrap();
    let loaded = Session::load_bytes(f.to_jsonl().as_bytes()).unwrap();
    assert_eq!(loaded.torn_tail, None);
    assert_eq!(loaded.session.events(), f.events());
    assert_eq!(loaded.session.to_jsonl(), f.to_jsonl());
    assert_eq!(f.to_jsonl().matches("{\"batch\":").count(), 1);
}

#[test]
fn a_second_session_line_is_refused() {
    let a = LogBuilder::new("a").lines([user("u1"), user("u2")]).text();
    let b = LogBuilder::new("b").line(user("u3")).text();
    // `cat a.jsonl b.jsonl`
    match load_err(format!("{a}{b}")) {
        LoadError::SecondSessionLine { line: 4 } => {}
        other => panic!("{other:?}"),
    }
    // Unterminated at the end, it is whole, not torn.
    assert!(matches!(
        load_err(format!("{a}{}", session_line("b"))),
        LoadError::SecondSessionLine { line: 4 }
    ));
    // Inside a batch.
    let text = LogBuilder::new("a")
        .lines([r#"{"batch":2}"#.to_owned(), user("u1"), session_line("b")])
        .text();
    assert!(matches!(
        load_err(text),
        LoadError::SecondSessionLine { line: 4 }
    ));
    // Appending one is refused, so that no file the crate writes holds one.
    let s = Session::new("s");
    assert!(matches!(
        s.append_json(&session_line("b")),
        Err(e) if e.seq() == Seq(0)
            && matches!(e.kind(), AppendErrorKind::OpaqueKnownType { event_type } if event_type == "session")
    ));
    assert_eq!(s.len(), 0);
}

#[test]
fn a_fork_upto_beyond_the_file_is_refused() {
    let line = |upto: u64| {
        format!(r#"{{"type":"session","version":0,"id":"f","parent":{{"id":"p","upto":{upto}}}}}"#)
    };
    let events = [user("u1"), user("u2")];
    for upto in [0, 1, 2] {
        let text = LogBuilder::with_session_line(line(upto))
            .lines(events.clone())
            .text();
        let loaded = Session::load_bytes(text.as_bytes()).unwrap();
        assert_eq!(loaded.session.parent().unwrap().upto, upto);
    }
    let text = LogBuilder::with_session_line(line(3))
        .lines(events.clone())
        .text();
    match load_err(&text) {
        LoadError::UptoBeyondFile { upto: 3, len: 2 } => {}
        other => panic!("{other:?}"),
    }
    assert!(load_err(&text).to_string().contains("line 1"));
    // Events of a torn tail are not in the file.
    let text = format!(
        "{}{}",
        LogBuilder::with_session_line(line(2))
            .line(user("u1"))
            .text(),
        &user("u2")[..10]
    );
    assert!(matches!(
        load_err(&text),
        LoadError::UptoBeyondFile { upto: 2, len: 1 }
    ));
}

#[test]
fn a_second_writer_is_refused_until_the_first_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let first = Session::create(&path, "s").unwrap();
    first.append_json(&user("u1")).unwrap();
    match Session::open(&path) {
        Err(LoadError::Locked { path: p }) => assert_eq!(p, path),
        other => panic!("{other:?}"),
    }
    assert!(
        Session::open(&path)
            .unwrap_err()
            .to_string()
            .contains("open for writing by another session")
    );
    // Readers are not writers.
    assert_eq!(Session::load(&path).unwrap().session.len(), 1);
    // `save` of another session over the file is refused and leaves it alone.
    let before = fs::read(&path).unwrap();
    let other = Session::new("o");
    assert!(matches!(
        other.save(&path),
        Err(PersistError::Locked { .. })
    ));
    assert_eq!(fs::read(&path).unwrap(), before);
    drop(first);
    let second = Session::open(&path).unwrap().session;
    assert!(matches!(
        Session::open(&path),
        Err(LoadError::Locked { .. })
    ));
    second.append_json(&user("u2")).unwrap();
    drop(second);
    other.save(&path).unwrap();
    assert_eq!(Session::load(&path).unwrap().session.id(), "o");
}

#[test]
fn a_file_changed_behind_the_writers_back_refuses_the_batch_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let s = Session::create(&path, "s").unwrap();
    let mut recorder = Recorder::attach(&s);
    record(&s, &mut recorder, 0, &[tool("A")]);
    let ours = fs::read(&path).unwrap();
    let (events, messages) = (s.events(), s.messages());

    // Someone appends a line.
    let foreign = format!("{}\n", user("x"));
    fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap()
        .write_all(foreign.as_bytes())
        .unwrap();
    let err = s.append_json(&user("u9")).unwrap_err();
    match err.kind() {
        AppendErrorKind::Write {
            source: WriteError::LengthChanged { expected, found },
        } => {
            assert_eq!(err.seq(), Seq(3));
            assert_eq!(*expected, ours.len() as u64);
            assert_eq!(*found, (ours.len() + foreign.len()) as u64);
        }
        other => panic!("{other:?}"),
    }
    assert!(
        err.to_string().contains("event 3"),
        "{err}: the batch names its first event"
    );
    // A recorder batch is refused the same way.
    let config = Config::new("p", "m");
    let refused = recorder.record(
        &s,
        Step::new(&config, "P", &[tool("A"), tool("B")], &route())
            .at(1, 0, 0)
            .user_messages(&[Message::user("u1", "hi")]),
    );
    assert!(
        matches!(
            refused,
            Err(RecordError::Append(ref e)) if matches!(e.kind(), AppendErrorKind::Write {
                source: WriteError::LengthChanged { .. },
            })
        ),
        "{refused:?}"
    );
    // Nothing of ours was written, nothing of theirs cut; the session is unchanged.
    assert_eq!(
        fs::read(&path).unwrap(),
        [&ours[..], foreign.as_bytes()].concat()
    );
    assert_eq!(s.events(), events);
    assert_eq!(s.messages(), messages);

    // Cut behind its back: refused too.
    fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(10)
        .unwrap();
    assert!(matches!(
        s.append_json(&user("u9")),
        Err(e) if matches!(e.kind(), AppendErrorKind::Write {
            source: WriteError::LengthChanged { found: 10, .. },
        })
    ));
    // Once the file is the writer's own again, batches go on.
    fs::write(&path, &ours).unwrap();
    assert_eq!(s.append_json(&user("u9")).unwrap(), Seq(3));
    drop(s);
    assert_eq!(Session::load(&path).unwrap().session.len(), 4);
}

#[test]
fn line_length_limit() {
    let u1 = user("u1");
    let text = LogBuilder::new("s")
        .lines([r#"{"batch":2}"#.to_owned(), u1.clone(), user("u2")])
        .text();
    let longest = text.lines().map(str::len).max().unwrap();
    assert_eq!(
        FileOptions::new()
            .max_line_bytes(longest)
            .load_bytes(text.as_bytes())
            .unwrap()
            .session
            .len(),
        2
    );
    match FileOptions::new()
        .max_line_bytes(u1.len() - 1)
        .load_bytes(text.as_bytes())
    {
        Err(LoadError::LineTooLong { line: 3, len, max }) => {
            assert_eq!((len, max), (u1.len(), u1.len() - 1));
        }
        other => panic!("{other:?}"),
    }
    // The session line and frame lines count.
    assert!(matches!(
        FileOptions::new()
            .max_line_bytes(10)
            .load_bytes(text.as_bytes()),
        Err(LoadError::LineTooLong { line: 1, .. })
    ));
    let frame_only = FileOptions::new().max_line_bytes(session_line("s").len());
    assert!(matches!(
        frame_only
            .load_bytes(format!("{}\n{{\"batch\":2}}   {:40}\n", session_line("s"), "").as_bytes()),
        Err(LoadError::LineTooLong { line: 2, .. })
    ));
    // Checked before parsing: a torn last line beyond the limit is refused, not dropped.
    let torn = format!("{}{}", LogBuilder::new("s").text(), &u1[..u1.len() - 1]);
    assert!(
        Session::load_bytes(torn.as_bytes())
            .unwrap()
            .torn_tail
            .is_some()
    );
    assert!(matches!(
        FileOptions::new()
            .max_line_bytes(u1.len() - 2)
            .load_bytes(torn.as_bytes()),
        Err(LoadError::LineTooLong { line: 2, .. })
    ));
    // `open` applies it, and refuses before repairing anything.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("torn.jsonl");
    fs::write(&path, &torn).unwrap();
    assert!(matches!(
        FileOptions::new().max_line_bytes(u1.len() - 2).open(&path),
        Err(LoadError::LineTooLong { line: 2, .. })
    ));
    assert_eq!(fs::read_to_string(&path).unwrap(), torn);
}

#[test]
fn event_count_limit() {
    let text = LogBuilder::new("s")
        .lines([
            user("u1"),
            r#"{"batch":2}"#.to_owned(),
            user("u2"),
            user("u3"),
            user("u4"),
        ])
        .text();
    let opts = |max| FileOptions::new().max_events(max);
    assert_eq!(
        opts(4).load_bytes(text.as_bytes()).unwrap().session.len(),
        4
    );
    // Beyond the limit: the line of the first event past it (frame lines counted as lines).
    for (max, line) in [(3, 6), (2, 5), (1, 4), (0, 2)] {
        match opts(max).load_bytes(text.as_bytes()) {
            Err(LoadError::TooManyEvents { line: l, max: m }) => {
                assert_eq!((l, m), (line, max), "max {max}");
            }
            other => panic!("max {max}: {other:?}"),
        }
    }
    // A torn line or batch is dropped, not counted.
    let torn = format!("{}{}", text, &user("u5")[..20]);
    let loaded = opts(4).load_bytes(torn.as_bytes()).unwrap();
    assert_eq!(
        (loaded.session.len(), loaded.torn_tail.is_some()),
        (4, true)
    );
    let torn = format!("{text}{{\"batch\":3}}\n{}\n{}\n", user("u5"), user("u6"));
    let loaded = opts(4).load_bytes(torn.as_bytes()).unwrap();
    assert_eq!(loaded.session.len(), 4);
    assert_eq!(loaded.torn_tail.unwrap().batch.unwrap().dropped_events, 2);
    // A kept unterminated last line counts.
    let unterminated = format!("{text}{}", user("u5"));
    assert!(matches!(
        opts(4).load_bytes(unterminated.as_bytes()),
        Err(LoadError::TooManyEvents { line: 7, max: 4 })
    ));
    // The limit counts inherited events too: a fork's file holds them.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    fs::write(&path, &text).unwrap();
    assert!(matches!(
        opts(3).load(&path),
        Err(LoadError::TooManyEvents { line: 6, max: 3 })
    ));
    assert!(matches!(
        opts(3).open(&path),
        Err(LoadError::TooManyEvents { .. })
    ));
}

#[test]
fn sync_option_reaches_the_writer() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let s = FileOptions::new().sync(true).create(&path, "s").unwrap();
    assert!(format!("{s:?}").contains("sync: true"), "{s:?}");
    s.append_json(&user("u1")).unwrap();
    drop(s);
    let s = FileOptions::new().sync(true).open(&path).unwrap().session;
    assert!(format!("{s:?}").contains("sync: true"), "{s:?}");
    drop(s);
    let s = Session::open(&path).unwrap().session;
    assert!(format!("{s:?}").contains("sync: false"), "{s:?}");
    assert_eq!(s.len(), 1);
}

/// A framed log to mutate: a framed batch, a plain line, a second framed batch.
const FRAMED: &str = concat!(
    r#"{"type":"session","version":0,"id":"s"}"#,
    "\n",
    r#"{"batch":3}"#,
    "\n",
    r#"{"type":"system/message","data":{"message":{"id":"p","role":"system","content":[{"type":"text","text":"P"}],"source":{"kind":"system-prompt"}}},"surfaceOp":"append"}"#,
    "\n",
    r#"{"type":"user/message","data":{"message":{"id":"u","role":"user","content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}}},"surfaceOp":"append"}"#,
    "\n",
    r#"{"type":"request/header","data":{"header":{"config":{"provider":"p","model":"m"},"tools":[{"name":"a","description":"d","parameters":{}}]},"reason":"initial"}}"#,
    "\n",
    r#"{"type":"plugin/x","data":{},"surfaceOp":"append"}"#,
    "\n",
    r#"{"batch":2}"#,
    "\n",
    r#"{"type":"user/message","data":{"message":{"id":"u2","role":"user","content":[],"source":{"kind":"user"}}},"surfaceOp":"append"}"#,
    "\n",
    r#"{"type":"request/header","data":{"header":{"config":{"provider":"p","model":"m"},"tools":[]},"reason":"change"}}"#,
    "\n",
);

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]

    /// Any mutation of a framed file loads (whatever loads round-trips byte for byte up to its
    /// torn tail, and loads again to the same events) or is a typed error; with limits too.
    #[test]
    fn mutated_framed_logs_load_or_are_typed_errors(
        edits in proptest::collection::vec(
            (0usize..FRAMED.len(), proptest::prelude::any::<u8>(), 0u8..4),
            1..6,
        ),
        max_line in 0usize..300,
        max_events in 0usize..8,
    ) {
        let mut bytes = FRAMED.as_bytes().to_vec();
        for (at, byte, kind) in edits {
            if bytes.is_empty() {
                break;
            }
            let at = at.min(bytes.len() - 1);
            match kind {
                0 => bytes[at] = byte,
                1 => bytes.truncate(at),
                2 => bytes.insert(at, byte),
                _ => bytes.insert(at, b"\n{}"[usize::from(byte) % 3]),
            }
        }
        if let Ok(loaded) = Session::load_bytes(&bytes) {
            let kept = loaded.torn_tail.map_or(bytes.len(), |t| t.offset as usize);
            let saved = loaded.session.to_jsonl();
            proptest::prop_assert_eq!(saved.as_bytes(), &bytes[..kept]);
            let again = Session::load_bytes(&bytes[..kept]).unwrap();
            proptest::prop_assert_eq!(again.session.events(), loaded.session.events());
            proptest::prop_assert_eq!(again.torn_tail, None);
            let _ = loaded.session.tool_history();
        }
        let _ = FileOptions::new()
            .max_line_bytes(max_line)
            .max_events(max_events)
            .load_bytes(&bytes);
    }
}

/// Issue 20 item 13: tool-call arguments the Messages API cannot take as they are (what a
/// model wrote) never stop the session: appended, then loaded from the log file, every later
/// request serializes, with the call sent as `{"invalid_arguments":"<the text>"}`.
#[test]
fn faulty_call_arguments_never_stop_a_session() {
    use mektpoy::{AgentLoop, ContentBlock, route_for, vocab::MessageSource, vocab::Role};
    let config = || {
        Config::new("anthropic", "claude-opus-5")
            .with("max_tokens", 256.into())
            .unwrap()
    };
    let messages_route = || route_for("anthropic", "claude-opus-5");
    let read = ToolSchema::new(
        "read",
        "Read a file",
        serde_json::from_value(serde_json::json!({"type": "object"})).unwrap(),
    );
    for arguments in [
        r#"{"path":"a","path":"b"}"#,
        r#"{"path":"#,
        r#"{"path":"\ud800"}"#,
        r#"{"n":1e400}"#,
        r#"["a.rs"]"#,
    ] {
        let fault = mektpoy::wire::arguments_fault(arguments);
        assert!(fault.is_some(), "{arguments}");
        let expect = format!(
            r#""input":{{"invalid_arguments":{}}}"#,
            serde_json::to_string(arguments).unwrap()
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let session = Session::create(&path, "s").unwrap();
        let mut agent = AgentLoop::builder(&session, messages_route())
            .config(config())
            .system_prompt("Be brief.")
            .tools([read.clone()])
            .build()
            .unwrap();
        agent.user_turn([Message::user("u1", "read a.rs")]).unwrap();
        agent
            .append(Message::new(
                "a1",
                Role::Assistant,
                vec![ContentBlock::tool_call("c1", "read", arguments).unwrap()],
                MessageSource::Model {
                    provider: "anthropic".into(),
                    model: "claude-opus-5".into(),
                },
            ))
            .unwrap();
        agent
            .append(Message::tool_result("t1", "c1", "error: invalid arguments"))
            .unwrap();
        let first = agent.next_step().unwrap().to_wire().unwrap();
        assert!(
            first.body().contains(&expect),
            "{arguments}: {}",
            first.body()
        );
        agent
            .append(Message::assistant(
                "a2",
                "done",
                "anthropic",
                "claude-opus-5",
            ))
            .unwrap();
        let second = agent
            .user_turn([Message::user("u2", "again")])
            .unwrap()
            .to_wire()
            .unwrap();
        assert!(second.body().contains(&expect), "{arguments}");
        drop(agent);
        drop(session);
        // The log file holds the call as the model wrote it; loading keeps it and the next
        // request sends the same bytes for it.
        let loaded = Session::open(&path).unwrap().session;
        let mut agent = AgentLoop::builder(&loaded, messages_route())
            .config(config())
            .system_prompt("Be brief.")
            .tools([read.clone()])
            .build()
            .unwrap();
        let reopened = agent
            .user_turn([Message::user("u3", "once more")])
            .unwrap()
            .to_wire()
            .unwrap();
        assert!(reopened.body().contains(&expect), "{arguments}");
        assert!(
            reopened
                .body()
                .starts_with(&second.body()[..second.body().find(&expect).unwrap()]),
            "the call's bytes are the same on every request"
        );
    }
}

/// A store that is not a file: batches in memory, reporting its length as a database table of
/// batches would.
#[derive(Clone, Default)]
struct MemoryStore(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl mektpoy::store::JsonlSink for MemoryStore {
    fn append(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(())
    }
    fn truncate(&mut self, len: u64) -> std::io::Result<()> {
        self.0.lock().unwrap().truncate(len as usize);
        Ok(())
    }
    fn sync(&mut self) -> std::io::Result<()> {
        Ok(())
    }
    fn current_len(&mut self) -> std::io::Result<Option<u64>> {
        Ok(Some(self.0.lock().unwrap().len() as u64))
    }
}

/// `create_in` / `open_in`: a store holds byte for byte what the file would; reopening cuts a
/// torn tail through the store; a second writer's batch makes the first one refuse to write.
#[test]
fn a_session_persists_to_a_store_with_the_files_guarantees() {
    use mektpoy::session::FileOptions;
    use mektpoy::store::WriteError;

    let store = MemoryStore::default();
    let session = FileOptions::new().create_in(store.clone(), "s").unwrap();
    session
        .append(Event::append(Message::user("u1", "hi")))
        .unwrap();
    let whole = store.0.lock().unwrap().clone();
    assert_eq!(whole, session.to_jsonl().into_bytes());
    drop(session);

    // A batch cut short by a killed writer.
    store.0.lock().unwrap().extend_from_slice(b"{\"type\":\"us");
    let torn = store.0.lock().unwrap().clone();
    let loaded = FileOptions::new().open_in(&torn, store.clone()).unwrap();
    assert!(loaded.torn_tail.is_some());
    assert_eq!(
        *store.0.lock().unwrap(),
        whole,
        "the torn tail is cut in the store"
    );
    let first = loaded.session;
    first
        .append(Event::append(Message::user("u2", "again")))
        .unwrap();

    // Another writer took the store over and wrote: the first is refused, typed, and changes
    // nothing.
    let bytes = store.0.lock().unwrap().clone();
    let second = FileOptions::new()
        .open_in(&bytes, store.clone())
        .unwrap()
        .session;
    second
        .append(Event::append(Message::user("u3", "mine")))
        .unwrap();
    let before = store.0.lock().unwrap().clone();
    let err = first
        .append(Event::append(Message::user("u4", "stale")))
        .unwrap_err();
    assert!(
        matches!(
            std::error::Error::source(&err).and_then(|e| e.downcast_ref::<WriteError>()),
            Some(WriteError::LengthChanged { .. })
        ),
        "{err:?}"
    );
    assert_eq!(*store.0.lock().unwrap(), before);
    assert_eq!(
        first.messages().len(),
        2,
        "the refused batch is not committed"
    );
}
