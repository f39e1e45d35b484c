//! Bad configuration is a message, never a panic or a stray file (spec section 6,
//! issue 9 items 4, 6 and 8): flags out of range, `--store sqlite:PATH` read as a path
//! and never as an SQLite URI, nothing left behind by an open that fails, symbolic links,
//! file modes, and a file-size limit.

use std::os::unix::fs::{PermissionsExt, symlink};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use rusqlite::Connection;

use crate::harness::{Framing, Server, json};

/// What each SQLite migration from version 5 on added: `UNDO[i]` takes the schema from
/// version `i + 5` back to `i + 4`.
const UNDO: &[&str] = &[
    "DROP INDEX blobs_by_ref; ALTER TABLE blobs DROP COLUMN ref; ALTER TABLE blobs DROP COLUMN media_type; \
     ALTER TABLE blobs DROP COLUMN bytes;",
    "DROP TABLE message_words;",
    "ALTER TABLE messages DROP COLUMN native; ALTER TABLE messages DROP COLUMN usage; \
     ALTER TABLE sessions DROP COLUMN usage;",
    "ALTER TABLE segments DROP COLUMN owner; ALTER TABLE messages DROP COLUMN revision;",
    "CREATE TABLE messages_without_rowid (segment INTEGER NOT NULL REFERENCES segments(id), seq INTEGER NOT NULL, \
     id TEXT NOT NULL, role TEXT NOT NULL, content TEXT NOT NULL, name TEXT, tool_call_id TEXT, tool_calls TEXT, \
     images TEXT, metadata TEXT, created_at TEXT NOT NULL, native TEXT, usage TEXT, revision INTEGER, \
     PRIMARY KEY (segment, seq)) WITHOUT ROWID; \
     INSERT INTO messages_without_rowid SELECT segment, seq, id, role, content, name, tool_call_id, tool_calls, \
     images, metadata, created_at, native, usage, revision FROM messages; \
     DROP TABLE messages; ALTER TABLE messages_without_rowid RENAME TO messages; \
     CREATE INDEX messages_by_id ON messages(id);",
    "DROP INDEX changes_by_session; ALTER TABLE changes DROP COLUMN at;",
];

/// The schema version convo writes (`PRAGMA user_version`).
pub const SCHEMA_VERSION: i64 = UNDO.len() as i64 + 4;

/// Takes a database convo wrote back to schema `version` (at least 4) exactly, as an
/// older convo left it.
pub fn back_to_version(path: &Path, version: i64) {
    let conn = Connection::open(path).unwrap();
    for undo in UNDO[(version - 4) as usize..].iter().rev() {
        conn.execute_batch(undo).unwrap();
    }
    conn.pragma_update(None, "user_version", version).unwrap();
}

/// Runs convo to its end (stdin is empty) in the folder `cwd`, with `HOME` there too.
fn convo_in(cwd: &Path, args: &[&str]) -> Output {
    run(cwd, args, |_| {})
}

fn run(cwd: &Path, args: &[&str], prepare: impl FnOnce(&mut Command)) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_convo"));
    command.args(args).current_dir(cwd).env("HOME", cwd).env_remove("XDG_DATA_HOME").stdin(Stdio::null());
    prepare(&mut command);
    command.output().unwrap()
}

/// The child may write at most `bytes` to any one file (`ulimit -f`).
fn limit_file_size(command: &mut Command, bytes: u64) {
    let limit = libc::rlimit { rlim_cur: bytes as libc::rlim_t, rlim_max: bytes as libc::rlim_t };
    // SAFETY: between fork and exec only setrlimit runs, which is async-signal-safe.
    unsafe {
        command.pre_exec(move || match libc::setrlimit(libc::RLIMIT_FSIZE, &limit) {
            0 => Ok(()),
            _ => Err(std::io::Error::last_os_error()),
        });
    }
}

/// The names in `dir`, sorted; without the `-wal` and `-shm` of a database listed (the
/// process may end before its last connection closes and removes them).
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    let companion_of_a_listed = |name: &String| {
        [name.strip_suffix("-wal"), name.strip_suffix("-shm")]
            .into_iter()
            .flatten()
            .any(|db| names.iter().any(|n| n == db))
    };
    names.iter().filter(|n| !companion_of_a_listed(n)).cloned().collect()
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

fn schema_version(path: &Path) -> i64 {
    Connection::open(path).unwrap().query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap()
}

/// Exit code 1, a message that starts as every opening failure does and says `says`,
/// nothing on stdout, no panic.
fn assert_refused(out: &Output, says: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.starts_with("convo: cannot open the store: "), "{stderr}");
    assert!(stderr.contains(says), "expected {says:?} in: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(out.stdout.is_empty());
}

fn assert_served(out: &Output) {
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
}

/// Issue 9, item 6: `--busy-timeout-ms 2147483648` panicked at start (exit 101).
#[test]
fn out_of_range_flags_are_refused_by_the_parser() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite:{}", dir.path().join("s.db").display());
    let refused = [
        ("--busy-timeout-ms", "2147483648"),
        ("--busy-timeout-ms", "18446744073709551615"),
        ("--busy-timeout-ms", "18446744073709551616"),
        ("--busy-timeout-ms", "-1"),
        ("--max-message-bytes", "1023"),
        ("--max-message-bytes", "4294967297"),
        ("--max-message-bytes", "0"),
    ];
    for (flag, value) in refused {
        let out = convo_in(dir.path(), &["--store", &store, &format!("{flag}={value}")]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag} {value}: {stderr}");
        assert!(stderr.contains(&format!("invalid value '{value}' for '{flag}")), "{flag} {value}: {stderr}");
        assert!(!stderr.contains("panicked"), "{flag} {value}: {stderr}");
    }
    assert_eq!(listing(dir.path()), Vec::<String>::new(), "a refused flag opened the store");
    let accepted: &[&[&str]] = &[
        &["--busy-timeout-ms", "2147483647"],
        &["--busy-timeout-ms", "0"],
        &["--max-message-bytes", "1024"],
        &["--max-message-bytes", "4294967296"],
    ];
    for args in accepted {
        assert_served(&convo_in(dir.path(), &[&["--store", &store], *args].concat()));
    }
}

/// Issue 9, item 4: a write past `ulimit -f` killed the server (SIGXFSZ, exit 153).
#[test]
fn a_file_size_limit_is_1006_and_the_server_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("limited.db");
    let mut s = Server::on_file_with(&path, Framing::Ndjson, &[], |c| limit_file_size(c, 1 << 20));
    s.call("session/create", json!({"session_id": "big"}));
    s.call("session/add_user", json!({"session_id": "big", "text": "before"}));
    let e = s.fail("session/add_user", json!({"session_id": "big", "text": "x".repeat(4 << 20)}), 1006);
    assert_eq!(e["data"]["kind"], "storage_unavailable");
    s.call("session/add_user", json!({"session_id": "big", "text": "after"}));
    let h = s.call("session/history", json!({"session_id": "big"}));
    let texts: Vec<&str> = h["messages"].as_array().unwrap().iter().map(|m| m["content"].as_str().unwrap()).collect();
    assert_eq!(texts, ["before", "after"], "the refused write left nothing");
    assert_eq!(h["revision"], 2);
    assert_eq!(s.finish().code(), Some(0), "{}", s.stderr());
}

/// Issue 9, item 8: `sqlite:file:...` made a `file:` folder tree, and was read as a URI.
#[test]
fn a_store_path_beginning_with_file_is_a_plain_file_name() {
    let cwd = tempfile::tempdir().unwrap();
    assert_served(&convo_in(cwd.path(), &["--store", "sqlite:file:x.db"]));
    assert_eq!(listing(cwd.path()), ["file:x.db"]);
    assert_eq!(schema_version(&cwd.path().join("file:x.db")), SCHEMA_VERSION);
    assert_eq!(mode(&cwd.path().join("file:x.db")), 0o600);

    // Query parameters are part of the name too.
    assert_served(&convo_in(cwd.path(), &["--store", "sqlite:file:y.db?mode=memory"]));
    assert_eq!(listing(cwd.path()), ["file:x.db", "file:y.db?mode=memory"]);

    // No folder is made for an explicit path.
    let out = convo_in(cwd.path(), &["--store", "sqlite:file:sub/z.db"]);
    assert_refused(&out, "does not exist");
    assert_eq!(listing(cwd.path()), ["file:x.db", "file:y.db?mode=memory"]);
}

/// Issue 9, item 8: `sqlite::memory:` left a `:memory:` file behind.
#[test]
fn sqlite_memory_is_refused_with_a_hint() {
    let cwd = tempfile::tempdir().unwrap();
    assert_refused(&convo_in(cwd.path(), &["--store", "sqlite::memory:"]), "--store memory");
    assert_eq!(listing(cwd.path()), Vec::<String>::new());
    // A file of that name, asked for as one.
    assert_served(&convo_in(cwd.path(), &["--store", "sqlite:./:memory:"]));
    assert_eq!(listing(cwd.path()), [":memory:"]);
}

#[test]
fn no_folder_is_created_for_an_explicit_path() {
    let cwd = tempfile::tempdir().unwrap();
    let store = format!("sqlite:{}", cwd.path().join("a").join("b").join("s.db").display());
    assert_refused(&convo_in(cwd.path(), &["--store", &store]), "does not exist");
    assert_eq!(listing(cwd.path()), Vec::<String>::new());
}

/// Issue 9, item 8: as root, `sqlite:/dev/null` left `/dev/null-journal`.
#[test]
fn what_is_not_a_regular_file_is_refused_untouched() {
    let cwd = tempfile::tempdir().unwrap();
    let journal_before = Path::new("/dev/null-journal").exists();
    assert_refused(&convo_in(cwd.path(), &["--store", "sqlite:/dev/null"]), "not a regular file");
    assert_eq!(Path::new("/dev/null-journal").exists(), journal_before);
    std::fs::create_dir(cwd.path().join("folder")).unwrap();
    assert_refused(&convo_in(cwd.path(), &["--store", "sqlite:folder"]), "not a regular file");
    assert_eq!(listing(cwd.path()), ["folder"]);
    assert_eq!(listing(&cwd.path().join("folder")), Vec::<String>::new());
}

/// Opening fails after the file was created (no byte may be written): what convo
/// created is removed again, the default data folder included.
#[test]
fn a_failed_open_leaves_nothing_behind() {
    let cwd = tempfile::tempdir().unwrap();
    let out = run(cwd.path(), &["--store", "sqlite:new.db"], |c| limit_file_size(c, 0));
    assert_refused(&out, "new.db");
    assert_eq!(listing(cwd.path()), Vec::<String>::new());

    let home = tempfile::tempdir().unwrap();
    let out = run(cwd.path(), &[], |c| {
        limit_file_size(c, 0);
        c.env("HOME", home.path());
    });
    assert_refused(&out, "sessions.db");
    assert_eq!(listing(home.path()), Vec::<String>::new(), "the default folders were left");
    assert_eq!(listing(cwd.path()), Vec::<String>::new());
}

/// Issue 9, item 8: a symlinked path was followed.
#[test]
fn symbolic_links_need_follow_symlinks() {
    let cwd = tempfile::tempdir().unwrap();
    let (real, link) = (cwd.path().join("real.db"), cwd.path().join("link.db"));
    symlink(&real, &link).unwrap();
    // Dangling: refused, and its target is not created.
    assert_refused(&convo_in(cwd.path(), &["--store", "sqlite:link.db"]), "--follow-symlinks");
    assert_refused(&convo_in(cwd.path(), &["--store", "sqlite:link.db", "--follow-symlinks"]), "symbolic link");
    assert_eq!(listing(cwd.path()), ["link.db"]);

    assert_served(&convo_in(cwd.path(), &["--store", "sqlite:real.db"]));
    let out = convo_in(cwd.path(), &["--store", "sqlite:link.db"]);
    assert_refused(&out, "is a symbolic link; give --follow-symlinks");
    let mut s = Server::on_file_with(&link, Framing::Ndjson, &["--follow-symlinks"], |_| {});
    s.call("session/create", json!({"session_id": "through-the-link"}));
    assert_eq!(s.finish().code(), Some(0));
    let mut s = Server::on_file(&real, Framing::Ndjson, &[]);
    s.call("session/get", json!({"session_id": "through-the-link"}));
    s.finish();
    assert_eq!(listing(cwd.path()), ["link.db", "real.db"]);

    // A companion that is a link is refused too.
    let elsewhere = tempfile::tempdir().unwrap();
    let _ = std::fs::remove_file(cwd.path().join("real.db-wal"));
    symlink(elsewhere.path().join("wal"), cwd.path().join("real.db-wal")).unwrap();
    assert_refused(&convo_in(cwd.path(), &["--store", "sqlite:real.db"]), "real.db-wal is a symbolic link");
    assert_eq!(listing(elsewhere.path()), Vec::<String>::new());
}

/// Issue 9, item 8: an existing empty 0644 file became a database and stayed 0644.
#[test]
fn a_new_database_is_private_an_existing_one_keeps_its_mode() {
    let cwd = tempfile::tempdir().unwrap();
    let empty = cwd.path().join("empty.db");
    std::fs::write(&empty, b"").unwrap();
    std::fs::set_permissions(&empty, std::fs::Permissions::from_mode(0o644)).unwrap();
    assert_served(&convo_in(cwd.path(), &["--store", "sqlite:empty.db"]));
    assert_eq!(mode(&empty), 0o600);
    assert_eq!(schema_version(&empty), SCHEMA_VERSION);

    std::fs::set_permissions(&empty, std::fs::Permissions::from_mode(0o640)).unwrap();
    assert_served(&convo_in(cwd.path(), &["--store", "sqlite:empty.db"]));
    assert_eq!(mode(&empty), 0o640, "an existing database keeps its mode");

    // Even under a permissive umask.
    let out = run(cwd.path(), &["--store", "sqlite:fresh.db"], |c| {
        // SAFETY: between fork and exec only umask runs, which is async-signal-safe.
        unsafe {
            c.pre_exec(|| {
                libc::umask(0);
                Ok(())
            })
        };
    });
    assert_served(&out);
    assert_eq!(mode(&cwd.path().join("fresh.db")), 0o600);
}
