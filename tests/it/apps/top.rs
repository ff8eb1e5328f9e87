//! `rein top` in a real terminal: tmux runs it against a server with a live application, the test reads its
//! screen (`capture-pane`) and presses its keys (`send-keys`).

use std::process::Command;

use super::*;

/// A tmux server of the test's own (its own socket name), killed when the test ends, whatever happens.
struct Tmux {
    socket: String,
}

impl Tmux {
    /// Starts `command` in a detached 200 × 50 terminal.
    fn run(command: &[&str]) -> Tmux {
        let tmux = Tmux {
            socket: format!("rein-top-{}", std::process::id()),
        };
        let mut args = vec![
            "new-session",
            "-d",
            "-s",
            "top",
            "-x",
            "200",
            "-y",
            "50",
            "--",
        ];
        args.extend_from_slice(command);
        assert!(tmux.cmd(&args).status.success(), "tmux new-session");
        tmux
    }

    fn cmd(&self, args: &[&str]) -> std::process::Output {
        Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .args(args)
            .env("TERM", "xterm-256color")
            .output()
            .expect("tmux is needed by the `rein top` test")
    }

    fn screen(&self) -> String {
        String::from_utf8_lossy(&self.cmd(&["capture-pane", "-p", "-t", "top"]).stdout).into_owned()
    }

    fn keys(&self, keys: &str) {
        assert!(self.cmd(&["send-keys", "-t", "top", keys]).status.success());
    }

    /// Waits until the screen shows every one of `texts`; returns that screen.
    fn wait_for_screen(&self, texts: &[&str]) -> String {
        let deadline = Instant::now() + crate::harness::DEADLINE;
        loop {
            let screen = self.screen();
            if texts.iter().all(|t| screen.contains(t)) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for `rein top` to show {texts:?}; it shows:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn is_running(&self) -> bool {
        self.cmd(&["has-session", "-t", "top"]).status.success()
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd(&["kill-server"]);
    }
}

#[test]
fn rein_top_shows_instances_and_reloads_and_follows_an_app() {
    let rein = Rein::start();
    let addr = serve_one(&rein, "py", python_app("v1", &[], json!({"processes": 2})));
    let pids = wait_ready(&rein, "py", 2);
    for _ in 0..20 {
        assert_eq!(get(addr, "/").status, 200);
    }
    let state = rein.state.display().to_string();
    let tmux = Tmux::run(&[
        env!("CARGO_BIN_EXE_rein"),
        "top",
        "--state",
        &state,
        "--interval",
        "0.2",
    ]);

    // Both instances by pid, ready, and the requests they served between them.
    let mut texts: Vec<String> = pids.iter().map(|p| p.to_string()).collect();
    texts.extend(["py".into(), "ready".into(), "20 requests".into()]);
    let wanted: Vec<&str> = texts.iter().map(String::as_str).collect();
    tmux.wait_for_screen(&wanted);

    // `r` reloads the selected (only) application: new pids on the screen, the outcome in its last line.
    let generation = status(&rein, "py")["generation"].as_u64().unwrap();
    tmux.keys("r");
    let screen = tmux.wait_for_screen(&["py reloaded"]);
    assert_eq!(
        status(&rein, "py")["generation"].as_u64(),
        Some(generation + 1),
        "{screen}"
    );
    let new_pids = wait_ready(&rein, "py", 2);
    let texts: Vec<String> = new_pids.iter().map(|p| p.to_string()).collect();
    let wanted: Vec<&str> = texts.iter().map(String::as_str).collect();
    tmux.wait_for_screen(&wanted);

    // `l` shows the application's own output.
    tmux.keys("l");
    tmux.wait_for_screen(&["log: py", "start v1 pid="]);

    tmux.keys("q");
    wait_for("`rein top` to quit on q", || !tmux.is_running());
}

#[test]
fn rein_top_without_a_server_says_so_and_exits_3() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_rein"))
        .args(["top", "--state"])
        .arg(dir.path())
        .env_remove("REIN_CONTROL")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot reach the control API"), "{err}");
}
