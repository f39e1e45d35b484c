//! The conversation rules of spec section 3: tool-call groups, "moving on cancels",
//! repair of the trailing group, turns and trimming. Pure functions over messages.

use std::collections::HashSet;

use crate::error::{Error, Result, SequenceReason, quote};
use crate::session::message::{Message, Role};

/// The trailing tool-call group of a history: the calls of the last assistant message
/// with `tool_calls`, when nothing but tool results has followed it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tail {
    group: Option<Group>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Group {
    calls: Vec<String>,
    answered: HashSet<String>,
}

impl Tail {
    /// Reads the trailing group from a history given newest message first; it stops at
    /// the first message that is not a tool result.
    pub fn from_newest_first<'a>(newest_first: impl IntoIterator<Item = &'a Message>) -> Tail {
        let mut answered = HashSet::new();
        for message in newest_first {
            match message.role {
                Role::Tool => {
                    answered.extend(message.tool_call_id.clone());
                }
                _ if message.opens_group() => {
                    let calls = message.call_ids().map(str::to_owned).collect();
                    return Tail { group: Some(Group { calls, answered }) };
                }
                _ => break,
            }
        }
        Tail::default()
    }

    /// The calls of the trailing group that have no result yet, in call order.
    pub fn unanswered(&self) -> impl Iterator<Item = &str> {
        self.group.iter().flat_map(|g| g.calls.iter().filter(|c| !g.answered.contains(*c))).map(String::as_str)
    }

    /// The synthetic results a repaired view shows for the unanswered calls; not stored.
    pub fn repair_view(&self) -> Vec<Message> {
        self.unanswered().map(|c| Message::cancelled(c, None)).collect()
    }

    /// Whether a tool result for `tool_call_id` would be accepted now.
    pub fn check_result(&self, tool_call_id: &str) -> Result<()> {
        let reason = match &self.group {
            None => SequenceReason::NoPendingToolCalls,
            Some(g) if g.answered.contains(tool_call_id) => SequenceReason::Duplicate,
            Some(g) if !g.calls.iter().any(|c| c == tool_call_id) => SequenceReason::UnknownToolCall,
            Some(_) => return Ok(()),
        };
        let detail = match reason {
            SequenceReason::NoPendingToolCalls => {
                format!(
                    "no tool call is waiting for a result, so the result for {} is not accepted",
                    quote(tool_call_id)
                )
            }
            SequenceReason::Duplicate => format!("tool call {} already has a result", quote(tool_call_id)),
            SequenceReason::UnknownToolCall => {
                format!("the last tool-call group has no call with id {}", quote(tool_call_id))
            }
        };
        Err(Error::InvalidSequence { reason, tool_call_id: tool_call_id.to_owned(), detail })
    }

    /// Moves past `message`: a tool result must answer an open call of the trailing
    /// group (else the error says why); any other message closes the group, returning
    /// the calls it leaves unanswered, and opens the next when it calls tools.
    fn advance(&mut self, message: &Message) -> Result<Vec<String>> {
        if message.role == Role::Tool {
            let id = message.tool_call_id.as_deref().unwrap_or_default();
            self.check_result(id)?;
            if let Some(g) = &mut self.group {
                g.answered.insert(id.to_owned());
            }
            return Ok(Vec::new());
        }
        let unanswered = self.unanswered().map(str::to_owned).collect();
        self.group = message
            .opens_group()
            .then(|| Group { calls: message.call_ids().map(str::to_owned).collect(), answered: HashSet::new() });
        Ok(unanswered)
    }

    /// Moves past a message the rules already accepted (one `plan_append` returned), so
    /// that a store keeping the trailing group beside its history need not read it back.
    pub fn follow(&mut self, message: &Message) {
        // An accepted message is a result an open call waits for, or closes the group.
        let accepted = self.advance(message);
        debug_assert!(accepted.is_ok(), "followed a message the rules refuse: {accepted:?}");
    }

    /// Appends `message` to `out` under the rules: a tool result must answer an open call
    /// of the trailing group; any other message first stores a cancelled result for each
    /// unanswered call. Returns how many cancelled results it stored.
    pub fn push(&mut self, message: Message, out: &mut Vec<Message>) -> Result<usize> {
        let unanswered = self.advance(&message)?;
        out.extend(unanswered.iter().map(|c| Message::cancelled(c, Some(crate::session::new_message_id()))));
        out.push(message);
        Ok(unanswered.len())
    }
}

/// Reads a stored history, oldest message first, and says where it breaks what the
/// stores keep true: every message id once, every tool result answering an open call,
/// no call left without a result except in the trailing group (for `convo fsck`).
#[derive(Debug, Default)]
pub struct Audit {
    tail: Tail,
    ids: HashSet<String>,
    index: u64,
}

impl Audit {
    /// The next message; what is wrong with it, if anything.
    pub fn check(&mut self, message: &Message) -> Vec<String> {
        let index = self.index;
        self.index += 1;
        let mut found = Vec::new();
        if let Some(id) = &message.id
            && !self.ids.insert(id.clone())
        {
            found.push(format!("message {index}: the id {} appears twice", quote(id)));
        }
        match self.tail.advance(message) {
            Ok(left) if !left.is_empty() => {
                let left: Vec<String> = left.iter().map(|c| quote(c)).collect();
                found.push(format!("message {index}: the calls before it have no result: {}", left.join(", ")));
            }
            Ok(_) => {}
            Err(e) => found.push(format!("message {index}: {e}")),
        }
        if let Some(native) = &message.native {
            match crate::session::native::derive(native) {
                Ok(common) if common.agrees_with(&message.content, message.tool_calls.as_deref()) => {}
                Ok(_) => found.push(format!(
                    "message {index}: its content and tool_calls are not the common form of its native {} body",
                    native.format.name()
                )),
                Err(e) => found.push(format!("message {index}: its native body does not read: {e}")),
            }
        }
        found
    }
}

/// Runs `messages` through the rules after a history whose trailing group is `tail`;
/// all or nothing. Returns the messages to store (cancelled results included).
pub fn plan_append(mut tail: Tail, messages: Vec<Message>) -> Result<Vec<Message>> {
    // Most appends leave no call unanswered: their messages are returned as given, not
    // moved into a vector of their own.
    let mut cancels = Vec::new();
    for (i, message) in messages.iter().enumerate() {
        let unanswered = tail.advance(message)?;
        if !unanswered.is_empty() {
            cancels.push((i, unanswered));
        }
    }
    if cancels.is_empty() {
        return Ok(messages);
    }
    let mut out = Vec::with_capacity(messages.len() + cancels.iter().map(|(_, calls)| calls.len()).sum::<usize>());
    let mut cancels = cancels.into_iter().peekable();
    for (i, message) in messages.into_iter().enumerate() {
        if let Some((_, calls)) = cancels.next_if(|(at, _)| *at == i) {
            out.extend(calls.iter().map(|c| Message::cancelled(c, Some(crate::session::new_message_id()))));
        }
        out.push(message);
    }
    Ok(out)
}

/// What an import had to change: cancelled results added, orphan results dropped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Repaired {
    pub added: usize,
    pub dropped: usize,
}

/// Checks an imported history: a dangling call in the middle gets its cancelled
/// results; a result with no open call fails the import, or is dropped with `repair`.
pub fn plan_import(messages: Vec<Message>, repair: bool) -> Result<(Vec<Message>, Repaired)> {
    let mut ids = HashSet::with_capacity(messages.len());
    for m in &messages {
        if let Some(id) = &m.id
            && !ids.insert(id.as_str())
        {
            return Err(Error::invalid(format!("message id {} appears twice", quote(id))));
        }
    }
    let mut tail = Tail::default();
    let mut out = Vec::with_capacity(messages.len());
    let mut repaired = Repaired::default();
    for message in messages {
        match tail.push(message, &mut out) {
            Ok(added) => repaired.added += added,
            Err(Error::InvalidSequence { .. }) if repair => repaired.dropped += 1,
            Err(e) => return Err(e),
        }
    }
    Ok((out, repaired))
}

/// How many of the oldest messages `trim` with `max_turns` drops. A turn starts at a
/// `user` message; messages before the first one are the oldest turn. Reads the roles
/// newest first and only as far as the last `max_turns` turns reach.
pub fn turns_cut(len: usize, newest_first: impl IntoIterator<Item = Role>, max_turns: u64) -> usize {
    if max_turns == 0 {
        return len;
    }
    let mut users = 0;
    for (back, role) in newest_first.into_iter().enumerate() {
        if role == Role::User {
            users += 1;
            if users == max_turns {
                return len - 1 - back;
            }
        }
    }
    0
}

/// How many messages right after a rewind's target stay with it: the tool results that
/// directly follow it, so that a rewind into a tool-call group keeps the group whole.
pub fn rewind_keeps(after: impl IntoIterator<Item = Role>) -> usize {
    after.into_iter().take_while(|role| *role == Role::Tool).count()
}

/// The user message that stands for the `messages` compacted messages from `first` to
/// `last` (`session/compact`): the summary as its content, what it replaced in its
/// metadata.
pub fn compaction_message(summary: String, messages: u64, first: Option<String>, last: Option<String>) -> Message {
    let mut metadata = serde_json::Map::new();
    let replaced = serde_json::json!({"messages": messages, "first_message_id": first, "last_message_id": last});
    metadata.insert("compaction".into(), replaced);
    Message { metadata: Some(metadata), ..Message::new(Role::User, serde_json::Value::String(summary)) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn user(text: &str) -> Message {
        Message::new(Role::User, json!(text))
    }
    fn calls(ids: &[&str]) -> Message {
        let mut m = Message::new(Role::Assistant, Value::Null);
        m.tool_calls = Some(ids.iter().map(|id| json!({"id": id, "name": "f", "arguments": {}})).collect());
        m
    }
    fn result(id: &str) -> Message {
        let mut m = Message::new(Role::Tool, json!("ok"));
        m.tool_call_id = Some(id.into());
        m
    }
    fn tail_of(history: &[Message]) -> Tail {
        Tail::from_newest_first(history.iter().rev())
    }
    fn reason(e: Error) -> SequenceReason {
        match e {
            Error::InvalidSequence { reason, .. } => reason,
            other => panic!("expected a sequence error, got {other:?}"),
        }
    }

    #[test]
    fn an_audit_finds_what_the_rules_never_store() {
        let audit = |history: &[Message]| {
            let mut audit = Audit::default();
            history.iter().flat_map(|m| audit.check(m)).collect::<Vec<_>>()
        };
        let sound = [user("go"), calls(&["a", "b"]), result("b"), result("a"), user("more"), calls(&["c"])];
        assert!(audit(&sound).is_empty(), "a trailing call may still be running");
        let dangling = [user("go"), calls(&["a", "b"]), result("b"), user("on")];
        assert_eq!(audit(&dangling), [r#"message 3: the calls before it have no result: "a""#]);
        let orphan = [user("go"), result("x")];
        assert_eq!(audit(&orphan).len(), 1);
        assert!(audit(&orphan)[0].starts_with("message 1: invalid sequence: no tool call is waiting"));
        let mut twice = user("again");
        twice.id = sound[0].id.clone();
        assert_eq!(audit(&[sound[0].clone(), twice]).len(), 1);
    }

    #[test]
    fn parallel_calls_answered_out_of_order() {
        let history = vec![user("go"), calls(&["a", "b", "c"]), result("c")];
        let tail = tail_of(&history);
        assert_eq!(tail.unanswered().collect::<Vec<_>>(), ["a", "b"]);
        let out = plan_append(tail, vec![result("a"), result("b")]).unwrap();
        assert_eq!(out.len(), 2);
        let view = tail_of(&[history, out].concat()).repair_view();
        assert!(view.is_empty());
    }

    #[test]
    fn results_that_are_not_accepted() {
        let history = vec![user("go"), calls(&["a"]), result("a")];
        assert_eq!(reason(tail_of(&history).check_result("a").unwrap_err()), SequenceReason::Duplicate);
        assert_eq!(reason(tail_of(&history).check_result("z").unwrap_err()), SequenceReason::UnknownToolCall);
        assert_eq!(reason(tail_of(&[user("x")]).check_result("a").unwrap_err()), SequenceReason::NoPendingToolCalls);
        // all or nothing: the good first result is not kept either
        let tail = tail_of(&[user("go"), calls(&["a", "b"])]);
        assert!(plan_append(tail, vec![result("a"), result("a")]).is_err());
    }

    #[test]
    fn moving_on_cancels_then_rejects_late_result() {
        let tail = tail_of(&[user("go"), calls(&["a", "b"]), result("b")]);
        let out = plan_append(tail, vec![user("next")]).unwrap();
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].tool_call_id.as_deref(), Some("a"));
        assert_eq!(out[0].metadata.as_ref().unwrap()["synthetic"], json!(true));
        assert!(out[0].id.is_some());
        let history = [vec![user("go"), calls(&["a", "b"]), result("b")], out].concat();
        assert_eq!(reason(tail_of(&history).check_result("a").unwrap_err()), SequenceReason::NoPendingToolCalls);
    }

    /// Cancelled results go before the message that closes their group, wherever it is
    /// in the append; an append that leaves nothing unanswered is kept as given.
    #[test]
    fn cancels_go_where_their_group_closes() {
        let tail = tail_of(&[user("go")]);
        let given = vec![calls(&["a", "b"]), result("b"), user("next"), calls(&["c"]), user("last")];
        let out = plan_append(tail.clone(), given.clone()).unwrap();
        let roles_and_calls: Vec<_> = out.iter().map(|m| (m.role, m.tool_call_id.as_deref())).collect();
        assert_eq!(
            roles_and_calls,
            [
                (Role::Assistant, None),
                (Role::Tool, Some("b")),
                (Role::Tool, Some("a")),
                (Role::User, None),
                (Role::Assistant, None),
                (Role::Tool, Some("c")),
                (Role::User, None),
            ]
        );
        assert!(out[2].id.is_some() && out[5].id.is_some() && out[2].id != out[5].id);
        assert_eq!(out[3].content, given[2].content);
        assert_eq!(out[6].content, given[4].content);

        let answered = vec![calls(&["a"]), result("a"), user("next")];
        assert_eq!(plan_append(tail, answered.clone()).unwrap(), answered);
    }

    #[test]
    fn import_repairs_middle_and_orphans() {
        let msgs = vec![result("orphan"), user("go"), calls(&["a"]), user("again")];
        assert!(plan_import(msgs.clone(), false).is_err());
        let (out, repaired) = plan_import(msgs, true).unwrap();
        assert_eq!(repaired, Repaired { added: 1, dropped: 1 });
        assert_eq!(
            out.iter().map(|m| m.role).collect::<Vec<_>>(),
            [Role::User, Role::Assistant, Role::Tool, Role::User]
        );
    }

    #[test]
    fn turns() {
        let h = [Message::new(Role::System, json!("s")), user("1"), calls(&["a"]), result("a"), user("2"), user("3")];
        let cut = |n| turns_cut(h.len(), h.iter().rev().map(|m| m.role), n);
        assert_eq!(cut(0), 6);
        assert_eq!(cut(1), 5);
        assert_eq!(cut(2), 4);
        assert_eq!(cut(3), 1);
        assert_eq!(cut(4), 0, "the leading system message is the oldest turn");
        assert_eq!(cut(9), 0);
        assert_eq!(turns_cut(0, [], 0), 0);
    }
}
