//! OpenAI Responses API `input` and `instructions` read back. A run of the assistant's
//! items (reasoning, its messages, function calls) between two items of the user's or a
//! tool's becomes one native message; a user message's `input_text` parts become text
//! and its `input_image` data URLs attached images; a `function_call_output` becomes a
//! tool message; a system or developer message stays one.

use serde_json::{Map, Value, json};

use super::{Body, Run, TurnMessages, invalid, tool_result_with_images, turns};
use crate::error::Result;
use crate::session::export::Format;

pub(super) fn import(body: &Map<String, Value>) -> Result<Body> {
    let system = match body.get("instructions") {
        None | Some(Value::Null) => None,
        Some(Value::String(text)) => Some(text.clone()),
        Some(_) => return Err(invalid("data.instructions", "must be a string")),
    };
    let (mut messages, mut run) = (Vec::new(), Run::new(Format::OpenaiResponses));
    let items = turns(body, "input")?;
    for (i, item) in items.iter().enumerate() {
        let at = format!("data.input[{i}]");
        if !item.is_object() {
            return Err(invalid(&at, "must be an object"));
        }
        let kind = item.get("type").and_then(Value::as_str);
        let role = item.get("role").and_then(Value::as_str);
        let assistant_side = match kind {
            Some("function_call_output") => false,
            Some("message") | None => role == Some("assistant"),
            Some(_) => true,
        };
        if assistant_side {
            run.push(i, item);
            continue;
        }
        run.end(&mut messages)?;
        match (kind, role) {
            (Some("function_call_output"), _) => {
                let id = item.get("call_id").and_then(Value::as_str);
                let id = id.ok_or_else(|| invalid(&format!("{at}.call_id"), "must be a string"))?;
                messages.push(tool_result_with_images(id, &item["output"], &format!("{at}.output"), image)?);
            }
            (_, Some(role @ ("user" | "system" | "developer"))) => {
                let role = if role == "user" { "user" } else { "system" };
                messages.extend(message(role, &item["content"], &at)?);
            }
            (_, other) => return Err(invalid(&format!("{at}.role"), format!("{other:?} is not a Responses API role"))),
        }
    }
    run.end(&mut messages)?;
    Ok(Body { system, messages })
}

/// A user's or system's message: its text parts, images and other parts.
fn message(role: &'static str, content: &Value, at: &str) -> Result<Vec<Value>> {
    let parts = match content {
        Value::String(text) => return Ok(vec![json!({"role": role, "content": text})]),
        Value::Array(parts) => parts,
        _ => return Err(invalid(&format!("{at}.content"), "must be a string or an array of content parts")),
    };
    let mut turn = TurnMessages::new(role);
    for (k, part) in parts.iter().enumerate() {
        let at = format!("{at}.content[{k}]");
        match part.get("type").and_then(Value::as_str) {
            Some("input_text" | "output_text" | "text") => {
                turn.text(part["text"].as_str().ok_or_else(|| invalid(&at, "text: must be a string"))?)
            }
            Some("input_image") => match image(part) {
                Some(data) => turn.image(data),
                None => turn.part(part.clone()),
            },
            Some(_) => turn.part(part.clone()),
            None => return Err(invalid(&at, "must be an object with a string `type`")),
        }
    }
    Ok(turn.into_messages())
}

/// An `input_image` item's data: a base64 data URL's, or a `{ref}`.
fn image(part: &Value) -> Option<Value> {
    if part["type"] != "input_image" {
        return None;
    }
    match part["image_url"].as_str().and_then(|u| u.strip_prefix("data:")) {
        Some(url) => url.split_once(";base64,").map(|(_, data)| json!(data)),
        // A `{ref}` where `images: "ref"` put one; an https URL is no image convo holds.
        None => super::image_data(part.get("image_url").filter(|u| u.is_object())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn import(body: Value) -> Body {
        super::super::import(Format::OpenaiResponses, &body).unwrap()
    }

    #[test]
    fn a_run_of_assistant_items_is_one_native_message() {
        let reasoning = json!({"id": "rs_1", "type": "reasoning", "summary": []});
        let call = |n: u8| json!({"type": "function_call", "id": format!("fc_{n}"), "call_id": format!("call_{n}"), "name": "f", "arguments": "{\"n\":1}"});
        let body = json!({"instructions": "be brief", "input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]},
            reasoning, call(1), call(2),
            {"type": "function_call_output", "call_id": "call_1", "output": "one"},
            {"type": "function_call_output", "call_id": "call_2", "output": "two"},
        ]});
        let got = import(body.clone());
        assert_eq!(got.system.as_deref(), Some("be brief"));
        let run = json!([body["input"][1], body["input"][2], body["input"][3]]);
        assert_eq!(got.messages[0], json!({"role": "user", "content": "go"}));
        assert_eq!(got.messages[1]["native"], json!({"format": "openai_responses", "model": null, "body": run}));
        assert_eq!(got.messages[1]["tool_calls"][1], json!({"id": "call_2", "name": "f", "arguments": {"n": 1}}));
        assert_eq!(got.messages[2], json!({"role": "tool", "tool_call_id": "call_1", "content": "one"}));
        assert_eq!(got.messages.len(), 4);
    }

    #[test]
    fn images_are_attached_and_unknown_roles_refused() {
        let body = json!({"input": [{"role": "user", "content": [
            {"type": "input_text", "text": "look"},
            {"type": "input_image", "image_url": "data:image/png;base64,QUJD"},
        ]}]});
        assert_eq!(import(body).messages, [json!({"role": "user", "content": "look", "images": ["QUJD"]})]);
        let bad = super::super::import(Format::OpenaiResponses, &json!({"input": [{"role": "robot", "content": "x"}]}));
        assert!(bad.unwrap_err().to_string().contains("data.input[0].role"));
    }
}
