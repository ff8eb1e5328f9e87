//! The conditional request headers (`If-Match`, `If-None-Match`, dates, `If-Range`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rein::fuzz::conditional(data));
