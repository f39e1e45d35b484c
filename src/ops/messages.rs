//! Appending, the history view (stored messages, the repaired trailing group, a stream's
//! draft), and trimming by turns.

use serde::Serialize;

use crate::error::{Error, Result};
use crate::ops::Ops;
use crate::ops::limits::{MAX_MESSAGES, check_count};
use crate::ops::provider::TrimmedToFit;
use crate::ops::responses::numbers_calls;
use crate::session::export::{Format, Options};
use crate::session::{DraftView, Identity, MessageInput};
use crate::store::{Appended, MessageJson, Popped, Rewound, message_json};

/// The result of an append of one message. Every append answers with it, so its reply
/// is written by hand (`rpc::methods::messages`), not serialized:
/// `{"message_id":…,"index":…,"revision":…}`, with `"duplicate":true` for a retry.
#[derive(Debug, Clone, PartialEq)]
pub struct Added {
    pub message_id: String,
    pub index: u64,
    pub revision: u64,
    /// The append was a retry of one stored before (`message_id`): nothing changed.
    pub duplicate: bool,
}

/// A page of the history view.
#[derive(Debug, Clone, Serialize)]
pub struct History {
    /// As JSON text: a store that keeps that text hands it over as is.
    pub messages: Vec<MessageJson>,
    pub revision: u64,
    /// How many synthetic results the page holds.
    pub repaired: u64,
    /// With `include_draft`: the session's stream in progress (`null` when none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub draft: Option<Option<DraftView>>,
}

/// The result of `session/trim`.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum Trimmed {
    Turns { removed: u64, revision: u64 },
    Tokens(TrimmedToFit),
}

impl Ops {
    /// Appends one message as a client gave it (`add_user`, `add_assistant`,
    /// `add_tool_result`, `add_message`); an error in it names `param`, the member it
    /// came in, when that is not the top level.
    ///
    /// Not an `async fn`: a message with nothing to wait for before the store's append
    /// (no image refs to resolve, no call ids to number: nearly every one) is checked and
    /// made here, before the future is, so the future holds the `Vec` the store takes,
    /// not the input (every request's future is moved into a box of that size). Any other
    /// takes the one append path, boxed, as `append` does.
    pub fn add<'a>(
        &'a self,
        session_id: &'a str,
        input: MessageInput,
        param: Option<&'a str>,
        expected: Option<u64>,
    ) -> impl Future<Output = Result<Added>> + Send + 'a {
        let within = move |e: Error| match param {
            Some(param) => e.within(param),
            None => e,
        };
        // `Ok`: the message made now (or why it cannot be); `Err`: the input, for the
        // one append path.
        let made = if input.images.is_none() && !numbers_calls(&input) {
            Ok(check_message_ids(std::slice::from_ref(&input))
                .map_err(|(_, e)| within(e))
                .and_then(|once| Ok((vec![input.into_message(Identity::Fresh).map_err(within)?], once))))
        } else {
            Err(vec![input])
        };
        async move {
            let done = match made {
                Ok(made) => {
                    let (messages, once) = made?;
                    self.store.append(session_id, messages, expected, once).await?
                }
                Err(inputs) => {
                    Box::pin(self.append_named(session_id, inputs, |_| param.map(str::to_owned), expected)).await?
                }
            };
            let Appended { mut message_ids, index, revision, duplicate_of } = done;
            let message_id = message_ids.pop().ok_or_else(|| Error::Internal("append returned no id".into()))?;
            Ok(Added { message_id, index, revision, duplicate: duplicate_of.is_some() })
        }
    }

    /// Appends messages as a client gave them (`add_messages`), all or none.
    pub async fn append(&self, session_id: &str, inputs: Vec<MessageInput>, expected: Option<u64>) -> Result<Appended> {
        check_count("the request", inputs.len())?;
        self.append_named(session_id, inputs, |i| Some(format!("messages[{i}]")), expected).await
    }

    /// The one append path: each message's image refs resolved, then its fields checked
    /// (an error naming `param(i)`), then all appended under the rules or none.
    async fn append_named(
        &self,
        session_id: &str,
        mut inputs: Vec<MessageInput>,
        param: impl Fn(usize) -> Option<String>,
        expected: Option<u64>,
    ) -> Result<Appended> {
        let within = |i: usize, e: Error| match param(i) {
            Some(param) => e.within(&param),
            None => e,
        };
        let once = check_message_ids(&inputs).map_err(|(i, e)| within(i, e))?;
        // The waits that few appends take are boxed: an append's future is moved whole,
        // more than once, and holds room for the largest wait in it.
        for (i, input) in inputs.iter_mut().enumerate() {
            if input.images.is_some() {
                Box::pin(self.resolve_images(input)).await.map_err(|e| within(i, e))?;
            }
        }
        // Calls given no id (Gemini's) are numbered after the session's ids and those of
        // the messages before them in this request. The session's are read when the first
        // such message is reached; no message is held across that wait, which would make
        // every append's future larger by two messages.
        let mut taken = None;
        let mut messages = Vec::with_capacity(inputs.len());
        let mut rest = inputs.into_iter();
        while let Some(next) = rest.as_slice().first() {
            if numbers_calls(next) && taken.is_none() {
                taken = Some(Box::pin(self.call_ids_of(session_id)).await?);
            }
            let Some(mut input) = rest.next() else { break };
            let i = messages.len();
            if numbers_calls(&input) {
                input.taken_call_ids = taken.clone().unwrap_or_default();
            }
            let message = input.into_message(Identity::Fresh).map_err(|e| within(i, e))?;
            if let Some(taken) = taken.as_mut() {
                taken.extend(message.call_ids().map(str::to_owned));
            }
            messages.push(message);
        }
        self.store.append(session_id, messages, expected, once).await
    }

    /// Stored messages `offset..offset + limit` of the view that is the stored history
    /// followed, when `repair`, by a synthetic result for each unanswered call of the
    /// trailing group.
    pub async fn history(
        &self,
        session_id: &str,
        repair: bool,
        offset: u64,
        limit: Option<u64>,
        include_draft: bool,
    ) -> Result<History> {
        if limit.is_some_and(|l| l > MAX_MESSAGES) {
            return Err(Error::invalid(format!("limit: must be at most {MAX_MESSAGES}")));
        }
        // Without a limit, read one past the bound, to refuse rather than build a huge reply.
        let page = self.store.history_json(session_id, offset, limit.or(Some(MAX_MESSAGES + 1))).await?;
        if limit.is_none() {
            let synthetic = page.tail.unanswered().count();
            check_count("the history", page.messages.len() + synthetic).map_err(|_| {
                Error::TooLarge(format!(
                    "the history holds more than {MAX_MESSAGES} messages; page it with offset and limit"
                ))
            })?;
        }
        let mut messages = page.messages;
        let mut repaired = 0;
        if repair {
            let stored = page.info.message_count;
            let end = limit.map_or(u64::MAX, |l| offset.saturating_add(l));
            let from = offset.max(stored) - stored;
            let to = end.max(stored) - stored;
            for synthetic in page.tail.repair_view().into_iter().skip(clamp(from)).take(clamp(to - from)) {
                messages.push(message_json(&synthetic)?);
                repaired += 1;
            }
        }
        let draft = match include_draft {
            true => Some(self.store.draft(session_id).await?.map(|d| d.view())),
            false => None,
        };
        Ok(History { messages, revision: page.info.revision, repaired, draft })
    }

    /// Drops every message after `to_message_id` and the results that directly follow it.
    pub async fn rewind(
        &self,
        session_id: &str,
        to_message_id: &str,
        archive: bool,
        expected: Option<u64>,
    ) -> Result<Rewound> {
        self.store.rewind(session_id, to_message_id, archive, expected).await
    }

    /// Keeps the last `max_turns` turns, or the turns that fit in `max_tokens` of the
    /// body `counted` (a format, and the export's options).
    /// Removes the last stored message, whatever its role, and stores `replace_with`
    /// (given as add_message takes one) in its place, in one step.
    pub async fn pop(
        &self,
        session_id: &str,
        replace_with: Option<MessageInput>,
        expected: Option<u64>,
    ) -> Result<Popped> {
        let replacement = match replace_with {
            Some(mut input) => {
                self.resolve_images(&mut input).await.map_err(|e| e.within("replace_with"))?;
                if numbers_calls(&input) {
                    input.taken_call_ids = self.call_ids_of(session_id).await?;
                }
                Some(input.into_message(Identity::Fresh).map_err(|e| e.within("replace_with"))?)
            }
            None => None,
        };
        self.store.pop(session_id, replacement, expected).await
    }

    pub async fn trim(
        &self,
        session_id: &str,
        max_turns: Option<u64>,
        max_tokens: Option<u64>,
        counted: (Format, Options),
        expected: Option<u64>,
    ) -> Result<Trimmed> {
        match (max_turns, max_tokens) {
            (Some(n), None) => {
                let done = self.store.trim_turns(session_id, n, expected).await?;
                Ok(Trimmed::Turns { removed: done.removed, revision: done.revision })
            }
            (None, Some(t)) => Ok(Trimmed::Tokens(self.trim_to_fit(session_id, t, counted, expected).await?)),
            _ => Err(Error::invalid("give exactly one of max_turns and max_tokens")),
        }
    }
}

/// Whether the client chose the messages' ids (`message_id`), each once in the request.
pub fn check_message_ids(inputs: &[MessageInput]) -> std::result::Result<bool, (usize, Error)> {
    let mut seen = std::collections::HashSet::new();
    for (i, id) in inputs.iter().enumerate().filter_map(|(i, m)| Some((i, m.message_id.as_deref()?))) {
        let id = crate::session::client_message_id(id).map_err(|e| (i, e))?;
        if !seen.insert(id) {
            return Err((i, Error::invalid("message_id: given to two messages of this request")));
        }
    }
    Ok(!seen.is_empty())
}

fn clamp(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}
