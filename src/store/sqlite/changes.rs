//! The change log: a row per committed change, written in the change's own transaction,
//! so that every process on the database can tell its watchers. A poller thread, started
//! by the first watcher from the log's newest row at that moment (so no later change is
//! missed), checks `PRAGMA data_version` every 50 ms, which costs no disk read while
//! nothing changes, and reads the new rows when something did.
//!
//! The log keeps its last `KEEP` rows and, for `KEEP_LAST` seconds, each session's last
//! change behind them, so that a process whose poller did not run meanwhile (stopped
//! with `^Z` while another process wrote on) is told, when it reads again, the last
//! change of every session changed meanwhile. Every `PRUNE_EVERY`th row prunes the rows
//! that have just passed the last `KEEP` (`prune`): those a later change of their
//! session follows, and the rows of their sessions that they follow. A draft is saved
//! without its session's lock, so its row may come after an append it does not follow:
//! a draft follows only drafts.

use std::sync::Weak;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rusqlite::{Connection, params};

use crate::error::Result;
use crate::store::feed::{Change, ChangeKind, Feed};
use crate::store::sqlite::errors::sql;

/// How often the poller looks for changes of other processes.
const POLL: Duration = Duration::from_millis(50);
/// How many rows the log keeps behind its newest, every one of them.
const KEEP: i64 = 10_000;
/// How many rows pass the last `KEEP` between two prunes.
const PRUNE_EVERY: i64 = 1_000;
/// How long, in seconds, a session's last change is kept behind the last `KEEP` rows.
const KEEP_LAST: i64 = 30 * 24 * 60 * 60;

/// Logs a change, inside the transaction that made it.
pub fn record(c: &Connection, session_id: &str, revision: u64, kind: ChangeKind, message_count: u64) -> Result<()> {
    c.prepare_cached(
        "INSERT INTO changes (session_id, revision, kind, message_count, at) VALUES (?1, ?2, ?3, ?4, unixepoch())",
    )
    .and_then(|mut s| s.execute(params![session_id, revision as i64, kind.as_str(), message_count as i64]))
    .map_err(sql)?;
    let seq = c.last_insert_rowid();
    if seq % PRUNE_EVERY == 0 {
        prune(c, seq - KEEP).map_err(sql)?;
    }
    Ok(())
}

/// Removes what the rows `bound - PRUNE_EVERY < seq <= bound`, which have just passed
/// the last `KEEP`, no longer need: the rows before them that they follow (each
/// session's last change kept by an earlier prune), each of them that a later row of its
/// session follows, and every row older than `KEEP_LAST` up to `bound`. Each is a walk
/// of those rows with an index probe for each, or of the rows it removes.
fn prune(c: &Connection, bound: i64) -> rusqlite::Result<()> {
    let passing = params![bound - PRUNE_EVERY, bound];
    c.prepare_cached(
        "DELETE FROM changes WHERE seq IN ( \
             SELECT older.seq FROM changes AS passing \
             JOIN changes AS older ON older.session_id = passing.session_id AND older.seq <= ?1 \
             WHERE passing.seq > ?1 AND passing.seq <= ?2 AND (passing.kind <> 'draft' OR older.kind = 'draft'))",
    )?
    .execute(passing)?;
    c.prepare_cached(
        "DELETE FROM changes WHERE seq > ?1 AND seq <= ?2 AND EXISTS ( \
             SELECT 1 FROM changes AS later \
             WHERE later.session_id = changes.session_id AND later.seq > changes.seq \
               AND (later.kind <> 'draft' OR changes.kind = 'draft'))",
    )?
    .execute(passing)?;
    // Rows are in the order of their time: the walk stops at the first one kept.
    c.prepare_cached(
        "DELETE FROM changes WHERE seq <= ?1 AND seq < coalesce( \
             (SELECT seq FROM changes WHERE at >= unixepoch() - ?2 ORDER BY seq LIMIT 1), ?1 + 1)",
    )?
    .execute(params![bound, KEEP_LAST])?;
    Ok(())
}

pub fn newest(c: &Connection) -> rusqlite::Result<i64> {
    c.query_row("SELECT coalesce(max(seq), 0) FROM changes", [], |r| r.get(0))
}

fn since(c: &Connection, after: i64) -> rusqlite::Result<Vec<(i64, Change)>> {
    let mut stmt = c.prepare_cached(
        "SELECT seq, session_id, revision, kind, message_count FROM changes WHERE seq > ?1 ORDER BY seq",
    )?;
    let rows = stmt.query_map([after], |r| {
        let kind: String = r.get(3)?;
        Ok((
            r.get::<_, i64>(0)?,
            kind,
            Change {
                session_id: r.get(1)?,
                revision: r.get::<_, i64>(2)? as u64,
                kind: ChangeKind::Draft,
                message_count: r.get::<_, i64>(4)? as u64,
            },
        ))
    })?;
    let mut out = Vec::new();
    for row in rows {
        let (seq, kind, mut change) = row?;
        if let Some(kind) = ChangeKind::parse(&kind) {
            change.kind = kind;
            out.push((seq, change));
        }
    }
    Ok(out)
}

/// Polls the log on `conn` from the row after `after` and publishes what it finds to
/// `feed`'s watchers (passing over what nobody watches), while `feed` lives and until
/// `stop`; runs on a thread of its own.
pub fn poll(conn: Connection, feed: Weak<Feed>, after: i64, stop: &AtomicBool) {
    let mut seen = (None, after); // (data_version, last seq)
    while let Some(feed) = feed.upgrade().filter(|_| !stop.load(Ordering::Acquire)) {
        if let Err(e) = step(&conn, &feed, &mut seen) {
            tracing::warn!(error = %e, "cannot read the change log");
        }
        drop(feed);
        std::thread::sleep(POLL);
    }
}

fn step(conn: &Connection, feed: &Feed, seen: &mut (Option<i64>, i64)) -> rusqlite::Result<()> {
    let version: i64 = conn.query_row("PRAGMA data_version", [], |r| r.get(0))?;
    if seen.0 == Some(version) {
        return Ok(());
    }
    let watched = feed.watched();
    for (seq, change) in since(conn, seen.1)? {
        if watched {
            feed.publish(change);
        }
        seen.1 = seq;
    }
    seen.0 = Some(version);
    Ok(())
}
