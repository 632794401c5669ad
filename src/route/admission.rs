//! Which tools a route can send: checked when tools are set, so that a tool the provider would
//! refuse never reaches the log.
//!
//! A tool enters the log in a header; from there on every request of its declaration series
//! carries it (a removal leaves the declaration in `tools` on a route with a tool-update mode).
//! A tool the serializer then refuses would fail every later request of the series, so the
//! loop refuses it before it is logged ([`AgentLoop::set_tools`](crate::AgentLoop::set_tools),
//! [`Recorder::record`](crate::agent::Recorder::record)). The serializers keep their own checks
//! for logs written by other code.

use std::collections::HashSet;

use super::{Route, WireApi};
use crate::vocab::{DEFERRED_PLACEHOLDER_NAME, ToolSchema};
use crate::wire::{CHAT_MAX_TOOL_NAME, MESSAGES_MAX_TOOL_NAME, is_valid_tool_name};

/// Why a route refuses a tool.
///
/// ```
/// use mektpoy::route::ToolRefusal;
/// use mektpoy::{ToolSchema, route_for};
/// let chat = route_for("acme", "acme-1"); // OpenAI-compatible chat: names up to 64 bytes
/// let long = ToolSchema::no_input("x".repeat(65), "");
/// assert_eq!(chat.check_tool(&long), Err(ToolRefusal::InvalidName { max_len: 64 }));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ToolRefusal {
    /// The name is empty, longer than `max_len` bytes, or holds a character outside
    /// `[a-zA-Z0-9_-]` (the Messages API: 128 bytes; OpenAI-compatible chat: 64).
    InvalidName {
        /// The longest name the route takes.
        max_len: usize,
    },
    /// A Messages-API route needs `"type": "object"` at the root of `input_schema`.
    SchemaRootNotObject,
    /// The name is the one the serializer reserves for its deferred placeholder.
    ReservedName,
    /// An earlier tool of the same set has this name.
    DuplicateName,
}

/// A tool a route refuses, and which of the given tools it is.
///
/// ```
/// use mektpoy::route::ToolRefusal;
/// use mektpoy::{ToolSchema, route_for};
/// let read = ToolSchema::no_input("read", "Read a file");
/// let refused = route_for("acme", "acme-1").check_tools(&[read.clone(), read]).unwrap_err();
/// assert_eq!((refused.tool.as_str(), refused.index), ("read", 1));
/// assert_eq!(refused.reason, ToolRefusal::DuplicateName);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("tool #{index} `{tool}`: {}", describe(reason))]
#[non_exhaustive]
pub struct ToolRefused {
    /// The refused tool's name.
    pub tool: String,
    /// Its position in the given tools.
    pub index: usize,
    /// Why.
    pub reason: ToolRefusal,
}

fn describe(reason: &ToolRefusal) -> String {
    match reason {
        ToolRefusal::InvalidName { max_len } => {
            format!("the route takes names of 1 to {max_len} characters from [a-zA-Z0-9_-]")
        }
        ToolRefusal::SchemaRootNotObject => {
            "its schema has no \"type\": \"object\" at the root, which the Messages API requires"
                .to_owned()
        }
        ToolRefusal::ReservedName => "the name is reserved by mektpoy".to_owned(),
        ToolRefusal::DuplicateName => "an earlier tool has the same name".to_owned(),
    }
}

/// Checking tools against a route.
///
/// ```
/// use mektpoy::{ToolSchema, route_for};
/// let route = route_for("anthropic", "claude-opus-5");
/// let tools = [ToolSchema::no_input("read", ""), ToolSchema::no_input("bad name", "")];
/// assert_eq!(route.check_tools(&tools).unwrap_err().index, 1);
/// assert!(route.check_tool(&tools[0]).is_ok());
/// ```
impl Route {
    /// Checks a tool set against what this route's provider takes: names (the Messages API
    /// takes `^[a-zA-Z0-9_-]{1,128}$`, OpenAI-compatible chat the same characters up to 64),
    /// a root `"type": "object"` schema on Messages-API routes, no reserved and no repeated
    /// name. The first refused tool is reported.
    ///
    /// ```
    /// use mektpoy::{ToolSchema, route_for};
    /// use mektpoy::route::ToolRefusal;
    /// let object = serde_json::json!({"type": "object"}).as_object().unwrap().clone();
    /// let route = route_for("anthropic", "claude-opus-5");
    /// let mcp = ToolSchema::new("github.search_issues", "Search issues", object.clone());
    /// let refused = route.check_tools(&[mcp]).unwrap_err();
    /// assert_eq!(refused.reason, ToolRefusal::InvalidName { max_len: 128 });
    /// assert!(route.check_tools(&[ToolSchema::new("github_search_issues", "", object)]).is_ok());
    /// ```
    ///
    /// # Errors
    /// [`ToolRefused`] naming the first tool the route refuses and why.
    pub fn check_tools(&self, tools: &[ToolSchema]) -> Result<(), ToolRefused> {
        self.tool_refusals(tools).next().map_or(Ok(()), Err)
    }

    /// Every tool of `tools` this route refuses, in order, each with its reason: what
    /// [`AgentLoopBuilder::build`](crate::agent::AgentLoopBuilder::build) reports at once.
    /// [`check_tools`](Self::check_tools) is its first item.
    ///
    /// ```
    /// use mektpoy::{ToolSchema, route_for};
    /// use mektpoy::route::ToolRefusal;
    /// let route = route_for("anthropic", "claude-opus-5");
    /// let tools = [ToolSchema::no_input("a.b", ""), ToolSchema::no_input("ok", ""), ToolSchema::no_input("ok", "")];
    /// let refused: Vec<_> = route.tool_refusals(&tools).map(|r| (r.index, r.reason)).collect();
    /// assert_eq!(refused, [(0, ToolRefusal::InvalidName { max_len: 128 }), (2, ToolRefusal::DuplicateName)]);
    /// ```
    pub fn tool_refusals<'t>(
        &self,
        tools: &'t [ToolSchema],
    ) -> impl Iterator<Item = ToolRefused> + use<'_, 't> {
        let mut names = HashSet::with_capacity(tools.len());
        tools.iter().enumerate().filter_map(move |(index, tool)| {
            let reason = match self.check_tool(tool) {
                Err(reason) => reason,
                // A refused tool's name is not counted: its refusal already names it.
                Ok(()) if names.insert(tool.name()) => return None,
                Ok(()) => ToolRefusal::DuplicateName,
            };
            Some(ToolRefused {
                tool: tool.name().to_owned(),
                index,
                reason,
            })
        })
    }

    /// Checks one tool (names within a set are [`check_tools`](Self::check_tools)' concern).
    ///
    /// ```
    /// use mektpoy::route::ToolRefusal;
    /// use mektpoy::{ToolSchema, route_for};
    /// let route = route_for("anthropic", "claude-opus-5");
    /// assert_eq!(route.check_tool(&ToolSchema::no_input("read", "Read a file")), Ok(()));
    /// let mcp = ToolSchema::no_input("github.search", "");
    /// assert!(matches!(route.check_tool(&mcp), Err(ToolRefusal::InvalidName { max_len: 128 })));
    /// ```
    ///
    /// # Errors
    /// Why the route refuses it.
    pub fn check_tool(&self, tool: &ToolSchema) -> Result<(), ToolRefusal> {
        if tool.name() == DEFERRED_PLACEHOLDER_NAME {
            return Err(ToolRefusal::ReservedName);
        }
        let max_len = match self.api {
            WireApi::Messages => MESSAGES_MAX_TOOL_NAME,
            WireApi::OpenAiChat | WireApi::Responses => CHAT_MAX_TOOL_NAME,
        };
        if !is_valid_tool_name(tool.name(), max_len) {
            return Err(ToolRefusal::InvalidName { max_len });
        }
        if self.api == WireApi::Messages && !has_object_root(tool) {
            return Err(ToolRefusal::SchemaRootNotObject);
        }
        Ok(())
    }
}

/// Whether `tool`'s schema says `"type": "object"` at its root.
pub(crate) fn has_object_root(tool: &ToolSchema) -> bool {
    tool.parameters().get("type").and_then(|t| t.as_str()) == Some("object")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::route::route_for;
    use serde_json::json;

    fn tool(name: &str, parameters: serde_json::Value) -> ToolSchema {
        ToolSchema::new(name, "", parameters.as_object().unwrap().clone())
    }

    #[test]
    fn every_refusal_names_its_tool_and_index() {
        let messages = route_for("deepseek", "deepseek-flash");
        let object = json!({"type": "object"});
        let cases = [
            (
                tool("a.b", object.clone()),
                ToolRefusal::InvalidName { max_len: 128 },
            ),
            (
                tool(&"x".repeat(129), object.clone()),
                ToolRefusal::InvalidName { max_len: 128 },
            ),
            (
                tool("", object.clone()),
                ToolRefusal::InvalidName { max_len: 128 },
            ),
            (
                tool("é", object.clone()),
                ToolRefusal::InvalidName { max_len: 128 },
            ),
            (tool("read", json!({})), ToolRefusal::SchemaRootNotObject),
            (
                tool("read", json!({"type": "string"})),
                ToolRefusal::SchemaRootNotObject,
            ),
            (
                tool(DEFERRED_PLACEHOLDER_NAME, object.clone()),
                ToolRefusal::ReservedName,
            ),
            (tool("ok", object.clone()), ToolRefusal::DuplicateName),
        ];
        for (bad, reason) in cases {
            let set = [tool("ok", object.clone()), bad];
            let refused = messages.check_tools(&set).unwrap_err();
            assert_eq!((refused.index, &refused.reason), (1, &reason), "{refused}");
            assert_eq!(refused.tool, set[1].name());
        }
        assert!(
            messages
                .check_tools(&[tool(&"x".repeat(128), object)])
                .is_ok()
        );
    }

    #[test]
    fn chat_takes_shorter_names_and_any_schema_root() {
        let chat = route_for("acme", "acme-1");
        assert_eq!(chat.api, WireApi::OpenAiChat);
        assert!(chat.check_tools(&[tool("read", json!({}))]).is_ok());
        assert!(
            chat.check_tools(&[tool(&"x".repeat(64), json!({}))])
                .is_ok()
        );
        let refused = chat
            .check_tools(&[tool(&"x".repeat(65), json!({}))])
            .unwrap_err();
        assert_eq!(refused.reason, ToolRefusal::InvalidName { max_len: 64 });
    }
}
