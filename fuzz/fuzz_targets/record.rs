//! Structured agent loops recorded with `Recorder::record`, each request serialized with
//! `Request::to_wire`, over each built-in route kind: deepseek-flash (addition-only, prompts
//! in history), deepseek-v4-pro (plain), claude-opus-5 (in-history, inline definitions),
//! claude-fable-5-1 (inline, binds thinking, no forced tool choice), claude-fable-5-2 (no mode,
//! binds thinking) and claude-opus-5 by reference (no inline definitions, the deferred
//! placeholder).
//!
//! Every input runs once per route, in a fresh session; a `Step` may go to the next route of
//! the list instead (a route switch). Nothing may panic; refusals are typed, and a refused
//! `record` or `append` leaves the log as it was. At the end the log saves and loads back byte
//! for byte, to the same folds.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use mektpoy::{
    Config, ContentBlock, Event, Message, Route, Session, ToolSchema,
    agent::{Recorder, Step},
    event::ThinkingPolicy,
    route_for,
    vocab::{DEFERRED_PLACEHOLDER_NAME, MessageSource, Role},
};
use serde_json::{Map, json};

/// Tool names; the last one is the name the serializer reserves.
const NAMES: [&str; 5] = ["read", "grep", "edit", "web", DEFERRED_PLACEHOLDER_NAME];

#[derive(Arbitrary, Debug, Clone, Copy)]
struct ToolPick {
    /// Index into `NAMES` (the reserved name only when `name % 16 == 15`).
    name: u8,
    /// Which definition: 0 plain, 1 another description, 2 `parameters` without
    /// `"type":"object"`, 3 with an unknown field.
    version: u8,
    deferred: bool,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Args {
    Empty,
    Path,
    Malformed,
    NotObject,
    DuplicateKeys,
    BigNumber,
    Deep,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Reasoning {
    None,
    /// Signed by the route's provider.
    Signed,
    /// Signed, but produced by another provider.
    Foreign,
    Unsigned,
    Redacted,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Summary {
    User,
    /// A system message that is not a prompt (a compaction note).
    SystemNote,
    Assistant,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Policy {
    Strip,
    DropBlock,
    Refuse,
}

#[derive(Arbitrary, Debug)]
enum Op {
    /// One `record` call.
    Step {
        tools: Vec<ToolPick>,
        /// 0 none, 1 `max_tokens`, 2 + adaptive thinking, 3 + disabled thinking, 4 + a forced
        /// `tool_choice`, 5 a reserved config key.
        config: u8,
        /// Index into the prompts ("", "Be brief.", "Be careful.").
        prompt: u8,
        new_series: bool,
        attempt: u8,
        users: u8,
        /// Reuse the previous user message id (a duplicate).
        reuse_id: bool,
        /// Record this step for the next route of the list.
        switch_route: bool,
    },
    /// An assistant message: text and/or reasoning.
    Answer { text: bool, reasoning: Reasoning },
    /// An assistant tool call, and (unless `skip_result`) its result.
    Call {
        tool: u8,
        args: Args,
        skip_result: bool,
        is_error: bool,
        reasoning: Reasoning,
    },
    /// A result for a call that may not exist.
    StrayResult { call: u8 },
    /// A compaction: a summary replacing surface nodes `start..=end` (modulo the surface).
    Compact {
        start: u8,
        end: u8,
        summary: Summary,
    },
    /// Choose the thinking policy (allowed once, before any floor).
    Thinking(Policy),
    /// A restart: the log is saved, loaded back, and a new recorder attached.
    Restart,
}

#[derive(Arbitrary, Debug)]
struct Input {
    ops: Vec<Op>,
}

fn tool(pick: ToolPick) -> ToolSchema {
    let name = if pick.name % 16 == 15 {
        NAMES[4]
    } else {
        NAMES[usize::from(pick.name) % 4]
    };
    let object = || {
        let mut m = Map::new();
        m.insert("type".into(), json!("object"));
        m.insert("properties".into(), json!({"path": {"type": "string"}}));
        m
    };
    let t = match pick.version % 4 {
        0 => ToolSchema::new(name, format!("{name} it"), object()),
        1 => ToolSchema::new(name, format!("{name} it, again"), object()),
        2 => ToolSchema::new(name, format!("{name} it"), Map::new()),
        _ => {
            let mut v = json!({"name": name, "description": "x", "parameters": object()});
            v["title"] = json!("T");
            ToolSchema::from_value(v).unwrap()
        }
    };
    t.with_defer_loading(pick.deferred)
}

fn config(route: &Route, pick: u8) -> Config {
    let c = Config::new(route.provider.to_string(), route.model.to_string());
    match pick % 6 {
        0 => c,
        1 => c.with("max_tokens", json!(1024)).unwrap(),
        2 => c
            .with("max_tokens", json!(1024))
            .unwrap()
            .with("thinking", json!({"type": "adaptive"}))
            .unwrap(),
        3 => c
            .with("max_tokens", json!(1024))
            .unwrap()
            .with("thinking", json!({"type": "disabled"}))
            .unwrap(),
        4 => c
            .with("max_tokens", json!(1024))
            .unwrap()
            .with("tool_choice", json!({"type": "any"}))
            .unwrap(),
        _ => c
            .with("max_tokens", json!(16))
            .unwrap()
            .with("system", json!("x"))
            .unwrap(),
    }
}

fn arguments(args: Args) -> String {
    match args {
        Args::Empty => "{}".into(),
        Args::Path => r#"{"path":"a.txt"}"#.into(),
        Args::Malformed => "{".into(),
        Args::NotObject => "[1]".into(),
        Args::DuplicateKeys => r#"{"path":"/safe","path":"/etc/passwd"}"#.into(),
        Args::BigNumber => r#"{"n":123456789012345678901234567890}"#.into(),
        Args::Deep => format!("{{\"a\":{}{}}}", "[".repeat(126), "]".repeat(126)),
    }
}

fn reasoning(kind: Reasoning, route: &Route) -> Option<(ContentBlock, String)> {
    let own = route.provider.to_string();
    let block = |signature: &str| {
        ContentBlock::from_value(
            json!({"type": "reasoning", "text": "hmm", "signature": signature}),
        )
        .unwrap()
    };
    match kind {
        Reasoning::None => None,
        Reasoning::Signed => Some((block("sig"), own)),
        Reasoning::Foreign => Some((block("sig"), "other".into())),
        Reasoning::Unsigned => Some((block(""), own)),
        Reasoning::Redacted => Some((
            ContentBlock::other(json!({"type": "redacted_thinking", "data": "opaque"})).unwrap(),
            own,
        )),
    }
}

/// Serializes `request` for the route it was recorded for, then statelessly for a plain
/// chat route: a body or a typed error, never a panic.
fn wire(request: &mektpoy::Request) {
    let plain = route_for("openai-compatible", "any");
    let projected =
        mektpoy::project::project_tool_updates(&request.messages, Some(&request.tools), None, None);
    for result in [
        request.to_wire(),
        mektpoy::wire::serialize(&request.config, &projected, &plain),
    ] {
        match result {
            Ok(w) => assert!(!w.body().is_empty()),
            Err(e) => {
                let _ = e.to_string();
            }
        }
    }
}

fn run(input: &Input, routes: &[Route], main: usize) {
    let route = &routes[main];
    let mut session = Session::new("s");
    let mut recorder = Recorder::attach(&session);
    let mut next = 0u32;
    let mut fresh = |prefix: &str| {
        next += 1;
        format!("{prefix}{next}")
    };
    let mut last_user: Option<String> = None;
    let mut calls: Vec<String> = Vec::new();
    let mut turn = 0u64;
    let prompts = ["", "Be brief.", "Be careful."];
    // Appends `event` directly; a refusal leaves the log unchanged.
    let append = |session: &Session, event: Event| {
        let before = session.len();
        match session.append(event) {
            Ok(_) => assert_eq!(session.len(), before + 1),
            Err(e) => {
                let _ = e.to_string();
                assert_eq!(session.len(), before);
            }
        }
    };
    for op in input.ops.iter().take(24) {
        match op {
            Op::Step {
                tools,
                config: c,
                prompt,
                new_series,
                attempt,
                users,
                reuse_id,
                switch_route,
            } => {
                let route = if *switch_route {
                    &routes[(main + 1) % routes.len()]
                } else {
                    route
                };
                let tools: Vec<ToolSchema> = tools.iter().take(6).copied().map(tool).collect();
                let config = config(route, *c);
                let attempt = u32::from(attempt % 3);
                if attempt == 0 {
                    turn += 1;
                }
                let mut user_messages = Vec::new();
                for _ in 0..(users % 3) {
                    let id = match (&last_user, reuse_id) {
                        (Some(id), true) => id.clone(),
                        _ => fresh("u"),
                    };
                    last_user = Some(id.clone());
                    user_messages.push(Message::user(id, "do it"));
                }
                let before = session.len();
                let result = recorder.record(
                    &session,
                    Step::new(&config, prompts[usize::from(*prompt) % 3], &tools, route)
                        .at(turn, 0, attempt)
                        .new_series(*new_series)
                        .user_messages(&user_messages),
                );
                match result {
                    Ok(request) => {
                        wire(&request);
                        let _ = request.project();
                    }
                    Err(e) => {
                        let _ = e.to_string();
                        assert_eq!(session.len(), before, "a refused record commits nothing");
                    }
                }
            }
            Op::Answer { text, reasoning: r } => {
                let mut content = Vec::new();
                let mut provider = route.provider.to_string();
                if let Some((block, p)) = reasoning(*r, route) {
                    content.push(block);
                    provider = p;
                }
                if *text {
                    content.push(ContentBlock::text("done"));
                }
                let message = Message::new(
                    fresh("a"),
                    Role::Assistant,
                    content,
                    MessageSource::Model {
                        provider,
                        model: route.model.to_string(),
                    },
                );
                append(&session, Event::append(message));
            }
            Op::Call {
                tool,
                args,
                skip_result,
                is_error,
                reasoning: r,
            } => {
                let call_id = fresh("c");
                let mut content = Vec::new();
                let mut provider = route.provider.to_string();
                if let Some((block, p)) = reasoning(*r, route) {
                    content.push(block);
                    provider = p;
                }
                content.push(
                    ContentBlock::tool_call(
                        call_id.clone(),
                        NAMES[usize::from(*tool) % NAMES.len()],
                        arguments(*args),
                    )
                    .unwrap(),
                );
                let message = Message::new(
                    fresh("a"),
                    Role::Assistant,
                    content,
                    MessageSource::Model {
                        provider,
                        model: route.model.to_string(),
                    },
                );
                append(&session, Event::append(message));
                if !skip_result {
                    let result = Message::tool_result(fresh("t"), &call_id, "ok");
                    let result = if *is_error {
                        result.with_is_error(true)
                    } else {
                        result
                    };
                    append(&session, Event::append(result));
                }
                calls.push(call_id);
            }
            Op::StrayResult { call } => {
                let call_id = calls
                    .get(usize::from(*call))
                    .cloned()
                    .unwrap_or_else(|| "nowhere".into());
                append(
                    &session,
                    Event::append(Message::tool_result(fresh("t"), call_id, "late")),
                );
            }
            Op::Compact {
                start,
                end,
                summary,
            } => {
                let n = session.surface().len().max(1);
                let (start, end) = (usize::from(*start) % (n + 1), usize::from(*end) % (n + 1));
                let id = fresh("m");
                let message = match summary {
                    Summary::User => Message::user(id, "summary"),
                    Summary::SystemNote => Message::new(
                        id,
                        Role::System,
                        vec![ContentBlock::text("summary")],
                        MessageSource::other(json!({"kind": "compaction"})).unwrap(),
                    ),
                    Summary::Assistant => Message::assistant(
                        id,
                        "summary",
                        route.provider.to_string(),
                        route.model.to_string(),
                    ),
                };
                append(&session, Event::replace(message, start, end));
            }
            Op::Thinking(p) => {
                let policy = match p {
                    Policy::Strip => ThinkingPolicy::StripThinking,
                    Policy::DropBlock => ThinkingPolicy::DropBlock,
                    Policy::Refuse => ThinkingPolicy::Refuse,
                };
                let before = session.len();
                if let Err(e) = session.set_thinking_policy(policy) {
                    let _ = e.to_string();
                    assert_eq!(session.len(), before);
                }
            }
            Op::Restart => {
                let text = session.to_jsonl();
                session = Session::load_bytes(text.as_bytes())
                    .expect("a recorded log loads")
                    .session;
                recorder = Recorder::attach(&session);
            }
        }
    }
    let text = session.to_jsonl();
    let loaded = Session::load_bytes(text.as_bytes()).expect("a recorded log loads");
    assert_eq!(loaded.torn_tail, None);
    assert_eq!(loaded.session.to_jsonl(), text);
    assert_eq!(loaded.session.events(), session.events());
    assert_eq!(loaded.session.tool_history(), session.tool_history());
    assert_eq!(
        loaded.session.tool_history_by_value(),
        session.tool_history_by_value()
    );
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
        route_for("deepseek", "deepseek-v4-pro"),
        route_for("anthropic", "claude-opus-5"),
        route_for("anthropic", "claude-fable-5-1"),
        route_for("anthropic", "claude-fable-5-2"),
        by_reference,
    ];
    for main in 0..routes.len() {
        run(&input, &routes, main);
    }
});
