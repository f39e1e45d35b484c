//! Provider request bodies read back into convo messages: the inverse of `export`
//! (`session/from_dict` with a `format`). Each reader takes the body's messages (or
//! contents) and system prompt, ignores its other members, and returns the system prompt
//! and messages in convo's own shape, which `from_dict` then checks like any import.
//!
//! The promise is a round trip: importing what `export` wrote and exporting it again
//! gives the same body, byte for byte. Each assistant turn is kept whole as one message
//! with the turn as its native form (spec section 13), its common form derived from it,
//! so the export replays it as it was. User turns are split where export would have
//! merged: one tool message per tool result, and a new message at each text item of a
//! turn (export joins consecutive messages of one role into one turn, and a message's
//! text into one item). Items with no convo counterpart are kept as content parts of
//! their type, so nothing in the body is silently lost. Pure.

mod anthropic;
mod gemini;
mod interactions;
mod openai;
mod responses;

use std::collections::HashSet;

use serde_json::{Map, Value, json};

use crate::error::{Error, Result};
use crate::session::export::Format;
use crate::session::native::{self, Native};

/// What a provider body holds, in convo's terms.
#[derive(Debug, Clone, PartialEq)]
pub struct Body {
    pub system: Option<String>,
    /// Messages as `from_dict` takes them (`MessageInput`'s JSON shape).
    pub messages: Vec<Value>,
}

/// Reads a provider request body (`data` of `from_dict`).
pub fn import(format: Format, body: &Value) -> Result<Body> {
    let body = body.as_object().ok_or_else(|| Error::invalid("data: must be a request body (an object)"))?;
    match format {
        Format::OpenaiChat => openai::import(body),
        Format::OpenaiResponses => responses::import(body),
        Format::AnthropicMessages => anthropic::import(body),
        Format::GeminiContents => gemini::import(body),
        Format::GeminiInteractions => interactions::import(body),
    }
}

/// An assistant turn of `format`, kept whole as its message's native form (its model
/// unknown), with its common form derived: each call the body names no id for gets
/// `call_<n>`, n counting from 1 and skipping the ids `taken` so far in the body (which
/// then holds it too). Returns the message and its calls' (name, id), in order.
fn native_turn(
    format: Format,
    body: Value,
    taken: &mut HashSet<String>,
    at: &str,
) -> Result<(Value, Vec<(String, String)>)> {
    let native = Native { format, model: None, body };
    let mut common = native::derive(&native).map_err(|e| e.within(at))?;
    common.assign_ids(taken);
    let calls: Vec<(String, String)> =
        common.calls.iter().map(|c| (c.name.clone(), c.id.clone().unwrap_or_default())).collect();
    taken.extend(calls.iter().map(|(_, id)| id.clone()));
    let mut message = json!({"role": "assistant", "content": common.content(), "native": native});
    if let Some(calls) = common.tool_calls() {
        message["tool_calls"] = Value::Array(calls);
    }
    Ok((message, calls))
}

/// The assistant's items of a flat body (Responses items, Interactions steps) between two
/// of the user's or a tool's, gathered to become one native message.
struct Run {
    format: Format,
    items: Vec<Value>,
    /// Where in `input` the run began: what an error in it names.
    from: usize,
    /// The call ids given so far in the body.
    taken: HashSet<String>,
}

impl Run {
    fn new(format: Format) -> Self {
        Run { format, items: Vec::new(), from: 0, taken: HashSet::new() }
    }

    /// Item `i` of `input`, the assistant's.
    fn push(&mut self, i: usize, item: &Value) {
        if self.items.is_empty() {
            self.from = i;
        }
        self.items.push(item.clone());
    }

    /// The items gathered so far, as one native message onto `messages`.
    fn end(&mut self, messages: &mut Vec<Value>) -> Result<()> {
        if self.items.is_empty() {
            return Ok(());
        }
        let body = Value::Array(std::mem::take(&mut self.items));
        let at = format!("data.input[{}]", self.from);
        messages.push(native_turn(self.format, body, &mut self.taken, &at)?.0);
        Ok(())
    }
}

/// The array a body keeps its turns in (`messages`, `contents`); missing is empty.
fn turns<'a>(body: &'a Map<String, Value>, member: &str) -> Result<&'a [Value]> {
    match body.get(member) {
        None | Some(Value::Null) => Ok(&[]),
        Some(Value::Array(turns)) => Ok(turns),
        Some(_) => Err(Error::invalid(format!("data.{member}: must be an array"))),
    }
}

/// A turn's role and its items, which must be an array (a string is one text item).
fn role<'a>(turn: &'a Value, at: &str) -> Result<&'a str> {
    turn.get("role").and_then(Value::as_str).ok_or_else(|| Error::invalid(format!("{at}.role: must be a string")))
}

/// Image data as a body holds it: base64, or `{"ref": …}` where `export` with
/// `images: "ref"` put one.
fn image_data(data: Option<&Value>) -> Option<Value> {
    data.filter(|d| d.is_string() || d.get("ref").is_some_and(Value::is_string)).cloned()
}

fn invalid(at: &str, what: impl std::fmt::Display) -> Error {
    Error::invalid(format!("{at}: {what}"))
}

/// Builds the messages of one user (or system) turn. `export` writes each message as one
/// turn item of text first, then its images and other parts, and joins consecutive
/// messages of a role into one turn; so a text item after text or images starts a new
/// message.
struct TurnMessages {
    role: &'static str,
    out: Vec<Message>,
}

#[derive(Default)]
struct Message {
    /// Content items in order: text parts and parts of other types.
    content: Vec<Value>,
    images: Vec<Value>,
}

impl TurnMessages {
    fn new(role: &'static str) -> Self {
        TurnMessages { role, out: Vec::new() }
    }

    fn current(&mut self) -> &mut Message {
        if self.out.is_empty() {
            self.out.push(Message::default());
        }
        self.out.last_mut().expect("a message")
    }

    fn text(&mut self, text: &str) {
        let split =
            self.out.last().is_some_and(|m| !m.images.is_empty() || m.content.iter().any(|p| p["type"] == "text"));
        if split {
            self.out.push(Message::default());
        }
        self.current().content.push(json!({"type": "text", "text": text}));
    }

    fn image(&mut self, image: Value) {
        self.current().images.push(image);
    }

    /// An item kept as a content part of its own type.
    fn part(&mut self, part: Value) {
        self.current().content.push(part);
    }

    fn into_messages(self) -> Vec<Value> {
        let role = self.role;
        self.out.into_iter().map(|m| m.into_value(role)).collect()
    }
}

impl Message {
    /// Text only is a string (texts joined, as export joins them); anything else the
    /// parts in order.
    fn into_value(self, role: &str) -> Value {
        let texts: Option<Vec<&str>> =
            self.content.iter().map(|p| if p["type"] == "text" { p["text"].as_str() } else { None }).collect();
        let content = match texts {
            Some(texts) => Value::String(texts.join("\n")),
            None => Value::Array(self.content),
        };
        let mut message = json!({"role": role, "content": content});
        if !self.images.is_empty() {
            message["images"] = Value::Array(self.images);
        }
        message
    }
}

/// A tool message answering `id`.
fn tool_result(id: &str, content: Value) -> Value {
    json!({"role": "tool", "tool_call_id": id, "content": content})
}

/// A tool message answering `id` from a result's content that may hold images: the
/// items `image_of` reads as one are the message's images, the rest its content
/// (`result_text`).
fn tool_result_with_images(
    id: &str,
    content: &Value,
    at: &str,
    image_of: impl Fn(&Value) -> Option<Value>,
) -> Result<Value> {
    let (images, rest): (Vec<Value>, Value) = match content {
        Value::Array(items) if items.iter().any(|i| image_of(i).is_some()) => {
            let rest = items.iter().filter(|i| image_of(i).is_none()).cloned().collect();
            (items.iter().filter_map(&image_of).collect(), rest)
        }
        _ => (Vec::new(), content.clone()),
    };
    let mut message = tool_result(id, result_text(&rest, at)?);
    if !images.is_empty() {
        message["images"] = Value::Array(images);
    }
    Ok(message)
}

/// Text items (strings or `{type: text}` objects) joined, as a tool result's content.
fn result_text(content: &Value, at: &str) -> Result<Value> {
    match content {
        Value::Null => Ok(json!("")),
        Value::String(_) => Ok(content.clone()),
        Value::Array(items) => {
            let texts: Option<Vec<&str>> =
                items.iter().map(|i| i.get("text").and_then(Value::as_str).or_else(|| i.as_str())).collect();
            match texts {
                Some(texts) => Ok(json!(texts.join("\n"))),
                None => Ok(content.clone()),
            }
        }
        _ => Err(invalid(at, "must be a string or an array of content blocks")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn messages(format: Format, body: Value) -> Vec<Value> {
        import(format, &body).unwrap().messages
    }

    #[test]
    fn a_turn_splits_at_each_text() {
        let mut turn = TurnMessages::new("user");
        turn.text("a");
        turn.image(json!("QUJD"));
        turn.text("b");
        let got = turn.into_messages();
        assert_eq!(
            got,
            [json!({"role": "user", "content": "a", "images": ["QUJD"]}), json!({"role": "user", "content": "b"})]
        );
    }

    #[test]
    fn a_body_that_is_not_an_object_is_refused() {
        let error = import(Format::OpenaiChat, &json!([])).unwrap_err();
        assert!(error.to_string().contains("data: must be a request body"), "{error}");
        let error = import(Format::GeminiContents, &json!({"contents": {}})).unwrap_err();
        assert!(error.to_string().contains("data.contents: must be an array"), "{error}");
    }

    #[test]
    fn other_members_of_the_body_are_ignored() {
        let body = json!({"model": "m", "temperature": 0, "messages": [{"role": "user", "content": "hi"}]});
        assert_eq!(messages(Format::OpenaiChat, body), [json!({"role": "user", "content": "hi"})]);
    }
}
