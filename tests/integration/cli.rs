//! The command line for people (issue 16): each subcommand against a real SQLite file,
//! its `--json` output and exit codes; `show` on a terminal (a pseudo-terminal, through
//! util-linux's `script`) and piped; and the man page, completions and schema.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use crate::harness::{Value, json};

/// Runs convo with `args`, `input` on stdin, colour left to the defaults.
pub fn convo_with(args: &[&str], input: &[u8]) -> Output {
    use std::io::Write as _;
    let mut child = Command::new(env!("CARGO_BIN_EXE_convo"))
        .args(args)
        .env_remove("NO_COLOR")
        .env_remove("CLICOLOR_FORCE")
        .env_remove("CONVO_STORE")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let output = child.wait_with_output().unwrap();
    writer.join().unwrap();
    output
}

pub fn convo(args: &[&str]) -> Output {
    convo_with(args, b"")
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).unwrap()
}

fn code(output: &Output) -> i32 {
    output.status.code().expect("exited")
}

fn json_out(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&output.stdout)))
}

/// A session with every kind of message: a system prompt, text, an image (a 1x1 PNG of
/// 70 bytes), parallel calls answered out of order, a call cancelled by moving on,
/// content parts, metadata, and a trailing call still without its result.
const RICH: &str = r#"{"jsonrpc":"2.0","id":"r1","method":"session/create","params":{"session_id":"rich","system":"Be exact.","title":"Every kind"}}
{"jsonrpc":"2.0","id":"r2","method":"session/add_user","params":{"session_id":"rich","text":"What is in this picture?","images":["iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="]}}
{"jsonrpc":"2.0","id":"r3","method":"session/add_assistant","params":{"session_id":"rich","text":"Looking.","tool_calls":[{"id":"c1","name":"zoom","arguments":{"x":1}},{"id":"c2","type":"function","function":{"name":"ocr","arguments":"{}"}}]}}
{"jsonrpc":"2.0","id":"r4","method":"session/add_tool_result","params":{"session_id":"rich","tool_call_id":"c2","content":"no text found"}}
{"jsonrpc":"2.0","id":"r5","method":"session/add_user","params":{"session_id":"rich","text":"Never mind.\nJust say hi."}}
{"jsonrpc":"2.0","id":"r6","method":"session/add_message","params":{"session_id":"rich","message":{"role":"assistant","content":[{"type":"text","text":"Hi."}],"metadata":{"model":"m-1"}}}}
{"jsonrpc":"2.0","id":"r7","method":"session/add_assistant","params":{"session_id":"rich","tool_calls":[{"id":"c3","name":"wave","input":{}}]}}
"#;

/// A database file made by serving `examples/session.ndjson` and `RICH` with
/// `--deterministic`, so every id and time stamp is known.
pub struct Db {
    _dir: tempfile::TempDir,
    pub path: PathBuf,
    pub store: String,
}

impl Db {
    pub fn new() -> Db {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sessions.db");
        let store = format!("sqlite:{}", path.display());
        let example = std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/session.ndjson")).unwrap();
        for script in [&example[..], RICH.as_bytes()] {
            let served = convo_with(&["--deterministic", "--store", &store], script);
            assert!(served.status.success(), "{}", text(&served.stderr));
        }
        Db { _dir: dir, path, store }
    }

    /// Runs a subcommand on this database.
    pub fn run(&self, args: &[&str]) -> Output {
        convo(&[&["--store", &self.store], args].concat())
    }
}

fn info(id: &str, system: &str, title: Value, count: u64, revision: u64, created: &str, updated: &str) -> Value {
    json!({"session_id": id, "system": system, "cwd": null, "title": title, "metadata": null,
           "message_count": count, "revision": revision, "created_at": format!("2000-01-01T00:00:00.{created}Z"),
           "updated_at": format!("2000-01-01T00:00:00.{updated}Z"), "forked_from": null,
           "usage": {"input_tokens": 0, "output_tokens": 0, "cache_read_tokens": 0, "cache_write_tokens": 0,
                     "reasoning_tokens": 0}})
}

#[test]
fn ls_lists_every_session_newest_first() {
    let db = Db::new();
    let listed = db.run(&["ls", "--json"]);
    assert_eq!(code(&listed), 0, "{}", text(&listed.stderr));
    // The second process's clock starts again at 2000-01-01: ties go by id, descending.
    assert_eq!(
        json_out(&listed),
        json!([
            info("agent-1", "You are helpful.", json!(null), 4, 0, "026000", "026000"),
            info("rich", "Be exact.", json!("Every kind"), 7, 6, "000000", "013000"),
            info("demo", "You are a careful coding agent.", json!("Editions"), 4, 9, "000000", "028000"),
        ])
    );
    let table = text(&db.run(&["ls"]).stdout);
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines[0], "SESSION  TITLE       MESSAGES  REVISION  UPDATED (UTC)");
    assert_eq!(lines[2], "rich     Every kind  7         6         2000-01-01 00:00:00");
    assert!(!table.contains('\x1b'), "no colour when piped");
    let newest = db.run(&["ls", "--json", "--limit", "1"]);
    assert_eq!(json_out(&newest).as_array().unwrap().len(), 1);
}

#[test]
fn show_prints_every_message_with_the_results_under_their_calls() {
    let db = Db::new();
    let shown = db.run(&["show", "rich"]);
    assert_eq!(code(&shown), 0, "{}", text(&shown.stderr));
    let out = text(&shown.stdout);
    assert!(!out.contains('\x1b'), "no colour when piped:\n{out}");
    let history = json_out(&db.run(&["show", "rich", "--json"]));
    let messages = history["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 7);
    for (i, m) in messages.iter().enumerate() {
        assert!(out.contains(&format!("[{i}] ")), "message {i} is shown:\n{out}");
        if let Some(content) = m["content"].as_str() {
            for line in content.lines() {
                assert!(out.contains(line), "{line:?} is shown:\n{out}");
            }
        }
    }
    let expected = "\
session rich  \"Every kind\"
7 messages · revision 6 · created 2000-01-01 00:00:00 · updated 2000-01-01 00:00:00

system prompt
    Be exact.

[0] user  2000-01-01 00:00:00
    What is in this picture?
    [image 70 B png]

[1] assistant  2000-01-01 00:00:00
    Looking.
    → zoom {\"x\":1}  c1
      ← [3] tool [cancelled: synthetic result]
        Cancelled — connection was lost before this tool ran.
    → ocr {}  c2
      ← [2] tool
        no text found

[4] user  2000-01-01 00:00:00
    Never mind.
    Just say hi.

[5] assistant  2000-01-01 00:00:00
    Hi.
    metadata {\"model\":\"m-1\"}

[6] assistant  2000-01-01 00:00:00
    → wave {}  c3
      ← no result yet
";
    assert_eq!(out, expected);
    assert_eq!(history["session"]["session_id"], "rich");
}

#[test]
fn show_is_coloured_on_a_terminal_only() {
    let db = Db::new();
    let command = format!("{} --store {} show demo", env!("CARGO_BIN_EXE_convo"), db.store);
    let on_tty = |no_color: bool| {
        let mut script = Command::new("script");
        script.args(["-qec", &command, "/dev/null"]).env("TERM", "xterm-256color").env_remove("CLICOLOR_FORCE");
        if no_color {
            script.env("NO_COLOR", "1");
        } else {
            script.env_remove("NO_COLOR");
        }
        let out = script.stdin(Stdio::null()).output().expect("util-linux `script` runs a pseudo-terminal");
        assert!(out.status.success(), "{}", text(&out.stderr));
        text(&out.stdout)
    };
    let coloured = on_tty(false);
    assert!(coloured.contains("\x1b["), "styles on a terminal:\n{coloured}");
    assert!(coloured.contains("Run the tests."));
    let plain = on_tty(true);
    assert!(!plain.contains('\x1b'), "NO_COLOR is honoured:\n{plain}");
    assert!(plain.contains("Run the tests."));
    let piped = text(&db.run(&["show", "demo"]).stdout);
    assert!(!piped.contains('\x1b') && piped.contains("Run the tests."));
    let forced = text(&db.run(&["--color", "always", "show", "demo"]).stdout);
    assert!(forced.contains("\x1b["), "--color always");
}

#[test]
fn show_with_a_format_prints_the_export() {
    let db = Db::new();
    let body = db.run(&["show", "rich", "--format", "anthropic_messages"]);
    assert_eq!(code(&body), 0, "{}", text(&body.stderr));
    let payload = json_out(&body);
    assert_eq!(payload["system"], "Be exact.");
    let last = payload["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["content"][0]["type"], "tool_result", "the trailing call gets its synthetic result");
    let unrepaired = json_out(&db.run(&["show", "rich", "--format", "openai_chat", "--no-repair", "--json"]));
    assert_eq!(unrepaired["warnings"], json!([]));
    assert_eq!(unrepaired["payload"]["messages"].as_array().unwrap().len(), 8, "the system prompt, then each");
}

#[test]
fn show_fits_and_caches_the_export_as_asked() {
    let db = Db::new();
    let whole = json_out(&db.run(&["show", "rich", "--format", "anthropic_messages", "--json"]));
    let fitted =
        json_out(&db.run(&["show", "rich", "--format", "anthropic_messages", "--fit", "60", "--cache", "--json"]));
    let fit = &fitted["fit"];
    assert!(fit["tokens_before"].as_u64().unwrap() > 60, "{fit}");
    assert!(fit["tokens"].as_u64().unwrap() <= 60, "{fit}");
    assert_eq!(fit["turns_left_out"], 1, "the first turn, with its image, goes");
    let messages = fitted["payload"]["messages"].as_array().unwrap();
    assert!(messages.len() < whole["payload"]["messages"].as_array().unwrap().len());
    assert_eq!(fitted["payload"]["system"][0]["cache_control"], json!({"type": "ephemeral"}));
    // Too small a budget: said on stderr, exit 1, nothing on stdout.
    let refused = db.run(&["show", "rich", "--format", "openai_chat", "--fit", "5"]);
    assert_eq!(code(&refused), 1, "{}", text(&refused.stderr));
    assert!(refused.stdout.is_empty());
    assert!(text(&refused.stderr).contains("max_tokens 5"), "{}", text(&refused.stderr));
    let without = db.run(&["show", "rich", "--fit", "60"]);
    assert_eq!(code(&without), 2, "--fit goes with --format");
}

#[test]
fn show_and_export_of_a_session_that_is_not_there_exit_1() {
    let db = Db::new();
    for args in [&["show", "nope"][..], &["export", "nope"], &["show", "nope", "--format", "openai_chat"]] {
        let out = db.run(args);
        assert_eq!(code(&out), 1, "{args:?}");
        assert_eq!(text(&out.stderr), "convo: no session \"nope\"\n");
        assert!(out.stdout.is_empty());
    }
}

#[test]
fn export_then_import_gives_the_same_session() {
    let db = Db::new();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("demo.json");
    let exported = db.run(&["export", "demo", "-o", file.to_str().unwrap()]);
    assert_eq!(code(&exported), 0, "{}", text(&exported.stderr));
    let dict: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(json_out(&db.run(&["export", "demo"])), dict, "stdout and -o write the same");
    assert_eq!(dict["messages"].as_array().unwrap().len(), 4);

    let other = Db::new();
    let broken = dir.path().join("broken.json");
    std::fs::write(&broken, r#"{"session_id":"x","messages":[{"role":"robot"}]}"#).unwrap();
    let files = [file.to_str().unwrap(), broken.to_str().unwrap()];
    let imported = other.run(&[&["import", "--json"][..], &files].concat());
    assert_eq!(code(&imported), 1, "a refused file is reported");
    let report = json_out(&imported);
    assert_eq!(report["imported"], json!([]), "demo exists there already");
    assert_eq!(report["refused"][0]["file"], files[0]);
    assert_eq!(report["refused"][0]["error"], "session already exists: demo");
    assert_eq!(report["refused"][1]["file"], files[1]);
    assert!(report["refused"][1]["error"].as_str().unwrap().starts_with("messages[0].role: unknown variant `robot`"));

    let replaced = other.run(&["import", "--json", "--replace", files[0]]);
    assert_eq!(code(&replaced), 0, "{}", text(&replaced.stderr));
    assert_eq!(
        json_out(&replaced),
        json!({"imported": [{"file": files[0], "session_id": "demo", "message_count": 4,
                             "repaired": {"added": 0, "dropped": 0}}], "refused": []})
    );
    assert_eq!(json_out(&other.run(&["export", "demo"])), dict);

    let fresh = tempfile::tempdir().unwrap();
    let store = format!("sqlite:{}", fresh.path().join("new.db").display());
    let summary = convo(&["--store", &store, "import", files[0]]);
    assert_eq!((code(&summary), text(&summary.stdout)), (0, "imported 1 session (4 messages)\n".to_owned()));
    let piped = convo_with(&["--store", &store, "import", "--replace", "-"], &std::fs::read(&file).unwrap());
    assert_eq!(code(&piped), 0, "`-` reads stdin: {}", text(&piped.stderr));
}

#[test]
fn rm_deletes_and_says_which_were_not_there() {
    let db = Db::new();
    let removed = db.run(&["rm", "demo", "nope", "--json"]);
    assert_eq!(code(&removed), 1);
    assert_eq!(json_out(&removed), json!({"deleted": ["demo"], "not_found": ["nope"]}));
    let removed = db.run(&["rm", "rich"]);
    assert_eq!((code(&removed), text(&removed.stdout)), (0, "deleted 1 session\n".to_owned()));
    let left = json_out(&db.run(&["ls", "--json"]));
    assert_eq!(left.as_array().unwrap().iter().map(|s| s["session_id"].clone()).collect::<Vec<_>>(), ["agent-1"]);
}

#[test]
fn gc_deletes_only_the_sessions_not_updated_for_that_long() {
    let db = Db::new();
    // Made now, by the system clock; the others were made "in 2000".
    let fresh = br#"{"jsonrpc":"2.0","id":1,"method":"session/create","params":{"session_id":"today"}}"#;
    assert!(convo_with(&["--store", &db.store], fresh).status.success());
    let dry = db.run(&["gc", "--older-than", "30d", "--dry-run", "--json"]);
    assert_eq!(code(&dry), 0, "{}", text(&dry.stderr));
    let dry = json_out(&dry);
    assert_eq!(dry["dry_run"], true);
    let ids = |v: &Value| v["sessions"].as_array().unwrap().iter().map(|s| s["session_id"].clone()).collect::<Vec<_>>();
    assert_eq!(ids(&dry), ["agent-1", "rich", "demo"]);
    assert_eq!(json_out(&db.run(&["ls", "--json"])).as_array().unwrap().len(), 4, "a dry run deletes nothing");
    let done = json_out(&db.run(&["gc", "--older-than", "30d", "--json"]));
    assert_eq!(
        (done["dry_run"].clone(), ids(&done)),
        (json!(false), vec![json!("agent-1"), json!("rich"), json!("demo")])
    );
    let left = json_out(&db.run(&["ls", "--json"]));
    assert_eq!(left[0]["session_id"], "today");
    assert_eq!(left.as_array().unwrap().len(), 1);
    let none = db.run(&["gc", "--older-than", "30d"]);
    assert!(text(&none.stdout).starts_with("deleted 0 sessions not updated since "));
    assert_eq!(code(&db.run(&["gc", "--older-than", "soon"])), 2, "a bad age is a usage error");
}

#[test]
fn fsck_passes_a_sound_database() {
    let db = Db::new();
    let checked = db.run(&["fsck", "--json"]);
    assert_eq!(code(&checked), 0, "{}", text(&checked.stdout));
    assert_eq!(json_out(&checked), json!({"findings": []}));
    assert_eq!(text(&db.run(&["fsck"]).stdout), "no problems found (sqlite store)\n");
}

/// Runs fsck on a database damaged by `damage` (SQL on the file); its findings.
fn fsck_after(damage: &str) -> Vec<String> {
    let db = Db::new();
    let conn = rusqlite::Connection::open(&db.path).unwrap();
    // Damage as a tool that ignores convo's foreign keys would.
    conn.execute_batch(&format!("PRAGMA foreign_keys = OFF; {damage}")).unwrap();
    drop(conn);
    let checked = db.run(&["fsck", "--json"]);
    assert_eq!(code(&checked), 1, "a finding exits 1: {}", text(&checked.stderr));
    let report = json_out(&checked);
    let findings: Vec<String> = serde_json::from_value(report["findings"].clone()).unwrap();
    assert!(!findings.is_empty());
    let readable = text(&db.run(&["fsck"]).stdout);
    assert!(readable.ends_with(&format!(
        "{} found\n",
        if findings.len() == 1 { "1 problem".into() } else { format!("{} problems", findings.len()) }
    )));
    findings
}

#[test]
fn fsck_finds_orphan_rows() {
    let findings = fsck_after(
        "INSERT INTO messages (place, id, role, content, created_at) \
         VALUES (999 << 32, 'x', 'user', '\"hi\"', '2000-01-01T00:00:00.000000Z');",
    );
    assert_eq!(findings, ["1 message row(s) belong to segment 999, which does not exist (orphan rows)"]);
    let findings = fsck_after("INSERT INTO segments (id, parent, base) VALUES (500, NULL, 0);");
    assert_eq!(findings, ["segment 500 is used by no session; its 0 message row(s) are orphans"]);
}

#[test]
fn fsck_finds_a_broken_segment_chain() {
    // demo's history is its three last messages; take the middle one away.
    let findings = fsck_after(
        "DELETE FROM messages WHERE id = (SELECT m.id FROM messages m JOIN sessions s \
         ON s.segment = m.segment AND m.seq = s.start + 1 WHERE s.session_id = 'demo');",
    );
    assert!(findings.iter().any(|f| f.starts_with("session \"demo\": positions ")), "{findings:?}");
    let findings = fsck_after(
        "UPDATE segments SET parent = id, base = 7 WHERE id = (SELECT segment FROM sessions WHERE session_id = 'demo');",
    );
    assert!(findings.iter().any(|f| f.contains("loops at segment")), "{findings:?}");
}

#[test]
fn fsck_finds_a_history_that_breaks_the_rules() {
    // The result of c2 gone: the call is left unanswered in the middle of rich.
    let findings = fsck_after("UPDATE messages SET role = 'user', tool_call_id = NULL WHERE tool_call_id = 'c2';");
    assert_eq!(
        findings,
        [
            r#"session "rich": message 2: the calls before it have no result: "c1", "c2""#,
            r#"session "rich": message 3: invalid sequence: no tool call is waiting for a result, so the result for "c1" is not accepted"#,
        ]
    );
}

#[test]
fn a_store_that_cannot_be_opened_exits_3() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite:{}", dir.path().join("no/such/folder/x.db").display());
    let out = convo(&["--store", &store, "ls"]);
    assert_eq!(code(&out), 3);
    assert!(text(&out.stderr).starts_with("convo: cannot open the store: "), "{}", text(&out.stderr));
    // A mistyped path is not made into an empty database.
    let missing = dir.path().join("typo.db");
    let out = convo(&["--store", &format!("sqlite:{}", missing.display()), "fsck"]);
    assert_eq!(code(&out), 3);
    assert!(text(&out.stderr).contains("there is no database at"), "{}", text(&out.stderr));
    assert!(!missing.exists());
}

#[test]
fn usage_errors_exit_2() {
    assert_eq!(code(&convo(&["ls", "--bogus"])), 2);
    assert_eq!(code(&convo(&["show"])), 2);
    let misplaced = convo(&["--framing", "lsp", "ls"]);
    assert_eq!(code(&misplaced), 2);
    assert!(text(&misplaced.stderr).contains("--framing is an option of serving"), "{}", text(&misplaced.stderr));
}

#[test]
fn help_has_examples_and_exit_codes() {
    let help = text(&convo(&["--help"]).stdout);
    assert!(help.contains("Examples:") && help.contains("Exit codes"), "{help}");
    for sub in ["ls", "show", "export", "import", "rm", "gc", "fsck", "replay", "completions", "man"] {
        let help = text(&convo(&[sub, "--help"]).stdout);
        assert!(help.contains("Examples:"), "{sub} --help:\n{help}");
    }
    assert!(text(&convo(&["import", "--help"]).stdout).contains("Provider request bodies"));
}

#[test]
fn serve_says_explicitly_what_convo_alone_does() {
    let script = std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/session.ndjson")).unwrap();
    let alone = convo_with(&["--deterministic", "--store", "memory"], &script);
    let explicit = convo_with(&["--deterministic", "--store", "memory", "serve", "--framing", "ndjson"], &script);
    assert_eq!(code(&alone), 0);
    assert_eq!(alone.stdout, explicit.stdout);
}

/// `--deterministic` replies in the order received however many requests wait at once:
/// 20,000 appends pipelined, far more than the writer's queue (1,024) holds, with most
/// replies made in tasks. Before the replies kept one order, a reply made at once passed
/// hundreds made before it that waited in their tasks, some 45 times in such a run.
#[test]
fn deterministic_replies_come_in_the_order_received_when_thousands_are_pipelined() {
    const APPENDS: u64 = 20_000;
    let mut script = String::from(
        "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"session/create\",\"params\":{\"session_id\":\"p\"}}\n",
    );
    for id in 1..=APPENDS {
        let params = json!({"session_id": "p", "text": format!("message {id}")});
        script += &format!("{}\n", json!({"jsonrpc": "2.0", "id": id, "method": "session/add_user", "params": params}));
    }
    let served =
        convo_with(&["--deterministic", "--store", "memory", "serve", "--framing", "ndjson"], script.as_bytes());
    assert_eq!(code(&served), 0, "{}", text(&served.stderr));
    let replies: Vec<Value> = text(&served.stdout).lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    let ids: Vec<u64> = replies.iter().map(|reply| reply["id"].as_u64().unwrap()).collect();
    assert_eq!(ids.len() as u64, APPENDS + 1);
    if let Some(at) = ids.iter().zip(0..).position(|(id, n)| *id != n) {
        panic!("reply {at} answers request {}; replies from {at}: {:?}", ids[at], &ids[at..(at + 4).min(ids.len())]);
    }
    // And each appended in that order: the Nth append is the Nth message.
    for reply in &replies[1..] {
        assert_eq!(reply["result"]["index"].as_u64(), Some(reply["id"].as_u64().unwrap() - 1), "{reply}");
    }
}

#[test]
fn schema_completions_and_man_pages() {
    let schema = convo(&["schema"]);
    let document =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("protocol/openrpc.json")).unwrap();
    assert_eq!(text(&schema.stdout).trim_end(), document.trim_end());
    for shell in ["bash", "zsh", "fish"] {
        let out = convo(&["completions", shell]);
        assert_eq!(code(&out), 0);
        let script = text(&out.stdout);
        assert!(script.contains("convo") && script.contains("replay") && script.contains("older-than"), "{shell}");
    }
    let page = text(&convo(&["man"]).stdout);
    assert!(page.starts_with(".ie") || page.starts_with(".TH"), "{page}");
    assert!(page.contains("convo\\-replay") || page.contains("replay"), "{page}");
    let sub = text(&convo(&["man", "gc"]).stdout);
    assert!(sub.contains("convo\\-gc") && sub.contains("older\\-than"), "{sub}");
    assert_eq!(code(&convo(&["man", "nope"])), 2);
}
