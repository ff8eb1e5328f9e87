//! A route step's `match` object: the conditions a request must all meet for the step's action to run.
//!
//! Each condition compiles to one [`Test`]; [`Match::matches`] runs them in order of cost (fixed strings and
//! addresses before header and query scans) and stops at the first failure. An absent or empty `match`
//! matches every request.

use serde_json::Value;

use super::address::AddressSet;
use super::fields::decode_query;
use super::pattern::{Encoding, PatternSet};
use super::table::{Kind, Table};
use crate::config::walk::{known_keys, object, string};
use crate::config::{ConfigError, JsonPath};
use crate::request::RequestInfo;

const KEYS: &[&str] = &[
    "arguments",
    "cookies",
    "destination",
    "headers",
    "host",
    "method",
    "query",
    "scheme",
    "source",
    "uri",
];

/// A compiled `match` object.
#[derive(Debug, Default)]
pub struct Match {
    tests: Vec<Test>,
}

#[derive(Debug)]
enum Test {
    /// `true` for `https`.
    Scheme(bool),
    Method(PatternSet),
    Host(PatternSet),
    Source(AddressSet),
    Destination(AddressSet),
    Uri(PatternSet),
    Query(PatternSet),
    Table(Table),
}

impl Test {
    /// Evaluation order: cheapest first. All tests are pure, so order changes only speed.
    fn rank(&self) -> u8 {
        match self {
            Test::Scheme(_) => 0,
            Test::Method(_) => 1,
            Test::Host(_) => 2,
            Test::Source(_) | Test::Destination(_) => 3,
            Test::Uri(_) => 4,
            Test::Query(_) => 5,
            Test::Table(_) => 6,
        }
    }
}

impl Match {
    /// Compiles a `match` object; `path` names the object itself (`routes/0/match`).
    pub fn compile(v: &Value, path: &JsonPath) -> Result<Self, ConfigError> {
        let map = object(v, path)?;
        known_keys(map, KEYS, path)?;
        let mut tests = map
            .iter()
            .map(|(key, value)| compile_test(key, value, &path.key(key)))
            .collect::<Result<Vec<_>, _>>()?;
        tests.sort_by_key(Test::rank);
        Ok(Match { tests })
    }

    /// A `Match` with no conditions, as a step without `match` has.
    #[cfg(test)]
    pub fn always() -> Self {
        Match::default()
    }

    pub fn matches(&self, req: &RequestInfo) -> bool {
        self.tests.iter().all(|t| t.matches(req))
    }
}

fn compile_test(key: &str, v: &Value, path: &JsonPath) -> Result<Test, ConfigError> {
    Ok(match key {
        "scheme" => Test::Scheme(compile_scheme(v, path)?),
        "method" => Test::Method(PatternSet::compile(v, path, true)?),
        "host" => Test::Host(PatternSet::compile(v, path, true)?),
        "uri" => Test::Uri(PatternSet::compile_encoded(v, path, false, Encoding::Uri)?),
        "query" => Test::Query(PatternSet::compile_encoded(
            v,
            path,
            false,
            Encoding::UriPlus,
        )?),
        "source" => Test::Source(AddressSet::compile(v, path)?),
        "destination" => Test::Destination(AddressSet::compile(v, path)?),
        "headers" => Test::Table(Table::compile(v, path, Kind::Headers)?),
        "arguments" => Test::Table(Table::compile(v, path, Kind::Arguments)?),
        "cookies" => Test::Table(Table::compile(v, path, Kind::Cookies)?),
        // `known_keys` has already rejected anything else.
        other => return Err(path.error(format!("unknown condition {other:?}"))),
    })
}

/// Unit accepts exactly one string, `http` or `https` (any case), for `scheme`.
fn compile_scheme(v: &Value, path: &JsonPath) -> Result<bool, ConfigError> {
    let s = string(v, path)?;
    if s.eq_ignore_ascii_case("https") {
        Ok(true)
    } else if s.eq_ignore_ascii_case("http") {
        Ok(false)
    } else {
        Err(path.error("must be either \"http\" or \"https\""))
    }
}

impl Test {
    fn matches(&self, req: &RequestInfo) -> bool {
        match self {
            Test::Scheme(https) => (req.scheme == "https") == *https,
            Test::Method(p) => p.matches(req.method.as_str()),
            Test::Host(p) => p.matches(normalized_host(&req.host)),
            Test::Source(a) => a.matches(req.remote),
            Test::Destination(a) => a.matches(req.local),
            Test::Uri(p) => p.matches(&req.path),
            Test::Query(p) => p.matches_bytes(&decode_query(req.query.as_bytes())),
            Test::Table(t) => t.matches(req),
        }
    }
}

/// Unit's `host` also loses a trailing period (`example.com.`); `RequestInfo` has already dropped the port
/// and lowercased it.
pub(crate) fn normalized_host(host: &str) -> &str {
    host.strip_suffix('.').unwrap_or(host)
}

#[cfg(test)]
#[path = "matcher_tests.rs"]
mod tests;
