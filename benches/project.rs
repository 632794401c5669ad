//! `project_tool_updates` per mode: over the inputs of the conformance vectors
//! (`tests/conformance/project.json`, parsed once, outside the timed loop), on recorded
//! histories of about 100, 1,000 and 10,000 messages, and the Messages serializer after it.
//!
//! Run: `cargo bench --bench project -- --warm-up-time 1 --measurement-time 3`. Figures in
//! `docs/benchmarks.md`.

use std::cell::OnceCell;
use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use mektpoy::{
    Message, Request, ToolSchema,
    history::ToolHistory,
    project::{ProjectedToolUpdates, project_tool_updates, project_tool_updates_inline},
    route::ToolUpdateMode,
    route_for,
    wire::serialize,
};
use serde::Deserialize;

mod common;

/// One vector's input, as the `project` example reads it (tests/conformance/README.md).
#[derive(Deserialize)]
struct Input {
    messages: Vec<Message>,
    #[serde(default)]
    tools: Option<Vec<ToolSchema>>,
    #[serde(default)]
    mode: Option<ToolUpdateMode>,
    #[serde(default)]
    history: Option<ToolHistory>,
    #[serde(default)]
    inline: bool,
}

#[derive(Deserialize)]
struct Vector {
    input: Input,
}

impl Input {
    fn mode_name(&self) -> &'static str {
        match (self.inline, self.mode) {
            (true, _) => "inline",
            (false, None) => "none",
            (false, Some(ToolUpdateMode::InHistory)) => "in-history",
            (false, Some(ToolUpdateMode::AdditionOnly)) => "addition-only",
        }
    }

    fn project(&self) -> ProjectedToolUpdates<'_> {
        if self.inline {
            project_tool_updates_inline(
                &self.messages,
                self.tools.as_deref(),
                self.history.as_ref(),
            )
        } else {
            project_tool_updates(
                &self.messages,
                self.tools.as_deref(),
                self.mode,
                self.history.as_ref(),
            )
        }
    }
}

/// Every conformance vector's input, projected in process: one id per mode and one over all
/// of them (throughput in projections).
fn vectors(c: &mut Criterion) {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/conformance/project.json"
    );
    let text = std::fs::read_to_string(path).expect("read project.json");
    let vectors: Vec<Vector> = serde_json::from_str(&text).expect("parse project.json");
    let inputs: Vec<Input> = vectors.into_iter().map(|v| v.input).collect();
    let mut group = c.benchmark_group("project_vectors");
    for mode in ["none", "in-history", "addition-only", "inline", "all"] {
        let of_mode: Vec<&Input> = inputs
            .iter()
            .filter(|i| mode == "all" || i.mode_name() == mode)
            .collect();
        group.throughput(Throughput::Elements(of_mode.len() as u64));
        group.bench_with_input(BenchmarkId::new(mode, of_mode.len()), &of_mode, |b, of| {
            b.iter(|| {
                for input in of {
                    black_box(input.project());
                }
            })
        });
    }
    group.finish();
}

/// Histories of about 100, 1,000 and 10,000 messages: (label, steps of `session_with_churn`,
/// about 2.2 messages a step). The actual counts are 101, 1,000 and 10,001.
const SIZES: [(u64, u64); 3] = [(100, 46), (1000, 455), (10000, 4546)];

/// A recorded request and its session's by-value snapshot.
type Recorded = (Request, ToolHistory);

fn recorded(steps: u64) -> Recorded {
    let (session, request) = common::session_with_churn("deepseek-flash", steps, 5);
    (request, session.tool_history_by_value())
}

/// Every mode on each history. A history is recorded on the first benchmark that runs on it
/// (so a filter that selects none of its ids skips the recording).
fn project(c: &mut Criterion) {
    let mut group = c.benchmark_group("project_tool_updates");
    for (label, steps) in SIZES {
        let history: OnceCell<Recorded> = OnceCell::new();
        let history = &history;
        for (name, mode) in [
            ("none", None),
            ("in-history", Some(ToolUpdateMode::InHistory)),
            ("addition-only", Some(ToolUpdateMode::AdditionOnly)),
        ] {
            group.bench_function(BenchmarkId::new(name, label), |b| {
                let (request, _) = history.get_or_init(|| recorded(steps));
                b.iter(|| {
                    black_box(project_tool_updates(
                        &request.messages,
                        Some(&request.tools),
                        mode,
                        Some(&request.tool_history),
                    ))
                })
            });
        }
        // The same request on an inline-definition route reads the by-value snapshot.
        group.bench_function(BenchmarkId::new("inline", label), |b| {
            let (request, by_value) = history.get_or_init(|| recorded(steps));
            b.iter(|| {
                black_box(project_tool_updates_inline(
                    &request.messages,
                    Some(&request.tools),
                    Some(by_value),
                ))
            })
        });
    }
    group.finish();

    c.bench_function("serialize_messages/addition-only/1000", |b| {
        let (request, _) = recorded(SIZES[1].1);
        let route = route_for("deepseek", "deepseek-flash");
        let projected = project_tool_updates(
            &request.messages,
            Some(&request.tools),
            route.tool_update(),
            Some(&request.tool_history),
        );
        b.iter(|| black_box(serialize(&request.config, &projected, &route).expect("serialize")))
    });
}

criterion_group!(benches, vectors, project);
criterion_main!(benches);
