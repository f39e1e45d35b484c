//! A lean JSON-RPC client over a child's stdio in LSP framing: requests are written into
//! a buffer that is flushed only before the client would block on a read, so a pipeline
//! costs the client a few syscalls per batch, not per request. It is lean enough not to
//! be the bottleneck: no allocation and no formatting machinery per request or reply.

use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Client {
    child: Child,
    w: BufWriter<ChildStdin>,
    r: BufReader<ChildStdout>,
    next: u64,
    /// The last reply's body.
    body: Vec<u8>,
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
        let mut client = Client { child, w, r, next: 1, body: Vec::new(), first_reply: Duration::ZERO };
        client.call("initialize", "{}");
        client.first_reply = started.elapsed();
        client
    }

    /// Queues a request; returns its id. Written piece by piece into the buffer: no
    /// formatting machinery, no allocation.
    pub fn send(&mut self, method: &str, params: &str) -> u64 {
        const HEAD: &[u8] = br#"{"jsonrpc":"2.0","id":"#;
        const METHOD: &[u8] = br#","method":""#;
        const PARAMS: &[u8] = br#"","params":"#;
        let id = self.next;
        self.next += 1;
        let mut digits = [0; 20];
        let id_text = decimal(id, &mut digits);
        let len = HEAD.len() + id_text.len() + METHOD.len() + method.len() + PARAMS.len() + params.len() + 1;
        let mut len_digits = [0; 20];
        let w = &mut self.w;
        for part in [b"Content-Length: ", decimal(len as u64, &mut len_digits), b"\r\n\r\n", HEAD, id_text, METHOD] {
            w.write_all(part).expect("write to the server");
        }
        for part in [method.as_bytes(), PARAMS, params.as_bytes(), b"}"] {
            w.write_all(part).expect("write to the server");
        }
        id
    }

    /// The next reply's body; flushes queued requests first if it would have to wait.
    pub fn recv(&mut self) -> Vec<u8> {
        self.next_body();
        std::mem::take(&mut self.body)
    }

    /// Reads the next reply into `self.body` (reused, so a pipeline allocates nothing):
    /// the headers are parsed in the reader's buffer, without copying them out.
    fn next_body(&mut self) {
        if self.r.buffer().is_empty() {
            self.w.flush().expect("flush to the server");
        }
        let mut length = None;
        loop {
            let line_len = {
                let buffer = self.r.fill_buf().expect("read from the server");
                assert!(!buffer.is_empty(), "the server closed its output");
                match buffer.iter().position(|&b| b == b'\n') {
                    Some(end) => {
                        let line = buffer[..end].strip_suffix(b"\r").unwrap_or(&buffer[..end]);
                        if line.is_empty() {
                            self.r.consume(end + 1);
                            break;
                        }
                        if let Some(value) = content_length(line) {
                            length = Some(value);
                        }
                        Some(end + 1)
                    }
                    None => None,
                }
            };
            match line_len {
                Some(n) => self.r.consume(n),
                // A header split across reads: the slow path, rare.
                None => {
                    let mut line = Vec::new();
                    self.r.read_until(b'\n', &mut line).expect("read from the server");
                    let line = line.strip_suffix(b"\n").unwrap_or(&line);
                    let line = line.strip_suffix(b"\r").unwrap_or(line);
                    if line.is_empty() {
                        break;
                    }
                    if let Some(value) = content_length(line) {
                        length = Some(value);
                    }
                }
            }
        }
        self.body.resize(length.expect("a Content-Length header"), 0);
        self.r.read_exact(&mut self.body).expect("read a body");
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
        self.next_ok();
        std::mem::take(&mut self.body)
    }

    /// Reads the next reply, which must be a success, into `self.body`.
    fn next_ok(&mut self) {
        self.next_body();
        let head = &self.body[..self.body.len().min(160)];
        assert!(!head.windows(7).any(|w| w == b"\"error\""), "an error reply: {}", String::from_utf8_lossy(&self.body));
    }

    pub fn call(&mut self, method: &str, params: &str) -> Vec<u8> {
        self.send(method, params);
        self.recv_ok()
    }

    /// Sends `n` requests made by `request` (a method and its params, built beforehand),
    /// keeping at most `window` in flight; returns the time from the first send to the
    /// last reply.
    pub fn pipeline<'a>(&mut self, n: usize, window: usize, request: impl Fn(usize) -> (&'a str, &'a str)) -> Duration {
        let started = Instant::now();
        let (mut sent, mut received) = (0, 0);
        while received < n {
            while sent < n && sent - received < window {
                let (method, params) = request(sent);
                self.send(method, params);
                sent += 1;
            }
            self.next_ok();
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

/// `n` in decimal, written into the end of `buf`.
fn decimal(mut n: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &buf[at..];
        }
    }
}

/// The value of a `Content-Length` header line.
fn content_length(line: &[u8]) -> Option<usize> {
    let colon = line.iter().position(|&b| b == b':')?;
    if !line[..colon].eq_ignore_ascii_case(b"content-length") {
        return None;
    }
    std::str::from_utf8(&line[colon + 1..]).ok()?.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn decimal_writes_every_digit() {
        let mut buf = [0; 20];
        for n in [0, 7, 10, 4_096, u64::MAX] {
            assert_eq!(super::decimal(n, &mut buf), n.to_string().as_bytes());
        }
        assert_eq!(super::content_length(b"content-length: 42"), Some(42));
        assert_eq!(super::content_length(b"Content-Type: x"), None);
    }
}
