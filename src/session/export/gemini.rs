//! Gemini: `{system_instruction, contents}` with roles `user` and `model`; tool calls as
//! `functionCall` parts, their results as `functionResponse` parts in the user turn
//! right after, as many responses as calls.

use serde_json::{Map, Value, json};

use super::{
    Export, Format, Items, Options, PLACEHOLDER, TurnFormat, Warning, calls, images, object_args, replay, text, turns,
    unexpressed_parts,
};
use crate::session::message::{Message, Role};

const FORMAT: TurnFormat = TurnFormat {
    assistant: "model",
    items: "parts",
    system_field: "system_instruction",
    placeholder: || json!({"text": PLACEHOLDER}),
    is_result: |p| p.get("functionResponse").is_some(),
};

/// Google's documented placeholder for a call whose signature convo cannot have: one
/// that came from another provider, or from the common form.
pub const SKIP_SIGNATURE: &str = "skip_thought_signature_validator";

pub(super) const TURNS: &TurnFormat = &FORMAT;

pub(super) fn export(system: Option<&str>, messages: &[impl AsRef<Message>], options: &Options) -> Export {
    let names = call_names(messages);
    let mut warnings = Vec::new();
    // The current turn: everything after the last user message (results start none).
    let turn_start = messages.iter().rposition(|m| m.as_ref().role == Role::User).map_or(0, |u| u + 1);
    let items = |i: usize, m: &Message, w: &mut Vec<Warning>| items(i, m, options, &names, i >= turn_start, w);
    let (out, sources, system) = turns(&FORMAT, system, messages, options.fix, &mut warnings, items);
    let mut payload = json!({"contents": out});
    if let Some(system) = system {
        payload["system_instruction"] = json!({"parts": [{"text": system}]});
    }
    Export { payload, warnings, sources }
}

/// A message's part of a turn: its native turn replayed, or parts built.
pub(super) fn items(
    i: usize,
    m: &Message,
    options: &Options,
    names: &Map<String, Value>,
    current_turn: bool,
    warnings: &mut Vec<Warning>,
) -> Items {
    match replay(Format::GeminiContents, i, m, options, warnings) {
        Some(body) => Items::Turn(body.clone()),
        None => Items::Built(parts(i, m, names, current_turn, warnings)),
    }
}

/// Each call id, with the name it was made with and whether Gemini gave that id itself
/// (then its response echoes it).
pub(super) fn call_names(messages: &[impl AsRef<Message>]) -> Map<String, Value> {
    let mut names = Map::new();
    for m in messages.iter().map(AsRef::as_ref) {
        let own_ids: Vec<&str> = match &m.native {
            Some(native) if native.format == Format::GeminiContents => native.body["parts"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|p| p.pointer("/functionCall/id").and_then(Value::as_str))
                .collect(),
            _ => Vec::new(),
        };
        for call in calls(m) {
            let own = own_ids.contains(&call.id.as_str());
            names.insert(call.id, json!({"name": call.name, "own": own}));
        }
    }
    names
}

fn parts(
    i: usize,
    m: &Message,
    names: &Map<String, Value>,
    current_turn: bool,
    warnings: &mut Vec<Warning>,
) -> Vec<Value> {
    unexpressed_parts(i, m, &[], warnings);
    if m.role == Role::Tool {
        let id = m.tool_call_id.as_deref().unwrap_or_default();
        let known = names.get(id);
        let name = known.map_or_else(|| json!(id), |k| k["name"].clone());
        let content = match &m.content {
            Value::String(s) => {
                serde_json::from_str::<Value>(s).ok().filter(Value::is_object).unwrap_or_else(|| json!(s))
            }
            other => json!(text(other)),
        };
        let mut response = json!({"name": name, "response": {"content": content}});
        if known.is_some_and(|k| k["own"] == true) {
            response = json!({"id": id, "name": name, "response": {"content": content}});
        }
        // A result's images: the response's own `parts` (multimodal function responses).
        let images = images(i, m, warnings);
        if !images.is_empty() {
            let part =
                |image: super::Image| json!({"inline_data": {"mime_type": image.media_type, "data": image.data}});
            response["parts"] = images.into_iter().map(part).collect();
        }
        return vec![json!({"functionResponse": response})];
    }
    let mut parts = Vec::new();
    let text = text(&m.content);
    if !text.is_empty() {
        parts.push(json!({"text": text}));
    }
    for image in images(i, m, warnings) {
        parts.push(json!({"inline_data": {"mime_type": image.media_type, "data": image.data}}));
    }
    for (k, call) in calls(m).into_iter().enumerate() {
        let args = object_args(i, call.args, warnings);
        let mut part = json!({"functionCall": {"name": call.name, "args": args}});
        if k == 0 && current_turn && m.role == Role::Assistant {
            part["thoughtSignature"] = json!(SKIP_SIGNATURE);
            let message = format!(
                "a function call of the current turn has no thought signature: Google's placeholder \
                 `{SKIP_SIGNATURE}` was written on the first call of its message"
            );
            warnings.push(Warning { index: Some(i), message });
        }
        parts.push(part);
    }
    parts
}

fn count(content: &Value, kind: &str) -> usize {
    content["parts"].as_array().map_or(0, |p| p.iter().filter(|p| p.get(kind).is_some()).count())
}

pub(super) fn validate(payload: &Value) -> Vec<(usize, &'static str, String)> {
    let mut found = Vec::new();
    let contents = payload["contents"].as_array().map(Vec::as_slice).unwrap_or_default();
    for (i, c) in contents.iter().enumerate() {
        let role = c["role"].as_str().unwrap_or_default();
        if !matches!(role, "user" | "model") {
            found.push((i, "invalid_role", "Please use a valid role: user, model.".into()));
        }
        if c["parts"].as_array().is_none_or(Vec::is_empty) {
            found.push((
                i,
                "empty_parts",
                format!("* GenerateContentRequest.contents[{i}].parts: contents.parts must not be empty."),
            ));
        }
        if i > 0 && contents[i - 1]["role"] == role {
            found.push((
                i,
                "roles_not_alternating",
                "Please ensure that multiturn requests alternate between user and model.".into(),
            ));
        }
        let calls = count(c, "functionCall");
        if calls > 0 {
            let previous_ok = i == 0 || contents[i - 1]["role"] == "user";
            if i == 0 || !previous_ok {
                found.push((i, "call_not_after_user", "Please ensure that function call turn comes immediately after a user turn or after a function response turn.".into()));
            }
            let answered =
                contents.get(i + 1).filter(|n| n["role"] == "user").map_or(0, |n| count(n, "functionResponse"));
            if answered != calls {
                found.push((i, "responses_not_matching_calls", "Please ensure that the number of function response parts is equal to the number of function call parts of the function call turn.".into()));
            }
        }
        if count(c, "functionResponse") > 0 && (i == 0 || count(&contents[i - 1], "functionCall") == 0) {
            found.push((
                i,
                "response_without_call",
                "Please ensure that function response turn comes immediately after a function call turn.".into(),
            ));
        }
    }
    found
}
