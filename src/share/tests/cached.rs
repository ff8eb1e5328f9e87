//! Answers from the small-file cache: the same bytes and headers as from the file, and never a stale file.
//! Each test lets its thread cache files however fresh ([`cache_fresh_files_on_this_thread`]).

use std::os::unix::fs::symlink;

use ::http::{StatusCode, header};

use super::*;
use crate::share::cache::{self, cache_fresh_files_on_this_thread};
use crate::share::resolve::Resolver;

fn is_cached(s: &Site, rel: &str) -> bool {
    cache::get(&s.path(rel), &Resolver::new(&s.opts)).is_some()
}

#[tokio::test]
async fn ranges_and_conditionals_from_memory() {
    cache_fresh_files_on_this_thread();
    let s = site();
    let data: Vec<u8> = (0..100u8).collect();
    s.write("f.bin", &data);
    let first = s.get("f.bin", &[]).await;
    assert!(is_cached(&s, "f.bin"));
    let again = s.get("f.bin", &[]).await;
    assert_eq!((again.status, &again.body[..]), (StatusCode::OK, &data[..]));
    assert_eq!(again.header(header::ETAG), first.header(header::ETAG));
    assert_eq!(
        again.header(header::LAST_MODIFIED),
        first.header(header::LAST_MODIFIED)
    );

    let a = s.get("f.bin", &[("range", "bytes=10-19")]).await;
    assert_eq!(
        (a.status, &a.body[..]),
        (StatusCode::PARTIAL_CONTENT, &data[10..20])
    );
    let a = s.get("f.bin", &[("range", "bytes=0-1,98-")]).await;
    assert_eq!(a.status, StatusCode::PARTIAL_CONTENT);
    let body = String::from_utf8_lossy(&a.body);
    assert!(body.contains("Content-Range: bytes 0-1/100"), "{body}");
    assert!(body.contains("Content-Range: bytes 98-99/100"), "{body}");
    let a = s.get("f.bin", &[("range", "bytes=200-")]).await;
    assert_eq!(a.status, StatusCode::RANGE_NOT_SATISFIABLE);
    let etag = first.header(header::ETAG).to_owned();
    let a = s.get("f.bin", &[("if-none-match", &etag)]).await;
    assert_eq!(a.status, StatusCode::NOT_MODIFIED);
}

#[tokio::test]
async fn a_changed_or_removed_file_is_never_served_from_memory() {
    cache_fresh_files_on_this_thread();
    let s = site();
    s.write("f.txt", b"first");
    assert_eq!(&s.get("f.txt", &[]).await.body[..], b"first");
    assert!(is_cached(&s, "f.txt"));

    s.write("f.txt", b"second!");
    assert_eq!(&s.get("f.txt", &[]).await.body[..], b"second!");

    // Same size, later mtime.
    s.write("f.txt", b"third!!");
    let later = std::time::SystemTime::now() + std::time::Duration::from_secs(60);
    std::fs::File::options()
        .write(true)
        .open(s.path("f.txt"))
        .and_then(|f| f.set_modified(later))
        .expect("set mtime");
    assert_eq!(&s.get("f.txt", &[]).await.body[..], b"third!!");

    std::fs::remove_file(s.path("f.txt")).expect("remove");
    assert!(is_not_found(&s.run(Method::GET, "f.txt", &[]).await));
}

#[tokio::test]
async fn a_symlink_swapped_in_is_refused_under_the_rules() {
    cache_fresh_files_on_this_thread();
    let mut s = site();
    s.opts.follow_symlinks = false;
    s.write("f.txt", b"public");
    s.write("secret.txt", b"secret");
    assert_eq!(&s.get("f.txt", &[]).await.body[..], b"public");
    assert!(is_cached(&s, "f.txt"));

    std::fs::remove_file(s.path("f.txt")).expect("remove");
    symlink(s.path("secret.txt"), s.path("f.txt")).expect("symlink");
    assert!(is_forbidden(&s.run(Method::GET, "f.txt", &[]).await));
}

#[tokio::test]
async fn precompressed_siblings_from_memory() {
    cache_fresh_files_on_this_thread();
    let s = site();
    s.write("app.js", b"plain");
    s.write("app.js.gz", b"gzipped");
    for _ in 0..2 {
        let a = s.get("app.js", &[("accept-encoding", "gzip")]).await;
        assert_eq!(&a.body[..], b"gzipped");
        assert_eq!(a.header(header::CONTENT_ENCODING), "gzip");
        assert_eq!(a.header(header::VARY), "Accept-Encoding");
        let a = s.get("app.js", &[]).await;
        assert_eq!(&a.body[..], b"plain");
    }
    assert!(is_cached(&s, "app.js") && is_cached(&s, "app.js.gz"));
}

#[tokio::test]
async fn large_files_are_not_cached() {
    cache_fresh_files_on_this_thread();
    let s = site();
    let big = vec![b'x'; usize::try_from(cache::MAX_FILE).expect("fits") + 1];
    s.write("big.txt", &big);
    assert_eq!(s.get("big.txt", &[]).await.body.len(), big.len());
    assert!(!is_cached(&s, "big.txt"));
}
