//! Keep-alive GET load for the tests that must fail no request while apps reload, crash or are killed.

use std::io::{BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use crate::harness::{DEADLINE, Response, read_response, wait_for};

pub fn open(addr: SocketAddr) -> BufReader<TcpStream> {
    let s = TcpStream::connect(addr).expect("connect to rein");
    s.set_read_timeout(Some(DEADLINE)).unwrap();
    BufReader::new(s)
}

pub fn try_get(conn: &mut BufReader<TcpStream>, path: &str) -> Option<Response> {
    let req = format!("GET {path} HTTP/1.1\r\nHost: test\r\n\r\n");
    conn.get_mut().write_all(req.as_bytes()).ok()?;
    read_response(conn, false)
}

/// Keep-alive GET load: each thread loops on one connection to its path, counting answers by a key read from
/// each (the tag in `KIND:TAG:PID`, or another: [`Load::start_keyed`]) and every failure (a status other than
/// 200, or a connection closed without an answer).
pub struct Load {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    ok: Arc<Mutex<std::collections::BTreeMap<String, u64>>>,
    failures: Arc<Mutex<Vec<String>>>,
    total: Arc<AtomicU64>,
}

impl Load {
    /// Answers counted by the tag of a `KIND:TAG:PID` body.
    pub fn start(addr: SocketAddr, paths: &[&'static str]) -> Load {
        Load::start_keyed(addr, paths, |r: &Response| {
            let text = r.text();
            text.rsplit_once(':')
                .map_or(text.clone(), |(k, _)| k.to_owned())
        })
    }

    /// Answers counted by `key` (e.g. the backend that answered).
    pub fn start_keyed(
        addr: SocketAddr,
        paths: &[&'static str],
        key: fn(&Response) -> String,
    ) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let ok = Arc::new(Mutex::new(std::collections::BTreeMap::new()));
        let failures = Arc::new(Mutex::new(Vec::new()));
        let total = Arc::new(AtomicU64::new(0));
        let threads = paths
            .iter()
            .map(|&path| {
                let (stop, ok, failures, total) =
                    (stop.clone(), ok.clone(), failures.clone(), total.clone());
                std::thread::spawn(move || {
                    let mut conn = open(addr);
                    while !stop.load(Ordering::Relaxed) {
                        match try_get(&mut conn, path) {
                            Some(r) if r.status == 200 => {
                                *ok.lock().unwrap().entry(key(&r)).or_default() += 1;
                            }
                            Some(r) => failures.lock().unwrap().push(format!(
                                "{path}: {} {}",
                                r.status,
                                r.text()
                            )),
                            None => {
                                failures
                                    .lock()
                                    .unwrap()
                                    .push(format!("{path}: connection closed without an answer"));
                                conn = open(addr);
                            }
                        }
                        total.fetch_add(1, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        Load {
            stop,
            threads,
            ok,
            failures,
            total,
        }
    }

    /// Waits until `n` more requests were made (whatever their outcome).
    pub fn wait_more(&self, n: u64) {
        let start = self.total.load(Ordering::Relaxed);
        wait_for(&format!("{n} more requests"), || {
            self.total.load(Ordering::Relaxed) >= start + n
        });
    }

    /// Waits until `n` more answers counted under `key` came in.
    pub fn wait_answers(&self, key: &str, n: u64) {
        let start = self.count(key);
        wait_for(&format!("{n} more answers from {key}"), || {
            self.count(key) >= start + n
        });
    }

    pub fn count(&self, key: &str) -> u64 {
        self.ok.lock().unwrap().get(key).copied().unwrap_or(0)
    }

    /// Requests made so far, whatever their outcome.
    pub fn total(&self) -> u64 {
        self.total.load(Ordering::Relaxed)
    }

    pub fn finish(self) -> (std::collections::BTreeMap<String, u64>, Vec<String>) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads {
            t.join().unwrap();
        }
        let ok = self.ok.lock().unwrap().clone();
        let failures = self.failures.lock().unwrap().clone();
        (ok, failures)
    }
}

pub fn assert_no_failures(ok: &std::collections::BTreeMap<String, u64>, failures: &[String]) {
    assert!(
        failures.is_empty(),
        "{} failed requests (answered: {ok:?}); first ones: {:?}",
        failures.len(),
        &failures[..failures.len().min(5)]
    );
}
