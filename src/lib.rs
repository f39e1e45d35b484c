//! convo keeps LLM conversation state for the programs that spawn it, speaking JSON-RPC
//! 2.0 over stdio.
//!
//! - [`session`]: the domain — messages, sessions, and the conversation rules (tool-call
//!   groups, "moving on cancels", repair, turns). Pure; no IO.
//! - [`store`]: the [`store::Store`] trait and its backends, which apply those rules
//!   atomically and keep the sessions.
//! - [`rpc`]: the wire — framing, classification, per-session ordering, lifecycle, and
//!   the methods registered in jsonrpsee's `RpcModule`.
//!
//! Dependencies point inward: `rpc → session ← store`.

pub mod error;
pub mod pool;
pub mod rpc;
pub mod session;
pub mod store;

pub use error::{Error, Result};
