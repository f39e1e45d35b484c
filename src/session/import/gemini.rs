//! Gemini `contents` and `system_instruction` read back. A model turn is kept whole as
//! a native message (signatures and thoughts included). Gemini's calls need not carry
//! ids: a `functionCall` without one gets `call_<n>` (n counting the body's calls,
//! skipping ids it names), and a `functionResponse` without one answers the oldest
//! unanswered call of its name. A response `{"content": x}` (as export writes it) is the
//! result `x`, an object as its JSON text; any other response is the result, as JSON
//! text.

use std::collections::{HashSet, VecDeque};

use serde_json::{Map, Value, json};

use super::{Body, TurnMessages, invalid, role, tool_result, turns};
use crate::error::Result;
use crate::session::export::Format;

pub(super) fn import(body: &Map<String, Value>) -> Result<Body> {
    let system = match body.get("system_instruction").or_else(|| body.get("systemInstruction")) {
        None | Some(Value::Null) => None,
        Some(Value::String(text)) => Some(text.clone()),
        Some(instruction) => Some(texts(instruction, "data.system_instruction")?),
    };
    let mut messages = Vec::new();
    // Calls not yet answered, oldest first: (name, id).
    let mut open: VecDeque<(String, String)> = VecDeque::new();
    let mut taken = HashSet::new();
    for (i, c) in turns(body, "contents")?.iter().enumerate() {
        let at = format!("data.contents[{i}]");
        let model = match c.get("role").map(|_| role(c, &at)).transpose()? {
            None | Some("user") => false,
            Some("model") => true,
            Some(other) => return Err(invalid(&format!("{at}.role"), format!("{other:?} is not user or model"))),
        };
        let parts = c.get("parts").and_then(Value::as_array);
        let parts = parts.ok_or_else(|| invalid(&format!("{at}.parts"), "must be an array"))?;
        if model {
            for (k, part) in parts.iter().enumerate() {
                let name = part.get("functionCall").map(|call| call.get("name").and_then(Value::as_str));
                if name == Some(None) {
                    return Err(invalid(&format!("{at}.parts[{k}]"), "functionCall.name: must be a string"));
                }
            }
            let (message, calls) = super::native_turn(Format::GeminiContents, c.clone(), &mut taken, &at)?;
            messages.push(message);
            open.extend(calls);
            continue;
        }
        let mut turn = TurnMessages::new("user");
        for (k, part) in parts.iter().enumerate() {
            let at = format!("{at}.parts[{k}]");
            let object = part.as_object().ok_or_else(|| invalid(&at, "must be an object"))?;
            if let Some(text) = object.get("text") {
                turn.text(text.as_str().ok_or_else(|| invalid(&at, "text: must be a string"))?);
            } else if object.contains_key("inline_data") || object.contains_key("inlineData") {
                turn.image(
                    inline_data(part).ok_or_else(|| invalid(&at, "inline_data.data: must be base64 or a {ref}"))?,
                );
            } else if let Some(response) = object.get("functionResponse") {
                let name = response.get("name").and_then(Value::as_str).unwrap_or_default();
                let given = response.get("id").and_then(Value::as_str);
                let at_open = open.iter().position(|(n, id)| given.map_or(n == name, |g| g == id));
                let id = match (at_open, given) {
                    (Some(p), _) => open.remove(p).map(|(_, id)| id).unwrap_or_default(),
                    (None, Some(given)) => given.to_owned(),
                    (None, None) => {
                        return Err(invalid(&at, format!("no functionCall named {name:?} before this response")));
                    }
                };
                messages.append(&mut std::mem::replace(&mut turn, TurnMessages::new("user")).into_messages());
                let mut message = tool_result(&id, result(response.get("response")));
                let parts = response.get("parts").and_then(Value::as_array).into_iter().flatten();
                let images: Vec<Value> = parts.filter_map(inline_data).collect();
                if !images.is_empty() {
                    message["images"] = Value::Array(images);
                }
                messages.push(message);
            } else {
                let kind = object.keys().next().cloned().unwrap_or_default();
                let mut kept = object.clone();
                kept.insert("type".into(), json!(kind));
                turn.part(Value::Object(kept));
            }
        }
        messages.extend(turn.into_messages());
    }
    Ok(Body { system, messages })
}

/// An `inline_data` (or `inlineData`) part's data.
fn inline_data(part: &Value) -> Option<Value> {
    let blob = part.get("inline_data").or_else(|| part.get("inlineData"))?;
    super::image_data(blob.get("data"))
}

/// The texts of a `{parts: [{text}]}` value, joined.
fn texts(content: &Value, at: &str) -> Result<String> {
    let parts = content.get("parts").and_then(Value::as_array);
    let parts = parts.ok_or_else(|| invalid(&format!("{at}.parts"), "must be an array"))?;
    let texts: Option<Vec<&str>> = parts.iter().map(|p| p.get("text").and_then(Value::as_str)).collect();
    Ok(texts.ok_or_else(|| invalid(&format!("{at}.parts"), "must hold text parts only"))?.join("\n"))
}

/// A tool result from a function response.
fn result(response: Option<&Value>) -> Value {
    let as_text = |v: &Value| match v {
        Value::String(s) => json!(s),
        other => json!(other.to_string()),
    };
    match response {
        None | Some(Value::Null) => json!(""),
        Some(Value::Object(r)) if r.len() == 1 && r.contains_key("content") => as_text(&r["content"]),
        Some(other) => as_text(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::export::Format;

    fn import(body: Value) -> Body {
        super::super::import(Format::GeminiContents, &body).unwrap()
    }

    #[test]
    fn calls_without_ids_get_ids_and_responses_answer_them_by_name() {
        let body = json!({"system_instruction": {"parts": [{"text": "sys"}]}, "contents": [
            {"role": "user", "parts": [{"text": "go"}]},
            {"role": "model", "parts": [
                {"functionCall": {"name": "f", "args": {"x": 1}}},
                {"functionCall": {"name": "g", "args": {}}},
            ]},
            {"role": "user", "parts": [
                {"functionResponse": {"name": "g", "response": {"content": {"ok": true}}}},
                {"functionResponse": {"name": "f", "response": {"content": "done"}}},
            ]},
        ]});
        let got = import(body.clone());
        assert_eq!(got.system.as_deref(), Some("sys"));
        let turn = body["contents"][1].clone();
        assert_eq!(
            got.messages,
            [
                json!({"role": "user", "content": "go"}),
                json!({"role": "assistant", "content": null, "native": {"format": "gemini_contents", "model": null, "body": turn},
                       "tool_calls": [
                    {"id": "call_1", "name": "f", "arguments": {"x": 1}},
                    {"id": "call_2", "name": "g", "arguments": {}},
                ]}),
                json!({"role": "tool", "tool_call_id": "call_2", "content": "{\"ok\":true}"}),
                json!({"role": "tool", "tool_call_id": "call_1", "content": "done"}),
            ]
        );
    }

    #[test]
    fn a_response_to_no_call_is_refused() {
        let body =
            json!({"contents": [{"role": "user", "parts": [{"functionResponse": {"name": "f", "response": {}}}]}]});
        let error = super::super::import(Format::GeminiContents, &body).unwrap_err();
        assert!(error.to_string().contains("no functionCall named \"f\""), "{error}");
    }

    #[test]
    fn other_parts_are_kept_with_their_kind_as_type() {
        let body = json!({"contents": [{"role": "user", "parts": [{"fileData": {"fileUri": "gs://x"}}]}]});
        let got = import(body).messages;
        assert_eq!(
            got,
            [json!({"role": "user", "content": [{"type": "fileData", "fileData": {"fileUri": "gs://x"}}]})]
        );
    }
}
