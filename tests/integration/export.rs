//! Provider exports against golden files (tests/golden/export/<scenario>.json, one
//! payload and warning list per format; `UPDATE_GOLDEN=1` rewrites them), every export
//! passing convo's own validator, and token counts.

use std::sync::Arc;

use convo::rpc::LocalServer;
use convo::session::export::{self, Export, Format};
use convo::store::MemoryStore;
use serde_json::{Value, json};

const FORMATS: [&str; 4] = ["openai_chat", "openai_responses", "anthropic_messages", "gemini_contents"];
const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";
const JPEG: &str = "/9j/4AAQSkZJRgABAQAAAQABAAD/2wBDAA==";

fn server() -> LocalServer {
    LocalServer::new(Arc::new(MemoryStore::default()), 1 << 24).unwrap()
}

fn format(name: &str) -> Format {
    serde_json::from_value(json!(name)).unwrap()
}

/// Exports every format, checks each passes the validator, and compares with the golden.
fn golden(scenario: &str, s: &mut LocalServer) {
    let mut got = serde_json::Map::new();
    for name in FORMATS {
        let exported = s.call("session/export", json!({"session_id": "g", "format": name})).unwrap();
        let check = Export { payload: exported["payload"].clone(), warnings: Vec::new(), sources: Vec::new() };
        let violations = export::validate(format(name), &check);
        assert!(violations.is_empty(), "{scenario} {name}: {violations:?}");
        got.insert(name.into(), exported);
    }
    let got = Value::Object(got);
    let path = format!("{}/tests/golden/export/{scenario}.json", env!("CARGO_MANIFEST_DIR"));
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        // Members sorted, as the files have always been (order does not count here).
        let sorted: std::collections::BTreeMap<String, Value> = serde_json::from_value(sort(got.clone())).unwrap();
        std::fs::write(&path, serde_json::to_string_pretty(&sorted).unwrap() + "\n").unwrap();
    }
    let want: Value = serde_json::from_str(
        &std::fs::read_to_string(&path).unwrap_or_else(|_| panic!("{path} (UPDATE_GOLDEN=1 writes it)")),
    )
    .unwrap();
    assert_eq!(got, want, "{scenario} differs from {path}");
}

/// `value` with every object's members in sorted order.
fn sort(value: Value) -> Value {
    match value {
        Value::Object(map) => {
            let sorted: std::collections::BTreeMap<String, Value> =
                map.into_iter().map(|(k, v)| (k, sort(v))).collect();
            Value::Object(sorted.into_iter().collect())
        }
        Value::Array(items) => Value::Array(items.into_iter().map(sort).collect()),
        other => other,
    }
}

fn setup(messages: Value) -> LocalServer {
    let mut s = server();
    s.call("session/create", json!({"session_id": "g", "system": "You are terse."})).unwrap();
    s.call("session/add_messages", json!({"session_id": "g", "messages": messages})).unwrap();
    s
}

fn calls(ids: &[&str]) -> Value {
    ids.iter().map(|id| json!({"id": id, "type": "function", "function": {"name": format!("tool_{id}"), "arguments": "{\"x\":1}"}})).collect()
}

#[test]
fn parallel_calls_answered_out_of_order() {
    let mut s = setup(json!([
        {"role": "user", "content": "Check three files."},
        {"role": "assistant", "content": "Checking.", "tool_calls": calls(&["a", "b", "c"])},
        {"role": "tool", "tool_call_id": "c", "content": "C"},
        {"role": "tool", "tool_call_id": "a", "content": "A"},
        {"role": "tool", "tool_call_id": "b", "content": "B"},
        {"role": "assistant", "content": "All fine."},
    ]));
    golden("parallel_calls_out_of_order", &mut s);
}

#[test]
fn a_cancelled_call() {
    let mut s = setup(json!([
        {"role": "user", "content": "Run both."},
        {"role": "assistant", "tool_calls": [{"id": "x", "name": "build", "input": {}}, {"id": "y", "name": "test", "arguments": {"all": true}}]},
        {"role": "tool", "tool_call_id": "y", "content": "ok"},
        {"role": "user", "content": "Stop, never mind."},
    ]));
    golden("cancelled_call", &mut s);
}

#[test]
fn images() {
    let mut s = setup(
        json!([{"role": "user", "content": "What is in these?", "images": [PNG, JPEG]}, {"role": "assistant", "content": "Two pixels."}]),
    );
    golden("images", &mut s);
}

#[test]
fn content_parts() {
    let mut s = setup(json!([
        {"role": "user", "content": [
            {"type": "text", "text": "Describe this."},
            {"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{PNG}")}},
            {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}}
        ]},
        {"role": "assistant", "content": [{"type": "text", "text": "A dot."}]},
    ]));
    golden("content_parts", &mut s);
}

#[test]
fn an_assistant_turn_with_only_tool_calls() {
    let mut s = setup(json!([
        {"role": "user", "content": "List files."},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "l", "name": "ls", "arguments": "{\"path\":\".\"}"}]},
        {"role": "tool", "tool_call_id": "l", "content": "{\"files\":[\"a.txt\"]}"},
    ]));
    golden("tool_calls_only", &mut s);
}

#[test]
fn a_conversation_that_starts_with_the_assistant() {
    let mut s =
        setup(json!([{"role": "assistant", "content": "Hello! How can I help?"}, {"role": "user", "content": "Hi."}]));
    golden("starts_with_assistant", &mut s);
}

/// Imported rather than appended: an empty assistant message is refused by the add_*
/// methods, but an imported history may hold one, and export leaves it out.
fn imported(messages: Value) -> LocalServer {
    let mut s = server();
    let data = json!({"session_id": "g", "system": "You are terse.", "messages": messages});
    s.call("session/from_dict", json!({"data": data})).unwrap();
    s
}

#[test]
fn consecutive_user_messages() {
    let mut s = imported(json!([
        {"role": "user", "content": "First thought."},
        {"role": "user", "content": "Second thought."},
        {"role": "system", "content": "Answer in French."},
        {"role": "assistant", "content": ""},
        {"role": "assistant", "content": "D'accord."},
    ]));
    golden("consecutive_users", &mut s);
}

/// Export with repair closes a dangling trailing call for every provider, and validate
/// reports it on the stored history.
#[test]
fn validate_reports_what_export_repairs() {
    let mut s = setup(json!([{"role": "user", "content": "go"}, {"role": "assistant", "tool_calls": calls(&["d"])}]));
    for name in FORMATS {
        let v = s.call("session/validate", json!({"session_id": "g", "format": name})).unwrap();
        let violations = v["violations"].as_array().unwrap();
        assert_eq!(violations.len(), 1, "{name}: {v}");
        assert_eq!(violations[0]["index"], 1, "{name}: at the call");
        golden_free_check(&mut s, name);
    }
}

fn golden_free_check(s: &mut LocalServer, name: &str) {
    let exported = s.call("session/export", json!({"session_id": "g", "format": name})).unwrap();
    let check = Export { payload: exported["payload"].clone(), warnings: Vec::new(), sources: Vec::new() };
    assert!(export::validate(format(name), &check).is_empty(), "{name}");
}

#[test]
fn token_counts_and_trim_to_fit() {
    let mut s = server();
    s.call("session/create", json!({"session_id": "t", "system": "hello world"})).unwrap();
    // As OpenAI counts chat: role "system" (1) + "hello world" (2) + 3 per message, + 3 for the reply.
    assert_eq!(s.call("session/count_tokens", json!({"session_id": "t"})).unwrap()["tokens"], 9);
    for turn in 0..10 {
        s.call("session/add_user", json!({"session_id": "t", "text": "hello world"})).unwrap();
        s.call("session/add_assistant", json!({"session_id": "t", "text": format!("answer {turn}")})).unwrap();
    }
    let total = s.call("session/count_tokens", json!({"session_id": "t"})).unwrap()["tokens"].as_u64().unwrap();
    let trimmed = s.call("session/trim", json!({"session_id": "t", "max_tokens": 40})).unwrap();
    assert_eq!(trimmed["fits"], true, "{trimmed}");
    let tokens = trimmed["tokens"].as_u64().unwrap();
    assert!(tokens <= 40 && tokens < total);
    assert_eq!(
        s.call("session/count_tokens", json!({"session_id": "t"})).unwrap()["tokens"],
        tokens,
        "the count after is what trim said"
    );
    let h = s.call("session/history", json!({"session_id": "t"})).unwrap();
    assert_eq!(h["messages"][0]["role"], "user", "whole turns were dropped");
    // A budget no single turn fits: the last turn stays, and it says so.
    let tiny = s.call("session/trim", json!({"session_id": "t", "max_tokens": 1})).unwrap();
    assert_eq!(
        (tiny["fits"].clone(), s.call("session/get", json!({"session_id": "t"})).unwrap()["message_count"].clone()),
        (json!(false), json!(2))
    );
    let again = s.call("session/trim", json!({"session_id": "t", "max_tokens": 1})).unwrap();
    assert_eq!(again["removed"], 0, "nothing more to drop: {again}");
    assert_eq!(again["revision"], tiny["revision"], "no change, no revision");
}

/// `from_dict` with a `format` is the inverse of export: each golden body, imported and
/// exported again, is the same body (its warnings aside).
#[test]
fn every_golden_body_survives_import_and_export() {
    let dir = format!("{}/tests/golden/export", env!("CARGO_MANIFEST_DIR"));
    let mut scenarios: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    scenarios.sort();
    assert!(scenarios.len() >= 7, "the golden scenarios are in {dir}");
    for path in scenarios {
        let golden: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        for name in FORMATS {
            let body = &golden[name]["payload"];
            let mut s = server();
            let params = json!({"session_id": "back", "format": name, "data": body});
            s.call("session/from_dict", params).unwrap_or_else(|e| panic!("{path:?} {name}: {e}"));
            let again = s.call("session/export", json!({"session_id": "back", "format": name})).unwrap();
            assert_eq!(&again["payload"], body, "{path:?} {name}: export of the import");
        }
    }
}
