//! Prints the `tool_history()` snapshot of a session log as one line of compact JSON.
//!
//! ```text
//! cargo run --example fold -- LOG.jsonl
//! ```
//!
//! Output (SPEC §3): `{"tools":[...],"updates":[{"messageId":...,"additions":[...]}]}`.
//! A torn final line is dropped with a warning on stderr (exit 0); an invalid log exits 1
//! with the typed error and its source chain on stderr; a usage error exits 2. Other
//! languages can drive the fold through this command.

use std::error::Error;
use std::io::Write;
use std::process::ExitCode;

use mektpoy::{LoadError, Session};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [path] = args.as_slice() else {
        eprintln!("usage: fold LOG.jsonl");
        return ExitCode::from(2);
    };
    match run(path) {
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

/// Loads `path` and folds it.
fn run(path: &str) -> Result<Folded, LoadError> {
    let loaded = Session::load(path)?;
    let mut warnings = Vec::new();
    if let Some(torn) = loaded.torn_tail {
        warnings.push(format!(
            "dropped a torn final line ({} bytes at byte {}): a write was cut short",
            torn.len, torn.offset
        ));
    }
    Ok(Folded {
        snapshot: loaded.session.tool_history().to_json(),
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
