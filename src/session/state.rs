//! The committed log and what validation needs of it, as persistent (`im`) structures.
//!
//! A `LogState` clones in O(1), so a batch is validated and applied on a working copy and
//! committed by swapping it in: all or nothing, with nothing to undo.

use std::collections::HashSet;
use std::ops::{Bound, RangeBounds};
use std::sync::Arc;

use super::SurfaceNode;
use crate::event::{
    DecodeError, Event, HeaderEvent, MessageEvent, Rewrite, SurfaceOp, ThinkingEvent,
    ThinkingPolicy, is_known_event_type,
};
use crate::history::{
    DeveloperRecord, FoldLog, FoldRecord, HeaderRecord, NameId, Previous, ToolFold, ToolNames,
    ToolUpdate,
};
use crate::store::WriteError;
use crate::vocab::{
    ContentBlock, DEFERRED_PLACEHOLDER_NAME, Message, MessageSource, Role, Seq, ToolIndex,
    ToolInterner, arguments_depth,
};

/// Why `append` (or loading) refused an event: the event's position and what is wrong with it. The
/// log is unchanged after a refusal. Loading refuses every kind but the surface rules `append`
/// alone applies ([`EmptyAssistantMessage`](AppendErrorKind::EmptyAssistantMessage),
/// [`OrphanToolResult`](AppendErrorKind::OrphanToolResult),
/// [`ReplaceOrphansToolResult`](AppendErrorKind::ReplaceOrphansToolResult); [reference
/// §1](crate::manual::reference#1-vocabulary-and-json) items 16 to 19).
///
/// Prints `event {seq}: ` and then the [kind](AppendErrorKind)'s message; its
/// [`source`](std::error::Error::source) is the kind's (the decode or write fault).
///
/// ```
/// use mektpoy::{Session, session::AppendErrorKind, vocab::Seq};
/// let session = Session::new("s");
/// let err = session.append_json("{}").unwrap_err();
/// assert_eq!(err.seq(), Seq(0));
/// assert!(matches!(err.kind(), AppendErrorKind::Decode { .. }));
/// assert_eq!(err.to_string(), "event 0: not a well-formed event");
/// ```
#[derive(Debug)]
pub struct AppendError {
    seq: Seq,
    kind: AppendErrorKind,
}

impl AppendError {
    /// The refusal of the event at `seq`.
    #[must_use]
    pub(crate) fn new(seq: Seq, kind: AppendErrorKind) -> Self {
        AppendError { seq, kind }
    }

    /// The `Seq` of the refused event (for [`AppendErrorKind::Write`], the batch's first).
    #[must_use]
    pub fn seq(&self) -> Seq {
        self.seq
    }

    /// What is wrong with the event.
    #[must_use]
    pub fn kind(&self) -> &AppendErrorKind {
        &self.kind
    }

    /// What is wrong with the event, by value (to take out a decode or write fault).
    #[must_use]
    pub fn into_kind(self) -> AppendErrorKind {
        self.kind
    }
}

impl std::fmt::Display for AppendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "event {}: {}", self.seq, self.kind)
    }
}

impl std::error::Error for AppendError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.kind.source()
    }
}

/// What [`AppendError`] found wrong with an event. Its message does not name the event; the
/// `AppendError` around it does.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AppendErrorKind {
    /// The event's JSON is not a well-formed event. The fault is the [`source`]
    /// (`std::error::Error::source`), not repeated in this message.
    ///
    /// [`source`]: std::error::Error::source
    #[error("not a well-formed event")]
    Decode {
        /// The shape fault.
        #[source]
        source: DecodeError,
    },
    /// Two tools with one name in a header.
    #[error("header declares `{tool}` twice")]
    DuplicateToolName {
        /// The repeated name.
        tool: String,
    },
    /// A header tool whose name is empty (no provider accepts it, no call can name it).
    #[error("header tool {index} has an empty name")]
    EmptyToolName {
        /// 0-based position in the header's tools.
        index: usize,
    },
    /// A header tool named like the serializer's deferred placeholder
    /// ([`DEFERRED_PLACEHOLDER_NAME`]): every serializer refuses such tools, so a log holding
    /// the header could never be sent.
    #[error("header tool {index} has the reserved name `{DEFERRED_PLACEHOLDER_NAME}`")]
    ReservedToolName {
        /// 0-based position in the header's tools.
        index: usize,
    },
    /// Tool-call arguments nested deeper than [`ContentBlock::ARGUMENTS_DEPTH_LIMIT`].
    #[error("message {id}: arguments of tool call {call_id} nest deeper than {limit} levels")]
    ArgumentsTooDeep {
        /// The message id.
        id: String,
        /// The call's id.
        call_id: String,
        /// The limit.
        limit: usize,
    },
    /// A message id already used in the session (inherited events count).
    #[error("message id {id} is already in the session")]
    DuplicateMessageId {
        /// The repeated id.
        id: String,
    },
    /// A block built by code that decoding would refuse: a tool call or tool change naming a
    /// tool with an empty name (their variants' fields are public). A [`ContentBlock::Other`]
    /// cannot be malformed: [`ContentBlock::other`] refuses a known or missing `type`.
    #[error("message {id}: content block {index} is malformed")]
    MalformedBlock {
        /// The message id.
        id: String,
        /// 0-based block position.
        index: usize,
    },
    /// `headerSeq` does not name an earlier `request/header`.
    #[error("headerSeq {header} is not an earlier request/header")]
    UnknownHeader {
        /// The named position.
        header: Seq,
    },
    /// An addition naming a tool absent from the header its message names.
    #[error("message {id} adds `{tool}`, absent from header {header}")]
    AdditionNotInHeader {
        /// The message id.
        id: String,
        /// The added name.
        tool: String,
        /// The header named by `headerSeq`.
        header: Seq,
    },
    /// An addition in a developer message without `headerSeq`.
    #[error("message {id} adds `{tool}` without a headerSeq")]
    AdditionWithoutHeaderSeq {
        /// The message id.
        id: String,
        /// The added name.
        tool: String,
    },
    /// A redefinition naming a tool absent from the header its message names.
    #[error("message {id} redefines `{tool}`, absent from header {header}")]
    RedefinitionNotInHeader {
        /// The message id.
        id: String,
        /// The redefined name.
        tool: String,
        /// The header named by `headerSeq`.
        header: Seq,
    },
    /// A redefinition in a developer message without `headerSeq`.
    #[error("message {id} redefines `{tool}` without a headerSeq")]
    RedefinitionWithoutHeaderSeq {
        /// The message id.
        id: String,
        /// The redefined name.
        tool: String,
    },
    /// A by-value addition ([`ContentBlock::InlineAddition`]): projection output, which a log
    /// never holds (it carries a definition no header recorded).
    #[error("message {id}: block {index} is a by-value addition, which only projections hold")]
    ProjectionOnlyBlock {
        /// The message id.
        id: String,
        /// 0-based block position.
        index: usize,
    },
    /// A tool-change block (addition, removal, redefinition) outside a developer message.
    #[error("{role} message {id} holds a tool-change block")]
    ToolChangeOutsideDeveloper {
        /// The message id.
        id: String,
        /// The message's role.
        role: Role,
    },
    /// A `tool/result` whose source is not `{"kind":"tool","callId"}` ([reference
    /// §1](crate::manual::reference#1-vocabulary-and-json)): the result could never be paired with
    /// its call.
    #[error("tool result {id} has no `{{\"kind\":\"tool\",\"callId\"}}` source")]
    ToolResultWithoutCallId {
        /// The message id.
        id: String,
    },
    /// An assistant message placed on the surface without content: no block, or only text blocks
    /// with empty text. The Messages API drops empty text and refuses an empty turn
    /// ([`MessageFault::EmptyTurn`](crate::wire::MessageFault::EmptyTurn)) anywhere but at the end,
    /// so once anything follows it every request of the log would fail. Reasoning, tool calls and
    /// blocks of other types are content: whether they are sent depends on the route, and the
    /// serializer decides. A message without `surfaceOp` is never sent and is not refused. Refused
    /// by `append` only: loading accepts it ([reference
    /// §1](crate::manual::reference#1-vocabulary-and-json) item 19).
    #[error("assistant message {id} has no content (no block, or only empty text)")]
    EmptyAssistantMessage {
        /// The message id.
        id: String,
    },
    /// A `tool/result` placed on the surface that answers no tool call there: no assistant
    /// message before it on the surface (before the replaced range, for a replace) holds a
    /// tool call with its `callId`. Every serializer refuses it under the same name
    /// ([`MessageFault::OrphanToolResult`](crate::wire::MessageFault::OrphanToolResult)). A
    /// result without `surfaceOp` is never sent and is not refused. Refused by `append` only:
    /// loading accepts it ([reference §1](crate::manual::reference#1-vocabulary-and-json) item 19).
    #[error("tool result {id} answers no tool call {call_id} on the surface")]
    OrphanToolResult {
        /// The result's message id.
        id: String,
        /// The call id its source names.
        call_id: String,
    },
    /// A replace that would leave a tool result on the surface without its call: it removes
    /// every assistant message before the result that holds the call, and its own message
    /// does not hold it. A replace that removes the results too (a compaction that removes a
    /// call and its results), or puts the call back, is accepted. Refused by `append` only:
    /// loading accepts it ([reference §1](crate::manual::reference#1-vocabulary-and-json) item 19).
    #[error(
        "replace {start}..={end} removes tool call {call_id} and leaves its result {result} on the surface"
    )]
    ReplaceOrphansToolResult {
        /// First replaced node.
        start: usize,
        /// Last replaced node.
        end: usize,
        /// The removed call.
        call_id: String,
        /// The message id of the result left without it (the first after the range).
        result: String,
    },
    /// A `headerSeq` on a message that is not a developer message.
    #[error("{role} message {id} carries a headerSeq")]
    HeaderSeqOutsideDeveloper {
        /// The message id.
        id: String,
        /// The message's role.
        role: Role,
    },
    /// A replace range outside the current surface.
    #[error("replace {start}..={end} is outside the surface of {len} nodes")]
    ReplaceOutOfRange {
        /// First replaced node.
        start: usize,
        /// Last replaced node.
        end: usize,
        /// Surface length before the event.
        len: usize,
    },
    /// An `Event::Opaque` of type `session`, decoded by `append_json`: its line would read back
    /// as a second session line, which loading refuses. ([`OpaqueEvent::new`] refuses that type
    /// and every type this crate decodes, and decoding reads those as their typed events, so
    /// `session` is the only type that reaches this.)
    ///
    /// [`OpaqueEvent::new`]: crate::event::OpaqueEvent::new
    #[error("an opaque event cannot have the known type `{event_type}`")]
    OpaqueKnownType {
        /// The known type.
        event_type: String,
    },
    /// A map of unknown fields (`Config::extra`, `RequestHeader::extra`, a reasoning block's
    /// `extra`, all public) holds a key the event already writes, which would shadow that field
    /// when the line is read back. (An opaque event's fields cannot: [`OpaqueEvent::new`]
    /// refuses `type` and `surfaceOp`.)
    ///
    /// [`OpaqueEvent::new`]: crate::event::OpaqueEvent::new
    #[error("unknown field `{key}` shadows a field of the event")]
    ReservedKey {
        /// The shadowing key.
        key: String,
    },
    /// A second `thinking/policy` event, or one after a floor (the policy is chosen once per
    /// session, before it acts).
    #[error("the session's thinking policy is already {chosen}")]
    ThinkingPolicyChosen {
        /// The policy in force.
        chosen: &'static str,
    },
    /// The batch could not be written to the session's file; nothing was committed.
    #[error("the batch was not persisted")]
    Write {
        /// The write fault.
        #[source]
        source: WriteError,
    },
}

/// The log and the facts validation reads, all O(1) to clone.
#[derive(Clone, Default)]
pub(crate) struct LogState {
    pub events: imbl::Vector<Event>,
    /// Exact bytes (without `\n`) of loaded lines; `None` for events made in this process.
    pub lines: imbl::Vector<Option<Arc<str>>>,
    /// Every message id and the `Seq` of the event that holds it.
    pub message_ids: imbl::HashMap<Arc<str>, Seq>,
    /// The `thinking/policy` event, if any.
    pub thinking_policy: Option<ThinkingPolicy>,
    /// Each route's latest `thinking/floor`, by (provider, model).
    pub thinking_floors: imbl::HashMap<(Arc<str>, Arc<str>), (Seq, Rewrite)>,
    pub surface: imbl::Vector<SurfaceNode>,
    pub generation: u64,
    /// Bumped on every surface change; keys the messages cache.
    pub surface_version: u64,
    pub latest_header: Option<(Seq, Arc<HeaderEvent>)>,
    /// Every header's tools by name, built once when the header is applied; developer messages
    /// are checked against it, and their fold records resolve their names through it.
    pub tool_indexes: imbl::HashMap<Seq, Arc<ToolIndex>>,
    /// The log's tool definitions, one allocation per written form: a header joining the log
    /// shares the definitions already there ([decision 76](crate::manual::decisions#decision-76)).
    pub tools: ToolInterner,
    /// A record of each event a tool fold reads (headers and developer messages), in order, written
    /// at apply ([decision 80](crate::manual::decisions#decision-80)): a fold reads these dense
    /// records, never the events, and skips the user, assistant and tool events without looking at
    /// them.
    pub fold_records: imbl::Vector<FoldRecord>,
    /// Every developer message's [`ToolUpdate`] in log order: a series' updates are the run of
    /// them since its header, which a long fold takes as one slice of this list.
    pub tool_updates: imbl::Vector<ToolUpdate>,
    /// The tool names of the log's headers and developer messages, numbered for the fold
    /// records.
    pub tool_names: ToolNames,
    /// The name ids of the latest header's tools (`latest_header`), so that the next header's
    /// unchanged tools take theirs without hashing a name.
    pub latest_header_names: Arc<[NameId]>,
    /// The loaded file's last line had no `\n` and nothing was appended since.
    pub unterminated_tail: bool,
    /// The latest surface replace.
    pub last_replace: Option<Seq>,
    /// Tool calls and results on the surface, for the pairing rules.
    pub pairing: Pairing,
    /// The `Seq` of every header, in order, so that the header in force at any position is
    /// found in O(log n) (the registration guard reads it).
    pub header_seqs: imbl::Vector<usize>,
}

/// Where the surface's tool calls and results are, kept as the surface changes so that the pairing
/// rules ([reference §1](crate::manual::reference#1-vocabulary-and-json) items 17 and 18) cost
/// O(log n) per call or result they look at, never a walk of the surface.
///
/// Each surface node has a *key*, strictly increasing along the surface: an appended node
/// takes its event's `Seq` (larger than every key), and a replace's node takes the key of the
/// first node it replaces (between its neighbours'). So a range of positions is a range of
/// keys, and the keys of the nodes that stay never change.
#[derive(Clone, Default)]
pub(crate) struct Pairing {
    /// The key of each surface node, in surface order (parallel to `LogState::surface`).
    keys: imbl::Vector<usize>,
    /// Each call id on the surface: the keys of the assistant messages holding it.
    calls: imbl::HashMap<Arc<str>, Keys<()>>,
    /// Each call id results on the surface name: their keys and message ids.
    results: imbl::HashMap<Arc<str>, Keys<Arc<str>>>,
    /// Each tool name called on the surface: the keys of the assistant messages holding a
    /// call of it, with the message (the registration guard reads it).
    named: imbl::HashMap<Arc<str>, Keys<Message>>,
}

/// The keys of one call id's calls (or results), each with a value: almost always one, which
/// then costs no map of its own.
#[derive(Clone)]
enum Keys<V: Clone> {
    One(usize, V),
    Many(imbl::OrdMap<usize, V>),
}

impl<V: Clone> Keys<V> {
    fn insert(&mut self, key: usize, value: V) {
        match self {
            Keys::One(k, v) if *k == key => *v = value,
            Keys::One(k, v) => {
                let mut many = imbl::OrdMap::new();
                many.insert(*k, v.clone());
                many.insert(key, value);
                *self = Keys::Many(many);
            }
            Keys::Many(many) => {
                many.insert(key, value);
            }
        }
    }

    /// Removes `key`; whether no key is left.
    fn remove(&mut self, key: usize) -> bool {
        match self {
            Keys::One(k, _) => *k == key,
            Keys::Many(many) => {
                many.remove(&key);
                many.is_empty()
            }
        }
    }

    /// The lowest key in `range`, with its value. O(log n).
    fn first_in(&self, range: (Bound<usize>, Bound<usize>)) -> Option<(usize, &V)> {
        match self {
            Keys::One(k, v) => range.contains(k).then_some((*k, v)),
            Keys::Many(many) => many.range(range).next().map(|(k, v)| (*k, v)),
        }
    }
}

/// Keys below `key`.
fn below(key: usize) -> (Bound<usize>, Bound<usize>) {
    (Bound::Unbounded, Bound::Excluded(key))
}

/// The call id a surface tool result names.
fn result_call_id(message: &Message) -> Option<&str> {
    match (message.role(), message.source()) {
        (Role::Tool, MessageSource::Tool { call_id }) => Some(call_id),
        _ => None,
    }
}

/// The calls an assistant message holds (calls in other messages answer nothing: the
/// serializers refuse them): its tool calls, and the Responses API calls of tools that are
/// not functions it keeps verbatim ([decision 140](crate::manual::decisions#decision-140)).
fn assistant_calls(message: &Message) -> impl Iterator<Item = &str> {
    (message.role() == Role::Assistant)
        .then(|| {
            message.tool_calls().map(|c| c.id()).chain(
                message
                    .content()
                    .iter()
                    .filter_map(ContentBlock::kept_call_id),
            )
        })
        .into_iter()
        .flatten()
}

/// The tool names an assistant message calls, as [`assistant_calls`] counts calls (a name
/// called twice in one message comes twice; recording it twice at one key is harmless).
fn assistant_call_names(message: &Message) -> impl Iterator<Item = &str> {
    (message.role() == Role::Assistant)
        .then(|| message.tool_calls().map(|c| c.name()))
        .into_iter()
        .flatten()
}

impl Pairing {
    /// The assistant messages on the surface holding a call named `name`, in surface order.
    /// O(log n) to start, O(1) per message.
    pub(crate) fn calls_named(&self, name: &str) -> impl Iterator<Item = &Message> {
        let keys = self.named.get(name);
        let one = match keys {
            Some(Keys::One(_, m)) => Some(m),
            _ => None,
        };
        let many = match keys {
            Some(Keys::Many(many)) => Some(many.values()),
            _ => None,
        };
        one.into_iter().chain(many.into_iter().flatten())
    }

    /// Whether an assistant message holding `call_id` sits at a key below `limit` (anywhere
    /// on the surface for `None`). O(log n).
    fn call_before(&self, call_id: &str, limit: Option<usize>) -> bool {
        let range = limit.map_or((Bound::Unbounded, Bound::Unbounded), below);
        self.calls
            .get(call_id)
            .is_some_and(|keys| keys.first_in(range).is_some())
    }

    /// The first tool call the replace of `start..=end` of `surface` by `node` would leave a
    /// result of on the surface without any call before it: (call id, result message id).
    /// O(1) per node the range removes and O(log n) per call among them, or, when it removes
    /// more than it keeps, O(1) per node after it and O(log n) per result among them.
    fn orphaned_by_replace(
        &self,
        surface: &imbl::Vector<SurfaceNode>,
        start: usize,
        end: usize,
        node: Option<&Message>,
    ) -> Option<(String, String)> {
        let (Some(&first), Some(&last)) = (self.keys.get(start), self.keys.get(end)) else {
            return None;
        };
        let len = surface.len().min(self.keys.len());
        let range = start..(end + 1).min(len);
        if range.is_empty() {
            // `Focus::narrow` panics on an empty range; a checked replace is never empty.
            return None;
        }
        let put_back =
            |call_id: &str| node.is_some_and(|n| assistant_calls(n).any(|c| c == call_id));
        // Whether a call of `call_id` stays before the result at `result`.
        let kept = |call_id: &str, result: usize| {
            self.calls.get(call_id).is_some_and(|keys| {
                keys.first_in(below(first)).is_some()
                    || keys
                        .first_in((Bound::Excluded(last), Bound::Excluded(result)))
                        .is_some()
            })
        };
        if range.len() > len - range.len() {
            // A compaction that removes most of the surface: walk the results after it.
            let after = (range.end < len).then(|| {
                surface
                    .focus()
                    .narrow(range.end..len)
                    .into_iter()
                    .zip(self.keys.focus().narrow(range.end..len))
            });
            for (node_after, &result) in after.into_iter().flatten() {
                let SurfaceNode::Message(message) = node_after else {
                    continue;
                };
                let Some(call_id) = result_call_id(message) else {
                    continue;
                };
                let removed = self.calls.get(call_id).is_some_and(|keys| {
                    keys.first_in((Bound::Included(first), Bound::Included(last)))
                        .is_some()
                });
                if removed && !put_back(call_id) && !kept(call_id, result) {
                    return Some((call_id.to_owned(), message.id().to_owned()));
                }
            }
            return None;
        }
        for removed in surface.focus().narrow(range) {
            let SurfaceNode::Message(message) = removed else {
                continue;
            };
            for call_id in assistant_calls(message) {
                // The first result of the call after the range: a later one has at least
                // the calls this one has before it.
                let Some((result, result_id)) = self
                    .results
                    .get(call_id)
                    .and_then(|r| r.first_in((Bound::Excluded(last), Bound::Unbounded)))
                else {
                    continue;
                };
                if !put_back(call_id) && !kept(call_id, result) {
                    return Some((call_id.to_owned(), result_id.to_string()));
                }
            }
        }
        None
    }

    /// Records `node`, placed by `op` on `surface` (as it was before the change), `seq` being
    /// its event's. O(log n) per call or result it adds; a replace also walks the nodes it
    /// removes (O(1) each, O(log n) per call or result among them), or, when it removes more
    /// than it keeps, the nodes it keeps, rebuilding the index from them.
    fn apply(
        &mut self,
        surface: &imbl::Vector<SurfaceNode>,
        seq: usize,
        op: SurfaceOp,
        node: &SurfaceNode,
    ) {
        let key = match op {
            SurfaceOp::Append => {
                self.keys.push_back(seq);
                seq
            }
            SurfaceOp::Replace { start, end } => {
                let key = self.keys.get(start).copied().unwrap_or(seq);
                let len = surface.len().min(self.keys.len());
                let range = start..(end + 1).min(len);
                let all_keys = self.keys.clone(); // O(1): the loops below borrow `self`
                let nodes = |r: std::ops::Range<usize>| {
                    (!r.is_empty())
                        .then(|| {
                            surface
                                .focus()
                                .narrow(r.clone())
                                .into_iter()
                                .zip(all_keys.focus().narrow(r))
                        })
                        .into_iter()
                        .flatten()
                };
                if range.len() <= len - range.len() {
                    for (removed, key) in nodes(range.clone()) {
                        if let SurfaceNode::Message(message) = removed {
                            self.forget(message, *key);
                        }
                    }
                } else {
                    // A compaction that removes most of the surface: rebuilding from the nodes
                    // that stay costs less than forgetting the removed ones one by one.
                    self.calls = imbl::HashMap::new();
                    self.results = imbl::HashMap::new();
                    self.named = imbl::HashMap::new();
                    for (kept, key) in nodes(0..range.start).chain(nodes(range.end..len)) {
                        if let SurfaceNode::Message(message) = kept {
                            self.record(message, *key);
                        }
                    }
                }
                let tail = self.keys.split_off((end + 1).min(self.keys.len()));
                self.keys.truncate(start.min(self.keys.len()));
                self.keys.push_back(key);
                self.keys.append(tail);
                key
            }
        };
        if let SurfaceNode::Message(message) = node {
            self.record(message, key);
        }
    }

    /// Records the calls and the result of `message`, the node at `key`.
    fn record(&mut self, message: &Message, key: usize) {
        if let Some(call_id) = result_call_id(message) {
            let id: Arc<str> = Arc::from(message.id());
            match self.results.get_mut(call_id) {
                Some(keys) => keys.insert(key, id),
                None => {
                    self.results.insert(Arc::from(call_id), Keys::One(key, id));
                }
            }
        }
        for call_id in assistant_calls(message) {
            match self.calls.get_mut(call_id) {
                Some(keys) => keys.insert(key, ()),
                None => {
                    self.calls.insert(Arc::from(call_id), Keys::One(key, ()));
                }
            }
        }
        for name in assistant_call_names(message) {
            match self.named.get_mut(name) {
                Some(keys) => keys.insert(key, message.clone()),
                None => {
                    self.named
                        .insert(Arc::from(name), Keys::One(key, message.clone()));
                }
            }
        }
    }

    /// Forgets the calls and the result of `message`, the node at `key`.
    fn forget(&mut self, message: &Message, key: usize) {
        for call_id in assistant_calls(message) {
            if self.calls.get_mut(call_id).is_some_and(|k| k.remove(key)) {
                self.calls.remove(call_id);
            }
        }
        for name in assistant_call_names(message) {
            if self.named.get_mut(name).is_some_and(|k| k.remove(key)) {
                self.named.remove(name);
            }
        }
        if let Some(call_id) = result_call_id(message)
            && self.results.get_mut(call_id).is_some_and(|k| k.remove(key))
        {
            self.results.remove(call_id);
        }
    }
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
            .position(ContentBlock::names_empty_tool)
        {
            return Err(AppendErrorKind::MalformedBlock { id: id(), index });
        }
        if let Some(index) = msg
            .content()
            .iter()
            .position(|b| matches!(b, ContentBlock::InlineAddition(_)))
        {
            return Err(AppendErrorKind::ProjectionOnlyBlock { id: id(), index });
        }
        for block in msg.content() {
            if let ContentBlock::ToolCall {
                id: call,
                arguments,
                ..
            } = block
                && arguments_depth(arguments) > ContentBlock::ARGUMENTS_DEPTH_LIMIT
            {
                return Err(AppendErrorKind::ArgumentsTooDeep {
                    id: id(),
                    call_id: call.clone(),
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
                    ContentBlock::ToolAddition { tool_name } => (tool_name, false),
                    ContentBlock::ToolRedefinition { tool_name } => (tool_name, true),
                    _ => continue,
                };
                let tool = tool_name.clone();
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

/// Refuses events whose line would not decode as the same event: an unknown-field map (all
/// public) holding a key the encoder already writes, or an opaque event of type `session`
/// (decoded by `append_json`; it would read back as a second session line). O(size of the
/// event).
fn check_encodable(event: &Event) -> Result<(), AppendErrorKind> {
    let reserved = |keys: indexmap::map::Keys<'_, String, serde_json::Value>, taken: &[&str]| {
        keys.into_iter()
            .find(|k| taken.contains(&k.as_str()))
            .map(|k| AppendErrorKind::ReservedKey { key: k.clone() })
    };
    let fault = match event {
        Event::Header(h) => reserved(h.header.config.extra.keys(), &["provider", "model"])
            .or_else(|| reserved(h.header.extra.keys(), &["config", "tools"])),
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
