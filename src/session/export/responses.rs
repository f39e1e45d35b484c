//! The OpenAI Responses API: `{instructions, input}`, the system prompt as
//! `instructions`; the history as input items: messages with typed content parts,
//! `function_call` items (their `call_id` is what results pair with) and
//! `function_call_output` items. A reasoning model's turn is replayed as its `output`
//! items, each reasoning item before the items it produced.

use serde_json::{Value, json};

use super::{Export, Format, Options, Warning, calls, images, replay, text, unexpressed_parts};
use crate::session::message::{Message, Role};

pub(super) fn export(system: Option<&str>, messages: &[impl AsRef<Message>], options: &Options) -> Export {
    let (mut input, mut sources, mut warnings) = (Vec::new(), Vec::new(), Vec::new());
    for (i, m) in messages.iter().map(AsRef::as_ref).enumerate() {
        let items = items(i, m, options, &mut warnings);
        sources.extend(std::iter::repeat_n(i, items.len()));
        input.extend(items);
    }
    let mut payload = json!({});
    if let Some(system) = system {
        payload["instructions"] = json!(system);
    }
    payload["input"] = Value::Array(input);
    Export { payload, warnings, sources }
}

/// A message's input items: each message makes items of its own, never merged.
pub(super) fn items(i: usize, m: &Message, options: &Options, warnings: &mut Vec<Warning>) -> Vec<Value> {
    match m.role {
        Role::System => vec![message("system", vec![json!({"type": "input_text", "text": text(&m.content)})])],
        Role::User => vec![message("user", user_content(i, m, warnings))],
        Role::Assistant => match replay(Format::OpenaiResponses, i, m, options, warnings) {
            Some(body) => native_items(i, body, options, warnings),
            None => assistant(i, m, options, warnings),
        },
        // A result with images is a list of `input_text` and `input_image` items.
        Role::Tool => {
            let parts = user_content(i, m, warnings);
            let output = match parts.iter().any(|p| p["type"] == "input_image") {
                true => Value::Array(parts),
                false => json!(text(&m.content)),
            };
            vec![json!({"type": "function_call_output", "call_id": m.tool_call_id, "output": output})]
        }
    }
}

fn message(role: &str, content: Vec<Value>) -> Value {
    json!({"type": "message", "role": role, "content": content})
}

fn user_content(i: usize, m: &Message, warnings: &mut Vec<Warning>) -> Vec<Value> {
    unexpressed_parts(i, m, &[], warnings);
    let mut parts = Vec::new();
    let text = text(&m.content);
    if !text.is_empty() {
        parts.push(json!({"type": "input_text", "text": text}));
    }
    for image in images(i, m, warnings) {
        let url = format!("data:{};base64,{}", image.media_type, image.data);
        parts.push(json!({"type": "input_image", "image_url": url}));
    }
    parts
}

/// An assistant message from its common form: its text as one output message, then one
/// `function_call` per call (no item id: convo has none to give).
fn assistant(i: usize, m: &Message, options: &Options, warnings: &mut Vec<Warning>) -> Vec<Value> {
    let mut items = Vec::new();
    let text = text(&m.content);
    let calls = calls(m);
    if !text.is_empty() || (calls.is_empty() && !options.fix) {
        items.push(message("assistant", vec![json!({"type": "output_text", "text": text, "annotations": []})]));
    }
    for call in calls {
        let arguments = call.arguments_text();
        items.push(json!({"type": "function_call", "call_id": call.id, "name": call.name, "arguments": arguments}));
    }
    if items.is_empty() {
        warnings.push(Warning { index: Some(i), message: "an empty message was left out".into() });
    }
    items
}

/// A native turn's items as they came. Stateless (`store: false`), a reasoning item
/// without `encrypted_content` cannot be replayed: it is left out, and the items after
/// it lose the ids that would name it.
fn native_items(i: usize, body: &Value, options: &Options, warnings: &mut Vec<Warning>) -> Vec<Value> {
    let items = body.as_array().map(Vec::as_slice).unwrap_or_default();
    if !options.stateless() {
        return items.to_vec();
    }
    let (mut out, mut dropped) = (Vec::new(), false);
    for item in items {
        if item["type"] == "reasoning" && !replayable(item) {
            dropped = true;
            continue;
        }
        let mut item = item.clone();
        if dropped && matches!(item["type"].as_str(), Some("function_call" | "message")) {
            item.as_object_mut().map(|o| o.remove("id"));
        }
        out.push(item);
    }
    if dropped {
        let message = "reasoning left out: `store` is false and it has no `encrypted_content`; the ids of the \
                       items after it were dropped (their `call_id` kept)"
            .to_owned();
        warnings.push(Warning { index: Some(i), message });
    }
    out
}

fn replayable(reasoning: &Value) -> bool {
    reasoning.get("encrypted_content").is_some_and(|e| e.as_str().is_some_and(|e| !e.is_empty()))
}

/// Whether an input item is the assistant's (its output), as against a user's or
/// system's message or a tool's output.
fn assistant_side(item: &Value) -> bool {
    match item["type"].as_str() {
        Some("message") => item["role"] == "assistant",
        Some("function_call_output") | None => false,
        Some(_) => true,
    }
}

pub(super) fn validate(payload: &Value, options: &Options) -> Vec<(usize, &'static str, String)> {
    let mut found = Vec::new();
    let items = payload["input"].as_array().map(Vec::as_slice).unwrap_or_default();
    let mut calls_seen: Vec<&str> = Vec::new();
    let mut run_start = 0;
    for (i, item) in items.iter().enumerate() {
        if !assistant_side(item) {
            run_start = i + 1;
        }
        let id = item["id"].as_str().unwrap_or_default();
        match item["type"].as_str() {
            Some("function_call") => {
                let call_id = item["call_id"].as_str().unwrap_or_default();
                calls_seen.push(call_id);
                let answered = items[i + 1..]
                    .iter()
                    .any(|x| x["type"] == "function_call_output" && x["call_id"].as_str() == Some(call_id));
                if !answered {
                    let error = format!("No tool output found for function call {call_id}.");
                    found.push((i, "output_missing", error));
                }
                let reasoned = items[run_start..i].iter().any(|x| x["type"] == "reasoning");
                if id.starts_with("fc_") && !reasoned {
                    let error = format!(
                        "Item '{id}' of type 'function_call' was provided without its required 'reasoning' item."
                    );
                    found.push((i, "reasoning_missing", error));
                }
            }
            Some("reasoning") => {
                let run_end = items[i + 1..].iter().position(|x| !assistant_side(x)).map_or(items.len(), |p| i + 1 + p);
                let follows = items[i + 1..run_end]
                    .iter()
                    .any(|x| matches!(x["type"].as_str(), Some("message" | "function_call")));
                if !follows {
                    let error =
                        format!("Item '{id}' of type 'reasoning' was provided without its required following item.");
                    found.push((i, "reasoning_dangling", error));
                }
                if options.stateless() && !replayable(item) {
                    let error = format!(
                        "Item with id '{id}' not found. Items are not persisted when `store` is set to false. Try again \
                         with `store` set to true, or remove this item from your input."
                    );
                    found.push((i, "reasoning_not_replayable", error));
                }
            }
            Some("function_call_output") => {
                let call_id = item["call_id"].as_str().unwrap_or_default();
                if !calls_seen.contains(&call_id) {
                    let error = format!("No tool call found for function call output with call_id {call_id}.");
                    found.push((i, "call_missing", error));
                }
            }
            _ => {}
        }
    }
    found
}
