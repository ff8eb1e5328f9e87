//! Path normalisation, of request paths and `rewrite` results.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rein::fuzz::path(data));
