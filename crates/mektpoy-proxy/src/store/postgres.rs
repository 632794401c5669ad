//! The Postgres backend: the same table of batches (`bytea` bytes, `PRIMARY KEY
//! (conversation, "offset")`), reached through `tokio-postgres` with a small pool of clients.
//!
//! # Why a background runtime
//!
//! The crate's [`JsonlSink`](mektpoy::store::JsonlSink) is synchronous, and so is this store's
//! API (the proxy calls it inside `block_in_place`, `report` and `purge` call it from `main`).
//! Each operation is spawned on a small runtime of the store's own (one worker thread, where
//! the pool's connections live) and waited for on a plain channel. That works from any
//! caller: a worker of the proxy's runtime in `block_in_place`, an async handler, a
//! current-thread runtime, a plain thread, with no `block_on` nested in another runtime that
//! could panic, and it keeps the connections alive whatever runtime the caller is on. Each
//! operation has a deadline ([`TIMEOUT`]): an unreachable database is a typed error, never
//! a request hanging.
//!
//! # Why two writers never interleave a conversation
//!
//! Every change to a conversation (a batch, a sink's cut-back, a deletion) runs in one
//! transaction that first takes a transaction-scoped advisory lock on the conversation
//! (`pg_advisory_xact_lock`, keyed by 8 bytes of SHA-256 of its key), then checks that the log
//! still ends where the sink thinks, then writes. Under READ COMMITTED each statement after the
//! lock sees every batch committed before it, so the check and the write are one step for
//! every other writer: a stale sink finds the log longer (or shorter: purged) and is refused
//! with nothing written. `SELECT ... FOR UPDATE` on the last row is not enough on its own: a
//! new conversation has no row to lock, and a writer that waited on the lock re-reads only the
//! row it locked, not the batch the other writer inserted after it. The primary key stays as
//! the last guard: a stale writer's offset is another writer's row, so its INSERT conflicts
//! even if the check were ever skipped.

use std::future::Future;
use std::pin::Pin;
use std::str::FromStr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use sha2::{Digest, Sha256};
use tokio_postgres::{Client, Config, NoTls, Statement};

use super::{Moved, StoreError, Summary};

/// Connections a proxy keeps open at most.
pub const POOL_SIZE: usize = 8;
/// The longest one store operation may take (connecting included) before it is a fault.
pub const TIMEOUT: Duration = Duration::from_secs(10);

const SCHEMA: &str = r#"CREATE TABLE IF NOT EXISTS batches (
    conversation text NOT NULL,
    "offset" bigint NOT NULL,
    bytes bytea NOT NULL,
    written_at bigint NOT NULL,
    PRIMARY KEY (conversation, "offset")
)"#;

/// The advisory lock key that serializes proxies creating the schema at once (two concurrent
/// `CREATE TABLE IF NOT EXISTS` may both pass the check and one then fails).
const SCHEMA_LOCK: i64 = 0x6d65_6b74_706f_7900; // "mektpoy\0"

type Op<'a, T> = Pin<Box<dyn Future<Output = Result<T, tokio_postgres::Error>> + Send + 'a>>;

#[derive(Clone)]
pub(super) struct Db {
    pool: Arc<Pool>,
    runtime: Arc<Background>,
}

/// The store's own runtime, shut down without waiting when the last handle goes (so dropping
/// a store inside another runtime does not panic).
struct Background(Option<tokio::runtime::Runtime>);

impl Drop for Background {
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}

struct Pool {
    config: Config,
    idle: Mutex<Vec<Conn>>,
    permits: tokio::sync::Semaphore,
}

/// A client with its statements prepared.
struct Conn {
    client: Client,
    st: Statements,
}

struct Statements {
    load: Statement,
    end: Statement,
    lock: Statement,
    insert: Statement,
    cut: Statement,
    shorten: Statement,
    delete: Statement,
    delete_before: Statement,
}

impl Statements {
    async fn prepare(c: &Client) -> Result<Self, tokio_postgres::Error> {
        Ok(Statements {
            load: c
                .prepare(r#"SELECT bytes FROM batches WHERE conversation = $1 ORDER BY "offset""#)
                .await?,
            end: c
                .prepare(
                    r#"SELECT "offset" + length(bytes) FROM batches WHERE conversation = $1
                       ORDER BY "offset" DESC LIMIT 1"#,
                )
                .await?,
            lock: c.prepare("SELECT pg_advisory_xact_lock($1)").await?,
            insert: c
                .prepare(
                    r#"INSERT INTO batches (conversation, "offset", bytes, written_at)
                       VALUES ($1, $2, $3, $4)"#,
                )
                .await?,
            cut: c
                .prepare(
                    r#"DELETE FROM batches WHERE conversation = $1 AND "offset" >= $2
                       AND "offset" < $3"#,
                )
                .await?,
            shorten: c
                .prepare(
                    r#"UPDATE batches SET bytes = substring(bytes from 1 for ($2 - "offset")::int)
                       WHERE conversation = $1 AND "offset" < $2 AND "offset" + length(bytes) > $2"#,
                )
                .await?,
            delete: c
                .prepare("DELETE FROM batches WHERE conversation = $1")
                .await?,
            delete_before: c
                .prepare(
                    "DELETE FROM batches WHERE conversation = $1
                     AND (SELECT max(written_at) FROM batches WHERE conversation = $1) < $2",
                )
                .await?,
        })
    }
}

/// The conversation's advisory lock key.
fn lock_key(conversation: &str) -> i64 {
    let digest = Sha256::digest(conversation.as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    i64::from_le_bytes(first)
}

impl Db {
    /// Connects to `url` (`postgres://user@host:port/db`, or any form `tokio-postgres` reads)
    /// and creates the table if it is missing.
    pub(super) fn connect(url: &str) -> Result<Self, StoreError> {
        let mut config = Config::from_str(url)?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(TIMEOUT / 2);
        }
        if config.get_application_name().is_none() {
            config.application_name("mektpoy-proxy");
        }
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("mektpoy-store")
            .enable_all()
            .build()
            .map_err(|e| StoreError::Setup(format!("the store's runtime: {e}")))?;
        let db = Db {
            pool: Arc::new(Pool {
                config,
                idle: Mutex::new(Vec::new()),
                permits: tokio::sync::Semaphore::new(POOL_SIZE),
            }),
            runtime: Arc::new(Background(Some(runtime))),
        };
        // The first connection creates the table: a database unreachable at start is an error
        // here, not at the first request.
        db.run(|_| Box::pin(async { Ok(()) }))?;
        Ok(db)
    }

    /// Runs `op` on a pooled client on the store's runtime, within [`TIMEOUT`], and waits for
    /// it. A client whose operation failed is dropped, not pooled: a fault may leave it in any
    /// state (a transaction open, the connection gone), and the next operation connects anew,
    /// which is how the store recovers by itself when the database comes back.
    fn run<T, F>(&self, op: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: for<'a> FnOnce(&'a mut Conn) -> Op<'a, T> + Send + 'static,
    {
        let Some(runtime) = self.runtime.0.as_ref() else {
            return Err(StoreError::Setup("the store's runtime is gone".into()));
        };
        let pool = Arc::clone(&self.pool);
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        runtime.spawn(async move {
            let done = match tokio::time::timeout(TIMEOUT, pool.with(op)).await {
                Ok(done) => done,
                Err(_) => Err(StoreError::Timeout(TIMEOUT)),
            };
            let _ = tx.send(done);
        });
        rx.recv()
            .unwrap_or_else(|_| Err(StoreError::Setup("the store's runtime stopped".into())))
    }

    pub(super) fn load(&self, conversation: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let conversation = conversation.to_owned();
        self.run(move |c| {
            Box::pin(async move {
                let rows = c.client.query(&c.st.load, &[&conversation]).await?;
                let mut out: Option<Vec<u8>> = None;
                for row in rows {
                    let bytes: &[u8] = row.try_get(0)?;
                    out.get_or_insert_with(Vec::new).extend_from_slice(bytes);
                }
                Ok(out)
            })
        })
    }

    pub(super) fn conversations(&self) -> Result<Vec<String>, StoreError> {
        self.run(|c| {
            Box::pin(async move {
                let rows = c
                    .client
                    .query(
                        "SELECT DISTINCT conversation FROM batches ORDER BY conversation",
                        &[],
                    )
                    .await?;
                rows.iter().map(|r| r.try_get(0)).collect()
            })
        })
    }

    pub(super) fn summaries(&self) -> Result<Vec<Summary>, StoreError> {
        self.run(|c| {
            Box::pin(async move {
                let rows = c
                    .client
                    .query(
                        "SELECT conversation, count(*), sum(length(bytes))::bigint,
                         max(written_at) FROM batches GROUP BY conversation ORDER BY conversation",
                        &[],
                    )
                    .await?;
                rows.iter()
                    .map(|r| {
                        Ok(Summary {
                            conversation: r.try_get(0)?,
                            batches: r.try_get::<_, i64>(1)? as u64,
                            bytes: r.try_get::<_, i64>(2)? as u64,
                            written_at: r.try_get::<_, i64>(3)? as u64,
                        })
                    })
                    .collect()
            })
        })
    }

    pub(super) fn delete(&self, conversation: &str) -> Result<(), StoreError> {
        let conversation = conversation.to_owned();
        self.run(move |c| {
            Box::pin(async move {
                let tx = c.client.transaction().await?;
                tx.execute(&c.st.lock, &[&lock_key(&conversation)]).await?;
                tx.execute(&c.st.delete, &[&conversation]).await?;
                tx.commit().await
            })
        })
    }

    pub(super) fn delete_if_written_before(
        &self,
        conversation: &str,
        cutoff: u64,
    ) -> Result<bool, StoreError> {
        let conversation = conversation.to_owned();
        let cutoff = cutoff as i64;
        self.run(move |c| {
            Box::pin(async move {
                let tx = c.client.transaction().await?;
                tx.execute(&c.st.lock, &[&lock_key(&conversation)]).await?;
                let n = tx
                    .execute(&c.st.delete_before, &[&conversation, &cutoff])
                    .await?;
                tx.commit().await?;
                Ok(n > 0)
            })
        })
    }

    pub(super) fn end(&self, conversation: &str) -> Result<u64, StoreError> {
        let conversation = conversation.to_owned();
        self.run(move |c| {
            Box::pin(async move {
                let row = c.client.query_opt(&c.st.end, &[&conversation]).await?;
                row_end(row.as_ref())
            })
        })
    }

    pub(super) fn append(
        &self,
        conversation: &str,
        at: u64,
        bytes: &[u8],
        written_at: u64,
    ) -> Result<Result<(), Moved>, StoreError> {
        let conversation = conversation.to_owned();
        let bytes = bytes.to_vec();
        self.run(move |c| {
            Box::pin(async move {
                let tx = c.client.transaction().await?;
                tx.execute(&c.st.lock, &[&lock_key(&conversation)]).await?;
                let found = row_end(tx.query_opt(&c.st.end, &[&conversation]).await?.as_ref())?;
                if found != at {
                    tx.rollback().await?;
                    return Ok(Err(Moved(found)));
                }
                tx.execute(
                    &c.st.insert,
                    &[&conversation, &(at as i64), &bytes, &(written_at as i64)],
                )
                .await?;
                tx.commit().await?;
                Ok(Ok(()))
            })
        })
    }

    pub(super) fn cut(
        &self,
        conversation: &str,
        end_now: u64,
        to: u64,
    ) -> Result<Result<(), Moved>, StoreError> {
        let conversation = conversation.to_owned();
        self.run(move |c| {
            Box::pin(async move {
                let tx = c.client.transaction().await?;
                tx.execute(&c.st.lock, &[&lock_key(&conversation)]).await?;
                let found = row_end(tx.query_opt(&c.st.end, &[&conversation]).await?.as_ref())?;
                if found != end_now {
                    tx.rollback().await?;
                    return Ok(Err(Moved(found)));
                }
                tx.execute(&c.st.cut, &[&conversation, &(to as i64), &(end_now as i64)])
                    .await?;
                tx.execute(&c.st.shorten, &[&conversation, &(to as i64)])
                    .await?;
                tx.commit().await?;
                Ok(Ok(()))
            })
        })
    }
}

fn row_end(row: Option<&tokio_postgres::Row>) -> Result<u64, tokio_postgres::Error> {
    Ok(match row {
        Some(r) => r.try_get::<_, i64>(0)? as u64,
        None => 0,
    })
}

impl Pool {
    async fn with<T>(
        &self,
        op: impl for<'a> FnOnce(&'a mut Conn) -> Op<'a, T>,
    ) -> Result<T, StoreError> {
        let _permit = self
            .permits
            .acquire()
            .await
            .map_err(|_| StoreError::Setup("the store's pool is closed".into()))?;
        let mut conn = match self.take() {
            Some(conn) => conn,
            None => self.connect().await?,
        };
        let done = op(&mut conn).await?;
        self.idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(conn);
        Ok(done)
    }

    /// An idle client whose connection is still open.
    fn take(&self) -> Option<Conn> {
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        while let Some(conn) = idle.pop() {
            if !conn.client.is_closed() {
                return Some(conn);
            }
        }
        None
    }

    async fn connect(&self) -> Result<Conn, StoreError> {
        let (client, connection) = self.config.connect(NoTls).await?;
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "a store connection closed");
            }
        });
        // Each new connection makes sure of the table before preparing statements on it (one
        // statement; a connection is rare).
        client
            .batch_execute(&format!(
                "BEGIN; SELECT pg_advisory_xact_lock({SCHEMA_LOCK}); {SCHEMA}; COMMIT;"
            ))
            .await?;
        let st = Statements::prepare(&client).await?;
        Ok(Conn { client, st })
    }
}
