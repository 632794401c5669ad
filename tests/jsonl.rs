//! reference §2 files: byte-identical round trips, torn and unterminated tails, load errors,
//! `open`'s repair, `create`, and failed writes through an injected sink.

mod support;

use std::fs::{self, File};
use std::io::{self, Seek, SeekFrom, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};

use mektpoy::{
    Config, Event, Message, Session,
    event::{DecodeError, Reason, RequestHeader},
    session::{AppendErrorKind, FileOptions, LoadError},
    store::{JsonlSink, PersistError, WriteError},
    vocab::{Seq, json_equivalent},
};
use serde_json::json;
use support::*;

/// A file with every event type, unknown events (with and without `surfaceOp`, append and
/// replace), unknown blocks and fields at every level, odd whitespace, key orders, number
/// spellings and string escapes.
const ODD_LINES: [&str; 14] = [
    r#"{ "type" : "request/header",	"data":{"header":{"config":{"provider":"p","model":"m","max_tokens":1E5,"temperature":-0,"top_p":1.50},"tools":[{"name":"read","title":"Read","description":"read a file \/ dir","parameters":{"type":"object","properties":{"n":{"maximum":1.0e2}}},"annotations":{"readOnlyHint":true}},{"name":"bash","description":"run\n","parameters":{},"deferLoading":true,"x":null}],"x-trace":"abc"},"reason":"initial","startsSeries":true,"note":"d"},"ts":1E5}"#,
    r#"{"type":"system/message","data":{"turn":0,"message":{"id":"s0","role":"system","content":[{"type":"text","text":"You are h\u00e9lpful"}],"source":{"kind":"system-prompt"}}},"surfaceOp":"append"}"#,
    r#"{ "surfaceOp" : "append", "data" : { "message" : { "content" : [ {"type":"image","url":"http:\/\/x","size":1.0e2}, {"type":"text","text":"line\nnext \"q\" \u00e9\ud83d\ude00"} ], "source":{"kind":"user","via":"cli"}, "id":"u1", "role":"user", "meta":{"lang":"fr"} }, "turn":1, "step":0 }, "type":"user/message" }"#,
    r#"{"type":"assistant/message","data":{"turn":1,"message":{"id":"a1","role":"assistant","content":[{"type":"reasoning","text":"hm","signature":"c2ln"},{"type":"tool-call","id":"c1","name":"read","arguments":"{\"n\": 1.0}","extra":1}],"source":{"kind":"model","provider":"p","model":"m"}}},"surfaceOp":"append"}"#,
    r#"{"type":"tool/result","data":{"message":{"id":"t1","role":"tool","content":[{"type":"text","text":"ok"}],"source":{"kind":"tool","callId":"c1"},"isError":false}},"surfaceOp":"append"}"#,
    r#"{"type":"request/header","data":{"header":{"config":{"model":"m","provider":"p","max_tokens":100000.0},"tools":[{"name":"read","description":"read a file / dir","parameters":{"properties":{"n":{"maximum":100}},"type":"object"},"title":"Read","annotations":{"readOnlyHint":true}},{"name":"bash","description":"run\n","parameters":{},"deferLoading":true,"x":null},{"name":"grep","description":"grep","parameters":{}}]},"reason":"change"}}"#,
    r#"{"type":"developer/message","data":{"message":{"id":"d1","role":"developer","content":[{"type":"tool-addition","toolName":"grep"},{"type":"tool-removal","toolName":"bash"},{"type":"text","text":""}],"source":{"kind":"tool-registry"}},"headerSeq":5},"surfaceOp":"append"}"#,
    r#"{"type":"compaction/marker","data":{"b":2,"a":1},"surfaceOp":"append","z":[1.0,-0]}"#,
    r#"{"type":"plugin/state","payload":{"k":"v\u0000"}}"#,
    r#"{"type":"user/message","data":{"message":{"id":"sum","role":"user","content":[{"type":"text","text":"summary"}],"source":{"kind":"compaction","of":[0,1]}}},"surfaceOp":{"op":"replace","start":0,"end":1}}"#,
    r#"{"type":"note/y","surfaceOp":{"end":4,"op":"replace","start":4}}"#,
    r#"{"type":"user/message","data":{"message":{"id":"log","role":"user","content":[],"source":{"kind":"user"}}}}"#,
    "   {\"type\":\"request/header\",\"data\":{\"header\":{\"config\":{\"provider\":\"p\",\"model\":\"m\"},\"tools\":[]},\"reason\":\"series\",\"startsSeries\":false}}  \t\r",
    r#"{"type":"assistant/message","data":{"message":{"id":"a2","role":"assistant","content":[{"type":"text","text":"done"}],"source":{"kind":"model","provider":"p","model":"m"}}},"surfaceOp":"append"}"#,
];

const ODD_SESSION_LINE: &str =
    r#"{ "type" : "session", "version":0 , "id":"s\u00e9", "app": {"v": 1.50} }"#;

fn odd_log() -> LogBuilder {
    LogBuilder::with_session_line(ODD_SESSION_LINE).lines(ODD_LINES)
}

/// `save` to a fresh file and read the bytes back.
fn saved_bytes(session: &Session) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("saved.jsonl");
    session.save(&path).unwrap();
    fs::read(&path).unwrap()
}

#[test]
fn odd_file_round_trips_byte_for_byte() {
    let text = odd_log().text();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("odd.jsonl");
    fs::write(&path, &text).unwrap();
    let loaded = Session::load(&path).unwrap();
    assert_eq!(loaded.torn_tail, None);
    assert!(!loaded.unterminated);
    let s = loaded.session;
    assert_eq!(s.to_jsonl(), text);
    assert_eq!(saved_bytes(&s), text.as_bytes());
    // Saving over the loaded file and loading again changes nothing.
    s.save(&path).unwrap();
    assert_eq!(fs::read(&path).unwrap(), text.as_bytes());
    assert_eq!(Session::load(&path).unwrap().session.to_jsonl(), text);

    // What was read is the data, not just bytes passed through.
    assert_eq!(s.id(), "sé");
    assert_eq!(s.len(), ODD_LINES.len());
    let ids: Vec<_> = s.messages().iter().map(|m| m.id().to_owned()).collect();
    assert_eq!(ids, ["sum", "a1", "t1", "d1", "a2"]);
    assert_eq!(s.surface().len(), 6, "sum, a1, t1, d1, note/y, a2");
    assert_eq!(s.surface_generation(), 2);
    let events = s.events();
    let Event::Message(u1) = &events[2] else {
        panic!("line 3 is a message")
    };
    assert_eq!(u1.message.text(), "line\nnext \"q\" é😀");
    assert_eq!(
        u1.message.content().len(),
        2,
        "the unknown block is kept in place"
    );
    let Event::Header(h0) = &events[0] else {
        panic!("line 1 is a header")
    };
    assert_eq!(h0.header.tools[0].description(), "read a file / dir");
    assert_eq!(h0.header.tools[0].extra().len(), 2, "title, annotations");
    assert!(json_equivalent(
        &h0.header.config.extra()["max_tokens"],
        &json!(100000)
    ));
    // Header 5 repeats header 0's first two tools in another key order and spelling.
    let Event::Header(h5) = &events[5] else {
        panic!("line 6 is a header")
    };
    assert_eq!(h5.header.tools[..2], h0.header.tools[..]);
    assert_eq!(
        h5.header.config,
        Config::new("p", "m")
            .with("max_tokens", json!(100000))
            .unwrap()
    );
}

#[test]
fn unterminated_valid_last_line_is_kept_and_saved_without_newline() {
    let full = odd_log().text();
    let text = full.strip_suffix('\n').unwrap();
    let loaded = Session::load_bytes(text.as_bytes()).unwrap();
    assert!(loaded.unterminated);
    assert_eq!(loaded.torn_tail, None);
    assert_eq!(loaded.session.len(), ODD_LINES.len());
    assert_eq!(loaded.session.to_jsonl(), text);
    assert_eq!(saved_bytes(&loaded.session), text.as_bytes());

    // A file that is only an unterminated session line.
    let only = session_line("s");
    let loaded = Session::load_bytes(only.as_bytes()).unwrap();
    assert!(loaded.unterminated);
    assert_eq!(loaded.session.len(), 0);
    assert_eq!(loaded.session.to_jsonl(), only);
}

#[test]
fn appending_after_load_writes_loaded_lines_verbatim_then_compact_lines() {
    let full = odd_log().text();
    for text in [full.as_str(), full.strip_suffix('\n').unwrap()] {
        let s = Session::load_bytes(text.as_bytes()).unwrap().session;
        s.append(Event::append(Message::user("new-1", "text of new-1")))
            .unwrap();
        s.append(Event::header(
            RequestHeader::new(Config::new("p", "m"), vec![tool("A")]),
            Reason::Change,
        ))
        .unwrap();
        let expected = format!(
            "{}\n{}\n{}\n",
            full.trim_end_matches('\n'),
            user("new-1"),
            header(&["A"], "change")
        );
        assert_eq!(s.to_jsonl(), expected);
        assert_eq!(saved_bytes(&s), expected.as_bytes());
    }
}

#[test]
fn new_session_saves_session_line_and_compact_lines() {
    let s = Session::new("s1");
    s.append(Event::append(Message::user("u1", "text of u1")))
        .unwrap();
    let expected = LogBuilder::new("s1").line(user("u1")).text();
    assert_eq!(s.to_jsonl(), expected);
    assert_eq!(saved_bytes(&s), expected.as_bytes());
    assert_eq!(
        Session::new("empty").to_jsonl(),
        session_line("empty") + "\n"
    );
}

#[test]
fn torn_last_line_is_dropped_and_reported() {
    let log = LogBuilder::new("s").lines([header(&["A"], "initial"), user("u1")]);
    let prefix = log.text();
    let last = dev("d1", &["-A", "a note"], Some(0));
    let whole = log.clone().line(last.clone()).session("s");
    assert_eq!(whole.len(), 3);
    // Cut anywhere inside the last line.
    for cut in 1..last.len() {
        let text = format!("{prefix}{}", &last[..cut]);
        let loaded = Session::load_bytes(text.as_bytes()).unwrap();
        assert_eq!(
            torn(loaded.torn_tail),
            Some((prefix.len() as u64, cut as u64, None)),
            "cut at {cut}"
        );
        assert!(!loaded.unterminated);
        let s = loaded.session;
        assert_eq!(s.len(), 2, "cut at {cut}");
        assert_eq!(s.events(), log.session("s").events());
        // Saving drops the torn bytes.
        assert_eq!(s.to_jsonl(), prefix);
    }
    // A torn tail right after the session line.
    let text = format!("{}\n{{\"type\":\"us", session_line("s"));
    let loaded = Session::load_bytes(text.as_bytes()).unwrap();
    assert_eq!(loaded.session.len(), 0);
    assert_eq!(
        loaded.torn_tail.map(|t| (t.offset, t.len)),
        Some((session_line("s").len() as u64 + 1, 11))
    );
    // A last line that parses but does not validate is torn too (a duplicate id).
    let text = format!("{prefix}{}", user("u1"));
    let loaded = Session::load_bytes(text.as_bytes()).unwrap();
    assert_eq!(loaded.session.len(), 2);
    assert!(loaded.torn_tail.is_some());
}

fn load_err(text: impl AsRef<[u8]>) -> LoadError {
    match Session::load_bytes(text.as_ref()) {
        Ok(_) => panic!("loaded"),
        Err(e) => e,
    }
}

#[test]
fn corrupt_middle_line_names_line_and_seq() {
    let text = LogBuilder::new("s")
        .lines([
            header(&["A"], "initial"),
            r#"{"type":"user/message","data":{"message":"#.to_owned(),
            user("u2"),
        ])
        .text();
    match load_err(&text) {
        LoadError::Event { line: 3, source }
            if source.seq() == Seq(1)
                && matches!(
                    source.kind(),
                    AppendErrorKind::Decode {
                        source: DecodeError::Json(_)
                    }
                ) => {}
        other => panic!("{other:?}"),
    }
    let shown = load_err(&text).to_string();
    assert!(
        shown.contains("line 3") && shown.contains("event 1"),
        "{shown}"
    );

    // A number serde_json cannot hold is a load error, in the middle or on a terminated
    // last line.
    for lines in [
        vec![opaque("note/x", "").replace("1}", "1e400}"), user("u1")],
        vec![user("u1"), opaque("note/x", "").replace("1}", "-1e400}")],
    ] {
        let bad_line = lines.iter().position(|l| l.contains("e400")).unwrap();
        match load_err(LogBuilder::new("s").lines(lines).text()) {
            LoadError::Event { line, source } => {
                assert_eq!(line, bad_line + 2);
                assert_eq!(source.seq(), Seq(bad_line as u64));
                assert!(matches!(
                    source.kind(),
                    AppendErrorKind::Decode {
                        source: DecodeError::Json(_),
                        ..
                    }
                ));
            }
            other => panic!("{other:?}"),
        }
    }

    // A line that is not UTF-8.
    let mut bytes = LogBuilder::new("s").line(user("u1")).text().into_bytes();
    bytes.extend_from_slice(b"{\"type\":\"note/\xff\"}\n");
    bytes.extend_from_slice(user("u2").as_bytes());
    bytes.push(b'\n');
    assert!(matches!(
        load_err(&bytes),
        LoadError::NotUtf8 {
            line: 3,
            seq: Seq(1)
        }
    ));
}

#[test]
fn files_without_a_usable_session_line() {
    assert!(matches!(load_err(""), LoadError::NoSessionLine));
    // The only line is torn.
    assert!(matches!(
        load_err(r#"{"type":"session","vers"#),
        LoadError::NoSessionLine
    ));
    assert!(matches!(load_err("garbage"), LoadError::NoSessionLine));
    // A terminated line that is not a session line.
    assert!(matches!(
        load_err(format!("{}\n", user("u1"))),
        LoadError::BadSessionLine { .. }
    ));
    assert!(matches!(
        load_err("{\"type\":\"session\",\"id\":\"s\"}\n"),
        LoadError::BadSessionLine { .. }
    ));
    // A terminated session line that is not UTF-8 is a bad session line, not a torn one.
    let mut bytes = b"{\"type\":\"session\",\"version\":0,\"id\":\"\xff\"}\n".to_vec();
    bytes.extend_from_slice(user("u1").as_bytes());
    assert!(matches!(load_err(&bytes), LoadError::BadSessionLine { .. }));
    assert!(matches!(
        load_err(&bytes[..bytes.iter().position(|b| *b == b'\n').unwrap()]),
        LoadError::NoSessionLine
    ));
    for (version, found) in [("1", json!(1)), ("\"0\"", json!("0")), ("-2", json!(-2))] {
        let text = format!("{{\"type\":\"session\",\"version\":{version},\"id\":\"s\"}}\n");
        match load_err(&text) {
            LoadError::UnsupportedVersion { found: f } => assert_eq!(f, found),
            other => panic!("{other:?}"),
        }
        // Also when the session line is the unterminated only line: it is whole JSON, not a
        // line cut short, so the version is what is wrong with it.
        match load_err(text.trim_end()) {
            LoadError::UnsupportedVersion { found: f } => assert_eq!(f, found),
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn empty_lines_are_errors() {
    assert!(matches!(load_err("\n"), LoadError::EmptyLine { line: 1 }));
    let log = LogBuilder::new("s").lines([user("u1"), String::new(), user("u2")]);
    assert!(matches!(
        load_err(log.text()),
        LoadError::EmptyLine { line: 3 }
    ));
    let trailing = LogBuilder::new("s").line(user("u1")).text() + "\n";
    assert!(matches!(
        load_err(trailing),
        LoadError::EmptyLine { line: 3 }
    ));
}

#[test]
fn open_truncates_a_torn_tail_then_appends() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("torn.jsonl");
    let log = LogBuilder::new("s").lines([header(&["A"], "initial"), user("u1")]);
    let prefix = log.text();
    fs::write(&path, format!("{prefix}{}", &assistant("a1")[..40])).unwrap();

    let loaded = Session::open(&path).unwrap();
    assert_eq!(
        torn(loaded.torn_tail),
        Some((prefix.len() as u64, 40, None))
    );
    assert_eq!(
        fs::read_to_string(&path).unwrap(),
        prefix,
        "truncated at the last newline"
    );
    let s = loaded.session;
    assert!(s.is_persisting());
    assert_eq!(s.append_json(&assistant("a1")).unwrap(), Seq(2));
    assert_eq!(
        fs::read_to_string(&path).unwrap(),
        log.clone().line(assistant("a1")).text()
    );
    let again = Session::load(&path).unwrap();
    assert_eq!(again.torn_tail, None);
    assert!(!again.unterminated);
    assert_eq!(again.session.events(), s.events());
}

#[test]
fn open_terminates_an_unterminated_last_line_then_appends() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("unterminated.jsonl");
    let text = odd_log().text();
    let cut = text.strip_suffix('\n').unwrap();
    fs::write(&path, cut).unwrap();

    let loaded = Session::open(&path).unwrap();
    assert!(loaded.unterminated);
    assert_eq!(fs::read_to_string(&path).unwrap(), text);
    let s = loaded.session;
    s.append(Event::append(Message::user("new-1", "text of new-1")))
        .unwrap();
    assert_eq!(
        fs::read_to_string(&path).unwrap(),
        format!("{text}{}\n", user("new-1"))
    );
    // The in-memory rendering agrees with the file.
    assert_eq!(s.to_jsonl(), fs::read_to_string(&path).unwrap());
    let again = Session::load(&path).unwrap();
    assert!(!again.unterminated);
    assert_eq!(again.torn_tail, None);
    assert_eq!(again.session.len(), ODD_LINES.len() + 1);
    assert_eq!(again.session.events(), s.events());
}

#[test]
fn open_terminates_an_unterminated_session_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bare.jsonl");
    fs::write(&path, session_line("s")).unwrap();
    let loaded = Session::open(&path).unwrap();
    assert!(loaded.unterminated);
    loaded.session.append_json(&user("u1")).unwrap();
    assert_eq!(
        fs::read_to_string(&path).unwrap(),
        LogBuilder::new("s").line(user("u1")).text()
    );
}

#[test]
fn open_leaves_a_clean_file_alone() {
    let dir = tempfile::tempdir().unwrap();
    let log = LogBuilder::new("s").lines([user("u1")]);
    let path = log.write(dir.path(), "clean.jsonl");
    let loaded = Session::open(&path).unwrap();
    assert_eq!((loaded.torn_tail, loaded.unterminated), (None, false));
    assert_eq!(fs::read_to_string(&path).unwrap(), log.text());
    loaded.session.append_json(&user("u2")).unwrap();
    assert_eq!(
        fs::read_to_string(&path).unwrap(),
        log.line(user("u2")).text()
    );
}

#[test]
fn create_writes_the_session_line_then_one_line_per_append() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("new.jsonl");
    let s = Session::create(&path, "s1").unwrap();
    assert!(s.is_persisting());
    assert_eq!(
        fs::read(&path).unwrap(),
        b"{\"type\":\"session\",\"version\":0,\"id\":\"s1\",\"rules\":4}\n"
    );
    s.append(Event::append(Message::user("u1", "text of u1")))
        .unwrap();
    s.append(Event::header(
        RequestHeader::new(Config::new("p", "m"), vec![tool("A"), tool("Bd")]),
        Reason::Initial,
    ))
    .unwrap();
    let expected = LogBuilder::new("s1")
        .lines([user("u1"), header(&["A", "Bd"], "initial")])
        .text();
    assert_eq!(fs::read_to_string(&path).unwrap(), expected);
    assert_eq!(s.to_jsonl(), expected);
    assert_eq!(Session::load(&path).unwrap().session.events(), s.events());
    // A refused event writes nothing.
    s.append_json(&user("u1")).unwrap_err();
    assert_eq!(fs::read_to_string(&path).unwrap(), expected);
    // `create` never overwrites.
    assert!(matches!(
        Session::create(&path, "s2"),
        Err(PersistError::Io { .. })
    ));
    assert_eq!(fs::read_to_string(&path).unwrap(), expected);
}

/// What the test tells the sink to do, and what the sink saw.
#[derive(Default)]
struct Plan {
    appends: usize,
    truncates: usize,
    /// Fail the next `append` after writing this many bytes of it.
    fail_after: Option<usize>,
    truncate_fails: bool,
}

/// A file sink that fails on command.
struct FlakySink {
    file: File,
    plan: Arc<Mutex<Plan>>,
}

impl JsonlSink for FlakySink {
    fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
        let mut plan = self.plan.lock().unwrap();
        plan.appends += 1;
        self.file.seek(SeekFrom::End(0))?;
        if let Some(k) = plan.fail_after.take() {
            self.file.write_all(&bytes[..k.min(bytes.len())])?;
            self.file.flush()?;
            return Err(io::Error::other("disk full"));
        }
        self.file.write_all(bytes)?;
        self.file.flush()
    }

    fn truncate(&mut self, len: u64) -> io::Result<()> {
        let mut plan = self.plan.lock().unwrap();
        plan.truncates += 1;
        if plan.truncate_fails {
            return Err(io::Error::other("truncate refused"));
        }
        self.file.set_len(len)?;
        self.file.seek(SeekFrom::Start(len)).map(drop)
    }

    fn sync(&mut self) -> io::Result<()> {
        self.file.sync_data()
    }
}

fn open_flaky(path: &Path) -> (Session, Arc<Mutex<Plan>>) {
    let plan = Arc::new(Mutex::new(Plan::default()));
    let shared = Arc::clone(&plan);
    let loaded = FileOptions::new()
        .sink(move |file| FlakySink {
            file,
            plan: Arc::clone(&shared),
        })
        .open(path)
        .unwrap();
    (loaded.session, plan)
}

fn created(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("s.jsonl");
    drop(Session::create(&path, "s").unwrap());
    path
}

#[test]
fn each_append_is_one_sink_append() {
    let dir = tempfile::tempdir().unwrap();
    let path = created(dir.path());
    let (s, plan) = open_flaky(&path);
    for (i, line) in [header(&["A", "B"], "initial"), user("u1"), assistant("a1")]
        .iter()
        .enumerate()
    {
        s.append_json(line).unwrap();
        assert_eq!(plan.lock().unwrap().appends, i + 1);
    }
    // A refused event reaches no sink.
    s.append_json(&user("u1")).unwrap_err();
    let p = plan.lock().unwrap();
    assert_eq!((p.appends, p.truncates), (3, 0));
}

#[test]
fn failed_write_leaves_file_and_session_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let path = created(dir.path());
    let (s, plan) = open_flaky(&path);
    s.append_json(&header(&["A"], "initial")).unwrap();
    s.append_json(&user("u1")).unwrap();
    let bytes = fs::read(&path).unwrap();
    let (events, messages, history) = (s.events(), s.messages(), s.tool_history());

    plan.lock().unwrap().fail_after = Some(10);
    let err = s.append_json(&assistant("a1")).unwrap_err();
    assert!(
        matches!(err.kind(), AppendErrorKind::Write { source: WriteError::Io(_) } if err.seq() == Seq(2)),
        "{err:?}"
    );
    assert!(err.to_string().contains("event 2"), "{err}");
    assert_eq!(plan.lock().unwrap().truncates, 1);
    assert_eq!(fs::read(&path).unwrap(), bytes, "rolled back");
    assert_eq!(s.len(), 2);
    assert_eq!(s.events(), events);
    assert_eq!(s.messages(), messages);
    assert_eq!(s.tool_history(), history);

    // The next append succeeds; the failed event's id was never taken.
    assert_eq!(s.append_json(&assistant("a1")).unwrap(), Seq(2));
    let expected = LogBuilder::new("s")
        .lines([header(&["A"], "initial"), user("u1"), assistant("a1")])
        .text();
    assert_eq!(fs::read_to_string(&path).unwrap(), expected);
    let again = Session::load(&path).unwrap();
    assert_eq!((again.torn_tail, again.unterminated), (None, false));
    assert_eq!(again.session.events(), s.events());
}

#[test]
fn failed_rollback_poisons_the_writer() {
    let dir = tempfile::tempdir().unwrap();
    let path = created(dir.path());
    let (s, plan) = open_flaky(&path);
    s.append_json(&user("u1")).unwrap();
    let before = fs::read(&path).unwrap();
    let events = s.events();
    {
        let mut p = plan.lock().unwrap();
        p.fail_after = Some(10);
        p.truncate_fails = true;
    }
    let err = s.append_json(&user("u2")).unwrap_err();
    assert!(
        matches!(err.kind(), AppendErrorKind::Write { source: WriteError::RollbackFailed(_) } if err.seq() == Seq(1)),
        "{err:?}"
    );
    assert_eq!(s.events(), events);
    // The sink would work again, but the writer refuses without touching it.
    plan.lock().unwrap().truncate_fails = false;
    let appends = plan.lock().unwrap().appends;
    for line in [user("u2"), user("u3")] {
        let err = s.append_json(&line).unwrap_err();
        assert!(
            matches!(err.kind(), AppendErrorKind::Write { source: WriteError::Poisoned } if err.seq() == Seq(1)),
            "{err:?}"
        );
    }
    assert_eq!(plan.lock().unwrap().appends, appends);
    assert_eq!(s.len(), 1);
    assert_eq!(s.events(), events);
    // The file ends in the partial line, which loading reports as torn.
    let loaded = Session::load(&path).unwrap();
    assert_eq!(
        torn(loaded.torn_tail),
        Some((before.len() as u64, 10, None))
    );
    assert_eq!(loaded.session.events(), events);
}

// `jsonl_writer_on_its_own` moved to `src/store/writer.rs`: `JsonlWriter` is the crate's own.
