//! Structured requests (messages of every role with blocks from a small alphabet, tools, a
//! snapshot built with `ToolHistory::new` / `ToolUpdate::new(..).with_redefinitions(..)`)
//! projected in every mode (`project_tool_updates` with no mode, in-history, addition-only;
//! `project_tool_updates_inline` for the by-value snapshot), then serialized on a route of each
//! API (`serialize`, and `serialize_with` a previous request and a thinking plan). Nothing may
//! panic; a refusal is a typed `WireError`. Projection only drops or rewrites messages: its
//! output ids are a subsequence of the input's, and without a mode no developer message stays.
#![no_main]

use std::collections::HashSet;

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use mektpoy::{
    Config, ContentBlock, Message, ToolSchema,
    event::{Rewrite, ThinkingPolicy},
    history::{ToolHistory, ToolUpdate},
    project::{project_tool_updates, project_tool_updates_inline},
    route::ToolUpdateMode,
    route_for,
    vocab::{DEFERRED_PLACEHOLDER_NAME, MessageSource, Role},
    wire::{ThinkingPlan, WireContext, serialize, serialize_with},
};
use serde_json::{Map, json};

const NAMES: [&str; 5] = ["a", "b", "c", "", DEFERRED_PLACEHOLDER_NAME];

#[derive(Arbitrary, Debug, Clone, Copy)]
struct ToolPick {
    /// Index into `NAMES` (`""` and the reserved name only when `name % 16 >= 14`).
    name: u8,
    version: u8,
    deferred: bool,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Block {
    Text(bool),
    Reasoning { signed: bool, extra_type: bool },
    Redacted,
    Image,
    NoType,
    Call { id: u8, name: u8, args: u8 },
    Addition(u8),
    Removal(u8),
    Redefinition(u8),
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Who {
    User,
    /// An assistant message from `provider`: 0 the route's (deepseek or anthropic), else
    /// another.
    Assistant(u8),
    /// A tool result for call `c{n}`, or (`None`) with a user source.
    Tool(Option<u8>),
    Developer,
    SystemPrompt,
    SystemNote,
}

#[derive(Arbitrary, Debug)]
struct Msg {
    who: Who,
    blocks: Vec<Block>,
    /// Give this message the id of an earlier one.
    reuse_id: Option<u8>,
    is_error: Option<bool>,
}

#[derive(Arbitrary, Debug)]
struct Update {
    /// Message index whose id the update names (modulo the messages; may not be a developer
    /// message).
    message: u8,
    additions: Vec<ToolPick>,
    redefinitions: Vec<ToolPick>,
}

#[derive(Arbitrary, Debug)]
struct History {
    tools: Vec<ToolPick>,
    updates: Vec<Update>,
}

#[derive(Arbitrary, Debug)]
struct Input {
    messages: Vec<Msg>,
    tools: Option<Vec<ToolPick>>,
    history: Option<History>,
    /// 0 none, 1 `max_tokens`, 2 + adaptive thinking, 3 + disabled thinking, 4 + forced
    /// `tool_choice`, 5 a reserved key.
    config: u8,
    previous_blocks: Option<u8>,
    /// A thinking plan: the policy and which message indices lie before the floor.
    plan: Option<(u8, u16)>,
}

fn tool(pick: ToolPick) -> ToolSchema {
    let name = match pick.name % 16 {
        14 => NAMES[3],
        15 => NAMES[4],
        n => NAMES[usize::from(n) % 3],
    };
    let object = || {
        let mut m = Map::new();
        m.insert("type".into(), json!("object"));
        m
    };
    let t = match pick.version % 4 {
        0 => ToolSchema::new(name, "v0", object()),
        1 => ToolSchema::new(name, "v1", object()),
        2 => ToolSchema::new(name, "v0", Map::new()),
        _ => ToolSchema::from_value(
            json!({"name": name, "description": "v0", "parameters": {"type": "object"}, "x": 1}),
        )
        .unwrap(),
    };
    t.with_defer_loading(pick.deferred)
}

/// The block `b` picks; `None` for a call or change naming the empty tool, which no
/// constructor builds (issue 21).
fn block(b: Block) -> Option<ContentBlock> {
    let name = |n: u8| NAMES[usize::from(n) % NAMES.len()].to_owned();
    Some(match b {
        Block::Text(empty) => ContentBlock::text(if empty { "" } else { "hi" }),
        Block::Reasoning { signed, extra_type } => {
            let mut v = json!({"type": "reasoning", "text": "r"});
            if signed {
                v["signature"] = json!("sig");
            }
            if extra_type {
                v["thinking"] = json!("t");
            }
            ContentBlock::from_value(v).unwrap()
        }
        Block::Redacted => {
            ContentBlock::other(json!({"type": "redacted_thinking", "data": "x"})).unwrap()
        }
        Block::Image => ContentBlock::other(json!({"type": "image", "source": {}})).unwrap(),
        // A block without `type` can no longer be built (`ContentBlock::other` refuses it);
        // the nearest unknown block is one whose type is empty.
        Block::NoType => ContentBlock::other(json!({"type": "", "data": 1})).unwrap(),
        Block::Call { id, name: n, args } => ContentBlock::tool_call(
            format!("c{}", id % 4),
            name(n),
            match args % 6 {
                0 => "{}".into(),
                1 => r#"{"p":1}"#.into(),
                2 => "{".into(),
                3 => "[1]".into(),
                4 => r#"{"p":1,"p":2}"#.into(),
                _ => format!("{{\"a\":{}{}}}", "[".repeat(126), "]".repeat(126)),
            },
        )
        .ok()?,
        Block::Addition(n) => ContentBlock::addition(name(n)).ok()?,
        Block::Removal(n) => ContentBlock::removal(name(n)).ok()?,
        Block::Redefinition(n) => ContentBlock::redefinition(name(n)).ok()?,
    })
}

fn messages(input: &Input, provider: &str) -> Vec<Message> {
    let mut out: Vec<Message> = Vec::new();
    for (i, m) in input.messages.iter().take(16).enumerate() {
        let id = match m.reuse_id {
            Some(j) if !out.is_empty() => out[usize::from(j) % out.len()].id().to_owned(),
            _ => format!("m{i}"),
        };
        let content: Vec<ContentBlock> =
            m.blocks.iter().take(6).copied().filter_map(block).collect();
        let (role, source) = match m.who {
            Who::User => (Role::User, MessageSource::User),
            Who::Assistant(p) => (
                Role::Assistant,
                MessageSource::Model {
                    provider: if p == 0 {
                        provider.into()
                    } else {
                        "other".into()
                    },
                    model: "m".into(),
                },
            ),
            Who::Tool(Some(c)) => (
                Role::Tool,
                MessageSource::Tool {
                    call_id: format!("c{}", c % 4),
                },
            ),
            Who::Tool(None) => (Role::Tool, MessageSource::User),
            Who::Developer => (Role::Developer, MessageSource::ToolRegistry),
            Who::SystemPrompt => (Role::System, MessageSource::SystemPrompt),
            Who::SystemNote => (
                Role::System,
                MessageSource::other(json!({"kind": "compaction"})).unwrap(),
            ),
        };
        let message = Message::new(id, role, content, source);
        out.push(match m.is_error {
            Some(e) => message.with_is_error(e),
            None => message,
        });
    }
    out
}

fn history(h: &History, messages: &[Message]) -> ToolHistory {
    let picks = |v: &[ToolPick]| v.iter().take(6).copied().map(tool).collect::<Vec<_>>();
    let updates = h.updates.iter().take(6).map(|u| {
        let id = if messages.is_empty() {
            "none".to_owned()
        } else {
            messages[usize::from(u.message) % messages.len()]
                .id()
                .to_owned()
        };
        ToolUpdate::new(id, picks(&u.additions)).with_redefinitions(picks(&u.redefinitions))
    });
    ToolHistory::new(picks(&h.tools), updates.collect::<Vec<_>>())
}

fn config(provider: &str, model: &str, pick: u8) -> Config {
    let c = Config::new(provider, model);
    match pick % 6 {
        0 => c,
        1 => c.with("max_tokens", json!(64)).unwrap(),
        2 => c
            .with("max_tokens", json!(64))
            .unwrap()
            .with("thinking", json!({"type": "adaptive"}))
            .unwrap(),
        3 => c
            .with("max_tokens", json!(64))
            .unwrap()
            .with("thinking", json!({"type": "disabled"}))
            .unwrap(),
        4 => c
            .with("max_tokens", json!(64))
            .unwrap()
            .with("tool_choice", json!({"type": "tool", "name": "a"}))
            .unwrap(),
        _ => c
            .with("max_tokens", json!(64))
            .unwrap()
            .with("tools", json!([]))
            .unwrap(),
    }
}

/// Whether `out`'s ids are a subsequence of `input`'s.
fn subsequence(out: &[Message], input: &[Message]) -> bool {
    let mut rest = input.iter();
    out.iter().all(|m| {
        rest.by_ref()
            .any(|i| i.id() == m.id() && i.role() == m.role())
    })
}

fuzz_target!(|input: Input| {
    let by_reference = route_for("anthropic", "claude-opus-5")
        .into_builder()
        .inline_definitions(false)
        .deferred_placeholder(true)
        .build()
        .expect("a valid variation of a catalog entry");
    let routes = [
        route_for("deepseek", "deepseek-flash"),
        route_for("anthropic", "claude-opus-5"),
        route_for("anthropic", "claude-fable-5-1"),
        by_reference,
        route_for("openai-compatible", "any"),
    ];
    // Messages from "deepseek" and from "anthropic" (whose signatures the route can check).
    for provider in ["deepseek", "anthropic"] {
        let messages = messages(&input, provider);
        let tools: Option<Vec<ToolSchema>> = input
            .tools
            .as_ref()
            .map(|v| v.iter().take(6).copied().map(tool).collect());
        let history = input.history.as_ref().map(|h| history(h, &messages));
        let before_floor: HashSet<String> = match input.plan {
            Some((_, mask)) => messages
                .iter()
                .enumerate()
                .filter(|(i, _)| mask & (1 << (i % 16)) != 0)
                .map(|(_, m)| m.id().to_owned())
                .collect(),
            None => HashSet::new(),
        };
        let mut projections = Vec::new();
        for mode in [
            None,
            Some(ToolUpdateMode::InHistory),
            Some(ToolUpdateMode::AdditionOnly),
        ] {
            let out = project_tool_updates(&messages, tools.as_deref(), mode, history.as_ref());
            let path = out.path;
            assert!(subsequence(&out.messages.to_vec(), &messages), "{path:?}");
            if mode.is_none() {
                assert!(out.messages.iter().all(|m| m.role() != Role::Developer));
            }
            projections.push(out);
        }
        let inline = project_tool_updates_inline(&messages, tools.as_deref(), history.as_ref());
        assert!(subsequence(&inline.messages.to_vec(), &messages));
        projections.push(inline);

        for route in &routes {
            let config = config(&route.provider, &route.model, input.config);
            let mut context = WireContext::default();
            context.previous_blocks = input.previous_blocks.map(usize::from);
            if let Some((policy, _)) = input.plan {
                context.thinking = Some(ThinkingPlan {
                    policy: match policy % 3 {
                        0 => ThinkingPolicy::StripThinking,
                        1 => ThinkingPolicy::DropBlock,
                        _ => ThinkingPolicy::Refuse,
                    },
                    before_floor: &before_floor,
                    rewrite: match policy / 3 % 3 {
                        0 => Rewrite::Tools,
                        1 => Rewrite::System,
                        _ => Rewrite::History { message: 0 },
                    },
                });
            }
            for projected in &projections {
                for result in [
                    serialize(&config, projected, route),
                    serialize_with(&config, projected, route, &context),
                ] {
                    match result {
                        Ok(w) => assert!(!w.body().is_empty()),
                        Err(e) => {
                            let _ = e.to_string();
                        }
                    }
                }
            }
        }
    }
});
