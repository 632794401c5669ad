//! reference §2 `Session::fork`: inherited events count in `Seq`, the surface, validation and the
//! fold; a fork's file holds every event, inherited lines byte for byte, and loads alone.

mod support;

use std::fs;

use mektpoy::{
    Session,
    session::{AppendErrorKind, ForkError, ParentRef},
    vocab::Seq,
};
use support::*;

/// reference example F3 followed by a user message and a replace: `H(0,[A]) H(1,[A,B]) D(2,d1,[+B],1)`,
/// `u1` at 3, `sum` replacing nodes 0..=1 at 4, `u2` at 5.
fn parent() -> Session {
    LogBuilder::new("p")
        .lines([
            header(&["A"], "initial"),
            header(&["A", "B"], "change"),
            dev("d1", &["+B"], Some(1)),
            user("u1"),
            message("user", "sum", &replace_op(0, 1)),
            user("u2"),
        ])
        .session("p")
}

fn ids(s: &Session) -> Vec<String> {
    s.messages().iter().map(|m| m.id().to_owned()).collect()
}

#[test]
fn inherited_events_count_in_seq_surface_and_header() {
    let p = parent();
    for upto in 0..=p.len() {
        let f = Session::fork(&p, upto as u64, "f").unwrap();
        assert_eq!(f.len(), upto);
        assert_eq!(
            f.parent(),
            Some(&ParentRef {
                id: "p".into(),
                upto: upto as u64
            })
        );
        let prefix: Vec<_> = p.events().iter().take(upto).cloned().collect();
        assert_eq!(f.events().iter().cloned().collect::<Vec<_>>(), prefix);
        let (surface, generation) = replay_surface(&prefix);
        assert_eq!(
            f.messages().to_vec(),
            surface_messages(&surface),
            "upto {upto}"
        );
        assert_eq!(f.surface().len(), surface.len());
        assert_eq!(f.surface_generation(), generation);
        let header = prefix
            .iter()
            .enumerate()
            .rfind(|(_, e)| matches!(e, mektpoy::Event::Header(_)))
            .map(|(i, _)| Seq(i as u64));
        assert_eq!(f.request_header().map(|(s, _)| s), header);
        // The first new event gets Seq `upto`.
        assert_eq!(f.append_json(&user("new")).unwrap(), Seq(upto as u64));
    }
    // The parent is untouched by its forks.
    assert_eq!(p.len(), 6);
    assert_eq!(ids(&p), ["sum", "u2"]);
}

#[test]
fn fork_past_the_end_is_refused() {
    let p = parent();
    assert!(matches!(
        Session::fork(&p, 7, "f"),
        Err(ForkError::UptoOutOfRange { upto: 7, len: 6 })
    ));
    assert!(matches!(
        Session::fork(&p, u64::MAX, "f"),
        Err(ForkError::UptoOutOfRange { len: 6, .. })
    ));
    let e = Session::fork(&Session::new("e"), 1, "f").err().unwrap();
    let shown = e.to_string();
    assert!(
        shown.contains("at 1") && shown.contains("0 events"),
        "{shown}"
    );
}

#[test]
fn duplicate_ids_count_inherited_events() {
    let p = parent();
    let f = Session::fork(&p, 4, "f").unwrap();
    let err = f.append_json(&assistant("u1")).unwrap_err();
    assert!(
        matches!(err.kind(), AppendErrorKind::DuplicateMessageId { id } if err.seq() == Seq(4) && id == "u1"),
        "{err:?}"
    );
    let err = f.append_json(&dev("d1", &["-A"], None)).unwrap_err();
    assert!(matches!(
        err.kind(),
        AppendErrorKind::DuplicateMessageId { .. }
    ));
    // Ids the parent used after `upto` are free in the fork.
    assert_eq!(f.append_json(&user("sum")).unwrap(), Seq(4));
    assert_eq!(f.append_json(&user("u2")).unwrap(), Seq(5));
    // And the fork's ids are not the parent's.
    assert_eq!(p.append_json(&user("fork-only")).unwrap(), Seq(6));
    // headerSeq may name an inherited header.
    f.append_json(&header(&["A", "B", "C"], "change")).unwrap();
    f.append_json(&dev("d2", &["+C"], Some(6))).unwrap();
    f.append_json(&dev("d3", &["+A"], Some(0))).unwrap();
}

#[test]
fn fork_file_carries_parent_and_every_event_byte_for_byte() {
    // The parent comes from a file with odd spacing, so inherited lines are not compact.
    let parent_lines = [
        header(&["A"], "initial").replace(r#""reason""#, r#" "reason" "#),
        format!("  {}\t", user("u1")),
        assistant("a1").replace(":", " : "),
        user("u2"),
    ];
    let parent_text = LogBuilder::new("p").lines(parent_lines.clone()).text();
    let p = Session::load_bytes(parent_text.as_bytes()).unwrap().session;
    let f = Session::fork(&p, 3, "f/é").unwrap();
    f.append_json(&user("u2-fork")).unwrap();

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fork.jsonl");
    f.save(&path).unwrap();
    let text = fs::read_to_string(&path).unwrap();
    let expected = LogBuilder::with_session_line(
        r#"{"type":"session","version":0,"id":"f/é","rules":4,"parent":{"id":"p","upto":3}}"#,
    )
    .lines(parent_lines[..3].iter().cloned())
    .line(user("u2-fork"))
    .text();
    assert_eq!(text, expected);
    assert_eq!(f.to_jsonl(), expected);

    // It loads on its own, with its parent reference, and saves back byte for byte.
    let loaded = Session::load(&path).unwrap().session;
    assert_eq!(loaded.id(), "f/é");
    assert_eq!(
        loaded.parent(),
        Some(&ParentRef {
            id: "p".into(),
            upto: 3
        })
    );
    assert_eq!(loaded.events(), f.events());
    assert_eq!(loaded.to_jsonl(), expected);

    // A fork of that fork names its own parent and still copies every line.
    let g = Session::fork(&loaded, 4, "g").unwrap();
    let g_text = g.to_jsonl();
    let mut g_lines = g_text.lines();
    assert_eq!(
        g_lines.next(),
        Some(r#"{"type":"session","version":0,"id":"g","rules":4,"parent":{"id":"f/é","upto":4}}"#)
    );
    assert_eq!(
        g_lines.collect::<Vec<_>>(),
        expected.lines().skip(1).collect::<Vec<_>>()
    );
}

#[test]
fn fork_of_an_unterminated_parent_terminates_the_inherited_line() {
    let text = LogBuilder::new("p").lines([user("u1"), user("u2")]).text();
    let p = Session::load_bytes(text.trim_end().as_bytes()).unwrap();
    assert!(p.unterminated);
    let f = Session::fork(&p.session, 2, "f").unwrap();
    assert_eq!(
        f.to_jsonl(),
        format!(
            "{}\n{}\n{}\n",
            r#"{"type":"session","version":0,"id":"f","rules":4,"parent":{"id":"p","upto":2}}"#,
            user("u1"),
            user("u2")
        )
    );
    let loaded = Session::load_bytes(f.to_jsonl().as_bytes()).unwrap();
    assert!(!loaded.unterminated);
    assert_eq!(loaded.session.len(), 2);
}

#[test]
fn fork_of_a_persisting_session_has_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.jsonl");
    let p = Session::create(&path, "p").unwrap();
    p.append_json(&user("u1")).unwrap();
    let f = Session::fork(&p, 1, "f").unwrap();
    assert!(!f.is_persisting());
    f.append_json(&user("u2")).unwrap();
    assert_eq!(
        fs::read_to_string(&path).unwrap(),
        LogBuilder::new("p").line(user("u1")).text()
    );
}

#[test]
fn tool_history_of_a_fork_folds_inherited_events() {
    let p = parent();
    let f = Session::fork(&p, 3, "f").unwrap();
    let inherited: Vec<_> = p.events().iter().take(3).cloned().collect();
    // reference example F3.
    assert_eq!(summary(&f.tool_history()), "{[A],[[d1,[B]]]}");
    assert_eq!(f.tool_history(), support::refold(&inherited));
    // F4 in the fork; the parent keeps F3.
    f.append_json(&header(&["A"], "change")).unwrap();
    f.append_json(&dev("d2", &["-B"], None)).unwrap();
    assert_eq!(summary(&f.tool_history()), "{[A],[[d1,[B]],[d2,[]]]}");
    assert_eq!(summary(&p.tool_history()), "{[A],[[d1,[B]]]}");
    // A fork taken after the parent's cache is warm folds the same.
    let g = Session::fork(&p, 3, "g").unwrap();
    assert_eq!(g.tool_history(), f_prefix_history(&f, 3));
}

fn f_prefix_history(s: &Session, n: usize) -> mektpoy::history::ToolHistory {
    let events: Vec<_> = s.events().iter().take(n).cloned().collect();
    support::refold(&events)
}
