//! Lua's empty tables (issue 17): Neovim and most Lua JSON encoders write an empty table
//! as `[]`. So `"params": []` is no params for every method, `[]` where the protocol
//! expects an object is `{}`, and any other array there is still -32602.

use crate::harness::{Server, Value, json};

/// The message fields a test can predict: all but `id` and `created_at`.
fn fields(messages: &Value) -> Vec<Value> {
    let strip = |m: &Value| {
        let mut m = m.as_object().unwrap().clone();
        m.remove("id");
        m.remove("created_at");
        Value::Object(m)
    };
    messages.as_array().unwrap().iter().map(strip).collect()
}

/// A stored message's every field but `id` and `created_at`.
fn message(role: &str, content: Value, more: Value) -> Value {
    let mut m = json!({"role": role, "content": content, "name": null, "tool_call_id": null, "tool_calls": null,
                       "images": null, "metadata": null, "native": null, "usage": null});
    m.as_object_mut().unwrap().extend(more.as_object().unwrap().clone());
    m
}

/// The reply to `initialize` from Neovim's own `vim.lsp.rpc` client, which sends `{}`
/// as `[]`, is the reply to no params; so is `[ ]` with whitespace inside.
fn initialize_reads_an_empty_array_as_no_params(s: &mut Server) {
    let want = s.call("initialize", json!({}));
    assert_eq!(s.call("initialize", json!([])), want);
    assert_eq!(s.call("initialize", json!({"runtime": []})), want);
    let frame = s.framing.encode(br#"{"jsonrpc":"2.0","id":"ws","method":"initialize","params":[ 	 ]}"#);
    s.send_raw(&frame);
    assert_eq!(s.recv(), json!({"jsonrpc": "2.0", "id": "ws", "result": want}));
    assert_eq!(s.call("shutdown", json!([])), Value::Null);
}

/// Every method answers `[]` as it answers `{}`: those that need no member succeed, the
/// others name the member that is missing, never "params must be an object".
fn every_method_reads_an_empty_array_as_no_params(s: &mut Server) {
    let made = s.call("session/create", json!([]));
    assert_eq!((&made["metadata"], &made["message_count"]), (&Value::Null, &json!(0)));
    assert_eq!(s.call("session/list", json!([])), json!({"sessions": [made], "next_cursor": null}));
    let methods = s.call("initialize", json!([]))["capabilities"]["methods"].as_array().unwrap().clone();
    let succeed = ["initialize", "shutdown", "session/create", "session/list", "session/subscribe"];
    let mut checked = 0;
    for method in methods.iter().map(|m| m.as_str().unwrap()).filter(|m| !succeed.contains(m)) {
        let as_object = s.fail(method, json!({}), -32602);
        let as_array = s.fail(method, json!([]), -32602);
        assert_eq!(as_array, as_object, "{method}");
        let text = as_array["message"].as_str().unwrap();
        assert!(text.starts_with("invalid params: missing field `"), "{method}: {text}");
        checked += 1;
    }
    assert_eq!(checked, methods.len() - succeed.len(), "every method but those that succeed: {methods:?}");
    assert!(s.call("session/subscribe", json!([]))["subscription_id"].is_string());
    assert_eq!(s.call("shutdown", json!([])), Value::Null);
}

/// `metadata`, tool-call arguments (in each accepted shape), the `input` of a `tool_use`
/// content part, a whole message: `[]` is stored and returned as `{}`, through every
/// method that takes one.
fn empty_arrays_where_objects_belong_are_stored_as_empty_objects(s: &mut Server) {
    let made = s.call("session/create", json!({"session_id": "l", "title": "t", "metadata": []}));
    assert_eq!((&made["title"], &made["metadata"]), (&json!("t"), &json!({})));
    s.call("session/update", json!({"session_id": "l", "metadata": {"a": 1}}));
    let updated = s.call("session/update", json!({"session_id": "l", "metadata": []}));
    assert_eq!((&updated["metadata"], &updated["revision"]), (&json!({}), &json!(2)));

    s.call("session/add_user", json!({"session_id": "l", "text": "go"}));
    let calls = json!([
        {"id": "a", "name": "ls", "arguments": []},
        {"id": "b", "type": "function", "function": {"name": "cat", "arguments": []}},
        {"id": "c", "name": "pwd", "input": []},
    ]);
    s.call("session/add_assistant", json!({"session_id": "l", "tool_calls": calls}));
    let result = json!({"role": "tool", "tool_call_id": "a", "content": "x", "metadata": []});
    s.call("session/add_message", json!({"session_id": "l", "message": result}));
    let results = json!([
        {"role": "tool", "tool_call_id": "b", "content": [{"type": "text", "text": "y"}], "metadata": []},
        {"role": "tool", "tool_call_id": "c", "content": "z"},
    ]);
    s.call("session/add_messages", json!({"session_id": "l", "messages": results}));
    let parts = json!([{"type": "text", "text": "done"}, {"type": "tool_use", "id": "d", "name": "f", "input": []}]);
    s.call("session/add_message", json!({"session_id": "l", "message": {"role": "assistant", "content": parts}}));

    let history = s.call("session/history", json!({"session_id": "l"}));
    let stored_calls = json!([
        {"id": "a", "name": "ls", "arguments": {}},
        {"id": "b", "type": "function", "function": {"name": "cat", "arguments": {}}},
        {"id": "c", "name": "pwd", "input": {}},
    ]);
    assert_eq!(
        fields(&history["messages"]),
        [
            message("user", json!("go"), json!({})),
            message("assistant", Value::Null, json!({"tool_calls": stored_calls})),
            message("tool", json!("x"), json!({"tool_call_id": "a", "metadata": {}})),
            message("tool", json!([{"type": "text", "text": "y"}]), json!({"tool_call_id": "b", "metadata": {}})),
            message("tool", json!("z"), json!({"tool_call_id": "c"})),
            message(
                "assistant",
                json!([{"type": "text", "text": "done"}, {"type": "tool_use", "id": "d", "name": "f", "input": {}}]),
                json!({})
            ),
        ]
    );
    let exported = s.call("session/export", json!({"session_id": "l", "format": "openai_chat"}));
    let function =
        |id: &str, name: &str| json!({"id": id, "type": "function", "function": {"name": name, "arguments": "{}"}});
    assert_eq!(
        exported["payload"]["messages"][1]["tool_calls"],
        json!([function("a", "ls"), function("b", "cat"), function("c", "pwd")])
    );
}

/// `session/from_dict`: `data`, its `metadata` and its messages' members.
fn an_import_reads_empty_arrays_as_empty_objects(s: &mut Server) {
    let data = json!({"session_id": "d", "system": "s", "metadata": [], "messages": [
        {"role": "user", "content": "hi", "metadata": []},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "t", "name": "f", "arguments": []}]},
        {"role": "tool", "tool_call_id": "t", "content": "ok"},
    ]});
    let imported = s.call("session/from_dict", json!({"data": data}));
    assert_eq!((&imported["metadata"], &imported["message_count"]), (&json!({}), &json!(3)));
    let dict = s.call("session/to_dict", json!({"session_id": "d"}));
    assert_eq!(
        fields(&dict["messages"]),
        [
            message("user", json!("hi"), json!({"metadata": {}})),
            message("assistant", Value::Null, json!({"tool_calls": [{"id": "t", "name": "f", "arguments": {}}]})),
            message("tool", json!("ok"), json!({"tool_call_id": "t"})),
        ]
    );
    let empty = s.call("session/from_dict", json!({"data": []}));
    assert_eq!((&empty["metadata"], &empty["message_count"], &empty["revision"]), (&Value::Null, &json!(0), &json!(0)));
}

/// Any array but `[]` where an object belongs is -32602, naming the member, and stores
/// nothing; by-position params (`[]` aside) too.
fn a_non_empty_array_is_still_invalid_params(s: &mut Server) {
    s.call("session/create", json!({"session_id": "n"}));
    let user = json!({"role": "user", "content": "hi"});
    let cases = [
        ("initialize", json!([{}]), "params must be an object"),
        ("session/get", json!(["n"]), "params must be an object"),
        (
            "initialize",
            json!({"runtime": ["openai_chat"]}),
            "runtime: invalid type: sequence, expected an object ([] is read as {})",
        ),
        (
            "session/create",
            json!({"metadata": [[]]}),
            "metadata: invalid type: sequence, expected an object ([] is read as {})",
        ),
        (
            "session/update",
            json!({"session_id": "n", "metadata": [1]}),
            "metadata: invalid type: sequence, expected an object ([] is read as {})",
        ),
        (
            "session/add_message",
            json!({"session_id": "n", "message": ["user", "hi"]}),
            "message: invalid type: sequence, expected an object ([] is read as {})",
        ),
        ("session/add_message", json!({"session_id": "n", "message": []}), "message: missing field `role`"),
        (
            "session/add_messages",
            json!({"session_id": "n", "messages": [user, ["user", "hi"]]}),
            "messages[1]: invalid type: sequence, expected an object ([] is read as {})",
        ),
        (
            "session/add_messages",
            json!({"session_id": "n", "messages": [{"role": "user", "content": [[]]}]}),
            "messages[0]: content[0]: must be an object with a string `type`",
        ),
        (
            "session/add_messages",
            json!({"session_id": "n", "messages": [{"role": "user", "metadata": ["x"]}]}),
            "messages[0].metadata: invalid type: sequence, expected an object ([] is read as {})",
        ),
        (
            "session/from_dict",
            json!({"data": [{"session_id": "x"}]}),
            "data: invalid type: sequence, expected an object ([] is read as {})",
        ),
        (
            "session/from_dict",
            json!({"data": {"metadata": [0]}}),
            "data.metadata: invalid type: sequence, expected an object ([] is read as {})",
        ),
        (
            "session/run",
            json!({"session_id": "n", "input": "x", "metadata": ["x"]}),
            "metadata: invalid type: sequence, expected an object ([] is read as {})",
        ),
        (
            "session/json",
            json!({"session_id": "n", "input": "x", "schema": [true]}),
            "schema: invalid type: sequence, expected an object ([] is read as {})",
        ),
    ];
    for (method, params, why) in cases {
        let error = s.fail(method, params.clone(), -32602);
        assert_eq!(error["message"], format!("invalid params: {why}"), "{method} {params}");
    }
    let info = s.call("session/get", json!({"session_id": "n"}));
    assert_eq!((&info["revision"], &info["metadata"]), (&json!(0), &Value::Null));
    assert_eq!(s.call("session/list", json!({}))["sessions"].as_array().unwrap().len(), 1, "nothing was created");
}

/// A Lua host's answer: `usage` and tool-call arguments written `[]` are stored and
/// returned as `{}`; a run's `metadata: []` reaches the host as `{}`, a `schema: []`
/// (which accepts anything) as `{}` too.
fn a_lua_host_is_read_as_a_lua_client_is(s: &mut Server) {
    s.call("session/create", json!({"session_id": "h"}));
    let id = s.send_request("session/run", json!({"session_id": "h", "input": "go", "metadata": []}));
    let host = s.host_request(id, "runtime/run");
    assert_eq!(host["params"]["metadata"], json!({}));
    s.answer(
        &host["id"],
        json!({"text": null, "tool_calls": [{"id": "c", "name": "ls", "arguments": []}], "usage": []}),
    );
    let result = s.result_of(id, "session/run");
    assert_eq!(
        (&result["tool_calls"], &result["usage"]),
        (&json!([{"id": "c", "name": "ls", "arguments": {}}]), &json!({}))
    );
    let stored = s.call("session/history", json!({"session_id": "h", "repair": false}));
    assert_eq!(
        fields(&stored["messages"]),
        [
            message("user", json!("go"), json!({"metadata": {}})),
            message("assistant", Value::Null, json!({"tool_calls": result["tool_calls"], "metadata": {"usage": {}}})),
        ]
    );

    s.call("session/add_tool_result", json!({"session_id": "h", "tool_call_id": "c", "content": "a b"}));
    let id = s.send_request("session/json", json!({"session_id": "h", "input": "count", "schema": []}));
    let host = s.host_request(id, "runtime/run");
    assert_eq!(host["params"]["response_format"], json!({"type": "json_schema", "schema": {}}));
    s.answer(&host["id"], json!({"text": "2"}));
    assert_eq!(s.result_of(id, "session/json")["value"], json!(2));
}

crate::both_framings!(
    initialize_reads_an_empty_array_as_no_params,
    every_method_reads_an_empty_array_as_no_params,
    a_non_empty_array_is_still_invalid_params,
    a_lua_host_is_read_as_a_lua_client_is,
);
crate::every_store!(
    empty_arrays_where_objects_belong_are_stored_as_empty_objects,
    an_import_reads_empty_arrays_as_empty_objects
);
