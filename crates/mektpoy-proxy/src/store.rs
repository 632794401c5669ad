//! The proxy's store: each conversation's log, as the crate writes it, in SQLite (the
//! default, one file) or Postgres (several proxies on one database).
//!
//! One table of batches: `(conversation, offset, bytes, written_at)`, `offset` being where the
//! batch starts in the conversation's JSONL. A batch is one row, written in one transaction, so
//! a killed proxy leaves whole batches or none; the concatenation of a conversation's rows is
//! byte for byte the crate's JSONL (`Session::to_jsonl`).
//!
//! Each batch goes to the store before the answer is forwarded: the log never holds less than
//! the client was told. A sink writes only at the end it knows and cuts back only its own rows
//! (decision 113); how each backend makes the check and the write one step is in its module.
//! The contract both backends keep is one test, run on each: `tests/postgres.rs`.

use std::io;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use mektpoy::store::JsonlSink;

mod postgres;
mod sqlite;

pub use postgres::{POOL_SIZE, TIMEOUT};

thread_local! {
    /// Time this thread has spent on store calls. A request's work on its conversation runs on
    /// one thread (`block_in_place`), so the difference around it is that request's store time,
    /// with no lock and no shared counter.
    static SPENT: std::cell::Cell<Duration> = const { std::cell::Cell::new(Duration::ZERO) };
}

/// Time this thread has spent on store calls so far: the difference around a stretch of work
/// is the store's part of it (for a request's log line).
pub fn time_spent_here() -> Duration {
    SPENT.with(std::cell::Cell::get)
}

/// `f`, a store call, counted in [`time_spent_here`].
fn timed<T>(f: impl FnOnce() -> T) -> T {
    let started = std::time::Instant::now();
    let out = f();
    SPENT.with(|s| s.set(s.get() + started.elapsed()));
    out
}

/// A store of conversation logs: one SQLite file or one Postgres database.
#[derive(Clone)]
pub struct Store {
    backend: Backend,
    metrics: Option<Arc<crate::metrics::Metrics>>,
}

#[derive(Clone)]
enum Backend {
    Sqlite(sqlite::Db),
    Postgres(postgres::Db),
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let backend = match self.backend {
            Backend::Sqlite(_) => "sqlite",
            Backend::Postgres(_) => "postgres",
        };
        f.debug_struct("Store")
            .field("backend", &backend)
            .finish_non_exhaustive()
    }
}

/// A store fault.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// SQLite failed.
    #[error("store: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// Postgres failed or could not be reached.
    #[error("store: postgres: {}", chain(.0))]
    Postgres(#[from] tokio_postgres::Error),
    /// Postgres did not answer in time.
    #[error("store: postgres did not answer within {} s", .0.as_secs())]
    Timeout(Duration),
    /// The store could not be set up (a `--store` the proxy does not read, a runtime).
    #[error("store: {0}")]
    Setup(String),
}

/// An error with its causes (`tokio-postgres` keeps the server's message in the source).
fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

/// The log no longer ends where a sink thinks: it ends at this offset (another writer stored
/// a batch, or the conversation was deleted). Nothing was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Moved(u64);

macro_rules! on_backend {
    ($store:expr, $db:ident => $e:expr) => {
        match &$store.backend {
            Backend::Sqlite($db) => $e,
            Backend::Postgres($db) => $e,
        }
    };
}

impl Store {
    /// Opens (or creates) the SQLite store at `path`.
    ///
    /// # Errors
    /// The database could not be opened or its table created.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        Ok(Store {
            backend: Backend::Sqlite(sqlite::Db::open(path.as_ref())?),
            metrics: None,
        })
    }

    /// Connects to the Postgres database at `url` (`postgres://user@host:port/db`) and creates
    /// the table if it is missing.
    ///
    /// # Errors
    /// A URL `tokio-postgres` does not read; the database unreachable (within [`TIMEOUT`]) or
    /// refusing to create the table.
    pub fn postgres(url: &str) -> Result<Self, StoreError> {
        Ok(Store {
            backend: Backend::Postgres(postgres::Db::connect(url)?),
            metrics: None,
        })
    }

    /// The store a `--store` value names: `sqlite:PATH`, or `postgres://...` /
    /// `postgresql://...`.
    ///
    /// # Errors
    /// Another form, or the store's own fault opening.
    pub fn connect(spec: &str) -> Result<Self, StoreError> {
        if let Some(path) = spec.strip_prefix("sqlite:") {
            Store::open(path)
        } else if spec.starts_with("postgres://") || spec.starts_with("postgresql://") {
            Store::postgres(spec)
        } else {
            Err(StoreError::Setup(format!(
                "`{}`: sqlite:PATH or postgres://USER@HOST:PORT/DB expected",
                redacted(spec)
            )))
        }
    }

    /// The same store, timing each batch it writes into `metrics`.
    #[must_use]
    pub fn with_metrics(mut self, metrics: Arc<crate::metrics::Metrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// The conversation's log, as JSONL bytes; `None` when the store has none.
    ///
    /// # Errors
    /// A database fault.
    pub fn load(&self, conversation: &str) -> Result<Option<Vec<u8>>, StoreError> {
        timed(|| on_backend!(self, db => db.load(conversation)))
    }

    /// The conversations the store holds.
    ///
    /// # Errors
    /// A database fault.
    pub fn conversations(&self) -> Result<Vec<String>, StoreError> {
        on_backend!(self, db => db.conversations())
    }

    /// Each conversation with its size and when it was last written.
    ///
    /// # Errors
    /// A database fault.
    pub fn summaries(&self) -> Result<Vec<Summary>, StoreError> {
        on_backend!(self, db => db.summaries())
    }

    /// Deletes every conversation last written before `cutoff` (seconds since the Unix epoch)
    /// except those in `keep` (held in memory, still going on): the retention limit. The
    /// conversations deleted (one written to since it was listed is kept).
    ///
    /// # Errors
    /// A database fault.
    pub fn delete_written_before(
        &self,
        cutoff: u64,
        keep: &dyn Fn(&str) -> bool,
    ) -> Result<Vec<String>, StoreError> {
        let mut deleted = Vec::new();
        for s in self.summaries()? {
            if s.written_at >= cutoff || keep(&s.conversation) {
                continue;
            }
            let gone =
                on_backend!(self, db => db.delete_if_written_before(&s.conversation, cutoff))?;
            if gone {
                deleted.push(s.conversation);
            }
        }
        Ok(deleted)
    }

    /// Deletes the conversation's log.
    ///
    /// # Errors
    /// A database fault.
    pub fn delete(&self, conversation: &str) -> Result<(), StoreError> {
        timed(|| on_backend!(self, db => db.delete(conversation)))
    }

    /// A sink appending to the conversation's log.
    ///
    /// The sink writes at the end of the log as it finds it now and only there: a batch
    /// another writer stored first makes its next append fail instead of landing after that
    /// writer's (the crate's writer then refuses, typed), and it only ever cuts back bytes it
    /// wrote itself.
    ///
    /// # Errors
    /// A database fault reading the log's length.
    pub fn sink(&self, conversation: &str) -> Result<Sink, StoreError> {
        let len = self.end(conversation)?;
        Ok(Sink {
            store: self.clone(),
            conversation: conversation.to_owned(),
            len,
            start: len,
            end: Arc::new(std::sync::atomic::AtomicU64::new(len)),
        })
    }

    /// Cuts the conversation's log back to `to` bytes while it still ends at `end_now` (no
    /// other writer stored a batch since): `false` when it does not, and nothing is cut. What
    /// a refused request wrote is undone with this (`Conversation::prepare`).
    ///
    /// # Errors
    /// A database fault.
    pub fn cut_back(&self, conversation: &str, end_now: u64, to: u64) -> Result<bool, StoreError> {
        if to >= end_now {
            return Ok(true);
        }
        let cut = timed(|| on_backend!(self, db => db.cut(conversation, end_now, to)))?;
        Ok(cut.is_ok())
    }

    fn end(&self, conversation: &str) -> Result<u64, StoreError> {
        timed(|| on_backend!(self, db => db.end(conversation)))
    }
}

/// `spec` without a password (`postgres://user:secret@host` reads `postgres://user:***@host`).
pub fn redacted(spec: &str) -> String {
    let Some((scheme, rest)) = spec.split_once("://") else {
        return spec.to_owned();
    };
    let Some((credentials, host)) = rest.split_once('@') else {
        return spec.to_owned();
    };
    match credentials.split_once(':') {
        Some((user, _)) => format!("{scheme}://{user}:***@{host}"),
        None => spec.to_owned(),
    }
}

/// A stored conversation at a glance.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Summary {
    /// Its key.
    pub conversation: String,
    /// Batches stored.
    pub batches: u64,
    /// Bytes of its log.
    pub bytes: u64,
    /// When its last batch was written, in seconds since the Unix epoch.
    pub written_at: u64,
}

/// Seconds since the Unix epoch.
pub fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// One conversation's log in the store, as the crate's writer sees it.
#[derive(Debug)]
pub struct Sink {
    store: Store,
    conversation: String,
    /// Where this sink's next batch goes.
    len: u64,
    /// Where this sink started: it never cuts back before it.
    start: u64,
    /// `len`, for the conversation holding the session this sink writes for.
    end: Arc<std::sync::atomic::AtomicU64>,
}

impl Sink {
    /// Where this sink's next batch goes, kept up to date as it writes: a conversation reads
    /// it before a request, to undo what a refused request wrote.
    pub fn end(&self) -> Arc<std::sync::atomic::AtomicU64> {
        Arc::clone(&self.end)
    }

    /// One batch at the end this sink knows, in one transaction.
    fn append_batch(&mut self, bytes: &[u8]) -> io::Result<()> {
        let c = &self.conversation;
        let appended =
            timed(|| on_backend!(self.store, db => db.append(c, self.len, bytes, now())))
                .map_err(io::Error::other)?;
        match appended {
            Ok(()) => {
                self.len += bytes.len() as u64;
                self.end
                    .store(self.len, std::sync::atomic::Ordering::Relaxed);
                Ok(())
            }
            Err(Moved(found)) => Err(io::Error::other(format!(
                "conversation {c} is {found} bytes long, not {}: another writer stored a batch",
                self.len
            ))),
        }
    }
}

impl JsonlSink for Sink {
    fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
        let started = std::time::Instant::now();
        let written = self.append_batch(bytes);
        if let Some(m) = &self.store.metrics {
            m.store_write.observe(started.elapsed());
        }
        written
    }

    /// Cuts back only this sink's own bytes (`[len, self.len)`), and only while nobody wrote
    /// after them: a batch being stored whole or not at all, this undoes a batch the writer
    /// gave up on, never another writer's.
    fn truncate(&mut self, len: u64) -> io::Result<()> {
        let len = len.max(self.start);
        if len >= self.len {
            return Ok(());
        }
        let c = &self.conversation;
        let cut = timed(|| on_backend!(self.store, db => db.cut(c, self.len, len)))
            .map_err(io::Error::other)?;
        match cut {
            Ok(()) => {
                self.len = len;
                self.end.store(len, std::sync::atomic::Ordering::Relaxed);
                Ok(())
            }
            Err(Moved(found)) => Err(io::Error::other(format!(
                "conversation {c} is {found} bytes long, not {}: another writer stored a batch after this one's",
                self.len
            ))),
        }
    }

    fn sync(&mut self) -> io::Result<()> {
        Ok(())
    }

    /// The writer compares it with what it wrote itself: another proxy that wrote to the
    /// conversation makes this one refuse, typed, instead of interleaving batches.
    fn current_len(&mut self) -> io::Result<Option<u64>> {
        self.store
            .end(&self.conversation)
            .map(Some)
            .map_err(io::Error::other)
    }
}
