//! `access_log`: where lines go, how each is written (a line template, or Unit's JSON object form) and which
//! requests get one (`if`).

use serde_json::Value;

use crate::config::walk::{known_keys, object, string};
use crate::config::{ConfigError, JsonPath};
use crate::snapshot::AccessLog;
use crate::vars::{Template, VarContext};

/// Unit's default access log format (the Combined Log Format).
const DEFAULT_FORMAT: &str = "$remote_addr - - [$time_local] \"$request_line\" $status $body_bytes_sent \"$header_referer\" \"$header_user_agent\"";

/// How a line is written.
pub enum LogFormat {
    /// A template, its values escaped as nginx escapes its log.
    Line(Template),
    /// Unit 1.34's object form: one JSON object per line, its members in the configuration's order, each
    /// value a template written as a JSON string.
    Json(Vec<(String, Template)>),
}

impl LogFormat {
    /// The line for one request, without its line end.
    pub fn line(&self, ctx: &VarContext<'_>) -> String {
        let mut out = String::with_capacity(128);
        match self {
            LogFormat::Line(template) => template.render_log_into(ctx, &mut out),
            LogFormat::Json(members) => {
                out.push('{');
                for (i, (name, template)) in members.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    crate::vars::json_string_into(&mut out, name);
                    out.push(':');
                    template.render_json_into(ctx, &mut out);
                }
                out.push('}');
            }
        }
        out
    }
}

/// Unit's `access_log.if`: a template whose value, empty or `0` (or `false`, `null`, `undefined`), suppresses
/// the line; `!` inverts it.
pub struct LogCondition {
    negate: bool,
    template: Template,
}

impl LogCondition {
    fn compile(s: &str, path: &JsonPath) -> Result<Self, ConfigError> {
        let (negate, rest) = match s.strip_prefix('!') {
            Some(rest) => (true, rest),
            None => (false, s),
        };
        Ok(LogCondition {
            negate,
            template: Template::compile(rest, path)?,
        })
    }

    /// Whether the request gets a line.
    pub fn admits(&self, ctx: &VarContext<'_>) -> bool {
        let value = self.template.render(ctx);
        let truthy = !matches!(value.as_str(), "" | "0" | "false" | "null" | "undefined");
        truthy != self.negate
    }
}

/// `access_log`: a path, or `{"path": ..., "format": ..., "if": ...}`.
pub(super) fn access_log(v: &Value, path: &JsonPath) -> Result<AccessLog, ConfigError> {
    let (file, format, condition) = match v {
        Value::String(s) => (s.as_str(), None, None),
        _ => {
            let map = object(v, path)?;
            known_keys(map, &["path", "format", "if"], path)?;
            let file = map
                .get("path")
                .ok_or_else(|| path.error("needs a \"path\""))?;
            let condition = match map.get("if") {
                Some(c) => Some(LogCondition::compile(
                    string(c, &path.key("if"))?,
                    &path.key("if"),
                )?),
                None => None,
            };
            (
                string(file, &path.key("path"))?,
                map.get("format"),
                condition,
            )
        }
    };
    if !file.starts_with('/') {
        return Err(path.error("the log path must be absolute"));
    }
    let format = match format {
        Some(f) => log_format(f, &path.key("format"))?,
        None => LogFormat::Line(Template::compile(DEFAULT_FORMAT, path)?),
    };
    Ok(AccessLog {
        path: file.into(),
        format,
        condition,
    })
}

/// `format`: a template string, or an object whose members are template strings.
fn log_format(v: &Value, path: &JsonPath) -> Result<LogFormat, ConfigError> {
    let Value::Object(map) = v else {
        return Ok(LogFormat::Line(Template::compile(string(v, path)?, path)?));
    };
    let members = map
        .iter()
        .map(|(name, value)| {
            let at = path.key(name);
            Ok((name.clone(), Template::compile(string(value, &at)?, &at)?))
        })
        .collect::<Result<_, ConfigError>>()?;
    Ok(LogFormat::Json(members))
}
