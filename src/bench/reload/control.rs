//! The control API as the reload and crash benches use it: restart an app, read its ready instances,
//! kill one, and find the URL that reaches a listener.

use super::*;

pub(super) fn kill9(pid: i64) -> io::Result<()> {
    let pid = i32::try_from(pid).map_err(|_| io::Error::other("pid out of range"))?;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .map_err(io::Error::from)
}

/// The pids of an application's `ready` instances, from its status.
pub(super) fn ready_pids(status: &Value) -> Vec<i64> {
    status["instances"]
        .as_array()
        .map(|instances| {
            instances
                .iter()
                .filter(|i| i["state"] == "ready")
                .filter_map(|i| i["pid"].as_i64())
                .collect()
        })
        .unwrap_or_default()
}

/// `"500 Internal Server Error: Reload failed; ... (detail)"` from an API error document.
pub(super) fn api_error(status: StatusCode, body: &Value) -> String {
    let mut s = status.to_string();
    if let Some(e) = body["error"].as_str() {
        s.push_str(": ");
        s.push_str(e);
    }
    if let Some(d) = body["detail"].as_str() {
        s.push_str(&format!(" ({d})"));
    }
    s
}

/// A path segment as the control API reads it (percent-decoded).
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

pub(super) fn segment(s: &str) -> String {
    utf8_percent_encode(s, SEGMENT).to_string()
}

/// The control API, one request per connection.
pub(super) struct Control {
    pub(super) addr: ControlAddr,
    pub(super) headers: Vec<(&'static str, String)>,
}

impl Control {
    /// `GET path`: status and the body as JSON (`null` if it is not).
    pub(super) async fn get(&self, path: &str) -> Result<(StatusCode, Value), Error> {
        let control = |source| Error::Control {
            addr: self.addr.to_string(),
            source,
        };
        let mut req = Request::get(path);
        for (name, value) in &self.headers {
            req = req.header(*name, value);
        }
        if self.headers.is_empty() {
            req = req.header(HOST, "localhost");
        }
        let req = req
            .body(Empty::<Bytes>::new())
            .map_err(|e| control(io::Error::other(e)))?;
        let (status, body) = match &self.addr {
            ControlAddr::Unix(p) => {
                let s = UnixStream::connect(p).await.map_err(control)?;
                exchange_once(s, req).await.map_err(control)?
            }
            ControlAddr::Tcp(a) => {
                let s = TcpStream::connect(a).await.map_err(control)?;
                exchange_once(s, req).await.map_err(control)?
            }
        };
        Ok((status, serde_json::from_slice(&body).unwrap_or(Value::Null)))
    }

    pub(super) async fn app_names(&self) -> Result<Vec<String>, Error> {
        let (_, v) = self.get("/status/applications").await?;
        Ok(v.as_object()
            .map(|o| o.keys().cloned().collect())
            .unwrap_or_default())
    }

    /// The first listener passing to `applications/APP`, as a target.
    pub(super) async fn find_target(&self, app: &str) -> Result<Target, Error> {
        let (_, listeners) = self.get("/config/listeners").await?;
        let pass = format!("applications/{app}");
        let key = listeners
            .as_object()
            .into_iter()
            .flatten()
            .find(|(_, l)| {
                l["pass"]
                    .as_str()
                    .is_some_and(|p| p == pass || p.starts_with(&format!("{pass}/")))
            })
            .map(|(k, _)| k.clone())
            .ok_or_else(|| {
                Error::Invalid(format!(
                    "no listener passes to \"{pass}\"; give the URL that reaches the application with --url"
                ))
            })?;
        let (_, bound) = self.get("/status/listeners").await?;
        let address = bound[&key]["address"].as_str().map(str::to_owned);
        listener_target(&key, address.as_deref()).map_err(Error::Invalid)
    }
}

/// The URL that reaches a listener: `unix:/p` → `unix:/p:/`; `*:8080` → `http://127.0.0.1:8080/`. `bound` is
/// the address the listener is bound to (from `/status`), which says the port when the key's is 0.
pub fn listener_target(key: &str, bound: Option<&str>) -> Result<Target, String> {
    if let Some(path) = key.strip_prefix("unix:") {
        return Ok(Target::Unix {
            socket: PathBuf::from(path),
            path: "/".into(),
        });
    }
    let addr = bound
        .and_then(|b| b.parse::<std::net::SocketAddr>().ok())
        .or_else(|| {
            key.strip_prefix("*:")
                .map(|port| format!("0.0.0.0:{port}"))
                .unwrap_or_else(|| key.to_owned())
                .parse()
                .ok()
        })
        .ok_or_else(|| format!("cannot make a URL of the listener {key:?}; give one with --url"))?;
    let ip = match addr.ip() {
        std::net::IpAddr::V4(ip) if ip.is_unspecified() => std::net::Ipv4Addr::LOCALHOST.into(),
        std::net::IpAddr::V6(ip) if ip.is_unspecified() => std::net::Ipv6Addr::LOCALHOST.into(),
        ip => ip,
    };
    format!("http://{}/", std::net::SocketAddr::new(ip, addr.port())).parse()
}
