//! `gpuspan top`: the live dashboard of seed 003 (§6.1–6.2), attached to running programs.
//!
//! One screen: a line of processes (several ranks of one job at once; Tab switches), the chosen
//! process's sites over the feed's window (sortable, filterable), and a panel per device: GPU
//! and memory-busy bars, the VRAM bar in the seed's colours (green, yellow over 70 %, red over
//! 90 %), power against its limit, the temperature with the seed's band (COOL to 50 °C, WARM to
//! 70, HOT to 85, CRITICAL above), SM and memory clocks, PCIe rx/tx, throttle reasons and a
//! sparkline of the last 60 s of utilization. What is drawn is built here as plain lines and
//! rows, so that tests read it from ratatui's test backend.

mod device_panel;
mod sites;

pub use device_panel::{device_lines, temperature_band, vram_color};
pub use sites::{cells, sites_table, snapshot_text, SortKey, View, COLUMNS};

use crate::live::{self, Connection, Endpoint};
use crate::table;
use gpuspan_capture::live::{Device, Snapshot};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Row, Sparkline, Table as TableWidget, Wrap};
use ratatui::Frame;
use std::collections::BTreeMap;
use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

/// One process as the dashboard knows it.
#[derive(Debug, Clone)]
pub struct Process {
    pub endpoint: Endpoint,
    /// The newest snapshot.
    pub snapshot: Option<Snapshot>,
    /// Why the newest request failed, if it did.
    pub error: Option<String>,
    /// Its process has ended (the last snapshot stays on screen).
    pub ended: bool,
}

impl Process {
    fn label(&self) -> String {
        let name = self.snapshot.as_ref().map_or_else(|| self.endpoint.label(), |s| s.program.clone());
        format!("{}:{}{}", table::shown(&name), self.endpoint.pid, if self.ended { " (ended)" } else { "" })
    }
}

/// Everything on screen.
#[derive(Debug, Default)]
pub struct App {
    pub processes: Vec<Process>,
    pub selected: usize,
    pub view: View,
    pub paused: bool,
    /// Typing a filter after `/`.
    pub editing: bool,
    pub quit: bool,
    /// Where processes are looked for (for the empty screen's message).
    pub dirs: Vec<PathBuf>,
}

impl App {
    /// Takes the fetcher's news (unless paused): new processes, new snapshots, ended ones.
    pub fn update(&mut self, news: Vec<Process>) {
        if self.paused {
            return;
        }
        let chosen = self.processes.get(self.selected).map(|p| p.endpoint.clone());
        let mut by_path: BTreeMap<PathBuf, Process> =
            self.processes.drain(..).map(|p| (p.endpoint.path.clone(), p)).collect();
        for mut p in news {
            if let Some(old) = by_path.get(&p.endpoint.path) {
                // A failed request keeps the last snapshot on screen.
                if p.snapshot.is_none() {
                    p.snapshot = old.snapshot.clone();
                }
            }
            by_path.insert(p.endpoint.path.clone(), p);
        }
        let mut all: Vec<Process> = by_path.into_values().collect();
        all.sort_by_key(|p| (p.ended, p.endpoint.pid));
        self.processes = all;
        self.selected = chosen
            .and_then(|c| self.processes.iter().position(|p| p.endpoint == c))
            .unwrap_or(0)
            .min(self.processes.len().saturating_sub(1));
    }

    /// Acts on a key: see [`HELP`].
    pub fn key(&mut self, code: crossterm::event::KeyCode, modifiers: crossterm::event::KeyModifiers) {
        use crossterm::event::{KeyCode, KeyModifiers};
        if modifiers.contains(KeyModifiers::CONTROL) && code == KeyCode::Char('c') {
            self.quit = true;
            return;
        }
        if self.editing {
            match code {
                KeyCode::Enter => self.editing = false,
                KeyCode::Esc => {
                    self.editing = false;
                    self.view.filter.clear();
                }
                KeyCode::Backspace => {
                    self.view.filter.pop();
                }
                KeyCode::Char(c) => self.view.filter.push(c),
                _ => {}
            }
            return;
        }
        let n = self.processes.len().max(1);
        match code {
            KeyCode::Char('q') | KeyCode::Esc => self.quit = true,
            KeyCode::Char('s') | KeyCode::Char('>') => self.view.sort = self.view.sort.next(1),
            KeyCode::Char('S') | KeyCode::Char('<') => self.view.sort = self.view.sort.next(-1),
            KeyCode::Char('r') => self.view.reversed = !self.view.reversed,
            KeyCode::Char('p') | KeyCode::Char(' ') => self.paused = !self.paused,
            KeyCode::Char('/') => self.editing = true,
            KeyCode::Tab | KeyCode::Right => self.selected = (self.selected + 1) % n,
            KeyCode::BackTab | KeyCode::Left => self.selected = (self.selected + n - 1) % n,
            KeyCode::Char(c @ '1'..='9') => {
                let i = c as usize - '1' as usize;
                if i < self.processes.len() {
                    self.selected = i;
                }
            }
            _ => {}
        }
    }
}

/// The help line.
pub const HELP: &str = "q quit  s/S sort  r reverse  / filter  p pause  tab/1-9 process";

/// Draws the whole screen.
pub fn draw(frame: &mut Frame<'_>, app: &App) {
    let area = frame.area();
    let current = app.processes.get(app.selected);
    let devices = current.and_then(|p| p.snapshot.as_ref()).map_or(&[][..], |s| &s.devices[..]);
    let columns = if area.width >= 150 { 2 } else { 1 };
    let device_rows = devices.len().div_ceil(columns) as u16;
    let device_height = if devices.is_empty() { 3 } else { (device_rows * 11).min(area.height / 2) };
    let [top, sites, devs, notes, help] = Layout::vertical([
        Constraint::Length(2),
        Constraint::Min(5),
        Constraint::Length(device_height),
        Constraint::Length(1),
        Constraint::Length(1),
    ])
    .areas(area);

    frame.render_widget(Paragraph::new(header_lines(app)), top);
    match current.and_then(|p| p.snapshot.as_ref()) {
        Some(s) => draw_sites(frame, sites, s, app),
        None => {
            let text = match current {
                Some(p) => format!("waiting for {}: {}", p.label(), p.error.as_deref().unwrap_or("connecting")),
                None => format!(
                    "no live gpuspan process: start one with GPUSPAN_LIVE=1 (looking in {})",
                    app.dirs.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(", ")
                ),
            };
            frame.render_widget(
                Paragraph::new(text).wrap(Wrap { trim: true }).block(Block::bordered().title(" Sites ")),
                sites,
            );
        }
    }
    draw_devices(frame, devs, current.and_then(|p| p.snapshot.as_ref()), columns);
    let note = current.and_then(|p| p.snapshot.as_ref()).map(notes_line).unwrap_or_default();
    frame.render_widget(Paragraph::new(note).style(Style::default().fg(Color::Yellow)), notes);
    let help_line =
        if app.editing { format!("filter: {}▏  (enter keep, esc clear)", app.view.filter) } else { HELP.to_owned() };
    frame.render_widget(Paragraph::new(help_line).style(Style::default().add_modifier(Modifier::REVERSED)), help);
}

fn header_lines(app: &App) -> Vec<Line<'static>> {
    let mut tabs = vec![Span::styled("gpuspan top ", Style::default().add_modifier(Modifier::BOLD))];
    for (i, p) in app.processes.iter().enumerate() {
        let style = if i == app.selected {
            Style::default().add_modifier(Modifier::REVERSED)
        } else if p.ended {
            Style::default().fg(Color::DarkGray)
        } else {
            Style::default()
        };
        tabs.push(Span::raw(" "));
        tabs.push(Span::styled(format!("[{}] {}", i + 1, p.label()), style));
    }
    let mut status = Vec::new();
    if let Some(s) = app.processes.get(app.selected).and_then(|p| p.snapshot.as_ref()) {
        let up = s.time_ns.saturating_sub(s.started_ns) / 1_000_000_000;
        status.push(Span::raw(format!(
            "window {:.1} s · up {}:{:02}:{:02} · {} site(s) · gpuspan {}",
            s.window_s,
            up / 3600,
            up / 60 % 60,
            up % 60,
            s.sites.len(),
            s.writer
        )));
        if s.off {
            status.push(Span::styled("  GPUSPAN=off", Style::default().fg(Color::Red)));
        }
    }
    if app.paused {
        status.push(Span::styled("  PAUSED", Style::default().fg(Color::Black).bg(Color::Yellow)));
    }
    if !app.view.filter.is_empty() {
        status.push(Span::raw(format!("  filter \"{}\"", app.view.filter)));
    }
    vec![Line::from(tabs), Line::from(status)]
}

fn draw_sites(frame: &mut Frame<'_>, area: Rect, snapshot: &Snapshot, app: &App) {
    let header = Row::new(app.view.header().into_iter().map(Cell::from))
        .style(Style::default().add_modifier(Modifier::BOLD | Modifier::UNDERLINED));
    let sites = app.view.sites(snapshot);
    let rows = sites.iter().map(|s| {
        let style = if s.window.errors > 0 { Style::default().fg(Color::Red) } else { Style::default() };
        Row::new(cells(s).into_iter().map(Cell::from)).style(style)
    });
    let widths = [
        Constraint::Min(14),
        Constraint::Length(6),
        Constraint::Length(8),
        Constraint::Length(6),
        Constraint::Length(6),
        Constraint::Length(9),
        Constraint::Length(9),
        Constraint::Length(10),
        Constraint::Length(10),
        Constraint::Length(5),
        Constraint::Length(9),
        Constraint::Length(16),
    ];
    let title = format!(" Sites ({} of {}) ", sites.len(), snapshot.sites.len());
    let table = TableWidget::new(rows, widths).header(header).block(Block::bordered().title(title)).column_spacing(1);
    frame.render_widget(table, area);
}

fn draw_devices(frame: &mut Frame<'_>, area: Rect, snapshot: Option<&Snapshot>, columns: usize) {
    let Some(s) = snapshot else {
        return;
    };
    if s.devices.is_empty() {
        let why = s.devices_note.as_deref().unwrap_or("no devices");
        frame.render_widget(Paragraph::new(format!("no device panels: {why}")).block(Block::bordered()), area);
        return;
    }
    let rows = s.devices.len().div_ceil(columns);
    let row_areas = Layout::vertical(vec![Constraint::Ratio(1, rows as u32); rows]).split(area);
    for (r, row_area) in row_areas.iter().enumerate() {
        let cols = Layout::horizontal(vec![Constraint::Ratio(1, columns as u32); columns]).split(*row_area);
        for (c, cell) in cols.iter().enumerate() {
            if let Some(d) = s.devices.get(r * columns + c) {
                draw_device(frame, *cell, d);
            }
        }
    }
}

fn draw_device(frame: &mut Frame<'_>, area: Rect, d: &Device) {
    let block = Block::default().borders(Borders::ALL).title(format!(" GPU {}: {} ", d.index, d.name));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let lines = device_lines(d, inner.width as usize);
    let [text, spark] = Layout::vertical([Constraint::Length(lines.len() as u16), Constraint::Min(1)]).areas(inner);
    frame.render_widget(Paragraph::new(lines), text);
    let [label, graph] = Layout::horizontal([Constraint::Length(12), Constraint::Min(1)]).areas(spark);
    // One bar per second, the newest at the right edge as the seed's history runs; seconds
    // without a reading (or before the program started) are left blank, not drawn as 0 %.
    let width = graph.width as usize;
    let newest = d.utilization_history.last().map_or(0, |p| p.time_ns / 1_000_000_000);
    let mut bars: Vec<Option<u64>> = vec![None; width];
    for p in &d.utilization_history {
        let age = newest.saturating_sub(p.time_ns / 1_000_000_000) as usize;
        if age < width {
            bars[width - 1 - age] = Some(p.gpu_utilization_pct.round() as u64);
        }
    }
    frame.render_widget(Paragraph::new(vec![Line::from("Util 60 s"), Line::from("0–100%")]), label);
    frame.render_widget(Sparkline::default().data(bars).max(100).style(Style::default().fg(Color::Green)), graph);
}

fn notes_line(s: &Snapshot) -> String {
    let mut parts: Vec<String> = s.losses.iter().map(|l| format!("lost: {} {}", l.count, l.what)).collect();
    if let Some(n) = s.notes.last() {
        parts.push(format!("note: {n}"));
    }
    parts.join(" · ")
}

/// Asks every process for a snapshot, and finds new ones, until told to stop.
fn fetch(dirs: Vec<PathBuf>, explicit: Vec<Endpoint>, interval: Duration, tx: mpsc::Sender<Vec<Process>>) {
    let mut connections: BTreeMap<PathBuf, Connection> = BTreeMap::new();
    loop {
        let started = Instant::now();
        let mut endpoints = if explicit.is_empty() { live::discover(&dirs) } else { explicit.clone() };
        endpoints.sort();
        endpoints.dedup();
        // All at once, each within its deadline: a stopped program delays no other's row.
        let asked: Vec<_> = std::thread::scope(|scope| {
            let asks: Vec<_> = endpoints
                .into_iter()
                .map(|e| {
                    let kept = connections.remove(&e.path);
                    scope.spawn(move || {
                        let result = match kept {
                            Some(c) => Ok(c),
                            None => Connection::open(&e.path),
                        }
                        .and_then(|mut c| c.snapshot().map(|(_, s)| (c, s)));
                        (e, result)
                    })
                })
                .collect();
            asks.into_iter().filter_map(|a| a.join().ok()).collect()
        });
        let mut news = Vec::new();
        for (e, result) in asked {
            match result {
                Ok((c, s)) => {
                    connections.insert(e.path.clone(), c);
                    news.push(Process { endpoint: e, snapshot: Some(s), error: None, ended: false });
                }
                Err(err) => {
                    let ended = !e.alive();
                    news.push(Process {
                        endpoint: e,
                        snapshot: None,
                        error: Some(table::shown(&err.to_string()).into_owned()),
                        ended,
                    });
                }
            }
        }
        // Processes that went away since: their sockets are gone, so they are ended.
        if tx.send(news).is_err() {
            return;
        }
        std::thread::sleep(interval.saturating_sub(started.elapsed()));
    }
}

/// Restores the terminal however the dashboard ends (return, error, panic unwinding).
struct Screen;

impl Drop for Screen {
    fn drop(&mut self) {
        let _ = ratatui::try_restore();
        let _ = crossterm::execute!(io::stdout(), crossterm::cursor::Show);
    }
}

/// Runs the dashboard until `q`, Esc or Ctrl-C (or SIGTERM/SIGHUP), then leaves the screen as
/// it was.
pub fn run(dirs: Vec<PathBuf>, explicit: Vec<Endpoint>, interval: Duration, view: View) -> io::Result<()> {
    use crossterm::event::{self, Event, KeyEventKind};
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGHUP, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(signal, stop.clone())?;
    }
    let (tx, rx) = mpsc::channel();
    {
        let (dirs, explicit) = (dirs.clone(), explicit.clone());
        std::thread::Builder::new()
            .name("gpuspan-top-fetch".into())
            .spawn(move || fetch(dirs, explicit, interval, tx))?;
    }
    let mut terminal = ratatui::try_init()?;
    let _screen = Screen;
    let mut app = App { view, dirs, ..App::default() };
    let mut seen_news = false;
    let mut previous: Vec<Process> = Vec::new();
    while !app.quit && !stop.load(Ordering::Relaxed) {
        while let Ok(mut news) = rx.try_recv() {
            // A process missing from the news was not found any more: its socket is gone.
            for old in &previous {
                if !news.iter().any(|p| p.endpoint.path == old.endpoint.path) && !old.ended {
                    let mut gone = old.clone();
                    gone.ended = true;
                    news.push(gone);
                }
            }
            previous = news.iter().filter(|p| !p.ended).cloned().collect();
            app.update(news);
            seen_news = true;
        }
        if seen_news {
            terminal.draw(|f| draw(f, &app))?;
            seen_news = false;
        }
        if event::poll(Duration::from_millis(100))? {
            match event::read()? {
                Event::Key(k) if k.kind == KeyEventKind::Press => {
                    app.key(k.code, k.modifiers);
                    terminal.draw(|f| draw(f, &app))?;
                }
                Event::Resize(..) => {
                    terminal.draw(|f| draw(f, &app))?;
                }
                _ => {}
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpuspan_capture::live::{DeviceSample, Site, UtilizationPoint, Window};
    use ratatui::backend::TestBackend;
    use ratatui::Terminal;

    fn site(name: &str, calls_per_s: f64, p99_ns: u64, errors: u64) -> Site {
        Site {
            name: name.into(),
            function: format!("demo::{name}"),
            kind: "kernel".into(),
            backend: "wgpu".into(),
            calls: (calls_per_s * 100.0) as u64,
            sources: vec!["gpu_timestamp".into()],
            window: Window {
                calls_per_s,
                p50_ns: Some(p99_ns / 2),
                p99_ns: Some(p99_ns),
                errors,
                gpu_busy: Some(0.25),
                gpu_share: Some(0.5),
                ..Window::default()
            },
            ..Site::default()
        }
    }

    fn h100(used: u64, temperature: u32) -> Device {
        Device {
            index: 0,
            name: "NVIDIA H100 80GB HBM3".into(),
            memory_total_bytes: 80 << 30,
            latest: Some(DeviceSample {
                gpu_utilization_pct: Some(78),
                memory_utilization_pct: Some(62),
                memory_used_bytes: Some(used),
                temperature_c: Some(temperature),
                power_w: Some(287.0),
                power_limit_w: Some(700.0),
                sm_clock_mhz: Some(1980),
                memory_clock_mhz: Some(2619),
                pcie_rx_bytes_per_s: Some(8.7e9),
                pcie_tx_bytes_per_s: Some(12.4e9),
                pcie_generation: Some(5),
                pcie_width: Some(16),
                throttle_reasons: Some(vec!["sw_power_cap".into()]),
                ..DeviceSample::default()
            }),
            utilization_history: (0..60)
                .map(|k| UtilizationPoint { time_ns: k * 1_000_000_000, gpu_utilization_pct: k as f64 })
                .collect(),
            ..Device::default()
        }
    }

    fn snapshot() -> Snapshot {
        Snapshot {
            program: "live_demo".into(),
            pid: 42,
            window_s: 10.0,
            sites: vec![
                site("saxpy", 30.0, 900_000, 0),
                site("relax", 15.0, 5_000_000, 2),
                site("upload", 60.0, 10_000, 0),
            ],
            devices: vec![h100(76 << 30, 67)],
            ..Snapshot::default()
        }
    }

    fn names(view: &View, s: &Snapshot) -> Vec<String> {
        view.sites(s).iter().map(|s| s.name.clone()).collect()
    }

    #[test]
    fn sorting_and_filtering() {
        let s = snapshot();
        let mut v = View::default();
        assert_eq!(names(&v, &s), ["upload", "saxpy", "relax"]);
        v.sort = SortKey::P99;
        assert_eq!(names(&v, &s), ["relax", "saxpy", "upload"]);
        assert!(v.header().contains(&"P99▼".to_owned()));
        v.reversed = true;
        assert_eq!(names(&v, &s), ["upload", "saxpy", "relax"]);
        assert!(v.header().contains(&"P99▲".to_owned()));
        v = View { sort: SortKey::Name, ..View::default() };
        assert_eq!(names(&v, &s), ["relax", "saxpy", "upload"]);
        v.filter = "DEMO::S".into();
        assert_eq!(names(&v, &s), ["saxpy"]);
    }

    #[test]
    fn keys_sort_pause_switch_and_quit() {
        use crossterm::event::{KeyCode, KeyModifiers};
        let mut app = App::default();
        let none = KeyModifiers::NONE;
        app.key(KeyCode::Char('s'), none);
        assert_eq!(app.view.sort, SortKey::Gpu);
        app.key(KeyCode::Char('S'), none);
        assert_eq!(app.view.sort, SortKey::CallsPerS);
        app.key(KeyCode::Char('p'), none);
        assert!(app.paused);
        app.key(KeyCode::Char('/'), none);
        for c in "sax".chars() {
            app.key(KeyCode::Char(c), none);
        }
        app.key(KeyCode::Enter, none);
        assert_eq!(app.view.filter, "sax");
        assert!(!app.quit);
        app.key(KeyCode::Char('c'), KeyModifiers::CONTROL);
        assert!(app.quit);
    }

    #[test]
    fn seed_colour_thresholds() {
        assert_eq!(vram_color(50.0), Color::Green);
        assert_eq!(vram_color(70.0), Color::Green);
        assert_eq!(vram_color(70.1), Color::Yellow);
        assert_eq!(vram_color(90.0), Color::Yellow);
        assert_eq!(vram_color(90.1), Color::Red);
        assert_eq!(temperature_band(50).0, "COOL");
        assert_eq!(temperature_band(51).0, "WARM");
        assert_eq!(temperature_band(85).0, "HOT");
        assert_eq!(temperature_band(86).0, "CRITICAL");
    }

    fn render(app: &App, width: u16, height: u16) -> (String, ratatui::buffer::Buffer) {
        let mut t = Terminal::new(TestBackend::new(width, height)).unwrap();
        t.draw(|f| draw(f, app)).unwrap();
        let buf = t.backend().buffer().clone();
        let text: String = (0..height)
            .map(|y| (0..width).map(|x| buf[(x, y)].symbol().to_owned()).collect::<String>() + "\n")
            .collect();
        (text, buf)
    }

    #[test]
    fn the_screen_shows_sites_and_the_seed_device_panel() {
        let mut app = App::default();
        app.update(vec![Process {
            endpoint: Endpoint { pid: 42, path: "/run/x/live_demo-42.live.sock".into() },
            snapshot: Some(snapshot()),
            error: None,
            ended: false,
        }]);
        let (text, buf) = render(&app, 160, 40);
        for want in [
            "[1] live_demo:42",
            "CALLS/S▼",
            "saxpy",
            "relax",
            "GPU 0: NVIDIA H100 80GB HBM3",
            "78.0%",
            "62.0% busy",
            "95.0% (76.0 GiB / 80.0 GiB)",
            "Power 287 W / 700 W (41%)",
            "67°C (WARM)",
            "Clocks SM 1980 MHz  Memory 2619 MHz",
            "PCIe Gen5 x16 | RX 8.70 GB/s | TX 12.40 GB/s",
            "Throttle sw_power_cap",
            "Util 60 s",
            HELP,
        ] {
            assert!(text.contains(want), "missing {want:?} in\n{text}");
        }
        // The VRAM bar is red at 95 %.
        let (y, line) = text.lines().enumerate().find(|(_, l)| l.contains("VRAM")).unwrap();
        let x = line.chars().position(|c| c == '█').unwrap() as u16;
        assert_eq!(buf[(x, y as u16)].fg, Color::Red);
        // The sparkline drew something.
        assert!(text.contains('█') || text.contains('▇'), "{text}");
    }

    #[test]
    fn without_devices_the_panel_says_why() {
        let mut s = snapshot();
        s.devices.clear();
        s.devices_note = Some("no device monitor runs in this program".into());
        let mut app = App::default();
        app.update(vec![Process {
            endpoint: Endpoint { pid: 42, path: "/x/live_demo-42.live.sock".into() },
            snapshot: Some(s),
            error: None,
            ended: false,
        }]);
        let (text, _) = render(&app, 120, 30);
        assert!(text.contains("no device panels: no device monitor runs in this program"), "{text}");
    }
}
