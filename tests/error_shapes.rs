//! Issue 11: errors shaped for callers (the position outside, what is wrong inside; typed
//! reasons; one name per rule on the log and wire sides) and values a log would refuse made
//! unbuildable (unknown blocks, sources and opaque events come only from checked constructors
//! or decoding).

use std::error::Error as _;

use mektpoy::{
    Config, ContentBlock, Event, Message, Session, ToolSchema,
    event::{DecodeError, OpaqueError, OpaqueEvent, Reason, RequestHeader, SurfaceOp},
    project::ProjectedToolUpdates,
    route_for,
    session::AppendErrorKind,
    vocab::{BlockError, MessageSource, Role, Seq, SourceError},
    wire::{MessageFault, WireError, serialize},
};
use serde_json::json;

fn tool(name: &str) -> ToolSchema {
    ToolSchema::new(name, "d", serde_json::Map::new())
}

#[test]
fn an_append_error_is_its_seq_and_its_kind() {
    let session = Session::new("s");
    session
        .append(Event::append(Message::user("u1", "hi")))
        .unwrap();
    session
        .append(Event::append(Message::user("u2", "hi")))
        .unwrap();
    let err = session
        .append(Event::append(Message::user("u1", "again")))
        .unwrap_err();
    assert_eq!(err.seq(), Seq(2));
    assert!(
        matches!(err.kind(), AppendErrorKind::DuplicateMessageId { id } if id == "u1"),
        "{err:?}"
    );
    // The text is what it was when every variant held its `seq`.
    assert_eq!(
        err.to_string(),
        "event 2: message id u1 is already in the session"
    );
    assert_eq!(
        err.kind().to_string(),
        "message id u1 is already in the session"
    );
    assert!(err.source().is_none());
    assert!(matches!(
        err.into_kind(),
        AppendErrorKind::DuplicateMessageId { .. }
    ));

    // A decode fault stays the source; the kind is not a link of the chain.
    let err = session.append_json("{").unwrap_err();
    assert_eq!(err.seq(), Seq(2));
    assert_eq!(err.to_string(), "event 2: not a well-formed event");
    let source = err.source().expect("the decode fault");
    assert!(source.downcast_ref::<DecodeError>().is_some(), "{source:?}");
    match err.into_kind() {
        AppendErrorKind::Decode {
            source: DecodeError::Json(_),
        } => {}
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_fault_inside_a_message_is_its_id_and_its_fault() {
    let messages = [
        Message::user("u1", "go"),
        Message::new(
            "a1",
            Role::Assistant,
            vec![ContentBlock::tool_call("c1", "read", "{}").unwrap()],
            MessageSource::Model {
                provider: "deepseek".into(),
                model: "deepseek-flash".into(),
            },
        ),
    ];
    let projected = ProjectedToolUpdates::new(&messages[..]);
    let config = Config::new("deepseek", "deepseek-flash")
        .with("max_tokens", 8.into())
        .unwrap();
    let route = route_for("deepseek", "deepseek-flash");
    let err = serialize(&config, &projected, &route).unwrap_err();
    match &err {
        WireError::Message {
            message_id,
            kind: MessageFault::MissingToolResult { call_id },
        } => {
            assert_eq!(message_id, "a1");
            assert_eq!(call_id, "c1");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(err.message_id(), Some("a1"));
    assert_eq!(err.to_string(), "message a1: tool call c1 has no result");

    // A request-level fault names no message.
    let tools = [tool("A"), tool("A")];
    let projected = ProjectedToolUpdates::new(&messages[..1]).with_tools(&tools[..]);
    let err = serialize(&config, &projected, &route).unwrap_err();
    assert!(
        matches!(&err, WireError::DuplicateToolName { tool } if tool == "A"),
        "{err:?}"
    );
    assert_eq!(err.message_id(), None);
}

/// The log and the wire refuse two tools with one name under one name.
#[test]
fn one_rule_one_name_on_both_sides() {
    let session = Session::new("s");
    let err = session
        .append(Event::header(
            RequestHeader::new(Config::new("p", "m"), vec![tool("A"), tool("A")]),
            Reason::Initial,
        ))
        .unwrap_err();
    assert!(
        matches!(err.kind(), AppendErrorKind::DuplicateToolName { tool } if tool == "A"),
        "{err:?}"
    );

    // A tool result whose source names no call: refused by append, and by the wire under the
    // same name when a message built by code reaches it without a log.
    let orphan = Message::new(
        "t1",
        Role::Tool,
        vec![ContentBlock::text("ok")],
        MessageSource::User,
    );
    let err = session.append(Event::append(orphan.clone())).unwrap_err();
    assert!(matches!(
        err.kind(),
        AppendErrorKind::ToolResultWithoutCallId { .. }
    ));
    let messages = [Message::user("u1", "go"), orphan];
    let projected = ProjectedToolUpdates::new(&messages[..]);
    let config = Config::new("deepseek", "deepseek-flash")
        .with("max_tokens", 8.into())
        .unwrap();
    let err = serialize(
        &config,
        &projected,
        &route_for("deepseek", "deepseek-flash"),
    )
    .unwrap_err();
    assert!(
        matches!(
            &err,
            WireError::Message { message_id, kind: MessageFault::ToolResultWithoutCallId }
                if message_id == "t1"
        ),
        "{err:?}"
    );
}

#[test]
fn unknown_blocks_and_sources_come_only_from_checked_constructors() {
    assert_eq!(
        ContentBlock::other(
            json!({"type": "tool-call", "id": "c", "name": "n", "arguments": "{}"})
        ),
        Err(BlockError::KnownType {
            block_type: "tool-call"
        })
    );
    // `from_value` sends a known type to its typed variant instead.
    assert_eq!(
        ContentBlock::from_value(json!({"type": "text", "text": "hi"})),
        Ok(ContentBlock::text("hi"))
    );
    assert_eq!(
        ContentBlock::from_value(json!({"type": "tool-call", "id": "c", "name": "n"})),
        Err(BlockError::Field {
            block_type: "tool-call",
            field: "arguments"
        })
    );
    assert_eq!(
        MessageSource::other(json!({"kind": "tool", "callId": "c"})),
        Err(SourceError::KnownKind { kind: "tool" })
    );
    assert_eq!(
        MessageSource::from_value(json!({"kind": "tool", "callId": "c"})),
        Ok(MessageSource::Tool {
            call_id: "c".into()
        })
    );

    // What they build is appended and read back as the same values.
    let image = ContentBlock::other(json!({"type": "image", "url": "x"})).unwrap();
    let note = MessageSource::other(json!({"kind": "compaction", "turns": 9})).unwrap();
    let session = Session::new("s");
    session
        .append(Event::append(Message::new(
            "s1",
            Role::System,
            vec![ContentBlock::text("summary"), image.clone()],
            note.clone(),
        )))
        .unwrap();
    let reread = Session::load_bytes(session.to_jsonl().as_bytes())
        .unwrap()
        .session;
    let message = &reread.messages()[0];
    assert_eq!(message.content()[1], image);
    assert_eq!(*message.source(), note);
    let ContentBlock::Other(o) = &message.content()[1] else {
        panic!("{message:?}")
    };
    assert_eq!(o.type_name(), "image");
    assert_eq!(o.get("url"), Some(&json!("x")));
    let MessageSource::Other(s) = message.source() else {
        panic!("{message:?}")
    };
    assert_eq!(s.kind(), "compaction");
    assert_eq!(s.get("turns"), Some(&json!(9)));
}

#[test]
fn a_decode_fault_carries_a_typed_reason() {
    let session = Session::new("s");
    let err = session
        .append_json(r#"{"type":"user/message","data":{"message":{"id":"x","role":"user","content":[{"type":"tool-addition","toolName":""}],"source":{"kind":"user"}}},"surfaceOp":"append"}"#)
        .unwrap_err();
    let Some(DecodeError::MalformedBlock { id, index, reason }) =
        err.source().and_then(|s| s.downcast_ref::<DecodeError>())
    else {
        panic!("{err:?}")
    };
    assert_eq!((id.as_str(), *index), ("x", 0));
    assert_eq!(
        *reason,
        BlockError::EmptyToolName {
            block_type: "tool-addition",
            field: "toolName"
        }
    );
    // The text is the one the string reason had.
    assert_eq!(
        err.source().unwrap().to_string(),
        "message x: content block 0 is malformed: `tool-addition` block names a tool with an empty `toolName`"
    );

    let err = session
        .append_json(r#"{"type":"user/message","data":{"message":{"id":"x","role":"user","content":[],"source":{"kind":"model","provider":"p"}}},"surfaceOp":"append"}"#)
        .unwrap_err();
    assert!(
        matches!(
            err.source().and_then(|s| s.downcast_ref::<DecodeError>()),
            Some(DecodeError::MalformedSource {
                reason: SourceError::Field {
                    kind: "model",
                    field: "model"
                },
                ..
            })
        ),
        "{err:?}"
    );
}

#[test]
fn an_opaque_event_is_built_checked() {
    for ty in [
        "user/message",
        "request/header",
        "thinking/floor",
        "session",
    ] {
        assert_eq!(
            OpaqueEvent::new(ty, Default::default(), None),
            Err(OpaqueError::KnownType {
                event_type: ty.to_owned()
            }),
            "{ty}"
        );
    }
    let fields = [("surfaceOp".to_owned(), json!("append"))]
        .into_iter()
        .collect();
    assert_eq!(
        OpaqueEvent::new("note/x", fields, None),
        Err(OpaqueError::ReservedKey {
            key: "surfaceOp".to_owned()
        })
    );
    let fields = [("data".to_owned(), json!({"a": 1}))].into_iter().collect();
    let note = OpaqueEvent::new("note/x", fields, Some(SurfaceOp::Append)).unwrap();
    assert_eq!(note.event_type(), "note/x");
    assert_eq!(note.surface_op(), Some(SurfaceOp::Append));
    assert_eq!(note.fields()["data"], json!({"a": 1}));
    let event = Event::from(note);
    assert_eq!(
        event.to_json(),
        r#"{"type":"note/x","data":{"a":1},"surfaceOp":"append"}"#
    );
    let session = Session::new("s");
    assert_eq!(session.append(event.clone()).unwrap(), Seq(0));
    assert_eq!(Event::from_json(&event.to_json()).unwrap(), event);

    // A `session` line still decodes as an opaque event, which append refuses: the one way left
    // to `OpaqueKnownType`.
    let err = session
        .append_json(r#"{"type":"session","version":0,"id":"t"}"#)
        .unwrap_err();
    assert_eq!(err.seq(), Seq(1));
    assert!(
        matches!(err.kind(), AppendErrorKind::OpaqueKnownType { event_type } if event_type == "session"),
        "{err:?}"
    );
}

/// A tool call or tool change naming an empty tool cannot be built (issue 21: the payloads sit
/// behind checked constructors), so append has no such block to refuse; the constructor's fault
/// is the one decoding names for the same line.
#[test]
fn a_block_naming_an_empty_tool_cannot_be_built() {
    let err = ContentBlock::removal("").unwrap_err();
    assert_eq!(
        err,
        BlockError::EmptyToolName {
            block_type: "tool-removal",
            field: "toolName"
        }
    );
    assert_eq!(
        err.to_string(),
        "`tool-removal` block names a tool with an empty `toolName`"
    );
    assert_eq!(
        ContentBlock::tool_call("c1", "", "{}")
            .unwrap_err()
            .to_string(),
        "`tool-call` block names a tool with an empty `name`"
    );
}
