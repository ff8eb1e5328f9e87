//! Unit's string patterns: exact text, `*` wildcards, `~` regular expressions, `!` negation, and arrays of them.
//!
//! A value matches a [`PatternSet`] when it matches at least one positive pattern (if there are any) and no
//! negated one, as Unit's "match resolution" defines. Everything is compiled once; matching works on bytes
//! without allocating, because query strings and header values need not be UTF-8 once decoded.

use regex::bytes::{Regex, RegexBuilder};
use serde_json::Value;

use crate::config::walk::{string, type_name};
use crate::config::{ConfigError, JsonPath};

/// How the text of a non-regex pattern is percent-decoded before comparing, per Unit: `uri` patterns are
/// URI-decoded, `query` and `arguments` patterns also turn `+` into a space, the rest are taken literally.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    None,
    Uri,
    UriPlus,
}

/// A compiled "string or array of strings" pattern.
#[derive(Debug)]
pub struct PatternSet {
    positive: Vec<Pattern>,
    negative: Vec<Pattern>,
}

#[derive(Debug)]
enum Pattern {
    Wildcard(Wildcard),
    Regex(Regex),
}

/// A pattern split at its `*`s: the value must start with `prefix`, end with `suffix`, and contain the
/// `middle` pieces in order between them. Without any `*` it is an exact comparison against `prefix`.
#[derive(Debug)]
struct Wildcard {
    exact: bool,
    prefix: Vec<u8>,
    suffix: Vec<u8>,
    middle: Vec<Vec<u8>>,
    min_len: usize,
    case_insensitive: bool,
}

impl PatternSet {
    /// Compiles a pattern taken literally (no percent-decoding), as `host`, `method` and `headers` use.
    pub fn compile(
        v: &Value,
        path: &JsonPath,
        case_insensitive: bool,
    ) -> Result<Self, ConfigError> {
        Self::compile_encoded(v, path, case_insensitive, Encoding::None)
    }

    /// Compiles a pattern whose non-regex text is percent-decoded as `encoding` says.
    pub fn compile_encoded(
        v: &Value,
        path: &JsonPath,
        case_insensitive: bool,
        encoding: Encoding,
    ) -> Result<Self, ConfigError> {
        let mut set = PatternSet {
            positive: Vec::new(),
            negative: Vec::new(),
        };
        match v {
            Value::String(s) => set.add(s, path, case_insensitive, encoding)?,
            // As in Unit, an empty array holds no pattern to fail: it matches any value.
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    let p = path.index(i);
                    set.add(string(item, &p)?, &p, case_insensitive, encoding)?;
                }
            }
            other => {
                return Err(path.error(format!(
                    "must be a pattern string or an array of them, not {}",
                    type_name(other)
                )));
            }
        }
        Ok(set)
    }

    fn add(
        &mut self,
        text: &str,
        path: &JsonPath,
        case_insensitive: bool,
        encoding: Encoding,
    ) -> Result<(), ConfigError> {
        let (negated, body) = match text.strip_prefix('!') {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        let pattern = match body.strip_prefix('~') {
            Some(re) => Pattern::Regex(compile_regex(re, path, case_insensitive)?),
            None => Pattern::Wildcard(Wildcard::compile(body, path, case_insensitive, encoding)?),
        };
        if negated {
            self.negative.push(pattern);
        } else {
            self.positive.push(pattern);
        }
        Ok(())
    }

    pub fn matches(&self, value: &str) -> bool {
        self.matches_bytes(value.as_bytes())
    }

    /// Negations are tried first: any hit rejects. Then at least one positive must hit, unless there are none.
    pub fn matches_bytes(&self, value: &[u8]) -> bool {
        if self.negative.iter().any(|p| p.matches(value)) {
            return false;
        }
        self.positive.is_empty() || self.positive.iter().any(|p| p.matches(value))
    }
}

/// Unit's regexes are PCRE run over bytes without UTF mode, so Unicode classes are off here too; an
/// unanchored search, as PCRE's match is.
fn compile_regex(re: &str, path: &JsonPath, case_insensitive: bool) -> Result<Regex, ConfigError> {
    RegexBuilder::new(re)
        .unicode(false)
        .case_insensitive(case_insensitive)
        .build()
        .map_err(|e| path.error(format!("invalid regular expression: {e}")))
}

impl Pattern {
    fn matches(&self, value: &[u8]) -> bool {
        match self {
            Pattern::Wildcard(w) => w.matches(value),
            Pattern::Regex(re) => re.is_match(value),
        }
    }
}

impl Wildcard {
    fn compile(
        text: &str,
        path: &JsonPath,
        case_insensitive: bool,
        encoding: Encoding,
    ) -> Result<Self, ConfigError> {
        if text.contains("**") {
            return Err(path.error("a pattern must not contain a double \"**\""));
        }
        // Split before decoding, so an encoded `%2A` stays a literal asterisk.
        let mut pieces = Vec::new();
        for raw in text.split('*') {
            let mut piece = decode(raw, encoding)
                .ok_or_else(|| path.error("the pattern has an invalid percent-encoding"))?;
            if case_insensitive {
                piece.make_ascii_lowercase();
            }
            pieces.push(piece);
        }
        let min_len = pieces.iter().map(Vec::len).sum();
        let exact = pieces.len() == 1;
        let suffix = if exact {
            Vec::new()
        } else {
            pieces.pop().unwrap_or_default()
        };
        let mut rest = pieces.into_iter();
        let prefix = rest.next().unwrap_or_default();
        Ok(Wildcard {
            exact,
            prefix,
            suffix,
            middle: rest.filter(|p| !p.is_empty()).collect(),
            min_len,
            case_insensitive,
        })
    }

    fn matches(&self, value: &[u8]) -> bool {
        if value.len() < self.min_len {
            return false;
        }
        if self.exact {
            return value.len() == self.prefix.len() && self.eq(value, &self.prefix);
        }
        let end = value.len() - self.suffix.len();
        if !self.eq(&value[..self.prefix.len()], &self.prefix)
            || !self.eq(&value[end..], &self.suffix)
        {
            return false;
        }
        // min_len guarantees prefix and suffix do not overlap; the middle pieces go leftmost-first.
        let mut rest = &value[self.prefix.len()..end];
        for piece in &self.middle {
            match self.find(rest, piece) {
                Some(at) => rest = &rest[at + piece.len()..],
                None => return false,
            }
        }
        true
    }

    /// `b` is already lowercased when case-insensitive.
    fn eq(&self, a: &[u8], b: &[u8]) -> bool {
        if self.case_insensitive {
            a.eq_ignore_ascii_case(b)
        } else {
            a == b
        }
    }

    fn find(&self, hay: &[u8], needle: &[u8]) -> Option<usize> {
        hay.windows(needle.len()).position(|w| self.eq(w, needle))
    }
}

/// Percent-decodes `raw` as Unit does for patterns; `None` on a malformed `%` escape.
fn decode(raw: &str, encoding: Encoding) -> Option<Vec<u8>> {
    let bytes = raw.as_bytes();
    if encoding == Encoding::None {
        return Some(bytes.to_vec());
    }
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hi = hex(*bytes.get(i + 1)?)?;
                let lo = hex(*bytes.get(i + 2)?)?;
                out.push(hi << 4 | lo);
                i += 3;
                continue;
            }
            b'+' if encoding == Encoding::UriPlus => out.push(b' '),
            b => out.push(b),
        }
        i += 1;
    }
    Some(out)
}

pub(crate) fn hex(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
#[path = "pattern_tests.rs"]
mod tests;
