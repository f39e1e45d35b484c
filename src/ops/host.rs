//! The host as the operations see it: something that runs the model when asked.

use std::time::Duration;

use async_trait::async_trait;
use serde::Serialize;
use serde_json::{Map, Value};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::session::Message;

/// The params of `runtime/run` and `runtime/stream`.
#[derive(Debug, Clone, Serialize)]
pub struct RuntimeParams {
    pub session_id: String,
    pub purpose: &'static str,
    pub system: Option<String>,
    pub messages: Vec<Message>,
    pub temperature: Option<Value>,
    pub max_tokens: Option<Value>,
    pub tools: Option<Value>,
    pub metadata: Option<Map<String, Value>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payload: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_format: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stream_id: Option<String>,
    /// `session/compact` in parts: `{index, count}`, and `merge: true` on the request
    /// that merges the parts' summaries.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub part: Option<Value>,
}

/// What ended a wait for the host, when it did not answer with a result.
#[derive(Debug)]
pub enum Failure {
    /// The host answered with an error object.
    Error(Value),
    Timeout,
    /// The connection ended (or was ending) while convo waited.
    Disconnected,
    /// The client cancelled the request that asked.
    Cancelled,
    /// The request could not be made.
    Invalid(String),
}

#[async_trait]
pub trait Host: Send + Sync {
    /// Asks the host for one answer (`runtime/run`); its result, unchecked.
    async fn run(
        &self,
        params: &RuntimeParams,
        timeout: Duration,
        cancel: &CancellationToken,
    ) -> Result<Value, Failure>;

    /// Asks the host to stream an answer (`runtime/stream`): each `runtime/delta` it sends
    /// meanwhile goes to `deltas`; returns its final answer, unchecked.
    async fn stream(
        &self,
        params: &RuntimeParams,
        timeout: Duration,
        cancel: &CancellationToken,
        deltas: mpsc::Sender<Value>,
    ) -> Result<Value, Failure>;
}
