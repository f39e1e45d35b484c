//! `session/run`: the request convo sends the host, what a good answer stores, and every
//! way it fails without appending anything.

use crate::harness::{Framing, Server, Value, check_error, json};

use super::{PNG, ask, assert_runtime_failed, plus, revision, said, session_with_history, state, stored};

/// Issue 10: convo sends the host `runtime/run` with the history, the new user message and
/// the run's options as given; the host's answer and the user message are stored in one
/// step (+1 revision) and returned.
fn a_run_asks_the_host_and_stores_both_messages(s: &mut Server) {
    let before = session_with_history(s, "r");
    let tools = json!([{"type": "function", "function": {"name": "ls", "parameters": {"type": "object"}}}]);
    let (id, host) = ask(
        s,
        "session/run",
        json!({"session_id": "r", "input": "what now?", "images": [PNG], "temperature": 0.7, "max_tokens": 256,
               "tools": tools, "metadata": {"trace": "t-1"}}),
    );
    assert_eq!(host["id"], "convo:1", "the first server request of a process");
    let p = &host["params"];
    assert_eq!((&p["session_id"], &p["purpose"], &p["system"]), (&json!("r"), &json!("run"), &json!("Be brief.")));
    assert_eq!((&p["temperature"], &p["max_tokens"]), (&json!(0.7), &json!(256)));
    assert_eq!((&p["tools"], &p["metadata"]), (&tools, &json!({"trace": "t-1"})));
    assert!(p.get("payload").is_none(), "no payload unless initialize named a runtime format: {p}");
    let sent = p["messages"].as_array().unwrap();
    assert_eq!(said(sent), plus(&before, json!([["user", "what now?"]])));
    let new = sent.last().unwrap();
    assert_eq!((&new["images"], &new["metadata"]), (&json!([PNG]), &json!({"trace": "t-1"})));

    let usage = json!({"input_tokens": 12, "output_tokens": 3});
    s.answer(&host["id"], json!({"text": "Rest.", "usage": usage, "model": "m-1", "stop_reason": "end_turn"}));
    let result = s.result_of(id, "session/run");

    let after = stored(s, "r");
    assert_eq!(after.len(), 4);
    assert_eq!(after[..2], before[..], "the history before the run is untouched");
    let (user, assistant) = (&after[2], &after[3]);
    assert_eq!(
        result,
        json!({"text": "Rest.", "tool_calls": null, "usage": usage, "message_ids": [user["id"], assistant["id"]],
               "revision": 3})
    );
    assert_eq!((&user["role"], &user["content"]), (&json!("user"), &json!("what now?")));
    assert_eq!((&user["images"], &user["metadata"]), (&json!([PNG]), &json!({"trace": "t-1"})));
    assert_eq!((&assistant["role"], &assistant["content"]), (&json!("assistant"), &json!("Rest.")));
    assert_eq!(assistant["tool_calls"], Value::Null);
    assert_eq!(assistant["metadata"], json!({"usage": usage, "model": "m-1", "stop_reason": "end_turn"}));
    assert_eq!(revision(s, "r"), 3, "one run, one revision");
}

/// Issue 10: the host is sent the repaired view: a trailing unanswered call gets its
/// synthetic result, and appending the run's messages stores that result first ("moving
/// on cancels"), still in one revision.
fn a_run_after_an_unanswered_call_sends_the_repaired_view(s: &mut Server) {
    s.call("session/create", json!({"session_id": "p"}));
    s.call("session/add_user", json!({"session_id": "p", "text": "list the files"}));
    let call = json!([{"id": "c1", "name": "ls", "arguments": {}}]);
    s.call("session/add_assistant", json!({"session_id": "p", "text": null, "tool_calls": call}));
    let view = s.call("session/history", json!({"session_id": "p"}))["messages"].as_array().unwrap().clone();
    assert_eq!(view.len(), 3);

    let (id, host) = ask(s, "session/run", json!({"session_id": "p", "input": "never mind"}));
    let sent = host["params"]["messages"].as_array().unwrap();
    assert_eq!(said(sent), plus(&view, json!([["user", "never mind"]])));
    assert_eq!((&sent[2]["tool_call_id"], &sent[2]["metadata"]), (&json!("c1"), &json!({"synthetic": true})));
    s.answer(&host["id"], json!({"text": "OK."}));
    let result = s.result_of(id, "session/run");

    let after = stored(s, "p");
    assert_eq!(said(&after), plus(&view, json!([["user", "never mind"], ["assistant", "OK."]])));
    assert!(after[2]["id"].is_string(), "the synthetic result is stored now: {}", after[2]);
    assert_eq!(result["message_ids"], json!([after[3]["id"], after[4]["id"]]));
    assert_eq!((&result["usage"], &result["revision"]), (&Value::Null, &json!(3)));
}

/// Issue 10: an answer with tool calls and no text is stored as given and returned; the
/// calls are then pending, so their results are accepted.
fn tool_calls_from_the_host_are_stored_and_returned(s: &mut Server) {
    s.call("session/create", json!({"session_id": "t"}));
    let (id, host) = ask(s, "session/run", json!({"session_id": "t", "input": "look around"}));
    let calls = json!([
        {"id": "call_1", "type": "function", "function": {"name": "ls", "arguments": "{\"path\":\".\"}"}},
        {"id": "call_2", "name": "cat", "input": {"file": "a.txt"}},
    ]);
    s.answer(&host["id"], json!({"text": null, "tool_calls": calls}));
    let result = s.result_of(id, "session/run");

    let after = stored(s, "t");
    assert_eq!(after.len(), 2);
    assert_eq!(
        result,
        json!({"text": null, "tool_calls": calls, "usage": null, "message_ids": [after[0]["id"], after[1]["id"]],
               "revision": 1})
    );
    assert_eq!((&after[1]["role"], &after[1]["content"]), (&json!("assistant"), &Value::Null));
    assert_eq!(after[1]["tool_calls"], calls);
    s.call("session/add_tool_result", json!({"session_id": "t", "tool_call_id": "call_2", "content": "text"}));
    s.call("session/add_tool_result", json!({"session_id": "t", "tool_call_id": "call_1", "content": "a.txt"}));
}

/// Issue 10: `temperature` and `max_tokens` of 0 reach the host as 0 (the seed's `or`
/// fallback is a bug not to copy); options not given reach it as null.
fn zero_and_unset_options_reach_the_host_as_given(s: &mut Server) {
    s.call("session/create", json!({"session_id": "z"}));
    let (id, host) =
        ask(s, "session/run", json!({"session_id": "z", "input": "cold", "temperature": 0, "max_tokens": 0}));
    assert_eq!((&host["params"]["temperature"], &host["params"]["max_tokens"]), (&json!(0), &json!(0)));
    s.answer(&host["id"], json!({"text": "brr"}));
    s.result_of(id, "session/run");

    let (id, host) = ask(s, "session/run", json!({"session_id": "z", "input": "plain"}));
    assert_eq!(host["id"], "convo:2", "server request ids count up per process");
    for option in ["temperature", "max_tokens", "tools", "metadata"] {
        assert_eq!(host["params"].get(option), Some(&Value::Null), "{option} not given is null: {host}");
    }
    s.answer(&host["id"], json!({"text": "plain answer"}));
    s.result_of(id, "session/run");
    assert_eq!(stored(s, "z")[2]["metadata"], Value::Null, "no run metadata, none on the user message");
}

/// Issue 10: a host that answers an error gives 1008 `reason: "error"` with the host's
/// error object in `data.error`; nothing is appended.
fn a_host_error_is_runtime_failed_and_appends_nothing(s: &mut Server) {
    session_with_history(s, "e");
    let before = state(s, "e");
    let (id, host) = ask(s, "session/run", json!({"session_id": "e", "input": "hurry"}));
    let error = json!({"code": -32000, "message": "rate limited", "data": {"retry_after_ms": 1500}});
    s.answer_error(&host["id"], error.clone());
    let e = s.error_of(id, "session/run", 1008);
    assert_runtime_failed(&e, "error");
    assert_eq!(e["data"]["error"], error);
    assert_eq!(state(s, "e"), before, "nothing appended");
}

/// Issue 10: a host that does not know `runtime/run` (-32601) gives 1008
/// `reason: "no_runtime"`; nothing is appended.
fn a_host_without_a_runtime_is_no_runtime(s: &mut Server) {
    session_with_history(s, "n");
    let before = state(s, "n");
    let (id, host) = ask(s, "session/run", json!({"session_id": "n", "input": "anyone?"}));
    s.answer_error(&host["id"], json!({"code": -32601, "message": "method not found"}));
    assert_runtime_failed(&s.error_of(id, "session/run", 1008), "no_runtime");
    assert_eq!(state(s, "n"), before, "nothing appended");
}

/// Issue 10: no answer within `timeout_ms` gives 1008 `reason: "timeout"` and convo tells
/// the host to stop with `$/cancelRequest`; a late answer is ignored; nothing is appended.
fn a_host_that_takes_too_long_times_out_and_is_told_to_stop(s: &mut Server) {
    session_with_history(s, "slow");
    let before = state(s, "slow");
    let (id, host) = ask(s, "session/run", json!({"session_id": "slow", "input": "think hard", "timeout_ms": 300}));
    assert_runtime_failed(&s.error_of(id, "session/run", 1008), "timeout");
    assert_eq!(s.host_notification("$/cancelRequest"), json!({"id": host["id"]}));
    s.answer(&host["id"], json!({"text": "too late"}));
    s.assert_silent();
    assert_eq!(state(s, "slow"), before, "nothing appended");
}

/// Issue 10: every answer that is not a usable result gives 1008
/// `reason: "invalid_response"` with a `detail`; nothing is appended.
fn invalid_answers_are_invalid_response(s: &mut Server) {
    session_with_history(s, "i");
    let before = state(s, "i");
    let answers = [
        json!({}),
        json!({"text": ""}),
        json!({"text": null, "tool_calls": null}),
        json!({"usage": {"output_tokens": 0}, "model": "m"}),
        json!({"text": 42}),
        json!({"text": ["parts"]}),
        json!({"tool_calls": "call_1"}),
        json!({"tool_calls": {"id": "call_1"}}),
        json!({"tool_calls": ["call_1"]}),
        json!({"tool_calls": [{"name": "ls"}]}),
        json!({"tool_calls": [{"id": "", "name": "ls"}]}),
        json!({"tool_calls": [{"id": 7, "name": "ls"}]}),
        json!({"text": "fine", "tool_calls": [{"id": "ok"}, {"name": "no id"}]}),
        json!("just text"),
        json!(["text"]),
        Value::Null,
    ];
    for (n, answer) in answers.into_iter().enumerate() {
        let (id, host) = ask(s, "session/run", json!({"session_id": "i", "input": "say something"}));
        assert_eq!(host["id"], format!("convo:{}", n + 1));
        s.answer(&host["id"], answer.clone());
        let e = s.error_of(id, "session/run", 1008);
        assert_runtime_failed(&e, "invalid_response");
        assert!(e["data"]["detail"].as_str().is_some_and(|d| !d.is_empty()), "{answer} gave {e}");
    }
    assert_eq!(state(s, "i"), before, "nothing appended");
}

/// Issue 10: the session is not held while the host works: a write on it goes through at
/// once; the run then fails with 1003 and `data.response` keeps the host's answer, and
/// nothing of the run is appended.
fn a_write_during_the_run_is_a_conflict_that_keeps_the_answer(s: &mut Server) {
    let before = session_with_history(s, "c");
    let (id, host) = ask(s, "session/run", json!({"session_id": "c", "input": "slow question"}));
    let meanwhile = s.call("session/add_user", json!({"session_id": "c", "text": "meanwhile"}));
    assert_eq!(meanwhile["revision"], 3, "the write lands while the host works");

    let answer = json!({"text": "slow answer", "usage": {"output_tokens": 2}, "model": "m", "stop_reason": "stop"});
    s.answer(&host["id"], answer.clone());
    let e = s.error_of(id, "session/run", 1003);
    assert_eq!(e["data"]["kind"], "revision_conflict");
    assert_eq!(e["data"]["current_revision"], 3);
    assert_eq!(e["data"]["response"], answer, "the answer is not lost");
    assert_eq!(said(&stored(s, "c")), plus(&before, json!([["user", "meanwhile"]])));
    assert_eq!(revision(s, "c"), 3);
}

/// Issue 10: a stale `expected_revision` is 1003 and an unknown session 1001 at once,
/// without asking the host; the right revision runs.
fn a_run_that_cannot_succeed_fails_before_the_host_is_asked(s: &mut Server) {
    session_with_history(s, "x");
    let before = state(s, "x");
    let e = s.fail("session/run", json!({"session_id": "x", "input": "stale", "expected_revision": 1}), 1003);
    assert_eq!((&e["data"]["kind"], &e["data"]["current_revision"]), (&json!("revision_conflict"), &json!(2)));
    s.fail("session/run", json!({"session_id": "ghost", "input": "anyone?"}), 1001);
    s.assert_silent();
    assert_eq!(state(s, "x"), before, "nothing appended");

    let (id, host) = ask(s, "session/run", json!({"session_id": "x", "input": "current", "expected_revision": 2}));
    s.answer(&host["id"], json!({"text": "yes"}));
    assert_eq!(s.result_of(id, "session/run")["revision"], 3);
}

/// Issue 10: `$/cancelRequest` on a run waiting for the host ends it with -32800 and
/// convo tells the host to stop; a late answer is ignored; nothing is appended.
fn a_cancelled_run_appends_nothing_and_the_host_is_told(s: &mut Server) {
    session_with_history(s, "k");
    let before = state(s, "k");
    let (id, host) = ask(s, "session/run", json!({"session_id": "k", "input": "long job"}));
    s.notify("$/cancelRequest", json!({"id": id}));
    s.error_of(id, "session/run", -32800);
    assert_eq!(s.host_notification("$/cancelRequest"), json!({"id": host["id"]}));
    s.answer(&host["id"], json!({"text": "done anyway"}));
    s.assert_silent();
    assert_eq!(state(s, "k"), before, "nothing appended");
}

crate::every_store!(
    a_run_asks_the_host_and_stores_both_messages,
    a_run_after_an_unanswered_call_sends_the_repaired_view,
    tool_calls_from_the_host_are_stored_and_returned,
    zero_and_unset_options_reach_the_host_as_given,
    a_host_error_is_runtime_failed_and_appends_nothing,
    a_host_without_a_runtime_is_no_runtime,
    a_host_that_takes_too_long_times_out_and_is_told_to_stop,
    invalid_answers_are_invalid_response,
    a_write_during_the_run_is_a_conflict_that_keeps_the_answer,
    a_run_that_cannot_succeed_fails_before_the_host_is_asked,
    a_cancelled_run_appends_nothing_and_the_host_is_told,
);

/// Issue 10: the client's input ends while the host works: the run is answered with 1008
/// `reason: "disconnected"` before convo exits 0, and nothing was appended.
#[test]
fn end_of_input_while_the_host_works_is_disconnected() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sessions.db");
    let mut s = Server::on_file(&path, Framing::Lsp, &[]);
    session_with_history(&mut s, "d");
    let before = state(&mut s, "d");
    let (id, _host) = ask(&mut s, "session/run", json!({"session_id": "d", "input": "are you there?"}));
    s.close_stdin();
    let frames = s.drain();
    let replies: Vec<&Value> = frames.iter().filter(|f| f.get("method").is_none()).collect();
    assert_eq!(replies.len(), 1, "one reply, to the run: {frames:?}");
    assert_eq!(replies[0]["id"], id);
    let e = &replies[0]["error"];
    assert_eq!(e["code"], 1008, "{e}");
    check_error(e);
    assert_runtime_failed(e, "disconnected");
    assert_eq!(s.wait().code(), Some(0));

    let mut again = Server::on_file(&path, Framing::Lsp, &[]);
    assert_eq!(state(&mut again, "d"), before, "nothing appended");
}

/// Issue 10: with `runtime.format` in `initialize`, `runtime/run` carries `payload`, the
/// provider-ready body `session/export` makes of the same messages.
#[test]
fn a_runtime_format_in_initialize_adds_the_provider_payload() {
    for format in ["openai_chat", "anthropic_messages", "gemini_contents"] {
        let mut s = Server::start(Framing::Ndjson);
        s.call("initialize", json!({"runtime": {"format": format}}));
        session_with_history(&mut s, "f");
        // The same messages in a session of their own, to export.
        s.call("session/fork", json!({"session_id": "f", "new_session_id": "twin"}));
        s.call("session/add_user", json!({"session_id": "twin", "text": "what now?"}));
        let expected = s.call("session/export", json!({"session_id": "twin", "format": format}))["payload"].clone();

        let (id, host) = ask(&mut s, "session/run", json!({"session_id": "f", "input": "what now?"}));
        let payload = &host["params"]["payload"];
        assert_eq!(payload, &expected, "{format}");
        if format == "openai_chat" {
            let last = payload["messages"].as_array().unwrap().last().unwrap();
            assert_eq!((&last["role"], &last["content"]), (&json!("user"), &json!("what now?")));
        }
        s.answer(&host["id"], json!({"text": "wait"}));
        s.result_of(id, "session/run");
    }
}
