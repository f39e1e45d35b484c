//! The database stores on their own: restarts, crashes, two processes on one file (or
//! one PostgreSQL database), opening failures, reclaiming what nothing reaches, and
//! where data lives.

use std::collections::{HashMap, HashSet};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use rusqlite::Connection;

use crate::harness::{Backend, Framing, Place, Server, Value, json};

fn db(dir: &tempfile::TempDir) -> PathBuf {
    dir.path().join("sessions.db")
}

fn count(path: &Path, sql: &str) -> i64 {
    Connection::open(path).unwrap().query_row(sql, [], |r| r.get(0)).unwrap()
}

fn integrity(path: &Path) -> String {
    Connection::open(path).unwrap().query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap()
}

/// SQLite's own integrity check of a file; PostgreSQL's transactions need none here.
fn sound(place: &Place) -> String {
    match place {
        Place::File(path) => integrity(path),
        Place::Postgres { .. } => "ok".into(),
    }
}

fn contents(s: &mut Server, session: &str) -> Vec<String> {
    let h = s.call("session/history", json!({"session_id": session, "repair": false}));
    h["messages"].as_array().unwrap().iter().map(|m| m["content"].as_str().unwrap_or("").to_owned()).collect()
}

#[test]
fn sessions_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Server::on_file(&db(&dir), Framing::Ndjson, &[]);
    s.call("session/create", json!({"session_id": "keep", "system": "sys", "metadata": {"a": [1]}}));
    s.call("session/add_user", json!({"session_id": "keep", "text": "one", "images": ["aGVsbG8="]}));
    s.call(
        "session/add_assistant",
        json!({"session_id": "keep", "tool_calls": [{"id": "c", "name": "f", "arguments": {}}]}),
    );
    let before = s.call("session/to_dict", json!({"session_id": "keep"}));
    let info = s.call("session/get", json!({"session_id": "keep"}));
    assert_eq!(s.finish().code(), Some(0));

    let mut again = Server::on_file(&db(&dir), Framing::Lsp, &[]);
    assert_eq!(again.call("session/to_dict", json!({"session_id": "keep"})), before);
    assert_eq!(again.call("session/get", json!({"session_id": "keep"})), info);
    // The call left running before the restart can still be answered.
    again.call(
        "session/add_tool_result",
        json!({"session_id": "keep", "tool_call_id": "c", "content": "late but fine"}),
    );
    assert_eq!(integrity(&db(&dir)), "ok");
}

/// A convo under a pipelined write load is killed (SIGKILL) at random moments, 30
/// times. After each restart every acknowledged write is there, the database is sound,
/// every unacknowledged `add_messages` is there whole or not at all, and search agrees
/// exactly with the histories (every stored message of the round found, nothing else).
#[test]
fn acknowledged_writes_survive_sigkill() {
    acknowledged_writes_survive_sigkill_on(Backend::Sqlite);
}

#[test]
fn acknowledged_writes_survive_sigkill_postgres() {
    acknowledged_writes_survive_sigkill_on(Backend::Postgres);
}

fn acknowledged_writes_survive_sigkill_on(backend: Backend) {
    let Some((path, _dir)) = Place::fresh(backend) else { return };
    let path = named_connections(path);
    let mut setup = Server::at(&path, Framing::Ndjson, &[]);
    for n in 0..4 {
        setup.call("session/create", json!({"session_id": format!("s{n}")}));
    }
    setup.finish();
    let mut acked: Vec<String> = Vec::new();
    let mut unacked = 0;
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
    for round in 0..30 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let mut s = Server::at(&path, Framing::Ndjson, &[]);
        let mut frames = Vec::new();
        let mut sent: HashMap<u64, Vec<String>> = HashMap::new();
        for i in 0..3000u64 {
            let session = format!("s{}", i % 4);
            let id = 1_000_000 * round + i;
            let (msg, texts) = if i % 3 == 0 {
                let tag = format!("r{round}-b{i}");
                let texts = vec![format!("{tag}-u"), format!("{tag}-a"), format!("{tag}-t")];
                let call = format!("{tag}-call");
                let params = json!({"session_id": session, "messages": [
                    {"role": "user", "content": texts[0]},
                    {"role": "assistant", "content": texts[1], "tool_calls": [{"id": call, "name": "f", "arguments": {}}]},
                    {"role": "tool", "tool_call_id": call, "content": texts[2]},
                ]});
                (json!({"jsonrpc": "2.0", "id": id, "method": "session/add_messages", "params": params}), texts)
            } else {
                let text = format!("r{round}-m{i}");
                let params = json!({"session_id": session, "text": text});
                (json!({"jsonrpc": "2.0", "id": id, "method": "session/add_user", "params": params}), vec![text])
            };
            frames.extend(Framing::Ndjson.encode(msg.to_string().as_bytes()));
            sent.insert(id, texts);
        }
        // Write from a thread while acknowledgements are read here; after a random
        // while, kill without warning, mid-stream. The clock starts once the store is
        // open (an answered `initialize`), so a slow start on a loaded machine (PostgreSQL
        // connecting) does not eat the round.
        s.call("initialize", json!({}));
        let mut stdin = s.take_stdin();
        let writer = std::thread::spawn(move || {
            let _ = std::io::Write::write_all(&mut stdin, &frames);
        });
        // PostgreSQL takes longer to start (connect, check the schema, LISTEN) and to
        // commit: a longer window, so that kills still come mid-stream after real work;
        // and at least two acknowledgements a round, however slow the machine's commits
        // are, so that the check below always has writes to check.
        let window = if backend == Backend::Postgres { 150 + seed % 400 } else { 5 + seed % 120 };
        let deadline = Instant::now() + Duration::from_millis(window);
        let mut this_round = 0;
        loop {
            let wait = match deadline.checked_duration_since(Instant::now()) {
                Some(wait) => wait,
                None if this_round < 2 => Duration::from_secs(10),
                None => break,
            };
            let Some(reply) = s.recv_within(wait) else { break };
            assert!(reply.get("result").is_some(), "{reply}");
            acked.extend(sent.remove(&reply["id"].as_u64().unwrap()).unwrap());
            this_round += 1;
        }
        s.kill();
        writer.join().unwrap();
        unacked += sent.len();
        settle(&path);

        assert_eq!(sound(&path), "ok", "round {round}");
        if let Place::File(file) = &path {
            let conn = Connection::open(file).unwrap();
            conn.execute("INSERT INTO message_words (message_words) VALUES ('integrity-check')", []).unwrap();
        }
        let mut check = Server::at(&path, Framing::Ndjson, &[]);
        let mut stored: HashMap<String, usize> = HashMap::new();
        let mut of_round = HashSet::new();
        for n in 0..4 {
            let session = format!("s{n}");
            for (index, text) in contents(&mut check, &session).into_iter().enumerate() {
                if text.starts_with(&format!("r{round}-")) {
                    of_round.insert((session.clone(), index as u64));
                }
                *stored.entry(text).or_default() += 1;
            }
        }
        assert_eq!(found_by_search(&mut check, &format!("r{round}")), of_round, "round {round}: search");
        for text in &acked {
            assert_eq!(stored.get(text), Some(&1), "round {round}: acknowledged {text:?} is not there exactly once");
        }
        for texts in sent.values().filter(|t| t.len() == 3) {
            let present = texts.iter().filter(|t| stored.contains_key(*t)).count();
            assert!(present == 0 || present == 3, "round {round}: a batch is half there: {texts:?}");
        }
        check.finish();
    }
    assert!(acked.len() > 30, "the workload was acknowledged at all ({} writes)", acked.len());
    assert!(unacked > 30, "kills came mid-stream ({unacked} requests unanswered)");
    eprintln!("{backend:?}: {} writes acknowledged over 30 kills, {unacked} unanswered, 0 lost", acked.len());
}

/// A PostgreSQL place whose connections carry the schema's name as their
/// `application_name`, so that `settle` can tell them from other tests' connections.
fn named_connections(place: Place) -> Place {
    match place {
        Place::Postgres { url, schema } => {
            let join = if url.contains('?') { '&' } else { '?' };
            Place::Postgres { url: format!("{url}{join}application_name={schema}"), schema }
        }
        file => file,
    }
}

/// Waits until no server connection of a killed convo is busy. Its backend still runs
/// what had reached it before the kill, so a `COMMIT` in flight can land after the
/// process is gone: a write that was never acknowledged, which may be kept or not, but
/// must not land between the check's history reads and its search. (Behind a pooler the
/// server connections outlive the client, idle.)
fn settle(place: &Place) {
    let Place::Postgres { schema, .. } = place else { return };
    let direct = crate::harness::postgres_direct_url().unwrap();
    let sql = format!(
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = '{schema}' AND pid <> pg_backend_pid() \
         AND state IS DISTINCT FROM 'idle'"
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    while crate::postgres::psql(&direct, &sql) != "0" {
        assert!(Instant::now() < deadline, "the killed convo's PostgreSQL connections did not end");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Every (session, index) `session/search` finds for `query`, all pages.
fn found_by_search(s: &mut Server, query: &str) -> HashSet<(String, u64)> {
    let mut found = HashSet::new();
    let mut cursor = Value::Null;
    loop {
        let mut params = json!({"query": query, "limit": 200});
        if !cursor.is_null() {
            params["cursor"] = cursor;
        }
        let page = s.call("session/search", params);
        for hit in page["hits"].as_array().unwrap() {
            let place = (hit["session_id"].as_str().unwrap().to_owned(), hit["index"].as_u64().unwrap());
            assert!(found.insert(place), "{query}: a hit twice");
        }
        cursor = page["next_cursor"].clone();
        if cursor.is_null() {
            return found;
        }
    }
}

/// Two processes append to the same sessions at once: no write is lost or doubled,
/// each process's writes keep its order, and a stale revision is refused.
#[test]
fn two_processes_share_one_file() {
    two_processes_share_one_store(Backend::Sqlite);
}

#[test]
fn two_processes_share_one_postgres_database() {
    two_processes_share_one_store(Backend::Postgres);
}

fn two_processes_share_one_store(backend: Backend) {
    let Some((path, _dir)) = Place::fresh(backend) else { return };
    let mut a = Server::at(&path, Framing::Ndjson, &[]);
    let mut b = Server::at(&path, Framing::Lsp, &[]);
    a.call("session/create", json!({"session_id": "shared-0"}));
    b.call("session/create", json!({"session_id": "shared-1"}));
    let batch = |s: &Server, who: &str| {
        let mut frames = Vec::new();
        for i in 0..300 {
            let params = json!({"session_id": format!("shared-{}", i % 2), "text": format!("{who}-{i}")});
            let msg = json!({"jsonrpc": "2.0", "id": 100 + i, "method": "session/add_user", "params": params});
            frames.extend(s.framing.encode(msg.to_string().as_bytes()));
        }
        frames
    };
    let (fa, fb) = (batch(&a, "a"), batch(&b, "b"));
    a.send_raw(&fa);
    b.send_raw(&fb);
    let mut acks = Vec::new();
    for s in [&mut a, &mut b] {
        for _ in 0..300 {
            let r = s.recv();
            assert!(r.get("result").is_some(), "{r}");
            acks.push(r["result"].clone());
        }
    }
    for n in 0..2 {
        let session = format!("shared-{n}");
        let h = a.call("session/history", json!({"session_id": session}));
        let msgs = h["messages"].as_array().unwrap();
        assert_eq!(msgs.len(), 300);
        assert_eq!(h["revision"], 300, "one revision per write, none lost");
        let texts: Vec<&str> = msgs.iter().map(|m| m["content"].as_str().unwrap()).collect();
        assert_eq!(texts.iter().collect::<HashSet<_>>().len(), 300, "no write doubled");
        for who in ["a", "b"] {
            let own: Vec<usize> =
                texts.iter().filter_map(|t| t.strip_prefix(&format!("{who}-"))).map(|i| i.parse().unwrap()).collect();
            assert!(own.windows(2).all(|w| w[0] < w[1]), "{who}'s writes keep their order");
        }
        // Every acknowledged index is where that message is.
        let ids: HashMap<&str, usize> = msgs.iter().enumerate().map(|(i, m)| (m["id"].as_str().unwrap(), i)).collect();
        for ack in acks.iter().filter(|ack| ids.contains_key(ack["message_id"].as_str().unwrap())) {
            assert_eq!(ids[ack["message_id"].as_str().unwrap()], ack["index"].as_u64().unwrap() as usize);
        }
    }
    let rev = a.call("session/get", json!({"session_id": "shared-0"}))["revision"].as_u64().unwrap();
    b.call("session/add_user", json!({"session_id": "shared-0", "text": "b moves first", "expected_revision": rev}));
    let stale =
        a.fail("session/add_user", json!({"session_id": "shared-0", "text": "stale", "expected_revision": rev}), 1003);
    assert_eq!(stale["data"]["current_revision"], rev + 1);
    assert_eq!(sound(&path), "ok");
}

#[test]
fn a_held_lock_is_1006_and_then_passes() {
    let dir = tempfile::tempdir().unwrap();
    let path = db(&dir);
    let mut s = Server::on_file(&path, Framing::Ndjson, &["--busy-timeout-ms", "200"]);
    s.call("session/create", json!({"session_id": "l"}));
    let other = Connection::open(&path).unwrap();
    other.execute_batch("BEGIN EXCLUSIVE").unwrap();
    let e = s.fail("session/add_user", json!({"session_id": "l", "text": "blocked"}), 1006);
    assert_eq!(e["data"]["kind"], "storage_unavailable");
    other.execute_batch("COMMIT").unwrap();
    s.call("session/add_user", json!({"session_id": "l", "text": "now"}));
    assert_eq!(contents(&mut s, "l"), ["now"], "the refused write left nothing");
}

#[test]
fn forks_keep_their_rows_and_the_rest_is_reclaimed() {
    let dir = tempfile::tempdir().unwrap();
    let path = db(&dir);
    let mut s = Server::on_file(&path, Framing::Ndjson, &[]);
    let png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";
    s.call("session/create", json!({"session_id": "p"}));
    let mut ids = Vec::new();
    for i in 0..10 {
        let r = s.call("session/add_user", json!({"session_id": "p", "text": i.to_string(), "images": [png]}));
        ids.push(r["message_id"].as_str().unwrap().to_owned());
    }
    assert_eq!(count(&path, "SELECT count(*) FROM blobs"), 1, "one image, stored once");
    s.call("session/fork", json!({"session_id": "p", "new_session_id": "f", "at_message_id": ids[4]}));
    s.call("session/fork", json!({"session_id": "f", "new_session_id": "g"}));
    assert_eq!(count(&path, "SELECT count(*) FROM messages"), 10, "forks copy no rows");
    s.call("session/add_user", json!({"session_id": "f", "text": "f only"}));

    s.call("session/delete", json!({"session_id": "p"}));
    assert_eq!(count(&path, "SELECT count(*) FROM messages"), 6, "the parent's rows past the fork point are gone");
    assert_eq!(contents(&mut s, "f"), ["0", "1", "2", "3", "4", "f only"]);
    assert_eq!(contents(&mut s, "g"), ["0", "1", "2", "3", "4"]);

    s.call("session/trim", json!({"session_id": "g", "max_turns": 2}));
    assert_eq!(contents(&mut s, "g"), ["3", "4"]);
    assert_eq!(contents(&mut s, "f").len(), 6, "a fork's trim does not touch the other");
    s.call("session/delete", json!({"session_id": "f"}));
    assert_eq!(count(&path, "SELECT count(*) FROM messages"), 2, "only what g still sees");
    s.call("session/clear", json!({"session_id": "g"}));
    assert_eq!(count(&path, "SELECT count(*) FROM messages"), 0);
    assert_eq!(count(&path, "SELECT count(*) FROM blobs"), 0);
    s.call("session/delete", json!({"session_id": "g"}));
    assert_eq!(count(&path, "SELECT count(*) FROM segments"), 0, "nothing left that nothing reaches");
    assert_eq!(integrity(&path), "ok");
}

fn convo(args: &[&str], env: &[(&str, &Path)]) -> std::process::Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_convo"));
    cmd.args(args).stdin(std::process::Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

#[test]
fn default_location_and_permissions() {
    let home = tempfile::tempdir().unwrap();
    let data = home.path().join("data");
    let out = convo(&[], &[("HOME", home.path()), ("XDG_DATA_HOME", &data)]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let file = data.join("convo").join("sessions.db");
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&data.join("convo")), 0o700);
    assert_eq!(mode(&file), 0o600);
}

#[test]
fn unusable_stores_fail_at_start_with_a_clear_message() {
    let dir = tempfile::tempdir().unwrap();
    let garbage = dir.path().join("garbage.db");
    std::fs::write(&garbage, b"this is not a database, not even close; ".repeat(200)).unwrap();
    let newer = dir.path().join("newer.db");
    Connection::open(&newer).unwrap().execute_batch("CREATE TABLE x(y); PRAGMA user_version = 99;").unwrap();
    let foreign = dir.path().join("foreign.db");
    Connection::open(&foreign).unwrap().execute_batch("CREATE TABLE someone_elses(y);").unwrap();
    let blocker = dir.path().join("file");
    std::fs::write(&blocker, b"").unwrap();
    let cases: [(PathBuf, &str); 4] = [
        (garbage.clone(), "not a usable database"),
        (newer.clone(), "newer convo"),
        (foreign.clone(), "not convo's"),
        (blocker.join("under-a-file.db"), "cannot create"),
    ];
    for (path, says) in cases {
        let before = std::fs::read(&path).ok().map(|b| {
            (b.len(), {
                use std::hash::{Hash, Hasher};
                let mut h = std::collections::hash_map::DefaultHasher::new();
                b.hash(&mut h);
                h.finish()
            })
        });
        let out = convo(&["--store", &format!("sqlite:{}", path.display())], &[]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{}: {stderr}", path.display());
        assert!(stderr.contains(says), "{}: {stderr}", path.display());
        assert!(out.stdout.is_empty());
        let after = std::fs::read(&path).ok().map(|b| {
            (b.len(), {
                use std::hash::{Hash, Hasher};
                let mut h = std::collections::hash_map::DefaultHasher::new();
                b.hash(&mut h);
                h.finish()
            })
        });
        assert_eq!(after, before, "{} was modified", path.display());
        assert!(!path.with_extension("db-wal").exists(), "{} got a log", path.display());
    }
}

#[test]
fn full_durability_serves_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Server::on_file(&db(&dir), Framing::Lsp, &["--durability", "full"]);
    s.call("session/create", json!({"session_id": "f"}));
    s.call("session/add_user", json!({"session_id": "f", "text": "x"}));
    assert_eq!(contents(&mut s, "f"), ["x"]);
    assert_eq!(s.call("shutdown", Value::Null), Value::Null);
    drop(s);
    let mut again = Server::on_file(&db(&dir), Framing::Lsp, &["--durability", "full"]);
    assert_eq!(contents(&mut again, "f"), ["x"]);
}

/// Processes starting at once on a fresh file: one creates the schema, none fails.
#[test]
fn simultaneous_starts_on_a_fresh_file() {
    for _ in 0..10 {
        let dir = tempfile::tempdir().unwrap();
        let mut servers: Vec<Server> = (0..4).map(|_| Server::on_file(&db(&dir), Framing::Ndjson, &[])).collect();
        for (i, s) in servers.iter_mut().enumerate() {
            s.call("session/create", json!({"session_id": format!("s{i}")}));
        }
        let listed = servers[0].call("session/list", json!({}));
        assert_eq!(listed["sessions"].as_array().unwrap().len(), 4);
    }
}
