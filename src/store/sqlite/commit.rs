//! The one thread that writes (`Committer`). Jobs queued while a transaction commits are committed
//! together in the next one (group commit), each inside its own savepoint so that a
//! refused job leaves nothing behind. A job's reply is sent only after its transaction
//! committed; if the commit fails, every job in it fails with 1006.
//!
//! Jobs run in the order they were queued, each seeing the effects of those before it
//! (or their absence, when one was refused or its transaction failed). That is what lets
//! an append signal `store::queued` once its job is queued: the next append on its
//! session may then queue its own, and both commit in one transaction, while each reply
//! still waits for its commit.
//!
//! A job may leave what it knows to the job right after it (`carry`), which takes it
//! (`carried`) only if it runs in the same transaction and the job that left it
//! succeeded: 64 appends pipelined on one session then read the session once, not 64
//! times.

use std::any::Any;
use std::cell::RefCell;
use std::panic::{AssertUnwindSafe, catch_unwind};

use rusqlite::Connection;
use tokio::sync::{mpsc, oneshot};

use crate::error::{Error, Result};
use crate::store::sqlite::words;

/// The most jobs one transaction takes.
const MAX_GROUP: usize = 512;

type Output = Box<dyn Any + Send>;
type Work = Box<dyn FnOnce(&Connection) -> Result<Output> + Send>;

struct Job {
    run: Work,
    reply: oneshot::Sender<Result<Output>>,
}

/// What the writer thread is sent: a job, or the end (`Committer::close`).
enum Message {
    Job(Job),
    Close(oneshot::Sender<()>),
}

#[derive(Clone)]
pub struct Committer {
    tx: mpsc::UnboundedSender<Message>,
}

thread_local! {
    /// What the running job left for the next one.
    static LEFT: RefCell<Option<Box<dyn Any>>> = const { RefCell::new(None) };
    /// What the job before the running one left, if it succeeded in this transaction.
    static OFFERED: RefCell<Option<Box<dyn Any>>> = const { RefCell::new(None) };
}

/// Leaves `value` to the next job on this writer: it gets it only if it runs in the same
/// transaction right after this job, and this job succeeds.
pub fn carry<T: Any>(value: T) {
    LEFT.set(Some(Box::new(value)));
}

/// What the job before this one left (`carry`), when it is a `T`.
pub fn carried<T: Any>() -> Option<T> {
    OFFERED.take().and_then(|offered| offered.downcast().ok()).map(|t| *t)
}

fn stopped() -> Error {
    Error::StorageUnavailable("the database writer has stopped".into())
}

impl Committer {
    /// Starts the thread; it ends, checkpointing the log, when every `Committer` is
    /// dropped or one is closed.
    pub fn spawn(conn: Connection) -> std::io::Result<Self> {
        let (tx, rx) = mpsc::unbounded_channel();
        std::thread::Builder::new().name("convo-sqlite-writer".into()).spawn(move || run(conn, rx))?;
        Ok(Committer { tx })
    }

    /// Runs `work` in a write transaction; its result once that transaction committed.
    pub async fn write<T, F>(&self, work: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T> + Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        let run = Box::new(move |conn: &Connection| work(conn).map(|t| Box::new(t) as Output));
        self.tx.send(Message::Job(Job { run, reply })).map_err(|_| stopped())?;
        crate::store::queued::signal();
        let output = answer.await.map_err(|_| stopped())??;
        output.downcast::<T>().map(|t| *t).map_err(|_| Error::Internal("a store job returned the wrong type".into()))
    }

    /// Commits what was queued before, then moves the whole log into the database file
    /// and closes the writer's connection; returns once it is closed. Writes after it
    /// fail with 1006.
    pub async fn close(&self) {
        let (done, closed) = oneshot::channel();
        if self.tx.send(Message::Close(done)).is_ok() {
            let _ = closed.await;
        }
    }
}

fn run(conn: Connection, mut rx: mpsc::UnboundedReceiver<Message>) {
    let mut closing = None;
    while closing.is_none() {
        let mut group = Vec::new();
        match rx.blocking_recv() {
            Some(Message::Job(job)) => group.push(job),
            Some(Message::Close(done)) => closing = Some(done),
            None => break,
        }
        while closing.is_none() && !group.is_empty() && group.len() < MAX_GROUP {
            match rx.try_recv() {
                Ok(Message::Job(job)) => group.push(job),
                Ok(Message::Close(done)) => closing = Some(done),
                Err(_) => break,
            }
        }
        if !group.is_empty() {
            commit_group(&conn, group);
        }
    }
    // Keep the write-ahead log short for the next start; another process may hold it.
    // At a clean end, all of it goes into the file, which then holds every session.
    let checkpoint =
        if closing.is_some() { "PRAGMA wal_checkpoint(TRUNCATE)" } else { "PRAGMA wal_checkpoint(PASSIVE)" };
    if let Err(e) = conn.execute_batch(checkpoint) {
        tracing::debug!(error = %e, "no checkpoint at exit");
    }
    // The last connection to the file closed removes the log, when no other process
    // has the database open.
    if let Err((_, e)) = conn.close() {
        tracing::warn!(error = %e, "the database did not close cleanly");
    }
    if let Some(done) = closing {
        let _ = done.send(());
    }
}

/// Runs one statement through the connection's statement cache: a savepoint per job is
/// then not parsed again for each.
fn cached(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([]).map(drop)
}

fn commit_group(conn: &Connection, group: Vec<Job>) {
    if let Err(e) = conn.execute_batch("BEGIN IMMEDIATE") {
        tracing::warn!(error = %e, "cannot start a write transaction");
        let why = e.to_string();
        for job in group {
            let _ = job.reply.send(Err(Error::StorageUnavailable(why.clone())));
        }
        return;
    }
    let mut done = Vec::with_capacity(group.len());
    let mut broken = None;
    // Nothing is carried from one transaction into the next.
    LEFT.take();
    for job in group {
        if broken.is_some() {
            done.push((job.reply, Err(stopped())));
            continue;
        }
        OFFERED.set(LEFT.take());
        let outcome = match cached(conn, "SAVEPOINT job") {
            Ok(()) => catch_unwind(AssertUnwindSafe(|| (job.run)(conn)))
                .unwrap_or_else(|_| Err(Error::Internal("a store operation panicked".into()))),
            Err(e) => Err(Error::StorageUnavailable(e.to_string())),
        };
        OFFERED.take();
        let closed = match outcome {
            Ok(_) => cached(conn, "RELEASE job"),
            Err(_) => conn.execute_batch("ROLLBACK TO job; RELEASE job"),
        };
        if outcome.is_err() || closed.is_err() {
            // What a job that did not take effect knew is not true.
            LEFT.take();
        }
        if let Err(e) = closed {
            broken = Some(e.to_string());
        }
        done.push((job.reply, outcome));
    }
    let committed = match broken {
        Some(why) => Err(why),
        None => words::flush(conn).and_then(|()| conn.execute_batch("COMMIT")).map_err(|e| e.to_string()),
    };
    if let Err(why) = &committed {
        tracing::error!(error = %why, "a write transaction failed; its requests did not take effect");
        let _ = conn.execute_batch("ROLLBACK");
    }
    for (reply, outcome) in done {
        let outcome = match (&committed, outcome) {
            (Err(why), Ok(_)) => Err(Error::StorageUnavailable(why.clone())),
            (_, outcome) => outcome,
        };
        let _ = reply.send(outcome);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Answer = oneshot::Receiver<Result<Output>>;

    fn job(work: impl FnOnce() -> Result<Option<u32>> + Send + 'static) -> (Job, Answer) {
        let (reply, answer) = oneshot::channel();
        (Job { run: Box::new(move |_| work().map(|t| Box::new(t) as Output)), reply }, answer)
    }

    fn value(answer: Answer) -> Option<u32> {
        *answer.blocking_recv().unwrap().unwrap().downcast::<Option<u32>>().unwrap()
    }

    #[test]
    fn only_the_next_job_of_the_transaction_gets_what_a_job_carried() {
        // The tables a group's commit moves search rows between.
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch("CREATE TABLE message_words (rowid INTEGER PRIMARY KEY, words TEXT)").unwrap();
        words::prepare_writer(&conn).unwrap();
        let (j1, a1) = job(|| {
            carry(1u32);
            Ok(carried::<u32>())
        });
        let (j2, a2) = job(|| {
            let got = carried::<u32>();
            carry(2u32);
            Ok(got)
        });
        let (j3, a3) = job(|| Ok(None));
        let (j4, a4) = job(|| Ok(carried::<u32>()));
        let (j5, a5) = job(|| {
            carry(5u32);
            Err(Error::Internal("refused".into()))
        });
        let (j6, a6) = job(|| {
            carry(6u32);
            Ok(carried::<u32>())
        });
        commit_group(&conn, vec![j1, j2, j3, j4, j5, j6]);
        let (j7, a7) = job(|| Ok(carried::<u32>()));
        commit_group(&conn, vec![j7]);
        assert_eq!(value(a1), None, "nothing before the first job");
        assert_eq!(value(a2), Some(1), "the next job gets it");
        assert_eq!(value(a3), None);
        assert_eq!(value(a4), None, "a job that did not take it passes nothing on");
        assert!(a5.blocking_recv().unwrap().is_err());
        assert_eq!(value(a6), None, "a job that failed passes nothing on");
        assert_eq!(value(a7), None, "nothing crosses into the next transaction");
    }
}
