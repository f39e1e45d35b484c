//! Methods on a session's messages: the add_* family, history and trim.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{Error, Result};
use crate::rpc::methods::{Ctx, MAX_MESSAGES, check_count, provider};
use crate::session::{Identity, Message, MessageInput, Role, SessionId};
use crate::store::Appended;

#[derive(Serialize, Clone)]
pub struct Added {
    message_id: String,
    index: u64,
    revision: u64,
}

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

async fn add_one(ctx: &Ctx, session_id: &SessionId, message: Message, expected: Option<u64>) -> Result<Added> {
    let Appended { mut message_ids, index, revision } =
        ctx.store.append(session_id.as_str(), vec![message], expected).await?;
    let message_id = message_ids.pop().ok_or_else(|| Error::Internal("append returned no id".into()))?;
    Ok(Added { message_id, index, revision })
}

#[derive(Deserialize)]
pub struct AddUserParams {
    session_id: SessionId,
    text: String,
    #[serde(default)]
    images: Option<Vec<String>>,
    #[serde(default)]
    expected_revision: Option<u64>,
}

pub async fn add_user(ctx: Arc<Ctx>, p: AddUserParams) -> Result<Added> {
    let input = MessageInput { images: p.images, ..fresh(Role::User, Value::String(p.text)) };
    add_one(&ctx, &p.session_id, input.into_message(Identity::Fresh)?, p.expected_revision).await
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

pub async fn add_assistant(ctx: Arc<Ctx>, p: AddAssistantParams) -> Result<Added> {
    let content = p.text.map_or(Value::Null, Value::String);
    let input = MessageInput { tool_calls: p.tool_calls, ..fresh(Role::Assistant, content) };
    add_one(&ctx, &p.session_id, input.into_message(Identity::Fresh)?, p.expected_revision).await
}

#[derive(Deserialize)]
pub struct AddToolResultParams {
    session_id: SessionId,
    tool_call_id: String,
    content: Value,
    #[serde(default)]
    expected_revision: Option<u64>,
}

pub async fn add_tool_result(ctx: Arc<Ctx>, p: AddToolResultParams) -> Result<Added> {
    let input = MessageInput { tool_call_id: Some(p.tool_call_id), ..fresh(Role::Tool, p.content) };
    add_one(&ctx, &p.session_id, input.into_message(Identity::Fresh)?, p.expected_revision).await
}

#[derive(Deserialize)]
pub struct AddMessageParams {
    session_id: SessionId,
    message: MessageInput,
    #[serde(default)]
    expected_revision: Option<u64>,
}

pub async fn add_message(ctx: Arc<Ctx>, p: AddMessageParams) -> Result<Added> {
    let message = p.message.into_message(Identity::Fresh).map_err(|e| within("message", e))?;
    add_one(&ctx, &p.session_id, message, p.expected_revision).await
}

#[derive(Deserialize)]
pub struct AddMessagesParams {
    session_id: SessionId,
    messages: Vec<MessageInput>,
    #[serde(default)]
    expected_revision: Option<u64>,
}

#[derive(Serialize, Clone)]
pub struct AddedMany {
    message_ids: Vec<String>,
    revision: u64,
}

pub async fn add_messages(ctx: Arc<Ctx>, p: AddMessagesParams) -> Result<AddedMany> {
    check_count("the request", p.messages.len())?;
    let messages = p
        .messages
        .into_iter()
        .enumerate()
        .map(|(i, m)| m.into_message(Identity::Fresh).map_err(|e| within(&format!("messages[{i}]"), e)))
        .collect::<Result<Vec<_>>>()?;
    let done = ctx.store.append(p.session_id.as_str(), messages, p.expected_revision).await?;
    Ok(AddedMany { message_ids: done.message_ids, revision: done.revision })
}

/// Names the member of the params (`messages[2]`) that an invalid-params error is about.
pub fn within(path: &str, e: Error) -> Error {
    match e {
        Error::InvalidParams(why) => Error::InvalidParams(format!("{path}: {why}")),
        other => other,
    }
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
}

#[derive(Serialize, Clone)]
pub struct History {
    messages: Vec<Arc<Message>>,
    revision: u64,
    repaired: u64,
}

pub async fn history(ctx: Arc<Ctx>, p: HistoryParams) -> Result<History> {
    let offset = p.offset.unwrap_or(0);
    if p.limit.is_some_and(|l| l > MAX_MESSAGES) {
        return Err(Error::invalid(format!("limit: must be at most {MAX_MESSAGES}")));
    }
    // Without a limit, read one past the bound, to refuse rather than build a huge reply.
    let page = ctx.store.history(p.session_id.as_str(), offset, p.limit.or(Some(MAX_MESSAGES + 1))).await?;
    if p.limit.is_none() {
        let synthetic = page.tail.unanswered().count();
        check_count("the history", page.messages.len() + synthetic).map_err(|_| {
            Error::TooLarge(format!(
                "the history holds more than {MAX_MESSAGES} messages; page it with offset and limit"
            ))
        })?;
    }
    let mut messages = page.messages;
    let mut repaired = 0;
    if p.repair.unwrap_or(true) {
        // The view is the stored history followed by the synthetic results; offset and
        // limit index the view.
        let stored = page.info.message_count;
        let end = p.limit.map_or(u64::MAX, |l| offset.saturating_add(l));
        let from = offset.max(stored) - stored;
        let to = end.max(stored) - stored;
        for synthetic in page.tail.repair_view().into_iter().skip(clamp(from)).take(clamp(to - from)) {
            messages.push(Arc::new(synthetic));
            repaired += 1;
        }
    }
    Ok(History { messages, revision: page.info.revision, repaired })
}

fn clamp(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
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

#[derive(Serialize, Clone)]
#[serde(untagged)]
pub enum Trimmed {
    Turns { removed: u64, revision: u64 },
    Tokens(provider::TrimmedToFit),
}

pub async fn trim(ctx: Arc<Ctx>, p: TrimParams) -> Result<Trimmed> {
    match (p.max_turns, p.max_tokens) {
        (Some(n), None) => {
            let done = ctx.store.trim_turns(p.session_id.as_str(), n, p.expected_revision).await?;
            Ok(Trimmed::Turns { removed: done.removed, revision: done.revision })
        }
        (None, Some(t)) => {
            Ok(Trimmed::Tokens(provider::trim_to_fit(&ctx, &p.session_id, t, p.expected_revision).await?))
        }
        _ => Err(Error::invalid("give exactly one of max_turns and max_tokens")),
    }
}
