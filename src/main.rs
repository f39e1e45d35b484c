//! The `convo` command: serves JSON-RPC on stdio, or runs a subcommand (`convo::cli`).

use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;
use std::process::ExitCode;

use libmimalloc_sys::{
    mi_free, mi_malloc, mi_malloc_aligned, mi_realloc, mi_realloc_aligned, mi_zalloc, mi_zalloc_aligned,
};

/// Many small, short-lived allocations per request (frames, params, replies): mimalloc
/// serves them markedly faster than the system allocator (see BENCHMARKS.md).
#[global_allocator]
static ALLOCATOR: MiMalloc = MiMalloc;

/// mimalloc, asked for a plain block whenever a plain block is aligned enough, as the
/// standard library's `System` asks `malloc`. The `mimalloc` crate asks for an aligned
/// block every time, and mimalloc 3 serves those by over-allocating whenever the size
/// class's page is out of free blocks and the size is not a power of two: 3 of a
/// request's 28 allocations took that path (callgrind, pipelined `add_user`).
struct MiMalloc;

/// The alignment of every block of at least this size that mimalloc hands out: C's
/// `max_align_t`, which it keeps as `MI_MAX_ALIGN_SIZE` (every size class above 8 bytes is
/// a multiple of it, and a page's blocks start on it). The one smaller class, 8 bytes,
/// serves only sizes up to 8, whose alignment `plain`'s `align <= size` keeps at most 8.
const PLAIN_ALIGN: usize = 16;

fn plain(align: usize, size: usize) -> bool {
    align <= PLAIN_ALIGN && align <= size
}

// SAFETY: each method hands mimalloc what `GlobalAlloc` was given; mimalloc's plain
// calls are used only where their blocks meet the layout's alignment (`plain`), and every
// block, plain or aligned, is freed with `mi_free`.
unsafe impl GlobalAlloc for MiMalloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let (size, align) = (layout.size(), layout.align());
        // SAFETY: see the impl.
        unsafe { if plain(align, size) { mi_malloc(size) } else { mi_malloc_aligned(size, align) }.cast() }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let (size, align) = (layout.size(), layout.align());
        // SAFETY: see the impl.
        unsafe { if plain(align, size) { mi_zalloc(size) } else { mi_zalloc_aligned(size, align) }.cast() }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // SAFETY: see the impl.
        unsafe { mi_free(ptr.cast::<c_void>()) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let (ptr, align) = (ptr.cast::<c_void>(), layout.align());
        // SAFETY: see the impl.
        unsafe {
            if plain(align, new_size) { mi_realloc(ptr, new_size) } else { mi_realloc_aligned(ptr, new_size, align) }
                .cast()
        }
    }
}

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
    sqlite_on_mimalloc();
    convo::cli::main()
}

unsafe extern "C" {
    // In every mimalloc; `libmimalloc-sys` declares it only with its `extended` feature.
    fn mi_usable_size(p: *const c_void) -> usize;
}

/// SQLite's own allocations (its pages, statements and rows) go to mimalloc, as Rust's
/// do, instead of the C library's `malloc`; and SQLite keeps no memory statistics, which
/// it does by taking one process-wide mutex around every allocation and free. Pipelined
/// appends on SQLite, three interleaved `convo-bench` runs: 8 sessions 23,500–25,100 →
/// 27,400–31,400/s, one session 63,400–69,000 → 77,500–79,600/s; peak RSS the same
/// (BENCHMARKS.md).
///
/// Must run before anything opens a database: SQLite takes its configuration only before
/// it first initializes. Nothing before `main` does; were it otherwise, SQLite would keep
/// its own allocator and statistics, and convo would run as before.
fn sqlite_on_mimalloc() {
    use rusqlite::ffi::{SQLITE_CONFIG_MALLOC, SQLITE_CONFIG_MEMSTATUS, sqlite3_config, sqlite3_mem_methods};
    use std::ffi::c_int;
    // SQLite asks for sizes from 1 to just under 2 GiB; anything else is refused.
    unsafe extern "C" fn malloc(n: c_int) -> *mut c_void {
        // SAFETY: a plain allocation of a valid size.
        usize::try_from(n).map_or(std::ptr::null_mut(), |n| unsafe { mi_malloc(n) })
    }
    unsafe extern "C" fn free(p: *mut c_void) {
        // SAFETY: SQLite frees only what `malloc` or `realloc` gave it.
        unsafe { mi_free(p) }
    }
    unsafe extern "C" fn realloc(p: *mut c_void, n: c_int) -> *mut c_void {
        // SAFETY: as `free`, and a valid size.
        usize::try_from(n).map_or(std::ptr::null_mut(), |n| unsafe { mi_realloc(p, n) })
    }
    unsafe extern "C" fn size(p: *mut c_void) -> c_int {
        // SAFETY: as `free`.
        c_int::try_from(unsafe { mi_usable_size(p) }).unwrap_or(c_int::MAX)
    }
    // As SQLite's own allocator rounds: to 8 bytes.
    unsafe extern "C" fn roundup(n: c_int) -> c_int {
        n.saturating_add(7) & !7
    }
    unsafe extern "C" fn init(_: *mut c_void) -> c_int {
        rusqlite::ffi::SQLITE_OK
    }
    unsafe extern "C" fn shutdown(_: *mut c_void) {}
    let methods = sqlite3_mem_methods {
        xMalloc: Some(malloc),
        xFree: Some(free),
        xRealloc: Some(realloc),
        xSize: Some(size),
        xRoundup: Some(roundup),
        xInit: Some(init),
        xShutdown: Some(shutdown),
        pAppData: std::ptr::null_mut(),
    };
    // SAFETY: both options take what is passed here (SQLite copies the methods), and
    // are set before SQLite is first used.
    unsafe {
        sqlite3_config(SQLITE_CONFIG_MALLOC, &raw const methods);
        sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0 as c_int);
    }
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

#[cfg(test)]
mod tests {
    /// What SQLite allocates is mimalloc's, and it counts none of it.
    #[test]
    fn sqlite_allocates_from_mimalloc_and_keeps_no_statistics() {
        use rusqlite::ffi::{sqlite3_free, sqlite3_malloc, sqlite3_memory_used, sqlite3_msize};
        unsafe extern "C" {
            fn mi_is_in_heap_region(p: *const std::ffi::c_void) -> bool;
        }
        super::sqlite_on_mimalloc();
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        conn.execute_batch("CREATE TABLE t (x); INSERT INTO t VALUES (randomblob(100000));").unwrap();
        // SAFETY: a block SQLite allocates, measured and freed by it.
        unsafe {
            let p = sqlite3_malloc(1000);
            assert!(mi_is_in_heap_region(p), "SQLite's block is mimalloc's");
            assert_eq!(sqlite3_msize(p), super::mi_usable_size(p) as u64);
            sqlite3_free(p);
            assert_eq!(sqlite3_memory_used(), 0, "SQLite counted its memory");
        }
    }

    /// Blocks of every alignment up to a page, and of every size class mimalloc has up to
    /// 64 KiB, come back aligned through this allocator, plain or not, fresh or grown.
    #[test]
    fn every_block_is_aligned_as_asked() {
        use std::alloc::{GlobalAlloc, Layout};
        let sizes = (1..=512).chain((9..=16).flat_map(|shift| (4..8).map(move |q| (q << shift) / 4 + 8)));
        let mut held = Vec::new();
        for size in sizes {
            for align in [1, 2, 4, 8, 16, 32, 64, 4096] {
                let Ok(layout) = Layout::from_size_align(size, align) else { continue };
                // SAFETY: a layout of non-zero size; each block is freed with its layout.
                unsafe {
                    for grow in [false, true] {
                        let mut p = super::ALLOCATOR.alloc(layout);
                        assert!(!p.is_null() && p.addr() % align == 0, "{size} {align}");
                        if grow {
                            p = super::ALLOCATOR.realloc(p, layout, size * 3);
                            assert!(!p.is_null() && p.addr() % align == 0, "{size} {align} grown");
                        }
                        let zeroed = super::ALLOCATOR.alloc_zeroed(layout);
                        assert!(zeroed.addr() % align == 0 && *zeroed == 0, "{size} {align} zeroed");
                        held.push((p, Layout::from_size_align_unchecked(if grow { size * 3 } else { size }, align)));
                        held.push((zeroed, layout));
                    }
                }
            }
        }
        for (p, layout) in held {
            // SAFETY: allocated above with this layout.
            unsafe { super::ALLOCATOR.dealloc(p, layout) }
        }
    }
}
