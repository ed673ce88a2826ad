// SPDX-License-Identifier: Apache-2.0
//! Names that target processes control (comm, file paths, symbol and perf-map names, version strings): how
//! they are shown to the operator. A target must not be able to write terminal escape sequences, forge
//! report lines or reorder text in a root tool's output, so every such name is printed through here.

use std::borrow::Cow;
use std::fmt;

/// Shown escaped: control characters (C0, DEL, C1), line and paragraph separators and bidirectional
/// overrides as `\xNN` or `\u{NNNN}`, and the backslash as `\\` so that an escaped name cannot pass for
/// another. Printable text, spaces included, is kept as it is.
pub fn printable(name: &str) -> Cow<'_, str> {
    if !name.chars().any(needs_escape) {
        return Cow::Borrowed(name);
    }
    let mut out = String::with_capacity(name.len() + 8);
    for c in name.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            c if needs_escape(c) && (c as u32) < 0x100 => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if needs_escape(c) => out.push_str(&format!("\\u{{{:04x}}}", c as u32)),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// A name to format with `{}`: the same as [`printable`].
pub struct Printable<'a>(pub &'a str);

impl fmt::Display for Printable<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&printable(self.0))
    }
}

/// What a terminal or a text viewer would act on instead of showing.
fn needs_escape(c: char) -> bool {
    c == '\\' || breaks_text(c)
}

/// Characters that are not shown as themselves: what text already escaped must still not contain.
pub fn breaks_text(c: char) -> bool {
    c.is_control()
        || matches!(c,
            // Line and paragraph separators; bidirectional embeddings, overrides and isolates.
            '\u{2028}' | '\u{2029}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
            // Zero-width and invisible formatting marks that make two names look alike.
            | '\u{200b}'..='\u{200f}' | '\u{feff}')
}

/// Text made of lines (a report, an error message, folded stacks), with any character that is not shown
/// as itself escaped, newlines kept: the last guard before a terminal, behind the names escaped one by one.
pub fn printable_lines(text: &str) -> Cow<'_, str> {
    if !text.chars().any(|c| c != '\n' && breaks_text(c)) {
        return Cow::Borrowed(text);
    }
    Cow::Owned(
        text.split('\n')
            .map(|line| {
                line.chars()
                    .map(|c| {
                        if breaks_text(c) {
                            printable(c.encode_utf8(&mut [0; 4])).into_owned()
                        } else {
                            c.to_string()
                        }
                    })
                    .collect::<String>()
            })
            .collect::<Vec<_>>()
            .join("\n"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        #![proptest_config(crate::fuzz_config(1))]

        /// Whatever a name holds, what is shown of it acts on nothing and tells it apart from other names.
        #[test]
        fn fuzz_printable(a: String, b: String) {
            let (pa, pb) = (printable(&a), printable(&b));
            proptest::prop_assert!(!pa.chars().any(breaks_text));
            proptest::prop_assert!(a == b || pa != pb);
            let lines = printable_lines(&a);
            proptest::prop_assert!(!lines.chars().any(|c| c != '\n' && breaks_text(c)));
            proptest::prop_assert_eq!(lines.split('\n').count(), a.split('\n').count());
        }
    }

    #[test]
    fn escapes_what_a_terminal_would_act_on() {
        assert_eq!(printable("nginx"), "nginx");
        assert_eq!(printable("my worker (1)"), "my worker (1)");
        assert_eq!(printable("\x1b[31mred\x1b[0m"), "\\x1b[31mred\\x1b[0m");
        assert_eq!(printable("a\nb\tc\x07\x7f"), "a\\x0ab\\x09c\\x07\\x7f");
        assert_eq!(printable("\u{9b}2J"), "\\x9b2J");
        assert_eq!(printable("evil\u{202e}gpj.exe"), "evil\\u{202e}gpj.exe");
        assert_eq!(printable("\\x1b"), "\\\\x1b");
        assert_eq!(
            printable("JS:*afterConnect node:net:1400"),
            "JS:*afterConnect node:net:1400"
        );
        assert_eq!(format!("{}", Printable("a\rb")), "a\\x0db");
    }

    #[test]
    fn text_keeps_its_lines_and_escaped_names() {
        assert_eq!(printable_lines("one\ntwo \\x1b\n"), "one\ntwo \\x1b\n");
        assert_eq!(printable_lines("a\x1b]0;x\x07\nb"), "a\\x1b]0;x\\x07\nb");
    }
}
