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

/// Fold state after some prefix of a log.
#[derive(Clone, Default)]
pub(crate) struct ToolFold {
    kind: FoldKind,
    /// The tools of every header by `Seq`, indexed by name once per header (shared with the
    /// session's validation when the session folds).
    header_tools: imbl::HashMap<Seq, Arc<ToolIndex>>,
    /// Whether a header has been folded.
    has_header: bool,
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

    /// Folds the next event, taking a header's name index from `index` (by the header's `Seq`)
    /// when it has one already, so that the fold and validation share one index per header.
    /// O(size of the event + log n); O(1 + log n) for a header whose index is given.
    pub fn apply_indexed<'i>(
        &mut self,
        event: &Event,
        index: impl FnOnce(Seq) -> Option<&'i Arc<ToolIndex>>,
    ) {
        let seq = Seq::from(self.upto);
        self.upto += 1;
        match event {
            Event::Header(h) => {
                let index = index(seq)
                    .cloned()
                    .unwrap_or_else(|| Arc::new(ToolIndex::new(&h.header.tools)));
                self.header(seq, h, index);
            }
            Event::Message(m) if m.message.role() == Role::Developer => self.developer(m),
            _ => {}
        }
    }

    /// reference §3 step 2 (§3.1 for the by-value fold): whether a header with these properties
    /// opens a declaration series.
    pub fn opens_declaration_series(&self, h: &HeaderEvent) -> bool {
        if !self.has_header || h.reason == Reason::Series || h.starts_series {
            return true;
        }
        if self.kind == FoldKind::ByValue {
            return false;
        }
        let tools = &h.header.tools;
        // A name declared in the series with another definition (a removed tool returning
        // changed included): by reference, the new definition cannot be sent otherwise.
        tools
            .iter()
            .any(|t| self.declared.get(t.name()).is_some_and(|d| !d.same_tool(t)))
            // A session that began without an immediately available tool gets a usable
            // baseline at its first one (departure).
            || (!self.baseline_has_immediate && tools.iter().any(|t| !t.defer_loading()))
    }

    fn header(&mut self, seq: Seq, h: &HeaderEvent, index: Arc<ToolIndex>) {
        let tools = &h.header.tools;
        self.header_tools.insert(seq, index);
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
        self.has_header = true;
        self.active = Arc::clone(tools);
    }

    fn developer(&mut self, m: &MessageEvent) {
        let header = m.header_seq.and_then(|s| self.header_tools.get(&s));
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
            let def = header.and_then(|h| h.get(tool_name));
            if let Some(def) = def {
                if self
                    .declared
                    .insert(tool_name.clone(), def.clone())
                    .is_none()
                {
                    self.declared_order.push_back(tool_name.clone());
                }
                if redefines {
                    redefinitions.push_back(def.clone());
                } else {
                    additions.push_back(def.clone());
                }
            }
            // A redefinition leaves availability unchanged.
            if !redefines {
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

    /// The name index the fold holds for header `seq`.
    #[cfg(test)]
    pub fn header_index(&self, seq: Seq) -> Option<&Arc<ToolIndex>> {
        self.header_tools.get(&seq)
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
