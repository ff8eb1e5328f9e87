//! The application commands of the CLI end to end (`rein reload NAME`, `rein logs NAME`), and SIGHUP, which
//! reloads every application exactly once.

use std::process::Command;

use super::*;

fn generation(rein: &Rein, name: &str) -> u64 {
    status(rein, name)["generation"].as_u64().unwrap()
}

#[test]
fn rein_reload_and_rein_logs() {
    let rein = Rein::start();
    let addr = serve_one(&rein, "py", python_app("v1", &[], json!({})));
    wait_ready(&rein, "py", 1);
    let gen0 = generation(&rein, "py");

    let out = rein.cli(&["reload", "py"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert_eq!(generation(&rein, "py"), gen0 + 1, "answered once reloaded");
    assert_eq!(get(addr, "/").status, 200);

    let out = rein.cli(&["logs", "py"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        text.matches("start v1 pid=").count(),
        2,
        "both instances' output: {text}"
    );
    assert!(text.contains("stderr v1 pid="), "{text}");

    let out = rein.cli(&["reload", "nope"]);
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn rein_reload_exits_1_when_the_reload_is_abandoned() {
    let rein = Rein::start();
    let addr = serve_one(&rein, "py", python_app("v1", &[], json!({})));
    let old = wait_ready(&rein, "py", 1);
    // A release that fails at start: the reload the change starts is abandoned, and so is the one asked for.
    let broken = json!([app_file("python_app.py"), "v2", "--fail-at-start"]);
    let (code, body) = rein.api(
        "PUT",
        "/config/applications/py/arguments",
        Some(&broken.to_string()),
    );
    assert_eq!(code, 200, "{body}");
    wait_for("the reload abandoned", || {
        status(&rein, "py")["last_reload"]["ok"] == false
    });
    let out = rein.cli(&["reload", "py"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("Reload failed"), "{err}");
    assert_eq!(wait_ready(&rein, "py", 1), old, "the old instance serves");
    assert_eq!(who(&get(addr, "/")).0, "v1");
}

/// SIGHUP re-reads `--config` and reloads every application once: the one the re-read changed is reloaded by
/// the change alone, not a second time by the SIGHUP.
#[test]
fn sighup_reloads_each_application_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rein.json");
    let write = |tag: &str| {
        let doc = json!({
            "listeners": {"127.0.0.1:0": {"pass": "routes"}},
            "routes": [
                {"match": {"uri": "/b"}, "action": {"pass": "applications/b"}},
                {"action": {"pass": "applications/a"}}
            ],
            "applications": {"a": python_app(tag, &[], json!({})), "b": python_app("b", &[], json!({}))},
        });
        std::fs::write(&file, doc.to_string()).unwrap();
    };
    write("a1");
    let path = file.display().to_string();
    let rein = Rein::start_in(dir, &["--config", &path]);
    rein.wait_ready();
    wait_ready(&rein, "a", 1);
    wait_ready(&rein, "b", 1);
    let (a0, b0) = (generation(&rein, "a"), generation(&rein, "b"));

    write("a2");
    rein.signal(Signal::SIGHUP);
    for (name, gen0) in [("a", a0), ("b", b0)] {
        let mut st = Value::Null;
        // A second reload would be queued behind the first and start as it ends: wait until none runs.
        wait_for(&format!("{name} reloaded and settled"), || {
            st = status(&rein, name);
            st["last_reload"]["generation"].as_u64() >= Some(gen0 + 1) && st["state"] == "running"
        });
        assert_eq!(st["generation"].as_u64(), Some(gen0 + 1), "{name}: {st}");
        assert_eq!(st["last_reload"]["ok"], true, "{name}: {st}");
    }
    let addr = rein.bound("127.0.0.1:0");
    assert_eq!(who(&get(addr, "/")).0, "a2");
}

/// SIGHUP with a `--config` that is refused (not JSON, or invalid) changes nothing: no application is reloaded
/// either. A second SIGHUP with the file fixed then reloads the application once, so the generation counts the
/// reloads the first SIGHUP did not start.
#[test]
fn sighup_with_a_refused_config_file_reloads_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rein.json");
    let good = json!({
        "listeners": {"127.0.0.1:0": {"pass": "applications/a"}},
        "applications": {"a": python_app("a1", &[], json!({}))},
    });
    std::fs::write(&file, good.to_string()).unwrap();
    let path = file.display().to_string();
    let rein = Rein::start_in(dir, &["--config", &path]);
    rein.wait_ready();
    let pids = wait_ready(&rein, "a", 1);
    let gen0 = generation(&rein, "a");

    for (n, bad) in [
        "{\"listeners\": ",
        r#"{"routes": [{"action": {"return": "x"}}]}"#,
    ]
    .into_iter()
    .enumerate()
    {
        std::fs::write(&file, bad).unwrap();
        rein.signal(Signal::SIGHUP);
        wait_for("the refusal logged", || {
            rein.log_text().matches("no application reloaded").count() > n
        });
    }
    std::fs::write(&file, good.to_string()).unwrap();
    rein.signal(Signal::SIGHUP);
    let mut st = Value::Null;
    wait_for("the one reload settled", || {
        st = status(&rein, "a");
        st["last_reload"]["generation"].as_u64() >= Some(gen0 + 1) && st["state"] == "running"
    });
    assert_eq!(st["generation"].as_u64(), Some(gen0 + 1), "{st}");
    assert_ne!(
        wait_ready(&rein, "a", 1),
        pids,
        "replaced by the one reload"
    );
}

/// Root's default state directory is the system's `/var/lib/rein`, as Unit keeps its state in its own system
/// directory, not under `/root`; other users keep `~/.local/state/rein`.
#[test]
fn the_default_state_directory_is_var_lib_rein_for_root() {
    let home = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_rein"))
        .arg("status")
        .env_remove("REIN_CONTROL")
        .env_remove("REIN_STATE")
        .env_remove("XDG_STATE_HOME")
        .env("HOME", home.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let expected = if nix::unistd::Uid::effective().is_root() {
        "unix:/var/lib/rein/control.sock".to_owned()
    } else {
        format!(
            "unix:{}/.local/state/rein/control.sock",
            home.path().display()
        )
    };
    assert!(err.contains(&expected), "{expected} in {err}");
}
