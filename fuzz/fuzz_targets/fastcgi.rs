//! The FastCGI record decoder and the contents records carry.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rein::fuzz::fastcgi(data));
