//! Unit's variables: strings such as `/www/$host${uri}` whose `$name` references expand per request.
//!
//! A [`Template`] is parsed once, when the configuration is compiled: unknown variables are errors then, not
//! surprises at request time. A name runs over letters and `_` as in Unit (`$uri_x` is the variable `uri_x`,
//! so write `${uri}_x`); inside braces digits and `-` are also allowed (`${arg_q1}`). Field variables
//! (`$header_*`, `$arg_*`, `$cookie_*`, `$response_header_*`) expand to nothing when the field is absent,
//! or to `-` through [`Template::render_log_into`], as Unit's access log does.

use std::borrow::Cow;
use std::time::{Duration, SystemTime};

use http::{HeaderMap, HeaderName};

use crate::config::{ConfigError, JsonPath};
use crate::request::RequestInfo;
use crate::route::fields;
use crate::route::matcher::normalized_host;

mod format;

pub(crate) use format::{civil_from_days, json_string_into};
use format::{clf_time, log_escape_into, request_id, seconds_millis, version_name};

/// What variables are evaluated against: the request, and the response once there is one.
#[derive(Debug, Clone, Copy)]
pub struct VarContext<'a> {
    pub req: &'a RequestInfo,
    pub response: Option<&'a ResponseInfo>,
}

/// The response-side facts that `$status`, `$body_bytes_sent`, `$response_header_*`, `$request_time` and
/// `$time_local` read.
#[derive(Debug, Clone)]
pub struct ResponseInfo {
    pub status: u16,
    pub body_bytes_sent: u64,
    pub headers: HeaderMap,
    pub request_time: Duration,
    pub started: SystemTime,
}

/// A compiled string with variables.
#[derive(Debug, Clone)]
pub struct Template {
    source: String,
    parts: Vec<Part>,
}

#[derive(Debug, Clone)]
enum Part {
    Text(String),
    Var(Var),
}

#[derive(Debug, Clone)]
enum Var {
    Dollar,
    Uri,
    Host,
    Method,
    /// `http` or `https`, from the listener (or a trusted proxy's `forwarded` protocol).
    Scheme,
    RequestUri,
    RequestLine,
    RemoteAddr,
    RequestId,
    TimeLocal,
    RequestTime,
    Status,
    BodyBytesSent,
    Header(HeaderName),
    Arg(Vec<u8>),
    Cookie(Vec<u8>),
    ResponseHeader(HeaderName),
}

impl Template {
    /// Parses `s`; `path` is where the string sits in the configuration, for errors.
    pub fn compile(s: &str, path: &JsonPath) -> Result<Self, ConfigError> {
        if is_njs_template(s) {
            return Err(path.error(
                "a JavaScript template literal (`...`): rein has no njs; write the string with rein's \
                 variables, without the backticks",
            ));
        }
        let mut parts = Vec::new();
        let mut rest = s;
        while let Some(at) = rest.find('$') {
            if at > 0 {
                parts.push(Part::Text(rest[..at].to_owned()));
            }
            let offset = s.len() - rest.len() + at;
            let (name, len) = var_name(&rest[at + 1..]).ok_or_else(|| {
                path.error(format!(
                    "invalid variable at position {offset}; write $dollar for a literal \"$\""
                ))
            })?;
            let var =
                resolve(name).ok_or_else(|| path.error(format!("unknown variable \"{name}\"")))?;
            parts.push(Part::Var(var));
            rest = &rest[at + 1 + len..];
        }
        if !rest.is_empty() {
            parts.push(Part::Text(rest.to_owned()));
        }
        Ok(Template {
            source: s.to_owned(),
            parts,
        })
    }

    /// True when the string has no variables: its value is [`Template::source`].
    pub fn is_literal(&self) -> bool {
        self.parts.iter().all(|p| matches!(p, Part::Text(_)))
    }

    #[cfg(any(test, feature = "fuzzing"))]
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The text before the first variable (the whole string when there is none): the part of every
    /// expansion that no request can change.
    pub fn fixed_prefix(&self) -> &str {
        match self.parts.first() {
            Some(Part::Text(text)) => text,
            Some(Part::Var(_)) | None => "",
        }
    }

    pub fn render(&self, ctx: &VarContext<'_>) -> String {
        if self.is_literal() {
            return self.source.clone();
        }
        let mut out = String::with_capacity(self.source.len() + 32);
        self.render_into(ctx, &mut out);
        out
    }

    /// Appends the expansion to `out`; absent fields expand to nothing.
    pub fn render_into(&self, ctx: &VarContext<'_>, out: &mut String) {
        self.expand(ctx, out, "");
    }

    /// Appends the expansion to `out`, absent fields as `-`, the way Unit writes its access log. Each value is
    /// escaped as nginx escapes log values ([`log_escape_into`]): a client's bytes never end a line or a
    /// quoted field.
    pub fn render_log_into(&self, ctx: &VarContext<'_>, out: &mut String) {
        for part in &self.parts {
            match part {
                Part::Text(t) => out.push_str(t),
                Part::Var(v) => match v.value(ctx) {
                    Some(value) => log_escape_into(out, &value),
                    None => out.push('-'),
                },
            }
        }
    }

    /// Appends the expansion to `out` as one JSON string, absent fields as `-` as in the line format: a
    /// member of Unit's JSON access log format.
    pub fn render_json_into(&self, ctx: &VarContext<'_>, out: &mut String) {
        let mut value = String::with_capacity(self.source.len() + 32);
        self.expand(ctx, &mut value, "-");
        json_string_into(out, &value);
    }

    fn expand(&self, ctx: &VarContext<'_>, out: &mut String, absent: &str) {
        for part in &self.parts {
            match part {
                Part::Text(t) => out.push_str(t),
                Part::Var(v) => match v.value(ctx) {
                    Some(value) => out.push_str(&value),
                    None => out.push_str(absent),
                },
            }
        }
    }
}

/// Unit runs a string between backticks as njs (`` "`/www${host}`" ``). Refused rather than taken as text:
/// one whose `${...}` are rein's own variables would otherwise expand, backticks included, and differ silently.
fn is_njs_template(s: &str) -> bool {
    s.len() >= 2 && s.starts_with('`') && s.ends_with('`')
}

/// The name after a `$` and how many bytes the reference spans after the `$` (braces included).
fn var_name(after: &str) -> Option<(&str, usize)> {
    if let Some(inner) = after.strip_prefix('{') {
        let end = inner.find('}')?;
        let name = &inner[..end];
        let ok = !name.is_empty()
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        return ok.then_some((name, end + 2));
    }
    let len = after
        .bytes()
        .take_while(|b| b.is_ascii_alphabetic() || *b == b'_')
        .count();
    (len > 0).then_some((&after[..len], len))
}

fn resolve(name: &str) -> Option<Var> {
    Some(match name {
        "dollar" => Var::Dollar,
        "uri" => Var::Uri,
        "host" => Var::Host,
        "method" => Var::Method,
        "scheme" => Var::Scheme,
        "request_uri" => Var::RequestUri,
        "request_line" => Var::RequestLine,
        "remote_addr" => Var::RemoteAddr,
        "request_id" => Var::RequestId,
        "time_local" => Var::TimeLocal,
        "request_time" => Var::RequestTime,
        "status" => Var::Status,
        "body_bytes_sent" => Var::BodyBytesSent,
        _ => return resolve_field(name),
    })
}

/// `header_*` and `response_header_*` names are case-insensitive with `_` standing for `-`; `arg_*` names
/// are percent-decoded like the query; `cookie_*` names are taken as written.
fn resolve_field(name: &str) -> Option<Var> {
    let field = |prefix: &str| name.strip_prefix(prefix).filter(|rest| !rest.is_empty());
    if let Some(rest) = field("response_header_") {
        return header_name(rest).map(Var::ResponseHeader);
    }
    if let Some(rest) = field("header_") {
        return header_name(rest).map(Var::Header);
    }
    if let Some(rest) = field("arg_") {
        return Some(Var::Arg(fields::decode_query(rest.as_bytes()).into_owned()));
    }
    field("cookie_").map(|rest| Var::Cookie(rest.as_bytes().to_vec()))
}

fn header_name(s: &str) -> Option<HeaderName> {
    let normal: String = s
        .chars()
        .map(|c| {
            if c == '_' {
                '-'
            } else {
                c.to_ascii_lowercase()
            }
        })
        .collect();
    HeaderName::from_bytes(normal.as_bytes()).ok()
}

impl Var {
    /// `None` when the variable refers to something the request or response does not have.
    fn value<'a>(&self, ctx: &VarContext<'a>) -> Option<Cow<'a, str>> {
        let req = ctx.req;
        let resp = ctx.response;
        Some(match self {
            Var::Dollar => Cow::Borrowed("$"),
            Var::Uri | Var::Method | Var::RequestUri | Var::RequestLine if !req.head_parsed => {
                return None;
            }
            Var::Uri => Cow::Borrowed(req.path.as_str()),
            Var::Host => Cow::Borrowed(normalized_host(&req.host)),
            Var::Method => Cow::Borrowed(req.method.as_str()),
            Var::Scheme => Cow::Borrowed(req.scheme),
            Var::RequestUri => Cow::Borrowed(req.request_uri.as_str()),
            Var::RequestLine => Cow::Owned(format!(
                "{} {} {}",
                req.method,
                req.request_uri,
                version_name(req.version)
            )),
            // A Unix-socket client has no address: Unit writes it `unix:`, which log parsers expect.
            Var::RemoteAddr => Cow::Owned(
                req.remote
                    .map_or_else(|| "unix:".to_owned(), |a| a.ip().to_string()),
            ),
            Var::RequestId => Cow::Owned(request_id(req.id)),
            Var::TimeLocal => {
                Cow::Owned(clf_time(resp.map_or_else(SystemTime::now, |r| r.started)))
            }
            Var::RequestTime => Cow::Owned(seconds_millis(resp?.request_time)),
            Var::Status => Cow::Owned(format!("{:03}", resp?.status)),
            Var::BodyBytesSent => Cow::Owned(resp?.body_bytes_sent.to_string()),
            Var::Header(name) => lossy(req.headers.get(name)?.as_bytes()),
            Var::ResponseHeader(name) => lossy(resp?.headers.get(name)?.as_bytes()),
            Var::Arg(name) => last_argument(&req.query, name)?,
            Var::Cookie(name) => {
                let (_, v) = fields::cookies(&req.headers).find(|(n, _)| *n == name.as_slice())?;
                lossy(v)
            }
        })
    }
}

fn lossy(bytes: &[u8]) -> Cow<'_, str> {
    String::from_utf8_lossy(bytes)
}

/// With repeated arguments (`Color=Red&Color=Blue`) Unit uses the rightmost.
fn last_argument<'a>(query: &'a str, name: &[u8]) -> Option<Cow<'a, str>> {
    let value = fields::arguments(query)
        .filter(|(n, _)| **n == *name)
        .last()?
        .1;
    Some(match value {
        Cow::Borrowed(b) => lossy(b),
        Cow::Owned(v) => Cow::Owned(String::from_utf8_lossy(&v).into_owned()),
    })
}

#[cfg(test)]
mod tests;
