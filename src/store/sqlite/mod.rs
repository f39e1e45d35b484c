//! The SQLite backend (`--store sqlite:PATH`, the default): WAL mode, one writer thread
//! with group commit, reads on read-only connections off the async thread: at most
//! `READERS` at once (a bounded pool: threads and file descriptors do not grow with the
//! number of concurrent requests), at most `IDLE_READERS` kept open between reads. Every
//! mutation reads what it needs and checks the revision inside its own `BEGIN IMMEDIATE`
//! transaction, and nothing is kept from one transaction to the next (an append hands the
//! next job of its own transaction what it read, `writer::carry`), so several convo
//! processes can share one database without losing an update.

mod chain;
mod changes;
mod check;
mod drafts;
mod file;
mod rows;
mod schema;
mod search;
mod writer;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use rusqlite::{Connection, params};

use crate::error::{Error, Result};
use crate::pool::Pool;
use crate::session::search::Query;
use crate::session::{
    Draft, DraftEnd, Fields, ForkPoint, Import, ListKey, Message, Patch, SessionInfo, Tail, check_revision,
    compaction_message, new_session_id, plan_append,
};
use crate::store::feed::{ChangeKind, Feed, Watcher};
use crate::store::row::{new_info, touched};
use crate::store::{Appended, Compacted, Doomed, Found, HistoryPage, MessageJson, Removed, Rewound, Store};
use chain::Span;
use rows::{SESSION_COLUMNS, SessionRow, require_session};
pub use schema::Settings;
use schema::sql;

/// How many reads run at once, each on its own connection and thread.
const READERS: usize = 8;
/// How many read connections stay open while no read needs them.
const IDLE_READERS: usize = 2;

pub struct SqliteStore {
    path: PathBuf,
    settings: Settings,
    writer: writer::Writer,
    reads: Pool,
    idle: Arc<Mutex<Vec<Connection>>>,
    /// Changes of every process, published by the change-log poller.
    feed: Arc<Feed>,
    poller: std::sync::Once,
}

impl SqliteStore {
    /// Opens (creating when missing) the database file at `path`, in a folder that must
    /// exist; fails at once, with a message that names the path, when it cannot be used,
    /// and then leaves nothing behind (see `file`).
    pub fn open(path: &Path, settings: Settings) -> Result<Self> {
        Self::open_claimed(file::claim(path, false, settings.follow_symlinks)?, settings)
    }

    /// As `open`, creating the missing folders above `path` (0700): for the default
    /// location only.
    pub fn open_creating_folders(path: &Path, settings: Settings) -> Result<Self> {
        Self::open_claimed(file::claim(path, true, settings.follow_symlinks)?, settings)
    }

    fn open_claimed(claim: file::Claim, settings: Settings) -> Result<Self> {
        let path = claim.path.clone();
        let opened = schema::open_writer(&path, settings).and_then(|conn| {
            let reader = schema::open_reader(&path, settings)?;
            let writer = writer::Writer::spawn(conn).map_err(|e| Error::StorageUnavailable(e.to_string()))?;
            Ok((writer, reader))
        });
        match opened {
            Ok((writer, reader)) => Ok(SqliteStore {
                path,
                settings,
                writer,
                reads: Pool::new("sqlite reader", READERS),
                idle: Arc::new(Mutex::new(vec![reader])),
                feed: Arc::default(),
                poller: std::sync::Once::new(),
            }),
            Err(e) => {
                // Every connection is closed by now.
                claim.release();
                Err(e)
            }
        }
    }

    /// Runs `work` in a read transaction (one snapshot) on a blocking thread.
    async fn read<T, F>(&self, work: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T> + Send + 'static,
    {
        let (idle, path, settings) = (self.idle.clone(), self.path.clone(), self.settings);
        self.reads
            .run(move || {
                let pooled = idle.lock().unwrap_or_else(PoisonError::into_inner).pop();
                let conn = match pooled {
                    Some(conn) => conn,
                    None => schema::open_reader(&path, settings)?,
                };
                let result = conn.execute_batch("BEGIN").map_err(sql).and_then(|()| work(&conn));
                let ended = conn.execute_batch("COMMIT");
                let mut idle = idle.lock().unwrap_or_else(PoisonError::into_inner);
                if ended.is_ok() && idle.len() < IDLE_READERS {
                    idle.push(conn);
                }
                result
            })
            .await?
    }
}

/// Stored messages `offset..offset + limit` of a session, each read by `read`, with the
/// tail a repaired view needs.
fn page<M>(
    c: &Connection,
    session_id: &str,
    offset: u64,
    limit: Option<u64>,
    read: impl FnOnce(&Connection, &[Span], u64, u64) -> Result<Vec<M>>,
) -> Result<HistoryPage<M>> {
    let row = require_session(c, session_id)?;
    let spans = spans_of(c, &row)?;
    let from = row.start.saturating_add(offset).min(row.len);
    let to = limit.map_or(row.len, |l| from.saturating_add(l).min(row.len));
    let messages = read(c, &spans, from, to)?;
    Ok(HistoryPage { tail: chain::tail(c, &spans)?, info: row.info, messages })
}

fn spans_of(conn: &Connection, row: &SessionRow) -> Result<Vec<Span>> {
    chain::spans(conn, row.segment, row.start, row.len)
}

fn free_id(conn: &Connection, wanted: Option<String>) -> Result<String> {
    match wanted {
        Some(id) if rows::load_session(conn, &id)?.is_some() => Err(Error::SessionExists(id)),
        Some(id) => Ok(id),
        None => Ok(new_session_id()),
    }
}

/// Writes a session row after a change, and logs the change.
fn put(c: &Connection, kind: ChangeKind, row: &SessionRow) -> Result<()> {
    rows::put_session(c, row)?;
    changes::record(c, &row.info.session_id, row.info.revision, kind, row.len - row.start)
}

/// Deletes a session, logs it, and reclaims what only it used.
fn delete_in(c: &Connection, row: &SessionRow) -> Result<()> {
    let id = &row.info.session_id;
    c.execute("DELETE FROM sessions WHERE session_id = ?1", [id]).map_err(sql)?;
    changes::record(c, id, row.info.revision, ChangeKind::Deleted, row.len - row.start)?;
    chain::reclaim(c, row.segment)
}

/// `Store::rewind` inside a write transaction. The session moves to a new segment cut at
/// the kept length, as a fork would be; the old segment stays whole for the archive, or
/// is reclaimed.
fn rewind_in(c: &Connection, id: &str, to: &str, archive: bool, expected_revision: Option<u64>) -> Result<Rewound> {
    let row = require_session(c, id)?;
    check_revision(expected_revision, row.info.revision)?;
    let spans = spans_of(c, &row)?;
    let at = chain::position_of(c, &spans, to)?.ok_or_else(|| Error::MessageNotFound(to.to_owned()))?;
    let keep = at + 1 + chain::results_from(c, &spans, at + 1)?;
    if keep >= row.len {
        return Ok(Rewound { removed: 0, revision: row.info.revision, archived_session_id: None });
    }
    let archived_session_id = if archive {
        let forked_from = ForkPoint { session_id: id.to_owned(), message_id: chain::id_at(c, &spans, row.len - 1)? };
        let info = new_info(new_session_id(), row.fields(), Some(forked_from), row.len - row.start);
        let archived = SessionRow { info, segment: row.segment, start: row.start, len: row.len };
        put(c, ChangeKind::Created, &archived)?;
        Some(archived.info.session_id)
    } else {
        None
    };
    let (old, removed) = (row.segment, row.len - keep);
    let mut row = touched(row);
    (row.segment, row.len) = (chain::new_segment(c, chain::fork_parent(&spans, row.start, keep), keep)?, keep);
    put(c, ChangeKind::Rewound, &row)?;
    chain::reclaim(c, old)?;
    Ok(Rewound { removed, revision: row.info.revision, archived_session_id })
}

/// Keeps the whole history as a new session on the session's segment, which the
/// session is about to leave: a fork in O(1).
fn archive_in(c: &Connection, row: &SessionRow, spans: &[Span]) -> Result<String> {
    let last = chain::id_at(c, spans, row.len - 1)?;
    let forked_from = ForkPoint { session_id: row.info.session_id.clone(), message_id: last };
    let info = new_info(new_session_id(), row.fields(), Some(forked_from), row.len - row.start);
    let archived = SessionRow { info, segment: row.segment, start: row.start, len: row.len };
    put(c, ChangeKind::Created, &archived)?;
    Ok(archived.info.session_id)
}

/// `Store::compact` inside a write transaction: the summary and the kept turns are
/// written to a new segment (the kept messages are copied, the replaced ones are not
/// read); the old segment stays whole for the archive, or is reclaimed.
fn compact_in(
    c: &Connection,
    id: &str,
    keep_turns: u64,
    summary: String,
    archive: bool,
    expected_revision: Option<u64>,
) -> Result<Compacted> {
    let row = require_session(c, id)?;
    check_revision(expected_revision, row.info.revision)?;
    let spans = spans_of(c, &row)?;
    let cut = chain::turns_cut(c, &spans, row.len - row.start, keep_turns)?;
    if cut == 0 || keep_turns == 0 {
        let revision = row.info.revision;
        return Ok(Compacted { removed: 0, revision, summary_message_id: None, archived_session_id: None });
    }
    let (first, last) = (chain::id_at(c, &spans, row.start)?, chain::id_at(c, &spans, row.start + cut - 1)?);
    let summary = compaction_message(summary, cut, first, last);
    let summary_message_id = summary.id.clone();
    let mut messages = vec![summary];
    messages.extend(chain::read(c, &spans, row.start + cut, row.len)?);
    let archived_session_id = if archive { Some(archive_in(c, &row, &spans)?) } else { None };
    let old = row.segment;
    let mut row = touched(row);
    (row.segment, row.start, row.len) = (chain::new_segment(c, None, 0)?, 0, messages.len() as u64);
    insert_all(c, row.segment, 0, &messages)?;
    put(c, ChangeKind::Compacted, &row)?;
    chain::reclaim(c, old)?;
    Ok(Compacted { removed: cut, revision: row.info.revision, summary_message_id, archived_session_id })
}

/// A session as an append left it, for an append to it in the next job (`writer::carry`).
struct Appending {
    row: SessionRow,
    spans: Vec<Span>,
    tail: Tail,
}

/// `Store::append` inside a write transaction.
fn append_in(c: &Connection, id: &str, messages: Vec<Message>, expected_revision: Option<u64>) -> Result<Appended> {
    let Appending { row, mut spans, mut tail } = match writer::carried::<Appending>() {
        Some(carried) if carried.row.info.session_id == id => carried,
        _ => {
            let row = require_session(c, id)?;
            let spans = spans_of(c, &row)?;
            let tail = chain::tail(c, &spans)?;
            Appending { row, spans, tail }
        }
    };
    check_revision(expected_revision, row.info.revision)?;
    let message_ids = messages.iter().filter_map(|m| m.id.clone()).collect();
    let planned = plan_append(tail.clone(), messages)?;
    if planned.is_empty() {
        let index = row.len.saturating_sub(row.start + 1);
        return Ok(Appended { message_ids, index, revision: row.info.revision });
    }
    insert_all(c, row.segment, row.len, &planned)?;
    let mut row = touched(row);
    row.len += planned.len() as u64;
    row.info.message_count = row.len - row.start;
    rows::put_appended(c, &row)?;
    changes::record(c, id, row.info.revision, ChangeKind::Appended, row.len - row.start)?;
    let appended = Appended { message_ids, index: row.len - row.start - 1, revision: row.info.revision };
    // The head segment now serves up to the new length; when it served nothing before
    // (a fork cut at its parent's end), the next append reads the chain again.
    if let Some(head) = spans.first_mut().filter(|span| span.segment == row.segment) {
        head.hi = row.len;
        planned.iter().for_each(|m| tail.follow(m));
        writer::carry(Appending { row, spans, tail });
    }
    Ok(appended)
}

fn insert_all(conn: &Connection, segment: i64, from: u64, messages: &[Message]) -> Result<()> {
    for (i, m) in messages.iter().enumerate() {
        rows::insert_message(conn, segment, from + i as u64, m)?;
    }
    Ok(())
}

#[async_trait]
impl Store for SqliteStore {
    fn kind(&self) -> &'static str {
        "sqlite"
    }

    async fn create(&self, session_id: Option<String>, fields: Fields) -> Result<SessionInfo> {
        self.writer
            .write(move |c| {
                let info = new_info(free_id(c, session_id)?, fields, None, 0);
                let segment = chain::new_segment(c, None, 0)?;
                put(c, ChangeKind::Created, &SessionRow { info: info.clone(), segment, start: 0, len: 0 })?;
                Ok(info)
            })
            .await
    }

    async fn get(&self, session_id: &str) -> Result<SessionInfo> {
        let id = session_id.to_owned();
        self.read(move |c| Ok(require_session(c, &id)?.info)).await
    }

    async fn list_updated_before(
        &self,
        limit: usize,
        after: Option<ListKey>,
        updated_before: Option<String>,
    ) -> Result<Vec<SessionInfo>> {
        self.read(move |c| {
            let (at, id) = after.map_or((None, None), |k| (Some(k.created_at), Some(k.session_id)));
            let query = format!(
                "SELECT {SESSION_COLUMNS} FROM sessions WHERE (?1 IS NULL OR (created_at, session_id) < (?1, ?2)) \
                 AND (?4 IS NULL OR updated_at < ?4) ORDER BY created_at DESC, session_id DESC LIMIT ?3"
            );
            c.prepare_cached(&query)
                .and_then(|mut s| s.query_map(params![at, id, limit as i64, updated_before], rows::session)?.collect())
                .map(|rows: Vec<SessionRow>| rows.into_iter().map(|r| r.info).collect())
                .map_err(sql)
        })
        .await
    }

    async fn update(&self, session_id: &str, patch: Patch, expected_revision: Option<u64>) -> Result<SessionInfo> {
        let id = session_id.to_owned();
        self.writer
            .write(move |c| {
                let row = require_session(c, &id)?;
                check_revision(expected_revision, row.info.revision)?;
                let mut fields = row.fields();
                if !patch.apply(&mut fields) {
                    return Ok(row.info);
                }
                let mut row = touched(row);
                (row.info.system, row.info.cwd, row.info.title, row.info.metadata) =
                    (fields.system, fields.cwd, fields.title, fields.metadata);
                put(c, ChangeKind::Updated, &row)?;
                Ok(row.info)
            })
            .await
    }

    async fn delete(&self, session_id: &str, expected_revision: Option<u64>) -> Result<()> {
        let id = session_id.to_owned();
        self.writer
            .write(move |c| {
                let row = require_session(c, &id)?;
                check_revision(expected_revision, row.info.revision)?;
                delete_in(c, &row)
            })
            .await
    }

    async fn delete_many(&self, doomed: Doomed) -> Result<u64> {
        self.writer
            .write(move |c| {
                let ids: Vec<String> = match &doomed {
                    Doomed::Ids(ids) => ids.clone(),
                    Doomed::UpdatedBefore(before) => c
                        .prepare_cached("SELECT session_id FROM sessions WHERE updated_at < ?1")
                        .and_then(|mut s| s.query_map([before], |r| r.get(0))?.collect())
                        .map_err(sql)?,
                };
                let mut deleted = 0;
                for id in ids {
                    // One at a time, each reclaimed before the next: a fork deleted with
                    // its parent finds the chain as `reclaim` left it.
                    if let Some(row) = rows::load_session(c, &id)? {
                        delete_in(c, &row)?;
                        deleted += 1;
                    }
                }
                Ok(deleted)
            })
            .await
    }

    async fn append(
        &self,
        session_id: &str,
        messages: Vec<Message>,
        expected_revision: Option<u64>,
    ) -> Result<Appended> {
        let id = session_id.to_owned();
        self.writer.write(move |c| append_in(c, &id, messages, expected_revision)).await
    }

    async fn history(&self, session_id: &str, offset: u64, limit: Option<u64>) -> Result<HistoryPage> {
        let id = session_id.to_owned();
        self.read(move |c| {
            page(c, &id, offset, limit, |c, spans, from, to| {
                Ok(chain::read(c, spans, from, to)?.into_iter().map(Arc::new).collect())
            })
        })
        .await
    }

    async fn history_json(
        &self,
        session_id: &str,
        offset: u64,
        limit: Option<u64>,
    ) -> Result<HistoryPage<MessageJson>> {
        let id = session_id.to_owned();
        self.read(move |c| page(c, &id, offset, limit, chain::read_json)).await
    }

    async fn trim_turns(&self, session_id: &str, max_turns: u64, expected_revision: Option<u64>) -> Result<Removed> {
        let id = session_id.to_owned();
        self.writer
            .write(move |c| {
                let row = require_session(c, &id)?;
                check_revision(expected_revision, row.info.revision)?;
                let cut = chain::turns_cut(c, &spans_of(c, &row)?, row.len - row.start, max_turns)?;
                if cut == 0 {
                    return Ok(Removed { removed: 0, revision: row.info.revision });
                }
                let mut row = touched(row);
                row.start += cut;
                put(c, ChangeKind::Trimmed, &row)?;
                chain::reclaim(c, row.segment)?;
                Ok(Removed { removed: cut, revision: row.info.revision })
            })
            .await
    }

    async fn rewind(
        &self,
        session_id: &str,
        to_message_id: &str,
        archive: bool,
        expected_revision: Option<u64>,
    ) -> Result<Rewound> {
        let (id, to) = (session_id.to_owned(), to_message_id.to_owned());
        self.writer.write(move |c| rewind_in(c, &id, &to, archive, expected_revision)).await
    }

    async fn compact(
        &self,
        session_id: &str,
        keep_turns: u64,
        summary: String,
        archive: bool,
        expected_revision: Option<u64>,
    ) -> Result<Compacted> {
        let id = session_id.to_owned();
        self.writer.write(move |c| compact_in(c, &id, keep_turns, summary, archive, expected_revision)).await
    }

    async fn clear(&self, session_id: &str, expected_revision: Option<u64>) -> Result<Removed> {
        let id = session_id.to_owned();
        self.writer
            .write(move |c| {
                let row = require_session(c, &id)?;
                check_revision(expected_revision, row.info.revision)?;
                let removed = row.len - row.start;
                if removed == 0 {
                    return Ok(Removed { removed, revision: row.info.revision });
                }
                let old = row.segment;
                let mut row = touched(row);
                (row.segment, row.start, row.len) = (chain::new_segment(c, None, 0)?, 0, 0);
                put(c, ChangeKind::Cleared, &row)?;
                chain::reclaim(c, old)?;
                Ok(Removed { removed, revision: row.info.revision })
            })
            .await
    }

    async fn fork(
        &self,
        session_id: &str,
        new_session_id: Option<String>,
        at_message_id: Option<String>,
    ) -> Result<SessionInfo> {
        let id = session_id.to_owned();
        self.writer
            .write(move |c| {
                let parent = require_session(c, &id)?;
                let spans = spans_of(c, &parent)?;
                let (cut, last) = match at_message_id {
                    Some(at) => match chain::position_of(c, &spans, &at)? {
                        Some(position) => (position + 1, Some(at)),
                        None => return Err(Error::MessageNotFound(at)),
                    },
                    None if parent.len > parent.start => (parent.len, chain::id_at(c, &spans, parent.len - 1)?),
                    None => (parent.len, None),
                };
                let new_id = free_id(c, new_session_id)?;
                let segment = chain::new_segment(c, chain::fork_parent(&spans, parent.start, cut), cut)?;
                let forked_from = ForkPoint { session_id: id.clone(), message_id: last };
                let info = new_info(new_id, parent.fields(), Some(forked_from), cut - parent.start);
                put(
                    c,
                    ChangeKind::Created,
                    &SessionRow { info: info.clone(), segment, start: parent.start, len: cut },
                )?;
                Ok(info)
            })
            .await
    }

    async fn import(&self, import: Import, replace: bool, expected_revision: Option<u64>) -> Result<SessionInfo> {
        self.writer
            .write(move |c| {
                let n = import.messages.len() as u64;
                let existing = match &import.session_id {
                    Some(id) if replace => rows::load_session(c, id)?,
                    _ => None,
                };
                match (&existing, &import.session_id) {
                    (Some(old), _) => check_revision(expected_revision, old.info.revision)?,
                    (None, Some(id)) if replace && expected_revision.is_some() => {
                        return Err(Error::SessionNotFound(id.clone()));
                    }
                    _ => {}
                }
                let segment = chain::new_segment(c, None, 0)?;
                insert_all(c, segment, 0, &import.messages)?;
                let Some(old) = existing else {
                    let info = new_info(free_id(c, import.session_id)?, import.fields, None, n);
                    put(c, ChangeKind::Imported, &SessionRow { info: info.clone(), segment, start: 0, len: n })?;
                    return Ok(info);
                };
                let old_segment = old.segment;
                let mut info = new_info(old.info.session_id, import.fields, None, n);
                (info.created_at, info.revision) = (old.info.created_at, old.info.revision + 1);
                put(c, ChangeKind::Imported, &SessionRow { info: info.clone(), segment, start: 0, len: n })?;
                chain::reclaim(c, old_segment)?;
                Ok(info)
            })
            .await
    }

    async fn image(&self, reference: &str) -> Result<Option<String>> {
        let reference = reference.to_owned();
        self.read(move |c| rows::image(c, &reference)).await
    }

    async fn search(&self, query: &Query, session_id: Option<&str>, offset: u64, limit: u64) -> Result<Vec<Found>> {
        let (query, session_id) = (query.clone(), session_id.map(str::to_owned));
        self.read(move |c| search::search(c, &query, session_id.as_deref(), offset, limit)).await
    }

    async fn flush(&self) -> Result<()> {
        // Everything queued before this has committed once it returns.
        self.writer.write(|_| Ok(())).await
    }

    async fn append_finishing(
        &self,
        session_id: &str,
        messages: Vec<Message>,
        expected_revision: Option<u64>,
        stream_id: &str,
    ) -> Result<Appended> {
        let (id, stream) = (session_id.to_owned(), stream_id.to_owned());
        self.writer
            .write(move |c| {
                let appended = append_in(c, &id, messages, expected_revision)?;
                drafts::delete(c, &stream)?;
                Ok(appended)
            })
            .await
    }

    async fn save_draft(&self, draft: Draft) -> Result<()> {
        self.writer
            .write(move |c| {
                if let Some(row) = rows::load_session(c, &draft.session_id)? {
                    let count = row.len - row.start;
                    changes::record(c, &draft.session_id, row.info.revision, ChangeKind::Draft, count)?;
                }
                drafts::put(c, &draft)
            })
            .await
    }

    fn watch(&self) -> Arc<Watcher> {
        // Watching before the poller starts: it publishes from its first row on.
        let watcher = self.feed.watch();
        self.poller.call_once(|| {
            let (path, settings, feed) = (self.path.clone(), self.settings, Arc::downgrade(&self.feed));
            let started = schema::open_reader(&path, settings).and_then(|conn| {
                let after = changes::newest(&conn).map_err(sql)?;
                std::thread::Builder::new()
                    .name("convo-sqlite-watch".into())
                    .spawn(move || changes::poll(conn, feed, after))
                    .map_err(|e| Error::StorageUnavailable(e.to_string()))
            });
            if let Err(e) = started {
                tracing::error!(error = %e, "cannot watch the change log; other processes' changes will not be seen");
            }
        });
        watcher
    }

    async fn draft(&self, session_id: &str) -> Result<Option<Draft>> {
        let id = session_id.to_owned();
        self.read(move |c| drafts::newest_of(c, &id)).await
    }

    async fn drop_draft(&self, stream_id: &str) -> Result<()> {
        let stream = stream_id.to_owned();
        self.writer.write(move |c| drafts::delete(c, &stream)).await
    }

    async fn keep_draft(&self, stream_id: &str, end: DraftEnd) -> Result<Option<Appended>> {
        let stream = stream_id.to_owned();
        self.writer
            .write(move |c| {
                let Some(draft) = drafts::get(c, &stream)? else { return Ok(None) };
                drafts::delete(c, &stream)?;
                if rows::load_session(c, &draft.session_id)?.is_none() {
                    return Ok(None);
                }
                let session_id = draft.session_id.clone();
                append_in(c, &session_id, draft.into_messages(end), None).map(Some)
            })
            .await
    }

    async fn stale_drafts(&self, before: i64) -> Result<Vec<String>> {
        self.read(move |c| drafts::stale(c, before)).await
    }

    async fn check(&self) -> Result<Vec<String>> {
        self.read(check::check).await
    }
}
