//! The statements of the shared SQL algorithms (`store::sql::Tx`) on one PostgreSQL
//! connection (each sent as `rows::Db` sends them). The chain is read in one recursive
//! query, and what lies below a segment too.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use deadpool_postgres::ClientWrapper;

use crate::error::{Error, Result};
use crate::lock;
use crate::session::{Draft, Message, Role, SessionInfo};
use crate::store::Found;
use crate::store::feed::ChangeKind;
use crate::store::postgres::rows::{self, Db, MESSAGE_COLUMNS, SESSION_COLUMNS, Statements, execute, query, query_opt};
use crate::store::postgres::{changes, search};
use crate::store::sql::tx::{Appending, NewRow};
use crate::store::sql::{Listing, Searching, SessionRow, Tx};

/// One connection, in the transaction the caller opened, and the schema it works in;
/// in a writer's group, what the job before left for the next one (`Carry`).
pub struct Pg<'c> {
    db: Db<'c>,
    carry: Option<&'c Carry>,
}

/// What an append left for an append right after it in the same transaction
/// (`Tx::carry`), as the SQLite writer keeps it: offered to the next job only, and
/// dropped when a job does not take effect. A writer keeps one for all its transactions:
/// what appends left in a transaction that committed is kept, each session's last, as a
/// hint for the next transaction (`Tx::kept`).
#[derive(Default)]
pub struct Carry {
    left: Mutex<Option<Appending>>,
    offered: Mutex<Option<Appending>>,
    /// What the jobs of this transaction that took effect left, by session.
    settled: Mutex<HashMap<String, Appending>>,
    /// What jobs of committed transactions left, by session.
    kept: Mutex<HashMap<String, Appending>>,
}

/// How many sessions' hints a writer keeps; past it, it starts again.
const KEEP: usize = 256;

impl Carry {
    /// Before a job: what the job before left is offered to it.
    pub fn offer(&self) {
        let left = lock(&self.left).take();
        *lock(&self.offered) = left;
    }

    /// After a job: what it did not take is gone; when it did not take effect, what it
    /// left is not true.
    pub fn settle(&self, took_effect: bool) {
        lock(&self.offered).take();
        let mut left = lock(&self.left);
        if !took_effect {
            left.take();
        } else if let Some(appending) = left.as_ref() {
            lock(&self.settled).insert(appending.session_id().to_owned(), appending.clone());
        }
    }

    /// After a transaction: what its jobs settled is kept when it committed.
    pub fn end(&self, committed: bool) {
        lock(&self.left).take();
        lock(&self.offered).take();
        let settled = std::mem::take(&mut *lock(&self.settled));
        if committed {
            let mut kept = lock(&self.kept);
            if kept.len() + settled.len() > KEEP {
                kept.clear();
            }
            kept.extend(settled);
        }
    }
}

impl<'c> Pg<'c> {
    pub fn new(client: &'c ClientWrapper, schema: &'c str) -> Self {
        Pg { db: Db::new(client, schema), carry: None }
    }

    /// In a writer's group, with what jobs carry from one to the next.
    pub fn in_group(client: &'c ClientWrapper, schema: &'c str, carry: &'c Carry, statements: &'c Statements) -> Self {
        Pg { db: Db::keeping(client, schema, statements), carry: Some(carry) }
    }

    pub fn db(&self) -> Db<'c> {
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

    async fn taken(&self, ids: &[&str]) -> Result<HashSet<String>> {
        rows::taken(self.db, ids).await
    }

    async fn put_session(&self, row: &SessionRow, new: bool) -> Result<()> {
        rows::put_session(self.db, row, new).await
    }

    async fn create_sessions(&self, infos: Vec<SessionInfo>) -> Result<Vec<SessionRow>> {
        rows::create_sessions(self.db, infos).await
    }

    async fn put_appended(&self, row: &SessionRow) -> Result<()> {
        let info = &row.info;
        let usage = serde_json::to_string(&info.usage).unwrap_or_else(|_| "null".into());
        let (revision, len) = (info.revision as i64, row.len as i64);
        let sql =
            "UPDATE convo.sessions SET revision = $2, updated_at = $3, len = $4, usage = $5 WHERE session_id = $1";
        execute(self.db, sql, &[&info.session_id, &revision, &info.updated_at, &len, &usage]).await.map(drop)
    }

    async fn delete_session(&self, id: &str) -> Result<()> {
        execute(self.db, "DELETE FROM convo.sessions WHERE session_id = $1", &[&id]).await.map(drop)
    }

    async fn list(&self, listing: &Listing) -> Result<Vec<SessionInfo>> {
        let Listing { limit, after, updated_before } = listing.clone();
        let (at, id) = after.map_or((None, None), |k| (Some(k.created_at), Some(k.session_id)));
        // Two statements, as on SQLite (`sqlite::tx::list_query`): a page after a cursor
        // bounds the index scan with a plain row value, whatever plan is cached.
        let bound =
            if at.is_some() { "(created_at, session_id) < ($1, $2)" } else { "$1::text IS NULL AND $2::text IS NULL" };
        let sql = format!(
            "SELECT {SESSION_COLUMNS} FROM convo.sessions WHERE {bound} \
             AND ($4::text IS NULL OR updated_at < $4) ORDER BY created_at DESC, session_id DESC LIMIT $3"
        );
        let found = query(self.db, &sql, &[&at, &id, &(limit as i64), &updated_before]).await?;
        found.iter().map(|r| rows::session(r).map(|r| r.info)).collect()
    }

    async fn updated_before(&self, at: &str) -> Result<Vec<String>> {
        let found = query(self.db, "SELECT session_id FROM convo.sessions WHERE updated_at < $1", &[&at]).await?;
        Ok(found.iter().map(|r| r.get(0)).collect())
    }

    async fn record(&self, session_id: &str, revision: u64, kind: ChangeKind, message_count: u64) -> Result<()> {
        changes::record(self.db, session_id, revision, kind, message_count).await
    }

    async fn record_each(&self, session_id: &str, kind: ChangeKind, changes: &[(u64, u64)]) -> Result<()> {
        changes::record_each(self.db, session_id, kind, changes).await
    }

    async fn new_segment(&self, parent: Option<i64>, base: u64, owner: &str) -> Result<i64> {
        let sql = "INSERT INTO convo.segments (parent, base, owner) VALUES ($1, $2, $3) RETURNING id";
        let row = query_opt(self.db, sql, &[&parent, &(base as i64), &owner]).await?;
        row.map(|r| r.get(0)).ok_or_else(|| Error::StorageUnavailable("a new segment was not given an id".into()))
    }

    async fn segment(&self, id: i64) -> Result<Option<(Option<i64>, u64)>> {
        let row = query_opt(self.db, "SELECT parent, base FROM convo.segments WHERE id = $1", &[&id]).await?;
        Ok(row.map(|r| (r.get(0), r.get::<_, i64>(1) as u64)))
    }

    /// In one recursive query, bounded in depth instead of checked for loops.
    async fn ancestry(&self, head: i64, start: u64) -> Result<Vec<(i64, u64)>> {
        let chain = query(
            self.db,
            "WITH RECURSIVE chain(id, parent, base, depth) AS ( \
               SELECT id, parent, base, 0 FROM convo.segments WHERE id = $1 \
               UNION ALL \
               SELECT s.id, s.parent, s.base, c.depth + 1 FROM convo.segments s JOIN chain c ON s.id = c.parent \
                 WHERE c.base > $2 AND c.depth < 100000) \
             SELECT id, base FROM chain ORDER BY depth",
            &[&head, &(start as i64)],
        )
        .await?;
        Ok(chain.iter().map(|r| (r.get(0), r.get::<_, i64>(1) as u64)).collect())
    }

    async fn lowest_start_on(&self, id: i64) -> Result<Option<u64>> {
        Ok(self.optional_i64("SELECT min(start) FROM convo.sessions WHERE segment = $1", id).await?.map(|s| s as u64))
    }

    async fn forks_of(&self, id: i64) -> Result<Vec<i64>> {
        let found = query(self.db, "SELECT id FROM convo.segments WHERE parent = $1", &[&id]).await?;
        Ok(found.iter().map(|r| r.get(0)).collect())
    }

    async fn highest_fork(&self, id: i64) -> Result<Option<u64>> {
        Ok(self.optional_i64("SELECT max(base) FROM convo.segments WHERE parent = $1", id).await?.map(|b| b as u64))
    }

    /// In one recursive query.
    async fn lowest_start_below(&self, id: i64) -> Result<Option<u64>> {
        let lowest = self
            .optional_i64(
                "WITH RECURSIVE below(id) AS ( \
                   SELECT $1::bigint UNION ALL SELECT s.id FROM convo.segments s JOIN below b ON s.parent = b.id) \
                 SELECT min(start) FROM convo.sessions WHERE segment IN (SELECT id FROM below)",
                id,
            )
            .await?;
        Ok(lowest.map(|s| s as u64))
    }

    async fn delete_segment(&self, id: i64) -> Result<()> {
        execute(self.db, "DELETE FROM convo.segments WHERE id = $1", &[&id]).await.map(drop)
    }

    async fn detach(&self, id: i64) -> Result<()> {
        execute(self.db, "UPDATE convo.segments SET parent = NULL WHERE id = $1", &[&id]).await.map(drop)
    }

    async fn insert(&self, segment: i64, seq: u64, message: &Message, revision: u64) -> Result<()> {
        rows::insert_message(self.db, segment, seq, message, revision).await
    }

    async fn insert_rows(&self, segment: i64, rows: &[NewRow<'_>]) -> Result<()> {
        rows::insert_messages(self.db, segment, rows).await
    }

    async fn origin(&self, segment: i64, seq: u64) -> Result<(Option<String>, u64)> {
        let sql = "SELECT s.owner, m.revision FROM convo.messages m JOIN convo.segments s ON s.id = m.segment \
                   WHERE m.segment = $1 AND m.seq = $2";
        let row = query_opt(self.db, sql, &[&segment, &(seq as i64)]).await?;
        Ok(row.map_or((None, 0), |r| (r.get(0), r.get::<_, Option<i64>>(1).unwrap_or(0) as u64)))
    }

    async fn messages(&self, segment: i64, lo: u64, hi: u64) -> Result<Vec<Message>> {
        let sql = format!(
            "SELECT {MESSAGE_COLUMNS} FROM convo.messages WHERE segment = $1 AND seq >= $2 AND seq < $3 ORDER BY seq"
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
            "SELECT {MESSAGE_COLUMNS} FROM convo.messages WHERE segment = $1 AND seq >= $2 AND seq < $3 \
             ORDER BY seq DESC LIMIT $4"
        );
        let (lo, hi) = range(lo, hi);
        query(self.db, &sql, &[&segment, &lo, &hi, &(limit as i64)]).await?.iter().map(rows::message).collect()
    }

    async fn roles(&self, segment: i64, lo: u64, hi: u64, limit: u64, newest_first: bool) -> Result<Vec<Role>> {
        let sql = if newest_first {
            "SELECT role FROM convo.messages WHERE segment = $1 AND seq >= $2 AND seq < $3 ORDER BY seq DESC LIMIT $4"
        } else {
            "SELECT role FROM convo.messages WHERE segment = $1 AND seq >= $2 AND seq < $3 ORDER BY seq LIMIT $4"
        };
        let (lo, hi) = range(lo, hi);
        query(self.db, sql, &[&segment, &lo, &hi, &(limit as i64)]).await?.iter().map(rows::role).collect()
    }

    async fn places_of(&self, id: &str) -> Result<Vec<(i64, u64)>> {
        let found = query(self.db, "SELECT segment, seq FROM convo.messages WHERE id = $1", &[&id]).await?;
        Ok(found.iter().map(|r| (r.get(0), r.get::<_, i64>(1) as u64)).collect())
    }

    async fn id_at(&self, segment: i64, seq: u64) -> Result<Option<String>> {
        let sql = "SELECT id FROM convo.messages WHERE segment = $1 AND seq = $2";
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
            && query_opt(self.db, "SELECT 1 FROM convo.drafts WHERE stream_id = $1 FOR UPDATE", &[&stream_id])
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

    fn carried(&self) -> Option<Appending> {
        self.carry.and_then(|c| lock(&c.offered).take())
    }

    fn carry(&self, appending: Appending) {
        if let Some(c) = self.carry {
            *lock(&c.left) = Some(appending);
        }
    }

    fn kept(&self, id: &str) -> Option<Appending> {
        self.carry.and_then(|c| lock(&c.kept).remove(id))
    }
}
