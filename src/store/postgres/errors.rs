//! How PostgreSQL's failures become convo's: 1006 (`StorageUnavailable`), with the
//! server's own words when it gave any.

use crate::error::Error;

/// A failure of PostgreSQL or of the connection to it: the request did not take effect.
pub fn pg(e: tokio_postgres::Error) -> Error {
    Error::StorageUnavailable(describe(&e))
}

/// The error's text, with the server's message when there is one.
pub fn describe(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("PostgreSQL: {} ({})", db.message(), db.code().code()),
        None if e.is_closed() => "the connection to PostgreSQL was lost".into(),
        None => {
            // tokio-postgres says what failed; the cause (refused, TLS, …) is its source.
            let mut text = format!("PostgreSQL: {e}");
            let mut source = std::error::Error::source(e);
            while let Some(cause) = source {
                text.push_str(&format!(": {cause}"));
                source = cause.source();
            }
            text
        }
    }
}
