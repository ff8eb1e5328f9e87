//! Certificates in a fleet: a bundle uploaded through one node is listed and served by every node, the
//! certificates API refuses through any node what it refuses on one machine, a deletion reaches every node,
//! and with etcd down an upload is refused rather than stored on one node.

use std::net::TcpStream;

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use serde_json::{Value, json};

use super::node::Node;
use super::{Fleet, doc, names};
use crate::harness::wait_for;
use crate::tls::pki::{Alg, Ca, TlsConn};

/// The bundle's name in `/certificates`.
const BUNDLE: &str = "site";

/// The name the bundle is for, asked for by SNI.
const HOST: &str = "fleet.example.com";

/// The TLS listener's port: the same on every node, each in its own namespace.
const TLS_PORT: u16 = 8443;

/// [`doc`] tagged `tag` with a TLS listener on [`TLS_PORT`] serving [`BUNDLE`].
fn doc_with_tls(tag: &str) -> Value {
    let mut d = doc(tag);
    d["listeners"][format!("*:{TLS_PORT}")] =
        json!({"pass": "routes", "tls": {"certificate": BUNDLE}});
    d
}

fn upload(node: &Node, pem: &str) -> (u16, Value) {
    node.rein
        .api("PUT", &format!("/certificates/{BUNDLE}"), Some(pem))
}

/// `GET /certificates` on `node`.
fn listed(node: &Node) -> Value {
    let (status, body) = node.rein.api("GET", "/certificates", None);
    assert_eq!(status, 200, "GET /certificates on {}: {body}", node.name);
    body
}

/// The DER of the bundle's first certificate: its leaf.
fn leaf_of(pem: &str) -> Vec<u8> {
    CertificateDer::pem_slice_iter(pem.as_bytes())
        .next()
        .expect("a certificate in the bundle")
        .expect("a PEM certificate")
        .to_vec()
}

/// `node`'s TLS listener serves `leaf` to a client that trusts `ca` only, and answers the request.
fn serves_leaf(node: &Node, ca: &Ca, leaf: &[u8]) {
    let addr = node.addr(TLS_PORT);
    wait_for(&format!("{}'s TLS listener", node.name), || {
        TcpStream::connect(addr).is_ok()
    });
    let mut conn = TlsConn::open(addr, HOST, ca.client(&[b"http/1.1"]));
    assert_eq!(
        conn.peer_leaf(),
        leaf,
        "{} serves the uploaded bundle's leaf",
        node.name
    );
    let response = conn.get("/", HOST);
    assert_eq!(response.status, 200, "over TLS on {}", node.name);
    assert_eq!(response.header("X-Doc"), Some("tls"), "on {}", node.name);
}

/// Uploaded through a, the bundle is listed by b and c; a document naming it, written through b, serves it on
/// every node. The same name uploaded through c is refused, and so is its deletion through c while the document
/// names it; once the listener is gone, the deletion through c removes it from every node and from etcd.
#[test]
fn a_certificate_uploaded_through_one_node_is_served_and_deleted_on_every_node() {
    let Some(fleet) = Fleet::start("certs") else {
        return;
    };
    let (a, b, c) = (&fleet.nodes[0], &fleet.nodes[1], &fleet.nodes[2]);
    let ca = Ca::new();
    let pem = ca.bundle(&[HOST], Alg::Ecdsa);

    let (status, body) = upload(a, &pem);
    assert_eq!(status, 200, "upload through a: {body}");
    let described = a
        .rein
        .api("GET", &format!("/certificates/{BUNDLE}"), None)
        .1;
    for node in [b, c] {
        wait_for(&format!("{} to list the bundle", node.name), || {
            node.rein
                .api("GET", &format!("/certificates/{BUNDLE}"), None)
                .0
                == 200
        });
        let (_, theirs) = node
            .rein
            .api("GET", &format!("/certificates/{BUNDLE}"), None);
        assert_eq!(theirs, described, "{} describes a's bundle", node.name);
    }
    let key = format!("/rein/{}/certificates/{BUNDLE}", fleet.name);
    assert_eq!(fleet.etcd.get(&key).as_deref(), Some(pem.as_str()));

    let (status, body) = b.put(&doc_with_tls("tls"), None, "?wait=fleet");
    assert_eq!(status, 200, "the TLS listener through b: {body}");
    assert_eq!(names(&body["fleet"]["applied"]), ["a", "b", "c"], "{body}");
    let leaf = leaf_of(&pem);
    for node in &fleet.nodes {
        serves_leaf(node, &ca, &leaf);
    }

    let (status, body) = upload(c, &ca.bundle(&[HOST], Alg::Rsa));
    assert_eq!(status, 400, "the same name through c: {body}");
    assert_eq!(body["error"], "Certificate already exists.", "{body}");
    let (status, body) = c
        .rein
        .api("DELETE", &format!("/certificates/{BUNDLE}"), None);
    assert_eq!(status, 400, "a deletion through c while named: {body}");
    assert_eq!(
        body["error"], "Certificate is used in the configuration.",
        "{body}"
    );
    for node in &fleet.nodes {
        serves_leaf(node, &ca, &leaf);
    }

    let (status, body) = b.put(&doc("plain"), None, "?wait=fleet");
    assert_eq!(status, 200, "the TLS listener removed: {body}");
    assert_eq!(names(&body["fleet"]["applied"]), ["a", "b", "c"], "{body}");
    let (status, body) = c
        .rein
        .api("DELETE", &format!("/certificates/{BUNDLE}"), None);
    assert_eq!(status, 200, "the deletion through c: {body}");
    for node in &fleet.nodes {
        wait_for(&format!("{} to drop the bundle", node.name), || {
            listed(node) == json!({})
        });
    }
    assert_eq!(fleet.etcd.get(&key), None, "the bundle's key in etcd");
}

/// With all of etcd stopped, an upload is refused with 503 and no node has the bundle, then or once etcd is
/// back.
#[test]
fn with_etcd_stopped_an_upload_is_refused_and_no_node_has_it() {
    let Some(mut fleet) = Fleet::start("certs-down") else {
        return;
    };
    fleet.etcd.stop_all();
    let pem = Ca::new().bundle(&[HOST], Alg::Ecdsa);
    let (status, body) = upload(&fleet.nodes[0], &pem);
    assert_eq!(status, 503, "an upload with etcd stopped: {body}");
    assert!(body["error"].is_string(), "{body}");
    for node in &fleet.nodes {
        assert_eq!(listed(node), json!({}), "on {}", node.name);
    }
    assert!(
        !fleet.nodes[0]
            .rein
            .state
            .join(format!("certs/{BUNDLE}.pem"))
            .exists(),
        "not saved on a"
    );

    fleet.etcd.start_all();
    fleet.wait_converged();
    for node in &fleet.nodes {
        assert_eq!(
            listed(node),
            json!({}),
            "on {} once etcd is back",
            node.name
        );
    }
    let key = format!("/rein/{}/certificates/{BUNDLE}", fleet.name);
    assert_eq!(fleet.etcd.get(&key), None, "the bundle's key in etcd");
}

/// A bundle uploaded through c and, at once, a document naming it written through c: every node applies the
/// document (the bundle reaches each before the document, through the one watch) and serves the bundle.
#[test]
fn a_bundle_reaches_every_node_before_the_document_that_names_it() {
    let Some(fleet) = Fleet::start("certs-order") else {
        return;
    };
    let c = &fleet.nodes[2];
    let ca = Ca::new();
    let pem = ca.bundle(&[HOST], Alg::Rsa);
    let (status, body) = upload(c, &pem);
    assert_eq!(status, 200, "upload through c: {body}");
    let (status, body) = c.put(&doc_with_tls("tls"), None, "?wait=fleet");
    assert_eq!(status, 200, "{body}");
    assert_eq!(names(&body["fleet"]["applied"]), ["a", "b", "c"], "{body}");
    assert_eq!(body["fleet"]["refused"], json!({}), "{body}");
    let leaf = leaf_of(&pem);
    for node in &fleet.nodes {
        serves_leaf(node, &ca, &leaf);
    }
}
