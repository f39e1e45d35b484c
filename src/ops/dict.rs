//! A whole session as one value: `to_dict`, and the import that `from_dict` makes of
//! our own format or the generic agent library's.

use std::sync::Arc;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::ops::{MAX_MESSAGES, Ops, check_count};
use crate::session::{Fields, Identity, Import, Message, MessageInput, Repaired, SessionInfo, plan_import};

#[derive(Debug, Clone, Serialize)]
pub struct SessionDict {
    pub session_id: String,
    pub system: Option<String>,
    pub cwd: Option<String>,
    pub messages: Vec<Arc<Message>>,
}

/// A session to import, as given.
pub struct DictData {
    pub session_id: Option<String>,
    pub fields: Fields,
    pub messages: Vec<MessageInput>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Imported {
    #[serde(flatten)]
    pub info: SessionInfo,
    pub repaired: Repaired,
}

impl Ops {
    pub async fn to_dict(&self, session_id: &str) -> Result<SessionDict> {
        let page = self.store.history(session_id, 0, Some(MAX_MESSAGES + 1)).await?;
        check_count("the session", page.messages.len()).map_err(|_| {
            Error::TooLarge(format!(
                "the session holds more than {MAX_MESSAGES} messages; read it with session/history pages"
            ))
        })?;
        let info = page.info;
        Ok(SessionDict { session_id: info.session_id, system: info.system, cwd: info.cwd, messages: page.messages })
    }

    /// Checks every message and the rules of section 3 (repairing with `repair`), then
    /// stores the session whole.
    pub async fn from_dict(
        &self,
        data: DictData,
        replace: bool,
        repair: bool,
        expected_revision: Option<u64>,
    ) -> Result<Imported> {
        check_count("data.messages", data.messages.len())?;
        let mut inputs = data.messages;
        for (i, input) in inputs.iter_mut().enumerate() {
            self.resolve_images(input).await.map_err(|e| e.within(&format!("data.messages[{i}]")))?;
        }
        let messages = inputs
            .into_iter()
            .enumerate()
            .map(|(i, m)| m.into_message(Identity::Keep).map_err(|e| e.within(&format!("data.messages[{i}]"))))
            .collect::<Result<Vec<_>>>()?;
        let (messages, repaired) = plan_import(messages, repair)?;
        let import = Import { session_id: data.session_id, fields: data.fields, messages };
        let info = self.store.import(import, replace, expected_revision).await?;
        Ok(Imported { info, repaired })
    }
}
