//! The folds of [reference §3](crate::manual::reference#3-toolhistory-the-cached-reducer) and §3.1:
//! request headers and developer messages → `ToolHistory`.
//!
//! One reducer, two readings of the same log ([`FoldKind`]): the by-reference fold opens a
//! declaration series whenever a definition changes (a route that names tools in history has
//! no other way to send the new definition); the by-value fold opens one only where a request
//! series starts, because its routes carry changed definitions inside the history.
//!
//! The fold reads the log's [fold records](super::record) ([decision
//! 80](crate::manual::decisions#decision-80)), not its events: each name comes as a dense id, so
//! the state is a persistent vector indexed by it, never a map of names. All state is persistent
//! (`imbl`), so the session clones a fold in O(1) to look ahead (the recorder asks what a header
//! *would* do), caches it between calls and keeps checkpoints of it.

use std::sync::Arc;

use super::record::{ChangeKind, DeveloperRecord, FoldRecord, HeaderRecord, NameId, ToolNames};
use super::{ToolHistory, ToolUpdate};
use crate::event::{Event, HeaderEvent};
use crate::session::LogRules;
use crate::vocab::{List, Role, Seq, ToolSchema};

/// Which of the two folds a [`ToolFold`] computes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum FoldKind {
    /// [reference §3](crate::manual::reference#3-toolhistory-the-cached-reducer):
    /// `Session::tool_history`, for routes that change tools by reference.
    #[default]
    ByReference,
    /// [reference §3.1](crate::manual::reference#31-the-by-value-fold): for routes with inline
    /// definitions.
    ByValue,
}

/// How far past its expected position a header's tool is looked for among the previous
/// header's tools (a tool added or removed before it shifts it by one).
pub(super) const LOOKAHEAD: usize = 4;

/// What the fold knows of one name id in the current declaration series. A slot written in an
/// earlier series (`series` is not the fold's) reads as undeclared and unavailable, so opening a
/// series costs the new header's tools, not every name the log has met.
#[derive(Clone, Default)]
struct Slot {
    /// The series the slot was last written in.
    series: u32,
    /// Whether the name is available (offered by the series).
    available: bool,
    /// The latest definition in the series (baseline, additions and redefinitions, last wins;
    /// kept when the name is removed), if it was declared.
    def: Option<ToolSchema>,
    /// Whether the series' baseline holds the name without `deferLoading` (what the rules-3
    /// fold asks of a returning tool, [`LogRules::V3`]).
    baseline_immediate: bool,
}

/// Records read ahead of folding them (see [`ToolFold::fold_to`]); a fold of more than one
/// batch is *long*.
const BATCH: usize = 128;

/// What a fold reads of the log besides its records.
#[derive(Clone, Copy)]
pub(crate) struct FoldLog<'a> {
    /// The log's name table, which numbered the records' names.
    pub names: &'a ToolNames,
    /// Every developer message's update, in log order.
    pub updates: &'a imbl::Vector<ToolUpdate>,
}

/// The slots by name id: persistent between folds (a fold clones in O(1)), uniquely owned
/// during a long one (no copy-on-write check per write), then persistent again.
#[derive(Clone)]
enum Slots {
    Shared(imbl::Vector<Slot>),
    Owned(Vec<Slot>),
}

impl Default for Slots {
    fn default() -> Self {
        Slots::Shared(imbl::Vector::new())
    }
}

impl Slots {
    fn get(&self, i: usize) -> Option<&Slot> {
        match self {
            Slots::Shared(v) => v.get(i),
            Slots::Owned(v) => v.get(i),
        }
    }

    /// The slot `i`, the slots grown to hold it.
    fn get_mut(&mut self, i: usize) -> &mut Slot {
        match self {
            Slots::Shared(v) => {
                while v.len() <= i {
                    v.push_back(Slot::default());
                }
                &mut v[i]
            }
            Slots::Owned(v) => {
                if v.len() <= i {
                    v.resize(i + 1, Slot::default());
                }
                &mut v[i]
            }
        }
    }

    /// Makes the slots uniquely owned. O(names).
    fn own(&mut self) {
        if let Slots::Shared(v) = self {
            *self = Slots::Owned(std::mem::take(v).into_iter().collect());
        }
    }

    /// Makes the slots persistent again. O(names).
    fn share(&mut self) {
        if let Slots::Owned(v) = self {
            *self = Slots::Shared(std::mem::take(v).into_iter().collect());
        }
    }
}

/// Reads what folding `record` will read first behind its pointers (a developer message's
/// update, whose count the fold increments), so that the fold then finds it cached. The sum
/// means nothing.
fn first_read(record: &FoldRecord) -> usize {
    match record {
        // What a header's fold reads is in its record, unless it opens a series.
        FoldRecord::Header(h) => usize::from(h.opens),
        FoldRecord::Developer(d) => d.update.additions().len(),
    }
}

/// The slot of `id` in `slots`, emptied first when an earlier series than `series` wrote it.
fn slot_mut(slots: &mut Slots, series: u32, id: NameId) -> &mut Slot {
    let slot = slots.get_mut(id as usize);
    if slot.series != series {
        *slot = Slot {
            series,
            ..Slot::default()
        };
    }
    slot
}

/// Fold state after some prefix of a log.
#[derive(Clone, Default)]
pub(crate) struct ToolFold {
    kind: FoldKind,
    /// The rules the log was written under: under [`LogRules::V3`] a removed baseline tool
    /// returning opens a series by reference ([decision 96](crate::manual::decisions#decision-96)).
    rules: LogRules,
    /// The latest header's `Seq` (its tools are `active`), if one has been folded.
    latest: Option<Seq>,
    baseline: Arc<[ToolSchema]>,
    /// Whether the baseline holds a tool without `deferLoading`.
    baseline_has_immediate: bool,
    /// The current declaration series' number (0 before the first header).
    series: u32,
    /// By name id: whether declared and available in the current series.
    slots: Slots,
    /// Declared names in the order they were first declared in the series.
    declared_order: imbl::Vector<NameId>,
    /// Number of available names.
    available: usize,
    active: Arc<[ToolSchema]>,
    /// The name id of each active tool.
    active_names: Arc<[NameId]>,
    /// By reference: every active tool's name is undeclared or declared with that very tool
    /// (`same_tool`), so a header's tool the same as the active one of its name redefines
    /// nothing and needs no look-up. Cleared when a developer message resolves a name through
    /// another header than the latest.
    active_declared: bool,
    updates: imbl::Vector<ToolUpdate>,
    /// The position of the series' first update in the log's list of them (`FoldLog::updates`).
    series_start: usize,
    /// Developer messages folded: the series' updates are the log's `series_start..developers`.
    developers: usize,
    /// The log's names as of the last events folded: what [`is_available`](Self::is_available)
    /// and [`declared`](Self::declared) look a name up in. Every id in the state is numbered
    /// there as the folded log numbered it.
    names: ToolNames,
    /// Events folded so far.
    upto: usize,
}

impl ToolFold {
    /// An empty fold of `kind` for a log written under `rules`.
    pub fn new(kind: FoldKind, rules: LogRules) -> Self {
        ToolFold {
            kind,
            rules,
            ..ToolFold::default()
        }
    }

    /// Number of events folded.
    pub fn upto(&self) -> usize {
        self.upto
    }

    /// Whether folding `event` can change the snapshot: only headers and developer messages
    /// do (the log keeps a [`FoldRecord`] of exactly these).
    pub fn can_change(event: &Event) -> bool {
        match event {
            Event::Header(_) => true,
            Event::Message(m) => m.message.role() == Role::Developer,
            _ => false,
        }
    }

    /// Folds the events `[upto(), upto)` of a log, given as the records of those among them
    /// that [can change](Self::can_change) the fold, in order (the others change nothing).
    /// `log` holds the log's name table, which numbered the records' names, and its updates.
    /// Returns whether a record was folded. O(given records + their tools and changes), no
    /// name hashed; a long fold also O(names + log n).
    pub fn fold_to<'r>(
        &mut self,
        records: impl IntoIterator<Item = &'r FoldRecord>,
        upto: usize,
        log: FoldLog<'_>,
    ) -> bool {
        let mut changed = false;
        let mut records = records.into_iter();
        let mut batch: Vec<&FoldRecord> = Vec::new();
        // The latest header folded here and the latest that opened a series: `active` and
        // `baseline` until the end, where they are taken.
        let mut latest: Option<&HeaderRecord> = None;
        let mut baseline: Option<&HeaderRecord> = None;
        // A long fold (a first batch that is full) writes its slots uniquely owned, and takes
        // the series' updates from the log at the end as one slice instead of pushing each.
        let mut long = false;
        loop {
            // A developer record's update is an allocation of its own, made when the message
            // joined the log: first every record of a batch is read (the reads do not depend
            // on each other, so their cache misses overlap), then the batch is folded.
            batch.clear();
            batch.extend(records.by_ref().take(BATCH));
            if batch.is_empty() {
                break;
            }
            if !long && !changed && batch.len() == BATCH {
                long = true;
                self.slots.own();
            }
            if !long {
                let read = batch
                    .iter()
                    .fold(0usize, |sum, r| sum.wrapping_add(first_read(r)));
                std::hint::black_box(read);
            }
            for record in &batch {
                debug_assert!(record.seq().index() >= self.upto && record.seq().index() < upto);
                changed = true;
                match record {
                    FoldRecord::Header(h) => {
                        debug_assert_eq!(h.updates_before, self.developers);
                        if self.header(h, long) {
                            baseline = Some(h);
                        }
                        latest = Some(h);
                    }
                    FoldRecord::Developer(d) => {
                        debug_assert_eq!(d.ordinal, self.developers);
                        self.developer(d, long);
                    }
                }
            }
        }
        if long {
            self.slots.share();
            // The series' updates are every developer message since its header, in order.
            self.updates = log
                .updates
                .skip(self.series_start)
                .take(self.developers - self.series_start);
        }
        // The latest header's and the baseline's tools are taken (each an `Arc` clone, which
        // writes to the header's allocation) once, not at every header.
        if let Some(h) = baseline {
            self.baseline = Arc::clone(&h.tools);
        }
        if let Some(h) = latest {
            self.active = Arc::clone(&h.tools);
            self.active_names = Arc::clone(&h.names);
        }
        if changed {
            self.names = log.names.clone();
        }
        self.upto = self.upto.max(upto);
        changed
    }

    /// [reference §3](crate::manual::reference#3-toolhistory-the-cached-reducer) step 2 (§3.1 for
    /// the by-value fold): whether a header with these properties opens a declaration series.
    pub fn opens_declaration_series(&self, h: &HeaderEvent) -> bool {
        self.opens(
            super::record::opens_whatever_the_fold(h),
            &h.header.tools,
            None,
        )
    }

    /// [`opens_declaration_series`](Self::opens_declaration_series) of a header whose series
    /// flags say `opens`, with these tools and, for a header of the log, their name ids.
    fn opens(&self, opens: bool, tools: &[ToolSchema], ids: Option<&[NameId]>) -> bool {
        if self.latest.is_none() || opens {
            return true;
        }
        if self.kind == FoldKind::ByValue {
            return false;
        }
        // A name declared in the series with another definition (a removed tool returning
        // changed included): by reference, the new definition cannot be sent otherwise.
        self.redefines_declared(tools, ids)
            // A session that began without an immediately available tool gets a usable
            // baseline at its first one (departure).
            || (!self.baseline_has_immediate && tools.iter().any(|t| !t.defer_loading()))
            || (self.rules == LogRules::V3
                && tools.iter().enumerate().any(|(i, t)| {
                    let id = match ids {
                        Some(ids) => Some(ids[i]),
                        None => self.names.get(t.name()),
                    };
                    id.is_some_and(|id| self.baseline_tool_returns(id))
                }))
    }

    /// Under [`LogRules::V3`]: whether `id` is a baseline tool without `deferLoading` that a
    /// removal withdrew (its return opened a new series before the re-offer rule, departure 2).
    fn baseline_tool_returns(&self, id: NameId) -> bool {
        self.slot(id)
            .is_some_and(|s| s.baseline_immediate && !s.available)
    }

    /// Whether one of `tools` has a name declared in the series with another definition.
    /// A tool the same as the active one of its name (found near its own position among the
    /// active tools) is not, when `active_declared` holds; any other is looked up, by its id
    /// in `ids` when given, else by its name.
    fn redefines_declared(&self, tools: &[ToolSchema], ids: Option<&[NameId]>) -> bool {
        let active: &[ToolSchema] = if self.active_declared {
            &self.active
        } else {
            &[]
        };
        let mut next = 0;
        tools.iter().enumerate().any(|(i, t)| {
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
            let id = match ids {
                Some(ids) => Some(ids[i]),
                None => self.names.get(t.name()),
            };
            id.and_then(|id| self.declared_id(id))
                .is_some_and(|d| !d.same_tool(t))
        })
    }

    /// Folds the header `h`; returns whether it opened a series (its tools are the new
    /// baseline). Leaves `active`, `active_names` and `baseline` to the caller (see
    /// [`fold_to`](Self::fold_to)).
    fn header(&mut self, h: &HeaderRecord, long: bool) -> bool {
        let opens = self.latest.is_none()
            || h.opens
            || (self.kind == FoldKind::ByReference
                && (self.record_redefines_declared(h)
                    || (!self.baseline_has_immediate && h.has_immediate)
                    || (self.rules == LogRules::V3
                        && h.names.iter().any(|&id| self.baseline_tool_returns(id)))));
        if opens {
            self.baseline_has_immediate = h.has_immediate;
            self.series += 1;
            self.declared_order = imbl::Vector::new();
            self.available = 0;
            for (t, &id) in h.tools.iter().zip(h.names.iter()) {
                let slot = slot_mut(&mut self.slots, self.series, id);
                if slot.def.is_none() {
                    self.declared_order.push_back(id);
                }
                slot.baseline_immediate = !t.defer_loading();
                slot.def = Some(t.clone());
                if !slot.available {
                    slot.available = true;
                    self.available += 1;
                }
            }
            self.series_start = h.updates_before;
            if !long {
                self.updates = imbl::Vector::new();
            }
        }
        // Opening, the declarations are these tools; otherwise (by reference) the check just
        // made found each undeclared or declared the same.
        self.active_declared = self.kind == FoldKind::ByReference;
        self.latest = Some(h.seq);
        opens
    }

    /// [`redefines_declared`](Self::redefines_declared) for a header of the log: while every
    /// active tool (the previous header's) is declared as itself, only the header's novel
    /// tools are looked up, from the record itself.
    fn record_redefines_declared(&self, h: &HeaderRecord) -> bool {
        let redefines =
            |t: &ToolSchema, id: NameId| self.declared_id(id).is_some_and(|d| !d.same_tool(t));
        if self.active_declared {
            h.novel.iter().any(|n| redefines(&n.tool, n.name))
        } else {
            h.tools
                .iter()
                .zip(h.names.iter())
                .any(|(t, &id)| redefines(t, id))
        }
    }

    /// The slot of `id` in the current series, if the series has written it.
    fn slot(&self, id: NameId) -> Option<&Slot> {
        self.slots
            .get(id as usize)
            .filter(|s| s.series == self.series)
    }

    fn declared_id(&self, id: NameId) -> Option<&ToolSchema> {
        self.slot(id).and_then(|s| s.def.as_ref())
    }

    fn available_id(&self, id: NameId) -> bool {
        self.slot(id).is_some_and(|s| s.available)
    }

    fn developer(&mut self, m: &DeveloperRecord, long: bool) {
        for change in m.changes.iter() {
            let redefines = match change.kind {
                ChangeKind::Removal => {
                    if self.available_id(change.name) {
                        slot_mut(&mut self.slots, self.series, change.name).available = false;
                        self.available -= 1;
                    }
                    continue;
                }
                ChangeKind::Addition => false,
                // A redefinition leaves availability unchanged.
                ChangeKind::Redefinition if change.def.is_none() => continue,
                ChangeKind::Redefinition => true,
            };
            let slot = slot_mut(&mut self.slots, self.series, change.name);
            if let Some(def) = &change.def {
                // A definition from another header than the latest may differ from the
                // active tool of its name.
                if m.header != self.latest {
                    self.active_declared = false;
                }
                // The same schema already (a tool added back): nothing to write.
                let same = slot.def.as_ref().is_some_and(|d| {
                    d.shares_definition_with(def) && d.defer_loading() == def.defer_loading()
                });
                if slot.def.is_none() {
                    self.declared_order.push_back(change.name);
                }
                if !same {
                    slot.def = Some(def.clone());
                }
            }
            if !redefines && !slot.available {
                slot.available = true;
                self.available += 1;
            }
        }
        // The update was resolved when the message joined the log (a long fold takes them
        // all at its end).
        self.developers += 1;
        if !long {
            self.updates.push_back(m.update.clone());
        }
    }

    /// Whether the snapshot may be the series' (otherwise: the guard). The available names
    /// must be exactly the active names; by value, each active tool must also be the
    /// definition the history resolved for its name (an interrupted record of a redefinition
    /// leaves them apart).
    fn consistent(&self) -> bool {
        self.available == self.active.len()
            && self
                .active
                .iter()
                .zip(self.active_names.iter())
                .all(|(t, &id)| {
                    self.available_id(id)
                        && (self.kind == FoldKind::ByReference
                            || self.declared_id(id).is_some_and(|d| d.same_tool(t)))
                })
    }

    /// The snapshot of [reference §3](crate::manual::reference#3-toolhistory-the-cached-reducer)
    /// "Reading".
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
        self.names.get(name).is_some_and(|id| self.available_id(id))
    }

    /// The definition the series resolved for `name` (last wins), removed names included.
    pub fn declared(&self, name: &str) -> Option<&ToolSchema> {
        self.names.get(name).and_then(|id| self.declared_id(id))
    }

    /// Available names in the order the fold declared them.
    pub fn available_in_declared_order(&self) -> impl Iterator<Item = &str> {
        self.declared_order
            .iter()
            .filter(|id| self.available_id(**id))
            .filter_map(|id| self.declared_id(*id))
            .map(ToolSchema::name)
    }
}
