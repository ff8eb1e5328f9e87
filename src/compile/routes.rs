//! `routes` and their actions: steps with `match` and one of `pass`, `share`, `proxy` or `return`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use http::{HeaderName, StatusCode};
use serde_json::{Map, Value};

use crate::config::walk::{boolean, integer, known_keys, object, string, strings, type_name};
use crate::config::{ConfigError, Errors, JsonPath};
use crate::route::matcher::Match;
use crate::route::pattern::PatternSet;
use crate::snapshot::{
    Action, ActionKind, FastCgiServer, Pass, PassTarget, ResponseHeader, Route, Routes, Share, Step,
};
use crate::upstream::conf::{UpstreamConf, proxy_target};
use crate::vars::Template;

/// Every fixed `pass` found in the routes, with its path, for checks that need the whole document.
/// Each fixed pass with its path, and whether its action also has a `rewrite` (a pass back to the same
/// route is then no loop by itself: the new URI may match another step, as in Unit's
/// `{"rewrite": "/v1$uri", "pass": "routes"}`; a request that does loop is stopped after 32 passes).
pub type Passes = Vec<(Pass, JsonPath, bool)>;

const ACTION_KEYS: &[&str] = &[
    "metrics",
    "pass",
    "share",
    "proxy",
    "fastcgi",
    "return",
    "location",
    "fallback",
    "index",
    "chroot",
    "follow_symlinks",
    "traverse_mounts",
    "types",
    "rewrite",
    "response_headers",
];
const SHARE_ONLY: &[&str] = &[
    "fallback",
    "index",
    "chroot",
    "follow_symlinks",
    "traverse_mounts",
    "types",
];

/// Compiles `routes`: an array (stored under the name `""`) or an object of named arrays.
/// Each step is compiled by itself: the errors of every step go to `errors`.
pub fn compile(v: &Value, path: &JsonPath, errors: &mut Errors) -> (Routes, Passes) {
    let mut passes = Vec::new();
    let mut routes = Routes::default();
    match v {
        Value::Array(_) => {
            if let Some(r) = route(v, path, &mut passes, errors) {
                routes.insert(String::new(), Arc::new(r));
            }
        }
        Value::Object(map) => {
            for (name, steps) in map {
                if let Some(r) = route(steps, &path.key(name), &mut passes, errors) {
                    routes.insert(name.clone(), Arc::new(r));
                }
            }
        }
        other => errors.push(path.error(format!(
            "must be an array of steps or an object of named routes, not {}",
            type_name(other)
        ))),
    }
    (routes, passes)
}

fn route(v: &Value, path: &JsonPath, passes: &mut Passes, errors: &mut Errors) -> Option<Route> {
    let Value::Array(items) = v else {
        errors.push(path.error(format!(
            "a route must be an array of steps, not {}",
            type_name(v)
        )));
        return None;
    };
    let steps = items
        .iter()
        .enumerate()
        .filter_map(|(i, step_v)| errors.ok(step(step_v, &path.index(i), passes)))
        .collect();
    Some(Route { steps })
}

fn step(v: &Value, path: &JsonPath, passes: &mut Passes) -> Result<Step, ConfigError> {
    let map = object(v, path)?;
    known_keys(map, &["match", "action"], path)?;
    let matcher = match map.get("match") {
        Some(m) => Some(Match::compile(m, &path.key("match"))?),
        None => None,
    };
    let action_v = map
        .get("action")
        .ok_or_else(|| path.error("a route step needs an \"action\""))?;
    let action = action(action_v, &path.key("action"), passes)?;
    Ok(Step { matcher, action })
}

/// Compiles an action object (also used for a share's `fallback`).
pub fn action(v: &Value, path: &JsonPath, passes: &mut Passes) -> Result<Action, ConfigError> {
    let map = object(v, path)?;
    known_keys(map, ACTION_KEYS, path)?;
    let present: Vec<&str> = ["pass", "share", "proxy", "fastcgi", "return", "metrics"]
        .into_iter()
        .filter(|k| map.contains_key(*k))
        .collect();
    let kind = match present.as_slice() {
        ["pass"] => {
            let pass_path = path.key("pass");
            let pass = compile_pass(&map["pass"], &pass_path)?;
            if let Pass::Fixed(target) = &pass {
                let rewrites = map.contains_key("rewrite");
                passes.push((Pass::Fixed(target.clone()), pass_path, rewrites));
            }
            ActionKind::Pass(pass)
        }
        ["share"] => ActionKind::Share(Box::new(share(map, path, passes)?)),
        ["proxy"] => ActionKind::Proxy(proxy(&map["proxy"], &path.key("proxy"))?),
        ["fastcgi"] => {
            let fcgi = super::fastcgi::action(&map["fastcgi"], &path.key("fastcgi"))?;
            if let FastCgiServer::Upstream(name) = &fcgi.server {
                let target = PassTarget::Upstream(name.clone());
                passes.push((
                    Pass::Fixed(target),
                    path.key("fastcgi").key("server"),
                    false,
                ));
            }
            ActionKind::FastCgi(Box::new(fcgi))
        }
        ["return"] => return_action(map, path)?,
        ["metrics"] => {
            let mpath = path.key("metrics");
            if let Some(k) = object(&map["metrics"], &mpath)?.keys().next() {
                return Err(mpath.key(k).error("unknown option; \"metrics\" takes none"));
            }
            ActionKind::Metrics
        }
        [] => {
            return Err(path.error(
                "needs one of \"pass\", \"share\", \"proxy\", \"fastcgi\", \"return\" or \"metrics\"",
            ));
        }
        _ => return Err(path.error(format!("has more than one of {}", present.join(", ")))),
    };
    if !matches!(kind, ActionKind::Share(_))
        && let Some(k) = SHARE_ONLY.iter().find(|k| map.contains_key(**k))
    {
        return Err(path.key(k).error("is only valid with \"share\""));
    }
    if !matches!(kind, ActionKind::Return { .. }) && map.contains_key("location") {
        return Err(path.key("location").error("is only valid with \"return\""));
    }
    let rewrite = match map.get("rewrite") {
        Some(r) => Some(template(r, &path.key("rewrite"))?),
        None => None,
    };
    let response_headers = match map.get("response_headers") {
        Some(h) => response_headers(h, &path.key("response_headers"))?,
        None => Vec::new(),
    };
    Ok(Action {
        kind,
        rewrite,
        response_headers,
    })
}

fn return_action(map: &Map<String, Value>, path: &JsonPath) -> Result<ActionKind, ConfigError> {
    let rpath = path.key("return");
    let code = integer(&map["return"], &rpath, 999)?;
    let status = StatusCode::from_u16(code as u16)
        .map_err(|_| rpath.error("must be an HTTP status code from 100 to 999"))?;
    let location = match map.get("location") {
        Some(l) => Some(template(l, &path.key("location"))?),
        None => None,
    };
    Ok(ActionKind::Return { status, location })
}

fn share(
    map: &Map<String, Value>,
    path: &JsonPath,
    passes: &mut Passes,
) -> Result<Share, ConfigError> {
    let spath = path.key("share");
    let paths = strings(&map["share"], &spath)?
        .into_iter()
        .enumerate()
        .map(|(i, s)| {
            let p = if matches!(map["share"], Value::Array(_)) {
                spath.index(i)
            } else {
                spath.clone()
            };
            template_str(s, &p)
        })
        .collect::<Result<_, _>>()?;
    let index = match map.get("index") {
        Some(i) => string(i, &path.key("index"))?.to_owned(),
        None => "index.html".to_owned(),
    };
    let chroot = match map.get("chroot") {
        Some(c) => Some(template(c, &path.key("chroot"))?),
        None => None,
    };
    let flag = |key: &str| -> Result<bool, ConfigError> {
        map.get(key)
            .map_or(Ok(true), |b| boolean(b, &path.key(key)))
    };
    let types = match map.get("types") {
        Some(t) => Some(PatternSet::compile(t, &path.key("types"), true)?),
        None => None,
    };
    let fallback = match map.get("fallback") {
        Some(f) => Some(Box::new(action(f, &path.key("fallback"), passes)?)),
        None => None,
    };
    Ok(Share {
        paths,
        index,
        chroot,
        follow_symlinks: flag("follow_symlinks")?,
        traverse_mounts: flag("traverse_mounts")?,
        types,
        fallback,
    })
}

/// Unit's proxy targets (`http://IPv4:PORT`, `http://[IPv6]:PORT`, `http://unix:/path`), and rein's: a DNS
/// name for the address, a port left to the scheme's, and `https://` for a server reached over TLS.
fn proxy(v: &Value, path: &JsonPath) -> Result<String, ConfigError> {
    let s = string(v, path)?;
    if !s.starts_with("http://") && !s.starts_with("https://") {
        return Err(path.error("must start with \"http://\" or \"https://\""));
    }
    if proxy_target(s).is_none() {
        return Err(path.error(
            "must be \"http://ADDRESS\" or \"https://ADDRESS\", ADDRESS being HOST, IP or [IPv6] with an \
             optional :PORT (80 or 443 if left out), or for http unix:/PATH; nothing after it",
        ));
    }
    Ok(s.to_owned())
}

fn response_headers(v: &Value, path: &JsonPath) -> Result<Vec<ResponseHeader>, ConfigError> {
    let mut out = Vec::new();
    for (name, value) in object(v, path)? {
        let hpath = path.key(name);
        let header = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| hpath.error("is not a valid header name"))?;
        let value = match value {
            Value::Null => None,
            other => Some(template(other, &hpath)?),
        };
        out.push(ResponseHeader {
            name: header,
            spelled: name.as_bytes().into(),
            value,
        });
    }
    Ok(out)
}

/// The targets of every `proxy` action (fallbacks included), as one-server upstreams.
pub fn proxies(routes: &Routes) -> BTreeMap<String, UpstreamConf> {
    fn visit(action: &Action, out: &mut BTreeMap<String, UpstreamConf>) {
        match &action.kind {
            ActionKind::Proxy(url) => {
                if let Some(conf) = proxy_target(url) {
                    out.insert(url.clone(), conf);
                }
            }
            ActionKind::FastCgi(fcgi) => {
                if let FastCgiServer::Address(addr) = &fcgi.server {
                    out.insert(fcgi.server.key(), UpstreamConf::to_one(addr.clone()));
                }
            }
            ActionKind::Share(share) => {
                if let Some(fallback) = &share.fallback {
                    visit(fallback, out);
                }
            }
            _ => {}
        }
    }
    let mut out = BTreeMap::new();
    for step in routes.values().flat_map(|r| &r.steps) {
        visit(&step.action, &mut out);
    }
    out
}

/// Compiles a `pass` value; one with variables is resolved per request.
pub fn compile_pass(v: &Value, path: &JsonPath) -> Result<Pass, ConfigError> {
    let s = string(v, path)?;
    if s.contains('$') {
        return Ok(Pass::Dynamic(Template::compile(s, path)?));
    }
    parse_pass(s).map(Pass::Fixed).ok_or_else(|| {
        path.error(format!(
            "\"{s}\" is not a destination; expected \"routes\", \"routes/NAME\", \"applications/NAME\" or \"upstreams/NAME\""
        ))
    })
}

/// Parses a destination string; also used at request time for passes with variables. As in Unit, each
/// segment may be percent-encoded, so `routes/a%2Fb` names the route `a/b`.
pub fn parse_pass(s: &str) -> Option<PassTarget> {
    let decode = |p: &str| {
        percent_encoding::percent_decode_str(p)
            .decode_utf8()
            .map(|d| d.into_owned())
    };
    let mut parts = s.splitn(3, '/');
    let section = decode(parts.next()?).ok()?;
    let name = parts.next().map(decode).transpose().ok()?;
    let rest = parts.next().map(decode).transpose().ok()?;
    let (name, rest) = (name.as_deref(), rest.as_deref());
    match (section.as_str(), name, rest) {
        ("routes", None, None) => Some(PassTarget::Route(String::new())),
        ("routes", Some(n), None) if !n.is_empty() => Some(PassTarget::Route(n.to_owned())),
        // `applications/NAME/TARGET` names one of an application's targets.
        ("applications", Some(n), target) if !n.is_empty() => Some(PassTarget::Application(
            n.to_owned(),
            target.filter(|t| !t.is_empty()).map(str::to_owned),
        )),
        ("upstreams", Some(n), None) if !n.is_empty() => Some(PassTarget::Upstream(n.to_owned())),
        _ => None,
    }
}

fn template(v: &Value, path: &JsonPath) -> Result<Template, ConfigError> {
    template_str(string(v, path)?, path)
}

fn template_str(s: &str, path: &JsonPath) -> Result<Template, ConfigError> {
    Template::compile(s, path)
}

/// The names a fixed `pass` may point at.
pub struct Targets<'a> {
    pub routes: &'a Routes,
    pub applications: &'a BTreeMap<String, crate::supervisor::conf::AppConf>,
    pub upstreams: &'a BTreeSet<String>,
}

impl Targets<'_> {
    pub fn check(&self, pass: &Pass, path: &JsonPath) -> Result<(), ConfigError> {
        let Pass::Fixed(target) = pass else {
            return Ok(());
        };
        let (exists, what) = match target {
            PassTarget::Route(n) => (self.routes.contains_key(n), route_label(n)),
            PassTarget::Application(n, None) => (
                self.applications.contains_key(n),
                format!("application \"{n}\""),
            ),
            PassTarget::Application(n, Some(t)) => (
                self.applications
                    .get(n)
                    .is_some_and(|a| a.kind.has_target(t)),
                format!("target \"{t}\" of application \"{n}\""),
            ),
            PassTarget::Upstream(n) => (self.upstreams.contains(n), format!("upstream \"{n}\"")),
        };
        if exists {
            Ok(())
        } else {
            Err(path.error(format!("{what} does not exist")))
        }
    }
}

fn route_label(name: &str) -> String {
    if name.is_empty() {
        "the route array \"routes\"".to_owned()
    } else {
        format!("route \"{name}\"")
    }
}

/// Rejects a route that can pass back to itself: such a request would loop forever.
pub fn check_cycles(routes: &Routes, passes: &Passes) -> Result<(), ConfigError> {
    let edges = |name: &str| -> Vec<(String, JsonPath)> {
        let prefix = if name.is_empty() {
            "routes/".to_owned()
        } else {
            format!("routes/{name}/")
        };
        passes
            .iter()
            .filter(|(_, p, rewrites)| {
                !rewrites && p.as_str().starts_with(&prefix) && belongs_to(p.as_str(), name, routes)
            })
            .filter_map(|(pass, p, _)| match pass {
                Pass::Fixed(PassTarget::Route(to)) => Some((to.clone(), p.clone())),
                _ => None,
            })
            .collect()
    };
    for start in routes.keys() {
        let mut stack = vec![(start.clone(), 0usize)];
        let mut seen = BTreeSet::new();
        while let Some((node, depth)) = stack.pop() {
            for (to, p) in edges(&node) {
                if &to == start {
                    return Err(p.error(format!("passing to {} makes a loop", route_label(&to))));
                }
                if seen.insert(to.clone()) && depth < routes.len() {
                    stack.push((to, depth + 1));
                }
            }
        }
    }
    Ok(())
}

/// Whether a pass found at `path` sits inside route `name` (named routes' paths start with their name;
/// the array form's paths start with an index).
fn belongs_to(path: &str, name: &str, routes: &Routes) -> bool {
    let rest = &path["routes/".len()..];
    if name.is_empty() {
        routes.len() == 1
            && rest
                .split('/')
                .next()
                .is_some_and(|s| s.parse::<usize>().is_ok())
    } else {
        rest.starts_with(&format!("{name}/"))
    }
}
