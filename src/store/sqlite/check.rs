//! `convo fsck` on a database file: SQLite's own integrity check, then what convo keeps
//! true of its tables (see `chain` and `rows`): every row belongs to something that
//! exists, every segment is used by a session (directly or through a fork below it), no
//! message sits below its segment's base, every session's chain ends without a loop and
//! serves each position of its history exactly once, every message row reads back, and
//! each image's reference count equals the message rows that name it.

use std::collections::HashMap;

use rusqlite::{Connection, params};

use crate::error::Result;
use crate::store::sqlite::chain;
use crate::store::sqlite::rows::{self, MESSAGE_COLUMNS, SESSION_COLUMNS};
use crate::store::sqlite::schema::sql;

/// Every finding, each a sentence; empty when the database is sound.
pub fn check(c: &Connection) -> Result<Vec<String>> {
    let mut found = integrity(c)?;
    if !found.is_empty() {
        // The tables themselves are damaged: what they say cannot be trusted.
        return Ok(found);
    }
    found.extend(orphans(c)?);
    found.extend(chains(c)?);
    found.extend(messages(c)?);
    found.extend(images(c)?);
    Ok(found)
}

fn integrity(c: &Connection) -> Result<Vec<String>> {
    let rows: Vec<String> = strings(c, "PRAGMA integrity_check", [])?;
    Ok(rows.into_iter().filter(|r| r != "ok").map(|r| format!("integrity check: {r}")).collect())
}

/// Rows that name a row that is not there, and segments nothing uses.
fn orphans(c: &Connection) -> Result<Vec<String>> {
    let mut found = Vec::new();
    let sessions = "SELECT session_id, segment FROM sessions WHERE segment NOT IN (SELECT id FROM segments)";
    for (session, segment) in pairs::<String>(c, sessions)? {
        found.push(format!("session {}: its segment {segment} does not exist", quote(&session)));
    }
    let parents =
        "SELECT id, parent FROM segments WHERE parent IS NOT NULL AND parent NOT IN (SELECT id FROM segments)";
    for (segment, parent) in pairs::<i64>(c, parents)? {
        found.push(format!("segment {segment}: its parent segment {parent} does not exist"));
    }
    let messages = "SELECT segment, count(*) FROM messages WHERE segment NOT IN (SELECT id FROM segments) \
                    GROUP BY segment";
    for (segment, n) in pairs::<i64>(c, messages)? {
        found.push(format!("{n} message row(s) belong to segment {segment}, which does not exist (orphan rows)"));
    }
    let unused = "WITH RECURSIVE used(id) AS (SELECT segment FROM sessions \
                    UNION SELECT s.parent FROM segments s JOIN used u ON s.id = u.id WHERE s.parent IS NOT NULL) \
                  SELECT s.id, (SELECT count(*) FROM messages m WHERE m.segment = s.id) FROM segments s \
                  WHERE s.id NOT IN used";
    for (segment, n) in pairs::<i64>(c, unused)? {
        found.push(format!("segment {segment} is used by no session; its {n} message row(s) are orphans"));
    }
    let below = "SELECT m.segment, count(*) FROM messages m JOIN segments s ON s.id = m.segment \
                 WHERE m.seq < s.base GROUP BY m.segment";
    for (segment, n) in pairs::<i64>(c, below)? {
        found.push(format!("segment {segment}: {n} message row(s) sit below its base, where no session reads"));
    }
    Ok(found)
}

/// Each session's history: its chain, and one message row per position.
fn chains(c: &Connection) -> Result<Vec<String>> {
    let mut found = Vec::new();
    let mut stmt = c.prepare(&format!("SELECT {SESSION_COLUMNS} FROM sessions")).map_err(sql)?;
    let sessions = stmt.query_map([], rows::session).map_err(sql)?.collect::<rusqlite::Result<Vec<_>>>();
    let mut count =
        c.prepare("SELECT count(*) FROM messages WHERE segment = ?1 AND seq >= ?2 AND seq < ?3").map_err(sql)?;
    for row in sessions.map_err(sql)? {
        let id = quote(&row.info.session_id);
        if row.start > row.len {
            found.push(format!("session {id}: its history starts at {} past its end {}", row.start, row.len));
            continue;
        }
        let spans = match chain::spans(c, row.segment, row.start, row.len) {
            Ok(spans) => spans,
            Err(e) => {
                found.push(format!("session {id}: its segment chain cannot be walked: {e}"));
                continue;
            }
        };
        let mut served = 0;
        for span in &spans {
            let n: i64 =
                count.query_row(params![span.segment, span.lo as i64, span.hi as i64], |r| r.get(0)).map_err(sql)?;
            if n as u64 != span.hi - span.lo {
                found.push(format!(
                    "session {id}: positions {}..{} should be in segment {}, which holds {n} of those {} message rows",
                    span.lo,
                    span.hi,
                    span.segment,
                    span.hi - span.lo
                ));
            }
            served += span.hi - span.lo;
        }
        if served != row.len - row.start {
            found.push(format!(
                "session {id}: its chain serves {served} of its {} positions (a broken chain)",
                row.len - row.start
            ));
        }
    }
    Ok(found)
}

/// Every message row reads back as a message (a known role, JSON where JSON belongs).
fn messages(c: &Connection) -> Result<Vec<String>> {
    let mut found = Vec::new();
    let mut stmt = c.prepare(&format!("SELECT {MESSAGE_COLUMNS}, segment, seq FROM messages")).map_err(sql)?;
    let mut all = stmt.query([]).map_err(sql)?;
    while let Some(row) = all.next().map_err(sql)? {
        if let Err(e) = rows::message(row) {
            let (segment, seq): (i64, i64) = (row.get(9).map_err(sql)?, row.get(10).map_err(sql)?);
            found.push(format!("message row (segment {segment}, position {seq}) cannot be read: {e}"));
        }
    }
    Ok(found)
}

/// Images: each reference counted once per message row that names it, none missing.
fn images(c: &Connection) -> Result<Vec<String>> {
    let mut found = Vec::new();
    let mut named: HashMap<String, i64> = HashMap::new();
    let lists: Vec<String> = strings(c, "SELECT images FROM messages WHERE images IS NOT NULL", [])?;
    for list in lists {
        match serde_json::from_str::<Vec<String>>(&list) {
            Ok(hashes) => hashes.into_iter().for_each(|h| *named.entry(h).or_default() += 1),
            Err(e) => found.push(format!("a message row's image list is not a list of hashes: {e}")),
        }
    }
    let mut stmt = c.prepare("SELECT hash, refs FROM blobs").map_err(sql)?;
    let blobs: HashMap<String, i64> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .map_err(sql)?
        .collect::<rusqlite::Result<_>>()
        .map_err(sql)?;
    for (hash, refs) in &blobs {
        let rows = named.get(hash).copied().unwrap_or(0);
        if *refs != rows {
            found.push(format!("image {hash}: counts {refs} reference(s), but {rows} message row(s) name it"));
        }
    }
    for (hash, rows) in &named {
        if !blobs.contains_key(hash) {
            found.push(format!("image {hash}: {rows} message row(s) name it, but it is missing"));
        }
    }
    found.sort();
    Ok(found)
}

fn strings<P: rusqlite::Params>(c: &Connection, query: &str, p: P) -> Result<Vec<String>> {
    let mut stmt = c.prepare(query).map_err(sql)?;
    stmt.query_map(p, |r| r.get(0)).map_err(sql)?.collect::<rusqlite::Result<_>>().map_err(sql)
}

fn pairs<A: rusqlite::types::FromSql>(c: &Connection, query: &str) -> Result<Vec<(A, i64)>> {
    let mut stmt = c.prepare(query).map_err(sql)?;
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).map_err(sql)?.collect::<rusqlite::Result<_>>().map_err(sql)
}

fn quote(s: &str) -> String {
    crate::error::quote(s)
}
