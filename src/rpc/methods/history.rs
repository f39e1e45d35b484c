//! History management (protocol section 9): rewind.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::ops::Call;
use crate::rpc::methods::Ctx;
use crate::session::SessionId;

#[derive(Deserialize)]
pub struct RewindParams {
    session_id: SessionId,
    to_message_id: String,
    #[serde(default)]
    archive: bool,
    #[serde(default)]
    expected_revision: Option<u64>,
}

#[derive(Serialize, Clone)]
pub struct Rewound {
    removed: u64,
    revision: u64,
    archived_session_id: Option<String>,
}

pub async fn rewind(ctx: Arc<Ctx>, p: RewindParams, _: Arc<Call>) -> Result<Rewound> {
    let done = ctx.ops.store.rewind(p.session_id.as_str(), &p.to_message_id, p.archive, p.expected_revision).await?;
    Ok(Rewound { removed: done.removed, revision: done.revision, archived_session_id: done.archived_session_id })
}
