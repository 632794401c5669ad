//! The registration-time schema guard (`Session::check_tool`, decision 75) on a surface of 100
//! and of 100,000 call-and-result pairs, against a scan of the surface doing the same work.
//!
//! The guard reads the pairing index by tool name, so a check costs O(log n) for a name never
//! called and O(k · log n) for `k` messages calling it, whatever the surface's length; the scan
//! is what a caller would write without the index.
//!
//! Run: `cargo bench --bench guard -- --warm-up-time 1 --measurement-time 3`. Figures in
//! `docs/benchmarks.md`.

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use mektpoy::{
    Config, ContentBlock, Event, Message, Session, ToolSchema,
    event::{Reason, RequestHeader},
    session::SurfaceNode,
    vocab::{MessageSource, Role},
};

/// Calls of `edit` among the pairs (the rest call `read`), spread over the surface.
const EDITS: usize = 10;

fn tool(name: &str, description: &str) -> ToolSchema {
    ToolSchema::no_input(name, description)
}

/// A session whose surface holds `pairs` assistant calls with their results, `EDITS` of them
/// calling `edit` (as first declared), the others `read`.
fn session_of(pairs: usize) -> Session {
    let session = Session::new("bench");
    session
        .append(Event::header(
            RequestHeader::new(
                Config::new("anthropic", "claude-opus-5"),
                vec![tool("read", "read"), tool("edit", "edit v1")],
            ),
            Reason::Initial,
        ))
        .expect("header");
    let every = pairs / EDITS;
    for i in 0..pairs {
        let name = if i % every == 0 { "edit" } else { "read" };
        let call = Message::new(
            format!("a{i}"),
            Role::Assistant,
            vec![
                ContentBlock::tool_call(format!("c{i}"), name.to_owned(), "{}".to_owned()).unwrap(),
            ],
            MessageSource::Model {
                provider: "anthropic".to_owned(),
                model: "claude-opus-5".to_owned(),
            },
        );
        session.append(Event::append(call)).expect("call");
        let result = Message::tool_result(format!("t{i}"), format!("c{i}"), "ok");
        session.append(Event::append(result)).expect("result");
    }
    session
}

/// The calls of `name` on the surface, found by walking it (without the header look-up the
/// guard also does: the scan's cheapest part).
fn scan(session: &Session, name: &str) -> usize {
    session
        .surface()
        .iter()
        .filter_map(|n| match n {
            SurfaceNode::Message(m) if m.role() == Role::Assistant => Some(m),
            _ => None,
        })
        .flat_map(|m| m.tool_calls())
        .filter(|c| c.name() == name)
        .count()
}

fn guard(c: &mut Criterion) {
    let mut group = c.benchmark_group("schema_guard");
    let never = tool("grep", "grep");
    let changed = tool("edit", "edit v2");
    for pairs in [100usize, 100_000] {
        let session = session_of(pairs);
        assert!(session.check_tool(&never).is_ok());
        assert_eq!(session.check_tool(&changed).unwrap_err().calls.len(), EDITS);
        assert_eq!(scan(&session, "edit"), EDITS);
        group.bench_function(BenchmarkId::new("check_never_called", pairs), |b| {
            b.iter(|| black_box(session.check_tool(black_box(&never))))
        });
        group.bench_function(BenchmarkId::new("check_10_conflicting_calls", pairs), |b| {
            b.iter(|| black_box(session.check_tool(black_box(&changed))))
        });
        group.bench_function(BenchmarkId::new("scan_surface", pairs), |b| {
            b.iter(|| black_box(scan(&session, black_box("edit"))))
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = guard
}
criterion_main!(benches);
