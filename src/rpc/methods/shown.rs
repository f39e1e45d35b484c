//! A result as its use-case made it, or (with `images: "ref"`) rewritten to show each
//! image by reference (`ops::refs_in_messages`, `ops::refs_in_payload`).

use serde::Serialize;
use serde_json::Value;

use crate::error::{Error, Result};
use crate::rpc::outgoing::{MethodResult, Outcome, Splice, write};
use crate::session::image::Images;

pub enum Shown<T> {
    Made(T),
    Rewritten(Value),
}

impl<T: Serialize> Shown<T> {
    pub fn with_images(made: T, images: Images, rewrite: impl FnOnce(&mut Value)) -> Result<Self> {
        if images == Images::Inline {
            return Ok(Shown::Made(made));
        }
        let mut value = serde_json::to_value(made).map_err(|e| Error::Internal(e.to_string()))?;
        rewrite(&mut value);
        Ok(Shown::Rewritten(value))
    }
}

impl<T: Splice + Send + 'static> MethodResult for Shown<T> {
    fn write(self, max: usize) -> Outcome {
        write(max, |pieces| match self {
            Shown::Made(made) => made.splice(pieces),
            Shown::Rewritten(value) => pieces.json(&value),
        })
    }
}
