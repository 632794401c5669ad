//! OpenAI-compatible chat completions.
//!
//! This wire has no way to announce tool changes or defer declarations: it only ever receives
//! no-mode projections (which drop developer messages and clear `defer_loading`), and anything
//! a mode would have added is refused.

use std::borrow::Cow;

use serde::Serialize;

use super::canonical::CanonicalObject;
use super::{
    Body, Calls, MessageFault, WireError, WireRequest, check_system_without_history, checked_tools,
    latest_prompt, sorted_options, system_text, unsupported,
};
use crate::event::Config;
use crate::project::{ProjectedMessages, ProjectedToolUpdates};
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
        tools: tools.iter().map(FunctionTool::new).collect(),
        messages,
    };
    Ok(WireRequest::new(
        body.to_json(),
        vec![("content-type".to_owned(), "application/json".to_owned())],
    ))
}

fn chat_messages<'a>(
    messages: &'a ProjectedMessages<'_>,
) -> Result<Vec<ChatMessage<'a>>, WireError> {
    let mut out = Vec::with_capacity(messages.len() + 1);
    if let Some(system) = latest_prompt(messages.iter()) {
        let text = system_text(system)?;
        if !text.is_empty() {
            out.push(ChatMessage::System {
                content: Texts::One(Cow::Owned(text)),
            });
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
                        ContentBlock::ToolCall {
                            id,
                            name,
                            arguments,
                        } => {
                            calls.call(message, id)?;
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
    Ok(Texts::new(out))
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

/// A chat message: `{"role", ...}`.
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
