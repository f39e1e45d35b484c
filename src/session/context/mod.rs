//! Context management on the way out (spec section 17): what `session/export` and
//! `session/count_tokens` do to a history before and after building the body, never to
//! the stored history. In the order of the spec's details: start at the latest
//! compaction point of the export's format (`compaction`), leave out older reasoning
//! (`clear_thinking`), clear older tool results (`clear_tool_results`), make the body
//! fit a budget (`fit`), and mark cache breakpoints on the body that is sent (`cache`).
//! Pure: `prepare` takes the history and gives the body and what was done to it.

mod cache;
mod edit;
mod fit;
pub mod parts;
mod pieces;
mod tail;

use std::sync::Arc;

use serde::{Deserialize, Serialize};

pub use cache::Cache;
pub use edit::{ClearThinking, ClearToolResults};
pub use fit::Fit;
pub use pieces::{Pieces, Running};
pub use tail::End;

use crate::error::Result;
use crate::session::Message;
use crate::session::export::{self, Export, Format, Options, Violation};
use crate::session::native;

/// Whether export starts at the latest compaction point of its format (`use`, the
/// default) or sends the whole history (`ignore`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CompactionMode {
    #[default]
    Use,
    Ignore,
}

/// The options of section 17, as a request gives them; `Default` changes nothing.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Context {
    pub compaction: CompactionMode,
    pub clear_tool_results: Option<ClearToolResults>,
    pub clear_thinking: Option<ClearThinking>,
    pub fit: Option<Fit>,
    pub cache: Option<Cache>,
}

impl Context {
    /// Whether the body is sent as stored (from the latest compaction point): no option
    /// edits, fits or marks it.
    pub fn edits_nothing(&self) -> bool {
        self.compaction == CompactionMode::Use
            && self.clear_tool_results.is_none()
            && self.clear_thinking.is_none()
            && self.fit.is_none()
            && self.cache.is_none()
    }
}

/// What was left out before the latest compaction point.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Skipped {
    /// The history index the body starts at.
    pub from_index: usize,
}

/// What `clear_tool_results` and `clear_thinking` changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Edits {
    pub cleared_tool_results: usize,
    pub cleared_thinking_turns: usize,
    pub cleared_tokens: usize,
}

/// What `fit` did to make the body fit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Fitted {
    pub tokens_before: usize,
    pub tokens: usize,
    pub cleared_tool_results: usize,
    pub cleared_thinking_turns: usize,
    pub turns_left_out: usize,
}

/// What the options did to a body, as the replies of export and count_tokens say it:
/// each member present only when its option was given or something was left out.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Done {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context: Option<Skipped>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub edits: Option<Edits>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fit: Option<Fitted>,
}

/// The body to send (`None` when only its tokens were asked for), its tokens, and what
/// was done to it.
#[derive(Debug, Clone, PartialEq)]
pub struct Prepared {
    pub export: Option<Export>,
    pub tokens: usize,
    pub done: Done,
}

/// A history on its way to becoming a body: the messages left (shared with the store's
/// until one is edited), the history index each came from (what warnings and violations
/// name), and what was done to each on the way out (0: nothing; part of its piece's key).
pub(crate) struct Body<'a> {
    pub format: Format,
    pub system: Option<&'a str>,
    pub options: &'a Options,
    pub messages: Vec<Arc<Message>>,
    pub origin: Vec<usize>,
    pub marks: Vec<u64>,
    pub pieces: &'a Pieces,
    /// The names of the calls (Gemini sends a result under its call's), found once.
    pub names: std::cell::OnceCell<Arc<serde_json::Map<String, serde_json::Value>>>,
}

impl<'a> Body<'a> {
    /// A body of `messages`, which came from history indexes `origin`, nothing done to
    /// them yet.
    pub fn new(
        (format, system, options): (Format, Option<&'a str>, &'a Options),
        messages: Vec<Arc<Message>>,
        origin: Vec<usize>,
        pieces: &'a Pieces,
    ) -> Self {
        let marks = vec![0; messages.len()];
        Body { format, system, options, messages, origin, marks, pieces, names: Default::default() }
    }

    /// The body of the messages left, its sources and warnings naming history indexes.
    pub fn export(&self) -> Export {
        let mut done = export::export_with(self.format, self.system, &self.messages, self.options);
        let at = |i: usize| self.origin.get(i).copied().unwrap_or(i);
        done.sources.iter_mut().for_each(|s| *s = at(*s));
        done.warnings.iter_mut().filter_map(|w| w.index.as_mut()).for_each(|i| *i = at(*i));
        done
    }

    /// The tokens of `export`'s body, from the messages' kept pieces.
    pub fn tokens(&self) -> usize {
        self.pieces.count(self)
    }

    /// What a message's piece needs beside it (the calls' names, found once: clearing
    /// never changes them).
    pub fn around(&self) -> export::Around<'_, Arc<Message>> {
        if !self.format.names_results() {
            return export::Around::new(&self.messages);
        }
        let names = self.names.get_or_init(|| Arc::new(export::call_names(&self.messages)));
        export::Around::with_names(&self.messages, Arc::clone(names))
    }

    /// Message `i`, to change on the way out; `mark` says what is done to it.
    fn edit(&mut self, i: usize, mark: u64) -> &mut Message {
        self.marks[i] = self.marks[i].rotate_left(7) ^ mark;
        Arc::make_mut(&mut self.messages[i])
    }

    /// Leaves out the messages before `start`.
    fn start_at(&mut self, start: usize) {
        self.messages.drain(..start);
        self.origin.drain(..start);
        self.marks.drain(..start);
    }

    /// The body without the messages `left_out` marks.
    pub(crate) fn without(&self, left_out: &[bool]) -> Self {
        let kept = |i: &usize| !left_out[*i];
        Body {
            messages: (0..self.messages.len()).filter(kept).map(|i| Arc::clone(&self.messages[i])).collect(),
            origin: (0..self.messages.len()).filter(kept).map(|i| self.origin[i]).collect(),
            marks: (0..self.messages.len()).filter(kept).map(|i| self.marks[i]).collect(),
            names: self.names.clone(),
            ..*self
        }
    }
}

/// The body of `format` for `messages` (the history, repaired as asked) with the options
/// of section 17 applied in their order, built when `build` (else only counted);
/// `session_id` keys OpenAI's prompt cache; `pieces` keeps each message's tokens.
#[allow(clippy::too_many_arguments)]
pub fn prepare(
    format: Format,
    system: Option<&str>,
    messages: Vec<Arc<Message>>,
    options: &Options,
    context: &Context,
    session_id: &str,
    pieces: &Pieces,
    build: bool,
) -> Result<Prepared> {
    let origin = (0..messages.len()).collect();
    let mut body = Body::new((format, system, options), messages, origin, pieces);
    let mut skipped = None;
    if context.compaction == CompactionMode::Use
        && let Some(start) = latest_compaction(&body.messages, format, options).filter(|&i| i > 0)
    {
        body.start_at(start);
        skipped = Some(Skipped { from_index: start });
    }
    let mut edits = None;
    if context.clear_thinking.is_some() || context.clear_tool_results.is_some() {
        let before = body.tokens();
        let mut done = Edits::default();
        if let Some(clear) = &context.clear_thinking {
            done.cleared_thinking_turns = clear.apply(&mut body);
        }
        if let Some(clear) = &context.clear_tool_results {
            done.cleared_tool_results = clear.apply(&mut body);
        }
        done.cleared_tokens = before.saturating_sub(body.tokens());
        edits = Some(done);
    }
    let fitted = context.fit.as_ref().map(|fit| fit.apply(&mut body)).transpose()?;
    let (export, tokens) = finish(&body, context.cache.as_ref(), session_id, build, fitted.map(|f| f.tokens));
    Ok(Prepared { export, tokens, done: Done { context: skipped, edits, fit: fitted } })
}

/// The body built (when `build`) with `cache`'s marks, and its tokens (`known` when
/// they were counted already).
fn finish(
    body: &Body,
    cache: Option<&Cache>,
    session_id: &str,
    build: bool,
    known: Option<usize>,
) -> (Option<Export>, usize) {
    let tokens = known.unwrap_or_else(|| body.tokens());
    match cache {
        // The marks go on the body built, and add what they say to its count.
        Some(cache) => {
            let mut export = body.export();
            let added = cache.place(body.format, &mut export, session_id);
            (build.then_some(export), tokens + added)
        }
        None => (build.then(|| body.export()), tokens),
    }
}

/// What fitting from the history's end gave.
pub enum FromEnd {
    Prepared(Box<Prepared>),
    /// The turns read may not be all that fit: read the page before.
    More,
    /// Fit the whole history instead (`prepare`).
    Whole,
}

/// The body `prepare` gives a `fit` (and at most `cache`) asked of a long history, from
/// its `end` and what `running` counted of it (`tokens_before` its body's tokens).
#[allow(clippy::too_many_arguments)]
pub fn prepare_from_end(
    format: Format,
    system: Option<&str>,
    options: &Options,
    context: &Context,
    session_id: &str,
    pieces: &Pieces,
    (running, tokens_before): (&Running, usize),
    end: End,
    build: bool,
) -> Result<FromEnd> {
    let Some(fit) =
        context.fit.as_ref().filter(|_| context.clear_thinking.is_none() && context.clear_tool_results.is_none())
    else {
        return Ok(FromEnd::Whole);
    };
    fit.check()?;
    let (body, fitted) = match tail::fit_from_end(fit, format, system, options, pieces, running, tokens_before, end)? {
        tail::Tail::Fitted(body, fitted) => (body, fitted),
        tail::Tail::More => return Ok(FromEnd::More),
        tail::Tail::Whole => return Ok(FromEnd::Whole),
    };
    let skipped = (running.start > 0).then_some(Skipped { from_index: running.start });
    let (export, tokens) = finish(&body, context.cache.as_ref(), session_id, build, Some(fitted.tokens));
    let done = Done { context: skipped, edits: None, fit: Some(fitted) };
    Ok(FromEnd::Prepared(Box::new(Prepared { export, tokens, done })))
}

/// The rules `cache` brings to `validate` (Anthropic's limits on breakpoints), beside
/// the format's own; with `cache`, the breakpoints export would place are checked too.
pub fn validate(
    format: Format,
    mut unaltered: Export,
    options: &Options,
    cache: Option<&Cache>,
    session_id: &str,
) -> Vec<Violation> {
    if let Some(cache) = cache {
        cache.place(format, &mut unaltered, session_id);
    }
    let mut found = export::validate_with(format, &unaltered, options);
    if format == Format::AnthropicMessages {
        found.extend(cache::violations(&unaltered));
    }
    found
}

/// The index of the latest message that export to `format` replays as a compaction
/// point: its native body is of that format (and model, when one is asked for) and
/// holds a compaction.
pub(crate) fn latest_compaction(messages: &[Arc<Message>], format: Format, options: &Options) -> Option<usize> {
    messages.iter().rposition(|m| {
        m.native.as_deref().is_some_and(|n| {
            n.format == format
                && native::is_compaction_point(n)
                && options.model.as_deref().is_none_or(|wanted| native::model_matches(n.model.as_deref(), wanted))
        })
    })
}

/// Whether a message stands for what came before it, and so is never left out: convo's
/// own compaction summary (`session/compact`), or a provider's compaction point.
pub(crate) fn is_summary(m: &Message) -> bool {
    m.metadata.as_ref().is_some_and(|meta| meta.contains_key("compaction"))
        || m.native.as_deref().is_some_and(native::is_compaction_point)
}
