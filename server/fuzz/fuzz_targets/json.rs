//! Fuzz target: the `json` parser never panics, and what it accepts names files.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wright::edit::{Format, format};

fuzz_target!(|data: &[u8]| {
    if let Ok(input) = std::str::from_utf8(data)
        && let Ok(ops) = format::parse(input, Format::Json)
    {
        assert!(!ops.is_empty());
    }
});
