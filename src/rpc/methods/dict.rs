//! `session/to_dict` and `session/from_dict`: a whole session as one JSON value, in our
//! own format or the generic agent library's.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::Error;
use crate::error::Result;
use crate::rpc::methods::messages::within;
use crate::rpc::methods::{Ctx, MAX_MESSAGES, SessionParams, check_count};
use crate::session::{Fields, Identity, Import, Message, MessageInput, Repaired, SessionId, SessionInfo, plan_import};

#[derive(Serialize, Clone)]
pub struct Dict {
    session_id: String,
    system: Option<String>,
    cwd: Option<String>,
    messages: Vec<Arc<Message>>,
}

pub async fn to_dict(ctx: Arc<Ctx>, p: SessionParams) -> Result<Dict> {
    let page = ctx.store.history(p.session_id.as_str(), 0, Some(MAX_MESSAGES + 1)).await?;
    check_count("the session", page.messages.len()).map_err(|_| {
        Error::TooLarge(format!(
            "the session holds more than {MAX_MESSAGES} messages; read it with session/history pages"
        ))
    })?;
    Ok(Dict { session_id: page.info.session_id, system: page.info.system, cwd: page.info.cwd, messages: page.messages })
}

#[derive(Deserialize)]
pub struct FromDictParams {
    data: DictInput,
    #[serde(default)]
    replace: bool,
    #[serde(default)]
    repair: bool,
    #[serde(default)]
    expected_revision: Option<u64>,
}

/// `to_dict`'s output, the generic agent library's `to_dict` (`system` may be spelled
/// `system_prompt`), and anything in between; unknown members are ignored.
#[derive(Deserialize)]
struct DictInput {
    #[serde(default)]
    session_id: Option<SessionId>,
    #[serde(default)]
    system: Option<String>,
    #[serde(default)]
    system_prompt: Option<String>,
    #[serde(default)]
    cwd: Option<String>,
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    metadata: Option<Map<String, Value>>,
    #[serde(default)]
    messages: Option<Vec<MessageInput>>,
}

#[derive(Serialize, Clone)]
pub struct Imported {
    #[serde(flatten)]
    info: SessionInfo,
    repaired: Repaired,
}

pub async fn from_dict(ctx: Arc<Ctx>, p: FromDictParams) -> Result<Imported> {
    let data = p.data;
    check_count("data.messages", data.messages.as_ref().map_or(0, Vec::len))?;
    let messages = data
        .messages
        .unwrap_or_default()
        .into_iter()
        .enumerate()
        .map(|(i, m)| m.into_message(Identity::Keep).map_err(|e| within(&format!("data.messages[{i}]"), e)))
        .collect::<Result<Vec<_>>>()?;
    let (messages, repaired) = plan_import(messages, p.repair)?;
    let import = Import {
        session_id: data.session_id.map(SessionId::into_string),
        fields: Fields {
            system: data.system.or(data.system_prompt),
            cwd: data.cwd,
            title: data.title,
            metadata: data.metadata,
        },
        messages,
    };
    let info = ctx.store.import(import, p.replace, p.expected_revision).await?;
    Ok(Imported { info, repaired })
}
