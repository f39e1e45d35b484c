//! The one writer of the protocol stream. It owns the output, frames each queued message
//! in the connection's framing, and writes whatever is queued in one go. Replies, and later the server's own notifications and requests, all
//! go through the cloneable `Outbox`.

use std::fs::File;
use std::io::{self, Write};
use std::sync::Arc;

use tokio::sync::mpsc;

use crate::rpc::budget::Hold;
use crate::rpc::framing::{Framing, FramingCell};
use crate::rpc::stdio::{NonBlocking, Sink};

/// How many frames may wait for the writer before senders wait.
const QUEUE: usize = 1024;
/// How many bytes of queued frames go out in one write.
const COALESCE: usize = 1 << 20;

/// One JSON message to write: `head` then `body[skip..]`. A reply is the registry's
/// serialized response with the request's id put in front, without copying the result.
/// `hold` is its share of the output budget, given back once it is written.
#[derive(Debug)]
pub struct Reply {
    head: String,
    body: String,
    skip: usize,
    hold: Option<Hold>,
}

impl Reply {
    pub fn spliced(head: String, body: String, skip: usize) -> Self {
        Reply { head, body, skip, hold: None }
    }

    /// Its length in bytes, as written (before framing).
    pub fn len(&self) -> usize {
        self.head.len() + self.body.len() - self.skip
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn held_by(mut self, hold: Option<Hold>) -> Self {
        self.hold = hold;
        self
    }

    fn parts(&self) -> [&[u8]; 2] {
        [self.head.as_bytes(), &self.body.as_bytes()[self.skip..]]
    }

    pub fn into_string(self) -> String {
        let mut s = self.head;
        s.push_str(&self.body[self.skip..]);
        s
    }
}

impl From<String> for Reply {
    fn from(json: String) -> Self {
        Reply { head: String::new(), body: json, skip: 0, hold: None }
    }
}

#[derive(Clone, Debug)]
pub struct Outbox {
    tx: mpsc::Sender<Reply>,
}

impl Outbox {
    /// An outbox whose messages the caller reads itself (no writer).
    pub(crate) fn channel() -> (Self, mpsc::Receiver<Reply>) {
        let (tx, rx) = mpsc::channel(QUEUE);
        (Outbox { tx }, rx)
    }

    /// Queues one JSON message; waits while the queue is full. A closed output drops it.
    pub async fn send(&self, json: impl Into<Reply>) {
        if self.tx.send(json.into()).await.is_err() {
            tracing::debug!("output closed; dropping a message");
        }
    }
}

/// The writer, to wait for once every `Outbox` is gone and its queue is written.
pub enum Writer {
    Task(tokio::task::JoinHandle<()>),
    Thread(std::thread::JoinHandle<()>),
}

impl Writer {
    pub async fn join(self) {
        let done = match self {
            Writer::Task(task) => task.await.is_ok(),
            Writer::Thread(thread) => tokio::task::spawn_blocking(move || thread.join().is_ok()).await.unwrap_or(false),
        };
        if !done {
            tracing::error!("the writer failed");
        }
    }
}

/// Starts the writer: a task on the runtime when the sink is a pipe or socket, else a
/// thread. It ends when every `Outbox` is dropped and the queue is drained. A broken
/// output (the client went away) is logged once; later frames are dropped so that
/// nothing waits on a reader that is gone.
pub fn spawn(sink: Sink, framing: Arc<FramingCell>) -> io::Result<(Outbox, Writer)> {
    let (tx, rx) = mpsc::channel::<Reply>(QUEUE);
    let writer = match sink {
        Sink::Fd(fd) => match NonBlocking::new(fd) {
            Ok(out) => Writer::Task(tokio::spawn(write_polled(rx, out, framing))),
            Err(fd) => spawn_thread(rx, Box::new(File::from(fd)), framing)?,
        },
        Sink::Writer(out) => spawn_thread(rx, out, framing)?,
    };
    Ok((Outbox { tx }, writer))
}

/// Everything queued right now, framed, in one buffer; the replies' shares of the
/// output budget go to `holds`, to give back once the buffer is written.
fn coalesce(
    first: Reply,
    rx: &mut mpsc::Receiver<Reply>,
    framing: &FramingCell,
    frame: &mut Vec<u8>,
    holds: &mut Vec<Hold>,
) {
    frame.clear();
    let framing = framing.get().unwrap_or(Framing::Lsp);
    let mut next = Some(first);
    while let Some(mut reply) = next {
        framing.encode(reply.parts(), frame);
        holds.extend(reply.hold.take());
        next = if frame.len() < COALESCE { rx.try_recv().ok() } else { None };
    }
}

async fn write_polled(mut rx: mpsc::Receiver<Reply>, out: NonBlocking, framing: Arc<FramingCell>) {
    let (mut frame, mut holds) = (Vec::new(), Vec::new());
    let mut broken = false;
    while let Some(first) = rx.recv().await {
        if !broken {
            coalesce(first, &mut rx, &framing, &mut frame, &mut holds);
            broken = report(out.write_all(&frame).await);
            holds.clear();
        }
    }
}

fn spawn_thread(
    mut rx: mpsc::Receiver<Reply>,
    output: Box<dyn Write + Send>,
    framing: Arc<FramingCell>,
) -> io::Result<Writer> {
    let thread = std::thread::Builder::new().name("convo-writer".into()).spawn(move || {
        let mut out = output;
        let (mut frame, mut holds) = (Vec::new(), Vec::new());
        let mut broken = false;
        while let Some(first) = rx.blocking_recv() {
            if !broken {
                coalesce(first, &mut rx, &framing, &mut frame, &mut holds);
                broken = report(out.write_all(&frame).and_then(|()| out.flush()));
                holds.clear();
            }
        }
    })?;
    Ok(Writer::Thread(thread))
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
