//! `rein __exec`: the hidden exec shim the supervisor runs between fork and an app.

use std::process::Command;

#[test]
fn sets_listen_pid_to_the_programs_pid_and_execs() {
    let out = Command::new(env!("CARGO_BIN_EXE_rein"))
        .args([
            "__exec",
            "--",
            "/bin/sh",
            "-c",
            "echo \"$LISTEN_PID $$ $0 $1\"",
            "zero",
            "--help",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    let words: Vec<&str> = text.split_whitespace().collect();
    assert_eq!(words.len(), 4, "{text}");
    assert_eq!(words[0], words[1], "LISTEN_PID is the program's own pid");
    assert_eq!(
        &words[2..],
        ["zero", "--help"],
        "arguments pass through untouched"
    );
}

#[test]
fn a_missing_program_exits_127_with_its_name() {
    let out = Command::new(env!("CARGO_BIN_EXE_rein"))
        .args(["__exec", "--", "/nonexistent/app"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(127));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("rein: cannot run /nonexistent/app:"), "{err}");
}

#[test]
fn is_not_listed_in_help() {
    let out = Command::new(env!("CARGO_BIN_EXE_rein"))
        .arg("--help")
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&out.stdout).contains("__exec"));
}
