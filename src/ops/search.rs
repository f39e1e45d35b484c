//! `session/search`: a store's hits for a parsed query, each with its snippet
//! (`session::search`), one page at a time.

use serde::Serialize;

use crate::error::Result;
use crate::ops::Ops;
use crate::ops::limits::{DEFAULT_SEARCH_LIMIT, MAX_SEARCH_LIMIT, cut, one_more, page_size};
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

/// A page of hits, and the cursor of the next page.
#[derive(Debug, Clone, Serialize)]
pub struct SearchPage {
    pub hits: Vec<Hit>,
    pub next_cursor: Option<String>,
}

impl Ops {
    /// A page of the hits for `query` (`session::search::Query`'s syntax), in
    /// `session_id` only when given, from `cursor` (a `next_cursor` given before).
    pub async fn search(
        &self,
        query: &str,
        session_id: Option<&str>,
        limit: Option<u64>,
        cursor: Option<&str>,
    ) -> Result<SearchPage> {
        let limit = page_size(limit, DEFAULT_SEARCH_LIMIT, MAX_SEARCH_LIMIT)?;
        let query = Query::parse(query)?;
        let offset = cursor.map(cursor::decode).transpose()?.unwrap_or(0);
        let found = self.store.search(&query, session_id, offset, one_more(limit)).await?;
        let (found, more) = cut(found, limit);
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
        Ok(SearchPage { hits, next_cursor: more.then(|| cursor::encode(offset + limit)) })
    }
}

/// Search cursors: opaque to clients, the offset of the next page underneath.
mod cursor {
    use base64::Engine;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;

    use crate::error::{Error, Result, quote};

    const TAG: &str = "search:";

    pub fn encode(offset: u64) -> String {
        URL_SAFE_NO_PAD.encode(format!("{TAG}{offset}"))
    }

    pub fn decode(cursor: &str) -> Result<u64> {
        let refuse =
            || Error::invalid(format!("cursor: must be a cursor session/search returned, got {}", quote(cursor)));
        let text = URL_SAFE_NO_PAD.decode(cursor).map_err(|_| refuse())?;
        let text = String::from_utf8(text).map_err(|_| refuse())?;
        let digits = text.strip_prefix(TAG).ok_or_else(refuse)?;
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(refuse());
        }
        digits.parse().map_err(|_| refuse())
    }

    #[cfg(test)]
    mod tests {
        #[test]
        fn a_cursor_round_trips_and_anything_else_is_refused() {
            assert_eq!(super::decode(&super::encode(40)).unwrap(), 40);
            for bad in ["", "40", "c2VhcmNoOg", "c2VhcmNoOi0x", "!!"] {
                assert!(super::decode(bad).is_err(), "{bad}");
            }
        }
    }
}
