//! Turns run through the host: `session/run`, `session/json`, `session/stream`. Each
//! reads the session in its order, lets the session go (the host may take minutes),
//! asks the host, and appends the user message and the answer in one step checked
//! against the revision it read: all of it, or nothing. A stream's answer so far is kept
//! as a draft, which becomes messages when the stream ends early; a draft whose process
//! died is kept by whichever process on the store sees it stale first.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;

use crate::error::{Error, Result, RuntimeReason};
use crate::ops::{Call, Failure, Ops, RuntimeParams};
use crate::session::export::{self, Format};
use crate::session::image::ImageInput;
use crate::session::native;
use crate::session::{
    Draft, DraftEnd, Identity, Message, MessageInput, Role, STALE_AFTER_MS, check_revision, now_ms, owner,
};
use crate::store::Appended;

/// A draft is saved at least this often while deltas arrive…
const SAVE_EVERY: Duration = Duration::from_millis(250);
/// …or once this much text arrived since the last save…
const SAVE_BYTES: usize = 4096;
/// …and refreshed this often while the host is silent, so no process takes it for crashed.
const REFRESH_EVERY: Duration = Duration::from_millis(1000);

/// One turn to run: the new user message and how to ask the host.
pub struct Turn {
    pub session_id: String,
    pub input: String,
    pub images: Option<Vec<String>>,
    pub temperature: Option<Value>,
    pub max_tokens: Option<Value>,
    pub tools: Option<Value>,
    pub metadata: Option<Map<String, Value>>,
    pub timeout: Duration,
    pub expected_revision: Option<u64>,
    /// `initialize`'s `runtime.format`: runtime requests then carry the provider body.
    pub format: Option<Format>,
}

/// The result of `session/run` and `session/stream`.
#[derive(Debug, Clone, Serialize)]
pub struct RunResult {
    pub text: Option<String>,
    pub tool_calls: Option<Vec<Value>>,
    pub usage: Option<Value>,
    pub message_ids: Vec<String>,
    pub revision: u64,
}

/// The result of `session/json`.
#[derive(Debug, Clone, Serialize)]
pub struct JsonResult {
    pub value: Value,
    pub text: String,
    pub usage: Option<Value>,
    pub message_ids: Vec<String>,
    pub revision: u64,
}

/// The host's answer, checked: the assistant message to store, and what the result
/// repeats of it.
pub(super) struct Answer {
    message: Message,
    pub(super) text: Option<String>,
    tool_calls: Option<Vec<Value>>,
    usage: Option<Value>,
}

impl Answer {
    /// Splits the answer into the message to store and the result of the turn, whose
    /// ids and revision the store fills in.
    fn split(self) -> (Message, impl FnOnce(Appended) -> RunResult) {
        let Answer { message, text, tool_calls, usage } = self;
        (message, move |done: Appended| RunResult {
            text,
            tool_calls,
            usage,
            message_ids: done.message_ids,
            revision: done.revision,
        })
    }
}

pub(super) fn invalid_response(detail: impl Into<String>) -> Error {
    Error::RuntimeFailed { reason: RuntimeReason::InvalidResponse, error: None, detail: detail.into() }
}

/// Checks the host's answer `{text?, tool_calls?, usage?, model?, stop_reason?}`, or a
/// provider's whole response as `{format, response}` (stored in its native form, its
/// id-less calls numbered after the ids `taken` in the session); with `text_only`,
/// tool calls are dropped (and an empty text is the caller's to judge).
pub(super) fn check_answer(answer: &Value, text_only: bool, taken: &HashSet<String>) -> Result<Answer> {
    if let Some(format) = answer.get("format").filter(|_| answer.get("response").is_some()) {
        return native_answer(format, &answer["response"], text_only, taken);
    }
    // A Lua host writes an empty table as `[]`, here and in `usage`: read as `{}`.
    let empty = Map::new();
    let fields = match answer {
        Value::Object(fields) => fields,
        Value::Array(items) if items.is_empty() => &empty,
        _ => {
            return Err(invalid_response("the answer must be an object {text, tool_calls, usage, model, stop_reason}"));
        }
    };
    let get = |name: &str| fields.get(name).filter(|v| !v.is_null());
    let text = match get("text") {
        None => None,
        Some(Value::String(text)) => Some(text.clone()),
        Some(_) => return Err(invalid_response("text: must be a string or null")),
    };
    let tool_calls = match get("tool_calls") {
        None => None,
        Some(Value::Array(calls)) if text_only || calls.is_empty() => None,
        Some(Value::Array(calls)) => Some(calls.clone()),
        Some(_) => return Err(invalid_response("tool_calls: must be an array of tool calls or null")),
    };
    let mut metadata = Map::new();
    for (name, expected) in [("usage", "an object"), ("model", "a string"), ("stop_reason", "a string")] {
        if let Some(value) = get(name) {
            let value = match value {
                Value::Array(items) if name == "usage" && items.is_empty() => Value::Object(Map::new()),
                value => value.clone(),
            };
            let fits = if name == "usage" { value.is_object() } else { value.is_string() };
            if !fits {
                return Err(invalid_response(format!("{name}: must be {expected}")));
            }
            metadata.insert(name.into(), value);
        }
    }
    let usage = metadata.get("usage").cloned();
    let input = MessageInput {
        tool_calls: tool_calls.clone(),
        metadata: (!metadata.is_empty()).then_some(metadata),
        ..MessageInput::new(Role::Assistant, text.clone().map_or(Value::Null, Value::String))
    };
    let message = match input.into_message(Identity::Fresh) {
        Ok(message) => message,
        Err(Error::InvalidParams(why)) if !text_only => return Err(invalid_response(why)),
        Err(Error::InvalidParams(_)) => Message::new(Role::Assistant, Value::String(String::new())),
        Err(e) => return Err(e),
    };
    // The calls as stored: mended by `session::empty_table`.
    let tool_calls = tool_calls.and(message.tool_calls.clone());
    Ok(Answer { message, text, tool_calls, usage })
}

/// A provider's whole response as the host's answer (`{format, response}`).
fn native_answer(format: &Value, response: &Value, text_only: bool, taken: &HashSet<String>) -> Result<Answer> {
    let format: Format = serde_json::from_value(format.clone())
        .map_err(|_| invalid_response(format!("format: must be one of the export formats, got {format}")))?;
    let read = native::from_response(format, response).map_err(|e| invalid_response(e.to_string()))?;
    let mut metadata = Map::new();
    metadata.insert("response_id".into(), json!(read.response_id));
    metadata.insert("stop_reason".into(), json!(read.stop_reason));
    let usage = serde_json::to_value(read.usage).map_err(|e| Error::Internal(e.to_string()))?;
    let native = serde_json::to_value(&read.native).map_err(|e| Error::Internal(e.to_string()))?;
    let input = MessageInput {
        native: Some(Box::new(native)),
        usage: Some(Box::new(usage.clone())),
        metadata: Some(metadata),
        taken_call_ids: taken.clone(),
        ..MessageInput::new(Role::Assistant, Value::Null)
    };
    let mut message = input.into_message(Identity::Fresh).map_err(|e| invalid_response(e.to_string()))?;
    let text = match &message.content {
        Value::Null => None,
        content => Some(export::text_of(content)),
    };
    let tool_calls = if text_only { None } else { message.tool_calls.clone() };
    if text_only && message.tool_calls.is_some() {
        // Only the text is kept: its body, whose calls the history would not answer, is not.
        (message.native, message.tool_calls) = (None, None);
    }
    Ok(Answer { message, text, tool_calls, usage: Some(usage) })
}

/// The call ids a history holds.
fn call_ids(messages: &[Message]) -> HashSet<String> {
    messages.iter().flat_map(|m| m.call_ids().map(str::to_owned)).collect()
}

/// What ended a wait for the host, as the error the client gets.
pub(super) fn failed(failure: Failure) -> Error {
    let (reason, error, detail) = match failure {
        Failure::Error(error) if error.get("code").and_then(Value::as_i64) == Some(-32601) => {
            (RuntimeReason::NoRuntime, Some(error), "the host has no runtime: it answered method not found".into())
        }
        Failure::Error(error) => (RuntimeReason::Error, Some(error), "the host answered with an error".into()),
        Failure::Timeout => (RuntimeReason::Timeout, None, "the host did not answer within timeout_ms".into()),
        Failure::Disconnected => {
            (RuntimeReason::Disconnected, None, "the input ended while convo waited for the host".into())
        }
        Failure::Cancelled => return Error::Cancelled { message_ids: Vec::new() },
        Failure::Invalid(why) => return Error::Internal(why),
    };
    Error::RuntimeFailed { reason, error, detail }
}

impl Ops {
    /// Reads the session (in its order), checks `expected_revision`, and builds the
    /// runtime request: the repaired history followed by the new user message.
    async fn prepare(&self, turn: &Turn, purpose: &'static str) -> Result<(RuntimeParams, Message, u64)> {
        let (page, mut messages) = self.whole(&turn.session_id, true).await?;
        check_revision(turn.expected_revision, page.info.revision)?;
        let user = MessageInput {
            images: turn.images.clone().map(|images| images.into_iter().map(ImageInput::Base64).collect()),
            metadata: turn.metadata.clone(),
            ..MessageInput::new(Role::User, Value::String(turn.input.clone()))
        }
        .into_message(Identity::Fresh)?;
        messages.push(user.clone());
        let system = page.info.system;
        let params = RuntimeParams {
            session_id: turn.session_id.clone(),
            purpose,
            payload: payload(turn.format, system.as_deref(), &messages),
            system,
            messages,
            temperature: turn.temperature.clone(),
            max_tokens: turn.max_tokens.clone(),
            tools: turn.tools.clone(),
            metadata: turn.metadata.clone(),
            response_format: None,
            stream_id: None,
            part: None,
        };
        Ok((params, user, page.info.revision))
    }

    /// Appends the user message and the answer at the revision read, or nothing (1003
    /// with the host's answer in `data.response`).
    async fn commit(
        &self,
        session_id: &str,
        user: Message,
        answer: Message,
        revision: u64,
        response: &Value,
        stream_id: Option<&str>,
    ) -> Result<Appended> {
        let messages = vec![user, answer];
        let appended = match stream_id {
            Some(stream_id) => self.store.append_finishing(session_id, messages, Some(revision), stream_id).await,
            None => self.store.append(session_id, messages, Some(revision), false).await,
        };
        appended.map_err(|e| match e {
            Error::RevisionConflict { expected, current } => {
                Error::StaleAnswer { expected, current, response: response.clone() }
            }
            other => other,
        })
    }

    pub async fn run(&self, turn: Turn, call: &Call) -> Result<RunResult> {
        let (params, user, revision) = self.prepare(&turn, "run").await?;
        call.release();
        let response = self.host.run(&params, turn.timeout, call.cancel()).await.map_err(failed)?;
        let answer = check_answer(&response, false, &call_ids(&params.messages))?;
        let (message, result) = answer.split();
        let done = self.commit(&turn.session_id, user, message, revision, &response, None).await?;
        Ok(result(done))
    }

    /// Asks until the answer's text is JSON valid against `schema`, at most `retries`
    /// times more; each retry sends the first ask's messages, the rejected answer and a
    /// user message naming each error (sent, not stored).
    pub async fn json(&self, turn: Turn, schema: Value, retries: u32, call: &Call) -> Result<JsonResult> {
        let validator = jsonschema::draft202012::new(&schema).map_err(|e| Error::invalid(format!("schema: {e}")))?;
        let (mut params, user, revision) = self.prepare(&turn, "json").await?;
        params.response_format = Some(json!({"type": "json_schema", "schema": schema}));
        call.release();
        let first = params.messages.clone();
        for attempt in 0.. {
            let response = self.host.run(&params, turn.timeout, call.cancel()).await.map_err(failed)?;
            let answer = check_answer(&response, true, &call_ids(&first))?;
            let text = answer.text.clone().unwrap_or_default();
            let errors: Vec<(String, String)> = match serde_json::from_str::<Value>(&text) {
                Ok(value) => {
                    let errors: Vec<_> =
                        validator.iter_errors(&value).map(|e| (e.instance_path().to_string(), e.to_string())).collect();
                    if errors.is_empty() {
                        let message = Message::new(Role::Assistant, Value::String(text.clone()));
                        let (metadata, native, usage) =
                            (answer.message.metadata, answer.message.native, answer.message.usage);
                        // A native answer keeps its own common form (its text parts, as they came).
                        let content = if native.is_some() { answer.message.content } else { message.content };
                        let message = Message { metadata, native, usage, content, ..message };
                        let done = self.commit(&turn.session_id, user, message, revision, &response, None).await?;
                        let (message_ids, revision) = (done.message_ids, done.revision);
                        return Ok(JsonResult { value, text, usage: answer.usage, message_ids, revision });
                    }
                    errors
                }
                Err(e) => vec![(String::new(), format!("the answer is not JSON: {e}"))],
            };
            if attempt >= retries {
                return Err(Error::InvalidOutput { errors, text });
            }
            params.messages = first.clone();
            params.messages.push(Message::new(Role::Assistant, Value::String(text)));
            params.messages.push(Message::new(Role::User, Value::String(retry_note(&errors))));
            params.payload = payload(turn.format, params.system.as_deref(), &params.messages);
        }
        unreachable!("the loop returns")
    }

    /// As `run`, streamed: deltas grow a draft (saved every 250 ms or 4 KiB); the final
    /// answer is what is stored. Ended early, the draft is kept as messages.
    pub async fn stream(&self, turn: Turn, call: &Call) -> Result<RunResult> {
        let (mut params, user, revision) = self.prepare(&turn, "run").await?;
        let stream_id = crate::mint::id();
        params.stream_id = Some(stream_id.clone());
        let mut draft = Draft {
            stream_id: stream_id.clone(),
            session_id: turn.session_id.clone(),
            owner: owner().to_owned(),
            refreshed_at: now_ms(),
            user: user.clone(),
            text: String::new(),
        };
        self.store.save_draft(draft.clone()).await?;
        call.release();

        let (tx, mut deltas) = mpsc::channel(64);
        let asked = self.host.stream(&params, turn.timeout, call.cancel(), tx);
        tokio::pin!(asked);
        let mut ticks = tokio::time::interval(SAVE_EVERY);
        let (mut unsaved, mut saved_at) = (0usize, Instant::now());
        let outcome = loop {
            tokio::select! {
                outcome = &mut asked => break outcome,
                Some(delta) = deltas.recv() => {
                    if let Some(text) = delta.get("text").and_then(Value::as_str) {
                        draft.text.push_str(text);
                        unsaved += text.len().max(1);
                    }
                    if unsaved >= SAVE_BYTES {
                        self.save(&mut draft).await;
                        (unsaved, saved_at) = (0, Instant::now());
                    }
                }
                _ = ticks.tick() => {
                    if unsaved > 0 || saved_at.elapsed() >= REFRESH_EVERY {
                        self.save(&mut draft).await;
                        (unsaved, saved_at) = (0, Instant::now());
                    }
                }
            }
        };
        // The last deltas are saved before the final answer is taken.
        while let Ok(delta) = deltas.try_recv() {
            if let Some(text) = delta.get("text").and_then(Value::as_str) {
                draft.text.push_str(text);
                unsaved += text.len().max(1);
            }
        }
        if unsaved > 0 {
            self.save(&mut draft).await;
        }
        let response = match outcome {
            Ok(response) => response,
            Err(Failure::Error(error)) if error.get("code").and_then(Value::as_i64) == Some(-32601) => {
                self.store.drop_draft(&stream_id).await?;
                return Err(failed(Failure::Error(error)));
            }
            Err(Failure::Cancelled) => {
                let kept = self.store.settle_draft(&stream_id, DraftEnd::Cancelled).await?;
                return Err(Error::Cancelled { message_ids: kept.map(|k| k.message_ids).unwrap_or_default() });
            }
            Err(failure) => {
                let end = if matches!(failure, Failure::Disconnected) { DraftEnd::Cancelled } else { DraftEnd::Error };
                self.store.settle_draft(&stream_id, end).await?;
                return Err(failed(failure));
            }
        };
        let answer = match check_answer(&response, false, &call_ids(&params.messages)) {
            Ok(answer) => answer,
            Err(e) => {
                self.store.settle_draft(&stream_id, DraftEnd::Error).await?;
                return Err(e);
            }
        };
        let (message, result) = answer.split();
        let done = self.commit(&turn.session_id, user, message, revision, &response, Some(&stream_id)).await;
        let done = match done {
            Ok(done) => done,
            Err(e) => {
                // Refused (the session changed, or is gone): the answer is in the error.
                self.store.drop_draft(&stream_id).await?;
                return Err(e);
            }
        };
        Ok(result(done))
    }

    /// Saves (and refreshes) a draft; a failure to save is logged, not fatal: the
    /// stream's final answer does not depend on it.
    async fn save(&self, draft: &mut Draft) {
        draft.refreshed_at = now_ms();
        if let Err(e) = self.store.save_draft(draft.clone()).await {
            tracing::warn!(error = %e, stream_id = draft.stream_id, "cannot save a stream's draft");
        }
    }
}

/// The provider body of `messages`, when the host asked for one.
fn payload(format: Option<Format>, system: Option<&str>, messages: &[Message]) -> Option<Value> {
    format.map(|format| export::export(format, system, messages, true).payload)
}

fn retry_note(errors: &[(String, String)]) -> String {
    let mut note = String::from("Your answer does not match the JSON schema:\n");
    for (path, message) in errors {
        let at = if path.is_empty() { "(the whole answer)" } else { path };
        note.push_str(&format!("- {at}: {message}\n"));
    }
    note.push_str("Answer again with JSON that matches the schema, and nothing else.");
    note
}

impl Ops {
    /// Keeps, as messages marked `reason: "crashed"`, every draft whose owner stopped
    /// refreshing it; returns how many it kept. Run now and then by every process.
    pub async fn sweep_crashed_drafts(&self) -> Result<usize> {
        // A store opened for reading only keeps its drafts as they are.
        if self.store.read_only().is_some() {
            return Ok(0);
        }
        let mut kept = 0;
        for stream_id in self.store.stale_drafts(now_ms() - STALE_AFTER_MS).await? {
            if self.store.settle_draft(&stream_id, DraftEnd::Crashed).await?.is_some() {
                kept += 1;
            }
        }
        Ok(kept)
    }
}
