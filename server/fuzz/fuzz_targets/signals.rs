//! Fuzz target: the test-output parsers (`compaction::signals`).
//!
//! Any output, under any runner's parser, never panics, and the rendering keeps the promise
//! the placeholders rely on: every key fact ([`Signals::keys`]) appears in it verbatim.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use wright::compaction::Format;
use wright::compaction::signals::extract;

const HINTS: [Option<Format>; 9] = [
    None,
    Some(Format::Cargo),
    Some(Format::Pytest),
    Some(Format::Unittest),
    Some(Format::Jest),
    Some(Format::Vitest),
    Some(Format::GoTest),
    Some(Format::Tsc),
    Some(Format::Generic),
];

fuzz_target!(|data: &[u8]| {
    let Some((&hint, rest)) = data.split_first() else {
        return;
    };
    let output = String::from_utf8_lossy(rest);
    let hint = HINTS[usize::from(hint) % HINTS.len()];
    let signals = extract(&output, hint, Some(Path::new("/ws")));
    let rendered = signals.render();
    for key in signals.keys() {
        assert!(
            rendered.contains(&key),
            "key {key:?} missing from {rendered:?}"
        );
    }
});
