//! Replaying a recorded session on a route (decision 74): on its own route the replay
//! reproduces the log, every request byte for byte and the meter's rows; on another route it
//! gives what recording the same loop there would have given; a log it cannot follow is a
//! typed error naming the event.

use mektpoy::agent::replay::{Replay, ReplayErrorKind};
use mektpoy::event::{Rewrite, SeriesStart};
use mektpoy::route::WireApi;
use mektpoy::vocab::{MessageSource, Role};
use mektpoy::{
    AgentLoop, Config, ContentBlock, Event, Message, Request, Route, Session, ToolSchema, route_for,
};
use serde_json::json;

fn tool(name: &str, properties: serde_json::Value) -> ToolSchema {
    ToolSchema::from_value(json!({
        "name": name,
        "description": format!("The {name} tool"),
        "parameters": {"type": "object", "properties": properties},
    }))
    .unwrap()
}

fn query() -> serde_json::Value {
    json!({"query": {"type": "string"}})
}

/// Long enough to be above every route's minimum cacheable length.
fn prompt(version: u32) -> String {
    format!(
        "Prompt v{version}. {}",
        "Read the files before you change them and run the tests after every edit. ".repeat(60)
    )
}

/// The routes of the tests: no mode, addition-only, in-history inline (binds thinking),
/// in-history by reference, no mode binding thinking.
fn routes() -> Vec<(&'static str, Route)> {
    let by_reference = route_for("anthropic", "claude-opus-5")
        .into_builder()
        .inline_definitions(false)
        .deferred_placeholder(true)
        .build()
        .unwrap();
    vec![
        ("no mode", route_for("deepseek", "deepseek-v4-pro")),
        ("addition-only", route_for("deepseek", "deepseek-flash")),
        ("inline", route_for("anthropic", "claude-fable-5-1")),
        ("by reference", by_reference),
        (
            "no mode, binds thinking",
            route_for("anthropic", "claude-fable-5-2"),
        ),
    ]
}

thread_local! {
    /// Whether [`answer`] signs its thinking (a direct recording that stands for a replay on
    /// another route that binds thinking does not: decision 108).
    static SIGNED: std::cell::Cell<bool> = const { std::cell::Cell::new(true) };
}

/// `f` with [`answer`]'s thinking unsigned: what a replay on a route that binds thinking,
/// other than the recording route, copies the log's answers as (decision 108).
fn unsigned<T>(f: impl FnOnce() -> T) -> T {
    SIGNED.with(|s| s.set(false));
    let out = f();
    SIGNED.with(|s| s.set(true));
    out
}

/// A direct recording on `to` standing for a replay there of a log recorded on `from`: its
/// answers' thinking unsigned when `to` binds thinking and is not `from` (decision 108).
fn standing_for<T>(from: &Route, to: &Route, f: impl FnOnce() -> T) -> T {
    if to.binds_thinking() && from != to {
        unsigned(f)
    } else {
        f()
    }
}

/// An answer with signed thinking, the same on every route (another provider's reasoning is
/// left out by the serializer, which the replay must reproduce too).
fn answer(id: &str, call: Option<&str>) -> Message {
    let mut extra = indexmap::IndexMap::new();
    if SIGNED.with(std::cell::Cell::get) {
        extra.insert("signature".to_owned(), json!(format!("sig-{id}")));
    }
    let mut content = vec![
        ContentBlock::Reasoning {
            text: "Check the failing test first.".into(),
            extra,
        },
        ContentBlock::text(format!(
            "Answer {id}: the change is applied and the tests pass."
        )),
    ];
    if let Some(call) = call {
        content.push(ContentBlock::tool_call(call, "read", r#"{"query":"src/main.rs"}"#).unwrap());
    }
    Message::new(
        id,
        Role::Assistant,
        content,
        MessageSource::Model {
            provider: "anthropic".into(),
            model: "claude-fable-5-1".into(),
        },
    )
}

/// What the loop sent and metered.
struct Recorded {
    agent: AgentLoop,
    /// Every body the loop recorded, failed attempts included.
    sent: Vec<String>,
    /// The bodies the provider accepted, metered.
    metered: Vec<String>,
}

impl Recorded {
    fn send(&mut self, request: &Request, accepted: bool) {
        let wire = request.to_wire().unwrap();
        self.sent.push(wire.body().to_owned());
        if accepted {
            self.agent.observe(&wire).unwrap();
            self.metered.push(wire.body().to_owned());
        }
    }

    /// Replaces the surface from message `from` to message `to` (by id) with a summary.
    fn compact(&self, from: &str, to: &str, summary: &str) {
        let ids: Vec<String> = self
            .agent
            .session()
            .surface()
            .iter()
            .map(|n| match n {
                mektpoy::session::SurfaceNode::Message(m) => m.id().to_owned(),
                _ => String::new(),
            })
            .collect();
        let start = ids.iter().position(|i| i == from).unwrap();
        let end = ids.iter().position(|i| i == to).unwrap();
        let summary = Message::user(summary, format!("Summary of {from}..{to}."));
        self.agent
            .session()
            .append(Event::replace(summary, start, end))
            .unwrap();
    }
}

/// A loop with tool churn, tool calls and results, a step whose batch logs nothing, a failed
/// attempt retried after a compaction, a new series, a prompt change and a second compaction
/// across it, and a changed definition.
fn record(route: &Route) -> Recorded {
    let config = Config::new(route.provider.to_string(), route.model.to_string())
        .with("max_tokens", 1024.into())
        .unwrap();
    let agent = AgentLoop::builder(Session::new("r"), route.clone())
        .config(config)
        .system_prompt(prompt(1))
        .build()
        .unwrap();
    let mut r = Recorded {
        agent,
        sent: Vec::new(),
        metered: Vec::new(),
    };
    let base = || vec![tool("read", query()), tool("edit", query())];
    let with = |extra: &[&str]| {
        let mut tools = base();
        tools.extend(extra.iter().map(|n| tool(n, query())));
        tools
    };
    // Turn 1: a tool call, its result, and a next step that logs nothing.
    r.agent.set_tools(with(&["shell"])).unwrap();
    let q = r
        .agent
        .user_turn([Message::user("u1", "Fix the parser.")])
        .unwrap();
    r.send(&q, true);
    r.agent.append(answer("a1", Some("c1"))).unwrap();
    r.agent
        .append(Message::tool_result("t1", "c1", "fn main() {}"))
        .unwrap();
    let q = r.agent.next_step().unwrap();
    r.send(&q, true);
    r.agent.append(answer("a1b", None)).unwrap();
    // Turns 2-4: an MCP server connects, the plugin goes and comes back.
    for (turn, tools) in [
        (2, with(&["shell", "mcp_search"])),
        (3, with(&["mcp_search"])),
        (4, with(&["mcp_search", "shell"])),
    ] {
        r.agent.set_tools(tools).unwrap();
        let q = r
            .agent
            .user_turn([Message::user(format!("u{turn}"), "Carry on.")])
            .unwrap();
        r.send(&q, true);
        r.agent.append(answer(&format!("a{turn}"), None)).unwrap();
    }
    // Turn 5: the first attempt fails (context too long), the loop compacts and retries.
    let q = r
        .agent
        .user_turn([Message::user("u5", "Carry on.")])
        .unwrap();
    r.send(&q, false);
    r.compact("u1", "a3", "sum1");
    let q = r.agent.retry().unwrap();
    r.send(&q, true);
    r.agent.append(answer("a5", None)).unwrap();
    // Turn 6: the loop asks for a new series.
    r.agent.new_series();
    let q = r
        .agent
        .user_turn([Message::user("u6", "Carry on.")])
        .unwrap();
    r.send(&q, true);
    r.agent.append(answer("a6", None)).unwrap();
    // Turn 7: the prompt changes.
    r.agent.set_system_prompt(prompt(2));
    let q = r
        .agent
        .user_turn([Message::user("u7", "Carry on.")])
        .unwrap();
    r.send(&q, true);
    r.agent.append(answer("a7", None)).unwrap();
    // Turn 8: a compaction across the prompt change, then `edit` gains a parameter; a call.
    r.compact("u6", "a7", "sum2");
    let mut tools = with(&["mcp_search", "shell"]);
    tools[1] = tool(
        "edit",
        json!({"query": {"type": "string"}, "dry_run": {"type": "boolean"}}),
    );
    r.agent.set_tools(tools).unwrap();
    let q = r
        .agent
        .user_turn([Message::user("u8", "Carry on.")])
        .unwrap();
    r.send(&q, true);
    r.agent.append(answer("a8", Some("c8"))).unwrap();
    r.agent
        .append(Message::tool_result("t8", "c8", "fn parse() {}"))
        .unwrap();
    let q = r.agent.next_step().unwrap();
    r.send(&q, true);
    r.agent.append(answer("a8b", None)).unwrap();
    r
}

/// The recorded log as a file would give it back.
fn reload(session: &Session) -> Session {
    Session::load_bytes(session.to_jsonl().as_bytes())
        .unwrap()
        .session
}

/// The bodies a replay hands out: every request, and the metered ones.
/// `log`, recorded on `recorded_on`, replayed on `route`.
fn replay(
    log: &Session,
    route: &Route,
    recorded_on: &Route,
) -> (mektpoy::agent::replay::Replayed, Vec<String>, Vec<String>) {
    let (mut all, mut metered) = (Vec::new(), Vec::new());
    let replayed = Replay::new(route.clone())
        .recorded_on(recorded_on.clone())
        .run_each(log, |request, wire| {
            all.push(wire.body().to_owned());
            if request.row.is_some() {
                metered.push(wire.body().to_owned());
            }
        })
        .unwrap();
    (replayed, all, metered)
}

#[test]
fn on_its_own_route_the_replay_reproduces_the_log_the_bodies_and_the_meter() {
    for (label, route) in routes() {
        let recorded = record(&route);
        let log = reload(recorded.agent.session());
        let (replayed, all, metered) = replay(&log, &route, &route);
        assert_eq!(
            replayed.session.to_jsonl(),
            log.to_jsonl(),
            "{label}: the re-recorded log, byte for byte"
        );
        assert_eq!(all, recorded.sent, "{label}: every recorded request");
        assert_eq!(metered, recorded.metered, "{label}: the metered requests");
        assert_eq!(
            replayed.meter.rows(),
            recorded.agent.meter().rows(),
            "{label}"
        );
        assert_eq!(
            replayed.meter.save(),
            recorded.agent.meter().save(),
            "{label}"
        );
        assert_eq!(
            replayed.report(),
            recorded.agent.meter().report(),
            "{label}"
        );
        // Every metered request is attributed as the loop attributed it, its position (the
        // retry's attempt included) and its cause in the caller's terms.
        assert_eq!(
            replayed.attributions(),
            recorded.agent.attributions(),
            "{label}"
        );
        assert_eq!(
            replayed.attribution_report(),
            recorded.agent.attribution_report(),
            "{label}"
        );
        let carried: Vec<_> = replayed
            .requests
            .iter()
            .filter_map(|r| r.attribution.clone())
            .collect();
        assert_eq!(carried, replayed.attributions(), "{label}");
        assert!(
            replayed
                .attributions()
                .iter()
                .any(|a| a.position == Some((5, 1, 1))),
            "{label}: the retry is attempt 1"
        );
        // The failed attempt is replayed but not metered.
        let unmetered: Vec<(u64, u64)> = replayed
            .requests
            .iter()
            .filter(|r| r.row.is_none())
            .map(|r| (r.turn, r.step))
            .collect();
        assert_eq!(unmetered, [(5, 1)], "{label}");
    }
}

#[test]
fn on_another_route_the_replay_is_what_recording_there_would_have_sent() {
    let recorded: Vec<(&str, Route, Recorded)> = routes()
        .into_iter()
        .map(|(label, route)| {
            let r = record(&route);
            (label, route, r)
        })
        .collect();
    for (from, source_route, source) in &recorded {
        let log = reload(source.agent.session());
        for (to, route, direct) in &recorded {
            let (replayed, all, metered) = replay(&log, route, source_route);
            // On a route that binds thinking, another route's log goes back without its
            // signed thinking (decision 108): recording there with such answers.
            let unsigned_direct;
            let direct = if route.binds_thinking() && route != source_route {
                unsigned_direct = standing_for(source_route, route, || record(route));
                &unsigned_direct
            } else {
                direct
            };
            assert_eq!(all, direct.sent, "{from} replayed on {to}: every request");
            assert_eq!(metered, direct.metered, "{from} replayed on {to}: metered");
            assert_eq!(
                replayed.meter.rows(),
                direct.agent.meter().rows(),
                "{from} replayed on {to}"
            );
            assert_eq!(
                replayed.attributions(),
                direct.agent.attributions(),
                "{from} replayed on {to}: attributions"
            );
        }
    }
}

/// `(turn, step)` of the metered requests that missed the previous one, with what they
/// rewrote and why their series started.
type Miss = ((u64, u64), Option<Rewrite>, Option<SeriesStart>);

fn misses(log: &Session, route: &Route) -> Vec<Miss> {
    Replay::new(route.clone())
        .run(log)
        .unwrap()
        .missed()
        .map(|r| ((r.turn, r.step), r.rewrite, r.series_start))
        .collect()
}

#[test]
fn the_figures_differ_by_route_as_the_modes_say() {
    use Rewrite::{History, System, Tools};
    let routes = routes();
    // Recorded on the inline route, replayed on each.
    let log = reload(record(&routes[2].1).agent.session());
    let compactions = |first| {
        [
            ((5, 1), Some(first), Some(SeriesStart::Rewound)),
            ((8, 1), Some(Tools), Some(SeriesStart::Rewound)),
        ]
    };
    // No mode: every tool change (turns 2, 3, 4) and the prompt change (7) rewrite the
    // prefix, besides the caller's compactions (5, 8).
    let [c5, c8] = compactions(History { message: 0 });
    assert_eq!(
        misses(&log, &routes[0].1),
        [
            ((2, 1), Some(Tools), None),
            ((3, 1), Some(Tools), None),
            ((4, 1), Some(Tools), None),
            c5,
            ((7, 1), Some(System), Some(SeriesStart::PromptReplaced)),
            c8,
        ]
    );
    // Addition-only: the addition (2) and the prompt (7) are kept; the removal (3) rewrites.
    // The tool coming back (4) rewrites too, but DeepSeek still holds the request before the
    // removal, a prefix of this one: reading it gives as many whole 64-token units as the
    // previous request holds, so nothing a client could keep is lost.
    let [c5, c8] = compactions(Tools);
    assert_eq!(
        misses(&log, &routes[1].1),
        [((3, 1), Some(Tools), None), c5, c8]
    );
    // In history, inline or by reference: only the caller's compactions cost anything.
    for route in [&routes[2].1, &routes[3].1] {
        assert_eq!(misses(&log, route), compactions(Tools));
    }
    let report = |route: &Route| Replay::new(route.clone()).run(&log).unwrap().report();
    let (plain, inline) = (report(&routes[0].1), report(&routes[2].1));
    assert!(
        plain.hit_ratio() < inline.hit_ratio(),
        "{plain:?} {inline:?}"
    );
    assert_eq!(
        inline.cached_bytes, inline.best_bytes,
        "inline loses only what the caller chose"
    );
    assert!(
        plain.cached_bytes < plain.best_bytes,
        "no mode loses what a better route keeps"
    );
    assert!(plain.cost.is_none(), "no verified DeepSeek price");
    assert!(inline.cost.is_some());
}

#[test]
fn the_miss_lines_name_each_rewrite_and_who_made_it() {
    use mektpoy::agent::Cause;
    let route = route_for("deepseek", "deepseek-v4-pro");
    let recorded = record(&route);
    let log = reload(recorded.agent.session());
    let replayed = Replay::new(route.clone()).run(&log).unwrap();
    let lines = replayed.miss_lines();
    // One line per metered request that missed, in order, each the attribution's own line.
    let missed: Vec<&mektpoy::agent::replay::ReplayedRequest> = replayed.missed().collect();
    assert_eq!(lines.len(), missed.len(), "{lines:#?}");
    for (line, r) in lines.iter().zip(&missed) {
        assert_eq!(line, &r.attribution.as_ref().unwrap().to_string());
    }
    let cause = |turn: u64| {
        missed
            .iter()
            .find(|r| r.turn == turn)
            .and_then(|r| r.attribution.as_ref())
            .and_then(|a| a.cause)
    };
    // Turn 3 removes `shell` (no mode: `tools` is rewritten), turn 5's retry follows a
    // compaction, turn 7 changes the prompt: all the caller's.
    assert_eq!(cause(3), Some(Cause::ToolsChanged));
    assert_eq!(cause(5), Some(Cause::Compaction));
    assert_eq!(cause(7), Some(Cause::SystemPromptChanged));
    let line = |turn: u64| &lines[missed.iter().position(|r| r.turn == turn).unwrap()];
    assert!(
        line(3).contains("tools_changed") && line(3).contains("tool `shell` removed by the caller"),
        "{}",
        line(3)
    );
    assert!(
        line(5).contains("by the caller's compaction or rewind"),
        "{}",
        line(5)
    );
    assert!(
        line(7).starts_with("request ") && line(7).contains("system_changed"),
        "{}",
        line(7)
    );
    // The report's totals are the attributions'.
    let report = replayed.attribution_report();
    assert_eq!(report.requests, replayed.meter.rows().len());
    let lost: u64 = replayed.attributions().iter().map(|a| a.lost_tokens).sum();
    assert_eq!(report.lost_by_caller() + report.lost_otherwise(), lost);
}

/// Below a route's minimum cacheable length a request that extends the previous one still
/// reads nothing: its line says so instead of naming a rewrite nobody made.
#[test]
fn a_miss_without_a_rewrite_is_the_minimum_cacheable_length() {
    let route = route_for("anthropic", "claude-opus-4-8");
    let config = Config::new("anthropic", "claude-opus-4-8")
        .with("max_tokens", 64.into())
        .unwrap();
    let mut agent = AgentLoop::builder(Session::new("m"), route.clone())
        .config(config)
        .system_prompt("Be brief.")
        .tools([tool("read", query())])
        .build()
        .unwrap();
    for turn in 0..3 {
        let wire = agent
            .user_turn([Message::user(format!("u{turn}"), "Carry on.")])
            .unwrap()
            .to_wire()
            .unwrap();
        agent.observe(&wire).unwrap();
        agent
            .append(Message::assistant(
                format!("a{turn}"),
                "Done.",
                "anthropic",
                "claude-opus-4-8",
            ))
            .unwrap();
    }
    let replayed = Replay::new(route.clone())
        .run(&reload(agent.session()))
        .unwrap();
    assert_eq!(replayed.attributions(), agent.attributions());
    let lines = replayed.miss_lines();
    assert_eq!(lines.len(), 2, "{lines:#?}");
    for (a, line) in agent.attributions()[1..].iter().zip(&lines) {
        assert_eq!(a.cause, None, "nothing departs");
        assert!(
            line.contains("extends the previous request")
                && line.contains("below the route's minimum cacheable length (1024 tokens)"),
            "{line}"
        );
    }
}

#[test]
fn a_loop_resumed_by_another_process_replays_as_it_ran() {
    let route = route_for("anthropic", "claude-fable-5-1");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let config = Config::new("anthropic", "claude-fable-5-1")
        .with("max_tokens", 1024.into())
        .unwrap();
    let mut sent = Vec::new();
    let saved = {
        let session = Session::create(&path, "s").unwrap();
        let mut agent = AgentLoop::builder(session, route.clone())
            .config(config.clone())
            .system_prompt(prompt(1))
            .tools([tool("read", query())])
            .build()
            .unwrap();
        for turn in 1..=2 {
            let wire = agent
                .user_turn([Message::user(format!("u{turn}"), "Carry on.")])
                .unwrap()
                .to_wire()
                .unwrap();
            agent.observe(&wire).unwrap();
            sent.push(wire.body().to_owned());
            agent.append(answer(&format!("a{turn}"), None)).unwrap();
        }
        agent.meter().save()
    };
    // The next process: a fresh recorder (a `resume` header), the meter restored.
    let session = Session::open(&path).unwrap().session;
    let meter = mektpoy::Meter::restore(&route, &saved).unwrap();
    let mut agent = AgentLoop::builder(session, route.clone())
        .config(config)
        .system_prompt(prompt(1))
        .tools([tool("read", query()), tool("grep", query())])
        .meter(meter)
        .build()
        .unwrap();
    for turn in 3..=4 {
        let wire = agent
            .user_turn([Message::user(format!("u{turn}"), "Carry on.")])
            .unwrap()
            .to_wire()
            .unwrap();
        agent.observe(&wire).unwrap();
        sent.push(wire.body().to_owned());
        agent.append(answer(&format!("a{turn}"), None)).unwrap();
    }
    let log = reload(agent.session());
    assert!(
        log.events()
            .iter()
            .any(|e| matches!(e, Event::Header(h) if h.reason == mektpoy::event::Reason::Resume)),
        "the second process logged a resume header"
    );
    let (replayed, all, _) = replay(&log, &route, &route);
    assert_eq!(replayed.session.to_jsonl(), log.to_jsonl());
    assert_eq!(all, sent);
    assert_eq!(replayed.meter.rows(), agent.meter().rows());
}

#[test]
fn answers_appended_without_stamps_still_show_each_request() {
    // A loop that appends answers and results straight to the session (no turn or step on
    // them), compacts with an assistant-role summary, and continues steps that log nothing.
    let route = route_for("anthropic", "claude-fable-5-1");
    let config = Config::new("anthropic", "claude-fable-5-1")
        .with("max_tokens", 1024.into())
        .unwrap();
    let mut agent = AgentLoop::builder(Session::new("raw"), route.clone())
        .config(config)
        .system_prompt(prompt(1))
        .tools([tool("read", query())])
        .build()
        .unwrap();
    let mut sent = Vec::new();
    let mut send = |agent: &mut AgentLoop, request: Request| {
        let wire = request.to_wire().unwrap();
        agent.observe(&wire).unwrap();
        sent.push(wire.body().to_owned());
    };
    let raw = |agent: &AgentLoop, message: Message| {
        agent.session().append(Event::append(message)).unwrap();
    };
    let q = agent.user_turn([Message::user("u1", "Fix it.")]).unwrap();
    send(&mut agent, q);
    raw(&agent, answer("a1", Some("c1")));
    raw(&agent, Message::tool_result("t1", "c1", "fn main() {}"));
    let q = agent.next_step().unwrap(); // logs nothing
    send(&mut agent, q);
    raw(&agent, answer("a2", Some("c2")));
    raw(&agent, Message::tool_result("t2", "c2", "fn parse() {}"));
    let q = agent.next_step().unwrap(); // logs nothing either
    send(&mut agent, q);
    raw(&agent, answer("a3", None));
    let summary = Message::assistant("sum", "Summary: fixed.", "anthropic", "claude-fable-5-1");
    agent
        .session()
        .append(Event::replace(summary, 1, 6))
        .unwrap();
    let q = agent.user_turn([Message::user("u2", "Thanks.")]).unwrap();
    send(&mut agent, q);
    raw(&agent, answer("a4", None));

    let log = reload(agent.session());
    let (replayed, all, metered) = replay(&log, &route, &route);
    assert_eq!(
        all, sent,
        "the two steps that logged nothing, and no request for the summary"
    );
    assert_eq!(metered, sent);
    assert_eq!(replayed.meter.rows(), agent.meter().rows());
    assert_eq!(replayed.session.to_jsonl(), log.to_jsonl());
}

fn stamped(message: Message, turn: u64, step: Option<u64>) -> Event {
    let Event::Message(mut m) = Event::append(message) else {
        unreachable!()
    };
    m.turn = Some(turn);
    m.step = step;
    Event::Message(m)
}

#[test]
fn a_log_the_replay_cannot_follow_is_a_typed_error_naming_the_event() {
    let route = route_for("deepseek", "deepseek-flash");
    // A tool-change message stamped as the recorder stamps it, with no header in its batch.
    let recorded = record(&route);
    let log = reload(recorded.agent.session());
    let seq = log
        .append(stamped(
            Message::developer("d-stray", vec![ContentBlock::removal("shell").unwrap()]),
            9,
            Some(1),
        ))
        .unwrap();
    let err = Replay::new(route.clone()).run(&log).unwrap_err();
    assert_eq!(err.seq(), seq);
    assert!(
        matches!(err.kind(), ReplayErrorKind::ToolChangeWithoutHeader),
        "{err}"
    );
    assert!(
        err.to_string().starts_with(&format!("event {seq}: ")),
        "{err}"
    );

    // A prompt node as the recorder writes it, but no header ever.
    let log = Session::new("h");
    log.append(stamped(Message::system("p", "Be brief."), 1, Some(1)))
        .unwrap();
    let err = Replay::new(route.clone()).run(&log).unwrap_err();
    assert_eq!(err.seq().0, 0);
    assert!(matches!(err.kind(), ReplayErrorKind::NoHeader), "{err}");

    // A request the target route cannot carry: recorded without `max_tokens` on a chat
    // route, answered, then replayed on the Messages API.
    let chat = Route::plain("openai-compatible", "*", WireApi::OpenAiChat);
    let mut agent = AgentLoop::builder(Session::new("c"), chat)
        .config(Config::new("acme", "acme-1"))
        .build()
        .unwrap();
    agent.user_turn([Message::user("u1", "hi")]).unwrap();
    agent
        .append(Message::assistant("a1", "ok", "acme", "acme-1"))
        .unwrap();
    let err = Replay::new(route.clone()).run(agent.session()).unwrap_err();
    assert_eq!(err.seq().0, 0, "the request's batch");
    assert!(matches!(err.kind(), ReplayErrorKind::Wire(_)), "{err}");
    // The same log on its own kind of route replays.
    assert!(
        Replay::new(Route::plain("openai-compatible", "*", WireApi::OpenAiChat))
            .run(agent.session())
            .is_ok()
    );

    // A corrupt file never reaches the replay: loading names the line and the event.
    let mut text = recorded.agent.session().to_jsonl();
    text.push_str("{\"type\":\"user/message\",\"data\":{}}\n");
    let err = Session::load_bytes(text.as_bytes()).unwrap_err();
    assert!(
        matches!(err, mektpoy::session::LoadError::Event { .. }),
        "{err}"
    );
}

/// One operation of a random loop.
#[derive(Clone, Debug)]
enum Op {
    /// A user turn with these tools (a mask over four), `edit` redefined or not, the answer
    /// calling a tool (then a result and a next step) or not, opening a new series or not.
    Turn {
        tools: u8,
        redefine: bool,
        call: bool,
        new_series: bool,
    },
    /// A compaction of the caller's messages `from..=to` (indices taken modulo their number).
    Compact { from: usize, to: usize },
    /// The system prompt becomes version `n`.
    Prompt(u32),
    /// A user turn whose first attempt fails; the loop compacts everything before it and
    /// retries.
    FailCompactRetry,
}

fn op() -> impl proptest::strategy::Strategy<Value = Op> {
    use proptest::prelude::*;
    prop_oneof![
        4 => (0u8..16, any::<bool>(), any::<bool>(), proptest::bool::weighted(0.2)).prop_map(
            |(tools, redefine, call, new_series)| Op::Turn { tools, redefine, call, new_series }
        ),
        1 => (0usize..64, 0usize..64).prop_map(|(from, to)| Op::Compact { from, to }),
        1 => (0u32..3).prop_map(Op::Prompt),
        1 => Just(Op::FailCompactRetry),
    ]
}

/// The caller's messages on the surface (not the recorder's prompt nodes and tool changes),
/// with their positions and roles.
fn caller_nodes(session: &Session) -> Vec<(usize, String, Role)> {
    session
        .surface()
        .iter()
        .enumerate()
        .filter_map(|(i, n)| match n {
            mektpoy::session::SurfaceNode::Message(m)
                if matches!(m.role(), Role::User | Role::Assistant | Role::Tool) =>
            {
                Some((i, m.id().to_owned(), m.role()))
            }
            _ => None,
        })
        .collect()
}

fn run_ops(route: &Route, ops: &[Op]) -> Recorded {
    let config = Config::new(route.provider.to_string(), route.model.to_string())
        .with("max_tokens", 1024.into())
        .unwrap();
    let agent = AgentLoop::builder(Session::new("p"), route.clone())
        .config(config)
        .system_prompt(prompt(0))
        .build()
        .unwrap();
    let mut r = Recorded {
        agent,
        sent: Vec::new(),
        metered: Vec::new(),
    };
    let names = ["read", "edit", "shell", "mcp_search"];
    // Whether the prompt changed or the surface was replaced since the last record: a new
    // series asked for then leaves no trace of its own in the log (decision 74), so the
    // loop does not ask.
    let mut dirty = false;
    for (n, op) in ops.iter().enumerate() {
        match *op {
            Op::Turn {
                tools,
                redefine,
                call,
                new_series,
            } => {
                if new_series && !dirty {
                    r.agent.new_series();
                }
                dirty = false;
                let tools: Vec<ToolSchema> = names
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| tools & (1 << i) != 0)
                    .map(|(_, name)| match (*name, redefine) {
                        ("edit", true) => tool("edit", json!({"dry_run": {"type": "boolean"}})),
                        _ => tool(name, query()),
                    })
                    .collect();
                r.agent.set_tools(tools).unwrap();
                let q = r
                    .agent
                    .user_turn([Message::user(format!("u{n}"), "Carry on.")])
                    .unwrap();
                r.send(&q, true);
                let call_id = format!("c{n}");
                r.agent
                    .append(answer(&format!("a{n}"), call.then_some(call_id.as_str())))
                    .unwrap();
                if call {
                    r.agent
                        .append(Message::tool_result(format!("t{n}"), call_id, "ok"))
                        .unwrap();
                    let q = r.agent.next_step().unwrap();
                    r.send(&q, true);
                    r.agent.append(answer(&format!("a{n}b"), None)).unwrap();
                }
            }
            Op::Compact { from, to } => {
                // Whole turns, so that a call and its result go together.
                let nodes = caller_nodes(r.agent.session());
                let starts: Vec<usize> = (0..nodes.len())
                    .filter(|&k| nodes[k].2 == Role::User)
                    .collect();
                if starts.is_empty() {
                    continue;
                }
                let (i, j) = (from % starts.len(), to % starts.len());
                let (i, j) = (i.min(j), i.max(j));
                let last = starts.get(j + 1).map_or(nodes.len(), |&k| k) - 1;
                let (i, j) = (starts[i], last);
                let summary = Message::user(format!("s{n}"), "Summary.");
                // A range that would orphan a result is refused alike on every route.
                dirty |= r
                    .agent
                    .session()
                    .append(Event::replace(summary, nodes[i].0, nodes[j].0))
                    .is_ok();
            }
            Op::Prompt(v) => {
                r.agent.set_system_prompt(prompt(v));
                dirty = true;
            }
            Op::FailCompactRetry => {
                dirty = false;
                let before = caller_nodes(r.agent.session());
                let q = r
                    .agent
                    .user_turn([Message::user(format!("u{n}"), "Carry on.")])
                    .unwrap();
                let (Some(first), Some(last)) = (before.first(), before.last()) else {
                    r.send(&q, true);
                    r.agent.append(answer(&format!("a{n}"), None)).unwrap();
                    continue;
                };
                r.send(&q, false);
                let summary = Message::user(format!("s{n}"), "Summary.");
                r.agent
                    .session()
                    .append(Event::replace(summary, first.0, last.0))
                    .unwrap();
                let q = r.agent.retry().unwrap();
                r.send(&q, true);
                r.agent.append(answer(&format!("a{n}"), None)).unwrap();
            }
        }
    }
    r
}

/// The meter's rows with `Asked` read as `Rewound`: when a loop both asks for a new series and
/// compacts before the same request, the log says only that a series started where the
/// surface was replaced (decision 74), and the replay reports `Rewound`. Both are the caller's
/// choice, so every figure is the same.
fn figures(meter: &mektpoy::Meter) -> Vec<(u64, u64, u64, Option<SeriesStart>)> {
    meter
        .rows()
        .iter()
        .map(|r| {
            let start = r.series_start.map(|s| match s {
                SeriesStart::Asked => SeriesStart::Rewound,
                s => s,
            });
            (r.total_bytes, r.cached_bytes, r.best_bytes, start)
        })
        .collect()
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 40, ..Default::default() })]

    /// On its own route a replay gives back the log, every request and the meter, whatever
    /// the loop did.
    #[test]
    fn a_replay_on_the_recording_route_is_the_recording(
        ops in proptest::collection::vec(op(), 1..14),
        route in 0usize..5,
    ) {
        let (label, route) = routes().swap_remove(route);
        let recorded = run_ops(&route, &ops);
        let log = reload(recorded.agent.session());
        let (replayed, all, metered) = replay(&log, &route, &route);
        proptest::prop_assert_eq!(replayed.session.to_jsonl(), log.to_jsonl(), "{}", label);
        proptest::prop_assert_eq!(all, recorded.sent);
        proptest::prop_assert_eq!(metered, recorded.metered);
        proptest::prop_assert_eq!(figures(&replayed.meter), figures(recorded.agent.meter()));
        proptest::prop_assert_eq!(replayed.report().cost, recorded.agent.meter().report().cost);
        proptest::prop_assert_eq!(replayed.attributions(), recorded.agent.attributions());
    }

    /// On another route a replay sends and meters what recording the same loop there would
    /// have.
    #[test]
    fn a_replay_on_another_route_is_the_recording_there(
        ops in proptest::collection::vec(op(), 1..14),
        from in 0usize..5,
        to in 0usize..5,
    ) {
        let routes = routes();
        let log = reload(run_ops(&routes[from].1, &ops).agent.session());
        let direct = standing_for(&routes[from].1, &routes[to].1, || run_ops(&routes[to].1, &ops));
        let (replayed, all, metered) = replay(&log, &routes[to].1, &routes[from].1);
        proptest::prop_assert_eq!(all, direct.sent, "{} on {}", routes[from].0, routes[to].0);
        proptest::prop_assert_eq!(metered, direct.metered);
        proptest::prop_assert_eq!(figures(&replayed.meter), figures(direct.agent.meter()));
        proptest::prop_assert_eq!(replayed.attributions(), direct.agent.attributions());
    }
}

/// Decision 108: on a route that binds thinking, a replay sends the log's signed thinking and
/// `redacted_thinking` back only when told it is the route that recorded the log; elsewhere
/// (another route, or none named) every body leaves them out, and the replayed log keeps each
/// block where it was, unsigned.
#[test]
fn a_replay_sends_the_logs_signed_thinking_back_only_on_the_recording_route() {
    let route = route_for("anthropic", "claude-fable-5-1");
    let config = Config::new("anthropic", "claude-fable-5-1")
        .with("max_tokens", 1024.into())
        .unwrap();
    let mut agent = AgentLoop::builder(Session::new("t"), route.clone())
        .config(config)
        .system_prompt(prompt(1))
        .tools([tool("read", query())])
        .build()
        .unwrap();
    for turn in 0..3 {
        if turn == 2 {
            agent
                .set_tools([tool("read", query()), tool("grep", query())])
                .unwrap();
        }
        let q = agent
            .user_turn([Message::user(format!("u{turn}"), "Go on.")])
            .unwrap();
        agent.observe(&q.to_wire().unwrap()).unwrap();
        let mut a = answer(&format!("a{turn}"), None);
        let mut content = a.content().to_vec();
        content.insert(
            1,
            ContentBlock::other(json!({"type": "redacted_thinking", "data": format!("d{turn}")}))
                .unwrap(),
        );
        a = a.with_content(content);
        agent.append(a).unwrap();
    }
    let log = reload(agent.session());
    let bodies = |replay: Replay| {
        let mut bodies = Vec::new();
        let replayed = replay
            .run_each(&log, |_, wire| bodies.push(wire.body().to_owned()))
            .unwrap();
        (bodies, replayed)
    };
    let sends_thinking = |b: &str| b.contains("sig-a0") || b.contains("redacted_thinking");
    // On its own route, told so: the recording, thinking and all.
    let (own, _) = bodies(Replay::new(route.clone()).recorded_on(route.clone()));
    assert!(own.iter().skip(1).all(|b| sends_thinking(b)), "{own:#?}");
    let by_reference = mektpoy::agent::replay::by_reference(&route).unwrap();
    for (label, replay) in [
        ("no recording route", Replay::new(route.clone())),
        (
            "the by-reference variant",
            Replay::new(by_reference.clone()).recorded_on(route.clone()),
        ),
        (
            "anthropic/*",
            Replay::new(
                mektpoy::route::catalog()
                    .iter()
                    .find(|r| r.provider == "anthropic" && r.model == "*")
                    .unwrap()
                    .clone(),
            )
            .recorded_on(route.clone()),
        ),
    ] {
        let (sent, replayed) = bodies(replay);
        assert_eq!(sent.len(), 3, "{label}");
        assert!(
            sent.iter()
                .all(|b| !b.contains("signature") && !b.contains("redacted_thinking")),
            "{label}: {sent:#?}"
        );
        // The replayed answers keep their reasoning blocks, unsigned, at the same indexes.
        let a0 = replayed
            .session
            .messages()
            .iter()
            .find(|m| m.id() == "a0")
            .unwrap()
            .clone();
        assert!(
            matches!(&a0.content()[0], ContentBlock::Reasoning { extra, .. } if !extra.contains_key("signature")),
            "{label}: {a0:?}"
        );
        assert!(
            matches!(&a0.content()[1], ContentBlock::Reasoning { text, .. } if text.is_empty()),
            "{label}: {a0:?}"
        );
    }
    // A route that does not bind thinking sends it back whatever the recording route.
    let (plain, _) = bodies(Replay::new(route_for("anthropic", "claude-opus-5")));
    assert!(
        plain.iter().skip(1).all(|b| sends_thinking(b)),
        "{plain:#?}"
    );
}
