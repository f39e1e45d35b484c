//! Finding things in the store: `session/search` over every history, and
//! `session/image`, an image by its reference.

use std::sync::Arc;

use serde::Deserialize;

use crate::error::Result;
use crate::ops::{Call, ImageData, SearchPage};
use crate::rpc::methods::Ctx;
use crate::session::SessionId;

#[derive(Deserialize)]
pub struct ImageParams {
    #[serde(rename = "ref")]
    reference: String,
}

pub async fn image(ctx: Arc<Ctx>, p: ImageParams, _: Arc<Call>) -> Result<ImageData> {
    ctx.ops.image(&p.reference).await
}

#[derive(Deserialize)]
pub struct SearchParams {
    query: String,
    #[serde(default)]
    session_id: Option<SessionId>,
    #[serde(default)]
    limit: Option<u64>,
    #[serde(default)]
    cursor: Option<String>,
}

pub async fn search(ctx: Arc<Ctx>, p: SearchParams, _: Arc<Call>) -> Result<SearchPage> {
    let session_id = p.session_id.as_ref().map(SessionId::as_str);
    ctx.ops.search(&p.query, session_id, p.limit, p.cursor.as_deref()).await
}
