//! The server's side of talking to the client as its host: the requests the server sends
//! (ids `"convo:N"`, so they never collide with the client's), the routing of the
//! client's responses back to the request that waits, the deltas of streams, and the end
//! of input, which fails every waiter. A waiter that stops waiting (timeout, cancel, its
//! request dropped) is removed, and on timeout or cancel the host is told with
//! `$/cancelRequest`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::lock;
use crate::ops::Failure;
use crate::rpc::outgoing;
use crate::rpc::writer::Outbox;

/// How many deltas of one stream may wait for the stream to take them.
const DELTA_QUEUE: usize = 256;

type Answer = Result<Value, Value>;

#[derive(Debug)]
pub struct Peer {
    outbox: Outbox,
    next_id: AtomicU64,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    closed: bool,
    waiting: HashMap<u64, oneshot::Sender<Answer>>,
    streams: HashMap<String, mpsc::Sender<Value>>,
}

/// Removes its request's waiter when the request stops waiting, however it stops.
struct Waiter<'a> {
    peer: &'a Peer,
    id: u64,
}

impl Drop for Waiter<'_> {
    fn drop(&mut self) {
        self.peer.lock().waiting.remove(&self.id);
    }
}

/// A stream's deltas, taken from `runtime/delta` notifications until dropped.
pub struct Deltas<'a> {
    peer: &'a Peer,
    stream_id: String,
    pub rx: mpsc::Receiver<Value>,
}

impl Drop for Deltas<'_> {
    fn drop(&mut self) {
        self.peer.lock().streams.remove(&self.stream_id);
    }
}

impl Peer {
    pub fn new(outbox: Outbox) -> Self {
        Peer { outbox, next_id: AtomicU64::new(1), state: Mutex::default() }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    pub async fn notify(&self, method: &str, params: impl Serialize) {
        match outgoing::notification(method, &params) {
            Ok(json) => self.outbox.send(json).await,
            Err(e) => tracing::error!(error = %e, method, "cannot serialize a notification"),
        }
    }

    /// Sends the client a request and waits for its answer: the result, or what ended
    /// the wait.
    pub async fn request(
        &self,
        method: &str,
        params: impl Serialize,
        timeout: Duration,
        cancel: &CancellationToken,
    ) -> Result<Value, Failure> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let json = outgoing::request(&id_text(id), method, &params)
            .map_err(|e| Failure::Invalid(format!("cannot serialize the request: {e}")))?;
        let (tx, rx) = oneshot::channel();
        {
            let mut state = self.lock();
            if state.closed {
                return Err(Failure::Disconnected);
            }
            state.waiting.insert(id, tx);
        }
        let _waiter = Waiter { peer: self, id };
        self.outbox.send(json).await;
        tokio::select! {
            answer = rx => match answer {
                Ok(Ok(result)) => Ok(result),
                Ok(Err(error)) => Err(Failure::Error(error)),
                Err(_) => Err(Failure::Disconnected),
            },
            () = tokio::time::sleep(timeout) => {
                self.cancel(id).await;
                Err(Failure::Timeout)
            }
            () = cancel.cancelled() => {
                self.cancel(id).await;
                Err(Failure::Cancelled)
            }
        }
    }

    async fn cancel(&self, id: u64) {
        self.notify("$/cancelRequest", serde_json::json!({"id": format!("convo:{id}")})).await;
    }

    /// Starts taking the deltas of `stream_id`.
    pub fn deltas(&self, stream_id: &str) -> Deltas<'_> {
        let (tx, rx) = mpsc::channel(DELTA_QUEUE);
        self.lock().streams.insert(stream_id.to_owned(), tx);
        Deltas { peer: self, stream_id: stream_id.to_owned(), rx }
    }

    /// Hands a `runtime/delta` notification to its stream; waits while the stream is
    /// behind (back-pressure on the reader). Deltas of no stream are dropped.
    pub async fn delta(&self, params: Option<&str>) {
        let Some(params) = params.and_then(|p| serde_json::from_str::<Value>(p).ok()) else { return };
        let Some(stream_id) = params.get("stream_id").and_then(Value::as_str) else { return };
        let tx = self.lock().streams.get(stream_id).cloned();
        match tx {
            Some(tx) => {
                let _ = tx.send(params).await;
            }
            None => tracing::debug!(stream_id, "a delta of no stream in progress; dropped"),
        }
    }

    /// Hands a client's response to the request waiting for it; false when none waits.
    pub fn route(&self, id: &str, ok: Result<&str, &str>) -> bool {
        let number = serde_json::from_str::<&str>(id)
            .ok()
            .and_then(|s| s.strip_prefix("convo:"))
            .and_then(|n| n.parse::<u64>().ok());
        let Some(tx) = number.and_then(|n| self.lock().waiting.remove(&n)) else {
            return false;
        };
        let parse = |raw: &str| serde_json::from_str::<Value>(raw).unwrap_or(Value::Null);
        let _ = tx.send(ok.map(parse).map_err(parse));
        true
    }

    /// The end of input: every request still waiting fails as disconnected, and so does
    /// every later one.
    pub fn close(&self) {
        let mut state = self.lock();
        state.closed = true;
        state.waiting.clear();
        state.streams.clear();
    }
}

fn id_text(id: u64) -> String {
    format!("\"convo:{id}\"")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[tokio::test]
    async fn responses_reach_the_waiting_request() {
        let (outbox, mut rx) = Outbox::channel();
        let peer = Arc::new(Peer::new(outbox));
        let asking = tokio::spawn({
            let peer = peer.clone();
            async move {
                peer.request("host/ping", serde_json::json!({"n": 1}), Duration::from_secs(5), &Default::default())
                    .await
            }
        });
        let sent = rx.recv().await.unwrap().into_string();
        assert_eq!(sent, r#"{"jsonrpc":"2.0","id":"convo:1","method":"host/ping","params":{"n":1}}"#);
        assert!(!peer.route(r#""convo:2""#, Ok("true")), "nobody waits for convo:2");
        assert!(!peer.route("1", Ok("true")), "a number is not our id");
        assert!(peer.route(r#""convo:1""#, Ok(r#"{"pong":true}"#)));
        assert_eq!(asking.await.unwrap().unwrap(), serde_json::json!({"pong": true}));
    }

    #[tokio::test]
    async fn a_timeout_removes_the_waiter_and_tells_the_host() {
        let (outbox, mut rx) = Outbox::channel();
        let peer = Peer::new(outbox);
        let failed = peer.request("host/slow", (), Duration::from_millis(10), &Default::default()).await;
        assert!(matches!(failed, Err(Failure::Timeout)));
        assert_eq!(
            rx.recv().await.unwrap().into_string(),
            r#"{"jsonrpc":"2.0","id":"convo:1","method":"host/slow","params":null}"#
        );
        assert_eq!(
            rx.recv().await.unwrap().into_string(),
            r#"{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":"convo:1"}}"#
        );
        assert!(peer.lock().waiting.is_empty());
        assert!(!peer.route(r#""convo:1""#, Ok("1")), "a late answer finds nobody");
    }

    #[tokio::test]
    async fn the_end_of_input_fails_every_waiter() {
        let (outbox, _rx) = Outbox::channel();
        let peer = Arc::new(Peer::new(outbox));
        let asking = tokio::spawn({
            let peer = peer.clone();
            async move { peer.request("host/x", (), Duration::from_secs(60), &Default::default()).await }
        });
        tokio::task::yield_now().await;
        while peer.lock().waiting.is_empty() {
            tokio::task::yield_now().await;
        }
        peer.close();
        assert!(matches!(asking.await.unwrap(), Err(Failure::Disconnected)));
        let later = peer.request("host/x", (), Duration::from_secs(60), &Default::default()).await;
        assert!(matches!(later, Err(Failure::Disconnected)));
    }
}
