//! Prints the tool snapshot of a session log as one line of compact JSON: by reference
//! (`Session::tool_history`), or with `--by-value` the by-value snapshot that routes with
//! inline definitions read (`Session::tool_history_by_value`).
//!
//! ```text
//! cargo run --example fold -- [--by-value] LOG.jsonl
//! ```
//!
//! Output: `{"tools":[...],"updates":[{"messageId":...,"additions":[...],"redefinitions"?:[...]}]}`.
//! A torn final line (or an incomplete final batch) is dropped with a warning on stderr
//! (exit 0); an invalid log exits 1 with the typed error and its source chain on stderr; a
//! usage error exits 2. Other languages can drive the fold through this command.
//!
//! A log whose session line names no fold rules is read under the current ones
//! (`FileOptions::unmarked_rules(LogRules::V4)`): logs written by hand for the current
//! specification, as conformance vectors are, carry no mark. The library reads such a log as
//! written before the mark, under rules 3 (decision 96); a log with `"rules"` is read under its
//! own.

use std::error::Error;
use std::io::Write;
use std::process::ExitCode;

use mektpoy::session::{FileOptions, LoadError, LogRules};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (by_value, path) = match args.as_slice() {
        [path] if !path.starts_with("--") => (false, path),
        [flag, path] if flag == "--by-value" => (true, path),
        _ => {
            eprintln!("usage: fold [--by-value] LOG.jsonl");
            return ExitCode::from(2);
        }
    };
    match run(path, by_value) {
        Ok(out) => {
            for warning in &out.warnings {
                eprintln!("warning: {warning}");
            }
            let mut stdout = std::io::stdout().lock();
            if writeln!(stdout, "{}", out.snapshot).is_err() {
                return ExitCode::FAILURE;
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {}", chain(&e));
            ExitCode::FAILURE
        }
    }
}

/// What a successful run prints.
struct Folded {
    /// The snapshot, compact JSON.
    snapshot: String,
    /// Facts about the file that did not refuse it (a torn tail).
    warnings: Vec<String>,
}

/// Loads `path` and folds it, by value when asked.
fn run(path: &str, by_value: bool) -> Result<Folded, LoadError> {
    let loaded = FileOptions::new().unmarked_rules(LogRules::V4).load(path)?;
    let mut warnings = Vec::new();
    if let Some(torn) = loaded.torn_tail {
        warnings.push(match torn.batch {
            None => format!(
                "dropped a torn final line ({} bytes at byte {}): a write was cut short",
                torn.len, torn.offset
            ),
            Some(b) => format!(
                "dropped a torn final batch framed on line {} ({} bytes at byte {}, {} whole event lines): a write was cut short",
                b.line, torn.len, torn.offset, b.dropped_events
            ),
        });
    }
    let snapshot = if by_value {
        loaded.session.tool_history_by_value()
    } else {
        loaded.session.tool_history()
    };
    Ok(Folded {
        snapshot: snapshot.to_json(),
        warnings,
    })
}

/// The error and every source below it, `: `-separated.
fn chain(e: &dyn Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}
