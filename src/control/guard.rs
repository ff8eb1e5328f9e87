//! Who may use the control API over TCP. Anyone on the machine can connect to a TCP port, and so can a web
//! page in a local browser, so every request must show:
//!
//! - a `Host` naming the address it reached (`127.0.0.1:8443`, or `localhost:8443` on a loopback address): a
//!   page on `evil.example` whose name was rebound to 127.0.0.1 sends `Host: evil.example` (421);
//! - no `Origin`, or this API's own (`http://127.0.0.1:8443`): a page's cross-site `fetch` or form post says
//!   where it comes from (403);
//! - `Authorization: Bearer TOKEN`, the token of [`super::token`] (401).
//!
//! The Unix socket needs none of this: its mode (0600) already admits only rein's user.

use std::net::SocketAddr;

use http::{HeaderMap, HeaderValue, StatusCode, header};

use super::token;

/// The checks of one TCP control listener.
pub(super) struct Guard {
    token: String,
}

/// Why a request was refused: its status, Unit-style error and detail.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Refusal {
    pub(super) status: StatusCode,
    pub(super) error: &'static str,
    pub(super) detail: String,
}

impl Guard {
    pub(super) fn new(token: String) -> Guard {
        Guard { token }
    }

    /// Admits or refuses a request that reached the local address `local`.
    pub(super) fn check(&self, headers: &HeaderMap, local: SocketAddr) -> Result<(), Refusal> {
        let host = check_host(headers, local)?;
        check_origin(headers, &host)?;
        self.check_token(headers)
    }

    fn check_token(&self, headers: &HeaderMap) -> Result<(), Refusal> {
        let presented = headers
            .get(header::AUTHORIZATION)
            .map(HeaderValue::as_bytes)
            .and_then(bearer);
        match presented {
            Some(t) if token::matches(t, self.token.as_bytes()) => Ok(()),
            Some(_) => Err(unauthorized("The token is not this server's.")),
            None => Err(unauthorized(
                "The control API over TCP needs \"Authorization: Bearer TOKEN\", the token being in the \
                 state directory's control.token.",
            )),
        }
    }
}

/// The token of an `Authorization: Bearer TOKEN` value (the scheme is case-insensitive).
fn bearer(value: &[u8]) -> Option<&[u8]> {
    let (scheme, rest) = value.split_at_checked(7)?;
    scheme
        .eq_ignore_ascii_case(b"bearer ")
        .then(|| rest.trim_ascii())
}

fn unauthorized(detail: &str) -> Refusal {
    Refusal {
        status: StatusCode::UNAUTHORIZED,
        error: "Unauthorized.",
        detail: detail.to_owned(),
    }
}

/// The request's `Host`, when it names `local`; lowercased, with the port.
fn check_host(headers: &HeaderMap, local: SocketAddr) -> Result<String, Refusal> {
    let given = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .map(str::to_ascii_lowercase);
    match given {
        Some(host) if accepted_hosts(local).contains(&host) => Ok(host),
        given => Err(Refusal {
            status: StatusCode::MISDIRECTED_REQUEST,
            error: "Misdirected request.",
            detail: format!(
                "Host {} is not the control API's address {local}.",
                given.map_or_else(|| "(none)".to_owned(), |h| format!("{h:?}"))
            ),
        }),
    }
}

/// The names by which a client may reach `local`: its address, `localhost` on a loopback address, and the
/// same without the port when it is 80.
fn accepted_hosts(local: SocketAddr) -> Vec<String> {
    let ip = match local {
        SocketAddr::V4(a) => a.ip().to_string(),
        SocketAddr::V6(a) => format!("[{}]", a.ip()),
    };
    let mut names = vec![ip];
    if local.ip().is_loopback() {
        names.push("localhost".to_owned());
    }
    let mut hosts: Vec<String> = names
        .iter()
        .map(|n| format!("{n}:{}", local.port()))
        .collect();
    if local.port() == 80 {
        hosts.extend(names);
    }
    hosts
}

/// Browsers send `Origin` with every cross-site write; only this API's own origin is admitted.
fn check_origin(headers: &HeaderMap, host: &str) -> Result<(), Refusal> {
    let Some(origin) = headers.get(header::ORIGIN) else {
        return Ok(());
    };
    let own = format!("http://{host}");
    if origin.as_bytes().eq_ignore_ascii_case(own.as_bytes()) {
        return Ok(());
    }
    Err(Refusal {
        status: StatusCode::FORBIDDEN,
        error: "Forbidden.",
        detail: format!(
            "Cross-origin requests are refused (Origin {:?}).",
            String::from_utf8_lossy(origin.as_bytes())
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOCAL: &str = "127.0.0.1:8443";

    fn check(pairs: &[(&str, &str)]) -> Result<(), StatusCode> {
        let mut headers = HeaderMap::new();
        for (k, v) in pairs {
            headers.append(
                http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        Guard::new("s3cret".into())
            .check(&headers, LOCAL.parse().unwrap())
            .map_err(|r| r.status)
    }

    #[test]
    fn the_token_is_required() {
        let host = ("host", LOCAL);
        assert_eq!(check(&[host, ("authorization", "Bearer s3cret")]), Ok(()));
        assert_eq!(check(&[host, ("authorization", "bearer  s3cret ")]), Ok(()));
        assert_eq!(check(&[host]), Err(StatusCode::UNAUTHORIZED));
        let wrong = ("authorization", "Bearer s3cre");
        assert_eq!(check(&[host, wrong]), Err(StatusCode::UNAUTHORIZED));
        let basic = ("authorization", "Basic czNjcmV0");
        assert_eq!(check(&[host, basic]), Err(StatusCode::UNAUTHORIZED));
    }

    #[test]
    fn the_host_must_name_this_address() {
        let auth = ("authorization", "Bearer s3cret");
        assert_eq!(check(&[("host", "localhost:8443"), auth]), Ok(()));
        assert_eq!(check(&[("host", "LOCALHOST:8443"), auth]), Ok(()));
        for host in [
            "evil.example",
            "evil.example:8443",
            "127.0.0.1",
            "127.0.0.1:80",
        ] {
            let refused = check(&[("host", host), auth]);
            assert_eq!(refused, Err(StatusCode::MISDIRECTED_REQUEST), "{host}");
        }
        assert_eq!(check(&[auth]), Err(StatusCode::MISDIRECTED_REQUEST));
    }

    #[test]
    fn only_the_apis_own_origin_is_admitted() {
        let (host, auth) = (("host", LOCAL), ("authorization", "Bearer s3cret"));
        let own = ("origin", "http://127.0.0.1:8443");
        assert_eq!(check(&[host, auth, own]), Ok(()));
        for origin in ["http://evil.example", "null", "https://127.0.0.1:8443"] {
            let refused = check(&[host, auth, ("origin", origin)]);
            assert_eq!(refused, Err(StatusCode::FORBIDDEN), "{origin}");
        }
    }

    #[test]
    fn ipv6_and_port_80() {
        let hosts = accepted_hosts("[::1]:80".parse().unwrap());
        assert_eq!(hosts, ["[::1]:80", "localhost:80", "[::1]", "localhost"]);
        let hosts = accepted_hosts("10.0.0.1:9".parse().unwrap());
        assert_eq!(hosts, ["10.0.0.1:9"]);
    }
}
