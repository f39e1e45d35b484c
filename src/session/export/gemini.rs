//! Gemini: `{system_instruction, contents}` with roles `user` and `model`; tool calls as
//! `functionCall` parts, their results as `functionResponse` parts in the user turn
//! right after, as many responses as calls.

use serde_json::{Map, Value, json};

use super::{
    Export, PLACEHOLDER, TurnFormat, Warning, call_names, calls, images, object_args, text, turns, unexpressed_parts,
};
use crate::session::message::{Message, Role};

const FORMAT: TurnFormat = TurnFormat {
    assistant: "model",
    items: "parts",
    system_field: "system_instruction",
    placeholder: || json!({"text": PLACEHOLDER}),
    is_result: |p| p.get("functionResponse").is_some(),
};

pub(super) fn export(system: Option<&str>, messages: &[Message], fix: bool) -> Export {
    let names = call_names(messages);
    let mut warnings = Vec::new();
    let (out, sources, system) = turns(&FORMAT, system, messages, fix, &mut warnings, |i, m, w| parts(i, m, &names, w));
    let mut payload = json!({"contents": out});
    if let Some(system) = system {
        payload["system_instruction"] = json!({"parts": [{"text": system}]});
    }
    Export { payload, warnings, sources }
}

fn parts(i: usize, m: &Message, names: &Map<String, Value>, warnings: &mut Vec<Warning>) -> Vec<Value> {
    unexpressed_parts(i, m, &[], warnings);
    if m.role == Role::Tool {
        let id = m.tool_call_id.as_deref().unwrap_or_default();
        let name = names.get(id).cloned().unwrap_or_else(|| json!(id));
        let content = match &m.content {
            Value::String(s) => {
                serde_json::from_str::<Value>(s).ok().filter(Value::is_object).unwrap_or_else(|| json!(s))
            }
            other => json!(text(other)),
        };
        return vec![json!({"functionResponse": {"name": name, "response": {"content": content}}})];
    }
    let mut parts = Vec::new();
    let text = text(&m.content);
    if !text.is_empty() {
        parts.push(json!({"text": text}));
    }
    for image in images(i, m, warnings) {
        parts.push(json!({"inline_data": {"mime_type": image.media_type, "data": image.data}}));
    }
    for call in calls(m) {
        let args = object_args(i, call.args, warnings);
        parts.push(json!({"functionCall": {"name": call.name, "args": args}}));
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
