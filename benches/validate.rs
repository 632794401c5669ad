//! Checking and folding a developer message against a header of 10 and of 10,000 tools, and
//! appending a tool call and its result on a surface of 100 and of 100,000 pairs.
//!
//! reference §1 promises O(size of the event + log n) per check: the cost of a developer message
//! naming a header must not grow with the header's tools. An index rebuilt per message made it
//! O(tools): 115 µs per event against 10,000 tools, 2.2 µs against 10.
//!
//! Run: `cargo bench --bench validate`. Figures in `docs/benchmarks.md`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{BatchSize, BenchmarkId, Criterion, criterion_group, criterion_main};
use mektpoy::{
    Config, ContentBlock, Event, Message, Session, ToolSchema,
    event::{Reason, RequestHeader},
    vocab::{MessageSource, Role, Seq},
};

/// Developer messages folded per run of the fold benchmark (as in the measurement).
const MESSAGES: usize = 20_000;

fn header(tools: usize) -> Event {
    let tools: Vec<ToolSchema> = (0..tools)
        .map(|i| ToolSchema::no_input(format!("tool{i}"), "a tool"))
        .collect();
    Event::header(
        RequestHeader::new(Config::new("anthropic", "claude-opus-5"), tools),
        Reason::Initial,
    )
}

/// Developer message `i`: adds one tool of a header of `tools` tools, naming header 0.
fn developer(i: usize, tools: usize) -> Event {
    Event::developer(
        Message::developer(
            format!("d{i}"),
            vec![ContentBlock::addition(format!("tool{}", i % tools)).unwrap()],
        ),
        Some(Seq(0)),
    )
}

fn validate(c: &mut Criterion) {
    let mut group = c.benchmark_group("developer_message");
    for tools in [10usize, 10_000] {
        // `append` = validation (reference §1) + applying the event, per event. A fresh session per
        // sample; its header is setup, not measured.
        group.bench_function(BenchmarkId::new("append", tools), |b| {
            b.iter_custom(|iters| {
                let session = Session::new("bench");
                session.append(header(tools)).expect("header");
                let start = Instant::now();
                for i in 0..iters as usize {
                    session.append(developer(i, tools)).expect("append");
                }
                start.elapsed()
            })
        });
        // The by-reference fold of a header and MESSAGES developer messages naming it, and of
        // the header alone: (fold − header) / MESSAGES is the cost per message.
        // Each is folded from scratch: the first read of a fresh fork.
        let log = Session::new("fold");
        log.append(header(tools)).expect("header");
        group.bench_function(BenchmarkId::new("fold_header_only", tools), |b| {
            b.iter_batched(
                || fresh(&log),
                |f| black_box(f.tool_history()),
                BatchSize::SmallInput,
            )
        });
        for i in 0..MESSAGES {
            log.append(developer(i, tools)).expect("developer message");
        }
        group.bench_function(
            BenchmarkId::new(format!("fold_header_and_{MESSAGES}_messages"), tools),
            |b| {
                b.iter_batched(
                    || fresh(&log),
                    |f| black_box(f.tool_history()),
                    BatchSize::SmallInput,
                )
            },
        );
    }
    group.finish();
}

/// An assistant message holding call `c{i}`, and its result.
fn call_and_result(i: usize) -> [Event; 2] {
    let call = Message::new(
        format!("a{i}"),
        Role::Assistant,
        vec![ContentBlock::tool_call(format!("c{i}"), "read".to_owned(), "{}".to_owned()).unwrap()],
        MessageSource::Model {
            provider: "anthropic".to_owned(),
            model: "claude-opus-5".to_owned(),
        },
    );
    let result = Message::tool_result(format!("t{i}"), format!("c{i}"), "ok");
    [Event::append(call), Event::append(result)]
}

/// reference §1 items 17 and 18: a tool result is checked against an index of the surface's
/// calls, so appending a call and its result costs the same on a surface of 100 pairs as on
/// one of 100,000.
fn tool_results(c: &mut Criterion) {
    let mut group = c.benchmark_group("tool_result");
    for pairs in [100usize, 100_000] {
        let session = Session::new("bench");
        for i in 0..pairs {
            for e in call_and_result(i) {
                session.append(e).expect("pair");
            }
        }
        let mut next = pairs;
        group.bench_function(BenchmarkId::new("append_call_and_result", pairs), |b| {
            b.iter_custom(|iters| {
                let events: Vec<[Event; 2]> = (0..iters as usize)
                    .map(|k| call_and_result(next + k))
                    .collect();
                next += iters as usize;
                let start = Instant::now();
                for pair in events {
                    for e in pair {
                        session.append(e).expect("append");
                    }
                }
                start.elapsed()
            })
        });
    }
    group.finish();
}

/// A fork of the whole of `log` whose folds have read nothing yet.
fn fresh(log: &Session) -> Session {
    Session::fork(log, log.len() as u64, "f").expect("fork")
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4));
    targets = validate, tool_results
}
criterion_main!(benches);
