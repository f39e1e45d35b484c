//! Time stamps. Every `created_at` and `updated_at` the server stores is in one canonical
//! form, `YYYY-MM-DDTHH:MM:SS.ffffffZ`: UTC, upper-case `T` and `Z`, exactly six digits
//! of fraction. One width and one offset make comparing the text compare the times, which
//! the stores rely on (history order, `session/list` order and cursors).
//!
//! The server makes its own stamps in that form; a stamp a client brings (`created_at` on
//! import) must be RFC 3339 as its grammar defines it, and is rewritten in that form:
//! converted to UTC, its fraction cut (not rounded) to microseconds.

use std::cell::Cell;

use time::format_description::well_known::Rfc3339;
use time::{OffsetDateTime, UtcOffset};

use crate::error::quote;

/// The current time (`crate::mint`'s clock), in the canonical form.
pub fn now() -> String {
    at_micros(crate::mint::now_micros())
}

/// The canonical stamp of a time in microseconds since the Unix epoch. Every stored
/// message takes one (and its session's `updated_at` another): the date and the time of
/// day are written once a second and kept, per thread, and only the microseconds at
/// each call.
pub fn at_micros(micros: i64) -> String {
    text(&stamp(micros)).to_owned()
}

/// `at_micros` into `out`, without a `String` of its own.
pub fn push_at_micros(out: &mut String, micros: i64) {
    out.push_str(text(&stamp(micros)));
}

/// The microseconds since the Unix epoch of `canonical`, a stamp in the canonical form;
/// `None` for any other text. `at_micros` gives back exactly the text read.
pub fn micros_of(canonical: &str) -> Option<i64> {
    let b = canonical.as_bytes();
    of_kept_second(b).or_else(|| parsed(b))
}

/// `micros_of` read whole: the date and the time checked against the calendar, and the
/// stamp of the time read compared with the text.
fn parsed(b: &[u8]) -> Option<i64> {
    let separators = [(4, b'-'), (7, b'-'), (10, b'T'), (13, b':'), (16, b':'), (19, b'.'), (26, b'Z')];
    if b.len() != 27 || separators.iter().any(|&(at, c)| b[at] != c) {
        return None;
    }
    let number = |at: usize, width: usize| {
        b[at..at + width].iter().try_fold(0u32, |n, &c| c.is_ascii_digit().then(|| n * 10 + u32::from(c - b'0')))
    };
    let month = time::Month::try_from(u8::try_from(number(5, 2)?).ok()?).ok()?;
    let date = time::Date::from_calendar_date(number(0, 4)? as i32, month, number(8, 2)? as u8).ok()?;
    let clock =
        time::Time::from_hms_micro(number(11, 2)? as u8, number(14, 2)? as u8, number(17, 2)? as u8, number(20, 6)?)
            .ok()?;
    let t = time::PrimitiveDateTime::new(date, clock).assume_utc();
    let micros = t.unix_timestamp().checked_mul(1_000_000)?.checked_add(i64::from(t.microsecond()))?;
    (stamp(micros) == *b).then_some(micros)
}

thread_local! {
    /// The second `stamp` last wrote on this thread, and its text (with the microseconds
    /// of whichever stamp it was).
    static SECOND: Cell<(i64, [u8; 27])> = const { Cell::new((i64::MIN, [0; 27])) };
}

/// `micros_of` of a stamp in the second `stamp` last wrote on this thread (as a message's
/// own, read back when it is stored): its date and time compared with that second's,
/// and only its microseconds read.
fn of_kept_second(b: &[u8]) -> Option<i64> {
    let (second, text) = SECOND.with(Cell::get);
    if second == i64::MIN || b.len() != 27 || b[..20] != text[..20] || b[26] != b'Z' {
        return None;
    }
    let micro = b[20..26].iter().try_fold(0, |n, &c| c.is_ascii_digit().then(|| n * 10 + i64::from(c - b'0')))?;
    second.checked_mul(1_000_000)?.checked_add(micro)
}

fn stamp(micros: i64) -> [u8; 27] {
    let (second, micro) = (micros.div_euclid(1_000_000), micros.rem_euclid(1_000_000));
    let mut out = SECOND.with(|kept| match kept.get() {
        (at, text) if at == second => text,
        _ => {
            let text = written(OffsetDateTime::from_unix_timestamp(second).unwrap_or(OffsetDateTime::UNIX_EPOCH));
            kept.set((second, text));
            text
        }
    });
    put_digits(&mut out[20..26], micro as u32);
    out
}

/// Checks an RFC 3339 time stamp and returns it in the canonical form, or says what is
/// wrong with it (without naming the field, which the caller knows).
///
/// `time`'s RFC 3339 parser checks the calendar (no February 30), the clock and the offset
/// (hours 00-23, minutes 00-59). It is looser than the RFC's grammar in three places,
/// which are closed here: it takes any character between date and time, it reads a
/// fraction of any length (digits past the ninth dropped), and it reads the leap second
/// `23:59:60` at the end of a month as `23:59:59.999999999`.
pub fn normalize(given: &str) -> Result<String, String> {
    let refuse = |why: &str| Err(format!("must be an RFC 3339 time stamp ({SHAPE}), got {}: {why}", quote(given)));
    let parsed = match OffsetDateTime::parse(given, &Rfc3339) {
        Ok(parsed) => parsed,
        Err(e) => return refuse(&reason(e)),
    };
    // A successful parse means `given` starts with `YYYY-MM-DD?HH:MM:SS`, all ASCII.
    let b = given.as_bytes();
    if !matches!(b[10], b'T' | b't' | b' ') {
        return refuse("the date and the time must be separated by `T` (or a space)");
    }
    if &b[17..19] == b"60" {
        return refuse("leap seconds (second 60) are not accepted");
    }
    if b.get(19) == Some(&b'.') && b[20..].iter().take_while(|c| c.is_ascii_digit()).count() > 9 {
        return refuse("at most 9 digits of fraction (nanoseconds) are accepted");
    }
    match parsed.checked_to_offset(UtcOffset::UTC).filter(|utc| (0..=9999).contains(&utc.year())) {
        Some(utc) => Ok(canonical(utc)),
        None => refuse("in UTC it falls outside the years 0000-9999"),
    }
}

/// A time stamp given as the parameter `field`, in the canonical form; -32602 naming the
/// field when it is not RFC 3339.
pub fn param(field: &str, given: &str) -> crate::error::Result<String> {
    normalize(given).map_err(|why| crate::error::Error::invalid(format!("{field}: {why}")))
}

/// What RFC 3339 allows, in brief, for error messages.
const SHAPE: &str = "YYYY-MM-DDTHH:MM:SS[.fraction] then Z or +HH:MM or -HH:MM";

/// `time`'s parse error in the words of this module's messages.
fn reason(e: time::error::Parse) -> String {
    use time::error::{Parse, ParseFromDescription as Syntax};
    match e {
        Parse::ParseFromDescription(Syntax::InvalidComponent("subsecond")) => {
            "its fraction of a second is missing or not valid".into()
        }
        Parse::ParseFromDescription(Syntax::InvalidComponent(part)) => format!("its {part} is missing or not valid"),
        Parse::ParseFromDescription(Syntax::InvalidLiteral { .. }) => "a `-` or `:` is missing or misplaced".into(),
        Parse::ParseFromDescription(Syntax::UnexpectedTrailingCharacters { .. }) => {
            "something follows the offset".into()
        }
        // Out of range: "day must be in the range 1..=28 for the given month and year".
        other => other.to_string(),
    }
}

/// A time in the canonical form, written digit by digit: `time`'s formatter walks its
/// format description at each call.
pub fn canonical(t: OffsetDateTime) -> String {
    text(&written(t)).to_owned()
}

fn written(t: OffsetDateTime) -> [u8; 27] {
    let year = t.year();
    // Only a year past 9999, which `time` without `large-dates` cannot hold, or before 0,
    // which `normalize` refuses.
    debug_assert!((0..=9999).contains(&year), "formatting {t}");
    let year = year.clamp(0, 9999) as u32;
    let fields = [
        (year, 4, b'-'),
        (u8::from(t.month()).into(), 2, b'-'),
        (t.day().into(), 2, b'T'),
        (t.hour().into(), 2, b':'),
        (t.minute().into(), 2, b':'),
        (t.second().into(), 2, b'.'),
        (t.microsecond(), 6, b'Z'),
    ];
    let mut out = [0u8; 27];
    let mut at = 0;
    for (value, width, then) in fields {
        put_digits(&mut out[at..at + width], value);
        out[at + width] = then;
        at += width + 1;
    }
    out
}

/// `value`'s last `into.len()` decimal digits, zero-padded.
fn put_digits(into: &mut [u8], mut value: u32) {
    for digit in into.iter_mut().rev() {
        *digit = b'0' + (value % 10) as u8;
        value /= 10;
    }
}

fn text(stamp: &[u8; 27]) -> &str {
    debug_assert!(stamp.is_ascii(), "{stamp:?}");
    // SAFETY: a stamp is ASCII digits (`put_digits`) and separators only (`written`),
    // so always UTF-8. (`str::from_utf8` checked the 27 bytes in 100 instructions, at
    // each of an append's two stamps.)
    unsafe { std::str::from_utf8_unchecked(stamp) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_kept_by_the_second_read_as_written_whole() {
        let whole =
            |micros: i64| canonical(OffsetDateTime::from_unix_timestamp_nanos(i128::from(micros) * 1_000).unwrap());
        let at = 1_733_300_000_000_000;
        // Back and forth across second boundaries, so a kept second is reused and replaced.
        let times = [at, at + 999_999, at + 1_000_000, at + 1, at - 1, 0, -1, -1_000_000, -1_000_001, at + 123_456];
        for micros in times.into_iter().chain((0..3_000_000).step_by(99_991).map(|d| at + d)) {
            assert_eq!(at_micros(micros), whole(micros), "{micros}");
        }
        assert_eq!(at_micros(-1), "1969-12-31T23:59:59.999999Z");
    }

    #[test]
    fn canonical_stamps_read_back_to_their_microseconds() {
        let at = 1_733_300_000_000_000;
        for micros in [at, at + 999_999, 0, -1, -1_000_001, -62_167_219_200_000_000, 253_402_300_799_999_999] {
            let text = at_micros(micros);
            assert_eq!(micros_of(&text), Some(micros), "{text}");
            let mut pushed = String::from(">");
            push_at_micros(&mut pushed, micros);
            assert_eq!(pushed, format!(">{text}"));
        }
        assert_eq!(micros_of("0000-01-01T00:00:00.000000Z"), Some(-62_167_219_200_000_000));
        // Anything but the canonical form: other widths, offsets, separators, calendars.
        for other in [
            "2024-01-01T10:00:00Z",
            "2024-01-01T10:00:00.00000Z",
            "2024-01-01T10:00:00.0000000Z",
            "2024-01-01t10:00:00.000000Z",
            "2024-01-01 10:00:00.000000Z",
            "2024-01-01T10:00:00.000000z",
            "2024-02-30T10:00:00.000000Z",
            "2024-13-01T10:00:00.000000Z",
            "2024-01-01T24:00:00.000000Z",
            "2024-01-01T10:00:60.000000Z",
            "2024-01-01T10:0a:00.000000Z",
            "+024-01-01T10:00:00.000000Z",
            "2024-01-01T10:00:00.00000+Z",
            "",
        ] {
            assert_eq!(micros_of(other), None, "{other}");
        }
    }

    /// A stamp in the second last written on this thread is read by its microseconds
    /// alone, and reads as the whole parse reads it.
    #[test]
    fn a_stamp_in_the_kept_second_reads_as_the_whole_parse_reads_it() {
        let at = 1_733_300_000_000_000;
        let earlier = at_micros(at - 1);
        let kept = at_micros(at + 250_000);
        for (tail, micros) in [
            ("000000Z", Some(at)),
            ("999999Z", Some(at + 999_999)),
            ("250000Z", Some(at + 250_000)),
            ("12345aZ", None),
            ("+12345Z", None),
            ("123456z", None),
            ("12345Z", None),
            ("1234567Z", None),
            ("123456Zx", None),
        ] {
            let text = format!("{}{tail}", &kept[..20]);
            assert_eq!(of_kept_second(text.as_bytes()), micros, "{text}");
            assert_eq!(parsed(text.as_bytes()), micros, "{text}");
            assert_eq!(micros_of(&text), micros, "{text}");
        }
        // Another second is read whole.
        assert_eq!(of_kept_second(earlier.as_bytes()), None);
        assert_eq!(micros_of(&earlier), Some(at - 1));
    }

    #[test]
    fn the_servers_own_stamps_are_canonical() {
        let t = now();
        assert_eq!(normalize(&t).as_deref(), Ok(t.as_str()));
        assert_eq!(t.len(), "2024-01-01T10:00:00.000000Z".len());
    }

    #[test]
    fn valid_stamps_are_normalised_to_utc_microseconds() {
        let cases = [
            ("2024-01-01T10:00:00Z", "2024-01-01T10:00:00.000000Z"),
            ("2024-01-01t10:00:00z", "2024-01-01T10:00:00.000000Z"),
            ("2024-01-01 10:00:00Z", "2024-01-01T10:00:00.000000Z"),
            ("2024-01-01T08:00:00.5+00:00", "2024-01-01T08:00:00.500000Z"),
            ("2024-01-01T08:00:00.5-00:00", "2024-01-01T08:00:00.500000Z"),
            ("2024-01-01T10:00:00.123456+02:00", "2024-01-01T08:00:00.123456Z"),
            ("2024-01-01T01:30:00+05:30", "2023-12-31T20:00:00.000000Z"),
            ("2023-12-31T23:00:00-23:59", "2024-01-01T22:59:00.000000Z"),
            ("2024-02-29T12:00:00.123456789Z", "2024-02-29T12:00:00.123456Z"),
            ("2024-01-01T00:00:00.9999999Z", "2024-01-01T00:00:00.999999Z"),
            ("0000-01-01T00:00:00Z", "0000-01-01T00:00:00.000000Z"),
            ("9999-12-31T23:59:59.999999999Z", "9999-12-31T23:59:59.999999Z"),
        ];
        for (given, want) in cases {
            assert_eq!(normalize(given).as_deref(), Ok(want), "{given}");
            assert_eq!(normalize(want).as_deref(), Ok(want), "the canonical form is a fixed point");
        }
    }

    #[test]
    fn invalid_stamps_are_refused_with_the_reason() {
        let cases = [
            ("2024-01-01T10:00:00+25:99", "offset hour"),
            ("2024-01-01T10:00:00+23:60", "offset minute"),
            ("2024-01-01T10:00:00+0100", "a `-` or `:` is missing"),
            ("2024-01-01T10:00:60Z", "second"),
            ("2016-12-31T23:59:60Z", "leap seconds"),
            ("2024-01-01T10:00:00.1234567890Z", "at most 9 digits"),
            ("2024-01-01T10:00:00.123456789012345678Z", "at most 9 digits"),
            ("2024-01-01T10:00:00.Z", "fraction of a second"),
            ("2023-02-29T10:00:00Z", "day"),
            ("2024-04-31T10:00:00Z", "day"),
            ("2024-13-01T10:00:00Z", "month"),
            ("2024-01-01T24:00:00Z", "hour"),
            ("2024-01-01T10:00:00", "offset hour"),
            ("2024-01-01X10:00:00Z", "separated by `T`"),
            ("2024-01-01T10:00:00Z ", "follows the offset"),
            ("0000-01-01T00:30:00+01:00", "outside the years 0000-9999"),
            ("9999-12-31T23:30:00-01:00", "outside the years 0000-9999"),
            ("yesterday", "year"),
            ("", "year"),
        ];
        for (given, why) in cases {
            let e = normalize(given).expect_err(given);
            assert!(e.starts_with(&format!("must be an RFC 3339 time stamp ({SHAPE}), got {}: ", quote(given))), "{e}");
            assert!(e.contains(why), "{given}: {e}");
        }
    }
}
