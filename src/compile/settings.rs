//! `settings.http` (timeouts, limits, static MIME types).

use serde_json::Value;

use crate::config::walk::{boolean, integer, known_keys, object, seconds};
use crate::config::{ConfigError, JsonPath};
use crate::share::MimeTypes;
use crate::snapshot::{Http2Settings, HttpSettings};

const HTTP_KEYS: &[&str] = &[
    "header_read_timeout",
    "body_read_timeout",
    "send_timeout",
    "idle_timeout",
    "max_body_size",
    "body_min_rate",
    "large_header_buffer_size",
    "large_header_buffers",
    "body_buffer_size",
    "max_connections",
    "max_connections_per_client",
    "static",
    "discard_unsafe_fields",
    "server_version",
    "log_route",
    "http2",
];

pub fn compile(v: &Value, path: &JsonPath) -> Result<HttpSettings, ConfigError> {
    let map = object(v, path)?;
    known_keys(map, &["http"], path)?;
    let mut out = HttpSettings::default();
    let Some(http) = map.get("http") else {
        return Ok(out);
    };
    let hpath = path.key("http");
    let http = object(http, &hpath)?;
    known_keys(http, HTTP_KEYS, &hpath)?;
    for (key, value) in http {
        let p = hpath.key(key);
        match key.as_str() {
            "header_read_timeout" => out.header_read_timeout = seconds(value, &p)?,
            "body_read_timeout" => out.body_read_timeout = seconds(value, &p)?,
            "send_timeout" => out.send_timeout = seconds(value, &p)?,
            "idle_timeout" => out.idle_timeout = seconds(value, &p)?,
            "max_body_size" => out.max_body_size = integer(value, &p, u64::MAX)?,
            "body_min_rate" => out.body_min_rate = integer(value, &p, u64::MAX)?,
            "max_connections" => out.max_connections = positive(value, &p, u64::MAX)?,
            "max_connections_per_client" => {
                out.max_connections_per_client = positive(value, &p, u32::MAX.into())? as u32;
            }
            "large_header_buffer_size" => {
                out.large_header_buffer_size =
                    at_least(value, &p, 128, MAX_HEADER_BUFFER)? as usize;
            }
            "large_header_buffers" => {
                out.large_header_buffers = at_least(value, &p, 1, MAX_HEADER_BUFFERS)? as usize;
            }
            "body_buffer_size" => out.body_buffer_size = integer(value, &p, u32::MAX.into())?,
            "discard_unsafe_fields" => out.discard_unsafe_fields = boolean(value, &p)?,
            "server_version" => out.server_version = boolean(value, &p)?,
            "log_route" => out.log_route = boolean(value, &p)?,
            "static" => out.mime_types = static_settings(value, &p)?,
            "http2" => out.http2 = http2(value, &p)?,
            _ => unreachable!("known_keys checked the key"),
        }
    }
    Ok(out)
}

/// The largest `large_header_buffer_size` accepted: 1 MiB, so that a head stays a bounded amount of memory.
const MAX_HEADER_BUFFER: u64 = 1024 * 1024;

/// The most `large_header_buffers`: with the largest buffer, a 64 MiB head at most.
const MAX_HEADER_BUFFERS: u64 = 64;

/// An integer from `min` to `max`.
fn at_least(v: &Value, path: &JsonPath, min: u64, max: u64) -> Result<u64, ConfigError> {
    match integer(v, path, max)? {
        n if n < min => Err(path.error(format!("must be at least {min}"))),
        n => Ok(n),
    }
}

/// An integer from 1 to `max`.
fn positive(v: &Value, path: &JsonPath, max: u64) -> Result<u64, ConfigError> {
    match integer(v, path, max)? {
        0 => Err(path.error("must be at least 1")),
        n => Ok(n),
    }
}

fn static_settings(v: &Value, path: &JsonPath) -> Result<MimeTypes, ConfigError> {
    let map = object(v, path)?;
    known_keys(map, &["mime_types"], path)?;
    match map.get("mime_types") {
        Some(m) => MimeTypes::compile(m, &path.key("mime_types")),
        None => Ok(MimeTypes::default()),
    }
}

/// `settings.http.http2`, rein's: the limits one HTTP/2 client meets.
fn http2(v: &Value, path: &JsonPath) -> Result<Http2Settings, ConfigError> {
    let map = object(v, path)?;
    known_keys(
        map,
        &[
            "max_concurrent_streams",
            "max_header_list_size",
            "initial_window_size",
            "max_pending_reset_streams",
        ],
        path,
    )?;
    let mut out = Http2Settings::default();
    let u32_at = |key: &str, min: u64, max: u64| -> Result<Option<u32>, ConfigError> {
        let Some(v) = map.get(key) else {
            return Ok(None);
        };
        let p = path.key(key);
        let n = integer(v, &p, max)?;
        if n < min {
            return Err(p.error(format!("must be at least {min}")));
        }
        Ok(Some(n as u32))
    };
    if let Some(n) = u32_at("max_concurrent_streams", 1, 65_535)? {
        out.max_concurrent_streams = n;
    }
    if let Some(n) = u32_at("max_header_list_size", 1024, 16 * 1024 * 1024)? {
        out.max_header_list_size = n;
    }
    // RFC 9113 §6.5.2: a window is at least 65,535 and at most 2^31 - 1.
    if let Some(n) = u32_at("initial_window_size", 65_535, (1 << 31) - 1)? {
        out.initial_window_size = n;
    }
    if let Some(n) = u32_at("max_pending_reset_streams", 1, 10_000)? {
        out.max_pending_reset_streams = n as usize;
    }
    Ok(out)
}
