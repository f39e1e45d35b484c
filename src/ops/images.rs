//! Images by reference: refs a client gives in place of base64 are resolved to the images
//! the store holds, and replies asked for with `images: "ref"` show each image as its
//! `{ref, media_type, bytes}` (`session::image`).

use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::error::{Error, Result, quote};
use crate::ops::Ops;
use crate::session::MessageInput;
use crate::session::image::{ImageInput, describe, is_ref, media_type};

/// The result of `session/image`.
#[derive(Debug, Clone, Serialize)]
pub struct ImageData {
    pub data: String,
    pub media_type: &'static str,
}

impl Ops {
    /// Replaces each ref among the message's images by the image; an unknown ref is
    /// -32602.
    pub async fn resolve_images(&self, input: &mut MessageInput) -> Result<()> {
        let Some(images) = input.images.as_mut() else { return Ok(()) };
        for (i, image) in images.iter_mut().enumerate() {
            if let ImageInput::Ref(reference) = image {
                *image = ImageInput::Base64(
                    self.known_image(reference).await.map_err(|e| e.within(&format!("images[{i}]")))?,
                );
            }
        }
        Ok(())
    }

    /// `session/image`: the image a ref names.
    pub async fn image(&self, reference: &str) -> Result<ImageData> {
        let data = self.known_image(reference).await.map_err(|e| e.within("ref"))?;
        let media_type = media_type(&crate::session::image::decode(&data));
        Ok(ImageData { data, media_type })
    }

    async fn known_image(&self, reference: &str) -> Result<String> {
        let found = if is_ref(reference) { self.store.image(reference).await? } else { None };
        found.ok_or_else(|| Error::invalid(format!("unknown image ref {}", quote(reference))))
    }
}

/// Each image of each message (`messages` as serialized) shown by reference.
pub fn refs_in_messages(messages: &mut Value) {
    for message in messages.as_array_mut().into_iter().flatten() {
        for image in message.get_mut("images").and_then(Value::as_array_mut).into_iter().flatten() {
            if let Some(data) = image.as_str() {
                *image = json!(describe(data));
            }
        }
    }
}

/// Each image of an exported body shown as `{ref}` where the body holds its base64: an
/// OpenAI data URL, an Anthropic `source.data`, a Gemini `inline_data.data`.
pub fn refs_in_payload(value: &mut Value) {
    match value {
        Value::Array(items) => items.iter_mut().for_each(refs_in_payload),
        Value::Object(object) => {
            replace_base64(object);
            object.values_mut().for_each(refs_in_payload);
        }
        _ => {}
    }
}

fn replace_base64(object: &mut Map<String, Value>) {
    let as_ref = |data: &str| json!({"ref": describe(data).reference});
    // Chat's `image_url.url`, the Responses API's `image_url`.
    for key in ["url", "image_url"] {
        if let Some(Value::String(url)) = object.get(key)
            && let Some((_, data)) = url.strip_prefix("data:").and_then(|u| u.split_once(";base64,"))
        {
            let replaced = as_ref(data);
            object.insert(key.into(), replaced);
        }
    }
    let typed = object.contains_key("media_type") || object.contains_key("mime_type");
    if typed && let Some(Value::String(data)) = object.get("data") {
        let replaced = as_ref(data);
        object.insert("data".into(), replaced);
    }
}
