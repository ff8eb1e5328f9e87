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
}

/// Where one field lies in the head.
#[derive(Clone, Copy, Debug)]
pub(super) struct Span {
    pub name: u32,
    pub name_end: u32,
    pub value: u32,
    pub value_end: u32,
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
            dropped: false,
        }
    }
}

impl Fields {
    /// The fields at `spans` of `head`, whose names and values `httparse` has checked.
    pub(super) fn new(head: Bytes, spans: Vec<Span>) -> Fields {
        Fields { head, spans }
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
        self.spans
            .iter()
            .filter(move |s| !s.dropped && self.is_named(s, name))
            .map(|s| self.value(s))
    }

    /// The first value of the field named `name` (in lower case).
    pub fn get(&self, name: &str) -> Option<&[u8]> {
        let s = self
            .spans
            .iter()
            .find(|s| !s.dropped && self.is_named(s, name))?;
        Some(self.value(s))
    }

    pub fn contains(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    fn is_named(&self, s: &Span, name: &str) -> bool {
        (s.name_end - s.name) as usize == name.len()
            && self.name(s).eq_ignore_ascii_case(name.as_bytes())
    }

    /// Drops every field named `name` (in lower case).
    pub fn remove(&mut self, name: &str) {
        self.retain(|n, _| !n.eq_ignore_ascii_case(name.as_bytes()));
    }

    /// Keeps the fields for which `keep(name, value)` holds, drops the others.
    pub fn retain(&mut self, mut keep: impl FnMut(&[u8], &[u8]) -> bool) {
        let head = &self.head;
        for s in self.spans.iter_mut().filter(|s| !s.dropped) {
            let name = &head[s.name as usize..s.name_end as usize];
            let value = &head[s.value as usize..s.value_end as usize];
            s.dropped = !keep(name, value);
        }
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
    }
}
