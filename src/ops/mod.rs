//! The use-cases, between the wire and the stores (`rpc → ops → {session, store}`), and
//! the only way into a store: every method of the server and every command of the
//! command line calls one of them. Each takes and returns domain values and applies the
//! rules of `session` through a `Store`; none knows JSON-RPC. Paging, cursors, the
//! "exactly one of" rules, image refs and provider bodies are resolved here; every limit
//! and default is in `limits`. The host (the program that owns the model) is seen as
//! the `Host` trait, which `rpc` implements over the connection.
//!
//! One file per group: `sessions` (create, list, fork, …), `messages` (the one append
//! path of every add_*, the history view, trim, rewind), `compact`, `search`, `images`,
//! `dict` (to_dict/from_dict), `provider` (export, validate, tokens), `runtime` (turns
//! through the host), `maintenance` (the whole store, for the command line). A new
//! use-case is a method on `Ops` in its group's file.

mod compact;
mod dict;
mod host;
mod images;
pub mod limits;
mod maintenance;
mod messages;
mod provider;
mod responses;
mod runtime;
mod search;
mod sessions;

use std::sync::{Arc, Mutex, OnceLock};

use tokio_util::sync::CancellationToken;

use crate::lock;
use crate::session::context::Pieces;
use crate::store::Store;

pub use compact::Compaction;
pub use dict::DictSource;
pub use dict::{DictData, Imported, SessionDict};
pub use host::{Failure, Host, RuntimeParams};
pub use images::{ImageData, refs_in_messages, refs_in_payload};
pub use messages::{Added, History, Trimmed};
pub use provider::{Counted, Exported, TrimmedToFit};
pub use responses::AddedResponse;
pub use runtime::{JsonResult, RunResult, Turn};
pub use search::{Hit, SearchPage};
pub use sessions::{DeletedMany, SessionPage};

/// The use-cases of one connection (or one command): its store, reached only through
/// them, and its host.
#[derive(Clone)]
pub struct Ops {
    store: Arc<dyn Store>,
    host: Arc<dyn Host>,
    /// Each message's tokens once counted, for count_tokens, fit and clearing.
    pieces: Arc<Pieces>,
}

impl Ops {
    pub fn new(store: Arc<dyn Store>, host: Arc<dyn Host>) -> Self {
        Ops { store, host, pieces: Arc::default() }
    }

    /// Whether an append says when its write is queued (`store::queued`).
    pub fn appends_signal_queued(&self) -> bool {
        self.store.signals_queued()
    }
}

/// What a request carries into the operation it runs: the token `$/cancelRequest`
/// fires, and the release of its place in its session's order, for operations that
/// must not hold the session while they wait (a turn waiting for the host).
#[derive(Default)]
pub struct Call {
    cancel: OnceLock<CancellationToken>,
    release: Mutex<Option<Box<dyn FnOnce() + Send>>>,
}

impl Call {
    /// A call that `cancel` ends, or (`None`) whose token is made when first asked for:
    /// most calls end before anything could cancel them.
    pub fn new(cancel: Option<CancellationToken>, release: Box<dyn FnOnce() + Send>) -> Self {
        Call { cancel: cancel.map(OnceLock::from).unwrap_or_default(), release: Mutex::new(Some(release)) }
    }

    /// What `$/cancelRequest` for this call cancels.
    pub fn cancel(&self) -> &CancellationToken {
        self.cancel.get_or_init(CancellationToken::new)
    }

    /// Whether its token was made and cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.cancel.get().is_some_and(CancellationToken::is_cancelled)
    }

    /// Lets later requests on the same session run now.
    pub fn release(&self) {
        let release = lock(&self.release).take();
        if let Some(release) = release {
            release();
        }
    }
}
