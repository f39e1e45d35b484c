//! Provider-ready histories: export, validate, count tokens, and trim to a token budget.

use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use crate::error::{Error, Result};
use crate::ops::Ops;
use crate::ops::limits::{MAX_MESSAGES, check_count};
use crate::session::context::{self, Cache, Context, Edits, Fitted, Prepared, Skipped};
use crate::session::export::{self, Format, Options, Violation, Warning};
use crate::session::{Message, check_revision, tokens};
use crate::store::{HistoryPage, Removed};

/// The body `session/export` gives, and what section 17's options did to it (each
/// member present only when its option was given or something was left out).
#[derive(Debug, Clone, Serialize)]
pub struct Exported {
    pub payload: Value,
    pub warnings: Vec<Warning>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context: Option<Skipped>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub edits: Option<Edits>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fit: Option<Fitted>,
}

/// `session/count_tokens`: the tokens of the body export would send, and what was done
/// to it.
#[derive(Debug, Clone, Serialize)]
pub struct Counted {
    pub tokens: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context: Option<Skipped>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub edits: Option<Edits>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fit: Option<Fitted>,
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
    /// the provider takes it, with section 17's `context` options applied; `options` as
    /// `session::export::Options` says (its `fix` is set here).
    pub async fn export(
        &self,
        session_id: &str,
        format: Format,
        repair: bool,
        options: Options,
        context: &Context,
    ) -> Result<Exported> {
        let done = self.prepared_body(session_id, format, repair, options, context, true).await?;
        let Prepared { export, context, edits, fit, .. } = done;
        let export = export.ok_or_else(|| Error::Internal("no body was built".into()))?;
        Ok(Exported { payload: export.payload, warnings: export.warnings, context, edits, fit })
    }

    /// What a provider would reject of the stored history, sent unaltered (with `cache`,
    /// with the breakpoints export would place).
    pub async fn validate(
        &self,
        session_id: &str,
        format: Format,
        options: Options,
        cache: Option<&Cache>,
    ) -> Result<Vec<Violation>> {
        let (page, stored) = self.whole(session_id, false).await?;
        // The items as stored: what `store: false` would leave out is checked too.
        let as_stored = Options { fix: false, store: None, ..options.clone() };
        let unaltered = export::export_with(format, page.info.system.as_deref(), &stored, &as_stored);
        Ok(context::validate(format, unaltered, &options, cache, session_id))
    }

    /// The tokens of what the export would send (repaired), native bodies included.
    /// Without options that edit the body, a session counted before is counted on from
    /// where it was: only the messages appended since are read and added.
    pub async fn count_tokens(
        &self,
        session_id: &str,
        format: Format,
        options: Options,
        context: &Context,
    ) -> Result<Counted> {
        if context.edits_nothing() {
            let fixed = Options { fix: true, ..options.clone() };
            if let Some(counted) = self.count_on(session_id, format, &fixed).await? {
                return Ok(counted);
            }
        }
        let done = self.prepared_body(session_id, format, true, options, context, false).await?;
        Ok(Counted { tokens: done.tokens, context: done.context, edits: done.edits, fit: done.fit })
    }

    /// `count_tokens` from the session's running count (`None`: it must be counted as a
    /// body is).
    async fn count_on(&self, session_id: &str, format: Format, options: &Options) -> Result<Option<Counted>> {
        let counted = |(tokens, start): (usize, usize)| Counted {
            tokens,
            context: (start > 0).then_some(Skipped { from_index: start }),
            edits: None,
            fit: None,
        };
        if let Some(running) = self.pieces.running(session_id, format, options).filter(|r| r.counted > 0) {
            let page = self.store.history(session_id, running.counted as u64 - 1, None).await?;
            if page.messages.first().is_some_and(|m| running.goes_on_from(m)) {
                let repaired = page.tail.repair_view().into_iter().map(Arc::new).collect();
                let system = page.info.system.as_deref();
                let new = &page.messages[1..];
                if let Some(done) = self.pieces.go_on(session_id, format, system, options, Some(running), new, repaired)
                {
                    return Ok(Some(counted(done)));
                }
            }
        }
        let page = self.store.history(session_id, 0, None).await?;
        let repaired = page.tail.repair_view().into_iter().map(Arc::new).collect();
        let system = page.info.system.as_deref();
        let done = self.pieces.go_on(session_id, format, system, options, None, &page.messages, repaired);
        Ok(done.map(counted))
    }

    /// The body, built when `build`, else only counted. A body that is only counted, or
    /// made to fit a budget, is small whatever the history's length: that history is
    /// read whole, however long; any other is bounded as every reply is.
    async fn prepared_body(
        &self,
        session_id: &str,
        format: Format,
        repair: bool,
        options: Options,
        context: &Context,
        build: bool,
    ) -> Result<Prepared> {
        let small = !build || context.fit.is_some();
        let page = self.store.history(session_id, 0, if small { None } else { Some(MAX_MESSAGES + 1) }).await?;
        if !small {
            check_count("the history", page.messages.len())
                .map_err(|_| Error::TooLarge(format!("the history holds more than {MAX_MESSAGES} messages")))?;
        }
        let HistoryPage { info, mut messages, tail } = page;
        if repair {
            messages.extend(tail.repair_view().into_iter().map(Arc::new));
        }
        let options = Options { fix: true, ..options };
        let system = info.system.as_deref();
        context::prepare(format, system, messages, &options, context, session_id, &self.pieces, build)
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
