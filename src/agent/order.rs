//! `ToolOrder`: the order the recorder puts the effective tools in before it logs them.
//!
//! A header logs the tools in order, and on a route without a tool-update mode the wire declares
//! exactly those tools in that order, near the very start of the request. A caller whose tool list
//! comes out of a hash map, or from MCP servers that reconnect in another order, would otherwise
//! log a new header (`Reason::Change`) and send a new prefix for a mere reordering: a full cache
//! miss. The recorder therefore puts the tools in a stable order first, so that order churn never
//! reaches the log ([decision 72](crate::manual::decisions#decision-72)).

use std::borrow::Cow;
use std::collections::HashMap;

use super::Recorder;
use crate::event::Event;
use crate::session::Session;
use crate::vocab::ToolSchema;

/// The order [`Recorder::record`] logs (and so sends) the effective tools in.
///
/// Set it with [`Recorder::with_tool_order`] or
/// [`AgentLoopBuilder::tool_order`](super::AgentLoopBuilder::tool_order).
///
/// ```
/// use mektpoy::agent::ToolOrder;
/// use mektpoy::{AgentLoop, Message, Session, ToolSchema, route_for};
/// let tool = |n: &str| ToolSchema::no_input(n, n);
/// let mut agent = AgentLoop::builder(Session::new("s"), route_for("deepseek", "deepseek-v4-pro"))
///     .tool_order(ToolOrder::FirstSeen)
///     .tools([tool("read"), tool("search")])
///     .build()?;
/// agent.user_turn([Message::user("u1", "hi")])?;
/// // The MCP server reconnects: the same tools, another order.
/// agent.set_tools([tool("search"), tool("read")])?;
/// let request = agent.user_turn([Message::user("u2", "go on")])?;
/// assert_eq!(request.header_seq, None, "no new header: the prefix stays");
/// let names: Vec<&str> = request.tools.iter().map(ToolSchema::name).collect();
/// assert_eq!(names, ["read", "search"]);
/// # Ok::<(), mektpoy::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ToolOrder {
    /// The order the caller gives, unchanged: the behaviour (and the log bytes) of a recorder
    /// without the option. The default, so that setting nothing changes nothing.
    #[default]
    AsGiven,
    /// Each tool keeps the position it had when the session first saw it: ranks follow the
    /// first appearance of each name over the session's headers, in log order (inherited and
    /// loaded ones included). Tools the session has not seen go after all known ones, in the
    /// order given; a tool removed and later re-added goes back to its rank. The recommended
    /// order: the existing prefix never moves, and new tools are appended to it.
    FirstSeen,
    /// Sorted by name (byte order). Stateless, but a new tool lands wherever its name sorts,
    /// which moves every tool after it.
    ByName,
}

/// A recorder's tool order and, for [`ToolOrder::FirstSeen`], the ranks read from the log.
///
/// The ranks are kept incrementally: `read` is how many events of the attached session have
/// been ranked, so each record reads only the events appended since (by this recorder or by
/// any other writer). The first record after [`Recorder::attach`] reads the whole log once,
/// which rebuilds the ranks of a loaded or forked session; under the other orders nothing is
/// read at all.
#[derive(Debug, Default)]
pub(crate) struct Orderer {
    order: ToolOrder,
    /// Each name the session's headers declared, and its rank (0 for the first seen).
    ranks: HashMap<Box<str>, usize>,
    /// Number of events already ranked; the log is append-only, so this only moves forward.
    read: usize,
}

impl Orderer {
    /// Ranks the names of the headers appended since the last call. O(events since + their
    /// headers' tools).
    fn catch_up(&mut self, session: &Session) {
        let events = session.events();
        let len = events.len();
        if self.read >= len {
            return;
        }
        // `narrow` starts at `read` in O(log n), without walking the events before it.
        for event in events.0.focus().narrow(self.read..len) {
            if let Event::Header(h) = event {
                for tool in h.header.tools.iter() {
                    if !self.ranks.contains_key(tool.name()) {
                        let rank = self.ranks.len();
                        self.ranks.insert(tool.name().into(), rank);
                    }
                }
            }
        }
        self.read = len;
    }

    /// `tools` in this order; borrowed when they already are in it.
    ///
    /// Names repeated in `tools` keep their given order among themselves (the sorts are
    /// stable): the session refuses such a header anyway.
    pub(crate) fn apply<'t>(
        &mut self,
        session: &Session,
        tools: &'t [ToolSchema],
    ) -> Cow<'t, [ToolSchema]> {
        match self.order {
            ToolOrder::AsGiven => Cow::Borrowed(tools),
            ToolOrder::ByName => {
                if tools.is_sorted_by(|a, b| a.name() <= b.name()) {
                    Cow::Borrowed(tools)
                } else {
                    let mut sorted = tools.to_vec();
                    sorted.sort_by(|a, b| a.name().cmp(b.name()));
                    Cow::Owned(sorted)
                }
            }
            ToolOrder::FirstSeen => {
                self.catch_up(session);
                // Unseen tools rank after every seen one (ranks are `0..known`), in the
                // order given.
                let known = self.ranks.len();
                let key = |(i, t): (usize, &ToolSchema)| {
                    self.ranks.get(t.name()).copied().unwrap_or(known + i)
                };
                let keys: Vec<usize> = tools.iter().enumerate().map(key).collect();
                if keys.is_sorted() {
                    return Cow::Borrowed(tools);
                }
                let mut indexed: Vec<(usize, &ToolSchema)> = keys.into_iter().zip(tools).collect();
                indexed.sort_by_key(|(k, _)| *k);
                Cow::Owned(indexed.into_iter().map(|(_, t)| t.clone()).collect())
            }
        }
    }
}

impl Recorder {
    /// The same recorder logging the effective tools in `order` (default
    /// [`ToolOrder::AsGiven`]).
    ///
    /// The order is applied to [`Step::tools`](super::Step::tools) at the very start of
    /// [`record`](Self::record), before the header is compared, so a reordering alone never
    /// logs a new header nor changes the developer messages. Under
    /// [`FirstSeen`](ToolOrder::FirstSeen) the ranks are read from the log (the first record
    /// after [`attach`](Self::attach) reads it whole, later ones only what was appended since,
    /// by any writer). They are read before the batch takes the session's write lock: a header
    /// another writer appends in between is ranked from the next record on.
    ///
    /// ```
    /// use mektpoy::agent::{Recorder, Step, ToolOrder};
    /// use mektpoy::{Config, Route, Session, ToolSchema, route::WireApi};
    /// let tool = |n: &str| ToolSchema::no_input(n, n);
    /// let session = Session::new("s");
    /// let mut recorder = Recorder::attach(&session).with_tool_order(ToolOrder::ByName);
    /// let config = Config::new("deepseek", "deepseek-v4-pro");
    /// let route = Route::plain("deepseek", "deepseek-v4-pro", WireApi::Messages);
    /// let tools = [tool("search"), tool("edit"), tool("read")];
    /// let request = recorder.record(&session, Step::new(&config, "", &tools, &route))?;
    /// let names: Vec<&str> = request.tools.iter().map(ToolSchema::name).collect();
    /// assert_eq!(names, ["edit", "read", "search"]);
    /// # Ok::<(), mektpoy::agent::RecordError>(())
    /// ```
    #[must_use]
    pub fn with_tool_order(mut self, order: ToolOrder) -> Self {
        self.set_tool_order(order);
        self
    }

    /// Logs the effective tools of the next records in `order`; see
    /// [`with_tool_order`](Self::with_tool_order). The first-seen ranks read so far are kept:
    /// they describe the log, whichever order wrote it.
    ///
    /// ```
    /// use mektpoy::agent::{Recorder, Step, ToolOrder};
    /// use mektpoy::{Config, Session, ToolSchema, route_for};
    /// let session = Session::new("s");
    /// let mut recorder = Recorder::attach(&session);
    /// recorder.set_tool_order(ToolOrder::ByName);
    /// let (config, route) = (Config::new("acme", "acme-1"), route_for("acme", "acme-1"));
    /// let tools = [ToolSchema::no_input("b", ""), ToolSchema::no_input("a", "")];
    /// let request = recorder.record(&session, Step::new(&config, "", &tools, &route))?;
    /// assert_eq!(request.tools[0].name(), "a");
    /// # Ok::<(), mektpoy::agent::RecordError>(())
    /// ```
    pub fn set_tool_order(&mut self, order: ToolOrder) {
        self.tool_order.order = order;
    }

    /// The order the effective tools are logged in.
    ///
    /// ```
    /// use mektpoy::agent::{Recorder, ToolOrder};
    /// use mektpoy::Session;
    /// let recorder = Recorder::attach(&Session::new("s"));
    /// assert_eq!(recorder.tool_order(), ToolOrder::AsGiven);
    /// assert_eq!(recorder.with_tool_order(ToolOrder::FirstSeen).tool_order(), ToolOrder::FirstSeen);
    /// ```
    pub fn tool_order(&self) -> ToolOrder {
        self.tool_order.order
    }
}
