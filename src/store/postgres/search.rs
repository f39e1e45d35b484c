//! Full-text search on PostgreSQL, as on SQLite (see `store::sqlite::search`): each
//! message row carries its indexed words as a `tsvector` (`messages.words`, GIN-indexed),
//! written by convo from `session::search::tsvector` with the row itself, so the words,
//! their positions and their case are convo's, never a text search configuration's; the
//! query is a `tsquery` literal (`Query::tsquery`), never parsed by PostgreSQL's own
//! parser. A hit is a message row; the sessions holding it are found through the chains.

use deadpool_postgres::ClientWrapper as Db;

use crate::error::{Error, Result};
use crate::session::search::{Query, content_text, tsvector};
use crate::session::{Message, Role};
use crate::store::Found;
use crate::store::postgres::chain;
use crate::store::postgres::rows::{self, query};
use crate::store::postgres::schema::pg;
use crate::store::row::parse_role;

/// Every session holding each matching row, best first (`ts_rank`).
const SEARCH_ALL: &str = "
    WITH RECURSIVE
    hit AS (
        SELECT m.segment AS seg, m.seq, ts_rank(m.words, q) AS rank
        FROM messages m, CAST($1::text AS tsquery) q WHERE m.words @@ q
    ),
    reach AS (
        SELECT seg, seq, rank, seg AS at FROM hit
        UNION ALL
        SELECT r.seg, r.seq, r.rank, s.id FROM reach r JOIN segments s ON s.parent = r.at AND s.base > r.seq
    )
    SELECT s.session_id, r.seq - s.start, r.seg, r.seq
    FROM reach r JOIN sessions s ON s.segment = r.at AND s.start <= r.seq AND r.seq < s.len
    ORDER BY r.rank DESC, s.session_id, r.seq
    LIMIT $2 OFFSET $3";

/// See `Store::search`; runs in one read snapshot.
pub async fn search(db: &Db, query: &Query, session_id: Option<&str>, offset: u64, limit: u64) -> Result<Vec<Found>> {
    let matching = query.tsquery();
    let (offset, limit) = (offset.min(i64::MAX as u64) as i64, limit.min(i64::MAX as u64) as i64);
    // (session id, index, segment, seq)
    let places: Vec<(String, i64, i64, i64)> = match session_id {
        None => rows::query(db, SEARCH_ALL, &[&matching, &limit, &offset])
            .await?
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
            .collect(),
        Some(id) => in_session(db, &matching, id, offset, limit).await?,
    };
    load(db, places).await
}

/// The hits of one session: its spans searched by range.
async fn in_session(
    db: &Db,
    matching: &str,
    id: &str,
    offset: i64,
    limit: i64,
) -> Result<Vec<(String, i64, i64, i64)>> {
    let row = rows::require_session(db, id, false).await?;
    let spans = chain::spans(db, row.segment, row.start, row.len).await?;
    let mut hits: Vec<(f32, i64, i64, i64)> = Vec::new();
    for span in &spans {
        let found = query(
            db,
            "SELECT m.seq, ts_rank(m.words, q) FROM messages m, CAST($1::text AS tsquery) q \
             WHERE m.segment = $2 AND m.seq >= $3 AND m.seq < $4 AND m.words @@ q",
            &[&matching, &span.segment, &(span.lo as i64), &(span.hi as i64)],
        )
        .await?;
        for r in found {
            let (seq, rank): (i64, f32) = (r.get(0), r.get(1));
            hits.push((rank, seq - row.start as i64, span.segment, seq));
        }
    }
    hits.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    let (skip, take) = (usize::try_from(offset).unwrap_or(usize::MAX), usize::try_from(limit).unwrap_or(usize::MAX));
    Ok(hits.into_iter().skip(skip).take(take).map(|(_, index, seg, seq)| (id.to_owned(), index, seg, seq)).collect())
}

/// The message rows of the hits, in one query, kept in the hits' order.
async fn load(db: &Db, places: Vec<(String, i64, i64, i64)>) -> Result<Vec<Found>> {
    let segments: Vec<i64> = places.iter().map(|p| p.2).collect();
    let seqs: Vec<i64> = places.iter().map(|p| p.3).collect();
    let found = query(
        db,
        "SELECT m.segment, m.seq, m.id, m.role, m.content FROM messages m \
         JOIN unnest($1::bigint[], $2::bigint[]) AS p(segment, seq) ON m.segment = p.segment AND m.seq = p.seq",
        &[&segments, &seqs],
    )
    .await?;
    let mut rows = std::collections::HashMap::new();
    for r in found {
        let (segment, seq): (i64, i64) = (r.get(0), r.get(1));
        rows.insert((segment, seq), (r.get::<_, String>(2), r.get::<_, String>(3), r.get::<_, String>(4)));
    }
    places
        .into_iter()
        .map(|(session_id, index, segment, seq)| {
            let missing = || Error::StorageUnavailable(format!("indexed message row ({segment}, {seq}) is missing"));
            let (message_id, role, content) = rows.get(&(segment, seq)).ok_or_else(missing)?;
            let role = parse_role(role).ok_or_else(|| Error::StorageUnavailable(format!("unknown role {role}")))?;
            let content = serde_json::from_str(content).map_err(|e| Error::StorageUnavailable(e.to_string()))?;
            Ok(Found {
                session_id,
                index: index as u64,
                message_id: message_id.clone(),
                role,
                text: content_text(&content).into_owned(),
            })
        })
        .collect()
}

/// Gives every message stored before search existed (schema version 2) its words.
pub async fn index_old_messages(tx: &tokio_postgres::Transaction<'_>) -> Result<()> {
    let old = tx.query("SELECT segment, seq, content FROM messages", &[]).await.map_err(pg)?;
    let update = tx
        .prepare("UPDATE messages SET words = $3::text::tsvector WHERE segment = $1 AND seq = $2")
        .await
        .map_err(pg)?;
    for row in old {
        let (segment, seq, content): (i64, i64, String) = (row.get(0), row.get(1), row.get(2));
        let mut message = Message::new(Role::User, serde_json::Value::Null);
        message.content = serde_json::from_str(&content).map_err(|e| Error::StorageUnavailable(e.to_string()))?;
        tx.execute(&update, &[&segment, &seq, &tsvector(&message)]).await.map_err(pg)?;
    }
    Ok(())
}
