//! `convo-envelope-bench`: the time to classify one frame (read the members JSON-RPC
//! needs, each as the JSON text of its value, the whole frame checked to be JSON) with
//! convo's classifier (`src/rpc/envelope.rs`, compiled here as it is: its hand-written
//! scanner, serde_json behind it) against the crates made for lazy field access over
//! SIMD-validated JSON: sonic-rs (a struct of `LazyValue`s, borrowed from the frame) and
//! simd-json (its tape, the floor of what it reads: it hands out no member's text).
//!
//! ```text
//! convo-envelope-bench [--quick]
//! ```
//!
//! Prints, per frame kind, the median of 7 timings of each reader in nanoseconds a frame.

#[allow(dead_code, unexpected_cfgs, clippy::all)]
#[path = "../../../src/rpc/envelope.rs"]
mod envelope;

use std::hint::black_box;
use std::time::{Duration, Instant};

use serde::Deserialize;
use sonic_rs::LazyValue;

/// The members as sonic-rs reads them: what convo's `Envelope` is for serde_json.
#[derive(Deserialize)]
#[allow(dead_code, reason = "read, as convo reads its members; not all used here")]
struct Sonic<'a> {
    #[serde(default, borrow)]
    jsonrpc: Option<LazyValue<'a>>,
    #[serde(default, borrow)]
    id: Option<LazyValue<'a>>,
    #[serde(default, borrow)]
    method: Option<LazyValue<'a>>,
    #[serde(default, borrow)]
    params: Option<LazyValue<'a>>,
    #[serde(default, borrow)]
    result: Option<LazyValue<'a>>,
    #[serde(default, borrow)]
    error: Option<LazyValue<'a>>,
}

/// The members as serde_json reads them (convo's fallback, alone).
#[derive(Deserialize)]
#[allow(dead_code, reason = "read, as convo reads its members; not all used here")]
struct Serde<'a> {
    #[serde(default, borrow)]
    jsonrpc: Option<&'a serde_json::value::RawValue>,
    #[serde(default, borrow)]
    id: Option<&'a serde_json::value::RawValue>,
    #[serde(default, borrow)]
    method: Option<&'a serde_json::value::RawValue>,
    #[serde(default, borrow)]
    params: Option<&'a serde_json::value::RawValue>,
    #[serde(default, borrow)]
    result: Option<&'a serde_json::value::RawValue>,
    #[serde(default, borrow)]
    error: Option<&'a serde_json::value::RawValue>,
}

fn frames() -> Vec<(&'static str, String)> {
    let kib = "x".repeat(1000);
    let messages: Vec<String> = (0..10)
        .map(|i| format!(r#"{{"role":"{}","content":"{kib}"}}"#, if i % 2 == 0 { "user" } else { "assistant" }))
        .collect();
    let escaped = "line \\\"quoted\\\" \\u00e9t\\u00e9 \\n tab\\t ".repeat(40);
    vec![
        ("add_user, 5 bytes of text", r#"{"jsonrpc":"2.0","id":12345,"method":"session/add_user","params":{"session_id":"pipe-one","text":"hello"}}"#.to_owned()),
        ("history request", r#"{"jsonrpc":"2.0","id":7,"method":"session/history","params":{"session_id":"hist","limit":50}}"#.to_owned()),
        ("add_messages, 10 x 1 KB", format!(r#"{{"jsonrpc":"2.0","id":99,"method":"session/add_messages","params":{{"session_id":"s","messages":[{}]}}}}"#, messages.join(","))),
        ("add_user, 1 KB escaped", format!(r#"{{"jsonrpc":"2.0","id":3,"method":"session/add_user","params":{{"session_id":"s","text":"{escaped}"}}}}"#)),
        ("add_tool_result, 100 KB", format!(r#"{{"jsonrpc":"2.0","id":4,"method":"session/add_tool_result","params":{{"session_id":"s","tool_call_id":"call_1","content":"{}"}}}}"#, "y".repeat(100_000))),
        ("a response to the server", r#"{"jsonrpc":"2.0","id":"convo-1","result":{"text":"ok","usage":{"input_tokens":1,"output_tokens":1}}}"#.to_owned()),
    ]
}

/// The median of 7 timings of `n` calls of `f`, per call.
fn time(n: usize, mut f: impl FnMut()) -> f64 {
    let mut runs: Vec<Duration> = (0..7)
        .map(|_| {
            let started = Instant::now();
            for _ in 0..n {
                f();
            }
            started.elapsed()
        })
        .collect();
    runs.sort();
    runs[3].as_secs_f64() * 1e9 / n as f64
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    println!(
        "{:<28} {:>10} {:>12} {:>10} {:>14}  (ns a frame, median of 7)",
        "frame", "convo", "serde_json", "sonic-rs", "simd-json tape"
    );
    for (name, frame) in frames() {
        let bytes = frame.as_bytes();
        // Each reader must take the frame, and find its members, as convo does.
        assert!(matches!(
            envelope::classify(bytes),
            envelope::Frame::Single(envelope::Element::Call { .. } | envelope::Element::Response { .. })
        ));
        let sonic: Sonic = sonic_rs::from_slice(bytes).expect("sonic-rs reads the frame");
        assert!(sonic.jsonrpc.is_some() && sonic.id.is_some() && (sonic.params.is_some() || sonic.result.is_some()));
        let n = if quick { 100 } else { (20_000_000 / bytes.len()).clamp(2_000, 200_000) };
        let convo = time(n, || {
            black_box(envelope::classify(black_box(bytes)));
        });
        let serde = time(n, || {
            let text = std::str::from_utf8(black_box(bytes)).unwrap();
            black_box(serde_json::from_str::<Serde>(text).unwrap());
        });
        let sonic = time(n, || {
            black_box(sonic_rs::from_slice::<Sonic>(black_box(bytes)).unwrap());
        });
        let mut buffer = bytes.to_vec();
        let simd = time(n, || {
            buffer.copy_from_slice(bytes);
            black_box(simd_json::to_tape(black_box(&mut buffer)).unwrap().0.len());
        });
        println!("{name:<28} {convo:>10.0} {serde:>12.0} {sonic:>10.0} {simd:>14.0}");
    }
    // What each says of a frame whose params are not JSON: all three must refuse it.
    let broken = br#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":[1,2,}}"#;
    let refused = (
        matches!(envelope::classify(broken), envelope::Frame::ParseError(_)),
        sonic_rs::from_slice::<Sonic>(broken).is_err(),
        simd_json::to_tape(&mut broken.to_vec()).is_err(),
    );
    println!("params not JSON, refused by (convo, sonic-rs, simd-json): {refused:?}");
}
