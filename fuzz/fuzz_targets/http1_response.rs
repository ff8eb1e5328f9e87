//! The proxy's HTTP/1 client: response heads, then a chunked body.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rein::fuzz::http1_response(data));
