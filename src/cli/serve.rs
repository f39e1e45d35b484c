//! `convo` and `convo serve`: JSON-RPC on stdin/stdout until `exit` or the end of input.
//! Exit codes: 0 after `shutdown` then `exit`, or at the end of input; 1 on `exit`
//! without `shutdown`, or when the store cannot be opened.

use std::process::ExitCode;

use clap::Args;

use crate::rpc::{self, framing::Framing};

use crate::cli::{Global, runtime};

/// The options of serving only.
#[derive(Args, Debug, Clone)]
pub struct ServeArgs {
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
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum FramingArg {
    Auto,
    Lsp,
    Ndjson,
}

pub fn serve(global: &Global, args: &ServeArgs) -> ExitCode {
    let runtime = match runtime() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("convo: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let store = match runtime.block_on(global.spec().open(global.settings())) {
        Ok(store) => store,
        Err(e) => {
            eprintln!("convo: cannot open the store: {e}");
            return ExitCode::FAILURE;
        }
    };
    if let Some(why) = store.read_only() {
        eprintln!("convo: the store is read-only ({why}): reads are answered, every write is refused with 1006");
    }
    let config = rpc::Config {
        framing: match args.framing {
            FramingArg::Auto => None,
            FramingArg::Lsp => Some(Framing::Lsp),
            FramingArg::Ndjson => Some(Framing::Ndjson),
        },
        max_message_bytes: usize::try_from(args.max_message_bytes).unwrap_or(usize::MAX),
        max_pending_bytes: usize::try_from(args.max_pending_bytes).unwrap_or(usize::MAX),
        one_at_a_time: global.deterministic,
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

/// The protocol's own handles on stdin and stdout (duplicates: nothing else in the
/// process can then write a stray byte into the protocol stream through them).
#[cfg(unix)]
fn stdio() -> std::io::Result<(rpc::Source, rpc::Sink)> {
    use std::os::fd::AsFd as _;
    let input = std::io::stdin().as_fd().try_clone_to_owned()?;
    let output = std::io::stdout().as_fd().try_clone_to_owned()?;
    Ok((rpc::Source::Fd(input), rpc::Sink::Fd(output)))
}

/// Windows: the same duplicates, as files read and written by threads of their own. A
/// `File` moves raw bytes (no newline translation, no console code page).
#[cfg(windows)]
fn stdio() -> std::io::Result<(rpc::Source, rpc::Sink)> {
    use std::fs::File;
    use std::os::windows::io::AsHandle as _;
    let input = File::from(std::io::stdin().as_handle().try_clone_to_owned()?);
    let output = File::from(std::io::stdout().as_handle().try_clone_to_owned()?);
    Ok((rpc::Source::Reader(Box::new(input)), rpc::Sink::Writer(Box::new(output))))
}
