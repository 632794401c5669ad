//! `project_tool_updates` per mode on one recorded request, and the Messages serializer after it.
//!
//! Run: `cargo bench --bench project`. Figures in `docs/benchmarks.md`.

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use mektpoy::{
    Config, Event, Message, Recorder, Request, Session, Step, ToolSchema, ToolUpdateMode,
    project_tool_updates, route_for, serialize,
};

/// The last request of a session of `steps` steps with tool churn.
fn last_request(steps: u64) -> Request {
    let session = Session::new("bench");
    let mut recorder = Recorder::attach(&session);
    let config = Config::new("deepseek", "deepseek-flash").with("max_tokens", 1024.into());
    let route = route_for("deepseek", "deepseek-flash");
    let pool: Vec<ToolSchema> = (0..12)
        .map(|i| {
            ToolSchema::new(
                format!("tool{i}"),
                format!("tool number {i}"),
                Default::default(),
            )
        })
        .collect();
    let mut last = None;
    for step in 0..steps {
        let tools: Vec<ToolSchema> = pool
            .iter()
            .enumerate()
            .filter(|(i, _)| *i < 8 || (*i as u64 + step / 5) % 3 == 0)
            .map(|(_, t)| t.clone())
            .collect();
        last = Some(
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
                .expect("record"),
        );
        session
            .append(Event::append(Message::assistant(
                format!("a{step}"),
                "ok",
                "p",
                "m",
            )))
            .expect("append");
    }
    last.expect("at least one step")
}

fn project(c: &mut Criterion) {
    let request = last_request(500);
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
    group.finish();

    let route = route_for("deepseek", "deepseek-flash");
    let projected = project_tool_updates(
        &request.messages,
        Some(&request.tools),
        route.tool_update,
        Some(&request.tool_history),
    );
    c.bench_function("serialize_messages/addition-only", |b| {
        b.iter(|| black_box(serialize(&request.config, &projected, &route).expect("serialize")))
    });
}

criterion_group!(benches, project);
criterion_main!(benches);
