//! Per-server `max_connections` on an HTTP upstream, and an upstream whose server is a `unix:` key, pooling
//! its connections.

use super::*;

/// A keep-alive HTTP server in a thread per connection that answers every request after `hold`, with how
/// many requests it was serving at once at most so far.
struct Counting {
    addr: SocketAddr,
    most: Arc<AtomicU64>,
}

impl Counting {
    fn start(hold: Duration) -> Counting {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let most = Arc::new(AtomicU64::new(0));
        let now = Arc::new(AtomicU64::new(0));
        let seen = most.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (now, most) = (now.clone(), seen.clone());
                std::thread::spawn(move || serve(stream, hold, &now, &most));
            }
        });
        Counting { addr, most }
    }

    fn most(&self) -> u64 {
        self.most.load(Ordering::SeqCst)
    }
}

/// Bodiless requests on one connection, each answered after `hold` with the most seen at once.
fn serve(stream: std::net::TcpStream, hold: Duration, now: &AtomicU64, most: &AtomicU64) {
    let mut writer = stream.try_clone().unwrap();
    let mut reader = BufReader::new(stream);
    loop {
        let mut line = String::new();
        loop {
            line.clear();
            match reader.read_line(&mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) if line == "\r\n" => break,
                Ok(_) => {}
            }
        }
        let at_once = now.fetch_add(1, Ordering::SeqCst) + 1;
        most.fetch_max(at_once, Ordering::SeqCst);
        std::thread::sleep(hold);
        now.fetch_sub(1, Ordering::SeqCst);
        let body = most.load(Ordering::SeqCst).to_string();
        let answer = format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        if writer.write_all(answer.as_bytes()).is_err() {
            return;
        }
    }
}

/// `n` requests at once through `addr`, each on its own connection: their statuses.
fn at_once(addr: SocketAddr, path: &str, n: usize) -> Vec<u16> {
    let threads: Vec<_> = (0..n)
        .map(|_| {
            let path = path.to_owned();
            std::thread::spawn(move || Conn::open(addr).get(&path, &[]).status)
        })
        .collect();
    threads.into_iter().map(|t| t.join().unwrap()).collect()
}

#[test]
fn max_connections_holds_an_http_server_to_that_many_requests_at_once() {
    let rein = Rein::start();
    let limited = Counting::start(Duration::from_millis(150));
    let free = Counting::start(Duration::from_millis(150));
    let addr = rein.serve_with(
        json!([
            {"match": {"uri": "/free"}, "action": {"pass": "upstreams/free"}},
            {"action": {"pass": "upstreams/u"}}
        ]),
        json!({"upstreams": {
            "u": {"servers": {limited.addr.to_string(): {"max_connections": 1}}, "queue_timeout": 20},
            "free": {"servers": {free.addr.to_string(): {}}},
        }}),
    );
    // Without a limit, the same requests overlap: the backend counts right.
    assert_eq!(at_once(addr, "/free", 6), [200; 6]);
    assert!(free.most() > 1, "the requests never overlapped");
    // With max_connections 1, they wait in rein and reach the server one at a time.
    assert_eq!(at_once(addr, "/limited", 6), [200; 6]);
    assert_eq!(
        limited.most(),
        1,
        "more than one request at once on the server"
    );
    let st = server_status(&rein, &limited.addr.to_string());
    assert_eq!(st["requests"], 6, "{st}");
}

#[test]
fn a_unix_server_key_serves_many_requests_over_few_connections() {
    let rein = Rein::start();
    let sock = rein.dir.path().join("u.sock");
    let key = format!("unix:{}", sock.display());
    let _n = Backend::node("N", &key);
    let addr = serve_upstream(&rein, json!({"servers": {&key: {}}}));
    for _ in 0..5 {
        let mut c = Conn::open(addr);
        for _ in 0..10 {
            let r = c.get("/whoami", &[]);
            assert_eq!((r.status, r.text().as_str()), (200, "N"), "{r:?}");
        }
    }
    let (_, st) = rein.api("GET", "/status/upstreams/u", None);
    let server = &st["servers"][&key];
    assert_eq!(server["requests"], 50, "{st}");
    // Requests one at a time: a connection per worker thread at most, kept alive between them.
    let opened = server["connections_opened"].as_u64().unwrap();
    assert!(
        (1..=4).contains(&opened),
        "{opened} connections for 50 requests: {st}"
    );
    assert!(server["idle_connections"].as_u64() >= Some(1), "{st}");
}

/// A Unix socket's connect fails at once (EAGAIN) while the server's accept queue is full, where a TCP connect
/// would wait (its SYN is sent again). rein waits too, within the connect timeout: a burst of new connections
/// to a server slow to accept costs no 502, and no mark against the server's health.
#[test]
fn a_full_accept_queue_on_a_unix_server_makes_connects_wait_not_fail() {
    let rein = Rein::start();
    let sock = rein.dir.path().join("slow-accept.sock");
    let key = format!("unix:{}", sock.display());
    let _b = Backend::python("B", &key, &["--backlog", "1", "--accept-every-ms", "20"]);
    let addr = serve_upstream(&rein, json!({"servers": {&key: {}}}));
    // Requests at once, each on a new upstream connection: far more than the queue holds.
    let burst: Vec<_> = (0..24)
        .map(|_| std::thread::spawn(move || crate::harness::get(addr, "/whoami").status))
        .collect();
    let statuses: Vec<u16> = burst.into_iter().map(|t| t.join().unwrap()).collect();
    assert!(statuses.iter().all(|&s| s == 200), "{statuses:?}");
    let (_, st) = rein.api("GET", "/status/upstreams/u", None);
    assert_eq!(st["servers"][&key]["failures"], 0, "{st}");
}
