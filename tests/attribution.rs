//! Why a request missed the cache: each kind of departure named in the caller's terms, with
//! the right cause and the vendor miss kind it predicts; byte offsets checked against the
//! meter's cut.

use mektpoy::agent::{Attribution, Attributor, Cause, Change, Check};
use mektpoy::event::{Rewrite, SeriesStart};
use mektpoy::meter::{Departure, Segment, ToolChange};
use mektpoy::response::{CacheMissKind, decode_messages};
use mektpoy::route::WireApi;
use mektpoy::{
    AgentLoop, Config, Event, Message, Meter, Route, Session, ToolSchema, WireRequest, route_for,
};
use proptest::prelude::*;
use serde_json::{Value, json};

mod support;
use support::{signed_answer, tool_of};

/// A tool every route accepts (Anthropic routes need an object schema root).
fn tool(name: &str, version: u32) -> ToolSchema {
    tool_of(name, version, false, json!({"type": "object"}))
}

fn cut(route: &Route, body: &str) -> Vec<u8> {
    Meter::new(route).prefix_bytes(body).unwrap()
}

fn first_diff(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// A loop that records, attributes before sending, observes, and answers each turn.
struct Run {
    agent: AgentLoop,
    bodies: Vec<String>,
    turn: u64,
    signed: bool,
}

impl Run {
    fn new(provider: &str, model: &str) -> Self {
        let config = Config::new(provider, model)
            .with("max_tokens", 64.into())
            .unwrap();
        let agent = AgentLoop::builder(Session::new("s"), route_for(provider, model))
            .config(config)
            .system_prompt("Be brief.")
            .build()
            .unwrap();
        Run {
            agent,
            bodies: Vec::new(),
            turn: 0,
            signed: false,
        }
    }

    /// One user turn: the attribution `attribute` gave before sending, checked to be the one
    /// `observe` kept and to name the first byte where the cuts differ.
    fn turn(&mut self) -> Attribution {
        self.turn += 1;
        let user = Message::user(format!("u{}", self.turn), format!("question {}", self.turn));
        let request = self.agent.user_turn([user]).unwrap();
        let attribution = self.send(&request.to_wire().unwrap(), &request);
        let id = format!("a{}", self.turn);
        let model = self.agent.config().model.clone();
        let answer = if self.signed {
            signed_answer(&id, &model)
        } else {
            Message::assistant(id, "ok", "anthropic", &*model)
        };
        self.agent.append(answer).unwrap();
        attribution
    }

    fn send(&mut self, wire: &WireRequest, request: &mektpoy::Request) -> Attribution {
        let before = self.agent.attribute(request, wire).unwrap();
        let rows = self.agent.meter().rows().len();
        assert_eq!(rows, before.request, "attribute changes nothing");
        self.agent.observe(wire).unwrap();
        assert_eq!(self.agent.attributions().last(), Some(&before));
        assert_eq!(
            self.agent.meter().departures().last().unwrap().as_ref(),
            before
                .departure
                .as_ref()
                .filter(|_| !matches!(before.change, Change::Model { .. })),
        );
        if let (Some(d), Some(prev)) = (&before.departure, self.bodies.last()) {
            let route = self.agent.route();
            let (a, b) = (cut(route, prev), cut(route, wire.body()));
            assert_eq!(d.offset as usize, first_diff(&a, &b), "{before}");
            assert_eq!(d.previous_bytes as usize, a.len());
            assert_eq!(
                d.lost_tokens(),
                (a.len() - d.offset as usize).div_ceil(4) as u64
            );
        }
        self.bodies.push(wire.body().to_owned());
        before
    }

    fn session(&self) -> &Session {
        self.agent.session()
    }
}

fn tools(names: &[(&str, u32)]) -> Vec<ToolSchema> {
    names.iter().map(|(n, v)| tool(n, *v)).collect()
}

#[test]
fn tool_changes_on_a_route_without_a_mode_are_named_by_tool_and_blamed_on_the_caller() {
    // An OpenAI-compatible chat route: every declaration goes into `tools`.
    let mut run = Run::new("acme", "acme-1");
    run.agent
        .set_tools(tools(&[("read", 1), ("shell", 1)]))
        .unwrap();
    let first = run.turn();
    assert_eq!((first.change.clone(), first.cause), (Change::First, None));
    let same = run.turn();
    assert_eq!((same.change.clone(), same.cause), (Change::Extends, None));
    assert_eq!(same.predicted(), None);
    assert_eq!(same.check(None), Check::Agrees { kind: None });

    let cases: [(&[(&str, u32)], ToolChange); 4] = [
        (
            &[("read", 1)],
            ToolChange::Removed {
                name: "shell".into(),
            },
        ),
        (
            &[("read", 1), ("grep", 1)],
            ToolChange::Added {
                name: "grep".into(),
            },
        ),
        (
            &[("read", 2), ("grep", 1)],
            ToolChange::Redefined {
                name: "read".into(),
            },
        ),
        (
            &[("grep", 1), ("read", 2)],
            ToolChange::Reordered {
                name: "grep".into(),
            },
        ),
    ];
    for (set, expected) in cases {
        run.agent.set_tools(tools(set)).unwrap();
        let a = run.turn();
        assert_eq!(a.change, Change::Tools(vec![expected.clone()]), "{a}");
        assert_eq!(a.cause, Some(Cause::ToolsChanged));
        assert!(a.cause.unwrap().by_caller());
        assert_eq!(a.predicted(), Some(CacheMissKind::ToolsChanged));
        assert!(matches!(
            a.departure.as_ref().unwrap().segment,
            Segment::Tool { .. }
        ));
        assert!(
            a.to_string().contains(&format!("{expected} by the caller")),
            "{a}"
        );
    }
    let removed = &run.agent.attributions()[2];
    assert_eq!(
        removed.departure.as_ref().unwrap().segment,
        Segment::Tool {
            index: 1,
            name: "shell".into()
        },
        "a removed tool is named, not what now sits at its offset"
    );
    let offset = removed.departure.as_ref().unwrap().offset;
    assert_eq!(
        removed.to_string(),
        format!(
            "request 2 (turn 3, step 1): tools_changed at byte {offset} — tool `shell` removed by the caller (~{} tokens)",
            removed.lost_tokens
        )
    );

    // The session report: per cause, requests and tokens lost.
    let report = run.agent.attribution_report();
    assert_eq!((report.requests, report.extended), (6, 1));
    assert_eq!(report.causes.len(), 1);
    assert_eq!(report.causes[0].cause, Cause::ToolsChanged);
    assert_eq!(report.causes[0].requests, 4);
    let lost: u64 = run.agent.attributions().iter().map(|a| a.lost_tokens).sum();
    assert_eq!(report.causes[0].lost_tokens, lost);
    assert_eq!(
        (report.lost_by_caller(), report.lost_otherwise()),
        (lost, 0)
    );
    let text = report.to_string();
    assert!(
        text.starts_with("6 requests, 1 extended the previous one\n"),
        "{text}"
    );
    assert!(
        text.contains("tools changed by the caller: 4 requests"),
        "{text}"
    );
}

#[test]
fn a_deferred_flag_flip_is_named_at_the_tool_that_left_the_prefix() {
    let route = Route::builder("anthropic", "m", WireApi::Messages)
        .deferred_section_bytes(8)
        .build()
        .unwrap();
    let body = |b: &str| {
        format!(
            r#"{{"model":"m","tools":[{{"name":"a"}},{b}],"messages":[{{"role":"user","content":"hi"}}]}}"#
        )
    };
    let (before, after) = (
        body(r#"{"name":"b"}"#),
        body(r#"{"name":"b","defer_loading":true}"#),
    );
    let mut meter = Meter::new(&route);
    let mut attributor = Attributor::new();
    attributor
        .observe(&mut meter, None, &WireRequest::new(before.clone(), vec![]))
        .unwrap();
    let (_, a) = attributor
        .observe(&mut meter, None, &WireRequest::new(after.clone(), vec![]))
        .unwrap();
    let d = a.departure.as_ref().unwrap();
    assert_eq!(
        d.segment,
        Segment::Tool {
            index: 1,
            name: "b".into()
        }
    );
    assert_eq!(
        d.tools,
        [ToolChange::Deferred {
            name: "b".into(),
            deferred: true
        }]
    );
    assert_eq!(
        d.offset as usize,
        first_diff(&cut(&route, &before), &cut(&route, &after))
    );
    assert_eq!(a.cause, Some(Cause::ToolsChanged));
    assert_eq!(a.predicted(), Some(CacheMissKind::ToolsChanged));
    assert!(
        a.to_string().contains("tool `b` deferred by the caller"),
        "{a}"
    );
    // Deferring another tool changes no byte: the section is fixed.
    let more = r#"{"model":"m","tools":[{"name":"a"},{"name":"b","defer_loading":true},{"name":"c","defer_loading":true}],"messages":[{"role":"user","content":"hi"}]}"#;
    assert_eq!(meter.departure_of(more).unwrap(), None);
}

#[test]
fn a_system_prompt_the_caller_changed_on_a_route_without_prompts_in_history() {
    // Claude Sonnet 5: no tool-change mode, so no prompt update in history.
    let mut run = Run::new("anthropic", "claude-sonnet-5");
    run.agent.set_tools(tools(&[("read", 1)])).unwrap();
    run.turn();
    run.agent.set_system_prompt("Be terse.");
    let a = run.turn();
    assert_eq!(a.change, Change::System, "{a}");
    assert_eq!(a.cause, Some(Cause::SystemPromptChanged));
    let d = a.departure.as_ref().unwrap();
    assert_eq!(d.segment, Segment::System);
    assert_eq!(a.predicted(), Some(CacheMissKind::SystemChanged));
    assert!(
        a.to_string().contains(&format!(
            "system_changed at byte {} — the system prompt changed by the caller",
            d.offset
        )),
        "{a}"
    );
}

#[test]
fn a_prompt_replaced_on_a_prompt_in_history_route_is_the_crates_rule() {
    // Claude Opus 5 takes prompt updates in history: a new prompt is appended as a node, and
    // only an emptied prompt replaces the latest node.
    let mut run = Run::new("anthropic", "claude-opus-5");
    run.agent.set_tools(tools(&[("read", 1)])).unwrap();
    run.turn();
    run.agent.set_system_prompt("Be terse.");
    let appended = run.turn();
    assert_eq!(
        appended.change,
        Change::Extends,
        "an update in history: {appended}"
    );
    run.agent.set_system_prompt("");
    let a = run.turn();
    // In the caller's terms the system prompt; on the wire the node appended in history,
    // a message: the provider would report `messages_changed`.
    assert_eq!(a.change, Change::System, "{a}");
    assert_eq!(a.cause, Some(Cause::PromptReplaced));
    assert!(matches!(
        a.departure.as_ref().unwrap().segment,
        Segment::Message { .. }
    ));
    assert!(!Cause::PromptReplaced.by_caller());
    assert!(Cause::PromptReplaced.rule().unwrap().contains("§4.1"));
    assert_eq!(a.predicted(), Some(CacheMissKind::MessagesChanged));
    assert!(
        a.to_string().contains(
            "the system prompt changed by the crate's rule: prompt node replaced (reference §4.1)"
        ),
        "{a}"
    );
}

#[test]
fn a_compaction_names_the_message_that_replaced_the_history() {
    let mut run = Run::new("anthropic", "claude-opus-5");
    run.agent.set_tools(tools(&[("read", 1)])).unwrap();
    for _ in 0..3 {
        run.turn();
    }
    // Surface: prompt (0), u1 (1), a1 (2), u2 (3), a2 (4), u3 (5), a3 (6). Replace u2..a2.
    run.session()
        .append(Event::replace(
            Message::user("sum", "summary of turn 2"),
            3,
            4,
        ))
        .unwrap();
    let a = run.turn();
    assert_eq!(
        a.change,
        Change::Message {
            wire: 2,
            wire_block: Some(0),
            id: Some("sum".into()),
            block: None,
        },
        "{a}"
    );
    assert_eq!(a.cause, Some(Cause::Compaction));
    assert_eq!(a.predicted(), Some(CacheMissKind::MessagesChanged));
    assert!(
        a.to_string().contains(
            "message `sum` (wire message 2, block 0) changed by the caller's compaction or rewind"
        ),
        "{a}"
    );
}

#[test]
fn thinking_the_floor_leaves_out_is_named_at_the_first_stripped_block() {
    // A no-mode route that binds thinking; the prompt goes out as `system`.
    let mut run = Run::new("anthropic", "claude-fable-5-2");
    run.signed = true;
    run.agent.set_tools(tools(&[("read", 1)])).unwrap();
    for _ in 0..3 {
        run.turn();
    }
    run.session()
        .append(Event::replace(
            Message::user("sum", "summary of turn 2"),
            3,
            4,
        ))
        .unwrap();
    let a = run.turn();
    // The rewrite is at the summary (wire message 2), but the floor strips a1's thinking
    // first: the first differing byte is in wire message 1.
    assert_eq!(
        a.change,
        Change::Message {
            wire: 1,
            wire_block: Some(0),
            id: Some("a1".into()),
            block: Some(0),
        },
        "{a}"
    );
    assert_eq!(a.cause, Some(Cause::ThinkingLeftOut));
    assert!(matches!(a.rewrite, Some(Rewrite::History { .. })));
    assert_eq!(a.predicted(), Some(CacheMissKind::MessagesChanged));
    let text = a.to_string();
    assert!(
        text.contains("by the crate's rule: thinking floor, StripThinking"),
        "{text}"
    );
    assert!(
        text.contains("after the history changed at wire message"),
        "{text}"
    );
}

#[test]
fn a_new_series_asked_by_the_caller_redeclares_the_tools() {
    // Claude Opus 5 announces tool changes in history: adding one extends the prefix...
    let mut run = Run::new("anthropic", "claude-opus-5");
    run.agent.set_tools(tools(&[("read", 1)])).unwrap();
    run.turn();
    run.agent
        .set_tools(tools(&[("read", 1), ("grep", 1)]))
        .unwrap();
    let added = run.turn();
    assert_eq!(added.change, Change::Extends, "{added}");
    // ...until a new series declares every tool again.
    run.agent.new_series();
    let a = run.turn();
    assert_eq!(
        a.change,
        Change::Tools(vec![ToolChange::Added {
            name: "grep".into()
        }]),
        "{a}"
    );
    assert_eq!(a.cause, Some(Cause::NewSeries));
    assert!(a.to_string().contains("by the caller's new series"), "{a}");
}

#[test]
fn a_model_change_loses_the_whole_prefix() {
    let mut run = Run::new("anthropic", "claude-opus-5");
    run.agent.set_tools(tools(&[("read", 1)])).unwrap();
    run.turn();
    let total = run.agent.meter().rows()[0].total_bytes;
    // A loop sends one model (decision 151): another model is another loop over the same
    // log, and the first loop names what that loop's request would lose before it is sent.
    let mut other = AgentLoop::builder(
        run.agent.session(),
        route_for("anthropic", "claude-opus-5-5"),
    )
    .model("claude-opus-5-5")
    .option("max_tokens", 64.into())
    .build()
    .unwrap();
    let request = other
        .user_turn([Message::user("u2", "question 2")])
        .unwrap();
    let a = run
        .agent
        .attribute(&request, &request.to_wire().unwrap())
        .unwrap();
    assert_eq!(
        a.change,
        Change::Model {
            from: "claude-opus-5".into(),
            to: "claude-opus-5-5".into()
        }
    );
    assert_eq!(a.cause, Some(Cause::ModelChanged));
    assert_eq!(a.predicted(), Some(CacheMissKind::ModelChanged));
    assert_eq!(a.lost_tokens, total.div_ceil(4));
    assert!(
        a.to_string()
            .contains("model_changed — model `claude-opus-5` → `claude-opus-5-5` by the caller"),
        "{a}"
    );
}

#[test]
fn user_content_merged_into_the_previous_turn_is_the_serializers_rule() {
    let mut run = Run::new("anthropic", "claude-sonnet-5");
    let r = run.agent.user_turn([Message::user("u1", "first")]).unwrap();
    run.send(&r.to_wire().unwrap(), &r);
    // No answer: the next user message joins the same wire turn.
    let r = run
        .agent
        .user_turn([Message::user("u2", "second")])
        .unwrap();
    let a = run.send(&r.to_wire().unwrap(), &r);
    assert_eq!(
        a.change,
        Change::Message {
            wire: 0,
            wire_block: Some(1),
            id: Some("u2".into()),
            block: Some(0),
        },
        "{a}"
    );
    assert_eq!(a.cause, Some(Cause::TurnMerged));
    assert!(!Cause::TurnMerged.by_caller());
}

#[test]
fn a_prediction_is_checked_against_the_providers_diagnostics() {
    let mut run = Run::new("acme", "acme-1");
    run.agent
        .set_tools(tools(&[("read", 1), ("shell", 1)]))
        .unwrap();
    run.turn();
    run.agent.set_tools(tools(&[("read", 1)])).unwrap();
    let a = run.turn();
    let answer = |diagnostics: Value| {
        let body = json!({
            "id": "msg_1", "type": "message", "role": "assistant", "model": "m",
            "content": [{"type": "text", "text": "hi"}], "stop_reason": "end_turn",
            "usage": {"input_tokens": 6, "output_tokens": 1},
            "diagnostics": diagnostics,
        });
        decode_messages(&body.to_string(), "anthropic", None)
            .unwrap()
            .diagnostics
    };
    let reason = |kind: &str| {
        answer(json!({"cache_miss_reason": {"type": kind, "cache_missed_input_tokens": 41000}}))
    };
    let agrees = a.check(reason("tools_changed").as_ref());
    assert_eq!(
        agrees,
        Check::Agrees {
            kind: Some(CacheMissKind::ToolsChanged)
        }
    );
    assert_eq!(
        agrees.to_string(),
        "explained: the provider reported tools_changed"
    );
    let disagrees = a.check(reason("messages_changed").as_ref());
    assert_eq!(
        disagrees.to_string(),
        "not explained: predicted tools_changed, the provider reported messages_changed"
    );
    assert_eq!(
        a.check(answer(json!({"cache_miss_reason": null})).as_ref()),
        Check::Pending
    );
    assert!(matches!(
        a.check(reason("previous_message_not_found").as_ref()),
        Check::Inconclusive { .. }
    ));
    assert_eq!(
        a.check(None),
        Check::Unreported {
            predicted: CacheMissKind::ToolsChanged
        }
    );
    // A request that extends the previous one predicts nothing: a reported miss is not it.
    let same = run.turn();
    assert_eq!(
        same.check(reason("system_changed").as_ref()),
        Check::Disagrees {
            predicted: None,
            reported: CacheMissKind::SystemChanged
        }
    );
}

#[test]
fn without_the_request_the_bytes_and_the_series_start_still_name_a_cause() {
    let route = route_for("deepseek", "deepseek-flash");
    let mut meter = Meter::new(&route);
    let mut attributor = Attributor::new();
    let body = |m: &str| format!(r#"{{"model":"deepseek-flash","messages":[{m}]}}"#);
    let wire = |b: String, start| WireRequest::new(b, vec![]).with_series_start(start);
    attributor
        .observe(
            &mut meter,
            None,
            &wire(
                body(r#"{"role":"user","content":"a"}"#),
                Some(SeriesStart::First),
            ),
        )
        .unwrap();
    let (_, a) = attributor
        .observe(
            &mut meter,
            None,
            &wire(
                body(r#"{"role":"user","content":"b"}"#),
                Some(SeriesStart::Rewound),
            ),
        )
        .unwrap();
    assert_eq!(
        a.change,
        Change::Message {
            wire: 0,
            wire_block: None,
            id: None,
            block: None
        }
    );
    assert_eq!(a.cause, Some(Cause::Compaction));
    let (_, a) = attributor
        .observe(
            &mut meter,
            None,
            &wire(body(r#"{"role":"user","content":"c"}"#), None),
        )
        .unwrap();
    assert_eq!(a.cause, Some(Cause::Unexplained), "{a}");
    assert!(a.to_string().contains("cause unexplained"), "{a}");
    assert_eq!(attributor.report().causes.len(), 2);
}

#[test]
fn departures_survive_a_save_and_a_version_one_save_still_loads() {
    let route = Route::builder("p", "m", WireApi::Messages)
        .deferred_section_bytes(4)
        .build()
        .unwrap();
    let body = |tools: &str, text: &str| {
        format!(
            r#"{{"tools":[{tools}],"system":"S","messages":[{{"role":"user","content":[{{"type":"text","text":"{text}"}}]}}]}}"#
        )
    };
    let mut m = Meter::new(&route);
    m.observe(
        &body(r#"{"name":"a"},{"name":"d","defer_loading":true}"#, "x"),
        None,
    )
    .unwrap();
    m.observe(
        &body(r#"{"name":"a"},{"name":"d","defer_loading":true}"#, "y"),
        None,
    )
    .unwrap();
    assert_eq!(m.departures()[1].as_ref().unwrap().block, Some(0));
    let restored = Meter::restore(&route, &m.save()).unwrap();
    assert_eq!(restored.departures(), m.departures());
    let next = body(r#"{"name":"d"},{"name":"a"}"#, "y");
    let expected = m.departure_of(&next).unwrap().unwrap();
    assert_eq!(
        restored.departure_of(&next).unwrap().as_ref(),
        Some(&expected)
    );
    assert_eq!(
        expected.tools,
        [
            ToolChange::Deferred {
                name: "d".into(),
                deferred: false
            },
            ToolChange::Reordered { name: "d".into() }
        ]
    );
    // Version 1 kept neither the tools by name nor the departures.
    let mut v1: Value = serde_json::from_str(&m.save()).unwrap();
    v1["version"] = json!(1);
    v1.as_object_mut().unwrap().remove("departures");
    v1["previous"].as_object_mut().unwrap().remove("tools");
    let old = Meter::restore(&route, &v1.to_string()).unwrap();
    assert_eq!(old.rows(), m.rows());
    assert_eq!(old.departures(), &[None, None]);
    let d: Departure = old.departure_of(&next).unwrap().unwrap();
    assert_eq!((d.offset, &d.segment), (expected.offset, &expected.segment));
    assert_eq!(
        d.tools,
        [ToolChange::Added { name: "d".into() }],
        "the deferred tool was not saved by name"
    );
}

/// A random request body: unique tools (some deferred), an optional system, messages of
/// text blocks.
fn body_strategy() -> impl Strategy<Value = String> {
    let tools = proptest::sample::subsequence(vec!["a", "b", "c", "d"], 0..=4)
        .prop_shuffle()
        .prop_flat_map(|names| {
            let n = names.len();
            (
                Just(names),
                proptest::collection::vec((0u8..2, any::<bool>()), n),
            )
        });
    let system = proptest::option::of(prop_oneof![Just("S"), Just("T")]);
    let messages = proptest::collection::vec(
        (
            prop_oneof![Just("user"), Just("assistant")],
            proptest::collection::vec(prop_oneof![Just("x"), Just("y"), Just("xy")], 0..3),
        ),
        0..4,
    );
    (tools, system, messages).prop_map(|((names, flags), system, messages)| {
        let tools: Vec<Value> = names
            .iter()
            .zip(flags)
            .map(|(n, (v, deferred))| {
                let mut t = json!({"name": n, "description": format!("v{v}")});
                if deferred {
                    t["defer_loading"] = json!(true);
                }
                t
            })
            .collect();
        let messages: Vec<Value> = messages
            .into_iter()
            .map(|(role, texts)| {
                let content: Vec<Value> = texts
                    .into_iter()
                    .map(|t| json!({"type": "text", "text": t}))
                    .collect();
                json!({"role": role, "content": content})
            })
            .collect();
        let mut body = json!({"model": "m", "tools": tools, "messages": messages});
        if let Some(s) = system {
            body["system"] = json!(s);
        }
        body.to_string()
    })
}

proptest! {
    /// The departure is the first differing byte of the two cuts, `None` exactly when the
    /// previous cut is a prefix of the next; the segment named holds that byte in one of the
    /// two requests, and a tool departure lists exactly the added and removed names.
    #[test]
    fn the_departure_is_the_first_differing_byte_of_the_cuts(
        a in body_strategy(),
        b in body_strategy(),
        section in 0u32..4,
    ) {
        let route = Route::builder("p", "m", WireApi::Messages)
            .deferred_section_bytes(section)
            .build()
            .unwrap();
        let mut meter = Meter::new(&route);
        meter.observe(&a, None).unwrap();
        let (ca, cb) = (cut(&route, &a), cut(&route, &b));
        let departure = meter.departure_of(&b).unwrap();
        prop_assert_eq!(departure.is_none(), cb.starts_with(&ca));
        let Some(d) = departure else { return Ok(()) };
        prop_assert_eq!(d.offset as usize, first_diff(&ca, &cb));
        prop_assert_eq!((d.previous_bytes as usize, d.total_bytes as usize), (ca.len(), cb.len()));
        prop_assert!(d.offset < d.previous_bytes);
        let names = |body: &str| -> Vec<String> {
            let v: Value = serde_json::from_str(body).unwrap();
            v["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_owned()).collect()
        };
        let (na, nb) = (names(&a), names(&b));
        match &d.segment {
            Segment::Tool { index, name } => {
                prop_assert!(na.get(*index) == Some(name) || nb.get(*index) == Some(name));
            }
            Segment::Message { index } => {
                let count = |body: &str| {
                    let v: Value = serde_json::from_str(body).unwrap();
                    v["messages"].as_array().unwrap().len()
                };
                prop_assert!(*index < count(&a).max(count(&b)));
            }
            _ => {}
        }
        if matches!(d.segment, Segment::Tool { .. } | Segment::DeferredTools) {
            let mut added: Vec<String> = d.tools.iter().filter_map(|t| match t {
                ToolChange::Added { name } => Some(name.clone()),
                _ => None,
            }).collect();
            let mut removed: Vec<String> = d.tools.iter().filter_map(|t| match t {
                ToolChange::Removed { name } => Some(name.clone()),
                _ => None,
            }).collect();
            added.sort();
            removed.sort();
            let mut want_added: Vec<String> = nb.iter().filter(|n| !na.contains(n)).cloned().collect();
            let mut want_removed: Vec<String> = na.iter().filter(|n| !nb.contains(n)).cloned().collect();
            want_added.sort();
            want_removed.sort();
            prop_assert_eq!(added, want_added);
            prop_assert_eq!(removed, want_removed);
        } else {
            prop_assert!(d.tools.is_empty());
        }
        // A restored meter gives the same departure; one restored from a version-1 save the
        // same byte and segment (its deferred tools were not saved).
        let restored = Meter::restore(&route, &meter.save()).unwrap();
        prop_assert_eq!(restored.departure_of(&b).unwrap(), Some(d.clone()));
        let mut v1: Value = serde_json::from_str(&meter.save()).unwrap();
        v1["version"] = json!(1);
        v1.as_object_mut().unwrap().remove("departures");
        v1["previous"].as_object_mut().unwrap().remove("tools");
        let old = Meter::restore(&route, &v1.to_string()).unwrap();
        let od = old.departure_of(&b).unwrap().unwrap();
        prop_assert_eq!(od.offset, d.offset);
        match (&od.segment, &d.segment) {
            // Version 1 does not know where the deferred tools sat: the index may differ.
            (Segment::Tool { name: x, .. }, Segment::Tool { name: y, .. }) => prop_assert_eq!(x, y),
            (x, y) => prop_assert_eq!(x, y),
        }
        // Observing gives the same departure beside the row.
        meter.observe(&b, None).unwrap();
        prop_assert_eq!(meter.departures().last().unwrap().as_ref(), Some(&d));
    }
}

#[test]
fn a_primed_meter_is_extended_not_a_first_request() {
    let route = route_for("deepseek", "deepseek-flash");
    let mut meter = Meter::new(&route);
    let one = r#"{"model":"deepseek-flash","messages":[{"role":"user","content":"a"}]}"#;
    let two = r#"{"model":"deepseek-flash","messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"}]}"#;
    meter.prime(one).unwrap();
    let mut attributor = Attributor::new();
    let (_, a) = attributor
        .observe(&mut meter, None, &WireRequest::new(two.to_owned(), vec![]))
        .unwrap();
    assert_eq!((a.change.clone(), a.cause), (Change::Extends, None));
    let fresh = Attributor::new()
        .attribute(
            &Meter::new(&route),
            None,
            &WireRequest::new(one.to_owned(), vec![]),
        )
        .unwrap();
    assert_eq!(fresh.change, Change::First);
    assert_eq!(fresh.to_string(), "request 0: the route's first request");
}

/// An assistant message of reasoning alone, unsigned: no Anthropic route can verify it, so the
/// Messages serializer passes over it (decision 95) and the user turns around it merge.
fn thinking_only(id: &str) -> Message {
    Message::new(
        id,
        mektpoy::vocab::Role::Assistant,
        vec![mektpoy::vocab::ContentBlock::Reasoning {
            text: "hmm".into(),
            extra: Default::default(),
        }],
        mektpoy::vocab::MessageSource::Model {
            provider: "anthropic".into(),
            model: "claude-opus-5".into(),
        },
    )
}

/// The `id`s of the user and assistant texts of wire message `index` of `body`, as sent.
fn sent_texts(body: &str, index: usize) -> Vec<String> {
    let body: Value = serde_json::from_str(body).unwrap();
    body["messages"][index]["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|b| b["text"].as_str().map(str::to_owned))
        .collect()
}

#[test]
fn a_miss_after_a_thinking_only_answer_names_the_message_the_serializer_sent_there() {
    // Issue 20: the attribution grouped wire messages itself and counted the thinking-only
    // answer as one, so it named `u2` (two wire messages off) for a compaction at `sum`.
    let mut run = Run::new("anthropic", "claude-opus-5");
    run.agent.set_tools(tools(&[("read", 1)])).unwrap();
    let r = run.agent.user_turn([Message::user("u1", "first")]).unwrap();
    run.send(&r.to_wire().unwrap(), &r);
    run.agent.append(thinking_only("a1")).unwrap();
    for turn in 2..=3 {
        let user = Message::user(format!("u{turn}"), format!("question {turn}"));
        let r = run.agent.user_turn([user]).unwrap();
        run.send(&r.to_wire().unwrap(), &r);
        let answer = Message::assistant(format!("a{turn}"), "ok", "anthropic", "claude-opus-5");
        run.agent.append(answer).unwrap();
    }
    // Surface: prompt (0), u1 (1), a1 (2), u2 (3), a2 (4), u3 (5), a3 (6); sent as
    // [u1 u2] [a2] [u3] [a3]. Replace u3..a3.
    run.session()
        .append(Event::replace(Message::user("sum", "summary"), 5, 6))
        .unwrap();
    let r = run.agent.user_turn([Message::user("u4", "go on")]).unwrap();
    let wire = r.to_wire().unwrap();
    let a = run.send(&wire, &r);
    // What the serializer sent as wire message 2: the summary, then u4.
    assert_eq!(sent_texts(wire.body(), 2), ["summary", "go on"]);
    assert_eq!(sent_texts(wire.body(), 0), ["first", "question 2"]);
    assert_eq!(
        a.change,
        Change::Message {
            wire: 2,
            wire_block: Some(0),
            id: Some("sum".into()),
            block: None,
        },
        "{a}"
    );
    assert_eq!(a.cause, Some(Cause::Compaction), "{a}");
}

/// A signed answer of thinking alone, sent back until a rewrite moves the floor past it.
fn signed_thinking_only(id: &str, model: &str) -> Message {
    let mut extra = indexmap::IndexMap::new();
    extra.insert("signature".to_owned(), json!(format!("sig-{id}")));
    Message::new(
        id,
        mektpoy::vocab::Role::Assistant,
        vec![mektpoy::vocab::ContentBlock::Reasoning {
            text: "let me think".into(),
            extra,
        }],
        mektpoy::vocab::MessageSource::Model {
            provider: "anthropic".into(),
            model: model.into(),
        },
    )
}

#[test]
fn after_the_floor_leaves_a_thinking_only_answer_out_a_miss_names_the_message_sent_there() {
    // Decision 95's case: on a route that binds thinking, a tool change moves the floor past a
    // thinking-only answer, which then sends nothing; a later compaction is named at the
    // wire message the serializer put the summary in.
    let mut run = Run::new("anthropic", "claude-fable-5-2");
    run.signed = true;
    run.agent.set_tools(tools(&[("read", 1)])).unwrap();
    let r = run.agent.user_turn([Message::user("u1", "first")]).unwrap();
    run.send(&r.to_wire().unwrap(), &r);
    run.agent
        .append(signed_thinking_only("a1", "claude-fable-5-2"))
        .unwrap();
    run.turn = 1;
    run.turn();
    run.agent
        .set_tools(tools(&[("read", 1), ("grep", 1)]))
        .unwrap();
    // Plain answers from here: the compaction finds no thinking after the floor to move it.
    run.signed = false;
    run.turn();
    run.turn();
    let ids: Vec<String> = run
        .session()
        .messages()
        .iter()
        .map(|m| m.id().to_owned())
        .collect();
    let at = |id: &str| ids.iter().position(|i| i == id).unwrap();
    run.session()
        .append(Event::replace(
            Message::user("sum", "summary"),
            at("u4"),
            at("a4"),
        ))
        .unwrap();
    let r = run.agent.user_turn([Message::user("u5", "go on")]).unwrap();
    let wire = r.to_wire().unwrap();
    let a = run.send(&wire, &r);
    let body: Value = serde_json::from_str(wire.body()).unwrap();
    let sent = body["messages"].as_array().unwrap();
    let w = (0..sent.len())
        .find(|&w| sent_texts(wire.body(), w).contains(&"summary".to_owned()))
        .unwrap();
    // u1 and u2 are one wire message: a1 sends nothing.
    assert_eq!(sent_texts(wire.body(), 0), ["first", "question 2"]);
    assert_eq!(
        a.change,
        Change::Message {
            wire: w,
            wire_block: Some(0),
            id: Some("sum".into()),
            block: None,
        },
        "{a}"
    );
    assert_eq!(a.cause, Some(Cause::Compaction), "{a}");
}
