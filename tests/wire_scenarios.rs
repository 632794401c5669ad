//! Scenario goldens (issue 5): scripted agent loops recorded with the real [`Recorder`],
//! projected with their route's mode and the request's `tool_history`, serialized, and pinned
//! byte for byte in `tests/golden/scenarios/<route>/<scenario>/step-<n>.json|.headers`.
//!
//! Each scenario runs in its own session once per route it is listed for: no mode
//! (`deepseek-v4-pro`), in-history (`claude-opus-5`) and addition-only (`deepseek-flash`).
//! The route-switch scenarios change route mid-session; each step's files go under the route
//! that step was sent on.
//!
//! Beyond the bytes, every step is checked against the properties of reference §5 and §7 in
//! [`check_invariants`], and summarized in one line that the scenario's table pins, worked
//! out by hand from the spec:
//!
//! `tools | system | messages | flags`, where
//! - tools are the wire declarations in order: `*` = `defer_loading`, `~` = the deferred
//!   placeholder, a `2` suffix = the changed definition of `fetch`;
//! - system is the top-level `system` (OpenAI chat: the leading system message), `-` if none;
//! - messages are the wire messages: `U` user, `A` assistant, `S` system, `T` tool (OpenAI
//!   chat), with their blocks in brackets unless they are one text block: `t` text, `c` tool
//!   call, `r` tool result, `+x` / `-x` a tool addition / removal, a quoted string a prompt;
//! - flags: `series` (the request opened a request or declaration series), `keeps` (its
//!   cached prefix extends the previous request *of this route* in this session: same
//!   immediately available tools, same deferred section, same `system`, and that request's
//!   messages as its first messages), `beta` (the tool-change beta header).
//!
//! `UPDATE_GOLDEN=1 cargo test --test wire_scenarios` rewrites the golden files (then review
//! the diff); a summary mismatch fails before any file is written.

mod support;

use mektpoy::{
    Config, ContentBlock, Event, Message, Request, Route, Session, ToolSchema, WireRequest,
    agent::{Recorder, Step},
    project::{ProjectionPath, project_tool_updates},
    route::{ToolUpdateMode, WireApi},
    route_for,
    vocab::{DEFERRED_PLACEHOLDER_NAME, MessageSource, Role},
    wire::serialize,
};
use serde_json::{Value, json};
use support::golden::assert_golden;

use Lane::{AdditionOnly, InHistory, NoMode, OpenAi};

const P1: &str = "Be terse.";
const P2: &str = "Be terse. Cite files.";
const TOOL_CHANGE_BETA: &str = "mid-conversation-tool-changes-2026-07-01";

// ---------------------------------------------------------------------------------------
// Routes

/// A route of the built-in catalog, with the config a loop on it logs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Lane {
    /// `deepseek-v4-pro`: no mode, prompts not in history.
    NoMode,
    /// `claude-opus-5` by reference (as Bedrock and Google Cloud serve it: the catalog's
    /// Claude API entry takes definitions by value): in-history, prompts in history,
    /// `beta_always`, the placeholder.
    InHistory,
    /// `deepseek-flash`: addition-only, prompts in history.
    AdditionOnly,
    /// The generic OpenAI-compatible chat route (unknown provider `openai`): no mode.
    OpenAi,
}

impl Lane {
    fn provider_model(self) -> (&'static str, &'static str) {
        match self {
            NoMode => ("deepseek", "deepseek-v4-pro"),
            InHistory => ("anthropic", "claude-opus-5"),
            AdditionOnly => ("deepseek", "deepseek-flash"),
            // `openai` itself resolves to the Responses API (decision 124): the chat lane names the
            // generic OpenAI-compatible route.
            OpenAi => ("openai-compatible", "gpt-4.1-mini"),
        }
    }

    /// The golden directory: the catalog entry's model, or the generic chat route's provider.
    fn dir(self) -> &'static str {
        match self {
            OpenAi => "openai-compatible",
            _ => self.provider_model().1,
        }
    }

    fn config(self) -> Config {
        let (provider, model) = self.provider_model();
        Config::new(provider, model)
            .with("max_tokens", json!(1024))
            .unwrap()
    }

    /// The catalog's route, checked to have the capabilities this lane stands for.
    fn route(self) -> Route {
        let (provider, model) = self.provider_model();
        let mut r = route_for(provider, model);
        if self == InHistory {
            r = r
                .into_builder()
                .inline_definitions(false)
                .deferred_placeholder(true)
                .build()
                .unwrap();
        }
        let shape = (
            r.api,
            r.tool_update(),
            r.system_prompt_in_history(),
            r.beta_always(),
            r.deferred_placeholder(),
        );
        let expected = match self {
            NoMode => (WireApi::Messages, None, false, false, false),
            InHistory => (
                WireApi::Messages,
                Some(ToolUpdateMode::InHistory),
                true,
                true,
                true,
            ),
            AdditionOnly => (
                WireApi::Messages,
                Some(ToolUpdateMode::AdditionOnly),
                true,
                false,
                false,
            ),
            OpenAi => (WireApi::OpenAiChat, None, false, false, false),
        };
        assert_eq!(shape, expected, "catalog route for {self:?}");
        r
    }
}

// ---------------------------------------------------------------------------------------
// Scripts

/// What the model answers after a step's request.
#[derive(Clone, Copy, Debug)]
enum Reply {
    Text(&'static str),
    /// An assistant message with a text and one tool call, then the tool's result.
    Call {
        tool: &'static str,
        arguments: &'static str,
        result: &'static str,
    },
}

/// One step of a scripted loop.
#[derive(Clone, Copy, Debug)]
struct Turn {
    /// From this step on the loop sends to another route (a new loop instance: a new
    /// recorder attached to the same session).
    switch_to: Option<Lane>,
    /// A compaction replaces surface nodes `start..=end` with a summary before the step.
    compaction: Option<(usize, usize)>,
    prompt: &'static str,
    tools: &'static [&'static str],
    /// The user's message; `None` continues after a tool result.
    user: Option<&'static str>,
    reply: Reply,
}

/// A step opened by a user message, answered with "Done.".
const fn ask(prompt: &'static str, tools: &'static [&'static str], user: &'static str) -> Turn {
    Turn {
        switch_to: None,
        compaction: None,
        prompt,
        tools,
        user: Some(user),
        reply: Reply::Text("Done."),
    }
}

/// A step that continues after a tool result, without a user message.
const fn resume(prompt: &'static str, tools: &'static [&'static str]) -> Turn {
    Turn {
        user: None,
        ..ask(prompt, tools, "")
    }
}

impl Turn {
    const fn replying(self, text: &'static str) -> Turn {
        Turn {
            reply: Reply::Text(text),
            ..self
        }
    }

    const fn calling(
        self,
        tool: &'static str,
        arguments: &'static str,
        result: &'static str,
    ) -> Turn {
        Turn {
            reply: Reply::Call {
                tool,
                arguments,
                result,
            },
            ..self
        }
    }

    const fn on(self, lane: Lane) -> Turn {
        Turn {
            switch_to: Some(lane),
            ..self
        }
    }

    const fn after_compaction(self, start: usize, end: usize) -> Turn {
        Turn {
            compaction: Some((start, end)),
            ..self
        }
    }
}

fn schema(name: &str, description: &str, parameters: Value) -> ToolSchema {
    support::tool_from(json!({
        "name": name,
        "description": description,
        "parameters": parameters,
    }))
}

/// The tools scripts name: `read`, `grep`, `fetch`, and `fetch2` (`fetch` with another
/// definition).
fn scripted_tool(name: &str) -> ToolSchema {
    let string_param =
        |p: &str| json!({"type": "object", "properties": {p: {"type": "string"}}, "required": [p]});
    match name {
        "read" => schema("read", "Read a file.", string_param("path")),
        "grep" => schema(
            "grep",
            "Search files for a pattern.",
            string_param("pattern"),
        ),
        "fetch" => schema("fetch", "Fetch a URL.", string_param("url")),
        "fetch2" => schema(
            "fetch",
            "Fetch a URL (v2).",
            json!({
                "type": "object",
                "properties": {"url": {"type": "string"}, "timeout": {"type": "integer"}},
                "required": ["url"]
            }),
        ),
        other => panic!("no tool {other}"),
    }
}

// ---------------------------------------------------------------------------------------
// The loop

/// One request as it went out.
struct Sent {
    lane: Lane,
    turn: Turn,
    request: Request,
    path: ProjectionPath,
    wire: WireRequest,
    body: Value,
}

/// Runs `turns` in a new session, starting on `start`: per step an optional compaction, then
/// `record` (the user message, if any, goes into the batch), projection with the route's mode
/// and the request's snapshot, serialization, and finally the model's reply.
fn run(id: &str, start: Lane, turns: &[Turn]) -> Vec<Sent> {
    let session = Session::new(id);
    let mut lane = start;
    let mut recorder = Recorder::attach(&session);
    let (mut turn_no, mut step_no) = (0, 0);
    let mut sent = Vec::with_capacity(turns.len());
    for (i, turn) in turns.iter().enumerate() {
        let n = i + 1;
        if let Some(next) = turn.switch_to {
            lane = next;
            recorder = Recorder::attach(&session);
        }
        if let Some((start, end)) = turn.compaction {
            let summary = Message::user(format!("summary-{n}"), "Summary: the user said hello.");
            session
                .append(Event::replace(summary, start, end))
                .expect("compaction");
        }
        let (route, config) = (lane.route(), lane.config());
        let tools: Vec<ToolSchema> = turn.tools.iter().map(|t| scripted_tool(t)).collect();
        let user: Vec<Message> = turn
            .user
            .map(|text| Message::user(format!("user-{n}"), text))
            .into_iter()
            .collect();
        if user.is_empty() {
            step_no += 1;
        } else {
            (turn_no, step_no) = (turn_no + 1, 0);
        }
        let request = recorder
            .record(
                &session,
                Step::new(&config, turn.prompt, &tools, &route)
                    .at(turn_no, step_no, 0)
                    .user_messages(&user),
            )
            .unwrap_or_else(|e| panic!("{id} step {n}: record: {e}"));
        let projected = project_tool_updates(
            &request.messages,
            Some(&request.tools),
            route.tool_update(),
            Some(&request.tool_history),
        );
        let path = projected.path;
        let wire = serialize(&request.config, &projected, &route)
            .unwrap_or_else(|e| panic!("{id} step {n}: serialize: {e}"));
        let body = serde_json::from_str(wire.body()).expect("the body is JSON");
        reply(&session, &config, n, turn.reply);
        sent.push(Sent {
            lane,
            turn: *turn,
            request,
            path,
            wire,
            body,
        });
    }
    sent
}

fn reply(session: &Session, config: &Config, n: usize, reply: Reply) {
    let source = MessageSource::Model {
        provider: config.provider.clone(),
        model: config.model.clone(),
    };
    let assistant = |content| {
        Message::new(
            format!("assistant-{n}"),
            Role::Assistant,
            content,
            source.clone(),
        )
    };
    match reply {
        Reply::Text(text) => {
            session
                .append(Event::append(assistant(vec![ContentBlock::text(text)])))
                .unwrap();
        }
        Reply::Call {
            tool,
            arguments,
            result,
        } => {
            let call_id = format!("call-{n}");
            let call = ContentBlock::tool_call(call_id.clone(), tool, arguments).unwrap();
            let message = assistant(vec![ContentBlock::text("Let me look."), call]);
            session.append(Event::append(message)).unwrap();
            let result = Message::tool_result(format!("result-{n}"), call_id, result);
            session.append(Event::append(result)).unwrap();
        }
    }
}

/// Runs `turns` once per row of `expected` (the lane the loop starts on, then one summary per
/// step) and checks, in this order: the invariants of every step, the summaries, the golden
/// files.
#[track_caller]
fn scenario(name: &str, turns: &[Turn], expected: &[(Lane, &[&str])]) {
    for (start, summaries) in expected {
        let sent = run(name, *start, turns);
        let mut actual = Vec::with_capacity(sent.len());
        for (i, s) in sent.iter().enumerate() {
            let previous = sent[..i].iter().rev().find(|p| p.lane == s.lane);
            let label = format!("{name} step {} on {:?}", i + 1, s.lane);
            check_invariants(&label, s, previous);
            actual.push(summary(s, previous));
        }
        assert_eq!(actual, *summaries, "{name}, starting on {start:?}");
        for (i, s) in sent.iter().enumerate() {
            assert_golden(
                &format!("scenarios/{}/{name}/step-{}", s.lane.dir(), i + 1),
                &s.wire,
            );
        }
    }
}

// ---------------------------------------------------------------------------------------
// Reading a wire body

fn is_openai(s: &Sent) -> bool {
    s.lane == OpenAi
}

fn wire_tools(s: &Sent) -> Vec<&Value> {
    s.body["tools"]
        .as_array()
        .map_or(Vec::new(), |t| t.iter().collect())
}

fn tool_name(s: &Sent, t: &Value) -> String {
    let name = if is_openai(s) {
        &t["function"]["name"]
    } else {
        &t["name"]
    };
    name.as_str().unwrap().to_owned()
}

fn is_deferred(t: &Value) -> bool {
    t.get("defer_loading") == Some(&Value::Bool(true))
}

/// The top-level `system` (OpenAI chat: the leading system message's content).
fn system(s: &Sent) -> Option<&str> {
    if is_openai(s) {
        let first = s.body["messages"].get(0)?;
        (first["role"] == "system").then(|| first["content"].as_str().unwrap())
    } else {
        s.body.get("system").map(|v| v.as_str().unwrap())
    }
}

/// The wire messages, without OpenAI chat's leading system message.
fn messages(s: &Sent) -> &[Value] {
    let all = s.body["messages"].as_array().unwrap();
    match all.first() {
        Some(first) if is_openai(s) && first["role"] == "system" => &all[1..],
        _ => all,
    }
}

/// The blocks of a Messages API wire message (OpenAI chat: none).
fn blocks(message: &Value) -> &[Value] {
    message["content"].as_array().map_or(&[], Vec::as_slice)
}

fn is_tool_change(block: &Value) -> bool {
    matches!(
        block["type"].as_str(),
        Some("tool_addition" | "tool_removal")
    )
}

/// Whether `cur`'s cached prefix extends `prev`'s (reference §9 segments: immediately available
/// tools, the deferred section where the route has one, `system`, messages).
fn keeps_prefix(prev: &Sent, cur: &Sent) -> bool {
    let immediate = |s: &Sent| -> Vec<Value> {
        wire_tools(s)
            .into_iter()
            .filter(|t| !is_deferred(t))
            .cloned()
            .collect()
    };
    let section = |s: &Sent| wire_tools(s).into_iter().any(is_deferred);
    let route = cur.lane.route();
    immediate(prev) == immediate(cur)
        && (route.deferred_section_bytes() == 0 || section(prev) == section(cur))
        && system(prev) == system(cur)
        && messages(cur).starts_with(messages(prev))
}

fn summary(s: &Sent, previous: Option<&Sent>) -> String {
    let tools: Vec<String> = wire_tools(s)
        .into_iter()
        .map(|t| {
            let mut name = tool_name(s, t);
            if name == DEFERRED_PLACEHOLDER_NAME {
                return "~".into();
            }
            let description = if is_openai(s) {
                &t["function"]["description"]
            } else {
                &t["description"]
            };
            if description.as_str().unwrap().contains("(v2)") {
                name.push('2');
            }
            if is_deferred(t) {
                name.push('*');
            }
            name
        })
        .collect();
    let messages: Vec<String> = messages(s).iter().map(describe).collect();
    let mut flags = String::new();
    if s.request.starts_series {
        flags.push_str(" series");
    }
    if previous.is_some_and(|p| keeps_prefix(p, s)) {
        flags.push_str(" keeps");
    }
    if s.wire.header("anthropic-beta").is_some() {
        flags.push_str(" beta");
    }
    format!(
        "{} | {} | {} |{flags}",
        tools.join(" "),
        system(s).unwrap_or("-"),
        messages.join(" ")
    )
}

/// `U`, `A(t c)`, `S("prompt" +grep)`, ... (see the module doc).
fn describe(message: &Value) -> String {
    let role = message["role"].as_str().unwrap();
    let letter = match role {
        "user" => "U",
        "assistant" => "A",
        "system" => "S",
        "tool" => "T",
        other => panic!("role {other}"),
    };
    let mut parts: Vec<String> = match &message["content"] {
        Value::Array(blocks) => blocks
            .iter()
            .map(|b| {
                let name = || b["tool"]["name"].as_str().unwrap();
                match b["type"].as_str().unwrap() {
                    "text" if role == "system" => format!("{:?}", b["text"].as_str().unwrap()),
                    "text" => "t".into(),
                    "tool_use" => "c".into(),
                    "tool_result" => "r".into(),
                    "thinking" => "th".into(),
                    "tool_addition" => format!("+{}", name()),
                    "tool_removal" => format!("-{}", name()),
                    other => panic!("block {other}"),
                }
            })
            .collect(),
        Value::String(_) => vec!["t".into()],
        _ => Vec::new(),
    };
    if message.get("tool_calls").is_some() {
        parts.push("c".into());
    }
    if parts == ["t"] && role != "system" {
        letter.into()
    } else {
        format!("{letter}({})", parts.join(" "))
    }
}

// ---------------------------------------------------------------------------------------
// Invariants

/// The properties of reference §5 and §7 every step must have, whatever the scenario.
#[track_caller]
fn check_invariants(label: &str, s: &Sent, previous: Option<&Sent>) {
    let route = s.lane.route();
    let tools = wire_tools(s);
    let names: Vec<String> = tools.iter().map(|t| tool_name(s, t)).collect();
    let effective: Vec<&str> = s.request.tools.iter().map(ToolSchema::name).collect();
    let all_blocks = || messages(s).iter().flat_map(blocks);

    // §7 headers: the beta header on every request of a `beta_always` route, otherwise
    // exactly when a serialized message holds a tool-change block.
    let header_names: Vec<&str> = s.wire.headers().iter().map(|(n, _)| n.as_str()).collect();
    if is_openai(s) {
        assert_eq!(header_names, ["content-type"], "{label}");
    } else {
        let beta = route.beta_always() || all_blocks().any(is_tool_change);
        let mut expected = vec!["content-type", "anthropic-version"];
        if beta {
            expected.push("anthropic-beta");
        }
        assert_eq!(header_names, expected, "{label}: headers");
        assert_eq!(s.wire.header("anthropic-version"), Some("2023-06-01"));
        if beta {
            assert_eq!(s.wire.header("anthropic-beta"), Some(TOOL_CHANGE_BETA));
        }
    }

    // §7 placeholder: appended last, deferred, on a mode route that asks for it and has an
    // immediately available tool; nowhere else.
    let real: Vec<&&Value> = tools
        .iter()
        .filter(|t| tool_name(s, t) != DEFERRED_PLACEHOLDER_NAME)
        .collect();
    let placeholder = route.deferred_placeholder()
        && route.tool_update().is_some()
        && real.iter().any(|t| !is_deferred(t));
    assert_eq!(
        names.iter().position(|n| n == DEFERRED_PLACEHOLDER_NAME),
        placeholder.then(|| names.len() - 1),
        "{label}: placeholder"
    );
    if placeholder {
        assert!(is_deferred(tools[names.len() - 1]), "{label}");
    }

    // §7 flush: tool changes only inside `system` messages; each system message follows a
    // user / tool-result turn and is followed by an assistant message or the end.
    let wire_messages = messages(s);
    for (i, m) in wire_messages.iter().enumerate() {
        if m["role"] == "system" {
            assert!(
                i > 0 && wire_messages[i - 1]["role"] == "user",
                "{label}: a flush follows a user turn"
            );
            if let Some(next) = wire_messages.get(i + 1) {
                assert_eq!(next["role"], "assistant", "{label}: one flush message");
            }
        } else {
            assert!(
                !blocks(m).iter().any(is_tool_change),
                "{label}: misplaced change"
            );
        }
    }

    match route.tool_update() {
        // §5 rule 1: no developer content, nothing deferred, the effective tools as
        // declarations; only the latest prompt is sent, as `system`.
        None => {
            assert_eq!(s.path, ProjectionPath::NoMode, "{label}");
            assert!(
                wire_messages.iter().all(|m| m["role"] != "system"),
                "{label}: no system message on a no-mode route"
            );
            assert!(!all_blocks().any(is_tool_change), "{label}");
            assert!(!tools.iter().any(|t| is_deferred(t)), "{label}");
            assert_eq!(names, effective, "{label}: declarations");
            assert_eq!(system(s), Some(s.turn.prompt), "{label}: latest prompt");
        }
        Some(mode) => {
            assert_eq!(
                s.path,
                ProjectionPath::Main,
                "{label}: every scenario stays on main"
            );
            // §5 rule 4: the snapshot's baseline first, as declared there; every other
            // declaration is an addition, deferred.
            let baseline = s.request.tool_history.tools();
            for t in &real {
                let name = tool_name(s, t);
                let in_baseline = baseline.iter().find(|b| b.name() == name);
                let deferred = in_baseline.is_none_or(ToolSchema::defer_loading);
                assert_eq!(is_deferred(t), deferred, "{label}: `{name}` deferred?");
            }
            // Every effective tool is declared.
            for name in &effective {
                assert!(
                    names.iter().any(|n| n == name),
                    "{label}: `{name}` declared"
                );
            }
            if mode == ToolUpdateMode::AdditionOnly {
                assert!(
                    real.iter()
                        .all(|t| effective.contains(&tool_name(s, t).as_str())),
                    "{label}: addition-only declares only effective tools"
                );
                assert!(
                    !all_blocks().any(|b| b["type"] == "tool_removal"),
                    "{label}: addition-only sends no removal"
                );
            }
            // §5 "what this means for the cache": on in-history, when no series starts the
            // request extends the previous one's prefix.
            if mode == ToolUpdateMode::InHistory
                && !s.request.starts_series
                && let Some(prev) = previous
            {
                assert!(
                    keeps_prefix(prev, s),
                    "{label}: in-history keeps the prefix"
                );
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Scenarios

#[test]
fn first_request() {
    scenario(
        "first-request",
        &[ask(P1, &["read", "grep"], "Hello.")],
        &[
            (NoMode, &["read grep | Be terse. | U | series"]),
            (InHistory, &["read grep ~ | Be terse. | U | series beta"]),
            (AdditionOnly, &["read grep | Be terse. | U | series"]),
        ],
    );
}

/// A tool call and its result, then `grep` is added before the continuation step.
#[test]
fn addition() {
    scenario(
        "addition",
        &[
            ask(P1, &["read"], "Find the TODOs.").calling(
                "read",
                r#"{"path":"TODO.md"}"#,
                "- add grep",
            ),
            resume(P1, &["read", "grep"]).replying("One TODO: add grep."),
            ask(P1, &["read", "grep"], "Search for FIXME too."),
        ],
        &[
            (
                NoMode,
                &[
                    "read | Be terse. | U | series",
                    "read grep | Be terse. | U A(t c) U(r) |",
                    "read grep | Be terse. | U A(t c) U(r) A U | keeps",
                ],
            ),
            (
                InHistory,
                &[
                    "read ~ | Be terse. | U | series beta",
                    "read grep* ~ | Be terse. | U A(t c) U(r) S(+grep) | keeps beta",
                    "read grep* ~ | Be terse. | U A(t c) U(r) S(+grep) A U | keeps beta",
                ],
            ),
            (
                AdditionOnly,
                &[
                    "read | Be terse. | U | series",
                    "read grep* | Be terse. | U A(t c) U(r) S(+grep) | keeps beta",
                    "read grep* | Be terse. | U A(t c) U(r) S(+grep) A U | keeps beta",
                ],
            ),
        ],
    );
}

#[test]
fn removal() {
    scenario(
        "removal",
        &[
            ask(P1, &["read", "grep"], "Hello."),
            ask(P1, &["read"], "Read the README."),
            ask(P1, &["read"], "Thanks."),
        ],
        &[
            (
                NoMode,
                &[
                    "read grep | Be terse. | U | series",
                    "read | Be terse. | U A U |",
                    "read | Be terse. | U A U A U | keeps",
                ],
            ),
            (
                InHistory,
                &[
                    "read grep ~ | Be terse. | U | series beta",
                    "read grep ~ | Be terse. | U A U S(-grep) | keeps beta",
                    "read grep ~ | Be terse. | U A U S(-grep) A U | keeps beta",
                ],
            ),
            (
                AdditionOnly,
                &[
                    "read grep | Be terse. | U | series",
                    "read | Be terse. | U A U |",
                    "read | Be terse. | U A U A U | keeps",
                ],
            ),
        ],
    );
}

/// `grep` is added, removed, and restored with the same definition: the declaration series
/// continues (reference §3).
#[test]
fn unchanged_restore() {
    scenario(
        "unchanged-restore",
        &[
            ask(P1, &["read"], "Hello."),
            ask(P1, &["read", "grep"], "Add grep."),
            ask(P1, &["read"], "Drop grep."),
            ask(P1, &["read", "grep"], "Grep is back."),
        ],
        &[
            (
                NoMode,
                &[
                    "read | Be terse. | U | series",
                    "read grep | Be terse. | U A U |",
                    "read | Be terse. | U A U A U |",
                    "read grep | Be terse. | U A U A U A U |",
                ],
            ),
            (
                InHistory,
                &[
                    "read ~ | Be terse. | U | series beta",
                    "read grep* ~ | Be terse. | U A U S(+grep) | keeps beta",
                    "read grep* ~ | Be terse. | U A U S(+grep) A U S(-grep) | keeps beta",
                    "read grep* ~ | Be terse. | U A U S(+grep) A U S(-grep) A U S(+grep) | keeps beta",
                ],
            ),
            (
                AdditionOnly,
                // Leaving drops grep's declaration and its addition; returning restores both.
                &[
                    "read | Be terse. | U | series",
                    "read grep* | Be terse. | U A U S(+grep) | keeps beta",
                    "read | Be terse. | U A U A U |",
                    "read grep* | Be terse. | U A U S(+grep) A U A U | beta",
                ],
            ),
        ],
    );
}

/// `fetch` is added in history, removed, and comes back with another definition: a new
/// declaration series (reference §3 step 2), which drops the earlier developer messages.
#[test]
fn changed_restore() {
    scenario(
        "changed-restore",
        &[
            ask(P1, &["read"], "Hello."),
            ask(P1, &["read", "fetch"], "Add fetch."),
            ask(P1, &["read"], "Drop fetch."),
            ask(P1, &["read", "fetch2"], "Fetch is back, changed."),
            ask(P1, &["read", "fetch2"], "Thanks."),
        ],
        &[
            (
                NoMode,
                &[
                    "read | Be terse. | U | series",
                    "read fetch | Be terse. | U A U |",
                    "read | Be terse. | U A U A U |",
                    "read fetch2 | Be terse. | U A U A U A U | series",
                    "read fetch2 | Be terse. | U A U A U A U A U | keeps",
                ],
            ),
            (
                InHistory,
                &[
                    "read ~ | Be terse. | U | series beta",
                    "read fetch* ~ | Be terse. | U A U S(+fetch) | keeps beta",
                    "read fetch* ~ | Be terse. | U A U S(+fetch) A U S(-fetch) | keeps beta",
                    "read fetch2 ~ | Be terse. | U A U A U A U | series beta",
                    "read fetch2 ~ | Be terse. | U A U A U A U A U | keeps beta",
                ],
            ),
            (
                AdditionOnly,
                &[
                    "read | Be terse. | U | series",
                    "read fetch* | Be terse. | U A U S(+fetch) | keeps beta",
                    "read | Be terse. | U A U A U |",
                    "read fetch2 | Be terse. | U A U A U A U | series",
                    "read fetch2 | Be terse. | U A U A U A U A U | keeps",
                ],
            ),
        ],
    );
}

/// The prompt changes: appended in history where the route takes it, else node 0 is
/// replaced (a new request series).
#[test]
fn prompt_update() {
    scenario(
        "prompt-update",
        &[
            ask(P1, &["read"], "Hello."),
            ask(P2, &["read"], "Cite the files you read."),
            ask(P2, &["read"], "Thanks."),
        ],
        &[
            (
                NoMode,
                &[
                    "read | Be terse. | U | series",
                    "read | Be terse. Cite files. | U A U | series",
                    "read | Be terse. Cite files. | U A U A U | keeps",
                ],
            ),
            (
                InHistory,
                &[
                    "read ~ | Be terse. | U | series beta",
                    r#"read ~ | Be terse. | U A U S("Be terse. Cite files.") | keeps beta"#,
                    r#"read ~ | Be terse. | U A U S("Be terse. Cite files.") A U | keeps beta"#,
                ],
            ),
            (
                AdditionOnly,
                &[
                    "read | Be terse. | U | series",
                    r#"read | Be terse. | U A U S("Be terse. Cite files.") | keeps"#,
                    r#"read | Be terse. | U A U S("Be terse. Cite files.") A U | keeps"#,
                ],
            ),
        ],
    );
}

/// A prompt update and an addition in one step: one flush holds both, prompt first
/// (reference example L9′, W7); on the no-mode route the tool change makes the step a new series.
#[test]
fn prompt_update_with_addition() {
    scenario(
        "prompt-update-with-addition",
        &[
            ask(P1, &["read"], "Hello."),
            ask(P2, &["read", "grep"], "Use grep and cite files."),
            ask(P2, &["read", "grep"], "Thanks."),
        ],
        &[
            (
                NoMode,
                &[
                    "read | Be terse. | U | series",
                    "read grep | Be terse. Cite files. | U A U | series",
                    "read grep | Be terse. Cite files. | U A U A U | keeps",
                ],
            ),
            (
                InHistory,
                &[
                    "read ~ | Be terse. | U | series beta",
                    r#"read grep* ~ | Be terse. | U A U S("Be terse. Cite files." +grep) | keeps beta"#,
                    r#"read grep* ~ | Be terse. | U A U S("Be terse. Cite files." +grep) A U | keeps beta"#,
                ],
            ),
            (
                AdditionOnly,
                &[
                    "read | Be terse. | U | series",
                    r#"read grep* | Be terse. | U A U S("Be terse. Cite files." +grep) | keeps beta"#,
                    r#"read grep* | Be terse. | U A U S("Be terse. Cite files." +grep) A U | keeps beta"#,
                ],
            ),
        ],
    );
}

/// Compaction replaces the first exchange (surface nodes 1..=2) with a summary between steps
/// 2 and 3: a new request series; the developer message of the old series is still on the
/// surface but no longer sent, and `grep` becomes an immediately available declaration.
#[test]
fn compaction() {
    scenario(
        "compaction",
        &[
            ask(P1, &["read"], "Hello.").replying("Hi."),
            ask(P1, &["read", "grep"], "Add grep.").replying("Added."),
            ask(P1, &["read", "grep"], "Continue.").after_compaction(1, 2),
            ask(P1, &["read", "grep"], "Thanks."),
        ],
        &[
            (
                NoMode,
                &[
                    "read | Be terse. | U | series",
                    "read grep | Be terse. | U A U |",
                    "read grep | Be terse. | U(t t) A U | series",
                    "read grep | Be terse. | U(t t) A U A U | keeps",
                ],
            ),
            (
                InHistory,
                &[
                    "read ~ | Be terse. | U | series beta",
                    "read grep* ~ | Be terse. | U A U S(+grep) | keeps beta",
                    "read grep ~ | Be terse. | U(t t) A U | series beta",
                    "read grep ~ | Be terse. | U(t t) A U A U | keeps beta",
                ],
            ),
            (
                AdditionOnly,
                &[
                    "read | Be terse. | U | series",
                    "read grep* | Be terse. | U A U S(+grep) | keeps beta",
                    "read grep | Be terse. | U(t t) A U | series",
                    "read grep | Be terse. | U(t t) A U A U | keeps",
                ],
            ),
        ],
    );
}

/// The same compaction covering the prompt (surface nodes 0..=2): no system node is live,
/// so the recorder appends the prompt again (reference §4.1), after the remaining messages. On the
/// routes with prompts in history it is no longer the first surface node, so there is no
/// top-level `system` from then on: the prompt is flushed as a system message (reference example W8).
#[test]
fn compaction_over_prompt() {
    scenario(
        "compaction-over-prompt",
        &[
            ask(P1, &["read"], "Hello.").replying("Hi."),
            ask(P1, &["read", "grep"], "Add grep.").replying("Added."),
            ask(P1, &["read", "grep"], "Continue.").after_compaction(0, 2),
            ask(P1, &["read", "grep"], "Thanks."),
        ],
        &[
            (
                NoMode,
                &[
                    "read | Be terse. | U | series",
                    "read grep | Be terse. | U A U |",
                    "read grep | Be terse. | U(t t) A U | series",
                    "read grep | Be terse. | U(t t) A U A U | keeps",
                ],
            ),
            (
                InHistory,
                &[
                    "read ~ | Be terse. | U | series beta",
                    "read grep* ~ | Be terse. | U A U S(+grep) | keeps beta",
                    r#"read grep ~ | - | U(t t) A U S("Be terse.") | series beta"#,
                    r#"read grep ~ | - | U(t t) A U S("Be terse.") A U | keeps beta"#,
                ],
            ),
            (
                AdditionOnly,
                &[
                    "read | Be terse. | U | series",
                    "read grep* | Be terse. | U A U S(+grep) | keeps beta",
                    r#"read grep | - | U(t t) A U S("Be terse.") | series"#,
                    r#"read grep | - | U(t t) A U S("Be terse.") A U | keeps"#,
                ],
            ),
        ],
    );
}

/// One session: two steps on `deepseek-flash` (a tool call; then, after its result, a prompt
/// update with an addition), one on `deepseek-v4-pro`, one on OpenAI-compatible chat, and
/// back to `deepseek-flash`, whose request extends its step-2 request.
#[test]
fn route_switch() {
    scenario(
        "route-switch",
        &[
            ask(P1, &["read"], "Find the TODOs.").calling(
                "read",
                r#"{"path":"TODO.md"}"#,
                "- add grep",
            ),
            resume(P2, &["read", "grep"]).replying("One TODO: add grep."),
            ask(P2, &["read", "grep"], "Switching to the pro model.").on(NoMode),
            ask(P2, &["read", "grep"], "Now a chat endpoint.").on(OpenAi),
            ask(P2, &["read", "grep"], "Back to flash.").on(AdditionOnly),
        ],
        &[(
            AdditionOnly,
            &[
                "read | Be terse. | U | series",
                r#"read grep* | Be terse. | U A(t c) U(r) S("Be terse. Cite files." +grep) | keeps beta"#,
                "read grep | Be terse. Cite files. | U A(t c) U(r) A U |",
                "read grep | Be terse. Cite files. | U A(t c) T A U A U |",
                r#"read grep* | Be terse. | U A(t c) U(r) S("Be terse. Cite files." +grep) A U A U A U | keeps beta"#,
            ],
        )],
    );
}

/// The in-history route with a prompt update and a removal, a step on `deepseek-v4-pro`, and
/// back: the removed tool stays declared on the in-history route only.
#[test]
fn route_switch_in_history() {
    scenario(
        "route-switch-in-history",
        &[
            ask(P1, &["read", "grep"], "Hello."),
            ask(P2, &["read"], "Drop grep and cite files."),
            ask(P2, &["read"], "Switching to deepseek.").on(NoMode),
            ask(P2, &["read"], "Back to claude.").on(InHistory),
        ],
        &[(
            InHistory,
            &[
                "read grep ~ | Be terse. | U | series beta",
                r#"read grep ~ | Be terse. | U A U S("Be terse. Cite files." -grep) | keeps beta"#,
                "read | Be terse. Cite files. | U A U A U |",
                r#"read grep ~ | Be terse. | U A U S("Be terse. Cite files." -grep) A U A U | keeps beta"#,
            ],
        )],
    );
}
