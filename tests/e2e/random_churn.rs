//! Random tool churn over the stand-in: whatever the loop does — additions (some declared
//! deferred), removals, redefinitions, prompt changes, compactions, tool calls, continuations —
//! every request of every route is accepted, the crate's `Meter` agrees with the stand-in (in
//! `Agent::step`), and the cache is lost only where SPEC says it may be.
//!
//! Seeded and small so the suite stays fast; `E2E_RANDOM_SEEDS=N` runs seeds `1..=N`.

use std::collections::BTreeSet;

use mektpoy::{ProjectionPath, Route, route_for};
use serde_json::Value;

use crate::agent::{Agent, Reply, Sent, tool};

const NAMES: [&str; 6] = ["read", "write", "grep", "bash", "fetch", "lint"];
const STEPS: usize = 25;

/// xorshift64: enough to vary the script, and the same on every platform.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

/// One request of a random run, with what the invariants need.
struct Row {
    sent: Sent,
    tools: Vec<(usize, u32, bool)>,
    ends_with_assistant: bool,
}

/// Runs one random script (the same for a given seed on every route) on `route`.
fn run(key: &str, route: Route, seed: u64) -> Vec<Row> {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut agent = Agent::new(key, route);
    // (name index, definition version, declared with deferLoading)
    let mut tools: Vec<(usize, u32, bool)> = vec![(0, 1, false)];
    let mut prompt = 0;
    let mut after_call = false;
    let mut rows = Vec::with_capacity(STEPS);
    for step in 0..STEPS {
        match rng.below(8) {
            0 | 1 => {
                let n = rng.below(NAMES.len());
                if tools.iter().all(|t| t.0 != n) {
                    tools.push((n, 1, rng.below(4) == 0));
                }
            }
            2 if tools.len() > 1 => {
                tools.remove(rng.below(tools.len()));
            }
            3 => {
                let i = rng.below(tools.len());
                tools[i].1 += 1;
            }
            4 => prompt += 1,
            5 if step > 2 => agent.compact(),
            _ => {}
        }
        let schemas: Vec<_> = tools
            .iter()
            .map(|&(n, v, d)| tool(NAMES[n], v, d))
            .collect();
        // A step after a tool call continues from its result; others sometimes continue right
        // after the assistant's text.
        let continuation = step > 0 && (after_call || rng.below(6) == 0);
        let reply = if rng.below(4) == 0 {
            Reply::Call(NAMES[tools[0].0])
        } else {
            Reply::Text
        };
        after_call = matches!(reply, Reply::Call(_));
        let sent = agent
            .step(
                &format!("You are agent {prompt}."),
                &schemas,
                (!continuation).then_some("Go on."),
                reply,
            )
            .unwrap_or_else(|r| {
                panic!(
                    "{key} step {step}: refused ({}): {}; tools {tools:?}",
                    r.status, r.message
                )
            });
        let body: Value = serde_json::from_str(&sent.wire.body).unwrap();
        let ends_with_assistant = body["messages"]
            .as_array()
            .and_then(|m| m.last())
            .map(|m| &m["role"])
            == Some(&Value::from("assistant"));
        rows.push(Row {
            sent,
            tools: tools.clone(),
            ends_with_assistant,
        });
    }
    rows
}

fn lost(rows: &[Row]) -> BTreeSet<usize> {
    (1..rows.len())
        .filter(|&i| rows[i].sent.usage.cached_bytes != rows[i - 1].sent.usage.total_bytes)
        .collect()
}

fn seeds() -> std::ops::RangeInclusive<u64> {
    let n = std::env::var("E2E_RANDOM_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(6);
    1..=n
}

/// On an in-history route with the placeholder, a request keeps the whole previous one unless
/// it starts a series, the previous request ended with the assistant's turn (the next reply
/// joins that turn, SPEC §7), or every declaration is deferred (the all-deferred fallback sends
/// the tools as given, so a tool change rewrites them).
#[test]
fn random_churn_on_in_history_with_placeholder_is_accepted_and_loses_only_where_spec_allows() {
    for seed in seeds() {
        let key = format!("random/{seed}/claude-opus-5");
        let rows = run(&key, route_for("anthropic", "claude-opus-5"), seed);
        for i in lost(&rows) {
            let (r, before) = (&rows[i], &rows[i - 1]);
            assert!(
                r.sent.request.starts_series
                    || before.ends_with_assistant
                    || r.sent.path == ProjectionPath::AllDeferred,
                "{key} step {i}: lost {} of {} bytes; tools {:?}",
                before.sent.usage.total_bytes - r.sent.usage.cached_bytes,
                before.sent.usage.total_bytes,
                r.tools
            );
        }
    }
}

/// Without a mode, a request loses the cache exactly when the tool list changed, a series
/// starts (compaction, prompt replaced, changed definition, returning baseline tool), or the
/// previous request ended with the assistant's turn.
#[test]
fn random_churn_without_mode_is_accepted_and_loses_exactly_at_changes() {
    for seed in seeds() {
        let key = format!("random/{seed}/deepseek-v4-pro");
        let rows = run(&key, route_for("deepseek", "deepseek-v4-pro"), seed);
        let expected: BTreeSet<usize> = (1..rows.len())
            .filter(|&i| {
                rows[i].tools != rows[i - 1].tools
                    || rows[i].sent.request.starts_series
                    || rows[i - 1].ends_with_assistant
            })
            .collect();
        assert_eq!(lost(&rows), expected, "{key}");
    }
}

/// Addition-only and in-history without the placeholder: every request is accepted.
#[test]
fn random_churn_on_deepseek_flash_and_in_history_without_placeholder_is_accepted() {
    for seed in seeds() {
        run(
            &format!("random/{seed}/deepseek-flash"),
            route_for("deepseek", "deepseek-flash"),
            seed,
        );
        let route = route_for("anthropic", "claude-opus-5")
            .into_builder()
            .deferred_placeholder(false)
            .build()
            .unwrap();
        run(
            &format!("random/{seed}/claude-opus-5/no-placeholder"),
            route,
            seed,
        );
    }
}
