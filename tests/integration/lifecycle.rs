//! initialize, shutdown, exit, end of input, the command line, and the spec staying in
//! step with the server.

use std::collections::BTreeSet;
use std::process::Command;

use crate::harness::{Backend, Framing, Server, json, openrpc};

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

/// Files cannot be polled: stdin and stdout as regular files are served by threads.
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
