//! The files behind logs: creating one for a single writer, opening one under its lock and
//! repairing its torn end, and replacing one whole. This is all the crate's file I/O.

use std::fs::{self, File};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::reader::Tail;
use super::writer::{JsonlSink, JsonlWriter, WriteError};

/// Wraps a log's `File` in the sink its writer appends through. The default sink is the file
/// itself; tests put one in between to fail on purpose.
pub(crate) type WrapSink = Arc<dyn Fn(File) -> Box<dyn JsonlSink> + Send + Sync>;

/// Why a log file could not be created or replaced.
///
/// ```
/// use mektpoy::store::PersistError;
/// use mektpoy::Session;
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("s.jsonl");
/// let _writer = Session::create(&path, "s")?;
/// // Saving over a file another session appends to is refused.
/// assert!(matches!(Session::new("t").save(&path), Err(PersistError::Locked { .. })));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
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
        source: WriteError,
    },
    /// The file is locked by a persisting session: `save` would rename a copy over the file
    /// that session appends to, and its later batches would go to the unlinked old file.
    #[error("{path} is open for writing by another session")]
    Locked {
        /// The file.
        path: PathBuf,
    },
}

/// Why a log file could not be opened for writing.
#[derive(Debug)]
pub(crate) enum OpenError {
    /// Opening or reading it failed.
    Io(io::Error),
    /// Another writer holds its lock.
    Locked,
}

/// Reads a whole file: `load` reads through here so that all file I/O stays in `store`.
pub(crate) fn read_file(path: &Path) -> io::Result<Vec<u8>> {
    fs::read(path)
}

/// A log file opened for writing, under its exclusive lock, and the bytes it held then.
pub(crate) struct LockedFile {
    file: File,
    path: PathBuf,
    bytes: Vec<u8>,
}

impl LockedFile {
    /// Opens `path` read-write, takes its exclusive lock, then reads it through the locked
    /// handle: what the driver parses is what no other writer can change.
    ///
    /// # Errors
    /// [`OpenError::Locked`] when another writer holds the lock; [`OpenError::Io`].
    pub(crate) fn open(path: &Path) -> Result<Self, OpenError> {
        let mut file = fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(OpenError::Io)?;
        if !try_lock(&file, Lock::Exclusive).map_err(OpenError::Io)? {
            return Err(OpenError::Locked);
        }
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(OpenError::Io)?;
        Ok(LockedFile {
            file,
            path: own_path(path),
            bytes,
        })
    }

    /// The bytes the file held when it was opened.
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Repairs the file's end as reading found it (cuts a torn tail off, terminates an
    /// unterminated last line), so that the next batch starts on a line of its own, and hands
    /// the file, lock and all, to a writer.
    ///
    /// # Errors
    /// Any I/O error of the repair.
    pub(crate) fn into_writer(
        self,
        tail: Tail,
        wrap: Option<&WrapSink>,
        sync: bool,
    ) -> io::Result<JsonlWriter> {
        let LockedFile {
            mut file,
            path,
            bytes,
        } = self;
        let mut len = bytes.len() as u64;
        if let Some(torn) = tail.torn_tail {
            file.set_len(torn.offset)?;
            len = torn.offset;
        }
        if tail.unterminated {
            file.set_len(len)?;
            file.seek(SeekFrom::End(0))?;
            file.write_all(b"\n")?;
            len += 1;
        }
        let mut writer = JsonlWriter::new(sink(file, wrap), len).with_path(path);
        writer.set_sync(sync);
        Ok(writer)
    }
}

/// Creates `path` (which must not exist), locks it as [`LockedFile::open`] does and writes
/// `head` as its first line, with one write. When the line cannot be written the new file is
/// removed again: left empty, it would make the next `create` fail and `open` find no head.
///
/// # Errors
/// [`PersistError::Io`] when the file exists or cannot be created; [`PersistError::Locked`]
/// when another process locked it in the instant after it was created;
/// [`PersistError::Write`] when the line is not written.
pub(crate) fn create(
    path: &Path,
    head: &str,
    wrap: Option<&WrapSink>,
    sync: bool,
) -> Result<JsonlWriter, PersistError> {
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
    let mut writer = JsonlWriter::new(sink(file, wrap), 0).with_path(own_path(path));
    writer.set_sync(sync);
    let mut line = head.to_owned();
    line.push('\n');
    if let Err(source) = writer.write_batch(line.as_bytes()) {
        drop(writer);
        let _ = fs::remove_file(path);
        return Err(PersistError::Write {
            path: path.to_owned(),
            source,
        });
    }
    Ok(writer)
}

/// Writes `text()` to a temporary file beside `path` and renames it over `path`, unless `path`
/// is `own` (the caller's writer's file, which already holds every committed batch: renaming
/// a copy over it would leave the writer appending to the unlinked old file).
///
/// # Errors
/// [`PersistError::Locked`] when `path` is another writer's file; [`PersistError::Io`] when
/// writing or renaming fails (`path` is then untouched).
pub(crate) fn replace(
    path: &Path,
    own: Option<&Path>,
    text: impl FnOnce() -> String,
) -> Result<(), PersistError> {
    if own.is_some_and(|own| fs::canonicalize(path).is_ok_and(|p| p == own)) {
        return Ok(());
    }
    // The same holds for another writer's file. A shared lock conflicts only with a writer's
    // exclusive one, so two saves to one path do not refuse each other.
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
    // Unique per process and call, and created exclusively: two saves to one path never share
    // a temporary file.
    static NEXT_TMP: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT_TMP.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = path.with_file_name(format!(".{name}.{}.{n}.tmp", std::process::id()));
    let result = (|| {
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        f.write_all(text().as_bytes())?;
        f.sync_all()?;
        fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result.map_err(io_persist(path))
}

fn sink(file: File, wrap: Option<&WrapSink>) -> Box<dyn JsonlSink> {
    match wrap {
        Some(wrap) => wrap(file),
        None => Box::new(file),
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

fn io_persist(path: &Path) -> impl FnOnce(io::Error) -> PersistError + '_ {
    move |source| PersistError::Io {
        path: path.to_owned(),
        source,
    }
}

/// The canonical form of a log file's path (the path itself if that fails).
fn own_path(path: &Path) -> PathBuf {
    fs::canonicalize(path).unwrap_or_else(|_| path.to_owned())
}
