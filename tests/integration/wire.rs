//! The wire: ids, pipelining and per-session order, batches, and every kind of bad input.

use crate::harness::{Framing, Server, Value, json};

fn ids_come_back_as_written(s: &mut Server) {
    for id in [json!("abc"), json!(-7), json!(1.5), json!(0), json!("🦀"), json!(u64::MAX)] {
        s.send(&json!({"jsonrpc": "2.0", "id": id, "method": "session/list"}));
        let reply = s.recv();
        assert_eq!(reply["id"], id);
        assert!(reply["result"]["sessions"].is_array());
    }
    s.send(&json!({"jsonrpc": "2.0", "id": null, "method": "session/list"}));
    let reply = s.recv();
    assert_eq!((reply["id"].clone(), reply["result"].is_object()), (Value::Null, true), "a null id is a request");
}

/// 1,000 requests on 4 sessions, all written before any reply is read.
fn pipelined_requests_keep_session_order(s: &mut Server) {
    for n in 0..4 {
        s.call("session/create", json!({"session_id": format!("s{n}")}));
    }
    let mut batch = Vec::new();
    for i in 0..1000 {
        let msg = json!({"jsonrpc": "2.0", "id": 10_000 + i, "method": "session/add_user",
                         "params": {"session_id": format!("s{}", i % 4), "text": i.to_string(), "expected_revision": i / 4}});
        batch.extend(s.framing.encode(msg.to_string().as_bytes()));
    }
    s.send_raw(&batch);
    let mut replies: Vec<Value> = (0..1000).map(|_| s.recv()).collect();
    replies.sort_by_key(|r| r["id"].as_u64());
    for (i, r) in replies.iter().enumerate() {
        assert_eq!(r["id"], 10_000 + i, "{r}");
        // expected_revision held for every one: each ran right after the one before it.
        assert_eq!(r["result"]["revision"], i / 4 + 1, "{r}");
        assert_eq!(r["result"]["index"], i / 4);
    }
    for n in 0..4 {
        let h = s.call("session/history", json!({"session_id": format!("s{n}")}));
        let got: Vec<u64> =
            h["messages"].as_array().unwrap().iter().map(|m| m["content"].as_str().unwrap().parse().unwrap()).collect();
        let want: Vec<u64> = (0..1000).filter(|i| i % 4 == n).collect();
        assert_eq!(got, want);
    }
}

/// A create pipelined with the writes that need it, and a fork with writes to the fork.
fn pipelined_create_and_fork(s: &mut Server) {
    let mut frames = Vec::new();
    let mut push = |v: Value| frames.extend(s.framing.encode(v.to_string().as_bytes()));
    push(json!({"jsonrpc": "2.0", "id": 1, "method": "session/create", "params": {"session_id": "p"}}));
    push(json!({"jsonrpc": "2.0", "id": 2, "method": "session/add_user", "params": {"session_id": "p", "text": "a"}}));
    push(
        json!({"jsonrpc": "2.0", "id": 3, "method": "session/fork", "params": {"session_id": "p", "new_session_id": "f"}}),
    );
    push(json!({"jsonrpc": "2.0", "id": 4, "method": "session/add_user", "params": {"session_id": "f", "text": "b"}}));
    push(json!({"jsonrpc": "2.0", "id": 5, "method": "session/delete", "params": {"session_id": "p"}}));
    s.send_raw(&frames);
    let mut replies: Vec<Value> = (0..5).map(|_| s.recv()).collect();
    replies.sort_by_key(|r| r["id"].as_u64());
    assert!(replies.iter().all(|r| r.get("result").is_some()), "{replies:?}");
    assert_eq!(replies[3]["result"]["index"], 1);
}

fn batch_of_requests_notifications_and_errors(s: &mut Server) {
    s.call("session/create", json!({"session_id": "b"}));
    s.send(&json!([
        {"jsonrpc": "2.0", "id": "one", "method": "session/add_user", "params": {"session_id": "b", "text": "1"}},
        {"jsonrpc": "2.0", "method": "session/add_user", "params": {"session_id": "b", "text": "2 (notification)"}},
        {"jsonrpc": "2.0", "id": "two", "method": "no/such"},
        {"jsonrpc": "2.0", "method": "no/such/notification"},
        {"jsonrpc": "2.0", "id": "three", "method": "session/get", "params": {"session_id": 9}},
        {"id": "four", "method": "session/list"},
        42,
        {"jsonrpc": "2.0", "id": "five", "method": "session/history", "params": {"session_id": "b"}}
    ]));
    let reply = s.recv();
    let replies = reply.as_array().expect("a batch gets an array");
    let by_id =
        |id: Value| replies.iter().find(|r| r["id"] == id).unwrap_or_else(|| panic!("no reply for {id}: {reply}"));
    assert_eq!(replies.len(), 6, "one per request and per invalid element, none for notifications: {reply}");
    assert_eq!(by_id(json!("one"))["result"]["index"], 0);
    assert_eq!(by_id(json!("two"))["error"]["code"], -32601);
    assert_eq!(by_id(json!("three"))["error"]["code"], -32602);
    assert_eq!(by_id(json!("four"))["error"]["code"], -32600);
    assert_eq!(replies.iter().filter(|r| r["id"].is_null()).count(), 1);
    let history = &by_id(json!("five"))["result"]["messages"];
    assert_eq!(history.as_array().unwrap().len(), 2, "the notification ran, in order: {history}");

    s.send(&json!([{"jsonrpc": "2.0", "method": "session/add_user", "params": {"session_id": "b", "text": "3"}}]));
    s.assert_silent();
    s.send(&json!([]));
    assert_eq!(s.recv()["error"]["code"], -32600);
    assert_eq!(s.call("session/get", json!({"session_id": "b"}))["message_count"], 3);
}

/// After each bad input the server answers as the spec says and then goes on serving.
fn still_serving(s: &mut Server) {
    s.call("session/list", json!({}));
}

fn error_of(reply: &Value) -> (i64, Value) {
    (reply["error"]["code"].as_i64().unwrap_or_else(|| panic!("not an error: {reply}")), reply["id"].clone())
}

fn malformed_and_invalid(s: &mut Server) {
    let cases: &[(&[u8], i64, Value)] = &[
        (br#"{"jsonrpc":"2.0","id":1,"method":"#, -32700, Value::Null),
        (b"\xff\xfe\xfd", -32700, Value::Null),
        (
            b"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"session/list\",\"params\":{\"cursor\":\"\xc3\x28\"}}",
            -32700,
            Value::Null,
        ),
        (br#"{"jsonrpc":"2.0","id":3,"method":"session/list"} trailing"#, -32700, Value::Null),
        (br#"{"id":4,"method":"session/list"}"#, -32600, json!(4)),
        (br#"{"jsonrpc":"2.0","id":5,"method":7}"#, -32600, json!(5)),
        (br#"{"jsonrpc":"2.0","id":6,"method":"session/list","params":"x"}"#, -32600, json!(6)),
        (br#"{"jsonrpc":"2.0","id":[7],"method":"session/list"}"#, -32600, Value::Null),
        // Regression (fuzz target dispatch): an id no client could read back is invalid.
        (br#"{"jsonrpc":"2.0","id":17e7778,"method":"session/list"}"#, -32600, Value::Null),
        (br#"{"foo":1}"#, -32600, Value::Null),
        // Issue 9: echoed back, a string id with a lone surrogate could not be read either.
        (br#"{"jsonrpc":"2.0","id":"\ud800","method":"session/list"}"#, -32600, Value::Null),
        (br#"{"jsonrpc":"2.0","id":10,"method":"session/list\udc00"}"#, -32600, json!(10)),
        (br#"{"jsonrpc":"2.0","id":8,"method":"session/list","params":{"limit":"ten"}}"#, -32602, json!(8)),
        (br#"{"jsonrpc":"2.0","id":9,"method":"nope/nope"}"#, -32601, json!(9)),
    ];
    for (bytes, code, id) in cases {
        let frame = s.framing.encode(bytes);
        s.send_raw(&frame);
        let reply = s.recv();
        assert_eq!(error_of(&reply), (*code, id.clone()), "{}", String::from_utf8_lossy(bytes));
        crate::harness::check_error(&reply["error"]);
        still_serving(s);
    }
}

/// Issue 9, item 10: a `\uXXXX` escape of a lone surrogate names no character. Such a
/// string is refused, by a message that says so, wherever it is.
fn lone_surrogates_are_refused_plainly(s: &mut Server) {
    s.call("session/create", json!({"session_id": "u"}));
    let cases: &[(&str, i64, &str)] = &[
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"session/add_user","params":{"session_id":"u","text":"\ud800"}}"#,
            -32602,
            r"invalid params: text: strings must be valid Unicode: \ud800 is a lone surrogate",
        ),
        (
            r#"{"jsonrpc":"2.0","id":2,"method":"session/add_user","params":{"session_id":"u","text":"ok \ud83d\ude00, not \uDC00\u0041"}}"#,
            -32602,
            r"invalid params: text: strings must be valid Unicode: \uDC00 is a lone surrogate",
        ),
        (
            r#"{"jsonrpc":"2.0","id":3,"method":"session/add_messages","params":{"session_id":"u","messages":[{"role":"user","content":"fine"},{"role":"user","metadata":{"k":"\ud800\ud800"}}]}}"#,
            -32602,
            r"invalid params: messages[1].metadata.k: strings must be valid Unicode: \ud800 is a lone surrogate",
        ),
        (
            r#"{"jsonrpc":"2.0","id":4,"method":"session/get\ud800","params":{"session_id":"u"}}"#,
            -32600,
            "invalid request: `method` must be valid Unicode: it holds a lone surrogate escape",
        ),
        (
            r#"{"jsonrpc":"2.0","id":"\ud800","method":"session/get","params":{"session_id":"u"}}"#,
            -32600,
            "invalid request: `id` must be valid Unicode: it holds a lone surrogate escape",
        ),
    ];
    for (frame, code, message) in cases {
        let frame = s.framing.encode(frame.as_bytes());
        s.send_raw(&frame);
        let reply = s.recv();
        assert_eq!((&reply["error"]["code"], &reply["error"]["message"]), (&json!(code), &json!(message)), "{reply}");
    }
    assert_eq!(s.call("session/get", json!({"session_id": "u"}))["message_count"], 0);
}

fn deeply_nested_json(s: &mut Server) {
    let deep = |n: usize| format!("{}1{}", "[".repeat(n), "]".repeat(n));
    let params = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"session/create","params":{{"metadata":{{"x":{}}}}}}}"#,
        deep(200_000)
    );
    s.send_raw(&s.framing.encode(params.as_bytes()));
    assert_eq!(error_of(&s.recv()), (-32602, json!(1)));
    let objects = format!(
        r#"{{"jsonrpc":"2.0","id":2,"method":"session/list","x":{}1{}}}"#,
        r#"{"a":"#.repeat(200_000),
        "}".repeat(200_000)
    );
    s.send_raw(&s.framing.encode(objects.as_bytes()));
    assert!(s.recv()["result"]["sessions"].is_array(), "an unknown deep member is stepped over");
    s.send_raw(&s.framing.encode(deep(200_000).as_bytes()));
    let reply = s.recv();
    assert_eq!(reply[0]["error"]["code"], -32600, "a batch of one non-object");
    // Accepted nesting is kept as given.
    let ok = s.call("session/create", json!({"metadata": {"x": serde_json::from_str::<Value>(&deep(100)).unwrap()}}));
    assert_eq!(ok["metadata"]["x"], serde_json::from_str::<Value>(&deep(100)).unwrap());
}

fn oversized_frames(s: &mut Server) {
    // This server was started with a 4 KiB limit (see the tests below).
    let big =
        json!({"jsonrpc": "2.0", "id": "big", "method": "session/create", "params": {"title": "x".repeat(10_000)}});
    s.send(&big);
    let reply = s.recv();
    assert_eq!(error_of(&reply), (1005, json!("big")));
    assert_eq!(reply["error"]["data"], json!({"kind": "too_large", "size": big.to_string().len(), "limit": 4096}));
    crate::harness::check_error(&reply["error"]);
    // The id sits after the large member: it cannot be read, so the reply's id is null.
    let late_id = format!(
        r#"{{"jsonrpc":"2.0","params":{{"title":"{}"}},"method":"session/create","id":9}}"#,
        "y".repeat(100_000)
    );
    s.send_raw(&s.framing.encode(late_id.as_bytes()));
    assert_eq!(error_of(&s.recv()), (1005, Value::Null));
    s.call("session/create", json!({"title": "x".repeat(3_000)}));
    assert_eq!(
        s.call("session/list", json!({}))["sessions"].as_array().unwrap().len(),
        1,
        "nothing oversized was stored"
    );
}

#[test]
fn oversized_frames_lsp() {
    oversized_frames(&mut Server::with_args(Framing::Lsp, &["--max-message-bytes", "4096"]));
}

#[test]
fn oversized_frames_ndjson() {
    oversized_frames(&mut Server::with_args(Framing::Ndjson, &["--max-message-bytes", "4096"]));
}

fn stdin_closed_mid_frame(s: &mut Server) {
    s.call("session/create", json!({"session_id": "k"}));
    let frame = s
        .framing
        .encode(br#"{"jsonrpc":"2.0","id":2,"method":"session/add_user","params":{"session_id":"k","text":"half"}}"#);
    s.send_raw(&frame[..frame.len() - 20]);
    s.close_stdin();
    let rest = s.drain();
    assert_eq!(s.wait().code(), Some(0));
    // NDJSON reads a last line without its newline; this one is cut, so not JSON.
    if s.framing == Framing::Ndjson {
        assert_eq!(rest.len(), 1);
        assert_eq!(error_of(&rest[0]), (-32700, Value::Null));
    } else {
        assert_eq!(rest, Vec::<Value>::new());
    }
}

crate::every_store!(
    pipelined_requests_keep_session_order,
    pipelined_create_and_fork,
    batch_of_requests_notifications_and_errors
);

crate::both_framings!(
    ids_come_back_as_written,
    malformed_and_invalid,
    lone_surrogates_are_refused_plainly,
    deeply_nested_json,
    stdin_closed_mid_frame,
);

// Header-level faults exist only in LSP framing.

#[test]
fn garbage_headers_then_recovery() {
    let mut s = Server::start(Framing::Lsp);
    s.send_raw(b"Content-Length: 2\r\n\r\n{}");
    assert_eq!(error_of(&s.recv()), (-32600, Value::Null));
    s.send_raw(b"GARBAGE LINE\r\nX-Nonsense: 1\r\n\r\n{\"junk\":true}");
    assert_eq!(error_of(&s.recv()), (-32700, Value::Null));
    still_serving(&mut s);
    s.send_raw(b"Content-Length: abc\r\n\r\n");
    assert_eq!(error_of(&s.recv()), (-32700, Value::Null));
    still_serving(&mut s);
    s.send_raw(b"content-length: 99999999999999999999999\r\n\r\n{}");
    assert_eq!(error_of(&s.recv()), (-32700, Value::Null));
    still_serving(&mut s);
    // Other headers, any case, LF-only line ends: accepted.
    let body = br#"{"jsonrpc":"2.0","id":77,"method":"session/list"}"#;
    let mut frame =
        format!("content-type: application/vscode-jsonrpc; charset=utf8\nCONTENT-LENGTH:{}\n\n", body.len())
            .into_bytes();
    frame.extend_from_slice(body);
    s.send_raw(&frame);
    assert_eq!(s.recv()["id"], 77);
}

#[test]
fn absurd_content_length_reads_to_the_end_and_exits_cleanly() {
    let mut s = Server::start(Framing::Lsp);
    still_serving(&mut s);
    s.send_raw(b"Content-Length: 18446744073709551615\r\n\r\n{\"jsonrpc\":\"2.0\",\"id\":5,");
    s.send_raw(&vec![b' '; 100_000]);
    s.close_stdin();
    assert_eq!(s.drain(), Vec::<Value>::new(), "nothing can be said about a frame that never ended");
    assert_eq!(s.wait().code(), Some(0));
}

#[test]
fn huge_content_length_that_arrives_gets_1005() {
    let mut s = Server::with_args(Framing::Lsp, &["--max-message-bytes", "4096"]);
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":"h","method":"session/list","params":{{"pad":"{}"}}}}"#,
        "z".repeat(1_000_000)
    );
    s.send_raw(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes());
    s.send_raw(body.as_bytes());
    assert_eq!(error_of(&s.recv()), (1005, json!("h")));
    still_serving(&mut s);
}

/// Every bound gives a clear error, and the server goes on.
#[test]
fn resource_bounds() {
    let mut s = Server::start(Framing::Ndjson);
    let batch: Vec<Value> = (0..1025).map(|i| json!({"jsonrpc": "2.0", "id": i, "method": "session/list"})).collect();
    s.send(&Value::Array(batch));
    let reply = s.recv();
    assert_eq!(error_of(&reply), (1005, Value::Null), "{reply}");
    let batch: Vec<Value> = (0..1024).map(|i| json!({"jsonrpc": "2.0", "id": i, "method": "session/list"})).collect();
    s.send(&Value::Array(batch));
    assert_eq!(s.recv().as_array().unwrap().len(), 1024);

    s.call("session/create", json!({"session_id": "big"}));
    let many = |n: usize| (0..n).map(|i| json!({"role": "user", "content": i.to_string()})).collect::<Vec<_>>();
    let e = s.fail("session/add_messages", json!({"session_id": "big", "messages": many(100_001)}), 1005);
    assert!(e["message"].as_str().unwrap().contains("100000"), "{e}");
    s.fail("session/from_dict", json!({"data": {"messages": many(100_001)}}), 1005);
    assert_eq!(s.call("session/get", json!({"session_id": "big"}))["message_count"], 0);

    s.call("session/add_messages", json!({"session_id": "big", "messages": many(100_000)}));
    assert_eq!(
        s.call("session/history", json!({"session_id": "big", "offset": 99_999}))["messages"].as_array().unwrap().len(),
        1
    );
    s.call("session/add_user", json!({"session_id": "big", "text": "one more"}));
    s.fail("session/history", json!({"session_id": "big"}), 1005);
    s.fail("session/to_dict", json!({"session_id": "big"}), 1005);
    s.fail("session/history", json!({"session_id": "big", "limit": 100_001}), -32602);
    let page = s.call("session/history", json!({"session_id": "big", "offset": 100_000, "limit": 100_000}));
    assert_eq!(page["messages"][0]["content"], "one more");
}
