//! Loading and saving a session log (issue 13): `Session::load_bytes` of a file, and the bytes
//! `Session::save` writes (`to_jsonl`, and `save` itself to a file), at 1k / 10k / 100k events;
//! and loading followed by the first `tool_history()`, the first read of a resumed session.
//!
//! Run: `cargo bench --bench load`. Figures in `docs/benchmarks.md` ("Loading and saving").

use std::hint::black_box;

use criterion::{BatchSize, BenchmarkId, Criterion, criterion_group, criterion_main};
use mektpoy::Session;

mod common;

fn load(c: &mut Criterion) {
    let mut group = c.benchmark_group("load");
    let dir = tempfile::tempdir().expect("a temporary directory");
    for events in [1_000usize, 10_000, 100_000] {
        if events >= 100_000 {
            group.sample_size(10);
        }
        // The file `save` writes for a log appended in this process: every line is the
        // encoder's own.
        let bytes = common::log_with_churn(events).to_jsonl();
        group.bench_function(BenchmarkId::new("load_bytes", events), |b| {
            b.iter_batched(
                || (),
                |()| black_box(Session::load_bytes(bytes.as_bytes()).expect("loads")),
                BatchSize::PerIteration,
            )
        });
        // Loading, then the read a resumed loop starts with.
        group.bench_function(BenchmarkId::new("load_then_tool_history", events), |b| {
            b.iter_batched(
                || (),
                |()| {
                    let loaded = Session::load_bytes(bytes.as_bytes()).expect("loads");
                    let history = black_box(loaded.session.tool_history());
                    (loaded, history)
                },
                BatchSize::PerIteration,
            )
        });
        // Saving a loaded session: its lines come from the bytes kept at load, or from the
        // encoder when none were kept.
        let loaded = Session::load_bytes(bytes.as_bytes())
            .expect("loads")
            .session;
        group.bench_function(BenchmarkId::new("to_jsonl_loaded", events), |b| {
            b.iter(|| black_box(loaded.to_jsonl()))
        });
        let path = dir.path().join(format!("s{events}.jsonl"));
        group.bench_function(BenchmarkId::new("save_loaded", events), |b| {
            b.iter(|| loaded.save(&path).expect("saves"))
        });
    }
    group.finish();
}

criterion_group!(benches, load);
criterion_main!(benches);
