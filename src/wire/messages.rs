//! The Messages API (DeepSeek's Anthropic-compatible endpoint and Anthropic).
//!
//! The conversation is rebuilt as wire turns in one pass over the projected messages. Prompt
//! updates and tool changes cannot become their own turns anywhere: the API accepts a system
//! message only before an assistant message or at the end. They wait in a *queue* that is
//! flushed, as **one** system message, before the next assistant message or at the end, and
//! only right after a user / tool-result turn; what still waits at the end is left out of this
//! request (it goes out with the next one).
//!
//! The same pass decides which reasoning goes back (see the `thinking` module), counts the
//! tools the request makes available (the `limits` module), and counts content blocks for the
//! automatic-caching lookback.

use std::borrow::Cow;
use std::collections::HashSet;

use indexmap::IndexMap;
use serde::Serialize;
use serde::ser::{SerializeMap, SerializeSeq, Serializer};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::arguments;
use super::canonical::{Canonical, CanonicalObject};
use super::limits::{self, ByValue};
use super::thinking::{self, Binding, THINKING_BINDING_BETA, Verdict};
use super::{
    BlockSpan, Body, Calls, Carried, MESSAGES_MAX_TOOL_NAME, MessageFault, Segments, TurnSpan,
    WireContext, WireError, WireReport, WireRequest, block_type, check_not_responses_only,
    check_system_without_history, check_tool_name, checked_tools, latest_prompt, sorted_options,
    system_text, unsupported,
};
#[cfg(doc)]
use super::{ThinkingPlan, ToolLimit};
use crate::event::Config;
use crate::project::{HeldPrefix, ProjectedMessages, ProjectedToolUpdates};
use crate::route::Route;
use crate::vocab::{ContentBlock, DEFERRED_PLACEHOLDER_NAME, Message, Role, ToolSchema};

mod conversation;
mod resume;
mod shapes;
use conversation::*;
use resume::*;
pub(crate) use resume::{Resume, ResumeKey};
use shapes::*;

/// The beta that lets a conversation add and remove tools mid-way, by reference.
const TOOL_CHANGE_BETA: &str = "mid-conversation-tool-changes-2026-07-01";

/// The beta that also lets a `tool_addition` carry a definition by value (and covers
/// by-reference changes too), on routes with inline definitions.
const INLINE_TOOLS_BETA: &str = "inline-tools-2026-09-15";

/// The API version every request names.
const ANTHROPIC_VERSION: &str = "2023-06-01";

/// How far back automatic caching looks for an earlier cache entry, in content blocks.
///
/// **Third-party figure.** The vendor's prompt-caching page describes automatic caching, but
/// the "20-block lookback window" wording was read only in third-party copies that quote it
/// (notes of 2026-12-01), not in a vendor excerpt. Replace it when the vendor text is read.
/// The meter's model of the cache reads it too (one figure for both).
pub(crate) const LOOKBACK_BLOCKS: usize = 20;

/// Tool fields kept in a tool's `extra` that Anthropic routes send, in this order, after
/// `input_schema` (the vendor's replacement for forced tool choice relies on `strict`).
const ANTHROPIC_TOOL_FIELDS: [&str; 3] = ["strict", "input_examples", "eager_input_streaming"];

/// Serializes `projected` for a Messages-API route.
///
/// Body keys, in order: `model`; the other config options except `provider`, sorted by key
/// (with the automatic `cache_control` and a `thinking` the policy changed among them);
/// `system` (a string, omitted when empty); `tools` (omitted when there are none); `messages`.
/// Headers: `content-type: application/json`, `anthropic-version: 2023-06-01`, and
/// `anthropic-beta` when a beta applies: the route's tool-change beta
/// (`inline-tools-2026-09-15` on routes with [`inline_definitions`](Route::inline_definitions),
/// else `mid-conversation-tool-changes-2026-07-01`) on every request of a
/// [`beta_always`](Route::beta_always) route and otherwise exactly when a serialized message
/// holds a tool-change block, then `thinking-binding-controls-2026-08-01` when the `DropBlock`
/// thinking policy acted; several betas are joined by `,` in that order.
///
/// The system prompt: on routes with [`system_prompt_in_history`](Route::system_prompt_in_history)
/// a system node that is the first message is `system`, and every other non-empty system node
/// joins the queue (see the module doc) as a text block; on other routes only the latest system
/// node is sent, as `system`. Developer messages join the queue as `tool_addition` /
/// `tool_removal` blocks (by reference, or, for a by-value addition, carrying
/// `{"type":"tool_definition","definition":{name, description, input_schema}}`) and text
/// blocks (empty ones dropped). Tool results become `tool_result` blocks of a user turn
/// (`"is_error": true` only when `isError` is true); consecutive user content and consecutive
/// assistant messages are merged into one turn each. Empty text blocks are dropped everywhere
/// (the API refuses them).
///
/// A tool call becomes `tool_use` with its `arguments` text as `input`, **as the model wrote
/// it**: numbers keep every digit and their spelling, keys keep their order, strings their
/// escapes; only whitespace between tokens is removed (the body is compact JSON). Arguments
/// that cannot go out so ([`arguments_fault`](super::arguments_fault): not one JSON object, a
/// key twice in one object at any depth, nesting deeper than
/// [`ContentBlock::ARGUMENTS_DEPTH_LIMIT`], ...) are what a model wrote, and refusing them would
/// stop the session: they go out as `{"invalid_arguments":"<the text>"}`, the same bytes every
/// time. The chat serializer sends the same text as its `arguments` string, unchanged.
///
/// Tools: `{name, description, input_schema}`, then on Anthropic routes (provider
/// `anthropic`) the fields `strict`, `input_examples`, `eager_input_streaming` when the tool
/// keeps them, then `"defer_loading": true` when deferred; no other unknown field is sent, and
/// never a `cache_control`. The deferred placeholder is appended on mode routes that set
/// [`deferred_placeholder`](Route::deferred_placeholder), never on inline routes.
///
/// Reasoning goes back as `thinking` only when signed and produced by this route's provider,
/// `redacted_thinking` verbatim in place under the same provenance rule; anything else is left
/// out and counted in [`WireReport::unverifiable_reasoning_left_out`]. The session's thinking
/// policy ([`WireContext::thinking`], see [`ThinkingPlan`]) applies on routes that bind
/// thinking. An assistant message all of whose blocks are left out sends nothing: the API
/// refuses an empty assistant turn, so it opens none, and the user turns around it merge.
///
/// Caching, on [`auto_cache`](Route::auto_cache) routes: a top-level
/// `"cache_control":{"type":"ephemeral"}` unless the config has its own `cache_control`. The
/// provider looks for the previous request's cache entry only within 20 content blocks
/// (a third-party-quoted figure) of the new breakpoint, so when
/// [`WireContext::previous_blocks`] is `Some(n)` and at least 20 blocks follow block `n - 1`
/// (counted over the content arrays of the wire messages, in order), that block also gets
/// `cache_control` (with the config's `ttl`, if any); a thinking block cannot carry one, so the
/// nearest earlier block that can takes it. Its index is
/// [`WireReport::lookback_breakpoint`].
///
/// Costs O(messages + blocks + tools).
///
/// ```
/// use mektpoy::wire::{WireError, serialize_messages};
/// use mektpoy::{Config, Message, project::ProjectedToolUpdates, route_for};
/// let messages = [Message::system("p", "Be brief."), Message::user("u1", "hi")];
/// let projected = ProjectedToolUpdates::new(&messages[..]);
/// let route = route_for("deepseek", "deepseek-flash");
/// let config = Config::new("deepseek", "deepseek-flash");
/// // The Messages API requires `max_tokens`.
/// assert!(matches!(serialize_messages(&config, &projected, &route), Err(WireError::MissingMaxTokens)));
/// let config = config.with("max_tokens", 64.into())?;
/// let request = serialize_messages(&config, &projected, &route)?;
/// assert!(request.body().contains(r#""system":"Be brief.""#));
/// # Ok::<(), mektpoy::Error>(())
/// ```
///
/// # Errors
/// - [`WireError::MissingMaxTokens`] without a `max_tokens` option;
///   [`WireError::ReservedConfigKey`] for an option named `model`, `provider`, `system`,
///   `tools` or `messages`; [`WireError::ForcedToolChoice`] for a `tool_choice` of type `any`
///   or `tool` on a route without [`forced_tool_choice`](Route::forced_tool_choice);
/// - [`WireError::ReservedToolName`], [`WireError::DuplicateToolName`] for the projected tools;
///   [`WireError::SchemaRootNotObject`] for a tool (declared or defined by
///   value) whose `parameters` lack `"type": "object"` at the root;
///   [`WireError::ToolLimitExceeded`] when the request makes more tools available than the
///   provider allows (what counts: [`ToolLimit`]);
/// - [`MessageFault::DeveloperBlock`] for a developer block other than a tool change or text (a
///   `tool-redefinition` included: the projection always turns it into a by-value addition or
///   drops it); [`MessageFault::InlineDefinitionUnsupported`] for a by-value addition on a route
///   without inline definitions; [`MessageFault::ToolChangeOutsideDeveloper`] for a tool change outside a
///   developer message; [`MessageFault::UnsupportedBlock`] for any other block the role cannot
///   carry (an unknown block type anywhere, reasoning or a tool call outside an assistant
///   message, a sent reasoning block with a `type` or `thinking` field of its own);
/// - [`MessageFault::DuplicateCallId`] for tool calls; [`MessageFault::MissingToolResult`],
///   [`MessageFault::OrphanToolResult`], [`MessageFault::ToolResultWithoutCallId`] when calls and results
///   do not pair up turn by turn; [`MessageFault::EmptyTurn`] for a turn without content (a final
///   assistant turn excepted; an assistant message that leaving reasoning out empties opens no
///   turn, and the user turns around it merge);
/// - [`MessageFault::AssistantPrefill`] when the wire messages end with an assistant turn on a
///   route without [`assistant_prefill`](Route::assistant_prefill);
/// - [`MessageFault::ThinkingRewrite`] under the `Refuse` policy and
///   [`WireError::DropBlockThinkingType`] under `DropBlock` (see [`ThinkingPlan`]).
pub fn serialize_messages(
    config: &Config,
    projected: &ProjectedToolUpdates<'_>,
    route: &Route,
) -> Result<WireRequest, WireError> {
    serialize_messages_with(config, projected, route, &WireContext::default())
}

/// [`serialize_messages`] with the route's previous request and thinking floor.
pub(crate) fn serialize_messages_with(
    config: &Config,
    projected: &ProjectedToolUpdates<'_>,
    route: &Route,
    context: &WireContext<'_>,
) -> Result<WireRequest, WireError> {
    pass(config, projected, route, context, None, false).0
}

/// [`serialize_messages_with`], resuming from what the route's previous request left
/// (`resume`) when this request's messages start with the messages it was built from and the
/// pass would treat them the same way ([`Resume`]); otherwise from the first message. Returns
/// what the next request of the route can resume from (the given one back when the request
/// is refused before its messages are read), and, when it resumed, the number of wire
/// messages it took as they were.
pub(crate) fn serialize_messages_resuming(
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

/// The serializer's pass; `keep`: whether to build what the next request resumes from (the
/// recorder keeps it; a stateless call would only drop it).
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
    let checked = (|| {
        let options = sorted_options(config)?;
        if !config.extra.contains_key("max_tokens") {
            return Err(WireError::MissingMaxTokens);
        }
        check_tool_choice(config, route)?;
        let tools = checked_tools(projected, MESSAGES_MAX_TOOL_NAME)?;
        Ok((options, tools))
    })();
    let (options, tools) = match checked {
        Ok(v) => v,
        Err(e) => return (Err(e), resume, None),
    };
    // Every Messages-API endpoint takes `input_schema` as the vendor documents it, root
    // object included (decision 86).
    for tool in tools {
        if let Err(e) = limits::check_schema_root(tool, None, None) {
            return (Err(e), resume, None);
        }
    }
    let anthropic = route.provider == "anthropic";
    // On a mode route with the placeholder, a deferred-tools section exists from a
    // series' first request on, on the main path and on fallbacks alike, so it never toggles.
    // Inline routes accept declarations that are all deferred: no placeholder there.
    let placeholder = route.deferred_placeholder()
        && route.tool_update().is_some()
        && !route.inline_definitions()
        && tools.iter().any(|t| !t.defer_loading());
    // The limits are the vendor's (Anthropic); by-value definitions exist only on inline routes.
    let limited = anthropic || route.inline_definitions();
    if limited {
        let deferred = tools.iter().filter(|t| t.defer_loading()).count();
        if let Err(e) = limits::check_deferred(deferred + usize::from(placeholder)) {
            return (Err(e), resume, None);
        }
    }
    let rules = Rules {
        prompts_in_history: route.system_prompt_in_history(),
        provider: &route.provider,
        model: route.binds_thinking().then_some(config.model.as_str()),
        inline: route.inline_definitions(),
        anthropic,
        limited,
        binding: Binding::new(context.thinking.as_ref(), route),
    };
    let key = ResumeKey::new(&rules, context);
    let mut resume = resume.filter(|r| r.key == key);
    let start = match &mut resume {
        Some(r) => r.matches(&projected.messages),
        None => None,
    };
    if start.is_none() {
        resume = None;
    }
    let prior = resume.as_ref().zip(start);
    let built = Conversation::build(&projected.messages, &rules, prior);
    let conversation = match built {
        Ok(c) => c,
        Err(e) => return (Err(e), resume, None),
    };
    let request = finish(
        config,
        route,
        context,
        options,
        tools,
        anthropic,
        placeholder,
        conversation,
        resume.as_ref(),
        keep,
    );
    let (mut request, tail) = match request {
        Ok(v) => v,
        Err(e) => return (Err(e), resume, None),
    };
    let resumed_turns = resume.as_ref().map(|r| r.turns.len());
    let next = if keep {
        Resume::next(resume, key, &projected.messages, start.unwrap_or(0), tail)
    } else {
        None
    };
    // The segments were just built: this is their only handle.
    if let Some(segments) = request.segments.as_mut().and_then(std::sync::Arc::get_mut) {
        segments.leaves = next.as_ref().map(|r| std::sync::Arc::clone(&r.token));
    }
    // A resumed pass (one that took wire messages as they were) equals a fresh one.
    #[cfg(debug_assertions)]
    if start.is_some() {
        super::resume_check::check_resumed("Messages", Ok(&request), next.as_ref(), || {
            let (fresh, fresh_next, _) = pass(config, projected, route, context, None, keep);
            (fresh, fresh_next)
        });
    }
    (Ok(request), next, resumed_turns)
}

/// The rest of the request once its wire messages are built: the prefill check, the thinking
/// and caching options, the lookback breakpoint, the body and the headers; `keep` as in
/// [`pass`].
#[allow(clippy::too_many_arguments)]
fn finish<'a>(
    config: &Config,
    route: &Route,
    context: &WireContext<'_>,
    options: Vec<(&str, &Value)>,
    tools: &[ToolSchema],
    anthropic: bool,
    placeholder: bool,
    conversation: Conversation<'a>,
    prior: Option<&Resume>,
    keep: bool,
) -> Result<(WireRequest, Tail), WireError> {
    let mut conversation = conversation;
    let carried = std::mem::take(&mut conversation.carried);
    if !route.assistant_prefill()
        && let Some(turn) = conversation
            .turns
            .last()
            .filter(|t| t.role == TurnRole::Assistant)
    {
        return Err(WireError::message(
            turn.opened_by.to_owned(),
            MessageFault::AssistantPrefill,
        ));
    }

    let drop_block = conversation.bound_sent > 0;
    let thinking = drop_block
        .then(|| thinking::drop_block_thinking(config))
        .transpose()?;
    let auto_cache = (route.auto_cache() && !config.extra.contains_key("cache_control"))
        .then(|| serde_json::json!({"type": "ephemeral"}));
    let prior_blocks: &[BlockSpan] = prior.map_or(&[], |r| &r.blocks);
    let lookback_breakpoint = if route.auto_cache() {
        lookback(context.previous_blocks, prior_blocks, &conversation.turns)
    } else {
        None
    };
    let cache_mark = lookback_breakpoint.map(|index| (index, block_cache_control(config)));

    let mut options = options;
    if let Some(thinking) = &thinking {
        upsert(&mut options, "thinking", thinking);
    }
    if let Some(cache_control) = &auto_cache {
        upsert(&mut options, "cache_control", cache_control);
    }
    let wire_tools: Vec<WireTool<'_>> = tools
        .iter()
        .map(|t| WireTool::Declared(DeclaredTool::new(t, anthropic)))
        .chain(placeholder.then_some(WireTool::Placeholder(PLACEHOLDER_TOOL)))
        .collect();
    #[cfg(debug_assertions)]
    let whole = prior.is_none().then(|| {
        if let Some((index, cache_control)) = &cache_mark {
            mark(&mut conversation.turns, *index, cache_control.clone());
        }
        Body {
            model: &config.model,
            options: options.clone(),
            system: conversation.system.as_deref(),
            tools: wire_tools.iter().collect(),
            messages: conversation.turns.iter().collect(),
        }
        .to_json()
    });
    // A pass from the first message writes its wire messages straight into the body (and
    // copies them out only for a resume point); a resumed one writes its new ones apart, to
    // join them to the kept bytes.
    let (body, segments, tail) = match prior {
        None => write_fresh_body(
            &config.model,
            options,
            conversation.system.as_deref(),
            &wire_tools,
            &conversation.turns,
            cache_mark.as_ref(),
            keep && conversation.boundary.is_some(),
        ),
        Some(_) => {
            let tail = write_turns(&conversation.turns);
            let (body, segments) = write_body(
                &config.model,
                options,
                conversation.system.as_deref(),
                &wire_tools,
                prior,
                &tail,
                cache_mark.as_ref(),
            );
            (body, segments, tail)
        }
    };
    // Every debug build (the tests) checks that the segment-noting writer writes the bytes
    // the serializer's own `Body` writes.
    #[cfg(debug_assertions)]
    if let Some(whole) = whole {
        debug_assert_eq!(body, whole, "write_body departs from Body's bytes");
    }
    let mut headers = vec![
        ("content-type".to_owned(), "application/json".to_owned()),
        ("anthropic-version".to_owned(), ANTHROPIC_VERSION.to_owned()),
    ];
    let mut betas = Vec::with_capacity(2);
    if route.beta_always() || conversation.has_tool_change {
        betas.push(if route.inline_definitions() {
            INLINE_TOOLS_BETA
        } else {
            TOOL_CHANGE_BETA
        });
    }
    if drop_block {
        betas.push(THINKING_BINDING_BETA);
    }
    if !betas.is_empty() {
        headers.push(("anthropic-beta".to_owned(), betas.join(",")));
    }
    let mut request = WireRequest::new(body, headers);
    let mut segments = segments;
    segments.carried = carried.clone();
    debug_assert_eq!(
        segments.carried.turns(),
        segments.first + segments.messages.len(),
        "the grouping counts other wire messages than the body holds"
    );
    request.segments = Some(std::sync::Arc::new(segments));
    request.report = WireReport {
        thinking_left_out: conversation.stripped,
        unverifiable_reasoning_left_out: conversation.unverifiable,
        drop_block,
        lookback_breakpoint,
    };
    let tail = Tail {
        roles: conversation.turns.iter().map(|t| t.role).collect(),
        boundary: conversation.boundary,
        carried,
        ..tail
    };
    Ok((request, tail))
}

/// The wire messages a pass wrote itself (after the point it resumed from), comma-joined and
/// without a cache mark, with their spans (relative to `bytes`), and the pass's state where
/// its last assistant turn opened.
#[derive(Default)]
struct Tail {
    bytes: String,
    turns: Vec<TurnSpan>,
    blocks: Vec<BlockSpan>,
    roles: Vec<TurnRole>,
    boundary: Option<Boundary>,
    /// What every wire message of the request carries (the resumed prefix's included).
    carried: Carried,
}

fn write_turns(turns: &[Turn<'_>]) -> Tail {
    let mut tail = Tail {
        bytes: String::new(),
        turns: Vec::with_capacity(turns.len()),
        blocks: Vec::with_capacity(turns.iter().map(|t| t.content.len()).sum()),
        ..Tail::default()
    };
    let mut bytes = Vec::new();
    write_turn_list(&mut bytes, turns, None, &mut tail.turns, &mut tail.blocks);
    // serde_json writes UTF-8 and so do the literals above; only this pass's bytes are
    // checked.
    tail.bytes = String::from_utf8(bytes).expect("JSON is UTF-8");
    tail
}

/// Writes `turns` comma-joined at the end of `out`, with `mark` (a block index over
/// `blocks`, counted from its current length, and the mark's text) before that block's
/// closing brace, pushing each wire message's and block's span (positions in `out`). Returns
/// where the mark went and its length. The one writer of wire messages: a resumed pass writes
/// them into a buffer of their own, a pass from the first message straight into the body.
fn write_turn_list(
    out: &mut Vec<u8>,
    turns: &[Turn<'_>],
    mark: Option<(usize, &str)>,
    messages: &mut Vec<TurnSpan>,
    blocks: &mut Vec<BlockSpan>,
) -> Option<(usize, usize)> {
    let offset = blocks.len();
    let mut cut = None;
    for (i, turn) in turns.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        let start = out.len();
        out.extend_from_slice(b"{\"role\":");
        json(out, &turn.role);
        out.extend_from_slice(b",\"content\":[");
        let first = blocks.len();
        for (j, block) in turn.content.iter().enumerate() {
            if j > 0 {
                out.push(b',');
            }
            let at = out.len();
            json(out, block);
            if let Some((_, text)) = mark.filter(|(index, _)| *index + offset == first + j) {
                // Before the block's closing brace, as `write_body` splices it.
                let brace = out.pop();
                debug_assert_eq!(brace, Some(b'}'), "a marked block is an object");
                cut = Some((out.len(), text.len()));
                out.extend_from_slice(text.as_bytes());
                out.push(b'}');
            }
            blocks.push(BlockSpan {
                span: at..out.len(),
                thinking: !block.can_carry_cache_control(),
            });
        }
        out.extend_from_slice(b"]}");
        messages.push(TurnSpan {
            span: start..out.len(),
            blocks: first..blocks.len(),
        });
    }
    cut
}

/// Writes the body as `Body` serializes it (compact JSON, the same bytes): the head, then the
/// wire messages the previous request's pass wrote (`prior`) and this pass's (`tail`), one
/// block marked with `cache_mark` (an index over all blocks), noting where `tools`, `system`,
/// each wire message and each content block lie: what rewrite detection compares, found
/// without parsing the body again.
fn write_body(
    model: &str,
    options: Vec<(&str, &Value)>,
    system: Option<&str>,
    tools: &[WireTool<'_>],
    prior: Option<&Resume>,
    tail: &Tail,
    cache_mark: Option<&(usize, Value)>,
) -> (String, Segments) {
    let (prior_bytes, prior_turns, prior_blocks) = match prior {
        Some(r) => (r.bytes.as_str(), &r.turns[..], &r.blocks[..]),
        None => ("", &[][..], &[][..]),
    };
    let sep = usize::from(!prior_bytes.is_empty() && !tail.bytes.is_empty());
    let tail_at = prior_bytes.len() + sep;
    // The mark goes before the closing brace of its block: `,"cache_control":{…}`.
    let marker = cache_mark.map(|(index, cache_control)| {
        let end = match prior_blocks.get(*index) {
            Some(b) => b.span.end,
            None => tail_at + tail.blocks[*index - prior_blocks.len()].span.end,
        };
        (end - 1, marker_text(cache_control))
    });
    let mut segments = Segments {
        first: prior_turns.len(),
        first_block: prior_blocks.len(),
        resumed: prior.map(|r| std::sync::Arc::clone(&r.token)),
        messages: Vec::with_capacity(tail.turns.len()),
        blocks: Vec::with_capacity(tail.blocks.len()),
        ..Segments::default()
    };
    let mut out = write_head(model, options, system, tools, &mut segments);
    out.reserve(prior_bytes.len() + tail.bytes.len() + 64);
    let base = out.len();
    // The messages' bytes, `prior ++ sep ++ tail`, with the marker spliced in: one copy of
    // the kept bytes, no validation (they are already a `String`).
    let pieces: [&str; 3] = [prior_bytes, &","[..sep], &tail.bytes];
    let (cut, marker_len) = match &marker {
        Some((at, text)) => (*at, text.len()),
        None => (usize::MAX, 0),
    };
    let mut written = 0;
    for piece in pieces {
        match &marker {
            Some((at, text)) if *at >= written && *at < written + piece.len() => {
                out.push_str(&piece[..at - written]);
                out.push_str(text);
                out.push_str(&piece[at - written..]);
            }
            _ => out.push_str(piece),
        }
        written += piece.len();
    }
    // A position in `prior ++ sep ++ tail` as a position in the body. Only this pass's wire
    // messages get spans: the kept ones have the previous request's (before a marker spliced
    // among them, which only moves what follows).
    let place = |pos: usize| base + pos + if pos > cut { marker_len } else { 0 };
    let shift = prior_blocks.len();
    for t in &tail.turns {
        segments.messages.push(TurnSpan {
            span: place(t.span.start + tail_at)..place(t.span.end + tail_at),
            blocks: t.blocks.start + shift..t.blocks.end + shift,
        });
    }
    for b in &tail.blocks {
        segments.blocks.push(BlockSpan {
            span: place(b.span.start + tail_at)..place(b.span.end + tail_at),
            thinking: b.thinking,
        });
    }
    out.push_str("]}");
    segments.body_len = out.len();
    (out, segments)
}

/// `,"cache_control":{…}`: the lookback breakpoint's bytes, spliced in before the closing
/// brace of its block (the bytes `Marked` writes there).
fn marker_text(cache_control: &Value) -> String {
    let value =
        serde_json::to_string(&Canonical(cache_control)).expect("a string-keyed value cannot fail");
    format!(",\"cache_control\":{value}")
}

/// The body up to the first byte inside its `messages` array, as `Body` writes it, noting
/// where `system` and `tools` lie and where the messages start.
fn write_head(
    model: &str,
    options: Vec<(&str, &Value)>,
    system: Option<&str>,
    tools: &[WireTool<'_>],
    segments: &mut Segments,
) -> String {
    const MESSAGES: &str = "\"messages\":[]}";
    // `{"model":…,<options>,` from the serializer itself, so the head's bytes are its own.
    let head = Body::<WireTool<'_>, Turn<'_>> {
        model,
        options,
        system: None,
        tools: Vec::new(),
        messages: Vec::new(),
    }
    .to_json();
    let mut out = head;
    out.truncate(out.len() - MESSAGES.len());
    out.reserve(tools.len() * 64 + system.map_or(0, str::len) + 64);
    let json = |value: &dyn erased_serde_free::Json| value.to_json();
    if let Some(system) = system.filter(|s| !s.is_empty()) {
        out.push_str("\"system\":");
        let start = out.len();
        out.push_str(&json(&system));
        segments.system = Some(start..out.len());
        out.push(',');
    }
    if !tools.is_empty() {
        out.push_str("\"tools\":");
        let start = out.len();
        out.push_str(&json(&tools));
        segments.tools = Some(start..out.len());
        out.push(',');
    }
    out.push_str("\"messages\":[");
    segments.messages_at = out.len();
    out
}

/// The body of a pass from the first message (no `prior`), its wire messages written
/// straight into it (the lookback mark `cache_mark` spliced in as its block is written), with
/// the spans `write_body` notes: no buffer of their own, no second copy. Only when `tail`
/// is asked for (a pass that leaves a resume point) are the wire messages copied out, without
/// the mark, for the resume point to keep; the body is checked as UTF-8 once, whole.
fn write_fresh_body(
    model: &str,
    options: Vec<(&str, &Value)>,
    system: Option<&str>,
    tools: &[WireTool<'_>],
    turns: &[Turn<'_>],
    cache_mark: Option<&(usize, Value)>,
    tail: bool,
) -> (String, Segments, Tail) {
    let block_count = turns.iter().map(|t| t.content.len()).sum();
    let mut segments = Segments {
        messages: Vec::with_capacity(turns.len()),
        blocks: Vec::with_capacity(block_count),
        ..Segments::default()
    };
    let mut out = write_head(model, options, system, tools, &mut segments).into_bytes();
    let base = out.len();
    let marker = cache_mark.map(|(index, cache_control)| (*index, marker_text(cache_control)));
    // Where the marker starts in the body, and its length.
    let cut = write_turn_list(
        &mut out,
        turns,
        marker.as_ref().map(|(index, text)| (*index, text.as_str())),
        &mut segments.messages,
        &mut segments.blocks,
    );
    let end = out.len();
    out.extend_from_slice(b"]}");
    segments.body_len = out.len();
    // serde_json writes UTF-8 and so do the literals above.
    let body = String::from_utf8(out).expect("JSON is UTF-8");
    let tail = if tail {
        // This pass's bytes as `write_turns` writes them: relative to the first wire
        // message, without the mark.
        let (cut, len) = cut.unwrap_or((usize::MAX, 0));
        let local = |pos: usize| pos - base - if pos > cut { len } else { 0 };
        let mut bytes = String::with_capacity(end - base - len);
        if cut < end {
            bytes.push_str(&body[base..cut]);
            bytes.push_str(&body[cut + len..end]);
        } else {
            bytes.push_str(&body[base..end]);
        }
        Tail {
            bytes,
            turns: segments
                .messages
                .iter()
                .map(|t| TurnSpan {
                    span: local(t.span.start)..local(t.span.end),
                    blocks: t.blocks.clone(),
                })
                .collect(),
            blocks: segments
                .blocks
                .iter()
                .map(|b| BlockSpan {
                    span: local(b.span.start)..local(b.span.end),
                    thinking: b.thinking,
                })
                .collect(),
            ..Tail::default()
        }
    } else {
        Tail::default()
    };
    (body, segments, tail)
}

/// Writing a value of one of several types as compact JSON through one closure.
mod erased_serde_free {
    use serde::Serialize;

    pub(super) trait Json {
        fn to_json(&self) -> String;
    }

    impl<T: Serialize + ?Sized> Json for T {
        fn to_json(&self) -> String {
            // Every map key on the way is a string and `Value` holds only finite numbers.
            serde_json::to_string(self).expect("a string-keyed value cannot fail")
        }
    }
}

/// Appends `value` as compact JSON. Cannot fail: every map key on the way is a string and
/// `Value` holds only finite numbers.
fn json<T: Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) {
    serde_json::to_writer(out, value).expect("serializing a string-keyed value cannot fail");
}

/// Refuses a forced `tool_choice` (`any` / `tool`) on a route whose model does not accept one.
fn check_tool_choice(config: &Config, route: &Route) -> Result<(), WireError> {
    if route.forced_tool_choice() {
        return Ok(());
    }
    match config
        .extra
        .get("tool_choice")
        .and_then(|c| c.get("type"))
        .and_then(Value::as_str)
    {
        Some(t @ ("any" | "tool")) => Err(WireError::ForcedToolChoice {
            choice_type: t.to_owned(),
        }),
        _ => Ok(()),
    }
}

/// Puts `(key, value)` among the sorted options, replacing an entry of that key.
fn upsert<'v>(options: &mut Vec<(&'v str, &'v Value)>, key: &'v str, value: &'v Value) {
    match options.binary_search_by(|(k, _)| (*k).cmp(key)) {
        Ok(i) => options[i].1 = value,
        Err(i) => options.insert(i, (key, value)),
    }
}

/// The `cache_control` of a lookback breakpoint: ephemeral, with the `ttl` of the config's
/// top-level `cache_control` if it has one (so both breakpoints live as long).
fn block_cache_control(config: &Config) -> Value {
    let mut m = Map::new();
    m.insert("type".to_owned(), Value::from("ephemeral"));
    if let Some(ttl) = config.extra.get("cache_control").and_then(|c| c.get("ttl")) {
        m.insert("ttl".to_owned(), ttl.clone());
    }
    Value::Object(m)
}

/// The index (over the content blocks of the wire messages, in order: `prior`'s, then
/// `turns`') of the lookback breakpoint: the last block the previous request sent
/// (`previous - 1`) when at least [`LOOKBACK_BLOCKS`] blocks follow it, moved back to the
/// nearest block that can carry `cache_control`.
fn lookback(previous: Option<usize>, prior: &[BlockSpan], turns: &[Turn<'_>]) -> Option<usize> {
    let previous = previous.filter(|&n| n > 0)?;
    let total: usize = prior.len() + turns.iter().map(|t| t.content.len()).sum::<usize>();
    if total < previous + LOOKBACK_BLOCKS {
        return None;
    }
    let carries: Vec<bool> = turns
        .iter()
        .flat_map(|t| &t.content)
        .map(Block::can_carry_cache_control)
        .collect();
    (0..previous).rev().find(|&i| match prior.get(i) {
        Some(b) => !b.thinking,
        None => carries[i - prior.len()],
    })
}

/// Marks block `index` (over the content blocks of `turns`) with `cache_control`: for the
/// debug builds' check of the writer against `Body` (the writer splices the mark in itself).
#[cfg(debug_assertions)]
fn mark(turns: &mut [Turn<'_>], mut index: usize, cache_control: Value) {
    for turn in turns {
        if index < turn.content.len() {
            turn.cache_mark = Some((index, cache_control));
            return;
        }
        index -= turn.content.len();
    }
}

/// What the pass over the messages needs to know about the route and the request.
struct Rules<'r> {
    prompts_in_history: bool,
    provider: &'r str,
    /// On a route that binds thinking, the configuration's model: only its own signed
    /// reasoning is sent back.
    model: Option<&'r str>,
    inline: bool,
    /// Anthropic's own rules apply (schema roots).
    anthropic: bool,
    /// The provider's tool limits are counted.
    limited: bool,
    binding: Binding<'r>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A turn of text blocks, with a thinking block (which cannot carry the mark) first when
    /// `thinking`.
    fn turn<'a>(
        role: TurnRole,
        texts: &'a [String],
        thinking: bool,
        extra: &'a IndexMap<String, Value>,
    ) -> Turn<'a> {
        let mut content: Vec<Block<'a>> = Vec::new();
        if thinking {
            content.push(Block::Thinking { text: "hmm", extra });
        }
        content.extend(texts.iter().map(|t| Block::Text(Cow::Borrowed(t.as_str()))));
        Turn::new(role, content, "m")
    }

    proptest! {
        /// The body written straight from the turns (the path of a pass from the first
        /// message) is the body, and the spans, that joining separately written wire messages
        /// gives, for a lookback mark on any block or none; and the wire messages it copies
        /// out for a resume point are those bytes and spans, without the mark.
        #[test]
        fn fresh_body_is_the_joined_body(
            turns in prop::collection::vec(
                (prop::collection::vec("[a-z\"\\\\\u{e9}\u{4e2d}\u{1f600}]{0,6}", 0..3), any::<bool>()),
                0..5,
            ),
            mark in any::<prop::sample::Index>(),
            marked in any::<bool>(),
            system in prop::option::of("[a-z\u{e9}]{0,4}"),
        ) {
            let extra = IndexMap::from([("signature".to_owned(), Value::from("s"))]);
            let turns: Vec<Turn<'_>> = turns
                .iter()
                .enumerate()
                .map(|(i, (texts, thinking))| {
                    let role = if i % 2 == 0 { TurnRole::User } else { TurnRole::Assistant };
                    turn(role, texts, *thinking, &extra)
                })
                .collect();
            let carriers: Vec<usize> = turns
                .iter()
                .flat_map(|t| &t.content)
                .enumerate()
                .filter(|(_, b)| b.can_carry_cache_control())
                .map(|(i, _)| i)
                .collect();
            let cache_mark = (marked && !carriers.is_empty())
                .then(|| (carriers[mark.index(carriers.len())], serde_json::json!({"type": "ephemeral", "ttl": "1h"})));
            let max_tokens = Value::from(64);
            let options = vec![("max_tokens", &max_tokens)];
            let tools: Vec<WireTool<'_>> = vec![WireTool::Placeholder(PLACEHOLDER_TOOL)];

            let joined_tail = write_turns(&turns);
            let (joined, joined_segments) = write_body(
                "m",
                options.clone(),
                system.as_deref(),
                &tools,
                None,
                &joined_tail,
                cache_mark.as_ref(),
            );
            let (body, segments, tail) = write_fresh_body(
                "m",
                options,
                system.as_deref(),
                &tools,
                &turns,
                cache_mark.as_ref(),
                true,
            );
            prop_assert_eq!(&body, &joined);
            prop_assert_eq!(&segments, &joined_segments);
            prop_assert_eq!(&tail.bytes, &joined_tail.bytes);
            prop_assert_eq!(&tail.turns, &joined_tail.turns);
            prop_assert_eq!(&tail.blocks, &joined_tail.blocks);
            if cache_mark.is_some() {
                let text = r#""cache_control":{"ttl":"1h","type":"ephemeral"}"#;
                prop_assert_eq!(body.matches(text).count(), 1);
            }
        }
    }
}
