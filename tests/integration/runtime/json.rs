//! `session/json`: the answer must parse and validate against the schema; retries carry
//! the validation errors to the host; what never validates is 1009 and stores nothing.

use crate::harness::{Server, Value, json};

use super::{ask, plus, revision, said, session_with_history, state, stored};

fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {"city": {"type": "string"}, "population": {"type": "integer"}},
        "required": ["city", "population"],
        "additionalProperties": false,
    })
}

const GOOD: &str = r#"{"city": "Oslo", "population": 709037}"#;
/// Breaks the schema at `population` only.
const WRONG_TYPE: &str = r#"{"city": "Oslo", "population": "about 700k"}"#;

/// Issue 10: `runtime/run` carries `purpose: "json"` and the schema as `response_format`;
/// a valid answer returns the parsed value, and the user message plus the answer's text
/// are stored (its tool calls dropped).
fn json_validates_the_answer_and_stores_its_text(s: &mut Server) {
    s.call("session/create", json!({"session_id": "j", "system": "Answer in JSON."}));
    let (id, host) = ask(
        s,
        "session/json",
        json!({"session_id": "j", "input": "Largest city of Norway?", "schema": schema(), "temperature": 0}),
    );
    let p = &host["params"];
    assert_eq!(
        (&p["purpose"], &p["system"], &p["temperature"]),
        (&json!("json"), &json!("Answer in JSON."), &json!(0))
    );
    assert_eq!(p["response_format"], json!({"type": "json_schema", "schema": schema()}));
    assert_eq!(said(p["messages"].as_array().unwrap()), [json!(["user", "Largest city of Norway?"])]);

    let usage = json!({"output_tokens": 9});
    let calls = json!([{"id": "call_1", "name": "lookup", "arguments": {}}]);
    s.answer(&host["id"], json!({"text": GOOD, "tool_calls": calls, "usage": usage}));
    let result = s.result_of(id, "session/json");

    let after = stored(s, "j");
    assert_eq!(said(&after), [json!(["user", "Largest city of Norway?"]), json!(["assistant", GOOD])]);
    assert_eq!(after[1]["tool_calls"], Value::Null, "tool calls are dropped");
    assert_eq!(
        result,
        json!({"value": {"city": "Oslo", "population": 709037}, "text": GOOD, "usage": usage,
               "message_ids": [after[0]["id"], after[1]["id"]], "revision": 1})
    );
}

/// Issue 10: a rejected answer is asked again (a new request) with the first ask's
/// messages, the rejected answer as an assistant message and a user message naming the
/// error; only the user message and the accepted answer are stored.
fn json_retries_with_the_errors_and_stores_only_the_accepted_answer(s: &mut Server) {
    let before = session_with_history(s, "r");
    let (id, first) =
        ask(s, "session/json", json!({"session_id": "r", "input": "Largest city?", "schema": schema(), "retries": 1}));
    let asked = first["params"]["messages"].as_array().unwrap().clone();
    assert_eq!(said(&asked), plus(&before, json!([["user", "Largest city?"]])));
    s.answer(&first["id"], json!({"text": WRONG_TYPE}));

    let retry = s.host_request(id, "runtime/run");
    assert_eq!((&first["id"], &retry["id"]), (&json!("convo:1"), &json!("convo:2")), "a retry is a new request");
    let p = &retry["params"];
    assert_eq!(p["purpose"], "json");
    assert_eq!(p["response_format"], json!({"type": "json_schema", "schema": schema()}));
    let sent = p["messages"].as_array().unwrap();
    let n = asked.len();
    assert_eq!(sent.len(), n + 2, "{sent:?}");
    assert_eq!(said(&sent[..n]), said(&asked), "the first ask's messages come first");
    assert_eq!(said(&sent[n..n + 1]), [json!(["assistant", WRONG_TYPE])]);
    assert_eq!(sent[n + 1]["role"], "user");
    let correction = sent[n + 1]["content"].as_str().unwrap();
    assert!(correction.contains("population"), "the correction names the failing property: {correction:?}");

    s.answer(&retry["id"], json!({"text": GOOD}));
    let result = s.result_of(id, "session/json");
    assert_eq!(result["value"], json!({"city": "Oslo", "population": 709037}));
    let after = stored(s, "r");
    assert_eq!(said(&after), plus(&before, json!([["user", "Largest city?"], ["assistant", GOOD]])));
    assert_eq!(result["message_ids"], json!([after[2]["id"], after[3]["id"]]));
    assert_eq!((&result["text"], &result["revision"]), (&json!(GOOD), &json!(3)));
    assert_eq!(revision(s, "r"), 3, "one request, one revision, however many asks");
}

/// Issue 10: without `retries` the host is asked once; an answer that is not JSON, or
/// breaks the schema after every retry, is 1009 with the errors and the last text, and
/// nothing is appended.
fn json_that_never_validates_is_invalid_output(s: &mut Server) {
    session_with_history(s, "v");
    let before = state(s, "v");
    let (id, host) = ask(s, "session/json", json!({"session_id": "v", "input": "City?", "schema": schema()}));
    s.answer(&host["id"], json!({"text": "Oslo, I think."}));
    let e = s.error_of(id, "session/json", 1009);
    assert_eq!((&e["data"]["kind"], &e["data"]["text"]), (&json!("invalid_output"), &json!("Oslo, I think.")));
    let errors = e["data"]["errors"].as_array().unwrap();
    assert!(!errors.is_empty(), "{e}");
    for error in errors {
        assert!(error["path"].is_string() && error["message"].as_str().is_some_and(|m| !m.is_empty()), "{e}");
    }
    s.assert_silent();
    assert_eq!(state(s, "v"), before, "nothing appended");

    let (id, host) =
        ask(s, "session/json", json!({"session_id": "v", "input": "City?", "schema": schema(), "retries": 2}));
    s.answer(&host["id"], json!({"text": "not json"}));
    for (n, text) in [(3, r#"{"city": "Oslo"}"#), (4, WRONG_TYPE)] {
        let retry = s.host_request(id, "runtime/run");
        assert_eq!(retry["id"], format!("convo:{n}"));
        s.answer(&retry["id"], json!({"text": text}));
    }
    let e = s.error_of(id, "session/json", 1009);
    assert_eq!(e["data"]["text"], WRONG_TYPE, "the last answer");
    let errors = e["data"]["errors"].as_array().unwrap();
    assert_eq!(errors.len(), 1, "{e}");
    assert!(errors[0]["path"].as_str().unwrap().contains("population"), "{e}");
    assert!(errors[0]["message"].as_str().is_some_and(|m| !m.is_empty()), "{e}");
    s.assert_silent();
    assert_eq!(state(s, "v"), before, "nothing appended");
}

crate::every_store!(
    json_validates_the_answer_and_stores_its_text,
    json_retries_with_the_errors_and_stores_only_the_accepted_answer,
    json_that_never_validates_is_invalid_output,
);
