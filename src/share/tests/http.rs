//! HTTP semantics end to end: conditional requests, ranges and multipart bodies, precompressed siblings.

use ::http::{Method, StatusCode, header};

use super::*;

/// 100 distinct bytes: "0123456789" repeated with a letter per decade, so any range is recognisable.
fn hundred() -> Vec<u8> {
    (0..100u8).map(|i| b'a' + i / 10 + (i % 10)).collect()
}

async fn ranged(s: &Site, range: &str) -> Answer {
    s.get("f.txt", &[("range", range)]).await
}

#[tokio::test]
async fn conditionals() {
    let s = site();
    s.write("f.txt", b"data");
    let first = s.get("f.txt", &[]).await;
    let etag = first.header(header::ETAG).to_owned();
    let date = first.header(header::LAST_MODIFIED).to_owned();

    for h in [
        ("if-none-match", etag.as_str()),
        ("if-modified-since", date.as_str()),
    ] {
        let a = s.get("f.txt", &[h]).await;
        assert_eq!(a.status, StatusCode::NOT_MODIFIED, "{h:?}");
        assert_eq!(a.header(header::ETAG), etag);
        assert_eq!(a.header(header::LAST_MODIFIED), date);
        assert!(a.body.is_empty());
        assert!(!a.headers.contains_key(header::CONTENT_LENGTH));
    }
    let a = s.get("f.txt", &[("if-none-match", "\"other\"")]).await;
    assert_eq!((a.status, a.body.as_ref()), (StatusCode::OK, &b"data"[..]));

    let a = s.get("f.txt", &[("if-match", "\"other\"")]).await;
    assert_eq!(a.status, StatusCode::PRECONDITION_FAILED);
    assert!(a.body.is_empty());
    let a = s
        .get(
            "f.txt",
            &[("if-unmodified-since", "Thu, 01 Jan 1970 00:00:00 GMT")],
        )
        .await;
    assert_eq!(a.status, StatusCode::PRECONDITION_FAILED);
    let a = s.get("f.txt", &[("if-match", &etag)]).await;
    assert_eq!(a.status, StatusCode::OK);
}

#[tokio::test]
async fn single_ranges() {
    let s = site();
    let data = hundred();
    s.write("f.txt", &data);
    let cases = [
        ("bytes=10-19", 10, 19),
        ("bytes=-5", 95, 99),
        ("bytes=90-", 90, 99),
        ("bytes=98-500", 98, 99),
    ];
    for (range, first, last) in cases {
        let a = ranged(&s, range).await;
        assert_eq!(a.status, StatusCode::PARTIAL_CONTENT, "{range}");
        assert_eq!(
            a.header(header::CONTENT_RANGE),
            format!("bytes {first}-{last}/100")
        );
        assert_eq!(
            a.header(header::CONTENT_LENGTH),
            (last - first + 1).to_string()
        );
        assert_eq!(a.header(header::CONTENT_TYPE), "text/plain");
        assert_eq!(a.body.as_ref(), &data[first..=last], "{range}");
    }
}

#[tokio::test]
async fn invalid_unsatisfiable_and_if_range() {
    let s = site();
    let data = hundred();
    s.write("f.txt", &data);
    for range in ["bytes=x-y", "pages=1-2", "bytes=5-1"] {
        let a = ranged(&s, range).await;
        assert_eq!((a.status, a.body.len()), (StatusCode::OK, 100), "{range}");
    }
    let a = ranged(&s, "bytes=100-").await;
    assert_eq!(a.status, StatusCode::RANGE_NOT_SATISFIABLE);
    assert_eq!(a.header(header::CONTENT_RANGE), "bytes */100");
    assert!(a.body.is_empty());

    let etag = s.get("f.txt", &[]).await.header(header::ETAG).to_owned();
    let a = s
        .get("f.txt", &[("range", "bytes=0-0"), ("if-range", &etag)])
        .await;
    assert_eq!(
        (a.status, a.body.as_ref()),
        (StatusCode::PARTIAL_CONTENT, &data[..1])
    );
    let a = s
        .get(
            "f.txt",
            &[("range", "bytes=0-0"), ("if-range", "\"stale\"")],
        )
        .await;
    assert_eq!((a.status, a.body.len()), (StatusCode::OK, 100));
    // Two Range headers: ambiguous, ignored.
    let a = s
        .get("f.txt", &[("range", "bytes=0-0"), ("range", "bytes=1-1")])
        .await;
    assert_eq!(a.status, StatusCode::OK);
}

#[tokio::test]
async fn multipart_exact_bytes() {
    let s = site();
    let data = hundred();
    s.write("f.txt", &data);
    let a = ranged(&s, "bytes=0-2, -3").await;
    assert_eq!(a.status, StatusCode::PARTIAL_CONTENT);
    let ct = a.header(header::CONTENT_TYPE);
    let boundary = ct
        .strip_prefix("multipart/byteranges; boundary=")
        .expect("multipart type");
    let mut want = Vec::new();
    for (first, last) in [(0usize, 2usize), (97, 99)] {
        want.extend_from_slice(
            format!(
                "--{boundary}\r\nContent-Type: text/plain\r\nContent-Range: bytes {first}-{last}/100\r\n\r\n"
            )
            .as_bytes(),
        );
        want.extend_from_slice(&data[first..=last]);
        want.extend_from_slice(b"\r\n");
    }
    want.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    assert_eq!(a.body.as_ref(), &want[..]);
    assert_eq!(a.header(header::CONTENT_LENGTH), want.len().to_string());
    assert!(!a.headers.contains_key(header::CONTENT_RANGE));
}

#[tokio::test]
async fn large_file_streams_whole_and_ranged() {
    let s = site();
    let data: Vec<u8> = (0..300_000u32).map(|i| (i % 253) as u8).collect();
    s.write("big.bin", &data);
    let a = s.get("big.bin", &[]).await;
    assert_eq!(a.header(header::CONTENT_LENGTH), "300000");
    assert!(a.body == data);
    let a = s.get("big.bin", &[("range", "bytes=65000-200000")]).await;
    assert_eq!(a.status, StatusCode::PARTIAL_CONTENT);
    assert!(a.body == data[65_000..=200_000]);
}

#[tokio::test]
async fn precompressed_siblings() {
    let s = site();
    s.write("app.js", b"plain");
    s.write("app.js.br", b"BR");
    s.write("app.js.gz", b"GZIP");
    let plain = s.get("app.js", &[]).await;
    assert_eq!(plain.body.as_ref(), b"plain");
    assert!(!plain.headers.contains_key(header::VARY));
    assert!(!plain.headers.contains_key(header::CONTENT_ENCODING));

    let cases = [
        ("gzip, deflate, br", "BR", "br"),
        ("gzip, br;q=0", "GZIP", "gzip"),
        ("br;q=0.5, gzip;q=0.9", "GZIP", "gzip"),
        ("*", "BR", "br"),
    ];
    for (accept, body, coding) in cases {
        let a = s.get("app.js", &[("accept-encoding", accept)]).await;
        assert_eq!(a.body.as_ref(), body.as_bytes(), "{accept}");
        assert_eq!(a.header(header::CONTENT_ENCODING), coding, "{accept}");
        assert_eq!(
            a.header(header::CONTENT_TYPE),
            plain.header(header::CONTENT_TYPE)
        );
        assert_eq!(a.header(header::VARY), "Accept-Encoding");
        assert!(a.header(header::ETAG).ends_with(&format!("-{coding}\"")));
        assert_ne!(a.header(header::ETAG), plain.header(header::ETAG));
    }
    let a = s
        .get("app.js", &[("accept-encoding", "br;q=0, gzip;q=0")])
        .await;
    assert_eq!(a.body.as_ref(), b"plain");

    // Ranges apply to the representation served.
    let a = s
        .get(
            "app.js",
            &[("accept-encoding", "gzip"), ("range", "bytes=1-2")],
        )
        .await;
    assert_eq!(
        (a.status, a.body.as_ref()),
        (StatusCode::PARTIAL_CONTENT, &b"ZI"[..])
    );
    assert_eq!(a.header(header::CONTENT_RANGE), "bytes 1-2/4");

    // Only gz present, client wants br only: identity; only the accepted coding was looked for.
    s.write("b.css", b"css");
    s.write("b.css.gz", b"gz");
    let a = s.get("b.css", &[("accept-encoding", "br")]).await;
    assert_eq!(a.body.as_ref(), b"css");
    assert!(!a.headers.contains_key(header::VARY));

    // HEAD of a sibling: its headers, no body.
    let out = s
        .run(Method::HEAD, "app.js", &[("accept-encoding", "br")])
        .await;
    let a = answer(out).await;
    assert_eq!((a.header(header::CONTENT_LENGTH), a.body.len()), ("2", 0));
}

/// Hostile or broken request headers are answered, never a panic, and never a wrong partial body.
#[tokio::test]
async fn hostile_headers() {
    let s = site();
    s.write("f.txt", &hundred());
    let long_list = format!("bytes={}", vec!["1-2"; 10_000].join(","));
    let junk = [
        ("range", "bytes=18446744073709551615-18446744073709551615"),
        ("range", "bytes=-18446744073709551616"),
        ("range", "bytes=0-0,-0,,,,"),
        ("range", long_list.as_str()),
        ("if-none-match", "W/"),
        ("if-none-match", "\""),
        ("if-match", ",,,,"),
        ("if-range", "W/\"x"),
        ("if-modified-since", "Mon, 99 Foo 99999 99:99:99 GMT"),
        ("accept-encoding", ";;;q=;,,br;q=0.5;q=1"),
    ];
    for (name, value) in junk {
        let a = s.get("f.txt", &[(name, value)]).await;
        // An If-Match list naming nothing fails, as it should.
        let ok = [
            StatusCode::OK,
            StatusCode::PARTIAL_CONTENT,
            StatusCode::RANGE_NOT_SATISFIABLE,
            StatusCode::PRECONDITION_FAILED,
        ];
        assert!(
            ok.contains(&a.status),
            "{name}: {value:.40} => {}",
            a.status
        );
        let length: usize = a.header(header::CONTENT_LENGTH).parse().expect("length");
        assert_eq!(length, a.body.len(), "{name}: {value:.40}");
    }
    let a = s.get("f.txt", &[("range", long_list.as_str())]).await;
    assert_eq!(a.status, StatusCode::OK);
}
