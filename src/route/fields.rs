//! The request's query arguments and cookies, parsed the way Unit parses them, lazily and without allocating.
//!
//! Both routing conditions and variables (`$arg_*`, `$cookie_*`) read these. They are iterators over the raw
//! request text rather than parsed maps: most requests meet no `arguments` or `cookies` condition at all, and
//! those that do usually carry a handful of short pairs, so a scan beats building a map.

use std::borrow::Cow;

use http::HeaderMap;

use super::pattern::hex;

/// Percent-decodes a query component, `+` as a space. A malformed `%` escape is kept as is, as Unit does
/// for request data (patterns, in contrast, must be well formed).
pub fn decode_query(raw: &[u8]) -> Cow<'_, [u8]> {
    if !raw.iter().any(|&b| b == b'%' || b == b'+') {
        return Cow::Borrowed(raw);
    }
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        let b = raw[i];
        let escaped = match (b, raw.get(i + 1), raw.get(i + 2)) {
            (b'%', Some(&h), Some(&l)) => hex(h).zip(hex(l)).map(|(h, l)| h << 4 | l),
            _ => None,
        };
        match escaped {
            Some(c) => {
                out.push(c);
                i += 3;
            }
            None => {
                out.push(if b == b'+' { b' ' } else { b });
                i += 1;
            }
        }
    }
    Cow::Owned(out)
}

/// The query's `name=value` pairs in order, each decoded; a pair without `=` has an empty value and empty
/// pairs (`a=1&&b=2`) are skipped. Splitting happens before decoding, so `%26` and `%3D` stay data.
pub fn arguments(query: &str) -> impl Iterator<Item = (Cow<'_, [u8]>, Cow<'_, [u8]>)> {
    query
        .as_bytes()
        .split(|&b| b == b'&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| match pair.iter().position(|&b| b == b'=') {
            Some(eq) => (decode_query(&pair[..eq]), decode_query(&pair[eq + 1..])),
            None => (decode_query(pair), Cow::Borrowed(&[][..])),
        })
}

/// The `name=value` cookies of every `Cookie` header field, in order; pieces without `=` are ignored. As in
/// Unit, a name loses its leading spaces and a value its trailing ones, and nothing is decoded.
pub fn cookies(headers: &HeaderMap) -> impl Iterator<Item = (&[u8], &[u8])> {
    headers
        .get_all(http::header::COOKIE)
        .iter()
        .flat_map(|v| v.as_bytes().split(|&b| b == b';'))
        .filter_map(|piece| {
            let eq = piece.iter().position(|&b| b == b'=')?;
            Some((trim_start(&piece[..eq]), trim_end(&piece[eq + 1..])))
        })
}

fn trim_start(mut s: &[u8]) -> &[u8] {
    while let [b' ', rest @ ..] = s {
        s = rest;
    }
    s
}

fn trim_end(mut s: &[u8]) -> &[u8] {
    while let [rest @ .., b' '] = s {
        s = rest;
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(q: &str) -> Vec<(String, String)> {
        arguments(q)
            .map(|(n, v)| {
                (
                    String::from_utf8_lossy(&n).into_owned(),
                    String::from_utf8_lossy(&v).into_owned(),
                )
            })
            .collect()
    }

    #[test]
    fn query_decoding() {
        assert_eq!(&*decode_query(b"a+b%20c"), b"a b c");
        assert_eq!(&*decode_query(b"100%"), b"100%");
        assert_eq!(&*decode_query(b"%zz%4"), b"%zz%4");
        assert!(matches!(decode_query(b"plain"), Cow::Borrowed(_)));
    }

    #[test]
    fn argument_pairs() {
        assert_eq!(
            args("a=1&&b=x+y&flag&c=%3D=&=v"),
            vec![
                ("a".into(), "1".into()),
                ("b".into(), "x y".into()),
                ("flag".into(), "".into()),
                ("c".into(), "==".into()),
                ("".into(), "v".into()),
            ]
        );
        assert!(args("").is_empty());
        assert_eq!(args("na%6De=v%26w"), vec![("name".into(), "v&w".into())]);
    }

    #[test]
    fn cookie_pairs() {
        let mut h = HeaderMap::new();
        h.append("cookie", "a=1; b = 2 ;junk; c=x=y".parse().expect("value"));
        h.append("cookie", "d=4".parse().expect("value"));
        let got: Vec<_> = cookies(&h).collect();
        assert_eq!(
            got,
            vec![
                (&b"a"[..], &b"1"[..]),
                (&b"b "[..], &b" 2"[..]),
                (&b"c"[..], &b"x=y"[..]),
                (&b"d"[..], &b"4"[..]),
            ]
        );
    }
}
