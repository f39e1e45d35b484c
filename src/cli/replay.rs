//! `convo replay SCRIPT.ndjson [--expect REPLIES.ndjson] [--update]`: scripted protocol
//! tests. The script runs through a fresh in-memory server in deterministic mode
//! (`crate::mint`'s counters; `LocalServer`, the real server code in-process), one frame
//! at a time, until its end or `exit`. Without `--expect` the replies are printed, one
//! per line. With it they are compared with the expected file's, matched by request id
//! (notifications by method and order), and each difference is shown as a line diff of
//! the two replies, indented; `--update` rewrites the expected file instead.

use std::collections::HashMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::Args;
use serde_json::Value;
use similar::{ChangeTag, TextDiff};

use crate::rpc::LocalServer;
use crate::store::MemoryStore;

use crate::cli::output::{self, FOUND, Fail, paint, plural, style};

const HELP: &str = "\
The script is NDJSON: one request, notification or batch per line; blank lines are
skipped. It runs through a fresh in-memory server in deterministic mode (ids counted
from 00000000-0000-7000-8000-000000000001, a clock from 2000-01-01T00:00:00Z moving
1 ms per reading), each line answered before the next is sent, up to the end or `exit`.
What the server writes — replies, and session/changed notifications — is printed one
per line, so the same script prints the same bytes everywhere.

With --expect, the replies are compared with the file's instead: matched by request
id (notifications by method and order), each difference shown as a diff of the two
replies naming the request id; exit code 1 on any difference. With --update the file
is rewritten with the replies.

Examples:
  convo replay examples/session.ndjson
  convo replay examples/session.ndjson --expect examples/session.expected.ndjson
  convo replay examples/session.ndjson --expect examples/session.expected.ndjson --update";

#[derive(Args, Debug)]
#[command(after_long_help = HELP)]
pub struct ReplayArgs {
    /// The script: NDJSON requests (`-` reads stdin).
    #[arg(value_name = "SCRIPT")]
    script: PathBuf,
    /// The replies expected, NDJSON; exit code 1 when the replies differ.
    #[arg(long, value_name = "REPLIES")]
    expect: Option<PathBuf>,
    /// Write the replies to the --expect file instead of comparing.
    #[arg(long, requires = "expect")]
    update: bool,
}

pub fn run(args: &ReplayArgs) -> Result<u8, Fail> {
    let script = read(&args.script)?;
    let replies = replay(&script)?;
    let Some(expect) = &args.expect else {
        let mut out = std::io::stdout().lock();
        for reply in &replies {
            writeln!(out, "{reply}")?;
        }
        out.flush()?;
        return Ok(0);
    };
    if args.update {
        let text: String = replies.iter().map(|r| format!("{r}\n")).collect();
        std::fs::write(expect, text).map_err(|e| Fail::failed(format!("cannot write {}: {e}", expect.display())))?;
        eprintln!("convo: wrote {} to {}", plural(replies.len(), "reply"), expect.display());
        return Ok(0);
    }
    let expected = read(expect)?;
    let expected: Vec<&str> = expected.lines().filter(|l| !l.trim().is_empty()).collect();
    let differences = compare(&keyed(expected.iter().copied()), &keyed(replies.iter().map(String::as_str)));
    let mut out = output::stdout();
    for difference in &differences {
        write!(out, "{difference}")?;
    }
    out.flush()?;
    if differences.is_empty() {
        eprintln!("convo: {} match {}", plural(expected.len(), "reply"), expect.display());
        return Ok(0);
    }
    let of = expected.len().max(replies.len());
    eprintln!("convo: {} of {of} differ from {}", differences.len(), expect.display());
    Ok(FOUND)
}

fn read(path: &Path) -> Result<String, Fail> {
    let text =
        if path == Path::new("-") { std::io::read_to_string(std::io::stdin()) } else { std::fs::read_to_string(path) };
    text.map_err(|e| Fail::failed(format!("cannot read {}: {e}", path.display())))
}

/// Runs the script's lines through a fresh server; what it wrote, in order.
fn replay(script: &str) -> Result<Vec<String>, Fail> {
    let mut server = LocalServer::new(Arc::new(MemoryStore::default()), 64 * 1024 * 1024)
        .map_err(|e| Fail::failed(format!("cannot start the server: {e}")))?;
    let mut replies = Vec::new();
    for line in script.lines().filter(|l| !l.trim().is_empty()) {
        replies.extend(server.frame(line.as_bytes()));
        if server.exited() {
            break;
        }
    }
    Ok(replies)
}

/// Each reply (a batch reply's elements one by one) under the name of what it answers:
/// `request id 5`; a notification as `session/changed notification 2`. A name seen
/// again gets its count (`request id 5 (2)`).
fn keyed<'a>(lines: impl Iterator<Item = &'a str>) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    for (n, line) in lines.enumerate() {
        let elements = match serde_json::from_str::<Value>(line) {
            Ok(Value::Array(elements)) => elements,
            Ok(single) => vec![single],
            Err(_) => {
                out.push((format!("line {} (not JSON)", n + 1), line.to_owned()));
                continue;
            }
        };
        for element in elements {
            let name = match (element.get("method").and_then(Value::as_str), element.get("id")) {
                // convo's own request to the client (`runtime/run`, id `convo:N`).
                (Some(method), Some(id)) => format!("{method} request {id}"),
                (Some(method), None) => format!("{method} notification"),
                (None, Some(id)) => format!("request id {id}"),
                (None, None) => "reply without an id".to_owned(),
            };
            let count = seen.entry(name.clone()).and_modify(|c| *c += 1).or_insert(1);
            let name = match (*count, element.get("method"), element.get("id")) {
                (_, Some(_), None) => format!("{name} {count}"),
                (1, ..) => name,
                _ => format!("{name} ({count})"),
            };
            out.push((name, element.to_string()));
        }
    }
    out
}

/// The differences, in the expected file's order, then the replies it does not expect.
fn compare(expected: &[(String, String)], actual: &[(String, String)]) -> Vec<String> {
    let actual_by_name: HashMap<&str, &str> = actual.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let expected_names: std::collections::HashSet<&str> = expected.iter().map(|(k, _)| k.as_str()).collect();
    let mut out = Vec::new();
    for (name, want) in expected {
        match actual_by_name.get(name.as_str()) {
            Some(got) if got == want => {}
            Some(got) => {
                out.push(format!("{}\n{}", paint(style::HEADER, format!("{name}: the reply differs")), diff(want, got)))
            }
            None => out.push(format!(
                "{}\n{}",
                paint(style::HEADER, format!("{name}: no reply, one was expected")),
                diff(want, "")
            )),
        }
    }
    for (name, got) in actual.iter().filter(|(k, _)| !expected_names.contains(k.as_str())) {
        out.push(format!("{}\n{}", paint(style::HEADER, format!("{name}: a reply not expected")), diff("", got)));
    }
    out
}

/// A line diff of two replies, each indented as JSON; `-` expected, `+` actual.
fn diff(want: &str, got: &str) -> String {
    let pretty = |s: &str| match serde_json::from_str::<Value>(s) {
        Ok(v) => serde_json::to_string_pretty(&v).unwrap_or_else(|_| s.to_owned()) + "\n",
        Err(_) if s.is_empty() => String::new(),
        Err(_) => format!("{s}\n"),
    };
    let (want, got) = (pretty(want), pretty(got));
    let mut out = String::new();
    for change in TextDiff::from_lines(&want, &got).iter_all_changes() {
        let line = change.to_string_lossy();
        let line = line.trim_end_matches('\n');
        out.push_str(&match change.tag() {
            ChangeTag::Equal => format!("   {line}\n"),
            ChangeTag::Delete => format!("{}\n", paint(style::WARN, format!(" - {line}"))),
            ChangeTag::Insert => format!("{}\n", paint(style::OK, format!(" + {line}"))),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_are_named_by_request_id_and_notifications_by_order() {
        let lines = [
            r#"{"jsonrpc":"2.0","id":1,"result":null}"#,
            r#"[{"jsonrpc":"2.0","id":"a","result":1},{"jsonrpc":"2.0","id":2,"result":2}]"#,
            r#"{"jsonrpc":"2.0","method":"session/changed","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":3}"#,
            "junk",
        ];
        let names: Vec<String> = keyed(lines.into_iter()).into_iter().map(|(k, _)| k).collect();
        assert_eq!(
            names,
            [
                "request id 1",
                "request id \"a\"",
                "request id 2",
                "session/changed notification 1",
                "request id 1 (2)",
                "line 5 (not JSON)"
            ]
        );
    }

    #[test]
    fn a_difference_names_the_request_and_shows_both_sides() {
        let want = keyed([r#"{"id":1,"result":{"a":1,"b":2}}"#, r#"{"id":2,"result":0}"#].into_iter());
        let got = keyed([r#"{"id":2,"result":0}"#, r#"{"id":1,"result":{"a":1,"b":3}}"#].into_iter());
        let found = compare(&want, &got);
        assert_eq!(found.len(), 1);
        let plain = anstream::adapter::strip_str(&found[0]).to_string();
        assert!(plain.starts_with("request id 1: the reply differs\n"), "{plain}");
        assert!(plain.contains(" -     \"b\": 2\n") && plain.contains(" +     \"b\": 3\n"), "{plain}");
        assert!(compare(&want, &want).is_empty());
        let missing = compare(&want, &want[..1]);
        assert!(missing[0].contains("request id 2: no reply"), "{missing:?}");
    }
}
