//! The one writer of the protocol stream. A thread owns the output, frames each queued
//! message in the connection's framing, coalesces whatever is queued and flushes when the
//! queue is empty. Replies, and later the server's own notifications and requests, all
//! go through the cloneable `Outbox`.

use std::io::{self, Write};
use std::sync::Arc;
use std::thread::JoinHandle;

use tokio::sync::mpsc;

use crate::rpc::framing::{Framing, FramingCell};

/// How many frames may wait for the writer before senders wait.
const QUEUE: usize = 1024;

#[derive(Clone, Debug)]
pub struct Outbox {
    tx: mpsc::Sender<String>,
}

impl Outbox {
    #[cfg(test)]
    pub(crate) fn for_test(tx: mpsc::Sender<String>) -> Self {
        Outbox { tx }
    }

    /// Queues one JSON message; waits while the queue is full. A closed output drops it.
    pub async fn send(&self, json: String) {
        if self.tx.send(json).await.is_err() {
            tracing::debug!("output closed; dropping a message");
        }
    }
}

/// Starts the writer thread. It ends when every `Outbox` is dropped and the queue is
/// drained. A broken output (the client went away) is logged once; later frames are
/// dropped so that nothing waits on a reader that is gone.
pub fn spawn(output: Box<dyn Write + Send>, framing: Arc<FramingCell>) -> io::Result<(Outbox, JoinHandle<()>)> {
    let (tx, mut rx) = mpsc::channel::<String>(QUEUE);
    let thread = std::thread::Builder::new().name("convo-writer".into()).spawn(move || {
        let mut out = io::BufWriter::with_capacity(64 * 1024, output);
        let mut frame = Vec::new();
        let mut broken = false;
        while let Some(first) = rx.blocking_recv() {
            let mut next = Some(first);
            while let Some(json) = next {
                if !broken {
                    frame.clear();
                    framing.get().unwrap_or(Framing::Lsp).encode(json.as_bytes(), &mut frame);
                    broken = report(out.write_all(&frame));
                }
                next = rx.try_recv().ok();
            }
            if !broken {
                broken = report(out.flush());
            }
        }
    })?;
    Ok((Outbox { tx }, thread))
}

fn report(result: io::Result<()>) -> bool {
    match result {
        Ok(()) => false,
        Err(e) => {
            tracing::warn!(error = %e, "cannot write to the output; dropping further replies");
            true
        }
    }
}
