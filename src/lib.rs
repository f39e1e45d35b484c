//! convo keeps LLM conversation state for the programs that spawn it, speaking JSON-RPC
//! 2.0 over stdio.
//!
//! - [`rpc`]: the wire — framing, classification, per-session ordering, the byte budget,
//!   lifecycle, cancellation, the server's own requests to the client (`rpc::peer`), and
//!   one table of methods, each a thin adapter from params to an [`ops`] call.
//! - [`ops`]: the use-cases — append, the history view, trim to fit, import and export,
//!   turns run through the host (the [`ops::Host`] trait, which `rpc` implements).
//! - [`session`]: the domain — messages, sessions, drafts, and the conversation rules
//!   (tool-call groups, "moving on cancels", repair, turns). Pure; no IO.
//! - [`store`]: the [`store::Store`] traits (one per concern) and their backends, which
//!   apply those rules atomically and keep the sessions; the two SQL backends share
//!   every algorithm (`store::sql`) and differ only in their statements.
//! - [`pool`]: bounded pools of blocking work.
//! - [`mint`]: where new ids and time stamps come from (the system, or counters for
//!   `--deterministic`).
//! - [`cli`]: the command line, which `src/main.rs` hands over to: flags, serving stdio,
//!   the subcommands. Here rather than in the binary so that it is compiled once, with
//!   the library, not again in each crate that links it.
//!
//! Dependencies point inward: `rpc → ops → {session, store}`, `store → session`; `ops`
//! is the only way into a store. README.md's layout section says where each kind of
//! change goes.

pub mod cli;
pub mod error;
pub mod mint;
pub mod ops;
pub mod pool;
pub mod rpc;
pub mod session;
pub mod store;

pub use error::{Error, Result};

/// A mutex's guard, even when a thread panicked while holding it: the pools catch panics,
/// and a lock poisoned by one must not stop the server.
pub(crate) fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
