//! A model of Anthropic's prompt cache, written from its documented rules, to measure
//! what share of a tool loop's input tokens a placement of breakpoints reads from cache:
//!
//! - the prompt is read in order: `system`'s blocks, then each message's content blocks;
//!   a cache entry is the whole prefix up to and including a block, identified by that
//!   prefix (here: a hash of the blocks' JSON, `cache_control` taken out);
//! - at each breakpoint (a block with `cache_control`, at most 4), the API reads the
//!   longest prefix that an earlier request wrote, ending at the breakpoint or at most
//!   20 blocks before it, and writes the prefix ending at the breakpoint;
//! - a prefix under 1,024 tokens is not cached; entries live for their TTL (a loop's
//!   steps come well within 5 minutes here, so none expires);
//! - what a request reads is the longest prefix any of its breakpoints read.
//!
//! Tokens are estimated at 4 bytes of a block's JSON each: the share is a ratio.

use std::collections::HashSet;
use std::hash::{DefaultHasher, Hash, Hasher};

use serde_json::Value;

const LOOKBACK: usize = 20;
const MINIMUM: usize = 1024;

#[derive(Default)]
pub struct Cache {
    written: HashSet<u64>,
    pub read: usize,
    pub input: usize,
}

impl Cache {
    /// Sends one request body (`{system?, messages}`) through the cache.
    pub fn request(&mut self, payload: &Value) {
        let blocks = blocks(payload);
        let (mut prefixes, mut tokens, mut marks) = (Vec::new(), Vec::new(), Vec::new());
        let (mut hasher, mut total) = (DefaultHasher::new(), 0);
        for (k, block) in blocks.iter().enumerate() {
            let mut plain = block.clone();
            let marked = plain.as_object_mut().and_then(|o| o.remove("cache_control")).is_some();
            let text = plain.to_string();
            text.hash(&mut hasher);
            total += text.len().div_ceil(4);
            prefixes.push(hasher.finish());
            tokens.push(total);
            if marked {
                marks.push(k);
            }
        }
        assert!(marks.len() <= 4, "more than 4 breakpoints: the API refuses the request");
        let mut read = 0;
        for &mark in &marks {
            let earliest = mark.saturating_sub(LOOKBACK);
            if let Some(hit) = (earliest..=mark).rev().find(|&p| self.written.contains(&prefixes[p])) {
                read = read.max(tokens[hit]);
            }
        }
        for &mark in &marks {
            if tokens[mark] >= MINIMUM {
                self.written.insert(prefixes[mark]);
            }
        }
        self.read += read;
        self.input += total;
    }

    pub fn share(&self) -> f64 {
        self.read as f64 / self.input.max(1) as f64
    }
}

/// The body's blocks in the order the API reads them.
fn blocks(payload: &Value) -> Vec<Value> {
    let mut out = Vec::new();
    match &payload["system"] {
        Value::String(text) => out.push(serde_json::json!({"type": "text", "text": text})),
        Value::Array(blocks) => out.extend(blocks.iter().cloned()),
        _ => {}
    }
    for message in payload["messages"].as_array().into_iter().flatten() {
        out.extend(message["content"].as_array().into_iter().flatten().cloned());
    }
    out
}

/// `payload` with every breakpoint taken out and one put on its last block: the naive
/// placement the measure compares with.
pub fn last_block_only(payload: &Value) -> Value {
    let mut payload = payload.clone();
    if let Some(system) = payload["system"].as_array_mut() {
        system.iter_mut().filter_map(Value::as_object_mut).for_each(|b| drop(b.remove("cache_control")));
    }
    let messages = payload["messages"].as_array_mut().expect("messages");
    for block in messages.iter_mut().flat_map(|m| m["content"].as_array_mut().into_iter().flatten()) {
        block.as_object_mut().map(|b| b.remove("cache_control"));
    }
    if let Some(last) = messages.last_mut().and_then(|m| m["content"].as_array_mut()).and_then(|c| c.last_mut()) {
        last["cache_control"] = serde_json::json!({"type": "ephemeral"});
    }
    payload
}
