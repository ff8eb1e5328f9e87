//! The chunked transfer-coding decoder.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rein::fuzz::chunked(data));
