//! Fold records: what a tool fold reads of a header or a developer message, written once when
//! the event joins the log ([decision 80](crate::manual::decisions#decision-80)).
//!
//! At append the event is in cache and its names have just been looked up by validation; a
//! fold from scratch, much later, would find each event, its blocks and their names in
//! separate allocations, and hash every name again. So the log keeps, beside each header and
//! developer message, a small record: the header's tools with a dense *name id* for each; the
//! message's tool changes as (kind, name id, definition resolved through its header). The
//! fold indexes its state by name id and never hashes a name.

use std::sync::Arc;

use super::ToolUpdate;
use crate::event::{HeaderEvent, MessageEvent, Reason};
use crate::vocab::{ContentBlock, Seq, ToolIndex, ToolSchema};

/// A tool name's number in one log: dense, in the order the names first appear in the log's
/// headers and developer messages. Event order alone decides it, so a fork, which applies its
/// parent's events again in order, numbers them as the parent did.
pub(crate) type NameId = u32;

/// The log's tool names and their ids. Persistent, so that it clones in O(1) with the log's
/// state (a refused batch leaves no name behind) and a fold keeps the table it folded with.
#[derive(Clone, Default)]
pub(crate) struct ToolNames {
    ids: imbl::HashMap<Arc<str>, NameId>,
}

impl ToolNames {
    /// The id of `name`, if the log has met it.
    pub fn get(&self, name: &str) -> Option<NameId> {
        self.ids.get(name).copied()
    }

    /// The id of `name`, numbering it when it is new.
    fn id(&mut self, name: &str) -> NameId {
        if let Some(id) = self.get(name) {
            return id;
        }
        let id = NameId::try_from(self.ids.len()).expect("fewer than 2^32 tool names");
        self.ids.insert(Arc::from(name), id);
        id
    }

    /// The ids of `tools`, and those of them that are not the same tool as the previous
    /// header's tool of their name ([`HeaderRecord::novel`]). `previous` is the latest
    /// header's tools, their ids and its index. A tool that shares its definition with one of
    /// the previous tools near its own position has that one's name, which is taken without
    /// hashing it: interned definitions make that the usual case.
    fn ids_of(
        &mut self,
        tools: &[ToolSchema],
        previous: Option<Previous<'_>>,
    ) -> (Arc<[NameId]>, Vec<NovelTool>) {
        let (before, before_ids) = previous.map_or((&[][..], &[][..]), |p| (p.tools, &p.names[..]));
        let mut next = 0;
        let mut novel = Vec::new();
        let ids: Vec<NameId> = tools
            .iter()
            .map(|t| {
                let near = before
                    .get(next..before.len().min(next + super::reducer::LOOKAHEAD))
                    .and_then(|b| {
                        b.iter()
                            .position(|b| b.shares_definition_with(t) || b.name() == t.name())
                    });
                let (id, same) = match near {
                    Some(i) => {
                        next += i + 1;
                        (before_ids[next - 1], before[next - 1].same_tool(t))
                    }
                    None => {
                        let earlier = previous.and_then(|p| p.index.get(t.name()));
                        (self.id(t.name()), earlier.is_some_and(|e| e.same_tool(t)))
                    }
                };
                if !same {
                    novel.push(NovelTool {
                        tool: t.clone(),
                        name: id,
                    });
                }
                id
            })
            .collect();
        // The same names in the same order as the previous header's (its tools unchanged, or
        // only redefined): its ids are shared, not copied.
        let ids = match previous {
            Some(p) if p.names[..] == ids[..] => Arc::clone(p.names),
            _ => ids.into(),
        };
        (ids, novel)
    }
}

/// The latest header of a log, as the next header's record is made against it.
#[derive(Clone, Copy)]
pub(crate) struct Previous<'a> {
    pub tools: &'a [ToolSchema],
    pub names: &'a Arc<[NameId]>,
    pub index: &'a ToolIndex,
}

/// A short list kept in the record itself: the first `N` items inline, the rest (rare)
/// behind one pointer, so that folding a record usually reads no other allocation.
#[derive(Clone)]
pub(crate) struct Few<T, const N: usize> {
    inline: [Option<T>; N],
    more: Option<Arc<[T]>>,
}

impl<T, const N: usize> Few<T, N> {
    fn new(items: impl IntoIterator<Item = T>) -> Self {
        let mut items = items.into_iter();
        let inline = std::array::from_fn(|_| items.next());
        let more: Vec<T> = items.collect();
        Few {
            inline,
            more: (!more.is_empty()).then(|| more.into()),
        }
    }

    /// The items, in order.
    pub fn iter(&self) -> impl Iterator<Item = &T> {
        self.inline
            .iter()
            .map_while(Option::as_ref)
            .chain(self.more.iter().flat_map(|more| more.iter()))
    }
}

/// What a fold reads of one header or developer message.
#[derive(Clone)]
pub(crate) enum FoldRecord {
    /// A `request/header`.
    Header(HeaderRecord),
    /// A developer message.
    Developer(DeveloperRecord),
}

impl FoldRecord {
    /// The event's position in the log.
    pub fn seq(&self) -> Seq {
        match self {
            FoldRecord::Header(h) => h.seq,
            FoldRecord::Developer(d) => d.seq,
        }
    }
}

/// A header's tools and their name ids.
#[derive(Clone)]
pub(crate) struct HeaderRecord {
    pub seq: Seq,
    /// The header opens a declaration series whatever the fold holds (`reason: series` or
    /// `startsSeries`).
    pub opens: bool,
    /// Whether a tool is without `deferLoading`.
    pub has_immediate: bool,
    /// The number of developer messages before the header (where its series' updates would
    /// start in the log's list of them).
    pub updates_before: usize,
    /// The header's own tool slice (shared, not copied).
    pub tools: Arc<[ToolSchema]>,
    /// Each tool's name id, in the tools' order.
    pub names: Arc<[NameId]>,
    /// The tools that are not the same tool as the previous header's tool of their name (a new
    /// name, a changed definition or `deferLoading`), in order: the only ones that can
    /// redefine a declared name while every previous tool is declared as itself. Usually none
    /// or a few.
    pub novel: Few<NovelTool, 2>,
}

/// A header's tool and its name id.
#[derive(Clone)]
pub(crate) struct NovelTool {
    pub tool: ToolSchema,
    pub name: NameId,
}

impl HeaderRecord {
    /// The record of the header `h` at `seq`, its names numbered in `names`, made against
    /// the latest header before it, if any.
    pub fn new(
        seq: Seq,
        h: &HeaderEvent,
        updates_before: usize,
        names: &mut ToolNames,
        previous: Option<Previous<'_>>,
    ) -> Self {
        let tools = &h.header.tools;
        let (ids, novel) = names.ids_of(tools, previous);
        HeaderRecord {
            seq,
            updates_before,
            opens: opens_whatever_the_fold(h),
            has_immediate: tools.iter().any(|t| !t.defer_loading()),
            tools: Arc::clone(tools),
            names: ids,
            novel: Few::new(novel),
        }
    }
}

/// Whether `h` opens a declaration series on its own ([reference
/// §3](crate::manual::reference#3-toolhistory-the-cached-reducer) step 2).
pub(super) fn opens_whatever_the_fold(h: &HeaderEvent) -> bool {
    h.reason == Reason::Series || h.starts_series
}

/// A developer message's update, the header its changes name, and the changes.
#[derive(Clone)]
pub(crate) struct DeveloperRecord {
    pub seq: Seq,
    /// `headerSeq`.
    pub header: Option<Seq>,
    /// The message's entry in a snapshot: its id (the log's own allocation of it, shared with
    /// its id map) and its resolved additions and redefinitions.
    pub update: ToolUpdate,
    /// The number of developer messages before this one (its update's position in the log's
    /// list of them).
    pub ordinal: usize,
    /// The tool-change blocks, in order; other blocks change no fold and are left out.
    pub changes: Few<Change, 3>,
}

impl DeveloperRecord {
    /// The record of the developer message `m` at `seq`, whose id the log holds as `id`. An
    /// addition or redefinition is resolved through `header`, the index of the header `m`
    /// names (validation has checked that it holds the name).
    pub fn new(
        seq: Seq,
        m: &MessageEvent,
        ordinal: usize,
        id: Arc<str>,
        header: Option<&ToolIndex>,
        names: &mut ToolNames,
    ) -> Self {
        let changes = m
            .message
            .content()
            .iter()
            .filter_map(|block| {
                let (kind, name) = match block {
                    ContentBlock::ToolAddition(r) => (ChangeKind::Addition, r.tool_name()),
                    ContentBlock::ToolRedefinition(r) => (ChangeKind::Redefinition, r.tool_name()),
                    ContentBlock::ToolRemoval(r) => (ChangeKind::Removal, r.tool_name()),
                    _ => return None,
                };
                let def = match kind {
                    ChangeKind::Removal => None,
                    _ => header.and_then(|index| index.get(name)).cloned(),
                };
                Some(Change {
                    kind,
                    name: names.id(name),
                    def,
                })
            })
            .collect::<Vec<_>>();
        let resolved = |kind: ChangeKind| {
            changes
                .iter()
                .filter(|c| c.kind == kind)
                .filter_map(|c| c.def.clone())
                .collect()
        };
        let update = ToolUpdate::of(
            id,
            resolved(ChangeKind::Addition),
            resolved(ChangeKind::Redefinition),
        );
        DeveloperRecord {
            seq,
            header: m.header_seq,
            update,
            ordinal,
            changes: Few::new(changes),
        }
    }
}

/// One tool-change block of a developer message.
#[derive(Clone)]
pub(crate) struct Change {
    pub kind: ChangeKind,
    pub name: NameId,
    /// An addition's or redefinition's definition in the header the message names (`None`
    /// for a removal, or without `headerSeq`).
    pub def: Option<ToolSchema>,
}

/// Which tool-change block a [`Change`] is.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum ChangeKind {
    Addition,
    Redefinition,
    Removal,
}
