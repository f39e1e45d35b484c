//! Connecting to a database file that `file::claim` made ready: open flags, connection
//! settings, and the schema's ordered migrations. A database written by a newer convo
//! is refused, never modified.

use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, TransactionBehavior};

use crate::error::Result;
use crate::store::sqlite::errors::{cannot_open, unavailable};
use crate::store::sqlite::{rows, words};

/// Migration `i` takes the schema from version `i` to `i + 1` (`PRAGMA user_version`).
const MIGRATIONS: &[&str] = &[
    // 1: sessions over chains of message segments, images by content hash.
    r#"
    CREATE TABLE segments (
        id      INTEGER PRIMARY KEY,
        -- The segment holding the positions below `base`, if any.
        parent  INTEGER REFERENCES segments(id),
        base    INTEGER NOT NULL
    );
    CREATE INDEX segments_by_parent ON segments(parent) WHERE parent IS NOT NULL;

    CREATE TABLE sessions (
        session_id   TEXT PRIMARY KEY,
        system       TEXT,
        cwd          TEXT,
        title        TEXT,
        metadata     TEXT,
        revision     INTEGER NOT NULL,
        created_at   TEXT NOT NULL,
        updated_at   TEXT NOT NULL,
        forked_from_session TEXT,
        forked_from_message TEXT,
        -- The history: positions [start, len) of the chain that ends in `segment`.
        segment      INTEGER NOT NULL REFERENCES segments(id),
        start        INTEGER NOT NULL,
        len          INTEGER NOT NULL
    ) WITHOUT ROWID;
    CREATE INDEX sessions_by_update ON sessions(updated_at DESC, session_id DESC);
    CREATE INDEX sessions_by_segment ON sessions(segment);

    CREATE TABLE messages (
        segment      INTEGER NOT NULL REFERENCES segments(id),
        seq          INTEGER NOT NULL,
        id           TEXT NOT NULL,
        role         TEXT NOT NULL,
        content      TEXT NOT NULL,
        name         TEXT,
        tool_call_id TEXT,
        tool_calls   TEXT,
        images       TEXT,
        metadata     TEXT,
        created_at   TEXT NOT NULL,
        PRIMARY KEY (segment, seq)
    ) WITHOUT ROWID;
    CREATE INDEX messages_by_id ON messages(id);

    CREATE TABLE blobs (
        hash  TEXT PRIMARY KEY,
        data  TEXT NOT NULL,
        refs  INTEGER NOT NULL
    ) WITHOUT ROWID;
    "#,
    // 2: `session/list` walks sessions by creation, which never changes.
    r#"
    CREATE INDEX sessions_by_creation ON sessions(created_at DESC, session_id DESC);
    "#,
    // 3: drafts of streams in progress, refreshed by the process that owns them.
    r#"
    CREATE TABLE drafts (
        stream_id    TEXT PRIMARY KEY,
        session_id   TEXT NOT NULL,
        owner        TEXT NOT NULL,
        refreshed_at INTEGER NOT NULL,
        user_message TEXT NOT NULL,
        text         TEXT NOT NULL
    ) WITHOUT ROWID;
    CREATE INDEX drafts_by_session ON drafts(session_id, refreshed_at);
    CREATE INDEX drafts_by_refresh ON drafts(refreshed_at);
    "#,
    // 4: the change log, read by every process's watchers.
    r#"
    CREATE TABLE changes (
        seq           INTEGER PRIMARY KEY AUTOINCREMENT,
        session_id    TEXT NOT NULL,
        revision      INTEGER NOT NULL,
        kind          TEXT NOT NULL,
        message_count INTEGER NOT NULL
    );
    "#,
    // 5: images by reference: each image's `sha256:` ref of its decoded bytes, its media
    // type and size (filled for the images already stored by `describe_old_images`).
    r#"
    ALTER TABLE blobs ADD COLUMN ref TEXT;
    ALTER TABLE blobs ADD COLUMN media_type TEXT;
    ALTER TABLE blobs ADD COLUMN bytes INTEGER;
    CREATE INDEX blobs_by_ref ON blobs(ref);
    "#,
    // 6: full-text search: each message row's words, by rowid `segment << 32 | seq`
    // (`search`; filled for the messages already stored by `index_old_messages`).
    r#"
    CREATE VIRTUAL TABLE message_words USING fts5(
        words, content = '', contentless_delete = 1, tokenize = 'unicode61 remove_diacritics 0'
    );
    "#,
    // 7: reasoning models: an assistant turn in its provider's own form and what it cost
    // (JSON text, null where unset), and what each session's responses have cost.
    r#"
    ALTER TABLE messages ADD COLUMN native TEXT;
    ALTER TABLE messages ADD COLUMN usage TEXT;
    ALTER TABLE sessions ADD COLUMN usage TEXT;
    "#,
    // 8: exactly-once appends: the session each segment was made for, and the revision
    // the change that stored each message made (null in rows older than this).
    r#"
    ALTER TABLE segments ADD COLUMN owner TEXT;
    ALTER TABLE messages ADD COLUMN revision INTEGER;
    "#,
    // 9: message rows keyed by their place, `segment << 32 | seq` (`rows::place`): a
    // rowid table reads a history in order from the table itself, and keeps a row of up
    // to about 4 KB in its page, where the index of a `WITHOUT ROWID` table kept at most
    // about 1 KB and put the rest of a 1 KB message in an overflow page.
    r#"
    CREATE TABLE messages_by_place (
        place        INTEGER PRIMARY KEY,
        id           TEXT NOT NULL,
        role         TEXT NOT NULL,
        content      TEXT NOT NULL,
        name         TEXT,
        tool_call_id TEXT,
        tool_calls   TEXT,
        images       TEXT,
        metadata     TEXT,
        created_at   TEXT NOT NULL,
        native       TEXT,
        usage        TEXT,
        revision     INTEGER,
        segment      INTEGER GENERATED ALWAYS AS (place >> 32) VIRTUAL,
        seq          INTEGER GENERATED ALWAYS AS (place & 4294967295) VIRTUAL
    );
    INSERT INTO messages_by_place
        (place, id, role, content, name, tool_call_id, tool_calls, images, metadata, created_at, native, usage,
         revision)
        SELECT segment << 32 | seq, id, role, content, name, tool_call_id, tool_calls, images, metadata, created_at,
               native, usage, revision
        FROM messages ORDER BY segment, seq;
    DROP TABLE messages;
    ALTER TABLE messages_by_place RENAME TO messages;
    CREATE INDEX messages_by_id ON messages(id);
    "#,
    // 10: the change log keeps each session's last change for thirty days
    // (`changes::prune`): when each row was written (unix seconds; the rows already
    // there take the migration's time), and each session's rows in order (an index
    // entry ends with its row's `seq`, the rowid).
    r#"
    ALTER TABLE changes ADD COLUMN at INTEGER NOT NULL DEFAULT 0;
    UPDATE changes SET at = unixepoch();
    CREATE INDEX changes_by_session ON changes(session_id);
    "#,
];

pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// How the database file is opened and how its connections behave.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    /// An fsync per commit (`--durability full`).
    pub full_durability: bool,
    /// How long a connection waits for another process's write lock.
    pub busy_timeout: Duration,
    /// Open the database through a symbolic link (`--follow-symlinks`).
    pub follow_symlinks: bool,
}

/// The flags of every connection: never `SQLITE_OPEN_CREATE` (the file exists already)
/// nor `SQLITE_OPEN_URI` (the path is a file name), and no symbolic link unless asked.
fn flags(access: OpenFlags, settings: Settings) -> OpenFlags {
    let flags = access | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    if settings.follow_symlinks { flags } else { flags | OpenFlags::SQLITE_OPEN_NOFOLLOW }
}

/// The connection that writes: WAL, the durability asked for, and the schema brought
/// up to date.
pub fn open_writer(path: &Path, settings: Settings) -> Result<Connection> {
    let mut conn = Connection::open_with_flags(path, flags(OpenFlags::SQLITE_OPEN_READ_WRITE, settings))
        .map_err(|e| cannot_open(path, e))?;
    conn.busy_timeout(settings.busy_timeout).map_err(|e| cannot_open(path, e))?;
    // Check before anything can write: a newer or foreign database stays untouched. One
    // statement, so another process migrating meanwhile is seen whole or not at all.
    let (version, tables) = retry_busy(settings, || version_and_tables(&conn))
        .map_err(|e| unavailable(format!("{} is not a usable database: {e}", path.display())))?;
    refuse_newer(version, path)?;
    refuse_foreign(version, tables, path)?;
    let mode: String =
        retry_busy(settings, || conn.pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0)))
            .map_err(|e| cannot_open(path, e))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(unavailable(format!("{} cannot use WAL mode (got {mode})", path.display())));
    }
    let sync = if settings.full_durability { "FULL" } else { "NORMAL" };
    conn.pragma_update(None, "synchronous", sync).map_err(|e| cannot_open(path, e))?;
    words::prepare_writer(&conn).map_err(|e| cannot_open(path, e))?;
    migrate(&mut conn, path)?;
    Ok(conn)
}

/// Retries what another process's start-up (a journal mode switch, a migration) may
/// briefly lock out, for as long as the busy timeout allows.
fn retry_busy<T>(settings: Settings, mut op: impl FnMut() -> rusqlite::Result<T>) -> rusqlite::Result<T> {
    let deadline = std::time::Instant::now() + settings.busy_timeout;
    loop {
        match op() {
            Err(rusqlite::Error::SqliteFailure(e, _))
                if matches!(e.code, rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
                    && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(5));
            }
            other => return other,
        }
    }
}

fn refuse_newer(version: i64, path: &Path) -> Result<()> {
    if version > SCHEMA_VERSION {
        return Err(unavailable(format!(
            "{} was written by a newer convo (schema version {version}; this one knows up to {SCHEMA_VERSION}); \
             it was not modified",
            path.display()
        )));
    }
    Ok(())
}

/// How the readers open the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Beside this process's writer (and other processes'): WAL, shared memory, locks.
    Shared,
    /// A database this process cannot write, with a write-ahead log to read: read-only,
    /// through the `-shm` as it is (SQLite reads a log it may not write to itself).
    ReadOnly,
    /// A database this process cannot write, with no log to read: SQLite's `immutable`,
    /// no locks and no shared memory (which could not be made beside it).
    Immutable,
}

/// A connection that only reads.
pub fn open_reader(path: &Path, settings: Settings, mode: Mode) -> Result<Connection> {
    let conn = match mode {
        Mode::Shared | Mode::ReadOnly => {
            Connection::open_with_flags(path, flags(OpenFlags::SQLITE_OPEN_READ_ONLY, settings))
        }
        Mode::Immutable => Connection::open_with_flags(
            immutable_uri(path),
            flags(OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI, settings),
        ),
    }
    .map_err(|e| cannot_open(path, e))?;
    conn.busy_timeout(settings.busy_timeout).map_err(|e| cannot_open(path, e))?;
    // Pages are read from the kernel's cache in place rather than copied by a read call
    // each: a history of 10 MB reads a third faster. Address space only; the pages are
    // the kernel's, shared by every reader.
    conn.pragma_update(None, "mmap_size", READER_MMAP_BYTES).map_err(|e| cannot_open(path, e))?;
    Ok(conn)
}

/// `path` (absolute) as an SQLite URI with `immutable=1`: `%`, `?` and `#` escaped.
fn immutable_uri(path: &Path) -> String {
    let mut uri = String::from("file:");
    for c in path.to_string_lossy().chars() {
        match c {
            '%' | '?' | '#' => uri.push_str(&format!("%{:02X}", c as u32)),
            c => uri.push(c),
        }
    }
    uri.push_str("?immutable=1");
    uri
}

/// The database's schema version and how many tables (and indexes) of its own it holds,
/// in one statement: another process migrating meanwhile is seen whole or not at all.
fn version_and_tables(conn: &Connection) -> rusqlite::Result<(i64, i64)> {
    conn.query_row(
        "SELECT (SELECT user_version FROM pragma_user_version), \
                (SELECT count(*) FROM sqlite_schema WHERE name NOT LIKE 'sqlite_%')",
        [],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
}

/// A database opened for reading only must be a convo database of this convo's schema
/// version: an older one cannot be brought up to date, a newer one is not read.
pub fn check_read_only(conn: &Connection, path: &Path) -> Result<()> {
    let (version, tables) = version_and_tables(conn)
        .map_err(|e| unavailable(format!("{} is not a usable database: {e}", path.display())))?;
    refuse_newer(version, path)?;
    refuse_foreign(version, tables, path)?;
    if version < SCHEMA_VERSION {
        return Err(unavailable(format!(
            "{} is read-only and was written by an older convo (schema version {version}; this one reads \
             {SCHEMA_VERSION}): it cannot be brought up to date",
            path.display()
        )));
    }
    Ok(())
}

/// How much of the database file a reader maps.
const READER_MMAP_BYTES: i64 = 1 << 30;

/// A database of schema version 0 must be empty: anything in it is someone else's.
fn refuse_foreign(version: i64, tables: i64, path: &Path) -> Result<()> {
    if version == 0 && tables > 0 {
        return Err(unavailable(format!("{} holds tables that are not convo's; it was not modified", path.display())));
    }
    Ok(())
}

fn migrate(conn: &mut Connection, path: &Path) -> Result<()> {
    // The write lock first: two processes starting at once migrate one after the other.
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(|e| cannot_open(path, e))?;
    let (version, tables): (i64, i64) = tx
        .query_row(
            "SELECT (SELECT user_version FROM pragma_user_version), \
                    (SELECT count(*) FROM sqlite_schema WHERE name NOT LIKE 'sqlite_%')",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .map_err(|e| cannot_open(path, e))?;
    refuse_newer(version, path)?;
    refuse_foreign(version, tables, path)?;
    for (i, migration) in MIGRATIONS.iter().enumerate().skip(version as usize) {
        tx.execute_batch(migration).map_err(|e| cannot_open(path, e))?;
        if i + 1 == 5 {
            rows::describe_old_images(&tx).map_err(|e| cannot_open(path, e))?;
        }
        if i + 1 == 6 {
            words::index_old_messages(&tx).map_err(|e| cannot_open(path, e))?;
        }
        tx.pragma_update(None, "user_version", i as i64 + 1).map_err(|e| cannot_open(path, e))?;
        tracing::info!(version = i + 1, "database schema migrated");
    }
    tx.commit().map_err(|e| cannot_open(path, e))
}
