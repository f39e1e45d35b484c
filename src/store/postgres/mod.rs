//! The PostgreSQL backend (`--store postgres://…`): many convo processes on many machines
//! share one database. The data model and every mutation are the shared ones of
//! `store::sql` (segment chains, images by hash, one atomic step per mutation with the
//! revision checked inside it), run on a pool of connections that replaces broken ones
//! (`pool`): writes grouped into shared commits (`commit`), reads in one REPEATABLE READ
//! snapshot each, changes through LISTEN/NOTIFY (`changes`). Tables live in one schema
//! (`convo`, or `--pg-schema`), reached through each connection's `search_path`.
//!
//! Files, bottom up: `errors`, `connect` (the URL, TLS); `rows` (rows to domain values);
//! `changes`; `schema` (create, migrate); `pool`; `tx` (the statements `store::sql` runs)
//! and `check` (fsck's); `search`; `commit`; this file, the `Engine` that runs
//! `store::sql`'s jobs.

mod changes;
mod check;
mod commit;
pub mod connect;
mod errors;
mod pool;
mod rows;
mod schema;
mod search;
mod tx;

use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};

use crate::error::{Error, Result};
use crate::store::feed::{Feed, Watcher};
use crate::store::sql::jobs::{Done, Edit, Got, Read};
use crate::store::sql::{Engine, SqlStore};
use errors::pg;
use pool::Connections;
pub use schema::check_name as check_schema_name;
use tx::Pg;

/// Connections at most, writers and readers together.
const POOL_SIZE: usize = 16;

/// The store on a PostgreSQL schema.
pub type PostgresStore = SqlStore<Postgres>;

/// The connections to one schema, and the change feed.
pub struct Postgres {
    connections: Arc<Connections>,
    committer: commit::Committer,
    schema: Arc<str>,
    feed: Arc<Feed>,
}

impl SqlStore<Postgres> {
    /// Connects, creates or migrates `schema`, and starts listening for changes; fails,
    /// naming the URL with its password masked, when any of that fails.
    pub async fn open(url: &str, schema: &str, lock_timeout: Duration) -> Result<Self> {
        schema::check_name(schema).map_err(Error::StorageUnavailable)?;
        let lock_timeout_ms = u64::try_from(lock_timeout.as_millis()).unwrap_or(u64::MAX);
        let mut target = connect::parse(url, lock_timeout_ms)?;
        let options = format!("{} -c search_path={schema}", target.config.get_options().unwrap_or_default());
        target.config.options(options.trim());
        if target.config.get_connect_timeout().is_none() {
            target.config.connect_timeout(Duration::from_secs(10));
        }
        let shown = target.shown.clone();
        let cannot = |why: String| Error::StorageUnavailable(format!("cannot open PostgreSQL at {shown}: {why}"));
        let (mut client, connection) =
            target.config.connect(target.tls.clone()).await.map_err(|e| cannot(errors::describe(&e)))?;
        let driver = tokio::spawn(connection);
        let migrated = schema::migrate(&mut client, schema).await;
        drop(client);
        let _ = driver.await;
        migrated.map_err(|e| cannot(e.to_string()))?;

        let manager = Manager::from_config(
            target.config.clone(),
            target.tls.clone(),
            ManagerConfig { recycling_method: RecyclingMethod::Fast },
        );
        let pool = Pool::builder(manager)
            .max_size(POOL_SIZE)
            .runtime(Runtime::Tokio1)
            .create_timeout(Some(Duration::from_secs(10)))
            .build()
            .map_err(|e| cannot(e.to_string()))?;
        let connections = Arc::new(Connections::new(pool, shown.clone()));
        let feed = Arc::<Feed>::default();
        let (ready, listening) = tokio::sync::oneshot::channel();
        tokio::spawn(changes::listen(target, schema.to_owned(), Arc::downgrade(&feed), ready));
        let _ = tokio::time::timeout(Duration::from_secs(10), listening).await;
        Ok(SqlStore::new(Postgres {
            committer: commit::Committer::spawn(connections.clone(), schema.into()),
            connections,
            schema: schema.into(),
            feed,
        }))
    }
}

impl Engine for Postgres {
    const KIND: &'static str = "postgres";

    /// In a group's transaction, in a savepoint of its own; run again from a clean
    /// savepoint after a deadlock.
    async fn edit(&self, edit: Edit) -> Result<Done> {
        self.committer.write(edit).await
    }

    /// In one REPEATABLE READ snapshot when it reads more than once, else as is.
    async fn read(&self, read: Read) -> Result<Got> {
        let db = self.connections.get().await?;
        let tx = Pg::new(&db, self.schema.clone());
        if !read.snapshot() {
            return read.apply(&tx).await;
        }
        db.batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY").await.map_err(pg)?;
        let result = read.apply(&tx).await;
        let ended = db.batch_execute(if result.is_ok() { "COMMIT" } else { "ROLLBACK" }).await;
        match (result, ended) {
            (Ok(t), Ok(())) => Ok(t),
            (Err(e), _) => Err(e),
            (Ok(_), Err(e)) => Err(pg(e)),
        }
    }

    async fn flush(&self) -> Result<()> {
        // Every reply was sent after its commit: nothing acknowledged waits.
        Ok(())
    }

    fn watch(&self) -> Arc<Watcher> {
        self.feed.watch()
    }
}
