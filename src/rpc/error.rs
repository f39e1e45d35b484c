//! JSON-RPC error objects: the standard codes, and the one mapping from `crate::Error`
//! to a code and its `data`.

use jsonrpsee_types::ErrorObjectOwned;
use serde_json::json;

use crate::error::Error;

pub const PARSE_ERROR: i32 = -32700;
pub const INVALID_REQUEST: i32 = -32600;
pub const METHOD_NOT_FOUND: i32 = -32601;
pub const INVALID_PARAMS: i32 = -32602;
pub const INTERNAL_ERROR: i32 = -32603;

pub const SESSION_NOT_FOUND: i32 = 1001;
pub const SESSION_EXISTS: i32 = 1002;
pub const REVISION_CONFLICT: i32 = 1003;
pub const INVALID_SEQUENCE: i32 = 1004;
pub const TOO_LARGE: i32 = 1005;
pub const STORAGE_UNAVAILABLE: i32 = 1006;
pub const MESSAGE_NOT_FOUND: i32 = 1007;
pub const RUNTIME_FAILED: i32 = 1008;
pub const INVALID_OUTPUT: i32 = 1009;
pub const MESSAGE_EXISTS: i32 = 1010;
pub const REQUEST_CANCELLED: i32 = -32800;

pub fn plain(code: i32, message: impl Into<String>) -> ErrorObjectOwned {
    ErrorObjectOwned::owned(code, message, None::<()>)
}

impl From<Error> for ErrorObjectOwned {
    fn from(e: Error) -> Self {
        let message = e.to_string();
        let (code, data) = match e {
            Error::InvalidParams(_) => return plain(INVALID_PARAMS, message),
            Error::Internal(_) => return plain(INTERNAL_ERROR, message),
            Error::SessionNotFound(id) => (SESSION_NOT_FOUND, json!({"kind": "session_not_found", "session_id": id})),
            Error::SessionExists(id) => (SESSION_EXISTS, json!({"kind": "session_exists", "session_id": id})),
            Error::RevisionConflict { expected, current } => (
                REVISION_CONFLICT,
                json!({"kind": "revision_conflict", "current_revision": current, "expected_revision": expected}),
            ),
            Error::InvalidSequence { reason, tool_call_id, .. } => (
                INVALID_SEQUENCE,
                json!({"kind": "invalid_sequence", "reason": reason.as_str(), "tool_call_id": tool_call_id}),
            ),
            Error::TooLarge(_) => (TOO_LARGE, json!({"kind": "too_large"})),
            Error::BodyTooLarge { tokens, max_tokens } => {
                (TOO_LARGE, json!({"kind": "too_large", "tokens": tokens, "max_tokens": max_tokens}))
            }
            Error::StorageUnavailable(_) => (STORAGE_UNAVAILABLE, json!({"kind": "storage_unavailable"})),
            Error::MessageNotFound(id) => (MESSAGE_NOT_FOUND, json!({"kind": "message_not_found", "message_id": id})),
            Error::MessageExists { message_id, .. } => {
                (MESSAGE_EXISTS, json!({"kind": "message_exists", "message_id": message_id}))
            }
            Error::StaleAnswer { expected, current, response } => (
                REVISION_CONFLICT,
                json!({"kind": "revision_conflict", "current_revision": current, "expected_revision": expected,
                       "response": response}),
            ),
            Error::RuntimeFailed { reason, error, detail } => {
                let mut data = json!({"kind": "runtime_failed", "reason": reason.as_str(), "detail": detail});
                if let Some(error) = error {
                    data["error"] = error;
                }
                (RUNTIME_FAILED, data)
            }
            Error::InvalidOutput { errors, text } => {
                let errors: Vec<_> =
                    errors.into_iter().map(|(path, message)| json!({"path": path, "message": message})).collect();
                (INVALID_OUTPUT, json!({"kind": "invalid_output", "errors": errors, "text": text}))
            }
            Error::Cancelled { message_ids } => {
                (REQUEST_CANCELLED, json!({"kind": "request_cancelled", "message_ids": message_ids}))
            }
        };
        ErrorObjectOwned::owned(code, message, Some(data))
    }
}

/// The reply to a request whose reply would be over `--max-message-bytes`.
pub fn reply_too_large(max: usize) -> ErrorObjectOwned {
    let message = format!(
        "too large: the reply would be over the limit of {max} bytes; ask for less at once \
         (session/history takes offset and limit)"
    );
    ErrorObjectOwned::owned(TOO_LARGE, message, Some(json!({"kind": "too_large", "limit": max})))
}

/// The reply a batch gives instead of a read's, so that its replies together stay under
/// `--max-message-bytes`.
pub fn batch_too_large(max: usize) -> ErrorObjectOwned {
    let message = format!(
        "too large: the batch's replies together would be over the limit of {max} bytes; this one, among the \
         largest, was left out (send it again on its own)"
    );
    ErrorObjectOwned::owned(TOO_LARGE, message, Some(json!({"kind": "too_large", "limit": max})))
}

/// The reply to a frame over `--max-message-bytes`.
pub fn too_large(size: u64, max: usize) -> ErrorObjectOwned {
    let message = format!("too large: the frame has {size} bytes, the limit is {max}");
    ErrorObjectOwned::owned(TOO_LARGE, message, Some(json!({"kind": "too_large", "size": size, "limit": max})))
}
