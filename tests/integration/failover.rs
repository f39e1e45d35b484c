//! Issue 46, PostgreSQL's half: a primary and a standby of the test's own (scripts/postgres
//! `start`, `standby`, `kill`, `promote`, each in a folder of its own, on free ports),
//! convo on a URL naming both (`target_session_attrs=read-write`). The primary is killed
//! (SIGKILL, its machine lost) and the standby promoted: with a synchronous standby no
//! acknowledged write is lost and none doubled; a write refused by a standby (25006)
//! closes its connection; a subscriber across a failover to an asynchronous standby that
//! lost commits is told of every change committed on the new primary, and LISTENs there.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::harness::{Framing, Place, Server, json, postgres_url};
use crate::postgres::psql;

/// Runs `bash scripts/postgres ARGS…` and returns what it printed; a failure fails the
/// test.
fn script(args: &[&Path]) -> String {
    let out = Command::new("bash")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/postgres"))
        .args(args)
        .env_remove("PGSSL")
        .env_remove("PGBOUNCER")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "scripts/postgres {args:?}: {stderr}");
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// A primary and its standby, in folders under the run's folder (`CONVO_RUN_DIR`), else
/// the system's temporary folder; dropped, both are stopped (by their folders) and the
/// folders removed.
struct Pair {
    dir: tempfile::TempDir,
    primary: String,
    standby: String,
}

impl Pair {
    /// `None` where PostgreSQL tests are skipped (said loudly; in CI they fail instead).
    fn start(mode: &str) -> Option<Pair> {
        postgres_url()?;
        let base = std::env::var_os("CONVO_RUN_DIR").map_or_else(std::env::temp_dir, PathBuf::from);
        let dir = tempfile::Builder::new().prefix("failover-").tempdir_in(&base).unwrap();
        let primary = script(&[Path::new("start"), &dir.path().join("p")]);
        let mut pair = Pair { dir, primary, standby: String::new() };
        pair.standby = script(&[Path::new("standby"), &pair.path("p"), &pair.path("s"), Path::new(mode)]);
        Some(pair)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn port(&self, name: &str) -> String {
        std::fs::read_to_string(self.path(name).join("port")).unwrap().trim().to_owned()
    }

    /// The URL naming both servers, the primary first, for writes; `extra` more parameters.
    fn both(&self, extra: &str) -> String {
        format!(
            "postgres://convo:convo-test@127.0.0.1:{},127.0.0.1:{}/convo_test?target_session_attrs=read-write{extra}",
            self.port("p"),
            self.port("s")
        )
    }

    /// The primary dies (SIGKILL) and, `pause` later (as a failover manager takes its
    /// time to decide), the standby is promoted; returns once it takes writes.
    fn fail_over(&self, pause: Duration) -> Instant {
        script(&[Path::new("kill"), &self.path("p")]);
        std::thread::sleep(pause);
        script(&[Path::new("promote"), &self.path("s")]);
        Instant::now()
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        for name in ["s", "p"] {
            let _ = Command::new("bash")
                .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/postgres"))
                .arg("stop")
                .arg(self.path(name))
                .output();
        }
    }
}

/// The `message_id` of write `w` of process `p`.
fn message_id(p: usize, w: u64) -> String {
    format!("00000000-0000-4000-8000-{p:04x}{w:08x}")
}

/// What one writing process did: acknowledged writes, 1006 answers (each sent again),
/// answers that said the write had landed already, and when its first write after the
/// promotion was acknowledged.
#[derive(Default)]
struct Tally {
    acked: Vec<u64>,
    failed: usize,
    duplicates: usize,
    first_after: Option<Duration>,
}

/// Writes 8 appends at a time, each with a `message_id`, sending each refused one again,
/// until 50 were acknowledged after the promotion and none is left to send again.
fn write_through(s: &mut Server, p: usize, promoted: &Mutex<Option<Instant>>) -> Tally {
    let started = Instant::now();
    let mut tally = Tally::default();
    let (mut next, mut after, mut again) = (0u64, 0, Vec::new());
    while after < 50 || !again.is_empty() {
        assert!(started.elapsed() < Duration::from_secs(180), "process {p} did not recover after the promotion");
        let promoted_at = *promoted.lock().unwrap();
        let mut writes: Vec<u64> = std::mem::take(&mut again);
        while writes.len() < 8 {
            next += 1;
            writes.push(next);
        }
        let sent: Vec<(u64, u64)> = writes
            .iter()
            .map(|&w| {
                let params = json!({"session_id": format!("p{p}"), "text": format!("p{p} w{w}"), "message_id": message_id(p, w)});
                (s.send_request("session/add_user", params), w)
            })
            .collect();
        for (id, w) in sent {
            let reply = s.recv_reply(id);
            match (reply.get("result"), reply["error"]["code"].as_i64()) {
                (Some(result), _) => {
                    tally.acked.push(w);
                    tally.duplicates += usize::from(result["duplicate"] == true);
                    if let Some(at) = promoted_at {
                        after += 1;
                        tally.first_after.get_or_insert_with(|| at.elapsed());
                    }
                }
                (None, Some(1006)) => {
                    tally.failed += 1;
                    again.push(w);
                }
                _ => panic!("neither a result nor 1006: {reply}"),
            }
        }
        if !again.is_empty() {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    tally
}

/// The primary is killed mid-load under eight processes, each appending with
/// `message_id`s and sending again every write answered with 1006, and its synchronous
/// standby promoted: on the new primary every acknowledged write is there exactly once.
#[test]
fn a_synchronous_standby_promoted_after_the_primary_dies_has_every_write_once() {
    let Some(pair) = Pair::start("sync") else { return };
    const PROCESSES: usize = 8;
    let url = pair.both("");
    let place = Place::Postgres { url: url.clone(), schema: "convo".into() };
    let promoted: Arc<Mutex<Option<Instant>>> = Arc::default();
    let acked_before: Arc<Mutex<usize>> = Arc::default();
    let writers: Vec<_> = (0..PROCESSES)
        .map(|p| {
            let (place, promoted, acked_before) = (place.clone(), promoted.clone(), acked_before.clone());
            std::thread::spawn(move || {
                let mut s = Server::at(&place, Framing::Ndjson, &[]);
                s.call("session/create", json!({"session_id": format!("p{p}")}));
                *acked_before.lock().unwrap() += 1;
                let tally = write_through(&mut s, p, &promoted);
                s.finish();
                tally
            })
        })
        .collect();
    // Every process writes before the primary dies.
    let deadline = Instant::now() + Duration::from_secs(60);
    while *acked_before.lock().unwrap() < PROCESSES {
        assert!(Instant::now() < deadline, "the processes did not start writing");
        std::thread::sleep(Duration::from_millis(10));
    }
    let stored_before: usize = psql(&pair.primary, "SELECT count(*) FROM convo.messages").parse().unwrap();
    let at = pair.fail_over(Duration::from_secs(1));
    *promoted.lock().unwrap() = Some(at);
    let tallies: Vec<Tally> = writers.into_iter().map(|w| w.join().unwrap()).collect();

    let rows = psql(
        &pair.standby,
        "SELECT s.session_id || ' ' || (m.content::jsonb #>> '{}') FROM convo.messages m JOIN convo.sessions s ON s.segment = m.segment",
    );
    let mut stored: HashMap<String, usize> = HashMap::new();
    for line in rows.lines() {
        *stored.entry(line.to_owned()).or_default() += 1;
    }
    let (mut acked, mut lost, mut doubled) = (0, 0, 0);
    for (p, tally) in tallies.iter().enumerate() {
        for w in &tally.acked {
            acked += 1;
            match stored.get(&format!("p{p} p{p} w{w}")).copied().unwrap_or_default() {
                0 => lost += 1,
                1 => {}
                _ => doubled += 1,
            }
        }
    }
    let firsts: Vec<f64> = tallies.iter().map(|t| t.first_after.unwrap().as_secs_f64()).collect();
    let (failed, duplicates): (usize, usize) =
        tallies.iter().fold((0, 0), |(f, d), t| (f + t.failed, d + t.duplicates));
    eprintln!(
        "failover to a synchronous standby: {PROCESSES} processes, {acked} appends acknowledged \
         ({stored_before} stored before the kill), {failed} answered 1006 and sent again \
         ({duplicates} of those had landed), lost {lost}, doubled {doubled}; the standby promoted 1 s \
         after the kill; seconds from the promotion to each process's first acknowledged write: {}",
        firsts.iter().map(|f| format!("{f:.2}")).collect::<Vec<_>>().join(" ")
    );
    assert_eq!((lost, doubled), (0, 0), "appends lost or doubled on the new primary");
    assert_eq!(stored.len(), acked, "nothing is stored that was not acknowledged");
    assert!(failed > 0, "some writes were refused while no server took writes");
}

/// The backend process ids of the connections named `name` on the server at `url`.
fn backends(url: &str, name: &str) -> Vec<String> {
    let sql = format!("SELECT pid FROM pg_stat_activity WHERE application_name = '{name}' ORDER BY pid");
    psql(url, &sql).lines().map(str::to_owned).collect()
}

/// Waits until `test` holds of the backends named `name` at `url`; returns them.
fn backends_until(url: &str, name: &str, test: impl Fn(&[String]) -> bool) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let found = backends(url, name);
        if test(&found) {
            return found;
        }
        assert!(Instant::now() < deadline, "the backends of {name} stayed {found:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A convo on the standby alone (one connection: `pool_max=1`) answers reads; a write is
/// 1006 in PostgreSQL's words (25006), and its connection is closed, not used again: the
/// next request is served by a new backend.
#[test]
fn a_write_refused_by_a_standby_closes_its_connection() {
    let Some(pair) = Pair::start("async") else { return };
    let place = Place::Postgres { url: pair.primary.clone(), schema: "convo".into() };
    let mut s = Server::at(&place, Framing::Ndjson, &[]);
    s.call("session/create", json!({"session_id": "demo"}));
    s.call("session/add_user", json!({"session_id": "demo", "text": "hello"}));
    s.finish();
    let deadline = Instant::now() + Duration::from_secs(30);
    while psql(&pair.standby, "SELECT count(*) FROM pg_tables WHERE schemaname = 'convo' AND tablename = 'messages'")
        != "1"
        || psql(&pair.standby, "SELECT count(*) FROM convo.messages") != "1"
    {
        assert!(Instant::now() < deadline, "the standby did not replay the schema");
        std::thread::sleep(Duration::from_millis(20));
    }

    let name = "convo-on-standby";
    let url = format!("{}?pool_max=1&application_name={name}", pair.standby);
    let mut s = Server::at(&Place::Postgres { url, schema: "convo".into() }, Framing::Ndjson, &[]);
    let history = s.call("session/history", json!({"session_id": "demo"}));
    assert_eq!(history["messages"][0]["content"], "hello");
    let before = backends_until(&pair.standby, name, |b| b.len() == 1);
    let e = s.fail("session/add_user", json!({"session_id": "demo", "text": "refused"}), 1006);
    let message = e["message"].as_str().unwrap();
    assert!(message.contains("read-only transaction (25006)"), "{message}");
    // Closed by convo: its backend ends.
    backends_until(&pair.standby, name, |b| !b.contains(&before[0]));
    let history = s.call("session/history", json!({"session_id": "demo"}));
    assert_eq!(history["messages"].as_array().unwrap().len(), 1, "the refused write took no effect");
    let after = backends_until(&pair.standby, name, |b| b.len() == 1);
    assert_ne!(before, after, "a new connection serves the request after the refused write");
    s.fail("session/add_user", json!({"session_id": "demo", "text": "refused again"}), 1006);
    let again = backends_until(&pair.standby, name, |b| !b.contains(&after[0]));
    s.finish();
    assert!(s.stderr().contains("PostgreSQL refused a write"), "{}", s.stderr());
    eprintln!(
        "a write on a standby: backend {} before the refused write, {} after it, {:?} after the second",
        before[0], after[0], again
    );
}

/// Appends `n` messages to `session` from `s`, pipelined; the revision of the last.
fn append(s: &mut Server, session: &str, n: usize, tag: &str) -> u64 {
    let ids: Vec<u64> = (0..n)
        .map(|i| s.send_request("session/add_user", json!({"session_id": session, "text": format!("{tag} {i}")})))
        .collect();
    ids.into_iter().map(|id| s.result_of(id, "session/add_user")["revision"].as_u64().unwrap()).max().unwrap()
}

/// Takes `session/changed` notifications until `session` is at `revision`.
fn told_of(s: &mut Server, session: &str, revision: u64) -> Value {
    loop {
        let change = s.host_notification("session/changed");
        if change["session_id"] == session && change["revision"] == revision {
            return change;
        }
    }
}

/// The highest position of the change table at `url`.
fn top(url: &str) -> i64 {
    psql(url, "SELECT coalesce(max(pos), 0) FROM convo.changes").parse().unwrap()
}

/// An asynchronous standby stops receiving; the primary commits 60 more changes (a
/// subscriber is told of each), then dies, and the standby is promoted without them: its
/// change positions start again below the highest the subscriber read. The changes
/// committed on the new primary still reach the subscriber, and its LISTEN is back, on
/// the new primary.
#[test]
fn a_subscriber_across_a_failover_that_lost_commits_misses_no_new_change() {
    let Some(pair) = Pair::start("async") else { return };
    let name = "convo-subscriber";
    let mut writer = Server::at(&Place::Postgres { url: pair.both(""), schema: "convo".into() }, Framing::Ndjson, &[]);
    let mut reader = Server::at(
        &Place::Postgres { url: pair.both(&format!("&application_name={name}")), schema: "convo".into() },
        Framing::Ndjson,
        &[],
    );
    reader.call("session/subscribe", json!({}));
    writer.call("session/create", json!({"session_id": "kept"}));
    let kept = append(&mut writer, "kept", 5, "replicated");
    told_of(&mut reader, "kept", kept);
    let deadline = Instant::now() + Duration::from_secs(30);
    while top(&pair.standby) != top(&pair.primary) {
        assert!(Instant::now() < deadline, "the standby did not catch up");
        std::thread::sleep(Duration::from_millis(20));
    }
    script(&[Path::new("detach"), &pair.path("s")]);
    let lost = append(&mut writer, "kept", 60, "lost");
    told_of(&mut reader, "kept", lost);
    let top_before = top(&pair.primary);
    let replicated_top = top(&pair.standby);

    pair.fail_over(Duration::ZERO);
    // The writer sends its first write again until the new primary takes it.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let id = writer.send_request("session/create", json!({"session_id": "new"}));
        let reply = writer.recv_reply(id);
        if reply.get("result").is_some() {
            break;
        }
        assert_eq!(reply["error"]["code"], 1006, "{reply}");
        assert!(Instant::now() < deadline, "the new primary took no write: {reply}");
        std::thread::sleep(Duration::from_millis(50));
    }
    let new = append(&mut writer, "new", 3, "after");
    let kept_after = append(&mut writer, "kept", 2, "after");
    let top_after = top(&pair.standby);
    assert!(top_after < top_before, "the new primary's positions ({top_after}) start again below {top_before}");
    told_of(&mut reader, "new", new);
    let change = told_of(&mut reader, "kept", kept_after);
    assert_eq!(change["message_count"], 7, "{change}");
    let listening =
        "SELECT count(*) FROM pg_stat_activity WHERE query = 'LISTEN convo' AND application_name = 'convo-subscriber'";
    let deadline = Instant::now() + Duration::from_secs(30);
    while psql(&pair.standby, listening) != "1" {
        assert!(Instant::now() < deadline, "the subscriber does not LISTEN on the new primary");
        std::thread::sleep(Duration::from_millis(50));
    }
    writer.finish();
    reader.finish();
    assert!(reader.stderr().contains("on a new server"), "{}", reader.stderr());
    eprintln!(
        "a subscriber across a failover to an asynchronous standby: highest position read {top_before} \
         (the standby had {replicated_top}), the new primary's {top_after} after {} new changes; \
         told of each session's last change on the new primary",
        6
    );
}
