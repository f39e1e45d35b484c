//! `convo ls`, `convo rm` and `convo gc`: sessions as a whole.

use std::io::Write as _;
use std::time::Duration;

use clap::Args;
use serde::Serialize;

use crate::ops::Ops;
use crate::session::SessionInfo;

use crate::cli::output::{self, FOUND, Fail, paint, plural, style, table, when};

#[derive(Args, Debug)]
#[command(after_long_help = "Examples:\n  convo ls\n  convo ls --limit 5\n  convo ls --json | jq -r '.[].session_id'")]
pub struct LsArgs {
    /// List at most N sessions (the newest).
    #[arg(long, value_name = "N")]
    limit: Option<usize>,
    /// Print a JSON array of SessionInfo objects (as session/get returns them).
    #[arg(long)]
    json: bool,
}

pub async fn ls(ops: &Ops, args: &LsArgs) -> Result<u8, Fail> {
    let sessions = ops.sessions(args.limit).await?;
    if args.json {
        output::json(&sessions)?;
        return Ok(0);
    }
    listing(&sessions)?;
    Ok(0)
}

/// Sessions as a table: id, title, messages, revision, last update.
fn listing(sessions: &[SessionInfo]) -> Result<(), Fail> {
    let rows: Vec<Vec<String>> = sessions
        .iter()
        .map(|s| {
            vec![
                s.session_id.clone(),
                s.title.clone().unwrap_or_else(|| "-".into()),
                s.message_count.to_string(),
                s.revision.to_string(),
                when(&s.updated_at),
            ]
        })
        .collect();
    let mut out = output::stdout();
    table(&mut out, &["SESSION", "TITLE", "MESSAGES", "REVISION", "UPDATED (UTC)"], &rows)?;
    out.flush()?;
    Ok(())
}

#[derive(Args, Debug)]
#[command(after_long_help = "Examples:\n  convo rm demo\n  convo ls --json | jq -r '.[].session_id' | xargs convo rm")]
pub struct RmArgs {
    /// The sessions to delete.
    #[arg(required = true, value_name = "ID")]
    ids: Vec<String>,
    /// Print `{"deleted": [ids], "not_found": [ids]}`.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct Removed {
    deleted: Vec<String>,
    not_found: Vec<String>,
}

/// Exit code 1 when a session named is not there (the others are deleted).
pub async fn rm(ops: &Ops, args: &RmArgs) -> Result<u8, Fail> {
    let mut done = Removed { deleted: Vec::new(), not_found: Vec::new() };
    for id in &args.ids {
        match ops.delete(id, None).await {
            Ok(()) => done.deleted.push(id.clone()),
            Err(crate::Error::SessionNotFound(_)) => done.not_found.push(id.clone()),
            Err(e) => return Err(e.into()),
        }
    }
    if args.json {
        output::json(&done)?;
    } else {
        for id in &done.not_found {
            eprintln!("convo: no session {}", crate::error::quote(id));
        }
        let mut out = output::stdout();
        writeln!(out, "deleted {}", plural(done.deleted.len(), "session"))?;
    }
    Ok(if done.not_found.is_empty() { 0 } else { FOUND })
}

#[derive(Args, Debug)]
#[command(after_long_help = "Examples:\n  convo gc --older-than 30d --dry-run\n  convo gc --older-than 12h")]
pub struct GcArgs {
    /// Delete the sessions not updated for this long: 30d, 12h, 2w, 90min.
    #[arg(long, value_name = "AGE", value_parser = humantime::parse_duration)]
    older_than: Duration,
    /// Only list what would be deleted.
    #[arg(long)]
    dry_run: bool,
    /// Print `{"cutoff", "dry_run", "sessions": [SessionInfo]}`.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct Collected<'a> {
    cutoff: &'a str,
    dry_run: bool,
    sessions: &'a [SessionInfo],
}

/// Deletes the sessions last updated before now less `--older-than` (by the system
/// clock, also under `--deterministic`), each unless it changed meanwhile. Forks keep
/// their history.
pub async fn gc(ops: &Ops, args: &GcArgs) -> Result<u8, Fail> {
    let age = time::Duration::try_from(args.older_than).map_err(|e| Fail::usage(format!("--older-than: {e}")))?;
    let cutoff = time::OffsetDateTime::now_utc()
        .checked_sub(age)
        .filter(|t| t.year() >= 0)
        .ok_or_else(|| Fail::usage("--older-than: reaches back before the year 0"))?;
    let cutoff = crate::session::canonical(cutoff);
    let stale = ops.updated_before(&cutoff).await?;
    let sessions = if args.dry_run { stale } else { ops.delete_unchanged(stale).await? };
    if args.json {
        output::json(&Collected { cutoff: &cutoff, dry_run: args.dry_run, sessions: &sessions })?;
        return Ok(0);
    }
    let mut out = output::stdout();
    let verb = if args.dry_run { "would delete" } else { "deleted" };
    let since = when(&cutoff);
    let summary = format!("{verb} {} not updated since {since} UTC", plural(sessions.len(), "session"));
    if sessions.is_empty() {
        writeln!(out, "{}", paint(style::DIM, summary))?;
        return Ok(0);
    }
    drop(out);
    listing(&sessions)?;
    writeln!(output::stdout(), "{summary}")?;
    Ok(0)
}
