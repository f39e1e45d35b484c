//! `convo fsck` on an SQL store: the engine's own integrity check where it has one, then
//! what convo keeps true of its tables (see `chain`): every row belongs to something that
//! exists, every segment is used by a session (directly or through a fork below it), no
//! message sits below its segment's base, every session's chain ends without a loop and
//! serves each position of its history exactly once, every message row reads back, and
//! each image's reference count equals the message rows that name it.
//!
//! The findings are written here once; a backend answers the questions (`Inspect`).

use std::collections::HashMap;

use crate::error::{Result, quote};
use crate::store::sql::chain;
use crate::store::sql::rows::SessionRow;
use crate::store::sql::tx::Tx;

/// The read-only questions fsck asks of a backend's tables.
#[allow(async_fn_in_trait, reason = "crate-internal; each caller names its backend, so Send is known")]
pub trait Inspect: Tx {
    /// The engine's own findings about its pages; none when it has no such check.
    async fn integrity(&self) -> Result<Vec<String>> {
        Ok(Vec::new())
    }
    /// (session, segment) of each session whose segment does not exist.
    async fn sessions_without_segment(&self) -> Result<Vec<(String, i64)>>;
    /// (segment, parent) of each segment whose parent does not exist.
    async fn segments_without_parent(&self) -> Result<Vec<(i64, i64)>>;
    /// (segment, rows) for message rows whose segment does not exist.
    async fn rows_without_segment(&self) -> Result<Vec<(i64, i64)>>;
    /// (segment, rows) of each segment no session reaches.
    async fn unused_segments(&self) -> Result<Vec<(i64, i64)>>;
    /// (segment, rows) of the message rows below their segment's base.
    async fn rows_below_base(&self) -> Result<Vec<(i64, i64)>>;
    /// Every session row, or why it does not read.
    async fn all_sessions(&self) -> Result<Vec<std::result::Result<SessionRow, String>>>;
    /// How many message rows `[lo, hi)` of a segment holds.
    async fn rows_in(&self, segment: i64, lo: u64, hi: u64) -> Result<u64>;
    /// (segment, position, why) of each message row that does not read as a message.
    async fn unreadable_messages(&self) -> Result<Vec<(i64, i64, String)>>;
    /// The image lists of the message rows that have images (JSON arrays of hashes).
    async fn image_lists(&self) -> Result<Vec<String>>;
    /// (hash, reference count) of every stored image.
    async fn image_counts(&self) -> Result<HashMap<String, i64>>;
}

/// Every finding, each a sentence; empty when the store is sound.
pub async fn check<T: Inspect + ?Sized>(tx: &T) -> Result<Vec<String>> {
    let mut found = tx.integrity().await?;
    if !found.is_empty() {
        // The tables themselves are damaged: what they say cannot be trusted.
        return Ok(found);
    }
    found.extend(orphans(tx).await?);
    found.extend(chains(tx).await?);
    for (segment, seq, why) in tx.unreadable_messages().await? {
        found.push(format!("message row (segment {segment}, position {seq}) cannot be read: {why}"));
    }
    found.extend(images(tx).await?);
    Ok(found)
}

/// Rows that name a row that is not there, and segments nothing uses.
async fn orphans<T: Inspect + ?Sized>(tx: &T) -> Result<Vec<String>> {
    let mut found = Vec::new();
    for (session, segment) in tx.sessions_without_segment().await? {
        found.push(format!("session {}: its segment {segment} does not exist", quote(&session)));
    }
    for (segment, parent) in tx.segments_without_parent().await? {
        found.push(format!("segment {segment}: its parent segment {parent} does not exist"));
    }
    for (segment, n) in tx.rows_without_segment().await? {
        found.push(format!("{n} message row(s) belong to segment {segment}, which does not exist (orphan rows)"));
    }
    for (segment, n) in tx.unused_segments().await? {
        found.push(format!("segment {segment} is used by no session; its {n} message row(s) are orphans"));
    }
    for (segment, n) in tx.rows_below_base().await? {
        found.push(format!("segment {segment}: {n} message row(s) sit below its base, where no session reads"));
    }
    Ok(found)
}

/// Each session's history: its chain, and one message row per position.
async fn chains<T: Inspect + ?Sized>(tx: &T) -> Result<Vec<String>> {
    let mut found = Vec::new();
    for row in tx.all_sessions().await? {
        let row = match row {
            Ok(row) => row,
            Err(why) => {
                found.push(format!("a session row cannot be read: {why}"));
                continue;
            }
        };
        let id = quote(&row.info.session_id);
        if row.start > row.len {
            found.push(format!("session {id}: its history starts at {} past its end {}", row.start, row.len));
            continue;
        }
        let spans = match chain::spans(tx, &row).await {
            Ok(spans) => spans,
            Err(e) => {
                found.push(format!("session {id}: its segment chain cannot be walked: {e}"));
                continue;
            }
        };
        let mut served = 0;
        for span in &spans {
            let n = tx.rows_in(span.segment, span.lo, span.hi).await?;
            if n != span.hi - span.lo {
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
        if served != row.count() {
            found.push(format!(
                "session {id}: its chain serves {served} of its {} positions (a broken chain)",
                row.count()
            ));
        }
    }
    Ok(found)
}

/// Images: each reference counted once per message row that names it, none missing.
async fn images<T: Inspect + ?Sized>(tx: &T) -> Result<Vec<String>> {
    let mut found = Vec::new();
    let mut named: HashMap<String, i64> = HashMap::new();
    for list in tx.image_lists().await? {
        match serde_json::from_str::<Vec<String>>(&list) {
            Ok(hashes) => hashes.into_iter().for_each(|h| *named.entry(h).or_default() += 1),
            Err(e) => found.push(format!("a message row's image list is not a list of hashes: {e}")),
        }
    }
    let blobs = tx.image_counts().await?;
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
