//! A whole session as one value: `to_dict`, and the import that `from_dict` makes of
//! our own format, the generic agent library's, or a provider's request body.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::ops::Ops;
use crate::ops::limits::{MAX_MESSAGES, check_count};
use crate::session::export::Format;
use crate::session::{
    Fields, Identity, Import, MessageInput, Repaired, SessionId, SessionInfo, empty_table, import, plan_import,
};
use crate::store::MessageJson;

#[derive(Debug, Clone, Serialize)]
pub struct SessionDict {
    pub session_id: String,
    pub system: Option<String>,
    pub cwd: Option<String>,
    /// As JSON text, as `History`'s.
    pub messages: Vec<MessageJson>,
}

/// A session to import, as given: read from `to_dict`'s output, the generic agent
/// library's `to_dict` (`system` may be spelled `system_prompt`), and anything in
/// between (`session/from_dict`'s `data`, `convo import`'s files).
#[derive(Deserialize)]
#[serde(from = "DictInput")]
pub struct DictData {
    pub session_id: Option<String>,
    pub fields: Fields,
    pub messages: Vec<MessageInput>,
}

/// `DictData` as written; unknown members are ignored.
#[derive(Deserialize)]
struct DictInput {
    #[serde(default)]
    session_id: Option<SessionId>,
    #[serde(default)]
    system: Option<String>,
    #[serde(default)]
    system_prompt: Option<String>,
    #[serde(default)]
    cwd: Option<String>,
    #[serde(default)]
    title: Option<String>,
    #[serde(default, deserialize_with = "empty_table::optional_object")]
    metadata: Option<Map<String, Value>>,
    #[serde(default, deserialize_with = "empty_table::optional_objects")]
    messages: Option<Vec<MessageInput>>,
}

/// What `from_dict` imports: our own dict (or the generic agent library's) as it parsed,
/// or a provider's request body.
pub enum DictSource {
    Own(Result<DictData>),
    Body { format: Format, body: Value },
}

impl DictData {
    /// A provider's request body (`from_dict` with `format`), read by `session::import`.
    fn from_body(format: Format, body: &Value, session_id: Option<String>) -> Result<DictData> {
        let body = import::import(format, body)?;
        let messages = body
            .messages
            .into_iter()
            .enumerate()
            .map(|(i, m)| {
                MessageInput::deserialize(m).map_err(|e| Error::invalid(format!("data: message {i} as read: {e}")))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(DictData { session_id, fields: Fields { system: body.system, ..Fields::default() }, messages })
    }
}

impl From<DictInput> for DictData {
    fn from(d: DictInput) -> Self {
        DictData {
            session_id: d.session_id.map(SessionId::into_string),
            fields: Fields { system: d.system.or(d.system_prompt), cwd: d.cwd, title: d.title, metadata: d.metadata },
            messages: d.messages.unwrap_or_default(),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Imported {
    #[serde(flatten)]
    pub info: SessionInfo,
    pub repaired: Repaired,
}

impl Ops {
    pub async fn to_dict(&self, session_id: &str) -> Result<SessionDict> {
        let page = self.store.history_json(session_id, 0, Some(MAX_MESSAGES + 1)).await?;
        check_count("the session", page.messages.len()).map_err(|_| {
            Error::TooLarge(format!(
                "the session holds more than {MAX_MESSAGES} messages; read it with session/history pages"
            ))
        })?;
        let info = page.info;
        Ok(SessionDict { session_id: info.session_id, system: info.system, cwd: info.cwd, messages: page.messages })
    }

    /// Reads the session from `source` (a provider's body gets `session_id`, which our
    /// own dict carries inside), checks every message and the rules of section 3
    /// (repairing with `repair`), then stores the session whole.
    pub async fn from_dict(
        &self,
        source: DictSource,
        session_id: Option<String>,
        replace: bool,
        repair: bool,
        expected_revision: Option<u64>,
    ) -> Result<Imported> {
        let data = match (source, session_id) {
            (DictSource::Own(_), Some(_)) => {
                return Err(Error::invalid("session_id: give it inside `data` (or with a `format`)"));
            }
            (DictSource::Own(data), None) => data?,
            (DictSource::Body { format, body }, session_id) => DictData::from_body(format, &body, session_id)?,
        };
        check_count("data.messages", data.messages.len())?;
        let mut inputs = data.messages;
        for (i, input) in inputs.iter_mut().enumerate() {
            self.resolve_images(input).await.map_err(|e| e.within(&format!("data.messages[{i}]")))?;
        }
        // Calls given no id (Gemini's) are numbered after the ids of the messages before.
        let mut taken = HashSet::new();
        let mut messages = Vec::with_capacity(inputs.len());
        for (i, mut input) in inputs.into_iter().enumerate() {
            input.taken_call_ids = taken.clone();
            let message = input.into_message(Identity::Given).map_err(|e| e.within(&format!("data.messages[{i}]")))?;
            taken.extend(message.call_ids().map(str::to_owned));
            messages.push(message);
        }
        let (messages, repaired) = plan_import(messages, repair)?;
        let import = Import { session_id: data.session_id, fields: data.fields, messages };
        let info = self.store.import(import, replace, expected_revision).await?;
        self.pieces.forget(&info.session_id);
        Ok(Imported { info, repaired })
    }
}
