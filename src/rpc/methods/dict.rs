//! `session/to_dict` and `session/from_dict`: a whole session as one JSON value, in our
//! own format or the generic agent library's, or (`format`) a provider's request body.

use std::sync::Arc;

use jsonrpsee_types::ErrorObjectOwned;
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

use crate::error::Result;
use crate::ops::{Call, DictData, DictSource, Imported, SessionDict, refs_in_messages};
use crate::rpc::methods::shown::Shown;
use crate::rpc::methods::{Ctx, is_empty_array, param_errors};
use crate::rpc::outgoing::{Pieces, Splice};
use crate::session::export::Format;
use crate::session::image::Images;
use crate::session::{SessionId, empty_table};

#[derive(Deserialize)]
pub struct ToDictParams {
    session_id: SessionId,
    #[serde(default)]
    images: Images,
}

pub async fn to_dict(ctx: Arc<Ctx>, p: ToDictParams, _: Arc<Call>) -> Result<Shown<SessionDict>> {
    let dict = ctx.ops.to_dict(p.session_id.as_str()).await?;
    Shown::with_images(dict, p.images, |v| refs_in_messages(&mut v["messages"]))
}

/// As `SessionDict` serializes, with the messages' texts shared, not copied.
impl Splice for SessionDict {
    fn splice(self, into: &mut Pieces) -> std::result::Result<(), ErrorObjectOwned> {
        into.raw(r#"{"session_id":"#);
        into.json(&self.session_id)?;
        into.raw(r#","system":"#);
        into.json(&self.system)?;
        into.raw(r#","cwd":"#);
        into.json(&self.cwd)?;
        into.raw(r#","messages":"#);
        into.messages(self.messages)?;
        into.raw("}");
        Ok(())
    }
}

#[derive(Deserialize)]
pub struct FromDictParams {
    /// Read once `format` is known: our own dict, or a provider's request body.
    data: Box<RawValue>,
    #[serde(default)]
    format: Option<Format>,
    /// With `format` only: the id the imported session gets.
    #[serde(default)]
    session_id: Option<SessionId>,
    #[serde(default)]
    replace: bool,
    #[serde(default)]
    repair: bool,
    #[serde(default)]
    expected_revision: Option<u64>,
}

/// Our own dict, read as a typed member is: an object, or `[]` as `{}`.
#[derive(Deserialize)]
struct OwnDict(#[serde(deserialize_with = "empty_table::object")] DictData);

pub async fn from_dict(ctx: Arc<Ctx>, p: FromDictParams, _: Arc<Call>) -> Result<Imported> {
    // A Lua host writes an empty table as `[]`: read as `{}`.
    let raw = if is_empty_array(p.data.get()) { "{}" } else { p.data.get() };
    let source = match p.format {
        None => DictSource::Own(own_dict(raw)),
        Some(format) => {
            let body: Value = serde_json::from_str(raw).map_err(|e| param_errors::describe(raw, "data", e))?;
            DictSource::Body { format, body }
        }
    };
    let session_id = p.session_id.map(SessionId::into_string);
    ctx.ops.from_dict(source, session_id, p.replace, p.repair, p.expected_revision).await
}

/// Our own dict, each error naming the member at fault (`data.messages[2].role: …`).
fn own_dict(raw: &str) -> Result<DictData> {
    let parsed = serde_path_to_error::deserialize::<_, OwnDict>(&mut serde_json::Deserializer::from_str(raw));
    parsed.map(|own| own.0).map_err(|e| {
        let path = match e.path().to_string() {
            root if root == "." => "data".to_owned(),
            path => format!("data.{path}"),
        };
        param_errors::describe(raw, &path, e.into_inner())
    })
}
