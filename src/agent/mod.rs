//! The agent loop: [`AgentLoop`] holds a session, the route it sends to, and the loop's
//! position (turn, step, attempt); each operation records one attempt and returns the
//! [`Request`] to send, which projects, serializes and validates tool calls for that route.
//!
//! This is the top of the data flow (log → folds → projection → wire → meter → loop). The
//! recorder lives here rather than in [`session`](crate::session) because what it logs depends
//! on the route: whether the system prompt goes into the history as a node, and, on a route
//! that binds thinking, the thinking floor, which needs the serialized request. `session`
//! itself knows nothing of routes.

pub mod attribution;
mod builder;
mod continuity;
#[cfg(test)]
mod incremental_tests;
mod order;
mod prompt;
mod record;
pub mod replay;

use std::borrow::Borrow;
use std::sync::Arc;

pub use attribution::{
    Attribution, AttributionReport, Attributor, Cause, CauseTotal, Change, Check,
};
pub use builder::{AgentLoopBuilder, BuildError, BuildFault};
pub use order::ToolOrder;
pub use record::{RecordError, Recorder, Step};

use crate::event::{Config, Event, MessageEvent, Rewrite, SeriesStart, SurfaceOp};
use crate::history::ToolHistory;
use crate::meter::{Meter, MeterError, MeterRow};
use crate::notice::{Locale, Notice, notice};
use crate::project::{
    ProjectedToolUpdates, UnknownTool, project_tool_updates, project_tool_updates_inline,
    validate_tool_name,
};
use crate::response::Usage;
use crate::route::{Route, ToolRefused};
use crate::session::{AppendError, Position, Session};
use crate::vocab::{
    ContentBlock, Message, MessageSource, Messages, MessagesRef, Role, Seq, ToolSchema,
};
use crate::wire::{WireContext, WireError, WireRequest, serialize_with};

/// What one recorded attempt sends: the log as it stood right after the attempt's batch, and
/// the route it was recorded for.
///
/// ```
/// use mektpoy::{AgentLoop, Message, Session, ToolSchema, route_for};
/// let mut agent = AgentLoop::builder(Session::new("s"), route_for("deepseek", "deepseek-flash"))
///     .option("max_tokens", 64.into())
///     .tools([ToolSchema::no_input("read", "Read a file")])
///     .build()?;
/// let request = agent.user_turn([Message::user("u1", "hi")])?;
/// assert_eq!((request.messages.len(), request.tools.len()), (1, 1));
/// assert!(request.starts_series && request.header_seq.is_some());
/// let wire = request.to_wire()?; // the bytes to send
/// assert!(wire.body().contains(r#""name":"read""#));
/// # Ok::<(), mektpoy::Error>(())
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Request {
    /// The latest header's configuration, as logged.
    pub config: Config,
    /// The surface's messages.
    pub messages: Messages,
    /// The latest header's tools, as logged (the effective tools).
    pub tools: Arc<[ToolSchema]>,
    /// The tool snapshot to project with: the route's fold (by value on a route that takes
    /// definitions inline, by reference otherwise).
    pub tool_history: ToolHistory,
    /// The header this attempt appended, if any.
    pub header_seq: Option<Seq>,
    /// Whether that header opened a request series or a declaration series: a rewrite of the
    /// cached prefix by design.
    pub starts_series: bool,
    /// Why, when `starts_series`.
    pub series_start: Option<SeriesStart>,
    /// Whether `tool_history` is the by-value snapshot.
    pub by_value: bool,
    /// What this request rewrote against the previous request of its route (`tools`,
    /// `system`, or the history), when it did: where the cached prefix ends, and, on a route
    /// that binds thinking, where the thinking floor moved. Messages-API routes only.
    pub rewrite: Option<Rewrite>,
    /// The developer message this attempt's batch appended (the tool changes since the
    /// previous header), for a view to show: see [`notice`](Self::notice).
    pub tool_change: Option<Message>,
    route: Route,
    /// This request's number in the process ([`next_origin`]): its wire requests carry it,
    /// so that [`AgentLoop::observe`] recognises the request it recorded last in O(1).
    origin: u64,
    /// The wire request the recorder prepared against the route's previous request, or the
    /// context that refused it (Messages-API routes). Shared: a clone of the request (the loop
    /// keeps one to attribute what it observes) does not copy the body.
    prepared: Option<Arc<continuity::Prepared>>,
    /// The `prompt_cache_key` its wire requests carry: the session id, on a route that takes
    /// one ([`Route::prompt_cache_key`]).
    cache_key: Option<Arc<str>>,
}

/// A number no other request of this process has.
fn next_origin() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// The projection of a logged request for `route`. A route that reads the other fold than
/// the one `history` came from gets the projection without history, which is always valid.
fn project_for<'a>(
    route: &Route,
    messages: impl Into<MessagesRef<'a>>,
    tools: &'a [ToolSchema],
    history: &ToolHistory,
    by_value: bool,
) -> ProjectedToolUpdates<'a> {
    let inline = route.inline_definitions() && route.tool_update().is_some();
    let history = (inline == by_value).then_some(history);
    if inline {
        project_tool_updates_inline(messages, Some(tools), history)
    } else {
        project_tool_updates(messages, Some(tools), route.tool_update(), history)
    }
}

/// What a loop does with a recorded request: project it, serialize it, check the calls it gets back.
///
/// ```
/// use mektpoy::{AgentLoop, Message, Session, route_for};
/// let mut agent = AgentLoop::builder(Session::new("s"), route_for("deepseek", "deepseek-flash"))
///     .option("max_tokens", 64.into())
///     .build()?;
/// let request = agent.user_turn([Message::user("u1", "hi")])?;
/// assert_eq!(request.project().messages.len(), request.messages.len());
/// assert!(request.validate_tool_call("shell").is_err(), "no tools offered");
/// # Ok::<(), mektpoy::Error>(())
/// ```
impl Request {
    /// The route this request was recorded for.
    ///
    /// ```
    /// use mektpoy::{AgentLoop, Message, Session, route_for};
    /// let route = route_for("deepseek", "deepseek-flash");
    /// let mut agent = AgentLoop::builder(Session::new("s"), route.clone()).build()?;
    /// let request = agent.user_turn([Message::user("u1", "hi")])?;
    /// assert_eq!(request.route(), &route);
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
    pub fn route(&self) -> &Route {
        &self.route
    }

    /// This request as its route may receive it: the messages, tools and snapshot projected
    /// with the route's mode. Borrows from the request.
    ///
    /// ```
    /// use mektpoy::{AgentLoop, Message, Session, route_for};
    /// let route = route_for("deepseek", "deepseek-v4-pro");
    /// let mut agent = AgentLoop::builder(Session::new("s"), route).build()?;
    /// let request = agent.user_turn([Message::user("u1", "hi")])?;
    /// assert_eq!(request.project().messages.len(), 1);
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
    pub fn project(&self) -> ProjectedToolUpdates<'_> {
        project_for(
            &self.route,
            &self.messages,
            &self.tools,
            &self.tool_history,
            self.by_value,
        )
    }

    /// The bytes to send: this request [projected](Self::project) and serialized with the
    /// configuration it was logged with. The recorder serialized it against the route's
    /// previous request (on a Messages-API route the automatic-caching lookback breakpoint and
    /// the thinking floor depend on it; on both APIs it writes only the new wire messages), so
    /// this returns that request, or the same refusal.
    ///
    /// # Errors
    /// [`WireError`] when the route cannot carry the request (a missing `max_tokens`, a
    /// tool the route refuses, ...). The attempt is in the log; retry after fixing the cause.
    ///
    /// ```
    /// use mektpoy::{AgentLoop, Message, Session, route_for};
    /// let route = route_for("deepseek", "deepseek-flash");
    /// let mut agent = AgentLoop::builder(Session::new("s"), route).option("max_tokens", 64.into())
    ///     .system_prompt("Be brief.")
    ///     .build()?;
    /// let wire = agent.user_turn([Message::user("u1", "hi")])?.to_wire()?;
    /// assert!(wire.body().starts_with(r#"{"model":"deepseek-flash","max_tokens":64,"system":"Be brief.""#));
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
    pub fn to_wire(&self) -> Result<WireRequest, WireError> {
        let mut wire = match self.prepared.as_deref() {
            Some(Ok(wire)) => wire.clone(),
            Some(Err(replay)) => {
                let mut context = replay.context();
                context.prompt_cache_key = self.prompt_cache_key();
                serialize_with(&self.config, &self.project(), &self.route, &context)?
            }
            None => serialize_with(
                &self.config,
                &self.project(),
                &self.route,
                &WireContext {
                    prompt_cache_key: self.prompt_cache_key(),
                    ..WireContext::default()
                },
            )?,
        };
        wire.series_start = self.series_start;
        wire.origin = Some(self.origin);
        Ok(wire)
    }

    /// [`to_wire`](Self::to_wire), consuming the request: the body the recorder prepared is
    /// moved out, not copied, when no clone of this request shares it (a step's one copy of
    /// the body is then the serializer's own). The same bytes as `to_wire`.
    ///
    /// # Errors
    /// As [`to_wire`](Self::to_wire).
    ///
    /// ```
    /// use mektpoy::{AgentLoop, Message, Session, route_for};
    /// let mut agent = AgentLoop::builder(Session::new("s"), route_for("deepseek", "deepseek-flash"))
    ///     .option("max_tokens", 64.into())
    ///     .build()?;
    /// let request = agent.user_turn([Message::user("u1", "hi")])?;
    /// let copied = request.to_wire()?;
    /// assert_eq!(request.into_wire()?, copied);
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
    pub fn into_wire(mut self) -> Result<WireRequest, WireError> {
        let wire = match self.prepared.take().map(Arc::try_unwrap) {
            Some(Ok(Ok(wire))) => wire,
            Some(Ok(Err(replay))) => {
                self.prepared = Some(Arc::new(Err(replay)));
                return self.to_wire();
            }
            Some(Err(shared)) => {
                self.prepared = Some(shared);
                return self.to_wire();
            }
            None => return self.to_wire(),
        };
        Ok(WireRequest {
            series_start: self.series_start,
            origin: Some(self.origin),
            ..wire
        })
    }

    /// This request without the wire request the recorder prepared: what an attribution
    /// reads (messages, tools, route), never the bytes.
    pub(crate) fn without_wire(&self) -> Request {
        Request {
            config: self.config.clone(),
            messages: self.messages.clone(),
            tools: Arc::clone(&self.tools),
            tool_history: self.tool_history.clone(),
            header_seq: self.header_seq,
            starts_series: self.starts_series,
            series_start: self.series_start,
            by_value: self.by_value,
            rewrite: self.rewrite,
            tool_change: self.tool_change.clone(),
            route: self.route.clone(),
            origin: self.origin,
            prepared: None,
            cache_key: self.cache_key.clone(),
        }
    }

    /// The `prompt_cache_key` this request's wire requests carry, if any.
    pub(crate) fn prompt_cache_key(&self) -> Option<&str> {
        self.cache_key.as_deref()
    }

    /// The notice a chat or trajectory view shows for this attempt's tool changes, in
    /// `locale`; `None` when the attempt changed no tool.
    ///
    /// ```
    /// use mektpoy::notice::Locale;
    /// use mektpoy::{AgentLoop, Message, Session, ToolSchema, route_for};
    /// let read = ToolSchema::no_input("read", "Read a file");
    /// let mut agent = AgentLoop::builder(Session::new("s"), route_for("deepseek", "deepseek-flash"))
    ///     .tools([read.clone()])
    ///     .build()?;
    /// assert!(agent.user_turn([Message::user("u1", "hi")])?.notice(Locale::En).is_none());
    /// agent.set_tools([read, ToolSchema::no_input("grep", "Search")])?;
    /// let request = agent.user_turn([Message::user("u2", "go on")])?;
    /// assert_eq!(request.notice(Locale::En).unwrap().title, "Tool added: grep");
    /// assert_eq!(request.notice(Locale::Zh).unwrap().title, "已添加工具：grep");
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
    pub fn notice(&self, locale: Locale) -> Option<Notice> {
        self.tool_change.as_ref().and_then(|m| notice(m, locale))
    }

    /// Checks a tool call the model made in answer to this request: its name must be one of
    /// the effective tools this request was recorded with.
    ///
    /// ```
    /// use mektpoy::{AgentLoop, Message, Session, ToolSchema, route_for};
    /// let route = route_for("deepseek", "deepseek-flash");
    /// let mut agent = AgentLoop::builder(Session::new("s"), route)
    ///     .tools([ToolSchema::no_input("read", "Read a file")])
    ///     .build()?;
    /// let request = agent.user_turn([Message::user("u1", "hi")])?;
    /// assert!(request.validate_tool_call("read").is_ok());
    /// assert_eq!(request.validate_tool_call("shell").unwrap_err().name(), "shell");
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`UnknownTool`] for an empty, reserved or not effective name.
    pub fn validate_tool_call(&self, name: &str) -> Result<(), UnknownTool> {
        validate_tool_name(name, &self.tools)
    }
}

/// One agent loop over one session and one route.
///
/// The loop keeps what a step is recorded with (configuration, system prompt, effective
/// tools; change them with the setters as plugins and servers come and go) and counts turn,
/// step and attempt itself:
///
/// | operation | records | position after |
/// |---|---|---|
/// | [`user_turn`](Self::user_turn) | the user's messages, then the request | next turn, step 1, attempt 0 |
/// | [`next_step`](Self::next_step) | the request continuing the turn (after tool results) | same turn, next step, attempt 0 |
/// | [`retry`](Self::retry) | the same step again, nothing new from the user | same step, next attempt |
/// | [`new_series`](Self::new_series) | nothing yet: the next `user_turn` or `next_step` opens a request series | — |
///
/// `S` is the session or anything that borrows one (`&Session`, `Arc<Session>`), so one
/// session can be shared with readers. The loop owns its [`Meter`] for the route.
///
/// ```
/// use mektpoy::{AgentLoop, ContentBlock, Message, Session, ToolSchema, route_for};
///
/// let read = ToolSchema::no_input("read", "Read a file");
/// let mut agent = AgentLoop::builder(Session::new("s1"), route_for("deepseek", "deepseek-flash"))
///     .option("max_tokens", 1024.into())
///     .system_prompt("Be brief.")
///     .tools([read.clone()])
///     .build()?;
///
/// let request = agent.user_turn([Message::user("u1", "hi")])?;
/// let wire = request.to_wire()?; // send `wire.body()` with `wire.headers()`, then:
/// agent.observe(&wire)?;
/// agent.append(agent.assistant("a1", [ContentBlock::text("ok")]))?; // stamped deepseek/deepseek-flash
///
/// // A plugin adds a tool: the next turn logs the change as a developer message.
/// agent.set_tools([read, ToolSchema::no_input("search", "Search")])?;
/// let request = agent.user_turn([Message::user("u2", "and now?")])?;
/// agent.observe(&request.to_wire()?)?;
/// assert_eq!((agent.turn(), agent.step()), (2, 1));
/// assert_eq!(agent.session().tool_history().updates()[0].additions()[0].name(), "search");
/// let rows = agent.meter().rows();
/// // The first request stayed cached (every whole 64-token unit of it, as DeepSeek caches).
/// assert_eq!(rows[1].cached_bytes, rows[1].kept_bytes(), "the first request stayed cached");
/// # Ok::<(), mektpoy::Error>(())
/// ```
pub struct AgentLoop<S: Borrow<Session> = Session> {
    session: S,
    recorder: Recorder,
    route: Route,
    config: Config,
    system_prompt: String,
    tools: Vec<ToolSchema>,
    turn: u64,
    step: u64,
    attempt: u32,
    new_series: bool,
    meter: Meter,
    /// The attributions of the observed requests, and the previous one's log terms.
    attributor: Attributor,
    /// The request the loop recorded last: `observe` names a departure in its terms when the
    /// observed body is its body.
    last_recorded: Option<Request>,
}

impl<S: Borrow<Session>> std::fmt::Debug for AgentLoop<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentLoop")
            .field("session", &self.session.borrow().id())
            .field("route", &(&self.route.provider, &self.route.model))
            .field("turn", &self.turn)
            .field("step", &self.step)
            .field("attempt", &self.attempt)
            .finish_non_exhaustive()
    }
}

/// A loop's steps, setters and readings.
///
/// ```
/// use mektpoy::{AgentLoop, ContentBlock, Message, Session, route_for};
/// let mut agent = AgentLoop::builder(Session::new("s"), route_for("deepseek", "deepseek-flash"))
///     .option("max_tokens", 64.into())
///     .build()?;
/// let wire = agent.user_turn([Message::user("u1", "hi")])?.to_wire()?;
/// agent.observe(&wire)?;
/// agent.append(agent.assistant("a1", [ContentBlock::text("hello")]))?;
/// assert_eq!((agent.turn(), agent.meter().rows().len(), agent.session().messages().len()), (1, 1, 2));
/// # Ok::<(), mektpoy::Error>(())
/// ```
impl<S: Borrow<Session>> AgentLoop<S> {
    /// The rendered system prompt for the next attempts.
    ///
    /// ```
    /// use mektpoy::{AgentLoop, Message, Session, route_for};
    /// let route = route_for("deepseek", "deepseek-flash");
    /// let mut agent = AgentLoop::builder(Session::new("s"), route)
    ///     .option("max_tokens", 64.into())
    ///     .build()?;
    /// agent.set_system_prompt("Answer in French.");
    /// assert_eq!(agent.system_prompt(), "Answer in French.");
    /// let request = agent.user_turn([Message::user("u1", "hi")])?;
    /// assert!(request.to_wire()?.body().contains("Answer in French."));
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
    pub fn set_system_prompt(&mut self, prompt: impl Into<String>) {
        self.system_prompt = prompt.into();
    }

    /// The effective tools for the next attempts, in the order they are declared, checked
    /// against the route ([`Route::check_tools`]): a tool the provider would refuse (an
    /// MCP-style `server.tool` name, a schema without a root object on a Messages-API route)
    /// is refused here rather than logged, where it would fail every later request of its
    /// declaration series.
    ///
    /// ```
    /// use mektpoy::{AgentLoop, Session, ToolSchema, route_for};
    /// let route = route_for("anthropic", "claude-opus-5");
    /// let mut agent = AgentLoop::builder(Session::new("s"), route).build()?;
    /// let object = serde_json::json!({"type": "object"}).as_object().unwrap().clone();
    /// let read = ToolSchema::new("read", "Read a file", object.clone());
    /// agent.set_tools([read.clone()])?;
    /// let mcp = ToolSchema::new("github.search_issues", "Search issues", object);
    /// let refused = agent.set_tools([read, mcp]).unwrap_err();
    /// assert_eq!((refused.index, refused.tool.as_str()), (1, "github.search_issues"));
    /// assert_eq!(agent.tools().len(), 1, "the previous tools stay");
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`ToolRefused`] naming the first tool the route refuses; the loop keeps its previous
    /// tools.
    pub fn set_tools(
        &mut self,
        tools: impl IntoIterator<Item = ToolSchema>,
    ) -> Result<(), ToolRefused> {
        let tools: Vec<ToolSchema> = tools.into_iter().collect();
        self.route.check_tools(&tools)?;
        self.tools = tools;
        Ok(())
    }

    /// The registration-time schema guard for a tool set before [`set_tools`](Self::set_tools):
    /// [`Session::check_tools`] on the loop's session. Nothing is changed; the caller decides
    /// whether to register the set anyway.
    ///
    /// ```
    /// use mektpoy::{AgentLoop, Session, ToolSchema, route_for};
    /// let agent = AgentLoop::builder(Session::new("s"), route_for("deepseek", "deepseek-flash"))
    ///     .build()?;
    /// // No call on the surface yet: any definition is free of conflicts.
    /// assert!(agent.check_tools(&[ToolSchema::no_input("read", "Read a file")]).is_ok());
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`SchemaConflicts`](crate::session::SchemaConflicts) naming each tool of `tools` whose
    /// name the surface shows calls of, made against another definition.
    pub fn check_tools(&self, tools: &[ToolSchema]) -> Result<(), crate::session::SchemaConflicts> {
        self.session.borrow().check_tools(tools)
    }

    /// The request options of the next attempts (`max_tokens`, `temperature`, ...), in place
    /// of the current ones; the provider and model stay the route's. Checked with the route's
    /// serializer as [`AgentLoopBuilder::options`] are.
    ///
    /// ```
    /// use mektpoy::agent::BuildFault;
    /// use mektpoy::{AgentLoop, Session, route_for};
    /// let mut agent = AgentLoop::builder(Session::new("s"), route_for("deepseek", "deepseek-flash"))
    ///     .build()?;
    /// agent.set_options([("max_tokens".to_owned(), 64.into())])?;
    /// assert_eq!(agent.config().extra()["max_tokens"], 64);
    /// let refused = agent.set_options([("messages".to_owned(), 1.into())]).unwrap_err();
    /// assert!(matches!(refused.faults(), [BuildFault::Option(_)]));
    /// assert_eq!(agent.config().extra()["max_tokens"], 64, "the previous options stay");
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`BuildError`] with the [`BuildFault::Option`] the serializer gives; the loop keeps
    /// its previous options.
    pub fn set_options(
        &mut self,
        options: impl IntoIterator<Item = (String, serde_json::Value)>,
    ) -> Result<(), BuildError> {
        let config = Config {
            extra: options.into_iter().collect(),
            ..Config::new(self.config.provider.clone(), self.config.model.clone())
        };
        if let Some(refusal) = crate::wire::option_refusal(&config, &self.route) {
            return Err(BuildError::option(refusal));
        }
        self.config = config;
        Ok(())
    }

    /// An assistant message with `content`, stamped with the loop's provider and model (its
    /// [`MessageSource::Model`]): what a loop appends for
    /// the model's answer, without repeating the names the route already gave.
    ///
    /// ```
    /// use mektpoy::vocab::MessageSource;
    /// use mektpoy::{AgentLoop, ContentBlock, Session, route_for};
    /// let agent = AgentLoop::builder(Session::new("s"), route_for("deepseek", "deepseek-flash"))
    ///     .build()?;
    /// let answer = agent.assistant("a1", [ContentBlock::text("ok")]);
    /// assert_eq!(answer.source(), &MessageSource::Model { provider: "deepseek".into(), model: "deepseek-flash".into() });
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
    pub fn assistant(
        &self,
        id: impl Into<String>,
        content: impl Into<Vec<ContentBlock>>,
    ) -> Message {
        Message::new(
            id,
            Role::Assistant,
            content.into(),
            MessageSource::Model {
                provider: self.config.provider.clone(),
                model: self.config.model.clone(),
            },
        )
    }

    /// Asks for a new request series: the next [`user_turn`](Self::user_turn) or
    /// [`next_step`](Self::next_step) opens one (a retry keeps the request it retries).
    ///
    /// ```
    /// use mektpoy::{AgentLoop, Message, Session, route_for};
    /// let route = route_for("deepseek", "deepseek-flash");
    /// let mut agent = AgentLoop::builder(Session::new("s"), route).build()?;
    /// assert!(agent.user_turn([Message::user("u1", "hi")])?.starts_series);
    /// agent.append(agent.assistant("a1", [mektpoy::ContentBlock::text("ok")]))?;
    /// assert!(!agent.user_turn([Message::user("u2", "more")])?.starts_series);
    /// agent.append(agent.assistant("a2", [mektpoy::ContentBlock::text("ok")]))?;
    /// agent.new_series(); // e.g. after a compaction the caller asked for
    /// assert!(agent.user_turn([Message::user("u3", "again")])?.starts_series);
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
    pub fn new_series(&mut self) {
        self.new_series = true;
    }

    /// Starts a user turn: logs `messages` and records the turn's first step.
    ///
    /// ```
    /// use mektpoy::{AgentLoop, Message, Session, route_for};
    /// let route = route_for("deepseek", "deepseek-flash");
    /// let mut agent = AgentLoop::builder(Session::new("s"), route).build()?;
    /// let request = agent.user_turn([Message::user("u1", "hi")])?;
    /// assert_eq!(request.messages.len(), 1);
    /// assert_eq!((agent.turn(), agent.step(), agent.attempt()), (1, 1, 0));
    /// // A message id the log already holds is refused, and nothing moves.
    /// assert!(agent.user_turn([Message::user("u1", "again")]).is_err());
    /// assert_eq!(agent.turn(), 1);
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`AppendError`] when the session refuses the batch (a duplicate message id, a failed
    /// write). Nothing is logged and the position is unchanged. The loop's tools were checked
    /// against its route as they were set, and its recorder is attached to its session, so
    /// [`RecordError`]'s other reasons cannot occur here.
    pub fn user_turn(
        &mut self,
        messages: impl IntoIterator<Item = Message>,
    ) -> Result<Request, AppendError> {
        let messages: Vec<Message> = messages.into_iter().collect();
        self.record(self.turn + 1, 1, 0, &messages)
    }

    /// Records the next step of the current turn: the request that continues after the
    /// answer and tool results appended since the last step.
    ///
    /// ```
    /// use mektpoy::{AgentLoop, ContentBlock, Message, Session, route_for};
    /// let route = route_for("deepseek", "deepseek-flash");
    /// let mut agent = AgentLoop::builder(Session::new("s"), route).build()?;
    /// agent.user_turn([Message::user("u1", "hi")])?;
    /// // In a real loop: the answer's tool calls, then their results.
    /// agent.append(agent.assistant("a1", [ContentBlock::text("thinking aloud")]))?;
    /// let request = agent.next_step()?;
    /// assert_eq!(request.messages.len(), 2);
    /// assert_eq!((agent.turn(), agent.step()), (1, 2));
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`user_turn`](Self::user_turn).
    pub fn next_step(&mut self) -> Result<Request, AppendError> {
        self.record(self.turn, self.step + 1, 0, &[])
    }

    /// Records the same step again (the provider failed or the process restarted with the
    /// request in flight): no user messages, no new series.
    ///
    /// ```
    /// use mektpoy::{AgentLoop, Message, Session, route_for};
    /// let route = route_for("deepseek", "deepseek-flash");
    /// let mut agent = AgentLoop::builder(Session::new("s"), route)
    ///     .option("max_tokens", 64.into())
    ///     .build()?;
    /// let first = agent.user_turn([Message::user("u1", "hi")])?.to_wire()?;
    /// // The provider timed out: send the same step again.
    /// let again = agent.retry()?.to_wire()?;
    /// assert_eq!(again.body(), first.body());
    /// assert_eq!((agent.turn(), agent.step(), agent.attempt()), (1, 1, 1));
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`user_turn`](Self::user_turn).
    pub fn retry(&mut self) -> Result<Request, AppendError> {
        self.record(self.turn, self.step, self.attempt + 1, &[])
    }

    fn record(
        &mut self,
        turn: u64,
        step: u64,
        attempt: u32,
        user_messages: &[Message],
    ) -> Result<Request, AppendError> {
        let step_record = Step::new(&self.config, &self.system_prompt, &self.tools, &self.route)
            .at(turn, step, attempt)
            .new_series(self.new_series && attempt == 0)
            .user_messages(user_messages);
        let request = self
            .recorder
            .record_admitted(self.session.borrow(), step_record)?;
        // Without the prepared bytes: the caller's request is then their only holder, so
        // `into_wire` moves them out instead of copying the body.
        self.last_recorded = Some(request.without_wire());
        (self.turn, self.step, self.attempt) = (turn, step, attempt);
        if attempt == 0 {
            self.new_series = false;
        }
        Ok(request)
    }

    /// Appends a message the loop received or produced (the model's answer, a tool result) to
    /// the surface, stamped with the current turn and step.
    ///
    /// ```
    /// use mektpoy::{AgentLoop, ContentBlock, Message, Session, route_for};
    /// let route = route_for("deepseek", "deepseek-flash");
    /// let mut agent = AgentLoop::builder(Session::new("s"), route).build()?;
    /// agent.user_turn([Message::user("u1", "hi")])?;
    /// let seq = agent.append(agent.assistant("a1", [ContentBlock::text("hello")]))?;
    /// assert_eq!(seq.0 + 1, agent.session().len() as u64);
    /// assert_eq!(agent.session().messages().len(), 2);
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`AppendError`] when the session refuses it; nothing is logged.
    pub fn append(&self, message: Message) -> Result<Seq, AppendError> {
        let event = MessageEvent {
            turn: Some(self.turn),
            step: Some(self.step),
            ..MessageEvent::new(message, Some(SurfaceOp::Append))
        };
        self.session.borrow().append(Event::Message(event))
    }

    /// Meters a request the provider accepted, in sending order. A request it refused is not
    /// the route's previous request: do not observe it.
    ///
    /// ```
    /// use mektpoy::{AgentLoop, Message, Session, WireRequest, route_for};
    /// let route = route_for("deepseek", "deepseek-flash");
    /// let mut agent = AgentLoop::builder(Session::new("s"), route)
    ///     .option("max_tokens", 64.into())
    ///     .build()?;
    /// let wire = agent.user_turn([Message::user("u1", "hi")])?.to_wire()?;
    /// let row = agent.observe(&wire)?;
    /// assert_eq!(row.cached_bytes, 0, "nothing before it to read");
    /// assert_eq!(agent.meter().rows().len(), 1);
    /// // Not a request body: refused, and the meter keeps its rows.
    /// assert!(agent.observe(&WireRequest::new("[]", vec![])).is_err());
    /// assert_eq!(agent.meter().rows().len(), 1);
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`MeterError`] for a body that is not a request body; the meter is unchanged.
    ///
    /// The request's [`Attribution`] is kept for [`attribution_report`](Self::attribution_report):
    /// in the caller's terms when `wire` came from [`Request::to_wire`] of the request the loop
    /// recorded last (recognised by a number the request stamps on it, not by serializing the
    /// request again).
    pub fn observe(&mut self, wire: &WireRequest) -> Result<MeterRow, MeterError> {
        // Borrowed, not cloned: a request holds its prepared wire request, body included.
        let request = self
            .last_recorded
            .as_ref()
            .filter(|r| wire.origin == Some(r.origin));
        let previous_bytes = self.meter.rows().last().map(|r| r.total_bytes);
        let had_previous = self.meter.has_previous();
        let row = self.meter.observe_wire(wire)?;
        let departure = self.meter.departures().last().cloned().flatten();
        let mut attribution = self.attributor.build(
            self.meter.rows().len() - 1,
            had_previous,
            departure,
            previous_bytes,
            request,
            wire,
        );
        attribution.position = Some((self.turn, self.step, self.attempt));
        self.attributor.record(attribution, request, wire);
        Ok(row)
    }

    /// Where `wire` (serialized from `request`) departs from the route's previous observed
    /// request, named in the caller's terms, and who made the rewrite: what a loop asks
    /// before sending. Changes nothing (the meter included).
    ///
    /// ```
    /// use mektpoy::agent::Cause;
    /// use mektpoy::{AgentLoop, Config, Message, Session, ToolSchema, route_for};
    /// // A chat route without a tool-change mode: its tools are declared in `tools`.
    /// let config = Config::new("acme", "acme-1");
    /// let tool = |n: &str| ToolSchema::no_input(n, "");
    /// let mut agent = AgentLoop::builder(Session::new("s"), route_for("acme", "acme-1"))
    ///     .config(config)
    ///     .tools([tool("read"), tool("shell")])
    ///     .build()?;
    /// let first = agent.user_turn([Message::user("u1", "hi")])?.to_wire()?;
    /// agent.observe(&first)?;
    /// agent.append(Message::assistant("a1", "ok", "acme", "acme-1"))?;
    /// agent.set_tools([tool("read")])?;
    /// let request = agent.user_turn([Message::user("u2", "go on")])?;
    /// let a = agent.attribute(&request, &request.to_wire()?)?;
    /// assert_eq!(a.cause, Some(Cause::ToolsChanged));
    /// assert!(a.to_string().contains("tool `shell` removed by the caller"), "{a}");
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`MeterError::Body`] for a body that is not a request body.
    pub fn attribute(
        &self,
        request: &Request,
        wire: &WireRequest,
    ) -> Result<Attribution, MeterError> {
        let mut attribution = self
            .attributor
            .attribute(&self.meter, Some(request), wire)?;
        attribution.position = Some((self.turn, self.step, self.attempt));
        Ok(attribution)
    }

    /// The attribution of every observed request, in order.
    ///
    /// ```
    /// use mektpoy::{AgentLoop, Message, Session, route_for};
    /// let route = route_for("deepseek", "deepseek-flash");
    /// let mut agent = AgentLoop::builder(Session::new("s"), route)
    ///     .option("max_tokens", 64.into())
    ///     .build()?;
    /// let wire = agent.user_turn([Message::user("u1", "hi")])?.to_wire()?;
    /// agent.observe(&wire)?;
    /// assert_eq!(agent.attributions().len(), 1);
    /// // The first request of a route departs from nothing: no cause.
    /// assert_eq!(agent.attributions()[0].cause, None);
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
    pub fn attributions(&self) -> &[Attribution] {
        self.attributor.attributions()
    }

    /// The session's report: per cause, how many observed requests departed from the
    /// previous one and how many estimated tokens that lost.
    ///
    /// ```
    /// use mektpoy::{AgentLoop, ContentBlock, Message, Session, route_for};
    /// let route = route_for("deepseek", "deepseek-flash");
    /// let mut agent = AgentLoop::builder(Session::new("s"), route)
    ///     .option("max_tokens", 64.into())
    ///     .build()?;
    /// for (i, text) in ["hi", "go on"].into_iter().enumerate() {
    ///     let wire = agent.user_turn([Message::user(format!("u{i}"), text)])?.to_wire()?;
    ///     agent.observe(&wire)?;
    ///     agent.append(agent.assistant(format!("a{i}"), [ContentBlock::text("ok")]))?;
    /// }
    /// // Two turns that only appended: nothing departed, nothing was lost.
    /// let report = agent.attribution_report();
    /// assert_eq!(report.requests, 2);
    /// assert_eq!(report.lost_by_caller() + report.lost_otherwise(), 0);
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
    pub fn attribution_report(&self) -> AttributionReport {
        self.attributor.report()
    }

    /// Puts the provider's measured figures (the answer's usage) beside the estimate of the
    /// request observed last; the row then says whether the measured cache read falls short
    /// of the estimate by more than a cache block (`MeterRow::unexplained_miss`).
    ///
    /// ```
    /// use mektpoy::response::decode_chat;
    /// use mektpoy::{AgentLoop, Message, Session, route_for};
    /// let route = route_for("deepseek", "deepseek-flash");
    /// let mut agent = AgentLoop::builder(Session::new("s"), route)
    ///     .option("max_tokens", 64.into())
    ///     .build()?;
    /// let wire = agent.user_turn([Message::user("u1", "hi")])?.to_wire()?;
    /// agent.observe(&wire)?;
    /// let body = r#"{"id":"r1","model":"deepseek-flash","choices":[{"index":0,
    ///   "message":{"role":"assistant","content":"hello"},"finish_reason":"stop"}],
    ///   "usage":{"prompt_tokens":12,"completion_tokens":2,"prompt_cache_hit_tokens":0,
    ///   "prompt_cache_miss_tokens":12}}"#;
    /// let answer = decode_chat(body, "deepseek", None)?;
    /// let row = agent.observe_usage(&answer.usage.unwrap())?;
    /// assert_eq!(row.measured.map(|m| m.prompt_tokens), Some(12));
    /// // One usage per request.
    /// assert!(agent.observe_usage(&answer.usage.unwrap()).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`MeterError::NoRequest`] before any observed request, [`MeterError::AlreadyMeasured`]
    /// for a second usage of one request.
    pub fn observe_usage(&mut self, usage: &Usage) -> Result<MeterRow, MeterError> {
        self.meter.observe_usage(usage)
    }

    /// Checks a tool call the model made in answer to the loop's last request: its name must
    /// be one of that request's effective tools. Before the loop has recorded a request (a
    /// restart with calls left pending), the request is the log's last one for the loop's
    /// provider and model, so that calls made before a kill are checked as they were made.
    ///
    /// ```
    /// use mektpoy::{AgentLoop, Config, Message, Session, ToolSchema, route_for};
    /// let config = Config::new("deepseek", "deepseek-flash");
    /// let route = route_for("deepseek", "deepseek-flash");
    /// let mut agent = AgentLoop::builder(Session::new("s"), route.clone()).config(config.clone())
    ///     .tools([ToolSchema::no_input("read", "Read a file")])
    ///     .build()?;
    /// agent.user_turn([Message::user("u1", "hi")])?;
    /// let reopened = AgentLoop::builder(agent.into_session(), route).config(config).build()?;
    /// assert!(reopened.validate_tool_call("read").is_ok());
    /// assert!(reopened.validate_tool_call("shell").is_err());
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`UnknownTool`] for an empty, reserved or not effective name (every name, before any
    /// request exists).
    pub fn validate_tool_call(&self, name: &str) -> Result<(), UnknownTool> {
        if let Some(request) = &self.last_recorded {
            return request.validate_tool_call(name);
        }
        match last_header(self.session.borrow(), &self.config) {
            Some(h) => validate_tool_name(name, &h.header.tools),
            None => validate_tool_name(name, &[]),
        }
    }

    /// What the loop does next, from the log alone ([`Session::position`]): after a restart,
    /// [`retry`](Self::retry) on `Resend`, run the calls and [`next_step`](Self::next_step) on
    /// `RunTools`, `next_step` on `Continue`, [`user_turn`](Self::user_turn) otherwise.
    ///
    /// ```
    /// use mektpoy::session::Position;
    /// use mektpoy::{AgentLoop, ContentBlock, Message, Session, route_for};
    /// let route = route_for("deepseek", "deepseek-flash");
    /// let mut agent = AgentLoop::builder(Session::new("s"), route).build()?;
    /// assert_eq!(agent.position(), Position::Start);
    /// agent.user_turn([Message::user("u1", "hi")])?;
    /// assert_eq!(agent.position(), Position::Resend, "no answer yet");
    /// agent.append(agent.assistant("a1", [ContentBlock::text("hello")]))?;
    /// assert_eq!(agent.position(), Position::AwaitUser);
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
    pub fn position(&self) -> Position {
        self.session.borrow().position()
    }

    /// The session.
    ///
    /// ```
    /// use mektpoy::{AgentLoop, Message, Session, route_for};
    /// let route = route_for("deepseek", "deepseek-flash");
    /// let mut agent = AgentLoop::builder(Session::new("s1"), route).build()?;
    /// agent.user_turn([Message::user("u1", "hi")])?;
    /// assert_eq!(agent.session().id(), "s1");
    /// assert_eq!(agent.session().messages().len(), 1);
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
    pub fn session(&self) -> &Session {
        self.session.borrow()
    }

    /// The route the loop sends to.
    ///
    /// ```
    /// use mektpoy::{AgentLoop, Session, route_for};
    /// let agent = AgentLoop::builder(Session::new("s"), route_for("anthropic", "claude-opus-5"))
    ///     .build()?;
    /// assert_eq!(agent.route().provider, "anthropic");
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
    pub fn route(&self) -> &Route {
        &self.route
    }

    /// The configuration of the next attempts.
    ///
    /// ```
    /// use mektpoy::{AgentLoop, Session, route_for};
    /// let agent = AgentLoop::builder(Session::new("s"), route_for("deepseek", "deepseek-flash"))
    ///     .option("max_tokens", 256.into())
    ///     .build()?;
    /// assert_eq!((agent.config().provider.as_str(), agent.config().model.as_str()), ("deepseek", "deepseek-flash"));
    /// assert_eq!(agent.config().extra()["max_tokens"], 256);
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The effective tools of the next attempts.
    ///
    /// ```
    /// use mektpoy::{AgentLoop, Session, ToolSchema, route_for};
    /// let read = ToolSchema::no_input("read", "Read a file");
    /// let agent = AgentLoop::builder(Session::new("s"), route_for("deepseek", "deepseek-flash"))
    ///     .tools([read.clone()])
    ///     .build()?;
    /// assert_eq!(agent.tools(), &[read]);
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
    pub fn tools(&self) -> &[ToolSchema] {
        &self.tools
    }

    /// The system prompt of the next attempts.
    ///
    /// ```
    /// use mektpoy::{AgentLoop, Session, route_for};
    /// let agent = AgentLoop::builder(Session::new("s"), route_for("deepseek", "deepseek-flash"))
    ///     .system_prompt("Be brief.")
    ///     .build()?;
    /// assert_eq!(agent.system_prompt(), "Be brief.");
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
    pub fn system_prompt(&self) -> &str {
        &self.system_prompt
    }

    /// The current turn: 0 before the first user turn.
    ///
    /// ```
    /// use mektpoy::{AgentLoop, Message, Session, route_for};
    /// let route = route_for("deepseek", "deepseek-flash");
    /// let mut agent = AgentLoop::builder(Session::new("s"), route).build()?;
    /// assert_eq!(agent.turn(), 0);
    /// agent.user_turn([Message::user("u1", "hi")])?;
    /// assert_eq!(agent.turn(), 1);
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
    pub fn turn(&self) -> u64 {
        self.turn
    }

    /// The current step within the turn: 0 before the turn's first step.
    ///
    /// ```
    /// use mektpoy::{AgentLoop, Message, Session, route_for};
    /// let route = route_for("deepseek", "deepseek-flash");
    /// let mut agent = AgentLoop::builder(Session::new("s"), route).build()?;
    /// assert_eq!(agent.step(), 0);
    /// agent.user_turn([Message::user("u1", "hi")])?;
    /// assert_eq!(agent.step(), 1);
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
    pub fn step(&self) -> u64 {
        self.step
    }

    /// The current attempt of the step: 0 for its first.
    ///
    /// ```
    /// use mektpoy::{AgentLoop, Message, Session, route_for};
    /// let route = route_for("deepseek", "deepseek-flash");
    /// let mut agent = AgentLoop::builder(Session::new("s"), route).build()?;
    /// agent.user_turn([Message::user("u1", "hi")])?;
    /// agent.retry()?;
    /// assert_eq!(agent.attempt(), 1);
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// The loop's meter: one row per observed request.
    ///
    /// ```
    /// use mektpoy::{AgentLoop, Message, Session, route_for};
    /// let route = route_for("deepseek", "deepseek-flash");
    /// let mut agent = AgentLoop::builder(Session::new("s"), route)
    ///     .option("max_tokens", 64.into())
    ///     .build()?;
    /// let wire = agent.user_turn([Message::user("u1", "hi")])?.to_wire()?;
    /// agent.observe(&wire)?;
    /// assert_eq!(agent.meter().rows()[0].cached_bytes, 0, "the first request reads nothing");
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
    pub fn meter(&self) -> &Meter {
        &self.meter
    }

    /// The session back, ending the loop.
    ///
    /// ```
    /// use mektpoy::{AgentLoop, Message, Session, route_for};
    /// let route = route_for("deepseek", "deepseek-flash");
    /// let mut agent = AgentLoop::builder(Session::new("s"), route).build()?;
    /// agent.user_turn([Message::user("u1", "hi")])?;
    /// let session: Session = agent.into_session();
    /// assert_eq!(session.messages().len(), 1);
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
    pub fn into_session(self) -> S {
        self.session
    }
}

/// The log's last header for `config`'s provider and model, else its last header.
/// O(events after it).
fn last_header(session: &Session, config: &Config) -> Option<Arc<crate::event::HeaderEvent>> {
    let latest = session.request_header()?.1;
    if latest.header.config.provider == config.provider
        && latest.header.config.model == config.model
    {
        return Some(latest);
    }
    let events = session.events();
    let own = events.iter().rev().find_map(|e| match e {
        Event::Header(h)
            if h.header.config.provider == config.provider
                && h.header.config.model == config.model =>
        {
            Some(Arc::clone(h))
        }
        _ => None,
    });
    Some(own.unwrap_or(latest))
}

/// The last turn and step the session's messages carry, (0, 0) when none does. A turn whose
/// messages carry no step (the user's messages of a turn killed before its answer) is at its
/// first step.
fn last_position(session: &Session) -> (u64, u64) {
    let events = session.events();
    let mut stamps = events.iter().rev().filter_map(|e| match e {
        Event::Message(m) => m.turn.map(|t| (t, m.step)),
        _ => None,
    });
    let Some((turn, step)) = stamps.next() else {
        return (0, 0);
    };
    let step = step.or_else(|| stamps.take_while(|(t, _)| *t == turn).find_map(|(_, s)| s));
    (turn, step.unwrap_or(1))
}
