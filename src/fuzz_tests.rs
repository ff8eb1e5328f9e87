//! The fuzz entry points on the seed corpora in the repository (so they stay valid and keep running in the
//! ordinary test suite), and on every input the fuzzer found crashing, as regressions.

use std::path::Path;

/// A fuzz target: its name (fuzz/fuzz_targets/NAME.rs, fuzz/seeds/NAME/) and its entry point.
type Target = (&'static str, fn(&[u8]));

const TARGETS: &[Target] = &[
    ("config", super::config),
    ("pattern", super::pattern),
    ("template", super::template),
    ("path", super::path),
    ("range", super::range),
    ("conditional", super::conditional),
    ("http1_response", super::http1_response),
    ("http1_request", super::http1_request),
    ("chunked", super::chunked),
    ("fastcgi", super::fastcgi),
    ("cgi_head", super::cgi_head),
    ("tls_bundle", super::tls_bundle),
];

#[test]
fn every_seed_runs_through_its_target() {
    let seeds = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds");
    for (name, target) in TARGETS {
        let dir = seeds.join(name);
        let files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|entry| entry.expect("a seed directory entry").path())
            .collect();
        assert!(files.len() >= 2, "{name}: a few seeds at least");
        for file in files {
            let data = std::fs::read(&file).expect("a readable seed");
            target(&data);
        }
    }
}

#[test]
fn every_target_has_a_fuzz_binary() {
    let targets = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/fuzz_targets");
    for (name, _) in TARGETS {
        assert!(targets.join(format!("{name}.rs")).is_file(), "{name}");
    }
}

#[test]
fn short_and_empty_inputs_are_nothing_special() {
    for (_, target) in TARGETS {
        for data in [&b""[..], b"\0", b"\n", b"\xff\xff"] {
            target(data);
        }
    }
}
