//! The crate's one error type: what parameter checking, the conversation rules and the
//! stores can report. `rpc::error` maps each variant to its JSON-RPC code, in one place.

/// Why a tool result was not accepted (spec section 3), carried as `data.reason`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SequenceReason {
    /// The trailing group already holds a result for this call.
    Duplicate,
    /// The trailing group has no call with this id.
    UnknownToolCall,
    /// No tool-call group is open: the conversation moved on, or never called a tool.
    NoPendingToolCalls,
}

impl SequenceReason {
    pub fn as_str(self) -> &'static str {
        match self {
            SequenceReason::Duplicate => "duplicate_result",
            SequenceReason::UnknownToolCall => "unknown_tool_call_id",
            SequenceReason::NoPendingToolCalls => "no_pending_tool_calls",
        }
    }
}

#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Parameters of the wrong shape or value.
    #[error("invalid params: {0}")]
    InvalidParams(String),
    /// No session has this id.
    #[error("session not found: {0}")]
    SessionNotFound(String),
    /// A session with this id exists already.
    #[error("session already exists: {0}")]
    SessionExists(String),
    /// `expected_revision` differs from the stored revision; nothing was changed.
    #[error("revision conflict: expected {expected}, current {current}")]
    RevisionConflict { expected: u64, current: u64 },
    /// A tool result the conversation rules do not accept; nothing was stored.
    #[error("invalid sequence: {detail}")]
    InvalidSequence { reason: SequenceReason, tool_call_id: String, detail: String },
    /// A frame or message over the configured limits.
    #[error("too large: {0}")]
    TooLarge(String),
    /// `fit`: the smallest body convo may make is still over the budget; nothing was
    /// exported.
    #[error("too large: the body needs {tokens} tokens at the least, over max_tokens {max_tokens}")]
    BodyTooLarge { tokens: usize, max_tokens: u64 },
    /// The store failed; the request did not take effect.
    #[error("storage unavailable: {0}")]
    StorageUnavailable(String),
    /// `at_message_id` names no message of the session.
    #[error("message not found: {}", quote(.0))]
    MessageNotFound(String),
    /// The session changed while the host answered; its answer (`response`) was not
    /// stored.
    #[error(
        "revision conflict: the session changed while the host answered (revision {expected}, now {current}); nothing was stored"
    )]
    StaleAnswer { expected: u64, current: u64, response: serde_json::Value },
    /// The host's runtime failed, timed out, is absent or answered nonsense.
    #[error("runtime failed: {detail}")]
    RuntimeFailed { reason: RuntimeReason, error: Option<serde_json::Value>, detail: String },
    /// `session/json`: the answer is not JSON or breaks the schema.
    #[error("invalid output: the answer does not match the schema ({} error(s))", .errors.len())]
    InvalidOutput { errors: Vec<(String, String)>, text: String },
    /// `$/cancelRequest` ended the request; `message_ids` are what a stream kept.
    #[error("request cancelled")]
    Cancelled { message_ids: Vec<String> },
    /// A `message_id` given to an append is already used in the session by a different
    /// message, or a retried batch matches only in part; nothing was stored.
    #[error("message exists: message_id {} {detail}", quote(.message_id))]
    MessageExists { message_id: String, detail: &'static str },
    /// A bug: an invariant did not hold.
    #[error("internal error: {0}")]
    Internal(String),
}

/// Why the host's runtime failed, carried as `data.reason` of error 1008.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuntimeReason {
    Error,
    NoRuntime,
    Timeout,
    Disconnected,
    InvalidResponse,
}

impl RuntimeReason {
    pub fn as_str(self) -> &'static str {
        match self {
            RuntimeReason::Error => "error",
            RuntimeReason::NoRuntime => "no_runtime",
            RuntimeReason::Timeout => "timeout",
            RuntimeReason::Disconnected => "disconnected",
            RuntimeReason::InvalidResponse => "invalid_response",
        }
    }
}

impl Error {
    pub fn invalid(detail: impl std::fmt::Display) -> Self {
        Error::InvalidParams(detail.to_string())
    }

    pub fn message_exists(message_id: String, detail: &'static str) -> Self {
        Error::MessageExists { message_id, detail }
    }

    /// Names the member an invalid-params error is about (`messages[2]: …`).
    pub fn within(self, path: &str) -> Self {
        match self {
            Error::InvalidParams(why) => Error::InvalidParams(format!("{path}: {why}")),
            other => other,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A client's string as an error message shows it: quoted as JSON, so that any character
/// shows as itself and only control characters, `"` and `\` are escaped, and cut after
/// 128 characters (`…` after the closing quote says so).
pub fn quote(s: &str) -> String {
    const MAX: usize = 128;
    let (shown, cut) = match s.char_indices().nth(MAX) {
        Some((end, _)) => (&s[..end], "…"),
        None => (s, ""),
    };
    // Serializing a `str` cannot fail.
    let quoted = serde_json::to_string(shown).unwrap_or_default();
    format!("{quoted}{cut}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quote_shows_characters_as_json_does() {
        let cases = [
            ("plain", r#""plain""#.to_owned()),
            ("e\u{301} \u{1F600}", "\"e\u{301} \u{1F600}\"".to_owned()),
            ("tab\tbell\u{7}\"\\", r#""tab\tbell\u0007\"\\""#.to_owned()),
            (&"é".repeat(200), format!("\"{}\"…", "é".repeat(128))),
        ];
        for (given, want) in cases {
            assert_eq!(quote(given), want, "{given}");
        }
    }
}
