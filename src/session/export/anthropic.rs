//! Anthropic Messages: `{system, messages}`, the system prompt on top; content as
//! blocks; tool calls as `tool_use` blocks and their results as `tool_result` blocks of
//! the next user message, results first; turns alternate and are never empty.

use serde_json::{Value, json};

use super::{Export, PLACEHOLDER, TurnFormat, Warning, calls, images, object_args, text, turns, unexpressed_parts};
use crate::session::message::{Message, Role};

const FORMAT: TurnFormat = TurnFormat {
    assistant: "assistant",
    items: "content",
    system_field: "system",
    placeholder: || json!({"type": "text", "text": PLACEHOLDER}),
    is_result: |b| b["type"] == "tool_result",
};

pub(super) fn export(system: Option<&str>, messages: &[Message], fix: bool) -> Export {
    let mut warnings = Vec::new();
    let (out, sources, system) = turns(&FORMAT, system, messages, fix, &mut warnings, blocks);
    let mut payload = json!({"messages": out});
    if let Some(system) = system {
        payload["system"] = json!(system);
    }
    Export { payload, warnings, sources }
}

fn blocks(i: usize, m: &Message, warnings: &mut Vec<Warning>) -> Vec<Value> {
    unexpressed_parts(i, m, &["document"], warnings);
    let mut blocks = Vec::new();
    if m.role == Role::Tool {
        blocks.push(json!({"type": "tool_result", "tool_use_id": m.tool_call_id, "content": text(&m.content)}));
        return blocks;
    }
    let text = text(&m.content);
    if !text.is_empty() {
        blocks.push(json!({"type": "text", "text": text}));
    }
    for image in images(i, m, warnings) {
        blocks.push(
            json!({"type": "image", "source": {"type": "base64", "media_type": image.media_type, "data": image.data}}),
        );
    }
    blocks.extend(m.content.as_array().into_iter().flatten().filter(|p| p["type"] == "document").cloned());
    for call in calls(m) {
        let input = object_args(i, call.args, warnings);
        blocks.push(json!({"type": "tool_use", "id": call.id, "name": call.name, "input": input}));
    }
    blocks
}

pub(super) fn validate(payload: &Value) -> Vec<(usize, &'static str, String)> {
    let mut found = Vec::new();
    let messages = payload["messages"].as_array().map(Vec::as_slice).unwrap_or_default();
    if messages.first().is_some_and(|m| m["role"] != "user") {
        found.push((0, "first_not_user", "messages: first message must use the \"user\" role".into()));
    }
    for (i, m) in messages.iter().enumerate() {
        let role = m["role"].as_str().unwrap_or_default();
        let blocks = m["content"].as_array().map(Vec::as_slice).unwrap_or_default();
        if role == "system" {
            found.push((i, "system_in_messages", "messages: Unexpected role \"system\". The Messages API accepts a top-level `system` parameter, not \"system\" as an input message role.".into()));
        }
        if i > 0 && messages[i - 1]["role"] == role {
            found.push((i, "roles_not_alternating", format!("messages: roles must alternate between \"user\" and \"assistant\", but found multiple \"{role}\" roles in a row")));
        }
        let empty = blocks.is_empty()
            || blocks.iter().any(|b| b["type"] == "text" && b["text"].as_str().is_none_or(str::is_empty));
        if empty && !(i + 1 == messages.len() && role == "assistant") {
            found.push((i, "empty_content", format!("messages.{i}: all messages must have non-empty content except for the optional final assistant message")));
        }
        let uses: Vec<&str> =
            blocks.iter().filter(|b| b["type"] == "tool_use").filter_map(|b| b["id"].as_str()).collect();
        let next = messages.get(i + 1);
        let answered: Vec<&str> = next
            .filter(|n| n["role"] == "user")
            .and_then(|n| n["content"].as_array())
            .map(|b| {
                b.iter().filter(|b| b["type"] == "tool_result").filter_map(|b| b["tool_use_id"].as_str()).collect()
            })
            .unwrap_or_default();
        let missing: Vec<&str> = uses.iter().copied().filter(|u| !answered.contains(u)).collect();
        if !missing.is_empty() {
            found.push((i, "tool_use_without_result", format!("messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: {}. Each `tool_use` block must have a corresponding `tool_result` block in the next message.", missing.join(", "))));
        }
        let previous_uses: Vec<&str> = i
            .checked_sub(1)
            .and_then(|p| messages[p]["content"].as_array())
            .filter(|_| messages[i - 1]["role"] == "assistant")
            .map(|b| b.iter().filter(|b| b["type"] == "tool_use").filter_map(|b| b["id"].as_str()).collect())
            .unwrap_or_default();
        let mut seen_other = false;
        for (k, b) in blocks.iter().enumerate() {
            if b["type"] != "tool_result" {
                seen_other = true;
                continue;
            }
            let id = b["tool_use_id"].as_str().unwrap_or_default();
            if !previous_uses.contains(&id) {
                found.push((i, "tool_result_without_use", format!("messages.{i}.content.{k}: unexpected `tool_use_id` found in `tool_result` blocks: {id}. Each `tool_result` block must have a corresponding `tool_use` block in the previous message.")));
            } else if seen_other {
                found.push((
                    i,
                    "results_not_first",
                    format!(
                        "messages.{i}: `tool_result` blocks must come before any other content in the user message"
                    ),
                ));
            }
        }
    }
    found
}
