//! History management (protocol section 9): rewind, compact, search, images by reference.

use std::sync::Arc;

use jsonrpsee::types::ErrorObjectOwned;
use serde::{Deserialize, Serialize};

use serde_json::Value;

use crate::error::{Error, Result};
use crate::ops::{Call, Hit, ImageData, Summary};
use crate::rpc::methods::Ctx;
use crate::rpc::outgoing::{Answer, Splice, Written};
use crate::session::SessionId;
use crate::session::image::Images;
use crate::session::search::Query;

/// A reply as the operation made it, or (with `images: "ref"`) rewritten to show images
/// by reference.
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

impl<T: Splice + Send + 'static> Answer for Reply<T> {
    fn answer(self, to: &Written) -> std::result::Result<(), ErrorObjectOwned> {
        to.write(|pieces| match self {
            Reply::Made(made) => made.splice(pieces),
            Reply::Rewritten(value) => pieces.json(&value),
        })
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

#[derive(Serialize, Clone)]
pub struct SearchResult {
    hits: Vec<Hit>,
    next_cursor: Option<String>,
}

pub const DEFAULT_SEARCH_LIMIT: u64 = 20;
pub const MAX_SEARCH_LIMIT: u64 = 200;

pub async fn search(ctx: Arc<Ctx>, p: SearchParams, _: Arc<Call>) -> Result<SearchResult> {
    let limit = p.limit.unwrap_or(DEFAULT_SEARCH_LIMIT);
    if !(1..=MAX_SEARCH_LIMIT).contains(&limit) {
        return Err(Error::invalid(format!("limit: must be from 1 to {MAX_SEARCH_LIMIT}, got {limit}")));
    }
    let query = Query::parse(&p.query)?;
    let offset = p.cursor.as_deref().map(cursor::decode).transpose()?.unwrap_or(0);
    let found = ctx.ops.search(&query, p.session_id.as_ref().map(SessionId::as_str), offset, limit).await?;
    let next_cursor = found.more.then(|| cursor::encode(offset + limit));
    Ok(SearchResult { hits: found.hits, next_cursor })
}

/// Search cursors: opaque to clients, the offset of the next page underneath.
mod cursor {
    use base64::Engine;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;

    use crate::error::{Error, Result, quote};

    const TAG: &str = "search:";

    pub fn encode(offset: u64) -> String {
        URL_SAFE_NO_PAD.encode(format!("{TAG}{offset}"))
    }

    pub fn decode(cursor: &str) -> Result<u64> {
        let refuse =
            || Error::invalid(format!("cursor: must be a cursor session/search returned, got {}", quote(cursor)));
        let text = URL_SAFE_NO_PAD.decode(cursor).map_err(|_| refuse())?;
        let text = String::from_utf8(text).map_err(|_| refuse())?;
        let digits = text.strip_prefix(TAG).ok_or_else(refuse)?;
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(refuse());
        }
        digits.parse().map_err(|_| refuse())
    }

    #[cfg(test)]
    mod tests {
        #[test]
        fn a_cursor_round_trips_and_anything_else_is_refused() {
            assert_eq!(super::decode(&super::encode(40)).unwrap(), 40);
            for bad in ["", "40", "c2VhcmNoOg", "c2VhcmNoOi0x", "!!"] {
                assert!(super::decode(bad).is_err(), "{bad}");
            }
        }
    }
}
