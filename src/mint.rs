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

/// The UUID v7 of `micros`, hyphenated and lower-case. Every id comes from this module's
/// one `ContextV7` (a counter like the one `Uuid::now_v7` keeps for itself), so ids made
/// in the same millisecond sort in the order they were made. The context never goes
/// back: after the clock did, an id carries the latest time it has seen, not `micros`.
fn v7(micros: i64) -> String {
    static CONTEXT: Mutex<uuid::ContextV7> = Mutex::new(uuid::ContextV7::new());
    // A clock before 1970 reads as 1 ms past it, not 0: the context starts at 0, and
    // would count from 1 there instead of from a random start.
    let micros = u64::try_from(micros).unwrap_or(0).max(1_000);
    let (seconds, nanos) = (micros / 1_000_000, (micros % 1_000_000) as u32 * 1_000);
    let id = uuid::Uuid::new_v7(uuid::Timestamp::from_unix(&CONTEXT, seconds, nanos));
    id.hyphenated().encode_lower(&mut uuid::Uuid::encode_buffer()).to_owned()
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
