//! The `share` action through real requests: files, HEAD, index and directory redirects, templates and
//! arrays of paths, `types`, `fallback`, conditional requests, ranges, precompressed siblings, streaming of a
//! large file, and the path-safety rules (traversal, `follow_symlinks`, `chroot`).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::fs::{MetadataExt, symlink};
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::harness::{Conn, DEADLINE, Rein, Response, file};

/// One raw request (the caller writes the whole head) on a fresh connection.
fn raw(addr: SocketAddr, request: &str) -> Response {
    let mut c = Conn::open(addr);
    c.send_raw(request.as_bytes());
    c.read()
        .unwrap_or_else(|| panic!("no response to {request:?}"))
}

/// `dir` as a string for a share template (no trailing slash).
fn s(dir: &Path) -> String {
    dir.display().to_string()
}

/// The ETag and Last-Modified rein should give `path`: nginx's `"<mtime hex>-<size hex>"`.
fn validators(path: &Path) -> (String, String) {
    let meta = std::fs::metadata(path).unwrap();
    let etag = format!("\"{:x}-{:x}\"", meta.mtime(), meta.len());
    let lm = httpdate::fmt_http_date(
        std::time::UNIX_EPOCH + std::time::Duration::from_secs(meta.mtime() as u64),
    );
    (etag, lm)
}

fn serve_named(rein: &Rein, routes: Value) -> SocketAddr {
    rein.configure(json!({
        "listeners": {"127.0.0.1:0": {"pass": "routes/main"}},
        "routes": routes,
    }));
    rein.bound("127.0.0.1:0")
}

#[test]
fn files_head_index_and_directories() {
    let rein = Rein::start();
    let www = rein.dir.path().join("www");
    let a = file(&www, "a.txt", b"hello, share\n");
    file(&www, "index.html", b"<h1>root index</h1>");
    file(&www, "sub/index.html", b"sub index");
    file(&www, "noindex/x.txt", b"x");
    file(&www, "img.png", b"\x89PNG fake");
    let addr = rein.serve(json!([{"action": {"share": format!("{}$uri", s(&www))}}]));
    let mut c = Conn::open(addr);

    let r = c.get("/a.txt", &[]);
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.body, b"hello, share\n");
    assert_eq!(r.header("content-type"), Some("text/plain"));
    assert_eq!(r.header("content-length"), Some("13"));
    assert_eq!(r.header("accept-ranges"), Some("bytes"));
    let (etag, lm) = validators(&a);
    assert_eq!(r.header("etag"), Some(etag.as_str()));
    assert_eq!(r.header("last-modified"), Some(lm.as_str()));
    assert_eq!(r.header("vary"), None);
    assert_eq!(
        c.get("/img.png", &[]).header("content-type"),
        Some("image/png")
    );

    // HEAD: the same head, no body (the next response on the connection parses cleanly).
    let h = c.request("HEAD", "/a.txt", &[], b"");
    assert_eq!(h.status, 200);
    assert_eq!(h.header("content-length"), Some("13"));
    assert_eq!(h.header("content-type"), Some("text/plain"));
    assert_eq!(h.header("etag"), Some(etag.as_str()));
    assert_eq!(h.header("last-modified"), Some(lm.as_str()));
    assert_eq!(h.header("accept-ranges"), Some("bytes"));
    let r = c.get("/", &[]);
    assert_eq!(r.status, 200);
    assert_eq!(r.body, b"<h1>root index</h1>", "index for /");
    assert_eq!(r.header("content-type"), Some("text/html"));

    // A directory without its slash: 301 to the slashed path; with it: its index.
    let r = c.get("/sub", &[]);
    assert_eq!(r.status, 301, "{r:?}");
    assert_eq!(r.header("location"), Some("/sub/"));
    let r = c.get("/sub/", &[]);
    assert_eq!(r.status, 200);
    assert_eq!(r.body, b"sub index");
    // A directory without an index: 404, never a listing.
    assert_eq!(c.get("/noindex/", &[]).status, 404);
    assert_eq!(c.get("/missing.txt", &[]).status, 404);
    // A file asked for as a directory.
    assert_eq!(c.get("/a.txt/", &[]).status, 404);

    // Only GET and HEAD.
    for method in ["POST", "PUT", "DELETE"] {
        let r = c.request(method, "/a.txt", &[], b"data");
        assert_eq!(r.status, 405, "{method}");
        assert_eq!(r.header("allow"), Some("GET, HEAD"), "{method}");
    }
    // The connection is still in step after bodies were discarded.
    assert_eq!(c.get("/a.txt", &[]).body, b"hello, share\n");

    // Unit keeps the query in a directory redirect (`nxt_http_static_send_ready` appends `?args`).
    let r = c.get("/sub?x=1&y=2", &[]);
    assert_eq!(r.status, 301, "{r:?}");
    assert_eq!(
        r.header("location"),
        Some("/sub/?x=1&y=2"),
        "the query is kept"
    );
}

#[test]
fn templates_arrays_index_types_and_fallback() {
    let rein = Rein::start();
    let d = rein.dir.path();
    let one = d.join("one");
    let two = d.join("two");
    let vhosts = d.join("vhosts");
    file(&one, "both.txt", b"from one");
    file(&two, "both.txt", b"from two");
    file(&two, "only-two.txt", b"only in two");
    file(&one, "idx/default.htm", b"custom index");
    file(&one, "idx/index.html", b"not this one");
    file(&one, "t/pic.png", b"png");
    file(&one, "t/page.html", b"<p>html</p>");
    file(&one, "fixed.txt", b"always this");
    file(&one, "fb/present.txt", b"present");
    file(&two, "fb/from-share.txt", b"fallback share");
    file(&vhosts, "a.test/page.txt", b"site a");
    file(&vhosts, "b.test/page.txt", b"site b");
    let addr = serve_named(
        &rein,
        json!({
            "main": [
                {"match": {"uri": "/idx/*"}, "action": {"share": format!("{}$uri", s(&one)), "index": "default.htm"}},
                {"match": {"uri": "/t/*"}, "action": {"share": format!("{}$uri", s(&one)), "types": ["image/*"]}},
                {"match": {"uri": "/fixed/*"}, "action": {"share": format!("{}/fixed.txt", s(&one))}},
                {"match": {"uri": "/page.txt"}, "action": {"share": format!("{}/$host$uri", s(&vhosts))}},
                {"match": {"uri": "/fb/*"}, "action": {
                    "share": format!("{}$uri", s(&one)),
                    "fallback": {"share": format!("{}$uri", s(&two)), "fallback": {"pass": "routes/last"}}
                }},
                {"match": {"uri": "/typefb/*"}, "action": {
                    "share": format!("{}/t/page.html", s(&one)),
                    "types": ["image/*"],
                    "fallback": {"return": 204}
                }},
                {"action": {"share": [format!("{}$uri", s(&one)), format!("{}$uri", s(&two))]}}
            ],
            "last": [{"action": {"return": 200, "response_headers": {"X-Step": "last"}}}]
        }),
    );
    let mut c = Conn::open(addr);
    // Arrays: the first path that exists wins.
    assert_eq!(c.get("/both.txt", &[]).body, b"from one");
    assert_eq!(c.get("/only-two.txt", &[]).body, b"only in two");
    assert_eq!(c.get("/in-neither.txt", &[]).status, 404);
    // `index`
    let r = c.get("/idx/", &[]);
    assert_eq!((r.status, r.body.as_slice()), (200, &b"custom index"[..]));
    // `types`: only images; an HTML file is refused, a missing image is still missing.
    let r = c.get("/t/pic.png", &[]);
    assert_eq!(
        (r.status, r.header("content-type")),
        (200, Some("image/png"))
    );
    let r = c.get("/t/page.html", &[]);
    assert_eq!(r.status, 403, "{r:?}");
    assert!(!r.text().contains("<p>html</p>"));
    assert_eq!(c.get("/t/none.png", &[]).status, 404);
    // A template without `$uri` names one file whatever the request.
    assert_eq!(c.get("/fixed/whatever/else", &[]).body, b"always this");
    // Variables other than `$uri`: one directory per host.
    let r = raw(addr, "GET /page.txt HTTP/1.1\r\nHost: A.test:8000\r\n\r\n");
    assert_eq!(r.body, b"site a");
    let r = raw(addr, "GET /page.txt HTTP/1.1\r\nHost: b.test\r\n\r\n");
    assert_eq!(r.body, b"site b");
    // `fallback`: the file when it exists, then a fallback share, then a fallback of the fallback (a pass).
    assert_eq!(c.get("/fb/present.txt", &[]).body, b"present");
    assert_eq!(c.get("/fb/from-share.txt", &[]).body, b"fallback share");
    let r = c.get("/fb/nowhere.txt", &[]);
    assert_eq!((r.status, r.header("x-step")), (200, Some("last")), "{r:?}");
    // A file refused by `types` also goes to the fallback.
    assert_eq!(c.get("/typefb/x", &[]).status, 204);
}

/// Unit's `nxt_http_static_next` makes the fallback the request's action (`r->action = action->fallback`), so
/// the fallback's own `response_headers` apply to its response.
#[test]
fn fallback_response_headers() {
    let rein = Rein::start();
    let www = rein.dir.path().join("www");
    std::fs::create_dir_all(&www).unwrap();
    let addr = rein.serve(json!([{"action": {
        "share": format!("{}$uri", s(&www)),
        "fallback": {"return": 200, "response_headers": {"X-Fallback": "$uri"}}
    }}]));
    let r = Conn::open(addr).get("/nowhere", &[]);
    assert_eq!(r.status, 200);
    assert_eq!(
        r.header("x-fallback"),
        Some("/nowhere"),
        "the fallback's response_headers: {r:?}"
    );
}

/// In Unit a method other than GET and HEAD takes the fallback when there is one (`nxt_http_static`),
/// whether or not the file exists: the usual "static files, else the application" setup relies on it for
/// POST. Without a fallback it is a 405.
#[test]
fn fallback_for_other_methods() {
    let rein = Rein::start();
    let www = rein.dir.path().join("www");
    file(&www, "present.txt", b"present");
    let addr = serve_named(
        &rein,
        json!({
            "main": [
                {"match": {"uri": "/plain/*"}, "action": {"share": format!("{}/present.txt", s(&www))}},
                {"action": {"share": format!("{}$uri", s(&www)), "fallback": {"pass": "routes/app"}}}
            ],
            "app": [{"action": {"return": 200, "response_headers": {"X-Step": "app"}}}]
        }),
    );
    let mut c = Conn::open(addr);
    assert_eq!(c.get("/present.txt", &[]).body, b"present");
    assert_eq!(c.request("POST", "/plain/x", &[], b"a=1").status, 405);
    for path in ["/present.txt", "/missing"] {
        let r = c.request("POST", path, &[], b"form=data");
        assert_eq!(
            (r.status, r.header("x-step")),
            (200, Some("app")),
            "POST {path} with a fallback: {r:?}"
        );
    }
}

#[test]
fn conditional_and_range_requests() {
    let rein = Rein::start();
    let www = rein.dir.path().join("www");
    let f = file(&www, "data.txt", b"0123456789abcdef");
    let addr = rein.serve(json!([{"action": {"share": format!("{}$uri", s(&www))}}]));
    let (etag, lm) = validators(&f);
    let mut c = Conn::open(addr);

    let r = c.get("/data.txt", &[("If-None-Match", &etag)]);
    assert_eq!(r.status, 304, "{r:?}");
    assert!(r.body.is_empty());
    assert_eq!(r.header("etag"), Some(etag.as_str()));
    let r = c.get("/data.txt", &[("If-None-Match", "\"other\", W/\"x\"")]);
    assert_eq!(r.status, 200);
    let r = c.get("/data.txt", &[("If-None-Match", "*")]);
    assert_eq!(r.status, 304);
    let r = c.get("/data.txt", &[("If-Modified-Since", &lm)]);
    assert_eq!(r.status, 304, "{r:?}");
    let r = c.get(
        "/data.txt",
        &[("If-Modified-Since", "Thu, 01 Jan 1970 00:00:00 GMT")],
    );
    assert_eq!(r.status, 200);
    assert_eq!(r.body, b"0123456789abcdef");
    // If-None-Match wins over If-Modified-Since.
    let r = c.get(
        "/data.txt",
        &[("If-None-Match", "\"other\""), ("If-Modified-Since", &lm)],
    );
    assert_eq!(r.status, 200);
    let r = c.get("/data.txt", &[("If-Match", "\"other\"")]);
    assert_eq!(r.status, 412);
    let r = c.get("/data.txt", &[("If-Match", &etag)]);
    assert_eq!(r.status, 200);

    // One range.
    let r = c.get("/data.txt", &[("Range", "bytes=2-5")]);
    assert_eq!(r.status, 206, "{r:?}");
    assert_eq!(r.body, b"2345");
    assert_eq!(r.header("content-range"), Some("bytes 2-5/16"));
    assert_eq!(r.header("content-length"), Some("4"));
    assert_eq!(r.header("content-type"), Some("text/plain"));
    let r = c.get("/data.txt", &[("Range", "bytes=-3")]);
    assert_eq!((r.status, r.body.as_slice()), (206, &b"def"[..]));
    assert_eq!(r.header("content-range"), Some("bytes 13-15/16"));
    let r = c.get("/data.txt", &[("Range", "bytes=10-")]);
    assert_eq!((r.status, r.body.as_slice()), (206, &b"abcdef"[..]));
    let r = c.get("/data.txt", &[("Range", "bytes=14-100")]);
    assert_eq!((r.status, r.body.as_slice()), (206, &b"ef"[..]));
    assert_eq!(r.header("content-range"), Some("bytes 14-15/16"));

    // Several ranges: multipart/byteranges, exactly laid out.
    let r = c.get("/data.txt", &[("Range", "bytes=0-1,4-5")]);
    assert_eq!(r.status, 206, "{r:?}");
    let ct = r.header("content-type").unwrap();
    let boundary = ct
        .strip_prefix("multipart/byteranges; boundary=")
        .unwrap_or_else(|| panic!("{ct}"));
    let want = format!(
        "--{boundary}\r\nContent-Type: text/plain\r\nContent-Range: bytes 0-1/16\r\n\r\n01\r\n\
         --{boundary}\r\nContent-Type: text/plain\r\nContent-Range: bytes 4-5/16\r\n\r\n45\r\n\
         --{boundary}--\r\n"
    );
    assert_eq!(r.text(), want);
    assert_eq!(
        r.header("content-length"),
        Some(want.len().to_string().as_str())
    );
    assert_eq!(r.header("content-range"), None);

    // Nothing satisfiable: 416 with the size.
    let r = c.get("/data.txt", &[("Range", "bytes=100-200")]);
    assert_eq!(r.status, 416, "{r:?}");
    assert_eq!(r.header("content-range"), Some("bytes */16"));
    // Not a byte range at all: ignored.
    let r = c.get("/data.txt", &[("Range", "pages=1-2")]);
    assert_eq!((r.status, r.body.len()), (200, 16));
    // If-Range naming another version: the whole file.
    let r = c.get(
        "/data.txt",
        &[("Range", "bytes=0-1"), ("If-Range", "\"old\"")],
    );
    assert_eq!((r.status, r.body.len()), (200, 16));
    let r = c.get("/data.txt", &[("Range", "bytes=0-1"), ("If-Range", &etag)]);
    assert_eq!((r.status, r.body.as_slice()), (206, &b"01"[..]));
    // HEAD with a range: the 206 head, no body.
    let r = c.request("HEAD", "/data.txt", &[("Range", "bytes=0-3")], b"");
    assert_eq!(r.status, 206);
    assert_eq!(r.header("content-length"), Some("4"));
    assert_eq!(c.get("/data.txt", &[]).body, b"0123456789abcdef");
}

#[test]
fn precompressed_siblings() {
    let rein = Rein::start();
    let www = rein.dir.path().join("www");
    let js = file(&www, "x.js", b"console.log('plain');");
    let br = file(&www, "x.js.br", b"BROTLI-BYTES");
    file(&www, "x.js.gz", b"GZIP-BYTES!");
    file(&www, "only-gz.css", b"body{}");
    file(&www, "only-gz.css.gz", b"GZ-CSS");
    let addr = rein.serve(json!([{"action": {"share": format!("{}$uri", s(&www))}}]));
    let mut c = Conn::open(addr);

    let plain = c.get("/x.js", &[]);
    assert_eq!(plain.status, 200);
    assert_eq!(plain.body, b"console.log('plain');");
    assert_eq!(plain.header("content-encoding"), None);
    // A client that accepts no coding costs no sibling lookups; its identity answer fits every client.
    assert_eq!(plain.header("vary"), None);
    let js_type = plain.header("content-type").unwrap().to_owned();
    assert!(js_type.contains("javascript"), "{js_type}");
    assert_eq!(plain.header("etag"), Some(validators(&js).0.as_str()));

    let r = c.get("/x.js", &[("Accept-Encoding", "br")]);
    assert_eq!(r.status, 200);
    assert_eq!(r.body, b"BROTLI-BYTES");
    assert_eq!(r.header("content-encoding"), Some("br"));
    assert_eq!(r.header("vary"), Some("Accept-Encoding"));
    assert_eq!(r.header("content-length"), Some("12"));
    // The type is the original file's, never that of `.br`.
    assert_eq!(r.header("content-type"), Some(js_type.as_str()));
    // The compressed representation has its own tag.
    let br_meta = std::fs::metadata(&br).unwrap();
    assert_eq!(
        r.header("etag"),
        Some(format!("\"{:x}-{:x}-br\"", br_meta.mtime(), br_meta.len()).as_str())
    );

    for ae in ["gzip", "gzip, deflate", "br;q=0, gzip", "x-gzip"] {
        let r = c.get("/x.js", &[("Accept-Encoding", ae)]);
        assert_eq!(r.body, b"GZIP-BYTES!", "{ae}");
        assert_eq!(r.header("content-encoding"), Some("gzip"), "{ae}");
        assert_eq!(r.header("vary"), Some("Accept-Encoding"), "{ae}");
    }
    for ae in ["gzip, deflate, br", "br;q=1, gzip;q=0.5", "*"] {
        let r = c.get("/x.js", &[("Accept-Encoding", ae)]);
        assert_eq!(r.body, b"BROTLI-BYTES", "{ae}");
    }
    for ae in ["identity", "deflate", "br;q=0, gzip;q=0"] {
        let r = c.get("/x.js", &[("Accept-Encoding", ae)]);
        assert_eq!(r.body, b"console.log('plain');", "{ae}");
        assert_eq!(r.header("content-encoding"), None, "{ae}");
    }
    // Only a .gz sibling: a br-only client gets the original.
    let r = c.get("/only-gz.css", &[("Accept-Encoding", "br")]);
    assert_eq!(r.body, b"body{}");
    assert_eq!(r.header("vary"), None);
    // Ranges apply to the representation sent.
    let r = c.get(
        "/x.js",
        &[("Accept-Encoding", "br"), ("Range", "bytes=0-5")],
    );
    assert_eq!((r.status, r.body.as_slice()), (206, &b"BROTLI"[..]));
    assert_eq!(r.header("content-range"), Some("bytes 0-5/12"));
}

/// A kB figure (`VmRSS`, `VmHWM`) from `/proc/<pid>/status`.
fn proc_kb(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

const MIB: usize = 1 << 20;

/// Block `i` of the large file: 1 MiB of pseudo-random bytes with the block number stamped at its start,
/// so a missing, repeated or reordered block is caught, not just a wrong length.
fn block(base: &[u8], i: usize) -> Vec<u8> {
    let mut b = base.to_vec();
    b[..8].copy_from_slice(&(i as u64).to_le_bytes());
    b
}

#[test]
fn large_file_streams_without_buffering() {
    // The file must be clearly larger than what rein's allocator may keep around anyway. rein reads files in
    // 64 KiB pieces on blocking threads; glibc gives those threads arenas of their own, and measured RSS
    // jumps of up to ~42 MiB appear early in a download and then stay flat, whether the file is 64 or
    // 256 MiB (allocator retention, bounded by glibc's 64 MiB arena heap, not buffering). A 160 MiB file
    // (plus an odd tail, so the last read is partial) with a bound of half its size therefore separates
    // "streams" from "holds the file whole": the latter grows RSS by at least the file size. VmHWM (the
    // kernel's peak, updated lazily) and a sample taken halfway both have to stay under the bound. The
    // download takes well under a second over loopback.
    const BLOCKS: usize = 160;
    const TAIL: usize = 12_345;
    let rein = Rein::start();
    let www = rein.dir.path().join("www");
    std::fs::create_dir_all(&www).unwrap();
    let mut base = vec![0u8; MIB];
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for chunk in base.chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        chunk.copy_from_slice(&x.to_le_bytes()[..chunk.len()]);
    }
    let path = www.join("big.bin");
    {
        let mut out = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
        for i in 0..BLOCKS {
            out.write_all(&block(&base, i)).unwrap();
        }
        out.write_all(&block(&base, BLOCKS)[..TAIL]).unwrap();
    }
    let size = BLOCKS * MIB + TAIL;
    let addr = rein.serve(json!([{"action": {"share": format!("{}$uri", s(&www))}}]));
    // Warm up (the first request starts threads, opens the file cache...), then measure from here.
    assert_eq!(
        raw(addr, "GET /missing HTTP/1.1\r\nHost: t\r\n\r\n").status,
        404
    );
    let pid = rein.pid();
    let rss_before = proc_kb(pid, "VmRSS");

    let stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(DEADLINE)).unwrap();
    let mut reader = BufReader::new(stream);
    reader
        .get_mut()
        .write_all(b"GET /big.bin HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut length = None;
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    assert!(line.starts_with("HTTP/1.1 200"), "{line}");
    loop {
        line.clear();
        reader.read_line(&mut line).unwrap();
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some((k, v)) = l.split_once(':')
            && k.eq_ignore_ascii_case("content-length")
        {
            length = Some(v.trim().parse::<usize>().unwrap());
        }
    }
    assert_eq!(length, Some(size), "Content-Length");
    let mut buf = vec![0u8; MIB];
    let mut rss_during = 0;
    for i in 0..=BLOCKS {
        let n = if i == BLOCKS { TAIL } else { MIB };
        reader.read_exact(&mut buf[..n]).unwrap();
        assert!(buf[..n] == block(&base, i)[..n], "block {i} differs");
        if i == BLOCKS / 2 {
            rss_during = proc_kb(pid, "VmRSS");
        }
    }
    let mut rest = Vec::new();
    reader.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty(), "{} bytes past Content-Length", rest.len());
    let peak = proc_kb(pid, "VmHWM");
    let bound_kb = (size / 2 / 1024) as u64;
    assert!(
        rss_during.saturating_sub(rss_before) < bound_kb,
        "RSS grew from {rss_before} kB to {rss_during} kB halfway through a {size}-byte download"
    );
    assert!(
        peak.saturating_sub(rss_before) < bound_kb,
        "peak RSS {peak} kB against {rss_before} kB before a {size}-byte download"
    );
}

/// The share root `www` with `a.txt`, and `secret.txt` beside it (outside the root).
fn traversal_setup(rein: &Rein) -> (PathBuf, PathBuf) {
    let d = rein.dir.path();
    let www = d.join("www");
    file(&www, "a.txt", b"public");
    file(&www, "a/b.txt", b"nested");
    let secret = file(d, "secret.txt", b"TOP-SECRET-7f3a9");
    (www, secret)
}

const SECRET: &str = "TOP-SECRET-7f3a9";

fn assert_safe(r: &Response, what: &str) {
    assert!(
        [400, 403, 404].contains(&r.status),
        "{what}: status {} {r:?}",
        r.status
    );
    assert!(!r.text().contains(SECRET), "{what}: the secret leaked");
}

#[test]
fn traversal_attempts_fail_safely() {
    let rein = Rein::start();
    let (www, _) = traversal_setup(&rein);
    let addr = rein.serve(json!([{"action": {"share": format!("{}$uri", s(&www))}}]));
    assert_eq!(
        raw(addr, "GET /a.txt HTTP/1.1\r\nHost: t\r\n\r\n").body,
        b"public"
    );
    let targets = [
        "/../secret.txt",
        "/./../secret.txt",
        "/a/../../secret.txt",
        "/%2e%2e/secret.txt",
        "/%2E%2E/secret.txt",
        "/%2E%2E%2Fsecret.txt",
        "/.%2e/secret.txt",
        "/a/..%2f..%2fsecret.txt",
        "/a/%2e%2e%2f%2e%2e%2fsecret.txt",
        "/..%5csecret.txt",
        "/a/..%5c..%5csecret.txt",
        "/%00",
        "/a.txt%00",
        "/a.txt%00.png",
        "/%252e%252e/secret.txt",
        "/%252e%252e%252fsecret.txt",
        "//../secret.txt",
        "/..",
        "/%2e%2e",
        "/a/%2e%2e/%2e%2e",
        "../secret.txt",
        "/%c0%ae%c0%ae/secret.txt",
        "/%ff/../../secret.txt",
        "http://test/../secret.txt",
        "http://test/%2e%2e/secret.txt",
    ];
    let mut c = Conn::open(addr);
    for target in targets {
        let request = format!("GET {target} HTTP/1.1\r\nHost: test\r\n\r\n");
        // rein may close the connection after a 400; use a fresh one then.
        c.send_raw(request.as_bytes());
        let r = match c.read() {
            Some(r) => r,
            None => {
                c = Conn::open(addr);
                c.send_raw(request.as_bytes());
                c.read()
                    .unwrap_or_else(|| panic!("no response to {target}"))
            }
        };
        assert_safe(&r, target);
        if r.header("connection")
            .is_some_and(|v| v.eq_ignore_ascii_case("close"))
        {
            // A rejected target closes the connection, so nothing after it is read as a request.
            assert!(c.is_closed(), "{target}: Connection: close but still open");
            c = Conn::open(addr);
        }
    }
    // Climbing paths that stay inside the root are fine.
    let r = raw(addr, "GET /a/../a.txt HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(r.body, b"public");
    let r = raw(addr, "GET /a/%2e%2e/a/b.txt HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(r.body, b"nested");
    let r = raw(
        addr,
        "GET http://test/a/b.txt HTTP/1.1\r\nHost: test\r\n\r\n",
    );
    assert_eq!(r.body, b"nested");
}

#[test]
fn symlinks_follow_symlinks_and_chroot() {
    let rein = Rein::start();
    let (www, secret) = traversal_setup(&rein);
    for dir in ["nf", "cr", "ok"] {
        let d = www.join(dir);
        file(&d, "real.txt", format!("real in {dir}").as_bytes());
        symlink(&secret, d.join("out-abs")).unwrap();
        symlink("../../secret.txt", d.join("out-rel")).unwrap();
        symlink("real.txt", d.join("in")).unwrap();
        symlink("../a.txt", d.join("in-up")).unwrap();
        symlink(".", d.join("dirlink")).unwrap();
        symlink("/a.txt", d.join("root-abs")).unwrap();
    }
    let root = s(&www);
    let addr = rein.serve(json!([
        {"match": {"uri": "/nf/*"}, "action": {"share": format!("{root}$uri"), "follow_symlinks": false}},
        {"match": {"uri": "/cr/*"}, "action": {"share": format!("{root}$uri"), "chroot": root, "follow_symlinks": true}},
        {"match": {"uri": "/crnf/*"}, "action": {"share": format!("{root}/nf/$arg_f"), "chroot": root, "follow_symlinks": false}},
        {"match": {"uri": "/ok/*"}, "action": {"share": format!("{root}$uri")}},
        {"match": {"uri": "/outside"}, "action": {"share": format!("{root}/../secret.txt"), "chroot": root}}
    ]));
    let mut c = Conn::open(addr);
    let mut expect = |path: &str, status: u16, body: Option<&str>| {
        let r = c.get(path, &[]);
        assert_eq!(r.status, status, "{path}: {r:?}");
        assert!(!r.text().contains(SECRET), "{path}: the secret leaked");
        if let Some(b) = body {
            assert_eq!(r.text(), b, "{path}");
        }
    };
    // follow_symlinks: false refuses every symlink, inside the root or not, final or intermediate.
    expect("/nf/real.txt", 200, Some("real in nf"));
    expect("/nf/out-abs", 403, None);
    expect("/nf/out-rel", 403, None);
    expect("/nf/in", 403, None);
    expect("/nf/dirlink/real.txt", 403, None);
    // chroot: links may be followed, but nothing outside the root is reached: as in Unit, they resolve as if
    // the chroot were `/` (`..` stops at it, an absolute target is looked up in it), so these name files
    // the chroot does not have.
    expect("/cr/real.txt", 200, Some("real in cr"));
    expect("/cr/out-abs", 404, None);
    expect("/cr/out-rel", 404, None);
    expect("/cr/root-abs", 200, Some("public"));
    expect("/cr/in", 200, Some("real in cr"));
    expect("/cr/in-up", 200, Some("public"));
    expect("/cr/dirlink/real.txt", 200, Some("real in cr"));
    // chroot with follow_symlinks: false.
    expect("/crnf/x?f=real.txt", 200, Some("real in nf"));
    expect("/crnf/x?f=in", 403, None);
    // A share path that itself climbs out of the chroot stops at it too.
    expect("/outside", 404, None);
    // Neither option: symlinks are followed as the filesystem says.
    expect("/ok/in", 200, Some("real in ok"));
    expect("/ok/in-up", 200, Some("public"));
    expect("/ok/dirlink/real.txt", 200, Some("real in ok"));
}

/// Small files are kept in memory per worker (here at once: `REIN_SHARE_CACHE_SETTLE_MS=0`), yet every
/// change shows on the next request, and a file cached under one action's rules is not served under
/// another's.
#[test]
fn cached_small_files_follow_every_change_and_the_rules() {
    let dir = tempfile::tempdir().unwrap();
    let rein = Rein::start_in_env(
        dir,
        &["--config", "EMPTY"],
        &[("REIN_SHARE_CACHE_SETTLE_MS", "0")],
    );
    rein.wait_ready();
    let www = rein.dir.path().join("www");
    let a = file(&www, "a.txt", b"first");
    let secret = file(rein.dir.path(), "secret.txt", SECRET.as_bytes());
    symlink(&secret, www.join("link")).unwrap();
    let root = s(&www);
    let addr = rein.serve(json!([
        {"match": {"uri": "/strict/*"}, "action": {"share": format!("{root}/$arg_f"), "follow_symlinks": false}},
        {"action": {"share": format!("{root}$uri")}}
    ]));
    let mut c = Conn::open(addr);
    let mut expect = |path: &str, status: u16, body: Option<&str>| {
        let r = c.get(path, &[]);
        assert_eq!(r.status, status, "{path}: {r:?}");
        if let Some(body) = body {
            assert_eq!(r.text(), body, "{path}");
        }
    };
    for _ in 0..3 {
        expect("/a.txt", 200, Some("first"));
    }
    std::fs::write(&a, b"second!").unwrap();
    expect("/a.txt", 200, Some("second!"));
    std::fs::write(&a, b"third!!").unwrap();
    let later = std::time::SystemTime::now() + std::time::Duration::from_secs(60);
    std::fs::File::options()
        .write(true)
        .open(&a)
        .and_then(|f| f.set_modified(later))
        .unwrap();
    expect("/a.txt", 200, Some("third!!"));

    // Cached through the link by the permissive action, refused by the strict one.
    expect("/link", 200, Some(SECRET));
    expect("/link", 200, Some(SECRET));
    expect("/strict/x?f=link", 403, None);

    // A symlink swapped in for a cached file, then the file gone.
    expect("/strict/x?f=a.txt", 200, Some("third!!"));
    std::fs::remove_file(&a).unwrap();
    symlink(&secret, &a).unwrap();
    expect("/strict/x?f=a.txt", 403, None);
    std::fs::remove_file(&a).unwrap();
    expect("/a.txt", 404, None);
}

/// `settings.http.static.mime_types` reaches the share: by extension and by exact file name.
#[test]
fn configured_mime_types_name_the_content_type() {
    let rein = Rein::start();
    let root = rein.dir.path().join("www");
    file(&root, "app.log", b"a log line\n");
    file(&root, "README", b"read me\n");
    file(&root, "plain.txt", b"text\n");
    let addr = rein.serve_with(
        json!([{"action": {"share": format!("{}$uri", s(&root))}}]),
        json!({"settings": {"http": {"static": {"mime_types": {
            "text/x-rein-log": ".log", "text/x-readme": ["README"]}}}}}),
    );
    let ctype = |path: &str| {
        let r = crate::harness::get(addr, path);
        assert_eq!(r.status, 200, "{path}");
        r.header("content-type").map(str::to_owned)
    };
    assert_eq!(ctype("/app.log").as_deref(), Some("text/x-rein-log"));
    assert_eq!(ctype("/README").as_deref(), Some("text/x-readme"));
    assert!(
        ctype("/plain.txt").is_some_and(|t| t.starts_with("text/plain")),
        "the built-in table still applies"
    );
}

/// `traverse_mounts: false` refuses a file on another mount than the `chroot` (`/proc`, a mount of its own on
/// Linux); `true` serves it.
#[test]
fn traverse_mounts_false_stays_on_the_chroot_mount() {
    let rein = Rein::start();
    let share = |traverse: bool| json!({"share": "/proc/version", "chroot": "/", "traverse_mounts": traverse});
    let addr = rein.serve(json!([
        {"match": {"uri": "/off"}, "action": share(false)},
        {"match": {"uri": "/on"}, "action": share(true)},
    ]));
    assert_eq!(crate::harness::get(addr, "/on").status, 200);
    assert_eq!(crate::harness::get(addr, "/off").status, 403);
}

/// `vhosts/site/` holding `a.txt` and `sub/b.txt`, `vhosts/site/x?/` (a directory a raw query can name), and
/// the secret two levels up, beside `vhosts`.
fn vhosts_setup(rein: &Rein) -> PathBuf {
    let d = rein.dir.path();
    let vhosts = d.join("vhosts");
    file(&vhosts, "site/a.txt", b"public");
    file(&vhosts, "site/sub/b.txt", b"nested");
    std::fs::create_dir_all(vhosts.join("site/x?")).unwrap();
    file(d, "secret.txt", SECRET.as_bytes());
    vhosts
}

/// A `Host` that is not a name or an address never reaches a template: `...` used to lose its trailing dot
/// and become `..`, one directory above `"share": ".../vhosts/$host$uri"`.
#[test]
fn a_host_that_is_not_a_name_is_refused_before_any_share() {
    let rein = Rein::start();
    let vhosts = vhosts_setup(&rein);
    let addr = rein.serve(json!([{"action": {"share": format!("{}/$host$uri", s(&vhosts))}}]));
    let port = addr.port();
    for host in [
        "...".to_owned(),
        format!("...:{port}"),
        "..".to_owned(),
        ".".to_owned(),
        ".site".to_owned(),
        "a..b".to_owned(),
        "site\\..".to_owned(),
        "%2e%2e".to_owned(),
        ":80".to_owned(),
    ] {
        let r = raw(
            addr,
            &format!("GET /secret.txt HTTP/1.1\r\nHost: {host}\r\n\r\n"),
        );
        assert_eq!(r.status, 400, "Host: {host}: {r:?}");
        assert!(
            !r.text().contains(SECRET),
            "Host: {host}: the secret leaked"
        );
    }
    // The same hosts in an absolute-form target, whose host replaces the `Host` field.
    for host in ["...", "..", "a..b"] {
        let r = raw(
            addr,
            &format!("GET http://{host}/secret.txt HTTP/1.1\r\nHost: site\r\n\r\n"),
        );
        assert_eq!(r.status, 400, "target host {host}: {r:?}");
        assert!(
            !r.text().contains(SECRET),
            "target host {host}: the secret leaked"
        );
    }
    // Names, with a port or a trailing dot (dropped from `$host`), still reach their directory.
    for host in ["site", "SITE:8080", "site."] {
        let r = raw(
            addr,
            &format!("GET /a.txt HTTP/1.1\r\nHost: {host}\r\n\r\n"),
        );
        assert_eq!(
            (r.status, r.text().as_str()),
            (200, "public"),
            "Host: {host}"
        );
    }
    let r = raw(
        addr,
        "GET http://site./sub/b.txt HTTP/1.1\r\nHost: x\r\n\r\n",
    );
    assert_eq!((r.status, r.text().as_str()), (200, "nested"));
}

/// Whatever the variable, a share's expanded path may not climb above the text before its first variable.
#[test]
fn share_variables_cannot_climb_out_of_the_fixed_part() {
    let rein = Rein::start();
    let vhosts = vhosts_setup(&rein);
    let site = format!("{}/site", s(&vhosts));
    let addr = rein.serve(json!([
        {"match": {"uri": "/arg"}, "action": {"share": format!("{site}/$arg_f")}},
        {"match": {"uri": "/hdr"}, "action": {"share": format!("{site}/${{header_x_file}}")}},
        {"match": {"uri": "/cookie"}, "action": {"share": format!("{site}/$cookie_f")}},
        {"match": {"uri": "/partial"}, "action": {"share": format!("{site}/sub$arg_f")}},
        {"match": {"uri": "/fb"}, "action": {"share": format!("{site}/$arg_f"), "fallback": {"return": 204}}},
        {"match": {"uri": "/chroot"}, "action": {
            "share": format!("{}/$arg_f", s(rein.dir.path())),
            "chroot": format!("{}/$arg_root", s(&vhosts))
        }},
        {"action": {"share": format!("{site}$request_uri")}}
    ]));
    let mut c = Conn::open(addr);
    let mut expect = |target: &str, headers: &[(&str, &str)], status: u16, body: Option<&str>| {
        let r = c.get(target, headers);
        assert_eq!(r.status, status, "{target} {headers:?}: {r:?}");
        assert!(
            !r.text().contains(SECRET),
            "{target} {headers:?}: the secret leaked"
        );
        if let Some(b) = body {
            assert_eq!(r.text(), b, "{target} {headers:?}");
        }
    };
    // $arg_*: decoded from the query, so `%2e%2e%2f` is `../` too.
    expect("/arg?f=a.txt", &[], 200, Some("public"));
    expect("/arg?f=sub/../a.txt", &[], 200, Some("public"));
    expect("/arg?f=../../secret.txt", &[], 403, None);
    expect("/arg?f=%2e%2e/%2e%2e/secret.txt", &[], 403, None);
    expect("/arg?f=%2E%2E%2F%2E%2E%2Fsecret.txt", &[], 403, None);
    expect("/arg?f=sub/../../../secret.txt", &[], 403, None);
    expect("/arg?f=..", &[], 403, None);
    // $header_*
    expect("/hdr", &[("X-File", "sub/b.txt")], 200, Some("nested"));
    expect("/hdr", &[("X-File", "../../secret.txt")], 403, None);
    // $cookie_*
    expect("/cookie", &[("Cookie", "f=a.txt")], 200, Some("public"));
    expect("/cookie", &[("Cookie", "f=../../secret.txt")], 403, None);
    // A variable that continues a name (`sub$arg_f`) may not leave that name either.
    expect("/partial?f=/b.txt", &[], 200, Some("nested"));
    expect("/partial?f=/../a.txt", &[], 403, None);
    // A refusal is a 403 like any other: the fallback applies.
    expect("/fb?f=../../secret.txt", &[], 204, None);
    // $request_uri, raw: its query can name directories (`x?`) and climb from them.
    expect("/a.txt", &[], 200, Some("public"));
    expect("/x?/../a.txt", &[], 200, Some("public"));
    expect("/x?/../../../secret.txt", &[], 403, None);
    // `chroot` templates obey the same rule: `$arg_root=..` would make the chroot the secret's directory.
    expect(
        "/chroot?root=site&f=vhosts/site/a.txt",
        &[],
        200,
        Some("public"),
    );
    expect("/chroot?root=..&f=secret.txt", &[], 403, None);
    expect("/chroot?root=site/../..&f=secret.txt", &[], 403, None);
}
