//! `session/to_dict` and `session/from_dict`: a whole session as one JSON value, in our
//! own format or the generic agent library's.

use std::sync::Arc;

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::error::Result;
use crate::ops::{Call, DictData, Imported, SessionDict, refs_in_messages};
use crate::rpc::methods::Ctx;
use crate::rpc::methods::history::Reply;
use crate::session::image::Images;
use crate::session::{Fields, MessageInput, SessionId, empty_table};

#[derive(Deserialize)]
pub struct ToDictParams {
    session_id: SessionId,
    #[serde(default)]
    images: Images,
}

pub async fn to_dict(ctx: Arc<Ctx>, p: ToDictParams, _: Arc<Call>) -> Result<Reply<SessionDict>> {
    let dict = ctx.ops.to_dict(p.session_id.as_str()).await?;
    Reply::with_images(dict, p.images, |v| refs_in_messages(&mut v["messages"]))
}

#[derive(Deserialize)]
pub struct FromDictParams {
    #[serde(deserialize_with = "empty_table::object")]
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
    #[serde(default, deserialize_with = "empty_table::optional_object")]
    metadata: Option<Map<String, Value>>,
    #[serde(default, deserialize_with = "empty_table::optional_objects")]
    messages: Option<Vec<MessageInput>>,
}

pub async fn from_dict(ctx: Arc<Ctx>, p: FromDictParams, _: Arc<Call>) -> Result<Imported> {
    let d = p.data;
    let data = DictData {
        session_id: d.session_id.map(SessionId::into_string),
        fields: Fields { system: d.system.or(d.system_prompt), cwd: d.cwd, title: d.title, metadata: d.metadata },
        messages: d.messages.unwrap_or_default(),
    };
    ctx.ops.from_dict(data, p.replace, p.repair, p.expected_revision).await
}
