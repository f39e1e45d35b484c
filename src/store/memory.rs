//! The in-memory backend (`--store memory`): for throw-away sessions and tests.
//!
//! Histories are persistent vectors (`imbl`), so a fork shares its parent's messages and
//! costs the same whatever their number. Each mutation checks everything (revision,
//! conversation rules) before it changes anything, so a refused request leaves the entry
//! as it was.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use async_trait::async_trait;

use crate::error::{Error, Result, quote};
use crate::session::image;
use crate::session::search::Query;
use crate::session::{
    Draft, DraftEnd, Fields, ForkPoint, Import, ListKey, Message, Patch, SessionInfo, Tail, check_revision,
    compaction_message, new_session_id, now, plan_append, rewind_keeps, turns_cut,
};
use crate::store::feed::{Change, ChangeKind, Feed, Watcher};
use crate::store::{Appended, Compacted, Doomed, Found, HistoryPage, Removed, Rewound, Store};

#[derive(Default)]
pub struct MemoryStore {
    sessions: Mutex<HashMap<String, Entry>>,
    /// Stream drafts by stream id. Locked after `sessions` when both are.
    drafts: Mutex<HashMap<String, Draft>>,
    /// Changes are published while `sessions` is locked, so in commit order.
    feed: Feed,
    /// Each image ref, and the messages holding that image (at that index): images stay
    /// inside their messages, and an entry goes stale when no session holds its message
    /// any more. Locked after `sessions` when both are.
    images: Mutex<HashMap<String, Vec<Holder>>>,
}

/// A message holding an image, and the image's index among its images.
type Holder = (Weak<Message>, usize);

#[derive(Clone)]
struct Entry {
    fields: Fields,
    revision: u64,
    created_at: String,
    updated_at: String,
    forked_from: Option<ForkPoint>,
    history: History,
}

/// A session's messages, and where each message id stands, counted from the first
/// message the session ever had (so dropping old messages moves no index).
#[derive(Clone, Default)]
struct History {
    messages: imbl::Vector<Arc<Message>>,
    first: u64,
    positions: imbl::HashMap<String, u64>,
}

impl History {
    fn push(&mut self, message: Message) -> Arc<Message> {
        if let Some(id) = &message.id {
            self.positions.insert(id.clone(), self.first + self.messages.len() as u64);
        }
        let message = Arc::new(message);
        self.messages.push_back(message.clone());
        message
    }

    /// The index of message `id`. A fork shares its parent's map, so an entry is
    /// trusted only when the message at that index has that id.
    fn index_of(&self, id: &str) -> Option<usize> {
        let at = usize::try_from(self.positions.get(id)?.checked_sub(self.first)?).ok()?;
        (self.messages.get(at)?.id.as_deref() == Some(id)).then_some(at)
    }

    fn push_shared(&mut self, message: Arc<Message>) {
        if let Some(id) = &message.id {
            self.positions.insert(id.clone(), self.first + self.messages.len() as u64);
        }
        self.messages.push_back(message);
    }

    fn keep_oldest(&mut self, n: usize) {
        for message in self.messages.iter().skip(n) {
            if let Some(id) = &message.id {
                self.positions.remove(id);
            }
        }
        self.messages.truncate(n);
    }

    fn drop_oldest(&mut self, n: usize) {
        for message in self.messages.iter().take(n) {
            if let Some(id) = &message.id {
                self.positions.remove(id);
            }
        }
        self.messages = self.messages.skip(n);
        self.first += n as u64;
    }

    fn newest_first(&self) -> impl Iterator<Item = &Message> {
        self.messages.iter().rev().map(|m| &**m)
    }

    fn tail(&self) -> Tail {
        Tail::from_newest_first(self.newest_first())
    }
}

impl Entry {
    fn new(fields: Fields, history: History, forked_from: Option<ForkPoint>) -> Self {
        let at = now();
        Entry { fields, revision: 0, created_at: at.clone(), updated_at: at, forked_from, history }
    }

    fn info(&self, session_id: &str) -> SessionInfo {
        SessionInfo {
            session_id: session_id.to_owned(),
            system: self.fields.system.clone(),
            cwd: self.fields.cwd.clone(),
            title: self.fields.title.clone(),
            metadata: self.fields.metadata.clone(),
            message_count: self.history.messages.len() as u64,
            revision: self.revision,
            created_at: self.created_at.clone(),
            updated_at: self.updated_at.clone(),
            forked_from: self.forked_from.clone(),
        }
    }

    fn touch(&mut self) {
        self.revision += 1;
        self.updated_at = now();
    }
}

type Sessions = HashMap<String, Entry>;

impl MemoryStore {
    fn lock(&self) -> MutexGuard<'_, Sessions> {
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

    /// Tells watchers of a committed change; called with `sessions` locked.
    fn publish(&self, session_id: &str, entry: &Entry, kind: ChangeKind) {
        let message_count = entry.history.messages.len() as u64;
        self.feed.publish(Change { session_id: session_id.to_owned(), revision: entry.revision, kind, message_count });
    }

    fn drafts(&self) -> MutexGuard<'_, HashMap<String, Draft>> {
        self.drafts.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn append_now(&self, session_id: &str, messages: Vec<Message>, expected_revision: Option<u64>) -> Result<Appended> {
        self.append_locked(self.lock(), session_id, messages, expected_revision)
    }

    fn append_locked(
        &self,
        mut sessions: MutexGuard<'_, Sessions>,
        session_id: &str,
        messages: Vec<Message>,
        expected_revision: Option<u64>,
    ) -> Result<Appended> {
        let message_ids: Vec<String> = messages.iter().filter_map(|m| m.id.clone()).collect();
        let entry = sessions.get_mut(session_id).ok_or_else(|| not_found(session_id))?;
        check_revision(expected_revision, entry.revision)?;
        let planned = plan_append(entry.history.tail(), messages)?;
        if !planned.is_empty() {
            planned.into_iter().for_each(|m| self.index_images(&entry.history.push(m)));
            entry.touch();
            self.publish(session_id, entry, ChangeKind::Appended);
        }
        let index = entry.history.messages.len().saturating_sub(1) as u64;
        Ok(Appended { message_ids, index, revision: entry.revision })
    }

    fn index_images(&self, message: &Arc<Message>) {
        let Some(images) = &message.images else { return };
        let mut index = self.images.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        for (i, data) in images.iter().enumerate() {
            let holders = index.entry(image::describe(data).reference).or_default();
            holders.retain(|(m, _)| m.strong_count() > 0);
            holders.push((Arc::downgrade(message), i));
        }
    }

    fn read<T>(&self, session_id: &str, f: impl FnOnce(&Entry) -> T) -> Result<T> {
        self.lock().get(session_id).map(f).ok_or_else(|| not_found(session_id))
    }
}

fn not_found(session_id: &str) -> Error {
    Error::SessionNotFound(session_id.to_owned())
}

fn free_id(sessions: &Sessions, wanted: Option<String>) -> Result<String> {
    match wanted {
        Some(id) if sessions.contains_key(&id) => Err(Error::SessionExists(id)),
        Some(id) => Ok(id),
        None => Ok(new_session_id()),
    }
}

#[async_trait]
impl Store for MemoryStore {
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
        let (revision, message_count) = (entry.revision, entry.history.messages.len() as u64);
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
            let (revision, message_count) = (entry.revision, entry.history.messages.len() as u64);
            self.feed.publish(Change { session_id, revision, kind: ChangeKind::Deleted, message_count });
            deleted += 1;
        }
        Ok(deleted)
    }

    async fn append(
        &self,
        session_id: &str,
        messages: Vec<Message>,
        expected_revision: Option<u64>,
    ) -> Result<Appended> {
        self.append_now(session_id, messages, expected_revision)
    }

    async fn history(&self, session_id: &str, offset: u64, limit: Option<u64>) -> Result<HistoryPage> {
        self.read(session_id, |e| {
            let messages = &e.history.messages;
            let start = usize::try_from(offset).unwrap_or(usize::MAX).min(messages.len());
            let take = limit.map_or(usize::MAX, |l| usize::try_from(l).unwrap_or(usize::MAX));
            let end = start.saturating_add(take).min(messages.len());
            HistoryPage {
                info: e.info(session_id),
                // A focus narrowed to the page: no walk over the messages before it.
                messages: messages.focus().narrow(start..end).into_iter().cloned().collect(),
                tail: e.history.tail(),
            }
        })
    }

    async fn trim_turns(&self, session_id: &str, max_turns: u64, expected_revision: Option<u64>) -> Result<Removed> {
        let (removed, revision) = self.mutate(session_id, expected_revision, ChangeKind::Trimmed, |e| {
            let cut = turns_cut(e.history.messages.len(), e.history.newest_first().map(|m| m.role), max_turns);
            e.history.drop_oldest(cut);
            Ok((cut > 0, cut as u64))
        })?;
        Ok(Removed { removed, revision })
    }

    async fn clear(&self, session_id: &str, expected_revision: Option<u64>) -> Result<Removed> {
        let (removed, revision) = self.mutate(session_id, expected_revision, ChangeKind::Cleared, |e| {
            let removed = e.history.messages.len();
            e.history = History::default();
            Ok((removed > 0, removed as u64))
        })?;
        Ok(Removed { removed, revision })
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
        let keep = at + 1 + rewind_keeps(history.messages.iter().skip(at + 1).map(|m| m.role));
        let removed = (history.messages.len() - keep) as u64;
        if removed == 0 {
            return Ok(Rewound { removed, revision: entry.revision, archived_session_id: None });
        }
        let archived = archive.then(|| {
            let forked_from = ForkPoint {
                session_id: session_id.to_owned(),
                message_id: history.messages.last().and_then(|m| m.id.clone()),
            };
            Entry::new(entry.fields.clone(), history.clone(), Some(forked_from))
        });
        let archived_session_id = archived.map(|archived| {
            let id = new_session_id();
            self.publish(&id, &archived, ChangeKind::Created);
            sessions.insert(id.clone(), archived);
            id
        });
        let entry = sessions.get_mut(session_id).ok_or_else(|| not_found(session_id))?;
        entry.history.keep_oldest(keep);
        entry.touch();
        self.publish(session_id, entry, ChangeKind::Rewound);
        Ok(Rewound { removed, revision: entry.revision, archived_session_id })
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
        let entry = sessions.get(session_id).ok_or_else(|| not_found(session_id))?;
        check_revision(expected_revision, entry.revision)?;
        let messages = &entry.history.messages;
        let cut = turns_cut(messages.len(), entry.history.newest_first().map(|m| m.role), keep_turns);
        if cut == 0 {
            let revision = entry.revision;
            return Ok(Compacted { removed: 0, revision, summary_message_id: None, archived_session_id: None });
        }
        let id_at = |i: usize| messages.get(i).and_then(|m| m.id.clone());
        let summary = compaction_message(summary, cut as u64, id_at(0), id_at(cut - 1));
        let summary_message_id = summary.id.clone();
        let mut history = History::default();
        self.index_images(&history.push(summary));
        messages.iter().skip(cut).for_each(|m| history.push_shared(m.clone()));
        let archived = archive.then(|| {
            let last = messages.last().and_then(|m| m.id.clone());
            let forked_from = ForkPoint { session_id: session_id.to_owned(), message_id: last };
            Entry::new(entry.fields.clone(), entry.history.clone(), Some(forked_from))
        });
        let archived_session_id = archived.map(|archived| {
            let id = new_session_id();
            self.publish(&id, &archived, ChangeKind::Created);
            sessions.insert(id.clone(), archived);
            id
        });
        let entry = sessions.get_mut(session_id).ok_or_else(|| not_found(session_id))?;
        entry.history = history;
        entry.touch();
        self.publish(session_id, entry, ChangeKind::Compacted);
        Ok(Compacted { removed: cut as u64, revision: entry.revision, summary_message_id, archived_session_id })
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
            history.messages.truncate(index + 1);
        }
        let forked_from = ForkPoint {
            session_id: session_id.to_owned(),
            message_id: history.messages.last().and_then(|m| m.id.clone()),
        };
        let entry = Entry::new(parent.fields.clone(), history, Some(forked_from));
        let id = free_id(&sessions, new_session_id)?;
        let info = entry.info(&id);
        self.publish(&id, &entry, ChangeKind::Created);
        sessions.insert(id, entry);
        Ok(info)
    }

    async fn import(&self, import: Import, replace: bool, expected_revision: Option<u64>) -> Result<SessionInfo> {
        let mut history = History::default();
        import.messages.into_iter().for_each(|m| self.index_images(&history.push(m)));
        let mut entry = Entry::new(import.fields, history, None);
        let mut sessions = self.lock();
        let id = match import.session_id {
            Some(id) if replace => {
                match sessions.get(&id) {
                    Some(old) => {
                        check_revision(expected_revision, old.revision)?;
                        entry.created_at = old.created_at.clone();
                        entry.revision = old.revision + 1;
                    }
                    None if expected_revision.is_some() => return Err(not_found(&id)),
                    None => {}
                }
                id
            }
            other => free_id(&sessions, other)?,
        };
        let info = entry.info(&id);
        self.publish(&id, &entry, ChangeKind::Imported);
        sessions.insert(id, entry);
        Ok(info)
    }

    async fn image(&self, reference: &str) -> Result<Option<String>> {
        let index = self.images.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut holders = index.get(reference).into_iter().flatten();
        Ok(holders.find_map(|(message, i)| message.upgrade()?.images.as_ref()?.get(*i).cloned()))
    }

    async fn search(&self, query: &Query, session_id: Option<&str>, offset: u64, limit: u64) -> Result<Vec<Found>> {
        // A snapshot under the lock (each history an O(1) clone), scanned without it.
        let histories: Vec<_> = {
            let sessions = self.lock();
            match session_id {
                Some(id) => {
                    let entry = sessions.get(id).ok_or_else(|| not_found(id))?;
                    vec![(id.to_owned(), entry.history.messages.clone())]
                }
                None => sessions.iter().map(|(id, e)| (id.clone(), e.history.messages.clone())).collect(),
            }
        };
        Ok(super::scan::scan(histories, query, offset, limit))
    }

    async fn flush(&self) -> Result<()> {
        Ok(())
    }

    async fn append_finishing(
        &self,
        session_id: &str,
        messages: Vec<Message>,
        expected_revision: Option<u64>,
        stream_id: &str,
    ) -> Result<Appended> {
        let sessions = self.lock();
        let mut drafts = self.drafts();
        let appended = self.append_locked(sessions, session_id, messages, expected_revision)?;
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

    async fn keep_draft(&self, stream_id: &str, end: DraftEnd) -> Result<Option<Appended>> {
        let sessions = self.lock();
        let Some(draft) = self.drafts().remove(stream_id) else { return Ok(None) };
        if !sessions.contains_key(&draft.session_id) {
            return Ok(None);
        }
        let session_id = draft.session_id.clone();
        self.append_locked(sessions, &session_id, draft.into_messages(end), None).map(Some)
    }

    fn watch(&self) -> Arc<Watcher> {
        self.feed.watch()
    }

    async fn stale_drafts(&self, before: i64) -> Result<Vec<String>> {
        Ok(self.drafts().values().filter(|d| d.refreshed_at < before).map(|d| d.stream_id.clone()).collect())
    }

    /// Each message is found where its id says (what fork and `at_message_id` rely on),
    /// and no session was updated before it was created.
    async fn check(&self) -> Result<Vec<String>> {
        let sessions = self.lock();
        let mut found = Vec::new();
        for (id, entry) in sessions.iter() {
            let id = quote(id);
            for (i, message) in entry.history.messages.iter().enumerate() {
                if let Some(mid) = &message.id
                    && entry.history.index_of(mid) != Some(i)
                {
                    found.push(format!("session {id}: message {i} is not where its id {} says", quote(mid)));
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
