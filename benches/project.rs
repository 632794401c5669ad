//! `project_tool_updates` per mode on one recorded request, and the Messages serializer after it.
//!
//! Run: `cargo bench --bench project`. Figures in `docs/benchmarks.md`.

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use mektpoy::{
    project::{project_tool_updates, project_tool_updates_inline},
    route::ToolUpdateMode,
    route_for,
    wire::serialize,
};

mod common;

fn project(c: &mut Criterion) {
    let (session, request) = common::session_with_churn("deepseek-flash", 500, 5);
    let mut group = c.benchmark_group("project_tool_updates");
    for (name, mode) in [
        ("none", None),
        ("in-history", Some(ToolUpdateMode::InHistory)),
        ("addition-only", Some(ToolUpdateMode::AdditionOnly)),
    ] {
        group.bench_with_input(
            BenchmarkId::new(name, request.messages.len()),
            &mode,
            |b, mode| {
                b.iter(|| {
                    black_box(project_tool_updates(
                        &request.messages,
                        Some(&request.tools),
                        *mode,
                        Some(&request.tool_history),
                    ))
                })
            },
        );
    }
    // The same request on an inline-definition route reads the by-value snapshot.
    let by_value = session.tool_history_by_value();
    group.bench_function(BenchmarkId::new("inline", request.messages.len()), |b| {
        b.iter(|| {
            black_box(project_tool_updates_inline(
                &request.messages,
                Some(&request.tools),
                Some(&by_value),
            ))
        })
    });
    group.finish();

    let route = route_for("deepseek", "deepseek-flash");
    let projected = project_tool_updates(
        &request.messages,
        Some(&request.tools),
        route.tool_update(),
        Some(&request.tool_history),
    );
    c.bench_function("serialize_messages/addition-only", |b| {
        b.iter(|| black_box(serialize(&request.config, &projected, &route).expect("serialize")))
    });
}

criterion_group!(benches, project);
criterion_main!(benches);
