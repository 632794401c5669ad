//! Provider responses decoded: the vendors' documented shapes, the streams' refusals, and the
//! property that a streamed answer equals its JSON body and goes back on the wire byte for byte.

use indexmap::IndexMap;
use mektpoy::response::{
    Answer, BindingCheck, CacheMissKind, ChatStream, MessagesStream, MissingPart, ResponseError,
    StopReason, TransformationKind, decode_chat, decode_messages,
};
use mektpoy::{
    Config, ContentBlock, Event, Message, Session,
    project::ProjectedToolUpdates,
    route_for,
    vocab::{MessageSource, Role},
    wire::serialize,
};
use proptest::prelude::*;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};

/// An SSE stream of `(event, data)` pairs.
fn sse(events: &[(&str, Value)]) -> String {
    events
        .iter()
        .map(|(event, data)| format!("event: {event}\ndata: {data}\n\n"))
        .collect()
}

fn stream(provider: &str, text: &str) -> Result<Answer, ResponseError> {
    let mut s = MessagesStream::new(provider, None);
    s.push_text(text)?;
    s.finish()
}

/// A Messages body in the vendor's documented shape: thinking with a signature, text, two
/// tool calls, usage with cache figures.
const TOOLS_BODY: &str = r#"{
  "id": "msg_01Aq9w938a90dw8q",
  "type": "message",
  "role": "assistant",
  "model": "claude-opus-5",
  "content": [
    {"type": "thinking", "thinking": "The user wants the weather in two cities.", "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"},
    {"type": "text", "text": "I'll check both.", "citations": null},
    {"type": "tool_use", "id": "toolu_01A", "name": "get_weather", "input": {"location":"San Francisco, CA","unit":"celsius","days":[1,2],"exact":1.50}},
    {"type": "tool_use", "id": "toolu_01B", "name": "get_weather", "input": {"location":"Paris","big":123456789012345678901234567890}}
  ],
  "stop_reason": "tool_use",
  "stop_sequence": null,
  "usage": {
    "input_tokens": 12,
    "cache_creation_input_tokens": 2000,
    "cache_read_input_tokens": 30000,
    "cache_creation": {"ephemeral_5m_input_tokens": 500, "ephemeral_1h_input_tokens": 1500},
    "output_tokens": 90,
    "service_tier": "standard"
  }
}"#;

#[test]
fn messages_body_with_thinking_text_and_tool_calls() {
    let answer = decode_messages(TOOLS_BODY, "anthropic", None).unwrap();
    let m = &answer.message;
    assert_eq!(m.id(), "msg_01Aq9w938a90dw8q");
    assert_eq!(m.role(), Role::Assistant);
    assert_eq!(
        m.source(),
        &MessageSource::Model {
            provider: "anthropic".into(),
            model: "claude-opus-5".into()
        }
    );
    let mut extra = IndexMap::new();
    extra.insert(
        "signature".to_owned(),
        json!("EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"),
    );
    assert_eq!(
        m.content(),
        &[
            ContentBlock::Reasoning {
                text: "The user wants the weather in two cities.".into(),
                extra
            },
            ContentBlock::text("I'll check both."),
            ContentBlock::tool_call(
                "toolu_01A",
                "get_weather",
                r#"{"location":"San Francisco, CA","unit":"celsius","days":[1,2],"exact":1.50}"#
            )
            .unwrap(),
            // Every digit, as sent: no f64 on the way.
            ContentBlock::tool_call(
                "toolu_01B",
                "get_weather",
                r#"{"location":"Paris","big":123456789012345678901234567890}"#
            )
            .unwrap(),
        ]
    );
    assert_eq!(answer.stop_reason, Some(StopReason::ToolUse));
    let usage = answer.usage.unwrap();
    // input_tokens excludes both cache figures.
    assert_eq!(usage.prompt_tokens, 32012);
    assert_eq!(usage.cache_read_tokens, Some(30000));
    assert_eq!(usage.cache_write_tokens, Some(2000));
    assert_eq!(usage.uncached_prompt_tokens(), 12);
    assert_eq!(usage.output_tokens, 90);
    let creation = usage.cache_creation.unwrap();
    assert_eq!(creation.ephemeral_5m_input_tokens, Some(500));
    assert_eq!(creation.ephemeral_1h_input_tokens, Some(1500));
    assert_eq!(answer.diagnostics, None);
    assert_eq!(answer.input_transformations, None);
}

#[test]
fn caller_supplies_the_message_id() {
    let answer = decode_messages(TOOLS_BODY, "anthropic", Some("a7")).unwrap();
    assert_eq!(answer.message.id(), "a7");
    assert_eq!(answer.response_id, "msg_01Aq9w938a90dw8q");
}

/// What the log keeps goes back on the wire as the provider sent it.
#[test]
fn decoded_answer_goes_back_byte_for_byte() {
    let answer = decode_messages(TOOLS_BODY, "anthropic", None).unwrap();
    let wire = next_request(&answer.message);
    let turn = assistant_turn(&wire);
    assert_eq!(turn.len(), 4);
    let thinking: Value = serde_json::from_str(turn[0].get()).unwrap();
    assert_eq!(
        thinking["signature"],
        "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"
    );
    assert_eq!(
        input_text(turn[2]),
        r#"{"location":"San Francisco, CA","unit":"celsius","days":[1,2],"exact":1.50}"#
    );
    assert_eq!(
        input_text(turn[3]),
        r#"{"location":"Paris","big":123456789012345678901234567890}"#
    );
}

#[test]
fn decoded_answer_appends_to_a_session() {
    let session = Session::new("s");
    session
        .append(Event::append(Message::user("u1", "weather?")))
        .unwrap();
    let answer = decode_messages(TOOLS_BODY, "anthropic", Some("a1")).unwrap();
    session.append(Event::append(answer.message)).unwrap();
}

#[test]
fn redacted_and_unknown_blocks_are_kept_verbatim() {
    let body = json!({
        "id": "msg_2", "type": "message", "role": "assistant", "model": "claude-opus-5",
        "content": [
            {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a"},
            {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "x"}},
            {"type": "text", "text": "ok"}
        ],
        "stop_reason": "end_turn", "stop_sequence": null,
        "usage": {"input_tokens": 5, "output_tokens": 2}
    });
    let answer = decode_messages(&body.to_string(), "anthropic", None).unwrap();
    let content = answer.message.content();
    assert_eq!(
        content[0],
        ContentBlock::other(
            json!({"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a"})
        )
        .unwrap()
    );
    assert_eq!(
        content[1],
        ContentBlock::other(body["content"][1].clone()).unwrap()
    );
    let usage = answer.usage.unwrap();
    assert_eq!((usage.prompt_tokens, usage.cache_read_tokens), (5, None));
    // The redacted block goes back as it came (the server tool block is the serializer's to
    // refuse, so it is left out here).
    let kept = answer
        .message
        .with_content(vec![content[0].clone(), content[2].clone()]);
    let wire = next_request(&kept);
    let turn = assistant_turn(&wire);
    let redacted: Value = serde_json::from_str(turn[0].get()).unwrap();
    assert_eq!(redacted, body["content"][0]);
}

#[test]
fn a_block_named_like_a_log_block_is_refused() {
    let body = json!({
        "id": "m", "type": "message", "role": "assistant", "model": "x",
        "content": [{"type": "tool-call", "id": "c"}],
        "usage": {"input_tokens": 1, "output_tokens": 1}
    });
    let err = decode_messages(&body.to_string(), "anthropic", None).unwrap_err();
    assert!(
        matches!(err, ResponseError::UnrepresentableBlock { index: 0, ref block_type } if block_type == "tool-call"),
        "{err:?}"
    );
}

#[test]
fn diagnostics_and_input_transformations_are_typed() {
    let body = json!({
        "id": "msg_3", "type": "message", "role": "assistant", "model": "claude-fable-5-1",
        "content": [{"type": "text", "text": "hi"}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 6, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 41203, "output_tokens": 21},
        "diagnostics": {"cache_miss_reason": {"type": "tools_changed", "cache_missed_input_tokens": 41000}},
        "input_transformations": [
            {"type": "thinking_dropped", "path": "messages.3.content.0", "reason": "prefix_binding_mismatch"},
            {"type": "thinking_mismatch_allowed", "path": "messages.5.content.1", "reason": "prefix_binding_mismatch"},
            {"type": "something_new"}
        ]
    });
    let answer = decode_messages(&body.to_string(), "anthropic", None).unwrap();
    let reason = answer.diagnostics.unwrap().cache_miss_reason.unwrap();
    assert_eq!(reason.kind, CacheMissKind::ToolsChanged);
    assert_eq!(reason.cache_missed_input_tokens, Some(41000));
    let t = answer.input_transformations.unwrap();
    assert_eq!(t[0].kind, TransformationKind::ThinkingDropped);
    assert_eq!(t[0].reason, Some(BindingCheck::Prefix));
    assert_eq!(t[0].wire_position(), Some((3, 0)));
    assert_eq!(t[1].kind, TransformationKind::ThinkingMismatchAllowed);
    assert_eq!(t[2].kind, TransformationKind::Other("something_new".into()));
    assert_eq!(t[2].wire_position(), None);

    // `cache_miss_reason: null`: the comparison is still pending.
    let mut pending = body.clone();
    pending["diagnostics"] = json!({"cache_miss_reason": null});
    let answer = decode_messages(&pending.to_string(), "anthropic", None).unwrap();
    assert_eq!(answer.diagnostics.unwrap().cache_miss_reason, None);
    // `diagnostics: null`: nothing to report.
    pending["diagnostics"] = Value::Null;
    let answer = decode_messages(&pending.to_string(), "anthropic", None).unwrap();
    assert_eq!(answer.diagnostics, None);
}

#[test]
fn empty_answers_are_refused() {
    for content in [json!([]), json!([{"type": "text", "text": ""}])] {
        let body = json!({
            "id": "m", "type": "message", "role": "assistant", "model": "x",
            "content": content, "stop_reason": "end_turn",
            "usage": {"input_tokens": 1, "output_tokens": 1}
        });
        let err = decode_messages(&body.to_string(), "anthropic", None).unwrap_err();
        assert!(matches!(err, ResponseError::EmptyAnswer), "{err:?}");
    }
    let text = sse(&[
        (
            "message_start",
            start_event(json!({"input_tokens": 3, "output_tokens": 1})),
        ),
        (
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 1}}),
        ),
        ("message_stop", json!({"type": "message_stop"})),
    ]);
    assert!(matches!(
        stream("anthropic", &text),
        Err(ResponseError::EmptyAnswer)
    ));
}

#[test]
fn error_bodies_are_provider_errors() {
    let body = r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
    let err = decode_messages(body, "anthropic", None).unwrap_err();
    assert!(
        matches!(&err, ResponseError::Provider { error_type, message } if error_type == "overloaded_error" && message == "Overloaded"),
        "{err:?}"
    );
    let body = r#"{"error":{"message":"Insufficient Balance","type":"unknown_error","param":null,"code":"invalid_request_error"}}"#;
    let err = decode_chat(body, "deepseek", None).unwrap_err();
    assert!(
        matches!(&err, ResponseError::Provider { error_type, .. } if error_type == "unknown_error"),
        "{err:?}"
    );
}

#[test]
fn malformed_bodies_are_errors_not_panics() {
    for body in [
        "",
        "[]",
        "{}",
        r#"{"id":"m","type":"message","role":"user","model":"x","content":[],"usage":{"input_tokens":1,"output_tokens":1}}"#,
        r#"{"id":"m","type":"message","role":"assistant","model":"x","content":[{"type":"thinking"}],"usage":{"input_tokens":1,"output_tokens":1}}"#,
        r#"{"id":"m","type":"message","role":"assistant","model":"x","content":[{"type":"text","text":"a"}]}"#,
        r#"{"id":"m","type":"message","role":"assistant","model":"x","content":[{"type":"text","text":"a"}],"usage":{"output_tokens":1}}"#,
        r#"{"id":"m","type":"message","role":"assistant","model":"x","content":[{"type":"text","text":"a"}],"usage":{"input_tokens":-1,"output_tokens":1}}"#,
    ] {
        assert!(decode_messages(body, "anthropic", None).is_err(), "{body}");
        assert!(decode_chat(body, "deepseek", None).is_err(), "{body}");
    }
}

fn start_event(usage: Value) -> Value {
    json!({"type": "message_start", "message": {
        "id": "msg_s", "type": "message", "role": "assistant", "model": "claude-opus-5",
        "content": [], "stop_reason": null, "stop_sequence": null, "usage": usage
    }})
}

/// The vendor's documented tool-use stream: `partial_json` with spaces, split mid-token.
#[test]
fn streamed_tool_input_is_the_body_input() {
    let text = sse(&[
        (
            "message_start",
            start_event(
                json!({"input_tokens": 849, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "output_tokens": 10}),
            ),
        ),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "toolu_01K", "name": "json", "input": {}}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": ""}}),
        ),
        ("ping", json!({"type": "ping"})),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "{\"elements\": [{\"location\": \"San Fra"}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "ncisco\", \"temperature\": 58}]"}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "}"}}),
        ),
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ),
        (
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null}, "usage": {"output_tokens": 47}}),
        ),
        ("message_stop", json!({"type": "message_stop"})),
    ]);
    let answer = stream("anthropic", &text).unwrap();
    assert_eq!(
        answer.message.content(),
        &[ContentBlock::tool_call(
            "toolu_01K",
            "json",
            r#"{"elements":[{"location":"San Francisco","temperature":58}]}"#
        )
        .unwrap()]
    );
    assert_eq!(answer.stop_reason, Some(StopReason::ToolUse));
    let usage = answer.usage.unwrap();
    assert_eq!((usage.prompt_tokens, usage.output_tokens), (849, 47));
    assert_eq!(usage.cache_read_tokens, Some(0));
}

/// The documented thinking stream: `thinking_delta`s, one `signature_delta`.
#[test]
fn streamed_thinking_keeps_its_signature() {
    let text = sse(&[
        (
            "message_start",
            start_event(json!({"input_tokens": 5, "output_tokens": 1})),
        ),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "Let me solve this step by step:\n\n1. First break down 27 * 453"}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "\n2. 453 = 400 + 50 + 3"}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"}}),
        ),
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "27 * 453 = 12,231"}}),
        ),
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 1}),
        ),
        (
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": null}}),
        ),
        ("message_stop", json!({"type": "message_stop"})),
    ]);
    let answer = stream("anthropic", &text).unwrap();
    let ContentBlock::Reasoning { text, extra } = &answer.message.content()[0] else {
        panic!("{:?}", answer.message.content())
    };
    assert_eq!(
        text,
        "Let me solve this step by step:\n\n1. First break down 27 * 453\n2. 453 = 400 + 50 + 3"
    );
    assert_eq!(
        extra["signature"],
        "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"
    );
    assert_eq!(answer.message.text(), "27 * 453 = 12,231");
}

fn one_text_block() -> Vec<(&'static str, Value)> {
    vec![
        (
            "message_start",
            start_event(json!({"input_tokens": 5, "output_tokens": 1})),
        ),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hello"}}),
        ),
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ),
        (
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 3}}),
        ),
        ("message_stop", json!({"type": "message_stop"})),
    ]
}

#[test]
fn a_stream_cut_off_is_refused() {
    let events = one_text_block();
    // Every strict prefix of the stream is incomplete.
    for n in 0..events.len() {
        let err = stream("anthropic", &sse(&events[..n])).unwrap_err();
        assert!(matches!(err, ResponseError::CutOff { .. }), "{n}: {err:?}");
    }
    // A stop without the block's stop.
    let mut events = one_text_block();
    events.remove(3);
    let err = stream("anthropic", &sse(&events)).unwrap_err();
    assert!(
        matches!(
            &err,
            ResponseError::CutOff {
                missing: MissingPart::BlockStop(0)
            }
        ),
        "{err:?}"
    );
    // The whole stream, its last line without a blank line after it, decodes.
    let text = sse(&one_text_block());
    let answer = stream("anthropic", text.trim_end()).unwrap();
    assert_eq!(answer.message.text(), "Hello");
}

/// A connection lost anywhere in a stream, inside an event included, is a cut-off (which a
/// loop answers by resending), not a malformed answer. Found by the end-to-end
/// kill-and-resume scenario (`tests/e2e/resume.rs`): a stream torn inside an event's `data:`
/// line was refused as JSON.
#[test]
fn a_stream_cut_anywhere_is_cut_off() {
    let text = sse(&one_text_block());
    // Up to the `message_stop` event's `data:` line; once its `event:` line came, nothing is
    // missing (its data carries nothing).
    for cut in 0..=text.rfind("data: ").unwrap() {
        let err = stream("anthropic", &text[..cut]).unwrap_err();
        assert!(
            matches!(err, ResponseError::CutOff { .. }),
            "cut at {cut}: {err:?}"
        );
    }
    let chat: String = chat_chunks()
        .iter()
        .map(|c| format!("data: {c}\n\n"))
        .chain(["data: [DONE]\n\n".to_owned()])
        .collect();
    for cut in 0..chat.trim_end().len() {
        let mut s = ChatStream::new("deepseek", None);
        s.push_text(&chat[..cut]).unwrap();
        let err = s.finish().unwrap_err();
        assert!(
            matches!(err, ResponseError::CutOff { .. }),
            "cut at {cut}: {err:?}"
        );
    }
}

#[test]
fn an_error_event_is_a_provider_error_and_ends_the_stream() {
    let mut s = MessagesStream::new("anthropic", None);
    let events = one_text_block();
    for (event, data) in &events[..3] {
        s.push_event(event, &data.to_string()).unwrap();
    }
    let err = s
        .push_event(
            "error",
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        )
        .unwrap_err();
    assert!(
        matches!(&err, ResponseError::Provider { error_type, message } if error_type == "overloaded_error" && message == "Overloaded"),
        "{err:?}"
    );
    let (event, data) = &events[3];
    assert!(matches!(
        s.push_event(event, &data.to_string()),
        Err(ResponseError::Failed)
    ));
    assert!(matches!(s.finish(), Err(ResponseError::Failed)));
}

#[test]
fn events_out_of_place_are_refused() {
    let start = start_event(json!({"input_tokens": 5, "output_tokens": 1}));
    let text_start = json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}});
    type Refusal<'a> = (Vec<(&'a str, Value)>, fn(&ResponseError) -> bool);
    let cases: Vec<Refusal<'_>> = vec![
        (
            vec![(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "x"}}),
            )],
            |e| matches!(e, ResponseError::NotStarted { .. }),
        ),
        (
            vec![
                ("message_start", start.clone()),
                (
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": 4, "delta": {"type": "text_delta", "text": "x"}}),
                ),
            ],
            |e| matches!(e, ResponseError::UnknownIndex { index: 4 }),
        ),
        (
            vec![
                ("message_start", start.clone()),
                (
                    "content_block_start",
                    json!({"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}}),
                ),
            ],
            |e| {
                matches!(
                    e,
                    ResponseError::BlockOutOfOrder {
                        index: 1,
                        expected: 0
                    }
                )
            },
        ),
        (
            vec![
                ("message_start", start.clone()),
                ("content_block_start", text_start.clone()),
                (
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "{"}}),
                ),
            ],
            |e| matches!(e, ResponseError::UnexpectedDelta { index: 0, .. }),
        ),
        (
            vec![
                ("message_start", start.clone()),
                ("content_block_start", text_start.clone()),
                (
                    "content_block_stop",
                    json!({"type": "content_block_stop", "index": 0}),
                ),
                (
                    "content_block_stop",
                    json!({"type": "content_block_stop", "index": 0}),
                ),
            ],
            |e| matches!(e, ResponseError::BlockStopped { index: 0 }),
        ),
        (
            vec![
                ("message_start", start.clone()),
                ("message_start", start.clone()),
            ],
            |e| matches!(e, ResponseError::Malformed { .. }),
        ),
        (
            vec![
                ("message_start", start.clone()),
                ("message_stop", json!({"type": "message_stop"})),
                ("content_block_start", text_start.clone()),
            ],
            |e| matches!(e, ResponseError::AfterEnd { .. }),
        ),
        (
            vec![(
                "message_start",
                json!({"type": "message_start", "message": "x"}),
            )],
            |e| matches!(e, ResponseError::Json { .. }),
        ),
    ];
    for (i, (events, expected)) in cases.into_iter().enumerate() {
        let mut s = MessagesStream::new("anthropic", None);
        let mut result = Ok(());
        for (event, data) in &events {
            result = s.push_event(event, &data.to_string());
            if result.is_err() {
                break;
            }
        }
        let err = result.unwrap_err();
        assert!(expected(&err), "case {i}: {err:?}");
    }
    // Garbage never panics.
    let mut s = MessagesStream::new("anthropic", None);
    for line in ["data: {", "", "event: message_start", "data: null", ""] {
        let _ = s.push_line(line);
    }
    assert!(s.finish().is_err());
}

#[test]
fn unknown_events_and_pings_are_ignored() {
    let mut events = one_text_block();
    events.insert(1, ("ping", json!({"type": "ping"})));
    events.insert(
        2,
        (
            "brand_new_event",
            json!({"type": "brand_new_event", "x": 1}),
        ),
    );
    let answer = stream("anthropic", &sse(&events)).unwrap();
    assert_eq!(answer.message.text(), "Hello");
    // Data lines without `event:` lines are dispatched by their `type`.
    let text: String = one_text_block()
        .iter()
        .map(|(_, data)| format!("data: {data}\n\n"))
        .collect();
    assert_eq!(stream("anthropic", &text).unwrap().message.text(), "Hello");
}

#[test]
fn a_fallback_message_delta_replaces_the_input_transformations() {
    let mut start = start_event(json!({"input_tokens": 5, "output_tokens": 1}));
    start["message"]["input_transformations"] = json!([]);
    start["message"]["diagnostics"] = json!({"cache_miss_reason": {"type": "messages_changed", "cache_missed_input_tokens": 6455}});
    let mut events = one_text_block();
    events[0].1 = start;
    events[4].1["input_transformations"] = json!([{"type": "thinking_dropped", "path": "messages.1.content.0", "reason": "model_binding_mismatch"}]);
    let answer = stream("anthropic", &sse(&events)).unwrap();
    let t = answer.input_transformations.unwrap();
    assert_eq!(t.len(), 1);
    assert_eq!(t[0].reason, Some(BindingCheck::Model));
    assert_eq!(
        answer.diagnostics.unwrap().cache_miss_reason.unwrap().kind,
        CacheMissKind::MessagesChanged
    );
}

/// DeepSeek's chat body: reasoning, text, tool calls, its cache figures.
const DEEPSEEK_BODY: &str = r#"{
  "id": "930c60df-bf64-41c9-a88e-3ec75f81e00e",
  "object": "chat.completion",
  "created": 1766977481,
  "model": "deepseek-v4-pro",
  "choices": [{
    "index": 0,
    "message": {
      "role": "assistant",
      "content": "Checking.",
      "reasoning_content": "The user asks for the weather.",
      "tool_calls": [
        {"id": "call_0", "type": "function", "function": {"name": "get_weather", "arguments": "{\"location\": \"Hangzhou\"}"}},
        {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"location\": \"Beijing\"}"}}
      ]
    },
    "logprobs": null,
    "finish_reason": "tool_calls"
  }],
  "usage": {
    "prompt_tokens": 1200,
    "completion_tokens": 80,
    "total_tokens": 1280,
    "prompt_tokens_details": {"cached_tokens": 1024},
    "completion_tokens_details": {"reasoning_tokens": 40},
    "prompt_cache_hit_tokens": 1024,
    "prompt_cache_miss_tokens": 176
  },
  "system_fingerprint": "fp_eaab8d114b_prod0820_fp8_kvcache"
}"#;

#[test]
fn deepseek_chat_body() {
    let answer = decode_chat(DEEPSEEK_BODY, "deepseek", None).unwrap();
    assert_eq!(answer.message.id(), "930c60df-bf64-41c9-a88e-3ec75f81e00e");
    assert_eq!(
        answer.message.content(),
        &[
            ContentBlock::Reasoning {
                text: "The user asks for the weather.".into(),
                extra: IndexMap::new()
            },
            ContentBlock::text("Checking."),
            ContentBlock::tool_call("call_0", "get_weather", r#"{"location": "Hangzhou"}"#)
                .unwrap(),
            ContentBlock::tool_call("call_1", "get_weather", r#"{"location": "Beijing"}"#).unwrap(),
        ]
    );
    assert_eq!(answer.stop_reason, Some(StopReason::ToolCalls));
    let usage = answer.usage.unwrap();
    assert_eq!(usage.prompt_tokens, 1200);
    assert_eq!(usage.cache_read_tokens, Some(1024));
    assert_eq!(usage.cache_write_tokens, None);
    assert_eq!(usage.uncached_prompt_tokens(), 176);
    assert_eq!(usage.output_tokens, 80);
    assert_eq!(usage.reasoning_tokens, Some(40));
}

#[test]
fn chat_usage_arithmetic() {
    let body = |usage: Value| {
        json!({"id": "c", "model": "m", "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}], "usage": usage}).to_string()
    };
    // OpenAI: prompt_tokens includes cached_tokens.
    let openai = decode_chat(
        &body(json!({"prompt_tokens": 2006, "completion_tokens": 300, "total_tokens": 2306, "prompt_tokens_details": {"cached_tokens": 1920}})),
        "openai",
        None,
    )
    .unwrap()
    .usage
    .unwrap();
    assert_eq!(
        (
            openai.prompt_tokens,
            openai.cache_read_tokens,
            openai.uncached_prompt_tokens()
        ),
        (2006, Some(1920), 86)
    );
    // DeepSeek's flat fields alone.
    let deepseek = decode_chat(
        &body(json!({"prompt_cache_hit_tokens": 0, "prompt_cache_miss_tokens": 10, "completion_tokens": 11})),
        "deepseek",
        None,
    )
    .unwrap()
    .usage
    .unwrap();
    assert_eq!(
        (deepseek.prompt_tokens, deepseek.cache_read_tokens),
        (10, Some(0))
    );
    // No usage at all.
    let none =
        json!({"id": "c", "model": "m", "choices": [{"index": 0, "message": {"content": "hi"}}]});
    assert_eq!(
        decode_chat(&none.to_string(), "x", None).unwrap().usage,
        None
    );
    // An empty chat answer.
    let empty =
        json!({"id": "c", "model": "m", "choices": [{"index": 0, "message": {"content": ""}}]});
    assert!(matches!(
        decode_chat(&empty.to_string(), "x", None),
        Err(ResponseError::EmptyAnswer)
    ));
}

fn chat_chunks() -> Vec<Value> {
    let chunk = |delta: Value, finish: Value| {
        json!({"id": "930c60df-bf64-41c9-a88e-3ec75f81e00e", "object": "chat.completion.chunk", "created": 1, "model": "deepseek-v4-pro",
               "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}], "usage": null})
    };
    vec![
        chunk(
            json!({"role": "assistant", "content": null, "reasoning_content": "The user asks "}),
            Value::Null,
        ),
        chunk(
            json!({"reasoning_content": "for the weather."}),
            Value::Null,
        ),
        chunk(json!({"content": "Check"}), Value::Null),
        chunk(json!({"content": "ing."}), Value::Null),
        chunk(
            json!({"tool_calls": [{"index": 0, "id": "call_0", "type": "function", "function": {"name": "get_weather", "arguments": ""}}]}),
            Value::Null,
        ),
        chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"location\": "}}]}),
            Value::Null,
        ),
        chunk(
            json!({"tool_calls": [{"index": 1, "id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"location\": \"Beijing\"}"}}]}),
            Value::Null,
        ),
        chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": "\"Hangzhou\"}"}}]}),
            Value::Null,
        ),
        chunk(json!({}), json!("tool_calls")),
        json!({"id": "930c60df-bf64-41c9-a88e-3ec75f81e00e", "object": "chat.completion.chunk", "created": 1, "model": "deepseek-v4-pro", "choices": [],
               "usage": {"prompt_tokens": 1200, "completion_tokens": 80, "total_tokens": 1280, "prompt_tokens_details": {"cached_tokens": 1024}, "completion_tokens_details": {"reasoning_tokens": 40}, "prompt_cache_hit_tokens": 1024, "prompt_cache_miss_tokens": 176}}),
    ]
}

#[test]
fn chat_stream_equals_its_body() {
    let text: String = chat_chunks()
        .iter()
        .map(|c| format!("data: {c}\n\n"))
        .chain(["data: [DONE]\n\n".to_owned()])
        .collect();
    for cut in [0, 7, text.len() / 2, text.len()] {
        let mut s = ChatStream::new("deepseek", None);
        s.push_text(&text[..cut]).unwrap();
        s.push_text(&text[cut..]).unwrap();
        let streamed = s.finish().unwrap();
        assert_eq!(
            streamed,
            decode_chat(DEEPSEEK_BODY, "deepseek", None).unwrap(),
            "cut {cut}"
        );
    }
}

#[test]
fn chat_stream_refusals() {
    // Without `[DONE]`.
    let mut s = ChatStream::new("deepseek", None);
    for c in chat_chunks() {
        s.push_chunk(&c.to_string()).unwrap();
    }
    assert!(matches!(s.finish(), Err(ResponseError::CutOff { .. })));
    // After `[DONE]`.
    let mut s = ChatStream::new("deepseek", None);
    s.push_chunk("[DONE]").unwrap();
    assert!(matches!(
        s.push_chunk("{}"),
        Err(ResponseError::AfterEnd { .. })
    ));
    // An error chunk.
    let mut s = ChatStream::new("deepseek", None);
    let err = s
        .push_chunk(r#"{"error":{"message":"boom","type":"server_error"}}"#)
        .unwrap_err();
    assert!(matches!(err, ResponseError::Provider { .. }), "{err:?}");
    assert!(matches!(s.push_chunk("[DONE]"), Err(ResponseError::Failed)));
    // Nothing but `[DONE]`: no id, nothing to append.
    let mut s = ChatStream::new("deepseek", None);
    s.push_chunk("[DONE]").unwrap();
    assert!(s.finish().is_err());
    // A tool call that never got its name.
    let mut s = ChatStream::new("deepseek", None);
    s.push_chunk(r#"{"id":"c","model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"x","function":{"arguments":"{}"}}]}}]}"#)
        .unwrap();
    s.push_chunk("[DONE]").unwrap();
    assert!(matches!(s.finish(), Err(ResponseError::Malformed { .. })));
}

#[test]
fn response_errors_convert_into_the_crate_error() {
    fn pipeline() -> mektpoy::Result<Answer> {
        Ok(decode_messages("{}", "anthropic", None)?)
    }
    assert!(matches!(pipeline(), Err(mektpoy::Error::Response(_))));
}

// --- The next request --------------------------------------------------------------------

/// The request after `answer`: a user message, the answer, a result for each of its calls,
/// then the next user message, on the Anthropic route.
fn next_request(answer: &Message) -> String {
    let mut messages = vec![Message::user("u1", "question")];
    messages.push(answer.clone());
    for (i, block) in answer.content().iter().enumerate() {
        if let ContentBlock::ToolCall(call) = block {
            let id = call.id();
            messages.push(Message::tool_result(format!("t{i}"), id, "ok"));
        }
    }
    messages.push(Message::user("u2", "next"));
    let route = route_for("anthropic", "claude-opus-5");
    let config = Config::new("anthropic", "claude-opus-5")
        .with("max_tokens", json!(1024))
        .unwrap();
    serialize(&config, &ProjectedToolUpdates::new(messages), &route)
        .expect("the decoded answer serializes")
        .into_parts()
        .0
}

#[derive(Deserialize)]
struct WireBody<'a> {
    #[serde(borrow)]
    messages: Vec<WireTurn<'a>>,
}

#[derive(Deserialize)]
struct WireTurn<'a> {
    role: String,
    #[serde(borrow)]
    content: Vec<&'a RawValue>,
}

#[derive(Deserialize)]
struct WireToolUse<'a> {
    #[serde(borrow)]
    input: &'a RawValue,
}

/// The content blocks of the assistant turn, as raw text.
fn assistant_turn(body: &str) -> Vec<&RawValue> {
    let body: WireBody<'_> = serde_json::from_str(body).unwrap();
    let turns: Vec<_> = body
        .messages
        .into_iter()
        .filter(|t| t.role == "assistant")
        .collect();
    assert_eq!(turns.len(), 1, "one assistant turn");
    turns.into_iter().next().unwrap().content
}

fn input_text(block: &RawValue) -> &str {
    let tool: WireToolUse<'_> = serde_json::from_str(block.get()).unwrap();
    tool.input.get()
}

// --- The property ------------------------------------------------------------------------

#[derive(Clone, Debug)]
enum GenBlock {
    Text(String),
    Thinking { text: String, signature: String },
    Tool { name: String, input: Value },
}

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<i64>().prop_map(Value::from),
        any::<bool>().prop_map(Value::from),
        (-1.0e6f64..1.0e6).prop_map(Value::from),
        "\\PC{0,8}".prop_map(Value::from),
        Just(Value::Null),
        prop::collection::vec(any::<i32>().prop_map(Value::from), 0..3).prop_map(Value::Array),
    ]
}

fn input() -> impl Strategy<Value = Value> {
    let object = prop::collection::btree_map("[a-z_]{1,6}", leaf(), 0..4)
        .prop_map(|m| Value::Object(m.into_iter().collect()));
    (
        object,
        prop::option::of(prop::collection::btree_map("[a-z]{1,4}", leaf(), 0..3)),
    )
        .prop_map(|(mut outer, inner)| {
            if let (Some(inner), Value::Object(map)) = (inner, &mut outer) {
                map.insert(
                    "nested".to_owned(),
                    Value::Object(inner.into_iter().collect()),
                );
            }
            outer
        })
}

fn gen_block() -> impl Strategy<Value = GenBlock> {
    prop_oneof![
        "\\PC{1,24}".prop_map(GenBlock::Text),
        ("\\PC{0,24}", "[A-Za-z0-9+/]{8,40}")
            .prop_map(|(text, signature)| GenBlock::Thinking { text, signature }),
        ("[a-z_]{1,10}", input()).prop_map(|(name, input)| GenBlock::Tool { name, input }),
    ]
}

/// `text` cut at the given points (moved forward to char boundaries).
fn pieces(text: &str, cuts: &[prop::sample::Index]) -> Vec<String> {
    let mut at: Vec<usize> = cuts
        .iter()
        .map(|c| {
            let mut i = c.index(text.len() + 1);
            while !text.is_char_boundary(i) {
                i += 1;
            }
            i
        })
        .collect();
    at.sort_unstable();
    at.dedup();
    let mut out = Vec::new();
    let mut from = 0;
    for i in at.into_iter().chain([text.len()]) {
        out.push(text[from..i].to_owned());
        from = i;
    }
    out
}

struct Case {
    body: String,
    sse: String,
}

fn case(
    blocks: &[GenBlock],
    cuts: &[prop::sample::Index],
    pretty: bool,
    usage: (u64, u64, u64, u64),
) -> Case {
    let (input_tokens, read, write, output) = usage;
    let mut content = Vec::new();
    let mut events: Vec<(&str, Value)> = vec![(
        "message_start",
        start_event(
            json!({"input_tokens": input_tokens, "cache_read_input_tokens": read, "cache_creation_input_tokens": write, "output_tokens": 1}),
        ),
    )];
    for (index, block) in blocks.iter().enumerate() {
        let delta =
            |delta: Value| json!({"type": "content_block_delta", "index": index, "delta": delta});
        match block {
            GenBlock::Text(text) => {
                content.push(json!({"type": "text", "text": text}));
                events.push(("content_block_start", json!({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}})));
                for piece in pieces(text, cuts) {
                    events.push((
                        "content_block_delta",
                        delta(json!({"type": "text_delta", "text": piece})),
                    ));
                }
            }
            GenBlock::Thinking { text, signature } => {
                content.push(json!({"type": "thinking", "thinking": text, "signature": signature}));
                events.push(("content_block_start", json!({"type": "content_block_start", "index": index, "content_block": {"type": "thinking", "thinking": ""}})));
                for piece in pieces(text, cuts) {
                    events.push((
                        "content_block_delta",
                        delta(json!({"type": "thinking_delta", "thinking": piece})),
                    ));
                }
                events.push((
                    "content_block_delta",
                    delta(json!({"type": "signature_delta", "signature": signature})),
                ));
            }
            GenBlock::Tool { name, input } => {
                let id = format!("toolu_{index:02}");
                content.push(json!({"type": "tool_use", "id": id, "name": name, "input": input}));
                events.push(("content_block_start", json!({"type": "content_block_start", "index": index, "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}})));
                let text = if pretty {
                    serde_json::to_string_pretty(input).unwrap()
                } else {
                    input.to_string()
                };
                for piece in pieces(&text, cuts) {
                    events.push((
                        "content_block_delta",
                        delta(json!({"type": "input_json_delta", "partial_json": piece})),
                    ));
                }
            }
        }
        events.push((
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        ));
    }
    events.push((
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": null}, "usage": {"output_tokens": output}}),
    ));
    events.push(("message_stop", json!({"type": "message_stop"})));
    let body = json!({
        "id": "msg_s", "type": "message", "role": "assistant", "model": "claude-opus-5",
        "content": content, "stop_reason": "end_turn", "stop_sequence": null,
        "usage": {"input_tokens": input_tokens, "cache_read_input_tokens": read, "cache_creation_input_tokens": write, "output_tokens": output}
    });
    Case {
        body: body.to_string(),
        sse: sse(&events),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn streamed_equals_json_and_goes_back_byte_for_byte(
        blocks in prop::collection::vec(gen_block(), 1..5),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..4),
        pretty in any::<bool>(),
        usage in (0u64..100_000, 0u64..100_000, 0u64..100_000, 0u64..10_000),
        text_cut in any::<prop::sample::Index>(),
    ) {
        let case = case(&blocks, &cuts, pretty, usage);
        let from_json = decode_messages(&case.body, "anthropic", None).unwrap();
        let mut s = MessagesStream::new("anthropic", None);
        let at = text_cut.index(case.sse.len() + 1);
        let at = (at..=case.sse.len()).find(|&i| case.sse.is_char_boundary(i)).unwrap();
        s.push_text(&case.sse[..at]).unwrap();
        s.push_text(&case.sse[at..]).unwrap();
        let streamed = s.finish().unwrap();
        prop_assert_eq!(&streamed, &from_json);
        let u = streamed.usage.unwrap();
        prop_assert_eq!(u.prompt_tokens, usage.0 + usage.1 + usage.2);
        prop_assert_eq!(u.output_tokens, usage.3);

        let wire = next_request(&streamed.message);
        let turn = assistant_turn(&wire);
        prop_assert_eq!(turn.len(), blocks.len());
        for (block, sent) in blocks.iter().zip(&turn) {
            let value: Value = serde_json::from_str(sent.get()).unwrap();
            match block {
                GenBlock::Text(text) => {
                    prop_assert_eq!(&value, &json!({"type": "text", "text": text}));
                }
                GenBlock::Thinking { text, signature } => {
                    prop_assert_eq!(&value, &json!({"type": "thinking", "thinking": text, "signature": signature}));
                }
                GenBlock::Tool { name, input } => {
                    prop_assert_eq!(&value["type"], "tool_use");
                    prop_assert_eq!(&value["name"], &json!(name));
                    // The input's text, byte for byte as the response body carried it.
                    prop_assert_eq!(input_text(sent), input.to_string());
                }
            }
        }
    }
}

#[test]
fn push_line_frames_the_stream_itself() {
    let text = sse(&one_text_block());
    let mut s = MessagesStream::new("anthropic", Some("a9"));
    for line in text.split('\n') {
        s.push_line(line).unwrap();
    }
    let answer = s.finish().unwrap();
    assert_eq!(answer.message.id(), "a9");
    assert_eq!(answer.message.text(), "Hello");
    assert_eq!(answer.usage.unwrap().output_tokens, 3);
}

/// Some compatible servers send tool-call deltas without `index`: an `id` opens the next call.
#[test]
fn chat_tool_call_deltas_without_index() {
    let mut s = ChatStream::new("acme", None);
    for data in [
        r#"{"id":"c","model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"id":"a","function":{"name":"f","arguments":"{\"x\":"}}]}}]}"#,
        r#"{"id":"c","model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"function":{"arguments":"1}"}}]}}]}"#,
        r#"{"id":"c","model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"id":"b","function":{"name":"g","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}"#,
        "[DONE]",
    ] {
        s.push_chunk(data).unwrap();
    }
    let answer = s.finish().unwrap();
    assert_eq!(
        answer.message.content(),
        &[
            ContentBlock::tool_call("a", "f", r#"{"x":1}"#).unwrap(),
            ContentBlock::tool_call("b", "g", "{}").unwrap(),
        ]
    );
    assert_eq!(answer.usage, None);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Network input never panics a decoder.
    #[test]
    fn garbage_never_panics(text in "(\\PC|\n){0,200}", cut in any::<prop::sample::Index>()) {
        let _ = decode_messages(&text, "anthropic", None);
        let _ = decode_chat(&text, "deepseek", None);
        let at = cut.index(text.len() + 1);
        let at = (at..=text.len()).find(|&i| text.is_char_boundary(i)).unwrap();
        let mut m = MessagesStream::new("anthropic", None);
        let _ = m.push_text(&text[..at]);
        let _ = m.push_text(&text[at..]);
        let _ = m.finish();
        let mut c = ChatStream::new("deepseek", None);
        let _ = c.push_text(&text);
        let _ = c.finish();
    }

    /// A valid stream cut anywhere before its last event is refused as cut off, never
    /// half-decoded.
    #[test]
    fn any_truncation_is_refused(
        blocks in prop::collection::vec(gen_block(), 1..4),
        cut in any::<prop::sample::Index>(),
    ) {
        let case = case(&blocks, &[], false, (1, 2, 3, 4));
        let last = case.sse.rfind("event: message_stop").unwrap();
        let at = cut.index(last);
        let at = (at..=last).find(|&i| case.sse.is_char_boundary(i)).unwrap();
        let mut s = MessagesStream::new("anthropic", None);
        let result = s.push_text(&case.sse[..at]).and_then(|()| s.finish());
        prop_assert!(
            matches!(result, Err(ResponseError::CutOff { .. })),
            "cut at {}: {:?}",
            at,
            result
        );
    }
}

/// Issue 20 item 13: a call whose arguments the Messages serializer cannot send as they are is
/// kept as the model sent it and listed, so the loop answers it with an error result instead of
/// running it (or stopping). Body, stream and chat alike.
#[test]
fn the_decoders_keep_and_list_invalid_tool_calls() {
    use mektpoy::response::InvalidToolCall;
    use mektpoy::wire::ArgumentsFault;
    let body = |input: &str| {
        format!(
            r#"{{"id":"msg_1","type":"message","role":"assistant","model":"claude-opus-5","content":[{{"type":"tool_use","id":"ok","name":"read","input":{{"p":1}}}},{{"type":"tool_use","id":"bad","name":"read","input":{input}}}],"stop_reason":"tool_use","stop_sequence":null,"usage":{{"input_tokens":1,"output_tokens":1}}}}"#
        )
    };
    for (input, fault) in [
        (
            r#"{"p":1,"p":2}"#,
            ArgumentsFault::DuplicateKey { key: "p".into() },
        ),
        ("[1]", ArgumentsFault::NotObject),
        (r#"{"n":1e400}"#, ArgumentsFault::NumberOutOfRange),
        (r#"{"s":"\ud800"}"#, ArgumentsFault::LoneSurrogate),
    ] {
        let answer = decode_messages(&body(input), "anthropic", None).unwrap();
        let [call] = &answer.invalid_tool_calls[..] else {
            panic!("{input}: {:?}", answer.invalid_tool_calls)
        };
        assert_eq!(
            (&*call.call_id, &*call.name, &call.fault),
            ("bad", "read", &fault),
            "{input}"
        );
        assert!(
            matches!(&answer.message.content()[1], ContentBlock::ToolCall(call) if call.arguments() == input)
        );
    }
    // A stream whose input does not concatenate to JSON: kept as streamed.
    let text = sse(&[
        (
            "message_start",
            start_event(json!({"input_tokens": 1, "output_tokens": 1})),
        ),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "t", "name": "f", "input": {}}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "{\"a\": "}}),
        ),
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ),
        (
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null}, "usage": {"output_tokens": 2}}),
        ),
        ("message_stop", json!({"type": "message_stop"})),
    ]);
    let answer = stream("anthropic", &text).unwrap();
    assert!(
        matches!(&answer.message.content()[0], ContentBlock::ToolCall(call) if call.arguments() == "{\"a\": ")
    );
    assert!(matches!(
        &answer.invalid_tool_calls[..],
        [InvalidToolCall { call_id, fault: ArgumentsFault::NotJson { end_of_input: true, .. }, .. }] if call_id == "t"
    ));
    // Chat: `arguments` is a string the model filled; not JSON is listed, and kept.
    let chat = DEEPSEEK_BODY.replace(r#"{\"location\": \"Beijing\"}"#, r#"{\"location\": "#);
    let answer = decode_chat(&chat, "deepseek", None).unwrap();
    assert!(matches!(
        &answer.invalid_tool_calls[..],
        [InvalidToolCall { call_id, name, fault: ArgumentsFault::NotJson { .. }, .. }] if call_id == "call_1" && name == "get_weather"
    ));
    // A valid answer lists nothing.
    assert!(
        decode_chat(DEEPSEEK_BODY, "deepseek", None)
            .unwrap()
            .invalid_tool_calls
            .is_empty()
    );
}
