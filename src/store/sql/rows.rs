//! The rows both SQL backends keep, and the values their statements take and give.

use crate::session::native::UsageTotals;
use crate::session::search::Query;
use crate::session::{Fields, ForkPoint, ListKey, Role, SessionInfo, now};

/// A session's row: what clients see, and where its history lives (positions
/// `[start, len)` of the chain ending in `segment`).
#[derive(Debug, Clone)]
pub struct SessionRow {
    pub info: SessionInfo,
    pub segment: i64,
    pub start: u64,
    pub len: u64,
}

impl SessionRow {
    /// Whether `other` is this row unchanged: every change makes a new revision, and a
    /// session deleted and made again starts on a new segment.
    pub fn is_as(&self, other: &SessionRow) -> bool {
        (self.info.revision, self.segment, self.start, self.len)
            == (other.info.revision, other.segment, other.start, other.len)
            && self.info.session_id == other.info.session_id
    }

    pub fn fields(&self) -> Fields {
        Fields {
            system: self.info.system.clone(),
            cwd: self.info.cwd.clone(),
            title: self.info.title.clone(),
            metadata: self.info.metadata.clone(),
        }
    }

    /// How many messages the session sees.
    pub fn count(&self) -> u64 {
        self.len - self.start
    }
}

pub fn parse_role(role: &str) -> Option<Role> {
    match role {
        "system" => Some(Role::System),
        "user" => Some(Role::User),
        "assistant" => Some(Role::Assistant),
        "tool" => Some(Role::Tool),
        _ => None,
    }
}

/// A session row after a change: revision +1 and a fresh `updated_at`.
pub fn touched(mut row: SessionRow) -> SessionRow {
    touch(&mut row);
    row
}

/// A change to a session: its next revision, made now.
pub fn touch(row: &mut SessionRow) {
    row.info.revision += 1;
    row.info.updated_at = now();
}

pub fn new_info(session_id: String, fields: Fields, forked_from: Option<ForkPoint>, message_count: u64) -> SessionInfo {
    let at = now();
    SessionInfo {
        session_id,
        system: fields.system,
        cwd: fields.cwd,
        title: fields.title,
        metadata: fields.metadata,
        message_count,
        revision: 0,
        created_at: at.clone(),
        updated_at: at,
        forked_from,
        usage: UsageTotals::default(),
    }
}

/// A page of sessions: up to `limit`, newest creation first, after `after`, and (when
/// given) last updated before `updated_before`.
#[derive(Debug, Clone)]
pub struct Listing {
    pub limit: usize,
    pub after: Option<ListKey>,
    pub updated_before: Option<String>,
}

/// A page of search results: results `offset..offset + limit` of `query`, in every
/// session or `within` one (its row and spans).
#[derive(Clone, Copy)]
pub struct Searching<'a> {
    pub query: &'a Query,
    pub within: Option<(&'a SessionRow, &'a [Span])>,
    pub offset: u64,
    pub limit: u64,
}

/// A message row a search found: its score (higher is better) and where it is stored.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hit {
    pub score: f64,
    pub segment: i64,
    pub seq: u64,
}

/// A search result's place: (session id, index in its history, segment, position).
pub type Place = (String, u64, i64, u64);

/// The hits of a search within one session, best first (ties by position), cut to the
/// page `offset..offset + limit`.
pub fn page_of_hits(row: &SessionRow, mut hits: Vec<Hit>, offset: u64, limit: u64) -> Vec<Place> {
    hits.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.seq.cmp(&b.seq)));
    let skip = usize::try_from(offset).unwrap_or(usize::MAX);
    let take = usize::try_from(limit).unwrap_or(usize::MAX);
    let place = |h: Hit| (row.info.session_id.clone(), h.seq - row.start, h.segment, h.seq);
    hits.into_iter().skip(skip).take(take).map(place).collect()
}

/// One segment of a chain and the positions `[lo, hi)` it serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    pub segment: i64,
    pub lo: u64,
    pub hi: u64,
}
