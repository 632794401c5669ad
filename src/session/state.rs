//! The committed log and what validation needs of it, as persistent (`im`) structures.
//!
//! A `LogState` clones in O(1), so a batch is validated and applied on a working copy and
//! committed by swapping it in: all or nothing, with nothing to undo.

use std::collections::HashSet;

use std::sync::Arc;

use super::SurfaceNode;
pub(crate) use super::append_error::{AppendError, AppendErrorKind};
pub(crate) use super::pairing::*;
use crate::event::{
    Event, HeaderEvent, MessageEvent, Rewrite, SurfaceOp, ThinkingEvent, ThinkingPolicy,
    is_known_event_type,
};
use crate::history::{
    DeveloperRecord, FoldLog, FoldRecord, HeaderRecord, NameId, Previous, ToolFold, ToolNames,
    ToolUpdate,
};
use crate::vocab::{
    ContentBlock, DEFERRED_PLACEHOLDER_NAME, MessageSource, Role, Seq, ToolIndex, ToolInterner,
    arguments_depth,
};

/// The log and the facts validation reads, all O(1) to clone.
#[derive(Clone, Default)]
pub(crate) struct LogState {
    pub(super) events: imbl::Vector<Event>,
    /// Exact bytes (without `\n`) of loaded lines; `None` for events made in this process.
    pub(super) lines: imbl::Vector<Option<Arc<str>>>,
    /// Every message id and the `Seq` of the event that holds it.
    pub(super) message_ids: imbl::HashMap<Arc<str>, Seq>,
    /// The `thinking/policy` event, if any.
    pub(super) thinking_policy: Option<ThinkingPolicy>,
    /// Each route's latest `thinking/floor`, by (provider, model).
    pub(super) thinking_floors: imbl::HashMap<(Arc<str>, Arc<str>), (Seq, Rewrite)>,
    pub(super) surface: imbl::Vector<SurfaceNode>,
    pub(super) generation: u64,
    /// Bumped on every surface change; keys the messages cache.
    pub(super) surface_version: u64,
    pub(super) latest_header: Option<(Seq, Arc<HeaderEvent>)>,
    /// Every header's tools by name, built once when the header is applied; developer messages
    /// are checked against it, and their fold records resolve their names through it.
    pub(super) tool_indexes: imbl::HashMap<Seq, Arc<ToolIndex>>,
    /// The log's tool definitions, one allocation per written form: a header joining the log
    /// shares the definitions already there ([decision 76](crate::manual::decisions#decision-76)).
    pub(super) tools: ToolInterner,
    /// A record of each event a tool fold reads (headers and developer messages), in order, written
    /// at apply ([decision 80](crate::manual::decisions#decision-80)): a fold reads these dense
    /// records, never the events, and skips the user, assistant and tool events without looking at
    /// them.
    pub(super) fold_records: imbl::Vector<FoldRecord>,
    /// Every developer message's [`ToolUpdate`] in log order: a series' updates are the run of
    /// them since its header, which a long fold takes as one slice of this list.
    pub(super) tool_updates: imbl::Vector<ToolUpdate>,
    /// The tool names of the log's headers and developer messages, numbered for the fold
    /// records.
    pub(super) tool_names: ToolNames,
    /// The name ids of the latest header's tools (`latest_header`), so that the next header's
    /// unchanged tools take theirs without hashing a name.
    pub(super) latest_header_names: Arc<[NameId]>,
    /// The loaded file's last line had no `\n` and nothing was appended since.
    pub(super) unterminated_tail: bool,
    /// The latest surface replace.
    pub(super) last_replace: Option<Seq>,
    /// Tool calls and results on the surface, for the pairing rules.
    pub(super) pairing: Pairing,
    /// The `Seq` of every header, in order, so that the header in force at any position is
    /// found in O(log n) (the registration guard reads it).
    pub(super) header_seqs: imbl::Vector<usize>,
}

/// Which rules a check applies.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rules {
    /// Everything: `append`, `append_json`, batches.
    Append,
    /// Loading a file: everything but the surface rules added after files were written ([reference
    /// §1](crate::manual::reference#1-vocabulary-and-json) items 16 to 18), so a file that loaded
    /// before still loads (item 19).
    Load,
}

/// What the agent reads of the log's state: the fields stay the session's own, so that the
/// validation that keeps them consistent is the only writer and their layout can change.
impl LogState {
    /// Bumped by every committed batch: a recorder compares it before and after to know that
    /// no other batch went in between.
    pub(crate) fn generation(&self) -> u64 {
        self.generation
    }

    /// The latest request header and its `Seq`.
    pub(crate) fn latest_header(&self) -> Option<&(Seq, Arc<HeaderEvent>)> {
        self.latest_header.as_ref()
    }

    /// The messages the next request is built from, in order.
    pub(crate) fn surface(&self) -> &imbl::Vector<SurfaceNode> {
        &self.surface
    }

    /// The session's thinking policy, if one was chosen.
    pub(crate) fn thinking_policy(&self) -> Option<ThinkingPolicy> {
        self.thinking_policy
    }

    /// The `Seq` of the event that holds message `id`.
    pub(crate) fn seq_of(&self, id: &str) -> Option<Seq> {
        self.message_ids.get(id).copied()
    }

    /// The latest `thinking/floor` of a route's provider and model.
    pub(crate) fn thinking_floor(&self, provider: &str, model: &str) -> Option<(Seq, Rewrite)> {
        self.thinking_floors
            .get(&(Arc::from(provider), Arc::from(model)))
            .copied()
    }
}

impl LogState {
    pub fn len(&self) -> usize {
        self.events.len()
    }

    /// The events in `range`, without walking the ones before it (`iter().skip(n)` on an
    /// `imbl::Vector` is O(n)). O(log n) to start, O(1) per event.
    pub fn range(&self, range: std::ops::Range<usize>) -> impl Iterator<Item = &Event> {
        // `Focus::narrow` panics on an empty range.
        (!range.is_empty())
            .then(|| self.events.focus().narrow(range))
            .into_iter()
            .flatten()
    }

    /// The fold records (`fold_records`) of the events in `range`, in order. An incremental
    /// fold's range is at the end of the log: its first record is found by a walk back from
    /// the last, O(its records); a longer walk gives way to a binary search, O(log² n).
    pub fn fold_records_in(
        &self,
        range: std::ops::Range<usize>,
    ) -> impl Iterator<Item = &FoldRecord> {
        /// Up to this many records back from the end, walking is cheaper than searching.
        const WALK: usize = 64;
        let records = &self.fold_records;
        let len = records.len();
        let at_or_after = |r: &FoldRecord| r.seq().index() >= range.start;
        let back = records
            .iter()
            .rev()
            .take(WALK)
            .take_while(|r| at_or_after(r))
            .count();
        let first = if back < WALK.min(len) {
            len - back
        } else {
            match records.binary_search_by(|r| r.seq().index().cmp(&range.start)) {
                Ok(i) | Err(i) => i,
            }
        };
        let end = range.end;
        // From the first record (a fold from scratch), chunk by chunk: a slice each, no
        // look-up per record.
        let whole = (first == 0).then(|| records.leaves().flatten());
        let part = (first > 0 && first < len).then(|| records.focus().narrow(first..));
        whole
            .into_iter()
            .flatten()
            .chain(part.into_iter().flatten())
            .take_while(move |r| r.seq().index() < end)
    }

    /// What a fold reads of the log besides its records.
    pub fn fold_log(&self) -> FoldLog<'_> {
        FoldLog {
            names: &self.tool_names,
            updates: &self.tool_updates,
        }
    }

    pub fn next_seq(&self) -> Seq {
        Seq::from(self.events.len())
    }

    /// [reference §1](crate::manual::reference#1-vocabulary-and-json) validation of `event` as the
    /// next event. O(size of the event + log n), and a replace walks the smaller of what it removes
    /// and what it keeps: O(1) per node, O(log n) per tool call or result among them.
    pub fn check(&self, event: &Event, rules: Rules) -> Result<(), AppendError> {
        self.check_kind(event)
            .and_then(|()| match rules {
                Rules::Append => self.check_pairing(event),
                Rules::Load => Ok(()),
            })
            .map_err(|kind| AppendError::new(self.next_seq(), kind))
    }

    /// The surface rules of [reference §1](crate::manual::reference#1-vocabulary-and-json) items 16
    /// to 18 (after the others passed, so a replace's range is on the surface): no empty assistant
    /// message, no tool result without its call. `append` only: loading skips them (item 19).
    fn check_pairing(&self, event: &Event) -> Result<(), AppendErrorKind> {
        let (op, message) = match event {
            Event::Message(m) => (m.surface_op, Some(&m.message)),
            Event::Opaque(o) => (o.surface_op(), None),
            _ => return Ok(()),
        };
        let Some(op) = op else { return Ok(()) };
        if let Some(m) = message {
            let empty =
                |b: &ContentBlock| matches!(b, ContentBlock::Text { text } if text.is_empty());
            if m.role() == Role::Assistant && m.content().iter().all(empty) {
                return Err(AppendErrorKind::EmptyAssistantMessage {
                    id: m.id().to_owned(),
                });
            }
            if let Some(call_id) = result_call_id(m) {
                let below = match op {
                    SurfaceOp::Append => None,
                    SurfaceOp::Replace { start, .. } => self.pairing.keys.get(start).copied(),
                };
                if !self.pairing.call_before(call_id, below) {
                    return Err(AppendErrorKind::OrphanToolResult {
                        id: m.id().to_owned(),
                        call_id: call_id.to_owned(),
                    });
                }
            }
        }
        if let SurfaceOp::Replace { start, end } = op
            && let Some((call_id, result)) =
                self.pairing
                    .orphaned_by_replace(&self.surface, start, end, message)
        {
            return Err(AppendErrorKind::ReplaceOrphansToolResult {
                start,
                end,
                call_id,
                result,
            });
        }
        Ok(())
    }

    fn check_kind(&self, event: &Event) -> Result<(), AppendErrorKind> {
        check_encodable(event)?;
        match event {
            Event::Header(h) => {
                let mut names = HashSet::with_capacity(h.header.tools.len());
                for (index, t) in h.header.tools.iter().enumerate() {
                    if t.name().is_empty() {
                        return Err(AppendErrorKind::EmptyToolName { index });
                    }
                    if t.name() == DEFERRED_PLACEHOLDER_NAME {
                        return Err(AppendErrorKind::ReservedToolName { index });
                    }
                    if !names.insert(t.name()) {
                        return Err(AppendErrorKind::DuplicateToolName {
                            tool: t.name().to_owned(),
                        });
                    }
                }
                Ok(())
            }
            Event::Message(m) => self.check_message(m),
            Event::Opaque(o) => self.check_surface_op(o.surface_op()),
            Event::Thinking(t) => match **t {
                ThinkingEvent::Policy(_)
                    if self.thinking_policy.is_some() || !self.thinking_floors.is_empty() =>
                {
                    Err(AppendErrorKind::ThinkingPolicyChosen {
                        chosen: self.thinking_policy.unwrap_or_default().as_str(),
                    })
                }
                _ => Ok(()),
            },
        }
    }

    fn check_message(&self, m: &MessageEvent) -> Result<(), AppendErrorKind> {
        let msg = &m.message;
        let id = || msg.id().to_owned();
        if self.message_ids.contains_key(msg.id()) {
            return Err(AppendErrorKind::DuplicateMessageId { id: id() });
        }
        if let Some(index) = msg
            .content()
            .iter()
            .position(|b| matches!(b, ContentBlock::InlineAddition(_)))
        {
            return Err(AppendErrorKind::ProjectionOnlyBlock { id: id(), index });
        }
        for block in msg.content() {
            if let ContentBlock::ToolCall(call) = block
                && arguments_depth(call.arguments()) > ContentBlock::ARGUMENTS_DEPTH_LIMIT
            {
                return Err(AppendErrorKind::ArgumentsTooDeep {
                    id: id(),
                    call_id: call.id().to_owned(),
                    limit: ContentBlock::ARGUMENTS_DEPTH_LIMIT,
                });
            }
        }
        let role = msg.role();
        if role == Role::Tool && !matches!(msg.source(), MessageSource::Tool { .. }) {
            return Err(AppendErrorKind::ToolResultWithoutCallId { id: id() });
        }
        if role != Role::Developer {
            if msg.content().iter().any(ContentBlock::is_tool_change) {
                return Err(AppendErrorKind::ToolChangeOutsideDeveloper { id: id(), role });
            }
            if m.header_seq.is_some() {
                return Err(AppendErrorKind::HeaderSeqOutsideDeveloper { id: id(), role });
            }
        } else {
            // One index per header, built when it was applied: O(1) per block.
            let header = match m.header_seq {
                Some(h) => match self.tool_indexes.get(&h) {
                    Some(index) => Some((h, index)),
                    None => return Err(AppendErrorKind::UnknownHeader { header: h }),
                },
                None => None,
            };
            for block in msg.content() {
                let (tool_name, redefines) = match block {
                    ContentBlock::ToolAddition(r) => (r.tool_name(), false),
                    ContentBlock::ToolRedefinition(r) => (r.tool_name(), true),
                    _ => continue,
                };
                let tool = tool_name.to_owned();
                match header {
                    None if redefines => {
                        return Err(AppendErrorKind::RedefinitionWithoutHeaderSeq {
                            id: id(),
                            tool,
                        });
                    }
                    None => {
                        return Err(AppendErrorKind::AdditionWithoutHeaderSeq { id: id(), tool });
                    }
                    Some((header, index)) if !index.contains(tool_name) => {
                        return Err(if redefines {
                            AppendErrorKind::RedefinitionNotInHeader {
                                id: id(),
                                tool,
                                header,
                            }
                        } else {
                            AppendErrorKind::AdditionNotInHeader {
                                id: id(),
                                tool,
                                header,
                            }
                        });
                    }
                    Some(_) => {}
                }
            }
        }
        self.check_surface_op(m.surface_op)
    }

    fn check_surface_op(&self, op: Option<SurfaceOp>) -> Result<(), AppendErrorKind> {
        match op {
            Some(SurfaceOp::Replace { start, end }) if start > end || end >= self.surface.len() => {
                Err(AppendErrorKind::ReplaceOutOfRange {
                    start,
                    end,
                    len: self.surface.len(),
                })
            }
            _ => Ok(()),
        }
    }

    /// Applies a checked event. Infallible; O(log n), and for a header O(its tools), plus the
    /// size of each definition the log does not hold yet (hashed to intern it).
    pub fn apply(&mut self, event: Event, line: Option<Arc<str>>) {
        let seq = self.next_seq();
        let event = match event {
            Event::Header(h) => Event::Header(self.intern(h)),
            other => other,
        };
        let node = match &event {
            Event::Header(h) => {
                let previous = self.latest_header.as_ref().and_then(|(seq, p)| {
                    Some(Previous {
                        tools: &p.header.tools,
                        names: &self.latest_header_names,
                        index: self.tool_indexes.get(seq)?,
                    })
                });
                let record = HeaderRecord::new(
                    seq,
                    h,
                    self.tool_updates.len(),
                    &mut self.tool_names,
                    previous,
                );
                self.latest_header_names = Arc::clone(&record.names);
                self.fold_records.push_back(FoldRecord::Header(record));
                self.tool_indexes
                    .insert(seq, Arc::new(ToolIndex::new(&h.header.tools)));
                self.header_seqs.push_back(seq.index());
                self.latest_header = Some((seq, Arc::clone(h)));
                None
            }
            Event::Message(m) => {
                let id: Arc<str> = Arc::from(m.message.id());
                if ToolFold::can_change(&event) {
                    let header = m
                        .header_seq
                        .and_then(|h| self.tool_indexes.get(&h))
                        .map(|index| &**index);
                    let record = DeveloperRecord::new(
                        seq,
                        m,
                        self.tool_updates.len(),
                        Arc::clone(&id),
                        header,
                        &mut self.tool_names,
                    );
                    self.tool_updates.push_back(record.update.clone());
                    self.fold_records.push_back(FoldRecord::Developer(record));
                }
                self.message_ids.insert(id, seq);
                m.surface_op
                    .map(|op| (op, SurfaceNode::Message(m.message.clone())))
            }
            Event::Opaque(o) => o.surface_op().map(|op| (op, SurfaceNode::Opaque(seq))),
            Event::Thinking(t) => {
                match &**t {
                    ThinkingEvent::Policy(p) => self.thinking_policy = Some(*p),
                    ThinkingEvent::Floor(f) => {
                        self.thinking_floors.insert(
                            (Arc::from(f.provider.as_str()), Arc::from(f.model.as_str())),
                            (seq, f.rewrite),
                        );
                    }
                }
                None
            }
        };
        if let Some((op, node)) = node {
            self.pairing.apply(&self.surface, seq.index(), op, &node);
            self.surface_version += 1;
            match op {
                SurfaceOp::Append => self.surface.push_back(node),
                SurfaceOp::Replace { start, end } => {
                    let tail = self.surface.split_off(end + 1);
                    self.surface.truncate(start);
                    self.surface.push_back(node);
                    self.surface.append(tail);
                    self.generation += 1;
                    self.last_replace = Some(seq);
                }
            }
        }
        self.events.push_back(event);
        self.lines.push_back(line);
        self.unterminated_tail = false;
    }
}

impl LogState {
    /// `h` with each tool on the log's allocation of its definition ([decision
    /// 76](crate::manual::decisions#decision-76)). A decoded header is changed in place, so its own
    /// copies are dropped before the next line is read; a header someone else also holds is copied
    /// (its tool slice and config), theirs left as it was. Returned as it came when every
    /// definition is its own already (the recorder's headers, whose tools are clones of the
    /// previous header's).
    fn intern(&mut self, mut h: Arc<HeaderEvent>) -> Arc<HeaderEvent> {
        let mut shared: Option<Vec<crate::vocab::ToolSchema>> = None;
        for (i, tool) in h.header.tools.iter().enumerate() {
            if let Some(interned) = self.tools.intern(tool) {
                shared.get_or_insert_with(|| h.header.tools.to_vec())[i] = interned;
            }
        }
        if let Some(tools) = shared {
            Arc::make_mut(&mut h).header.tools = tools.into();
        }
        h
    }
}

/// Refuses events whose line would not decode as the same event: a public unknown-field map
/// holding a key the encoder already writes (a configuration's options cannot: `Config::with`
/// refuses `provider` and `model`), or an opaque event of type `session`
/// (decoded by `append_json`; it would read back as a second session line). O(size of the
/// event).
fn check_encodable(event: &Event) -> Result<(), AppendErrorKind> {
    let reserved = |keys: indexmap::map::Keys<'_, String, serde_json::Value>, taken: &[&str]| {
        keys.into_iter()
            .find(|k| taken.contains(&k.as_str()))
            .map(|k| AppendErrorKind::ReservedKey { key: k.clone() })
    };
    let fault = match event {
        Event::Header(h) => reserved(h.header.extra.keys(), &["config", "tools"]),
        // Only a decoded `session` line gets here: `OpaqueEvent::new` refuses every known
        // type and the keys `type` and `surfaceOp`, and decoding takes those keys out.
        Event::Opaque(o) if is_known_event_type(o.event_type()) => {
            Some(AppendErrorKind::OpaqueKnownType {
                event_type: o.event_type().to_owned(),
            })
        }
        Event::Opaque(_) => None,
        Event::Message(m) => m.message.content().iter().find_map(|b| match b {
            ContentBlock::Reasoning { extra, .. } => reserved(extra.keys(), &["type", "text"]),
            _ => None,
        }),
        Event::Thinking(_) => None,
    };
    fault.map_or(Ok(()), Err)
}
