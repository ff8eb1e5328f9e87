//! A response head's fields kept as the server sent them: the head's bytes and where each field lies in
//! them, names in their original spelling. A proxy passes an answer's fields on with a few of them dropped;
//! building a header map for that (every name matched against the standard ones and hashed, every value
//! checked and sliced) only to write the same bytes out again was a tenth of a proxied request's work.
//! `httparse` has checked the names and values against the same rules as `http`'s types, so a
//! [`HeaderMap`] can still be made of them where one is needed.

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue};

/// The fields of a parsed head; those dropped stay in the bytes but are no longer seen.
#[derive(Clone, Debug, Default)]
pub struct Fields {
    head: Bytes,
    spans: Vec<Span>,
    /// The [`Known`] names among the fields not dropped, one bit each: most lookups are of these, and most
    /// find nothing.
    present: u16,
}

/// The names a proxy and a connection look for, recognised once when the head is parsed so that a lookup
/// compares a byte rather than a name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Known {
    Other,
    Connection,
    ContentLength,
    TransferEncoding,
    Date,
    Server,
    KeepAlive,
    ProxyConnection,
    Te,
    Trailer,
    Upgrade,
}

impl Known {
    /// The kind of the name `name` (a field name: token characters only), in any case.
    pub fn of(name: &[u8]) -> Known {
        let is = |s: &str| eq_lower(name, s.as_bytes());
        match name.len() {
            2 if is("te") => Known::Te,
            4 if is("date") => Known::Date,
            6 if is("server") => Known::Server,
            7 if is("trailer") => Known::Trailer,
            7 if is("upgrade") => Known::Upgrade,
            10 if is("connection") => Known::Connection,
            10 if is("keep-alive") => Known::KeepAlive,
            14 if is("content-length") => Known::ContentLength,
            16 if is("proxy-connection") => Known::ProxyConnection,
            17 if is("transfer-encoding") => Known::TransferEncoding,
            _ => Known::Other,
        }
    }

    /// Whether a field of this name concerns one connection only (RFC 9110 §7.6.1), as `Connection` and the
    /// fields a proxy never passes on.
    pub fn is_hop_by_hop(self) -> bool {
        matches!(
            self,
            Known::Connection
                | Known::KeepAlive
                | Known::ProxyConnection
                | Known::Te
                | Known::Trailer
                | Known::TransferEncoding
                | Known::Upgrade
        )
    }

    fn bit(self) -> u16 {
        1 << self as u8
    }
}

/// Where one field lies in the head.
#[derive(Clone, Copy, Debug)]
pub(super) struct Span {
    pub name: u32,
    pub name_end: u32,
    pub value: u32,
    pub value_end: u32,
    pub known: Known,
    pub dropped: bool,
}

impl Span {
    /// The span of `name` and `value`, both slices of `head`.
    pub(super) fn of(head: &[u8], name: &[u8], value: &[u8]) -> Span {
        let start = head.as_ptr() as usize;
        // A head is at most `MAX_HEAD` bytes long: offsets fit in 32 bits.
        let at = |s: &[u8]| (s.as_ptr() as usize - start) as u32;
        Span {
            name: at(name),
            name_end: at(name) + name.len() as u32,
            value: at(value),
            value_end: at(value) + value.len() as u32,
            known: Known::of(name),
            dropped: false,
        }
    }
}

/// Whether the field name `name` (token characters) is `lower` (lower-case letters and `-`) in any case,
/// eight bytes at a time. Setting the 0x20 bit lower-cases a letter and leaves `-` as it is; the only other
/// byte it would turn into one of `lower`'s is CR, never in a name. (`eq_ignore_ascii_case` goes byte by
/// byte, and matching every field of every answer against the known names that way was a thousand
/// instructions a request.)
fn eq_lower(name: &[u8], lower: &[u8]) -> bool {
    if name.len() != lower.len() {
        return false;
    }
    let word = |b: &[u8]| {
        let mut w = [0u8; 8];
        w[..b.len()].copy_from_slice(b);
        u64::from_le_bytes(w)
    };
    let mask = |len: usize| u64::MAX >> (64 - 8 * len);
    name.chunks(8)
        .zip(lower.chunks(8))
        .all(|(n, l)| (word(n) | (0x2020_2020_2020_2020 & mask(n.len()))) == word(l))
}

impl Fields {
    /// The fields at `spans` of `head`, whose names and values `httparse` has checked.
    pub(super) fn new(head: Bytes, spans: Vec<Span>) -> Fields {
        let mut fields = Fields {
            head,
            spans,
            present: 0,
        };
        fields.note_present();
        fields
    }

    fn note_present(&mut self) {
        self.present = self
            .spans
            .iter()
            .filter(|s| !s.dropped)
            .fold(0, |bits, s| bits | s.known.bit());
    }

    fn name(&self, s: &Span) -> &[u8] {
        &self.head[s.name as usize..s.name_end as usize]
    }

    fn value(&self, s: &Span) -> &[u8] {
        &self.head[s.value as usize..s.value_end as usize]
    }

    /// The length of the whole head: more than enough room to write the fields again.
    pub fn byte_len(&self) -> usize {
        self.head.len()
    }

    /// The fields not dropped, in the order received: each name as spelled, and its value.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.spans
            .iter()
            .filter(|s| !s.dropped)
            .map(|s| (self.name(s), self.value(s)))
    }

    /// The values of the fields named `name` (in lower case), in order.
    pub fn get_all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a [u8]> + 'a {
        let known = Known::of(name.as_bytes());
        let absent = known != Known::Other && self.present & known.bit() == 0;
        let spans = if absent { &[][..] } else { &self.spans[..] };
        spans
            .iter()
            .filter(move |s| !s.dropped && self.is_named(s, known, name))
            .map(|s| self.value(s))
    }

    /// The first value of the field named `name` (in lower case).
    pub fn get(&self, name: &str) -> Option<&[u8]> {
        let known = Known::of(name.as_bytes());
        if known != Known::Other && self.present & known.bit() == 0 {
            return None;
        }
        let s = self
            .spans
            .iter()
            .find(|s| !s.dropped && self.is_named(s, known, name))?;
        Some(self.value(s))
    }

    pub fn contains(&self, name: &str) -> bool {
        match Known::of(name.as_bytes()) {
            Known::Other => self.get(name).is_some(),
            known => self.present & known.bit() != 0,
        }
    }

    fn is_named(&self, s: &Span, known: Known, name: &str) -> bool {
        match known {
            Known::Other => {
                s.known == Known::Other
                    && (s.name_end - s.name) as usize == name.len()
                    && self.name(s).eq_ignore_ascii_case(name.as_bytes())
            }
            known => s.known == known,
        }
    }

    /// Drops every field named `name` (in lower case).
    pub fn remove(&mut self, name: &str) {
        self.retain(|_, n| !n.eq_ignore_ascii_case(name.as_bytes()));
    }

    /// Keeps the fields for which `keep(kind, name)` holds, drops the others.
    pub fn retain(&mut self, mut keep: impl FnMut(Known, &[u8]) -> bool) {
        let head = &self.head;
        for s in self.spans.iter_mut().filter(|s| !s.dropped) {
            s.dropped = !keep(s.known, &head[s.name as usize..s.name_end as usize]);
        }
        self.note_present();
    }

    /// The fields as a header map (names in lower case, values sharing the head's bytes), for what needs
    /// one: an HTTP/2 answer, the access log.
    pub fn to_header_map(&self) -> HeaderMap {
        let mut map = HeaderMap::with_capacity(self.spans.len());
        self.append_to(&mut map, |_| false);
        map
    }

    /// Appends the fields to `map`, but for those whose name `skip` says.
    pub fn append_to(&self, map: &mut HeaderMap, skip: impl Fn(&[u8]) -> bool) {
        for s in self.spans.iter().filter(|s| !s.dropped) {
            let name = self.name(s);
            if skip(name) {
                continue;
            }
            let value = self.head.slice(s.value as usize..s.value_end as usize);
            // httparse checked both by the rules `http` applies: neither fails.
            if let (Ok(name), Ok(value)) = (
                HeaderName::from_bytes(name),
                HeaderValue::from_maybe_shared(value),
            ) {
                map.append(name, value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(pairs: &[(&str, &str)]) -> Fields {
        let text: String = pairs.iter().map(|(n, v)| format!("{n}: {v}\r\n")).collect();
        let head = Bytes::from(text);
        let mut spans = Vec::new();
        let mut at = 0;
        for (n, v) in pairs {
            let name = &head[at..at + n.len()];
            let value = &head[at + n.len() + 2..at + n.len() + 2 + v.len()];
            spans.push(Span::of(&head, name, value));
            at += n.len() + v.len() + 4;
        }
        Fields::new(head, spans)
    }

    #[test]
    fn fields_are_found_in_any_case_and_kept_as_spelled() {
        let mut f = fields(&[("X-Foo", "1"), ("date", "d"), ("x-foo", "2")]);
        assert_eq!(f.get("x-foo"), Some(&b"1"[..]));
        assert_eq!(f.get_all("x-foo").collect::<Vec<_>>(), [b"1", b"2"]);
        assert!(f.contains("date") && !f.contains("x-fo"));
        let names: Vec<_> = f.iter().map(|(n, _)| n.to_vec()).collect();
        assert_eq!(names, [&b"X-Foo"[..], b"date", b"x-foo"]);
        f.remove("x-foo");
        assert_eq!(f.iter().count(), 1);
        assert!(!f.contains("x-foo"));
        let map = f.to_header_map();
        assert_eq!(map.len(), 1);
        assert_eq!(map["date"], "d");
        f.remove("DATE");
        assert!(!f.contains("date") && f.get("date").is_none());
    }

    #[test]
    fn known_names_are_recognised_in_any_case_and_no_others() {
        for (name, known) in [
            ("TE", Known::Te),
            ("Date", Known::Date),
            ("server", Known::Server),
            ("Trailer", Known::Trailer),
            ("UPGRADE", Known::Upgrade),
            ("Connection", Known::Connection),
            ("Keep-Alive", Known::KeepAlive),
            ("content-length", Known::ContentLength),
            ("Proxy-Connection", Known::ProxyConnection),
            ("Transfer-Encoding", Known::TransferEncoding),
            ("Content-Type", Known::Other),
            ("x-date", Known::Other),
            ("tE ", Known::Other),
        ] {
            assert_eq!(Known::of(name.as_bytes()), known, "{name}");
        }
        let f = fields(&[("Content-Length", "3"), ("x-a", "1")]);
        assert_eq!(f.get("content-length"), Some(&b"3"[..]));
        assert!(eq_lower(b"Content-Length", b"content-length") && eq_lower(b"te", b"te"));
        assert!(!eq_lower(b"Content-Lengtx", b"content-length") && !eq_lower(b"x", b"te"));
        assert!(f.contains("x-a") && !f.contains("connection") && !f.contains("date"));
    }
}
