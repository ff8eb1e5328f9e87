//! A response's fields when some of them are passed on as bytes: a proxied answer carries the upstream's
//! fields as the server wrote them ([`Fields`], in the response's extensions, hop-by-hop ones dropped), and
//! its header map holds only what rein sets on top (`Server`, `response_headers`, the framing fields). A name
//! in the header map hides the passed fields of that name, so setting a field is an insert in the map as for
//! any answer; removing one must reach both ([`remove`]).
//!
//! rein's HTTP/1 connection writes the passed fields straight from their bytes; what needs one header map
//! (an HTTP/2 answer, the access log) has the two merged ([`merge`]).

use http::{Extensions, HeaderMap, HeaderName, Response};

use crate::http1::Fields;

/// A response's fields, from both places.
#[derive(Clone, Copy)]
pub(crate) struct View<'a> {
    map: &'a HeaderMap,
    passed: Option<&'a Fields>,
}

impl<'a> View<'a> {
    pub fn new(map: &'a HeaderMap, passed: Option<&'a Fields>) -> Self {
        View { map, passed }
    }

    pub fn of(map: &'a HeaderMap, extensions: &'a Extensions) -> Self {
        View::new(map, extensions.get::<Fields>())
    }

    pub fn contains(&self, name: &HeaderName) -> bool {
        self.in_map(name) || self.passed.is_some_and(|p| p.contains(name.as_str()))
    }

    /// Whether the map has `name`. Beside passed fields the map holds a few of rein's: comparing each name
    /// (a standard one is a number) costs less than hashing the one looked for.
    fn in_map(&self, name: &HeaderName) -> bool {
        match self.passed {
            Some(_) => self.map.keys().any(|k| k == name),
            None => self.map.contains_key(name),
        }
    }

    /// The values of `name`: the map's if it has any, else the passed ones.
    pub fn get_all(&self, name: &'a HeaderName) -> impl Iterator<Item = &'a [u8]> + 'a {
        let in_map = self.in_map(name);
        let mapped = in_map
            .then(|| self.map.get_all(name).iter().map(|v| v.as_bytes()))
            .into_iter()
            .flatten();
        let passed = match in_map {
            true => None,
            false => self.passed.map(|p| p.get_all(name.as_str())),
        };
        mapped.chain(passed.into_iter().flatten())
    }

    pub fn get(&self, name: &'a HeaderName) -> Option<&'a [u8]> {
        self.get_all(name).next()
    }

    /// The passed fields the map does not hide, as spelled.
    pub fn passed(&self) -> impl Iterator<Item = (&'a [u8], &'a [u8])> + 'a {
        let map = self.map;
        self.passed
            .into_iter()
            .flat_map(Fields::iter)
            .filter(move |(name, _)| !hidden(map, name))
    }
}

/// Whether `map` has a field named `name` (in any case). The map of a proxied answer holds a few fields, so
/// a look at each beats hashing the name.
fn hidden(map: &HeaderMap, name: &[u8]) -> bool {
    map.keys()
        .any(|k| k.as_str().len() == name.len() && k.as_str().as_bytes().eq_ignore_ascii_case(name))
}

/// Removes every field named `name`, from the map and from the passed fields.
pub(crate) fn remove<B>(response: &mut Response<B>, name: &HeaderName) {
    response.headers_mut().remove(name);
    if let Some(passed) = response.extensions_mut().get_mut::<Fields>() {
        passed.remove(name.as_str());
    }
}

/// Moves the passed fields into the map (after its own, which hide them), for what reads one map.
pub(crate) fn merge<B>(response: &mut Response<B>) {
    if let Some(passed) = response.extensions_mut().remove::<Fields>() {
        let own = response.headers();
        let mut all = own.clone();
        passed.append_to(&mut all, |name| hidden(own, name));
        *response.headers_mut() = all;
    }
}

/// A copy of all the response's fields in one map.
pub(crate) fn merged<B>(response: &Response<B>) -> HeaderMap {
    let own = response.headers();
    let mut all = own.clone();
    if let Some(passed) = response.extensions().get::<Fields>() {
        passed.append_to(&mut all, |name| hidden(own, name));
    }
    all
}
