//! Histories as chains of segments. A message sits at a position counted from the start
//! of its history; a segment holds the positions from its `base` on, and the positions
//! below come from its parent. A session sees positions `[start, len)` of the chain that
//! ends in its own segment. So a fork is one new segment pointing at its parent (O(1)),
//! a trim moves `start`, a clear moves the session to a new segment, and a parent's
//! later changes never show in its forks.

use rusqlite::{Connection, OptionalExtension, params};

use crate::error::{Error, Result};
use crate::session::{Message, Role, Tail};
pub use crate::store::row::{Span, fork_parent};
use crate::store::sqlite::rows::{self, MESSAGE_COLUMNS};
use crate::store::sqlite::schema::sql;
use crate::store::{MessageJson, message_json};

pub fn new_segment(conn: &Connection, parent: Option<i64>, base: u64) -> Result<i64> {
    conn.prepare_cached("INSERT INTO segments (parent, base) VALUES (?1, ?2)")
        .and_then(|mut s| s.insert(params![parent, base as i64]))
        .map_err(sql)
}

fn segment(conn: &Connection, id: i64) -> Result<(Option<i64>, u64)> {
    conn.prepare_cached("SELECT parent, base FROM segments WHERE id = ?1")
        .and_then(|mut s| s.query_row([id], |r| Ok((r.get(0)?, r.get::<_, i64>(1)? as u64))))
        .map_err(sql)
}

/// The spans that serve positions `[start, len)` of the chain ending in `head`, newest
/// first. A chain that comes back to a segment (only a damaged database has one) is an
/// error, not an endless walk.
pub fn spans(conn: &Connection, head: i64, start: u64, len: u64) -> Result<Vec<Span>> {
    let mut spans = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let (mut next, mut hi) = (Some(head), len);
    while let Some(id) = next {
        if !seen.insert(id) {
            return Err(Error::StorageUnavailable(format!("the chain of segment {head} loops at segment {id}")));
        }
        let (parent, base) = segment(conn, id)?;
        if base < hi {
            spans.push(Span { segment: id, lo: base.max(start), hi });
        }
        if base <= start {
            break;
        }
        (next, hi) = (parent, base);
    }
    Ok(spans)
}

/// The messages at positions `[from, to)`, oldest first, images loaded.
pub fn read(conn: &Connection, spans: &[Span], from: u64, to: u64) -> Result<Vec<Message>> {
    let mut out = Vec::new();
    forwards(conn, spans, from, to, |row| {
        let mut message = rows::message(row).map_err(sql)?;
        rows::load_images(conn, &mut message)?;
        out.push(message);
        Ok(())
    })?;
    Ok(out)
}

/// `read`, each message as its JSON text (`rows::message_json`); a message with images
/// is read whole and serialized.
pub fn read_json(conn: &Connection, spans: &[Span], from: u64, to: u64) -> Result<Vec<MessageJson>> {
    let mut out = Vec::new();
    forwards(conn, spans, from, to, |row| {
        let json = match rows::message_json(row).map_err(sql)? {
            Some(json) => json,
            None => {
                let mut message = rows::message(row).map_err(sql)?;
                rows::load_images(conn, &mut message)?;
                message_json(&message)?
            }
        };
        out.push(json);
        Ok(())
    })?;
    Ok(out)
}

/// Hands each message row at positions `from..to` to `visit`, oldest first.
fn forwards(
    conn: &Connection,
    spans: &[Span],
    from: u64,
    to: u64,
    mut visit: impl FnMut(&rusqlite::Row) -> Result<()>,
) -> Result<()> {
    let mut stmt = conn
        .prepare_cached(&format!(
            "SELECT {MESSAGE_COLUMNS} FROM messages WHERE segment = ?1 AND seq >= ?2 AND seq < ?3 ORDER BY seq"
        ))
        .map_err(sql)?;
    for span in spans.iter().rev() {
        let (lo, hi) = (span.lo.max(from), span.hi.min(to));
        if lo >= hi {
            continue;
        }
        let mut rows = stmt.query(params![span.segment, lo as i64, hi as i64]).map_err(sql)?;
        while let Some(row) = rows.next().map_err(sql)? {
            visit(row)?;
        }
    }
    Ok(())
}

/// Walks positions newest first, handing each row to `visit` until it says stop.
fn backwards<T>(
    conn: &Connection,
    spans: &[Span],
    columns: &str,
    map: fn(&rusqlite::Row) -> rusqlite::Result<T>,
    mut visit: impl FnMut(T) -> Result<bool>,
) -> Result<()> {
    let mut stmt = conn
        .prepare_cached(&format!(
            "SELECT {columns} FROM messages WHERE segment = ?1 AND seq >= ?2 AND seq < ?3 ORDER BY seq DESC"
        ))
        .map_err(sql)?;
    for span in spans {
        let mut rows = stmt.query(params![span.segment, span.lo as i64, span.hi as i64]).map_err(sql)?;
        while let Some(row) = rows.next().map_err(sql)? {
            if !visit(map(row).map_err(sql)?)? {
                return Ok(());
            }
        }
    }
    Ok(())
}

/// The trailing tool-call group: read back to the first message that is not a result.
pub fn tail(conn: &Connection, spans: &[Span]) -> Result<Tail> {
    let mut trailing = Vec::new();
    backwards(conn, spans, MESSAGE_COLUMNS, rows::message, |m| {
        let more = m.role == Role::Tool;
        trailing.push(m);
        Ok(more)
    })?;
    Ok(Tail::from_newest_first(&trailing))
}

/// `session::turns_cut` over the stored roles, read newest first only as far as needed.
pub fn turns_cut(conn: &Connection, spans: &[Span], len: u64, max_turns: u64) -> Result<u64> {
    if max_turns == 0 {
        return Ok(len);
    }
    let mut roles = Vec::new();
    let mut users = 0;
    backwards(
        conn,
        spans,
        "role",
        |r| r.get::<_, String>(0),
        |role| {
            let role =
                rows::parse_role(&role).ok_or_else(|| Error::StorageUnavailable(format!("unknown role {role}")))?;
            users += u64::from(role == Role::User);
            roles.push(role);
            Ok(users < max_turns)
        },
    )?;
    Ok(crate::session::turns_cut(len as usize, roles, max_turns) as u64)
}

/// How many tool results directly follow position `from - 1` (`session::rewind_keeps`),
/// read oldest first only as far as they go.
pub fn results_from(conn: &Connection, spans: &[Span], from: u64) -> Result<u64> {
    let mut stmt = conn
        .prepare_cached("SELECT role FROM messages WHERE segment = ?1 AND seq >= ?2 AND seq < ?3 ORDER BY seq")
        .map_err(sql)?;
    let mut count = 0;
    for span in spans.iter().rev().filter(|s| s.hi > from) {
        let mut rows = stmt.query(params![span.segment, span.lo.max(from) as i64, span.hi as i64]).map_err(sql)?;
        while let Some(row) = rows.next().map_err(sql)? {
            if row.get::<_, String>(0).map_err(sql)? != "tool" {
                return Ok(count);
            }
            count += 1;
        }
    }
    Ok(count)
}

/// The position of message `id` among the positions the spans serve.
pub fn position_of(conn: &Connection, spans: &[Span], id: &str) -> Result<Option<u64>> {
    let mut stmt = conn.prepare_cached("SELECT segment, seq FROM messages WHERE id = ?1").map_err(sql)?;
    let found = stmt
        .query_map([id], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)? as u64)))
        .map_err(sql)?
        .collect::<rusqlite::Result<Vec<_>>>()
        .map_err(sql)?;
    Ok(found.into_iter().find_map(|(segment, seq)| {
        spans.iter().any(|s| s.segment == segment && (s.lo..s.hi).contains(&seq)).then_some(seq)
    }))
}

/// The id of the message at `position`.
pub fn id_at(conn: &Connection, spans: &[Span], position: u64) -> Result<Option<String>> {
    let Some(span) = spans.iter().find(|s| (s.lo..s.hi).contains(&position)) else { return Ok(None) };
    conn.prepare_cached("SELECT id FROM messages WHERE segment = ?1 AND seq = ?2")
        .and_then(|mut s| s.query_row(params![span.segment, position as i64], |r| r.get(0)).optional())
        .map_err(sql)
}

/// Deletes what nothing can reach any more, starting at segment `id` (after a session
/// left it, was trimmed, or was deleted) and going up its chain. A segment keeps the
/// positions its users need: from the lowest `start` of any session on it or on a fork
/// below it, up to its end when a session is on it, else up to its highest fork point.
/// A segment nothing uses goes whole, and one whose users all start at or past its base
/// lets go of its parent.
pub fn reclaim(conn: &Connection, mut id: i64) -> Result<()> {
    loop {
        let (parent, base) = segment(conn, id)?;
        let on_it: Option<i64> = conn
            .prepare_cached("SELECT min(start) FROM sessions WHERE segment = ?1")
            .and_then(|mut s| s.query_row([id], |r| r.get(0)))
            .map_err(sql)?;
        let highest_fork: Option<i64> = conn
            .prepare_cached("SELECT max(base) FROM segments WHERE parent = ?1")
            .and_then(|mut s| s.query_row([id], |r| r.get(0)))
            .map_err(sql)?;
        match lowest_start(conn, id)? {
            None => {
                rows::delete_messages(conn, id, 0, u64::MAX)?;
                conn.prepare_cached("DELETE FROM segments WHERE id = ?1")
                    .and_then(|mut s| s.execute([id]))
                    .map_err(sql)?;
            }
            Some(lowest) => {
                rows::delete_messages(conn, id, 0, lowest)?;
                if on_it.is_none()
                    && let Some(highest) = highest_fork
                {
                    rows::delete_messages(conn, id, highest as u64, u64::MAX)?;
                }
                if lowest >= base && parent.is_some() {
                    conn.prepare_cached("UPDATE segments SET parent = NULL WHERE id = ?1")
                        .and_then(|mut s| s.execute([id]))
                        .map_err(sql)?;
                }
            }
        }
        match parent {
            Some(p) => id = p,
            None => return Ok(()),
        }
    }
}

/// The lowest position any session sees through segment `id`: its own sessions' starts
/// and, through its forks, theirs. `None` when nothing uses the segment.
fn lowest_start(conn: &Connection, id: i64) -> Result<Option<u64>> {
    let mut lowest: Option<u64> = None;
    let mut pending = vec![id];
    while let Some(segment) = pending.pop() {
        let start: Option<i64> = conn
            .prepare_cached("SELECT min(start) FROM sessions WHERE segment = ?1")
            .and_then(|mut s| s.query_row([segment], |r| r.get(0)))
            .map_err(sql)?;
        if let Some(start) = start {
            lowest = Some(lowest.map_or(start as u64, |l| l.min(start as u64)));
        }
        let forks: Vec<i64> = conn
            .prepare_cached("SELECT id FROM segments WHERE parent = ?1")
            .and_then(|mut s| s.query_map([segment], |r| r.get(0))?.collect())
            .map_err(sql)?;
        pending.extend(forks);
    }
    Ok(lowest)
}
