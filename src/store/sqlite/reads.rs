//! Reads on read-only connections off the async thread: at most `READERS` at once (a
//! bounded pool: threads and file descriptors do not grow with the number of concurrent
//! requests), at most `IDLE_READERS` kept open between reads. Each read is one
//! transaction, so it sees one snapshot.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use rusqlite::Connection;

use crate::error::Result;
use crate::lock;
use crate::pool::Pool;
use crate::store::sqlite::errors::sql;
use crate::store::sqlite::schema::{self, Mode, Settings};

/// How many reads run at once, each on its own connection and thread.
const READERS: usize = 8;
/// How many read connections stay open while no read needs them.
const IDLE_READERS: usize = 2;

pub struct Readers {
    path: PathBuf,
    settings: Settings,
    mode: Mode,
    pool: Pool,
    idle: Arc<Mutex<Vec<Connection>>>,
    closed: Arc<AtomicBool>,
}

impl Readers {
    /// The pool, keeping `first` (a connection already open) for its first read.
    pub fn new(path: PathBuf, settings: Settings, mode: Mode, first: Connection) -> Self {
        let idle = Arc::new(Mutex::new(vec![first]));
        Readers { path, settings, mode, pool: Pool::new("sqlite reader", READERS), idle, closed: Arc::default() }
    }

    /// Closes the idle connections; reads after it fail with 1006.
    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
        lock(&self.idle).clear();
    }

    /// Runs `work` in a read transaction (one snapshot) on a blocking thread.
    pub async fn read<T, F>(&self, work: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T> + Send + 'static,
    {
        let (idle, path, settings, mode) = (self.idle.clone(), self.path.clone(), self.settings, self.mode);
        if self.closed.load(Ordering::Acquire) {
            return Err(crate::error::Error::StorageUnavailable("the database is closed".into()));
        }
        self.pool
            .run(move || {
                let pooled = lock(&idle).pop();
                let conn = match pooled {
                    Some(conn) => conn,
                    None => schema::open_reader(&path, settings, mode)?,
                };
                let result = conn.execute_batch("BEGIN").map_err(sql).and_then(|()| work(&conn));
                let ended = conn.execute_batch("COMMIT");
                let mut idle = lock(&idle);
                if ended.is_ok() && idle.len() < IDLE_READERS {
                    idle.push(conn);
                }
                result
            })
            .await?
    }
}
