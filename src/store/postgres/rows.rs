//! Rows to domain values and back, as in the SQLite store: sessions, messages, images
//! kept once by content hash in `blobs` (counted by the message rows that name them), and
//! the drafts of streams; and how every statement goes out (`Db`).

use std::borrow::Cow;
use std::collections::HashSet;

use deadpool_postgres::ClientWrapper;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use tokio_postgres::Row;
use tokio_postgres::types::{ToSql, Type};

use crate::error::{Error, Result};
use crate::lock;
use crate::session::image::describe;
use crate::session::{Draft, Message, Role, SessionInfo, role_name};
use crate::store::postgres::errors::pg;
use crate::store::sql::tx::NewRow;
use crate::store::sql::{SessionRow, parse_role};

pub const SESSION_COLUMNS: &str = "session_id, system, cwd, title, metadata, revision, created_at, updated_at, \
     forked_from_session, forked_from_message, segment, start, len, usage";

/// One connection, and the schema its statements name. Statements name their tables
/// `convo.…` (the default schema), rewritten to the schema in use, so that nothing
/// relies on `search_path`; and they go out unnamed with their parameters' types
/// (`query_typed`: parse, bind and run in one round trip) or, in a write transaction,
/// prepared for that transaction only (`Statements`), so that no prepared statement
/// outlives its transaction. Both are what a pooler in transaction mode needs: the next
/// transaction may run on another server connection.
#[derive(Clone, Copy)]
pub struct Db<'c> {
    pub client: &'c ClientWrapper,
    schema: &'c str,
    statements: Option<&'c Statements>,
}

/// The statements of one write transaction that ran more than once in it, prepared
/// (named) at their second run and reused, so that a group of appends parses and plans
/// each statement once. `close` closes them all, and the transaction's end must come
/// after it: none may outlive its transaction (a pooler hands the server connection to
/// another client then).
#[derive(Default)]
pub struct Statements {
    seen: std::sync::Mutex<std::collections::HashSet<String>>,
    prepared: std::sync::Mutex<std::collections::HashMap<String, tokio_postgres::Statement>>,
}

impl Statements {
    /// Closes every statement prepared (the Close messages go out before anything sent
    /// after this call).
    pub fn close(&self) {
        lock(&self.prepared).clear();
        lock(&self.seen).clear();
    }
}

/// A statement's parameter, with the type PostgreSQL is told it has.
pub trait Param: ToSql + Sync {
    fn pg_type(&self) -> Type;
    fn as_sql(&self) -> &(dyn ToSql + Sync);
}

/// The PostgreSQL type of a Rust value convo binds.
pub trait Typed {
    const TYPE: Type;
}

impl Typed for str {
    const TYPE: Type = Type::TEXT;
}
impl Typed for String {
    const TYPE: Type = Type::TEXT;
}
impl Typed for i64 {
    const TYPE: Type = Type::INT8;
}
impl Typed for Vec<i64> {
    const TYPE: Type = Type::INT8_ARRAY;
}
impl Typed for Vec<String> {
    const TYPE: Type = Type::TEXT_ARRAY;
}
impl Typed for Vec<Option<String>> {
    const TYPE: Type = Type::TEXT_ARRAY;
}
impl Typed for Vec<&str> {
    const TYPE: Type = Type::TEXT_ARRAY;
}
impl<T: Typed> Typed for Option<T> {
    const TYPE: Type = T::TYPE;
}
impl<T: Typed + ?Sized> Typed for &T {
    const TYPE: Type = T::TYPE;
}

impl<T: Typed + ToSql + Sync> Param for T {
    fn pg_type(&self) -> Type {
        T::TYPE
    }
    fn as_sql(&self) -> &(dyn ToSql + Sync) {
        self
    }
}

impl<'c> Db<'c> {
    pub fn new(client: &'c ClientWrapper, schema: &'c str) -> Self {
        Db { client, schema, statements: None }
    }

    /// In a write transaction that keeps the statements it runs twice (`Statements`).
    pub fn keeping(client: &'c ClientWrapper, schema: &'c str, statements: &'c Statements) -> Self {
        Db { client, schema, statements: Some(statements) }
    }

    /// The prepared statement for `sql` when this transaction ran it before (prepared
    /// now if this is its second run); `None`: send it unnamed.
    async fn prepared(&self, sql: &str, params: &[&dyn Param]) -> Option<tokio_postgres::Statement> {
        let statements = self.statements?;
        if let Some(statement) = lock(&statements.prepared).get(sql) {
            return Some(statement.clone());
        }
        if lock(&statements.seen).insert(sql.to_owned()) {
            return None;
        }
        let types: Vec<Type> = params.iter().map(|p| p.pg_type()).collect();
        let statement = self.client.prepare_typed(sql, &types).await.ok()?;
        lock(&statements.prepared).insert(sql.to_owned(), statement.clone());
        Some(statement)
    }

    pub fn schema(&self) -> &'c str {
        self.schema
    }

    /// `sql` with its tables in this schema.
    pub fn sql<'s>(&self, sql: &'s str) -> Cow<'s, str> {
        qualified(sql, self.schema)
    }

    fn typed<'p>(params: &'p [&'p dyn Param]) -> Vec<(&'p (dyn ToSql + Sync), Type)> {
        params.iter().map(|p| (p.as_sql(), p.pg_type())).collect()
    }

    fn untyped<'p>(params: &'p [&'p dyn Param]) -> Vec<&'p (dyn ToSql + Sync)> {
        params.iter().map(|p| p.as_sql()).collect()
    }
}

/// `sql` with the tables it names as `convo.…` in `schema`.
pub fn qualified<'s>(sql: &'s str, schema: &str) -> Cow<'s, str> {
    if schema == "convo" { Cow::Borrowed(sql) } else { Cow::Owned(sql.replace("convo.", &format!("{schema}."))) }
}

pub async fn query(db: Db<'_>, sql: &str, params: &[&dyn Param]) -> Result<Vec<Row>> {
    let sql = db.sql(sql);
    match db.prepared(&sql, params).await {
        Some(statement) => db.client.query(&statement, &Db::untyped(params)).await.map_err(pg),
        None => db.client.query_typed(&sql, &Db::typed(params)).await.map_err(pg),
    }
}

pub async fn query_opt(db: Db<'_>, sql: &str, params: &[&dyn Param]) -> Result<Option<Row>> {
    let sql = db.sql(sql);
    match db.prepared(&sql, params).await {
        Some(statement) => db.client.query_opt(&statement, &Db::untyped(params)).await.map_err(pg),
        None => db.client.query_typed_opt(&sql, &Db::typed(params)).await.map_err(pg),
    }
}

pub async fn execute(db: Db<'_>, sql: &str, params: &[&dyn Param]) -> Result<u64> {
    let sql = db.sql(sql);
    match db.prepared(&sql, params).await {
        Some(statement) => db.client.execute(&statement, &Db::untyped(params)).await.map_err(pg),
        None => db.client.execute_typed(&sql, &Db::typed(params)).await.map_err(pg),
    }
}

fn corrupt(what: impl std::fmt::Display) -> Error {
    Error::StorageUnavailable(format!("a stored row does not parse: {what}"))
}

fn json_column<T: serde::de::DeserializeOwned>(row: &Row, i: usize) -> Result<Option<T>> {
    let text: Option<&str> = row.try_get(i).map_err(corrupt)?;
    text.map(|t| serde_json::from_str(t).map_err(corrupt)).transpose()
}

fn to_json(value: &impl serde::Serialize) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| "null".into())
}

fn opt_json<T: serde::Serialize>(value: &Option<T>) -> Option<String> {
    value.as_ref().map(to_json)
}

pub fn session(row: &Row) -> Result<SessionRow> {
    let get_i64 = |i| row.try_get::<_, i64>(i).map_err(corrupt);
    let (start, len) = (get_i64(11)?, get_i64(12)?);
    let forked_session: Option<String> = row.try_get(8).map_err(corrupt)?;
    Ok(SessionRow {
        info: SessionInfo {
            session_id: row.try_get(0).map_err(corrupt)?,
            system: row.try_get(1).map_err(corrupt)?,
            cwd: row.try_get(2).map_err(corrupt)?,
            title: row.try_get(3).map_err(corrupt)?,
            metadata: json_column(row, 4)?,
            message_count: (len - start) as u64,
            revision: get_i64(5)? as u64,
            created_at: row.try_get(6).map_err(corrupt)?,
            updated_at: row.try_get(7).map_err(corrupt)?,
            forked_from: forked_session
                .map(|session_id| crate::session::ForkPoint { session_id, message_id: row.try_get(9).ok().flatten() }),
            usage: json_column(row, 13)?.unwrap_or_default(),
        },
        segment: get_i64(10)?,
        start: start as u64,
        len: len as u64,
    })
}

/// A session's row; `for_update` locks it to the end of the transaction (the revision
/// check and the change it guards then see no other writer in between).
pub async fn load_session(db: Db<'_>, session_id: &str, for_update: bool) -> Result<Option<SessionRow>> {
    let lock = if for_update { " FOR UPDATE" } else { "" };
    let sql = format!("SELECT {SESSION_COLUMNS} FROM convo.sessions WHERE session_id = $1{lock}");
    query_opt(db, &sql, &[&session_id]).await?.map(|r| session(&r)).transpose()
}

/// Which of `ids` name a session: one statement, where a lookup each was a round trip each
/// (a run of a thousand creates the host named).
pub async fn taken(db: Db<'_>, ids: &[&str]) -> Result<HashSet<String>> {
    if ids.is_empty() {
        return Ok(HashSet::new());
    }
    let ids = ids.to_vec();
    let rows = query(db, "SELECT session_id FROM convo.sessions WHERE session_id = ANY($1::text[])", &[&ids]).await?;
    Ok(rows.iter().map(|row| row.get(0)).collect())
}

/// Writes a session row whole: replaces the one with its id or, when `new`, inserts it,
/// failing with `SessionExists` if another writer took the id first (its insert is
/// waited for, so two processes creating one id cannot both succeed).
pub async fn put_session(db: Db<'_>, row: &SessionRow, new: bool) -> Result<()> {
    let info = &row.info;
    let forked = info.forked_from.as_ref();
    let on_conflict = if new {
        "DO NOTHING"
    } else {
        "DO UPDATE SET system = $2, cwd = $3, title = $4, metadata = $5, revision = $6, created_at = $7, \
         updated_at = $8, forked_from_session = $9, forked_from_message = $10, segment = $11, start = $12, len = $13, \
         usage = $14"
    };
    let sql = format!(
        "INSERT INTO convo.sessions ({SESSION_COLUMNS}) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14) \
         ON CONFLICT (session_id) {on_conflict}"
    );
    let written = execute(
        db,
        &sql,
        &[
            &info.session_id,
            &info.system,
            &info.cwd,
            &info.title,
            &opt_json(&info.metadata),
            &(info.revision as i64),
            &info.created_at,
            &info.updated_at,
            &forked.map(|f| &f.session_id),
            &forked.and_then(|f| f.message_id.as_ref()),
            &row.segment,
            &(row.start as i64),
            &(row.len as i64),
            &to_json(&info.usage),
        ],
    )
    .await?;
    if written == 0 {
        return Err(Error::SessionExists(info.session_id.clone()));
    }
    Ok(())
}

/// Makes new sessions in one statement (`Tx::create_sessions`): a segment each, the
/// rows, and their changes logged with one notification, as `changes::record` logs one.
pub async fn create_sessions(db: Db<'_>, infos: Vec<SessionInfo>) -> Result<Vec<SessionRow>> {
    if infos.is_empty() {
        return Ok(Vec::new());
    }
    let sql = format!(
        "WITH n AS (SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], \
           $7::text[]) WITH ORDINALITY AS n(session_id, system, cwd, title, metadata, at, usage, k)), \
         s AS (INSERT INTO convo.segments (parent, base, owner) SELECT NULL, 0, session_id FROM n ORDER BY k \
           RETURNING id, owner), \
         made AS (INSERT INTO convo.sessions ({SESSION_COLUMNS}) \
           SELECT n.session_id, n.system, n.cwd, n.title, n.metadata, 0, n.at, n.at, NULL, NULL, s.id, 0, 0, n.usage \
           FROM n JOIN s ON s.owner = n.session_id ORDER BY n.k \
           ON CONFLICT (session_id) DO NOTHING RETURNING session_id, segment), \
         c AS (INSERT INTO convo.changes (session_id, revision, kind, message_count) SELECT session_id, 0, $8, 0 FROM made) \
         SELECT made.session_id, made.segment, pg_notify($9, $10) FROM made"
    );
    let column = |f: fn(&SessionInfo) -> Option<String>| infos.iter().map(f).collect::<Vec<Option<String>>>();
    let ids = column(|i| Some(i.session_id.clone()));
    let (system, cwd, title) = (column(|i| i.system.clone()), column(|i| i.cwd.clone()), column(|i| i.title.clone()));
    let metadata = column(|i| opt_json(&i.metadata));
    let at = column(|i| Some(i.created_at.clone()));
    let usage = column(|i| Some(to_json(&i.usage)));
    let (kind, schema) = (crate::store::feed::ChangeKind::Created.as_str(), db.schema());
    let params: [&dyn Param; 10] = [
        &ids,
        &system,
        &cwd,
        &title,
        &metadata,
        &at,
        &usage,
        &kind,
        &crate::store::postgres::changes::CHANNEL,
        &schema,
    ];
    let made = query(db, &sql, &params).await?;
    let mut segments: std::collections::HashMap<String, i64> =
        made.iter().map(|r| (r.get::<_, String>(0), r.get::<_, i64>(1))).collect();
    infos
        .into_iter()
        .map(|info| match segments.remove(&info.session_id) {
            Some(segment) => Ok(SessionRow { info, segment, start: 0, len: 0 }),
            None => Err(Error::SessionExists(info.session_id)),
        })
        .collect()
}

pub const MESSAGE_COLUMNS: &str =
    "id, role, content, name, tool_call_id, tool_calls, images, metadata, native, usage, created_at";

/// A message row; images still as their hashes (see `load_images`).
pub fn message(row: &Row) -> Result<Message> {
    let role: &str = row.try_get(1).map_err(corrupt)?;
    let role = parse_role(role).ok_or_else(|| corrupt(format!("unknown role {role}")))?;
    Ok(Message {
        id: Some(row.try_get(0).map_err(corrupt)?),
        role,
        content: json_column::<Value>(row, 2)?.unwrap_or(Value::Null),
        name: row.try_get(3).map_err(corrupt)?,
        tool_call_id: row.try_get(4).map_err(corrupt)?,
        tool_calls: json_column(row, 5)?,
        images: json_column(row, 6)?,
        metadata: json_column::<Map<String, Value>>(row, 7)?,
        native: json_column(row, 8)?,
        usage: json_column(row, 9)?,
        created_at: row.try_get(10).map_err(corrupt)?,
    })
}

pub fn role(row: &Row) -> Result<Role> {
    let role: &str = row.try_get(0).map_err(corrupt)?;
    parse_role(role).ok_or_else(|| corrupt(format!("unknown role {role}")))
}

/// Replaces each image hash of `message` by the image it names.
pub async fn load_images(db: Db<'_>, message: &mut Message) -> Result<()> {
    let Some(hashes) = message.images.as_mut() else { return Ok(()) };
    for slot in hashes.iter_mut() {
        let row = query_opt(db, "SELECT data FROM convo.blobs WHERE hash = $1", &[&*slot]).await?;
        *slot = row
            .ok_or_else(|| Error::StorageUnavailable(format!("image {slot} is missing from the database")))?
            .try_get(0)
            .map_err(corrupt)?;
    }
    Ok(())
}

pub async fn insert_message(db: Db<'_>, segment: i64, seq: u64, m: &Message, revision: u64) -> Result<()> {
    let mut hashes = None;
    if let Some(images) = &m.images {
        let mut list = Vec::with_capacity(images.len());
        for image in images {
            list.push(store_blob(db, image).await?);
        }
        hashes = Some(list);
    }
    let sql = format!(
        "INSERT INTO convo.messages (segment, seq, {MESSAGE_COLUMNS}, words, revision) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14::text::tsvector, $15)"
    );
    execute(
        db,
        &sql,
        &[
            &segment,
            &(seq as i64),
            &m.id,
            &role_name(m.role),
            &to_json(&m.content),
            &m.name,
            &m.tool_call_id,
            &opt_json(&m.tool_calls),
            &opt_json(&hashes),
            &opt_json(&m.metadata),
            &opt_json(&m.native),
            &opt_json(&m.usage),
            &m.created_at,
            &crate::session::search::tsvector(m),
            &(revision as i64),
        ],
    )
    .await
    .map(drop)
}

/// Inserts rows of one segment, a column of values each (`unnest`), in statements of at
/// most `BATCH_BYTES` of text each (PostgreSQL takes no message over 1 GB), all sent
/// together; rows with images, whose blobs are stored first, as `insert_message` does.
pub async fn insert_messages(db: Db<'_>, segment: i64, rows: &[NewRow<'_>]) -> Result<()> {
    if rows.len() < 2 || rows.iter().any(|r| r.message.images.is_some()) {
        let inserts = rows.iter().map(|r| insert_message(db, segment, r.seq, r.message, r.revision));
        return futures_util::future::try_join_all(inserts).await.map(drop);
    }
    let texts: Vec<Texts> = rows.iter().map(|r| Texts::of(r.message)).collect();
    let mut batches = Vec::new();
    let (mut from, mut bytes) = (0, 0);
    for (i, t) in texts.iter().enumerate() {
        if i > from && bytes + t.bytes > BATCH_BYTES {
            batches.push(from..i);
            (from, bytes) = (i, 0);
        }
        bytes += t.bytes;
    }
    batches.push(from..texts.len());
    let statements = batches.into_iter().map(|batch| insert_batch(db, segment, &rows[batch.clone()], &texts[batch]));
    futures_util::future::try_join_all(statements).await.map(drop)
}

/// The most text one multi-row insert carries (a single larger row goes alone).
const BATCH_BYTES: usize = 16 << 20;

/// A message's columns as the text they are stored as.
struct Texts {
    content: String,
    tool_calls: Option<String>,
    metadata: Option<String>,
    native: Option<String>,
    usage: Option<String>,
    words: String,
    bytes: usize,
}

impl Texts {
    fn of(m: &Message) -> Self {
        let (content, tool_calls, metadata) = (to_json(&m.content), opt_json(&m.tool_calls), opt_json(&m.metadata));
        let (native, usage, words) = (opt_json(&m.native), opt_json(&m.usage), crate::session::search::tsvector(m));
        let optional =
            [&tool_calls, &metadata, &native, &usage].iter().map(|t| t.as_ref().map_or(0, String::len)).sum::<usize>();
        let bytes = content.len() + words.len() + optional;
        Texts { content, tool_calls, metadata, native, usage, words, bytes }
    }
}

async fn insert_batch(db: Db<'_>, segment: i64, rows: &[NewRow<'_>], texts: &[Texts]) -> Result<()> {
    let column = |f: &dyn Fn(&Message, &Texts) -> Option<String>| {
        rows.iter().zip(texts).map(|(r, t)| f(r.message, t)).collect::<Vec<_>>()
    };
    let (seqs, revisions): (Vec<i64>, Vec<i64>) = rows.iter().map(|r| (r.seq as i64, r.revision as i64)).unzip();
    let roles: Vec<&str> = rows.iter().map(|r| role_name(r.message.role)).collect();
    let sql = format!(
        "INSERT INTO convo.messages (segment, seq, {MESSAGE_COLUMNS}, words, revision) \
         SELECT $1, r.seq, r.id, r.role, r.content, r.name, r.tool_call_id, r.tool_calls, NULL, r.metadata, \
                r.native, r.usage, r.created_at, r.words::tsvector, r.revision \
         FROM unnest($2::int8[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], \
                     $9::text[], $10::text[], $11::text[], $12::text[], $13::text[], $14::int8[]) \
              AS r(seq, id, role, content, name, tool_call_id, tool_calls, metadata, native, usage, created_at, \
                   words, revision)"
    );
    execute(
        db,
        &sql,
        &[
            &segment,
            &seqs,
            &column(&|m, _| m.id.clone()),
            &roles,
            &column(&|_, t| Some(t.content.clone())),
            &column(&|m, _| m.name.clone()),
            &column(&|m, _| m.tool_call_id.clone()),
            &column(&|_, t| t.tool_calls.clone()),
            &column(&|_, t| t.metadata.clone()),
            &column(&|_, t| t.native.clone()),
            &column(&|_, t| t.usage.clone()),
            &column(&|m, _| Some(m.created_at.clone())),
            &column(&|_, t| Some(t.words.clone())),
            &revisions,
        ],
    )
    .await
    .map(drop)
}

/// Stores an image once, however many messages carry it, with its ref
/// (`session::image`); returns its hash.
async fn store_blob(db: Db<'_>, image: &str) -> Result<String> {
    let hash = hex(&Sha256::digest(image.as_bytes()));
    let counted = execute(db, "UPDATE convo.blobs SET refs = refs + 1 WHERE hash = $1", &[&hash]).await?;
    if counted == 0 {
        let d = describe(image);
        execute(
            db,
            "INSERT INTO convo.blobs (hash, data, refs, ref, media_type, bytes) VALUES ($1, $2, 1, $3, $4, $5) \
             ON CONFLICT (hash) DO UPDATE SET refs = blobs.refs + 1",
            &[&hash, &image, &d.reference, &d.media_type, &(d.bytes as i64)],
        )
        .await?;
    }
    Ok(hash)
}

/// The image whose ref is `reference`.
pub async fn image(db: Db<'_>, reference: &str) -> Result<Option<String>> {
    let row = query_opt(db, "SELECT data FROM convo.blobs WHERE ref = $1 LIMIT 1", &[&reference]).await?;
    row.map(|r| r.try_get(0).map_err(corrupt)).transpose()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Deletes the message rows of `segment` with `lo <= seq < hi`, releasing their images.
pub async fn delete_messages(db: Db<'_>, segment: i64, lo: u64, hi: u64) -> Result<()> {
    let (lo, hi) = (lo.min(i64::MAX as u64) as i64, hi.min(i64::MAX as u64) as i64);
    let lists = query(
        db,
        "SELECT images FROM convo.messages WHERE segment = $1 AND seq >= $2 AND seq < $3 AND images IS NOT NULL",
        &[&segment, &lo, &hi],
    )
    .await?;
    for row in lists {
        let hashes: Vec<String> = json_column(&row, 0)?.unwrap_or_default();
        for hash in hashes {
            execute(db, "UPDATE convo.blobs SET refs = refs - 1 WHERE hash = $1", &[&hash]).await?;
            execute(db, "DELETE FROM convo.blobs WHERE hash = $1 AND refs <= 0", &[&hash]).await?;
        }
    }
    execute(db, "DELETE FROM convo.messages WHERE segment = $1 AND seq >= $2 AND seq < $3", &[&segment, &lo, &hi])
        .await
        .map(drop)
}

const DRAFT_COLUMNS: &str = "stream_id, session_id, owner, refreshed_at, user_message, text";

fn draft(row: &Row) -> Result<Draft> {
    let user: &str = row.try_get(4).map_err(corrupt)?;
    Ok(Draft {
        stream_id: row.try_get(0).map_err(corrupt)?,
        session_id: row.try_get(1).map_err(corrupt)?,
        owner: row.try_get(2).map_err(corrupt)?,
        refreshed_at: row.try_get(3).map_err(corrupt)?,
        user: serde_json::from_str(user)
            .map_err(|e| Error::StorageUnavailable(format!("a draft's user message does not parse: {e}")))?,
        text: row.try_get(5).map_err(corrupt)?,
    })
}

pub async fn put_draft(db: Db<'_>, d: &Draft) -> Result<()> {
    let user = serde_json::to_string(&d.user).map_err(|e| Error::Internal(e.to_string()))?;
    let sql = format!(
        "INSERT INTO convo.drafts ({DRAFT_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (stream_id) DO UPDATE \
         SET session_id = $2, owner = $3, refreshed_at = $4, user_message = $5, text = $6"
    );
    execute(db, &sql, &[&d.stream_id, &d.session_id, &d.owner, &d.refreshed_at, &user, &d.text]).await.map(drop)
}

pub async fn get_draft(db: Db<'_>, stream_id: &str) -> Result<Option<Draft>> {
    let sql = format!("SELECT {DRAFT_COLUMNS} FROM convo.drafts WHERE stream_id = $1");
    query_opt(db, &sql, &[&stream_id]).await?.as_ref().map(draft).transpose()
}

pub async fn newest_draft_of(db: Db<'_>, session_id: &str) -> Result<Option<Draft>> {
    let sql =
        format!("SELECT {DRAFT_COLUMNS} FROM convo.drafts WHERE session_id = $1 ORDER BY refreshed_at DESC LIMIT 1");
    query_opt(db, &sql, &[&session_id]).await?.as_ref().map(draft).transpose()
}

pub async fn delete_draft(db: Db<'_>, stream_id: &str) -> Result<()> {
    execute(db, "DELETE FROM convo.drafts WHERE stream_id = $1", &[&stream_id]).await.map(drop)
}

pub async fn stale_drafts(db: Db<'_>, before: i64) -> Result<Vec<String>> {
    let rows = query(db, "SELECT stream_id FROM convo.drafts WHERE refreshed_at < $1", &[&before]).await?;
    rows.iter().map(|r| r.try_get(0).map_err(corrupt)).collect()
}
