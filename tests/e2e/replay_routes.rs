//! A log replayed on every catalog route (and on unknown and dated model ids) sends only what
//! the stand-in accepts (issue 20: "no `anthropic/*` row of the replay has a body the
//! stand-in refuses").
//!
//! The log is recorded on a model that binds thinking, with tool churn, a prompt change, tool
//! calls and a compaction, so that every replayed route meets a rewrite before signed thinking
//! blocks, tools it must declare or change in history, and answers of another model.

use mektpoy::agent::replay::Replay;
use mektpoy::route::{ANY_MODEL, catalog};
use mektpoy::{Route, route_for};

use crate::agent::{Agent, Reply, arg_params, prompt, tool_of, unlisted_routes};
use crate::standin;

/// The routes a replay can target: the catalog, its generic entries, and ids it only knows
/// by their vendor.
fn routes() -> Vec<Route> {
    let mut routes: Vec<Route> = catalog().to_vec();
    routes.extend(unlisted_routes());
    routes
}

/// The stand-in session the log was recorded in: a replay's conversation carries its answers.
const SOURCE: &str = "replay-routes/source";

/// The log the replays read, recorded against the stand-in in its session `source` (one
/// per test: tests run in parallel).
pub fn recorded(source: &str) -> mektpoy::Session {
    let mut agent = Agent::new(source, route_for("anthropic", "claude-fable-5-2"));
    let read = tool_of("read", 1, false, arg_params());
    let shell = tool_of("shell", 1, false, arg_params());
    let grep = tool_of("grep", 1, false, arg_params());
    let first = prompt("You are a headless agent.");
    let second = prompt("You are a careful headless agent.");
    let steps: [(&str, Vec<_>, Reply); 7] = [
        (&first, vec![read.clone()], Reply::Text),
        (
            &first,
            vec![read.clone(), shell.clone()],
            Reply::Call("shell"),
        ),
        (&first, vec![read.clone(), shell.clone()], Reply::Text),
        (&first, vec![read.clone()], Reply::Text),
        (
            &second,
            vec![read.clone(), grep.clone()],
            Reply::Call("grep"),
        ),
        (&second, vec![grep.clone()], Reply::ThinkingOnly),
        (&second, vec![grep.clone(), read.clone()], Reply::Text),
    ];
    for (n, (system, tools, reply)) in steps.into_iter().enumerate() {
        if n == 4 {
            agent.compact();
        }
        agent
            .step(system, &tools, Some(&format!("step {n}")), reply)
            .unwrap();
    }
    mektpoy::Session::load_bytes(agent.session().to_jsonl().as_bytes())
        .unwrap()
        .session
}

#[test]
fn a_replay_on_every_route_sends_nothing_the_stand_in_refuses() {
    let log = recorded(SOURCE);
    for route in routes() {
        let label = format!("{}/{}", route.provider, route.model);
        if route.model == ANY_MODEL && route.provider == "openai-compatible" {
            // The chat route's bodies are not Messages requests: the stand-in speaks Messages.
            continue;
        }
        if route.api != mektpoy::route::WireApi::Messages {
            continue;
        }
        let key = format!("replay-routes/{label}");
        let mut refused = Vec::new();
        Replay::new(route.clone())
            .recorded_on(route_for("anthropic", "claude-fable-5-2"))
            .run_each(&log, |request, wire| {
                let wire = wire.clone().with_header(standin::FORK_FROM_HEADER, SOURCE);
                if let Err(e) = standin::post(&key, route.deferred_section_bytes(), &wire)
                    .map_err(|e| e.message)
                    .and_then(|r| {
                        if r.status == 200 {
                            Ok(())
                        } else {
                            Err(format!("{}: {}", r.status, r.body))
                        }
                    })
                {
                    refused.push(format!("seq {}: {e}", request.seq));
                }
            })
            .unwrap_or_else(|e| panic!("{label}: {e}"));
        assert!(refused.is_empty(), "{label}: {refused:#?}");
    }
}
