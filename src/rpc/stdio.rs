//! The byte streams under the protocol. When stdin or stdout is a pipe or a socket (as
//! when an editor or a Node/Python host spawns convo), it is made non-blocking and
//! served on the runtime's own thread: a message costs no thread hand-off. A file or a
//! terminal cannot be polled, and a terminal's flags are shared with the shell, so those
//! are served by a blocking thread instead (`convo < session.ndjson`). On Windows every
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
use rustix::fs::{FileType, OFlags};
#[cfg(unix)]
use tokio::io::unix::AsyncFd;
use tokio::sync::mpsc;

use crate::rpc::framing::{Decoder, Incoming};

/// How much is read at once.
const CHUNK: usize = 64 * 1024;
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

/// The request side: bytes from the source, through the decoder, as frames.
pub struct Input {
    kind: InputKind,
    decoder: Decoder,
    /// The polled source's read buffer.
    #[cfg(unix)]
    chunk: Vec<u8>,
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
            ended: false,
        })
    }

    /// Reads until at least one frame is complete and appends the frames to `out`;
    /// false once the input has ended and every frame has been handed out.
    pub async fn next(&mut self, out: &mut Vec<Incoming>) -> bool {
        while out.is_empty() && !self.ended {
            let read: io::Result<&[u8]> = match &mut self.kind {
                #[cfg(unix)]
                InputKind::Polled(fd) => fd.read(&mut self.chunk).await.map(|n| &self.chunk[..n]),
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
