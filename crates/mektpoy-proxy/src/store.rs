//! The proxy's store: each conversation's log, as the crate writes it, in SQLite.
//!
//! One table of batches: `(conversation, offset, bytes)`, `offset` being where the batch
//! starts in the conversation's JSONL. A batch is one row, written in one transaction, so a
//! killed proxy leaves whole batches or none; the concatenation of a conversation's rows is
//! byte for byte the crate's JSONL (`Session::to_jsonl`). One file, WAL, so readers (a report,
//! an export) never wait on the writer.
//!
//! Each batch goes to the store before the answer is forwarded: the log never holds less than
//! the client was told.

use std::io;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use mektpoy::store::JsonlSink;
use rusqlite::{Connection, OptionalExtension, params};

/// A store of conversation logs in one SQLite file.
#[derive(Clone)]
pub struct Store {
    db: Arc<Mutex<Connection>>,
    metrics: Option<Arc<crate::metrics::Metrics>>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").finish_non_exhaustive()
    }
}

/// A store fault.
#[derive(Debug, thiserror::Error)]
#[error("store: {0}")]
pub struct StoreError(#[from] rusqlite::Error);

impl Store {
    /// Opens (or creates) the store at `path`.
    ///
    /// # Errors
    /// The database could not be opened or its table created.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        let db = Connection::open(path)?;
        db.busy_timeout(Duration::from_secs(5))?;
        db.pragma_update(None, "journal_mode", "WAL")?;
        // A committed batch survives a killed process with NORMAL under WAL; FULL would also
        // survive a power loss at the price of an fsync per batch.
        db.pragma_update(None, "synchronous", "NORMAL")?;
        db.execute_batch(
            "CREATE TABLE IF NOT EXISTS batches (
                conversation TEXT NOT NULL,
                offset INTEGER NOT NULL,
                bytes BLOB NOT NULL,
                written_at INTEGER NOT NULL,
                PRIMARY KEY (conversation, offset)
            ) WITHOUT ROWID;",
        )?;
        Ok(Store {
            db: Arc::new(Mutex::new(db)),
            metrics: None,
        })
    }

    /// The same store, timing each batch it writes into `metrics`.
    #[must_use]
    pub fn with_metrics(mut self, metrics: Arc<crate::metrics::Metrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    fn db(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.db.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The conversation's log, as JSONL bytes; `None` when the store has none.
    ///
    /// # Errors
    /// A database fault.
    pub fn load(&self, conversation: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let db = self.db();
        let mut stmt =
            db.prepare_cached("SELECT bytes FROM batches WHERE conversation = ?1 ORDER BY offset")?;
        let mut rows = stmt.query(params![conversation])?;
        let mut out: Option<Vec<u8>> = None;
        while let Some(row) = rows.next()? {
            let bytes: Vec<u8> = row.get(0)?;
            out.get_or_insert_with(Vec::new).extend_from_slice(&bytes);
        }
        Ok(out)
    }

    /// The conversations the store holds.
    ///
    /// # Errors
    /// A database fault.
    pub fn conversations(&self) -> Result<Vec<String>, StoreError> {
        let db = self.db();
        let mut stmt =
            db.prepare_cached("SELECT DISTINCT conversation FROM batches ORDER BY conversation")?;
        let rows = stmt.query_map([], |r| r.get(0))?;
        rows.collect::<Result<_, _>>().map_err(StoreError)
    }

    /// Each conversation with its size and when it was last written.
    ///
    /// # Errors
    /// A database fault.
    pub fn summaries(&self) -> Result<Vec<Summary>, StoreError> {
        let db = self.db();
        let mut stmt = db.prepare_cached(
            "SELECT conversation, count(*), sum(length(bytes)), max(written_at) FROM batches
             GROUP BY conversation ORDER BY conversation",
        )?;
        let rows = stmt.query_map([], |r| {
            Ok(Summary {
                conversation: r.get(0)?,
                batches: r.get::<_, i64>(1)? as u64,
                bytes: r.get::<_, i64>(2)? as u64,
                written_at: r.get::<_, i64>(3)? as u64,
            })
        })?;
        rows.collect::<Result<_, _>>().map_err(StoreError)
    }

    /// Deletes every conversation last written before `cutoff` (seconds since the Unix epoch)
    /// except those in `keep` (held in memory, still going on): the retention limit. The
    /// conversations deleted.
    ///
    /// # Errors
    /// A database fault.
    pub fn delete_written_before(
        &self,
        cutoff: u64,
        keep: &dyn Fn(&str) -> bool,
    ) -> Result<Vec<String>, StoreError> {
        let old: Vec<String> = self
            .summaries()?
            .into_iter()
            .filter(|s| s.written_at < cutoff && !keep(&s.conversation))
            .map(|s| s.conversation)
            .collect();
        for c in &old {
            self.delete(c)?;
        }
        Ok(old)
    }

    /// Deletes the conversation's log.
    ///
    /// # Errors
    /// A database fault.
    pub fn delete(&self, conversation: &str) -> Result<(), StoreError> {
        self.db()
            .execute(
                "DELETE FROM batches WHERE conversation = ?1",
                params![conversation],
            )
            .map(drop)
            .map_err(StoreError)
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
        let len = Sink::len(&self.db(), conversation)?;
        Ok(Sink {
            store: self.clone(),
            conversation: conversation.to_owned(),
            len,
            start: len,
        })
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
}

fn io_err(e: rusqlite::Error) -> io::Error {
    io::Error::other(e)
}

impl Sink {
    /// One batch at the end this sink knows, in one transaction.
    fn append_batch(&mut self, bytes: &[u8]) -> io::Result<()> {
        let mut db = self.store.db();
        let tx = db
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(io_err)?;
        self.check_end(&tx)?;
        tx.execute(
            "INSERT INTO batches (conversation, offset, bytes, written_at) VALUES (?1, ?2, ?3, ?4)",
            params![self.conversation, self.len as i64, bytes, now() as i64],
        )
        .map_err(io_err)?;
        tx.commit().map_err(io_err)?;
        self.len += bytes.len() as u64;
        Ok(())
    }

    /// Whether the log still ends where this sink's last batch did: another writer's batch
    /// after it refuses the write.
    fn check_end(&self, db: &Connection) -> io::Result<()> {
        let found = Sink::len(db, &self.conversation).map_err(io_err)?;
        if found == self.len {
            return Ok(());
        }
        Err(io::Error::other(format!(
            "conversation {} is {found} bytes long, not {}: another writer stored a batch",
            self.conversation, self.len
        )))
    }

    fn len(db: &Connection, conversation: &str) -> rusqlite::Result<u64> {
        db.prepare_cached(
            "SELECT offset + length(bytes) FROM batches WHERE conversation = ?1
             ORDER BY offset DESC LIMIT 1",
        )?
        .query_row(params![conversation], |r| r.get::<_, i64>(0))
        .optional()
        .map(|n| n.unwrap_or(0) as u64)
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
        let mut db = self.store.db();
        let tx = db
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(io_err)?;
        self.check_end(&tx)?;
        tx.execute(
            "DELETE FROM batches WHERE conversation = ?1 AND offset >= ?2 AND offset < ?3",
            params![self.conversation, len as i64, self.len as i64],
        )
        .map_err(io_err)?;
        // A row of ours that spans `len` keeps its bytes before it.
        tx.execute(
            "UPDATE batches SET bytes = substr(bytes, 1, ?2 - offset)
             WHERE conversation = ?1 AND offset < ?2 AND offset + length(bytes) > ?2",
            params![self.conversation, len as i64],
        )
        .map_err(io_err)?;
        tx.commit().map_err(io_err)?;
        self.len = len;
        Ok(())
    }

    fn sync(&mut self) -> io::Result<()> {
        Ok(())
    }

    /// The writer compares it with what it wrote itself: another proxy that wrote to the
    /// conversation makes this one refuse, typed, instead of interleaving batches.
    fn current_len(&mut self) -> io::Result<Option<u64>> {
        let db = self.store.db();
        Sink::len(&db, &self.conversation).map(Some).map_err(io_err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mektpoy::session::FileOptions;
    use mektpoy::{Event, Message};

    #[test]
    fn a_conversation_reads_back_byte_for_byte_and_a_stale_writer_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().join("p.db")).unwrap();
        let s = FileOptions::new()
            .create_in(store.sink("c").unwrap(), "c")
            .unwrap();
        s.append(Event::append(Message::user("u1", "hi"))).unwrap();
        let bytes = store.load("c").unwrap().unwrap();
        assert_eq!(bytes, s.to_jsonl().into_bytes());
        assert_eq!(store.load("other").unwrap(), None);

        let taken = FileOptions::new()
            .open_in(&bytes, store.sink("c").unwrap())
            .unwrap()
            .session;
        taken
            .append(Event::append(Message::user("u2", "mine")))
            .unwrap();
        assert!(
            s.append(Event::append(Message::user("u3", "stale")))
                .is_err()
        );
        let reopened = Store::open(dir.path().join("p.db")).unwrap();
        assert_eq!(
            reopened.load("c").unwrap().unwrap(),
            taken.to_jsonl().into_bytes()
        );
        assert_eq!(reopened.conversations().unwrap(), ["c"]);
        let summary = &reopened.summaries().unwrap()[0];
        assert_eq!(summary.batches, 3);
        assert_eq!(summary.bytes, taken.to_jsonl().len() as u64);
        assert!(summary.written_at + 60 > now());
        assert!(
            reopened
                .delete_written_before(now() + 1, &|c| c == "c")
                .unwrap()
                .is_empty(),
            "a conversation held in memory is kept"
        );

        // A sink cuts back its own bytes only.
        let mut sink = store.sink("c").unwrap();
        let end = taken.to_jsonl().len() as u64;
        sink.truncate(3).unwrap();
        assert_eq!(store.load("c").unwrap().unwrap().len() as u64, end);
        sink.append(b"x\n").unwrap();
        sink.truncate(end).unwrap();
        assert_eq!(
            store.load("c").unwrap().unwrap().len() as u64,
            end,
            "its own batch"
        );
        sink.append(b"x\n").unwrap();
        let mut other = store.sink("c").unwrap();
        assert!(other.append(b"y\n").is_ok(), "at the end as it now is");
        assert!(
            sink.append(b"z\n").is_err(),
            "behind another writer's batch"
        );
        assert!(
            sink.truncate(end).is_err(),
            "not under another writer's batch"
        );
        assert_eq!(store.load("c").unwrap().unwrap().len() as u64, end + 4);
        assert_eq!(
            store.delete_written_before(now() + 1, &|_| false).unwrap(),
            ["c"],
            "the retention limit deletes what is idle"
        );
        assert_eq!(store.load("c").unwrap(), None);
    }
}
