//! Rows of the `drafts` table: one per stream in progress, written by the process that
//! streams it (its `owner`) and refreshed while that process lives.

use rusqlite::{Connection, OptionalExtension, Row, params};

use crate::error::{Error, Result};
use crate::session::Draft;
use crate::store::sqlite::errors::sql;

const COLUMNS: &str = "stream_id, session_id, owner, refreshed_at, user_message, text";

fn draft(row: &Row) -> rusqlite::Result<(Draft, String)> {
    let user: String = row.get(4)?;
    let draft = Draft {
        stream_id: row.get(0)?,
        session_id: row.get(1)?,
        owner: row.get(2)?,
        refreshed_at: row.get(3)?,
        user: crate::session::Message::new(crate::session::Role::User, serde_json::Value::Null),
        text: row.get(5)?,
    };
    Ok((draft, user))
}

fn decoded((mut draft, user): (Draft, String)) -> Result<Draft> {
    draft.user = serde_json::from_str(&user)
        .map_err(|e| Error::StorageUnavailable(format!("a draft's user message does not parse: {e}")))?;
    Ok(draft)
}

pub fn put(c: &Connection, d: &Draft) -> Result<()> {
    let user = serde_json::to_string(&d.user).map_err(|e| Error::Internal(e.to_string()))?;
    c.prepare_cached(&format!("INSERT OR REPLACE INTO drafts ({COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6)"))
        .and_then(|mut s| s.execute(params![d.stream_id, d.session_id, d.owner, d.refreshed_at, user, d.text]))
        .map(drop)
        .map_err(sql)
}

pub fn get(c: &Connection, stream_id: &str) -> Result<Option<Draft>> {
    c.prepare_cached(&format!("SELECT {COLUMNS} FROM drafts WHERE stream_id = ?1"))
        .and_then(|mut s| s.query_row([stream_id], draft).optional())
        .map_err(sql)?
        .map(decoded)
        .transpose()
}

pub fn newest_of(c: &Connection, session_id: &str) -> Result<Option<Draft>> {
    c.prepare_cached(&format!("SELECT {COLUMNS} FROM drafts WHERE session_id = ?1 ORDER BY refreshed_at DESC LIMIT 1"))
        .and_then(|mut s| s.query_row([session_id], draft).optional())
        .map_err(sql)?
        .map(decoded)
        .transpose()
}

pub fn delete(c: &Connection, stream_id: &str) -> Result<()> {
    c.prepare_cached("DELETE FROM drafts WHERE stream_id = ?1")
        .and_then(|mut s| s.execute([stream_id]))
        .map(drop)
        .map_err(sql)
}

pub fn stale(c: &Connection, before: i64) -> Result<Vec<String>> {
    c.prepare_cached("SELECT stream_id FROM drafts WHERE refreshed_at < ?1")
        .and_then(|mut s| s.query_map([before], |r| r.get(0))?.collect())
        .map_err(sql)
}
