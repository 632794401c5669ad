//! Builds recorder-driven sessions for property tests: one `Recorder::record` per step (no
//! system prompt), an optional compaction before it and the assistant's reply after it.
//!
//! `build_session` is the only entry point. Sessions built here are never interrupted, so no
//! snapshot they produce is a guard.

use mektpoy::{
    AgentLoop, Config, Event, Message, Session, ToolSchema, event::Reason, history::ToolHistory,
};

/// Tool names the generators draw from.
pub const NAMES: [&str; 5] = ["read", "write", "grep", "bash", "fetch"];

/// One change to the effective tool list before a step.
#[derive(Clone, Copy, Debug)]
pub enum Change {
    /// Append `NAMES[name]` (no-op when present), deferred or not.
    Add {
        /// Index into [`NAMES`].
        name: usize,
        /// Whether the tool is declared with `deferLoading`.
        deferred: bool,
    },
    /// Remove `NAMES[name]` (no-op when absent).
    Remove {
        /// Index into [`NAMES`].
        name: usize,
    },
    /// Give `NAMES[name]` a new definition (no-op when absent).
    Redefine {
        /// Index into [`NAMES`].
        name: usize,
    },
}

/// One step of the loop: tool changes, then a request.
#[derive(Clone, Debug, Default)]
pub struct StepOp {
    /// Changes applied to the effective tools before the request.
    pub changes: Vec<Change>,
    /// The loop asks for a new request series (`new_series` on attempt 0).
    pub new_series: bool,
    /// A compaction replaces the older half of the surface before the step.
    pub compact: bool,
}

/// One recorded request, as the loop would hand it to projection.
#[derive(Clone, Debug)]
pub struct Request {
    /// The surface's messages after the step's batch.
    pub messages: mektpoy::vocab::Messages,
    /// The effective tools, as logged in the latest header.
    pub tools: Vec<ToolSchema>,
    /// `tool_history()` after the batch.
    pub snapshot: ToolHistory,
    /// `tool_history_by_value()` after the batch.
    pub by_value: ToolHistory,
    /// A request series starts at this request (a header with `startsSeries` or reason
    /// `series`).
    pub starts_series: bool,
    /// A declaration series (reference §3 step 2) starts at this request.
    pub new_declaration_series: bool,
}

impl Request {
    /// The effective tool names, in header order.
    pub fn effective_names(&self) -> Vec<&str> {
        self.tools.iter().map(ToolSchema::name).collect()
    }
}

/// `name` with definition version `version`, parameters `{"type":"object"}`.
fn versioned(name: &str, version: u32, deferred: bool) -> ToolSchema {
    super::tool_of(
        name,
        version,
        deferred,
        serde_json::json!({"type": "object"}),
    )
}

/// Records `ops` into a new session, one request per step.
///
/// Per step: an optional compaction (a `replace` of the older half of the surface), the user
/// message, a `request/header` when the tools changed (`initial` / `change`, `startsSeries`
/// when a request series starts) or when only a request series starts (`series`), then one
/// `tool-registry` developer message with the additions (`headerSeq` = the new header) then
/// the removals, diffed against the previous header's names; finally the assistant's reply,
/// after the request.
pub fn build_session(ops: &[StepOp]) -> (Session, Vec<Request>) {
    let config = Config::new("deepseek", "deepseek-flash");
    // Without a system prompt the route's capabilities change nothing the recorder logs.
    let route = mektpoy::route_for("deepseek", "deepseek-flash");
    let mut agent = AgentLoop::builder(Session::new("props"), route)
        .config(config)
        .build()
        .unwrap();
    let mut requests = Vec::with_capacity(ops.len());
    let mut current: Vec<ToolSchema> = Vec::new();
    let mut versions = [0u32; NAMES.len()];
    let mut previous: Option<ToolHistory> = None;
    for (n, op) in ops.iter().enumerate() {
        for change in &op.changes {
            apply(&mut current, &mut versions, *change);
        }
        let session = agent.session();
        let surface = session.surface().len();
        if op.compact && surface >= 2 {
            let summary = Message::user(format!("c{n}"), "summary of earlier turns");
            session
                .append(Event::replace(summary, 0, surface / 2))
                .expect("compaction");
        }
        agent.set_tools(current.iter().cloned()).unwrap();
        if op.new_series {
            agent.new_series();
        }
        let user = Message::user(format!("u{n}"), format!("step {n}"));
        let recorded = agent.user_turn([user]).expect("record");
        let session = agent.session();
        // A request series starts where the logged header says so.
        let events = session.events();
        let starts_series = recorded.header_seq.is_some_and(|s| {
            matches!(&events[s.index()], Event::Header(h) if h.starts_series || h.reason == Reason::Series)
        });
        let snapshot = recorded.tool_history.clone();
        let new_declaration_series = recorded.header_seq.is_some()
            && previous
                .as_ref()
                .is_none_or(|before| !continues(before, &snapshot));
        requests.push(Request {
            messages: recorded.messages.clone(),
            tools: recorded.tools.to_vec(),
            snapshot: snapshot.clone(),
            by_value: session.tool_history_by_value(),
            starts_series,
            new_declaration_series,
        });
        previous = Some(snapshot);
        session
            .append(Event::append(Message::assistant(
                format!("a{n}"),
                format!("answer {n}"),
                "deepseek",
                "deepseek-flash",
            )))
            .expect("reply");
    }
    (agent.into_session(), requests)
}

fn apply(current: &mut Vec<ToolSchema>, versions: &mut [u32], change: Change) {
    match change {
        Change::Add { name, deferred } => {
            if !current.iter().any(|t| t.name() == NAMES[name]) {
                current.push(versioned(NAMES[name], versions[name], deferred));
            }
        }
        Change::Remove { name } => current.retain(|t| t.name() != NAMES[name]),
        Change::Redefine { name } => {
            if let Some(i) = current.iter().position(|t| t.name() == NAMES[name]) {
                versions[name] += 1;
                current[i] = versioned(NAMES[name], versions[name], current[i].defer_loading());
            }
        }
    }
}

/// Whether `after` continues the declaration series of `before`: same baseline, and the
/// updates of `before` are the first updates of `after`. (A new series resets the baseline
/// to the new header's tools and the updates to the messages pointing at it.)
fn continues(before: &ToolHistory, after: &ToolHistory) -> bool {
    before.tools().len() == after.tools().len()
        && before
            .tools()
            .iter()
            .zip(after.tools())
            .all(|(a, b)| a.same_tool(b))
        && before.updates().len() <= after.updates().len()
        && before
            .updates()
            .iter()
            .zip(after.updates())
            .all(|(a, b)| a.message_id() == b.message_id())
}
