//! Tool definitions shared across headers (decision 76): a header joining the log takes the
//! allocation of each definition written alike that the log already holds, and no byte the
//! crate writes changes (an appended event's line, a loaded file saved back, a wire's tools).

use std::sync::Arc;

use mektpoy::event::{Config, Reason, RequestHeader};
use mektpoy::{Event, Session, ToolSchema};
use proptest::prelude::*;

fn parse(text: &str) -> ToolSchema {
    serde_json::from_str(text).expect("a tool")
}

fn header(tools: Vec<ToolSchema>, reason: Reason) -> Event {
    Event::header(
        RequestHeader::new(Config::new("anthropic", "claude-opus-5"), tools),
        reason,
    )
}

/// The tools of every header of `session`, in order.
fn header_tools(session: &Session) -> Vec<Arc<[ToolSchema]>> {
    session
        .events()
        .iter()
        .filter_map(|e| match e {
            Event::Header(h) => Some(Arc::clone(&h.header.tools)),
            _ => None,
        })
        .collect()
}

const READ: &str = r#"{"name":"read","description":"read a file","parameters":{"properties":{"path":{"type":"string"}},"type":"object"},"title":"Read","annotations":{"readOnlyHint":true}}"#;
/// `READ` with its unknown fields in the other order: equivalent (reference §1), written
/// otherwise.
const READ_RESPELLED: &str = r#"{"name":"read","description":"read a file","parameters":{"properties":{"path":{"type":"string"}},"type":"object"},"annotations":{"readOnlyHint":true},"title":"Read"}"#;
const LIST: &str = r#"{"name":"list","description":"list a directory","parameters":{"type":"object","maximum":1.0}}"#;

#[test]
fn equal_definitions_of_appended_headers_share_one_allocation_and_keep_their_bytes() {
    let session = Session::new("s");
    let events = [
        header(vec![parse(READ), parse(LIST)], Reason::Initial),
        // Fresh copies, as another process or a deserialized request would make them.
        header(vec![parse(LIST), parse(READ)], Reason::Change),
        header(vec![parse(READ_RESPELLED)], Reason::Change),
        header(
            vec![parse(READ).with_defer_loading(true), parse(LIST)],
            Reason::Change,
        ),
    ];
    let lines: Vec<String> = events.iter().map(Event::to_json).collect();
    for e in events {
        session.append(e).unwrap();
    }
    let tools = header_tools(&session);
    let (read, list) = (&tools[0][0], &tools[0][1]);
    assert!(tools[1][0].shares_definition_with(list));
    assert!(tools[1][1].shares_definition_with(read));
    assert!(tools[3][0].shares_definition_with(read) && tools[3][0].defer_loading());
    assert!(tools[3][1].shares_definition_with(list));
    // Equivalent, written otherwise: its own allocation, so its own bytes.
    assert!(tools[2][0].same_definition(read) && !tools[2][0].shares_definition_with(read));
    // Every line as the event given would have written it.
    let mut expected = format!("{}\n", session.to_jsonl().lines().next().unwrap());
    for l in &lines {
        expected.push_str(l);
        expected.push('\n');
    }
    assert_eq!(session.to_jsonl(), expected);

    // Loaded, the same sharing; saved, the same bytes.
    let loaded = Session::load_bytes(expected.as_bytes()).unwrap().session;
    let tools = header_tools(&loaded);
    assert!(tools[1][1].shares_definition_with(&tools[0][0]));
    assert!(tools[3][0].shares_definition_with(&tools[0][0]));
    assert!(!tools[2][0].shares_definition_with(&tools[0][0]));
    assert_eq!(loaded.to_jsonl(), expected);
}

#[test]
fn a_header_the_caller_still_holds_is_copied_not_changed() {
    let session = Session::new("s");
    session
        .append(header(vec![parse(READ)], Reason::Initial))
        .unwrap();
    let mine = header(vec![parse(READ)], Reason::Change);
    let Event::Header(held) = &mine else {
        unreachable!()
    };
    let before = Arc::clone(&held.header.tools);
    session.append(mine.clone()).unwrap();
    // The caller's header and its tools are as they were.
    assert!(Arc::ptr_eq(&before, &held.header.tools));
    assert!(before[0].shares_definition_with(&held.header.tools[0]));
    let tools = header_tools(&session);
    assert!(tools[1][0].shares_definition_with(&tools[0][0]));
    assert!(!tools[1][0].shares_definition_with(&before[0]));
    assert_eq!(session.events()[1].to_json(), mine.to_json());
}

#[test]
fn loaded_lines_the_encoder_would_write_otherwise_are_saved_verbatim() {
    // Spaces, keys out of the encoder's order, a number spelled `1e0`: each kept as read.
    let file = concat!(
        "{\"type\":\"session\",\"version\":0,\"id\":\"s\"}\n",
        "{\"data\":{\"reason\":\"initial\",\"header\":{\"tools\":[{\"parameters\":{\"type\":\"object\",\"max\":1e0},\"name\":\"read\",\"description\":\"d\"}],\"config\":{\"model\":\"m\",\"provider\":\"p\"}}},\"type\":\"request/header\"}\n",
        "{\"type\": \"user/message\", \"data\": {\"message\": {\"id\": \"u1\", \"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"hi\"}], \"source\": {\"kind\": \"user\"}}}, \"surfaceOp\": \"append\"}\n",
        "{\"type\":\"x/note\",\"b\":1,\"a\":2}\n",
    );
    let loaded = Session::load_bytes(file.as_bytes()).unwrap().session;
    assert_eq!(loaded.to_jsonl(), file);
    // Appended to, the loaded lines still come back as read.
    loaded
        .append(header(vec![parse(READ)], Reason::Change))
        .unwrap();
    assert!(loaded.to_jsonl().starts_with(file));
}

/// A tool of `name` written in one of a few forms: `form` 0 and 1 are equivalent but spell the
/// unknown fields in another order, 2 is another definition.
fn tool_text(name: u8, form: u8) -> String {
    let fields = match form {
        0 => r#""a":1,"b":[2.5]"#,
        1 => r#""b":[2.5],"a":1"#,
        _ => r#""a":2,"b":[2.5]"#,
    };
    format!(
        r#"{{"name":"t{name}","description":"tool {name}","parameters":{{"type":"object"}},{fields}}}"#
    )
}

proptest! {
    /// Over any headers, loaded or appended: two tools share an allocation exactly when they
    /// are written alike, and the file saves byte for byte.
    #[test]
    fn tools_share_exactly_when_written_alike(
        headers in prop::collection::vec(
            prop::collection::btree_map(0u8..5, (0u8..3, any::<bool>()), 1..5),
            1..8,
        ),
    ) {
        let session = Session::new("p");
        for (i, tools) in headers.iter().enumerate() {
            let tools: Vec<ToolSchema> = tools
                .iter()
                .map(|(name, (form, deferred))| {
                    parse(&tool_text(*name, *form)).with_defer_loading(*deferred)
                })
                .collect();
            let reason = if i == 0 { Reason::Initial } else { Reason::Change };
            session.append(header(tools, reason)).unwrap();
        }
        let text = session.to_jsonl();
        let loaded = Session::load_bytes(text.as_bytes()).unwrap().session;
        prop_assert_eq!(loaded.to_jsonl(), text);
        for s in [&session, &loaded] {
            let all: Vec<((u8, u8), ToolSchema)> = header_tools(s)
                .iter()
                .zip(&headers)
                .flat_map(|(tools, spec)| {
                    tools.iter().cloned().zip(spec.iter()).map(|(t, (n, (f, _)))| ((*n, *f), t))
                })
                .collect();
            for (ka, a) in &all {
                for (kb, b) in &all {
                    prop_assert_eq!(a.shares_definition_with(b), ka == kb);
                }
            }
        }
    }
}
