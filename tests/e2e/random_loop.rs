//! Random agent loops on every Messages route against the stand-in (issue 20), on the
//! catalog's ids and on unknown and dated ones, and on OpenAI-compatible chat routes (the
//! catalog's generic one under an OpenAI id, DeepSeek's chat endpoint under its ids and an
//! unknown one) and OpenAI's Responses routes (`gpt-5.4` addition-only, `gpt-5.5` under the
//! catalog's `openai/*` entry; on both chat and Responses the operations that apply: no
//! thinking, names over 64 characters refused, 500 / 503 server errors): tool churn (names and schemas the route must
//! refuse when set, a schema property named `cache_control`, redefinitions of called tools),
//! prompt changes, compactions, tool calls, thinking-only answers, answers cut off mid-stream
//! followed by a retry, provider errors (529 `overloaded_error`, 500 `api_error`) followed by a
//! retry, kills and reopens of the session file (`Session::open`, the meter saved and
//! restored; with a request in flight, between a failed request and its retry, between a
//! tool call and its result, or between steps), and a second loop on another route (another
//! model; from a chat route, the other vendor's chat or a Messages route) over the same log,
//! taking its own turns (decision 98). Any request the stand-in refuses, any step the crate
//! refuses, a retry that sends other bytes, and a meter estimate other than the stand-in's
//! reported cache read fail the test (the agent checks the meter on every request, on both
//! loops); a stuck loop fails the test by the stand-in client's timeout.
//!
//! `cargo test --test e2e random_loop` runs a bounded number of cases (and as many again on the
//! chat routes alone, and on the Responses routes alone);
//! `RANDOM_LOOP_CASES=1000 cargo test --test e2e -- --ignored random_loop` runs longer
//! (200 cases without the variable; figures in `docs/reliability.md`).

use std::path::Path;

use mektpoy::route::{WireApi, catalog};
use mektpoy::{Route, Session, ToolSchema, route_for};
use proptest::prelude::*;
use serde_json::json;

use crate::agent::{
    Agent, Reply, Unsent, arg_params, chat_routes, prompt, responses_routes, tool_of,
    unlisted_routes,
};

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
    /// The provider fails the step with this server error; the loop retries it, after a kill
    /// and a reopen when `kill`.
    Fail { status: u16, kill: bool },
    /// The process dies and a new one reopens the session file.
    Kill(KillAt),
    /// The loop on the other route takes a turn over the same log.
    Aux,
}

/// When the process dies.
#[derive(Clone, Copy, Debug)]
enum KillAt {
    /// Between two steps.
    Between,
    /// With a request whose answer was cut off: the new process retries it.
    InFlight,
    /// After an answer calling a tool was logged, before its result: the new process checks
    /// the call against the log, runs it and continues without a user message.
    PendingCall,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => any::<u8>().prop_map(Op::Tools),
        1 => Just(Op::Prompt),
        1 => Just(Op::Compact),
        2 => Just(Op::Call),
        1 => Just(Op::ThinkingOnly),
        1 => Just(Op::CutRetry),
        1 => (prop_oneof![Just(529u16), Just(500u16)], any::<bool>())
            .prop_map(|(status, kill)| Op::Fail { status, kill }),
        1 => prop_oneof![
            Just(KillAt::Between),
            Just(KillAt::InFlight),
            Just(KillAt::PendingCall)
        ]
        .prop_map(Op::Kill),
        1 => Just(Op::Aux),
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

/// Every Messages route of the catalog, ids known only by their vendor, and the chat routes.
fn routes() -> Vec<Route> {
    let mut routes: Vec<Route> = catalog()
        .iter()
        .filter(|r| r.api == WireApi::Messages && r.model != "*")
        .cloned()
        .collect();
    routes.extend(unlisted_routes());
    routes.extend(chat_routes());
    routes.extend(responses_routes());
    routes
}

/// The other loop's route: another vendor's model that does not bind thinking, so that its
/// answers carry no signed thinking the main loop's model would have to leave out; on chat,
/// the other vendor's chat, or (OpenAI's) a Messages route: one log under two wire APIs.
fn aux_route(main: &Route) -> Route {
    match (main.api, main.provider.as_ref()) {
        (WireApi::OpenAiChat, "deepseek") => chat_routes().swap_remove(0),
        (WireApi::OpenAiChat | WireApi::Responses, _) => route_for("deepseek", "deepseek-flash"),
        (_, "deepseek") => route_for("anthropic", "claude-opus-5"),
        _ => route_for("deepseek", "deepseek-flash"),
    }
}

/// The server error a provider fails a request with, as the op asks: on chat, both vendors'
/// overload is a 503 where Anthropic's is a 529; and the error type the crate must read.
fn server_error(route: &Route, status: u16) -> (u16, &'static str) {
    match (route.api, status) {
        (WireApi::OpenAiChat | WireApi::Responses, 529) => (503, "service_unavailable_error"),
        (WireApi::OpenAiChat | WireApi::Responses, _) => (500, "server_error"),
        (_, 529) => (529, "overloaded_error"),
        _ => (500, "api_error"),
    }
}

/// The process dies (its lock on the file goes with it, the saved step counters and meters
/// survive) and a new one opens the file: the loops carry on over the reopened log.
fn kill_and_reopen(path: &Path, agent: &mut Agent, aux: &mut Option<Agent>) {
    let key = agent.key().to_owned();
    let route = agent.route().clone();
    let (n, meter) = agent.save();
    let aux_saved = aux.take().map(|a| (a.route().clone(), a.save()));
    // Nothing of the old process is left to hold the file.
    *agent = Agent::new(&key, route.clone());
    let session = Session::open(path)
        .unwrap_or_else(|e| panic!("{key}: reopen: {e}"))
        .session;
    *agent = Agent::over(&key, route, session).resumed_with(n, &meter);
    *aux = aux_saved.map(|(route, (n, meter))| agent.beside(route, "x").resumed_with(n, &meter));
}

fn run(test: &str, case: usize, route: &Route, ops: &[Op]) {
    let key = format!("{test}/{case}/{:?}/{}", route.api, route.model);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("session.jsonl");
    let session = Session::create(&path, &key).unwrap();
    let mut agent = Agent::over(&key, route.clone(), session);
    let mut aux: Option<Agent> = None;
    let aux_tools = [pool(1)[0].clone(), pool(1)[2].clone()];
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
                            || (refused.tool == "empty" && route.api == WireApi::Messages)
                            || refused.tool.len() > 64,
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
            Op::Fail { status, kill } => {
                let (status, kind) = server_error(route, *status);
                agent.fail_next(status);
                let user = agent.ends_with_assistant().then_some("go on");
                match agent.try_step(&system, &tools, user.or(Some("and then")), Reply::Text) {
                    Err(Unsent::Failed {
                        refused,
                        error,
                        wire,
                    }) => {
                        assert_eq!(refused.status, status, "{key}: {ops:?}");
                        assert!(error.contains(kind), "{key}: the crate read {error:?}");
                        if *kill {
                            kill_and_reopen(&path, &mut agent, &mut aux);
                        }
                        let again = agent
                            .retry(&system, &tools, Reply::Text)
                            .unwrap_or_else(|r| panic!("{key}: {ops:?}: retry refused: {r:?}"));
                        assert_eq!(again.wire.body(), wire.body(), "{key}: the retry's bytes");
                        assert_eq!(again.wire.headers(), wire.headers(), "{key}");
                    }
                    Err(Unsent::Refused(r)) => panic!("{key}: {ops:?}: refused: {r:?}"),
                    other => panic!("{key}: {ops:?}: the failure was not seen: {other:?}"),
                }
                continue;
            }
            Op::Kill(KillAt::Between) => {
                kill_and_reopen(&path, &mut agent, &mut aux);
                continue;
            }
            Op::Kill(KillAt::PendingCall) => {
                agent.die_before_results();
                let user = agent.ends_with_assistant().then_some("go on");
                agent
                    .step(
                        &system,
                        &tools,
                        user.or(Some("and then")),
                        Reply::Call("read"),
                    )
                    .unwrap_or_else(|r| panic!("{key}: {ops:?}: refused: {r:?}"));
                kill_and_reopen(&path, &mut agent, &mut aux);
                assert!(
                    agent.takes_call("read"),
                    "{key}: the pending call, from the log"
                );
                assert!(!agent.takes_call("edit-x"), "{key}: a name never offered");
                agent.run_pending_tool_calls(&tools);
                agent
                    .step(&system, &tools, None, Reply::Text)
                    .unwrap_or_else(|r| panic!("{key}: {ops:?}: the continuation refused: {r:?}"));
                continue;
            }
            Op::Kill(KillAt::InFlight) => {
                agent.cut_off_next();
                let user = agent.ends_with_assistant().then_some("go on");
                match agent.try_step(&system, &tools, user.or(Some("and then")), Reply::Text) {
                    Err(Unsent::Broken { wire, .. }) => {
                        kill_and_reopen(&path, &mut agent, &mut aux);
                        let again = agent
                            .retry(&system, &tools, Reply::Text)
                            .unwrap_or_else(|r| panic!("{key}: {ops:?}: retry refused: {r:?}"));
                        assert_eq!(again.wire.body(), wire.body(), "{key}: the retry's bytes");
                        assert_eq!(again.wire.headers(), wire.headers(), "{key}");
                    }
                    Err(Unsent::Refused(r)) => panic!("{key}: {ops:?}: refused: {r:?}"),
                    other => panic!("{key}: {ops:?}: the cut was not seen: {other:?}"),
                }
                continue;
            }
            Op::Aux => {
                let other = aux.get_or_insert_with(|| agent.beside(aux_route(route), "x"));
                other
                    .step(&system, &aux_tools, Some("summarise"), Reply::Text)
                    .unwrap_or_else(|r| panic!("{key}: {ops:?}: the other loop refused: {r:?}"));
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

fn check(test: &str, cases: u32, max_ops: usize, routes: Vec<Route>) {
    let config = ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    };
    // Each case is its own conversation at the stand-in.
    let n = std::sync::atomic::AtomicUsize::new(0);
    proptest!(config, |(route in 0..routes.len(), ops in proptest::collection::vec(op(), 1..max_ops))| {
        let case = n.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        run(test, case, &routes[route], &ops);
    });
}

#[test]
fn random_loop() {
    check("random-loop", cases(48), 12, routes());
}

/// The chat routes alone, so that each run walks them more than their share of [`routes`].
#[test]
fn random_loop_chat() {
    check("random-loop-chat", cases(24), 12, chat_routes());
}

/// The Responses routes alone (`gpt-5.4` addition-only, `gpt-5.5` without a mode).
#[test]
fn random_loop_responses() {
    check("random-loop-responses", cases(24), 12, responses_routes());
}

#[test]
#[ignore = "long: RANDOM_LOOP_CASES=1000 cargo test --test e2e -- --ignored random_loop"]
fn random_loop_long() {
    check("random-loop-long", cases(200), 30, routes());
}

/// Found by the long run (2026-12-07): after a second reopen, the retry of a request the
/// provider failed left out the last answer's signed thinking, which the failed request sent.
/// Another route's turns came between, the reopened loop stamped a turn number it had used
/// before, and its previous request was rebuilt from an older answer with the same stamps
/// (decision 138).
#[test]
fn a_retry_after_a_second_reopen_sends_the_failed_requests_bytes() {
    let route = mektpoy::route_for("anthropic", "claude-fable-5-1");
    let ops = [
        Op::Aux,
        Op::Compact,
        Op::Tools(0),
        Op::Tools(0),
        Op::Aux,
        Op::Kill(KillAt::Between),
        Op::Tools(0),
        Op::Fail {
            status: 529,
            kill: true,
        },
    ];
    run("regression-retry-after-reopen", 0, &route, &ops);
}
