// SPDX-License-Identifier: Apache-2.0
//! `tlsprof top` on a terminal: a header with the machine's totals and the probes' cost, a row per process,
//! the selected row's stages as bars, the advice that saves the most, and the keys.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Cell, Paragraph, Row as TableRow, Table, TableState};
use ratatui::{DefaultTerminal, Frame};

use super::keys::{self, Key};
use super::rows::{self, Figure, Row, View};
use super::stderr::Captured;
use super::{next_interval, Spans, TopOptions};
use crate::model::Recording;

/// How long a process that exited stays on the screen, greyed.
const DROP_AFTER: Duration = Duration::from_secs(5);
/// Stages drawn as bars for the selected row, at most.
const STAGE_BARS: usize = 5;
/// How often keys are looked for.
const KEY_POLL: Duration = Duration::from_millis(100);

/// The columns rows are sorted by, in the order `s` cycles through them.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Sort {
    TlsShare,
    MachineShare,
    Rate,
    FullMs,
    Pid,
}

impl Sort {
    fn next(self) -> Sort {
        match self {
            Sort::TlsShare => Sort::MachineShare,
            Sort::MachineShare => Sort::Rate,
            Sort::Rate => Sort::FullMs,
            Sort::FullMs => Sort::Pid,
            Sort::Pid => Sort::TlsShare,
        }
    }

    fn title(self) -> &'static str {
        match self {
            Sort::TlsShare => "TLS%",
            Sort::MachineShare => "MACH%",
            Sort::Rate => "HS/S",
            Sort::FullMs => "MS/FULL",
            Sort::Pid => "PID",
        }
    }

    fn order(self, rows: &mut [Row]) {
        let key = |r: &Row| -> Option<f64> {
            match self {
                Sort::TlsShare => r.tls_share.map(|f| f.value),
                Sort::MachineShare => r.machine_share.map(|f| f.value),
                Sort::Rate => r.rate.map(|f| f.value),
                Sort::FullMs => r.full_ms,
                Sort::Pid => r.pid.map(|p| -(p as f64)),
            }
        };
        // Largest first, rows without the figure last, then by name.
        rows.sort_by(|a, b| {
            let (ka, kb) = (key(a).unwrap_or(f64::NEG_INFINITY), key(b).unwrap_or(f64::NEG_INFINITY));
            kb.total_cmp(&ka).then_with(|| a.name.cmp(&b.name))
        });
    }
}

/// A column of the table: what it shows, its width, and how much it matters when the terminal is narrow
/// (0 always shown).
struct Column {
    title: &'static str,
    width: u16,
    priority: u8,
    cell: fn(&Row) -> String,
}

fn dash() -> String {
    "-".into()
}

fn rate(f: Option<Figure>) -> String {
    f.map_or_else(dash, |f| f.text(if f.value >= 100.0 { 0 } else { 1 }))
}

fn pct(f: Option<Figure>, digits: usize) -> String {
    f.map_or_else(dash, |f| f.scaled(100.0).text(digits))
}

const COLUMNS: &[Column] = &[
    Column {
        title: "PID",
        width: 7,
        priority: 0,
        cell: |r| r.pid.map_or_else(dash, |p| p.to_string()),
    },
    Column {
        title: "NAME",
        width: 16,
        priority: 0,
        cell: |r| r.name.clone(),
    },
    Column {
        title: "TLS%",
        width: 9,
        priority: 0,
        cell: |r| pct(r.tls_share, 0),
    },
    Column {
        title: "HS/S",
        width: 12,
        priority: 0,
        cell: |r| rate(r.rate),
    },
    Column {
        title: "RES%",
        width: 5,
        priority: 0,
        cell: |r| r.resumed_share.map_or_else(dash, |s| format!("{:.0}", 100.0 * s)),
    },
    Column {
        title: "MS/FULL",
        width: 8,
        priority: 0,
        cell: |r| r.full_ms.map_or_else(dash, |ms| format!("{ms:.2}")),
    },
    Column {
        title: "TOP STAGE",
        width: 13,
        priority: 0,
        cell: |r| {
            r.stages
                .first()
                .map_or_else(dash, |(stage, share)| format!("{} {:.0}%", stage.name(), 100.0 * share))
        },
    },
    Column {
        title: "MACH%",
        width: 9,
        priority: 1,
        cell: |r| pct(r.machine_share, 1),
    },
    Column {
        title: "ABND/S",
        width: 9,
        priority: 1,
        cell: |r| rate(r.abandoned_rate),
    },
    Column {
        title: "REFUSED/S",
        width: 10,
        priority: 2,
        cell: |r| rate(r.refused_rate),
    },
    Column {
        title: "WHY REFUSED",
        width: 18,
        priority: 2,
        cell: |r| r.refused_reason.map_or_else(dash, |why| why.id().to_string()),
    },
    Column {
        title: "LIBRARY",
        width: 30,
        priority: 3,
        cell: |r| r.library.clone().unwrap_or_else(dash),
    },
];

/// The columns that fit in `width`, in their order: the most important first, as long as they fit.
fn columns_for(width: u16) -> Vec<&'static Column> {
    let mut used = 0u16;
    let mut shown = vec![false; COLUMNS.len()];
    for priority in 0..=3 {
        for (i, c) in COLUMNS.iter().enumerate().filter(|(_, c)| c.priority == priority) {
            let need = c.width + u16::from(used > 0);
            if used + need <= width || priority == 0 {
                used += need;
                shown[i] = true;
            }
        }
    }
    COLUMNS.iter().zip(shown).filter(|(_, s)| *s).map(|(c, _)| c).collect()
}

struct Screen<'a> {
    top: &'a TopOptions,
    cpus: usize,
    spans: Spans,
    /// What is shown: the last refresh's view (held while paused).
    view: Option<View>,
    sort: Sort,
    selected: Option<String>,
    paused: bool,
    /// What the last key did.
    status: Option<String>,
    /// Rows seen to have exited, and since when.
    exited_since: HashMap<String, Instant>,
    started: Instant,
}

pub fn run(rx: &Receiver<Recording>, top: &TopOptions, cpus: usize, stop: &AtomicBool, said: &Captured) -> Result<()> {
    let mut terminal = ratatui::try_init().context("cannot take over the terminal")?;
    let mut screen = Screen {
        top,
        cpus,
        spans: Spans::default(),
        view: None,
        sort: Sort::TlsShare,
        selected: None,
        paused: false,
        status: None,
        exited_since: HashMap::new(),
        started: Instant::now(),
    };
    let result = screen.run(&mut terminal, rx, stop, said);
    ratatui::restore();
    result
}

impl Screen<'_> {
    fn run(
        &mut self,
        terminal: &mut DefaultTerminal,
        rx: &Receiver<Recording>,
        stop: &AtomicBool,
        said: &Captured,
    ) -> Result<()> {
        let mut dirty = true;
        let mut size = None;
        while !stop.load(Ordering::Relaxed) {
            match next_interval(rx, Duration::ZERO) {
                Ok(Some(interval)) => {
                    self.spans.add(interval);
                    if !self.paused {
                        self.refresh();
                    }
                    dirty = true;
                }
                Ok(None) => {}
                // The session ended: every target exited.
                Err(()) => break,
            }
            if dirty {
                terminal.draw(|f| self.draw(f, said.last())).context("cannot draw")?;
                dirty = false;
            }
            for key in keys::read(KEY_POLL) {
                match key {
                    // A terminal gone stops the session as SIGHUP does (the caller stops it).
                    Key::Quit | Key::HungUp => return Ok(()),
                    key => self.key(key),
                }
                dirty = true;
            }
            let now = terminal.size().context("cannot read the terminal's size")?;
            dirty |= size.replace(now) != Some(now);
        }
        Ok(())
    }

    fn refresh(&mut self) {
        self.view = self.spans.analysis().map(|a| rows::view(&a, self.top.group, self.cpus));
        let now = Instant::now();
        if let Some(v) = &self.view {
            for r in v.rows.iter().filter(|r| r.exited) {
                self.exited_since.entry(r.key.clone()).or_insert(now);
            }
        }
    }

    /// The rows shown, in order: those that exited long enough ago are gone.
    fn rows(&self) -> Vec<Row> {
        let Some(v) = &self.view else { return Vec::new() };
        let mut rows: Vec<Row> = v
            .rows
            .iter()
            .filter(|r| self.exited_since.get(&r.key).is_none_or(|t| t.elapsed() <= DROP_AFTER))
            .cloned()
            .collect();
        self.sort.order(&mut rows);
        rows
    }

    fn key(&mut self, key: Key) {
        let rows = self.rows();
        // Without a selection the first row is shown as selected.
        let at = rows
            .iter()
            .position(|r| Some(&r.key) == self.selected.as_ref())
            .or((!rows.is_empty()).then_some(0));
        let select = |i: usize| rows.get(i).map(|r| r.key.clone());
        match key {
            Key::Up => self.selected = select(at.map_or(0, |i| i.saturating_sub(1))).or(self.selected.take()),
            Key::Down => self.selected = select(at.map_or(0, |i| i + 1)).or(self.selected.take()),
            Key::Char('s') => {
                self.sort = self.sort.next();
                self.status = Some(format!("sorted by {}", self.sort.title()));
            }
            Key::Char('p') => {
                self.paused = !self.paused;
                if !self.paused {
                    self.refresh();
                }
                self.status = Some(if self.paused { "paused: p resumes" } else { "resumed" }.into());
            }
            Key::Char('r') => {
                self.spans.reset();
                self.view = None;
                self.exited_since.clear();
                self.status = Some("rates reset: figures from the next interval on".into());
            }
            Key::Char('w') => self.status = Some(self.write()),
            _ => {}
        }
    }

    /// Writes what has been seen since top started as a recording.
    fn write(&self) -> String {
        let Some(rec) = &self.spans.since_start else {
            return "nothing recorded yet to write".into();
        };
        let path = &self.top.output;
        match rec.save(path) {
            Ok(()) => format!(
                "wrote {} ({:.0} s): tlsprof report {}",
                path.display(),
                rec.duration_s,
                path.display()
            ),
            Err(e) => format!("{e:#}"),
        }
    }

    fn style(&self, color: Color) -> Style {
        if self.top.color {
            Style::new().fg(color)
        } else {
            Style::new()
        }
    }

    fn draw(&self, f: &mut Frame, said: Option<String>) {
        let rows = self.rows();
        let selected = rows
            .iter()
            .position(|r| Some(&r.key) == self.selected.as_ref())
            .or((!rows.is_empty()).then_some(0));
        let stages = selected.map_or(&[][..], |i| &rows[i].stages[..]);
        let bars = stages.len().min(STAGE_BARS) as u16;
        let [header, table, stage_area, advice, footer] = Layout::vertical([
            Constraint::Length(3),
            Constraint::Min(3),
            Constraint::Length(bars + u16::from(bars > 0)),
            Constraint::Length(1),
            Constraint::Length(1),
        ])
        .areas(f.area());
        f.render_widget(Paragraph::new(self.header_lines()), header);
        self.draw_table(f, table, &rows, selected);
        if let Some(i) = selected.filter(|_| bars > 0) {
            f.render_widget(Paragraph::new(stage_lines(&rows[i], stage_area.width)), stage_area);
        }
        let advice_text = match self.view.as_ref().and_then(|v| v.advice.as_deref()) {
            Some(a) => format!("Do first: {a}"),
            None => "Do first: nothing shows a saving yet".into(),
        };
        f.render_widget(Paragraph::new(advice_text), advice);
        let keys = format!(
            "q quit · ↑↓ select · s sort ({}) · p pause · r reset · w write",
            self.sort.title()
        );
        let note = self.status.clone().or(said).unwrap_or_default();
        let line = if note.is_empty() {
            keys
        } else {
            format!("{keys} · {note}")
        };
        f.render_widget(Paragraph::new(line).style(self.style(Color::Cyan)), footer);
    }

    fn header_lines(&self) -> Vec<Line<'static>> {
        let bold = Style::new().add_modifier(Modifier::BOLD);
        let Some(v) = &self.view else {
            let waited = self.started.elapsed().as_secs_f64();
            return vec![
                Line::styled("tlsprof top", bold),
                Line::raw(format!(
                    "waiting for the first interval ({:.0} s; figures every {:.0} s)",
                    waited,
                    self.top.interval.as_secs_f64()
                )),
                Line::raw(""),
            ];
        };
        let t = &v.totals;
        let paused = if self.paused { " · paused" } else { "" };
        let first = format!(
            "tlsprof top · {} process{} · {:.1} s since reset · every {:.0} s{paused}",
            t.processes,
            if t.processes == 1 { "" } else { "es" },
            t.span_s,
            self.top.interval.as_secs_f64()
        );
        let mut second = Vec::new();
        let mut third = Vec::new();
        if let Some(m) = t.machine_share {
            second.push(format!("TLS {}% of {} CPUs", m.scaled(100.0).text(1), t.cpus));
        }
        second.push(format!(
            "{} handshakes/s",
            t.rate.text(if t.rate.value >= 100.0 { 0 } else { 1 })
        ));
        if let Some(c) = t.cost_share {
            third.push(format!(
                "tlsprof {:.2}% of targets' CPU (budget {}%)",
                100.0 * c,
                t.budget_pct
            ));
        }
        third.insert(
            0,
            if t.estimated {
                format!(
                    "≈ estimated from {} windows ({:.0}% of the time)",
                    t.windows,
                    100.0 * t.live_fraction
                )
            } else {
                "exact".into()
            },
        );
        if t.lost {
            third.push("events lost: counts undercount".into());
        }
        vec![
            Line::styled(first, bold),
            Line::raw(second.join(" · ")),
            Line::raw(third.join(" · ")),
        ]
    }

    fn draw_table(&self, f: &mut Frame, area: Rect, rows: &[Row], selected: Option<usize>) {
        let columns = columns_for(area.width);
        let header = TableRow::new(columns.iter().map(|c| {
            let style = Style::new().add_modifier(Modifier::BOLD);
            let style = if c.title == self.sort.title() {
                style.add_modifier(Modifier::UNDERLINED)
            } else {
                style
            };
            Cell::from(c.title).style(style)
        }));
        let grey = if self.top.color {
            Style::new().fg(Color::DarkGray)
        } else {
            Style::new().add_modifier(Modifier::DIM)
        };
        let body: Vec<TableRow> = rows
            .iter()
            .map(|r| {
                let mut cells: Vec<String> = columns.iter().map(|c| (c.cell)(r)).collect();
                if r.exited {
                    cells[1] = format!("{} (exited)", cells[1]);
                }
                let row = TableRow::new(cells);
                if r.exited {
                    row.style(grey)
                } else {
                    row
                }
            })
            .collect();
        let widths: Vec<Constraint> = columns.iter().map(|c| Constraint::Length(c.width)).collect();
        let table = Table::new(body, widths)
            .header(header)
            .row_highlight_style(Style::new().add_modifier(Modifier::REVERSED));
        let mut state = TableState::default().with_selected(selected);
        f.render_stateful_widget(table, area, &mut state);
    }
}

/// The selected row's stages as bars of their share of its stages' CPU.
fn stage_lines(r: &Row, width: u16) -> Vec<Line<'static>> {
    let mut lines = vec![Line::styled(
        match r.pid {
            Some(pid) => format!("{} {pid}: its stages' shares of their CPU", r.name),
            None => format!("{}: their stages' shares of their CPU", r.name),
        },
        Style::new().add_modifier(Modifier::BOLD),
    )];
    let bar_width = usize::from(width.saturating_sub(24)).max(4);
    for (stage, share) in r.stages.iter().take(STAGE_BARS) {
        let filled = ((share * bar_width as f64).round() as usize).min(bar_width);
        lines.push(Line::raw(format!(
            "  {:<14} {}{} {:>3.0}%",
            stage.name(),
            "█".repeat(filled),
            "·".repeat(bar_width - filled),
            100.0 * share
        )));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn narrow_terminals_keep_the_columns_that_matter() {
        let titles = |w| columns_for(w).iter().map(|c| c.title).collect::<Vec<_>>();
        let narrow = titles(80);
        assert_eq!(narrow, ["PID", "NAME", "TLS%", "HS/S", "RES%", "MS/FULL", "TOP STAGE"]);
        let wide = titles(200);
        assert_eq!(wide.len(), COLUMNS.len());
        // Kept in their order whatever fits.
        let mid = titles(100);
        assert!(mid.contains(&"MACH%") && !mid.contains(&"LIBRARY"), "{mid:?}");
        let order: Vec<usize> = mid
            .iter()
            .map(|t| COLUMNS.iter().position(|c| c.title == *t).unwrap())
            .collect();
        assert!(order.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn sorting_puts_the_largest_first_and_rows_without_the_figure_last() {
        let row = |key: &str, share: Option<f64>| Row {
            key: key.into(),
            name: key.into(),
            pid: key.parse().ok(),
            exited: false,
            tls_share: share.map(|v| Figure { value: v, ci95: None }),
            machine_share: None,
            rate: None,
            resumed_share: None,
            abandoned_rate: None,
            refused_rate: None,
            refused_reason: None,
            full_ms: None,
            stages: Vec::new(),
            library: None,
        };
        let mut rows = vec![row("1", Some(0.1)), row("2", None), row("3", Some(0.5))];
        Sort::TlsShare.order(&mut rows);
        let keys: Vec<&str> = rows.iter().map(|r| r.key.as_str()).collect();
        assert_eq!(keys, ["3", "1", "2"]);
        Sort::Pid.order(&mut rows);
        let keys: Vec<&str> = rows.iter().map(|r| r.key.as_str()).collect();
        assert_eq!(keys, ["1", "2", "3"]);
        let mut s = Sort::TlsShare;
        for _ in 0..5 {
            s = s.next();
        }
        assert_eq!(s, Sort::TlsShare);
    }
}
