//! The frame decoder on any byte stream, cut at any points: it never panics, never
//! hands out a frame over the limit, and decodes the same whether the bytes arrive in
//! one piece or many.
#![no_main]

use convo::rpc::framing::{Decoder, Framing, FramingCell, Incoming};
use libfuzzer_sys::fuzz_target;

fn decode(framing: Option<Framing>, max: usize, pieces: &[&[u8]]) -> Vec<Incoming> {
    let mut decoder = Decoder::new(FramingCell::new(framing), max);
    let mut out = Vec::new();
    for piece in pieces {
        decoder.push(piece, &mut out);
    }
    decoder.finish(&mut out);
    out
}

fuzz_target!(|data: &[u8]| {
    let [mode, seed, rest @ ..] = data else { return };
    let framing = match mode % 3 {
        0 => None,
        1 => Some(Framing::Lsp),
        _ => Some(Framing::Ndjson),
    };
    let max = 16 + (*seed as usize) * 4;
    // Cut points from the seed: pieces of 1 to 17 bytes.
    let mut pieces = Vec::new();
    let (mut at, mut state) = (0, *seed as usize | 1);
    while at < rest.len() {
        state = state.wrapping_mul(1_103_515_245).wrapping_add(12_345);
        let len = 1 + (state >> 16) % 17;
        pieces.push(&rest[at..(at + len).min(rest.len())]);
        at += len;
    }
    let cut = decode(framing, max, &pieces);
    assert_eq!(cut, decode(framing, max, &[rest]), "pieces and whole decode alike");
    for incoming in &cut {
        if let Incoming::Frame(body) = incoming {
            assert!(body.len() <= max, "a frame over the limit was handed out");
        }
    }
});
