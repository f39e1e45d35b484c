//! Per-session ordering. Each request names the sessions it touches (its keys); it runs
//! after every earlier request with one of its keys has finished, and concurrently with
//! requests on other sessions. A request that names no session (`session/list`,
//! `shutdown`, a create without an id) runs after every request received before it, so
//! that it sees their effects. Places are taken in the order requests were received.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use serde::Deserialize;
use serde_json::value::RawValue;
use tokio::sync::Notify;

use crate::rpc::methods::Order;

/// Opens once, when the request holding it finishes; any number may wait for that.
#[derive(Debug, Default)]
struct Gate {
    open: AtomicBool,
    opened: Notify,
}

impl Gate {
    async fn wait(&self) {
        loop {
            let opened = self.opened.notified();
            if self.open.load(Ordering::Acquire) {
                return;
            }
            opened.await;
        }
    }

    fn open(&self) {
        self.open.store(true, Ordering::Release);
        self.opened.notify_waiters();
    }
}

#[derive(Default, Debug)]
pub struct Sequencer {
    state: Mutex<State>,
}

#[derive(Default, Debug)]
struct State {
    /// For each key, the gate of the request that took it last.
    last: HashMap<String, Arc<Gate>>,
    /// Every request not yet finished, by its number.
    running: HashMap<u64, Arc<Gate>>,
    next: u64,
}

/// A request's place in the order of each of its keys.
pub struct Turn {
    sequencer: Arc<Sequencer>,
    number: u64,
    keys: Vec<String>,
    before: Vec<Arc<Gate>>,
    mine: Arc<Gate>,
}

impl Sequencer {
    /// Takes the next place for `keys`; must be called in the order requests arrive.
    pub fn enter(self: &Arc<Self>, mut keys: Vec<String>) -> Turn {
        keys.sort_unstable();
        keys.dedup();
        let mine = Arc::new(Gate::default());
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let before = if keys.is_empty() {
            state.running.values().cloned().collect()
        } else {
            keys.iter().filter_map(|k| state.last.insert(k.clone(), mine.clone())).collect()
        };
        let number = state.next;
        state.next += 1;
        state.running.insert(number, mine.clone());
        Turn { sequencer: self.clone(), number, keys, before, mine }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        let state = self.state.lock().unwrap();
        state.last.len() + state.running.len()
    }
}

impl Turn {
    /// Waits until every earlier request with one of these keys has finished.
    pub async fn ready(&mut self) {
        for earlier in self.before.drain(..) {
            earlier.wait().await;
        }
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        let mut state = self.sequencer.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.running.remove(&self.number);
        for key in &self.keys {
            if state.last.get(key).is_some_and(|gate| Arc::ptr_eq(gate, &self.mine)) {
                state.last.remove(key);
            }
        }
        drop(state);
        self.mine.open();
    }
}

/// The sessions a request touches, as its method's `Order` says to read them from its
/// params.
pub fn keys(order: Order, params: Option<&RawValue>) -> Vec<String> {
    #[derive(Deserialize)]
    struct Keys<'a> {
        #[serde(borrow)]
        session_id: Option<&'a RawValue>,
        #[serde(borrow)]
        new_session_id: Option<&'a RawValue>,
        #[serde(borrow)]
        data: Option<&'a RawValue>,
        #[serde(borrow)]
        session_ids: Option<&'a RawValue>,
    }
    #[derive(Deserialize)]
    struct Data<'a> {
        #[serde(borrow)]
        session_id: Option<&'a RawValue>,
    }
    fn object<'a, T: Deserialize<'a>>(raw: &'a RawValue) -> Option<T> {
        raw.get().starts_with('{').then(|| serde_json::from_str(raw.get()).ok()).flatten()
    }
    fn string(raw: Option<&RawValue>) -> Option<String> {
        serde_json::from_str(raw?.get()).ok()
    }
    let Some(k) = params.and_then(object::<Keys>) else {
        return Vec::new();
    };
    match order {
        Order::Barrier => Vec::new(),
        Order::Session => string(k.session_id).into_iter().collect(),
        Order::Fork => [string(k.session_id), string(k.new_session_id)].into_iter().flatten().collect(),
        Order::Import => k.data.and_then(object::<Data>).and_then(|d| string(d.session_id)).into_iter().collect(),
        Order::Sessions => k.session_ids.and_then(|raw| serde_json::from_str(raw.get()).ok()).unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn raw(s: &str) -> Box<RawValue> {
        RawValue::from_string(s.into()).unwrap()
    }

    #[test]
    fn keys_from_params() {
        let k = |order, s: &str| keys(order, Some(&raw(s)));
        let fork = r#"{"session_id":"a","new_session_id":"b"}"#;
        assert_eq!(k(Order::Fork, fork), ["a", "b"]);
        assert_eq!(k(Order::Session, fork), ["a"]);
        assert_eq!(k(Order::Barrier, fork), Vec::<String>::new());
        assert_eq!(k(Order::Import, r#"{"data":{"session_id":"c","messages":[]}}"#), ["c"]);
        assert_eq!(k(Order::Session, r#"{"data":{"session_id":"c"}}"#), Vec::<String>::new());
        assert_eq!(k(Order::Session, r#"["a"]"#), Vec::<String>::new());
        assert_eq!(k(Order::Sessions, r#"{"session_ids":["a","b"]}"#), ["a", "b"]);
        assert_eq!(k(Order::Sessions, r#"{"session_ids":[1]}"#), Vec::<String>::new());
        assert_eq!(k(Order::Session, r#"{"session_id":5}"#), Vec::<String>::new());
        assert_eq!(keys(Order::Session, None), Vec::<String>::new());
    }

    #[tokio::test]
    async fn same_key_runs_in_order_other_keys_do_not_wait() {
        let seq = Arc::new(Sequencer::default());
        let first = seq.enter(vec!["a".into()]);
        let mut second = seq.enter(vec!["a".into(), "a".into()]);
        let mut other = seq.enter(vec!["b".into()]);
        tokio::time::timeout(Duration::from_secs(5), other.ready()).await.unwrap();
        assert!(tokio::time::timeout(Duration::from_millis(50), second.ready()).await.is_err());
        // A request without keys waits for everything received before it, and nothing
        // received after it waits for it.
        let mut barrier = seq.enter(vec![]);
        let mut after = seq.enter(vec!["c".into()]);
        tokio::time::timeout(Duration::from_secs(5), after.ready()).await.unwrap();
        drop(first);
        tokio::time::timeout(Duration::from_secs(5), second.ready()).await.unwrap();
        drop(second);
        assert!(tokio::time::timeout(Duration::from_millis(50), barrier.ready()).await.is_err(), "`b` still runs");
        drop(other);
        tokio::time::timeout(Duration::from_secs(5), barrier.ready()).await.unwrap();
        drop((barrier, after));
        assert_eq!(seq.len(), 0, "finished requests leave nothing behind");
    }
}
