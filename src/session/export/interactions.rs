//! Gemini's Interactions API: `{system_instruction, input}`, the system prompt a plain
//! string; the history as typed steps, never role turns: `user_input` and `model_output`
//! with content blocks, `thought` (its `signature`), `function_call` (`id`, `name`,
//! `arguments` an object) and `function_result` (a step of its own, paired with its
//! call by `call_id`). A native turn is replayed as its steps, as the response gave
//! them; a stateless request (`store: false`) is what convo builds.

use serde_json::{Map, Value, json};

use super::{
    Export, Format, Options, Warning, calls, images, join_system, object_args, replay, text, unexpressed_parts,
};
use crate::session::message::{Message, Role};

/// Where history system messages go, for the warning.
const SYSTEM_FIELD: &str = "system_instruction";

pub(super) fn export(system: Option<&str>, messages: &[impl AsRef<Message>], options: &Options) -> Export {
    let names = super::gemini::call_names(messages);
    let (mut input, mut sources, mut warnings) = (Vec::new(), Vec::new(), Vec::new());
    let mut system = system.map(str::to_owned);
    for (i, m) in messages.iter().map(AsRef::as_ref).enumerate() {
        if m.role == Role::System {
            system = Some(join_system(system.take(), &text(&m.content)));
            let message = format!("a system message was moved into `{SYSTEM_FIELD}`");
            warnings.push(Warning { index: Some(i), message });
            continue;
        }
        let steps = steps(i, m, options, &names, &mut warnings);
        sources.extend(std::iter::repeat_n(i, steps.len()));
        input.extend(steps);
    }
    let mut payload = json!({});
    if let Some(system) = system.filter(|s| !s.is_empty()) {
        payload[SYSTEM_FIELD] = json!(system);
    }
    payload["input"] = Value::Array(input);
    Export { payload, warnings, sources }
}

/// A message's steps: each message makes steps of its own, never merged. A system
/// message makes none (`export` moves it).
pub(super) fn steps(
    i: usize,
    m: &Message,
    options: &Options,
    names: &Map<String, Value>,
    warnings: &mut Vec<Warning>,
) -> Vec<Value> {
    match m.role {
        Role::System => Vec::new(),
        Role::User => {
            unexpressed_parts(i, m, OWN_BLOCKS, warnings);
            let content = blocks(i, m, OWN_BLOCKS, warnings);
            if content.is_empty() && options.fix {
                warnings.push(Warning { index: Some(i), message: "an empty message was left out".into() });
                return Vec::new();
            }
            vec![json!({"type": "user_input", "content": content})]
        }
        Role::Assistant => match replay(Format::GeminiInteractions, i, m, options, warnings) {
            Some(body) => body.as_array().cloned().unwrap_or_default(),
            None => assistant(i, m, options, warnings),
        },
        Role::Tool => {
            unexpressed_parts(i, m, &[], warnings);
            let id = m.tool_call_id.as_deref().unwrap_or_default();
            let mut step = json!({"type": "function_result", "call_id": id});
            if let Some(name) = names.get(id).and_then(|k| k["name"].as_str()) {
                step["name"] = json!(name);
            }
            let content = blocks(i, m, &[], warnings);
            step["result"] = match content.as_slice() {
                [] => json!(""),
                [only] if only["type"] == "text" => only["text"].clone(),
                _ => Value::Array(content),
            };
            vec![step]
        }
    }
}

/// Content blocks of the API's own that a user message keeps as parts (an import puts
/// them there) and sends as they are.
const OWN_BLOCKS: &[&str] = &["audio", "document", "video"];

/// A message's text block (when it has text), one image block per image, then its
/// blocks of the `own` types (the API's own, where they may go).
fn blocks(i: usize, m: &Message, own: &[&str], warnings: &mut Vec<Warning>) -> Vec<Value> {
    let mut content = Vec::new();
    let text = text(&m.content);
    if !text.is_empty() {
        content.push(json!({"type": "text", "text": text}));
    }
    for image in images(i, m, warnings) {
        content.push(json!({"type": "image", "data": image.data, "mime_type": image.media_type}));
    }
    let parts = m.content.as_array().into_iter().flatten();
    content.extend(parts.filter(|p| p["type"].as_str().is_some_and(|t| own.contains(&t))).cloned());
    content
}

/// An assistant message from its common form: its text as one `model_output`, then one
/// `function_call` per call. Its reasoning, if it had any, was another format's
/// (`replay` said so).
fn assistant(i: usize, m: &Message, options: &Options, warnings: &mut Vec<Warning>) -> Vec<Value> {
    let mut steps = Vec::new();
    let text = text(&m.content);
    let calls = calls(m);
    if !text.is_empty() {
        steps.push(json!({"type": "model_output", "content": [{"type": "text", "text": text}]}));
    } else if calls.is_empty() && !options.fix {
        steps.push(json!({"type": "model_output", "content": []}));
    }
    for call in calls {
        let arguments = object_args(i, call.args, warnings);
        steps.push(json!({"type": "function_call", "id": call.id, "name": call.name, "arguments": arguments}));
    }
    if steps.is_empty() {
        warnings.push(Warning { index: Some(i), message: "an empty message was left out".into() });
    }
    steps
}

pub(super) fn validate(payload: &Value) -> Vec<(usize, &'static str, String)> {
    let mut found = Vec::new();
    let steps = payload["input"].as_array().map(Vec::as_slice).unwrap_or_default();
    let mut calls_seen: Vec<&str> = Vec::new();
    for (i, step) in steps.iter().enumerate() {
        match step["type"].as_str() {
            Some("function_call") => {
                let id = step["id"].as_str().unwrap_or_default();
                calls_seen.push(id);
                let answered =
                    steps[i + 1..].iter().any(|s| s["type"] == "function_result" && s["call_id"].as_str() == Some(id));
                if !answered {
                    found.push((i, "call_without_result", format!("No function_result found for function_call {id}.")));
                }
            }
            Some("function_result") => {
                let call_id = step["call_id"].as_str().unwrap_or_default();
                if !calls_seen.contains(&call_id) {
                    let error = format!("No function_call found for function_result with call_id {call_id}.");
                    found.push((i, "result_without_call", error));
                }
            }
            Some("user_input" | "model_output") if step["content"].as_array().is_none_or(Vec::is_empty) => {
                found.push((i, "empty_content", format!("input[{i}].content must not be empty.")));
            }
            Some(_) => {}
            None => found.push((i, "step_without_type", format!("input[{i}].type is required."))),
        }
    }
    found
}
