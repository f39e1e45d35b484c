//! Histories as chains of segments, exactly as in the SQLite store (see
//! `store::sqlite::chain` for the design): a fork is one new segment, a trim moves
//! `start`, a clear moves the session to a new segment. Here the chain is read in one
//! recursive query, and the reads go by ranges.

use deadpool_postgres::ClientWrapper as Db;

use crate::error::Result;
use crate::session::{Message, Role, Tail};
use crate::store::postgres::rows::{self, MESSAGE_COLUMNS, execute, query, query_opt};
use crate::store::row::Span;

pub async fn new_segment(db: &Db, parent: Option<i64>, base: u64) -> Result<i64> {
    let row =
        query_opt(db, "INSERT INTO segments (parent, base) VALUES ($1, $2) RETURNING id", &[&parent, &(base as i64)])
            .await?
            .expect("INSERT … RETURNING gives a row");
    Ok(row.get(0))
}

/// The spans that serve positions `[start, len)` of the chain ending in `head`, newest
/// first.
pub async fn spans(db: &Db, head: i64, start: u64, len: u64) -> Result<Vec<Span>> {
    let chain = query(
        db,
        "WITH RECURSIVE chain(id, parent, base, depth) AS ( \
           SELECT id, parent, base, 0 FROM segments WHERE id = $1 \
           UNION ALL \
           SELECT s.id, s.parent, s.base, c.depth + 1 FROM segments s JOIN chain c ON s.id = c.parent \
             WHERE c.base > $2 AND c.depth < 100000) \
         SELECT id, base FROM chain ORDER BY depth",
        &[&head, &(start as i64)],
    )
    .await?;
    let mut spans = Vec::new();
    let mut hi = len;
    for row in chain {
        let (id, base): (i64, i64) = (row.get(0), row.get(1));
        let base = base as u64;
        if base < hi {
            spans.push(Span { segment: id, lo: base.max(start), hi });
        }
        if base <= start {
            break;
        }
        hi = base;
    }
    Ok(spans)
}

/// The messages at positions `[from, to)`, oldest first, images loaded.
pub async fn read(db: &Db, spans: &[Span], from: u64, to: u64) -> Result<Vec<Message>> {
    let sql =
        format!("SELECT {MESSAGE_COLUMNS} FROM messages WHERE segment = $1 AND seq >= $2 AND seq < $3 ORDER BY seq");
    let mut out = Vec::new();
    for span in spans.iter().rev() {
        let (lo, hi) = (span.lo.max(from), span.hi.min(to));
        if lo >= hi {
            continue;
        }
        for row in query(db, &sql, &[&span.segment, &(lo as i64), &(hi as i64)]).await? {
            let mut message = rows::message(&row)?;
            rows::load_images(db, &mut message).await?;
            out.push(message);
        }
    }
    Ok(out)
}

/// The trailing tool-call group: read back to the first message that is not a result.
pub async fn tail(db: &Db, spans: &[Span]) -> Result<Tail> {
    let sql = format!(
        "SELECT {MESSAGE_COLUMNS} FROM messages WHERE segment = $1 AND seq >= $2 AND seq < $3 \
         ORDER BY seq DESC LIMIT $4"
    );
    let mut trailing = Vec::new();
    'spans: for span in spans {
        // Groups are short: read a few rows at a time, newest first.
        let mut hi = span.hi;
        while hi > span.lo {
            let page = query(db, &sql, &[&span.segment, &(span.lo as i64), &(hi as i64), &16i64]).await?;
            if page.is_empty() {
                break;
            }
            for row in &page {
                let m = rows::message(row)?;
                let more = m.role == Role::Tool;
                trailing.push(m);
                if !more {
                    break 'spans;
                }
            }
            hi -= page.len() as u64;
        }
    }
    Ok(Tail::from_newest_first(&trailing))
}

/// `session::turns_cut` over the stored roles, read newest first only as far as needed.
pub async fn turns_cut(db: &Db, spans: &[Span], len: u64, max_turns: u64) -> Result<u64> {
    if max_turns == 0 {
        return Ok(len);
    }
    let mut roles = Vec::new();
    let mut users = 0;
    'spans: for span in spans {
        let mut hi = span.hi;
        while hi > span.lo {
            let page = query(
                db,
                "SELECT role FROM messages WHERE segment = $1 AND seq >= $2 AND seq < $3 ORDER BY seq DESC LIMIT 1000",
                &[&span.segment, &(span.lo as i64), &(hi as i64)],
            )
            .await?;
            if page.is_empty() {
                break;
            }
            for row in &page {
                let role = rows::role(row)?;
                users += u64::from(role == Role::User);
                roles.push(role);
                if users >= max_turns {
                    break 'spans;
                }
            }
            hi -= page.len() as u64;
        }
    }
    Ok(crate::session::turns_cut(len as usize, roles, max_turns) as u64)
}

/// How many tool results directly follow position `from - 1` (`session::rewind_keeps`),
/// read oldest first a few at a time, only as far as they go.
pub async fn results_from(db: &Db, spans: &[Span], from: u64) -> Result<u64> {
    let mut count = 0;
    for span in spans.iter().rev().filter(|s| s.hi > from) {
        let mut lo = span.lo.max(from);
        while lo < span.hi {
            let page = query(
                db,
                "SELECT role FROM messages WHERE segment = $1 AND seq >= $2 AND seq < $3 ORDER BY seq LIMIT 16",
                &[&span.segment, &(lo as i64), &(span.hi as i64)],
            )
            .await?;
            if page.is_empty() {
                break;
            }
            for row in &page {
                if rows::role(row)? != Role::Tool {
                    return Ok(count);
                }
                count += 1;
            }
            lo += page.len() as u64;
        }
    }
    Ok(count)
}

/// The position of message `id` among the positions the spans serve.
pub async fn position_of(db: &Db, spans: &[Span], id: &str) -> Result<Option<u64>> {
    let found = query(db, "SELECT segment, seq FROM messages WHERE id = $1", &[&id]).await?;
    Ok(found.iter().map(|r| (r.get::<_, i64>(0), r.get::<_, i64>(1) as u64)).find_map(|(segment, seq)| {
        spans.iter().any(|s| s.segment == segment && (s.lo..s.hi).contains(&seq)).then_some(seq)
    }))
}

/// The id of the message at `position`.
pub async fn id_at(db: &Db, spans: &[Span], position: u64) -> Result<Option<String>> {
    let Some(span) = spans.iter().find(|s| (s.lo..s.hi).contains(&position)) else { return Ok(None) };
    let row =
        query_opt(db, "SELECT id FROM messages WHERE segment = $1 AND seq = $2", &[&span.segment, &(position as i64)])
            .await?;
    Ok(row.map(|r| r.get(0)))
}

/// Deletes what nothing can reach any more, starting at segment `id` and going up its
/// chain; the same rules as `store::sqlite::chain::reclaim`.
pub async fn reclaim(db: &Db, mut id: i64) -> Result<()> {
    loop {
        let Some(segment) = query_opt(db, "SELECT parent, base FROM segments WHERE id = $1", &[&id]).await? else {
            return Ok(());
        };
        let (parent, base): (Option<i64>, i64) = (segment.get(0), segment.get(1));
        let on_it: Option<i64> =
            query_opt(db, "SELECT min(start) FROM sessions WHERE segment = $1", &[&id]).await?.and_then(|r| r.get(0));
        let highest_fork: Option<i64> =
            query_opt(db, "SELECT max(base) FROM segments WHERE parent = $1", &[&id]).await?.and_then(|r| r.get(0));
        match lowest_start(db, id).await? {
            None => {
                rows::delete_messages(db, id, 0, u64::MAX).await?;
                // Forks below were already let go of, or this segment would be in use.
                execute(db, "DELETE FROM segments WHERE id = $1", &[&id]).await?;
            }
            Some(lowest) => {
                rows::delete_messages(db, id, 0, lowest).await?;
                if on_it.is_none()
                    && let Some(highest) = highest_fork
                {
                    rows::delete_messages(db, id, highest as u64, u64::MAX).await?;
                }
                if lowest >= base as u64 && parent.is_some() {
                    execute(db, "UPDATE segments SET parent = NULL WHERE id = $1", &[&id]).await?;
                }
            }
        }
        match parent {
            Some(p) => id = p,
            None => return Ok(()),
        }
    }
}

/// The lowest position any session sees through segment `id`: its own sessions' starts
/// and, through its forks, theirs (one recursive query). `None` when nothing uses it.
async fn lowest_start(db: &Db, id: i64) -> Result<Option<u64>> {
    let row = query_opt(
        db,
        "WITH RECURSIVE below(id) AS ( \
           SELECT $1::bigint UNION ALL SELECT s.id FROM segments s JOIN below b ON s.parent = b.id) \
         SELECT min(start) FROM sessions WHERE segment IN (SELECT id FROM below)",
        &[&id],
    )
    .await?;
    Ok(row.and_then(|r| r.get::<_, Option<i64>>(0)).map(|s| s as u64))
}
