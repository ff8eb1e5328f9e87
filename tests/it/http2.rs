//! HTTP/2 (h2c with prior knowledge, the same code as over TLS after ALPN): every action answers as over
//! HTTP/1.1, and the known floods cut off the client that sends them while others are served.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};

use serde_json::json;

use crate::harness::{DEADLINE, Rein, file, get, wait_for};

const BACKENDS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/backends");

/// A backend from tests/backends on a port of its choosing; killed when dropped.
pub(crate) struct Backend(Child, pub(crate) u16);

impl Backend {
    /// `http_backend.py`.
    pub(crate) fn start() -> Backend {
        Backend::script("http_backend.py", &["b", "0"])
    }

    /// A script that prints its port on its first line.
    pub(crate) fn script(name: &str, args: &[&str]) -> Backend {
        let mut child = Command::new("python3")
            .arg(format!("{BACKENDS}/{name}"))
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("http_backend.py");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line.trim().parse().expect("the backend's port");
        Backend(child, port)
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// An h2c listener in front of a share, a proxy, and a `return`, with an access log.
fn h2c(rein: &Rein, backend: &Backend) -> SocketAddr {
    let www = rein.dir.path().join("www");
    file(&www, "ten.txt", b"0123456789");
    rein.configure(json!({
        "listeners": {"127.0.0.1:0": {"pass": "routes", "h2c": true}},
        "routes": [
            {"match": {"uri": "/echo"}, "action": {"proxy": format!("http://127.0.0.1:{}", backend.1)}},
            {"match": {"uri": "/gone"}, "action": {"return": 410}},
            {"action": {"share": format!("{}$uri", www.display())}},
        ],
        "access_log": {"path": rein.dir.path().join("access.log"), "format": "$request_line $status $scheme"},
    }));
    rein.bound("127.0.0.1:0")
}

/// curl over HTTP/2 with prior knowledge: the status line's version and code, then the body.
fn curl(addr: SocketAddr, path: &str, args: &[&str]) -> (String, Vec<u8>) {
    let out = Command::new("curl")
        .args(["-sS", "--http2-prior-knowledge", "--max-time"])
        .arg(DEADLINE.as_secs().to_string())
        .args(["-w", "\n%{http_version} %{http_code}"])
        .args(args)
        .arg(format!("http://127.0.0.1:{}{path}", addr.port()))
        .output()
        .expect("curl");
    let mut body = out.stdout;
    let split = body.iter().rposition(|b| *b == b'\n').unwrap_or(0);
    let tail = String::from_utf8_lossy(&body[split + 1..]).into_owned();
    body.truncate(split);
    (tail, body)
}

#[test]
fn every_action_answers_over_http2_as_over_http1() {
    let rein = Rein::start();
    let backend = Backend::start();
    let addr = h2c(&rein, &backend);
    assert_eq!(
        curl(addr, "/ten.txt", &[]),
        ("2 200".into(), b"0123456789".to_vec())
    );
    assert_eq!(
        curl(addr, "/ten.txt", &["-r", "2-5"]),
        ("2 206".into(), b"2345".to_vec())
    );
    let (tail, _) = curl(addr, "/ten.txt", &["-H", "If-None-Match: *"]);
    assert_eq!(tail, "2 304");
    assert_eq!(curl(addr, "/gone", &[]).0, "2 410");
    // A body streamed up through the proxy and back, larger than the flow-control windows.
    let upload = rein.dir.path().join("upload.bin");
    let data: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(&upload, &data).unwrap();
    let (tail, echoed) = curl(
        addr,
        "/echo",
        &["--data-binary", &format!("@{}", upload.display())],
    );
    assert_eq!(tail, "2 200");
    assert!(
        echoed == data,
        "the echoed body differs ({} bytes)",
        echoed.len()
    );
    // A request's line is written once its answer has left, which may be just after curl has it all.
    let log = rein.dir.path().join("access.log");
    wait_for("the access log lines", || {
        let log = std::fs::read_to_string(&log).unwrap_or_default();
        log.contains("GET /ten.txt HTTP/2.0 206 http")
            && log.contains("POST /echo HTTP/2.0 200 http")
    });
    // HTTP/1.1 still works on the same listener.
    assert_eq!(get(addr, "/ten.txt").status, 200);
}

/// A proxied answer reaches an HTTP/2 client with the upstream's fields (which rein's HTTP/1 connection
/// writes from the upstream's bytes), hop-by-hop ones dropped and `response_headers` applied.
#[test]
fn a_proxied_answer_keeps_its_fields_over_http2() {
    let rein = Rein::start();
    let backend = Backend::start();
    rein.configure(json!({
        "listeners": {"127.0.0.1:0": {"pass": "routes", "h2c": true}},
        "routes": [{"action": {"proxy": format!("http://127.0.0.1:{}", backend.1),
            "response_headers": {"X-Added": "yes", "X-Backend": null}}}],
    }));
    let addr = rein.bound("127.0.0.1:0");
    for http2 in [true, false] {
        let version = if http2 {
            "--http2-prior-knowledge"
        } else {
            "--http1.1"
        };
        let out = Command::new("curl")
            .args(["-sS", "-D", "-", "-o", "/dev/null", version, "--max-time"])
            .arg(DEADLINE.as_secs().to_string())
            .arg(format!("http://127.0.0.1:{}/status?code=200", addr.port()))
            .output()
            .expect("curl");
        let head = String::from_utf8_lossy(&out.stdout).to_ascii_lowercase();
        assert!(
            head.starts_with(if http2 { "http/2 200" } else { "http/1.1 200" }),
            "{head}"
        );
        for field in [
            "content-type: ",
            "x-custom: yes",
            "x-added: yes",
            "server: rein",
            "date: ",
        ] {
            assert!(head.contains(field), "{field} in {head}");
        }
        for field in ["x-backend", "x-resp-secret", "basehttp"] {
            assert!(!head.contains(field), "{field} in {head}");
        }
    }
}

/// The client connection preface and an empty SETTINGS frame.
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00";

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut f = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// A GET / in HPACK: `:method GET`, `:scheme http`, `:path /` from the static table, `:authority` literal.
fn get_block() -> Vec<u8> {
    let mut block = vec![0x82, 0x86, 0x84, 0x01, 9];
    block.extend_from_slice(b"localhost");
    block
}

/// Reads frames until a GOAWAY (its error code) or the end of the connection (`None`).
fn goaway(stream: &mut TcpStream) -> Option<u32> {
    let mut head = [0u8; 9];
    loop {
        stream.read_exact(&mut head).ok()?;
        let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
        let mut payload = vec![0; len];
        stream.read_exact(&mut payload).ok()?;
        if head[3] == 7 && len >= 8 {
            return Some(u32::from_be_bytes([
                payload[4], payload[5], payload[6], payload[7],
            ]));
        }
    }
}

#[test]
fn a_rapid_reset_flood_is_cut_off_and_other_clients_are_served() {
    let rein = Rein::start();
    let backend = Backend::start();
    let addr = h2c(&rein, &backend);
    let mut flood = Vec::from(PREFACE);
    for i in 0..2_000u32 {
        let id = 2 * i + 1;
        flood.extend(frame(1, 0x5, id, &get_block()));
        flood.extend(frame(3, 0, id, &8u32.to_be_bytes()));
    }
    let mut attacker = TcpStream::connect(addr).unwrap();
    attacker.set_read_timeout(Some(DEADLINE)).unwrap();
    // The server may close before it has read everything: a failed write is part of being cut off.
    let _ = attacker.write_all(&flood);
    let code = goaway(&mut attacker);
    // ENHANCE_YOUR_CALM (0xb), or the connection closed outright.
    assert!(matches!(code, Some(0xb) | None), "GOAWAY {code:?}");
    assert_eq!(curl(addr, "/ten.txt", &[]).0, "2 200");
    assert_eq!(get(addr, "/ten.txt").status, 200);
}

#[test]
fn a_continuation_flood_is_cut_off_and_other_clients_are_served() {
    let rein = Rein::start();
    let backend = Backend::start();
    let addr = h2c(&rein, &backend);
    let mut attacker = TcpStream::connect(addr).unwrap();
    attacker.set_read_timeout(Some(DEADLINE)).unwrap();
    attacker.set_write_timeout(Some(DEADLINE)).unwrap();
    attacker.write_all(PREFACE).unwrap();
    attacker.write_all(&frame(1, 0x1, 1, &get_block())).unwrap();
    // Endless CONTINUATION frames, each a new literal header field, never END_HEADERS.
    let mut field = vec![0x00, 5];
    field.extend_from_slice(b"x-pad");
    field.push(0x7f);
    field.push(0x81);
    field.push(0x07); // 127 + 1 + 7 * 128 = 1024 bytes of value
    field.extend(std::iter::repeat_n(b'a', 1024));
    let continuation = frame(9, 0, 1, &field);
    let mut writer = attacker.try_clone().unwrap();
    // Written from a thread of its own: a server that stops reading must not stall the test's reads.
    let flood = std::thread::spawn(move || {
        for _ in 0..10_000 {
            if writer.write_all(&continuation).is_err() {
                break;
            }
        }
    });
    // h2 allows a few CONTINUATION frames beyond what max_header_list_size needs, then ENHANCE_YOUR_CALM.
    assert_eq!(goaway(&mut attacker), Some(0xb));
    drop(attacker);
    flood.join().unwrap();
    assert_eq!(curl(addr, "/ten.txt", &[]).0, "2 200");
}

/// Sends `flood` after a request whose body stays open, from a thread of its own (a server that stops reading
/// must not stall the test), and says whether rein closed the connection.
fn flooded_and_closed(addr: SocketAddr, flood: Vec<u8>) -> bool {
    let mut attacker = TcpStream::connect(addr).unwrap();
    attacker.set_read_timeout(Some(DEADLINE)).unwrap();
    attacker.set_write_timeout(Some(DEADLINE)).unwrap();
    attacker.write_all(PREFACE).unwrap();
    attacker
        .write_all(&frame(1, 0x4, 1, &post_block()))
        .unwrap();
    let mut writer = attacker.try_clone().unwrap();
    let sender = std::thread::spawn(move || {
        let _ = writer.write_all(&flood);
    });
    // Closed: the reads end (after whatever frames rein sent first) rather than time out.
    let mut buf = [0u8; 4096];
    let closed = loop {
        match attacker.read(&mut buf) {
            Ok(0) => break true,
            Ok(_) => continue,
            Err(e) => {
                break !matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                );
            }
        }
    };
    drop(attacker);
    sender.join().unwrap();
    closed
}

/// A POST /echo in HPACK, its body to follow.
fn post_block() -> Vec<u8> {
    let mut block = vec![0x83, 0x86, 0x04, 5];
    block.extend_from_slice(b"/echo");
    block.extend_from_slice(&[0x01, 9]);
    block.extend_from_slice(b"localhost");
    block
}

#[test]
fn floods_of_empty_frames_pings_and_tiny_data_are_cut_off() {
    let rein = Rein::start();
    let backend = Backend::start();
    let addr = h2c(&rein, &backend);
    let floods = [
        ("empty DATA", frame(0, 0, 1, b"")),
        ("PING", frame(6, 0, 0, b"12345678")),
        ("one-byte DATA", frame(0, 0, 1, b"x")),
    ];
    for (what, one) in floods {
        let flood: Vec<u8> = std::iter::repeat_n(one, 50_000).flatten().collect();
        assert!(flooded_and_closed(addr, flood), "{what} flood not cut off");
        assert_eq!(
            curl(addr, "/ten.txt", &[]).0,
            "2 200",
            "after the {what} flood"
        );
    }
    let log = rein.log_text();
    for reason in [
        "empty HTTP/2 frames",
        "control frames",
        "DATA in frames of under",
    ] {
        assert!(log.contains(reason), "no {reason:?} in the log:\n{log}");
    }
}

/// curl uploading `size` bytes to `path` over HTTP/1.1 at `rate` bytes per second: the status it ends with.
fn slow_upload_http1(addr: SocketAddr, path: &str, rate: u32, size: usize) -> String {
    let dir = tempfile::tempdir().unwrap();
    let body = dir.path().join("body");
    std::fs::write(&body, vec![b'x'; size]).unwrap();
    let out = Command::new("curl")
        .args(["-sS", "-o", "/dev/null", "-w", "%{http_code}", "--http1.1"])
        .args([
            "--max-time",
            &DEADLINE.as_secs().to_string(),
            "--limit-rate",
        ])
        .arg(rate.to_string())
        .arg("--data-binary")
        .arg(format!("@{}", body.display()))
        .arg(format!("http://127.0.0.1:{}{path}", addr.port()))
        .output()
        .expect("curl");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Node's HTTP/2 client POSTing `piece` bytes every `tick_ms` up to `total` (`stall`: one piece, then
/// nothing): the status it got.
fn slow_upload_http2(
    addr: SocketAddr,
    path: &str,
    piece: u32,
    tick_ms: u32,
    total: u32,
    stall: bool,
) -> String {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/clients/h2_upload.js");
    let out = Command::new("node")
        .arg(script)
        .arg(format!("http://127.0.0.1:{}{path}", addr.port()))
        .args([piece.to_string(), tick_ms.to_string(), total.to_string()])
        .args(stall.then_some("stall"))
        .output()
        .expect("node");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

fn slow_body_settings(
    rein: &Rein,
    backend: &Backend,
    read_timeout: u64,
    min_rate: u64,
) -> SocketAddr {
    rein.configure(json!({
        "listeners": {"127.0.0.1:0": {"pass": "routes", "h2c": true}},
        "routes": [{"action": {"proxy": format!("http://127.0.0.1:{}", backend.1)}}],
        "settings": {"http": {"body_read_timeout": read_timeout, "body_min_rate": min_rate}},
    }));
    rein.bound("127.0.0.1:0")
}

#[test]
fn a_body_trickled_below_the_minimum_rate_is_cut_off_on_both_protocols() {
    let rein = Rein::start();
    let backend = Backend::start();
    // Each gap between reads stays well under body_read_timeout; only the rate gives the client away.
    let addr = slow_body_settings(&rein, &backend, 3, 1000);
    assert_eq!(slow_upload_http1(addr, "/count-upload", 200, 20_000), "408");
    assert_eq!(
        slow_upload_http2(addr, "/count-upload", 50, 250, 20_000, false),
        "408"
    );
    // A body sent at a decent rate goes through.
    assert_eq!(
        slow_upload_http1(addr, "/count-upload", 1_000_000, 200_000),
        "200"
    );
    assert_eq!(
        slow_upload_http2(addr, "/count-upload", 20_000, 10, 200_000, false),
        "200"
    );
}

#[test]
fn an_http2_body_that_stalls_gets_408() {
    let rein = Rein::start();
    let backend = Backend::start();
    let addr = slow_body_settings(&rein, &backend, 1, 0);
    assert_eq!(
        slow_upload_http2(addr, "/count-upload", 10, 10, 1_000, true),
        "408"
    );
}
