//! Incremental `tool_history()` (by reference) and `tool_history_by_value()` against a full
//! rescan of the same log.
//!
//! Run: `cargo bench --bench fold`. Figures in `docs/benchmarks.md`.

use std::hint::black_box;

use criterion::{BatchSize, Bencher, BenchmarkId, Criterion, criterion_group, criterion_main};
use mektpoy::history::ToolHistory;
use mektpoy::{Event, Message, Session};

mod common;

/// A fold read: `Session::tool_history` (by reference) or `Session::tool_history_by_value`.
type Read = fn(&Session) -> ToolHistory;

/// `read` after one new event on a fork of `s` whose fold is cached. Forking, warming and
/// appending are setup; the fork is returned, so criterion drops it outside the timing.
fn after_one_append(b: &mut Bencher<'_>, s: &Session, read: Read) {
    b.iter_batched(
        || {
            let f = Session::fork(s, s.len() as u64, "f").expect("fork");
            let _ = read(&f);
            f.append(Event::append(Message::user("x", "more")))
                .expect("append");
            f
        },
        |f| {
            let history = black_box(read(&f));
            (f, history)
        },
        BatchSize::SmallInput,
    )
}

/// `read` on a fresh fork of `s`: the first read folds the whole log (the full rescan).
fn first_read(b: &mut Bencher<'_>, s: &Session, read: Read, size: BatchSize) {
    first_read_at(b, s, s.len(), read, size)
}

/// `read` on a fresh fork of `s`'s first `upto` events: from scratch when `s` never folded,
/// else from `s`'s fold or its last checkpoint before `upto` (decision 78).
fn first_read_at(b: &mut Bencher<'_>, s: &Session, upto: usize, read: Read, size: BatchSize) {
    b.iter_batched(
        || Session::fork(s, upto as u64, "f").expect("fork"),
        |f| {
            let history = black_box(read(&f));
            (f, history)
        },
        size,
    )
}

fn fold(c: &mut Criterion) {
    let by_reference: Read = Session::tool_history;
    let by_value: Read = Session::tool_history_by_value;
    let mut group = c.benchmark_group("tool_history");
    for steps in [200u64, 2_000] {
        let (s, _) = common::session_with_churn("claude-opus-5", steps, 1);
        let events = s.len();
        group.bench_function(BenchmarkId::new("incremental", events), |b| {
            after_one_append(b, &s, by_reference)
        });
        group.bench_function(BenchmarkId::new("full_rescan", events), |b| {
            first_read(b, &s, by_reference, BatchSize::SmallInput)
        });
        group.bench_function(BenchmarkId::new("by_value_incremental", events), |b| {
            after_one_append(b, &s, by_value)
        });
        group.bench_function(BenchmarkId::new("by_value_full_rescan", events), |b| {
            first_read(b, &s, by_value, BatchSize::SmallInput)
        });
    }
    group.finish();

    // The first read of a fresh fork at 1k, 10k and 100k events (issue 13), on a log appended
    // directly (`common::log_with_churn`; recording 100k events would take minutes), built
    // once outside the timed loop.
    let mut group = c.benchmark_group("from_scratch");
    for events in [1_000usize, 10_000, 100_000] {
        // Exactly `events` events: the log cut there (a step may be cut short).
        let s = common::log_with_churn(events);
        if events >= 100_000 {
            group.sample_size(10);
        }
        group.bench_function(BenchmarkId::new("full_rescan", events), |b| {
            first_read(b, &s, by_reference, BatchSize::LargeInput)
        });
        group.bench_function(BenchmarkId::new("by_value_full_rescan", events), |b| {
            first_read(b, &s, by_value, BatchSize::LargeInput)
        });
        // The same log in a parent whose two folds were computed (decision 78): a fork at its
        // end starts from its fold, one at three quarters from the last checkpoint before.
        let warm = Session::fork(&s, s.len() as u64, "warm").expect("fork");
        let _ = (warm.tool_history(), warm.tool_history_by_value());
        let three_quarters = events * 3 / 4;
        group.bench_function(BenchmarkId::new("folded_parent_at_end", events), |b| {
            first_read(b, &warm, by_reference, BatchSize::LargeInput)
        });
        group.bench_function(BenchmarkId::new("folded_parent_at_3_4", events), |b| {
            first_read_at(
                b,
                &warm,
                three_quarters,
                by_reference,
                BatchSize::LargeInput,
            )
        });
        group.bench_function(
            BenchmarkId::new("by_value_folded_parent_at_3_4", events),
            |b| first_read_at(b, &warm, three_quarters, by_value, BatchSize::LargeInput),
        );
        // The worst fork point: just before a checkpoint, so that 4,095 fold events are folded
        // from the previous one. This log has two fold events every four events, so the
        // `k`-th checkpoint is right after event `8,192 k - 3`; the fork stops one short.
        if let Some(k) = (events + 2).checked_div(8_192).filter(|k| *k > 1) {
            group.bench_function(BenchmarkId::new("folded_parent_worst", events), |b| {
                first_read_at(b, &warm, 8_192 * k - 3, by_reference, BatchSize::LargeInput)
            });
        }
        // The same fork point on the parent that never folded: from scratch.
        group.bench_function(BenchmarkId::new("full_rescan_at_3_4", events), |b| {
            first_read_at(b, &s, three_quarters, by_reference, BatchSize::LargeInput)
        });
        // The same log saved and loaded: each header's tools decoded from its own line (before
        // decision 76 each header then held its own copies, compared field by field with the
        // previous header's; interned, they are the same allocations).
        let loaded = Session::load_bytes(s.to_jsonl().as_bytes())
            .expect("the log loads")
            .session;
        group.bench_function(BenchmarkId::new("after_load", events), |b| {
            first_read(b, &loaded, by_reference, BatchSize::LargeInput)
        });
        group.bench_function(BenchmarkId::new("by_value_after_load", events), |b| {
            first_read(b, &loaded, by_value, BatchSize::LargeInput)
        });
    }
    group.finish();
}

criterion_group!(benches, fold);
criterion_main!(benches);
