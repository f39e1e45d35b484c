//! The use-cases, between the wire and the stores (`rpc → ops → {session, store}`):
//! appending, the repaired history view, trimming to fit, import and export, and turns
//! run through the host. Each takes and returns domain values and applies the rules of
//! `session` through a `Store`; none knows JSON-RPC. The host (the program that owns the
//! model) is seen as the `Host` trait, which `rpc` implements over the connection. Uses
//! of the whole store (every session, retention, the consistency check) serve the
//! command line.

mod compact;
mod dict;
mod host;
mod images;
mod messages;
mod provider;
mod runtime;
mod search;
mod sessions;

use std::sync::{Arc, Mutex, PoisonError};

use tokio_util::sync::CancellationToken;

use crate::error::{Error, Result};
use crate::store::Store;

pub use compact::Summary;
pub use dict::{DictData, Imported, SessionDict};
pub use host::{Failure, Host, RuntimeParams};
pub use images::{ImageData, refs_in_messages, refs_in_payload};
pub use messages::{Added, History, Trimmed};
pub use provider::{Exported, TrimmedToFit};
pub use runtime::{JsonAnswer, RunAnswer, Turn, sweep_crashed_drafts};
pub use search::{Hit, Hits};

/// The most messages one request may carry (`add_messages`, `from_dict`) and the most
/// one reply may hold (`history`, `to_dict`): beyond them, error 1005.
pub const MAX_MESSAGES: u64 = 100_000;

fn check_count(what: &str, n: usize) -> Result<()> {
    if n as u64 > MAX_MESSAGES {
        return Err(Error::TooLarge(format!("{what} holds {n} messages; the limit is {MAX_MESSAGES}")));
    }
    Ok(())
}

/// The use-cases of one connection: its store and its host.
pub struct Ops {
    pub store: Arc<dyn Store>,
    pub host: Arc<dyn Host>,
}

/// What a request carries into the operation it runs: the token `$/cancelRequest`
/// fires, and the release of its place in its session's order, for operations that
/// must not hold the session while they wait (a turn waiting for the host).
#[derive(Default)]
pub struct Call {
    pub cancel: CancellationToken,
    release: Mutex<Option<Box<dyn FnOnce() + Send>>>,
}

impl Call {
    pub fn new(cancel: CancellationToken, release: Box<dyn FnOnce() + Send>) -> Self {
        Call { cancel, release: Mutex::new(Some(release)) }
    }

    /// Lets later requests on the same session run now.
    pub fn release(&self) {
        let release = self.release.lock().unwrap_or_else(PoisonError::into_inner).take();
        if let Some(release) = release {
            release();
        }
    }
}
