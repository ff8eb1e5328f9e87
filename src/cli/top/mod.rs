//! `rein top`: a live terminal view of a running server, as `pm2 monit` gives: the applications and their
//! instances (state, CPU, memory, restarts, requests), the upstream servers' health, and requests per second,
//! read from `/status` at each interval. Keys reload the selected application or show its log.
//!
//! CPU and memory come from `/proc` of the processes `/status` names, so they show when `rein top` runs on
//! the server's machine; elsewhere those columns stay empty.

mod model;
mod view;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};

use super::client::{self, Target};
use super::exit;
use model::{Reading, Screen};

pub(super) fn run(target: Target, state: PathBuf, interval: Duration) -> ExitCode {
    let runtime = match client::runtime() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("rein: {e}");
            return ExitCode::from(exit::FAILED);
        }
    };
    // Fail before taking over the terminal when there is no server to show.
    if let Err(e) = runtime.block_on(client::get(&target, "/status")) {
        eprintln!("rein: {e}\n(is `rein run` running with the same --state or --control?)");
        return ExitCode::from(exit::UNREACHABLE);
    }
    let mut terminal = ratatui::init();
    let outcome = Top::new(target, state).run(&runtime, &mut terminal, interval);
    ratatui::restore();
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rein: {e}");
            ExitCode::from(exit::FAILED)
        }
    }
}

/// The loop's state between frames.
struct Top {
    target: Target,
    state: PathBuf,
    previous: Option<Reading>,
    latest: Option<Reading>,
    screen: Screen,
    reachable: bool,
    selected: usize,
    /// The application whose log is shown, if any.
    log_of: Option<String>,
    log: Vec<String>,
    message: String,
    /// Answers of reloads running on their own threads (a reload can take as long as an app takes to start).
    reloads: (mpsc::Sender<String>, mpsc::Receiver<String>),
}

impl Top {
    fn new(target: Target, state: PathBuf) -> Top {
        Top {
            target,
            state,
            previous: None,
            latest: None,
            screen: Screen::default(),
            reachable: true,
            selected: 0,
            log_of: None,
            log: Vec::new(),
            message: String::new(),
            reloads: mpsc::channel(),
        }
    }

    fn run(
        mut self,
        runtime: &tokio::runtime::Runtime,
        terminal: &mut ratatui::DefaultTerminal,
        interval: Duration,
    ) -> std::io::Result<()> {
        let mut next = Instant::now();
        loop {
            if Instant::now() >= next {
                self.read(runtime);
                next = Instant::now() + interval;
            }
            while let Ok(answer) = self.reloads.1.try_recv() {
                self.message = answer;
            }
            terminal.draw(|frame| {
                let ui = view::Ui {
                    screen: &self.screen,
                    selected: self.selected,
                    log: self.log_of.as_ref().map(|_| self.log.as_slice()),
                    message: &self.message,
                    reachable: self.reachable,
                };
                view::draw(frame, &ui);
            })?;
            let wait = next.saturating_duration_since(Instant::now());
            if event::poll(wait)? && !self.key(event::read()?) {
                return Ok(());
            }
        }
    }

    /// Takes a reading of `/status` and of the shown log.
    fn read(&mut self, runtime: &tokio::runtime::Runtime) {
        match runtime.block_on(client::get(&self.target, "/status")) {
            Ok((status, text)) if status.is_success() => {
                match serde_json::from_str(&text) {
                    Ok(doc) => {
                        self.previous = self.latest.take();
                        self.latest = Some(Reading::new(doc));
                    }
                    Err(e) => self.message = format!("unreadable /status: {e}"),
                }
                self.reachable = true;
            }
            Ok((status, _)) => self.message = format!("/status answered {status}"),
            Err(_) => self.reachable = false,
        }
        if let Some(latest) = &self.latest {
            self.screen = model::screen(self.previous.as_ref(), latest);
        }
        self.selected = self.selected.min(self.screen.apps.len().saturating_sub(1));
        if let Some(name) = &self.log_of {
            self.log = super::tail::app_lines(&self.state, name);
        }
    }

    /// Acts on a key; false when it asks to quit.
    fn key(&mut self, ev: Event) -> bool {
        let Event::Key(key) = ev else { return true };
        if key.kind != KeyEventKind::Press {
            return true;
        }
        match key.code {
            KeyCode::Char('q') | KeyCode::Esc => return false,
            KeyCode::Char('c') if key.modifiers.contains(KeyModifiers::CONTROL) => return false,
            KeyCode::Down | KeyCode::Char('j') => {
                self.selected = (self.selected + 1).min(self.screen.apps.len().saturating_sub(1));
                self.follow_selected();
            }
            KeyCode::Up | KeyCode::Char('k') => {
                self.selected = self.selected.saturating_sub(1);
                self.follow_selected();
            }
            KeyCode::Char('r') => self.reload(),
            KeyCode::Char('l') => {
                self.log_of = match self.log_of {
                    Some(_) => None,
                    None => self.selected_name(),
                };
                self.follow_selected();
            }
            _ => {}
        }
        true
    }

    fn selected_name(&self) -> Option<String> {
        self.screen.apps.get(self.selected).map(|a| a.name.clone())
    }

    /// Keeps the log pane on the selected application.
    fn follow_selected(&mut self) {
        if self.log_of.is_some() {
            self.log_of = self.selected_name();
            if let Some(name) = &self.log_of {
                self.log = super::tail::app_lines(&self.state, name);
            }
        }
    }

    /// Starts a rolling reload of the selected application; its outcome arrives as a message.
    fn reload(&mut self) {
        let Some(name) = self.selected_name() else {
            return;
        };
        self.message = format!("reloading {name}…");
        let target = self.target.clone();
        let answers = self.reloads.0.clone();
        std::thread::spawn(move || {
            let path = format!(
                "/control/applications/{}/restart",
                super::encode_segment(&name)
            );
            let outcome = client::fetch(&target, http::Method::GET, &path, None, None);
            let _ = answers.send(match outcome {
                Ok(_) => format!("{name} reloaded"),
                Err(failure) => format!("{name}: reload failed: {failure}"),
            });
        });
    }
}
