//! What the subcommands print and how they end: stdout (styled only on a terminal, see
//! `anstream`), JSON for `--json`, aligned tables, and the exit codes. A closed pipe
//! (`convo ls | head -1`) is a clean exit, not an error.

use std::io::{self, Write};
use std::process::ExitCode;

use anstyle::{AnsiColor, Style};
use serde::Serialize;

use crate::Error;
use crate::session::export::Format;

/// Done, with something to report.
pub const FOUND: u8 = 1;
/// A usage error (clap's own code).
pub const USAGE: u8 = 2;
/// The store or a file failed.
pub const FAILED: u8 = 3;

/// Why a subcommand stopped: its exit code and what to say on stderr.
#[derive(Debug)]
pub struct Fail {
    pub code: u8,
    pub message: String,
    /// Writing to stdout failed because its reader went away.
    closed: bool,
}

impl Fail {
    pub fn new(code: u8, message: impl Into<String>) -> Self {
        Fail { code, message: message.into(), closed: false }
    }

    pub fn failed(message: impl Into<String>) -> Self {
        Fail::new(FAILED, message)
    }

    pub fn usage(message: impl Into<String>) -> Self {
        Fail::new(USAGE, message)
    }
}

/// An error of the operations: a session that is not there is something to report, a
/// refused argument is a usage error, anything else a failure.
impl From<Error> for Fail {
    fn from(e: Error) -> Self {
        let code = match &e {
            Error::SessionNotFound(_)
            | Error::SessionExists(_)
            | Error::InvalidSequence { .. }
            | Error::BodyTooLarge { .. } => FOUND,
            Error::InvalidParams(_) | Error::MessageNotFound(_) => USAGE,
            _ => FAILED,
        };
        let message = match e {
            Error::SessionNotFound(id) => format!("no session {}", crate::error::quote(&id)),
            other => other.to_string(),
        };
        Fail::new(code, message)
    }
}

impl From<io::Error> for Fail {
    fn from(e: io::Error) -> Self {
        Fail { closed: e.kind() == io::ErrorKind::BrokenPipe, ..Fail::failed(format!("cannot write the output: {e}")) }
    }
}

/// The process's exit code for a subcommand's outcome; says why on stderr.
pub fn exit(result: Result<u8, Fail>) -> ExitCode {
    match result {
        Ok(code) => ExitCode::from(code),
        Err(fail) if fail.closed => ExitCode::SUCCESS,
        Err(fail) => {
            eprintln!("convo: {}", fail.message);
            ExitCode::from(fail.code)
        }
    }
}

/// Standard output, styled when it is a terminal (and `--color` and NO_COLOR allow).
pub fn stdout() -> anstream::AutoStream<io::StdoutLock<'static>> {
    anstream::AutoStream::auto(io::stdout().lock())
}

/// Standard error, styled likewise.
pub fn stderr() -> anstream::AutoStream<io::StderrLock<'static>> {
    anstream::AutoStream::auto(io::stderr().lock())
}

/// One JSON value on stdout, indented, then a newline.
pub fn json(value: &impl Serialize) -> Result<(), Fail> {
    let mut out = io::stdout().lock();
    serde_json::to_writer_pretty(&mut out, value).map_err(io::Error::from)?;
    writeln!(out)?;
    out.flush()?;
    Ok(())
}

/// The styles of the readable output.
pub mod style {
    use super::*;

    pub const HEADER: Style = Style::new().bold();
    pub const DIM: Style = Style::new().dimmed();
    pub const USER: Style = AnsiColor::Green.on_default().bold();
    pub const ASSISTANT: Style = AnsiColor::Blue.on_default().bold();
    pub const SYSTEM: Style = AnsiColor::Magenta.on_default().bold();
    pub const TOOL: Style = AnsiColor::Yellow.on_default().bold();
    pub const CALL: Style = AnsiColor::Cyan.on_default();
    pub const WARN: Style = AnsiColor::Red.on_default().bold();
    pub const OK: Style = AnsiColor::Green.on_default();
}

/// `text` in `style` (plain text where styles are stripped).
pub fn paint(style: Style, text: impl std::fmt::Display) -> String {
    format!("{style}{text}{style:#}")
}

/// Rows as columns aligned on their widths, the header styled; the last column is not
/// padded.
pub fn table(out: &mut impl Write, header: &[&str], rows: &[Vec<String>]) -> io::Result<()> {
    let width = |s: &str| s.chars().count();
    let mut widths: Vec<usize> = header.iter().map(|h| width(h)).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(width(cell));
        }
    }
    let line = |out: &mut dyn Write, cells: &mut dyn Iterator<Item = &str>, style: Style| -> io::Result<()> {
        let cells: Vec<&str> = cells.collect();
        let last = cells.len().saturating_sub(1);
        let mut text = String::new();
        for (i, cell) in cells.iter().enumerate() {
            text.push_str(cell);
            if i < last {
                text.push_str(&" ".repeat(widths[i] - width(cell) + 2));
            }
        }
        writeln!(out, "{}", paint(style, text))
    };
    line(out, &mut header.iter().copied(), style::HEADER)?;
    for row in rows {
        line(out, &mut row.iter().map(String::as_str), Style::new())?;
    }
    Ok(())
}

/// A stored time stamp as a person reads it: `2026-11-30 03:54:14` (UTC).
pub fn when(stamp: &str) -> String {
    match stamp.get(..19) {
        Some(head) => head.replacen('T', " ", 1),
        None => stamp.to_owned(),
    }
}

/// `n` things, with the plural when it is not one: `plural(2, "session")`,
/// `plural(3, "reply")`.
pub fn plural(n: usize, thing: &str) -> String {
    match (n, thing.strip_suffix('y')) {
        (1, _) => format!("1 {thing}"),
        (_, Some(stem)) => format!("{n} {stem}ies"),
        (_, None) => format!("{n} {thing}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_align_every_column_but_the_last() {
        let mut out = Vec::new();
        let rows =
            vec![vec!["a".into(), "long title".into(), "1".into()], vec!["bbbb".into(), "t".into(), "22".into()]];
        table(&mut out, &["ID", "TITLE", "N"], &rows).unwrap();
        let text = String::from_utf8(out).unwrap();
        let plain: String = anstream::adapter::strip_str(&text).to_string();
        assert_eq!(plain, "ID    TITLE       N\na     long title  1\nbbbb  t           22\n");
    }

    #[test]
    fn time_stamps_read_as_date_and_time() {
        assert_eq!(when("2026-11-30T03:54:14.457958Z"), "2026-11-30 03:54:14");
        assert_eq!(when("short"), "short");
    }
}

/// A provider body format, as the command line names it.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum FormatArg {
    #[value(name = "openai_chat")]
    OpenaiChat,
    #[value(name = "openai_responses")]
    OpenaiResponses,
    #[value(name = "anthropic_messages")]
    AnthropicMessages,
    #[value(name = "gemini_contents")]
    GeminiContents,
    #[value(name = "gemini_interactions")]
    GeminiInteractions,
}

impl From<FormatArg> for Format {
    fn from(f: FormatArg) -> Self {
        match f {
            FormatArg::OpenaiChat => Format::OpenaiChat,
            FormatArg::OpenaiResponses => Format::OpenaiResponses,
            FormatArg::AnthropicMessages => Format::AnthropicMessages,
            FormatArg::GeminiContents => Format::GeminiContents,
            FormatArg::GeminiInteractions => Format::GeminiInteractions,
        }
    }
}
