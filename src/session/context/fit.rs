//! `fit` (spec 17.4): a body made to fit a token budget without changing the stored
//! history. When it is larger, in this order and one step at a time, oldest first: tool
//! results are cleared, the reasoning of older turns is left out, whole turns are left
//! out (a turn is a user message and everything up to the next one, so a call never
//! loses its result); never the system prompt, a compaction summary or point, nor the
//! last `keep_turns` turns. It stops as soon as the body fits.
//!
//! Each step's saving is estimated from the messages' kept pieces (a result or a body
//! before and after its clearing, what a turn's messages add to the body), steps are taken
//! until the estimate fits, and the body is counted again: the estimate only decides how
//! far to go before the next count, and the exact count decides when to stop. The same
//! input gives the same body.

use serde::Deserialize;

use std::sync::Arc;

use super::edit::{fit_clear, fit_saving, with_reasoning};
use super::{Body, Fitted, is_summary};
use crate::error::{Error, Result};
use crate::session::{Message, Role, turns_cut};

/// `fit`: the body's budget, and how many of the last turns are never touched.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Fit {
    pub max_tokens: u64,
    #[serde(default = "one")]
    pub keep_turns: u64,
}

fn one() -> u64 {
    1
}

/// One step toward fitting.
#[derive(Debug, Clone, Copy)]
enum Step {
    /// Clear the tool result, or leave out the reasoning, of the message at this index.
    Clear(usize),
    /// Leave out the messages of this range, a whole turn.
    Turn(usize, usize),
}

impl Fit {
    /// -32602 for a `keep_turns` of 0.
    pub(crate) fn check(&self) -> Result<()> {
        if self.keep_turns == 0 {
            return Err(Error::invalid("fit.keep_turns: must be at least 1"));
        }
        Ok(())
    }

    /// Makes `body` fit, or says by how much it cannot (1005 with the smallest body's
    /// tokens).
    pub(crate) fn apply(&self, body: &mut Body) -> Result<Fitted> {
        self.check()?;
        let max = usize::try_from(self.max_tokens).unwrap_or(usize::MAX);
        let tokens_before = body.tokens();
        let mut fitted = Fitted { tokens_before, tokens: tokens_before, ..Fitted::default() };
        if tokens_before <= max {
            return Ok(fitted);
        }
        let messages = &body.messages;
        let kept = turns_cut(messages.len(), messages.iter().rev().map(|m| m.role), self.keep_turns);
        let results = (0..kept).filter(|&i| messages[i].role == Role::Tool);
        let thinking = with_reasoning(messages, body.format).into_iter().filter(|&i| i < kept);
        let mut steps: Vec<Step> = results.chain(thinking).map(Step::Clear).collect();
        steps.extend(turns(&messages[..kept]).into_iter().map(|(a, b)| Step::Turn(a, b)));

        let mut left_out = vec![false; body.messages.len()];
        let mut shares: Option<Vec<usize>> = None;
        let (mut taken, mut exact) = (0, tokens_before);
        while exact > max {
            if taken == steps.len() {
                return Err(Error::BodyTooLarge { tokens: exact, max_tokens: self.max_tokens });
            }
            let mut estimate = exact;
            while taken < steps.len() && estimate > max {
                let saving = match steps[taken] {
                    // Cleared only when that saves tokens (a short result may not).
                    Step::Clear(i) => {
                        let saving = fit_saving(body, i);
                        if saving > 0 {
                            fit_clear(body, i);
                            match body.messages[i].role {
                                Role::Tool => fitted.cleared_tool_results += 1,
                                _ => fitted.cleared_thinking_turns += 1,
                            }
                        }
                        saving
                    }
                    Step::Turn(a, b) => {
                        // What each message adds, as the clearing left them.
                        let shares = shares.get_or_insert_with(|| body.pieces.shares(body));
                        left_out[a..b].iter_mut().for_each(|l| *l = true);
                        fitted.turns_left_out += 1;
                        shares[a..b].iter().sum::<usize>()
                    }
                };
                estimate = estimate.saturating_sub(saving);
                taken += 1;
            }
            exact = body.without(&left_out).tokens();
        }
        *body = body.without(&left_out);
        fitted.tokens = exact;
        Ok(fitted)
    }
}

/// The whole turns of `messages` that may be left out, oldest first: each user message
/// and what follows it up to the next (what comes before the first user message too),
/// but not a turn holding a compaction summary or point.
fn turns(messages: &[Arc<Message>]) -> Vec<(usize, usize)> {
    let mut starts: Vec<usize> =
        messages.iter().enumerate().filter(|(_, m)| m.role == Role::User).map(|(i, _)| i).collect();
    if starts.first() != Some(&0) && !messages.is_empty() {
        starts.insert(0, 0);
    }
    let ends = starts.iter().skip(1).copied().chain([messages.len()]);
    starts.iter().copied().zip(ends).filter(|&(a, b)| !messages[a..b].iter().any(|m| is_summary(m))).collect()
}
