//! Live test against the real DeepSeek API (issue 6): the first request after a native tool
//! addition keeps the earlier system, messages and tool prefix byte-identical and is read from
//! the provider's prefix cache; a removal leaves the removed tool unavailable.
//!
//! Ignored by default (it needs a key and the network). Run it with:
//!
//! ```sh
//! DEEPSEEK_API_KEY=sk-... cargo test --test live_deepseek -- --ignored --nocapture --test-threads=1
//! ```
//!
//! Optional: `DEEPSEEK_BASE_URL` (the Messages endpoint, default
//! `https://api.deepseek.com/anthropic/v1/messages`), `DEEPSEEK_MODEL` (default
//! `deepseek-flash`), `DEEPSEEK_CACHE_WAIT_SECS` (pause before the request that must read the
//! cache, default 2). Without `DEEPSEEK_API_KEY` each test prints why it skipped and passes.
//! See `docs/live-test.md`.
//!
//! The route's capabilities are the catalog's `deepseek-flash` entry (addition-only, prompts in
//! history) whatever `DEEPSEEK_MODEL` says: this test measures that entry's claim. Every
//! request is sent once — no retries, no redirects — and each run writes a unique user history,
//! so a cache hit on the system prompt and tools alone (shared by every run) cannot satisfy the
//! cache assertion.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use mektpoy::{
    AgentLoop, Config, ContentBlock, Message, Request, Session, ToolSchema, WireRequest,
    project::validate_tool_call,
    route_for,
    vocab::{MessageSource, Role},
};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};

mod support;

const DEFAULT_URL: &str = "https://api.deepseek.com/anthropic/v1/messages";
const DEFAULT_MODEL: &str = "deepseek-flash";

/// Tokens the second request may read from the cache short of the whole first request: the
/// provider caches in blocks, so the tail of the first request may be left out.
const CACHE_SLACK_TOKENS: u64 = 256;

/// The live endpoint, from the environment.
struct Live {
    url: String,
    key: String,
    model: String,
    wait: Duration,
    agent: ureq::Agent,
}

impl Live {
    /// `None` (after saying why) when `DEEPSEEK_API_KEY` is unset or empty.
    fn from_env(test: &str) -> Option<Live> {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        let Some(key) = var("DEEPSEEK_API_KEY") else {
            eprintln!("{test}: skipped, DEEPSEEK_API_KEY is not set (see docs/live-test.md)");
            return None;
        };
        let wait = var("DEEPSEEK_CACHE_WAIT_SECS").map_or(2, |s| {
            s.parse()
                .expect("DEEPSEEK_CACHE_WAIT_SECS is a number of seconds")
        });
        Some(Live {
            url: var("DEEPSEEK_BASE_URL").unwrap_or_else(|| DEFAULT_URL.to_owned()),
            key,
            model: var("DEEPSEEK_MODEL").unwrap_or_else(|| DEFAULT_MODEL.to_owned()),
            wait: Duration::from_secs(wait),
            // One attempt per request: ureq never retries; no redirects either.
            agent: ureq::Agent::config_builder()
                .http_status_as_error(false)
                .max_redirects(0)
                .timeout_global(Some(Duration::from_secs(180)))
                .build()
                .into(),
        })
    }

    /// Sends one request; panics with the vendor's answer unless it is a 200.
    fn send(&self, label: &str, wire: &WireRequest) -> Value {
        let mut call = self.agent.post(&self.url).header("x-api-key", &self.key);
        for (name, value) in wire.headers() {
            call = call.header(name, value);
        }
        let mut response = call
            .send(wire.body())
            .unwrap_or_else(|e| panic!("{label}: transport error: {e}"));
        let status = response.status().as_u16();
        let text = response
            .body_mut()
            .read_to_string()
            .unwrap_or_else(|e| panic!("{label}: reading the answer: {e}"));
        assert_eq!(status, 200, "{label}: the endpoint refused: {text}");
        let answer: Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{label}: the answer is not JSON ({e}): {text}"));
        eprintln!("{label}: usage {}", answer["usage"]);
        answer
    }
}

/// The usage figures of an answer (Anthropic fields; DeepSeek's own names as a fallback).
#[derive(Clone, Copy, Debug)]
struct Usage {
    /// Input not read from the cache.
    input: u64,
    /// Input read from the cache.
    cache_read: u64,
    /// Input written to the cache (Anthropic; 0 where absent).
    cache_creation: u64,
}

impl Usage {
    fn of(answer: &Value) -> Usage {
        let u = &answer["usage"];
        let n = |keys: &[&str]| keys.iter().find_map(|k| u.get(*k).and_then(Value::as_u64));
        Usage {
            input: n(&["input_tokens", "prompt_cache_miss_tokens"]).expect("usage.input_tokens"),
            cache_read: n(&["cache_read_input_tokens", "prompt_cache_hit_tokens"]).unwrap_or(0),
            cache_creation: n(&["cache_creation_input_tokens"]).unwrap_or(0),
        }
    }

    /// The whole input of the request.
    fn prompt_tokens(self) -> u64 {
        self.input + self.cache_read + self.cache_creation
    }
}

/// One loop over one session, on the catalog's `deepseek-flash` capabilities.
struct Conversation {
    agent: AgentLoop,
    /// Names the turn's messages.
    turn: u64,
}

impl Conversation {
    fn new(live: &Live, run: &str) -> Self {
        let route = route_for("deepseek", "deepseek-flash");
        assert!(
            route.tool_update().is_some(),
            "the catalog entry has a mode"
        );
        let config = Config::new("deepseek", live.model.as_str())
            .with("max_tokens", json!(256))
            .unwrap();
        Conversation {
            agent: AgentLoop::builder(Session::new(format!("live-{run}")), route)
                .config(config)
                .build()
                .unwrap(),
            turn: 0,
        }
    }

    /// Records one user turn and returns it with its wire form.
    fn step(&mut self, prompt: &str, tools: &[ToolSchema], user: &str) -> (Request, WireRequest) {
        self.turn += 1;
        self.agent.set_system_prompt(prompt);
        self.agent.set_tools(tools.iter().cloned()).unwrap();
        let user = Message::user(format!("u{}", self.turn), user);
        let request = self.agent.user_turn([user]).expect("record");
        let wire = request.to_wire().expect("serialize");
        (request, wire)
    }

    /// Appends the model's answer (and a result for each tool call it made), as a loop would.
    fn answer(&self, answer: &Value) {
        let turn = self.turn;
        let mut content = Vec::new();
        let mut calls = Vec::new();
        for block in answer["content"].as_array().into_iter().flatten() {
            match block["type"].as_str() {
                Some("text") => content.push(ContentBlock::text(
                    block["text"].as_str().unwrap_or_default(),
                )),
                Some("thinking") => {
                    let mut reasoning = json!({"type": "reasoning", "text": block["thinking"]});
                    if let Some(signature) = block.get("signature") {
                        reasoning["signature"] = signature.clone();
                    }
                    content.push(ContentBlock::from_value(reasoning).expect("a reasoning block"));
                }
                Some("tool_use") => {
                    let (id, name) = (
                        block["id"].as_str().unwrap(),
                        block["name"].as_str().unwrap(),
                    );
                    content.push(
                        ContentBlock::tool_call(
                            id.to_owned(),
                            name.to_owned(),
                            block["input"].to_string(),
                        )
                        .unwrap(),
                    );
                    calls.push((id.to_owned(), name.to_owned()));
                }
                other => eprintln!("turn {turn}: answer block {other:?} not kept"),
            }
        }
        if !content
            .iter()
            .any(|b| matches!(b, ContentBlock::Text { text } if !text.is_empty()))
            && calls.is_empty()
        {
            // The API refuses an assistant turn without content; an empty answer is still a turn.
            content.push(ContentBlock::text("(no answer)"));
        }
        let config = self.agent.config();
        let source = MessageSource::Model {
            provider: config.provider.clone(),
            model: config.model.clone(),
        };
        let message = Message::new(format!("a{turn}"), Role::Assistant, content, source);
        self.agent.append(message).unwrap();
        let header = self.agent.session().request_header().unwrap().1;
        for (id, name) in calls {
            let text = match validate_tool_call(&name, &header.header) {
                Ok(()) => "No result in this test.".to_owned(),
                Err(e) => format!("Error: {e}"),
            };
            let result = Message::tool_result(format!("t{turn}-{id}"), id, text);
            self.agent.append(result).unwrap();
        }
    }
}

/// A tool `name` described as `what`, taking one string `query` described the same way.
fn query_tool(name: &str, what: &str) -> ToolSchema {
    support::tool_from(json!({
        "name": name,
        "description": what,
        "parameters": {
            "type": "object",
            "properties": {"query": {"type": "string", "description": what}},
            "required": ["query"]
        }
    }))
}

fn base_tools() -> Vec<ToolSchema> {
    vec![
        query_tool("get_weather", "Current weather for a city."),
        query_tool("read_file", "Read a file of the workspace."),
    ]
}

fn added_tool() -> ToolSchema {
    query_tool("search_docs", "Search the project documentation.")
}

const PROMPT: &str = "You are a terse assistant inside an automated test. Do not call tools. \
                      Answer with one word.";
const PROMPT_UPDATED: &str = "You are a terse assistant inside an automated test. Do not call \
                              tools. Answer with one word. From now on, write it in capitals.";

/// A label unique to this run.
fn run_id() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{nanos:x}-{:x}", std::process::id())
}

/// A user history of a few thousand tokens that no other run shares: the run id comes first.
fn unique_history(run: &str) -> String {
    let mut text = format!("Run {run}. Here is the log of this run; read it, then answer OK.\n");
    let mut x: u64 = run.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    for i in 0..240 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        text += &format!("Entry {i} of run {run}: reading {x:016x} recorded.\n");
    }
    text
}

/// The parts of a Messages body the prefix assertions compare, as raw bytes.
#[derive(Deserialize)]
struct Parts<'a> {
    #[serde(borrow)]
    system: Option<&'a RawValue>,
    #[serde(borrow, default)]
    tools: Vec<&'a RawValue>,
    #[serde(borrow)]
    messages: Vec<&'a RawValue>,
}

fn non_deferred(tools: &[&RawValue]) -> Vec<String> {
    tools
        .iter()
        .filter(|t| !t.get().contains(r#""defer_loading":true"#))
        .map(|t| t.get().to_owned())
        .collect()
}

/// The second body keeps the first one's `system`, non-deferred tools and messages byte for
/// byte, and adds `added` in history.
fn assert_prefix_kept(first: &WireRequest, second: &WireRequest, added: &str) {
    let a: Parts<'_> = serde_json::from_str(first.body()).unwrap();
    let b: Parts<'_> = serde_json::from_str(second.body()).unwrap();
    assert_eq!(
        a.system.map(RawValue::get),
        b.system.map(RawValue::get),
        "system"
    );
    assert_eq!(
        non_deferred(&a.tools),
        non_deferred(&b.tools),
        "tool prefix"
    );
    let raw = |m: &[&RawValue]| m.iter().map(|v| v.get().to_owned()).collect::<Vec<_>>();
    let (ma, mb) = (raw(&a.messages), raw(&b.messages));
    assert!(
        mb.len() > ma.len() && mb[..ma.len()] == ma[..],
        "messages prefix"
    );
    let addition = format!(
        r#"{{"type":"tool_addition","tool":{{"type":"tool_reference","name":"{added}"}}}}"#
    );
    assert!(
        second.body().contains(&addition),
        "the addition is sent in history"
    );
    assert!(
        second.header("anthropic-beta").is_some(),
        "with the beta header"
    );
}

/// The first request after a native tool addition, with or without an instruction update in
/// the same step.
fn addition_reads_the_previous_request_from_cache(test: &str, update_instructions: bool) {
    let Some(live) = Live::from_env(test) else {
        return;
    };
    let run = run_id();
    let mut conversation = Conversation::new(&live, &run);
    let (_, first) = conversation.step(PROMPT, &base_tools(), &unique_history(&run));
    let first_answer = live.send(&format!("{test} request 1"), &first);
    conversation.answer(&first_answer);

    let mut tools = base_tools();
    tools.push(added_tool());
    let prompt = if update_instructions {
        PROMPT_UPDATED
    } else {
        PROMPT
    };
    let (second_request, second) = conversation.step(prompt, &tools, "Answer once more.");
    assert!(
        !second_request.starts_series,
        "an addition continues the series"
    );
    assert_prefix_kept(&first, &second, "search_docs");

    std::thread::sleep(live.wait);
    let second_answer = live.send(&format!("{test} request 2"), &second);
    let (u1, u2) = (Usage::of(&first_answer), Usage::of(&second_answer));
    eprintln!(
        "{test}: request 1 input {} tokens; request 2 read {} from the cache (need ≥ {})",
        u1.prompt_tokens(),
        u2.cache_read,
        u1.prompt_tokens().saturating_sub(CACHE_SLACK_TOKENS)
    );
    assert!(
        u2.cache_read + CACHE_SLACK_TOKENS >= u1.prompt_tokens(),
        "{test}: request 2 read {} tokens from the cache; request 1 had {}",
        u2.cache_read,
        u1.prompt_tokens()
    );
}

#[test]
#[ignore = "needs DEEPSEEK_API_KEY and the network; see docs/live-test.md"]
fn live_deepseek_addition_with_unchanged_instructions_reads_the_previous_request_from_cache() {
    addition_reads_the_previous_request_from_cache("addition, same instructions", false);
}

#[test]
#[ignore = "needs DEEPSEEK_API_KEY and the network; see docs/live-test.md"]
fn live_deepseek_addition_with_an_instruction_update_reads_the_previous_request_from_cache() {
    addition_reads_the_previous_request_from_cache("addition with instruction update", true);
}

/// Removal checks tool availability only: addition-only routes drop the removed tool's
/// declaration and its earlier addition, send no removal block, and the loop refuses a call to
/// it; the endpoint accepts every request. No cache assertion.
#[test]
#[ignore = "needs DEEPSEEK_API_KEY and the network; see docs/live-test.md"]
fn live_deepseek_removal_leaves_the_removed_tool_unavailable() {
    let test = "removal";
    let Some(live) = Live::from_env(test) else {
        return;
    };
    let run = run_id();
    let mut conversation = Conversation::new(&live, &run);
    let mut with_added = base_tools();
    with_added.push(added_tool());
    let steps = [
        (base_tools(), unique_history(&run)),
        (with_added, "Answer once more.".to_owned()),
        (base_tools(), "And once more.".to_owned()),
    ];
    let mut last = None;
    for (i, (tools, user)) in steps.iter().enumerate() {
        let (_, wire) = conversation.step(PROMPT, tools, user);
        let answer = live.send(&format!("{test} request {}", i + 1), &wire);
        conversation.answer(&answer);
        last = Some((wire, answer));
    }
    let (wire, answer) = last.unwrap();
    let body: Value = serde_json::from_str(wire.body()).unwrap();
    let declared: Vec<&str> = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        declared,
        ["get_weather", "read_file"],
        "search_docs is not declared"
    );
    assert!(!wire.body().contains("search_docs"), "nor added in history");
    assert!(
        !wire.body().contains("tool_removal"),
        "addition-only sends no removal"
    );
    let header = conversation.agent.session().request_header().unwrap().1;
    assert!(validate_tool_call("search_docs", &header.header).is_err());
    for block in answer["content"].as_array().into_iter().flatten() {
        if block["type"] == "tool_use" {
            let name = block["name"].as_str().unwrap();
            assert!(
                validate_tool_call(name, &header.header).is_ok(),
                "the model called `{name}`, which is not available"
            );
        }
    }
}
