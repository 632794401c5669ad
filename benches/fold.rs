//! Incremental `tool_history()` (by reference) and `tool_history_by_value()` against a full
//! rescan of the same log.
//!
//! Run: `cargo bench --bench fold`. Figures in `docs/benchmarks.md`.

use std::hint::black_box;

use criterion::{BatchSize, BenchmarkId, Criterion, criterion_group, criterion_main};
use mektpoy::{Event, Message, Session};

mod common;

fn fold(c: &mut Criterion) {
    let mut group = c.benchmark_group("tool_history");
    for steps in [200u64, 2_000] {
        let (s, _) = common::session_with_churn("claude-opus-5", steps, 1);
        let events = s.len();
        // `tool_history()` after one new event on a log of exactly `events` events whose fold
        // is cached. Forking, warming and appending are setup, not measured.
        group.bench_function(BenchmarkId::new("incremental", events), |b| {
            b.iter_batched(
                || {
                    let f = Session::fork(&s, events as u64, "f").expect("fork");
                    let _ = f.tool_history();
                    f.append(Event::append(Message::user("x", "more")))
                        .expect("append");
                    f
                },
                |f| {
                    let history = black_box(f.tool_history());
                    // Returned, so criterion drops the fork outside the timing.
                    (f, history)
                },
                BatchSize::SmallInput,
            )
        });
        // The full rescan: the first read of a fresh fork folds the whole log.
        group.bench_function(BenchmarkId::new("full_rescan", events), |b| {
            b.iter_batched(
                || Session::fork(&s, s.len() as u64, "f").expect("fork"),
                |f| black_box(f.tool_history()),
                BatchSize::SmallInput,
            )
        });
        // The by-value fold: incremental after one append, and from scratch (the first call
        // on a fresh fork folds the whole log).
        group.bench_function(BenchmarkId::new("by_value_incremental", events), |b| {
            b.iter_batched(
                || {
                    let f = Session::fork(&s, events as u64, "f").expect("fork");
                    let _ = f.tool_history_by_value();
                    f.append(Event::append(Message::user("x", "more")))
                        .expect("append");
                    f
                },
                |f| {
                    let history = black_box(f.tool_history_by_value());
                    (f, history)
                },
                BatchSize::SmallInput,
            )
        });
        group.bench_function(BenchmarkId::new("by_value_full_rescan", events), |b| {
            b.iter_batched(
                || Session::fork(&s, events as u64, "f").expect("fork"),
                |f| {
                    let history = black_box(f.tool_history_by_value());
                    (f, history)
                },
                BatchSize::SmallInput,
            )
        });
    }
    group.finish();

    // The first read of a fresh fork at 1k, 10k and 100k events (issue 13), on a log appended
    // directly (`common::log_with_churn`; recording 100k events would take minutes). Built once,
    // outside the timed loop; each iteration forks it (setup) and reads both folds' first
    // snapshot.
    let mut group = c.benchmark_group("from_scratch");
    for events in [1_000usize, 10_000, 100_000] {
        // Exactly `events` events: the log cut there (a step may be cut short).
        let s = common::log_with_churn(events);
        if events >= 100_000 {
            group.sample_size(10);
        }
        group.bench_function(BenchmarkId::new("full_rescan", events), |b| {
            b.iter_batched(
                || Session::fork(&s, events as u64, "f").expect("fork"),
                |f| {
                    let history = black_box(f.tool_history());
                    (f, history)
                },
                BatchSize::LargeInput,
            )
        });
        group.bench_function(BenchmarkId::new("by_value_full_rescan", events), |b| {
            b.iter_batched(
                || Session::fork(&s, events as u64, "f").expect("fork"),
                |f| {
                    let history = black_box(f.tool_history_by_value());
                    (f, history)
                },
                BatchSize::LargeInput,
            )
        });
    }
    group.finish();
}

criterion_group!(benches, fold);
criterion_main!(benches);
