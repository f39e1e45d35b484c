//! `session/to_dict` and `session/from_dict`: a whole session as one JSON value, in our
//! own format or the generic agent library's.

use std::sync::Arc;

use serde::Deserialize;

use crate::error::Result;
use crate::ops::{Call, DictData, Imported, SessionDict};
use crate::rpc::methods::{Ctx, SessionParams};
use crate::session::empty_table;

pub async fn to_dict(ctx: Arc<Ctx>, p: SessionParams, _: Arc<Call>) -> Result<SessionDict> {
    ctx.ops.to_dict(p.session_id.as_str()).await
}

#[derive(Deserialize)]
pub struct FromDictParams {
    #[serde(deserialize_with = "empty_table::object")]
    data: DictData,
    #[serde(default)]
    replace: bool,
    #[serde(default)]
    repair: bool,
    #[serde(default)]
    expected_revision: Option<u64>,
}

pub async fn from_dict(ctx: Arc<Ctx>, p: FromDictParams, _: Arc<Call>) -> Result<Imported> {
    ctx.ops.from_dict(p.data, p.replace, p.repair, p.expected_revision).await
}
