//! Gemini Interactions `input` and `system_instruction` read back. A run of the model's
//! steps (`thought`, `model_output`, `function_call`, and steps of built-in tools)
//! between two steps of the user's or a tool's becomes one native message; a
//! `user_input` step becomes a user message (its text blocks its content, its image
//! blocks attached images, other blocks kept as parts of their type); a
//! `function_result` step becomes a tool message, its image blocks attached images (an
//! object result its JSON text).

use serde_json::{Map, Value, json};

use super::{Body, Run, invalid, tool_result_with_images, turns};
use crate::error::Result;
use crate::session::export::Format;

pub(super) fn import(body: &Map<String, Value>) -> Result<Body> {
    let system = match body.get("system_instruction") {
        None | Some(Value::Null) => None,
        Some(Value::String(text)) => Some(text.clone()),
        Some(_) => return Err(invalid("data.system_instruction", "must be a string")),
    };
    let (mut messages, mut run) = (Vec::new(), Run::new(Format::GeminiInteractions));
    for (i, step) in turns(body, "input")?.iter().enumerate() {
        let at = format!("data.input[{i}]");
        let kind = step.get("type").and_then(Value::as_str);
        let kind = kind.ok_or_else(|| invalid(&at, "must be an object with a string `type`"))?;
        if !matches!(kind, "user_input" | "function_result") {
            run.push(i, step);
            continue;
        }
        run.end(&mut messages)?;
        if kind == "function_result" {
            let id = step.get("call_id").and_then(Value::as_str);
            let id = id.ok_or_else(|| invalid(&format!("{at}.call_id"), "must be a string"))?;
            let at = format!("{at}.result");
            messages.push(match &step["result"] {
                // An object result is kept as its JSON text, as a Gemini response is.
                object @ Value::Object(_) => super::tool_result(id, json!(object.to_string())),
                result => tool_result_with_images(id, result, &at, image)?,
            });
        } else {
            messages.push(user_input(&step["content"], &format!("{at}.content"))?);
        }
    }
    run.end(&mut messages)?;
    Ok(Body { system, messages })
}

/// A `user_input` step's message: one message per step, as export writes one step per
/// message (its text blocks joined, as export joins a message's text into one block).
fn user_input(content: &Value, at: &str) -> Result<Value> {
    let blocks = match content {
        Value::String(text) => return Ok(json!({"role": "user", "content": text})),
        Value::Array(blocks) => blocks,
        _ => return Err(invalid(at, "must be a string or an array of content blocks")),
    };
    let (mut texts, mut parts, mut images) = (Vec::new(), Vec::new(), Vec::new());
    for (k, block) in blocks.iter().enumerate() {
        let at = format!("{at}[{k}]");
        match block.get("type").and_then(Value::as_str) {
            Some("text") => {
                let text = block["text"].as_str().ok_or_else(|| invalid(&at, "text: must be a string"))?;
                texts.push(text);
                parts.push(block.clone());
            }
            Some("image") => images.push(image(block).ok_or_else(|| invalid(&at, "data: must be base64 or a {ref}"))?),
            Some(_) => parts.push(block.clone()),
            None => return Err(invalid(&at, "must be an object with a string `type`")),
        }
    }
    let content = match texts.len() == parts.len() {
        true => json!(texts.join("\n")),
        false => Value::Array(parts),
    };
    let mut message = json!({"role": "user", "content": content});
    if !images.is_empty() {
        message["images"] = Value::Array(images);
    }
    Ok(message)
}

/// An `image` block's base64 data (or a `{ref}`).
fn image(block: &Value) -> Option<Value> {
    if block["type"] != "image" {
        return None;
    }
    super::image_data(block.get("data"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn import(body: Value) -> Body {
        super::super::import(Format::GeminiInteractions, &body).unwrap()
    }

    #[test]
    fn a_run_of_model_steps_is_one_native_message_and_results_pair_by_call_id() {
        let steps = json!([
            {"type": "thought", "signature": "c2ln"},
            {"type": "function_call", "id": "a1", "name": "weather", "arguments": {"city": "Paris"}},
        ]);
        let mut input = vec![json!({"type": "user_input", "content": [{"type": "text", "text": "Weather?"}]})];
        input.extend(steps.as_array().unwrap().iter().cloned());
        input.push(json!({"type": "function_result", "call_id": "a1", "name": "weather", "result": "18C"}));
        let body = import(json!({"system_instruction": "Be brief.", "input": input}));
        assert_eq!(body.system.as_deref(), Some("Be brief."));
        assert_eq!(body.messages[0], json!({"role": "user", "content": "Weather?"}));
        assert_eq!(body.messages[1]["native"]["body"], steps);
        assert_eq!(
            body.messages[1]["tool_calls"],
            json!([{"id": "a1", "name": "weather", "arguments": {"city": "Paris"}}])
        );
        assert_eq!(body.messages[2], json!({"role": "tool", "tool_call_id": "a1", "content": "18C"}));
    }

    #[test]
    fn images_in_inputs_and_results_are_attached() {
        let image = json!({"type": "image", "data": "iVBORw0KGgo=", "mime_type": "image/png"});
        let input = json!([
            {"type": "user_input", "content": [{"type": "text", "text": "look"}, image]},
            {"type": "function_call", "id": "s", "name": "screenshot", "arguments": {}},
            {"type": "function_result", "call_id": "s", "result": [{"type": "text", "text": "here"}, image]},
        ]);
        let body = import(json!({"input": input}));
        assert_eq!(body.messages[0], json!({"role": "user", "content": "look", "images": ["iVBORw0KGgo="]}));
        assert_eq!(
            body.messages[2],
            json!({"role": "tool", "tool_call_id": "s", "content": "here", "images": ["iVBORw0KGgo="]})
        );
    }

    #[test]
    fn a_step_without_a_type_is_named() {
        let error = super::super::import(Format::GeminiInteractions, &json!({"input": [{"content": []}]})).unwrap_err();
        assert!(error.to_string().contains("data.input[0]"), "{error}");
    }
}
