//! The floor: a minimal stdio server in LSP framing that answers every request with
//! `null` and does nothing else. What convo costs is measured against what the pipe and
//! the framing alone cost. `echo/ask` is the floor of a turn through the host: it asks
//! the client `runtime/run` and answers `null` once the client answered.
//!
//! It writes as convo does: what is answered goes out once nothing more is read, and
//! after every `REPLIES_PER_WRITE` replies (convo's `FRAMES_PER_WRITE`), so that a client
//! that pipelines works on the first replies while the rest are answered. Writing only
//! once a whole read was answered made the floor a third to a half slower than the pipe
//! allows, and convo, which writes sooner, looked closer to it than it is.

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::os::fd::AsFd;

const REPLIES_PER_WRITE: u64 = 16;

fn main() {
    let mut input = BufReader::with_capacity(1 << 16, std::io::stdin().lock());
    // A file on fd 1 (a duplicate), not `stdout()`: its line buffering wrote every reply
    // in two (the header, at its `\r\n`, then the body), a write and a wake-up of the
    // client more per request than a server needs, which made this floor twice as slow
    // as the pipe allows.
    let Ok(fd) = std::io::stdout().as_fd().try_clone_to_owned() else { return };
    let mut output = BufWriter::with_capacity(1 << 16, File::from(fd));
    let mut line = String::new();
    let mut replies = 0u64;
    // The request of an `echo/ask` whose `runtime/run` the client has not answered yet.
    let mut asked: Option<serde_json::Value> = None;
    loop {
        let mut length = 0;
        loop {
            line.clear();
            if input.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            let header = line.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some(v) = header.strip_prefix("Content-Length:") {
                length = v.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0; length];
        if input.read_exact(&mut body).is_err() {
            return;
        }
        let message: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
        if message.get("method").and_then(|m| m.as_str()) == Some("exit") {
            return;
        }
        if message.get("method").and_then(|m| m.as_str()) == Some("echo/ask") {
            let ask = r#"{"jsonrpc":"2.0","id":"convo:1","method":"runtime/run","params":{}}"#;
            let _ = write!(output, "Content-Length: {}\r\n\r\n{ask}", ask.len());
            if output.flush().is_err() {
                return;
            }
            asked = message.get("id").cloned();
            continue;
        }
        let id = match (message.get("method"), asked.take()) {
            (None, Some(id)) => Some(id),
            (_, asked_before) => {
                asked = asked_before;
                message.get("id").cloned()
            }
        };
        if let Some(id) = id {
            let reply = format!(r#"{{"jsonrpc":"2.0","id":{id},"result":null}}"#);
            let _ = write!(output, "Content-Length: {}\r\n\r\n{reply}", reply.len());
            replies += 1;
        }
        let sooner = replies.is_multiple_of(REPLIES_PER_WRITE) && !output.buffer().is_empty();
        if (input.buffer().is_empty() || sooner) && output.flush().is_err() {
            return;
        }
    }
}
