//! Golden files: byte-exact expected wire requests in `tests/golden/`.
//!
//! `assert_golden("name", &request)` compares
//! - `tests/golden/name.json` with the body, byte for byte (the file holds the body plus one
//!   final newline, so editors leave it alone), and
//! - `tests/golden/name.headers` with the headers, one `name: value` line each, in order.
//!
//! Run with `UPDATE_GOLDEN=1` to write the files from the actual output instead (then review
//! the diff). A name may contain `/` to group files, e.g. `scenarios/churn/step-03`.

use std::fs;
use std::path::{Path, PathBuf};

use mektpoy::WireRequest;

/// Asserts that `request` matches the golden files `name` (see the module doc).
///
/// # Panics
/// When a file is missing or differs (and `UPDATE_GOLDEN` is not `1`), naming the first
/// differing byte; when `name` leaves `tests/golden/`.
#[track_caller]
pub fn assert_golden(name: &str, request: &WireRequest) {
    let headers: String = request
        .headers()
        .iter()
        .map(|(n, v)| format!("{n}: {v}\n"))
        .collect();
    check(&path(name, "json"), &format!("{}\n", request.body()));
    check(&path(name, "headers"), &headers);
}

fn path(name: &str, extension: &str) -> PathBuf {
    assert!(
        !name.is_empty()
            && !name.starts_with('/')
            && name
                .split('/')
                .all(|part| !part.is_empty() && part != ".." && part != "."),
        "golden name {name:?} must be a relative path inside tests/golden"
    );
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(format!("{name}.{extension}"))
}

fn updating() -> bool {
    std::env::var_os("UPDATE_GOLDEN").is_some_and(|v| v == "1")
}

#[track_caller]
fn check(path: &Path, actual: &str) {
    if updating() {
        if let Some(dir) = path.parent() {
            fs::create_dir_all(dir).unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
        }
        if fs::read(path).ok().as_deref() != Some(actual.as_bytes()) {
            fs::write(path, actual).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
        }
        return;
    }
    let expected = match fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) => panic!(
            "golden file {} cannot be read ({e}); run with UPDATE_GOLDEN=1 to create it",
            path.display()
        ),
    };
    if expected == actual {
        return;
    }
    let at = expected
        .bytes()
        .zip(actual.bytes())
        .position(|(e, a)| e != a)
        .unwrap_or(expected.len().min(actual.len()));
    panic!(
        "{} differs at byte {at} (expected {} bytes, got {}):\n  expected {:?}\n  actual   {:?}\n\
         run with UPDATE_GOLDEN=1 to accept the actual output, then review the diff",
        path.display(),
        expected.len(),
        actual.len(),
        window(&expected, at),
        window(actual, at),
    );
}

/// Up to 60 bytes either side of `at`, widened to character boundaries (printed escaped, so a
/// missing newline shows).
fn window(text: &str, at: usize) -> &str {
    let mut start = at.saturating_sub(60);
    while !text.is_char_boundary(start) {
        start -= 1;
    }
    let mut end = (at + 60).min(text.len());
    while !text.is_char_boundary(end) {
        end += 1;
    }
    &text[start.min(text.len())..end]
}
