//! Full-text search on SQLite: an FTS5 table, `message_words`, holds each message row's
//! indexed words (`session::search::index_text`, already split and lowercased by convo;
//! FTS5's `unicode61` tokenizer, diacritics kept, only splits them again on spaces). It
//! is contentless (the text lives in `messages`) and its rowid is the message row's
//! place: `segment << 32 | seq`. Rows enter and leave it with their message rows
//! (`rows::insert_message`, `rows::delete_messages`), in the same transaction, so a
//! search sees exactly what a reader of the same snapshot sees.
//!
//! The writer's jobs do not write `message_words` themselves: each job runs in a
//! savepoint of its group's transaction, and FTS5 writes its pending words out as a new
//! index segment at every savepoint, so a group of 64 appends wrote 64 segments (18 pages
//! per append) and group commit saved nothing. Jobs put their rows in `pending_words`, a
//! temporary table of the writer's connection that savepoints roll back like any other,
//! and the group moves them into `message_words` in one statement before it commits
//! (`flush`). A job that deletes index rows deletes them from both.
//!
//! A hit is a message row; the sessions holding it are found through the chains: the
//! sessions on its segment, and on the forks below it cut after its position, whose
//! `[start, len)` covers it. So a row shared by forks is indexed once and found in each.

use rusqlite::{Connection, OptionalExtension, params};

use crate::error::{Error, Result};
use crate::session::search::{Query, content_text, index_text};
use crate::session::{Message, Role};
use crate::store::Found;
use crate::store::sqlite::chain;
use crate::store::sqlite::rows::{self, parse_role};
use crate::store::sqlite::schema::sql;

/// Positions in one segment and segment ids that fit a rowid.
const SEQ_BITS: u32 = 32;
const MAX_SEGMENT: i64 = 1 << 30;

/// The FTS5 rowid of the message row at (`segment`, `seq`).
fn rowid(segment: i64, seq: u64) -> Result<i64> {
    if !(0..MAX_SEGMENT).contains(&segment) || seq >= 1 << SEQ_BITS {
        return Err(Error::StorageUnavailable(format!("message row ({segment}, {seq}) is beyond the search index")));
    }
    Ok(segment << SEQ_BITS | seq as i64)
}

/// Makes the writer's connection's `pending_words`, in memory.
pub fn prepare_writer(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute_batch(
        "PRAGMA temp_store = MEMORY;
         CREATE TEMP TABLE IF NOT EXISTS pending_words (rowid INTEGER PRIMARY KEY, words TEXT NOT NULL);",
    )
}

/// Indexes a message row just inserted, when its transaction's group commits (`flush`).
pub fn insert(conn: &Connection, segment: i64, seq: u64, message: &Message) -> Result<()> {
    let words = index_text(message);
    if words.is_empty() {
        return Ok(());
    }
    let rowid = rowid(segment, seq)?;
    conn.prepare_cached("INSERT INTO temp.pending_words (rowid, words) VALUES (?1, ?2)")
        .and_then(|mut s| s.execute(params![rowid, words]))
        .map(drop)
        .map_err(sql)
}

/// Moves the rows the group's jobs indexed into `message_words`; in the group's
/// transaction, before it commits.
pub fn flush(conn: &Connection) -> rusqlite::Result<()> {
    let moved = conn
        .prepare_cached("INSERT INTO message_words (rowid, words) SELECT rowid, words FROM temp.pending_words")?
        .execute([])?;
    if moved > 0 {
        conn.prepare_cached("DELETE FROM temp.pending_words")?.execute([])?;
    }
    Ok(())
}

/// Drops the index rows of the message rows `lo <= seq < hi` of `segment`.
pub fn delete(conn: &Connection, segment: i64, lo: u64, hi: u64) -> Result<()> {
    let end = 1u64 << SEQ_BITS;
    let (lo, hi) = (lo.min(end), hi.min(end));
    if lo >= hi || !(0..MAX_SEGMENT).contains(&segment) {
        return Ok(());
    }
    let base = segment << SEQ_BITS;
    for table in ["message_words", "temp.pending_words"] {
        conn.prepare_cached(&format!("DELETE FROM {table} WHERE rowid >= ?1 AND rowid < ?2"))
            .and_then(|mut s| s.execute(params![base + lo as i64, base + hi as i64]))
            .map_err(sql)?;
    }
    Ok(())
}

/// Indexes every message stored before search existed (schema version 5); on the
/// writer's connection, in the migration's transaction.
pub fn index_old_messages(conn: &Connection) -> Result<()> {
    let mut select = conn.prepare("SELECT segment, seq, content FROM messages").map_err(sql)?;
    let mut rows = select.query([]).map_err(sql)?;
    while let Some(row) = rows.next().map_err(sql)? {
        let (segment, seq, content): (i64, i64, String) =
            (row.get(0).map_err(sql)?, row.get(1).map_err(sql)?, row.get(2).map_err(sql)?);
        let mut message = Message::new(Role::User, serde_json::Value::Null);
        message.content = serde_json::from_str(&content).map_err(|e| Error::StorageUnavailable(e.to_string()))?;
        insert(conn, segment, seq as u64, &message)?;
    }
    flush(conn).map_err(sql)
}

/// Every session holding each matching row, best first (FTS5's `rank`, bm25).
const SEARCH_ALL: &str = "
    WITH RECURSIVE
    hit(seg, seq, rank) AS (
        SELECT rowid >> 32, rowid & 4294967295, rank FROM message_words WHERE message_words MATCH ?1
    ),
    reach(seg, seq, rank, at) AS (
        SELECT seg, seq, rank, seg FROM hit
        UNION ALL
        SELECT r.seg, r.seq, r.rank, s.id FROM reach r JOIN segments s ON s.parent = r.at AND s.base > r.seq
    )
    SELECT s.session_id, r.seq - s.start, r.seg, r.seq
    FROM reach r JOIN sessions s ON s.segment = r.at AND s.start <= r.seq AND r.seq < s.len
    ORDER BY r.rank, s.session_id, r.seq
    LIMIT ?2 OFFSET ?3";

/// See `Store::search`.
pub fn search(
    conn: &Connection,
    query: &Query,
    session_id: Option<&str>,
    offset: u64,
    limit: u64,
) -> Result<Vec<Found>> {
    let matching = query.fts5();
    // (session id, index, segment, seq)
    let places: Vec<(String, u64, i64, u64)> = match session_id {
        None => conn
            .prepare_cached(SEARCH_ALL)
            .and_then(|mut s| {
                s.query_map(
                    params![matching, limit.min(i64::MAX as u64) as i64, offset.min(i64::MAX as u64) as i64],
                    |r| Ok((r.get(0)?, r.get::<_, i64>(1)? as u64, r.get(2)?, r.get::<_, i64>(3)? as u64)),
                )?
                .collect()
            })
            .map_err(sql)?,
        Some(id) => in_session(conn, &matching, id, offset, limit)?,
    };
    places.into_iter().map(|(session_id, index, segment, seq)| found(conn, session_id, index, segment, seq)).collect()
}

/// The hits of one session: its spans searched by rowid range.
fn in_session(
    conn: &Connection,
    matching: &str,
    id: &str,
    offset: u64,
    limit: u64,
) -> Result<Vec<(String, u64, i64, u64)>> {
    let row = rows::require_session(conn, id)?;
    let spans = chain::spans(conn, row.segment, row.start, row.len)?;
    let mut stmt = conn
        .prepare_cached(
            "SELECT rowid, rank FROM message_words WHERE message_words MATCH ?1 AND rowid >= ?2 AND rowid < ?3",
        )
        .map_err(sql)?;
    let mut hits: Vec<(f64, u64, i64, u64)> = Vec::new();
    for span in &spans {
        let (lo, hi) = (rowid(span.segment, span.lo)?, rowid(span.segment, span.hi.min((1 << SEQ_BITS) - 1))?);
        let found = stmt
            .query_map(params![matching, lo, hi], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, f64>(1)?)))
            .map_err(sql)?;
        for hit in found {
            let (rowid, rank) = hit.map_err(sql)?;
            let seq = (rowid & ((1 << SEQ_BITS) - 1)) as u64;
            hits.push((rank, seq - row.start, span.segment, seq));
        }
    }
    hits.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let skip = usize::try_from(offset).unwrap_or(usize::MAX);
    let take = usize::try_from(limit).unwrap_or(usize::MAX);
    Ok(hits.into_iter().skip(skip).take(take).map(|(_, index, seg, seq)| (id.to_owned(), index, seg, seq)).collect())
}

fn found(conn: &Connection, session_id: String, index: u64, segment: i64, seq: u64) -> Result<Found> {
    let (message_id, role, content): (String, String, String) = conn
        .prepare_cached("SELECT id, role, content FROM messages WHERE segment = ?1 AND seq = ?2")
        .and_then(|mut s| {
            s.query_row(params![segment, seq as i64], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).optional()
        })
        .map_err(sql)?
        .ok_or_else(|| Error::StorageUnavailable(format!("indexed message row ({segment}, {seq}) is missing")))?;
    let role = parse_role(&role).ok_or_else(|| Error::StorageUnavailable(format!("unknown role {role}")))?;
    let content = serde_json::from_str(&content).map_err(|e| Error::StorageUnavailable(e.to_string()))?;
    Ok(Found { session_id, index, message_id, role, text: content_text(&content).into_owned() })
}
