//! Tests of string patterns: wildcards, negation, regexes, case and percent-decoding rules.

use serde_json::json;

use super::*;

fn set(v: Value) -> PatternSet {
    PatternSet::compile(&v, &JsonPath::root().key("uri"), false).expect("compiles")
}

fn set_ci(v: Value) -> PatternSet {
    PatternSet::compile(&v, &JsonPath::root().key("host"), true).expect("compiles")
}

fn err(v: Value, encoding: Encoding) -> String {
    let path = JsonPath::root()
        .key("routes")
        .index(0)
        .key("match")
        .key("uri");
    PatternSet::compile_encoded(&v, &path, false, encoding)
        .expect_err("must fail")
        .to_string()
}

#[test]
fn exact_and_empty() {
    let p = set(json!("/index.html"));
    assert!(p.matches("/index.html"));
    assert!(!p.matches("/index.htm"));
    assert!(!p.matches("/index.html5"));
    let empty = set(json!(""));
    assert!(empty.matches(""));
    assert!(!empty.matches("x"));
    let not_empty = set(json!("!"));
    assert!(!not_empty.matches(""));
    assert!(not_empty.matches("x"));
}

#[test]
fn wildcard_prefix_suffix_middle() {
    let suffix = set(json!("*.php"));
    assert!(suffix.matches("/a/b.php"));
    assert!(suffix.matches(".php"));
    assert!(!suffix.matches("/a/b.php5"));
    let prefix = set(json!("/admin/*"));
    assert!(prefix.matches("/admin/"));
    assert!(prefix.matches("/admin/x/y"));
    assert!(!prefix.matches("/admin"));
    let middle = set(json!("/a*z"));
    assert!(middle.matches("/az"));
    assert!(middle.matches("/abcz"));
    assert!(!middle.matches("/abc"));
    let any = set(json!("*"));
    assert!(any.matches(""));
    assert!(any.matches("anything"));
}

#[test]
fn wildcard_many_stars() {
    let p = set(json!("How*s*that*to*you"));
    assert!(p.matches("Howsthattoyou"));
    assert!(p.matches("How is that to you"));
    assert!(!p.matches("How is that for you"));
    let contains = set(json!("*/api/*"));
    assert!(contains.matches("/v1/api/x"));
    assert!(!contains.matches("/v1/apix"));
    let nested = set(json!("/admin/*/*.php"));
    assert!(nested.matches("/admin/x/index.php"));
    assert!(!nested.matches("/admin/index.php"));
    // Prefix and suffix must not share characters.
    let overlap = set(json!("ab*ba"));
    assert!(!overlap.matches("aba"));
    assert!(overlap.matches("abba"));
}

#[test]
fn negation_and_arrays() {
    let p = set(json!(["eu-*.example.com", "!eu-5.example.com"]));
    assert!(p.matches("eu-1.example.com"));
    assert!(!p.matches("eu-5.example.com"));
    assert!(!p.matches("us-1.example.com"));
    let only_neg = set(json!(["!HEAD", "!GET"]));
    assert!(only_neg.matches("POST"));
    assert!(!only_neg.matches("GET"));
    assert!(!only_neg.matches("HEAD"));
    let order = set(json!(["!pattern1", "!pattern2", "pattern*"]));
    assert!(order.matches("pattern3"));
    assert!(!order.matches("pattern1"));
    let not_api = set(json!("!*/api/*"));
    assert!(not_api.matches("/index"));
    assert!(!not_api.matches("/v1/api/x"));
}

#[test]
fn regex_is_unanchored_and_negatable() {
    let p = set(json!("~\\.jpe?g$"));
    assert!(p.matches("/img/a.jpg"));
    assert!(p.matches("/img/a.jpeg"));
    assert!(!p.matches("/img/a.jpg.gz"));
    let anchored = set(json!("~^/data/www/.*\\.php(/.*)?$"));
    assert!(anchored.matches("/data/www/x/y.php/extra"));
    assert!(!anchored.matches("/x/data/www/y.php"));
    let dates = set(json!(["/articles/*", "!~/articles/\\d{4}-\\d{2}-\\d{2}"]));
    assert!(dates.matches("/articles/hello"));
    assert!(!dates.matches("/articles/2024-01-31"));
    let non_ascii = set(json!("~é$"));
    assert!(non_ascii.matches("/café"));
}

#[test]
fn case_rules() {
    let sensitive = set(json!("/Admin/*"));
    assert!(!sensitive.matches("/admin/x"));
    let insensitive = set_ci(json!(["*.Example.COM", "!WWW.*"]));
    assert!(insensitive.matches("blog.example.com"));
    assert!(insensitive.matches("BLOG.EXAMPLE.com"));
    assert!(!insensitive.matches("www.example.com"));
    let re = set_ci(json!("~^get$"));
    assert!(re.matches("GET"));
    let mid = set_ci(json!("*GZIP*"));
    assert!(mid.matches("deflate, gzip, br"));
}

#[test]
fn percent_encoded_patterns() {
    let path = JsonPath::root().key("query");
    let q = PatternSet::compile_encoded(
        &json!("%7Efuzzy word+search"),
        &path,
        false,
        Encoding::UriPlus,
    )
    .expect("compiles");
    assert!(q.matches("~fuzzy word search"));
    let star =
        PatternSet::compile_encoded(&json!("a%2A*"), &path, false, Encoding::Uri).expect("ok");
    assert!(star.matches("a*b"));
    assert!(!star.matches("ab"));
    let bang =
        PatternSet::compile_encoded(&json!("%21x"), &path, false, Encoding::Uri).expect("ok");
    assert!(bang.matches("!x"));
    assert!(!bang.matches("y"));
    let byte =
        PatternSet::compile_encoded(&json!("*%C3*"), &path, false, Encoding::UriPlus).expect("ok");
    assert!(byte.matches("Åsa"));
    assert!(!byte.matches("Asa"));
    // Without an encoding, `%` and `+` are plain characters.
    let plain = set(json!("a+b%20"));
    assert!(plain.matches("a+b%20"));
}

#[test]
fn compile_errors_name_the_path() {
    assert_eq!(
        err(json!(["ok", "a**b"]), Encoding::None),
        "routes/0/match/uri/1: a pattern must not contain a double \"**\""
    );
    assert_eq!(
        err(json!("/a%zz"), Encoding::Uri),
        "routes/0/match/uri: the pattern has an invalid percent-encoding"
    );
    assert!(
        err(json!("~(unclosed"), Encoding::None)
            .starts_with("routes/0/match/uri: invalid regular expression")
    );
    assert_eq!(
        err(json!(["a", 3]), Encoding::None),
        "routes/0/match/uri/1: must be a string, not a number"
    );
    assert_eq!(
        err(json!({"a": 1}), Encoding::None),
        "routes/0/match/uri: must be a pattern string or an array of them, not an object"
    );
}
