//! Drawing `rein top`'s screen: a summary line, the applications with their instances, the upstream
//! servers, an application's log when asked for, and a line for keys and messages.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style, Stylize};
use ratatui::text::Line;
use ratatui::widgets::{Block, Paragraph, Row, Table, TableState};

use super::model::{App, Screen, Server};
use crate::cli::units::{bytes, duration};

/// What the loop keeps between frames besides the readings.
pub(super) struct Ui<'a> {
    pub(super) screen: &'a Screen,
    /// The selected application, by position in `screen.apps`.
    pub(super) selected: usize,
    /// The log lines of the selected application, when its log is shown.
    pub(super) log: Option<&'a [String]>,
    pub(super) message: &'a str,
    pub(super) reachable: bool,
}

const KEYS: &str = "q quit · ↑↓ select · r reload · l log";

pub(super) fn draw(frame: &mut Frame, ui: &Ui) {
    let log_height = if ui.log.is_some() { 12 } else { 0 };
    let upstream_height = match ui.screen.upstreams.len() {
        0 => 0,
        n => n.min(8) as u16 + 3,
    };
    let [summary, apps, upstreams, log, footer] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(4),
        Constraint::Length(upstream_height),
        Constraint::Length(log_height),
        Constraint::Length(1),
    ])
    .areas(frame.area());
    frame.render_widget(Paragraph::new(summary_line(ui)), summary);
    draw_apps(frame, apps, ui);
    if upstream_height > 0 {
        frame.render_widget(servers_table(&ui.screen.upstreams), upstreams);
    }
    if let Some(lines) = ui.log {
        draw_log(frame, log, ui, lines);
    }
    let footer_text = if ui.message.is_empty() {
        KEYS.to_owned()
    } else {
        format!("{} · {KEYS}", ui.message)
    };
    frame.render_widget(Paragraph::new(footer_text).dim(), footer);
}

fn summary_line(ui: &Ui) -> Line<'static> {
    let s = ui.screen;
    if !ui.reachable {
        return Line::from("rein top · the control API does not answer (retrying)").bold();
    }
    let rate = s
        .requests_per_s
        .map_or_else(|| "–".to_owned(), |r| format!("{r:.0}"));
    Line::from(format!(
        "rein top · {rate} req/s · {} requests · connections {} active, {} idle",
        s.requests_total, s.connections_active, s.connections_idle
    ))
    .bold()
}

fn draw_apps(frame: &mut Frame, area: Rect, ui: &Ui) {
    let header = Row::new([
        "APP", "ID", "PID", "STATE", "UPTIME", "↺", "CPU", "MEMORY", "REQ/S", "REQUESTS", "ACTIVE",
    ])
    .style(Style::new().add_modifier(Modifier::BOLD));
    let mut rows = Vec::new();
    let mut selected_row = None;
    for (n, app) in ui.screen.apps.iter().enumerate() {
        if n == ui.selected {
            selected_row = Some(rows.len());
        }
        rows.push(app_row(app));
        rows.extend(app.instances.iter().map(|i| {
            Row::new([
                String::new(),
                i.id.to_string(),
                i.pid.map_or_else(String::new, |p| p.to_string()),
                i.state.clone(),
                i.uptime_s.map_or_else(String::new, duration),
                i.restarts.to_string(),
                i.cpu_percent
                    .map_or_else(String::new, |c| format!("{c:.1}%")),
                i.rss_bytes.map_or_else(String::new, bytes),
                i.requests_per_s
                    .map_or_else(String::new, |r| format!("{r:.0}")),
                i.requests.to_string(),
                i.in_flight.to_string(),
            ])
        }));
    }
    let widths = [
        Constraint::Min(12),
        Constraint::Length(5),
        Constraint::Length(8),
        Constraint::Length(10),
        Constraint::Length(8),
        Constraint::Length(4),
        Constraint::Length(7),
        Constraint::Length(9),
        Constraint::Length(7),
        Constraint::Length(10),
        Constraint::Length(7),
    ];
    let table = Table::new(rows, widths)
        .header(header)
        .block(Block::bordered().title(" applications "))
        .row_highlight_style(Style::new().add_modifier(Modifier::REVERSED));
    let mut state = TableState::default().with_selected(selected_row);
    frame.render_stateful_widget(table, area, &mut state);
}

fn app_row(app: &App) -> Row<'static> {
    let state = match &app.errored {
        Some(reason) => format!("errored: {reason}"),
        None => app.state.clone(),
    };
    let mut cells = vec![app.name.clone(), String::new(), String::new(), state];
    cells.resize(11, String::new());
    cells[4] = format!("gen {}", app.generation);
    Row::new(cells).style(Style::new().add_modifier(Modifier::BOLD))
}

fn servers_table(servers: &[Server]) -> Table<'static> {
    let header = Row::new(["UPSTREAM", "SERVER", "STATE", "ACTIVE", "FAILURES", "REQ/S"])
        .style(Style::new().add_modifier(Modifier::BOLD));
    let rows = servers.iter().map(|s| {
        Row::new([
            s.upstream.clone(),
            s.address.clone(),
            s.state.clone(),
            s.active.to_string(),
            s.failures.to_string(),
            s.requests_per_s
                .map_or_else(String::new, |r| format!("{r:.0}")),
        ])
    });
    let widths = [
        Constraint::Min(12),
        Constraint::Min(22),
        Constraint::Length(12),
        Constraint::Length(7),
        Constraint::Length(9),
        Constraint::Length(7),
    ];
    Table::new(rows, widths)
        .header(header)
        .block(Block::bordered().title(" upstreams "))
}

fn draw_log(frame: &mut Frame, area: Rect, ui: &Ui, lines: &[String]) {
    let name = ui
        .screen
        .apps
        .get(ui.selected)
        .map_or("", |a| a.name.as_str());
    let shown = area.height.saturating_sub(2) as usize;
    let tail = &lines[lines.len().saturating_sub(shown)..];
    let text: Vec<Line> = tail.iter().map(|l| Line::from(l.clone())).collect();
    let block = Block::bordered().title(format!(" log: {name} "));
    frame.render_widget(Paragraph::new(text).block(block), area);
}
