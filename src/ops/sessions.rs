//! Sessions as wholes: create, read, list a page, change their fields, delete, fork,
//! clear; and the store itself (its kind, flushing it, watching it).

use std::sync::Arc;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::ops::Ops;
use crate::ops::limits::{DEFAULT_LIST_LIMIT, MAX_LIST_LIMIT, cut, one_more, page_size};
use crate::session::{Fields, ListKey, Patch, SessionInfo, stamp_param};
use crate::store::feed::Watcher;
use crate::store::{Doomed, Removed};

/// A page of `session/list`, and the cursor of the next one.
#[derive(Debug, Clone, Serialize)]
pub struct SessionPage {
    pub sessions: Vec<SessionInfo>,
    pub next_cursor: Option<String>,
}

/// The result of `session/delete_many`.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct DeletedMany {
    pub deleted: u64,
}

impl Ops {
    /// `memory`, `sqlite` or `postgres`.
    pub fn store_kind(&self) -> &'static str {
        self.store.kind()
    }

    /// Why the store cannot be written, when it was opened for reading only.
    pub fn store_read_only(&self) -> Option<&str> {
        self.store.read_only()
    }

    pub async fn create(&self, session_id: Option<String>, fields: Fields) -> Result<SessionInfo> {
        self.store.create(session_id, fields).await
    }

    pub async fn get(&self, session_id: &str) -> Result<SessionInfo> {
        self.store.get(session_id).await
    }

    /// A page of sessions, newest creation first, from `cursor` (a `next_cursor` given
    /// before), only those last updated before `updated_before` when given.
    pub async fn list(
        &self,
        limit: Option<u64>,
        cursor: Option<&str>,
        updated_before: Option<&str>,
    ) -> Result<SessionPage> {
        let limit = page_size(limit, DEFAULT_LIST_LIMIT, MAX_LIST_LIMIT)?;
        let after = cursor.map(ListKey::from_cursor).transpose()?;
        let before = updated_before.map(|at| stamp_param("updated_before", at)).transpose()?;
        let found = self.store.list_updated_before(one_more(limit) as usize, after, before).await?;
        let (sessions, more) = cut(found, limit);
        let next_cursor = if more { sessions.last().map(|s| ListKey::of(s).to_cursor()) } else { None };
        Ok(SessionPage { sessions, next_cursor })
    }

    pub async fn update(&self, session_id: &str, patch: Patch, expected: Option<u64>) -> Result<SessionInfo> {
        self.store.update(session_id, patch, expected).await
    }

    pub async fn delete(&self, session_id: &str, expected: Option<u64>) -> Result<()> {
        self.store.delete(session_id, expected).await?;
        self.pieces.forget(session_id);
        Ok(())
    }

    /// Deletes the sessions named, or those last updated before a time: exactly one of
    /// the two must be given.
    pub async fn delete_many(
        &self,
        session_ids: Option<Vec<String>>,
        updated_before: Option<&str>,
    ) -> Result<DeletedMany> {
        let doomed = match (session_ids, updated_before) {
            (Some(ids), None) => Doomed::Ids(ids),
            (None, Some(at)) => Doomed::UpdatedBefore(stamp_param("updated_before", at)?),
            (None, None) => return Err(Error::invalid("missing field `session_ids` or `updated_before` (give one)")),
            (Some(_), Some(_)) => {
                return Err(Error::invalid("give one of `session_ids` and `updated_before`, not both"));
            }
        };
        Ok(DeletedMany { deleted: self.store.delete_many(doomed).await? })
    }

    pub async fn fork(
        &self,
        session_id: &str,
        new_session_id: Option<String>,
        at_message_id: Option<String>,
    ) -> Result<SessionInfo> {
        self.store.fork(session_id, new_session_id, at_message_id).await
    }

    pub async fn clear(&self, session_id: &str, expected: Option<u64>) -> Result<Removed> {
        self.store.clear(session_id, expected).await
    }

    /// Makes every acknowledged write durable.
    pub async fn flush(&self) -> Result<()> {
        self.store.flush().await
    }

    /// Makes every acknowledged write durable and lets go of the store: the end of a run.
    pub async fn close(&self) -> Result<()> {
        self.store.close().await
    }

    /// Every change committed from now on (`session/subscribe`).
    pub async fn watch(&self) -> Result<Arc<Watcher>> {
        self.store.watch().await
    }
}
