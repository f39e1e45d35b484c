//! Context editing on the way out (spec 17.3): older tool results sent as a placeholder,
//! older reasoning left out. Each works on the messages about to become a body; the
//! stored history never changes.

use std::collections::HashSet;
use std::hash::BuildHasher;

use foldhash::fast::FixedState;

use serde::Deserialize;
use serde_json::Value;

use super::Body;
use crate::session::export::{Format, calls};
use crate::session::native;
use crate::session::{Message, Role};

/// What a cleared tool result says instead, unless the request names another text.
pub const PLACEHOLDER: &str = "[tool result cleared to save context]";

/// `clear_tool_results`: the results of all but the last `keep` tool calls (in order over
/// the history; calls of `exclude_tools` are never cleared, nor counted) are sent as
/// `placeholder`, without images. The result stays, so its call is still answered.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ClearToolResults {
    #[serde(default = "three")]
    pub keep: u64,
    #[serde(default)]
    pub exclude_tools: Vec<String>,
    #[serde(default)]
    pub placeholder: Option<String>,
}

fn three() -> u64 {
    3
}

fn one() -> u64 {
    1
}

impl ClearToolResults {
    /// Clears what it should of `body`'s results; how many it cleared.
    pub(crate) fn apply(&self, body: &mut Body) -> usize {
        let excluded: HashSet<&str> = self.exclude_tools.iter().map(String::as_str).collect();
        let ids: Vec<String> = body
            .messages
            .iter()
            .filter(|m| m.role == Role::Assistant)
            .flat_map(|m| calls(m))
            .filter(|c| !excluded.contains(c.name.as_str()))
            .map(|c| c.id)
            .collect();
        let keep = usize::try_from(self.keep).unwrap_or(usize::MAX).min(ids.len());
        let cleared: HashSet<&str> = ids[..ids.len() - keep].iter().map(String::as_str).collect();
        let placeholder = self.placeholder.as_deref().unwrap_or(PLACEHOLDER);
        let results: Vec<usize> = (0..body.messages.len())
            .filter(|&i| {
                let m = &body.messages[i];
                m.role == Role::Tool && m.tool_call_id.as_deref().is_some_and(|id| cleared.contains(id))
            })
            .collect();
        results.into_iter().filter(|&i| clear_result(body, i, placeholder)).count()
    }
}

/// Sends result `i` of `body` as `placeholder`, without images; `false` when it already
/// was.
pub(crate) fn clear_result(body: &mut Body, i: usize, placeholder: &str) -> bool {
    let m = &body.messages[i];
    if m.content.as_str() == Some(placeholder) && m.images.is_none() {
        return false;
    }
    let m = body.edit(i, cleared_mark(placeholder));
    m.content = Value::String(placeholder.to_owned());
    m.images = None;
    true
}

/// What clearing a result to `placeholder` marks it with (part of its piece's key).
fn cleared_mark(placeholder: &str) -> u64 {
    FixedState::default().hash_one(("cleared", placeholder))
}

/// What leaving out a message's reasoning marks it with.
const STRIPPED: u64 = 1;

/// What fit's clearing of message `i` of `body` would save (0: fit leaves it as it is).
pub(crate) fn fit_saving(body: &Body, i: usize) -> usize {
    let Some((cleared, mark)) = as_fit_clears(&body.messages[i], body.format) else { return 0 };
    let before = body.pieces.one(body, i).tokens;
    before.saturating_sub(body.pieces.one_as(body, i, &cleared, mark).tokens)
}

/// Clears message `i` of `body` as fit does (its result, or its reasoning).
pub(crate) fn fit_clear(body: &mut Body, i: usize) {
    if body.messages[i].role == Role::Tool {
        clear_result(body, i, PLACEHOLDER);
    } else {
        strip_reasoning(body, i);
    }
}

/// `m` as fit would send it cleared (a result, with the default placeholder; reasoning
/// of `format` left out), and the mark that says so, as a body's edit would make them;
/// `None` when fit never changes it. Fit clears it only if that saves tokens.
pub(crate) fn as_fit_clears(m: &Message, format: Format) -> Option<(Message, u64)> {
    if m.role == Role::Tool {
        let mut cleared = m.clone();
        cleared.content = Value::String(PLACEHOLDER.to_owned());
        cleared.images = None;
        return Some((cleared, cleared_mark(PLACEHOLDER)));
    }
    if !carries_reasoning(m, format) {
        return None;
    }
    let mut stripped = m.clone();
    stripped.native.as_deref_mut().map(native::strip_reasoning);
    Some((stripped, STRIPPED))
}

/// `clear_thinking`: the reasoning of all but the last `keep` assistant messages that
/// carry reasoning is left out, never that of the current turn (everything after the
/// last user message), which providers require in a tool loop.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ClearThinking {
    #[serde(default = "one")]
    pub keep: u64,
}

impl ClearThinking {
    /// Leaves out what it should of the reasoning `body` would carry; how many messages
    /// lost theirs.
    pub(crate) fn apply(&self, body: &mut Body) -> usize {
        let current = current_turn(&body.messages);
        let carrying = with_reasoning(&body.messages, body.format);
        let keep = usize::try_from(self.keep).unwrap_or(usize::MAX).min(carrying.len());
        let older = carrying[..carrying.len() - keep].iter().copied().filter(|&i| i < current);
        older.collect::<Vec<_>>().into_iter().filter(|&i| strip_reasoning(body, i)).count()
    }
}

/// Leaves out the reasoning of message `i` of `body`; `false` when it had none.
pub(crate) fn strip_reasoning(body: &mut Body, i: usize) -> bool {
    if !body.messages[i].native.as_deref().is_some_and(native::has_reasoning) {
        return false;
    }
    let m = body.edit(i, STRIPPED);
    m.native.as_deref_mut().is_some_and(native::strip_reasoning)
}

/// Where the current turn starts: right after the last user message (0 when there is
/// none: all of it is the current turn).
pub(crate) fn current_turn(messages: &[impl AsRef<Message>]) -> usize {
    messages.iter().rposition(|m| m.as_ref().role == Role::User).map_or(0, |i| i + 1)
}

/// The indexes of the assistant messages whose reasoning a body of `format` carries
/// (their native body is of that format and holds some), in order.
pub(crate) fn with_reasoning(messages: &[impl AsRef<Message>], format: Format) -> Vec<usize> {
    messages.iter().enumerate().filter(|(_, m)| carries_reasoning(m.as_ref(), format)).map(|(i, _)| i).collect()
}

/// Whether `m` is an assistant message whose reasoning a body of `format` carries.
pub(crate) fn carries_reasoning(m: &Message, format: Format) -> bool {
    let sent = |n: &native::Native| n.format == format && native::has_reasoning(n);
    m.role == Role::Assistant && m.native.as_deref().is_some_and(sent)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::session::native::Native;

    fn user(text: &str) -> Message {
        Message::new(Role::User, json!(text))
    }
    fn call(id: &str, name: &str) -> Message {
        let mut m = Message::new(Role::Assistant, Value::Null);
        m.tool_calls = Some(vec![json!({"id": id, "name": name, "arguments": {}})]);
        m
    }
    fn result(id: &str, text: &str) -> Message {
        let mut m = Message::new(Role::Tool, json!(text));
        m.tool_call_id = Some(id.into());
        m.images = Some(vec!["iVBORw0KGgo=".into()]);
        m
    }
    fn thinking(text: &str) -> Message {
        let body = json!([{"type": "thinking", "thinking": "hm", "signature": "s"}, {"type": "text", "text": text}]);
        let mut m = Message::new(Role::Assistant, json!(text));
        m.native = Some(Box::new(Native { format: Format::AnthropicMessages, model: None, body }));
        m
    }
    /// Runs `f` on a body of `history` (Anthropic's), and puts what it left back.
    fn run<R>(history: &mut Vec<Message>, f: impl FnOnce(&mut Body) -> R) -> R {
        let (options, pieces) = (crate::session::export::Options::default(), super::super::Pieces::default());
        let messages: Vec<std::sync::Arc<Message>> = history.drain(..).map(std::sync::Arc::new).collect();
        let origin = (0..messages.len()).collect();
        let mut body = Body::new((Format::AnthropicMessages, None, &options), messages, origin, &pieces);
        let done = f(&mut body);
        *history = body.messages.into_iter().map(std::sync::Arc::unwrap_or_clone).collect();
        done
    }

    fn contents(messages: &[Message]) -> Vec<Value> {
        messages.iter().filter(|m| m.role == Role::Tool).map(|m| m.content.clone()).collect()
    }

    #[test]
    fn all_but_the_last_keep_results_are_cleared_and_excluded_tools_never() {
        let mut history = vec![
            user("go"),
            call("a", "read"),
            result("a", "A"),
            call("b", "memory"),
            result("b", "B"),
            call("c", "read"),
            result("c", "C"),
            call("d", "read"),
            result("d", "D"),
        ];
        let clear = ClearToolResults { keep: 1, exclude_tools: vec!["memory".into()], placeholder: None };
        assert_eq!(run(&mut history, |b| clear.apply(b)), 2);
        assert_eq!(contents(&history), [json!(PLACEHOLDER), json!("B"), json!(PLACEHOLDER), json!("D")]);
        assert!(history[2].images.is_none(), "a cleared result loses its images");
        assert!(history[8].images.is_some(), "a kept one keeps them");
        assert_eq!(run(&mut history, |b| clear.apply(b)), 0, "clearing twice clears nothing more");
    }

    #[test]
    fn keep_larger_than_the_calls_clears_nothing() {
        let mut history = vec![user("go"), call("a", "read"), result("a", "A")];
        let clear = ClearToolResults { keep: 3, exclude_tools: vec![], placeholder: Some("gone".into()) };
        assert_eq!(run(&mut history, |b| clear.apply(b)), 0);
        assert_eq!(contents(&history), [json!("A")]);
    }

    #[test]
    fn reasoning_of_the_current_turn_is_never_left_out() {
        let mut history = vec![user("a"), thinking("1"), user("b"), thinking("2"), call("x", "f"), result("x", "r")];
        // keep 0 would clear both, but the second is in the current turn.
        assert_eq!(run(&mut history, |b| ClearThinking { keep: 0 }.apply(b)), 1);
        assert!(!native::has_reasoning(history[1].native.as_deref().unwrap()));
        assert!(native::has_reasoning(history[3].native.as_deref().unwrap()));
        assert_eq!(history[1].native.as_ref().unwrap().body, json!([{"type": "text", "text": "1"}]));
    }

    #[test]
    fn the_last_keep_turns_with_reasoning_keep_it() {
        let mut history = vec![user("a"), thinking("1"), user("b"), thinking("2"), user("c"), thinking("3"), user("d")];
        assert_eq!(run(&mut history, |b| ClearThinking { keep: 2 }.apply(b)), 1);
        let kept: Vec<bool> = with_reasoning(&history, Format::AnthropicMessages).iter().map(|&i| i > 1).collect();
        assert_eq!(kept, [true, true]);
    }
}
