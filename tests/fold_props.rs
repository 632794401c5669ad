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
    support::tool_of(
        NAMES[index],
        version,
        variant == 1,
        serde_json::json!({"type": "object"}),
    )
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

/// One event of a log appended directly (not recorded), for the long-fold property below.
#[derive(Clone, Debug)]
enum LogOp {
    /// A header with these tools (name index, variant), this reason (0 initial, 1 change, 2
    /// series) and `startsSeries`.
    Header {
        tools: Vec<(usize, u8)>,
        reason: u8,
        starts_series: bool,
    },
    /// A developer message naming the `back`-th latest header (`None`: no `headerSeq`), with
    /// these blocks (0 addition, 1 removal, 2 redefinition, 3 text; name index).
    Developer {
        back: Option<u8>,
        blocks: Vec<(u8, usize)>,
    },
    User,
}

fn log_op() -> impl Strategy<Value = LogOp> {
    let tools = proptest::sample::subsequence((0..NAMES.len()).collect::<Vec<_>>(), 0..=5)
        .prop_flat_map(|names| {
            let n = names.len();
            let variants = proptest::collection::vec(
                prop_oneof![6 => Just(0u8), 1 => Just(1u8), 1 => Just(2u8)],
                n,
            );
            (Just(names), variants)
        })
        .prop_map(|(names, variants)| names.into_iter().zip(variants).collect::<Vec<_>>());
    let blocks = proptest::collection::vec((0u8..4, 0..NAMES.len()), 0..4);
    prop_oneof![
        3 => (tools, prop_oneof![1 => Just(0u8), 8 => Just(1u8), 1 => Just(2u8)], proptest::bool::weighted(0.05))
            .prop_map(|(tools, reason, starts_series)| LogOp::Header { tools, reason, starts_series }),
        3 => (proptest::option::weighted(0.9, prop_oneof![6 => Just(0u8), 1 => Just(1u8), 1 => Just(3u8)]), blocks)
            .prop_map(|(back, blocks)| LogOp::Developer { back, blocks }),
        2 => Just(LogOp::User),
    ]
}

/// The folds of reference §3 (by reference) and §3.1 (by value) written as plainly as the
/// reference states them, over the events themselves: name maps, every header tool looked up.
/// The oracle the session's folds (from records, long or incremental) are checked against.
#[derive(Default)]
struct Oracle {
    by_value: bool,
    latest: Option<u64>,
    baseline: Vec<ToolSchema>,
    declared: std::collections::HashMap<String, ToolSchema>,
    available: std::collections::HashSet<String>,
    active: Vec<ToolSchema>,
    updates: Vec<mektpoy::history::ToolUpdate>,
    headers: std::collections::HashMap<u64, Vec<ToolSchema>>,
}

impl Oracle {
    fn fold(&mut self, seq: u64, event: &Event) {
        match event {
            Event::Header(h) => {
                let tools = h.header.tools.to_vec();
                let opens = self.latest.is_none()
                    || h.reason == mektpoy::event::Reason::Series
                    || h.starts_series
                    || (!self.by_value
                        && (tools.iter().any(|t| {
                            self.declared.get(t.name()).is_some_and(|d| !d.same_tool(t))
                        }) || (!self.baseline.iter().any(|t| !t.defer_loading())
                            && tools.iter().any(|t| !t.defer_loading()))));
                if opens {
                    self.baseline = tools.clone();
                    self.declared = tools
                        .iter()
                        .map(|t| (t.name().to_owned(), t.clone()))
                        .collect();
                    self.available = tools.iter().map(|t| t.name().to_owned()).collect();
                    self.updates.clear();
                }
                self.latest = Some(seq);
                self.active = tools.clone();
                self.headers.insert(seq, tools);
            }
            Event::Message(m) if m.message.role() == mektpoy::vocab::Role::Developer => {
                let (mut additions, mut redefinitions) = (Vec::new(), Vec::new());
                for block in m.message.content() {
                    let (name, redefines) = match block {
                        mektpoy::ContentBlock::ToolAddition(r) => (r.tool_name(), false),
                        mektpoy::ContentBlock::ToolRedefinition(r) => (r.tool_name(), true),
                        mektpoy::ContentBlock::ToolRemoval(r) => {
                            let tool_name = r.tool_name();
                            self.available.remove(tool_name);
                            continue;
                        }
                        _ => continue,
                    };
                    let def = m.header_seq.and_then(|h| {
                        self.headers[&h.0]
                            .iter()
                            .find(|t| t.name() == name)
                            .cloned()
                    });
                    if let Some(def) = def {
                        self.declared.insert(name.to_owned(), def.clone());
                        if redefines {
                            redefinitions.push(def)
                        } else {
                            additions.push(def)
                        }
                    }
                    if !redefines {
                        self.available.insert(name.to_owned());
                    }
                }
                self.updates.push(
                    mektpoy::history::ToolUpdate::new(m.message.id(), additions)
                        .with_redefinitions(redefinitions),
                );
            }
            _ => {}
        }
    }

    fn snapshot(&self) -> ToolHistory {
        let consistent = self.available.len() == self.active.len()
            && self.active.iter().all(|t| {
                self.available.contains(t.name())
                    && (!self.by_value
                        || self.declared.get(t.name()).is_some_and(|d| d.same_tool(t)))
            });
        if consistent {
            ToolHistory::new(self.baseline.clone(), self.updates.clone())
        } else {
            ToolHistory::new(self.active.clone(), [])
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Decision 80: on long random logs (hundreds of headers and developer messages, so that
    /// a fold from scratch takes the long path: owned slots, the series' updates as one slice
    /// of the log's), both folds of a fresh fork, of a fork at a random point and of a
    /// session read after every event (the incremental path) equal the plain oracle of
    /// reference §3 and §3.1, and a loaded copy folds the same.
    #[test]
    fn long_folds_from_records_equal_the_plain_folds(
        ops in proptest::collection::vec(log_op(), 200..700),
        cut in 0u8..=100,
    ) {
        let session = Session::new("s");
        let mut headers: Vec<mektpoy::vocab::Seq> = Vec::new();
        let mut oracles = [Oracle::default(), Oracle { by_value: true, ..Oracle::default() }];
        // The oracles' snapshots after each event, by reference and by value.
        let mut expected: Vec<[ToolHistory; 2]> = vec![[ToolHistory::default(), ToolHistory::default()]];
        for (i, op) in ops.into_iter().enumerate() {
            let event = match op {
                LogOp::Header { tools, reason, starts_series } => {
                    let tools: Vec<ToolSchema> = tools.into_iter().map(|(t, v)| named_tool(t, v)).collect();
                    let reason = match reason {
                        0 => mektpoy::event::Reason::Initial,
                        1 => mektpoy::event::Reason::Change,
                        _ => mektpoy::event::Reason::Series,
                    };
                    let mut event = Event::header(
                        mektpoy::event::RequestHeader::new(Config::new("p", "m"), tools),
                        reason,
                    );
                    if let Event::Header(h) = &mut event {
                        std::sync::Arc::make_mut(h).starts_series = starts_series;
                    }
                    event
                }
                LogOp::Developer { back, blocks } => {
                    let header = back.and_then(|b| headers.iter().rev().nth(b as usize).copied());
                    let blocks: Vec<mektpoy::ContentBlock> = blocks
                        .into_iter()
                        .map(|(kind, name)| match kind {
                            0 => mektpoy::ContentBlock::addition(NAMES[name]).unwrap(),
                            1 => mektpoy::ContentBlock::removal(NAMES[name]).unwrap(),
                            2 => mektpoy::ContentBlock::redefinition(NAMES[name]).unwrap(),
                            _ => mektpoy::ContentBlock::text("note"),
                        })
                        .collect();
                    Event::developer(Message::developer(format!("d{i}"), blocks), header)
                }
                LogOp::User => Event::append(Message::user(format!("u{i}"), "hi")),
            };
            // Refused events (an addition absent from its header, ...) are not in the log.
            let Ok(seq) = session.append(event.clone()) else { continue };
            if matches!(event, Event::Header(_)) {
                headers.push(seq);
            }
            for oracle in &mut oracles {
                oracle.fold(seq.0, &event);
            }
            expected.push([oracles[0].snapshot(), oracles[1].snapshot()]);
        }
        let len = session.len();
        // Incremental: a fork read after each event it appends.
        let incremental = Session::new("i");
        for (k, event) in session.events().iter().enumerate() {
            incremental.append(event.clone()).unwrap();
            prop_assert_eq!(&incremental.tool_history(), &expected[k + 1][0]);
            prop_assert_eq!(&incremental.tool_history_by_value(), &expected[k + 1][1]);
        }
        // From scratch: a fresh fork at the end and at `cut` percent, and a loaded copy.
        let at = len * cut as usize / 100;
        for upto in [len, at] {
            let fork = Session::fork(&session, upto as u64, "f").unwrap();
            prop_assert_eq!(&fork.tool_history(), &expected[upto][0]);
            prop_assert_eq!(&fork.tool_history_by_value(), &expected[upto][1]);
        }
        let loaded = Session::load_bytes(session.to_jsonl().as_bytes()).unwrap().session;
        prop_assert_eq!(&loaded.tool_history_by_value(), &expected[len][1]);
        prop_assert_eq!(&loaded.tool_history(), &expected[len][0]);
    }
}
