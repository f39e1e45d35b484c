//! This process's connections to PostgreSQL: a pool that replaces broken ones, and the
//! back-off that keeps requests from waiting on an unreachable server.

use std::time::{Duration, Instant};

use deadpool_postgres::{Object, Pool};

use crate::error::{Error, Result};
use crate::store::postgres::errors::describe;

/// The pool, and the back-off that keeps requests from waiting on an unreachable server.
pub struct Connections {
    pool: Pool,
    backoff: Backoff,
    shown: String,
}

impl Connections {
    pub fn new(pool: Pool, shown: String) -> Self {
        Connections { pool, backoff: Backoff::default(), shown }
    }

    /// A connection, or 1006 at once while the server is unreachable.
    pub async fn get(&self) -> Result<Object> {
        if let Err(wait) = self.backoff.check() {
            return Err(Error::StorageUnavailable(format!(
                "PostgreSQL at {} is unreachable; the next attempt is in {} ms",
                self.shown,
                wait.as_millis()
            )));
        }
        match self.pool.get().await {
            Ok(db) => {
                self.backoff.succeeded();
                Ok(db)
            }
            Err(e) => {
                self.backoff.failed();
                let why = match &e {
                    deadpool_postgres::PoolError::Backend(e) => describe(e),
                    other => other.to_string(),
                };
                tracing::warn!(error = %why, "cannot connect to PostgreSQL");
                Err(Error::StorageUnavailable(format!("cannot connect to PostgreSQL at {}: {why}", self.shown)))
            }
        }
    }
}

/// Connection attempts after a failure wait: 100 ms, doubling to 5 s. Meanwhile requests
/// fail at once with 1006 instead of piling up on an unreachable server.
pub struct Backoff {
    state: std::sync::Mutex<(Option<Instant>, Duration)>,
}

const FIRST_WAIT: Duration = Duration::from_millis(100);
const LONGEST_WAIT: Duration = Duration::from_secs(5);

impl Default for Backoff {
    fn default() -> Self {
        Backoff { state: std::sync::Mutex::new((None, FIRST_WAIT)) }
    }
}

impl Backoff {
    /// `Err` with when to retry, while waiting after a failure.
    pub fn check(&self) -> std::result::Result<(), Duration> {
        let state = self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match state.0 {
            Some(at) if Instant::now() < at => Err(at - Instant::now()),
            _ => Ok(()),
        }
    }

    pub fn failed(&self) {
        let mut state = self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let wait = state.1;
        *state = (Some(Instant::now() + wait), (wait * 2).min(LONGEST_WAIT));
    }

    pub fn succeeded(&self) {
        let mut state = self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if state.0.is_some() {
            tracing::info!("connected to PostgreSQL again");
        }
        *state = (None, FIRST_WAIT);
    }
}
