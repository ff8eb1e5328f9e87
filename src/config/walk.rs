//! Typed reads of a `serde_json::Value` that report failures with their JSON path.
//!
//! The compiler walks the user's document with these helpers instead of deserialising it with serde: Unit's
//! schema is full of values that may be a string, an array or an object, and a walk gives every error the exact
//! path and a sentence a person can act on.

use serde_json::{Map, Value};

use super::error::{ConfigError, JsonPath, Result};

/// A short name of a JSON value's type, for messages.
pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

pub fn object<'v>(v: &'v Value, path: &JsonPath) -> Result<&'v Map<String, Value>> {
    v.as_object()
        .ok_or_else(|| path.error(format!("must be an object, not {}", type_name(v))))
}

pub fn string<'v>(v: &'v Value, path: &JsonPath) -> Result<&'v str> {
    v.as_str()
        .ok_or_else(|| path.error(format!("must be a string, not {}", type_name(v))))
}

pub fn boolean(v: &Value, path: &JsonPath) -> Result<bool> {
    v.as_bool()
        .ok_or_else(|| path.error(format!("must be a boolean, not {}", type_name(v))))
}

/// A non-negative integer no larger than `max`.
pub fn integer(v: &Value, path: &JsonPath, max: u64) -> Result<u64> {
    match v.as_u64() {
        Some(n) if n <= max => Ok(n),
        Some(_) => Err(path.error(format!("must be at most {max}"))),
        None => Err(path.error(format!(
            "must be a non-negative integer, not {}",
            describe(v)
        ))),
    }
}

/// A number of seconds (integer or fraction), as Unit's timeouts are written.
pub fn seconds(v: &Value, path: &JsonPath) -> Result<std::time::Duration> {
    match v.as_f64() {
        Some(s) if s.is_finite() && (0.0..=1e9).contains(&s) => {
            Ok(std::time::Duration::from_secs_f64(s))
        }
        _ => Err(path.error(format!(
            "must be a non-negative number of seconds, not {}",
            describe(v)
        ))),
    }
}

/// A string, or an array of strings (at least one).
pub fn strings<'v>(v: &'v Value, path: &JsonPath) -> Result<Vec<&'v str>> {
    match v {
        Value::String(s) => Ok(vec![s.as_str()]),
        Value::Array(items) if !items.is_empty() => items
            .iter()
            .enumerate()
            .map(|(i, item)| string(item, &path.index(i)))
            .collect(),
        Value::Array(_) => Err(path.error("must not be an empty array")),
        other => Err(path.error(format!(
            "must be a string or an array of strings, not {}",
            type_name(other)
        ))),
    }
}

/// Rejects any member of `map` not named in `allowed`: a typo must not silently do nothing.
pub fn known_keys(map: &Map<String, Value>, allowed: &[&str], path: &JsonPath) -> Result<()> {
    unknown_keys(map, allowed, path).next().map_or(Ok(()), Err)
}

/// An error for each member of `map` not named in `allowed`.
pub fn unknown_keys<'a>(
    map: &'a Map<String, Value>,
    allowed: &'a [&str],
    path: &'a JsonPath,
) -> impl Iterator<Item = ConfigError> + 'a {
    map.keys()
        .filter(|k| !allowed.contains(&k.as_str()))
        .map(move |k| {
            path.key(k).error(format!(
                "unknown option; expected one of: {}",
                allowed.join(", ")
            ))
        })
}

/// The value itself for scalars, its type for containers: enough to recognise it in a message.
fn describe(v: &Value) -> String {
    match v {
        Value::Number(_) | Value::Bool(_) | Value::Null => v.to_string(),
        Value::String(s) => format!("{s:?}"),
        other => type_name(other).to_owned(),
    }
}
