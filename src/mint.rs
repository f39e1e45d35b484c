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

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
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
        Source::System => uuid::Uuid::now_v7().hyphenated().encode_lower(&mut uuid::Uuid::encode_buffer()).to_owned(),
        Source::Counted { ids, .. } => counted_id(ids.fetch_add(1, Ordering::Relaxed) + 1),
    }
}

/// The time now in microseconds since the Unix epoch, or the counted clock's next reading.
pub fn now_micros() -> i64 {
    match source() {
        Source::System => match SystemTime::now().duration_since(UNIX_EPOCH) {
            Ok(after) => i64::try_from(after.as_micros()).unwrap_or(i64::MAX),
            Err(before) => i64::try_from(before.duration().as_micros()).map_or(i64::MIN, |us| -us),
        },
        Source::Counted { millis, .. } => counted_micros(millis.fetch_add(1, Ordering::Relaxed)),
    }
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
    fn system_ids_are_hyphenated_lower_case_version_7_uuids() {
        let id = uuid::Uuid::now_v7().hyphenated().encode_lower(&mut uuid::Uuid::encode_buffer()).to_owned();
        let parsed = uuid::Uuid::parse_str(&id).unwrap();
        assert_eq!((parsed.get_version_num(), parsed.to_string()), (7, id));
    }
}
