//! Every F row of the worked examples, appended through `Session::append`, read through
//! `tool_history()` (by reference) and `tool_history_by_value()`, and checked against the
//! from-scratch fold.

use mektpoy::{
    Config, ContentBlock, Event, Message, Session,
    event::{Reason, RequestHeader},
    history::ToolHistory,
    session::AppendErrorKind,
    vocab::Seq,
};

mod support;
use support::{block, summary, tool};

fn h(tools: &[&str], reason: Reason, starts_series: bool) -> Event {
    let header = RequestHeader::new(
        Config::new("p", "m"),
        tools.iter().map(|s| tool(s)).collect::<Vec<_>>(),
    );
    mektpoy::event::HeaderEvent {
        header,
        reason,
        starts_series,
    }
    .into()
}

/// `d1(+B,-A,~B)` (block specs) with `headerSeq`.
fn d(id: &str, blocks: &[&str], header: Option<u64>) -> Event {
    let content = blocks.iter().map(|b| block(b)).collect();
    Event::developer(Message::developer(id, content), header.map(Seq))
}

use Reason::{Change, Initial, Resume, Series};

fn f3() -> Vec<Event> {
    vec![
        h(&["A"], Initial, false),
        h(&["A", "B"], Change, false),
        d("d1", &["+B"], Some(1)),
    ]
}
fn f4() -> Vec<Event> {
    let mut e = f3();
    e.extend([h(&["A"], Change, false), d("d2", &["-B"], None)]);
    e
}
fn with(mut base: Vec<Event>, more: Vec<Event>) -> Vec<Event> {
    base.extend(more);
    base
}

#[test]
fn f_rows() {
    let rows: Vec<(&str, Vec<Event>, &str)> = vec![
        ("F1", vec![h(&["A"], Initial, false)], "{[A],[]}"),
        (
            "F2",
            vec![h(&["A"], Initial, false), h(&["A", "B"], Change, false)],
            "{[A,B],[]}",
        ),
        ("F3", f3(), "{[A],[[d1,[B]]]}"),
        ("F4", f4(), "{[A],[[d1,[B]],[d2,[]]]}"),
        (
            "F5",
            with(f3(), vec![h(&["A", "B"], Series, false)]),
            "{[A,B],[]}",
        ),
        (
            "F6",
            with(
                f3(),
                vec![h(&["A", "B", "C"], Change, true), d("d2", &["+C"], Some(3))],
            ),
            "{[A,B,C],[[d2,[C]]]}",
        ),
        (
            "F7",
            with(
                f4(),
                vec![h(&["A", "B2"], Change, false), d("d3", &["+B"], Some(5))],
            ),
            "{[A,B2],[[d3,[B2]]]}",
        ),
        (
            "F7'",
            with(
                f4(),
                vec![h(&["A", "B"], Change, false), d("d3", &["+B"], Some(5))],
            ),
            "{[A],[[d1,[B]],[d2,[]],[d3,[B]]]}",
        ),
        (
            "F8",
            vec![
                h(&["A"], Initial, false),
                h(&["B", "A"], Change, false),
                d("d1", &["+B"], Some(1)),
            ],
            "{[A],[[d1,[B]]]}",
        ),
        (
            "F9",
            vec![h(&["A", "Cd"], Initial, false), d("d1", &["+C"], Some(0))],
            "{[A,Cd],[[d1,[Cd]]]}",
        ),
        (
            "F11",
            vec![
                h(&["A"], Initial, false),
                h(&["A", "B"], Change, false),
                h(&["A", "B", "C"], Change, false),
                d("d1", &["+B"], Some(1)),
            ],
            "{[A,B,C],[]}",
        ),
        (
            "F12",
            vec![
                h(&["A"], Initial, false),
                h(&["A", "B"], Change, false),
                d("d1", &["+B"], Some(1)),
                h(&["A'", "B"], Change, false),
            ],
            "{[A],[[d1,[B]]]}",
        ),
        (
            "F13",
            vec![
                h(&["A", "B"], Initial, false),
                h(&["A2", "B"], Change, false),
            ],
            "{[A2,B],[]}",
        ),
        (
            "F14",
            vec![
                h(&["A"], Initial, false),
                h(&[], Change, false),
                d("d1", &["-A"], None),
            ],
            "{[A],[[d1,[]]]}",
        ),
        (
            "F15",
            vec![
                h(&["A"], Initial, false),
                h(&["A", "B"], Change, false),
                d("d1", &["+B", "-B"], Some(1)),
            ],
            "{[A,B],[]}",
        ),
        (
            "F16",
            vec![
                h(&["A"], Initial, false),
                h(&["A", "B"], Resume, false),
                d("d1", &["+B"], Some(1)),
            ],
            "{[A],[[d1,[B]]]}",
        ),
        (
            "F17",
            vec![
                h(&[], Initial, false),
                h(&["B"], Change, false),
                d("d1", &["+B"], Some(1)),
            ],
            "{[B],[[d1,[B]]]}",
        ),
        (
            "F18",
            vec![
                h(&["A", "B"], Initial, false),
                h(&["B"], Change, false),
                d("d1", &["-A"], None),
                h(&["A", "B"], Change, false),
                d("d2", &["+A"], Some(3)),
            ],
            "{[A,B],[[d1,[]],[d2,[A]]]}",
        ),
        (
            "F19",
            vec![
                h(&["A", "B"], Initial, false),
                h(&["A", "B2"], Change, false),
                d("d1", &["+B"], Some(0)),
                h(&["A", "B2"], Change, false),
            ],
            "{[A,B2],[]}",
        ),
        (
            "every developer message is recorded, text-only and sourceless ones too",
            vec![
                h(&["A"], Initial, false),
                d("d1", &["note"], None),
                Event::developer(
                    Message::new(
                        "d2",
                        mektpoy::vocab::Role::Developer,
                        vec![],
                        mektpoy::vocab::MessageSource::User,
                    ),
                    None,
                ),
            ],
            "{[A],[[d1,[]],[d2,[]]]}",
        ),
        (
            "a log-only developer message counts as well (the fold reads the log)",
            vec![
                h(&["A"], Initial, false),
                h(&["A", "B"], Change, false),
                Event::Message(mektpoy::event::MessageEvent {
                    header_seq: Some(Seq(1)),
                    ..mektpoy::event::MessageEvent::new(
                        Message::developer("d1", vec![ContentBlock::addition("B").unwrap()]),
                        None,
                    )
                }),
            ],
            "{[A],[[d1,[B]]]}",
        ),
        (
            "a baseline of only deferred tools gets replaced at the first immediate tool",
            vec![
                h(&["Ad"], Initial, false),
                h(&["Ad", "B"], Change, false),
                d("d1", &["+B"], Some(1)),
            ],
            "{[Ad,B],[[d1,[B]]]}",
        ),
    ];
    for (name, events, expect) in rows {
        let session = Session::new("s");
        for e in &events {
            session
                .append(e.clone())
                .unwrap_or_else(|err| panic!("{name}: {err}"));
        }
        let got = session.tool_history();
        assert_eq!(summary(&got), expect, "{name}");
        assert_eq!(
            got,
            support::refold(events.iter()),
            "{name}: incremental = from scratch"
        );
    }
}

/// The rows whose by-value snapshot (reference §3.1) is worked out: F20–F22 and the rows where the
/// by-value fold differs because it opens a series only where a request series starts.
#[test]
fn f_rows_by_value() {
    let f22 = vec![
        h(&["A"], Initial, false),
        h(&["A", "B"], Change, false),
        d("d1", &["+B"], Some(1)),
        h(&["A"], Change, false),
        d("d2", &["-B"], None),
        h(&["A", "B2"], Change, false),
        d("d3", &["+B"], Some(5)),
    ];
    let rows: Vec<(&str, Vec<Event>, &str, &str)> = vec![
        (
            "F20 a redefinition",
            vec![
                h(&["A", "B"], Initial, false),
                h(&["A", "B2"], Change, false),
                d("d1", &["~B"], Some(1)),
            ],
            "{[A,B2],[[d1,[],~[B2]]]}",
            "{[A,B],[[d1,[],~[B2]]]}",
        ),
        (
            "F21 died before the developer message: the by-value guard",
            vec![
                h(&["A", "B"], Initial, false),
                h(&["A", "B2"], Change, false),
            ],
            "{[A,B2],[]}",
            "{[A,B2],[]}",
        ),
        (
            "F22 a removed tool returns changed",
            f22.clone(),
            "{[A,B2],[[d3,[B2]]]}",
            "{[A],[[d1,[B]],[d2,[]],[d3,[B2]]]}",
        ),
        (
            "F17 by value: no series at the first usable tool",
            vec![
                h(&[], Initial, false),
                h(&["B"], Change, false),
                d("d1", &["+B"], Some(1)),
            ],
            "{[B],[[d1,[B]]]}",
            "{[],[[d1,[B]]]}",
        ),
        (
            "F13 by value: a definition change without its redefinition block is the guard",
            vec![
                h(&["A", "B"], Initial, false),
                h(&["A2", "B"], Change, false),
            ],
            "{[A2,B],[]}",
            "{[A2,B],[]}",
        ),
        (
            "F5 an explicit series resets both folds",
            with(f3(), vec![h(&["A", "B"], Series, false)]),
            "{[A,B],[]}",
            "{[A,B],[]}",
        ),
        (
            "F6 startsSeries resets both folds",
            with(
                f3(),
                vec![h(&["A", "B", "C"], Change, true), d("d2", &["+C"], Some(3))],
            ),
            "{[A,B,C],[[d2,[C]]]}",
            "{[A,B,C],[[d2,[C]]]}",
        ),
        (
            "a redefinition leaves availability unchanged",
            vec![
                h(&["A", "B"], Initial, false),
                h(&["A"], Change, false),
                d("d1", &["-B"], None),
                h(&["A2"], Change, false),
                d("d2", &["~A"], Some(3)),
            ],
            "{[A2],[[d2,[],~[A2]]]}",
            "{[A,B],[[d1,[]],[d2,[],~[A2]]]}",
        ),
    ];
    for (name, events, by_reference, by_value) in rows {
        let session = Session::new("s");
        let mut incremental = None;
        for e in &events {
            session
                .append(e.clone())
                .unwrap_or_else(|err| panic!("{name}: {err}"));
            // Read after every append: the by-value cache folds incrementally.
            incremental = Some(session.tool_history_by_value());
        }
        assert_eq!(summary(&session.tool_history()), by_reference, "{name}");
        let got = session.tool_history_by_value();
        assert_eq!(summary(&got), by_value, "{name} by value");
        assert_eq!(Some(&got), incremental.as_ref(), "{name}");
        // A fresh session folds the same log from scratch.
        let fresh = Session::fork(&session, session.len() as u64, "f").unwrap();
        assert_eq!(
            fresh.tool_history_by_value(),
            got,
            "{name}: incremental = from scratch"
        );
    }
}

#[test]
fn redefinitions_need_a_header_that_holds_the_tool() {
    let session = Session::new("s");
    session.append(h(&["A", "B"], Initial, false)).unwrap();
    session.append(h(&["A", "B2"], Change, false)).unwrap();
    let err = session.append(d("d1", &["~B"], None)).unwrap_err();
    assert!(
        matches!(err.kind(), AppendErrorKind::RedefinitionWithoutHeaderSeq { tool, .. } if err.seq() == Seq(2) && tool == "B"),
        "{err}"
    );
    let err = session.append(d("d1", &["~C"], Some(1))).unwrap_err();
    assert!(
        matches!(err.kind(), AppendErrorKind::RedefinitionNotInHeader { tool, header: Seq(1), .. } if err.seq() == Seq(2) && tool == "C"),
        "{err}"
    );
    let err = session
        .append(Event::append(
            Message::user("u1", "hi").with_content(vec![ContentBlock::redefinition("B").unwrap()]),
        ))
        .unwrap_err();
    assert!(
        matches!(
            err.kind(),
            AppendErrorKind::ToolChangeOutsideDeveloper { .. }
        ),
        "{err}"
    );
    assert_eq!(session.len(), 2, "nothing was appended");
    session.append(d("d1", &["~B"], Some(1))).unwrap();
}

#[test]
fn f10_addition_absent_from_its_header_is_refused() {
    let session = Session::new("s");
    session.append(h(&["A"], Initial, false)).unwrap();
    session.append(h(&["A"], Change, false)).unwrap();
    let err = session.append(d("d1", &["+B"], Some(1))).unwrap_err();
    assert!(
        matches!(err.kind(), AppendErrorKind::AdditionNotInHeader { tool, header: Seq(1), .. } if err.seq() == Seq(2) && tool == "B"),
        "{err}"
    );
    assert_eq!(session.len(), 2);
}

#[test]
fn a_snapshot_handed_out_never_changes() {
    let session = Session::new("s");
    for e in f3() {
        session.append(e).unwrap();
    }
    let early = session.tool_history();
    let early_json = early.to_json();
    for e in [
        h(&["A", "B", "C"], Series, false),
        h(&["A"], Change, false),
        d("d9", &["-B"], None),
    ] {
        session.append(e).unwrap();
    }
    assert_ne!(session.tool_history(), early);
    assert_eq!(early.to_json(), early_json);
}

#[test]
fn snapshot_json_shape() {
    let session = Session::new("s");
    for e in [h(&["A", "Cd"], Initial, false), d("d1", &["+C"], Some(0))] {
        session.append(e).unwrap();
    }
    assert_eq!(
        session.tool_history().to_json(),
        r#"{"tools":[{"name":"A","description":"A","parameters":{"type":"object"}},{"name":"C","description":"C","parameters":{"type":"object"},"deferLoading":true}],"updates":[{"messageId":"d1","additions":[{"name":"C","description":"C","parameters":{"type":"object"},"deferLoading":true}]}]}"#
    );
    let back: ToolHistory = serde_json::from_str(&session.tool_history().to_json()).unwrap();
    assert_eq!(back, session.tool_history());
}

#[test]
fn a_replace_removing_a_developer_message_keeps_its_update() {
    let session = Session::new("s");
    session
        .append(Event::append(Message::user("u1", "hi")))
        .unwrap();
    for e in [
        h(&["A"], Initial, false),
        h(&["A", "B"], Change, false),
        d("d1", &["+B"], Some(2)),
    ] {
        session.append(e).unwrap();
    }
    session
        .append(Event::replace(Message::user("sum", "summary"), 0, 1))
        .unwrap();
    assert_eq!(session.messages().len(), 1);
    assert_eq!(summary(&session.tool_history()), "{[A],[[d1,[B]]]}");
}

/// Issue 20 item 15: a log folds under the rules it was written under. F18 (a removed baseline
/// tool returning) continues its series under rules 4; a log written before the re-offer rule
/// (unmarked, or `"rules":3`) opened a new declaration series there, and still does, so an
/// upgrade does not change what an old log projects and meters. Unknown rules are a typed
/// error naming the line; a fork keeps its parent's rules.
#[test]
fn a_log_folds_under_the_rules_it_was_written_under() {
    use mektpoy::session::{FileOptions, LoadError, LogRules};
    let session = Session::new("s");
    assert_eq!(session.rules(), LogRules::CURRENT);
    for e in [
        h(&["A", "B"], Initial, false),
        h(&["B"], Change, false),
        d("d1", &["-A"], None),
        h(&["A", "B"], Change, false),
        d("d2", &["+A"], Some(3)),
    ] {
        session.append(e).unwrap();
    }
    let v4 = "{[A,B],[[d1,[]],[d2,[A]]]}";
    let v3 = "{[A,B],[[d2,[A]]]}";
    assert_eq!(summary(&session.tool_history()), v4);
    let marked = session.to_jsonl();
    assert_eq!(
        marked.lines().next(),
        Some(r#"{"type":"session","version":0,"id":"s","rules":4}"#)
    );
    let unmarked = marked.replacen(r#","rules":4"#, "", 1);
    let three = marked.replacen(r#""rules":4"#, r#""rules":3"#, 1);
    let load = |text: &str, options: FileOptions| options.load_bytes(text.as_bytes()).unwrap();
    for (name, text, options, rules, snapshot) in [
        ("marked 4", &marked, FileOptions::new(), LogRules::V4, v4),
        ("unmarked", &unmarked, FileOptions::new(), LogRules::V3, v3),
        ("marked 3", &three, FileOptions::new(), LogRules::V3, v3),
        (
            "unmarked, read as 4",
            &unmarked,
            FileOptions::new().unmarked_rules(LogRules::V4),
            LogRules::V4,
            v4,
        ),
        (
            "marked 3 whatever the option",
            &three,
            FileOptions::new().unmarked_rules(LogRules::V4),
            LogRules::V3,
            v3,
        ),
    ] {
        let loaded = load(text, options).session;
        assert_eq!(loaded.rules(), rules, "{name}");
        assert_eq!(summary(&loaded.tool_history()), snapshot, "{name}");
        // A fork folds as its parent, from scratch and in its own file.
        let fork = Session::fork(&loaded, loaded.len() as u64, "f").unwrap();
        assert_eq!(fork.rules(), rules, "{name}");
        assert_eq!(summary(&fork.tool_history()), snapshot, "{name}: fork");
        let again = Session::load_bytes(fork.to_jsonl().as_bytes())
            .unwrap()
            .session;
        assert_eq!(again.rules(), rules, "{name}: the fork's file says so");
        assert_eq!(
            summary(&again.tool_history()),
            snapshot,
            "{name}: fork file"
        );
        // The by-value fold opens a series only where a request series starts, under either.
        assert_eq!(
            loaded.tool_history_by_value(),
            session.tool_history_by_value(),
            "{name} by value"
        );
    }
    // Rules this crate does not know: a typed error naming the line, nothing loaded.
    for found in ["5", "0", "\"4\"", "4.0", "null"] {
        let text = marked.replacen(r#""rules":4"#, &format!(r#""rules":{found}"#), 1);
        match Session::load_bytes(text.as_bytes()) {
            Err(LoadError::UnsupportedRules { line: 1, found: f }) => {
                assert_eq!(f.to_string(), found);
            }
            other => panic!("{found}: {other:?}"),
        }
    }
}
