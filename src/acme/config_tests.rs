use serde_json::json;

use super::*;

fn compile_at(v: serde_json::Value) -> Result<AcmeConf, String> {
    compile(&v, &JsonPath::root().key("acme")).map_err(|e| e.to_string())
}

#[test]
fn defaults_to_lets_encrypt_and_ecdsa() {
    let conf = compile_at(json!({
        "accept_terms": true,
        "certificates": {"site": {"names": ["Example.com", "www.example.com", "example.com."]}}
    }))
    .expect("valid");
    assert_eq!(conf.directory, LETS_ENCRYPT);
    assert_eq!(conf.renew_before, None);
    let site = &conf.certificates["site"];
    assert_eq!(site.names, ["example.com", "www.example.com"]);
    assert_eq!(site.key, KeyKind::Ecdsa);
}

#[test]
fn takes_every_option() {
    let conf = compile_at(json!({
        "directory": "https://localhost:14000/dir",
        "email": "admin@example.com",
        "accept_terms": true,
        "ca": "/etc/pebble.pem",
        "renew_before": 0.5,
        "certificates": {"a": {"names": "a.example", "key": "rsa"}}
    }))
    .expect("valid");
    assert_eq!(conf.email.as_deref(), Some("admin@example.com"));
    assert_eq!(conf.ca, Some(PathBuf::from("/etc/pebble.pem")));
    assert_eq!(conf.renew_before, Some(Duration::from_secs(43_200)));
    assert_eq!(conf.certificates["a"].key, KeyKind::Rsa);
    let staging = compile_at(json!({"directory": "letsencrypt-staging"})).expect("valid");
    assert_eq!(staging.directory, LETS_ENCRYPT_STAGING);
}

#[test]
fn errors_name_their_path() {
    let cases = [
        (
            json!({"certificates": {"s": {"names": ["a.example"]}}}),
            "acme/accept_terms",
        ),
        (json!({"accept_terms": true, "nope": 1}), "acme/nope"),
        (
            json!({"directory": "http://ca.example/dir"}),
            "acme/directory",
        ),
        (json!({"email": "not an address"}), "acme/email"),
        (json!({"ca": "relative.pem"}), "acme/ca"),
        (json!({"renew_before": 0}), "acme/renew_before"),
        (
            json!({"certificates": {"../x": {"names": ["a.example"]}}}),
            "acme/certificates/../x",
        ),
        (json!({"certificates": {"s": {}}}), "acme/certificates/s"),
        (
            json!({"certificates": {"s": {"names": ["a.example", "*.example"]}}}),
            "acme/certificates/s/names/1",
        ),
        (
            json!({"certificates": {"s": {"names": ["127.0.0.1"]}}}),
            "acme/certificates/s/names/0",
        ),
        (
            json!({"certificates": {"s": {"names": ["a..example"]}}}),
            "acme/certificates/s/names/0",
        ),
        (
            json!({"certificates": {"s": {"names": ["a.example"], "key": "dsa"}}}),
            "acme/certificates/s/key",
        ),
        (
            json!({"certificates": {"s": {"names": ["a.example"], "extra": 1}}}),
            "acme/certificates/s/extra",
        ),
    ];
    for (doc, path) in cases {
        let error = compile_at(doc.clone()).expect_err(&doc.to_string());
        assert!(error.starts_with(&format!("{path}:")), "{doc}: {error}");
    }
}
