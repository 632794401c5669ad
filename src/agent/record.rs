//! `Recorder`: logs one request per loop attempt ([reference
//! §4](crate::manual::reference#4-recording-a-request)).
//!
//! Everything one `record` call appends — system node, user messages, header, developer
//! message — is one batch: computed and validated under the session's write lock on a working
//! copy, then committed (and written with one write) whole, or not at all.

use std::collections::HashSet;
use std::fmt;
use std::sync::Arc;

use super::Request;
use super::continuity::{self, Memory};
use super::order::Orderer;
use super::prompt::{PromptChange, PromptNodes, prompt_change_at};
use crate::event::{
    Config, Event, HeaderEvent, MessageEvent, Reason, RequestHeader, SeriesStart, SurfaceOp,
};
use crate::history::{FoldKind, ToolFold};
use crate::route::{Route, ToolRefused};
use crate::session::{AppendError, Session, Transaction};
use crate::vocab::{ContentBlock, Message, MessageSource, Role, Seq, ToolSchema, same_tools};

/// One attempt of one loop step: what [`Recorder::record`] logs.
///
/// [`AgentLoop`](super::AgentLoop) builds these itself and counts turn, step and attempt;
/// build one by hand to replay a recorded loop (`Step::new(..).at(turn, step, attempt)`).
///
/// ```
/// use mektpoy::agent::{Recorder, Step};
/// use mektpoy::{Config, Message, Session, route_for};
/// let session = Session::new("s");
/// let mut recorder = Recorder::attach(&session);
/// let (config, route) = (Config::new("deepseek", "deepseek-flash"), route_for("deepseek", "deepseek-flash"));
/// let user = [Message::user("u1", "hi")];
/// let step = Step::new(&config, "Be brief.", &[], &route).at(1, 1, 0).user_messages(&user);
/// assert_eq!((step.turn, step.step, step.attempt), (1, 1, 0));
/// let request = recorder.record(&session, step)?;
/// assert_eq!(request.messages.len(), 2, "the system prompt node and the user's message");
/// # Ok::<(), mektpoy::agent::RecordError>(())
/// ```
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct Step<'a> {
    /// The request configuration; this is what the header logs.
    pub config: &'a Config,
    /// The rendered system prompt.
    pub system_prompt: &'a str,
    /// The effective tools, in the order they are declared.
    pub tools: &'a [ToolSchema],
    /// The route the request goes to: supplies capabilities only.
    pub route: &'a Route,
    /// The loop asks for a new request series (honoured on attempt 0 only).
    pub new_series: bool,
    /// The loop turn.
    pub turn: u64,
    /// The step within the turn.
    pub step: u64,
    /// The attempt of this step (0 first, retries after).
    pub attempt: u32,
    /// Messages the user added for this step (appended on attempt 0 only).
    pub user_messages: &'a [Message],
}

impl<'a> Step<'a> {
    /// Attempt 0 of step 0 of turn 0, no new series, no user messages.
    ///
    /// ```
    /// use mektpoy::agent::Step;
    /// use mektpoy::{Config, ToolSchema, route_for};
    /// let (config, route) = (Config::new("deepseek", "deepseek-flash"), route_for("deepseek", "deepseek-flash"));
    /// let tools = [ToolSchema::no_input("read", "")];
    /// let step = Step::new(&config, "", &tools, &route);
    /// assert_eq!((step.turn, step.step, step.attempt, step.new_series), (0, 0, 0, false));
    /// assert!(step.user_messages.is_empty());
    /// ```
    pub fn new(
        config: &'a Config,
        system_prompt: &'a str,
        tools: &'a [ToolSchema],
        route: &'a Route,
    ) -> Self {
        Step {
            config,
            system_prompt,
            tools,
            route,
            new_series: false,
            turn: 0,
            step: 0,
            attempt: 0,
            user_messages: &[],
        }
    }

    /// The loop position of this attempt.
    ///
    /// ```
    /// use mektpoy::agent::Step;
    /// use mektpoy::{Config, route_for};
    /// let (config, route) = (Config::new("deepseek", "deepseek-flash"), route_for("deepseek", "deepseek-flash"));
    /// let retry = Step::new(&config, "", &[], &route).at(3, 2, 1);
    /// assert_eq!((retry.turn, retry.step, retry.attempt), (3, 2, 1));
    /// ```
    #[must_use]
    pub fn at(mut self, turn: u64, step: u64, attempt: u32) -> Self {
        self.turn = turn;
        self.step = step;
        self.attempt = attempt;
        self
    }

    /// Whether the loop asks for a new request series (honoured on attempt 0 only).
    ///
    /// ```
    /// use mektpoy::agent::{Recorder, Step};
    /// use mektpoy::event::SeriesStart;
    /// use mektpoy::{Config, Message, Session, route_for};
    /// let session = Session::new("s");
    /// let mut recorder = Recorder::attach(&session);
    /// let (config, route) = (Config::new("deepseek", "deepseek-flash"), route_for("deepseek", "deepseek-flash"));
    /// let step = |turn| Step::new(&config, "", &[], &route).at(turn, 1, 0);
    /// recorder.record(&session, step(1))?;
    /// session.append(mektpoy::Event::append(Message::assistant("a1", "ok", "deepseek", "deepseek-flash")))?;
    /// let request = recorder.record(&session, step(2).new_series(true))?;
    /// assert_eq!(request.series_start, Some(SeriesStart::Asked));
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
    #[must_use]
    pub fn new_series(mut self, new_series: bool) -> Self {
        self.new_series = new_series;
        self
    }

    /// The messages the user added for this step (appended on attempt 0 only).
    ///
    /// ```
    /// use mektpoy::agent::{Recorder, Step};
    /// use mektpoy::{Config, Message, Session, route_for};
    /// let session = Session::new("s");
    /// let (config, route) = (Config::new("deepseek", "deepseek-flash"), route_for("deepseek", "deepseek-flash"));
    /// let user = [Message::user("u1", "hi")];
    /// Recorder::attach(&session).record(&session, Step::new(&config, "", &[], &route).user_messages(&user))?;
    /// assert_eq!(session.messages().len(), 1);
    /// # Ok::<(), mektpoy::agent::RecordError>(())
    /// ```
    #[must_use]
    pub fn user_messages(mut self, messages: &'a [Message]) -> Self {
        self.user_messages = messages;
        self
    }
}

/// Why `record` refused. The log, the file and the recorder are unchanged.
///
/// ```
/// use mektpoy::agent::{RecordError, Recorder, Step};
/// use mektpoy::{Config, Session, route_for};
/// let (one, other) = (Session::new("one"), Session::new("other"));
/// let mut recorder = Recorder::attach(&one);
/// let (config, route) = (Config::new("deepseek", "deepseek-flash"), route_for("deepseek", "deepseek-flash"));
/// let refused = recorder.record(&other, Step::new(&config, "", &[], &route)).unwrap_err();
/// assert!(matches!(refused, RecordError::WrongSession { .. }));
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecordError {
    /// The session is not the one this recorder was attached to.
    #[error("this recorder is attached to session {attached}, not to {given}")]
    WrongSession {
        /// The attached session's id.
        attached: String,
        /// The given session's id.
        given: String,
    },
    /// The route cannot send one of the step's tools (a name or schema its provider refuses,
    /// the reserved placeholder name, a repeated name): logged, it would fail every later
    /// request of its declaration series.
    #[error(transparent)]
    Tool(#[from] ToolRefused),
    /// The session refused an event of the batch; its `Display` is the refusal's.
    #[error(transparent)]
    Append(#[from] AppendError),
}

type IdGenerator = Box<dyn FnMut(&str, Seq) -> String + Send>;

/// The id the recorder gives a message it writes when the loop supplies no ids.
pub(super) fn default_id(session_id: &str, seq: Seq) -> String {
    format!("{session_id}:{seq}")
}

/// Records requests of one loop instance into one session.
///
/// [`AgentLoop`](super::AgentLoop) owns one and is what a loop calls; the recorder itself
/// is for replaying a recorded loop attempt by attempt.
///
/// ```
/// use mektpoy::agent::{Recorder, Step};
/// use mektpoy::{Config, Message, Route, Session, ToolSchema, route::WireApi};
/// let session = Session::new("s1");
/// let mut recorder = Recorder::attach(&session);
/// let config = Config::new("deepseek", "deepseek-flash");
/// let route = Route::plain("deepseek", "deepseek-flash", WireApi::Messages);
/// let tools = [ToolSchema::no_input("read", "read a file")];
/// let user = [Message::user("u1", "hi")];
/// let step = Step::new(&config, "be brief", &tools, &route).at(1, 1, 0).user_messages(&user);
/// let request = recorder.record(&session, step)?;
/// assert_eq!(request.header_seq.map(|s| s.0), Some(2)); // system node, user, header
/// assert!(request.starts_series);
/// # Ok::<(), mektpoy::agent::RecordError>(())
/// ```
pub struct Recorder {
    session: u64,
    session_id: String,
    generation: u64,
    logged_header: bool,
    ids: Option<IdGenerator>,
    /// Each route's previous request, for rewrite detection and the caching lookback.
    memory: Memory,
    /// The order the tools are logged in, and the first-seen ranks (`order.rs`).
    pub(super) tool_order: Orderer,
    /// Whether the serializer resumes from the route's previous request (always, except in
    /// the tests that compare with a recorder that does not).
    resume: bool,
    /// The prompt nodes of the surface as the last committed batch found it, and its
    /// generation: within a generation the surface only grows, so the next batch scans only
    /// the nodes after them.
    prompts: Option<(u64, PromptNodes)>,
}

impl fmt::Debug for Recorder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Recorder")
            .field("session", &self.session_id)
            .field("generation", &self.generation)
            .field("logged_header", &self.logged_header)
            .finish_non_exhaustive()
    }
}

/// Whether step 5 appends a header.
enum HeaderDecision {
    Append(Reason),
    Keep(Arc<HeaderEvent>),
}

/// [reference §4](crate::manual::reference#4-recording-a-request) step 6: the developer message's
/// blocks, diffed against what the **by-value** fold had available (and had resolved for each name)
/// just before the new header, which heals a log whose earlier record was cut between header and
/// developer message. Additions, then removals, then redefinitions; `None` when nothing changed.
fn tool_diff(
    tools: &[ToolSchema],
    previous: &[ToolSchema],
    fold: &ToolFold,
) -> Option<Vec<ContentBlock>> {
    let kept: HashSet<&str> = tools.iter().map(ToolSchema::name).collect();
    let additions = tools
        .iter()
        .map(ToolSchema::name)
        .filter(|n| !fold.is_available(n));
    let mut removed = HashSet::new();
    let removals: Vec<&str> = previous
        .iter()
        .map(ToolSchema::name)
        .chain(fold.available_in_declared_order())
        .filter(|n| fold.is_available(n) && !kept.contains(n) && removed.insert(*n))
        .collect();
    let redefinitions = tools.iter().filter(|t| {
        fold.is_available(t.name()) && fold.declared(t.name()).is_some_and(|d| !d.same_tool(t))
    });
    // An empty name makes no block: the header naming it is refused in the same batch
    // (`EmptyToolName`), so nothing of this diff is written anyway.
    let content: Vec<ContentBlock> = additions
        .filter_map(|n| ContentBlock::addition(n).ok())
        .chain(
            removals
                .into_iter()
                .filter_map(|n| ContentBlock::removal(n).ok()),
        )
        .chain(redefinitions.filter_map(|t| ContentBlock::redefinition(t.name()).ok()))
        .collect();
    (!content.is_empty()).then_some(content)
}

/// What one batch decided, returned out of the transaction and applied to the recorder only
/// after the commit.
struct Outcome {
    request: Request,
    g_after: u64,
    logged_header: bool,
    fingerprint: Option<continuity::Remembered>,
}

impl Recorder {
    /// A recorder for `session`: remembers its surface generation and that it has logged no
    /// header yet.
    ///
    /// ```
    /// use mektpoy::agent::{Recorder, Step};
    /// use mektpoy::{Config, Session, route_for};
    /// let session = Session::new("s");
    /// let mut recorder = Recorder::attach(&session);
    /// let (config, route) = (Config::new("deepseek", "deepseek-flash"), route_for("deepseek", "deepseek-flash"));
    /// let request = recorder.record(&session, Step::new(&config, "", &[], &route).at(1, 1, 0))?;
    /// assert!(request.starts_series, "the session's first header");
    /// # Ok::<(), mektpoy::agent::RecordError>(())
    /// ```
    pub fn attach(session: &Session) -> Self {
        Recorder {
            session: session.instance(),
            session_id: session.id().to_owned(),
            generation: session.surface_generation(),
            logged_header: false,
            ids: None,
            memory: Memory::default(),
            tool_order: Orderer::default(),
            resume: true,
            prompts: None,
        }
    }

    /// Uses `ids` for the messages the recorder creates instead of `"{session id}:{seq}"`.
    ///
    /// `ids` is called while the batch holds the session's write lock (an id is drawn only
    /// for a message the batch actually writes), so **it must not call into the same
    /// session**: that would wait on the lock forever. A UUID or a counter is what it is for.
    /// **A refused batch still consumed the ids it drew.**
    ///
    /// ```
    /// use mektpoy::agent::{Recorder, Step};
    /// use mektpoy::{Config, Session, route_for};
    /// let session = Session::new("s");
    /// let mut next = 0;
    /// let mut recorder = Recorder::attach(&session).with_ids(move || { next += 1; format!("id-{next}") });
    /// let (config, route) = (Config::new("deepseek", "deepseek-flash"), route_for("deepseek", "deepseek-flash"));
    /// let request = recorder.record(&session, Step::new(&config, "Be brief.", &[], &route))?;
    /// assert_eq!(request.messages[0].id(), "id-1", "the system prompt node the recorder wrote");
    /// # Ok::<(), mektpoy::agent::RecordError>(())
    /// ```
    #[must_use]
    pub fn with_ids(mut self, mut ids: impl FnMut() -> String + Send + 'static) -> Self {
        self.ids = Some(Box::new(move |_: &str, _: Seq| ids()));
        self
    }

    /// [`with_ids`](Self::with_ids), where `ids` also gets the session id and the `Seq` the
    /// message will take: what a replay needs to name a message as a recording would.
    #[must_use]
    pub(super) fn with_ids_at(
        mut self,
        ids: impl FnMut(&str, Seq) -> String + Send + 'static,
    ) -> Self {
        self.ids = Some(Box::new(ids));
        self
    }

    /// Records one attempt of one step ([reference
    /// §4](crate::manual::reference#4-recording-a-request)) and returns the request to send.
    ///
    /// ```
    /// use mektpoy::agent::{RecordError, Recorder, Step};
    /// use mektpoy::{Config, Session, ToolSchema, route_for};
    /// let session = Session::new("s");
    /// let mut recorder = Recorder::attach(&session);
    /// let (config, route) = (Config::new("anthropic", "claude-opus-5"), route_for("anthropic", "claude-opus-5"));
    /// let tools = [ToolSchema::no_input("read", "")];
    /// let request = recorder.record(&session, Step::new(&config, "", &tools, &route))?;
    /// assert_eq!(request.tools.len(), 1);
    /// // A name the route refuses is never logged.
    /// let mcp = [ToolSchema::no_input("github.search", "")];
    /// assert!(matches!(recorder.record(&session, Step::new(&config, "", &mcp, &route)), Err(RecordError::Tool(_))));
    /// # Ok::<(), RecordError>(())
    /// ```
    ///
    /// # Errors
    /// [`RecordError::WrongSession`] for a session other than the attached one;
    /// [`RecordError::Tool`] when the route refuses one of `tools` ([`Route::check_tools`]);
    /// [`RecordError::Append`] when the session refuses an event of the batch (e.g. two tools
    /// with one name, a duplicate user message id, a failed write). Nothing is committed then.
    pub fn record(&mut self, session: &Session, step: Step<'_>) -> Result<Request, RecordError> {
        if session.instance() != self.session {
            return Err(RecordError::WrongSession {
                attached: self.session_id.clone(),
                given: session.id().to_owned(),
            });
        }
        // Before anything compares or logs the tools, so that order churn never reaches the log.
        let tools = self.tool_order.apply(session, step.tools);
        let step = Step {
            tools: &tools,
            ..step
        };
        step.route.check_tools(step.tools)?;
        Ok(self.commit(session, &step)?)
    }

    /// [`record`](Self::record) for the loop that attached this recorder to its session and
    /// checked its tools against its route as they were set: nothing is left for it to meet
    /// but the session's refusal.
    pub(super) fn record_admitted(
        &mut self,
        session: &Session,
        step: Step<'_>,
    ) -> Result<Request, AppendError> {
        let tools = self.tool_order.apply(session, step.tools);
        let step = Step {
            tools: &tools,
            ..step
        };
        self.commit(session, &step)
    }

    /// Logs the batch of an admitted step and remembers its prepared request.
    fn commit(&mut self, session: &Session, step: &Step<'_>) -> Result<Request, AppendError> {
        let outcome = session.transact(|tx| self.batch(tx, step))?;
        self.generation = outcome.g_after;
        self.logged_header |= outcome.logged_header;
        if let Some(mut fp) = outcome.fingerprint {
            if !self.resume {
                fp.resume = None;
            }
            self.memory.prepared(step.route.clone(), fp);
        }
        Ok(outcome.request)
    }

    /// A recorder whose serializer never resumes: the reference the incremental path is
    /// compared with.
    #[cfg(test)]
    pub(super) fn set_resume(&mut self, resume: bool) {
        self.resume = resume;
    }

    /// The fingerprint of the route's accepted previous request: what rewrite detection compares
    /// the next request with (for the invariant test of [decision
    /// 106](crate::manual::decisions#decision-106)).
    #[cfg(test)]
    pub(crate) fn accepted_fingerprint(&self, route: &Route) -> Option<&crate::wire::Fingerprint> {
        self.memory.accepted(route)?.fingerprint.as_ref()
    }

    /// The number of messages the serializer would resume after on `route`, if any.
    #[cfg(test)]
    pub(super) fn resumable_messages(&self, route: &Route) -> Option<usize> {
        let r = self.memory.latest(route)?;
        r.resume.as_ref().map(crate::wire::Resume::len)
    }

    fn next_id(&mut self, session_id: &str, seq: Seq) -> String {
        match &mut self.ids {
            Some(ids) => ids(session_id, seq),
            None => default_id(session_id, seq),
        }
    }

    fn batch(&mut self, tx: &mut Transaction<'_>, step: &Step<'_>) -> Result<Outcome, AppendError> {
        let session_id = self.session_id.clone();
        // 1.
        let asked = step.new_series && step.attempt == 0;
        let g_prev = self.generation;
        let g_now = tx.state().generation();
        let previous = tx.state().latest_header().cloned();
        // 2. A tool change on a route without a mode rewrites the declarations anyway, so it
        // lets the prompt projection treat the step as a new series.
        let tools_changed = previous
            .as_ref()
            .is_some_and(|(_, h)| !same_tools(&h.header.tools, step.tools));
        let prompt_series =
            asked || g_now != g_prev || (step.route.tool_update().is_none() && tools_changed);
        let mut prompt_replaced = false;
        let known = self
            .prompts
            .take()
            .filter(|(generation, _)| self.resume && *generation == g_now)
            .map(|(_, nodes)| nodes);
        let nodes = known.unwrap_or_default().extended(tx.state().surface());
        let change = prompt_change_at(
            &nodes,
            step.system_prompt,
            step.route.system_prompt_in_history(),
            prompt_series,
        );
        self.prompts = Some((g_now, nodes));
        if let Some(change) = change {
            let seq = tx.next_seq();
            let id = self.next_id(&session_id, seq);
            let (text, op) = match change {
                PromptChange::Append(text) => (text, SurfaceOp::Append),
                PromptChange::Replace { index, text } => (
                    {
                        prompt_replaced = true;
                        text
                    },
                    SurfaceOp::Replace {
                        start: index,
                        end: index,
                    },
                ),
            };
            let content = if text.is_empty() {
                Vec::new()
            } else {
                vec![ContentBlock::text(text)]
            };
            let node = Message::new(id, Role::System, content, MessageSource::SystemPrompt);
            tx.push(self.stamped(node, step, true, op))?;
        }
        // 3.
        if step.attempt == 0 {
            for m in step.user_messages {
                tx.push(self.stamped(m.clone(), step, false, SurfaceOp::Append))?;
            }
        }
        // 4.
        let g_after = tx.state().generation();
        let starts_series = asked || g_after != g_prev;
        // 5.
        let header = RequestHeader::new(step.config.clone(), step.tools.to_vec());
        let decision = match &previous {
            None => HeaderDecision::Append(Reason::Initial),
            Some(_) if !self.logged_header => HeaderDecision::Append(Reason::Resume),
            Some((_, h)) if h.header != header => HeaderDecision::Append(Reason::Change),
            Some(_) if starts_series => HeaderDecision::Append(Reason::Series),
            Some((_, h)) => HeaderDecision::Keep(Arc::clone(h)),
        };
        let kind = if step.route.inline_definitions() {
            FoldKind::ByValue
        } else {
            FoldKind::ByReference
        };
        let mut tool_change = None;
        let (latest, header_seq, series_start) = match decision {
            HeaderDecision::Keep(h) => (h, None, None),
            HeaderDecision::Append(reason) => {
                let event = Arc::new(HeaderEvent {
                    header,
                    reason,
                    starts_series: starts_series && reason != Reason::Series,
                });
                // The route's fold as of just before this header says whether it redeclares;
                // the by-value fold's availability drives step 6.
                let by_value = tx.fold(FoldKind::ByValue);
                let redeclares = match kind {
                    FoldKind::ByValue => by_value.opens_declaration_series(&event),
                    FoldKind::ByReference => tx.fold(kind).opens_declaration_series(&event),
                };
                let series_start = if previous.is_none() {
                    Some(SeriesStart::First)
                } else if asked {
                    Some(SeriesStart::Asked)
                } else if g_now != g_prev {
                    Some(SeriesStart::Rewound)
                } else if prompt_replaced {
                    Some(SeriesStart::PromptReplaced)
                } else if redeclares {
                    Some(SeriesStart::Redeclared)
                } else {
                    None
                };
                let seq = tx.push(Event::Header(Arc::clone(&event)))?;
                // 6.
                if let (true, Some((_, prev))) = (reason != Reason::Series, &previous) {
                    let diff = tool_diff(step.tools, &prev.header.tools, &by_value);
                    if let Some(content) = diff {
                        let names_header = content.iter().any(|b| {
                            matches!(
                                b,
                                ContentBlock::ToolAddition(_) | ContentBlock::ToolRedefinition(_)
                            )
                        });
                        let id = self.next_id(&session_id, tx.next_seq());
                        let message = Message::developer(id, content);
                        tool_change = Some(message.clone());
                        let mut event = self.stamped(message, step, true, SurfaceOp::Append);
                        if let Event::Message(m) = &mut event {
                            m.header_seq = names_header.then_some(seq);
                        }
                        tx.push(event)?;
                    }
                }
                (event, Some(seq), series_start)
            }
        };
        // 7.
        let view = tx.view(kind);
        let mut request = Request {
            config: latest.header.config.clone(),
            messages: view.messages,
            tools: Arc::clone(&latest.header.tools),
            tool_history: view.tool_history,
            header_seq,
            starts_series: series_start.is_some(),
            series_start,
            by_value: kind == FoldKind::ByValue,
            rewrite: None,
            tool_change,
            route: step.route.clone(),
            origin: super::next_origin(),
            prepared: None,
            cache_key: step
                .route
                .prompt_cache_key()
                .then(|| Arc::from(session_id.as_str())),
        };
        let (remembered, resume, floor_ids) = match self.memory.previous(step.route, step.attempt) {
            Some(r) => (r.fingerprint.as_ref(), r.resume.take(), r.floor_ids.clone()),
            None => (None, None, None),
        };
        let c = continuity::prepare(
            tx, step.route, kind, &request, remembered, resume, floor_ids,
        );
        request.rewrite = c.rewrite;
        request.prepared = c.prepared.map(Arc::new);
        Ok(Outcome {
            request,
            g_after,
            logged_header: header_seq.is_some(),
            fingerprint: c.fingerprint,
        })
    }

    /// A message event carrying the step's turn (and step, for nodes the recorder writes).
    fn stamped(&self, message: Message, step: &Step<'_>, with_step: bool, op: SurfaceOp) -> Event {
        Event::Message(MessageEvent {
            turn: Some(step.turn),
            step: with_step.then_some(step.step),
            ..MessageEvent::new(message, Some(op))
        })
    }
}
