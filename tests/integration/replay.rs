//! Scripted protocol tests (issue 16): `convo replay` passes on the project's example
//! scripts and fails, naming the request, when an expected reply is altered; the same
//! input gives the same bytes; and every example in protocol/README.md is a reply that
//! `convo replay` gives to one of the scripts in examples/, so the two cannot drift.

use std::path::{Path, PathBuf};

use crate::cli::{convo, convo_with, text};

fn project(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

/// The example scripts, each with its expected replies beside it.
fn scripts() -> Vec<(PathBuf, PathBuf)> {
    let mut found: Vec<(PathBuf, PathBuf)> = std::fs::read_dir(project("examples"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "ndjson") && !p.to_string_lossy().ends_with(".expected.ndjson"))
        .map(|p| (p.clone(), p.with_extension("expected.ndjson")))
        .collect();
    found.sort();
    assert!(found.len() >= 3, "{found:?}");
    found
}

#[test]
fn every_example_script_gives_its_expected_replies() {
    for (script, expected) in scripts() {
        assert!(expected.exists(), "{} has no expected replies beside it", script.display());
        let out = convo(&["replay", script.to_str().unwrap(), "--expect", expected.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(0), "{}:\n{}{}", script.display(), text(&out.stdout), text(&out.stderr));
        assert!(out.stdout.is_empty());
        let printed = convo(&["replay", script.to_str().unwrap()]);
        assert_eq!(printed.stdout, std::fs::read(&expected).unwrap(), "without --expect it prints the replies");
    }
}

#[test]
fn an_altered_reply_is_a_difference_that_names_its_request() {
    let dir = tempfile::tempdir().unwrap();
    let expected = std::fs::read_to_string(project("examples/session.expected.ndjson")).unwrap();
    let altered = expected.replacen(
        r#""id":14,"result":{"removed":6,"revision":8}"#,
        r#""id":14,"result":{"removed":6,"revision":9}"#,
        1,
    );
    assert_ne!(altered, expected, "the reply to alter is there");
    let file = dir.path().join("altered.ndjson");
    std::fs::write(&file, &altered).unwrap();
    let script = project("examples/session.ndjson");
    let out = convo(&["replay", script.to_str().unwrap(), "--expect", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let diff = text(&out.stdout);
    assert!(diff.starts_with("request id 14: the reply differs\n"), "{diff}");
    assert!(diff.contains(" -     \"revision\": 9\n") && diff.contains(" +     \"revision\": 8\n"), "{diff}");
    assert!(!diff.contains("request id 13"), "only what differs: {diff}");
    assert!(text(&out.stderr).contains("1 of 23 differ"), "{}", text(&out.stderr));

    // A reply left out of the file is a difference too.
    let dropped: String = expected.lines().filter(|l| !l.contains(r#""id":3,"#)).map(|l| format!("{l}\n")).collect();
    std::fs::write(&file, dropped).unwrap();
    let out = convo(&["replay", script.to_str().unwrap(), "--expect", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stdout).starts_with("request id 3: a reply not expected\n"), "{}", text(&out.stdout));

    // --update writes what the script gives.
    let out = convo(&["replay", script.to_str().unwrap(), "--expect", file.to_str().unwrap(), "--update"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), expected);
}

#[test]
fn deterministic_runs_give_the_same_bytes() {
    let script = std::fs::read(project("examples/session.ndjson")).unwrap();
    let first = convo_with(&["--deterministic", "--store", "memory"], &script);
    let second = convo_with(&["--deterministic", "--store", "memory"], &script);
    assert_eq!(first.status.code(), Some(0));
    assert_eq!(text(&first.stdout), text(&second.stdout));
    assert!(text(&first.stdout).contains(r#""message_id":"00000000-0000-7000-8000-000000000001""#));
    assert!(text(&first.stdout).contains(r#""created_at":"2000-01-01T00:00:00.000000Z""#));
    // Serving the script and replaying it give the same replies.
    assert_eq!(first.stdout, std::fs::read(project("examples/session.expected.ndjson")).unwrap());
    let plain = convo_with(&["--store", "memory"], &script);
    assert!(!text(&plain.stdout).contains("00000000-0000-7000-8000-"), "without the flag: UUID v7s");
}

/// One example of protocol/README.md: the requests (`→`) and replies (`←`) of a code
/// block, each entry's continuation lines joined to it.
struct Example {
    requests: Vec<String>,
    replies: Vec<String>,
}

fn readme_examples() -> Vec<Example> {
    let readme = std::fs::read_to_string(project("protocol/README.md")).unwrap();
    let mut examples = Vec::new();
    for block in readme.split("```").skip(1).step_by(2) {
        let mut entries: Vec<(char, String)> = Vec::new();
        for line in block.lines() {
            if let Some(rest) = line.strip_prefix("→ ") {
                entries.push(('→', rest.to_owned()));
            } else if let Some(rest) = line.strip_prefix("← ") {
                entries.push(('←', rest.to_owned()));
            } else if let (Some((_, entry)), true) = (entries.last_mut(), line.starts_with(' ')) {
                entry.push_str(line.trim_start());
            }
        }
        if entries.is_empty() {
            continue;
        }
        let pick = |arrow| entries.iter().filter(|(a, _)| *a == arrow).map(|(_, e)| e.clone()).collect();
        examples.push(Example { requests: pick('→'), replies: pick('←') });
    }
    examples
}

/// Whether `reply` is what `pattern` shows of it: `…` stands for anything left out.
fn shows(pattern: &str, reply: &str) -> bool {
    let mut pieces = pattern.split('…');
    let first = pieces.next().unwrap_or_default();
    let Some(mut rest) = reply.strip_prefix(first) else { return false };
    let pieces: Vec<&str> = pieces.collect();
    for (i, piece) in pieces.iter().enumerate() {
        let last = i + 1 == pieces.len();
        if last {
            return rest.ends_with(piece);
        }
        match rest.find(piece) {
            Some(at) => rest = &rest[at + piece.len()..],
            None => return false,
        }
    }
    rest.is_empty()
}

#[test]
fn the_protocol_readme_examples_are_replay_output() {
    // Every request line of every script, with the replies its script gave.
    let mut runs: Vec<(Vec<serde_json::Value>, Vec<String>)> = Vec::new();
    for (script, expected) in scripts() {
        let requests = std::fs::read_to_string(&script).unwrap();
        let requests = requests.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
        let replies = std::fs::read_to_string(&expected).unwrap().lines().map(str::to_owned).collect();
        runs.push((requests, replies));
    }
    let mut checked = 0;
    for example in readme_examples() {
        // A dialogue with the host (convo's own `convo:N` requests) needs a host: no script.
        if example.replies.iter().any(|r| r.contains(r#""id":"convo:"#)) {
            continue;
        }
        let first: serde_json::Value = serde_json::from_str(&example.requests[0])
            .unwrap_or_else(|e| panic!("a README request is not JSON ({e}): {}", example.requests[0]));
        let (_, replies) = runs
            .iter()
            .find(|(requests, _)| requests.contains(&first))
            .unwrap_or_else(|| panic!("no script in examples/ sends this README request: {}", example.requests[0]));
        for shown in &example.replies {
            assert!(
                replies.iter().any(|r| shows(shown, r)),
                "protocol/README.md shows a reply that replay does not give:\n{shown}\nthe script's replies:\n{}",
                replies.join("\n")
            );
            checked += 1;
        }
    }
    assert!(checked >= 25, "only {checked} README replies were checked");
}

#[test]
fn elisions_stand_for_anything() {
    assert!(shows(r#"{"a":1,…,"z":2}"#, r#"{"a":1,"b":[3],"z":2}"#));
    assert!(shows(r#"{"a":1}"#, r#"{"a":1}"#));
    assert!(!shows(r#"{"a":1}"#, r#"{"a":2}"#));
    assert!(!shows(r#"{"a":1,…,"z":2}"#, r#"{"a":1,"z":3}"#));
    assert!(shows(r#"…"z":2}"#, r#"{"a":1,"z":2}"#));
}
