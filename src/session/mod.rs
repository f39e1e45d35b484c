//! The domain: messages, sessions and the conversation rules. Pure and synchronous; it
//! knows nothing of JSON-RPC or of how sessions are stored.

pub mod context;
mod draft;
pub mod empty_table;
pub mod export;
pub mod image;
pub mod import;
mod info;
pub mod json;
mod message;
pub mod native;
mod rules;
pub mod search;
mod stamp;
pub mod tokens;

pub use draft::{Draft, DraftEnd, DraftView, STALE_AFTER_MS, now_ms, owner};
pub use info::{
    Fields, ForkPoint, Import, ListKey, Patch, SessionId, SessionInfo, check_revision, check_session_id, new_session_id,
};
pub use message::{
    CANCELLED_CONTENT, Identity, Message, MessageInput, Role, call_id, check_content, client_message_id,
    new_message_id, role_name,
};
pub use rules::{Audit, Repaired, Tail, compaction_message, plan_append, plan_import, rewind_keeps, turns_cut};
pub use stamp::{at_micros, canonical, micros_of, now, param as stamp_param, push_at_micros};
