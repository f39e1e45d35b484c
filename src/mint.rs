//! Where new ids and time stamps come from: one source for the whole process, chosen at
//! start. By default the system: UUID v7 ids and the system clock. With
//! `--deterministic` (and always in `convo replay`), counters: the n-th id minted is
//! `00000000-0000-7000-8000-` followed by n in twelve decimal digits, and the clock reads
//! `2000-01-01T00:00:00Z` first and 1 ms later at every reading, so the same input gives
//! the same bytes on every machine.
//!
//! Every server-made session id, message id and stream id, and every `created_at` and
//! `updated_at`, is minted here. (The token that names this process as a draft's owner
//! is not: it must differ between processes, and no reply shows it.)

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{SystemTime, UNIX_EPOCH};

enum Source {
    System,
    Counted { ids: AtomicU64, millis: AtomicU64 },
}

static SOURCE: OnceLock<Source> = OnceLock::new();

fn source() -> &'static Source {
    SOURCE.get_or_init(|| Source::System)
}

/// The first reading of the counted clock: 2000-01-01T00:00:00Z.
const EPOCH_2000: i64 = 946_684_800;

/// Chooses the counted source for the rest of the process. Fails when an id or a time
/// stamp was minted already (from the system), or the choice was made before.
pub fn use_counters() -> Result<(), &'static str> {
    let counted = Source::Counted { ids: AtomicU64::new(0), millis: AtomicU64::new(0) };
    SOURCE.set(counted).map_err(|_| "the source of ids and time stamps was chosen already")
}

/// Whether ids and time stamps are counted (`--deterministic`).
pub fn is_counted() -> bool {
    matches!(source(), Source::Counted { .. })
}

/// A new id: a UUID v7 (ids sort by creation time), or the next counted one.
pub fn id() -> String {
    match source() {
        Source::System => v7(system_micros()),
        Source::Counted { ids, .. } => next_counted_id(ids),
    }
}

/// A new id made at `micros`, a reading of `now_micros`, as `id` makes one at a reading
/// of its own: a new message's id and time stamp take one reading between them.
pub fn id_at(micros: i64) -> String {
    match source() {
        Source::System => v7(micros),
        Source::Counted { ids, .. } => next_counted_id(ids),
    }
}

/// The UUID v7 of `micros`, hyphenated and lower-case (RFC 9562, with method 1's
/// counter). Every id comes from this module's one `Latest`, so ids made in the same
/// millisecond sort in the order they were made: a millisecond's first id starts a
/// 42-bit counter at a random value with its top bit clear, and each id after it in that
/// millisecond counts one on. The id never goes back: after the clock did, an id carries
/// the latest millisecond it has seen, not `micros`; and a counter that runs out carries
/// on in the next millisecond. The other 32 bits are random, as is every counter's start
/// (`rand`'s thread generator, which is cryptographically secure).
///
/// Written here rather than through `uuid::ContextV7` and `Uuid::hyphenated`: their
/// 128-bit arithmetic on nanoseconds and their formatting took 680 instructions an id,
/// 4% of an append's; this takes 270.
fn v7(micros: i64) -> String {
    // A clock before 1970 reads as 1 ms past it, not 0, as for `uuid::Timestamp`.
    let millis = (u64::try_from(micros).unwrap_or(0).max(1_000) / 1_000) & MILLIS;
    let (millis, counter) = crate::lock(&LATEST).next(millis);
    let bits = u128::from(millis) << 80
        | 0x7 << 76
        | u128::from(counter >> 30) << 64
        | 0b10 << 62
        | u128::from(counter & ((1 << 30) - 1)) << 32
        | u128::from(rand::random::<u32>());
    let id = hyphenated(bits);
    if let Ok(text) = id.as_bytes().try_into() {
        MINTED.with(|minted| minted.set((bits, text)));
    }
    id
}

thread_local! {
    /// The id `v7` last made on this thread (at first the nil UUID), and its text: the
    /// store reads a new message's id back as bits (`hyphenated_bits`) a moment after it
    /// was made.
    static MINTED: Cell<(u128, [u8; HYPHENATED])> =
        const { Cell::new((0, *b"00000000-0000-0000-0000-000000000000")) };
}

/// The millisecond of the latest id and its counter.
struct Latest {
    millis: u64,
    counter: u64,
}

impl Latest {
    /// The millisecond and counter of the next id, made at `millis`.
    fn next(&mut self, millis: u64) -> (u64, u64) {
        if millis > self.millis {
            *self = Latest { millis, counter: counter_start() };
        } else if self.counter < COUNTER {
            self.counter += 1;
        } else {
            *self = Latest { millis: (self.millis + 1) & MILLIS, counter: counter_start() };
        }
        (self.millis, self.counter)
    }
}

static LATEST: Mutex<Latest> = Mutex::new(Latest { millis: 0, counter: 0 });

/// A v7 id's 48 bits of milliseconds and 42 of counter (12 in `rand_a`, 30 in `rand_b`).
const MILLIS: u64 = (1 << 48) - 1;
const COUNTER: u64 = (1 << 42) - 1;

/// A millisecond's first counter: random, with the top bit clear, so that at least 2^41
/// ids fit in the millisecond.
fn counter_start() -> u64 {
    rand::random::<u64>() >> (64 - 41)
}

/// The length of a UUID's text: 32 hex digits and four hyphens.
const HYPHENATED: usize = 36;

/// Where each of a UUID's 16 bytes puts its two digits in its text (the hyphens after
/// its 4th, 6th, 8th and 10th byte).
const DIGITS_AT: [usize; 16] = [0, 2, 4, 6, 9, 11, 14, 16, 19, 21, 24, 26, 28, 30, 32, 34];
const HYPHENS_AT: [usize; 4] = [8, 13, 18, 23];

/// Each byte's two lower-case hex digits.
const HEX_PAIRS: [[u8; 2]; 256] = {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut pairs = [[0; 2]; 256];
    let mut byte = 0;
    while byte < 256 {
        pairs[byte] = [HEX[byte >> 4], HEX[byte & 0xf]];
        byte += 1;
    }
    pairs
};

/// The UUID `bits` as every minted id is written (`push_hyphenated`).
pub fn hyphenated(bits: u128) -> String {
    let mut text = String::with_capacity(HYPHENATED);
    push_hyphenated(&mut text, bits);
    text
}

/// Appends the UUID `bits` as every minted id is written: lower-case hex digits in groups
/// of 8-4-4-4-12.
pub fn push_hyphenated(out: &mut String, bits: u128) {
    let mut text = [b'-'; HYPHENATED];
    let bytes = bits.to_be_bytes();
    for (i, at) in DIGITS_AT.into_iter().enumerate() {
        [text[at], text[at + 1]] = HEX_PAIRS[usize::from(bytes[i])];
    }
    // SAFETY: hex digits and hyphens are ASCII, so the text is UTF-8.
    out.push_str(unsafe { std::str::from_utf8_unchecked(&text) });
}

/// The UUID `text` stands for when it is written exactly as `push_hyphenated` writes one
/// (not upper-case, braced or without hyphens, which a UUID parser also takes).
pub fn hyphenated_bits(text: &str) -> Option<u128> {
    let text: &[u8; HYPHENATED] = text.as_bytes().try_into().ok()?;
    let (bits, minted) = MINTED.with(Cell::get);
    // Sixteen bytes at a time: compared whole, the two texts went through `memcmp`.
    let words = |t: &[u8; HYPHENATED]| {
        let at = |i: usize| t.get(i..i + 16).and_then(|w| w.try_into().ok()).map(u128::from_ne_bytes);
        (at(0), at(16), at(HYPHENATED - 16))
    };
    if words(text) == words(&minted) {
        return Some(bits);
    }
    if HYPHENS_AT.iter().any(|&at| text[at] != b'-') {
        return None;
    }
    let mut digits = [0; 32];
    digits[..8].copy_from_slice(&text[..8]);
    digits[8..12].copy_from_slice(&text[9..13]);
    digits[12..16].copy_from_slice(&text[14..18]);
    digits[16..20].copy_from_slice(&text[19..23]);
    digits[20..].copy_from_slice(&text[24..]);
    let mut bits = 0;
    for eight in digits.as_chunks::<8>().0 {
        bits = bits << 32 | u128::from(eight_digits(u64::from_be_bytes(*eight))?);
    }
    Some(bits)
}

/// The value of eight lower-case hex digits, the first in the highest byte, worked out
/// in one word (a table lookup for each digit took twice the instructions).
fn eight_digits(digits: u64) -> Option<u32> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const TOPS: u64 = ONES * 0x80;
    if digits & TOPS != 0 {
        return None;
    }
    // For bytes under 0x80, each byte's top bit says whether it is at least `low`, or
    // at most `high`; no byte carries into the next.
    let at_least = |low: u8| digits + ONES * u64::from(0x80 - low);
    let at_most = |high: u8| ONES * u64::from(0x80 + high) - digits;
    let digit_or_letter = at_least(b'0') & at_most(b'9') | at_least(b'a') & at_most(b'f');
    if digit_or_letter & TOPS != TOPS {
        return None;
    }
    // '0' to '9' are 0x30 to 0x39, and 'a' to 'f' 0x61 to 0x66: a digit's value is its
    // low four bits, and 9 more for a letter (bit 6).
    let values = (digits & (ONES * 0x0f)) + ((digits >> 6) & ONES) * 9;
    // Two values to a byte, then four, then eight.
    let bytes = (values | values >> 4) & 0x00ff_00ff_00ff_00ff;
    let pairs = (bytes | bytes >> 8) & 0x0000_ffff_0000_ffff;
    Some((pairs | pairs >> 16) as u32)
}

/// The time now in microseconds since the Unix epoch, or the counted clock's next reading.
pub fn now_micros() -> i64 {
    match source() {
        Source::System => system_micros(),
        Source::Counted { millis, .. } => counted_micros(millis.fetch_add(1, Ordering::Relaxed)),
    }
}

fn system_micros() -> i64 {
    match SystemTime::now().duration_since(UNIX_EPOCH) {
        Ok(after) => i64::try_from(after.as_micros()).unwrap_or(i64::MAX),
        Err(before) => i64::try_from(before.duration().as_micros()).map_or(i64::MIN, |us| -us),
    }
}

fn next_counted_id(ids: &AtomicU64) -> String {
    counted_id(ids.fetch_add(1, Ordering::Relaxed) + 1)
}

fn counted_id(n: u64) -> String {
    format!("00000000-0000-7000-8000-{n:012}")
}

fn counted_micros(millis: u64) -> i64 {
    let millis = i64::try_from(millis).unwrap_or(i64::MAX);
    millis.saturating_mul(1_000).saturating_add(EPOCH_2000 * 1_000_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counted_ids_are_version_7_uuids_that_sort_by_count() {
        assert_eq!(counted_id(1), "00000000-0000-7000-8000-000000000001");
        assert_eq!(counted_id(12), "00000000-0000-7000-8000-000000000012");
        let parsed = uuid::Uuid::parse_str(&counted_id(987_654)).unwrap();
        assert_eq!(parsed.get_version_num(), 7);
        assert!(counted_id(9) < counted_id(10));
    }

    #[test]
    fn the_counted_clock_starts_in_2000_and_moves_by_milliseconds() {
        let stamp = |micros: i64| {
            let at = time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(micros) * 1_000).unwrap();
            crate::session::canonical(at)
        };
        assert_eq!(stamp(counted_micros(0)), "2000-01-01T00:00:00.000000Z");
        assert_eq!(stamp(counted_micros(1)), "2000-01-01T00:00:00.001000Z");
        assert_eq!(stamp(counted_micros(86_400_000)), "2000-01-02T00:00:00.000000Z");
    }

    #[test]
    fn uuid_text_as_the_uuid_crate_writes_and_reads_it() {
        let mut seen = 0;
        for bits in (0..2000u32).map(|i| if i < 2 { u128::MAX * u128::from(i) } else { rand::random() }) {
            let mut text = String::from("x");
            push_hyphenated(&mut text, bits);
            let expected = uuid::Uuid::from_u128(bits).hyphenated().to_string();
            assert_eq!(text[1..], expected);
            assert_eq!(hyphenated_bits(&expected), Some(bits));
            seen += 1;
        }
        assert_eq!(seen, 2000);
        let lower = "0192f0c1-7a3b-7cde-8f01-23456789abcd";
        assert_eq!(hyphenated_bits(lower), Some(0x0192f0c1_7a3b_7cde_8f01_23456789abcd));
        // What a UUID parser also takes, but `mint` never writes.
        for other in [
            lower.to_uppercase(),
            lower.replace('-', ""),
            format!("{{{lower}}}"),
            format!("urn:uuid:{lower}"),
            lower.replacen('-', "", 1) + "0",
            lower.replace('a', "g"),
            lower[..35].to_owned(),
            format!("{lower}0"),
            String::new(),
            lower.replace('-', "\u{2010}"),
        ] {
            assert_eq!(hyphenated_bits(&other), None, "{other}");
        }
    }

    /// The id just minted is read back from the memo as the bits it was made of, and a
    /// text that only shares part of it is read as it stands.
    #[test]
    fn an_id_just_minted_reads_back_as_its_bits() {
        assert_eq!(hyphenated_bits("00000000-0000-0000-0000-000000000000"), Some(0));
        let id = v7(1_700_000_000_000_000);
        let bits = uuid::Uuid::parse_str(&id).unwrap().as_u128();
        assert_eq!(hyphenated_bits(&id), Some(bits));
        for at in [0, 17, 35] {
            let mut other = id.clone().into_bytes();
            other[at] = if other[at] == b'0' { b'1' } else { b'0' };
            let other = String::from_utf8(other).unwrap();
            let expected = uuid::Uuid::parse_str(&other).unwrap().as_u128();
            assert_eq!(hyphenated_bits(&other), Some(expected), "{other}");
        }
        assert_eq!(hyphenated_bits(&id.replacen('-', "_", 1)), None);
    }

    proptest::proptest! {
        /// Any text of UUID digits, hyphens and their near misses is read as the uuid crate
        /// reads it, when the crate writes it back the same.
        #[test]
        fn uuid_text_is_read_as_the_uuid_crate_reads_it(text in "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9a-gA-G/:`@]{8}[-_][0-9a-fF]{4}-[0-9a-f]{4}[-.][0-9a-f]{4}-[0-9a-fé]{12}|\\PC{30,40}") {
            let expected = uuid::Uuid::try_parse(&text)
                .ok()
                .filter(|parsed| parsed.hyphenated().to_string() == text)
                .map(|parsed| parsed.as_u128());
            proptest::prop_assert_eq!(hyphenated_bits(&text), expected);
        }
    }

    #[test]
    fn a_counter_that_runs_out_goes_on_in_the_next_millisecond() {
        let mut latest = Latest { millis: 5, counter: COUNTER - 1 };
        assert_eq!(latest.next(5), (5, COUNTER));
        assert_eq!(latest.next(3), (5 + 1, latest.counter), "the clock went back: not the id");
        assert!(latest.counter < 1 << 41);
        let (millis, counter) = (latest.millis, latest.counter);
        assert_eq!(latest.next(millis), (millis, counter + 1));
        let (later, start) = latest.next(millis + 7);
        assert_eq!(later, millis + 7);
        assert!(start < 1 << 41);
    }

    #[test]
    fn system_ids_are_version_7_uuids_of_their_time_that_sort_as_made() {
        let at = system_micros();
        let ids: Vec<String> = (0..1000).map(|_| v7(at)).collect();
        let millis = u64::try_from(at / 1000).unwrap();
        for id in &ids {
            let parsed = uuid::Uuid::parse_str(id).unwrap();
            assert_eq!((parsed.get_version_num(), parsed.to_string()), (7, id.clone()));
            let (seconds, nanos) = parsed.get_timestamp().unwrap().to_unix();
            // Its millisecond, or a later one if another test's id came first (the
            // counter never goes back).
            let its = seconds * 1000 + u64::from(nanos / 1_000_000);
            assert!((millis..millis + 60_000).contains(&its), "{id}: {its} ms, made at {millis}");
        }
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "ids of one millisecond sort as they were made");
        // A clock that went back, even to before 1970, makes no id that sorts first.
        let back = v7(-1_000_000);
        assert_eq!(uuid::Uuid::parse_str(&back).unwrap().get_version_num(), 7);
        assert!(back > ids[999], "{back} after {}", ids[999]);
    }
}
