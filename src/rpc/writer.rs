//! The one writer of the protocol stream. It owns the output, frames each queued message
//! in the connection's framing, and writes whatever is queued in one go, the store's
//! message texts from where they lie. Replies and the server's own notifications and
//! requests all go through the cloneable `Outbox`.
//!
//! On a pipe or socket, a regular file or a device that is not a terminal (`stdio::Output`)
//! the output is shared, behind a lock, with `Outbox::send_now`: replies that nothing
//! queued or being written precedes are written by whoever made them, without a turn of
//! the writer task (a request at a time: about 6% of a round trip; the connection's
//! replies made at once, pipelined across two CPUs: 5-11% more requests a second, and
//! within the noise on one, BENCHMARKS.md).
//! The writer holds the lock from the moment it takes a message until it is written, so
//! a reply written directly never passes one queued before it.

#[cfg(unix)]
use std::fs::File;
use std::io::{self, IoSlice, Write};
use std::sync::Arc;

use tokio::sync::mpsc;
#[cfg(unix)]
use tokio::sync::{Mutex as AsyncMutex, OwnedMutexGuard};

use crate::rpc::budget::Hold;
use crate::rpc::framing::{Framing, FramingCell};
#[cfg(unix)]
use crate::rpc::stdio::Output;
use crate::rpc::stdio::Sink;
use crate::store::MessageJson;

/// How many frames may wait for the writer before senders wait.
const QUEUE: usize = 1024;
/// How many bytes of queued frames go out in one write.
const COALESCE: usize = 1 << 20;

/// A piece of one JSON message to write.
#[derive(Debug)]
pub enum Part {
    Text(String),
    Static(&'static str),
    /// A message's JSON text as the store keeps it: written from where it lies, never
    /// copied into the reply.
    Shared(MessageJson),
}

impl Part {
    pub fn text(&self) -> &str {
        match self {
            Part::Text(text) => text,
            Part::Static(text) => text,
            Part::Shared(json) => json.get(),
        }
    }
}

/// One JSON message to write: `head`, then each of `parts`. A reply to `history` is its
/// head and the store's message texts between the commas and brackets, so the largest
/// replies are never built whole (but for a batch's, whose replies are joined in one
/// text). `hold` is its share of the output budget, given back once it is written.
#[derive(Debug)]
pub struct Reply {
    head: String,
    parts: Vec<Part>,
    len: usize,
    hold: Option<Hold>,
}

impl Reply {
    pub fn new(head: String, parts: Vec<Part>) -> Self {
        let len = head.len() + parts.iter().map(|p| p.text().len()).sum::<usize>();
        Reply { head, parts, len, hold: None }
    }

    /// Its length in bytes, as written (before framing).
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn held_by(mut self, hold: Option<Hold>) -> Self {
        self.hold = hold;
        self
    }

    pub fn into_string(self) -> String {
        let mut s = self.head;
        s.reserve(self.len - s.len());
        self.parts.iter().for_each(|part| s.push_str(part.text()));
        s
    }
}

impl From<String> for Reply {
    fn from(json: String) -> Self {
        Reply::new(json, Vec::new())
    }
}

#[derive(Clone)]
pub struct Outbox {
    tx: mpsc::Sender<Reply>,
    /// The output itself, when the writer is a task: for `send_now`.
    #[cfg(unix)]
    direct: Option<Arc<AsyncMutex<Out>>>,
}

impl std::fmt::Debug for Outbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Outbox").finish_non_exhaustive()
    }
}

impl Outbox {
    fn new(tx: mpsc::Sender<Reply>) -> Self {
        Outbox {
            tx,
            #[cfg(unix)]
            direct: None,
        }
    }

    /// An outbox whose messages the caller reads itself (no writer).
    pub(crate) fn channel() -> (Self, mpsc::Receiver<Reply>) {
        let (tx, rx) = mpsc::channel(QUEUE);
        (Outbox::new(tx), rx)
    }

    /// Queues one JSON message; waits while the queue is full. A closed output drops it.
    pub async fn send(&self, json: impl Into<Reply>) {
        if self.tx.send(json.into()).await.is_err() {
            tracing::debug!("output closed; dropping a message");
        }
    }

    /// Nothing is queued or being written.
    pub fn is_idle(&self) -> bool {
        let free = || {
            #[cfg(unix)]
            if let Some(direct) = &self.direct {
                return direct.try_lock().is_ok();
            }
            true
        };
        self.tx.capacity() == self.tx.max_capacity() && free()
    }

    /// Sends `replies` (and empties it) as `send` would each in turn, but writes them at
    /// once, in one go, when nothing is queued and the output is free: for the replies
    /// the connection made at once (`Connection::flush`). What the pipe does not take at
    /// once is written by a task of its own, which holds the output until it is done. The
    /// queue being empty and the output free together mean nothing sent before is
    /// unwritten only because the writer task runs on this thread (the server's runtime
    /// has one): it takes the output as soon as it takes a message, with no turn between.
    pub async fn send_now(&self, replies: &mut Vec<Reply>) {
        if replies.is_empty() {
            return;
        }
        #[cfg(unix)]
        if let Some(direct) = &self.direct
            && self.tx.capacity() == self.tx.max_capacity()
            && let Ok(out) = direct.clone().try_lock_owned()
        {
            return write_now(out, replies.drain(..));
        }
        for reply in replies.drain(..) {
            self.send(reply).await;
        }
    }
}

/// The writer, to wait for once every `Outbox` is gone and its queue is written.
pub enum Writer {
    #[cfg(unix)]
    Task(tokio::task::JoinHandle<()>),
    Thread(std::thread::JoinHandle<()>),
}

impl Writer {
    pub async fn join(self) {
        let done = match self {
            #[cfg(unix)]
            Writer::Task(task) => task.await.is_ok(),
            Writer::Thread(thread) => tokio::task::spawn_blocking(move || thread.join().is_ok()).await.unwrap_or(false),
        };
        if !done {
            tracing::error!("the writer failed");
        }
    }
}

/// Starts the writer: a task on the runtime when the sink is a pipe or socket, a regular
/// file or a device that is not a terminal, else (a terminal) a thread. It ends when
/// every `Outbox` is dropped and the queue is drained. A broken output (the client went
/// away) is logged once; later frames are dropped so that nothing waits on a reader that
/// is gone.
pub fn spawn(sink: Sink, framing: Arc<FramingCell>) -> io::Result<(Outbox, Writer)> {
    let (tx, rx) = mpsc::channel::<Reply>(QUEUE);
    Ok(match sink {
        #[cfg(unix)]
        Sink::Fd(fd) => match Output::new(fd) {
            Ok(fd) => {
                let out = Arc::new(AsyncMutex::new(Out { fd, framing, batch: Batch::default(), broken: false }));
                let writer = Writer::Task(tokio::spawn(write_polled(rx, out.clone())));
                (Outbox { tx, direct: Some(out) }, writer)
            }
            Err(fd) => (Outbox::new(tx), spawn_thread(rx, Box::new(File::from(fd)), framing)?),
        },
        Sink::Writer(out) => (Outbox::new(tx), spawn_thread(rx, out, framing)?),
    })
}

/// Everything queued right now, framed: `frame` holds the framing and the text parts,
/// and each shared part goes between the bytes of `frame` before and after the offset
/// it is listed at. `holds` keeps the replies' shares of the output
/// budget until it is all written.
#[derive(Default)]
struct Batch {
    frame: Vec<u8>,
    shared: Vec<(usize, MessageJson)>,
    holds: Vec<Hold>,
}

impl Batch {
    /// `first` and what is queued behind it, up to `COALESCE` bytes.
    fn fill(&mut self, first: Reply, rx: &mut mpsc::Receiver<Reply>, framing: &FramingCell) {
        let framing = framing.get().unwrap_or(Framing::Lsp);
        let (mut next, mut size) = (Some(first), 0);
        while let Some(reply) = next {
            size += reply.len;
            self.push(reply, framing);
            next = if size < COALESCE { rx.try_recv().ok() } else { None };
        }
    }

    fn push(&mut self, reply: Reply, framing: Framing) {
        framing.open(reply.len, &mut self.frame);
        self.frame.extend_from_slice(reply.head.as_bytes());
        for part in reply.parts {
            match part {
                Part::Shared(json) => self.shared.push((self.frame.len(), json)),
                part => self.frame.extend_from_slice(part.text().as_bytes()),
            }
        }
        framing.close(&mut self.frame);
        if let Some(hold) = reply.hold {
            keep(&mut self.holds, hold);
        }
    }

    /// The bytes to write, in order.
    fn slices(&self) -> Vec<IoSlice<'_>> {
        let mut slices = Vec::with_capacity(2 * self.shared.len() + 1);
        let mut from = 0;
        for (at, json) in &self.shared {
            slices.push(IoSlice::new(&self.frame[from..*at]));
            slices.push(IoSlice::new(json.get().as_bytes()));
            from = *at;
        }
        slices.push(IoSlice::new(&self.frame[from..]));
        slices
    }

    fn written(&mut self) {
        self.frame.clear();
        self.shared.clear();
        self.holds.clear();
    }
}

/// Keeps `hold` with the holds before it: shares of one budget are merged, and given
/// back in one go once the batch is written.
fn keep(holds: &mut Vec<Hold>, hold: Hold) {
    match holds.last_mut() {
        Some(last) if Arc::ptr_eq(last.semaphore(), hold.semaphore()) => last.merge(hold),
        _ => holds.push(hold),
    }
}

/// How many turns of the runtime in a row the writer waits for no new reply before it
/// writes what it has (`write_polled`).
#[cfg(unix)]
const GATHER_TURNS: u32 = 2;

/// The output of a writer task, and what is being written to it.
#[cfg(unix)]
struct Out {
    fd: Output,
    framing: Arc<FramingCell>,
    batch: Batch,
    /// The output failed: what comes later is dropped.
    broken: bool,
}

#[cfg(unix)]
async fn write_polled(mut rx: mpsc::Receiver<Reply>, out: Arc<AsyncMutex<Out>>) {
    let mut last = 0;
    while let Some(first) = rx.recv().await {
        // Taken before any turn of the runtime (a direct write then would pass `first`):
        // `lock` may yield for the task's budget even when the lock is free.
        let mut out = match out.try_lock() {
            Ok(out) => out,
            Err(_) => out.lock().await,
        };
        let Out { fd, framing, batch, broken } = &mut *out;
        if !*broken {
            // After a write of several replies (requests pipelined), the replies behind
            // them come a turn or two of the runtime apart: those are waited for, so that
            // one write (one wakeup of the reader) carries them all. After a write of one
            // (a request at a time) nothing is waited for.
            let mut idle = 0;
            while last > 1 && idle < GATHER_TURNS && rx.len() + 1 < last {
                let before = rx.len();
                tokio::task::yield_now().await;
                idle = if rx.len() > before { 0 } else { idle + 1 };
            }
            last = rx.len() + 1;
            batch.fill(first, &mut rx, framing);
            *broken = report(fd.write_all_vectored(&mut batch.slices()).await);
            batch.written();
        }
    }
    // A direct write may still be finishing.
    drop(out.lock().await);
}

/// `Outbox::send_now`'s write: one system call, and a task for what it left.
#[cfg(unix)]
fn write_now(mut out: OwnedMutexGuard<Out>, replies: impl Iterator<Item = Reply>) {
    let Out { fd, framing, batch, broken } = &mut *out;
    if *broken {
        return;
    }
    let framing = framing.get().unwrap_or(Framing::Lsp);
    replies.for_each(|reply| batch.push(reply, framing));
    let slices = batch.slices();
    let total: usize = slices.iter().map(|slice| slice.len()).sum();
    let written = match fd.try_write_vectored(&slices) {
        Ok(n) => n,
        Err(e) if e.kind() == io::ErrorKind::WouldBlock || e.kind() == io::ErrorKind::Interrupted => 0,
        Err(e) => {
            *broken = report(Err(e));
            batch.written();
            return;
        }
    };
    if written == total {
        batch.written();
        return;
    }
    tokio::spawn(async move {
        let Out { fd, batch, broken, .. } = &mut *out;
        let mut slices = batch.slices();
        let mut rest = &mut slices[..];
        IoSlice::advance_slices(&mut rest, written);
        *broken = report(fd.write_all_vectored(rest).await);
        drop(slices);
        batch.written();
    });
}

fn spawn_thread(
    mut rx: mpsc::Receiver<Reply>,
    output: Box<dyn Write + Send>,
    framing: Arc<FramingCell>,
) -> io::Result<Writer> {
    let thread = std::thread::Builder::new().name("convo-writer".into()).spawn(move || {
        // A file or terminal: without a buffer, each shared part would be a write of its own.
        let mut out = io::BufWriter::with_capacity(COALESCE, output);
        let mut batch = Batch::default();
        let mut broken = false;
        while let Some(first) = rx.blocking_recv() {
            if !broken {
                batch.fill(first, &mut rx, &framing);
                let written = batch.slices().iter().try_for_each(|slice| out.write_all(slice));
                broken = report(written.and_then(|()| out.flush()));
                batch.written();
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::value::RawValue;

    fn shared(text: &str) -> Part {
        Part::Shared(MessageJson::Read(RawValue::from_string(text.to_owned()).unwrap()))
    }

    /// What a batch writes: its slices, one after the other.
    fn written(batch: &Batch) -> String {
        String::from_utf8(batch.slices().iter().flat_map(|s| s.to_vec()).collect()).unwrap()
    }

    #[test]
    fn replies_queued_together_go_out_framed_in_order() {
        let parts =
            || vec![Part::Static("["), shared(r#"{"a":1}"#), Part::Static(","), shared("[2]"), Part::Text("]}".into())];
        for (framing, expected) in [
            (
                Framing::Lsp,
                "Content-Length: 19\r\n\r\n{\"r\":[{\"a\":1},[2]]}Content-Length: 4\r\n\r\n\"ok\"Content-Length: 2\r\n\r\n{}",
            ),
            (Framing::Ndjson, "{\"r\":[{\"a\":1},[2]]}\n\"ok\"\n{}\n"),
        ] {
            let (outbox, mut rx) = Outbox::channel();
            let cell = FramingCell::new(Some(framing));
            let first = Reply::new(r#"{"r":"#.into(), parts());
            assert_eq!(first.len(), 19);
            let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
            runtime.block_on(async {
                outbox.send(String::from("\"ok\"")).await;
                outbox.send(Reply::new(String::new(), vec![Part::Static("{}")])).await;
            });
            let mut batch = Batch::default();
            batch.fill(first, &mut rx, &cell);
            assert_eq!(written(&batch), expected, "{framing:?}");
            assert_eq!(batch.shared.len(), 2, "shared parts are not copied");
            batch.written();
            assert!(batch.shared.is_empty());
        }
    }

    #[test]
    fn a_batchs_shares_of_one_budget_go_back_together() {
        let (one, other) = (Arc::new(tokio::sync::Semaphore::new(10)), Arc::new(tokio::sync::Semaphore::new(10)));
        let mut holds = Vec::new();
        for (budget, n) in [(&one, 2), (&one, 3), (&other, 4), (&other, 1)] {
            keep(&mut holds, budget.clone().try_acquire_many_owned(n).unwrap());
        }
        assert_eq!(holds.iter().map(Hold::num_permits).collect::<Vec<_>>(), [5, 5]);
        assert_eq!((one.available_permits(), other.available_permits()), (5, 5));
        holds.clear();
        assert_eq!((one.available_permits(), other.available_permits()), (10, 10));
    }

    #[test]
    fn a_reply_reads_back_whole() {
        let reply = Reply::new("{\"r\":".into(), vec![shared("[1,2]"), Part::Static("}")]);
        assert_eq!((reply.len(), reply.into_string()), (11, String::from("{\"r\":[1,2]}")));
    }
}

#[cfg(all(test, unix))]
mod direct_tests {
    use std::io::Read;

    use super::*;

    /// A writer on the write end of a pipe (ndjson framing), and its read end.
    fn piped() -> (Outbox, Writer, File) {
        let (read, write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).unwrap();
        let (outbox, writer) = spawn(Sink::Fd(write), FramingCell::new(Some(Framing::Ndjson))).unwrap();
        (outbox, writer, File::from(read))
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread().enable_io().build().unwrap()
    }

    /// What is in the pipe now, without waiting for more.
    fn in_pipe(read: &mut File) -> String {
        let flags = rustix::fs::fcntl_getfl(&*read).unwrap();
        rustix::fs::fcntl_setfl(&*read, flags | rustix::fs::OFlags::NONBLOCK).unwrap();
        let mut got = vec![0; 1 << 16];
        let n = match read.read(&mut got) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => 0,
            Err(e) => panic!("{e}"),
        };
        rustix::fs::fcntl_setfl(&*read, flags).unwrap();
        String::from_utf8(got[..n].to_vec()).unwrap()
    }

    /// `Outbox::send_now` of these texts.
    async fn send_now(outbox: &Outbox, texts: &[&str]) {
        let mut replies = texts.iter().map(|&text| Reply::from(text.to_owned())).collect();
        outbox.send_now(&mut replies).await;
        assert!(replies.is_empty());
    }

    /// Nothing queued: the replies are in the pipe when `send_now` returns, with no turn
    /// of the runtime (the writer task never ran).
    #[test]
    fn replies_sent_now_with_nothing_queued_are_written_at_once() {
        runtime().block_on(async {
            let (outbox, writer, mut read) = piped();
            assert!(outbox.is_idle());
            send_now(&outbox, &[r#"{"id":1}"#, r#"{"id":2}"#]).await;
            assert_eq!(in_pipe(&mut read), "{\"id\":1}\n{\"id\":2}\n");
            assert!(outbox.is_idle());
            drop(outbox);
            writer.join().await;
        });
    }

    /// A reply queued before, which the writer task has not taken yet: those sent now
    /// are queued behind it, in order.
    #[test]
    fn replies_sent_now_behind_a_queued_one_are_queued() {
        runtime().block_on(async {
            let (outbox, writer, mut read) = piped();
            outbox.send(String::from("1")).await;
            assert!(!outbox.is_idle(), "a reply is queued");
            send_now(&outbox, &["2", "3"]).await;
            assert_eq!(in_pipe(&mut read), "", "nothing written before the writer's turn");
            drop(outbox);
            writer.join().await;
            assert_eq!(in_pipe(&mut read), "1\n2\n3\n");
        });
    }

    /// A reply larger than the pipe takes is finished by a task of its own; what is sent
    /// after it, queued or now, follows it whole, in the order sent.
    #[test]
    fn what_follows_a_reply_the_pipe_did_not_take_whole_waits_for_it() {
        let big = format!("\"{}\"", "x".repeat(3 << 20));
        let reader = |mut read: File| {
            std::thread::spawn(move || {
                let mut all = Vec::new();
                read.read_to_end(&mut all).unwrap();
                all
            })
        };
        runtime().block_on(async {
            let (outbox, writer, read) = piped();
            send_now(&outbox, &[&big]).await;
            assert!(!outbox.is_idle(), "the rest of the reply is unwritten");
            // Nothing read yet: the pipe holds at most 1 MiB of the 3. Nothing is queued,
            // but the output is taken: "1" is queued, not written into the middle.
            send_now(&outbox, &["1"]).await;
            outbox.send(String::from("2")).await;
            send_now(&outbox, &["3"]).await;
            let all = reader(read);
            drop(outbox);
            writer.join().await;
            assert_eq!(String::from_utf8(all.join().unwrap()).unwrap(), format!("{big}\n1\n2\n3\n"));
        });
    }
}
