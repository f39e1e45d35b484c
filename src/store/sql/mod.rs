//! What the two SQL backends (`store::sqlite`, `store::postgres`) share: the data model
//! and every algorithm over it, written once.
//!
//! Both keep a session as a row (`SessionRow`: what clients see, and where its history
//! lives) and its history as a chain of segments of message rows (`chain`); both apply
//! each mutation as one transaction body (`edits`) and check their own tables the same
//! way (`check`). A backend provides the statements, through `Tx`: one value per
//! transaction, whose methods each run one small query. It never decides what to cut,
//! copy, archive or reclaim; `edits` and `chain` do, so a fix made here reaches both.
//!
//! SQLite runs a transaction body on its writer thread with `run_now` (its `Tx` never
//! waits, so the body completes in one poll); PostgreSQL awaits it on its connection.
//!
//! Order of reading: `rows` (the row types), `tx` (what a backend provides), `chain`
//! (positions and segments), `edits` (the mutations), `check` (fsck), `jobs` (mutations
//! and reads as values a backend runs), `store` (the `Store` traits over an `Engine`).

pub mod chain;
pub mod check;
pub mod edits;
pub mod jobs;
pub mod rows;
mod store;
pub mod tx;

pub use rows::{Hit, Listing, Place, Searching, SessionRow, Span, page_of_hits, parse_role};
pub use store::{Engine, SqlStore};
pub use tx::{Tx, run_now};
