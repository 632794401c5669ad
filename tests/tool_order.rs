//! `ToolOrder` (decision 72): under `FirstSeen` and `ByName` a mere reordering of the
//! effective tools logs no new header and keeps the whole cached prefix; `AsGiven` (the
//! default) is the recorder without the option, byte for byte. First-seen ranks are rebuilt
//! from the log after a reload or a fork, count headers other writers appended, and bring a
//! re-added tool back to its rank.

use std::collections::HashMap;

use mektpoy::agent::{Recorder, Step, ToolOrder};
use mektpoy::event::{Event, Reason, RequestHeader};
use mektpoy::meter::{Meter, MeterRow};
use mektpoy::{AgentLoop, Config, Message, Request, Route, Session, ToolSchema, route_for};
use proptest::prelude::*;

/// A tool whose definition is its name (and a version, for redefinitions).
fn tool_v(name: &str, version: u32) -> ToolSchema {
    let parameters = serde_json::json!({"type": "object", "properties": {}});
    let parameters = parameters.as_object().cloned().unwrap_or_default();
    ToolSchema::new(name, format!("{name} v{version}"), parameters)
}

fn tool(name: &str) -> ToolSchema {
    tool_v(name, 1)
}

fn tools(names: &[&str]) -> Vec<ToolSchema> {
    names.iter().map(|n| tool(n)).collect()
}

fn names(tools: &[ToolSchema]) -> Vec<&str> {
    tools.iter().map(ToolSchema::name).collect()
}

/// The route without a tool-update mode: the wire declares the header's tools, in order.
fn no_mode() -> Route {
    let route = route_for("deepseek", "deepseek-v4-pro");
    assert!(route.tool_update().is_none(), "the no-mode route");
    route
}

fn config_for(route: &Route) -> Config {
    Config::new(route.provider.to_string(), route.model.to_string())
        .with("max_tokens", 256.into())
        .unwrap()
}

fn agent(session: Session, route: Route, order: ToolOrder) -> AgentLoop {
    builder(session, route, order).build().unwrap()
}

fn builder(session: Session, route: Route, order: ToolOrder) -> mektpoy::agent::AgentLoopBuilder {
    let config = config_for(&route);
    AgentLoop::builder(session, route)
        .config(config)
        .system_prompt("You are a careful assistant. Read before you edit.")
        .tool_order(order)
}

/// One user turn with `tools`, sent and metered, then the model's answer.
fn turn(agent: &mut AgentLoop, tools: Vec<ToolSchema>) -> (Request, MeterRow) {
    agent.set_tools(tools).unwrap();
    let n = agent.turn() + 1;
    let request = agent
        .user_turn([Message::user(format!("u{n}"), format!("step {n}"))])
        .unwrap();
    let row = agent.observe(&request.to_wire().unwrap()).unwrap();
    let route = agent.route().clone();
    agent
        .append(Message::assistant(
            format!("a{n}"),
            "Done; the tests pass.",
            route.provider.to_string(),
            route.model.to_string(),
        ))
        .unwrap();
    (request, row)
}

/// The logged headers' tool names, in log order.
fn header_tools(session: &Session) -> Vec<Vec<String>> {
    session
        .events()
        .iter()
        .filter_map(|e| match e {
            Event::Header(h) => Some(h.header.tools.iter().map(|t| t.name().to_owned()).collect()),
            _ => None,
        })
        .collect()
}

fn reasons(session: &Session) -> Vec<Reason> {
    session
        .events()
        .iter()
        .filter_map(|e| match e {
            Event::Header(h) => Some(h.reason),
            _ => None,
        })
        .collect()
}

#[test]
fn as_given_is_the_default() {
    assert_eq!(ToolOrder::default(), ToolOrder::AsGiven);
    let session = Session::new("s");
    assert_eq!(Recorder::attach(&session).tool_order(), ToolOrder::AsGiven);
    let mut recorder = Recorder::attach(&session).with_tool_order(ToolOrder::ByName);
    assert_eq!(recorder.tool_order(), ToolOrder::ByName);
    recorder.set_tool_order(ToolOrder::FirstSeen);
    assert_eq!(recorder.tool_order(), ToolOrder::FirstSeen);
}

#[test]
fn as_given_a_reorder_on_the_no_mode_route_logs_a_change_and_misses() {
    let mut a = agent(Session::new("s"), no_mode(), ToolOrder::AsGiven);
    let (_, first) = turn(&mut a, tools(&["read", "edit", "search"]));
    let (request, row) = turn(&mut a, tools(&["search", "read", "edit"]));
    assert!(
        request.header_seq.is_some(),
        "a new header for a reordering"
    );
    assert_eq!(reasons(a.session()), [Reason::Initial, Reason::Change]);
    assert_eq!(names(&request.tools), ["search", "read", "edit"]);
    assert!(
        row.cached_bytes < first.total_bytes,
        "the reorder rewrote the cached prefix: {row:?} after {first:?}"
    );
}

#[test]
fn first_seen_and_by_name_keep_the_header_and_the_whole_cache_on_a_reorder() {
    for (order, logged) in [
        (ToolOrder::FirstSeen, ["read", "edit", "search"]),
        (ToolOrder::ByName, ["edit", "read", "search"]),
    ] {
        let mut a = agent(Session::new("s"), no_mode(), order);
        let (_, first) = turn(&mut a, tools(&["read", "edit", "search"]));
        let (request, row) = turn(&mut a, tools(&["search", "read", "edit"]));
        assert_eq!(request.header_seq, None, "{order:?}: no new header");
        assert_eq!(reasons(a.session()), [Reason::Initial], "{order:?}");
        assert_eq!(names(&request.tools), logged, "{order:?}");
        // DeepSeek caches in 64-token units: every whole one of the previous request.
        assert_eq!(
            row.cached_bytes,
            first.total_bytes / 256 * 256,
            "{order:?}: the whole previous request is cached"
        );
        // The caller's list is left as given.
        assert_eq!(names(a.tools()), ["search", "read", "edit"]);
    }
}

#[test]
fn new_tools_go_after_the_known_ones_in_the_order_given() {
    let mut a = agent(Session::new("s"), no_mode(), ToolOrder::FirstSeen);
    let (request, _) = turn(&mut a, tools(&["b", "a"]));
    assert_eq!(
        names(&request.tools),
        ["b", "a"],
        "the first list sets the ranks"
    );
    let (request, _) = turn(&mut a, tools(&["z", "a", "y", "b"]));
    assert_eq!(names(&request.tools), ["b", "a", "z", "y"]);
    let (request, _) = turn(&mut a, tools(&["y", "z", "b", "a"]));
    assert_eq!(request.header_seq, None);
    assert_eq!(names(&request.tools), ["b", "a", "z", "y"]);
}

#[test]
fn a_removed_then_re_added_tool_returns_to_its_rank() {
    let mut a = agent(Session::new("s"), no_mode(), ToolOrder::FirstSeen);
    let (first, _) = turn(&mut a, tools(&["a", "b", "c"]));
    let (removed, _) = turn(&mut a, tools(&["c", "a"]));
    assert_eq!(names(&removed.tools), ["a", "c"]);
    // `b` comes back, listed first, beside a tool the session has not seen.
    let (back, _) = turn(&mut a, tools(&["d", "b", "c", "a"]));
    assert_eq!(names(&back.tools), ["a", "b", "c", "d"]);
    // Without `d`, the tools are exactly the first request's: the same tools section.
    let (again, _) = turn(&mut a, tools(&["c", "b", "a"]));
    assert_eq!(names(&again.tools), names(&first.tools));
    let declared = |r: &Request| {
        let body: serde_json::Value = serde_json::from_str(r.to_wire().unwrap().body()).unwrap();
        body["tools"].clone()
    };
    assert!(declared(&first).is_array());
    assert_eq!(declared(&again), declared(&first), "the same tools section");
    assert_eq!(
        header_tools(a.session()),
        [
            vec!["a", "b", "c"],
            vec!["a", "c"],
            vec!["a", "b", "c", "d"],
            vec!["a", "b", "c"],
        ]
    );
}

#[test]
fn by_name_sorts_by_bytes() {
    let mut a = agent(Session::new("s"), no_mode(), ToolOrder::ByName);
    let (request, _) = turn(&mut a, tools(&["b", "z-1", "B", "a", "Z", "_"]));
    assert_eq!(names(&request.tools), ["B", "Z", "_", "a", "b", "z-1"]);
}

/// Three steps under `FirstSeen`, the first list setting the ranks `c, a, b`; the log and
/// the meter as they stand after them.
fn three_first_seen_steps() -> (Session, String) {
    let mut a = agent(Session::new("s"), no_mode(), ToolOrder::FirstSeen);
    turn(&mut a, tools(&["c", "a", "b"]));
    turn(&mut a, tools(&["a", "b", "c"]));
    turn(&mut a, tools(&["b", "c", "a"]));
    assert_eq!(header_tools(a.session()), [vec!["c", "a", "b"]]);
    let meter = a.meter().save();
    (a.into_session(), meter)
}

/// A loop resumed on `session` with the saved meter: the next request, reordered once more,
/// is logged in the first-seen order and finds the previous request whole in the cache.
fn assert_resumed_keeps_the_order(session: Session, meter: &str) {
    let route = no_mode();
    let meter = Meter::restore(&route, meter).unwrap();
    let mut a = builder(session, route, ToolOrder::FirstSeen)
        .meter(meter)
        .build()
        .unwrap();
    let before = a.meter().rows().last().unwrap().total_bytes;
    let (request, row) = turn(&mut a, tools(&["a", "b", "c"]));
    assert_eq!(names(&request.tools), ["c", "a", "b"]);
    // A new recorder logs a `Resume` header, with the same tools.
    assert_eq!(
        reasons(a.session()),
        [Reason::Initial, Reason::Resume],
        "no `Change`"
    );
    assert_eq!(header_tools(a.session())[1], ["c", "a", "b"]);
    assert_eq!(
        row.cached_bytes,
        before / 256 * 256,
        "the whole previous request cached (in DeepSeek's 64-token units)"
    );
}

#[test]
fn first_seen_ranks_are_rebuilt_after_to_jsonl_and_load_bytes() {
    let (session, meter) = three_first_seen_steps();
    let loaded = Session::load_bytes(session.to_jsonl().as_bytes()).unwrap();
    assert_resumed_keeps_the_order(loaded.session, &meter);
}

#[test]
fn first_seen_ranks_are_rebuilt_after_save_and_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let (session, meter) = three_first_seen_steps();
    session.save(&path).unwrap();
    let opened = Session::open(&path).unwrap();
    assert_resumed_keeps_the_order(opened.session, &meter);
    // The resumed steps were written to the file: a second reopen ranks them too.
    let reopened = Session::open(&path).unwrap().session;
    assert_eq!(header_tools(&reopened).last().unwrap(), &["c", "a", "b"]);
}

#[test]
fn first_seen_ranks_are_rebuilt_after_a_fork() {
    let (session, meter) = three_first_seen_steps();
    let fork = Session::fork(&session, session.len() as u64, "f").unwrap();
    assert_resumed_keeps_the_order(fork, &meter);
}

#[test]
fn a_fork_ranks_only_the_headers_it_inherits() {
    let mut a = agent(Session::new("s"), no_mode(), ToolOrder::FirstSeen);
    turn(&mut a, tools(&["b", "a"]));
    let upto = a.session().len() as u64;
    turn(&mut a, tools(&["d", "b", "a"]));
    let fork = Session::fork(a.session(), upto, "f").unwrap();
    let mut f = agent(fork, no_mode(), ToolOrder::FirstSeen);
    // `d` is not in the fork: it ranks with `c`, as given, after `b` and `a`.
    let (request, _) = turn(&mut f, tools(&["c", "a", "d", "b"]));
    assert_eq!(names(&request.tools), ["b", "a", "c", "d"]);
    // The parent, by contrast, knows `d`.
    let (request, _) = turn(&mut a, tools(&["c", "a", "d", "b"]));
    assert_eq!(names(&request.tools), ["b", "a", "d", "c"]);
}

#[test]
fn first_seen_ranks_count_headers_other_writers_appended() {
    let session = Session::new("s");
    let route = no_mode();
    let config = config_for(&route);
    let mut ours = Recorder::attach(&session).with_tool_order(ToolOrder::FirstSeen);
    let mut theirs = Recorder::attach(&session);
    let record = |r: &mut Recorder, list: &[&str]| {
        let list = tools(list);
        let request = r
            .record(&session, Step::new(&config, "", &list, &route))
            .unwrap();
        names(&request.tools)
            .into_iter()
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    assert_eq!(record(&mut ours, &["a"]), ["a"]);
    assert_eq!(record(&mut ours, &["b", "a"]), ["a", "b"]);
    // Another recorder logs `d` before `c`; a header appended by hand names `f`, then `e`.
    assert_eq!(
        record(&mut theirs, &["d", "c", "b", "a"]),
        ["d", "c", "b", "a"]
    );
    session
        .append(Event::header(
            RequestHeader::new(config.clone(), tools(&["f", "e"])),
            Reason::Change,
        ))
        .unwrap();
    assert_eq!(
        record(&mut ours, &["e", "c", "a", "f", "d", "b", "h"]),
        ["a", "b", "d", "c", "f", "e", "h"]
    );
}

// ---------------------------------------------------------------------------------------
// Property tests

/// The pool the generated tool sets draw from.
const POOL: [&str; 6] = ["read", "edit", "grep", "bash", "fetch", "Search"];

/// One generated step: which pool tools are effective (and in which version), and the
/// random order they are given in.
#[derive(Clone, Debug)]
struct GenStep {
    /// For each pool tool: absent, or its definition's version (1 or 2).
    present: [Option<u32>; POOL.len()],
    /// Sort keys giving this step's random order.
    keys: [u32; POOL.len()],
}

impl GenStep {
    /// The effective tools, in the step's random order.
    fn shuffled(&self) -> Vec<ToolSchema> {
        let mut picked: Vec<(u32, usize, u32)> = (0..POOL.len())
            .filter_map(|i| self.present[i].map(|v| (self.keys[i], i, v)))
            .collect();
        picked.sort();
        picked
            .into_iter()
            .map(|(_, i, v)| tool_v(POOL[i], v))
            .collect()
    }
}

/// Steps that often repeat the previous step's set (with definitions) in a new order, so
/// that pure reorderings are common.
fn steps() -> impl Strategy<Value = Vec<GenStep>> {
    let present = proptest::array::uniform6(proptest::option::weighted(0.7, 1u32..=2));
    let keys = proptest::array::uniform6(any::<u32>());
    proptest::collection::vec((present, keys, any::<bool>()), 1..9).prop_map(|raw| {
        let mut out: Vec<GenStep> = Vec::new();
        for (present, keys, repeat) in raw {
            let present = match out.last() {
                Some(prev) if repeat => prev.present,
                _ => present,
            };
            out.push(GenStep { present, keys });
        }
        out
    })
}

/// The first-seen model: known names by rank, unseen ones after them as given; the output
/// then ranks its unseen names.
fn first_seen_model(steps: &[Vec<ToolSchema>]) -> Vec<Vec<ToolSchema>> {
    let mut ranks: HashMap<String, usize> = HashMap::new();
    steps
        .iter()
        .map(|given| {
            let (mut known, unseen): (Vec<_>, Vec<_>) = given
                .iter()
                .cloned()
                .partition(|t| ranks.contains_key(t.name()));
            known.sort_by_key(|t| ranks[t.name()]);
            known.extend(unseen);
            for t in &known {
                let next = ranks.len();
                ranks.entry(t.name().to_owned()).or_insert(next);
            }
            known
        })
        .collect()
}

fn by_name(steps: &[Vec<ToolSchema>]) -> Vec<Vec<ToolSchema>> {
    steps
        .iter()
        .map(|s| {
            let mut s = s.clone();
            s.sort_by(|a, b| a.name().cmp(b.name()));
            s
        })
        .collect()
}

/// What a run produced: the log's bytes, and each step's logged tools, header and wire body.
#[derive(Debug, PartialEq)]
struct RunOut {
    log: String,
    steps: Vec<(Vec<String>, Option<u64>, String)>,
}

/// Records `steps` with one recorder over a fresh session on `route`, a user message before
/// and an answer after each step.
fn run(
    route: &Route,
    recorder: impl FnOnce(&Session) -> Recorder,
    steps: &[Vec<ToolSchema>],
) -> RunOut {
    let session = Session::new("p");
    let mut recorder = recorder(&session);
    let out = record_steps(&session, &mut recorder, route, steps, 0);
    RunOut {
        log: session.to_jsonl(),
        steps: out,
    }
}

fn record_steps(
    session: &Session,
    recorder: &mut Recorder,
    route: &Route,
    steps: &[Vec<ToolSchema>],
    first_turn: u64,
) -> Vec<(Vec<String>, Option<u64>, String)> {
    let config = config_for(route);
    let prompt = "Be brief.";
    steps
        .iter()
        .zip(first_turn + 1..)
        .map(|(tools, n)| {
            let user = [Message::user(format!("u{n}"), format!("step {n}"))];
            let step = Step::new(&config, prompt, tools, route)
                .at(n, 1, 0)
                .user_messages(&user);
            let request = recorder.record(session, step).unwrap();
            let wire = request.to_wire().unwrap().into_parts().0;
            session
                .append(Event::append(Message::assistant(
                    format!("a{n}"),
                    "ok",
                    route.provider.to_string(),
                    route.model.to_string(),
                )))
                .unwrap();
            let logged = names(&request.tools)
                .into_iter()
                .map(str::to_owned)
                .collect();
            (logged, request.header_seq.map(|s| s.0), wire)
        })
        .collect()
}

/// The routes the properties run on: no mode, in-history by reference, in-history inline.
fn routes() -> Vec<Route> {
    let by_reference = route_for("anthropic", "claude-opus-5")
        .into_builder()
        .inline_definitions(false)
        .deferred_placeholder(true)
        .build()
        .unwrap();
    let inline = route_for("anthropic", "claude-fable-5-1");
    assert!(by_reference.tool_update().is_some() && inline.inline_definitions());
    vec![no_mode(), by_reference, inline]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Under `FirstSeen` and `ByName` the random orders log exactly what the canonical order
    /// logs without the option: the same headers, developer messages and bytes, the same wire
    /// requests (so the same projections) on every route; a pure reordering logs no header.
    #[test]
    fn prop_order_churn_logs_what_the_canonical_order_logs(steps in steps()) {
        let shuffled: Vec<Vec<ToolSchema>> = steps.iter().map(GenStep::shuffled).collect();
        for route in routes() {
            for (order, canonical) in [
                (ToolOrder::FirstSeen, first_seen_model(&shuffled)),
                (ToolOrder::ByName, by_name(&shuffled)),
            ] {
                let ordered = run(&route, |s| Recorder::attach(s).with_tool_order(order), &shuffled);
                let plain = run(&route, Recorder::attach, &canonical);
                prop_assert_eq!(&ordered, &plain, "{:?} on {}", order, route.model);
                // Ordering the canonical order again changes nothing.
                let again = run(&route, |s| Recorder::attach(s).with_tool_order(order), &canonical);
                prop_assert_eq!(&again, &plain);
                for (i, w) in steps.windows(2).enumerate() {
                    if w[0].present == w[1].present {
                        prop_assert_eq!(ordered.steps[i + 1].1, None, "step {} only reorders", i + 1);
                    }
                }
            }
        }
    }

    /// `AsGiven` set explicitly is the recorder without the option, byte for byte.
    #[test]
    fn prop_as_given_is_the_recorder_without_the_option(steps in steps()) {
        let shuffled: Vec<Vec<ToolSchema>> = steps.iter().map(GenStep::shuffled).collect();
        for route in routes() {
            let given = run(&route, |s| Recorder::attach(s).with_tool_order(ToolOrder::AsGiven), &shuffled);
            let plain = run(&route, Recorder::attach, &shuffled);
            prop_assert_eq!(&given, &plain);
            for ((logged, _, _), tools) in given.steps.iter().zip(&shuffled) {
                prop_assert_eq!(logged, &names(tools));
            }
        }
    }

    /// A session reloaded at any step and continued by a new `FirstSeen` recorder logs every
    /// later step in the order the uninterrupted session logs it.
    #[test]
    fn prop_first_seen_survives_a_reload_at_any_step(steps in steps(), cut in any::<prop::sample::Index>()) {
        let shuffled: Vec<Vec<ToolSchema>> = steps.iter().map(GenStep::shuffled).collect();
        let route = no_mode();
        let first_seen = |s: &Session| Recorder::attach(s).with_tool_order(ToolOrder::FirstSeen);
        let whole = run(&route, first_seen, &shuffled);
        let cut = cut.index(shuffled.len() + 1);
        let session = Session::new("p");
        let mut recorder = first_seen(&session);
        let mut logged = record_steps(&session, &mut recorder, &route, &shuffled[..cut], 0);
        let loaded = Session::load_bytes(session.to_jsonl().as_bytes()).unwrap().session;
        let mut recorder = first_seen(&loaded);
        logged.extend(record_steps(&loaded, &mut recorder, &route, &shuffled[cut..], cut as u64));
        let orders = |steps: &[(Vec<String>, Option<u64>, String)]| {
            steps.iter().map(|s| s.0.clone()).collect::<Vec<_>>()
        };
        prop_assert_eq!(orders(&logged), orders(&whole.steps));
    }
}
