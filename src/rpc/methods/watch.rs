//! `session/subscribe` and `session/unsubscribe` (the notifications: `rpc::watch`).

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result, quote};
use crate::ops::Call;
use crate::rpc::methods::Ctx;
use crate::session::SessionId;

#[derive(Deserialize)]
pub struct SubscribeParams {
    #[serde(default)]
    session_id: Option<SessionId>,
}

#[derive(Serialize, Clone)]
pub struct Subscribed {
    subscription_id: String,
}

/// A session that does not exist yet may be watched: this is the one method where an
/// unknown `session_id` is not 1001.
pub async fn subscribe(ctx: Arc<Ctx>, p: SubscribeParams, _: Arc<Call>) -> Result<Subscribed> {
    let session_id = p.session_id.map(SessionId::into_string);
    let subscription_id = ctx.subscriptions.add(ctx.ops.watch().await?, session_id, ctx.peer.clone());
    Ok(Subscribed { subscription_id })
}

#[derive(Deserialize)]
pub struct UnsubscribeParams {
    subscription_id: String,
}

pub async fn unsubscribe(ctx: Arc<Ctx>, p: UnsubscribeParams, _: Arc<Call>) -> Result<()> {
    if !ctx.subscriptions.remove(&p.subscription_id) {
        return Err(Error::invalid(format!("subscription_id: no such subscription: {}", quote(&p.subscription_id))));
    }
    Ok(())
}
