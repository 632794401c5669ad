//! One conversation in memory: its loop over the stored log, and what a client request does
//! to it (the heart of the proxy: a stateless request into the append-only log).

use mektpoy::agent::ToolOrder;
use mektpoy::event::Event;
use mektpoy::meter::{Meter, MeterReport, ReadBody};
use mektpoy::route::Route;
use mektpoy::session::{FileOptions, SurfaceNode};
use mektpoy::vocab::Role;
use mektpoy::{AgentLoop, Config, Message, Session, WireRequest, route_for};

use crate::client_body::{Body, Known};
use crate::store::Store;
use crate::translate::{self, ClientRequest, Invalid, Plan};

/// A conversation's loop, and the counterfactual: the same vendor cache model run on the
/// bodies the client sent, as they would have gone upstream without the proxy.
#[derive(Debug)]
pub struct Conversation {
    agent: AgentLoop,
    direct: Meter,
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
    /// What the last request's messages stand for in the log (decision 118); `None` after
    /// anything but a request prepared here.
    known: Option<Known>,
    /// Requests prepared here, and which of them the counterfactual meter observed last:
    /// when it is the one before the last, the last request's first `same` raw messages are
    /// that body's, and the meter takes them from its cut (decision 159).
    prepared: u64,
    direct_at: Option<u64>,
    same: usize,
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
    match route.price().cloned() {
        Some(price) => meter.with_price(price),
        None => meter,
    }
}

fn new_loop(
    session: Session,
    route: Route,
    config: Config,
) -> Result<AgentLoop, mektpoy::agent::BuildError> {
    builder(session, route, config)
        .tool_order(ToolOrder::FirstSeen)
        .build()
}

/// A loop's builder without tools: each client request sets its own, so none is restored
/// from the log (another model's may be ones this route refuses).
fn builder<S: std::borrow::Borrow<Session>>(
    session: S,
    route: Route,
    config: Config,
) -> mektpoy::agent::AgentLoopBuilder<S> {
    AgentLoop::builder(session, route).config(config).tools([])
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
        let agent = new_loop(session, route, Config::new(provider, model))
            .map_err(|e| Refusal::Invalid(e.to_string()))?;
        Ok(Conversation {
            agent,
            direct,
            outcome: "",
            store: store.clone(),
            key: key.to_owned(),
            end,
            stale: None,
            known: None,
            prepared: 0,
            direct_at: None,
            same: 0,
        })
    }

    /// What the last request's messages stand for in the log, for reading the next one.
    pub fn known(&self) -> Option<&Known> {
        self.known.as_ref()
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

    /// Meters the body the client sent (`text`, read as `body`), as the provider would have
    /// cached it sent directly: from the proxy's own reading of it, the messages the previous
    /// body held byte for byte taken from the meter's previous cut, not parsed or compared
    /// again (decision 159). Called after [`prepare`](Self::prepare) took the body.
    pub fn observe_direct(&mut self, body: &Body<'_>, text: &str) {
        let kept = if self.direct_at.is_some() && self.direct_at == self.prepared.checked_sub(1) {
            self.same
        } else {
            0
        };
        let mut read = ReadBody::new(text, body.messages())
            .kept(kept)
            .cache_control(body.head.get("cache_control").is_some_and(|v| !v.is_null()));
        if let Some(tools) = body.tools {
            read = read.tools(tools);
        }
        if let Some(system) = body.system {
            read = read.system(system);
        }
        match self.direct.observe_read(read, None) {
            Ok(_) => self.direct_at = Some(self.prepared),
            Err(e) => tracing::debug!(error = %e, "counterfactual meter"),
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
        let same = client.same;
        let prepared = self.log_request(provider, client);
        if prepared.is_ok() {
            self.prepared += 1;
            self.same = same;
        }
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
        // Kept only by a request prepared whole: any other end leaves the next request to
        // read and compare every message.
        let known = self.known.take();
        if client.is_empty() {
            return Err(Refusal::Invalid(
                "messages: at least one message is required".into(),
            ));
        }
        let mut config = Config::new(provider, &client.model);
        for (k, v) in client.params {
            // A client body key the serializers write themselves: refused where it is read.
            config = config
                .with(k, v)
                .map_err(|e| Refusal::Invalid(e.to_string()))?;
        }
        if self.agent.config().provider != provider || self.agent.config().model != client.model {
            let route = route_for(provider, &client.model);
            // The client's tools are set below; the rest is checked against the new route
            // before the session moves, so that a refusal keeps the conversation.
            let invalid = |e: mektpoy::agent::BuildError| Refusal::Invalid(e.to_string());
            builder(self.agent.session(), route.clone(), config.clone())
                .check()
                .map_err(invalid)?;
            let placeholder = builder(Session::new("-"), route.clone(), config.clone())
                .build()
                .map_err(invalid)?;
            let session = std::mem::replace(&mut self.agent, placeholder).into_session();
            self.direct = direct_meter(&route, &client.model);
            self.agent = new_loop(session, route, config).map_err(invalid)?;
        } else {
            self.agent
                .set_options(config.extra().clone())
                .map_err(|e| Refusal::Invalid(e.to_string()))?;
        }
        self.agent.set_system_prompt(client.system);
        // The tools the loop holds when the client sent the same ones again (as a harness does
        // with every request): the decoded copies are dropped here, not held until the next
        // request beside the log's (decision 150). The recorder writes the previous header's
        // tools for the same tools anyway, so the body sent is the same. Tools taken by their
        // bytes from the previous request are the loop's own already (decision 158).
        let tools = if client.tools == self.agent.tools() {
            self.agent.tools().to_vec()
        } else {
            client.tools
        };
        self.agent
            .set_tools(tools)
            .map_err(|e| Refusal::Invalid(e.to_string()))?;
        // What the next request takes the same `tools` bytes as: the loop's copies (equal to
        // what the bytes read as, one for one), a handle each.
        let tools_known = client
            .tools_key
            .map(|(key, reader)| crate::client_body::KnownTools {
                key,
                reader,
                tools: self.agent.tools().to_vec(),
            });

        let surface = self.agent.session().surface();
        // The log's visible messages: those the last request left, then what followed (its
        // answer); all of them when nothing is known. The client's messages the previous
        // request sent are the first `reused` of them, neither copied nor compared again
        // (decision 157).
        let (nodes, raw, reused, mut new) = match known {
            Some(k) if k.surface_len <= surface.len() => {
                let Known {
                    raw: mut known_raw,
                    mut nodes,
                    surface_len,
                    ..
                } = k;
                nodes.extend(visible_from(&surface, surface_len));
                known_raw.truncate(client.same);
                known_raw.extend(client.raw);
                (nodes, known_raw, client.reused, client.messages)
            }
            known => {
                // The log moved under what was known: every client message is compared, the
                // ones taken from the previous request's nodes included.
                let mut all: Vec<Message> = known
                    .as_ref()
                    .map(|k| {
                        k.nodes[..client.reused.min(k.nodes.len())]
                            .iter()
                            .map(|(_, m)| m.clone())
                            .collect()
                    })
                    .unwrap_or_default();
                all.extend(client.messages);
                let mut raw = known.map(|k| k.raw).unwrap_or_default();
                raw.truncate(client.same);
                raw.extend(client.raw);
                (visible_from(&surface, 0).collect(), raw, 0, all)
            }
        };
        let last_node = surface.len().checked_sub(1);
        let count = reused + new.len();
        let fresh = |session: &Session, m: &Message, part: usize| {
            let id = format!("p{}-{part}", session.len());
            let copy = Message::new(id, m.role(), m.content().to_vec(), m.source().clone());
            match m.is_error() {
                Some(e) => copy.with_is_error(e),
                None => copy,
            }
        };
        let (logged, kept): (Vec<Message>, usize) = match translate::plan(&new, reused, &nodes) {
            Plan::Retry => {
                self.outcome = "retry";
                let request = self.agent.retry().map_err(record)?;
                let wire = request
                    .into_wire()
                    .map_err(|e| Refusal::Invalid(e.to_string()))?;
                self.remember(raw, nodes, surface.len(), count, tools_known);
                return Ok(wire);
            }
            Plan::Extend { new: from } => {
                self.outcome = "extend";
                (new.split_off(from - reused), surface.len())
            }
            Plan::Replace { client: from, node } => {
                self.outcome = "replace";
                let session = self.agent.session();
                // A message before `reused` is the log's own node.
                let at = |i: usize| match i.checked_sub(reused) {
                    Some(j) => new[j].clone(),
                    None => nodes[i].1.clone(),
                };
                let first = fresh(session, &at(from), 0);
                let end = last_node.unwrap_or(node);
                session
                    .append(Event::replace(first, node, end))
                    .map_err(|e| append(&e))?;
                let rest = match (from + 1).checked_sub(reused) {
                    Some(j) => new.split_off(j),
                    None => {
                        let mut rest: Vec<Message> = nodes[from + 1..reused]
                            .iter()
                            .map(|(_, m)| m.clone())
                            .collect();
                        rest.append(&mut new);
                        rest
                    }
                };
                (rest, node)
            }
        };
        let session = self.agent.session();
        let logged: Vec<Message> = logged
            .iter()
            .enumerate()
            .map(|(i, m)| fresh(session, m, i))
            .collect();
        let request = match logged.last().map(Message::role) {
            Some(Role::User) => self.agent.user_turn(logged).map_err(record)?,
            _ => {
                for m in logged {
                    self.agent.append(m).map_err(|e| append(&e))?;
                }
                self.agent.next_step().map_err(record)?
            }
        };
        let wire = request
            .into_wire()
            .map_err(|e| Refusal::Invalid(e.to_string()))?;
        self.remember(raw, nodes, kept, count, tools_known);
        Ok(wire)
    }

    /// Notes what a prepared request's messages stand for: the log's visible messages before
    /// surface index `kept` (unchanged by the request), then those it logged. Kept only when
    /// the log's visible messages are the client's `count`, one for one.
    fn remember(
        &mut self,
        raw: Vec<crate::client_body::Entry>,
        mut nodes: Vec<(usize, Message)>,
        kept: usize,
        count: usize,
        tools: Option<crate::client_body::KnownTools>,
    ) {
        let surface = self.agent.session().surface();
        nodes.truncate(nodes.partition_point(|(i, _)| *i < kept));
        nodes.extend(visible_from(&surface, kept));
        self.known = (nodes.len() == count).then(|| Known {
            raw,
            nodes,
            surface_len: surface.len(),
            tools,
        });
    }
}

/// The surface's user, assistant and tool messages from index `from` on, with their index
/// (the crate's own developer and system-prompt nodes are never the client's).
fn visible_from(
    surface: &mektpoy::vocab::List<SurfaceNode>,
    from: usize,
) -> impl Iterator<Item = (usize, Message)> + '_ {
    (from..surface.len()).filter_map(|i| match surface.get(i) {
        Some(SurfaceNode::Message(m))
            if matches!(m.role(), Role::User | Role::Assistant | Role::Tool) =>
        {
            Some((i, m.clone()))
        }
        _ => None,
    })
}

fn record(e: mektpoy::session::AppendError) -> Refusal {
    append(&e)
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::{Value, json};

    /// What a client does to its history before its next request.
    #[derive(Clone, Debug)]
    enum Step {
        /// Sees the answer (echoed with its text re-spaced or not), then sends 1–3 more
        /// messages, the last one marked for caching (the mark moves on, as Claude Code's).
        Go { echo: bool, spaced: bool, more: u8 },
        /// Never saw the answer: sends the same history again.
        Again,
        /// Goes back to an earlier point, ending on a user message.
        Rewind(u8),
        /// Edits an earlier message.
        Edit(u8),
        /// Re-spaces an earlier answer's text (same message, other bytes).
        Respace(u8),
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            4 => (any::<bool>(), any::<bool>(), 1u8..4).prop_map(|(echo, spaced, more)| Step::Go { echo, spaced, more }),
            1 => Just(Step::Again),
            1 => any::<u8>().prop_map(Step::Rewind),
            1 => any::<u8>().prop_map(Step::Edit),
            1 => any::<u8>().prop_map(Step::Respace),
        ]
    }

    fn user(text: &str, marked: bool) -> Value {
        let mut block = json!({"type": "text", "text": text});
        if marked {
            block["cache_control"] = json!({"type": "ephemeral"});
        }
        json!({"role": "user", "content": [block]})
    }

    /// The log's visible messages after each request (role and content), or the refusal,
    /// for `steps`; with `forget`, nothing is known of the previous request: every message is
    /// read and compared.
    fn run(steps: &[Step], forget: bool) -> Vec<Result<Vec<(Role, String)>, String>> {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().join("t.db")).unwrap();
        let mut c = Conversation::load(&store, "k", "anthropic", "claude-opus-5").unwrap();
        // The counterfactual metered by parsing each body whole, beside the proxy's, which
        // takes the proxy's word for the messages the previous body held (decision 159).
        let route = route_for("anthropic", "claude-opus-5");
        let mut parsed = direct_meter(&route, "claude-opus-5");
        let mut history = vec![user("hi", true)];
        let mut out = Vec::new();
        let mut answer = None;
        for (n, s) in steps.iter().enumerate() {
            if n > 0 {
                match *s {
                    Step::Go { echo, spaced, more } => {
                        if let (true, Some(a)) = (echo, answer.take()) {
                            let text = if spaced { format!("{a}\n") } else { a };
                            history.push(json!({"role": "assistant", "content": [{"type": "text", "text": text}]}));
                        }
                        for j in 0..more {
                            if let Some(b) = history
                                .last_mut()
                                .filter(|m| m["role"] == "user")
                                .and_then(|last| last["content"][0].as_object_mut())
                            {
                                b.remove("cache_control");
                            }
                            history.push(user(&format!("u{n}-{j}"), j + 1 == more));
                        }
                    }
                    Step::Again => {}
                    Step::Rewind(k) => {
                        let users: Vec<usize> = (0..history.len())
                            .filter(|&i| history[i]["role"] == "user")
                            .collect();
                        history.truncate(users[usize::from(k) % users.len()] + 1);
                    }
                    Step::Edit(k) => {
                        let i = usize::from(k) % history.len();
                        history[i]["content"][0]["text"] = json!(format!("edited {n}"));
                    }
                    Step::Respace(k) => {
                        let i = usize::from(k) % history.len();
                        if history[i]["role"] == "assistant" {
                            let t = history[i]["content"][0]["text"]
                                .as_str()
                                .unwrap()
                                .to_owned();
                            history[i]["content"][0]["text"] = json!(format!(" {t}"));
                        }
                    }
                }
            }
            if forget {
                c.known = None;
            }
            let text =
                json!({"model": "claude-opus-5", "max_tokens": 8, "messages": history}).to_string();
            let body = crate::client_body::parse(&text).unwrap();
            let prepared = translate::read(&body, "anthropic", c.known())
                .map_err(Refusal::from)
                .and_then(|client| c.prepare("anthropic", client));
            out.push(match prepared {
                Ok(_) => {
                    c.observe_direct(&body, &text);
                    parsed.observe(&text, None).unwrap();
                    assert_eq!(c.direct.rows(), parsed.rows(), "request {n}");
                    assert_eq!(c.direct.departures(), parsed.departures(), "request {n}");
                    let text = format!("answer {n}");
                    let message = Message::assistant(
                        format!("a{n}"),
                        text.clone(),
                        "anthropic",
                        "claude-opus-5",
                    );
                    c.agent().append(message).unwrap();
                    answer = Some(text);
                    Ok(visible_from(&c.agent().session().surface(), 0)
                        .map(|(_, m)| (m.role(), serde_json::to_string(m.content()).unwrap()))
                        .collect())
                }
                Err(e) => Err(e.to_string()),
            });
        }
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        /// Reading only what the previous request did not send logs what reading and
        /// comparing every message logs, whatever the client does to its history; and the
        /// counterfactual meter, on the proxy's word for the messages the previous body held,
        /// meters what a whole parse of each body meters.
        #[test]
        fn reading_what_is_new_logs_what_reading_everything_logs(steps in proptest::collection::vec(step(), 1..14)) {
            prop_assert_eq!(run(&steps, false), run(&steps, true));
        }
    }

    #[test]
    fn an_extended_history_is_read_from_what_is_new() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().join("t.db")).unwrap();
        let mut c = Conversation::load(&store, "k", "anthropic", "claude-opus-5").unwrap();
        let mut history = vec![user("hi", false)];
        for n in 0..5 {
            let text =
                json!({"model": "claude-opus-5", "max_tokens": 8, "messages": history}).to_string();
            let body = crate::client_body::parse(&text).unwrap();
            let client = translate::read(&body, "anthropic", c.known()).unwrap();
            // Every message but the two new ones (the echoed answer and the next turn) is
            // the log's own.
            assert_eq!(
                client.reused,
                history.len().saturating_sub(2),
                "request {n}"
            );
            c.prepare("anthropic", client).unwrap();
            c.agent()
                .append(Message::assistant(
                    format!("a{n}"),
                    "ok",
                    "anthropic",
                    "claude-opus-5",
                ))
                .unwrap();
            history.push(json!({"role": "assistant", "content": "ok"}));
            history.push(user(&format!("u{n}"), false));
        }
    }
}
