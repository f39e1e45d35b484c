//! Search by scanning (the memory store's `session/search`): every message of every
//! history given is matched against the query with `session::search`'s own words, the
//! same words the database stores index. Each message's signature (`sign`) is tested
//! first, and most messages are never read. A message shared by forks is scored once and
//! found in each history holding it.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::collections::hash_map::Entry;

use foldhash::HashMap;
use imbl::shared_ptr::DefaultSharedPtr;
use imbl::vector::Focus;

use super::history::Stored;
use super::sign::{Asks, MOST_A_TERM, Sign};
use crate::error::{Error, Result};
use crate::session::search::{Query, message_text};
use crate::store::Found;

/// A session's id, messages and their signatures, as a search snapshot holds them.
pub type Searched = (String, (imbl::Vector<Stored>, imbl::Vector<Sign>));

/// The hits `offset..offset + limit` among `histories`: most term occurrences first, then
/// by session id and index.
///
/// A message whose signature allows a match is scored at once only when the signature
/// sets no bound on its score; the others wait, most first, and are read only when no
/// hit already scored can go before them: a page reads few messages beyond those it
/// shows, whatever the number of matches.
pub fn scan(mut histories: Vec<Searched>, query: &Query, offset: u64, limit: u64) -> Result<Vec<Found>> {
    histories.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    let asks = Asks::of(query);
    let mut scores = Scores::new();
    // Hits scored: (score, place), a place being (history, index).
    let mut scored: Vec<(u64, Reverse<(usize, usize)>)> = Vec::new();
    // Places that may match by the most they may score (from one occurrence a term to
    // `MOST_A_TERM`: `least..=MOST_A_TERM * least`), each in order.
    let least = query.terms.len() as u64;
    let mut waiting: Vec<Vec<(usize, usize)>> = vec![Vec::new(); ((MOST_A_TERM - 1) * least + 1) as usize];
    for (h, (_, (messages, signs))) in histories.iter().enumerate() {
        let mut focus = messages.focus();
        let mut index = 0;
        for leaf in signs.leaves() {
            for sign in leaf {
                if sign.may_match(&asks) {
                    match sign.most(&asks) {
                        Some(most) => {
                            let above = most.checked_sub(least).and_then(|above| usize::try_from(above).ok());
                            let by = above.and_then(|above| waiting.get_mut(above)).ok_or_else(|| bound(most))?;
                            by.push((h, index));
                        }
                        None => {
                            if let Some(score) = scores.of(query, kept(&mut focus, index)?)? {
                                scored.push((score, Reverse((h, index))));
                            }
                        }
                    }
                }
                index += 1;
            }
        }
    }
    let mut waiting = waiting
        .into_iter()
        .enumerate()
        .rev()
        .flat_map(|(above, by)| by.into_iter().map(move |at| (least + above as u64, at)))
        .peekable();
    let mut scored = BinaryHeap::from(scored);
    let mut focused: Vec<_> = histories.iter().map(|(_, (messages, _))| messages.focus()).collect();
    let wanted = usize::try_from(offset.saturating_add(limit)).unwrap_or(usize::MAX);
    let mut page = Vec::new();
    while page.len() < wanted {
        // The best hit scored goes next unless a message waiting may score more, or as
        // much and come before it.
        let best = scored.peek().map(|&(score, Reverse(place))| (score, place));
        let next = waiting.peek().copied();
        match (best, next) {
            (None, None) => break,
            (Some((score, place)), next)
                if next.is_none_or(|(most, at)| most < score || (most == score && at > place)) =>
            {
                scored.pop();
                page.push(place);
            }
            (_, _) => {
                let Some((_, (h, index))) = waiting.next() else { break };
                if let Some(score) = scores.of(query, kept(&mut focused[h], index)?)? {
                    scored.push((score, Reverse((h, index))));
                }
            }
        }
    }
    let skip = usize::try_from(offset).unwrap_or(usize::MAX);
    page.into_iter()
        .skip(skip)
        .map(|(h, index)| {
            let (session_id, _) = &histories[h];
            let message = kept(&mut focused[h], index)?.message()?;
            Ok(Found {
                session_id: session_id.clone(),
                index: index as u64,
                message_id: message.id.clone().unwrap_or_default(),
                role: message.role,
                text: message_text(&message),
            })
        })
        .collect()
}

/// The error for a bound `Sign::most` should not give.
fn bound(most: u64) -> Error {
    Error::Internal(format!("a signature bounds a score by {most}, out of its range"))
}

/// The message at `index` of a history whose signatures were walked: there is one
/// message for each signature.
fn kept<'f>(focus: &'f mut Focus<'_, Stored, DefaultSharedPtr>, index: usize) -> Result<&'f Stored> {
    focus.get(index).ok_or_else(|| Error::Internal("a signature without its message".into()))
}

/// Each message's score, reckoned once: a message shared by forks is one text.
struct Scores(HashMap<*const u8, Option<u64>>);

impl Scores {
    fn new() -> Scores {
        Scores(HashMap::default())
    }

    /// How well one message matches. Query words are letters and digits, which JSON
    /// text never escapes, so a text that lacks them cannot match: it is neither parsed
    /// nor remembered. A short message is all content, and its signature matched.
    fn of(&mut self, query: &Query, kept: &Stored) -> Result<Option<u64>> {
        let text = kept.text();
        let whole = text.len() <= WHOLE_TEXT_MAX;
        if whole && !kept.short() && !query.may_match(text) {
            return Ok(None);
        }
        match self.0.entry(text.as_ptr()) {
            Entry::Occupied(known) => Ok(*known.get()),
            Entry::Vacant(new) => {
                let content = kept.content_text()?;
                let score = (whole || query.may_match(&content)).then(|| query.score_text(&content));
                Ok(*new.insert(score.flatten()))
            }
        }
    }
}

/// The longest message text tried whole before it is parsed; a longer one (a message with
/// images may hold megabytes of base64) is parsed, and only its content tried.
const WHOLE_TEXT_MAX: usize = 16 * 1024;

#[cfg(test)]
mod tests {
    use proptest::collection::vec;
    use proptest::prelude::*;
    use serde_json::json;

    use super::super::history::{History, Origin};
    use super::*;
    use crate::session::search::indexed_words;
    use crate::session::{Message, Role};

    /// Every place, scored one by one, sorted and paged: what `scan` must find.
    fn every_place(texts: &[(String, Vec<String>)], query: &Query, offset: u64, limit: u64) -> Vec<(String, u64)> {
        let mut hits = Vec::new();
        for (id, texts) in texts {
            for (index, text) in texts.iter().enumerate() {
                let words: Vec<String> = indexed_words(text).map(|w| w.text).collect();
                if let Some(score) = query.score(&words) {
                    hits.push((score, id.clone(), index as u64));
                }
            }
        }
        hits.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
        hits.into_iter().skip(offset as usize).take(limit as usize).map(|(_, id, index)| (id, index)).collect()
    }

    /// A message of `text`: a string (kept short), or every third one a text part
    /// beside an image part (kept whole).
    fn message(i: usize, text: &str) -> Message {
        let content = match i % 3 {
            2 => json!([{"type": "text", "text": text}, {"type": "image", "data": "YWJj"}]),
            _ => json!(text),
        };
        Message {
            id: Some(format!("m{i}")),
            ..Message::new(if i.is_multiple_of(2) { Role::User } else { Role::Assistant }, content)
        }
    }

    proptest! {
        /// Issue 47: the scan that reads what signatures leave finds the same page as
        /// scoring every message, forks sharing messages included.
        #[test]
        fn a_scan_finds_what_scoring_every_message_finds(
            sessions in vec(vec("(ab|abc|abd|b|cab|x|AB)( (ab|abc|abd|b|cab|x)){0,6}", 0..24), 1..4),
            query in "(ab|abc|b|x|ab\\*|abc\\*|abcd\\*|\"ab b\"|\"ab ab\"\\*)( (ab|b|cab|abd\\*)){0,2}",
            offset in 0u64..12,
            limit in 1u64..24,
            fork_at in 0usize..24,
        ) {
            let query = Query::parse(&query).unwrap();
            let mut texts = Vec::new();
            let mut searched = Vec::new();
            let mut first = None;
            for (s, session) in sessions.iter().enumerate() {
                let messages: Vec<Message> = session.iter().enumerate().map(|(i, t)| message(i, t)).collect();
                let history = History::of(&messages, &Origin::default()).unwrap();
                first.get_or_insert_with(|| (history.clone(), session.clone()));
                texts.push((format!("s{s}"), session.clone()));
                searched.push((format!("s{s}"), history.searched()));
            }
            // A fork of the first session: its oldest messages shared, one of its own.
            let (mut fork, mut fork_texts) = first.unwrap();
            fork.keep_oldest(fork_at).unwrap();
            fork_texts.truncate(fork_at);
            fork.extend(&[message(fork_texts.len(), "ab ab b")], &Origin::default()).unwrap();
            fork_texts.push("ab ab b".into());
            texts.push(("fork".into(), fork_texts));
            searched.push(("fork".into(), fork.searched()));
            let found = scan(searched, &query, offset, limit).unwrap();
            let places: Vec<(String, u64)> = found.into_iter().map(|f| (f.session_id, f.index)).collect();
            prop_assert_eq!(places, every_place(&texts, &query, offset, limit));
        }
    }
}
