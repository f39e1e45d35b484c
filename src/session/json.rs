//! JSON text the server writes by hand where serde_json's walk would cost more than the
//! text: the short messages the memory store keeps, and the reply to every append.

/// `s` as a JSON string: between quotes as it is when nothing in it needs an escape, else
/// as serde_json escapes it.
pub fn push_string(text: &mut String, s: &str) {
    if needs_escape(s.as_bytes()) {
        // Writing a `str` to a `String` cannot fail.
        text.push_str(&serde_json::to_string(s).unwrap_or_default());
    } else {
        text.push('"');
        text.push_str(s);
        text.push('"');
    }
}

/// Whether any byte is one a JSON string escapes: a control character, `"` or `\`.
/// Eight bytes at a time: each test on a word is non-zero exactly when one of its bytes
/// matches (the bit tricks of "Bit Twiddling Hacks", `haszero` and `hasless`).
pub fn needs_escape(bytes: &[u8]) -> bool {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGHS: u64 = u64::from_ne_bytes([0x80; 8]);
    let zero_byte = |w: u64| w.wrapping_sub(ONES) & !w & HIGHS;
    let below_space = |w: u64| w.wrapping_sub(ONES * 0x20) & !w & HIGHS;
    let mut words = bytes.chunks_exact(8);
    let hit = words.by_ref().any(|word| {
        let w = u64::from_ne_bytes(word.try_into().unwrap_or_default());
        below_space(w) | zero_byte(w ^ (ONES * u64::from(b'"'))) | zero_byte(w ^ (ONES * u64::from(b'\\'))) != 0
    });
    hit || words.remainder().iter().any(|&b| b < 0x20 || b == b'"' || b == b'\\')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_byte_that_needs_an_escape_is_found_wherever_it_is() {
        for byte in 0..=u8::MAX {
            let escaped = byte < 0x20 || byte == b'"' || byte == b'\\';
            for len in 1..=19 {
                for at in 0..len {
                    let mut bytes = vec![b'a'; len];
                    bytes[at] = byte;
                    assert_eq!(needs_escape(&bytes), escaped, "{byte:#x} at {at} of {len}");
                }
            }
        }
        assert!(!needs_escape(b"") && !needs_escape("é ✓ 😀 \u{7f}\u{80}\u{ff}".as_bytes()));
    }

    #[test]
    fn strings_are_written_as_serde_json_writes_them() {
        for s in ["", "plain", "tab\there", "a \"quote\"", "back\\slash", "\u{1}\u{7f}", "é ✓ 😀 </script>"] {
            let mut text = String::new();
            push_string(&mut text, s);
            assert_eq!(text, serde_json::to_string(s).unwrap());
        }
    }
}
