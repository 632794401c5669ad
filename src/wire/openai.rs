//! OpenAI-compatible chat completions.
//!
//! This wire has no way to announce tool changes or defer declarations: it only ever receives
//! no-mode projections (which drop developer messages and clear `defer_loading`), and anything
//! a mode would have added is refused.

use serde::Serialize;
use serde::ser::{SerializeMap, SerializeSeq, Serializer};

use super::canonical::CanonicalObject;
use super::{
    Body, Calls, MessageFault, WireError, WireRequest, check_system_without_history, checked_tools,
    latest_prompt, sorted_options, system_text, unsupported,
};
use crate::event::Config;
use crate::project::ProjectedToolUpdates;
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
    let options = sorted_options(config)?;
    let tools = checked_tools(projected)?;
    if let Some(tool) = tools.iter().find(|t| t.defer_loading()) {
        return Err(WireError::DeferredTool {
            name: tool.name().to_owned(),
        });
    }
    let messages = chat_messages(&projected.messages)?;
    let body = Body {
        model: &config.model,
        options,
        system: None,
        tools: tools.iter().map(FunctionTool).collect(),
        messages,
    };
    Ok(WireRequest::new(
        body.to_json(),
        vec![("content-type".to_owned(), "application/json".to_owned())],
    ))
}

fn chat_messages(messages: &[Message]) -> Result<Vec<ChatMessage<'_>>, WireError> {
    let mut out = Vec::with_capacity(messages.len() + 1);
    if let Some(system) = latest_prompt(messages) {
        let text = system_text(system)?;
        if !text.is_empty() {
            out.push(ChatMessage::System(text));
        }
    }
    let mut calls = Calls::default();
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
                out.push(ChatMessage::User(texts(message)?));
            }
            Role::Tool => {
                let call_id = calls.answer(message)?;
                out.push(ChatMessage::Tool {
                    call_id,
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
                        ContentBlock::ToolCall {
                            id,
                            name,
                            arguments,
                        } => {
                            calls.call(message, id)?;
                            tool_calls.push(FunctionCall {
                                id,
                                name,
                                arguments,
                            });
                        }
                        other => return Err(unsupported(message, index, other)),
                    }
                }
                out.push(ChatMessage::Assistant {
                    content: (!text.is_empty() || tool_calls.is_empty()).then_some(Texts(text)),
                    tool_calls,
                });
            }
        }
    }
    calls.require_answered()?;
    Ok(out)
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
    Ok(Texts(out))
}

/// `{"type":"function","function":{name, description, parameters}}`.
struct FunctionTool<'a>(&'a ToolSchema);

impl Serialize for FunctionTool<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        struct Function<'a>(&'a ToolSchema);
        impl Serialize for Function<'_> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let mut m = s.serialize_map(Some(3))?;
                m.serialize_entry("name", self.0.name())?;
                m.serialize_entry("description", self.0.description())?;
                m.serialize_entry("parameters", &CanonicalObject(self.0.parameters()))?;
                m.end()
            }
        }
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry("type", "function")?;
        m.serialize_entry("function", &Function(self.0))?;
        m.end()
    }
}

enum ChatMessage<'a> {
    System(String),
    User(Texts<'a>),
    Assistant {
        content: Option<Texts<'a>>,
        tool_calls: Vec<FunctionCall<'a>>,
    },
    Tool {
        call_id: &'a str,
        content: Texts<'a>,
    },
}

impl Serialize for ChatMessage<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        match self {
            ChatMessage::System(text) => {
                m.serialize_entry("role", "system")?;
                m.serialize_entry("content", text)?;
            }
            ChatMessage::User(content) => {
                m.serialize_entry("role", "user")?;
                m.serialize_entry("content", content)?;
            }
            ChatMessage::Assistant {
                content,
                tool_calls,
            } => {
                m.serialize_entry("role", "assistant")?;
                if let Some(content) = content {
                    m.serialize_entry("content", content)?;
                }
                if !tool_calls.is_empty() {
                    m.serialize_entry("tool_calls", tool_calls)?;
                }
            }
            ChatMessage::Tool { call_id, content } => {
                m.serialize_entry("role", "tool")?;
                m.serialize_entry("tool_call_id", call_id)?;
                m.serialize_entry("content", content)?;
            }
        }
        m.end()
    }
}

/// Message content: a string for one text block (`""` for none), text parts for several.
struct Texts<'a>(Vec<&'a str>);

impl Serialize for Texts<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        struct Part<'a>(&'a str);
        impl Serialize for Part<'_> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let mut m = s.serialize_map(Some(2))?;
                m.serialize_entry("type", "text")?;
                m.serialize_entry("text", self.0)?;
                m.end()
            }
        }
        match self.0.as_slice() {
            [] => s.serialize_str(""),
            [one] => s.serialize_str(one),
            many => {
                let mut seq = s.serialize_seq(Some(many.len()))?;
                for text in many {
                    seq.serialize_element(&Part(text))?;
                }
                seq.end()
            }
        }
    }
}

/// `{"id","type":"function","function":{"name","arguments"}}`, `arguments` the raw string the
/// model produced.
struct FunctionCall<'a> {
    id: &'a str,
    name: &'a str,
    arguments: &'a str,
}

impl Serialize for FunctionCall<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        struct Function<'a>(&'a str, &'a str);
        impl Serialize for Function<'_> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let mut m = s.serialize_map(Some(2))?;
                m.serialize_entry("name", self.0)?;
                m.serialize_entry("arguments", self.1)?;
                m.end()
            }
        }
        let mut m = s.serialize_map(Some(3))?;
        m.serialize_entry("id", self.id)?;
        m.serialize_entry("type", "function")?;
        m.serialize_entry("function", &Function(self.name, self.arguments))?;
        m.end()
    }
}
