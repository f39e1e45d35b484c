//! Histories as rendered by an earlier read, kept for the next. A host reads a long
//! session's history again and again (an agent at every turn, an editor at every change),
//! and all of it but the newest messages is as it was: a read takes the `CHUNK`-position
//! pieces it rendered before from here, and reads only the rest from the database.
//!
//! What makes a kept piece right: a position of a segment is written once. An append
//! writes positions past the end; every other change to messages (a rewind, a pop, a
//! compaction, a clear) moves its session to a new segment, and only the reclaiming of
//! segments nothing reaches deletes rows. So a piece stays right until a change that is
//! not an append, whichever process made it: a segment's id may be taken again once its
//! segment was deleted. Every change logs a row in the change log in its own transaction
//! (`changes::record`), so each read first reads the log from where this cache last
//! looked to its own snapshot, and lets every piece go when the log shows anything but
//! appends, new sessions, updates of a session's own fields and drafts, or lacks rows it
//! pruned. (A migration that rewrites messages must log a change of another kind.) A read
//! in a snapshot older than the cache's neither takes nor keeps pieces.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::{Arc, Mutex};

use rusqlite::Connection;

use crate::error::Result;
use crate::lock;
use crate::store::MessageJson;
use crate::store::sqlite::changes;
use crate::store::sqlite::errors::sql;

/// How many positions a kept piece covers: piece `k` of a segment is its positions
/// `[k * CHUNK, (k + 1) * CHUNK)`. A read keeps only whole pieces.
pub const CHUNK: u64 = 1024;
/// How many bytes of rendered text are kept at most, the least recently used let go first.
pub const KEPT_BYTES: usize = 32 << 20;
/// The changes that leave every stored message where and as it was (`updated` is of a
/// session's own fields).
const KEEPING: &str = "('appended', 'created', 'updated', 'draft')";

/// The pieces, shared by the reads of one store.
#[derive(Default)]
pub struct Rendered {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// The change log's newest row as of the newest snapshot a read checked.
    checked: Option<i64>,
    /// Counts the times every piece was let go of: a piece is kept, and taken, only in
    /// the generation its read checked.
    generation: u64,
    pieces: HashMap<(i64, u64), Piece>,
    bytes: usize,
    /// Counts takes and keeps, for the least recently used.
    clock: u64,
}

struct Piece {
    messages: Vec<MessageJson>,
    bytes: usize,
    used: u64,
}

/// What one read may take and keep: the generation it checked.
#[derive(Debug, Clone, Copy)]
pub struct Checked {
    generation: u64,
}

impl Rendered {
    /// Brings the cache up to the snapshot `conn` reads in (see the module header);
    /// `None` when that snapshot is older than the newest one checked.
    pub fn check(&self, conn: &Connection) -> Result<Option<Checked>> {
        let newest = changes::newest(conn).map_err(sql)?;
        let before = lock(&self.inner).checked;
        // The log is read without the lock: a read waiting on the file holds up no other.
        let keeps = match before {
            Some(checked) if newest < checked => return Ok(None),
            Some(checked) if newest > checked => {
                let (logged, other): (i64, i64) = conn
                    .prepare_cached(&format!(
                        "SELECT count(*), coalesce(sum(kind NOT IN {KEEPING}), 0) FROM changes \
                         WHERE seq > ?1 AND seq <= ?2"
                    ))
                    .and_then(|mut s| s.query_row([checked, newest], |r| Ok((r.get(0)?, r.get(1)?))))
                    .map_err(sql)?;
                logged == newest - checked && other == 0
            }
            _ => true,
        };
        let mut inner = lock(&self.inner);
        if inner.checked != before {
            // Another read checked meanwhile: this one takes and keeps nothing.
            return Ok(None);
        }
        if !keeps {
            inner.let_go();
        }
        inner.checked = Some(newest);
        Ok(Some(Checked { generation: inner.generation }))
    }

    /// The kept pieces `chunks` of `segment`, each `None` when not kept.
    pub fn take(&self, checked: Checked, segment: i64, chunks: Range<u64>) -> Vec<Option<Vec<MessageJson>>> {
        let mut inner = lock(&self.inner);
        if inner.generation != checked.generation {
            return chunks.map(|_| None).collect();
        }
        let Inner { pieces, clock, .. } = &mut *inner;
        chunks
            .map(|chunk| {
                let piece = pieces.get_mut(&(segment, chunk))?;
                *clock += 1;
                piece.used = *clock;
                Some(piece.messages.clone())
            })
            .collect()
    }

    /// Keeps piece `chunk` of `segment`, `CHUNK` messages read in a snapshot of the
    /// generation `checked`; then lets the least recently used go while over `KEPT_BYTES`.
    pub fn keep(&self, checked: Checked, segment: i64, chunk: u64, messages: Vec<MessageJson>) {
        // Each text the piece holds, as allocated, and each message's `MessageJson`.
        let mut last: Option<&Arc<String>> = None;
        let mut bytes = messages.len() * size_of::<MessageJson>();
        for m in &messages {
            match m {
                MessageJson::Spliced { text, .. } if last.is_some_and(|last| Arc::ptr_eq(last, text)) => {}
                MessageJson::Spliced { text, .. } => {
                    bytes += text.capacity();
                    last = Some(text);
                }
                other => bytes += other.get().len(),
            }
        }
        let mut inner = lock(&self.inner);
        if inner.generation != checked.generation || bytes > KEPT_BYTES / 4 {
            return;
        }
        inner.clock += 1;
        let used = inner.clock;
        if let Some(old) = inner.pieces.insert((segment, chunk), Piece { messages, bytes, used }) {
            inner.bytes -= old.bytes;
        }
        inner.bytes += bytes;
        while inner.bytes > KEPT_BYTES {
            let Some(oldest) = inner.pieces.iter().min_by_key(|(_, p)| p.used).map(|(k, _)| *k) else { break };
            if let Some(gone) = inner.pieces.remove(&oldest) {
                inner.bytes -= gone.bytes;
            }
        }
    }

    /// How many pieces are kept, and their bytes.
    #[cfg(test)]
    pub fn kept(&self) -> (usize, usize) {
        let inner = lock(&self.inner);
        (inner.pieces.len(), inner.bytes)
    }
}

impl Inner {
    fn let_go(&mut self) {
        self.pieces.clear();
        self.bytes = 0;
        self.generation += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A piece of `CHUNK` messages of `len` bytes each.
    fn piece(len: usize) -> Vec<MessageJson> {
        (0..CHUNK).map(|_| MessageJson::Made("x".repeat(len))).collect()
    }

    #[test]
    fn the_least_recently_used_piece_goes_first_past_the_bound() {
        let rendered = Rendered::default();
        let checked = Checked { generation: 0 };
        let per_piece = CHUNK as usize * (4096 + size_of::<MessageJson>());
        let fit = KEPT_BYTES / per_piece;
        for chunk in 0..fit as u64 {
            rendered.keep(checked, 1, chunk, piece(4096));
        }
        assert_eq!(rendered.kept(), (fit, fit * per_piece));
        // Piece 0 is used again: piece 1 is now the least recently used.
        assert!(rendered.take(checked, 1, 0..1)[0].is_some());
        rendered.keep(checked, 1, fit as u64, piece(4096));
        let kept = rendered.take(checked, 1, 0..fit as u64 + 1);
        assert!(kept[0].is_some() && kept[1].is_none() && kept[fit].is_some());
        assert_eq!(rendered.kept(), (fit, fit * per_piece));
    }

    #[test]
    fn a_piece_of_another_generation_is_neither_kept_nor_taken() {
        let rendered = Rendered::default();
        rendered.keep(Checked { generation: 0 }, 1, 0, piece(10));
        lock(&rendered.inner).let_go();
        rendered.keep(Checked { generation: 0 }, 1, 0, piece(10));
        assert_eq!(rendered.kept().0, 0);
        rendered.keep(Checked { generation: 1 }, 1, 0, piece(10));
        assert!(rendered.take(Checked { generation: 0 }, 1, 0..1)[0].is_none());
        assert!(rendered.take(Checked { generation: 1 }, 1, 0..1)[0].is_some());
    }

    #[test]
    fn a_piece_over_a_quarter_of_the_bound_is_not_kept() {
        let rendered = Rendered::default();
        rendered.keep(Checked { generation: 0 }, 1, 0, piece(KEPT_BYTES / 4 / CHUNK as usize + 1));
        assert_eq!(rendered.kept(), (0, 0));
    }
}
