//! The best rate the pipe allows, as a check on `convo-bench`: the tightest client we
//! could write, for the echo floor. It writes the missing part of a window of identical,
//! pre-rendered requests in one `write`, reads replies in 64 KiB reads and only counts
//! them (a header scan, no parsing of bodies). `convo-bench` is lean enough when the
//! echo's rate through it is within 10% of this one's (BENCHMARKS.md).
//!
//! ```text
//! pipe-floor N WINDOW -- COMMAND [ARGS...]
//! ```

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(n), Some(window), Some(cmd)) = (
        args.first().and_then(|a| a.parse::<usize>().ok()),
        args.get(1).and_then(|a| a.parse::<usize>().ok()),
        args.iter().position(|a| a == "--").map(|i| &args[i + 1..]),
    ) else {
        eprintln!("usage: pipe-floor N WINDOW -- COMMAND [ARGS...]");
        std::process::exit(2);
    };
    let mut child = Command::new(&cmd[0]).args(&cmd[1..]).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
    let (mut input, mut output) = (child.stdin.take().unwrap(), child.stdout.take().unwrap());
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"session/add_user","params":{"session_id":"s","text":"hello"}}"#;
    let frame = format!("Content-Length: {}\r\n\r\n{body}", body.len());
    let frames = frame.repeat(window);
    let mut buf = vec![0; 1 << 16];
    let mut counter = Counter::default();
    let started = Instant::now();
    let (mut sent, mut received) = (0, 0);
    while received < n {
        let k = (window - (sent - received)).min(n - sent);
        if k > 0 {
            input.write_all(&frames.as_bytes()[..k * frame.len()]).unwrap();
            sent += k;
        }
        let got = output.read(&mut buf).unwrap();
        assert!(got > 0, "the server closed its output");
        received += counter.feed(&buf[..got]);
    }
    let took = started.elapsed();
    println!("{:.0} req/s", n as f64 / took.as_secs_f64());
    drop(input);
    let _ = child.wait();
}

/// Counts LSP frames in a byte stream fed in arbitrary pieces.
#[derive(Default)]
struct Counter {
    header: Vec<u8>,
    /// The length the last `Content-Length` header gave.
    length: usize,
    /// Body bytes still to skip.
    skip: usize,
}

impl Counter {
    fn feed(&mut self, mut bytes: &[u8]) -> usize {
        let mut frames = 0;
        while !bytes.is_empty() {
            if self.skip > 0 {
                let k = self.skip.min(bytes.len());
                self.skip -= k;
                bytes = &bytes[k..];
                if self.skip == 0 {
                    frames += 1;
                }
                continue;
            }
            let Some(newline) = bytes.iter().position(|&b| b == b'\n') else {
                self.header.extend_from_slice(bytes);
                break;
            };
            self.header.extend_from_slice(&bytes[..=newline]);
            bytes = &bytes[newline + 1..];
            if self.header == b"\r\n" {
                self.skip = self.length;
            } else if let Some(v) = self.header.strip_prefix(b"Content-Length: ") {
                self.length = std::str::from_utf8(v).unwrap().trim().parse().unwrap();
            }
            self.header.clear();
        }
        frames
    }
}
