//! The `Range` header against any file size.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rein::fuzz::range(data));
