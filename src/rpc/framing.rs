//! Frames on the byte stream: the LSP base protocol (`Content-Length` headers) and
//! newline-delimited JSON, chosen by the first byte in `auto` mode. The reader never
//! buffers more than the frame limit: an oversized frame is read past, keeping only its
//! first bytes to find the request id for the error reply (`envelope::request_id`).

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use crate::error::quote;
use crate::rpc::envelope::request_id;

/// How many leading bytes of an oversized frame are kept to find its id.
const ID_PREFIX: usize = 64 * 1024;
/// The longest header line kept; a longer one makes the header block malformed.
const MAX_HEADER_LINE: usize = 8 * 1024;
/// The most header lines one frame may have.
const MAX_HEADER_LINES: usize = 64;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Framing {
    Lsp,
    Ndjson,
}

impl Framing {
    pub fn name(self) -> &'static str {
        match self {
            Framing::Lsp => "lsp",
            Framing::Ndjson => "ndjson",
        }
    }

    /// Appends what goes before a body of `length` bytes to `out`.
    pub fn open(self, length: usize, out: &mut Vec<u8>) {
        if self == Framing::Lsp {
            out.extend_from_slice(b"Content-Length: ");
            out.extend_from_slice(itoa::Buffer::new().format(length).as_bytes());
            out.extend_from_slice(b"\r\n\r\n");
        }
    }

    /// Appends what goes after a body to `out`.
    pub fn close(self, out: &mut Vec<u8>) {
        if self == Framing::Ndjson {
            out.push(b'\n');
        }
    }
}

/// The framing of the connection, shared by reader and writer: unknown until the
/// first byte arrives in `auto` mode. Replies use the framing the client used.
#[derive(Debug, Default)]
pub struct FramingCell(AtomicU8);

impl FramingCell {
    pub fn new(framing: Option<Framing>) -> Arc<Self> {
        let cell = Arc::new(FramingCell::default());
        if let Some(f) = framing {
            cell.set(f);
        }
        cell
    }

    pub fn set(&self, framing: Framing) {
        self.0.store(framing as u8 + 1, Ordering::Release);
    }

    pub fn get(&self) -> Option<Framing> {
        match self.0.load(Ordering::Acquire) {
            1 => Some(Framing::Lsp),
            2 => Some(Framing::Ndjson),
            _ => None,
        }
    }
}

/// What the reader found next on the stream.
#[derive(Debug, PartialEq, Eq)]
pub enum Incoming {
    /// One frame's body, not yet parsed.
    Frame(Vec<u8>),
    /// A frame over the limit, read past; `id` is its request id as JSON text, when the
    /// first bytes held one.
    TooLarge { id: Option<String>, size: u64 },
    /// Headers that give no usable length; the reader skips ahead to the next header.
    Malformed(String),
}

/// A push decoder ("sans IO"): bytes go in as they arrive, in pieces of any size, and
/// whole frames come out. It holds at most one frame (up to the limit) and one header
/// line; an oversized frame is counted past, keeping only its first bytes.
pub struct Decoder {
    framing: Arc<FramingCell>,
    max: usize,
    state: State,
    /// The body or NDJSON line being gathered: handed out whole as a frame.
    buf: Vec<u8>,
    /// The header line being gathered; its room serves the next one.
    line: Vec<u8>,
}

enum State {
    /// Waiting for the first byte that is not whitespace, to choose the framing.
    Detect,
    Line,
    /// An NDJSON line over the limit: read past up to its newline.
    LongLine {
        prefix: Vec<u8>,
        size: u64,
    },
    /// LSP headers; `lines` so far, the `Content-Length` seen, a line too long to keep.
    Headers {
        lines: usize,
        length: Option<Result<u64, String>>,
        long: bool,
    },
    /// After malformed headers: skip lines up to one holding `Content-Length:`.
    Resync,
    Body {
        length: usize,
    },
    /// An LSP body over the limit: read past it.
    Skip {
        remaining: u64,
        prefix: Vec<u8>,
        size: u64,
    },
}

impl Decoder {
    /// `framing` holds the configured framing, or nothing to detect it (`auto`).
    pub fn new(framing: Arc<FramingCell>, max: usize) -> Self {
        let state = match framing.get() {
            None => State::Detect,
            Some(Framing::Lsp) => State::headers(),
            Some(Framing::Ndjson) => State::Line,
        };
        Decoder { framing, max, state, buf: Vec::new(), line: Vec::new() }
    }

    /// Takes the next bytes of the stream; appends every frame they complete to `out`.
    pub fn push(&mut self, mut input: &[u8], out: &mut Vec<Incoming>) {
        while !input.is_empty() {
            let used = self.step(input, out);
            input = &input[used..];
        }
    }

    /// The end of input: a last NDJSON line without its newline still counts.
    pub fn finish(&mut self, out: &mut Vec<Incoming>) {
        match &self.state {
            State::Line if !self.buf.iter().all(u8::is_ascii_whitespace) => {
                tracing::debug!("input ended without a final newline");
                out.push(Incoming::Frame(trimmed(std::mem::take(&mut self.buf))));
            }
            State::Detect | State::Line | State::Resync => {}
            State::Headers { lines: 0, long: false, .. } if self.line.is_empty() => {}
            _ => tracing::warn!("input ended inside a frame"),
        }
    }

    /// Consumes some of `input` (at least one byte); returns how much.
    fn step(&mut self, input: &[u8], out: &mut Vec<Incoming>) -> usize {
        match &mut self.state {
            State::Detect => {
                let blank = input.iter().take_while(|b| b.is_ascii_whitespace()).count();
                if blank < input.len() {
                    let framing = if matches!(input[blank], b'{' | b'[') { Framing::Ndjson } else { Framing::Lsp };
                    self.framing.set(framing);
                    tracing::debug!(framing = framing.name(), "framing detected");
                    self.state = if framing == Framing::Lsp { State::headers() } else { State::Line };
                }
                blank.max(usize::from(blank == input.len()))
            }
            State::Line => {
                let newline = memchr::memchr(b'\n', input);
                let chunk = &input[..newline.unwrap_or(input.len())];
                if self.buf.len() + chunk.len() > self.max {
                    let size = (self.buf.len() + chunk.len()) as u64;
                    let mut prefix = std::mem::take(&mut self.buf);
                    prefix.truncate(ID_PREFIX);
                    let room = ID_PREFIX - prefix.len();
                    prefix.extend_from_slice(&chunk[..chunk.len().min(room)]);
                    self.state = State::LongLine { prefix, size };
                    if newline.is_some() {
                        self.end_long_line(out);
                    }
                    return chunk.len() + usize::from(newline.is_some());
                }
                self.buf.extend_from_slice(chunk);
                if newline.is_some() {
                    let line = std::mem::take(&mut self.buf);
                    if !line.iter().all(u8::is_ascii_whitespace) {
                        out.push(Incoming::Frame(trimmed(line)));
                    }
                }
                chunk.len() + usize::from(newline.is_some())
            }
            State::LongLine { prefix, size } => {
                let newline = memchr::memchr(b'\n', input);
                let chunk = &input[..newline.unwrap_or(input.len())];
                let room = ID_PREFIX.saturating_sub(prefix.len()).min(chunk.len());
                prefix.extend_from_slice(&chunk[..room]);
                *size += chunk.len() as u64;
                if newline.is_some() {
                    self.end_long_line(out);
                }
                chunk.len() + usize::from(newline.is_some())
            }
            State::Body { length } => {
                let take = (*length - self.buf.len()).min(input.len());
                self.buf.reserve_exact(*length - self.buf.len());
                self.buf.extend_from_slice(&input[..take]);
                if self.buf.len() == *length {
                    out.push(Incoming::Frame(std::mem::take(&mut self.buf)));
                    self.state = State::headers();
                }
                take
            }
            State::Skip { remaining, prefix, size } => {
                let take = (*remaining).min(input.len() as u64) as usize;
                let room = ID_PREFIX.saturating_sub(prefix.len()).min(take);
                prefix.extend_from_slice(&input[..room]);
                *remaining -= take as u64;
                if *remaining == 0 {
                    out.push(Incoming::TooLarge { id: request_id(prefix), size: *size });
                    self.state = State::headers();
                }
                take
            }
            // Nearly every frame's header, whole in one read: taken at once.
            State::Headers { lines: 0, length: None, long: false } if self.line.is_empty() => {
                match plain_header(input) {
                    Some((length, used)) => {
                        self.state = State::Headers { lines: 1, length: Some(Ok(length)), long: false };
                        self.end_headers(out);
                        used
                    }
                    None => self.header_bytes(input, out),
                }
            }
            State::Headers { .. } | State::Resync => self.header_bytes(input, out),
        }
    }

    /// Ends an NDJSON line over the limit at its newline.
    fn end_long_line(&mut self, out: &mut Vec<Incoming>) {
        if let State::LongLine { prefix, size } = std::mem::replace(&mut self.state, State::Line) {
            out.push(Incoming::TooLarge { id: request_id(&prefix), size });
        }
    }

    /// Gathers one header line (at most `MAX_HEADER_LINE` bytes of it, or the limit
    /// while resynchronising, where a body may run on into the next header).
    fn header_bytes(&mut self, input: &[u8], out: &mut Vec<Incoming>) -> usize {
        let cap = if matches!(self.state, State::Resync) { self.max } else { MAX_HEADER_LINE };
        let newline = memchr::memchr(b'\n', input);
        let chunk = &input[..newline.unwrap_or(input.len())];
        let room = cap.saturating_sub(self.line.len()).min(chunk.len());
        self.line.extend_from_slice(&chunk[..room]);
        if room < chunk.len()
            && let State::Headers { long, .. } = &mut self.state
        {
            *long = true;
        }
        if newline.is_some() {
            let mut line = std::mem::take(&mut self.line);
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            self.header_line(&mut line, out);
            // A resynchronisation's long line is let go.
            if line.capacity() <= MAX_HEADER_LINE {
                line.clear();
                self.line = line;
            }
        }
        chunk.len() + usize::from(newline.is_some())
    }

    fn header_line(&mut self, line: &mut Vec<u8>, out: &mut Vec<Incoming>) {
        if matches!(self.state, State::Resync) {
            let Some(at) = find_content_length(line) else { return };
            line.drain(..at);
            self.state = State::headers();
        }
        let State::Headers { lines, length, long } = &mut self.state else { return };
        if std::mem::take(long) {
            return self.malformed("header line too long", out);
        }
        if line.is_empty() {
            if *lines > 0 {
                self.end_headers(out);
            }
            return; // a stray blank line between frames
        }
        *lines += 1;
        if *lines > MAX_HEADER_LINES {
            return self.malformed("too many header lines", out);
        }
        match header(line) {
            Some(("content-length", value)) => *length = Some(parse_length(value)),
            Some(_) => {}
            None => tracing::warn!(line = %String::from_utf8_lossy(line), "ignoring a malformed header line"),
        }
    }

    fn end_headers(&mut self, out: &mut Vec<Incoming>) {
        let State::Headers { length, .. } = std::mem::replace(&mut self.state, State::headers()) else { return };
        match length {
            Some(Ok(n)) if n > self.max as u64 => {
                self.state = State::Skip { remaining: n, prefix: Vec::new(), size: n };
            }
            Some(Ok(0)) => out.push(Incoming::Frame(Vec::new())),
            Some(Ok(n)) => self.state = State::Body { length: n as usize },
            Some(Err(e)) => self.malformed(&e, out),
            None => self.malformed("missing Content-Length header", out),
        }
    }

    fn malformed(&mut self, why: &str, out: &mut Vec<Incoming>) {
        tracing::warn!(why, "malformed frame header; skipping to the next Content-Length");
        self.state = State::Resync;
        out.push(Incoming::Malformed(why.to_owned()));
    }
}

impl State {
    fn headers() -> Self {
        State::Headers { lines: 0, length: None, long: false }
    }
}

fn trimmed(mut line: Vec<u8>) -> Vec<u8> {
    while line.last().is_some_and(u8::is_ascii_whitespace) {
        line.pop();
    }
    line
}

/// `Name: value` with a token name, the name lowercased.
fn header(line: &[u8]) -> Option<(&'static str, &[u8])> {
    let colon = line.iter().position(|&b| b == b':')?;
    let name = &line[..colon];
    if name.is_empty() || !name.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'-') {
        return None;
    }
    let value = line[colon + 1..].trim_ascii();
    if name.eq_ignore_ascii_case(b"content-length") { Some(("content-length", value)) } else { Some(("other", value)) }
}

/// The header every client writes, whole at the start of `input`: exactly
/// `Content-Length: N\r\n\r\n`, N of at most 19 digits. Its length, and the bytes it
/// takes; anything else is left to `header_bytes`, which reads it to the same effect.
fn plain_header(input: &[u8]) -> Option<(u64, usize)> {
    const NAME: &[u8] = b"Content-Length: ";
    let rest = input.strip_prefix(NAME)?;
    let digits = rest.iter().take(20).take_while(|b| b.is_ascii_digit()).count();
    if !(1..=19).contains(&digits) || rest.get(digits..digits + 4)? != b"\r\n\r\n" {
        return None;
    }
    let length = rest[..digits].iter().fold(0, |n, &b| n * 10 + u64::from(b - b'0'));
    Some((length, NAME.len() + digits + 4))
}

fn parse_length(value: &[u8]) -> Result<u64, String> {
    std::str::from_utf8(value)
        .ok()
        .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|v| v.parse::<u64>().ok())
        .ok_or_else(|| format!("invalid Content-Length {}", quote(&String::from_utf8_lossy(value))))
}

fn find_content_length(line: &[u8]) -> Option<usize> {
    const NEEDLE: &[u8] = b"content-length:";
    // The last one: a skipped body may mention the header name in a string.
    line.windows(NEEDLE.len()).rposition(|w| w.eq_ignore_ascii_case(NEEDLE))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lsp_header_gives_the_length_in_decimal() {
        for length in [0, 7, 10, 99, 1_234_567, usize::MAX] {
            let mut out = b"x".to_vec();
            Framing::Lsp.open(length, &mut out);
            assert_eq!(out, format!("xContent-Length: {length}\r\n\r\n").into_bytes());
        }
        let mut out = Vec::new();
        Framing::Ndjson.open(12, &mut out);
        assert!(out.is_empty());
    }

    /// Feeds `input` one byte at a time, as a slow pipe would, then ends it.
    fn frames(input: &[u8], framing: Option<Framing>, max: usize) -> (Vec<Incoming>, Option<Framing>) {
        let cell = FramingCell::new(framing);
        let mut decoder = Decoder::new(cell.clone(), max);
        let mut out = Vec::new();
        for byte in input.chunks(1) {
            decoder.push(byte, &mut out);
        }
        decoder.finish(&mut out);
        // Whole, in one piece, it decodes the same.
        let mut whole = Decoder::new(FramingCell::new(framing), max);
        let mut again = Vec::new();
        whole.push(input, &mut again);
        whole.finish(&mut again);
        assert_eq!(out, again);
        (out, cell.get())
    }

    fn frame(s: &str) -> Incoming {
        Incoming::Frame(s.as_bytes().to_vec())
    }

    #[test]
    fn lsp_one_byte_at_a_time() {
        let input = b"Content-Length: 2\r\n\r\n{}content-length:3\nContent-Type: application/vscode-jsonrpc; charset=utf8\n\n[1]";
        let (got, framing) = frames(input, None, 100);
        assert_eq!(got, [frame("{}"), frame("[1]")]);
        assert_eq!(framing, Some(Framing::Lsp));
    }

    #[test]
    fn ndjson_detected_and_split() {
        let (got, framing) = frames(b"  \n{\"a\":1}\r\n\n[2]\n{\"tail\":3}", None, 100);
        assert_eq!(got, [frame("{\"a\":1}"), frame("[2]"), frame("{\"tail\":3}")]);
        assert_eq!(framing, Some(Framing::Ndjson));
    }

    #[test]
    fn oversized_frames_are_skipped_with_their_id() {
        let big = format!("{{\"jsonrpc\":\"2.0\",\"id\":7,\"params\":\"{}\"}}", "x".repeat(50));
        let input = format!("Content-Length: {}\r\n\r\n{big}Content-Length: 2\r\n\r\n{{}}", big.len());
        let (got, _) = frames(input.as_bytes(), None, 20);
        assert_eq!(got, [Incoming::TooLarge { id: Some("7".into()), size: big.len() as u64 }, frame("{}")]);
        let (got, _) = frames(format!("{big}\n{{}}\n").as_bytes(), None, 20);
        assert_eq!(got, [Incoming::TooLarge { id: Some("7".into()), size: big.len() as u64 }, frame("{}")]);
    }

    #[test]
    fn absurd_length_reads_to_the_end() {
        let (got, _) = frames(b"Content-Length: 99999999999999\r\n\r\n{\"id\":\"a\"", None, 100);
        assert_eq!(got, []);
        let (got, _) = frames(b"Content-Length: 999999999999999999999999\r\n\r\n{}", None, 100);
        assert!(matches!(&got[..], [Incoming::Malformed(_)]));
    }

    /// The header taken at once (`plain_header`) and every other header read line by line
    /// give the same frames: `frames` reads each input one byte at a time, where no
    /// header is whole, and whole.
    #[test]
    fn a_plain_header_is_read_as_any_other() {
        assert_eq!(plain_header(b"Content-Length: 2\r\n\r\n{}"), Some((2, 21)));
        assert_eq!(plain_header(b"Content-Length: 0009999999999999999999\r\n\r\n"), None);
        for header in [
            "Content-Length: 2\r\n\r\n",
            "Content-Length: 02\r\n\r\n",
            "Content-Length: 0000000000000000002\r\n\r\n",
            "Content-Length: 00000000000000000002\r\n\r\n",
            "content-length: 2\r\n\r\n",
            "Content-Length:2\r\n\r\n",
            "Content-Length: 2 \r\n\r\n",
            "Content-Length: 2\n\n",
            "Content-Length: 2\r\nContent-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n",
        ] {
            let (got, _) =
                frames(format!("{header}{{}}Content-Length: 3\r\n\r\n[1]").as_bytes(), Some(Framing::Lsp), 100);
            assert_eq!(got, [frame("{}"), frame("[1]")], "{header:?}");
        }
        for (header, why) in [
            ("Content-Length: \r\n\r\n", "invalid Content-Length \"\""),
            ("Content-Length: 99999999999999999999\r\n\r\n", "invalid Content-Length \"99999999999999999999\""),
        ] {
            let (got, _) =
                frames(format!("{header}{{}}Content-Length: 3\r\n\r\n[1]").as_bytes(), Some(Framing::Lsp), 100);
            assert_eq!(got, [Incoming::Malformed(why.into()), frame("[1]")], "{header:?}");
        }
        let (got, _) = frames(b"Content-Length: 0\r\n\r\nContent-Length: 200\r\n\r\n", Some(Framing::Lsp), 100);
        assert_eq!(got, [frame("")]);
    }

    #[test]
    fn garbage_headers_resync_at_the_next_frame() {
        let input = b"Hello there\r\nX: y\r\n\r\n{\"junk\":1}Content-Length: 2\r\n\r\n{}";
        let (got, _) = frames(input, Some(Framing::Lsp), 100);
        assert_eq!(got, [Incoming::Malformed("missing Content-Length header".into()), frame("{}")]);
    }

    #[test]
    fn ends_inside_a_frame() {
        assert_eq!(frames(b"Content-Length: 10\r\n\r\n{\"a\"", None, 100).0, []);
        assert_eq!(frames(b"Content-Len", None, 100).0, []);
    }
}
