//! What a client reads when its params do not parse: `<path>: <what is wrong>`, with
//! serde's path to the member at fault (`messages[2].role`) and no line and column (the
//! path says where). `Error::InvalidParams` adds the `invalid params: ` prefix, once.

use serde_json::error::Category;

use crate::error::Error;

/// The error for params that failed to parse at `path` (`.` for the object itself).
pub fn describe(raw: &str, path: &str, e: serde_json::Error) -> Error {
    let why = match e.classify() {
        // The frame was already read as JSON, with its escapes checked but not decoded, so
        // the only syntax error left is an escape that decodes to no character.
        Category::Syntax => {
            let at = offset(raw, e.line(), e.column());
            match lone_surrogate_before(raw, at) {
                Some(escape) => format!("strings must be valid Unicode: {escape} is a lone surrogate"),
                None => without_position(&e),
            }
        }
        _ => without_position(&e),
    };
    if path == "." { Error::invalid(why) } else { Error::invalid(format!("{path}: {why}")) }
}

/// serde_json's message without its ` at line L column C`.
fn without_position(e: &serde_json::Error) -> String {
    let text = e.to_string();
    if e.line() == 0 {
        return text;
    }
    let position = format!(" at line {} column {}", e.line(), e.column());
    match text.strip_suffix(&position) {
        Some(bare) => bare.to_owned(),
        None => text,
    }
}

/// The byte offset of serde_json's (1-based line, byte column) in `raw`.
fn offset(raw: &str, line: usize, column: usize) -> usize {
    raw.split_inclusive('\n').take(line.saturating_sub(1)).map(str::len).sum::<usize>() + column
}

/// The last `\uXXXX` escape starting before byte `end` of the JSON text `raw` that names
/// a surrogate not paired with its other half, as the client wrote it.
fn lone_surrogate_before(raw: &str, end: usize) -> Option<&str> {
    let hex = |at: usize| raw.get(at..at + 4).and_then(|h| u16::from_str_radix(h, 16).ok());
    let mut found = None;
    let mut i = 0;
    while let Some(j) = memchr::memchr(b'\\', &raw.as_bytes()[i..]).map(|j| i + j) {
        if j >= end {
            break;
        }
        // In JSON text a backslash only ever starts an escape inside a string.
        i = j + 2;
        if raw.as_bytes().get(j + 1) != Some(&b'u') {
            continue;
        }
        i = j + 6;
        match hex(j + 2) {
            Some(0xD800..=0xDBFF) if raw[i..].starts_with("\\u") && matches!(hex(i + 2), Some(0xDC00..=0xDFFF)) => {
                i += 6;
            }
            Some(0xD800..=0xDFFF) => found = raw.get(j..i),
            _ => {}
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_lone_surrogate_the_parser_stopped_at() {
        let cases = [
            (r#"{"text":"\ud800"}"#, Some(r"\ud800")),
            (r#"{"text":"\uDC00 and more"}"#, Some(r"\uDC00")),
            (r#"{"text":"\ud83d\ude00 then \ud800\u0041"}"#, Some(r"\ud800")),
            (r#"{"text":"\\ud800 is text, \ud83d\ude00 a pair"}"#, None),
            (r#"{"text":"\n\u00e9\"\\"}"#, None),
        ];
        for (raw, want) in cases {
            assert_eq!(lone_surrogate_before(raw, raw.len()), want, "{raw}");
        }
        let two = r#"{"a":"\udc01","b":"\udc02"}"#;
        assert_eq!(lone_surrogate_before(two, two.find('b').unwrap()), Some(r"\udc01"));
    }

    #[test]
    fn messages_name_the_member_once_and_no_position() {
        let cases = [
            (
                "{\"text\":\n \"\\ud800\"}",
                "text",
                "invalid params: text: strings must be valid Unicode: \\ud800 is a lone surrogate",
            ),
            (
                r#"{"text":"a\ud800\u0041"}"#,
                "text",
                "invalid params: text: strings must be valid Unicode: \\ud800 is a lone surrogate",
            ),
            (r#"{"text":5}"#, "text", "invalid params: text: invalid type: integer `5`, expected a string"),
            ("{}", ".", "invalid params: missing field `text`"),
        ];
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code)]
        struct P {
            text: String,
        }
        for (raw, path, want) in cases {
            let e = serde_json::from_str::<P>(raw).unwrap_err();
            assert_eq!(describe(raw, path, e).to_string(), want, "{raw}");
        }
    }
}
