//! Per-session ordering. Each request names the sessions it touches (its keys); it runs
//! after every earlier request with one of its keys has finished, and concurrently with
//! requests on other sessions. A request that names no session (`session/list`,
//! `shutdown`) runs after every request received before it, so that it sees their
//! effects. A create without an id names the session it makes, which no request before
//! it can name: it waits for nothing (`Order::Create`), so that creates pipelined commit
//! together. Places are taken in the order requests were received.
//!
//! An append (`Order::Append`) waits less: only until the request before it on its
//! session has *queued* its write (`store::queued`), when the store applies writes in
//! the order they were queued. Appends pipelined on one session thus share a commit.
//! Every other request still waits until each of those appends has finished (committed
//! and answered, or refused): a key remembers the appends taken since the last other
//! request on it. A request that never queues a write counts as queued once finished.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use serde::Deserialize;
use serde_json::value::RawValue;
use tokio::sync::Notify;

use crate::lock;
use crate::rpc::methods::Order;

/// How far the request before must have gone for a request to start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Its write is in the store's queue (or it has finished).
    Queued,
    /// It has finished.
    Done,
}

/// Opens in two stages, queued then done; any number may wait for either.
#[derive(Debug, Default)]
struct Gate {
    queued: AtomicBool,
    done: AtomicBool,
    opened: Notify,
}

impl Gate {
    fn is_open(&self, stage: Stage) -> bool {
        match stage {
            Stage::Queued => self.queued.load(Ordering::Acquire),
            Stage::Done => self.done.load(Ordering::Acquire),
        }
    }

    async fn wait(&self, stage: Stage) {
        loop {
            let opened = self.opened.notified();
            if self.is_open(stage) {
                return;
            }
            opened.await;
        }
    }

    fn open(&self, stage: Stage) {
        if stage == Stage::Done {
            self.done.store(true, Ordering::Release);
        }
        self.queued.store(true, Ordering::Release);
        self.opened.notify_waiters();
    }
}

#[derive(Default, Debug)]
pub struct Sequencer {
    state: Mutex<State>,
    /// How many requests `state` has running, written with it: `is_idle` reads it
    /// without the lock (which would cost every request two atomic operations).
    running: AtomicUsize,
}

#[derive(Default, Debug)]
struct State {
    /// For each key, the requests on it that later ones wait for.
    lines: HashMap<String, Line>,
    /// Every request not yet finished, by its number.
    running: HashMap<u64, Arc<Gate>>,
    next: u64,
}

/// What a key's next request waits for.
#[derive(Debug)]
struct Line {
    /// The request that took the key last.
    last: Arc<Gate>,
    /// The appends taken since the last other request, which may not have finished.
    appends: Vec<Arc<Gate>>,
}

/// A request's place in the order of each of its keys.
pub struct Place {
    sequencer: Arc<Sequencer>,
    number: u64,
    keys: Vec<String>,
    before: Vec<(Arc<Gate>, Stage)>,
    /// For an append: the request before it on its session, which must finish first, so
    /// that replies on a session keep their order.
    previous: Option<Arc<Gate>>,
    mine: Arc<Gate>,
}

impl Sequencer {
    /// Takes the next place for `keys`, waiting for the requests before it on them to
    /// reach `stage` (`Queued` only for appends); must be called in the order requests
    /// arrive.
    pub fn enter(self: &Arc<Self>, keys: Vec<String>, stage: Stage) -> Place {
        self.enter_started(keys, stage, Started::default())
    }

    /// Whether no request holds a place: one that entered now would wait for nothing.
    /// Only the connection enters (its one task, in order), so a request it sees
    /// running can only finish, never start, under it: a stale count says busy.
    pub fn is_idle(&self) -> bool {
        self.running.load(Ordering::Acquire) == 0
    }

    /// `enter`, for a request that found the sequencer idle (`is_idle`) and started
    /// before taking its place, no other having entered since; its write may be queued
    /// already (`Started::on_queued`).
    pub fn enter_started(self: &Arc<Self>, mut keys: Vec<String>, stage: Stage, started: Started) -> Place {
        keys.sort_unstable();
        keys.dedup();
        let mine = started.0;
        let mut state = lock(&self.state);
        let (mut before, mut previous) = (Vec::new(), None);
        if keys.is_empty() {
            before.extend(state.running.values().map(|gate| (gate.clone(), Stage::Done)));
        }
        for key in &keys {
            let Some(line) = state.lines.get_mut(key) else {
                let appends = if stage == Stage::Queued { vec![mine.clone()] } else { Vec::new() };
                state.lines.insert(key.clone(), Line { last: mine.clone(), appends });
                continue;
            };
            let last = std::mem::replace(&mut line.last, mine.clone());
            match stage {
                Stage::Queued => {
                    line.appends.push(mine.clone());
                    previous = Some(last.clone());
                }
                Stage::Done => before.extend(line.appends.drain(..).map(|gate| (gate, Stage::Done))),
            }
            before.push((last, stage));
        }
        let number = state.next;
        state.next += 1;
        state.running.insert(number, mine.clone());
        self.running.store(state.running.len(), Ordering::Release);
        Place { sequencer: self.clone(), number, keys, before, previous, mine }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        let state = self.state.lock().unwrap();
        state.lines.len() + state.running.len()
    }
}

impl Place {
    /// Waits until every earlier request with one of these keys has gone far enough.
    pub async fn ready(&mut self) {
        // One at a time, so that a wait given up (cancelled) loses none of them.
        while let Some((earlier, stage)) = self.before.last() {
            earlier.wait(*stage).await;
            self.before.pop();
        }
    }

    /// Waits until the request before this append on its session has finished; call it
    /// before finishing, so that replies on one session leave in the order received.
    pub async fn finish_in_order(&mut self) {
        if let Some(previous) = &self.previous {
            previous.wait(Stage::Done).await;
            self.previous = None;
        }
    }

    /// What tells the requests after this one that its write is queued.
    pub fn on_queued(&self) -> Box<dyn FnOnce() + Send> {
        Started(self.mine.clone()).on_queued()
    }
}

/// The gate of a request that starts before it takes its place (`enter_started`).
#[derive(Default)]
pub struct Started(Arc<Gate>);

impl Started {
    /// What tells the requests after this one, once it has its place, that its write is
    /// queued; it may be called before.
    pub fn on_queued(&self) -> Box<dyn FnOnce() + Send> {
        let mine = self.0.clone();
        Box::new(move || mine.open(Stage::Queued))
    }

    pub fn is_queued(&self) -> bool {
        self.0.is_open(Stage::Queued)
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut state = lock(&self.sequencer.state);
        state.running.remove(&self.number);
        self.sequencer.running.store(state.running.len(), Ordering::Release);
        self.mine.done.store(true, Ordering::Release);
        for key in &self.keys {
            let Some(line) = state.lines.get_mut(key) else { continue };
            line.appends.retain(|gate| !Arc::ptr_eq(gate, &self.mine));
            if line.appends.is_empty() && line.last.is_open(Stage::Done) {
                state.lines.remove(key);
            }
        }
        drop(state);
        self.mine.open(Stage::Done);
    }
}

/// The sessions a request touches, as its method's `Order` says to read them from its
/// params.
pub fn keys(order: Order, params: Option<&str>) -> Vec<String> {
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
    fn object<'a, T: Deserialize<'a>>(text: &'a str) -> Option<T> {
        text.starts_with('{').then(|| serde_json::from_str(text).ok()).flatten()
    }
    fn string(raw: Option<&RawValue>) -> Option<String> {
        serde_json::from_str(raw?.get()).ok()
    }
    let Some(k) = params.and_then(object::<Keys>) else {
        return Vec::new();
    };
    match order {
        Order::Barrier => Vec::new(),
        Order::Session | Order::Append => string(k.session_id).into_iter().collect(),
        Order::Create => vec![string(k.session_id).unwrap_or_else(minted)],
        Order::Fork => [string(k.session_id), string(k.new_session_id)].into_iter().flatten().collect(),
        Order::Import => {
            k.data.map(RawValue::get).and_then(object::<Data>).and_then(|d| string(d.session_id)).into_iter().collect()
        }
        Order::Sessions => k.session_ids.and_then(|raw| serde_json::from_str(raw.get()).ok()).unwrap_or_default(),
    }
}

/// The key of a session whose id the server is to make: one no other request names (a
/// session id holds no control character).
fn minted() -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    format!("\u{1}minted {}", NEXT.fetch_add(1, Ordering::Relaxed))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn keys_from_params() {
        let k = |order, s: &str| keys(order, Some(s));
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
        assert_eq!(k(Order::Create, r#"{"session_id":"a"}"#), ["a"]);
        let (one, two) = (k(Order::Create, "{}"), k(Order::Create, r#"{"title":"t"}"#));
        assert!(one.len() == 1 && two.len() == 1 && one != two, "{one:?} {two:?}");
    }

    #[tokio::test]
    async fn same_key_runs_in_order_other_keys_do_not_wait() {
        let seq = Arc::new(Sequencer::default());
        let first = seq.enter(vec!["a".into()], Stage::Done);
        let mut second = seq.enter(vec!["a".into(), "a".into()], Stage::Done);
        let mut other = seq.enter(vec!["b".into()], Stage::Done);
        tokio::time::timeout(Duration::from_secs(5), other.ready()).await.unwrap();
        assert!(tokio::time::timeout(Duration::from_millis(50), second.ready()).await.is_err());
        // A request without keys waits for everything received before it, and nothing
        // received after it waits for it.
        let mut barrier = seq.enter(vec![], Stage::Done);
        let mut after = seq.enter(vec!["c".into()], Stage::Queued);
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

    #[tokio::test]
    async fn an_append_waits_for_the_write_before_it_to_be_queued_other_requests_for_it_to_finish() {
        let (short, long) = (Duration::from_millis(50), Duration::from_secs(5));
        let seq = Arc::new(Sequencer::default());
        let a = || vec!["a".to_string()];
        let first = seq.enter(a(), Stage::Queued);
        let mut second = seq.enter(a(), Stage::Queued);
        let mut read = seq.enter(a(), Stage::Done);
        let mut third = seq.enter(a(), Stage::Queued);
        assert!(tokio::time::timeout(short, second.ready()).await.is_err(), "the first write is not queued yet");
        first.on_queued()();
        tokio::time::timeout(long, second.ready()).await.unwrap();
        second.on_queued()();
        assert!(tokio::time::timeout(short, second.finish_in_order()).await.is_err(), "replies keep their order");
        drop(second);
        assert!(tokio::time::timeout(short, read.ready()).await.is_err(), "the first write has not finished");
        drop(first);
        tokio::time::timeout(long, read.ready()).await.unwrap();
        assert!(tokio::time::timeout(short, third.ready()).await.is_err(), "an append after a read waits for it");
        drop(read);
        tokio::time::timeout(long, third.ready()).await.unwrap();
        drop(third);
        assert_eq!(seq.len(), 0, "finished requests leave nothing behind");
    }
}
