//! Templates with variables, rendered against any request.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rein::fuzz::template(data));
