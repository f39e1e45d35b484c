//! What both database backends keep of a session besides its messages.

use crate::session::{Fields, ForkPoint, Role, SessionInfo, now};

/// A session's row: what clients see, and where its history lives.
#[derive(Debug, Clone)]
pub struct SessionRow {
    pub info: SessionInfo,
    pub segment: i64,
    pub start: u64,
    pub len: u64,
}

impl SessionRow {
    pub fn fields(&self) -> Fields {
        Fields {
            system: self.info.system.clone(),
            cwd: self.info.cwd.clone(),
            title: self.info.title.clone(),
            metadata: self.info.metadata.clone(),
        }
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
    row.info.revision += 1;
    row.info.updated_at = now();
    row
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
    }
}

/// One segment of a chain and the positions `[lo, hi)` it serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    pub segment: i64,
    pub lo: u64,
    pub hi: u64,
}

/// The segment a fork cut at `cut` hangs from: the one serving position `cut - 1`.
pub fn fork_parent(spans: &[Span], start: u64, cut: u64) -> Option<i64> {
    if cut <= start {
        return None;
    }
    spans.iter().find(|s| (s.lo..s.hi).contains(&(cut - 1))).map(|s| s.segment)
}
