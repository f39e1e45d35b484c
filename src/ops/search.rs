//! `session/search`: a store's hits for a parsed query, each with its snippet
//! (`session::search`), one page at a time.

use serde::Serialize;

use crate::error::Result;
use crate::ops::Ops;
use crate::session::Role;
use crate::session::search::Query;

/// One message found in one session.
#[derive(Debug, Clone, Serialize)]
pub struct Hit {
    pub session_id: String,
    pub message_id: String,
    pub index: u64,
    pub role: Role,
    pub snippet: String,
}

/// A page of hits, and whether more follow.
#[derive(Debug, Clone)]
pub struct Hits {
    pub hits: Vec<Hit>,
    pub more: bool,
}

impl Ops {
    /// The hits `offset..offset + limit` for `query`, in `session_id` only when given.
    pub async fn search(&self, query: &Query, session_id: Option<&str>, offset: u64, limit: u64) -> Result<Hits> {
        let mut found = self.store.search(query, session_id, offset, limit.saturating_add(1)).await?;
        let more = found.len() as u64 > limit;
        found.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
        let hits = found
            .into_iter()
            .map(|f| Hit {
                snippet: query.snippet(&f.text),
                session_id: f.session_id,
                message_id: f.message_id,
                index: f.index,
                role: f.role,
            })
            .collect();
        Ok(Hits { hits, more })
    }
}
