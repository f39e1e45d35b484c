//! How SQLite's failures become convo's: every one is 1006 (`StorageUnavailable`), the
//! request not applied.

use std::path::Path;

use crate::error::Error;

/// A failure while opening `path`, named in the message.
pub fn cannot_open(path: &Path, e: impl std::fmt::Display) -> Error {
    unavailable(format!("cannot open {}: {e}", path.display()))
}

pub fn unavailable(message: String) -> Error {
    Error::StorageUnavailable(message)
}

/// A failure of SQLite itself: the request did not take effect.
pub fn sql(e: rusqlite::Error) -> Error {
    Error::StorageUnavailable(e.to_string())
}
