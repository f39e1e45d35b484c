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

/// Who runs convo on a read-only store: root, or `nobody` (uid and gid 65534), whom
/// root's bypass of file modes does not cover.
#[derive(Clone, Copy, PartialEq)]
enum As {
    Root,
    Nobody,
}

fn is_root() -> bool {
    // SAFETY: geteuid(2) has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// The command that runs convo as `who`: for `nobody`, the binary where others may run
/// it (in place when every folder above it lets them pass, else a copy in `dir`).
fn command_as(who: As, dir: &Path) -> Command {
    use std::os::unix::fs::PermissionsExt as _;
    use std::os::unix::process::CommandExt as _;
    let built = Path::new(env!("CARGO_BIN_EXE_convo"));
    if who == As::Root {
        return Command::new(built);
    }
    let passable = built.ancestors().all(|p| std::fs::metadata(p).is_ok_and(|m| m.permissions().mode() & 0o001 != 0));
    let binary = if passable {
        built.to_owned()
    } else {
        let copy = dir.join("convo");
        if !copy.exists() {
            std::fs::copy(built, &copy).unwrap();
            std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        copy
    };
    let mut command = Command::new(binary);
    command.uid(65534).gid(65534);
    command
}

/// `convo ARGS…` as `who`.
fn convo_as(who: As, dir: &Path, args: &[&str]) -> Output {
    command_as(who, dir).args(args).stdin(std::process::Stdio::null()).output().unwrap()
}

/// A database with two sessions, written and closed (no log left beside it), or killed
/// mid-run (`with_log`: its `-wal` and `-shm` left beside it, holding the second).
fn written(db: &Path, with_log: bool) {
    let mut s = Server::on_file(db, Framing::Ndjson, &[]);
    s.call("session/create", json!({"session_id": "first", "title": "kept"}));
    s.call("session/add_user", json!({"session_id": "first", "text": "hello"}));
    if with_log {
        // The first session in the file itself, the second in the log alone.
        s.call("shutdown", json!(null));
        s.notify("exit", json!(null));
        s.wait();
        s = Server::on_file(db, Framing::Ndjson, &["--durability", "full"]);
    }
    s.call("session/create", json!({"session_id": "second"}));
    s.call("session/add_user", json!({"session_id": "second", "text": "in the log"}));
    if with_log {
        s.kill();
    } else {
        s.finish();
    }
    let log = db.with_extension("db-wal");
    assert_eq!(log.exists() && std::fs::metadata(&log).unwrap().len() > 0, with_log, "{}", log.display());
}

/// The folder's entries with their sizes and modes, to show nothing was created or
/// changed.
fn listing(dir: &Path) -> Vec<String> {
    use std::os::unix::fs::MetadataExt as _;
    let mut found: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let m = e.metadata().unwrap();
            format!("{} {} {:o} {}", e.file_name().to_string_lossy(), m.len(), m.mode(), m.mtime_nsec())
        })
        .collect();
    found.sort();
    found
}

/// What a read-only store answers: the CLI's reading commands, and a server that says
/// so and answers reads but refuses every write with 1006.
fn reads_but_never_writes(db: &Path, who: As) {
    let folder = db.parent().unwrap().to_owned();
    let top = folder.parent().unwrap().to_owned();
    let convo_as = |who, args: &[&str]| convo_as(who, &top, args);
    let before = listing(&folder);
    let store = format!("sqlite:{}", db.display());
    let text = |o: &Output| String::from_utf8_lossy(&o.stdout).into_owned();
    let listed = convo_as(who, &["ls", "--store", &store]);
    assert_eq!(listed.status.code(), Some(0), "{}", String::from_utf8_lossy(&listed.stderr));
    assert!(text(&listed).contains("first") && text(&listed).contains("second"), "{}", text(&listed));
    let shown = convo_as(who, &["show", "second", "--store", &store]);
    assert_eq!(shown.status.code(), Some(0), "{}", String::from_utf8_lossy(&shown.stderr));
    assert!(text(&shown).contains("in the log"), "{}", text(&shown));
    let exported = convo_as(who, &["export", "first", "--store", &store]);
    assert_eq!(exported.status.code(), Some(0), "{}", String::from_utf8_lossy(&exported.stderr));
    let dict: serde_json::Value = serde_json::from_slice(&exported.stdout).unwrap();
    assert_eq!(dict["messages"][0]["content"], "hello", "{dict}");
    let checked = convo_as(who, &["fsck", "--store", &store]);
    assert_eq!(text(&checked), "no problems found (sqlite store)\n", "{}", String::from_utf8_lossy(&checked.stderr));

    let mut command = command_as(who, &top);
    command.args(["--store", &store]);
    let mut s = Server::from_command(command, Framing::Ndjson);
    let init = s.call("initialize", json!({}));
    assert_eq!(init["store"], json!({"read_only": true}), "{init}");
    let history = s.call("session/history", json!({"session_id": "second"}));
    assert_eq!(history["messages"][0]["content"], "in the log");
    let e = s.fail("session/add_user", json!({"session_id": "first", "text": "refused"}), 1006);
    assert!(e["message"].as_str().unwrap().contains("the store is read-only"), "{e}");
    let e = s.fail("session/create", json!({"session_id": "third"}), 1006);
    assert!(e["message"].as_str().unwrap().contains("the store is read-only"), "{e}");
    s.call("shutdown", json!(null));
    s.notify("exit", json!(null));
    assert!(s.wait().success());
    assert!(s.stderr().contains("convo: the store is read-only"), "{}", s.stderr());
    assert_eq!(listing(&folder), before, "nothing in the folder was created or changed");
}

/// Makes the database, its companions and its folder unwritable (0444, 0555).
fn forbid_writing(db: &Path) {
    use std::os::unix::fs::PermissionsExt as _;
    let folder = db.parent().unwrap();
    for entry in std::fs::read_dir(folder).unwrap() {
        std::fs::set_permissions(entry.unwrap().path(), std::fs::Permissions::from_mode(0o444)).unwrap();
    }
    std::fs::set_permissions(folder, std::fs::Permissions::from_mode(0o555)).unwrap();
    // Passable by `nobody` on the way down.
    std::fs::set_permissions(folder.parent().unwrap(), std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// A database file alone (no log beside it) and one with its log, in a folder
/// `nobody` may read but not write, each file 0444: read, never written.
#[test]
fn a_database_the_user_may_not_write_is_read_and_never_written() {
    if !is_root() {
        eprintln!("SKIPPED: a database the user may not write: needs root, to run convo as nobody");
        return;
    }
    for with_log in [false, true] {
        // Under /tmp, which everyone may pass (the run's own temporary folder may be 0700).
        let dir = tempfile::Builder::new().prefix("convo-read-only-").tempdir_in("/tmp").unwrap();
        let db = dir.path().join("store").join("sessions.db");
        std::fs::create_dir(db.parent().unwrap()).unwrap();
        written(&db, with_log);
        forbid_writing(&db);
        reads_but_never_writes(&db, As::Nobody);
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(db.parent().unwrap(), std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}

/// A database on a read-only file system (a tmpfs remounted `ro`), alone and with its
/// log: read, never written, by root too.
#[test]
fn a_database_on_a_read_only_file_system_is_read_and_never_written() {
    for with_log in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let test = "a database on a read-only file system";
        let Some(disk) = Tmpfs::mount(&dir.path().join("disk"), "16m", test) else { return };
        let db = disk.path.join("sessions.db");
        written(&db, with_log);
        disk.remount("ro");
        reads_but_never_writes(&db, As::Root);
    }
}

/// A log with commits and no `-shm` beside it, on a read-only file system: SQLite cannot
/// read the log, so the store is not opened, and the message says why (not SQLite's
/// `unable to open database file`).
#[test]
fn a_read_only_log_without_its_index_is_refused_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let test = "a read-only log without its index";
    let Some(disk) = Tmpfs::mount(&dir.path().join("disk"), "16m", test) else { return };
    let db = disk.path.join("sessions.db");
    written(&db, true);
    std::fs::remove_file(disk.path.join("sessions.db-shm")).unwrap();
    disk.remount("ro");
    let listed = convo_as(As::Root, dir.path(), &["ls", "--store", &format!("sqlite:{}", db.display())]);
    assert_eq!(listed.status.code(), Some(3));
    let stderr = String::from_utf8_lossy(&listed.stderr);
    assert!(stderr.contains("its write-ahead log (-wal) holds commits") && stderr.contains("-shm"), "{stderr}");
}
