//! Sessions as a whole: ids, the SessionInfo record, and the changes a client can ask for.

use serde::Serialize;
use serde_json::{Map, Value};

use crate::error::{Error, Result, quote};
use crate::session::message::Message;
use crate::session::native::UsageTotals;
use crate::session::stamp;

/// Checks a client-chosen session id: 1–128 characters of `A-Z a-z 0-9 . _ : -`. The
/// reason names no field: the caller (or the serde path) does.
pub fn check_session_id(id: &str) -> Result<(), String> {
    let ok = (1..=128).contains(&id.len())
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'));
    if ok { Ok(()) } else { Err(format!("must be 1-128 characters of A-Z a-z 0-9 . _ : -, got {}", quote(id))) }
}

/// A session id that passed `check_session_id`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Deserialize)]
#[serde(try_from = "String")]
pub struct SessionId(String);

impl SessionId {
    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0
    }
}

impl TryFrom<String> for SessionId {
    type Error = String;

    fn try_from(id: String) -> Result<Self, String> {
        check_session_id(&id)?;
        Ok(SessionId(id))
    }
}

/// A new server-chosen session id (`crate::mint`): a UUID v7, so ids sort by creation
/// time, or counted.
pub fn new_session_id() -> String {
    crate::mint::id()
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ForkPoint {
    pub session_id: String,
    pub message_id: Option<String>,
}

/// The fields a client sets on a session, apart from its history.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Fields {
    pub system: Option<String>,
    pub cwd: Option<String>,
    pub title: Option<String>,
    pub metadata: Option<Map<String, Value>>,
}

/// A session's record, without its messages.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SessionInfo {
    pub session_id: String,
    pub system: Option<String>,
    pub cwd: Option<String>,
    pub title: Option<String>,
    pub metadata: Option<Map<String, Value>>,
    pub message_count: u64,
    pub revision: u64,
    pub created_at: String,
    pub updated_at: String,
    pub forked_from: Option<ForkPoint>,
    /// What the responses appended to this session have cost since it was created.
    pub usage: UsageTotals,
}

/// `session/update`: each field is left alone when `None`, set (or cleared) when `Some`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Patch {
    pub system: Option<Option<String>>,
    pub cwd: Option<Option<String>>,
    pub title: Option<Option<String>>,
    pub metadata: Option<Option<Map<String, Value>>>,
}

impl Patch {
    /// Applies the patch; returns whether anything changed.
    pub fn apply(self, fields: &mut Fields) -> bool {
        fn set<T: PartialEq>(slot: &mut T, new: Option<T>) -> bool {
            match new {
                Some(v) if *slot != v => {
                    *slot = v;
                    true
                }
                _ => false,
            }
        }
        let a = set(&mut fields.system, self.system);
        let b = set(&mut fields.cwd, self.cwd);
        let c = set(&mut fields.title, self.title);
        let d = set(&mut fields.metadata, self.metadata);
        a | b | c | d
    }
}

/// A whole session to store at once, from `session/from_dict`: already checked.
#[derive(Debug, Clone)]
pub struct Import {
    pub session_id: Option<String>,
    pub fields: Fields,
    pub messages: Vec<Message>,
}

/// `session/list` order: newest `created_at` first, then session id, both descending.
/// Neither ever changes, so a walk by cursor (the key of the last session a page
/// returned) never skips a session that existed when it began, however the sessions
/// are updated meanwhile.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ListKey {
    pub created_at: String,
    pub session_id: String,
}

impl ListKey {
    pub fn of(info: &SessionInfo) -> Self {
        ListKey { created_at: info.created_at.clone(), session_id: info.session_id.clone() }
    }

    pub fn to_cursor(&self) -> String {
        format!("{}/{}", self.created_at, self.session_id)
    }

    /// A cursor this server made; anything else is refused.
    pub fn from_cursor(cursor: &str) -> Result<Self> {
        let refuse =
            || Error::invalid(format!("cursor: must be a cursor session/list returned, got {}", quote(cursor)));
        let (created_at, session_id) = cursor.split_once('/').ok_or_else(refuse)?;
        if stamp::normalize(created_at).ok().as_deref() != Some(created_at) || check_session_id(session_id).is_err() {
            return Err(refuse());
        }
        Ok(ListKey { created_at: created_at.into(), session_id: session_id.into() })
    }
}

/// Checks an optional revision a mutation was given against the stored one.
pub fn check_revision(expected: Option<u64>, current: u64) -> Result<()> {
    match expected {
        Some(expected) if expected != current => Err(Error::RevisionConflict { expected, current }),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_ids() {
        assert!(check_session_id("abc-DEF_1.2:3").is_ok());
        assert!(check_session_id(&"a".repeat(128)).is_ok());
        assert!(check_session_id(&"a".repeat(129)).is_err());
        assert!(check_session_id("").is_err());
        assert!(check_session_id("a b").is_err());
        assert!(check_session_id("é").is_err());
        assert!(check_session_id(&"é".repeat(100)).is_err());
        assert_eq!(
            check_session_id("a b\u{301}\u{7}"),
            Err("must be 1-128 characters of A-Z a-z 0-9 . _ : -, got \"a b\u{301}\\u0007\"".to_owned())
        );
    }

    #[test]
    fn patch_reports_change() {
        let mut f = Fields::default();
        assert!(!Patch::default().apply(&mut f));
        assert!(Patch { title: Some(Some("t".into())), ..Patch::default() }.apply(&mut f));
        assert!(!Patch { title: Some(Some("t".into())), ..Patch::default() }.apply(&mut f));
        assert!(Patch { title: Some(None), ..Patch::default() }.apply(&mut f));
        assert_eq!(f.title, None);
    }

    #[test]
    fn cursors_round_trip() {
        let k = ListKey { created_at: "2026-01-01T00:00:00.000000Z".into(), session_id: "a.b".into() };
        assert_eq!(ListKey::from_cursor(&k.to_cursor()).unwrap(), k);
        assert!(ListKey::from_cursor("junk").is_err());
        assert!(ListKey::from_cursor("2026-01-01T00:00:00.000000Z/a/b").is_err());
        assert!(ListKey::from_cursor("yesterday/a").is_err());
        assert!(ListKey::from_cursor("2026-01-01T00:00:00.000000Z/").is_err());
    }
}
