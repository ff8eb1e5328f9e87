//! `rein dashboard` in a real browser (headless Chromium through chromedriver): the one-time link, live
//! numbers under load, a reload from the page, an application's log, and refusal without the link.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use super::*;
use crate::browser::Browser;

/// A running `rein dashboard`, stopped on drop.
struct Dashboard {
    child: Child,
    link: String,
}

impl Dashboard {
    fn start(rein: &Rein) -> Dashboard {
        let mut child = Command::new(env!("CARGO_BIN_EXE_rein"))
            .args(["dashboard", "--interval", "0.25", "--state"])
            .arg(&rein.state)
            .env_remove("REIN_CONTROL")
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let link = line
            .split_whitespace()
            .find(|w| w.starts_with("http://"))
            .unwrap_or_else(|| panic!("no link in {line:?}"))
            .to_owned();
        Dashboard { child, link }
    }

    /// The page's address without the token.
    fn base(&self) -> String {
        self.link.split("/?").next().unwrap().to_owned()
    }
}

impl Drop for Dashboard {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn number(browser: &Browser, css: &str) -> f64 {
    let text = browser.eval(&format!(
        "return document.querySelector('{css}').textContent"
    ));
    text.as_str()
        .unwrap_or("")
        .replace(',', "")
        .parse()
        .unwrap_or(f64::NAN)
}

#[test]
fn the_dashboard_follows_the_server_live_and_reloads_an_app() {
    let rein = Rein::start();
    let addr = serve_one(&rein, "py", python_app("v1", &[], json!({"processes": 2})));
    let pids = wait_ready(&rein, "py", 2);
    let dashboard = Dashboard::start(&rein);
    let browser = Browser::start();

    browser.goto(&dashboard.link);
    for pid in &pids {
        browser.wait_for(
            &format!("instance {pid} on the page"),
            &format!("return !!document.querySelector('[data-app=\"py\"] [data-pid=\"{pid}\"]')"),
        );
    }
    browser.wait_for(
        "the stream to be live",
        "return document.querySelector('#conn').textContent === 'live'",
    );

    // Under load the request count climbs and the rate shows it.
    let before = number(&browser, "#requests");
    let load = Load::start(addr, &["/", "/"]);
    browser.wait_for(
        "a rate above zero",
        "return Number(document.querySelector('#rps').textContent.replace(/,/g, '')) > 0",
    );
    browser.wait_for(
        "the request count to climb",
        &format!("return Number(document.querySelector('#requests').textContent.replace(/,/g, '')) > {before} + 50"),
    );
    // The route target's requests, from the metrics, by status class.
    browser.wait_for(
        "the app's route target with its 2xx count",
        "const row = document.querySelector('[data-target=\"applications/py\"]'); \
         return !!row && Number(row.cells[2].textContent.replace(/,/g, '')) > 0",
    );
    if let Ok(path) = std::env::var("REIN_DASHBOARD_SCREENSHOT") {
        std::fs::write(path, browser.screenshot()).unwrap();
    }
    let (ok, failures) = load.finish();
    assert_no_failures(&ok, &failures);

    // The page's Reload button: a rolling reload, the new generation on the page.
    let generation = status(&rein, "py")["generation"].as_u64().unwrap();
    browser.click("button[data-action='reload'][data-app='py']");
    browser.wait_for(
        "the reload to be done",
        "return document.querySelector('#message').textContent.includes('reload of py: done')",
    );
    assert_eq!(
        status(&rein, "py")["generation"].as_u64(),
        Some(generation + 1)
    );
    browser.wait_for(
        "the new generation on the page",
        &format!(
            "return document.querySelector('[data-app=\"py\"] [data-role=\"generation\"]').textContent === '{}'",
            generation + 1
        ),
    );

    // An instance's Restart button: that instance replaced, the other one untouched.
    let ready = instances(&rein, "py");
    let (victim, kept) = (pid_of(&ready[0]), pid_of(&ready[1]));
    let victim_id = ready[0]["id"].as_u64().unwrap();
    browser.click(&format!(
        "button[data-action='restart'][data-app='py'][data-id='{victim_id}']"
    ));
    browser.wait_for(
        "the instance's restart to be done",
        &format!("return document.querySelector('#message').textContent.includes('restart of py instance {victim_id}: done')"),
    );
    let after = wait_ready(&rein, "py", 2);
    assert!(
        after.contains(&kept) && !after.contains(&victim),
        "{after:?}"
    );

    // The Log button: the application's own output.
    browser.click("button[data-action='log'][data-app='py']");
    browser.wait_for(
        "the app's log",
        "return document.querySelector('#log').textContent.includes('start v1 pid=')",
    );

    // A configuration change shows in the history; rolling back to the entry before it, from the page,
    // puts the earlier document back.
    let (code, body) = rein.api("PUT", "/config/routes/0/action/return", Some("205"));
    assert_eq!(code, 200, "{body}");
    let history = rein.api("GET", "/history", None).1;
    let earlier = history[1]["id"].as_u64().expect("an earlier entry");
    browser.wait_for(
        "the earlier entry's rollback button",
        &format!("return !!document.querySelector(\"button[data-action='rollback'][data-id='{earlier}']\")"),
    );
    browser.click(&format!(
        "button[data-action='rollback'][data-id='{earlier}']"
    ));
    browser.wait_for(
        "the rollback to be done",
        &format!("return document.querySelector('#message').textContent.includes('rollback to {earlier}: done')"),
    );
    let (_, action) = rein.api("GET", "/config/routes/0/action/return", None);
    assert_eq!(action, json!(204), "the earlier document is back");

    // Without the session cookie, and with the spent link, nothing is shown.
    browser.delete_cookies();
    browser.goto(&dashboard.base());
    browser.wait_for(
        "a refusal",
        "return document.body.innerText.includes('Open the link')",
    );
    browser.goto(&dashboard.link);
    browser.wait_for(
        "the spent link refused",
        "return document.body.innerText.includes('Open the link')",
    );
}
