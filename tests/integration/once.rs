//! Exactly-once appends (spec section 15): an append given `message_id`s that the session
//! holds already is answered as it was the first time, `duplicate: true`, and changes
//! nothing; the same id on a different message is 1010. So a host whose write failed
//! with 1006 (a connection lost during COMMIT) retries it safely.

use crate::harness::{Server, Value, json};
use crate::reasoning::fixture;

const A: &str = "0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9";
const B: &str = "01890a5d-ac96-774b-bcce-b302099a8057";
const C: &str = "3b1f8e2a-9c4d-4e5f-a6b7-c8d9e0f1a2b3";
const D: &str = "5a6b7c8d-9e0f-4a1b-8c2d-3e4f5a6b7c8d";

fn count(s: &mut Server, id: &str) -> u64 {
    s.call("session/get", json!({"session_id": id}))["message_count"].as_u64().unwrap()
}

fn with(mut reply: Value, member: &str, value: Value) -> Value {
    reply[member] = value;
    reply
}

fn a_retry_is_answered_as_the_first_time(s: &mut Server) {
    s.call("session/create", json!({"session_id": "r"}));
    let first = s.call("session/add_user", json!({"session_id": "r", "text": "hi", "message_id": A}));
    assert_eq!(first, json!({"message_id": A, "index": 0, "revision": 1}));
    let calls = json!([{"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]);
    s.call("session/add_assistant", json!({"session_id": "r", "tool_calls": calls, "message_id": B}));
    let result = s.call(
        "session/add_tool_result",
        json!({"session_id": "r", "tool_call_id": "c1", "content": "a b", "message_id": C}),
    );
    s.call("session/add_user", json!({"session_id": "r", "text": "next"}));
    assert_eq!(count(s, "r"), 4);

    // Later, after more appends: the original reply, whatever the session's revision now,
    // before `expected_revision` and the rules (the call is answered: not 1004).
    let again =
        s.call("session/add_user", json!({"session_id": "r", "text": "hi", "message_id": A, "expected_revision": 0}));
    assert_eq!(again, with(first, "duplicate", json!(true)));
    let again = s.call(
        "session/add_tool_result",
        json!({"session_id": "r", "tool_call_id": "c1", "content": "a b", "message_id": C}),
    );
    assert_eq!(again, with(result, "duplicate", json!(true)));
    let again = s.call("session/add_assistant", json!({"session_id": "r", "tool_calls": calls, "message_id": B}));
    assert_eq!(
        (again["index"].as_u64(), again["revision"].as_u64(), &again["duplicate"]),
        (Some(1), Some(2), &json!(true))
    );
    assert_eq!(count(s, "r"), 4, "a retry stores nothing");
    assert_eq!(s.call("session/get", json!({"session_id": "r"}))["revision"], 4, "nor changes the revision");

    // The same id on a different message: 1010, nothing stored.
    let e = s.fail("session/add_user", json!({"session_id": "r", "text": "HI", "message_id": A}), 1010);
    assert_eq!(e["data"], json!({"kind": "message_exists", "message_id": A}));
    s.fail(
        "session/add_tool_result",
        json!({"session_id": "r", "tool_call_id": "c1", "content": "other", "message_id": C}),
        1010,
    );
    s.fail("session/add_assistant", json!({"session_id": "r", "text": "hi", "message_id": A}), 1010);
    assert_eq!(count(s, "r"), 4);

    // The id is the message's id, stored in lower case; anything but a UUID is refused.
    let upper = D.to_uppercase();
    let d = s.call("session/add_user", json!({"session_id": "r", "text": "u", "message_id": upper}));
    assert_eq!(d["message_id"], D);
    let history = s.call("session/history", json!({"session_id": "r"}));
    let ids: Vec<&str> = history["messages"].as_array().unwrap().iter().map(|m| m["id"].as_str().unwrap()).collect();
    assert_eq!((ids[0], ids[1], ids[2], ids[4]), (A, B, C, D));
    for bad in [json!("not-a-uuid"), json!(A.replace('-', "")), json!(7), json!(format!("{{{A}}}"))] {
        let e = s.fail("session/add_user", json!({"session_id": "r", "text": "x", "message_id": bad}), -32602);
        assert!(e["message"].as_str().unwrap().contains("message_id"), "{e}");
    }
    assert_eq!(count(s, "r"), 5);
}

fn add_message_and_add_messages_take_ids(s: &mut Server) {
    s.call("session/create", json!({"session_id": "m"}));
    let message = json!({"role": "user", "content": [{"type": "text", "text": "x"}], "metadata": {"n": 1.0}});
    let first = s.call("session/add_message", json!({"session_id": "m", "message": message, "message_id": A}));
    // Numbers compare as values, members whatever their order.
    let same = json!({"metadata": {"n": 1}, "content": [{"text": "x", "type": "text"}], "role": "user"});
    let again = s.call("session/add_message", json!({"session_id": "m", "message": same, "message_id": A}));
    assert_eq!(again, with(first, "duplicate", json!(true)));
    let e = s.fail(
        "session/add_message",
        json!({"session_id": "m", "message": {"role": "user", "content": "y", "message_id": B}, "message_id": C}),
        -32602,
    );
    assert!(e["message"].as_str().unwrap().contains("message_id"), "{e}");

    let batch = json!([{"role": "user", "content": "q", "message_id": B}, {"role": "assistant", "content": "a", "message_id": C}]);
    let stored = s.call("session/add_messages", json!({"session_id": "m", "messages": batch}));
    assert_eq!(stored, json!({"message_ids": [B, C], "revision": 2}));
    s.call("session/add_user", json!({"session_id": "m", "text": "more"}));
    let again = s.call("session/add_messages", json!({"session_id": "m", "messages": batch}));
    assert_eq!(again, json!({"message_ids": [B, C], "revision": 2, "duplicate": true}));
    // Part of a batch stored (or one of them without an id): 1010, nothing stored.
    let partial = json!([{"role": "user", "content": "q", "message_id": B}, {"role": "assistant", "content": "a", "message_id": D}]);
    let e = s.fail("session/add_messages", json!({"session_id": "m", "messages": partial}), 1010);
    assert_eq!(e["data"]["message_id"], B);
    let partial = json!([{"role": "user", "content": "q", "message_id": B}, {"role": "assistant", "content": "a"}]);
    s.fail("session/add_messages", json!({"session_id": "m", "messages": partial}), 1010);
    let twice = json!([{"role": "user", "content": "q", "message_id": D}, {"role": "assistant", "content": "a", "message_id": D}]);
    let e = s.fail("session/add_messages", json!({"session_id": "m", "messages": twice}), -32602);
    assert!(e["message"].as_str().unwrap().starts_with("invalid params: messages[1]: message_id"), "{e}");
    assert_eq!(count(s, "m"), 4);
}

fn a_retried_response_gives_the_calls_it_gave(s: &mut Server) {
    s.call("session/create", json!({"session_id": "g"}));
    s.call("session/add_user", json!({"session_id": "g", "text": "weather?"}));
    // Gemini names no call ids: convo numbers them after the session's, so a retry must
    // answer with the ids the first append gave, not new ones.
    let response = fixture("gemini_thought_signatures");
    let params = json!({"session_id": "g", "format": "gemini_contents", "response": response, "message_id": A});
    let first = s.call("session/add_response", params.clone());
    assert_eq!(first["tool_call_ids"].as_array().unwrap().len(), 2);
    let again = s.call("session/add_response", params);
    assert_eq!(again, with(first, "duplicate", json!(true)));
    let other =
        json!({"session_id": "g", "format": "gemini_contents", "response": fixture("gemini_final"), "message_id": A});
    s.fail("session/add_response", other, 1010);
    assert_eq!(count(s, "g"), 2);
}

fn an_id_counts_while_its_message_is_in_the_history(s: &mut Server) {
    s.call("session/create", json!({"session_id": "p"}));
    s.call("session/add_user", json!({"session_id": "p", "text": "one", "message_id": A}));
    s.call("session/add_assistant", json!({"session_id": "p", "text": "two", "message_id": B}));
    // A fork shares its parent's ids; a copy it did not store answers with revision 0.
    s.call("session/fork", json!({"session_id": "p", "new_session_id": "f"}));
    let again = s.call("session/add_assistant", json!({"session_id": "f", "text": "two", "message_id": B}));
    assert_eq!(again, json!({"message_id": B, "index": 1, "revision": 0, "duplicate": true}));
    s.fail("session/add_user", json!({"session_id": "f", "text": "not one", "message_id": A}), 1010);
    // Its own appends are its own.
    let own = s.call("session/add_user", json!({"session_id": "f", "text": "three", "message_id": C}));
    let again = s.call("session/add_user", json!({"session_id": "f", "text": "three", "message_id": C}));
    assert_eq!(again, with(own, "duplicate", json!(true)));
    // The parent never saw C: the same id is a new message there.
    let fresh = s.call("session/add_user", json!({"session_id": "p", "text": "other", "message_id": C}));
    assert_eq!(fresh, json!({"message_id": C, "index": 2, "revision": 3}));
    // Trimmed away, cleared or rewound past, an id is free again.
    s.call("session/trim", json!({"session_id": "p", "max_turns": 1}));
    let fresh = s.call("session/add_user", json!({"session_id": "p", "text": "one again", "message_id": A}));
    assert!(fresh.get("duplicate").is_none(), "{fresh}");
    s.call("session/clear", json!({"session_id": "f"}));
    let fresh = s.call("session/add_user", json!({"session_id": "f", "text": "new", "message_id": B}));
    assert_eq!(fresh, json!({"message_id": B, "index": 0, "revision": 3}));
    s.call("session/pop", json!({"session_id": "f"}));
    let fresh = s.call("session/add_user", json!({"session_id": "f", "text": "newer", "message_id": B}));
    assert_eq!(fresh, json!({"message_id": B, "index": 0, "revision": 5}));
}

/// Retries pipelined among the appends they retry (PostgreSQL applies appends queued
/// back to back on a session as one run, planned together): each is answered from what
/// was stored, in its place in the order, and an id given to another message is 1010.
fn retries_pipelined_among_appends(s: &mut Server) {
    s.call("session/create", json!({"session_id": "q"}));
    s.call("session/add_user", json!({"session_id": "q", "text": "stored", "message_id": A}));
    let user = |s: &mut Server, text: &str, id: Option<&str>| {
        let mut params = json!({"session_id": "q", "text": text});
        if let Some(id) = id {
            params["message_id"] = json!(id);
        }
        s.send_request("session/add_user", params)
    };
    let sent = [
        user(s, "b", Some(B)),
        user(s, "stored", Some(A)), // a retry of what an earlier transaction stored
        user(s, "c", Some(C)),
        user(s, "b", Some(B)), // a retry of an append queued with it
        user(s, "B", Some(B)), // another message under a stored id
        user(s, "plain", None),
        user(s, "c", Some(C)),
        user(s, "d", Some(D)),
    ];
    let replies: Vec<Value> = sent.iter().map(|id| s.recv_reply(*id)).collect();
    let result = |i: usize| replies[i]["result"].clone();
    assert_eq!(result(0), json!({"message_id": B, "index": 1, "revision": 2}));
    assert_eq!(result(1), json!({"message_id": A, "index": 0, "revision": 1, "duplicate": true}));
    assert_eq!(result(2), json!({"message_id": C, "index": 2, "revision": 3}));
    assert_eq!(result(3), with(result(0), "duplicate", json!(true)));
    assert_eq!(replies[4]["error"]["code"], 1010, "{}", replies[4]);
    assert_eq!(replies[4]["error"]["data"], json!({"kind": "message_exists", "message_id": B}));
    assert_eq!((&result(5)["index"], &result(5)["revision"]), (&json!(3), &json!(4)));
    assert_eq!(result(6), with(result(2), "duplicate", json!(true)));
    assert_eq!(result(7), json!({"message_id": D, "index": 4, "revision": 5}));
    let history = s.call("session/history", json!({"session_id": "q"}));
    let texts: Vec<&str> =
        history["messages"].as_array().unwrap().iter().map(|m| m["content"].as_str().unwrap()).collect();
    assert_eq!(texts, ["stored", "b", "c", "plain", "d"]);
    assert_eq!(history["revision"], 5);
}

crate::every_store!(
    retries_pipelined_among_appends,
    a_retry_is_answered_as_the_first_time,
    add_message_and_add_messages_take_ids,
    a_retried_response_gives_the_calls_it_gave,
    an_id_counts_while_its_message_is_in_the_history,
);
