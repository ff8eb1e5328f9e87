//! The `headers`, `arguments` and `cookies` conditions: objects of name → pattern, or arrays of such objects.
//!
//! As in Unit, an object matches when all its members match and an array when any of its objects does. A
//! member matches when the request carries the field at least once and every occurrence matches the
//! pattern; an absent field fails the member even if its pattern is a negation (`"!x"` means "present and
//! not x").

use http::HeaderName;
use serde_json::{Map, Value};

use super::fields;
use super::pattern::{Encoding, PatternSet};
use crate::config::walk::type_name;
use crate::config::{ConfigError, JsonPath};
use crate::request::RequestInfo;

/// Which request fields a table reads, and how its names and patterns are compiled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Names and values compared case-insensitively, taken literally.
    Headers,
    /// Names and values case-sensitive, percent-decoded with `+` as a space.
    Arguments,
    /// Names and values case-sensitive, taken literally.
    Cookies,
}

#[derive(Debug)]
pub struct Table {
    kind: Kind,
    /// Any of these sets; each set is all of its rules.
    sets: Vec<Vec<Rule>>,
}

#[derive(Debug)]
struct Rule {
    name: Name,
    pattern: PatternSet,
}

#[derive(Debug)]
enum Name {
    Header(HeaderName),
    Bytes(Vec<u8>),
}

impl Table {
    pub fn compile(v: &Value, path: &JsonPath, kind: Kind) -> Result<Self, ConfigError> {
        let sets = match v {
            Value::Object(map) => vec![compile_set(map, path, kind)?],
            // An empty array is taken, as Unit takes it: no set to fail, so it matches (see `matches`).
            Value::Array(items) => items
                .iter()
                .enumerate()
                .map(|(i, item)| {
                    let p = path.index(i);
                    let map = item.as_object().ok_or_else(|| {
                        p.error(format!("must be an object, not {}", type_name(item)))
                    })?;
                    compile_set(map, &p, kind)
                })
                .collect::<Result<_, _>>()?,
            other => {
                return Err(path.error(format!(
                    "must be an object or an array of objects, not {}",
                    type_name(other)
                )));
            }
        };
        Ok(Table { kind, sets })
    }

    pub fn matches(&self, req: &RequestInfo) -> bool {
        self.sets.is_empty()
            || self
                .sets
                .iter()
                .any(|set| set.iter().all(|rule| rule.matches(self.kind, req)))
    }
}

fn compile_set(
    map: &Map<String, Value>,
    path: &JsonPath,
    kind: Kind,
) -> Result<Vec<Rule>, ConfigError> {
    map.iter()
        .map(|(name, v)| {
            let p = path.key(name);
            Ok(Rule {
                name: compile_name(name, &p, kind)?,
                pattern: match kind {
                    Kind::Headers => PatternSet::compile(v, &p, true)?,
                    Kind::Arguments => {
                        PatternSet::compile_encoded(v, &p, false, Encoding::UriPlus)?
                    }
                    Kind::Cookies => PatternSet::compile(v, &p, false)?,
                },
            })
        })
        .collect()
}

fn compile_name(name: &str, path: &JsonPath, kind: Kind) -> Result<Name, ConfigError> {
    if name.is_empty() {
        return Err(path.error("the name must not be empty"));
    }
    match kind {
        Kind::Headers => HeaderName::from_bytes(name.as_bytes())
            .map(Name::Header)
            .map_err(|_| path.error("not a valid header field name")),
        Kind::Arguments => {
            if !well_encoded(name) {
                return Err(path.error("the argument name has an invalid percent-encoding"));
            }
            Ok(Name::Bytes(
                fields::decode_query(name.as_bytes()).into_owned(),
            ))
        }
        Kind::Cookies => Ok(Name::Bytes(name.as_bytes().to_vec())),
    }
}

/// Every `%` is followed by two hex digits.
fn well_encoded(s: &str) -> bool {
    let b = s.as_bytes();
    b.iter().enumerate().all(|(i, &c)| {
        c != b'%'
            || (b.get(i + 1).is_some_and(u8::is_ascii_hexdigit)
                && b.get(i + 2).is_some_and(u8::is_ascii_hexdigit))
    })
}

impl Rule {
    fn matches(&self, kind: Kind, req: &RequestInfo) -> bool {
        match (&self.name, kind) {
            (Name::Header(name), _) => all_present(
                req.headers.get_all(name).iter().map(|v| v.as_bytes()),
                &self.pattern,
            ),
            (Name::Bytes(name), Kind::Arguments) => all_present(
                fields::arguments(&req.query)
                    .filter(|(n, _)| **n == **name)
                    .map(|(_, v)| v),
                &self.pattern,
            ),
            (Name::Bytes(name), _) => all_present(
                fields::cookies(&req.headers)
                    .filter(|(n, _)| *n == name.as_slice())
                    .map(|(_, v)| v),
                &self.pattern,
            ),
        }
    }
}

/// True when there is at least one value and every value matches.
fn all_present<V: AsRef<[u8]>>(values: impl Iterator<Item = V>, pattern: &PatternSet) -> bool {
    let mut seen = false;
    for v in values {
        if !pattern.matches_bytes(v.as_ref()) {
            return false;
        }
        seen = true;
    }
    seen
}
