//! The byte streams under the protocol. When stdin or stdout is a pipe or a socket (as
//! when an editor or a Node/Python host spawns convo), it is made non-blocking and
//! served on the runtime's own thread: a message costs no thread hand-off (and while
//! nothing else waits to run, the input waits on a poll of its own, without the runtime's
//! park and wake-up: `Input::next`). A file or a terminal cannot be polled, and a
//! terminal's flags are shared with the shell, so stdin from either is read by a blocking
//! thread instead (`convo < session.ndjson`); stdout to a file or to a device that is not
//! a terminal is written in place on the runtime's thread (`Output`), to a terminal by a
//! thread. On Windows every
//! stream is served by a blocking thread: its pipes are read and written as raw bytes
//! (Rust's standard streams have no text mode to turn off).

use std::io::{self, Read, Write};
#[cfg(unix)]
use std::{
    fs::File,
    io::IoSlice,
    os::fd::{AsFd, OwnedFd},
};

#[cfg(unix)]
use rustix::event::{PollFd, PollFlags, Timespec};
#[cfg(unix)]
use rustix::fs::{FileType, OFlags};
#[cfg(unix)]
use tokio::io::unix::AsyncFd;
use tokio::sync::mpsc;

use crate::rpc::framing::{Decoder, Incoming};

/// How much is read at once.
const CHUNK: usize = 64 * 1024;
/// How long a quiet server waits for input on its own before it leaves the wait to the
/// runtime (`Input::next`). Longer than the scheduler tick of any kernel (4 ms at Linux's
/// usual 250 Hz, 10 ms at 100 Hz), so that arming the wait's timer and cancelling it when
/// input comes does not move the processor's next timer interrupt: with 1 ms it moved at
/// each wait, twice, which on a virtual machine is two exits to the hypervisor, and a
/// request at a time from a client on another CPU took 1.33-1.35× the echo's round trip
/// instead of 1.15-1.16× (BENCHMARKS.md).
#[cfg(unix)]
const QUIET_WAIT: Timespec = Timespec { tv_sec: 0, tv_nsec: 50_000_000 };
/// After a quiet read found the pipe empty and had to wait, how many of the quiet reads
/// that follow one which took all there was wait first (`Input::next`).
#[cfg(unix)]
const WAITS_AFTER_A_MISS: u8 = 16;
/// The pipe buffer asked for: Linux's default limit for unprivileged processes.
#[cfg(target_os = "linux")]
const PIPE_BUFFER: usize = 1 << 20;

/// Where requests come from.
pub enum Source {
    /// A file descriptor (stdin): polled when it is a pipe or socket.
    #[cfg(unix)]
    Fd(OwnedFd),
    /// Anything else, read on a thread.
    Reader(Box<dyn Read + Send>),
}

/// Where replies go.
pub enum Sink {
    #[cfg(unix)]
    Fd(OwnedFd),
    Writer(Box<dyn Write + Send>),
}

/// A pipe or socket switched to non-blocking mode for the life of this value; its
/// original flags come back on drop, since other processes may share it.
#[cfg(unix)]
pub struct NonBlocking {
    fd: AsyncFd<File>,
    restore: OFlags,
}

#[cfg(unix)]
impl NonBlocking {
    /// `Err(fd)` gives the descriptor back when it is not a pipe or socket, or cannot be
    /// polled. Must be called within the runtime.
    pub fn new(fd: OwnedFd) -> Result<Self, OwnedFd> {
        let pollable = rustix::fs::fstat(&fd)
            .is_ok_and(|st| matches!(FileType::from_raw_mode(st.st_mode), FileType::Fifo | FileType::Socket));
        let Ok(flags) = rustix::fs::fcntl_getfl(&fd) else { return Err(fd) };
        // A larger pipe buffer (where the system allows) moves a large reply in fewer
        // wake-ups of the two processes.
        #[cfg(target_os = "linux")]
        let _ = rustix::pipe::fcntl_setpipe_size(&fd, PIPE_BUFFER);
        if !pollable || rustix::fs::fcntl_setfl(&fd, flags | OFlags::NONBLOCK).is_err() {
            return Err(fd);
        }
        // SAFETY: the `File` owns the descriptor for as long as the `AsyncFd` owns the
        // `File`, and always reports that same descriptor.
        match unsafe { AsyncFd::register(File::from(fd)) } {
            Ok(fd) => Ok(NonBlocking { fd, restore: flags }),
            Err(e) => {
                let (file, _) = e.into_parts();
                let _ = rustix::fs::fcntl_setfl(&file, flags);
                Err(file.into())
            }
        }
    }

    /// Reads what is there, or waits for it here with a `poll(2)` of its own for at most
    /// `QUIET_WAIT`, with no turn of the runtime: `None` when nothing came in that time.
    /// `wait_first`: the wait comes before the first read (`Input::next` says when). Also
    /// says whether it waited. Only for when nothing else on this thread can be waiting
    /// to run (`Input::next`).
    fn read_here(&self, buf: &mut [u8], wait_first: bool) -> (Option<io::Result<usize>>, bool) {
        if wait_first && !self.wait_here() {
            return (None, true);
        }
        let mut waited = wait_first;
        loop {
            match self.fd.get_ref().read(buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    waited = true;
                    if !self.wait_here() {
                        return (None, true);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                read => return (Some(read), waited),
            }
        }
    }

    /// Whether the input became readable (or ended) within `QUIET_WAIT`.
    fn wait_here(&self) -> bool {
        let mut fds = [PollFd::new(self.fd.get_ref(), PollFlags::IN)];
        rustix::event::poll(&mut fds, Some(&QUIET_WAIT)).is_ok_and(|ready| ready > 0)
    }

    pub async fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let mut ready = self.fd.readable().await?;
            if let Ok(result) = ready.try_io(|f| f.get_ref().read(buf)) {
                // A short read drained the pipe: wait for the next edge instead of
                // asking again only to be told it would block.
                if result.as_ref().is_ok_and(|&n| n > 0 && n < buf.len()) {
                    ready.clear_ready();
                }
                return result;
            }
        }
    }

    /// One write of what the pipe takes of `bufs` now, without waiting: `WouldBlock` when
    /// it takes nothing.
    pub fn try_write_vectored(&self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        self.fd.get_ref().write_vectored(bufs)
    }

    /// Writes every byte of `bufs`, in order, in as few system calls as the pipe allows.
    pub async fn write_all_vectored(&self, mut bufs: &mut [IoSlice<'_>]) -> io::Result<()> {
        IoSlice::advance_slices(&mut bufs, 0);
        while !bufs.is_empty() {
            let mut ready = self.fd.writable().await?;
            match ready.try_io(|f| f.get_ref().write_vectored(bufs)) {
                Ok(Ok(0)) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(Ok(n)) => IoSlice::advance_slices(&mut bufs, n),
                Ok(Err(e)) => return Err(e),
                Err(_would_block) => {}
            }
        }
        Ok(())
    }
}

#[cfg(unix)]
impl Drop for NonBlocking {
    fn drop(&mut self) {
        let _ = rustix::fs::fcntl_setfl(self.fd.get_ref().as_fd(), self.restore);
    }
}

/// Where the writer task writes: a pipe or socket as it takes bytes, or a regular file or
/// a device that is not a terminal (`/dev/null`), written in place. Those writes never
/// wait on a reader, so the runtime's thread makes them: a thread of its own would be
/// woken for every batch of replies (300,000 requests pipelined into `/dev/null` made
/// 370,000 context switches that way). A terminal keeps the thread: its writes wait while
/// the user holds its output (`^S`).
#[cfg(unix)]
pub enum Output {
    Polled(NonBlocking),
    InPlace(File),
}

#[cfg(unix)]
impl Output {
    /// `Err(fd)` gives the descriptor back for a terminal, or what can neither be polled
    /// nor written in place. Must be called within the runtime.
    pub fn new(fd: OwnedFd) -> Result<Self, OwnedFd> {
        use std::io::IsTerminal as _;
        let in_place = rustix::fs::fstat(&fd).is_ok_and(|st| match FileType::from_raw_mode(st.st_mode) {
            FileType::RegularFile => true,
            FileType::CharacterDevice => !fd.as_fd().is_terminal(),
            _ => false,
        });
        match in_place {
            true => Ok(Output::InPlace(File::from(fd))),
            false => NonBlocking::new(fd).map(Output::Polled),
        }
    }

    /// One write of what the output takes of `bufs` now: `WouldBlock` when a pipe takes
    /// nothing.
    pub fn try_write_vectored(&self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        match self {
            Output::Polled(fd) => fd.try_write_vectored(bufs),
            Output::InPlace(file) => (&mut &*file).write_vectored(bufs),
        }
    }

    /// Writes every byte of `bufs`, in order.
    pub async fn write_all_vectored(&self, mut bufs: &mut [IoSlice<'_>]) -> io::Result<()> {
        let mut file: &File = match self {
            Output::Polled(fd) => return fd.write_all_vectored(bufs).await,
            Output::InPlace(file) => file,
        };
        IoSlice::advance_slices(&mut bufs, 0);
        while !bufs.is_empty() {
            match file.write_vectored(bufs) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => IoSlice::advance_slices(&mut bufs, n),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// The request side: bytes from the source, through the decoder, as frames.
pub struct Input {
    kind: InputKind,
    decoder: Decoder,
    /// The polled source's read buffer.
    #[cfg(unix)]
    chunk: Vec<u8>,
    /// The last read took all there was.
    #[cfg(unix)]
    drained: bool,
    /// How many more quiet reads after one that took all there was wait before they read
    /// (`Input::next`).
    #[cfg(unix)]
    waits_first: u8,
    ended: bool,
}

enum InputKind {
    #[cfg(unix)]
    Polled(NonBlocking),
    /// Chunks read by a blocking thread; a bounded queue, so a slow server stops it.
    Thread(mpsc::Receiver<Vec<u8>>),
}

impl Input {
    pub fn new(source: Source, decoder: Decoder) -> io::Result<Self> {
        let kind = match source {
            #[cfg(unix)]
            Source::Fd(fd) => match NonBlocking::new(fd) {
                Ok(polled) => InputKind::Polled(polled),
                Err(fd) => InputKind::Thread(spawn_reader(Box::new(File::from(fd)))?),
            },
            Source::Reader(reader) => InputKind::Thread(spawn_reader(reader)?),
        };
        Ok(Input {
            kind,
            decoder,
            #[cfg(unix)]
            chunk: vec![0; CHUNK],
            #[cfg(unix)]
            drained: false,
            #[cfg(unix)]
            waits_first: 0,
            ended: false,
        })
    }

    /// Reads until at least one frame is complete and appends the frames to `out`;
    /// false once the input has ended and every frame has been handed out.
    ///
    /// `quiet`: nothing else on the runtime is running or waiting (`Connection::quiet`).
    /// A polled input then waits for the next bytes on this thread, with a `poll(2)` of
    /// its own for up to `QUIET_WAIT` (50 ms), before it leaves the wait to the runtime: a
    /// request at a time, the runtime's park and wake-up cost about 4% of a round trip
    /// (BENCHMARKS.md). Meanwhile the runtime does nothing: a timer (the drafts' sweep, once
    /// a second), or a task woken from another thread (a store's own), waits for 50 ms of
    /// silence, or at most for the 256th frame since the runtime's last turn, after which
    /// the connection always yields (`FRAMES_PER_TURN`).
    ///
    /// After a read that took all there was, the quiet read tries the pipe before it
    /// waits while that finds the next request, as it does when the client runs on the
    /// same CPU and sent it while this server finished the last: the `poll` would only
    /// add a system call, a tenth of the round trip (BENCHMARKS.md). Once the pipe is found
    /// empty, the next `WAITS_AFTER_A_MISS` such reads wait first, so that a client on
    /// another CPU costs one read that finds nothing in seventeen.
    pub async fn next(&mut self, out: &mut Vec<Incoming>, quiet: bool) -> bool {
        #[cfg(not(unix))]
        let _ = quiet;
        while out.is_empty() && !self.ended {
            let read: io::Result<&[u8]> = match &mut self.kind {
                #[cfg(unix)]
                InputKind::Polled(fd) => {
                    let mut here = None;
                    if quiet {
                        let wait_first = self.drained && self.waits_first > 0;
                        let (read, waited) = fd.read_here(&mut self.chunk, wait_first);
                        self.waits_first = match (wait_first, waited && self.drained) {
                            (true, _) => self.waits_first - 1,
                            (false, true) => WAITS_AFTER_A_MISS,
                            (false, false) => 0,
                        };
                        here = read;
                    }
                    let read = match here {
                        Some(read) => read,
                        None => fd.read(&mut self.chunk).await,
                    };
                    self.drained = read.as_ref().is_ok_and(|&n| n < self.chunk.len());
                    read.map(|n| &self.chunk[..n])
                }
                InputKind::Thread(rx) => match rx.recv().await {
                    Some(chunk) => {
                        self.decoder.push(&chunk, out);
                        continue;
                    }
                    None => Ok(&[][..]),
                },
            };
            match read {
                Ok([]) => {
                    self.ended = true;
                    self.decoder.finish(out);
                }
                Ok(bytes) => self.decoder.push(bytes, out),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    tracing::warn!(error = %e, "cannot read input; ending as at end of input");
                    self.ended = true;
                }
            }
        }
        !out.is_empty()
    }
}

/// A blocking read cannot be cancelled, so it runs on a thread of its own that must
/// not hold up the process when the server exits.
fn spawn_reader(mut reader: Box<dyn Read + Send>) -> io::Result<mpsc::Receiver<Vec<u8>>> {
    let (tx, rx) = mpsc::channel(16);
    std::thread::Builder::new().name("convo-reader".into()).spawn(move || {
        let mut buf = vec![0; CHUNK];
        loop {
            match reader.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    if tx.blocking_send(buf[..n].to_vec()).is_err() {
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    tracing::warn!(error = %e, "cannot read input; ending as at end of input");
                    break;
                }
            }
        }
    })?;
    Ok(rx)
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    /// The input's own wait: what is there is read at once, an empty pipe is left to the
    /// runtime after `QUIET_WAIT`, and a closed one reads as ended.
    #[tokio::test]
    async fn a_quiet_read_takes_what_is_there_and_gives_up_on_an_empty_pipe() {
        let (read, write) = rustix::pipe::pipe().unwrap();
        let Ok(input) = NonBlocking::new(read) else { panic!("a pipe can be polled") };
        let mut write = File::from(write);
        let mut buf = [0; 16];

        write.write_all(b"hello").unwrap();
        for wait_first in [false, true] {
            let (read, waited) = input.read_here(&mut buf, wait_first);
            assert_eq!((read.unwrap().unwrap(), waited), (5, wait_first));
            assert_eq!(&buf[..5], b"hello");
            write.write_all(b"hello").unwrap();
        }
        let (read, waited) = input.read_here(&mut buf, false);
        assert_eq!((read.unwrap().unwrap(), waited), (5, false));

        let start = Instant::now();
        for wait_first in [true, false] {
            let (read, waited) = input.read_here(&mut buf, wait_first);
            assert!(read.is_none() && waited);
        }
        assert!(start.elapsed() >= Duration::from_millis(2 * 50), "each waited `QUIET_WAIT`");

        // What the runtime's wait then finds is all there is.
        write.write_all(b"more").unwrap();
        assert_eq!(input.read(&mut buf).await.unwrap(), 4);
        drop(write);
        let (read, waited) = input.read_here(&mut buf, true);
        assert_eq!((read.unwrap().unwrap(), waited), (0, true));
    }

    /// After a read that took all there was, a quiet read tries the pipe before it waits
    /// while that finds the next request; once it found the pipe empty, the next
    /// `WAITS_AFTER_A_MISS` such reads wait first, and then it tries again.
    #[tokio::test]
    async fn a_quiet_read_waits_first_only_after_it_found_the_pipe_empty() {
        use crate::rpc::framing::{Framing, FramingCell};
        let (read, write) = rustix::pipe::pipe().unwrap();
        let decoder = Decoder::new(FramingCell::new(Some(Framing::Ndjson)), 1024);
        let mut input = Input::new(Source::Fd(read), decoder).unwrap();
        let mut write = File::from(write);
        let mut frames = Vec::new();
        let mut take = async |input: &mut Input| {
            assert!(input.next(&mut frames, true).await);
            assert_eq!(std::mem::take(&mut frames).len(), 1);
            input.waits_first
        };

        for _ in 0..3 {
            write.write_all(b"{}\n").unwrap();
            assert_eq!(take(&mut input).await, 0, "the request was there: nothing to wait for");
        }
        // The next request comes well after the read began, which found the pipe empty.
        let mut late = write.try_clone().unwrap();
        let late = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            late.write_all(b"{}\n").unwrap();
        });
        assert_eq!(take(&mut input).await, WAITS_AFTER_A_MISS);
        late.join().unwrap();
        for left in (0..WAITS_AFTER_A_MISS).rev() {
            write.write_all(b"{}\n").unwrap();
            assert_eq!(take(&mut input).await, left);
        }
        write.write_all(b"{}\n").unwrap();
        assert_eq!(take(&mut input).await, 0, "read first again, and it found the request");
    }

    /// A regular file and `/dev/null` are written in place, a pipe is polled, and a
    /// terminal is left to a thread; in place, every slice is written, in order.
    #[tokio::test]
    async fn the_output_is_written_in_place_to_a_file_or_a_device_but_a_terminal() {
        use rustix::fs::{Mode, OFlags, open};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out");
        let file = File::create(&path).unwrap();
        let Ok(output @ Output::InPlace(_)) = Output::new(file.into()) else { panic!("a file is written in place") };
        let large = vec![b'x'; 3 << 20];
        let mut slices = [IoSlice::new(b"one,"), IoSlice::new(&large), IoSlice::new(b",two")];
        assert_eq!(output.try_write_vectored(&slices[..1]).unwrap(), 4);
        output.write_all_vectored(&mut slices).await.unwrap();
        let written = std::fs::read(&path).unwrap();
        assert_eq!(written.len(), 4 + 4 + large.len() + 4);
        assert!(written.starts_with(b"one,one,x") && written.ends_with(b"x,two"));

        let null = open("/dev/null", OFlags::WRONLY, Mode::empty()).unwrap();
        assert!(matches!(Output::new(null), Ok(Output::InPlace(_))), "/dev/null is written in place");
        let (_read, write) = rustix::pipe::pipe().unwrap();
        assert!(matches!(Output::new(write), Ok(Output::Polled(_))), "a pipe is polled");
        let terminal = open("/dev/ptmx", OFlags::RDWR | OFlags::NOCTTY, Mode::empty()).unwrap();
        assert!(Output::new(terminal).is_err(), "a terminal is written by a thread");
    }
}
