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

use time::OffsetDateTime;

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
        Source::System => uuid::Uuid::now_v7().to_string(),
        Source::Counted { ids, .. } => counted_id(ids.fetch_add(1, Ordering::Relaxed) + 1),
    }
}

/// The time now, or the counted clock's next reading.
pub fn now() -> OffsetDateTime {
    match source() {
        Source::System => OffsetDateTime::now_utc(),
        Source::Counted { millis, .. } => counted_time(millis.fetch_add(1, Ordering::Relaxed)),
    }
}

fn counted_id(n: u64) -> String {
    format!("00000000-0000-7000-8000-{n:012}")
}

fn counted_time(millis: u64) -> OffsetDateTime {
    let start = OffsetDateTime::from_unix_timestamp(EPOCH_2000).unwrap_or(OffsetDateTime::UNIX_EPOCH);
    start + time::Duration::milliseconds(i64::try_from(millis).unwrap_or(i64::MAX))
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
        let first = counted_time(0);
        assert_eq!(first.format(&time::format_description::well_known::Rfc3339).unwrap(), "2000-01-01T00:00:00Z");
        assert_eq!(counted_time(1) - first, time::Duration::milliseconds(1));
        assert_eq!(counted_time(86_400_000).day(), 2);
    }
}
