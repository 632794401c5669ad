//! Session files: the session line and the event lines of [`store`](crate::store)'s framing.
//!
//! `store` splits a file into lines and batches and finds its torn end; this module drives
//! it, decoding each line into an event the log validates, and decides what a line that does
//! not decode means (a torn end when `store` can drop it, a refused file when it cannot).

use std::borrow::Cow;
use std::fmt;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};
use serde_json::Value;

use super::state::Rules;
use super::{AppendError, AppendErrorKind, LogState, ParentRef, Session, line_text, read};
use crate::event::Event;
use crate::store::{
    self, FrameFault, Frames, Item, JsonlSink, JsonlWriter, Limits, Lines, LockedFile, OpenError,
    PersistError, ReadError, Tail, TornTail, WrapSink, WriteError,
};
use crate::vocab::{JsonFault, Seq};

/// The file format version this crate reads and writes.
const VERSION: u64 = 0;

/// A loaded session and what loading noticed without refusing the file.
///
/// ```
/// use mektpoy::{Event, Message, Session};
/// let session = Session::new("s1");
/// session.append(Event::append(Message::user("u1", "hi")))?;
/// let mut bytes = session.to_jsonl().into_bytes();
/// bytes.extend_from_slice(br#"{"type":"mess"#); // a write cut short by a crash
/// let loaded = Session::load_bytes(&bytes)?;
/// assert_eq!(loaded.session.messages().len(), 1);
/// assert_eq!(loaded.torn_tail.map(|t| t.len), Some(13));
/// assert!(!loaded.unterminated);
/// # Ok::<(), mektpoy::Error>(())
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub struct Loaded {
    /// The session.
    pub session: Session,
    /// The end of the file that was dropped, if it was torn.
    pub torn_tail: Option<TornTail>,
    /// Whether the final line had no `\n` but was valid and is kept.
    pub unterminated: bool,
}

/// The fold rules a log was written under, named by the specification version that made them. A log
/// says which in its session line (`"rules":4`); a log written before that says nothing and is read
/// under [`FileOptions::unmarked_rules`] (by default [`V3`](Self::V3)), so that upgrading the crate
/// does not change what an old log projects and meters ([decision
/// 96](crate::manual::decisions#decision-96)).
///
/// ```
/// use mektpoy::session::LogRules;
/// use mektpoy::Session;
/// assert_eq!(Session::new("s").rules(), LogRules::CURRENT);
/// assert_eq!(LogRules::CURRENT, LogRules::V4);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LogRules {
    /// Specification v3: a removed baseline tool (one without `deferLoading`) whose header
    /// offers it again opens a new declaration series (departure 2 as it stood then).
    V3,
    /// Specification v4, what this crate writes: such a tool's return continues the series
    /// and re-offers it with a `tool_addition`.
    #[default]
    V4,
}

impl LogRules {
    /// The rules this crate writes new logs under.
    pub const CURRENT: LogRules = LogRules::V4;

    /// The number the session line carries (`"rules"`).
    ///
    /// ```
    /// use mektpoy::session::LogRules;
    /// assert_eq!(LogRules::V3.number(), 3);
    /// assert!(mektpoy::Session::new("s").to_jsonl().contains(r#""rules":4"#));
    /// ```
    pub fn number(self) -> u64 {
        match self {
            LogRules::V3 => 3,
            LogRules::V4 => 4,
        }
    }

    /// The rules numbered `n`, if this crate knows them.
    ///
    /// ```
    /// use mektpoy::session::LogRules;
    /// assert_eq!(LogRules::from_number(4), Some(LogRules::V4));
    /// assert_eq!(LogRules::from_number(5), None, "a newer crate's rules");
    /// ```
    pub fn from_number(n: u64) -> Option<LogRules> {
        match n {
            3 => Some(LogRules::V3),
            4 => Some(LogRules::V4),
            _ => None,
        }
    }
}

/// What is wrong with a `\n`-terminated line 1 that is not a session line.
///
/// ```
/// use mektpoy::session::{LoadError, SessionLineFault};
/// use mektpoy::Session;
/// let err = Session::load_bytes(b"{\"type\":\"event\",\"version\":0,\"id\":\"s\"}\n").unwrap_err();
/// assert!(matches!(err, LoadError::BadSessionLine { reason: SessionLineFault::Type }));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SessionLineFault {
    /// The line is not UTF-8.
    #[error("not UTF-8")]
    NotUtf8,
    /// The line is not JSON; the parser's fault (its message is this variant's).
    #[error("{0}")]
    Malformed(JsonFault),
    /// `type` is missing or not `"session"`.
    #[error("`type` is not \"session\"")]
    Type,
    /// There is no `version`.
    #[error("no `version`")]
    NoVersion,
    /// `id` is missing or not a string.
    #[error("no string `id`")]
    Id,
    /// `parent.id` is missing or not a string.
    #[error("`parent` has no string `id`")]
    ParentId,
    /// `parent.upto` is missing or not a non-negative integer.
    #[error("`parent` has no integer `upto`")]
    ParentUpto,
}

/// Why a session file could not be loaded.
///
/// ```
/// use mektpoy::session::LoadError;
/// use mektpoy::Session;
/// assert!(matches!(Session::load_bytes(b""), Err(LoadError::NoSessionLine)));
/// let mut bytes = Session::new("s").to_jsonl().into_bytes();
/// bytes.extend_from_slice(b"\n");
/// assert!(matches!(Session::load_bytes(&bytes), Err(LoadError::EmptyLine { line: 2 })));
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// Reading (or, for `open`, repairing) the file failed.
    #[error("cannot read {path}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O fault.
        #[source]
        source: io::Error,
    },
    /// `open` found the file locked by another persisting session (of this process or
    /// another): two writers would interleave their batches.
    #[error("{path} is open for writing by another session")]
    Locked {
        /// The file.
        path: PathBuf,
    },
    /// `open_in` could not repair the end of what its sink holds (cut a torn tail, terminate
    /// the last line).
    #[error("cannot repair the end of the log in its sink")]
    Repair {
        /// The sink's I/O fault.
        #[source]
        source: io::Error,
    },
    /// The file is empty, or its only line is torn.
    #[error("the file has no session line")]
    NoSessionLine,
    /// The session line is not `{"type":"session","version":0,"id":...}`.
    #[error("line 1 is not a session line: {reason}")]
    BadSessionLine {
        /// What is wrong.
        reason: SessionLineFault,
    },
    /// The session line names another format version.
    #[error("unsupported session file version {found}")]
    UnsupportedVersion {
        /// The version found.
        found: Value,
    },
    /// The session line names fold rules this crate does not know (`"rules"` other than 3 or
    /// 4): a log written by a newer crate, whose snapshots this one cannot reproduce.
    #[error("line {line}: unsupported fold rules {found} (this crate knows 3 and 4)")]
    UnsupportedRules {
        /// 1-based line number (the session line's).
        line: usize,
        /// The `rules` value found.
        found: Value,
    },
    /// A fork's session line says it inherited more events than the file holds.
    #[error("line 1 says the fork inherited {upto} events, but the file holds {len}")]
    UptoBeyondFile {
        /// `parent.upto` of the session line.
        upto: u64,
        /// The number of events the file holds.
        len: usize,
    },
    /// A second session line after line 1 (two files concatenated, say).
    #[error("line {line} is a second session line")]
    SecondSessionLine {
        /// 1-based line number.
        line: usize,
    },
    /// A `\n`-terminated frame line that is malformed, or a frame inside another's batch.
    #[error("line {line} is a bad batch frame: {fault}")]
    BadFrame {
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        fault: FrameFault,
    },
    /// A line longer than [`FileOptions::max_line_bytes`].
    #[error("line {line} is {len} bytes long, beyond the limit of {max}")]
    LineTooLong {
        /// 1-based line number.
        line: usize,
        /// Its length in bytes, without the `\n`.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// More events than [`FileOptions::max_events`].
    #[error("line {line} holds an event beyond the limit of {max} events")]
    TooManyEvents {
        /// 1-based line number of the first event beyond the limit.
        line: usize,
        /// The limit.
        max: usize,
    },
    /// An empty line.
    #[error("line {line} is empty")]
    EmptyLine {
        /// 1-based line number.
        line: usize,
    },
    /// A line that is not UTF-8.
    #[error("line {line} (event {seq}) is not UTF-8")]
    NotUtf8 {
        /// 1-based line number.
        line: usize,
        /// The event it would have been.
        seq: Seq,
    },
    /// A `\n`-terminated line that does not parse or validate.
    #[error("line {line} (event {}) is rejected", source.seq())]
    Event {
        /// 1-based line number.
        line: usize,
        /// The refusal, naming the event's `Seq`.
        #[source]
        source: AppendError,
    },
}

impl From<ReadError> for LoadError {
    fn from(e: ReadError) -> Self {
        match e {
            ReadError::NoLines => LoadError::NoSessionLine,
            ReadError::LineTooLong { line, len, max } => LoadError::LineTooLong { line, len, max },
            ReadError::TooManyEvents { line, max } => LoadError::TooManyEvents { line, max },
            ReadError::EmptyLine { line } => LoadError::EmptyLine { line },
            ReadError::BadFrame { line, fault } => LoadError::BadFrame { line, fault },
        }
    }
}

/// How a session file is loaded, opened or created: load limits, `fsync`, and the sink the
/// file is written through.
///
/// The defaults read every file the crate can write: no limit on line length or on the
/// number of events, no `fsync`, the file itself as the sink. Limits are for files from
/// elsewhere: a line is refused by its length before it is parsed, so a hostile line costs its
/// bytes, not the parser's tree.
///
/// ```
/// use mektpoy::session::{FileOptions, LoadError};
/// let file = b"{\"type\":\"session\",\"version\":0,\"id\":\"s\"}\n{\"type\":\"note/x\"}\n{\"type\":\"note/y\"}\n";
/// assert_eq!(FileOptions::new().load_bytes(file)?.session.len(), 2);
/// let err = FileOptions::new().max_events(1).load_bytes(file).unwrap_err();
/// assert!(matches!(err, LoadError::TooManyEvents { line: 3, max: 1 }));
/// let err = FileOptions::new().max_line_bytes(20).load_bytes(file).unwrap_err();
/// assert!(matches!(err, LoadError::LineTooLong { line: 1, .. }));
/// # Ok::<(), LoadError>(())
/// ```
#[derive(Clone, Default)]
pub struct FileOptions {
    limits: Limits,
    sync: bool,
    sink: Option<WrapSink>,
    /// The rules of a log whose session line names none.
    unmarked: Option<LogRules>,
}

impl fmt::Debug for FileOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FileOptions")
            .field("max_line_bytes", &self.limits.max_line_bytes)
            .field("max_events", &self.limits.max_events)
            .field("sync", &self.sync)
            .field("sink", &self.sink.as_ref().map_or("the file", |_| "custom"))
            .field("unmarked_rules", &self.unmarked_rules_or_default())
            .finish()
    }
}

impl FileOptions {
    /// No limits, no `fsync`, the file as its own sink: what [`Session::load`],
    /// [`Session::open`] and [`Session::create`] use.
    ///
    /// ```
    /// use mektpoy::session::FileOptions;
    /// use mektpoy::Session;
    /// let bytes = Session::new("s").to_jsonl();
    /// let loaded = FileOptions::new().load_bytes(bytes.as_bytes())?;
    /// assert_eq!(loaded.session.id(), "s");
    /// # Ok::<(), mektpoy::session::LoadError>(())
    /// ```
    pub fn new() -> Self {
        FileOptions::default()
    }

    /// Refuses a file with a line longer than `max` bytes (the `\n` not counted), session and
    /// frame lines included, with [`LoadError::LineTooLong`] naming the line. The limit holds
    /// for a torn last line or batch too: it is checked before a line is parsed.
    ///
    /// ```
    /// use mektpoy::session::{FileOptions, LoadError};
    /// use mektpoy::Session;
    /// let bytes = Session::new("a-long-session-id").to_jsonl();
    /// let err = FileOptions::new().max_line_bytes(16).load_bytes(bytes.as_bytes()).unwrap_err();
    /// assert!(matches!(err, LoadError::LineTooLong { line: 1, max: 16, .. }));
    /// ```
    #[must_use]
    pub fn max_line_bytes(mut self, max: usize) -> Self {
        self.limits.max_line_bytes = Some(max);
        self
    }

    /// Refuses a file holding more than `max` events (inherited ones included) with
    /// [`LoadError::TooManyEvents`] naming the line of the first event beyond it. The events
    /// of a torn tail are not counted: they are dropped.
    ///
    /// ```
    /// use mektpoy::session::{FileOptions, LoadError};
    /// use mektpoy::{Event, Message, Session};
    /// let session = Session::new("s");
    /// session.append(Event::append(Message::user("u1", "hi")))?;
    /// session.append(Event::append(Message::user("u2", "again")))?;
    /// let err = FileOptions::new().max_events(1).load_bytes(session.to_jsonl().as_bytes()).unwrap_err();
    /// assert!(matches!(err, LoadError::TooManyEvents { line: 3, max: 1 }));
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
    #[must_use]
    pub fn max_events(mut self, max: usize) -> Self {
        self.limits.max_events = Some(max);
        self
    }

    /// The fold rules of a log whose session line has no `rules` (a log written before they
    /// were marked): [`LogRules::V3`] unless set, since such a log was written under them. A
    /// caller that knows its unmarked logs were written under other rules (or reads logs made
    /// by hand for the current rules, as the conformance vectors are) says so here. The
    /// session line is never rewritten: a log opened so and appended to stays unmarked, and is
    /// read the same way only with the same option.
    ///
    /// ```
    /// use mektpoy::session::{FileOptions, LogRules};
    /// // A log written before the rules were marked: its session line has no `rules`.
    /// let old = b"{\"type\":\"session\",\"version\":0,\"id\":\"s\"}\n";
    /// assert_eq!(FileOptions::new().load_bytes(old)?.session.rules(), LogRules::V3);
    /// let read = FileOptions::new().unmarked_rules(LogRules::V4).load_bytes(old)?;
    /// assert_eq!(read.session.rules(), LogRules::V4);
    /// # Ok::<(), mektpoy::session::LoadError>(())
    /// ```
    #[must_use]
    pub fn unmarked_rules(mut self, rules: LogRules) -> Self {
        self.unmarked = Some(rules);
        self
    }

    fn unmarked_rules_or_default(&self) -> LogRules {
        self.unmarked.unwrap_or(LogRules::V3)
    }

    /// Whether a session that [`open`](Self::open) or [`create`](Self::create) returns syncs
    /// each batch to disk (`fsync`), not only flushes it to the OS (as
    /// [`Session::set_sync`]). Off by default.
    ///
    /// ```
    /// use mektpoy::session::FileOptions;
    /// let dir = tempfile::tempdir()?;
    /// let session = FileOptions::new().sync(true).create(dir.path().join("s.jsonl"), "s")?;
    /// assert!(session.is_persisting());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn sync(mut self, sync: bool) -> Self {
        self.sync = sync;
        self
    }

    /// Has a session that [`open`](Self::open) or [`create`](Self::create) returns write its
    /// file through `wrap(file)` instead of the file itself. This is for tests that need a
    /// write to fail on purpose (a full disk, a cut write). The sink must keep the `File`: the
    /// lock lives in it.
    ///
    /// ```
    /// use std::fs::File;
    /// use std::io;
    /// use mektpoy::{session::FileOptions, store::{JsonlSink, PersistError}};
    ///
    /// /// A disk that is always full.
    /// struct Full(File);
    /// impl JsonlSink for Full {
    ///     fn append(&mut self, _: &[u8]) -> io::Result<()> { Err(io::Error::other("full")) }
    ///     fn truncate(&mut self, len: u64) -> io::Result<()> { self.0.set_len(len) }
    ///     fn sync(&mut self) -> io::Result<()> { Ok(()) }
    /// }
    ///
    /// let dir = std::env::temp_dir().join(format!("mektpoy-sink-doc-{}", std::process::id()));
    /// std::fs::create_dir_all(&dir)?;
    /// let path = dir.join("s.jsonl");
    /// let err = FileOptions::new().sink(Full).create(&path, "s").unwrap_err();
    /// assert!(matches!(err, PersistError::Write { .. }));
    /// assert!(!path.exists(), "a failed create leaves no file");
    /// # std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), io::Error>(())
    /// ```
    #[must_use]
    pub fn sink<S: JsonlSink + 'static>(
        mut self,
        wrap: impl Fn(File) -> S + Send + Sync + 'static,
    ) -> Self {
        self.sink = Some(Arc::new(move |file| -> Box<dyn JsonlSink> {
            Box::new(wrap(file))
        }));
        self
    }

    /// [`Session::load`] with these options.
    ///
    /// ```
    /// use mektpoy::session::FileOptions;
    /// use mektpoy::Session;
    /// let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("s.jsonl");
    /// Session::new("s").save(&path)?;
    /// let loaded = FileOptions::new().max_line_bytes(1 << 20).load(&path)?;
    /// assert_eq!(loaded.session.id(), "s");
    /// assert!(!loaded.session.is_persisting(), "loaded, not opened for appending");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// As `load`, plus [`LoadError::LineTooLong`] and [`LoadError::TooManyEvents`].
    pub fn load(&self, path: impl AsRef<Path>) -> Result<Loaded, LoadError> {
        let path = path.as_ref();
        let bytes = store::read_file(path).map_err(io_load(path))?;
        self.load_bytes(&bytes)
    }

    /// [`Session::load_bytes`] with these options.
    ///
    /// ```
    /// use mektpoy::session::FileOptions;
    /// use mektpoy::{Event, Message, Session};
    /// let session = Session::new("s");
    /// session.append(Event::append(Message::user("u1", "hi")))?;
    /// let loaded = FileOptions::new().max_events(10).load_bytes(session.to_jsonl().as_bytes())?;
    /// assert_eq!(loaded.session.len(), 1);
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`load`](Self::load), without `Io`.
    pub fn load_bytes(&self, bytes: &[u8]) -> Result<Loaded, LoadError> {
        let parsed = parse(bytes, self.limits, self.unmarked_rules_or_default())?;
        let tail = parsed.tail;
        Ok(Loaded {
            session: parsed.into_session(None),
            torn_tail: tail.torn_tail,
            unterminated: tail.unterminated,
        })
    }

    /// [`Session::open`] with these options.
    ///
    /// ```
    /// use mektpoy::session::{FileOptions, LoadError};
    /// use mektpoy::{Event, Message, Session};
    /// let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("s.jsonl");
    /// Session::create(&path, "s")?.append(Event::append(Message::user("u1", "hi")))?;
    /// let session = FileOptions::new().open(&path)?.session;
    /// assert!(session.is_persisting());
    /// // One writer per file: a second open is refused while the first holds it.
    /// assert!(matches!(FileOptions::new().open(&path), Err(LoadError::Locked { .. })));
    /// # drop(session);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// As `open`, plus [`LoadError::LineTooLong`] and [`LoadError::TooManyEvents`].
    pub fn open(&self, path: impl AsRef<Path>) -> Result<Loaded, LoadError> {
        let path = path.as_ref();
        let file = LockedFile::open(path).map_err(|e| match e {
            OpenError::Io(source) => io_load(path)(source),
            OpenError::Locked => LoadError::Locked {
                path: path.to_owned(),
            },
        })?;
        let parsed = parse(file.bytes(), self.limits, self.unmarked_rules_or_default())?;
        let tail = parsed.tail;
        let writer = file
            .into_writer(tail, self.sink.as_ref(), self.sync)
            .map_err(io_load(path))?;
        Ok(Loaded {
            session: parsed.into_session(Some(writer)),
            torn_tail: tail.torn_tail,
            unterminated: tail.unterminated,
        })
    }

    /// [`Session::create`] with these options (limits do not apply). When the session line
    /// cannot be written, the new file is removed again.
    ///
    /// ```
    /// use mektpoy::session::FileOptions;
    /// use mektpoy::{Event, Message, Session};
    /// let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("s.jsonl");
    /// let session = FileOptions::new().create(&path, "s")?;
    /// session.append(Event::append(Message::user("u1", "hi")))?;
    /// assert_eq!(std::fs::read_to_string(&path)?, session.to_jsonl());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// As `create`, plus [`PersistError::Write`] when the session line is not written.
    pub fn create(
        &self,
        path: impl AsRef<Path>,
        id: impl Into<String>,
    ) -> Result<Session, PersistError> {
        let id = id.into();
        let writer = store::create(
            path.as_ref(),
            &render_session_line(&id, None, LogRules::CURRENT),
            self.sink.as_ref(),
            self.sync,
        )?;
        Ok(Session::from_parts(
            id,
            None,
            None,
            LogRules::CURRENT,
            LogState::default(),
            Frames::new(),
            Some(writer),
        ))
    }
}

impl FileOptions {
    /// A new session persisting to `sink` instead of a file, which must hold nothing yet: the
    /// session line is its first batch. A store (a database, a replicated log) gets the file's
    /// guarantees through the [`JsonlSink`] contract: one call per batch, a failed batch cut
    /// back, and, when the sink reports its length, a writer refused once someone else wrote
    /// to it ([`WriteError::LengthChanged`](crate::store::WriteError::LengthChanged)).
    /// [`sink`](Self::sink) and the limits do not apply; [`sync`](Self::sync) does.
    ///
    /// ```
    /// use std::io;
    /// use std::sync::{Arc, Mutex};
    /// use mektpoy::{Event, Message, Session, session::FileOptions, store::JsonlSink};
    ///
    /// /// Batches kept in memory, as a database table would keep them.
    /// #[derive(Clone, Default)]
    /// struct Memory(Arc<Mutex<Vec<u8>>>);
    /// impl JsonlSink for Memory {
    ///     fn append(&mut self, b: &[u8]) -> io::Result<()> { Ok(self.0.lock().unwrap().extend_from_slice(b)) }
    ///     fn truncate(&mut self, len: u64) -> io::Result<()> { Ok(self.0.lock().unwrap().truncate(len as usize)) }
    ///     fn sync(&mut self) -> io::Result<()> { Ok(()) }
    ///     fn current_len(&mut self) -> io::Result<Option<u64>> { Ok(Some(self.0.lock().unwrap().len() as u64)) }
    /// }
    ///
    /// let store = Memory::default();
    /// let session = FileOptions::new().create_in(store.clone(), "s1")?;
    /// session.append(Event::append(Message::user("u1", "hi")))?;
    /// let bytes = store.0.lock().unwrap().clone();
    /// assert_eq!(bytes, session.to_jsonl().into_bytes());
    ///
    /// // Later, or in another process: the log back from the store, appending to it again.
    /// drop(session);
    /// let reopened = FileOptions::new().open_in(&bytes, store.clone())?.session;
    /// assert_eq!(reopened.messages().len(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// The sink's fault writing the session line (nothing is left in it then).
    pub fn create_in(
        &self,
        sink: impl JsonlSink + 'static,
        id: impl Into<String>,
    ) -> Result<Session, WriteError> {
        let id = id.into();
        let mut writer = JsonlWriter::new(Box::new(sink), 0);
        writer.set_sync(self.sync);
        let mut line = render_session_line(&id, None, LogRules::CURRENT);
        line.push('\n');
        writer.write_batch(line.as_bytes())?;
        Ok(Session::from_parts(
            id,
            None,
            None,
            LogRules::CURRENT,
            LogState::default(),
            Frames::new(),
            Some(writer),
        ))
    }

    /// The session whose log `sink` holds (`bytes`, read from it), appending to `sink` from
    /// there: as [`open`](Self::open) does for a file, the end is repaired first (a torn line
    /// or batch cut, an unterminated last line terminated) through the sink. One writer per
    /// sink is the caller's to ensure (a lease, a lock); a sink that reports its length also
    /// refuses a writer whose bytes someone else changed.
    ///
    /// ```
    /// use std::io;
    /// use std::sync::{Arc, Mutex};
    /// use mektpoy::session::FileOptions;
    /// use mektpoy::store::JsonlSink;
    /// use mektpoy::{Event, Message, Session};
    /// #[derive(Clone, Default)]
    /// struct Memory(Arc<Mutex<Vec<u8>>>);
    /// impl JsonlSink for Memory {
    ///     fn append(&mut self, b: &[u8]) -> io::Result<()> { Ok(self.0.lock().unwrap().extend_from_slice(b)) }
    ///     fn truncate(&mut self, len: u64) -> io::Result<()> { Ok(self.0.lock().unwrap().truncate(len as usize)) }
    ///     fn sync(&mut self) -> io::Result<()> { Ok(()) }
    /// }
    /// // A log another process wrote, now held in a store.
    /// let log = Session::new("s").to_jsonl().into_bytes();
    /// let store = Memory(Arc::new(Mutex::new(log.clone())));
    /// let session = FileOptions::new().open_in(&log, store.clone())?.session;
    /// session.append(Event::append(Message::user("u1", "hi")))?;
    /// assert_eq!(*store.0.lock().unwrap(), session.to_jsonl().into_bytes());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// As [`load_bytes`](Self::load_bytes), plus [`LoadError::Repair`] when the repair fails.
    pub fn open_in(
        &self,
        bytes: &[u8],
        mut sink: impl JsonlSink + 'static,
    ) -> Result<Loaded, LoadError> {
        let parsed = parse(bytes, self.limits, self.unmarked_rules_or_default())?;
        let tail = parsed.tail;
        let repair = |source| LoadError::Repair { source };
        let mut len = bytes.len() as u64;
        if let Some(torn) = &tail.torn_tail {
            sink.truncate(torn.offset).map_err(repair)?;
            len = torn.offset;
        }
        if tail.unterminated {
            sink.append(b"\n").map_err(repair)?;
            len += 1;
        }
        let mut writer = JsonlWriter::new(Box::new(sink), len);
        writer.set_sync(self.sync);
        Ok(Loaded {
            session: parsed.into_session(Some(writer)),
            torn_tail: tail.torn_tail,
            unterminated: tail.unterminated,
        })
    }
}

/// A parsed file, before it becomes a session.
struct Parsed {
    head: SessionLine,
    /// Line 1's exact bytes.
    head_line: Arc<str>,
    state: LogState,
    frames: Frames,
    tail: Tail,
}

impl Parsed {
    /// The session, persisting through `writer` when there is one. A writer's file was
    /// repaired first, so its log then ends in `\n` whatever the file did.
    fn into_session(self, writer: Option<JsonlWriter>) -> Session {
        let Parsed {
            head,
            head_line,
            mut state,
            frames,
            tail,
        } = self;
        state.unterminated_tail = tail.unterminated && writer.is_none();
        Session::from_parts(
            head.id,
            head.parent,
            Some(head_line),
            head.rules,
            state,
            frames,
            writer,
        )
    }
}

/// Parses a whole file's bytes: `store` frames them, this decodes and validates each event
/// line on the log it joins (a batch's own working copy until the batch is whole).
fn parse(bytes: &[u8], limits: Limits, unmarked: LogRules) -> Result<Parsed, LoadError> {
    let (first, mut lines) = Lines::new(bytes, limits)?;
    let head = match first
        .text
        .map_err(|_| bad(SessionLineFault::NotUtf8))
        .and_then(|text| session_line(text, unmarked))
    {
        Ok(head) => head,
        // A whole session line of another version or rules is not torn, even without its
        // `\n`.
        Err(e @ (LoadError::UnsupportedVersion { .. } | LoadError::UnsupportedRules { .. })) => {
            return Err(e);
        }
        // An unterminated only line that does not parse is a torn session line.
        Err(_) if !first.terminated => return Err(LoadError::NoSessionLine),
        Err(e) => return Err(e),
    };
    let head_line = Arc::from(first.text.unwrap_or_default());
    let mut state = LogState::default();
    // The log with the open batch's events read so far.
    let mut pending: Option<LogState> = None;
    let mut frames = Frames::new();
    while let Some(item) = lines.next() {
        let line = match item? {
            Item::Begin => {
                pending = Some(state.clone());
                continue;
            }
            Item::End(frame) => {
                if let Some(whole) = pending.take() {
                    frames.insert(state.len(), frame);
                    state = whole;
                }
                continue;
            }
            Item::Event(line) => line,
        };
        let target = pending.as_mut().unwrap_or(&mut state);
        let seq = target.next_seq();
        debug_assert_eq!(seq.index(), line.index);
        let text = match line.text {
            Ok(text) => text,
            Err(_) if lines.tear() => break,
            Err(_) => {
                return Err(LoadError::NotUtf8 {
                    line: line.line,
                    seq,
                });
            }
        };
        let reject = |source| LoadError::Event {
            line: line.line,
            source,
        };
        let decoded = Event::from_json(text)
            .map_err(|source| reject(AppendError::new(seq, AppendErrorKind::Decode { source })));
        if let Ok(Event::Opaque(o)) = &decoded
            && o.event_type() == "session"
        {
            // A whole session line is not a cut one, even without its `\n`.
            return Err(LoadError::SecondSessionLine { line: line.line });
        }
        let checked = decoded.and_then(|event| match target.check(&event, Rules::Load) {
            Ok(()) => Ok(event),
            Err(e) => Err(reject(e)),
        });
        match checked {
            Ok(event) => {
                // A line the encoder writes back byte for byte needs no copy of its own: saving
                // writes the same bytes from the event (decision 76). Compared while encoding,
                // with nothing allocated.
                let line = (!event.encodes_as(text)).then(|| Arc::from(text));
                target.apply(event, line);
            }
            Err(_) if lines.tear() => break,
            Err(e) => return Err(e),
        }
    }
    if let Some(p) = &head.parent
        && p.upto > state.len() as u64
    {
        return Err(LoadError::UptoBeyondFile {
            upto: p.upto,
            len: state.len(),
        });
    }
    Ok(Parsed {
        head,
        head_line,
        state,
        frames,
        tail: lines.finish(),
    })
}

/// The whole file's bytes for a session.
fn render(session: &Session) -> String {
    let head = match &session.session_line {
        Some(l) => Cow::Borrowed(&**l),
        None => Cow::Owned(render_session_line(
            session.id(),
            session.parent(),
            session.rules(),
        )),
    };
    let c = read(&session.log);
    let lines = c
        .state
        .events
        .iter()
        .zip(c.state.lines.iter())
        .map(|(e, line)| line_text(e, line));
    store::file_text(&head, &c.frames, lines, !c.state.unterminated_tail)
}

/// Sessions on disk: load, create, open, save.
///
/// ```
/// use mektpoy::{Event, Message, Session};
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("s.jsonl");
/// Session::create(&path, "s")?.append(Event::append(Message::user("u1", "hi")))?;
/// assert_eq!(Session::load(&path)?.session.to_jsonl(), std::fs::read_to_string(&path)?);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
impl Session {
    /// Loads a session file. Lines keep their bytes; a torn final line, or a final batch the
    /// file does not hold whole, is dropped and reported; a valid final line without `\n` is
    /// kept and reported as unterminated. No limits: see [`FileOptions`] for them. A session
    /// line without `rules` is read under [`LogRules::V3`] (see
    /// [`FileOptions::unmarked_rules`]).
    ///
    /// Each event is validated as [`append`](Self::append) validates it, except for the surface
    /// rules `append` alone applies ([reference §1](crate::manual::reference#1-vocabulary-and-json)
    /// items 16 to 19): a file written before them, holding an empty assistant message or a tool
    /// result without its call, still loads, and the serializers refuse its requests with their own
    /// typed errors.
    ///
    /// ```
    /// use mektpoy::{Event, Message, Session};
    /// let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("s.jsonl");
    /// Session::create(&path, "s")?.append(Event::append(Message::user("u1", "hi")))?;
    /// let loaded = Session::load(&path)?;
    /// assert_eq!(loaded.session.messages().len(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`LoadError::NoSessionLine`] for an empty file or one whose only line is torn;
    /// [`LoadError::EmptyLine`]; [`LoadError::UnsupportedVersion`];
    /// [`LoadError::UnsupportedRules`]; [`LoadError::SecondSessionLine`]; [`LoadError::BadFrame`];
    /// [`LoadError::UptoBeyondFile`]; [`LoadError::Event`] naming the 1-based line and the
    /// `Seq` of a `\n`-terminated line that does not parse or validate; [`LoadError::Io`].
    pub fn load(path: impl AsRef<Path>) -> Result<Loaded, LoadError> {
        FileOptions::new().load(path)
    }

    /// Parses a session file's bytes, as [`load`](Self::load) does.
    ///
    /// ```
    /// use mektpoy::Session;
    /// let loaded = Session::load_bytes(b"{\"type\":\"session\",\"version\":0,\"id\":\"s\",\"rules\":4}\n")?;
    /// assert_eq!((loaded.session.id(), loaded.session.len()), ("s", 0));
    /// # Ok::<(), mektpoy::session::LoadError>(())
    /// ```
    ///
    /// # Errors
    /// As `load`, without `Io`.
    pub fn load_bytes(bytes: &[u8]) -> Result<Loaded, LoadError> {
        FileOptions::new().load_bytes(bytes)
    }

    /// Creates `path` (which must not exist), locks it (as [`open`](Self::open) does), writes
    /// the session line with one write and returns a persisting session.
    /// [`FileOptions::create`] takes options.
    ///
    /// ```
    /// use mektpoy::{Event, Message, Session};
    /// let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("s.jsonl");
    /// let session = Session::create(&path, "s")?;
    /// session.append(Event::append(Message::user("u1", "hi")))?; // on disk before `append` returns
    /// assert_eq!(Session::load(&path)?.session.len(), 1);
    /// // The file exists now: `create` does not overwrite it.
    /// assert!(Session::create(&path, "s").is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`PersistError::Io`] when the file exists or cannot be created;
    /// [`PersistError::Locked`] when another process locked it in the instant after it was
    /// created.
    pub fn create(path: impl AsRef<Path>, id: impl Into<String>) -> Result<Session, PersistError> {
        FileOptions::new().create(path, id)
    }

    /// Locks `path` for writing, loads it, repairs its end (terminates a valid unterminated
    /// last line, truncates a torn line or batch to where it starts) and returns a persisting
    /// session. The lock (an advisory `flock`-style lock on the open file) lasts as long as
    /// the session: a second `open` of the file, from this process or another, is refused.
    /// [`FileOptions::open`] takes options.
    ///
    /// ```
    /// use mektpoy::{Event, Message, Session};
    /// let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("s.jsonl");
    /// Session::create(&path, "s")?.append(Event::append(Message::user("u1", "hi")))?;
    /// // A restarted process goes on appending to the same file.
    /// let session = Session::open(&path)?.session;
    /// session.append(Event::append(Message::user("u2", "again")))?;
    /// drop(session);
    /// assert_eq!(Session::load(&path)?.session.len(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`LoadError::Locked`] when another session holds the file; as [`load`](Self::load),
    /// plus [`LoadError::Io`] when the repair fails.
    pub fn open(path: impl AsRef<Path>) -> Result<Loaded, LoadError> {
        FileOptions::new().open(path)
    }

    /// Writes the whole log to a temporary file beside `path` and renames it over `path`.
    /// Loaded lines are written back verbatim. **Saving a persisting session to its own file
    /// does nothing**: every committed batch is already there.
    ///
    /// ```
    /// use mektpoy::{Event, Message, Session};
    /// let dir = tempfile::tempdir()?;
    /// let session = Session::new("s");
    /// session.append(Event::append(Message::user("u1", "hi")))?;
    /// session.save(dir.path().join("s.jsonl"))?;
    /// assert_eq!(std::fs::read_to_string(dir.path().join("s.jsonl"))?, session.to_jsonl());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`PersistError::Locked`] when `path` is the file of another persisting session;
    /// [`PersistError::Io`] when writing or renaming fails (`path` is then untouched).
    pub fn save(&self, path: impl AsRef<Path>) -> Result<(), PersistError> {
        let own = read(&self.log)
            .writer
            .as_ref()
            .and_then(|w| w.path().map(Path::to_path_buf));
        store::replace(path.as_ref(), own.as_deref(), || render(self))
    }

    /// The bytes [`save`](Self::save) would write.
    ///
    /// ```
    /// use mektpoy::{Event, Message, Session};
    /// let session = Session::new("s");
    /// session.append(Event::append(Message::user("u1", "hi")))?;
    /// let text = session.to_jsonl();
    /// assert!(text.starts_with(r#"{"type":"session","version":0,"id":"s""#));
    /// assert_eq!(text.lines().count(), 2);
    /// assert_eq!(Session::load_bytes(text.as_bytes())?.session.messages(), session.messages());
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
    pub fn to_jsonl(&self) -> String {
        render(self)
    }
}

fn io_load(path: &Path) -> impl FnOnce(io::Error) -> LoadError + '_ {
    move |source| LoadError::Io {
        path: path.to_owned(),
        source,
    }
}

fn bad(reason: SessionLineFault) -> LoadError {
    LoadError::BadSessionLine { reason }
}

/// What line 1 says.
struct SessionLine {
    id: String,
    parent: Option<ParentRef>,
    rules: LogRules,
}

/// Line 1 parsed; `unmarked`: the rules of a line without `rules`.
fn session_line(text: &str, unmarked: LogRules) -> Result<SessionLine, LoadError> {
    let v: Value = serde_json::from_str(text)
        .map_err(|e| bad(SessionLineFault::Malformed(JsonFault::from(&e))))?;
    if v.get("type").and_then(Value::as_str) != Some("session") {
        return Err(bad(SessionLineFault::Type));
    }
    match v.get("version") {
        Some(n) if n.as_u64() == Some(VERSION) => {}
        Some(found) => {
            return Err(LoadError::UnsupportedVersion {
                found: found.clone(),
            });
        }
        None => return Err(bad(SessionLineFault::NoVersion)),
    }
    let id = v
        .get("id")
        .and_then(Value::as_str)
        .ok_or_else(|| bad(SessionLineFault::Id))?
        .to_owned();
    let parent = match v.get("parent") {
        None => None,
        Some(p) => Some(ParentRef {
            id: p
                .get("id")
                .and_then(Value::as_str)
                .ok_or_else(|| bad(SessionLineFault::ParentId))?
                .to_owned(),
            upto: p
                .get("upto")
                .and_then(Value::as_u64)
                .ok_or_else(|| bad(SessionLineFault::ParentUpto))?,
        }),
    };
    let rules = match v.get("rules") {
        None => unmarked,
        Some(found) => found
            .as_u64()
            .and_then(LogRules::from_number)
            .ok_or_else(|| LoadError::UnsupportedRules {
                line: 1,
                found: found.clone(),
            })?,
    };
    Ok(SessionLine { id, parent, rules })
}

/// The session line of a session created in this process.
fn render_session_line(id: &str, parent: Option<&ParentRef>, rules: LogRules) -> String {
    struct Line<'a>(&'a str, Option<&'a ParentRef>, LogRules);
    impl Serialize for Line<'_> {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            let mut m = s.serialize_map(None)?;
            m.serialize_entry("type", "session")?;
            m.serialize_entry("version", &VERSION)?;
            m.serialize_entry("id", self.0)?;
            m.serialize_entry("rules", &self.2.number())?;
            if let Some(p) = self.1 {
                m.serialize_entry("parent", &Parent(p))?;
            }
            m.end()
        }
    }
    struct Parent<'a>(&'a ParentRef);
    impl Serialize for Parent<'_> {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            let mut m = s.serialize_map(Some(2))?;
            m.serialize_entry("id", &self.0.id)?;
            m.serialize_entry("upto", &self.0.upto)?;
            m.end()
        }
    }
    serde_json::to_string(&Line(id, parent, rules))
        .expect("a session line holds only strings and integers")
}
