//! `session/run`, `session/json` and `session/stream`: a turn run through the host
//! (`ops::runtime`), which convo asks over this same connection.

use std::sync::Arc;

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::error::Result;
use crate::ops::limits::{JSON_RETRIES, host_timeout};
use crate::ops::{Call, JsonResult, RunResult, Turn};
use crate::rpc::methods::Ctx;
use crate::session::{SessionId, empty_table};

#[derive(Deserialize)]
pub struct RunParams {
    session_id: SessionId,
    input: String,
    #[serde(default)]
    images: Option<Vec<String>>,
    #[serde(default)]
    temperature: Option<Value>,
    #[serde(default)]
    max_tokens: Option<Value>,
    #[serde(default)]
    tools: Option<Value>,
    #[serde(default, deserialize_with = "empty_table::optional_object")]
    metadata: Option<Map<String, Value>>,
    #[serde(default)]
    timeout_ms: Option<u64>,
    #[serde(default)]
    expected_revision: Option<u64>,
}

impl RunParams {
    fn turn(self, ctx: &Ctx) -> Turn {
        Turn {
            session_id: self.session_id.into_string(),
            input: self.input,
            images: self.images,
            temperature: self.temperature,
            max_tokens: self.max_tokens,
            tools: self.tools,
            metadata: self.metadata,
            timeout: host_timeout(self.timeout_ms),
            expected_revision: self.expected_revision,
            format: ctx.runtime_format(),
        }
    }
}

pub async fn run(ctx: Arc<Ctx>, p: RunParams, call: Arc<Call>) -> Result<RunResult> {
    ctx.ops.run(p.turn(&ctx), &call).await
}

pub async fn stream(ctx: Arc<Ctx>, p: RunParams, call: Arc<Call>) -> Result<RunResult> {
    ctx.ops.stream(p.turn(&ctx), &call).await
}

/// `session/run`'s params plus `schema` and `retries`. (Spelled out: serde's `flatten`
/// cannot read numbers kept exactly.)
#[derive(Deserialize)]
pub struct JsonParams {
    session_id: SessionId,
    input: String,
    #[serde(default)]
    images: Option<Vec<String>>,
    #[serde(default)]
    temperature: Option<Value>,
    #[serde(default)]
    max_tokens: Option<Value>,
    #[serde(default)]
    tools: Option<Value>,
    #[serde(default, deserialize_with = "empty_table::optional_object")]
    metadata: Option<Map<String, Value>>,
    #[serde(default)]
    timeout_ms: Option<u64>,
    #[serde(default)]
    expected_revision: Option<u64>,
    #[serde(deserialize_with = "empty_table::object")]
    schema: Map<String, Value>,
    #[serde(default)]
    retries: Option<u32>,
}

pub async fn json(ctx: Arc<Ctx>, p: JsonParams, call: Arc<Call>) -> Result<JsonResult> {
    let run = RunParams {
        session_id: p.session_id,
        input: p.input,
        images: p.images,
        temperature: p.temperature,
        max_tokens: p.max_tokens,
        tools: p.tools,
        metadata: p.metadata,
        timeout_ms: p.timeout_ms,
        expected_revision: p.expected_revision,
    };
    ctx.ops.json(run.turn(&ctx), Value::Object(p.schema), p.retries.unwrap_or(JSON_RETRIES), &call).await
}
