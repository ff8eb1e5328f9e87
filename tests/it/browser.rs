//! A real browser for the dashboard tests: Debian's headless Chromium driven through chromedriver's W3C
//! WebDriver endpoints (plain HTTP and JSON, so no client library is needed).

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::harness::{DEADLINE, read_response};

/// A chromedriver and one browser session, both ended on drop.
pub struct Browser {
    driver: Child,
    port: u16,
    session: String,
}

impl Browser {
    pub fn start() -> Browser {
        // Its own process group: Chromium's helper processes outlive a closed session and a killed driver, so
        // the whole group is killed when the test ends.
        let mut driver = Command::new("chromedriver")
            .arg("--port=0")
            .process_group(0)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver is needed by the dashboard tests (Debian's chromium-driver)");
        let port = driver_port(driver.stdout.take().expect("chromedriver's output"));
        let mut browser = Browser {
            driver,
            port,
            session: String::new(),
        };
        let options = json!({"args": [
            "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
            "--window-size=1400,1000", "--no-first-run", "--disable-extensions"
        ]});
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome", "goog:chromeOptions": options
        }}});
        let answer = browser.call("POST", "/session", Some(caps));
        browser.session = answer["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no browser session: {answer}"))
            .to_owned();
        browser
    }

    pub fn goto(&self, url: &str) {
        self.call_session("POST", "/url", Some(json!({"url": url})));
    }

    /// The value a script returns (`return …`), run in the page.
    pub fn eval(&self, script: &str) -> Value {
        self.call_session(
            "POST",
            "/execute/sync",
            Some(json!({"script": script, "args": []})),
        )
    }

    /// Clicks the first element `css` selects.
    pub fn click(&self, css: &str) {
        let found = self.call_session(
            "POST",
            "/element",
            Some(json!({"using": "css selector", "value": css})),
        );
        let id = found
            .as_object()
            .and_then(|o| o.values().next())
            .and_then(Value::as_str)
            .unwrap_or_else(|| panic!("no element {css}: {found}"))
            .to_owned();
        self.call_session("POST", &format!("/element/{id}/click"), Some(json!({})));
    }

    /// Waits until `script` returns true in the page; fails with what the page's body shows.
    pub fn wait_for(&self, what: &str, script: &str) {
        let deadline = Instant::now() + DEADLINE;
        while self.eval(script) != Value::Bool(true) {
            if Instant::now() > deadline {
                let body = self.eval("return document.body ? document.body.innerText : ''");
                panic!(
                    "timed out waiting for {what}; the page shows:\n{}",
                    body.as_str().unwrap_or("")
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn delete_cookies(&self) {
        self.call_session("DELETE", "/cookie", None);
    }

    /// A PNG of the window.
    pub fn screenshot(&self) -> Vec<u8> {
        let b64 = self.call_session("GET", "/screenshot", None);
        decode_base64(b64.as_str().expect("a base64 screenshot"))
    }

    fn call_session(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        self.call(method, &format!("/session/{}{path}", self.session), body)
    }

    /// One WebDriver command: its `value`, or a panic naming the WebDriver error.
    fn call(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).expect("chromedriver");
        s.set_read_timeout(Some(DEADLINE * 2)).unwrap();
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n",
            self.port,
            body.len()
        );
        s.write_all(head.as_bytes()).unwrap();
        s.write_all(body.as_bytes()).unwrap();
        // chromedriver keeps the connection open whatever the request says: the answer ends by its length.
        let answer = read_response(&mut BufReader::new(s), false)
            .unwrap_or_else(|| panic!("WebDriver {method} {path}: no answer"));
        let text = answer.text();
        let doc: Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("WebDriver {method} {path}: {e}: {text}"));
        let value = doc["value"].clone();
        if let Some(error) = value.get("error") {
            panic!("WebDriver {method} {path}: {error}: {}", value["message"]);
        }
        value
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let session = std::mem::take(&mut self.session);
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                self.call("DELETE", &format!("/session/{session}"), None)
            }));
        }
        let group = nix::unistd::Pid::from_raw(-(self.driver.id() as i32));
        let _ = nix::sys::signal::kill(group, nix::sys::signal::Signal::SIGKILL);
        let _ = self.driver.wait();
    }
}

/// The port chromedriver chose (`--port=0`), from its first lines; the rest of its output is drained.
fn driver_port(stdout: std::process::ChildStdout) -> u16 {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            // "Starting ChromeDriver … on port 0" comes first; the port chosen comes with "started".
            if !line.contains("started successfully") {
                continue;
            }
            if let Some(port) = line
                .split("on port ")
                .nth(1)
                .and_then(|p| p.trim_end_matches('.').parse::<u16>().ok())
            {
                let _ = tx.send(port);
            }
        }
    });
    rx.recv_timeout(DEADLINE)
        .expect("chromedriver did not say which port it listens on")
}

fn decode_base64(text: &str) -> Vec<u8> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0);
    for c in text
        .bytes()
        .filter(|c| *c != b'=' && !c.is_ascii_whitespace())
    {
        let v = ALPHABET.iter().position(|a| *a == c).expect("base64") as u32;
        acc = (acc << 6) | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    out
}
