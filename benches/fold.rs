//! Incremental `tool_history()` against a full rescan of the same log.
//!
//! Run: `cargo bench --bench fold`. Figures in `docs/benchmarks.md`.

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use mektpoy::history::fold_events;
use mektpoy::{Event, Message};

mod common;

fn fold(c: &mut Criterion) {
    let mut group = c.benchmark_group("tool_history");
    for steps in [200u64, 2_000] {
        let (s, _) = common::session_with_churn("claude-opus-5", steps, 1);
        let events = s.events().len();
        let _ = s.tool_history();
        let next = AtomicU64::new(0);
        group.bench_with_input(BenchmarkId::new("incremental", events), &s, |b, s| {
            b.iter(|| {
                let n = next.fetch_add(1, Ordering::Relaxed);
                s.append(Event::append(Message::user(format!("x{n}"), "more")))
                    .expect("append");
                black_box(s.tool_history())
            })
        });
        let log = s.events();
        group.bench_with_input(BenchmarkId::new("full_rescan", events), &log, |b, log| {
            b.iter(|| black_box(fold_events(log.iter())))
        });
    }
    group.finish();
}

criterion_group!(benches, fold);
criterion_main!(benches);
