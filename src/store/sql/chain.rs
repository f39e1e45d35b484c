//! Histories as chains of segments. A message sits at a position counted from the start
//! of its history; a segment holds the positions from its `base` on, and the positions
//! below come from its parent. A session sees positions `[start, len)` of the chain that
//! ends in its own segment. So a fork is one new segment pointing at its parent (O(1)),
//! a trim moves `start`, a clear moves the session to a new segment, and a parent's
//! later changes never show in its forks.
//!
//! Everything here reads through `Tx` and only as far as it must (the trailing group, the
//! last turns, the results after a position), a page at a time.

use crate::error::Result;
use crate::session::{Message, Role, Tail};
use crate::store::MessageJson;
use crate::store::sql::rows::{SessionRow, Span};
use crate::store::sql::tx::Tx;

/// Rows read at once when a walk does not know how far it goes.
const SHORT_PAGE: u64 = 16;
const LONG_PAGE: u64 = 1000;

/// The segment a fork cut at `cut` hangs from: the one serving position `cut - 1`.
pub fn fork_parent(spans: &[Span], start: u64, cut: u64) -> Option<i64> {
    if cut <= start {
        return None;
    }
    spans.iter().find(|s| (s.lo..s.hi).contains(&(cut - 1))).map(|s| s.segment)
}

/// The spans that serve positions `[start, len)`, newest first, from the segments of a
/// chain newest first with their bases (`Tx::ancestry`).
pub fn spans_of(ancestry: &[(i64, u64)], start: u64, len: u64) -> Vec<Span> {
    let mut spans = Vec::new();
    let mut hi = len;
    for &(segment, base) in ancestry {
        if base < hi {
            spans.push(Span { segment, lo: base.max(start), hi });
        }
        if base <= start {
            break;
        }
        hi = base;
    }
    spans
}

/// The spans of a session's history.
pub async fn spans<T: Tx + ?Sized>(tx: &T, row: &SessionRow) -> Result<Vec<Span>> {
    Ok(spans_of(&tx.ancestry(row.segment, row.start).await?, row.start, row.len))
}

/// Positions `offset..offset + limit` of a session's history (to its end without a
/// limit), clamped to what it holds.
pub fn bounds(row: &SessionRow, offset: u64, limit: Option<u64>) -> (u64, u64) {
    let from = row.start.saturating_add(offset).min(row.len);
    let to = limit.map_or(row.len, |l| from.saturating_add(l).min(row.len));
    (from, to)
}

/// The messages at positions `[from, to)`, oldest first, images loaded.
pub async fn read<T: Tx + ?Sized>(tx: &T, spans: &[Span], from: u64, to: u64) -> Result<Vec<Message>> {
    let mut out = Vec::new();
    for span in spans.iter().rev() {
        let (lo, hi) = (span.lo.max(from), span.hi.min(to));
        if lo < hi {
            out.extend(tx.messages(span.segment, lo, hi).await?);
        }
    }
    Ok(out)
}

/// `read`, each message as its JSON text (`Tx::messages_json`).
pub async fn read_json<T: Tx + ?Sized>(tx: &T, spans: &[Span], from: u64, to: u64) -> Result<Vec<MessageJson>> {
    let mut out = Vec::new();
    for span in spans.iter().rev() {
        let (lo, hi) = (span.lo.max(from), span.hi.min(to));
        if lo < hi {
            out.extend(tx.messages_json(span.segment, lo, hi).await?);
        }
    }
    Ok(out)
}

/// The trailing tool-call group: read back to the first message that is not a result.
pub async fn tail<T: Tx + ?Sized>(tx: &T, spans: &[Span]) -> Result<Tail> {
    let mut trailing = Vec::new();
    'spans: for span in spans {
        let mut hi = span.hi;
        while hi > span.lo {
            let page = tx.newest(span.segment, span.lo, hi, SHORT_PAGE).await?;
            hi -= page.len() as u64;
            let short = (page.len() as u64) < SHORT_PAGE;
            for m in page {
                let more = m.role == Role::Tool;
                trailing.push(m);
                if !more {
                    break 'spans;
                }
            }
            if short {
                break;
            }
        }
    }
    Ok(Tail::from_newest_first(&trailing))
}

/// `session::turns_cut` over the stored roles, read newest first only as far as needed.
pub async fn turns_cut<T: Tx + ?Sized>(tx: &T, spans: &[Span], len: u64, max_turns: u64) -> Result<u64> {
    if max_turns == 0 {
        return Ok(len);
    }
    let mut roles = Vec::new();
    let mut users = 0;
    'spans: for span in spans {
        let mut hi = span.hi;
        while hi > span.lo {
            let page = tx.roles(span.segment, span.lo, hi, LONG_PAGE, true).await?;
            hi -= page.len() as u64;
            let short = (page.len() as u64) < LONG_PAGE;
            for role in page {
                users += u64::from(role == Role::User);
                roles.push(role);
                if users >= max_turns {
                    break 'spans;
                }
            }
            if short {
                break;
            }
        }
    }
    Ok(crate::session::turns_cut(len as usize, roles, max_turns) as u64)
}

/// How many tool results directly follow position `from - 1` (`session::rewind_keeps`),
/// read oldest first only as far as they go.
pub async fn results_from<T: Tx + ?Sized>(tx: &T, spans: &[Span], from: u64) -> Result<u64> {
    let mut count = 0;
    for span in spans.iter().rev().filter(|s| s.hi > from) {
        let mut lo = span.lo.max(from);
        while lo < span.hi {
            let page = tx.roles(span.segment, lo, span.hi, SHORT_PAGE, false).await?;
            lo += page.len() as u64;
            let short = (page.len() as u64) < SHORT_PAGE;
            for role in page {
                if role != Role::Tool {
                    return Ok(count);
                }
                count += 1;
            }
            if short {
                break;
            }
        }
    }
    Ok(count)
}

/// The position of message `id` among the positions the spans serve.
pub async fn position_of<T: Tx + ?Sized>(tx: &T, spans: &[Span], id: &str) -> Result<Option<u64>> {
    Ok(place_of(tx, spans, id).await?.map(|(_, position)| position))
}

/// The segment and position of message `id` among the positions the spans serve.
pub async fn place_of<T: Tx + ?Sized>(tx: &T, spans: &[Span], id: &str) -> Result<Option<(i64, u64)>> {
    let places = tx.places_of(id).await?;
    Ok(places
        .into_iter()
        .find(|&(segment, seq)| spans.iter().any(|s| s.segment == segment && (s.lo..s.hi).contains(&seq))))
}

/// The id of the message at `position`.
pub async fn id_at<T: Tx + ?Sized>(tx: &T, spans: &[Span], position: u64) -> Result<Option<String>> {
    match spans.iter().find(|s| (s.lo..s.hi).contains(&position)) {
        Some(span) => tx.id_at(span.segment, position).await,
        None => Ok(None),
    }
}

/// Deletes what nothing can reach any more, starting at segment `id` (after a session
/// left it, was trimmed, or was deleted) and going up its chain. A segment keeps the
/// positions its users need: from the lowest `start` of any session on it or on a fork
/// below it, up to its end when a session is on it, else up to its highest fork point.
/// A segment nothing uses goes whole, and one whose users all start at or past its base
/// lets go of its parent.
pub async fn reclaim<T: Tx + ?Sized>(tx: &T, mut id: i64) -> Result<()> {
    loop {
        let Some((parent, base)) = tx.segment(id).await? else { return Ok(()) };
        let on_it = tx.lowest_start_on(id).await?;
        let highest_fork = tx.highest_fork(id).await?;
        match tx.lowest_start_below(id).await? {
            None => {
                // Forks below were already let go of, or this segment would be in use.
                tx.delete_messages(id, 0, u64::MAX).await?;
                tx.delete_segment(id).await?;
            }
            Some(lowest) => {
                tx.delete_messages(id, 0, lowest).await?;
                if on_it.is_none()
                    && let Some(highest) = highest_fork
                {
                    tx.delete_messages(id, highest, u64::MAX).await?;
                }
                if lowest >= base && parent.is_some() {
                    tx.detach(id).await?;
                }
            }
        }
        match parent {
            Some(p) => id = p,
            None => return Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_go_up_the_chain_only_as_far_as_the_start() {
        // Segment 3 forked from 2 at 5, which forked from 1 at 2.
        let ancestry = [(3, 5), (2, 2), (1, 0)];
        assert_eq!(
            spans_of(&ancestry, 0, 7),
            [Span { segment: 3, lo: 5, hi: 7 }, Span { segment: 2, lo: 2, hi: 5 }, Span { segment: 1, lo: 0, hi: 2 }]
        );
        assert_eq!(spans_of(&ancestry, 3, 7), [Span { segment: 3, lo: 5, hi: 7 }, Span { segment: 2, lo: 3, hi: 5 }]);
        assert_eq!(spans_of(&ancestry, 6, 7), [Span { segment: 3, lo: 6, hi: 7 }]);
    }

    #[test]
    fn a_segment_that_serves_nothing_is_skipped() {
        // A fork cut at its parent's end, with nothing of its own yet.
        assert_eq!(spans_of(&[(2, 4), (1, 0)], 0, 4), [Span { segment: 1, lo: 0, hi: 4 }]);
        assert_eq!(spans_of(&[(1, 0)], 0, 0), []);
    }

    #[test]
    fn a_fork_hangs_from_the_segment_serving_the_position_before_its_cut() {
        let spans = [Span { segment: 3, lo: 5, hi: 7 }, Span { segment: 2, lo: 2, hi: 5 }];
        assert_eq!(fork_parent(&spans, 2, 6), Some(3));
        assert_eq!(fork_parent(&spans, 2, 5), Some(2));
        assert_eq!(fork_parent(&spans, 2, 2), None, "a cut at the start keeps nothing");
    }
}
