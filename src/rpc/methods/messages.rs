//! Methods on a session's messages: the add_* family, history and trim. Adapters from
//! params to `ops` and back.

use std::sync::Arc;

use jsonrpsee::types::ErrorObjectOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::Result;
use crate::ops::refs_in_messages;
use crate::ops::{Added, Call, History, Trimmed};
use crate::rpc::methods::Ctx;
use crate::rpc::methods::history::Reply;
use crate::rpc::outgoing::{Pieces, Splice};
use crate::session::image::{ImageInput, Images};
use crate::session::{Identity, MessageInput, Role, SessionId, empty_table};

fn fresh(role: Role, content: Value) -> MessageInput {
    MessageInput {
        role,
        content,
        name: None,
        tool_call_id: None,
        tool_calls: None,
        images: None,
        metadata: None,
        id: None,
        created_at: None,
    }
}

#[derive(Deserialize)]
pub struct AddUserParams {
    session_id: SessionId,
    text: String,
    #[serde(default)]
    images: Option<Vec<ImageInput>>,
    #[serde(default)]
    expected_revision: Option<u64>,
}

pub async fn add_user(ctx: Arc<Ctx>, p: AddUserParams, _: Arc<Call>) -> Result<Added> {
    let mut input = MessageInput { images: p.images, ..fresh(Role::User, Value::String(p.text)) };
    ctx.ops.resolve_images(&mut input).await?;
    ctx.ops.append_one(p.session_id.as_str(), input.into_message(Identity::Fresh)?, p.expected_revision).await
}

#[derive(Deserialize)]
pub struct AddAssistantParams {
    session_id: SessionId,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<Value>>,
    #[serde(default)]
    expected_revision: Option<u64>,
}

pub async fn add_assistant(ctx: Arc<Ctx>, p: AddAssistantParams, _: Arc<Call>) -> Result<Added> {
    let content = p.text.map_or(Value::Null, Value::String);
    let input = MessageInput { tool_calls: p.tool_calls, ..fresh(Role::Assistant, content) };
    ctx.ops.append_one(p.session_id.as_str(), input.into_message(Identity::Fresh)?, p.expected_revision).await
}

#[derive(Deserialize)]
pub struct AddToolResultParams {
    session_id: SessionId,
    tool_call_id: String,
    content: Value,
    #[serde(default)]
    expected_revision: Option<u64>,
}

pub async fn add_tool_result(ctx: Arc<Ctx>, p: AddToolResultParams, _: Arc<Call>) -> Result<Added> {
    let input = MessageInput { tool_call_id: Some(p.tool_call_id), ..fresh(Role::Tool, p.content) };
    ctx.ops.append_one(p.session_id.as_str(), input.into_message(Identity::Fresh)?, p.expected_revision).await
}

#[derive(Deserialize)]
pub struct AddMessageParams {
    session_id: SessionId,
    #[serde(deserialize_with = "empty_table::object")]
    message: MessageInput,
    #[serde(default)]
    expected_revision: Option<u64>,
}

pub async fn add_message(ctx: Arc<Ctx>, p: AddMessageParams, _: Arc<Call>) -> Result<Added> {
    let mut input = p.message;
    ctx.ops.resolve_images(&mut input).await.map_err(|e| e.within("message"))?;
    let message = input.into_message(Identity::Fresh).map_err(|e| e.within("message"))?;
    ctx.ops.append_one(p.session_id.as_str(), message, p.expected_revision).await
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
}

pub async fn add_messages(ctx: Arc<Ctx>, p: AddMessagesParams, _: Arc<Call>) -> Result<AddedMany> {
    let done = ctx.ops.append(p.session_id.as_str(), p.messages, p.expected_revision).await?;
    Ok(AddedMany { message_ids: done.message_ids, revision: done.revision })
}

#[derive(Deserialize)]
pub struct HistoryParams {
    session_id: SessionId,
    #[serde(default)]
    repair: Option<bool>,
    #[serde(default)]
    offset: Option<u64>,
    #[serde(default)]
    limit: Option<u64>,
    #[serde(default)]
    include_draft: Option<bool>,
    #[serde(default)]
    images: Images,
}

pub async fn history(ctx: Arc<Ctx>, p: HistoryParams, _: Arc<Call>) -> Result<Reply<History>> {
    let (repair, offset, draft) = (p.repair.unwrap_or(true), p.offset.unwrap_or(0), p.include_draft.unwrap_or(false));
    let history = ctx.ops.history(p.session_id.as_str(), repair, offset, p.limit, draft).await?;
    Reply::with_images(history, p.images, |v| refs_in_messages(&mut v["messages"]))
}

/// As `History` serializes, with the messages' texts shared, not copied.
impl Splice for History {
    fn splice(self, into: &mut Pieces) -> std::result::Result<(), ErrorObjectOwned> {
        into.raw(r#"{"messages":"#);
        into.messages(self.messages)?;
        into.raw(r#","revision":"#);
        into.json(&self.revision)?;
        into.raw(r#","repaired":"#);
        into.json(&self.repaired)?;
        if let Some(draft) = &self.draft {
            into.raw(r#","draft":"#);
            into.json(draft)?;
        }
        into.raw("}");
        Ok(())
    }
}

#[derive(Deserialize)]
pub struct TrimParams {
    session_id: SessionId,
    #[serde(default)]
    max_turns: Option<u64>,
    #[serde(default)]
    max_tokens: Option<u64>,
    #[serde(default)]
    expected_revision: Option<u64>,
}

pub async fn trim(ctx: Arc<Ctx>, p: TrimParams, _: Arc<Call>) -> Result<Trimmed> {
    ctx.ops.trim(p.session_id.as_str(), p.max_turns, p.max_tokens, p.expected_revision).await
}
