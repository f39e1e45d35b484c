//! The PostgreSQL store on its own (issue 13): a restart of the server itself under
//! load, credentials never shown, schemas created, refused when newer or foreign, and
//! keeping applications apart. The store contract, the crash test and the two-process
//! tests run on PostgreSQL with the others (`every_store!`, durable.rs, watch.rs).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::harness::{Framing, Place, Server, fresh_schema, json, postgres_url};

/// Runs SQL through psql (installed with the server) and returns what it printed.
pub fn psql(url: &str, sql: &str) -> String {
    let out = Command::new("psql").args([url, "-XAtq", "-v", "ON_ERROR_STOP=1", "-c", sql]).output().expect("psql");
    assert!(out.status.success(), "psql {sql}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// A `psql` running `sql` as application `name`, ended (its backend terminated) when
/// the test ends, whether it passes or not.
pub struct Holder {
    child: std::process::Child,
    url: String,
    name: String,
}

impl Holder {
    pub fn start(url: &str, name: &str, sql: &str) -> Holder {
        let child = Command::new("psql")
            .env("PGAPPNAME", name)
            .args([url, "-XAtq", "-c", sql])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("psql");
        Holder { child, url: url.to_owned(), name: name.to_owned() }
    }

    /// Terminates its backend; how many there were.
    pub fn end(&self) -> u32 {
        let end = format!(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = '{}'",
            self.name
        );
        psql(&self.url, &end).parse().unwrap()
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.end()));
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What each PostgreSQL migration from version 2 on added: `UNDO[i]` takes the schema
/// from version `i + 2` back to `i + 1`; `{s}` is the schema.
const UNDO: &[&str] = &[
    "DROP INDEX {s}.blobs_by_ref; ALTER TABLE {s}.blobs DROP COLUMN ref, DROP COLUMN media_type, DROP COLUMN bytes",
    "ALTER TABLE {s}.messages DROP COLUMN words",
    "ALTER TABLE {s}.messages DROP COLUMN native, DROP COLUMN usage; ALTER TABLE {s}.sessions DROP COLUMN usage",
    "ALTER TABLE {s}.segments DROP COLUMN owner; ALTER TABLE {s}.messages DROP COLUMN revision",
    "DROP TABLE {s}.changes",
    "DROP INDEX {s}.changes_by_session",
];

/// The schema version convo writes (`meta.version`).
pub const SCHEMA_VERSION: usize = UNDO.len() + 1;

/// Takes a schema convo wrote back to `version` exactly, as an older convo left it.
pub fn back_to_version(url: &str, schema: &str, version: usize) {
    for undo in UNDO[version - 1..].iter().rev() {
        psql(url, &undo.replace("{s}", schema));
    }
    psql(url, &format!("UPDATE {schema}.meta SET version = {version}"));
}

fn convo(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_convo")).args(args).stdin(std::process::Stdio::null()).output().unwrap()
}

/// The URL with another password in it.
fn with_password(url: &str, password: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap();
    let (userinfo, host) = rest.split_once('@').unwrap();
    let user = userinfo.split(':').next().unwrap();
    format!("{scheme}://{user}:{password}@{host}")
}

#[test]
fn the_password_is_never_shown() {
    let Some(url) = postgres_url() else { return };
    let secret = "hunter2-not-the-password";
    let out = convo(&["--store", &with_password(&url, secret), "--log-level", "trace"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    // PostgreSQL's words, or PgBouncer's in front of it.
    let refused = ["password authentication failed", "SASL authentication failed"];
    assert!(refused.iter().any(|r| stderr.contains(r)), "{stderr}");
    assert!(stderr.contains(":***@"), "the URL is shown masked: {stderr}");
    assert!(!stderr.contains(secret), "{stderr}");

    let real = url.split_once("://").unwrap().1.split_once('@').unwrap().0.split_once(':').unwrap().1.to_owned();
    let mut s = Server::at(
        &Place::Postgres { url: url.clone(), schema: fresh_schema() },
        Framing::Ndjson,
        &["--log-level", "trace"],
    );
    let init = s.call("initialize", json!({}));
    assert_eq!(init["capabilities"]["store"], "postgres");
    assert!(!init.to_string().contains(&real));
    s.finish();
    assert!(!s.stderr().contains(&real), "the password is in a log line");
}

#[test]
fn a_schema_is_created_migrated_and_refused_when_newer() {
    let Some(url) = postgres_url() else { return };
    let schema = fresh_schema();
    let place = Place::Postgres { url: url.clone(), schema: schema.clone() };
    let mut s = Server::at(&place, Framing::Ndjson, &[]);
    s.call("session/create", json!({"session_id": "kept"}));
    s.finish();
    assert_eq!(psql(&url, &format!("SELECT version FROM {schema}.meta")), SCHEMA_VERSION.to_string());
    assert_eq!(psql(&url, &format!("SELECT session_id FROM {schema}.sessions")), "kept");

    psql(&url, &format!("UPDATE {schema}.meta SET version = 99"));
    let out = convo(&["--store", &url, "--pg-schema", &schema]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr.contains("newer convo (schema version 99"), "{stderr}");
    assert_eq!(psql(&url, &format!("SELECT version FROM {schema}.meta")), "99", "left untouched");

    let foreign = fresh_schema();
    psql(&url, &format!("CREATE SCHEMA {foreign}; CREATE TABLE {foreign}.theirs (x int)"));
    let out = convo(&["--store", &url, "--pg-schema", &foreign]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr.contains("not convo's"), "{stderr}");
    assert_eq!(psql(&url, &format!("SELECT count(*) FROM pg_tables WHERE schemaname = '{foreign}'")), "1");

    let out = convo(&["--store", &url, "--pg-schema", "Robert'); DROP TABLE x;--"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("invalid schema name"));
}

#[test]
fn schemas_keep_applications_apart() {
    let Some(url) = postgres_url() else { return };
    let mut a = Server::at(&Place::Postgres { url: url.clone(), schema: fresh_schema() }, Framing::Ndjson, &[]);
    let mut b = Server::at(&Place::Postgres { url: url.clone(), schema: fresh_schema() }, Framing::Ndjson, &[]);
    a.call("session/create", json!({"session_id": "same-id"}));
    b.call("session/create", json!({"session_id": "same-id", "title": "b's own"}));
    assert_eq!(a.call("session/get", json!({"session_id": "same-id"}))["title"], json!(null));
    assert_eq!(b.call("session/list", json!({}))["sessions"].as_array().unwrap().len(), 1);
}

/// CONVO_STORE names the store when --store is not given.
#[test]
fn convo_store_names_the_store() {
    let Some(url) = postgres_url() else { return };
    let schema = fresh_schema();
    let mut child = Command::new(env!("CARGO_BIN_EXE_convo"))
        .env("CONVO_STORE", &url)
        .env("CONVO_PG_SCHEMA", &schema)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write as _;
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{}}}}"#).unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains(r#""store":"postgres""#));
    assert_eq!(psql(&url, &format!("SELECT version FROM {schema}.meta")), SCHEMA_VERSION.to_string());
}

/// How a test's own server is reached.
#[derive(Clone, Copy, PartialEq)]
pub enum Front {
    /// Over TLS only (`PGSSL=1`).
    Tls,
    /// Through PgBouncer in transaction mode (`PGBOUNCER=1`).
    Bouncer,
}

/// Runs `bash scripts/postgres VERB DIR` (with `PGSSL=1` or `PGBOUNCER=1` as `front`
/// says) and returns what it printed; a failure fails the test.
pub fn postgres_script(verb: &str, dir: &Path, front: Front) -> String {
    script_with(verb, dir, Some(front))
}

/// As `postgres_script`; `None`: the server alone, over plain TCP.
fn script_with(verb: &str, dir: &Path, front: Option<Front>) -> String {
    let mut command = Command::new("bash");
    command
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/postgres"))
        .arg(verb)
        .arg(dir)
        .env_remove("PGSSL")
        .env_remove("PGBOUNCER");
    if let Some(front) = front {
        command.env(if front == Front::Tls { "PGSSL" } else { "PGBOUNCER" }, "1");
    }
    let out = command.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "scripts/postgres {verb} {}: {stderr}", dir.display());
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// A PostgreSQL server of a test's own: scripts/postgres starts a fresh cluster in a
/// folder of its own, on a free port. The folder is made under the run's folder
/// (`CONVO_RUN_DIR`, which scripts/test sets and removes at its end), else the system's
/// temporary folder. Dropped, it stops the server of that folder, and only it, then
/// removes the folder.
pub struct OwnPostgres {
    pub url: String,
    pub dir: tempfile::TempDir,
}

impl OwnPostgres {
    pub fn start(front: Front) -> OwnPostgres {
        let base = std::env::var_os("CONVO_RUN_DIR").map_or_else(std::env::temp_dir, PathBuf::from);
        let dir = tempfile::Builder::new().prefix("postgres-").tempdir_in(&base).unwrap();
        // A start that fails stops what it began; the folder goes with `dir`.
        let url = postgres_script("start", dir.path(), front);
        OwnPostgres { url, dir }
    }

    /// The server alone, over plain TCP.
    pub fn start_plain() -> OwnPostgres {
        let base = std::env::var_os("CONVO_RUN_DIR").map_or_else(std::env::temp_dir, PathBuf::from);
        let dir = tempfile::Builder::new().prefix("postgres-").tempdir_in(&base).unwrap();
        let url = script_with("start", dir.path(), None);
        OwnPostgres { url, dir }
    }
}

impl Drop for OwnPostgres {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/postgres"))
            .arg("stop")
            .arg(self.dir.path())
            .output();
    }
}

/// PostgreSQL itself restarts, behind PgBouncer in transaction mode, while convo writes
/// 64 appends at a time, each with a `message_id`: the requests in flight get 1006 (a
/// COMMIT among them may have landed), convo connects again by itself, and the host
/// sends each failed write again, the same. Every write is then there exactly once: none
/// lost, none doubled. Runs on a server of its own (scripts/postgres in a folder of its
/// own, on ports of its own), so that the restart does not disturb the other tests.
///
/// A restart that falls between two transactions fails no request (PgBouncer holds the
/// next ones until the server is back), and under a busy machine's load that happened in
/// CI five restarts running. So the restart waits until a write is surely in flight: a
/// session of the test's own holds an EXCLUSIVE lock on the messages table, and the
/// server restarts once some write waits on that lock.
#[test]
fn a_restart_of_postgres_mid_load_loses_nothing_and_doubles_nothing() {
    if postgres_url().is_none() {
        return;
    }
    let postgres = OwnPostgres::start(Front::Bouncer);
    let dir = postgres.dir.path().to_owned();
    let direct = std::fs::read_to_string(dir.join("direct-url")).unwrap().trim().to_owned();
    let place = Place::Postgres { url: postgres.url.clone(), schema: "convo".into() };
    // A write waits for the holder until the restart ends it, not until its lock
    // timeout (5 s by default) would fail it first.
    let mut s = Server::at(&place, Framing::Ndjson, &["--busy-timeout-ms", "120000"]);
    for n in 0..4 {
        s.call("session/create", json!({"session_id": format!("s{n}")}));
    }
    // The restart comes after a second of writes, from another thread; writes go on
    // until 200 succeed after it and none is left to send again.
    let restart = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(1));
        let holder = Holder::start(
            &direct,
            "lock-holder",
            "BEGIN; LOCK TABLE convo.messages IN EXCLUSIVE MODE; SELECT pg_sleep(600)",
        );
        // convo's statement, waiting for the holder (so never the holder's own `LOCK`,
        // which waits while convo's transactions hold the table): not an autovacuum
        // worker's, nor one of convo's writers waiting for another's row lock, which the
        // other's commit soon frees (the restart could then come between two batches).
        let waiting = "SELECT string_agg(a.query, '; ') FROM pg_stat_activity a \
            WHERE a.wait_event_type = 'Lock' AND a.backend_type = 'client backend' \
            AND EXISTS (SELECT 1 FROM pg_stat_activity h \
            WHERE h.application_name = 'lock-holder' AND h.pid = ANY(pg_blocking_pids(a.pid)))";
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut waited = String::new();
        while waited.is_empty() {
            assert!(Instant::now() < deadline, "no write waited on the table lock");
            std::thread::sleep(Duration::from_millis(10));
            waited = psql(&direct, waiting);
        }
        postgres_script("restart", &dir, Front::Bouncer);
        drop(holder);
        waited
    });
    let started = Instant::now();
    let (mut next, mut after_restart, mut failed, mut duplicates) = (0u64, 0, 0, 0);
    let mut again: Vec<u64> = Vec::new();
    let mut acked: Vec<u64> = Vec::new();
    while after_restart < 200 || !again.is_empty() {
        assert!(started.elapsed() < Duration::from_secs(120), "convo did not recover after the restart");
        let restarted = restart.is_finished();
        let mut writes = std::mem::take(&mut again);
        while writes.len() < 64 {
            next += 1;
            writes.push(next);
        }
        let sent: Vec<(u64, u64)> = writes
            .iter()
            .map(|&w| {
                let params = json!({
                    "session_id": format!("s{}", w % 4),
                    "text": format!("w{w}"),
                    "message_id": format!("00000000-0000-4000-8000-{w:012x}"),
                });
                (s.send_request("session/add_user", params), w)
            })
            .collect();
        for (id, w) in sent {
            let reply = s.recv_reply(id);
            match (reply.get("result"), reply["error"]["code"].as_i64()) {
                (Some(result), _) => {
                    acked.push(w);
                    duplicates += usize::from(result["duplicate"] == true);
                    after_restart += usize::from(restarted);
                }
                (None, Some(1006)) => {
                    failed += 1;
                    again.push(w);
                }
                _ => panic!("neither a result nor 1006: {reply}"),
            }
        }
        if !again.is_empty() && !restarted {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    let waited = restart.join().unwrap();
    assert!(failed > 0, "the restart came while requests were in flight; waiting on the lock: {waited}");
    let mut stored: HashMap<String, usize> = HashMap::new();
    for n in 0..4 {
        let h = s.call("session/history", json!({"session_id": format!("s{n}"), "repair": false}));
        for m in h["messages"].as_array().unwrap() {
            *stored.entry(m["content"].as_str().unwrap().to_owned()).or_default() += 1;
        }
    }
    assert_eq!(acked.len() as u64, next, "every write was acknowledged in the end");
    let wrong: Vec<_> = (1..=next).filter(|w| stored.get(&format!("w{w}")) != Some(&1)).collect();
    assert_eq!(wrong, Vec::<u64>::new(), "writes missing or doubled");
    assert_eq!(stored.len() as u64, next);
    eprintln!(
        "PostgreSQL restart behind PgBouncer: {next} writes, {failed} sent again after 1006 \
         ({duplicates} of them had landed already), lost 0, doubled 0"
    );
    s.finish();
}

/// `convo fsck` checks a PostgreSQL schema as it checks a file: sound, then damaged.
#[test]
fn fsck_checks_a_postgres_schema() {
    let Some(url) = postgres_url() else { return };
    let schema = fresh_schema();
    let mut s = Server::at(&Place::Postgres { url: url.clone(), schema: schema.clone() }, Framing::Ndjson, &[]);
    s.call("session/create", json!({"session_id": "demo"}));
    for text in ["one", "two", "three"] {
        s.call("session/add_user", json!({"session_id": "demo", "text": text}));
    }
    s.call("session/fork", json!({"session_id": "demo", "new_session_id": "copy"}));
    s.finish();
    let fsck = || convo(&["fsck", "--json", "--store", &url, "--pg-schema", &schema]);
    let sound = fsck();
    assert_eq!(sound.status.code(), Some(0), "{}", String::from_utf8_lossy(&sound.stderr));
    let report: serde_json::Value = serde_json::from_slice(&sound.stdout).unwrap();
    assert_eq!(report, json!({"findings": []}));

    psql(&url, &format!("INSERT INTO {schema}.segments (parent, base) VALUES (NULL, 0)"));
    psql(
        &url,
        &format!(
            "DELETE FROM {schema}.messages WHERE seq = 1 AND segment = \
             (SELECT segment FROM {schema}.sessions WHERE session_id = 'demo')"
        ),
    );
    let damaged = fsck();
    assert_eq!(damaged.status.code(), Some(1));
    let report: serde_json::Value = serde_json::from_slice(&damaged.stdout).unwrap();
    let findings: Vec<String> = serde_json::from_value(report["findings"].clone()).unwrap();
    assert!(findings.iter().any(|f| f.contains("is used by no session")), "{findings:?}");
    assert!(findings.iter().any(|f| f.starts_with("session \"demo\": positions 0..3")), "{findings:?}");
}

/// TLS through rustls: `sslmode=require` encrypts (the server here accepts nothing
/// else), `verify-full` checks the certificate against `sslrootcert` or the system's
/// roots (which do not know this server's CA), `disable` is refused by this server.
#[test]
fn tls_with_require_and_verify_full() {
    if postgres_url().is_none() {
        return;
    }
    let postgres = OwnPostgres::start(Front::Tls);
    let url = &postgres.url;
    let ca = postgres.dir.path().join("ca.crt");
    let create = |query: &str| {
        let mut child = Command::new(env!("CARGO_BIN_EXE_convo"))
            .args(["--store", &format!("{url}?{query}")])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write as _;
        let mut stdin = child.stdin.take().unwrap();
        writeln!(stdin, r#"{{"jsonrpc":"2.0","id":1,"method":"session/create","params":{{"session_id":"tls"}}}}"#)
            .unwrap();
        drop(stdin);
        let out = child.wait_with_output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, stdout, stderr) = create("sslmode=require");
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains(r#""session_id":"tls""#), "{stdout}");
    let (code, stdout, stderr) = create(&format!("sslmode=verify-full&sslrootcert={}", ca.display()));
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains("session already exists"), "the same database, over TLS again: {stdout}");
    let (code, _, stderr) = create("sslmode=verify-full");
    assert_eq!(code, Some(1));
    assert!(stderr.contains("TLS handshake") && stderr.contains("UnknownIssuer"), "{stderr}");
    let (code, _, stderr) = create("sslmode=disable");
    assert_eq!(code, Some(1));
    assert!(stderr.contains("no encryption"), "{stderr}");
}

/// Two processes create the same ids at once: each id is created once, the other
/// process is told 1002, and no session is overwritten.
#[test]
fn two_processes_creating_one_id_cannot_both_succeed() {
    let Some(url) = postgres_url() else { return };
    let place = Place::Postgres { url, schema: fresh_schema() };
    let mut servers = [Server::at(&place, Framing::Ndjson, &[]), Server::at(&place, Framing::Ndjson, &[])];
    let ids: Vec<Vec<u64>> = servers
        .iter_mut()
        .enumerate()
        .map(|(k, s)| {
            (0..100)
                .map(|i| {
                    s.send_request("session/create", json!({"session_id": format!("dup-{i}"), "title": format!("{k}")}))
                })
                .collect()
        })
        .collect();
    let mut winners = vec![Vec::new(); 100];
    for (k, s) in servers.iter_mut().enumerate() {
        for (i, id) in ids[k].iter().enumerate() {
            let reply = s.recv_reply(*id);
            match reply["error"]["code"].as_i64() {
                None => winners[i].push(k.to_string()),
                Some(code) => assert_eq!(code, 1002, "{reply}"),
            }
        }
    }
    for (i, won) in winners.iter().enumerate() {
        assert_eq!(won.len(), 1, "dup-{i} created by {won:?}");
        let title = servers[0].call("session/get", json!({"session_id": format!("dup-{i}")}))["title"].clone();
        assert_eq!(title, json!(won[0]), "dup-{i} holds the winner's session");
    }
}

/// A writer keeps what its appends left of a session (its chain and tail) for its next
/// transaction, and uses it only while the session's row is as it left it: here another
/// process answers the tool call, appends, and trims between this one's appends, and
/// each append of this one starts from what the other did.
#[test]
fn a_writer_sees_what_another_process_did_between_its_appends() {
    let Some(url) = postgres_url() else { return };
    let place = Place::Postgres { url, schema: fresh_schema() };
    let (mut one, mut two) = (Server::at(&place, Framing::Ndjson, &[]), Server::at(&place, Framing::Ndjson, &[]));
    one.call("session/create", json!({"session_id": "t"}));
    let calls = |id: &str| json!([{"id": id, "type": "function", "function": {"name": "f", "arguments": "{}"}}]);
    let pipelined = |s: &mut Server, requests: Vec<(&str, serde_json::Value)>| -> Vec<serde_json::Value> {
        let ids: Vec<u64> = requests.into_iter().map(|(method, params)| s.send_request(method, params)).collect();
        ids.into_iter().map(|id| s.recv_reply(id)).collect()
    };
    let index = |reply: &serde_json::Value| reply["result"]["index"].as_u64().unwrap_or_else(|| panic!("{reply}"));

    let first = pipelined(
        &mut one,
        vec![
            ("session/add_user", json!({"session_id": "t", "text": "u1"})),
            ("session/add_assistant", json!({"session_id": "t", "tool_calls": calls("c1")})),
        ],
    );
    assert_eq!(first.iter().map(index).collect::<Vec<_>>(), [0, 1]);
    // The other process answers the call: this one must not take it as waiting.
    let answered =
        two.call("session/add_tool_result", json!({"session_id": "t", "tool_call_id": "c1", "content": "1"}));
    assert_eq!(answered["index"], 2);
    let second = pipelined(
        &mut one,
        vec![
            ("session/add_tool_result", json!({"session_id": "t", "tool_call_id": "c1", "content": "again"})),
            ("session/add_user", json!({"session_id": "t", "text": "u2"})),
            ("session/add_assistant", json!({"session_id": "t", "tool_calls": calls("c2")})),
        ],
    );
    assert_eq!(second[0]["error"]["code"], 1004, "{}", second[0]);
    assert_eq!(second[1..].iter().map(index).collect::<Vec<_>>(), [3, 4]);
    // The other trims, then appends: positions and the tail both moved.
    two.call("session/add_tool_result", json!({"session_id": "t", "tool_call_id": "c2", "content": "2"}));
    two.call("session/trim", json!({"session_id": "t", "max_turns": 1}));
    two.call("session/add_user", json!({"session_id": "t", "text": "u3"}));
    let third = pipelined(
        &mut one,
        vec![
            ("session/add_assistant", json!({"session_id": "t", "text": "a3"})),
            ("session/add_user", json!({"session_id": "t", "text": "u4"})),
        ],
    );
    let history = one.call("session/history", json!({"session_id": "t", "repair": false}));
    let roles: Vec<String> = history["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| format!("{}:{}", m["role"].as_str().unwrap(), m["content"].as_str().unwrap_or("-")))
        .collect();
    assert_eq!(roles, ["user:u2", "assistant:-", "tool:2", "user:u3", "assistant:a3", "user:u4"]);
    assert_eq!(third.iter().map(index).collect::<Vec<_>>(), [4, 5]);
    assert_eq!(two.call("session/get", json!({"session_id": "t"}))["revision"], history["revision"]);
}

/// psql, fed statements one at a time: a transaction the test holds open.
pub struct Psql {
    child: std::process::Child,
    input: std::process::ChildStdin,
    output: std::io::BufReader<std::process::ChildStdout>,
}

impl Psql {
    pub fn start(url: &str) -> Psql {
        let mut child = Command::new("psql")
            .args([url, "-XAtq", "-v", "ON_ERROR_STOP=1"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("psql");
        let (input, output) = (child.stdin.take().unwrap(), child.stdout.take().unwrap());
        Psql { child, input, output: std::io::BufReader::new(output) }
    }

    pub fn send(&mut self, sql: &str) {
        use std::io::Write as _;
        writeln!(self.input, "{sql}").and_then(|()| self.input.flush()).expect("psql's input");
    }

    /// The next line psql prints.
    pub fn line(&mut self) -> String {
        use std::io::BufRead as _;
        let mut line = String::new();
        self.output.read_line(&mut line).expect("psql's output");
        line.trim_end().to_owned()
    }

    /// Ends its input; whether every statement succeeded.
    pub fn finish(self) -> bool {
        let Psql { mut child, input, .. } = self;
        drop(input);
        child.wait().expect("psql").success()
    }
}

/// A write group that loses a deadlock to another transaction, one that waits for a row
/// the group locked for an earlier write, commits what it did before that write and runs
/// the write again in a transaction of its own: both go on. (Run again in the same
/// transaction, the write only waited for that transaction again, lost again, and failed
/// once its retries ran out.)
///
/// PostgreSQL looks for a deadlock once per wait, a second after it began, and the one
/// that finds it is refused; so that it is convo's writer:
/// 1. `holder` locks session `c`'s row, and `other` session `b`'s.
/// 2. One batch appends to `a`, `c` and `b`: one group, on convo's one writer
///    (`pool_max=2`). Its write to `a` locks `a`'s row; the one to `c` waits for `holder`.
/// 3. `other` asks for `a`'s row and waits for the group; its look, a second later, finds
///    no deadlock (the group waits for `holder`, which waits for nothing).
/// 4. `holder` commits: the group's write to `b` waits for `other`, and the group's
///    look finds the deadlock.
#[test]
fn a_write_group_that_loses_a_deadlock_commits_what_it_did_first() {
    let Some(url) = postgres_url() else { return };
    let direct = crate::harness::postgres_direct_url().unwrap();
    let schema = fresh_schema();
    let one_writer = format!("{url}{}pool_max=2", if url.contains('?') { '&' } else { '?' });
    let mut s = Server::at(&Place::Postgres { url: one_writer, schema: schema.clone() }, Framing::Ndjson, &[]);
    for id in ["a", "b", "c"] {
        s.call("session/create", json!({"session_id": id}));
    }
    let waiting = || {
        let sql = format!(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%{schema}.%'"
        );
        psql(&direct, &sql).parse::<usize>().unwrap()
    };
    let wait_for = |n: usize, what: &str| {
        let deadline = Instant::now() + Duration::from_secs(60);
        while waiting() < n {
            assert!(Instant::now() < deadline, "{what}");
            std::thread::sleep(Duration::from_millis(10));
        }
    };
    let lock = |psql: &mut Psql, id: &str| {
        psql.send(&format!("SELECT 'locked {id}' FROM {schema}.sessions WHERE session_id = '{id}' FOR UPDATE;"));
    };
    let (mut holder, mut other) = (Psql::start(&direct), Psql::start(&direct));
    for (psql, id) in [(&mut holder, "c"), (&mut other, "b")] {
        psql.send("BEGIN;");
        lock(psql, id);
        assert_eq!(psql.line(), format!("locked {id}"));
    }

    let add = |id: u64, session: &str| {
        let params = json!({"session_id": session, "text": format!("to {session}")});
        json!({"jsonrpc": "2.0", "id": id, "method": "session/add_user", "params": params})
    };
    let batch = json!([add(1, "a"), add(2, "c"), add(3, "b")]);
    s.send_raw(&Framing::Ndjson.encode(batch.to_string().as_bytes()));
    wait_for(1, "the write to `c` never waited for `holder`");
    // Then commits, as soon as it has `a`.
    lock(&mut other, "a");
    other.send("COMMIT;");
    wait_for(2, "`other` never waited for the group");
    // `other`'s one look for a deadlock, a second into its wait, finds none.
    std::thread::sleep(Duration::from_secs(3));
    holder.send("COMMIT;");

    let replies = s.recv();
    let replies = replies.as_array().expect("the batch's replies");
    assert_eq!(replies.len(), 3);
    for reply in replies {
        assert!(reply.get("result").is_some(), "{reply}");
    }
    assert_eq!(other.line(), "locked a", "`other` got `a` once the group's first writes committed");
    assert!(other.finish(), "`other` committed");
    assert!(holder.finish());
    for session in ["a", "b", "c"] {
        let h = s.call("session/history", json!({"session_id": session}));
        assert_eq!(h["messages"].as_array().unwrap().len(), 1, "{h}");
        assert_eq!(h["messages"][0]["content"], format!("to {session}"));
    }
    s.finish();
}
