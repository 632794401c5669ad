//! Why an append was refused: the event, the rule, and what the caller can do.

use crate::event::DecodeError;
use crate::store::WriteError;
#[cfg(doc)]
use crate::vocab::ContentBlock;
use crate::vocab::{DEFERRED_PLACEHOLDER_NAME, Role, Seq};

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
    pub(super) seq: Seq,
    pub(super) kind: AppendErrorKind,
}

impl AppendError {
    /// The refusal of the event at `seq`.
    #[must_use]
    pub(crate) fn new(seq: Seq, kind: AppendErrorKind) -> Self {
        AppendError { seq, kind }
    }

    /// The `Seq` of the refused event (for [`AppendErrorKind::Write`], the batch's first).
    ///
    /// ```
    /// use mektpoy::vocab::Seq;
    /// use mektpoy::{Event, Message, Session};
    /// let session = Session::new("s");
    /// session.append(Event::append(Message::user("u1", "hi")))?;
    /// let refused = session.append(Event::append(Message::user("u1", "again"))).unwrap_err();
    /// assert_eq!(refused.seq(), Seq(1), "the Seq the event would have taken");
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
    #[must_use]
    pub fn seq(&self) -> Seq {
        self.seq
    }

    /// What is wrong with the event.
    ///
    /// ```
    /// use mektpoy::session::AppendErrorKind;
    /// use mektpoy::{Event, Message, Session};
    /// let session = Session::new("s");
    /// session.append(Event::append(Message::user("u1", "hi")))?;
    /// let refused = session.append(Event::append(Message::user("u1", "again"))).unwrap_err();
    /// assert!(matches!(refused.kind(), AppendErrorKind::DuplicateMessageId { .. }));
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
    #[must_use]
    pub fn kind(&self) -> &AppendErrorKind {
        &self.kind
    }

    /// What is wrong with the event, by value (to take out a decode or write fault).
    ///
    /// ```
    /// use mektpoy::session::AppendErrorKind;
    /// use mektpoy::Session;
    /// let refused = Session::new("s").append_json("not json").unwrap_err();
    /// let AppendErrorKind::Decode { source } = refused.into_kind() else { panic!("a decode fault") };
    /// assert!(matches!(source, mektpoy::event::DecodeError::Json(_)));
    /// ```
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
///
/// ```
/// use mektpoy::session::AppendErrorKind;
/// use mektpoy::{Event, Message, Session};
/// let session = Session::new("s");
/// // A result answering no call on the surface would fail every later request.
/// let orphan = Message::tool_result("r1", "c9", "output");
/// let refused = session.append(Event::append(orphan)).unwrap_err();
/// assert!(matches!(refused.kind(), AppendErrorKind::OrphanToolResult { .. }), "{refused}");
/// ```
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
    /// A public map of unknown fields (`RequestHeader::extra`, a reasoning block's `extra`) holds
    /// a key the event already writes, which would shadow that field when the line is read
    /// back. (An opaque event's fields cannot: [`OpaqueEvent::new`] refuses `type` and
    /// `surfaceOp`; nor can a configuration's options: [`Config::with`] refuses `provider` and
    /// `model`.)
    ///
    /// [`Config::with`]: crate::Config::with
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
