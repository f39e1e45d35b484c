//! The wire: framing, frame classification, the connection loop with per-session order
//! and lifecycle, and the method table (`methods`) it dispatches to. It knows
//! serde_json and the `Store` trait, nothing of how a store keeps its data.

pub mod budget;
mod connection;
mod envelope;
pub mod error;
mod execute;
pub mod framing;
mod host;
mod local;
mod methods;
mod order;
mod outgoing;
pub mod peer;
mod stdio;
mod watch;
mod writer;

use std::io;
use std::sync::Arc;

use crate::ops::Ops;
use crate::rpc::connection::Connection;
use crate::rpc::framing::{Decoder, Framing, FramingCell};
use crate::rpc::host::PeerHost;
use crate::rpc::peer::Peer;
use crate::rpc::stdio::Input;
use crate::store::Store;

pub use local::LocalServer;
pub use stdio::{Sink, Source};

/// How the server talks: `framing` is `None` to detect it from the first byte. Frames
/// and replies over `max_message_bytes` are refused; `max_pending_bytes` is the byte
/// budget of `rpc::budget`. With `one_at_a_time` (`--deterministic`) every request waits
/// for the one received before it, whatever sessions they name, so ids, time stamps and
/// the order of replies do not depend on timing (a turn still lets the session go while
/// the host works).
#[derive(Debug, Clone)]
pub struct Config {
    pub framing: Option<Framing>,
    pub max_message_bytes: usize,
    pub max_pending_bytes: usize,
    pub one_at_a_time: bool,
}

/// Serves one client on `input`/`output` until `exit` or the end of input; makes every
/// acknowledged write durable, closes the store, and returns the process exit code. Runs on a tokio
/// runtime with IO enabled.
pub async fn serve(config: Config, store: Arc<dyn Store>, input: Source, output: Sink) -> io::Result<i32> {
    let framing = FramingCell::new(config.framing);
    let (outbox, writer) = writer::spawn(output, framing.clone())?;
    let peer = Arc::new(Peer::new(outbox.clone()));
    let ops = Ops::new(store, Arc::new(PeerHost(peer.clone())));
    let ctx = methods::Ctx::new(ops.clone(), peer.clone(), framing.clone(), config.max_message_bytes);
    let queued = ops.appends_signal_queued();
    let connection = Connection::new(methods::module(ctx), outbox, peer, &config, queued);
    let input = Input::new(input, Decoder::new(framing, config.max_message_bytes))?;
    let sweeper = tokio::spawn(sweep(ops.clone()));
    let code = connection.run(input).await;
    sweeper.abort();
    let _ = sweeper.await;
    if let Err(e) = ops.close().await {
        tracing::error!(error = %e, "could not make the last writes durable");
    }
    // The host is the client: with the last `Ops`, the last sender of the outbox goes.
    drop(ops);
    // Every sender of the outbox is gone now; the writer drains its queue and ends.
    writer.join().await;
    Ok(code)
}

/// Keeps, now and every second, the drafts of streams whose process died (this one's
/// from an earlier run, or another's on the same store).
async fn sweep(ops: Ops) {
    loop {
        match ops.sweep_crashed_drafts().await {
            Ok(0) => {}
            Ok(kept) => tracing::info!(kept, "kept the drafts of streams whose process died"),
            Err(e) => tracing::warn!(error = %e, "cannot look for the drafts of dead streams"),
        }
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    }
}
