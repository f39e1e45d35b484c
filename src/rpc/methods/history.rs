//! A session's history: the repaired view (`session/history`), and the methods that drop
//! messages from it: trim, rewind, compact, pop.

use std::sync::Arc;

use jsonrpsee_types::ErrorObjectOwned;
use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::ops::limits::{COUNT_FORMAT, REPAIR};
use crate::ops::{Call, Compaction, History, Trimmed, refs_in_messages};
use crate::rpc::methods::Ctx;
use crate::rpc::methods::provider::options;
use crate::rpc::methods::shown::Shown;
use crate::rpc::outgoing::{Pieces, Splice};
use crate::session::export::Format;
use crate::session::image::Images;
use crate::session::{Message, MessageInput, SessionId, empty_table};

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

pub async fn history(ctx: Arc<Ctx>, p: HistoryParams, _: Arc<Call>) -> Result<Shown<History>> {
    let (repair, offset, draft) = (p.repair.unwrap_or(REPAIR), p.offset.unwrap_or(0), p.include_draft.unwrap_or(false));
    let history = ctx.ops.history(p.session_id.as_str(), repair, offset, p.limit, draft).await?;
    Shown::with_images(history, p.images, |v| refs_in_messages(&mut v["messages"]))
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
    format: Option<Format>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    thinking: Option<bool>,
    #[serde(default, rename = "store")]
    provider_store: Option<bool>,
    #[serde(default)]
    expected_revision: Option<u64>,
}

pub async fn trim(ctx: Arc<Ctx>, p: TrimParams, _: Arc<Call>) -> Result<Trimmed> {
    let counted = (p.format.unwrap_or(COUNT_FORMAT), options(p.model, p.thinking, p.provider_store));
    ctx.ops.trim(p.session_id.as_str(), p.max_turns, p.max_tokens, counted, p.expected_revision).await
}

#[derive(Deserialize)]
pub struct PopParams {
    session_id: SessionId,
    #[serde(default, deserialize_with = "empty_table::optional_object")]
    replace_with: Option<MessageInput>,
    #[serde(default)]
    expected_revision: Option<u64>,
}

#[derive(Serialize)]
pub struct PoppedResult {
    message: Option<Message>,
    revision: u64,
}

pub async fn pop(ctx: Arc<Ctx>, p: PopParams, _: Arc<Call>) -> Result<PoppedResult> {
    let done = ctx.ops.pop(p.session_id.as_str(), p.replace_with, p.expected_revision).await?;
    Ok(PoppedResult { message: done.message, revision: done.revision })
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
    let done = ctx.ops.rewind(p.session_id.as_str(), &p.to_message_id, p.archive, p.expected_revision).await?;
    Ok(Rewound { removed: done.removed, revision: done.revision, archived_session_id: done.archived_session_id })
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
    #[serde(default)]
    max_input_tokens: Option<u64>,
}

#[derive(Serialize, Clone)]
pub struct Compacted {
    removed: u64,
    revision: u64,
    summary_message_id: Option<String>,
    archived_session_id: Option<String>,
}

pub async fn compact(ctx: Arc<Ctx>, p: CompactParams, call: Arc<Call>) -> Result<Compacted> {
    let asked = Compaction {
        keep_turns: p.keep_turns,
        summary: p.summary,
        summarize: p.summarize,
        archive: p.archive,
        timeout_ms: p.timeout_ms,
        expected_revision: p.expected_revision,
        max_input_tokens: p.max_input_tokens,
        format: ctx.runtime_format(),
    };
    let done = ctx.ops.compact(p.session_id.as_str(), asked, &call).await?;
    Ok(Compacted {
        removed: done.removed,
        revision: done.revision,
        summary_message_id: done.summary_message_id,
        archived_session_id: done.archived_session_id,
    })
}
