//! The command line. `convo` alone (or `convo serve`) serves JSON-RPC on stdin/stdout;
//! the other subcommands are for a person at a terminal and for scripts: they open the
//! same `--store` and go through the same operations layer (`crate::ops`) as the server,
//! so no rule is implemented twice. One file per subcommand or group, as cargo's are.
//!
//! Exit codes of the subcommands (serving keeps its own, see `serve`): 0 done; 1 done,
//! with something to report (fsck found a problem, replay found a difference, a named
//! session does not exist, a file was refused, a body cannot fit `--fit`); 2 a usage
//! error; 3 a failure (the store
//! cannot be opened or failed, a file cannot be read or written).

mod docs;
mod fsck;
mod output;
mod replay;
mod serve;
mod sessions;
mod show;
mod transfer;

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use tracing_subscriber::EnvFilter;

use crate::error::quote;
use crate::ops::{Failure, Host, Ops, RuntimeParams};
use crate::store::{SqliteSettings, StoreSpec};

pub use output::Fail;

const EXAMPLES: &str = "\
Examples:
  convo --store memory < examples/session.ndjson   serve a script of requests
  convo ls                                         the sessions in the default database
  convo show demo                                  one session as a transcript
  convo show demo --format anthropic_messages      the request body Anthropic would get
  convo export demo -o demo.json                   a session as to_dict JSON
  convo import *.json                              import to_dict files
  convo gc --older-than 30d --dry-run              what gc would delete
  convo fsck                                       check the database
  convo replay script.ndjson --expect replies.ndjson
                                                   a scripted protocol test

Exit codes (subcommands): 0 done; 1 done, with something to report (fsck found a
problem, replay found a difference, a named session does not exist, a file was
refused, a body cannot fit --fit); 2 usage error; 3 failure (the store cannot be opened or failed, a file
cannot be read or written). Serving exits 0 after `shutdown` and `exit` or at the end
of input, 1 on `exit` without `shutdown` or when the store cannot be opened.";

/// Keeps LLM conversation state for the program that spawns it: sessions, messages, tool
/// calls and their results, repaired so that no model provider rejects them. Speaks
/// JSON-RPC 2.0 on stdin/stdout (LSP `Content-Length` framing or newline-delimited JSON);
/// logs go to stderr. The protocol is described in protocol/README.md. Without a
/// subcommand, convo serves; the subcommands below are for a terminal and for scripts.
#[derive(Parser, Debug)]
#[command(name = "convo", version, about, long_about, after_long_help = EXAMPLES)]
pub struct Cli {
    #[command(flatten)]
    global: Global,

    #[command(flatten)]
    serve: serve::ServeArgs,

    #[command(subcommand)]
    command: Option<Command>,
}

/// The options every subcommand takes.
#[derive(Args, Debug)]
struct Global {
    /// Where sessions are kept: `sqlite` (the platform data folder: on Linux
    /// $XDG_DATA_HOME/convo/sessions.db, on macOS ~/Library/Application Support/convo,
    /// on Windows %LOCALAPPDATA%\convo), `sqlite:PATH`, `postgres://USER@HOST/DB`
    /// (also `postgresql://`; a libpq URL, `sslmode=require|verify-full` for TLS), or
    /// `memory` (gone when the process ends). Several convo processes may share one
    /// SQLite file or PostgreSQL database.
    #[arg(long, env = "CONVO_STORE", default_value = "sqlite", value_name = "STORE", global = true)]
    store: StoreSpec,

    /// The PostgreSQL schema that holds convo's tables: applications sharing a database
    /// each see only their own schema's sessions.
    #[arg(long, env = "CONVO_PG_SCHEMA", default_value = crate::store::DEFAULT_PG_SCHEMA, value_name = "NAME",
          global = true, value_parser = pg_schema)]
    pg_schema: String,

    /// A direct connection to PostgreSQL for LISTEN when `--store` goes through a pooler
    /// in transaction mode (the same as `listen_url=` in the store's URL). Without one,
    /// changes of other processes still arrive: the change table is read every 250 ms
    /// while something is watched.
    #[arg(long, env = "CONVO_PG_LISTEN_URL", value_name = "URL", global = true)]
    pg_listen_url: Option<String>,

    /// `normal`: every acknowledged write survives the process being killed at any
    /// instant; `full`: it also survives power loss (an fsync per commit).
    #[arg(long, value_enum, default_value = "normal", global = true)]
    durability: Durability,

    /// How long a write waits for another process holding the database (or, on
    /// PostgreSQL, the session's row) before it fails with error 1006; at most
    /// 2147483647 (SQLite keeps it in a C int).
    #[arg(long, default_value_t = 5000, value_name = "MS", global = true, value_parser = clap::value_parser!(u64).range(0..=i32::MAX as u64))]
    busy_timeout_ms: u64,

    /// Open the SQLite file even when it, or the -wal, -shm or -journal file beside it,
    /// is a symbolic link (refused otherwise; links among the folders above are fine).
    #[arg(long, global = true)]
    follow_symlinks: bool,

    /// Ids counted from 00000000-0000-7000-8000-000000000001 and a clock that reads
    /// 2000-01-01T00:00:00Z first and 1 ms later at each reading; requests run one at a
    /// time. The same input gives the same bytes on every machine (scripted tests).
    #[arg(long, global = true)]
    deterministic: bool,

    /// Log filter for stderr (error, warn, info, debug, trace, or a tracing
    /// directive); overrides RUST_LOG. Default: warn.
    #[arg(long, value_name = "FILTER", global = true)]
    log_level: Option<String>,

    /// When to colour the output of the subcommands: `auto` on a terminal unless
    /// NO_COLOR is set, `always`, or `never`.
    #[arg(long, value_enum, default_value = "auto", value_name = "WHEN", global = true)]
    color: Color,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Durability {
    Normal,
    Full,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Color {
    Auto,
    Always,
    Never,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Serve JSON-RPC on stdin/stdout (what `convo` without a subcommand does)
    Serve(serve::ServeArgs),
    /// List sessions, newest first
    Ls(sessions::LsArgs),
    /// Print a session as a transcript, or as a provider's request body
    Show(show::ShowArgs),
    /// Write a session as to_dict JSON
    Export(transfer::ExportArgs),
    /// Import sessions from to_dict JSON files
    Import(transfer::ImportArgs),
    /// Delete sessions (their forks keep their history)
    Rm(sessions::RmArgs),
    /// Delete the sessions not updated for a while
    Gc(sessions::GcArgs),
    /// Check the database: SQLite's integrity check, orphan rows, segment chains, images,
    /// and the conversation rules over every history
    Fsck(fsck::FsckArgs),
    /// Print the OpenRPC document of the protocol
    Schema,
    /// Run a script of requests through a fresh in-memory server in deterministic mode
    Replay(replay::ReplayArgs),
    /// Print shell completions (bash, zsh, fish, elvish, powershell)
    Completions(docs::CompletionsArgs),
    /// Print the man page, generated from these definitions (`convo man > convo.1`)
    Man(docs::ManArgs),
}

/// Parses the command line and runs it; the process's exit code.
pub fn main() -> ExitCode {
    let cli = parse();
    if let Err(e) = init_logging(cli.global.log_level.as_deref()) {
        eprintln!("convo: {e}");
        return ExitCode::from(output::USAGE);
    }
    // Chosen before anything is minted: `replay` always counts.
    if (cli.global.deterministic || matches!(cli.command, Some(Command::Replay(_))))
        && let Err(e) = crate::mint::use_counters()
    {
        eprintln!("convo: {e}");
        return ExitCode::from(output::FAILED);
    }
    anstream::ColorChoice::write_global(match cli.global.color {
        Color::Auto => anstream::ColorChoice::Auto,
        Color::Always => anstream::ColorChoice::Always,
        Color::Never => anstream::ColorChoice::Never,
    });
    let global = cli.global;
    let result = match cli.command {
        None => return serve::serve(&global, &cli.serve),
        Some(Command::Serve(args)) => return serve::serve(&global, &args),
        Some(Command::Schema) => docs::schema(),
        Some(Command::Completions(args)) => docs::completions(&args),
        Some(Command::Man(args)) => docs::man(&args),
        Some(Command::Replay(args)) => replay::run(&args),
        Some(command) => with_store(&global, command),
    };
    output::exit(result)
}

/// The command line, with serving's own options refused before any other subcommand
/// (`convo --framing lsp ls`): they belong to `convo` alone or to `convo serve`.
fn parse() -> Cli {
    use clap::FromArgMatches as _;
    let mut command = command();
    let matches = command.get_matches_mut();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.format(&mut command).exit());
    if let Some(name) = matches.subcommand_name() {
        let serving = ["framing", "max_message_bytes", "max_pending_bytes"];
        for id in serving {
            if matches.value_source(id) == Some(clap::parser::ValueSource::CommandLine) {
                let flag = format!("--{}", id.replace('_', "-"));
                let why = format!(
                    "{flag} is an option of serving: write it after `convo` alone or after `convo serve`, not before `{name}`"
                );
                command.error(clap::error::ErrorKind::ArgumentConflict, why).exit();
            }
        }
    }
    cli
}

/// Runs a subcommand that reads or changes the store.
fn with_store(global: &Global, command: Command) -> Result<u8, Fail> {
    // Only an import may start a database; the others would make an empty one at a
    // mistyped path and report on it.
    if !matches!(command, Command::Import(_)) {
        let path = match &global.store {
            StoreSpec::Sqlite(Some(path)) => Some(path.clone()),
            StoreSpec::Sqlite(None) => crate::store::default_sqlite_path(),
            _ => None,
        };
        if let Some(path) = path.filter(|p| !p.exists()) {
            return Err(Fail::failed(format!("cannot open the store: there is no database at {}", path.display())));
        }
    }
    let runtime = runtime().map_err(|e| Fail::failed(format!("cannot start the runtime: {e}")))?;
    let store = runtime
        .block_on(global.spec().open(global.settings()))
        .map_err(|e| Fail::failed(format!("cannot open the store: {e}")))?;
    let ops = Ops::new(store, Arc::new(NoHost));
    let done = runtime.block_on(async {
        let done = match command {
            Command::Ls(args) => sessions::ls(&ops, &args).await,
            Command::Show(args) => show::show(&ops, &args).await,
            Command::Export(args) => transfer::export(&ops, &args).await,
            Command::Import(args) => transfer::import(&ops, &args).await,
            Command::Rm(args) => sessions::rm(&ops, &args).await,
            Command::Gc(args) => sessions::gc(&ops, &args).await,
            Command::Fsck(args) => fsck::fsck(&ops, &args).await,
            _ => unreachable!("handled in main"),
        };
        close(&ops).await.and(done)
    });
    runtime.shutdown_background();
    done
}

/// Ends a command's run: its writes durable, the store closed (`Ops::close`).
async fn close(ops: &Ops) -> Result<u8, Fail> {
    ops.close().await.map(|()| 0).map_err(Fail::from)
}

/// The runtime the store and the operations run on. Blocking work runs on bounded pools
/// of their own threads (`crate::pool`); tokio's blocking threads only wait for the
/// writer thread at the end, and 32 is a ceiling on them.
fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread().enable_all().max_blocking_threads(32).build()
}

/// `s` as a URL query value: everything but letters, digits and `-._~` as `%XX`.
fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn pg_schema(name: &str) -> Result<String, String> {
    crate::store::check_pg_schema(name).map(|()| name.to_owned())
}

impl Global {
    /// The store `--store` names, with `--pg-schema` for PostgreSQL.
    fn spec(&self) -> StoreSpec {
        match &self.store {
            StoreSpec::Postgres { url, .. } => {
                let url = match &self.pg_listen_url {
                    Some(listen) => {
                        let joint = if url.contains('?') { '&' } else { '?' };
                        format!("{url}{joint}listen_url={}", percent_encode(listen))
                    }
                    None => url.clone(),
                };
                StoreSpec::Postgres { url, schema: self.pg_schema.clone() }
            }
            other => other.clone(),
        }
    }

    fn settings(&self) -> SqliteSettings {
        SqliteSettings {
            full_durability: self.durability == Durability::Full,
            busy_timeout: Duration::from_millis(self.busy_timeout_ms),
            follow_symlinks: self.follow_symlinks,
        }
    }
}

/// The host of a subcommand: there is none, so a turn cannot run (none is asked for).
struct NoHost;

#[async_trait::async_trait]
impl Host for NoHost {
    async fn run(
        &self,
        _: &RuntimeParams,
        _: Duration,
        _: &tokio_util::sync::CancellationToken,
    ) -> Result<serde_json::Value, Failure> {
        Err(Failure::Disconnected)
    }

    async fn stream(
        &self,
        _: &RuntimeParams,
        _: Duration,
        _: &tokio_util::sync::CancellationToken,
        _: tokio::sync::mpsc::Sender<serde_json::Value>,
    ) -> Result<serde_json::Value, Failure> {
        Err(Failure::Disconnected)
    }
}

fn init_logging(level: Option<&str>) -> Result<(), String> {
    let filter = match level {
        Some(level) => EnvFilter::try_new(level).map_err(|e| format!("invalid --log-level {}: {e}", quote(level)))?,
        None => EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn")),
    };
    // Plain log lines: tracing-subscriber is built without its `ansi` feature, and asking
    // it for colour on a terminal made it print a complaint on every start.
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(false).init();
    Ok(())
}

/// The clap definition, for completions and the man page.
fn command() -> clap::Command {
    <Cli as clap::CommandFactory>::command()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_definition_is_consistent() {
        command().debug_assert();
    }

    #[test]
    fn serving_flags_stay_at_the_top_and_the_store_flags_reach_every_subcommand() {
        let cli = Cli::try_parse_from(["convo", "--store", "memory", "--framing", "lsp"]).unwrap();
        assert!(cli.command.is_none());
        let cli = Cli::try_parse_from(["convo", "ls", "--store", "memory", "--json"]).unwrap();
        assert!(matches!(cli.command, Some(Command::Ls(_))));
        assert_eq!(cli.global.store, StoreSpec::Memory);
        let cli = Cli::try_parse_from(["convo", "--store", "memory", "serve", "--framing", "ndjson"]).unwrap();
        assert!(matches!(cli.command, Some(Command::Serve(_))));
        let cli = Cli::try_parse_from(["convo", "--store", "memory", "ls"]).unwrap();
        assert_eq!(cli.global.store, StoreSpec::Memory, "global options may come first");
    }
}
