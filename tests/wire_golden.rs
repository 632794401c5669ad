//! Byte-exact wire requests for hand-built projected requests, one per route shape.
//!
//! The expected bytes live in `tests/golden/`; `UPDATE_GOLDEN=1 cargo test --test wire_golden`
//! rewrites them (review the diff). Only the public API is used.

mod support;

use indexmap::IndexMap;
use std::collections::HashSet;

use mektpoy::{
    Config, ContentBlock, Message, Route, ToolSchema,
    event::{Rewrite, ThinkingPolicy},
    history::{ToolHistory, ToolUpdate},
    project::{ProjectedToolUpdates, project_tool_updates_inline},
    route::{ToolUpdateMode, WireApi},
    vocab::{MessageSource, Role},
    wire::{ThinkingPlan, WireContext, WireReport, serialize, serialize_with},
};
use serde_json::json;
use support::golden::assert_golden;
use support::tool_from;

fn flash() -> Route {
    Route::builder("deepseek", "deepseek-flash", WireApi::Messages)
        .tool_update(Some(ToolUpdateMode::AdditionOnly))
        .system_prompt_in_history(true)
        .build()
        .unwrap()
}

fn anthropic() -> Route {
    Route::builder("anthropic", "claude-test", WireApi::Messages)
        .tool_update(Some(ToolUpdateMode::InHistory))
        .system_prompt_in_history(true)
        .beta_always(true)
        .build()
        .unwrap()
}

fn read_tool() -> ToolSchema {
    // Unknown fields (`title`, `annotations`) stay in the log and are never sent.
    tool_from(json!({
        "name": "read",
        "description": "Read a file",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string"}, "limit": {"type": "integer"}},
            "required": ["path"]
        },
        "title": "Read",
        "annotations": {"readOnlyHint": true}
    }))
}

fn search_tool() -> ToolSchema {
    tool_from(json!({
        "name": "search",
        "description": "Search the web",
        "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}
    }))
}

fn fetch_tool() -> ToolSchema {
    tool_from(json!({
        "name": "fetch",
        "description": "Fetch a URL",
        "parameters": {"type": "object", "properties": {"url": {"type": "string"}}}
    }))
}

fn assistant(id: &str, content: Vec<ContentBlock>) -> Message {
    from_model(id, content, "test", "test")
}

/// An assistant message produced on the Anthropic route's model: its signed thinking can be
/// sent back (reasoning from another provider or model is left out).
fn claude(id: &str, content: Vec<ContentBlock>) -> Message {
    from_model(id, content, "anthropic", "claude-test")
}

fn from_model(id: &str, content: Vec<ContentBlock>, provider: &str, model: &str) -> Message {
    Message::new(
        id,
        Role::Assistant,
        content,
        MessageSource::Model {
            provider: provider.into(),
            model: model.into(),
        },
    )
}

fn call(id: &str, name: &str, arguments: &str) -> ContentBlock {
    ContentBlock::tool_call(id, name, arguments).unwrap()
}

fn reasoning(text: &str, signature: &str) -> ContentBlock {
    let mut extra = IndexMap::new();
    extra.insert("signature".to_owned(), json!(signature));
    ContentBlock::Reasoning {
        text: text.into(),
        extra,
    }
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

/// Addition-only route, prompts in history: a tool call cycle, then an addition announced with
/// a prompt update after a tool result, flushed before the next assistant message.
#[test]
fn messages_flash_addition_after_tool_result() {
    let config = Config::new("deepseek", "deepseek-flash")
        .with("temperature", json!(0.3))
        .unwrap()
        .with("max_tokens", json!(4096))
        .unwrap();
    let p = projected(
        vec![
            Message::system("s0", "You are a coding agent."),
            Message::user("u1", "Open README.md"),
            assistant(
                "a1",
                vec![
                    ContentBlock::text("Reading it."),
                    call("c1", "read", r#"{"path": "README.md", "limit": 20}"#),
                ],
            ),
            Message::tool_result("t1", "c1", "# mektpoy"),
            Message::developer(
                "d1",
                vec![
                    ContentBlock::addition("search").unwrap(),
                    ContentBlock::text(""),
                ],
            ),
            Message::system("s1", "You are a coding agent. Search when unsure."),
            Message::user("u2", "Now search for similar crates"),
            assistant(
                "a2",
                vec![call("c2", "search", r#"{"q":"prompt cache rust"}"#)],
            ),
            Message::tool_result("t2", "c2", "3 results"),
        ],
        Some(vec![read_tool(), search_tool().with_defer_loading(true)]),
    );
    assert_golden(
        "messages_flash_addition_after_tool_result",
        &serialize(&config, &p, &flash()).unwrap(),
    );
}

/// In-history route with `beta_always`: thinking with a signature, an error result, a removal
/// and an addition in one developer message, and an update that waits behind the last
/// assistant message (left out of this request).
#[test]
fn messages_anthropic_in_history() {
    let config = Config::new("anthropic", "claude-test")
        .with("max_tokens", json!(8192))
        .unwrap()
        .with(
            "thinking",
            json!({"type": "enabled", "budget_tokens": 2048}),
        )
        .unwrap();
    let p = projected(
        vec![
            Message::system("s0", "Be terse."),
            Message::user("u1", "Fetch example.com"),
            claude(
                "a1",
                vec![
                    reasoning("The user wants a page.", "c2lnbmF0dXJl"),
                    call("c1", "fetch", r#"{"url":"https://example.com"}"#),
                ],
            ),
            Message::tool_result("t1", "c1", "timeout").with_is_error(true),
            Message::developer(
                "d1",
                vec![
                    ContentBlock::removal("fetch").unwrap(),
                    ContentBlock::addition("search").unwrap(),
                    ContentBlock::text("fetch is gone; use search"),
                ],
            ),
            claude(
                "a2",
                vec![ContentBlock::text("Fetch failed; I will search.")],
            ),
            Message::developer("d2", vec![ContentBlock::addition("read").unwrap()]),
        ],
        Some(vec![
            fetch_tool(),
            search_tool().with_defer_loading(true),
            read_tool().with_defer_loading(true),
        ]),
    );
    assert_golden(
        "messages_anthropic_in_history",
        &serialize(&config, &p, &anthropic()).unwrap(),
    );
}

/// A Messages route without a mode or prompts in history: only the latest system node is
/// sent, as `system`; no beta header.
#[test]
fn messages_plain_latest_prompt() {
    let config = Config::new("deepseek", "deepseek-v4-pro")
        .with("max_tokens", json!(1024))
        .unwrap();
    let p = projected(
        vec![
            Message::system("s0", "Old prompt."),
            Message::user("u1", "hi"),
            assistant("a1", vec![ContentBlock::text("hello")]),
            Message::system("s1", "New prompt."),
            Message::user("u2", "again"),
        ],
        Some(vec![read_tool(), search_tool()]),
    );
    let route = Route::plain("deepseek", "deepseek-v4-pro", WireApi::Messages);
    assert_golden(
        "messages_plain_latest_prompt",
        &serialize(&config, &p, &route).unwrap(),
    );
}

/// OpenAI-compatible chat: function tools, the latest prompt first, tool calls with their raw
/// arguments, tool messages; reasoning is not sent.
#[test]
fn openai_chat_tool_cycle() {
    let config = Config::new("openai", "gpt-test")
        .with("temperature", json!(0))
        .unwrap()
        .with("max_tokens", json!(512))
        .unwrap();
    let p = projected(
        vec![
            Message::system("s0", "You are helpful."),
            Message::user("u1", "Read README.md"),
            assistant(
                "a1",
                vec![
                    reasoning("I should read it.", "sig"),
                    call("c1", "read", r#"{"path": "README.md"}"#),
                ],
            ),
            Message::tool_result("t1", "c1", "# mektpoy"),
            assistant("a2", vec![ContentBlock::text("It is a Rust crate.")]),
        ],
        Some(vec![read_tool()]),
    );
    let route = Route::plain("openai", "gpt-test", WireApi::OpenAiChat);
    assert_golden(
        "openai_chat_tool_cycle",
        &serialize(&config, &p, &route).unwrap(),
    );
}

/// A v4 Anthropic entry: inline definitions, thinking bound to the conversation, automatic
/// caching, no forced tool choice, no prefill.
fn anthropic_v4() -> Route {
    Route::builder("anthropic", "claude-test", WireApi::Messages)
        .tool_update(Some(ToolUpdateMode::InHistory))
        .system_prompt_in_history(true)
        .beta_always(true)
        .inline_definitions(true)
        .binds_thinking(true)
        .auto_cache(true)
        .forced_tool_choice(false)
        .assistant_prefill(false)
        .build()
        .unwrap()
}

/// A strict tool: on Anthropic routes `strict` and `input_examples` are sent, `title` is not.
fn strict_read_tool() -> ToolSchema {
    tool_from(json!({
        "name": "read",
        "description": "Read a file",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        "title": "Read",
        "input_examples": [{"path": "README.md"}],
        "strict": true
    }))
}

/// Inline route: `tools` frozen, a tool added by value after a tool result (projected with the
/// public inline projection), automatic `cache_control`, signed thinking and
/// `redacted_thinking` sent back, reasoning from another provider and unsigned reasoning left
/// out.
#[test]
fn messages_anthropic_v4_inline() {
    let config = Config::new("anthropic", "claude-test")
        .with("max_tokens", json!(8192))
        .unwrap()
        .with("thinking", json!({"type": "adaptive"}))
        .unwrap();
    let messages = vec![
        Message::system("s0", "Be terse."),
        Message::user("u1", "Open README.md"),
        claude(
            "a1",
            vec![
                reasoning("The user wants the file.", "c2lnMQ=="),
                ContentBlock::other(json!({"type": "redacted_thinking", "data": "RW5jcnlwdGVk"}))
                    .unwrap(),
                call("c1", "read", r#"{"path":"README.md"}"#),
            ],
        ),
        Message::tool_result("t1", "c1", "# mektpoy"),
        Message::developer("d1", vec![ContentBlock::addition("search").unwrap()]),
        assistant(
            "a2",
            vec![
                reasoning("Another vendor's reasoning.", "b3RoZXI="),
                ContentBlock::text("Found it."),
            ],
        ),
        Message::user("u2", "Search for similar crates"),
    ];
    let tools = [strict_read_tool(), search_tool()];
    let history = ToolHistory::new(
        [strict_read_tool()],
        [ToolUpdate::new("d1", [search_tool()])],
    );
    let projected = project_tool_updates_inline(&messages, Some(&tools), Some(&history));
    assert!(
        matches!(
            projected.messages[4].content()[0],
            ContentBlock::InlineAddition(_)
        ),
        "the projection sends search by value"
    );
    let request = serialize(&config, &projected, &anthropic_v4()).unwrap();
    let mut report = WireReport::default();
    report.unverifiable_reasoning_left_out = 1;
    assert_eq!(*request.report(), report);
    assert_golden("messages_anthropic_v4_inline", &request);
}

/// The `DropBlock` policy after a rewrite: the pre-floor thinking is sent with
/// `block_binding` and the thinking beta; 20 blocks after the previous request's last block
/// put an explicit breakpoint on it (with the config's `ttl`).
#[test]
fn messages_anthropic_v4_drop_block_and_lookback() {
    let config = Config::new("anthropic", "claude-test")
        .with("max_tokens", json!(4096))
        .unwrap()
        .with("cache_control", json!({"type": "ephemeral", "ttl": "1h"}))
        .unwrap()
        .with(
            "thinking",
            json!({"type": "enabled", "budget_tokens": 1024}),
        )
        .unwrap();
    let files: Vec<ContentBlock> = (1..=20)
        .map(|i| ContentBlock::text(format!("file {i}")))
        .collect();
    let messages = vec![
        Message::user("u1", "List the files"),
        claude(
            "a1",
            vec![
                reasoning("Ask for them.", "c2lnMQ=="),
                ContentBlock::text("Paste them."),
            ],
        ),
        Message::user("u2", "Here:"),
        Message::new("u3", Role::User, files, MessageSource::User),
    ];
    let before_floor: HashSet<String> = ["u1", "a1"].map(String::from).into();
    let mut context = WireContext::default();
    // The previous request sent u1, a1 (3 blocks) and u2.
    context.previous_blocks = Some(4);
    context.thinking = Some(ThinkingPlan {
        policy: ThinkingPolicy::DropBlock,
        before_floor: &before_floor,
        rewrite: Rewrite::Tools,
    });
    let request = serialize_with(
        &config,
        &projected(messages, Some(vec![search_tool()])),
        &anthropic_v4(),
        &context,
    )
    .unwrap();
    assert!(request.report().drop_block);
    assert_eq!(request.report().lookback_breakpoint, Some(3));
    assert_golden("messages_anthropic_v4_drop_block_and_lookback", &request);
}
