//! Reading and writing session files.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};
use serde_json::Value;

use super::writer::JsonlWriter;
use crate::event::Event;
use crate::session::{AppendError, LogState, ParentRef, Session};
use crate::vocab::Seq;

/// The file format version this crate reads and writes.
const VERSION: u64 = 0;

/// A dropped final line: it had no `\n` and did not parse or validate (a write cut short).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TornTail {
    /// Byte offset where the torn line starts (the file's length once it is dropped).
    pub offset: u64,
    /// Its length in bytes.
    pub len: u64,
}

/// A loaded session and what loading noticed without refusing the file.
#[derive(Debug)]
pub struct Loaded {
    /// The session.
    pub session: Session,
    /// The final line that was dropped, if it was torn.
    pub torn_tail: Option<TornTail>,
    /// Whether the final line had no `\n` but was valid and is kept.
    pub unterminated: bool,
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
    serde_json::to_string(&Line(id, parent)).unwrap_or_default()
}

/// The canonical form of a session file's path (the path itself if that fails).
fn own_path(path: &Path) -> PathBuf {
    fs::canonicalize(path).unwrap_or_else(|_| path.to_owned())
}

/// Parses a whole file's bytes.
fn parse(bytes: &[u8]) -> Result<Loaded, LoadError> {
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
    let mut torn_tail = None;
    let mut unterminated = !first_terminated;
    for (k, &(offset, raw, terminated)) in segments.iter().enumerate().skip(1) {
        let line = k + 1;
        let seq = state.next_seq();
        let decoded = (|| {
            if raw.is_empty() {
                return Err(LoadError::EmptyLine { line });
            }
            let text = std::str::from_utf8(raw).map_err(|_| LoadError::NotUtf8 { line, seq })?;
            let reject = |source| LoadError::Event { line, source };
            let event = Event::from_json(text)
                .map_err(|source| reject(AppendError::Decode { seq, source }))?;
            state.check(&event).map_err(reject)?;
            Ok((event, text))
        })();
        match decoded {
            Ok((event, text)) => {
                state.apply(event, Some(Arc::from(text)));
                unterminated = !terminated;
            }
            Err(_) if !terminated => {
                torn_tail = Some(TornTail {
                    offset: offset as u64,
                    len: raw.len() as u64,
                });
            }
            Err(e) => return Err(e),
        }
    }
    state.unterminated_tail = unterminated;
    let session = Session::from_parts(
        head.id,
        head.parent,
        Some(Arc::from(std::str::from_utf8(first).unwrap_or_default())),
        state,
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
        for (e, line) in c.state.events.iter().zip(c.state.lines.iter()) {
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
    /// Loads a session file (SPEC §2). Lines keep their bytes; a torn final line is dropped
    /// and reported; a valid final line without `\n` is kept and reported as unterminated.
    ///
    /// # Errors
    /// [`LoadError::NoSessionLine`] for an empty file or one whose only line is torn;
    /// [`LoadError::EmptyLine`]; [`LoadError::UnsupportedVersion`];
    /// [`LoadError::Event`] naming the 1-based line and the `Seq` of a `\n`-terminated line
    /// that does not parse or validate; [`LoadError::Io`].
    pub fn load(path: impl AsRef<Path>) -> Result<Loaded, LoadError> {
        let path = path.as_ref();
        let bytes = fs::read(path).map_err(io_load(path))?;
        parse(&bytes)
    }

    /// Parses a session file's bytes, as [`load`](Self::load) does.
    ///
    /// # Errors
    /// As `load`, without `Io`.
    pub fn load_bytes(bytes: &[u8]) -> Result<Loaded, LoadError> {
        parse(bytes)
    }

    /// Creates `path` (which must not exist), writes the session line with one write and
    /// returns a persisting session.
    ///
    /// # Errors
    /// [`PersistError::Io`] when the file exists or cannot be created.
    pub fn create(path: impl AsRef<Path>, id: impl Into<String>) -> Result<Session, PersistError> {
        Session::create_with(path, id, |file| Box::new(file))
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
        let path = path.as_ref();
        let id = id.into();
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(path)
            .map_err(io_persist(path))?;
        let mut writer = JsonlWriter::new(wrap(file), 0).with_path(own_path(path));
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
            Some(writer),
        ))
    }

    /// Loads `path`, repairs its end (terminates a valid unterminated last line, truncates a
    /// torn one to the last `\n`) and returns a persisting session.
    ///
    /// # Errors
    /// As [`load`](Self::load), plus [`LoadError::Io`] when the repair fails.
    pub fn open(path: impl AsRef<Path>) -> Result<Loaded, LoadError> {
        Session::open_with(path, |file| Box::new(file))
    }

    /// [`open`](Self::open) with the file wrapped in a sink of the caller's (tests inject
    /// failing writers this way).
    ///
    /// # Errors
    /// As `open`.
    pub fn open_with(
        path: impl AsRef<Path>,
        wrap: impl FnOnce(File) -> Box<dyn super::JsonlSink>,
    ) -> Result<Loaded, LoadError> {
        let path = path.as_ref();
        let bytes = fs::read(path).map_err(io_load(path))?;
        let loaded = parse(&bytes)?;
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(io_load(path))?;
        let mut len = bytes.len() as u64;
        if let Some(torn) = loaded.torn_tail {
            file.set_len(torn.offset).map_err(io_load(path))?;
            len = torn.offset;
        }
        if loaded.unterminated {
            file.set_len(len).map_err(io_load(path))?;
            std::io::Seek::seek(&mut file, std::io::SeekFrom::End(0)).map_err(io_load(path))?;
            file.write_all(b"\n").map_err(io_load(path))?;
            len += 1;
        }
        let writer = JsonlWriter::new(wrap(file), len).with_path(own_path(path));
        let session = loaded.session;
        session.with_writer(|w| *w = Some(writer));
        session.mark_terminated();
        Ok(Loaded {
            session,
            torn_tail: loaded.torn_tail,
            unterminated: loaded.unterminated,
        })
    }

    /// Writes the whole log to a temporary file beside `path` and renames it over `path`.
    /// Loaded lines are written back verbatim. **Saving a persisting session to its own file
    /// does nothing**: every committed batch is already there.
    ///
    /// # Errors
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
            let mut f = OpenOptions::new().write(true).create_new(true).open(&tmp)?;
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
