//! Rustdoc names rules as "reference §n" and choices as "decision N", each a link into
//! `mektpoy::manual` (the reference, decisions and departures of `docs/`, included as doc-only
//! modules). Rustdoc checks that the linked module exists, not that the anchor does, and a
//! mention written without a link is legal markdown: this keeps every mention a link, every
//! anchor real, and every link label of the manual's pages defined for rustdoc.

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

fn read(path: &str) -> String {
    fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(path)).unwrap()
}

/// The id rustdoc gives a heading: lower case, spaces to `-`, other punctuation dropped.
fn slug(heading: &str) -> String {
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

/// Every doc-comment line of the library's sources outside fenced code: (file, line).
fn doc_lines() -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut dirs = vec![Path::new(env!("CARGO_MANIFEST_DIR")).join("src")];
    while let Some(dir) = dirs.pop() {
        for entry in fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let mut fenced = false;
            for line in fs::read_to_string(&path).unwrap().lines() {
                let trimmed = line.trim_start();
                let Some(doc) = trimmed
                    .strip_prefix("///")
                    .or_else(|| trimmed.strip_prefix("//!"))
                else {
                    fenced = false;
                    continue;
                };
                if doc.trim_start().starts_with("```") {
                    fenced = !fenced;
                } else if !fenced {
                    out.push((path.display().to_string(), doc.to_owned()));
                }
            }
        }
    }
    out
}

/// `text` without its code spans and the targets of its inline links.
fn prose(text: &str) -> String {
    let mut out = String::new();
    for (i, part) in text.split('`').enumerate() {
        if i % 2 == 0 {
            out.push_str(part);
        }
    }
    let mut kept = String::new();
    let mut rest = out.as_str();
    while let Some(at) = rest.find("](") {
        kept.push_str(&rest[..at + 1]);
        rest = rest[at + 2..].split_once(')').map_or("", |(_, r)| r);
    }
    kept.push_str(rest);
    kept
}

#[test]
fn every_mention_of_a_rule_or_a_decision_links_into_the_manual() {
    let mut bare = Vec::new();
    let lines = doc_lines();
    // A mention may wrap: "[reference" at the end of one line, "§4.1](…)" on the next.
    for (i, (file, line)) in lines.iter().enumerate() {
        let text = prose(line);
        let joined = match lines.get(i + 1) {
            Some((next_file, next)) if next_file == file => format!("{text} {}", prose(next)),
            _ => text.clone(),
        };
        for (at, m) in text.match_indices("reference §") {
            if !text[at + m.len()..].starts_with(|c: char| c.is_ascii_digit()) {
                continue;
            }
            let linked = text[..at].ends_with('[') || line.contains(&format!("[{}", &text[at..]));
            if !linked {
                bare.push(format!("{file}: {line}"));
            }
        }
        for word in ["decision ", "decisions ", "Decision "] {
            for (at, _) in text.match_indices(word) {
                let after = &joined[at + word.len()..];
                let is_number = after.starts_with(|c: char| c.is_ascii_digit());
                if is_number && !text[..at].ends_with('[') {
                    bare.push(format!("{file}: {line}"));
                }
            }
        }
    }
    assert!(
        bare.is_empty(),
        "mentions without a link:\n{}",
        bare.join("\n")
    );
}

#[test]
fn every_link_into_the_manual_names_an_anchor_that_exists() {
    let reference = read("docs/reference.md");
    let sections: BTreeSet<String> = reference
        .lines()
        .filter_map(|l| l.strip_prefix("## ").or_else(|| l.strip_prefix("### ")))
        .map(slug)
        .collect();
    let decisions = read("docs/decisions.md");
    let mut broken = Vec::new();
    for (file, line) in doc_lines() {
        for (at, m) in line.match_indices("](crate::manual::") {
            let target = line[at + m.len()..].split(')').next().unwrap_or_default();
            let Some((kind, anchor)) = target.split_once('#') else {
                continue;
            };
            let exists = match kind {
                "reference" => sections.contains(anchor),
                "decisions" => decisions.contains(&format!("<a id=\"{anchor}\"></a>")),
                _ => true,
            };
            if !exists {
                broken.push(format!("{file}: {kind}#{anchor}"));
            }
        }
    }
    assert!(
        broken.is_empty(),
        "links to no anchor:\n{}",
        broken.join("\n")
    );
}

#[test]
fn every_decision_has_its_anchor() {
    let decisions = read("docs/decisions.md");
    let missing: Vec<&str> = decisions
        .lines()
        .filter(|l| {
            l.split_once(". ").is_some_and(|(n, rest)| {
                !n.is_empty()
                    && n.chars().all(|c| c.is_ascii_digit())
                    && !rest.starts_with(&format!("<a id=\"decision-{n}\"></a>"))
            })
        })
        .collect();
    assert!(
        missing.is_empty(),
        "decisions without `<a id=\"decision-N\"></a>`:\n{}",
        missing.join("\n")
    );
}

#[test]
fn every_link_label_of_the_manual_is_defined_for_rustdoc() {
    let manual = read("src/manual.rs");
    for page in [
        "docs/reference.md",
        "docs/decisions.md",
        "docs/departures.md",
    ] {
        let text = read(page);
        for (at, _) in text.match_indices("][") {
            let label = text[at + 2..].split(']').next().unwrap_or_default();
            assert!(
                manual.contains(&format!("\"[{label}]: ")),
                "{page} links to `{label}`, which src/manual.rs does not define for rustdoc"
            );
        }
    }
}
