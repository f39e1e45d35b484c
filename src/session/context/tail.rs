//! `fit` on a long history, from its end: what fit does depends on the messages before
//! the kept turns only through what the running count keeps of them (`Clearable`), so
//! a body that must leave out old turns is made from the history's end, read a page at
//! a time, and the messages that stand for what came before (summaries, compaction
//! points) wherever they are. It gives the body `Fit::apply` gives the whole history
//! (the integration tests hold the two together), or says that the whole history is
//! needed: when the body fits as it is, or clearing alone might make it fit.

use std::sync::Arc;

use super::edit::{fit_clear, fit_saving};
use super::pieces::Running;
use super::{Body, Fit, Fitted, Pieces, is_summary};
use crate::error::{Error, Result};
use crate::session::export::{Format, Options};
use crate::session::{Message, Role, turns_cut};

/// What fitting from the end came to.
pub(super) enum Tail<'a> {
    /// The body, and what was done to it.
    Fitted(Body<'a>, Fitted),
    /// The turns read may not be all that fit: read the page before.
    More,
    /// Fit the whole history instead.
    Whole,
}

/// The history's end, as read: `messages` from history index `first` (a turn's start)
/// to the end, the last `repaired` of them the repaired view's; and the turns before
/// `first` that hold a summary, each with its start.
pub struct End {
    pub first: usize,
    pub messages: Vec<Arc<Message>>,
    pub repaired: usize,
    pub summaries: Vec<(usize, Vec<Arc<Message>>)>,
}

/// Fits `end` of a history whose body has `tokens_before` tokens, as counted in
/// `running`.
#[allow(clippy::too_many_arguments)]
pub(super) fn fit_from_end<'a>(
    fit: &Fit,
    format: Format,
    system: Option<&'a str>,
    options: &'a Options,
    pieces: &'a Pieces,
    running: &Running,
    tokens_before: usize,
    end: End,
) -> Result<Tail<'a>> {
    let max = usize::try_from(fit.max_tokens).unwrap_or(usize::MAX);
    if tokens_before <= max || end.first <= running.start {
        return Ok(Tail::Whole);
    }
    let tail = &end.messages;
    let kept = turns_cut(tail.len(), tail.iter().rev().map(|m| m.role), fit.keep_turns);
    if kept == 0 {
        return Ok(Tail::More);
    }
    // Everything before the kept turns cleared, as fit's first two steps leave it.
    let mut messages = Vec::new();
    let mut origin = Vec::new();
    for (start, turn) in &end.summaries {
        origin.extend(*start..start + turn.len());
        messages.extend(turn.iter().cloned());
    }
    let offset = messages.len();
    origin.extend(end.first..end.first + tail.len());
    messages.extend(tail.iter().cloned());
    let mut body = Body::new((format, system, options), messages, origin, pieces);
    // What clearing would save of the kept turns' stored messages, which fit never
    // clears: taken from what clearing all would save.
    let (mut kept_results, mut kept_reasoning, mut kept_savings) = (0, 0, 0);
    for i in offset + kept..offset + tail.len() - end.repaired {
        let saving = fit_saving(&body, i);
        if saving > 0 {
            kept_savings += saving;
            if body.messages[i].role == Role::Tool {
                kept_results += 1;
            } else {
                kept_reasoning += 1;
            }
        }
    }
    let clearable = &running.clearable;
    if tokens_before.saturating_sub(clearable.savings.saturating_sub(kept_savings)) <= max {
        return Ok(Tail::Whole);
    }
    for i in 0..offset + kept {
        if fit_saving(&body, i) > 0 {
            fit_clear(&mut body, i);
        }
    }
    // The tail's turns that may be left out, oldest first; protected ones stay.
    let starts: Vec<usize> = (offset..offset + kept).filter(|&i| body.messages[i].role == Role::User).collect();
    let ends = starts.iter().skip(1).copied().chain([offset + kept]);
    let droppable: Vec<(usize, usize)> =
        starts.iter().copied().zip(ends).filter(|&(a, b)| !body.messages[a..b].iter().any(|m| is_summary(m))).collect();
    let shares = pieces.shares(&body);
    let total = body.tokens();
    // How many of the tail's turns to leave out: the fewest whose leaving out fits.
    let mut estimate = total;
    let mut k = 0;
    while estimate > max && k < droppable.len() {
        let (a, b) = droppable[k];
        estimate = estimate.saturating_sub(shares[a..b].iter().sum());
        k += 1;
    }
    if k == 0 {
        // The whole tail fits with everything before it left out: an older turn may too.
        return Ok(Tail::More);
    }
    let mut left_out = vec![false; body.messages.len()];
    droppable[..k].iter().for_each(|&(a, b)| left_out[a..b].iter_mut().for_each(|l| *l = true));
    let mut fitted_body = body.without(&left_out);
    let mut exact = fitted_body.tokens();
    while exact > max {
        let Some(&(a, b)) = droppable.get(k) else {
            return Err(Error::BodyTooLarge { tokens: exact, max_tokens: fit.max_tokens });
        };
        left_out[a..b].iter_mut().for_each(|l| *l = true);
        k += 1;
        fitted_body = body.without(&left_out);
        exact = fitted_body.tokens();
    }
    // Turns in the body: the tail's from its first kept turn, and the protected ones.
    let kept_turns = fitted_body.messages.iter().filter(|m| m.role == Role::User).count()
        + end.summaries.iter().filter(|(_, turn)| turn.first().is_some_and(|m| m.role != Role::User)).count();
    let fitted = Fitted {
        tokens_before,
        tokens: exact,
        cleared_tool_results: clearable.results - kept_results.min(clearable.results),
        cleared_thinking_turns: clearable.reasoning - kept_reasoning.min(clearable.reasoning),
        turns_left_out: clearable.turns.saturating_sub(kept_turns),
    };
    Ok(Tail::Fitted(fitted_body, fitted))
}
