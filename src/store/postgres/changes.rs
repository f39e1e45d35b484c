//! Changes across processes, none lost: each change is a row of the `changes` table,
//! written in the transaction that made it (with the id of that transaction), and a
//! notification on the channel `convo` naming the schema, which only wakes the readers.
//!
//! While anyone in this process watches, a task reads the table: at once when a
//! notification arrives, and every 250 ms whether or not one did (behind a pooler LISTEN
//! may not work, and notifications sent while the LISTEN connection reconnects are lost).
//! Each read takes the rows past the highest position it has seen, and the rows of the
//! transactions its last read could not see: those its snapshot lists as running, and
//! every one from the snapshot's `xmax` on, which PostgreSQL treats as running without
//! listing them (`xmax` is one past the highest id of the transactions finished, so a
//! transaction that took its id before a read, but after that one's, is not listed). A
//! row that was not visible then belongs to one of those, or was written after that
//! read (and so has a higher position). So a row committed late with a low position is
//! not skipped, and no row is delivered twice. LISTEN runs on a connection of its own (`listen_url=`, else the
//! store's URL), open only while someone watches; rows older than ten minutes are
//! removed by the writers.
//!
//! Failover: each read also names the server that answered it (its system identifier
//! and timeline). When that changes (a standby promoted), or the highest position went
//! back, the reader reads the table again as it stands on the new server, and delivers
//! every row it had not read before: the reader remembers the rows of its last
//! `REMEMBERED` positions, each by its transaction id and time, because a standby that
//! was promoted without the old primary's last commits gives the next changes the
//! positions (and transaction ids) of those lost commits. So a subscriber misses no
//! change committed on the new primary. Of the commits the old primary lost (an
//! asynchronous standby only), a subscriber was told as they committed; they are not on
//! the new primary, and the changes after them may carry revisions already notified.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use futures_util::StreamExt as _;
use tokio::sync::Notify;
use tokio_postgres::AsyncMessage;

use crate::error::Result;
use crate::store::feed::{Change, ChangeKind, Feed, Watcher};
use crate::store::postgres::connect::Target;
use crate::store::postgres::errors::pg;
use crate::store::postgres::pool::{self, Connections};
use crate::store::postgres::rows::{Db, execute, query};

pub const CHANNEL: &str = "convo";
/// How often the table is read while someone watches, notification or not.
const POLL: Duration = Duration::from_millis(250);
/// How long `watch` waits for the reader to be in place before it gives up waiting.
const READY_WITHIN: Duration = Duration::from_secs(10);

/// Writes the change, inside the transaction that made it, and wakes the readers when
/// that transaction commits (PostgreSQL sends one notification per payload).
pub async fn record(db: Db<'_>, session_id: &str, revision: u64, kind: ChangeKind, message_count: u64) -> Result<()> {
    let sql = "WITH c AS (INSERT INTO convo.changes (session_id, revision, kind, message_count) \
               VALUES ($1, $2, $3, $4)) SELECT pg_notify($5, $6)";
    let schema = db.schema();
    let (revision, message_count) = (revision as i64, message_count as i64);
    execute(db, sql, &[&session_id, &revision, &kind.as_str(), &message_count, &CHANNEL, &schema]).await.map(drop)
}

/// Logs changes of one kind to one session, each a (revision, message count), in one
/// statement (in their order: the change table's positions follow it), with one
/// notification.
pub async fn record_each(db: Db<'_>, session_id: &str, kind: ChangeKind, changes: &[(u64, u64)]) -> Result<()> {
    let sql = "WITH c AS (INSERT INTO convo.changes (session_id, revision, kind, message_count) \
               SELECT $1, r.revision, $2, r.message_count \
               FROM unnest($3::int8[], $4::int8[]) WITH ORDINALITY AS r(revision, message_count, n) ORDER BY r.n) \
               SELECT pg_notify($5, $6)";
    let schema = db.schema();
    let (revisions, counts): (Vec<i64>, Vec<i64>) = changes.iter().map(|&(r, c)| (r as i64, c as i64)).unzip();
    execute(db, sql, &[&session_id, &kind.as_str(), &revisions, &counts, &CHANNEL, &schema]).await.map(drop)
}

/// Removes the changes every reader has had time to read.
pub async fn prune(db: Db<'_>) -> Result<u64> {
    execute(db, "DELETE FROM convo.changes WHERE at < clock_timestamp() - interval '10 minutes'", &[]).await
}

/// This process's readers of the change table, and who waits for them.
pub struct Changes {
    feed: Arc<Feed>,
    /// Woken by a notification, a new watcher, and the end of the store.
    wake: Notify,
    /// Watchers registered so far, and how many of them the reader has taken in.
    wanted: AtomicU64,
    ready: tokio::sync::watch::Sender<u64>,
}

impl Changes {
    /// Starts the reader task, which sleeps while nobody watches; it ends with the store.
    pub fn start(connections: Arc<Connections>, schema: Arc<str>, listen: Target) -> Arc<Self> {
        let changes = Arc::new(Changes {
            feed: Arc::default(),
            wake: Notify::new(),
            wanted: AtomicU64::new(0),
            ready: tokio::sync::watch::channel(0).0,
        });
        tokio::spawn(read(Arc::downgrade(&changes), connections, schema, listen));
        changes
    }

    /// Watches every change committed from now on: returns once the reader has read the
    /// table after the watcher was registered. When it has not within `READY_WITHIN`
    /// (the server cannot be read), `StorageUnavailable`, and nothing is watched: the
    /// first read the reader makes only finds where "now" is, so the changes committed
    /// until then would never be told.
    pub async fn watch(&self) -> Result<Arc<Watcher>> {
        let watcher = self.feed.watch();
        let ticket = self.wanted.fetch_add(1, Ordering::AcqRel) + 1;
        self.wake.notify_one();
        let mut ready = self.ready.subscribe();
        match tokio::time::timeout(READY_WITHIN, ready.wait_for(|taken| *taken >= ticket)).await {
            Ok(Ok(_)) => Ok(watcher),
            _ => Err(crate::Error::StorageUnavailable(format!(
                "the change table could not be read within {} s; nothing is watched",
                READY_WITHIN.as_secs()
            ))),
        }
    }
}

/// Where the last read left off: the highest position seen, the transactions it could
/// not see (those listed as running, and every one from `xmax` on), the server that
/// answered, and the changes read lately.
struct Place {
    top: i64,
    running: Vec<i64>,
    xmax: i64,
    server: Server,
    seen: Seen,
}

/// The server a read was answered by: its cluster's system identifier and its timeline.
/// A standby promoted keeps the identifier and takes the next timeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Server {
    system: i64,
    timeline: i64,
}

/// The changes read lately, by position: the transaction that wrote each and when, so
/// that the rows a new primary wrote at positions already read (an asynchronous standby
/// promoted without the old primary's last commits reuses their positions, and their
/// transaction ids) are told from the rows read before. The last `REMEMBERED` positions.
#[derive(Default)]
struct Seen(BTreeMap<i64, (i64, i64)>);

/// How many positions below the highest a reader remembers: a standby that lagged by
/// more changes than these when it was promoted may have written changes no subscriber
/// is told of.
const REMEMBERED: i64 = 16_384;

impl Seen {
    /// Remembers a row; `true` when it is new (not a row read before at that position).
    fn note(&mut self, pos: i64, row: (i64, i64)) -> bool {
        self.0.insert(pos, row) != Some(row)
    }

    fn forget_below(&mut self, top: i64) {
        self.0 = self.0.split_off(&(top - REMEMBERED + 1));
    }
}

/// How a read finds the rows it wants.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Scan {
    /// The first: where "now" is, and the rows of the last `REMEMBERED` positions to
    /// remember (none delivered).
    Start,
    /// The rows past the last read's top, and those of the transactions it could not see.
    Next,
    /// On a new server (a promoted standby, positions that went back): the rows of the
    /// last `REMEMBERED` positions as they stand there, those not read before delivered.
    Resume,
}

async fn read(changes: Weak<Changes>, connections: Arc<Connections>, schema: Arc<str>, listen: Target) {
    let mut place: Option<Place> = None;
    let mut listener: Option<tokio::task::JoinHandle<()>> = None;
    let mut failing = false;
    loop {
        let Some(me) = changes.upgrade() else { break };
        if !me.feed.watched() {
            // Nobody watches: no LISTEN connection, no reads, and the place is forgotten
            // (the next watcher starts from its own "now").
            if let Some(task) = listener.take() {
                task.abort();
            }
            place = None;
            // Holding `me` meanwhile keeps the store's half alive a second at most.
            let _ = tokio::time::timeout(Duration::from_secs(1), me.wake.notified()).await;
            continue;
        }
        if listener.is_none() {
            listener = Some(tokio::spawn(listen_for(listen.clone(), schema.clone(), changes.clone())));
        }
        let taken = me.wanted.load(Ordering::Acquire);
        match next(&connections, &schema, place.take()).await {
            Ok((found, next_place)) => {
                for change in found {
                    me.feed.publish(change);
                }
                place = Some(next_place);
                me.ready.send_replace(taken);
                if failing {
                    tracing::info!("the change table can be read again");
                    failing = false;
                }
            }
            Err((e, kept)) => {
                place = kept;
                if !failing {
                    tracing::warn!(error = %e, "cannot read the change table; retrying");
                    failing = true;
                }
            }
        }
        let _ = tokio::time::timeout(POLL, me.wake.notified()).await;
    }
    if let Some(task) = listener {
        task.abort();
    }
}

/// One read: the changes committed since `place` (none at the first read, which only
/// finds where "now" is), and the place after it; on a server other than the last
/// read's, or one whose positions went back, the table read again as it stands there
/// (`Scan::Resume`). On failure, the place is given back as it was.
async fn next(
    connections: &Connections,
    schema: &str,
    place: Option<Place>,
) -> std::result::Result<(Vec<Change>, Place), (crate::Error, Option<Place>)> {
    let Some(place) = place else {
        let (_, place) = scan(connections, schema, Scan::Start, Place::default()).await.map_err(|(e, _)| (e, None))?;
        return Ok((Vec::new(), place.into_place()));
    };
    let (was, top) = (place.server, place.top);
    match scan(connections, schema, Scan::Next, place).await.map_err(|(e, p)| (e, Some(p)))? {
        (found, Moved::No(place)) => Ok((found, place)),
        (_, Moved::To(now, table_top, place)) => {
            tracing::warn!(
                before = ?was,
                now = ?now,
                top_before = top,
                top_now = table_top,
                "the change table is on a new server (a standby promoted?); reading it again as it stands"
            );
            let (found, place) = scan(connections, schema, Scan::Resume, place).await.map_err(|(e, p)| (e, Some(p)))?;
            Ok((found, place.into_place()))
        }
    }
}

impl Default for Place {
    fn default() -> Self {
        Place { top: 0, running: Vec::new(), xmax: 0, server: Server { system: 0, timeline: 0 }, seen: Seen::default() }
    }
}

/// What a `Scan::Next` found of the server: the same (the place after the read), or
/// another, or positions gone back (the server and its top, and the place as it was).
enum Moved {
    No(Place),
    To(Server, i64, Place),
}

impl Moved {
    /// A place a start or resume leaves: never moved.
    fn into_place(self) -> Place {
        match self {
            Moved::No(place) | Moved::To(_, _, place) => place,
        }
    }
}

/// Whether reads name the server that answered them: unless this role may not call the
/// functions that say so (then the server is named 0, and only positions that went back
/// show a new primary).
static IDENTIFY: AtomicBool = AtomicBool::new(true);

/// The statement of a `scan`. A primary's timeline is that of the WAL it writes; a
/// standby's, that of its last restart point.
fn scan_sql(identify: bool) -> String {
    let server = if identify {
        "(SELECT system_identifier FROM pg_control_system()) AS system, \
         CASE WHEN pg_is_in_recovery() THEN (SELECT timeline_id FROM pg_control_checkpoint())::int8 \
              ELSE ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int4::int8 \
         END AS timeline"
    } else {
        "0::int8 AS system, 0::int8 AS timeline"
    };
    format!(
        "SELECT r.running, r.top, r.system, r.timeline, r.xmax, \
                c.pos, c.session_id, c.revision, c.kind, c.message_count, c.xid, c.stamp \
         FROM (SELECT ARRAY(SELECT x::text::bigint FROM pg_snapshot_xip(pg_current_snapshot()) x) AS running, \
                      pg_snapshot_xmax(pg_current_snapshot())::text::bigint AS xmax, \
                      (SELECT coalesce(max(pos), 0) FROM convo.changes) AS top, {server}) r \
         LEFT JOIN (SELECT *, (extract(epoch FROM at) * 1000000)::int8 AS stamp FROM convo.changes) c \
           ON c.pos > $1 OR c.xid = ANY($2) OR c.xid >= $4 OR c.pos > r.top - $3 \
         ORDER BY c.pos"
    )
}

/// One statement, one snapshot: the rows `how` wants, the place after them, and the
/// changes to deliver.
async fn scan(
    connections: &Connections,
    schema: &str,
    how: Scan,
    mut place: Place,
) -> std::result::Result<(Vec<Change>, Moved), (crate::Error, Place)> {
    // The server gives up a read that waits longer than the busy timeout (on a lock,
    // say): the feed says so and reads again, instead of stalling without a word. A read
    // waiting in a pooler's queue for a server connection, or on a server that does not
    // answer, is given up here a second later, from its BEGIN to its COMMIT, and its
    // connection closed.
    let within = connections.patience().max(POLL * 4);
    let by = tokio::time::Instant::now() + within + Duration::from_secs(1);
    let not_read = |why: &str| {
        crate::Error::StorageUnavailable(format!("the change table was not read within {} ms{why}", within.as_millis()))
    };
    let opening = format!("BEGIN; SET LOCAL statement_timeout = {}", within.as_millis());
    let client = match connections.begin(&opening, Some(by)).await {
        Ok(client) => client,
        Err(_) if tokio::time::Instant::now() >= by => return Err((not_read(": no answer"), place)),
        Err(e) => return Err((e, place)),
    };
    let db = Db::new(&client, schema);
    let (after, running, unseen, window) = match how {
        Scan::Start | Scan::Resume => (None, Vec::new(), None, Some(REMEMBERED)),
        Scan::Next => (Some(place.top), place.running.clone(), Some(place.xmax), None),
    };
    let params: [&dyn crate::store::postgres::rows::Param; 4] = [&after, &running, &window, &unseen];
    let read = async {
        let rows = query(db, &scan_sql(IDENTIFY.load(Ordering::Relaxed)), &params).await;
        if let Err(crate::Error::StorageUnavailable(m)) = &rows
            && m.ends_with("(42501)")
            && IDENTIFY.swap(false, Ordering::Relaxed)
        {
            tracing::warn!(
                error = %m,
                "cannot ask PostgreSQL which server answers (pg_control_system, pg_control_checkpoint); \
                 a new primary is noticed only when change positions go back"
            );
            client.batch_execute(&format!("ROLLBACK; {opening}")).await.map_err(pg)?;
            return query(db, &scan_sql(false), &params).await;
        }
        rows
    };
    let rows = match tokio::time::timeout_at(by, read).await {
        Ok(read) => {
            // Ends a failed transaction too (as a rollback); a connection on which even
            // that fails, or that does not answer it in time, is not used again.
            if !matches!(pool::within(Some(by), client.batch_execute("COMMIT")).await, Some(Ok(()))) {
                drop(deadpool_postgres::Object::take(client));
            }
            match read {
                Ok(rows) => rows,
                Err(crate::Error::StorageUnavailable(m)) if m.ends_with("(57014)") => {
                    return Err((not_read(&format!(" ({m})")), place));
                }
                Err(e) => return Err((e, place)),
            }
        }
        Err(_) => {
            drop(deadpool_postgres::Object::take(client));
            return Err((not_read(": no answer"), place));
        }
    };
    let corrupt =
        |e: tokio_postgres::Error| crate::Error::StorageUnavailable(format!("a change row does not parse: {e}"));
    // The first row (there is one, with or without a change) says where the table is.
    let Some(first) = rows.first() else { return Ok((Vec::new(), Moved::No(place))) };
    let (server, top) = match (first.try_get(2), first.try_get(3), first.try_get::<_, i64>(1)) {
        (Ok(system), Ok(timeline), Ok(top)) => (Server { system, timeline }, top),
        (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => return Err((corrupt(e), place)),
    };
    if how == Scan::Next && (server != place.server || top < place.top) {
        return Ok((Vec::new(), Moved::To(server, top, place)));
    }
    match read_rows(&rows, how, &mut place) {
        Ok(found) => {
            place.server = server;
            if how != Scan::Next {
                place.top = top;
            }
            place.seen.forget_below(place.top);
            Ok((found, Moved::No(place)))
        }
        Err(e) => Err((corrupt(e), place)),
    }
}

/// Takes the rows of one `scan` into `place` (the transactions it could not see, the highest
/// position, the rows remembered); the changes to deliver: none at the start, and on a
/// resume only those not read before.
fn read_rows(
    rows: &[tokio_postgres::Row],
    how: Scan,
    place: &mut Place,
) -> std::result::Result<Vec<Change>, tokio_postgres::Error> {
    let mut found = Vec::new();
    for (i, row) in rows.iter().enumerate() {
        if i == 0 {
            place.running = row.try_get(0)?;
            place.xmax = row.try_get(4)?;
        }
        let Some(pos) = row.try_get::<_, Option<i64>>(5)? else { continue };
        place.top = place.top.max(pos);
        let fresh = place.seen.note(pos, (row.try_get(10)?, row.try_get(11)?));
        let kind: String = row.try_get(8)?;
        let Some(kind) = ChangeKind::parse(&kind) else { continue };
        if how == Scan::Start || !fresh {
            continue;
        }
        found.push(Change {
            session_id: row.try_get(6)?,
            revision: row.try_get::<_, i64>(7)? as u64,
            kind,
            message_count: row.try_get::<_, i64>(9)? as u64,
        });
    }
    Ok(found)
}

/// LISTENs while the reader lives, reconnecting after a lost connection, and wakes the
/// reader on each notification for this schema.
async fn listen_for(target: Target, schema: Arc<str>, changes: Weak<Changes>) {
    let mut wait = Duration::from_millis(100);
    while changes.strong_count() > 0 {
        match target.config.connect(target.tls.clone()).await {
            Ok((client, mut connection)) => {
                wait = Duration::from_millis(100);
                let mut messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
                let statement = format!("LISTEN {CHANNEL}");
                let listening = {
                    let listen = client.batch_execute(&statement);
                    let mut listen = std::pin::pin!(listen);
                    // Drive the connection until LISTEN is answered.
                    loop {
                        tokio::select! {
                            done = &mut listen => break done.map_err(|e| e.to_string()),
                            message = messages.next() => if message.is_none() { break Err("connection closed".into()) },
                        }
                    }
                };
                match listening {
                    Err(e) => tracing::warn!(error = %e, "cannot LISTEN for changes; reading the table every 250 ms"),
                    Ok(()) => {
                        // What was committed while nobody listened is read now.
                        if let Some(me) = changes.upgrade() {
                            me.wake.notify_one();
                        }
                        wake_on_notifications(&mut messages, &schema, &changes).await;
                    }
                }
                drop(client);
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot connect to LISTEN for changes; reading the table every 250 ms")
            }
        }
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(Duration::from_secs(5));
    }
}

/// Wakes the reader on each notification for `schema`, until the connection ends.
async fn wake_on_notifications<S>(messages: &mut S, schema: &str, changes: &Weak<Changes>)
where
    S: futures_util::Stream<Item = std::result::Result<AsyncMessage, tokio_postgres::Error>> + Unpin,
{
    while let Some(message) = messages.next().await {
        match message {
            Ok(AsyncMessage::Notification(n)) if n.payload() == schema => match changes.upgrade() {
                Some(me) => me.wake.notify_one(),
                None => return,
            },
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(error = %e, "the connection that listens for changes was lost");
                return;
            }
        }
    }
}
