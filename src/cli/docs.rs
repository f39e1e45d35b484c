//! `convo schema`, `convo completions` and `convo man`: the protocol's OpenRPC document,
//! and shell completions and man pages generated from the clap definition itself.

use std::io::Write as _;

use clap::Args;

use crate::cli::output::Fail;

/// The OpenRPC document, built into the binary.
const OPENRPC: &str = include_str!("../../protocol/openrpc.json");

pub fn schema() -> Result<u8, Fail> {
    let mut out = std::io::stdout().lock();
    out.write_all(OPENRPC.as_bytes())?;
    if !OPENRPC.ends_with('\n') {
        writeln!(out)?;
    }
    out.flush()?;
    Ok(0)
}

#[derive(Args, Debug)]
#[command(
    after_long_help = "Examples:\n  convo completions bash > ~/.local/share/bash-completion/completions/convo\n  \
                             convo completions zsh > ~/.zfunc/_convo\n  \
                             convo completions fish > ~/.config/fish/completions/convo.fish"
)]
pub struct CompletionsArgs {
    /// The shell.
    shell: clap_complete::Shell,
}

pub fn completions(args: &CompletionsArgs) -> Result<u8, Fail> {
    // Into memory first: clap_complete panics when its writer fails (a closed pipe).
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut super::command(), "convo", &mut script);
    let mut out = std::io::stdout().lock();
    out.write_all(&script)?;
    out.flush()?;
    Ok(0)
}

#[derive(Args, Debug)]
#[command(after_long_help = "Examples:\n  convo man > convo.1 && man ./convo.1\n  convo man show | man -l -")]
pub struct ManArgs {
    /// A subcommand's own page (convo-show(1)) instead of convo(1).
    #[arg(value_name = "SUBCOMMAND")]
    subcommand: Option<String>,
}

pub fn man(args: &ManArgs) -> Result<u8, Fail> {
    let mut command = super::command();
    command.build();
    let page = match &args.subcommand {
        None => command,
        Some(name) => {
            let sub = command
                .find_subcommand(name)
                .cloned()
                .ok_or_else(|| Fail::usage(format!("no subcommand {}", crate::error::quote(name))))?;
            sub.name(format!("convo-{name}")).version(env!("CARGO_PKG_VERSION"))
        }
    };
    let mut out = std::io::stdout().lock();
    clap_mangen::Man::new(page).render(&mut out)?;
    out.flush()?;
    Ok(0)
}
