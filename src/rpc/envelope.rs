//! Classifies one frame's JSON before anything runs: a parse error (-32700), an invalid
//! request (-32600), a request, a notification, a response to a request the server sent,
//! or a batch of those. Tolerant of unknown members; borrows everything from the frame.
//!
//! A frame is read by a strict scanner of its own first (`quick`), which takes the plain
//! object nearly every frame is and gives up on anything else; serde_json reads what it
//! gave up on. Both hand out the same members, so the scanner changes how fast a frame
//! is read, never what it is read as.

use std::borrow::Cow;

use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

/// One element of a frame. `id`, `params` and a response's value are JSON text, as
/// given (a `null` given as `null`).
#[derive(Debug)]
pub enum Element<'a> {
    /// A request (`id` present, possibly `null`) or a notification (`id` absent).
    Call { id: Option<&'a str>, method: Cow<'a, str>, params: Option<&'a str> },
    /// A response to a request the server sent.
    Response { id: &'a str, ok: Result<&'a str, &'a str> },
    /// Not a valid JSON-RPC 2.0 message; `id` when one could be read.
    Invalid { id: Option<&'a str>, why: &'static str },
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
    let parsed = match simdutf8::basic::from_utf8(bytes) {
        Ok(text) => match quick(text) {
            Some(members) => {
                #[cfg(feature = "fuzzing")]
                assert_eq!(Some(&members), by_serde(text).as_ref(), "{text}");
                return Frame::Single(members.element());
            }
            None => serde_json::from_str::<Envelope>(text),
        },
        Err(_) => serde_json::from_slice(bytes),
    };
    match parsed {
        Ok(env) => Frame::Single(Members::from(env).element()),
        Err(e) if e.is_data() => Frame::Single(Element::Invalid { id: None, why: "a request must be a JSON object" }),
        Err(e) => Frame::ParseError(e.to_string()),
    }
}

/// The frame parsed: as text when it is UTF-8, checked once here rather than piece by
/// piece as it is parsed; else as bytes, so that the parser tells where it is not.
fn parse<'a, T: Deserialize<'a>>(bytes: &'a [u8]) -> serde_json::Result<T> {
    match simdutf8::basic::from_utf8(bytes) {
        Ok(text) => serde_json::from_str(text),
        Err(_) => serde_json::from_slice(bytes),
    }
}

/// A batch member: already known to be well-formed JSON. Only an object is read: serde
/// would read an array as the envelope's members in order (`["2.0",1,"m"]`).
fn element(text: &str) -> Element<'_> {
    let invalid = Element::Invalid { id: None, why: "a request must be a JSON object" };
    if !text.starts_with('{') {
        return invalid;
    }
    if let Some(members) = quick(text) {
        return members.element();
    }
    serde_json::from_str::<Envelope>(text).map_or(invalid, |env| Members::from(env).element())
}

/// The members of a frame's object that JSON-RPC reads, each as the JSON text of its
/// value: absent, or present (`null` too).
#[derive(Debug, Default, PartialEq)]
struct Members<'a> {
    jsonrpc: Option<&'a str>,
    id: Option<&'a str>,
    method: Option<&'a str>,
    params: Option<&'a str>,
    result: Option<&'a str>,
    error: Option<&'a str>,
}

/// The members as serde_json reads them: what `quick` gives up on.
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

impl<'a> From<Envelope<'a>> for Members<'a> {
    fn from(env: Envelope<'a>) -> Self {
        let text = |raw: Option<&'a RawValue>| raw.map(RawValue::get);
        Members {
            jsonrpc: text(env.jsonrpc),
            id: text(env.id),
            method: text(env.method),
            params: text(env.params),
            result: text(env.result),
            error: text(env.error),
        }
    }
}

/// What serde_json reads `text` as, when it reads it as an object.
#[cfg(any(test, feature = "fuzzing"))]
fn by_serde(text: &str) -> Option<Members<'_>> {
    serde_json::from_str::<Envelope>(text).ok().map(Members::from)
}

impl<'a> Members<'a> {
    fn element(self) -> Element<'a> {
        let id = self.id.filter(|id| is_valid_id(id));
        let invalid = |why| Element::Invalid { id, why };
        if self.jsonrpc != Some("\"2.0\"") {
            return invalid("`jsonrpc` must be \"2.0\"");
        }
        if let Some(given) = self.id
            && id.is_none()
        {
            return invalid(if given.starts_with('"') {
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
        let Some(method) = string_value(method) else {
            return invalid(if method.starts_with('"') {
                "`method` must be valid Unicode: it holds a lone surrogate escape"
            } else {
                "`method` must be a string"
            });
        };
        // `"params": null` is read as no params, as many LSP clients send it.
        let params = self.params.filter(|p| *p != "null");
        if let Some(params) = params
            && !params.starts_with(['{', '['])
        {
            return invalid("`params` must be an object or an array");
        }
        Element::Call { id: self.id, method, params }
    }
}

/// The members of `text` when it is one JSON object that the strict scanner (`Strict`)
/// takes whole, with no member named twice; `None` when it gives up (serde_json then
/// reads `text`, and says what is wrong, if anything is).
fn quick(text: &str) -> Option<Members<'_>> {
    let mut s = Strict { b: text.as_bytes(), i: 0 };
    let mut members = Members::default();
    s.ws();
    s.items(b'{', b'}', |s| {
        let key = s.name(false)?;
        let start = s.i;
        s.value(0)?;
        let value = &text[start..s.i];
        // A name with an escape is none of these: a one-letter escape stands for no letter.
        let slot = match &text[key.start + 1..key.end - 1] {
            "jsonrpc" => Some(&mut members.jsonrpc),
            "id" => Some(&mut members.id),
            "method" => Some(&mut members.method),
            "params" => Some(&mut members.params),
            "result" => Some(&mut members.result),
            "error" => Some(&mut members.error),
            _ => None,
        };
        // serde_json refuses a member named twice: it says so itself.
        if let Some(slot) = slot
            && slot.replace(value).is_some()
        {
            return None;
        }
        Some(())
    })?;
    s.ws();
    (s.i == s.b.len()).then_some(members)
}

/// A JSON scanner that only ever says yes to JSON: it steps over a value when the value
/// is plainly well-formed, and gives up (`None`) on anything it does not take, well-formed
/// or not: a `\u` escape in a member's name, nesting deeper than `MAX_DEPTH`. The text
/// is UTF-8 already.
struct Strict<'a> {
    b: &'a [u8],
    i: usize,
}

impl Strict<'_> {
    /// Deeper than this, serde_json steps over the value.
    const MAX_DEPTH: usize = 32;

    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.b.get(self.i) {
            self.i += 1;
        }
    }

    fn eat(&mut self, c: u8) -> Option<()> {
        (self.b.get(self.i) == Some(&c)).then(|| self.i += 1)
    }

    /// A string with its quotes: where it lies. Its escapes are the one-letter ones, and
    /// `\uXXXX` where `unicode`: in a value, which serde_json steps over as we do
    /// (checking four hex digits, not the code point), not in a member's name, which it
    /// reads (and refuses a lone surrogate in).
    #[inline(always)]
    fn string(&mut self, unicode: bool) -> Option<std::ops::Range<usize>> {
        let start = self.i;
        self.eat(b'"')?;
        loop {
            let rest = &self.b[self.i..];
            let at = stop(rest)?;
            self.i += at + 1;
            match rest[at] {
                b'"' => return Some(start..self.i),
                b'\\' => match self.b.get(self.i)? {
                    b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => self.i += 1,
                    b'u' if unicode && self.b.get(self.i + 1..self.i + 5)?.iter().all(u8::is_ascii_hexdigit) => {
                        self.i += 5
                    }
                    _ => return None,
                },
                // No string may hold a control character as it is (RFC 8259, 7).
                _ => return None,
            }
        }
    }

    /// A member's name and the colon after it: where the name lies.
    #[inline(always)]
    fn name(&mut self, unicode: bool) -> Option<std::ops::Range<usize>> {
        let name = self.string(unicode)?;
        self.ws();
        self.eat(b':')?;
        self.ws();
        Some(name)
    }

    /// The items of an array or the members of an object, from `open` to `close`, each
    /// stepped over by `item`.
    fn items(&mut self, open: u8, close: u8, mut item: impl FnMut(&mut Self) -> Option<()>) -> Option<()> {
        self.eat(open)?;
        self.ws();
        if self.eat(close).is_some() {
            return Some(());
        }
        loop {
            item(self)?;
            self.ws();
            if self.eat(close).is_some() {
                return Some(());
            }
            self.eat(b',')?;
            self.ws();
        }
    }

    fn value(&mut self, depth: usize) -> Option<()> {
        match *self.b.get(self.i)? {
            b'"' => self.string(true).map(drop),
            b'{' if depth < Self::MAX_DEPTH => self.items(b'{', b'}', |s| {
                s.name(true)?;
                s.value(depth + 1)
            }),
            b'[' if depth < Self::MAX_DEPTH => self.items(b'[', b']', |s| s.value(depth + 1)),
            b'-' | b'0'..=b'9' => self.number(),
            b't' => self.word(b"true"),
            b'f' => self.word(b"false"),
            b'n' => self.word(b"null"),
            _ => None,
        }
    }

    /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`
    fn number(&mut self) -> Option<()> {
        let _ = self.eat(b'-');
        if self.eat(b'0').is_none() {
            matches!(self.b.get(self.i), Some(b'1'..=b'9')).then_some(())?;
            self.digits();
        }
        if self.eat(b'.').is_some() {
            self.digits()?;
        }
        if let Some(b'e' | b'E') = self.b.get(self.i) {
            self.i += 1;
            let _ = self.eat(b'+').or_else(|| self.eat(b'-'));
            self.digits()?;
        }
        Some(())
    }

    /// One digit or more.
    fn digits(&mut self) -> Option<()> {
        let start = self.i;
        while let Some(b'0'..=b'9') = self.b.get(self.i) {
            self.i += 1;
        }
        (self.i > start).then_some(())
    }

    fn word(&mut self, word: &[u8]) -> Option<()> {
        self.b[self.i..].starts_with(word).then(|| self.i += word.len())
    }
}

/// Where the first quote, backslash or control character of `text` is: sixteen bytes at
/// a time on x86-64 (SSE2, which every x86-64 has), then eight at a time while eight are
/// left (a string's text is mostly short, and rarely escaped).
fn stop(text: &[u8]) -> Option<usize> {
    let mut at = 0;
    #[cfg(target_arch = "x86_64")]
    while let Some(chunk) = text.get(at..at + 16) {
        use std::arch::x86_64::{
            _mm_cmpeq_epi8, _mm_loadu_si128, _mm_min_epu8, _mm_movemask_epi8, _mm_or_si128, _mm_set1_epi8,
        };
        // SAFETY: SSE2 is in every x86-64 processor (the target's baseline), and the load
        // reads the 16 bytes of `chunk`, unaligned as `_mm_loadu_si128` allows.
        let found = unsafe {
            let bytes = _mm_loadu_si128(chunk.as_ptr().cast());
            // A control character is one that the minimum with 0x1F leaves as it is.
            let control = _mm_cmpeq_epi8(_mm_min_epu8(bytes, _mm_set1_epi8(0x1f)), bytes);
            let quote = _mm_cmpeq_epi8(bytes, _mm_set1_epi8(b'"' as i8));
            let backslash = _mm_cmpeq_epi8(bytes, _mm_set1_epi8(b'\\' as i8));
            _mm_movemask_epi8(_mm_or_si128(_mm_or_si128(quote, backslash), control))
        };
        if found != 0 {
            return Some(at + found.trailing_zeros() as usize);
        }
        at += 16;
    }
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    while let Some(chunk) = text.get(at..at + 8) {
        let word = u64::from_le_bytes(chunk.try_into().ok()?);
        // A byte's high bit in each mask: it is zero after the XOR, or below a space. A
        // borrow can only mark bytes after the first that is (little-endian: higher).
        let zero = |v: u64| v.wrapping_sub(ONES) & !v & HIGH;
        let found = zero(word ^ (ONES * u64::from(b'"')))
            | zero(word ^ (ONES * u64::from(b'\\')))
            | (word.wrapping_sub(ONES * 0x20) & !word & HIGH);
        if found != 0 {
            return Some(at + (found.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    Some(at + text[at..].iter().position(|&c| c == b'"' || c == b'\\' || c < 0x20)?)
}

const LONE_SURROGATE_ID: &str = "`id` must be valid Unicode: it holds a lone surrogate escape";

/// A string, `null`, or a number a double holds. Echoed back, `1e999` or a string with
/// a lone surrogate escape would make a reply most clients cannot read.
fn is_valid_id(s: &str) -> bool {
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
/// `text` is a JSON value already: when it holds no escape, its
/// value is what lies between its quotes, borrowed without a second parse.
fn string_value(text: &str) -> Option<Cow<'_, str>> {
    match text.strip_prefix('"').and_then(|t| t.strip_suffix('"')) {
        // A byte at a time: a method's name is short, and `contains` took 140
        // instructions a request to set up its word-at-a-time search.
        Some(inner) if !inner.bytes().any(|b| b == b'\\') => Some(Cow::Borrowed(inner)),
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
        assert_eq!((id.unwrap(), &*method, params.unwrap()), ("-1.5", "a/b", "{}"));
        let Element::Call { id, .. } = single(r#"{"jsonrpc":"2.0","method":"n","extra":1}"#) else { panic!() };
        assert!(id.is_none());
        let Element::Call { id, .. } = single(r#"{"jsonrpc":"2.0","id":null,"method":"n"}"#) else { panic!() };
        assert_eq!(id.unwrap(), "null");
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
                Element::Invalid { id, .. } => assert_eq!(id, want, "{input}"),
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
                    Element::Call { id: Some(got), .. } => assert!(valid && got == id, "{digits}"),
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
        assert!(matches!(classify(frame), Frame::Single(Element::Call { id: Some(id), .. }) if id == "7"));
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
        // An array is no request, though serde would read one as the members in order.
        let Frame::Batch(items) = classify(br#"[["2.0",1,"m"]]"#) else { panic!() };
        assert!(matches!(items[..], [Element::Invalid { id: None, .. }]));
    }

    #[test]
    fn the_scanner_reads_plain_frames_and_gives_up_on_the_rest() {
        let read = [
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":[1,-2.5e+3,true,false,null,"x\n\"y"]}}"#,
            " {\t\"id\" : \"é\" ,\r\n\"jsonrpc\":\"2.0\",\"other\":{},\"other\":[]} ",
            r#"{"jsonrpc":"2.0","id":0,"result":{"content":"ok, 0.5e-7 and -0"},"extra":[[],{}]}"#,
            r#"{"jsonrpc":null,"method":"\/\\\b\f\r\t","params":null}"#,
            r#"{"jsonrpc":"2.0","id":"\u00e9","method":"m\ud800","params":{"\u0041":"\uD83D\uDE00"}}"#,
            "{}",
        ];
        for text in read {
            assert_eq!(quick(text), Some(by_serde(text).unwrap()), "{text}");
        }
        let given_up = [
            // What serde_json refuses too.
            r#"{"jsonrpc":"2.0","id":01}"#,
            r#"{"id":1.}"#,
            r#"{"id":1e}"#,
            r#"{"id":-}"#,
            r#"{"id":"a\x"}"#,
            "{\"id\":\"a\u{1}\"}",
            r#"{"id":1,}"#,
            r#"{"id":[1,]}"#,
            r#"{"id":tru}"#,
            r#"{"id":1} x"#,
            r#"{"id" 1}"#,
            r#"{"id":"1"#,
            "{\"id\":\u{a0}1}",
            r#"{"id":"\u00g9"}"#,
            r#"{"id":"\u00e"}"#,
            // What serde_json reads, and the scanner leaves to it.
            r#"{"\u0069d":1}"#,
            r#"{"id":1,"id":2}"#,
            &format!(r#"{{"params":{}{}}}"#, "[".repeat(40), "]".repeat(40)),
        ];
        for text in given_up {
            assert_eq!(quick(text), None, "{text}");
        }
    }

    /// Frames made by changing plain ones a byte at a time: whatever the scanner reads,
    /// serde_json reads alike.
    #[test]
    fn the_scanner_never_reads_a_frame_otherwise_than_serde_json() {
        let seeds = [
            r#"{"jsonrpc":"2.0","id":12,"method":"session/add_user","params":{"session_id":"s","text":"hi\n"}}"#,
            r#"{"jsonrpc":"2.0","id":"x","result":[1.5e3,-0,{"a":null,"b":true}],"error":false}"#,
            r#"{"jsonrpc":"2.0","id":3,"method":"m","params":{"t":"caf\u00e9 \ud83d\ude00"}}"#,
        ];
        let alphabet = b"{}[]:,\"\\/ 0123456789.-+eEtruefalsnl\t\n\x01\x7f";
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = |n: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % n as u64) as usize
        };
        let (mut read, mut tried) = (0, 0);
        for seed in seeds {
            for _ in 0..20_000 {
                let mut bytes = seed.as_bytes().to_vec();
                for _ in 0..1 + next(3) {
                    let at = next(bytes.len() + 1);
                    let c = alphabet[next(alphabet.len())];
                    match next(3) {
                        0 if at < bytes.len() => bytes[at] = c,
                        1 if at < bytes.len() => drop(bytes.remove(at)),
                        _ => bytes.insert(at, c),
                    }
                }
                let Ok(text) = std::str::from_utf8(&bytes) else { continue };
                tried += 1;
                if let Some(members) = quick(text) {
                    assert_eq!(Some(members), by_serde(text), "{text}");
                    read += 1;
                }
            }
        }
        // Most changed frames are still read, and many are not.
        assert!(read > tried / 10 && read < tried * 9 / 10, "{read} of {tried}");
    }

    proptest::proptest! {
        /// `stop`'s sixteen and eight bytes at a time find what a byte at a time does,
        /// wherever in its chunk the byte is, and in texts of every length around them.
        #[test]
        fn a_string_stops_where_a_byte_at_a_time_does(
            text in proptest::collection::vec(proptest::sample::select(b" a~\"\\\x00\x1f\x7f\x80\xff".to_vec()), 0..48),
            plain in 0usize..48,
        ) {
            let mut text = text;
            // Mostly bytes to step over, as a string's text is, before the first stop.
            for b in text.iter_mut().take(plain) {
                *b = b'a';
            }
            let naive = text.iter().position(|&c| c == b'"' || c == b'\\' || c < 0x20);
            proptest::prop_assert_eq!(stop(&text), naive);
        }
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
