//! A slow link between one fleet node and etcd: a TCP relay that delivers what etcd sends only after a delay,
//! so that the node learns of etcd's events later than the others. (The kernel's `netem`, which would delay a
//! veth, is not on every machine.) What the node sends goes through at once.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The relay; it stops, and cuts the connections it relays, when dropped.
pub(crate) struct SlowLink {
    /// Where the node connects instead of etcd.
    pub(crate) addr: SocketAddr,
    stop: Arc<AtomicBool>,
    streams: Arc<Mutex<Vec<TcpStream>>>,
}

impl SlowLink {
    /// Listens on `listen` (port 0 for any) and relays each connection to `upstream`; what `upstream` sends
    /// reaches the client `delay` later.
    pub(crate) fn start(listen: SocketAddr, upstream: SocketAddr, delay: Duration) -> SlowLink {
        let listener = TcpListener::bind(listen).expect("the slow link's port");
        let addr = listener.local_addr().expect("its address");
        let stop = Arc::new(AtomicBool::new(false));
        let streams = Arc::new(Mutex::new(Vec::new()));
        let (stop_accepting, kept) = (stop.clone(), streams.clone());
        std::thread::spawn(move || {
            for client in listener.incoming() {
                if stop_accepting.load(Ordering::Relaxed) {
                    return;
                }
                let Ok(client) = client else { continue };
                let Ok(server) = TcpStream::connect(upstream) else {
                    continue;
                };
                let mut kept = kept.lock().unwrap_or_else(|e| e.into_inner());
                kept.extend([&client, &server].iter().filter_map(|s| s.try_clone().ok()));
                relay(client, server, delay);
            }
        });
        SlowLink {
            addr,
            stop,
            streams,
        }
    }
}

/// Copies client → server at once and server → client `delay` late, each direction on threads of its own.
fn relay(client: TcpStream, server: TcpStream, delay: Duration) {
    let (Ok(mut to_server), Ok(mut from_client)) = (server.try_clone(), client.try_clone()) else {
        return;
    };
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut from_client, &mut to_server);
        let _ = to_server.shutdown(Shutdown::Write);
    });
    let (sent, due) = mpsc::channel::<(Instant, Vec<u8>)>();
    let mut from_server = server;
    std::thread::spawn(move || {
        let mut buf = vec![0; 64 * 1024];
        while let Ok(n @ 1..) = from_server.read(&mut buf) {
            if sent
                .send((Instant::now() + delay, buf[..n].to_vec()))
                .is_err()
            {
                return;
            }
        }
    });
    let mut to_client = client;
    std::thread::spawn(move || {
        for (at, bytes) in due {
            // The latency this link simulates, not a wait for a condition.
            std::thread::sleep(at.saturating_duration_since(Instant::now()));
            if to_client.write_all(&bytes).is_err() {
                return;
            }
        }
        let _ = to_client.shutdown(Shutdown::Write);
    });
}

impl Drop for SlowLink {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Wakes the accepting thread, which then sees `stop`.
        let _ = TcpStream::connect(self.addr);
        let streams = self.streams.lock().unwrap_or_else(|e| e.into_inner());
        for stream in streams.iter() {
            let _ = stream.shutdown(Shutdown::Both);
        }
    }
}
