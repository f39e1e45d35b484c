//! The SQLite backend (`--store sqlite:PATH`, the default): WAL mode, one writer thread
//! with group commit (`commit`), reads on a bounded pool of read-only connections
//! (`reads`). Every mutation is one of the shared transaction bodies of `store::sql`,
//! run on the writer inside its own savepoint; it reads what it needs and checks the
//! revision inside its `BEGIN IMMEDIATE` transaction, and nothing is kept from one
//! transaction to the next, so several convo processes can share one database without
//! losing an update.
//!
//! A database this process cannot write (a read-only file system, a file or folder the
//! user may not write: `file::unwritable`) is opened for reading only: no writer, the
//! readers `immutable` when there is no log to read, else read-only through it
//! (`schema::Mode`); reads are answered and every write is 1006 saying the store is
//! read-only (`Sessions::read_only`).
//!
//! Files, bottom up: `errors`; `words` (the search index's rows), `rows` (rows to domain
//! values), `drafts`, `changes` (the change log); `schema` (open, migrate); `file`
//! (claiming the path); `tx` (the statements `store::sql` runs) and `check` (fsck's);
//! `search`; `commit`, `reads`; this file, the `Engine` that runs `store::sql`'s jobs.

mod changes;
mod check;
mod commit;
mod drafts;
mod errors;
mod file;
mod reads;
mod rendered;
mod rows;
mod schema;
mod search;
mod tx;
mod words;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::error::{Error, Result};
use crate::lock;
use crate::store::feed::{Feed, Watcher};
use crate::store::sql::jobs::{Done, Edit, Got, Read};
use crate::store::sql::{Engine, SqlStore, run_now};
use errors::sql;
use schema::Mode;
pub use schema::Settings;
use tx::Lite;

/// The store on a database file.
pub type SqliteStore = SqlStore<Sqlite>;

/// The connections to one database file, and the change-log poller.
pub struct Sqlite {
    path: PathBuf,
    settings: Settings,
    /// How the readers open the file.
    mode: Mode,
    /// Why this process cannot write the file, when it cannot: then there is no writer,
    /// and every write is 1006 saying the store is read-only.
    read_only: Option<String>,
    committer: Option<commit::Committer>,
    readers: reads::Readers,
    /// Changes of every process, published by the change-log poller.
    feed: Arc<Feed>,
    /// The poller's thread, once one started, and what stops it.
    polling: Mutex<Option<std::thread::JoinHandle<()>>>,
    stop_polling: Arc<AtomicBool>,
}

impl SqlStore<Sqlite> {
    /// Opens (creating when missing) the database file at `path`, in a folder that must
    /// exist; fails at once, with a message that names the path, when it cannot be used,
    /// and then leaves nothing behind (see `file`).
    pub fn open(path: &Path, settings: Settings) -> Result<Self> {
        Sqlite::open_claimed(file::claim(path, false, settings.follow_symlinks)?, settings).map(SqlStore::new)
    }

    /// As `open`, creating the missing folders above `path` (0700): for the default
    /// location only.
    pub fn open_creating_folders(path: &Path, settings: Settings) -> Result<Self> {
        Sqlite::open_claimed(file::claim(path, true, settings.follow_symlinks)?, settings).map(SqlStore::new)
    }
}

impl Sqlite {
    fn open_claimed(claim: file::Claim, settings: Settings) -> Result<Self> {
        let path = claim.path.clone();
        let opened = match file::unwritable(&path) {
            None => schema::open_writer(&path, settings).and_then(|conn| {
                let reader = schema::open_reader(&path, settings, Mode::Shared)?;
                let committer = commit::Committer::spawn(conn).map_err(|e| Error::StorageUnavailable(e.to_string()))?;
                Ok((Some(committer), reader, Mode::Shared, None))
            }),
            Some(why) if file::has_log(&path) && !file::has_index(&path) => Err(Error::StorageUnavailable(format!(
                "cannot open {} for reading only ({why}): its write-ahead log (-wal) holds commits, and SQLite \
                 reads it only through a -shm file beside it, which cannot be made there; open it once where it \
                 can be written (or copy its folder)",
                path.display()
            ))),
            Some(why) => {
                let mode = if file::has_log(&path) { Mode::ReadOnly } else { Mode::Immutable };
                schema::open_reader(&path, settings, mode).and_then(|reader| {
                    schema::check_read_only(&reader, &path)?;
                    Ok((None, reader, mode, Some(why)))
                })
            }
        };
        match opened {
            Ok((committer, reader, mode, read_only)) => Ok(Sqlite {
                readers: reads::Readers::new(path.clone(), settings, mode, reader),
                path,
                settings,
                mode,
                read_only,
                committer,
                feed: Arc::default(),
                polling: Mutex::default(),
                stop_polling: Arc::default(),
            }),
            Err(e) => {
                // Every connection is closed by now.
                claim.release();
                Err(e)
            }
        }
    }

    /// The writer, or 1006 saying why there is none: the store is read-only.
    fn writer(&self) -> Result<&commit::Committer> {
        self.committer.as_ref().ok_or_else(|| {
            Error::StorageUnavailable(format!(
                "the store is read-only: {}; convo opened it for reading only",
                self.read_only.as_deref().unwrap_or("it cannot be written")
            ))
        })
    }
}

impl Engine for Sqlite {
    const KIND: &'static str = "sqlite";

    fn read_only(&self) -> Option<&str> {
        self.read_only.as_deref()
    }

    /// On the writer thread, in its own savepoint of a group's transaction.
    async fn edit(&self, edit: Edit) -> Result<Done> {
        self.writer()?.write(move |c| run_now(edit.apply(&Lite::new(c)))).await
    }

    /// On a pooled read connection, always in one snapshot (a read transaction costs
    /// SQLite nothing); a long history in two halves at once, when the second half's
    /// connection sees the same snapshot (`Lite::messages_json`).
    async fn read(&self, read: Read) -> Result<Got> {
        self.readers.read(move |c, other| run_now(read.apply(&Lite::reading(c, other)))).await
    }

    async fn flush(&self) -> Result<()> {
        // Everything queued before this has committed once it returns.
        match &self.committer {
            Some(committer) => committer.write(|_| Ok(())).await,
            None => Ok(()),
        }
    }

    /// Closes every connection of this process, the writer's last, after moving the
    /// whole log into the file: when no other process has the database open, SQLite
    /// then removes the log, and the `.db` file alone holds every session.
    async fn close(&self) -> Result<()> {
        self.stop_polling.store(true, Ordering::Release);
        let polling = lock(&self.polling).take();
        if let Some(thread) = polling {
            let _ = tokio::task::spawn_blocking(move || thread.join()).await;
        }
        self.readers.close();
        if let Some(committer) = &self.committer {
            committer.close().await;
        }
        Ok(())
    }

    /// Starts the poller at the first watch; a poller that cannot start (its connection
    /// does not open) fails the watch with 1006, and the next watch tries again.
    async fn watch(&self) -> Result<Arc<Watcher>> {
        // Watching before the poller starts: it publishes from its first row on.
        let watcher = self.feed.watch();
        let mut polling = lock(&self.polling);
        if polling.is_none() && !self.stop_polling.load(Ordering::Acquire) {
            let (path, settings, mode, feed) =
                (self.path.clone(), self.settings, self.mode, Arc::downgrade(&self.feed));
            let stop = self.stop_polling.clone();
            let conn = schema::open_reader(&path, settings, mode)?;
            let after = changes::newest(&conn).map_err(sql)?;
            let thread = std::thread::Builder::new()
                .name("convo-sqlite-watch".into())
                .spawn(move || changes::poll(conn, feed, after, &stop))
                .map_err(|e| Error::StorageUnavailable(format!("cannot start watching the change log: {e}")))?;
            *polling = Some(thread);
        }
        Ok(watcher)
    }
}
