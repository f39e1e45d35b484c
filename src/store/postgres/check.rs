//! `convo fsck` on a PostgreSQL schema: what convo keeps true of its tables, as
//! `store::sqlite::check` does for a file (every row belongs to something that exists,
//! every segment is used, no message below its segment's base, every session's chain
//! serves each position of its history once, every message row reads back, image
//! reference counts match). Page-level integrity is PostgreSQL's own business (its
//! checksums and `amcheck`), not convo's.

use std::collections::HashMap;

use deadpool_postgres::ClientWrapper as Db;

use crate::error::Result;
use crate::store::postgres::chain;
use crate::store::postgres::rows::{self, MESSAGE_COLUMNS, SESSION_COLUMNS, query};

pub async fn check(db: &Db) -> Result<Vec<String>> {
    let mut found = orphans(db).await?;
    found.extend(chains(db).await?);
    found.extend(messages(db).await?);
    found.extend(images(db).await?);
    Ok(found)
}

async fn pairs(db: &Db, sql: &str) -> Result<Vec<(String, i64)>> {
    let rows = query(db, sql, &[]).await?;
    Ok(rows.iter().map(|r| (r.get::<_, Option<String>>(0).unwrap_or_default(), r.get::<_, i64>(1))).collect())
}

async fn orphans(db: &Db) -> Result<Vec<String>> {
    let mut found = Vec::new();
    let sessions = "SELECT session_id, segment FROM sessions WHERE segment NOT IN (SELECT id FROM segments)";
    for (session, segment) in pairs(db, sessions).await? {
        found.push(format!("session {}: its segment {segment} does not exist", crate::error::quote(&session)));
    }
    let messages = "SELECT segment::text, count(*) FROM messages WHERE segment NOT IN (SELECT id FROM segments) \
                    GROUP BY segment";
    for (segment, n) in pairs(db, messages).await? {
        found.push(format!("{n} message row(s) belong to segment {segment}, which does not exist (orphan rows)"));
    }
    let unused = "WITH RECURSIVE used(id) AS (SELECT segment FROM sessions \
                    UNION SELECT s.parent FROM segments s JOIN used u ON s.id = u.id WHERE s.parent IS NOT NULL) \
                  SELECT s.id::text, (SELECT count(*) FROM messages m WHERE m.segment = s.id) FROM segments s \
                  WHERE s.id NOT IN (SELECT id FROM used)";
    for (segment, n) in pairs(db, unused).await? {
        found.push(format!("segment {segment} is used by no session; its {n} message row(s) are orphans"));
    }
    let below = "SELECT m.segment::text, count(*) FROM messages m JOIN segments s ON s.id = m.segment \
                 WHERE m.seq < s.base GROUP BY m.segment";
    for (segment, n) in pairs(db, below).await? {
        found.push(format!("segment {segment}: {n} message row(s) sit below its base, where no session reads"));
    }
    Ok(found)
}

async fn chains(db: &Db) -> Result<Vec<String>> {
    let mut found = Vec::new();
    for row in query(db, &format!("SELECT {SESSION_COLUMNS} FROM sessions"), &[]).await? {
        let row = match rows::session(&row) {
            Ok(row) => row,
            Err(e) => {
                found.push(format!("a session row cannot be read: {e}"));
                continue;
            }
        };
        let id = crate::error::quote(&row.info.session_id);
        if row.start > row.len {
            found.push(format!("session {id}: its history starts at {} past its end {}", row.start, row.len));
            continue;
        }
        let spans = chain::spans(db, row.segment, row.start, row.len).await?;
        let mut served = 0;
        for span in &spans {
            let n: i64 = query(
                db,
                "SELECT count(*) FROM messages WHERE segment = $1 AND seq >= $2 AND seq < $3",
                &[&span.segment, &(span.lo as i64), &(span.hi as i64)],
            )
            .await?[0]
                .get(0);
            if n as u64 != span.hi - span.lo {
                found.push(format!(
                    "session {id}: positions {}..{} should be in segment {}, which holds {n} of those {} message rows",
                    span.lo,
                    span.hi,
                    span.segment,
                    span.hi - span.lo
                ));
            }
            served += span.hi - span.lo;
        }
        if served != row.len - row.start {
            found.push(format!(
                "session {id}: its chain serves {served} of its {} positions (a broken chain)",
                row.len - row.start
            ));
        }
    }
    Ok(found)
}

async fn messages(db: &Db) -> Result<Vec<String>> {
    let mut found = Vec::new();
    for row in query(db, &format!("SELECT {MESSAGE_COLUMNS}, segment, seq FROM messages"), &[]).await? {
        if let Err(e) = rows::message(&row) {
            let (segment, seq): (i64, i64) = (row.get(9), row.get(10));
            found.push(format!("message row (segment {segment}, position {seq}) cannot be read: {e}"));
        }
    }
    Ok(found)
}

async fn images(db: &Db) -> Result<Vec<String>> {
    let mut found = Vec::new();
    let mut named: HashMap<String, i64> = HashMap::new();
    for row in query(db, "SELECT images FROM messages WHERE images IS NOT NULL", &[]).await? {
        match serde_json::from_str::<Vec<String>>(row.get(0)) {
            Ok(hashes) => hashes.into_iter().for_each(|h| *named.entry(h).or_default() += 1),
            Err(e) => found.push(format!("a message row's image list is not a list of hashes: {e}")),
        }
    }
    let blobs: HashMap<String, i64> =
        query(db, "SELECT hash, refs FROM blobs", &[]).await?.iter().map(|r| (r.get(0), r.get(1))).collect();
    for (hash, refs) in &blobs {
        let rows = named.get(hash).copied().unwrap_or(0);
        if *refs != rows {
            found.push(format!("image {hash}: counts {refs} reference(s), but {rows} message row(s) name it"));
        }
    }
    for (hash, rows) in &named {
        if !blobs.contains_key(hash) {
            found.push(format!("image {hash}: {rows} message row(s) name it, but it is missing"));
        }
    }
    found.sort();
    Ok(found)
}
