//! Provider-ready histories: export, validate, count tokens, and trim to a token budget.

use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use crate::error::{Error, Result};
use crate::ops::Ops;
use crate::ops::limits::{MAX_MESSAGES, check_count};
use crate::session::context::{self, Cache, Context, Done, End, FromEnd, Prepared, Running, Skipped};
use crate::session::export::{self, Format, Options, Violation, Warning};
use crate::session::{Message, Role, check_revision, tokens};
use crate::store::{HistoryPage, Removed};

/// The body `session/export` gives, and what section 17's options did to it (each
/// member present only when its option was given or something was left out).
/// Messages read at once when a body is made to fit from the history's end.
const END_PAGE: usize = 4096;

/// `session/export`: the body, what export had to change or leave out, and what the
/// context options did.
#[derive(Debug, Clone, Serialize)]
pub struct Exported {
    pub payload: Value,
    pub warnings: Vec<Warning>,
    #[serde(flatten)]
    pub done: Done,
}

/// `session/count_tokens`: the tokens of the body export would send, and what was done
/// to it.
#[derive(Debug, Clone, Serialize)]
pub struct Counted {
    pub tokens: usize,
    #[serde(flatten)]
    pub done: Done,
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
        let export = done.export.ok_or_else(|| Error::Internal("no body was built".into()))?;
        Ok(Exported { payload: export.payload, warnings: export.warnings, done: done.done })
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
        Ok(Counted { tokens: done.tokens, done: done.done })
    }

    /// `count_tokens` from the session's running count (`None`: it must be counted as a
    /// body is).
    async fn count_on(&self, session_id: &str, format: Format, options: &Options) -> Result<Option<Counted>> {
        let counted = |(tokens, start): (usize, usize)| Counted {
            tokens,
            done: Done { context: (start > 0).then_some(Skipped { from_index: start }), ..Done::default() },
        };
        if let Some(running) = self.pieces.running(session_id, format, options).filter(|r| r.counted > 0) {
            let page = self.store.history(session_id, running.counted as u64 - 1, None).await?;
            if page.messages.first().is_some_and(|m| running.goes_on_from(m, page.info.revision)) {
                let repaired = page.tail.repair_view().into_iter().map(Arc::new).collect();
                let session = (page.info.system.as_deref(), page.info.revision);
                let new = &page.messages[1..];
                if let Some(done) =
                    self.pieces.go_on(session_id, format, session, options, Some(running), new, repaired)
                {
                    return Ok(Some(counted(done)));
                }
            }
        }
        let page = self.store.history(session_id, 0, None).await?;
        let repaired = page.tail.repair_view().into_iter().map(Arc::new).collect();
        let session = (page.info.system.as_deref(), page.info.revision);
        let done = self.pieces.go_on(session_id, format, session, options, None, &page.messages, repaired);
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
        let fixed = Options { fix: true, ..options.clone() };
        if repair && let Some(prepared) = self.fitted_from_end(session_id, format, &fixed, context, build).await? {
            return Ok(prepared);
        }
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

    /// A body made to fit from the history's end (`context::prepare_from_end`), read a
    /// page at a time from the session's running count: `None` when it must be made from
    /// the whole history (no fit asked, the body fits as it is, clearing may be enough,
    /// or the session changed meanwhile).
    async fn fitted_from_end(
        &self,
        session_id: &str,
        format: Format,
        options: &Options,
        context: &Context,
        build: bool,
    ) -> Result<Option<Prepared>> {
        if context.fit.is_none() || context.clear_thinking.is_some() || context.clear_tool_results.is_some() {
            return Ok(None);
        }
        let Some(counted) = self.count_on(session_id, format, options).await? else { return Ok(None) };
        let Some(running) = self.pieces.running(session_id, format, options) else { return Ok(None) };
        let (mut read, mut read_from) = (Vec::<Arc<Message>>::new(), running.counted);
        let mut seen: Option<(u64, Vec<Arc<Message>>, Option<String>)> = None;
        loop {
            let from = read_from.saturating_sub(END_PAGE).max(running.start);
            let page = self.store.history(session_id, from as u64, Some((read_from - from) as u64)).await?;
            let (revision, repaired, system) = seen.get_or_insert_with(|| {
                let repaired = page.tail.repair_view().into_iter().map(Arc::new).collect();
                (page.info.revision, repaired, page.info.system.clone())
            });
            if page.info.revision != *revision || page.info.message_count != running.counted as u64 {
                return Ok(None);
            }
            read.splice(0..0, page.messages);
            read_from = from;
            // The end starts at a turn's start (or the body's).
            let cut = if read_from == running.start {
                0
            } else {
                read.iter().position(|m| m.role == Role::User).unwrap_or(read.len())
            };
            let first = read_from + cut;
            let Some(summaries) = self.summary_turns(session_id, &running, first, (read_from, &read)).await? else {
                return Ok(None);
            };
            let messages: Vec<Arc<Message>> = read[cut..].iter().cloned().chain(repaired.iter().cloned()).collect();
            let end = End { first, messages, repaired: repaired.len(), summaries };
            let counted = (&running, counted.tokens);
            let system = system.as_deref();
            match context::prepare_from_end(
                format,
                system,
                options,
                context,
                session_id,
                &self.pieces,
                counted,
                end,
                build,
            )? {
                FromEnd::Prepared(prepared) => return Ok(Some(*prepared)),
                FromEnd::More if read_from > running.start => continue,
                FromEnd::More | FromEnd::Whole => return Ok(None),
            }
        }
    }

    /// The turns before history index `first` that hold a summary (never left out),
    /// each with its start: from what was read (`read` from `read_from`), else from the
    /// store. `None` when one does not start its turn (a provider's compaction point in
    /// the middle of a turn, other than the body's first message): fit the whole.
    async fn summary_turns(
        &self,
        session_id: &str,
        running: &Running,
        first: usize,
        (read_from, read): (usize, &[Arc<Message>]),
    ) -> Result<Option<Vec<(usize, Vec<Arc<Message>>)>>> {
        let mut turns = Vec::new();
        for &at in running.clearable.summaries.iter().filter(|&&at| at < first) {
            if turns.last().is_some_and(|(start, turn): &(usize, Vec<Arc<Message>>)| at < start + turn.len()) {
                continue;
            }
            let turn: Vec<Arc<Message>> = if at >= read_from {
                read[at - read_from..first - read_from].to_vec()
            } else {
                let limit = (first - at).min(END_PAGE);
                self.store.history(session_id, at as u64, Some(limit as u64)).await?.messages
            };
            if turn.first().is_none_or(|m| m.role != Role::User && at != running.start) {
                return Ok(None);
            }
            let end = turn.iter().skip(1).position(|m| m.role == Role::User).map_or(turn.len(), |p| p + 1);
            if end == turn.len() && at + end < first && end == END_PAGE {
                return Ok(None);
            }
            turns.push((at, turn[..end].to_vec()));
        }
        Ok(Some(turns))
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
