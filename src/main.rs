//! The `convo` command: serves JSON-RPC on stdio, or runs a subcommand (`convo::cli`).

use std::process::ExitCode;

/// Many small, short-lived allocations per request (frames, params, replies): mimalloc
/// serves them markedly faster than the system allocator (see BENCHMARKS.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    #[cfg(unix)]
    ignore_sigxfsz();
    // Transparent huge pages make each first touch of fresh heap zero 2 MiB instead of
    // 4 KiB; with mimalloc's per-thread heaps that is memory no one uses. Without them
    // (A/B, 4 runs each) pipelined appends on one SQLite session ran at 42,000/s instead
    // of 36,000/s and peak RSS fell from 108–125 MiB to 85 MiB. Where the kernel refuses,
    // nothing changes.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    let _ = rustix::thread::disable_transparent_huge_pages(true);
    convo::cli::main()
}

/// A write past the file-size limit (`ulimit -f`, RLIMIT_FSIZE) raises SIGXFSZ, whose
/// default action ends the process without a word. Ignored, the write fails with EFBIG
/// instead: that request gets 1006 and the server goes on. (Windows has no such signal:
/// a write past a quota fails as any other write does.)
#[cfg(unix)]
fn ignore_sigxfsz() {
    // SAFETY: only sets a disposition to "ignore", before any other thread exists; no
    // handler is installed.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
}
