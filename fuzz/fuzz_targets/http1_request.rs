//! rein's HTTP/1 server: request heads, then a chunked body.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rein::fuzz::http1_request(data));
