//! This process's connections to PostgreSQL: at most `pool_max` of them, replaced when
//! broken or closed by the server while idle, and closed, never reused, when the server
//! said it will not take writes (`discard`). A request waits for a free one, and for a
//! server (or pooler) that refuses a new connection because it has too many, up to the
//! busy timeout; an unreachable server is reported at once (with back-off between
//! attempts), in PostgreSQL's own words.

use std::time::{Duration, Instant};

use deadpool_postgres::{Object, Pool, PoolError, TimeoutType, Timeouts};

use crate::error::{Error, Result};
use crate::lock;
use crate::store::postgres::errors::describe;

/// The pool, how long a request waits for it, and the back-off that keeps requests from
/// waiting on an unreachable server.
pub struct Connections {
    pool: Pool,
    backoff: Backoff,
    shown: String,
    patience: Duration,
    pool_max: usize,
}

/// A connection refused because the server, or the pooler in front of it, has as many
/// as it takes (53300 `too many clients`; PgBouncer's `no more connections allowed`):
/// waited out, not reported.
pub fn full(e: &tokio_postgres::Error) -> bool {
    match e.as_db_error() {
        Some(db) => db.code().code() == "53300" || db.message().starts_with("no more connections allowed"),
        None => false,
    }
}

/// How long to wait before asking again for a connection the server refused as full.
pub fn pause(attempt: u32) -> Duration {
    Duration::from_millis((5u64 << attempt.min(7)).min(500))
}

impl Connections {
    pub fn new(pool: Pool, shown: String, patience: Duration, pool_max: usize) -> Self {
        Connections { pool, backoff: Backoff::default(), shown, patience, pool_max }
    }

    /// How long a request waits for a connection, a lock or the server: the busy timeout.
    pub fn patience(&self) -> Duration {
        self.patience
    }

    /// A connection: a free one of the pool, or a new one while the pool is not full;
    /// 1006 at once while the server is unreachable, and after the busy timeout when
    /// none became free or the server kept refusing new ones.
    pub async fn get(&self) -> Result<Object> {
        if let Err((wait, why)) = self.backoff.check() {
            return Err(Error::StorageUnavailable(format!(
                "cannot connect to PostgreSQL at {}: {why}; the next attempt is in {} ms",
                self.shown,
                wait.as_millis()
            )));
        }
        let deadline = Instant::now() + self.patience;
        let mut attempt = 0;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let timeouts = Timeouts {
                wait: Some(left),
                create: Some(left.max(Duration::from_secs(10))),
                recycle: Some(Duration::from_secs(10)),
            };
            match self.pool.timeout_get(&timeouts).await {
                Ok(db) => {
                    self.backoff.succeeded();
                    return Ok(db);
                }
                Err(PoolError::Backend(e)) if full(&e) => {
                    if Instant::now() + pause(attempt) >= deadline {
                        return Err(Error::StorageUnavailable(format!(
                            "PostgreSQL at {} refused new connections for {} ms: {}",
                            self.shown,
                            self.patience.as_millis(),
                            describe(&e)
                        )));
                    }
                    tokio::time::sleep(pause(attempt)).await;
                    attempt += 1;
                }
                Err(PoolError::Timeout(TimeoutType::Wait)) => {
                    return Err(Error::StorageUnavailable(format!(
                        "no connection to PostgreSQL at {} became free within {} ms (pool_max={})",
                        self.shown,
                        self.patience.as_millis(),
                        self.pool_max
                    )));
                }
                Err(e) => {
                    let why = match &e {
                        PoolError::Backend(e) => describe(e),
                        other => other.to_string(),
                    };
                    self.backoff.failed(&why);
                    tracing::warn!(error = %why, "cannot connect to PostgreSQL");
                    return Err(Error::StorageUnavailable(format!(
                        "cannot connect to PostgreSQL at {}: {why}",
                        self.shown
                    )));
                }
            }
        }
    }

    /// A connection on which `opening` (the statements that open a transaction) has run;
    /// a connection the server closed meanwhile is replaced once. Given up at `by`, when
    /// there is one: a connection whose opening was not answered by then (the pooler
    /// found no server for it, or the server does not answer) is closed, never put back
    /// in the pool with a statement in flight.
    pub async fn begin(&self, opening: &str, by: Option<tokio::time::Instant>) -> Result<Object> {
        let late = || Error::StorageUnavailable(format!("no answer from PostgreSQL at {}", self.shown));
        let mut replaced = false;
        loop {
            let db = within(by, self.get()).await.ok_or_else(late)??;
            match within(by, db.batch_execute(opening)).await {
                Some(Ok(())) => return Ok(db),
                Some(Err(e)) if !replaced && (e.is_closed() || db.is_closed()) => {
                    drop(Object::take(db));
                    replaced = true;
                }
                Some(Err(e)) => return Err(crate::store::postgres::errors::pg(e)),
                None => {
                    drop(Object::take(db));
                    return Err(late());
                }
            }
        }
    }

    /// Closes `db`, on which the server said it will not take writes (a standby, a
    /// server shutting down: `errors::refuses_writes`), and the idle connections to the
    /// same servers: none goes back to the pool, and the next request connects anew,
    /// through the URL's hosts and `target_session_attrs`, to one that takes writes.
    pub fn discard(&self, db: Object, why: &Error) {
        drop(Object::take(db));
        self.pool.retain(|_, _| false);
        tracing::warn!(error = %why, "PostgreSQL refused a write; its connections are closed and new ones will be made");
    }
}

/// `work`'s outcome, or `None` when `by` came first.
pub async fn within<F: std::future::Future>(by: Option<tokio::time::Instant>, work: F) -> Option<F::Output> {
    match by {
        Some(by) => tokio::time::timeout_at(by, work).await.ok(),
        None => Some(work.await),
    }
}

/// Connection attempts after a failure wait: 100 ms, doubling to 5 s. Meanwhile requests
/// fail at once with 1006, saying why the last attempt failed, instead of piling up on
/// an unreachable server.
pub struct Backoff {
    state: std::sync::Mutex<(Option<Instant>, Duration, String)>,
}

const FIRST_WAIT: Duration = Duration::from_millis(100);
const LONGEST_WAIT: Duration = Duration::from_secs(5);

impl Default for Backoff {
    fn default() -> Self {
        Backoff { state: std::sync::Mutex::new((None, FIRST_WAIT, String::new())) }
    }
}

impl Backoff {
    /// `Err` with when to retry and why the last attempt failed, while waiting after a
    /// failure.
    pub fn check(&self) -> std::result::Result<(), (Duration, String)> {
        let state = lock(&self.state);
        match state.0 {
            Some(at) if Instant::now() < at => Err((at - Instant::now(), state.2.clone())),
            _ => Ok(()),
        }
    }

    pub fn failed(&self, why: &str) {
        let mut state = lock(&self.state);
        let wait = state.1;
        *state = (Some(Instant::now() + wait), (wait * 2).min(LONGEST_WAIT), why.to_owned());
    }

    pub fn succeeded(&self) {
        let mut state = lock(&self.state);
        if state.0.is_some() {
            tracing::info!("connected to PostgreSQL again");
        }
        *state = (None, FIRST_WAIT, String::new());
    }
}
