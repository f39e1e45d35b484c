//! Provider-ready histories: export, validate, count tokens, and trim to a token budget.

use serde::Serialize;
use serde_json::Value;

use crate::error::{Error, Result};
use crate::ops::Ops;
use crate::ops::limits::{MAX_MESSAGES, check_count};
use crate::session::export::{self, Format, Options, Violation, Warning};
use crate::session::{Message, check_revision, tokens};
use crate::store::{HistoryPage, Removed};

#[derive(Debug, Clone, Serialize)]
pub struct Exported {
    pub payload: Value,
    pub warnings: Vec<Warning>,
}

/// The result of `session/trim` by tokens.
#[derive(Debug, Clone, Serialize)]
pub struct TrimmedToFit {
    removed: u64,
    revision: u64,
    tokens: usize,
    fits: bool,
}

impl Ops {
    /// The whole stored history (bounded), and its messages, with the repaired view's
    /// results after them when `repair` (one copy either way).
    pub(crate) async fn whole(&self, session_id: &str, repair: bool) -> Result<(HistoryPage, Vec<Message>)> {
        let page = self.store.history(session_id, 0, Some(MAX_MESSAGES + 1)).await?;
        check_count("the history", page.messages.len())
            .map_err(|_| Error::TooLarge(format!("the history holds more than {MAX_MESSAGES} messages")))?;
        let mut messages: Vec<Message> = page.messages.iter().map(|m| (**m).clone()).collect();
        if repair {
            messages.extend(page.tail.repair_view());
        }
        Ok((page, messages))
    }

    /// The request body of `format` for the history (repaired with `repair`), fixed so
    /// the provider takes it; `options` as `session::export::Options` says (its `fix`
    /// is set here).
    pub async fn export(&self, session_id: &str, format: Format, repair: bool, options: Options) -> Result<Exported> {
        let (page, messages) = self.whole(session_id, repair).await?;
        let done =
            export::export_with(format, page.info.system.as_deref(), &messages, &Options { fix: true, ..options });
        Ok(Exported { payload: done.payload, warnings: done.warnings })
    }

    /// What a provider would reject of the stored history, sent unaltered.
    pub async fn validate(&self, session_id: &str, format: Format, options: Options) -> Result<Vec<Violation>> {
        let (page, stored) = self.whole(session_id, false).await?;
        // The items as stored: what `store: false` would leave out is checked too.
        let as_stored = Options { fix: false, store: None, ..options.clone() };
        let unaltered = export::export_with(format, page.info.system.as_deref(), &stored, &as_stored);
        Ok(export::validate_with(format, &unaltered, &options))
    }

    /// The tokens of what the export would send, native bodies included.
    pub async fn count_tokens(&self, session_id: &str, format: Format, options: Options) -> Result<usize> {
        let (page, repaired) = self.whole(session_id, true).await?;
        let done =
            export::export_with(format, page.info.system.as_deref(), &repaired, &Options { fix: true, ..options });
        Ok(tokens::count_payload(&done.payload))
    }

    /// Drops the oldest whole turns until the system prompt and the repaired history fit
    /// in `max_tokens` (OpenAI chat accounting), never the last turn. Another writer
    /// between the count and the trim makes it count again.
    pub async fn trim_to_fit(
        &self,
        session_id: &str,
        max_tokens: u64,
        body: (Format, Options),
        expected_revision: Option<u64>,
    ) -> Result<TrimmedToFit> {
        let (format, options) = (body.0, Options { fix: true, ..body.1 });
        for _ in 0..8 {
            let (page, repaired) = self.whole(session_id, true).await?;
            check_revision(expected_revision, page.info.revision)?;
            let system = page.info.system.as_deref();
            let (keep_turns, tokens) =
                tokens::plan_trim(format, &options, system, &repaired, page.messages.len(), max_tokens);
            let fits = tokens as u64 <= max_tokens;
            let Some(keep_turns) = keep_turns else {
                return Ok(TrimmedToFit { removed: 0, revision: page.info.revision, tokens, fits });
            };
            let revision = Some(page.info.revision);
            match self.store.trim_turns(session_id, keep_turns, revision).await {
                Ok(Removed { removed, revision }) => return Ok(TrimmedToFit { removed, revision, tokens, fits }),
                Err(Error::RevisionConflict { .. }) if expected_revision.is_none() => continue,
                Err(e) => return Err(e),
            }
        }
        Err(Error::StorageUnavailable("the session kept changing while it was being trimmed".into()))
    }
}
