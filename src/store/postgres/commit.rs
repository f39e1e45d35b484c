//! Writes, grouped (`Committer`): `WRITERS` tasks take jobs from one queue, and each commits what it
//! took (up to `MAX_GROUP` jobs that queued meanwhile) in one transaction, each job in its
//! own savepoint so that a refused job leaves nothing behind. A job's reply is sent only
//! after its transaction committed; if the commit fails, every job in it fails with 1006.
//!
//! Jobs take row locks (`SELECT … FOR UPDATE` on the sessions they change) rather than
//! running SERIALIZABLE: writers of different sessions never wait for each other, writers
//! of one session queue on its row, and nothing is refused for a conflict that did not
//! happen. Two groups that lock the same rows in opposite orders can deadlock; PostgreSQL
//! then fails one statement, and that job alone is rolled back to its savepoint and run
//! again, so the others in its group are not lost.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Mutex, mpsc, oneshot};

use crate::error::{Error, Result};
use crate::store::postgres::errors::pg;
use crate::store::postgres::pool::Connections;
use crate::store::postgres::tx::Pg;
use crate::store::sql::jobs::{Done, Edit};

/// Tasks committing at once (each on its own connection).
const WRITERS: usize = 4;
/// The most jobs one transaction takes.
const MAX_GROUP: usize = 256;
/// How often a job that lost a deadlock is run again.
const RETRIES: u32 = 8;

/// An edit waiting for its turn, and where its answer goes once its group committed.
struct Queued {
    edit: Edit,
    reply: oneshot::Sender<Result<Done>>,
}

#[derive(Clone)]
pub struct Committer {
    tx: mpsc::UnboundedSender<Queued>,
}

fn stopped() -> Error {
    Error::StorageUnavailable("the database writer has stopped".into())
}

impl Committer {
    /// Starts the writer tasks on the current runtime; they end when every `Committer` is
    /// dropped.
    pub fn spawn(connections: Arc<Connections>, schema: Arc<str>) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        let rx = Arc::new(Mutex::new(rx));
        for _ in 0..WRITERS {
            tokio::spawn(run(connections.clone(), schema.clone(), rx.clone()));
        }
        Committer { tx }
    }

    /// Runs `edit` in a write transaction; its answer once that transaction committed.
    /// It may run more than once (after a deadlock), each time from a clean savepoint.
    pub async fn write(&self, edit: Edit) -> Result<Done> {
        let (reply, answer) = oneshot::channel();
        self.tx.send(Queued { edit, reply }).map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }
}

async fn run(connections: Arc<Connections>, schema: Arc<str>, rx: Arc<Mutex<mpsc::UnboundedReceiver<Queued>>>) {
    loop {
        let group = {
            let mut rx = rx.lock().await;
            let Some(first) = rx.recv().await else { return };
            let mut group = vec![first];
            while group.len() < MAX_GROUP {
                match rx.try_recv() {
                    Ok(job) => group.push(job),
                    Err(_) => break,
                }
            }
            group
        };
        commit_group(&connections, &schema, group).await;
    }
}

/// Whether PostgreSQL refused a statement only because of another transaction
/// (deadlock_detected, serialization_failure): worth running again.
pub fn lost_a_race(e: &Error) -> bool {
    matches!(e, Error::StorageUnavailable(m) if m.ends_with("(40P01)") || m.ends_with("(40001)"))
}

async fn commit_group(connections: &Connections, schema: &Arc<str>, group: Vec<Queued>) {
    let db = match connections.get().await {
        Ok(db) => db,
        Err(e) => {
            for job in group {
                let _ = job.reply.send(Err(e.clone()));
            }
            return;
        }
    };
    // Each step ends the last job's savepoint and opens the next one in one round trip
    // (`RELEASE job; SAVEPOINT job`); the transaction opens with the first savepoint and
    // commits with the last release.
    let mut step = "BEGIN; SAVEPOINT job".to_owned();
    let total = group.len();
    let mut done = Vec::with_capacity(total);
    let mut broken: Option<Error> = None;
    for (i, job) in group.into_iter().enumerate() {
        if let Some(e) = &broken {
            done.push((job.reply, Err(e.clone())));
            continue;
        }
        let mut attempt = 0;
        let outcome = loop {
            if let Err(e) = db.batch_execute(&step).await {
                let e = pg(e);
                broken = Some(e.clone());
                break Err(e);
            }
            let outcome = job.edit.clone().apply(&Pg::new(&db, schema.clone())).await;
            let close = if outcome.is_ok() { "RELEASE job" } else { "ROLLBACK TO job; RELEASE job" };
            match outcome {
                Err(e) if lost_a_race(&e) && attempt < RETRIES => {
                    attempt += 1;
                    tokio::time::sleep(Duration::from_millis(1 << attempt.min(6))).await;
                    step = format!("{close}; SAVEPOINT job");
                }
                outcome => {
                    step = if i + 1 == total { format!("{close}; COMMIT") } else { format!("{close}; SAVEPOINT job") };
                    break outcome;
                }
            }
        };
        done.push((job.reply, outcome));
    }
    let committed = match broken {
        Some(e) => Err(e),
        None => db.batch_execute(&step).await.map_err(pg),
    };
    if let Err(e) = &committed {
        tracing::error!(error = %e, "a write transaction failed; its requests did not take effect");
        let _ = db.batch_execute("ROLLBACK").await;
    }
    for (reply, outcome) in done {
        let outcome = match (&committed, outcome) {
            (Err(e), Ok(_)) => Err(e.clone()),
            (_, outcome) => outcome,
        };
        let _ = reply.send(outcome);
    }
}
