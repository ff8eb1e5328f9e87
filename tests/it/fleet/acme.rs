//! ACME in a fleet, against Pebble: the certificate is ordered once, by the one node that reaches the CA, and
//! the CA's HTTP-01 validation is answered by another node, which learnt the token through etcd.
//!
//! Made deterministic by reachability rather than timing: node a runs in the host's network namespace and
//! reaches Pebble on 127.0.0.1; nodes b and c run in namespaces of their own, where 127.0.0.1 is their own
//! loopback, so their orders fail at once. Pebble's DNS server answers b's namespace address for every name, so
//! the CA validates through b's plain listener and never reaches a.

use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use serde_json::{Value, json};

use super::cannot_run;
use super::cluster::{Cluster, MEMBERS};
use super::netns::Netns;
use super::node::Node;
use super::slow_link::SlowLink;
use crate::harness::{Rein, wait_for};
use crate::tls::pebble::Pebble;
use crate::tls::pki::TlsConn;

const FLEET: &str = "acme";
const NAMES: [&str; 2] = ["example.com", "www.example.com"];
const BUNDLE: &str = "site";

/// Longer than the harness's deadline: an issuance is several round trips with the CA.
const ACME_DEADLINE: Duration = Duration::from_secs(60);

/// A port free on every address of the host now (node a binds the document's listeners there).
fn host_free_port() -> u16 {
    TcpListener::bind("0.0.0.0:0")
        .expect("a free port")
        .local_addr()
        .expect("its address")
        .port()
}

/// Every etcd member's client URL as a host reaches it at `host`.
fn etcd_urls(etcd: &Cluster, host: Ipv4Addr) -> Vec<String> {
    (0..MEMBERS).map(|m| etcd.client_url(m, host)).collect()
}

/// The fleet's document: a plain listener on `http` (where Pebble validates), a TLS listener on `tls` naming
/// the ACME bundle, an access log shared by every node, and the `acme` section.
fn acme_doc(pebble: &Pebble, http: u16, tls: u16, access_log: &str) -> Value {
    json!({
        "listeners": {
            format!("*:{http}"): {"pass": "routes"},
            format!("*:{tls}"): {"pass": "routes", "tls": {"certificate": BUNDLE}},
        },
        "routes": [{"action": {"return": 204}}],
        "access_log": {"path": access_log, "format": "$remote_addr $request_line $status"},
        "acme": {
            "directory": pebble.directory,
            "email": "admin@example.com",
            "accept_terms": true,
            "ca": pebble.https_ca_file.display().to_string(),
            "certificates": {BUNDLE: {"names": NAMES, "challenge": "http-01"}},
        },
    })
}

/// The leaf (DER) of a PEM bundle.
fn leaf_of(pem: &str) -> Vec<u8> {
    CertificateDer::pem_slice_iter(pem.as_bytes())
        .next()
        .expect("a certificate in the bundle")
        .expect("a PEM certificate")
        .to_vec()
}

/// `GET /certificates/site` answers 200 on `rein`.
fn has_bundle(rein: &Rein) -> bool {
    rein.api("GET", &format!("/certificates/{BUNDLE}"), None).0 == 200
}

/// Waits, up to [`ACME_DEADLINE`], until `rein` lists the bundle.
fn wait_bundle(rein: &Rein, who: &str) {
    let deadline = Instant::now() + ACME_DEADLINE;
    while !has_bundle(rein) {
        let status = rein.api("GET", "/status/certificates", None).1;
        assert!(
            Instant::now() < deadline,
            "{who} never got the bundle: {status}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The TLS listener at `addr` serves `leaf` for every name, verified against Pebble's root, and answers.
fn serves(addr: SocketAddr, client: &std::sync::Arc<rustls::ClientConfig>, leaf: &[u8], who: &str) {
    wait_for(&format!("{who}'s TLS listener"), || {
        TcpStream::connect(addr).is_ok()
    });
    for name in NAMES {
        let mut conn = TlsConn::open(addr, name, client.clone());
        assert_eq!(conn.peer_leaf(), leaf, "{who} serves the fleet's bundle");
        assert_eq!(conn.peer_names(), NAMES.map(|n| format!("DNSName({n})")));
        assert_eq!(conn.get("/", name).status, 204, "on {who}");
    }
}

/// Node a on the host, reaching every etcd member on 127.0.0.1.
fn start_a(etcd: &Cluster) -> Rein {
    let urls = etcd_urls(etcd, Ipv4Addr::LOCALHOST).join(",");
    let a = Rein::start_in(
        tempfile::tempdir().expect("temp dir"),
        &[
            "--etcd", &urls, "--fleet", FLEET, "--node", "a", "--config", "EMPTY",
        ],
    );
    a.wait_ready();
    a
}

/// Node `name` in a namespace of its own, reaching every etcd member through its veth.
fn start_in_namespace(etcd: &Cluster, name: &str) -> Node {
    let ns = Netns::new();
    let urls = etcd_urls(etcd, ns.host);
    Node::start(name, FLEET, ns, &urls, &[])
}

/// Waits until every one of `views` (each node's `GET /fleet`) lists all of `names` live: `?wait=fleet` waits
/// for the nodes live in etcd only.
fn wait_live(views: &[(&str, &dyn Fn() -> Value)], names: &[&str]) {
    for (who, view) in views {
        wait_for(&format!("{who} to see {names:?} live"), || {
            let view = view();
            names.iter().all(|n| view["nodes"][n]["live"] == true)
        });
    }
}

/// `GET /fleet` on a node outside a namespace.
fn fleet_view(rein: &Rein) -> Value {
    let (status, body) = rein.api("GET", "/fleet", None);
    assert_eq!(status, 200, "GET /fleet: {body}");
    body
}

/// The fleet's document with an `acme` section, written through b: a orders the bundle once (b and c, which
/// cannot reach the CA, fail at once if they take the lock first), the CA validates the tokens through b
/// (which a never asked to answer them: they reached b through etcd), the bundle is stored in etcd, and all
/// three nodes serve it.
#[test]
fn acme_in_a_fleet_orders_once_and_another_node_answers_the_challenge() {
    if let Some(why) = cannot_run() {
        eprintln!("\n*** SKIPPED: {why} ***\n");
        return;
    }
    let etcd = Cluster::new();
    let (http, tls) = (host_free_port(), host_free_port());
    let a = start_a(&etcd);
    let b = start_in_namespace(&etcd, "b");
    let c = start_in_namespace(&etcd, "c");
    let Some(pebble) =
        Pebble::start_answering(a.dir.path(), http, host_free_port(), 7_776_000, b.ns.inside)
    else {
        return;
    };
    wait_live(
        &[
            ("a", &|| fleet_view(&a)),
            ("b", &|| b.fleet()),
            ("c", &|| c.fleet()),
        ],
        &["a", "b", "c"],
    );

    let access_log = a.dir.path().join("access.log");
    let doc = acme_doc(&pebble, http, tls, &access_log.display().to_string());
    let (status, body) = b.put(&doc, None, "?wait=fleet");
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        super::names(&body["fleet"]["applied"]),
        ["a", "b", "c"],
        "{body}"
    );

    wait_bundle(&a, "a");
    wait_bundle(&b.rein, "b");
    wait_bundle(&c.rein, "c");
    let key = format!("/rein/{FLEET}/certificates/{BUNDLE}");
    let stored = etcd.get(&key).expect("the bundle in etcd");
    let leaf = leaf_of(&stored);
    let client = pebble.client();
    serves(SocketAddr::from(([127, 0, 0, 1], tls)), &client, &leaf, "a");
    serves(b.addr(tls), &client, &leaf, "b");
    serves(c.addr(tls), &client, &leaf, "c");

    let log = a.log_text();
    assert_eq!(
        log.matches("ACME: requesting a certificate").count(),
        1,
        "a ordered once:\n{log}"
    );
    assert!(
        log.contains("ACME: certificate issued and installed"),
        "{log}"
    );
    let status = a
        .api("GET", &format!("/status/certificates/{BUNDLE}"), None)
        .1;
    assert_eq!(status["state"], "valid", "{status}");
    assert_eq!(status["last_error"], Value::Null, "{status}");
    let issued = pebble.log_text().matches("Issued certificate").count();
    assert_eq!(issued, 1, "Pebble issued once:\n{}", pebble.log_text());

    // Every validation reached b (from the host's side of its veth), none a or c.
    let access = std::fs::read_to_string(&access_log).unwrap_or_default();
    let validations: Vec<&str> = access
        .lines()
        .filter(|l| l.contains("/.well-known/acme-challenge/"))
        .collect();
    assert!(!validations.is_empty(), "no validation in\n{access}");
    let from_b = format!("{} ", b.ns.host);
    assert!(
        validations
            .iter()
            .all(|l| l.starts_with(&from_b) && l.ends_with(" 200")),
        "validations answered by b only:\n{access}"
    );
    // b and c cannot reach the CA: each one that took the lock before a failed its order at once.
    for node in [&b, &c] {
        let log = node.rein.log_text();
        assert_eq!(
            log.matches("ACME: requesting a certificate").count(),
            log.matches("ACME: could not obtain a certificate").count(),
            "{} obtained nothing from the CA:\n{log}",
            node.name
        );
        let status = node
            .rein
            .api("GET", &format!("/status/certificates/{BUNDLE}"), None)
            .1;
        eprintln!("{}'s status of the bundle: {status}", node.name);
    }
    eprintln!("the access log:\n{access}");
}

/// How late b's link to etcd delivers what etcd sends, in the test below: far longer than the CA takes to
/// look once it is told to (Pebble, without its random waits, looks within milliseconds), far shorter than
/// the deadlines.
const SLOW_LINK: Duration = Duration::from_millis(500);

/// The HTTP-01 token must reach the node the CA asks before the CA asks: b learns of etcd's events half a
/// second late (a slow link to etcd), the CA validates through b, and a's first order must succeed.
#[test]
fn acme_in_a_fleet_the_token_reaches_a_slow_node_before_the_ca_looks() {
    if let Some(why) = cannot_run() {
        eprintln!("\n*** SKIPPED: {why} ***\n");
        return;
    }
    let etcd = Cluster::new();
    let (http, tls) = (host_free_port(), host_free_port());
    let a = start_a(&etcd);
    let ns = Netns::new();
    let member: SocketAddr = etcd
        .client_url(0, Ipv4Addr::LOCALHOST)
        .trim_start_matches("http://")
        .parse()
        .expect("a member's address");
    let link = SlowLink::start(SocketAddr::from((ns.host, 0)), member, SLOW_LINK);
    let b = Node::start("b", FLEET, ns, &[format!("http://{}", link.addr)], &[]);
    let Some(pebble) =
        Pebble::start_answering(a.dir.path(), http, host_free_port(), 7_776_000, b.ns.inside)
    else {
        return;
    };
    wait_live(
        &[("a", &|| fleet_view(&a)), ("b", &|| b.fleet())],
        &["a", "b"],
    );

    // The plain listener first, so that b has it before a orders.
    let access_log = a.dir.path().join("access.log");
    let doc = acme_doc(&pebble, http, tls, &access_log.display().to_string());
    let mut plain = doc.clone();
    plain.as_object_mut().expect("an object").remove("acme");
    plain["listeners"]
        .as_object_mut()
        .expect("listeners")
        .remove(&format!("*:{tls}"));
    for step in [&plain, &doc] {
        let (status, body) = a.api("PUT", "/config?wait=fleet", Some(&step.to_string()));
        assert_eq!(status, 200, "{body}");
        assert_eq!(
            super::names(&body["fleet"]["applied"]),
            ["a", "b"],
            "{body}"
        );
    }
    let deadline = Instant::now() + ACME_DEADLINE;
    let site = loop {
        let site = a
            .api("GET", &format!("/status/certificates/{BUNDLE}"), None)
            .1;
        if site["state"] == "valid" || site["state"] == "failed" {
            break site;
        }
        assert!(Instant::now() < deadline, "no outcome on a: {site}");
        std::thread::sleep(Duration::from_millis(100));
    };
    let access = std::fs::read_to_string(&access_log).unwrap_or_default();
    assert_eq!(
        site["state"], "valid",
        "a's first order, validated through b:\n{site}\naccess log:\n{access}"
    );
    wait_bundle(&b.rein, "b");
    let leaf = leaf_of(
        &etcd
            .get(&format!("/rein/{FLEET}/certificates/{BUNDLE}"))
            .expect("the bundle in etcd"),
    );
    serves(b.addr(tls), &pebble.client(), &leaf, "b");
}
