//! Issue 9: memory bounded in bytes, no request stalls the others, threads and file
//! descriptors bounded, client values kept exactly. Resource figures come from /proc;
//! the tests assert bounds and orders, never times.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::harness::{Backend, Framing, Server, Value, json};

/// A number from /proc/PID/status (`VmHWM` in KiB, `Threads`).
fn status(pid: u32, field: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':')?.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).unwrap().count()
}

fn request(id: u64, method: &str, params: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string() + "\n"
}

/// Item 1: 700 requests for a 2,000 x 1 KB history, their replies unread for seconds,
/// used to take the server to 2.9 GB. Now it stops starting requests once the unwritten
/// replies fill the budget, and every reply still arrives once the client reads.
#[test]
fn a_client_that_reads_nothing_meets_back_pressure_not_a_growing_server() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_convo"))
        .args(["--store", "memory"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let messages: Vec<Value> = (0..2000)
        .map(|i| json!({"role": if i % 2 == 0 { "user" } else { "assistant" }, "content": "x".repeat(1000)}))
        .collect();
    stdin.write_all(request(0, "session/create", json!({"session_id": "big"})).as_bytes()).unwrap();
    let add = request(1, "session/add_messages", json!({"session_id": "big", "messages": messages}));
    stdin.write_all(add.as_bytes()).unwrap();
    // From a thread: once the server stops reading, these writes block.
    let writer = std::thread::spawn(move || {
        for id in 2..702 {
            stdin.write_all(request(id, "session/history", json!({"session_id": "big"})).as_bytes()).unwrap();
        }
        stdin
    });
    std::thread::sleep(Duration::from_secs(4));
    let peak_mib = status(child.id(), "VmHWM") / 1024;
    assert!(peak_mib < 600, "peak RSS {peak_mib} MiB with 700 unread replies");

    // Every reply arrives, each a result; those of the reads, which run concurrently, in
    // any order (protocol/README.md: "replies may arrive in any order").
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    let mut answered = std::collections::BTreeSet::new();
    for _ in 0..702 {
        line.clear();
        out.read_line(&mut line).unwrap();
        let id: u64 = line
            .strip_prefix(r#"{"jsonrpc":"2.0","id":"#)
            .and_then(|rest| rest.split_once(r#","result":"#))
            .and_then(|(id, _)| id.parse().ok())
            .unwrap_or_else(|| panic!("not a result: {:.200}", line));
        assert!(answered.insert(id), "reply {id} twice");
        if id == 701 {
            let history: Value = serde_json::from_str(&line).unwrap();
            assert_eq!(history["result"]["messages"].as_array().unwrap().len(), 2000);
        }
    }
    assert_eq!(answered, (0..702).collect());
    drop(writer.join().unwrap());
    assert!(child.wait().unwrap().success());
}

/// Item 1: 40 large `add_user` waiting on a database another process holds locked used
/// to be held in memory all at once. Now reading stops once their bytes fill the budget,
/// and every one is stored once the lock is released.
#[test]
fn large_writes_waiting_on_a_locked_database_stay_within_the_budget() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sessions.db");
    let args = ["--busy-timeout-ms", "60000", "--max-pending-bytes", "33554432"];
    let mut s = Server::on_file(&path, Framing::Ndjson, &args);
    s.call("session/create", json!({"session_id": "w"}));
    let lock = rusqlite::Connection::open(&path).unwrap();
    lock.execute_batch("BEGIN IMMEDIATE").unwrap();
    let mut stdin = s.take_stdin();
    let text = "z".repeat(10 * 1024 * 1024);
    let writer = std::thread::spawn(move || {
        for id in 100..140 {
            let add = request(id, "session/add_user", json!({"session_id": "w", "text": text}));
            stdin.write_all(add.as_bytes()).unwrap();
        }
        stdin
    });
    std::thread::sleep(Duration::from_secs(3));
    let peak_mib = status(s.pid(), "VmHWM") / 1024;
    assert!(peak_mib < 200, "peak RSS {peak_mib} MiB with 400 MB of writes waiting on a lock");
    lock.execute_batch("ROLLBACK").unwrap();
    for _ in 100..140 {
        assert!(s.recv().get("result").is_some());
    }
    drop(writer.join().unwrap());
    let mut other = Server::on_file(&path, Framing::Ndjson, &[]);
    assert_eq!(other.call("session/get", json!({"session_id": "w"}))["message_count"], 40);
}

/// Item 1: a reply over --max-message-bytes is refused with 1005 and a hint to page,
/// instead of a frame the client would refuse.
fn a_reply_over_the_limit_is_refused_with_a_hint(s: &mut Server) {
    s.call("session/create", json!({"session_id": "big"}));
    for _ in 0..3 {
        s.call("session/add_user", json!({"session_id": "big", "text": "y".repeat(400_000)}));
    }
    for method in ["session/history", "session/to_dict", "session/export"] {
        let error = s.fail(method, json!({"session_id": "big", "format": "openai_chat"}), 1005);
        assert!(error["message"].as_str().unwrap().contains("offset and limit"), "{error}");
        assert_eq!(error["data"], json!({"kind": "too_large", "limit": 1_000_000}));
    }
    let page = s.call("session/history", json!({"session_id": "big", "offset": 1, "limit": 2}));
    assert_eq!(page["messages"].as_array().unwrap().len(), 2);
}

#[test]
fn replies_over_the_limit() {
    for backend in [Backend::Memory, Backend::Sqlite] {
        a_reply_over_the_limit_is_refused_with_a_hint(&mut Server::on(
            backend,
            Framing::Lsp,
            &["--max-message-bytes", "1000000"],
        ));
    }
}

/// Item 2: token counting runs off the thread that reads and writes frames, so a
/// request on another session is answered while it runs.
fn counting_tokens_does_not_stall_other_sessions(s: &mut Server) {
    s.call("session/create", json!({"session_id": "heavy"}));
    s.call("session/create", json!({"session_id": "light"}));
    let text = "lorem ipsum dolor sit amet, consectetur adipiscing elit ".repeat(2 * 1024 * 1024 / 57);
    s.call("session/add_user", json!({"session_id": "heavy", "text": text}));
    for method in ["session/count_tokens", "session/trim"] {
        let heavy = s.send_request(method, json!({"session_id": "heavy", "max_tokens": 1_000_000_000}));
        let light = s.send_request("session/get", json!({"session_id": "light"}));
        assert_eq!(s.recv()["id"], light, "{method}: the other session is answered first");
        let counted = s.recv();
        assert_eq!(counted["id"], heavy);
        assert!(counted["result"]["tokens"].as_u64().unwrap() > 100_000, "{counted:.300}");
    }
}

/// Item 3: 1,000 concurrent reads on 1,000 sessions used to leave 514 threads and 1,035
/// file descriptors. Reads now run on a pool with a fixed ceiling.
#[test]
fn threads_and_descriptors_stay_bounded_under_concurrent_reads() {
    let mut s = Server::on(Backend::Sqlite, Framing::Ndjson, &[]);
    let pid = s.pid();
    for i in 0..1000 {
        s.send_request("session/create", json!({"session_id": format!("s{i}")}));
    }
    for _ in 0..1000 {
        assert!(s.recv().get("result").is_some());
    }
    for round in 0..2 {
        for i in 0..1000 {
            s.send_request("session/history", json!({"session_id": format!("s{i}")}));
        }
        for _ in 0..1000 {
            let reply = s.recv();
            assert!(reply.get("result").is_some(), "round {round}: {reply}");
        }
        // The runtime's threads, at most 32 blocking ones, the database writer; stdio,
        // the runtime's, the writer's and at most 8 readers' files.
        let (threads, fds) = (status(pid, "Threads"), open_fds(pid));
        assert!(threads <= 40, "round {round}: {threads} threads");
        assert!(fds <= 48, "round {round}: {fds} descriptors");
    }
}

/// Item 9: numbers of any size and precision, and the order of object members, come
/// back as given, in metadata, tool-call arguments and content parts.
fn client_values_come_back_exactly(s: &mut Server) {
    let exact = r#"{"z":1,"a":123456789012345678901234567890,"m":18446744073709551616,"d":0.10000000000000000555111512312578270211815834045410156250,"n":-1.5e-400,"nested":{"y":[3,2,1],"b":true}}"#;
    s.call("session/create", json!({"session_id": "x"}));
    let frame = format!(
        r#"{{"jsonrpc":"2.0","id":"exact","method":"session/add_messages","params":{{"session_id":"x","messages":[
            {{"role":"user","content":[{{"type":"text","text":"hi","extra":{exact}}}],"metadata":{exact}}},
            {{"role":"assistant","content":null,"tool_calls":[{{"id":"c1","name":"f","arguments":{exact}}}]}}]}}}}"#
    );
    s.send_raw(&s.framing.encode(frame.replace('\n', "").as_bytes()));
    assert!(s.recv().get("result").is_some());
    let history = s.call("session/history", json!({"session_id": "x", "repair": false}));
    let [user, assistant] = &history["messages"].as_array().unwrap()[..] else { panic!("{history}") };
    assert_eq!(user["metadata"].to_string(), exact);
    assert_eq!(user["content"][0]["extra"].to_string(), exact);
    assert_eq!(assistant["tool_calls"][0]["arguments"].to_string(), exact);
    let dict = s.call("session/to_dict", json!({"session_id": "x"}));
    assert_eq!(dict["messages"][0]["metadata"].to_string(), exact);
    let info =
        s.call("session/update", json!({"session_id": "x", "metadata": serde_json::from_str::<Value>(exact).unwrap()}));
    assert_eq!(info["metadata"].to_string(), exact);
    assert_eq!(s.call("session/get", json!({"session_id": "x"}))["metadata"].to_string(), exact);
}

crate::every_store!(counting_tokens_does_not_stall_other_sessions, client_values_come_back_exactly);
