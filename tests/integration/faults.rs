//! Issue 46, the store's faults (spec section 20): a full disk, for SQLite and for
//! PostgreSQL, on a size-limited tmpfs that the test mounts (root only; where `mount` is
//! refused the test says so on stderr and passes without running), and read-only
//! stores.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::harness::{Framing, Place, Server, json, postgres_url};
use crate::postgres::psql;

/// A tmpfs mounted by the test, unmounted when dropped.
pub struct Tmpfs {
    pub path: PathBuf,
}

impl Tmpfs {
    /// A tmpfs of `size` (as mount's `size=` takes it) at `path` (made if missing);
    /// `None`, said on stderr, where mounting is refused (not root, or a container that
    /// forbids it).
    pub fn mount(path: &Path, size: &str, test: &str) -> Option<Tmpfs> {
        std::fs::create_dir_all(path).unwrap();
        let out =
            Command::new("mount").args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"]).arg(path).output();
        match out {
            Ok(out) if out.status.success() => Some(Tmpfs { path: path.to_owned() }),
            Ok(out) => {
                eprintln!("SKIPPED: {test}: cannot mount a tmpfs: {}", String::from_utf8_lossy(&out.stderr).trim());
                None
            }
            Err(e) => {
                eprintln!("SKIPPED: {test}: cannot run mount: {e}");
                None
            }
        }
    }

    /// Mounts it again with `options` (`size=…`, `ro`, `rw`); its files stay.
    pub fn remount(&self, options: &str) {
        let out = Command::new("mount").args(["-o", &format!("remount,{options}")]).arg(&self.path).output().unwrap();
        assert!(out.status.success(), "remount {options}: {}", String::from_utf8_lossy(&out.stderr));
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        // Lazily: a process of the test still holding a file must not keep it mounted.
        let _ = Command::new("umount").arg("-l").arg(&self.path).output();
    }
}

/// `len` bytes of text that does not compress (PostgreSQL would otherwise keep it small).
fn incompressible(seed: u64, len: usize) -> String {
    let mut x = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (0..len)
        .map(|_| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            char::from(b'!' + ((x >> 33) % 90) as u8)
        })
        .collect()
}

/// Appends big messages to `session` until one fails; returns how many were stored and
/// the error.
fn fill(s: &mut Server, session: &str) -> (usize, serde_json::Value) {
    for n in 0..10_000 {
        let params = json!({"session_id": session, "text": incompressible(n, 256 * 1024)});
        let id = s.send_request("session/add_user", params);
        let reply = s.recv_reply(id);
        if reply.get("error").is_some() {
            return (n as usize, reply["error"].clone());
        }
    }
    panic!("the disk never filled up");
}

fn convo(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_convo")).args(args).stdin(std::process::Stdio::null()).output().unwrap()
}

fn messages(s: &mut Server, session: &str) -> usize {
    s.call("session/history", json!({"session_id": session, "repair": false}))["messages"].as_array().unwrap().len()
}

/// SQLite on a full disk: the write that cannot be made is 1006 and takes no effect;
/// reads go on; once space is freed writes succeed again, without a restart, and
/// `convo fsck` finds nothing.
#[test]
fn sqlite_on_a_full_disk_refuses_the_write_reads_on_and_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let Some(disk) = Tmpfs::mount(&dir.path().join("disk"), "4m", "SQLite on a full disk") else { return };
    let db = disk.path.join("sessions.db");
    let mut s = Server::on_file(&db, Framing::Ndjson, &[]);
    s.call("session/create", json!({"session_id": "big"}));
    let (stored, error) = fill(&mut s, "big");
    assert_eq!(error["code"], 1006, "{error}");
    assert!(error["message"].as_str().unwrap().contains("database or disk is full"), "{error}");
    assert_eq!(messages(&mut s, "big"), stored, "the refused write took no effect; reads go on");
    let e = s.fail("session/add_user", json!({"session_id": "big", "text": incompressible(1, 256 * 1024)}), 1006);
    assert!(e["message"].as_str().unwrap().contains("database or disk is full"), "{e}");

    disk.remount("size=64m");
    s.call("session/add_user", json!({"session_id": "big", "text": "after"}));
    assert_eq!(messages(&mut s, "big"), stored + 1);
    s.call("shutdown", json!(null));
    s.notify("exit", json!(null));
    s.wait();
    let store = format!("sqlite:{}", db.display());
    let checked = convo(&["fsck", "--store", &store]);
    assert_eq!(String::from_utf8_lossy(&checked.stdout), "no problems found (sqlite store)\n");
    eprintln!(
        "SQLite on a 4 MB tmpfs: {stored} messages of 256 KiB stored, the next refused with 1006, one more after the disk grew"
    );
}

/// PostgreSQL on a full disk (53100 `disk_full`): 1006 in PostgreSQL's words, the write
/// taking no effect; reads go on; once space is freed writes succeed again, without a
/// restart. Convo's tables live in a tablespace on a small tmpfs, the rest of the
/// cluster (its WAL above all: a server that cannot write WAL stops, which is a crash,
/// not 53100) on the ordinary disk.
#[test]
fn postgres_on_a_full_disk_refuses_the_write_reads_on_and_recovers() {
    if postgres_url().is_none() {
        return;
    }
    let postgres = crate::postgres::OwnPostgres::start_plain();
    let Some(disk) = Tmpfs::mount(&postgres.dir.path().join("tight"), "8m", "PostgreSQL on a full disk") else {
        return;
    };
    let chown = Command::new("chown").arg("postgres").arg(&disk.path).output().unwrap();
    assert!(chown.status.success(), "{}", String::from_utf8_lossy(&chown.stderr));
    let port = std::fs::read_to_string(postgres.dir.path().join("port")).unwrap();
    let superuser =
        format!("postgresql:///convo_test?host={}&port={}&user=postgres", postgres.dir.path().display(), port.trim());
    psql(&superuser, &format!("CREATE TABLESPACE tight LOCATION '{}'", disk.path.display()));
    psql(&superuser, "GRANT CREATE ON TABLESPACE tight TO convo");
    psql(&superuser, "ALTER DATABASE convo_test SET default_tablespace = tight");

    let place = Place::Postgres { url: postgres.url.clone(), schema: "convo".into() };
    let mut s = Server::at(&place, Framing::Ndjson, &[]);
    s.call("session/create", json!({"session_id": "big"}));
    let (stored, error) = fill(&mut s, "big");
    assert_eq!(error["code"], 1006, "{error}");
    let message = error["message"].as_str().unwrap();
    assert!(message.contains("No space left on device") && message.ends_with("(53100)"), "{error}");
    assert_eq!(messages(&mut s, "big"), stored, "the refused write took no effect; reads go on");

    disk.remount("size=256m");
    s.call("session/add_user", json!({"session_id": "big", "text": "after"}));
    assert_eq!(messages(&mut s, "big"), stored + 1);
    s.finish();
    let checked = convo(&["fsck", "--store", &postgres.url]);
    assert_eq!(String::from_utf8_lossy(&checked.stdout), "no problems found (postgres store)\n");
    eprintln!(
        "PostgreSQL with convo's tables on an 8 MB tmpfs: {stored} messages of 256 KiB stored, the next refused with 1006 ({message}), one more after the disk grew"
    );
}
