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

use rusqlite::{Connection, params};

use crate::error::{Error, Result};
use crate::session::search::index_text;
use crate::session::{Message, Role};
use crate::store::sqlite::errors::sql;

/// Positions in one segment and segment ids that fit a rowid.
pub const SEQ_BITS: u32 = 32;
const MAX_SEGMENT: i64 = 1 << 30;

/// The FTS5 rowid of the message row at (`segment`, `seq`).
pub fn rowid(segment: i64, seq: u64) -> Result<i64> {
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
