//! The reference states each rule with the test that holds it. A test renamed, moved or
//! deleted would leave the reference naming nothing; this keeps every name real, in both
//! languages, and the two documents naming the same tests.

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

/// Every `` `tests/…rs::name` `` or `` `src/…rs::name` `` the document names.
fn named_tests(doc: &str) -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    for part in doc.split('`').skip(1).step_by(2) {
        let Some((path, name)) = part.rsplit_once("::") else {
            continue;
        };
        let is_file =
            (path.starts_with("tests/") || path.starts_with("src/") || path.starts_with("crates/"))
                && path.ends_with(".rs");
        let is_ident = !name.is_empty() && name.chars().all(|c| c.is_alphanumeric() || c == '_');
        if is_file && is_ident {
            out.insert((path.to_owned(), name.to_owned()));
        }
    }
    out
}

fn defines_fn(source: &str, name: &str) -> bool {
    source.match_indices(&format!("fn {name}")).any(|(i, m)| {
        source[i + m.len()..]
            .chars()
            .next()
            .is_some_and(|c| c == '(' || c == '<')
    })
}

#[test]
fn every_test_the_reference_names_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let en = fs::read_to_string(root.join("docs/reference.md")).unwrap();
    let zh = fs::read_to_string(root.join("docs/reference.zh.md")).unwrap();
    let (en_tests, zh_tests) = (named_tests(&en), named_tests(&zh));
    assert!(
        en_tests.len() > 200,
        "the reference names its tests: {}",
        en_tests.len()
    );
    let mut missing = Vec::new();
    for (path, name) in en_tests.union(&zh_tests) {
        let source = fs::read_to_string(root.join(path)).unwrap_or_default();
        if !defines_fn(&source, name) {
            missing.push(format!("{path}::{name}"));
        }
    }
    assert!(missing.is_empty(), "named but not found: {missing:#?}");
    let only_one: Vec<_> = en_tests.symmetric_difference(&zh_tests).collect();
    assert!(
        only_one.is_empty(),
        "named in one language only: {only_one:#?}"
    );
}
