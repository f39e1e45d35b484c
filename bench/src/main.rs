//! `convo-bench`: measures one stdio JSON-RPC server command, speaking LSP framing to it.
//! Every server measured (convo, the echo floor, the Python and Node baselines) answers
//! the same methods: `session/create`, `add_user`, `history`, `fork`, `trim`.
//!
//! ```text
//! convo-bench [--quick] [--million] [--million-only] [--provider] [--context] [--search] [--search-messages N] [--sessions N] [--images] [--history-only] [--round-trips-only] [--pipelined N] [--label NAME] [--json FILE] -- COMMAND [ARGS...]
//! ```
//!
//! `--round-trips-only` is for the echo floor, which keeps no state; `--million` (a
//! session of 1,000,000 tiny messages, in a server of its own so that its peak RSS is
//! theirs alone; `--million-only`),
//! `--provider` (export and token counts), `--context` (a 100,000-message session
//! exported with `fit`, and the share of a cached tool loop's input read from cache) and
//! `--search` (full-text search over 100,000
//! messages, or `--search-messages N`; the first search, which reads what was stored, is
//! reported apart; `--search-only` measures nothing else) and `--images` (`history` of a session
//! of 1 MiB images inline and by reference; `--images-only`) use methods only convo has
//! (`--history-only` measures `history` alone, for profiling it); `--runtime`
//! measures a turn through the host (convo's `session/run`, the echo's `echo/ask`).
//! `--sessions N` measures nothing else: a store of N sessions, created, updated, listed
//! page by page and deleted.
//! `--fleet N` measures nothing else: N servers of COMMAND at once (a fleet on one
//! database), each pipelining appends (16 in flight) into a session of its own; the
//! figure is the fleet's appends per second.
//!
//! It prints one line per figure and, with `--json`, appends one JSON object per run.

mod cache_model;
mod client;

use std::io::Write as _;
use std::time::Duration;

use client::Client;
use serde_json::{Value, json};

#[derive(Clone, Copy)]
struct Sizes {
    sequential: usize,
    pipelined: usize,
    history: usize,
    forks: &'static [usize],
    million: usize,
    search: usize,
    /// Messages that each carry the same 1 MiB image.
    images: usize,
    /// The session exported with `fit`; the steps of the cached tool loop.
    fit: usize,
    steps: usize,
}

const FULL: Sizes = Sizes {
    sequential: 5_000,
    pipelined: 100_000,
    history: 10_000,
    forks: &[10, 10_000, 100_000],
    million: 1_000_000,
    search: 100_000,
    images: 20,
    fit: 100_000,
    steps: 40,
};
const QUICK: Sizes = Sizes {
    sequential: 50,
    pipelined: 500,
    history: 100,
    forks: &[10, 100],
    million: 2_000,
    search: 2_000,
    images: 2,
    fit: 400,
    steps: 4,
};

/// How many requests are in flight in the pipelined measures.
const WINDOW: usize = 64;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(split) = args.iter().position(|a| a == "--") else {
        eprintln!(
            "usage: convo-bench [--quick] [--million] [--million-only] [--provider] [--context] [--search] [--search-messages N] [--sessions N] [--images] [--history-only] [--round-trips-only] [--pipelined N] [--label NAME] [--json FILE] -- COMMAND [ARGS...]"
        );
        std::process::exit(2);
    };
    let (flags, cmd) = (&args[..split], &args[split + 1..]);
    let flag = |name: &str| flags.iter().any(|f| f == name);
    let value = |name: &str| flags.iter().position(|f| f == name).and_then(|i| flags.get(i + 1)).cloned();
    let mut sizes = if flag("--quick") { QUICK } else { FULL };
    // A slow server (PostgreSQL, a few hundred commits a second) gets fewer pipelined
    // requests, so that a run ends in minutes; the rate is per second all the same.
    if let Some(n) = value("--pipelined").and_then(|n| n.parse().ok()) {
        sizes.pipelined = n;
    }
    // Search over more messages than the 100,000 (the memory store's index at depth).
    if let Some(n) = value("--search-messages").and_then(|n| n.parse().ok()) {
        sizes.search = n;
    }
    let sizes = &sizes;
    let label = value("--label").unwrap_or_else(|| cmd.join(" "));
    let mut report = Report { label, figures: serde_json::Map::new() };

    if let Some(n) = value("--fleet").and_then(|n| n.parse().ok()) {
        measure_fleet(cmd, n, sizes, &mut report);
        report.write(value("--json"));
        return;
    }
    if flag("--million-only") {
        measure_million_alone(cmd, sizes, &mut report);
        report.write(value("--json"));
        return;
    }
    let mut c = Client::spawn(cmd);
    if flag("--search-only") {
        measure_search(&mut c, sizes, &mut report);
        report.add("peak_rss_mib", c.peak_rss_kib() as f64 / 1024.0, "MiB");
        c.close();
        report.write(value("--json"));
        return;
    }
    if let Some(n) = value("--sessions").and_then(|n| n.parse().ok()) {
        measure_sessions(&mut c, n, &mut report);
        report.add("peak_rss_mib", c.peak_rss_kib() as f64 / 1024.0, "MiB");
        c.close();
        report.write(value("--json"));
        return;
    }
    if flag("--images-only") {
        measure_images(&mut c, sizes, &mut report);
        c.close();
        return;
    }
    if flag("--history-only") {
        measure_history(&mut c, sizes, &mut report);
        c.close();
        return;
    }
    measure_spawn(cmd, &mut report);
    measure_round_trips(&mut c, sizes, &mut report);
    if !flag("--round-trips-only") {
        measure_history(&mut c, sizes, &mut report);
        measure_forks(&mut c, sizes, &mut report);
    }
    // Before the measures only convo takes part in, so that the baselines compare.
    report.add("peak_rss_mib", c.peak_rss_kib() as f64 / 1024.0, "MiB");
    if flag("--runtime") {
        measure_runtime(&mut c, sizes, flag("--round-trips-only"), &mut report);
    }
    if flag("--provider") {
        measure_provider(&mut c, sizes, &mut report);
    }
    if flag("--search") {
        measure_search(&mut c, sizes, &mut report);
    }
    if flag("--context") {
        measure_context(&mut c, sizes, &mut report);
    }
    if flag("--images") {
        measure_images(&mut c, sizes, &mut report);
    }
    c.close();
    if flag("--million") {
        measure_million_alone(cmd, sizes, &mut report);
    }
    report.write(value("--json"));
}

/// `measure_million` in a server of its own: its peak RSS is that of the million
/// messages, not of everything measured before them.
fn measure_million_alone(cmd: &[String], sizes: &Sizes, report: &mut Report) {
    let mut c = Client::spawn(cmd);
    measure_million(&mut c, sizes, report);
    report.add("peak_rss_with_million_mib", c.peak_rss_kib() as f64 / 1024.0, "MiB");
    c.close();
}

struct Report {
    label: String,
    figures: serde_json::Map<String, Value>,
}

impl Report {
    /// Appends the run, as one JSON object, to `path`.
    fn write(&self, path: Option<String>) {
        let Some(path) = path else { return };
        let line = json!({"label": self.label, "figures": self.figures}).to_string();
        let mut file = std::fs::OpenOptions::new().create(true).append(true).open(&path).expect("open --json file");
        writeln!(file, "{line}").expect("write --json file");
    }

    fn add(&mut self, name: &str, value: f64, unit: &str) {
        println!("{:<28} {:<40} {:>14.3} {unit}", self.label, name, value);
        self.figures.insert(name.into(), json!(value));
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// The time of one call, to its reply.
fn timed(c: &mut Client, method: &str, params: &str) -> Duration {
    let started = std::time::Instant::now();
    c.call(method, params);
    started.elapsed()
}

/// The median time of 5 calls of the same request.
fn median_of_5(c: &mut Client, method: &str, params: &str) -> Duration {
    median((0..5).map(|_| timed(c, method, params)).collect())
}

fn user(session: &str, text: &str) -> (String, String) {
    ("session/add_user".into(), json!({"session_id": session, "text": text}).to_string())
}

fn create(c: &mut Client, session: &str) {
    c.call("session/create", &json!({"session_id": session}).to_string());
}

/// A session of `n` user messages of `size` bytes each, written pipelined.
fn build(c: &mut Client, session: &str, n: usize, size: usize) -> Duration {
    create(c, session);
    let (method, params) = user(session, &"x".repeat(size));
    c.pipeline(n, WINDOW, |_| (&method, &params))
}

fn measure_spawn(cmd: &[String], report: &mut Report) {
    let times = (0..5)
        .map(|_| {
            let c = Client::spawn(cmd);
            let t = c.first_reply;
            c.close();
            t
        })
        .collect();
    report.add("spawn_to_initialize_ms", ms(median(times)), "ms");
}

/// `processes` servers, each pipelining `sizes.pipelined / processes` appends, 16 in
/// flight, into a session of its own, all at once.
fn measure_fleet(cmd: &[String], processes: usize, sizes: &Sizes, report: &mut Report) {
    let per = (sizes.pipelined / processes).max(1);
    let mut clients: Vec<Client> = (0..processes).map(|_| Client::spawn(cmd)).collect();
    for (p, c) in clients.iter_mut().enumerate() {
        create(c, &format!("own{p}"));
    }
    let start = std::sync::Barrier::new(processes);
    let took = std::thread::scope(|scope| {
        let runs: Vec<_> = clients
            .iter_mut()
            .enumerate()
            .map(|(p, c)| {
                let start = &start;
                scope.spawn(move || {
                    let (method, params) = user(&format!("own{p}"), "hello");
                    start.wait();
                    c.pipeline(per, 16, |_| (&method, &params))
                })
            })
            .collect();
        runs.into_iter().map(|r| r.join().expect("a fleet client")).max().unwrap_or_default()
    });
    for c in clients {
        c.close();
    }
    report.add(&format!("fleet_{processes}_add_user_per_s"), (per * processes) as f64 / took.as_secs_f64(), "req/s");
}

/// How many creates are in flight in `measure_sessions`: a host making sessions in bulk
/// (an import, a test fixture) sends them a thousand at a time.
const CREATES_IN_FLIGHT: usize = 1000;

/// A store of `n` sessions: creates pipelined, a thousand in flight (half with the ids the server makes, half
/// with the host's), updates and deletes pipelined, and `session/list` pages of 100: the
/// first (median of 5) and those reached through `next_cursor` at depth (the median of
/// the last 100 pages of a walk through every session).
fn measure_sessions(c: &mut Client, n: usize, report: &mut Report) {
    let create = r#"{}"#.to_owned();
    let half = n / 2;
    let took = c.pipeline(half, CREATES_IN_FLIGHT, |_| ("session/create", &create));
    report.add("creates_minted_per_s", half as f64 / took.as_secs_f64(), "req/s");
    let named: Vec<String> = (0..n - half).map(|i| json!({"session_id": format!("s{i:07}")}).to_string()).collect();
    let took = c.pipeline(named.len(), CREATES_IN_FLIGHT, |i| ("session/create", &named[i]));
    report.add("creates_named_per_s", named.len() as f64 / took.as_secs_f64(), "req/s");
    let k = named.len().min(10_000);
    let updates: Vec<String> =
        (0..k).map(|i| json!({"session_id": format!("s{i:07}"), "title": format!("t{i}")}).to_string()).collect();
    let took = c.pipeline(k, CREATES_IN_FLIGHT, |i| ("session/update", &updates[i]));
    report.add("updates_per_s", k as f64 / took.as_secs_f64(), "req/s");

    let first = json!({"limit": 100}).to_string();
    report.add("list_first_page_ms", ms(median_of_5(c, "session/list", &first)), "ms");
    let mut pages = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let params = match &cursor {
            Some(cursor) => json!({"limit": 100, "cursor": cursor}),
            None => json!({"limit": 100}),
        }
        .to_string();
        let started = std::time::Instant::now();
        let reply = c.call("session/list", &params);
        pages.push(started.elapsed());
        let reply: Value = serde_json::from_slice(&reply).expect("a list reply");
        cursor = reply["result"]["next_cursor"].as_str().map(str::to_owned);
        if cursor.is_none() {
            break;
        }
    }
    let deep = pages.split_off(pages.len().saturating_sub(100));
    report.add("list_pages_walked", pages.len() as f64 + deep.len() as f64, "pages");
    pages.truncate(100);
    if !pages.is_empty() {
        report.add("list_page_early_ms", ms(median(pages)), "ms");
    }
    report.add("list_page_at_depth_ms", ms(median(deep)), "ms");

    let deletes: Vec<String> = (0..k).map(|i| json!({"session_id": format!("s{i:07}")}).to_string()).collect();
    let took = c.pipeline(k, CREATES_IN_FLIGHT, |i| ("session/delete", &deletes[i]));
    report.add("deletes_per_s", k as f64 / took.as_secs_f64(), "req/s");
}

fn measure_round_trips(c: &mut Client, sizes: &Sizes, report: &mut Report) {
    create(c, "seq");
    let mut lat: Vec<Duration> = (0..sizes.sequential)
        .map(|i| {
            let started = std::time::Instant::now();
            let (m, p) = user("seq", &i.to_string());
            c.call(&m, &p);
            started.elapsed()
        })
        .collect();
    lat.sort();
    let total: Duration = lat.iter().sum();
    report.add("sequential_add_user_p50_us", lat[lat.len() / 2].as_secs_f64() * 1e6, "us");
    report.add("sequential_add_user_p99_us", lat[lat.len() * 99 / 100].as_secs_f64() * 1e6, "us");
    report.add("sequential_add_user_per_s", sizes.sequential as f64 / total.as_secs_f64(), "req/s");

    // Spread over 8 sessions, then all on one: a host pipelining into the one
    // conversation it runs (writes on one session are ordered, so this is the harder).
    let requests: Vec<(String, String)> = (0..8)
        .map(|s| {
            create(c, &format!("pipe{s}"));
            user(&format!("pipe{s}"), "hello")
        })
        .collect();
    let took = c.pipeline(sizes.pipelined, WINDOW, |i| (&requests[i % 8].0, &requests[i % 8].1));
    report.add("pipelined_add_user_per_s", sizes.pipelined as f64 / took.as_secs_f64(), "req/s");
    create(c, "pipe-one");
    let (method, params) = user("pipe-one", "hello");
    let took = c.pipeline(sizes.pipelined, WINDOW, |_| (&method, &params));
    report.add("pipelined_one_session_add_user_per_s", sizes.pipelined as f64 / took.as_secs_f64(), "req/s");
}

/// A turn through the host, answered at once: `session/run` (convo), or the echo's
/// `echo/ask`, which only asks `runtime/run` and answers (the floor of such a turn).
/// Each convo turn runs on a session of its own holding one earlier turn, so that the
/// figure is the turn's own cost, not that of sending an ever longer history.
fn measure_runtime(c: &mut Client, sizes: &Sizes, floor: bool, report: &mut Report) {
    let answer = r#"{"text":"ok","usage":{"input_tokens":1,"output_tokens":1}}"#;
    let mut lat: Vec<Duration> = (0..sizes.sequential)
        .map(|i| {
            let (method, params) = if floor {
                ("echo/ask", "{}".to_owned())
            } else {
                let session = format!("run{i}");
                create(c, &session);
                let (m, p) = user(&session, "earlier");
                c.call(&m, &p);
                c.call("session/add_assistant", &json!({"session_id": session, "text": "ok"}).to_string());
                ("session/run", json!({"session_id": session, "input": "hi"}).to_string())
            };
            let started = std::time::Instant::now();
            c.call_hosting(method, &params, answer);
            started.elapsed()
        })
        .collect();
    lat.sort();
    report.add("runtime_turn_p50_us", lat[lat.len() / 2].as_secs_f64() * 1e6, "us");
    report.add("runtime_turn_p99_us", lat[lat.len() * 99 / 100].as_secs_f64() * 1e6, "us");
}

fn measure_history(c: &mut Client, sizes: &Sizes, report: &mut Report) {
    let before = c.rss_kib();
    build(c, "hist", sizes.history, 1024);
    let grown = c.rss_kib().saturating_sub(before) as f64 * 1024.0;
    report.add("rss_per_payload_10k_x_1kb", grown / (sizes.history * 1024) as f64, "x");
    let params = json!({"session_id": "hist"}).to_string();
    let mut bytes = 0;
    let times = (0..5)
        .map(|_| {
            let started = std::time::Instant::now();
            bytes = c.call("session/history", &params).len();
            started.elapsed()
        })
        .collect();
    let t = median(times);
    report.add("history_10k_x_1kb_mb_per_s", bytes as f64 / 1e6 / t.as_secs_f64(), "MB/s");
    let started = std::time::Instant::now();
    c.call("session/trim", &json!({"session_id": "hist", "max_turns": sizes.history / 2}).to_string());
    report.add("trim_half_of_10k_ms", ms(started.elapsed()), "ms");
}

/// `session/history` of a session whose every message carries the same 1 MiB image
/// (random bytes behind a PNG signature), inline and by reference (`images: "ref"`):
/// the reply's size and the rate it is read at, median of 5.
fn measure_images(c: &mut Client, sizes: &Sizes, report: &mut Report) {
    let mut state = 0x9E37_79B9_u32;
    let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
    png.extend((0..1 << 20).map(|_| {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        state as u8
    }));
    let image = base64(&png);
    create(c, "images");
    let params = json!({"session_id": "images", "text": "look", "images": [image]}).to_string();
    for _ in 0..sizes.images {
        c.call("session/add_user", &params);
    }
    for mode in ["inline", "ref"] {
        let params = json!({"session_id": "images", "images": mode}).to_string();
        let mut bytes = 0;
        let times = (0..5)
            .map(|_| {
                let started = std::time::Instant::now();
                bytes = c.call("session/history", &params).len();
                started.elapsed()
            })
            .collect();
        let t = median(times);
        report.add(&format!("history_images_{mode}_bytes"), bytes as f64, "B");
        report.add(&format!("history_images_{mode}_ms"), ms(t), "ms");
        report.add(&format!("history_images_{mode}_mb_per_s"), bytes as f64 / 1e6 / t.as_secs_f64(), "MB/s");
    }
}

/// Standard base64 with padding (the bench's only dependency is serde_json).
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, b)| n | (*b as u32) << (16 - 8 * i));
        for i in 0..4 {
            let c = if i <= chunk.len() { ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char } else { '=' };
            out.push(c);
        }
    }
    out
}

fn measure_forks(c: &mut Client, sizes: &Sizes, report: &mut Report) {
    for &n in sizes.forks {
        let session = format!("fork{n}");
        build(c, &session, n, 64);
        let times = (0..5)
            .map(|k| {
                let params = json!({"session_id": session, "new_session_id": format!("{session}-copy{k}")}).to_string();
                let started = std::time::Instant::now();
                c.call("session/fork", &params);
                started.elapsed()
            })
            .collect();
        report.add(&format!("fork_{n}_ms"), ms(median(times)), "ms");
    }
}

/// A session of a million messages, written in batches; pages from its start, middle
/// and end.
fn measure_million(c: &mut Client, sizes: &Sizes, report: &mut Report) {
    let n = sizes.million;
    create(c, "million");
    let batch: Vec<Value> = (0..1000).map(|i| json!({"role": "user", "content": format!("message {i}")})).collect();
    let params = json!({"session_id": "million", "messages": batch}).to_string();
    let took = c.pipeline(n / 1000, 8, |_| ("session/add_messages", &params));
    report.add("million_build_messages_per_s", n as f64 / took.as_secs_f64(), "msg/s");
    for (name, offset) in [("start", 0), ("middle", n / 2), ("end", n - 100)] {
        let params = json!({"session_id": "million", "offset": offset, "limit": 100}).to_string();
        report.add(&format!("million_page_100_at_{name}_ms"), ms(median_of_5(c, "session/history", &params)), "ms");
    }
}

/// Session `id` of `messages` messages: turns of a question, a tool call, its result and
/// an answer.
fn tool_turns(c: &mut Client, id: &str, messages: usize) {
    create(c, id);
    let turn = |t: usize| {
        json!([
            {"role": "user", "content": format!("Question {t}: what does the function on line {t} do?")},
            {"role": "assistant", "content": "Let me look.", "tool_calls": [{"id": format!("c{t}"), "name": "read", "arguments": {"line": t}}]},
            {"role": "tool", "tool_call_id": format!("c{t}"), "content": "fn main() { println!(\"hello\"); }"},
            {"role": "assistant", "content": "It prints a greeting to standard output, then returns."},
        ])
    };
    let batches: Vec<String> = (0..messages / 100)
        .map(|b| {
            let messages: Vec<Value> =
                (b * 25..(b + 1) * 25).flat_map(|t| turn(t).as_array().unwrap().clone()).collect();
            json!({"session_id": id, "messages": messages}).to_string()
        })
        .collect();
    c.pipeline(batches.len(), 8, |b| ("session/add_messages", &batches[b]));
}

/// A session of 10,000 messages (turns of a question, a tool call, its result and an
/// answer): export to each provider, and token counts (the first loads the tokenizer).
fn measure_provider(c: &mut Client, sizes: &Sizes, report: &mut Report) {
    tool_turns(c, "provider", sizes.history);
    let count = json!({"session_id": "provider"}).to_string();
    report.add("count_tokens_10k_first_ms", ms(timed(c, "session/count_tokens", &count)), "ms");
    report.add("count_tokens_10k_ms", ms(median_of_5(c, "session/count_tokens", &count)), "ms");
    // An agent's loop: one message appended, then counted.
    let times = (0..5)
        .map(|n| {
            let text = json!({"session_id": "provider", "text": format!("And line {n}?")}).to_string();
            c.call("session/add_user", &text);
            timed(c, "session/count_tokens", &count)
        })
        .collect();
    report.add("count_tokens_10k_after_append_ms", ms(median(times)), "ms");
    for format in ["openai_chat", "anthropic_messages", "gemini_contents"] {
        let params = json!({"session_id": "provider", "format": format}).to_string();
        report.add(&format!("export_10k_{format}_ms"), ms(median_of_5(c, "session/export", &params)), "ms");
    }
}

/// Context management (issue 44): `export` with `fit {max_tokens: 100000}` of a session
/// of `sizes.fit` messages (the turns of `measure_provider`, each message counted once
/// before), and a tool loop of `sizes.steps` Anthropic steps (thinking on, 1 to 30
/// parallel calls a step, the system prompt on a 1-hour TTL) exported with `cache` at
/// every step and sent through `cache_model`: the share of its input read from cache,
/// with convo's breakpoints and with one on the last block only.
fn measure_context(c: &mut Client, sizes: &Sizes, report: &mut Report) {
    tool_turns(c, "fit", sizes.fit);
    let count = json!({"session_id": "fit", "format": "anthropic_messages"}).to_string();
    report.add("count_tokens_fit_session_first_ms", ms(timed(c, "session/count_tokens", &count)), "ms");
    let times = (0..5)
        .map(|n| {
            c.call("session/add_user", &json!({"session_id": "fit", "text": format!("And line {n}?")}).to_string());
            timed(c, "session/count_tokens", &count)
        })
        .collect();
    report.add("count_tokens_fit_session_after_append_ms", ms(median(times)), "ms");
    let fit = json!({"session_id": "fit", "format": "anthropic_messages", "fit": {"max_tokens": 100_000}}).to_string();
    report.add("export_fit_100k_tokens_ms", ms(median_of_5(c, "session/export", &fit)), "ms");

    let system = "You are a coding agent working in a large repository. ".repeat(60);
    c.call("session/create", &json!({"session_id": "loop", "system": system}).to_string());
    c.call(
        "session/add_user",
        &json!({"session_id": "loop", "text": "Find why the build fails and fix it."}).to_string(),
    );
    let export = json!({"session_id": "loop", "format": "anthropic_messages",
                        "cache": {"ttl": "5m", "system_ttl": "1h"}})
    .to_string();
    let (mut placed, mut last_only) = (cache_model::Cache::default(), cache_model::Cache::default());
    for step in 0..sizes.steps {
        let reply: Value = serde_json::from_slice(&c.call("session/export", &export)).expect("a JSON reply");
        let payload = reply["result"]["payload"].clone();
        placed.request(&payload);
        last_only.request(&cache_model::last_block_only(&payload));
        let calls = 1 + (step * 7) % 30;
        let mut content = vec![
            json!({"type": "thinking", "thinking": format!("Step {step}: {calls} files to read next."), "signature": "c2ln"}),
        ];
        content.extend((0..calls).map(|k| json!({"type": "tool_use", "id": format!("toolu_{step}_{k}"), "name": "read", "input": {"path": format!("src/{step}/{k}.rs")}})));
        let response = json!({"model": "claude-opus-4-6", "id": format!("msg_{step}"), "type": "message", "role": "assistant",
                              "content": content, "stop_reason": "tool_use", "stop_sequence": null,
                              "usage": {"input_tokens": 10, "output_tokens": 10}});
        c.call(
            "session/add_response",
            &json!({"session_id": "loop", "format": "anthropic_messages", "response": response}).to_string(),
        );
        let results: Vec<String> = (0..calls)
            .map(|k| {
                let text = format!("// src/{step}/{k}.rs\n") + &"let value = compute(input, &config)?;\n".repeat(12);
                json!({"session_id": "loop", "tool_call_id": format!("toolu_{step}_{k}"), "content": text}).to_string()
            })
            .collect();
        c.pipeline(results.len(), 8, |k| ("session/add_tool_result", &results[k]));
    }
    report.add("cache_read_share", placed.share(), "share");
    report.add("cache_read_share_last_block_only", last_only.share(), "share");
}

/// `session/search` over `sizes.search` messages in 10 sessions (12 words each, from a
/// few common words and many rare ones; `zebra` in one message of 10,000), one page of
/// 20 hits: a rare word, a common word, two common words, a phrase, a prefix, and a
/// common word in one session.
fn measure_search(c: &mut Client, sizes: &Sizes, report: &mut Report) {
    const COMMON: [&str; 10] = ["the", "code", "error", "file", "test", "build", "run", "value", "function", "return"];
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut word = |n: u64| -> String {
        let r = next();
        if r % 3 == 0 {
            return COMMON[(r / 3 % 10) as usize].to_owned();
        }
        let mut k = r % 50_000 + n % 7;
        let mut w = String::new();
        while w.len() < 3 || k > 0 {
            w.push((b'a' + (k % 26) as u8) as char);
            k /= 26;
        }
        w
    };
    let per_session = sizes.search / 10;
    let mut batches = Vec::new();
    for s in 0..10 {
        create(c, &format!("search{s}"));
        for b in 0..per_session.div_ceil(1000) {
            let messages: Vec<Value> = (b * 1000..((b + 1) * 1000).min(per_session))
                .map(|i| {
                    let n = (s * per_session + i) as u64;
                    let mut text: Vec<String> = (0..12).map(|_| word(n)).collect();
                    if n % 10_000 == 7 {
                        text[5] = "zebra".into();
                    }
                    json!({"role": if i % 2 == 0 { "user" } else { "assistant" }, "content": text.join(" ")})
                })
                .collect();
            batches.push(json!({"session_id": format!("search{s}"), "messages": messages}).to_string());
        }
    }
    let took = c.pipeline(batches.len(), 8, |b| ("session/add_messages", &batches[b]));
    report.add("search_build_messages_per_s", sizes.search as f64 / took.as_secs_f64(), "msg/s");
    let queries = [
        ("rare_word", json!({"query": "zebra"})),
        ("common_word", json!({"query": "error"})),
        ("two_words", json!({"query": "error file"})),
        ("phrase", json!({"query": "\"build test\""})),
        ("prefix", json!({"query": "fun*"})),
        ("in_one_session", json!({"query": "error", "session_id": "search3"})),
    ];
    // The first search after the messages were stored (a cold cache, on SQLite), apart;
    // the five timed after it are the steady state.
    let size = match sizes.search {
        1_000_000 => "1m".to_owned(),
        100_000 => "100k".to_owned(),
        n => n.to_string(),
    };
    let first = timed(c, "session/search", &json!({"query": "zebra"}).to_string());
    report.add(&format!("search_{size}_first_ms"), ms(first), "ms");
    for (name, params) in queries {
        let took = median_of_5(c, "session/search", &params.to_string());
        report.add(&format!("search_{size}_{name}_ms"), ms(took), "ms");
    }
}
