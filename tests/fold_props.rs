//! Property: over random recorder-driven sessions with forks, compactions and prompt changes,
//! the incremental `tool_history()` equals a fresh fold of the same prefix after every batch,
//! and snapshots handed out earlier never change.

use mektpoy::{
    Config, Event, Message, Route, Session, ToolSchema,
    agent::{Recorder, Step},
    history::ToolHistory,
    route::{ToolUpdateMode, WireApi},
};
use proptest::prelude::*;

mod support;

const NAMES: [&str; 5] = ["read", "write", "grep", "bash", "fetch"];

#[derive(Clone, Debug)]
enum Op {
    /// Record a step with these tools (name index, variant), asking a new series or not,
    /// on this attempt, with prompt variant `prompt`.
    Step {
        tools: Vec<(usize, u8)>,
        new_series: bool,
        attempt: u32,
        prompt: u8,
    },
    Answer,
    /// Replace surface nodes `start..=start+len` (clamped) with a summary.
    Compact {
        start: usize,
        len: usize,
    },
    /// Continue on a fork of the first `at` percent of the log, with a new recorder.
    Fork {
        at: u8,
    },
}

/// `NAMES[index]`: variant 0 the first definition, 1 the same deferred, 2 another definition.
fn named_tool(index: usize, variant: u8) -> ToolSchema {
    let version = if variant == 2 { 2 } else { 1 };
    support::tool_of(NAMES[index], version, variant == 1, serde_json::json!({}))
}

fn op() -> impl Strategy<Value = Op> {
    let tools = proptest::sample::subsequence((0..NAMES.len()).collect::<Vec<_>>(), 0..=4)
        .prop_flat_map(|names| {
            let n = names.len();
            (
                Just(names),
                proptest::collection::vec(
                    prop_oneof![6 => Just(0u8), 1 => Just(1u8), 1 => Just(2u8)],
                    n,
                ),
            )
        })
        .prop_map(|(names, variants)| names.into_iter().zip(variants).collect::<Vec<_>>());
    prop_oneof![
        6 => (tools, proptest::bool::weighted(0.1), prop_oneof![4 => Just(0u32), 1 => Just(1u32)], 0u8..3)
            .prop_map(|(tools, new_series, attempt, prompt)| Op::Step { tools, new_series, attempt, prompt }),
        3 => Just(Op::Answer),
        1 => (0usize..6, 0usize..4).prop_map(|(start, len)| Op::Compact { start, len }),
        1 => (0u8..=100).prop_map(|at| Op::Fork { at }),
    ]
}

fn route(mode: u8) -> Route {
    Route::builder("deepseek", "deepseek-flash", WireApi::Messages)
        .tool_update(match mode {
            0 => None,
            1 => Some(ToolUpdateMode::InHistory),
            _ => Some(ToolUpdateMode::AdditionOnly),
        })
        .system_prompt_in_history(mode != 0)
        .build()
        .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn incremental_fold_equals_fresh_fold(mode in 0u8..3, ops in proptest::collection::vec(op(), 1..40)) {
        let route = route(mode);
        let config = Config::new("deepseek", "deepseek-flash");
        let mut session = Session::new("s0");
        let mut recorder = Recorder::attach(&session);
        let mut handed_out: Vec<(ToolHistory, String)> = Vec::new();
        let mut counter = 0;
        for op in ops {
            counter += 1;
            match op {
                Op::Step { tools, new_series, attempt, prompt } => {
                    let tools: Vec<ToolSchema> = tools.into_iter().map(|(i, v)| named_tool(i, v)).collect();
                    let user = [Message::user(format!("u{counter}"), "hi")];
                    recorder.record(&session, Step::new(&config, ["", "prompt one", "prompt two"][prompt as usize], &tools, &route).at(counter, 0, attempt).new_series(new_series).user_messages(&user)).unwrap();
                }
                Op::Answer => {
                    session.append(Event::append(Message::assistant(format!("a{counter}"), "ok", "p", "m"))).unwrap();
                }
                Op::Compact { start, len } => {
                    let n = session.surface().len();
                    if n > 0 {
                        let start = start.min(n - 1);
                        let end = (start + len).min(n - 1);
                        session.append(Event::replace(Message::user(format!("c{counter}"), "summary"), start, end)).unwrap();
                    }
                }
                Op::Fork { at } => {
                    let upto = session.len() as u64 * u64::from(at) / 100;
                    session = Session::fork(&session, upto, format!("f{counter}")).unwrap();
                    recorder = Recorder::attach(&session);
                }
            }
            let snapshot = session.tool_history();
            let events = session.events();
            prop_assert_eq!(&snapshot, &support::refold(events.iter()));
            for (old, json) in &handed_out {
                prop_assert_eq!(&old.to_json(), json);
            }
            handed_out.push((snapshot.clone(), snapshot.to_json()));
        }
    }
}
