//! The statements of the shared SQL algorithms (`store::sql::Tx`) on one PostgreSQL
//! connection, each a cached prepared statement. The chain is read in one recursive
//! query, and what lies below a segment too.

use std::sync::Arc;

use deadpool_postgres::ClientWrapper as Db;

use crate::error::{Error, Result};
use crate::session::{Draft, Message, Role, SessionInfo};
use crate::store::Found;
use crate::store::feed::ChangeKind;
use crate::store::postgres::rows::{self, MESSAGE_COLUMNS, SESSION_COLUMNS, execute, query, query_opt};
use crate::store::postgres::{changes, search};
use crate::store::sql::{Listing, Searching, SessionRow, Tx};

/// One connection, in the transaction the caller opened, and the schema whose changes
/// it announces.
pub struct Pg<'c> {
    db: &'c Db,
    schema: Arc<str>,
}

impl<'c> Pg<'c> {
    pub fn new(db: &'c Db, schema: Arc<str>) -> Self {
        Pg { db, schema }
    }

    pub fn db(&self) -> &'c Db {
        self.db
    }

    async fn optional_i64(&self, sql: &str, id: i64) -> Result<Option<i64>> {
        Ok(query_opt(self.db, sql, &[&id]).await?.and_then(|r| r.get(0)))
    }
}

fn range(lo: u64, hi: u64) -> (i64, i64) {
    (lo.min(i64::MAX as u64) as i64, hi.min(i64::MAX as u64) as i64)
}

impl Tx for Pg<'_> {
    async fn session(&self, id: &str, lock: bool) -> Result<Option<SessionRow>> {
        rows::load_session(self.db, id, lock).await
    }

    async fn put_session(&self, row: &SessionRow, new: bool) -> Result<()> {
        rows::put_session(self.db, row, new).await
    }

    async fn delete_session(&self, id: &str) -> Result<()> {
        execute(self.db, "DELETE FROM sessions WHERE session_id = $1", &[&id]).await.map(drop)
    }

    async fn list(&self, listing: &Listing) -> Result<Vec<SessionInfo>> {
        let Listing { limit, after, updated_before } = listing.clone();
        let (at, id) = after.map_or((None, None), |k| (Some(k.created_at), Some(k.session_id)));
        let sql = format!(
            "SELECT {SESSION_COLUMNS} FROM sessions WHERE ($1::text IS NULL OR (created_at, session_id) < ($1, $2)) \
             AND ($4::text IS NULL OR updated_at < $4) ORDER BY created_at DESC, session_id DESC LIMIT $3"
        );
        let found = query(self.db, &sql, &[&at, &id, &(limit as i64), &updated_before]).await?;
        found.iter().map(|r| rows::session(r).map(|r| r.info)).collect()
    }

    async fn updated_before(&self, at: &str) -> Result<Vec<String>> {
        let found = query(self.db, "SELECT session_id FROM sessions WHERE updated_at < $1", &[&at]).await?;
        Ok(found.iter().map(|r| r.get(0)).collect())
    }

    async fn record(&self, session_id: &str, revision: u64, kind: ChangeKind, message_count: u64) -> Result<()> {
        changes::record(self.db, &self.schema, session_id, revision, kind, message_count).await
    }

    async fn new_segment(&self, parent: Option<i64>, base: u64, owner: &str) -> Result<i64> {
        let sql = "INSERT INTO segments (parent, base, owner) VALUES ($1, $2, $3) RETURNING id";
        let row = query_opt(self.db, sql, &[&parent, &(base as i64), &owner]).await?;
        row.map(|r| r.get(0)).ok_or_else(|| Error::StorageUnavailable("a new segment was not given an id".into()))
    }

    async fn segment(&self, id: i64) -> Result<Option<(Option<i64>, u64)>> {
        let row = query_opt(self.db, "SELECT parent, base FROM segments WHERE id = $1", &[&id]).await?;
        Ok(row.map(|r| (r.get(0), r.get::<_, i64>(1) as u64)))
    }

    /// In one recursive query, bounded in depth instead of checked for loops.
    async fn ancestry(&self, head: i64, start: u64) -> Result<Vec<(i64, u64)>> {
        let chain = query(
            self.db,
            "WITH RECURSIVE chain(id, parent, base, depth) AS ( \
               SELECT id, parent, base, 0 FROM segments WHERE id = $1 \
               UNION ALL \
               SELECT s.id, s.parent, s.base, c.depth + 1 FROM segments s JOIN chain c ON s.id = c.parent \
                 WHERE c.base > $2 AND c.depth < 100000) \
             SELECT id, base FROM chain ORDER BY depth",
            &[&head, &(start as i64)],
        )
        .await?;
        Ok(chain.iter().map(|r| (r.get(0), r.get::<_, i64>(1) as u64)).collect())
    }

    async fn lowest_start_on(&self, id: i64) -> Result<Option<u64>> {
        Ok(self.optional_i64("SELECT min(start) FROM sessions WHERE segment = $1", id).await?.map(|s| s as u64))
    }

    async fn forks_of(&self, id: i64) -> Result<Vec<i64>> {
        let found = query(self.db, "SELECT id FROM segments WHERE parent = $1", &[&id]).await?;
        Ok(found.iter().map(|r| r.get(0)).collect())
    }

    async fn highest_fork(&self, id: i64) -> Result<Option<u64>> {
        Ok(self.optional_i64("SELECT max(base) FROM segments WHERE parent = $1", id).await?.map(|b| b as u64))
    }

    /// In one recursive query.
    async fn lowest_start_below(&self, id: i64) -> Result<Option<u64>> {
        let lowest = self
            .optional_i64(
                "WITH RECURSIVE below(id) AS ( \
                   SELECT $1::bigint UNION ALL SELECT s.id FROM segments s JOIN below b ON s.parent = b.id) \
                 SELECT min(start) FROM sessions WHERE segment IN (SELECT id FROM below)",
                id,
            )
            .await?;
        Ok(lowest.map(|s| s as u64))
    }

    async fn delete_segment(&self, id: i64) -> Result<()> {
        execute(self.db, "DELETE FROM segments WHERE id = $1", &[&id]).await.map(drop)
    }

    async fn detach(&self, id: i64) -> Result<()> {
        execute(self.db, "UPDATE segments SET parent = NULL WHERE id = $1", &[&id]).await.map(drop)
    }

    async fn insert(&self, segment: i64, seq: u64, message: &Message, revision: u64) -> Result<()> {
        rows::insert_message(self.db, segment, seq, message, revision).await
    }

    async fn origin(&self, segment: i64, seq: u64) -> Result<(Option<String>, u64)> {
        let sql = "SELECT s.owner, m.revision FROM messages m JOIN segments s ON s.id = m.segment \
                   WHERE m.segment = $1 AND m.seq = $2";
        let row = query_opt(self.db, sql, &[&segment, &(seq as i64)]).await?;
        Ok(row.map_or((None, 0), |r| (r.get(0), r.get::<_, Option<i64>>(1).unwrap_or(0) as u64)))
    }

    async fn messages(&self, segment: i64, lo: u64, hi: u64) -> Result<Vec<Message>> {
        let sql = format!(
            "SELECT {MESSAGE_COLUMNS} FROM messages WHERE segment = $1 AND seq >= $2 AND seq < $3 ORDER BY seq"
        );
        let (lo, hi) = range(lo, hi);
        let mut out = Vec::new();
        for row in query(self.db, &sql, &[&segment, &lo, &hi]).await? {
            let mut message = rows::message(&row)?;
            rows::load_images(self.db, &mut message).await?;
            out.push(message);
        }
        Ok(out)
    }

    async fn newest(&self, segment: i64, lo: u64, hi: u64, limit: u64) -> Result<Vec<Message>> {
        let sql = format!(
            "SELECT {MESSAGE_COLUMNS} FROM messages WHERE segment = $1 AND seq >= $2 AND seq < $3 \
             ORDER BY seq DESC LIMIT $4"
        );
        let (lo, hi) = range(lo, hi);
        query(self.db, &sql, &[&segment, &lo, &hi, &(limit as i64)]).await?.iter().map(rows::message).collect()
    }

    async fn roles(&self, segment: i64, lo: u64, hi: u64, limit: u64, newest_first: bool) -> Result<Vec<Role>> {
        let sql = if newest_first {
            "SELECT role FROM messages WHERE segment = $1 AND seq >= $2 AND seq < $3 ORDER BY seq DESC LIMIT $4"
        } else {
            "SELECT role FROM messages WHERE segment = $1 AND seq >= $2 AND seq < $3 ORDER BY seq LIMIT $4"
        };
        let (lo, hi) = range(lo, hi);
        query(self.db, sql, &[&segment, &lo, &hi, &(limit as i64)]).await?.iter().map(rows::role).collect()
    }

    async fn places_of(&self, id: &str) -> Result<Vec<(i64, u64)>> {
        let found = query(self.db, "SELECT segment, seq FROM messages WHERE id = $1", &[&id]).await?;
        Ok(found.iter().map(|r| (r.get(0), r.get::<_, i64>(1) as u64)).collect())
    }

    async fn id_at(&self, segment: i64, seq: u64) -> Result<Option<String>> {
        let sql = "SELECT id FROM messages WHERE segment = $1 AND seq = $2";
        Ok(query_opt(self.db, sql, &[&segment, &(seq as i64)]).await?.map(|r| r.get(0)))
    }

    async fn delete_messages(&self, segment: i64, lo: u64, hi: u64) -> Result<()> {
        rows::delete_messages(self.db, segment, lo, hi).await
    }

    async fn put_draft(&self, draft: &Draft) -> Result<()> {
        rows::put_draft(self.db, draft).await
    }

    async fn draft(&self, stream_id: &str, lock: bool) -> Result<Option<Draft>> {
        if lock
            && query_opt(self.db, "SELECT 1 FROM drafts WHERE stream_id = $1 FOR UPDATE", &[&stream_id])
                .await?
                .is_none()
        {
            return Ok(None);
        }
        rows::get_draft(self.db, stream_id).await
    }

    async fn delete_draft(&self, stream_id: &str) -> Result<()> {
        rows::delete_draft(self.db, stream_id).await
    }

    async fn newest_draft(&self, session_id: &str) -> Result<Option<Draft>> {
        rows::newest_draft_of(self.db, session_id).await
    }

    async fn stale_drafts(&self, before: i64) -> Result<Vec<String>> {
        rows::stale_drafts(self.db, before).await
    }

    async fn image(&self, reference: &str) -> Result<Option<String>> {
        rows::image(self.db, reference).await
    }

    async fn search(&self, searching: Searching<'_>) -> Result<Vec<Found>> {
        search::search(self.db, searching).await
    }
}
