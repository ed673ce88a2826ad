// SPDX-License-Identifier: Apache-2.0
//! Text made of toned pieces: rendered plain for a pipe or a file, with colour and bars for a terminal.
//! Each piece is escaped before it is coloured, so the only escape sequences in the output are the
//! colours set here, whatever a name in the recording holds.

use anstyle::{AnsiColor, Style};

use crate::model::untrusted::printable_lines;

/// Columns a prose line may take before it wraps.
pub const WIDTH: usize = 100;

/// Whether text output is coloured (and carries bars) or plain.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Color {
    #[default]
    Off,
    On,
}

/// What a piece of text is to its reader, which sets its colour.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tone {
    Plain,
    Heading,
    /// The figures a reader came for: a TLS share, the best advice's saving.
    Key,
    /// An estimate: marked with ≈, or scaled from probe windows.
    Estimate,
    /// Data that was lost, so figures undercount.
    Warning,
    /// A bar chart's bar: shown only in colour, so plain output stays as it was.
    Bar,
}

impl Tone {
    fn style(self) -> Style {
        match self {
            Tone::Plain => Style::new(),
            Tone::Heading => Style::new().bold(),
            Tone::Key => Style::new().bold().fg_color(Some(AnsiColor::Green.into())),
            Tone::Estimate => Style::new().fg_color(Some(AnsiColor::Cyan.into())),
            Tone::Warning => Style::new().fg_color(Some(AnsiColor::Yellow.into())),
            Tone::Bar => Style::new().fg_color(Some(AnsiColor::Blue.into())),
        }
    }
}

/// One line of text in toned pieces; prose wraps at `WIDTH`, a table row never does.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Line {
    spans: Vec<(Tone, String)>,
    wraps: bool,
}

impl Line {
    pub fn prose(text: impl Into<String>) -> Line {
        Line {
            spans: vec![(Tone::Plain, text.into())],
            wraps: true,
        }
    }

    pub fn row(text: impl Into<String>) -> Line {
        Line {
            spans: vec![(Tone::Plain, text.into())],
            wraps: false,
        }
    }

    pub fn toned(tone: Tone, text: impl Into<String>) -> Line {
        Line {
            spans: vec![(tone, text.into())],
            wraps: true,
        }
    }

    pub fn push(mut self, tone: Tone, text: impl Into<String>) -> Line {
        self.spans.push((tone, text.into()));
        self
    }

    /// The visible text, without bars.
    pub fn plain(&self) -> String {
        self.spans
            .iter()
            .filter(|(tone, _)| *tone != Tone::Bar)
            .map(|(_, text)| text.as_str())
            .collect()
    }

    /// Cut to `width` columns, its end elided.
    pub fn fit(self, width: usize) -> Line {
        if self.plain().chars().count() <= width {
            return self;
        }
        let mut left = width - 1;
        let mut spans = Vec::new();
        for (tone, text) in self.spans.into_iter().filter(|(tone, _)| *tone != Tone::Bar) {
            let kept: String = text.chars().take(left).collect();
            left -= kept.chars().count();
            spans.push((tone, kept));
        }
        spans.push((Tone::Plain, "…".into()));
        Line { spans, ..self }
    }

    /// Broken at spaces into lines of at most `WIDTH` columns where it can be, the continuations indented
    /// two more than the first.
    fn wrapped(&self) -> Vec<Line> {
        let text = self.plain();
        let cuts = if self.wraps { cuts(&text) } else { Vec::new() };
        if cuts.is_empty() {
            return vec![self.clone()];
        }
        let indent = " ".repeat(indent_of(&text) + 2);
        let mut lines = vec![Line::default()];
        let mut at = 0;
        for (tone, piece) in self.spans.iter().filter(|(tone, _)| *tone != Tone::Bar) {
            let mut rest = piece.as_str();
            while let Some(&cut) = cuts.iter().find(|&&c| c >= at && c < at + rest.len()) {
                let (before, after) = rest.split_at(cut - at);
                lines.last_mut().unwrap().spans.push((*tone, before.to_string()));
                lines.push(Line::default().push(Tone::Plain, indent.clone()));
                // The space the line breaks at is dropped.
                at = cut + 1;
                rest = &after[1..];
            }
            at += rest.len();
            lines.last_mut().unwrap().spans.push((*tone, rest.to_string()));
        }
        lines
    }

    fn render(&self, color: Color, out: &mut String) {
        for (tone, text) in &self.spans {
            // The last guard before a terminal, behind the names escaped one by one where they were written.
            let text = printable_lines(text);
            match (color, tone) {
                (Color::Off, Tone::Bar) => {}
                (Color::Off, _) => out.push_str(&text),
                (Color::On, Tone::Plain) => {
                    for (tone, piece) in estimates(&text) {
                        paint(tone, piece, out);
                    }
                }
                (Color::On, tone) => paint(*tone, &text, out),
            }
        }
        out.push('\n');
    }
}

fn indent_of(text: &str) -> usize {
    text.len() - text.trim_start_matches(' ').len()
}

/// Byte offsets of the spaces a line breaks at to keep within `WIDTH` columns (first fit); a word longer
/// than a line stays whole, and an estimate stays with its ≈ and its [interval].
fn cuts(text: &str) -> Vec<usize> {
    let indent = indent_of(text);
    let mut cuts = Vec::new();
    let mut column = 0;
    let mut space: Option<(usize, usize)> = None;
    let mut previous = ' ';
    for (i, c) in text.char_indices() {
        column += 1;
        let next = text[i + c.len_utf8()..].chars().next();
        if c == ' ' && i >= indent && previous != '≈' && next != Some('[') {
            space = Some((i, column));
        }
        previous = c;
        if column > WIDTH {
            if let Some((at, at_column)) = space.take() {
                cuts.push(at);
                column = indent + 2 + column - at_column;
            }
        }
    }
    cuts
}

fn paint(tone: Tone, text: &str, out: &mut String) {
    if tone == Tone::Plain || text.is_empty() {
        out.push_str(text);
    } else {
        let style = tone.style();
        out.push_str(&format!("{style}{text}{style:#}"));
    }
}

/// Plain text split where ≈ marks an estimate: the ≈, the figure after it and its [interval] are
/// `Tone::Estimate`.
fn estimates(text: &str) -> Vec<(Tone, &str)> {
    let mut pieces = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find('≈') {
        let after = &rest[start + '≈'.len_utf8()..];
        let figure = after
            .trim_start_matches(' ')
            .trim_start_matches(|c: char| c.is_ascii_digit() || c == '.');
        let tail = match figure.strip_prefix(" [").and_then(|f| f.split_once(']')) {
            Some((_, tail)) => tail,
            None => figure,
        };
        let end = rest.len() - tail.len();
        pieces.push((Tone::Plain, &rest[..start]));
        pieces.push((Tone::Estimate, &rest[start..end]));
        rest = &rest[end..];
    }
    pieces.push((Tone::Plain, rest));
    pieces
}

/// Lines rendered one per line: wrapped, then plain or coloured.
pub fn render(lines: &[Line], color: Color) -> String {
    let mut out = String::new();
    for line in lines {
        for piece in line.wrapped() {
            piece.render(color, &mut out);
        }
    }
    out
}

/// `share` (0–1) of `width` cells in block characters, to eighths of a cell.
pub fn bar(share: f64, width: usize) -> String {
    const EIGHTHS: [&str; 8] = ["", "▏", "▎", "▍", "▌", "▋", "▊", "▉"];
    let eighths = (share.clamp(0.0, 1.0) * (width * 8) as f64).round() as usize;
    format!("{}{}", "█".repeat(eighths / 8), EIGHTHS[eighths % 8])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prose_wraps_at_spaces_and_rows_do_not() {
        let long = format!("  {}", "word ".repeat(30));
        let out = render(&[Line::prose(long.trim_end()), Line::row(long.trim_end())], Color::Off);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 3, "{out}");
        assert!(
            lines[0].chars().count() <= WIDTH && lines[0].starts_with("  word"),
            "{out}"
        );
        assert!(lines[1].starts_with("    word"), "{out}");
        assert_eq!(lines[2], long.trim_end());
    }

    #[test]
    fn a_break_inside_a_toned_piece_keeps_its_tone_on_both_lines() {
        let line = Line::prose("x".repeat(90)).push(Tone::Key, " saving of about half");
        let out = render(&[line], Color::On);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 2, "{out}");
        assert!(
            lines[0].ends_with("\x1b[0m") && lines[1].contains("half\x1b[0m"),
            "{out:?}"
        );
    }

    #[test]
    fn estimates_are_the_figure_after_each_approx_sign() {
        let pieces = estimates("Handshakes: ≈ 5507 [5438–5575] (≈ 392.8 /s), ≈: estimated");
        let toned: Vec<&str> = pieces
            .iter()
            .filter(|(t, _)| *t == Tone::Estimate)
            .map(|(_, s)| *s)
            .collect();
        assert_eq!(toned, ["≈ 5507 [5438–5575]", "≈ 392.8", "≈"]);
        assert_eq!(
            pieces.iter().map(|(_, s)| *s).collect::<String>(),
            "Handshakes: ≈ 5507 [5438–5575] (≈ 392.8 /s), ≈: estimated"
        );
    }

    #[test]
    fn bars_are_shown_only_in_colour_and_names_cannot_colour_themselves() {
        let line = Line::row("sign ")
            .push(Tone::Bar, bar(0.5, 4))
            .push(Tone::Plain, "\x1b[31mred");
        assert_eq!(render(std::slice::from_ref(&line), Color::Off), "sign \\x1b[31mred\n");
        let coloured = render(&[line], Color::On);
        assert!(
            coloured.contains("██") && !coloured.contains("\x1b[31m"),
            "{coloured:?}"
        );
        assert_eq!(bar(0.3, 10), "███");
        assert_eq!(bar(0.33, 10), "███▎");
    }

    #[test]
    fn a_line_too_wide_is_elided_at_its_end() {
        let line = Line::prose("abc").push(Tone::Key, "defgh").fit(6);
        assert_eq!(line.plain(), "abcde…");
    }
}
