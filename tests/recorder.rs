//! Scenario tests of reference §3 and §4: given a log, when `record`, then these events and this
//! snapshot. Notation as in the reference's examples (`docs/reference.md`).

use std::sync::Arc;

use mektpoy::route::ToolRefusal;
use mektpoy::{
    AgentLoop, Config, ContentBlock, Event, Message, Request, Route, Session, ToolSchema,
    agent::{RecordError, Recorder, Step},
    event::{SeriesStart, SurfaceOp},
    history::ToolHistory,
    route::{ToolUpdateMode, WireApi},
    session::{AppendErrorKind, SurfaceNode},
};
use serde_json::json;

mod support;
use support::tool;

fn route(mode: Option<ToolUpdateMode>, prompts_in_history: bool) -> Route {
    Route::builder("deepseek", "deepseek-flash", WireApi::Messages)
        .tool_update(mode)
        .system_prompt_in_history(prompts_in_history)
        .build()
        .unwrap()
}

/// One agent loop over one session, describing what each step appended. The session is
/// shared so that a test can attach a second loop to it (a restarted process).
struct Loop {
    agent: AgentLoop<Arc<Session>>,
    session: Arc<Session>,
    /// The system prompt of the next steps.
    prompt: String,
    /// Names the user messages (`u{turn}`).
    turn: u64,
}

impl Loop {
    fn new(route: Route) -> Self {
        Loop::over(Session::new("s"), route, 0)
    }

    fn over(session: Session, route: Route, turn: u64) -> Self {
        let session = Arc::new(session);
        // The route names the provider and model (decision 151).
        Loop {
            agent: AgentLoop::builder(Arc::clone(&session), route)
                .build()
                .unwrap(),
            session,
            prompt: String::new(),
            turn,
        }
    }

    fn addition_only() -> Self {
        Loop::new(route(Some(ToolUpdateMode::AdditionOnly), true))
    }

    /// A new loop over the same session, as a restarted process attaches one.
    fn reattach(&mut self) {
        let (route, config) = (self.agent.route().clone(), self.agent.config().clone());
        self.agent = AgentLoop::builder(Arc::clone(&self.session), route)
            .config(config)
            .build()
            .unwrap();
    }

    /// One user turn with one user message; returns the request and the events it appended.
    fn step(&mut self, tools: &[ToolSchema]) -> (Request, Vec<String>) {
        self.step_with(tools, false, 0)
    }

    /// Attempt 0 is a user turn (asking for a new series when `new_series`); a later attempt
    /// is a retry, which keeps the request it retries whatever was asked.
    fn step_with(
        &mut self,
        tools: &[ToolSchema],
        new_series: bool,
        attempt: u32,
    ) -> (Request, Vec<String>) {
        self.turn += 1;
        let before = self.session.len();
        self.agent.set_system_prompt(self.prompt.clone());
        self.agent.set_tools(tools.iter().cloned()).unwrap();
        if new_series {
            self.agent.new_series();
        }
        let request = if attempt == 0 {
            let user = Message::user(format!("u{}", self.turn), "hi");
            self.agent.user_turn([user])
        } else {
            self.agent.retry()
        }
        .expect("record");
        let events = self.session.events();
        let appended = events.iter().skip(before).map(describe).collect();
        (request, appended)
    }

    fn answer(&mut self) {
        let id = format!("a{}", self.session.len());
        self.session
            .append(Event::append(Message::assistant(
                id,
                "ok",
                "deepseek",
                "deepseek-flash",
            )))
            .unwrap();
    }

    fn snapshot(&self) -> String {
        snapshot(&self.session.tool_history())
    }
}

/// One bare step: no prompt, no user message, attempt 0.
fn bare_step<'a>(config: &'a Config, route: &'a Route, tools: &'a [ToolSchema]) -> Step<'a> {
    Step::new(config, "", tools, route).at(1, 1, 0)
}

/// `H(reason[,ss])[names]`, `D([+B,-A],hS)`, `S(append|replace i,"text")`, `U`, `A`.
fn describe(e: &Event) -> String {
    match e {
        Event::Header(h) => format!(
            "H({}{})[{}]",
            h.reason.as_str(),
            if h.starts_series { ",ss" } else { "" },
            names(h.header.tools.iter())
        ),
        Event::Message(m) => {
            let msg = &m.message;
            match msg.role() {
                mektpoy::vocab::Role::Developer => format!(
                    "D([{}]{})",
                    blocks(msg.content()),
                    m.header_seq.map(|s| format!(",h{s}")).unwrap_or_default()
                ),
                mektpoy::vocab::Role::System => format!(
                    "S({},{:?})",
                    match m.surface_op {
                        Some(SurfaceOp::Replace { start, .. }) => format!("replace {start}"),
                        _ => "append".into(),
                    },
                    msg.text()
                ),
                mektpoy::vocab::Role::User => "U".into(),
                mektpoy::vocab::Role::Assistant => "A".into(),
                mektpoy::vocab::Role::Tool => "T".into(),
            }
        }
        _ => "?".into(),
    }
}

fn names<'a>(tools: impl IntoIterator<Item = &'a ToolSchema>) -> String {
    tools
        .into_iter()
        .map(|t| format!("{}{}", t.name(), if t.defer_loading() { "d" } else { "" }))
        .collect::<Vec<_>>()
        .join(",")
}

fn blocks(content: &[ContentBlock]) -> String {
    content
        .iter()
        .map(|b| match b {
            ContentBlock::ToolAddition(r) => format!("+{}", r.tool_name()),
            ContentBlock::ToolRemoval(r) => format!("-{}", r.tool_name()),
            ContentBlock::ToolRedefinition(r) => format!("~{}", r.tool_name()),
            _ => "text".into(),
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// `{[A,B], [[id,[B]], ...]}` with ids written as the Seq of their event.
fn snapshot(h: &ToolHistory) -> String {
    let updates: Vec<String> = h
        .updates()
        .iter()
        .map(|u| format!("[{},[{}]]", u.message_id(), names(u.additions())))
        .collect();
    format!("{{[{}], [{}]}}", names(h.tools()), updates.join(","))
}

#[test]
fn l1_first_header_is_initial_and_opens_both_series() {
    let mut l = Loop::addition_only();
    let (req, ev) = l.step(&[tool("A")]);
    assert_eq!(ev, ["U", "H(initial)[A]"]);
    assert!(
        req.starts_series,
        "the first header opens a declaration series"
    );
    assert_eq!(req.header_seq.map(|s| s.0), Some(1));
    assert_eq!(l.snapshot(), "{[A], []}");
}

#[test]
fn addition_logs_change_and_developer_message_naming_the_header() {
    let mut l = Loop::addition_only();
    l.step(&[tool("A")]);
    l.answer();
    let (req, ev) = l.step(&[tool("A"), tool("B")]);
    assert_eq!(ev, ["U", "H(change)[A,B]", "D([+B],h4)"]);
    assert!(!req.starts_series);
    assert_eq!(l.snapshot(), "{[A], [[s:5,[B]]]}");
    assert_eq!(
        &*req.tools,
        &[tool("A"), tool("B")],
        "request tools = header as logged"
    );
}

#[test]
fn l4_removal_has_no_header_seq() {
    let mut l = Loop::addition_only();
    l.step(&[tool("A"), tool("B")]);
    let (_, ev) = l.step(&[tool("A")]);
    assert_eq!(ev, ["U", "H(change)[A]", "D([-B])"]);
    assert_eq!(l.snapshot(), "{[A,B], [[s:4,[]]]}");
}

#[test]
fn l3_additions_in_current_order_then_removals_in_previous_order() {
    let mut l = Loop::addition_only();
    l.step(&[tool("A"), tool("B")]);
    let (_, ev) = l.step(&[tool("B"), tool("C"), tool("D")]);
    assert_eq!(ev, ["U", "H(change)[B,C,D]", "D([+C,+D,-A],h3)"]);
}

#[test]
fn unchanged_restore_of_an_added_tool_continues_the_series() {
    let mut l = Loop::addition_only();
    l.step(&[tool("A")]);
    l.step(&[tool("A"), tool("B")]);
    l.step(&[tool("A")]);
    let (req, ev) = l.step(&[tool("A"), tool("B")]);
    assert_eq!(ev, ["U", "H(change)[A,B]", "D([+B],h9)"]);
    assert!(!req.starts_series);
    assert_eq!(l.snapshot(), "{[A], [[s:4,[B]],[s:7,[]],[s:10,[B]]]}");
}

#[test]
fn f18_returning_baseline_tool_continues_the_series() {
    let mut l = Loop::addition_only();
    l.step(&[tool("A"), tool("B")]);
    let (_, ev) = l.step(&[tool("B")]);
    assert_eq!(ev, ["U", "H(change)[B]", "D([-A])"]);
    let (req, ev) = l.step(&[tool("A"), tool("B")]);
    assert_eq!(ev, ["U", "H(change)[A,B]", "D([+A],h6)"]);
    assert!(
        !req.starts_series,
        "its recorded addition re-offers it: no declaration series"
    );
    assert_eq!(req.series_start, None);
    assert_eq!(l.snapshot(), "{[A,B], [[s:4,[]],[s:7,[A]]]}");
}

#[test]
fn f17_session_without_tools_gets_a_baseline_at_its_first_tool() {
    let mut l = Loop::addition_only();
    let (_, ev) = l.step(&[]);
    assert_eq!(ev, ["U", "H(initial)[]"]);
    let (req, ev) = l.step(&[tool("B")]);
    assert_eq!(ev, ["U", "H(change)[B]", "D([+B],h3)"]);
    assert!(req.starts_series);
    assert_eq!(l.snapshot(), "{[B], [[s:4,[B]]]}");
}

#[test]
fn changed_restore_opens_a_declaration_series() {
    let mut l = Loop::addition_only();
    l.step(&[tool("A")]);
    l.step(&[tool("A"), tool("B")]);
    l.step(&[tool("A")]);
    let (req, ev) = l.step(&[tool("A"), tool("B2")]);
    assert_eq!(ev, ["U", "H(change)[A,B]", "D([+B],h9)"]);
    assert!(req.starts_series);
    let h = l.session.tool_history();
    assert_eq!(snapshot(&h), "{[A,B], [[s:10,[B]]]}");
    assert_eq!(h.tools()[1].description(), "B v2");
    assert_eq!(h.updates()[0].additions()[0].description(), "B v2");
}

#[test]
fn l5_definition_change_is_recorded_as_a_redefinition() {
    let mut l = Loop::addition_only();
    l.step(&[tool("A"), tool("B")]);
    let (req, ev) = l.step(&[tool("A2"), tool("B")]);
    assert_eq!(ev, ["U", "H(change)[A,B]", "D([~A],h3)"]);
    assert!(req.starts_series, "by reference, a new declaration series");
    assert_eq!(req.series_start, Some(SeriesStart::Redeclared));
    assert_eq!(l.snapshot(), "{[A,B], [[s:4,[]]]}");
    assert_eq!(
        l.session.tool_history().updates()[0].redefinitions()[0].description(),
        "A v2"
    );
}

#[test]
fn l5_prime_additions_then_removals_then_redefinitions() {
    let mut l = Loop::addition_only();
    l.step(&[tool("A"), tool("B")]);
    let (_, ev) = l.step(&[tool("B2"), tool("C")]);
    assert_eq!(ev, ["U", "H(change)[B,C]", "D([+C,-A,~B],h3)"]);
}

#[test]
fn on_an_inline_route_a_definition_change_keeps_the_series_and_returns_the_by_value_snapshot() {
    let route = Route::builder("anthropic", "claude-test", WireApi::Messages)
        .tool_update(Some(ToolUpdateMode::InHistory))
        .inline_definitions(true)
        .build()
        .unwrap();
    let mut l = Loop::new(route);
    let (first, _) = l.step(&[tool("A"), tool("B")]);
    assert_eq!(first.series_start, Some(SeriesStart::First));
    assert!(first.by_value);
    let (req, ev) = l.step(&[tool("A"), tool("B2")]);
    assert_eq!(ev, ["U", "H(change)[A,B]", "D([~B],h3)"]);
    assert!(!req.starts_series, "by value, no declaration series");
    assert_eq!(req.series_start, None);
    assert_eq!(snapshot(&req.tool_history), "{[A,B], [[s:4,[]]]}");
    assert_eq!(req.tool_history, l.session.tool_history_by_value());
    assert_eq!(
        req.tool_history.updates()[0].redefinitions()[0].description(),
        "B v2"
    );
    // Removed, then back changed: an addition carrying the new definition, no series.
    l.step(&[tool("A")]);
    let (req, ev) = l.step(&[tool("A"), tool("B")]);
    assert_eq!(ev, ["U", "H(change)[A,B]", "D([+B],h9)"]);
    assert!(!req.starts_series);
    assert_eq!(
        req.tool_history.tools().len(),
        2,
        "the baseline is untouched"
    );
}

#[test]
fn key_order_and_number_spelling_log_no_header() {
    let mut l = Loop::addition_only();
    let a: ToolSchema = serde_json::from_value(
        json!({"name":"A","description":"A","parameters":{"type":"object","maximum":1,"x":{"p":2}}}),
    )
    .unwrap();
    let a2: ToolSchema = serde_json::from_str(
        r#"{"parameters":{"x":{"p":2.0},"maximum":1.0,"type":"object"},"description":"A","name":"A"}"#,
    )
    .unwrap();
    let (first, _) = l.step(&[a]);
    let (req, ev) = l.step(&[a2]);
    assert_eq!(ev, ["U"], "an equivalent tool list is not a change");
    assert!(
        Arc::ptr_eq(&req.tools, &first.tools),
        "the logged tools are sent, byte for byte"
    );
}

#[test]
fn reordered_tools_are_a_change() {
    let mut l = Loop::addition_only();
    l.step(&[tool("A"), tool("B")]);
    let (_, ev) = l.step(&[tool("B"), tool("A")]);
    assert_eq!(
        ev,
        ["U", "H(change)[B,A]"],
        "same names: no developer message"
    );
}

#[test]
fn explicit_new_series_only_on_attempt_zero() {
    let mut l = Loop::addition_only();
    l.step(&[tool("A")]);
    let (req, ev) = l.step_with(&[tool("A")], true, 1);
    assert_eq!(
        ev,
        Vec::<String>::new(),
        "a retry neither asks nor re-appends user messages"
    );
    assert!(!req.starts_series);
    let (req, ev) = l.step_with(&[tool("A")], true, 0);
    assert_eq!(ev, ["U", "H(series)[A]"]);
    assert!(req.starts_series);
    let (_, ev) = l.step_with(&[tool("A"), tool("B")], true, 0);
    assert_eq!(
        ev,
        ["U", "H(change,ss)[A,B]", "D([+B],h5)"],
        "L8 with an asked series"
    );
    assert_eq!(
        l.snapshot(),
        "{[A,B], [[s:6,[B]]]}",
        "F6: the update pointing at the series' first header is kept"
    );
}

#[test]
fn l7_compaction_between_steps_logs_a_series_header() {
    let mut l = Loop::addition_only();
    l.step(&[tool("A")]);
    l.answer();
    l.session
        .append(Event::replace(Message::user("summary", "summary"), 0, 1))
        .unwrap();
    let (req, ev) = l.step(&[tool("A")]);
    assert_eq!(ev, ["U", "H(series)[A]"]);
    assert!(req.starts_series);
    let (_, ev) = l.step(&[tool("A")]);
    assert_eq!(ev, ["U"], "the recorder stored the new generation");
    // L8: generation moved and a tool added in the same step.
    l.session
        .append(Event::replace(Message::user("summary2", "s"), 0, 0))
        .unwrap();
    let (req, ev) = l.step(&[tool("A"), tool("B")]);
    assert_eq!(ev, ["U", "H(change,ss)[A,B]", "D([+B],h9)"]);
    assert!(req.starts_series);
}

#[test]
fn l11_prompt_replace_with_asked_series_then_nothing_next_step() {
    let mut l = Loop::addition_only();
    l.prompt = "P1".into();
    let (_, ev) = l.step(&[tool("A")]);
    assert_eq!(ev, ["S(append,\"P1\")", "U", "H(initial)[A]"]);
    l.prompt = "P2".into();
    let (req, ev) = l.step_with(&[tool("A")], true, 0);
    assert_eq!(ev, ["S(replace 0,\"P2\")", "U", "H(series)[A]"]);
    assert!(req.starts_series);
    let (_, ev) = l.step(&[tool("A")]);
    assert_eq!(ev, ["U"]);
    // Changed header in the asked series: startsSeries on the change header.
    l.prompt = "P3".into();
    let (_, ev) = l.step_with(&[tool("A"), tool("B")], true, 0);
    assert_eq!(
        ev,
        [
            "S(replace 0,\"P3\")",
            "U",
            "H(change,ss)[A,B]",
            "D([+B],h9)"
        ]
    );
}

#[test]
fn l9_tool_change_on_a_route_without_mode_is_a_prompt_series() {
    let mut l = Loop::new(route(None, true));
    l.prompt = "P1".into();
    l.step(&[tool("A")]);
    l.prompt = "P2".into();
    let (req, ev) = l.step(&[tool("A"), tool("B")]);
    assert_eq!(
        ev,
        [
            "S(replace 0,\"P2\")",
            "U",
            "H(change,ss)[A,B]",
            "D([+B],h5)"
        ]
    );
    assert!(req.starts_series);
}

#[test]
fn l9_prime_same_step_on_a_mode_route_appends_the_prompt() {
    let mut l = Loop::addition_only();
    l.prompt = "P1".into();
    let (first, _) = l.step(&[tool("A")]);
    l.answer();
    l.prompt = "P2".into();
    let (req, ev) = l.step(&[tool("A"), tool("B")]);
    assert_eq!(
        ev,
        ["S(append,\"P2\")", "U", "H(change)[A,B]", "D([+B],h6)"]
    );
    assert!(!req.starts_series);
    // Earlier surface nodes untouched: the new messages extend the old ones.
    assert!(
        first
            .messages
            .iter()
            .zip(req.messages.iter())
            .all(|(a, b)| a.ptr_eq(b))
    );
    assert_eq!(req.messages.len(), first.messages.len() + 4);
}

#[test]
fn l2_fresh_recorder_over_an_existing_log_resumes() {
    let mut l = Loop::addition_only();
    l.step(&[tool("A")]);
    l.reattach();
    let (req, ev) = l.step(&[tool("A"), tool("B")]);
    assert_eq!(ev, ["U", "H(resume)[A,B]", "D([+B],h3)"]);
    assert!(!req.starts_series, "F16: resume alone opens no series");
    l.reattach();
    let (_, ev) = l.step(&[tool("A"), tool("B")]);
    assert_eq!(
        ev,
        ["U", "H(resume)[A,B]"],
        "a new recorder always logs its first header"
    );
}

#[test]
fn l10_crash_between_header_and_developer_message_is_healed() {
    let session = Session::new("s");
    let config = Config::new("deepseek", "deepseek-flash");
    for (tools, reason) in [
        (vec![tool("A")], mektpoy::event::Reason::Initial),
        (vec![tool("A"), tool("B")], mektpoy::event::Reason::Change),
    ] {
        session
            .append(Event::header(
                mektpoy::event::RequestHeader::new(config.clone(), tools),
                reason,
            ))
            .unwrap();
    }
    assert_eq!(
        snapshot(&session.tool_history()),
        "{[A,B], []}",
        "F2: guard"
    );
    let mut l = Loop::over(session, route(Some(ToolUpdateMode::AdditionOnly), true), 0);
    let (_, ev) = l.step(&[tool("A"), tool("B")]);
    assert_eq!(ev, ["U", "H(resume)[A,B]", "D([+B],h3)"]);
    assert_eq!(l.snapshot(), "{[A], [[s:4,[B]]]}");
}

#[test]
fn l12_deferred_tool_added_later_is_activated_by_its_addition() {
    let mut l = Loop::addition_only();
    l.step(&[tool("A")]);
    let (_, ev) = l.step(&[tool("A"), tool("Xd")]);
    assert_eq!(ev, ["U", "H(change)[A,Xd]", "D([+X],h3)"]);
    assert_eq!(l.snapshot(), "{[A], [[s:4,[Xd]]]}");
}

#[test]
fn deferred_baseline_tool_activated_by_a_later_addition() {
    let mut l = Loop::addition_only();
    l.step(&[tool("A"), tool("Cd")]);
    assert_eq!(l.snapshot(), "{[A,Cd], []}");
    l.step(&[tool("A")]);
    let (req, ev) = l.step(&[tool("A"), tool("Cd")]);
    assert_eq!(ev, ["U", "H(change)[A,Cd]", "D([+C],h6)"]);
    assert!(
        !req.starts_series,
        "a deferred baseline tool returning is no series start"
    );
    assert_eq!(l.snapshot(), "{[A,Cd], [[s:4,[]],[s:7,[Cd]]]}");
}

#[test]
fn a_log_without_developer_messages_reads_as_the_guard() {
    let session = Session::new("s");
    let config = Config::new("p", "m");
    session
        .append(Event::header(
            mektpoy::event::RequestHeader::new(config.clone(), vec![tool("A")]),
            mektpoy::event::Reason::Initial,
        ))
        .unwrap();
    session
        .append(Event::header(
            mektpoy::event::RequestHeader::new(config.clone(), vec![tool("A"), tool("B")]),
            mektpoy::event::Reason::Change,
        ))
        .unwrap();
    session
        .append(Event::header(
            mektpoy::event::RequestHeader::new(config, vec![tool("A"), tool("B"), tool("C")]),
            mektpoy::event::Reason::Change,
        ))
        .unwrap();
    assert_eq!(snapshot(&session.tool_history()), "{[A,B,C], []}", "F11");
}

#[test]
fn a_refused_last_event_commits_nothing() {
    let session = Session::new("s");
    session
        .append(Event::append(Message::user("taken", "x")))
        .unwrap();
    let config = Config::new("p", "m");
    let route = route(Some(ToolUpdateMode::AdditionOnly), true);
    let mut ids = ["taken".to_string()].into_iter();
    let mut recorder = Recorder::attach(&session).with_ids(move || ids.next().unwrap_or_default());
    let tools_a = [tool("A")];
    let tools_ab = [tool("A"), tool("B")];
    let mk = |tools| bare_step(&config, &route, tools);
    recorder.record(&session, mk(&tools_a)).unwrap();
    let before = session.to_jsonl();
    let (len, generation) = (session.len(), session.surface_generation());
    // The developer message draws the id "taken": refused, so the header goes too.
    let err = recorder.record(&session, mk(&tools_ab)).unwrap_err();
    assert!(
        matches!(
            err,
            RecordError::Append(ref e) if matches!(e.kind(), AppendErrorKind::DuplicateMessageId { .. })
        ),
        "{err:?}"
    );
    assert_eq!(
        (session.len(), session.surface_generation()),
        (len, generation)
    );
    assert_eq!(session.to_jsonl(), before);
    // The recorder's state is unchanged too: still no developer message needed before.
    let mut recorder2 = recorder.with_ids(|| "later".into());
    recorder2.record(&session, mk(&tools_ab)).unwrap();
    let last: Vec<String> = session.events().iter().skip(len).map(describe).collect();
    assert_eq!(last, ["H(change)[A,B]", "D([+B],h2)"]);
}

#[test]
fn record_with_another_session_is_a_typed_error() {
    let mut l = Loop::addition_only();
    let other = Session::new("s");
    let err = Recorder::attach(&l.session)
        .record(&other, bare_step(l.agent.config(), l.agent.route(), &[]))
        .unwrap_err();
    assert!(
        matches!(err, RecordError::WrongSession { .. }),
        "same id, other session: {err}"
    );
    assert_eq!(other.len(), 0);
    let (_, ev) = l.step(&[]);
    assert_eq!(ev, ["U", "H(initial)[]"]);
}

#[test]
fn the_reserved_placeholder_name_cannot_be_registered() {
    let mut l = Loop::addition_only();
    let tools = [tool(mektpoy::vocab::DEFERRED_PLACEHOLDER_NAME)];
    let refused = l.agent.set_tools(tools.clone()).unwrap_err();
    assert_eq!(refused.reason, ToolRefusal::ReservedName);
    assert!(l.agent.tools().is_empty(), "the refused set is not kept");
    // A recorder given the set directly refuses it too, before anything is logged.
    let (config, route) = (l.agent.config().clone(), l.agent.route().clone());
    let mut recorder = mektpoy::agent::Recorder::attach(&l.session);
    let step = mektpoy::agent::Step::new(&config, "", &tools, &route).at(1, 1, 0);
    let err = recorder.record(&l.session, step).map(|_| ()).unwrap_err();
    assert!(
        matches!(&err, RecordError::Tool(r) if r.reason == ToolRefusal::ReservedName),
        "{err}"
    );
    assert_eq!(l.session.len(), 0);
}

#[test]
fn fork_inherits_updates_and_continues_the_series() {
    let mut l = Loop::addition_only();
    l.step(&[tool("A")]);
    l.step(&[tool("A"), tool("B")]);
    let fork = Session::fork(&l.session, l.session.len() as u64, "f").unwrap();
    assert_eq!(snapshot(&fork.tool_history()), "{[A], [[s:4,[B]]]}");
    let mut fl = Loop::over(fork, l.agent.route().clone(), 10);
    let (_, ev) = fl.step(&[tool("A"), tool("B"), tool("C")]);
    assert_eq!(ev, ["U", "H(resume)[A,B,C]", "D([+C],h6)"]);
    assert_eq!(fl.snapshot(), "{[A], [[s:4,[B]],[f:7,[C]]]}");
    assert_eq!(
        l.snapshot(),
        "{[A], [[s:4,[B]]]}",
        "the parent is untouched"
    );
}

#[test]
fn in_history_prompt_update_and_addition_in_one_step_keep_earlier_nodes() {
    let mut l = Loop::new(route(Some(ToolUpdateMode::InHistory), true));
    l.prompt = "P1".into();
    let (first, _) = l.step(&[tool("A")]);
    l.answer();
    let surface_before = l.session.surface();
    l.prompt = "P2".into();
    let (req, ev) = l.step(&[tool("A"), tool("B")]);
    assert_eq!(
        ev,
        ["S(append,\"P2\")", "U", "H(change)[A,B]", "D([+B],h6)"]
    );
    let surface = l.session.surface();
    assert!(
        surface
            .iter()
            .zip(surface_before.iter())
            .all(|(a, b)| match (a, b) {
                (SurfaceNode::Message(x), SurfaceNode::Message(y)) => x.ptr_eq(y),
                _ => false,
            })
    );
    assert_eq!(
        surface.len(),
        surface_before.len() + 3,
        "system node, user, developer message"
    );
    assert!(req.messages.starts_with(&first.messages));
    assert_eq!(l.session.surface_generation(), 0);
}

#[test]
fn prompt_rows_of_spec_4_1_through_record() {
    // Route without in-history prompts: the latest live node is replaced, which opens a
    // request series.
    let mut l = Loop::new(route(None, false));
    l.prompt = "P1".into();
    l.step(&[tool("A")]);
    l.prompt = "P2".into();
    let (req, ev) = l.step(&[tool("A")]);
    assert_eq!(ev, ["S(replace 0,\"P2\")", "U", "H(series)[A]"]);
    assert!(req.starts_series);
    // Same prompt: nothing.
    let (_, ev) = l.step(&[tool("A")]);
    assert_eq!(ev, ["U"]);
    // In-history, rendered empty: the latest node is replaced by an empty one.
    let mut l = Loop::addition_only();
    l.prompt = "P1".into();
    l.step(&[tool("A")]);
    l.prompt = "P2".into();
    l.step(&[tool("A")]);
    l.prompt = String::new();
    let (_, ev) = l.step(&[tool("A")]);
    assert_eq!(ev, ["S(replace 2,\"\")", "U", "H(series)[A]"]);
    // In-history, new series with later nodes live: append, node 0 untouched.
    let mut l = Loop::addition_only();
    l.prompt = "P1".into();
    l.step(&[tool("A")]);
    l.prompt = "P2".into();
    l.step(&[tool("A")]);
    l.prompt = "P3".into();
    let (_, ev) = l.step_with(&[tool("A")], true, 0);
    assert_eq!(ev, ["S(append,\"P3\")", "U", "H(series)[A]"]);
    // No live system node and an empty prompt: nothing.
    let mut l = Loop::addition_only();
    let (_, ev) = l.step(&[tool("A")]);
    assert_eq!(ev, ["U", "H(initial)[A]"]);
}

#[test]
fn a_persisting_session_writes_each_record_as_one_batch() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let session = Session::create(&path, "s").unwrap();
    let mut recorder = Recorder::attach(&session);
    let config = Config::new("p", "m");
    let route = route(Some(ToolUpdateMode::AdditionOnly), true);
    for (turn, tools) in [vec![tool("A")], vec![tool("A"), tool("B")]]
        .iter()
        .enumerate()
    {
        recorder
            .record(
                &session,
                Step::new(&config, "P", tools, &route)
                    .at(turn as u64, 0, 0)
                    .user_messages(&[Message::user(format!("u{turn}"), "hi")]),
            )
            .unwrap();
    }
    let loaded = Session::load(&path).unwrap();
    assert_eq!(loaded.session.to_jsonl(), session.to_jsonl());
    assert_eq!(loaded.session.tool_history(), session.tool_history());
}

/// Issue 20 item 15: on a log written under rules 3 (unmarked), the recorder asks the fold of
/// those rules, so F18's returning baseline tool starts a declaration series there, as the
/// log's earlier headers were written; on a log of rules 4 it continues the series (above).
#[test]
fn f18_on_a_log_of_rules_3_the_returning_baseline_tool_starts_a_series() {
    let file = b"{\"type\":\"session\",\"version\":0,\"id\":\"s\"}\n";
    let old = Session::load_bytes(file).unwrap().session;
    assert_eq!(old.rules(), mektpoy::session::LogRules::V3);
    let mut l = Loop::over(old, route(Some(ToolUpdateMode::AdditionOnly), true), 0);
    l.step(&[tool("A"), tool("B")]);
    l.step(&[tool("B")]);
    let (req, ev) = l.step(&[tool("A"), tool("B")]);
    assert!(req.starts_series, "{ev:?}");
    assert_eq!(ev, ["U", "H(change)[A,B]", "D([+A],h6)"]);
    assert_eq!(l.snapshot(), "{[A,B], [[s:7,[A]]]}");
}
