//! The server's side of talking to the client: notifications and requests the server
//! sends, and the routing of the client's responses back to the request that waits.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use jsonrpsee::types::ErrorObjectOwned;
use serde::Serialize;
use serde_json::Value;
use serde_json::value::RawValue;
use tokio::sync::oneshot;

use crate::rpc::error::{INTERNAL_ERROR, plain};
use crate::rpc::writer::Outbox;

type Reply = Result<Value, ErrorObjectOwned>;

#[derive(Debug)]
pub struct Peer {
    outbox: Outbox,
    next_id: AtomicU64,
    waiting: Mutex<HashMap<u64, oneshot::Sender<Reply>>>,
}

#[derive(Serialize)]
struct Outgoing<'a, P> {
    jsonrpc: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<u64>,
    method: &'a str,
    params: P,
}

impl Peer {
    pub fn new(outbox: Outbox) -> Self {
        Peer { outbox, next_id: AtomicU64::new(1), waiting: Mutex::default() }
    }

    pub async fn notify(&self, method: &str, params: impl Serialize) {
        let json = serde_json::to_string(&Outgoing { jsonrpc: "2.0", id: None, method, params });
        match json {
            Ok(json) => self.outbox.send(json).await,
            Err(e) => tracing::error!(error = %e, method, "cannot serialize a notification"),
        }
    }

    /// Sends a request to the client and waits for its response.
    pub async fn request(&self, method: &str, params: impl Serialize) -> Reply {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let json = serde_json::to_string(&Outgoing { jsonrpc: "2.0", id: Some(id), method, params })
            .map_err(|e| plain(INTERNAL_ERROR, format!("cannot serialize a request: {e}")))?;
        let (tx, rx) = oneshot::channel();
        self.lock().insert(id, tx);
        self.outbox.send(json).await;
        rx.await.unwrap_or_else(|_| Err(plain(INTERNAL_ERROR, "the connection closed before the client answered")))
    }

    /// Hands a client's response to the request waiting for it; false when none waits.
    pub fn route(&self, id: &RawValue, ok: Result<&RawValue, &RawValue>) -> bool {
        let Some(tx) = id.get().parse::<u64>().ok().and_then(|id| self.lock().remove(&id)) else {
            return false;
        };
        let reply = match ok {
            Ok(result) => serde_json::from_str(result.get()).map_err(|e| plain(INTERNAL_ERROR, e.to_string())),
            Err(error) => Err(serde_json::from_str(error.get())
                .unwrap_or_else(|_| plain(INTERNAL_ERROR, "the client answered with a malformed error"))),
        };
        let _ = tx.send(reply);
        true
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, oneshot::Sender<Reply>>> {
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }
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
            async move { peer.request("host/ping", serde_json::json!({"n": 1})).await }
        });
        let sent = rx.recv().await.unwrap().into_string();
        assert_eq!(sent, r#"{"jsonrpc":"2.0","id":1,"method":"host/ping","params":{"n":1}}"#);
        let raw = |s: &str| RawValue::from_string(s.into()).unwrap();
        assert!(!peer.route(&raw("2"), Ok(&raw("true"))), "nobody waits for id 2");
        assert!(peer.route(&raw("1"), Ok(&raw(r#"{"pong":true}"#))));
        assert_eq!(asking.await.unwrap().unwrap(), serde_json::json!({"pong": true}));
    }
}
