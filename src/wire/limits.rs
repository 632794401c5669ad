//! Checks on tool definitions that the provider makes before reading a request: the root of a
//! tool's schema (every Messages-API route), and its limits on how many tools a request makes available.
//!
//! **Limits.** Anthropic answers `available_tools_limit_exceeded` when, after any message, more
//! than [`ToolLimit::MAX_TOOLS`] tools defined by value are available, those definitions total
//! more than [`ToolLimit::MAX_DEFINITION_BYTES`] bytes, or more than [`ToolLimit::MAX_TOOLS`]
//! deferred declarations are available. The serializer counts the same things in one pass over
//! the wire messages it writes, so a request over a limit is refused before it is sent (the
//! caller opens a request series, which starts again from `tools` with nothing defined by
//! value). What is counted:
//! - a tool is *defined by value* from the `tool_addition` block that carries its definition
//!   until the name is withdrawn: a `tool_removal` of the name, or a by-reference
//!   `tool_addition` of it (the name then carries its `tools` declaration again). A second
//!   definition of an available name replaces the first: one tool, the new definition's bytes;
//! - a definition's size is the bytes of its `definition` object as sent;
//! - the vendor counts definitions "sent after the first user message": every system message
//!   the serializer writes follows a user turn, so every by-value block it sends counts;
//! - the counts are checked after each wire message, as the vendor does;
//! - deferred declarations are the `tools` entries with `defer_loading` (the deferred
//!   placeholder included). All of them are available before the first message and a removal
//!   only lowers the number, so their peak is simply how many there are.
//!
//! The vendor's separate 4 MB limit on the rendered tool text is not checked here: the rendered
//! form is the provider's and is not known to the client.

use std::collections::HashMap;
use std::io;

use serde::Serialize;

use super::{ToolLimit, WireError};
use crate::vocab::ToolSchema;

/// Refuses a tool whose `parameters` has no `"type": "object"` at its root. `message_id` and
/// `index` name a by-value definition; both `None` for a `tools` entry.
pub(super) fn check_schema_root(
    tool: &ToolSchema,
    message_id: Option<&str>,
    index: Option<usize>,
) -> Result<(), WireError> {
    if crate::route::has_object_root(tool) {
        return Ok(());
    }
    Err(WireError::SchemaRootNotObject {
        tool: tool.name().to_owned(),
        message_id: message_id.map(str::to_owned),
        index,
    })
}

/// Refuses more than [`ToolLimit::MAX_TOOLS`] deferred declarations.
pub(super) fn check_deferred(count: usize) -> Result<(), WireError> {
    if count > ToolLimit::MAX_TOOLS {
        return Err(WireError::ToolLimitExceeded {
            limit: ToolLimit::DeferredTools,
            found: count,
            message_id: None,
        });
    }
    Ok(())
}

/// The tools defined by value that are available at the current point of the walk.
///
/// Owned (a definition is rare), so that the state at a point of the walk can be kept for the
/// next request of the route to resume from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct ByValue {
    /// Name → bytes of its definition as sent.
    defined: HashMap<String, usize>,
    /// Sum of `defined`'s values.
    bytes: usize,
    /// The developer message of the latest definition, to name in an error.
    latest: Option<String>,
}

impl ByValue {
    /// `name` is defined by value in `message_id`, with `bytes` of definition.
    pub(super) fn define(&mut self, name: &str, bytes: usize, message_id: &str) {
        if let Some(old) = self.defined.insert(name.to_owned(), bytes) {
            self.bytes -= old;
        }
        self.bytes += bytes;
        self.latest = Some(message_id.to_owned());
    }

    /// `name` is no longer available with a by-value definition.
    pub(super) fn withdraw(&mut self, name: &str) {
        if let Some(old) = self.defined.remove(name) {
            self.bytes -= old;
        }
    }

    /// Refuses the state after a wire message when it is over a limit.
    pub(super) fn check(&self) -> Result<(), WireError> {
        let over = |limit: ToolLimit, found: usize| {
            (found > limit.max()).then(|| WireError::ToolLimitExceeded {
                limit,
                found,
                message_id: self.latest.clone(),
            })
        };
        match over(ToolLimit::ByValueTools, self.defined.len())
            .or_else(|| over(ToolLimit::ByValueBytes, self.bytes))
        {
            Some(err) => Err(err),
            None => Ok(()),
        }
    }
}

/// The number of bytes `value` serializes to as compact JSON.
pub(super) fn json_len(value: &impl Serialize) -> usize {
    struct Count(usize);
    impl io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Only string-keyed maps and finite numbers reach here, and the writer never fails.
    serde_json::to_writer(&mut count, value).expect("counting the bytes of JSON cannot fail");
    count.0
}
