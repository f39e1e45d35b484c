//! The server in-process, without pipes: frames in, replies out, through the same code
//! as over stdio (classification, per-session order, the method registry, lifecycle).
//! For `convo replay`, fuzzing and property tests. Each frame is answered whole before
//! the next is taken. It has no host: `session/run`, `json` and `stream` fail at once
//! with 1008 `disconnected`. When ids are counted (`crate::mint`), requests run one at a
//! time, as `convo --deterministic` runs them.

use std::sync::Arc;

use serde_json::Value;
use tokio::sync::mpsc;

use crate::ops::Ops;
use crate::rpc::connection::Connection;
use crate::rpc::framing::{Framing, FramingCell, Incoming};
use crate::rpc::host::PeerHost;
use crate::rpc::methods;
use crate::rpc::peer::Peer;
use crate::rpc::writer::{Outbox, Reply};
use crate::store::Store;

pub struct LocalServer {
    runtime: tokio::runtime::Runtime,
    connection: Connection,
    replies: mpsc::Receiver<Reply>,
    next_id: u64,
}

impl LocalServer {
    pub fn new(store: Arc<dyn Store>, max_message_bytes: usize) -> std::io::Result<Self> {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        let (outbox, replies) = Outbox::channel();
        let peer = Arc::new(Peer::new(outbox.clone()));
        // No client answers server requests here: a turn through the host fails at once
        // (1008 `disconnected`) instead of waiting.
        peer.close();
        let ops = Ops::new(store, Arc::new(PeerHost(peer.clone())));
        let queued = ops.appends_signal_queued();
        let ctx = methods::Ctx::new(ops, peer.clone(), FramingCell::new(Some(Framing::Ndjson)), max_message_bytes);
        let limits = crate::rpc::Config {
            framing: Some(Framing::Ndjson),
            max_message_bytes,
            max_pending_bytes: crate::rpc::budget::DEFAULT_PENDING_BYTES,
            one_at_a_time: crate::mint::is_counted(),
        };
        let connection = Connection::new(methods::module(ctx), outbox, peer, &limits, queued);
        Ok(LocalServer { runtime, connection, replies, next_id: 1 })
    }

    /// Handles one frame's body and returns what the server wrote back: nothing for a
    /// notification, one reply, or one batch reply, and the `session/changed`
    /// notifications of the changes it made.
    pub fn frame(&mut self, body: &[u8]) -> Vec<String> {
        let (connection, replies) = (&mut self.connection, &mut self.replies);
        self.runtime.block_on(async {
            connection.incoming(Incoming::Frame(body.to_vec())).await;
            connection.flush().await;
            connection.settle().await;
            // Subscriptions notify from tasks of their own: let them run.
            for _ in 0..8 {
                tokio::task::yield_now().await;
            }
        });
        std::iter::from_fn(|| replies.try_recv().ok()).map(Reply::into_string).collect()
    }

    /// Whether the `exit` notification ended the connection (later frames are not read).
    pub fn exited(&self) -> bool {
        self.connection.exit_code().is_some()
    }

    /// Calls `method`; its result, or its error object.
    pub fn call(&mut self, method: &str, params: Value) -> Result<Value, Value> {
        let id = self.next_id;
        self.next_id += 1;
        let request = serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let replies = self.frame(request.to_string().as_bytes());
        let [reply] = &replies[..] else { panic!("one reply expected for {method}, got {replies:?}") };
        let mut reply: Value = serde_json::from_str(reply).expect("replies are JSON");
        assert_eq!(reply["id"], id, "the reply carries the request's id");
        match reply.get_mut("error") {
            Some(error) => Err(error.take()),
            None => Ok(reply["result"].take()),
        }
    }
}
