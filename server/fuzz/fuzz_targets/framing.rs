//! Fuzz target: the LSP `Content-Length` decoder in front of tower-lsp-server.
//!
//! Two properties. Arbitrary bytes, fed in arbitrary read sizes, never panic the decoder and
//! never leave it spinning (each call either yields a frame that consumed bytes or waits for
//! more). And well-framed JSON messages, however the reads split them, come back exactly as
//! they were sent, none skipped and none merged.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wright::lsp::framing::{Decoder, Frame, encode};

/// Feeds `input` in reads of `read_size` bytes (at least one); returns every frame.
fn decode(input: &[u8], read_size: usize) -> Vec<Frame> {
    let mut decoder = Decoder::default();
    let mut frames = Vec::new();
    for chunk in input.chunks(read_size.max(1)) {
        decoder.extend(chunk);
        // A decoder that keeps yielding frames without input is spinning.
        for _ in 0..=input.len() + 1 {
            match decoder.next_frame() {
                Some(frame) => frames.push(frame),
                None => break,
            }
        }
        assert!(
            frames.len() <= input.len() + 1,
            "more frames than bytes: the decoder is not consuming input"
        );
    }
    frames
}

fuzz_target!(|data: &[u8]| {
    let Some((&split, rest)) = data.split_first() else {
        return;
    };
    let read_size = usize::from(split % 64) + 1;

    // Raw bytes: anything goes, but nothing panics.
    decode(rest, read_size);

    // Framed messages: each `\0`-separated piece becomes a JSON body (itself when it is JSON,
    // else a JSON string of it), as a client would send them.
    let bodies: Vec<Vec<u8>> = rest
        .split(|&b| b == 0)
        .map(|piece| {
            if serde_json::from_slice::<serde::de::IgnoredAny>(piece).is_ok() {
                piece.to_vec()
            } else {
                serde_json::to_vec(&String::from_utf8_lossy(piece)).unwrap()
            }
        })
        .collect();
    let stream: Vec<u8> = bodies.iter().flat_map(|body| encode(body)).collect();
    let frames = decode(&stream, read_size);
    let expected: Vec<Frame> = bodies.into_iter().map(Frame::Message).collect();
    assert_eq!(frames, expected);
});
