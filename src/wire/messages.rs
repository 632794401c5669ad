//! The Messages API (DeepSeek's Anthropic-compatible endpoint and Anthropic), SPEC §7.
//!
//! The conversation is rebuilt as wire turns in one pass over the projected messages. Prompt
//! updates and tool changes cannot become their own turns anywhere: the API accepts a system
//! message only before an assistant message or at the end. They wait in a *queue* that is
//! flushed, as **one** system message, before the next assistant message or at the end, and
//! only right after a user / tool-result turn; what still waits at the end is left out of this
//! request (it goes out with the next one).

use std::borrow::Cow;

use indexmap::IndexMap;
use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};
use serde_json::{Map, Value};

use super::canonical::{Canonical, CanonicalObject};
use super::{
    Body, Calls, WireContext, WireError, WireRequest, block_type, check_system_without_history,
    checked_tools, latest_prompt, sorted_options, system_text, unsupported,
};
use crate::event::Config;
use crate::project::ProjectedToolUpdates;
use crate::route::Route;
use crate::vocab::{ContentBlock, DEFERRED_PLACEHOLDER_NAME, Message, Role, ToolSchema};

/// The beta that lets a conversation add and remove tools mid-way.
const TOOL_CHANGE_BETA: &str = "mid-conversation-tool-changes-2026-07-01";

/// The API version every request names.
const ANTHROPIC_VERSION: &str = "2023-06-01";

/// Serializes `projected` for a Messages-API route.
///
/// Body keys, in order: `model`; the other config options except `provider`, sorted by key;
/// `system` (a string, omitted when empty); `tools` (omitted when there are none); `messages`.
/// Headers: `content-type: application/json`, `anthropic-version: 2023-06-01`, and
/// `anthropic-beta: mid-conversation-tool-changes-2026-07-01` on every request of a
/// [`beta_always`](Route::beta_always) route, otherwise exactly when a serialized message holds
/// a tool-change block.
///
/// The system prompt: on routes with [`system_prompt_in_history`](Route::system_prompt_in_history)
/// a system node that is the first message is `system`, and every other non-empty system node
/// joins the queue (see the module doc) as a text block; on other routes only the latest system
/// node is sent, as `system`. Developer messages join the queue as `tool_addition` /
/// `tool_removal` blocks and text blocks (empty ones dropped). Tool results become
/// `tool_result` blocks of a user turn (`"is_error": true` only when `isError` is true); consecutive user content and consecutive assistant
/// messages are merged into one turn each. Empty text blocks are dropped everywhere (the API
/// refuses them). Costs O(messages + blocks + tools).
///
/// # Errors
/// - [`WireError::MissingMaxTokens`] without a `max_tokens` option;
///   [`WireError::ReservedConfigKey`] for an option named `model`, `provider`, `system`,
///   `tools` or `messages`;
/// - [`WireError::ReservedToolName`], [`WireError::DuplicateTool`] for the projected tools;
/// - [`WireError::DeveloperBlock`] for a developer block other than a tool change or text;
///   [`WireError::MisplacedToolChange`] for a tool change outside a developer message;
///   [`WireError::UnsupportedBlock`] for any other block the role cannot carry (an unknown
///   block type anywhere, reasoning or a tool call outside an assistant message, a reasoning
///   block with a `type` or `thinking` field of its own);
/// - [`WireError::InvalidArguments`], [`WireError::ArgumentsNotObject`],
///   [`WireError::DuplicateCallId`] for tool calls; [`WireError::MissingToolResult`],
///   [`WireError::OrphanToolResult`], [`WireError::ResultWithoutCallId`] when calls and results
///   do not pair up turn by turn.
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
    _context: &WireContext<'_>,
) -> Result<WireRequest, WireError> {
    let options = sorted_options(config)?;
    if !config.extra.contains_key("max_tokens") {
        return Err(WireError::MissingMaxTokens);
    }
    let tools = checked_tools(projected)?;
    let conversation = Conversation::build(&projected.messages, route.system_prompt_in_history())?;
    // SPEC §7: on a mode route with the placeholder, a deferred-tools section exists from a
    // series' first request on, on the main path and on fallbacks alike, so it never toggles.
    let placeholder = route.deferred_placeholder()
        && route.tool_update().is_some()
        && tools.iter().any(|t| !t.defer_loading());
    let body = Body {
        model: &config.model,
        options,
        system: conversation.system.as_deref(),
        tools: tools
            .iter()
            .map(WireTool::Declared)
            .chain(placeholder.then_some(WireTool::Placeholder))
            .collect(),
        messages: conversation.turns,
    };
    let mut headers = vec![
        ("content-type".to_owned(), "application/json".to_owned()),
        ("anthropic-version".to_owned(), ANTHROPIC_VERSION.to_owned()),
    ];
    if route.beta_always() || conversation.has_tool_change {
        headers.push(("anthropic-beta".to_owned(), TOOL_CHANGE_BETA.to_owned()));
    }
    Ok(WireRequest::new(body.to_json(), headers))
}

/// `{name, description, input_schema, defer_loading?}`; unknown tool fields are not sent (the
/// API refuses extra keys).
enum WireTool<'a> {
    /// A projected declaration.
    Declared(&'a ToolSchema),
    /// The reserved deferred placeholder, never logged and never named by a block.
    Placeholder,
}

/// `{"type":"object","properties":{}}`, in that key order (SPEC §7 spells it so).
struct EmptyObjectSchema;

impl Serialize for EmptyObjectSchema {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry("type", "object")?;
        m.serialize_entry("properties", &EmptyMap)?;
        m.end()
    }
}

struct EmptyMap;

impl Serialize for EmptyMap {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_map(Some(0))?.end()
    }
}

impl Serialize for WireTool<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let t = match self {
            WireTool::Declared(t) => *t,
            WireTool::Placeholder => {
                let mut m = s.serialize_map(Some(4))?;
                m.serialize_entry("name", DEFERRED_PLACEHOLDER_NAME)?;
                m.serialize_entry("description", "Reserved; never call.")?;
                m.serialize_entry("input_schema", &EmptyObjectSchema)?;
                m.serialize_entry("defer_loading", &true)?;
                return m.end();
            }
        };
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("name", t.name())?;
        m.serialize_entry("description", t.description())?;
        m.serialize_entry("input_schema", &CanonicalObject(t.parameters()))?;
        if t.defer_loading() {
            m.serialize_entry("defer_loading", &true)?;
        }
        m.end()
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum TurnRole {
    User,
    Assistant,
    System,
}

/// One wire message: `{"role","content":[...]}`.
struct Turn<'a> {
    role: TurnRole,
    content: Vec<Block<'a>>,
    /// The message that opened the turn, to name in errors.
    opened_by: &'a str,
}

impl Serialize for Turn<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let role = match self.role {
            TurnRole::User => "user",
            TurnRole::Assistant => "assistant",
            TurnRole::System => "system",
        };
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry("role", role)?;
        m.serialize_entry("content", &self.content)?;
        m.end()
    }
}

/// One wire content block.
enum Block<'a> {
    Text(Cow<'a, str>),
    Thinking {
        text: &'a str,
        extra: &'a IndexMap<String, Value>,
    },
    ToolUse {
        id: &'a str,
        name: &'a str,
        input: Map<String, Value>,
    },
    ToolResult {
        tool_use_id: &'a str,
        content: Vec<Block<'a>>,
        is_error: bool,
    },
    ToolAddition(&'a str),
    ToolRemoval(&'a str),
}

impl Block<'_> {
    fn is_tool_change(&self) -> bool {
        matches!(self, Block::ToolAddition(_) | Block::ToolRemoval(_))
    }
}

impl Serialize for Block<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        match self {
            Block::Text(text) => {
                m.serialize_entry("type", "text")?;
                m.serialize_entry("text", text)?;
            }
            Block::Thinking { text, extra } => {
                m.serialize_entry("type", "thinking")?;
                m.serialize_entry("thinking", text)?;
                // Sorted, so the bytes never depend on how the block was built or decoded.
                let mut fields: Vec<_> = extra.iter().collect();
                fields.sort_unstable_by(|a, b| a.0.cmp(b.0));
                for (k, v) in fields {
                    m.serialize_entry(k, &Canonical(v))?;
                }
            }
            Block::ToolUse { id, name, input } => {
                m.serialize_entry("type", "tool_use")?;
                m.serialize_entry("id", id)?;
                m.serialize_entry("name", name)?;
                m.serialize_entry("input", &CanonicalObject(input))?;
            }
            Block::ToolResult {
                tool_use_id,
                content,
                is_error,
            } => {
                m.serialize_entry("type", "tool_result")?;
                m.serialize_entry("tool_use_id", tool_use_id)?;
                m.serialize_entry("content", content)?;
                if *is_error {
                    m.serialize_entry("is_error", &true)?;
                }
            }
            Block::ToolAddition(name) | Block::ToolRemoval(name) => {
                let ty = if matches!(self, Block::ToolAddition(_)) {
                    "tool_addition"
                } else {
                    "tool_removal"
                };
                m.serialize_entry("type", ty)?;
                m.serialize_entry("tool", &ToolReference(name))?;
            }
        }
        m.end()
    }
}

/// `{"type":"tool_reference","name":N}`.
struct ToolReference<'a>(&'a str);

impl Serialize for ToolReference<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry("type", "tool_reference")?;
        m.serialize_entry("name", self.0)?;
        m.end()
    }
}

/// The top-level `system` and the wire turns of one request.
struct Conversation<'a> {
    system: Option<String>,
    turns: Vec<Turn<'a>>,
    has_tool_change: bool,
}

/// The state of the single pass over the messages.
struct Builder<'a> {
    turns: Vec<Turn<'a>>,
    /// Prompt updates and tool changes waiting for a flush, in order.
    queue: Vec<Block<'a>>,
    calls: Calls<'a>,
    has_tool_change: bool,
}

impl<'a> Conversation<'a> {
    fn build(messages: &'a [Message], prompts_in_history: bool) -> Result<Self, WireError> {
        let (system, rest) = match messages.split_first() {
            // In-history routes: node 0 is `system` only when it is the first surface node.
            Some((first, rest)) if prompts_in_history && first.role() == Role::System => {
                (Some(system_text(first)?), rest)
            }
            _ if prompts_in_history => (None, messages),
            _ => (
                latest_prompt(messages).map(system_text).transpose()?,
                messages,
            ),
        };
        let mut b = Builder {
            turns: Vec::with_capacity(rest.len()),
            queue: Vec::new(),
            calls: Calls::default(),
            has_tool_change: false,
        };
        for message in rest {
            match message.role() {
                Role::System if prompts_in_history => {
                    let text = system_text(message)?;
                    if !text.is_empty() {
                        b.queue.push(Block::Text(Cow::Owned(text)));
                    }
                }
                Role::System => check_system_without_history(message)?,
                Role::Developer => b.developer(message)?,
                Role::User => {
                    b.calls.require_answered()?;
                    let content = text_blocks(message)?;
                    b.push_user(message, content);
                }
                Role::Tool => {
                    let tool_use_id = b.calls.answer(message)?;
                    let block = Block::ToolResult {
                        tool_use_id,
                        content: text_blocks(message)?,
                        is_error: message.is_error() == Some(true),
                    };
                    b.push_user(message, vec![block]);
                }
                Role::Assistant => b.assistant(message)?,
            }
        }
        b.calls.require_answered()?;
        // At the end the queue goes out only after a user turn; otherwise it waits for the
        // next request (a continuation right after an assistant message is not blocked).
        b.flush();
        // The API refuses a turn without content (empty text blocks are dropped above),
        // except a final assistant turn, which the model continues.
        let last = b.turns.len().saturating_sub(1);
        if let Some(turn) = b.turns.iter().enumerate().find_map(|(i, t)| {
            (t.content.is_empty() && !(i == last && t.role == TurnRole::Assistant)).then_some(t)
        }) {
            return Err(WireError::EmptyTurn {
                message_id: turn.opened_by.to_owned(),
            });
        }
        Ok(Conversation {
            system,
            turns: b.turns,
            has_tool_change: b.has_tool_change,
        })
    }
}

impl<'a> Builder<'a> {
    fn last_role(&self) -> Option<TurnRole> {
        self.turns.last().map(|t| t.role)
    }

    /// Appends `content` to the current user turn, or opens one for `message`.
    fn push_user(&mut self, message: &'a Message, content: Vec<Block<'a>>) {
        match self.turns.last_mut() {
            Some(turn) if turn.role == TurnRole::User => turn.content.extend(content),
            _ => self.turns.push(Turn {
                role: TurnRole::User,
                content,
                opened_by: message.id(),
            }),
        }
    }

    fn developer(&mut self, message: &'a Message) -> Result<(), WireError> {
        for (index, block) in message.content().iter().enumerate() {
            match block {
                ContentBlock::ToolAddition { tool_name } => {
                    self.queue.push(Block::ToolAddition(tool_name));
                }
                ContentBlock::ToolRemoval { tool_name } => {
                    self.queue.push(Block::ToolRemoval(tool_name));
                }
                ContentBlock::Text { text } if text.is_empty() => {}
                ContentBlock::Text { text } => self.queue.push(Block::Text(Cow::Borrowed(text))),
                other => {
                    return Err(WireError::DeveloperBlock {
                        message_id: message.id().to_owned(),
                        index,
                        block_type: block_type(other),
                    });
                }
            }
        }
        Ok(())
    }

    fn assistant(&mut self, message: &'a Message) -> Result<(), WireError> {
        if self.last_role() != Some(TurnRole::Assistant) {
            self.calls.require_answered()?;
            self.flush();
            self.turns.push(Turn {
                role: TurnRole::Assistant,
                content: Vec::with_capacity(message.content().len()),
                opened_by: message.id(),
            });
        }
        let mut content = Vec::with_capacity(message.content().len());
        for (index, block) in message.content().iter().enumerate() {
            match block {
                ContentBlock::Text { text } if text.is_empty() => {}
                ContentBlock::Text { text } => content.push(Block::Text(Cow::Borrowed(text))),
                ContentBlock::Reasoning { text, extra } => {
                    if extra.contains_key("type") || extra.contains_key("thinking") {
                        // They would repeat a key the `thinking` block writes itself.
                        return Err(unsupported(message, index, block));
                    }
                    content.push(Block::Thinking { text, extra });
                }
                ContentBlock::ToolCall {
                    id,
                    name,
                    arguments,
                } => {
                    let input = parse_arguments(message, id, arguments)?;
                    self.calls.call(message, id)?;
                    content.push(Block::ToolUse { id, name, input });
                }
                other => return Err(unsupported(message, index, other)),
            }
        }
        if let Some(turn) = self.turns.last_mut() {
            turn.content.extend(content);
        }
        Ok(())
    }

    /// Sends the queue as one system message, if it is non-empty and the last turn is a user
    /// / tool-result turn; otherwise it keeps waiting.
    fn flush(&mut self) {
        if self.queue.is_empty() || self.last_role() != Some(TurnRole::User) {
            return;
        }
        self.has_tool_change |= self.queue.iter().any(Block::is_tool_change);
        let content = std::mem::take(&mut self.queue);
        self.turns.push(Turn {
            role: TurnRole::System,
            content,
            opened_by: "",
        });
    }
}

/// The non-empty text blocks of a user or tool message, refusing any other block.
fn text_blocks(message: &Message) -> Result<Vec<Block<'_>>, WireError> {
    let mut out = Vec::with_capacity(message.content().len());
    for (index, block) in message.content().iter().enumerate() {
        match block {
            ContentBlock::Text { text } if text.is_empty() => {}
            ContentBlock::Text { text } => out.push(Block::Text(Cow::Borrowed(text))),
            other => return Err(unsupported(message, index, other)),
        }
    }
    Ok(out)
}

/// A tool call's `arguments`, which must be a JSON object.
fn parse_arguments(
    message: &Message,
    call_id: &str,
    arguments: &str,
) -> Result<Map<String, Value>, WireError> {
    match serde_json::from_str(arguments) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(WireError::ArgumentsNotObject {
            message_id: message.id().to_owned(),
            call_id: call_id.to_owned(),
        }),
        Err(source) => Err(WireError::InvalidArguments {
            message_id: message.id().to_owned(),
            call_id: call_id.to_owned(),
            source,
        }),
    }
}
