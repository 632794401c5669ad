//! Property (decision 78): a fork's folds, both kinds, equal the fold from scratch of the same
//! prefix, at random fork points, whether the parent never folded, folded to its end, folded
//! part of its log, folded one kind only, or was loaded from a file. The logs are long enough
//! (over 4,096 fold events) for a fork to start from a checkpoint of its parent's fold.

use mektpoy::event::{Config, Reason, RequestHeader};
use mektpoy::{ContentBlock, Event, Message, Session, ToolSchema};
use proptest::prelude::*;

mod support;

const NAMES: [&str; 6] = ["read", "write", "grep", "bash", "fetch", "edit"];

/// One step of a pattern: the tools offered (name index, variant: 0 and 1 two definitions, 2
/// the first deferred), the header's reason (0 change, 1 series) and whether a developer
/// message announces the change (and redefines the tools whose definition changed).
#[derive(Clone, Debug)]
struct Step {
    tools: Vec<(usize, u8)>,
    series: bool,
    announce: bool,
    redefine: bool,
}

fn step() -> impl Strategy<Value = Step> {
    let tools = proptest::sample::subsequence((0..NAMES.len()).collect::<Vec<_>>(), 0..=5)
        .prop_flat_map(|names| {
            let n = names.len();
            (Just(names), proptest::collection::vec(0u8..3, n))
        })
        .prop_map(|(names, variants)| names.into_iter().zip(variants).collect::<Vec<_>>());
    (
        tools,
        proptest::bool::weighted(0.1),
        proptest::bool::weighted(0.8),
        any::<bool>(),
    )
        .prop_map(|(tools, series, announce, redefine)| Step {
            tools,
            series,
            announce,
            redefine,
        })
}

fn tool(index: usize, variant: u8) -> ToolSchema {
    support::tool_of(
        NAMES[index],
        if variant == 1 { 2 } else { 1 },
        variant == 2,
        serde_json::json!({}),
    )
}

/// A log of `steps` steps appended directly, cycling through `pattern` (shifted every lap so
/// that laps differ): per step a header, usually its developer message, a user message and
/// an answer.
fn log(pattern: &[Step], steps: usize) -> Session {
    let session = Session::new("p");
    let mut before: Vec<(usize, u8)> = Vec::new();
    for i in 0..steps {
        let s = &pattern[(i + i / pattern.len()) % pattern.len()];
        let reason = match (i, s.series) {
            (0, _) => Reason::Initial,
            (_, true) => Reason::Series,
            _ => Reason::Change,
        };
        let tools: Vec<ToolSchema> = s.tools.iter().map(|&(n, v)| tool(n, v)).collect();
        let config = Config::new("anthropic", "claude-opus-5");
        let seq = session
            .append(Event::header(RequestHeader::new(config, tools), reason))
            .expect("header");
        if s.announce {
            let was = |n: usize| before.iter().find(|(m, _)| *m == n).map(|(_, v)| *v);
            let mut blocks: Vec<ContentBlock> = Vec::new();
            for &(n, v) in &s.tools {
                match was(n) {
                    None => blocks.push(ContentBlock::addition(NAMES[n]).unwrap()),
                    Some(w) if w != v && s.redefine => {
                        blocks.push(ContentBlock::redefinition(NAMES[n]).unwrap())
                    }
                    Some(_) => {}
                }
            }
            for &(n, _) in &before {
                if !s.tools.iter().any(|(m, _)| *m == n) {
                    blocks.push(ContentBlock::removal(NAMES[n]).unwrap());
                }
            }
            session
                .append(Event::developer(
                    Message::developer(format!("d{i}"), blocks),
                    Some(seq),
                ))
                .expect("developer");
        }
        session
            .append(Event::append(Message::user(format!("u{i}"), "next")))
            .expect("user");
        session
            .append(Event::append(Message::assistant(
                format!("a{i}"),
                "ok",
                "anthropic",
                "claude-opus-5",
            )))
            .expect("assistant");
        before = s.tools.clone();
    }
    session
}

/// Both folds of `s`, by reference then by value.
fn folds(s: &Session) -> (mektpoy::history::ToolHistory, mektpoy::history::ToolHistory) {
    (s.tool_history(), s.tool_history_by_value())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4))]

    #[test]
    fn a_forks_folds_equal_the_fold_from_scratch_of_its_prefix(
        pattern in proptest::collection::vec(step(), 1..6),
        steps in 2_400usize..4_600,
        cached_upto in 0.0f64..1.0,
        points in proptest::collection::vec(0.0f64..=1.0, 3),
    ) {
        // Never folded: every fork of it folds from scratch, the model.
        let cold = log(&pattern, steps);
        let len = cold.len();
        let at = |f: f64| ((len as f64 * f) as usize).min(len);
        // Folded to its end, both kinds.
        let full = Session::fork(&cold, len as u64, "full").unwrap();
        folds(&full);
        // By reference only.
        let by_reference = Session::fork(&cold, len as u64, "ref").unwrap();
        by_reference.tool_history();
        // Folded up to `m`, then the rest of the log appended: its fold stops at `m`.
        let m = at(cached_upto);
        let partial = Session::fork(&cold, m as u64, "partial").unwrap();
        folds(&partial);
        for e in cold.events().iter().skip(m) {
            partial.append(e.clone()).unwrap();
        }
        // Loaded from the file the cold log saves, then folded.
        let loaded = Session::load_bytes(cold.to_jsonl().as_bytes()).unwrap().session;
        prop_assert_eq!(folds(&loaded), folds(&Session::fork(&cold, len as u64, "x").unwrap()));
        let parents = [("full", &full), ("by_reference", &by_reference), ("partial", &partial), ("loaded", &loaded)];
        for upto in points.into_iter().map(at).chain([len, m]) {
            let expected = folds(&Session::fork(&cold, upto as u64, "e").unwrap());
            for (name, parent) in parents {
                let fork = Session::fork(parent, upto as u64, "f").unwrap();
                prop_assert_eq!(folds(&fork), expected.clone(), "{} at {}", name, upto);
                // A fork of a fork, and a fork that goes on with an event of its own.
                let again = Session::fork(&fork, upto as u64, "g").unwrap();
                prop_assert_eq!(folds(&again), expected.clone(), "{} twice at {}", name, upto);
            }
            let fresh = Session::fork(&cold, upto as u64, "c").unwrap();
            let fork = Session::fork(&full, upto as u64, "f").unwrap();
            let header = Event::header(
                RequestHeader::new(Config::new("anthropic", "claude-opus-5"), vec![tool(0, 1), tool(5, 0)]),
                if upto == 0 { Reason::Initial } else { Reason::Change },
            );
            for s in [&fresh, &fork] {
                let seq = s.append(header.clone()).unwrap();
                s.append(Event::developer(
                    Message::developer("late", vec![ContentBlock::addition("edit").unwrap()]),
                    Some(seq),
                ))
                .unwrap();
            }
            prop_assert_eq!(folds(&fork), folds(&fresh), "appended after a fork at {}", upto);
        }
    }
}
