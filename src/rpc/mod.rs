//! The wire: framing, frame classification, the connection loop with per-session order
//! and lifecycle, and the methods registered in jsonrpsee's `RpcModule`. It knows
//! serde_json and the `Store` trait, nothing of how a store keeps its data.

mod connection;
mod envelope;
pub mod error;
pub mod framing;
mod methods;
mod order;
pub mod peer;
mod writer;

use std::io::{self, BufReader, Read, Write};
use std::sync::Arc;

use tokio::sync::mpsc;

use crate::rpc::connection::Connection;
use crate::rpc::framing::{FrameReader, Framing, FramingCell};
use crate::rpc::peer::Peer;
use crate::store::Store;

/// How the server talks: `framing` is `None` to detect it from the first byte.
#[derive(Debug, Clone)]
pub struct Config {
    pub framing: Option<Framing>,
    pub max_message_bytes: usize,
}

/// Serves one client on `input`/`output` until `exit` or the end of input; makes every
/// acknowledged write durable, and returns the process exit code.
pub async fn serve(
    config: Config,
    store: Arc<dyn Store>,
    input: Box<dyn Read + Send>,
    output: Box<dyn Write + Send>,
) -> io::Result<i32> {
    let framing = FramingCell::new(config.framing);
    let (outbox, writer) = writer::spawn(output, framing.clone())?;
    let peer = Arc::new(Peer::new(outbox.clone()));
    let ctx = methods::Ctx {
        store: store.clone(),
        framing: framing.clone(),
        max_message_bytes: config.max_message_bytes,
        method_names: Default::default(),
    };
    let connection = Connection::new(methods::module(ctx), outbox, peer, config.max_message_bytes);
    let incoming = spawn_reader(input, framing, config.max_message_bytes)?;
    let code = connection.run(incoming).await;
    if let Err(e) = store.flush().await {
        tracing::error!(error = %e, "could not make the last writes durable");
    }
    // Every sender of the outbox is gone now; the writer drains its queue and ends.
    if tokio::task::spawn_blocking(move || writer.join()).await.is_err() {
        tracing::error!("the writer thread failed");
    }
    Ok(code)
}

/// Reads frames on a thread of its own: a blocking read of stdin cannot be cancelled,
/// so it must not hold up the runtime when the server exits.
fn spawn_reader(
    input: Box<dyn Read + Send>,
    framing: Arc<FramingCell>,
    max: usize,
) -> io::Result<mpsc::Receiver<framing::Incoming>> {
    let (tx, rx) = mpsc::channel(64);
    std::thread::Builder::new().name("convo-reader".into()).spawn(move || {
        let mut reader = FrameReader::new(BufReader::with_capacity(64 * 1024, input), framing, max);
        loop {
            match reader.next_frame() {
                Ok(Some(frame)) => {
                    if tx.blocking_send(frame).is_err() {
                        break;
                    }
                }
                Ok(None) => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot read input; ending as at end of input");
                    break;
                }
            }
        }
    })?;
    Ok(rx)
}
