//! Classifies one frame's JSON before anything runs: a parse error (-32700), an invalid
//! request (-32600), a request, a notification, a response to a request the server sent,
//! or a batch of those. Tolerant of unknown members; borrows everything from the frame.

use std::borrow::Cow;

use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

/// One element of a frame.
#[derive(Debug)]
pub enum Element<'a> {
    /// A request (`id` present, possibly `null`) or a notification (`id` absent).
    Call { id: Option<&'a RawValue>, method: Cow<'a, str>, params: Option<&'a RawValue> },
    /// A response to a request the server sent.
    Response { id: &'a RawValue, ok: Result<&'a RawValue, &'a RawValue> },
    /// Not a valid JSON-RPC 2.0 message; `id` when one could be read.
    Invalid { id: Option<&'a RawValue>, why: &'static str },
}

#[derive(Debug)]
pub enum Frame<'a> {
    Single(Element<'a>),
    Batch(Vec<Element<'a>>),
    /// Not JSON at all.
    ParseError(String),
    /// `[]`.
    EmptyBatch,
}

pub fn classify(bytes: &[u8]) -> Frame<'_> {
    let first = bytes.iter().find(|b| !b.is_ascii_whitespace());
    if first == Some(&b'[') {
        return match parse::<Vec<&RawValue>>(bytes) {
            Ok(items) if items.is_empty() => Frame::EmptyBatch,
            Ok(items) => Frame::Batch(items.into_iter().map(|raw| element(raw.get())).collect()),
            Err(e) => Frame::ParseError(e.to_string()),
        };
    }
    match parse::<Envelope>(bytes) {
        Ok(env) => Frame::Single(env.element()),
        Err(e) if e.is_data() => Frame::Single(Element::Invalid { id: None, why: "a request must be a JSON object" }),
        Err(e) => Frame::ParseError(e.to_string()),
    }
}

/// The frame parsed: as text when it is UTF-8, checked once here rather than piece by
/// piece as it is parsed; else as bytes, so that the parser tells where it is not.
fn parse<'a, T: Deserialize<'a>>(bytes: &'a [u8]) -> serde_json::Result<T> {
    match std::str::from_utf8(bytes) {
        Ok(text) => serde_json::from_str(text),
        Err(_) => serde_json::from_slice(bytes),
    }
}

/// A batch member: already known to be well-formed JSON.
fn element(text: &str) -> Element<'_> {
    match serde_json::from_str::<Envelope>(text) {
        Ok(env) => env.element(),
        Err(_) => Element::Invalid { id: None, why: "a request must be a JSON object" },
    }
}

#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(default, borrow, deserialize_with = "present")]
    jsonrpc: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    id: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    method: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    params: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    result: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    error: Option<&'a RawValue>,
}

/// Keeps a member that is present with the value `null` apart from an absent one.
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(d).map(Some)
}

impl<'a> Envelope<'a> {
    fn element(self) -> Element<'a> {
        let id = self.id.filter(|id| is_valid_id(id));
        let invalid = |why| Element::Invalid { id, why };
        if self.jsonrpc.map(RawValue::get) != Some("\"2.0\"") {
            return invalid("`jsonrpc` must be \"2.0\"");
        }
        if let Some(given) = self.id
            && id.is_none()
        {
            return invalid(if given.get().starts_with('"') {
                LONE_SURROGATE_ID
            } else {
                "`id` must be a string, a number or null"
            });
        }
        let Some(method) = self.method else {
            return match (id, self.result, self.error) {
                (Some(id), Some(result), None) => Element::Response { id, ok: Ok(result) },
                (Some(id), None, Some(error)) => Element::Response { id, ok: Err(error) },
                _ => invalid("`method` is missing"),
            };
        };
        let Some(method) = string_value(method.get()) else {
            return invalid(if method.get().starts_with('"') {
                "`method` must be valid Unicode: it holds a lone surrogate escape"
            } else {
                "`method` must be a string"
            });
        };
        // `"params": null` is read as no params, as many LSP clients send it.
        let params = self.params.filter(|p| p.get() != "null");
        if let Some(params) = params
            && !params.get().starts_with(['{', '['])
        {
            return invalid("`params` must be an object or an array");
        }
        Element::Call { id: self.id, method, params }
    }
}

const LONE_SURROGATE_ID: &str = "`id` must be valid Unicode: it holds a lone surrogate escape";

/// A string, `null`, or a number a double holds. Echoed back, `1e999` or a string with
/// a lone surrogate escape would make a reply most clients cannot read.
fn is_valid_id(id: &RawValue) -> bool {
    let s = id.get();
    match s.as_bytes().first() {
        Some(b'"') => string_value(s).is_some(),
        // A JSON number already (the text of a `RawValue`): a double must hold it. One of
        // digits alone (and its sign) is an integer, which a double holds up to 308 digits.
        Some(b'-' | b'0'..=b'9') => {
            (s.len() <= 300 && s.bytes().all(|b| b.is_ascii_digit() || b == b'-'))
                || s.parse::<f64>().is_ok_and(f64::is_finite)
        }
        _ => s == "null",
    }
}

/// The value of `text` when it is a JSON string that is valid Unicode, else `None`.
/// `text` is a `RawValue`'s, so serde_json checked it: when it holds no escape, its
/// value is what lies between its quotes, borrowed without a second parse.
fn string_value(text: &str) -> Option<Cow<'_, str>> {
    match text.strip_prefix('"').and_then(|t| t.strip_suffix('"')) {
        Some(inner) if !inner.contains('\\') => Some(Cow::Borrowed(inner)),
        _ => serde_json::from_str(text).ok(),
    }
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

    fn single(s: &str) -> Element<'_> {
        match classify(s.as_bytes()) {
            Frame::Single(e) => e,
            other => panic!("not a single element: {other:?}"),
        }
    }

    #[test]
    fn requests_and_notifications() {
        let Element::Call { id, method, params } = single(r#"{"jsonrpc":"2.0","id":-1.5,"method":"a\/b","params":{}}"#)
        else {
            panic!()
        };
        assert_eq!((id.unwrap().get(), &*method, params.unwrap().get()), ("-1.5", "a/b", "{}"));
        let Element::Call { id, .. } = single(r#"{"jsonrpc":"2.0","method":"n","extra":1}"#) else { panic!() };
        assert!(id.is_none());
        let Element::Call { id, .. } = single(r#"{"jsonrpc":"2.0","id":null,"method":"n"}"#) else { panic!() };
        assert_eq!(id.unwrap().get(), "null");
    }

    #[test]
    fn invalid_requests_keep_a_readable_id() {
        let cases = [
            (r#"{"id":1,"method":"m"}"#, Some("1")),
            (r#"{"jsonrpc":"1.0","id":"x","method":"m"}"#, Some("\"x\"")),
            (r#"{"jsonrpc":"2.0","id":{},"method":"m"}"#, None),
            // Found by the dispatch fuzz target: a number no f64 holds.
            (r#"{"jsonrpc":"2.0","id":17e7778,"method":"m"}"#, None),
            (r#"{"jsonrpc":"2.0","id":2,"method":5}"#, Some("2")),
            (r#"{"jsonrpc":"2.0","id":"\ud800","method":"m"}"#, None),
            (r#"{"jsonrpc":"2.0","id":5,"method":"m\udc00"}"#, Some("5")),
            (r#"{"jsonrpc":"2.0","id":3,"method":"m","params":"x"}"#, Some("3")),
            (r#"{"jsonrpc":"2.0","id":4}"#, Some("4")),
            (r#"{"foo":1}"#, None),
            ("5", None),
        ];
        for (input, want) in cases {
            match single(input) {
                Element::Invalid { id, .. } => assert_eq!(id.map(RawValue::get), want, "{input}"),
                other => panic!("{input}: {other:?}"),
            }
        }
    }

    #[test]
    fn ids_and_methods_are_read_as_serde_json_reads_them() {
        // Integers a double holds up to 308 digits (the fast path takes up to 300); past
        // that they are infinite.
        for (digits, valid) in [(1, true), (300, true), (308, true), (309, false), (400, false)] {
            for sign in ["", "-"] {
                let id = format!("{sign}{}", "9".repeat(digits));
                match single(&format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"m"}}"#)) {
                    Element::Call { id: Some(got), .. } => assert!(valid && got.get() == id, "{digits}"),
                    Element::Invalid { id: None, .. } => assert!(!valid, "{digits}"),
                    other => panic!("{digits}: {other:?}"),
                }
            }
        }
        for (text, value) in [
            (r#""m""#, Some("m")),
            (r#""""#, Some("")),
            (r#""a\"b""#, Some("a\"b")),
            (r#""\u00e9\/""#, Some("é/")),
            (r#""\ud800""#, None),
            ("5", None),
            ("null", None),
        ] {
            assert_eq!(string_value(text).as_deref(), value, "{text}");
            assert_eq!(matches!(string_value(text), Some(Cow::Borrowed(_))), !text.contains('\\') && value.is_some());
        }
    }

    #[test]
    fn parse_errors_and_batches() {
        assert!(matches!(classify(b"{\"a\":"), Frame::ParseError(_)));
        assert!(matches!(classify(b"\xff\xfe"), Frame::ParseError(_)));
        // Not UTF-8 where nothing reads it: parsed as bytes, it is a request all the same.
        let frame = b"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"m\",\"x\":\"\xff\"}";
        assert!(matches!(classify(frame), Frame::Single(Element::Call { id: Some(id), .. }) if id.get() == "7"));
        assert!(matches!(classify(b"[1,"), Frame::ParseError(_)));
        assert!(matches!(classify(b" [] "), Frame::EmptyBatch));
        // Deep nesting is stepped over, not recursed into: no stack overflow.
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(
            matches!(&classify(deep.as_bytes()), Frame::Batch(items) if matches!(items[..], [Element::Invalid { .. }]))
        );
        let deep = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"m","params":{{"a":{}{}}}}}"#,
            "[".repeat(100_000),
            "]".repeat(100_000)
        );
        assert!(matches!(classify(deep.as_bytes()), Frame::Single(Element::Call { .. })));
        let Frame::Batch(items) =
            classify(br#"[1,{"jsonrpc":"2.0","method":"n"},{"jsonrpc":"2.0","id":9,"result":null}]"#)
        else {
            panic!()
        };
        assert!(matches!(items[0], Element::Invalid { .. }));
        assert!(matches!(items[1], Element::Call { id: None, .. }));
        assert!(matches!(items[2], Element::Response { ok: Ok(_), .. }));
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
