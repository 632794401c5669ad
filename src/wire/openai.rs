//! OpenAI-compatible chat completions.
//!
//! This wire has no way to announce tool changes or defer declarations: it only ever receives
//! no-mode projections (which drop developer messages and clear `defer_loading`), and anything
//! a mode would have added is refused.
//!
//! Each message becomes at most one wire message, written from that message alone (the
//! system message from the latest prompt's text), and the pass's only state is the tool calls
//! it has seen. So a pass that ended well — every call answered — leaves a resume point at its
//! end: the next request of the route whose messages start with the same messages, and whose
//! latest prompt says the same, takes those wire messages as they were written and writes only
//! the new ones ([`Resume`], [decision 81](crate::manual::decisions#decision-81)).

use std::borrow::Cow;
use std::collections::HashSet;
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use super::canonical::CanonicalObject;
use super::{
    BlockSpan, Body, CHAT_MAX_TOOL_NAME, Calls, Carried, MessageFault, Segments, TurnSpan,
    WireError, WireRequest, check_system_without_history, checked_tools, join_resumed,
    sorted_options, system_text, unsupported,
};
use crate::event::Config;
use crate::project::{HeldPrefix, ProjectedMessages, ProjectedToolUpdates};
use crate::vocab::{ContentBlock, Message, Role, ToolSchema};

/// Serializes `projected` for an OpenAI-compatible chat route.
///
/// Body keys, in order: `model`; the other config options except `provider`, sorted by key;
/// `tools` (omitted when there are none); `messages`. Tools are
/// `{"type":"function","function":{name, description, parameters}}` (unknown tool fields are
/// not sent). The latest system node, when non-empty, is the first message
/// (`{"role":"system","content":...}`); the other system nodes are not sent. Tool calls become
/// `tool_calls` with their raw `arguments` string, results `{"role":"tool","tool_call_id",
/// "content"}`. Content is a string for one text block (an empty string for none) and an array
/// of text parts for several. Reasoning blocks are not sent: this wire takes no reasoning back;
/// nor is a result's `isError`, which it has no field for.
/// The only header is `content-type: application/json`. Costs O(messages + blocks + tools).
///
/// ```
/// use mektpoy::wire::serialize_openai_chat;
/// use mektpoy::{Config, Message, ToolSchema, project::ProjectedToolUpdates};
/// let config = Config::new("acme", "acme-1").with("temperature", 0.into())?;
/// let messages = [Message::system("p", "Be brief."), Message::user("u1", "hi")];
/// let tools = [ToolSchema::no_input("read", "Read a file")];
/// let projected = ProjectedToolUpdates::new(&messages[..]).with_tools(&tools[..]);
/// let request = serialize_openai_chat(&config, &projected)?;
/// let body: serde_json::Value = serde_json::from_str(request.body())?;
/// assert_eq!((&body["model"], &body["temperature"]), (&"acme-1".into(), &0.into()));
/// assert_eq!(body["messages"][0], serde_json::json!({"role": "system", "content": "Be brief."}));
/// assert_eq!(body["tools"][0]["function"]["name"], "read");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
/// - [`WireError::ReservedConfigKey`] for an option named `model`, `provider`, `system`,
///   `tools` or `messages`;
/// - [`WireError::ReservedToolName`], [`WireError::DuplicateToolName`],
///   [`WireError::DeferredTool`] for the projected tools;
/// - [`MessageFault::DeveloperMessage`] for any developer message;
///   [`MessageFault::ToolChangeOutsideDeveloper`] for a tool change in another message;
///   [`MessageFault::UnsupportedBlock`] for an unknown block type, or a tool call or reasoning
///   outside an assistant message;
/// - [`MessageFault::DuplicateCallId`], [`MessageFault::MissingToolResult`],
///   [`MessageFault::OrphanToolResult`], [`MessageFault::ToolResultWithoutCallId`] when calls and results
///   do not pair up (every call of an assistant message answered before the next user or
///   assistant message).
pub fn serialize_openai_chat(
    config: &Config,
    projected: &ProjectedToolUpdates<'_>,
) -> Result<WireRequest, WireError> {
    pass(config, projected, None, false).0
}

/// [`serialize_openai_chat`], resuming from what the route's previous request left (`resume`)
/// when this request's messages start with the messages it was built from and its latest
/// prompt sends the same system message; otherwise from the first message. Returns what the
/// next request of the route can resume from (`None` after a refusal) and, when it resumed,
/// the number of wire messages it took as they were.
pub(crate) fn serialize_openai_chat_resuming(
    config: &Config,
    projected: &ProjectedToolUpdates<'_>,
    resume: Option<Resume>,
) -> (
    Result<WireRequest, WireError>,
    Option<Resume>,
    Option<usize>,
) {
    pass(config, projected, resume, true)
}

/// Where a chat pass that ended well stood at its end: the wire messages it sent, written once,
/// and what a pass over more messages needs to go on from there.
///
/// A wire message is a function of its message alone, except the system message, a function
/// of the latest prompt's text; the pass's state after a message is the set of call ids seen
/// and the calls still unanswered, and at the end of a pass that was not refused none is
/// unanswered. So a request whose messages start with [`messages`](Self::messages) (the same
/// handles, or equal messages) and whose latest prompt sends [`system`](Self::system) gets,
/// from a pass that starts after them with [`seen`](Self::seen), the bytes and the refusals of
/// a pass from the first message. Every debug build checks that.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Resume {
    /// The projected messages the kept wire messages were written from.
    messages: HeldPrefix,
    /// Their wire messages (the system message first, when sent), comma-joined.
    bytes: String,
    /// How many wire messages `bytes` holds.
    turns: usize,
    /// How many content parts those hold (what the meter counts as blocks).
    blocks: usize,
    /// The index of the latest prompt node among `messages`.
    latest_prompt: Option<usize>,
    /// The text of the system message sent first (`None`: none is sent).
    system: Option<String>,
    /// Every tool call id of `messages`.
    seen: HashSet<String>,
    /// What each of the kept wire messages carries.
    carried: Carried,
    /// Names this point for the meter (see `Segments::resumed`): minted anew by every pass
    /// that leaves one. Equality ignores it (`()` == `()`).
    token: Arc<()>,
}

impl Resume {
    /// The number of wire messages this point holds.
    pub(crate) fn turns(&self) -> usize {
        self.turns
    }

    /// The number of messages this point was built from.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.messages.len()
    }

    /// Where this request's pass starts (the number of kept messages) when its messages start
    /// with this point's: O(chunks + parts) when both views read lists that share chunks (a
    /// request and the next of its route), not O(messages).
    fn matches(&self, messages: &ProjectedMessages<'_>) -> Option<usize> {
        self.messages
            .starts(messages)
            .then_some(self.messages.len())
    }
}

/// The wire messages a pass wrote itself, comma-joined, and how many content parts they hold;
/// what every wire message of the request carries.
struct Tail<'t> {
    bytes: &'t str,
    turns: usize,
    blocks: usize,
    carried: Carried,
}

/// The serializer's pass, from the first message or from `resume`; `keep`: whether to build
/// what the next request resumes from.
fn pass(
    config: &Config,
    projected: &ProjectedToolUpdates<'_>,
    resume: Option<Resume>,
    keep: bool,
) -> (
    Result<WireRequest, WireError>,
    Option<Resume>,
    Option<usize>,
) {
    #[cfg(debug_assertions)]
    let given = resume.is_some();
    let (request, next, resumed) = resumed_pass(config, projected, resume, keep);
    #[cfg(debug_assertions)]
    if given {
        super::resume_check::check_resumed("chat", request.as_ref(), next.as_ref(), || {
            let (fresh, fresh_next, _) = resumed_pass(config, projected, None, keep);
            (fresh, fresh_next)
        });
    }
    (request, next, resumed)
}

/// [`pass`] without the debug builds' check.
fn resumed_pass(
    config: &Config,
    projected: &ProjectedToolUpdates<'_>,
    resume: Option<Resume>,
    keep: bool,
) -> (
    Result<WireRequest, WireError>,
    Option<Resume>,
    Option<usize>,
) {
    let checked = (|| {
        let options = sorted_options(config)?;
        let tools = checked_tools(projected, CHAT_MAX_TOOL_NAME)?;
        if let Some(tool) = tools.iter().find(|t| t.defer_loading()) {
            return Err(WireError::DeferredTool {
                name: tool.name().to_owned(),
            });
        }
        Ok((options, tools))
    })();
    let (options, tools) = match checked {
        Ok(v) => v,
        Err(e) => return (Err(e), None, None),
    };
    let messages = &projected.messages;
    let mut resume = resume;
    let mut start = resume.as_mut().and_then(|r| r.matches(messages));
    // The latest prompt: among the new messages, else the one the kept messages had.
    let latest = latest_prompt_from(messages, start.unwrap_or(0))
        .or_else(|| start.and(resume.as_ref().and_then(|r| r.latest_prompt)));
    let system = match latest.map(|i| system_text(&messages[i])).transpose() {
        Ok(text) => text.filter(|t| !t.is_empty()),
        Err(e) => return (Err(e), None, None),
    };
    if resume.as_ref().is_some_and(|r| r.system != system) {
        // Another system message: the kept wire messages start with the old one.
        start = None;
    }
    if start.is_none() {
        resume = None;
    }
    let start = start.unwrap_or(0);
    let prior = resume.as_ref().map(|r| &r.seen);
    let built = match &resume {
        None => chat_messages(messages.iter(), system.as_deref(), None),
        // Only the new messages are visited (`skip` would step through the kept ones).
        Some(_) => chat_messages((start..messages.len()).map(|i| &messages[i]), None, prior),
    };
    let (wire_messages, new_ids) = match built {
        Ok(v) => v,
        Err(e) => return (Err(e), None, None),
    };
    let wire_tools: Vec<FunctionTool<'_>> = tools.iter().map(FunctionTool::new).collect();
    let mut segments = Segments {
        first: resume.as_ref().map_or(0, |r| r.turns),
        first_block: resume.as_ref().map_or(0, |r| r.blocks),
        resumed: resume.as_ref().map(|r| Arc::clone(&r.token)),
        ..Segments::default()
    };
    segments.carried = carried(
        resume.as_ref(),
        messages,
        start,
        latest.filter(|_| system.is_some()),
    );
    let head = write_head(&config.model, options.clone(), &wire_tools, &mut segments);
    // A pass from the first message writes its wire messages straight into the body (and
    // copies them out only for a resume point); a resumed one writes its new ones apart (only
    // they are checked as UTF-8), to join them to the kept bytes.
    let (body, tail_at) = match &resume {
        None => {
            let mut out = head.into_bytes();
            let base = out.len();
            write_messages(
                &mut out,
                &wire_messages,
                0,
                &mut segments.messages,
                &mut segments.blocks,
            );
            out.extend_from_slice(b"]}");
            // serde_json writes UTF-8 and so do the literals.
            (String::from_utf8(out).expect("JSON is UTF-8"), base)
        }
        Some(r) => {
            let mut tail = Vec::new();
            let (mut turns, mut blocks) = (Vec::new(), Vec::new());
            write_messages(&mut tail, &wire_messages, r.blocks, &mut turns, &mut blocks);
            join_resumed(head, &r.bytes, tail, (turns, blocks), &mut segments)
        }
    };
    segments.body_len = body.len();
    // Every debug build (the tests) checks that a pass from the first message writes the
    // bytes of the serializer's own `Body`.
    #[cfg(debug_assertions)]
    if resume.is_none() {
        let whole = Body {
            model: &config.model,
            options,
            system: None,
            tools: wire_tools,
            messages: wire_messages.iter().collect(),
        }
        .to_json();
        debug_assert_eq!(body, whole, "the chat writer departs from Body's bytes");
    }
    drop(wire_messages);
    let resumed_turns = resume.as_ref().map(|r| r.turns);
    let next = keep.then(|| {
        let tail = Tail {
            bytes: &body[tail_at..body.len() - 2],
            turns: segments.messages.len(),
            blocks: segments.blocks.len(),
            carried: segments.carried.clone(),
        };
        next_resume(resume, messages, start, latest, system, tail, new_ids)
    });
    segments.leaves = next.as_ref().map(|r| Arc::clone(&r.token));
    debug_assert_eq!(
        segments.carried.turns(),
        segments.first + segments.messages.len(),
        "the chat grouping counts other wire messages than the body holds"
    );
    let mut request = WireRequest::new(
        body,
        vec![("content-type".to_owned(), "application/json".to_owned())],
    );
    request.segments = Some(Arc::new(segments));
    (Ok(request), next, resumed_turns)
}

/// What each wire message of a chat request carries: the kept ones' (`resume`), then, from
/// message `start` on, one wire message per message that is not a system node (the system
/// message first, carrying the latest prompt `system`, on a pass from the first message).
/// Its blocks are the text parts of a `content` array: a user or tool message's blocks, or
/// an assistant message's text blocks, when there are two or more (one goes out as a string).
fn carried(
    resume: Option<&Resume>,
    messages: &ProjectedMessages<'_>,
    start: usize,
    system: Option<usize>,
) -> Carried {
    let mut carried = match resume {
        Some(r) => r.carried.clone(),
        None => {
            let mut carried = Carried::default();
            if let Some(prompt) = system {
                carried.open();
                carried.join(prompt);
            }
            carried
        }
    };
    for index in start..messages.len() {
        let message = &messages[index];
        if message.role() == Role::System {
            continue;
        }
        carried.open();
        carried.join(index);
        let texts = message.content().iter().enumerate();
        let texts = texts.filter(|(_, b)| matches!(b, ContentBlock::Text { .. }));
        if texts.clone().nth(1).is_some() {
            for (block, _) in texts {
                carried.block(index, block);
            }
        }
    }
    carried
}

/// What the next request resumes from after a pass that started at message `start`
/// (resuming from `old`, or from the first message), found the latest prompt at `latest`,
/// sent `system` first, wrote `tail` and saw the new call ids `new_ids`.
fn next_resume(
    old: Option<Resume>,
    messages: &ProjectedMessages<'_>,
    start: usize,
    latest: Option<usize>,
    system: Option<String>,
    tail: Tail<'_>,
    new_ids: Vec<String>,
) -> Resume {
    let mut r = old.unwrap_or_else(|| Resume {
        messages: HeldPrefix::empty(),
        bytes: String::with_capacity(tail.bytes.len()),
        turns: 0,
        blocks: 0,
        latest_prompt: None,
        system: None,
        seen: HashSet::with_capacity(new_ids.len()),
        carried: Carried::default(),
        token: Arc::new(()),
    });
    debug_assert!(start <= messages.len());
    r.messages = HeldPrefix::of(messages, messages.len());
    if !r.bytes.is_empty() && !tail.bytes.is_empty() {
        r.bytes.push(',');
    }
    r.bytes.push_str(tail.bytes);
    r.turns += tail.turns;
    r.blocks += tail.blocks;
    r.latest_prompt = latest;
    r.system = system;
    r.seen.extend(new_ids);
    r.carried = tail.carried;
    r.token = Arc::new(());
    r
}

/// The index of the latest prompt node at or after `from`. Reads from the back: O(messages
/// after it).
pub(super) fn latest_prompt_from(messages: &ProjectedMessages<'_>, from: usize) -> Option<usize> {
    messages
        .iter()
        .skip(from)
        .rposition(Message::is_prompt)
        .map(|i| from + i)
}

/// The wire messages of `messages` (the system message first when `system` is given), and
/// the call ids they hold; `prior`: the call ids of the messages before them when the pass
/// resumed.
#[allow(clippy::type_complexity)]
fn chat_messages<'a>(
    messages: impl Iterator<Item = &'a Message>,
    system: Option<&'a str>,
    prior: Option<&'a HashSet<String>>,
) -> Result<(Vec<ChatMessage<'a>>, Vec<String>), WireError> {
    let mut out = Vec::with_capacity(messages.size_hint().0 + 1);
    if let Some(text) = system {
        out.push(ChatMessage::System {
            content: Texts::One(Cow::Borrowed(text)),
        });
    }
    let mut calls = Calls {
        prior,
        ..Calls::default()
    };
    let mut ids = Vec::new();
    for message in messages {
        match message.role() {
            Role::System => check_system_without_history(message)?,
            Role::Developer => {
                return Err(WireError::message(
                    message.id().to_owned(),
                    MessageFault::DeveloperMessage,
                ));
            }
            Role::User => {
                calls.require_answered()?;
                out.push(ChatMessage::User {
                    content: texts(message)?,
                });
            }
            Role::Tool => {
                let call_id = calls.answer(message)?;
                out.push(ChatMessage::Tool {
                    tool_call_id: call_id,
                    content: texts(message)?,
                });
            }
            Role::Assistant => {
                calls.require_answered()?;
                let mut text = Vec::new();
                let mut tool_calls = Vec::new();
                for (index, block) in message.content().iter().enumerate() {
                    match block {
                        ContentBlock::Text { text: t } => text.push(t.as_str()),
                        ContentBlock::Reasoning { .. } => {}
                        ContentBlock::ToolCall(call) => {
                            let (id, name, arguments) = (call.id(), call.name(), call.arguments());
                            calls.call(message, id)?;
                            ids.push(id.to_owned());
                            tool_calls.push(FunctionCall::new(id, name, arguments));
                        }
                        other => return Err(unsupported(message, index, other)),
                    }
                }
                out.push(ChatMessage::Assistant {
                    content: (!text.is_empty() || tool_calls.is_empty()).then(|| Texts::new(text)),
                    tool_calls,
                });
            }
        }
    }
    calls.require_answered()?;
    Ok((out, ids))
}

/// The text blocks of a user or tool message, refusing any other block.
fn texts(message: &Message) -> Result<Texts<'_>, WireError> {
    let mut out = Vec::with_capacity(message.content().len());
    for (index, block) in message.content().iter().enumerate() {
        match block {
            ContentBlock::Text { text } => out.push(text.as_str()),
            other => return Err(unsupported(message, index, other)),
        }
    }
    Ok(Texts::new(out))
}

/// The body up to the first byte inside its `messages` array, as `Body` writes it, noting
/// where `tools` lies and where the messages start.
fn write_head(
    model: &str,
    options: Vec<(&str, &Value)>,
    tools: &[FunctionTool<'_>],
    segments: &mut Segments,
) -> String {
    const MESSAGES: &str = "\"messages\":[]}";
    // `{"model":…,<options>,` from the serializer itself, so the head's bytes are its own.
    let mut out = Body::<FunctionTool<'_>, ChatMessage<'_>> {
        model,
        options,
        system: None,
        tools: Vec::new(),
        messages: Vec::new(),
    }
    .to_json();
    out.truncate(out.len() - MESSAGES.len());
    if !tools.is_empty() {
        out.push_str("\"tools\":");
        let start = out.len();
        let mut bytes = std::mem::take(&mut out).into_bytes();
        json(&mut bytes, tools);
        out = String::from_utf8(bytes).expect("JSON is UTF-8");
        segments.tools = Some(start..out.len());
        out.push(',');
    }
    out.push_str("\"messages\":[");
    segments.messages_at = out.len();
    out
}

/// Writes `messages` comma-joined at the end of `out` as `Body` writes them
/// ([`super::write_spanned`]): the one writer of chat wire messages.
fn write_messages(
    out: &mut Vec<u8>,
    messages: &[ChatMessage<'_>],
    block_base: usize,
    turns: &mut Vec<TurnSpan>,
    blocks: &mut Vec<BlockSpan>,
) {
    super::write_spanned(out, messages, block_base, turns, blocks, write_message);
}

/// Writes one chat wire message, pushing its content parts' spans.
fn write_message(message: &ChatMessage<'_>, out: &mut Vec<u8>, blocks: &mut Vec<BlockSpan>) {
    match message {
        ChatMessage::System { content } => {
            out.extend_from_slice(br#"{"role":"system","content":"#);
            write_texts(out, content, blocks);
        }
        ChatMessage::User { content } => {
            out.extend_from_slice(br#"{"role":"user","content":"#);
            write_texts(out, content, blocks);
        }
        ChatMessage::Assistant {
            content,
            tool_calls,
        } => {
            out.extend_from_slice(br#"{"role":"assistant""#);
            if let Some(content) = content {
                out.extend_from_slice(br#","content":"#);
                write_texts(out, content, blocks);
            }
            if !tool_calls.is_empty() {
                out.extend_from_slice(br#","tool_calls":"#);
                json(out, tool_calls);
            }
        }
        ChatMessage::Tool {
            tool_call_id,
            content,
        } => {
            out.extend_from_slice(br#"{"role":"tool","tool_call_id":"#);
            json(out, tool_call_id);
            out.extend_from_slice(br#","content":"#);
            write_texts(out, content, blocks);
        }
    }
    out.push(b'}');
}

/// Writes a message's content: a string, or an array of text parts whose spans it pushes
/// (what the meter counts as the message's blocks).
fn write_texts(out: &mut Vec<u8>, texts: &Texts<'_>, blocks: &mut Vec<BlockSpan>) {
    match texts {
        Texts::One(text) => json(out, &**text),
        Texts::Many(parts) => {
            out.push(b'[');
            for (i, part) in parts.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                let at = out.len();
                json(out, part);
                blocks.push(BlockSpan {
                    span: at..out.len(),
                    thinking: false,
                });
            }
            out.push(b']');
        }
    }
}

/// Appends `value` as compact JSON. Cannot fail: every map key on the way is a string and
/// `Value` holds only finite numbers.
pub(super) fn json<T: Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) {
    serde_json::to_writer(out, value).expect("serializing a string-keyed value cannot fail");
}

/// `{"type":"function","function":{name, description, parameters}}`.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
enum FunctionTool<'a> {
    Function { function: Function<'a> },
}

impl<'a> FunctionTool<'a> {
    fn new(tool: &'a ToolSchema) -> Self {
        FunctionTool::Function {
            function: Function {
                name: tool.name(),
                description: tool.description(),
                parameters: CanonicalObject(tool.parameters()),
            },
        }
    }
}

#[derive(Serialize)]
struct Function<'a> {
    name: &'a str,
    description: &'a str,
    parameters: CanonicalObject<'a>,
}

/// A chat message: `{"role", ...}`. Written by [`write_messages`]; the derive is what the
/// debug builds check that writer against.
#[derive(Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
enum ChatMessage<'a> {
    System {
        content: Texts<'a>,
    },
    User {
        content: Texts<'a>,
    },
    Assistant {
        #[serde(skip_serializing_if = "Option::is_none")]
        content: Option<Texts<'a>>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<FunctionCall<'a>>,
    },
    Tool {
        tool_call_id: &'a str,
        content: Texts<'a>,
    },
}

/// Message content: a string for one text block (`""` for none), text parts for several.
#[derive(Serialize)]
#[serde(untagged)]
enum Texts<'a> {
    One(Cow<'a, str>),
    Many(Vec<Part<'a>>),
}

impl<'a> Texts<'a> {
    fn new(texts: Vec<&'a str>) -> Self {
        match texts.as_slice() {
            [] => Texts::One(Cow::Borrowed("")),
            [one] => Texts::One(Cow::Borrowed(one)),
            _ => Texts::Many(texts.into_iter().map(|text| Part::Text { text }).collect()),
        }
    }
}

/// `{"type":"text","text"}`.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
enum Part<'a> {
    Text { text: &'a str },
}

/// `{"id","type":"function","function":{"name","arguments"}}`, `arguments` the raw string the
/// model produced.
#[derive(Serialize)]
struct FunctionCall<'a> {
    id: &'a str,
    /// Always `"function"` (the tag comes after `id`, so it is a field).
    #[serde(rename = "type")]
    kind: &'static str,
    function: CalledFunction<'a>,
}

impl<'a> FunctionCall<'a> {
    fn new(id: &'a str, name: &'a str, arguments: &'a str) -> Self {
        FunctionCall {
            id,
            kind: "function",
            function: CalledFunction { name, arguments },
        }
    }
}

#[derive(Serialize)]
struct CalledFunction<'a> {
    name: &'a str,
    arguments: &'a str,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::MessageSource;
    use proptest::prelude::*;

    /// One step of building a chat history.
    #[derive(Clone, Debug)]
    enum Op {
        /// A user message with this many text blocks (quotes and non-ASCII included).
        User(Vec<String>),
        /// An answer: text blocks, a reasoning block or not, this many tool calls, and their
        /// results right after it or not.
        Answer(Vec<String>, bool, u8, bool),
        /// The result of the oldest unanswered call, if any.
        Result(String),
        /// The result of a call no one made.
        Orphan,
        /// A prompt node with this text (empty included).
        Prompt(String),
        /// A system message that is not a prompt (refused on this wire).
        Note,
        /// A developer message (refused on this wire).
        Developer,
        /// A call reusing the id of the first call made (refused: a duplicate id).
        Duplicate,
        /// Message `n` (modulo the length) is replaced by another: not an extension.
        Rewrite(usize),
        /// Every message becomes an equal message in another allocation.
        Copy,
    }

    fn text() -> impl Strategy<Value = String> {
        "[a-z \"\\\\\u{e9}\u{1f600}]{0,6}"
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => prop::collection::vec(text(), 0..3).prop_map(Op::User),
            6 => (prop::collection::vec(text(), 0..3), any::<bool>(), 0u8..3, prop::bool::weighted(0.8))
                .prop_map(|(t, r, c, a)| Op::Answer(t, r, c, a)),
            2 => text().prop_map(Op::Result),
            1 => Just(Op::Orphan),
            1 => prop_oneof![Just(String::new()), Just("Be brief.".to_owned()), text()]
                .prop_map(Op::Prompt),
            1 => Just(Op::Note),
            1 => Just(Op::Developer),
            1 => Just(Op::Duplicate),
            1 => any::<usize>().prop_map(Op::Rewrite),
            1 => Just(Op::Copy),
        ]
    }

    /// Applies `op` to `messages`; `n` names the new messages, `pending` the unanswered
    /// calls, `first_call` the first call id made.
    fn apply(
        op: &Op,
        n: usize,
        messages: &mut Vec<Message>,
        pending: &mut Vec<String>,
        first_call: &mut Option<String>,
    ) {
        let model = MessageSource::Model {
            provider: "openai-compatible".into(),
            model: "any".into(),
        };
        let texts = |t: &[String]| t.iter().map(ContentBlock::text).collect::<Vec<_>>();
        match op {
            Op::User(t) => messages.push(Message::new(
                format!("u{n}"),
                Role::User,
                texts(t),
                MessageSource::User,
            )),
            Op::Answer(t, reasoning, calls, answered) => {
                let mut content = texts(t);
                if *reasoning {
                    content.insert(
                        0,
                        ContentBlock::Reasoning {
                            text: "hmm".into(),
                            extra: Default::default(),
                        },
                    );
                }
                for c in 0..*calls {
                    let id = format!("c{n}-{c}");
                    first_call.get_or_insert_with(|| id.clone());
                    pending.push(id.clone());
                    content.push(
                        ContentBlock::tool_call(id, "read", format!(r#"{{"n":{n}}}"#)).unwrap(),
                    );
                }
                messages.push(Message::new(
                    format!("a{n}"),
                    Role::Assistant,
                    content,
                    model,
                ));
                while *answered && !pending.is_empty() {
                    let call = pending.remove(0);
                    messages.push(Message::tool_result(format!("r{n}-{call}"), call, "ok"));
                }
            }
            Op::Result(t) => {
                if !pending.is_empty() {
                    let call = pending.remove(0);
                    messages.push(Message::tool_result(format!("r{n}"), call, t.as_str()));
                }
            }
            Op::Orphan => messages.push(Message::tool_result(format!("r{n}"), "nobody", "?")),
            Op::Prompt(t) => messages.push(Message::new(
                format!("p{n}"),
                Role::System,
                (!t.is_empty())
                    .then(|| ContentBlock::text(t.as_str()))
                    .into_iter()
                    .collect(),
                MessageSource::SystemPrompt,
            )),
            Op::Note => messages.push(Message::new(
                format!("s{n}"),
                Role::System,
                vec![ContentBlock::text("a note")],
                MessageSource::User,
            )),
            Op::Developer => messages.push(Message::developer(
                format!("d{n}"),
                vec![ContentBlock::addition("read").unwrap()],
            )),
            Op::Duplicate => {
                if let Some(id) = first_call.clone() {
                    let call = ContentBlock::tool_call(id, "read", "{}").unwrap();
                    messages.push(Message::new(
                        format!("a{n}"),
                        Role::Assistant,
                        vec![call],
                        model,
                    ));
                }
            }
            Op::Rewrite(i) => {
                if !messages.is_empty() {
                    let i = i % messages.len();
                    let other = messages[i].with_content(vec![ContentBlock::text("rewritten")]);
                    messages[i] = other;
                }
            }
            Op::Copy => {
                for m in messages.iter_mut() {
                    *m = m.with_content(m.content().to_vec());
                }
            }
        }
    }

    fn tool() -> ToolSchema {
        let mut parameters = serde_json::Map::new();
        parameters.insert("type".into(), "object".into());
        ToolSchema::new("read", "Read a file", parameters)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// A chain of requests, each serialized resuming from the point the previous one left,
        /// sends exactly what a pass from the first message sends (bytes, headers, refusals),
        /// over histories with prompt changes, refused messages, orphan and duplicate calls,
        /// rewrites and equal copies; and a plain extension does resume.
        #[test]
        fn resumed_chat_requests_are_fresh_requests(
            steps in prop::collection::vec(prop::collection::vec(op(), 0..4), 1..12),
        ) {
            let config = Config::new("openai-compatible", "any").with("max_tokens", 64.into()).unwrap();
            let tools = [tool()];
            let (mut messages, mut pending, mut first_call) = (Vec::new(), Vec::new(), None);
            let mut resume: Option<Resume> = None;
            let mut n = 0;
            for ops in &steps {
                let before = messages.clone();
                let (pending_before, first_before) = (pending.clone(), first_call.clone());
                let mut rewritten = false;
                for op in ops {
                    n += 1;
                    rewritten |= matches!(op, Op::Rewrite(_)) && !messages.is_empty();
                    apply(op, n, &mut messages, &mut pending, &mut first_call);
                }
                let projected = ProjectedToolUpdates {
                    tools: Some(Cow::Borrowed(&tools[..])),
                    ..ProjectedToolUpdates::new(&messages[..])
                };
                let had = resume.is_some();
                let (resumed, next, kept) =
                    resumed_pass(&config, &projected, resume.take(), true);
                let fresh = serialize_openai_chat(&config, &projected);
                match (&resumed, &fresh) {
                    (Ok(r), Ok(f)) => {
                        prop_assert_eq!(&r.body, &f.body);
                        prop_assert_eq!(&r.headers, &f.headers);
                        let segs = r.segments.as_deref().unwrap();
                        prop_assert_eq!(segs.first, kept.unwrap_or(0));
                        prop_assert_eq!(segs.body_len, r.body.len());
                        for t in &segs.messages {
                            let text = &r.body[t.span.clone()];
                            let framed = text.starts_with(r#"{"role":"#) && text.ends_with('}');
                            prop_assert!(framed, "a span that is not a wire message: {}", text);
                        }
                        // Every extension of a request that left a point, with the same
                        // system message, resumes from it.
                        let extends = had && !rewritten && messages.starts_with(&before);
                        let same_system = latest_prompt_from(&(&messages).into(), 0)
                            == latest_prompt_from(&(&before).into(), 0);
                        if extends && same_system {
                            prop_assert!(kept.is_some(), "an extension did not resume");
                        }
                        prop_assert!(next.is_some());
                    }
                    (r, f) => {
                        prop_assert_eq!(
                            format!("{:?}", r.as_ref().err()),
                            format!("{:?}", f.as_ref().err())
                        );
                        prop_assert!(next.is_none());
                    }
                }
                resume = next;
                if resumed.is_err() {
                    // A refused request is fixed by the caller: the next step goes on from
                    // the last request that was sent (without a point to resume from).
                    messages = before;
                    (pending, first_call) = (pending_before, first_before);
                }
            }
        }
    }

    /// A plain loop resumes from the whole previous request each step, and the kept wire
    /// messages are that request's, byte for byte.
    #[test]
    fn a_chat_loop_resumes_from_the_whole_previous_request() {
        let config = Config::new("openai-compatible", "any");
        let mut messages = vec![
            Message::system("p", "Be brief."),
            Message::user("u", "Read the files."),
        ];
        let mut resume = None;
        let mut previous: Option<String> = None;
        for k in 0..5 {
            let projected = ProjectedToolUpdates::new(&messages[..]);
            let (wire, next, kept) =
                serialize_openai_chat_resuming(&config, &projected, resume.take());
            let wire = wire.unwrap();
            let segs = wire.segments.as_deref().unwrap();
            if let Some(p) = &previous {
                // The previous request's: the system message, the user's, two per earlier round.
                assert_eq!(kept, Some(2 * k));
                assert_eq!(segs.first, 2 * k);
                assert_eq!(segs.messages.len(), 2);
                let kept_bytes = &p[..p.len() - 2];
                assert!(wire.body.starts_with(kept_bytes), "round {k}");
                assert!(segs.resumed.is_some());
            } else {
                assert_eq!(kept, None);
                assert_eq!(segs.first, 0);
            }
            assert!(segs.leaves.is_some());
            previous = Some(wire.body.clone());
            resume = next;
            messages.push(Message::new(
                format!("a{k}"),
                Role::Assistant,
                vec![ContentBlock::tool_call(format!("c{k}"), "read", "{}").unwrap()],
                MessageSource::Model {
                    provider: "openai-compatible".into(),
                    model: "any".into(),
                },
            ));
            messages.push(Message::tool_result(format!("r{k}"), format!("c{k}"), "ok"));
        }
        // A new prompt node with another text: the kept system message is stale, so the pass
        // starts from the first message (and sends the new prompt).
        messages.push(Message::system("p2", "Be thorough."));
        let projected = ProjectedToolUpdates::new(&messages[..]);
        let (wire, _, kept) = serialize_openai_chat_resuming(&config, &projected, resume);
        assert_eq!(kept, None);
        assert!(
            wire.unwrap()
                .body
                .contains(r#"{"role":"system","content":"Be thorough."}"#)
        );
    }
}
