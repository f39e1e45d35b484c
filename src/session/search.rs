//! Full-text search (`session/search`), the part every store shares: which words a
//! message holds, the query language and its rendering for FTS5 and PostgreSQL, matching
//! for a scan, and snippets.
//!
//! Words are convo's, never a database's: maximal runs of alphanumeric characters
//! (`char::is_alphanumeric`), lowercased character by character; no stemming. A message's
//! text is its string content or the `text` of its `text` parts (tool results included;
//! tool-call arguments and images are not text). Only the first `MAX_WORDS` words of at
//! most `MAX_WORD_BYTES` bytes are indexed (longer ones, such as base64 runs, are skipped):
//! these bounds keep a PostgreSQL `tsvector` under its limits, and every store applies
//! them, so every store sees the same words at the same positions.
//!
//! A query is terms separated by spaces, all of which must match: `word`, `prefix*`, and
//! `"a phrase"` (its words next to each other, in order; `"a phr"*` ends in a prefix). A
//! bare term that holds several words (`e-mail`) is a phrase of them. Terms without a word
//! are ignored; a query with no word at all, an unbalanced quote or a misplaced `*` is
//! invalid (-32602), so malformed input never reaches SQL.

use std::borrow::Cow;

use serde_json::Value;

use crate::error::{Error, Result};
use crate::session::Message;

/// Words after this many are not indexed (PostgreSQL's highest `tsvector` position).
pub const MAX_WORDS: usize = 16_383;
/// Longer words are not indexed (with `MAX_WORDS`, a `tsvector` stays under 1 MB).
pub const MAX_WORD_BYTES: usize = 56;
/// The longest query, in bytes, and the most words it may hold.
pub const MAX_QUERY_BYTES: usize = 1_000;
pub const MAX_QUERY_WORDS: usize = 32;
/// How many words a snippet shows.
pub const SNIPPET_WORDS: usize = 16;
/// Text between two words of a snippet longer than this shows as ` … `.
const MAX_BETWEEN: usize = 24;

/// One term: words that must appear next to each other, in order; with `prefix`, the
/// last one need only start a word.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Term {
    pub words: Vec<String>,
    pub prefix: bool,
}

/// A parsed query: every term must match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    pub terms: Vec<Term>,
}

/// A word of a text: where it is (bytes) and its lowercase form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Word {
    pub start: usize,
    pub end: usize,
    pub text: String,
}

/// Every word of `text`, in order, bounds not applied.
pub fn all_words(text: &str) -> impl Iterator<Item = Word> + '_ {
    word_bounds(text).map(|bounds| word_at(text, bounds))
}

/// The words of `text` that are indexed, in order (`MAX_WORDS`, `MAX_WORD_BYTES`). A
/// word too long to index (base64, a hash) is passed over where it lies, not lowercased.
pub fn indexed_words(text: &str) -> impl Iterator<Item = Word> + '_ {
    word_bounds(text)
        .filter(|(start, end)| end - start <= MAX_WORD_BYTES)
        .take(MAX_WORDS)
        .map(|bounds| word_at(text, bounds))
}

/// Where each word of `text` starts and ends (bytes), in order: a word is a run of
/// alphanumeric characters.
fn word_bounds(text: &str) -> impl Iterator<Item = (usize, usize)> + '_ {
    let mut chars = text.char_indices().peekable();
    std::iter::from_fn(move || {
        let (start, _) = chars.find(|(_, c)| c.is_alphanumeric())?;
        let mut end = text.len();
        while let Some(&(i, c)) = chars.peek() {
            if !c.is_alphanumeric() {
                end = i;
                break;
            }
            chars.next();
        }
        Some((start, end))
    })
}

fn word_at(text: &str, (start, end): (usize, usize)) -> Word {
    Word { start, end, text: lowercase(&text[start..end]) }
}

/// `word` lowercased a character at a time (`char::to_lowercase`): a final sigma too
/// becomes `σ`, as the indexes already written hold it. An ASCII word in one pass.
fn lowercase(word: &str) -> String {
    match word.is_ascii() {
        true => word.to_ascii_lowercase(),
        false => word.chars().flat_map(char::to_lowercase).collect(),
    }
}

/// The searchable text of a message: its string content, or its text parts joined by
/// new lines.
pub fn message_text(message: &Message) -> String {
    content_text(&message.content).into_owned()
}

/// The searchable text of a content value, borrowed when it is one string.
pub fn content_text(content: &Value) -> Cow<'_, str> {
    match content {
        Value::String(s) => Cow::Borrowed(s),
        Value::Array(parts) => Cow::Owned(
            parts
                .iter()
                .filter(|p| p.get("type").and_then(Value::as_str) == Some("text"))
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n"),
        ),
        _ => Cow::Borrowed(""),
    }
}

/// What a database indexes for a message: its indexed words joined by spaces. An ASCII
/// text's words are lowercased into the one string as they are found.
pub fn index_text(message: &Message) -> String {
    let text = content_text(&message.content);
    if text.is_ascii() {
        let mut out = Vec::with_capacity(text.len());
        for word in ascii_indexed_words(text.as_bytes()) {
            if !out.is_empty() {
                out.push(b' ');
            }
            out.extend(word.iter().map(u8::to_ascii_lowercase));
        }
        // ASCII letters, digits and spaces: always UTF-8.
        if let Ok(out) = String::from_utf8(out) {
            return out;
        }
    }
    let words: Vec<String> = indexed_words(&text).map(|w| w.text).collect();
    words.join(" ")
}

/// A PostgreSQL `tsvector` literal of a message's indexed words, positions from 1 (at
/// most 256 kept per word, as PostgreSQL keeps).
pub fn tsvector(message: &Message) -> String {
    let text = content_text(&message.content);
    let mut positions: std::collections::BTreeMap<String, Vec<usize>> = std::collections::BTreeMap::new();
    for (i, word) in indexed_words(&text).enumerate() {
        let list = positions.entry(word.text).or_default();
        if list.len() < 256 {
            list.push(i + 1);
        }
    }
    let mut out = String::new();
    for (word, list) in positions {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(&quote_lexeme(&word));
        out.push(':');
        out.push_str(&list.iter().map(usize::to_string).collect::<Vec<_>>().join(","));
    }
    out
}

/// A lexeme quoted for `tsvector` and `tsquery` input (words are alphanumeric, so this
/// only guards).
fn quote_lexeme(word: &str) -> String {
    format!("'{}'", word.replace('\\', "\\\\").replace('\'', "''"))
}

impl Query {
    /// Parses a query (see the module header).
    pub fn parse(input: &str) -> Result<Query> {
        if input.len() > MAX_QUERY_BYTES {
            return Err(Error::invalid(format!("query: longer than {MAX_QUERY_BYTES} bytes")));
        }
        let mut terms = Vec::new();
        let mut rest = input.trim_start();
        while !rest.is_empty() {
            let (body, mut after, quoted) = match rest.strip_prefix('"') {
                Some(inner) => {
                    let close = inner.find('"').ok_or_else(|| Error::invalid("query: a quote is not closed"))?;
                    (&inner[..close], &inner[close + 1..], true)
                }
                None => {
                    let end = rest.find(|c: char| c.is_whitespace() || c == '"').unwrap_or(rest.len());
                    (&rest[..end], &rest[end..], false)
                }
            };
            let (body, prefix) = match (quoted, body.strip_suffix('*'), after.strip_prefix('*')) {
                (false, Some(body), _) => (body, true),
                (true, _, Some(rest_after)) => {
                    after = rest_after;
                    (body, true)
                }
                _ => (body, false),
            };
            if body.contains('*') {
                return Err(Error::invalid("query: `*` may only end a word or a phrase"));
            }
            if !after.is_empty() && !after.starts_with(char::is_whitespace) {
                return Err(Error::invalid("query: terms must be separated by spaces"));
            }
            let words: Vec<String> = all_words(body).map(|w| w.text).collect();
            if words.iter().any(|w| w.len() > MAX_WORD_BYTES) {
                return Err(Error::invalid(format!("query: a word is longer than {MAX_WORD_BYTES} bytes")));
            }
            if !words.is_empty() {
                terms.push(Term { words, prefix });
            }
            rest = after.trim_start();
        }
        let count: usize = terms.iter().map(|t| t.words.len()).sum();
        if count == 0 {
            return Err(Error::invalid("query: holds no word to search for"));
        }
        if count > MAX_QUERY_WORDS {
            return Err(Error::invalid(format!("query: more than {MAX_QUERY_WORDS} words")));
        }
        Ok(Query { terms })
    }

    /// The query in FTS5 `MATCH` syntax: each term a quoted string, `*` after a prefix.
    pub fn fts5(&self) -> String {
        let terms: Vec<String> = self
            .terms
            .iter()
            .map(|t| format!("\"{}\"{}", t.words.join(" ").replace('"', "\"\""), if t.prefix { " *" } else { "" }))
            .collect();
        terms.join(" AND ")
    }

    /// The query as a PostgreSQL `tsquery` literal: `&` between terms, `<->` inside a
    /// phrase, `:*` after a prefix.
    pub fn tsquery(&self) -> String {
        let terms: Vec<String> = self
            .terms
            .iter()
            .map(|t| {
                let last = t.words.len() - 1;
                let words: Vec<String> = t
                    .words
                    .iter()
                    .enumerate()
                    .map(|(i, w)| format!("{}{}", quote_lexeme(w), if t.prefix && i == last { ":*" } else { "" }))
                    .collect();
                format!("({})", words.join(" <-> "))
            })
            .collect();
        terms.join(" & ")
    }

    /// Whether `text` may match: each term's first word (all but a prefix's last) occurs
    /// in it, lowercased as words are. A cheap test before `score` splits the words.
    pub fn may_match(&self, text: &str) -> bool {
        if text.is_ascii() {
            // Lowercased byte by byte, as it is compared, with nothing copied: the test a
            // scan of a million messages makes of each.
            return self.terms.iter().all(|t| contains_ascii_lowercased(text.as_bytes(), t.words[0].as_bytes()));
        }
        let lower: String = text.chars().flat_map(char::to_lowercase).collect();
        self.terms.iter().all(|t| lower.contains(t.words[0].as_str()))
    }

    /// How well the indexed `words` of a message match: `None` when a term is missing,
    /// else the number of term occurrences.
    pub fn score(&self, words: &[String]) -> Option<u64> {
        self.score_by(
            words.len(),
            |at, word, prefix| {
                if prefix { words[at].starts_with(word) } else { words[at] == word }
            },
        )
    }

    /// `score` of a message's searchable text, read from it: an ASCII text's words are
    /// compared where they lie, ignoring case, with no lowercased copy of each. A text
    /// that fails `may_match` scores `None`, and is better not split.
    pub fn score_text(&self, text: &str) -> Option<u64> {
        if !text.is_ascii() {
            return self.score(&indexed_words(text).map(|w| w.text).collect::<Vec<_>>());
        }
        // Sized for words of five letters: `collect` would start from none and grow.
        let mut words = Vec::with_capacity(text.len() / 6 + 1);
        words.extend(ascii_indexed_words(text.as_bytes()));
        self.score_by(words.len(), |at, word, prefix| {
            let word = word.as_bytes();
            let text = words[at];
            match prefix {
                true => text.len() >= word.len() && text[..word.len()].eq_ignore_ascii_case(word),
                false => text.eq_ignore_ascii_case(word),
            }
        })
    }

    /// `score` over `n` words, `matches(at, word, prefix)` saying whether word `at` is
    /// `word` (lowercase), or starts with it.
    fn score_by(&self, n: usize, matches: impl Fn(usize, &str, bool) -> bool) -> Option<u64> {
        let mut total = 0;
        for term in &self.terms {
            let found = (0..n).filter(|&at| term.matches_at(n, at, &matches)).count();
            if found == 0 {
                return None;
            }
            total += found as u64;
        }
        Some(total)
    }

    /// A short excerpt of `text` around the first match: up to `SNIPPET_WORDS` words, the
    /// matched words in `[` `]`, white space collapsed, `…` where text was cut.
    pub fn snippet(&self, text: &str) -> String {
        let words: Vec<Word> = indexed_words(text).collect();
        let mut marked = vec![false; words.len()];
        let matches = |at: usize, word: &str, prefix: bool| {
            if prefix { words[at].text.starts_with(word) } else { words[at].text == word }
        };
        for term in &self.terms {
            for at in 0..words.len() {
                if term.matches_at(words.len(), at, matches) {
                    marked[at..at + term.words.len()].iter_mut().for_each(|m| *m = true);
                }
            }
        }
        let Some(first) = marked.iter().position(|&m| m) else {
            return excerpt(text, &words, &marked, 0, words.len().min(SNIPPET_WORDS));
        };
        let from = first.saturating_sub(SNIPPET_WORDS / 4);
        let to = (from + SNIPPET_WORDS).min(words.len());
        let from = to.saturating_sub(SNIPPET_WORDS).min(from);
        excerpt(text, &words, &marked, from, to)
    }
}

impl Term {
    /// Whether the term's words are words `at..` of `n`, by `matches` (see `score_by`).
    fn matches_at(&self, n: usize, at: usize, matches: impl Fn(usize, &str, bool) -> bool) -> bool {
        let len = self.words.len();
        at + len <= n && self.words.iter().enumerate().all(|(i, w)| matches(at + i, w, self.prefix && i == len - 1))
    }
}

/// `indexed_words` of an ASCII text, as they are written (not lowercased).
pub fn ascii_indexed_words(text: &[u8]) -> impl Iterator<Item = &[u8]> {
    // A table, a load a byte: `is_ascii_alphanumeric`'s two range tests took five
    // instructions a byte more, a tenth of what signing a message costs.
    text.split(|&b| !IN_A_WORD[usize::from(b)]).filter(|w| !w.is_empty() && w.len() <= MAX_WORD_BYTES).take(MAX_WORDS)
}

/// Whether each byte is an ASCII letter or digit.
static IN_A_WORD: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        table[b] = (b as u8).is_ascii_alphanumeric();
        b += 1;
    }
    table
};

/// Whether `text` (ASCII), lowercased, holds `word` (lowercase): `word`'s first byte
/// found in either case, the rest compared ignoring ASCII case. A word that is not ASCII
/// is never in an ASCII text, as its bytes compare exactly.
fn contains_ascii_lowercased(text: &[u8], word: &[u8]) -> bool {
    let Some((&first, _)) = word.split_first() else { return true };
    let Some(last_start) = text.len().checked_sub(word.len()) else { return false };
    memchr::memchr2_iter(first, first.to_ascii_uppercase(), &text[..=last_start])
        .any(|at| text[at..at + word.len()].eq_ignore_ascii_case(word))
}

/// Words `from..to` of `text` with what lies between them, marked words bracketed.
fn excerpt(text: &str, words: &[Word], marked: &[bool], from: usize, to: usize) -> String {
    if from >= to {
        return String::new();
    }
    let mut out = String::new();
    if from > 0 {
        out.push('…');
    }
    for i in from..to {
        if i > from {
            let between = collapse(&text[words[i - 1].end..words[i].start]);
            // What lies between may be a long run that is not indexed (base64, say).
            out.push_str(if between.chars().count() > MAX_BETWEEN { " … " } else { &between });
        }
        let word = &text[words[i].start..words[i].end];
        if marked[i] {
            out.push('[');
            out.push_str(word);
            out.push(']');
        } else {
            out.push_str(word);
        }
    }
    if to < words.len() {
        out.push('…');
    }
    out
}

/// White space runs as one space; other characters kept.
fn collapse(between: &str) -> String {
    let mut out = String::new();
    let mut space = false;
    for c in between.chars() {
        if c.is_whitespace() {
            space = true;
        } else {
            if space {
                out.push(' ');
                space = false;
            }
            out.push(c);
        }
    }
    if space {
        out.push(' ');
    }
    out
}

#[cfg(test)]
#[path = "search_tests.rs"]
mod tests;
