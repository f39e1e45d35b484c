//! A stream's draft: the user message and the assistant's answer so far, kept while the
//! host streams it. A draft is not part of the history; when its stream ends early (the
//! host failed, the client cancelled, the process died) it becomes messages: the user
//! message, and the partial answer when it holds text, marked `{"partial": true,
//! "reason": …}`.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::session::message::{Message, Role};

/// How long a draft's owner may go without refreshing it before any process on the
/// store takes it for crashed.
pub const STALE_AFTER_MS: i64 = 5_000;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Draft {
    pub stream_id: String,
    pub session_id: String,
    /// The process streaming it (`owner()`), which refreshes it while it lives.
    pub owner: String,
    /// When its owner last saved it, in milliseconds since the Unix epoch.
    pub refreshed_at: i64,
    /// The user message the stream answers (with the id it will be stored under).
    pub user: Message,
    /// The answer's text so far.
    pub text: String,
}

/// Why a draft became messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DraftEnd {
    Cancelled,
    Error,
    Crashed,
}

impl DraftEnd {
    pub fn as_str(self) -> &'static str {
        match self {
            DraftEnd::Cancelled => "cancelled",
            DraftEnd::Error => "error",
            DraftEnd::Crashed => "crashed",
        }
    }
}

/// What `session/history` shows of a draft with `include_draft: true`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DraftView {
    pub stream_id: String,
    pub messages: Vec<Message>,
}

impl Draft {
    /// The assistant's answer so far, as a message (not stored).
    fn partial(&self, metadata: Option<Map<String, Value>>) -> Message {
        Message { metadata, ..Message::new(Role::Assistant, Value::String(self.text.clone())) }
    }

    pub fn view(&self) -> DraftView {
        DraftView { stream_id: self.stream_id.clone(), messages: vec![self.user.clone(), self.partial(None)] }
    }

    /// The messages the draft is kept as when its stream ends early.
    pub fn into_messages(self, end: DraftEnd) -> Vec<Message> {
        let mut metadata = Map::new();
        metadata.insert("partial".into(), Value::Bool(true));
        metadata.insert("reason".into(), Value::String(end.as_str().into()));
        let partial = (!self.text.is_empty()).then(|| self.partial(Some(metadata)));
        std::iter::once(self.user).chain(partial).collect()
    }
}

/// This process, as the owner of the drafts it streams: its pid and a token of its own,
/// so a later process with the same pid is another owner.
pub fn owner() -> &'static str {
    static OWNER: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    OWNER.get_or_init(|| format!("{}:{}", std::process::id(), uuid::Uuid::now_v7()))
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn draft(text: &str) -> Draft {
        Draft {
            stream_id: "s".into(),
            session_id: "a".into(),
            owner: owner().into(),
            refreshed_at: now_ms(),
            user: Message::new(Role::User, Value::String("hi".into())),
            text: text.into(),
        }
    }

    #[test]
    fn a_draft_with_text_is_kept_as_the_user_message_and_a_marked_partial_answer() {
        let kept = draft("Hel").into_messages(DraftEnd::Cancelled);
        assert_eq!(kept.len(), 2);
        assert_eq!((kept[1].role, &kept[1].content), (Role::Assistant, &Value::String("Hel".into())));
        assert_eq!(kept[1].metadata.as_ref().unwrap()["reason"], "cancelled");
        assert_eq!(kept[1].metadata.as_ref().unwrap()["partial"], true);
    }

    #[test]
    fn a_draft_without_text_is_kept_as_the_user_message_alone() {
        let kept = draft("").into_messages(DraftEnd::Crashed);
        assert_eq!(kept.len(), 1);
        assert_eq!(kept[0].role, Role::User);
    }
}
