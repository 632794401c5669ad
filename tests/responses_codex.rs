//! Codex's Responses items through the crate: a tool that is not a function, the custom and
//! local shell calls the log keeps verbatim and their outputs, and a message's `phase`
//! (decisions 139 to 141): decoded, logged, written back, and refused where they cannot go.

use mektpoy::project::ProjectedToolUpdates;
use mektpoy::response::decode_responses;
use mektpoy::vocab::{ContentBlock, MessageSource, Role};
use mektpoy::wire::{
    MessageFault, WireContext, WireError, serialize_messages, serialize_openai_chat,
    serialize_responses,
};
use mektpoy::{Config, Message, ToolSchema, route_for};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

fn grammar_tool() -> ToolSchema {
    let def = json!({"type": "custom", "name": "apply_patch", "description": "Edit files.",
        "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"}});
    ToolSchema::from_responses_tool(def.as_object().unwrap().clone()).unwrap()
}

fn object(v: Value) -> Map<String, Value> {
    v.as_object().unwrap().clone()
}

/// One answer of the vendor: commentary, a custom call, as the API sends them.
fn answer(input: &str) -> Message {
    let body = json!({"id": "resp_1", "object": "response", "status": "completed", "model": "gpt-5.5-codex",
        "output": [
            {"id": "msg_1", "type": "message", "role": "assistant", "status": "completed", "phase": "commentary",
                "content": [{"type": "output_text", "text": "Patching.", "annotations": []}]},
            {"id": "ctc_1", "type": "custom_tool_call", "status": "completed", "call_id": "c1",
                "name": "apply_patch", "input": input},
            {"id": "msg_2", "type": "message", "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": "Sent.", "annotations": []}]}
        ],
        "usage": {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}});
    decode_responses(&body.to_string(), "openai", None)
        .unwrap()
        .message
}

fn result(call_id: &str, content: ContentBlock) -> Message {
    Message::new(
        format!("r-{call_id}"),
        Role::Tool,
        vec![content],
        MessageSource::Tool {
            call_id: call_id.into(),
        },
    )
}

fn responses(messages: &[Message], tools: &[ToolSchema]) -> Result<Value, WireError> {
    let config = Config::new("openai", "gpt-5.5-codex");
    let route = route_for("openai", "gpt-5.5-codex");
    let projected = ProjectedToolUpdates::new(messages).with_tools(tools);
    serialize_responses(&config, &projected, &route, &WireContext::default())
        .map(|w| serde_json::from_str(w.body()).unwrap())
}

#[test]
fn a_custom_call_and_phase_go_back_as_they_came() {
    let input = "*** Begin Patch\n+\t\"é\" \\ 😀\n*** End Patch\n";
    let said = answer(input);
    let types: Vec<_> = said
        .content()
        .iter()
        .map(|b| serde_json::to_value(b).unwrap()["type"].clone())
        .collect();
    // A phase marker before the first message's text, one clearing it before the second's.
    assert_eq!(
        types,
        ["phase", "text", "custom_tool_call", "phase", "text"]
    );
    assert_eq!(said.text(), "Patching.Sent.");
    let messages = [
        Message::user("u1", "fix it"),
        said,
        result("c1", ContentBlock::text("Done.")),
        Message::user("u2", "thanks"),
    ];
    let body = responses(&messages, &[grammar_tool()]).unwrap();
    assert_eq!(
        body["tools"][0],
        json!({"type": "custom", "name": "apply_patch", "description": "Edit files.",
            "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"}})
    );
    let items = body["input"].as_array().unwrap();
    assert_eq!(
        items[1],
        json!({"type": "message", "role": "assistant", "content": "Patching.", "phase": "commentary"})
    );
    assert_eq!(
        items[2],
        json!({"type": "custom_tool_call", "status": "completed", "call_id": "c1", "name": "apply_patch", "input": input}),
        "the call without its id, its input byte for byte"
    );
    assert_eq!(
        items[3],
        json!({"type": "message", "role": "assistant", "content": "Sent."})
    );
    assert_eq!(
        items[4],
        json!({"type": "custom_tool_call_output", "call_id": "c1", "output": "Done."}),
        "a text result answers a custom call as a custom output"
    );
}

#[test]
fn outputs_never_go_without_their_call_of_their_kind() {
    let said = answer("x");
    let kept = |v: Value| ContentBlock::other(v).unwrap();
    // A custom call never answered.
    let unanswered = [
        Message::user("u1", "go"),
        said.clone(),
        Message::user("u2", "?"),
    ];
    assert!(matches!(
        responses(&unanswered, &[grammar_tool()]),
        Err(WireError::Message {
            kind: MessageFault::MissingToolResult { .. },
            ..
        })
    ));
    // An output of another call.
    let orphan = [
        Message::user("u1", "go"),
        said.clone(),
        result("c9", ContentBlock::text("x")),
    ];
    assert!(matches!(
        responses(&orphan, &[grammar_tool()]),
        Err(WireError::Message {
            kind: MessageFault::OrphanToolResult { .. },
            ..
        })
    ));
    // A local shell call's own output answering the custom call.
    let wrong_kind = [
        Message::user("u1", "go"),
        said.clone(),
        result(
            "c1",
            kept(json!({"type": "local_shell_call_output", "id": "c1", "output": "x"})),
        ),
    ];
    assert!(matches!(
        responses(&wrong_kind, &[grammar_tool()]),
        Err(WireError::Message {
            kind: MessageFault::OrphanToolResult { .. },
            ..
        })
    ));
    // The custom call's own output, kept: written as it came.
    let own = json!({"type": "custom_tool_call_output", "call_id": "c1",
        "output": [{"type": "input_text", "text": "see"}]});
    let right = [
        Message::user("u1", "go"),
        said,
        result("c1", kept(own.clone())),
    ];
    assert_eq!(
        responses(&right, &[grammar_tool()]).unwrap()["input"][4],
        own
    );
}

#[test]
fn a_tool_that_is_not_a_function_is_refused_off_the_responses_api() {
    let messages = [Message::user("u1", "hi")];
    let tools = [ToolSchema::no_input("clock", "Time"), grammar_tool()];
    let projected = ProjectedToolUpdates::new(&messages[..]).with_tools(&tools[..]);
    let refused = |r: Result<mektpoy::WireRequest, WireError>| matches!(r, Err(WireError::ResponsesOnlyTool { tool, .. }) if tool == "apply_patch");
    assert!(refused(serialize_openai_chat(
        &Config::new("openai", "gpt-4o"),
        &projected
    )));
    let claude = route_for("anthropic", "claude-opus-5");
    assert!(refused(serialize_messages(
        &Config::new("anthropic", "claude-opus-5")
            .with("max_tokens", json!(1024))
            .unwrap(),
        &projected,
        &claude
    )));
    // A function is not one: `type: function` is an ordinary schema.
    assert!(
        ToolSchema::from_responses_tool(object(json!({"type": "function", "name": "f"}))).is_err()
    );
    assert!(ToolSchema::from_responses_tool(object(json!({"name": "f"}))).is_err());
    assert!(
        ToolSchema::from_responses_tool(object(json!({"type": "custom", "name": ""}))).is_err()
    );
    // Its log line reads back as the same tool.
    let line = serde_json::to_value(grammar_tool()).unwrap();
    let back: ToolSchema = serde_json::from_value(line).unwrap();
    assert_eq!(back, grammar_tool());
    assert_eq!(back.responses_tool(), grammar_tool().responses_tool());
}

proptest! {
    /// Any custom call input (any text the model may write) comes back byte for byte.
    #[test]
    fn any_custom_input_comes_back_byte_for_byte(input in "\\PC{0,40}") {
        let messages = [
            Message::user("u1", "go"),
            answer(&input),
            result("c1", ContentBlock::text("ok")),
        ];
        let body = responses(&messages, &[grammar_tool()]).unwrap();
        prop_assert_eq!(body["input"][2]["input"].as_str(), Some(input.as_str()));
    }
}
