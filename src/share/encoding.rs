//! Content codings for precompressed siblings: which of `<file>.br` and `<file>.gz` the client's
//! `Accept-Encoding` allows, best first.
//!
//! A coding is acceptable when its own entry (or, failing that, `*`) has q > 0; `x-gzip` counts as `gzip`.
//! Higher q wins; on a tie `br` comes first (smaller files). A malformed element is skipped and a malformed q
//! counts as 0: a broken header never gets a compressed body the client may not decode.

use http::{HeaderMap, header};

/// A coding we may find precompressed next to a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Coding {
    Br,
    Gzip,
}

impl Coding {
    /// The `Content-Encoding` token, also used to make the sibling's ETag distinct.
    pub fn token(self) -> &'static str {
        match self {
            Coding::Br => "br",
            Coding::Gzip => "gzip",
        }
    }

    /// What is appended to the file name to find the sibling.
    pub fn suffix(self) -> &'static str {
        match self {
            Coding::Br => ".br",
            Coding::Gzip => ".gz",
        }
    }
}

/// The codings the client accepts, best first. Empty when there is no `Accept-Encoding`.
pub fn accepted(headers: &HeaderMap) -> Vec<Coding> {
    let mut br = None;
    let mut gzip = None;
    let mut star = None;
    let elements = headers
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','));
    for element in elements {
        let mut parts = element.split(';');
        let name = parts.next().unwrap_or("").trim();
        let q = quality(parts);
        let slot = match name.to_ascii_lowercase().as_str() {
            "br" => &mut br,
            "gzip" | "x-gzip" => &mut gzip,
            "*" => &mut star,
            _ => continue,
        };
        // Listed twice: the more generous entry counts.
        *slot = Some(slot.map_or(q, |old: u16| old.max(q)));
    }
    let mut ranked: Vec<(Coding, u16)> = [(Coding::Br, br), (Coding::Gzip, gzip)]
        .into_iter()
        .filter_map(|(c, q)| Some((c, q.or(star)?)))
        .filter(|&(_, q)| q > 0)
        .collect();
    // Stable: equal q keeps br before gzip.
    ranked.sort_by_key(|&(_, q)| std::cmp::Reverse(q));
    ranked.into_iter().map(|(c, _)| c).collect()
}

/// The `q` parameter in thousandths; 1000 when absent, 0 when malformed.
fn quality<'a>(params: impl Iterator<Item = &'a str>) -> u16 {
    for param in params {
        let Some((key, value)) = param.split_once('=') else {
            continue;
        };
        if key.trim().eq_ignore_ascii_case("q") {
            return parse_q(value.trim()).unwrap_or(0);
        }
    }
    1000
}

/// `qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] )`
fn parse_q(s: &str) -> Option<u16> {
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    if frac.len() > 3 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let thousandths = frac
        .bytes()
        .chain(std::iter::repeat(b'0'))
        .take(3)
        .fold(0u16, |n, d| n * 10 + u16::from(d - b'0'));
    match int {
        "0" => Some(thousandths),
        "1" if thousandths == 0 => Some(1000),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn acc(values: &[&str]) -> Vec<Coding> {
        let mut h = HeaderMap::new();
        for v in values {
            h.append(
                header::ACCEPT_ENCODING,
                HeaderValue::from_str(v).expect("test header"),
            );
        }
        accepted(&h)
    }

    #[test]
    fn ranking() {
        use Coding::*;
        assert_eq!(acc(&[]), vec![]);
        assert_eq!(acc(&["gzip, deflate, br"]), vec![Br, Gzip]);
        assert_eq!(acc(&["gzip"]), vec![Gzip]);
        assert_eq!(acc(&["br;q=0.5, gzip;q=0.8"]), vec![Gzip, Br]);
        assert_eq!(acc(&["BR ; Q=1.0", "X-Gzip"]), vec![Br, Gzip]);
        assert_eq!(acc(&["identity"]), vec![]);
    }

    #[test]
    fn zero_and_star() {
        use Coding::*;
        assert_eq!(acc(&["br;q=0, gzip"]), vec![Gzip]);
        assert_eq!(acc(&["br;q=0.000"]), vec![]);
        assert_eq!(acc(&["*"]), vec![Br, Gzip]);
        assert_eq!(acc(&["*;q=0.1, br;q=0"]), vec![Gzip]);
        assert_eq!(acc(&["*;q=0"]), vec![]);
    }

    #[test]
    fn malformed_q_is_zero() {
        for bad in [
            "br;q=2",
            "br;q=1.5",
            "br;q=0.1234",
            "br;q=abc",
            "br;q=",
            "br;q=-1",
        ] {
            assert_eq!(acc(&[bad]), vec![], "{bad}");
        }
        assert_eq!(parse_q("0.5"), Some(500));
        assert_eq!(parse_q("0.05"), Some(50));
        assert_eq!(parse_q("1."), Some(1000));
        assert_eq!(parse_q("0"), Some(0));
    }
}
