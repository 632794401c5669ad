//! Projects one request for a route, reading JSON on stdin and writing JSON on stdout, so
//! that other languages can drive the projection.
//!
//! ```text
//! echo '{"messages":[...],"tools":[...],"mode":"in-history","history":{...}}' \
//!     | cargo run --example project
//! ```
//!
//! Input: one object `{"messages":[...],"tools":[...]|null,"mode":"in-history"|
//! "addition-only"|null,"history":{"tools":[...],"updates":[...]}|null,"inline"?:bool}`; an
//! absent key reads as `null`, an unknown key is an error. With `"inline": true` the route
//! takes definitions by value: `mode` must be `"in-history"` and `history` is a by-value
//! snapshot. Output: one line `{"messages":[...],"tools":[...]|null}`, tools with
//! `deferLoading` only when true, a by-value addition as
//! `{"type":"tool-addition","toolName":N,"definition":{...}}`.
//! Malformed input exits 1 with a message on stderr naming the fault.

use std::io::{Read, Write};
use std::process::ExitCode;

use mektpoy::{
    Message, ToolSchema,
    history::ToolHistory,
    project::{project_tool_updates, project_tool_updates_inline},
    route::ToolUpdateMode,
};
use serde::Deserialize;

/// The request to project.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Input {
    messages: Vec<Message>,
    #[serde(default)]
    tools: Option<Vec<ToolSchema>>,
    #[serde(default)]
    mode: Option<ToolUpdateMode>,
    #[serde(default)]
    history: Option<ToolHistory>,
    #[serde(default)]
    inline: bool,
}

fn main() -> ExitCode {
    let mut text = String::new();
    if let Err(e) = std::io::stdin().read_to_string(&mut text) {
        eprintln!("error: cannot read stdin: {e}");
        return ExitCode::FAILURE;
    }
    match run(&text) {
        Ok(line) => {
            let mut stdout = std::io::stdout().lock();
            if writeln!(stdout, "{line}").is_err() {
                return ExitCode::FAILURE;
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Projects the request in `text` and returns the output line (without `\n`).
fn run(text: &str) -> Result<String, String> {
    let input: Input = serde_json::from_str(text).map_err(|e| format!("malformed input: {e}"))?;
    let out = if input.inline {
        if input.mode != Some(ToolUpdateMode::InHistory) {
            return Err("`inline` needs `\"mode\": \"in-history\"`".into());
        }
        project_tool_updates_inline(
            &input.messages,
            input.tools.as_deref(),
            input.history.as_ref(),
        )
    } else {
        project_tool_updates(
            &input.messages,
            input.tools.as_deref(),
            input.mode,
            input.history.as_ref(),
        )
    };
    serde_json::to_string(&out).map_err(|e| format!("cannot write the projection: {e}"))
}
