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

use serde::{Deserialize, Serialize};

pub use cache::Cache;
pub use edit::{ClearThinking, ClearToolResults};
pub use fit::Fit;

use crate::error::Result;
use crate::session::Message;
use crate::session::export::{self, Export, Format, Options, Violation};
use crate::session::native;
use crate::session::tokens;

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

/// The body to send, its tokens, and what was done to it (each `None` when its option
/// was not given and nothing was left out).
#[derive(Debug, Clone, PartialEq)]
pub struct Prepared {
    pub export: Export,
    pub tokens: usize,
    pub context: Option<Skipped>,
    pub edits: Option<Edits>,
    pub fit: Option<Fitted>,
}

/// A history on its way to becoming a body: the messages left, and the history index
/// each came from (what warnings and violations name).
pub(crate) struct Body<'a> {
    pub format: Format,
    pub system: Option<&'a str>,
    pub options: &'a Options,
    pub messages: Vec<Message>,
    pub origin: Vec<usize>,
}

impl Body<'_> {
    /// The body of the messages left, its sources and warnings naming history indexes.
    pub fn export(&self) -> Export {
        let mut done = export::export_with(self.format, self.system, &self.messages, self.options);
        let at = |i: usize| self.origin.get(i).copied().unwrap_or(i);
        done.sources.iter_mut().for_each(|s| *s = at(*s));
        done.warnings.iter_mut().filter_map(|w| w.index.as_mut()).for_each(|i| *i = at(*i));
        done
    }

    pub fn tokens(&self) -> usize {
        tokens::count_payload(&self.export().payload)
    }

    /// Leaves out the messages before `start`.
    fn start_at(&mut self, start: usize) {
        self.messages.drain(..start);
        self.origin.drain(..start);
    }
}

/// The body of `format` for `messages` (the history, repaired as asked) with the options
/// of section 17 applied in their order; `session_id` keys OpenAI's prompt cache.
pub fn prepare(
    format: Format,
    system: Option<&str>,
    messages: Vec<Message>,
    options: &Options,
    context: &Context,
    session_id: &str,
) -> Result<Prepared> {
    let origin = (0..messages.len()).collect();
    let mut body = Body { format, system, options, messages, origin };
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
            done.cleared_thinking_turns = clear.apply(&mut body.messages, format);
        }
        if let Some(clear) = &context.clear_tool_results {
            done.cleared_tool_results = clear.apply(&mut body.messages);
        }
        done.cleared_tokens = before.saturating_sub(body.tokens());
        edits = Some(done);
    }
    let fitted = context.fit.as_ref().map(|fit| fit.apply(&mut body)).transpose()?;
    let mut export = body.export();
    if let Some(cache) = &context.cache {
        cache.place(format, &mut export, session_id);
    }
    let tokens = tokens::count_payload(&export.payload);
    Ok(Prepared { export, tokens, context: skipped, edits, fit: fitted })
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
fn latest_compaction(messages: &[Message], format: Format, options: &Options) -> Option<usize> {
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
