//! Full-text search on PostgreSQL, as on SQLite (see `store::sqlite::search`): each
//! message row carries its indexed words as a `tsvector` (`messages.words`, GIN-indexed),
//! written by convo from `session::search::tsvector` with the row itself, so the words,
//! their positions and their case are convo's, never a text search configuration's; the
//! query is a `tsquery` literal (`Query::tsquery`), never parsed by PostgreSQL's own
//! parser. A hit is a message row; the sessions holding it are found through the chains.

use crate::error::{Error, Result};
use crate::session::search::content_text;
use crate::store::Found;
use crate::store::postgres::rows::{self, Db, query};
use crate::store::sql::{Hit, Place, Searching, Span, page_of_hits, parse_role};

/// Every session holding each matching row, best first (`ts_rank`).
const SEARCH_ALL: &str = "
    WITH RECURSIVE
    hit AS (
        SELECT m.segment AS seg, m.seq, ts_rank(m.words, q) AS rank
        FROM convo.messages m, CAST($1::text AS tsquery) q WHERE m.words @@ q
    ),
    reach AS (
        SELECT seg, seq, rank, seg AS at FROM hit
        UNION ALL
        SELECT r.seg, r.seq, r.rank, s.id FROM reach r JOIN convo.segments s ON s.parent = r.at AND s.base > r.seq
    )
    SELECT s.session_id, r.seq - s.start, r.seg, r.seq
    FROM reach r JOIN convo.sessions s ON s.segment = r.at AND s.start <= r.seq AND r.seq < s.len
    ORDER BY r.rank DESC, s.session_id, r.seq
    LIMIT $2 OFFSET $3";

/// See `store::sql::Tx::search`; runs in one read snapshot.
pub async fn search(db: Db<'_>, searching: Searching<'_>) -> Result<Vec<Found>> {
    let Searching { query, within, offset, limit } = searching;
    let matching = query.tsquery();
    let places: Vec<Place> = match within {
        None => {
            let (offset, limit) = (offset.min(i64::MAX as u64) as i64, limit.min(i64::MAX as u64) as i64);
            let found = rows::query(db, SEARCH_ALL, &[&matching, &limit, &offset]).await?;
            found.iter().map(|r| (r.get(0), r.get::<_, i64>(1) as u64, r.get(2), r.get::<_, i64>(3) as u64)).collect()
        }
        Some((row, spans)) => page_of_hits(row, in_session(db, &matching, spans).await?, offset, limit),
    };
    load(db, places).await
}

/// The hits of one session: its spans searched by range.
async fn in_session(db: Db<'_>, matching: &str, spans: &[Span]) -> Result<Vec<Hit>> {
    let mut hits = Vec::new();
    for span in spans {
        let found = query(
            db,
            "SELECT m.seq, ts_rank(m.words, q) FROM convo.messages m, CAST($1::text AS tsquery) q \
             WHERE m.segment = $2 AND m.seq >= $3 AND m.seq < $4 AND m.words @@ q",
            &[&matching, &span.segment, &(span.lo as i64), &(span.hi as i64)],
        )
        .await?;
        for r in found {
            let (seq, rank): (i64, f32) = (r.get(0), r.get(1));
            hits.push(Hit { score: f64::from(rank), segment: span.segment, seq: seq as u64 });
        }
    }
    Ok(hits)
}

/// The message rows of the hits, in one query, kept in the hits' order.
async fn load(db: Db<'_>, places: Vec<Place>) -> Result<Vec<Found>> {
    let segments: Vec<i64> = places.iter().map(|p| p.2).collect();
    let seqs: Vec<i64> = places.iter().map(|p| p.3 as i64).collect();
    let found = query(
        db,
        "SELECT m.segment, m.seq, m.id, m.role, m.content FROM convo.messages m \
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
            let (message_id, role, content) = rows.get(&(segment, seq as i64)).ok_or_else(missing)?;
            let role = parse_role(role).ok_or_else(|| Error::StorageUnavailable(format!("unknown role {role}")))?;
            let content = serde_json::from_str(content).map_err(|e| Error::StorageUnavailable(e.to_string()))?;
            Ok(Found {
                session_id,
                index,
                message_id: message_id.clone(),
                role,
                text: content_text(&content).into_owned(),
            })
        })
        .collect()
}
