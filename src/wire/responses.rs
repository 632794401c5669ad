//! OpenAI's Responses API (`POST /v1/responses`), stateless.
//!
//! The crate keeps the conversation in its log, so every request carries the whole of it
//! (`store: false` unless the config says otherwise; `previous_response_id` and
//! `conversation` are refused as config keys: they would make the server prepend a stored
//! conversation to the one sent). Reasoning goes back as the `reasoning` items the decoder
//! kept, with their `encrypted_content` (`include: ["reasoning.encrypted_content"]` asks for it).
//!
//! Tool changes: on an addition-only route (a model the tool-search guide names) the
//! projection keeps the developer messages with `tool_addition` blocks and declares the added
//! names deferred; this wire leaves deferred declarations out of `tools` (it sends no
//! `defer_loading`, which belongs to the tool-search tool) and sends each run of additions as
//! an `additional_tools` item carrying the definitions by value, where the developer message
//! stands. No input item removes a tool: a removal leaves the name out of `tools` (the
//! projection drops its declaration and its addition), which rewrites the prefix.
//!
//! Each input item is written from its message alone (and from the state [`Resume`] keeps), so
//! a pass that ended well leaves a resume point at its end, as on the chat wire: the next
//! request of the route whose messages start with the same messages takes those items as they
//! were written and writes only the new ones
//! ([decision 143](crate::manual::decisions#decision-143)).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use super::canonical::{Canonical, CanonicalObject};
use super::openai::{json, latest_prompt_from};
use super::thinking::from_provider;
use super::{
    BlockSpan, CHAT_MAX_TOOL_NAME, Calls, Carried, MessageFault, Segments, TurnSpan, WireContext,
    WireError, WireReport, WireRequest, check_system_without_history, checked_tools_of_any_api,
    join_resumed, system_text, unsupported,
};
use crate::event::Config;
use crate::project::{HeldPrefix, ProjectedMessages, ProjectedToolUpdates};
use crate::route::Route;
use crate::vocab::{ContentBlock, Message, OtherBlock, Role, ToolSchema};

/// Output items of the model the log cannot type, kept verbatim by the decoder ([decision
/// 128](crate::manual::decisions#decision-128)) and sent back as input items ([decision
/// 140](crate::manual::decisions#decision-140)): the calls of Codex's tools that are not functions,
/// which wait for an output, and the built-in tools' calls, which do not. Their `id` is left out as
/// a message's and a function call's is (under `store: false` it names an item the server does not
/// hold); Codex sends them without it too.
const KEPT_CALLS: [(&str, Option<&str>); 6] = [
    ("custom_tool_call", Some("custom_tool_call_output")),
    ("local_shell_call", Some("local_shell_call_output")),
    ("web_search_call", None),
    ("file_search_call", None),
    ("image_generation_call", None),
    ("code_interpreter_call", None),
];

/// The outputs a client sends that the log cannot type (a custom or local shell call's, or a
/// function's holding an image), written back as they came ([decision
/// 140](crate::manual::decisions#decision-140)): each, and the calls it may answer. A
/// `local_shell_call` is answered by a `function_call_output` too (Codex sends that one).
const KEPT_OUTPUTS: [(&str, &[&str]); 3] = [
    ("custom_tool_call_output", &["custom_tool_call"]),
    ("local_shell_call_output", &["local_shell_call"]),
    (
        "function_call_output",
        &["function_call", "local_shell_call"],
    ),
];

/// The marker block the decoder puts before the text of a message item that carried a
/// `phase` ([decision 141](crate::manual::decisions#decision-141)).
const PHASE: &str = "phase";

/// User message parts the log cannot type, written back verbatim ([decision
/// 140](crate::manual::decisions#decision-140)).
const KEPT_PARTS: [&str; 2] = ["input_image", "input_file"];

/// Body keys this serializer writes itself, and the two that would bring server-side state in.
const RESERVED: [&str; 9] = [
    "model",
    "provider",
    "system",
    "messages",
    "instructions",
    "tools",
    "input",
    "previous_response_id",
    "conversation",
];

/// The Responses API's name of the output limit.
const OUTPUT_LIMIT: &str = "max_output_tokens";

/// The chat completions' and the Messages API's names of the output limit, which the Responses
/// API refuses (`400 "Unknown parameter: 'max_tokens'."`, `code` `unknown_parameter`, as quoted
/// from the vendor's answers in public code; HKUDS/DeepTutor#438: "the Responses API only
/// accepts `max_output_tokens`"; read 2026-12-06): a config written for another route (the
/// README's `with("max_tokens", …)`) is sent under the name this API takes, so that switching
/// a loop to a Responses route does not make every request a refusal.
const OUTPUT_LIMIT_ALIASES: [&str; 2] = ["max_tokens", "max_completion_tokens"];

/// What `include` asks for when the config sets none: the reasoning items' encrypted content,
/// which a stateless request must send back for the model to see its reasoning.
const INCLUDE_REASONING: &str = "reasoning.encrypted_content";

/// Serializes `projected` for a Responses route.
///
/// Body keys, in order: `model`; the config options (except `provider`; `max_tokens` and
/// `max_completion_tokens` written as `max_output_tokens`, this API's name of the limit) and
/// the defaults the config does not set — `store: false`, `include: ["reasoning.encrypted_content"]`, and
/// `prompt_cache_key` when the route takes one and the context gives one — sorted by key;
/// `instructions` (the latest prompt's text, when non-empty); `tools` (omitted when none);
/// `input`. Tools are flat: `{"type":"function","name","description","parameters","strict"}`,
/// `strict` from the tool's own `strict` field, else `false` (the Responses API makes functions
/// strict by default, which refuses most schemas). Input items:
/// - a user message: `{"type":"message","role":"user","content":[{"type":"input_text",…}]}`;
/// - an assistant message, block by block: a non-empty text block (or a kept `refusal` part,
///   by its text) as `{"type":"message","role":"assistant","content":"…"}` (the form the official
///   SDKs type without the output item's `id` and `status`, which a stateless log does not
///   keep); a tool call as `{"type":"function_call","call_id","name","arguments"}`,
///   `arguments` the exact text the model wrote; a reasoning block as `{"type":"reasoning",…}`
///   with the fields the decoder kept in `extra`, in order (`summary` from the block's text
///   when absent), when it carries a non-empty `id` and `encrypted_content` and the message
///   came from this route's provider (otherwise left out and counted in
///   [`WireReport::unverifiable_reasoning_left_out`]);
/// - a tool result: `{"type":"function_call_output","call_id","output"}`, `output` a string
///   for one text block and `input_text` parts for several;
/// - a kept call (`custom_tool_call`, `local_shell_call`, `web_search_call`, ...) as it came but
///   its `id`, custom and local shell calls paired with their outputs ([decision
///   140](crate::manual::decisions#decision-140)); a text result of a custom call as
///   `custom_tool_call_output`; a result that is one kept output item as it came; a `phase`
///   marker's phase on the assistant messages that follow it ([decision
///   141](crate::manual::decisions#decision-141)); a user message that is one kept developer or
///   system message item as it came ([decision 142](crate::manual::decisions#decision-142));
///   `input_image` / `input_file` parts as they came;
/// - a developer message: each run of `tool_addition` blocks as one `{"type":
///   "additional_tools","role":"developer","tools":[…]}` item (the definitions of the projected
///   declarations they name), each run of text as a developer message.
///
/// ```
/// use mektpoy::wire::{WireContext, serialize_responses};
/// use mektpoy::{Config, Message, project::ProjectedToolUpdates, route_for};
/// let config = Config::new("openai", "gpt-5.4");
/// let messages = [Message::system("p", "Be brief."), Message::user("u1", "hi")];
/// let projected = ProjectedToolUpdates::new(&messages[..]);
/// let route = route_for("openai", "gpt-5.4");
/// let request = serialize_responses(&config, &projected, &route, &WireContext::default())?;
/// let body: serde_json::Value = serde_json::from_str(request.body())?;
/// assert_eq!(body["instructions"], "Be brief.");
/// assert_eq!(body["store"], false);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
/// As [`serialize_openai_chat`](super::serialize_openai_chat) for names, pairing, system
/// messages and unknown blocks, plus [`WireError::ReservedConfigKey`] for `instructions`,
/// `input`, `previous_response_id` and `conversation`, and for an output limit given under two
/// of its names; [`WireError::ForcedToolChoice`] for a
/// forced `tool_choice` on a route that refuses it; [`MessageFault::UnsupportedBlock`] for a
/// tool change the route cannot send (a removal, a redefinition, a by-value addition, or an
/// addition on a route without a mode); [`MessageFault::AdditionWithoutDeclaration`] for an
/// addition of a name the projection does not declare; [`MessageFault::EmptyTurn`] for a user
/// message without text.
pub fn serialize_responses(
    config: &Config,
    projected: &ProjectedToolUpdates<'_>,
    route: &Route,
    context: &WireContext<'_>,
) -> Result<WireRequest, WireError> {
    pass(config, projected, route, context, None, false).0
}

/// [`serialize_responses`], resuming from what the route's previous request left (`resume`)
/// when this request's messages start with the messages it was built from and the state its
/// items were written in still holds; otherwise from the first message. Returns what the next
/// request of the route can resume from (`None` after a refusal) and, when it resumed, the
/// number of input items it took as they were.
pub(crate) fn serialize_responses_resuming(
    config: &Config,
    projected: &ProjectedToolUpdates<'_>,
    route: &Route,
    context: &WireContext<'_>,
    resume: Option<Resume>,
) -> (
    Result<WireRequest, WireError>,
    Option<Resume>,
    Option<usize>,
) {
    pass(config, projected, route, context, resume, true)
}

/// Where a Responses pass that ended well stood at its end: the input items it sent, written
/// once, and what a pass over more messages needs to go on from there
/// ([decision 143](crate::manual::decisions#decision-143)).
///
/// An input item is a function of its message and of this state alone: the call ids seen
/// (none is unanswered at the end of a pass that was not refused), the route's provider (a
/// reasoning item goes back only to it), whether the route sends `additional_tools` items,
/// and the definitions those items carried. `instructions`, `tools` and the options are the
/// head, written anew for every request. So a request whose messages start with
/// [`messages`](Self::messages), on a route with the same provider and mode, whose declared
/// tools write every kept addition's definition to the same bytes, gets from a pass that
/// starts after them the bytes and the refusals of a pass from the first message. Every debug
/// build checks that. An item that reads anything else (a new arm of [`Pass`]) must add it
/// here.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Resume {
    /// The projected messages the kept items were written from.
    messages: HeldPrefix,
    /// Their input items, comma-joined.
    bytes: String,
    /// How many input items `bytes` holds.
    turns: usize,
    /// How many content parts those hold (what the meter counts as blocks).
    blocks: usize,
    /// The index of the latest prompt node among `messages`.
    latest_prompt: Option<usize>,
    /// Every tool call id of `messages`.
    seen: HashSet<String>,
    /// The type of each call of `messages` that is not a function call, by call id ([decision
    /// 140](crate::manual::decisions#decision-140)): what its output is written as.
    kinds: HashMap<String, String>,
    /// The reasoning blocks of `messages` left out.
    unverifiable: usize,
    /// The provider the reasoning items were checked against.
    provider: String,
    /// Whether the route sends `additional_tools` items (else a tool addition is refused).
    additions: bool,
    /// Each tool an `additional_tools` item of `messages` carries, by name: the declaration
    /// it was written from and the bytes it was written as.
    added: HashMap<String, Added>,
    /// What each of the kept items carries.
    carried: Carried,
    /// Names this point for the meter (see `Segments::resumed`): minted anew by every pass
    /// that leaves one. Equality ignores it (`()` == `()`).
    token: Arc<()>,
}

/// A definition an `additional_tools` item carried.
#[derive(Clone, Debug, PartialEq)]
struct Added {
    tool: ToolSchema,
    /// `FunctionTool::new(tool)`'s bytes.
    bytes: String,
}

impl Resume {
    /// The number of input items this point holds.
    pub(crate) fn turns(&self) -> usize {
        self.turns
    }

    /// The number of messages this point was built from.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.messages.len()
    }

    /// Where this request's pass starts (the number of kept messages) when the kept items are
    /// what a pass from the first message would write for them: the same provider and mode,
    /// every kept addition's tool declared and written to the same bytes (O(1) per tool when
    /// it is the same definition, which is refreshed so the next point names the request's
    /// own declarations), and messages that start with the kept ones (O(chunks + parts)).
    fn matches(
        &mut self,
        messages: &ProjectedMessages<'_>,
        route: &Route,
        declared: &HashMap<&str, &ToolSchema>,
    ) -> Option<usize> {
        if self.provider != route.provider || self.additions != route.tool_update().is_some() {
            return None;
        }
        for (name, kept) in &mut self.added {
            let now = *declared.get(name.as_str())?;
            if !now.shares_definition_with(&kept.tool) && tool_bytes(now) != kept.bytes {
                return None;
            }
            kept.tool = now.clone();
        }
        self.messages
            .starts(messages)
            .then_some(self.messages.len())
    }
}

/// A tool as an `additional_tools` item writes it.
fn tool_bytes(tool: &ToolSchema) -> String {
    let mut out = Vec::new();
    json(&mut out, &FunctionTool::new(tool));
    // serde_json writes UTF-8.
    String::from_utf8(out).expect("JSON is UTF-8")
}

/// The serializer's pass, from the first message or from `resume`; `keep`: whether to build
/// what the next request resumes from.
fn pass(
    config: &Config,
    projected: &ProjectedToolUpdates<'_>,
    route: &Route,
    context: &WireContext<'_>,
    resume: Option<Resume>,
    keep: bool,
) -> (
    Result<WireRequest, WireError>,
    Option<Resume>,
    Option<usize>,
) {
    #[cfg(debug_assertions)]
    let given = resume.is_some();
    let (request, next, resumed) = resumed_pass(config, projected, route, context, resume, keep);
    #[cfg(debug_assertions)]
    if given {
        super::resume_check::check_resumed("Responses", request.as_ref(), next.as_ref(), || {
            let (fresh, fresh_next, _) =
                resumed_pass(config, projected, route, context, None, keep);
            (fresh, fresh_next)
        });
    }
    (request, next, resumed)
}

/// [`pass`] without the debug builds' check.
fn resumed_pass(
    config: &Config,
    projected: &ProjectedToolUpdates<'_>,
    route: &Route,
    context: &WireContext<'_>,
    resume: Option<Resume>,
    keep: bool,
) -> (
    Result<WireRequest, WireError>,
    Option<Resume>,
    Option<usize>,
) {
    let mut resume = resume;
    match written(config, projected, route, context, &mut resume, keep) {
        Ok((request, next)) => {
            let segments = request.segments.as_deref();
            let resumed = segments.and_then(|s| s.resumed.as_ref().map(|_| s.first));
            (Ok(request), next, resumed)
        }
        Err(e) => (Err(e), None, None),
    }
}

/// The request, and the point it leaves when `keep` (taken from `resume` when this request
/// goes on from it).
fn written(
    config: &Config,
    projected: &ProjectedToolUpdates<'_>,
    route: &Route,
    context: &WireContext<'_>,
    resume: &mut Option<Resume>,
    keep: bool,
) -> Result<(WireRequest, Option<Resume>), WireError> {
    let tools = checked_tools_of_any_api(projected, CHAT_MAX_TOOL_NAME)?;
    check_tool_choice(config, route)?;
    let messages = &projected.messages;
    let declared: HashMap<&str, &ToolSchema> = tools.iter().map(|t| (t.name(), t)).collect();
    let start = resume
        .as_mut()
        .and_then(|r| r.matches(messages, route, &declared));
    if start.is_none() {
        *resume = None;
    }
    let start = start.unwrap_or(0);
    let kept = resume.as_ref();
    // The latest prompt: among the new messages, else the one the kept messages had.
    let latest = latest_prompt_from(messages, start).or_else(|| kept.and_then(|r| r.latest_prompt));
    let instructions = match latest.map(|i| system_text(&messages[i])).transpose()? {
        Some(text) if !text.is_empty() => Some(text),
        _ => None,
    };
    let mut pass = Pass {
        route,
        declared,
        items: Vec::with_capacity(messages.len() - start),
        carried: kept.map(|r| r.carried.clone()).unwrap_or_default(),
        unverifiable: kept.map_or(0, |r| r.unverifiable),
        kinds: HashMap::new(),
        kept_kinds: kept.map(|r| &r.kinds),
        added: Vec::new(),
    };
    let mut calls = Calls {
        prior: kept.map(|r| &r.seen),
        ..Calls::default()
    };
    for index in start..messages.len() {
        pass.message(index, &messages[index], &mut calls)?;
    }
    calls.require_answered()?;
    let new_ids: Vec<String> = if keep {
        calls.seen.iter().map(|id| (*id).to_owned()).collect()
    } else {
        Vec::new()
    };
    drop(calls);

    let include = Value::from(vec![INCLUDE_REASONING]);
    let store = Value::Bool(false);
    let key = context
        .prompt_cache_key
        .filter(|_| route.prompt_cache_key())
        .map(Value::from);
    let mut options: Vec<(&str, &Value)> = Vec::with_capacity(config.extra.len() + 3);
    for (k, v) in &config.extra {
        if RESERVED.contains(&k.as_str()) {
            return Err(WireError::ReservedConfigKey { key: k.clone() });
        }
        let mut key = k.as_str();
        if OUTPUT_LIMIT_ALIASES.contains(&key) {
            // Two names for one limit: the serializer would write `max_output_tokens` twice.
            if config.extra.contains_key(OUTPUT_LIMIT)
                || OUTPUT_LIMIT_ALIASES
                    .iter()
                    .any(|a| *a != key && config.extra.contains_key(*a))
            {
                return Err(WireError::ReservedConfigKey { key: k.clone() });
            }
            key = OUTPUT_LIMIT;
        }
        options.push((key, v));
    }
    let defaults = [
        ("include", Some(&include)),
        ("store", Some(&store)),
        ("prompt_cache_key", key.as_ref()),
    ];
    for (k, v) in defaults {
        if let Some(v) = v.filter(|_| !config.extra.contains_key(k)) {
            options.push((k, v));
        }
    }
    options.sort_unstable_by(|a, b| a.0.cmp(b.0));

    let mut segments = Segments {
        first: kept.map_or(0, |r| r.turns),
        first_block: kept.map_or(0, |r| r.blocks),
        resumed: kept.map(|r| Arc::clone(&r.token)),
        ..Segments::default()
    };
    let mut out = Vec::new();
    out.extend_from_slice(br#"{"model":"#);
    json(&mut out, &config.model);
    for (k, v) in &options {
        out.push(b',');
        json(&mut out, k);
        out.push(b':');
        json(&mut out, &Canonical(v));
    }
    if let Some(text) = &instructions {
        out.extend_from_slice(br#","instructions":"#);
        let at = out.len();
        json(&mut out, text);
        segments.system = Some(at..out.len());
    }
    let sent: Vec<SentTool<'_>> = tools
        .iter()
        .filter(|t| !t.defer_loading())
        .map(SentTool::new)
        .collect();
    if !sent.is_empty() {
        out.extend_from_slice(br#","tools":"#);
        let at = out.len();
        json(&mut out, &sent);
        segments.tools = Some(at..out.len());
    }
    out.extend_from_slice(br#","input":["#);
    segments.messages_at = out.len();
    // A pass from the first message writes its items straight into the body (and copies them
    // out only for a resume point); a resumed one writes its new ones apart (only they and
    // the head are checked as UTF-8), to join them to the kept bytes.
    let body = match kept {
        None => {
            write_items(
                &mut out,
                &pass.items,
                0,
                &mut segments.messages,
                &mut segments.blocks,
            );
            out.extend_from_slice(b"]}");
            // serde_json writes UTF-8 and so do the literals.
            String::from_utf8(out).expect("JSON is UTF-8")
        }
        Some(r) => {
            let mut tail = Vec::new();
            let (mut turns, mut blocks) = (Vec::new(), Vec::new());
            write_items(&mut tail, &pass.items, r.blocks, &mut turns, &mut blocks);
            let head = String::from_utf8(out).expect("JSON is UTF-8");
            join_resumed(head, &r.bytes, tail, (turns, blocks), &mut segments).0
        }
    };
    segments.body_len = body.len();
    let unverifiable = pass.unverifiable;
    let new_turns = segments.messages.len();
    let new_blocks = segments.blocks.len();
    let Pass {
        items,
        carried,
        added,
        kinds,
        ..
    } = pass;
    let new_kinds: Vec<(String, String)> = if keep {
        kinds
            .into_iter()
            .filter(|(_, kind)| *kind != "function_call")
            .map(|(id, kind)| (id.to_owned(), kind.to_owned()))
            .collect()
    } else {
        Vec::new()
    };
    drop(items);
    // Owned (an `Arc` clone each), so that nothing borrowed from the kept point outlives this.
    let added: Vec<ToolSchema> = if keep {
        added.into_iter().cloned().collect()
    } else {
        Vec::new()
    };
    segments.carried = carried;
    debug_assert_eq!(
        segments.carried.turns(),
        segments.first + segments.messages.len(),
        "the Responses grouping counts other items than the body holds"
    );
    // The items this pass wrote: after the kept ones, up to the closing `]}`.
    let from = match kept {
        Some(_) => segments
            .messages
            .first()
            .map_or(body.len() - 2, |t| t.span.start),
        None => segments.messages_at,
    };
    let next = keep.then(|| {
        let tail = Tail {
            bytes: &body[from..body.len() - 2],
            turns: new_turns,
            blocks: new_blocks,
        };
        next_resume(
            resume.take(),
            messages,
            route,
            latest,
            tail,
            new_ids,
            new_kinds,
            &added,
            unverifiable,
            segments.carried.clone(),
        )
    });
    segments.leaves = next.as_ref().map(|r| Arc::clone(&r.token));
    let mut request = WireRequest::new(
        body,
        vec![("content-type".to_owned(), "application/json".to_owned())],
    );
    request.report = WireReport {
        unverifiable_reasoning_left_out: unverifiable,
        ..WireReport::default()
    };
    request.segments = Some(Arc::new(segments));
    Ok((request, next))
}

/// The items a pass wrote itself, comma-joined, and how many items and content parts they
/// hold.
struct Tail<'t> {
    bytes: &'t str,
    turns: usize,
    blocks: usize,
}

/// What the next request resumes from after a pass over `messages` that resumed from `old`
/// (or started from the first message), found the latest prompt at `latest`, wrote `tail`,
/// saw the new call ids `new_ids` (of kinds `new_kinds` where not functions), sent the additions `added`, left out `unverifiable`
/// reasoning blocks in all and grouped the items as `carried`.
#[allow(clippy::too_many_arguments)]
fn next_resume(
    old: Option<Resume>,
    messages: &ProjectedMessages<'_>,
    route: &Route,
    latest: Option<usize>,
    tail: Tail<'_>,
    new_ids: Vec<String>,
    new_kinds: Vec<(String, String)>,
    added: &[ToolSchema],
    unverifiable: usize,
    carried: Carried,
) -> Resume {
    let mut r = old.unwrap_or_else(|| Resume {
        messages: HeldPrefix::empty(),
        bytes: String::with_capacity(tail.bytes.len()),
        turns: 0,
        blocks: 0,
        latest_prompt: None,
        seen: HashSet::with_capacity(new_ids.len()),
        kinds: HashMap::new(),
        unverifiable: 0,
        provider: route.provider.to_string(),
        additions: route.tool_update().is_some(),
        added: HashMap::new(),
        carried: Carried::default(),
        token: Arc::new(()),
    });
    r.messages = HeldPrefix::of(messages, messages.len());
    if !r.bytes.is_empty() && !tail.bytes.is_empty() {
        r.bytes.push(',');
    }
    r.bytes.push_str(tail.bytes);
    r.turns += tail.turns;
    r.blocks += tail.blocks;
    r.latest_prompt = latest;
    r.seen.extend(new_ids);
    r.kinds.extend(new_kinds);
    r.unverifiable = unverifiable;
    for tool in added {
        if !r.added.contains_key(tool.name()) {
            let kept = Added {
                tool: tool.clone(),
                bytes: tool_bytes(tool),
            };
            r.added.insert(tool.name().to_owned(), kept);
        }
    }
    r.carried = carried;
    r.token = Arc::new(());
    r
}

/// Writes `items` comma-joined at the end of `out` ([`super::write_spanned`]): the one
/// writer of a request's items.
fn write_items(
    out: &mut Vec<u8>,
    items: &[Item<'_>],
    block_base: usize,
    turns: &mut Vec<TurnSpan>,
    blocks: &mut Vec<BlockSpan>,
) {
    super::write_spanned(
        out,
        items,
        block_base,
        turns,
        blocks,
        |item, out, blocks| item.write(out, blocks),
    );
}

/// Refuses a forced `tool_choice` (`"required"`, or an object naming a function) on a route
/// whose model refuses one.
fn check_tool_choice(config: &Config, route: &Route) -> Result<(), WireError> {
    if route.forced_tool_choice() {
        return Ok(());
    }
    let forced = match config.extra.get("tool_choice") {
        Some(Value::String(s)) if s == "required" => Some(s.clone()),
        Some(Value::Object(o)) => o
            .get("type")
            .and_then(Value::as_str)
            .filter(|t| *t != "auto" && *t != "none")
            .map(str::to_owned),
        _ => None,
    };
    match forced {
        Some(choice_type) => Err(WireError::ForcedToolChoice { choice_type }),
        None => Ok(()),
    }
}

/// The serializer's pass over the projected messages: the input items, what each carries.
struct Pass<'a> {
    route: &'a Route,
    declared: HashMap<&'a str, &'a ToolSchema>,
    items: Vec<Item<'a>>,
    carried: Carried,
    unverifiable: usize,
    /// The type of each kept call of the request ([decision
    /// 140](crate::manual::decisions#decision-140)), by call id: what its output is written as, and
    /// which outputs may answer it.
    kinds: HashMap<&'a str, &'a str>,
    /// The kinds of the kept point's calls that are not functions, by call id (a call made
    /// before the point whose output comes after it).
    kept_kinds: Option<&'a HashMap<String, String>>,
    /// The declarations each `additional_tools` item carries, in order (a name may recur).
    added: Vec<&'a ToolSchema>,
}

impl<'a> Pass<'a> {
    /// Opens an item carrying message `index`.
    fn push(&mut self, index: usize, item: Item<'a>) {
        self.carried.open();
        self.carried.join(index);
        self.items.push(item);
    }

    fn message(
        &mut self,
        index: usize,
        message: &'a Message,
        calls: &mut Calls<'a>,
    ) -> Result<(), WireError> {
        match message.role() {
            Role::System => check_system_without_history(message),
            Role::User => {
                calls.require_answered()?;
                // A client's developer or system message after the conversation started, kept
                // verbatim (decision 142).
                if let [ContentBlock::Other(o)] = message.content()
                    && o.type_name() == "message"
                    && matches!(
                        o.get("role").and_then(Value::as_str),
                        Some("developer" | "system")
                    )
                {
                    self.push(index, Item::Kept { item: o, id: false });
                    return Ok(());
                }
                let mut parts = Vec::with_capacity(message.content().len());
                for (b, block) in message.content().iter().enumerate() {
                    match block {
                        ContentBlock::Text { text } => parts.push((b, Part::Input(text))),
                        ContentBlock::Other(o) if KEPT_PARTS.contains(&o.type_name()) => {
                            parts.push((b, Part::Kept(o)));
                        }
                        other => return Err(unsupported(message, b, other)),
                    }
                }
                if parts.is_empty() {
                    return Err(WireError::message(message.id(), MessageFault::EmptyTurn));
                }
                self.push_message(index, "user", parts);
                Ok(())
            }
            Role::Tool => {
                let call_id = calls.answer(message)?;
                // A call id `calls` knows and neither map names is a function call's (the kept
                // point keeps only the other kinds).
                let call = self
                    .kinds
                    .get(call_id)
                    .copied()
                    .or_else(|| self.kept_kinds?.get(call_id).map(String::as_str))
                    .or(Some("function_call"));
                if let [ContentBlock::Other(o)] = message.content()
                    && let Some((_, answers)) =
                        KEPT_OUTPUTS.iter().find(|(t, _)| *t == o.type_name())
                {
                    // An output of a kind the call does not take would be refused as an
                    // output without its call.
                    if !call.is_some_and(|c| answers.contains(&c)) {
                        return Err(WireError::message(
                            message.id(),
                            MessageFault::OrphanToolResult {
                                call_id: call_id.to_owned(),
                            },
                        ));
                    }
                    self.push(index, Item::Kept { item: o, id: true });
                    return Ok(());
                }
                let kind = match call {
                    Some("custom_tool_call") => "custom_tool_call_output",
                    _ => "function_call_output",
                };
                let mut texts = Vec::with_capacity(message.content().len());
                for (b, block) in message.content().iter().enumerate() {
                    match block {
                        ContentBlock::Text { text } => texts.push(text.as_str()),
                        other => return Err(unsupported(message, b, other)),
                    }
                }
                self.push(
                    index,
                    Item::Output {
                        kind,
                        call_id,
                        texts,
                    },
                );
                Ok(())
            }
            Role::Developer => {
                calls.require_answered()?;
                self.developer(index, message)
            }
            Role::Assistant => {
                calls.require_answered()?;
                self.assistant(index, message, calls)
            }
        }
    }

    /// A message item of `role` holding `parts` (block index, part).
    fn push_message(&mut self, index: usize, role: &'static str, parts: Vec<(usize, Part<'a>)>) {
        self.carried.open();
        for (b, _) in &parts {
            self.carried.block(index, *b);
        }
        self.carried.join(index);
        self.items.push(Item::Message {
            role,
            parts: parts.into_iter().map(|(_, p)| p).collect(),
        });
    }

    /// An `additional_tools` item carrying `tools`, noted for the resume point.
    fn additional(&mut self, index: usize, tools: Vec<&'a ToolSchema>) {
        self.added.extend(tools.iter().copied());
        self.push(index, Item::Additional { tools });
    }

    fn developer(&mut self, index: usize, message: &'a Message) -> Result<(), WireError> {
        let mut texts: Vec<(usize, Part<'a>)> = Vec::new();
        let mut added: Vec<&'a ToolSchema> = Vec::new();
        for (b, block) in message.content().iter().enumerate() {
            match block {
                ContentBlock::Text { text } => {
                    if !added.is_empty() {
                        let tools = std::mem::take(&mut added);
                        self.additional(index, tools);
                    }
                    texts.push((b, Part::Input(text)));
                }
                ContentBlock::ToolAddition(r) if self.route.tool_update().is_some() => {
                    let tool_name = r.tool_name();
                    let Some(&tool) = self.declared.get(tool_name) else {
                        return Err(WireError::message(
                            message.id(),
                            MessageFault::AdditionWithoutDeclaration {
                                index: b,
                                tool: tool_name.to_owned(),
                            },
                        ));
                    };
                    if !texts.is_empty() {
                        let parts = std::mem::take(&mut texts);
                        self.push_message(index, "developer", parts);
                    }
                    added.push(tool);
                }
                other => return Err(unsupported(message, b, other)),
            }
        }
        if !added.is_empty() {
            self.additional(index, added);
        }
        if !texts.is_empty() {
            self.push_message(index, "developer", texts);
        }
        Ok(())
    }

    fn assistant(
        &mut self,
        index: usize,
        message: &'a Message,
        calls: &mut Calls<'a>,
    ) -> Result<(), WireError> {
        let verifiable = from_provider(message, &self.route.provider, None);
        // The phase of the message item the text blocks came from (decision 141).
        let mut phase: Option<&'a Value> = None;
        for (b, block) in message.content().iter().enumerate() {
            let item = match block {
                // An empty text says nothing; the Messages wire drops it too.
                ContentBlock::Text { text } if text.is_empty() => continue,
                ContentBlock::Text { text } => Item::Said { text, phase },
                ContentBlock::Other(o) if o.type_name() == PHASE => {
                    phase = o.get(PHASE).filter(|p| !p.is_null());
                    continue;
                }
                ContentBlock::Other(o) if o.type_name() == "refusal" => {
                    match o.get("refusal").and_then(Value::as_str) {
                        Some(text) => Item::Said { text, phase },
                        None => return Err(unsupported(message, b, block)),
                    }
                }
                ContentBlock::Other(o) if KEPT_CALLS.iter().any(|(t, _)| *t == o.type_name()) => {
                    let waits = KEPT_CALLS
                        .iter()
                        .any(|(t, out)| *t == o.type_name() && out.is_some());
                    if waits {
                        let Some(call_id) = o.get("call_id").and_then(Value::as_str) else {
                            return Err(unsupported(message, b, block));
                        };
                        calls.call(message, call_id)?;
                        self.kinds.insert(call_id, o.type_name());
                    }
                    Item::Kept { item: o, id: false }
                }
                ContentBlock::ToolCall(call) => {
                    let (id, name, arguments) = (call.id(), call.name(), call.arguments());
                    calls.call(message, id)?;
                    self.kinds.insert(id, "function_call");
                    Item::Call {
                        call_id: id,
                        name,
                        arguments,
                    }
                }
                ContentBlock::Reasoning { text, extra } => {
                    let non_empty = |k: &str| {
                        extra
                            .get(k)
                            .and_then(Value::as_str)
                            .is_some_and(|s| !s.is_empty())
                    };
                    if !(verifiable && non_empty("encrypted_content") && non_empty("id")) {
                        self.unverifiable += 1;
                        continue;
                    }
                    Item::Reasoning { text, extra }
                }
                other => return Err(unsupported(message, b, other)),
            };
            self.push(index, item);
        }
        Ok(())
    }
}

/// One input item.
enum Item<'a> {
    Message {
        role: &'static str,
        parts: Vec<Part<'a>>,
    },
    /// An assistant's text: `{"type":"message","role":"assistant","content":"…"}`, with the
    /// `phase` of the message item it came from.
    Said {
        text: &'a str,
        phase: Option<&'a Value>,
    },
    /// An item the log keeps verbatim ([decision 140](crate::manual::decisions#decision-140)), its
    /// `id` left out unless `id`.
    Kept {
        item: &'a OtherBlock,
        id: bool,
    },
    Call {
        call_id: &'a str,
        name: &'a str,
        arguments: &'a str,
    },
    Output {
        kind: &'static str,
        call_id: &'a str,
        texts: Vec<&'a str>,
    },
    Reasoning {
        text: &'a str,
        extra: &'a indexmap::IndexMap<String, Value>,
    },
    Additional {
        tools: Vec<&'a ToolSchema>,
    },
}

/// One part of a message item's `content`: `{"type":"input_text","text"}`.
enum Part<'a> {
    Input(&'a str),
    /// A part the log keeps verbatim ([decision 140](crate::manual::decisions#decision-140)).
    Kept(&'a OtherBlock),
}

#[derive(Serialize)]
struct InputText<'a> {
    r#type: &'static str,
    text: &'a str,
}

impl Item<'_> {
    /// Writes the item, pushing the span of each part of its `content` (what the meter counts
    /// as its blocks).
    fn write(&self, out: &mut Vec<u8>, blocks: &mut Vec<BlockSpan>) {
        match self {
            Item::Message { role, parts } => {
                out.extend_from_slice(br#"{"type":"message","role":"#);
                json(out, role);
                out.extend_from_slice(br#","content":["#);
                for (i, part) in parts.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    let at = out.len();
                    match part {
                        Part::Input(text) => json(
                            out,
                            &InputText {
                                r#type: "input_text",
                                text,
                            },
                        ),
                        Part::Kept(part) => write_fields(out, part, true, None),
                    }
                    blocks.push(BlockSpan {
                        span: at..out.len(),
                        thinking: false,
                    });
                }
                out.extend_from_slice(b"]}");
            }
            Item::Said { text, phase } => {
                out.extend_from_slice(br#"{"type":"message","role":"assistant","content":"#);
                json(out, text);
                if let Some(phase) = phase {
                    out.extend_from_slice(br#","phase":"#);
                    json(out, &Canonical(phase));
                }
                out.push(b'}');
            }
            Item::Kept { item, id } => write_fields(out, item, *id, Some(blocks)),
            Item::Call {
                call_id,
                name,
                arguments,
            } => {
                out.extend_from_slice(br#"{"type":"function_call","call_id":"#);
                json(out, call_id);
                out.extend_from_slice(br#","name":"#);
                json(out, name);
                out.extend_from_slice(br#","arguments":"#);
                json(out, arguments);
                out.push(b'}');
            }
            Item::Output {
                kind,
                call_id,
                texts,
            } => {
                out.extend_from_slice(br#"{"type":"#);
                json(out, kind);
                out.extend_from_slice(br#","call_id":"#);
                json(out, call_id);
                out.extend_from_slice(br#","output":"#);
                match texts.as_slice() {
                    [] => json(out, ""),
                    [one] => json(out, one),
                    many => {
                        let parts: Vec<InputText<'_>> = many
                            .iter()
                            .map(|text| InputText {
                                r#type: "input_text",
                                text,
                            })
                            .collect();
                        json(out, &parts);
                    }
                }
                out.push(b'}');
            }
            Item::Reasoning { text, extra } => {
                out.extend_from_slice(br#"{"type":"reasoning""#);
                for (k, v) in extra.iter().filter(|(k, _)| k.as_str() != "type") {
                    out.push(b',');
                    json(out, k);
                    out.push(b':');
                    write_field_value(out, k, v, Some(blocks));
                }
                if !extra.contains_key("summary") {
                    out.extend_from_slice(br#","summary":["#);
                    if !text.is_empty() {
                        out.extend_from_slice(br#"{"type":"summary_text","text":"#);
                        json(out, text);
                        out.push(b'}');
                    }
                    out.push(b']');
                }
                out.push(b'}');
            }
            Item::Additional { tools } => {
                out.extend_from_slice(br#"{"type":"additional_tools","role":"developer","tools":"#);
                let tools: Vec<SentTool<'_>> = tools.iter().map(|t| SentTool::new(t)).collect();
                json(out, &tools);
                out.push(b'}');
            }
        }
    }
}

/// An item or part kept verbatim: `type` first, then its other fields (`id` only when `id`).
fn write_fields(
    out: &mut Vec<u8>,
    block: &OtherBlock,
    id: bool,
    blocks: Option<&mut Vec<BlockSpan>>,
) {
    out.extend_from_slice(br#"{"type":"#);
    json(out, block.type_name());
    let mut blocks = blocks;
    for (k, v) in block.fields() {
        if k == "type" || (!id && k == "id") {
            continue;
        }
        out.push(b',');
        json(out, k);
        out.push(b':');
        write_field_value(out, k, v, blocks.as_deref_mut());
    }
    out.push(b'}');
}

/// Writes an item's field value; the elements of an item's `content` array are what the meter
/// counts as the item's blocks, so their spans go to `blocks` (an item written as kept has
/// them too: a client's developer message, a reasoning item with reasoning text).
fn write_field_value(
    out: &mut Vec<u8>,
    key: &str,
    value: &Value,
    blocks: Option<&mut Vec<BlockSpan>>,
) {
    match (key, value, blocks) {
        ("content", Value::Array(parts), Some(blocks)) => {
            out.push(b'[');
            for (i, part) in parts.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                let at = out.len();
                json(out, &Canonical(part));
                blocks.push(BlockSpan {
                    span: at..out.len(),
                    thinking: false,
                });
            }
            out.push(b']');
        }
        _ => json(out, &Canonical(value)),
    }
}

/// A declared tool: a function, or a Responses API tool that is not one, sent as the client
/// defined it ([decision 139](crate::manual::decisions#decision-139)).
#[derive(Serialize)]
#[serde(untagged)]
enum SentTool<'a> {
    Function(FunctionTool<'a>),
    Native(CanonicalObject<'a>),
}

impl<'a> SentTool<'a> {
    fn new(tool: &'a ToolSchema) -> Self {
        match tool.responses_tool() {
            Some(definition) => SentTool::Native(CanonicalObject(definition)),
            None => SentTool::Function(FunctionTool::new(tool)),
        }
    }
}

/// `{"type":"function","name","description","parameters","strict"}`.
#[derive(Serialize)]
struct FunctionTool<'a> {
    r#type: &'static str,
    name: &'a str,
    description: &'a str,
    parameters: CanonicalObject<'a>,
    strict: bool,
}

impl<'a> FunctionTool<'a> {
    fn new(tool: &'a ToolSchema) -> Self {
        FunctionTool {
            r#type: "function",
            name: tool.name(),
            description: tool.description(),
            parameters: CanonicalObject(tool.parameters()),
            strict: tool.extra().get("strict").and_then(Value::as_bool) == Some(true),
        }
    }
}

#[cfg(test)]
#[path = "responses_tests.rs"]
mod tests;
