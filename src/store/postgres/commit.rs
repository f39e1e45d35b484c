//! Writes, grouped (`Committer`): each writer task has a queue of its own, and an edit
//! goes to the queue its session names (an edit without one, to the first), so that the
//! writes of one session are applied in the order they were queued, by one writer. Each
//! writer commits what it took (up to `MAX_GROUP` jobs that queued meanwhile) in one
//! transaction, each job in its own savepoint so that a refused job leaves nothing
//! behind; appends pipelined on one session thus share a transaction (the writer calls
//! `store::queued::signal`, as SQLite's does), and those queued back to back go as one
//! run in one savepoint, every row of them in one round trip (`edits::append_run`), as
//! creates and updates queued back to back go as one in a few (`edits::create_run`,
//! `edits::update_run`); a run that fails is rolled back and its jobs applied one by one.
//! A job's reply is sent only after its transaction committed; if the commit fails, every
//! job in it fails with 1006. A transaction in which the server said it will not take
//! writes (25006 on a standby: `errors::refuses_writes`) ends its connection, closed
//! instead of returned to the pool.
//!
//! Jobs take row locks (`SELECT … FOR UPDATE` on the sessions they change) rather than
//! running SERIALIZABLE: writers of different sessions never wait for each other, writers
//! of one session queue on its row, and nothing is refused for a conflict that did not
//! happen. Two groups that lock the same rows in opposite orders can deadlock; PostgreSQL
//! then fails one statement, and that job alone is rolled back to its savepoint. Run again
//! in the same transaction, it would wait again for the other, which waits for rows this
//! transaction locked for the jobs before it: so those jobs commit first, and the job and
//! those after it go on in the next transaction. A job first in its transaction holds no
//! such rows, and is run again where it is.

use std::collections::VecDeque;
use std::hash::{BuildHasher as _, RandomState};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot};

use crate::error::{Error, Result};
use crate::store::postgres::changes;
use crate::store::postgres::errors::{pg as pg_error, refuses_writes};
use crate::store::postgres::pool::Connections;
use crate::store::postgres::rows::{Db, Statements};
use crate::store::postgres::tx::{Carry, Pg};
use crate::store::sql::jobs::{Done, Edit, Run, apply_run};

/// The most jobs one transaction takes.
const MAX_GROUP: usize = 256;
/// How many turns of the runtime in a row a writer waits for no new job (see `run`).
const GATHER_TURNS: u32 = 4;
/// How often a writer removes old rows of the change table.
const PRUNE_EVERY: Duration = Duration::from_secs(60);
/// How often a job that lost a deadlock is run again.
const RETRIES: u32 = 8;

/// An edit waiting for its turn, and where its answer goes once its group committed.
struct Queued {
    edit: Edit,
    reply: oneshot::Sender<Result<Done>>,
}

#[derive(Clone)]
pub struct Committer {
    queues: Arc<[mpsc::UnboundedSender<Queued>]>,
    hasher: RandomState,
}

fn stopped() -> Error {
    Error::StorageUnavailable("the database writer has stopped".into())
}

impl Committer {
    /// Starts `writers` tasks on the current runtime (each holds a connection while it
    /// commits); they end when every `Committer` is dropped. A write waits up to
    /// `lock_timeout` for another writer's row lock, then fails with 1006.
    pub fn spawn(connections: Arc<Connections>, schema: Arc<str>, writers: usize, lock_timeout: Duration) -> Self {
        // Per transaction, not per connection: behind a pooler the next transaction may
        // run on another server connection.
        let opening: Arc<str> = format!(
            "BEGIN; SET LOCAL lock_timeout = {}; SAVEPOINT job",
            lock_timeout.as_millis().min(i32::MAX as u128)
        )
        .into();
        let queues = (0..writers.max(1))
            .map(|_| {
                let (tx, rx) = mpsc::unbounded_channel();
                tokio::spawn(run(connections.clone(), schema.clone(), opening.clone(), rx));
                tx
            })
            .collect();
        Committer { queues, hasher: RandomState::new() }
    }

    /// Runs `edit` in a write transaction; its answer once that transaction committed.
    /// It may run more than once (after a deadlock), each time from a clean savepoint.
    pub async fn write(&self, edit: Edit) -> Result<Done> {
        let queue = edit.session_key().map(|key| (self.hasher.hash_one(key) % self.queues.len() as u64) as usize);
        let (reply, answer) = oneshot::channel();
        self.queues[queue.unwrap_or(0)].send(Queued { edit, reply }).map_err(|_| stopped())?;
        if queue.is_some() {
            // Behind every write of this session queued before it: the next request on
            // the session may queue its own now.
            crate::store::queued::signal();
        }
        answer.await.map_err(|_| stopped())?
    }
}

async fn run(
    connections: Arc<Connections>,
    schema: Arc<str>,
    opening: Arc<str>,
    mut rx: mpsc::UnboundedReceiver<Queued>,
) {
    // None: not yet, so a process prunes after its first commit, not a minute later.
    let mut pruned: Option<Instant> = None;
    let mut last = 0;
    let carry = Carry::default();
    while let Some(first) = rx.recv().await {
        // The replies to a group free the places of the requests behind it, which then
        // queue their writes within a few turns of the runtime: after a group of several,
        // those turns are waited for, rather than the first of them committed alone.
        let mut idle = 0;
        while rx.len() + 1 < last && idle < GATHER_TURNS {
            let before = rx.len();
            tokio::task::yield_now().await;
            idle = if rx.len() > before { 0 } else { idle + 1 };
        }
        let mut group = vec![first];
        while group.len() < MAX_GROUP {
            match rx.try_recv() {
                Ok(job) => group.push(job),
                Err(_) => break,
            }
        }
        last = group.len();
        let mut left: VecDeque<Queued> = group.into();
        while !left.is_empty() {
            left = commit_group(&connections, &schema, &opening, &carry, left).await;
        }
        // Whoever writes removes the change table's old rows (`changes::prune`).
        if pruned.is_none_or(|at| at.elapsed() >= PRUNE_EVERY) {
            pruned = Some(Instant::now());
            if let Ok(db) = connections.get().await
                && let Err(e) = changes::prune(Db::new(&db, &schema)).await
            {
                tracing::warn!(error = %e, "cannot remove old rows of the change table");
                if refuses_writes(&e) {
                    connections.discard(db, &e);
                }
            }
        }
    }
}

/// Whether PostgreSQL refused a statement only because of another transaction
/// (deadlock_detected, serialization_failure): worth running again.
pub fn lost_a_race(e: &Error) -> bool {
    matches!(e, Error::StorageUnavailable(m) if m.ends_with("(40P01)") || m.ends_with("(40001)"))
}

/// Applies the jobs of `pending` in one transaction and answers them once it ended.
/// Returns the jobs it left for a transaction of their own: those after a job that lost a
/// deadlock to a transaction waiting for a row this one locked before that job (run again
/// in this transaction, the job would only wait for that transaction again).
async fn commit_group(
    connections: &Connections,
    schema: &str,
    opening: &str,
    carry: &Carry,
    mut pending: VecDeque<Queued>,
) -> VecDeque<Queued> {
    let db = match connections.begin(opening, None).await {
        Ok(db) => db,
        Err(e) => {
            for job in pending {
                let _ = job.reply.send(Err(e.clone()));
            }
            return VecDeque::new();
        }
    };
    // Each step ends the last job's savepoint and opens the next one in one round trip
    // (`RELEASE job; SAVEPOINT job`); the transaction opened with the first savepoint and
    // commits with the last release.
    let mut step = String::new();
    let statements = Statements::default();
    let pg = Pg::in_group(&db, schema, carry, &statements);
    let mut done = Vec::with_capacity(pending.len());
    let mut later = VecDeque::new();
    // How many jobs at the front of `pending` are to be applied one by one.
    let mut alone = 0;
    let mut broken: Option<Error> = None;
    while let Some(job) = pending.pop_front() {
        if let Some(e) = &broken {
            done.push((job.reply, Err(e.clone())));
            continue;
        }
        // The appends to one session in the group go as one run, in one round trip; the
        // creates, in a few.
        let run = match job.edit.run() {
            Some(run) if alone == 0 => take_run(&mut pending, run, job.edit.session_key()),
            _ => Vec::new(),
        };
        if !run.is_empty() {
            let mut run: Vec<Queued> = std::iter::once(job).chain(run).collect();
            carry.offer();
            let (stepped, outcome) = futures_util::future::join(
                take_step(&db, &step),
                apply_run(&pg, run.iter().map(|q| q.edit.clone()).collect()),
            )
            .await;
            if let Err(e) = stepped {
                carry.settle(false);
                broken = Some(e);
                run.into_iter().rev().for_each(|q| pending.push_front(q));
                continue;
            }
            carry.settle(outcome.is_ok());
            // What the run did not take goes back, its first job to be applied alone; a
            // run that failed is rolled back and each of its jobs applied alone.
            let (close, left) = match outcome {
                Ok(answers) => {
                    let taken = answers.len();
                    let rest = run.split_off(taken);
                    done.extend(run.into_iter().map(|q| q.reply).zip(answers));
                    alone = usize::from(!rest.is_empty());
                    ("RELEASE job", rest)
                }
                Err(_) => {
                    alone = run.len();
                    ("ROLLBACK TO job; RELEASE job", run)
                }
            };
            left.into_iter().rev().for_each(|q| pending.push_front(q));
            step = next_step(close, pending.is_empty());
            continue;
        }
        alone = alone.saturating_sub(1);
        // Rows this transaction locked for the jobs before this one, which another
        // transaction may be waiting for.
        let holds_rows = !done.is_empty();
        let mut attempt = 0;
        let outcome = loop {
            carry.offer();
            // The step that closes the last job's savepoint and opens this one's goes out
            // with the job's first statements (pipelined on the connection, in order).
            let (stepped, outcome) =
                futures_util::future::join(take_step(&db, &step), job.edit.clone().apply(&pg)).await;
            if let Err(e) = stepped {
                carry.settle(false);
                broken = Some(e.clone());
                break Err(e);
            }
            carry.settle(outcome.is_ok());
            let close = if outcome.is_ok() { "RELEASE job" } else { "ROLLBACK TO job; RELEASE job" };
            match outcome {
                // What this transaction did so far commits, and frees the rows the other
                // waits for; the job and those after it start the next transaction.
                Err(e) if lost_a_race(&e) && holds_rows => {
                    step = next_step(close, true);
                    break Err(e);
                }
                Err(e) if lost_a_race(&e) && attempt < RETRIES => {
                    attempt += 1;
                    tokio::time::sleep(Duration::from_millis(1 << attempt.min(6))).await;
                    step = next_step(close, false);
                }
                outcome => {
                    step = next_step(close, pending.is_empty());
                    break outcome;
                }
            }
        };
        match outcome {
            Err(e) if lost_a_race(&e) && holds_rows => {
                tracing::debug!(error = %e, "a write lost a deadlock; committing the writes before it first");
                later = std::mem::take(&mut pending);
                later.push_front(job);
                break;
            }
            outcome => done.push((job.reply, outcome)),
        }
    }
    // Before the transaction ends: no prepared statement may outlive it.
    statements.close();
    let committed = match broken {
        Some(e) => Err(e),
        None => db.batch_execute(&step).await.map_err(pg_error),
    };
    carry.end(committed.is_ok());
    if let Err(e) = &committed {
        tracing::error!(error = %e, "a write transaction failed; its requests did not take effect");
        let _ = db.batch_execute("ROLLBACK").await;
    }
    // A server that will not take writes (a standby) is not asked again on this
    // connection: the next transaction connects anew.
    let outcomes = done.iter().filter_map(|(_, outcome)| outcome.as_ref().err());
    if let Some(e) = committed.as_ref().err().into_iter().chain(outcomes).find(|e| refuses_writes(e)).cloned() {
        connections.discard(db, &e);
    }
    for (reply, outcome) in done {
        let outcome = match (&committed, outcome) {
            (Err(e), Ok(_)) => Err(e.clone()),
            (_, outcome) => outcome,
        };
        let _ = reply.send(outcome);
    }
    later
}

/// The edits of `run` queued after one of it (to `first`, the session it names), taken
/// out of `pending`. Jobs of other sessions may be passed (the connection let them all
/// start, so none waits for another), up to a job with no session: appends to a session,
/// up to another edit of it; creates and updates, but not one of a session a job passed
/// names (that job comes first), nor an update of a session the run holds already.
fn take_run(pending: &mut VecDeque<Queued>, run: Run<'_>, first: Option<&str>) -> Vec<Queued> {
    let mut taken = Vec::new();
    let mut passed = std::collections::HashSet::new();
    let mut held: std::collections::HashSet<&str> = first.into_iter().collect();
    for (i, q) in pending.iter().enumerate() {
        let session = q.edit.session_key();
        match (run, q.edit.run(), session) {
            (Run::Appends(_), Some(r), _) if r == run => taken.push(i),
            (Run::Appends(s), _, Some(other)) if other != s => {}
            (Run::Creates, Some(Run::Creates), _) if session.is_none_or(|s| !passed.contains(s)) => taken.push(i),
            (Run::Updates, Some(Run::Updates), Some(s)) if !passed.contains(s) && held.insert(s) => taken.push(i),
            (Run::Creates | Run::Updates, _, Some(other)) => _ = passed.insert(other),
            _ => break,
        }
    }
    // Removed from the back, so that each index still points at its job.
    let mut run: Vec<Queued> = taken.into_iter().rev().filter_map(|i| pending.remove(i)).collect();
    run.reverse();
    run
}

/// Closes the last job's savepoint (`close`) and opens the next job's, or commits after
/// the last job.
fn next_step(close: &str, last: bool) -> String {
    if last { format!("{close}; COMMIT") } else { format!("{close}; SAVEPOINT job") }
}

/// Sends the step before a job (none before the first: the opening made its savepoint).
async fn take_step(db: &deadpool_postgres::ClientWrapper, step: &str) -> Result<()> {
    if step.is_empty() { Ok(()) } else { db.batch_execute(step).await.map_err(pg_error) }
}
