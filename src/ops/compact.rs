//! `session/compact`: the turns before the last `keep_turns` replaced by one summary,
//! given by the client or asked of the host (`runtime/run` with `purpose: "summarize"`
//! and the turns to summarise). Asking, the session is read, let go while the host
//! works, and compacted at the revision read: if it changed meanwhile, nothing is
//! compacted and the reply is 1003 with the host's answer in `data.response`.
//!
//! With `max_input_tokens` (spec 17.5), no request is larger than that, counted in the
//! runtime's format: turns that do not fit in one are asked for in consecutive parts
//! (`part: {index, count}`), each after the summary of the part before, and the parts'
//! summaries merged in one more request (`part: {index: count, count, merge: true}`).

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::error::{Error, Result};
use crate::ops::limits::{COUNT_FORMAT, host_timeout};
use crate::ops::runtime::{check_answer, failed, invalid_response};
use crate::ops::{Call, Ops, RuntimeParams};
use crate::session::context::parts::{self, Parts};
use crate::session::export::Format;
use crate::session::{Message, check_revision, turns_cut};
use crate::store::Compacted;

/// A compaction as asked: keep the last `keep_turns` turns and replace the ones before
/// with `summary`, or with a summary asked of the host (`summarize`, waiting up to
/// `timeout_ms`, no request over `max_input_tokens` counted in `format`): exactly one of
/// the two. With `archive`, the history as it was is kept as a new session.
pub struct Compaction {
    pub keep_turns: u64,
    pub summary: Option<String>,
    pub summarize: Option<bool>,
    pub archive: bool,
    pub timeout_ms: Option<u64>,
    pub expected_revision: Option<u64>,
    pub max_input_tokens: Option<u64>,
    /// The runtime's format (`initialize`'s `runtime.format`), which requests are
    /// counted in.
    pub format: Option<Format>,
}

/// Where a compaction's summary comes from.
enum Summary {
    Given(String),
    /// Asked of the host, waiting at most this long.
    Asked(Duration),
}

/// What one summary request needs beside its messages.
struct Ask<'a> {
    session_id: &'a str,
    system: Option<&'a str>,
    timeout: Duration,
    call: &'a Call,
}

impl Ops {
    pub async fn compact(&self, session_id: &str, asked: Compaction, call: &Call) -> Result<Compacted> {
        let Compaction { keep_turns, summary, summarize, archive, timeout_ms, expected_revision: expected, .. } = asked;
        let summary = match (summary, summarize) {
            (Some(text), None | Some(false)) => Summary::Given(text),
            (None, Some(true)) => Summary::Asked(host_timeout(timeout_ms)),
            _ => return Err(Error::invalid("give exactly one of `summary` and `summarize: true`")),
        };
        if keep_turns == 0 {
            return Err(Error::invalid("keep_turns: must be at least 1"));
        }
        if asked.max_input_tokens == Some(0) {
            return Err(Error::invalid("max_input_tokens: must be at least 1"));
        }
        let timeout = match summary {
            Summary::Given(text) => return self.store.compact(session_id, keep_turns, text, archive, expected).await,
            Summary::Asked(timeout) => timeout,
        };
        let page = self.store.history(session_id, 0, None).await?;
        check_revision(expected, page.info.revision)?;
        let messages = page.messages;
        let cut = turns_cut(messages.len(), messages.iter().rev().map(|m| m.role), keep_turns);
        if cut == 0 {
            let revision = page.info.revision;
            return Ok(Compacted { removed: 0, revision, summary_message_id: None, archived_session_id: None });
        }
        let ask = Ask { session_id, system: page.info.system.as_deref(), timeout, call };
        let to_summarise = &messages[..cut];
        let (text, response) = match asked.max_input_tokens {
            None => {
                call.release();
                self.summarize(&ask, to_summarise, None).await?
            }
            Some(max) => self.summarize_in_parts(&ask, to_summarise, max, asked.format.unwrap_or(COUNT_FORMAT)).await?,
        };
        let revision = Some(page.info.revision);
        self.store.compact(session_id, keep_turns, text, archive, revision).await.map_err(|e| match e {
            Error::RevisionConflict { expected, current } => Error::StaleAnswer { expected, current, response },
            other => other,
        })
    }

    /// The turns to summarise, asked for in parts that each fit `max` (one request when
    /// they all fit), then merged. The parts are planned before anything is asked, so
    /// that a history that cannot be summarised within the budget fails (1005) before
    /// the host works; a summary longer than an eighth of the budget may make the
    /// parts after it more (each request's `count` says the plan as it stands).
    async fn summarize_in_parts(
        &self,
        ask: &Ask<'_>,
        messages: &[Arc<Message>],
        max: u64,
        format: Format,
    ) -> Result<(String, Value)> {
        let parts = Parts::new(format, ask.system, max, &self.pieces);
        if parts.fits(messages) {
            ask.call.release();
            return self.summarize(ask, messages, None).await;
        }
        let turns = parts::turns(messages);
        let reserve = usize::try_from(max / 8).unwrap_or(usize::MAX);
        let mut plan = parts.plan(None, &turns, reserve)?;
        ask.call.release();
        let (mut summaries, mut start) = (Vec::new(), 0);
        while start < turns.len() {
            let index = summaries.len();
            let carried = summaries.last().map(|(text, _): &(String, Value)| parts::summary_message(text));
            let (request, taken) = parts.next(carried.as_ref(), &turns[start..])?;
            if taken != plan[index] {
                // The summary carried was longer than planned for: plan the rest again.
                let rest = parts.plan(carried.as_ref(), &turns[start..], reserve)?;
                plan.truncate(index);
                plan.extend(rest);
            }
            let part = json!({"index": index, "count": plan.len()});
            summaries.push(self.summarize(ask, &request, Some(part)).await?);
            start += taken;
        }
        if summaries.len() == 1 {
            return summaries.pop().ok_or_else(|| Error::Internal("no summary".into()));
        }
        let merged: Vec<Arc<Message>> = summaries.iter().map(|(text, _)| parts::summary_message(text)).collect();
        let tokens = parts.tokens(&merged);
        if !parts.fits(&merged) {
            return Err(Error::BodyTooLarge { tokens, max_tokens: max });
        }
        let count = summaries.len();
        self.summarize(ask, &merged, Some(json!({"index": count, "count": count, "merge": true}))).await
    }

    /// Asks the host for one summary of `messages`: its text and its whole answer.
    async fn summarize(
        &self,
        ask: &Ask<'_>,
        messages: &[Arc<Message>],
        part: Option<Value>,
    ) -> Result<(String, Value)> {
        let params = RuntimeParams {
            session_id: ask.session_id.to_owned(),
            purpose: "summarize",
            system: ask.system.map(str::to_owned),
            messages: messages.iter().map(|m| (**m).clone()).collect(),
            temperature: None,
            max_tokens: None,
            tools: None,
            metadata: None,
            payload: None,
            response_format: None,
            stream_id: None,
            part,
        };
        let response = self.host.run(&params, ask.timeout, ask.call.cancel()).await.map_err(failed)?;
        let text = check_answer(&response, true, &Default::default())?.text.filter(|t| !t.trim().is_empty());
        let text = text.ok_or_else(|| invalid_response("text: the summary must be a non-empty string"))?;
        Ok((text, response))
    }
}
