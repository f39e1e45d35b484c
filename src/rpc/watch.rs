//! A connection's subscriptions: for each, a task that takes the store's committed
//! changes (`store::feed`) and sends the client `session/changed` notifications. The
//! notifications of a slow client are coalesced per session by the watcher, and the
//! writer's queue holds back the task: memory stays bounded however slow the client.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde::Serialize;

use crate::lock;
use crate::rpc::peer::Peer;
use crate::store::feed::{ChangeKind, Watcher};

#[derive(Serialize)]
struct Changed<'a> {
    subscription_id: &'a str,
    session_id: &'a str,
    revision: u64,
    change: ChangeKind,
    message_count: u64,
}

/// A task that ends when dropped.
struct Task(tokio::task::JoinHandle<()>);

impl Drop for Task {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[derive(Default)]
pub struct Subscriptions {
    next: AtomicU64,
    tasks: Mutex<HashMap<String, Task>>,
}

impl Subscriptions {
    /// Starts sending `session/changed` for the changes `watcher` sees, of `session_id`
    /// or of every session; returns the subscription's id.
    pub fn add(&self, watcher: Arc<Watcher>, session_id: Option<String>, peer: Arc<Peer>) -> String {
        let id = format!("sub-{}", self.next.fetch_add(1, Ordering::Relaxed) + 1);
        let subscription_id = id.clone();
        let task = tokio::spawn(async move {
            loop {
                for change in watcher.next().await {
                    if session_id.as_ref().is_some_and(|s| *s != change.session_id) {
                        continue;
                    }
                    let changed = Changed {
                        subscription_id: &subscription_id,
                        session_id: &change.session_id,
                        revision: change.revision,
                        change: change.kind,
                        message_count: change.message_count,
                    };
                    peer.notify("session/changed", changed).await;
                }
            }
        });
        lock(&self.tasks).insert(id.clone(), Task(task));
        id
    }

    /// Stops a subscription; false when there is no such subscription.
    pub fn remove(&self, subscription_id: &str) -> bool {
        lock(&self.tasks).remove(subscription_id).is_some()
    }
}
