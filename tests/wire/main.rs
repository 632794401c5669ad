//! Table-driven tests of both serializers: the worked W rows, one test per
//! `WireError` variant, key order, and the mapping of every block kind. The fixtures are
//! here; the tests are in `wire/`, one file per subject.

use std::collections::HashSet;

use indexmap::IndexMap;
use serde_json::{Value, json};

use mektpoy::*;
use mektpoy::{event::*, project::*, route::*, vocab::*, wire::*};

#[path = "../support/mod.rs"]
mod support;
use support::{object_tool, tool};

// --- fixtures ------------------------------------------------------------------------------

/// `deepseek-flash` as the catalog describes it: addition-only, prompts in history, no beta_always.
fn flash() -> Route {
    Route::builder("deepseek", "deepseek-flash", WireApi::Messages)
        .tool_update(Some(ToolUpdateMode::AdditionOnly))
        .system_prompt_in_history(true)
        .build()
        .unwrap()
}

/// An Anthropic-style entry: in-history, prompts in history, beta on every request.
fn anthropic() -> Route {
    Route::builder("anthropic", "claude-test", WireApi::Messages)
        .tool_update(Some(ToolUpdateMode::InHistory))
        .system_prompt_in_history(true)
        .beta_always(true)
        .deferred_section_bytes(64)
        .build()
        .unwrap()
}

/// A Messages route without a mode and without prompts in history.
fn plain() -> Route {
    Route::plain("deepseek", "deepseek-v4-pro", WireApi::Messages)
}

fn chat() -> Route {
    Route::plain("openai", "gpt-test", WireApi::OpenAiChat)
}

fn config() -> Config {
    Config::new("deepseek", "deepseek-flash")
        .with("max_tokens", json!(1024))
        .unwrap()
}

fn u(id: &str, text: &str) -> Message {
    Message::user(id, text)
}

fn a(id: &str, text: &str) -> Message {
    Message::assistant(id, text, "deepseek", "deepseek-flash")
}

fn s(id: &str, text: &str) -> Message {
    Message::system(id, text)
}

fn d(id: &str, blocks: Vec<ContentBlock>) -> Message {
    Message::developer(id, blocks)
}

fn msg(id: &str, role: Role, blocks: Vec<ContentBlock>) -> Message {
    let source = match role {
        Role::System => MessageSource::SystemPrompt,
        Role::Developer => MessageSource::ToolRegistry,
        Role::User => MessageSource::User,
        Role::Assistant => MessageSource::Model {
            provider: "deepseek".into(),
            model: "deepseek-flash".into(),
        },
        Role::Tool => MessageSource::Tool {
            call_id: "c1".into(),
        },
    };
    Message::new(id, role, blocks, source)
}

fn call(call_id: &str, name: &str, arguments: &str) -> ContentBlock {
    ContentBlock::tool_call(call_id, name, arguments).unwrap()
}

fn calls(id: &str, blocks: Vec<ContentBlock>) -> Message {
    msg(id, Role::Assistant, blocks)
}

fn result(id: &str, call_id: &str, text: &str) -> Message {
    Message::tool_result(id, call_id, text)
}

fn text(t: &str) -> ContentBlock {
    ContentBlock::text(t)
}

fn add(name: &str) -> ContentBlock {
    ContentBlock::addition(name).unwrap()
}

fn remove(name: &str) -> ContentBlock {
    ContentBlock::removal(name).unwrap()
}

fn other(ty: &str) -> ContentBlock {
    ContentBlock::other(json!({"type": ty, "data": "x"})).unwrap()
}

fn projected(
    messages: Vec<Message>,
    tools: Option<Vec<ToolSchema>>,
) -> ProjectedToolUpdates<'static> {
    let projected = ProjectedToolUpdates::new(messages);
    match tools {
        Some(tools) => projected.with_tools(tools),
        None => projected,
    }
}

fn wire(route: &Route, messages: Vec<Message>) -> Result<WireRequest, WireError> {
    serialize(&config(), &projected(messages, None), route)
}

fn body(req: &WireRequest) -> Value {
    serde_json::from_str(req.body()).expect("the body is JSON")
}

fn beta(req: &WireRequest) -> bool {
    req.header("anthropic-beta") == Some("mid-conversation-tool-changes-2026-07-01")
}

// Wire-block shorthands for expectations.

fn user_turn(content: Value) -> Value {
    json!({"role": "user", "content": content})
}

fn assistant_turn(content: Value) -> Value {
    json!({"role": "assistant", "content": content})
}

fn system_turn(content: Value) -> Value {
    json!({"role": "system", "content": content})
}

fn t(text: &str) -> Value {
    json!({"type": "text", "text": text})
}

fn addition(name: &str) -> Value {
    json!({"type": "tool_addition", "tool": {"type": "tool_reference", "name": name}})
}

fn removal(name: &str) -> Value {
    json!({"type": "tool_removal", "tool": {"type": "tool_reference", "name": name}})
}

mod anthropic;
mod chat;
mod content;
mod errors;
mod prompts;
mod responses;
mod rows;
mod shape;
