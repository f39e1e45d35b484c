//! Frames on the byte stream: the LSP base protocol (`Content-Length` headers) and
//! newline-delimited JSON, chosen by the first byte in `auto` mode. The reader never
//! buffers more than the frame limit: an oversized frame is read past, keeping only its
//! first bytes to find the request id for the error reply.

use std::io::{self, BufRead, Read};
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

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

    /// Appends `body` to `out` as one frame.
    pub fn encode(self, body: &[u8], out: &mut Vec<u8>) {
        match self {
            Framing::Lsp => {
                out.extend_from_slice(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes());
                out.extend_from_slice(body);
            }
            Framing::Ndjson => {
                out.extend_from_slice(body);
                out.push(b'\n');
            }
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

pub struct FrameReader<R> {
    input: R,
    framing: Arc<FramingCell>,
    max: usize,
    /// After malformed headers: skip input up to the next `Content-Length:`.
    resync: bool,
}

impl<R: BufRead> FrameReader<R> {
    /// `framing` holds the configured framing, or nothing to detect it (`auto`).
    pub fn new(input: R, framing: Arc<FramingCell>, max: usize) -> Self {
        FrameReader { input, framing, max, resync: false }
    }

    /// The next frame; `None` at the end of input (also when it ends inside a frame).
    pub fn next_frame(&mut self) -> io::Result<Option<Incoming>> {
        let framing = match self.framing.get() {
            Some(f) => f,
            None => match self.detect()? {
                Some(f) => f,
                None => return Ok(None),
            },
        };
        match framing {
            Framing::Lsp => self.next_lsp(),
            Framing::Ndjson => self.next_ndjson(),
        }
    }

    /// After optional whitespace, `{` or `[` selects NDJSON and anything else LSP.
    fn detect(&mut self) -> io::Result<Option<Framing>> {
        loop {
            let buf = self.input.fill_buf()?;
            if buf.is_empty() {
                return Ok(None);
            }
            let blank = buf.iter().take_while(|b| b.is_ascii_whitespace()).count();
            if blank < buf.len() {
                let framing = if matches!(buf[blank], b'{' | b'[') { Framing::Ndjson } else { Framing::Lsp };
                self.input.consume(blank);
                self.framing.set(framing);
                tracing::debug!(framing = framing.name(), "framing detected");
                return Ok(Some(framing));
            }
            self.input.consume(blank);
        }
    }

    /// Reads up to and past the next `\n`, keeping at most `cap` bytes of the line
    /// (without the `\n`) in `kept`. Returns the line's full length and whether a `\n`
    /// ended it (false at the end of input).
    fn read_line(&mut self, cap: usize, kept: &mut Vec<u8>) -> io::Result<(usize, bool)> {
        kept.clear();
        let mut total = 0;
        loop {
            let buf = self.input.fill_buf()?;
            if buf.is_empty() {
                return Ok((total, false));
            }
            let (chunk, newline) = match memchr::memchr(b'\n', buf) {
                Some(i) => (&buf[..i], true),
                None => (buf, false),
            };
            let room = cap.saturating_sub(kept.len());
            kept.extend_from_slice(&chunk[..chunk.len().min(room)]);
            total += chunk.len();
            let used = chunk.len() + usize::from(newline);
            self.input.consume(used);
            if newline {
                return Ok((total, true));
            }
        }
    }

    fn next_ndjson(&mut self) -> io::Result<Option<Incoming>> {
        let mut line = Vec::new();
        loop {
            // Past the limit, only the first bytes are kept, to find the id.
            let (total, newline) = self.read_line(self.max.max(ID_PREFIX), &mut line)?;
            if total == 0 && !newline {
                return Ok(None);
            }
            if total > self.max {
                let id = request_id(&line[..line.len().min(ID_PREFIX)]);
                return Ok(Some(Incoming::TooLarge { id, size: total as u64 }));
            }
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            if !newline {
                tracing::debug!("input ended without a final newline");
            }
            while line.last().is_some_and(u8::is_ascii_whitespace) {
                line.pop();
            }
            return Ok(Some(Incoming::Frame(line)));
        }
    }

    fn next_lsp(&mut self) -> io::Result<Option<Incoming>> {
        let mut line = Vec::new();
        let mut length: Option<Result<u64, String>> = None;
        let mut lines = 0;
        loop {
            // While resynchronising, a body may run on into the next header on one line.
            let cap = if self.resync { self.max } else { MAX_HEADER_LINE };
            let (total, newline) = self.read_line(cap, &mut line)?;
            if !newline {
                if total > 0 || lines > 0 {
                    tracing::warn!("input ended inside a frame header");
                }
                return Ok(None);
            }
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            if self.resync {
                match find_content_length(&line) {
                    Some(at) => {
                        line.drain(..at);
                        self.resync = false;
                    }
                    None => continue,
                }
            }
            if line.is_empty() {
                if lines == 0 {
                    continue; // a stray blank line between frames
                }
                break;
            }
            lines += 1;
            if lines > MAX_HEADER_LINES {
                return Ok(Some(self.malformed("too many header lines")));
            }
            if total > cap {
                return Ok(Some(self.malformed("header line too long")));
            }
            match header(&line) {
                Some(("content-length", value)) => length = Some(parse_length(value)),
                Some(_) => {}
                None => tracing::warn!(line = %String::from_utf8_lossy(&line), "ignoring a malformed header line"),
            }
        }
        let length = match length {
            Some(Ok(n)) => n,
            Some(Err(e)) => return Ok(Some(self.malformed(&e))),
            None => return Ok(Some(self.malformed("missing Content-Length header"))),
        };
        if length > self.max as u64 {
            return self.skip_body(length);
        }
        let mut body = Vec::new();
        (&mut self.input).take(length).read_to_end(&mut body)?;
        if (body.len() as u64) < length {
            tracing::warn!(expected = length, got = body.len(), "input ended inside a frame body");
            return Ok(None);
        }
        Ok(Some(Incoming::Frame(body)))
    }

    fn malformed(&mut self, why: &str) -> Incoming {
        tracing::warn!(why, "malformed frame header; skipping to the next Content-Length");
        self.resync = true;
        Incoming::Malformed(why.to_owned())
    }

    fn skip_body(&mut self, length: u64) -> io::Result<Option<Incoming>> {
        let mut prefix = Vec::new();
        (&mut self.input).take(length.min(ID_PREFIX as u64)).read_to_end(&mut prefix)?;
        let rest = length - prefix.len() as u64;
        let skipped = io::copy(&mut (&mut self.input).take(rest), &mut io::sink())?;
        if skipped < rest {
            tracing::warn!(length, "input ended inside an oversized frame");
            return Ok(None);
        }
        Ok(Some(Incoming::TooLarge { id: request_id(&prefix), size: length }))
    }
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

fn parse_length(value: &[u8]) -> Result<u64, String> {
    std::str::from_utf8(value)
        .ok()
        .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|v| v.parse::<u64>().ok())
        .ok_or_else(|| format!("invalid Content-Length {:?}", String::from_utf8_lossy(value)))
}

fn find_content_length(line: &[u8]) -> Option<usize> {
    const NEEDLE: &[u8] = b"content-length:";
    // The last one: a skipped body may mention the header name in a string.
    line.windows(NEEDLE.len()).rposition(|w| w.eq_ignore_ascii_case(NEEDLE))
}

/// The `id` member of a JSON object, as JSON text, read from the object's first bytes
/// (which may be cut off). Only a string or number id counts.
pub fn request_id(prefix: &[u8]) -> Option<String> {
    let mut s = Scanner { b: prefix, i: 0 };
    s.ws();
    s.eat(b'{')?;
    loop {
        s.ws();
        let key = s.string()?;
        s.ws();
        s.eat(b':')?;
        s.ws();
        let start = s.i;
        s.value()?;
        let value = &prefix[start..s.i];
        if key == b"\"id\"" {
            return match serde_json::from_slice::<serde_json::Value>(value).ok()? {
                serde_json::Value::String(_) | serde_json::Value::Number(_) => {
                    Some(String::from_utf8_lossy(value).into_owned())
                }
                _ => None,
            };
        }
        s.ws();
        s.eat(b',')?;
    }
}

/// Just enough of a JSON tokenizer to step over members of an object.
struct Scanner<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Scanner<'a> {
    fn ws(&mut self) {
        while self.b.get(self.i).is_some_and(u8::is_ascii_whitespace) {
            self.i += 1;
        }
    }

    fn eat(&mut self, c: u8) -> Option<()> {
        (self.b.get(self.i) == Some(&c)).then(|| self.i += 1)
    }

    fn string(&mut self) -> Option<&'a [u8]> {
        let start = self.i;
        self.eat(b'"')?;
        loop {
            match *self.b.get(self.i)? {
                b'\\' => self.i += 2,
                b'"' => {
                    self.i += 1;
                    return Some(&self.b[start..self.i]);
                }
                _ => self.i += 1,
            }
        }
    }

    fn value(&mut self) -> Option<()> {
        match *self.b.get(self.i)? {
            b'"' => self.string().map(drop),
            b'{' | b'[' => {
                let mut depth = 0usize;
                loop {
                    match *self.b.get(self.i)? {
                        b'"' => {
                            self.string()?;
                            continue;
                        }
                        b'{' | b'[' => depth += 1,
                        b'}' | b']' => {
                            depth -= 1;
                            if depth == 0 {
                                self.i += 1;
                                return Some(());
                            }
                        }
                        _ => {}
                    }
                    self.i += 1;
                }
            }
            _ => {
                let start = self.i;
                while self.b.get(self.i).is_some_and(|c| !matches!(c, b',' | b'}' | b']') && !c.is_ascii_whitespace()) {
                    self.i += 1;
                }
                (self.i > start && self.i < self.b.len()).then_some(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader that hands out one byte per read, like a slow pipe.
    struct Trickle<'a>(&'a [u8]);

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            match (self.0.split_first(), buf.first_mut()) {
                (Some((b, rest)), Some(slot)) => {
                    *slot = *b;
                    self.0 = rest;
                    Ok(1)
                }
                _ => Ok(0),
            }
        }
    }

    fn frames(input: &[u8], framing: Option<Framing>, max: usize) -> (Vec<Incoming>, Option<Framing>) {
        let cell = FramingCell::new(framing);
        let mut reader = FrameReader::new(io::BufReader::with_capacity(1, Trickle(input)), cell.clone(), max);
        let mut out = Vec::new();
        while let Some(f) = reader.next_frame().unwrap() {
            out.push(f);
        }
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

    #[test]
    fn request_ids_from_prefixes() {
        assert_eq!(request_id(br#"{"jsonrpc":"2.0","id":"a\"b","method":"m"}"#).as_deref(), Some(r#""a\"b""#));
        assert_eq!(request_id(br#"{"params":{"id":1,"x":[{"id":2}]},"id":3,"#).as_deref(), Some("3"));
        assert_eq!(request_id(br#"{"params":{"id":1},"method":"m","#), None);
        assert_eq!(request_id(br#"{"id":12"#), None, "a number cut off is not an id");
        assert_eq!(request_id(br#"{"id":null}"#), None);
        assert_eq!(request_id(b"[1,2]"), None);
    }
}
