//! Images by reference (protocol section 9): an image's `ref` is `sha256:` and the
//! lowercase hex digest of its decoded bytes, so the same picture has the same ref in
//! every session and every store; its `media_type` is read from its first bytes.

use base64::Engine;
use serde::Serialize;
use sha2::{Digest, Sha256};

/// What `images: "ref"` shows in place of an image's base64.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ImageRef {
    #[serde(rename = "ref")]
    pub reference: String,
    pub media_type: &'static str,
    pub bytes: u64,
}

/// How replies carry images: as given (base64), or by reference.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Images {
    #[default]
    Inline,
    Ref,
}

/// An image as a client gives it: base64, or `{"ref": …}` naming an image the store holds
/// (other members of the object, as `images: "ref"` shows them, are ignored). `ops`
/// resolves refs before the message is checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImageInput {
    Base64(String),
    Ref(String),
}

impl<'de> serde::Deserialize<'de> for ImageInput {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = ImageInput;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a base64 string or an object {\"ref\": \"sha256:…\"}")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<ImageInput, E> {
                Ok(ImageInput::Base64(v.to_owned()))
            }
            fn visit_string<E: serde::de::Error>(self, v: String) -> Result<ImageInput, E> {
                Ok(ImageInput::Base64(v))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<ImageInput, A::Error> {
                let mut found = None;
                while let Some(key) = map.next_key::<String>()? {
                    if key == "ref" {
                        found = Some(map.next_value::<String>()?);
                    } else {
                        map.next_value::<serde::de::IgnoredAny>()?;
                    }
                }
                found.map(ImageInput::Ref).ok_or_else(|| serde::de::Error::missing_field("ref"))
            }
        }
        d.deserialize_any(Visit)
    }
}

/// Reads base64 with or without padding, as `add_*` accepts it.
pub const BASE64: base64::engine::GeneralPurpose = base64::engine::GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    base64::engine::GeneralPurposeConfig::new()
        .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
);

/// The bytes of an image given as base64 (already checked; text that does not decode is
/// taken as its own bytes).
pub fn decode(base64: &str) -> Vec<u8> {
    BASE64.decode(base64).unwrap_or_else(|_| base64.as_bytes().to_vec())
}

/// The ref, media type and size of an image given as base64 (already checked; text that
/// does not decode is described as its own bytes).
pub fn describe(base64: &str) -> ImageRef {
    let bytes = decode(base64);
    ImageRef { reference: reference(&bytes), media_type: media_type(&bytes), bytes: bytes.len() as u64 }
}

fn reference(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut out = String::with_capacity(7 + 64);
    out.push_str("sha256:");
    for b in digest {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

/// The media type its first bytes name, `application/octet-stream` when none.
pub fn media_type(bytes: &[u8]) -> &'static str {
    match bytes {
        [0x89, b'P', b'N', b'G', ..] => "image/png",
        [0xff, 0xd8, 0xff, ..] => "image/jpeg",
        [b'G', b'I', b'F', b'8', ..] => "image/gif",
        [b'R', b'I', b'F', b'F', _, _, _, _, b'W', b'E', b'B', b'P', ..] => "image/webp",
        [b'B', b'M', ..] => "image/bmp",
        _ => "application/octet-stream",
    }
}

/// Whether `text` is a well-formed ref: `sha256:` and 64 lowercase hex digits.
pub fn is_ref(text: &str) -> bool {
    text.strip_prefix("sha256:")
        .is_some_and(|hex| hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ref_is_the_digest_of_the_decoded_bytes() {
        let png = BASE64.encode(b"\x89PNG\r\n\x1a\nrest");
        let described = describe(&png);
        assert_eq!(described.reference, reference(b"\x89PNG\r\n\x1a\nrest"));
        assert_eq!((described.media_type, described.bytes), ("image/png", 12));
        assert!(is_ref(&described.reference));
        assert_eq!(describe(png.trim_end_matches('=')), described, "padding does not matter");
        assert!(!is_ref("sha256:ABC"));
        assert!(!is_ref(&described.reference.to_uppercase()));
        assert_eq!(
            reference(b""),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
            "the empty input's well-known digest"
        );
    }
}
