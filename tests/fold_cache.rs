//! reference §3 caching: `tool_history()` after any number of appends equals the fold from
//! scratch of the same prefix (reference example F1–F19 and random logs), and a snapshot handed out
//! never changes.

mod support;

use std::sync::Arc;

use mektpoy::{
    Config, ContentBlock, Event, Message, Session, ToolSchema,
    event::{HeaderEvent, Reason, RequestHeader},
    history::ToolHistory,
    vocab::Seq,
};
use proptest::prelude::*;
use support::*;

/// Appends `lines` one by one; after each, the cached snapshot must equal the fold from
/// scratch. Every snapshot is kept with its JSON and checked again at the end.
fn fold_incrementally(session: &Session, lines: &[String]) -> ToolHistory {
    let mut taken: Vec<(ToolHistory, String)> = Vec::new();
    for line in lines {
        session
            .append_json(line)
            .unwrap_or_else(|e| panic!("{e}\n{line}"));
        let cached = session.tool_history();
        let events = session.events();
        assert_eq!(cached, support::refold(events.iter()), "after {line}");
        taken.push((cached.clone(), cached.to_json()));
    }
    for (snapshot, json) in &taken {
        assert_eq!(
            &snapshot.to_json(),
            json,
            "a snapshot changed after it was handed out"
        );
    }
    session.tool_history()
}

fn h(tools: &[&str], reason: &str) -> String {
    header(tools, reason)
}

fn d(id: &str, blocks: &[&str], header_seq: Option<u64>) -> String {
    dev(id, blocks, header_seq)
}

#[test]
fn examples_fold_table() {
    let f3 = || {
        vec![
            h(&["A"], "initial"),
            h(&["A", "B"], "change"),
            d("d1", &["+B"], Some(1)),
        ]
    };
    let f4 = || {
        let mut v = f3();
        v.extend([h(&["A"], "change"), d("d2", &["-B"], None)]);
        v
    };
    let plus = |mut base: Vec<String>, more: Vec<String>| {
        base.extend(more);
        base
    };
    // A with its keys in another order (reference example F12).
    let a_reordered = r#"{"type":"request/header","data":{"header":{"config":{"model":"m","provider":"p"},"tools":[{"parameters":{"type":"object"},"description":"A","name":"A"},{"name":"B","description":"B","parameters":{"type":"object"}}]},"reason":"change"}}"#;
    let table: Vec<(&str, Vec<String>, &str)> = vec![
        ("F1", vec![h(&["A"], "initial")], "{[A],[]}"),
        (
            "F2",
            vec![h(&["A"], "initial"), h(&["A", "B"], "change")],
            "{[A,B],[]}",
        ),
        ("F3", f3(), "{[A],[[d1,[B]]]}"),
        ("F4", f4(), "{[A],[[d1,[B]],[d2,[]]]}"),
        (
            "F5",
            plus(f3(), vec![h(&["A", "B"], "series")]),
            "{[A,B],[]}",
        ),
        (
            "F6",
            plus(
                f3(),
                vec![
                    header_ss(&["A", "B", "C"], "change"),
                    d("d2", &["+C"], Some(3)),
                ],
            ),
            "{[A,B,C],[[d2,[C]]]}",
        ),
        (
            "F7",
            plus(
                f4(),
                vec![h(&["A", "B2"], "change"), d("d3", &["+B"], Some(5))],
            ),
            "{[A,B2],[[d3,[B2]]]}",
        ),
        (
            "F7'",
            plus(
                f4(),
                vec![h(&["A", "B"], "change"), d("d3", &["+B"], Some(5))],
            ),
            "{[A],[[d1,[B]],[d2,[]],[d3,[B]]]}",
        ),
        (
            "F8",
            vec![
                h(&["A"], "initial"),
                h(&["B", "A"], "change"),
                d("d1", &["+B"], Some(1)),
            ],
            "{[A],[[d1,[B]]]}",
        ),
        (
            "F9",
            vec![h(&["A", "Cd"], "initial"), d("d1", &["+C"], Some(0))],
            "{[A,Cd],[[d1,[Cd]]]}",
        ),
        (
            "F11",
            vec![
                h(&["A"], "initial"),
                h(&["A", "B"], "change"),
                h(&["A", "B", "C"], "change"),
                d("d1", &["+B"], Some(1)),
            ],
            "{[A,B,C],[]}",
        ),
        (
            "F12",
            plus(f3(), vec![a_reordered.to_owned()]),
            "{[A],[[d1,[B]]]}",
        ),
        (
            "F13",
            vec![h(&["A", "B"], "initial"), h(&["A2", "B"], "change")],
            "{[A2,B],[]}",
        ),
        (
            "F14",
            vec![
                h(&["A"], "initial"),
                h(&[], "change"),
                d("d1", &["-A"], None),
            ],
            "{[A],[[d1,[]]]}",
        ),
        (
            "F15",
            vec![
                h(&["A"], "initial"),
                h(&["A", "B"], "change"),
                d("d1", &["+B", "-B"], Some(1)),
            ],
            "{[A,B],[]}",
        ),
        (
            "F16",
            vec![
                h(&["A"], "initial"),
                h(&["A", "B"], "resume"),
                d("d1", &["+B"], Some(1)),
            ],
            "{[A],[[d1,[B]]]}",
        ),
        (
            "F17",
            vec![
                h(&[], "initial"),
                h(&["B"], "change"),
                d("d1", &["+B"], Some(1)),
            ],
            "{[B],[[d1,[B]]]}",
        ),
        (
            "F18",
            vec![
                h(&["A", "B"], "initial"),
                h(&["B"], "change"),
                d("d1", &["-A"], None),
                h(&["A", "B"], "change"),
                d("d2", &["+A"], Some(3)),
            ],
            "{[A,B],[[d1,[]],[d2,[A]]]}",
        ),
        (
            "F19",
            vec![
                h(&["A", "B"], "initial"),
                h(&["A", "B2"], "change"),
                d("d1", &["+B"], Some(0)),
                h(&["A", "B2"], "change"),
            ],
            "{[A,B2],[]}",
        ),
    ];
    for (name, lines, expected) in table {
        let s = Session::new(name);
        let got = fold_incrementally(&s, &lines);
        assert_eq!(summary(&got), expected, "{name}");
        // The first call on a fresh session folds the whole log at once.
        let cold = LogBuilder::new(name).lines(lines).session(name);
        assert_eq!(summary(&cold.tool_history()), expected, "{name} (cold)");
    }
}

#[test]
fn non_tool_events_do_not_disturb_the_fold() {
    let lines = [
        h(&["A"], "initial"),
        user("u1"),
        opaque("note/x", APPEND),
        h(&["A", "B"], "change"),
        assistant("a1"),
        d("d1", &["+B"], Some(3)),
        message("user", "sum", &replace_op(0, 3)),
        message("system", "s1", LOG_ONLY),
    ];
    let s = Session::new("s");
    let got = fold_incrementally(&s, &lines);
    // The replace removed d1 from the surface; its update stays (reference §3 caching).
    assert_eq!(summary(&got), "{[A],[[d1,[B]]]}");
    assert_eq!(s.messages().len(), 1);
}

/// Tool definitions a random log draws from: two names, each in three variants.
fn pool() -> Vec<ToolSchema> {
    ["A", "A2", "Ad", "B", "B2", "Bd", "C", "Cd"]
        .iter()
        .map(|t| tool(t))
        .collect()
}

/// One random step of a log: a header (tool variant per name, or absent), a developer
/// message (additions from an earlier header, removals), a user message, a replace.
#[derive(Clone, Debug)]
enum Step {
    Header {
        picks: [u8; 3],
        reason: u8,
        starts_series: bool,
    },
    Developer {
        adds: u8,
        removes: u8,
        header: u8,
        text: bool,
    },
    User,
    Compact,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (any::<[u8; 3]>(), 0u8..4, any::<bool>()).prop_map(|(picks, reason, starts_series)| {
            Step::Header {
                picks,
                reason,
                starts_series,
            }
        }),
        (any::<u8>(), any::<u8>(), any::<u8>(), any::<bool>()).prop_map(
            |(adds, removes, header, text)| Step::Developer {
                adds,
                removes,
                header,
                text,
            }
        ),
        Just(Step::User),
        Just(Step::Compact),
    ]
}

fn typed_events(steps: &[Step]) -> Vec<Event> {
    let pool = pool();
    let mut events = Vec::new();
    let mut headers: Vec<(usize, Arc<[ToolSchema]>)> = Vec::new();
    let mut surface = 0usize;
    for (i, st) in steps.iter().enumerate() {
        let seq = events.len();
        let id = format!("m{i}");
        match st {
            Step::Header {
                picks,
                reason,
                starts_series,
            } => {
                // Per name: absent, or one of its three variants.
                let tools: Vec<ToolSchema> = picks
                    .iter()
                    .enumerate()
                    .filter_map(|(n, p)| {
                        let v = *p as usize % 4;
                        (v < 3).then(|| pool[(n * 3 + v).min(pool.len() - 1)].clone())
                    })
                    .collect();
                let tools: Arc<[ToolSchema]> = tools.into();
                let reason = [
                    Reason::Initial,
                    Reason::Resume,
                    Reason::Change,
                    Reason::Series,
                ][*reason as usize];
                events.push(Event::from(HeaderEvent {
                    header: RequestHeader::new(Config::new("p", "m"), Arc::clone(&tools)),
                    reason,
                    starts_series: *starts_series,
                }));
                headers.push((seq, tools));
            }
            Step::Developer {
                adds,
                removes,
                header,
                text,
            } => {
                let mut blocks = Vec::new();
                let mut header_seq = None;
                if !headers.is_empty() {
                    let (hseq, tools) = &headers[*header as usize % headers.len()];
                    for (k, t) in tools.iter().enumerate() {
                        if adds & (1 << k) != 0 {
                            blocks.push(ContentBlock::addition(t.name()).unwrap());
                            header_seq = Some(Seq(*hseq as u64));
                        }
                    }
                }
                for (k, n) in ["A", "B", "C"].iter().enumerate() {
                    if removes & (1 << k) != 0 {
                        blocks.push(ContentBlock::removal(*n).unwrap());
                    }
                }
                if *text {
                    blocks.push(ContentBlock::text("note"));
                }
                events.push(Event::developer(Message::developer(id, blocks), header_seq));
                surface += 1;
            }
            Step::User => {
                events.push(Event::append(Message::user(id, "hi")));
                surface += 1;
            }
            Step::Compact if surface > 0 => {
                events.push(Event::replace(Message::user(id, "summary"), 0, surface - 1));
                surface = 1;
            }
            Step::Compact => {}
        }
    }
    events
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    /// The cached fold, consulted at random moments (so it catches up over several events at
    /// once), equals the fold from scratch of the same prefix, and earlier snapshots stay
    /// as they were.
    #[test]
    fn incremental_fold_equals_fold_from_scratch(
        steps in prop::collection::vec(step(), 0..40),
        reads in prop::collection::vec(any::<bool>(), 40),
    ) {
        let events = typed_events(&steps);
        let s = Session::new("s");
        let mut taken = Vec::new();
        for (i, e) in events.iter().enumerate() {
            s.append(e.clone()).unwrap_or_else(|err| panic!("{err}: {e:?}"));
            if reads[i % reads.len()] {
                let cached = s.tool_history();
                prop_assert_eq!(&cached, &support::refold(&events[..=i]));
                taken.push((cached.clone(), cached.to_json()));
            }
        }
        prop_assert_eq!(s.tool_history(), support::refold(&events));
        prop_assert_eq!(s.view().tool_history, support::refold(&events));
        for (snapshot, json) in taken {
            prop_assert_eq!(snapshot.to_json(), json);
        }
        // A session loaded from the same log agrees.
        let loaded = Session::load_bytes(s.to_jsonl().as_bytes()).unwrap().session;
        prop_assert_eq!(loaded.tool_history(), s.tool_history());
    }
}
