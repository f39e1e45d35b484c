//! Every JSON message the server writes is built here: replies (the method's result,
//! serialized once, with the client's id spliced in), error replies, and the server's own
//! requests and notifications to the client.

use std::io;

use jsonrpsee_types::ErrorObjectOwned;
use serde::Serialize;

use crate::rpc::error::{INTERNAL_ERROR, plain, reply_too_large};
use crate::rpc::writer::{Part, Reply};
use crate::session::json::needs_escape;
use crate::store::MessageJson;

/// The longest result copied into its reply's head rather than written as a part.
const INLINE_MAX: usize = 64 * 1024;
/// A message text at least this long is written from where the store keeps it; a
/// shorter one is copied, which costs less than one more slice for the kernel to walk.
const SHARE_MIN: usize = 512;

/// How many bytes `write` sets aside for a result's text at first.
const FIRST_BUFFER: usize = 256;

/// A method's outcome: its result's JSON text (`Written`), or its error.
pub type Outcome = Result<Written, ErrorObjectOwned>;

/// A result's JSON text as `write` leaves it: one text, as nearly every result is, or in
/// pieces, the store's message texts among them (`Splice`).
#[derive(Debug)]
pub enum Written {
    Text(String),
    Parts(Vec<Part>),
}

impl Written {
    /// The whole text.
    #[cfg(test)]
    pub fn text(&self) -> String {
        match self {
            Written::Text(text) => text.clone(),
            Written::Parts(parts) => parts.iter().map(Part::text).collect(),
        }
    }
}

/// The reply to the request `id` (JSON text, as the client wrote it: negative and
/// fractional numbers included); a reply over `max` bytes is replaced by error 1005.
pub fn with_id(id: &str, outcome: Outcome, max: usize) -> Reply {
    let reply = match outcome {
        Ok(written) => {
            const OPEN: &str = r#"{"jsonrpc":"2.0","id":"#;
            const RESULT: &str = r#","result":"#;
            let head = OPEN.len() + id.len() + RESULT.len();
            // The head, then the result's pieces.
            let in_pieces = |mut parts: Vec<Part>| {
                parts.push(Part::Static("}"));
                let mut reply = String::with_capacity(head);
                reply.extend([OPEN, id, RESULT]);
                Reply::new(reply, parts)
            };
            match written {
                // A short result goes in one piece with its head: in the result's own
                // buffer when that is the one `write` starts with and has room (an
                // append's has), so that the reply holds no more room than that.
                Written::Text(mut text) if text.capacity() <= FIRST_BUFFER && text.capacity() - text.len() > head => {
                    text.insert_str(0, RESULT);
                    text.insert_str(0, id);
                    text.insert_str(0, OPEN);
                    text.push('}');
                    text.into()
                }
                Written::Text(text) if text.len() <= INLINE_MAX => {
                    let mut reply = String::with_capacity(head + text.len() + 1);
                    reply.extend([OPEN, id, RESULT, &text, "}"]);
                    reply.into()
                }
                Written::Text(text) => in_pieces(vec![Part::Text(text)]),
                Written::Parts(parts) => in_pieces(parts),
            }
        }
        Err(error) => error_reply(Some(id), error).into(),
    };
    if reply.len() > max {
        return error_reply(Some(id), reply_too_large(max)).into();
    }
    reply
}

/// A method's result as it goes into its reply: serialized, or (`Splice`) in pieces.
pub trait MethodResult: Send + 'static {
    /// Its JSON text, or error 1005 once it is over `max` bytes.
    fn write(self, max: usize) -> Outcome;
}

impl<T: Serialize + Send + 'static> MethodResult for T {
    fn write(self, max: usize) -> Outcome {
        write(max, |pieces| pieces.json(&self))
    }
}

/// A result that writes its own JSON text in pieces, the store's message texts among
/// them as they are kept. Its text must be what it serializes to.
pub trait Splice {
    fn splice(self, into: &mut Pieces) -> Result<(), ErrorObjectOwned>;
}

/// A method's result as JSON text in pieces, as `write` puts it in `Pieces`, for `with_id`
/// to put into the reply: serialized once, and a history's message texts not copied at
/// all (`Splice`). Serializing stops at the reply limit.
pub fn write(max: usize, write: impl FnOnce(&mut Pieces) -> Result<(), ErrorObjectOwned>) -> Outcome {
    let mut pieces = Pieces { parts: Vec::new(), open: Vec::with_capacity(FIRST_BUFFER), len: 0, max };
    write(&mut pieces)?;
    if pieces.len > max {
        return Err(reply_too_large(max));
    }
    Ok(pieces.finish())
}

/// A result's JSON text as it is written: text serialized here, and message texts the
/// store keeps, shared rather than copied (`writer::Part::Shared`).
pub struct Pieces {
    parts: Vec<Part>,
    /// The text after the last shared part.
    open: Vec<u8>,
    len: usize,
    max: usize,
}

impl Pieces {
    /// Appends JSON text.
    pub fn raw(&mut self, json: &'static str) {
        self.open.extend_from_slice(json.as_bytes());
        self.len += json.len();
    }

    /// Appends a JSON string, without serde_json's walk when nothing in it needs an escape
    /// (the reply limit is checked at the end, as for `raw`).
    pub fn string(&mut self, s: &str) -> Result<(), ErrorObjectOwned> {
        if needs_escape(s.as_bytes()) {
            return self.json(&s);
        }
        self.open.reserve(s.len() + 2);
        self.open.push(b'"');
        self.open.extend_from_slice(s.as_bytes());
        self.open.push(b'"');
        self.len += s.len() + 2;
        Ok(())
    }

    /// Appends a number (the reply limit is checked at the end, as for `raw`).
    pub fn number(&mut self, n: u64) {
        let mut digits = itoa::Buffer::new();
        let text = digits.format(n);
        self.open.extend_from_slice(text.as_bytes());
        self.len += text.len();
    }

    /// Appends `value` serialized; an error object once the text is over the reply limit.
    pub fn json(&mut self, value: &impl Serialize) -> Result<(), ErrorObjectOwned> {
        let before = self.open.len();
        let mut out = Bounded { buf: &mut self.open, max: before + self.max.saturating_sub(self.len) };
        match serde_json::to_writer(&mut out, value) {
            Ok(()) => {
                self.len += self.open.len() - before;
                Ok(())
            }
            Err(e) if e.is_io() => Err(reply_too_large(self.max)),
            Err(e) => Err(plain(INTERNAL_ERROR, format!("internal error: {e}"))),
        }
    }

    /// Appends a JSON array of the messages; an error object once the text is over the
    /// reply limit, so that a reply to be refused is not copied whole first. Messages
    /// spliced one after the other into one text (`MessageJson::join`) go as one piece.
    pub fn messages(&mut self, messages: Vec<MessageJson>) -> Result<(), ErrorObjectOwned> {
        self.raw("[");
        let mut last: Option<MessageJson> = None;
        for (i, message) in messages.into_iter().enumerate() {
            self.len += message.get().len() + usize::from(i > 0);
            if self.len > self.max {
                return Err(reply_too_large(self.max));
            }
            if last.as_mut().is_some_and(|last| last.join(&message)) {
                continue;
            }
            self.put(last.take());
            if i > 0 {
                self.open.push(b',');
            }
            last = Some(message);
        }
        self.put(last);
        self.raw("]");
        Ok(())
    }

    /// Appends a message's text (or several's, joined): copied when short, else shared.
    fn put(&mut self, message: Option<MessageJson>) {
        match message {
            Some(message) if message.get().len() < SHARE_MIN => self.open.extend_from_slice(message.get().as_bytes()),
            Some(message) => {
                self.close_text();
                self.parts.push(Part::Shared(message));
            }
            None => {}
        }
    }

    fn close_text(&mut self) {
        if !self.open.is_empty() {
            let text = self.take_text();
            self.parts.push(Part::Text(text));
        }
    }

    /// The text written since the last shared part.
    fn take_text(&mut self) -> String {
        // Bytes while written to (serde_json writes to bytes), all of them from `str`s
        // and serde_json; checked once here all the same, with SIMD (`simdutf8`: 85
        // instructions for an append's reply, where `String::from_utf8` took 150).
        let text = std::mem::take(&mut self.open);
        match simdutf8::basic::from_utf8(&text) {
            // SAFETY: `text` was found to be UTF-8 just now.
            Ok(_) => unsafe { String::from_utf8_unchecked(text) },
            Err(_) => {
                tracing::error!("a reply's text is not UTF-8");
                String::from_utf8_lossy(&text).into_owned()
            }
        }
    }

    fn finish(mut self) -> Written {
        if self.parts.is_empty() {
            return Written::Text(self.take_text());
        }
        self.close_text();
        Written::Parts(self.parts)
    }
}

/// A buffer that refuses to grow past `max` bytes.
struct Bounded<'a> {
    buf: &'a mut Vec<u8>,
    max: usize,
}

impl io::Write for Bounded<'_> {
    #[inline]
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.write_all(bytes).map(|()| bytes.len())
    }

    /// serde_json writes every token with this: all of it or none, without the loop of
    /// the default.
    #[inline]
    fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        if self.buf.len() + bytes.len() > self.max {
            return Err(io::Error::other("over the reply limit"));
        }
        self.buf.extend_from_slice(bytes);
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

pub fn error_reply(id: Option<&str>, error: ErrorObjectOwned) -> String {
    let error = serde_json::to_string(&error)
        .unwrap_or_else(|_| format!(r#"{{"code":{INTERNAL_ERROR},"message":"internal error"}}"#));
    format!(r#"{{"jsonrpc":"2.0","id":{},"error":{error}}}"#, id.unwrap_or("null"))
}

/// A request of the server to the client; `id` is JSON text (a string `"convo:N"`).
pub fn request(id: &str, method: &str, params: &impl Serialize) -> serde_json::Result<String> {
    Ok(format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":{},"params":{}}}"#,
        serde_json::to_string(method)?,
        serde_json::to_string(params)?
    ))
}

/// A notification of the server to the client.
pub fn notification(method: &str, params: &impl Serialize) -> serde_json::Result<String> {
    Ok(format!(
        r#"{{"jsonrpc":"2.0","method":{},"params":{}}}"#,
        serde_json::to_string(method)?,
        serde_json::to_string(params)?
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::value::RawValue;

    #[test]
    fn replies_carry_the_id_as_written() {
        assert_eq!(with_id("-1.5", 5.write(100), 100).into_string(), r#"{"jsonrpc":"2.0","id":-1.5,"result":5}"#);
        assert_eq!(
            with_id(r#""x""#, Err(plain(1001, "no")), 100).into_string(),
            r#"{"jsonrpc":"2.0","id":"x","error":{"code":1001,"message":"no"}}"#
        );
        let big = "x".repeat(100).write(usize::MAX);
        assert!(matches!(big, Ok(Written::Text(_))), "a result in one piece");
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&with_id("7", big, 100).into_string()).unwrap()["error"]["code"],
            1005,
            "a reply over the limit is refused"
        );
        assert_eq!("x".repeat(100).write(100).unwrap_err().code(), 1005, "and so is a result over it");
        assert_eq!(
            error_reply(None, plain(-32700, "bad")),
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"bad"}}"#
        );
    }

    #[test]
    fn messages_stop_at_the_reply_limit() {
        let message = || MessageJson::Read(RawValue::from_string(format!("\"{}\"", "x".repeat(40))).unwrap());
        let mut copied = 0;
        let refused = write(100, |pieces| {
            let refused = pieces.messages((0..1000).map(|_| message()).collect());
            copied = pieces.open.len();
            refused
        })
        .unwrap_err();
        assert_eq!(refused.code(), 1005);
        assert!(copied <= 100, "copied {copied} bytes of a reply it refuses");
        let written = write(100, |pieces| pieces.messages(vec![message(), message()])).unwrap();
        assert!(matches!(written, Written::Text(_)), "short texts copied: one piece");
        let text = written.text();
        assert_eq!(text, format!("[\"{x}\",\"{x}\"]", x = "x".repeat(40)));
    }

    #[test]
    fn messages_spliced_side_by_side_go_as_one_piece() {
        let long = |c: &str| format!("\"{}\"", c.repeat(SHARE_MIN));
        let text = std::sync::Arc::new(format!("{},{},{}", long("a"), long("b"), long("c")));
        let n = long("a").len();
        let spliced = |i: usize| MessageJson::Spliced { text: text.clone(), range: i * (n + 1)..i * (n + 1) + n };
        let read = MessageJson::Read(RawValue::from_string("true".into()).unwrap());
        // The third is beside the second in the text, but not in the array.
        let Written::Parts(parts) =
            write(usize::MAX, |pieces| pieces.messages(vec![spliced(0), spliced(1), read, spliced(2)])).unwrap()
        else {
            panic!("shared texts: in pieces");
        };
        let text: String = parts.iter().map(Part::text).collect();
        assert_eq!(text, format!("[{},{},true,{}]", long("a"), long("b"), long("c")));
        let lengths: Vec<usize> = parts.iter().map(|p| p.text().len()).collect();
        assert_eq!(lengths, [1, 2 * n + 1, 6, n, 1], "the first two in one piece, shared");
        assert!(matches!(parts[1], Part::Shared(_)) && matches!(parts[3], Part::Shared(_)));
        // One byte apart, but not a comma: two pieces, and the comma written between them.
        let text = std::sync::Arc::new(format!("{};{}", long("a"), long("b")));
        let (mut first, second) = (
            MessageJson::Spliced { text: text.clone(), range: 0..n },
            MessageJson::Spliced { text: text.clone(), range: n + 1..2 * n + 1 },
        );
        assert!(!first.join(&second));
        let written = write(usize::MAX, |pieces| pieces.messages(vec![first, second])).unwrap();
        assert_eq!(written.text(), format!("[{},{}]", long("a"), long("b")));
    }

    #[test]
    fn server_requests_and_notifications() {
        let params = serde_json::json!({"b": 1, "a": [true]});
        assert_eq!(
            request(r#""convo:7""#, "runtime/run", &params).unwrap(),
            r#"{"jsonrpc":"2.0","id":"convo:7","method":"runtime/run","params":{"b":1,"a":[true]}}"#
        );
        assert_eq!(
            notification("$/cancelRequest", &serde_json::json!({"id": "convo:7"})).unwrap(),
            r#"{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":"convo:7"}}"#
        );
    }
}
