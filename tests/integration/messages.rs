//! Messages and the conversation rules: the add_* family, tool-call groups, "moving on
//! cancels", repair, history paging and trim.

use crate::harness::{Server, Value, json};

const CANCELLED: &str = "Cancelled — connection was lost before this tool ran.";
const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

fn session(s: &mut Server, id: &str) {
    s.call("session/create", json!({"session_id": id}));
}

fn history(s: &mut Server, id: &str, extra: Value) -> Value {
    let mut params = json!({"session_id": id});
    params.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    s.call("session/history", params)
}

fn stored(s: &mut Server, id: &str) -> Vec<Value> {
    history(s, id, json!({"repair": false}))["messages"].as_array().unwrap().clone()
}

fn calls(ids: &[&str]) -> Value {
    ids.iter().map(|id| json!({"id": id, "type": "function", "function": {"name": "run", "arguments": "{}"}})).collect()
}

fn add_family(s: &mut Server) {
    session(s, "a");
    let u = s.call("session/add_user", json!({"session_id": "a", "text": "look", "images": [PNG]}));
    assert_eq!((u["index"].as_u64(), u["revision"].as_u64()), (Some(0), Some(1)));
    let a =
        s.call("session/add_assistant", json!({"session_id": "a", "text": "calling", "tool_calls": calls(&["c1"])}));
    assert_eq!((a["index"].as_u64(), a["revision"].as_u64()), (Some(1), Some(2)));
    let t = s.call(
        "session/add_tool_result",
        json!({"session_id": "a", "tool_call_id": "c1", "content": [{"type": "text", "text": "done"}]}),
    );
    assert_eq!(t["index"], 2);
    let parts = json!([{"type": "text", "text": "x", "cache_control": {"type": "ephemeral"}}]);
    let m = s.call("session/add_message", json!({"session_id": "a", "message": {"role": "assistant", "content": parts, "name": "bot", "metadata": {"trace": [1, 2]}}}));
    assert_eq!(m["index"], 3);
    let many = s.call(
        "session/add_messages",
        json!({"session_id": "a", "messages": [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "t1", "name": "ls", "input": {}}]},
            {"role": "tool", "tool_call_id": "t1", "content": "r"},
        ]}),
    );
    assert_eq!(many["revision"], 5, "one request, one revision");
    assert_eq!(many["message_ids"].as_array().unwrap().len(), 3);

    let all = stored(s, "a");
    assert_eq!(all.len(), 7);
    assert_eq!(all[0]["images"], json!([PNG]));
    assert_eq!(all[0]["id"], u["message_id"]);
    assert_eq!(all[1]["tool_calls"], calls(&["c1"]), "tool calls are kept as given");
    assert_eq!(all[2]["content"], json!([{"type": "text", "text": "done"}]));
    assert_eq!(
        (&all[3]["content"], &all[3]["name"], &all[3]["metadata"]),
        (&parts, &json!("bot"), &json!({"trace": [1, 2]}))
    );
    assert_eq!(
        all[4..].iter().map(|m| m["id"].clone()).collect::<Vec<_>>(),
        many["message_ids"].as_array().unwrap()[..]
    );
    for m in &all {
        assert!(m["created_at"].as_str().unwrap().ends_with('Z'));
    }
    s.fail("session/add_user", json!({"session_id": "ghost", "text": "x"}), 1001);
}

fn parallel_calls_answered_out_of_order(s: &mut Server) {
    session(s, "p");
    s.call("session/add_user", json!({"session_id": "p", "text": "go"}));
    s.call("session/add_assistant", json!({"session_id": "p", "tool_calls": calls(&["a", "b", "c"])}));
    s.call("session/add_tool_result", json!({"session_id": "p", "tool_call_id": "c", "content": "C"}));

    let view = history(s, "p", json!({}));
    assert_eq!(view["repaired"], 2);
    let msgs = view["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 5);
    for (m, call) in msgs[3..].iter().zip(["a", "b"]) {
        assert_eq!((&m["id"], &m["role"], &m["tool_call_id"]), (&Value::Null, &json!("tool"), &json!(call)));
        assert_eq!((&m["content"], &m["metadata"]), (&json!(CANCELLED), &json!({"synthetic": true})));
    }
    assert_eq!(stored(s, "p").len(), 3, "repair stores nothing");

    // The real results still land, in any order.
    s.call("session/add_tool_result", json!({"session_id": "p", "tool_call_id": "b", "content": "B"}));
    s.call("session/add_tool_result", json!({"session_id": "p", "tool_call_id": "a", "content": "A"}));
    let view = history(s, "p", json!({}));
    assert_eq!(view["repaired"], 0);
    let order: Vec<&Value> = view["messages"].as_array().unwrap().iter().map(|m| &m["content"]).collect();
    assert_eq!(order, [&json!("go"), &Value::Null, &json!("C"), &json!("B"), &json!("A")]);
}

fn results_that_are_not_accepted(s: &mut Server) {
    session(s, "r");
    let none = s.fail("session/add_tool_result", json!({"session_id": "r", "tool_call_id": "x", "content": "?"}), 1004);
    assert_eq!(
        none["data"],
        json!({"kind": "invalid_sequence", "reason": "no_pending_tool_calls", "tool_call_id": "x"})
    );
    s.call("session/add_assistant", json!({"session_id": "r", "tool_calls": calls(&["a", "b"])}));
    s.call("session/add_tool_result", json!({"session_id": "r", "tool_call_id": "a", "content": "1"}));
    let dup = s.fail("session/add_tool_result", json!({"session_id": "r", "tool_call_id": "a", "content": "2"}), 1004);
    assert_eq!(dup["data"]["reason"], "duplicate_result");
    let unknown =
        s.fail("session/add_tool_result", json!({"session_id": "r", "tool_call_id": "zz", "content": "3"}), 1004);
    assert_eq!(unknown["data"]["reason"], "unknown_tool_call_id");
    // add_message and add_messages follow the same rule, all or nothing.
    s.fail(
        "session/add_message",
        json!({"session_id": "r", "message": {"role": "tool", "tool_call_id": "a", "content": "4"}}),
        1004,
    );
    s.fail(
        "session/add_messages",
        json!({"session_id": "r", "messages": [
            {"role": "tool", "tool_call_id": "b", "content": "fine"},
            {"role": "tool", "tool_call_id": "b", "content": "again"},
        ]}),
        1004,
    );
    assert_eq!(stored(s, "r").len(), 2, "nothing of a rejected request is stored");
    assert_eq!(s.call("session/get", json!({"session_id": "r"}))["revision"], 2);
}

fn moving_on_cancels_and_rejects_the_late_result(s: &mut Server) {
    session(s, "m");
    s.call("session/add_user", json!({"session_id": "m", "text": "go"}));
    s.call("session/add_assistant", json!({"session_id": "m", "tool_calls": calls(&["a", "b"])}));
    s.call("session/add_tool_result", json!({"session_id": "m", "tool_call_id": "b", "content": "B"}));
    let next = s.call("session/add_user", json!({"session_id": "m", "text": "never mind"}));
    assert_eq!(next["index"], 4, "the cancelled result went in first");

    let all = stored(s, "m");
    assert_eq!(all.len(), 5);
    let cancel = &all[3];
    assert_eq!(
        (&cancel["role"], &cancel["tool_call_id"], &cancel["content"]),
        (&json!("tool"), &json!("a"), &json!(CANCELLED))
    );
    assert_eq!(cancel["metadata"], json!({"synthetic": true}));
    assert!(cancel["id"].is_string(), "a stored cancel has a real id");
    assert_eq!(all[4]["content"], "never mind");

    let late =
        s.fail("session/add_tool_result", json!({"session_id": "m", "tool_call_id": "a", "content": "too late"}), 1004);
    assert_eq!(late["data"]["reason"], "no_pending_tool_calls");
    assert_eq!(history(s, "m", json!({}))["repaired"], 0, "nothing dangles any more");
}

fn history_pages_over_the_repaired_view(s: &mut Server) {
    session(s, "h");
    for i in 0..3 {
        s.call("session/add_user", json!({"session_id": "h", "text": i.to_string()}));
    }
    s.call("session/add_assistant", json!({"session_id": "h", "tool_calls": calls(&["x", "y"])}));
    // The view: 0, 1, 2, call, cancel(x), cancel(y)
    let page = |s: &mut Server, offset: u64, limit: Value| {
        let mut p = json!({"offset": offset});
        if !limit.is_null() {
            p["limit"] = limit;
        }
        let h = history(s, "h", p);
        let got: Vec<String> = h["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                m["content"]
                    .as_str()
                    .map(str::to_owned)
                    .unwrap_or_else(|| format!("call:{}", m["tool_calls"].as_array().unwrap().len()))
            })
            .collect();
        (got, h["repaired"].as_u64().unwrap())
    };
    assert_eq!(page(s, 1, json!(2)), (vec!["1".into(), "2".into()], 0));
    assert_eq!(page(s, 3, json!(2)), (vec!["call:2".into(), CANCELLED.into()], 1));
    assert_eq!(page(s, 5, Value::Null), (vec![CANCELLED.into()], 1));
    assert_eq!(page(s, 9, json!(5)), (vec![], 0));
    assert_eq!(page(s, 0, json!(0)), (vec![], 0));
    let raw = history(s, "h", json!({"repair": false, "offset": 2}));
    assert_eq!((raw["messages"].as_array().unwrap().len(), raw["repaired"].as_u64()), (2, Some(0)));
    assert_eq!(raw["revision"], 4);
    s.fail("session/history", json!({"session_id": "h", "offset": -1}), -32602);
    s.fail("session/history", json!({"session_id": "ghost"}), 1001);
}

fn trim_by_turns(s: &mut Server) {
    session(s, "t");
    s.call(
        "session/add_messages",
        json!({"session_id": "t", "messages": [
            {"role": "system", "content": "preamble"},
            {"role": "user", "content": "1"},
            {"role": "assistant", "tool_calls": calls(&["a"])},
            {"role": "tool", "tool_call_id": "a", "content": "A"},
            {"role": "assistant", "content": "one"},
            {"role": "user", "content": "2"},
            {"role": "assistant", "content": "two"},
            {"role": "user", "content": "3"},
        ]}),
    );
    // Four turns: the preamble counts as the oldest one.
    assert_eq!(
        s.call("session/trim", json!({"session_id": "t", "max_turns": 4})),
        json!({"removed": 0, "revision": 1})
    );
    assert_eq!(
        s.call("session/trim", json!({"session_id": "t", "max_turns": 9}))["revision"],
        1,
        "no change, no revision"
    );
    assert_eq!(
        s.call("session/trim", json!({"session_id": "t", "max_turns": 3})),
        json!({"removed": 1, "revision": 2})
    );
    let kept: Vec<Value> = stored(s, "t").iter().map(|m| m["content"].clone()).collect();
    assert_eq!(kept, [json!("1"), Value::Null, json!("A"), json!("one"), json!("2"), json!("two"), json!("3")]);
    assert_eq!(
        s.call("session/trim", json!({"session_id": "t", "max_turns": 2})),
        json!({"removed": 4, "revision": 3})
    );
    assert_eq!(stored(s, "t")[0]["content"], "2", "the group went with its turn");
    s.fail("session/trim", json!({"session_id": "t", "max_turns": 1, "expected_revision": 2}), 1003);
    assert_eq!(
        s.call("session/trim", json!({"session_id": "t", "max_turns": 0, "expected_revision": 3})),
        json!({"removed": 3, "revision": 4})
    );
    assert_eq!(stored(s, "t"), Vec::<Value>::new());
    assert_eq!(s.call("session/trim", json!({"session_id": "t", "max_turns": 0}))["removed"], 0);

    s.fail("session/trim", json!({"session_id": "t"}), -32602);
    s.fail("session/trim", json!({"session_id": "t", "max_turns": 1, "max_tokens": 10}), -32602);
    s.fail("session/trim", json!({"session_id": "ghost", "max_turns": 1}), 1001);
}

fn bad_messages_store_nothing(s: &mut Server) {
    session(s, "b");
    let bad = [
        json!({"role": "robot", "content": "x"}),
        json!({"role": "user", "content": "x", "tool_call_id": "c"}),
        json!({"role": "user", "content": "x", "tool_calls": [{"id": "c"}]}),
        json!({"role": "tool", "content": "x"}),
        json!({"role": "tool", "content": "x", "tool_call_id": ""}),
        json!({"role": "tool", "content": "x", "tool_call_id": "c", "tool_calls": [{"id": "c"}]}),
        json!({"role": "assistant", "tool_calls": [{"name": "no id"}]}),
        json!({"role": "assistant", "tool_calls": ["not an object"]}),
        json!({"role": "assistant", "tool_calls": [{"id": "d"}, {"id": "d"}]}),
        json!({"role": "user", "content": 42}),
        json!({"role": "user", "content": [{"no": "type"}]}),
        json!({"role": "user", "images": ["%%% not base64 %%%"]}),
        json!({"role": "user", "images": [""]}),
        json!({"role": "user", "metadata": "not an object"}),
        json!({"content": "no role"}),
    ];
    for message in bad {
        s.fail("session/add_message", json!({"session_id": "b", "message": message.clone()}), -32602);
        let e = s.fail(
            "session/add_messages",
            json!({"session_id": "b", "messages": [{"role": "user", "content": "ok"}, message]}),
            -32602,
        );
        assert!(e["message"].as_str().unwrap().contains("messages[1]"), "the error names the message: {e}");
    }
    s.fail("session/add_user", json!({"session_id": "b", "text": 5}), -32602);
    s.fail("session/add_user", json!({"session_id": "b"}), -32602);
    s.fail("session/add_user", json!({"session_id": "b", "text": "x", "images": ["@@"]}), -32602);
    s.fail("session/add_assistant", json!({"session_id": "b", "tool_calls": {"id": "a"}}), -32602);
    s.fail("session/add_tool_result", json!({"session_id": "b", "tool_call_id": "a"}), -32602);
    s.fail("session/add_tool_result", json!({"session_id": "b", "tool_call_id": "a", "content": 7}), -32602);
    assert_eq!(stored(s, "b").len(), 0);
    assert_eq!(s.call("session/get", json!({"session_id": "b"}))["revision"], 0);
}

/// Issue 9, item 10: every provider refuses an assistant message with neither text nor
/// tool calls, so an append refuses it; an import keeps it as given.
fn an_appended_assistant_message_must_say_something(s: &mut Server) {
    const WHY: &str = "an assistant message needs text or tool_calls: every provider refuses an empty one";
    session(s, "q");
    for params in [json!({}), json!({"text": null}), json!({"text": ""}), json!({"text": "", "tool_calls": []})] {
        let mut params = params;
        params["session_id"] = json!("q");
        let e = s.fail("session/add_assistant", params, -32602);
        assert_eq!(e["message"], format!("invalid params: {WHY}"));
    }
    for content in [Value::Null, json!(""), json!([])] {
        let message = json!({"role": "assistant", "content": content});
        let e = s.fail("session/add_message", json!({"session_id": "q", "message": message}), -32602);
        assert_eq!(e["message"], format!("invalid params: message: {WHY}"));
        let e = s.fail(
            "session/add_messages",
            json!({"session_id": "q", "messages": [{"role": "user", "content": "hi"}, message]}),
            -32602,
        );
        assert_eq!(e["message"], format!("invalid params: messages[1]: {WHY}"));
    }
    assert_eq!(stored(s, "q").len(), 0, "nothing of a refused request is stored");
    s.call("session/add_assistant", json!({"session_id": "q", "text": " "}));
    s.call(
        "session/add_message",
        json!({"session_id": "q", "message": {"role": "assistant", "content": [{"type": "text", "text": "x"}]}}),
    );

    let imported = s.call(
        "session/from_dict",
        json!({"data": {"session_id": "kept", "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": ""}]}}),
    );
    assert_eq!(imported["message_count"], 2, "an import keeps it");
    assert_eq!(stored(s, "kept")[1]["content"], "");
}

/// Issue 9, item 10: the prefix once, and the client's strings quoted as JSON.
fn error_messages_say_each_thing_once(s: &mut Server) {
    let e = s.fail("session/add_user", json!({"session_id": "a b\u{301}\u{7}", "text": "x"}), -32602);
    assert_eq!(
        e["message"],
        "invalid params: session_id: must be 1-128 characters of A-Z a-z 0-9 . _ : -, got \"a b\u{301}\\u0007\""
    );
    session(s, "y");
    let e = s.fail(
        "session/add_messages",
        json!({"session_id": "y", "messages": [{"role": "assistant", "tool_calls": [{"id": "é\u{301}"}, {"id": "é\u{301}"}]}]}),
        -32602,
    );
    assert_eq!(
        e["message"],
        "invalid params: messages[0]: tool_calls[1]: the id \"é\u{301}\" appears twice in one message"
    );
    let e = s.fail("session/add_user", json!({"session_id": "y", "text": 5}), -32602);
    assert_eq!(e["message"], "invalid params: text: invalid type: integer `5`, expected a string");
    let e = s.fail("session/add_user", json!({"session_id": "y", "text": "x", "images": ["", "aGk="]}), -32602);
    assert_eq!(e["message"], "invalid params: images[0]: must not be empty");
    let e =
        s.fail("session/add_tool_result", json!({"session_id": "y", "tool_call_id": "\u{301}x", "content": "r"}), 1004);
    assert_eq!(
        e["message"],
        "invalid sequence: no tool call is waiting for a result, so the result for \"\u{301}x\" is not accepted"
    );
}

fn expected_revision_on_appends(s: &mut Server) {
    session(s, "e");
    s.call("session/add_user", json!({"session_id": "e", "text": "a", "expected_revision": 0}));
    let e = s.fail("session/add_user", json!({"session_id": "e", "text": "b", "expected_revision": 0}), 1003);
    assert_eq!(e["data"]["current_revision"], 1);
    s.fail("session/add_messages", json!({"session_id": "e", "messages": [], "expected_revision": 5}), 1003);
    assert_eq!(
        s.call("session/add_messages", json!({"session_id": "e", "messages": []})),
        json!({"message_ids": [], "revision": 1})
    );
    assert_eq!(stored(s, "e").len(), 1);
}

/// Issue 15: appends pipelined on one session may share a commit (each queues its write
/// once the one before it has queued its own), yet each sees the effects of those before
/// it, a refused one leaves nothing, and any other request sees every append before it.
fn pipelined_appends_on_one_session_keep_their_order(s: &mut Server) {
    session(s, "p");
    let user =
        |s: &mut Server, text: String| s.send_request("session/add_user", json!({"session_id": "p", "text": text}));
    let first: Vec<u64> = (0..40).map(|i| user(s, format!("u{i}"))).collect();
    let stale = s.send_request("session/add_user", json!({"session_id": "p", "text": "no", "expected_revision": 3}));
    let orphan =
        s.send_request("session/add_tool_result", json!({"session_id": "p", "tool_call_id": "x", "content": "?"}));
    let asked = s.send_request("session/add_assistant", json!({"session_id": "p", "tool_calls": calls(&["a"])}));
    let answered =
        s.send_request("session/add_tool_result", json!({"session_id": "p", "tool_call_id": "a", "content": "1"}));
    let many = s.send_request(
        "session/add_messages",
        json!({"session_id": "p", "messages": [{"role": "user", "content": "m1"}, {"role": "user", "content": "m2"}]}),
    );
    let middle = s.send_request("session/history", json!({"session_id": "p", "repair": false}));
    let second: Vec<u64> = (40..60).map(|i| user(s, format!("u{i}"))).collect();
    let fresh = s.send_request("session/add_user", json!({"session_id": "p", "text": "yes", "expected_revision": 63}));
    let end = s.send_request("session/history", json!({"session_id": "p", "repair": false}));

    for (i, id) in first.iter().enumerate() {
        assert_eq!(s.result_of(*id, "session/add_user")["index"], i);
    }
    assert_eq!(s.error_of(stale, "session/add_user", 1003)["data"]["current_revision"], 40);
    assert_eq!(s.error_of(orphan, "session/add_tool_result", 1004)["data"]["reason"], "no_pending_tool_calls");
    assert_eq!(s.result_of(asked, "session/add_assistant")["index"], 40);
    assert_eq!(s.result_of(answered, "session/add_tool_result")["index"], 41);
    assert_eq!(s.result_of(many, "session/add_messages")["revision"], 43);
    let page = s.result_of(middle, "session/history");
    assert_eq!((page["messages"].as_array().unwrap().len(), &page["revision"]), (44, &json!(43)));
    assert_eq!(page["messages"][39]["content"], "u39");
    for (i, id) in second.iter().enumerate() {
        assert_eq!(s.result_of(*id, "session/add_user")["index"], 44 + i);
    }
    assert_eq!(s.result_of(fresh, "session/add_user")["revision"], 64);
    let page = s.result_of(end, "session/history");
    assert_eq!(page["messages"].as_array().unwrap().len(), 65);
    assert_eq!(page["messages"][63]["content"], "u59");
}

/// Issue 15: an append that shares a transaction with the append before it starts from
/// what that append left. A fork whose own segment starts empty, another session's
/// appends, a refused append (a rules error in a job of its own, and a draft's) and a
/// rewind between them must each be seen.
fn pipelined_appends_start_from_what_the_last_one_left(s: &mut Server) {
    session(s, "a");
    let ids: Vec<String> = (0..4)
        .map(|i| {
            s.call("session/add_user", json!({"session_id": "a", "text": format!("a{i}")}))["message_id"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    s.call("session/fork", json!({"session_id": "a", "new_session_id": "b"}));
    let send = |s: &mut Server, method: &str, params: Value| s.send_request(method, params);
    let user =
        |s: &mut Server, id: &str, text: &str| send(s, "session/add_user", json!({"session_id": id, "text": text}));
    let b1 = user(s, "b", "b1");
    let b2 = user(s, "b", "b2");
    let a4 = user(s, "a", "a4");
    let asked = send(s, "session/add_assistant", json!({"session_id": "a", "tool_calls": calls(&["c"])}));
    let wrong = send(s, "session/add_tool_result", json!({"session_id": "a", "tool_call_id": "d", "content": "?"}));
    let answered = send(s, "session/add_tool_result", json!({"session_id": "a", "tool_call_id": "c", "content": "1"}));
    let again = send(s, "session/add_tool_result", json!({"session_id": "a", "tool_call_id": "c", "content": "2"}));
    let rewound = send(s, "session/rewind", json!({"session_id": "a", "to_message_id": ids[1]}));
    let a2 = user(s, "a", "after rewind");
    let b3 = user(s, "b", "b3");
    for (id, index) in [(b1, 4), (b2, 5), (b3, 6)] {
        assert_eq!(s.result_of(id, "session/add_user")["index"], index);
    }
    assert_eq!(s.result_of(a4, "session/add_user")["index"], 4);
    assert_eq!(s.result_of(asked, "session/add_assistant")["index"], 5);
    assert_eq!(s.error_of(wrong, "session/add_tool_result", 1004)["data"]["reason"], "unknown_tool_call_id");
    assert_eq!(s.result_of(answered, "session/add_tool_result")["index"], 6);
    assert_eq!(s.error_of(again, "session/add_tool_result", 1004)["data"]["reason"], "duplicate_result");
    assert_eq!(s.result_of(rewound, "session/rewind")["removed"], 5);
    assert_eq!(s.result_of(a2, "session/add_user")["index"], 2);
    let texts =
        |s: &mut Server, id: &str| -> Vec<Value> { stored(s, id).iter().map(|m| m["content"].clone()).collect() };
    assert_eq!(texts(s, "a"), [json!("a0"), json!("a1"), json!("after rewind")]);
    assert_eq!(texts(s, "b"), ["a0", "a1", "a2", "a3", "b1", "b2", "b3"].map(|t| json!(t)));
    let info = s.call("session/get", json!({"session_id": "a"}));
    assert_eq!((&info["message_count"], &info["revision"]), (&json!(3), &json!(9)));
    let info = s.call("session/get", json!({"session_id": "b"}));
    assert_eq!((&info["message_count"], &info["revision"]), (&json!(7), &json!(3)));
}

/// `history` and `to_dict` write long message texts from where the store keeps them and
/// copy short ones: texts of every size around the cut, with escapes and newlines, read
/// back exactly, whether their replies go out alone, together with others or in a batch.
fn long_replies_read_back_exactly(s: &mut Server) {
    s.call("session/create", json!({"session_id": "long", "system": "be brief"}));
    let texts: Vec<String> = [0, 1, 300, 510, 511, 512, 513, 4096, 70_000, 300_000]
        .iter()
        .enumerate()
        .map(|(i, &n)| format!("{i}: é\n\"\\\t") + &"x".repeat(n))
        .collect();
    for text in &texts {
        s.call("session/add_user", json!({"session_id": "long", "text": text}));
    }
    let call = json!([{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "y".repeat(2000)}}]);
    s.call("session/add_assistant", json!({"session_id": "long", "tool_calls": call}));
    let contents = |messages: &Value| -> Vec<Value> {
        messages.as_array().unwrap().iter().map(|m| m["content"].clone()).collect()
    };
    let mut expected: Vec<Value> = texts.iter().map(|t| json!(t)).collect();
    expected.push(Value::Null);
    // Sent together, so that the replies may be written together.
    let history = s.send_request("session/history", json!({"session_id": "long", "repair": false}));
    let get = s.send_request("session/get", json!({"session_id": "long"}));
    let dict = s.send_request("session/to_dict", json!({"session_id": "long"}));
    let page = s.send_request("session/history", json!({"session_id": "long", "offset": 4, "limit": 3}));
    let repaired = s.send_request("session/history", json!({"session_id": "long"}));
    let h = s.result_of(history, "session/history");
    assert_eq!(contents(&h["messages"]), expected);
    assert_eq!(h["messages"][10]["tool_calls"], call);
    assert_eq!((&h["revision"], &h["repaired"]), (&json!(11), &json!(0)));
    assert_eq!(s.result_of(get, "session/get")["message_count"], 11);
    let d = s.result_of(dict, "session/to_dict");
    assert_eq!((&d["session_id"], &d["system"], &d["cwd"]), (&json!("long"), &json!("be brief"), &Value::Null));
    assert_eq!(d["messages"], h["messages"]);
    assert_eq!(contents(&s.result_of(page, "session/history")["messages"]), expected[4..7]);
    let r = s.result_of(repaired, "session/history");
    assert_eq!((r["messages"].as_array().unwrap().len(), &r["repaired"]), (12, &json!(1)));
    assert_eq!(r["messages"][11]["tool_call_id"], "c1");

    s.send(&json!([
        {"jsonrpc": "2.0", "id": "b1", "method": "session/history", "params": {"session_id": "long", "repair": false}},
        {"jsonrpc": "2.0", "id": "b2", "method": "session/to_dict", "params": {"session_id": "long"}},
    ]));
    let mut batch = s.recv().as_array().unwrap().clone();
    batch.sort_by_key(|reply| reply["id"].as_str().unwrap().to_owned());
    assert_eq!(batch[0]["result"], h);
    assert_eq!(batch[1]["result"], d);
}

/// Appends of many megabytes pipelined on one session (PostgreSQL writes such a run in
/// several statements, each under its bound) read back exactly, in order.
fn large_appends_pipelined_read_back_exactly(s: &mut Server) {
    session(s, "big");
    let text = |c: char, mib: usize| c.to_string().repeat(mib << 20);
    let many = s.send_request(
        "session/add_messages",
        json!({"session_id": "big", "messages": [
            {"role": "user", "content": text('a', 7)},
            {"role": "assistant", "content": text('b', 7)},
            {"role": "user", "content": text('c', 7)},
        ]}),
    );
    let next: Vec<u64> = ['d', 'e', 'f']
        .into_iter()
        .map(|c| s.send_request("session/add_user", json!({"session_id": "big", "text": text(c, 6)})))
        .collect();
    assert_eq!(s.result_of(many, "session/add_messages")["revision"], 1);
    for (i, id) in next.into_iter().enumerate() {
        assert_eq!(s.result_of(id, "session/add_user")["index"], 3 + i);
    }
    let history = s.call("session/history", json!({"session_id": "big", "repair": false}));
    let contents: Vec<(char, usize)> = history["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let t = m["content"].as_str().unwrap();
            assert!(t.bytes().all(|b| b == t.as_bytes()[0]), "one letter throughout");
            (t.chars().next().unwrap(), t.len() >> 20)
        })
        .collect();
    assert_eq!(contents, [('a', 7), ('b', 7), ('c', 7), ('d', 6), ('e', 6), ('f', 6)]);
}

crate::every_store!(
    large_appends_pipelined_read_back_exactly,
    long_replies_read_back_exactly,
    pipelined_appends_on_one_session_keep_their_order,
    pipelined_appends_start_from_what_the_last_one_left,
    add_family,
    parallel_calls_answered_out_of_order,
    results_that_are_not_accepted,
    moving_on_cancels_and_rejects_the_late_result,
    history_pages_over_the_repaired_view,
    trim_by_turns,
    bad_messages_store_nothing,
    an_appended_assistant_message_must_say_something,
    error_messages_say_each_thing_once,
    expected_revision_on_appends,
    an_empty_answer_is_kept_when_allowed,
    pop_removes_the_last_message,
);

/// Issue 25: an empty answer a model gave (a framework or the seed's agent stores it) is
/// kept when asked with `allow_empty`, comes back as given, and export leaves it out.
fn an_empty_answer_is_kept_when_allowed(s: &mut Server) {
    session(s, "e");
    s.call("session/add_user", json!({"session_id": "e", "text": "hi"}));
    s.call("session/add_assistant", json!({"session_id": "e", "text": "", "allow_empty": true}));
    let message = json!({"role": "assistant", "content": null, "allow_empty": true});
    s.call("session/add_message", json!({"session_id": "e", "message": message}));
    let kept = stored(s, "e");
    assert_eq!((&kept[1]["content"], &kept[2]["content"]), (&json!(""), &Value::Null));
    let exported = s.call("session/export", json!({"session_id": "e", "format": "anthropic_messages"}));
    assert_eq!(exported["payload"]["messages"].as_array().unwrap().len(), 1);
    assert_eq!(exported["warnings"][0]["message"], "an empty message was left out");
}

/// Issue 25: pop removes the last message whatever it is (a result: its call is open
/// again), or replaces it in one step; an empty session is left as it is.
fn pop_removes_the_last_message(s: &mut Server) {
    session(s, "p");
    let empty = s.call("session/pop", json!({"session_id": "p"}));
    assert_eq!(empty, json!({"message": null, "revision": 0}));
    s.call("session/add_user", json!({"session_id": "p", "text": "go"}));
    let calls = json!([{"id": "a", "name": "f", "arguments": {}}, {"id": "b", "name": "g", "arguments": {}}]);
    s.call("session/add_assistant", json!({"session_id": "p", "tool_calls": calls}));
    s.call("session/add_tool_result", json!({"session_id": "p", "tool_call_id": "a", "content": "ra"}));
    let popped = s.call("session/pop", json!({"session_id": "p"}));
    assert_eq!((&popped["message"]["role"], &popped["message"]["content"]), (&json!("tool"), &json!("ra")));
    assert_eq!(popped["revision"], 4);
    let view = s.call("session/history", json!({"session_id": "p"}));
    assert_eq!(view["repaired"], 2, "both calls are open again");
    // One call of two taken out: the rest of the group in its place, in one step.
    let rest = json!({"role": "assistant", "tool_calls": [{"id": "b", "name": "g", "arguments": {}}]});
    let replaced = s.call("session/pop", json!({"session_id": "p", "replace_with": rest}));
    assert_eq!(replaced["message"]["tool_calls"], calls);
    let after = stored(s, "p");
    assert_eq!(after.len(), 2);
    assert_eq!(after[1]["tool_calls"], json!([{"id": "b", "name": "g", "arguments": {}}]));
    s.call("session/add_tool_result", json!({"session_id": "p", "tool_call_id": "b", "content": "rb"}));
    s.fail("session/pop", json!({"session_id": "p", "expected_revision": 1}), 1003);
    let bad = json!({"role": "tool", "tool_call_id": "zz", "content": "?"});
    s.fail("session/pop", json!({"session_id": "p", "replace_with": bad}), 1004);
    assert_eq!(stored(s, "p").len(), 3, "a refused pop changes nothing");
}
