//! What loading and folding a large log allocate, measured with a counting allocator (issue 13:
//! a 1M-event log of 298 MB peaked at 2.39 GiB, every header's tools parsed into their own
//! maps).
//!
//! The log is generated (no checked-in file), shaped like the issue's: tool changes whose header
//! carries 32 to 36 tools with realistic schemas (a header is about 37 kB), and between them
//! user messages, tool calls and their results. One test function, so that no other test
//! allocates while a figure is taken. Small by default; the figures in `docs/benchmarks.md`
//! come from
//! `MEKTPOY_LOAD_EVENTS=1000000 cargo test --release --test load_memory -- --nocapture`.

use std::sync::atomic::Ordering::Relaxed;

#[path = "support/counting.rs"]
mod counting;
use counting::{CURRENT, PEAK};

use mektpoy::event::{Config, Reason, RequestHeader};
use mektpoy::vocab::{MessageSource, Role};
use mektpoy::{ContentBlock, Event, Message, Session, ToolSchema};
use serde_json::json;

/// Bytes allocated now, and resets the peak to it.
fn start() -> usize {
    let now = CURRENT.load(Relaxed);
    PEAK.store(now, Relaxed);
    now
}

/// (peak, held) above `start`.
fn since(start: usize) -> (usize, usize) {
    (
        PEAK.load(Relaxed).saturating_sub(start),
        CURRENT.load(Relaxed).saturating_sub(start),
    )
}

fn events() -> usize {
    std::env::var("MEKTPOY_LOAD_EVENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(12_000)
}

/// Tools in the pool; a header offers all but a rotating few.
const POOL: usize = 36;
/// Events between two tool changes.
const CHANGE_EVERY: usize = 500;

/// Tool `i` at revision `rev`: a schema of the size real tool sets have (about 850 bytes of
/// JSON: a paragraph of description, six described properties, an enum, required fields).
fn tool(i: usize, rev: usize) -> ToolSchema {
    let prop = |name: &str, what: &str| {
        json!({
            "type": "string",
            "description": format!("The {what} the {name} operation of tool {i} works on; \
                an absolute path or a glob, resolved against the workspace root."),
        })
    };
    ToolSchema::from_value(json!({
        "name": format!("tool_{i:02}"),
        "description": format!(
            "Tool {i} (revision {rev}) reads, searches or edits files of the workspace. Use it \
             when the task needs the contents of a file, a listing, or a change to one; prefer \
             the narrowest query, and never pass secrets in arguments."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "path": prop("path", "file"),
                "pattern": prop("pattern", "text"),
                "replacement": prop("replacement", "text"),
                "mode": {"type": "string", "enum": ["read", "search", "edit", "list"],
                         "description": "What to do."},
                "limit": {"type": "integer", "minimum": 1, "maximum": 10000,
                          "description": "At most this many lines or matches."},
                "recursive": {"type": "boolean", "description": "Descend into directories."}
            },
            "required": ["path", "mode"],
            "additionalProperties": false
        },
        "annotations": {"readOnlyHint": i.is_multiple_of(2), "title": format!("Tool {i}")}
    }))
    .expect("a valid tool")
}

/// The tools offered at change `c`: all but four of the pool (the four rotate).
fn offered(c: usize) -> Vec<usize> {
    (0..POOL).filter(|i| !(i + c).is_multiple_of(11)).collect()
}

/// Tool `i`'s revision at change `c`: it is revised at changes `i`, `i + 3 * POOL`, … (about
/// one definition in a hundred changes at each change).
fn revision(i: usize, c: usize) -> usize {
    if c >= i { (c - i) / (3 * POOL) + 1 } else { 0 }
}

/// A session file of `events` events (its text), as the issue's: a tool change every
/// [`CHANGE_EVERY`] events (a `change` header and its developer message), between them a user
/// message, an assistant's tool call and its result, in turn.
fn generate(events: usize) -> String {
    let mut out = String::from("{\"type\":\"session\",\"version\":0,\"id\":\"big\"}\n");
    let mut line = |e: Event| {
        out.push_str(&e.to_json());
        out.push('\n');
    };
    let config = Config::new("anthropic", "claude-opus-5")
        .with("max_tokens", 4096.into())
        .unwrap();
    let mut previous: Vec<usize> = Vec::new();
    let mut n = 0;
    let mut change = 0;
    while n < events {
        if n % CHANGE_EVERY == 0 {
            let now = offered(change);
            let tools: Vec<ToolSchema> =
                now.iter().map(|&i| tool(i, revision(i, change))).collect();
            let reason = if change == 0 {
                Reason::Initial
            } else {
                Reason::Change
            };
            let seq = n as u64;
            line(Event::header(
                RequestHeader::new(config.clone(), tools),
                reason,
            ));
            n += 1;
            let mut blocks: Vec<ContentBlock> = now
                .iter()
                .filter(|i| !previous.contains(i))
                .map(|i| ContentBlock::addition(format!("tool_{i:02}")).unwrap())
                .collect();
            blocks.extend(
                previous
                    .iter()
                    .filter(|i| !now.contains(i))
                    .map(|i| ContentBlock::removal(format!("tool_{i:02}")).unwrap()),
            );
            line(Event::developer(
                Message::developer(format!("d{change}"), blocks),
                Some(mektpoy::vocab::Seq(seq)),
            ));
            n += 1;
            previous = now;
            change += 1;
            continue;
        }
        let call = format!("call{n}");
        match n % 3 {
            0 => line(Event::append(Message::user(
                format!("u{n}"),
                "Fix the parser test.",
            ))),
            1 => line(Event::append(Message::new(
                format!("a{n}"),
                Role::Assistant,
                vec![
                    ContentBlock::tool_call(
                        call,
                        "tool_01",
                        r#"{"path":"src/parse.rs","mode":"read"}"#,
                    )
                    .unwrap(),
                ],
                MessageSource::Model {
                    provider: "anthropic".into(),
                    model: "claude-opus-5".into(),
                },
            ))),
            _ => line(Event::append(Message::tool_result(
                format!("t{n}"),
                format!("call{}", n - 1),
                "let end = len - 1;",
            ))),
        }
        n += 1;
    }
    out
}

fn mib(b: usize) -> f64 {
    b as f64 / 1048576.0
}

#[test]
fn a_large_log_loads_and_folds_with_one_allocation_per_distinct_tool() {
    let n = events();
    let file = generate(n);
    let headers = n.div_ceil(CHANGE_EVERY);
    println!(
        "log: {n} events, {headers} headers, {:.1} MiB",
        mib(file.len())
    );

    let base = start();
    let loaded = Session::load_bytes(file.as_bytes()).expect("the generated log loads");
    let (load_peak, load_held) = since(base);
    let session = loaded.session;
    assert_eq!(session.len(), n);
    let by_reference = session.tool_history();
    let by_value = session.tool_history_by_value();
    let (peak, held) = since(base);
    println!(
        "load: peak {:.1} MiB, held {:.1} MiB; load + both folds: peak {:.1} MiB ({:.2}x the \
         file), held {:.1} MiB ({:.2}x)",
        mib(load_peak),
        mib(load_held),
        mib(peak),
        peak as f64 / file.len() as f64,
        mib(held),
        held as f64 / file.len() as f64,
    );
    assert!(!by_reference.tools().is_empty() && !by_value.tools().is_empty());

    // Interning: every header's tool of one definition shares one allocation with the same
    // tool of every other header that has that definition.
    let events = session.events();
    let mut first_of: std::collections::HashMap<(String, usize), ToolSchema> = Default::default();
    let mut change = 0;
    let mut distinct = 0;
    let mut copies = 0;
    for event in events.iter() {
        let Event::Header(h) = event else { continue };
        for t in h.header.tools.iter() {
            let i: usize = t.name()["tool_".len()..].parse().unwrap();
            let key = (t.name().to_owned(), revision(i, change));
            match first_of.get(&key) {
                Some(first) if first.shares_definition_with(t) => {}
                Some(first) => {
                    assert!(first.same_definition(t));
                    copies += 1;
                }
                None => {
                    distinct += 1;
                    first_of.insert(key, t.clone());
                }
            }
        }
        change += 1;
    }
    assert_eq!(change, headers);
    // Revised definitions are not shared with their previous revision.
    for ((name, rev), t) in &first_of {
        if let Some(older) = first_of.get(&(name.clone(), rev.wrapping_sub(1))) {
            assert!(!older.shares_definition_with(t) && !older.same_definition(t));
        }
    }
    println!("{distinct} distinct definitions over {headers} headers, {copies} copies of one");

    // What is held: the events, each header's tools a slice of pointers to shared definitions
    // (before interning, every header held its own parsed copy, ~200 kB), and no copy of a
    // line the encoder writes back byte for byte (all of these). Before decision 76 this log
    // held 4.8 times its size at this scale and 4.76 at 1M events.
    let ratio = held as f64 / file.len() as f64;
    assert!(ratio < 3.0, "held {ratio:.2}x the file");
    let peak_ratio = peak as f64 / file.len() as f64;
    assert!(peak_ratio < 3.0, "peak {peak_ratio:.2}x the file");

    // The file still saves byte for byte.
    assert_eq!(session.to_jsonl(), file);
}
