//! The add_* family: one message, or several, appended as a client gave them
//! (`ops::Ops::add`, `ops::Ops::append`).

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::ops::{Added, AddedResponse, Call};
use crate::rpc::methods::Ctx;
use crate::rpc::outgoing::{MethodResult, Outcome, write};
use crate::session::export::Format;
use crate::session::image::ImageInput;
use crate::session::{MessageInput, Role, SessionId, empty_table};

fn fresh(role: Role, content: Value) -> MessageInput {
    MessageInput::new(role, content)
}

#[derive(Deserialize)]
pub struct AddUserParams {
    session_id: SessionId,
    text: String,
    #[serde(default)]
    images: Option<Vec<ImageInput>>,
    #[serde(default)]
    message_id: Option<String>,
    #[serde(default)]
    expected_revision: Option<u64>,
}

pub async fn add_user(ctx: Arc<Ctx>, p: AddUserParams, _: Arc<Call>) -> Result<Added> {
    let input = MessageInput { images: p.images, message_id: p.message_id, ..fresh(Role::User, Value::String(p.text)) };
    ctx.ops.add(p.session_id.as_str(), input, None, p.expected_revision).await
}

/// `Added` in its documented shape, written without serde's walk over its keys and their
/// escapes: it is the reply to every append of one message.
impl MethodResult for Added {
    fn write(self, max: usize) -> Outcome {
        write(max, |into| {
            into.raw(r#"{"message_id":"#);
            into.string(&self.message_id)?;
            into.raw(r#","index":"#);
            into.number(self.index);
            into.raw(r#","revision":"#);
            into.number(self.revision);
            into.raw(if self.duplicate { r#","duplicate":true}"# } else { "}" });
            Ok(())
        })
    }
}

#[derive(Deserialize)]
pub struct AddAssistantParams {
    session_id: SessionId,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<Value>>,
    #[serde(default)]
    allow_empty: bool,
    #[serde(default)]
    message_id: Option<String>,
    #[serde(default)]
    expected_revision: Option<u64>,
}

pub async fn add_assistant(ctx: Arc<Ctx>, p: AddAssistantParams, _: Arc<Call>) -> Result<Added> {
    let content = p.text.map_or(Value::Null, Value::String);
    let input = MessageInput {
        tool_calls: p.tool_calls,
        allow_empty: p.allow_empty,
        message_id: p.message_id,
        ..fresh(Role::Assistant, content)
    };
    ctx.ops.add(p.session_id.as_str(), input, None, p.expected_revision).await
}

#[derive(Deserialize)]
pub struct AddToolResultParams {
    session_id: SessionId,
    tool_call_id: String,
    content: Value,
    /// A screenshot or plot the tool returned: base64, or refs, as `add_user` takes them.
    #[serde(default)]
    images: Option<Vec<ImageInput>>,
    #[serde(default)]
    message_id: Option<String>,
    #[serde(default)]
    expected_revision: Option<u64>,
}

pub async fn add_tool_result(ctx: Arc<Ctx>, p: AddToolResultParams, _: Arc<Call>) -> Result<Added> {
    let input = MessageInput {
        tool_call_id: Some(p.tool_call_id),
        images: p.images,
        message_id: p.message_id,
        ..fresh(Role::Tool, p.content)
    };
    ctx.ops.add(p.session_id.as_str(), input, None, p.expected_revision).await
}

#[derive(Deserialize)]
pub struct AddMessageParams {
    session_id: SessionId,
    #[serde(deserialize_with = "empty_table::object")]
    message: MessageInput,
    #[serde(default)]
    message_id: Option<String>,
    #[serde(default)]
    expected_revision: Option<u64>,
}

pub async fn add_message(ctx: Arc<Ctx>, p: AddMessageParams, _: Arc<Call>) -> Result<Added> {
    let mut message = p.message;
    match (p.message_id, &message.message_id) {
        (Some(beside), Some(inside)) if &beside != inside => {
            return Err(Error::invalid("message_id: given beside `message` and inside it, differently"));
        }
        (Some(beside), _) => message.message_id = Some(beside),
        (None, _) => {}
    }
    ctx.ops.add(p.session_id.as_str(), message, Some("message"), p.expected_revision).await
}

#[derive(Deserialize)]
pub struct AddMessagesParams {
    session_id: SessionId,
    #[serde(deserialize_with = "empty_table::objects")]
    messages: Vec<MessageInput>,
    #[serde(default)]
    expected_revision: Option<u64>,
}

#[derive(Serialize, Clone)]
pub struct AddedMany {
    message_ids: Vec<String>,
    revision: u64,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    duplicate: bool,
}

pub async fn add_messages(ctx: Arc<Ctx>, p: AddMessagesParams, _: Arc<Call>) -> Result<AddedMany> {
    let done = ctx.ops.append(p.session_id.as_str(), p.messages, p.expected_revision).await?;
    Ok(AddedMany { message_ids: done.message_ids, revision: done.revision, duplicate: done.duplicate_of.is_some() })
}

#[derive(Deserialize)]
pub struct AddResponseParams {
    session_id: SessionId,
    format: Format,
    /// Kept as given: its members' order is the native body's.
    response: Value,
    #[serde(default, deserialize_with = "empty_table::optional_object")]
    metadata: Option<Map<String, Value>>,
    #[serde(default)]
    message_id: Option<String>,
    #[serde(default)]
    expected_revision: Option<u64>,
}

pub async fn add_response(ctx: Arc<Ctx>, p: AddResponseParams, _: Arc<Call>) -> Result<AddedResponse> {
    let id = p.session_id.as_str();
    ctx.ops.add_response(id, p.format, &p.response, p.metadata, p.message_id, p.expected_revision).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written(added: Added, max: usize) -> std::result::Result<String, i32> {
        added.write(max).map(|written| written.text()).map_err(|e| e.code())
    }

    #[test]
    fn an_append_is_answered_in_its_documented_shape() {
        let added =
            |message_id: &str, duplicate| Added { message_id: message_id.into(), index: 7, revision: 12, duplicate };
        assert_eq!(
            written(added("m-1", false), usize::MAX).unwrap(),
            r#"{"message_id":"m-1","index":7,"revision":12}"#
        );
        assert_eq!(
            written(added("m-1", true), usize::MAX).unwrap(),
            r#"{"message_id":"m-1","index":7,"revision":12,"duplicate":true}"#
        );
        // A client's id is escaped as JSON.
        let id = "quote \" and \\ and \u{1}";
        let text = written(added(id, false), usize::MAX).unwrap();
        assert_eq!(serde_json::from_str::<Value>(&text).unwrap()["message_id"], id);
        assert_eq!(written(added("m-1", false), 20), Err(1005), "over the reply limit");
    }
}
