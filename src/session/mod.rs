//! `Session`: the append-only log and the caches derived from it ([reference
//! §2](crate::manual::reference#2-session-and-persistence)).
//!
//! One `RwLock` guards the committed log; a `Mutex` guards the derived caches (the tool fold
//! and the surface's messages). Lock order is always log, then caches, so readers never see
//! messages and a snapshot from two different moments.

mod append_error;
mod file;
mod guard;
mod pairing;
mod position;
mod state;

use std::borrow::Cow;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

pub use append_error::{AppendError, AppendErrorKind};
pub use file::{FileOptions, LoadError, Loaded, LogRules, SessionLineFault};
pub use guard::{ConflictingCall, SchemaConflict, SchemaConflicts};
pub use position::{PendingCall, Position};
use state::LogState;

use crate::event::{Event, HeaderEvent, Rewrite, ThinkingEvent, ThinkingPolicy};
use crate::history::{FoldKind, ToolFold, ToolHistory};
use crate::store::{Frame, Frames, JsonlWriter};
use crate::vocab::{List, Message, Messages, Seq, ToolSchema};

/// One node of the surface (the model-visible history), as replace ranges count them.
///
/// ```
/// use mektpoy::session::SurfaceNode;
/// use mektpoy::{Event, Message, Session};
/// let session = Session::new("s");
/// session.append(Event::append(Message::user("u1", "hi")))?;
/// session.append_json(r#"{"type":"app/bookmark","data":{},"surfaceOp":"append"}"#)?;
/// let surface = session.surface();
/// assert!(matches!(&surface[0], SurfaceNode::Message(m) if m.id() == "u1"));
/// assert!(matches!(surface[1], SurfaceNode::Opaque(seq) if seq.0 == 1));
/// # Ok::<(), mektpoy::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub enum SurfaceNode {
    /// A message event's message.
    Message(Message),
    /// An event of unknown type that carries a `surfaceOp`: counted, but no message.
    Opaque(Seq),
}

/// Where a fork's events came from: the parent's id and how many events it inherited.
///
/// ```
/// use mektpoy::session::ParentRef;
/// use mektpoy::{Event, Message, Session};
/// let parent = Session::new("p");
/// parent.append(Event::append(Message::user("u1", "hi")))?;
/// let fork = Session::fork(&parent, 1, "f")?;
/// assert_eq!(fork.parent(), Some(&ParentRef { id: "p".into(), upto: 1 }));
/// # Ok::<(), mektpoy::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParentRef {
    /// The parent session's id.
    pub id: String,
    /// Number of inherited events (`Seq`s `0..upto`).
    pub upto: u64,
}

/// One consistent read of a session ([reference
/// §2](crate::manual::reference#2-session-and-persistence)), taken under one lock.
///
/// ```
/// use mektpoy::{Event, Message, Session};
/// let session = Session::new("s");
/// session.append(Event::append(Message::user("u1", "hi")))?;
/// let view = session.view();
/// assert_eq!((view.len, view.messages.len(), view.surface_generation), (1, 1, 0));
/// assert!(view.header.is_none());
/// # Ok::<(), mektpoy::Error>(())
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct SessionView {
    /// Number of events.
    pub len: usize,
    /// The latest `request/header` and its `Seq`.
    pub header: Option<(Seq, Arc<HeaderEvent>)>,
    /// The surface's messages in order, opaque nodes left out.
    pub messages: Messages,
    /// Number of replaces so far.
    pub surface_generation: u64,
    /// The tool snapshot as of the same event.
    pub tool_history: ToolHistory,
}

/// Why `fork` refused.
///
/// ```
/// use mektpoy::session::ForkError;
/// use mektpoy::Session;
/// let parent = Session::new("p");
/// assert_eq!(Session::fork(&parent, 3, "f").unwrap_err(), ForkError::UptoOutOfRange { upto: 3, len: 0 });
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ForkError {
    /// `upto` is past the parent's end.
    #[error("cannot fork at {upto}: the parent has {len} events")]
    UptoOutOfRange {
        /// Requested number of inherited events.
        upto: u64,
        /// The parent's length.
        len: usize,
    },
}

/// An append-only session log with its derived caches. `Send + Sync`; `append` and every
/// reader take `&self`.
///
/// ```
/// use mektpoy::{Event, Message, Session};
/// let session = Session::new("s1");
/// let seq = session.append(Event::append(Message::user("u1", "hello")))?;
/// assert_eq!(seq.0, 0);
/// assert_eq!(session.messages().len(), 1);
/// # Ok::<(), mektpoy::session::AppendError>(())
/// ```
pub struct Session {
    /// Process-unique identity, so a recorder can tell its session from another with the
    /// same id.
    instance: u64,
    id: String,
    parent: Option<ParentRef>,
    /// The session line's exact bytes when loaded from a file.
    session_line: Option<Arc<str>>,
    /// The fold rules the log was written under (its session line's, or the reader's choice
    /// for an unmarked one); forks inherit them.
    rules: LogRules,
    log: RwLock<Committed>,
    derived: Mutex<Derived>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let log = read(&self.log);
        f.debug_struct("Session")
            .field("id", &self.id)
            .field("parent", &self.parent)
            .field("len", &log.state.len())
            .field("surface_generation", &log.state.generation)
            .field("writer", &log.writer)
            .finish_non_exhaustive()
    }
}

struct Committed {
    state: LogState,
    /// The batch frames of the file, by the first event of their batch: loaded ones keep
    /// their bytes; every batch of two or more events committed here gets one.
    frames: Frames,
    writer: Option<JsonlWriter>,
}

/// An event's log line: its loaded (or given) bytes, else its encoding.
fn line_text<'a>(event: &Event, line: &'a Option<Arc<str>>) -> Cow<'a, str> {
    match line {
        Some(l) => Cow::Borrowed(l),
        None => Cow::Owned(event.to_json()),
    }
}

/// A computed fold keeps its state after every this many fold events (headers and developer
/// messages), so that a fork starts from the last one at or before its `upto` ([decision
/// 78](crate::manual::decisions#decision-78)). The state is persistent: a checkpoint costs what the
/// fold changed since the previous one.
pub(crate) const CHECKPOINT_EVERY: usize = 4096;

/// One fold and its cached snapshot.
#[derive(Clone)]
struct Cached {
    fold: ToolFold,
    /// Number of fold records (`LogState::fold_records`) before `fold.upto()`: all folded.
    folded: usize,
    /// The snapshot of `fold`, valid while `fold.upto()` has not moved.
    snapshot: Option<ToolHistory>,
    /// The fold as it stood right after its `k · CHECKPOINT_EVERY`-th fold event, for
    /// `k = 1, 2, …`, in order (so by `upto`), with the number of fold events folded.
    checkpoints: imbl::Vector<(ToolFold, usize)>,
}

impl Cached {
    fn new(kind: FoldKind, rules: LogRules) -> Self {
        Cached {
            fold: ToolFold::new(kind, rules),
            folded: 0,
            snapshot: None,
            checkpoints: imbl::Vector::new(),
        }
    }

    /// Folds the events of `state` from where the cache stopped up to `upto`, keeping a
    /// checkpoint at each `CHECKPOINT_EVERY`-th fold event on the way.
    /// O(new events + log n).
    fn catch_up(&mut self, state: &LogState, upto: usize) -> &ToolFold {
        while self.fold.upto() < upto {
            // The position right after the next checkpoint's fold event, if it is before `upto`
            // (the length check keeps the usual short catch-up free of look-ups).
            let next = (self.folded / CHECKPOINT_EVERY + 1) * CHECKPOINT_EVERY;
            let stop = (state.fold_records.len() >= next)
                .then(|| {
                    state
                        .fold_records
                        .get(next - 1)
                        .map(|r| r.seq().index() + 1)
                })
                .flatten()
                .filter(|end| *end > self.fold.upto() && *end <= upto);
            let end = stop.unwrap_or(upto);
            // Only headers and developer messages are folded: user, assistant and tool events
            // cannot change a snapshot, so after them the cached one is kept.
            let mut n = 0;
            let records = state
                .fold_records_in(self.fold.upto()..end)
                .inspect(|_| n += 1);
            if self.fold.fold_to(records, end, state.fold_log()) {
                self.snapshot = None;
            }
            self.folded += n;
            if stop.is_some() {
                debug_assert_eq!(self.folded, next);
                self.checkpoints.push_back((self.fold.clone(), self.folded));
            }
        }
        &self.fold
    }

    fn tool_history(&mut self, state: &LogState) -> ToolHistory {
        self.catch_up(state, state.len());
        self.snapshot
            .get_or_insert_with(|| self.fold.snapshot())
            .clone()
    }

    /// The cache a fork at `upto` starts from: this one whole when it has not folded past
    /// `upto` (its events are the fork's too), else its last checkpoint at or before `upto`,
    /// else `None` (the fork folds from scratch).
    fn for_fork(&self, upto: usize) -> Option<Cached> {
        if self.fold.upto() <= upto {
            return Some(self.clone());
        }
        // Checkpoints are in `upto` order: the ones at or before `upto` are a prefix.
        let keep = self
            .checkpoints
            .iter()
            .take_while(|(fold, _)| fold.upto() <= upto)
            .count();
        let (fold, folded) = self.checkpoints.get(keep.checked_sub(1)?)?.clone();
        Some(Cached {
            fold,
            folded,
            snapshot: None,
            checkpoints: self.checkpoints.take(keep),
        })
    }
}

struct Derived {
    /// The rules both folds read the log under.
    rules: LogRules,
    /// The by-reference fold ([reference
    /// §3](crate::manual::reference#3-toolhistory-the-cached-reducer)), folded on first use.
    by_reference: Cached,
    /// The by-value fold ([reference §3.1](crate::manual::reference#31-the-by-value-fold)), folded
    /// on first use by a route that needs it.
    by_value: Option<Cached>,
    /// The surface's messages, keyed by `LogState::surface_version`.
    messages: Option<SurfaceMessages>,
}

/// The surface's messages as of one surface version, and what extending them needs: a later
/// version of the same generation only appended nodes after the first `nodes`.
#[derive(Clone)]
struct SurfaceMessages {
    version: u64,
    generation: u64,
    nodes: usize,
    messages: Messages,
    /// The surface index of the last message, to check (one lookup) that a state of the same
    /// generation still holds it there: a different log never extends these.
    last: Option<usize>,
}

impl SurfaceMessages {
    fn of(state: &LogState) -> Self {
        SurfaceMessages {
            version: state.surface_version,
            generation: state.generation,
            nodes: 0,
            messages: Messages::new(),
            last: None,
        }
        .extended(state)
    }

    /// These messages caught up with `state`: O(nodes appended since) when only appends
    /// happened (the same generation), O(surface) after a replace.
    fn extended(mut self, state: &LogState) -> Self {
        let same_log = self.generation == state.generation
            && self.nodes <= state.surface.len()
            && self.last.is_none_or(|i| {
                matches!((state.surface.get(i), self.messages.last()),
                    (Some(SurfaceNode::Message(m)), Some(kept)) if m.ptr_eq(kept))
            });
        if !same_log {
            return SurfaceMessages::of(state);
        }
        if self.nodes < state.surface.len() {
            for (i, node) in state.surface.skip(self.nodes).iter().enumerate() {
                if let SurfaceNode::Message(m) = node {
                    self.messages.push(m.clone());
                    self.last = Some(self.nodes + i);
                }
            }
        }
        self.nodes = state.surface.len();
        self.version = state.surface_version;
        #[cfg(debug_assertions)]
        if self.nodes <= 2_000 {
            let whole: Vec<Message> = state
                .surface
                .iter()
                .filter_map(|n| match n {
                    SurfaceNode::Message(m) => Some(m.clone()),
                    SurfaceNode::Opaque(_) => None,
                })
                .collect();
            debug_assert!(self.messages == whole, "extended messages depart");
        }
        self
    }
}

impl Derived {
    fn new(rules: LogRules) -> Self {
        Derived {
            rules,
            by_reference: Cached::new(FoldKind::ByReference, rules),
            by_value: None,
            messages: None,
        }
    }
}

impl Derived {
    fn cached(&mut self, kind: FoldKind) -> &mut Cached {
        match kind {
            FoldKind::ByReference => &mut self.by_reference,
            FoldKind::ByValue => {
                let rules = self.rules;
                self.by_value
                    .get_or_insert_with(|| Cached::new(FoldKind::ByValue, rules))
            }
        }
    }

    fn tool_history(&mut self, kind: FoldKind, state: &LogState) -> ToolHistory {
        self.cached(kind).tool_history(state)
    }

    fn messages(&mut self, state: &LogState) -> Messages {
        let cached = match self.messages.take() {
            Some(c) if c.version == state.surface_version => c,
            Some(c) => c.extended(state),
            None => SurfaceMessages::of(state),
        };
        let messages = cached.messages.clone();
        self.messages = Some(cached);
        messages
    }
}

// A poisoned lock means a panic elsewhere mid-read; the state itself is only ever replaced
// whole, so it is still consistent and we keep serving it.
fn read<T>(l: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(PoisonError::into_inner)
}
fn write<T>(l: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(PoisonError::into_inner)
}
fn lock<T>(l: &Mutex<T>) -> MutexGuard<'_, T> {
    l.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A session's log: appending, reading, forking.
///
/// ```
/// use mektpoy::{Event, Message, Session};
/// let session = Session::new("s");
/// session.append(Event::append(Message::user("u1", "hi")))?;
/// let fork = Session::fork(&session, 1, "f")?;
/// assert_eq!((session.len(), fork.len(), fork.messages()[0].id()), (1, 1, "u1"));
/// # Ok::<(), mektpoy::Error>(())
/// ```
impl Session {
    /// An empty session with no file.
    ///
    /// ```
    /// use mektpoy::Session;
    /// let session = Session::new("s1");
    /// assert_eq!(session.id(), "s1");
    /// assert!(session.is_empty() && !session.is_persisting());
    /// ```
    pub fn new(id: impl Into<String>) -> Self {
        Session::from_parts(
            id.into(),
            None,
            None,
            LogRules::CURRENT,
            LogState::default(),
            Frames::new(),
            None,
        )
    }

    /// Every session is built here, so each gets its own `instance`.
    fn from_parts(
        id: String,
        parent: Option<ParentRef>,
        session_line: Option<Arc<str>>,
        rules: LogRules,
        state: LogState,
        frames: Frames,
        writer: Option<JsonlWriter>,
    ) -> Self {
        static NEXT_INSTANCE: AtomicU64 = AtomicU64::new(0);
        Session {
            instance: NEXT_INSTANCE.fetch_add(1, Ordering::Relaxed),
            id,
            parent,
            session_line,
            rules,
            log: RwLock::new(Committed {
                state,
                frames,
                writer,
            }),
            derived: Mutex::new(Derived::new(rules)),
        }
    }

    /// A new session whose first events are `parent`'s `[0, upto)`, inherited: counted in
    /// `Seq` and in every fold, validated once (in the parent). It has no file until `save`.
    ///
    /// O(upto) to rebuild the validation facts; the events themselves are shared. A fold the parent
    /// has computed is shared too ([decision 78](crate::manual::decisions#decision-78)): the fork's
    /// first `tool_history()` folds only the events after the parent's fold, or after its last
    /// checkpoint (every 4,096 headers and developer messages) before `upto`. A fold the parent
    /// never computed is folded from scratch on first use.
    ///
    /// ```
    /// use mektpoy::{Event, Message, Session};
    /// let parent = Session::new("p");
    /// parent.append(Event::append(Message::user("u1", "hi")))?;
    /// parent.append(Event::append(Message::assistant("a1", "hello", "p", "m")))?;
    /// // Explore another answer from the same point.
    /// let fork = Session::fork(&parent, 1, "f")?;
    /// fork.append(Event::append(Message::assistant("a2", "hey", "p", "m")))?;
    /// assert_eq!((parent.len(), fork.len()), (2, 2));
    /// assert_eq!(fork.messages()[1].id(), "a2");
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`ForkError::UptoOutOfRange`] when `upto > parent.len()`.
    pub fn fork(parent: &Session, upto: u64, id: impl Into<String>) -> Result<Session, ForkError> {
        let src = read(&parent.log);
        let len = src.state.len();
        let n = usize::try_from(upto)
            .ok()
            .filter(|n| *n <= len)
            .ok_or(ForkError::UptoOutOfRange { upto, len })?;
        let mut state = LogState::default();
        for (e, line) in src.state.events.iter().zip(src.state.lines.iter()).take(n) {
            state.apply(e.clone(), line.clone());
        }
        // The frames of the batches inherited whole come along; a batch that `upto` cuts is
        // not one in the fork.
        let frames: Frames = src
            .frames
            .range(..n)
            .filter(|(start, f)| *start + f.events <= n)
            .map(|(start, f)| (*start, f.clone()))
            .collect();
        // A fold the parent computed, or its last checkpoint before `upto`, is the fork's
        // fold of the same events (decision 78); the fold of a kind the parent never computed
        // starts from scratch on first use.
        let derived = {
            let parent = lock(&parent.derived);
            Derived {
                rules: parent.rules,
                by_reference: parent
                    .by_reference
                    .for_fork(n)
                    .unwrap_or_else(|| Cached::new(FoldKind::ByReference, parent.rules)),
                by_value: parent.by_value.as_ref().and_then(|c| c.for_fork(n)),
                messages: None,
            }
        };
        drop(src);
        // The inherited bytes are copied verbatim; a torn-free prefix is always terminated.
        let fork = Session::from_parts(
            id.into(),
            Some(ParentRef {
                id: parent.id.clone(),
                upto,
            }),
            None,
            parent.rules,
            state,
            frames,
            None,
        );
        *lock(&fork.derived) = derived;
        Ok(fork)
    }

    /// The fold rules the log was written under ([`LogRules`], [decision
    /// 96](crate::manual::decisions#decision-96)): its session line's `rules`, or for an unmarked
    /// line the reader's [`unmarked_rules`](FileOptions::unmarked_rules). A session made in this
    /// process, and a file it creates, have [`LogRules::CURRENT`]; a fork has its parent's.
    ///
    /// ```
    /// use mektpoy::session::LogRules;
    /// use mektpoy::Session;
    /// assert_eq!(Session::new("s").rules(), LogRules::CURRENT);
    /// ```
    pub fn rules(&self) -> LogRules {
        self.rules
    }

    /// The session's id.
    ///
    /// ```
    /// use mektpoy::Session;
    /// assert_eq!(Session::new("s1").id(), "s1");
    /// ```
    pub fn id(&self) -> &str {
        &self.id
    }

    pub(crate) fn instance(&self) -> u64 {
        self.instance
    }

    /// The parent of a fork.
    ///
    /// ```
    /// use mektpoy::Session;
    /// let parent = Session::new("p");
    /// assert!(parent.parent().is_none());
    /// assert_eq!(Session::fork(&parent, 0, "f")?.parent().map(|p| p.id.as_str()), Some("p"));
    /// # Ok::<(), mektpoy::session::ForkError>(())
    /// ```
    pub fn parent(&self) -> Option<&ParentRef> {
        self.parent.as_ref()
    }

    /// Validates and appends one event; returns its `Seq`. A persisting session writes and
    /// flushes the line before returning.
    ///
    /// O(size of the event + log n); a replace also walks the smaller of what it removes and
    /// what it keeps of the surface (O(1) per node, O(log n) per tool call or result).
    ///
    /// Besides the rules loading applies, `append` refuses what would make every later request fail
    /// ([reference §1](crate::manual::reference#1-vocabulary-and-json) items 16 to 18): an empty
    /// assistant message on the surface ([`AppendErrorKind::EmptyAssistantMessage`]), a tool result
    /// answering no call on the surface ([`AppendErrorKind::OrphanToolResult`]), a replace that
    /// would leave one ([`AppendErrorKind::ReplaceOrphansToolResult`]).
    ///
    /// ```
    /// use mektpoy::session::AppendErrorKind;
    /// use mektpoy::vocab::Seq;
    /// use mektpoy::{Event, Message, Session};
    /// let session = Session::new("s");
    /// assert_eq!(session.append(Event::append(Message::user("u1", "hi")))?, Seq(0));
    /// // A message id the log holds already: refused, nothing appended.
    /// let refused = session.append(Event::append(Message::user("u1", "again"))).unwrap_err();
    /// assert!(matches!(refused.kind(), AppendErrorKind::DuplicateMessageId { .. }));
    /// assert_eq!(session.len(), 1);
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
    ///
    /// # Errors
    /// The [`AppendError`] of the first rule the event breaks ([reference
    /// §1](crate::manual::reference#1-vocabulary-and-json)), naming its `Seq`, or
    /// [`AppendErrorKind::Write`] when the line could not be persisted. The log is unchanged.
    pub fn append(&self, event: Event) -> Result<Seq, AppendError> {
        self.transact(|tx| tx.push(event))
    }

    /// Decodes one JSON event line, then appends it as [`append`](Self::append) does. The line
    /// is kept as the event's bytes (unknown fields included), as a loaded line is; JSON
    /// whitespace with line breaks is squeezed out so it stays one JSONL line.
    ///
    /// ```
    /// use mektpoy::Session;
    /// let session = Session::new("s");
    /// let line = r#"{"type":"user/message","data":{"message":{"id":"u1","role":"user","content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}}},"surfaceOp":"append"}"#;
    /// session.append_json(line)?;
    /// assert_eq!(session.messages()[0].text(), "hi");
    /// assert!(session.append_json("{").is_err());
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`AppendErrorKind::Decode`] when the line is not a well-formed event; otherwise as `append`.
    pub fn append_json(&self, line: &str) -> Result<Seq, AppendError> {
        self.transact(|tx| {
            let event = Event::from_json(line).map_err(|source| {
                AppendError::new(tx.next_seq(), AppendErrorKind::Decode { source })
            })?;
            tx.push_line(event, Some(Arc::from(crate::event::single_line(line))))
        })
    }

    /// Runs `f` under the write lock on a working copy of the log; commits (and persists, in
    /// one write) every event it pushed when it returns `Ok`, nothing otherwise. A batch of
    /// two or more events is written after a frame line announcing them, so that a reader
    /// can tell a batch the write did not finish and drop it whole.
    pub(crate) fn transact<R, E: From<AppendError>>(
        &self,
        f: impl FnOnce(&mut Transaction<'_>) -> Result<R, E>,
    ) -> Result<R, E> {
        let mut committed = write(&self.log);
        let mut tx = Transaction {
            before: committed.state.clone(),
            state: committed.state.clone(),
            start: committed.state.len(),
            derived: &self.derived,
            computed: None,
        };
        let out = f(&mut tx)?;
        let Transaction {
            state,
            start,
            computed,
            ..
        } = tx;
        // What the batch's view computed is the cache of the state about to be committed.
        let keep = |computed: Option<Derived>| {
            if let Some(d) = computed {
                *lock(&self.derived) = d;
            }
        };
        if state.len() == start {
            keep(computed);
            return Ok(out);
        }
        let frame = Frame::announcing(state.len() - start);
        if let Some(writer) = committed.writer.as_mut() {
            // `start < len` here: the batch is not empty.
            let lines = state.lines.focus().narrow(start..);
            let lines = state
                .range(start..state.len())
                .zip(lines)
                .map(|(e, line)| line_text(e, line));
            writer
                .write_framed(frame.as_ref(), lines)
                .map_err(|source| {
                    AppendError::new(Seq::from(start), AppendErrorKind::Write { source })
                })?;
        }
        committed.state = state;
        if let Some(frame) = frame {
            committed.frames.insert(start, frame);
        }
        keep(computed);
        Ok(out)
    }

    /// Number of events, inherited ones included.
    ///
    /// ```
    /// use mektpoy::{Event, Message, Session};
    /// let session = Session::new("s");
    /// session.append(Event::append(Message::user("u1", "hi")))?;
    /// assert_eq!(session.len(), 1);
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
    pub fn len(&self) -> usize {
        read(&self.log).state.len()
    }

    /// Whether the log has no event.
    ///
    /// ```
    /// use mektpoy::Session;
    /// assert!(Session::new("s").is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every event in order. O(1): the vector shares its structure with the log.
    ///
    /// ```
    /// use mektpoy::{Event, Message, Session};
    /// let session = Session::new("s");
    /// session.append(Event::append(Message::user("u1", "hi")))?;
    /// let events = session.events();
    /// assert_eq!(events[0].event_type(), "user/message");
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
    pub fn events(&self) -> List<Event> {
        List(read(&self.log).state.events.clone())
    }

    /// The surface's messages in order, opaque nodes left out. Cached per surface change.
    ///
    /// ```
    /// use mektpoy::{Event, Message, Session};
    /// let session = Session::new("s");
    /// session.append(Event::append(Message::user("u1", "hi")))?;
    /// session.append(Event::append(Message::assistant("a1", "hello", "p", "m")))?;
    /// // A compaction replaces both with a summary.
    /// session.append(Event::replace(Message::user("c1", "summary"), 0, 1))?;
    /// let ids: Vec<String> = session.messages().iter().map(|m| m.id().to_owned()).collect();
    /// assert_eq!(ids, ["c1"]);
    /// assert_eq!(session.len(), 3, "the log keeps everything");
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
    pub fn messages(&self) -> Messages {
        let log = read(&self.log);
        lock(&self.derived).messages(&log.state)
    }

    /// What a loop does next, read from the surface alone: after [`Session::open`] a process
    /// resends a request left without an answer, runs the tool calls of an answer left without
    /// results, continues after results, or waits for the user. O(messages since the last
    /// answer).
    ///
    /// ```
    /// use mektpoy::session::Position;
    /// use mektpoy::{Event, Message, Session};
    /// let session = Session::new("s");
    /// assert_eq!(session.position(), Position::Start);
    /// session.append(Event::append(Message::user("u1", "hi")))?;
    /// assert_eq!(session.position(), Position::Resend);
    /// session.append(Event::append(Message::assistant("a1", "ok", "p", "m")))?;
    /// assert_eq!(session.position(), Position::AwaitUser);
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
    pub fn position(&self) -> Position {
        position::position(self.messages().as_ref())
    }

    /// Every surface node in order, as replace ranges index them. O(1).
    ///
    /// ```
    /// use mektpoy::{Event, Message, Session};
    /// let session = Session::new("s");
    /// session.append(Event::append(Message::user("u1", "hi")))?;
    /// assert_eq!(session.surface().len(), 1);
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
    pub fn surface(&self) -> List<SurfaceNode> {
        List(read(&self.log).state.surface.clone())
    }

    /// The latest `request/header` and its `Seq`.
    ///
    /// ```
    /// use mektpoy::{AgentLoop, Message, Session, route_for};
    /// let mut agent = AgentLoop::builder(Session::new("s"), route_for("deepseek", "deepseek-flash")).build()?;
    /// assert!(agent.session().request_header().is_none());
    /// agent.user_turn([Message::user("u1", "hi")])?;
    /// let (seq, header) = agent.session().request_header().unwrap();
    /// assert_eq!((seq.0, header.header.config.model.as_str()), (1, "deepseek-flash"));
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
    pub fn request_header(&self) -> Option<(Seq, Arc<HeaderEvent>)> {
        read(&self.log).state.latest_header.clone()
    }

    /// Number of surface replaces so far.
    ///
    /// ```
    /// use mektpoy::{Event, Message, Session};
    /// let session = Session::new("s");
    /// session.append(Event::append(Message::user("u1", "hi")))?;
    /// assert_eq!(session.surface_generation(), 0);
    /// session.append(Event::replace(Message::user("c1", "summary"), 0, 0))?;
    /// assert_eq!(session.surface_generation(), 1);
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
    pub fn surface_generation(&self) -> u64 {
        read(&self.log).state.generation
    }

    /// Tool declarations and updates a route may rely on, as of the last appended event.
    ///
    /// The first call folds the whole log, inherited events included (O(n)), unless the session
    /// is a fork of a parent that had folded ([`fork`](Self::fork)); later calls fold only the
    /// events appended since (O(k)). A snapshot already handed out never changes.
    /// **A surface replace does not drop updates**: `project_tool_updates` rule 3 falls back
    /// instead.
    ///
    /// ```
    /// use mektpoy::{AgentLoop, Message, Session, ToolSchema, route_for};
    /// let read = ToolSchema::no_input("read", "");
    /// let mut agent = AgentLoop::builder(Session::new("s"), route_for("deepseek", "deepseek-flash"))
    ///     .tools([read.clone()])
    ///     .build()?;
    /// agent.user_turn([Message::user("u1", "hi")])?;
    /// let history = agent.session().tool_history();
    /// assert_eq!(history.tools().to_vec(), vec![read]);
    /// assert!(history.updates().is_empty());
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
    pub fn tool_history(&self) -> ToolHistory {
        let log = read(&self.log);
        lock(&self.derived).tool_history(FoldKind::ByReference, &log.state)
    }

    /// The **by-value** snapshot ([reference §3.1](crate::manual::reference#31-the-by-value-fold)),
    /// for routes whose additions and redefinitions may carry their definition
    /// ([`Route::inline_definitions`](crate::Route::inline_definitions)): a declaration series
    /// starts only where a request series does, so a changed or returning tool never rewrites the
    /// declarations.
    ///
    /// Cached and incremental like [`tool_history`](Self::tool_history): the first call folds
    /// the whole log, later calls only the events appended since.
    ///
    /// ```
    /// use mektpoy::{AgentLoop, ContentBlock, Message, Session, ToolSchema, route_for};
    /// let tool = |d: &str| ToolSchema::no_input("read", d);
    /// let mut agent = AgentLoop::builder(Session::new("s"), route_for("acme", "acme-1"))
    ///     .model("acme-1")
    ///     .tools([tool("v1")])
    ///     .build()?;
    /// agent.user_turn([Message::user("u1", "hi")])?;
    /// agent.append(agent.assistant("a1", [ContentBlock::text("ok")]))?;
    /// agent.set_tools([tool("v2")])?; // a changed definition
    /// agent.user_turn([Message::user("u2", "go on")])?;
    /// // By reference the change opens a new declaration series; by value it is an update.
    /// assert_eq!(agent.session().tool_history().tools()[0].description(), "v2");
    /// let by_value = agent.session().tool_history_by_value();
    /// assert_eq!(by_value.tools()[0].description(), "v1");
    /// assert_eq!(by_value.updates()[0].redefinitions()[0].description(), "v2");
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
    pub fn tool_history_by_value(&self) -> ToolHistory {
        let log = read(&self.log);
        lock(&self.derived).tool_history(FoldKind::ByValue, &log.state)
    }

    /// Length, header, messages, generation and snapshot from one moment.
    ///
    /// ```
    /// use mektpoy::{Event, Message, Session};
    /// let session = Session::new("s");
    /// session.append(Event::append(Message::user("u1", "hi")))?;
    /// let view = session.view();
    /// assert_eq!(view.len, session.len());
    /// assert_eq!(view.messages, session.messages());
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
    pub fn view(&self) -> SessionView {
        let log = read(&self.log);
        view_of(&log.state, &mut lock(&self.derived), FoldKind::ByReference)
    }

    /// The session's thinking policy: the one its log records, else the default
    /// ([`ThinkingPolicy::StripThinking`]).
    ///
    /// ```
    /// use mektpoy::event::ThinkingPolicy;
    /// use mektpoy::Session;
    /// assert_eq!(Session::new("s").thinking_policy(), ThinkingPolicy::StripThinking);
    /// ```
    pub fn thinking_policy(&self) -> ThinkingPolicy {
        read(&self.log).state.thinking_policy.unwrap_or_default()
    }

    /// Chooses the session's thinking policy, recorded in its log (a `thinking/policy`
    /// event), so that a resumed loop applies the same one. Once per session, before any
    /// route's thinking floor exists.
    ///
    /// ```
    /// use mektpoy::{Session, event::ThinkingPolicy};
    /// let session = Session::new("s");
    /// assert_eq!(session.thinking_policy(), ThinkingPolicy::StripThinking);
    /// session.set_thinking_policy(ThinkingPolicy::DropBlock)?;
    /// assert_eq!(session.thinking_policy(), ThinkingPolicy::DropBlock);
    /// assert!(session.set_thinking_policy(ThinkingPolicy::Refuse).is_err());
    /// # Ok::<(), mektpoy::session::AppendError>(())
    /// ```
    ///
    /// # Errors
    /// [`AppendErrorKind::ThinkingPolicyChosen`] when the log already records a policy or a
    /// floor; [`AppendErrorKind::Write`] when the event could not be persisted.
    pub fn set_thinking_policy(&self, policy: ThinkingPolicy) -> Result<Seq, AppendError> {
        self.append(Event::Thinking(Arc::new(ThinkingEvent::Policy(policy))))
    }

    /// The `Seq` of the route's latest thinking floor (its latest rewriting request on a
    /// route that binds thinking), and what that request rewrote.
    ///
    /// ```
    /// use mektpoy::event::Rewrite;
    /// use mektpoy::Session;
    /// let session = Session::new("s");
    /// assert_eq!(session.thinking_floor("anthropic", "claude-fable-5-1"), None);
    /// session.append_json(r#"{"type":"thinking/floor","data":{"provider":"anthropic","model":"claude-fable-5-1","rewrite":"system"}}"#)?;
    /// let (seq, rewrite) = session.thinking_floor("anthropic", "claude-fable-5-1").unwrap();
    /// assert_eq!((seq.0, rewrite), (0, Rewrite::System));
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
    pub fn thinking_floor(&self, provider: &str, model: &str) -> Option<(Seq, Rewrite)> {
        read(&self.log)
            .state
            .thinking_floors
            .get(&(Arc::from(provider), Arc::from(model)))
            .copied()
    }

    /// The registration-time schema guard: whether registering `tool` would offer, under a
    /// name the surface already shows calls of, a definition other than the one those calls
    /// were made against (the definition the latest header before each call's assistant
    /// message gave the tool). Calls a replace removed do not count; key order, number
    /// spelling and `defer_loading` alone never make a conflict; a call its header did not
    /// declare (an invalid call), or one before any header, is not compared. The rules are
    /// in the [`SchemaConflict`] docs and the README section "Registering a tool that was
    /// already called".
    ///
    /// Nothing is refused or logged: the loop decides. By reference a conflicting tool also
    /// opens a declaration series once recorded (the cached prefix is rewritten); on
    /// inline-definition routes it costs no cache but is still a change the model sees.
    ///
    /// O(log n) for a name never called on the surface; otherwise O(k · (log n + b)) for `k`
    /// assistant messages on the surface calling it (`b` blocks each), plus one definition
    /// comparison per header in force. Works the same on forks and loaded sessions.
    ///
    /// ```
    /// use mektpoy::{AgentLoop, Message, Session, ToolSchema, route_for};
    /// let read = |d: &str| ToolSchema::no_input("read", d);
    /// let mut agent = AgentLoop::builder(Session::new("s"), route_for("acme", "acme-1"))
    ///     .model("acme-1")
    ///     .tools([read("v1")])
    ///     .build()?;
    /// agent.user_turn([Message::user("u1", "read it")])?;
    /// let answer: Message = serde_json::from_str(r#"{"id":"a1","role":"assistant","content":[{"type":"tool-call","id":"c1","name":"read","arguments":"{}"}],"source":{"kind":"model","provider":"acme","model":"acme-1"}}"#)?;
    /// agent.append(answer)?;
    /// let session = agent.session();
    /// assert!(session.check_tool(&read("v1")).is_ok());
    /// let conflict = session.check_tool(&read("v2")).unwrap_err();
    /// assert_eq!(conflict.calls[0].call_id, "c1");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// A [`SchemaConflict`] listing every conflicting call, in surface order.
    pub fn check_tool(&self, tool: &ToolSchema) -> Result<(), SchemaConflict> {
        read(&self.log).state.check_tool(tool)
    }

    /// [`check_tool`](Self::check_tool) for a whole tool set about to be registered (what
    /// [`AgentLoop::set_tools`](crate::AgentLoop::set_tools) takes), read from one moment of
    /// the log.
    ///
    /// ```
    /// use mektpoy::{AgentLoop, Message, Session, ToolSchema, route_for};
    /// let read = |d: &str| ToolSchema::no_input("read", d);
    /// let mut agent = AgentLoop::builder(Session::new("s"), route_for("acme", "acme-1"))
    ///     .model("acme-1")
    ///     .tools([read("v1")])
    ///     .build()?;
    /// agent.user_turn([Message::user("u1", "read it")])?;
    /// let answer: Message = serde_json::from_str(r#"{"id":"a1","role":"assistant","content":[{"type":"tool-call","id":"c1","name":"read","arguments":"{}"}],"source":{"kind":"model","provider":"acme","model":"acme-1"}}"#)?;
    /// agent.append(answer)?;
    /// let grep = ToolSchema::no_input("grep", "");
    /// let conflicts = agent.session().check_tools(&[grep, read("v2")]).unwrap_err();
    /// assert_eq!(conflicts.conflicts.len(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`SchemaConflicts`]: one [`SchemaConflict`] per conflicting tool, in the set's order.
    pub fn check_tools(&self, tools: &[ToolSchema]) -> Result<(), SchemaConflicts> {
        read(&self.log).state.check_tools(tools)
    }

    /// Whether appends are written to a file.
    ///
    /// ```
    /// use mektpoy::Session;
    /// let dir = tempfile::tempdir()?;
    /// assert!(!Session::new("s").is_persisting());
    /// assert!(Session::create(dir.path().join("s.jsonl"), "s")?.is_persisting());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn is_persisting(&self) -> bool {
        read(&self.log).writer.is_some()
    }

    /// Whether each persisted batch is also synced to disk (`fsync`), not only flushed to the
    /// OS. Off by default: a flushed batch survives a killed process, only not a power loss.
    /// No effect on a session without a file.
    ///
    /// ```
    /// use mektpoy::{Event, Message, Session};
    /// let dir = tempfile::tempdir()?;
    /// let session = Session::create(dir.path().join("s.jsonl"), "s")?;
    /// session.set_sync(true); // each batch now survives a power loss too
    /// session.append(Event::append(Message::user("u1", "hi")))?;
    /// assert_eq!(Session::load(dir.path().join("s.jsonl"))?.session.len(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn set_sync(&self, sync: bool) {
        if let Some(w) = write(&self.log).writer.as_mut() {
            w.set_sync(sync);
        }
    }
}

fn view_of(state: &LogState, derived: &mut Derived, kind: FoldKind) -> SessionView {
    SessionView {
        len: state.len(),
        header: state.latest_header.clone(),
        messages: derived.messages(state),
        surface_generation: state.generation,
        tool_history: derived.tool_history(kind, state),
    }
}

/// A batch in progress: a working copy of the log under the session's write lock.
pub(crate) struct Transaction<'s> {
    /// The committed log, as the batch found it.
    pub(crate) before: LogState,
    state: LogState,
    start: usize,
    derived: &'s Mutex<Derived>,
    /// The caches `view` computed for the working copy, installed on commit.
    computed: Option<Derived>,
}

impl Transaction<'_> {
    pub fn next_seq(&self) -> Seq {
        self.state.next_seq()
    }

    /// Validates and applies `event` to the working copy.
    pub fn push(&mut self, event: Event) -> Result<Seq, AppendError> {
        self.push_line(event, None)
    }

    /// Validates and applies `event`, whose log line is `line` when it came as text.
    pub fn push_line(&mut self, event: Event, line: Option<Arc<str>>) -> Result<Seq, AppendError> {
        self.state.check(&event, state::Rules::Append)?;
        let seq = self.state.next_seq();
        self.state.apply(event, line);
        Ok(seq)
    }

    pub fn state(&self) -> &LogState {
        &self.state
    }

    /// A view of the committed log as the batch found it, its snapshot from the fold of
    /// `kind`. The session's caches describe that state already, so this is cheap.
    pub fn view_before(&self, kind: FoldKind) -> SessionView {
        view_of(&self.before, &mut lock(self.derived), kind)
    }

    /// A view of the committed log as it stood right before the latest answer of `provider`
    /// and `model` (an assistant message from that model, a snapshot date aside, that a loop
    /// stamped with its turn and step): what the request that answer answered sent, the
    /// route's last request the provider accepted. Of the answers stamped with that step,
    /// the first counts. Its `header` is the latest one for `provider` and `model` before
    /// that answer. With it, the thinking floor of `route` (a route's provider and model) as
    /// of that point, which the request was serialized under. `None` without such an answer
    /// or header.
    ///
    /// A header is logged only when the request's configuration or tools change (or a series
    /// starts), so the latest header's batch can be many requests old; a retry after a
    /// reopen compared with it put a lookback breakpoint the dead process never sent. The
    /// prefix is applied again on a fresh state, O(events before it): a recorder asks once
    /// per route, on its first request.
    pub fn view_before_answer(
        &self,
        provider: &str,
        model: &str,
        route: (&str, &str),
        kind: FoldKind,
    ) -> Option<(SessionView, Option<(Seq, Rewrite)>)> {
        let events = &self.before.events;
        let answer_of = |e: &Event| match e {
            Event::Message(m)
                if m.message.role() == crate::vocab::Role::Assistant
                    && m.turn.is_some()
                    && m.step.is_some() =>
            {
                match m.message.source() {
                    crate::vocab::MessageSource::Model {
                        provider: p,
                        model: m2,
                    } if p == provider && same_family(m2, model) => Some((m.turn, m.step)),
                    _ => None,
                }
            }
            _ => None,
        };
        let latest = events.iter().rposition(|e| answer_of(e).is_some())?;
        let stamps = answer_of(&events[latest]);
        // The first answer of that step, back from the latest but no further than a header
        // of this provider and model: a request recorded in between makes the answers after
        // it its own. Turn numbers are a loop's own, so a loop reopened after another loop
        // took turns over the same log may stamp a turn it used before, and an older answer
        // with the same stamps then belongs to an earlier request.
        let own_header = |e: &Event| {
            matches!(e, Event::Header(h)
                if h.header.config.provider == provider && h.header.config.model == model)
        };
        let end = (0..=latest)
            .rev()
            .take_while(|&i| !own_header(&events[i]))
            .filter(|&i| answer_of(&events[i]) == stamps)
            .last()?;
        let header = events
            .iter()
            .take(end)
            .enumerate()
            .rev()
            .find_map(|(i, e)| match e {
                Event::Header(h)
                    if h.header.config.provider == provider && h.header.config.model == model =>
                {
                    Some((i, Arc::clone(h)))
                }
                _ => None,
            })?;
        let mut state = LogState::default();
        for (e, line) in events.iter().zip(self.before.lines.iter()).take(end) {
            state.apply(e.clone(), line.clone());
        }
        let rules = lock(self.derived).rules;
        let mut view = view_of(&state, &mut Derived::new(rules), kind);
        view.header = Some((Seq(header.0 as u64), header.1));
        Some((view, floor_of(&state, route)))
    }

    /// A view of the committed log as it stood right after the batch that logged its latest
    /// header for `provider` and `model`: what that request sent, without the answers, tool
    /// results and other loops' requests appended since. `None` when no such header exists.
    ///
    /// The batch ends after the header's developer message and thinking floor (the recorder
    /// writes them after the header, in the same batch). When nothing follows it this is
    /// [`view_before`](Self::view_before); otherwise the prefix is applied again on a fresh
    /// state, O(events before it): a recorder asks once per route, on its first request. With
    /// it, the thinking floor of `route` as of that point.
    pub fn view_after_header(
        &self,
        provider: &str,
        model: &str,
        route: (&str, &str),
        kind: FoldKind,
    ) -> Option<(SessionView, Option<(Seq, Rewrite)>)> {
        let events = &self.before.events;
        let at = events.iter().rposition(|e| {
            matches!(e, Event::Header(h)
                if h.header.config.provider == provider && h.header.config.model == model)
        })?;
        let end = at
            + 1
            + events
                .iter()
                .skip(at + 1)
                .take_while(|e| match e {
                    Event::Thinking(_) => true,
                    Event::Message(m) => {
                        m.message.role() == crate::vocab::Role::Developer
                            && *m.message.source() == crate::vocab::MessageSource::ToolRegistry
                    }
                    _ => false,
                })
                .count();
        if end == self.before.len() {
            return Some((self.view_before(kind), floor_of(&self.before, route)));
        }
        let mut state = LogState::default();
        for (e, line) in events.iter().zip(self.before.lines.iter()).take(end) {
            state.apply(e.clone(), line.clone());
        }
        let rules = lock(self.derived).rules;
        let view = view_of(&state, &mut Derived::new(rules), kind);
        Some((view, floor_of(&state, route)))
    }

    /// The fold of `kind` as of the working copy (committed events from the cache, then the
    /// batch's own events on a clone).
    pub fn fold(&self, kind: FoldKind) -> ToolFold {
        let mut d = lock(self.derived);
        let mut fold = d.cached(kind).catch_up(&self.state, self.start).clone();
        let len = self.state.len();
        let records = self.state.fold_records_in(fold.upto()..len);
        fold.fold_to(records, len, self.state.fold_log());
        fold
    }

    /// A view of the working copy, as it will be once committed, its snapshot from the fold
    /// of `kind`. Its caches become the session's on commit, so the next reader does not redo
    /// the work.
    pub fn view(&mut self, kind: FoldKind) -> SessionView {
        let mut d = {
            let committed = lock(self.derived);
            Derived {
                rules: committed.rules,
                by_reference: committed.by_reference.clone(),
                by_value: committed.by_value.clone(),
                // Extended, not rebuilt, when the batch only appended.
                messages: committed.messages.clone(),
            }
        };
        // The committed caches stop at `start` at most; catching up on the working copy folds
        // only the batch's events.
        let view = view_of(&self.state, &mut d, kind);
        self.computed = Some(d);
        view
    }
}

/// Whether two model ids name the same model, a snapshot date aside ([decision
/// 102](crate::manual::decisions#decision-102)).
fn same_family(a: &str, b: &str) -> bool {
    crate::route::undated(a).unwrap_or(a) == crate::route::undated(b).unwrap_or(b)
}

/// The thinking floor of a route (its provider and model) in `state`.
fn floor_of(state: &LogState, (provider, model): (&str, &str)) -> Option<(Seq, Rewrite)> {
    state
        .thinking_floors
        .get(&(Arc::from(provider), Arc::from(model)))
        .copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync<T: Send + Sync>() {}

    /// Issue 10 item 4: one name index per header, built when it is applied and shared (not
    /// rebuilt per developer message, nor per fold): the folds keep no index of their own; a
    /// developer message's record resolves through the log's, to the header's own schemas.
    #[test]
    fn one_tool_index_per_header_shared_by_validation_and_both_folds() {
        use crate::event::{Config, Reason, RequestHeader};
        use crate::vocab::{ContentBlock, Seq, ToolSchema};
        let session = Session::new("s");
        let tools: Vec<ToolSchema> = (0..3)
            .map(|i| ToolSchema::no_input(format!("t{i}"), "d"))
            .collect();
        session
            .append(Event::header(
                RequestHeader::new(Config::new("p", "m"), tools.clone()),
                Reason::Initial,
            ))
            .unwrap();
        session
            .append(Event::developer(
                Message::developer("d1", vec![ContentBlock::addition("t1").unwrap()]),
                Some(Seq(0)),
            ))
            .unwrap();
        let histories = [session.tool_history(), session.tool_history_by_value()];
        let log = read(&session.log);
        let index = log
            .state
            .tool_indexes
            .get(&Seq(0))
            .expect("indexed on apply");
        assert!(index.contains("t1") && !index.contains("t9"));
        for history in histories {
            let added = &history.updates()[0].additions()[0];
            assert!(added.shares_definition_with(&tools[1]), "{history:?}");
        }
    }

    /// User, assistant and tool events leave the cached snapshot in place; a header or a
    /// developer message drops it.
    #[test]
    fn the_cached_snapshot_survives_events_that_cannot_change_it() {
        use crate::event::{Event, Reason, RequestHeader};
        use crate::vocab::Message;
        let session = Session::new("s");
        let cached = |s: &Session| lock(&s.derived).by_reference.snapshot.is_some();
        session
            .append(Event::header(
                RequestHeader::new(crate::event::Config::new("p", "m"), vec![]),
                Reason::Initial,
            ))
            .unwrap();
        let _ = session.tool_history();
        assert!(cached(&session));
        session
            .append(Event::append(Message::user("u1", "hi")))
            .unwrap();
        session
            .append(Event::append(Message::assistant("a1", "ok", "p", "m")))
            .unwrap();
        let catch_up = |s: &Session| {
            let log = read(&s.log);
            lock(&s.derived)
                .by_reference
                .catch_up(&log.state, log.state.len());
        };
        catch_up(&session);
        assert_eq!(lock(&session.derived).by_reference.fold.upto(), 3);
        assert!(
            cached(&session),
            "still the snapshot folded before the messages"
        );
        session
            .append(Event::developer(Message::developer("d1", vec![]), None))
            .unwrap();
        catch_up(&session);
        assert!(!cached(&session), "a developer message may change it");
    }

    /// [Decision 78](crate::manual::decisions#decision-78): a computed fold keeps a checkpoint
    /// every `CHECKPOINT_EVERY` fold events, and a fork starts from its parent's fold (at or before
    /// its `upto`) or from the last checkpoint before it; a kind the parent never folded starts
    /// from scratch.
    #[test]
    fn a_fork_starts_from_its_parents_fold_or_last_checkpoint() {
        use crate::event::{Config, Reason, RequestHeader};
        let session = Session::new("s");
        let headers = 2 * CHECKPOINT_EVERY + 10;
        for i in 0..headers {
            let tools = vec![ToolSchema::new(
                format!("t{}", i % 3),
                "d",
                Default::default(),
            )];
            let reason = if i == 0 {
                Reason::Initial
            } else {
                Reason::Change
            };
            let header = RequestHeader::new(Config::new("p", "m"), tools);
            session.append(Event::header(header, reason)).unwrap();
            // A message between headers, so that positions and fold-event counts differ.
            session
                .append(Event::append(Message::user(format!("u{i}"), "hi")))
                .unwrap();
        }
        let cold = Session::fork(&session, session.len() as u64, "cold").unwrap();
        let history = session.tool_history();
        {
            let d = lock(&session.derived);
            let at: Vec<(usize, usize)> = d
                .by_reference
                .checkpoints
                .iter()
                .map(|(fold, folded)| (fold.upto(), *folded))
                .collect();
            // The 4,096th header is event 8,190: the checkpoint is right after it.
            assert_eq!(
                at,
                [
                    (2 * CHECKPOINT_EVERY - 1, CHECKPOINT_EVERY),
                    (4 * CHECKPOINT_EVERY - 1, 2 * CHECKPOINT_EVERY)
                ]
            );
            assert!(d.by_value.is_none());
        }
        let start = |s: &Session| lock(&s.derived).by_reference.fold.upto();
        let mid = Session::fork(&session, 3 * CHECKPOINT_EVERY as u64, "mid").unwrap();
        assert_eq!(start(&mid), 2 * CHECKPOINT_EVERY - 1);
        assert_eq!(lock(&mid.derived).by_reference.checkpoints.len(), 1);
        assert!(lock(&mid.derived).by_value.is_none());
        let early = Session::fork(&session, 100, "early").unwrap();
        assert_eq!(start(&early), 0);
        let end = Session::fork(&session, session.len() as u64, "end").unwrap();
        assert_eq!(start(&end), session.len());
        assert!(lock(&end.derived).by_reference.snapshot.is_some());
        assert_eq!(end.tool_history(), history);
        for (fork, upto) in [(&mid, 3 * CHECKPOINT_EVERY), (&early, 100)] {
            let scratch = Session::fork(&cold, upto as u64, "scratch").unwrap();
            assert_eq!(fork.tool_history(), scratch.tool_history());
        }
    }

    #[test]
    fn session_is_send_sync() {
        assert_send_sync::<Session>();
        assert_send_sync::<SessionView>();
        assert_send_sync::<ToolHistory>();
        // A custom sink is held as `Send + Sync`, so options still cross threads.
        assert_send_sync::<FileOptions>();
    }
}
