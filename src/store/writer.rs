//! `JsonlWriter`: one write per batch, flushed before returning, rolled back on failure.

use std::fs::File;
use std::io::{self, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// Where a [`JsonlWriter`] puts its bytes: a file, or a test double that fails on purpose.
pub trait JsonlSink: Send + Sync {
    /// Appends `bytes` at the end with one `write_all` and flushes them to the OS.
    ///
    /// # Errors
    /// Any I/O error; the sink may have written part of the bytes.
    fn append(&mut self, bytes: &[u8]) -> io::Result<()>;

    /// Cuts the sink back to `len` bytes.
    ///
    /// # Errors
    /// Any I/O error.
    fn truncate(&mut self, len: u64) -> io::Result<()>;

    /// Asks the OS to put the bytes on disk.
    ///
    /// # Errors
    /// Any I/O error.
    fn sync(&mut self) -> io::Result<()>;

    /// The sink's current length, when it can tell (`None`, the default, skips the check).
    /// Before each batch the writer compares it with the length it wrote itself: a file that
    /// someone else changed is refused ([`WriteError::LengthChanged`]), not appended to.
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
pub struct JsonlWriter {
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
    pub fn new(sink: Box<dyn JsonlSink>, len: u64) -> Self {
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
    pub fn with_path(mut self, path: impl Into<PathBuf>) -> Self {
        self.path = Some(path.into());
        self
    }

    /// The file behind the sink, when known.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Whether each batch is also synced to disk (off by default: a flushed batch already
    /// survives a killed process, only not a power loss).
    pub fn set_sync(&mut self, sync: bool) {
        self.sync = sync;
    }

    /// Bytes the sink holds.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the sink is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Writes one batch.
    ///
    /// # Errors
    /// [`WriteError::LengthChanged`] (nothing written) when the sink's length is not the one
    /// this writer left; [`WriteError::Io`] after a failed write that was rolled back (or a
    /// failed length check, with nothing written); [`WriteError::RollbackFailed`] when the
    /// rollback failed too, [`WriteError::Poisoned`] for every batch after that.
    pub fn write_batch(&mut self, bytes: &[u8]) -> Result<(), WriteError> {
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
