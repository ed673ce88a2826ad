// SPDX-License-Identifier: Apache-2.0
//! The house rules of the source: no file under src/ over 800 lines, no function there over 120.
mod common;

use std::path::{Path, PathBuf};

use common::*;

const MAX_FILE_LINES: usize = 800;
const MAX_FUNCTION_LINES: usize = 120;

/// Every .rs file under src/ has at most MAX_FILE_LINES lines, and every `fn` in it with a body at most
/// MAX_FUNCTION_LINES: counted from the line of `fn` to the line of the brace that closes its body, braces in
/// strings, char literals and `//` comments not counting. A nested `fn` counts on its own, and in its
/// enclosing one's lines too.
#[test]
fn no_file_over_800_lines_and_no_function_over_120() {
    let mut over = Vec::new();
    for path in rust_files(&repo().join("src")) {
        let text = std::fs::read_to_string(&path).unwrap();
        let name = path.strip_prefix(repo()).unwrap().display();
        let lines = text.lines().count();
        if lines > MAX_FILE_LINES {
            over.push(format!("{name}: {lines} lines"));
        }
        for f in functions(&code_only(&text)) {
            if f.lines > MAX_FUNCTION_LINES {
                over.push(format!("{name}:{}: fn {}: {} lines", f.line, f.name, f.lines));
            }
        }
    }
    assert!(
        over.is_empty(),
        "files over {MAX_FILE_LINES} lines, functions over {MAX_FUNCTION_LINES}:\n{}",
        over.join("\n")
    );
}

/// The .rs files under dir, in order.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    files.sort();
    files
}

/// Rust source with the insides of its strings (raw ones too), char literals and `//` comments blanked out:
/// what is left of each line is code, and the lines stay where they were.
fn code_only(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut code = String::with_capacity(text.len());
    let mut i = 0;
    // Copies chars[from..to] as blanks, keeping its newlines.
    let blank = |code: &mut String, from: usize, to: usize| {
        code.extend(
            chars[from..to.min(chars.len())]
                .iter()
                .map(|&c| if c == '\n' { '\n' } else { ' ' }),
        );
    };
    while i < chars.len() {
        let rest = &chars[i..];
        let after_identifier = i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_');
        let end = if rest.starts_with(&['/', '/']) {
            i + rest.iter().position(|&c| c == '\n').unwrap_or(rest.len())
        } else if rest[0] == 'r' && !after_identifier && raw_string_hashes(&rest[1..]).is_some() {
            // r"...", r#"..."#: no escapes, and it ends at a quote followed by as many hashes as it opened with.
            let hashes = raw_string_hashes(&rest[1..]).unwrap();
            let closing: Vec<char> = std::iter::once('"').chain(std::iter::repeat_n('#', hashes)).collect();
            let body = 2 + hashes;
            i + body + rest[body..].windows(closing.len()).position(|w| w == closing).unwrap() + closing.len()
        } else if rest[0] == '"' {
            i + 1 + quoted_len(&rest[1..], '"')
        } else if rest[0] == '\'' && (rest.get(1) == Some(&'\\') || rest.get(2) == Some(&'\'')) {
            // A char literal: 'x' or an escape ('\n', '\''). Otherwise a lifetime or a label.
            i + 1 + quoted_len(&rest[1..], '\'')
        } else {
            code.push(rest[0]);
            i += 1;
            continue;
        };
        blank(&mut code, i, end);
        i = end;
    }
    code
}

/// The hashes of the raw string that `after_r` opens (what follows an `r`: `#`s then a quote), if it opens one.
fn raw_string_hashes(after_r: &[char]) -> Option<usize> {
    let hashes = after_r.iter().take_while(|&&c| c == '#').count();
    (after_r.get(hashes) == Some(&'"')).then_some(hashes)
}

/// How many chars a quoted literal takes from just after its opening quote, its closing quote included;
/// a backslash escapes the char after it.
fn quoted_len(body: &[char], quote: char) -> usize {
    let mut i = 0;
    while i < body.len() {
        match body[i] {
            '\\' => i += 2,
            c if c == quote => return i + 1,
            _ => i += 1,
        }
    }
    body.len()
}

/// A function with a body: where its `fn` is (line, from 1), its name, and its lines.
struct Function {
    line: usize,
    name: String,
    lines: usize,
}

/// The functions with a body in code (code_only's), each from its `fn` to the brace that closes its body.
fn functions(code: &str) -> Vec<Function> {
    let chars: Vec<char> = code.chars().collect();
    let line_at = |i: usize| 1 + chars[..i].iter().filter(|&&c| c == '\n').count();
    let is_identifier = |c: char| c.is_alphanumeric() || c == '_';
    let mut found = Vec::new();
    for at in 0..chars.len().saturating_sub(2) {
        let keyword = chars[at] == 'f' && chars[at + 1] == 'n' && chars[at + 2].is_whitespace();
        if !keyword || (at > 0 && is_identifier(chars[at - 1])) {
            continue;
        }
        let mut i = at + 2;
        while i < chars.len() && chars[i].is_whitespace() {
            i += 1;
        }
        let name: String = chars[i..].iter().take_while(|&&c| is_identifier(c)).collect();
        if name.is_empty() {
            continue;
        }
        // The body opens at the first `{` outside the signature's parentheses and brackets (`[u8; 16]`); a `;`
        // there first ends a declaration without one.
        let mut nesting = 0i32;
        let body = loop {
            match chars.get(i) {
                None => break None,
                Some(';') if nesting == 0 => break None,
                Some('{') if nesting == 0 => break Some(i),
                Some('(' | '[') => nesting += 1,
                Some(')' | ']') => nesting -= 1,
                _ => {}
            }
            i += 1;
        };
        let Some(open) = body else { continue };
        let mut depth = 0;
        for (close, &c) in chars.iter().enumerate().skip(open) {
            depth += match c {
                '{' => 1,
                '}' => -1,
                _ => 0,
            };
            if depth == 0 {
                let line = line_at(at);
                found.push(Function {
                    line,
                    name,
                    lines: line_at(close) - line + 1,
                });
                break;
            }
        }
    }
    found
}

#[test]
fn code_only_blanks_strings_chars_and_comments_and_keeps_lines() {
    let text = "fn a() { let s = \"}{\\\"\"; // }\n let c = '{'; let r = r#\"\"}\"#; }\nfn b<'x>() {}\n";
    let code = code_only(text);
    assert_eq!(code.lines().count(), text.lines().count());
    assert!(
        !code.contains('"') && !code.contains("'{'") && !code.contains("//"),
        "{code}"
    );
    let found: Vec<(usize, String, usize)> = functions(&code)
        .into_iter()
        .map(|f| (f.line, f.name, f.lines))
        .collect();
    assert_eq!(found, [(1, "a".to_string(), 2), (3, "b".to_string(), 1)]);
}

#[test]
fn declarations_and_array_types_are_no_bodies() {
    let code = "trait T { fn f(&self) -> [u8; 4]; }\nfn g(x: [u8; 16]) -> u8 {\n x[0]\n}\nlet p: fn(u8) = h;\n";
    let found: Vec<(usize, String, usize)> = functions(code).into_iter().map(|f| (f.line, f.name, f.lines)).collect();
    assert_eq!(found, [(2, "g".to_string(), 3)]);
}
