//! Messages: the stored shape, and the checks that turn a client's JSON into one.

use std::collections::HashSet;

use base64::Engine as _;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::{Error, Result, quote};
use crate::session::empty_table;

use crate::session::image::ImageInput;
use crate::session::native::{Native, Usage, derive, native_param, usage_param};
use crate::session::stamp;

/// The content of the result stored or shown for a call that never got one.
pub const CANCELLED_CONTENT: &str = "Cancelled — connection was lost before this tool ran.";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
    Tool,
}

/// A message as stored and returned. Every field is serialized, `null` where unset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// `None` only for the synthetic results a repaired history view adds.
    pub id: Option<String>,
    pub role: Role,
    pub content: Value,
    pub name: Option<String>,
    pub tool_call_id: Option<String>,
    pub tool_calls: Option<Vec<Value>>,
    pub images: Option<Vec<String>>,
    pub metadata: Option<Map<String, Value>>,
    /// An assistant turn in its provider's own form (`session::native`). Boxed, as
    /// `usage` is: most messages have neither, and a message is moved several times on
    /// its way to the store (312 bytes rather than 480).
    pub native: Option<Box<Native>>,
    /// What the response that made this message cost.
    pub usage: Option<Box<Usage>>,
    pub created_at: String,
}

impl AsRef<Message> for Message {
    fn as_ref(&self) -> &Message {
        self
    }
}

impl Message {
    /// Whether `self`, a message a client appends again, is `stored` (spec section 15):
    /// every member a client gives equal as a JSON value (`same_json`). With `native`,
    /// `content` and `tool_calls` are derived from it, so `native` is compared instead
    /// (ids given to a body's id-less calls depend on what was stored before).
    pub fn is_retry_of(&self, stored: &Message) -> bool {
        let common = match (&self.native, &stored.native) {
            (None, None) => {
                same_json(&self.content, &stored.content)
                    && same_json(&as_json(&self.tool_calls), &as_json(&stored.tool_calls))
            }
            (Some(a), Some(b)) => same_json(&as_json(a), &as_json(b)),
            _ => false,
        };
        common
            && self.role == stored.role
            && self.name == stored.name
            && self.tool_call_id == stored.tool_call_id
            && self.images == stored.images
            && same_json(&as_json(&self.metadata), &as_json(&stored.metadata))
    }

    /// A message with a fresh id and time stamp (of one reading of the clock) and no
    /// optional fields.
    pub fn new(role: Role, content: Value) -> Self {
        let at = crate::mint::now_micros();
        Message {
            id: Some(crate::mint::id_at(at)),
            role,
            content,
            name: None,
            tool_call_id: None,
            tool_calls: None,
            images: None,
            metadata: None,
            native: None,
            usage: None,
            created_at: stamp::at_micros(at),
        }
    }

    /// The result that stands in for a call that never got one.
    pub fn cancelled(tool_call_id: &str, id: Option<String>) -> Self {
        let mut metadata = Map::new();
        metadata.insert("synthetic".into(), Value::Bool(true));
        Message {
            id,
            tool_call_id: Some(tool_call_id.to_owned()),
            metadata: Some(metadata),
            ..Message::new(Role::Tool, Value::String(CANCELLED_CONTENT.into()))
        }
    }

    /// The ids of this message's tool calls, in order; empty when it has none.
    pub fn call_ids(&self) -> impl Iterator<Item = &str> {
        self.tool_calls.iter().flatten().filter_map(call_id)
    }

    pub fn opens_group(&self) -> bool {
        self.role == Role::Assistant && self.tool_calls.as_ref().is_some_and(|c| !c.is_empty())
    }
}

/// The `id` of a ToolCall object.
pub fn call_id(call: &Value) -> Option<&str> {
    call.get("id").and_then(Value::as_str)
}

/// A new message id (`crate::mint`: a UUID v7, or counted).
pub fn new_message_id() -> String {
    crate::mint::id()
}

/// A message as a client sends it. Unknown fields are ignored; `id` and `created_at`
/// are honoured only on import.
#[derive(Debug, Deserialize)]
pub struct MessageInput {
    pub role: Role,
    #[serde(default)]
    pub content: Value,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub tool_call_id: Option<String>,
    #[serde(default)]
    pub tool_calls: Option<Vec<Value>>,
    /// Base64, or refs that `ops` resolves to base64 before `into_message`.
    #[serde(default)]
    pub images: Option<Vec<ImageInput>>,
    /// `[]` is read as `{}` (`session::empty_table`), here and for whole messages.
    #[serde(default, deserialize_with = "empty_table::optional_object")]
    pub metadata: Option<Map<String, Value>>,
    /// `{format, model, body}`: an assistant turn in its provider's own form; its common
    /// form (`content`, `tool_calls`) is derived from it.
    #[serde(default)]
    pub native: Option<Box<Value>>,
    #[serde(default)]
    pub usage: Option<Box<Value>>,
    /// An assistant turn that said nothing (an empty answer a model gave) is stored as
    /// given instead of refused; export leaves it out with a warning.
    #[serde(default)]
    pub allow_empty: bool,
    /// The id the client chose for an appended message (a UUID), so that a retry of the
    /// append is answered instead of stored twice (`store::Histories::append`).
    #[serde(default)]
    pub message_id: Option<String>,
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub created_at: Option<String>,
    /// The call ids the session already holds, which ids given to a native turn's
    /// id-less calls (`call_<n>`) skip; set by the use-case that appends it.
    #[serde(skip)]
    pub taken_call_ids: HashSet<String>,
}

/// How a message comes in: appended now, or imported with the history it belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Identity {
    /// Appended (`add_*`): a new id and time stamp; given ones are ignored. It must be a
    /// message a provider would take, so an assistant message must say something.
    Fresh,
    /// Imported (`from_dict`): a given `id` and `created_at` are kept (the time stamp in
    /// its canonical form), and the message is kept as given.
    Given,
}

impl MessageInput {
    /// A message of `role` with `content` and nothing else.
    pub fn new(role: Role, content: Value) -> Self {
        MessageInput {
            role,
            content,
            name: None,
            tool_call_id: None,
            tool_calls: None,
            images: None,
            metadata: None,
            native: None,
            usage: None,
            allow_empty: false,
            message_id: None,
            id: None,
            created_at: None,
            taken_call_ids: HashSet::new(),
        }
    }

    /// Checks the field rules of spec section 2 and builds the message to store.
    pub fn into_message(mut self, identity: Identity) -> Result<Message> {
        let native = self.native.take().filter(|n| !n.is_null()).map(|n| native_param(*n)).transpose()?;
        let usage = self.usage.take().filter(|u| !u.is_null()).map(|u| usage_param(&u)).transpose()?;
        if let Some(native) = &native {
            self.common_form_of(native, identity)?;
        }
        if let Value::Array(parts) = &mut self.content {
            parts.iter_mut().for_each(empty_table::content_part);
        }
        check_content(&self.content)?;
        let tool_call_id = match (self.role, self.tool_call_id) {
            (Role::Tool, Some(id)) if !id.is_empty() => Some(id),
            (Role::Tool, _) => return Err(Error::invalid("a tool message needs a non-empty tool_call_id")),
            (role, Some(_)) => {
                return Err(Error::invalid(format!("tool_call_id is not allowed on a {} message", role_name(role))));
            }
            (_, None) => None,
        };
        let tool_calls = match self.tool_calls {
            Some(calls) if calls.is_empty() => None,
            Some(mut calls) if self.role == Role::Assistant => {
                calls.iter_mut().for_each(empty_table::tool_call);
                Some(check_tool_calls(calls)?)
            }
            Some(_) => {
                return Err(Error::invalid(format!(
                    "tool_calls are only allowed on an assistant message, not on a {} message",
                    role_name(self.role)
                )));
            }
            None => None,
        };
        let images = self.images.map(base64_images).transpose()?;
        if let Some(images) = &images {
            check_images(images)?;
        }
        if identity == Identity::Fresh
            && self.role == Role::Assistant
            && tool_calls.is_none()
            && is_empty(&self.content)
            && native.is_none()
            && !self.allow_empty
        {
            return Err(Error::invalid(EMPTY_ASSISTANT));
        }
        let mut message = Message {
            tool_call_id,
            tool_calls,
            name: self.name,
            images,
            metadata: self.metadata,
            native: native.map(Box::new),
            usage: usage.map(Box::new),
            ..Message::new(self.role, self.content)
        };
        if identity == Identity::Fresh
            && let Some(id) = self.message_id
        {
            message.id = Some(client_message_id(&id)?);
        }
        if identity == Identity::Given {
            if let Some(id) = self.id {
                if id.is_empty() {
                    return Err(Error::invalid("id: must not be empty"));
                }
                message.id = Some(id);
            }
            if let Some(at) = self.created_at {
                message.created_at =
                    stamp::normalize(&at).map_err(|why| Error::invalid(format!("created_at: {why}")))?;
            }
        }
        Ok(message)
    }
}

impl MessageInput {
    /// Sets `content` and `tool_calls` to the common form of `native`: given beside it
    /// on an append, they are refused; given on an import, they must be that form
    /// (ids aside where the body names none).
    fn common_form_of(&mut self, native: &Native, identity: Identity) -> Result<()> {
        if self.role != Role::Assistant {
            return Err(Error::invalid(format!(
                "native: only an assistant message has one, not a {} message",
                role_name(self.role)
            )));
        }
        let mut common = derive(native)?;
        let given_calls = self.tool_calls.as_ref().filter(|c| !c.is_empty());
        match identity {
            Identity::Fresh if !self.content.is_null() || given_calls.is_some() => {
                return Err(Error::invalid(
                    "give `native` or `content`/`tool_calls`, not both: the common form is derived from `native`",
                ));
            }
            Identity::Fresh => common.assign_ids(&self.taken_call_ids),
            Identity::Given if self.content.is_null() && given_calls.is_none() => {
                common.assign_ids(&self.taken_call_ids)
            }
            Identity::Given => {
                if !common.agrees_with(&self.content, given_calls.map(Vec::as_slice)) {
                    return Err(Error::invalid(
                        "content, tool_calls: must be the common form of `native` (derive them from it, or leave them out)",
                    ));
                }
                if let Some(given) = given_calls {
                    for (call, stored) in common.calls.iter_mut().zip(given) {
                        call.id = call_id(stored).map(str::to_owned);
                    }
                }
                common.assign_ids(&self.taken_call_ids);
            }
        }
        self.content = common.content();
        self.tool_calls = common.tool_calls();
        Ok(())
    }
}

/// A `message_id` as stored: a UUID in its hyphenated form, in lower case.
pub fn client_message_id(given: &str) -> Result<String> {
    match uuid::Uuid::try_parse(given) {
        Ok(id) if given.len() == 36 => Ok(id.hyphenated().to_string()),
        _ => Err(Error::invalid(format!(
            "message_id: {} is not a UUID (32 hex digits as 8-4-4-4-12, e.g. from crypto.randomUUID())",
            quote(given)
        ))),
    }
}

/// Whether two JSON values are equal as values: numbers by value (`1e2` is `100`),
/// objects whatever their members' order.
pub fn same_json(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            let (x, y) = (x.to_string(), y.to_string());
            match (x.parse::<i128>(), y.parse::<i128>()) {
                (Ok(i), Ok(j)) => i == j,
                _ => x == y || x.parse::<f64>().is_ok_and(|f| y.parse::<f64>() == Ok(f)),
            }
        }
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same_json(x, y)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same_json(v, w)))
        }
        _ => a == b,
    }
}

/// A member as a JSON value, to compare.
fn as_json(member: &impl Serialize) -> Value {
    serde_json::to_value(member).unwrap_or(Value::Null)
}

/// Why an appended assistant message with no text and no tool calls is refused.
const EMPTY_ASSISTANT: &str = "an assistant message needs text or tool_calls: every provider refuses an empty one";

/// Content that says nothing: null, `""` or no content parts.
fn is_empty(content: &Value) -> bool {
    match content {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Array(parts) => parts.is_empty(),
        _ => false,
    }
}

pub fn role_name(role: Role) -> &'static str {
    match role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    }
}

/// Content is a string, an array of content parts (objects with a string `type`), or null.
pub fn check_content(content: &Value) -> Result<()> {
    match content {
        Value::Null | Value::String(_) => Ok(()),
        Value::Array(parts) => {
            for (i, part) in parts.iter().enumerate() {
                if !part.get("type").is_some_and(Value::is_string) {
                    return Err(Error::invalid(format!("content[{i}]: must be an object with a string `type`")));
                }
            }
            Ok(())
        }
        _ => Err(Error::invalid("content: must be a string, an array of content parts or null")),
    }
}

fn check_tool_calls(calls: Vec<Value>) -> Result<Vec<Value>> {
    let mut seen = std::collections::HashSet::new();
    for (i, call) in calls.iter().enumerate() {
        let id = match call_id(call) {
            Some(id) if call.is_object() && !id.is_empty() => id,
            _ => {
                return Err(Error::invalid(format!("tool_calls[{i}]: must be an object with a non-empty string `id`")));
            }
        };
        if !seen.insert(id) {
            return Err(Error::invalid(format!("tool_calls[{i}]: the id {} appears twice in one message", quote(id))));
        }
    }
    Ok(calls)
}

/// The images once their refs are resolved; a ref left is refused.
fn base64_images(images: Vec<ImageInput>) -> Result<Vec<String>> {
    let each = images.into_iter().enumerate().map(|(i, image)| match image {
        ImageInput::Base64(data) => Ok(data),
        ImageInput::Ref(r) => Err(Error::invalid(format!("images[{i}]: unknown image ref {}", quote(&r)))),
    });
    each.collect()
}

fn check_images(images: &[String]) -> Result<()> {
    use crate::session::image::BASE64;
    for (i, image) in images.iter().enumerate() {
        if image.is_empty() {
            return Err(Error::invalid(format!("images[{i}]: must not be empty")));
        }
        if let Err(e) = BASE64.decode(image) {
            return Err(Error::invalid(format!("images[{i}]: must be base64: {e}")));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn input(v: Value) -> Result<Message> {
        serde_json::from_value::<MessageInput>(v).map_err(Error::invalid)?.into_message(Identity::Given)
    }

    #[test]
    fn tool_fields_belong_to_their_roles() {
        assert!(input(json!({"role": "user", "content": "hi", "tool_call_id": "x"})).is_err());
        assert!(input(json!({"role": "tool", "content": "r"})).is_err());
        assert!(input(json!({"role": "user", "tool_calls": [{"id": "a"}]})).is_err());
        assert!(input(json!({"role": "assistant", "tool_calls": [{"id": ""}]})).is_err());
        assert!(input(json!({"role": "assistant", "tool_calls": [{"id": "a"}, {"id": "a"}]})).is_err());
        let m = input(json!({"role": "user", "content": "hi", "tool_call_id": null, "tool_calls": null})).unwrap();
        assert_eq!((m.tool_call_id, m.tool_calls), (None, None));
    }

    #[test]
    fn content_shapes() {
        assert!(input(json!({"role": "user", "content": 5})).is_err());
        assert!(input(json!({"role": "user", "content": [{"text": "no type"}]})).is_err());
        let parts = json!([{"type": "text", "text": "a", "image_url": null}]);
        assert_eq!(input(json!({"role": "user", "content": parts})).unwrap().content, parts);
    }

    #[test]
    fn images_are_base64() {
        assert!(input(json!({"role": "user", "images": ["iVBORw0KGgo="]})).is_ok());
        assert!(input(json!({"role": "user", "images": ["iVBORw0KGgo"]})).is_ok());
        assert!(input(json!({"role": "user", "images": ["not base64!"]})).is_err());
        assert!(input(json!({"role": "user", "images": [""]})).is_err());
    }

    #[test]
    fn imported_time_stamps_are_kept_in_canonical_form() {
        let m = input(json!({"role": "user", "created_at": "2024-01-01t10:00:00.5+02:00"})).unwrap();
        assert_eq!(m.created_at, "2024-01-01T08:00:00.500000Z");
        let e = input(json!({"role": "user", "created_at": "2024-01-01T10:00:60Z"})).unwrap_err();
        assert!(e.to_string().starts_with("invalid params: created_at: must be an RFC 3339 time stamp"), "{e}");
        // An appended message gets the server's own stamp, whatever it was given.
        let fresh = serde_json::from_value::<MessageInput>(json!({"role": "user", "created_at": "junk"})).unwrap();
        assert_ne!(fresh.into_message(Identity::Fresh).unwrap().created_at, "junk");
    }

    #[test]
    fn an_appended_assistant_message_must_say_something() {
        let append = |v: Value| serde_json::from_value::<MessageInput>(v).unwrap().into_message(Identity::Fresh);
        for empty in [json!(null), json!(""), json!([])] {
            let m = json!({"role": "assistant", "content": empty, "tool_calls": []});
            assert_eq!(append(m.clone()).unwrap_err().to_string(), format!("invalid params: {EMPTY_ASSISTANT}"));
            assert!(input(m).is_ok(), "an import keeps it as given");
        }
        assert!(append(json!({"role": "assistant"})).is_err());
        assert!(append(json!({"role": "assistant", "content": " "})).is_ok());
        assert!(append(json!({"role": "assistant", "content": [{"type": "text", "text": "x"}]})).is_ok());
        assert!(append(json!({"role": "assistant", "tool_calls": [{"id": "a"}]})).is_ok());
        assert!(append(json!({"role": "user", "content": ""})).is_ok(), "only assistant messages");
    }
}
