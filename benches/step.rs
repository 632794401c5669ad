//! One whole loop step at 100 / 1,000 / 10,000 messages, and each of its stages alone, so that
//! what grows with the history shows (issue 13, incremental requests).
//!
//! The step is what a loop does after the model's answer: the answer (an assistant message
//! with a tool call) and its tool result are appended (setup, not timed), then
//! `AgentLoop::next_step` records the request (`record`), `Request::project` projects it,
//! `Request::into_wire` gives the bytes (moving the prepared body out; `to_wire`, which copies
//! it, is timed alone) and `AgentLoop::observe` meters them. `step` times the
//! four together; each other benchmark times one stage:
//!
//! - `record`: `next_step` (this also projects and serializes, resuming from the route's
//!   previous request, and on a Messages-API route compares with it: rewrite detection,
//!   lookback, thinking floor);
//! - `messages`: `Session::messages` after the round's appends, the surface's message list
//!   `record` builds for `Request.messages` (O(history) today, part of `record`);
//! - `project`, `serialize` (a fresh `wire::serialize`: what the recorder's pass does when it
//!   cannot resume), `to_wire`;
//! - `loop_observe`: `AgentLoop::observe` alone in the running loop: the meter through the
//!   loop's entry (it cuts the body by the serializer's spans and compares only what follows
//!   the wire messages kept from the previous request) and the attribution;
//! - `observe`: the public `Meter::observe` (which parses the body) on a copy of the warm
//!   meter (the copy is setup);
//! - `copy`: copying a `String` of the body's length, the one copy of the body the issue
//!   leaves out of its 3x target.
//!
//! The `resume` group compares, on each route at 10 and 1,000 messages, `record` (resumed from
//! the route's previous request) with `serialize` (written from the first message).
//!
//! Routes: `deepseek-flash` (Messages API, addition-only mode), OpenAI-compatible chat and
//! `gpt-5.4` (OpenAI's Responses API, addition-only mode). The
//! history is appended directly (a user turn, then answer / tool result pairs), so building
//! 10,000 messages takes a moment, not the recorder's quadratic minutes; the recorder then
//! records one warm-up step (its memory of the route is warm, as in a running loop). Every 2%
//! of growth the loop is forked again from the built session, so the history stays within 2%
//! of its nominal length.
//!
//! Run: `cargo bench --bench step -- --warm-up-time 1 --measurement-time 3` (the resume group
//! alone: `... 'resume/'`). Figures in `docs/benchmarks.md`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{BatchSize, BenchmarkId, Criterion, SamplingMode, criterion_group, criterion_main};
use mektpoy::vocab::{MessageSource, Role};
use mektpoy::{
    AgentLoop, Config, ContentBlock, Message, Request, Route, Session, ToolSchema, WireRequest,
    route_for,
};

const SIZES: [usize; 3] = [100, 1_000, 10_000];

struct Setup {
    label: &'static str,
    provider: &'static str,
    model: &'static str,
}

const ROUTES: [Setup; 3] = [
    Setup {
        label: "messages_api",
        provider: "deepseek",
        model: "deepseek-flash",
    },
    Setup {
        label: "openai_chat",
        provider: "openai-compatible",
        model: "any",
    },
    Setup {
        label: "responses",
        provider: "openai",
        model: "gpt-5.4",
    },
];

/// The `resume` group's histories: 10 and 1,000 messages into a conversation.
const RESUME_SIZES: [usize; 2] = [10, 1_000];

fn tools() -> Vec<ToolSchema> {
    (0..8)
        .map(|i| {
            let mut parameters = serde_json::Map::new();
            parameters.insert("type".into(), "object".into());
            ToolSchema::new(format!("tool{i}"), format!("tool number {i}"), parameters)
        })
        .collect()
}

/// An answer calling `tool{n % 8}`, and its result: one round of an agent loop.
fn round(n: u64, s: &Setup) -> [Message; 2] {
    let call = format!("call{n}");
    let answer = Message::new(
        format!("a{n}"),
        Role::Assistant,
        vec![
            ContentBlock::text(format!("Reading part {n} of the file.")),
            ContentBlock::tool_call(
                call.clone(),
                format!("tool{}", n % 8),
                format!(r#"{{"path":"src/file{n}.rs","line":{n}}}"#),
            )
            .unwrap(),
        ],
        MessageSource::Model {
            provider: s.provider.into(),
            model: s.model.into(),
        },
    );
    let result = Message::tool_result(
        format!("r{n}"),
        call,
        format!("fn part_{n}() {{ /* about sixty bytes of tool output */ }}"),
    );
    [answer, result]
}

struct Fixture {
    /// The built session: `messages` messages, one warm recorded step.
    base: Session,
    route: Route,
    config: Config,
}

fn fixture(s: &Setup, messages: usize) -> Fixture {
    let route = route_for(s.provider, s.model);
    let config = Config::new(s.provider, s.model)
        .with("max_tokens", 1024.into())
        .unwrap();
    let mut agent = AgentLoop::builder(Session::new("bench"), route.clone())
        .config(config.clone())
        .system_prompt("You are a careful assistant.")
        .tools(tools())
        .build()
        .expect("the loop builds");
    agent
        .user_turn([Message::user("u0", "Read the files.")])
        .expect("record");
    let mut n = 0;
    while agent.session().messages().len() + 2 <= messages {
        for m in round(n, s) {
            agent.append(m).expect("append");
        }
        n += 1;
    }
    Fixture {
        base: agent.into_session(),
        route,
        config,
    }
}

/// A loop over a fork of the fixture whose recorder and meter have seen one step.
struct Warm {
    agent: AgentLoop,
    next: u64,
    start_len: usize,
}

impl Warm {
    fn new(f: &Fixture, s: &Setup) -> Self {
        let fork = Session::fork(&f.base, f.base.len() as u64, "f").expect("fork");
        let agent = AgentLoop::builder(fork, f.route.clone())
            .config(f.config.clone())
            .system_prompt("You are a careful assistant.")
            .tools(tools())
            .build()
            .expect("the loop builds");
        let start_len = agent.session().messages().len();
        let mut warm = Warm {
            agent,
            next: 1_000_000,
            start_len,
        };
        let (request, wire) = warm.step(s);
        warm.agent.observe(&wire).expect("observe");
        drop(request);
        warm
    }

    /// Appends one round and records the next step: the request and its bytes.
    fn step(&mut self, s: &Setup) -> (Request, WireRequest) {
        self.append_round(s);
        let request = self.agent.next_step().expect("record");
        let wire = request.to_wire().expect("wire");
        (request, wire)
    }

    fn append_round(&mut self, s: &Setup) {
        for m in round(self.next, s) {
            self.agent.append(m).expect("append");
        }
        self.next += 1;
    }

    fn grown(&self) -> bool {
        let len = self.agent.session().messages().len();
        len - self.start_len > (self.start_len / 50).max(2)
    }
}

/// What [`steps`] times of each step.
#[derive(Clone, Copy, PartialEq)]
enum Timed {
    /// `next_step`, `project`, `to_wire`, `observe`.
    Whole,
    /// `next_step` alone.
    Record,
    /// `AgentLoop::observe` alone (the meter through the loop's entry, and the attribution).
    Observe,
    /// The surface's message list after the round's appends, what `record` builds for
    /// `Request.messages` (its view of the batch): `Session::messages` rebuilds it.
    Messages,
}

/// `iters` loop steps on a warm loop, timing what `timed` says of each.
fn steps(f: &Fixture, s: &Setup, iters: u64, timed: Timed) -> Duration {
    let mut warm = Warm::new(f, s);
    let mut total = Duration::ZERO;
    for _ in 0..iters {
        if warm.grown() {
            drop(std::mem::replace(&mut warm, Warm::new(f, s)));
        }
        warm.append_round(s);
        if timed == Timed::Messages {
            let start = Instant::now();
            black_box(warm.agent.session().messages().len());
            total += start.elapsed();
            continue;
        }
        let start = Instant::now();
        let request = warm.agent.next_step().expect("record");
        match timed {
            Timed::Whole => {
                black_box(request.project().messages.len());
                // What a loop that sends the request and is done with it does: the prepared
                // body moves out (`to_wire` would copy it; its own stage below).
                let wire = request.into_wire().expect("wire");
                warm.agent.observe(&wire).expect("observe");
                total += start.elapsed();
                drop(wire);
            }
            Timed::Record => {
                total += start.elapsed();
                let wire = request.into_wire().expect("wire");
                warm.agent.observe(&wire).expect("observe");
            }
            Timed::Observe => {
                let wire = request.into_wire().expect("wire");
                let start = Instant::now();
                warm.agent.observe(&wire).expect("observe");
                total += start.elapsed();
            }
            Timed::Messages => unreachable!("timed above"),
        }
    }
    total
}

fn step(c: &mut Criterion) {
    let mut group = c.benchmark_group("step");
    group.sampling_mode(SamplingMode::Flat).sample_size(10);
    for s in &ROUTES {
        for size in SIZES {
            let f = fixture(s, size);
            let id = |stage: &str| BenchmarkId::new(format!("{}/{stage}", s.label), size);
            group.bench_function(id("step"), |b| {
                b.iter_custom(|iters| steps(&f, s, iters, Timed::Whole))
            });
            group.bench_function(id("record"), |b| {
                b.iter_custom(|iters| steps(&f, s, iters, Timed::Record))
            });
            group.bench_function(id("loop_observe"), |b| {
                b.iter_custom(|iters| steps(&f, s, iters, Timed::Observe))
            });
            group.bench_function(id("messages"), |b| {
                b.iter_custom(|iters| steps(&f, s, iters, Timed::Messages))
            });
            // The pure stages on one request of the warm loop.
            let mut warm = Warm::new(&f, s);
            let (request, wire) = warm.step(s);
            group.bench_function(id("project"), |b| {
                b.iter(|| black_box(request.project().messages.len()))
            });
            group.bench_function(id("serialize"), |b| {
                b.iter(|| {
                    let projected = request.project();
                    black_box(mektpoy::wire::serialize(
                        &request.config,
                        &projected,
                        request.route(),
                    ))
                    .expect("serialize")
                })
            });
            group.bench_function(id("to_wire"), |b| {
                b.iter(|| black_box(request.to_wire().expect("wire")))
            });
            group.bench_function(id("observe"), |b| {
                b.iter_batched(
                    || warm.agent.meter().clone(),
                    |mut meter| {
                        black_box(meter.observe(wire.body(), wire.series_start()))
                            .expect("observe");
                        meter
                    },
                    BatchSize::SmallInput,
                )
            });
            group.bench_function(id("copy"), |b| {
                b.iter(|| black_box(String::from(black_box(wire.body()))))
            });
            eprintln!(
                "{}/{size}: {} messages, body {} bytes",
                s.label,
                request.messages.len(),
                wire.body().len()
            );
        }
    }
    group.finish();
}

/// Resumed against full: on each route, `record` (the recorder's `next_step`, whose serializer
/// resumes from the route's previous request and writes only the new wire messages) and
/// `serialize` (a fresh `wire::serialize` of the same request, from the first message), at 10
/// and 1,000 messages. A resumed step should cost about the same at both sizes; a full write
/// grows with the history.
fn resume(c: &mut Criterion) {
    let mut group = c.benchmark_group("resume");
    group.sampling_mode(SamplingMode::Flat).sample_size(10);
    for s in &ROUTES {
        for size in RESUME_SIZES {
            let f = fixture(s, size);
            let id = |stage: &str| BenchmarkId::new(format!("{}/{stage}", s.label), size);
            group.bench_function(id("record"), |b| {
                b.iter_custom(|iters| steps(&f, s, iters, Timed::Record))
            });
            let mut warm = Warm::new(&f, s);
            let (request, _) = warm.step(s);
            let projected = request.project();
            group.bench_function(id("serialize"), |b| {
                b.iter(|| {
                    black_box(mektpoy::wire::serialize(
                        &request.config,
                        &projected,
                        request.route(),
                    ))
                    .expect("serialize")
                })
            });
        }
    }
    group.finish();
}

criterion_group!(benches, step, resume);
criterion_main!(benches);
