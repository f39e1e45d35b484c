//! OpenAI Chat Completions `messages` read back: one convo message per OpenAI message,
//! a leading `system` (or `developer`) message as the system prompt, image parts with
//! base64 data URLs (or `{ref}`s) as attached images, each assistant message kept whole
//! as its native form.

use std::collections::HashSet;

use serde_json::{Map, Value, json};

use super::{Body, invalid, result_text, role, turns};
use crate::error::Result;
use crate::session::export::Format;

pub(super) fn import(body: &Map<String, Value>) -> Result<Body> {
    let mut system = None;
    let mut messages = Vec::new();
    let mut taken = HashSet::new();
    for (i, m) in turns(body, "messages")?.iter().enumerate() {
        let at = format!("data.messages[{i}]");
        let mut message = match role(m, &at)? {
            "system" | "developer" if i == 0 => {
                system = Some(text(&m["content"], &format!("{at}.content"))?);
                continue;
            }
            "system" | "developer" => json!({"role": "system", "content": text(&m["content"], &at)?}),
            "user" => user(m, &at)?,
            "assistant" => {
                check_assistant(m, &at)?;
                messages.push(super::native_turn(Format::OpenaiChat, m.clone(), &mut taken, &at)?.0);
                continue;
            }
            "tool" => {
                let id = m.get("tool_call_id").and_then(Value::as_str);
                let id = id.ok_or_else(|| invalid(&format!("{at}.tool_call_id"), "must be a string"))?;
                super::tool_result(id, result_text(&m["content"], &format!("{at}.content"))?)
            }
            other => return Err(invalid(&format!("{at}.role"), format!("{other:?} is not an OpenAI chat role"))),
        };
        if let Some(name) = m.get("name").filter(|n| n.is_string())
            && message["role"] != "tool"
        {
            message["name"] = name.clone();
        }
        messages.push(message);
    }
    Ok(Body { system, messages })
}

/// A string, or text parts joined (as export joins them).
fn text(content: &Value, at: &str) -> Result<String> {
    match result_text(content, at)? {
        Value::String(text) => Ok(text),
        _ => Err(invalid(at, "must be a string or an array of text parts")),
    }
}

/// A user message: a string as it is; parts with images given as base64 data URLs
/// moved to `images`, every other part kept.
fn user(m: &Value, at: &str) -> Result<Value> {
    let parts = match &m["content"] {
        Value::Array(parts) => parts,
        Value::String(_) | Value::Null => return Ok(json!({"role": "user", "content": m["content"]})),
        _ => return Err(invalid(&format!("{at}.content"), "must be a string or an array of content parts")),
    };
    let (mut kept, mut images) = (Vec::new(), Vec::new());
    for part in parts {
        let url = part.pointer("/image_url/url").filter(|_| part["type"] == "image_url");
        match url {
            Some(Value::String(url)) => match url.strip_prefix("data:").and_then(|u| u.split_once(";base64,")) {
                Some((_, data)) => images.push(json!(data)),
                None => kept.push(part.clone()),
            },
            Some(url) if super::image_data(Some(url)).is_some() => images.push(url.clone()),
            _ => kept.push(part.clone()),
        }
    }
    let mut message = json!({"role": "user", "content": kept});
    if !images.is_empty() {
        message["images"] = Value::Array(images);
    }
    Ok(message)
}

/// An assistant message must be of Chat's shape: text content, an array of calls.
fn check_assistant(m: &Value, at: &str) -> Result<()> {
    text(&m["content"], &format!("{at}.content"))?;
    match m.get("tool_calls") {
        None | Some(Value::Null | Value::Array(_)) => Ok(()),
        Some(_) => Err(invalid(&format!("{at}.tool_calls"), "must be an array")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_leading_system_message_is_the_system_prompt_and_later_ones_stay() {
        let body = json!({"messages": [
            {"role": "system", "content": "be terse"},
            {"role": "user", "content": "hi", "name": "ann"},
            {"role": "system", "content": [{"type": "text", "text": "later"}]},
        ]});
        let got = super::super::import(Format::OpenaiChat, &body).unwrap();
        assert_eq!(got.system.as_deref(), Some("be terse"));
        assert_eq!(
            got.messages,
            [json!({"role": "user", "content": "hi", "name": "ann"}), json!({"role": "system", "content": "later"})]
        );
    }

    #[test]
    fn data_url_images_are_attached_and_other_parts_kept() {
        let body = json!({"messages": [{"role": "user", "content": [
            {"type": "text", "text": "look"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,QUJD"}},
            {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
        ]}]});
        let got = super::super::import(Format::OpenaiChat, &body).unwrap().messages;
        let want = json!({"role": "user", "images": ["QUJD"], "content": [
            {"type": "text", "text": "look"},
            {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
        ]});
        assert_eq!(got, [want]);
    }

    #[test]
    fn tool_calls_and_results_come_through() {
        let call = json!({"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}});
        let body = json!({"messages": [
            {"role": "assistant", "content": null, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": "done"},
        ]});
        let got = super::super::import(Format::OpenaiChat, &body).unwrap().messages;
        let native = json!({"format": "openai_chat", "model": null,
                            "body": {"role": "assistant", "content": null, "tool_calls": [call]}});
        assert_eq!(
            got,
            [
                json!({"role": "assistant", "content": null, "native": native,
                       "tool_calls": [{"id": "c1", "name": "f", "arguments": {}}]}),
                json!({"role": "tool", "tool_call_id": "c1", "content": "done"}),
            ]
        );
    }

    #[test]
    fn unknown_roles_and_missing_call_ids_are_refused() {
        let refused = |m: Value| super::super::import(Format::OpenaiChat, &json!({"messages": [m]})).unwrap_err();
        assert!(refused(json!({"role": "function", "content": "x"})).to_string().contains("data.messages[0].role"));
        assert!(refused(json!({"role": "tool", "content": "x"})).to_string().contains("tool_call_id"));
        assert!(refused(json!({"content": "x"})).to_string().contains("role: must be a string"));
    }
}
