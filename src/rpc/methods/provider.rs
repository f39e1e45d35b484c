//! Provider-ready histories: `session/export`, `session/validate`,
//! `session/count_tokens`, and `session/trim` by tokens.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{Error, Result};
use crate::rpc::methods::{Ctx, MAX_MESSAGES, check_count};
use crate::session::export::{self, Format, Violation, Warning};
use crate::session::{Message, SessionId, tokens};
use crate::store::{HistoryPage, Removed};

/// The whole stored history (bounded), and its messages, with the repaired view's
/// results after them when `repair` (one copy either way).
async fn whole(ctx: &Ctx, session_id: &SessionId, repair: bool) -> Result<(HistoryPage, Vec<Message>)> {
    let page = ctx.store.history(session_id.as_str(), 0, Some(MAX_MESSAGES + 1)).await?;
    check_count("the history", page.messages.len())
        .map_err(|_| Error::TooLarge(format!("the history holds more than {MAX_MESSAGES} messages")))?;
    let mut messages: Vec<Message> = page.messages.iter().map(|m| (**m).clone()).collect();
    if repair {
        messages.extend(page.tail.repair_view());
    }
    Ok((page, messages))
}

#[derive(Deserialize)]
pub struct ExportParams {
    session_id: SessionId,
    format: Format,
    #[serde(default)]
    repair: Option<bool>,
}

#[derive(Serialize, Clone)]
pub struct Exported {
    payload: Value,
    warnings: Vec<Warning>,
}

pub async fn export(ctx: Arc<Ctx>, p: ExportParams) -> Result<Exported> {
    let (page, messages) = whole(&ctx, &p.session_id, p.repair.unwrap_or(true)).await?;
    let done = export::export(p.format, page.info.system.as_deref(), &messages, true);
    Ok(Exported { payload: done.payload, warnings: done.warnings })
}

#[derive(Deserialize)]
pub struct ValidateParams {
    session_id: SessionId,
    format: Format,
}

#[derive(Serialize, Clone)]
pub struct Validated {
    violations: Vec<Violation>,
}

pub async fn validate(ctx: Arc<Ctx>, p: ValidateParams) -> Result<Validated> {
    let (page, stored) = whole(&ctx, &p.session_id, false).await?;
    let unaltered = export::export(p.format, page.info.system.as_deref(), &stored, false);
    Ok(Validated { violations: export::validate(p.format, &unaltered) })
}

#[derive(Deserialize)]
pub struct CountParams {
    session_id: SessionId,
    #[serde(default)]
    format: Option<Format>,
}

#[derive(Serialize, Clone)]
pub struct Counted {
    tokens: usize,
}

pub async fn count_tokens(ctx: Arc<Ctx>, p: CountParams) -> Result<Counted> {
    let (page, repaired) = whole(&ctx, &p.session_id, true).await?;
    let format = p.format.unwrap_or(Format::OpenaiChat);
    let done = export::export(format, page.info.system.as_deref(), &repaired, true);
    Ok(Counted { tokens: tokens::count_payload(&done.payload) })
}

/// The result of `session/trim` by tokens.
#[derive(Serialize, Clone)]
pub struct TrimmedToFit {
    removed: u64,
    revision: u64,
    tokens: usize,
    fits: bool,
}

/// Drops the oldest whole turns until the system prompt and the repaired history fit in
/// `max_tokens` (OpenAI chat accounting), never the last turn. Another writer between
/// the count and the trim makes it count again.
pub async fn trim_to_fit(
    ctx: &Ctx,
    session_id: &SessionId,
    max_tokens: u64,
    expected_revision: Option<u64>,
) -> Result<TrimmedToFit> {
    for _ in 0..8 {
        let (page, repaired) = whole(ctx, session_id, true).await?;
        crate::session::check_revision(expected_revision, page.info.revision)?;
        let (keep_turns, tokens) = plan(page.info.system.as_deref(), &repaired, page.messages.len(), max_tokens);
        let fits = tokens as u64 <= max_tokens;
        let Some(keep_turns) = keep_turns else {
            return Ok(TrimmedToFit { removed: 0, revision: page.info.revision, tokens, fits });
        };
        let revision = Some(page.info.revision);
        match ctx.store.trim_turns(session_id.as_str(), keep_turns, revision).await {
            Ok(Removed { removed, revision }) => return Ok(TrimmedToFit { removed, revision, tokens, fits }),
            Err(Error::RevisionConflict { .. }) if expected_revision.is_none() => continue,
            Err(e) => return Err(e),
        }
    }
    Err(Error::StorageUnavailable("the session kept changing while it was being trimmed".into()))
}

/// How many turns to keep (`None`: keep everything) and the tokens that then remain.
fn plan(system: Option<&str>, repaired: &[Message], stored: usize, max_tokens: u64) -> (Option<u64>, usize) {
    let done = export::export(Format::OpenaiChat, system, repaired, true);
    let list = done.payload["messages"].as_array().cloned().unwrap_or_default();
    let fixed = tokens::PER_REPLY;
    // Tokens of each history message (the system prompt is the first payload message).
    let mut per = vec![0usize; repaired.len()];
    let mut total = fixed;
    for (k, m) in list.iter().enumerate() {
        let t = tokens::count_value(m) + tokens::PER_MESSAGE;
        total += t;
        if system.is_some() && k == 0 {
            continue;
        }
        if let Some(slot) = done.sources.get(k).and_then(|&i| per.get_mut(i)) {
            *slot += t;
        }
    }
    // Turn starts among the stored messages; the last one is never dropped.
    let starts: Vec<usize> =
        (0..stored).filter(|&i| i == 0 || repaired[i].role == crate::session::Role::User).collect();
    let mut dropped = 0;
    let mut remaining = total;
    for (n, &start) in starts.iter().enumerate() {
        if remaining as u64 <= max_tokens || n + 1 == starts.len() {
            let keep = starts.len() - n;
            return (if start == 0 { None } else { Some(keep as u64) }, remaining);
        }
        let next = starts.get(n + 1).copied().unwrap_or(stored);
        dropped += per[start..next].iter().sum::<usize>();
        remaining = total - dropped;
    }
    (None, remaining)
}
