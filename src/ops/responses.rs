//! `session/add_response`: a provider's whole response appended as it came, as one
//! assistant message with the turn in its native form, its common form derived, its
//! usage normalised, and its id and stop reason in its metadata (spec section 13).

use std::collections::HashSet;

use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::error::{Error, Result};
use crate::ops::Ops;
use crate::session::export::Format;
use crate::session::native::{self, Response};
use crate::session::{MessageInput, Role};
use crate::store::Appended;

/// The result of `session/add_response`: what `add_assistant` gives, and the ids of the
/// calls the turn made, which its results answer.
#[derive(Debug, Clone, Serialize)]
pub struct AddedResponse {
    pub message_id: String,
    pub index: u64,
    pub revision: u64,
    pub tool_call_ids: Vec<String>,
    /// A retry of an append stored before (`message_id`): nothing changed.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub duplicate: bool,
}

impl Ops {
    pub async fn add_response(
        &self,
        session_id: &str,
        format: Format,
        response: &Value,
        metadata: Option<Map<String, Value>>,
        message_id: Option<String>,
        expected: Option<u64>,
    ) -> Result<AddedResponse> {
        let read = native::from_response(format, response)?;
        let mut input = self.response_message(session_id, read, metadata).await?;
        let once = message_id.is_some();
        input.message_id = message_id;
        let message = input.into_message(crate::session::Identity::Fresh)?;
        let mut tool_call_ids: Vec<String> = message.call_ids().map(str::to_owned).collect();
        let Appended { mut message_ids, index, revision, duplicate_of } =
            self.store.append(session_id, vec![message], expected, once).await?;
        // A retry's calls are the stored turn's: ids given to id-less calls may differ.
        if let Some(turn) = duplicate_of.as_ref().and_then(|stored| stored.last()) {
            tool_call_ids = turn.call_ids().map(str::to_owned).collect();
        }
        let message_id = message_ids.pop().ok_or_else(|| Error::Internal("append returned no id".into()))?;
        Ok(AddedResponse { message_id, index, revision, tool_call_ids, duplicate: duplicate_of.is_some() })
    }

    /// The assistant message a response makes, as a client would give it with `native`.
    async fn response_message(
        &self,
        session_id: &str,
        read: Response,
        metadata: Option<Map<String, Value>>,
    ) -> Result<MessageInput> {
        let mut metadata = metadata.unwrap_or_default();
        metadata.insert("response_id".into(), json!(read.response_id));
        metadata.insert("stop_reason".into(), json!(read.stop_reason));
        let native = serde_json::to_value(&read.native).map_err(|e| Error::Internal(e.to_string()))?;
        let usage = serde_json::to_value(read.usage).map_err(|e| Error::Internal(e.to_string()))?;
        let mut input = MessageInput {
            native: Some(Box::new(native)),
            usage: Some(Box::new(usage)),
            metadata: Some(metadata),
            ..MessageInput::new(Role::Assistant, Value::Null)
        };
        if numbers_calls(&input) {
            input.taken_call_ids = self.call_ids_of(session_id).await?;
        }
        Ok(input)
    }

    /// The call ids a session's history holds, which the calls of a native turn that
    /// come without ids are numbered after.
    pub(crate) async fn call_ids_of(&self, session_id: &str) -> Result<HashSet<String>> {
        let page = self.store.history(session_id, 0, None).await?;
        Ok(page.messages.iter().flat_map(|m| m.call_ids().map(str::to_owned)).collect())
    }
}

/// Whether a message given with a native turn may need its calls numbered (Gemini's
/// calls need not carry ids).
pub(crate) fn numbers_calls(input: &MessageInput) -> bool {
    let format = input.native.as_ref().and_then(|n| n.get("format")).and_then(Value::as_str);
    format == Some(Format::GeminiContents.name())
}
