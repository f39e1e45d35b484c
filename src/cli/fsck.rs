//! `convo fsck`: the store's own checks (for SQLite: `PRAGMA integrity_check`, orphan
//! rows, segment chains, images) and the conversation rules over every history.

use std::io::Write as _;

use clap::Args;
use serde::Serialize;

use crate::ops::Ops;

use crate::cli::output::{self, FOUND, Fail, paint, plural, style};

#[derive(Args, Debug)]
#[command(after_long_help = "Exit code 1 when anything is found.\n\nExamples:\n  convo fsck\n  \
                             convo --store sqlite:copy.db fsck --json")]
pub struct FsckArgs {
    /// Print `{"findings": [sentences]}`.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct Report<'a> {
    findings: &'a [String],
}

pub async fn fsck(ops: &Ops, args: &FsckArgs) -> Result<u8, Fail> {
    let findings = ops.check().await?;
    let code = if findings.is_empty() { 0 } else { FOUND };
    if args.json {
        output::json(&Report { findings: &findings })?;
        return Ok(code);
    }
    let mut out = output::stdout();
    for finding in &findings {
        writeln!(out, "{finding}")?;
    }
    let summary = match findings.len() {
        0 => paint(style::OK, format!("no problems found ({} store)", ops.store_kind())),
        n => paint(style::WARN, format!("{} found", plural(n, "problem"))),
    };
    writeln!(out, "{summary}")?;
    Ok(code)
}
