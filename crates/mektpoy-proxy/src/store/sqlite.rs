//! The SQLite backend: one file, WAL, so readers (a report, an export) never wait on the
//! writer. Each batch is written in an immediate transaction, which holds the file's write lock
//! from its first statement: the check that the log still ends where the sink thinks and the
//! insert are one step for every other writer.

use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use super::{Moved, StoreError, Summary};

#[derive(Clone)]
pub(super) struct Db(Arc<Mutex<Connection>>);

impl Db {
    pub(super) fn open(path: &Path) -> Result<Self, StoreError> {
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
        Ok(Db(Arc::new(Mutex::new(db))))
    }

    fn db(&self) -> MutexGuard<'_, Connection> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn load(&self, conversation: &str) -> Result<Option<Vec<u8>>, StoreError> {
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

    pub(super) fn conversations(&self) -> Result<Vec<String>, StoreError> {
        let db = self.db();
        let mut stmt =
            db.prepare_cached("SELECT DISTINCT conversation FROM batches ORDER BY conversation")?;
        let rows = stmt.query_map([], |r| r.get(0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    pub(super) fn summaries(&self) -> Result<Vec<Summary>, StoreError> {
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
        Ok(rows.collect::<Result<_, _>>()?)
    }

    pub(super) fn delete(&self, conversation: &str) -> Result<(), StoreError> {
        self.db().execute(
            "DELETE FROM batches WHERE conversation = ?1",
            params![conversation],
        )?;
        Ok(())
    }

    /// Deletes the conversation if it still was last written before `cutoff`.
    pub(super) fn delete_if_written_before(
        &self,
        conversation: &str,
        cutoff: u64,
    ) -> Result<bool, StoreError> {
        let n = self.db().execute(
            "DELETE FROM batches WHERE conversation = ?1
             AND (SELECT max(written_at) FROM batches WHERE conversation = ?1) < ?2",
            params![conversation, cutoff as i64],
        )?;
        Ok(n > 0)
    }

    pub(super) fn end(&self, conversation: &str) -> Result<u64, StoreError> {
        Ok(end(&self.db(), conversation)?)
    }

    pub(super) fn append(
        &self,
        conversation: &str,
        at: u64,
        bytes: &[u8],
        written_at: u64,
    ) -> Result<Result<(), Moved>, StoreError> {
        let mut db = self.db();
        let tx = db.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let found = end(&tx, conversation)?;
        if found != at {
            return Ok(Err(Moved(found)));
        }
        tx.execute(
            "INSERT INTO batches (conversation, offset, bytes, written_at) VALUES (?1, ?2, ?3, ?4)",
            params![conversation, at as i64, bytes, written_at as i64],
        )?;
        tx.commit()?;
        Ok(Ok(()))
    }

    pub(super) fn cut(
        &self,
        conversation: &str,
        end_now: u64,
        to: u64,
    ) -> Result<Result<(), Moved>, StoreError> {
        let mut db = self.db();
        let tx = db.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let found = end(&tx, conversation)?;
        if found != end_now {
            return Ok(Err(Moved(found)));
        }
        tx.execute(
            "DELETE FROM batches WHERE conversation = ?1 AND offset >= ?2 AND offset < ?3",
            params![conversation, to as i64, end_now as i64],
        )?;
        // A row of ours that spans `to` keeps its bytes before it.
        tx.execute(
            "UPDATE batches SET bytes = substr(bytes, 1, ?2 - offset)
             WHERE conversation = ?1 AND offset < ?2 AND offset + length(bytes) > ?2",
            params![conversation, to as i64],
        )?;
        tx.commit()?;
        Ok(Ok(()))
    }
}

fn end(db: &Connection, conversation: &str) -> rusqlite::Result<u64> {
    db.prepare_cached(
        "SELECT offset + length(bytes) FROM batches WHERE conversation = ?1
         ORDER BY offset DESC LIMIT 1",
    )?
    .query_row(params![conversation], |r| r.get::<_, i64>(0))
    .optional()
    .map(|n| n.unwrap_or(0) as u64)
}
