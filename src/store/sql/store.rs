//! The `Store` traits, implemented once for both SQL backends: each method turns into a
//! job (`jobs`) that the backend's `Engine` runs in the transaction it needs.

use std::future::Future;
use std::sync::Arc;

use async_trait::async_trait;

use crate::error::Result;
use crate::session::search::Query;
use crate::session::{Draft, DraftEnd, Fields, Import, ListKey, Message, Patch, SessionInfo};
use crate::store::feed::Watcher;
use crate::store::sql::jobs::{Done, Edit, Got, Read, expect};
use crate::store::sql::rows::Listing;
use crate::store::{
    Appended, ChangeFeed, Checks, Compacted, Doomed, Drafts, Found, Histories, HistoryPage, ImageStore, MessageJson,
    Popped, Removed, Rewound, SearchIndex, Sessions,
};

/// What a SQL backend provides: its connections, and running jobs on them.
pub trait Engine: Send + Sync + 'static {
    /// `sqlite` or `postgres`, as `initialize` reports it.
    const KIND: &'static str;
    /// Runs an edit in a write transaction; its answer once the transaction committed.
    fn edit(&self, edit: Edit) -> impl Future<Output = Result<Done>> + Send;
    /// Runs a read (in one snapshot when `Read::snapshot`).
    fn read(&self, read: Read) -> impl Future<Output = Result<Got>> + Send;
    /// Makes every acknowledged write durable.
    fn flush(&self) -> impl Future<Output = Result<()>> + Send;
    /// Makes every acknowledged write durable and lets go of the database, at a clean
    /// end (`store::Sessions::close`).
    fn close(&self) -> impl Future<Output = Result<()>> + Send {
        self.flush()
    }
    /// Watches every change committed from now on, by any process.
    fn watch(&self) -> impl Future<Output = Result<Arc<Watcher>>> + Send;
    /// Why this process cannot write the store, when it opened it for reading only.
    fn read_only(&self) -> Option<&str> {
        None
    }
}

/// A store kept by a SQL backend.
pub struct SqlStore<E> {
    engine: E,
}

impl<E: Engine> SqlStore<E> {
    pub fn new(engine: E) -> Self {
        SqlStore { engine }
    }

    async fn session(&self, edit: Edit) -> Result<SessionInfo> {
        expect(self.engine.edit(edit).await?, |d| if let Done::Session(s) = d { Some(s) } else { None })
    }

    async fn appended(&self, edit: Edit) -> Result<Appended> {
        expect(self.engine.edit(edit).await?, |d| if let Done::Appended(a) = d { Some(a) } else { None })
    }

    async fn removed(&self, edit: Edit) -> Result<Removed> {
        expect(self.engine.edit(edit).await?, |d| if let Done::Removed(r) = d { Some(r) } else { None })
    }

    async fn nothing(&self, edit: Edit) -> Result<()> {
        expect(self.engine.edit(edit).await?, |d| matches!(d, Done::Nothing).then_some(()))
    }
}

#[async_trait]
impl<E: Engine> Sessions for SqlStore<E> {
    fn kind(&self) -> &'static str {
        E::KIND
    }

    fn read_only(&self) -> Option<&str> {
        self.engine.read_only()
    }

    async fn create(&self, session_id: Option<String>, fields: Fields) -> Result<SessionInfo> {
        self.session(Edit::Create { session_id, fields }).await
    }

    async fn get(&self, session_id: &str) -> Result<SessionInfo> {
        let got = self.engine.read(Read::Get(session_id.to_owned())).await?;
        expect(got, |g| if let Got::Session(s) = g { Some(s) } else { None })
    }

    async fn list_updated_before(
        &self,
        limit: usize,
        after: Option<ListKey>,
        updated_before: Option<String>,
    ) -> Result<Vec<SessionInfo>> {
        let got = self.engine.read(Read::List(Listing { limit, after, updated_before })).await?;
        expect(got, |g| if let Got::Sessions(s) = g { Some(s) } else { None })
    }

    async fn update(&self, session_id: &str, patch: Patch, expected: Option<u64>) -> Result<SessionInfo> {
        self.session(Edit::Update { session_id: session_id.to_owned(), patch, expected }).await
    }

    async fn delete(&self, session_id: &str, expected: Option<u64>) -> Result<()> {
        self.nothing(Edit::Delete { session_id: session_id.to_owned(), expected }).await
    }

    async fn delete_many(&self, doomed: Doomed) -> Result<u64> {
        expect(
            self.engine.edit(Edit::DeleteMany(doomed)).await?,
            |d| if let Done::Deleted(n) = d { Some(n) } else { None },
        )
    }

    async fn fork(&self, session_id: &str, new_id: Option<String>, at: Option<String>) -> Result<SessionInfo> {
        self.session(Edit::Fork { session_id: session_id.to_owned(), new_session_id: new_id, at_message_id: at }).await
    }

    async fn import(&self, import: Import, replace: bool, expected: Option<u64>) -> Result<SessionInfo> {
        self.session(Edit::Import { import, replace, expected }).await
    }

    async fn flush(&self) -> Result<()> {
        self.engine.flush().await
    }

    async fn close(&self) -> Result<()> {
        self.engine.close().await
    }
}

#[async_trait]
impl<E: Engine> Histories for SqlStore<E> {
    async fn append(
        &self,
        session_id: &str,
        messages: Vec<Message>,
        expected: Option<u64>,
        once: bool,
    ) -> Result<Appended> {
        self.appended(Edit::Append { session_id: session_id.to_owned(), messages, expected, once }).await
    }

    async fn history(&self, session_id: &str, offset: u64, limit: Option<u64>) -> Result<HistoryPage> {
        let got = self.engine.read(Read::History { session_id: session_id.to_owned(), offset, limit }).await?;
        expect(got, |g| if let Got::Page(p) = g { Some(p) } else { None })
    }

    async fn history_json(
        &self,
        session_id: &str,
        offset: u64,
        limit: Option<u64>,
    ) -> Result<HistoryPage<MessageJson>> {
        let got = self.engine.read(Read::HistoryJson { session_id: session_id.to_owned(), offset, limit }).await?;
        expect(got, |g| if let Got::PageJson(p) = g { Some(p) } else { None })
    }

    async fn trim_turns(&self, session_id: &str, max_turns: u64, expected: Option<u64>) -> Result<Removed> {
        self.removed(Edit::TrimTurns { session_id: session_id.to_owned(), max_turns, expected }).await
    }

    async fn rewind(&self, session_id: &str, to: &str, archive: bool, expected: Option<u64>) -> Result<Rewound> {
        let edit = Edit::Rewind { session_id: session_id.to_owned(), to: to.to_owned(), archive, expected };
        expect(self.engine.edit(edit).await?, |d| if let Done::Rewound(r) = d { Some(r) } else { None })
    }

    async fn compact(
        &self,
        session_id: &str,
        keep_turns: u64,
        summary: String,
        archive: bool,
        expected: Option<u64>,
    ) -> Result<Compacted> {
        let edit = Edit::Compact { session_id: session_id.to_owned(), keep_turns, summary, archive, expected };
        expect(self.engine.edit(edit).await?, |d| if let Done::Compacted(c) = d { Some(c) } else { None })
    }

    async fn clear(&self, session_id: &str, expected: Option<u64>) -> Result<Removed> {
        self.removed(Edit::Clear { session_id: session_id.to_owned(), expected }).await
    }

    async fn pop(&self, session_id: &str, replace_with: Option<Message>, expected: Option<u64>) -> Result<Popped> {
        let edit = Edit::Pop { session_id: session_id.to_owned(), replace_with: replace_with.map(Box::new), expected };
        expect(self.engine.edit(edit).await?, |d| if let Done::Popped(p) = d { Some(p) } else { None })
    }
}

#[async_trait]
impl<E: Engine> Drafts for SqlStore<E> {
    async fn append_finishing(
        &self,
        session_id: &str,
        messages: Vec<Message>,
        expected: Option<u64>,
        stream_id: &str,
    ) -> Result<Appended> {
        let (session_id, stream_id) = (session_id.to_owned(), stream_id.to_owned());
        self.appended(Edit::AppendFinishing { session_id, messages, expected, stream_id }).await
    }

    async fn save_draft(&self, draft: Draft) -> Result<()> {
        self.nothing(Edit::SaveDraft(Box::new(draft))).await
    }

    async fn draft(&self, session_id: &str) -> Result<Option<Draft>> {
        let got = self.engine.read(Read::Draft(session_id.to_owned())).await?;
        expect(got, |g| if let Got::Draft(d) = g { Some(d) } else { None })
    }

    async fn drop_draft(&self, stream_id: &str) -> Result<()> {
        self.nothing(Edit::DropDraft(stream_id.to_owned())).await
    }

    async fn settle_draft(&self, stream_id: &str, end: DraftEnd) -> Result<Option<Appended>> {
        let edit = Edit::SettleDraft { stream_id: stream_id.to_owned(), end };
        expect(self.engine.edit(edit).await?, |d| if let Done::Settled(s) = d { Some(s) } else { None })
    }

    async fn stale_drafts(&self, before: i64) -> Result<Vec<String>> {
        let got = self.engine.read(Read::StaleDrafts(before)).await?;
        expect(got, |g| if let Got::Streams(s) = g { Some(s) } else { None })
    }
}

#[async_trait]
impl<E: Engine> SearchIndex for SqlStore<E> {
    async fn search(&self, query: &Query, session_id: Option<&str>, offset: u64, limit: u64) -> Result<Vec<Found>> {
        let read = Read::Search { query: query.clone(), session_id: session_id.map(str::to_owned), offset, limit };
        expect(self.engine.read(read).await?, |g| if let Got::Found(f) = g { Some(f) } else { None })
    }
}

#[async_trait]
impl<E: Engine> ImageStore for SqlStore<E> {
    async fn image(&self, reference: &str) -> Result<Option<String>> {
        let got = self.engine.read(Read::Image(reference.to_owned())).await?;
        expect(got, |g| if let Got::Image(i) = g { Some(i) } else { None })
    }
}

#[async_trait]
impl<E: Engine> ChangeFeed for SqlStore<E> {
    async fn watch(&self) -> Result<Arc<Watcher>> {
        self.engine.watch().await
    }
}

#[async_trait]
impl<E: Engine> Checks for SqlStore<E> {
    async fn check(&self) -> Result<Vec<String>> {
        expect(self.engine.read(Read::Check).await?, |g| if let Got::Findings(f) = g { Some(f) } else { None })
    }
}
