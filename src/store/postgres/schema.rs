//! The `convo` schema (or `--pg-schema NAME`): created on first start, brought forward by
//! ordered migrations under an advisory lock (two processes starting at once migrate one
//! after the other), and refused, untouched, when a newer convo wrote it.
//!
//! Text, not `jsonb`, holds JSON: `jsonb` reorders object members and rounds numbers, and
//! convo gives values back exactly as stored. Text columns that are compared or sorted use
//! the "C" collation, so that order is the same as SQLite's byte order on every server.

use tokio_postgres::Client;

use crate::error::{Error, Result};
use crate::session::search::tsvector;
use crate::session::{Message, Role};
use crate::store::postgres::errors::pg;

/// Migration `i` takes the schema from version `i` to `i + 1` (`meta.version`).
const MIGRATIONS: &[&str] = &[
    // 1: as SQLite's schema version 4: sessions over chains of message segments, images
    // by content hash, drafts of streams, and no change log (NOTIFY carries changes).
    r#"
    CREATE TABLE segments (
        id      bigserial PRIMARY KEY,
        parent  bigint REFERENCES segments(id),
        base    bigint NOT NULL
    );
    CREATE INDEX segments_by_parent ON segments(parent) WHERE parent IS NOT NULL;

    CREATE TABLE sessions (
        session_id   text COLLATE "C" PRIMARY KEY,
        system       text,
        cwd          text,
        title        text,
        metadata     text,
        revision     bigint NOT NULL,
        created_at   text COLLATE "C" NOT NULL,
        updated_at   text COLLATE "C" NOT NULL,
        forked_from_session text,
        forked_from_message text,
        segment      bigint NOT NULL REFERENCES segments(id),
        start        bigint NOT NULL,
        len          bigint NOT NULL
    );
    CREATE INDEX sessions_by_creation ON sessions(created_at DESC, session_id DESC);
    CREATE INDEX sessions_by_update ON sessions(updated_at DESC, session_id DESC);
    CREATE INDEX sessions_by_segment ON sessions(segment);

    CREATE TABLE messages (
        segment      bigint NOT NULL REFERENCES segments(id),
        seq          bigint NOT NULL,
        id           text COLLATE "C" NOT NULL,
        role         text NOT NULL,
        content      text NOT NULL,
        name         text,
        tool_call_id text,
        tool_calls   text,
        images       text,
        metadata     text,
        created_at   text NOT NULL,
        PRIMARY KEY (segment, seq)
    );
    CREATE INDEX messages_by_id ON messages(id);

    CREATE TABLE blobs (
        hash  text COLLATE "C" PRIMARY KEY,
        data  text NOT NULL,
        refs  bigint NOT NULL
    );

    CREATE TABLE drafts (
        stream_id    text COLLATE "C" PRIMARY KEY,
        session_id   text COLLATE "C" NOT NULL,
        owner        text NOT NULL,
        refreshed_at bigint NOT NULL,
        user_message text NOT NULL,
        text         text NOT NULL
    );
    CREATE INDEX drafts_by_session ON drafts(session_id, refreshed_at);
    CREATE INDEX drafts_by_refresh ON drafts(refreshed_at);
    "#,
    // 2: as SQLite's version 5: images by reference (filled for the images already
    // stored by `describe_old_images`).
    r#"
    ALTER TABLE blobs ADD COLUMN ref text COLLATE "C";
    ALTER TABLE blobs ADD COLUMN media_type text;
    ALTER TABLE blobs ADD COLUMN bytes bigint;
    CREATE INDEX blobs_by_ref ON blobs(ref);
    "#,
    // 3: as SQLite's version 6: full-text search, each message row's words as convo
    // splits them (`search`; filled for the messages already stored by
    // `index_old_messages`).
    r#"
    ALTER TABLE messages ADD COLUMN words tsvector;
    CREATE INDEX messages_by_words ON messages USING gin (words);
    "#,
    // 4: as SQLite's version 7: native turns, their usage, and each session's totals.
    r#"
    ALTER TABLE messages ADD COLUMN native text;
    ALTER TABLE messages ADD COLUMN usage text;
    ALTER TABLE sessions ADD COLUMN usage text;
    "#,
    // 5: as SQLite's version 8: exactly-once appends (each segment's owner, each
    // message's revision).
    r#"
    ALTER TABLE segments ADD COLUMN owner text COLLATE "C";
    ALTER TABLE messages ADD COLUMN revision bigint;
    "#,
    // 6: the change table (`changes`): every change with the transaction that made it,
    // so that a reader resumes where it left off instead of trusting notifications.
    r#"
    CREATE TABLE changes (
        pos           bigserial PRIMARY KEY,
        xid           bigint NOT NULL DEFAULT (pg_current_xact_id()::text::bigint),
        session_id    text COLLATE "C" NOT NULL,
        revision      bigint NOT NULL,
        kind          text NOT NULL,
        message_count bigint NOT NULL,
        at            timestamptz NOT NULL DEFAULT clock_timestamp()
    );
    CREATE INDEX changes_by_xid ON changes(xid);
    CREATE INDEX changes_by_time ON changes(at);
    "#,
    // 7: each session's last change is kept past the ten minutes (`changes::prune`), so
    // that a reader that could not read for longer is still told it: its rows by time.
    r#"
    CREATE INDEX changes_by_session ON changes(session_id, at);
    "#,
];

pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// A schema name convo can put in SQL unquoted: `[a-z_][a-z0-9_]*`, at most 63 bytes.
pub fn check_name(name: &str) -> std::result::Result<(), String> {
    let mut chars = name.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_lowercase() || c == '_');
    if first_ok && name.len() <= 63 && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_') {
        Ok(())
    } else {
        Err(format!(
            "invalid schema name {}: lower-case letters, digits and _, not starting with a digit, at most 63",
            crate::error::quote(name)
        ))
    }
}

/// Creates or migrates `schema`; refuses a newer one, and a non-empty schema that is not
/// convo's, without changing either.
pub async fn migrate(client: &mut Client, schema: &str) -> Result<()> {
    let tx = client.transaction().await.map_err(pg)?;
    // One lock per schema name, held to the end of this transaction.
    tx.execute("SELECT pg_advisory_xact_lock(hashtext('convo schema ' || $1))", &[&schema]).await.map_err(pg)?;
    let exists: bool = tx
        .query_one("SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", &[&schema])
        .await
        .map_err(pg)?
        .get(0);
    let version: i64 = if exists {
        let has_meta: bool = tx
            .query_one(
                "SELECT EXISTS (SELECT 1 FROM pg_tables WHERE schemaname = $1 AND tablename = 'meta')",
                &[&schema],
            )
            .await
            .map_err(pg)?
            .get(0);
        if has_meta {
            tx.query_one(&format!("SELECT version FROM {schema}.meta"), &[]).await.map_err(pg)?.get(0)
        } else {
            let tables: i64 = tx
                .query_one("SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1", &[&schema])
                .await
                .map_err(pg)?
                .get(0);
            if tables > 0 {
                return Err(Error::StorageUnavailable(format!(
                    "schema {schema} holds tables that are not convo's; it was not modified (choose another with --pg-schema)"
                )));
            }
            0
        }
    } else {
        0
    };
    if version > SCHEMA_VERSION {
        return Err(Error::StorageUnavailable(format!(
            "schema {schema} was written by a newer convo (schema version {version}; this one knows up to \
             {SCHEMA_VERSION}); it was not modified"
        )));
    }
    if version == SCHEMA_VERSION {
        return tx.commit().await.map_err(pg);
    }
    if version == 0 {
        tx.batch_execute(&format!(
            "CREATE SCHEMA IF NOT EXISTS {schema}; CREATE TABLE {schema}.meta (version bigint NOT NULL); \
             INSERT INTO {schema}.meta VALUES (0)"
        ))
        .await
        .map_err(pg)?;
    }
    tx.batch_execute(&format!("SET LOCAL search_path TO {schema}")).await.map_err(pg)?;
    for (i, migration) in MIGRATIONS.iter().enumerate().skip(version as usize) {
        tx.batch_execute(migration).await.map_err(pg)?;
        if i + 1 == 2 {
            describe_old_images(&tx).await?;
        }
        if i + 1 == 3 {
            index_old_messages(&tx).await?;
        }
        tx.execute("UPDATE meta SET version = $1", &[&(i as i64 + 1)]).await.map_err(pg)?;
        tracing::info!(version = i + 1, schema, "PostgreSQL schema migrated");
    }
    tx.commit().await.map_err(pg)
}

/// Gives every image stored before refs existed (schema version 1) its ref.
async fn describe_old_images(tx: &tokio_postgres::Transaction<'_>) -> Result<()> {
    for row in tx.query("SELECT hash, data FROM blobs WHERE ref IS NULL", &[]).await.map_err(pg)? {
        let (hash, data): (String, String) = (row.get(0), row.get(1));
        let d = crate::session::image::describe(&data);
        tx.execute(
            "UPDATE blobs SET ref = $2, media_type = $3, bytes = $4 WHERE hash = $1",
            &[&hash, &d.reference, &d.media_type, &(d.bytes as i64)],
        )
        .await
        .map_err(pg)?;
    }
    Ok(())
}

/// Gives every message stored before search existed (schema version 2) its words.
pub async fn index_old_messages(tx: &tokio_postgres::Transaction<'_>) -> Result<()> {
    let old = tx.query("SELECT segment, seq, content FROM messages", &[]).await.map_err(pg)?;
    let update = tx
        .prepare("UPDATE messages SET words = $3::text::tsvector WHERE segment = $1 AND seq = $2")
        .await
        .map_err(pg)?;
    for row in old {
        let (segment, seq, content): (i64, i64, String) = (row.get(0), row.get(1), row.get(2));
        let mut message = Message::new(Role::User, serde_json::Value::Null);
        message.content = serde_json::from_str(&content).map_err(|e| Error::StorageUnavailable(e.to_string()))?;
        tx.execute(&update, &[&segment, &seq, &tsvector(&message)]).await.map_err(pg)?;
    }
    Ok(())
}
