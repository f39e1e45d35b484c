//! How PostgreSQL's failures become convo's: 1006 (`StorageUnavailable`), with the
//! server's own words when it gave any (and its SQLSTATE, in parentheses at the end, which
//! the writers read back: `refuses_writes`, `commit::lost_a_race`).

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

/// The SQLSTATEs that say this server will not take writes on this connection: a
/// read-only transaction, which is what a server in recovery (a standby) makes every
/// transaction (25006 `read_only_sql_transaction`), and a server shutting down or not
/// yet up (57P01 `admin_shutdown`, 57P02 `crash_shutdown`, 57P03 `cannot_connect_now`).
const REFUSING_WRITES: [&str; 4] = ["25006", "57P01", "57P02", "57P03"];

/// Whether `e` says that the server behind the connection will not take writes: that
/// connection is to be closed, never used again (`pool::Connections::discard`), so that
/// the next request connects anew, as the store's URL says (with several hosts and
/// `target_session_attrs=read-write`, to whichever accepts writes now).
pub fn refuses_writes(e: &Error) -> bool {
    matches!(e, Error::StorageUnavailable(m) if REFUSING_WRITES.iter().any(|code| m.ends_with(&format!("({code})"))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_only_transaction_and_a_shutdown_refuse_writes_and_a_full_disk_does_not() {
        let said = |m: &str| Error::StorageUnavailable(m.into());
        assert!(refuses_writes(&said("PostgreSQL: cannot execute INSERT in a read-only transaction (25006)")));
        assert!(refuses_writes(&said("PostgreSQL: terminating connection due to administrator command (57P01)")));
        assert!(!refuses_writes(&said("PostgreSQL: could not extend file: No space left on device (53100)")));
        assert!(!refuses_writes(&said("PostgreSQL: deadlock detected (40P01)")));
        assert!(!refuses_writes(&Error::Internal("(25006)".into())));
    }
}
