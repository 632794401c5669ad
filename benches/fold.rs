//! Incremental `tool_history()` against a full rescan of the same log.
//!
//! Run: `cargo bench --bench fold`. Figures in `docs/benchmarks.md`.

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use mektpoy::history::fold_events;
use mektpoy::{
    Config, Event, Message, Recorder, Route, Session, Step, ToolSchema, ToolUpdateMode, WireApi,
};

/// A session of `steps` recorded steps with tool churn (about 5 events a step).
fn session(steps: u64) -> Session {
    let session = Session::new("bench");
    let mut recorder = Recorder::attach(&session);
    let config = Config::new("deepseek", "deepseek-flash");
    let mut route = Route::plain("deepseek", "deepseek-flash", WireApi::Messages);
    route.tool_update = Some(ToolUpdateMode::InHistory);
    route.system_prompt_in_history = true;
    let pool: Vec<ToolSchema> = (0..12)
        .map(|i| {
            ToolSchema::new(
                format!("tool{i}"),
                format!("tool number {i}"),
                Default::default(),
            )
        })
        .collect();
    for step in 0..steps {
        // Tools 0..8 always, then a rotating window of the rest.
        let tools: Vec<ToolSchema> = pool
            .iter()
            .enumerate()
            .filter(|(i, _)| *i < 8 || (*i as u64 + step) % 3 == 0)
            .map(|(_, t)| t.clone())
            .collect();
        recorder
            .record(
                &session,
                Step {
                    config: &config,
                    system_prompt: "You are a careful assistant.",
                    tools: &tools,
                    route: &route,
                    new_series: false,
                    turn: step,
                    step: 0,
                    attempt: 0,
                    user_messages: &[Message::user(format!("u{step}"), "next step")],
                },
            )
            .expect("record");
        session
            .append(Event::append(Message::assistant(
                format!("a{step}"),
                "ok",
                "p",
                "m",
            )))
            .expect("append");
    }
    session
}

fn fold(c: &mut Criterion) {
    let mut group = c.benchmark_group("tool_history");
    for steps in [200u64, 2_000] {
        let s = session(steps);
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
