//! Each message's piece of a body (`export::Piece`: its tokens and shape), kept once
//! computed, so that counting, fitting and clearing a long session costs additions, not
//! encoding its text again. A piece is keyed by the message (its id and time stamp: a
//! stored message never changes), the body's format and options, and what was done to
//! the message on the way out (its mark: a result cleared, reasoning left out). Messages
//! without an id (the repaired view's results) are counted each time.
//!
//! Bounded: two generations of at most `GENERATION` pieces each; a piece found in the
//! old one moves to the young one, and when the young one is full the old one is
//! dropped, so what a long session uses again stays.

use std::hash::{BuildHasher, Hash, Hasher};

use serde_json::Value;

use foldhash::HashMap;
use foldhash::fast::FixedState;

use super::Body;
use super::edit::as_fit_clears;
use crate::lock;
use crate::session::Message;
use crate::session::export::{self, Around, Format, Options, Piece, Tally};

/// Pieces in one generation: about 40 MB at the most for both.
const GENERATION: usize = 1 << 19;

#[derive(Default)]
pub struct Pieces {
    kept: std::sync::Mutex<Generations>,
    /// Sessions counted before (by id, and the body's format and options), each with the
    /// count of its stored messages so far.
    running: std::sync::Mutex<HashMap<(String, u64), Running>>,
}

/// Sessions whose running counts are kept: when more are, all are dropped.
const RUNNING: usize = 4096;

/// A session's stored messages, counted: `tally` holds the body's messages from `start`
/// (its latest compaction point, or 0) to `counted`, the last of which is `last` (its id
/// and time stamp). Appends only add to it; anything else changes that last message, and
/// the session is counted anew.
#[derive(Debug, Clone)]
pub struct Running {
    pub counted: usize,
    pub start: usize,
    last: (String, String),
    /// The last message counted, hashed as a piece's key hashes it.
    last_hash: u64,
    /// The session's revision when counted: it never goes down but when the session is
    /// made anew (deleted and created, imported over), which an append cannot tell.
    revision: u64,
    tally: Tally,
    /// What fit would do to the messages counted: see `Clearable`.
    pub clearable: Clearable,
}

/// The counted messages as fit sees them, kept so that fitting a long session reads
/// only its end: its turns, the results worth clearing and the messages whose reasoning
/// would be left out (how many, and what clearing all of them saves), and the messages
/// that stand for what came before them (never left out).
#[derive(Debug, Clone, Default)]
pub struct Clearable {
    pub turns: usize,
    pub results: usize,
    pub reasoning: usize,
    pub savings: usize,
    pub summaries: Vec<usize>,
}

impl Clearable {
    /// Counts message `m`, at history index `at` (`first`: the body's first message).
    fn add(&mut self, at: usize, first: bool, m: &Message, saving: Option<usize>) {
        if m.role == crate::session::Role::User || first {
            self.turns += 1;
        }
        if super::is_summary(m) {
            self.summaries.push(at);
        }
        if let Some(saving) = saving {
            if m.role == crate::session::Role::Tool {
                self.results += 1;
            } else {
                self.reasoning += 1;
            }
            self.savings += saving;
        }
    }
}

impl Running {
    /// Whether `m`, the stored message at `counted - 1` of the session at `revision`, is
    /// the one counted there, in the same session.
    pub fn goes_on_from(&self, m: &Message, revision: u64) -> bool {
        m.id.as_deref() == Some(self.last.0.as_str())
            && m.created_at == self.last.1
            && key(0, m, 0) == Some(self.last_hash)
            && revision >= self.revision
    }
}

#[derive(Default)]
struct Generations {
    young: HashMap<u64, Piece>,
    old: HashMap<u64, Piece>,
}

impl Generations {
    fn get(&mut self, key: u64) -> Option<Piece> {
        if let Some(piece) = self.young.get(&key) {
            return Some(*piece);
        }
        let piece = self.old.remove(&key)?;
        self.put(key, piece);
        Some(piece)
    }

    fn put(&mut self, key: u64, piece: Piece) {
        if self.young.len() >= GENERATION {
            self.old = std::mem::take(&mut self.young);
        }
        self.young.insert(key, piece);
    }
}

/// What a body's pieces depend on beside each message: its format and options.
pub(super) fn fingerprint(format: Format, options: &Options) -> u64 {
    FixedState::default().hash_one((format.name(), options.fix, &options.model, options.thinking, options.store))
}

/// A piece's key: the body's format and options, the message (its id, time stamp and
/// everything a body is made of, hashed: an import may store other content under an id
/// and time stamp seen before), and its mark.
fn key(body_print: u64, m: &Message, mark: u64) -> Option<u64> {
    let id = m.id.as_deref()?;
    let mut h = FixedState::default().build_hasher();
    (body_print, id, &m.created_at, mark, m.role as u8, &m.name, &m.tool_call_id, &m.images).hash(&mut h);
    value(&m.content, &mut h);
    m.tool_calls.iter().flatten().for_each(|c| value(c, &mut h));
    if let Some(native) = &m.native {
        (native.format.name(), &native.model).hash(&mut h);
        value(&native.body, &mut h);
    }
    Some(h.finish())
}

/// Feeds a JSON value to a hasher (serde_json's values do not hash themselves).
fn value(v: &Value, h: &mut impl Hasher) {
    match v {
        Value::Null => h.write_u8(0),
        Value::Bool(b) => h.write_u8(1 + u8::from(*b)),
        Value::Number(n) => {
            h.write_u8(3);
            n.as_str().hash(h);
        }
        Value::String(s) => {
            h.write_u8(4);
            s.hash(h);
        }
        Value::Array(items) => {
            h.write_u8(5);
            h.write_usize(items.len());
            items.iter().for_each(|i| value(i, h));
        }
        Value::Object(members) => {
            h.write_u8(6);
            h.write_usize(members.len());
            for (k, v) in members {
                k.hash(h);
                value(v, h);
            }
        }
    }
}

impl Pieces {
    /// The tokens of `body`, as `count_payload` of its export would count them.
    pub(super) fn count(&self, body: &Body) -> usize {
        let (print, around, mut kept) = (fingerprint(body.format, body.options), body.around(), lock(&self.kept));
        let piece = |i: usize, m: &Message| kept.piece(print, &around, body, i, m);
        export::count_with(body.format, body.system, &body.messages, body.options, piece)
    }

    /// Message `i`'s piece of `body`.
    pub(super) fn one(&self, body: &Body, i: usize) -> Piece {
        let (print, around, mut kept) = (fingerprint(body.format, body.options), body.around(), lock(&self.kept));
        kept.piece(print, &around, body, i, &body.messages[i])
    }

    /// The piece message `i` of `body` would have as `m`, marked `mark`.
    pub(super) fn one_as(&self, body: &Body, i: usize, m: &Message, mark: u64) -> Piece {
        let (print, around, mut kept) = (fingerprint(body.format, body.options), body.around(), lock(&self.kept));
        kept.piece_for(print, &around, (body.format, body.options), i, m, mark)
    }

    /// What each message of `body` adds to its tokens: its piece, and the turn it
    /// starts (what leaving it out saves, but for the turns' joins at the cut).
    pub(super) fn shares(&self, body: &Body) -> Vec<usize> {
        let print = fingerprint(body.format, body.options);
        let (around, mut kept) = (body.around(), lock(&self.kept));
        let mut tally = Tally::default();
        let mut before = 0;
        let mut shares = Vec::with_capacity(body.messages.len());
        for (i, m) in body.messages.iter().enumerate() {
            tally.add(body.format, body.options.fix, m, || kept.piece(print, &around, body, i, m));
            shares.push(tally.messages() - before);
            before = tally.messages();
        }
        shares
    }
}

impl Generations {
    /// Message `i`'s piece of `body`, kept or made (and kept).
    fn piece<M: AsRef<Message>>(
        &mut self,
        print: u64,
        around: &Around<M>,
        body: &Body,
        i: usize,
        m: &Message,
    ) -> Piece {
        self.piece_for(print, around, (body.format, body.options), i, m, body.marks[i])
    }

    /// Message `i`'s piece of a body of `format` and `options`, kept or made (and kept).
    fn piece_for<M: AsRef<Message>>(
        &mut self,
        print: u64,
        around: &Around<M>,
        (format, options): (Format, &Options),
        i: usize,
        m: &Message,
        mark: u64,
    ) -> Piece {
        let make = || export::piece(format, i, m, options, around);
        let Some(mut key) = key(print, m, mark) else { return make() };
        // A result sent under its call's name is a piece of that name too.
        if format.names_results()
            && let Some(id) = m.tool_call_id.as_deref()
        {
            key = FixedState::default().hash_one((key, around.call(id).map(Value::to_string)));
        }
        if let Some(piece) = self.get(key) {
            return piece;
        }
        let piece = make();
        self.put(key, piece);
        piece
    }
}

/// The key of a session's running count: its id, the body's format and options.
fn running_key(session_id: &str, format: Format, options: &Options) -> (String, u64) {
    (session_id.to_owned(), fingerprint(format, options))
}

impl Pieces {
    /// A session's running count, if it was counted before with these options.
    pub fn running(&self, session_id: &str, format: Format, options: &Options) -> Option<Running> {
        lock(&self.running).get(&running_key(session_id, format, options)).cloned()
    }

    /// Forgets a session's running counts: it was made anew (imported over, deleted),
    /// which its last message may not show.
    pub fn forget(&self, session_id: &str) {
        lock(&self.running).retain(|(id, _), _| id != session_id);
    }

    /// Counts `stored` (the session's stored messages from `from.counted`, or all of
    /// them) on from `from`, keeps the count for the next time, and adds `repaired` (the
    /// repaired view's results, never kept): the body's tokens and where it starts.
    /// `None` when the new messages cannot be added to what was counted (a compaction
    /// point, or a Gemini result whose call was counted before): count them all.
    #[allow(clippy::too_many_arguments)]
    pub fn go_on(
        &self,
        session_id: &str,
        format: Format,
        (system, revision): (Option<&str>, u64),
        options: &Options,
        from: Option<Running>,
        stored: &[std::sync::Arc<Message>],
        repaired: Vec<std::sync::Arc<Message>>,
    ) -> Option<(usize, usize)> {
        let print = fingerprint(format, options);
        let base = from.as_ref().map_or(0, |r| r.counted);
        let fresh_start = super::latest_compaction(stored, format, options);
        if from.is_some()
            && (fresh_start.is_some()
                || (format.names_results()
                    && stored.iter().chain(&repaired).any(|m| m.role == crate::session::Role::Tool)))
        {
            return None;
        }
        let (mut tally, mut clearable, start, skip) = match (from, fresh_start) {
            (Some(running), _) => (running.tally, running.clearable, running.start, 0),
            (None, Some(point)) => (Tally::default(), Clearable::default(), point, point),
            (None, None) => (Tally::default(), Clearable::default(), 0, 0),
        };
        let at = if base > 0 { base } else { skip };
        let counted: Vec<std::sync::Arc<Message>> =
            stored[skip..].iter().cloned().chain(repaired.iter().cloned()).collect();
        let around = Around::new(&counted);
        let mut kept = lock(&self.kept);
        let new = stored.len() - skip;
        for (i, m) in counted[..new].iter().enumerate() {
            let piece = kept.piece_for(print, &around, (format, options), i, m, 0);
            tally.add(format, options.fix, m, || piece);
            let saving = as_fit_clears(m, format).map(|(cleared, mark)| {
                let after = kept.piece_for(print, &around, (format, options), i, &cleared, mark);
                piece.tokens.saturating_sub(after.tokens)
            });
            // Fit clears only what saves tokens.
            let saving = saving.filter(|&s| s > 0);
            clearable.add(at + i, at + i == start, m, saving);
        }
        if let Some(last) = stored.last() {
            let running = Running {
                counted: base + stored.len(),
                start,
                last: (last.id.clone().unwrap_or_default(), last.created_at.clone()),
                last_hash: key(0, last, 0).unwrap_or_default(),
                revision,
                tally: tally.clone(),
                clearable,
            };
            let mut all = lock(&self.running);
            if all.len() >= RUNNING {
                all.clear();
            }
            all.insert(running_key(session_id, format, options), running);
        }
        for (i, m) in counted.iter().enumerate().skip(new) {
            tally.add(format, options.fix, m, || kept.piece_for(print, &around, (format, options), i, m, 0));
        }
        Some((tally.total(format, system), start))
    }
}
