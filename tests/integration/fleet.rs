//! Issue 27: a fleet of convo processes on one PostgreSQL, each on a server of the test's
//! own (scripts/postgres, with PgBouncer in transaction mode in front) whose role may
//! hold at most 20 server connections: 40 processes through PgBouncer, each pipelining
//! appends into a session of its own and one they share, fail no write, store each once
//! and never hold more than the limit; with the server restarted in the middle and the
//! hosts sending failed writes again with their `message_id`, nothing is lost or
//! doubled; 10 processes straight to the server (up to 40 connections wanted) wait for
//! one instead of failing.

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::harness::{Framing, Place, Server, json, postgres_url};
use crate::postgres::{Front, OwnPostgres, postgres_script};

/// The role's server connections at most.
const LIMIT: u64 = 20;
/// Requests each process has in flight.
const IN_FLIGHT: usize = 16;

/// `sql` run as the superuser over the server's socket (trusted there).
fn superuser(dir: &Path, sql: &str) -> String {
    let port = std::fs::read_to_string(dir.join("port")).unwrap();
    let out = Command::new("psql")
        .args(["-h", dir.to_str().unwrap(), "-p", port.trim(), "-U", "postgres", "-d", "convo_test"])
        .args(["-XAtq", "-v", "ON_ERROR_STOP=1", "-c", sql])
        .output()
        .expect("psql");
    assert!(out.status.success(), "psql {sql}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// Samples the role's server connections every 20 ms until dropped; the peak.
struct Peak {
    stop: Arc<AtomicBool>,
    peak: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Peak {
    fn watch(dir: &Path) -> Peak {
        let (stop, peak) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicU64::new(0)));
        let (dir, s, p) = (dir.to_owned(), stop.clone(), peak.clone());
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                let sql = "SELECT count(*) FROM pg_stat_activity WHERE usename = 'convo'";
                let n: u64 = superuser(&dir, sql).parse().unwrap_or(0);
                p.fetch_max(n, Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        Peak { stop, peak, thread: Some(thread) }
    }

    fn end(mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take().unwrap().join().unwrap();
        self.peak.load(Ordering::Relaxed)
    }
}

/// What a fleet did: writes acknowledged, writes that failed (sent again when `retry`),
/// and of those sent again, those that had landed already.
#[derive(Debug, Default)]
struct Outcome {
    acked: u64,
    failed: u64,
    duplicates: u64,
}

/// `processes` convos on `url`, each writing `writes` appends, `IN_FLIGHT` at a time,
/// alternately into its own session and the shared one, each with a `message_id`;
/// `during` runs once, from another thread, after the first round. With `retry`, a write
/// that failed with 1006 is sent again, the same, until it succeeds. Then checks that
/// every write is stored exactly once.
fn fleet(url: &str, processes: usize, writes: u64, retry: bool, during: Option<Box<dyn FnOnce() + Send>>) -> Outcome {
    let place = Place::Postgres { url: url.to_owned(), schema: "convo".into() };
    let mut servers: Vec<Server> = (0..processes).map(|_| Server::at(&place, Framing::Ndjson, &[])).collect();
    servers[0].call("session/create", json!({"session_id": "shared"}));
    for (p, s) in servers.iter_mut().enumerate() {
        s.call("session/create", json!({"session_id": format!("own{p}")}));
    }
    let write = |p: usize, w: u64| {
        let session = if w.is_multiple_of(2) { format!("own{p}") } else { "shared".to_owned() };
        let params = json!({
            "session_id": session,
            "text": format!("p{p}w{w}"),
            "message_id": format!("00000000-0000-4000-8000-{:04x}{w:08x}", p),
        });
        ("session/add_user", params)
    };
    let mut outcome = Outcome::default();
    let mut todo: Vec<Vec<u64>> = (0..processes).map(|_| (0..writes).rev().collect()).collect();
    let mut during = during.map(std::thread::spawn);
    let started = Instant::now();
    while todo.iter().any(|t| !t.is_empty()) {
        assert!(started.elapsed() < Duration::from_secs(240), "the fleet did not finish: {outcome:?}");
        let mut sent = Vec::new();
        for (p, s) in servers.iter_mut().enumerate() {
            let batch: Vec<u64> = (0..IN_FLIGHT).filter_map(|_| todo[p].pop()).collect();
            let ids: Vec<(u64, u64)> = batch
                .into_iter()
                .map(|w| {
                    let (method, params) = write(p, w);
                    (s.send_request(method, params), w)
                })
                .collect();
            sent.push(ids);
        }
        for (p, ids) in sent.into_iter().enumerate() {
            for (id, w) in ids {
                let reply = servers[p].recv_reply(id);
                match (reply.get("result"), reply["error"]["code"].as_i64()) {
                    (Some(result), _) => {
                        outcome.acked += 1;
                        outcome.duplicates += u64::from(result["duplicate"] == true);
                    }
                    (None, Some(1006)) if retry => {
                        outcome.failed += 1;
                        todo[p].push(w);
                    }
                    _ => panic!("process {p}, write {w}: {reply}"),
                }
            }
        }
        if let Some(thread) = during.take_if(|t| t.is_finished()) {
            thread.join().unwrap();
        }
    }
    if let Some(thread) = during {
        thread.join().unwrap();
    }
    // Every write, exactly once.
    let mut stored: HashMap<String, u64> = HashMap::new();
    let mut sessions: Vec<String> = (0..processes).map(|p| format!("own{p}")).collect();
    sessions.push("shared".into());
    for session in sessions {
        let h = servers[0].call("session/history", json!({"session_id": session, "repair": false}));
        for m in h["messages"].as_array().unwrap() {
            *stored.entry(m["content"].as_str().unwrap().to_owned()).or_default() += 1;
        }
    }
    let expected = processes as u64 * writes;
    let wrong = stored.values().filter(|&&n| n != 1).count();
    assert_eq!((stored.len() as u64, wrong), (expected, 0), "every write stored exactly once: {outcome:?}");
    assert_eq!(outcome.acked, expected);
    for mut s in servers {
        s.finish();
    }
    outcome
}

#[test]
fn forty_processes_through_pgbouncer_fail_nothing_and_stay_within_the_limit() {
    if postgres_url().is_none() {
        return;
    }
    let postgres = OwnPostgres::start(Front::Bouncer);
    let dir = postgres.dir.path().to_owned();
    superuser(&dir, &format!("ALTER ROLE convo CONNECTION LIMIT {LIMIT}"));
    let peak = Peak::watch(&dir);
    let started = Instant::now();
    let outcome = fleet(&postgres.url, 40, 200, false, None);
    let elapsed = started.elapsed();
    let peak = peak.end();
    assert_eq!(outcome.failed, 0);
    assert!(peak <= LIMIT, "{peak} server connections at peak");
    eprintln!(
        "fleet: 40 processes through PgBouncer, {} writes in {:.1} s, 0 failed, peak {peak} server connections",
        outcome.acked,
        elapsed.as_secs_f64()
    );

    // The server restarts mid-way: writes in flight fail with 1006 and are sent again.
    let restart_dir = dir.clone();
    let restart = Box::new(move || {
        std::thread::sleep(Duration::from_millis(500));
        postgres_script("restart", &restart_dir, Front::Bouncer);
    });
    superuser(&dir, "DROP SCHEMA convo CASCADE");
    let outcome = fleet(&postgres.url, 40, 200, true, Some(restart));
    assert!(outcome.failed > 0, "the restart came while writes were in flight");
    eprintln!(
        "fleet with a restart: {} writes, {} sent again after 1006 ({} had landed already), 0 lost, 0 doubled",
        outcome.acked, outcome.failed, outcome.duplicates
    );
}

/// Straight to the server, 10 processes with `pool_max=4` want up to 40 connections of a
/// role allowed 20: the server refuses the 21st (`too many clients`), and convo waits for
/// one instead of failing the write.
#[test]
fn ten_processes_straight_to_a_full_server_wait_instead_of_failing() {
    if postgres_url().is_none() {
        return;
    }
    let postgres = OwnPostgres::start(Front::Bouncer);
    let dir = postgres.dir.path().to_owned();
    superuser(&dir, &format!("ALTER ROLE convo CONNECTION LIMIT {LIMIT}"));
    let direct = std::fs::read_to_string(dir.join("direct-url")).unwrap().trim().to_owned();
    let peak = Peak::watch(&dir);
    let outcome = fleet(&format!("{direct}?pool_max=4"), 10, 400, false, None);
    let peak = peak.end();
    assert_eq!(outcome.failed, 0);
    assert!(peak <= LIMIT, "{peak} server connections at peak");
}
