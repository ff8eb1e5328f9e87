//! Certificate bundles (PEM chain and key) as uploaded to `/certificates`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rein::fuzz::tls_bundle(data));
