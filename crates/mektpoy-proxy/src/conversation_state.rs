//! One conversation in memory: its loop over the stored log, and what a client request does
//! to it (the heart of the proxy: a stateless request into the append-only log).

use mektpoy::agent::ToolOrder;
use mektpoy::event::Event;
use mektpoy::meter::{Meter, MeterReport, Price};
use mektpoy::route::Route;
use mektpoy::session::{FileOptions, SurfaceNode};
use mektpoy::vocab::Role;
use mektpoy::{AgentLoop, Config, Message, Session, WireRequest, route_for};

use crate::store::Store;
use crate::translate::{self, ClientRequest, Invalid, Plan};

/// A conversation's loop, and the counterfactual: the same vendor cache model run on the
/// bodies the client sent, as they would have gone upstream without the proxy.
#[derive(Debug)]
pub struct Conversation {
    agent: AgentLoop,
    direct: Meter,
    memo: translate::Memo,
    /// What the last prepared request did to the log, for its log line.
    outcome: &'static str,
    /// Where the log is kept, to undo what a refused request wrote.
    store: Store,
    key: String,
    /// Where the stored log ends (its sink's).
    end: std::sync::Arc<std::sync::atomic::AtomicU64>,
    /// A refused request's events were cut from the store: the copy in memory is ahead of it,
    /// and the conversation is loaded again. How many events the store kept.
    stale: Option<usize>,
}

/// What the proxy kept cached for a conversation, beside what the client's own bodies would
/// have kept (since this process loaded it).
#[derive(Debug)]
pub struct Report {
    /// The route of the conversation's last request.
    pub route: String,
    /// The crate's estimate and the provider's measured figures, through the proxy.
    pub proxied: MeterReport,
    /// The same model on the client's own bodies.
    pub direct: MeterReport,
    /// Each request that missed part of the cache, and why.
    pub misses: Vec<String>,
}

/// The loop over `session` for `route`: tools keep the place they first had, so a client that
/// sends them in another order does not move the cached prefix (the model gets the same set).
/// The counterfactual meter of a route sending `model`, with the loop's cache facts
/// (`Route::metered_for`, decision 105) and priced as the loop's.
fn direct_meter(route: &Route, model: &str) -> Meter {
    let meter = Meter::new(&route.metered_for(model));
    match Price::for_route(route) {
        Some(price) => meter.with_price(price),
        None => meter,
    }
}

fn new_loop(session: Session, route: Route, config: Config) -> AgentLoop {
    AgentLoop::new(session, route, config).with_tool_order(ToolOrder::FirstSeen)
}

/// Why a request was not prepared.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    /// The client's request cannot be sent (the provider would refuse it, or it is not a
    /// request): a 400 in the provider's error shape.
    #[error("{0}")]
    Invalid(String),
    /// The store failed: a 503, nothing half-logged.
    #[error("the conversation store failed: {0}")]
    Store(String),
}

impl From<Invalid> for Refusal {
    fn from(e: Invalid) -> Self {
        Refusal::Invalid(e.0)
    }
}

impl Conversation {
    /// The conversation `key` from the store, or a new one.
    ///
    /// # Errors
    /// [`Refusal::Store`] when the store fails or holds a log the crate cannot read.
    pub fn load(store: &Store, key: &str, provider: &str, model: &str) -> Result<Self, Refusal> {
        let store_fault = |e: &dyn std::fmt::Display| Refusal::Store(e.to_string());
        let stored = store.load(key).map_err(|e| store_fault(&e))?;
        let sink = store.sink(key).map_err(|e| store_fault(&e))?;
        let end = sink.end();
        let session = match stored {
            Some(bytes) => {
                FileOptions::new()
                    .open_in(&bytes, sink)
                    .map_err(|e| store_fault(&e))?
                    .session
            }
            None => FileOptions::new()
                .create_in(sink, key)
                .map_err(|e| store_fault(&e))?,
        };
        let route = route_for(provider, model);
        let direct = direct_meter(&route, model);
        let agent = new_loop(session, route, Config::new(provider, model));
        Ok(Conversation {
            agent,
            direct,
            memo: translate::Memo::default(),
            outcome: "",
            store: store.clone(),
            key: key.to_owned(),
            end,
            stale: None,
        })
    }

    /// The answers read from this conversation's last request, for reading the next one.
    pub fn memo(&mut self) -> &mut translate::Memo {
        &mut self.memo
    }

    /// What the last request [`prepare`](Self::prepare) took did to the log: `retry` (the
    /// same step again), `extend` (new messages after the logged ones) or `replace` (the client
    /// rewrote its history, a compaction).
    pub fn outcome(&self) -> &'static str {
        self.outcome
    }

    /// The loop.
    pub fn agent(&mut self) -> &mut AgentLoop {
        &mut self.agent
    }

    /// Meters the body the client sent, as the provider would have cached it sent directly.
    pub fn observe_direct(&mut self, client_body: &str) {
        if let Err(e) = self.direct.observe(client_body, None) {
            tracing::debug!(error = %e, "counterfactual meter");
        }
    }

    /// What the proxy kept, beside what the client alone would have.
    pub fn report(&self) -> Report {
        Report {
            route: format!(
                "{}/{}",
                self.agent.route().provider,
                self.agent.route().model
            ),
            proxied: self.agent.meter().report(),
            direct: self.direct.report(),
            misses: self
                .agent
                .attributions()
                .iter()
                .filter(|a| a.lost_tokens > 0)
                .map(ToString::to_string)
                .collect(),
        }
    }

    /// A refused request's events were cut from the store: this copy is ahead of it, and the
    /// holder loads the conversation again.
    pub fn is_stale(&self) -> bool {
        self.stale.is_some()
    }

    /// The conversation holds no event, in the store: a refused request of a conversation it
    /// would have opened leaves it absent.
    pub fn is_empty(&self) -> bool {
        self.stale
            .map_or_else(|| self.agent.session().is_empty(), |kept| kept == 0)
    }

    /// Logs what `client` adds to the conversation and records the request for its route:
    /// the body to send upstream. A refused request changes nothing stored: what it wrote
    /// before the refusal (a compaction's replace, the step recorded before its body was
    /// refused, as a tool list over the provider's limits is) is cut from the store, and this
    /// copy is then [stale](Self::is_stale).
    ///
    /// # Errors
    /// [`Refusal::Invalid`] for what the route cannot send (a tool it refuses, a request the
    /// serializer refuses); [`Refusal::Store`] when a batch is not stored, or what a refused
    /// request wrote cannot be undone.
    pub fn prepare(
        &mut self,
        provider: &str,
        client: ClientRequest,
    ) -> Result<WireRequest, Refusal> {
        use std::sync::atomic::Ordering::Relaxed;
        let (events, end) = (self.agent.session().len(), self.end.load(Relaxed));
        let prepared = self.log_request(provider, client);
        if prepared.is_ok() || self.agent.session().len() == events {
            return prepared;
        }
        self.stale = Some(events);
        let written = self.end.load(Relaxed);
        match self.store.cut_back(&self.key, written, end) {
            Ok(true) => prepared,
            Ok(false) => Err(Refusal::Store(format!(
                "a refused request's events could not be undone: another writer stored a batch \
                 after them ({})",
                prepared.err().map_or_else(String::new, |r| r.to_string())
            ))),
            Err(e) => Err(Refusal::Store(e.to_string())),
        }
    }

    fn log_request(
        &mut self,
        provider: &str,
        client: ClientRequest,
    ) -> Result<WireRequest, Refusal> {
        self.memo.rotate();
        if client.messages.is_empty() {
            return Err(Refusal::Invalid(
                "messages: at least one message is required".into(),
            ));
        }
        let mut config = Config::new(provider, &client.model);
        for (k, v) in client.params {
            config = config.with(k, v);
        }
        if self.agent.config().provider != provider || self.agent.config().model != client.model {
            let session = std::mem::replace(
                &mut self.agent,
                AgentLoop::new(
                    Session::new("-"),
                    route_for(provider, &client.model),
                    config.clone(),
                ),
            )
            .into_session();
            let route = route_for(provider, &client.model);
            self.direct = direct_meter(&route, &client.model);
            self.agent = new_loop(session, route, config);
        } else {
            self.agent.set_config(config);
        }
        self.agent.set_system_prompt(client.system);
        self.agent
            .set_tools(client.tools)
            .map_err(|e| Refusal::Invalid(e.to_string()))?;

        let nodes: Vec<(usize, Message)> = self
            .agent
            .session()
            .surface()
            .iter()
            .enumerate()
            .filter_map(|(i, n)| match n {
                SurfaceNode::Message(m) => Some((i, m.clone())),
                _ => None,
            })
            .collect();
        let last_node = self.agent.session().surface().len().checked_sub(1);
        let fresh = |session: &Session, m: &Message, part: usize| {
            let id = format!("p{}-{part}", session.len());
            let copy = Message::new(id, m.role(), m.content().to_vec(), m.source().clone());
            match m.is_error() {
                Some(e) => copy.with_is_error(e),
                None => copy,
            }
        };
        let new: Vec<Message> = match translate::plan(&client.messages, &nodes) {
            Plan::Retry => {
                self.outcome = "retry";
                let request = self.agent.retry().map_err(record)?;
                return request
                    .into_wire()
                    .map_err(|e| Refusal::Invalid(e.to_string()));
            }
            Plan::Extend { new } => {
                self.outcome = "extend";
                client.messages[new..].to_vec()
            }
            Plan::Replace { client: from, node } => {
                self.outcome = "replace";
                let session = self.agent.session();
                let first = fresh(session, &client.messages[from], 0);
                let end = last_node.unwrap_or(node);
                session
                    .append(Event::replace(first, node, end))
                    .map_err(|e| append(&e))?;
                client.messages[from + 1..].to_vec()
            }
        };
        let session = self.agent.session();
        let new: Vec<Message> = new
            .iter()
            .enumerate()
            .map(|(i, m)| fresh(session, m, i))
            .collect();
        let request = match new.last().map(Message::role) {
            Some(Role::User) => self.agent.user_turn(new).map_err(record)?,
            _ => {
                for m in new {
                    self.agent.append(m).map_err(|e| append(&e))?;
                }
                self.agent.next_step().map_err(record)?
            }
        };
        request
            .into_wire()
            .map_err(|e| Refusal::Invalid(e.to_string()))
    }
}

fn record(e: mektpoy::agent::RecordError) -> Refusal {
    match e {
        mektpoy::agent::RecordError::Append(e) => append(&e),
        other => Refusal::Invalid(other.to_string()),
    }
}

fn append(e: &mektpoy::session::AppendError) -> Refusal {
    let write = std::error::Error::source(e)
        .is_some_and(|s| s.downcast_ref::<mektpoy::store::WriteError>().is_some());
    if write {
        Refusal::Store(e.to_string())
    } else {
        Refusal::Invalid(e.to_string())
    }
}
