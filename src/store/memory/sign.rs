//! What the memory store's search tests before it reads a message: a signature of the
//! message's indexed words (`session::search`), kept beside the message, 24 bytes. It
//! answers two questions with no false "no": may the message hold these words (a Bloom
//! filter of its words and of their first `PREFIX` characters, for prefix terms), and how
//! often at most may it hold this word, or words of this prefix (21 small counters, each
//! the count of the most frequent word hashed to it). A scan of a million signatures is a
//! walk over 24 MB, where reading the messages themselves is a cache miss each; and a
//! message's score is bounded without reading it, so that a page of hits reads few
//! messages beyond those it shows (`scan`).

use std::cell::RefCell;

use crate::session::search::{Query, ascii_indexed_words, indexed_words};

/// A message's signature (see the module header).
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct Sign {
    words: [u64; 2],
    /// `SLOTS` counters of 3 bits: each the times the most frequent word (or prefix)
    /// hashed to it is there, `MANY` meaning that many or more.
    counts: u64,
}

/// What a query asks of a signature: the word bits every match has, and for each term
/// the counter of what bounds its count (its first word, or its prefix; `None` when
/// nothing does: a prefix shorter than `PREFIX`).
#[derive(Clone, Debug)]
pub struct Asks {
    words: [u64; 2],
    terms: Vec<Option<u32>>,
}

impl Sign {
    /// The signature of a message's searchable text (`content_text`): each indexed word,
    /// lowercased as `all_words` does, hashed as the query's words are.
    pub fn of(text: &str) -> Sign {
        thread_local! {
            static SEEN: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
        }
        SEEN.with(|seen| match seen.try_borrow_mut() {
            Ok(mut seen) => {
                seen.clear();
                let sign = Sign::with(text, &mut seen);
                // A long message's room is not kept for the short ones after it.
                seen.shrink_to(KEPT_ROOM);
                sign
            }
            Err(_) => Sign::with(text, &mut Vec::new()),
        })
    }

    /// `of`, with `seen` (empty) to gather the hashes in: a buffer kept per thread, since
    /// an allocation of its own cost each append about as much as the words' hashes.
    fn with(text: &str, seen: &mut Vec<u64>) -> Sign {
        // Each indexed word's hash, then its prefix's (if it has one).
        seen.reserve(text.len() / 3);
        // The filter's bits, in a register until the end: set in memory a half at a time
        // and read back whole, each word would stall on the store it follows.
        let mut words = 0_u128;
        let mut add = |(word, prefix): (u64, Option<u64>)| {
            words |= word_bits(word);
            seen.push(word);
            if let Some(prefix) = prefix {
                words |= prefix_bits(prefix);
                seen.push(prefix);
            }
        };
        if text.is_ascii() {
            ascii_indexed_words(text.as_bytes()).for_each(|word| add(ascii_hashes(word)));
        } else {
            indexed_words(text).for_each(|word| add(hashes_of(&word.text)));
        }
        let mut sign = Sign { words: halves(words), counts: 0 };
        // How often each is there, counted exactly. A few are compared with those before
        // them that may be the same (`present`, by six bits of the hash); many are sorted.
        if seen.len() <= 64 {
            let mut present = 0_u64;
            for (i, &hash) in seen.iter().enumerate() {
                let bit = 1 << (hash >> 58);
                let before = match present & bit {
                    0 => 0,
                    _ => seen[..i].iter().filter(|&&before| before == hash).count(),
                };
                sign.count(hash, before + 1);
                present |= bit;
            }
        } else {
            seen.sort_unstable();
            for run in seen.chunk_by(|a, b| a == b) {
                sign.count(run[0], run.len());
            }
        }
        sign
    }

    /// Raises the counter `hash` falls to to `times`, if it is lower.
    fn count(&mut self, hash: u64, times: usize) {
        let shift = counter(hash);
        let times = (times as u64).min(MANY);
        if times > (self.counts >> shift) & MANY {
            self.counts = self.counts & !(MANY << shift) | times << shift;
        }
    }

    /// Whether the message may match a query that asks `asks`.
    pub fn may_match(&self, asks: &Asks) -> bool {
        self.words[0] & asks.words[0] == asks.words[0] && self.words[1] & asks.words[1] == asks.words[1]
    }

    /// The most a match may score (`Query::score`): for each term, its counter (at least
    /// one: a match holds each term); `None` when a counter says `MANY`, or a term has no
    /// bound. At most `MOST_A_TERM` a term.
    pub fn most(&self, asks: &Asks) -> Option<u64> {
        asks.terms.iter().try_fold(0, |most, shift| match (self.counts >> (*shift)?) & MANY {
            MANY => None,
            times => Some(most + times.max(1)),
        })
    }
}

impl Asks {
    /// Every word of a term is in each match, and a prefix of `PREFIX` characters or
    /// more begins one. A term occurs at most as often as its first word, or as words
    /// begin with its prefix; a shorter prefix bounds nothing.
    pub fn of(query: &Query) -> Asks {
        let mut words = 0_u128;
        let mut terms = Vec::new();
        for term in &query.terms {
            let hashes: Vec<Option<u64>> = term
                .words
                .iter()
                .enumerate()
                .map(|(i, word)| match term.prefix && i == term.words.len() - 1 {
                    false => Some(hashes_of(word).0),
                    true => hashes_of(word).1,
                })
                .collect();
            for (i, hash) in hashes.iter().enumerate() {
                let last_is_prefix = term.prefix && i == hashes.len() - 1;
                words |= match hash {
                    Some(hash) if last_is_prefix => prefix_bits(*hash),
                    Some(hash) => word_bits(*hash),
                    None => 0,
                };
            }
            terms.push(hashes[0].map(counter));
        }
        Asks { words: halves(words), terms }
    }
}

/// How many characters of a word its prefix entry holds.
const PREFIX: usize = 3;

/// How many hashes' room `Sign::of`'s buffer keeps between messages.
const KEPT_ROOM: usize = 1024;

/// A lowercased word's hash, and the hash of its first `PREFIX` characters if it has as
/// many (told apart from the word of those characters).
fn hashes_of(word: &str) -> (u64, Option<u64>) {
    let prefix = match word.char_indices().nth(PREFIX) {
        Some((end, _)) => Some(&word[..end]),
        None => (word.chars().count() == PREFIX).then_some(word),
    };
    (hash(word.as_bytes(), 0), prefix.map(|p| hash(p.as_bytes(), PREFIX_SALT)))
}

/// `hashes_of` an ASCII word as written: a letter or digit's lowercase form is itself
/// with bit 5 set (`LOWER`), which `hash` sets eight bytes at a time.
fn ascii_hashes(word: &[u8]) -> (u64, Option<u64>) {
    let prefix = word.get(..PREFIX).map(|p| hash_lowered(p, PREFIX_SALT));
    (hash_lowered(word, 0), prefix)
}

/// Bit 5 of every byte: what makes an ASCII letter or digit lowercase.
const LOWER: u64 = 0x2020_2020_2020_2020;

/// Sets a prefix's hash apart from that of the word of the same characters.
const PREFIX_SALT: u64 = 0x9e37_79b9_7f4a_7c15;

fn hash(bytes: &[u8], salt: u64) -> u64 {
    hash_with(bytes, salt, 0)
}

fn hash_lowered(bytes: &[u8], salt: u64) -> u64 {
    hash_with(bytes, salt, LOWER)
}

/// A word's bytes (each or'ed with `lower`) taken eight at a time, each eight multiplied
/// in, then mixed (MurmurHash3's finalizer) so that every bit drawn from it is spread.
fn hash_with(bytes: &[u8], salt: u64, lower: u64) -> u64 {
    let mut h = salt ^ (bytes.len() as u64).wrapping_mul(0x9fb2_1c65_1e98_df25);
    let mut chunks = bytes.chunks_exact(8);
    for chunk in &mut chunks {
        let mut eight = [0; 8];
        eight.copy_from_slice(chunk);
        h = (h ^ (u64::from_le_bytes(eight) | lower)).wrapping_mul(0xff51_afd7_ed55_8ccd).rotate_left(31);
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        // Gathered in a register: bytes copied to memory and read back as one word stall.
        let last = rest.iter().rev().fold(0, |eight, &b| eight << 8 | u64::from(b));
        let mask = u64::MAX >> (8 * (8 - rest.len()));
        h = (h ^ ((last | lower) & mask)).wrapping_mul(0xff51_afd7_ed55_8ccd).rotate_left(31);
    }
    mix(h)
}

fn mix(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

/// The filter's 128 bits as kept: the low half first.
fn halves(words: u128) -> [u64; 2] {
    [words as u64, (words >> 64) as u64]
}

/// A word's three bits among the 128.
fn word_bits(hash: u64) -> u128 {
    (0..3).fold(0, |bits, k| bits | BIT[((hash >> (7 * k)) & 127) as usize])
}

/// A prefix's one bit among the 128: prefixes ask less of a message than words, which
/// keeps the filter sparse enough for words.
fn prefix_bits(hash: u64) -> u128 {
    BIT[(hash & 127) as usize]
}

/// Each of the 128 bits alone: read from a table, since a shift of 128 bits takes a
/// shift of each half, a test and two selects.
static BIT: [u128; 128] = {
    let mut bits = [0; 128];
    let mut i = 0;
    while i < 128 {
        bits[i] = 1 << i;
        i += 1;
    }
    bits
};

/// How many counters a signature holds, of 3 bits each.
const SLOTS: u64 = 21;
/// A counter's highest value: that many times or more.
const MANY: u64 = 7;
/// The most `Sign::most` gives a term.
pub const MOST_A_TERM: u64 = MANY - 1;

/// Where a word's (or prefix's) counter lies: its shift.
fn counter(hash: u64) -> u32 {
    // The high half of the hash scaled to `0..SLOTS` (a multiplication: no division).
    (((hash >> 32) * SLOTS) >> 32) as u32 * 3
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::search::{MAX_WORD_BYTES, MAX_WORDS};

    fn asks(query: &str) -> Asks {
        Asks::of(&Query::parse(query).unwrap())
    }

    /// The buffer `of` keeps per thread starts empty for each message: a short message
    /// signed after a long one, or after itself, is signed as when alone.
    #[test]
    fn a_signature_does_not_depend_on_the_messages_signed_before_it() {
        let short = "deploy the parser, then deploy it again";
        let long = (0..5_000).map(|i| format!("word{i} ")).collect::<String>();
        let alone = std::thread::spawn(move || Sign::of(short)).join().unwrap();
        assert_ne!(alone, Sign::default());
        for before in [long.as_str(), short, "", "deploy"] {
            let _ = Sign::of(before);
            assert_eq!(Sign::of(short), alone, "after {:.20}", before);
        }
    }

    #[test]
    fn a_signature_is_24_bytes() {
        assert_eq!(std::mem::size_of::<Sign>(), 24, "a million messages keep a million signatures");
    }

    #[test]
    fn a_signature_holds_every_indexed_word_in_any_case() {
        let sign = Sign::of("The quick BROWN fox, DÉJÀ vu \u{212A}elvin");
        for query in [
            "quick",
            "brown",
            "the fox",
            "\"brown fox\"",
            "déjà",
            "kelvin",
            "qu*",
            "quic*",
            "\"vu kel\"*",
            "zz*",
            "qui*",
        ] {
            assert!(sign.may_match(&asks(query)), "{query}");
        }
        assert!(!Sign::default().may_match(&asks("quick")));
        assert!(!Sign::default().may_match(&asks("qui*")));
        assert!(Sign::default().may_match(&asks("qu*")), "a prefix of two characters asks for no bits");
    }

    #[test]
    fn words_that_are_not_indexed_are_not_signed() {
        let long = "x".repeat(MAX_WORD_BYTES + 1);
        assert_eq!(Sign::of(&long), Sign::default());
        let many = format!("{} last", "w ".repeat(MAX_WORDS));
        assert_eq!(Sign::of(&many), Sign::of(&"w ".repeat(MAX_WORDS)), "\"last\" is not signed");
    }

    #[test]
    fn a_signature_bounds_what_a_match_scores() {
        let once = Sign::of("error in the file");
        let twice = Sign::of("error in the error file");
        let thrice = Sign::of("error error error");
        let many = Sign::of(&"error ".repeat(7));
        assert_eq!(once.most(&asks("error")), Some(1));
        assert_eq!(twice.most(&asks("error")), Some(2));
        assert_eq!(thrice.most(&asks("error")), Some(3));
        assert_eq!(Sign::of(&"error ".repeat(6)).most(&asks("error")), Some(MOST_A_TERM));
        assert_eq!(many.most(&asks("error")), None, "seven times or more bounds nothing");
        assert_eq!(twice.most(&asks("error file")), Some(3));
        assert_eq!(twice.most(&asks("\"error in\"")), Some(2), "a phrase occurs at most as often as its first word");
        assert_eq!(once.most(&asks("\"error i\"*")), Some(1));
        assert_eq!(once.most(&asks("erro*")), Some(1));
        assert_eq!(Sign::of("error errand").most(&asks("erro*")), Some(2), "a prefix may begin several words");
        assert_eq!(once.most(&asks("err*")), Some(1));
        assert_eq!(once.most(&asks("er*")), None, "a prefix of two characters bounds nothing");
    }

    proptest::proptest! {
        /// An ASCII text is signed as the same words in a text that is not ASCII (after
        /// a dash that is no word): the words of an ASCII text are found and lowercased
        /// apart, eight bytes at a time, and must hash as the words of any text do.
        #[test]
        fn an_ascii_text_is_signed_as_any_text_is(text in "([ -~]{0,3}[A-Za-z0-9]{1,20}){0,12}[ -~]{0,9}") {
            proptest::prop_assert_eq!(Sign::of(&text), Sign::of(&format!("{text} \u{2014}")));
        }

        /// No false "no": a message holding a query's words (its score says so) may match
        /// by its signature, and scores at most what the signature bounds it by.
        #[test]
        fn a_signature_never_rules_out_a_match(
            text in "([a-cA-CéÉ\u{212A}]{1,6}[ ,.]){0,12}",
            query in "([a-cé]{1,5}\\*?|\"[a-c]{1,2} [a-c]{1,5}\"\\*?)( [a-c]{1,2}){0,2}",
        ) {
            let Ok(query) = Query::parse(&query) else { return Ok(()) };
            let words: Vec<String> = indexed_words(&text).map(|w| w.text).collect();
            let sign = Sign::of(&text);
            let asks = Asks::of(&query);
            if let Some(score) = query.score(&words) {
                proptest::prop_assert!(sign.may_match(&asks));
                proptest::prop_assert!(sign.most(&asks).is_none_or(|most| score <= most));
            }
        }
    }
}
