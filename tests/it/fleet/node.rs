//! One rein node of a fleet: `rein run --etcd ... --fleet ... --node ...` in a network namespace of its own
//! (the harness's [`Rein`] through `ip netns exec`), its control API over its Unix socket, and what its
//! listeners serve.

use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use serde_json::Value;

use super::netns::Netns;
use crate::harness::{Rein, read_response, wait_for};

/// The port of the fleet's listener (`*:8080`): the same on every node, each in its own namespace.
pub(crate) const PORT: u16 = 8080;

/// The response header that names the document a node serves (see [`super::doc`]).
pub(crate) const DOC_HEADER: &str = "X-Doc";

pub(crate) struct Node {
    pub(crate) name: String,
    // Dropped before the namespace it runs in.
    pub(crate) rein: Rein,
    pub(crate) ns: Netns,
}

impl Node {
    /// Starts a node named `name` of fleet `fleet` on the etcd client URLs `etcd`, with `extra` arguments
    /// (`--config EMPTY`); waits until its API answers. A restart runs the same command line.
    pub(crate) fn start(
        name: &str,
        fleet: &str,
        ns: Netns,
        etcd: &[String],
        extra: &[&str],
    ) -> Node {
        let urls = etcd.join(",");
        let mut args = vec!["--etcd", &urls, "--fleet", fleet, "--node", name];
        args.extend_from_slice(extra);
        let mut rein = Rein::start_through(super::temp_dir(), &ns.wrapper(), &args, &[]);
        // Longer than any fleet write may take (?wait=fleet waits up to 10 s), short of hanging the test.
        rein.set_api_timeout(Duration::from_secs(30));
        wait_for(&format!("node {name}'s control API"), || {
            if let Some((code, stderr)) = rein.exited() {
                panic!("node {name} exited ({code:?}): {stderr}");
            }
            rein.answers()
        });
        Node {
            name: name.to_owned(),
            rein,
            ns,
        }
    }

    /// Where the test reaches the node's listener on `port`.
    pub(crate) fn addr(&self, port: u16) -> SocketAddr {
        SocketAddr::from((self.ns.inside, port))
    }

    /// The document the node's listener on [`PORT`] serves (its [`DOC_HEADER`]), `None` if it does not answer
    /// 200.
    pub(crate) fn served(&self) -> Option<String> {
        let stream = TcpStream::connect_timeout(&self.addr(PORT), Duration::from_secs(2)).ok()?;
        stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
        let mut reader = std::io::BufReader::new(stream);
        std::io::Write::write_all(
            reader.get_mut(),
            b"GET / HTTP/1.1\r\nHost: fleet\r\nConnection: close\r\n\r\n",
        )
        .ok()?;
        let r = read_response(&mut reader, false)?;
        (r.status == 200).then(|| r.header(DOC_HEADER).unwrap_or_default().to_owned())
    }

    /// `GET /fleet`.
    pub(crate) fn fleet(&self) -> Value {
        let (status, body) = self.rein.api("GET", "/fleet", None);
        assert_eq!(status, 200, "GET /fleet on {}: {body}", self.name);
        body
    }

    /// `GET /config`: the document and its ETag.
    pub(crate) fn config(&self) -> (Value, String) {
        let (status, headers, body) = self.rein.api_raw("GET", "/config", None, &[]);
        assert_eq!(status, 200, "GET /config on {}", self.name);
        let etag = headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("etag"))
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| panic!("no ETag from {}", self.name));
        let doc = serde_json::from_slice(&body).expect("the document as JSON");
        (doc, etag)
    }

    /// `PUT /config{query}` with `doc`, guarded by `if_match` if given: the status and the answer.
    pub(crate) fn put(&self, doc: &Value, if_match: Option<&str>, query: &str) -> (u16, Value) {
        let headers: Vec<(&str, &str)> = if_match.map(|e| ("If-Match", e)).into_iter().collect();
        let (status, _, body) = self.rein.api_raw(
            "PUT",
            &format!("/config{query}"),
            Some(&doc.to_string()),
            &headers,
        );
        (status, serde_json::from_slice(&body).unwrap_or(Value::Null))
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if std::thread::panicking() {
            // A node that died says how: a panic's message is on its standard error, not in its log.
            if let Some((code, stderr)) = self.rein.exited() {
                eprintln!("=== node {} exited ({code:?}) ===\n{stderr}", self.name);
            }
            // Only if it answers: a second panic here would abort the test binary.
            let fleet = std::os::unix::net::UnixStream::connect(self.rein.control())
                .is_ok()
                .then(|| self.rein.api("GET", "/fleet", None));
            eprintln!(
                "=== node {} (namespace {}, {}) ===\n/fleet: {fleet:?}",
                self.name, self.ns.name, self.ns.inside
            );
        }
    }
}
