//! Reads on read-only connections off the async thread: at most `READERS` at once (a
//! bounded pool: threads and file descriptors do not grow with the number of concurrent
//! requests), at most `IDLE_READERS` kept open between reads. Each read is one
//! transaction, so it sees one snapshot. A read may start another beside it on a free
//! place of the pool (`Other`), which sees a snapshot of its own.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use rusqlite::Connection;

use crate::error::Result;
use crate::lock;
use crate::pool::{Beside, Pool};
use crate::store::sqlite::errors::sql;
use crate::store::sqlite::rendered::Rendered;
use crate::store::sqlite::schema::{self, Mode, Settings};

/// How many reads run at once, each on its own connection and thread.
const READERS: usize = 8;
/// How many read connections stay open while no read needs them.
const IDLE_READERS: usize = 2;

pub struct Readers {
    shared: Arc<Shared>,
    pool: Pool,
}

/// What every read of the pool opens its connection with, and the connections kept.
struct Shared {
    path: PathBuf,
    settings: Settings,
    mode: Mode,
    idle: Mutex<Vec<Connection>>,
    closed: AtomicBool,
    /// Histories as rendered by earlier reads.
    rendered: Rendered,
}

/// What a read may run beside it: another read, on a connection and in a transaction of
/// its own, on a free place of the same pool (`Lite::messages_json` halves a long range).
pub struct Other {
    shared: Arc<Shared>,
    pool: Pool,
}

impl Readers {
    /// The pool, keeping `first` (a connection already open) for its first read.
    pub fn new(path: PathBuf, settings: Settings, mode: Mode, first: Connection) -> Self {
        let shared = Shared {
            path,
            settings,
            mode,
            idle: Mutex::new(vec![first]),
            closed: AtomicBool::new(false),
            rendered: Rendered::default(),
        };
        Readers { shared: Arc::new(shared), pool: Pool::new("sqlite reader", READERS) }
    }

    /// Histories as rendered by earlier reads of this pool.
    #[cfg(test)]
    pub fn rendered(&self) -> &Rendered {
        &self.shared.rendered
    }

    /// Closes the idle connections; reads after it fail with 1006.
    pub fn close(&self) {
        self.shared.closed.store(true, Ordering::Release);
        lock(&self.shared.idle).clear();
    }

    /// Runs `work` in a read transaction (one snapshot) on a blocking thread; `work` may
    /// start another read beside it (`Other`).
    pub async fn read<T, F>(&self, work: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection, &Other) -> Result<T> + Send + 'static,
    {
        let other = Other { shared: self.shared.clone(), pool: self.pool.clone() };
        self.pool.run(move || other.shared.transaction(|conn| work(conn, &other))).await?
    }
}

impl Other {
    /// Starts `work` in a read transaction of its own when the pool has a place free
    /// now; `None` when it has none.
    pub fn try_read<T, F>(&self, work: F) -> Option<Beside<Result<T>>>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T> + Send + 'static,
    {
        let shared = self.shared.clone();
        self.pool.try_beside(move || shared.transaction(work))
    }

    /// Histories as rendered by earlier reads of this pool.
    pub fn rendered(&self) -> &Rendered {
        &self.shared.rendered
    }
}

impl Shared {
    /// Runs `work` in a read transaction on an idle connection, or a new one.
    fn transaction<T>(&self, work: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        if self.closed.load(Ordering::Acquire) {
            return Err(crate::error::Error::StorageUnavailable("the database is closed".into()));
        }
        let pooled = lock(&self.idle).pop();
        let conn = match pooled {
            Some(conn) => conn,
            None => schema::open_reader(&self.path, self.settings, self.mode)?,
        };
        let result = conn.execute_batch("BEGIN").map_err(sql).and_then(|()| work(&conn));
        let ended = conn.execute_batch("COMMIT");
        let mut idle = lock(&self.idle);
        if ended.is_ok() && idle.len() < IDLE_READERS && !self.closed.load(Ordering::Acquire) {
            idle.push(conn);
        }
        result
    }
}
