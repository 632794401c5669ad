//! The folds of reference §3 and §3.1: request headers and developer messages → `ToolHistory`.
//!
//! One reducer, two readings of the same log ([`FoldKind`]): the by-reference fold opens a
//! declaration series whenever a definition changes (a route that names tools in history has
//! no other way to send the new definition); the by-value fold opens one only where a request
//! series starts, because its routes carry changed definitions inside the history.
//!
//! All state is persistent (`imbl`), so the session clones a fold in O(1) to look ahead (the
//! recorder asks what a header *would* do) and caches it between calls.

use std::sync::Arc;

use super::{ToolHistory, ToolUpdate};
use crate::event::{Event, HeaderEvent, MessageEvent, Reason};
use crate::vocab::{ContentBlock, List, Role, Seq, ToolIndex, ToolSchema};

/// Which of the two folds a [`ToolFold`] computes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum FoldKind {
    /// reference §3: `Session::tool_history`, for routes that change tools by reference.
    #[default]
    ByReference,
    /// reference §3.1: for routes with inline definitions.
    ByValue,
}

/// Every header's name index by `Seq`: the session's `LogState::tool_indexes`, built once per
/// header and shared by validation and both folds (the fold keeps no copy).
pub(crate) type ToolIndexes = imbl::HashMap<Seq, Arc<ToolIndex>>;

/// Headers with at most this many tools resolve a name by a scan of their tools, cheaper than
/// hashing it (the index keeps the first of two tools with one name, and so does the scan).
const SCAN_TOOLS: usize = 16;

/// How far past its expected position a header's tool is looked for among the previous
/// header's tools (a tool added or removed before it shifts it by one).
const LOOKAHEAD: usize = 4;

/// Events read ahead of folding them (see [`ToolFold::fold_to`]).
const BATCH: usize = 128;

/// Reads, at `depth` (0: the event's own allocation, 1: the header's tool slice or the
/// message's blocks, 2: the names behind them), what folding `event` will read, so that the
/// fold then finds it cached. One depth at a time over a whole batch, the reads of different
/// events do not wait on each other. The sum means nothing.
fn first_read(event: &Event, depth: u8) -> usize {
    let byte = |n: &str| usize::from(n.as_bytes().first().copied().unwrap_or(0));
    match (event, depth) {
        (Event::Header(h), 0) => h.reason as usize,
        (Event::Header(h), 1) => h
            .header
            .tools
            .iter()
            .step_by(2)
            .map(|t| usize::from(t.defer_loading()))
            .sum(),
        (Event::Header(h), _) => h.header.tools.iter().map(|t| byte(t.name())).sum(),
        (Event::Message(m), 0) => m.message.role() as usize,
        (Event::Message(m), _) if m.message.role() != Role::Developer => 0,
        (Event::Message(m), 1) => byte(m.message.id()) + m.message.content().len(),
        (Event::Message(m), _) => m
            .message
            .content()
            .iter()
            .map(|block| match block {
                ContentBlock::ToolAddition { tool_name }
                | ContentBlock::ToolRedefinition { tool_name }
                | ContentBlock::ToolRemoval { tool_name } => byte(tool_name),
                _ => 0,
            })
            .sum(),
        _ => 0,
    }
}

/// Fold state after some prefix of a log.
#[derive(Clone, Default)]
pub(crate) struct ToolFold {
    kind: FoldKind,
    /// The latest header's `Seq` (its tools are `active`), if one has been folded.
    latest: Option<Seq>,
    baseline: Arc<[ToolSchema]>,
    /// Whether the baseline holds a tool without `deferLoading`.
    baseline_has_immediate: bool,
    /// Name → latest definition in the series (baseline, additions and redefinitions, last
    /// wins; removed names included).
    declared: imbl::HashMap<String, ToolSchema>,
    /// Declared names in the order they were first declared.
    declared_order: imbl::Vector<String>,
    available: imbl::HashSet<String>,
    active: Arc<[ToolSchema]>,
    /// By reference: every active tool's name is undeclared or declared with that very tool
    /// (`same_tool`), so a header's tool the same as the active one of its name redefines
    /// nothing and needs no look-up. Cleared when a developer message resolves a name through
    /// another header than the latest.
    active_declared: bool,
    updates: imbl::Vector<ToolUpdate>,
    /// Events folded so far.
    upto: usize,
}

impl ToolFold {
    /// An empty fold of `kind`.
    pub fn new(kind: FoldKind) -> Self {
        ToolFold {
            kind,
            ..ToolFold::default()
        }
    }

    /// Number of events folded.
    pub fn upto(&self) -> usize {
        self.upto
    }

    /// Whether folding `event` can change the snapshot: only headers and developer messages
    /// do.
    pub fn can_change(event: &Event) -> bool {
        match event {
            Event::Header(_) => true,
            Event::Message(m) => m.message.role() == Role::Developer,
            _ => false,
        }
    }

    /// Folds the events `[upto(), upto)` of a log, given as (`Seq`, event) in order: every one
    /// that [can change](Self::can_change) the fold must be there, the others may be left out
    /// (they change nothing). A developer message resolves its names through `indexes`, which
    /// holds every header of the log. Returns whether an event that can change the snapshot
    /// was folded. O(given events + log n per header and developer message).
    pub fn fold_to<'e>(
        &mut self,
        events: impl IntoIterator<Item = (Seq, &'e Event)>,
        upto: usize,
        indexes: &ToolIndexes,
    ) -> bool {
        let mut changed = false;
        let mut events = events.into_iter().peekable();
        if events.peek().is_none() {
            self.upto = self.upto.max(upto);
            return false;
        }
        let mut batch = Vec::new();
        loop {
            // Each event lives in its own allocations, so a long fold waits mostly on memory.
            // First every event of a batch is read (the reads do not depend on each other, so
            // they overlap), then the batch is folded from the cache.
            batch.clear();
            batch.extend(events.by_ref().take(BATCH));
            for depth in 0..3 {
                let read = batch.iter().fold(0usize, |sum, (_, event)| {
                    sum.wrapping_add(first_read(event, depth))
                });
                std::hint::black_box(read);
            }
            if batch.is_empty() {
                break;
            }
            for &(seq, event) in &batch {
                debug_assert!(seq.index() >= self.upto && seq.index() < upto);
                match event {
                    Event::Header(h) => {
                        changed = true;
                        self.header(seq, h);
                    }
                    Event::Message(m) if m.message.role() == Role::Developer => {
                        changed = true;
                        self.developer(m, indexes);
                    }
                    _ => {}
                }
            }
        }
        self.upto = self.upto.max(upto);
        changed
    }

    /// reference §3 step 2 (§3.1 for the by-value fold): whether a header with these properties
    /// opens a declaration series.
    pub fn opens_declaration_series(&self, h: &HeaderEvent) -> bool {
        if self.latest.is_none() || h.reason == Reason::Series || h.starts_series {
            return true;
        }
        if self.kind == FoldKind::ByValue {
            return false;
        }
        let tools = &h.header.tools;
        // A name declared in the series with another definition (a removed tool returning
        // changed included): by reference, the new definition cannot be sent otherwise.
        self.redefines_declared(tools)
            // A session that began without an immediately available tool gets a usable
            // baseline at its first one (departure).
            || (!self.baseline_has_immediate && tools.iter().any(|t| !t.defer_loading()))
    }

    /// Whether one of `tools` has a name declared in the series with another definition.
    /// A tool the same as the active one of its name (found near its own position among the
    /// active tools) is not, when `active_declared` holds; any other is looked up.
    fn redefines_declared(&self, tools: &[ToolSchema]) -> bool {
        let active: &[ToolSchema] = if self.active_declared {
            &self.active
        } else {
            &[]
        };
        let mut next = 0;
        tools.iter().any(|t| {
            let near = active
                .get(next..active.len().min(next + LOOKAHEAD))
                .and_then(|a| {
                    // The same definition allocation has the same name, without reading it.
                    a.iter()
                        .position(|a| a.shares_definition_with(t) || a.name() == t.name())
                });
            if let Some(i) = near {
                next += i + 1;
                if active[next - 1].same_tool(t) {
                    return false;
                }
            }
            self.declared.get(t.name()).is_some_and(|d| !d.same_tool(t))
        })
    }

    fn header(&mut self, seq: Seq, h: &HeaderEvent) {
        let tools = &h.header.tools;
        if self.opens_declaration_series(h) {
            self.baseline = Arc::clone(tools);
            self.baseline_has_immediate = tools.iter().any(|t| !t.defer_loading());
            self.declared = tools
                .iter()
                .map(|t| (t.name().to_owned(), t.clone()))
                .collect();
            self.declared_order = tools.iter().map(|t| t.name().to_owned()).collect();
            self.available = tools.iter().map(|t| t.name().to_owned()).collect();
            self.updates = imbl::Vector::new();
        }
        // Opening, the declarations are these tools; otherwise (by reference) the check just
        // made found each undeclared or declared the same.
        self.active_declared = self.kind == FoldKind::ByReference;
        self.latest = Some(seq);
        self.active = Arc::clone(tools);
    }

    /// The tool `name` of header `seq`: the latest header's by a scan when it is small, else
    /// through the header's index.
    fn resolve<'a>(
        &'a self,
        seq: Seq,
        name: &str,
        indexes: &'a ToolIndexes,
    ) -> Option<&'a ToolSchema> {
        if self.latest == Some(seq) && self.active.len() <= SCAN_TOOLS {
            return self.active.iter().find(|t| t.name() == name);
        }
        indexes.get(&seq).and_then(|index| index.get(name))
    }

    fn developer(&mut self, m: &MessageEvent, indexes: &ToolIndexes) {
        let mut additions = imbl::Vector::new();
        let mut redefinitions = imbl::Vector::new();
        for block in m.message.content() {
            let (tool_name, redefines) = match block {
                ContentBlock::ToolAddition { tool_name } => (tool_name, false),
                ContentBlock::ToolRedefinition { tool_name } => (tool_name, true),
                ContentBlock::ToolRemoval { tool_name } => {
                    self.available.remove(tool_name);
                    continue;
                }
                _ => continue,
            };
            let def = m
                .header_seq
                .and_then(|seq| self.resolve(seq, tool_name, indexes))
                .cloned();
            if let Some(def) = def {
                // A definition from another header than the latest may differ from the
                // active tool of its name.
                if m.header_seq != self.latest {
                    self.active_declared = false;
                }
                match self.declared.get_mut(tool_name.as_str()) {
                    Some(d) => *d = def.clone(),
                    None => {
                        self.declared.insert(tool_name.clone(), def.clone());
                        self.declared_order.push_back(tool_name.clone());
                    }
                }
                if redefines {
                    redefinitions.push_back(def);
                } else {
                    additions.push_back(def);
                }
            }
            // A redefinition leaves availability unchanged.
            if !redefines && !self.available.contains(tool_name.as_str()) {
                self.available.insert(tool_name.clone());
            }
        }
        self.updates.push_back(ToolUpdate {
            message_id: m.message.id().to_owned(),
            additions: List(additions),
            redefinitions: List(redefinitions),
        });
    }

    /// Whether the snapshot may be the series' (otherwise: the guard). The available names
    /// must be exactly the active names; by value, each active tool must also be the
    /// definition the history resolved for its name (an interrupted record of a redefinition
    /// leaves them apart).
    fn consistent(&self) -> bool {
        self.available.len() == self.active.len()
            && self.active.iter().all(|t| {
                self.available.contains(t.name())
                    && (self.kind == FoldKind::ByReference
                        || self.declared.get(t.name()).is_some_and(|d| d.same_tool(t)))
            })
    }

    /// The snapshot of reference §3 "Reading".
    pub fn snapshot(&self) -> ToolHistory {
        if self.consistent() {
            ToolHistory {
                tools: self.baseline.iter().cloned().collect(),
                updates: List(self.updates.clone()),
            }
        } else {
            ToolHistory {
                tools: self.active.iter().cloned().collect(),
                updates: List::default(),
            }
        }
    }

    /// Whether `name` is available (offered by the current series).
    pub fn is_available(&self, name: &str) -> bool {
        self.available.contains(name)
    }

    /// The definition the series resolved for `name` (last wins), removed names included.
    pub fn declared(&self, name: &str) -> Option<&ToolSchema> {
        self.declared.get(name)
    }

    /// Available names in the order the fold declared them.
    pub fn available_in_declared_order(&self) -> impl Iterator<Item = &str> {
        self.declared_order
            .iter()
            .filter(|n| self.available.contains(n.as_str()))
            .map(String::as_str)
    }
}
