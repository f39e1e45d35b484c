//! Compaction that cannot overflow (spec 17.5): the turns to summarise, split at turn
//! boundaries into consecutive parts, each of which fits in `max_input_tokens` with the
//! system prompt and the summary carried from the part before. Counted in the runtime's
//! format, from the messages' kept pieces. A turn that does not fit alone is sent with
//! its tool results cleared (as `clear_tool_results` clears them); one that still does
//! not fit cannot be summarised within the budget: 1005, and nothing changes.

use std::sync::Arc;

use super::edit::{PLACEHOLDER, clear_result};
use super::{Body, Pieces};
use crate::error::{Error, Result};
use crate::session::export::{Format, Options};
use crate::session::{Message, Role};

/// A request's messages as the parts are sent: the summary carried (a user message),
/// then the part's turns.
pub struct Parts<'a> {
    format: Format,
    system: Option<&'a str>,
    max: usize,
    pieces: &'a Pieces,
    options: Options,
}

impl<'a> Parts<'a> {
    pub fn new(format: Format, system: Option<&'a str>, max_input_tokens: u64, pieces: &'a Pieces) -> Self {
        let max = usize::try_from(max_input_tokens).unwrap_or(usize::MAX);
        Parts { format, system, max, pieces, options: Options::fixing(true) }
    }

    fn body(&self, messages: Vec<Arc<Message>>) -> Body<'_> {
        let origin = (0..messages.len()).collect();
        Body::new((self.format, self.system, &self.options), messages, origin, self.pieces)
    }

    /// The tokens of a request of `messages`.
    pub fn tokens(&self, messages: &[Arc<Message>]) -> usize {
        self.body(messages.to_vec()).tokens()
    }

    /// Whether a request of `messages` fits.
    pub fn fits(&self, messages: &[Arc<Message>]) -> bool {
        self.tokens(messages) <= self.max
    }

    /// The next part of `turns`, from its start, with `carried` (the summary so far)
    /// first: as many whole turns as fit (the messages to send, and how many turns they
    /// hold). A first turn that does not fit alone is sent with its results cleared.
    pub fn next(
        &self,
        carried: Option<&Arc<Message>>,
        turns: &[Vec<Arc<Message>>],
    ) -> Result<(Vec<Arc<Message>>, usize)> {
        let mut messages: Vec<Arc<Message>> = carried.into_iter().cloned().collect();
        let first = self.clear_if_needed(&messages, &turns[0])?;
        messages.extend(first);
        // Grow by estimates (each message's kept tokens), then count.
        let (mut taken, mut estimate) = (1, self.tokens(&messages));
        while let Some(turn) = turns.get(taken) {
            estimate += self.estimate(turn);
            if estimate > self.max {
                break;
            }
            messages.extend(turn.iter().cloned());
            taken += 1;
        }
        while taken > 1 && !self.fits(&messages) {
            taken -= 1;
            messages.truncate(messages.len() - turns[taken].len());
        }
        Ok((messages, taken))
    }

    /// How many turns each part from the start of `turns` takes, each part after the
    /// first carrying a summary of `reserve` tokens.
    pub fn plan(
        &self,
        first: Option<&Arc<Message>>,
        turns: &[Vec<Arc<Message>>],
        reserve: usize,
    ) -> Result<Vec<usize>> {
        let filler = summary_message(&" summary".repeat(reserve));
        let (mut sizes, mut start) = (Vec::new(), 0);
        while start < turns.len() {
            let carried = if sizes.is_empty() { first } else { Some(&filler) };
            let (_, taken) = self.next(carried, &turns[start..])?;
            sizes.push(taken);
            start += taken;
        }
        Ok(sizes)
    }

    /// What a turn adds to a request, near enough: what its messages add to a body.
    fn estimate(&self, turn: &[Arc<Message>]) -> usize {
        self.pieces.shares(&self.body(turn.to_vec())).iter().sum()
    }

    /// `turn`, as it must be sent: as it is when it fits after `before`, else with its
    /// tool results cleared; 1005 when even that does not fit.
    fn clear_if_needed(&self, before: &[Arc<Message>], turn: &[Arc<Message>]) -> Result<Vec<Arc<Message>>> {
        let mut messages = before.to_vec();
        messages.extend(turn.iter().cloned());
        if self.fits(&messages) {
            return Ok(turn.to_vec());
        }
        let mut body = self.body(messages);
        for i in before.len()..body.messages.len() {
            if body.messages[i].role == Role::Tool {
                clear_result(&mut body, i, PLACEHOLDER);
            }
        }
        let tokens = body.tokens();
        if tokens > self.max {
            return Err(Error::BodyTooLarge { tokens, max_tokens: self.max as u64 });
        }
        Ok(body.messages.split_off(before.len()))
    }
}

/// The turns of `messages`: each user message and what follows it up to the next (what
/// comes before the first user message is a turn too).
pub fn turns(messages: &[Arc<Message>]) -> Vec<Vec<Arc<Message>>> {
    let mut out: Vec<Vec<Arc<Message>>> = Vec::new();
    for m in messages {
        if m.role == Role::User || out.is_empty() {
            out.push(Vec::new());
        }
        if let Some(turn) = out.last_mut() {
            turn.push(Arc::clone(m));
        }
    }
    out
}

/// The summary carried into the next part, or given to the merge: a user message.
pub fn summary_message(text: &str) -> Arc<Message> {
    Arc::new(Message::new(Role::User, serde_json::Value::String(text.to_owned())))
}
