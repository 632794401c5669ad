//! The fold of SPEC §3: request headers and developer messages → `ToolHistory`.
//!
//! All state is persistent (`im`), so the session clones the fold in O(1) to look ahead
//! (the recorder asks what a header *would* do) and caches it between calls.

use std::sync::Arc;

use super::{ToolHistory, ToolUpdate};
use crate::event::{Event, HeaderEvent, MessageEvent, Reason};
use crate::vocab::{ContentBlock, Role, Seq, ToolSchema, by_name};

/// Fold state after some prefix of a log.
#[derive(Clone, Default)]
pub(crate) struct ToolFold {
    /// Tools of every header by `Seq`, shared with the events.
    header_tools: im::HashMap<Seq, Arc<[ToolSchema]>>,
    /// Whether a header has been folded.
    has_header: bool,
    baseline: Arc<[ToolSchema]>,
    /// Names of the baseline tools without `deferLoading`.
    baseline_immediate: im::HashSet<String>,
    /// Name → latest definition in the series (baseline plus additions, removed included).
    declared: im::HashMap<String, ToolSchema>,
    /// Declared names in the order they were first declared.
    declared_order: im::Vector<String>,
    available: im::HashSet<String>,
    active: Arc<[ToolSchema]>,
    updates: im::Vector<ToolUpdate>,
    /// Events folded so far.
    upto: usize,
}

impl ToolFold {
    /// Number of events folded.
    pub fn upto(&self) -> usize {
        self.upto
    }

    /// Folds the next event. O(size of the event + log n).
    pub fn apply(&mut self, event: &Event) {
        let seq = Seq::from(self.upto);
        self.upto += 1;
        match event {
            Event::Header(h) => self.header(seq, h),
            Event::Message(m) if m.message.role() == Role::Developer => self.developer(m),
            _ => {}
        }
    }

    /// SPEC §3 step 2: whether a header with these properties opens a declaration series.
    pub fn opens_declaration_series(&self, h: &HeaderEvent) -> bool {
        let tools = &h.header.tools;
        !self.has_header
            || h.reason == Reason::Series
            || h.starts_series
            || tools
                .iter()
                .any(|t| self.declared.get(t.name()).is_some_and(|d| !d.same_tool(t)))
            || tools.iter().any(|t| {
                !self.available.contains(t.name()) && self.baseline_immediate.contains(t.name())
            })
            || (self.baseline_immediate.is_empty() && tools.iter().any(|t| !t.defer_loading()))
    }

    fn header(&mut self, seq: Seq, h: &HeaderEvent) {
        let tools = &h.header.tools;
        self.header_tools.insert(seq, Arc::clone(tools));
        if self.opens_declaration_series(h) {
            self.baseline = Arc::clone(tools);
            self.baseline_immediate = tools
                .iter()
                .filter(|t| !t.defer_loading())
                .map(|t| t.name().to_owned())
                .collect();
            self.declared = tools
                .iter()
                .map(|t| (t.name().to_owned(), t.clone()))
                .collect();
            self.declared_order = tools.iter().map(|t| t.name().to_owned()).collect();
            self.available = tools.iter().map(|t| t.name().to_owned()).collect();
            self.updates = im::Vector::new();
        }
        self.has_header = true;
        self.active = Arc::clone(tools);
    }

    fn developer(&mut self, m: &MessageEvent) {
        let header = m.header_seq.and_then(|s| self.header_tools.get(&s));
        let mut definitions = None;
        let mut additions = im::Vector::new();
        for block in m.message.content() {
            match block {
                ContentBlock::ToolAddition { tool_name } => {
                    let def = header.and_then(|h| {
                        definitions
                            .get_or_insert_with(|| by_name(h))
                            .get(tool_name.as_str())
                            .copied()
                    });
                    if let Some(def) = def {
                        if self
                            .declared
                            .insert(tool_name.clone(), def.clone())
                            .is_none()
                        {
                            self.declared_order.push_back(tool_name.clone());
                        }
                        additions.push_back(def.clone());
                    }
                    self.available.insert(tool_name.clone());
                }
                ContentBlock::ToolRemoval { tool_name } => {
                    self.available.remove(tool_name);
                }
                _ => {}
            }
        }
        self.updates.push_back(ToolUpdate {
            message_id: m.message.id().to_owned(),
            additions,
        });
    }

    /// Whether the available names are exactly the active names (otherwise: the guard).
    fn consistent(&self) -> bool {
        self.available.len() == self.active.len()
            && self
                .active
                .iter()
                .all(|t| self.available.contains(t.name()))
    }

    /// The snapshot of SPEC §3 "Reading".
    pub fn snapshot(&self) -> ToolHistory {
        if self.consistent() {
            ToolHistory {
                tools: self.baseline.iter().cloned().collect(),
                updates: self.updates.clone(),
            }
        } else {
            ToolHistory {
                tools: self.active.iter().cloned().collect(),
                updates: im::Vector::new(),
            }
        }
    }

    /// Whether `name` is available (offered by the current series).
    pub fn is_available(&self, name: &str) -> bool {
        self.available.contains(name)
    }

    /// Available names in the order the fold declared them.
    pub fn available_in_declared_order(&self) -> impl Iterator<Item = &str> {
        self.declared_order
            .iter()
            .filter(|n| self.available.contains(n.as_str()))
            .map(String::as_str)
    }
}

/// Folds a whole event sequence from scratch (the model the incremental fold is tested
/// against, and the "full rescan" of the benchmarks).
pub fn fold_events<'a>(events: impl IntoIterator<Item = &'a Event>) -> ToolHistory {
    let mut fold = ToolFold::default();
    for e in events {
        fold.apply(e);
    }
    fold.snapshot()
}
