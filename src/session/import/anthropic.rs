//! Anthropic Messages `messages` and `system` read back. A user turn's `tool_result`
//! blocks become tool messages; text, images and other blocks become user messages; an
//! assistant turn is kept whole (its `content` blocks) as a native message.

use std::collections::HashSet;

use serde_json::{Map, Value, json};

use super::{Body, TurnMessages, invalid, result_text, role, tool_result_with_images, turns};
use crate::error::Result;
use crate::session::export::Format;

pub(super) fn import(body: &Map<String, Value>) -> Result<Body> {
    let system = match body.get("system") {
        None | Some(Value::Null) => None,
        Some(system) => match result_text(system, "data.system")? {
            Value::String(text) => Some(text),
            _ => return Err(invalid("data.system", "must be a string or an array of text blocks")),
        },
    };
    let mut messages = Vec::new();
    let mut taken = HashSet::new();
    for (i, m) in turns(body, "messages")?.iter().enumerate() {
        let at = format!("data.messages[{i}]");
        let assistant = match role(m, &at)? {
            "user" => false,
            "assistant" => true,
            other => return Err(invalid(&format!("{at}.role"), format!("{other:?} is not user or assistant"))),
        };
        let blocks = match &m["content"] {
            Value::String(text) => &vec![json!({"type": "text", "text": text})],
            Value::Array(blocks) => blocks,
            _ => return Err(invalid(&format!("{at}.content"), "must be a string or an array of content blocks")),
        };
        if assistant {
            for (k, block) in blocks.iter().enumerate() {
                if block["type"] == "tool_use" && !block["id"].is_string() {
                    return Err(invalid(&format!("{at}.content[{k}]"), "id: must be a string"));
                }
            }
            let body = Value::Array(blocks.clone());
            messages.push(super::native_turn(Format::AnthropicMessages, body, &mut taken, &at)?.0);
            continue;
        }
        let mut turn = TurnMessages::new("user");
        for (k, block) in blocks.iter().enumerate() {
            let at = format!("{at}.content[{k}]");
            match block.get("type").and_then(Value::as_str) {
                Some("text") => {
                    turn.text(block["text"].as_str().ok_or_else(|| invalid(&at, "text: must be a string"))?)
                }
                Some("image") if block.pointer("/source/type") == Some(&json!("base64")) => {
                    turn.image(image(block).ok_or_else(|| invalid(&at, "source.data: must be base64 or a {ref}"))?)
                }
                Some("tool_result") => {
                    let id = block.get("tool_use_id").and_then(Value::as_str);
                    let id = id.ok_or_else(|| invalid(&at, "tool_use_id: must be a string"))?;
                    messages.append(&mut std::mem::replace(&mut turn, TurnMessages::new("user")).into_messages());
                    let at = format!("{at}.content");
                    messages.push(tool_result_with_images(id, &block["content"], &at, image)?);
                }
                Some(_) => turn.part(block.clone()),
                None => return Err(invalid(&at, "must be an object with a string `type`")),
            }
        }
        messages.extend(turn.into_messages());
    }
    Ok(Body { system, messages })
}

/// A base64 `image` block's data.
fn image(block: &Value) -> Option<Value> {
    let base64 = block["type"] == "image" && block.pointer("/source/type") == Some(&json!("base64"));
    base64.then(|| super::image_data(block.pointer("/source/data"))).flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn import(body: Value) -> Body {
        super::super::import(Format::AnthropicMessages, &body).unwrap()
    }

    #[test]
    fn a_user_turn_gives_its_results_then_one_message_per_text() {
        let body = json!({"system": [{"type": "text", "text": "sys"}], "messages": [
            {"role": "assistant", "content": [
                {"type": "text", "text": "calling"},
                {"type": "tool_use", "id": "t1", "name": "f", "input": {"x": 1}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "ok"}]},
                {"type": "text", "text": "a"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "QUJD"}},
                {"type": "text", "text": "b"},
            ]},
        ]});
        let got = import(body);
        assert_eq!(got.system.as_deref(), Some("sys"));
        let turn = json!([{"type": "text", "text": "calling"}, {"type": "tool_use", "id": "t1", "name": "f", "input": {"x": 1}}]);
        assert_eq!(
            got.messages,
            [
                json!({"role": "assistant", "content": "calling", "native": {"format": "anthropic_messages", "model": null, "body": turn},
                       "tool_calls": [{"id": "t1", "name": "f", "arguments": {"x": 1}}]}),
                json!({"role": "tool", "tool_call_id": "t1", "content": "ok"}),
                json!({"role": "user", "content": "a", "images": ["QUJD"]}),
                json!({"role": "user", "content": "b"}),
            ]
        );
    }

    #[test]
    fn an_assistant_turn_is_kept_whole_thinking_and_all() {
        let thinking = json!({"type": "thinking", "thinking": "hmm", "signature": "s"});
        let blocks = json!([thinking, {"type": "text", "text": "x"}]);
        let got = import(json!({"messages": [{"role": "assistant", "content": blocks}]})).messages;
        let native = json!({"format": "anthropic_messages", "model": null, "body": blocks});
        assert_eq!(got, [json!({"role": "assistant", "content": "x", "native": native})]);
    }

    #[test]
    fn user_blocks_without_a_counterpart_are_kept_as_parts() {
        let doc = json!({"type": "document", "source": {"type": "text", "data": "d"}});
        let got = import(json!({"messages": [{"role": "user", "content": [doc.clone()]}]})).messages;
        assert_eq!(got, [json!({"role": "user", "content": [doc]})]);
    }

    #[test]
    fn a_string_content_is_one_text() {
        let got = import(json!({"messages": [{"role": "user", "content": "hi"}]})).messages;
        assert_eq!(got, [json!({"role": "user", "content": "hi"})]);
    }
}
