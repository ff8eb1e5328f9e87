//! What a bench run does: the target (`http://host:port/path` or `unix:/path.sock:/uri`), how many
//! connections, when to stop, the request to send.

use std::path::PathBuf;
use std::time::Duration;

use bytes::Bytes;
use http::header::{HeaderName, HeaderValue};
use http::{HeaderMap, Method};

/// Where requests go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// `http://host[:port]/path?query`.
    Tcp {
        /// Host and port to connect to (resolved once at start).
        host: String,
        port: u16,
        /// The `Host` header: the authority as written.
        authority: String,
        path: String,
    },
    /// `unix:/path/to.sock[:/uri]`.
    Unix { socket: PathBuf, path: String },
}

impl Target {
    /// The request target sent on the wire (`/path?query`).
    pub fn path(&self) -> &str {
        match self {
            Target::Tcp { path, .. } | Target::Unix { path, .. } => path,
        }
    }

    /// The default `Host` header.
    pub fn host_header(&self) -> &str {
        match self {
            Target::Tcp { authority, .. } => authority,
            Target::Unix { .. } => "localhost",
        }
    }
}

impl std::str::FromStr for Target {
    type Err = String;

    fn from_str(s: &str) -> Result<Target, String> {
        if let Some(rest) = s.strip_prefix("unix:") {
            let (socket, path) = match rest.find(":/") {
                Some(i) => (&rest[..i], &rest[i + 1..]),
                None => (rest, "/"),
            };
            if socket.is_empty() {
                return Err(format!("{s:?}: no socket path after \"unix:\""));
            }
            if path.parse::<http::uri::PathAndQuery>().is_err() {
                return Err(format!("{s:?}: {path:?} is not a valid request path"));
            }
            return Ok(Target::Unix {
                socket: PathBuf::from(socket),
                path: path.to_owned(),
            });
        }
        let uri: http::Uri = s.parse().map_err(|e| {
            format!(
                "{s:?} is not a URL ({e}); expected http://HOST:PORT/PATH or unix:/SOCKET:/PATH"
            )
        })?;
        match uri.scheme_str() {
            Some("http") => {}
            Some("https") => return Err(format!("{s:?}: https is not supported, use http://")),
            _ => {
                return Err(format!(
                    "{s:?}: expected http://HOST:PORT/PATH or unix:/SOCKET:/PATH"
                ));
            }
        }
        let authority = uri.authority().ok_or_else(|| format!("{s:?}: no host"))?;
        if authority.as_str().contains('@') {
            return Err(format!(
                "{s:?}: user information in the URL is not supported"
            ));
        }
        let host = authority.host();
        if host.is_empty() {
            return Err(format!("{s:?}: no host"));
        }
        // `[::1]` is written with brackets; connecting wants the bare address.
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        Ok(Target::Tcp {
            host,
            port: authority.port_u16().unwrap_or(80),
            authority: authority.as_str().to_owned(),
            path: uri
                .path_and_query()
                .map(|p| p.as_str())
                .filter(|p| !p.is_empty())
                .unwrap_or("/")
                .to_owned(),
        })
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Tcp {
                authority, path, ..
            } => write!(f, "http://{authority}{path}"),
            Target::Unix { socket, path } => write!(f, "unix:{}:{path}", socket.display()),
        }
    }
}

/// When a run stops.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Stop {
    /// After this long: no request starts later (requests in flight finish or time out).
    Duration(Duration),
    /// After this many requests, whatever their outcome.
    Requests(u64),
}

/// A bench run's parameters.
#[derive(Debug, Clone)]
pub struct Config {
    pub target: Target,
    /// Keep-alive connections, each with at most one request in flight.
    pub connections: usize,
    pub stop: Stop,
    /// Open loop: requests per second across all connections, latency measured from each request's scheduled
    /// time. `None`: closed loop, as fast as the server answers.
    pub rate: Option<f64>,
    pub method: Method,
    pub headers: HeaderMap,
    pub body: Bytes,
    /// Per request, connecting included.
    pub timeout: Duration,
    /// Runtime worker threads.
    pub threads: usize,
    /// The longest gap reported is the longest among the windows still open at this offset from the start
    /// (zero: the whole run). A harness that triggers a reload at T passes T.
    pub gap_from: Duration,
}

impl Config {
    /// Ten connections for ten seconds, `GET`, ten-second timeout, one thread per core.
    pub fn new(target: Target) -> Config {
        Config {
            target,
            connections: 10,
            stop: Stop::Duration(Duration::from_secs(10)),
            rate: None,
            method: Method::GET,
            headers: HeaderMap::new(),
            body: Bytes::new(),
            timeout: Duration::from_secs(10),
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            gap_from: Duration::ZERO,
        }
    }

    /// Checks the numbers make sense; the message says which does not.
    pub fn validate(&self) -> Result<(), String> {
        if self.connections == 0 {
            return Err("--connections must be at least 1".into());
        }
        if self.threads == 0 {
            return Err("--threads must be at least 1".into());
        }
        match self.stop {
            Stop::Duration(d) if d.is_zero() => return Err("--duration must be positive".into()),
            Stop::Requests(0) => return Err("--requests must be at least 1".into()),
            _ => {}
        }
        if let Some(rate) = self.rate
            && !(rate.is_finite() && rate > 0.0)
        {
            return Err("--rate must be a positive number of requests per second".into());
        }
        if self.timeout.is_zero() {
            return Err("--timeout must be positive".into());
        }
        Ok(())
    }
}

/// Parses `Name: value` as given to `-H`.
pub fn parse_header(s: &str) -> Result<(HeaderName, HeaderValue), String> {
    let (name, value) = s
        .split_once(':')
        .ok_or_else(|| format!("header {s:?} is not \"Name: value\""))?;
    let name = HeaderName::from_bytes(name.trim().as_bytes())
        .map_err(|_| format!("header {s:?}: {:?} is not a header name", name.trim()))?;
    let value = HeaderValue::from_str(value.trim())
        .map_err(|_| format!("header {s:?}: the value is not valid in a header"))?;
    Ok((name, value))
}

/// Seconds as given on the command line (`0.3`, `10`) to a duration.
pub fn seconds(s: f64, what: &str) -> Result<Duration, String> {
    Duration::try_from_secs_f64(s)
        .map_err(|_| format!("{what} must be a non-negative number of seconds"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tcp(s: &str) -> (String, u16, String, String) {
        match s.parse::<Target>().unwrap() {
            Target::Tcp {
                host,
                port,
                authority,
                path,
            } => (host, port, authority, path),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn http_urls() {
        assert_eq!(
            tcp("http://127.0.0.1:8080/a/b?x=1"),
            (
                "127.0.0.1".into(),
                8080,
                "127.0.0.1:8080".into(),
                "/a/b?x=1".into()
            )
        );
        assert_eq!(
            tcp("http://example.test"),
            ("example.test".into(), 80, "example.test".into(), "/".into())
        );
        assert_eq!(
            tcp("http://[::1]:9000/"),
            ("::1".into(), 9000, "[::1]:9000".into(), "/".into())
        );
        let t: Target = "http://localhost:81/p?q".parse().unwrap();
        assert_eq!(t.to_string(), "http://localhost:81/p?q");
        assert_eq!(t.host_header(), "localhost:81");
        assert_eq!(t.path(), "/p?q");
    }

    #[test]
    fn unix_targets() {
        let t: Target = "unix:/run/rein.sock:/api/x?y=http://z".parse().unwrap();
        assert_eq!(
            t,
            Target::Unix {
                socket: "/run/rein.sock".into(),
                path: "/api/x?y=http://z".into()
            }
        );
        assert_eq!(t.to_string(), "unix:/run/rein.sock:/api/x?y=http://z");
        assert_eq!(t.host_header(), "localhost");
        let t: Target = "unix:/tmp/s.sock".parse().unwrap();
        assert_eq!(t.path(), "/");
        let t: Target = "unix:rel.sock:/".parse().unwrap();
        assert!(
            matches!(t, Target::Unix { socket, .. } if socket == std::path::Path::new("rel.sock"))
        );
    }

    #[test]
    fn bad_targets() {
        for bad in [
            "https://127.0.0.1/",
            "ftp://x/",
            "127.0.0.1:8080",
            "/just/a/path",
            "http://",
            "http://user@host/",
            "unix:",
            "unix::/x",
            "not a url",
        ] {
            let e = bad.parse::<Target>().expect_err(bad);
            assert!(e.contains(bad), "{bad}: {e}");
        }
    }

    #[test]
    fn headers_and_validation() {
        let (n, v) = parse_header("X-Test:  a: b ").unwrap();
        assert_eq!((n.as_str(), v.to_str().unwrap()), ("x-test", "a: b"));
        assert!(parse_header("no colon").is_err());
        assert!(parse_header("bad name: x").is_err());

        let mut c = Config::new("http://127.0.0.1/".parse().unwrap());
        assert!(c.validate().is_ok());
        c.connections = 0;
        assert!(c.validate().unwrap_err().contains("--connections"));
        c.connections = 1;
        c.rate = Some(0.0);
        assert!(c.validate().unwrap_err().contains("--rate"));
        c.rate = None;
        c.stop = Stop::Requests(0);
        assert!(c.validate().unwrap_err().contains("--requests"));
        assert!(seconds(-1.0, "--timeout").is_err());
        assert_eq!(seconds(0.25, "x").unwrap(), Duration::from_millis(250));
    }
}
