//! initialize, shutdown, exit, end of input, the command line, and the spec staying in
//! step with the server.

use std::collections::BTreeSet;
use std::process::Command;

use crate::harness::{Backend, Framing, Server, Value, json, openrpc};

fn initialize(s: &mut Server) {
    let init = s.call("initialize", json!({"processId": 1, "clientInfo": {"name": "test"}}));
    assert_eq!(init["server_info"]["name"], "convo");
    assert_eq!(init["server_info"]["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(init["protocol_version"], 1);
    let caps = &init["capabilities"];
    let store = match s.backend {
        Backend::Memory => "memory",
        Backend::Sqlite => "sqlite",
        Backend::Postgres => "postgres",
    };
    assert_eq!(caps["store"], store);
    assert_eq!(caps["max_message_bytes"], 64 * 1024 * 1024);
    assert_eq!(caps["framing"], if s.framing == Framing::Lsp { "lsp" } else { "ndjson" });

    // The spec cannot drift: what the server registers is exactly what openrpc.json lists.
    let served: BTreeSet<&str> = caps["methods"].as_array().unwrap().iter().map(|m| m.as_str().unwrap()).collect();
    let documented: BTreeSet<&str> =
        openrpc()["methods"].as_array().unwrap().iter().map(|m| m["name"].as_str().unwrap()).collect();
    assert_eq!(served, documented, "registered methods vs protocol/openrpc.json");
}

fn shutdown_then_exit_is_0(s: &mut Server) {
    s.call("session/create", json!({"session_id": "a"}));
    assert_eq!(s.call("shutdown", json!(null)), json!(null));
    s.fail("session/get", json!({"session_id": "a"}), -32600);
    s.fail("initialize", json!({}), -32600);
    s.notify("exit", json!(null));
    assert_eq!(s.wait().code(), Some(0));
}

fn exit_without_shutdown_is_1(s: &mut Server) {
    s.call("session/create", json!({}));
    s.notify("exit", json!(null));
    assert_eq!(s.wait().code(), Some(1));
}

/// Issue 9, item 10: `exit` inside a batch ends it; nothing after it runs.
#[test]
fn exit_in_a_batch_ends_the_batch() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sessions.db");
    let mut s = Server::on_file(&path, Framing::Ndjson, &[]);
    let create = |id: u64, session: &str| json!({"jsonrpc": "2.0", "id": id, "method": "session/create", "params": {"session_id": session}});
    s.send(&json!([create(1, "before"), {"jsonrpc": "2.0", "method": "exit"}, create(2, "after")]));
    assert_eq!(s.wait().code(), Some(1));
    let mut s = Server::on_file(&path, Framing::Ndjson, &[]);
    s.call("session/get", json!({"session_id": "before"}));
    s.fail("session/get", json!({"session_id": "after"}), 1001);
}

/// End of input: everything in flight is answered, then exit 0.
fn end_of_input_answers_everything(s: &mut Server) {
    s.call("session/create", json!({"session_id": "a"}));
    let ids: Vec<u64> = (0..200)
        .map(|i| s.send_request("session/add_user", json!({"session_id": "a", "text": i.to_string()})))
        .collect();
    s.close_stdin();
    let replies = s.drain();
    let answered: Vec<u64> = replies.iter().map(|r| r["id"].as_u64().unwrap()).collect();
    assert_eq!(answered, ids);
    assert!(replies.iter().all(|r| r.get("result").is_some()));
    assert_eq!(s.wait().code(), Some(0));
}

fn unknown_notifications_are_ignored(s: &mut Server) {
    s.notify("$/cancelRequest", json!({"id": 1}));
    s.notify("textDocument/didOpen", json!({}));
    s.notify("no/such/method", json!([1, 2]));
    s.assert_silent();
    s.call("session/create", json!({}));
}

crate::every_store!(
    initialize,
    shutdown_then_exit_is_0,
    exit_without_shutdown_is_1,
    end_of_input_answers_everything,
    unknown_notifications_are_ignored,
);

fn convo(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_convo")).args(args).output().unwrap()
}

#[test]
fn help_and_version() {
    let help = convo(&["--help"]);
    assert!(help.status.success());
    let text = String::from_utf8(help.stdout).unwrap();
    for flag in ["--store", "--framing", "--max-message-bytes", "--log-level"] {
        assert!(text.contains(flag), "--help lacks {flag}:\n{text}");
    }
    let version = convo(&["--version"]);
    assert_eq!(String::from_utf8(version.stdout).unwrap().trim(), format!("convo {}", env!("CARGO_PKG_VERSION")));
}

#[test]
fn bad_flags_exit_2_with_a_message_on_stderr() {
    for args in
        [&["--store", "nowhere"][..], &["--framing", "xml"], &["--max-message-bytes", "10"], &["--log-level", "[["]]
    {
        let out = convo(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?} wrote to stdout");
        assert!(!out.stderr.is_empty(), "{args:?} said nothing");
    }
}

#[test]
fn logs_go_to_stderr_only() {
    let mut s = Server::with_args(Framing::Ndjson, &["--log-level", "trace"]);
    s.call("session/create", json!({}));
    s.send_raw(b"not json\n");
    s.recv();
    assert_eq!(s.finish().code(), Some(0));
    // The harness parsed stdout strictly as frames; the logs went elsewhere.
    assert!(s.stderr().contains("framing detected"), "stderr: {}", s.stderr());
}

#[test]
fn forced_framing_ignores_the_first_byte() {
    let mut s = Server::with_args(Framing::Lsp, &["--framing", "lsp"]);
    s.send_raw(b"Content-Length: 2\r\n\r\n[]");
    assert_eq!(s.recv()["error"]["code"], -32600);
    let mut s = Server::with_args(Framing::Ndjson, &["--framing", "ndjson"]);
    s.send_raw(b"  \"x\"\n");
    assert_eq!(s.recv()["error"]["code"], -32600);
}

/// Files cannot be polled: stdin as a regular file is read by a thread, and stdout as one
/// is written in place on the runtime's thread; every request is answered.
#[test]
fn stdin_and_stdout_as_files() {
    let dir = std::env::temp_dir().join(format!("convo-files-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out_path = dir.join("out.ndjson");
    let input = std::fs::File::open(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/session.ndjson")).unwrap();
    let status = Command::new(env!("CARGO_BIN_EXE_convo"))
        .args(["--store", "memory"])
        .stdin(input)
        .stdout(std::fs::File::create(&out_path).unwrap())
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(0), "the sample ends with shutdown and exit");
    let out = std::fs::read_to_string(&out_path).unwrap();
    let mut replies: Vec<serde_json::Value> = out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    replies.sort_by_key(|r| r["id"].as_u64());
    let requests = include_str!("../../examples/session.ndjson").lines().filter(|l| l.contains("\"id\"")).count();
    assert_eq!(replies.len(), requests);
    for (i, reply) in replies.iter().enumerate() {
        assert_eq!(reply["id"], i + 1, "one reply per request: {reply}");
    }
    assert_eq!(replies[7]["error"]["code"], 1004, "the late tool result of the sample is refused");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Issue 27: the id of a request still in flight cannot name another: the second is
/// refused with -32600 carrying that id, and the first is answered as if alone.
#[test]
fn an_id_in_flight_is_refused() {
    let mut s = Server::start(Framing::Ndjson);
    s.call("session/create", json!({"session_id": "t"}));
    let run =
        json!({"jsonrpc": "2.0", "id": "dup", "method": "session/run", "params": {"session_id": "t", "input": "hi"}});
    s.send(&run);
    let host = s.recv();
    assert_eq!(host["method"], "runtime/run", "{host}");
    s.send(&json!({"jsonrpc": "2.0", "id": "dup", "method": "session/get", "params": {"session_id": "t"}}));
    let refused = s.recv();
    assert_eq!(refused["id"], "dup");
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    assert!(refused["error"]["message"].as_str().unwrap().contains(r#"the id "dup" is already used"#), "{refused}");
    // In one batch too, and a number id as well.
    let get = |id: Value| json!({"jsonrpc": "2.0", "id": id, "method": "session/get", "params": {"session_id": "t"}});
    s.send(&json!([get(json!(7)), get(json!(7)), get(json!("dup"))]));
    let mut batch = s.recv().as_array().unwrap().clone();
    batch.sort_by_key(|r| r["error"]["code"].as_i64().unwrap_or(0));
    assert_eq!(batch.iter().map(|r| r["error"]["code"].as_i64().unwrap_or(0)).collect::<Vec<_>>(), [-32600, -32600, 0]);
    s.answer(&host["id"], json!({"text": "hello"}));
    let answered = s.recv();
    assert_eq!(answered["id"], "dup");
    assert!(answered.get("result").is_some(), "{answered}");
    // Once answered, the id is free again.
    assert_eq!(s.call("session/get", json!({"session_id": "t"}))["message_count"], 2);
}

/// Issue 27: `shutdown` waits for the turns waiting on the host, so what the host
/// answers after it is still stored; a turn the host never answers ends by its timeout.
#[test]
fn shutdown_waits_for_turns_on_the_host() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sessions.db");
    let mut s = Server::on_file(&path, Framing::Ndjson, &[]);
    s.call("session/create", json!({"session_id": "t"}));
    s.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "session/run", "params": {"session_id": "t", "input": "hi"}}));
    let host = s.recv();
    assert_eq!(host["method"], "runtime/run", "{host}");
    s.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "shutdown"}));
    s.answer(&host["id"], json!({"text": "hello"}));
    // Were shutdown not waiting, its reply would be written before the host answered.
    let (first, second) = (s.recv(), s.recv());
    assert_eq!(
        (&first["id"], &second["id"], &second["result"]),
        (&json!(1), &json!(2), &Value::Null),
        "{first} {second}"
    );
    assert!(first.get("result").is_some(), "{first}");
    s.notify("exit", json!(null));
    assert_eq!(s.wait().code(), Some(0));
    let mut s = Server::on_file(&path, Framing::Ndjson, &[]);
    assert_eq!(s.call("session/get", json!({"session_id": "t"}))["message_count"], 2);

    // A turn the host leaves unanswered holds shutdown only until its timeout.
    s.send(&json!({"jsonrpc": "2.0", "id": 3, "method": "session/run", "params": {"session_id": "t", "input": "again", "timeout_ms": 300}}));
    assert_eq!(s.recv()["method"], "runtime/run");
    s.send(&json!({"jsonrpc": "2.0", "id": 4, "method": "shutdown"}));
    let cancelled = s.recv();
    assert_eq!(cancelled["method"], "$/cancelRequest", "the host is told the turn ended: {cancelled}");
    let (first, second) = (s.recv(), s.recv());
    assert_eq!((&first["id"], &first["error"]["data"]["reason"]), (&json!(3), &json!("timeout")), "{first}");
    assert_eq!((&second["id"], &second["result"]), (&json!(4), &Value::Null));
}

/// Issue 27: a batch's replies are one array no larger than `--max-message-bytes`: the
/// largest replies of requests that only read become 1005 until it fits; a change's
/// reply is kept.
#[test]
fn a_batch_reply_is_bounded_in_total() {
    let mut s = Server::with_args(Framing::Ndjson, &["--max-message-bytes", "3072"]);
    s.call("session/create", json!({"session_id": "b"}));
    for _ in 0..3 {
        s.call("session/add_user", json!({"session_id": "b", "text": "x".repeat(600)}));
    }
    let request =
        |id: &str, method: &str, params: Value| json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    let history = |limit: u64| json!({"session_id": "b", "limit": limit});
    s.send(&json!([
        request("h3", "session/history", history(3)),
        request("add", "session/add_user", json!({"session_id": "b", "text": "y".repeat(1500)})),
        request("h1", "session/history", history(1)),
        request("h2", "session/history", history(2)),
        request("get", "session/get", json!({"session_id": "b"})),
    ]));
    let frame = s.recv();
    assert!(serde_json::to_string(&frame).unwrap().len() <= 3072, "{frame}");
    let replies: std::collections::HashMap<String, Value> =
        frame.as_array().unwrap().iter().map(|r| (r["id"].as_str().unwrap().to_owned(), r.clone())).collect();
    assert_eq!(replies.len(), 5);
    // Each alone fits; together they do not: the two largest reads give way.
    assert_eq!(replies["h3"]["error"]["code"], 1005, "{frame}");
    assert_eq!(replies["h2"]["error"]["code"], 1005, "{frame}");
    assert_eq!(replies["h3"]["error"]["data"], json!({"kind": "too_large", "limit": 3072}));
    assert_eq!(replies["h1"]["result"]["messages"].as_array().unwrap().len(), 1, "{frame}");
    assert_eq!(replies["add"]["result"]["index"], 3, "a change's reply is never given up");
    assert_eq!(replies["get"]["result"]["message_count"], 4);
    // Alone, a read that gave way is answered in full.
    assert_eq!(s.call("session/history", history(3))["messages"].as_array().unwrap().len(), 3);
}

/// Issue 27: after a clean end (shutdown and exit, or the end of input) the database
/// file alone holds every session: the log was moved into it and removed, so copying
/// `sessions.db` is a whole backup. With another process still on the file, the log
/// stays for it, and the file still holds every session.
#[test]
fn a_clean_end_leaves_the_whole_database_in_its_file() {
    for end in ["shutdown", "end of input", "another process"] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sessions.db");
        let other = (end == "another process").then(|| Server::on_file(&path, Framing::Ndjson, &[]));
        let mut s = Server::on_file(&path, Framing::Ndjson, &[]);
        s.call("session/subscribe", json!({}));
        for i in 0..20 {
            let id = format!("s{i}");
            s.call("session/create", json!({"session_id": id}));
            s.call("session/add_user", json!({"session_id": id, "text": "kept ".repeat(100)}));
            s.call("session/history", json!({"session_id": id}));
        }
        if end == "end of input" {
            s.close_stdin();
        } else {
            s.call("shutdown", json!(null));
            s.notify("exit", json!(null));
        }
        assert_eq!(s.wait().code(), Some(0), "{end}");
        let wal = dir.path().join("sessions.db-wal");
        if other.is_none() {
            assert!(!wal.exists(), "{end}: the log is removed");
            assert!(!dir.path().join("sessions.db-shm").exists(), "{end}");
        }
        let copy = tempfile::tempdir().unwrap();
        std::fs::copy(&path, copy.path().join("sessions.db")).unwrap();
        let mut c = Server::on_file(&copy.path().join("sessions.db"), Framing::Ndjson, &[]);
        let listed = c.call("session/list", json!({"limit": 100}));
        assert_eq!(listed["sessions"].as_array().unwrap().len(), 20, "{end}");
        assert!(listed["sessions"].as_array().unwrap().iter().all(|s| s["message_count"] == 1), "{end}");
        drop(other);
    }
}
