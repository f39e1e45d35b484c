//! The change feed: every change a store commits, handed to whoever watches. A watcher
//! keeps, per session, only the latest change not yet taken, so a slow watcher costs
//! memory for the sessions that changed, not for the changes: notifications may be
//! coalesced, and the last change of a session is always delivered.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};

use crate::lock;
use serde::Serialize;
use tokio::sync::Notify;

/// What a change did to a session, as `session/changed` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ChangeKind {
    Created,
    Appended,
    Updated,
    Trimmed,
    Cleared,
    Imported,
    Deleted,
    Draft,
    Rewound,
    Compacted,
}

impl ChangeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeKind::Created => "created",
            ChangeKind::Appended => "appended",
            ChangeKind::Updated => "updated",
            ChangeKind::Trimmed => "trimmed",
            ChangeKind::Cleared => "cleared",
            ChangeKind::Imported => "imported",
            ChangeKind::Deleted => "deleted",
            ChangeKind::Draft => "draft",
            ChangeKind::Rewound => "rewound",
            ChangeKind::Compacted => "compacted",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [
            ChangeKind::Created,
            ChangeKind::Appended,
            ChangeKind::Updated,
            ChangeKind::Trimmed,
            ChangeKind::Cleared,
            ChangeKind::Imported,
            ChangeKind::Deleted,
            ChangeKind::Draft,
            ChangeKind::Rewound,
            ChangeKind::Compacted,
        ]
        .into_iter()
        .find(|k| k.as_str() == s)
    }
}

/// One committed change of one session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub session_id: String,
    pub revision: u64,
    pub kind: ChangeKind,
    pub message_count: u64,
}

#[derive(Debug, Default)]
pub struct Feed {
    watchers: Mutex<Vec<Weak<Watcher>>>,
    /// How many `watchers` holds, gone ones too, written with it: a change nobody
    /// watches is dropped without taking the lock (two atomic operations an append).
    /// A watcher that `watch` returned is counted before any change made after it.
    listed: AtomicUsize,
}

#[derive(Debug, Default)]
pub struct Watcher {
    /// The latest change of each session not yet taken, and the order sessions first
    /// changed in since the last take.
    pending: Mutex<(HashMap<String, Change>, Vec<String>)>,
    ready: Notify,
}

impl Feed {
    /// Hands a committed change to every watcher.
    pub fn publish(&self, change: Change) {
        self.publish_with(|| change);
    }

    /// Hands the change `change` makes to every watcher; makes none when nobody watches
    /// (the memory store, where making one is most of the cost of telling it).
    pub fn publish_with(&self, change: impl FnOnce() -> Change) {
        if self.listed.load(Ordering::Acquire) == 0 {
            return;
        }
        let watchers = self.alive();
        if watchers.is_empty() {
            return;
        }
        let change = change();
        for watcher in watchers.iter().filter_map(Weak::upgrade) {
            watcher.push(change.clone());
        }
    }

    /// Starts watching every change from now on; stops when the watcher is dropped.
    pub fn watch(&self) -> Arc<Watcher> {
        let watcher = Arc::new(Watcher::default());
        let mut watchers = lock(&self.watchers);
        watchers.push(Arc::downgrade(&watcher));
        self.listed.store(watchers.len(), Ordering::Release);
        watcher
    }

    /// Whether anyone watches (a store may skip work for nobody); forgets the watchers
    /// gone since the last change, as `publish` does.
    pub fn watched(&self) -> bool {
        !self.alive().is_empty()
    }

    /// The watchers, those gone forgotten.
    fn alive(&self) -> std::sync::MutexGuard<'_, Vec<Weak<Watcher>>> {
        let mut watchers = lock(&self.watchers);
        watchers.retain(|w| w.strong_count() > 0);
        self.listed.store(watchers.len(), Ordering::Release);
        watchers
    }
}

impl Watcher {
    /// Keeps `change` as its session's latest, but for a draft of an older revision than
    /// the one kept: a draft is saved without the session's lock, so on PostgreSQL its
    /// row may come after that of a later change of another process, and that change,
    /// not the draft, is the session's last.
    fn push(&self, change: Change) {
        let mut pending = lock(&self.pending);
        let (latest, order) = &mut *pending;
        match latest.get_mut(&change.session_id) {
            Some(kept) if change.kind == ChangeKind::Draft && change.revision < kept.revision => return,
            Some(kept) => *kept = change,
            None => {
                order.push(change.session_id.clone());
                latest.insert(change.session_id.clone(), change);
            }
        }
        drop(pending);
        self.ready.notify_one();
    }

    /// Waits for changes and takes them: the latest of each session that changed, in
    /// the order the sessions first changed.
    pub async fn next(&self) -> Vec<Change> {
        loop {
            {
                let mut pending = lock(&self.pending);
                let (latest, order) = &mut *pending;
                if !order.is_empty() {
                    return order.drain(..).filter_map(|id| latest.remove(&id)).collect();
                }
            }
            self.ready.notified().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(id: &str, revision: u64) -> Change {
        Change { session_id: id.into(), revision, kind: ChangeKind::Appended, message_count: revision }
    }

    #[tokio::test]
    async fn a_slow_watcher_gets_the_latest_change_of_each_session() {
        let feed = Feed::default();
        let watcher = feed.watch();
        for revision in 1..=1000 {
            feed.publish(change("a", revision));
        }
        feed.publish(change("b", 1));
        assert_eq!(watcher.next().await, [change("a", 1000), change("b", 1)]);
        feed.publish(change("a", 1001));
        assert_eq!(watcher.next().await, [change("a", 1001)]);
    }

    /// A draft read after a later change of its session (another process's, on
    /// PostgreSQL) does not take that change's place; any other change does, even of a
    /// lower revision (a session deleted and created again starts from 0).
    #[tokio::test]
    async fn a_draft_of_an_older_revision_does_not_take_the_place_of_a_later_change() {
        let feed = Feed::default();
        let watcher = feed.watch();
        let draft = |revision| Change { kind: ChangeKind::Draft, ..change("a", revision) };
        feed.publish(change("a", 2));
        feed.publish(draft(1));
        assert_eq!(watcher.next().await, [change("a", 2)]);
        feed.publish(change("a", 2));
        feed.publish(draft(2));
        assert_eq!(watcher.next().await, [draft(2)]);
        let created = Change { kind: ChangeKind::Created, ..change("a", 0) };
        feed.publish(Change { kind: ChangeKind::Deleted, ..change("a", 3) });
        feed.publish(created.clone());
        assert_eq!(watcher.next().await, [created]);
    }

    #[test]
    fn a_dropped_watcher_is_forgotten() {
        let feed = Feed::default();
        drop(feed.watch());
        feed.publish(change("a", 1));
        assert!(lock(&feed.watchers).is_empty());
        // Also when only asked whether anyone watches (a store that then publishes
        // nothing), as the memory store asks at every change.
        let kept = feed.watch();
        drop(feed.watch());
        assert!(feed.watched());
        assert_eq!(lock(&feed.watchers).len(), 1);
        drop(kept);
        assert!(!feed.watched());
        assert!(lock(&feed.watchers).is_empty());
    }
}
