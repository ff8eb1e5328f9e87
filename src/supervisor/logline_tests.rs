//! Tests of the app log line format: splitting, prefixing, parsing back.
use super::*;
use std::time::Duration;

const T: &str = "2026-11-26T09:30:01.123Z";

/// Feeds `chunks` to a fresh splitter of instance 3's stderr, then ends the stream.
fn split(chunks: &[&[u8]]) -> String {
    let mut lines = Lines::new(3, Source::Err);
    let mut out = Vec::new();
    for chunk in chunks {
        lines.push(chunk, T, &mut out);
    }
    lines.finish(T, &mut out);
    String::from_utf8(out).unwrap()
}

/// What `rein logs --raw` prints of `log`.
fn raw(log: &[u8]) -> Vec<u8> {
    let mut raw = Raw::new(Vec::new());
    raw.write_all(log).unwrap();
    raw.finish().unwrap();
    raw.out
}

#[test]
fn timestamps_are_utc_rfc3339_with_milliseconds() {
    let t = UNIX_EPOCH + Duration::from_millis(1_795_685_401_123);
    assert_eq!(timestamp(t), "2026-11-26T09:30:01.123Z");
    assert_eq!(timestamp(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
    assert_eq!(timestamp(UNIX_EPOCH).len(), TIME_LEN);
}

#[test]
fn each_line_gets_the_prefix_of_its_stream() {
    for (source, tag) in [
        (Source::Out, "[7]"),
        (Source::Err, "[7 err]"),
        (Source::Rein, "[7 rein]"),
    ] {
        let mut lines = Lines::new(7, source);
        let mut out = Vec::new();
        lines.push(b"one\ntwo\n", T, &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            format!("{T} {tag} one\n{T} {tag} two\n")
        );
    }
}

#[test]
fn a_line_split_across_reads_is_joined() {
    assert_eq!(
        split(&[b"hel", b"lo wor", b"ld\nnext", b"\n"]),
        format!("{T} [3 err] hello world\n{T} [3 err] next\n")
    );
    // Nothing is written before the newline arrives.
    let mut lines = Lines::new(3, Source::Err);
    let mut out = Vec::new();
    lines.push(b"no newline yet", T, &mut out);
    assert!(out.is_empty() && lines.has_partial());
}

#[test]
fn empty_lines_and_crlf_are_kept() {
    assert_eq!(
        split(&[b"a\r\n\nb\r", b"\n"]),
        format!("{T} [3 err] a\r\n{T} [3 err] \n{T} [3 err] b\r\n")
    );
}

#[test]
fn the_last_line_without_a_newline_is_written_at_the_end() {
    assert_eq!(
        split(&[b"first\nlast words"]),
        format!("{T} [3 err] first\n{T} [3 err] last words\n")
    );
    assert_eq!(split(&[]), "");
}

#[test]
fn a_long_line_is_written_in_marked_pieces() {
    let long = vec![b'x'; Lines::MAX * 2 + 10];
    let mut data = long.clone();
    data.extend_from_slice(b"\nafter\n");
    // Delivered in uneven chunks, as a pipe would.
    let chunks: Vec<&[u8]> = data.chunks(5000).collect();
    let text = split(&chunks);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 4, "{}", &text[..200]);
    let piece = "x".repeat(Lines::MAX);
    assert_eq!(lines[0], format!("{T} [3 err+] {piece}"));
    assert_eq!(lines[1], format!("{T} [3 err+] {piece}"));
    assert_eq!(lines[2], format!("{T} [3 err] xxxxxxxxxx"));
    assert_eq!(lines[3], format!("{T} [3 err] after"));
    // Memory stays bounded by MAX, and --raw gives back the line whole.
    assert_eq!(raw(text.as_bytes()), data);

    // A line of exactly MAX bytes is one line, even when its newline comes in the next read.
    let exact = vec![b'y'; Lines::MAX];
    let text = split(&[&exact, b"\n"]);
    assert_eq!(text.lines().count(), 1);
    assert!(text.contains(" [3 err] y"));
}

#[test]
fn a_quiet_stream_flushes_its_partial_line_as_a_piece() {
    let mut lines = Lines::new(1, Source::Out);
    let mut out = Vec::new();
    lines.push(b"Password: ", T, &mut out);
    lines.flush(T, &mut out);
    assert!(!lines.has_partial());
    lines.push(b"ok\n", T, &mut out);
    let text = String::from_utf8(out.clone()).unwrap();
    assert_eq!(text, format!("{T} [1+] Password: \n{T} [1] ok\n"));
    assert_eq!(raw(&out), b"Password: ok\n");
}

#[test]
fn parse_takes_a_line_apart() {
    let p = parse(format!("{T} [12 err+] some text ]").as_bytes()).map(|p| {
        (
            p.time.to_owned(),
            p.instance,
            p.source,
            p.continues,
            p.text.to_vec(),
        )
    });
    assert_eq!(
        p,
        Some((T.to_owned(), 12, Source::Err, true, b"some text ]".to_vec()))
    );
    let line = format!("{T} [4 rein] started");
    let p = parse(line.as_bytes()).unwrap();
    assert_eq!(
        (p.instance, p.source, p.text),
        (4, Source::Rein, &b"started"[..])
    );
    assert_eq!(parse(format!("{T} [4] ").as_bytes()).unwrap().text, b"");
    for not_ours in [
        "plain app output".to_owned(),
        format!("{T} [x] text"),
        format!("{T} [4 warn] text"),
        format!("{T} [4]text"),
        format!("{T} [] text"),
        "2026-11-26 09:30:01.123Z [4] text".to_owned(),
        String::new(),
    ] {
        assert_eq!(parse(not_ours.as_bytes()), None, "{not_ours:?}");
    }
}

#[test]
fn raw_gives_back_the_apps_bytes_without_reins_notices() {
    let mut log = Vec::new();
    write_line(&mut log, T, 3, Source::Rein, false, &[b"started (pid 42)"]);
    let mut out = Lines::new(3, Source::Out);
    let mut err = Lines::new(3, Source::Err);
    out.push(b"hello\r\n", T, &mut log);
    err.push(b"oops\n", T, &mut log);
    log.extend_from_slice(b"an old unprefixed line\n");
    write_line(
        &mut log,
        T,
        3,
        Source::Rein,
        false,
        &[b"exited with code 0"],
    );
    assert_eq!(raw(&log), b"hello\r\noops\nan old unprefixed line\n");

    // Written to a follower in arbitrary pieces, as a file being appended to is read.
    let mut r = Raw::new(Vec::new());
    for piece in log.chunks(7) {
        r.write_all(piece).unwrap();
    }
    r.finish().unwrap();
    assert_eq!(r.out, b"hello\r\noops\nan old unprefixed line\n");
}
