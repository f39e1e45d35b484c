//! The host runtime (issue 10): `session/run`, `session/json` and `session/stream`. The
//! test client is the host too: it answers convo's `runtime/run` and `runtime/stream`
//! requests and sends `runtime/delta` over the same pipes, as a host would.

mod json;
mod run;
mod stream;

use crate::harness::{Server, Value, json};

/// A 1x1 PNG.
const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

/// Creates session `id` with a system prompt and one exchange (revision 2); returns its
/// stored messages.
fn session_with_history(s: &mut Server, id: &str) -> Vec<Value> {
    s.call("session/create", json!({"session_id": id, "system": "Be brief."}));
    s.call("session/add_user", json!({"session_id": id, "text": "hello"}));
    s.call("session/add_assistant", json!({"session_id": id, "text": "hi"}));
    stored(s, id)
}

/// The stored messages, without repair.
fn stored(s: &mut Server, id: &str) -> Vec<Value> {
    s.call("session/history", json!({"session_id": id, "repair": false}))["messages"].as_array().unwrap().clone()
}

fn revision(s: &mut Server, id: &str) -> u64 {
    s.call("session/get", json!({"session_id": id}))["revision"].as_u64().unwrap()
}

/// The stored messages and the revision, to show that nothing was appended.
fn state(s: &mut Server, id: &str) -> (Vec<Value>, u64) {
    (stored(s, id), revision(s, id))
}

/// Each message as `[role, content]`: what was said, not its id or time.
fn said(messages: &[Value]) -> Vec<Value> {
    messages.iter().map(|m| json!([m["role"], m["content"]])).collect()
}

/// What `before` said, then each `[role, content]` of `more`.
fn plus(before: &[Value], more: Value) -> Vec<Value> {
    [said(before), more.as_array().unwrap().clone()].concat()
}

/// Sends the client's request `method` and receives the request it makes convo send the
/// host (`runtime/stream` for `session/stream`, else `runtime/run`); returns the client
/// request's id and the host request.
fn ask(s: &mut Server, method: &str, params: Value) -> (u64, Value) {
    let id = s.send_request(method, params);
    let runtime = if method == "session/stream" { "runtime/stream" } else { "runtime/run" };
    (id, s.host_request(id, runtime))
}

/// A 1008 error with `data.reason` `reason`.
fn assert_runtime_failed(error: &Value, reason: &str) {
    assert_eq!(error["data"]["kind"], "runtime_failed", "{error}");
    assert_eq!(error["data"]["reason"], reason, "{error}");
}
