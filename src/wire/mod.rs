//! Wire serialization: a projected request → the bytes one provider endpoint receives.
//!
//! [`serialize`] dispatches on [`Route::api`] to [`serialize_messages`] (the Messages API of
//! DeepSeek's Anthropic-compatible endpoint and of Anthropic), [`serialize_openai_chat`] or
//! [`serialize_responses`] (OpenAI's Responses API). All of them are pure: no I/O, no clock, no global state, and the same input gives the same bytes.
//!
//! Only this module knows provider field names (`input_schema`, `tool_reference`,
//! `tool_calls`). Bodies are written from ordered structs through `serde::Serializer`, never
//! through a `serde_json::Value` object: whether `serde_json::Map` keeps insertion order depends
//! on a Cargo feature (`preserve_order`) that any crate in the build may turn on. JSON values
//! that come from the log (config options, tool parameters) are written with their object keys
//! sorted at every depth, which is what the default `Map` yields, so the bytes do not depend on
//! that feature either. Tool-call arguments are the exception: they are the model's own text
//! and go out as written (see [`serialize_messages`]).
//!
//! Input a provider cannot represent is refused with a [`WireError`] naming the message id,
//! block index or tool, never sent in a form the provider would reject or misread.

mod arguments;
mod canonical;
mod fingerprint;
mod limits;
mod messages;
mod openai;
mod responses;
#[cfg(debug_assertions)]
mod resume_check;
mod thinking;

#[cfg(test)]
mod tests;

use std::collections::HashSet;
use std::ops::Range;
use std::sync::Arc;

use serde::Serialize;
use serde::ser::Serializer;
use serde_json::Value;

use crate::event::Config;
use crate::project::ProjectedToolUpdates;
use crate::route::{Route, WireApi};
use crate::vocab::{ContentBlock, Message, MessageSource, Role, ToolSchema};

pub(crate) use arguments::compact as compact_json;
pub use arguments::{ArgumentsFault, arguments_fault};
use canonical::Canonical;
pub(crate) use fingerprint::{Fingerprint, without_markers};
pub(crate) use thinking::is_bound_thinking;

pub(crate) use messages::LOOKBACK_BLOCKS;
pub use messages::serialize_messages;
pub use openai::serialize_openai_chat;
pub use responses::serialize_responses;

pub use crate::vocab::DEFERRED_PLACEHOLDER_NAME;

/// One serialized request: the exact body bytes and the HTTP headers that go with them.
///
/// The [`body`](Self::body) is compact JSON in a fixed key order (see [`serialize_messages`]).
/// The [`headers`](Self::headers) hold lowercase names in a fixed order; the endpoint URL and
/// authentication are the caller's (no HTTP here). The fields are read through methods: the
/// serializer notes where it put each part of the body, and the meter and the recorder read
/// those notes, so a body changed in place would leave them describing other bytes. To send
/// the bytes without a copy, take them with [`into_parts`](Self::into_parts).
///
/// ```
/// use mektpoy::{Config, Message, Route, project::ProjectedToolUpdates, route::WireApi, wire::serialize};
/// let config = Config::new("acme", "acme-1");
/// let messages = [Message::user("u1", "hello")];
/// let route = Route::plain("acme", "acme-1", WireApi::OpenAiChat);
/// let request = serialize(&config, &ProjectedToolUpdates::new(&messages[..]), &route)?;
/// assert_eq!(request.body(), r#"{"model":"acme-1","messages":[{"role":"user","content":"hello"}]}"#);
/// assert_eq!(request.header("content-type"), Some("application/json"));
/// # Ok::<(), mektpoy::wire::WireError>(())
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct WireRequest {
    pub(crate) body: String,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) report: WireReport,
    pub(crate) series_start: Option<crate::event::SeriesStart>,
    /// Where the serializer put each part of `body` (`None` from [`WireRequest::new`]): what
    /// the recorder compares with the route's previous request (Messages API), and what the
    /// loop's meter cuts the body by without parsing it (both APIs). Not part of the
    /// request's identity (equality ignores it: it is derived from `body`).
    pub(crate) segments: Option<Arc<Segments>>,
    /// Which recorded request this was serialized from (set by `Request::to_wire`), so that
    /// the loop that observes it knows the request without serializing it again. Not part of
    /// the request's identity either.
    pub(crate) origin: Option<u64>,
}

/// Two requests are equal when they send the same thing: body, headers, report and series
/// start. The segments are a by-product of writing the body.
impl PartialEq for WireRequest {
    fn eq(&self, other: &Self) -> bool {
        self.body == other.body
            && self.headers == other.headers
            && self.report == other.report
            && self.series_start == other.series_start
    }
}

impl Eq for WireRequest {}

/// Byte ranges into a body, as the serializer wrote it. On a chat body `system` is `None` (the
/// system message is the first wire message) and a wire message's blocks are the text parts
/// of its `content` array (none when `content` is a string or absent), which is what the meter
/// counts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Segments {
    /// The `tools` array, when sent.
    pub tools: Option<Range<usize>>,
    /// The `system` string, when sent.
    pub system: Option<Range<usize>>,
    /// The number of wire messages before `messages[0]`: those a resumed pass took as they
    /// were from the previous request of the route (their spans are that request's, shifted
    /// only past a cache mark spliced among them); 0 for a pass from the first message.
    pub first: usize,
    /// The number of content blocks those hold.
    pub first_block: usize,
    /// Each element of `messages` from `first` on, in order.
    pub messages: Vec<TurnSpan>,
    /// Every content block from `first_block` on, in order (what the lookback counts).
    pub blocks: Vec<BlockSpan>,
    /// The offset of the first byte inside the `messages` array: everything before it is the
    /// head (`model`, options, `system`, `tools`), small and read again per request.
    pub messages_at: usize,
    /// The body's length as written: a reader of these spans checks it first (`body` is a
    /// public field, and a body edited since has spans of its own).
    pub body_len: usize,
    /// A token naming the resume point the `first` wire messages were taken from (`None` for
    /// a pass from the first message). The same allocation as [`leaves`](Self::leaves) of
    /// the request whose pass left that point: a meter holding that request's token (alive,
    /// so its address is not reused) knows by pointer that those wire messages are that
    /// request's, byte for byte wherever neither request spliced its cache mark.
    pub resumed: Option<std::sync::Arc<()>>,
    /// The token of the resume point this pass left for the next request of the route
    /// (`None` when it left none). Minted anew by every pass that leaves one.
    pub leaves: Option<std::sync::Arc<()>>,
    /// Which projected messages and blocks every wire message of the body carries, the resumed ones
    /// included: what the attribution names a departure by ([decision
    /// 104](crate::manual::decisions#decision-104)).
    pub carried: Carried,
}

/// The index of the first entry of `entries` (sorted by wire message) whose wire message is
/// `wire` or later.
fn first_at<T: Clone>(
    entries: &imbl::Vector<T>,
    wire_of: impl Fn(&T) -> usize,
    wire: usize,
) -> usize {
    match entries.binary_search_by(|e| {
        if wire_of(e) < wire {
            std::cmp::Ordering::Less
        } else {
            std::cmp::Ordering::Greater
        }
    }) {
        Ok(i) | Err(i) => i,
    }
}

/// Which projected messages, and which of their content blocks, each wire message of a body
/// carries, as the serializer's pass grouped them. The pass merges consecutive user content into
/// one turn, passes over an assistant message that sends nothing ([decision
/// 95](crate::manual::decisions#decision-95)) and sends queued prompt updates and tool changes as
/// one system message: a reader that grouped the messages itself would drift from the bytes, so the
/// pass records what it did. Indices are into the request's projected messages; a message the body
/// does not carry (a system node sent as `system`, an assistant message passed over) is in no
/// entry.
///
/// Persistent (`imbl`): a resumed pass shares the entries of the prefix it resumed from and
/// appends its own, O(new wire messages), as it does with the bytes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Carried {
    /// The number of wire messages.
    turns: usize,
    /// `(wire message, projected message)` for each message a wire message carries, in wire
    /// order (a message once per wire message).
    messages: imbl::Vector<(usize, usize)>,
    /// `(wire message, projected message, its content block)` for each wire content block,
    /// in body order. A tool result's block is its message's block 0; on chat routes the
    /// blocks are the text parts of a `content` array, as the meter counts them.
    blocks: imbl::Vector<(usize, usize, usize)>,
}

impl Carried {
    /// The number of wire messages.
    pub(crate) fn turns(&self) -> usize {
        self.turns
    }

    /// Opens the next wire message.
    pub(crate) fn open(&mut self) {
        self.turns += 1;
    }

    /// Projected message `message` joins the last wire message (once).
    pub(crate) fn join(&mut self, message: usize) {
        let wire = self.turns.saturating_sub(1);
        if self.messages.last() != Some(&(wire, message)) {
            self.messages.push_back((wire, message));
        }
    }

    /// Block `block` of projected message `message` is the next block of the last wire
    /// message (the message joins it too).
    pub(crate) fn block(&mut self, message: usize, block: usize) {
        self.join(message);
        self.blocks
            .push_back((self.turns.saturating_sub(1), message, block));
    }

    /// The entries of the first `turns` wire messages: what a resume point keeps. The
    /// entries are in wire order, so only the last ones are dropped.
    pub(crate) fn truncate(&mut self, turns: usize) {
        while self.messages.back().is_some_and(|(w, _)| *w >= turns) {
            self.messages.pop_back();
        }
        while self.blocks.back().is_some_and(|(w, _, _)| *w >= turns) {
            self.blocks.pop_back();
        }
        self.turns = self.turns.min(turns);
    }

    /// The projected messages wire message `wire` carries, in order.
    pub(crate) fn messages_of(&self, wire: usize) -> impl Iterator<Item = usize> + '_ {
        let from = first_at(&self.messages, |(w, _)| *w, wire);
        (from..self.messages.len())
            .map_while(move |i| self.messages.get(i).filter(|(w, _)| *w == wire))
            .map(|(_, m)| *m)
    }

    /// The wire message that carries projected message `message`, if any.
    pub(crate) fn wire_of(&self, message: usize) -> Option<usize> {
        self.messages
            .iter()
            .find(|(_, m)| *m == message)
            .map(|(w, _)| *w)
    }

    /// The projected message and content block that block `block` of wire message `wire`
    /// was written from.
    pub(crate) fn block_of(&self, wire: usize, block: usize) -> Option<(usize, usize)> {
        let from = first_at(&self.blocks, |(w, _, _)| *w, wire);
        match self.blocks.get(from.checked_add(block)?) {
            Some((w, m, b)) if *w == wire => Some((*m, *b)),
            _ => None,
        }
    }
}

/// One wire message: its bytes `{"role":…,"content":[…]}` and its blocks (indexes over all
/// the request's blocks: [`Segments::blocks`] starts at [`Segments::first_block`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TurnSpan {
    pub span: Range<usize>,
    pub blocks: Range<usize>,
}

/// Writes `items` comma-joined at the end of `out`, each by `write` (which pushes its content
/// parts' spans), pushing each item's span (positions in `out`; `blocks[0]` is the request's
/// part `block_base`, the number the item spans count from). The span keeping of the wires
/// that list their items in one array (chat's `messages`, the Responses API's `input`): a
/// resumed pass writes into a buffer of its own, a pass from the first message straight into
/// the body.
pub(crate) fn write_spanned<T>(
    out: &mut Vec<u8>,
    items: &[T],
    block_base: usize,
    turns: &mut Vec<TurnSpan>,
    blocks: &mut Vec<BlockSpan>,
    mut write: impl FnMut(&T, &mut Vec<u8>, &mut Vec<BlockSpan>),
) {
    turns.reserve(items.len());
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        let start = out.len();
        let first = blocks.len();
        write(item, out, blocks);
        turns.push(TurnSpan {
            span: start..out.len(),
            blocks: block_base + first..block_base + blocks.len(),
        });
    }
}

/// One content block's bytes, and whether it is a `thinking` or `redacted_thinking` block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct BlockSpan {
    pub span: Range<usize>,
    pub thinking: bool,
}

/// The body of a resumed request on a wire that lists its items in one array (chat's
/// `messages`, the Responses API's `input`): `head` up to the array's `[`, the kept items'
/// bytes `kept`, the new ones `tail` (their spans `turns` and `blocks` relative to it) and the
/// closing `]}`. The new spans move to the body, into `segments` (neither wire carries signed
/// thinking blocks); returns the body and where the new items start.
pub(crate) fn join_resumed(
    head: String,
    kept: &str,
    tail: Vec<u8>,
    (turns, blocks): (Vec<TurnSpan>, Vec<BlockSpan>),
    segments: &mut Segments,
) -> (String, usize) {
    // serde_json writes UTF-8 and so do the literals.
    let tail = String::from_utf8(tail).expect("JSON is UTF-8");
    let sep = usize::from(!kept.is_empty() && !tail.is_empty());
    let mut body = head;
    body.reserve(kept.len() + sep + tail.len() + 2);
    body.push_str(kept);
    body.push_str(&","[..sep]);
    let at = body.len();
    body.push_str(&tail);
    body.push_str("]}");
    let shift = |s: Range<usize>| s.start + at..s.end + at;
    segments.messages = turns
        .into_iter()
        .map(|t| TurnSpan {
            span: shift(t.span),
            blocks: t.blocks,
        })
        .collect();
    segments.blocks = blocks
        .into_iter()
        .map(|b| BlockSpan {
            span: shift(b.span),
            thinking: false,
        })
        .collect();
    (body, at)
}

/// What a serializer did to a request beyond writing it out.
///
/// ```
/// use mektpoy::{Config, Message, Route, project::ProjectedToolUpdates, route::WireApi, wire::serialize};
/// let config = Config::new("acme", "acme-1");
/// let messages = [Message::user("u1", "hello")];
/// let route = Route::plain("acme", "acme-1", WireApi::OpenAiChat);
/// let request = serialize(&config, &ProjectedToolUpdates::new(&messages[..]), &route)?;
/// // Nothing left out, nothing added.
/// assert_eq!(request.report(), &Default::default());
/// assert_eq!(request.report().thinking_left_out, 0);
/// # Ok::<(), mektpoy::wire::WireError>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WireReport {
    /// Signed `thinking` and `redacted_thinking` blocks the `StripThinking` policy left out
    /// (they were produced before the route's thinking floor).
    pub thinking_left_out: usize,
    /// Reasoning blocks left out because the provider could not verify them (no signature,
    /// or produced by another provider).
    pub unverifiable_reasoning_left_out: usize,
    /// Whether the `DropBlock` policy acted (`block_binding` and its beta were sent).
    pub drop_block: bool,
    /// The 0-based index, over the content blocks of the wire messages in order, of the block
    /// that got an explicit `cache_control` because 20 or more blocks follow the last block
    /// of the previous request (the automatic-caching lookback; the 20-block window is a
    /// third-party-quoted figure). That is the previous request's last block, or, when it is
    /// a thinking block (which cannot carry one), the nearest block before it that can.
    pub lookback_breakpoint: Option<usize>,
}

/// How the serializer treats signed thinking blocks produced before a rewrite of the
/// conversation on a route that binds thinking ([`Route::binds_thinking`]). Chosen once per
/// session and recorded in its log; `StripThinking` is the default.
pub use crate::event::ThinkingPolicy;

/// What the serializer needs to know beyond the projected request: the previous request of
/// the route and the session's thinking floor. [`serialize`] uses the default (a first
/// request: no lookback, no floor).
///
/// ```
/// use mektpoy::wire::{WireContext, serialize_with};
/// use mektpoy::{Config, Message, project::ProjectedToolUpdates, route_for};
/// let config = Config::new("openai", "gpt-5.4");
/// let messages = [Message::user("u1", "hello")];
/// let projected = ProjectedToolUpdates::new(&messages[..]);
/// let context = WireContext::default().with_prompt_cache_key("session-1");
/// let request = serialize_with(&config, &projected, &route_for("openai", "gpt-5.4"), &context)?;
/// assert!(request.body().contains(r#""prompt_cache_key":"session-1""#));
/// # Ok::<(), mektpoy::wire::WireError>(())
/// ```
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct WireContext<'a> {
    /// Content blocks (over the wire messages, in order) of the previous request of this
    /// route, when this request extends it; `None` for a first request or after a rewrite.
    pub previous_blocks: Option<usize>,
    /// The thinking policy and the messages it applies to; `None` on a route that does not
    /// bind thinking, or when no floor exists.
    pub thinking: Option<ThinkingPlan<'a>>,
    /// The `prompt_cache_key` to send on a route that takes one ([`Route::prompt_cache_key`]),
    /// unless the config sets its own: the loop gives its session id, so that the session's
    /// requests are routed to the cache its earlier requests wrote.
    pub prompt_cache_key: Option<&'a str>,
    /// What names `thinking`'s messages: the floor's log position. Two plans with the same
    /// policy and key name the same messages of the same surface, so a pass can resume from
    /// the previous request's state; a plan without one is never resumed from.
    pub(crate) floor_key: Option<u64>,
}

/// Building a context.
///
/// ```
/// use mektpoy::wire::WireContext;
/// let context = WireContext::default().with_prompt_cache_key("s1");
/// assert!(context.thinking.is_none() && context.prompt_cache_key == Some("s1"));
/// ```
impl<'a> WireContext<'a> {
    /// The same context sending `key` as the `prompt_cache_key` on a route that takes one.
    ///
    /// ```
    /// use mektpoy::wire::WireContext;
    /// let context = WireContext::default().with_prompt_cache_key("s1");
    /// assert_eq!(context.prompt_cache_key, Some("s1"));
    /// assert_eq!(context.previous_blocks, None);
    /// ```
    #[must_use]
    pub fn with_prompt_cache_key(mut self, key: &'a str) -> Self {
        self.prompt_cache_key = Some(key);
        self
    }
}

/// The thinking policy of a session and the assistant messages it applies to.
///
/// On a route that binds thinking to the conversation ([`Route::binds_thinking`]) the provider
/// checks every `thinking` and `redacted_thinking` block it gets back against what preceded
/// it when it was produced; after a rewrite the blocks produced before it fail, and a block
/// left out once must never be sent again. Every signed thinking block and every
/// `redacted_thinking` block of an assistant message named in
/// [`before_floor`](Self::before_floor) is treated by the policy:
/// - [`ThinkingPolicy::StripThinking`]: left out (the last assistant message included) and
///   counted in [`WireReport::thinking_left_out`];
/// - [`ThinkingPolicy::DropBlock`]: sent, with `block_binding:
///   {"prefix_mismatch_behavior":"drop_block"}` added to the config's `thinking` (its `type`
///   kept; `{"type":"adaptive",…}` when the config has none) and the
///   `thinking-binding-controls-2026-08-01` beta; [`WireReport::drop_block`] is set. The
///   provider then drops the failing block and every thinking block after it;
/// - [`ThinkingPolicy::Refuse`]: refused with [`MessageFault::ThinkingRewrite`].
///
/// A request holding no such block is sent exactly as without a plan. A plan given for a route
/// that does not bind thinking is ignored.
///
/// ```
/// use std::collections::HashSet;
/// use mektpoy::event::Rewrite;
/// use mektpoy::wire::{ThinkingPlan, ThinkingPolicy, WireContext};
/// let before_floor: HashSet<String> = ["a1".to_owned()].into();
/// let plan = ThinkingPlan {
///     policy: ThinkingPolicy::StripThinking,
///     before_floor: &before_floor,
///     rewrite: Rewrite::System,
/// };
/// let mut context = WireContext::default();
/// context.thinking = Some(plan);
/// assert!(context.thinking.as_ref().is_some_and(|p| p.before_floor.contains("a1")));
/// ```
#[derive(Clone, Debug)]
pub struct ThinkingPlan<'a> {
    /// The session's policy.
    pub policy: ThinkingPolicy,
    /// Ids of the messages appended before the route's thinking floor: each signed reasoning
    /// block and each `redacted_thinking` block in these assistant messages is subject to
    /// the policy.
    pub before_floor: &'a HashSet<String>,
    /// What the rewrite that set the floor changed, for [`ThinkingPolicy::Refuse`].
    pub rewrite: Rewrite,
}

pub use crate::event::Rewrite;

/// One of the provider's limits on the tools a request makes available (its answer when one is
/// exceeded is `available_tools_limit_exceeded`). See [`WireError::ToolLimitExceeded`].
///
/// Checked on Anthropic routes and on routes with inline definitions, in one pass over the wire
/// messages, after each message:
/// - a tool *defined by value* is available from the `tool_addition` that carries its
///   definition until the name is withdrawn, by a `tool_removal` or by a by-reference
///   `tool_addition` (the name then has its `tools` declaration again); a new definition of an
///   available name replaces the old one (one tool, the new size). Definitions waiting behind
///   the last assistant turn are not sent and not counted. The vendor counts definitions sent
///   after the first user message: every system message the serializer writes follows a user
///   turn, so all of them count;
/// - a definition's size is the bytes of its `definition` object as sent;
/// - the deferred declarations are the `tools` entries with `defer_loading` (the deferred
///   placeholder included); all are available before the first message, so their peak is
///   their number.
///
/// The vendor's separate 4 MB limit on the rendered tool text is not checked (the rendering is
/// the provider's).
///
/// ```
/// use mektpoy::wire::ToolLimit;
/// assert_eq!(ToolLimit::DeferredTools.max(), 10_000);
/// assert_eq!(ToolLimit::ByValueBytes.max(), 4 * 1024 * 1024);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ToolLimit {
    /// At most [`ToolLimit::MAX_TOOLS`] tools defined by value in the conversation may be
    /// available at once.
    ByValueTools,
    /// The by-value definitions available at once may total at most
    /// [`ToolLimit::MAX_DEFINITION_BYTES`] bytes (as sent).
    ByValueBytes,
    /// At most [`ToolLimit::MAX_TOOLS`] deferred declarations may be available.
    DeferredTools,
}

/// A limit's value.
///
/// ```
/// use mektpoy::wire::ToolLimit;
/// assert_eq!(ToolLimit::ByValueTools.max(), 10_000);
/// ```
impl ToolLimit {
    /// The tool-count limit (by-value tools, deferred declarations).
    pub const MAX_TOOLS: usize = 10_000;
    /// The size limit of the by-value definitions available at once: 4 MB.
    pub const MAX_DEFINITION_BYTES: usize = 4 * 1024 * 1024;

    /// The limit's value.
    ///
    /// ```
    /// use mektpoy::wire::ToolLimit;
    /// assert_eq!(ToolLimit::ByValueTools.max(), ToolLimit::MAX_TOOLS);
    /// assert_eq!(ToolLimit::ByValueBytes.max(), ToolLimit::MAX_DEFINITION_BYTES);
    /// ```
    #[must_use]
    pub fn max(self) -> usize {
        match self {
            ToolLimit::ByValueTools | ToolLimit::DeferredTools => Self::MAX_TOOLS,
            ToolLimit::ByValueBytes => Self::MAX_DEFINITION_BYTES,
        }
    }
}

impl std::fmt::Display for ToolLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ToolLimit::ByValueTools => write!(
                f,
                "at most {} tools defined by value may be available",
                Self::MAX_TOOLS
            ),
            ToolLimit::ByValueBytes => write!(
                f,
                "the available tools defined by value may total at most {} bytes",
                Self::MAX_DEFINITION_BYTES
            ),
            ToolLimit::DeferredTools => write!(
                f,
                "at most {} deferred declarations may be available",
                Self::MAX_TOOLS
            ),
        }
    }
}

/// ` (message m, block i)` or ` (in `tools`)`, for errors about a tool definition.
fn definition_site(message_id: &Option<String>, index: &Option<usize>) -> String {
    match (message_id, index) {
        (Some(m), Some(i)) => format!("defined by value in message {m}, block {i}"),
        (Some(m), None) => format!("defined by value in message {m}"),
        _ => "declared in `tools`".to_owned(),
    }
}

/// `, after message m` when known.
fn after_message(message_id: &Option<String>) -> String {
    message_id
        .as_ref()
        .map(|m| format!(" after message {m}"))
        .unwrap_or_default()
}

/// Building, reading and taking apart a request.
///
/// ```
/// use mektpoy::WireRequest;
/// let request = WireRequest::new("{}", vec![]).with_header("content-type", "application/json");
/// assert_eq!(request.header("Content-Type"), Some("application/json"));
/// let (body, headers) = request.into_parts();
/// assert_eq!((body.as_str(), headers.len()), ("{}", 1));
/// ```
impl WireRequest {
    /// A request from its body and headers, with an empty report.
    ///
    /// ```
    /// use mektpoy::WireRequest;
    /// // Bytes saved earlier, sent again.
    /// let saved = r#"{"model":"acme-1","messages":[]}"#;
    /// let request = WireRequest::new(saved, vec![("content-type".into(), "application/json".into())]);
    /// assert_eq!(request.body(), saved);
    /// assert_eq!(request.report(), &Default::default());
    /// ```
    pub fn new(body: impl Into<String>, headers: Vec<(String, String)>) -> Self {
        WireRequest {
            body: body.into(),
            headers,
            report: WireReport::default(),
            series_start: None,
            segments: None,
            origin: None,
        }
    }

    /// The request body: compact JSON.
    ///
    /// ```
    /// use mektpoy::WireRequest;
    /// let request = WireRequest::new(r#"{"messages":[]}"#, vec![]);
    /// let parsed: serde_json::Value = serde_json::from_str(request.body())?;
    /// assert!(parsed["messages"].is_array());
    /// # Ok::<(), serde_json::Error>(())
    /// ```
    #[must_use]
    pub fn body(&self) -> &str {
        &self.body
    }

    /// `(name, value)` pairs, names lowercase, in the order they should be sent.
    ///
    /// ```
    /// use mektpoy::{AgentLoop, Message, Session, route_for};
    /// let route = route_for("anthropic", "claude-fable-5-1");
    /// let mut agent = AgentLoop::builder(Session::new("s"), route)
    ///     .option("max_tokens", 64.into())
    ///     .build()?;
    /// let wire = agent.user_turn([Message::user("u1", "hi")])?.to_wire()?;
    /// let names: Vec<&str> = wire.headers().iter().map(|(n, _)| n.as_str()).collect();
    /// assert!(names.contains(&"anthropic-version") && names.contains(&"anthropic-beta"));
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
    #[must_use]
    pub fn headers(&self) -> &[(String, String)] {
        &self.headers
    }

    /// What the serializer left out or added, and why (thinking policy, unverifiable
    /// reasoning, cache breakpoints).
    ///
    /// ```
    /// use mektpoy::WireRequest;
    /// let request = WireRequest::new("{}", vec![]);
    /// assert!(!request.report().drop_block);
    /// assert_eq!(request.report().lookback_breakpoint, None);
    /// ```
    #[must_use]
    pub fn report(&self) -> &WireReport {
        &self.report
    }

    /// Why this request opens a series, as the recorder decided: set by
    /// [`Request::to_wire`](crate::Request::to_wire), `None` from the stateless serializers.
    /// The meter needs it to tell a loss the caller chose from one the route imposed.
    ///
    /// ```
    /// use mektpoy::event::SeriesStart;
    /// use mektpoy::{AgentLoop, Message, Session, route_for};
    /// let route = route_for("deepseek", "deepseek-flash");
    /// let mut agent = AgentLoop::builder(Session::new("s"), route)
    ///     .option("max_tokens", 64.into())
    ///     .build()?;
    /// let wire = agent.user_turn([Message::user("u1", "hi")])?.to_wire()?;
    /// assert_eq!(wire.series_start(), Some(SeriesStart::First));
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
    #[must_use]
    pub fn series_start(&self) -> Option<crate::event::SeriesStart> {
        self.series_start
    }

    /// The same request with one more header (say, a test or tracing header of the caller's);
    /// the body is untouched.
    ///
    /// ```
    /// use mektpoy::WireRequest;
    /// let request = WireRequest::new("{}", vec![]).with_header("x-trace-id", "t-42");
    /// assert_eq!(request.header("X-Trace-Id"), Some("t-42"));
    /// assert_eq!(request.body(), "{}");
    /// ```
    #[must_use]
    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// The same request marked as opening a series for `start`, as
    /// [`Request::to_wire`](crate::Request::to_wire) marks it: for a request rebuilt from its
    /// saved bytes ([`WireRequest::new`]) that the meter should read as the recorder decided.
    ///
    /// ```
    /// use mektpoy::event::SeriesStart;
    /// use mektpoy::WireRequest;
    /// let rebuilt = WireRequest::new("{}", vec![]).with_series_start(Some(SeriesStart::First));
    /// assert_eq!(rebuilt.series_start(), Some(SeriesStart::First));
    /// ```
    #[must_use]
    pub fn with_series_start(mut self, start: Option<crate::event::SeriesStart>) -> Self {
        self.series_start = start;
        self
    }

    /// The body and the headers, moved out: what an HTTP client sends.
    ///
    /// ```
    /// use mektpoy::WireRequest;
    /// let req = WireRequest::new("{}", vec![("content-type".into(), "application/json".into())]);
    /// let (body, headers) = req.into_parts();
    /// assert_eq!((body.as_str(), headers.len()), ("{}", 1));
    /// ```
    #[must_use]
    pub fn into_parts(self) -> (String, Vec<(String, String)>) {
        (self.body, self.headers)
    }

    /// The value of header `name` (ASCII case-insensitive), if present.
    ///
    /// ```
    /// use mektpoy::WireRequest;
    /// let req = WireRequest::new("{}", vec![("content-type".into(), "application/json".into())]);
    /// assert_eq!(req.header("Content-Type"), Some("application/json"));
    /// assert_eq!(req.header("anthropic-beta"), None);
    /// ```
    #[must_use]
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Why a projected request cannot be serialized for a route.
///
/// Every variant names what a person needs to find the fault: the config key, the tool, or the
/// message id and 0-based block index. A fault inside one message is
/// [`WireError::Message`]: the message's id, and a [`MessageFault`] saying what is wrong there.
///
/// ```
/// use mektpoy::wire::{MessageFault, WireError};
/// fn unanswered(e: &WireError) -> Option<(&str, &str)> {
///     match e {
///         WireError::Message { message_id, kind: MessageFault::MissingToolResult { call_id } } => {
///             Some((message_id, call_id))
///         }
///         _ => None,
///     }
/// }
/// # let _ = unanswered;
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum WireError {
    /// The Messages API requires `max_tokens` and the config has none.
    MissingMaxTokens,
    /// A config option would collide with a body key the serializer writes itself (`model`,
    /// `provider`, `system`, `tools`, `messages`).
    ReservedConfigKey {
        /// The offending key.
        key: String,
    },
    /// A projected tool is named [`DEFERRED_PLACEHOLDER_NAME`], which is reserved on every route.
    ReservedToolName {
        /// 0-based index in the projected tools.
        index: usize,
    },
    /// Two projected tools share a name (the rule `append` enforces on a header, under the
    /// same name: [`AppendErrorKind::DuplicateToolName`](crate::session::AppendErrorKind::DuplicateToolName)).
    DuplicateToolName {
        /// The repeated name.
        tool: String,
    },
    /// A deferred declaration reached a route that cannot defer (OpenAI-compatible chat only
    /// ever receives no-mode projections, which clear `defer_loading`).
    DeferredTool {
        /// The deferred tool.
        name: String,
    },
    /// A tool's `parameters` has no `"type": "object"` at its root, which the Messages API
    /// requires of `input_schema` (Anthropic answers `input_schema.type: Field required`).
    SchemaRootNotObject {
        /// The tool.
        tool: String,
        /// The developer message that defines it by value; `None` for a `tools` entry.
        message_id: Option<String>,
        /// 0-based index of the by-value block in that message; `None` for a `tools` entry.
        index: Option<usize>,
    },
    /// A tool's name is not one the provider takes: ASCII letters, digits, `_` and `-`, at
    /// most [`max_len`](WireError::InvalidToolName::max_len) bytes (Messages API: 128; OpenAI
    /// chat: 64). MCP-style names such as `github.search_issues` must be renamed before they
    /// are offered.
    InvalidToolName {
        /// The tool.
        tool: String,
        /// The longest name the route takes.
        max_len: usize,
        /// The developer message that defines it by value; `None` for a `tools` entry.
        message_id: Option<String>,
        /// 0-based index of the by-value block in that message; `None` for a `tools` entry.
        index: Option<usize>,
    },
    /// One of the provider's limits on available tools would be exceeded. Open a request
    /// series: it starts from the declarations with no by-value definitions in history.
    ToolLimitExceeded {
        /// Which limit.
        limit: ToolLimit,
        /// How many tools (or bytes) the request makes available at its peak.
        found: usize,
        /// The developer message whose definition went over the limit (`None` for the
        /// deferred declarations, which are counted in `tools`).
        message_id: Option<String>,
    },
    /// A Responses API tool that is not a function
    /// ([`ToolSchema::from_responses_tool`](crate::ToolSchema::from_responses_tool): a `custom`
    /// grammar tool, `local_shell`, `web_search`, ...) reached a route of another API, which
    /// has no such tool: sent as a function, it would declare a tool the vendor never made
    /// ([decision 139](crate::manual::decisions#decision-139)).
    ResponsesOnlyTool {
        /// The tool.
        tool: String,
        /// The developer message that defines it by value; `None` for a `tools` entry.
        message_id: Option<String>,
        /// 0-based index of the by-value block in that message; `None` for a `tools` entry.
        index: Option<usize>,
    },
    /// A forced `tool_choice` (`any` or `tool`) on a route whose model refuses it.
    ForcedToolChoice {
        /// The refused `tool_choice.type`.
        choice_type: String,
    },
    /// The `DropBlock` policy must add `block_binding` to the config's `thinking`, which the
    /// provider accepts only with `thinking.type` `adaptive` or `enabled`.
    DropBlockThinkingType {
        /// What the config holds instead (the type, quoted, or a description).
        found: String,
    },
    /// A fault inside one message: its id, and what is wrong there. Prints
    /// `message {message_id}: ` and then the fault's message.
    Message {
        /// The message the fault is in (for a fault of a turn, the message that opened it;
        /// for a call without a result, the assistant message holding the call; for a
        /// repeated call id, the message holding the second call).
        message_id: String,
        /// What is wrong in it.
        kind: MessageFault,
    },
}

/// Where a refusal points.
///
/// ```
/// use mektpoy::wire::WireError;
/// assert_eq!(WireError::MissingMaxTokens.message_id(), None);
/// ```
impl WireError {
    /// A fault inside message `message_id`.
    pub(crate) fn message(message_id: impl Into<String>, kind: MessageFault) -> Self {
        WireError::Message {
            message_id: message_id.into(),
            kind,
        }
    }

    /// The id of the message the fault is in or comes from, when it has one: every
    /// [`WireError::Message`], and a tool or limit fault of a by-value definition.
    ///
    /// ```
    /// use mektpoy::{Config, Message, Route, project::ProjectedToolUpdates, route::WireApi, wire::serialize};
    /// // An answer that ends the request: the route refuses assistant prefill.
    /// let messages = [Message::user("u1", "hi"), Message::assistant("a1", "Sure,", "anthropic", "m")];
    /// let route = Route::builder("anthropic", "m", WireApi::Messages).assistant_prefill(false).build()?;
    /// let config = Config::new("anthropic", "m").with("max_tokens", 64.into())?;
    /// let refused = serialize(&config, &ProjectedToolUpdates::new(&messages[..]), &route).unwrap_err();
    /// assert_eq!(refused.message_id(), Some("a1"));
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
    #[must_use]
    pub fn message_id(&self) -> Option<&str> {
        match self {
            WireError::Message { message_id, .. } => Some(message_id),
            WireError::SchemaRootNotObject { message_id, .. }
            | WireError::InvalidToolName { message_id, .. }
            | WireError::ResponsesOnlyTool { message_id, .. }
            | WireError::ToolLimitExceeded { message_id, .. } => message_id.as_deref(),
            _ => None,
        }
    }
}

impl std::fmt::Display for WireError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WireError::MissingMaxTokens => {
                f.write_str("config has no `max_tokens`, which the Messages API requires")
            }
            WireError::ReservedConfigKey { key } => write!(
                f,
                "config key `{key}` is reserved: the serializer writes that body key itself"
            ),
            WireError::ReservedToolName { index } => write!(
                f,
                "tool {index} is named `{DEFERRED_PLACEHOLDER_NAME}`, which is reserved"
            ),
            WireError::DuplicateToolName { tool } => {
                write!(f, "tool `{tool}` is declared twice")
            }
            WireError::DeferredTool { name } => write!(
                f,
                "tool `{name}` is deferred, which OpenAI-compatible chat cannot represent"
            ),
            WireError::InvalidToolName {
                tool,
                max_len,
                message_id,
                index,
            } => write!(
                f,
                "tool `{tool}` ({}): a name is 1 to {max_len} ASCII letters, digits, `_` or `-`",
                definition_site(message_id, index)
            ),
            WireError::ResponsesOnlyTool {
                tool,
                message_id,
                index,
            } => write!(
                f,
                "tool `{tool}` ({}) is a Responses API tool that is not a function, which this \
                 route's API cannot declare",
                definition_site(message_id, index)
            ),
            WireError::SchemaRootNotObject {
                tool,
                message_id,
                index,
            } => write!(
                f,
                "tool `{tool}` ({}): its `parameters` must be a JSON object with \
                 `\"type\": \"object\"` at its root",
                definition_site(message_id, index)
            ),
            WireError::ToolLimitExceeded {
                limit,
                found,
                message_id,
            } => write!(
                f,
                "{limit}, and this request makes {found} available{}; open a request series",
                after_message(message_id)
            ),
            WireError::ForcedToolChoice { choice_type } => write!(
                f,
                "config `tool_choice` of type `{choice_type}` is refused by this model: use \
                 `{{\"type\":\"auto\"}}` with `strict: true` tools instead"
            ),
            WireError::DropBlockThinkingType { found } => write!(
                f,
                "config `thinking.type` is {found}, which `block_binding` cannot go with (only \
                 `adaptive` or `enabled`); use the StripThinking policy"
            ),
            WireError::Message { message_id, kind } => write!(f, "message {message_id}: {kind}"),
        }
    }
}

impl std::error::Error for WireError {
    /// The fault's own cause, if it has one; the [`MessageFault`] itself is not in the chain,
    /// since this message prints it.
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            WireError::Message { kind, .. } => std::error::Error::source(kind),
            _ => None,
        }
    }
}

/// What is wrong inside one message of a request ([`WireError::Message`]). Its message does
/// not name the message; the `WireError` around it does.
///
/// ```
/// use mektpoy::wire::{MessageFault, WireError, serialize};
/// use mektpoy::{Config, Message, Route, project::ProjectedToolUpdates, route::WireApi};
/// let messages = [Message::user("u1", "hi"), Message::assistant("a1", "Sure,", "anthropic", "m")];
/// let route = Route::builder("anthropic", "m", WireApi::Messages).assistant_prefill(false).build()?;
/// let config = Config::new("anthropic", "m").with("max_tokens", 64.into())?;
/// let refused = serialize(&config, &ProjectedToolUpdates::new(&messages[..]), &route).unwrap_err();
/// assert!(matches!(refused, WireError::Message { kind: MessageFault::AssistantPrefill, .. }));
/// # Ok::<(), mektpoy::Error>(())
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MessageFault {
    /// A developer message reached OpenAI-compatible chat (no-mode projections drop them).
    #[error("developer messages cannot be sent on OpenAI-compatible chat")]
    DeveloperMessage,
    /// A developer message holds a block other than a tool change or text.
    #[error(
        "developer block {index} of type `{block_type}` cannot be sent \
         (only tool additions, removals and text can)"
    )]
    DeveloperBlock {
        /// 0-based index of the block.
        index: usize,
        /// The block's `type`.
        block_type: String,
    },
    /// A tool-addition or tool-removal block outside a developer message (the rule `append`
    /// enforces under the same name:
    /// [`AppendErrorKind::ToolChangeOutsideDeveloper`](crate::session::AppendErrorKind::ToolChangeOutsideDeveloper)).
    #[error("block {index} is a tool change in a {role} message")]
    ToolChangeOutsideDeveloper {
        /// 0-based index of the block.
        index: usize,
        /// The message's role.
        role: Role,
    },
    /// A block this wire has no form for in a message of this role (an unknown block type, a
    /// tool call outside an assistant message, reasoning outside an assistant message, ...).
    #[error("block {index} of type `{block_type}` cannot be sent in a {role} message")]
    UnsupportedBlock {
        /// 0-based index of the block.
        index: usize,
        /// The message's role.
        role: Role,
        /// The block's `type`.
        block_type: String,
    },
    /// Two tool calls of one request share an id.
    #[error("tool call id {call_id} is used twice")]
    DuplicateCallId {
        /// The repeated id.
        call_id: String,
    },
    /// A tool call has no result before the next user or assistant turn, or before the end.
    #[error("tool call {call_id} has no result")]
    MissingToolResult {
        /// The unanswered call.
        call_id: String,
    },
    /// A tool result that answers no pending call of the preceding assistant turn. `append`
    /// refuses, under the same name, the part of this rule a log can hold to: a result that
    /// answers no call anywhere before it on the surface
    /// ([`AppendErrorKind::OrphanToolResult`](crate::session::AppendErrorKind::OrphanToolResult),
    /// and [`ReplaceOrphansToolResult`](crate::session::AppendErrorKind::ReplaceOrphansToolResult)
    /// for a replace that would leave one); loaded files may still hold one.
    #[error("tool result for {call_id} answers no pending tool call")]
    OrphanToolResult {
        /// The call id its source names.
        call_id: String,
    },
    /// A tool message whose source is not `{"kind":"tool","callId"}` (the rule `append`
    /// enforces under the same name:
    /// [`AppendErrorKind::ToolResultWithoutCallId`](crate::session::AppendErrorKind::ToolResultWithoutCallId)).
    #[error("tool result has no `callId` source")]
    ToolResultWithoutCallId,
    /// A user or assistant turn left without content once empty text blocks are dropped (the
    /// Messages API refuses empty text and empty turns, except a final assistant turn).
    /// `append` refuses an assistant message on the surface that would make one
    /// ([`AppendErrorKind::EmptyAssistantMessage`](crate::session::AppendErrorKind::EmptyAssistantMessage));
    /// loaded files may still hold one.
    #[error("its turn has no content the API accepts (only empty text)")]
    EmptyTurn,
    /// A system-role message that is not a prompt node (a compaction summary, an
    /// application's note) on a route that takes no system messages in history: sending only
    /// the latest prompt would silently drop it.
    #[error(
        "a system message that is not a prompt cannot be sent on a route without prompts in history"
    )]
    SystemMessageNotPrompt,
    /// A tool addition carrying its definition by value on a route without
    /// [`inline_definitions`](Route::inline_definitions): the projection for that route never
    /// builds one, so the request was projected for another route.
    #[error(
        "block {index} defines tool `{tool}` by value, which this route \
         cannot send (no inline definitions)"
    )]
    InlineDefinitionUnsupported {
        /// 0-based index of the block.
        index: usize,
        /// The tool it defines.
        tool: String,
    },
    /// A `tool_addition` names a tool the projected declarations do not hold: the Responses
    /// wire sends an addition by value (`additional_tools`) and has no definition to send.
    #[error("block {index} adds tool `{tool}`, which no declaration defines")]
    AdditionWithoutDeclaration {
        /// 0-based index of the block.
        index: usize,
        /// The tool it adds.
        tool: String,
    },
    /// The request would end with an assistant turn on a route whose model refuses assistant
    /// prefill (the conversation must end with a user message).
    #[error(
        "the request ends with this assistant turn, and this model \
         refuses assistant prefill (the conversation must end with a user message)"
    )]
    AssistantPrefill,
    /// The session's thinking policy is [`ThinkingPolicy::Refuse`] and the request would send
    /// back a thinking block produced before a rewrite of the conversation.
    #[error(
        "block {index} is thinking produced before a rewrite ({rewrite}), \
         and the thinking policy refuses to send it"
    )]
    ThinkingRewrite {
        /// 0-based index of the block in that message.
        index: usize,
        /// What the rewrite changed.
        rewrite: Rewrite,
    },
}

/// Serializes `projected` for `route`, dispatching on [`Route::api`].
///
/// # Errors
/// Whatever [`serialize_messages`] or [`serialize_openai_chat`] returns for the route's API.
///
/// # Examples
/// ```
/// use std::borrow::Cow;
/// use mektpoy::{Config, Message, Route, project::ProjectedToolUpdates, route::WireApi, wire::serialize};
///
/// let config = Config::new("deepseek", "deepseek-flash").with("max_tokens", 1024.into()).unwrap();
/// let messages = [Message::user("u1", "hello")];
/// let projected = ProjectedToolUpdates::new(&messages[..]);
/// let route = Route::plain("deepseek", "deepseek-flash", WireApi::Messages);
/// let req = serialize(&config, &projected, &route)?;
/// assert_eq!(
///     req.body(),
///     r#"{"model":"deepseek-flash","max_tokens":1024,"messages":[{"role":"user","content":[{"type":"text","text":"hello"}]}]}"#
/// );
/// # Ok::<(), mektpoy::wire::WireError>(())
/// ```
pub fn serialize(
    config: &Config,
    projected: &ProjectedToolUpdates<'_>,
    route: &Route,
) -> Result<WireRequest, WireError> {
    serialize_with(config, projected, route, &WireContext::default())
}

/// [`serialize`] with what the route's previous request and the session's thinking floor say
/// (the automatic-caching lookback, the thinking policy). [`Request::to_wire`] supplies it.
///
/// ```
/// use mektpoy::wire::{WireContext, serialize, serialize_with};
/// use mektpoy::{Config, Message, project::ProjectedToolUpdates, route_for};
/// let config = Config::new("openai", "gpt-5.4");
/// let messages = [Message::user("u1", "hello")];
/// let projected = ProjectedToolUpdates::new(&messages[..]);
/// let route = route_for("openai", "gpt-5.4");
/// // The default context is what `serialize` uses.
/// let plain = serialize_with(&config, &projected, &route, &WireContext::default())?;
/// assert_eq!(plain, serialize(&config, &projected, &route)?);
/// # Ok::<(), mektpoy::wire::WireError>(())
/// ```
///
/// # Errors
/// As [`serialize`], plus the thinking policy's refusals.
///
/// [`Request::to_wire`]: crate::Request::to_wire
pub fn serialize_with(
    config: &Config,
    projected: &ProjectedToolUpdates<'_>,
    route: &Route,
    context: &WireContext<'_>,
) -> Result<WireRequest, WireError> {
    match route.api {
        WireApi::Messages => messages::serialize_messages_with(config, projected, route, context),
        WireApi::OpenAiChat => {
            serialize_openai_chat(&with_cache_key(config, route, context), projected)
        }
        WireApi::Responses => serialize_responses(config, projected, route, context),
    }
}

/// `config` with the context's `prompt_cache_key` as an option, on a chat route that claims
/// the key and a config that sets none (OpenAI's chat completions take it as a body key);
/// borrowed otherwise.
fn with_cache_key<'c>(
    config: &'c Config,
    route: &Route,
    context: &WireContext<'_>,
) -> std::borrow::Cow<'c, Config> {
    match context.prompt_cache_key {
        Some(key) if route.prompt_cache_key() && !config.extra.contains_key("prompt_cache_key") => {
            std::borrow::Cow::Owned(
                config
                    .clone()
                    .with_unreserved("prompt_cache_key", key.into()),
            )
        }
        _ => std::borrow::Cow::Borrowed(config),
    }
}

/// What a route's previous request left for the next one to resume from: the wire messages it
/// wrote, once, and its serializer's state after them (see `messages::Resume`,
/// `openai::Resume` and `responses::Resume`).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Resume {
    Messages(messages::Resume),
    Chat(openai::Resume),
    Responses(responses::Resume),
}

impl Resume {
    /// The number of wire messages this point holds.
    pub(crate) fn turns(&self) -> usize {
        match self {
            Resume::Messages(r) => r.turns(),
            Resume::Chat(r) => r.turns(),
            Resume::Responses(r) => r.turns(),
        }
    }

    /// The number of messages this point was built from.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        match self {
            Resume::Messages(r) => r.len(),
            Resume::Chat(r) => r.len(),
            Resume::Responses(r) => r.len(),
        }
    }
}

/// [`serialize_with`], resuming from what the route's previous request left (a point of the
/// other API is ignored); returns what the next request can resume from and, when it resumed,
/// the number of wire messages it took as they were.
pub(crate) fn serialize_resuming(
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
    match route.api {
        WireApi::Messages => {
            let resume = match resume {
                Some(Resume::Messages(r)) => Some(r),
                _ => None,
            };
            let (request, next, resumed) =
                messages::serialize_messages_resuming(config, projected, route, context, resume);
            (request, next.map(Resume::Messages), resumed)
        }
        WireApi::OpenAiChat => {
            let resume = match resume {
                Some(Resume::Chat(r)) => Some(r),
                _ => None,
            };
            let config = with_cache_key(config, route, context);
            let (request, next, resumed) =
                openai::serialize_openai_chat_resuming(&config, projected, resume);
            (request, next.map(Resume::Chat), resumed)
        }
        WireApi::Responses => {
            let resume = match resume {
                Some(Resume::Responses(r)) => Some(r),
                _ => None,
            };
            let (request, next, resumed) =
                responses::serialize_responses_resuming(config, projected, route, context, resume);
            (request, next.map(Resume::Responses), resumed)
        }
    }
}

/// The refusal the route's serializer gives `config`'s options by themselves (a key the
/// serializer writes itself, two names for one limit, a forced `tool_choice` the model
/// refuses), found by serializing an empty conversation with them: the wire's own checks,
/// run before anything is logged. A missing `max_tokens` is not one (the options do not
/// conflict; the first request says what it lacks), so the probe supplies one on the
/// Messages API. `None` when the options alone would be sent.
pub(crate) fn option_refusal(config: &Config, route: &Route) -> Option<WireError> {
    let probe = match route.api {
        WireApi::Messages if !config.extra.contains_key("max_tokens") => {
            std::borrow::Cow::Owned(config.clone().with_unreserved("max_tokens", 1.into()))
        }
        _ => std::borrow::Cow::Borrowed(config),
    };
    let empty = ProjectedToolUpdates::new(&[] as &[crate::vocab::Message]);
    match serialize_with(&probe, &empty, route, &WireContext::default()) {
        Err(
            e @ (WireError::ReservedConfigKey { .. }
            | WireError::ForcedToolChoice { .. }
            | WireError::DropBlockThinkingType { .. }),
        ) => Some(e),
        _ => None,
    }
}

/// The config options sorted by key, after checking that none is reserved.
fn sorted_options(config: &Config) -> Result<Vec<(&str, &Value)>, WireError> {
    let mut options: Vec<(&str, &Value)> =
        config.extra.iter().map(|(k, v)| (k.as_str(), v)).collect();
    // Keys of an `IndexMap` are unique, so an unstable sort is deterministic.
    options.sort_unstable_by(|a, b| a.0.cmp(b.0));
    if let Some((key, _)) = options
        .iter()
        .find(|(k, _)| crate::event::RESERVED_OPTIONS.contains(k))
    {
        return Err(WireError::ReservedConfigKey {
            key: (*key).to_owned(),
        });
    }
    Ok(options)
}

/// The longest tool name the Messages API takes (Anthropic's tool `name`,
/// `^[a-zA-Z0-9_-]{1,128}$`; DeepSeek's Anthropic endpoint takes `name` as Anthropic does).
pub(crate) const MESSAGES_MAX_TOOL_NAME: usize = 128;
/// The longest function name OpenAI-compatible chat takes ("Must be a-z, A-Z, 0-9, or contain
/// underscores and dashes, with a maximum length of 64", OpenAI's API reference for
/// `function.name`, read 2026-12-02).
pub(crate) const CHAT_MAX_TOOL_NAME: usize = 64;

/// `name` is 1 to `max_len` ASCII letters, digits, `_` or `-`.
pub(crate) fn is_valid_tool_name(name: &str, max_len: usize) -> bool {
    (1..=max_len).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Refuses a tool name the provider would refuse (a by-value definition's when `message_id`
/// and `index` are set).
pub(crate) fn check_tool_name(
    name: &str,
    max_len: usize,
    message_id: Option<&str>,
    index: Option<usize>,
) -> Result<(), WireError> {
    if is_valid_tool_name(name, max_len) {
        return Ok(());
    }
    Err(WireError::InvalidToolName {
        tool: name.to_owned(),
        max_len,
        message_id: message_id.map(str::to_owned),
        index,
    })
}

/// Refuses a Responses API tool that is not a function on a route of another API (a
/// by-value definition's when `message_id` and `index` are set).
pub(crate) fn check_not_responses_only(
    tool: &ToolSchema,
    message_id: Option<&str>,
    index: Option<usize>,
) -> Result<(), WireError> {
    if tool.responses_tool().is_none() {
        return Ok(());
    }
    Err(WireError::ResponsesOnlyTool {
        tool: tool.name().to_owned(),
        message_id: message_id.map(str::to_owned),
        index,
    })
}

/// [`checked_tools`], and no Responses API tool that is not a function among them.
fn checked_tools<'p>(
    projected: &'p ProjectedToolUpdates<'_>,
    max_len: usize,
) -> Result<&'p [ToolSchema], WireError> {
    let tools = checked_tools_of_any_api(projected, max_len)?;
    for tool in tools {
        check_not_responses_only(tool, None, None)?;
    }
    Ok(tools)
}

/// The projected tools (none when absent), refused when one uses the reserved placeholder name,
/// a name the provider refuses (longer than `max_len` or outside `[a-zA-Z0-9_-]`), or two share
/// a name.
fn checked_tools_of_any_api<'p>(
    projected: &'p ProjectedToolUpdates<'_>,
    max_len: usize,
) -> Result<&'p [ToolSchema], WireError> {
    let tools: &[ToolSchema] = projected.tools.as_deref().unwrap_or(&[]);
    let mut names = HashSet::with_capacity(tools.len());
    for (index, tool) in tools.iter().enumerate() {
        if tool.name() == DEFERRED_PLACEHOLDER_NAME {
            return Err(WireError::ReservedToolName { index });
        }
        check_tool_name(tool.name(), max_len, None, None)?;
        if !names.insert(tool.name()) {
            return Err(WireError::DuplicateToolName {
                tool: tool.name().to_owned(),
            });
        }
    }
    Ok(tools)
}

/// A request body: `model`, the sorted config options, `system` when non-empty, `tools` when
/// there are any, `messages`.
#[derive(Serialize)]
struct Body<'a, T, M> {
    model: &'a str,
    #[serde(flatten, serialize_with = "canonical_entries")]
    options: Vec<(&'a str, &'a Value)>,
    #[serde(skip_serializing_if = "is_none_or_empty")]
    system: Option<&'a str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<T>,
    messages: Vec<M>,
}

/// Hand-written: the options are `(key, value)` pairs, written as entries with canonical
/// values.
fn canonical_entries<S: Serializer>(options: &[(&str, &Value)], s: S) -> Result<S::Ok, S::Error> {
    s.collect_map(options.iter().map(|(k, v)| (k, Canonical(v))))
}

fn is_none_or_empty(system: &Option<&str>) -> bool {
    system.is_none_or(str::is_empty)
}

impl<T: Serialize, M: Serialize> Body<'_, T, M> {
    fn to_json(&self) -> String {
        // Every map key on the way is a string and `Value` holds only finite numbers, so writing
        // to a `String` cannot fail.
        serde_json::to_string(self).expect("serializing a string-keyed body cannot fail")
    }
}

/// Pairs tool calls with their results: every call of an assistant turn must be answered by a
/// result before the next user or assistant turn, and every result must answer such a call.
#[derive(Default)]
struct Calls<'a> {
    /// Unanswered calls of the latest assistant turn: (call id, assistant message id).
    pending: Vec<(&'a str, &'a str)>,
    /// Every call id of the request, to refuse a repeated one.
    seen: HashSet<&'a str>,
    /// The call ids of the messages before the point a pass resumed from, when it resumed.
    prior: Option<&'a HashSet<String>>,
}

impl<'a> Calls<'a> {
    fn call(&mut self, message: &'a Message, call_id: &'a str) -> Result<(), WireError> {
        if self.prior.is_some_and(|p| p.contains(call_id)) || !self.seen.insert(call_id) {
            return Err(WireError::message(
                message.id().to_owned(),
                MessageFault::DuplicateCallId {
                    call_id: call_id.to_owned(),
                },
            ));
        }
        self.pending.push((call_id, message.id()));
        Ok(())
    }

    /// Marks the call `result` answers as answered and returns its id.
    fn answer(&mut self, result: &'a Message) -> Result<&'a str, WireError> {
        let MessageSource::Tool { call_id } = result.source() else {
            return Err(WireError::message(
                result.id().to_owned(),
                MessageFault::ToolResultWithoutCallId,
            ));
        };
        match self.pending.iter().position(|(id, _)| *id == call_id) {
            Some(i) => {
                self.pending.remove(i);
                Ok(call_id)
            }
            None => Err(WireError::message(
                result.id().to_owned(),
                MessageFault::OrphanToolResult {
                    call_id: call_id.clone(),
                },
            )),
        }
    }

    /// Refuses when a call is still unanswered, naming the first one.
    fn require_answered(&self) -> Result<(), WireError> {
        match self.pending.first() {
            None => Ok(()),
            Some((call_id, message_id)) => Err(WireError::message(
                (*message_id).to_owned(),
                MessageFault::MissingToolResult {
                    call_id: (*call_id).to_owned(),
                },
            )),
        }
    }
}

/// The `type` of a block as the log spells it, for error messages.
fn block_type(block: &ContentBlock) -> String {
    match block {
        ContentBlock::InlineAddition(_) => {
            format!("{} (by value)", block.known_type().unwrap_or_default())
        }
        ContentBlock::Other(o) => o.type_name().into(),
        known => known.known_type().unwrap_or_default().into(),
    }
}

/// The error for block `index` of `message`, which this wire cannot carry in its role.
fn unsupported(message: &Message, index: usize, block: &ContentBlock) -> WireError {
    if block.is_tool_change() {
        WireError::message(
            message.id().to_owned(),
            MessageFault::ToolChangeOutsideDeveloper {
                index,
                role: message.role(),
            },
        )
    } else {
        WireError::message(
            message.id().to_owned(),
            MessageFault::UnsupportedBlock {
                index,
                role: message.role(),
                block_type: block_type(block),
            },
        )
    }
}

/// The prompt text of a system node (its text blocks concatenated), refusing any other block.
fn system_text(message: &Message) -> Result<String, WireError> {
    for (index, block) in message.content().iter().enumerate() {
        if !matches!(block, ContentBlock::Text { .. }) {
            return Err(unsupported(message, index, block));
        }
    }
    Ok(message.text())
}

/// The latest prompt node of `messages`, if any.
fn latest_prompt<'m>(
    mut messages: impl DoubleEndedIterator<Item = &'m Message>,
) -> Option<&'m Message> {
    messages.rfind(|m| m.is_prompt())
}

/// On routes without prompts in history: checks a system message that is not the top-level
/// `system` (its text must still be representable, and it must be a prompt node).
fn check_system_without_history(message: &Message) -> Result<(), WireError> {
    system_text(message)?;
    if message.is_prompt() {
        Ok(())
    } else {
        Err(WireError::message(
            message.id().to_owned(),
            MessageFault::SystemMessageNotPrompt,
        ))
    }
}
