//! The `convo` command: flags, logging to stderr, the store, then serve stdio.

use std::io::IsTerminal as _;
use std::process::ExitCode;

use clap::Parser;
use tracing_subscriber::EnvFilter;

use convo::error::quote;
use convo::rpc::{self, framing::Framing};

/// Many small, short-lived allocations per request (frames, params, replies): mimalloc
/// serves them markedly faster than the system allocator (see BENCHMARKS.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
use convo::store::{SqliteSettings, StoreSpec};

/// Keeps LLM conversation state for the program that spawns it: sessions, messages, tool
/// calls and their results, repaired so that no model provider rejects them. Speaks
/// JSON-RPC 2.0 on stdin/stdout (LSP `Content-Length` framing or newline-delimited JSON);
/// logs go to stderr. The protocol is described in protocol/README.md.
#[derive(Parser, Debug)]
#[command(name = "convo", version, about, long_about)]
struct Cli {
    /// Where sessions are kept: `sqlite` (the platform data folder, on Linux
    /// $XDG_DATA_HOME/convo/sessions.db), `sqlite:PATH`, `postgres://USER@HOST/DB`
    /// (also `postgresql://`; a libpq URL, `sslmode=require|verify-full` for TLS), or
    /// `memory` (gone when the process ends). Several convo processes may share one
    /// SQLite file or PostgreSQL database.
    #[arg(long, env = "CONVO_STORE", default_value = "sqlite", value_name = "STORE")]
    store: StoreSpec,

    /// The PostgreSQL schema that holds convo's tables: applications sharing a database
    /// each see only their own schema's sessions.
    #[arg(long, env = "CONVO_PG_SCHEMA", default_value = convo::store::DEFAULT_PG_SCHEMA, value_name = "NAME")]
    pg_schema: String,

    /// `normal`: every acknowledged write survives the process being killed at any
    /// instant; `full`: it also survives power loss (an fsync per commit).
    #[arg(long, value_enum, default_value = "normal")]
    durability: Durability,

    /// How long a write waits for another process holding the database (or, on
    /// PostgreSQL, the session's row) before it fails with error 1006; at most
    /// 2147483647 (SQLite keeps it in a C int).
    #[arg(long, default_value_t = 5000, value_name = "MS", value_parser = clap::value_parser!(u64).range(0..=i32::MAX as u64))]
    busy_timeout_ms: u64,

    /// Open the SQLite file even when it, or the -wal, -shm or -journal file beside it,
    /// is a symbolic link (refused otherwise; links among the folders above are fine).
    #[arg(long)]
    follow_symlinks: bool,

    /// How frames are delimited: `auto` reads the first byte (`{` or `[` selects
    /// newline-delimited JSON, anything else LSP headers).
    #[arg(long, value_enum, default_value = "auto")]
    framing: FramingArg,

    /// The largest frame accepted, in bytes; a larger one gets error 1005.
    #[arg(long, default_value_t = 64 * 1024 * 1024, value_name = "BYTES", value_parser = clap::value_parser!(u64).range(1024..=(1u64 << 32)))]
    max_message_bytes: u64,

    /// The memory kept for the client, in bytes: requests read but not yet answered, and
    /// replies not yet written, each stay under it. Past it convo stops reading until
    /// the client reads its replies (back-pressure).
    #[arg(long, default_value_t = 256 * 1024 * 1024, value_name = "BYTES", value_parser = clap::value_parser!(u64).range((1 << 20)..=u64::from(u32::MAX)))]
    max_pending_bytes: u64,

    /// Log filter for stderr (error, warn, info, debug, trace, or a tracing
    /// directive); overrides RUST_LOG. Default: warn.
    #[arg(long, value_name = "FILTER")]
    log_level: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Durability {
    Normal,
    Full,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum FramingArg {
    Auto,
    Lsp,
    Ndjson,
}

fn main() -> ExitCode {
    ignore_sigxfsz();
    let cli = Cli::parse();
    if let Err(e) = init_logging(cli.log_level.as_deref()) {
        eprintln!("convo: {e}");
        return ExitCode::from(2);
    }
    let settings = SqliteSettings {
        full_durability: cli.durability == Durability::Full,
        busy_timeout: std::time::Duration::from_millis(cli.busy_timeout_ms),
        follow_symlinks: cli.follow_symlinks,
    };
    // Blocking work runs on bounded pools (`convo::pool`); this is a ceiling under them.
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().max_blocking_threads(32).build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("convo: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let spec = match cli.store.with_pg_schema(&cli.pg_schema) {
        Ok(spec) => spec,
        Err(e) => {
            eprintln!("convo: --pg-schema: {e}");
            return ExitCode::from(2);
        }
    };
    let store = match runtime.block_on(spec.open(settings)) {
        Ok(store) => store,
        Err(e) => {
            eprintln!("convo: cannot open the store: {e}");
            return ExitCode::FAILURE;
        }
    };
    let config = rpc::Config {
        framing: match cli.framing {
            FramingArg::Auto => None,
            FramingArg::Lsp => Some(Framing::Lsp),
            FramingArg::Ndjson => Some(Framing::Ndjson),
        },
        max_message_bytes: usize::try_from(cli.max_message_bytes).unwrap_or(usize::MAX),
        max_pending_bytes: usize::try_from(cli.max_pending_bytes).unwrap_or(usize::MAX),
    };
    let (input, output) = match stdio() {
        Ok(io) => io,
        Err(e) => {
            eprintln!("convo: cannot use stdin/stdout: {e}");
            return ExitCode::FAILURE;
        }
    };
    let served = runtime.block_on(rpc::serve(config, store, input, output));
    // A reader thread may still be blocked on stdin; it must not hold the process.
    runtime.shutdown_background();
    match served {
        Ok(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        Err(e) => {
            eprintln!("convo: {e}");
            ExitCode::FAILURE
        }
    }
}

/// A write past the file-size limit (`ulimit -f`, RLIMIT_FSIZE) raises SIGXFSZ, whose
/// default action ends the process without a word. Ignored, the write fails with EFBIG
/// instead: that request gets 1006 and the server goes on.
fn ignore_sigxfsz() {
    // SAFETY: only sets a disposition to "ignore", before any other thread exists; no
    // handler is installed.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
}

/// The protocol's own handles on stdin and stdout (duplicates: nothing else in the
/// process can then write a stray byte into the protocol stream through them).
fn stdio() -> std::io::Result<(rpc::Source, rpc::Sink)> {
    use std::os::fd::AsFd as _;
    let input = std::io::stdin().as_fd().try_clone_to_owned()?;
    let output = std::io::stdout().as_fd().try_clone_to_owned()?;
    Ok((rpc::Source::Fd(input), rpc::Sink::Fd(output)))
}

fn init_logging(level: Option<&str>) -> Result<(), String> {
    let filter = match level {
        Some(level) => EnvFilter::try_new(level).map_err(|e| format!("invalid --log-level {}: {e}", quote(level)))?,
        None => EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn")),
    };
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    Ok(())
}
