//! The configuration compiler: any JSON document compiles or is refused, never panics.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rein::fuzz::config(data));
