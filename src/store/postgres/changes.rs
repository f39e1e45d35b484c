//! Changes across processes, none lost: each change is a row of the `changes` table,
//! written in the transaction that made it (with the id of that transaction), and a
//! notification on the channel `convo` naming the schema, which only wakes the readers.
//!
//! While anyone in this process watches, a task reads the table: at once when a
//! notification arrives, and every 250 ms whether or not one did (behind a pooler LISTEN
//! may not work, and notifications sent while the LISTEN connection reconnects are
//! lost). Each read takes the rows past the highest position it has seen, and the rows
//! of the transactions its last read could not see: those its snapshot lists as running,
//! and every one from the snapshot's `xmax` on, which PostgreSQL treats as running
//! without listing them (`xmax` is one past the highest id of the transactions finished,
//! so a transaction that took its id before a read, but after that one's, is not
//! listed). A row that was not visible then belongs to one of those, or was written
//! after that read (and so has a higher position). So a row committed late with a low
//! position is not skipped, and no row is delivered twice. LISTEN runs on a connection
//! of its own (`listen_url=`, else the store's URL), open only while someone watches.
//!
//! The table keeps every change of the last ten minutes, and each session's last change
//! for thirty days: a change removes its session's rows older than ten minutes, and the
//! writers remove, every minute, the rows that passed ten minutes in the last hour and
//! that a later row of their session follows (`prune`; a draft follows only drafts, and
//! the prune leaves rows another transaction holds for later, so it waits on no writer).
//! So a reader that could not read for longer than ten minutes (its process asleep with
//! the laptop, or cut off from the server) reads, when it reads again, the last change
//! of every session changed meanwhile: a subscriber is told each session's latest
//! change, as the protocol lets several changes be told as one. A draft of an older
//! revision than a change of its session told in the last minute is not told (`Told`).
//!
//! Failover: each read also names the server that answered it (its system identifier and
//! timeline). When that changes (a standby promoted), or the highest position went back,
//! the reader reads the table again as it stands on the new server, and delivers every
//! row it had not read before: the reader remembers the rows of its last `REMEMBERED`
//! positions, each by its transaction id and time, because a standby that was promoted
//! without the old primary's last commits gives the next changes the positions (and
//! transaction ids) of those lost commits. Below those positions (where the new server's
//! window reaches when its positions went back) it delivers only the rows of
//! transactions its last read could not see. So a subscriber misses no change committed
//! on the new primary. Of the commits the old primary lost (an asynchronous standby
//! only), a subscriber was told as they committed; they are not on the new primary, and
//! the changes after them may carry revisions already notified.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

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

/// Removes the rows a change of session `$1` and kind `$3` follows, older than ten
/// minutes: all of the session's, but a draft follows only drafts (a draft is saved
/// without the session's lock, so its row may come after that of a change it does not
/// follow). Only the session's writers take these rows, and the minute's `prune`, which
/// takes none another transaction holds: so a change waits on no writer of another
/// session, at most on a prune that took one of them first, for as long as it runs.
macro_rules! older_of_session {
    () => {
        "DELETE FROM convo.changes WHERE session_id = $1 AND at < now() - interval '10 minutes' \
         AND ($3 <> 'draft' OR kind = 'draft')"
    };
}

/// Writes the change, inside the transaction that made it (removing its session's rows
/// older than ten minutes, which it follows: `older_of_session`), and wakes the readers
/// when that transaction commits (PostgreSQL sends one notification per payload).
pub async fn record(db: Db<'_>, session_id: &str, revision: u64, kind: ChangeKind, message_count: u64) -> Result<()> {
    let sql = concat!(
        "WITH c AS (INSERT INTO convo.changes (session_id, revision, kind, message_count) VALUES ($1, $2, $3, $4)), ",
        "d AS (",
        older_of_session!(),
        ") SELECT pg_notify($5, $6)"
    );
    let schema = db.schema();
    let (revision, message_count) = (revision as i64, message_count as i64);
    execute(db, sql, &[&session_id, &revision, &kind.as_str(), &message_count, &CHANNEL, &schema]).await.map(drop)
}

/// Logs changes of one kind to one session, each a (revision, message count), in one
/// statement (in their order: the change table's positions follow it), with one
/// notification.
pub async fn record_each(db: Db<'_>, session_id: &str, kind: ChangeKind, changes: &[(u64, u64)]) -> Result<()> {
    let sql = concat!(
        "WITH c AS (INSERT INTO convo.changes (session_id, revision, kind, message_count) ",
        "SELECT $1, r.revision, $3, r.message_count ",
        "FROM unnest($2::int8[], $4::int8[]) WITH ORDINALITY AS r(revision, message_count, n) ORDER BY r.n), ",
        "d AS (",
        older_of_session!(),
        ") SELECT pg_notify($5, $6)"
    );
    let schema = db.schema();
    let (revisions, counts): (Vec<i64>, Vec<i64>) = changes.iter().map(|&(r, c)| (r as i64, c as i64)).unzip();
    execute(db, sql, &[&session_id, &revisions, &kind.as_str(), &counts, &CHANNEL, &schema]).await.map(drop)
}

/// Removes the rows older than ten minutes that a later row of their session follows,
/// of those that passed ten minutes in the last hour (so the last change of a session
/// that changes no more is not looked at again every minute), and every row older than
/// thirty days. A change removes its own session's older rows (`record`). The times are
/// reckoned from `now()`, the transaction's start, not `clock_timestamp()`: a volatile
/// function's value is not an index bound, and every row would be read. A draft's row
/// follows only drafts (`older_of_session`); rows another transaction holds (a change's
/// own removal) are left for the next minute, so the prune waits on no writer.
///
/// Without JIT: on a table of a million rows the planner's cost passes
/// `jit_above_cost`, and compiling the plan added 11 ms to each prune (38 ms against
/// 30), and 60 to 140 ms more at a connection's first, a writer's queue waiting
/// meanwhile. `SET LOCAL` holds for the statements sent with it, which run as one
/// transaction.
pub async fn prune(db: Db<'_>) -> Result<()> {
    let sql = "SET LOCAL jit = off; \
               DELETE FROM convo.changes WHERE pos IN (SELECT c.pos FROM convo.changes c \
               WHERE c.at < now() - interval '30 days' \
                  OR (c.at < now() - interval '10 minutes' \
                      AND c.at >= now() - interval '70 minutes' \
                      AND EXISTS (SELECT 1 FROM convo.changes d \
                                  WHERE d.session_id = c.session_id AND d.at >= c.at AND d.pos > c.pos \
                                    AND (d.kind <> 'draft' OR c.kind = 'draft'))) \
               FOR UPDATE OF c SKIP LOCKED)";
    db.client.batch_execute(&db.sql(sql)).await.map_err(pg)
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
    unseen: Unseen,
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

/// How long the reader remembers the revision of a session's last change told, to pass
/// over a draft of an older one read after it: far longer than a draft's transaction.
const STALE_DRAFT_WITHIN: Duration = Duration::from_secs(60);

/// The revision of each session's last change told that was not a draft, for the last
/// `STALE_DRAFT_WITHIN`. A draft is saved without its session's lock, so its row may
/// come after that of another process's later change; when one read took both, the
/// watcher keeps the later change (`Watcher::push`), and when the draft came in a later
/// read, the change was told already, and the draft, told after it, would put the
/// session's revision back.
#[derive(Default)]
struct Told {
    revisions: HashMap<String, (u64, Instant)>,
}

impl Told {
    /// Whether `change`, read at `now`, is told: all but a draft of a revision older
    /// than the session's last change told.
    fn admits(&mut self, change: &Change, now: Instant) -> bool {
        if change.kind == ChangeKind::Draft {
            return self.revisions.get(&change.session_id).is_none_or(|&(revision, _)| change.revision >= revision);
        }
        // A session deleted and created again starts from 0.
        self.revisions.insert(change.session_id.clone(), (change.revision, now));
        true
    }

    /// Forgets what was told more than `STALE_DRAFT_WITHIN` before `now`.
    fn forget_old(&mut self, now: Instant) {
        self.revisions.retain(|_, (_, at)| now.duration_since(*at) < STALE_DRAFT_WITHIN);
    }
}

async fn read(changes: Weak<Changes>, connections: Arc<Connections>, schema: Arc<str>, listen: Target) {
    let mut place: Option<Place> = None;
    let mut told = Told::default();
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
            told = Told::default();
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
                let now = Instant::now();
                told.forget_old(now);
                for change in found.into_iter().filter(|change| told.admits(change, now)) {
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
        Place { top: 0, unseen: Unseen::default(), server: Server { system: 0, timeline: 0 }, seen: Seen::default() }
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
    let (after, running, from_xmax, window) = match how {
        Scan::Start | Scan::Resume => (None, Vec::new(), None, Some(REMEMBERED)),
        Scan::Next => (Some(place.top), place.unseen.running.clone(), Some(place.unseen.xmax), None),
    };
    let params: [&dyn crate::store::postgres::rows::Param; 4] = [&after, &running, &window, &from_xmax];
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
    // Every row parsed before the place changes: a row that does not parse leaves it as
    // it was.
    match read_rows(&rows) {
        Ok((unseen, read)) => {
            let found = take(read, unseen, how, &mut place);
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

/// What a read could not see: the transactions its snapshot lists as running, and every
/// one from its `xmax` on.
#[derive(Default)]
struct Unseen {
    running: Vec<i64>,
    xmax: i64,
}

impl Unseen {
    fn holds(&self, xid: i64) -> bool {
        xid >= self.xmax || self.running.contains(&xid)
    }
}

/// A row of the change table, as a scan read it: its position, the transaction that
/// wrote it and when, and its change (`None` for a kind this version does not know).
#[derive(Debug)]
struct Read {
    pos: i64,
    xid: i64,
    stamp: i64,
    change: Option<Change>,
}

/// The rows of one `scan`, and what its snapshot could not see.
fn read_rows(rows: &[tokio_postgres::Row]) -> std::result::Result<(Unseen, Vec<Read>), tokio_postgres::Error> {
    // Every row carries the snapshot's columns; `scan` reads from the first.
    let unseen = match rows.first() {
        Some(row) => Unseen { running: row.try_get(0)?, xmax: row.try_get(4)? },
        None => Unseen::default(),
    };
    let mut read = Vec::with_capacity(rows.len());
    for row in rows {
        let Some(pos) = row.try_get::<_, Option<i64>>(5)? else { continue };
        let kind: String = row.try_get(8)?;
        let change = match ChangeKind::parse(&kind) {
            Some(kind) => Some(Change {
                session_id: row.try_get(6)?,
                revision: row.try_get::<_, i64>(7)? as u64,
                kind,
                message_count: row.try_get::<_, i64>(9)? as u64,
            }),
            None => None,
        };
        read.push(Read { pos, xid: row.try_get(10)?, stamp: row.try_get(11)?, change });
    }
    Ok((unseen, read))
}

/// Takes the rows of one `scan` into `place` (what its snapshot could not see, the
/// highest position, the rows remembered); the changes to deliver. None at the start. On
/// a resume, those not read before: a row the reader remembers only if it differs from
/// the one it read at that position; a row below the positions it remembers (the
/// resume's window reaches lower when positions went back) only if the last read could
/// not see its transaction, since every row it could see was read then or before.
fn take(read: Vec<Read>, unseen: Unseen, how: Scan, place: &mut Place) -> Vec<Change> {
    let remembered_from = place.top - REMEMBERED + 1;
    let last = std::mem::replace(&mut place.unseen, unseen);
    let mut found = Vec::new();
    for row in read {
        place.top = place.top.max(row.pos);
        let fresh = place.seen.note(row.pos, (row.xid, row.stamp));
        let tell = match how {
            Scan::Start => false,
            Scan::Next => fresh,
            Scan::Resume => fresh && (row.pos >= remembered_from || last.holds(row.xid)),
        };
        if let (true, Some(change)) = (tell, row.change) {
            found.push(change);
        }
    }
    found
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

#[cfg(test)]
mod tests {
    use super::*;

    fn change(session_id: &str) -> Option<Change> {
        Some(Change { session_id: session_id.into(), revision: 1, kind: ChangeKind::Appended, message_count: 1 })
    }

    fn row(pos: i64, xid: i64, session_id: &str) -> Read {
        Read { pos, xid, stamp: xid * 10, change: change(session_id) }
    }

    fn told(found: &[Change]) -> Vec<&str> {
        found.iter().map(|c| c.session_id.as_str()).collect()
    }

    /// A draft read after a later change of its session was told is passed over, for a
    /// minute; a draft of that revision or later, and every other change, is told.
    #[test]
    fn a_draft_older_than_a_change_told_before_it_is_not_told() {
        let at = |revision, kind| Change { session_id: "s".into(), revision, kind, message_count: revision };
        let start = Instant::now();
        let mut told = Told::default();
        let sequence = [
            (at(2, ChangeKind::Appended), true),
            (at(1, ChangeKind::Draft), false),
            (at(2, ChangeKind::Draft), true),
            (at(3, ChangeKind::Draft), true),
            (at(3, ChangeKind::Appended), true),
            (at(2, ChangeKind::Draft), false),
            (at(5, ChangeKind::Deleted), true),
            (at(0, ChangeKind::Created), true),
            (at(0, ChangeKind::Draft), true),
        ];
        for (change, expected) in sequence {
            assert_eq!(told.admits(&change, start), expected, "{change:?}");
        }
        let other = Change { session_id: "t".into(), ..at(0, ChangeKind::Draft) };
        assert!(told.admits(&other, start), "another session's draft");
        told.admits(&at(4, ChangeKind::Appended), start);
        told.forget_old(start + STALE_DRAFT_WITHIN - Duration::from_millis(1));
        assert!(!told.admits(&at(1, ChangeKind::Draft), start), "within the minute");
        told.forget_old(start + STALE_DRAFT_WITHIN);
        assert!(told.admits(&at(1, ChangeKind::Draft), start), "after it");
        assert!(told.revisions.is_empty());
    }

    /// A reader whose last read saw positions up to 40,000 (so it remembers those from
    /// 23,617 on), each written by the transaction of its number, but for transaction 7,
    /// running then (its row at position 7 not visible); none from 50,000 on had begun as
    /// far as it could tell.
    fn behind() -> Place {
        let mut place = Place::default();
        let read = (1..=40_000).filter(|&pos| pos != 7).map(|pos| row(pos, pos, "old")).collect();
        take(read, Unseen { running: vec![7], xmax: 50_000 }, Scan::Next, &mut place);
        place.seen.forget_below(place.top);
        place
    }

    #[test]
    fn a_next_read_tells_each_row_once() {
        let mut place = behind();
        let unseen = || Unseen { running: vec![], xmax: 50_010 };
        let found = take(vec![row(40_001, 50_001, "a"), row(7, 7, "late")], unseen(), Scan::Next, &mut place);
        assert_eq!(told(&found), ["a", "late"]);
        assert_eq!(place.top, 40_001);
        // The same rows again (a retried read): nothing.
        assert!(take(vec![row(40_001, 50_001, "a")], unseen(), Scan::Next, &mut place).is_empty());
    }

    /// A resume after positions went back (an asynchronous standby promoted without the
    /// last 10,000 positions): its window reaches below what the reader remembers.
    #[test]
    fn a_resume_tells_below_what_it_remembers_only_what_the_last_read_could_not_see() {
        let mut place = behind();
        let read = vec![
            // Below what is remembered: read long ago, or not visible to the last read.
            row(13_617, 13_617, "read long ago"),
            row(7, 7, "running then"),
            row(13_618, 50_003, "begun after"),
            // Remembered: the very row, or another at that position.
            row(23_617, 23_617, "remembered"),
            row(30_000, 50_004, "new at an old position"),
        ];
        let found = take(read, Unseen { running: vec![], xmax: 50_010 }, Scan::Resume, &mut place);
        assert_eq!(told(&found), ["running then", "begun after", "new at an old position"]);
    }

    #[test]
    fn a_start_tells_nothing() {
        let mut place = Place::default();
        let found = take(vec![row(1, 1, "a")], Unseen { running: vec![], xmax: 2 }, Scan::Start, &mut place);
        assert!(found.is_empty());
        assert_eq!(place.top, 1);
    }
}
