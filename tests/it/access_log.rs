//! The access log as Unit writes it: heads cut short, timed out, malformed or too large get a line with what is
//! known of them (Unit's test_access_log.py: `"-" 400 0 "-" "-"` for a partial head), and Unit 1.34's JSON
//! object `format`.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::path::Path;

use serde_json::{Value, json};

use crate::harness::{Conn, Rein, wait_for};

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// The part of a Combined Log Format line after the time: `"-" 400 0 "-" "-"`.
fn after_time(line: &str) -> &str {
    line.split_once("] ").map_or(line, |(_, rest)| rest)
}

/// Sends `bytes` (the write may fail once rein has answered and closed), then reads until rein closes.
fn send_and_drain(addr: SocketAddr, bytes: &[u8], half_close: bool) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    let _ = s.write_all(bytes);
    if half_close {
        let _ = s.shutdown(Shutdown::Write);
    }
    let mut got = Vec::new();
    let _ = s.read_to_end(&mut got);
    String::from_utf8_lossy(&got).into_owned()
}

/// Waits for line number `n` (from 1) and returns it.
fn nth_line(log: &Path, n: usize) -> String {
    wait_for(&format!("access log line {n}"), || lines(log).len() >= n);
    lines(log)[n - 1].clone()
}

#[test]
fn unfinished_and_malformed_heads_are_logged() {
    let rein = Rein::start();
    let log = rein.dir.path().join("access.log");
    let addr = rein.serve_with(
        json!([{"action": {"return": 200}}]),
        json!({
            "access_log": log.display().to_string(),
            "settings": {"http": {"header_read_timeout": 0.5, "idle_timeout": 0.5}}
        }),
    );
    let mut n = 0;
    let mut next = || {
        n += 1;
        nth_line(&log, n)
    };

    // A head the client cuts short: a 400 nobody receives, 0 bytes (Unit's test_access_log_partial).
    send_and_drain(addr, b"GE", true);
    let line = next();
    assert!(line.starts_with("127.0.0.1 - - ["), "{line}");
    assert_eq!(after_time(&line), r#""-" 400 0 "-" "-""#);
    send_and_drain(addr, b"GET / HTTP/1.1\r\n", true);
    assert_eq!(after_time(&next()), r#""-" 400 0 "-" "-""#);

    // A malformed header line, and a malformed method: 400.
    let answer = send_and_drain(
        addr,
        b"GET / HTTP/1.1\r\nHost: a\r\nno colon\r\n\r\n",
        false,
    );
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    let body = answer.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    assert!(body.contains("Error 400"), "{answer}");
    assert_eq!(
        after_time(&next()),
        format!(r#""-" 400 {} "-" "-""#, body.len())
    );
    send_and_drain(addr, b"G\x01T / HTTP/1.1\r\nHost: a\r\n\r\n", false);
    let line = next();
    assert!(after_time(&line).starts_with(r#""-" 400 "#), "{line}");

    // A head larger than the parser holds: 431.
    let big = format!(
        "GET / HTTP/1.1\r\nHost: a\r\nX-Big: {}\r\n\r\n",
        "x".repeat(64 * 1024)
    );
    let answer = send_and_drain(addr, big.as_bytes(), false);
    assert!(answer.starts_with("HTTP/1.1 431"), "{answer}");
    let line = next();
    assert!(after_time(&line).starts_with(r#""-" 431 "#), "{line}");

    // A head not whole by header_read_timeout: the 408 rein sends, with its page.
    let answer = send_and_drain(addr, b"GET / HTTP/1.1\r\nHost: a\r\n", false);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    let body = answer.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    assert_eq!(
        after_time(&next()),
        format!(r#""-" 408 {} "-" "-""#, body.len())
    );

    // A connection that never sent a byte is closed at idle_timeout without a line (no request began), and a
    // whole request is logged as ever.
    send_and_drain(addr, b"", false);
    let r = Conn::open(addr).get("/end", &[]);
    assert_eq!(r.status, 200);
    assert_eq!(after_time(&next()), r#""GET /end HTTP/1.1" 200 0 "-" "-""#);
    assert_eq!(lines(&log).len(), n, "{:?}", lines(&log));
}

#[test]
fn json_format_writes_one_object_per_line() {
    let rein = Rein::start();
    let log = rein.dir.path().join("access.json");
    let addr = rein.serve_with(
        json!([{"action": {"return": 204}}]),
        json!({"access_log": {
            "path": log.display().to_string(),
            "format": {
                "remote_addr": "$remote_addr",
                "request_line": "$request_line",
                "status": "$status",
                "agent": "$header_user_agent",
                "note": "uri=$uri \"quoted\"",
                "fixed": "text"
            },
            "if": "!$arg_quiet"
        }}),
    );
    let mut c = Conn::open(addr);
    assert_eq!(
        c.get("/a?x=1", &[("User-Agent", "a \"quoted\" \\ agent")])
            .status,
        204
    );
    assert_eq!(c.get("/hidden?quiet=1", &[]).status, 204);
    assert_eq!(c.get("/b%0Aline", &[]).status, 204);
    wait_for("two JSON lines", || lines(&log).len() >= 2);
    let got: Vec<Value> = lines(&log)
        .iter()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    assert_eq!(
        got,
        [
            json!({"remote_addr": "127.0.0.1", "request_line": "GET /a?x=1 HTTP/1.1", "status": "204",
                   "agent": "a \"quoted\" \\ agent", "note": "uri=/a \"quoted\"", "fixed": "text"}),
            json!({"remote_addr": "127.0.0.1", "request_line": "GET /b%0Aline HTTP/1.1", "status": "204",
                   "agent": "-", "note": "uri=/b\nline \"quoted\"", "fixed": "text"}),
        ]
    );
    // The members keep the configuration's order.
    assert!(
        lines(&log)[0].starts_with(r#"{"remote_addr":"127.0.0.1","request_line":"#),
        "{}",
        lines(&log)[0]
    );
}

#[test]
fn json_format_members_must_be_strings() {
    let rein = Rein::start();
    let log = rein.dir.path().join("access.json");
    for (format, at) in [
        (json!({"status": 200}), "access_log/format/status"),
        (json!({"bad": "$nope"}), "access_log/format/bad"),
        (json!(["$status"]), "access_log/format"),
    ] {
        let (status, body) = rein.api(
            "PUT",
            "/config/access_log",
            Some(&json!({"path": log.display().to_string(), "format": format}).to_string()),
        );
        assert_eq!(status, 400, "{format}: {body}");
        assert!(body.to_string().contains(at), "{format}: {body}");
    }
}
