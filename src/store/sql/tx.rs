//! What a backend provides to the shared algorithms: the statements of one transaction
//! (`Tx`), each a small query, and `run_now` for a backend whose statements never wait.

use std::collections::HashSet;
use std::future::Future;

use futures_util::FutureExt;

use crate::error::{Error, Result};
use crate::session::{Draft, Message, Role, SessionInfo, Tail};
use crate::store::feed::ChangeKind;
use crate::store::sql::rows::{Listing, Searching, SessionRow, Span};
use crate::store::{Found, MessageJson, message_json};

/// A session as an append left it, for an append to it in the next job of the same
/// transaction (`Tx::carry`): 64 appends pipelined on one session then read it once.
#[derive(Clone)]
pub struct Appending {
    pub(super) row: SessionRow,
    pub(super) spans: Vec<Span>,
    pub(super) tail: Tail,
}

/// A message to insert: its position, and the revision of the change that stores it.
pub struct NewRow<'m> {
    pub seq: u64,
    pub message: &'m Message,
    pub revision: u64,
}

impl Appending {
    pub fn session_id(&self) -> &str {
        &self.row.info.session_id
    }
}

/// The statements of one transaction, as a backend runs them. Positions and segment ids
/// are the chain's (`chain`); "newest first" reads go down from `hi`, "oldest first" up
/// from `lo`; `limit` bounds a page, and a shorter page means the range is exhausted.
///
/// In a write transaction, `session(id, true)` locks the row until the transaction ends
/// (PostgreSQL's `FOR UPDATE`; SQLite's writer holds the whole database anyway).
#[allow(async_fn_in_trait, reason = "crate-internal; each caller names its backend, so Send is known")]
pub trait Tx {
    // Sessions.
    async fn session(&self, id: &str, lock: bool) -> Result<Option<SessionRow>>;
    /// Which of `ids` name a session now (none locked). By default each looked up, all
    /// issued together.
    async fn taken(&self, ids: &[&str]) -> Result<HashSet<String>> {
        let found = futures_util::future::try_join_all(ids.iter().map(|id| self.session(id, false))).await?;
        Ok(ids.iter().zip(found).filter(|(_, row)| row.is_some()).map(|(id, _)| (*id).to_owned()).collect())
    }
    /// Writes a session row whole. `new`: it must not exist yet (else `SessionExists`).
    async fn put_session(&self, row: &SessionRow, new: bool) -> Result<()>;
    /// Writes what an append changes in a row: revision, `updated_at`, `len`.
    async fn put_appended(&self, row: &SessionRow) -> Result<()> {
        self.put_session(row, false).await
    }
    /// Makes new sessions (of revision 0, their ids free when looked up), each on a new
    /// segment of its own, and logs their creation: their rows, in order. An id taken
    /// meanwhile fails the whole (`SessionExists`). By default one session at a time,
    /// all issued together.
    async fn create_sessions(&self, infos: Vec<SessionInfo>) -> Result<Vec<SessionRow>> {
        let made = infos.iter().map(|info| self.new_segment(None, 0, &info.session_id));
        let segments = futures_util::future::try_join_all(made).await?;
        let rows: Vec<SessionRow> = infos
            .into_iter()
            .zip(segments)
            .map(|(info, segment)| SessionRow { info, segment, start: 0, len: 0 })
            .collect();
        let put = rows.iter().map(|row| async move {
            self.put_session(row, true).await?;
            self.record(&row.info.session_id, 0, ChangeKind::Created, 0).await
        });
        futures_util::future::try_join_all(put).await?;
        Ok(rows)
    }
    async fn delete_session(&self, id: &str) -> Result<()>;
    async fn list(&self, listing: &Listing) -> Result<Vec<SessionInfo>>;
    /// The ids of the sessions last updated before `at` (a canonical time stamp).
    async fn updated_before(&self, at: &str) -> Result<Vec<String>>;
    /// Logs a committed change for watchers (`store::feed`), in this transaction.
    async fn record(&self, session_id: &str, revision: u64, kind: ChangeKind, message_count: u64) -> Result<()>;

    // Segments.
    /// A new segment for the session `owner`: a history of its own from `base` on.
    async fn new_segment(&self, parent: Option<i64>, base: u64, owner: &str) -> Result<i64>;
    /// A segment's parent and base, if it exists.
    async fn segment(&self, id: i64) -> Result<Option<(Option<i64>, u64)>>;
    /// The segments from `head` up its parents, each with its base, newest first, as far
    /// as the first whose base is at or below `start` (or the root).
    /// By default one segment at a time; a chain that comes back to a segment (only a
    /// damaged database has one) is an error, not an endless walk.
    async fn ancestry(&self, head: i64, start: u64) -> Result<Vec<(i64, u64)>> {
        let mut out = Vec::new();
        let mut seen = HashSet::new();
        let mut next = Some(head);
        while let Some(id) = next {
            if !seen.insert(id) {
                return Err(Error::StorageUnavailable(format!("the chain of segment {head} loops at segment {id}")));
            }
            let (parent, base) = self
                .segment(id)
                .await?
                .ok_or_else(|| Error::StorageUnavailable(format!("segment {id} of the chain of {head} is missing")))?;
            out.push((id, base));
            if base <= start {
                break;
            }
            next = parent;
        }
        Ok(out)
    }
    /// The lowest `start` of the sessions on segment `id`.
    async fn lowest_start_on(&self, id: i64) -> Result<Option<u64>>;
    /// The segments forked from `id`.
    async fn forks_of(&self, id: i64) -> Result<Vec<i64>>;
    /// The highest base of the segments forked from `id`.
    async fn highest_fork(&self, id: i64) -> Result<Option<u64>>;
    /// The lowest `start` of any session on `id` or on a fork below it (`chain::reclaim`).
    /// By default one segment at a time: its own sessions' starts and, through its
    /// forks, theirs.
    async fn lowest_start_below(&self, id: i64) -> Result<Option<u64>> {
        let mut lowest: Option<u64> = None;
        let mut pending = vec![id];
        while let Some(segment) = pending.pop() {
            if let Some(start) = self.lowest_start_on(segment).await? {
                lowest = Some(lowest.map_or(start, |l| l.min(start)));
            }
            pending.extend(self.forks_of(segment).await?);
        }
        Ok(lowest)
    }
    async fn delete_segment(&self, id: i64) -> Result<()>;
    /// Lets go of a segment's parent.
    async fn detach(&self, id: i64) -> Result<()>;

    /// Logs changes of one kind to one session, each a (revision, message count).
    /// By default one at a time, all issued together.
    async fn record_each(&self, session_id: &str, kind: ChangeKind, changes: &[(u64, u64)]) -> Result<()> {
        let records = changes.iter().map(|&(revision, count)| self.record(session_id, revision, kind, count));
        futures_util::future::try_join_all(records).await.map(drop)
    }

    // Messages.
    /// Inserts a message stored by the change that made `revision` of its session.
    async fn insert(&self, segment: i64, seq: u64, message: &Message, revision: u64) -> Result<()>;
    /// Inserts rows of one segment. By default one at a time, all issued together (a
    /// server store sends them in one round trip).
    async fn insert_rows(&self, segment: i64, rows: &[NewRow<'_>]) -> Result<()> {
        let inserts = rows.iter().map(|r| self.insert(segment, r.seq, r.message, r.revision));
        futures_util::future::try_join_all(inserts).await.map(drop)
    }
    /// Who stored the message at `seq` of `segment`: its segment's owner (unknown for a
    /// segment older than owners), and the revision the change that stored it made.
    async fn origin(&self, segment: i64, seq: u64) -> Result<(Option<String>, u64)>;
    /// The messages at `[lo, hi)` of one segment, oldest first, images loaded.
    async fn messages(&self, segment: i64, lo: u64, hi: u64) -> Result<Vec<Message>>;
    /// `messages`, each as the JSON text it serializes to: a backend that holds that text
    /// hands it out without building each message.
    async fn messages_json(&self, segment: i64, lo: u64, hi: u64) -> Result<Vec<MessageJson>> {
        self.messages(segment, lo, hi).await?.iter().map(message_json).collect()
    }
    /// Up to `limit` messages below `hi` (and at or above `lo`), newest first.
    async fn newest(&self, segment: i64, lo: u64, hi: u64, limit: u64) -> Result<Vec<Message>>;
    /// Up to `limit` roles of `[lo, hi)`: newest first, or oldest first.
    async fn roles(&self, segment: i64, lo: u64, hi: u64, limit: u64, newest_first: bool) -> Result<Vec<Role>>;
    /// Where message `id` is stored: every (segment, position) holding a row of that id.
    async fn places_of(&self, id: &str) -> Result<Vec<(i64, u64)>>;
    async fn id_at(&self, segment: i64, seq: u64) -> Result<Option<String>>;
    /// Deletes the rows `[lo, hi)` of a segment, releasing their images.
    async fn delete_messages(&self, segment: i64, lo: u64, hi: u64) -> Result<()>;

    // Drafts.
    async fn put_draft(&self, draft: &Draft) -> Result<()>;
    /// A draft by its stream; `lock` holds it to the end of the transaction.
    async fn draft(&self, stream_id: &str, lock: bool) -> Result<Option<Draft>>;
    async fn delete_draft(&self, stream_id: &str) -> Result<()>;
    /// The most recently refreshed draft of a session.
    async fn newest_draft(&self, session_id: &str) -> Result<Option<Draft>>;
    /// The drafts not refreshed since `before` (Unix milliseconds).
    async fn stale_drafts(&self, before: i64) -> Result<Vec<String>>;

    // Images and search.
    /// The image whose ref is `reference`.
    async fn image(&self, reference: &str) -> Result<Option<String>>;
    /// See `store::SearchIndex::search`, with the engine's own full-text index.
    async fn search(&self, searching: Searching<'_>) -> Result<Vec<Found>>;

    /// What the append before this one in the same transaction left (`edits::append`):
    /// a backend that runs appends back to back may keep it; by default nothing is kept.
    fn carried(&self) -> Option<Appending> {
        None
    }
    fn carry(&self, _appending: Appending) {}
    /// What an append in a transaction that committed before this one left of session
    /// `id`: a hint, used only when the session's row, read and locked, is still as that
    /// append left it (`edits::append`). By default nothing is kept.
    fn kept(&self, _id: &str) -> Option<Appending> {
        None
    }
}

/// Runs a transaction body whose statements never wait (SQLite's), to its end, here.
pub fn run_now<T>(body: impl Future<Output = Result<T>>) -> Result<T> {
    body.now_or_never().unwrap_or_else(|| Err(Error::Internal("a store step waited where it cannot".into())))
}
