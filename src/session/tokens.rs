//! Token counts with OpenAI's o200k_base BPE (tiktoken's tables, via tiktoken-rs),
//! loaded on first use so that start-up does not pay for it.

use serde_json::Value;

use crate::session::export::{self, Format, Options};

/// Tokens per message, and for priming the reply, as OpenAI counts chat requests.
pub const PER_MESSAGE: usize = 3;
pub const PER_REPLY: usize = 3;
/// An image counts as OpenAI's base cost of one low-detail image.
pub const PER_IMAGE: usize = 85;

pub fn count_text(text: &str) -> usize {
    tiktoken_rs::o200k_base_singleton().encode_ordinary(text).len()
}

/// Members that hold no text the model reads: signatures and encrypted reasoning, which
/// a provider checks rather than reads.
const OPAQUE: &[&str] = &["signature", "encrypted_content", "thoughtSignature", "thought_signature"];

/// The tokens of one provider message (or any JSON value): every string in it but image
/// data, which counts as `PER_IMAGE`, and opaque signatures, which count nothing.
pub fn count_value(value: &Value) -> usize {
    match value {
        Value::String(s) if s.starts_with("data:image/") => PER_IMAGE,
        Value::String(s) => count_text(s),
        Value::Array(items) => items.iter().map(count_value).sum(),
        Value::Object(map) => map
            .iter()
            .map(|(key, v)| match (key.as_str(), v) {
                ("data", Value::String(_)) => PER_IMAGE,
                (key, _) if OPAQUE.contains(&key) => 0,
                _ => count_value(v),
            })
            .sum(),
        _ => 0,
    }
}

/// The list of a payload that holds its messages or items, whatever its format.
pub fn items(payload: &Value) -> &[Value] {
    ["messages", "contents", "input"].iter().find_map(|k| payload[*k].as_array()).map(Vec::as_slice).unwrap_or_default()
}

/// The tokens of a provider payload: its system prompt, each message with the
/// per-message overhead, and the reply's priming.
pub fn count_payload(payload: &Value) -> usize {
    let messages: usize = items(payload).iter().map(|m| count_value(m) + PER_MESSAGE).sum();
    let system =
        ["system", "system_instruction", "instructions"].iter().map(|k| count_value(&payload[*k])).sum::<usize>();
    messages + system + PER_REPLY
}

/// How many turns to keep (`None`: keep everything) and the tokens that then remain.
pub fn plan_trim(
    format: Format,
    options: &Options,
    system: Option<&str>,
    repaired: &[crate::session::Message],
    stored: usize,
    max_tokens: u64,
) -> (Option<u64>, usize) {
    let done = export::export_with(format, system, repaired, options);
    let list = items(&done.payload);
    // The system prompt: the first payload message of Chat, a member of the others.
    let system_in_list = format == Format::OpenaiChat && system.is_some();
    let fixed = PER_REPLY
        + ["system", "system_instruction", "instructions"]
            .iter()
            .map(|k| count_value(&done.payload[*k]))
            .sum::<usize>();
    // Tokens of each history message.
    let mut per = vec![0usize; repaired.len()];
    let mut total = fixed;
    for (k, m) in list.iter().enumerate() {
        let t = count_value(m) + PER_MESSAGE;
        total += t;
        if system_in_list && k == 0 {
            continue;
        }
        if let Some(slot) = done.sources.get(k).and_then(|&i| per.get_mut(i)) {
            *slot += t;
        }
    }
    // Turn starts among the stored messages; the last one is never dropped.
    let starts: Vec<usize> =
        (0..stored).filter(|&i| i == 0 || repaired[i].role == crate::session::Role::User).collect();
    let mut dropped = 0;
    let mut remaining = total;
    for (n, &start) in starts.iter().enumerate() {
        if remaining as u64 <= max_tokens || n + 1 == starts.len() {
            let keep = starts.len() - n;
            return (if start == 0 { None } else { Some(keep as u64) }, remaining);
        }
        let next = starts.get(n + 1).copied().unwrap_or(stored);
        dropped += per[start..next].iter().sum::<usize>();
        remaining = total - dropped;
    }
    (None, remaining)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reference token ids from tiktoken's own o200k_base test cases.
    #[test]
    fn matches_the_reference_tokenizer() {
        let bpe = tiktoken_rs::o200k_base_singleton();
        let cases: &[(&str, &[u32])] = &[
            ("", &[]),
            ("hello world", &[24912, 2375]),
            (" 日本語とEnglish 12345!\n", &[17428, 40909, 5330, 28881, 220, 7633, 2548, 4175]),
            ("\u{1c}a", &[216, 64]),
            ("a\n\n", &[64, 279]),
            ("<|endoftext|>", &[27, 91, 419, 1440, 919, 91, 29]),
        ];
        for (text, ids) in cases {
            assert_eq!(bpe.encode_ordinary(text), *ids, "{text:?}");
            assert_eq!(count_text(text), ids.len());
        }
    }
}
