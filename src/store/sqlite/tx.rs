//! The statements of the shared SQL algorithms (`store::sql::Tx`) on one SQLite
//! connection: each a cached prepared statement, run at once (SQLite never makes a step
//! wait, so `store::sql::run_now` completes every body in one poll).

use std::ops::Range;
use std::sync::Arc;

use rusqlite::{Connection, OptionalExtension, params};

use crate::error::Result;
use crate::pool::Beside;
use crate::session::{Draft, Message, Role, SessionInfo};
use crate::store::feed::ChangeKind;
use crate::store::sql::tx::Appending;
use crate::store::sql::{Listing, Searching, SessionRow, Tx, parse_role};
use crate::store::sqlite::errors::sql;
use crate::store::sqlite::reads::Other;
use crate::store::sqlite::rendered::CHUNK;
use crate::store::sqlite::rows::{self, MESSAGE_COLUMNS, SESSION_COLUMNS};
use crate::store::sqlite::{changes, commit, drafts, search};
use crate::store::{Found, MessageJson, message_json};

/// One connection, in the transaction the caller opened; a read's may start another
/// read beside it (`Other`).
pub struct Lite<'c> {
    conn: &'c Connection,
    other: Option<&'c Other>,
}

/// How many messages a read of one range must want before it is read in two halves at
/// once (`messages_json`).
const HALVED: u64 = 2048;

/// A range's second half read on another connection (`Lite::read_beside`).
type SecondHalf = Beside<Result<Option<Vec<MessageJson>>>>;

impl<'c> Lite<'c> {
    pub fn new(conn: &'c Connection) -> Self {
        Lite { conn, other: None }
    }

    /// In a read transaction that may start another beside it.
    pub fn reading(conn: &'c Connection, other: &'c Other) -> Self {
        Lite { conn, other: Some(other) }
    }

    /// Messages `[mid, hi)` of `segment`, started on another connection at once when
    /// `[lo, hi)` is long enough to halve and the pool has a place free; read there only
    /// if that connection sees this one's snapshot (`Ok(None)` if not).
    fn read_beside(&self, segment: i64, lo: u64, mid: u64, hi: u64) -> Option<SecondHalf> {
        let other = self.other.filter(|_| hi - lo >= HALVED)?;
        let newest = changes::newest(self.conn).ok()?;
        other.try_read(move |c| match changes::newest(c).map_err(sql)? == newest {
            true => spliced_rows(c, segment, mid, hi).map(Some),
            false => Ok(None),
        })
    }

    /// Messages `[lo, hi)` of `segment` from the database. A long range is read in two
    /// halves at once, the second on another connection (a second core stepping and
    /// splicing), when that connection's snapshot is this one's: when the change log's
    /// newest row is the same in both, since every committed change to a session's
    /// messages logs one in its own transaction (`changes::record`). Otherwise, or when
    /// the pool has no place free or the other read fails, this connection reads it all.
    fn read_json(&self, segment: i64, lo: u64, hi: u64) -> Result<Vec<MessageJson>> {
        let mid = lo + (hi - lo) / 2;
        let Some(second) = self.read_beside(segment, lo, mid, hi) else {
            return spliced_rows(self.conn, segment, lo, hi);
        };
        let mut out = spliced_rows(self.conn, segment, lo, mid)?;
        match second.wait() {
            Ok(Ok(Some(rest))) => out.extend(rest),
            _ => out.extend(spliced_rows(self.conn, segment, mid, hi)?),
        }
        Ok(out)
    }

    pub fn conn(&self) -> &'c Connection {
        self.conn
    }

    fn optional_i64(&self, query: &str, id: i64) -> Result<Option<i64>> {
        self.conn.prepare_cached(query).and_then(|mut s| s.query_row([id], |r| r.get(0))).map_err(sql)
    }

    fn run(&self, query: &str, p: impl rusqlite::Params) -> Result<()> {
        self.conn.prepare_cached(query).and_then(|mut s| s.execute(p)).map(drop).map_err(sql)
    }
}

fn role(text: String) -> rusqlite::Result<Role> {
    parse_role(&text)
        .ok_or_else(|| rusqlite::Error::FromSqlConversionFailure(0, rusqlite::types::Type::Text, text.into()))
}

impl Tx for Lite<'_> {
    async fn session(&self, id: &str, _lock: bool) -> Result<Option<SessionRow>> {
        rows::load_session(self.conn, id)
    }

    async fn put_session(&self, row: &SessionRow, _new: bool) -> Result<()> {
        // The writer holds the database: the id checked free is still free.
        rows::put_session(self.conn, row)
    }

    async fn put_appended(&self, row: &SessionRow) -> Result<()> {
        rows::put_appended(self.conn, row)
    }

    async fn delete_session(&self, id: &str) -> Result<()> {
        self.run("DELETE FROM sessions WHERE session_id = ?1", [id])
    }

    async fn list(&self, listing: &Listing) -> Result<Vec<SessionInfo>> {
        let Listing { limit, after, updated_before } = listing.clone();
        let (at, id) = after.map_or((None, None), |k| (Some(k.created_at), Some(k.session_id)));
        self.conn
            .prepare_cached(&list_query(at.is_some()))
            .and_then(|mut s| s.query_map(params![at, id, limit as i64, updated_before], rows::session)?.collect())
            .map(|rows: Vec<SessionRow>| rows.into_iter().map(|r| r.info).collect())
            .map_err(sql)
    }

    async fn updated_before(&self, at: &str) -> Result<Vec<String>> {
        self.conn
            .prepare_cached("SELECT session_id FROM sessions WHERE updated_at < ?1")
            .and_then(|mut s| s.query_map([at], |r| r.get(0))?.collect())
            .map_err(sql)
    }

    async fn record(&self, session_id: &str, revision: u64, kind: ChangeKind, message_count: u64) -> Result<()> {
        changes::record(self.conn, session_id, revision, kind, message_count)
    }

    async fn new_segment(&self, parent: Option<i64>, base: u64, owner: &str) -> Result<i64> {
        self.conn
            .prepare_cached("INSERT INTO segments (parent, base, owner) VALUES (?1, ?2, ?3)")
            .and_then(|mut s| s.insert(params![parent, base as i64, owner]))
            .map_err(sql)
    }

    async fn segment(&self, id: i64) -> Result<Option<(Option<i64>, u64)>> {
        self.conn
            .prepare_cached("SELECT parent, base FROM segments WHERE id = ?1")
            .and_then(|mut s| s.query_row([id], |r| Ok((r.get(0)?, r.get::<_, i64>(1)? as u64))).optional())
            .map_err(sql)
    }

    async fn lowest_start_on(&self, id: i64) -> Result<Option<u64>> {
        Ok(self.optional_i64("SELECT min(start) FROM sessions WHERE segment = ?1", id)?.map(|s| s as u64))
    }

    async fn forks_of(&self, id: i64) -> Result<Vec<i64>> {
        self.conn
            .prepare_cached("SELECT id FROM segments WHERE parent = ?1")
            .and_then(|mut s| s.query_map([id], |r| r.get(0))?.collect())
            .map_err(sql)
    }

    async fn highest_fork(&self, id: i64) -> Result<Option<u64>> {
        Ok(self.optional_i64("SELECT max(base) FROM segments WHERE parent = ?1", id)?.map(|b| b as u64))
    }

    async fn delete_segment(&self, id: i64) -> Result<()> {
        self.run("DELETE FROM segments WHERE id = ?1", [id])
    }

    async fn detach(&self, id: i64) -> Result<()> {
        self.run("UPDATE segments SET parent = NULL WHERE id = ?1", [id])
    }

    async fn insert(&self, segment: i64, seq: u64, message: &Message, revision: u64) -> Result<()> {
        rows::insert_message(self.conn, segment, seq, message, revision)
    }

    async fn origin(&self, segment: i64, seq: u64) -> Result<(Option<String>, u64)> {
        let place = rows::place(segment, seq)?;
        self.conn
            .prepare_cached(
                "SELECT s.owner, m.revision FROM messages m JOIN segments s ON s.id = ?1 WHERE m.place = ?2",
            )
            .and_then(|mut s| {
                s.query_row(params![segment, place], |r| {
                    Ok((r.get(0)?, r.get::<_, Option<i64>>(1)?.unwrap_or(0) as u64))
                })
            })
            .map_err(sql)
    }

    async fn messages(&self, segment: i64, lo: u64, hi: u64) -> Result<Vec<Message>> {
        let mut stmt = self
            .conn
            .prepare_cached(&format!(
                "SELECT {MESSAGE_COLUMNS} FROM messages WHERE place >= ?1 AND place < ?2 ORDER BY place"
            ))
            .map_err(sql)?;
        let mut found = stmt.query(rows::places(segment, lo, hi)?).map_err(sql)?;
        let mut out = Vec::new();
        while let Some(row) = found.next().map_err(sql)? {
            let mut message = rows::message(row).map_err(sql)?;
            rows::load_images(self.conn, &mut message)?;
            out.push(message);
        }
        Ok(out)
    }

    /// Spliced from the rows' columns (`spliced_rows`); on a read connection, the whole
    /// `rendered::CHUNK`-position pieces an earlier read kept are taken from there
    /// (`rendered`), the rest read (`read_json`) and its whole pieces kept.
    async fn messages_json(&self, segment: i64, lo: u64, hi: u64) -> Result<Vec<MessageJson>> {
        let chunks = lo.div_ceil(CHUNK)..hi / CHUNK;
        let Some(rendered) = self.other.map(Other::rendered).filter(|_| !chunks.is_empty()) else {
            return self.read_json(segment, lo, hi);
        };
        let Some(checked) = rendered.check(self.conn)? else { return self.read_json(segment, lo, hi) };
        let mut out = Vec::with_capacity((hi - lo) as usize);
        // Reads `[from, to)` into `out`, keeping the whole pieces it holds.
        let read = |out: &mut Vec<MessageJson>, from: u64, to: u64| -> Result<()> {
            let got = self.read_json(segment, from, to)?;
            if got.len() as u64 == to - from {
                for chunk in from.div_ceil(CHUNK)..to / CHUNK {
                    let at = (chunk * CHUNK - from) as usize;
                    rendered.keep(checked, segment, chunk, got[at..at + CHUNK as usize].to_vec());
                }
            }
            out.extend(got);
            Ok(())
        };
        let mut from = lo;
        for (chunk, kept) in chunks.clone().zip(rendered.take(checked, segment, chunks)) {
            if let Some(kept) = kept {
                if from < chunk * CHUNK {
                    read(&mut out, from, chunk * CHUNK)?;
                }
                out.extend(kept);
                from = (chunk + 1) * CHUNK;
            }
        }
        if from < hi {
            read(&mut out, from, hi)?;
        }
        Ok(out)
    }

    async fn newest(&self, segment: i64, lo: u64, hi: u64, limit: u64) -> Result<Vec<Message>> {
        let mut stmt = self
            .conn
            .prepare_cached(&format!(
                "SELECT {MESSAGE_COLUMNS} FROM messages WHERE place >= ?1 AND place < ?2 ORDER BY place DESC LIMIT ?3"
            ))
            .map_err(sql)?;
        let (from, to) = rows::places(segment, lo, hi)?;
        stmt.query_map(params![from, to, limit.min(i64::MAX as u64) as i64], rows::message)
            .and_then(|found| found.collect())
            .map_err(sql)
    }

    async fn roles(&self, segment: i64, lo: u64, hi: u64, limit: u64, newest_first: bool) -> Result<Vec<Role>> {
        let query = if newest_first {
            "SELECT role FROM messages WHERE place >= ?1 AND place < ?2 ORDER BY place DESC LIMIT ?3"
        } else {
            "SELECT role FROM messages WHERE place >= ?1 AND place < ?2 ORDER BY place LIMIT ?3"
        };
        let (from, to) = rows::places(segment, lo, hi)?;
        self.conn
            .prepare_cached(query)
            .and_then(|mut s| {
                s.query_map(params![from, to, limit.min(i64::MAX as u64) as i64], |r| role(r.get(0)?))?.collect()
            })
            .map_err(sql)
    }

    async fn places_of(&self, id: &str) -> Result<Vec<(i64, u64)>> {
        self.conn
            .prepare_cached("SELECT segment, seq FROM messages WHERE id = ?1")
            .and_then(|mut s| s.query_map([id], |r| Ok((r.get(0)?, r.get::<_, i64>(1)? as u64)))?.collect())
            .map_err(sql)
    }

    async fn id_at(&self, segment: i64, seq: u64) -> Result<Option<String>> {
        let place = rows::place(segment, seq)?;
        self.conn
            .prepare_cached("SELECT id FROM messages WHERE place = ?1")
            .and_then(|mut s| s.query_row([place], |r| r.get(0)).optional())
            .map_err(sql)
    }

    async fn delete_messages(&self, segment: i64, lo: u64, hi: u64) -> Result<()> {
        rows::delete_messages(self.conn, segment, lo, hi)
    }

    async fn put_draft(&self, draft: &Draft) -> Result<()> {
        drafts::put(self.conn, draft)
    }

    async fn draft(&self, stream_id: &str, _lock: bool) -> Result<Option<Draft>> {
        drafts::get(self.conn, stream_id)
    }

    async fn delete_draft(&self, stream_id: &str) -> Result<()> {
        drafts::delete(self.conn, stream_id)
    }

    async fn newest_draft(&self, session_id: &str) -> Result<Option<Draft>> {
        drafts::newest_of(self.conn, session_id)
    }

    async fn stale_drafts(&self, before: i64) -> Result<Vec<String>> {
        drafts::stale(self.conn, before)
    }

    async fn image(&self, reference: &str) -> Result<Option<String>> {
        rows::image(self.conn, reference)
    }

    async fn search(&self, searching: Searching<'_>) -> Result<Vec<Found>> {
        search::search(self.conn, searching)
    }

    fn carried(&self) -> Option<Appending> {
        commit::carried::<Appending>()
    }

    fn carry(&self, appending: Appending) {
        commit::carry(appending)
    }
}

/// Messages `[lo, hi)` of `segment`, spliced from the rows' columns where they have no
/// images (`rows::message_json`), into texts of about `SPLICED` bytes each (or to the end
/// of a `rendered::CHUNK`-position piece), so that a reply writes a long history in a few
/// pieces, and no message is an allocation of its own.
fn spliced_rows(conn: &Connection, segment: i64, lo: u64, hi: u64) -> Result<Vec<MessageJson>> {
    let mut stmt = conn
        .prepare_cached(&format!(
            "SELECT {MESSAGE_COLUMNS} FROM messages WHERE place >= ?1 AND place < ?2 ORDER BY place"
        ))
        .map_err(sql)?;
    let mut found = stmt.query(rows::places(segment, lo, hi)?).map_err(sql)?;
    let mut out = Vec::new();
    // The spliced text being written, and the messages' places in it.
    let (mut text, mut ranges) = (String::new(), Vec::new());
    while let Some(row) = found.next().map_err(sql)? {
        // A text ends where a piece `rendered` keeps does, so that a kept piece holds
        // no text of another.
        let at = lo + (out.len() + ranges.len()) as u64;
        if at.is_multiple_of(CHUNK) {
            spliced(&mut out, &mut text, &mut ranges);
        }
        if text.capacity() == 0 {
            // Room for the rows left in the range and the piece at 1 KB each, up to one
            // text's worth.
            let left = hi.saturating_sub(at).min(CHUNK - at % CHUNK) as usize;
            text.reserve(left.saturating_mul(1024).min(SPLICED + SPLICED / 8));
        }
        let end = text.len();
        if end > 0 {
            text.push(',');
        }
        let start = text.len();
        if rows::message_json(row, &mut text).map_err(sql)? {
            ranges.push(start..text.len());
            if text.len() >= SPLICED {
                spliced(&mut out, &mut text, &mut ranges);
            }
        } else {
            text.truncate(end);
            spliced(&mut out, &mut text, &mut ranges);
            let mut message = rows::message(row).map_err(sql)?;
            rows::load_images(conn, &mut message)?;
            out.push(message_json(&message)?);
        }
    }
    spliced(&mut out, &mut text, &mut ranges);
    Ok(out)
}

/// About how long each text is that `spliced_rows` splices rows into.
const SPLICED: usize = 1 << 20;

/// Hands out the messages spliced into `text` so far, leaving both empty.
fn spliced(out: &mut Vec<MessageJson>, text: &mut String, ranges: &mut Vec<Range<usize>>) {
    if !ranges.is_empty() {
        // A text kept (`rendered`) holds what was reserved for it: room a short range or
        // short rows left is given back.
        if text.capacity() > text.len() + text.len() / 4 {
            text.shrink_to_fit();
        }
        let text = Arc::new(std::mem::take(text));
        out.extend(ranges.drain(..).map(|range| MessageJson::Spliced { text: text.clone(), range }));
    }
}

/// `session/list`'s query: the first page, or (`after`) the page after a cursor. Two
/// statements, not one with `?1 IS NULL OR …`: SQLite seeks in `sessions_by_creation`
/// only for a plain row-value bound, and scanned from the newest session for every page.
fn list_query(after: bool) -> String {
    let bound = if after { "(created_at, session_id) < (?1, ?2)" } else { "?1 IS NULL AND ?2 IS NULL" };
    format!(
        "SELECT {SESSION_COLUMNS} FROM sessions WHERE {bound} AND (?4 IS NULL OR updated_at < ?4) \
         ORDER BY created_at DESC, session_id DESC LIMIT ?3"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::sql::run_now;
    use crate::store::sqlite::reads::Readers;
    use crate::store::sqlite::schema::{self, Mode, Settings};

    /// A range long enough to be halved is read in one snapshot: the same texts as one
    /// connection reads when nothing commits meanwhile, and this read's own snapshot when
    /// a change (its messages rewritten, logged as every change is) commits after the
    /// read began and before the second half's connection looks.
    #[tokio::test]
    async fn a_long_range_is_read_in_halves_from_one_snapshot() {
        // Its middle is not where a kept piece ends, where one connection's texts end too.
        let n = 3 * HALVED + 100;
        let (_dir, writer, readers, _) = rendered_store(n);
        let texts = |out: Vec<MessageJson>| out.iter().map(|m| m.get().to_owned()).collect::<Vec<_>>();

        // Whether the messages on either side of the middle were spliced apart: one
        // connection splices 1 MiB at a time (or a kept piece's 1,024 of these),
        // the halves each their own.
        let mid = (n / 2) as usize;
        let apart_at_mid = move |out: &[MessageJson]| match (&out[mid - 1], &out[mid]) {
            (MessageJson::Spliced { text: a, .. }, MessageJson::Spliced { text: b, .. }) => !Arc::ptr_eq(a, b),
            _ => panic!("a row without images is spliced"),
        };

        let ((split, halves), (unsplit, whole)) = readers
            .read(move |c, other| {
                let halves = Lite::reading(c, other).read_json(1, 0, n)?;
                let whole = spliced_rows(c, 1, 0, n)?;
                Ok(((apart_at_mid(&halves), texts(halves)), (apart_at_mid(&whole), texts(whole))))
            })
            .await
            .unwrap();
        assert!(split && !unsplit, "apart at the middle: read in halves {split}, by one connection {unsplit}");
        assert_eq!(halves.len(), n as usize);
        assert_eq!(halves, whole);
        assert!(halves[n as usize - 1].contains(&format!(r#""message {}""#, n - 1)));

        let (before, after) = readers
            .read(move |c, other| {
                // The snapshot begins with this read; then another connection commits.
                let before = texts(spliced_rows(c, 1, 0, n)?);
                writer.execute_batch("BEGIN; UPDATE messages SET content = '\"changed\"'").unwrap();
                changes::record(&writer, "s", 2, ChangeKind::Updated, n).unwrap();
                writer.execute_batch("COMMIT").unwrap();
                let after = texts(Lite::reading(c, other).read_json(1, 0, n)?);
                Ok((before, after))
            })
            .await
            .unwrap();
        assert_eq!(after, before);
        assert!(!after.iter().any(|t| t.contains("changed")));
        let now = readers.read(move |c, other| Ok(texts(Lite::reading(c, other).read_json(1, 0, n)?)));
        assert!(now.await.unwrap().iter().all(|t| t.contains(r#""content":"changed""#)));
    }

    /// A store's file with `n` messages in segment 1, "message {seq}" each, and its readers.
    fn rendered_store(n: u64) -> (tempfile::TempDir, Connection, Readers, Settings) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sessions.db");
        let settings = Settings {
            full_durability: false,
            busy_timeout: std::time::Duration::from_secs(5),
            follow_symlinks: false,
        };
        std::fs::File::create(&path).unwrap();
        let writer = schema::open_writer(&path, settings).unwrap();
        write_rows(&writer, "message", 0..n, ChangeKind::Appended);
        let first = schema::open_reader(&path, settings, Mode::Shared).unwrap();
        let readers = Readers::new(path, settings, Mode::Shared, first);
        (dir, writer, readers, settings)
    }

    /// Writes positions `seqs` of segment 1 in one transaction that logs `kind`; a change
    /// that is not an append first deletes what is there, as reclaiming a segment whose
    /// id is then taken again would.
    fn write_rows(writer: &Connection, word: &str, seqs: Range<u64>, kind: ChangeKind) {
        writer.execute_batch("BEGIN").unwrap();
        if kind != ChangeKind::Appended {
            rows::delete_messages(writer, 1, seqs.start, seqs.end).unwrap();
        }
        for seq in seqs.clone() {
            let m = Message::new(Role::User, format!("{word} {seq}").into());
            rows::insert_message(writer, 1, seq, &m, 1).unwrap();
        }
        changes::record(writer, "s", 1, kind, seqs.end).unwrap();
        writer.execute_batch("COMMIT").unwrap();
    }

    /// The messages of positions `[0, n)` of segment 1, as a read of `readers` gives them.
    async fn read_rendered(readers: &Readers, n: u64) -> Vec<MessageJson> {
        read_range(readers, 0, n).await
    }

    /// The messages of positions `[lo, hi)` of segment 1, as a read of `readers` gives them.
    async fn read_range(readers: &Readers, lo: u64, hi: u64) -> Vec<MessageJson> {
        readers.read(move |c, other| run_now(Lite::reading(c, other).messages_json(1, lo, hi))).await.unwrap()
    }

    fn same_text(a: &MessageJson, b: &MessageJson) -> bool {
        match (a, b) {
            (MessageJson::Spliced { text: a, .. }, MessageJson::Spliced { text: b, .. }) => Arc::ptr_eq(a, b),
            _ => panic!("a row without images is spliced"),
        }
    }

    fn texts_of(out: &[MessageJson]) -> Vec<String> {
        out.iter().map(|m| m.get().to_owned()).collect()
    }

    /// A read keeps the whole pieces it read, the next takes them (the very texts) and
    /// reads only the rest, and an append leaves them kept; what comes back is always
    /// what the database holds.
    #[tokio::test]
    async fn whole_pieces_are_kept_and_taken_by_the_next_read() {
        let n = 2 * CHUNK + 10;
        let (_dir, writer, readers, _) = rendered_store(n);
        let first = read_rendered(&readers, n).await;
        let whole = |n: u64| texts_of(&spliced_rows(&writer, 1, 0, n).unwrap());
        assert_eq!(texts_of(&first), whole(n));
        assert_eq!(readers.rendered().kept().0, 2);
        assert!(!same_text(&first[CHUNK as usize - 1], &first[CHUNK as usize]), "a text ends with its piece");

        let again = read_rendered(&readers, n).await;
        assert_eq!(texts_of(&again), whole(n));
        assert!(
            same_text(&first[0], &again[0])
                && same_text(&first[2 * CHUNK as usize - 1], &again[2 * CHUNK as usize - 1])
        );
        assert!(!same_text(&first[2 * CHUNK as usize], &again[2 * CHUNK as usize]), "the rest is read again");

        let m = 3 * CHUNK + 5;
        write_rows(&writer, "message", n..m, ChangeKind::Appended);
        let grown = read_rendered(&readers, m).await;
        assert_eq!(texts_of(&grown), whole(m));
        assert!(same_text(&first[0], &grown[0]), "an append leaves the pieces kept");
        assert_eq!(readers.rendered().kept().0, 3);
        // A read that starts inside a piece takes the whole ones after it.
        let inside = read_range(&readers, 5, m - 1).await;
        assert_eq!(texts_of(&inside), whole(m)[5..(m - 1) as usize]);
        assert!(same_text(&first[CHUNK as usize], &inside[CHUNK as usize - 5]));
    }

    /// A change that is not an append lets every piece go, for whichever read sees it
    /// first; a read in a snapshot older than the newest checked neither takes nor keeps
    /// pieces, and reads its own snapshot.
    #[tokio::test]
    async fn a_change_that_is_not_an_append_lets_the_pieces_go() {
        let n = 2 * CHUNK;
        let (dir, writer, readers, settings) = rendered_store(n);
        let path = dir.path().join("sessions.db");
        let (old, new) = readers
            .read(move |c, other| {
                let before = run_now(Lite::reading(c, other).messages_json(1, 0, n))?;
                // The same positions rewritten, as when a deleted segment's id is taken again.
                write_rows(&writer, "rewritten", 0..n, ChangeKind::Deleted);
                let newer = schema::open_reader(&path, settings, Mode::Shared).unwrap();
                newer.execute_batch("BEGIN").unwrap();
                let new = run_now(Lite::reading(&newer, other).messages_json(1, 0, n))?;
                newer.execute_batch("COMMIT").unwrap();
                let old = run_now(Lite::reading(c, other).messages_json(1, 0, n))?;
                assert!(!same_text(&before[0], &old[0]), "the older snapshot took no piece");
                Ok((texts_of(&old), new))
            })
            .await
            .unwrap();
        assert!(old.iter().enumerate().all(|(i, t)| t.contains(&format!(r#""message {i}""#))));
        assert!(texts_of(&new).iter().enumerate().all(|(i, t)| t.contains(&format!(r#""rewritten {i}""#))));
        let now = read_rendered(&readers, n).await;
        assert_eq!(texts_of(&now), texts_of(&new));
        assert!(same_text(&now[0], &new[0]), "the pieces the newer snapshot kept");
    }

    /// Pieces are let go when the change log no longer holds every row since the cache
    /// last looked (pruned behind its newest), since a row pruned may have been any change.
    #[tokio::test]
    async fn a_log_pruned_past_the_last_look_lets_the_pieces_go() {
        let n = CHUNK;
        let (_dir, writer, readers, _) = rendered_store(n);
        let first = read_rendered(&readers, n).await;
        write_rows(&writer, "message", n..n + 1, ChangeKind::Appended);
        assert!(same_text(&first[0], &read_rendered(&readers, n).await[0]));
        write_rows(&writer, "message", n + 1..n + 2, ChangeKind::Appended);
        write_rows(&writer, "message", n + 2..n + 3, ChangeKind::Appended);
        let newest = changes::newest(&writer).unwrap();
        writer.execute("DELETE FROM changes WHERE seq = ?1", [newest - 1]).unwrap();
        let after = read_rendered(&readers, n).await;
        assert!(!same_text(&first[0], &after[0]));
        assert_eq!(texts_of(&after), texts_of(&first));
    }

    /// A page after a cursor seeks in the index (issue 47: each page had scanned every
    /// newer session, 41 ms a page at 100,000 sessions).
    #[test]
    fn a_page_after_a_cursor_seeks_in_the_creation_index() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(&format!("CREATE TABLE sessions ({SESSION_COLUMNS})")).unwrap();
        conn.execute_batch("CREATE INDEX sessions_by_creation ON sessions(created_at DESC, session_id DESC)").unwrap();
        let plan = |after: bool| -> String {
            let query = format!("EXPLAIN QUERY PLAN {}", list_query(after));
            let mut s = conn.prepare(&query).unwrap();
            let args = params!["2026-01-01T00:00:00.000000Z", "s", 100, None::<String>];
            let rows: Vec<String> = s.query_map(args, |r| r.get::<_, String>(3)).unwrap().map(|r| r.unwrap()).collect();
            rows.join("; ")
        };
        assert_eq!(plan(true), "SEARCH sessions USING INDEX sessions_by_creation ((created_at,session_id)<(?,?))");
        assert!(plan(false).starts_with("SCAN sessions USING INDEX sessions_by_creation"), "{}", plan(false));
    }
}
