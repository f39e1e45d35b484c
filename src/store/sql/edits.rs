//! Every mutation of the SQL stores, each the body of one transaction: it reads what it
//! needs, checks `expected_revision` there, applies the conversation rules
//! (`crate::session`), writes, and logs the change. A body that fails leaves its
//! transaction (or its savepoint) to be rolled back whole by the backend.
//!
//! Segments (`chain`): a trim moves `start`; a rewind, a clear and a compaction move the
//! session to a new segment, so that an archive (or a fork) keeps the old one whole; the
//! segment left behind is then reclaimed as far as nothing else uses it.

use std::collections::HashSet;

use crate::error::{Error, Result};
use crate::session::native::UsageTotals;
use crate::session::{
    Draft, DraftEnd, Fields, ForkPoint, Import, Message, Patch, SessionInfo, check_revision, compaction_message,
    new_session_id, plan_append,
};
use crate::store::feed::ChangeKind;
use crate::store::sql::chain::{self, fork_parent};
use crate::store::sql::rows::{SessionRow, Span, new_info, touch, touched};
use crate::store::sql::tx::{Appending, NewRow, Tx};
use crate::store::{Appended, Compacted, Doomed, Popped, Removed, Rewound};

async fn require<T: Tx + ?Sized>(tx: &T, id: &str) -> Result<SessionRow> {
    tx.session(id, true).await?.ok_or_else(|| Error::SessionNotFound(id.to_owned()))
}

/// A session locked, its revision checked.
async fn checked<T: Tx + ?Sized>(tx: &T, id: &str, expected_revision: Option<u64>) -> Result<SessionRow> {
    let row = require(tx, id).await?;
    check_revision(expected_revision, row.info.revision)?;
    Ok(row)
}

async fn free_id<T: Tx + ?Sized>(tx: &T, wanted: Option<String>) -> Result<String> {
    match wanted {
        Some(id) if tx.session(&id, false).await?.is_some() => Err(Error::SessionExists(id)),
        Some(id) => Ok(id),
        None => Ok(new_session_id()),
    }
}

/// Writes a session row after a change, and logs the change. A created, forked or
/// imported session is new: its id must still be free when the row goes in.
async fn put<T: Tx + ?Sized>(tx: &T, kind: ChangeKind, row: &SessionRow) -> Result<()> {
    let new = matches!(kind, ChangeKind::Created | ChangeKind::Imported) && row.info.revision == 0;
    tx.put_session(row, new).await?;
    tx.record(&row.info.session_id, row.info.revision, kind, row.count()).await
}

/// Inserts `messages` at `from` on, as stored by the change that makes `revision`.
async fn insert_all<T: Tx + ?Sized>(
    tx: &T,
    segment: i64,
    from: u64,
    messages: &[Message],
    revision: u64,
) -> Result<()> {
    let rows: Vec<NewRow> =
        messages.iter().enumerate().map(|(i, message)| NewRow { seq: from + i as u64, message, revision }).collect();
    tx.insert_rows(segment, &rows).await
}

pub async fn create<T: Tx + ?Sized>(tx: &T, session_id: Option<String>, fields: Fields) -> Result<SessionInfo> {
    let info = new_info(free_id(tx, session_id).await?, fields, None, 0);
    let segment = tx.new_segment(None, 0, &info.session_id).await?;
    put(tx, ChangeKind::Created, &SessionRow { info: info.clone(), segment, start: 0, len: 0 }).await?;
    Ok(info)
}

/// Creates queued back to back, applied as one (`jobs::apply_run`): the ids asked for
/// looked up together, then the sessions made together (`Tx::create_sessions`). The
/// sessions of the creates the run took, from the first on: it stops before a create
/// whose id is taken, or named by a create before it in the run, which is then applied
/// alone (and refused there).
pub async fn create_run<T: Tx + ?Sized>(tx: &T, run: Vec<(Option<String>, Fields)>) -> Result<Vec<SessionInfo>> {
    let wanted: Vec<&str> = run.iter().filter_map(|(id, _)| id.as_deref()).collect();
    let taken = tx.taken(&wanted).await?;
    let mut seen = HashSet::new();
    let fresh = run
        .iter()
        .position(|(id, _)| id.as_deref().is_some_and(|id| taken.contains(id) || !seen.insert(id)))
        .unwrap_or(run.len());
    let infos = run
        .into_iter()
        .take(fresh)
        .map(|(id, fields)| new_info(id.unwrap_or_else(new_session_id), fields, None, 0))
        .collect();
    Ok(tx.create_sessions(infos).await?.into_iter().map(|row| row.info).collect())
}

pub async fn update<T: Tx + ?Sized>(tx: &T, id: &str, patch: Patch, expected: Option<u64>) -> Result<SessionInfo> {
    let (row, changed) = patched(require(tx, id).await?, patch, expected)?;
    if changed {
        put(tx, ChangeKind::Updated, &row).await?;
    }
    Ok(row.info)
}

/// An update planned on its session's locked row: the row as it is to be, and whether it
/// changed (changing nothing keeps the revision).
fn patched(row: SessionRow, patch: Patch, expected: Option<u64>) -> Result<(SessionRow, bool)> {
    check_revision(expected, row.info.revision)?;
    let mut fields = row.fields();
    if !patch.apply(&mut fields) {
        return Ok((row, false));
    }
    let mut row = touched(row);
    (row.info.system, row.info.cwd, row.info.title, row.info.metadata) =
        (fields.system, fields.cwd, fields.title, fields.metadata);
    Ok((row, true))
}

/// Updates of distinct sessions queued back to back, applied as one (`jobs::apply_run`):
/// the rows locked together, in id order (as `delete_many` locks them, so that two runs
/// cannot deadlock), each update planned on its row, the changed rows and their changes
/// written together. Each update's answer, in order: one refused (no such session, a
/// stale revision) changes nothing and leaves the others be.
pub async fn update_run<T: Tx + ?Sized>(
    tx: &T,
    run: Vec<(String, Patch, Option<u64>)>,
) -> Result<Vec<Result<SessionInfo>>> {
    let mut ids: Vec<&str> = run.iter().map(|(id, ..)| id.as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    let locked = futures_util::future::try_join_all(ids.iter().map(|id| tx.session(id, true))).await?;
    let mut rows: std::collections::HashMap<String, SessionRow> =
        locked.into_iter().flatten().map(|row| (row.info.session_id.clone(), row)).collect();
    let mut planned = Vec::with_capacity(run.len());
    for (id, patch, expected) in run {
        let row = rows.remove(&id).ok_or(Error::SessionNotFound(id));
        planned.push(row.and_then(|row| patched(row, patch, expected)));
    }
    let changed = planned.iter().filter_map(|p| p.as_ref().ok()).filter(|(_, changed)| *changed);
    futures_util::future::try_join_all(changed.map(|(row, _)| put(tx, ChangeKind::Updated, row))).await?;
    Ok(planned.into_iter().map(|p| p.map(|(row, _)| row.info)).collect())
}

/// Deletes a session, logs it, and reclaims what only it used.
async fn delete_row<T: Tx + ?Sized>(tx: &T, row: &SessionRow) -> Result<()> {
    let id = &row.info.session_id;
    tx.delete_session(id).await?;
    tx.record(id, row.info.revision, ChangeKind::Deleted, row.count()).await?;
    chain::reclaim(tx, row.segment).await
}

pub async fn delete<T: Tx + ?Sized>(tx: &T, id: &str, expected: Option<u64>) -> Result<()> {
    delete_row(tx, &checked(tx, id, expected).await?).await
}

pub async fn delete_many<T: Tx + ?Sized>(tx: &T, doomed: Doomed) -> Result<u64> {
    let (mut ids, before) = match doomed {
        Doomed::Ids(ids) => (ids, None),
        Doomed::UpdatedBefore(before) => (tx.updated_before(&before).await?, Some(before)),
    };
    // Locked in one order, so two processes deleting overlapping sets cannot deadlock.
    ids.sort_unstable();
    ids.dedup();
    let mut deleted = 0;
    for id in ids {
        // Checked again once locked: another process may have touched it. One at a time,
        // each reclaimed before the next: a fork deleted with its parent finds the chain
        // as `reclaim` left it.
        let row = tx.session(&id, true).await?;
        if let Some(row) = row.filter(|r| before.as_ref().is_none_or(|b| &r.info.updated_at < b)) {
            delete_row(tx, &row).await?;
            deleted += 1;
        }
    }
    Ok(deleted)
}

/// Appends `messages` under the rules of `session::plan_append`, all or nothing. With
/// `once`, their ids are the client's, and a retry of an append already stored is
/// answered as the first time (`retried`), before the revision and the rules are checked.
pub async fn append<T: Tx + ?Sized>(
    tx: &T,
    id: &str,
    messages: Vec<Message>,
    expected: Option<u64>,
    once: bool,
) -> Result<Appended> {
    let mut at = appending(tx, id).await?;
    if once && let Some(retried) = retried(tx, &at.row, &at.spans, &messages).await? {
        tx.carry(at);
        return Ok(retried);
    }
    let (appended, rows) = plan(&mut at, messages, expected)?;
    if let Some(rows) = rows {
        write(tx, &at.row, &[rows]).await?;
    }
    tx.carry(at);
    Ok(appended)
}

/// One append of a run (`append_run`): what `append` is given.
#[derive(Debug)]
pub struct Appendable {
    pub messages: Vec<Message>,
    pub expected: Option<u64>,
    pub once: bool,
}

/// Appends queued back to back on one session, as `append` one after another would
/// store them, planned from one read of the session and written at once: a server store
/// sends every row of the run in one round trip. Each append has its own answer; one
/// refused (its revision, its messages) writes nothing, and the next goes on from the
/// session as the ones before it left it. The run stops before an append naming an id
/// stored already or named earlier in the run (a retry: `append` answers it from what was
/// stored); the answers are those of the appends it took, from the first on. An error is
/// a failed statement, and the caller rolls the whole run back.
pub async fn append_run<T: Tx + ?Sized>(tx: &T, id: &str, run: Vec<Appendable>) -> Result<Vec<Result<Appended>>> {
    let mut at = appending(tx, id).await?;
    let fresh = fresh(tx, &at.spans, &run).await?;
    let mut answers = Vec::with_capacity(fresh);
    let mut written = Vec::new();
    for append in run.into_iter().take(fresh) {
        answers.push(plan(&mut at, append.messages, append.expected).map(|(appended, rows)| {
            written.extend(rows);
            appended
        }));
    }
    if !written.is_empty() {
        write(tx, &at.row, &written).await?;
    }
    tx.carry(at);
    Ok(answers)
}

/// The session an append starts from: as the append before it in the same transaction
/// left it (`Tx::carried`), else read and locked, its chain and tail as an append in an
/// earlier transaction left them (`Tx::kept`) when nothing has changed the session since,
/// else read too.
async fn appending<T: Tx + ?Sized>(tx: &T, id: &str) -> Result<Appending> {
    if let Some(carried) = tx.carried().filter(|c| c.row.info.session_id == id) {
        return Ok(carried);
    }
    let row = require(tx, id).await?;
    if let Some(kept) = tx.kept(id).filter(|k| k.row.is_as(&row)) {
        return Ok(Appending { row, ..kept });
    }
    let spans = chain::spans(tx, &row).await?;
    let tail = chain::tail(tx, &spans).await?;
    Ok(Appending { row, spans, tail })
}

/// How many appends of a run, from its first, name no id that the history holds or
/// that an append before them in the run named. The ids are looked up together.
async fn fresh<T: Tx + ?Sized>(tx: &T, spans: &[Span], run: &[Appendable]) -> Result<usize> {
    fn named(a: &Appendable) -> impl Iterator<Item = &str> {
        a.messages.iter().filter(|_| a.once).filter_map(|m| m.id.as_deref())
    }
    let ids: Vec<&str> = run.iter().flat_map(named).collect();
    if ids.is_empty() {
        return Ok(run.len());
    }
    let places = futures_util::future::try_join_all(ids.iter().map(|id| chain::place_of(tx, spans, id))).await?;
    let stored: HashSet<&str> = ids.iter().zip(&places).filter(|(_, p)| p.is_some()).map(|(id, _)| *id).collect();
    let mut seen = HashSet::new();
    Ok(run.iter().position(|a| named(a).any(|id| stored.contains(id) || !seen.insert(id))).unwrap_or(run.len()))
}

/// What an append writes: its rows from `from` on, stored by the change that makes
/// `revision`, after which the session holds `count` messages.
struct Rows {
    from: u64,
    messages: Vec<Message>,
    revision: u64,
    count: u64,
}

/// Plans an append on the session as `at` holds it (its revision checked, the rules
/// applied) and moves `at` past it: its answer, and the rows it writes (none when it
/// changes nothing). A refused append leaves `at` as it was.
fn plan(at: &mut Appending, messages: Vec<Message>, expected: Option<u64>) -> Result<(Appended, Option<Rows>)> {
    check_revision(expected, at.row.info.revision)?;
    let message_ids = messages.iter().filter_map(|m| m.id.clone()).collect();
    let planned = plan_append(at.tail.clone(), messages)?;
    let row = &mut at.row;
    if planned.is_empty() {
        let index = row.len.saturating_sub(row.start + 1);
        return Ok((Appended::new(message_ids, index, row.info.revision), None));
    }
    touch(row);
    let from = row.len;
    row.len += planned.len() as u64;
    row.info.message_count = row.count();
    planned.iter().filter_map(|m| m.usage.as_deref()).for_each(|u| row.info.usage.add(u));
    let appended = Appended::new(message_ids, row.count() - 1, row.info.revision);
    // The head segment now serves up to the new length; when it served nothing before (a
    // new session, a fork cut at its parent's end), it now serves what this append wrote.
    match at.spans.first_mut().filter(|span| span.segment == row.segment) {
        Some(head) => head.hi = row.len,
        None => at.spans.insert(0, Span { segment: row.segment, lo: from.max(row.start), hi: row.len }),
    }
    planned.iter().for_each(|m| at.tail.follow(m));
    let rows = Rows { from, messages: planned, revision: row.info.revision, count: row.count() };
    Ok((appended, Some(rows)))
}

/// Writes appends planned on one session: their rows, the session as the last of them
/// left it, and each change in the log, all at once (the statements depend on none of
/// each other's results: one round trip on a server store).
async fn write<T: Tx + ?Sized>(tx: &T, row: &SessionRow, written: &[Rows]) -> Result<()> {
    let rows: Vec<NewRow> = written
        .iter()
        .flat_map(|w| {
            let revision = w.revision;
            w.messages.iter().enumerate().map(move |(i, message)| NewRow { seq: w.from + i as u64, message, revision })
        })
        .collect();
    let changes: Vec<(u64, u64)> = written.iter().map(|w| (w.revision, w.count)).collect();
    futures_util::future::try_join3(
        tx.insert_rows(row.segment, &rows),
        tx.put_appended(row),
        tx.record_each(&row.info.session_id, ChangeKind::Appended, &changes),
    )
    .await
    .map(drop)
}

/// An append given client ids that the history holds already: when every message is
/// there, stored the same (`Message::is_retry_of`), the reply it had (`Appended::duplicate`),
/// with each message's current place and the revision its append made (0 for a fork's
/// copy of its parent's); when only some are, or one differs, `MessageExists`. `None`
/// when none is there.
async fn retried<T: Tx + ?Sized>(
    tx: &T,
    row: &SessionRow,
    spans: &[Span],
    messages: &[Message],
) -> Result<Option<Appended>> {
    let mut places = Vec::with_capacity(messages.len());
    for m in messages {
        let place = match &m.id {
            Some(id) => chain::place_of(tx, spans, id).await?,
            None => None,
        };
        places.push(place);
    }
    if places.iter().all(Option::is_none) {
        return Ok(None);
    }
    let mut stored = Vec::with_capacity(messages.len());
    for (m, place) in messages.iter().zip(&places) {
        let id = m.id.clone().unwrap_or_default();
        let Some((_, position)) = *place else {
            let given = messages.iter().zip(&places).find_map(|(m, p)| p.and(m.id.clone())).unwrap_or_default();
            return Err(Error::message_exists(given, "is stored, but not every message of this request is"));
        };
        let mut found = chain::read(tx, spans, position, position + 1).await?;
        match found.pop() {
            Some(s) if m.is_retry_of(&s) => stored.push(s),
            _ => return Err(Error::message_exists(id, "is already used by a different message in this session")),
        }
    }
    let Some(&Some((segment, position))) = places.last() else { return Ok(None) };
    let (owner, revision) = tx.origin(segment, position).await?;
    let revision = if owner.as_deref().is_none_or(|o| o == row.info.session_id) { revision } else { 0 };
    Ok(Some(Appended::duplicate(stored, position - row.start, revision)))
}

/// Keeps the last `max_turns` turns whole (`session::turns_cut`).
pub async fn trim_turns<T: Tx + ?Sized>(tx: &T, id: &str, max_turns: u64, expected: Option<u64>) -> Result<Removed> {
    let row = checked(tx, id, expected).await?;
    let spans = chain::spans(tx, &row).await?;
    let cut = chain::turns_cut(tx, &spans, row.count(), max_turns).await?;
    if cut == 0 {
        return Ok(Removed { removed: 0, revision: row.info.revision });
    }
    let mut row = touched(row);
    row.start += cut;
    put(tx, ChangeKind::Trimmed, &row).await?;
    chain::reclaim(tx, row.segment).await?;
    Ok(Removed { removed: cut, revision: row.info.revision })
}

/// Keeps the whole history as a new session on the session's segment, which the
/// session is about to leave: a fork in O(1).
async fn archive<T: Tx + ?Sized>(tx: &T, row: &SessionRow, spans: &[Span]) -> Result<String> {
    let last = chain::id_at(tx, spans, row.len - 1).await?;
    let forked_from = ForkPoint { session_id: row.info.session_id.clone(), message_id: last };
    let info = new_info(new_session_id(), row.fields(), Some(forked_from), row.count());
    let archived = SessionRow { info, segment: row.segment, start: row.start, len: row.len };
    put(tx, ChangeKind::Created, &archived).await?;
    Ok(archived.info.session_id)
}

/// Drops every message after `to` and the tool results that directly follow it. The
/// session moves to a new segment cut at the kept length, as a fork would be; the old
/// segment stays whole for the archive, or is reclaimed.
pub async fn rewind<T: Tx + ?Sized>(
    tx: &T,
    id: &str,
    to: &str,
    keep_archive: bool,
    expected: Option<u64>,
) -> Result<Rewound> {
    let row = checked(tx, id, expected).await?;
    let spans = chain::spans(tx, &row).await?;
    let at = chain::position_of(tx, &spans, to).await?.ok_or_else(|| Error::MessageNotFound(to.to_owned()))?;
    let keep = at + 1 + chain::results_from(tx, &spans, at + 1).await?;
    if keep >= row.len {
        return Ok(Rewound { removed: 0, revision: row.info.revision, archived_session_id: None });
    }
    let archived_session_id = if keep_archive { Some(archive(tx, &row, &spans).await?) } else { None };
    let (old, removed) = (row.segment, row.len - keep);
    let mut row = touched(row);
    let parent = fork_parent(&spans, row.start, keep);
    (row.segment, row.len) = (tx.new_segment(parent, keep, &row.info.session_id).await?, keep);
    put(tx, ChangeKind::Rewound, &row).await?;
    chain::reclaim(tx, old).await?;
    Ok(Rewound { removed, revision: row.info.revision, archived_session_id })
}

/// Replaces every turn before the last `keep_turns` with one summary message. The
/// summary and the kept turns are written to a new segment (the kept messages are
/// copied, the replaced ones are not read); the old segment stays whole for the
/// archive, or is reclaimed.
pub async fn compact<T: Tx + ?Sized>(
    tx: &T,
    id: &str,
    keep_turns: u64,
    summary: String,
    keep_archive: bool,
    expected: Option<u64>,
) -> Result<Compacted> {
    let row = checked(tx, id, expected).await?;
    let spans = chain::spans(tx, &row).await?;
    let cut = chain::turns_cut(tx, &spans, row.count(), keep_turns).await?;
    if cut == 0 || keep_turns == 0 {
        let revision = row.info.revision;
        return Ok(Compacted { removed: 0, revision, summary_message_id: None, archived_session_id: None });
    }
    let first = chain::id_at(tx, &spans, row.start).await?;
    let last = chain::id_at(tx, &spans, row.start + cut - 1).await?;
    let summary = compaction_message(summary, cut, first, last);
    let summary_message_id = summary.id.clone();
    let mut messages = vec![summary];
    messages.extend(chain::read(tx, &spans, row.start + cut, row.len).await?);
    let archived_session_id = if keep_archive { Some(archive(tx, &row, &spans).await?) } else { None };
    let old = row.segment;
    let mut row = touched(row);
    let segment = tx.new_segment(None, 0, &row.info.session_id).await?;
    (row.segment, row.start, row.len) = (segment, 0, messages.len() as u64);
    insert_all(tx, row.segment, 0, &messages, row.info.revision).await?;
    put(tx, ChangeKind::Compacted, &row).await?;
    chain::reclaim(tx, old).await?;
    Ok(Compacted { removed: cut, revision: row.info.revision, summary_message_id, archived_session_id })
}

/// Removes the last stored message and, given one, appends `replace_with` in its place
/// under the rules. The session moves to a new segment cut one short, as a rewind does;
/// the old one is reclaimed.
pub async fn pop<T: Tx + ?Sized>(
    tx: &T,
    id: &str,
    replace_with: Option<Message>,
    expected: Option<u64>,
) -> Result<Popped> {
    let row = checked(tx, id, expected).await?;
    if row.count() == 0 {
        return Ok(Popped { message: None, revision: row.info.revision });
    }
    let spans = chain::spans(tx, &row).await?;
    let last = chain::read(tx, &spans, row.len - 1, row.len).await?.pop();
    let old = row.segment;
    let mut row = touched(row);
    let keep = row.len - 1;
    let parent = fork_parent(&spans, row.start, keep);
    (row.segment, row.len) = (tx.new_segment(parent, keep, &row.info.session_id).await?, keep);
    if let Some(replacement) = replace_with {
        let tail = chain::tail(tx, &chain::spans(tx, &row).await?).await?;
        let planned = plan_append(tail, vec![replacement])?;
        insert_all(tx, row.segment, row.len, &planned, row.info.revision).await?;
        row.len += planned.len() as u64;
    }
    row.info.message_count = row.count();
    put(tx, ChangeKind::Rewound, &row).await?;
    chain::reclaim(tx, old).await?;
    Ok(Popped { message: last, revision: row.info.revision })
}

/// Drops every message, keeping the system prompt, cwd, title and metadata.
pub async fn clear<T: Tx + ?Sized>(tx: &T, id: &str, expected: Option<u64>) -> Result<Removed> {
    let row = checked(tx, id, expected).await?;
    let removed = row.count();
    if removed == 0 {
        return Ok(Removed { removed, revision: row.info.revision });
    }
    let old = row.segment;
    let mut row = touched(row);
    (row.segment, row.start, row.len) = (tx.new_segment(None, 0, &row.info.session_id).await?, 0, 0);
    put(tx, ChangeKind::Cleared, &row).await?;
    chain::reclaim(tx, old).await?;
    Ok(Removed { removed, revision: row.info.revision })
}

/// A new session on a new segment hanging from the parent's chain at the cut.
pub async fn fork<T: Tx + ?Sized>(
    tx: &T,
    id: &str,
    new_session_id: Option<String>,
    at_message_id: Option<String>,
) -> Result<SessionInfo> {
    // Locked: a trim or delete of the parent cannot reclaim what the fork needs before
    // the fork commits.
    let parent = require(tx, id).await?;
    let spans = chain::spans(tx, &parent).await?;
    let (cut, last) = match at_message_id {
        Some(at) => match chain::position_of(tx, &spans, &at).await? {
            Some(position) => (position + 1, Some(at)),
            None => return Err(Error::MessageNotFound(at)),
        },
        None if parent.len > parent.start => (parent.len, chain::id_at(tx, &spans, parent.len - 1).await?),
        None => (parent.len, None),
    };
    let new_id = free_id(tx, new_session_id).await?;
    let segment = tx.new_segment(fork_parent(&spans, parent.start, cut), cut, &new_id).await?;
    let forked_from = ForkPoint { session_id: id.to_owned(), message_id: last };
    let info = new_info(new_id, parent.fields(), Some(forked_from), cut - parent.start);
    put(tx, ChangeKind::Created, &SessionRow { info: info.clone(), segment, start: parent.start, len: cut }).await?;
    Ok(info)
}

/// Stores a whole imported session; with `replace`, over an existing one, continuing its
/// revision count.
pub async fn import<T: Tx + ?Sized>(
    tx: &T,
    import: Import,
    replace: bool,
    expected: Option<u64>,
) -> Result<SessionInfo> {
    let n = import.messages.len() as u64;
    let existing = match &import.session_id {
        Some(id) if replace => tx.session(id, true).await?,
        _ => None,
    };
    match (&existing, &import.session_id) {
        (Some(old), _) => check_revision(expected, old.info.revision)?,
        (None, Some(id)) if replace && expected.is_some() => return Err(Error::SessionNotFound(id.clone())),
        _ => {}
    }
    let usage = UsageTotals::of(import.messages.iter().filter_map(|m| m.usage.as_deref()));
    let Some(old) = existing else {
        let mut info = new_info(free_id(tx, import.session_id).await?, import.fields, None, n);
        let segment = tx.new_segment(None, 0, &info.session_id).await?;
        insert_all(tx, segment, 0, &import.messages, 0).await?;
        info.usage = usage;
        put(tx, ChangeKind::Imported, &SessionRow { info: info.clone(), segment, start: 0, len: n }).await?;
        return Ok(info);
    };
    let old_segment = old.segment;
    let mut info = new_info(old.info.session_id, import.fields, None, n);
    (info.created_at, info.revision, info.usage) = (old.info.created_at, old.info.revision + 1, usage);
    let segment = tx.new_segment(None, 0, &info.session_id).await?;
    insert_all(tx, segment, 0, &import.messages, info.revision).await?;
    put(tx, ChangeKind::Imported, &SessionRow { info: info.clone(), segment, start: 0, len: n }).await?;
    chain::reclaim(tx, old_segment).await?;
    Ok(info)
}

/// Appends a completed stream's messages and drops its draft, in one step.
pub async fn append_finishing<T: Tx + ?Sized>(
    tx: &T,
    id: &str,
    messages: Vec<Message>,
    expected: Option<u64>,
    stream_id: &str,
) -> Result<Appended> {
    let appended = append(tx, id, messages, expected, false).await?;
    tx.delete_draft(stream_id).await?;
    Ok(appended)
}

/// Saves a stream's draft, and tells watchers of its session.
pub async fn save_draft<T: Tx + ?Sized>(tx: &T, draft: &Draft) -> Result<()> {
    if let Some(row) = tx.session(&draft.session_id, false).await? {
        tx.record(&draft.session_id, row.info.revision, ChangeKind::Draft, row.count()).await?;
    }
    tx.put_draft(draft).await
}

/// Turns a draft into messages and drops it; `None` when the draft is gone (another
/// process settled it) or its session is.
pub async fn settle_draft<T: Tx + ?Sized>(tx: &T, stream_id: &str, end: DraftEnd) -> Result<Option<Appended>> {
    // Locked, so that two processes sweeping crashed drafts settle it once.
    let Some(draft) = tx.draft(stream_id, true).await? else { return Ok(None) };
    tx.delete_draft(stream_id).await?;
    if tx.session(&draft.session_id, false).await?.is_none() {
        return Ok(None);
    }
    let session_id = draft.session_id.clone();
    append(tx, &session_id, draft.into_messages(end), None, false).await.map(Some)
}
