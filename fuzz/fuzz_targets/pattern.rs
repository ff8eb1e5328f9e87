//! Route patterns (`match` conditions): compiled from any text, matched against any value.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rein::fuzz::pattern(data));
