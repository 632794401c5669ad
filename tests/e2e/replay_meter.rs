//! The replay's meter against the stand-in's measured reads (issue 20: "the demo and the
//! replay example print meter figures that match the stand-in's measured reads on every
//! route", and "no `anthropic/*` row of the replay has a body the stand-in refuses"). A
//! demo-like log (the demo's schedule: an MCP server connects, a plugin goes off and on, a
//! tool gains a parameter, a compaction of the first turns, the MCP server reconnects with its
//! tool listed first), recorded against the stand-in on Claude Fable 5.1 (the demo's inline
//! row, which signs its thinking), and `replay_routes`' log (calls, a thinking-only answer),
//! are replayed on every Messages route of the catalog, `anthropic/*`, the by-reference
//! variant of each one with a mode (the demo's claude-opus-5 row, `--route
//! provider/model:by-reference` in the replay example; Fable 5.1's binds thinking) and unknown
//! and dated ids, and the generic OpenAI-compatible chat route (to the stand-in's chat path):
//! what `examples/replay.rs` prints a row for. Each replay is told the route
//! that recorded the log (`Replay::recorded_on`, decision 108). Each request's bytes go to the
//! stand-in, in a conversation forked from the recording (it knows the answers' signed
//! thinking, and refuses a block sent after bytes it was not produced with), and any refusal
//! fails; its measured figures must equal the replay's row: total and cached bytes, and cached
//! tokens; per route, the totals the example prints (input and cached tokens) equal the sums of
//! the stand-in's usage, `anthropic/*` included (its meter takes the logged model's cache
//! facts, decision 105).

use mektpoy::agent::replay::{Replay, by_reference, route_name};
use mektpoy::route::{ANY_MODEL, WireApi, catalog};
use mektpoy::{Event, Message, Route, ToolSchema, route_for};
use serde_json::json;

use crate::agent::{Agent, Reply, prompt, unlisted_routes};
use crate::replay_routes;
use crate::standin;

/// The stand-in session the demo-like log was recorded in.
const DEMO: &str = "replay-meter/demo";

fn tool(name: &str, description: &str, properties: serde_json::Value) -> ToolSchema {
    ToolSchema::from_value(json!({
        "name": name,
        "description": description,
        "parameters": {"type": "object", "properties": properties},
    }))
    .unwrap()
}

/// The demo's tools at `step` (`examples/demo.rs`, `tools_at`).
fn tools_at(step: usize) -> Vec<ToolSchema> {
    let query = json!({"query": {"type": "string"}});
    let mut tools = vec![tool("read", "Read a file of the workspace", query.clone())];
    tools.push(if step >= 9 {
        tool(
            "edit",
            "Apply an edit to a file",
            json!({"query": {"type": "string"}, "dry_run": {"type": "boolean"}}),
        )
    } else {
        tool("edit", "Apply an edit to a file", query.clone())
    });
    if !(5..7).contains(&step) {
        tools.push(tool("shell", "Run a shell command (plugin)", query.clone()));
    }
    if step >= 3 {
        tools.push(tool(
            "mcp_search",
            "Search the web (an MCP server connected mid-session)",
            query,
        ));
    }
    if step >= 12 {
        tools.rotate_right(1);
    }
    tools
}

/// The demo's 14 steps on `route`, answered by the stand-in under `key`.
fn demo_like(key: &str, route: Route) -> mektpoy::Session {
    let mut agent = Agent::new(key, route);
    let system = prompt("You are a careful coding assistant.");
    for step in 0..14 {
        if step == 11 {
            // The demo's compaction: the first four turns become one summary.
            let summary = Message::user("summary", "Summary: we fixed the parser together.");
            agent
                .session()
                .append(Event::replace(summary, 1, 8))
                .unwrap();
        }
        agent
            .step(
                &system,
                &tools_at(step),
                Some(&format!("Step {step}: carry on.")),
                Reply::Text,
            )
            .unwrap_or_else(|r| panic!("demo-like step {step}: refused: {r:?}"));
    }
    mektpoy::Session::load_bytes(agent.session().to_jsonl().as_bytes())
        .unwrap()
        .session
}

/// The Messages routes the replay example prints a row for, with each by-reference variant
/// and unknown and dated ids, each with whether its meter is checked against the stand-in's
/// reads (every body is sent, and any refusal fails, on all of them).
fn routes() -> Vec<(Route, bool)> {
    let mut routes = Vec::new();
    for route in catalog().iter().filter(|r| r.api == WireApi::Messages) {
        // A provider's generic entry sends the logged model id (a Claude id, for these logs),
        // so its row is not the generic entry's model: on `deepseek/*` a body DeepSeek would
        // not take, which the stand-in (it models the cache by the body's model) meters as
        // Claude's, so it is left out; on `anthropic/*` the meter takes the cache facts of the
        // logged model (decision 105), so its figures are the stand-in's and are checked like
        // the others, and its bodies send no signed thinking after a `tools` list it was not
        // produced with (decision 108). The generic entries' meters are checked under unknown
        // ids too (`claude-nova-6`, `deepseek-x` of `unlisted_routes`).
        if route.model == ANY_MODEL {
            if route.provider == "anthropic" {
                routes.push((route.clone(), true));
            }
            continue;
        }
        routes.push((route.clone(), true));
        // Models that bind thinking too: the replay sends the recorded answers' signed
        // thinking only on the recording route (decision 108).
        if route.tool_update().is_some()
            && let Some(variant) = by_reference(route).filter(|v| v != route)
        {
            routes.push((variant, true));
        }
    }
    routes.extend(unlisted_routes().into_iter().map(|r| (r, true)));
    // The generic chat route the example prints too: the logged Claude id on OpenAI's chat
    // wire, metered by OpenAI's rule, as the stand-in reads a model it does not know.
    let chat = catalog().iter().find(|r| r.api == WireApi::OpenAiChat);
    routes.extend(chat.cloned().map(|r| (r, true)));
    routes
}

fn label(route: &Route) -> String {
    route_name(route).unwrap_or_else(|| format!("{}/{}", route.provider, route.model))
}

/// Replays `log` on every route; each metered request goes to the stand-in (forked from
/// `source`) and its figures must be the replay's.
fn check(name: &str, log: &mektpoy::Session, source: &str, recorded_on: Route) {
    let tokens = |bytes: u64| bytes.div_ceil(4);
    let (mut checked, mut read_somewhere, mut binding) = (0, 0, 0);
    for (route, metered) in routes() {
        // `anthropic/*` sends the logged id: a DeepSeek id on Anthropic's wire, which the
        // stand-in answers as DeepSeek does, is no row of a real provider.
        if route.model == ANY_MODEL && route.provider != recorded_on.provider {
            continue;
        }
        let label = label(&route);
        let key = format!("replay-meter/{name}/{label}");
        let mut measured = Vec::new();
        let mut faults = Vec::new();
        let replayed = Replay::new(route.clone())
            .recorded_on(recorded_on.clone())
            .run_each(log, |request, wire| {
                let Some(row) = &request.row else {
                    // Not metered: a request the log holds no answer to (none here).
                    faults.push(format!("seq {}: no meter row", request.seq));
                    return;
                };
                let wire = wire.clone().with_header(standin::FORK_FROM_HEADER, source);
                let chat = route.api == WireApi::OpenAiChat;
                let sent = if chat {
                    standin::client::post_to(
                        standin::chat::PATHS[0],
                        &key,
                        0,
                        wire.body(),
                        wire.headers(),
                    )
                } else {
                    standin::post(&key, route.deferred_section_bytes(), &wire)
                };
                let response = match sent {
                    Ok(r) if r.status == 200 => r,
                    Ok(r) => {
                        faults.push(format!("seq {}: {}: {}", request.seq, r.status, r.body));
                        return;
                    }
                    Err(e) => {
                        faults.push(format!("seq {}: {}", request.seq, e.message));
                        return;
                    }
                };
                let (total, cached) = response.bytes.expect("the stand-in's byte headers");
                let body: serde_json::Value = serde_json::from_str(&response.body).unwrap();
                let usage = &body["usage"];
                let (read, input) = if chat {
                    let read = usage["prompt_tokens_details"]["cached_tokens"]
                        .as_u64()
                        .unwrap();
                    (read, usage["prompt_tokens"].as_u64().unwrap() - read)
                } else {
                    let read = usage["cache_read_input_tokens"].as_u64().unwrap();
                    (read, usage["input_tokens"].as_u64().unwrap())
                };
                if metered
                    && ((row.total_bytes, row.cached_bytes) != (total, cached)
                        || tokens(row.cached_bytes) != read
                        || tokens(row.total_bytes) != input + read)
                {
                    faults.push(format!(
                        "seq {}: the replay's meter (total, cached) = ({}, {}) bytes, {} cached \
                         tokens; the stand-in measured ({total}, {cached}) bytes, {read} cached \
                         tokens of {}",
                        request.seq,
                        row.total_bytes,
                        row.cached_bytes,
                        tokens(row.cached_bytes),
                        input + read
                    ));
                }
                measured.push((input + read, read));
            })
            .unwrap_or_else(|e| panic!("{name} on {label}: {e}"));
        assert!(faults.is_empty(), "{name} on {label}: {faults:#?}");
        binding += usize::from(route.binds_thinking() && route != recorded_on);
        if !metered {
            continue;
        }
        let report = replayed.report();
        assert!(report.requests > 0, "{name} on {label}: nothing replayed");
        assert_eq!(
            report.requests,
            measured.len(),
            "{name} on {label}: every row measured"
        );
        let sum = |f: fn(&(u64, u64)) -> u64| measured.iter().map(f).sum::<u64>();
        assert_eq!(
            (report.total_tokens, report.cached_tokens),
            (sum(|m| m.0), sum(|m| m.1)),
            "{name} on {label}: the row the replay example prints (input, cached)"
        );
        checked += 1;
        read_somewhere += usize::from(report.cached_tokens > 0);
    }
    assert!(checked >= 10, "{name}: {checked} routes");
    // `anthropic/*`, the by-reference variant of each model that binds thinking, and the
    // other binding models: each sent only what the stand-in accepts.
    assert!(binding >= 3, "{name}: {binding} routes that bind thinking");
    assert!(
        read_somewhere >= checked / 2,
        "{name}: {read_somewhere} of {checked} routes read"
    );
}

#[test]
fn the_replays_meter_matches_the_stand_ins_measured_reads_on_every_route() {
    let fable = |model: &str| route_for("anthropic", model);
    let recording = fable("claude-fable-5-1");
    check("demo", &demo_like(DEMO, recording.clone()), DEMO, recording);
    // The demo's no-mode DeepSeek log: on `openai-compatible/*` it sends `deepseek-v4-pro`,
    // metered by DeepSeek's cache (decision 105) as the stand-in reads that model on chat.
    let source = "replay-meter/demo-deepseek";
    let recording = route_for("deepseek", "deepseek-v4-pro");
    check(
        "demo-deepseek",
        &demo_like(source, recording.clone()),
        source,
        recording,
    );
    let source = "replay-meter/replay-routes-log";
    check(
        "replay-routes",
        &replay_routes::recorded(source),
        source,
        fable("claude-fable-5-2"),
    );
}
