//! `AgentLoop::user_turn` per step: on a Messages-API route the recorder also serializes the
//! request against the route's previous one (rewrite detection, lookback, thinking floor);
//! on OpenAI-compatible chat it does not. Both on the same history.
//!
//! Run: `cargo bench --bench record`. Figures in `docs/benchmarks.md`.

use std::hint::black_box;

use criterion::{BatchSize, BenchmarkId, Criterion, criterion_group, criterion_main};
use mektpoy::{AgentLoop, Config, Message, Session, route_for};

mod common;

fn record(c: &mut Criterion) {
    let mut group = c.benchmark_group("record");
    for steps in [100u64, 500] {
        let (session, request) = common::session_with_churn("deepseek-flash", steps, 5);
        let tools = request.tools.to_vec();
        let messages = request.messages.len();
        for (label, provider, model) in [
            ("messages_api", "deepseek", "deepseek-flash"),
            ("openai_chat", "openai-compatible", "any"),
        ] {
            let route = route_for(provider, model);
            let config = Config::new(provider, model)
                .with("max_tokens", 1024.into())
                .unwrap();
            group.bench_function(BenchmarkId::new(label, messages), |b| {
                b.iter_batched(
                    || {
                        // A loop that has recorded the previous step (its memory of the route
                        // is warm), then the answer: the steady state of a loop.
                        let f = Session::fork(&session, session.len() as u64, "f").expect("fork");
                        let mut agent = AgentLoop::builder(f, route.clone())
                            .config(config.clone())
                            .system_prompt("You are a careful assistant.")
                            .tools(tools.iter().cloned())
                            .build()
                            .expect("the loop builds");
                        agent
                            .user_turn([Message::user("warm", "warm up")])
                            .expect("record");
                        let answer = Message::assistant("warm-a", "ok", provider, model);
                        agent.append(answer).expect("append");
                        agent
                    },
                    |mut agent| {
                        let r = agent.user_turn([Message::user("next", "next step")]);
                        black_box(r.expect("record"));
                        agent
                    },
                    BatchSize::SmallInput,
                )
            });
        }
    }
    group.finish();
}

criterion_group!(benches, record);
criterion_main!(benches);
