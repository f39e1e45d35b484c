//! The PostgreSQL backend (`--store postgres://…`): many convo processes on many machines
//! share one database, directly or through a pooler in transaction mode (PgBouncer). The
//! data model and every mutation are the shared ones of `store::sql` (segment chains,
//! images by hash, one atomic step per mutation with the revision checked inside it), run
//! on a bounded pool of connections (`pool`): writes grouped into shared commits
//! (`commit`), reads in one REPEATABLE READ snapshot each, changes through the change
//! table (`changes`). Tables live in one schema (`convo`, or `--pg-schema`), named in
//! every statement (`rows::Db`); no session state is relied on.
//!
//! Files, bottom up: `errors`, `connect` (the URL, TLS); `rows` (how statements go out,
//! rows to domain values); `changes`; `schema` (create, migrate); `pool`; `tx` (the
//! statements `store::sql` runs) and `check` (fsck's); `search`; `commit`; this file,
//! the `Engine` that runs `store::sql`'s jobs.

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
use std::time::{Duration, Instant};

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};

use crate::error::{Error, Result};
use crate::store::feed::Watcher;
use crate::store::sql::jobs::{Done, Edit, Got, Read};
use crate::store::sql::{Engine, SqlStore};
use changes::Changes;
use errors::pg;
use pool::Connections;
pub use schema::check_name as check_schema_name;
use tx::Pg;

/// The store on a PostgreSQL schema.
pub type PostgresStore = SqlStore<Postgres>;

/// The connections to one schema, and the change feed.
pub struct Postgres {
    connections: Arc<Connections>,
    committer: commit::Committer,
    schema: Arc<str>,
    changes: Arc<Changes>,
}

impl SqlStore<Postgres> {
    /// Connects, creates or migrates `schema`, and gets ready to read changes; fails,
    /// naming the URL with its password masked, when any of that fails. `busy_timeout`
    /// is how long a request waits for a connection, or a write for another's row lock.
    pub async fn open(url: &str, schema: &str, busy_timeout: Duration) -> Result<Self> {
        schema::check_name(schema).map_err(Error::StorageUnavailable)?;
        let mut target = connect::parse(url)?;
        if target.config.get_connect_timeout().is_none() {
            target.config.connect_timeout(Duration::from_secs(10));
        }
        let shown = target.shown.clone();
        let cannot = |why: String| Error::StorageUnavailable(format!("cannot open PostgreSQL at {shown}: {why}"));
        let (mut client, driver) = connect_patiently(&target, busy_timeout).await.map_err(&cannot)?;
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
            .max_size(target.pool_max)
            .runtime(Runtime::Tokio1)
            .build()
            .map_err(|e| cannot(e.to_string()))?;
        let connections = Arc::new(Connections::new(pool, shown.clone(), busy_timeout, target.pool_max));
        let schema: Arc<str> = schema.into();
        let listen = target.listen.take().map_or_else(|| target.clone(), |direct| *direct);
        // Writers leave a connection for reads when the pool has more than one.
        let writers = target.pool_max.saturating_sub(1).clamp(1, 4);
        Ok(SqlStore::new(Postgres {
            committer: commit::Committer::spawn(connections.clone(), schema.clone(), writers, busy_timeout),
            changes: Changes::start(connections.clone(), schema.clone(), listen),
            connections,
            schema,
        }))
    }
}

/// The first connection, waiting out a server that has too many (as `pool` does), and
/// the task that drives it.
async fn connect_patiently(
    target: &connect::Target,
    patience: Duration,
) -> std::result::Result<(tokio_postgres::Client, tokio::task::JoinHandle<()>), String> {
    let deadline = Instant::now() + patience;
    let mut attempt = 0;
    loop {
        match target.config.connect(target.tls.clone()).await {
            Ok((client, connection)) => {
                let driver = tokio::spawn(async move {
                    let _ = connection.await;
                });
                return Ok((client, driver));
            }
            Err(e) if pool::full(&e) && Instant::now() + pool::pause(attempt) < deadline => {
                tokio::time::sleep(pool::pause(attempt)).await;
                attempt += 1;
            }
            Err(e) => return Err(errors::describe(&e)),
        }
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
        if !read.snapshot() {
            let db = self.connections.get().await?;
            return read.apply(&Pg::new(&db, &self.schema)).await;
        }
        let db = self.connections.begin("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", None).await?;
        let tx = Pg::new(&db, &self.schema);
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

    async fn watch(&self) -> Result<Arc<Watcher>> {
        self.changes.watch().await
    }
}
