//! A lean JSON-RPC client over a child's stdio in LSP framing: requests are written into
//! a buffer that is flushed only before the client would block on a read, so a pipeline
//! costs the client a few syscalls per batch, not per request.

use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Client {
    child: Child,
    w: BufWriter<ChildStdin>,
    r: BufReader<ChildStdout>,
    next: u64,
    /// How long the first reply (to `initialize`) took after spawn.
    pub first_reply: Duration,
}

impl Client {
    /// Spawns `cmd` and waits for its reply to `initialize`.
    pub fn spawn(cmd: &[String]) -> Client {
        let started = Instant::now();
        let mut child = Command::new(&cmd[0])
            .args(&cmd[1..])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot spawn {cmd:?}: {e}"));
        let w = BufWriter::with_capacity(1 << 16, child.stdin.take().unwrap());
        let r = BufReader::with_capacity(1 << 16, child.stdout.take().unwrap());
        let mut client = Client { child, w, r, next: 1, first_reply: Duration::ZERO };
        client.call("initialize", "{}");
        client.first_reply = started.elapsed();
        client
    }

    /// Queues a request; returns its id.
    pub fn send(&mut self, method: &str, params: &str) -> u64 {
        let id = self.next;
        self.next += 1;
        let body = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{params}}}"#);
        write!(self.w, "Content-Length: {}\r\n\r\n{body}", body.len()).expect("write to the server");
        id
    }

    /// The next reply's body; flushes queued requests first if it would have to wait.
    pub fn recv(&mut self) -> Vec<u8> {
        if self.r.buffer().is_empty() {
            self.w.flush().expect("flush to the server");
        }
        let mut length = None;
        let mut line = String::new();
        loop {
            line.clear();
            assert!(self.r.read_line(&mut line).expect("read from the server") > 0, "the server closed its output");
            let header = line.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse::<usize>().ok();
            }
        }
        let mut body = vec![0; length.expect("a Content-Length header")];
        self.r.read_exact(&mut body).expect("read a body");
        body
    }

    /// Answers a request of the server's (`id` as JSON text) with `result`.
    pub fn answer(&mut self, id: &str, result: &str) {
        let body = format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{result}}}"#);
        write!(self.w, "Content-Length: {}\r\n\r\n{body}", body.len()).expect("write to the server");
    }

    /// Calls `method`, answering each `runtime/run` the server asks meanwhile with
    /// `answer`, as a host would; returns the call's reply.
    pub fn call_hosting(&mut self, method: &str, params: &str, answer: &str) -> Vec<u8> {
        self.send(method, params);
        loop {
            let body = self.recv();
            let value: serde_json::Value = serde_json::from_slice(&body).expect("a JSON frame");
            if value.get("method").and_then(|m| m.as_str()) == Some("runtime/run") {
                self.answer(&value["id"].to_string(), answer);
                continue;
            }
            assert!(value.get("error").is_none(), "an error reply: {value}");
            return body;
        }
    }

    /// A reply that must be a success.
    pub fn recv_ok(&mut self) -> Vec<u8> {
        let body = self.recv();
        let head = &body[..body.len().min(160)];
        assert!(!head.windows(7).any(|w| w == b"\"error\""), "an error reply: {}", String::from_utf8_lossy(&body));
        body
    }

    pub fn call(&mut self, method: &str, params: &str) -> Vec<u8> {
        self.send(method, params);
        self.recv_ok()
    }

    /// Sends `n` requests made by `request`, keeping at most `window` in flight; returns
    /// the time from the first send to the last reply.
    pub fn pipeline(&mut self, n: usize, window: usize, request: impl Fn(usize) -> (String, String)) -> Duration {
        let started = Instant::now();
        let (mut sent, mut received) = (0, 0);
        while received < n {
            while sent < n && sent - received < window {
                let (method, params) = request(sent);
                self.send(&method, &params);
                sent += 1;
            }
            self.recv_ok();
            received += 1;
        }
        started.elapsed()
    }

    /// The server's peak resident set (VmHWM), in KiB.
    pub fn peak_rss_kib(&self) -> u64 {
        self.status_kib("VmHWM:")
    }

    /// The server's resident set now (VmRSS), in KiB.
    pub fn rss_kib(&self) -> u64 {
        self.status_kib("VmRSS:")
    }

    fn status_kib(&self, field: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix(field))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    }

    /// `shutdown`, `exit`, and waits for the process.
    pub fn close(mut self) {
        self.call("shutdown", "null");
        let body = r#"{"jsonrpc":"2.0","method":"exit"}"#;
        let _ = write!(self.w, "Content-Length: {}\r\n\r\n{body}", body.len());
        let _ = self.w.flush();
        drop(self.w);
        let _ = self.child.wait();
    }
}
