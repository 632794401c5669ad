//! Random agent loops on every Messages route against the stand-in (issue 20): tool churn
//! (names and schemas the route must refuse when set, a schema property named
//! `cache_control`, redefinitions of called tools), prompt changes, compactions, tool calls,
//! thinking-only answers, and answers cut off mid-stream followed by a retry. Any request the
//! stand-in refuses, any step the crate refuses, a retry that sends other bytes, and a meter
//! estimate other than the stand-in's reported cache read fail the test (the agent checks
//! the meter on every request).
//!
//! `cargo test --test e2e random_loop` runs a bounded number of cases;
//! `RANDOM_LOOP_CASES=200 cargo test --release --test e2e random_loop_long -- --ignored` runs
//! longer (figures in `docs/reliability.md`).

use mektpoy::route::{WireApi, catalog};
use mektpoy::{Route, ToolSchema};
use proptest::prelude::*;
use serde_json::json;

use crate::agent::{Agent, Reply, Unsent, arg_params, prompt, tool_of, unlisted_routes};

#[derive(Clone, Debug)]
enum Op {
    /// The tools of the step: a bit per tool of [`pool`].
    Tools(u8),
    /// The next step's system prompt changes.
    Prompt,
    /// A compaction of every turn so far.
    Compact,
    /// The answer calls a tool; its result is appended.
    Call,
    /// The answer is thinking alone (models that bind thinking).
    ThinkingOnly,
    /// The answer is cut off mid-stream; the loop retries the step.
    CutRetry,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => any::<u8>().prop_map(Op::Tools),
        1 => Just(Op::Prompt),
        1 => Just(Op::Compact),
        2 => Just(Op::Call),
        1 => Just(Op::ThinkingOnly),
        1 => Just(Op::CutRetry),
    ]
}

/// The tools a loop picks from: the last three the route must refuse when set.
fn pool(version: u32) -> Vec<ToolSchema> {
    let marker = json!({
        "type": "object",
        "properties": {"cache_control": {"type": "string", "description": format!("v{version}")}},
    });
    vec![
        tool_of("read", 1, false, arg_params()),
        tool_of("shell", version, false, arg_params()),
        tool_of("grep", 1, true, arg_params()),
        tool_of("marked", 1, false, marker),
        tool_of("edit", 1, false, arg_params()),
        tool_of("github.search", 1, false, arg_params()),
        tool_of("empty", 1, false, json!({})),
        tool_of(&"x".repeat(129), 1, false, arg_params()),
    ]
}

/// Every Messages route of the catalog, and ids known only by their vendor.
fn routes() -> Vec<Route> {
    let mut routes: Vec<Route> = catalog()
        .iter()
        .filter(|r| r.api == WireApi::Messages && r.model != "*")
        .cloned()
        .collect();
    routes.extend(unlisted_routes());
    routes
}

fn run(case: usize, route: &Route, ops: &[Op]) {
    let key = format!("random-loop/{case}/{}", route.model);
    let mut agent = Agent::new(&key, route.clone());
    let mut system = prompt("You are a headless agent.");
    let mut tools = vec![pool(1)[0].clone()];
    let mut redefined = 1;
    for op in ops {
        let mut reply = Reply::Text;
        match op {
            Op::Tools(bits) => {
                if bits & 0x80 != 0 {
                    redefined += 1;
                }
                let picked: Vec<ToolSchema> = pool(redefined)
                    .into_iter()
                    .enumerate()
                    .filter(|(i, _)| bits & (1 << i) != 0 || *i == 0)
                    .map(|(_, t)| t)
                    .collect();
                match route.check_tools(&picked) {
                    // The loop keeps what it had; what the route refuses never reaches the log.
                    Err(refused) => assert!(
                        refused.tool == "github.search"
                            || refused.tool == "empty"
                            || refused.tool.len() > 128,
                        "{key}: {refused}"
                    ),
                    Ok(()) => tools = picked,
                }
            }
            Op::Prompt => system = format!("{system} Be brief."),
            Op::Compact => {
                if agent.session().surface().len() > 2 {
                    agent.compact();
                }
            }
            Op::Call => reply = Reply::Call("read"),
            Op::ThinkingOnly if route.binds_thinking() => reply = Reply::ThinkingOnly,
            Op::ThinkingOnly => {}
            Op::CutRetry => {
                if agent.ends_with_assistant() {
                    agent.cut_off_next();
                    match agent.try_step(&system, &tools, Some("go on"), Reply::Text) {
                        Err(Unsent::Broken { wire, .. }) => {
                            let again = agent
                                .retry(&system, &tools, Reply::Text)
                                .unwrap_or_else(|r| panic!("{key}: retry refused: {r:?}"));
                            assert_eq!(again.wire.body(), wire.body(), "{key}: the retry's bytes");
                        }
                        Err(Unsent::Refused(r)) => panic!("{key}: {ops:?}: refused: {r:?}"),
                        other => panic!("{key}: {ops:?}: the cut was not seen: {other:?}"),
                    }
                }
                continue;
            }
        }
        let user = agent.ends_with_assistant().then_some("go on");
        agent
            .step(&system, &tools, user.or(Some("and then")), reply)
            .unwrap_or_else(|r| panic!("{key}: {ops:?}: refused: {r:?}"));
    }
}

fn cases(default: u32) -> u32 {
    std::env::var("RANDOM_LOOP_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn check(cases: u32, max_ops: usize) {
    let routes = routes();
    let config = ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    };
    // Each case is its own conversation at the stand-in.
    let n = std::sync::atomic::AtomicUsize::new(0);
    proptest!(config, |(route in 0..routes.len(), ops in proptest::collection::vec(op(), 1..max_ops))| {
        let case = n.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        run(case, &routes[route], &ops);
    });
}

#[test]
fn random_loop() {
    check(cases(24), 12);
}

#[test]
#[ignore = "long: RANDOM_LOOP_CASES=200 cargo test --release --test e2e random_loop_long -- --ignored"]
fn random_loop_long() {
    check(cases(200), 30);
}
