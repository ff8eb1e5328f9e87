//! The example apps in `examples/` end to end: each made runnable as its README says, configured by its own
//! `rein.json` through the control API, then reloaded and one of its instances killed with `kill -9` under
//! keep-alive load, with no failed request. Each example is one entry of a table; one whose toolchain the
//! machine lacks is skipped with a message. (`examples/run NAME` does the same by hand, Elixir and Rails
//! included.)

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::harness::{Rein, Response, get, wait_for};
use crate::load::{Load, assert_no_failures};

/// An example app: its directory under `examples/`, its application's name in its `rein.json`, and how it
/// is made runnable.
struct Example {
    dir: &'static str,
    app: &'static str,
    /// Builds or checks the app from its sources (`src`) into `out`: the `working_directory` to give it.
    prepare: fn(src: &Path, out: &Path) -> Prepared,
}

enum Prepared {
    /// Runnable with this `working_directory`.
    In(PathBuf),
    /// Not on this machine: why.
    Skip(&'static str),
}

const GO: Example = Example {
    dir: "go",
    app: "go",
    prepare: build_go,
};

const RACK: Example = Example {
    dir: "rack",
    app: "rack",
    prepare: in_place,
};

const PLACK: Example = Example {
    dir: "plack",
    app: "plack",
    prepare: in_place,
};

#[test]
fn the_go_example_serves_reloads_and_survives_a_kill_with_no_failed_request() {
    run(&GO);
}

#[test]
fn the_rack_example_serves_reloads_and_survives_a_kill_with_no_failed_request() {
    run(&RACK);
}

#[test]
fn the_plack_example_serves_reloads_and_survives_a_kill_with_no_failed_request() {
    run(&PLACK);
}

// ----- how each example is made runnable ---------------------------------------------------------------

/// An app rein runs from its sources (Ruby, Perl): its runtime is one scripts/test.sh installs, so it is
/// never skipped; a missing gem or module refuses the configuration with the interpreter's own error.
fn in_place(src: &Path, _out: &Path) -> Prepared {
    Prepared::In(src.to_owned())
}

/// A Go toolchain: `go` in PATH, or where the official tarball and Debian's golang-go put it.
fn go_toolchain() -> Option<PathBuf> {
    let in_path = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|dir| dir.join("go"))
        .find(|p| p.is_file());
    in_path.or_else(|| {
        ["/usr/local/go/bin/go", "/usr/lib/go/bin/go"]
            .into_iter()
            .map(PathBuf::from)
            .find(|p| p.is_file())
    })
}

fn build_go(src: &Path, out: &Path) -> Prepared {
    let Some(go) = go_toolchain() else {
        return Prepared::Skip("no Go toolchain (scripts/test.sh installs golang-go)");
    };
    let mut build = Command::new(&go);
    build
        .args(["build", "-o"])
        .arg(out.join("hello-go"))
        .arg(".")
        .current_dir(src)
        // Never download another toolchain; no C compiler needed.
        .env("GOTOOLCHAIN", "local")
        .env("CGO_ENABLED", "0");
    if std::env::var_os("HOME").is_none() && std::env::var_os("GOCACHE").is_none() {
        build.env("GOCACHE", out.join("go-cache"));
    }
    let built = build.output().expect("run go build");
    assert!(
        built.status.success(),
        "{} build failed: {}",
        go.display(),
        String::from_utf8_lossy(&built.stderr)
    );
    Prepared::In(out.to_owned())
}

// ----- the run every example goes through ----------------------------------------------------------------

fn run(example: &Example) {
    let rein = Rein::start();
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples")
        .join(example.dir);
    let workdir = match (example.prepare)(&src, rein.dir.path()) {
        Prepared::In(dir) => dir,
        Prepared::Skip(why) => {
            eprintln!("skipped the {} example: {why}", example.dir);
            return;
        }
    };
    let (conf, processes) = configuration(&src, example.app, &workdir);
    rein.configure(conf);
    let addr = rein.bound("127.0.0.1:0");
    let first = get(addr, "/");
    assert_eq!(first.status, 200, "{}", first.text());
    let old = wait_ready(&rein, example.app, processes);

    // Answers are counted by the pid that wrote them (each example's `/` ends with `:PID`).
    let load = Load::start_keyed(addr, &["/", "/", "/", "/"], answering_pid);
    load.wait_more(100);
    let (code, body) = rein.api(
        "GET",
        &format!("/control/applications/{}/restart", example.app),
        None,
    );
    assert_eq!(code, 200, "the rolling reload: {body}");
    let new = wait_ready(&rein, example.app, processes);
    assert!(
        new.is_disjoint(&old),
        "every instance replaced: {old:?} -> {new:?}"
    );
    for pid in &new {
        load.wait_answers(&pid.to_string(), 20);
    }

    let victim = *new.first().expect("a ready instance");
    kill9(victim);
    wait_for("a replacement for the killed instance", || {
        let now = ready_pids(&rein, example.app);
        now.len() == processes && !now.contains(&victim)
    });
    for pid in ready_pids(&rein, example.app).difference(&new) {
        load.wait_answers(&pid.to_string(), 20);
    }
    let (ok, failures) = load.finish();
    assert_no_failures(&ok, &failures);
}

/// The example's `rein.json`, its listener moved to 127.0.0.1:0 and its app to `workdir`; and the instances
/// it asks for.
fn configuration(src: &Path, app: &str, workdir: &Path) -> (Value, usize) {
    let text = std::fs::read_to_string(src.join("rein.json")).expect("the example's rein.json");
    let mut conf: Value = serde_json::from_str(&text).expect("rein.json is JSON");
    let listener = conf["listeners"]
        .as_object()
        .and_then(|l| l.values().next())
        .cloned()
        .expect("rein.json has a listener");
    conf["listeners"] = serde_json::json!({ "127.0.0.1:0": listener });
    let app_conf = &mut conf["applications"][app];
    app_conf["working_directory"] = Value::from(workdir.display().to_string());
    let processes = app_conf["processes"].as_u64().unwrap_or(1) as usize;
    (conf, processes)
}

fn answering_pid(r: &Response) -> String {
    let text = r.text();
    text.trim()
        .rsplit(':')
        .next()
        .unwrap_or_default()
        .to_owned()
}

fn ready_pids(rein: &Rein, app: &str) -> BTreeSet<u64> {
    let (_, status) = rein.api("GET", &format!("/status/applications/{app}"), None);
    status["instances"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|i| i["state"] == "ready")
        .filter_map(|i| i["pid"].as_u64())
        .collect()
}

/// Waits until `app` runs exactly `n` instances, all ready; returns their pids.
fn wait_ready(rein: &Rein, app: &str, n: usize) -> BTreeSet<u64> {
    let mut pids = BTreeSet::new();
    wait_for(&format!("{n} ready instances of {app}"), || {
        let (_, status) = rein.api("GET", &format!("/status/applications/{app}"), None);
        let all = status["instances"].as_array().cloned().unwrap_or_default();
        pids = all.iter().filter_map(|i| i["pid"].as_u64()).collect();
        all.len() == n && all.iter().all(|i| i["state"] == "ready")
    });
    pids
}

fn kill9(pid: u64) {
    let pid = nix::unistd::Pid::from_raw(pid as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL).expect("kill -9");
}
