//! Large bodies streamed both ways in bounded memory, and WebSocket tunnelling.

use super::*;

/// Bound on rein's resident memory while 1 GiB goes down and 1 GiB goes up. A proxy that streams holds a few
/// buffers per connection (hyper reads at most ~400 kB ahead, and socket buffers are kernel memory, not RSS),
/// so rein stays near its idle size (~10-20 MB in a debug build). One that buffered either body would need at
/// least 1 GiB more. 100 MB in all, and at most 60 MB above the idle size, tells the two apart.
const RSS_LIMIT_KB: u64 = 100 * 1024;
const RSS_GROWTH_KB: u64 = 60 * 1024;
/// The size the issue names for each direction.
const GIB: u64 = 1 << 30;

#[test]
fn large_bodies_stream_both_ways_in_bounded_memory() {
    let rein = Rein::start();
    let a = Backend::python("A", "0", &[]);
    let addr = rein.serve_with(
        json!([{"action": {"proxy": format!("http://{}", a.addr())}}]),
        json!({"settings": {"http": {"max_body_size": GIB}}}),
    );
    let idle = rss_kb(rein.pid());

    // 1 GiB down, read as it comes.
    let sampler = RssSampler::start(rein.pid());
    let mut conn = open(addr);
    conn.get_mut()
        .write_all(b"GET /big?mb=1024 HTTP/1.1\r\nHost: test\r\n\r\n")
        .unwrap();
    let mut line = String::new();
    conn.read_line(&mut line).unwrap();
    assert!(line.starts_with("HTTP/1.1 200"), "{line}");
    let mut length = None;
    loop {
        line.clear();
        conn.read_line(&mut line).unwrap();
        if line.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':')
            && k.eq_ignore_ascii_case("content-length")
        {
            length = v.trim().parse::<u64>().ok();
        }
    }
    assert_eq!(length, Some(GIB));
    let mut buf = vec![0u8; 1 << 20];
    let mut got = 0u64;
    while got < GIB {
        let n = conn.read(&mut buf).unwrap();
        assert!(n > 0, "download cut after {got} bytes");
        got += n as u64;
    }
    assert_eq!(got, GIB);
    let peak_down = sampler.peak();

    // 1 GiB up, counted by the backend.
    let sampler = RssSampler::start(rein.pid());
    let total = GIB;
    conn.get_mut()
        .write_all(
            format!("POST /count-upload HTTP/1.1\r\nHost: test\r\nContent-Length: {total}\r\n\r\n")
                .as_bytes(),
        )
        .unwrap();
    let chunk = vec![b'u'; 1 << 20];
    for _ in 0..GIB >> 20 {
        conn.get_mut().write_all(&chunk).unwrap();
    }
    let r = read_response(&mut conn, false).expect("an answer to the upload");
    let peak_up = sampler.peak();
    assert_eq!((r.status, r.text()), (200, total.to_string()));

    eprintln!("rein RSS: idle {idle} kB, peak {peak_down} kB down, {peak_up} kB up");
    for (what, peak) in [("download", peak_down), ("upload", peak_up)] {
        assert!(
            peak < RSS_LIMIT_KB && peak < idle + RSS_GROWTH_KB,
            "{what}: rein's RSS peaked at {peak} kB (idle {idle} kB)"
        );
    }
}

#[test]
fn websocket_is_tunnelled() {
    let rein = Rein::start();
    let ws = Backend::websocket();
    let addr = rein.serve(json!([{"action": {"proxy": format!("http://{}", ws.addr())}}]));
    let mut c = Conn::open(addr);
    // RFC 6455's example key, whose accept value is known.
    c.send_raw(
        b"GET /chat HTTP/1.1\r\nHost: test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
          Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
    );
    let r = c.read_head_only().expect("an answer to the handshake");
    assert_eq!(r.status, 101, "{r:?}");
    assert_eq!(
        r.header("sec-websocket-accept"),
        Some("s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
    );
    assert!(
        r.header("upgrade")
            .is_some_and(|u| u.eq_ignore_ascii_case("websocket"))
    );
    assert!(
        r.header("connection")
            .is_some_and(|u| u.eq_ignore_ascii_case("upgrade"))
    );

    c.send_raw(&ws_frame(0x1, b"hello through rein"));
    assert_eq!(
        read_ws_frame(&mut c),
        (0x81, b"hello through rein".to_vec())
    );
    let long = "é".repeat(200);
    c.send_raw(&ws_frame(0x1, long.as_bytes()));
    assert_eq!(read_ws_frame(&mut c), (0x81, long.as_bytes().to_vec()));
    c.send_raw(&ws_frame(0x9, b"ping"));
    assert_eq!(read_ws_frame(&mut c), (0x8a, b"ping".to_vec()));
    c.send_raw(&ws_frame(0x8, &1000u16.to_be_bytes()));
    assert_eq!(
        read_ws_frame(&mut c),
        (0x88, 1000u16.to_be_bytes().to_vec())
    );
    assert!(
        c.is_closed(),
        "the tunnel stays open after the server closed"
    );
}

/// A masked WebSocket frame, as a client sends it.
fn ws_frame(opcode: u8, payload: &[u8]) -> Vec<u8> {
    let mask = [0x37u8, 0xfa, 0x21, 0x3d];
    let mut f = vec![0x80 | opcode];
    if payload.len() < 126 {
        f.push(0x80 | payload.len() as u8);
    } else {
        f.push(0x80 | 126);
        f.extend_from_slice(&(payload.len() as u16).to_be_bytes());
    }
    f.extend_from_slice(&mask);
    f.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
    f
}

/// The next frame from the server: its first byte and its payload.
fn read_ws_frame(c: &mut Conn) -> (u8, Vec<u8>) {
    let r = c.reader();
    let mut head = [0u8; 2];
    r.read_exact(&mut head).unwrap();
    assert_eq!(head[1] & 0x80, 0, "server frames are not masked");
    let n = match head[1] & 0x7f {
        126 => {
            let mut l = [0u8; 2];
            r.read_exact(&mut l).unwrap();
            u16::from_be_bytes(l) as usize
        }
        n => n as usize,
    };
    let mut payload = vec![0u8; n];
    r.read_exact(&mut payload).unwrap();
    (head[0], payload)
}

const HANDSHAKE: &[u8] =
    b"GET /chat HTTP/1.1\r\nHost: test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
    Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";

/// A client may send its first frame right behind the handshake, before the `101`: the bytes rein read with
/// the request go through the tunnel ahead of the rest.
#[test]
fn a_frame_sent_with_the_handshake_goes_through() {
    let rein = Rein::start();
    let ws = Backend::websocket();
    let addr = rein.serve(json!([{"action": {"proxy": format!("http://{}", ws.addr())}}]));
    let mut c = Conn::open(addr);
    let mut both = HANDSHAKE.to_vec();
    both.extend(ws_frame(0x1, b"early"));
    c.send_raw(&both);
    let r = c.read_head_only().expect("an answer to the handshake");
    assert_eq!(r.status, 101, "{r:?}");
    assert_eq!(read_ws_frame(&mut c), (0x81, b"early".to_vec()));
}
