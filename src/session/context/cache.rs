//! Prompt caching (spec 17.2): where a body's cache breakpoints go, and the limits
//! Anthropic puts on them.
//!
//! Anthropic reads a cache entry at a breakpoint from the longest prefix written before,
//! looking back at most 20 blocks. So convo marks three places: the end of `system`, the
//! end of the body (what the next request reads), and the end of the message that ended
//! the previous request (the last message before the latest assistant turn), which that
//! request wrote, however many blocks the step since added. Marks go on eligible blocks
//! only (text that is not empty, images, documents, tool calls and results), never on
//! thinking; at most 4 in all, and a longer TTL never after a shorter one. OpenAI keys its
//! cache by `prompt_cache_key`; Gemini caches on its own.

use serde_json::{Map, Value, json};

use crate::error::{Error, Result};
use crate::session::export::{Export, Format, Violation, Warning};
use crate::session::tokens::{count_text, count_value};

/// Anthropic's cache lifetimes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Ttl {
    FiveMinutes,
    OneHour,
}

impl Ttl {
    fn parse(what: &str, value: &Value) -> Result<Ttl> {
        match value.as_str() {
            Some("5m") => Ok(Ttl::FiveMinutes),
            Some("1h") => Ok(Ttl::OneHour),
            _ => Err(Error::invalid(format!("cache.{what}: must be \"5m\" or \"1h\", got {value}"))),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Ttl::FiveMinutes => "5m",
            Ttl::OneHour => "1h",
        }
    }
}

/// `cache`: `true`, or an object with Anthropic's `ttl` and `system_ttl`, OpenAI's `key`
/// and `retention`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Cache {
    pub ttl: Option<Ttl>,
    pub system_ttl: Option<Ttl>,
    pub key: Option<String>,
    pub retention: Option<String>,
}

impl Cache {
    /// Reads the request's `cache` member: `false` (or absent) is no caching.
    pub fn param(value: Option<&Value>) -> Result<Option<Cache>> {
        let object = match value {
            None | Some(Value::Null | Value::Bool(false)) => return Ok(None),
            Some(Value::Bool(true)) => return Ok(Some(Cache::default())),
            Some(Value::Object(object)) => object,
            Some(other) => return Err(Error::invalid(format!("cache: must be true, false or an object, got {other}"))),
        };
        let ttl = |what: &str| object.get(what).filter(|v| !v.is_null()).map(|v| Ttl::parse(what, v)).transpose();
        let text = |what: &str| match object.get(what) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(Error::invalid(format!("cache.{what}: must be a string, got {other}"))),
        };
        let cache = Cache {
            ttl: ttl("ttl")?,
            system_ttl: ttl("system_ttl")?,
            key: text("key")?,
            retention: text("retention")?,
        };
        if let (Some(system), Some(ttl)) = (cache.system_ttl, cache.ttl)
            && system < ttl
        {
            return Err(Error::invalid(format!(
                "cache.system_ttl: {} is shorter than ttl {}; a longer TTL may never follow a shorter one",
                system.name(),
                ttl.name()
            )));
        }
        if let Some(retention) = cache.retention.as_deref()
            && !matches!(retention, "in_memory" | "24h")
        {
            return Err(Error::invalid(format!(
                "cache.retention: must be \"in_memory\" or \"24h\", got \"{retention}\""
            )));
        }
        Ok(Some(cache))
    }

    /// Marks the body's breakpoints (Anthropic), names its cache (OpenAI), or says that
    /// nothing is added (Gemini).
    /// Returns the tokens the marks add to the body's count (`count_payload` counts
    /// Anthropic's `cache_control` values and the system block's type; OpenAI's keys sit
    /// outside what it counts).
    pub fn place(&self, format: Format, export: &mut Export, session_id: &str) -> usize {
        let payload = &mut export.payload;
        match format {
            Format::AnthropicMessages => return self.breakpoints(payload),
            Format::OpenaiChat | Format::OpenaiResponses => {
                payload["prompt_cache_key"] = json!(self.key.as_deref().unwrap_or(session_id));
                if let Some(retention) = &self.retention {
                    payload["prompt_cache_retention"] = json!(retention);
                }
            }
            Format::GeminiContents | Format::GeminiInteractions => export
                .warnings
                .push(Warning { index: None, message: "cache adds nothing: Gemini caches implicitly".into() }),
        }
        0
    }

    fn control(ttl: Option<Ttl>) -> Value {
        let mut control = json!({"type": "ephemeral"});
        if let Some(ttl) = ttl {
            control["ttl"] = json!(ttl.name());
        }
        control
    }

    /// Anthropic's breakpoints: the body's end, the previous request's end, the system
    /// prompt's end, as many as the 4 allowed leave room for (beside any the history
    /// holds already). Returns the tokens they add.
    fn breakpoints(&self, payload: &mut Value) -> usize {
        let mut room = 4usize.saturating_sub(marks(payload).len());
        let messages = payload["messages"].as_array().map(Vec::as_slice).unwrap_or_default();
        let end = last_eligible(messages, messages.len());
        let latest_answer = messages.iter().rposition(|m| m["role"] == "assistant");
        let previous = latest_answer.and_then(|a| last_eligible(messages, a)).filter(|p| Some(*p) != end);
        let mut added = 0;
        for (m, b) in [end, previous].into_iter().flatten().take(room) {
            let control = Cache::control(self.ttl);
            added += count_value(&control);
            payload["messages"][m]["content"][b]["cache_control"] = control;
            room -= 1;
        }
        if room == 0 {
            return added;
        }
        let control = Cache::control(self.system_ttl.or(self.ttl));
        let marked = count_value(&control);
        match payload.get_mut("system") {
            Some(Value::String(text)) if !text.is_empty() => {
                let text = std::mem::take(text);
                payload["system"] = json!([{"type": "text", "text": text, "cache_control": control}]);
                added + marked + count_text("text")
            }
            Some(Value::Array(blocks)) => match blocks.iter_mut().rev().find(|b| eligible(b)) {
                Some(block) => {
                    block["cache_control"] = control;
                    added + marked
                }
                None => added,
            },
            _ => added,
        }
    }
}

/// Whether a breakpoint may go on a block: text that is not empty, an image, a document,
/// a tool call or result; not thinking, nor a block marked already.
fn eligible(block: &Value) -> bool {
    let kind = block["type"].as_str().unwrap_or_default();
    let text = kind == "text" && block["text"].as_str().is_some_and(|t| !t.is_empty());
    (text || matches!(kind, "image" | "document" | "tool_use" | "tool_result")) && block.get("cache_control").is_none()
}

/// The last eligible block of the messages before `before`: (message, block).
fn last_eligible(messages: &[Value], before: usize) -> Option<(usize, usize)> {
    messages[..before].iter().enumerate().rev().find_map(|(m, message)| {
        let blocks = message["content"].as_array()?;
        blocks.iter().rposition(eligible).map(|b| (m, b))
    })
}

/// Every `cache_control` of a body, in the order the API reads them (system, then
/// messages): where it stands (for the error's path), the message it is in, its TTL.
fn marks(payload: &Value) -> Vec<(String, usize, Ttl)> {
    let ttl = |c: &Map<String, Value>| match c.get("ttl").and_then(Value::as_str) {
        Some("1h") => Ttl::OneHour,
        _ => Ttl::FiveMinutes,
    };
    let mut found = Vec::new();
    for (k, block) in payload["system"].as_array().into_iter().flatten().enumerate() {
        if let Some(control) = block.get("cache_control").and_then(Value::as_object) {
            found.push((format!("system.{k}"), 0, ttl(control)));
        }
    }
    for (i, message) in payload["messages"].as_array().into_iter().flatten().enumerate() {
        for (k, block) in message["content"].as_array().into_iter().flatten().enumerate() {
            if let Some(control) = block.get("cache_control").and_then(Value::as_object) {
                found.push((format!("messages.{i}.content.{k}"), i, ttl(control)));
            }
        }
    }
    found
}

/// What Anthropic rejects of a body's breakpoints: more than 4, and a 1-hour one after a
/// 5-minute one, with the API's own words.
pub(super) fn violations(export: &Export) -> Vec<Violation> {
    let marks = marks(&export.payload);
    let index = |i: usize| export.sources.get(i).copied().unwrap_or(i);
    let mut found = Vec::new();
    if marks.len() > 4 {
        let provider_error =
            format!("A maximum of 4 blocks with cache_control may be provided. Found {}.", marks.len());
        found.push(Violation { index: index(marks[4].1), rule: "cache_breakpoints", provider_error });
    }
    let mut shorter_seen = false;
    for (path, i, ttl) in &marks {
        if *ttl == Ttl::OneHour && shorter_seen {
            let provider_error = format!(
                "{path}.cache_control.ttl: a ttl='1h' cache_control block must not come after a ttl='5m' \
                 cache_control block. Note that blocks are processed in the following order: tools, system, messages."
            );
            found.push(Violation { index: index(*i), rule: "cache_ttl_order", provider_error });
            break;
        }
        shorter_seen |= *ttl == Ttl::FiveMinutes;
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(t: &str) -> Value {
        json!({"type": "text", "text": t})
    }

    /// The body with `cache`'s marks, which add to its count what `place` says.
    fn placed(cache: &Cache, payload: Value) -> Value {
        let before = crate::session::tokens::count_payload(&payload);
        let mut export = Export { payload, warnings: Vec::new(), sources: Vec::new() };
        let added = cache.place(Format::AnthropicMessages, &mut export, "s");
        assert_eq!(crate::session::tokens::count_payload(&export.payload), before + added);
        export.payload
    }

    #[test]
    fn breakpoints_go_on_system_the_previous_request_and_the_body_end() {
        let result = |id: &str| json!({"type": "tool_result", "tool_use_id": id, "content": "r"});
        let uses = json!([{"type": "thinking", "thinking": "t", "signature": "s"}, {"type": "tool_use", "id": "b", "name": "f", "input": {}}]);
        let payload = json!({"system": "be brief", "messages": [
            {"role": "user", "content": [text("go")]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "f", "input": {}}]},
            {"role": "user", "content": [result("a")]},
            {"role": "assistant", "content": uses},
            {"role": "user", "content": [result("b"), text("")]},
        ]});
        let cache = Cache { ttl: Some(Ttl::FiveMinutes), system_ttl: Some(Ttl::OneHour), ..Cache::default() };
        let out = placed(&cache, payload);
        assert_eq!(
            out["system"],
            json!([{"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral", "ttl": "1h"}}])
        );
        let five = json!({"type": "ephemeral", "ttl": "5m"});
        assert_eq!(out["messages"][4]["content"][0]["cache_control"], five, "the body's end, past the empty text");
        assert_eq!(out["messages"][2]["content"][0]["cache_control"], five, "the previous request's end");
        assert_eq!(marks(&out).len(), 3);
        let export = Export { payload: out, warnings: Vec::new(), sources: Vec::new() };
        assert!(violations(&export).is_empty(), "{:?}", violations(&export));
    }

    #[test]
    fn never_on_thinking_and_never_more_than_four() {
        let marked = |t: &str| json!({"type": "text", "text": t, "cache_control": {"type": "ephemeral"}});
        let payload = json!({"messages": [
            {"role": "user", "content": [marked("a"), marked("b"), marked("c"), text("d")]},
            {"role": "assistant", "content": [{"type": "thinking", "thinking": "t", "signature": "s"}]},
        ]});
        let out = placed(&Cache::default(), payload);
        assert_eq!(out["messages"][0]["content"][3]["cache_control"], json!({"type": "ephemeral"}));
        assert!(out["messages"][1]["content"][0].get("cache_control").is_none());
        assert_eq!(marks(&out).len(), 4);
    }

    #[test]
    fn the_validator_catches_five_marks_and_a_longer_ttl_after_a_shorter() {
        let mark = |ttl: &str| json!({"type": "text", "text": "x", "cache_control": {"type": "ephemeral", "ttl": ttl}});
        let payload = json!({"system": [mark("5m")], "messages": [{"role": "user", "content": [mark("5m"), mark("1h"), mark("5m"), mark("5m")]}]});
        let export = Export { payload, warnings: Vec::new(), sources: vec![7] };
        let found = violations(&export);
        assert_eq!(found.iter().map(|v| v.rule).collect::<Vec<_>>(), ["cache_breakpoints", "cache_ttl_order"]);
        assert_eq!(found[0].provider_error, "A maximum of 4 blocks with cache_control may be provided. Found 5.");
        assert!(found[1].provider_error.starts_with("messages.0.content.1.cache_control.ttl: a ttl='1h'"));
        assert_eq!(found[1].index, 7);
    }

    #[test]
    fn a_system_ttl_shorter_than_ttl_is_refused() {
        let err = Cache::param(Some(&json!({"ttl": "1h", "system_ttl": "5m"}))).unwrap_err();
        assert!(err.to_string().contains("system_ttl: 5m is shorter than ttl 1h"), "{err}");
        assert_eq!(Cache::param(Some(&json!(false))).unwrap(), None);
        assert!(Cache::param(Some(&json!({"ttl": "10m"}))).is_err());
        assert!(Cache::param(Some(&json!("yes"))).is_err());
    }
}
