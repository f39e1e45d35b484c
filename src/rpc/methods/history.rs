//! History management (protocol section 9): rewind, compact, images by reference.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use serde_json::Value;

use crate::error::{Error, Result};
use crate::ops::{Call, ImageData, Summary};
use crate::rpc::methods::Ctx;
use crate::session::SessionId;
use crate::session::image::Images;

/// A reply as the operation made it, or (with `images: "ref"`) rewritten to show images
/// by reference.
#[derive(Serialize, Clone)]
#[serde(untagged)]
pub enum Reply<T> {
    Made(T),
    Rewritten(Value),
}

impl<T: Serialize> Reply<T> {
    pub fn with_images(made: T, images: Images, rewrite: impl FnOnce(&mut Value)) -> Result<Self> {
        if images == Images::Inline {
            return Ok(Reply::Made(made));
        }
        let mut value = serde_json::to_value(made).map_err(|e| Error::Internal(e.to_string()))?;
        rewrite(&mut value);
        Ok(Reply::Rewritten(value))
    }
}

#[derive(Deserialize)]
pub struct RewindParams {
    session_id: SessionId,
    to_message_id: String,
    #[serde(default)]
    archive: bool,
    #[serde(default)]
    expected_revision: Option<u64>,
}

#[derive(Serialize, Clone)]
pub struct Rewound {
    removed: u64,
    revision: u64,
    archived_session_id: Option<String>,
}

pub async fn rewind(ctx: Arc<Ctx>, p: RewindParams, _: Arc<Call>) -> Result<Rewound> {
    let done = ctx.ops.store.rewind(p.session_id.as_str(), &p.to_message_id, p.archive, p.expected_revision).await?;
    Ok(Rewound { removed: done.removed, revision: done.revision, archived_session_id: done.archived_session_id })
}

#[derive(Deserialize)]
pub struct ImageParams {
    #[serde(rename = "ref")]
    reference: String,
}

pub async fn image(ctx: Arc<Ctx>, p: ImageParams, _: Arc<Call>) -> Result<ImageData> {
    ctx.ops.image(&p.reference).await
}

#[derive(Deserialize)]
pub struct CompactParams {
    session_id: SessionId,
    keep_turns: u64,
    #[serde(default)]
    summary: Option<String>,
    #[serde(default)]
    summarize: Option<bool>,
    #[serde(default)]
    archive: bool,
    #[serde(default)]
    timeout_ms: Option<u64>,
    #[serde(default)]
    expected_revision: Option<u64>,
}

#[derive(Serialize, Clone)]
pub struct Compacted {
    removed: u64,
    revision: u64,
    summary_message_id: Option<String>,
    archived_session_id: Option<String>,
}

pub async fn compact(ctx: Arc<Ctx>, p: CompactParams, call: Arc<Call>) -> Result<Compacted> {
    let timeout =
        std::time::Duration::from_millis(p.timeout_ms.unwrap_or(crate::rpc::methods::runtime::DEFAULT_TIMEOUT_MS));
    let summary = match (p.summary, p.summarize) {
        (Some(text), None | Some(false)) => Summary::Given(text),
        (None, Some(true)) => Summary::Asked(timeout),
        _ => return Err(Error::invalid("give exactly one of `summary` and `summarize: true`")),
    };
    let id = p.session_id.as_str();
    let done = ctx.ops.compact(id, p.keep_turns, summary, p.archive, p.expected_revision, &call).await?;
    Ok(Compacted {
        removed: done.removed,
        revision: done.revision,
        summary_message_id: done.summary_message_id,
        archived_session_id: done.archived_session_id,
    })
}
