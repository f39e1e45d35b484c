//! `convo fsck` on a database file: SQLite's own integrity check, then the questions of
//! `store::sql::check`, which writes the findings.

use std::collections::HashMap;

use crate::error::Result;
use crate::store::sql::SessionRow;
use crate::store::sql::check::Inspect;
use crate::store::sqlite::errors::sql;
use crate::store::sqlite::rows::{self, MESSAGE_COLUMNS, SESSION_COLUMNS};
use crate::store::sqlite::tx::Lite;

impl Lite<'_> {
    fn strings(&self, query: &str) -> Result<Vec<String>> {
        let mut stmt = self.conn().prepare(query).map_err(sql)?;
        stmt.query_map([], |r| r.get(0)).map_err(sql)?.collect::<rusqlite::Result<_>>().map_err(sql)
    }

    fn pairs<A: rusqlite::types::FromSql>(&self, query: &str) -> Result<Vec<(A, i64)>> {
        let mut stmt = self.conn().prepare(query).map_err(sql)?;
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).map_err(sql)?.collect::<rusqlite::Result<_>>().map_err(sql)
    }
}

impl Inspect for Lite<'_> {
    async fn integrity(&self) -> Result<Vec<String>> {
        let rows = self.strings("PRAGMA integrity_check")?;
        Ok(rows.into_iter().filter(|r| r != "ok").map(|r| format!("integrity check: {r}")).collect())
    }

    async fn sessions_without_segment(&self) -> Result<Vec<(String, i64)>> {
        self.pairs("SELECT session_id, segment FROM sessions WHERE segment NOT IN (SELECT id FROM segments)")
    }

    async fn segments_without_parent(&self) -> Result<Vec<(i64, i64)>> {
        self.pairs(
            "SELECT id, parent FROM segments WHERE parent IS NOT NULL AND parent NOT IN (SELECT id FROM segments)",
        )
    }

    async fn rows_without_segment(&self) -> Result<Vec<(i64, i64)>> {
        self.pairs(
            "SELECT segment, count(*) FROM messages WHERE segment NOT IN (SELECT id FROM segments) GROUP BY segment",
        )
    }

    async fn unused_segments(&self) -> Result<Vec<(i64, i64)>> {
        self.pairs(
            "WITH RECURSIVE used(id) AS (SELECT segment FROM sessions \
               UNION SELECT s.parent FROM segments s JOIN used u ON s.id = u.id WHERE s.parent IS NOT NULL) \
             SELECT s.id, (SELECT count(*) FROM messages m WHERE m.segment = s.id) FROM segments s \
             WHERE s.id NOT IN used",
        )
    }

    async fn rows_below_base(&self) -> Result<Vec<(i64, i64)>> {
        self.pairs(
            "SELECT m.segment, count(*) FROM messages m JOIN segments s ON s.id = m.segment \
             WHERE m.seq < s.base GROUP BY m.segment",
        )
    }

    async fn all_sessions(&self) -> Result<Vec<std::result::Result<SessionRow, String>>> {
        let mut stmt = self.conn().prepare(&format!("SELECT {SESSION_COLUMNS} FROM sessions")).map_err(sql)?;
        let sessions = stmt.query_map([], rows::session).map_err(sql)?.collect::<rusqlite::Result<Vec<_>>>();
        Ok(sessions.map_err(sql)?.into_iter().map(Ok).collect())
    }

    async fn rows_in(&self, segment: i64, lo: u64, hi: u64) -> Result<u64> {
        let places = rows::places(segment, lo, hi)?;
        self.conn()
            .prepare_cached("SELECT count(*) FROM messages WHERE place >= ?1 AND place < ?2")
            .and_then(|mut s| s.query_row(places, |r| r.get::<_, i64>(0)))
            .map(|n| n as u64)
            .map_err(sql)
    }

    async fn unreadable_messages(&self) -> Result<Vec<(i64, i64, String)>> {
        let mut found = Vec::new();
        let mut stmt =
            self.conn().prepare(&format!("SELECT {MESSAGE_COLUMNS}, segment, seq FROM messages")).map_err(sql)?;
        let mut all = stmt.query([]).map_err(sql)?;
        while let Some(row) = all.next().map_err(sql)? {
            if let Err(e) = rows::message(row) {
                found.push((row.get(11).map_err(sql)?, row.get(12).map_err(sql)?, e.to_string()));
            }
        }
        Ok(found)
    }

    async fn image_lists(&self) -> Result<Vec<String>> {
        self.strings("SELECT images FROM messages WHERE images IS NOT NULL")
    }

    async fn image_counts(&self) -> Result<HashMap<String, i64>> {
        let mut stmt = self.conn().prepare("SELECT hash, refs FROM blobs").map_err(sql)?;
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).map_err(sql)?.collect::<rusqlite::Result<_>>().map_err(sql)
    }
}
