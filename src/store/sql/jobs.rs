//! What an SQL backend is asked to run, as values: an `Edit` for a write transaction, a
//! `Read` for a read, each applied through the backend's `Tx` by the one shared algorithm
//! (`edits`, `chain`, `check`). A backend never learns which use-case it serves; it runs a
//! job in the transaction the job needs and hands back what it gave (`Done`, `Got`).

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::session::search::Query;
use crate::session::{Draft, DraftEnd, Fields, Import, Message, Patch, SessionInfo};
use crate::store::sql::check::{self, Inspect};
use crate::store::sql::rows::{Listing, Searching, SessionRow, Span};
use crate::store::sql::tx::Tx;
use crate::store::sql::{chain, edits};
use crate::store::{Appended, Compacted, Doomed, Found, HistoryPage, MessageJson, Popped, Removed, Rewound};

/// A mutation: the body of one write transaction. `Clone`, because a backend may run it
/// again after losing a race (PostgreSQL's deadlock retry).
#[derive(Debug, Clone)]
pub enum Edit {
    Create { session_id: Option<String>, fields: Fields },
    Update { session_id: String, patch: Patch, expected: Option<u64> },
    Delete { session_id: String, expected: Option<u64> },
    DeleteMany(Doomed),
    Fork { session_id: String, new_session_id: Option<String>, at_message_id: Option<String> },
    Import { import: Import, replace: bool, expected: Option<u64> },
    Append { session_id: String, messages: Vec<Message>, expected: Option<u64>, once: bool },
    TrimTurns { session_id: String, max_turns: u64, expected: Option<u64> },
    Rewind { session_id: String, to: String, archive: bool, expected: Option<u64> },
    Compact { session_id: String, keep_turns: u64, summary: String, archive: bool, expected: Option<u64> },
    Clear { session_id: String, expected: Option<u64> },
    Pop { session_id: String, replace_with: Option<Box<Message>>, expected: Option<u64> },
    AppendFinishing { session_id: String, messages: Vec<Message>, expected: Option<u64>, stream_id: String },
    SaveDraft(Box<Draft>),
    DropDraft(String),
    SettleDraft { stream_id: String, end: DraftEnd },
}

/// What an edit gave.
#[derive(Debug)]
#[allow(clippy::large_enum_variant, reason = "one per edit, moved once: boxing would cost an allocation each")]
pub enum Done {
    Session(SessionInfo),
    Nothing,
    Deleted(u64),
    Appended(Appended),
    Settled(Option<Appended>),
    Removed(Removed),
    Rewound(Rewound),
    Compacted(Compacted),
    Popped(Popped),
}

impl Edit {
    /// The session the edit is addressed to, when it names one: a writer that applies
    /// one session's edits in order keys its queues by it.
    pub fn session_key(&self) -> Option<&str> {
        match self {
            Edit::Create { session_id, .. } => session_id.as_deref(),
            Edit::Import { import, .. } => import.session_id.as_deref(),
            Edit::Update { session_id, .. }
            | Edit::Delete { session_id, .. }
            | Edit::Fork { session_id, .. }
            | Edit::Append { session_id, .. }
            | Edit::TrimTurns { session_id, .. }
            | Edit::Rewind { session_id, .. }
            | Edit::Compact { session_id, .. }
            | Edit::Clear { session_id, .. }
            | Edit::Pop { session_id, .. }
            | Edit::AppendFinishing { session_id, .. } => Some(session_id),
            Edit::SaveDraft(draft) => Some(&draft.session_id),
            Edit::DeleteMany(_) | Edit::DropDraft(_) | Edit::SettleDraft { .. } => None,
        }
    }

    /// The run the edit may be applied in (`apply_run`): the appends to one session, or
    /// creates, queued back to back.
    pub fn run(&self) -> Option<Run<'_>> {
        match self {
            Edit::Append { session_id, .. } => Some(Run::Appends(session_id)),
            Edit::Create { .. } => Some(Run::Creates),
            Edit::Update { .. } => Some(Run::Updates),
            _ => None,
        }
    }

    pub async fn apply<T: Tx + ?Sized>(self, tx: &T) -> Result<Done> {
        Ok(match self {
            Edit::Create { session_id, fields } => Done::Session(edits::create(tx, session_id, fields).await?),
            Edit::Update { session_id, patch, expected } => {
                Done::Session(edits::update(tx, &session_id, patch, expected).await?)
            }
            Edit::Delete { session_id, expected } => {
                edits::delete(tx, &session_id, expected).await?;
                Done::Nothing
            }
            Edit::DeleteMany(doomed) => Done::Deleted(edits::delete_many(tx, doomed).await?),
            Edit::Fork { session_id, new_session_id, at_message_id } => {
                Done::Session(edits::fork(tx, &session_id, new_session_id, at_message_id).await?)
            }
            Edit::Import { import, replace, expected } => {
                Done::Session(edits::import(tx, import, replace, expected).await?)
            }
            Edit::Append { session_id, messages, expected, once } => {
                Done::Appended(edits::append(tx, &session_id, messages, expected, once).await?)
            }
            Edit::TrimTurns { session_id, max_turns, expected } => {
                Done::Removed(edits::trim_turns(tx, &session_id, max_turns, expected).await?)
            }
            Edit::Rewind { session_id, to, archive, expected } => {
                Done::Rewound(edits::rewind(tx, &session_id, &to, archive, expected).await?)
            }
            Edit::Compact { session_id, keep_turns, summary, archive, expected } => {
                Done::Compacted(edits::compact(tx, &session_id, keep_turns, summary, archive, expected).await?)
            }
            Edit::Clear { session_id, expected } => Done::Removed(edits::clear(tx, &session_id, expected).await?),
            Edit::Pop { session_id, replace_with, expected } => {
                Done::Popped(edits::pop(tx, &session_id, replace_with.map(|m| *m), expected).await?)
            }
            Edit::AppendFinishing { session_id, messages, expected, stream_id } => {
                Done::Appended(edits::append_finishing(tx, &session_id, messages, expected, &stream_id).await?)
            }
            Edit::SaveDraft(draft) => {
                edits::save_draft(tx, &draft).await?;
                Done::Nothing
            }
            Edit::DropDraft(stream_id) => {
                tx.delete_draft(&stream_id).await?;
                Done::Nothing
            }
            Edit::SettleDraft { stream_id, end } => Done::Settled(edits::settle_draft(tx, &stream_id, end).await?),
        })
    }
}

/// Edits applied together, in one round trip or a few: those `Edit::run` gives the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Run<'e> {
    /// Appends to this session (`edits::append_run`).
    Appends(&'e str),
    /// Creates (`edits::create_run`).
    Creates,
    /// Updates of distinct sessions (`edits::update_run`).
    Updates,
}

/// Edits of one `Run`, applied as one: the answers of the edits the run took, from the
/// first on; the others are to be applied one by one. An error: the whole run is rolled
/// back.
pub async fn apply_run<T: Tx + ?Sized>(tx: &T, run: Vec<Edit>) -> Result<Vec<Result<Done>>> {
    let mismatch = || Err(Error::Internal("a run held edits of another kind".into()));
    match run.first().and_then(Edit::run) {
        None => Ok(Vec::new()),
        Some(Run::Appends(session)) => {
            let session = session.to_owned();
            let mut appends = Vec::with_capacity(run.len());
            for edit in run {
                match edit {
                    Edit::Append { session_id, messages, expected, once } if session_id == session => {
                        appends.push(edits::Appendable { messages, expected, once });
                    }
                    _ => return mismatch(),
                }
            }
            let answers = edits::append_run(tx, &session, appends).await?;
            Ok(answers.into_iter().map(|a| a.map(Done::Appended)).collect())
        }
        Some(Run::Creates) => {
            let mut creates = Vec::with_capacity(run.len());
            for edit in run {
                match edit {
                    Edit::Create { session_id, fields } => creates.push((session_id, fields)),
                    _ => return mismatch(),
                }
            }
            let answers = edits::create_run(tx, creates).await?;
            Ok(answers.into_iter().map(|info| Ok(Done::Session(info))).collect())
        }
        Some(Run::Updates) => {
            let mut updates = Vec::with_capacity(run.len());
            for edit in run {
                match edit {
                    Edit::Update { session_id, patch, expected } => updates.push((session_id, patch, expected)),
                    _ => return mismatch(),
                }
            }
            let answers = edits::update_run(tx, updates).await?;
            Ok(answers.into_iter().map(|a| a.map(Done::Session)).collect())
        }
    }
}

/// A read. `snapshot()` says whether it reads more than one statement's worth and so
/// needs one consistent snapshot.
#[derive(Debug, Clone)]
pub enum Read {
    Get(String),
    List(Listing),
    History { session_id: String, offset: u64, limit: Option<u64> },
    HistoryJson { session_id: String, offset: u64, limit: Option<u64> },
    Draft(String),
    StaleDrafts(i64),
    Image(String),
    Search { query: Query, session_id: Option<String>, offset: u64, limit: u64 },
    Check,
}

/// What a read gave.
#[derive(Debug)]
pub enum Got {
    Session(SessionInfo),
    Sessions(Vec<SessionInfo>),
    Page(HistoryPage),
    PageJson(HistoryPage<MessageJson>),
    Draft(Option<Draft>),
    Streams(Vec<String>),
    Image(Option<String>),
    Found(Vec<Found>),
    Findings(Vec<String>),
}

impl Read {
    pub fn snapshot(&self) -> bool {
        matches!(self, Read::History { .. } | Read::HistoryJson { .. } | Read::Search { .. } | Read::Check)
    }

    pub async fn apply<T: Inspect + ?Sized>(self, tx: &T) -> Result<Got> {
        Ok(match self {
            Read::Get(id) => Got::Session(require(tx, &id).await?.info),
            Read::List(listing) => Got::Sessions(tx.list(&listing).await?),
            Read::History { session_id, offset, limit } => {
                let (row, spans, from, to) = locate(tx, &session_id, offset, limit).await?;
                let messages = chain::read(tx, &spans, from, to).await?.into_iter().map(Arc::new).collect();
                Got::Page(HistoryPage { tail: chain::tail(tx, &spans).await?, info: row.info, messages })
            }
            Read::HistoryJson { session_id, offset, limit } => {
                let (row, spans, from, to) = locate(tx, &session_id, offset, limit).await?;
                let messages = chain::read_json(tx, &spans, from, to).await?;
                Got::PageJson(HistoryPage { tail: chain::tail(tx, &spans).await?, info: row.info, messages })
            }
            Read::Draft(session_id) => Got::Draft(tx.newest_draft(&session_id).await?),
            Read::StaleDrafts(before) => Got::Streams(tx.stale_drafts(before).await?),
            Read::Image(reference) => Got::Image(tx.image(&reference).await?),
            Read::Search { query, session_id, offset, limit } => {
                let within = match &session_id {
                    Some(id) => {
                        let row = require(tx, id).await?;
                        let spans = chain::spans(tx, &row).await?;
                        Some((row, spans))
                    }
                    None => None,
                };
                let within = within.as_ref().map(|(row, spans)| (row, spans.as_slice()));
                Got::Found(tx.search(Searching { query: &query, within, offset, limit }).await?)
            }
            Read::Check => Got::Findings(check::check(tx).await?),
        })
    }
}

async fn require<T: Tx + ?Sized>(tx: &T, id: &str) -> Result<SessionRow> {
    tx.session(id, false).await?.ok_or_else(|| Error::SessionNotFound(id.to_owned()))
}

/// A session's row, its spans, and the positions `offset..offset + limit` stand for.
async fn locate<T: Tx + ?Sized>(
    tx: &T,
    id: &str,
    offset: u64,
    limit: Option<u64>,
) -> Result<(SessionRow, Vec<Span>, u64, u64)> {
    let row = require(tx, id).await?;
    let spans = chain::spans(tx, &row).await?;
    let (from, to) = chain::bounds(&row, offset, limit);
    Ok((row, spans, from, to))
}

/// The answer of the kind a job gives, or an internal error (a backend that answered a
/// job with another job's kind of answer is a bug, not bad input).
pub fn expect<A, T>(answer: A, pick: impl FnOnce(A) -> Option<T>) -> Result<T> {
    pick(answer).ok_or_else(|| Error::Internal("a store job gave another kind of answer".into()))
}
