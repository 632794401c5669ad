//! The churn and headless scenarios on OpenAI's Responses API (`POST /v1/responses`), JSON and
//! server-sent events, against the stand-in's Responses path.
//!
//! Routes: `gpt-5.4` (catalog: addition-only, `additional_tools` items, the tool-search guide
//! names it) and `gpt-5.5` as the catalog's `openai/*` entry resolves an unlisted id (no mode:
//! every tool change rewrites `tools`). Both send `prompt_cache_key` (the session id), which the
//! stand-in's cache is keyed by, as OpenAI's.
//!
//! Checked on every request (besides what `agent` checks: accepted, decoded, the crate's
//! `Meter` equal to the stand-in's measured bytes and its usage's cached tokens): the JSON and
//! the streamed runs send the same bytes but `stream` and decode the same answers; each answer's
//! `function_call` arguments and `reasoning` items (with the stand-in's own `encrypted_content`,
//! which it verifies) come back byte for byte in the next request.
//!
//! Losses are counted in OpenAI's units: a request loses when it reads less than the previous
//! request's whole 128-token units (from 1,024 tokens). On `gpt-5.4` an addition is an
//! `additional_tools` item at the end of the input: it keeps the whole previous request, as do
//! the steps without a tool change; a removal, which no item expresses, leaves the name out
//! of `tools` and rewrites the head: the losses are those of the Messages API's addition-only
//! route (`churn`'s column AO), plus the prompt change at step 11 (the prompt is
//! `instructions`, which no OpenAI route keeps in history). On `gpt-5.5` every tool change,
//! the prompt change and the compaction rewrite (`churn`'s column NM). Hit ratios (cached over
//! total bytes after the first request), JSON run: `gpt-5.4` 66.0 %, `gpt-5.5` printed by its
//! test (`--nocapture`).

use std::collections::BTreeSet;

use mektpoy::{
    Route,
    project::ProjectionPath,
    route::{ToolUpdateMode, WireApi},
    route_for,
};
use serde_json::Value;

use crate::agent::{Agent, Reply, Sent, arg_params, prompt, tool_of};
use crate::churn::{
    ADDITION_ONLY_FALLBACK, Event, LOST_ADDITION_ONLY, P1, P2, SCRIPT, TOOL_SET_CHANGED, set, tools,
};

/// What OpenAI's cache reads of an earlier request of `total` bytes kept whole: its whole
/// 128-token (512-byte) units, from 1,024 tokens on (the stand-in estimates a token as 4 bytes).
fn kept(total: u64) -> u64 {
    if total >= 1024 * 4 {
        total / 512 * 512
    } else {
        0
    }
}

/// One step as sent.
struct Row {
    step: usize,
    sent: Sent,
}

impl Row {
    fn body(&self) -> Value {
        serde_json::from_str(self.sent.wire.body()).unwrap()
    }
}

fn gpt_5_4() -> Route {
    let route = route_for("openai", "gpt-5.4");
    assert_eq!(route.api, WireApi::Responses);
    assert_eq!(route.tool_update(), Some(ToolUpdateMode::AdditionOnly));
    route
}

fn gpt_5_5() -> Route {
    let mut route = route_for("openai", "gpt-5.5");
    assert_eq!(route.api, WireApi::Responses);
    assert_eq!(route.tool_update(), None);
    route.model = "gpt-5.5".into();
    route
}

/// The items of `earlier`'s answer a stateless request must send back: its `reasoning` and
/// `function_call` items, as the stand-in sent them. Each is in `next`'s input, its
/// `encrypted_content` and `arguments` byte for byte (the JSON string as the stand-in wrote it
/// is a substring of the body sent).
fn assert_sent_back(key: &str, earlier: &Row, next: &Row) {
    let body = next.body();
    let input = body["input"].as_array().expect("an input array");
    let raw = next.sent.wire.body();
    for item in &earlier.sent.content {
        let (kind, field, id) = match item["type"].as_str() {
            Some("reasoning") => ("reasoning", "encrypted_content", "id"),
            Some("function_call") => ("function_call", "arguments", "call_id"),
            _ => continue,
        };
        let step = next.step;
        let back = input
            .iter()
            .find(|i| i["type"] == kind && i[id] == item[id])
            .unwrap_or_else(|| panic!("{key} step {step}: {kind} {} not sent back", item[id]));
        assert_eq!(
            back[field], item[field],
            "{key} step {step}: {kind} {field}"
        );
        let exact = serde_json::to_string(&item[field]).unwrap();
        assert!(
            raw.contains(&format!(r#""{field}":{exact}"#)),
            "{key} step {step}: {kind} {field} byte for byte"
        );
        if kind == "reasoning" {
            assert_eq!(back["summary"], item["summary"], "{key} step {step}");
        } else {
            assert_eq!(back["name"], item["name"], "{key} step {step}");
        }
    }
}

/// The churn script (`churn::SCRIPT`) over a fresh session for `agent`'s route; every request
/// must be accepted, and every answer's items come back in the next request (but across the
/// compaction, which drops them).
fn run_once(mut agent: Agent) -> Vec<Row> {
    let key = agent.key().to_owned();
    // Twice the house rules: every request above OpenAI's minimum of 1,024 tokens, so the
    // minimum never cuts a kept prefix.
    let (p1, p2) = (prompt(P1).repeat(2), prompt(P2).repeat(2));
    let mut current = &p1;
    let mut rows: Vec<Row> = Vec::with_capacity(SCRIPT.len());
    for (step, spec, event) in SCRIPT {
        if let Event::Compact = event {
            agent.compact();
        }
        if let Event::Prompt = event {
            current = &p2;
        }
        let user = format!("Step {step}: carry on with the task.");
        let user = (!matches!(event, Event::Continue)).then_some(user.as_str());
        let reply = match event {
            Event::Call(name) => Reply::Call(name),
            _ => Reply::Text,
        };
        let sent = agent
            .step(current, &tools(spec), user, reply)
            .unwrap_or_else(|r| {
                panic!(
                    "{key} step {step}: the stand-in refused ({}): {}",
                    r.status, r.message
                )
            });
        let row = Row { step, sent };
        let body = row.body();
        assert_eq!(body["instructions"].as_str(), Some(current.as_str()));
        assert_eq!(body["store"], false, "{key} step {step}");
        assert_eq!(
            body["prompt_cache_key"].as_str(),
            Some(agent.session().id()),
            "{key} step {step}: the session id is the cache key"
        );
        // The stand-in answers with a reasoning item first: the crate asked for its state.
        assert_eq!(
            row.sent.content[0]["type"], "reasoning",
            "{key} step {step}"
        );
        if let Some(previous) = rows.last()
            && !matches!(event, Event::Compact)
        {
            assert_sent_back(&key, previous, &row);
        }
        rows.push(row);
    }
    rows
}

/// [`run_once`] as JSON (key `key`) and streamed (`{key}/sse`): the same bytes but `stream`,
/// the same answers. The JSON run's rows.
fn run(key: &str, route: Route) -> Vec<Row> {
    let json = run_once(Agent::new(key, route.clone()));
    let sse = run_once(Agent::new(&format!("{key}/sse"), route).streaming());
    assert_eq!(json.len(), sse.len(), "{key}");
    for (j, s) in json.iter().zip(&sse) {
        let step = j.step;
        // The same bytes but `stream` and the cache key, which is the session id.
        let same = s
            .sent
            .wire
            .body()
            .replacen(r#""stream":true,"#, "", 1)
            .replacen(&format!(r#""{key}/sse""#), &format!(r#""{key}""#), 1);
        assert_eq!(
            same,
            j.sent.wire.body(),
            "{key} step {step}: the streamed request is the same but `stream`"
        );
        assert!(s.sent.streamed && !j.sent.streamed, "{key} step {step}");
        assert_eq!(s.sent.answer, j.sent.answer, "{key} step {step}: answers");
        assert_eq!(s.sent.usage, j.sent.usage, "{key} step {step}");
        assert_eq!(s.sent.content, j.sent.content, "{key} step {step}");
    }
    json
}

/// Steps that read less than the previous request's whole units.
fn lost(rows: &[Row]) -> BTreeSet<usize> {
    rows.windows(2)
        .filter(|w| w[1].sent.usage.cached_bytes < kept(w[0].sent.usage.total_bytes))
        .map(|w| w[1].step)
        .collect()
}

/// The hit ratio of the requests after the first: cached bytes over total bytes.
fn hit_ratio(rows: &[Row]) -> f64 {
    let (cached, total) = rows[1..].iter().fold((0, 0), |(c, t), r| {
        (c + r.sent.usage.cached_bytes, t + r.sent.usage.total_bytes)
    });
    cached as f64 / total as f64
}

fn table(rows: &[Row]) -> String {
    let mut out = String::from("step   total B  cached B\n");
    for r in rows {
        let u = r.sent.usage;
        out += &format!("{:>4} {:>9} {:>9}\n", r.step, u.total_bytes, u.cached_bytes);
    }
    out
}

#[test]
fn responses_churn_on_gpt_5_4_keeps_the_cache_through_additions_and_rewrites_at_removals() {
    let rows = run("responses/churn/gpt-5.4", gpt_5_4());
    let t = table(&rows);
    eprintln!("gpt-5.4 hit ratio {:.3}\n{t}", hit_ratio(&rows));
    let lost = lost(&rows);
    // Additions (3, 6, 13, 26, 31 and the returns) go as `additional_tools` items.
    for r in &rows {
        let body = r.sent.wire.body();
        assert!(!body.contains("defer_loading"), "step {}", r.step);
    }
    for step in [3, 6, 13, 26, 31] {
        assert!(!lost.contains(&step), "step {step}: an addition keeps\n{t}");
        assert!(
            rows[step - 1]
                .sent
                .wire
                .body()
                .contains(r#""type":"additional_tools""#),
            "step {step}"
        );
    }
    // The all-deferred fallback (no non-deferred baseline tool left) sends the tools as given.
    let fallback = rows
        .iter()
        .filter(|r| r.sent.path == ProjectionPath::AllDeferred)
        .map(|r| r.step);
    assert_eq!(set(fallback), set(ADDITION_ONLY_FALLBACK), "{t}");
    // The losses of the Messages API's addition-only route (`churn`'s table, column AO), and the
    // prompt change at 11: the prompt is `instructions`, not kept in history on this API.
    assert_eq!(lost, set(LOST_ADDITION_ONLY.into_iter().chain([11])), "{t}");
}

#[test]
fn responses_churn_on_gpt_5_5_rewrites_at_every_tool_change() {
    let rows = run("responses/churn/gpt-5.5", gpt_5_5());
    let t = table(&rows);
    eprintln!("gpt-5.5 hit ratio {:.3}\n{t}", hit_ratio(&rows));
    for r in &rows {
        assert!(
            !r.sent.wire.body().contains("additional_tools"),
            "step {}",
            r.step
        );
    }
    assert_eq!(
        lost(&rows),
        set(TOOL_SET_CHANGED.into_iter().chain([11, 29])),
        "{t}"
    );
}

/// The headless scenario: a first request, then a step that adds `search`; then a step that
/// appends nothing but changes the prompt. On `gpt-5.4` the addition keeps the whole first
/// request (an `additional_tools` item after it); without a mode it rewrites `tools`, the head
/// of the prompt, and reads nothing. The prompt is `instructions`, before the input: its
/// change rewrites on both routes (no route keeps prompts in history here).
fn headless(key: &str, route: Route, streamed: bool) {
    let mode = route.tool_update().is_some();
    let mut agent = Agent::new(key, route);
    if streamed {
        agent = agent.streaming();
    }
    // Twice the house rules: above OpenAI's minimum of 1,024 tokens.
    let p1 = prompt("You are a headless agent.").repeat(2);
    let p2 = prompt("You are a headless agent. Report progress after each tool call.").repeat(2);
    let read = tool_of("read", 1, false, arg_params());
    let search = tool_of("search", 1, false, arg_params());
    let both = [read.clone(), search];
    let refused = |r: crate::standin::Refused| -> Sent {
        panic!("{key}: refused ({}): {}", r.status, r.message)
    };
    let first = agent
        .step(&p1, &[read], Some("List the files."), Reply::Text)
        .unwrap_or_else(refused);
    let second = agent
        .step(
            &p1,
            &both,
            Some("Now search for TODOs."),
            Reply::Call("search"),
        )
        .unwrap_or_else(refused);
    let third = agent
        .step(&p2, &both, None, Reply::Text)
        .unwrap_or_else(refused);
    let (r1, r2, r3) = (
        Row {
            step: 1,
            sent: first,
        },
        Row {
            step: 2,
            sent: second,
        },
        Row {
            step: 3,
            sent: third,
        },
    );
    assert_sent_back(key, &r1, &r2);
    assert_sent_back(key, &r2, &r3);
    let total = r1.sent.usage.total_bytes;
    assert!(total >= 4096, "{key}: above OpenAI's minimum");
    let added = r2.sent.wire.body().contains(r#""type":"additional_tools""#);
    assert_eq!(added, mode, "{key}");
    if mode {
        assert_eq!(
            r2.sent.usage.cached_bytes,
            kept(total),
            "{key}: the addition keeps"
        );
        // The first request's `tools` stay as they were: the addition is an item.
        assert_eq!(r2.body()["tools"], r1.body()["tools"], "{key}");
    } else {
        assert_eq!(r2.sent.usage.cached_bytes, 0, "{key}: `tools` rewritten");
    }
    assert_eq!(
        r3.sent.usage.cached_bytes, 0,
        "{key}: `instructions` rewritten"
    );
}

#[test]
fn responses_headless_addition_keeps_on_gpt_5_4_and_rewrites_on_gpt_5_5() {
    for streamed in [false, true] {
        let sse = if streamed { "/sse" } else { "" };
        headless(
            &format!("responses/headless/gpt-5.4{sse}"),
            gpt_5_4(),
            streamed,
        );
        headless(
            &format!("responses/headless/gpt-5.5{sse}"),
            gpt_5_5(),
            streamed,
        );
    }
}
