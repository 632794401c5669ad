//! `JsonlWriter`: one write per batch, flushed before returning, rolled back on failure.
//!
//! The writer is the crate's own: sessions reach it through `FileOptions`, and a test that
//! wants a failing file passes a [`JsonlSink`] of its own there instead of building a writer.

use std::fs::File;
use std::io::{self, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use super::frame::{Frame, batch_text};

/// Where a persisting session's writer puts its bytes: the file, or a test double that fails
/// on purpose, handed in with [`FileOptions::sink`](crate::session::FileOptions::sink).
///
/// ```
/// use std::io;
/// use std::sync::{Arc, Mutex};
/// use mektpoy::{Event, Message, session::FileOptions, store::JsonlSink};
/// /// Batches kept in memory, as a database table would keep them.
/// #[derive(Clone, Default)]
/// struct Memory(Arc<Mutex<Vec<u8>>>);
/// impl JsonlSink for Memory {
///     fn append(&mut self, b: &[u8]) -> io::Result<()> { Ok(self.0.lock().unwrap().extend_from_slice(b)) }
///     fn truncate(&mut self, len: u64) -> io::Result<()> { Ok(self.0.lock().unwrap().truncate(len as usize)) }
///     fn sync(&mut self) -> io::Result<()> { Ok(()) }
/// }
/// let store = Memory::default();
/// let session = FileOptions::new().create_in(store.clone(), "s1")?;
/// session.append(Event::append(Message::user("u1", "hi")))?;
/// assert_eq!(*store.0.lock().unwrap(), session.to_jsonl().into_bytes());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait JsonlSink: Send + Sync {
    /// Appends `bytes` at the end with one `write_all` and flushes them to the OS.
    ///
    /// ```
    /// use mektpoy::store::JsonlSink;
    /// let mut file = tempfile::tempfile()?;
    /// JsonlSink::append(&mut file, b"{\"a\":1}\n")?;
    /// JsonlSink::append(&mut file, b"{\"b\":2}\n")?;
    /// assert_eq!(file.current_len()?, Some(16));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    ///
    /// # Errors
    /// Any I/O error; the sink may have written part of the bytes.
    fn append(&mut self, bytes: &[u8]) -> io::Result<()>;

    /// Cuts the sink back to `len` bytes.
    ///
    /// ```
    /// use mektpoy::store::JsonlSink;
    /// let mut file = tempfile::tempfile()?;
    /// JsonlSink::append(&mut file, b"kept\ntorn")?;
    /// JsonlSink::truncate(&mut file, 5)?; // back to the last whole batch
    /// assert_eq!(file.current_len()?, Some(5));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    ///
    /// # Errors
    /// Any I/O error.
    fn truncate(&mut self, len: u64) -> io::Result<()>;

    /// Asks the OS to put the bytes on disk.
    ///
    /// ```
    /// use mektpoy::store::JsonlSink;
    /// let mut file = tempfile::tempfile()?;
    /// JsonlSink::append(&mut file, b"line\n")?;
    /// JsonlSink::sync(&mut file)?;
    /// assert_eq!(file.current_len()?, Some(5));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    ///
    /// # Errors
    /// Any I/O error.
    fn sync(&mut self) -> io::Result<()>;

    /// The sink's current length, when it can tell (`None`, the default, skips the check).
    /// Before each batch the writer compares it with the length it wrote itself: a file that
    /// someone else changed is refused ([`WriteError::LengthChanged`]), not appended to.
    ///
    /// ```
    /// use mektpoy::store::JsonlSink;
    /// let mut file = tempfile::tempfile()?;
    /// assert_eq!(file.current_len()?, Some(0));
    /// JsonlSink::append(&mut file, b"line\n")?;
    /// assert_eq!(file.current_len()?, Some(5));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    ///
    /// # Errors
    /// Any I/O error.
    fn current_len(&mut self) -> io::Result<Option<u64>> {
        Ok(None)
    }
}

impl JsonlSink for File {
    fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.seek(SeekFrom::End(0))?;
        self.write_all(bytes)?;
        self.flush()
    }

    fn truncate(&mut self, len: u64) -> io::Result<()> {
        self.set_len(len)?;
        self.seek(SeekFrom::Start(len)).map(drop)
    }

    fn sync(&mut self) -> io::Result<()> {
        self.sync_data()
    }

    fn current_len(&mut self) -> io::Result<Option<u64>> {
        self.metadata().map(|m| Some(m.len()))
    }
}

/// Why a batch was not persisted. After any of these, the file holds exactly what it held
/// before the batch, except after [`WriteError::RollbackFailed`].
///
/// ```
/// use std::io;
/// use mektpoy::session::FileOptions;
/// use mektpoy::store::{JsonlSink, WriteError};
/// /// A store whose writes always fail but that cuts back fine.
/// struct Full;
/// impl JsonlSink for Full {
///     fn append(&mut self, _: &[u8]) -> io::Result<()> { Err(io::Error::other("full")) }
///     fn truncate(&mut self, _: u64) -> io::Result<()> { Ok(()) }
///     fn sync(&mut self) -> io::Result<()> { Ok(()) }
/// }
/// assert!(matches!(FileOptions::new().create_in(Full, "s"), Err(WriteError::Io(_))));
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WriteError {
    /// The write failed and the file was cut back to its previous length.
    #[error("writing the batch failed; the file was rolled back")]
    Io(#[source] io::Error),
    /// The write failed and so did cutting the file back: the file may end in a partial line,
    /// so this writer refuses every later batch.
    #[error("writing the batch failed and the rollback failed too; the writer is poisoned")]
    RollbackFailed(#[source] io::Error),
    /// An earlier rollback failed; nothing more is written.
    #[error("an earlier rollback failed; the writer accepts no more batches")]
    Poisoned,
    /// The sink no longer holds the bytes this writer wrote: someone else appended to the
    /// file or cut it. Nothing was written (appending would interleave two writers' lines, and
    /// a rollback would cut theirs); every later batch is refused the same way until the
    /// length is this writer's again. Reopen the file to go on from what it now holds.
    #[error(
        "the file is {found} bytes long, not the {expected} this writer wrote: it was changed behind the writer's back"
    )]
    LengthChanged {
        /// The length this writer wrote.
        expected: u64,
        /// The length the sink reports.
        found: u64,
    },
}

/// Appends batches of JSONL lines to a sink: one `write_all` per batch, flushed before
/// returning; a failed write truncates the sink back to its previous length.
pub(crate) struct JsonlWriter {
    sink: Box<dyn JsonlSink>,
    len: u64,
    sync: bool,
    poisoned: bool,
    /// The file behind the sink, when it is one (so `save` can tell its own file).
    path: Option<PathBuf>,
}

impl std::fmt::Debug for JsonlWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JsonlWriter")
            .field("len", &self.len)
            .field("sync", &self.sync)
            .field("poisoned", &self.poisoned)
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl JsonlWriter {
    /// A writer over `sink`, which currently holds `len` bytes.
    pub(crate) fn new(sink: Box<dyn JsonlSink>, len: u64) -> Self {
        JsonlWriter {
            sink,
            len,
            sync: false,
            poisoned: false,
            path: None,
        }
    }

    /// The same writer, remembering that its sink is the file at `path`.
    #[must_use]
    pub(crate) fn with_path(mut self, path: impl Into<PathBuf>) -> Self {
        self.path = Some(path.into());
        self
    }

    /// The file behind the sink, when known.
    pub(crate) fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Whether each batch is also synced to disk (off by default: a flushed batch already
    /// survives a killed process, only not a power loss).
    pub(crate) fn set_sync(&mut self, sync: bool) {
        self.sync = sync;
    }

    /// Bytes the sink holds.
    #[cfg(test)]
    fn len(&self) -> u64 {
        self.len
    }

    /// Writes one batch of `lines` (each without `\n`) after its frame line, if any, with one
    /// write: a reader then finds the whole batch or can tell that it is cut short.
    ///
    /// # Errors
    /// As [`write_batch`](Self::write_batch).
    pub(crate) fn write_framed<S: AsRef<str>>(
        &mut self,
        frame: Option<&Frame>,
        lines: impl IntoIterator<Item = S>,
    ) -> Result<(), WriteError> {
        self.write_batch(batch_text(frame, lines).as_bytes())
    }

    /// Writes one batch.
    ///
    /// # Errors
    /// [`WriteError::LengthChanged`] (nothing written) when the sink's length is not the one
    /// this writer left; [`WriteError::Io`] after a failed write that was rolled back (or a
    /// failed length check, with nothing written); [`WriteError::RollbackFailed`] when the
    /// rollback failed too, [`WriteError::Poisoned`] for every batch after that.
    pub(crate) fn write_batch(&mut self, bytes: &[u8]) -> Result<(), WriteError> {
        if self.poisoned {
            return Err(WriteError::Poisoned);
        }
        match self.sink.current_len() {
            Ok(Some(found)) if found != self.len => {
                return Err(WriteError::LengthChanged {
                    expected: self.len,
                    found,
                });
            }
            Ok(_) => {}
            Err(e) => return Err(WriteError::Io(e)),
        }
        let written = self
            .sink
            .append(bytes)
            .and_then(|()| if self.sync { self.sink.sync() } else { Ok(()) });
        match written {
            Ok(()) => {
                self.len += bytes.len() as u64;
                Ok(())
            }
            Err(e) => match self.sink.truncate(self.len) {
                Ok(()) => Err(WriteError::Io(e)),
                Err(t) => {
                    self.poisoned = true;
                    Err(WriteError::RollbackFailed(t))
                }
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    /// An in-memory sink, to use `JsonlWriter` on its own.
    #[derive(Clone, Default)]
    struct MemSink {
        bytes: Arc<Mutex<Vec<u8>>>,
        fail_next: Arc<Mutex<bool>>,
    }

    impl JsonlSink for MemSink {
        fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
            let mut buf = self.bytes.lock().unwrap();
            if std::mem::take(&mut *self.fail_next.lock().unwrap()) {
                buf.extend_from_slice(&bytes[..bytes.len() / 2]);
                return Err(io::Error::other("full"));
            }
            buf.extend_from_slice(bytes);
            Ok(())
        }
        fn truncate(&mut self, len: u64) -> io::Result<()> {
            self.bytes.lock().unwrap().truncate(len as usize);
            Ok(())
        }
        fn sync(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    /// Moved from `tests/jsonl.rs` when `JsonlWriter` stopped being public.
    #[test]
    fn jsonl_writer_on_its_own() {
        let sink = MemSink::default();
        sink.bytes.lock().unwrap().extend_from_slice(b"head\n");
        let mut w = JsonlWriter::new(Box::new(sink.clone()), 5);
        w.set_sync(true);
        w.write_batch(b"a\nb\n").unwrap();
        assert_eq!(w.len(), 9);
        *sink.fail_next.lock().unwrap() = true;
        assert!(matches!(w.write_batch(b"cccc\n"), Err(WriteError::Io(_))));
        assert_eq!(w.len(), 9);
        assert_eq!(&*sink.bytes.lock().unwrap(), b"head\na\nb\n");
        w.write_batch(b"d\n").unwrap();
        assert_eq!(&*sink.bytes.lock().unwrap(), b"head\na\nb\nd\n");
        assert_eq!(w.len(), 11);
    }

    #[test]
    fn a_framed_batch_is_one_write_after_its_frame() {
        let sink = MemSink::default();
        let mut w = JsonlWriter::new(Box::new(sink.clone()), 0);
        w.write_framed(Frame::announcing(1).as_ref(), ["x"])
            .unwrap();
        w.write_framed(Frame::announcing(2).as_ref(), ["y", "z"])
            .unwrap();
        assert_eq!(&*sink.bytes.lock().unwrap(), b"x\n{\"batch\":2}\ny\nz\n");
    }
}
