//! Tests of address patterns: IPv4/IPv6 exact, CIDR, ranges, ports, negation and Unix sockets.

use serde_json::json;

use super::*;

fn set(v: Value) -> AddressSet {
    AddressSet::compile(&v, &JsonPath::root().key("source")).expect("compiles")
}

fn at(s: &str) -> Option<SocketAddr> {
    Some(s.parse().expect("socket address"))
}

fn err(v: Value) -> String {
    let path = JsonPath::root()
        .key("routes")
        .index(0)
        .key("match")
        .key("source");
    AddressSet::compile(&v, &path)
        .expect_err("must fail")
        .to_string()
}

#[test]
fn ipv4_exact_cidr_range() {
    let exact = set(json!("192.0.2.1"));
    assert!(exact.matches(at("192.0.2.1:1234")));
    assert!(!exact.matches(at("192.0.2.2:1234")));
    let cidr = set(json!("192.0.2.0/24"));
    assert!(cidr.matches(at("192.0.2.255:1")));
    assert!(!cidr.matches(at("192.0.3.0:1")));
    let loose = set(json!("10.1.1.0/16"));
    assert!(loose.matches(at("10.1.200.7:1")));
    let range = set(json!("192.0.2.1-192.0.2.10"));
    assert!(range.matches(at("192.0.2.10:1")));
    assert!(!range.matches(at("192.0.2.11:1")));
    let all = set(json!("0.0.0.0/0"));
    assert!(all.matches(at("203.0.113.5:1")));
    assert!(!all.matches(at("[::1]:1")));
}

#[test]
fn ports_and_wildcards() {
    let p = set(json!(["*:80", "*:443", "*:8000-8080"]));
    assert!(p.matches(at("192.0.2.1:80")));
    assert!(p.matches(at("[2001:db8::1]:8080")));
    assert!(!p.matches(at("192.0.2.1:8081")));
    assert!(!p.matches(None));
    let v4 = set(json!("203.0.113.1-203.0.113.200:8080-8090"));
    assert!(v4.matches(at("203.0.113.100:8085")));
    assert!(!v4.matches(at("203.0.113.100:8091")));
    assert!(!v4.matches(at("203.0.113.201:8085")));
    let cidr_port = set(json!("198.51.100.0/24:8000"));
    assert!(cidr_port.matches(at("198.51.100.9:8000")));
    assert!(!cidr_port.matches(at("198.51.100.9:8001")));
}

#[test]
fn ipv6_forms() {
    let exact = set(json!("::1"));
    assert!(exact.matches(at("[::1]:80")));
    assert!(!exact.matches(at("127.0.0.1:80")));
    let cidr = set(json!("2001:0db8::/32"));
    assert!(cidr.matches(at("[2001:db8:ffff::1]:1")));
    assert!(!cidr.matches(at("[2001:db9::1]:1")));
    let range = set(json!("2001:0db8::-2001:0db8:aaa9:ffff:ffff:ffff:ffff:ffff"));
    assert!(range.matches(at("[2001:db8:aaa9::5]:1")));
    assert!(!range.matches(at("[2001:db8:aaaa::]:1")));
    let bracket = set(json!("[2001:0db8:aaaa::-2001:0db8:bbbb::]:8000"));
    assert!(bracket.matches(at("[2001:db8:aaab::]:8000")));
    assert!(!bracket.matches(at("[2001:db8:aaab::]:8001")));
    let cidr_ports = set(json!("[2001:0db8:ccce:ffff::/64]:8080-8090"));
    assert!(cidr_ports.matches(at("[2001:db8:ccce:ffff::9]:8090")));
    let no_port = set(json!("[::1]"));
    assert!(no_port.matches(at("[::1]:5")));
}

#[test]
fn mapped_ipv4_is_seen_as_ipv4() {
    let p = set(json!("192.0.2.0/24"));
    assert!(p.matches(at("[::ffff:192.0.2.7]:80")));
}

#[test]
fn negation_and_unix() {
    let p = set(json!([
        "!192.168.1.1",
        "!10.1.1.0/16",
        "192.168.1.0/24",
        "2001:0db8::/32"
    ]));
    assert!(p.matches(at("192.168.1.2:1")));
    assert!(!p.matches(at("192.168.1.1:1")));
    assert!(!p.matches(at("10.1.2.3:1")));
    assert!(p.matches(at("[2001:db8::1]:1")));
    assert!(!p.matches(at("172.16.0.1:1")));
    let only_neg = set(json!(["192.0.2.1-192.0.2.10", "!192.0.2.9"]));
    assert!(!only_neg.matches(at("192.0.2.9:1")));
    assert!(only_neg.matches(at("192.0.2.8:1")));
    let unix = set(json!("unix"));
    assert!(unix.matches(None));
    assert!(!unix.matches(at("127.0.0.1:1")));
    let not_local = set(json!("!127.0.0.1"));
    assert!(not_local.matches(None));
    assert!(!not_local.matches(at("127.0.0.1:9")));
    let not_unix = set(json!("!unix"));
    assert!(!not_unix.matches(None));
    assert!(not_unix.matches(at("127.0.0.1:9")));
}

#[test]
fn errors_name_the_path() {
    assert_eq!(
        err(json!(["127.0.0.1", "300.0.0.1"])),
        "routes/0/match/source/1: \"300.0.0.1\" is not an IP address in address \"300.0.0.1\""
    );
    assert_eq!(
        err(json!("10.0.0.0/33")),
        "routes/0/match/source: \"33\" is not a CIDR prefix length (0-32) in address \"10.0.0.0/33\""
    );
    assert_eq!(
        err(json!("10.0.0.9-10.0.0.1")),
        "routes/0/match/source: the range starts after it ends in address \"10.0.0.9-10.0.0.1\""
    );
    assert_eq!(
        err(json!("*:90-80")),
        "routes/0/match/source: the port range starts after it ends in address \"*:90-80\""
    );
    assert_eq!(
        err(json!("*:http")),
        "routes/0/match/source: \"http\" is not a port number (0-65535) in address \"*:http\""
    );
    assert_eq!(
        err(json!("[::1:80")),
        "routes/0/match/source: unclosed \"[\" in address \"[::1:80\""
    );
    assert_eq!(
        err(json!(7)),
        "routes/0/match/source: must be an address pattern or an array of them, not a number"
    );
}
