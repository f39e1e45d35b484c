//! OpenAI Chat Completions: `{messages}`, the system prompt first, tool calls as
//! `{id, type: "function", function: {name, arguments}}` with the arguments as a JSON
//! string, results as `tool` messages.

use serde_json::{Value, json};

use super::{Export, Format, Options, Warning, calls, images, replay, text, unexpressed_parts};
use crate::session::message::{Message, Role};

pub(super) fn export(system: Option<&str>, messages: &[impl AsRef<Message>], options: &Options) -> Export {
    let (mut out, mut sources, mut warnings) = (Vec::new(), Vec::new(), Vec::new());
    if let Some(system) = system {
        out.push(system_message(system));
        sources.push(0);
    }
    for (i, m) in messages.iter().map(AsRef::as_ref).enumerate() {
        if let Some(message) = item(i, m, options, &mut warnings) {
            out.push(message);
            sources.push(i);
        }
    }
    Export { payload: json!({"messages": out}), warnings, sources }
}

pub(super) fn system_message(system: &str) -> Value {
    json!({"role": "system", "content": system})
}

/// A message's provider message, if it has one: each message makes one of its own, or
/// none (an empty answer, with `fix`).
pub(super) fn item(i: usize, m: &Message, options: &Options, warnings: &mut Vec<Warning>) -> Option<Value> {
    if let Some(body) = replay(Format::OpenaiChat, i, m, options, warnings) {
        return Some(body.clone());
    }
    if options.fix && m.role == Role::Assistant && text(&m.content).is_empty() && calls(m).is_empty() {
        warnings.push(Warning { index: Some(i), message: "an empty message was left out".into() });
        return None;
    }
    let mut message = match m.role {
        Role::System => json!({"role": "system", "content": text(&m.content)}),
        Role::User => json!({"role": "user", "content": user_content(i, m, warnings)}),
        Role::Assistant => assistant(m),
        Role::Tool => {
            unexpressed_parts(i, m, &[], warnings);
            let left_out = images(i, m, warnings).len();
            if left_out > 0 {
                let id = m.tool_call_id.as_deref().unwrap_or_default();
                let message = format!(
                    "{left_out} image(s) of the result of call {} left out: Chat Completions cannot carry an \
                     image in a tool message",
                    crate::error::quote(id)
                );
                warnings.push(Warning { index: Some(i), message });
            }
            json!({"role": "tool", "tool_call_id": m.tool_call_id, "content": text(&m.content)})
        }
    };
    if let Some(name) = &m.name
        && m.role != Role::Tool
    {
        message["name"] = json!(name);
    }
    Some(message)
}

/// Parts of OpenAI's own that go through as given.
const OWN_PARTS: &[&str] = &["input_audio", "file"];

fn user_content(i: usize, m: &Message, warnings: &mut Vec<Warning>) -> Value {
    unexpressed_parts(i, m, OWN_PARTS, warnings);
    let images = images(i, m, warnings);
    let own: Vec<&Value> = m
        .content
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["type"].as_str().is_some_and(|t| OWN_PARTS.contains(&t)))
        .collect();
    let text = text(&m.content);
    if images.is_empty() && own.is_empty() {
        return json!(text);
    }
    let mut parts = Vec::new();
    if !text.is_empty() {
        parts.push(json!({"type": "text", "text": text}));
    }
    parts.extend(own.into_iter().cloned());
    for image in images {
        let url = format!("data:{};base64,{}", image.media_type, image.data);
        parts.push(json!({"type": "image_url", "image_url": {"url": url}}));
    }
    Value::Array(parts)
}

fn assistant(m: &Message) -> Value {
    let text = text(&m.content);
    let calls = calls(m);
    let content = if text.is_empty() && !calls.is_empty() { Value::Null } else { json!(text) };
    let mut message = json!({"role": "assistant", "content": content});
    if !calls.is_empty() {
        let calls: Vec<Value> = calls
            .into_iter()
            .map(|c| {
                let arguments = c.arguments_text();
                json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": arguments}})
            })
            .collect();
        message["tool_calls"] = Value::Array(calls);
    }
    message
}

pub(super) fn validate(payload: &Value) -> Vec<(usize, &'static str, String)> {
    let mut found = Vec::new();
    let messages = payload["messages"].as_array().map(Vec::as_slice).unwrap_or_default();
    // The open group: the index of its assistant message and its unanswered call ids.
    let mut open: Option<(usize, Vec<String>)> = None;
    let unanswered = |found: &mut Vec<_>, open: &mut Option<(usize, Vec<String>)>| {
        if let Some((at, ids)) = open.take()
            && !ids.is_empty()
        {
            found.push((
                at,
                "call_without_result",
                format!(
                    "An assistant message with 'tool_calls' must be followed by tool messages responding to each \
                     'tool_call_id'. The following tool_call_ids did not have response messages: {}",
                    ids.join(", ")
                ),
            ));
        }
    };
    for (i, m) in messages.iter().enumerate() {
        if m["role"] == "tool" {
            let id = m["tool_call_id"].as_str().unwrap_or_default();
            match open.as_mut().map(|(_, ids)| ids) {
                Some(ids) if ids.iter().any(|x| x == id) => ids.retain(|x| x != id),
                _ => found.push((
                    i,
                    "tool_without_call",
                    "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with \
                     'tool_calls'."
                        .into(),
                )),
            }
            continue;
        }
        unanswered(&mut found, &mut open);
        if let Some(calls) = m["tool_calls"].as_array() {
            open = Some((i, calls.iter().filter_map(|c| c["id"].as_str().map(str::to_owned)).collect()));
        }
    }
    unanswered(&mut found, &mut open);
    found
}
