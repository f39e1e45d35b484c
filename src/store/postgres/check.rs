//! `convo fsck` on a PostgreSQL schema: the questions of `store::sql::check`, which
//! writes the findings. Page-level integrity is PostgreSQL's own business (its checksums
//! and `amcheck`), not convo's.

use std::collections::HashMap;

use crate::error::Result;
use crate::store::postgres::rows::{self, MESSAGE_COLUMNS, SESSION_COLUMNS, query};
use crate::store::postgres::tx::Pg;
use crate::store::sql::SessionRow;
use crate::store::sql::check::Inspect;

impl Pg<'_> {
    /// (a text or id, a count) of each row `sql` gives.
    async fn pairs<A: for<'a> tokio_postgres::types::FromSql<'a>>(&self, sql: &str) -> Result<Vec<(A, i64)>> {
        Ok(query(self.db(), sql, &[]).await?.iter().map(|r| (r.get(0), r.get(1))).collect())
    }
}

impl Inspect for Pg<'_> {
    async fn sessions_without_segment(&self) -> Result<Vec<(String, i64)>> {
        self.pairs(
            "SELECT session_id, segment FROM convo.sessions WHERE segment NOT IN (SELECT id FROM convo.segments)",
        )
        .await
    }

    async fn segments_without_parent(&self) -> Result<Vec<(i64, i64)>> {
        self.pairs(
            "SELECT id, parent FROM convo.segments WHERE parent IS NOT NULL AND parent NOT IN (SELECT id FROM convo.segments)",
        )
        .await
    }

    async fn rows_without_segment(&self) -> Result<Vec<(i64, i64)>> {
        self.pairs(
            "SELECT segment, count(*) FROM convo.messages WHERE segment NOT IN (SELECT id FROM convo.segments) GROUP BY segment",
        )
        .await
    }

    async fn unused_segments(&self) -> Result<Vec<(i64, i64)>> {
        self.pairs(
            "WITH RECURSIVE used(id) AS (SELECT segment FROM convo.sessions \
               UNION SELECT s.parent FROM convo.segments s JOIN used u ON s.id = u.id WHERE s.parent IS NOT NULL) \
             SELECT s.id, (SELECT count(*) FROM convo.messages m WHERE m.segment = s.id) FROM convo.segments s \
             WHERE s.id NOT IN (SELECT id FROM used)",
        )
        .await
    }

    async fn rows_below_base(&self) -> Result<Vec<(i64, i64)>> {
        self.pairs(
            "SELECT m.segment, count(*) FROM convo.messages m JOIN convo.segments s ON s.id = m.segment \
             WHERE m.seq < s.base GROUP BY m.segment",
        )
        .await
    }

    async fn all_sessions(&self) -> Result<Vec<std::result::Result<SessionRow, String>>> {
        let found = query(self.db(), &format!("SELECT {SESSION_COLUMNS} FROM convo.sessions"), &[]).await?;
        Ok(found.iter().map(|r| rows::session(r).map_err(|e| e.to_string())).collect())
    }

    async fn rows_in(&self, segment: i64, lo: u64, hi: u64) -> Result<u64> {
        let sql = "SELECT count(*) FROM convo.messages WHERE segment = $1 AND seq >= $2 AND seq < $3";
        let found = query(self.db(), sql, &[&segment, &(lo as i64), &(hi as i64)]).await?;
        Ok(found.first().map_or(0, |r| r.get::<_, i64>(0)) as u64)
    }

    async fn unreadable_messages(&self) -> Result<Vec<(i64, i64, String)>> {
        let all = query(self.db(), &format!("SELECT {MESSAGE_COLUMNS}, segment, seq FROM convo.messages"), &[]).await?;
        Ok(all.iter().filter_map(|r| rows::message(r).err().map(|e| (r.get(11), r.get(12), e.to_string()))).collect())
    }

    async fn image_lists(&self) -> Result<Vec<String>> {
        let found = query(self.db(), "SELECT images FROM convo.messages WHERE images IS NOT NULL", &[]).await?;
        Ok(found.iter().map(|r| r.get(0)).collect())
    }

    async fn image_counts(&self) -> Result<HashMap<String, i64>> {
        let found = query(self.db(), "SELECT hash, refs FROM convo.blobs", &[]).await?;
        Ok(found.iter().map(|r| (r.get(0), r.get(1))).collect())
    }
}
