//! `project_tool_updates`: what one route may receive of a request (SPEC §5).

use std::borrow::Cow;

use crate::vocab::{Message, ToolSchema};

/// A projected request: the messages and tool declarations one route receives.
#[derive(Clone, Debug, PartialEq)]
pub struct ProjectedToolUpdates<'a> {
    /// The messages, borrowed when none was dropped or changed.
    pub messages: Cow<'a, [Message]>,
    /// The declarations; `None` when the input had none and a fallback was taken.
    pub tools: Option<Cow<'a, [ToolSchema]>>,
}
