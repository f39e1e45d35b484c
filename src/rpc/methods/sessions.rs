//! Methods on whole sessions: create, get, list, update, delete, delete_many, fork, clear.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::Result;
use crate::ops::{Call, DeletedMany, SessionPage};
use crate::rpc::methods::{Ctx, RevisionParams, SessionParams, present};
use crate::session::{Fields, Patch, SessionId, SessionInfo, empty_table};

#[derive(Deserialize)]
pub struct CreateParams {
    #[serde(default)]
    session_id: Option<SessionId>,
    #[serde(default)]
    system: Option<String>,
    #[serde(default)]
    cwd: Option<String>,
    #[serde(default)]
    title: Option<String>,
    #[serde(default, deserialize_with = "empty_table::optional_object")]
    metadata: Option<Map<String, Value>>,
}

pub async fn create(ctx: Arc<Ctx>, p: CreateParams, _: Arc<Call>) -> Result<SessionInfo> {
    let fields = Fields { system: p.system, cwd: p.cwd, title: p.title, metadata: p.metadata };
    ctx.ops.create(p.session_id.map(SessionId::into_string), fields).await
}

pub async fn get(ctx: Arc<Ctx>, p: SessionParams, _: Arc<Call>) -> Result<SessionInfo> {
    ctx.ops.get(p.session_id.as_str()).await
}

#[derive(Deserialize)]
pub struct ListParams {
    #[serde(default)]
    limit: Option<u64>,
    #[serde(default)]
    cursor: Option<String>,
    #[serde(default)]
    updated_before: Option<String>,
}

pub async fn list(ctx: Arc<Ctx>, p: ListParams, _: Arc<Call>) -> Result<SessionPage> {
    ctx.ops.list(p.limit, p.cursor.as_deref(), p.updated_before.as_deref()).await
}

#[derive(Deserialize)]
pub struct UpdateParams {
    session_id: SessionId,
    #[serde(default, deserialize_with = "present")]
    system: Option<Option<String>>,
    #[serde(default, deserialize_with = "present")]
    cwd: Option<Option<String>>,
    #[serde(default, deserialize_with = "present")]
    title: Option<Option<String>>,
    #[serde(default, deserialize_with = "empty_table::present_object")]
    metadata: Option<Option<Map<String, Value>>>,
    #[serde(default)]
    expected_revision: Option<u64>,
}

pub async fn update(ctx: Arc<Ctx>, p: UpdateParams, _: Arc<Call>) -> Result<SessionInfo> {
    let patch = Patch { system: p.system, cwd: p.cwd, title: p.title, metadata: p.metadata };
    ctx.ops.update(p.session_id.as_str(), patch, p.expected_revision).await
}

#[derive(Serialize, Clone)]
pub struct Deleted {
    deleted: bool,
}

pub async fn delete(ctx: Arc<Ctx>, p: RevisionParams, _: Arc<Call>) -> Result<Deleted> {
    ctx.ops.delete(p.session_id.as_str(), p.expected_revision).await?;
    Ok(Deleted { deleted: true })
}

#[derive(Deserialize)]
pub struct DeleteManyParams {
    #[serde(default)]
    session_ids: Option<Vec<SessionId>>,
    #[serde(default)]
    updated_before: Option<String>,
}

pub async fn delete_many(ctx: Arc<Ctx>, p: DeleteManyParams, _: Arc<Call>) -> Result<DeletedMany> {
    let ids = p.session_ids.map(|ids| ids.into_iter().map(SessionId::into_string).collect());
    ctx.ops.delete_many(ids, p.updated_before.as_deref()).await
}

#[derive(Deserialize)]
pub struct ForkParams {
    session_id: SessionId,
    #[serde(default)]
    new_session_id: Option<SessionId>,
    #[serde(default)]
    at_message_id: Option<String>,
}

pub async fn fork(ctx: Arc<Ctx>, p: ForkParams, _: Arc<Call>) -> Result<SessionInfo> {
    let new_id = p.new_session_id.map(SessionId::into_string);
    ctx.ops.fork(p.session_id.as_str(), new_id, p.at_message_id).await
}

#[derive(Serialize, Clone)]
pub struct Cleared {
    removed: u64,
    revision: u64,
}

pub async fn clear(ctx: Arc<Ctx>, p: RevisionParams, _: Arc<Call>) -> Result<Cleared> {
    let done = ctx.ops.clear(p.session_id.as_str(), p.expected_revision).await?;
    Ok(Cleared { removed: done.removed, revision: done.revision })
}
