//! Anthropic Messages: `{system, messages}`, the system prompt on top; content as
//! blocks; tool calls as `tool_use` blocks and their results as `tool_result` blocks of
//! the next user message, results first; turns alternate and are never empty.

use serde_json::{Value, json};

use super::{
    Export, Format, Items, Options, PLACEHOLDER, TurnFormat, Warning, calls, images, object_args, replay, text, turns,
    unexpressed_parts,
};
use crate::session::message::{Message, Role};

const FORMAT: TurnFormat = TurnFormat {
    assistant: "assistant",
    items: "content",
    system_field: "system",
    placeholder: || json!({"type": "text", "text": PLACEHOLDER}),
    is_result: |b| b["type"] == "tool_result",
};

pub(super) const TURNS: &TurnFormat = &FORMAT;

pub(super) fn export(system: Option<&str>, messages: &[impl AsRef<Message>], options: &Options) -> Export {
    let mut warnings = Vec::new();
    let items = |i: usize, m: &Message, warnings: &mut Vec<Warning>| items(i, m, options, warnings);
    let (out, sources, system) = turns(&FORMAT, system, messages, options.fix, &mut warnings, items);
    let mut payload = json!({"messages": out});
    if let Some(system) = system {
        payload["system"] = json!(system);
    }
    Export { payload, warnings, sources }
}

const FORMAT_NAME: Format = Format::AnthropicMessages;

/// A message's part of a turn: its native turn replayed, or blocks built.
pub(super) fn items(i: usize, m: &Message, options: &Options, warnings: &mut Vec<Warning>) -> Items {
    match replay(FORMAT_NAME, i, m, options, warnings) {
        Some(body) => Items::Turn(json!({"role": "assistant", "content": native_blocks(i, body, options, warnings)})),
        None => Items::Built(blocks(i, m, warnings)),
    }
}

fn is_thinking(block: &Value) -> bool {
    matches!(block["type"].as_str(), Some("thinking" | "redacted_thinking"))
}

/// A native turn's blocks as they came; with `thinking: false`, without its thinking.
fn native_blocks(i: usize, body: &Value, options: &Options, warnings: &mut Vec<Warning>) -> Value {
    let blocks = body.as_array().map(Vec::as_slice).unwrap_or_default();
    if options.thinking != Some(false) || !blocks.iter().any(is_thinking) {
        return body.clone();
    }
    let message = "thinking left out: `thinking` is false".to_owned();
    warnings.push(Warning { index: Some(i), message });
    Value::Array(blocks.iter().filter(|b| !is_thinking(b)).cloned().collect())
}

fn blocks(i: usize, m: &Message, warnings: &mut Vec<Warning>) -> Vec<Value> {
    unexpressed_parts(i, m, &["document"], warnings);
    let mut blocks = Vec::new();
    if m.role == Role::Tool {
        // A result's images ride in its `content`, after its text.
        let images = images(i, m, warnings);
        let content = match images.is_empty() {
            true => json!(text(&m.content)),
            false => Value::Array(text_and_images(&text(&m.content), images)),
        };
        blocks.push(json!({"type": "tool_result", "tool_use_id": m.tool_call_id, "content": content}));
        return blocks;
    }
    blocks.extend(text_and_images(&text(&m.content), images(i, m, warnings)));
    blocks.extend(m.content.as_array().into_iter().flatten().filter(|p| p["type"] == "document").cloned());
    for call in calls(m) {
        let input = object_args(i, call.args, warnings);
        blocks.push(json!({"type": "tool_use", "id": call.id, "name": call.name, "input": input}));
    }
    blocks
}

/// A text block (when there is text), then an image block per image.
fn text_and_images(text: &str, images: Vec<super::Image>) -> Vec<Value> {
    let mut blocks = Vec::new();
    if !text.is_empty() {
        blocks.push(json!({"type": "text", "text": text}));
    }
    for image in images {
        blocks.push(
            json!({"type": "image", "source": {"type": "base64", "media_type": image.media_type, "data": image.data}}),
        );
    }
    blocks
}

pub(super) fn validate(payload: &Value, options: &Options) -> Vec<(usize, &'static str, String)> {
    let mut found = Vec::new();
    let messages = payload["messages"].as_array().map(Vec::as_slice).unwrap_or_default();
    thinking_rules(messages, options, &mut found);
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

/// Thinking: an assistant message may not end in a thinking block; with `thinking: true`,
/// the assistant message whose tool results end the history must start with one.
fn thinking_rules(messages: &[Value], options: &Options, found: &mut Vec<(usize, &'static str, String)>) {
    for (i, m) in messages.iter().enumerate().filter(|(_, m)| m["role"] == "assistant") {
        let last = m["content"].as_array().and_then(|b| b.last());
        if last.is_some_and(is_thinking) {
            let error = format!("messages.{i}: The final block in an assistant message cannot be `thinking`.");
            found.push((i, "thinking_last", error));
        }
    }
    if options.thinking != Some(true) || messages.len() < 2 {
        return;
    }
    let (last, before) = (&messages[messages.len() - 1], &messages[messages.len() - 2]);
    let trailing_results = last["role"] == "user"
        && last["content"].as_array().and_then(|b| b.first()).is_some_and(|b| b["type"] == "tool_result");
    if !trailing_results || before["role"] != "assistant" {
        return;
    }
    let first = before["content"].as_array().and_then(|b| b.first());
    if !first.is_some_and(is_thinking) {
        let i = messages.len() - 2;
        let found_type = first.and_then(|b| b["type"].as_str()).unwrap_or("nothing");
        found.push((
            i,
            "thinking_required",
            format!(
                "messages.{i}.content.0.type: Expected `thinking` or `redacted_thinking`, but found `{found_type}`. \
                 When `thinking` is enabled, a final `assistant` message must start with a thinking block \
                 (preceeding the lastmost set of `tool_use` and `tool_result` blocks). We recommend you include \
                 thinking blocks from previous turns. To avoid this requirement, disable `thinking`."
            ),
        ));
    }
}
