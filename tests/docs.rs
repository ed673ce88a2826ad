// SPDX-License-Identifier: Apache-2.0
//! The README stays short and the user guide under docs/ holds together: every page is reachable from the
//! README, and every relative link and anchor in them resolves (no root, no BPF).
mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use common::*;

/// Most bytes the README may hold: the rest belongs in the guide.
const README_MAX_BYTES: u64 = 20_000;

/// The guide's pages, docs/*.md.
fn guide_pages() -> Vec<PathBuf> {
    let mut pages: Vec<PathBuf> = std::fs::read_dir(repo().join("docs"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
        .collect();
    pages.sort();
    pages
}

/// The README and the guide's pages.
fn all_pages() -> Vec<PathBuf> {
    let mut pages = vec![repo().join("README.md")];
    pages.extend(guide_pages());
    pages
}

/// A page's text outside its fenced code blocks.
fn prose(page: &Path) -> String {
    let text = std::fs::read_to_string(page).unwrap_or_default();
    let mut fenced = false;
    let mut out = String::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// The targets of a page's relative links, `[..](path)` or `[..](path#anchor)` (web links left out).
fn relative_links(page: &Path) -> Vec<String> {
    let prose = prose(page);
    prose
        .match_indices("](")
        .filter_map(|(i, _)| {
            let rest = &prose[i + 2..];
            let target = &rest[..rest.find(')')?];
            (!target.contains("://") && !target.starts_with("mailto:")).then(|| target.to_string())
        })
        .collect()
}

/// A link's file (the page itself for `#anchor`) and anchor.
fn split_link<'a>(page: &Path, link: &'a str) -> (PathBuf, Option<&'a str>) {
    let (path, anchor) = match link.split_once('#') {
        Some((path, anchor)) => (path, Some(anchor)),
        None => (link, None),
    };
    let file = if path.is_empty() {
        page.to_path_buf()
    } else {
        page.parent().unwrap().join(path)
    };
    (file, anchor)
}

/// GitHub's anchor of a heading: lowercase, punctuation other than `-` and `_` dropped (backticks too),
/// spaces to `-`.
fn anchor_of(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of a page's headings.
fn anchors(page: &Path) -> BTreeSet<String> {
    prose(page)
        .lines()
        .filter(|line| line.starts_with('#'))
        .map(|line| anchor_of(line.trim_start_matches('#')))
        .collect()
}

fn name(page: &Path) -> String {
    page.strip_prefix(repo()).unwrap_or(page).display().to_string()
}

#[test]
fn readme_is_short() {
    let bytes = std::fs::metadata(repo().join("README.md")).unwrap().len();
    assert!(
        bytes < README_MAX_BYTES,
        "README.md is {bytes} bytes, {README_MAX_BYTES} at most: move the detail into the guide under docs/"
    );
}

#[test]
fn every_guide_page_is_reachable_from_the_readme() {
    let (readme, index) = (repo().join("README.md"), repo().join("docs/README.md"));
    let linked_from = |page: &Path| -> BTreeSet<PathBuf> {
        relative_links(page)
            .iter()
            .filter_map(|link| split_link(page, link).0.canonicalize().ok())
            .collect()
    };
    let mut linked = linked_from(&readme);
    assert!(
        linked.contains(&index.canonicalize().unwrap()),
        "README.md does not link the guide's index, docs/README.md"
    );
    linked.extend(linked_from(&index));
    let unlinked: Vec<String> = guide_pages()
        .iter()
        .filter(|page| !linked.contains(&page.canonicalize().unwrap()))
        .map(|page| name(page))
        .collect();
    assert!(
        unlinked.is_empty(),
        "linked neither from README.md nor from docs/README.md: {unlinked:?}"
    );
}

#[test]
fn every_relative_link_resolves() {
    let mut broken = Vec::new();
    for page in all_pages() {
        for link in relative_links(&page) {
            let (file, anchor) = split_link(&page, &link);
            if !file.exists() {
                broken.push(format!("{}: ({link}): no such file", name(&page)));
            } else if let Some(anchor) = anchor.filter(|anchor| !anchors(&file).contains(*anchor)) {
                broken.push(format!(
                    "{}: ({link}): no heading #{anchor} in {}",
                    name(&page),
                    name(&file)
                ));
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}
