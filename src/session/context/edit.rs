//! Context editing on the way out (spec 17.3): older tool results sent as a placeholder,
//! older reasoning left out. Each works on the messages about to become a body; the
//! stored history never changes.

use std::collections::HashSet;

use serde::Deserialize;
use serde_json::Value;

use crate::session::export::{Format, calls, text_of};
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
    /// Clears what it should of `messages`; how many results it cleared.
    pub fn apply(&self, messages: &mut [Message]) -> usize {
        let excluded: HashSet<&str> = self.exclude_tools.iter().map(String::as_str).collect();
        let ids: Vec<String> = messages
            .iter()
            .filter(|m| m.role == Role::Assistant)
            .flat_map(calls)
            .filter(|c| !excluded.contains(c.name.as_str()))
            .map(|c| c.id)
            .collect();
        let keep = usize::try_from(self.keep).unwrap_or(usize::MAX).min(ids.len());
        let cleared: HashSet<&str> = ids[..ids.len() - keep].iter().map(String::as_str).collect();
        let placeholder = self.placeholder.as_deref().unwrap_or(PLACEHOLDER);
        let mut n = 0;
        for m in messages.iter_mut().filter(|m| m.role == Role::Tool) {
            if m.tool_call_id.as_deref().is_some_and(|id| cleared.contains(id)) && clear_result(m, placeholder) {
                n += 1;
            }
        }
        n
    }
}

/// Sends a tool result as `placeholder`, without images; `false` when it already was.
pub(crate) fn clear_result(m: &mut Message, placeholder: &str) -> bool {
    if m.content.as_str() == Some(placeholder) && m.images.is_none() {
        return false;
    }
    m.content = Value::String(placeholder.to_owned());
    m.images = None;
    true
}

/// The tokens clearing a tool result to `placeholder` saves (none when its text is no
/// longer than the placeholder's).
pub(crate) fn result_saving(m: &Message, placeholder: usize) -> usize {
    crate::session::tokens::count_text(&text_of(&m.content)).saturating_sub(placeholder)
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
    /// Leaves out what it should of the reasoning a body of `format` would carry; how
    /// many messages lost theirs.
    pub fn apply(&self, messages: &mut [Message], format: Format) -> usize {
        let current = current_turn(messages);
        let carrying = with_reasoning(messages, format);
        let keep = usize::try_from(self.keep).unwrap_or(usize::MAX).min(carrying.len());
        let mut n = 0;
        for &i in carrying[..carrying.len() - keep].iter().filter(|&&i| i < current) {
            if let Some(native) = messages[i].native.as_deref_mut()
                && native::strip_reasoning(native)
            {
                n += 1;
            }
        }
        n
    }
}

/// Where the current turn starts: right after the last user message (0 when there is
/// none: all of it is the current turn).
pub(crate) fn current_turn(messages: &[Message]) -> usize {
    messages.iter().rposition(|m| m.role == Role::User).map_or(0, |i| i + 1)
}

/// The indexes of the assistant messages whose reasoning a body of `format` carries
/// (their native body is of that format and holds some), in order.
pub(crate) fn with_reasoning(messages: &[Message], format: Format) -> Vec<usize> {
    let sent = |n: &native::Native| n.format == format && native::has_reasoning(n);
    let carries = |m: &Message| m.role == Role::Assistant && m.native.as_deref().is_some_and(sent);
    messages.iter().enumerate().filter(|(_, m)| carries(m)).map(|(i, _)| i).collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::session::export::Format;
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
        assert_eq!(clear.apply(&mut history), 2);
        assert_eq!(contents(&history), [json!(PLACEHOLDER), json!("B"), json!(PLACEHOLDER), json!("D")]);
        assert!(history[2].images.is_none(), "a cleared result loses its images");
        assert!(history[8].images.is_some(), "a kept one keeps them");
        assert_eq!(clear.apply(&mut history), 0, "clearing twice clears nothing more");
    }

    #[test]
    fn keep_larger_than_the_calls_clears_nothing() {
        let mut history = vec![user("go"), call("a", "read"), result("a", "A")];
        let clear = ClearToolResults { keep: 3, exclude_tools: vec![], placeholder: Some("gone".into()) };
        assert_eq!(clear.apply(&mut history), 0);
        assert_eq!(contents(&history), [json!("A")]);
    }

    #[test]
    fn reasoning_of_the_current_turn_is_never_left_out() {
        let mut history = vec![user("a"), thinking("1"), user("b"), thinking("2"), call("x", "f"), result("x", "r")];
        // keep 0 would clear both, but the second is in the current turn.
        assert_eq!(ClearThinking { keep: 0 }.apply(&mut history, Format::AnthropicMessages), 1);
        assert!(!native::has_reasoning(history[1].native.as_deref().unwrap()));
        assert!(native::has_reasoning(history[3].native.as_deref().unwrap()));
        assert_eq!(history[1].native.as_ref().unwrap().body, json!([{"type": "text", "text": "1"}]));
    }

    #[test]
    fn the_last_keep_turns_with_reasoning_keep_it() {
        let mut history = vec![user("a"), thinking("1"), user("b"), thinking("2"), user("c"), thinking("3"), user("d")];
        assert_eq!(ClearThinking { keep: 2 }.apply(&mut history, Format::AnthropicMessages), 1);
        let kept: Vec<bool> = with_reasoning(&history, Format::AnthropicMessages).iter().map(|&i| i > 1).collect();
        assert_eq!(kept, [true, true]);
    }
}
