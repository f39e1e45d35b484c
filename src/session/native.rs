//! An assistant turn in its provider's own form (`native`), kept beside convo's common
//! form, and the usage it cost (spec section 13). From a provider's whole response
//! (`from_response`) come the turn's body, its model, its normalised usage and why it
//! stopped; from a body comes its common form (`derive`): the text and the tool calls
//! every other format is built from. Pure.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::error::{Error, Result};
use crate::session::export::Format;

/// A turn as its provider returned it: `body` is Anthropic's `content` array, the
/// Responses API's `output` items, Chat's `choices[0].message`, or Gemini's candidate
/// `content`, member order and all.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Native {
    pub format: Format,
    #[serde(default)]
    pub model: Option<String>,
    pub body: Value,
}

/// Tokens a response cost, normalised across providers; `None` where the provider did
/// not say.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Usage {
    #[serde(default)]
    pub input_tokens: Option<u64>,
    #[serde(default)]
    pub output_tokens: Option<u64>,
    #[serde(default)]
    pub cache_read_tokens: Option<u64>,
    #[serde(default)]
    pub cache_write_tokens: Option<u64>,
    #[serde(default)]
    pub reasoning_tokens: Option<u64>,
}

/// What a session's responses have cost since it was created: each member the sum of
/// the non-null values, 0 when none.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsageTotals {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_read_tokens: u64,
    pub cache_write_tokens: u64,
    pub reasoning_tokens: u64,
}

impl UsageTotals {
    pub fn add(&mut self, usage: &Usage) {
        let add = |sum: &mut u64, n: Option<u64>| *sum = sum.saturating_add(n.unwrap_or(0));
        add(&mut self.input_tokens, usage.input_tokens);
        add(&mut self.output_tokens, usage.output_tokens);
        add(&mut self.cache_read_tokens, usage.cache_read_tokens);
        add(&mut self.cache_write_tokens, usage.cache_write_tokens);
        add(&mut self.reasoning_tokens, usage.reasoning_tokens);
    }

    pub fn of<'a>(usages: impl IntoIterator<Item = &'a Usage>) -> Self {
        let mut totals = UsageTotals::default();
        usages.into_iter().for_each(|u| totals.add(u));
        totals
    }
}

/// A provider's response, read: the turn to store and what the message's metadata gets.
#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    pub native: Native,
    pub usage: Usage,
    pub response_id: Option<String>,
    pub stop_reason: Option<String>,
}

/// The common form of a native turn: its text, and its calls (a Gemini call may come
/// without an id; `assign_ids` gives it one).
#[derive(Debug, Clone, PartialEq)]
pub struct Common {
    pub texts: Vec<String>,
    pub calls: Vec<Call>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    pub id: Option<String>,
    pub name: String,
    pub arguments: Value,
}

impl Common {
    /// `content`: null without non-empty text, a string for one text, else text parts.
    pub fn content(&self) -> Value {
        let texts: Vec<&String> = self.texts.iter().filter(|t| !t.is_empty()).collect();
        match texts.as_slice() {
            [] => Value::Null,
            [one] => json!(one),
            many => many.iter().map(|t| json!({"type": "text", "text": t})).collect(),
        }
    }

    /// `tool_calls` as convo keeps them (`{id, name, arguments}`), `None` for no call;
    /// every call must have its id by now.
    pub fn tool_calls(&self) -> Option<Vec<Value>> {
        if self.calls.is_empty() {
            return None;
        }
        let call = |c: &Call| json!({"id": c.id.clone().unwrap_or_default(), "name": c.name, "arguments": c.arguments});
        Some(self.calls.iter().map(call).collect())
    }

    /// Gives each call without an id `call_<n>`, n counting from 1 and skipping ids
    /// `taken` (the session's) or given here already.
    pub fn assign_ids(&mut self, taken: &HashSet<String>) {
        let mut given: HashSet<String> = self.calls.iter().filter_map(|c| c.id.clone()).collect();
        let mut n = 0u64;
        for call in self.calls.iter_mut().filter(|c| c.id.is_none()) {
            let id = loop {
                n += 1;
                let id = format!("call_{n}");
                if !taken.contains(&id) && !given.contains(&id) {
                    break id;
                }
            };
            given.insert(id.clone());
            call.id = Some(id);
        }
    }

    /// Whether a stored `content` and `tool_calls` are this common form: equal text and
    /// calls, an id given for a call the body names none for.
    pub fn agrees_with(&self, content: &Value, tool_calls: Option<&[Value]>) -> bool {
        let given = tool_calls.unwrap_or_default();
        let content_agrees = *content == self.content() || (content.is_null() && self.content().is_null());
        content_agrees
            && given.len() == self.calls.len()
            && self.calls.iter().zip(given).all(|(call, stored)| {
                let id = stored.get("id").and_then(Value::as_str).filter(|id| !id.is_empty());
                id.is_some()
                    && call.id.as_deref().is_none_or(|own| Some(own) == id)
                    && stored.get("name").and_then(Value::as_str) == Some(call.name.as_str())
                    && stored.get("arguments") == Some(&call.arguments)
            })
    }
}

/// Reads a provider's whole response as the host received it.
pub fn from_response(format: Format, response: &Value) -> Result<Response> {
    let object = response.as_object().ok_or_else(|| expected(format, "an object"))?;
    let text = |key: &str| object.get(key).and_then(Value::as_str).map(str::to_owned);
    let (body, model, stop_reason, usage) = match format {
        Format::AnthropicMessages => {
            if text("type").as_deref() != Some("message") {
                return Err(expected(format, "a `message` (type \"message\")"));
            }
            let content = object.get("content").filter(|c| c.as_array().is_some_and(|c| !c.is_empty()));
            let content = content.ok_or_else(|| no_output(format, "its `content` is empty"))?;
            (content.clone(), text("model"), text("stop_reason"), anthropic_usage(object.get("usage")))
        }
        // The compact endpoint's result (spec 17.1): its `output` (the user messages it
        // lists, then one compaction item) is the turn; no status, no stop reason.
        Format::OpenaiResponses if text("object").as_deref() == Some("response.compaction") => {
            let output = object.get("output").filter(|o| o.as_array().is_some_and(|o| !o.is_empty()));
            let output = output.ok_or_else(|| no_output(format, "its `output` is empty"))?;
            (output.clone(), text("model"), None, responses_usage(object.get("usage")))
        }
        Format::OpenaiResponses => {
            if text("object").as_deref() != Some("response") {
                return Err(expected(format, "a `response` (object \"response\")"));
            }
            let status = text("status");
            if matches!(status.as_deref(), Some("failed" | "cancelled")) {
                return Err(no_output(format, &format!("its status is {}", status.unwrap_or_default())));
            }
            let output = object.get("output").filter(|o| o.as_array().is_some_and(|o| !o.is_empty()));
            let output = output.ok_or_else(|| no_output(format, "its `output` is empty"))?;
            let stop = match status.as_deref() {
                Some("incomplete") => {
                    response.pointer("/incomplete_details/reason").and_then(Value::as_str).map(str::to_owned).or(status)
                }
                _ => status,
            };
            (output.clone(), text("model"), stop, responses_usage(object.get("usage")))
        }
        Format::OpenaiChat => {
            if text("object").as_deref() != Some("chat.completion") {
                return Err(expected(format, "a `chat.completion` (object \"chat.completion\")"));
            }
            let choice = object.get("choices").and_then(|c| c.get(0));
            let message = choice.and_then(|c| c.get("message")).filter(|m| m.is_object());
            let message = message.ok_or_else(|| no_output(format, "it has no `choices[0].message`"))?;
            let stop = choice.and_then(|c| c.get("finish_reason")).and_then(Value::as_str).map(str::to_owned);
            let said = |key: &str| match message.get(key) {
                None | Some(Value::Null) => false,
                Some(Value::String(s)) => !s.is_empty(),
                Some(Value::Array(a)) => !a.is_empty(),
                Some(_) => true,
            };
            if stop.as_deref() == Some("content_filter") && !said("content") && !said("tool_calls") {
                return Err(no_output(format, "it was stopped by the content filter with no content"));
            }
            (message.clone(), text("model"), stop, chat_usage(object.get("usage")))
        }
        Format::GeminiContents => {
            let candidate = object.get("candidates").and_then(|c| c.get(0));
            if candidate.is_none() && !object.contains_key("candidates") && !object.contains_key("promptFeedback") {
                return Err(expected(format, "a `GenerateContentResponse` (with `candidates`)"));
            }
            let candidate = candidate.ok_or_else(|| no_output(format, "it has no candidate"))?;
            let content = candidate.get("content").filter(|c| c.get("parts").is_some_and(Value::is_array));
            let content = content.ok_or_else(|| no_output(format, "its candidate has no `content.parts`"))?;
            let stop = candidate.get("finishReason").and_then(Value::as_str).map(str::to_owned);
            (content.clone(), text("modelVersion"), stop, gemini_usage(object.get("usageMetadata")))
        }
        // An Interaction (`object: "interaction"`): its `steps` are the turn; `id` is
        // absent when it was not stored.
        Format::GeminiInteractions => {
            if text("object").as_deref().is_some_and(|o| o != "interaction") || !object.contains_key("status") {
                return Err(expected(format, "an Interaction (object \"interaction\", with `status`)"));
            }
            // `completed`, or `requires_action` (calls to answer), or `incomplete` (cut
            // short) carry output; `failed`, `cancelled`, `in_progress`, … do not.
            let status = text("status");
            if !matches!(status.as_deref(), Some("completed" | "requires_action" | "incomplete")) {
                let status = status.unwrap_or_else(|| "missing".to_owned());
                return Err(no_output(format, &format!("its status is {status}")));
            }
            let steps = object.get("steps").filter(|s| s.as_array().is_some_and(|s| !s.is_empty()));
            let steps = steps.ok_or_else(|| no_output(format, "it has no `steps`"))?;
            (steps.clone(), text("model"), status, interactions_usage(object.get("usage")))
        }
    };
    let response_id = match format {
        Format::GeminiContents => text("responseId"),
        _ => text("id"),
    };
    Ok(Response { native: Native { format, model, body }, usage, response_id, stop_reason })
}

fn expected(format: Format, what: &str) -> Error {
    Error::invalid(format!("response: expected {what}, as {} returns one", format.provider()))
}

fn no_output(format: Format, why: &str) -> Error {
    Error::invalid(format!(
        "response: the {} response carries no assistant output ({why}); nothing was stored",
        format.provider()
    ))
}

fn n(usage: Option<&Value>, pointer: &str) -> Option<u64> {
    usage?.pointer(pointer)?.as_u64()
}

fn sum(parts: &[Option<u64>]) -> Option<u64> {
    parts.iter().any(Option::is_some).then(|| parts.iter().flatten().fold(0u64, |a, b| a.saturating_add(*b)))
}

/// Anthropic's usage, input counting what was read from and written to the cache. With
/// `iterations` (a turn that compacted, or looped through server tools), each member is
/// the sum over them: that is what was billed, the top-level fields leaving the
/// compaction's sampling out (spec 17.1).
fn anthropic_usage(usage: Option<&Value>) -> Usage {
    let iterations = usage.and_then(|u| u.get("iterations")).and_then(Value::as_array).filter(|i| !i.is_empty());
    let Some(iterations) = iterations else { return anthropic_tokens(usage) };
    let mut summed = Usage::default();
    for iteration in iterations.iter().map(|i| anthropic_tokens(Some(i))) {
        summed.input_tokens = sum(&[summed.input_tokens, iteration.input_tokens]);
        summed.output_tokens = sum(&[summed.output_tokens, iteration.output_tokens]);
        summed.cache_read_tokens = sum(&[summed.cache_read_tokens, iteration.cache_read_tokens]);
        summed.cache_write_tokens = sum(&[summed.cache_write_tokens, iteration.cache_write_tokens]);
    }
    summed.reasoning_tokens = n(usage, "/output_tokens_details/thinking_tokens");
    summed
}

/// One usage object of Anthropic's (the top level's, or an iteration's).
fn anthropic_tokens(usage: Option<&Value>) -> Usage {
    let (write, read) = (n(usage, "/cache_creation_input_tokens"), n(usage, "/cache_read_input_tokens"));
    let input = n(usage, "/input_tokens").map(|i| sum(&[Some(i), write, read]).unwrap_or(i));
    Usage {
        input_tokens: input,
        output_tokens: n(usage, "/output_tokens"),
        cache_read_tokens: read,
        cache_write_tokens: write,
        reasoning_tokens: n(usage, "/output_tokens_details/thinking_tokens"),
    }
}

fn responses_usage(usage: Option<&Value>) -> Usage {
    Usage {
        input_tokens: n(usage, "/input_tokens"),
        output_tokens: n(usage, "/output_tokens"),
        cache_read_tokens: n(usage, "/input_tokens_details/cached_tokens"),
        cache_write_tokens: n(usage, "/input_tokens_details/cache_write_tokens"),
        reasoning_tokens: n(usage, "/output_tokens_details/reasoning_tokens"),
    }
}

fn chat_usage(usage: Option<&Value>) -> Usage {
    Usage {
        input_tokens: n(usage, "/prompt_tokens"),
        output_tokens: n(usage, "/completion_tokens"),
        cache_read_tokens: n(usage, "/prompt_tokens_details/cached_tokens"),
        cache_write_tokens: n(usage, "/prompt_tokens_details/cache_write_tokens"),
        reasoning_tokens: n(usage, "/completion_tokens_details/reasoning_tokens"),
    }
}

/// The Interactions API's usage: output counting the thought tokens, as Gemini's does.
fn interactions_usage(usage: Option<&Value>) -> Usage {
    let thoughts = n(usage, "/total_thought_tokens");
    Usage {
        input_tokens: n(usage, "/total_input_tokens"),
        output_tokens: sum(&[n(usage, "/total_output_tokens"), thoughts]),
        cache_read_tokens: n(usage, "/total_cached_tokens"),
        cache_write_tokens: None,
        reasoning_tokens: thoughts,
    }
}

fn gemini_usage(usage: Option<&Value>) -> Usage {
    let thoughts = n(usage, "/thoughtsTokenCount");
    Usage {
        input_tokens: n(usage, "/promptTokenCount"),
        output_tokens: sum(&[n(usage, "/candidatesTokenCount"), thoughts]),
        cache_read_tokens: n(usage, "/cachedContentTokenCount"),
        cache_write_tokens: None,
        reasoning_tokens: thoughts,
    }
}

/// The common form of a body of `format` (the text and calls every other format is
/// built from); -32602 when the body is not of that format's shape.
pub fn derive(native: &Native) -> Result<Common> {
    let body = &native.body;
    let (mut texts, mut calls) = (Vec::new(), Vec::new());
    let bad = |what: &str| Error::invalid(format!("native.body: {what}"));
    match native.format {
        Format::AnthropicMessages => {
            let blocks = body.as_array().ok_or_else(|| bad("must be Anthropic's `content` array"))?;
            for block in blocks {
                match block.get("type").and_then(Value::as_str) {
                    Some("text") => texts.push(string(block, "text")),
                    Some("tool_use") => calls.push(Call {
                        id: block.get("id").and_then(Value::as_str).map(str::to_owned),
                        name: string(block, "name"),
                        arguments: block.get("input").cloned().unwrap_or_else(|| json!({})),
                    }),
                    Some(_) => {}
                    None => return Err(bad("each block must have a `type`")),
                }
            }
        }
        Format::OpenaiResponses => {
            let items = body.as_array().ok_or_else(|| bad("must be the Responses API's `output` items"))?;
            for item in items {
                // An input message may leave out its `type` (`EasyInputMessage`), and
                // give its content as a string.
                let kind = item.get("type").and_then(Value::as_str);
                match kind.or_else(|| item.get("role").map(|_| "message")) {
                    // The compact endpoint's output lists the user's messages too.
                    Some("message") if item.get("role").is_some_and(|r| r != "assistant") => {}
                    Some("message") => match item.get("content") {
                        Some(Value::String(text)) => texts.push(text.clone()),
                        content => {
                            let parts = content.and_then(Value::as_array).into_iter().flatten();
                            texts.extend(parts.filter(|p| p["type"] == "output_text").map(|p| string(p, "text")));
                        }
                    },
                    Some("function_call") => calls.push(Call {
                        id: item.get("call_id").and_then(Value::as_str).map(str::to_owned),
                        name: string(item, "name"),
                        arguments: arguments(item.get("arguments")),
                    }),
                    Some(_) => {}
                    None => return Err(bad("each item must have a `type`")),
                }
            }
        }
        Format::OpenaiChat => {
            let message = body.as_object().ok_or_else(|| bad("must be Chat's `choices[0].message` object"))?;
            match message.get("content") {
                Some(Value::String(s)) => texts.push(s.clone()),
                Some(Value::Array(parts)) => {
                    texts.extend(parts.iter().filter(|p| p["type"] == "text").map(|p| string(p, "text")))
                }
                _ => {}
            }
            for call in message.get("tool_calls").and_then(Value::as_array).into_iter().flatten() {
                let function = call.get("function");
                calls.push(Call {
                    id: call.get("id").and_then(Value::as_str).map(str::to_owned),
                    name: function.map(|f| string(f, "name")).unwrap_or_default(),
                    arguments: arguments(function.and_then(|f| f.get("arguments"))),
                });
            }
        }
        Format::GeminiContents => {
            let parts = body.get("parts").and_then(Value::as_array);
            let parts = parts.ok_or_else(|| bad("must be Gemini's candidate `content` (with `parts`)"))?;
            for part in parts {
                if let Some(call) = part.get("functionCall") {
                    calls.push(Call {
                        id: call.get("id").and_then(Value::as_str).map(str::to_owned),
                        name: string(call, "name"),
                        arguments: call.get("args").cloned().unwrap_or_else(|| json!({})),
                    });
                } else if let Some(text) = part.get("text").and_then(Value::as_str)
                    && part.get("thought") != Some(&Value::Bool(true))
                {
                    texts.push(text.to_owned());
                }
            }
        }
        Format::GeminiInteractions => {
            let steps = body.as_array().ok_or_else(|| bad("must be the Interaction's `steps`"))?;
            for step in steps {
                match step.get("type").and_then(Value::as_str) {
                    Some("model_output") => {
                        let blocks = step.get("content").and_then(Value::as_array).into_iter().flatten();
                        texts.extend(blocks.filter(|b| b["type"] == "text").map(|b| string(b, "text")));
                    }
                    // The API gives every call its id; one without would be answered by an
                    // id the step never names.
                    Some("function_call") => calls.push(Call {
                        id: Some(
                            step.get("id")
                                .and_then(Value::as_str)
                                .ok_or_else(|| bad("each function_call step must have a string `id`"))?
                                .to_owned(),
                        ),
                        name: string(step, "name"),
                        arguments: arguments(step.get("arguments")),
                    }),
                    Some(_) => {}
                    None => return Err(bad("each step must have a `type`")),
                }
            }
        }
    }
    Ok(Common { texts, calls })
}

fn string(value: &Value, key: &str) -> String {
    value.get(key).and_then(Value::as_str).unwrap_or_default().to_owned()
}

/// Arguments as convo keeps them: a string holding a JSON object becomes the object;
/// any other string stays the JSON text it is (`"\"s\""` must not become `"s"`, which
/// would read back as other text), and anything else is kept.
fn arguments(given: Option<&Value>) -> Value {
    match given {
        Some(Value::String(s)) => match serde_json::from_str::<Value>(s) {
            Ok(object @ Value::Object(_)) => object,
            _ => Value::String(s.clone()),
        },
        Some(other) => other.clone(),
        None => json!({}),
    }
}

/// Whether a body made by `model` may be replayed to `wanted`: the same model, or one
/// is the other plus a date (`claude-opus-4-5` and `claude-opus-4-5-20251101`).
pub fn model_matches(model: Option<&str>, wanted: &str) -> bool {
    let Some(model) = model else { return false };
    model == wanted || dated(model, wanted) || dated(wanted, model)
}

/// `long` is `short` followed by `-YYYYMMDD` or `-YYYY-MM-DD`.
fn dated(long: &str, short: &str) -> bool {
    let Some(date) = long.strip_prefix(short).and_then(|rest| rest.strip_prefix('-')) else { return false };
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    match date.len() {
        8 => digits(date),
        10 => {
            let b = date.as_bytes();
            b[4] == b'-' && b[7] == b'-' && digits(&date[..4]) && digits(&date[5..7]) && digits(&date[8..])
        }
        _ => false,
    }
}

/// Whether a native body carries reasoning or signatures, which only its own format
/// can replay.
pub fn has_reasoning(native: &Native) -> bool {
    let body = &native.body;
    let items = || body.as_array().into_iter().flatten();
    match native.format {
        Format::AnthropicMessages => {
            items().any(|b| matches!(b["type"].as_str(), Some("thinking" | "redacted_thinking")))
        }
        Format::OpenaiResponses => items().any(|i| i["type"] == "reasoning"),
        Format::OpenaiChat => body.get("reasoning_content").is_some_and(|r| !r.is_null()),
        Format::GeminiContents => body["parts"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|p| p.get("thought") == Some(&Value::Bool(true)) || p.get("thoughtSignature").is_some()),
        Format::GeminiInteractions => items().any(|s| s["type"] == "thought"),
    }
}

/// The types of a body's steps that only its own format can carry: the Interactions
/// API's steps of built-in tools (`google_search_call`, `code_execution_result`, …),
/// each named once, in order.
pub fn own_steps(native: &Native) -> Vec<&str> {
    const COMMON: &[&str] = &["user_input", "model_output", "thought", "function_call", "function_result"];
    let mut found: Vec<&str> = Vec::new();
    if native.format == Format::GeminiInteractions {
        for kind in native.body.as_array().into_iter().flatten().filter_map(|s| s["type"].as_str()) {
            if !COMMON.contains(&kind) && !found.contains(&kind) {
                found.push(kind);
            }
        }
    }
    found
}

/// Whether a native body holds a provider's compaction that stands for everything before
/// it (spec 17.1): an Anthropic `compaction` block with its summary (one whose `content`
/// is null failed, and the API treats it as a no-op), or a Responses `compaction` item.
pub fn is_compaction_point(native: &Native) -> bool {
    let mut items = native.body.as_array().into_iter().flatten();
    match native.format {
        Format::AnthropicMessages => items.any(|b| b["type"] == "compaction" && b["content"].is_string()),
        Format::OpenaiResponses => items.any(|i| i["type"] == "compaction"),
        Format::OpenaiChat | Format::GeminiContents | Format::GeminiInteractions => false,
    }
}

/// Leaves a body's reasoning out (`clear_thinking`, spec 17.3): Anthropic's thinking and
/// redacted_thinking blocks; Responses reasoning items, with the ids of the items after
/// them (their `call_id`s kept), as a stateless request must; Chat's
/// `reasoning_content`; Gemini's thought parts and signatures. `true` when it held any.
pub fn strip_reasoning(native: &mut Native) -> bool {
    if !has_reasoning(native) {
        return false;
    }
    match native.format {
        Format::AnthropicMessages => {
            if let Some(blocks) = native.body.as_array_mut() {
                blocks.retain(|b| !matches!(b["type"].as_str(), Some("thinking" | "redacted_thinking")));
            }
        }
        Format::OpenaiResponses => {
            if let Some(items) = native.body.as_array_mut() {
                items.retain(|i| i["type"] != "reasoning");
                for item in items.iter_mut().filter(|i| matches!(i["type"].as_str(), Some("function_call" | "message")))
                {
                    item.as_object_mut().map(|o| o.remove("id"));
                }
            }
        }
        Format::OpenaiChat => {
            native.body.as_object_mut().map(|o| o.remove("reasoning_content"));
        }
        Format::GeminiContents => {
            if let Some(parts) = native.body.get_mut("parts").and_then(Value::as_array_mut) {
                parts.retain(|p| p.get("thought") != Some(&Value::Bool(true)));
                for part in parts.iter_mut().filter_map(Value::as_object_mut) {
                    part.remove("thoughtSignature");
                }
            }
        }
        Format::GeminiInteractions => {
            if let Some(steps) = native.body.as_array_mut() {
                steps.retain(|s| s["type"] != "thought");
            }
        }
    }
    true
}

/// The usage a client gives with a message (`from_dict`, `add_message`), checked.
pub fn usage_param(value: &Value) -> Result<Usage> {
    serde_json::from_value(value.clone()).map_err(|e| Error::invalid(format!("usage: {e}")))
}

/// Members of a native given by a client, checked: `{format, model?, body}`.
pub fn native_param(value: Value) -> Result<Native> {
    let object: Map<String, Value> = match value {
        Value::Object(object) => object,
        _ => return Err(Error::invalid("native: must be an object {format, model, body}")),
    };
    if !object.contains_key("body") {
        return Err(Error::invalid("native: missing field `body`"));
    }
    serde_json::from_value(Value::Object(object)).map_err(|e| Error::invalid(format!("native: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> Value {
        let path = format!("{}/tests/fixtures/providers/{name}.json", env!("CARGO_MANIFEST_DIR"));
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    #[test]
    fn an_anthropic_turn_keeps_its_blocks_and_derives_text_and_calls() {
        let response = fixture("anthropic_thinking_tool_use");
        let read = from_response(Format::AnthropicMessages, &response).unwrap();
        assert_eq!(read.native.body, response["content"], "the content array, as it came");
        assert_eq!(read.native.model.as_deref(), Some("claude-opus-4-6"));
        assert_eq!(read.stop_reason.as_deref(), Some("tool_use"));
        assert_eq!(read.response_id.as_deref(), Some("msg_011Ca79drmAA1JNhuF5YZikf"));
        let usage = Usage {
            input_tokens: Some(38 + 1912),
            output_tokens: Some(214),
            cache_read_tokens: Some(0),
            cache_write_tokens: Some(1912),
            reasoning_tokens: Some(131),
        };
        assert_eq!(read.usage, usage);
        let common = derive(&read.native).unwrap();
        assert_eq!(common.content(), json!("I'll check the current weather in both cities."));
        let calls = common.tool_calls().unwrap();
        assert_eq!(calls[0]["id"], "toolu_01NRrZKi33evThhcqajiJafW");
        assert_eq!(calls[1]["arguments"], json!({"location": "London, UK", "unit": "celsius"}));
        assert!(has_reasoning(&read.native));
    }

    #[test]
    fn a_responses_turn_pairs_results_by_call_id_never_the_item_id() {
        let read = from_response(Format::OpenaiResponses, &fixture("openai_responses_reasoning_calls")).unwrap();
        let common = derive(&read.native).unwrap();
        let calls = common.tool_calls().unwrap();
        assert_eq!(calls[0]["id"], "call_NMMoQkOVhAvFRMrYYMH4J2HD");
        assert_eq!(calls[0]["arguments"], json!({"location": "Paris, France", "unit": "celsius"}));
        assert_eq!(read.stop_reason.as_deref(), Some("completed"));
        assert!(read.usage.reasoning_tokens.is_some());
    }

    #[test]
    fn a_chat_turn_keeps_extra_members_and_its_usage_is_normalised() {
        let read = from_response(Format::OpenaiChat, &fixture("deepseek_chat_reasoning_content")).unwrap();
        assert!(read.native.body.get("reasoning_content").is_some());
        assert_eq!(read.stop_reason.as_deref(), Some("tool_calls"));
        assert_eq!(
            read.usage,
            Usage {
                input_tokens: Some(2312),
                output_tokens: Some(214),
                cache_read_tokens: Some(1920),
                cache_write_tokens: None,
                reasoning_tokens: Some(151)
            }
        );
        assert!(has_reasoning(&read.native));
    }

    #[test]
    fn a_gemini_turn_leaves_thoughts_out_and_ids_what_has_none() {
        let read = from_response(Format::GeminiContents, &fixture("gemini_thought_signatures")).unwrap();
        assert_eq!(read.native.model.as_deref(), Some("gemini-3-pro-preview"));
        assert_eq!(read.usage.output_tokens, Some(96 + 412));
        assert_eq!(read.usage.cache_read_tokens, Some(4096));
        let mut common = derive(&read.native).unwrap();
        assert_eq!(common.content(), json!("I'll look up the current weather in both cities."));
        let taken = HashSet::from(["call_1".to_owned()]);
        common.assign_ids(&taken);
        let ids: Vec<_> = common.calls.iter().map(|c| c.id.clone().unwrap()).collect();
        assert_eq!(ids, ["call_2", "call_3"]);
    }

    #[test]
    fn responses_arguments_that_are_not_an_object_stay_their_json_text() {
        let body = json!([
            {"type": "function_call", "call_id": "c1", "name": "echo", "arguments": "\"s\""},
            {"type": "function_call", "call_id": "c2", "name": "f", "arguments": "{\"a\": 1}"},
            {"role": "assistant", "content": "Hello!"},
        ]);
        let native = Native { format: Format::OpenaiResponses, model: None, body };
        let common = derive(&native).unwrap();
        assert_eq!(common.calls[0].arguments, json!("\"s\""), "a JSON string stays JSON text");
        assert_eq!(common.calls[1].arguments, json!({"a": 1}));
        assert_eq!(common.content(), json!("Hello!"), "a message item without `type`, its content a string");
    }

    #[test]
    fn responses_without_output_are_refused() {
        for (format, name) in [
            (Format::OpenaiResponses, "openai_responses_failed"),
            (Format::AnthropicMessages, "anthropic_refusal_empty"),
            (Format::GeminiContents, "gemini_no_candidates"),
            (Format::GeminiInteractions, "gemini_interactions_failed"),
            (Format::OpenaiChat, "openai_chat_content_filter"),
        ] {
            let error = from_response(format, &fixture(name)).unwrap_err().to_string();
            assert!(error.contains("carries no assistant output"), "{name}: {error}");
        }
        let error = from_response(Format::OpenaiChat, &fixture("anthropic_final_answer")).unwrap_err().to_string();
        assert!(error.contains("as Chat Completions returns one"), "{error}");
    }

    #[test]
    fn an_interactions_turn_keeps_its_steps_and_derives_text_and_calls() {
        let response = fixture("gemini_interactions_thought_calls");
        let read = from_response(Format::GeminiInteractions, &response).unwrap();
        assert_eq!(read.native.body, response["steps"], "the steps, as they came");
        assert_eq!(read.native.model.as_deref(), Some("gemini-3.1-pro-preview"));
        assert_eq!(read.stop_reason.as_deref(), Some("requires_action"));
        assert_eq!(read.response_id, response["id"].as_str().map(str::to_owned));
        let usage = Usage {
            input_tokens: Some(96),
            output_tokens: Some(58 + 212),
            cache_read_tokens: Some(0),
            cache_write_tokens: None,
            reasoning_tokens: Some(212),
        };
        assert_eq!(read.usage, usage);
        let common = derive(&read.native).unwrap();
        assert_eq!(common.content(), json!("I'll check the current weather in Paris and London."));
        let calls = common.tool_calls().unwrap();
        assert_eq!(calls[0]["id"], "isykdkwf");
        assert_eq!(calls[1]["arguments"], json!({"location": "London, UK", "unit": "celsius"}));
        assert!(has_reasoning(&read.native));
        let mut stripped = read.native.clone();
        assert!(strip_reasoning(&mut stripped));
        assert_eq!(stripped.body.as_array().unwrap().len(), 3, "the thought step left out");
        let stateless = from_response(Format::GeminiInteractions, &fixture("gemini_interactions_stateless")).unwrap();
        assert_eq!((stateless.response_id, stateless.stop_reason.as_deref()), (None, Some("completed")));
        let builtin = from_response(Format::GeminiInteractions, &fixture("gemini_interactions_builtin_tool")).unwrap();
        assert_eq!(own_steps(&builtin.native), ["google_search_call", "google_search_result"]);
    }

    #[test]
    fn models_match_with_or_without_a_date() {
        assert!(model_matches(Some("claude-opus-4-5-20251101"), "claude-opus-4-5"));
        assert!(model_matches(Some("gpt-5"), "gpt-5-2025-08-07"));
        assert!(!model_matches(Some("gpt-5-mini"), "gpt-5"));
        assert!(!model_matches(None, "gpt-5"));
    }
}
