//! The CGI response head at the start of a FastCGI application's output.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rein::fuzz::cgi_head(data));
