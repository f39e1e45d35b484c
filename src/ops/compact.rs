//! `session/compact`: the turns before the last `keep_turns` replaced by one summary,
//! given by the client or asked of the host (`runtime/run` with `purpose: "summarize"`
//! and the turns to summarise). Asking, the session is read, let go while the host
//! works, and compacted at the revision read: if it changed meanwhile, nothing is
//! compacted and the reply is 1003 with the host's answer in `data.response`.

use std::time::Duration;

use crate::error::{Error, Result};
use crate::ops::limits::host_timeout;
use crate::ops::runtime::{check_answer, failed, invalid_response};
use crate::ops::{Call, Ops, RuntimeParams};
use crate::session::{check_revision, turns_cut};
use crate::store::Compacted;

/// A compaction as asked: keep the last `keep_turns` turns and replace the ones before
/// with `summary`, or with a summary asked of the host (`summarize`, waiting up to
/// `timeout_ms`): exactly one of the two. With `archive`, the history as it was is kept
/// as a new session.
pub struct Compaction {
    pub keep_turns: u64,
    pub summary: Option<String>,
    pub summarize: Option<bool>,
    pub archive: bool,
    pub timeout_ms: Option<u64>,
    pub expected_revision: Option<u64>,
}

/// Where a compaction's summary comes from.
enum Summary {
    Given(String),
    /// Asked of the host, waiting at most this long.
    Asked(Duration),
}

impl Ops {
    pub async fn compact(&self, session_id: &str, asked: Compaction, call: &Call) -> Result<Compacted> {
        let Compaction { keep_turns, summary, summarize, archive, timeout_ms, expected_revision: expected } = asked;
        let summary = match (summary, summarize) {
            (Some(text), None | Some(false)) => Summary::Given(text),
            (None, Some(true)) => Summary::Asked(host_timeout(timeout_ms)),
            _ => return Err(Error::invalid("give exactly one of `summary` and `summarize: true`")),
        };
        if keep_turns == 0 {
            return Err(Error::invalid("keep_turns: must be at least 1"));
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
        let params = RuntimeParams {
            session_id: session_id.to_owned(),
            purpose: "summarize",
            system: page.info.system,
            messages: messages[..cut].iter().map(|m| (**m).clone()).collect(),
            temperature: None,
            max_tokens: None,
            tools: None,
            metadata: None,
            payload: None,
            response_format: None,
            stream_id: None,
        };
        call.release();
        let response = self.host.run(&params, timeout, call.cancel()).await.map_err(failed)?;
        let text = check_answer(&response, true, &Default::default())?.text.filter(|t| !t.trim().is_empty());
        let text = text.ok_or_else(|| invalid_response("text: the summary must be a non-empty string"))?;
        let revision = Some(page.info.revision);
        self.store.compact(session_id, keep_turns, text, archive, revision).await.map_err(|e| match e {
            Error::RevisionConflict { expected, current } => Error::StaleAnswer { expected, current, response },
            other => other,
        })
    }
}
