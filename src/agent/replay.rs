//! Replaying a recorded session on another route ([decision
//! 74](crate::manual::decisions#decision-74)): what each request of a log would have cost had the
//! loop sent it to `route`.
//!
//! The log holds the caller's events (answers, tool results, compactions) and the recorder's
//! (system-prompt nodes, the step's user messages, headers, tool-change developer messages,
//! thinking floors), one batch per recorded attempt ([reference
//! §4](crate::manual::reference#4-recording-a-request)). The replay copies the caller's events in
//! order onto a fresh in-memory session and regenerates the recorder's by calling
//! [`Recorder::record`] with a [`Step`] rebuilt from each batch: the tools and options of its
//! header with the target route's provider and model, the rendered prompt of its system node (else
//! the prompt in effect), its user messages, whether it asked for a new series, its turn and step.
//! Each request is serialized ([`Request::to_wire`](crate::Request::to_wire)) and, when the log
//! holds an answer to it, metered, as the loop's own meter would have been fed, and attributed as
//! the loop's own attributor would have attributed it ([`Replayed::attributions`], [`miss_lines`]:
//! what changed in the caller's terms, and whether the caller or a rule of the crate made it).
//!
//! On the route a log was recorded for, the replay reproduces the log event for event and every
//! request byte for byte, so its meter equals the loop's. The log does not name that route: on a
//! route that binds thinking, the replay sends the log's signed thinking back only when told it is
//! the recording route ([`Replay::recorded_on`], [decision
//! 108](crate::manual::decisions#decision-108)), since a block is bound to the bytes the recording
//! sent before it. What the log does not record (a retry that logged nothing, a new series asked
//! for where a replace or a replaced prompt also explains one) is inferred as [decision
//! 74](crate::manual::decisions#decision-74) says.
//!
//! ```
//! use mektpoy::agent::replay::Replay;
//! use mektpoy::{AgentLoop, Message, Session, ToolSchema, route_for};
//!
//! let route = route_for("deepseek", "deepseek-flash");
//! let read = ToolSchema::no_input("read", "Read a file");
//! let mut agent = AgentLoop::builder(Session::new("s"), route.clone())
//!     .option("max_tokens", 64.into())
//!     .system_prompt("Be brief. ".repeat(100))
//!     .tools([read.clone()])
//!     .build()?;
//! for turn in 0..3 {
//!     if turn == 2 {
//!         agent.set_tools([read.clone(), ToolSchema::no_input("grep", "Search")])?;
//!     }
//!     let wire = agent.user_turn([Message::user(format!("u{turn}"), "hi")])?.to_wire()?;
//!     agent.observe(&wire)?;
//!     agent.append(Message::assistant(format!("a{turn}"), "ok", "deepseek", "deepseek-flash"))?;
//! }
//! // On its own route the replay meters what the loop metered...
//! let own = Replay::new(route).run(agent.session())?;
//! assert_eq!(own.meter.rows(), agent.meter().rows());
//! // ...and on a route without a mode, the tool change at turn 2 rewrites the prefix.
//! let plain = Replay::new(route_for("deepseek", "deepseek-v4-pro")).run(agent.session())?;
//! assert_eq!(plain.missed().map(|r| r.turn).collect::<Vec<_>>(), [3]);
//! assert!(plain.miss_lines()[0].contains("tool `grep` added by the caller"), "{:?}", plain.miss_lines());
//! # Ok::<(), mektpoy::Error>(())
//! ```

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

use super::record;
use super::{Attribution, AttributionReport, Attributor, RecordError, Recorder, Request, Step};
use crate::event::{
    Config, Event, HeaderEvent, MessageEvent, OpaqueEvent, Reason, Rewrite, SeriesStart, SurfaceOp,
    ThinkingEvent,
};
use crate::meter::{Meter, MeterError, MeterReport, MeterRow};
use crate::route::{ANY_MODEL, Price, Route, catalog};
use crate::session::{AppendError, Session};
use crate::vocab::{ContentBlock, List, Message, MessageSource, Role, Seq, ToolSchema};
use crate::wire::{WireError, WireRequest, is_bound_thinking};

/// The suffix of a [`route_name`] that names a catalog route's by-reference variant.
pub const BY_REFERENCE: &str = ":by-reference";

/// The by-reference variant of a route with a mode (definitions named, not inlined; the
/// deferred placeholder keeping the section stable): what a platform that serves the model
/// without inline definitions needs (the demo's claude-opus-5 row). `None` for a route
/// without a mode.
///
/// ```
/// use mektpoy::agent::replay::by_reference;
/// use mektpoy::route_for;
/// let variant = by_reference(&route_for("anthropic", "claude-fable-5-1")).unwrap();
/// assert!(!variant.inline_definitions() && variant.deferred_placeholder());
/// assert!(by_reference(&route_for("deepseek", "deepseek-v4-pro")).is_none(), "no mode");
/// ```
pub fn by_reference(route: &Route) -> Option<Route> {
    route
        .clone()
        .into_builder()
        .inline_definitions(false)
        .deferred_placeholder(true)
        .build()
        .ok()
}

/// A name for `route` that [`route_by_name`] reads back: `provider/model` for a catalog entry,
/// with [`BY_REFERENCE`] appended for its [`by_reference`] variant; `None` for any other route.
///
/// ```
/// use mektpoy::agent::replay::{by_reference, route_by_name, route_name};
/// use mektpoy::route_for;
/// let opus = route_for("anthropic", "claude-opus-5");
/// assert_eq!(route_name(&opus).as_deref(), Some("anthropic/claude-opus-5"));
/// let variant = by_reference(&opus).unwrap();
/// assert_eq!(route_name(&variant).as_deref(), Some("anthropic/claude-opus-5:by-reference"));
/// assert_eq!(route_by_name("anthropic/claude-opus-5:by-reference"), Some(variant));
/// assert_eq!(route_by_name("acme/none"), None);
/// ```
pub fn route_name(route: &Route) -> Option<String> {
    let entry = catalog()
        .iter()
        .find(|r| r.provider == route.provider && r.model == route.model)?;
    let name = format!("{}/{}", route.provider, route.model);
    if entry == route {
        Some(name)
    } else if by_reference(entry).as_ref() == Some(route) {
        Some(name + BY_REFERENCE)
    } else {
        None
    }
}

/// The route a [`route_name`] names, `None` when no catalog entry has that provider and model
/// (or, with [`BY_REFERENCE`], when the entry has no mode).
///
/// ```
/// use mektpoy::agent::replay::route_by_name;
/// use mektpoy::route_for;
/// assert_eq!(route_by_name("deepseek/deepseek-flash"), Some(route_for("deepseek", "deepseek-flash")));
/// assert_eq!(route_by_name("deepseek-flash"), None);
/// ```
pub fn route_by_name(name: &str) -> Option<Route> {
    let (name, variant) = match name.strip_suffix(BY_REFERENCE) {
        Some(base) => (base, true),
        None => (name, false),
    };
    let (provider, model) = name.split_once('/')?;
    let entry = catalog()
        .iter()
        .find(|r| r.provider == provider && r.model == model)?;
    if variant {
        by_reference(entry)
    } else {
        Some(entry.clone())
    }
}

/// A replay of recorded sessions on one route, with the meter's price.
///
/// ```
/// use mektpoy::agent::replay::Replay;
/// use mektpoy::{AgentLoop, Message, Session, route_for};
/// let mut agent = AgentLoop::builder(Session::new("s"), route_for("deepseek", "deepseek-flash"))
///     .option("max_tokens", 64.into())
///     .build()?;
/// let wire = agent.user_turn([Message::user("u1", "hi")])?.to_wire()?;
/// agent.observe(&wire)?;
/// agent.append(Message::assistant("a1", "ok", "deepseek", "deepseek-flash"))?;
/// // What the same log would have sent to Anthropic.
/// let replayed = Replay::new(route_for("anthropic", "claude-opus-5")).run(agent.session())?;
/// assert_eq!(replayed.requests.len(), 1);
/// assert_eq!(replayed.meter.rows().len(), 1);
/// # Ok::<(), mektpoy::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct Replay {
    route: Route,
    price: Option<Price>,
    recorded_on: Option<Route>,
}

/// One request of the replay.
///
/// ```
/// use mektpoy::agent::replay::Replay;
/// use mektpoy::{AgentLoop, Message, Session, route_for};
/// let route = route_for("deepseek", "deepseek-flash");
/// let mut agent = AgentLoop::builder(Session::new("s"), route.clone())
///     .option("max_tokens", 64.into())
///     .build()?;
/// let wire = agent.user_turn([Message::user("u1", "hi")])?.to_wire()?;
/// agent.observe(&wire)?;
/// agent.append(Message::assistant("a1", "ok", "deepseek", "deepseek-flash"))?;
/// agent.user_turn([Message::user("u2", "more")])?; // never answered
/// let replayed = Replay::new(route).run(agent.session())?;
/// let turns: Vec<(u64, bool)> = replayed.requests.iter().map(|r| (r.turn, r.row.is_some())).collect();
/// assert_eq!(turns, [(1, true), (2, false)], "an unanswered request is not metered");
/// # Ok::<(), mektpoy::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct ReplayedRequest {
    /// The original log's event where the request was recorded: the first event of its
    /// batch, or, for a request whose batch logged nothing, the answer that shows it was sent.
    pub seq: Seq,
    /// The turn it belongs to.
    pub turn: u64,
    /// Its step within the turn.
    pub step: u64,
    /// What it rewrote against the previous request of the route ([`crate::Request::rewrite`]).
    pub rewrite: Option<Rewrite>,
    /// Why it opened a series, if it did.
    pub series_start: Option<SeriesStart>,
    /// Its meter row: `None` for a request the log holds no answer to (a failed attempt, or
    /// one in flight when the log ends), which a loop does not meter.
    pub row: Option<MeterRow>,
    /// Whether it did not find the whole previous metered request in the cache (the cached
    /// bytes fall short of the smaller of the two requests).
    pub missed: bool,
    /// Its attribution, for a metered request: where it departs from the previous metered
    /// request, in the caller's terms, and who made the rewrite, exactly as
    /// [`AgentLoop::attributions`](super::AgentLoop::attributions) holds it for a loop
    /// recorded on the route (its position's attempt counts the attempts recorded at the same
    /// turn and step). `None` for a request the log holds no answer to.
    pub attribution: Option<Attribution>,
}

/// What a replay produced.
///
/// ```
/// use mektpoy::agent::replay::Replay;
/// use mektpoy::{AgentLoop, Message, Session, route_for};
/// let route = route_for("deepseek", "deepseek-flash");
/// let mut agent = AgentLoop::builder(Session::new("s"), route.clone())
///     .option("max_tokens", 64.into())
///     .build()?;
/// let wire = agent.user_turn([Message::user("u1", "hi")])?.to_wire()?;
/// agent.observe(&wire)?;
/// agent.append(Message::assistant("a1", "ok", "deepseek", "deepseek-flash"))?;
/// let replayed = Replay::new(route).run(agent.session())?;
/// // On its own route the replay re-records the log event for event.
/// assert_eq!(replayed.session.to_jsonl(), agent.session().to_jsonl());
/// assert_eq!(replayed.report(), agent.meter().report());
/// # Ok::<(), mektpoy::Error>(())
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub struct Replayed {
    /// The re-recorded log, in memory.
    pub session: Session,
    /// The meter fed with every answered request, in order.
    pub meter: Meter,
    /// Every recorded request, in order, answered or not.
    pub requests: Vec<ReplayedRequest>,
    /// The route whose cache facts the meter applied ([`Replay::metered_route`]).
    route: Route,
    attributor: Attributor,
}

/// Reading a replay: totals, misses and their causes.
///
/// ```
/// use mektpoy::agent::replay::Replay;
/// use mektpoy::{AgentLoop, Message, Session, route_for};
/// let route = route_for("deepseek", "deepseek-flash");
/// let mut agent = AgentLoop::builder(Session::new("s"), route.clone())
///     .option("max_tokens", 64.into())
///     .build()?;
/// agent.user_turn([Message::user("u1", "hi")])?;
/// agent.append(Message::assistant("a1", "ok", "deepseek", "deepseek-flash"))?;
/// let replayed = Replay::new(route).run(agent.session())?;
/// assert_eq!((replayed.report().requests, replayed.missed().count()), (1, 0));
/// assert!(replayed.miss_lines().is_empty());
/// # Ok::<(), mektpoy::Error>(())
/// ```
impl Replayed {
    /// The meter's totals.
    ///
    /// ```
    /// use mektpoy::agent::replay::Replay;
    /// use mektpoy::{AgentLoop, Message, Session, route_for};
    /// let route = route_for("deepseek", "deepseek-flash");
    /// let mut agent = AgentLoop::builder(Session::new("s"), route.clone())
    ///     .option("max_tokens", 64.into())
    ///     .build()?;
    /// let wire = agent.user_turn([Message::user("u1", "hi")])?.to_wire()?;
    /// agent.observe(&wire)?;
    /// agent.append(Message::assistant("a1", "ok", "deepseek", "deepseek-flash"))?;
    /// let report = Replay::new(route).run(agent.session())?.report();
    /// assert_eq!(report.requests, 1);
    /// assert_eq!(report.cached_bytes, 0);
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
    pub fn report(&self) -> MeterReport {
        self.meter.report()
    }

    /// The metered requests that did not find the whole previous request in the cache.
    ///
    /// ```
    /// use mektpoy::agent::replay::Replay;
    /// use mektpoy::{AgentLoop, Message, Session, route_for};
    /// let route = route_for("deepseek", "deepseek-flash");
    /// let mut agent = AgentLoop::builder(Session::new("s"), route.clone())
    ///     .option("max_tokens", 64.into())
    ///     .system_prompt("Be brief. ".repeat(100))
    ///     .build()?;
    /// for turn in 0..2 {
    ///     let wire = agent.user_turn([Message::user(format!("u{turn}"), "hi")])?.to_wire()?;
    ///     agent.observe(&wire)?;
    ///     agent.append(Message::assistant(format!("a{turn}"), "ok", "deepseek", "deepseek-flash"))?;
    /// }
    /// // Two turns that only append: the second finds the first in the cache.
    /// assert_eq!(Replay::new(route).run(agent.session())?.missed().count(), 0);
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
    pub fn missed(&self) -> impl Iterator<Item = &ReplayedRequest> {
        self.requests.iter().filter(|r| r.missed)
    }

    /// The attribution of every metered request, in order: what
    /// [`AgentLoop::attributions`](super::AgentLoop::attributions) holds for the loop recorded
    /// on the route.
    ///
    /// ```
    /// use mektpoy::agent::replay::Replay;
    /// use mektpoy::{AgentLoop, Message, Session, route_for};
    /// let route = route_for("deepseek", "deepseek-flash");
    /// let mut agent = AgentLoop::builder(Session::new("s"), route.clone())
    ///     .option("max_tokens", 64.into())
    ///     .build()?;
    /// let wire = agent.user_turn([Message::user("u1", "hi")])?.to_wire()?;
    /// agent.observe(&wire)?;
    /// agent.append(Message::assistant("a1", "ok", "deepseek", "deepseek-flash"))?;
    /// let replayed = Replay::new(route).run(agent.session())?;
    /// assert_eq!(replayed.attributions(), agent.attributions());
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
    pub fn attributions(&self) -> &[Attribution] {
        self.attributor.attributions()
    }

    /// Per cause, how many metered requests departed from the previous one and how many
    /// estimated tokens that lost ([`AgentLoop::attribution_report`](super::AgentLoop::attribution_report)).
    ///
    /// ```
    /// use mektpoy::agent::replay::Replay;
    /// use mektpoy::{AgentLoop, Message, Session, route_for};
    /// let route = route_for("deepseek", "deepseek-flash");
    /// let mut agent = AgentLoop::builder(Session::new("s"), route.clone())
    ///     .option("max_tokens", 64.into())
    ///     .build()?;
    /// let wire = agent.user_turn([Message::user("u1", "hi")])?.to_wire()?;
    /// agent.observe(&wire)?;
    /// agent.append(Message::assistant("a1", "ok", "deepseek", "deepseek-flash"))?;
    /// let replayed = Replay::new(route).run(agent.session())?;
    /// assert_eq!(replayed.attribution_report(), agent.attribution_report());
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
    pub fn attribution_report(&self) -> AttributionReport {
        self.attributor.report()
    }

    /// One line per metered request that did not find the whole previous request in the cache
    /// ([`miss_lines`] over the replay's rows and attributions).
    ///
    /// ```
    /// use mektpoy::agent::replay::Replay;
    /// use mektpoy::{AgentLoop, Message, Session, route_for};
    /// let route = route_for("deepseek", "deepseek-v4-pro");
    /// let mut agent = AgentLoop::builder(Session::new("s"), route.clone())
    ///     .option("max_tokens", 64.into())
    ///     .system_prompt("A ".repeat(300))
    ///     .build()?;
    /// for turn in 0..2 {
    ///     if turn == 1 {
    ///         agent.set_system_prompt("B ".repeat(300)); // rewrites `system` on this route
    ///     }
    ///     let wire = agent.user_turn([Message::user(format!("u{turn}"), "hi")])?.to_wire()?;
    ///     agent.observe(&wire)?;
    ///     agent.append(Message::assistant(format!("a{turn}"), "ok", "deepseek", "deepseek-v4-pro"))?;
    /// }
    /// let lines = Replay::new(route).run(agent.session())?.miss_lines();
    /// assert_eq!(lines.len(), 1, "{lines:?}");
    /// assert!(lines[0].contains("system prompt changed by the caller"), "{}", lines[0]);
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
    pub fn miss_lines(&self) -> Vec<String> {
        miss_lines(&self.route, self.meter.rows(), self.attributions())
    }
}

/// Whether `row` did not find the whole previous request of its route in the cache: its cached
/// bytes fall short of what keeping the smaller of the two requests reads by the vendor's rule
/// ([`MeterRow::kept_bytes`]: its unit and minimum length applied).
fn missed(row: &MeterRow) -> bool {
    row.cached_bytes < row.kept_bytes()
}

/// One line per metered request (`rows` and their `attributions`, as
/// [`AgentLoop::attributions`](super::AgentLoop::attributions) keeps them) that did not find
/// the whole previous request in the cache (its cached bytes fall short of
/// [`MeterRow::kept_bytes`]): the attribution's own line (what
/// changed, the provider's miss kind, who made it: the caller or a rule of the crate, with
/// its reference section). A request that departs nowhere lost nothing to a rewrite: its line
/// says why the route read nothing cached (below the route's minimum cacheable length, else
/// the caching the route does not do for it).
///
/// ```
/// use mektpoy::agent::replay::miss_lines;
/// use mektpoy::{AgentLoop, Message, Session, ToolSchema, route_for};
/// let route = route_for("deepseek", "deepseek-v4-pro");
/// let tool = |n: &str| ToolSchema::no_input(n, "");
/// let mut agent = AgentLoop::builder(Session::new("s"), route.clone())
///     .option("max_tokens", 64.into())
///     .system_prompt("Be brief. ".repeat(300))
///     .tools([tool("read"), tool("shell")])
///     .build()?;
/// for turn in 0..2 {
///     if turn == 1 {
///         agent.set_tools([tool("read")])?;
///     }
///     let wire = agent.user_turn([Message::user(format!("u{turn}"), "hi")])?.to_wire()?;
///     agent.observe(&wire)?;
///     agent.append(Message::assistant(format!("a{turn}"), "ok", "deepseek", "deepseek-v4-pro"))?;
/// }
/// let lines = miss_lines(&route, agent.meter().rows(), agent.attributions());
/// assert_eq!(lines.len(), 1);
/// assert!(lines[0].contains("tool `shell` removed by the caller"), "{}", lines[0]);
/// # Ok::<(), mektpoy::Error>(())
/// ```
pub fn miss_lines(route: &Route, rows: &[MeterRow], attributions: &[Attribution]) -> Vec<String> {
    attributions
        .iter()
        .filter_map(|a| {
            let previous = rows.get(a.request.checked_sub(1)?)?;
            let row = rows.get(a.request)?;
            missed(row).then(|| miss_line(route, a, previous, row))
        })
        .collect()
}

fn miss_line(route: &Route, a: &Attribution, previous: &MeterRow, row: &MeterRow) -> String {
    if a.cause.is_some() {
        return a.to_string();
    }
    let shared = previous.total_bytes.min(row.total_bytes).div_ceil(4);
    let min = u64::from(crate::meter::min_cache_tokens(route));
    if shared < min {
        format!(
            "{a}, but the shared prefix (~{shared} tokens) is below the route's minimum \
             cacheable length ({min} tokens): nothing was cached"
        )
    } else {
        format!(
            "{a}, but the route read nothing cached (the body asks for no caching, or the \
             previous entry is outside the automatic-caching lookback)"
        )
    }
}

/// Why a replay stopped: the original log's event it could not follow, and what went wrong.
///
/// ```
/// use mektpoy::agent::replay::{Replay, ReplayErrorKind};
/// use mektpoy::vocab::Seq;
/// use mektpoy::{AgentLoop, Message, Session, ToolSchema, route_for};
/// // A schema without a root object: chat routes take it, Messages-API routes do not.
/// let loose = ToolSchema::new("read", "", serde_json::Map::new());
/// let mut agent = AgentLoop::builder(Session::new("s"), route_for("acme", "acme-1"))
///     .model("acme-1")
///     .tools([loose])
///     .build()?;
/// agent.user_turn([Message::user("u1", "hi")])?;
/// agent.append(Message::assistant("a1", "ok", "acme", "acme-1"))?;
/// let err = Replay::new(route_for("deepseek", "deepseek-flash")).run(agent.session()).unwrap_err();
/// assert_eq!(err.seq(), Seq(0), "the batch that recorded the request");
/// assert!(matches!(err.kind(), ReplayErrorKind::Record(_)));
/// # Ok::<(), mektpoy::Error>(())
/// ```
#[derive(Debug, thiserror::Error)]
#[error("event {seq}: {kind}")]
pub struct ReplayError {
    seq: Seq,
    kind: ReplayErrorKind,
}

/// Where a replay stopped, and why.
///
/// ```
/// use mektpoy::agent::replay::Replay;
/// use mektpoy::{AgentLoop, Message, Session, ToolSchema, route_for};
/// let loose = ToolSchema::new("read", "", serde_json::Map::new());
/// let mut agent = AgentLoop::builder(Session::new("s"), route_for("acme", "acme-1"))
///     .model("acme-1")
///     .tools([loose])
///     .build()?;
/// agent.user_turn([Message::user("u1", "hi")])?;
/// let err = Replay::new(route_for("deepseek", "deepseek-flash")).run(agent.session()).unwrap_err();
/// assert_eq!(err.to_string(), format!("event {}: {}", err.seq(), err.kind()));
/// # Ok::<(), mektpoy::Error>(())
/// ```
impl ReplayError {
    fn new(seq: Seq, kind: ReplayErrorKind) -> Self {
        ReplayError { seq, kind }
    }

    /// The original log's event.
    ///
    /// ```
    /// use mektpoy::agent::replay::Replay;
    /// use mektpoy::vocab::Seq;
    /// use mektpoy::{AgentLoop, Message, Session, ToolSchema, route_for};
    /// let loose = ToolSchema::new("read", "", serde_json::Map::new());
    /// let mut agent = AgentLoop::builder(Session::new("s"), route_for("acme", "acme-1"))
    ///     .model("acme-1")
    ///     .tools([loose])
    ///     .build()?;
    /// agent.user_turn([Message::user("u1", "hi")])?;
    /// let err = Replay::new(route_for("deepseek", "deepseek-flash")).run(agent.session()).unwrap_err();
    /// assert_eq!(err.seq(), Seq(0));
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
    pub fn seq(&self) -> Seq {
        self.seq
    }

    /// What went wrong there.
    ///
    /// ```
    /// use mektpoy::agent::replay::{Replay, ReplayErrorKind};
    /// use mektpoy::{AgentLoop, Message, Session, ToolSchema, route_for};
    /// let loose = ToolSchema::new("read", "", serde_json::Map::new());
    /// let mut agent = AgentLoop::builder(Session::new("s"), route_for("acme", "acme-1"))
    ///     .model("acme-1")
    ///     .tools([loose])
    ///     .build()?;
    /// agent.user_turn([Message::user("u1", "hi")])?;
    /// let err = Replay::new(route_for("deepseek", "deepseek-flash")).run(agent.session()).unwrap_err();
    /// assert!(matches!(err.kind(), ReplayErrorKind::Record(_)), "{err}");
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
    pub fn kind(&self) -> &ReplayErrorKind {
        &self.kind
    }
}

/// What went wrong at a [`ReplayError`]'s event.
///
/// ```
/// use mektpoy::agent::replay::Replay;
/// use mektpoy::{AgentLoop, Message, Session, ToolSchema, route_for};
/// let loose = ToolSchema::new("read", "", serde_json::Map::new());
/// let mut agent = AgentLoop::builder(Session::new("s"), route_for("acme", "acme-1"))
///     .model("acme-1")
///     .tools([loose])
///     .build()?;
/// agent.user_turn([Message::user("u1", "hi")])?;
/// let err = Replay::new(route_for("deepseek", "deepseek-flash")).run(agent.session()).unwrap_err();
/// assert!(err.kind().to_string().starts_with("the step of this batch could not be recorded"));
/// # Ok::<(), mektpoy::Error>(())
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReplayErrorKind {
    /// The replayed session refused the event, copied (a replace whose translated range
    /// orphans a tool result, a thinking policy chosen after a floor the replay logged, ...).
    #[error("the replayed session refused it: {0}")]
    Append(AppendError),
    /// The recorder refused the step rebuilt from the batch starting here.
    #[error("the step of this batch could not be recorded: {0}")]
    Record(RecordError),
    /// The route cannot carry a request the log holds an answer to.
    #[error("the route cannot carry the request this event records: {0}")]
    Wire(WireError),
    /// The request's body could not be metered.
    #[error("the request this event records could not be metered: {0}")]
    Meter(MeterError),
    /// A tool-change developer message of the recorder that follows no header of its batch:
    /// the recorder never writes one.
    #[error("a tool-change message of the recorder with no header before it in its batch")]
    ToolChangeWithoutHeader,
    /// A replace of surface nodes none of which is on the replayed surface.
    #[error(
        "the replace of surface nodes {start}..={end} has no counterpart on the replayed surface"
    )]
    ReplaceWithoutCounterpart {
        /// The original range's first node.
        start: usize,
        /// Its last node.
        end: usize,
    },
    /// A request recorded before any header: the recorder logs one with its first request.
    #[error("a recorded request with no header before it")]
    NoHeader,
    /// A message naming a header (`headerSeq`) the replay did not log.
    #[error("it names header {0}, which the replay did not log")]
    HeaderNotReplayed(Seq),
}

/// Setting up a replay and running it.
///
/// ```
/// use mektpoy::agent::replay::Replay;
/// use mektpoy::{AgentLoop, Message, Session, route_for};
/// let mut agent = AgentLoop::builder(Session::new("s"), route_for("deepseek", "deepseek-flash"))
///     .option("max_tokens", 64.into())
///     .build()?;
/// agent.user_turn([Message::user("u1", "hi")])?;
/// agent.append(Message::assistant("a1", "ok", "deepseek", "deepseek-flash"))?;
/// let replay = Replay::new(route_for("openai", "gpt-5.4"));
/// assert_eq!(replay.metered_route(agent.session()).model, "gpt-5.4");
/// assert_eq!(replay.run(agent.session())?.requests.len(), 1);
/// # Ok::<(), mektpoy::Error>(())
/// ```
impl Replay {
    /// A replay on `route`, metered at its catalog price ([`Route::price`]) when it has one.
    ///
    /// ```
    /// use mektpoy::agent::replay::Replay;
    /// use mektpoy::route_for;
    /// let replay = Replay::new(route_for("anthropic", "claude-opus-5-5"));
    /// assert_eq!(replay.route().model, "claude-opus-5-5");
    /// ```
    pub fn new(route: Route) -> Self {
        let price = route.price().cloned();
        Replay {
            route,
            price,
            recorded_on: None,
        }
    }

    /// The same replay of logs recorded on `route` ([decision
    /// 108](crate::manual::decisions#decision-108)). A signed thinking block is bound to the bytes
    /// its model was sent before it, and the log holds neither those bytes nor the route that sent
    /// them: only on the route that recorded the log does the replay send what the recording sent,
    /// byte for byte. So on a route that binds thinking ([`Route::binds_thinking`]) the replay
    /// sends the log's signed thinking back only when it is that route; elsewhere, and when the
    /// recording route is not given, every signed reasoning block of the log's messages is copied
    /// unsigned and each `redacted_thinking` block as an empty unsigned reasoning block, which the
    /// serializer leaves out as unverifiable reasoning (the vendor accepts earlier turns without
    /// their thinking). Routes that do not bind thinking send it back as the provider rule says,
    /// whatever the recording route.
    ///
    /// ```
    /// use mektpoy::agent::replay::Replay;
    /// use mektpoy::{AgentLoop, Message, Session, route_for};
    /// let route = route_for("anthropic", "claude-fable-5-1");
    /// let mut agent = AgentLoop::builder(Session::new("s"), route.clone())
    ///     .option("max_tokens", 64.into())
    ///     .build()?;
    /// let wire = agent.user_turn([Message::user("u1", "hi")])?.to_wire()?;
    /// agent.observe(&wire)?;
    /// agent.append(Message::assistant("a1", "ok", "anthropic", "claude-fable-5-1"))?;
    /// let replayed = Replay::new(route.clone()).recorded_on(route).run(agent.session())?;
    /// assert_eq!(replayed.meter.rows(), agent.meter().rows());
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
    #[must_use]
    pub fn recorded_on(mut self, route: Route) -> Self {
        self.recorded_on = Some(route);
        self
    }

    /// The same replay metered at `price`.
    ///
    /// ```
    /// use mektpoy::agent::replay::Replay;
    /// use mektpoy::route::{Evidence, Price};
    /// use mektpoy::{AgentLoop, Message, Session, route_for};
    /// let route = route_for("deepseek", "deepseek-flash"); // no catalog price
    /// let mut agent = AgentLoop::builder(Session::new("s"), route.clone())
    ///     .option("max_tokens", 64.into())
    ///     .build()?;
    /// agent.user_turn([Message::user("u1", "hi")])?;
    /// agent.append(Message::assistant("a1", "ok", "deepseek", "deepseek-flash"))?;
    /// assert_eq!(Replay::new(route.clone()).run(agent.session())?.report().cost, None);
    /// let priced = Replay::new(route).with_price(Price::usd(0.5, 0.05, Evidence::None));
    /// assert!(priced.run(agent.session())?.report().cost.is_some_and(|c| c > 0.0));
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
    #[must_use]
    pub fn with_price(mut self, price: Price) -> Self {
        self.price = Some(price);
        self
    }

    /// The route replayed on.
    ///
    /// ```
    /// use mektpoy::agent::replay::Replay;
    /// use mektpoy::route_for;
    /// let route = route_for("openai", "gpt-5.4");
    /// assert_eq!(Replay::new(route.clone()).route(), &route);
    /// ```
    pub fn route(&self) -> &Route {
        &self.route
    }

    /// The route whose cache facts the replay's meter applies ([`Route::metered_for`], [decision
    /// 105](crate::manual::decisions#decision-105)): on a generic entry, which sends the logged
    /// model id, that of the log's first header; else the replayed route.
    ///
    /// ```
    /// use mektpoy::agent::replay::Replay;
    /// use mektpoy::{AgentLoop, Message, Session, route_for};
    /// let generic = route_for("anthropic", "claude-nova-6"); // the generic entry
    /// let mut agent = AgentLoop::builder(Session::new("s"), route_for("anthropic", "claude-fable-5-1"))
    ///     .option("max_tokens", 64.into())
    ///     .build()?;
    /// agent.user_turn([Message::user("u1", "hi")])?;
    /// // The log's model, under the catalog entry a generic route would cache by.
    /// let replay = Replay::new(generic);
    /// assert_eq!(replay.metered_route(agent.session()).model, "claude-fable-5-1");
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
    pub fn metered_route(&self, log: &Session) -> Route {
        let first = log.events().iter().find_map(|e| match e {
            Event::Header(h) => Some(h.header.config.model.clone()),
            _ => None,
        });
        match first {
            Some(model) => self.route.metered_for(&model),
            None => self.route.clone(),
        }
    }

    /// Replays `log` ([reference §4](crate::manual::reference#4-recording-a-request), [decision
    /// 74](crate::manual::decisions#decision-74)).
    ///
    /// ```
    /// use mektpoy::agent::replay::Replay;
    /// use mektpoy::{AgentLoop, Message, Session, route_for};
    /// let route = route_for("deepseek", "deepseek-flash");
    /// let mut agent = AgentLoop::builder(Session::new("s"), route.clone())
    ///     .option("max_tokens", 64.into())
    ///     .build()?;
    /// let wire = agent.user_turn([Message::user("u1", "hi")])?.to_wire()?;
    /// agent.observe(&wire)?;
    /// agent.append(Message::assistant("a1", "ok", "deepseek", "deepseek-flash"))?;
    /// let replayed = Replay::new(route).run(agent.session())?;
    /// assert_eq!(replayed.meter.rows(), agent.meter().rows());
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`ReplayError`] naming the original event the replay could not follow.
    pub fn run(&self, log: &Session) -> Result<Replayed, ReplayError> {
        self.run_each(log, |_, _| {})
    }

    /// Replays `log`, handing `each` every request the route could carry, in order, with the
    /// bytes it would have been sent as (metered or not: see [`ReplayedRequest::row`]).
    ///
    /// ```
    /// use mektpoy::agent::replay::Replay;
    /// use mektpoy::{AgentLoop, Message, Session, route_for};
    /// let mut agent = AgentLoop::builder(Session::new("s"), route_for("deepseek", "deepseek-flash"))
    ///     .option("max_tokens", 64.into())
    ///     .build()?;
    /// agent.user_turn([Message::user("u1", "hi")])?;
    /// agent.append(Message::assistant("a1", "ok", "deepseek", "deepseek-flash"))?;
    /// let mut bodies = Vec::new();
    /// Replay::new(route_for("openai", "gpt-5.4")).run_each(agent.session(), |_, wire| bodies.push(wire.body().to_owned()))?;
    /// assert_eq!(bodies.len(), 1);
    /// assert!(bodies[0].starts_with(r#"{"model":"gpt-5.4""#), "{}", bodies[0]);
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`run`](Self::run).
    pub fn run_each(
        &self,
        log: &Session,
        each: impl FnMut(&ReplayedRequest, &WireRequest),
    ) -> Result<Replayed, ReplayError> {
        let metered = self.metered_route(log);
        let mut meter = Meter::new(&metered);
        if let Some(price) = &self.price {
            meter = meter.with_price(price.clone());
        }
        let events = log.events();
        let ids = Arc::new(Mutex::new(Ids::new(log.id(), &events)));
        // Decision 108: the log's signed thinking goes back only where its binding is the
        // recording's.
        let unsign = self.route.binds_thinking() && self.recorded_on.as_ref() != Some(&self.route);
        let mut run = Run {
            route: &self.route,
            unsign,
            events,
            target: Session::new(log.id()),
            recorder: None,
            ids,
            original: Vec::new(),
            mirror: Vec::new(),
            generation: 0,
            generation_at_record: 0,
            prompts: HashMap::new(),
            header: None,
            headers: HashMap::new(),
            batch: 0,
            position: (0, 0),
            pending: None,
            meter,
            attributor: Attributor::new(),
            attempt: None,
            previous_total: None,
            requests: Vec::new(),
            each,
        };
        run.all()?;
        Ok(Replayed {
            session: run.target,
            meter: run.meter,
            requests: run.requests,
            route: metered,
            attributor: run.attributor,
        })
    }
}

/// A surface node, as both surfaces name it: the caller's messages by id, opaque nodes by
/// their original `Seq`, the recorder's nodes by the batch that wrote them (their ids may
/// differ between the two logs).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Key {
    Caller(String),
    Opaque(u64),
    Recorder { batch: usize, prompt: bool },
}

/// What the recorder wrote, by kind, in batch order ([reference
/// §4](crate::manual::reference#4-recording-a-request)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Prompt,
    User,
    Header,
    ToolChange,
    Floor,
}

fn kind(event: &Event) -> Option<Kind> {
    match event {
        Event::Header(_) => Some(Kind::Header),
        Event::Thinking(t) if matches!(**t, ThinkingEvent::Floor(_)) => Some(Kind::Floor),
        Event::Message(m) if m.turn.is_some() && m.surface_op.is_some() => {
            let append = m.surface_op == Some(SurfaceOp::Append);
            match m.step {
                Some(_) if m.message.is_prompt() => Some(Kind::Prompt),
                Some(_)
                    if append
                        && m.message.role() == Role::Developer
                        && *m.message.source() == MessageSource::ToolRegistry =>
                {
                    Some(Kind::ToolChange)
                }
                None if append => Some(Kind::User),
                _ => None,
            }
        }
        _ => None,
    }
}

fn stamps(event: &Event) -> (Option<u64>, Option<u64>) {
    match event {
        Event::Message(m) => (m.turn, m.step),
        _ => (None, None),
    }
}

/// The ids the replay's recorder draws: the original batch's, in the order it wrote them,
/// then fresh ones no original message uses. An original id of the recorder's default form
/// (`{session}:{seq}`, the seq of that message in the original log) is drawn in that form at
/// the seq the message takes in the replay: the logs of two routes differ in length (a
/// thinking floor is logged on one route only), and a recording on the replayed route names
/// its messages by their own seqs.
struct Ids {
    /// The original batch's ids, each with the seq it had in the original log.
    queue: VecDeque<(String, Seq)>,
    used: HashSet<String>,
    session: String,
    counter: u64,
}

impl Ids {
    fn new(session: &str, events: &List<Event>) -> Self {
        let used = events
            .iter()
            .filter_map(|e| match e {
                Event::Message(m) => Some(m.message.id().to_owned()),
                _ => None,
            })
            .collect();
        Ids {
            queue: VecDeque::new(),
            used,
            session: session.to_owned(),
            counter: 0,
        }
    }

    fn next(&mut self, session: &str, seq: Seq) -> String {
        if let Some((id, original)) = self.queue.pop_front() {
            if id == record::default_id(&self.session, original) {
                return record::default_id(session, seq);
            }
            return id;
        }
        loop {
            self.counter += 1;
            let id = format!("{}:replay:{}", self.session, self.counter);
            if !self.used.contains(&id) {
                return id;
            }
        }
    }
}

/// A recorded request waiting to learn whether the log answers it.
struct Pending {
    request: ReplayedRequest,
    /// What the recorder returned, for the attribution in the caller's terms.
    recorded: Request,
    /// The loop's attempt at its turn and step.
    attempt: u32,
    wire: Result<WireRequest, WireError>,
    answered: bool,
}

/// One batch of the original log, parsed.
#[derive(Default)]
struct Batch<'e> {
    prompt: Option<&'e MessageEvent>,
    users: Vec<Message>,
    header: Option<(Seq, Arc<HeaderEvent>)>,
    tool_change: Option<&'e MessageEvent>,
    /// The recorder's messages (prompt node, developer message) with their original seqs.
    written: Vec<(String, Seq)>,
}

struct Run<'r, F> {
    route: &'r Route,
    /// Whether the log's signed thinking is copied unsigned ([decision
    /// 108](crate::manual::decisions#decision-108)).
    unsign: bool,
    events: List<Event>,
    target: Session,
    recorder: Option<Recorder>,
    ids: Arc<Mutex<Ids>>,
    /// The original surface and the replayed one, node for node.
    original: Vec<Key>,
    mirror: Vec<Key>,
    /// The original surface generation, and what it was at the current recorder's last record.
    generation: u64,
    generation_at_record: u64,
    /// The text of each prompt node of the original surface.
    prompts: HashMap<Key, String>,
    /// The original log's latest header.
    header: Option<Arc<HeaderEvent>>,
    /// Original header `Seq` → the replayed header's.
    headers: HashMap<Seq, Seq>,
    batch: usize,
    /// The turn and step of the latest request.
    position: (u64, u64),
    pending: Option<Pending>,
    meter: Meter,
    /// The attributions of the metered requests, as the loop's own attributor keeps them.
    attributor: Attributor,
    /// The attempt of the latest recorded request at its turn and step.
    attempt: Option<u32>,
    previous_total: Option<u64>,
    requests: Vec<ReplayedRequest>,
    each: F,
}

/// `message` with its bound thinking made unverifiable ([decision
/// 108](crate::manual::decisions#decision-108)): each signed reasoning block without its
/// `signature`, each `redacted_thinking` block an empty unsigned reasoning block (so block indexes
/// stay). The message itself when it holds none.
fn unsigned(message: &Message) -> Message {
    if !message.content().iter().any(is_bound_thinking) {
        return message.clone();
    }
    let content = message
        .content()
        .iter()
        .map(|block| match block {
            ContentBlock::Reasoning { text, extra } if is_bound_thinking(block) => {
                let mut extra = extra.clone();
                extra.shift_remove("signature");
                ContentBlock::Reasoning {
                    text: text.clone(),
                    extra,
                }
            }
            b if is_bound_thinking(b) => ContentBlock::Reasoning {
                text: String::new(),
                extra: Default::default(),
            },
            b => b.clone(),
        })
        .collect();
    message.with_content(content)
}

fn apply(surface: &mut Vec<Key>, op: SurfaceOp, key: Key) {
    match op {
        SurfaceOp::Append => surface.push(key),
        // Both logs validated the range; `min` keeps a bug from panicking.
        SurfaceOp::Replace { start, end } => {
            let end = end.min(surface.len().saturating_sub(1));
            let start = start.min(end);
            if start < surface.len() {
                surface.splice(start..=end, [key]);
            } else {
                surface.push(key);
            }
        }
    }
}

impl<F: FnMut(&ReplayedRequest, &WireRequest)> Run<'_, F> {
    fn all(&mut self) -> Result<(), ReplayError> {
        let mut i = 0;
        while i < self.events.len() {
            if kind(&self.events[i]).is_some() {
                let end = self.batch_end(i);
                self.record_batch(i, end)?;
                i = end;
            } else {
                self.caller(i)?;
                i += 1;
            }
        }
        self.settle()
    }

    /// The end of the batch starting at `start`: recorder events in batch order whose stamps
    /// agree (a new turn or step, or an event that cannot follow, starts the next batch).
    fn batch_end(&self, start: usize) -> usize {
        let first = &self.events[start];
        let mut last = kind(first);
        let (mut turn, mut step) = stamps(first);
        let mut header = last == Some(Kind::Header);
        let mut i = start + 1;
        while let Some(event) = self.events.get(i) {
            let Some(k) = kind(event) else { break };
            let follows = last.is_some_and(|l| k > l || (k == Kind::User && l == Kind::User));
            if !follows || (k == Kind::ToolChange && !header) {
                break;
            }
            let (t, s) = stamps(event);
            if t.is_some_and(|t| turn.is_some_and(|bt| bt != t))
                || s.is_some_and(|s| step.is_some_and(|bs| bs != s))
            {
                break;
            }
            turn = turn.or(t);
            step = step.or(s);
            header |= k == Kind::Header;
            last = Some(k);
            i += 1;
        }
        i
    }

    /// The first turn and step a caller's message carries after `from`, before the next batch.
    fn stamp_ahead(&self, from: usize) -> Option<(u64, u64)> {
        self.events
            .iter()
            .skip(from)
            .take_while(|e| kind(e).is_none())
            .find_map(|e| {
                let (t, s) = stamps(e);
                t.zip(s)
            })
    }

    /// The prompt in effect on the original surface: the latest prompt node's text.
    fn effective_prompt(&self) -> String {
        self.original
            .iter()
            .rev()
            .find_map(|k| self.prompts.get(k))
            .cloned()
            .unwrap_or_default()
    }

    fn record_batch(&mut self, start: usize, end: usize) -> Result<(), ReplayError> {
        let seq = Seq::from(start);
        // O(1): the list shares its structure.
        let events = self.events.clone();
        let mut batch = Batch::default();
        for i in start..end {
            match &events[i] {
                Event::Header(h) => batch.header = Some((Seq::from(i), Arc::clone(h))),
                Event::Message(m) => match kind(&events[i]) {
                    Some(Kind::Prompt) => {
                        batch.prompt = Some(m);
                        batch
                            .written
                            .push((m.message.id().to_owned(), Seq::from(i)));
                    }
                    Some(Kind::User) => batch.users.push(m.message.clone()),
                    Some(Kind::ToolChange) => {
                        batch.tool_change = Some(m);
                        batch
                            .written
                            .push((m.message.id().to_owned(), Seq::from(i)));
                    }
                    _ => {}
                },
                _ => {}
            }
        }
        if batch.tool_change.is_some() && batch.header.is_none() {
            return Err(ReplayError::new(
                seq,
                ReplayErrorKind::ToolChangeWithoutHeader,
            ));
        }
        self.settle()?;
        let fresh = self.recorder.is_none()
            || batch
                .header
                .as_ref()
                .is_some_and(|(_, h)| matches!(h.reason, Reason::Initial | Reason::Resume));
        if fresh {
            let ids = Arc::clone(&self.ids);
            let recorder = Recorder::attach(&self.target).with_ids_at(move |session, seq| {
                ids.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .next(session, seq)
            });
            self.recorder = Some(recorder);
            self.generation_at_record = self.generation;
        }
        let b = self.batch;
        self.batch += 1;
        // The original surface through the batch; the generation after its prompt node is
        // the one its recorder compared (reference §4 step 4).
        if let Some(p) = batch.prompt {
            let key = Key::Recorder {
                batch: b,
                prompt: true,
            };
            self.prompts.insert(key.clone(), p.message.text());
            self.original_op(p.surface_op, key);
        }
        for m in &batch.users {
            self.original_op(Some(SurfaceOp::Append), Key::Caller(m.id().to_owned()));
        }
        let g_prev = self.generation_at_record;
        let g_after = self.generation;
        self.generation_at_record = g_after;
        if let Some(d) = batch.tool_change {
            self.original_op(
                d.surface_op,
                Key::Recorder {
                    batch: b,
                    prompt: false,
                },
            );
        }
        // A header that opened a series the generation does not explain was asked for.
        let asked = batch.header.as_ref().is_some_and(|(_, h)| {
            (h.starts_series || h.reason == Reason::Series) && g_after == g_prev
        });
        if let Some((_, h)) = &batch.header {
            self.header = Some(Arc::clone(h));
        }
        let prompt = match batch.prompt {
            Some(p) => p.message.text(),
            None => self.effective_prompt(),
        };
        let stamped = batch
            .prompt
            .or(batch.tool_change)
            .and_then(|m| m.turn.zip(m.step));
        let user_turn = batch
            .users
            .first()
            .and_then(|_| (start..end).find_map(|i| stamps(&events[i]).0));
        let position = stamped
            .or_else(|| {
                let ahead = self.stamp_ahead(end);
                match user_turn {
                    Some(t) => Some((t, ahead.filter(|(at, _)| *at == t).map_or(1, |(_, s)| s))),
                    None => ahead,
                }
            })
            .unwrap_or(self.position);
        {
            let mut ids = self.ids.lock().unwrap_or_else(PoisonError::into_inner);
            ids.queue.clear();
            ids.queue.extend(batch.written.iter().cloned());
        }
        let original_header = batch.header.as_ref().map(|(s, _)| *s);
        self.record(
            seq,
            b,
            position,
            prompt,
            &batch.users,
            asked,
            original_header,
        )
    }

    /// Records one step on the replayed session and keeps its request pending.
    #[allow(clippy::too_many_arguments)]
    fn record(
        &mut self,
        seq: Seq,
        batch: usize,
        (turn, step): (u64, u64),
        prompt: String,
        users: &[Message],
        asked: bool,
        original_header: Option<Seq>,
    ) -> Result<(), ReplayError> {
        let Some(header) = self.header.clone() else {
            return Err(ReplayError::new(seq, ReplayErrorKind::NoHeader));
        };
        let config = self.target_config(&header.header.config);
        let tools = Arc::clone(&header.header.tools);
        self.record_with(
            seq,
            batch,
            (turn, step),
            &config,
            &tools,
            prompt,
            users,
            asked,
            original_header,
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn record_with(
        &mut self,
        seq: Seq,
        batch: usize,
        (turn, step): (u64, u64),
        config: &Config,
        tools: &[ToolSchema],
        prompt: String,
        users: &[Message],
        asked: bool,
        original_header: Option<Seq>,
    ) -> Result<(), ReplayError> {
        // A loop records the same turn and step again only as a retry; the recorder serializes
        // a retry against the route's last accepted request, as the loop's did.
        let attempt = match self.attempt {
            Some(a) if self.position == (turn, step) => a + 1,
            _ => 0,
        };
        let step_record = Step::new(config, &prompt, tools, self.route)
            .at(turn, step, attempt)
            .new_series(asked)
            .user_messages(users);
        let before = self.target.len();
        let recorder = self
            .recorder
            .as_mut()
            .ok_or_else(|| ReplayError::new(seq, ReplayErrorKind::NoHeader))?;
        let request = recorder
            .record(&self.target, step_record)
            .map_err(|e| ReplayError::new(seq, ReplayErrorKind::Record(e)))?;
        let replayed = self.target.events();
        for i in before..replayed.len() {
            match &replayed[i] {
                Event::Header(_) => {
                    if let Some(h) = original_header {
                        self.headers.insert(h, Seq::from(i));
                    }
                }
                Event::Message(m) => {
                    let key = match kind(&replayed[i]) {
                        Some(Kind::Prompt) => Key::Recorder {
                            batch,
                            prompt: true,
                        },
                        Some(Kind::ToolChange) => Key::Recorder {
                            batch,
                            prompt: false,
                        },
                        _ => Key::Caller(m.message.id().to_owned()),
                    };
                    if let Some(op) = m.surface_op {
                        apply(&mut self.mirror, op, key);
                    }
                }
                _ => {}
            }
        }
        self.ids
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .queue
            .clear();
        self.attempt = Some(attempt);
        self.position = (turn, step);
        self.pending = Some(Pending {
            request: ReplayedRequest {
                seq,
                turn,
                step,
                rewrite: request.rewrite,
                series_start: request.series_start,
                row: None,
                missed: false,
                attribution: None,
            },
            wire: request.to_wire(),
            recorded: request,
            attempt,
            answered: false,
        });
        Ok(())
    }

    /// The logged configuration sent to the target route: its provider, and its model unless
    /// it is a provider's generic entry.
    fn target_config(&self, logged: &Config) -> Config {
        let mut config = logged.clone();
        config.provider = self.route.provider.to_string();
        if self.route.model != ANY_MODEL {
            config.model = self.route.model.to_string();
        }
        config
    }

    /// Meters the pending request if the log answered it.
    fn settle(&mut self) -> Result<(), ReplayError> {
        let Some(Pending {
            mut request,
            recorded,
            attempt,
            wire,
            answered,
        }) = self.pending.take()
        else {
            return Ok(());
        };
        let seq = request.seq;
        match (wire, answered) {
            (Ok(wire), true) => {
                // What `AgentLoop::observe` does with the request it recorded last.
                let previous_bytes = self.meter.rows().last().map(|r| r.total_bytes);
                let had_previous = self.meter.has_previous();
                let row = self
                    .meter
                    .observe(&wire.body, wire.series_start)
                    .map_err(|e| ReplayError::new(seq, ReplayErrorKind::Meter(e)))?;
                let departure = self.meter.departures().last().cloned().flatten();
                let mut attribution = self.attributor.build(
                    self.meter.rows().len() - 1,
                    had_previous,
                    departure,
                    previous_bytes,
                    Some(&recorded),
                    &wire,
                );
                attribution.position = Some((request.turn, request.step, attempt));
                self.attributor
                    .record(attribution.clone(), Some(&recorded), &wire);
                request.attribution = Some(attribution);
                request.missed = self.previous_total.is_some() && missed(&row);
                self.previous_total = Some(row.total_bytes);
                request.row = Some(row);
                (self.each)(&request, &wire);
            }
            (Ok(wire), false) => (self.each)(&request, &wire),
            (Err(e), true) => return Err(ReplayError::new(seq, ReplayErrorKind::Wire(e))),
            // Refused and never answered: the loop could not have sent it either.
            (Err(_), false) => {}
        }
        self.requests.push(request);
        Ok(())
    }

    fn original_op(&mut self, op: Option<SurfaceOp>, key: Key) {
        if let Some(op) = op {
            if matches!(op, SurfaceOp::Replace { .. }) {
                self.generation += 1;
            }
            apply(&mut self.original, op, key);
        }
    }

    /// Copies a caller's event, recording first the request an answer shows was sent when its
    /// batch logged nothing.
    fn caller(&mut self, i: usize) -> Result<(), ReplayError> {
        let seq = Seq::from(i);
        let event = self.events[i].clone();
        // An appended assistant message is an answer (a replace by one is a compaction).
        if let Event::Message(m) = &event
            && m.message.role() == Role::Assistant
            && m.surface_op == Some(SurfaceOp::Append)
            && self.recorder.is_some()
        {
            let answered = self.pending.as_ref().is_some_and(|p| p.answered);
            let unseen = match m.turn.zip(m.step) {
                Some(p) => p != self.position,
                None => answered,
            };
            if unseen {
                self.settle()?;
                let position = m.turn.zip(m.step).unwrap_or(self.position);
                let prompt = self.effective_prompt();
                let b = self.batch;
                self.batch += 1;
                self.generation_at_record = self.generation;
                self.ids
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .queue
                    .clear();
                self.record(seq, b, position, prompt, &[], false, None)?;
            }
            if let Some(p) = &mut self.pending {
                p.answered = true;
            }
        }
        let (copy, key) = match &event {
            Event::Message(m) => {
                let mut m = m.clone();
                if self.unsign {
                    m.message = unsigned(&m.message);
                }
                if let Some(SurfaceOp::Replace { start, end }) = m.surface_op {
                    m.surface_op = Some(self.translate(seq, start, end)?);
                }
                if let Some(h) = m.header_seq {
                    let replayed = self.headers.get(&h).copied().ok_or_else(|| {
                        ReplayError::new(seq, ReplayErrorKind::HeaderNotReplayed(h))
                    })?;
                    m.header_seq = Some(replayed);
                }
                let key = Key::Caller(m.message.id().to_owned());
                if m.message.is_prompt() {
                    self.prompts.insert(key.clone(), m.message.text());
                }
                (Event::Message(m), Some(key))
            }
            Event::Opaque(o) => match o.surface_op() {
                Some(SurfaceOp::Replace { start, end }) => {
                    let op = self.translate(seq, start, end)?;
                    let copy = OpaqueEvent::decoded(
                        o.event_type().to_owned(),
                        o.fields().clone(),
                        Some(op),
                    );
                    (Event::from(copy), Some(Key::Opaque(seq.0)))
                }
                Some(_) => (event.clone(), Some(Key::Opaque(seq.0))),
                None => (event.clone(), None),
            },
            _ => (event.clone(), None),
        };
        let mirrored = copy.surface_op();
        self.target
            .append(copy)
            .map_err(|e| ReplayError::new(seq, ReplayErrorKind::Append(e)))?;
        if let Some(key) = key {
            self.original_op(event.surface_op(), key.clone());
            if let Some(op) = mirrored {
                apply(&mut self.mirror, op, key);
            }
        }
        Ok(())
    }

    /// The replayed range of the nodes an original replace removes. When the replayed surface
    /// holds them all, side by side, it is their range. Otherwise it runs from the first to the
    /// last of the caller's nodes among them (the recorder's nodes between go too), widened by
    /// the tool-change messages among them that touch it: a prompt node the target route
    /// wrote elsewhere (it replaced an older one instead of appending) is not the one the
    /// caller removed.
    fn translate(&self, seq: Seq, start: usize, end: usize) -> Result<SurfaceOp, ReplayError> {
        let removed: HashSet<&Key> = self
            .original
            .get(start..=end)
            .map(|s| s.iter().collect())
            .unwrap_or_default();
        let found: Vec<(usize, &Key)> = self
            .mirror
            .iter()
            .enumerate()
            .filter(|(_, k)| removed.contains(k))
            .collect();
        let (Some((first, _)), Some((last, _))) = (found.first(), found.last()) else {
            return Err(ReplayError::new(
                seq,
                ReplayErrorKind::ReplaceWithoutCounterpart { start, end },
            ));
        };
        if found.len() == removed.len() && last - first + 1 == found.len() {
            return Ok(SurfaceOp::Replace {
                start: *first,
                end: *last,
            });
        }
        let caller = || {
            found
                .iter()
                .filter(|(_, k)| matches!(k, Key::Caller(_) | Key::Opaque(_)))
                .map(|(i, _)| *i)
        };
        let (lo, hi) = match (caller().min(), caller().max()) {
            (Some(mut lo), Some(mut hi)) => {
                let tool_change = |i: usize| {
                    found
                        .iter()
                        .any(|(j, k)| *j == i && matches!(k, Key::Recorder { prompt: false, .. }))
                };
                while lo > 0 && tool_change(lo - 1) {
                    lo -= 1;
                }
                while tool_change(hi + 1) {
                    hi += 1;
                }
                (lo, hi)
            }
            _ => (*first, *last),
        };
        Ok(SurfaceOp::Replace { start: lo, end: hi })
    }
}
