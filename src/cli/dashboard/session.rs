//! Who may use the dashboard: the browser that first opens the one-time link `rein dashboard` printed.
//!
//! The link's token is spent on its first use and exchanged for a session cookie (HttpOnly, SameSite=Strict),
//! so a link that leaks afterwards (a shell history, a screen share) opens nothing. Every later request must
//! carry the cookie, name this address in `Host` (a page whose name was made to resolve to 127.0.0.1 sends
//! its own name: DNS rebinding) and, for a change, come from this origin.

use std::sync::Mutex;

use crate::control::token;

/// The cookie's name.
pub(super) const COOKIE: &str = "rein_dashboard";

pub(super) struct Session {
    /// The link's token until it is redeemed.
    link: Mutex<Option<String>>,
    /// The cookie's value handed to the browser that redeemed it.
    secret: String,
    /// `127.0.0.1:PORT`: the only `Host` accepted, and the origin of changes.
    host: String,
}

/// Why a request is refused.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Refusal {
    /// `Host` names another address (421).
    Host,
    /// No valid session, or a change from another origin (403).
    Forbidden,
}

impl Session {
    pub(super) fn new(host: String) -> std::io::Result<Session> {
        Ok(Session {
            link: Mutex::new(Some(token::random_hex(16)?)),
            secret: token::random_hex(32)?,
            host,
        })
    }

    /// The URL to print: the one-time link.
    pub(super) fn link(&self) -> String {
        let link = self.link.lock().unwrap_or_else(|e| e.into_inner());
        format!(
            "http://{}/?token={}",
            self.host,
            link.as_deref().unwrap_or("")
        )
    }

    /// Spends the link's token: the `Set-Cookie` value for the browser that presented it, once.
    pub(super) fn redeem(&self, presented: &str) -> Option<String> {
        let mut link = self.link.lock().unwrap_or_else(|e| e.into_inner());
        let valid = link
            .as_deref()
            .is_some_and(|t| token::matches(presented.as_bytes(), t.as_bytes()));
        if !valid {
            return None;
        }
        *link = None;
        Some(format!(
            "{COOKIE}={}; HttpOnly; SameSite=Strict; Path=/",
            self.secret
        ))
    }

    /// Whether a request may be served: its `Host`, its `Cookie` lines, and for a change its `Origin`.
    pub(super) fn check(
        &self,
        host: Option<&str>,
        cookies: &[&str],
        change: bool,
        origin: Option<&str>,
    ) -> Result<(), Refusal> {
        if !self.host_matches(host) {
            return Err(Refusal::Host);
        }
        if !cookies.iter().any(|line| self.holds_secret(line)) {
            return Err(Refusal::Forbidden);
        }
        if change && origin.is_some_and(|o| o != format!("http://{}", self.host)) {
            return Err(Refusal::Forbidden);
        }
        Ok(())
    }

    /// `Host` as the link names it, or `localhost` with the same port.
    pub(super) fn host_matches(&self, host: Option<&str>) -> bool {
        let Some(host) = host else { return false };
        let port = self.host.rsplit_once(':').map_or("", |(_, p)| p);
        host == self.host || host == format!("localhost:{port}")
    }

    fn holds_secret(&self, line: &str) -> bool {
        line.split(';').any(|pair| {
            pair.trim()
                .strip_prefix(COOKIE)
                .and_then(|rest| rest.strip_prefix('='))
                .is_some_and(|v| token::matches(v.as_bytes(), self.secret.as_bytes()))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session() -> Session {
        Session::new("127.0.0.1:4000".into()).unwrap()
    }

    fn token_of(s: &Session) -> String {
        s.link().rsplit_once("token=").unwrap().1.to_owned()
    }

    fn cookie_of(set_cookie: &str) -> String {
        set_cookie.split(';').next().unwrap().to_owned()
    }

    #[test]
    fn the_link_is_spent_on_its_first_use() {
        let s = session();
        let token = token_of(&s);
        assert_eq!(s.redeem("wrong"), None);
        let set = s.redeem(&token).expect("first use");
        assert!(
            set.contains("HttpOnly") && set.contains("SameSite=Strict"),
            "{set}"
        );
        assert_eq!(s.redeem(&token), None, "second use");
    }

    #[test]
    fn requests_need_the_cookie_this_host_and_for_changes_this_origin() {
        let s = session();
        let cookie = cookie_of(&s.redeem(&token_of(&s)).unwrap());
        let host = Some("127.0.0.1:4000");
        let with = ["theme=dark; ".to_owned() + &cookie];
        let with: Vec<&str> = with.iter().map(String::as_str).collect();
        assert_eq!(s.check(host, &with, false, None), Ok(()));
        assert_eq!(s.check(Some("localhost:4000"), &with, false, None), Ok(()));
        assert_eq!(
            s.check(Some("evil.example:4000"), &with, false, None),
            Err(Refusal::Host)
        );
        assert_eq!(s.check(None, &with, false, None), Err(Refusal::Host));
        assert_eq!(
            s.check(host, &["rein_dashboard=00"], false, None),
            Err(Refusal::Forbidden)
        );
        assert_eq!(s.check(host, &[], false, None), Err(Refusal::Forbidden));
        let own = Some("http://127.0.0.1:4000");
        assert_eq!(s.check(host, &with, true, own), Ok(()));
        assert_eq!(s.check(host, &with, true, None), Ok(()));
        let other = Some("http://evil.example");
        assert_eq!(s.check(host, &with, true, other), Err(Refusal::Forbidden));
    }
}
