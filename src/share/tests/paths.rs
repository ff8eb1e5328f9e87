//! Resolution: index files, directory redirects, missing and special files, the `types` filter, MIME
//! overrides, symlinks, chroot and mount crossing, through `openat2` and through the fallback walk.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use ::http::{Method, StatusCode, header};

use super::*;
use crate::share::resolve::{self, Resolver};

#[tokio::test]
async fn full_file_and_head() {
    let s = site();
    s.write("a.html", b"<h1>hello</h1>");
    let a = s.get("a.html", &[]).await;
    assert_eq!(a.status, StatusCode::OK);
    assert_eq!(a.body.as_ref(), b"<h1>hello</h1>");
    assert_eq!(a.header(header::CONTENT_TYPE), "text/html");
    assert_eq!(a.header(header::CONTENT_LENGTH), "14");
    assert_eq!(a.header(header::ACCEPT_RANGES), "bytes");
    assert!(
        a.header(header::ETAG).ends_with("-e\""),
        "{}",
        a.header(header::ETAG)
    );
    assert!(a.header(header::LAST_MODIFIED).ends_with(" GMT"));
    assert!(!a.headers.contains_key(header::VARY));

    let h = answer(s.run(Method::HEAD, "a.html", &[]).await).await;
    assert_eq!(h.status, StatusCode::OK);
    assert!(h.body.is_empty());
    for name in [
        header::CONTENT_TYPE,
        header::CONTENT_LENGTH,
        header::ETAG,
        header::LAST_MODIFIED,
    ] {
        assert_eq!(h.header(name.clone()), a.header(name));
    }
}

#[tokio::test]
async fn other_methods_are_405() {
    let s = site();
    s.write("a.txt", b"x");
    let a = answer(s.run(Method::POST, "a.txt", &[]).await).await;
    assert_eq!(a.status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(a.header(header::ALLOW), "GET, HEAD");
    assert!(a.body.is_empty());
}

#[tokio::test]
async fn index_and_directories() {
    let mut s = site();
    s.write("d/index.html", b"index");
    s.write("e/other.txt", b"x");
    assert_eq!(s.get("d/", &[]).await.body.as_ref(), b"index");
    assert!(is_not_found(&s.run(Method::GET, "e/", &[]).await));
    s.opts.index = "other.txt".into();
    assert_eq!(s.get("e/", &[]).await.body.as_ref(), b"x");

    // A directory without its slash: redirect to the request path plus "/", escaped.
    std::fs::create_dir(s.root().join("a b")).expect("mkdir");
    let a = answer(s.get_as("a b", "/x/a b", "q=1", None).await).await;
    assert_eq!(a.status, StatusCode::MOVED_PERMANENTLY);
    assert_eq!(a.header(header::LOCATION), "/x/a%20b/?q=1");
    // Already slashed: still a directory named without a trailing slash in the share, so Unit's redirect.
    let ShareOutcome::Served(r) = s.get_as("d", "/d/", "", None).await else {
        panic!("expected a redirect")
    };
    assert_eq!(r.status(), StatusCode::MOVED_PERMANENTLY);
    assert_eq!(r.headers()[header::LOCATION], "/d//");
    // The index itself being a directory is not servable.
    std::fs::create_dir_all(s.root().join("f/other.txt")).expect("mkdir");
    assert!(is_not_found(&s.run(Method::GET, "f/", &[]).await));
}

#[tokio::test]
async fn missing_special_and_types() {
    let s = site();
    s.write("a.txt", b"text");
    assert!(is_not_found(&s.run(Method::GET, "nope.txt", &[]).await));
    assert!(is_not_found(&s.run(Method::GET, "a.txt/x", &[]).await));
    nix::unistd::mkfifo(&s.root().join("fifo"), nix::sys::stat::Mode::S_IRWXU).expect("mkfifo");
    assert!(is_not_found(&s.run(Method::GET, "fifo", &[]).await));

    let only_html = |m: &str| m == "text/html";
    let run = |rel: &'static str| s.get_as(rel, "/", "", Some(&only_html));
    assert!(is_forbidden(&run("a.txt").await));
    // As in Unit, the type is checked before the file is looked for.
    assert!(is_forbidden(&run("missing.txt").await));
    s.write("b.html", b"ok");
    assert!(matches!(run("b.html").await, ShareOutcome::Served(_)));
    // A path ending in `/` serves its index whatever `types` says (Unit checks types on the path only).
    s.write("d/index.html", b"index");
    let only_text = |m: &str| m == "text/plain";
    let out = s.get_as("d/", "/d/", "", Some(&only_text)).await;
    assert!(matches!(out, ShareOutcome::Served(r) if r.status() == StatusCode::OK));
}

#[tokio::test]
async fn a_unix_socket_is_not_found() {
    let s = site();
    let _listener = std::os::unix::net::UnixListener::bind(s.root().join("sock")).expect("bind");
    assert!(is_not_found(&s.run(Method::GET, "sock", &[]).await));
}

#[tokio::test]
async fn permission_denied_is_forbidden() {
    use std::os::unix::fs::PermissionsExt;
    if nix::unistd::geteuid().is_root() {
        // Root ignores permission bits; the errno mapping is covered in resolve's tests.
        return;
    }
    let s = site();
    s.write("locked/a.txt", b"x");
    let locked = s.root().join("locked");
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o000)).expect("chmod");
    let out = s.run(Method::GET, "locked/a.txt", &[]).await;
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    assert!(is_forbidden(&out));
}

#[tokio::test]
async fn mime_overrides() {
    let mut s = site();
    s.write("app.log", b"log");
    s.write("README", b"read me");
    let v = serde_json::json!({"text/plain": [".log", "README"]});
    s.mime = MimeTypes::compile(&v, &crate::config::JsonPath::root()).expect("valid");
    assert_eq!(
        s.get("app.log", &[]).await.header(header::CONTENT_TYPE),
        "text/plain"
    );
    assert_eq!(
        s.get("README", &[]).await.header(header::CONTENT_TYPE),
        "text/plain"
    );
}

#[tokio::test]
async fn symlinks_and_chroot() {
    let mut s = site();
    s.write("www/real.txt", b"real");
    s.write("secret.txt", b"secret");
    symlink("real.txt", s.root().join("www/link.txt")).expect("symlink");
    symlink("../secret.txt", s.root().join("www/escape.txt")).expect("symlink");
    symlink(s.root().join("secret.txt"), s.root().join("www/abs.txt")).expect("symlink");

    assert_eq!(s.get("www/link.txt", &[]).await.body.as_ref(), b"real");
    assert_eq!(s.get("www/escape.txt", &[]).await.body.as_ref(), b"secret");

    s.opts.follow_symlinks = false;
    assert!(is_forbidden(&s.run(Method::GET, "www/link.txt", &[]).await));
    assert_eq!(s.get("www/real.txt", &[]).await.body.as_ref(), b"real");

    s.opts.follow_symlinks = true;
    s.opts.chroot = Some(s.root().join("www"));
    assert_eq!(s.get("www/link.txt", &[]).await.body.as_ref(), b"real");
    // As in Unit (RESOLVE_IN_ROOT), links and `..` resolve inside the chroot: no such file there.
    assert!(is_not_found(
        &s.run(Method::GET, "www/escape.txt", &[]).await
    ));
    assert!(is_not_found(&s.run(Method::GET, "www/abs.txt", &[]).await));
    assert!(is_not_found(
        &s.run(Method::GET, "www/../secret.txt", &[]).await
    ));
    // A share path outside the chroot is refused before any lookup.
    assert!(is_forbidden(&s.run(Method::GET, "secret.txt", &[]).await));
    assert!(is_not_found(
        &s.run(Method::GET, "www/missing.txt", &[]).await
    ));
}

/// The same rules through `openat2` and through the component walk.
#[test]
fn resolver_matrix_both_ways() {
    use resolve::OpenError;
    let s = site();
    s.write("www/d/f.txt", b"f");
    s.write("out.txt", b"o");
    symlink("d", s.root().join("www/dl")).expect("symlink");
    symlink("../../out.txt", s.root().join("www/d/up.txt")).expect("symlink");
    symlink("loop", s.root().join("www/loop")).expect("symlink");
    symlink("/d/f.txt", s.root().join("www/abs.txt")).expect("symlink");
    let www = s.root().join("www");
    let kind = |r: Result<std::fs::File, OpenError>| match r {
        Ok(_) => "ok",
        Err(OpenError::NotFound) => "404",
        Err(OpenError::Forbidden) => "403",
        Err(OpenError::Io(_)) => "io",
    };
    for force_walk in [false, true] {
        let mut r = Resolver {
            chroot: Some(www.clone()),
            follow_symlinks: true,
            traverse_mounts: true,
            force_walk,
        };
        let open = |r: &Resolver, rel: &str| kind(r.open(&www.join(rel)));
        assert_eq!(open(&r, "d/f.txt"), "ok", "walk={force_walk}");
        assert_eq!(open(&r, "dl/f.txt"), "ok", "walk={force_walk}");
        assert_eq!(open(&r, "dl/../d/f.txt"), "ok", "walk={force_walk}");
        // `..` stops at the chroot, and an absolute link starts from it.
        assert_eq!(open(&r, "d/up.txt"), "404", "walk={force_walk}");
        assert_eq!(open(&r, "abs.txt"), "ok", "walk={force_walk}");
        assert_eq!(open(&r, "loop"), "403", "walk={force_walk}");
        assert_eq!(open(&r, "d/f.txt/x"), "404", "walk={force_walk}");
        assert_eq!(open(&r, "d/nope"), "404", "walk={force_walk}");
        assert_eq!(open(&r, ""), "ok", "walk={force_walk}");
        r.follow_symlinks = false;
        assert_eq!(open(&r, "dl/f.txt"), "403", "walk={force_walk}");
        assert_eq!(open(&r, "d/f.txt"), "ok", "walk={force_walk}");
        // Without a chroot the whole path is checked, and `..` may climb freely.
        r.chroot = None;
        assert_eq!(open(&r, "dl/f.txt"), "403", "walk={force_walk}");
        assert_eq!(open(&r, "../out.txt"), "ok", "walk={force_walk}");
        r.follow_symlinks = true;
        assert_eq!(open(&r, "d/up.txt"), "ok", "walk={force_walk}");
    }
}

/// `/proc` is a mount of its own on any Linux system this runs on.
#[test]
fn mount_crossing() {
    if !Path::new("/proc/version").exists() {
        return;
    }
    for force_walk in [false, true] {
        let mut r = Resolver {
            chroot: Some(PathBuf::from("/")),
            follow_symlinks: true,
            traverse_mounts: true,
            force_walk,
        };
        assert!(
            r.open(Path::new("/proc/version")).is_ok(),
            "walk={force_walk}"
        );
        r.traverse_mounts = false;
        let refused = matches!(
            r.open(Path::new("/proc/version")),
            Err(resolve::OpenError::Forbidden)
        );
        assert!(refused, "walk={force_walk}");
    }
}
