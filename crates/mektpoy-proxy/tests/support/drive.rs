//! One conversation driven through the proxy's pieces in process (no HTTP, no upstream):
//! what `benches/pieces.rs` times and counts, and what `tests/held_memory.rs` holds.

use axum::http::HeaderMap;
use mektpoy_proxy::Store;
use mektpoy_proxy::client_body::parse;
use mektpoy_proxy::conversation::conversation_key;
use mektpoy_proxy::conversation_state::Conversation;
use mektpoy_proxy::translate;
use serde_json::{Value, json};

/// Conversation `session` of `requests` requests on `store`, with `tools` tools and user turns
/// of `turn` bytes (the client's bodies metered when `direct`), each answered: the
/// conversation, held, and the last body's length. `lap(None)` when a request's body is
/// written, `lap(Some(k))` after its piece `k`: reading the body (0), naming the conversation
/// (1), reading its messages (2), logging and serializing (3), metering the client's body
/// (4), metering and logging the answer (5).
pub fn run(
    store: &Store,
    session: &str,
    (requests, tools, turn, direct): (usize, usize, usize, bool),
    lap: &mut dyn FnMut(Option<usize>),
) -> (Conversation, usize) {
    let tools: Vec<Value> = (0..tools)
        .map(|i| {
            json!({"name": format!("tool_{i}"), "description": "d".repeat(60),
                "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}})
        })
        .collect();
    let mut headers = HeaderMap::new();
    headers.insert("x-api-key", "sk-bench".parse().unwrap());
    headers.insert("x-mektpoy-session", session.parse().unwrap());
    let mut history: Vec<Value> = Vec::new();
    let mut slot: Option<Conversation> = None;
    let mut len = 0;
    for step in 0..requests {
        history
            .push(json!({"role": "user", "content": format!("step {step} {}", "x".repeat(turn))}));
        let text =
            json!({"model": "claude-opus-5", "max_tokens": 64, "system": "You are a coding agent.",
            "tools": tools, "messages": history})
            .to_string();
        len = text.len();
        lap(None);
        let body = parse(&text).unwrap();
        lap(Some(0));
        let key = conversation_key(&headers, &body);
        let c = slot.get_or_insert_with(|| {
            Conversation::load(store, &key, "anthropic", "claude-opus-5").unwrap()
        });
        lap(Some(1));
        let client = translate::read(&body, "anthropic", c.known()).unwrap();
        lap(Some(2));
        let wire = c.prepare("anthropic", client).unwrap();
        lap(Some(3));
        if direct {
            c.observe_direct(&body, &text);
        }
        lap(Some(4));
        let answer = json!({"id": format!("msg_{step}"), "type": "message", "role": "assistant",
            "model": "claude-opus-5", "content": [{"type": "text", "text": format!("done {step}")}],
            "stop_reason": "end_turn", "stop_sequence": null,
            "usage": {"input_tokens": 10, "output_tokens": 2}});
        let answer =
            mektpoy::response::decode_messages(&answer.to_string(), "anthropic", None).unwrap();
        c.agent().observe(&wire).unwrap();
        c.agent().append(answer.message).unwrap();
        lap(Some(5));
        history.push(json!({"role": "assistant", "content": [{"type": "text", "text": format!("done {step}")}]}));
    }
    (slot.expect("one request at least"), len)
}
