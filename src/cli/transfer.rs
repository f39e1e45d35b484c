//! `convo export` and `convo import`: sessions as to_dict JSON files, through the same
//! `to_dict` and `from_dict` as the protocol's (`crate::ops`), so an import is checked
//! against the conversation rules exactly as `session/from_dict` checks it.

use std::io::{IsTerminal as _, Read as _, Write as _};
use std::path::{Path, PathBuf};

use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::Serialize;
use serde_json::Value;

use crate::ops::{DictData, DictSource, Imported, Ops};
use crate::session::Repaired;

use crate::cli::output::{self, FOUND, Fail, FormatArg, paint, plural, style};

#[derive(Args, Debug)]
#[command(after_long_help = "Examples:\n  convo export demo > demo.json\n  convo export demo -o demo.json")]
pub struct ExportArgs {
    /// The session.
    #[arg(value_name = "ID")]
    id: String,
    /// Write to FILE instead of stdout (`-` is stdout).
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
}

/// Writes `session/to_dict`'s result, indented.
pub async fn export(ops: &Ops, args: &ExportArgs) -> Result<u8, Fail> {
    // As a value, so that the messages are indented too (they come as JSON text).
    let dict = serde_json::to_value(ops.to_dict(&args.id).await?).map_err(|e| Fail::failed(e.to_string()))?;
    match args.output.as_deref().filter(|p| *p != Path::new("-")) {
        None => output::json(&dict)?,
        Some(path) => {
            let mut text = serde_json::to_vec_pretty(&dict).map_err(|e| Fail::failed(e.to_string()))?;
            text.push(b'\n');
            std::fs::write(path, text).map_err(|e| Fail::failed(format!("cannot write {}: {e}", path.display())))?;
        }
    }
    Ok(0)
}

const IMPORT_HELP: &str = "\
Each FILE holds one session as JSON: what `convo export` and session/to_dict write, or
the generic agent library's to_dict (`system_prompt` may stand for `system`).
Provider request bodies (what `convo show --format` writes) are read with --format,
each assistant turn kept whole in its native form. The messages are checked against
the conversation rules as session/from_dict checks them.

Exit code 1 when any file was refused; the others are imported.

Examples:
  convo import demo.json
  convo import exports/*.json --replace
  convo export demo | convo --store sqlite:other.db import -
  convo import --format anthropic_messages --session-id copy body.json";

#[derive(Args, Debug)]
#[command(after_long_help = IMPORT_HELP)]
pub struct ImportArgs {
    /// to_dict JSON files (`-` reads stdin).
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
    /// Replace a session with the same id (its revision count goes on).
    #[arg(long)]
    replace: bool,
    /// Drop tool results that answer no call instead of refusing the file.
    #[arg(long)]
    repair: bool,
    /// Print `{"imported": [...], "refused": [...]}`.
    #[arg(long)]
    json: bool,
    /// Each FILE is a request body of this provider format.
    #[arg(long, value_enum, value_name = "FORMAT")]
    format: Option<FormatArg>,
    /// With --format: the id the imported session gets (one FILE only).
    #[arg(long, value_name = "ID", requires = "format")]
    session_id: Option<String>,
}

#[derive(Serialize)]
struct Report {
    imported: Vec<Done>,
    refused: Vec<Refused>,
}

#[derive(Serialize)]
struct Done {
    file: String,
    session_id: String,
    message_count: u64,
    repaired: Repaired,
}

#[derive(Serialize)]
struct Refused {
    file: String,
    error: String,
}

pub async fn import(ops: &Ops, args: &ImportArgs) -> Result<u8, Fail> {
    let bar = progress(args.files.len());
    let mut report = Report { imported: Vec::new(), refused: Vec::new() };
    for path in &args.files {
        let file = path.display().to_string();
        bar.set_message(file.clone());
        match import_one(ops, path, args).await {
            Ok(Imported { info, repaired }) => report.imported.push(Done {
                file,
                session_id: info.session_id,
                message_count: info.message_count,
                repaired,
            }),
            Err(error) => {
                if !args.json {
                    bar.suspend(|| eprintln!("convo: {file}: {error}"));
                }
                report.refused.push(Refused { file, error });
            }
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    let code = if report.refused.is_empty() { 0 } else { FOUND };
    if args.json {
        output::json(&report)?;
        return Ok(code);
    }
    let messages: u64 = report.imported.iter().map(|d| d.message_count).sum();
    let mut summary =
        format!("imported {} ({})", plural(report.imported.len(), "session"), plural(messages as usize, "message"));
    if !report.refused.is_empty() {
        summary.push_str(&format!("; {} refused", plural(report.refused.len(), "file")));
    }
    let mut out = output::stdout();
    writeln!(out, "{}", paint(if code == 0 { style::OK } else { style::WARN }, summary))?;
    Ok(code)
}

/// Reads, parses and imports one file; why not, in a sentence.
async fn import_one(ops: &Ops, path: &Path, args: &ImportArgs) -> Result<Imported, String> {
    let mut text = Vec::new();
    let read = if path == Path::new("-") {
        std::io::stdin().read_to_end(&mut text).map(drop)
    } else {
        std::fs::File::open(path).and_then(|mut f| f.read_to_end(&mut text)).map(drop)
    };
    read.map_err(|e| format!("cannot read it: {e}"))?;
    if let Some(format) = args.format {
        let body: Value = serde_json::from_slice(&text).map_err(|e| format!("not one JSON value: {e}"))?;
        let source = DictSource::Body { format: format.into(), body };
        let imported = ops.from_dict(source, args.session_id.clone(), args.replace, args.repair, None).await;
        return imported.map_err(|e| e.to_string());
    }
    let mut json = serde_json::Deserializer::from_slice(&text);
    let data: DictData = serde_path_to_error::deserialize(&mut json).map_err(|e| match e.path().to_string() {
        path if path == "." => format!("not a to_dict object: {}", e.inner()),
        path => format!("{path}: {}", e.inner()),
    })?;
    json.end().map_err(|e| format!("not one JSON value: {e}"))?;
    ops.from_dict(DictSource::Own(Ok(data)), None, args.replace, args.repair, None).await.map_err(|e| e.to_string())
}

/// A bar on stderr while more than one file is imported, only when stderr is a
/// terminal; hidden otherwise.
fn progress(files: usize) -> ProgressBar {
    if files < 2 || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(files as u64), ProgressDrawTarget::stderr());
    if let Ok(style) = ProgressStyle::with_template("{bar:30} {pos}/{len} {wide_msg}") {
        bar.set_style(style);
    }
    bar
}
