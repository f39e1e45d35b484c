//! Provider-ready histories: `session/export`, `session/validate`,
//! `session/count_tokens`. (`session/trim` by tokens is in `messages`.)

use std::sync::Arc;

use jsonrpsee_types::ErrorObjectOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::Result;
use crate::ops::limits::{COUNT_FORMAT, REPAIR};
use crate::ops::{Call, Counted, Exported, refs_in_payload};
use crate::rpc::methods::Ctx;
use crate::rpc::methods::shown::Shown;
use crate::rpc::outgoing::{Pieces, Splice};
use crate::session::SessionId;
use crate::session::context::{Cache, ClearThinking, ClearToolResults, CompactionMode, Context, Fit};
use crate::session::export::{Format, Options, Violation};
use crate::session::image::Images;

/// Section 17's options, as export and count_tokens take them.
fn context(
    compaction: Option<CompactionMode>,
    clear_tool_results: Option<ClearToolResults>,
    clear_thinking: Option<ClearThinking>,
    fit: Option<Fit>,
    cache: Option<&Value>,
) -> Result<Context> {
    Ok(Context {
        compaction: compaction.unwrap_or_default(),
        clear_tool_results,
        clear_thinking,
        fit,
        cache: Cache::param(cache)?,
    })
}

/// The options every method that builds a body takes (spec section 13). (Spelled out in
/// each params struct: serde's `flatten` cannot read numbers kept exactly.) `store` is
/// the provider's option (OpenAI's: keep the response on its side), named
/// `provider_store` in the params structs so that it reads as no handle on our stores.
pub(super) fn options(model: Option<String>, thinking: Option<bool>, provider_store: Option<bool>) -> Options {
    Options { fix: false, model, thinking, store: provider_store }
}

#[derive(Deserialize)]
pub struct ExportParams {
    session_id: SessionId,
    format: Format,
    #[serde(default)]
    repair: Option<bool>,
    #[serde(default)]
    images: Images,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    thinking: Option<bool>,
    #[serde(default, rename = "store")]
    provider_store: Option<bool>,
    #[serde(default)]
    compaction: Option<CompactionMode>,
    #[serde(default)]
    clear_tool_results: Option<ClearToolResults>,
    #[serde(default)]
    clear_thinking: Option<ClearThinking>,
    #[serde(default)]
    fit: Option<Fit>,
    #[serde(default)]
    cache: Option<Value>,
}

pub async fn export(ctx: Arc<Ctx>, p: ExportParams, _: Arc<Call>) -> Result<Shown<Exported>> {
    let options = options(p.model, p.thinking, p.provider_store);
    let context = context(p.compaction, p.clear_tool_results, p.clear_thinking, p.fit, p.cache.as_ref())?;
    let repair = p.repair.unwrap_or(REPAIR);
    let exported = ctx.ops.export(p.session_id.as_str(), p.format, repair, options, &context).await?;
    Shown::with_images(exported, p.images, |v| refs_in_payload(&mut v["payload"]))
}

/// A provider's body is made anew, not kept: serialized whole.
impl Splice for Exported {
    fn splice(self, into: &mut Pieces) -> std::result::Result<(), ErrorObjectOwned> {
        into.json(&self)
    }
}

#[derive(Deserialize)]
pub struct ValidateParams {
    session_id: SessionId,
    format: Format,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    thinking: Option<bool>,
    #[serde(default, rename = "store")]
    provider_store: Option<bool>,
    #[serde(default)]
    cache: Option<Value>,
}

#[derive(Serialize, Clone)]
pub struct Validated {
    violations: Vec<Violation>,
}

pub async fn validate(ctx: Arc<Ctx>, p: ValidateParams, _: Arc<Call>) -> Result<Validated> {
    let options = options(p.model, p.thinking, p.provider_store);
    let cache = Cache::param(p.cache.as_ref())?;
    Ok(Validated { violations: ctx.ops.validate(p.session_id.as_str(), p.format, options, cache.as_ref()).await? })
}

#[derive(Deserialize)]
pub struct CountParams {
    session_id: SessionId,
    #[serde(default)]
    format: Option<Format>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    thinking: Option<bool>,
    #[serde(default, rename = "store")]
    provider_store: Option<bool>,
    #[serde(default)]
    compaction: Option<CompactionMode>,
    #[serde(default)]
    clear_tool_results: Option<ClearToolResults>,
    #[serde(default)]
    clear_thinking: Option<ClearThinking>,
    #[serde(default)]
    fit: Option<Fit>,
    #[serde(default)]
    cache: Option<Value>,
}

pub async fn count_tokens(ctx: Arc<Ctx>, p: CountParams, _: Arc<Call>) -> Result<Counted> {
    let format = p.format.unwrap_or(COUNT_FORMAT);
    let options = options(p.model, p.thinking, p.provider_store);
    let context = context(p.compaction, p.clear_tool_results, p.clear_thinking, p.fit, p.cache.as_ref())?;
    ctx.ops.count_tokens(p.session_id.as_str(), format, options, &context).await
}
