//! The PostgreSQL backend (`--store postgres://…`): many convo processes on many machines
//! share one database. The design is the SQLite store's (segment chains, images by hash,
//! one atomic step per mutation with the revision checked inside it), on a pool of
//! connections that replaces broken ones: writes grouped into shared commits (`writer`),
//! reads in one REPEATABLE READ snapshot each, changes through LISTEN/NOTIFY
//! (`changes`). Tables live in one schema (`convo`, or `--pg-schema`), reached through
//! each connection's `search_path`.

mod chain;
mod changes;
mod check;
pub mod connect;
mod rows;
mod schema;
mod search;
mod writer;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use deadpool_postgres::{ClientWrapper as Db, Manager, ManagerConfig, Object, Pool, RecyclingMethod, Runtime};
use futures_util::future::BoxFuture;

use crate::error::{Error, Result};
use crate::session::search::Query;
use crate::session::{
    Draft, DraftEnd, Fields, ForkPoint, Import, ListKey, Message, Patch, SessionInfo, check_revision,
    compaction_message, new_session_id, plan_append,
};
use crate::store::feed::{ChangeKind, Feed, Watcher};
use crate::store::row::{SessionRow, Span, fork_parent, new_info, touched};
use crate::store::{Appended, Compacted, Doomed, Found, HistoryPage, Removed, Rewound, Store};
pub use schema::check_name as check_schema_name;
use schema::pg;

/// Connections at most, writers and readers together.
const POOL_SIZE: usize = 16;

/// The pool, and the back-off that keeps requests from waiting on an unreachable server.
pub struct Connections {
    pool: Pool,
    backoff: writer::Backoff,
    shown: String,
}

impl Connections {
    /// A connection, or 1006 at once while the server is unreachable.
    async fn get(&self) -> Result<Object> {
        if let Err(wait) = self.backoff.check() {
            return Err(Error::StorageUnavailable(format!(
                "PostgreSQL at {} is unreachable; the next attempt is in {} ms",
                self.shown,
                wait.as_millis()
            )));
        }
        match self.pool.get().await {
            Ok(db) => {
                self.backoff.succeeded();
                Ok(db)
            }
            Err(e) => {
                self.backoff.failed();
                let why = match &e {
                    deadpool_postgres::PoolError::Backend(e) => schema::describe(e),
                    other => other.to_string(),
                };
                tracing::warn!(error = %why, "cannot connect to PostgreSQL");
                Err(Error::StorageUnavailable(format!("cannot connect to PostgreSQL at {}: {why}", self.shown)))
            }
        }
    }
}

pub struct PostgresStore {
    connections: Arc<Connections>,
    writer: writer::Writer,
    schema: Arc<str>,
    feed: Arc<Feed>,
}

impl PostgresStore {
    /// Connects, creates or migrates `schema`, and starts listening for changes; fails,
    /// naming the URL with its password masked, when any of that fails.
    pub async fn open(url: &str, schema: &str, lock_timeout: Duration) -> Result<Self> {
        schema::check_name(schema).map_err(Error::StorageUnavailable)?;
        let lock_timeout_ms = u64::try_from(lock_timeout.as_millis()).unwrap_or(u64::MAX);
        let mut target = connect::parse(url, lock_timeout_ms)?;
        let options = format!("{} -c search_path={schema}", target.config.get_options().unwrap_or_default());
        target.config.options(options.trim());
        if target.config.get_connect_timeout().is_none() {
            target.config.connect_timeout(Duration::from_secs(10));
        }
        let shown = target.shown.clone();
        let cannot = |why: String| Error::StorageUnavailable(format!("cannot open PostgreSQL at {shown}: {why}"));
        let (mut client, connection) =
            target.config.connect(target.tls.clone()).await.map_err(|e| cannot(schema::describe(&e)))?;
        let driver = tokio::spawn(connection);
        let migrated = schema::migrate(&mut client, schema).await;
        drop(client);
        let _ = driver.await;
        migrated.map_err(|e| cannot(e.to_string()))?;

        let manager = Manager::from_config(
            target.config.clone(),
            target.tls.clone(),
            ManagerConfig { recycling_method: RecyclingMethod::Fast },
        );
        let pool = Pool::builder(manager)
            .max_size(POOL_SIZE)
            .runtime(Runtime::Tokio1)
            .create_timeout(Some(Duration::from_secs(10)))
            .build()
            .map_err(|e| cannot(e.to_string()))?;
        let connections = Arc::new(Connections { pool, backoff: writer::Backoff::default(), shown: shown.clone() });
        let feed = Arc::<Feed>::default();
        let (ready, listening) = tokio::sync::oneshot::channel();
        tokio::spawn(changes::listen(target, schema.to_owned(), Arc::downgrade(&feed), ready));
        let _ = tokio::time::timeout(Duration::from_secs(10), listening).await;
        Ok(PostgresStore {
            writer: writer::Writer::spawn(connections.clone()),
            connections,
            schema: schema.into(),
            feed,
        })
    }

    /// Runs `work` in one read-only snapshot.
    async fn read<T, F>(&self, work: F) -> Result<T>
    where
        F: for<'c> FnOnce(&'c Db) -> BoxFuture<'c, Result<T>>,
    {
        let db = self.connections.get().await?;
        db.batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY").await.map_err(pg)?;
        let result = work(&db).await;
        let ended = db.batch_execute(if result.is_ok() { "COMMIT" } else { "ROLLBACK" }).await;
        match (result, ended) {
            (Ok(t), Ok(())) => Ok(t),
            (Err(e), _) => Err(e),
            (Ok(_), Err(e)) => Err(pg(e)),
        }
    }

    async fn write<T, F>(&self, work: F) -> Result<T>
    where
        T: Send + 'static,
        F: for<'c> Fn(&'c Db, Arc<str>) -> BoxFuture<'c, Result<T>> + Send + Sync + 'static,
    {
        let schema = self.schema.clone();
        self.writer.write(move |db| work(db, schema.clone())).await
    }
}

async fn spans_of(db: &Db, row: &SessionRow) -> Result<Vec<Span>> {
    chain::spans(db, row.segment, row.start, row.len).await
}

async fn free_id(db: &Db, wanted: Option<String>) -> Result<String> {
    match wanted {
        Some(id) if rows::load_session(db, &id, false).await?.is_some() => Err(Error::SessionExists(id)),
        Some(id) => Ok(id),
        None => Ok(new_session_id()),
    }
}

/// Writes a session row after a change, and sends the change. A created, forked or
/// imported session is new: its id must still be free when the row goes in.
async fn put(db: &Db, schema: &str, kind: ChangeKind, row: &SessionRow) -> Result<()> {
    rows::put_session(db, row, matches!(kind, ChangeKind::Created | ChangeKind::Imported) && row.info.revision == 0)
        .await?;
    changes::record(db, schema, &row.info.session_id, row.info.revision, kind, row.len - row.start).await
}

async fn insert_all(db: &Db, segment: i64, from: u64, messages: &[Message]) -> Result<()> {
    for (i, m) in messages.iter().enumerate() {
        rows::insert_message(db, segment, from + i as u64, m).await?;
    }
    Ok(())
}

/// Deletes a session (its row locked), sends the change, and reclaims what only it used.
async fn delete_in(db: &Db, schema: &str, row: &SessionRow) -> Result<()> {
    let id = &row.info.session_id;
    rows::execute(db, "DELETE FROM sessions WHERE session_id = $1", &[id]).await?;
    let count = row.len - row.start;
    changes::record(db, schema, id, row.info.revision, ChangeKind::Deleted, count).await?;
    chain::reclaim(db, row.segment).await
}

/// `Store::rewind` inside a write transaction, as the SQLite store does it: the session
/// moves to a new segment cut at the kept length; the old one stays whole for the
/// archive, or is reclaimed.
async fn rewind_in(
    db: &Db,
    schema: &str,
    id: &str,
    to: &str,
    archive: bool,
    expected_revision: Option<u64>,
) -> Result<Rewound> {
    let row = rows::require_session(db, id, true).await?;
    check_revision(expected_revision, row.info.revision)?;
    let spans = spans_of(db, &row).await?;
    let at = chain::position_of(db, &spans, to).await?.ok_or_else(|| Error::MessageNotFound(to.to_owned()))?;
    let keep = at + 1 + chain::results_from(db, &spans, at + 1).await?;
    if keep >= row.len {
        return Ok(Rewound { removed: 0, revision: row.info.revision, archived_session_id: None });
    }
    let archived_session_id = if archive { Some(archive_in(db, schema, &row, &spans).await?) } else { None };
    let (old, removed) = (row.segment, row.len - keep);
    let mut row = touched(row);
    (row.segment, row.len) = (chain::new_segment(db, fork_parent(&spans, row.start, keep), keep).await?, keep);
    put(db, schema, ChangeKind::Rewound, &row).await?;
    chain::reclaim(db, old).await?;
    Ok(Rewound { removed, revision: row.info.revision, archived_session_id })
}

/// Keeps the whole history as a new session on the session's segment, which the
/// session is about to leave: a fork in O(1) (as the SQLite store's `archive_in`).
async fn archive_in(db: &Db, schema: &str, row: &SessionRow, spans: &[Span]) -> Result<String> {
    let last = chain::id_at(db, spans, row.len - 1).await?;
    let forked_from = ForkPoint { session_id: row.info.session_id.clone(), message_id: last };
    let info = new_info(new_session_id(), row.fields(), Some(forked_from), row.len - row.start);
    let archived = SessionRow { info, segment: row.segment, start: row.start, len: row.len };
    put(db, schema, ChangeKind::Created, &archived).await?;
    Ok(archived.info.session_id)
}

/// `Store::compact` inside a write transaction, as the SQLite store does it: the summary
/// and the kept turns go to a new segment; the old one stays whole for the archive, or is
/// reclaimed.
async fn compact_in(
    db: &Db,
    schema: &str,
    id: &str,
    keep_turns: u64,
    summary: String,
    archive: bool,
    expected_revision: Option<u64>,
) -> Result<Compacted> {
    let row = rows::require_session(db, id, true).await?;
    check_revision(expected_revision, row.info.revision)?;
    let spans = spans_of(db, &row).await?;
    let cut = chain::turns_cut(db, &spans, row.len - row.start, keep_turns).await?;
    if cut == 0 || keep_turns == 0 {
        let revision = row.info.revision;
        return Ok(Compacted { removed: 0, revision, summary_message_id: None, archived_session_id: None });
    }
    let first = chain::id_at(db, &spans, row.start).await?;
    let last = chain::id_at(db, &spans, row.start + cut - 1).await?;
    let summary = compaction_message(summary, cut, first, last);
    let summary_message_id = summary.id.clone();
    let mut messages = vec![summary];
    messages.extend(chain::read(db, &spans, row.start + cut, row.len).await?);
    let archived_session_id = if archive { Some(archive_in(db, schema, &row, &spans).await?) } else { None };
    let old = row.segment;
    let mut row = touched(row);
    (row.segment, row.start, row.len) = (chain::new_segment(db, None, 0).await?, 0, messages.len() as u64);
    insert_all(db, row.segment, 0, &messages).await?;
    put(db, schema, ChangeKind::Compacted, &row).await?;
    chain::reclaim(db, old).await?;
    Ok(Compacted { removed: cut, revision: row.info.revision, summary_message_id, archived_session_id })
}

/// `Store::append` inside a write transaction.
async fn append_in(
    db: &Db,
    schema: &str,
    id: &str,
    messages: Vec<Message>,
    expected_revision: Option<u64>,
) -> Result<Appended> {
    let row = rows::require_session(db, id, true).await?;
    check_revision(expected_revision, row.info.revision)?;
    let message_ids = messages.iter().filter_map(|m| m.id.clone()).collect();
    let planned = plan_append(chain::tail(db, &spans_of(db, &row).await?).await?, messages)?;
    if planned.is_empty() {
        let index = row.len.saturating_sub(row.start + 1);
        return Ok(Appended { message_ids, index, revision: row.info.revision });
    }
    insert_all(db, row.segment, row.len, &planned).await?;
    let mut row = touched(row);
    row.len += planned.len() as u64;
    put(db, schema, ChangeKind::Appended, &row).await?;
    Ok(Appended { message_ids, index: row.len - row.start - 1, revision: row.info.revision })
}

#[async_trait]
impl Store for PostgresStore {
    fn kind(&self) -> &'static str {
        "postgres"
    }

    async fn create(&self, session_id: Option<String>, fields: Fields) -> Result<SessionInfo> {
        self.write(move |db, schema| {
            let (session_id, fields) = (session_id.clone(), fields.clone());
            Box::pin(async move {
                let info = new_info(free_id(db, session_id).await?, fields, None, 0);
                let segment = chain::new_segment(db, None, 0).await?;
                let row = SessionRow { info: info.clone(), segment, start: 0, len: 0 };
                put(db, &schema, ChangeKind::Created, &row).await?;
                Ok(info)
            })
        })
        .await
    }

    async fn get(&self, session_id: &str) -> Result<SessionInfo> {
        let db = self.connections.get().await?;
        Ok(rows::require_session(&db, session_id, false).await?.info)
    }

    async fn list_updated_before(
        &self,
        limit: usize,
        after: Option<ListKey>,
        updated_before: Option<String>,
    ) -> Result<Vec<SessionInfo>> {
        let db = self.connections.get().await?;
        let (at, id) = after.map_or((None, None), |k| (Some(k.created_at), Some(k.session_id)));
        let sql = format!(
            "SELECT {} FROM sessions WHERE ($1::text IS NULL OR (created_at, session_id) < ($1, $2)) \
             AND ($4::text IS NULL OR updated_at < $4) ORDER BY created_at DESC, session_id DESC LIMIT $3",
            rows::SESSION_COLUMNS
        );
        let found = rows::query(&db, &sql, &[&at, &id, &(limit as i64), &updated_before]).await?;
        found.iter().map(|r| rows::session(r).map(|r| r.info)).collect()
    }

    async fn update(&self, session_id: &str, patch: Patch, expected_revision: Option<u64>) -> Result<SessionInfo> {
        let id = session_id.to_owned();
        self.write(move |db, schema| {
            let (id, patch) = (id.clone(), patch.clone());
            Box::pin(async move {
                let row = rows::require_session(db, &id, true).await?;
                check_revision(expected_revision, row.info.revision)?;
                let mut fields = row.fields();
                if !patch.apply(&mut fields) {
                    return Ok(row.info);
                }
                let mut row = touched(row);
                (row.info.system, row.info.cwd, row.info.title, row.info.metadata) =
                    (fields.system, fields.cwd, fields.title, fields.metadata);
                put(db, &schema, ChangeKind::Updated, &row).await?;
                Ok(row.info)
            })
        })
        .await
    }

    async fn delete(&self, session_id: &str, expected_revision: Option<u64>) -> Result<()> {
        let id = session_id.to_owned();
        self.write(move |db, schema| {
            let id = id.clone();
            Box::pin(async move {
                let row = rows::require_session(db, &id, true).await?;
                check_revision(expected_revision, row.info.revision)?;
                delete_in(db, &schema, &row).await
            })
        })
        .await
    }

    async fn delete_many(&self, doomed: Doomed) -> Result<u64> {
        self.write(move |db, schema| {
            let doomed = doomed.clone();
            Box::pin(async move {
                let (mut ids, before): (Vec<String>, _) = match doomed {
                    Doomed::Ids(ids) => (ids, None),
                    Doomed::UpdatedBefore(before) => {
                        let found =
                            rows::query(db, "SELECT session_id FROM sessions WHERE updated_at < $1", &[&before])
                                .await?;
                        (found.iter().map(|r| r.try_get(0).map_err(pg)).collect::<Result<_>>()?, Some(before))
                    }
                };
                // Locked in one order, so two processes deleting overlapping sets cannot
                // deadlock.
                ids.sort_unstable();
                ids.dedup();
                let mut deleted = 0;
                for id in ids {
                    let row = rows::load_session(db, &id, true).await?;
                    // Checked again once locked: another process may have touched it.
                    if let Some(row) = row.filter(|r| before.as_ref().is_none_or(|b| &r.info.updated_at < b)) {
                        delete_in(db, &schema, &row).await?;
                        deleted += 1;
                    }
                }
                Ok(deleted)
            })
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
        self.write(move |db, schema| {
            let (id, messages) = (id.clone(), messages.clone());
            Box::pin(async move { append_in(db, &schema, &id, messages, expected_revision).await })
        })
        .await
    }

    async fn history(&self, session_id: &str, offset: u64, limit: Option<u64>) -> Result<HistoryPage> {
        let id = session_id.to_owned();
        self.read(move |db| {
            Box::pin(async move {
                let row = rows::require_session(db, &id, false).await?;
                let spans = spans_of(db, &row).await?;
                let from = row.start.saturating_add(offset).min(row.len);
                let to = limit.map_or(row.len, |l| from.saturating_add(l).min(row.len));
                let messages = chain::read(db, &spans, from, to).await?.into_iter().map(Arc::new).collect();
                Ok(HistoryPage { tail: chain::tail(db, &spans).await?, info: row.info, messages })
            })
        })
        .await
    }

    async fn trim_turns(&self, session_id: &str, max_turns: u64, expected_revision: Option<u64>) -> Result<Removed> {
        let id = session_id.to_owned();
        self.write(move |db, schema| {
            let id = id.clone();
            Box::pin(async move {
                let row = rows::require_session(db, &id, true).await?;
                check_revision(expected_revision, row.info.revision)?;
                let spans = spans_of(db, &row).await?;
                let cut = chain::turns_cut(db, &spans, row.len - row.start, max_turns).await?;
                if cut == 0 {
                    return Ok(Removed { removed: 0, revision: row.info.revision });
                }
                let mut row = touched(row);
                row.start += cut;
                put(db, &schema, ChangeKind::Trimmed, &row).await?;
                chain::reclaim(db, row.segment).await?;
                Ok(Removed { removed: cut, revision: row.info.revision })
            })
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
        self.write(move |db, schema| {
            let (id, to) = (id.clone(), to.clone());
            Box::pin(async move { rewind_in(db, &schema, &id, &to, archive, expected_revision).await })
        })
        .await
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
        self.write(move |db, schema| {
            let (id, summary) = (id.clone(), summary.clone());
            Box::pin(async move { compact_in(db, &schema, &id, keep_turns, summary, archive, expected_revision).await })
        })
        .await
    }

    async fn clear(&self, session_id: &str, expected_revision: Option<u64>) -> Result<Removed> {
        let id = session_id.to_owned();
        self.write(move |db, schema| {
            let id = id.clone();
            Box::pin(async move {
                let row = rows::require_session(db, &id, true).await?;
                check_revision(expected_revision, row.info.revision)?;
                let removed = row.len - row.start;
                if removed == 0 {
                    return Ok(Removed { removed, revision: row.info.revision });
                }
                let old = row.segment;
                let mut row = touched(row);
                (row.segment, row.start, row.len) = (chain::new_segment(db, None, 0).await?, 0, 0);
                put(db, &schema, ChangeKind::Cleared, &row).await?;
                chain::reclaim(db, old).await?;
                Ok(Removed { removed, revision: row.info.revision })
            })
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
        self.write(move |db, schema| {
            let (id, new_session_id, at_message_id) = (id.clone(), new_session_id.clone(), at_message_id.clone());
            Box::pin(async move {
                // Locked: a trim or delete of the parent cannot reclaim what the fork needs
                // before the fork commits.
                let parent = rows::require_session(db, &id, true).await?;
                let spans = spans_of(db, &parent).await?;
                let (cut, last) = match at_message_id {
                    Some(at) => match chain::position_of(db, &spans, &at).await? {
                        Some(position) => (position + 1, Some(at)),
                        None => return Err(Error::MessageNotFound(at)),
                    },
                    None if parent.len > parent.start => (parent.len, chain::id_at(db, &spans, parent.len - 1).await?),
                    None => (parent.len, None),
                };
                let new_id = free_id(db, new_session_id).await?;
                let segment = chain::new_segment(db, fork_parent(&spans, parent.start, cut), cut).await?;
                let forked_from = ForkPoint { session_id: id.clone(), message_id: last };
                let info = new_info(new_id, parent.fields(), Some(forked_from), cut - parent.start);
                let row = SessionRow { info: info.clone(), segment, start: parent.start, len: cut };
                put(db, &schema, ChangeKind::Created, &row).await?;
                Ok(info)
            })
        })
        .await
    }

    async fn import(&self, import: Import, replace: bool, expected_revision: Option<u64>) -> Result<SessionInfo> {
        self.write(move |db, schema| {
            let import = import.clone();
            Box::pin(async move {
                let n = import.messages.len() as u64;
                let existing = match &import.session_id {
                    Some(id) if replace => rows::load_session(db, id, true).await?,
                    _ => None,
                };
                match (&existing, &import.session_id) {
                    (Some(old), _) => check_revision(expected_revision, old.info.revision)?,
                    (None, Some(id)) if replace && expected_revision.is_some() => {
                        return Err(Error::SessionNotFound(id.clone()));
                    }
                    _ => {}
                }
                let segment = chain::new_segment(db, None, 0).await?;
                insert_all(db, segment, 0, &import.messages).await?;
                let Some(old) = existing else {
                    let info = new_info(free_id(db, import.session_id).await?, import.fields, None, n);
                    let row = SessionRow { info: info.clone(), segment, start: 0, len: n };
                    put(db, &schema, ChangeKind::Imported, &row).await?;
                    return Ok(info);
                };
                let old_segment = old.segment;
                let mut info = new_info(old.info.session_id, import.fields, None, n);
                (info.created_at, info.revision) = (old.info.created_at, old.info.revision + 1);
                let row = SessionRow { info: info.clone(), segment, start: 0, len: n };
                put(db, &schema, ChangeKind::Imported, &row).await?;
                chain::reclaim(db, old_segment).await?;
                Ok(info)
            })
        })
        .await
    }

    async fn image(&self, reference: &str) -> Result<Option<String>> {
        let db = self.connections.get().await?;
        rows::image(&db, reference).await
    }

    async fn search(&self, query: &Query, session_id: Option<&str>, offset: u64, limit: u64) -> Result<Vec<Found>> {
        let (query, session_id) = (query.clone(), session_id.map(str::to_owned));
        self.read(move |db| {
            Box::pin(async move { search::search(db, &query, session_id.as_deref(), offset, limit).await })
        })
        .await
    }

    async fn flush(&self) -> Result<()> {
        // Every reply was sent after its commit: nothing acknowledged waits.
        Ok(())
    }

    async fn append_finishing(
        &self,
        session_id: &str,
        messages: Vec<Message>,
        expected_revision: Option<u64>,
        stream_id: &str,
    ) -> Result<Appended> {
        let (id, stream) = (session_id.to_owned(), stream_id.to_owned());
        self.write(move |db, schema| {
            let (id, stream, messages) = (id.clone(), stream.clone(), messages.clone());
            Box::pin(async move {
                let appended = append_in(db, &schema, &id, messages, expected_revision).await?;
                rows::delete_draft(db, &stream).await?;
                Ok(appended)
            })
        })
        .await
    }

    async fn save_draft(&self, draft: Draft) -> Result<()> {
        self.write(move |db, schema| {
            let draft = draft.clone();
            Box::pin(async move {
                if let Some(row) = rows::load_session(db, &draft.session_id, false).await? {
                    let count = row.len - row.start;
                    changes::record(db, &schema, &draft.session_id, row.info.revision, ChangeKind::Draft, count)
                        .await?;
                }
                rows::put_draft(db, &draft).await
            })
        })
        .await
    }

    async fn draft(&self, session_id: &str) -> Result<Option<Draft>> {
        let db = self.connections.get().await?;
        rows::newest_draft_of(&db, session_id).await
    }

    async fn drop_draft(&self, stream_id: &str) -> Result<()> {
        let stream = stream_id.to_owned();
        self.write(move |db, _| {
            let stream = stream.clone();
            Box::pin(async move { rows::delete_draft(db, &stream).await })
        })
        .await
    }

    async fn keep_draft(&self, stream_id: &str, end: DraftEnd) -> Result<Option<Appended>> {
        let stream = stream_id.to_owned();
        self.write(move |db, schema| {
            let stream = stream.clone();
            Box::pin(async move {
                // Locked, so that two processes sweeping crashed drafts keep it once.
                let found =
                    rows::query_opt(db, "SELECT 1 FROM drafts WHERE stream_id = $1 FOR UPDATE", &[&stream]).await?;
                if found.is_none() {
                    return Ok(None);
                }
                let Some(draft) = rows::get_draft(db, &stream).await? else { return Ok(None) };
                rows::delete_draft(db, &stream).await?;
                if rows::load_session(db, &draft.session_id, false).await?.is_none() {
                    return Ok(None);
                }
                let session_id = draft.session_id.clone();
                append_in(db, &schema, &session_id, draft.into_messages(end), None).await.map(Some)
            })
        })
        .await
    }

    async fn stale_drafts(&self, before: i64) -> Result<Vec<String>> {
        let db = self.connections.get().await?;
        rows::stale_drafts(&db, before).await
    }

    fn watch(&self) -> Arc<Watcher> {
        self.feed.watch()
    }

    async fn check(&self) -> Result<Vec<String>> {
        self.read(|db| Box::pin(check::check(db))).await
    }
}
