//! The in-memory backend (`--store memory`): for throw-away sessions and tests.
//!
//! Histories are persistent vectors (`imbl`) of each message's JSON text (`history`), so a
//! fork shares its parent's messages and costs the same whatever their number, and a reply
//! splices the texts without serializing anything again. Each mutation checks everything
//! (revision, conversation rules) before it changes anything, so a refused request leaves
//! the entry as it was.

mod history;
mod scan;
mod sign;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;

use crate::error::{Error, Result, quote};
use crate::session::image;
use crate::session::native::UsageTotals;
use crate::session::search::Query;
use crate::session::{
    Draft, DraftEnd, Fields, ForkPoint, Import, ListKey, Message, Patch, SessionInfo, check_revision,
    compaction_message, new_session_id, now, plan_append, push_at_micros, rewind_keeps, turns_cut,
};
use crate::store::feed::{Change, ChangeKind, Feed, Watcher};
use crate::store::text::WeakText;
use crate::store::{
    Appended, ChangeFeed, Checks, Compacted, Doomed, Drafts, Found, Histories, HistoryPage, ImageStore, MessageJson,
    Popped, Removed, Rewound, SearchIndex, Sessions,
};
use history::{History, Origin, Stored};
use sign::Sign;

#[derive(Default)]
pub struct MemoryStore {
    sessions: Mutex<Table>,
    /// Stream drafts by stream id. Locked after `sessions` when both are.
    drafts: Mutex<HashMap<String, Draft>>,
    /// Changes are published while `sessions` is locked, so in commit order.
    feed: Feed,
    /// Each image ref, and the messages holding that image (at that index): images stay
    /// inside their messages, and an entry goes stale when no session holds its message
    /// any more. Locked after `sessions` when both are.
    images: Mutex<HashMap<String, Vec<Holder>>>,
}

/// A stored message's text holding an image, and the image's index among its images.
type Holder = (WeakText, usize);

#[derive(Clone)]
struct Entry {
    fields: Fields,
    revision: u64,
    created_at: String,
    updated_at: String,
    forked_from: Option<ForkPoint>,
    history: History,
    /// What the responses appended since its creation cost.
    usage: UsageTotals,
    /// The session's id as the messages it stores name their owner (`Origin`): one text
    /// that all of them share, not one per append.
    owner: Option<Arc<String>>,
}

impl Entry {
    fn new(fields: Fields, history: History, forked_from: Option<ForkPoint>) -> Self {
        let at = now();
        let usage = UsageTotals::default();
        Entry { fields, revision: 0, created_at: at.clone(), updated_at: at, forked_from, history, usage, owner: None }
    }

    /// Runs `change` with its history and who stores what the next change adds: the
    /// session, at its next revision. The session's name is lent for it, not shared again
    /// (each change of an `Arc`'s count is an atomic operation).
    fn storing<T>(&mut self, session_id: &str, change: impl FnOnce(&mut History, &Origin) -> T) -> T {
        let owner = match self.owner.take() {
            Some(owner) if owner.as_str() == session_id => owner,
            _ => Arc::new(session_id.to_owned()),
        };
        let origin = Origin { owner, revision: self.revision + 1 };
        let changed = change(&mut self.history, &origin);
        self.owner = Some(origin.owner);
        changed
    }

    fn info(&self, session_id: &str) -> SessionInfo {
        SessionInfo {
            session_id: session_id.to_owned(),
            system: self.fields.system.clone(),
            cwd: self.fields.cwd.clone(),
            title: self.fields.title.clone(),
            metadata: self.fields.metadata.clone(),
            message_count: self.history.len() as u64,
            revision: self.revision,
            created_at: self.created_at.clone(),
            updated_at: self.updated_at.clone(),
            forked_from: self.forked_from.clone(),
            usage: self.usage,
        }
    }

    fn touch(&mut self) {
        self.touch_at(None);
    }

    /// `touch`, the change made at `stamp` (a canonical time stamp) when given, else now.
    fn touch_at(&mut self, stamp: Option<&str>) {
        self.revision += 1;
        // Written over in place: a stamp is always as long, so every append after the
        // first allocates no text for it.
        self.updated_at.clear();
        match stamp {
            Some(stamp) => self.updated_at.push_str(stamp),
            None => push_at_micros(&mut self.updated_at, crate::mint::now_micros()),
        }
    }
}

/// When the messages an append stores were made.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Made {
    /// For this append, the newest just before it (`Histories::append`: `ops` makes what
    /// it appends, a turn's answer last, once the host gave it).
    Now,
    /// Earlier: a stream's draft, begun when the stream was.
    Before,
}

type Table = HashMap<String, Entry, foldhash::fast::RandomState>;

impl MemoryStore {
    fn lock(&self) -> MutexGuard<'_, Table> {
        // Mutations check before they change, and nothing they change can panic (short of
        // running out of memory), so a panic elsewhere cannot have left an entry torn.
        self.sessions.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Runs `change` on the session's entry under the lock; bumps the revision when it
    /// returns `Ok((true, _))`. A change must fail, if it fails, before it modifies
    /// anything (check, then apply), so that an error leaves the entry as it was.
    fn mutate<T>(
        &self,
        session_id: &str,
        expected_revision: Option<u64>,
        kind: ChangeKind,
        change: impl FnOnce(&mut Entry) -> Result<(bool, T)>,
    ) -> Result<(T, u64)> {
        let mut sessions = self.lock();
        let entry = sessions.get_mut(session_id).ok_or_else(|| not_found(session_id))?;
        check_revision(expected_revision, entry.revision)?;
        let (changed, out) = change(entry)?;
        if changed {
            entry.touch();
            self.publish(session_id, entry, kind);
        }
        Ok((out, entry.revision))
    }

    /// Gives a session a new history, after storing `archived` (the old one, as a new
    /// session) when given; returns the archive's id and the session's new revision.
    fn replace_history(
        &self,
        sessions: &mut Table,
        session_id: &str,
        history: History,
        archived: Option<Entry>,
        kind: ChangeKind,
    ) -> Result<(Option<String>, u64)> {
        let archived_session_id = archived.map(|archived| {
            let id = new_session_id();
            self.publish(&id, &archived, ChangeKind::Created);
            sessions.insert(id.clone(), archived);
            id
        });
        let entry = sessions.get_mut(session_id).ok_or_else(|| not_found(session_id))?;
        entry.history = history;
        entry.touch();
        self.publish(session_id, entry, kind);
        Ok((archived_session_id, entry.revision))
    }

    /// Tells watchers of a committed change; called with `sessions` locked.
    fn publish(&self, session_id: &str, entry: &Entry, kind: ChangeKind) {
        // Nobody watches (no `session/subscribe`, the usual case): no change is made.
        let message_count = entry.history.len() as u64;
        self.feed.publish_with(|| Change {
            session_id: session_id.to_owned(),
            revision: entry.revision,
            kind,
            message_count,
        });
    }

    fn drafts(&self) -> MutexGuard<'_, HashMap<String, Draft>> {
        self.drafts.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// See `Histories::append`.
    fn append_locked(
        &self,
        mut sessions: MutexGuard<'_, Table>,
        session_id: &str,
        messages: Vec<Message>,
        expected_revision: Option<u64>,
        once: bool,
        when: Made,
    ) -> Result<Appended> {
        let message_ids: Vec<String> = messages.iter().filter_map(|m| m.id.clone()).collect();
        let entry = sessions.get_mut(session_id).ok_or_else(|| not_found(session_id))?;
        if once && let Some(retried) = retried(session_id, &entry.history, &messages)? {
            return Ok(retried);
        }
        check_revision(expected_revision, entry.revision)?;
        let planned = plan_append(entry.history.tail().clone(), messages)?;
        if !planned.is_empty() {
            entry.storing(session_id, |history, origin| history.extend(&planned, origin))?;
            self.index_images(&planned, &entry.history);
            planned.iter().filter_map(|m| m.usage.as_deref()).for_each(|u| entry.usage.add(u));
            // Messages made for this append were stamped a moment ago, in this request,
            // and those the rules add just now: the newest stamp (canonical stamps compare
            // as their times) is the change's time, and the clock is not read again. The
            // counted clock is (`--deterministic` gives every stamp a reading of its own).
            let made_now = when == Made::Now && !crate::mint::is_counted();
            entry.touch_at(planned.iter().map(|m| m.created_at.as_str()).max().filter(|_| made_now));
            self.publish(session_id, entry, ChangeKind::Appended);
        }
        let index = entry.history.len().saturating_sub(1) as u64;
        Ok(Appended::new(message_ids, index, entry.revision))
    }

    /// Indexes the images of `messages`, the newest of `history`.
    fn index_images(&self, messages: &[Message], history: &History) {
        // Most appends hold no image: the index's lock is not taken for them.
        if messages.iter().all(|m| m.images.as_ref().is_none_or(Vec::is_empty)) {
            return;
        }
        let mut index = self.images.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        for (message, kept) in messages.iter().zip(history.newest(messages.len())) {
            for (i, data) in message.images.iter().flatten().enumerate() {
                let holders = index.entry(image::describe(data).reference).or_default();
                holders.retain(|(m, _)| m.alive());
                holders.push((kept.text().downgrade(), i));
            }
        }
    }

    /// Messages `offset..offset + limit` of a session, as `take` gives them.
    fn page<M>(
        &self,
        session_id: &str,
        offset: u64,
        limit: Option<u64>,
        take: impl FnOnce(&History, usize, usize) -> Result<Vec<M>>,
    ) -> Result<HistoryPage<M>> {
        self.read(session_id, |e| {
            let start = usize::try_from(offset).unwrap_or(usize::MAX);
            let count = limit.map_or(usize::MAX, |l| usize::try_from(l).unwrap_or(usize::MAX));
            let messages = take(&e.history, start, start.saturating_add(count))?;
            Ok(HistoryPage { info: e.info(session_id), messages, tail: e.history.tail().clone() })
        })?
    }

    fn read<T>(&self, session_id: &str, f: impl FnOnce(&Entry) -> T) -> Result<T> {
        self.lock().get(session_id).map(f).ok_or_else(|| not_found(session_id))
    }
}

/// A new session keeping `entry`'s history as it is, forked from its last message: what
/// a rewind or a compaction with `archive` keeps before it changes the history.
fn archive_of(session_id: &str, entry: &Entry) -> Result<Entry> {
    let forked_from = ForkPoint { session_id: session_id.to_owned(), message_id: entry.history.last_id()? };
    Ok(Entry::new(entry.fields.clone(), entry.history.clone(), Some(forked_from)))
}

/// See `store::sql::edits::retried`: the same answer over a memory history.
fn retried(session_id: &str, history: &History, messages: &[Message]) -> Result<Option<Appended>> {
    let places: Vec<Option<usize>> =
        messages.iter().map(|m| m.id.as_deref().and_then(|id| history.index_of(id))).collect();
    if places.iter().all(Option::is_none) {
        return Ok(None);
    }
    let mut stored = Vec::with_capacity(messages.len());
    for (m, place) in messages.iter().zip(&places) {
        let Some(index) = *place else {
            let given = messages.iter().zip(&places).find_map(|(m, p)| p.and(m.id.clone())).unwrap_or_default();
            return Err(Error::message_exists(given, "is stored, but not every message of this request is"));
        };
        match history.parsed(index, index + 1)?.pop() {
            Some(found) if m.is_retry_of(&found) => stored.push((*found).clone()),
            _ => {
                let id = m.id.clone().unwrap_or_default();
                return Err(Error::message_exists(id, "is already used by a different message in this session"));
            }
        }
    }
    let Some(&Some(last)) = places.last() else { return Ok(None) };
    let origin = history.origin_at(last).unwrap_or_default();
    let revision = if origin.owner.as_str() == session_id { origin.revision } else { 0 };
    Ok(Some(Appended::duplicate(stored, last as u64, revision)))
}

fn not_found(session_id: &str) -> Error {
    Error::SessionNotFound(session_id.to_owned())
}

fn free_id(sessions: &Table, wanted: Option<String>) -> Result<String> {
    match wanted {
        Some(id) if sessions.contains_key(&id) => Err(Error::SessionExists(id)),
        Some(id) => Ok(id),
        None => Ok(new_session_id()),
    }
}

#[async_trait]
impl Sessions for MemoryStore {
    fn kind(&self) -> &'static str {
        "memory"
    }

    async fn create(&self, session_id: Option<String>, fields: Fields) -> Result<SessionInfo> {
        let mut sessions = self.lock();
        let id = free_id(&sessions, session_id)?;
        let entry = Entry::new(fields, History::default(), None);
        let info = entry.info(&id);
        self.publish(&id, &entry, ChangeKind::Created);
        sessions.insert(id, entry);
        Ok(info)
    }

    async fn get(&self, session_id: &str) -> Result<SessionInfo> {
        self.read(session_id, |e| e.info(session_id))
    }

    async fn list_updated_before(
        &self,
        limit: usize,
        after: Option<ListKey>,
        updated_before: Option<String>,
    ) -> Result<Vec<SessionInfo>> {
        let sessions = self.lock();
        let mut keyed: Vec<(ListKey, &String, &Entry)> = sessions
            .iter()
            .filter(|(_, e)| updated_before.as_ref().is_none_or(|before| &e.updated_at < before))
            .map(|(id, e)| (ListKey { created_at: e.created_at.clone(), session_id: id.clone() }, id, e))
            .filter(|(key, ..)| after.as_ref().is_none_or(|after| key < after))
            .collect();
        keyed.sort_unstable_by(|a, b| b.0.cmp(&a.0));
        Ok(keyed.into_iter().take(limit).map(|(_, id, e)| e.info(id)).collect())
    }

    async fn update(&self, session_id: &str, patch: Patch, expected_revision: Option<u64>) -> Result<SessionInfo> {
        let mut sessions = self.lock();
        let entry = sessions.get_mut(session_id).ok_or_else(|| not_found(session_id))?;
        check_revision(expected_revision, entry.revision)?;
        if patch.apply(&mut entry.fields) {
            entry.touch();
            self.publish(session_id, entry, ChangeKind::Updated);
        }
        Ok(entry.info(session_id))
    }

    async fn delete(&self, session_id: &str, expected_revision: Option<u64>) -> Result<()> {
        let mut sessions = self.lock();
        let entry = sessions.get(session_id).ok_or_else(|| not_found(session_id))?;
        check_revision(expected_revision, entry.revision)?;
        let (revision, message_count) = (entry.revision, entry.history.len() as u64);
        sessions.remove(session_id);
        let session_id = session_id.to_owned();
        self.feed.publish(Change { session_id, revision, kind: ChangeKind::Deleted, message_count });
        Ok(())
    }

    async fn delete_many(&self, doomed: Doomed) -> Result<u64> {
        let mut sessions = self.lock();
        let ids: Vec<String> = match doomed {
            Doomed::Ids(ids) => ids,
            Doomed::UpdatedBefore(before) => {
                sessions.iter().filter(|(_, e)| e.updated_at < before).map(|(id, _)| id.clone()).collect()
            }
        };
        let mut deleted = 0;
        for session_id in ids {
            let Some(entry) = sessions.remove(&session_id) else { continue };
            let (revision, message_count) = (entry.revision, entry.history.len() as u64);
            self.feed.publish(Change { session_id, revision, kind: ChangeKind::Deleted, message_count });
            deleted += 1;
        }
        Ok(deleted)
    }

    async fn fork(
        &self,
        session_id: &str,
        new_session_id: Option<String>,
        at_message_id: Option<String>,
    ) -> Result<SessionInfo> {
        let mut sessions = self.lock();
        let parent = sessions.get(session_id).ok_or_else(|| not_found(session_id))?;
        let mut history = parent.history.clone();
        if let Some(at) = at_message_id {
            let index = history.index_of(&at).ok_or(Error::MessageNotFound(at))?;
            history.keep_oldest(index + 1)?;
        }
        let forked_from = ForkPoint { session_id: session_id.to_owned(), message_id: history.last_id()? };
        let entry = Entry::new(parent.fields.clone(), history, Some(forked_from));
        let id = free_id(&sessions, new_session_id)?;
        let info = entry.info(&id);
        self.publish(&id, &entry, ChangeKind::Created);
        sessions.insert(id, entry);
        Ok(info)
    }

    async fn import(&self, import: Import, replace: bool, expected_revision: Option<u64>) -> Result<SessionInfo> {
        let mut sessions = self.lock();
        let mut replaced = None;
        let id = match import.session_id {
            Some(id) if replace => {
                match sessions.get(&id) {
                    Some(old) => {
                        check_revision(expected_revision, old.revision)?;
                        replaced = Some((old.created_at.clone(), old.revision + 1));
                    }
                    None if expected_revision.is_some() => return Err(not_found(&id)),
                    None => {}
                }
                id
            }
            other => free_id(&sessions, other)?,
        };
        let revision = replaced.as_ref().map_or(0, |r| r.1);
        let owner = Arc::new(id.clone());
        let history = History::of(&import.messages, &Origin { owner: owner.clone(), revision })?;
        self.index_images(&import.messages, &history);
        let mut entry = Entry::new(import.fields, history, None);
        entry.owner = Some(owner);
        entry.usage = UsageTotals::of(import.messages.iter().filter_map(|m| m.usage.as_deref()));
        if let Some((created_at, revision)) = replaced {
            (entry.created_at, entry.revision) = (created_at, revision);
        }
        let info = entry.info(&id);
        self.publish(&id, &entry, ChangeKind::Imported);
        sessions.insert(id, entry);
        Ok(info)
    }

    async fn flush(&self) -> Result<()> {
        Ok(())
    }
}

#[async_trait]
impl Histories for MemoryStore {
    fn signals_queued(&self) -> bool {
        false
    }

    async fn append(
        &self,
        session_id: &str,
        messages: Vec<Message>,
        expected_revision: Option<u64>,
        once: bool,
    ) -> Result<Appended> {
        self.append_locked(self.lock(), session_id, messages, expected_revision, once, Made::Now)
    }

    async fn history(&self, session_id: &str, offset: u64, limit: Option<u64>) -> Result<HistoryPage> {
        self.page(session_id, offset, limit, History::parsed)
    }

    async fn history_json(
        &self,
        session_id: &str,
        offset: u64,
        limit: Option<u64>,
    ) -> Result<HistoryPage<MessageJson>> {
        self.page(session_id, offset, limit, History::json)
    }

    async fn trim_turns(&self, session_id: &str, max_turns: u64, expected_revision: Option<u64>) -> Result<Removed> {
        let (removed, revision) = self.mutate(session_id, expected_revision, ChangeKind::Trimmed, |e| {
            let cut = turns_cut(e.history.len(), e.history.roles_newest_first(), max_turns);
            e.history.drop_oldest(cut)?;
            Ok((cut > 0, cut as u64))
        })?;
        Ok(Removed { removed, revision })
    }

    async fn clear(&self, session_id: &str, expected_revision: Option<u64>) -> Result<Removed> {
        let (removed, revision) = self.mutate(session_id, expected_revision, ChangeKind::Cleared, |e| {
            let removed = e.history.len();
            e.history = History::default();
            Ok((removed > 0, removed as u64))
        })?;
        Ok(Removed { removed, revision })
    }

    async fn pop(&self, session_id: &str, replace_with: Option<Message>, expected: Option<u64>) -> Result<Popped> {
        let (message, revision) = self.mutate(session_id, expected, ChangeKind::Rewound, |e| {
            let n = e.history.len();
            if n == 0 {
                return Ok((false, None));
            }
            let last = e.history.parsed(n - 1, n)?.pop().map(|m| (*m).clone());
            let mut history = e.history.clone();
            history.keep_oldest(n - 1)?;
            if let Some(replacement) = replace_with {
                let planned = plan_append(history.tail().clone(), vec![replacement])?;
                e.storing(session_id, |_, origin| history.extend(&planned, origin))?;
                self.index_images(&planned, &history);
            }
            e.history = history;
            Ok((true, last))
        })?;
        Ok(Popped { message, revision })
    }

    async fn rewind(
        &self,
        session_id: &str,
        to_message_id: &str,
        archive: bool,
        expected_revision: Option<u64>,
    ) -> Result<Rewound> {
        let mut sessions = self.lock();
        let entry = sessions.get(session_id).ok_or_else(|| not_found(session_id))?;
        check_revision(expected_revision, entry.revision)?;
        let history = &entry.history;
        let at = history.index_of(to_message_id).ok_or_else(|| Error::MessageNotFound(to_message_id.to_owned()))?;
        let keep = at + 1 + rewind_keeps(history.messages().iter().skip(at + 1).map(Stored::role));
        let removed = (history.len() - keep) as u64;
        if removed == 0 {
            return Ok(Rewound { removed, revision: entry.revision, archived_session_id: None });
        }
        let mut rewound = history.clone();
        rewound.keep_oldest(keep)?;
        let archived = archive.then(|| archive_of(session_id, entry)).transpose()?;
        let (archived_session_id, revision) =
            self.replace_history(&mut sessions, session_id, rewound, archived, ChangeKind::Rewound)?;
        Ok(Rewound { removed, revision, archived_session_id })
    }

    async fn compact(
        &self,
        session_id: &str,
        keep_turns: u64,
        summary: String,
        archive: bool,
        expected_revision: Option<u64>,
    ) -> Result<Compacted> {
        let mut sessions = self.lock();
        let entry = sessions.get_mut(session_id).ok_or_else(|| not_found(session_id))?;
        check_revision(expected_revision, entry.revision)?;
        let origin = entry.storing(session_id, |_, origin| origin.clone());
        let old = &entry.history;
        let cut = turns_cut(old.len(), old.roles_newest_first(), keep_turns);
        if cut == 0 {
            let revision = entry.revision;
            return Ok(Compacted { removed: 0, revision, summary_message_id: None, archived_session_id: None });
        }
        let summary = compaction_message(summary, cut as u64, old.id_at(0)?, old.id_at(cut - 1)?);
        let summary_message_id = summary.id.clone();
        let mut history = History::of(&[summary], &origin)?;
        history.extend_kept(old, cut)?;
        let archived = archive.then(|| archive_of(session_id, entry)).transpose()?;
        let (archived_session_id, revision) =
            self.replace_history(&mut sessions, session_id, history, archived, ChangeKind::Compacted)?;
        Ok(Compacted { removed: cut as u64, revision, summary_message_id, archived_session_id })
    }
}

#[async_trait]
impl Drafts for MemoryStore {
    async fn append_finishing(
        &self,
        session_id: &str,
        messages: Vec<Message>,
        expected_revision: Option<u64>,
        stream_id: &str,
    ) -> Result<Appended> {
        let sessions = self.lock();
        let mut drafts = self.drafts();
        let appended = self.append_locked(sessions, session_id, messages, expected_revision, false, Made::Before)?;
        drafts.remove(stream_id);
        Ok(appended)
    }

    async fn save_draft(&self, draft: Draft) -> Result<()> {
        let sessions = self.lock();
        if let Some(entry) = sessions.get(&draft.session_id) {
            self.publish(&draft.session_id, entry, ChangeKind::Draft);
        }
        self.drafts().insert(draft.stream_id.clone(), draft);
        Ok(())
    }

    async fn draft(&self, session_id: &str) -> Result<Option<Draft>> {
        let drafts = self.drafts();
        Ok(drafts.values().filter(|d| d.session_id == session_id).max_by_key(|d| d.refreshed_at).cloned())
    }

    async fn drop_draft(&self, stream_id: &str) -> Result<()> {
        self.drafts().remove(stream_id);
        Ok(())
    }

    async fn settle_draft(&self, stream_id: &str, end: DraftEnd) -> Result<Option<Appended>> {
        let sessions = self.lock();
        let Some(draft) = self.drafts().remove(stream_id) else { return Ok(None) };
        if !sessions.contains_key(&draft.session_id) {
            return Ok(None);
        }
        let session_id = draft.session_id.clone();
        self.append_locked(sessions, &session_id, draft.into_messages(end), None, false, Made::Before).map(Some)
    }

    async fn stale_drafts(&self, before: i64) -> Result<Vec<String>> {
        Ok(self.drafts().values().filter(|d| d.refreshed_at < before).map(|d| d.stream_id.clone()).collect())
    }
}

#[async_trait]
impl SearchIndex for MemoryStore {
    async fn search(&self, query: &Query, session_id: Option<&str>, offset: u64, limit: u64) -> Result<Vec<Found>> {
        // A snapshot under the lock (each history an O(1) clone), scanned without it.
        let histories: Vec<_> = {
            let sessions = self.lock();
            match session_id {
                Some(id) => {
                    let entry = sessions.get(id).ok_or_else(|| not_found(id))?;
                    vec![(id.to_owned(), entry.history.searched())]
                }
                None => sessions.iter().map(|(id, e)| (id.clone(), e.history.searched())).collect(),
            }
        };
        scan::scan(histories, query, offset, limit)
    }
}

#[async_trait]
impl ImageStore for MemoryStore {
    async fn image(&self, reference: &str) -> Result<Option<String>> {
        let index = self.images.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut holders = index.get(reference).into_iter().flatten();
        // What reading an image parses of the message holding it.
        #[derive(serde::Deserialize)]
        struct Images {
            images: Option<Vec<String>>,
        }
        let image = |json: &str, i: usize| -> Option<String> {
            let mut images = serde_json::from_str::<Images>(json).ok()?.images?;
            (i < images.len()).then(|| images.swap_remove(i))
        };
        Ok(holders.find_map(|(json, i)| image(&json.upgrade()?, *i)))
    }
}

#[async_trait]
impl ChangeFeed for MemoryStore {
    async fn watch(&self) -> Result<Arc<Watcher>> {
        Ok(self.feed.watch())
    }
}

#[async_trait]
impl Checks for MemoryStore {
    /// Each message reads back as it was kept, signed as its text (what search tests
    /// first), with an id no other message of its session has (what fork and
    /// `at_message_id` rely on), and no session was updated before it was created.
    async fn check(&self) -> Result<Vec<String>> {
        let sessions = self.lock();
        let mut found = Vec::new();
        for (id, entry) in sessions.iter() {
            let id = quote(id);
            let mut ids = std::collections::HashSet::new();
            let signs = entry.history.signs();
            for (i, kept) in entry.history.messages().iter().enumerate() {
                if signs.get(i) != kept.content_text().ok().map(|text| Sign::of(&text)).as_ref() {
                    found.push(format!("session {id}: message {i} is not signed as its text"));
                }
                match kept.message() {
                    Err(e) => found.push(format!("session {id}: message {i}: {e}")),
                    Ok(message) if message.role != kept.role() => {
                        found.push(format!("session {id}: message {i} is not kept with its role"));
                    }
                    Ok(Message { id: None, .. }) => found.push(format!("session {id}: message {i} has no id")),
                    Ok(Message { id: Some(mid), .. }) if !ids.insert(mid.clone()) => {
                        found.push(format!("session {id}: message {i}: the id {} appears twice", quote(&mid)));
                    }
                    Ok(_) => {}
                }
            }
            if entry.updated_at < entry.created_at {
                found.push(format!("session {id}: updated before it was created"));
            }
        }
        found.sort();
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::Role;

    /// An append made of messages stamped for it is made at its newest stamp: the
    /// session's `updated_at` is that stamp, a cancelled result the rules add just now
    /// included. One made of messages stamped before it (a stream's draft) is made now.
    #[tokio::test]
    async fn an_append_is_made_when_its_newest_message_was_stamped() {
        let store = MemoryStore::default();
        store.create(Some("s".into()), Fields::default()).await.unwrap();
        let updated_at = || store.lock()["s"].updated_at.clone();
        let pause = || std::thread::sleep(std::time::Duration::from_millis(2));
        let user = Message::new(Role::User, serde_json::json!("hi"));
        let stamp = user.created_at.clone();
        pause();
        store.append("s", vec![user], None, false).await.unwrap();
        assert_eq!(updated_at(), stamp);

        let mut call = Message::new(Role::Assistant, serde_json::json!(""));
        call.tool_calls = Some(vec![
            serde_json::json!({"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}),
        ]);
        store.append("s", vec![call], None, false).await.unwrap();
        let next = Message::new(Role::User, serde_json::json!("never mind"));
        let stamp = next.created_at.clone();
        pause();
        store.append("s", vec![next], None, false).await.unwrap();
        let cancelled = store.lock()["s"].history.parsed(2, 3).unwrap().remove(0);
        assert_eq!(cancelled.tool_call_id.as_deref(), Some("c1"));
        assert!(cancelled.created_at > stamp, "stamped as the rules added it");
        assert_eq!(updated_at(), cancelled.created_at);

        let draft = Message::new(Role::User, serde_json::json!("from a stream"));
        let stamp = draft.created_at.clone();
        pause();
        store.append_locked(store.lock(), "s", vec![draft], None, false, Made::Before).unwrap();
        assert!(updated_at() > stamp, "{} after {stamp}", updated_at());
    }

    #[tokio::test]
    async fn the_messages_a_session_stores_share_one_owner() {
        let store = MemoryStore::default();
        for id in ["one", "other"] {
            store.create(Some(id.into()), Fields::default()).await.unwrap();
        }
        let user = |text: &str| vec![Message::new(Role::User, serde_json::json!(text))];
        for (id, text) in [("one", "a"), ("other", "b"), ("one", "c")] {
            store.append(id, user(text), None, false).await.unwrap();
        }
        store.fork("one", Some("fork".into()), None).await.unwrap();
        store.append("fork", user("d"), None, false).await.unwrap();
        let sessions = store.lock();
        let owners = |id: &str| -> Vec<Arc<String>> {
            let history = &sessions[id].history;
            (0..history.len()).map(|i| history.origin_at(i).unwrap().owner).collect()
        };
        let (one, fork) = (owners("one"), owners("fork"));
        assert_eq!((one[0].as_str(), one[1].as_str(), owners("other")[0].as_str()), ("one", "one", "other"));
        assert!(Arc::ptr_eq(&one[0], &one[1]), "two appends, one allocation");
        assert!(Arc::ptr_eq(&one[0], &fork[0]), "inherited from the session forked");
        assert_eq!(fork[2].as_str(), "fork");
    }
}
