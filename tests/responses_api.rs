//! OpenAI's Responses API decoded (`decode_responses`, `ResponsesStream`): the blocks, usage,
//! stop reasons, errors, and the property that a stream decodes to what its body decodes to.

use mektpoy::response::{
    Answer, Malformation, ResponseError, ResponsesStream, StopReason, decode_responses,
};
use mektpoy::vocab::ContentBlock;
use proptest::prelude::*;
use serde_json::{Value, json};

fn usage() -> Value {
    json!({
        "input_tokens": 4096,
        "input_tokens_details": {"cached_tokens": 3072},
        "output_tokens": 120,
        "output_tokens_details": {"reasoning_tokens": 64},
        "total_tokens": 4216
    })
}

fn response(output: Value, status: &str) -> Value {
    json!({
        "id": "resp_1",
        "object": "response",
        "created_at": 1_765_000_000,
        "status": status,
        "error": null,
        "incomplete_details": null,
        "model": "gpt-5.5",
        "output": output,
        "usage": usage()
    })
}

fn reasoning_item() -> Value {
    json!({
        "id": "rs_1",
        "type": "reasoning",
        "summary": [
            {"type": "summary_text", "text": "Look at the file."},
            {"type": "summary_text", "text": "Then answer."}
        ],
        "encrypted_content": "gAAAAABo-opaque=="
    })
}

fn message_item(parts: Value) -> Value {
    json!({"id": "msg_1", "type": "message", "status": "completed", "role": "assistant", "content": parts})
}

fn text_part(text: &str) -> Value {
    json!({"type": "output_text", "text": text, "annotations": []})
}

fn call_item(call_id: &str, arguments: &str) -> Value {
    json!({"id": format!("fc_{call_id}"), "type": "function_call", "status": "completed", "call_id": call_id, "name": "read", "arguments": arguments})
}

fn decode(v: &Value) -> Result<Answer, ResponseError> {
    decode_responses(&v.to_string(), "openai", None)
}

/// SSE text of `(type, data)` events, each with its `event:` line.
fn sse(events: &[(String, Value)]) -> String {
    events
        .iter()
        .map(|(kind, data)| format!("event: {kind}\ndata: {data}\n\n"))
        .collect()
}

fn stream_text(text: &str) -> Result<Answer, ResponseError> {
    let mut stream = ResponsesStream::new("openai", None);
    stream.push_text(text)?;
    stream.finish()
}

fn event(kind: &str, mut data: Value) -> (String, Value) {
    data["type"] = json!(kind);
    (kind.to_owned(), data)
}

/// The events OpenAI streams for `body` (whose `output` they rebuild): every delta split at
/// `cuts`; `close` says whether each item gets its `output_item.done` (without, the decoder
/// rebuilds the item from its deltas) and whether `response.completed` repeats the output.
fn events_for(body: &Value, cuts: &[usize], close: bool) -> Vec<(String, Value)> {
    let mut head = body.clone();
    head["status"] = json!("in_progress");
    head["output"] = json!([]);
    head["usage"] = Value::Null;
    let mut out = vec![
        event("response.created", json!({"response": head.clone()})),
        event("response.in_progress", json!({"response": head})),
    ];
    let mut cut_at = cuts.iter().cycle();
    let mut split = |text: &str| -> Vec<String> {
        let mut pieces = Vec::new();
        let mut rest = text;
        while !rest.is_empty() {
            let mut at = cut_at.next().copied().unwrap_or(rest.len()) % (rest.len() + 1);
            while !rest.is_char_boundary(at) {
                at += 1;
            }
            let at = at.max(1).min(rest.len());
            let at = (at..=rest.len())
                .find(|&i| rest.is_char_boundary(i))
                .unwrap_or(rest.len());
            pieces.push(rest[..at].to_owned());
            rest = &rest[at..];
        }
        pieces
    };
    for (i, item) in body["output"].as_array().unwrap().iter().enumerate() {
        let mut added = item.clone();
        match item["type"].as_str().unwrap() {
            "message" => added["content"] = json!([]),
            "function_call" => added["arguments"] = json!(""),
            "reasoning" => added["summary"] = json!([]),
            _ => {}
        }
        out.push(event(
            "response.output_item.added",
            json!({"output_index": i, "item": added}),
        ));
        match item["type"].as_str().unwrap() {
            "message" => {
                for (j, part) in item["content"].as_array().unwrap().iter().enumerate() {
                    let (field, kind) = match part["type"].as_str().unwrap() {
                        "refusal" => ("refusal", "response.refusal"),
                        _ => ("text", "response.output_text"),
                    };
                    let mut opened = part.clone();
                    opened[field] = json!("");
                    let at = json!({"item_id": item["id"], "output_index": i, "content_index": j});
                    let with = |mut v: Value, extra: Value| {
                        for (k, x) in extra.as_object().unwrap() {
                            v[k] = x.clone();
                        }
                        v
                    };
                    out.push(event(
                        "response.content_part.added",
                        with(at.clone(), json!({"part": opened})),
                    ));
                    let text = part[field].as_str().unwrap();
                    for piece in split(text) {
                        out.push(event(
                            &format!("{kind}.delta"),
                            with(at.clone(), json!({"delta": piece})),
                        ));
                    }
                    out.push(event(
                        &format!("{kind}.done"),
                        with(at.clone(), json!({field: text})),
                    ));
                    if close {
                        out.push(event(
                            "response.content_part.done",
                            with(at, json!({"part": part})),
                        ));
                    }
                }
            }
            "function_call" => {
                let arguments = item["arguments"].as_str().unwrap();
                for piece in split(arguments) {
                    out.push(event(
                        "response.function_call_arguments.delta",
                        json!({"item_id": item["id"], "output_index": i, "delta": piece}),
                    ));
                }
                if close {
                    out.push(event(
                        "response.function_call_arguments.done",
                        json!({"item_id": item["id"], "output_index": i, "arguments": arguments}),
                    ));
                }
            }
            "reasoning" => {
                for (j, part) in item["summary"].as_array().unwrap().iter().enumerate() {
                    let at = json!({"item_id": item["id"], "output_index": i, "summary_index": j});
                    let mut added = at.clone();
                    added["part"] = json!({"type": "summary_text", "text": ""});
                    out.push(event("response.reasoning_summary_part.added", added));
                    for piece in split(part["text"].as_str().unwrap()) {
                        let mut d = at.clone();
                        d["delta"] = json!(piece);
                        out.push(event("response.reasoning_summary_text.delta", d));
                    }
                    let mut done = at;
                    done["text"] = part["text"].clone();
                    out.push(event("response.reasoning_summary_text.done", done));
                }
            }
            _ => {}
        }
        // An item the stream has no deltas for (a built-in tool's) is only known by its `done`.
        let known = matches!(
            item["type"].as_str(),
            Some("message" | "function_call" | "reasoning")
        );
        if close || !known {
            out.push(event(
                "response.output_item.done",
                json!({"output_index": i, "item": item}),
            ));
        }
    }
    let mut last = body.clone();
    if !close {
        last["output"] = json!([]);
    }
    let terminal = match body["status"].as_str() {
        Some("incomplete") => "response.incomplete",
        _ => "response.completed",
    };
    out.push(event(terminal, json!({"response": last})));
    out
}

#[test]
fn a_body_with_reasoning_text_and_a_call() {
    let arguments = r#"{"path": "src/lib.rs",  "n": 1.50}"#;
    let body = response(
        json!([
            reasoning_item(),
            message_item(json!([text_part("Reading."), text_part("")])),
            call_item("call_1", arguments)
        ]),
        "completed",
    );
    // The reasoning item as the vendor orders its fields (a `json!` value would sort them).
    let text = body.to_string().replacen(
        &reasoning_item().to_string(),
        r#"{"id":"rs_1","type":"reasoning","summary":[{"type":"summary_text","text":"Look at the file."},{"type":"summary_text","text":"Then answer."}],"encrypted_content":"gAAAAABo-opaque=="}"#,
        1,
    );
    let answer = decode_responses(&text, "openai", None).unwrap();
    let content = answer.message.content();
    assert_eq!(content.len(), 3, "{content:?}");
    let ContentBlock::Reasoning { text, extra } = &content[0] else {
        panic!("{content:?}")
    };
    assert_eq!(text, "Look at the file.\n\nThen answer.");
    let keys: Vec<&String> = extra.keys().collect();
    assert_eq!(
        keys,
        ["id", "summary", "encrypted_content"],
        "every field but `type`, in order"
    );
    assert_eq!(extra["encrypted_content"], "gAAAAABo-opaque==");
    assert_eq!(extra["summary"], reasoning_item()["summary"]);
    assert_eq!(content[1], ContentBlock::text("Reading."));
    assert_eq!(
        content[2],
        ContentBlock::tool_call("call_1".to_owned(), "read".to_owned(), arguments.to_owned())
            .unwrap(),
        "the call id, and the arguments as received"
    );
    assert_eq!(answer.stop_reason, Some(StopReason::ToolCalls));
    assert_eq!(answer.response_id, "resp_1");
    assert_eq!(answer.message.id(), "resp_1");
    assert_eq!(answer.model, "gpt-5.5");
    let usage = answer.usage.unwrap();
    assert_eq!(
        usage.prompt_tokens, 4096,
        "input_tokens includes the cached tokens"
    );
    assert_eq!(usage.cache_read_tokens, Some(3072));
    assert_eq!(usage.cache_write_tokens, None, "not reported: not zero");
    assert_eq!(usage.uncached_prompt_tokens(), 1024);
    assert_eq!(usage.output_tokens, 120);
    assert_eq!(usage.reasoning_tokens, Some(64));
    assert!(
        answer.diagnostics.is_none(),
        "the API documents no cache diagnostics"
    );
    assert!(answer.invalid_tool_calls.is_empty());
}

#[test]
fn cache_writes_are_read_where_reported() {
    let mut body = response(json!([message_item(json!([text_part("Hi")]))]), "completed");
    body["usage"]["input_tokens_details"]["cache_write_tokens"] = json!(1024);
    let usage = decode(&body).unwrap().usage.unwrap();
    assert_eq!(usage.cache_write_tokens, Some(1024));
    assert_eq!(usage.uncached_prompt_tokens(), 0);
    let answer = decode(&body).unwrap();
    assert_eq!(answer.stop_reason, Some(StopReason::Completed));
    assert_eq!(answer.stop_reason.unwrap().as_str(), "completed");
}

#[test]
fn faulty_arguments_are_kept_and_listed() {
    let body = response(
        json!([
            call_item("call_1", r#"{"path": "a"#),
            call_item("call_2", "[1]"),
            call_item("call_3", "{}")
        ]),
        "completed",
    );
    let answer = decode(&body).unwrap();
    let listed: Vec<&str> = answer
        .invalid_tool_calls
        .iter()
        .map(|c| c.call_id.as_str())
        .collect();
    assert_eq!(listed, ["call_1", "call_2"]);
    let ContentBlock::ToolCall(call) = &answer.message.content()[0] else {
        panic!()
    };
    assert_eq!(
        call.arguments(),
        r#"{"path": "a"#,
        "kept as the model sent it"
    );
}

#[test]
fn refusal_parts_are_kept_and_stop_the_answer() {
    let refusal = json!({"type": "refusal", "refusal": "I can't help with that."});
    let body = response(json!([message_item(json!([refusal.clone()]))]), "completed");
    let answer = decode(&body).unwrap();
    assert_eq!(answer.message.content().len(), 1);
    assert_eq!(
        serde_json::to_value(&answer.message.content()[0]).unwrap(),
        refusal,
        "kept verbatim"
    );
    assert_eq!(answer.stop_reason, Some(StopReason::Refusal));
    let bad = response(
        json!([message_item(json!([{"type": "refusal"}]))]),
        "completed",
    );
    assert!(matches!(decode(&bad), Err(ResponseError::Malformed { .. })));
}

#[test]
fn incomplete_answers_say_why() {
    let mut body = response(
        json!([reasoning_item(), call_item("call_1", r#"{"path":"#)]),
        "incomplete",
    );
    body["incomplete_details"] = json!({"reason": "max_output_tokens"});
    let answer = decode(&body).unwrap();
    assert_eq!(
        answer.stop_reason,
        Some(StopReason::Incomplete {
            reason: Some("max_output_tokens".to_owned())
        }),
        "incomplete before tool calls"
    );
    assert_eq!(answer.stop_reason.as_ref().unwrap().as_str(), "incomplete");
    let streamed = stream_text(&sse(&events_for(&body, &[3], true))).unwrap();
    assert_eq!(streamed, answer);
    let open = stream_text(&sse(&events_for(&body, &[3], false))).unwrap();
    assert_eq!(open, answer);
    // Only reasoning, cut by the limit: still an answer (the reasoning item goes back).
    let mut thinking = response(json!([reasoning_item()]), "incomplete");
    thinking["incomplete_details"] = json!({"reason": "max_output_tokens"});
    assert!(decode(&thinking).is_ok());
}

#[test]
fn unknown_items_are_kept_verbatim_and_log_types_refused() {
    let search = json!({"id": "ws_1", "type": "web_search_call", "status": "completed", "action": {"type": "search", "query": "q"}});
    let tools = json!({"id": "at_1", "type": "additional_tools", "role": "developer", "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}}]});
    let body = response(
        json!([
            search.clone(),
            tools.clone(),
            message_item(json!([text_part("Done.")]))
        ]),
        "completed",
    );
    let answer = decode(&body).unwrap();
    let content = answer.message.content();
    assert_eq!(serde_json::to_value(&content[0]).unwrap(), search);
    assert_eq!(serde_json::to_value(&content[1]).unwrap(), tools);
    assert_eq!(
        stream_text(&sse(&events_for(&body, &[2], false))).unwrap(),
        answer
    );
    let named = response(json!([{"type": "tool-call", "id": "x"}]), "completed");
    assert!(matches!(
        decode(&named),
        Err(ResponseError::UnrepresentableBlock { .. })
    ));
    let untyped = response(json!([{"id": "x"}]), "completed");
    assert!(matches!(
        decode(&untyped),
        Err(ResponseError::Malformed { .. })
    ));
    let part = response(
        json!([message_item(json!([{"type": "output_audio", "data": "x"}]))]),
        "completed",
    );
    let Err(ResponseError::Malformed { reason, .. }) = decode(&part) else {
        panic!("an undocumented part type is refused")
    };
    // A case a caller matches (issue 21), printing what the string said.
    assert_eq!(
        reason,
        Malformation::UndocumentedPart(Some("output_audio".to_owned()))
    );
    assert_eq!(
        reason.to_string(),
        "a part of type output_audio (the API documents `output_text` and `refusal`)"
    );
}

#[test]
fn errors_and_failures_are_provider_errors() {
    let http = json!({"error": {"message": "No tool call found for function call output with call_id call_1.", "type": "invalid_request_error", "param": "input", "code": null}});
    let Err(ResponseError::Provider {
        error_type,
        message,
    }) = decode(&http)
    else {
        panic!()
    };
    assert_eq!(error_type, "invalid_request_error");
    assert!(message.starts_with("No tool call found"));
    let mut failed = response(json!([]), "failed");
    failed["error"] = json!({"code": "server_error", "message": "The model failed."});
    let Err(ResponseError::Provider { error_type, .. }) = decode(&failed) else {
        panic!()
    };
    assert_eq!(error_type, "server_error");
    let mut bare = response(json!([]), "failed");
    bare["error"] = Value::Null;
    assert!(matches!(decode(&bare), Err(ResponseError::Provider { .. })));
    // In a stream: `response.failed` and `error`, and nothing after them.
    let head = json!({"response": {"id": "resp_1", "model": "gpt-5.5", "status": "in_progress", "output": []}});
    for (kind, data, code) in [
        (
            "response.failed",
            json!({"response": failed}),
            "server_error",
        ),
        (
            "error",
            json!({"code": "rate_limit_exceeded", "message": "Slow down.", "param": null, "sequence_number": 3}),
            "rate_limit_exceeded",
        ),
    ] {
        let mut stream = ResponsesStream::new("openai", None);
        stream
            .push_event("response.created", &head.to_string())
            .unwrap();
        let Err(ResponseError::Provider { error_type, .. }) =
            stream.push_event(kind, &data.to_string())
        else {
            panic!("{kind}")
        };
        assert_eq!(error_type, code);
        assert!(matches!(
            stream.push_event("response.completed", "{}"),
            Err(ResponseError::Failed)
        ));
        assert!(matches!(stream.finish(), Err(ResponseError::Failed)));
    }
    for broken in [
        "",
        "{",
        "[]",
        r#"{"id":"r","model":"m"}"#,
        r#"{"id":"r","model":"m","output":[]}"#,
    ] {
        assert!(
            decode_responses(broken, "openai", None).is_err(),
            "{broken}"
        );
    }
    let empty = response(json!([message_item(json!([text_part("")]))]), "completed");
    assert!(matches!(decode(&empty), Err(ResponseError::EmptyAnswer)));
}

fn answer_body() -> Value {
    response(
        json!([
            reasoning_item(),
            message_item(json!([text_part("Reading the file now.")])),
            call_item("call_1", r#"{"path":"src/lib.rs"}"#)
        ]),
        "completed",
    )
}

#[test]
fn a_stream_cut_off_is_refused() {
    let events = events_for(&answer_body(), &[4], true);
    let text = sse(&events[..events.len() - 1]);
    assert!(matches!(
        stream_text(&text),
        Err(ResponseError::CutOff { .. })
    ));
    // Cut anywhere: never an answer but the whole one.
    let whole = sse(&events);
    let full = stream_text(&whole).unwrap();
    for cut in (0..whole.len()).step_by(7) {
        if !whole.is_char_boundary(cut) {
            continue;
        }
        match stream_text(&whole[..cut]) {
            Ok(answer) => panic!("cut at {cut} decoded: {answer:?}"),
            Err(ResponseError::CutOff { .. }) => {}
            Err(other) => panic!("cut at {cut}: {other}"),
        }
    }
    assert_eq!(full, decode(&answer_body()).unwrap());
}

#[test]
fn events_out_of_place_are_refused() {
    let events = events_for(&answer_body(), &[5], true);
    let run = |events: &[(String, Value)]| -> Result<(), ResponseError> {
        let mut stream = ResponsesStream::new("openai", None);
        for (kind, data) in events {
            stream.push_event(kind, &data.to_string())?;
        }
        Ok(())
    };
    let find = |kind: &str| events.iter().position(|(k, _)| k == kind).unwrap();
    // An item event before `response.created`.
    let added = find("response.output_item.added");
    assert!(matches!(
        run(&events[added..added + 1]),
        Err(ResponseError::NotStarted { .. })
    ));
    // An item added out of order.
    let mut skipped = events[..added].to_vec();
    let mut late = events[added].clone();
    late.1["output_index"] = json!(1);
    skipped.push(late);
    assert!(matches!(
        run(&skipped),
        Err(ResponseError::BlockOutOfOrder {
            index: 1,
            expected: 0
        })
    ));
    // A delta for an item never added.
    let mut unknown = events[..added + 1].to_vec();
    unknown.push(event(
        "response.output_text.delta",
        json!({"output_index": 7, "content_index": 0, "delta": "x"}),
    ));
    assert!(matches!(
        run(&unknown),
        Err(ResponseError::UnknownIndex { index: 7 })
    ));
    // A text delta on the reasoning item (index 0).
    let mut wrong = events[..added + 1].to_vec();
    wrong.push(event(
        "response.output_text.delta",
        json!({"output_index": 0, "content_index": 0, "delta": "x"}),
    ));
    assert!(matches!(
        run(&wrong),
        Err(ResponseError::UnexpectedDelta { .. })
    ));
    // A delta after the item's `done`.
    let done = find("response.output_item.done");
    let mut after = events[..=done].to_vec();
    after.push(event(
        "response.reasoning_summary_text.delta",
        json!({"output_index": 0, "summary_index": 0, "delta": "x"}),
    ));
    assert!(matches!(
        run(&after),
        Err(ResponseError::BlockStopped { index: 0 })
    ));
    // Anything after the terminal event.
    let mut extra = events.clone();
    extra.push(events[added].clone());
    assert!(matches!(run(&extra), Err(ResponseError::AfterEnd { .. })));
    // Unknown events and the ones carrying nothing kept are ignored.
    let mut noisy = events.clone();
    noisy.insert(
        added + 1,
        event(
            "response.output_text.annotation.added",
            json!({"output_index": 0, "annotation": {}}),
        ),
    );
    noisy.insert(
        added,
        event(
            "response.web_search_call.searching",
            json!({"output_index": 0}),
        ),
    );
    noisy.insert(1, event("keepalive", json!({})));
    let mut stream = ResponsesStream::new("openai", None);
    for (kind, data) in &noisy {
        stream.push_event(kind, &data.to_string()).unwrap();
    }
    assert_eq!(stream.finish().unwrap(), decode(&answer_body()).unwrap());
}

#[test]
fn push_line_and_events_without_names_frame_the_stream() {
    let text = sse(&events_for(&answer_body(), &[3], true));
    let mut stream = ResponsesStream::new("openai", Some("a1"));
    for line in text.lines() {
        stream.push_line(line).unwrap();
    }
    let answer = stream.finish().unwrap();
    assert_eq!(answer.message.id(), "a1");
    assert_eq!(answer.response_id, "resp_1");
    // Without `event:` lines the data's own `type` names the event.
    let bare: String = events_for(&answer_body(), &[3], true)
        .iter()
        .map(|(_, data)| format!("data: {data}\n\n"))
        .collect();
    assert_eq!(stream_text(&bare).unwrap(), decode(&answer_body()).unwrap());
}

/// One generated output item.
fn gen_item() -> impl Strategy<Value = Value> {
    let text = "[a-z \\{\\}\":,é€]{0,24}";
    prop_oneof![
        prop::collection::vec(text, 0..3).prop_map(|texts| {
            let summary: Vec<Value> = texts.iter().map(|t| json!({"type": "summary_text", "text": t})).collect();
            json!({"id": "rs_x", "type": "reasoning", "summary": summary, "encrypted_content": "enc=="})
        }),
        prop::collection::vec((any::<bool>(), text), 1..3).prop_map(|parts| {
            let parts: Vec<Value> = parts
                .iter()
                .map(|(refusal, t)| match refusal {
                    true => json!({"type": "refusal", "refusal": format!("no{t}")}),
                    false => json!({"type": "output_text", "text": t, "annotations": []}),
                })
                .collect();
            message_item(json!(parts))
        }),
        text.prop_map(|arguments| call_item("call_x", &arguments)),
        "[a-z]{1,8}".prop_map(|q| json!({"id": "ws_x", "type": "web_search_call", "status": "completed", "action": {"type": "search", "query": q}})),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    /// A stream decodes to what the body of the same answer decodes to, whether items are
    /// closed by `output_item.done` or rebuilt from their deltas, however the deltas are split;
    /// and each call's arguments and each reasoning item come back as the body had them.
    #[test]
    fn streamed_equals_json(
        items in prop::collection::vec(gen_item(), 1..5),
        cuts in prop::collection::vec(0usize..40, 1..6),
        close in any::<bool>(),
        incomplete in any::<bool>(),
    ) {
        let mut body = response(json!(items), if incomplete { "incomplete" } else { "completed" });
        if incomplete {
            body["incomplete_details"] = json!({"reason": "max_output_tokens"});
        }
        let json = decode(&body);
        let streamed = stream_text(&sse(&events_for(&body, &cuts, close)));
        match (&json, &streamed) {
            (Ok(a), Ok(b)) => prop_assert_eq!(a, b),
            (Err(ResponseError::EmptyAnswer), Err(ResponseError::EmptyAnswer)) => {}
            (a, b) => prop_assert!(false, "body {:?}, stream {:?}", a, b),
        }
        if let Ok(answer) = json {
            let mut calls = answer.message.content().iter().filter_map(|b| match b {
                ContentBlock::ToolCall(call) => Some(call.arguments().to_owned()),
                _ => None,
            });
            let mut reasonings = answer.message.content().iter().filter_map(|b| match b {
                ContentBlock::Reasoning { extra, .. } => Some(extra.clone()),
                _ => None,
            });
            for item in &items {
                match item["type"].as_str() {
                    Some("function_call") => prop_assert_eq!(Some(item["arguments"].as_str().unwrap().to_owned()), calls.next()),
                    Some("reasoning") => {
                        let extra = reasonings.next().unwrap();
                        prop_assert_eq!(&extra["encrypted_content"], &item["encrypted_content"]);
                        prop_assert_eq!(&extra["summary"], &item["summary"]);
                        prop_assert_eq!(&extra["id"], &item["id"]);
                    }
                    _ => {}
                }
            }
        }
    }

    /// Garbage never panics.
    #[test]
    fn garbage_never_panics(text in "(\\PC|\n){0,200}") {
        let _ = decode_responses(&text, "openai", None);
        let _ = stream_text(&text);
    }
}
