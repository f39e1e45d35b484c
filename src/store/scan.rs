//! Search by scanning (the memory store's `session/search`): every message of every
//! history given is matched against the query with `session::search`'s own words, the
//! same words the database stores index. A message shared by forks is matched once and
//! found in each history holding it.

use std::collections::HashMap;
use std::sync::Arc;

use crate::session::Message;
use crate::session::search::{Query, content_text, indexed_words, message_text};
use crate::store::Found;

/// The hits `offset..offset + limit` among `histories` (session id, messages): most
/// term occurrences first, then by session id and index.
pub fn scan(
    histories: Vec<(String, imbl::Vector<Arc<Message>>)>,
    query: &Query,
    offset: u64,
    limit: u64,
) -> Vec<Found> {
    let mut scores: HashMap<*const Message, Option<u64>> = HashMap::new();
    let mut hits: Vec<(u64, &str, usize, &Arc<Message>)> = Vec::new();
    for (session_id, messages) in &histories {
        for (index, message) in messages.iter().enumerate() {
            let score = *scores.entry(Arc::as_ptr(message)).or_insert_with(|| {
                let text = content_text(&message.content);
                if !query.may_match(&text) {
                    return None;
                }
                let words: Vec<String> = indexed_words(&text).map(|w| w.text).collect();
                query.score(&words)
            });
            if let Some(score) = score {
                hits.push((score, session_id, index, message));
            }
        }
    }
    hits.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(b.1)).then_with(|| a.2.cmp(&b.2)));
    let skip = usize::try_from(offset).unwrap_or(usize::MAX);
    let take = usize::try_from(limit).unwrap_or(usize::MAX);
    hits.into_iter()
        .skip(skip)
        .take(take)
        .map(|(_, session_id, index, message)| Found {
            session_id: session_id.to_owned(),
            index: index as u64,
            message_id: message.id.clone().unwrap_or_default(),
            role: message.role,
            text: message_text(message),
        })
        .collect()
}
