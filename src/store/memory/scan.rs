//! Search by scanning (the memory store's `session/search`): every message of every
//! history given is matched against the query with `session::search`'s own words, the
//! same words the database stores index. A message shared by forks is matched once and
//! found in each history holding it.

use std::collections::HashMap;
use std::collections::hash_map::Entry;

use super::history::Stored;
use crate::error::Result;
use crate::session::search::{Query, content_text, indexed_words, message_text};
use crate::store::Found;

/// The hits `offset..offset + limit` among `histories` (session id, messages): most
/// term occurrences first, then by session id and index.
pub fn scan(
    histories: Vec<(String, imbl::Vector<Stored>)>,
    query: &Query,
    offset: u64,
    limit: u64,
) -> Result<Vec<Found>> {
    let mut scores: HashMap<*const u8, Option<u64>> = HashMap::new();
    let mut hits: Vec<(u64, &str, usize, &Stored)> = Vec::new();
    for (session_id, messages) in &histories {
        for (index, kept) in messages.iter().enumerate() {
            // Most messages fail the cheap test: they are neither scored nor remembered.
            if !may_match_whole(query, kept) {
                continue;
            }
            let score = match scores.entry(kept.text().as_ptr()) {
                Entry::Occupied(known) => *known.get(),
                Entry::Vacant(new) => *new.insert(score(query, kept)?),
            };
            if let Some(score) = score {
                hits.push((score, session_id, index, kept));
            }
        }
    }
    hits.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(b.1)).then_with(|| a.2.cmp(&b.2)));
    let skip = usize::try_from(offset).unwrap_or(usize::MAX);
    let take = usize::try_from(limit).unwrap_or(usize::MAX);
    hits.into_iter()
        .skip(skip)
        .take(take)
        .map(|(_, session_id, index, kept)| {
            let message = kept.message()?;
            Ok(Found {
                session_id: session_id.to_owned(),
                index: index as u64,
                message_id: message.id.clone().unwrap_or_default(),
                role: message.role,
                text: message_text(&message),
            })
        })
        .collect()
}

/// The longest message text tried whole before it is parsed; a longer one (a message with
/// images may hold megabytes of base64) is parsed, and only its content tried.
const WHOLE_TEXT_MAX: usize = 16 * 1024;

/// Whether a message may match, from its text tried whole: query words are letters and
/// digits, which JSON text never escapes, so a text that lacks them cannot match and is
/// not parsed. A text too long to try whole may.
fn may_match_whole(query: &Query, kept: &Stored) -> bool {
    let text = kept.text();
    text.len() > WHOLE_TEXT_MAX || query.may_match(text)
}

/// How well one message that may match (`may_match_whole`) matches.
fn score(query: &Query, kept: &Stored) -> Result<Option<u64>> {
    let content = kept.content()?;
    let content = content_text(&content);
    if !query.may_match(&content) {
        return Ok(None);
    }
    let words: Vec<String> = indexed_words(&content).map(|w| w.text).collect();
    Ok(query.score(&words))
}
