//! Full-text search on SQLite, over the index `words` keeps (see there).
//!
//! A hit is a message row; the sessions holding it are found through the chains: the
//! sessions on its segment, and on the forks below it cut after its position, whose
//! `[start, len)` covers it. So a row shared by forks is indexed once and found in each.

use rusqlite::{Connection, OptionalExtension, params};

use crate::error::{Error, Result};
use crate::session::search::content_text;
use crate::store::Found;
use crate::store::sql::{Hit, Place, Searching, Span, page_of_hits, parse_role};
use crate::store::sqlite::errors::sql;
use crate::store::sqlite::rows;
use crate::store::sqlite::words::{SEQ_BITS, rowid};

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

/// See `store::sql::Tx::search`.
pub fn search(conn: &Connection, searching: Searching<'_>) -> Result<Vec<Found>> {
    let Searching { query, within, offset, limit } = searching;
    let matching = query.fts5();
    // (session id, index, segment, seq)
    let places: Vec<Place> = match within {
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
        Some((row, spans)) => page_of_hits(row, in_session(conn, &matching, spans)?, offset, limit),
    };
    places.into_iter().map(|(session_id, index, segment, seq)| found(conn, session_id, index, segment, seq)).collect()
}

/// The hits of one session: its spans searched by rowid range.
fn in_session(conn: &Connection, matching: &str, spans: &[Span]) -> Result<Vec<Hit>> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT rowid, rank FROM message_words WHERE message_words MATCH ?1 AND rowid >= ?2 AND rowid < ?3",
        )
        .map_err(sql)?;
    let mut hits = Vec::new();
    for span in spans {
        let (lo, hi) = (rowid(span.segment, span.lo)?, rowid(span.segment, span.hi.min((1 << SEQ_BITS) - 1))?);
        let found = stmt
            .query_map(params![matching, lo, hi], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, f64>(1)?)))
            .map_err(sql)?;
        for hit in found {
            let (rowid, rank) = hit.map_err(sql)?;
            // bm25: lower is better.
            hits.push(Hit { score: -rank, segment: span.segment, seq: (rowid & ((1 << SEQ_BITS) - 1)) as u64 });
        }
    }
    Ok(hits)
}

fn found(conn: &Connection, session_id: String, index: u64, segment: i64, seq: u64) -> Result<Found> {
    let place = rows::place(segment, seq)?;
    let (message_id, role, content): (String, String, String) = conn
        .prepare_cached("SELECT id, role, content FROM messages WHERE place = ?1")
        .and_then(|mut s| s.query_row([place], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).optional())
        .map_err(sql)?
        .ok_or_else(|| Error::StorageUnavailable(format!("indexed message row ({segment}, {seq}) is missing")))?;
    let role = parse_role(&role).ok_or_else(|| Error::StorageUnavailable(format!("unknown role {role}")))?;
    let content = serde_json::from_str(&content).map_err(|e| Error::StorageUnavailable(e.to_string()))?;
    Ok(Found { session_id, index, message_id, role, text: content_text(&content).into_owned() })
}
