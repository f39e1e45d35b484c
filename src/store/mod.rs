//! Where sessions live. `Store` is what every backend implements, split by concern
//! (`Sessions`, `Histories`, `Drafts`, `SearchIndex`, `ImageStore`, `ChangeFeed`,
//! `Checks`); each mutation applies the conversation rules (`crate::session`) inside its
//! own atomic step, checks `expected_revision` there, and either takes effect whole or
//! not at all.
//!
//! Backends: `memory` (persistent vectors in the process), and the two SQL stores,
//! `sqlite` and `postgres`, which share their data model and algorithms (`sql`) and
//! differ only in the statements they run. A new backend goes in a folder of its own
//! beside them, and `StoreSpec` learns to open it.

pub mod feed;
mod memory;
mod postgres;
pub mod queued;
pub(crate) mod sql;
mod sqlite;
pub mod text;

use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;

use serde_json::value::RawValue;

use crate::error::{Error, Result};
use crate::session::search::Query;
use crate::session::{Draft, DraftEnd, Fields, Import, ListKey, Message, Patch, Role, SessionInfo, Tail};

pub use memory::MemoryStore;
pub use postgres::{PostgresStore, check_schema_name as check_pg_schema};
pub use sqlite::{Settings as SqliteSettings, SqliteStore};

/// What an append stored: the ids of the messages the client gave, in order (cancelled
/// results the rules added before them are not listed), the index of the last one.
#[derive(Debug, Clone, PartialEq)]
pub struct Appended {
    pub message_ids: Vec<String>,
    pub index: u64,
    pub revision: u64,
    /// For a retry of an append stored before (client ids, `message_id`): the messages
    /// stored then, which this one stored again; `revision` is the one their append made.
    pub duplicate_of: Option<Vec<Message>>,
}

impl Appended {
    pub fn new(message_ids: Vec<String>, index: u64, revision: u64) -> Self {
        Appended { message_ids, index, revision, duplicate_of: None }
    }

    /// The reply to a retry: `stored` are the messages found, the last at `index`.
    pub fn duplicate(stored: Vec<Message>, index: u64, revision: u64) -> Self {
        let message_ids = stored.iter().filter_map(|m| m.id.clone()).collect();
        Appended { message_ids, index, revision, duplicate_of: Some(stored) }
    }
}

/// What trim or clear did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Removed {
    pub removed: u64,
    pub revision: u64,
}

/// What a rewind did: the messages dropped, the new revision, and the session that keeps
/// the history as it was (with `archive`, when anything was dropped).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rewound {
    pub removed: u64,
    pub revision: u64,
    pub archived_session_id: Option<String>,
}

/// What a pop did: the message it removed (none from an empty session) and the revision
/// after it.
#[derive(Debug, Clone, PartialEq)]
pub struct Popped {
    pub message: Option<Message>,
    pub revision: u64,
}

/// What a compaction did: the messages replaced, the new revision, the summary's id
/// (none when nothing was compacted), and the archive of the history as it was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compacted {
    pub removed: u64,
    pub revision: u64,
    pub summary_message_id: Option<String>,
    pub archived_session_id: Option<String>,
}

/// The sessions `delete_many` deletes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Doomed {
    /// These, where they exist (unknown ids are skipped).
    Ids(Vec<String>),
    /// Every session whose `updated_at` is strictly before this canonical time stamp.
    UpdatedBefore(String),
}

/// A message a search found, in one session whose history holds it: `index` is its
/// place in that history, `text` its searchable text (`session::search::message_text`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub session_id: String,
    pub index: u64,
    pub message_id: String,
    pub role: Role,
    pub text: String,
}

/// One page of a session's stored history, with what a repaired view needs. `M` is how
/// each message is held: parsed, or as its JSON text (`Store::history_json`).
#[derive(Debug, Clone)]
pub struct HistoryPage<M = Arc<Message>> {
    pub info: SessionInfo,
    /// The stored messages from `offset`, at most `limit` of them.
    pub messages: Vec<M>,
    /// The trailing tool-call group of the whole history.
    pub tail: Tail,
}

/// A message as the JSON text it serializes to: shared by a store that keeps the text
/// (the same allocation in every reply), or made for the one reply it goes into, without
/// the copy that sharing it would cost.
#[derive(Debug, Clone)]
pub enum MessageJson {
    /// A text the store keeps, which the server wrote itself: valid by construction, so
    /// not parsed again (the memory store's `Stored`).
    Shared(text::Text),
    /// Made by the store for this reply alone (a memory store's short message with its
    /// keys put back): valid by construction, so not parsed again.
    Made(String),
    Read(Box<RawValue>),
    /// Spliced from a database row's columns, each checked to be one JSON value: valid as
    /// a whole, so not parsed again (`sqlite::rows::message_json`). The rows read together
    /// are spliced into one text, one comma apart; this message is `range` of it.
    Spliced {
        text: Arc<String>,
        range: Range<usize>,
    },
}

impl MessageJson {
    pub fn get(&self) -> &str {
        match self {
            MessageJson::Shared(json) => json,
            MessageJson::Made(json) => json,
            MessageJson::Read(json) => json.get(),
            MessageJson::Spliced { text, range } => &text[range.clone()],
        }
    }

    /// `next` spliced into the same text right after this one, one comma on: then the
    /// two, and the comma, are written as one piece (`rpc::outgoing::Pieces::messages`).
    pub fn join(&mut self, next: &MessageJson) -> bool {
        match (self, next) {
            (MessageJson::Spliced { text, range }, MessageJson::Spliced { text: next, range: after })
                if Arc::ptr_eq(text, next)
                    && after.start == range.end + 1
                    && text.as_bytes().get(range.end) == Some(&b',') =>
            {
                range.end = after.end;
                true
            }
            _ => false,
        }
    }
}

impl serde::Serialize for MessageJson {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        match self {
            MessageJson::Read(json) => json.serialize(serializer),
            MessageJson::Shared(_) | MessageJson::Made(_) | MessageJson::Spliced { .. } => {
                let raw: &RawValue = serde_json::from_str(self.get()).map_err(serde::ser::Error::custom)?;
                raw.serialize(serializer)
            }
        }
    }
}

impl HistoryPage {
    /// The page with each message serialized.
    pub fn to_json(self) -> Result<HistoryPage<MessageJson>> {
        let messages = self.messages.iter().map(|m| message_json(m)).collect::<Result<_>>()?;
        Ok(HistoryPage { info: self.info, messages, tail: self.tail })
    }
}

pub fn message_json(message: &Message) -> Result<MessageJson> {
    serde_json::value::to_raw_value(message).map(MessageJson::Read).map_err(|e| Error::Internal(e.to_string()))
}

/// Sessions as wholes: create, read, list, change their fields, delete, fork, import.
#[async_trait]
pub trait Sessions: Send + Sync + 'static {
    /// `memory`, `sqlite` or `postgres`, as `initialize` reports it.
    fn kind(&self) -> &'static str;

    /// Why this process cannot write the store, when it opened it for reading only
    /// (`initialize`'s `store.read_only`): every write is then 1006.
    fn read_only(&self) -> Option<&str> {
        None
    }

    /// Creates an empty session; a server-chosen id when `session_id` is `None`.
    async fn create(&self, session_id: Option<String>, fields: Fields) -> Result<SessionInfo>;

    async fn get(&self, session_id: &str) -> Result<SessionInfo>;

    /// Up to `limit` sessions in `ListKey` order (newest creation first), starting after
    /// `after`.
    async fn list(&self, limit: usize, after: Option<ListKey>) -> Result<Vec<SessionInfo>> {
        self.list_updated_before(limit, after, None).await
    }

    /// As `list`, keeping only the sessions whose `updated_at` is strictly before
    /// `updated_before` (a canonical time stamp) when it is given.
    async fn list_updated_before(
        &self,
        limit: usize,
        after: Option<ListKey>,
        updated_before: Option<String>,
    ) -> Result<Vec<SessionInfo>>;

    async fn update(&self, session_id: &str, patch: Patch, expected_revision: Option<u64>) -> Result<SessionInfo>;

    /// Deletes a session; its forks keep their history.
    async fn delete(&self, session_id: &str, expected_revision: Option<u64>) -> Result<()>;

    /// Deletes every session `doomed` names, in one atomic step, and says how many went;
    /// their forks keep their history.
    async fn delete_many(&self, doomed: Doomed) -> Result<u64>;

    /// Copies a session, its history up to and including `at_message_id` when given, in
    /// time that does not grow with the history's length.
    async fn fork(
        &self,
        session_id: &str,
        new_session_id: Option<String>,
        at_message_id: Option<String>,
    ) -> Result<SessionInfo>;

    /// Stores a whole imported session (already checked by `session::plan_import`);
    /// with `replace`, over an existing one, continuing its revision count.
    /// `expected_revision` is checked against the session replaced (none there: 1001).
    async fn import(&self, import: Import, replace: bool, expected_revision: Option<u64>) -> Result<SessionInfo>;

    /// Makes every acknowledged write durable; called at `shutdown`.
    async fn flush(&self) -> Result<()>;

    /// Makes every acknowledged write durable and lets go of the database, at the end of
    /// a clean run (after `exit` or the end of input): a SQLite file is then whole, its
    /// log moved into it. Nothing is used after it.
    async fn close(&self) -> Result<()> {
        self.flush().await
    }
}

/// A session's history: append, read a page, and the edits that drop messages.
#[async_trait]
pub trait Histories: Send + Sync + 'static {
    /// Appends `messages` (already field-checked) under the rules of
    /// `session::plan_append`, all or nothing. With `once`, their ids are the ones the
    /// client chose (`message_id`), and an append the history holds already is answered
    /// as it was (`Appended::duplicate_of`), not stored again, before `expected_revision`
    /// and the rules are checked; an id held by a different message is 1010. Without it
    /// the ids are fresh.
    async fn append(
        &self,
        session_id: &str,
        messages: Vec<Message>,
        expected_revision: Option<u64>,
        once: bool,
    ) -> Result<Appended>;

    /// Whether an append says when its write is queued (`store::queued::signal`), so
    /// that the next append on its session may start then. One that never says so (the
    /// memory store applies an append at once) is given nothing to call.
    fn signals_queued(&self) -> bool {
        true
    }

    /// Stored messages `offset..offset + limit` (to the end when `limit` is `None`).
    async fn history(&self, session_id: &str, offset: u64, limit: Option<u64>) -> Result<HistoryPage>;

    /// `history`, each message as its JSON text: what a reply splices in. A store that
    /// keeps that text hands it out without parsing and serializing each message again.
    async fn history_json(
        &self,
        session_id: &str,
        offset: u64,
        limit: Option<u64>,
    ) -> Result<HistoryPage<MessageJson>> {
        self.history(session_id, offset, limit).await?.to_json()
    }

    /// Keeps the last `max_turns` turns whole (`session::turns_cut`).
    async fn trim_turns(&self, session_id: &str, max_turns: u64, expected_revision: Option<u64>) -> Result<Removed>;

    /// Drops every message after `to_message_id` and the tool results that directly
    /// follow it (`session::rewind_keeps`); with `archive`, first keeps the whole history
    /// as a new session, a fork in O(1). Nothing to drop changes nothing.
    async fn rewind(
        &self,
        session_id: &str,
        to_message_id: &str,
        archive: bool,
        expected_revision: Option<u64>,
    ) -> Result<Rewound>;

    /// Replaces every turn before the last `keep_turns` (`session::turns_cut`: whole
    /// turns, so never a split group) with one user message holding `summary`
    /// (`session::compaction_message`); with `archive`, first keeps the history as it was
    /// as a new session (O(1)). No more than `keep_turns` turns changes nothing.
    async fn compact(
        &self,
        session_id: &str,
        keep_turns: u64,
        summary: String,
        archive: bool,
        expected_revision: Option<u64>,
    ) -> Result<Compacted>;

    /// Drops every message, keeping the system prompt, cwd, title and metadata.
    async fn clear(&self, session_id: &str, expected_revision: Option<u64>) -> Result<Removed>;

    /// Removes the last stored message, whatever its role, and (`replace_with`) stores
    /// another in its place under the rules, in one step. An empty session changes
    /// nothing.
    async fn pop(
        &self,
        session_id: &str,
        replace_with: Option<Message>,
        expected_revision: Option<u64>,
    ) -> Result<Popped>;
}

/// The drafts of streams in progress (`session/stream`), kept so that a crash mid-stream
/// leaves the partial answer, not nothing.
#[async_trait]
pub trait Drafts: Send + Sync + 'static {
    /// Appends a completed stream's messages as `append` does and drops its draft, in
    /// one step (so a crash cannot keep both the answer and the draft).
    async fn append_finishing(
        &self,
        session_id: &str,
        messages: Vec<Message>,
        expected_revision: Option<u64>,
        stream_id: &str,
    ) -> Result<Appended>;

    /// Saves a stream's draft, or refreshes it.
    async fn save_draft(&self, draft: Draft) -> Result<()>;

    /// The most recently saved draft of a session.
    async fn draft(&self, session_id: &str) -> Result<Option<Draft>>;

    /// Drops a draft; nothing happens when there is none.
    async fn drop_draft(&self, stream_id: &str) -> Result<()>;

    /// Turns a draft into messages (`Draft::into_messages`, appended under the rules
    /// with no revision check) and drops it, in one step. `None` when the draft is gone
    /// (another process settled it) or its session is.
    async fn settle_draft(&self, stream_id: &str, end: DraftEnd) -> Result<Option<Appended>>;

    /// The drafts whose owner has not refreshed them since `before` (Unix milliseconds).
    async fn stale_drafts(&self, before: i64) -> Result<Vec<String>>;
}

/// Full-text search over every history.
#[async_trait]
pub trait SearchIndex: Send + Sync + 'static {
    /// The messages matching `query` (`session::search`), best match first, ties by
    /// session id then index; a message shared by forks once per session holding it.
    /// Only `session_id`'s history when given (1001 if there is no such session); the
    /// results `offset..offset + limit` of that order.
    async fn search(&self, query: &Query, session_id: Option<&str>, offset: u64, limit: u64) -> Result<Vec<Found>>;
}

/// Images, kept once by content.
#[async_trait]
pub trait ImageStore: Send + Sync + 'static {
    /// The base64 of the image whose ref (`session::image`) is `reference`, if the store
    /// holds it.
    async fn image(&self, reference: &str) -> Result<Option<String>>;
}

/// Every committed change, for `session/subscribe`.
#[async_trait]
pub trait ChangeFeed: Send + Sync + 'static {
    /// Watches every change committed from now on, by this process or (for a store
    /// several processes share) by any other: once it returns, no later change is missed.
    /// `StorageUnavailable` when the store could not make that so in time.
    async fn watch(&self) -> Result<Arc<feed::Watcher>>;
}

/// The store's own consistency (`convo fsck`).
#[async_trait]
pub trait Checks: Send + Sync + 'static {
    /// Each finding is a sentence, none when all is well. A backend without checks of
    /// its own finds nothing.
    async fn check(&self) -> Result<Vec<String>> {
        Ok(Vec::new())
    }
}

/// Everything a backend provides, one concern per trait: a new backend implements them
/// one at a time (the SQL ones through `sql`, which writes their algorithms once).
/// `ops` is the only user.
pub trait Store: Sessions + Histories + Drafts + SearchIndex + ImageStore + ChangeFeed + Checks {}

impl<T: Sessions + Histories + Drafts + SearchIndex + ImageStore + ChangeFeed + Checks> Store for T {}

/// The backends `--store` can name: `memory`, `sqlite` (the default path),
/// `sqlite:PATH` (a file name, never an SQLite URI, in a folder that exists), or a
/// PostgreSQL URL (`postgres://…` or `postgresql://…`) with the schema to use.
#[derive(Clone, PartialEq, Eq)]
pub enum StoreSpec {
    Memory,
    Sqlite(Option<PathBuf>),
    Postgres { url: String, schema: String },
}

/// The schema `--store postgres://…` uses unless `--pg-schema` names another.
pub const DEFAULT_PG_SCHEMA: &str = "convo";

/// Never shows a PostgreSQL password.
impl std::fmt::Debug for StoreSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreSpec::Memory => f.write_str("Memory"),
            StoreSpec::Sqlite(path) => f.debug_tuple("Sqlite").field(path).finish(),
            StoreSpec::Postgres { url, schema } => {
                f.debug_struct("Postgres").field("url", &postgres::connect::mask(url)).field("schema", schema).finish()
            }
        }
    }
}

impl std::str::FromStr for StoreSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.split_once(':') {
            None if s == "memory" => Ok(StoreSpec::Memory),
            None if s == "sqlite" => Ok(StoreSpec::Sqlite(None)),
            Some(("sqlite", path)) if !path.is_empty() => Ok(StoreSpec::Sqlite(Some(path.into()))),
            Some(("postgres" | "postgresql", rest)) if rest.starts_with("//") => {
                Ok(StoreSpec::Postgres { url: s.to_owned(), schema: DEFAULT_PG_SCHEMA.to_owned() })
            }
            _ => Err(format!(
                "unknown store {}: use memory, sqlite, sqlite:PATH or postgres://…",
                crate::error::quote(&postgres::connect::mask(s))
            )),
        }
    }
}

/// Where `--store sqlite` keeps its file: the platform's data folder for this machine —
/// on Linux `$XDG_DATA_HOME/convo/sessions.db` (by default `~/.local/share/…`), on macOS
/// `~/Library/Application Support/convo/sessions.db`, on Windows
/// `%LOCALAPPDATA%\convo\sessions.db` (a database is not for a roaming profile).
pub fn default_sqlite_path() -> Option<PathBuf> {
    directories::BaseDirs::new().map(|dirs| dirs.data_local_dir().join("convo").join("sessions.db"))
}

impl StoreSpec {
    /// Opens the store; async because a server store (PostgreSQL) connects first.
    /// `settings.busy_timeout` is also how long a PostgreSQL write waits for a row lock.
    pub async fn open(&self, settings: SqliteSettings) -> Result<Arc<dyn Store>> {
        match self {
            StoreSpec::Postgres { url, schema } => {
                Ok(Arc::new(PostgresStore::open(url, schema, settings.busy_timeout).await?))
            }
            StoreSpec::Memory => Ok(Arc::new(MemoryStore::default())),
            StoreSpec::Sqlite(Some(path)) => Ok(Arc::new(SqliteStore::open(path, settings)?)),
            StoreSpec::Sqlite(None) => match default_sqlite_path() {
                Some(path) => Ok(Arc::new(SqliteStore::open_creating_folders(&path, settings)?)),
                None => Err(crate::Error::StorageUnavailable(
                    "no home folder to keep sessions in; give --store sqlite:PATH".into(),
                )),
            },
        }
    }
}
