//! The change log: a row per committed change, written in the change's own transaction,
//! so that every process on the database can tell its watchers. A poller thread, started
//! by the first watcher from the log's newest row at that moment (so no later change is
//! missed), checks `PRAGMA data_version` every 50 ms, which costs no disk read while
//! nothing changes, and reads the new rows when something did.

use std::sync::Weak;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rusqlite::{Connection, params};

use crate::error::Result;
use crate::store::feed::{Change, ChangeKind, Feed};
use crate::store::sqlite::errors::sql;

/// How often the poller looks for changes of other processes.
const POLL: Duration = Duration::from_millis(50);
/// How many rows the log keeps behind its newest.
const KEEP: i64 = 10_000;

/// Logs a change, inside the transaction that made it.
pub fn record(c: &Connection, session_id: &str, revision: u64, kind: ChangeKind, message_count: u64) -> Result<()> {
    c.prepare_cached("INSERT INTO changes (session_id, revision, kind, message_count) VALUES (?1, ?2, ?3, ?4)")
        .and_then(|mut s| s.execute(params![session_id, revision as i64, kind.as_str(), message_count as i64]))
        .map_err(sql)?;
    let seq = c.last_insert_rowid();
    if seq % 1000 == 0 {
        c.prepare_cached("DELETE FROM changes WHERE seq <= ?1")
            .and_then(|mut s| s.execute([seq - KEEP]))
            .map_err(sql)?;
    }
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
