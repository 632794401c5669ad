//! Reading and writing session files.
//!
//! A file is the session line, then one line per event. A batch of two or more events (one
//! `append` is one event; one `Recorder::record` call is one batch) is preceded by a **frame
//! line** `{"batch":N}` announcing the `N` event lines that follow. A frame line is not an
//! event and takes no `Seq`. A frame whose lines are not all in the file (a write cut short)
//! is dropped whole with them, as a torn tail is.

use std::fs::{self, File};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;
use serde::de::{Deserialize, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::ser::{SerializeMap, Serializer};
use serde_json::Value;

use super::writer::JsonlWriter;
use crate::event::Event;
use crate::session::{AppendError, AppendErrorKind, LogState, ParentRef, Session};
use crate::vocab::Seq;

/// The file format version this crate reads and writes.
const VERSION: u64 = 0;

/// The key of a frame line, `{"batch":N}`.
const FRAME_KEY: &str = "batch";

/// A batch frame as the log keeps it: how many events it announces, and its exact bytes when
/// it was loaded.
#[derive(Clone, Debug)]
pub(crate) struct Frame {
    /// Number of event lines the frame announces (at least 2 when the crate writes it).
    pub events: usize,
    /// The loaded line's exact bytes, without `\n`; `None` for a frame made in this process.
    pub line: Option<Arc<str>>,
}

impl Frame {
    /// A frame for a batch of `events` events made in this process.
    pub(crate) fn new(events: usize) -> Self {
        Frame { events, line: None }
    }

    /// Appends the frame line (without `\n`) to `out`.
    pub(crate) fn render(&self, out: &mut String) {
        match &self.line {
            Some(l) => out.push_str(l),
            None => out.push_str(&frame_line(self.events)),
        }
    }
}

/// The frames of a log, by the index of the first event of their batch.
pub(crate) type Frames = imbl::OrdMap<usize, Frame>;

/// The frame line the crate writes before a batch of `events` event lines.
pub(crate) fn frame_line(events: usize) -> String {
    format!("{{\"{FRAME_KEY}\":{events}}}")
}

/// A dropped end of the file: its last line had no `\n` and did not parse or validate, or its
/// last batch is incomplete (a write cut short).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TornTail {
    /// Byte offset where the dropped bytes start (the file's length once they are dropped).
    pub offset: u64,
    /// Their length in bytes: from `offset` to the end of the file.
    pub len: u64,
    /// Set when what was dropped is a framed batch (or a frame line cut short), `None` when
    /// it is a single torn line.
    pub batch: Option<TornBatch>,
}

/// A framed batch dropped because the file does not hold all of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TornBatch {
    /// 1-based line number of its frame line.
    pub line: usize,
    /// The number of event lines the frame announces; `None` when the frame line itself was
    /// cut before its end.
    pub announced: Option<u64>,
    /// Whole event lines of the batch that were in the file and are dropped with it.
    pub dropped_events: usize,
}

/// A loaded session and what loading noticed without refusing the file.
#[derive(Debug)]
pub struct Loaded {
    /// The session.
    pub session: Session,
    /// The end of the file that was dropped, if it was torn.
    pub torn_tail: Option<TornTail>,
    /// Whether the final line had no `\n` but was valid and is kept.
    pub unterminated: bool,
}

/// What is wrong with a frame line (`{"batch":N}`) that is not cut short.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FrameFault {
    /// The line starts like a frame line but is not a JSON object.
    #[error("it is not a JSON object ({0})")]
    Malformed(String),
    /// `batch` is not an integer of at least 1.
    #[error("`batch` is not a positive integer")]
    Count,
    /// The object holds a key other than `batch`, or `batch` twice.
    #[error("a frame line holds exactly one key, `batch`")]
    Keys,
    /// The frame stands among the event lines another frame announced.
    #[error("it stands inside the batch framed on line {outer}")]
    Nested {
        /// 1-based line of the enclosing frame.
        outer: usize,
    },
}

/// Why a session file could not be loaded.
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
    /// The file is empty, or its only line is torn.
    #[error("the file has no session line")]
    NoSessionLine,
    /// The session line is not `{"type":"session","version":0,"id":...}`.
    #[error("line 1 is not a session line: {reason}")]
    BadSessionLine {
        /// What is wrong.
        reason: String,
    },
    /// The session line names another format version.
    #[error("unsupported session file version {found}")]
    UnsupportedVersion {
        /// The version found.
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

/// Why a session could not be created or saved.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PersistError {
    /// The file system refused.
    #[error("cannot write {path}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O fault.
        #[source]
        source: io::Error,
    },
    /// The session line could not be written as one batch.
    #[error("cannot write the session line of {path}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The write fault.
        #[source]
        source: super::WriteError,
    },
    /// The file is locked by a persisting session: `save` would rename a copy over the file
    /// that session appends to, and its later batches would go to the unlinked old file.
    #[error("{path} is open for writing by another session")]
    Locked {
        /// The file.
        path: PathBuf,
    },
}

/// How a session file is loaded, opened or created: load limits and `fsync`.
///
/// The defaults read every file the crate can write: no limit on line length or on the
/// number of events, no `fsync`. Limits are for files from elsewhere: a line is refused by its
/// length before it is parsed, so a hostile line costs its bytes, not the parser's tree.
///
/// ```
/// use mektpoy::{FileOptions, LoadError};
/// let file = b"{\"type\":\"session\",\"version\":0,\"id\":\"s\"}\n{\"type\":\"note/x\"}\n{\"type\":\"note/y\"}\n";
/// assert_eq!(FileOptions::new().load_bytes(file)?.session.len(), 2);
/// let err = FileOptions::new().max_events(1).load_bytes(file).unwrap_err();
/// assert!(matches!(err, LoadError::TooManyEvents { line: 3, max: 1 }));
/// let err = FileOptions::new().max_line_bytes(20).load_bytes(file).unwrap_err();
/// assert!(matches!(err, LoadError::LineTooLong { line: 1, .. }));
/// # Ok::<(), LoadError>(())
/// ```
#[derive(Clone, Debug, Default)]
pub struct FileOptions {
    max_line_bytes: Option<usize>,
    max_events: Option<usize>,
    sync: bool,
}

impl FileOptions {
    /// No limits, no `fsync`: what [`Session::load`], [`Session::open`] and
    /// [`Session::create`] use.
    pub fn new() -> Self {
        FileOptions::default()
    }

    /// Refuses a file with a line longer than `max` bytes (the `\n` not counted), session and
    /// frame lines included, with [`LoadError::LineTooLong`] naming the line. The limit holds
    /// for a torn last line or batch too: it is checked before a line is parsed.
    #[must_use]
    pub fn max_line_bytes(mut self, max: usize) -> Self {
        self.max_line_bytes = Some(max);
        self
    }

    /// Refuses a file holding more than `max` events (inherited ones included) with
    /// [`LoadError::TooManyEvents`] naming the line of the first event beyond it. The events
    /// of a torn tail are not counted: they are dropped.
    #[must_use]
    pub fn max_events(mut self, max: usize) -> Self {
        self.max_events = Some(max);
        self
    }

    /// Whether a session that [`open`](Self::open) or [`create`](Self::create) returns syncs
    /// each batch to disk (`fsync`), not only flushes it to the OS (as
    /// [`Session::set_sync`]). Off by default.
    #[must_use]
    pub fn sync(mut self, sync: bool) -> Self {
        self.sync = sync;
        self
    }

    /// [`Session::load`] with these options.
    ///
    /// # Errors
    /// As `load`, plus [`LoadError::LineTooLong`] and [`LoadError::TooManyEvents`].
    pub fn load(&self, path: impl AsRef<Path>) -> Result<Loaded, LoadError> {
        let path = path.as_ref();
        let bytes = fs::read(path).map_err(io_load(path))?;
        parse(&bytes, self)
    }

    /// [`Session::load_bytes`] with these options.
    ///
    /// # Errors
    /// As [`load`](Self::load), without `Io`.
    pub fn load_bytes(&self, bytes: &[u8]) -> Result<Loaded, LoadError> {
        parse(bytes, self)
    }

    /// [`Session::open`] with these options.
    ///
    /// # Errors
    /// As `open`, plus [`LoadError::LineTooLong`] and [`LoadError::TooManyEvents`].
    pub fn open(&self, path: impl AsRef<Path>) -> Result<Loaded, LoadError> {
        self.open_with(path, |file| Box::new(file))
    }

    /// [`Session::open_with`] with these options.
    ///
    /// # Errors
    /// As [`open`](Self::open).
    pub fn open_with(
        &self,
        path: impl AsRef<Path>,
        wrap: impl FnOnce(File) -> Box<dyn super::JsonlSink>,
    ) -> Result<Loaded, LoadError> {
        let path = path.as_ref();
        let mut file = fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(io_load(path))?;
        if !try_lock(&file, Lock::Exclusive).map_err(io_load(path))? {
            return Err(LoadError::Locked {
                path: path.to_owned(),
            });
        }
        // Read through the locked handle: what is parsed is what no other writer can change.
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(io_load(path))?;
        let loaded = parse(&bytes, self)?;
        let mut len = bytes.len() as u64;
        if let Some(torn) = loaded.torn_tail {
            file.set_len(torn.offset).map_err(io_load(path))?;
            len = torn.offset;
        }
        if loaded.unterminated {
            file.set_len(len).map_err(io_load(path))?;
            file.seek(SeekFrom::End(0)).map_err(io_load(path))?;
            file.write_all(b"\n").map_err(io_load(path))?;
            len += 1;
        }
        let mut writer = JsonlWriter::new(wrap(file), len).with_path(own_path(path));
        writer.set_sync(self.sync);
        let session = loaded.session;
        session.with_writer(|w| *w = Some(writer));
        session.mark_terminated();
        Ok(Loaded {
            session,
            torn_tail: loaded.torn_tail,
            unterminated: loaded.unterminated,
        })
    }

    /// [`Session::create`] with these options (only `sync` applies).
    ///
    /// # Errors
    /// As `create`.
    pub fn create(
        &self,
        path: impl AsRef<Path>,
        id: impl Into<String>,
    ) -> Result<Session, PersistError> {
        self.create_with(path, id, |file| Box::new(file))
    }

    /// [`Session::create_with`] with these options (only `sync` applies).
    ///
    /// # Errors
    /// As `create_with`.
    pub fn create_with(
        &self,
        path: impl AsRef<Path>,
        id: impl Into<String>,
        wrap: impl FnOnce(File) -> Box<dyn super::JsonlSink>,
    ) -> Result<Session, PersistError> {
        let path = path.as_ref();
        let id = id.into();
        let file = fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(path)
            .map_err(io_persist(path))?;
        match try_lock(&file, Lock::Exclusive) {
            Ok(true) => {}
            // Another process opened and locked the file in the instant since it was created.
            Ok(false) => {
                return Err(PersistError::Locked {
                    path: path.to_owned(),
                });
            }
            Err(e) => {
                drop(file);
                let _ = fs::remove_file(path);
                return Err(io_persist(path)(e));
            }
        }
        let mut writer = JsonlWriter::new(wrap(file), 0).with_path(own_path(path));
        writer.set_sync(self.sync);
        let mut line = render_session_line(&id, None);
        line.push('\n');
        if let Err(source) = writer.write_batch(line.as_bytes()) {
            // The file was created here and holds nothing: leaving it would make the next
            // `create` fail and `open` report `NoSessionLine`.
            drop(writer);
            let _ = fs::remove_file(path);
            return Err(PersistError::Write {
                path: path.to_owned(),
                source,
            });
        }
        Ok(Session::from_parts(
            id,
            None,
            None,
            LogState::default(),
            Frames::new(),
            Some(writer),
        ))
    }

    fn check_len(&self, line: usize, raw: &[u8]) -> Result<(), LoadError> {
        match self.max_line_bytes {
            Some(max) if raw.len() > max => Err(LoadError::LineTooLong {
                line,
                len: raw.len(),
                max,
            }),
            _ => Ok(()),
        }
    }
}

#[derive(Clone, Copy)]
enum Lock {
    Exclusive,
    Shared,
}

/// Takes an advisory lock on `file` without waiting: `Ok(false)` when another handle holds a
/// conflicting one. Where the platform or file system has no locks, goes on unlocked.
fn try_lock(file: &File, kind: Lock) -> io::Result<bool> {
    let result = match kind {
        Lock::Exclusive => file.try_lock(),
        Lock::Shared => file.try_lock_shared(),
    };
    match result {
        Ok(()) => Ok(true),
        Err(fs::TryLockError::WouldBlock) => Ok(false),
        Err(fs::TryLockError::Error(e)) if e.kind() == io::ErrorKind::Unsupported => Ok(true),
        Err(fs::TryLockError::Error(e)) => Err(e),
    }
}

fn io_load(path: &Path) -> impl FnOnce(io::Error) -> LoadError + '_ {
    move |source| LoadError::Io {
        path: path.to_owned(),
        source,
    }
}

fn io_persist(path: &Path) -> impl FnOnce(io::Error) -> PersistError + '_ {
    move |source| PersistError::Io {
        path: path.to_owned(),
        source,
    }
}

struct SessionLine {
    id: String,
    parent: Option<ParentRef>,
}

fn session_line(text: &str) -> Result<SessionLine, LoadError> {
    let bad = |reason: &str| LoadError::BadSessionLine {
        reason: reason.to_owned(),
    };
    let v: Value = serde_json::from_str(text).map_err(|e| bad(&e.to_string()))?;
    if v.get("type").and_then(Value::as_str) != Some("session") {
        return Err(bad("`type` is not \"session\""));
    }
    match v.get("version") {
        Some(n) if n.as_u64() == Some(VERSION) => {}
        Some(found) => {
            return Err(LoadError::UnsupportedVersion {
                found: found.clone(),
            });
        }
        None => return Err(bad("no `version`")),
    }
    let id = v
        .get("id")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("no string `id`"))?
        .to_owned();
    let parent = match v.get("parent") {
        None => None,
        Some(p) => Some(ParentRef {
            id: p
                .get("id")
                .and_then(Value::as_str)
                .ok_or_else(|| bad("`parent` has no string `id`"))?
                .to_owned(),
            upto: p
                .get("upto")
                .and_then(Value::as_u64)
                .ok_or_else(|| bad("`parent` has no integer `upto`"))?,
        }),
    };
    Ok(SessionLine { id, parent })
}

/// The session line of a session created in this process.
fn render_session_line(id: &str, parent: Option<&ParentRef>) -> String {
    struct Line<'a>(&'a str, Option<&'a ParentRef>);
    impl Serialize for Line<'_> {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            let mut m = s.serialize_map(None)?;
            m.serialize_entry("type", "session")?;
            m.serialize_entry("version", &VERSION)?;
            m.serialize_entry("id", self.0)?;
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
    serde_json::to_string(&Line(id, parent))
        .expect("a session line holds only strings and integers")
}

/// The canonical form of a session file's path (the path itself if that fails).
fn own_path(path: &Path) -> PathBuf {
    fs::canonicalize(path).unwrap_or_else(|_| path.to_owned())
}

/// What a line that starts like a frame line turned out to be.
enum Probe {
    /// An object with a `type`: an event line whose first key happens to be `batch`.
    Event,
    /// A frame line, and its count or what is wrong with it.
    Frame(Result<u64, FrameFault>),
}

impl<'de> Deserialize<'de> for Probe {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Probe;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Probe, A::Error> {
                let (mut has_type, mut count, mut keys_ok) = (false, None::<Value>, true);
                while let Some(key) = map.next_key::<String>()? {
                    match key.as_str() {
                        "type" => {
                            has_type = true;
                            map.next_value::<IgnoredAny>()?;
                        }
                        FRAME_KEY if count.is_none() => count = Some(map.next_value()?),
                        _ => {
                            keys_ok = false;
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(if has_type {
                    Probe::Event
                } else if !keys_ok {
                    Probe::Frame(Err(FrameFault::Keys))
                } else {
                    match count.as_ref().and_then(Value::as_u64) {
                        Some(n) if n >= 1 => Probe::Frame(Ok(n)),
                        _ => Probe::Frame(Err(FrameFault::Count)),
                    }
                })
            }
        }
        d.deserialize_map(V)
    }
}

const JSON_WS: [char; 4] = [' ', '\t', '\n', '\r'];

/// What follows `{` when `text` starts like an object, else `None`.
fn after_brace(text: &str) -> Option<&str> {
    text.trim_start_matches(JSON_WS)
        .strip_prefix('{')
        .map(|t| t.trim_start_matches(JSON_WS))
}

/// Whether `text` starts like a frame line: an object whose first key is `batch`.
fn looks_like_frame(text: &str) -> bool {
    after_brace(text).is_some_and(|t| t.starts_with("\"batch\""))
}

/// Whether a line cut short (`text`, no `\n`) was a frame line: it starts like one, or is cut
/// inside the key itself (`{"bat`).
fn cut_frame(text: &str) -> bool {
    after_brace(text).is_some_and(|t| t.len() >= 2 && "\"batch\"".starts_with(t))
        || looks_like_frame(text)
}

/// A batch whose frame line was read and whose event lines are still being read.
struct OpenBatch {
    /// 1-based line of the frame.
    line: usize,
    /// Byte offset of the frame line.
    offset: usize,
    announced: u64,
    frame: Arc<str>,
    /// The log with the batch's events read so far.
    pending: LogState,
    present: usize,
    /// The first line of the batch beyond `max_events`.
    over_limit: Option<usize>,
}

/// Parses a whole file's bytes.
fn parse(bytes: &[u8], opts: &FileOptions) -> Result<Loaded, LoadError> {
    // Segments between `\n`s; the last is unterminated when the file does not end in `\n`.
    let mut segments: Vec<(usize, &[u8], bool)> = Vec::new();
    let mut start = 0;
    for (i, b) in bytes.iter().enumerate() {
        if *b == b'\n' {
            segments.push((start, &bytes[start..i], true));
            start = i + 1;
        }
    }
    if start < bytes.len() {
        segments.push((start, &bytes[start..], false));
    }
    let Some(&(_, first, first_terminated)) = segments.first() else {
        return Err(LoadError::NoSessionLine);
    };
    opts.check_len(1, first)?;
    if first.is_empty() {
        return Err(LoadError::EmptyLine { line: 1 });
    }
    let first_text = std::str::from_utf8(first).map_err(|_| LoadError::BadSessionLine {
        reason: "not UTF-8".to_owned(),
    });
    let head = match first_text.map(session_line) {
        Ok(Ok(head)) => head,
        // A whole session line of another version is not torn, even without its `\n`.
        Ok(Err(e @ LoadError::UnsupportedVersion { .. })) => return Err(e),
        // An unterminated only line that does not parse is a torn session line.
        _ if !first_terminated => return Err(LoadError::NoSessionLine),
        Ok(Err(e)) => return Err(e),
        Err(e) => return Err(e),
    };
    let mut state = LogState::default();
    let mut frames = Frames::new();
    let mut open: Option<OpenBatch> = None;
    let mut torn_tail = None;
    let mut unterminated = !first_terminated;
    // Only the last segment can be unterminated; a fault there is a write cut short.
    let torn_at = |open: &Option<OpenBatch>, offset: usize, frame_cut: Option<usize>| match open {
        Some(b) => TornTail {
            offset: b.offset as u64,
            len: (bytes.len() - b.offset) as u64,
            batch: Some(TornBatch {
                line: b.line,
                announced: Some(b.announced),
                dropped_events: b.present,
            }),
        },
        None => TornTail {
            offset: offset as u64,
            len: (bytes.len() - offset) as u64,
            batch: frame_cut.map(|line| TornBatch {
                line,
                announced: None,
                dropped_events: 0,
            }),
        },
    };
    for (k, &(offset, raw, terminated)) in segments.iter().enumerate().skip(1) {
        let line = k + 1;
        opts.check_len(line, raw)?;
        if raw.is_empty() {
            return Err(LoadError::EmptyLine { line });
        }
        let target = open.as_ref().map_or(&state, |b| &b.pending);
        let seq = target.next_seq();
        let text = match std::str::from_utf8(raw) {
            Ok(text) => text,
            Err(_) if !terminated => {
                torn_tail = Some(torn_at(&open, offset, None));
                break;
            }
            Err(_) => return Err(LoadError::NotUtf8 { line, seq }),
        };
        if looks_like_frame(text) || (!terminated && cut_frame(text)) {
            let probe = serde_json::from_str::<Probe>(text)
                .unwrap_or_else(|e| Probe::Frame(Err(FrameFault::Malformed(e.to_string()))));
            match probe {
                Probe::Event => {}
                Probe::Frame(Ok(_)) | Probe::Frame(Err(_)) if !terminated && open.is_some() => {
                    torn_tail = Some(torn_at(&open, offset, None));
                    break;
                }
                Probe::Frame(Ok(announced)) => {
                    if let Some(outer) = &open {
                        return Err(LoadError::BadFrame {
                            line,
                            fault: FrameFault::Nested { outer: outer.line },
                        });
                    }
                    open = Some(OpenBatch {
                        line,
                        offset,
                        announced,
                        frame: Arc::from(text),
                        pending: state.clone(),
                        present: 0,
                        over_limit: None,
                    });
                    continue;
                }
                Probe::Frame(Err(_)) if !terminated => {
                    torn_tail = Some(torn_at(&open, offset, Some(line)));
                    break;
                }
                Probe::Frame(Err(fault)) => return Err(LoadError::BadFrame { line, fault }),
            }
        }
        let reject = |source| LoadError::Event { line, source };
        let decoded = Event::from_json(text)
            .map_err(|source| reject(AppendError::new(seq, AppendErrorKind::Decode { source })));
        if let Ok(Event::Opaque(o)) = &decoded
            && o.event_type() == "session"
        {
            // A whole session line is not a cut one, even without its `\n`.
            return Err(LoadError::SecondSessionLine { line });
        }
        let checked = decoded.and_then(|event| match target.check(&event) {
            Ok(()) => Ok(event),
            Err(e) => Err(reject(e)),
        });
        let event = match checked {
            Ok(event) => event,
            Err(_) if !terminated => {
                torn_tail = Some(torn_at(&open, offset, None));
                break;
            }
            Err(e) => return Err(e),
        };
        let beyond = opts.max_events.filter(|max| seq.index() >= *max);
        match open.as_mut() {
            None => {
                if let Some(max) = beyond {
                    return Err(LoadError::TooManyEvents { line, max });
                }
                state.apply(event, Some(Arc::from(text)));
                unterminated = !terminated;
            }
            Some(b) => {
                b.pending.apply(event, Some(Arc::from(text)));
                b.present += 1;
                if beyond.is_some() {
                    b.over_limit.get_or_insert(line);
                }
                if b.present as u64 == b.announced
                    && let Some(b) = open.take()
                {
                    if let (Some(line), Some(max)) = (b.over_limit, opts.max_events) {
                        return Err(LoadError::TooManyEvents { line, max });
                    }
                    frames.insert(
                        state.len(),
                        Frame {
                            events: b.present,
                            line: Some(b.frame),
                        },
                    );
                    state = b.pending;
                    unterminated = !terminated;
                }
            }
        }
    }
    if torn_tail.is_none() && open.is_some() {
        // The frame announces more lines than the file holds.
        torn_tail = Some(torn_at(&open, 0, None));
    }
    if let Some(p) = &head.parent
        && p.upto > state.len() as u64
    {
        return Err(LoadError::UptoBeyondFile {
            upto: p.upto,
            len: state.len(),
        });
    }
    state.unterminated_tail = unterminated;
    let session = Session::from_parts(
        head.id,
        head.parent,
        Some(Arc::from(std::str::from_utf8(first).unwrap_or_default())),
        state,
        frames,
        None,
    );
    Ok(Loaded {
        session,
        torn_tail,
        unterminated,
    })
}

/// The whole file's bytes for a session.
fn render(session: &Session) -> String {
    let mut out = match session.session_line() {
        Some(l) => l.to_string(),
        None => render_session_line(session.id(), session.parent()),
    };
    session.with_committed(|c| {
        let mut frames = c.frames.iter().peekable();
        for (i, (e, line)) in c.state.events.iter().zip(c.state.lines.iter()).enumerate() {
            if let Some((_, frame)) = frames.next_if(|(start, _)| **start == i) {
                out.push('\n');
                frame.render(&mut out);
            }
            out.push('\n');
            match line {
                Some(l) => out.push_str(l),
                None => out.push_str(&e.to_json()),
            }
        }
        if !c.state.unterminated_tail {
            out.push('\n');
        }
    });
    out
}

impl Session {
    /// Loads a session file (SPEC §2). Lines keep their bytes; a torn final line, or a final
    /// batch the file does not hold whole, is dropped and reported; a valid final line without
    /// `\n` is kept and reported as unterminated. No limits: see [`FileOptions`] for them.
    ///
    /// # Errors
    /// [`LoadError::NoSessionLine`] for an empty file or one whose only line is torn;
    /// [`LoadError::EmptyLine`]; [`LoadError::UnsupportedVersion`];
    /// [`LoadError::SecondSessionLine`]; [`LoadError::BadFrame`];
    /// [`LoadError::UptoBeyondFile`]; [`LoadError::Event`] naming the 1-based line and the
    /// `Seq` of a `\n`-terminated line that does not parse or validate; [`LoadError::Io`].
    pub fn load(path: impl AsRef<Path>) -> Result<Loaded, LoadError> {
        FileOptions::new().load(path)
    }

    /// Parses a session file's bytes, as [`load`](Self::load) does.
    ///
    /// # Errors
    /// As `load`, without `Io`.
    pub fn load_bytes(bytes: &[u8]) -> Result<Loaded, LoadError> {
        FileOptions::new().load_bytes(bytes)
    }

    /// Creates `path` (which must not exist), locks it (as [`open`](Self::open) does), writes
    /// the session line with one write and returns a persisting session.
    ///
    /// # Errors
    /// [`PersistError::Io`] when the file exists or cannot be created;
    /// [`PersistError::Locked`] when another process locked it in the instant after it was
    /// created.
    pub fn create(path: impl AsRef<Path>, id: impl Into<String>) -> Result<Session, PersistError> {
        FileOptions::new().create(path, id)
    }

    /// [`create`](Self::create) with the file wrapped in a sink of the caller's (tests inject
    /// failing writers this way). When the session line cannot be written, the new file is
    /// removed again.
    ///
    /// # Errors
    /// As `create`, plus [`PersistError::Write`] when the session line is not written.
    pub fn create_with(
        path: impl AsRef<Path>,
        id: impl Into<String>,
        wrap: impl FnOnce(File) -> Box<dyn super::JsonlSink>,
    ) -> Result<Session, PersistError> {
        FileOptions::new().create_with(path, id, wrap)
    }

    /// Locks `path` for writing, loads it, repairs its end (terminates a valid unterminated
    /// last line, truncates a torn line or batch to where it starts) and returns a persisting
    /// session. The lock (an advisory `flock`-style lock on the open file) lasts as long as
    /// the session: a second `open` of the file, from this process or another, is refused.
    ///
    /// # Errors
    /// [`LoadError::Locked`] when another session holds the file; as [`load`](Self::load),
    /// plus [`LoadError::Io`] when the repair fails.
    pub fn open(path: impl AsRef<Path>) -> Result<Loaded, LoadError> {
        FileOptions::new().open(path)
    }

    /// [`open`](Self::open) with the file wrapped in a sink of the caller's (tests inject
    /// failing writers this way). The sink must keep the `File`: the lock lives in it.
    ///
    /// # Errors
    /// As `open`.
    pub fn open_with(
        path: impl AsRef<Path>,
        wrap: impl FnOnce(File) -> Box<dyn super::JsonlSink>,
    ) -> Result<Loaded, LoadError> {
        FileOptions::new().open_with(path, wrap)
    }

    /// Writes the whole log to a temporary file beside `path` and renames it over `path`.
    /// Loaded lines are written back verbatim. **Saving a persisting session to its own file
    /// does nothing**: every committed batch is already there.
    ///
    /// # Errors
    /// [`PersistError::Locked`] when `path` is the file of another persisting session;
    /// [`PersistError::Io`] when writing or renaming fails (`path` is then untouched).
    pub fn save(&self, path: impl AsRef<Path>) -> Result<(), PersistError> {
        let path = path.as_ref();
        // A persisting session's own file already holds every committed batch; renaming a
        // copy over it would leave the writer appending to the unlinked old file.
        let own = self.with_committed(|c| {
            c.writer
                .as_ref()
                .and_then(|w| w.path().map(Path::to_path_buf))
        });
        if own.is_some_and(|own| fs::canonicalize(path).is_ok_and(|p| p == own)) {
            return Ok(());
        }
        // The same holds for another session's file. A shared lock conflicts only with a
        // writer's exclusive one, so two saves to one path do not refuse each other.
        if let Ok(existing) = File::open(path)
            && !try_lock(&existing, Lock::Shared).map_err(io_persist(path))?
        {
            return Err(PersistError::Locked {
                path: path.to_owned(),
            });
        }
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        // Unique per process and call, and created exclusively: two saves to one path never
        // share a temporary file.
        static NEXT_TMP: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT_TMP.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tmp = path.with_file_name(format!(".{name}.{}.{n}.tmp", std::process::id()));
        let result = (|| {
            let mut f = fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&tmp)?;
            f.write_all(render(self).as_bytes())?;
            f.sync_all()?;
            fs::rename(&tmp, path)
        })();
        if result.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        result.map_err(io_persist(path))
    }

    /// The bytes [`save`](Self::save) would write.
    pub fn to_jsonl(&self) -> String {
        render(self)
    }
}
