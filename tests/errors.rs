//! Issue 10 item 7: every error prints its cause once. A message either names its cause's text
//! or returns the cause from `source()`, never both, so a report that walks the chain
//! (`anyhow`'s `{:#}`, `eyre`, a log line joining `source()`s with `: `) does not read
//! `malformed JSON: malformed JSON: …`.

use std::error::Error as StdError;
use std::io;

use mektpoy::{
    Config, ContentBlock, Error, Event, Message, Meter, Session, ToolSchema,
    event::RequestHeader,
    project::ProjectedToolUpdates,
    route_for,
    session::{AppendErrorKind, FileOptions},
    store::JsonlSink,
    vocab::{MessageSource, Role},
    wire::serialize,
};

/// Each error of the chain starting at `err`, outermost first.
fn chain(err: &(dyn StdError + 'static)) -> Vec<String> {
    let mut out = vec![err.to_string()];
    let mut at = err.source();
    while let Some(e) = at {
        out.push(e.to_string());
        at = e.source();
    }
    out
}

/// No message of the chain repeats the text of a cause below it.
fn assert_cause_once(name: &str, err: &(dyn StdError + 'static), depth: usize) {
    let messages = chain(err);
    assert_eq!(messages.len(), depth, "{name}: {messages:#?}");
    for (i, outer) in messages.iter().enumerate() {
        for inner in &messages[i + 1..] {
            assert!(
                !outer.contains(inner.as_str()),
                "{name}: `{outer}` repeats its cause `{inner}`"
            );
        }
    }
}

#[test]
fn every_error_prints_its_cause_once() {
    let session = Session::new("s");

    // The issue's case: append_json of broken JSON (event → malformed JSON → serde_json).
    let err = session.append_json("{").unwrap_err();
    assert_cause_once("append_json of broken JSON", &err, 3);
    assert_cause_once("the same, as the crate Error", &Error::from(err), 3);

    // A shape fault with a cause of its own (event → header tool → tool field).
    let err = session
        .append_json(r#"{"type":"request/header","data":{"header":{"config":{"provider":"p","model":"m"},"tools":[{"name":"","description":"d","parameters":{}}]},"reason":"initial"}}"#)
        .unwrap_err();
    assert_cause_once("a malformed header tool", &err, 3);

    // A repeated key.
    let err = session
        .append_json(r#"{"type":"x/y","type":"x/z","data":{}}"#)
        .unwrap_err();
    assert_cause_once("a repeated key", &err, 2);

    // Loading: line → event → malformed JSON → serde_json.
    let file = "{\"type\":\"session\",\"version\":0,\"id\":\"s\"}\n{\n{}\n";
    let err = Session::load_bytes(file.as_bytes()).unwrap_err();
    assert_cause_once("a bad line in a file", &err, 4);
    assert_cause_once("the same, as the crate Error", &Error::from(err), 4);

    // An I/O fault reading a file.
    let dir = tempfile::tempdir().unwrap();
    let err = Session::load(dir.path().join("missing.jsonl")).unwrap_err();
    assert_cause_once("a missing file", &err, 2);

    // A write fault under an append, from a sink whose disk is full after the session line.
    struct Full(usize);
    impl JsonlSink for Full {
        fn append(&mut self, _: &[u8]) -> io::Result<()> {
            self.0 += 1;
            if self.0 > 1 {
                Err(io::Error::other("disk full"))
            } else {
                Ok(())
            }
        }
        fn truncate(&mut self, _: u64) -> io::Result<()> {
            Ok(())
        }
        fn sync(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
    let full = FileOptions::new()
        .sink(|_| Full(0))
        .create(dir.path().join("full.jsonl"), "s")
        .unwrap();
    let err = full
        .append(Event::append(Message::user("u1", "hi")))
        .unwrap_err();
    assert!(
        matches!(err.kind(), AppendErrorKind::Write { .. }),
        "{err:?}"
    );
    assert_cause_once("a failed write", &err, 3);

    // The recorder wrapping a refused append (the conversion `record` uses): transparent, so
    // its message is the refusal's own (issue 11: it used to print only "the batch was
    // refused").
    let refused = session.append_json("[]").unwrap_err();
    let text = refused.to_string();
    let err = mektpoy::agent::RecordError::from(refused);
    assert_eq!(err.to_string(), text);
    assert_cause_once("a refused batch", &err, 2);

    // The wire: a call without its result (the message names the message; no cause below).
    // Arguments that are not JSON no longer fail (decision 94).
    let messages = vec![
        Message::user("u1", "go"),
        Message::new(
            "a1",
            Role::Assistant,
            vec![ContentBlock::tool_call("c1", "read", "{").unwrap()],
            MessageSource::Model {
                provider: "deepseek".into(),
                model: "deepseek-flash".into(),
            },
        ),
        Message::user("u2", "and?"),
    ];
    let projected = ProjectedToolUpdates::new(messages);
    let config = Config::new("deepseek", "deepseek-flash")
        .with("max_tokens", 8.into())
        .unwrap();
    let err = serialize(
        &config,
        &projected,
        &route_for("deepseek", "deepseek-flash"),
    )
    .unwrap_err();
    assert_cause_once("a call without its result", &err, 1);
    assert_cause_once("the same, as the crate Error", &Error::from(err), 1);

    // The meter on a body that is not JSON.
    let meter = Meter::new(&route_for("deepseek", "deepseek-flash"));
    let err = meter.prefix_bytes("not json").unwrap_err();
    assert_cause_once("a body the meter cannot read", &err, 2);

    // The schema guard: `read` was called under another definition (no cause below it).
    let guarded = Session::new("g");
    let read = |description: &str| ToolSchema::new("read", description, serde_json::Map::new());
    guarded
        .append(Event::header(
            RequestHeader::new(Config::new("p", "m"), vec![read("v1")]),
            mektpoy::event::Reason::Initial,
        ))
        .unwrap();
    let call = Message::new(
        "a1",
        Role::Assistant,
        vec![ContentBlock::tool_call("c1", "read", "{}").unwrap()],
        MessageSource::Model {
            provider: "p".into(),
            model: "m".into(),
        },
    );
    guarded.append(Event::append(call)).unwrap();
    let err = guarded.check_tool(&read("v2")).unwrap_err();
    assert_cause_once("a schema conflict", &err, 1);
    assert_cause_once("the same, as the crate Error", &Error::from(err), 1);
    let err = guarded.check_tools(&[read("v2")]).unwrap_err();
    assert_cause_once("schema conflicts", &Error::from(err), 1);

    // Errors without a cause print it nowhere.
    let header = RequestHeader::new(
        Config::new("p", "m"),
        vec![ToolSchema::new("a", "a", serde_json::Map::new())],
    );
    let err = mektpoy::project::validate_tool_call("", &header).unwrap_err();
    assert_cause_once("an empty tool name", &err, 1);
}
