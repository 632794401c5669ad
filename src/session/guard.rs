//! The registration-time schema guard: before a tool is registered, whether the surface
//! already shows calls of its name made against another definition.
//!
//! A model that called `edit(path)` earlier in the visible history and is now offered `edit(path,
//! dry_run)` under the same name reads its own earlier calls as calls of a tool that no longer
//! exists in that form. The log does not forbid the change (a header may redefine any tool,
//! [reference §3](crate::manual::reference#3-toolhistory-the-cached-reducer) step 2); the guard
//! lets the loop see it coming and decide.
//!
//! What counts, in the crate's terms:
//!
//! - **Calls on the surface**: the tool calls of the assistant messages on the current
//!   surface. A call that a replace removed (a compaction, a rewind) is not visible any more
//!   and does not count; a call a replace put back (a rewritten answer that keeps it) does.
//! - **The definition in force** for a call is the one the latest header *before* the event that
//!   put its assistant message on the surface gave the tool. Headers hold the effective tools
//!   ([reference §4](crate::manual::reference#4-recording-a-request)), so that is the definition
//!   the model was offered when it answered. A header logged after the call does not move it.
//! - **A different definition** is one that is not [`ToolSchema::same_definition`]: key order and
//!   number spelling never make one ([reference §1](crate::manual::reference#1-vocabulary-and-json)
//!   item 5), and `defer_loading` alone does not either. Deferral says *when* a declaration may be
//!   used ([reference §1](crate::manual::reference#1-vocabulary-and-json) "Deferred"; on the
//!   Messages wire it is a flag beside `name`, `description` and `input_schema`, §7 rule 2), not
//!   what a call of it looks like, so an earlier call stays a call of the same definition. (By
//!   reference a flipped flag still opens a declaration series, because §3 step 2 compares whole
//!   tools; that is a cache matter, not a model-visible conflict.)
//! - **Calls that had no definition** are not compared: a call whose header did not declare the
//!   name was an invalid call (an unknown tool, [reference
//!   §5](crate::manual::reference#5-projection-project_tool_updates) "Tool-call validation"; the
//!   loop answered it with an error), and a call before the log's first header had no definition
//!   the log knows of. Neither tells the guard what the model was shown.
//!
//! Cost: the session keeps, as part of the surface's pairing index, the assistant messages on
//! the surface by the tool names they call, and the headers' positions in order. A check is
//! O(log n) for a name never called, and otherwise O(k · (log n + b)) plus one definition
//! comparison per distinct header in force, for `k` assistant messages on the surface calling
//! the name (`b` blocks each). It never walks the surface.

use super::state::LogState;
use crate::vocab::{Seq, ToolSchema};

/// A call on the surface that a new definition of its tool contradicts.
///
/// ```
/// use mektpoy::{AgentLoop, Message, Session, ToolSchema, route_for};
/// let read = |d: &str| ToolSchema::no_input("read", d);
/// let mut agent = AgentLoop::builder(Session::new("s"), route_for("acme", "acme-1"))
///     .model("acme-1")
///     .tools([read("v1")])
///     .build()?;
/// agent.user_turn([Message::user("u1", "read it")])?;
/// let answer: Message = serde_json::from_str(r#"{"id":"a1","role":"assistant","content":[{"type":"tool-call","id":"c1","name":"read","arguments":"{}"}],"source":{"kind":"model","provider":"acme","model":"acme-1"}}"#)?;
/// agent.append(answer)?;
/// let call = &agent.check_tools(&[read("v2")]).unwrap_err().conflicts[0].calls[0];
/// assert_eq!((call.message_id.as_str(), call.call_id.as_str()), ("a1", "c1"));
/// assert_eq!(call.defined_as, read("v1"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct ConflictingCall {
    /// The id of the assistant message holding the call.
    pub message_id: String,
    /// The call's id.
    pub call_id: String,
    /// The `Seq` of the event that put the assistant message on the surface (a replace's, for
    /// a message a replace put there).
    pub seq: Seq,
    /// The header in force at that event: the latest header before it.
    pub header: Seq,
    /// The definition that header gave the tool: the one the call was made against.
    pub defined_as: ToolSchema,
}

impl std::fmt::Display for ConflictingCall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "call {} in message {} (event {}, defined by header {})",
            self.call_id, self.message_id, self.seq, self.header
        )
    }
}

/// How many calls a conflict's message names before it only counts the rest.
const NAMED_CALLS: usize = 3;

/// A tool about to be registered under a name the surface already shows calls of, made
/// against another definition ([`Session::check_tool`](super::Session::check_tool)).
///
/// What it costs depends on the route, and it is never nothing:
///
/// - **By reference** the changed definition also opens a declaration series when the new tool is
///   recorded ([reference §3](crate::manual::reference#3-toolhistory-the-cached-reducer) step 2):
///   the declarations are rewritten and the cached prefix is lost, even on `in-history` routes.
/// - **On inline-definition routes** it is *not* a loss of cache: the redefinition goes into the
///   history by value and `tools` stays as it is ([reference
///   §5.1](crate::manual::reference#51-projection-on-inline-definition-routes)). It is still a
///   change the model sees: its earlier calls on the surface follow a definition it is no longer
///   offered.
///
/// ```
/// use mektpoy::{Config, ContentBlock, Event, Message, Session, ToolSchema};
/// use mektpoy::event::{Reason, RequestHeader};
/// use mektpoy::vocab::{MessageSource, Role, Seq};
/// use serde_json::json;
///
/// let params = |v: serde_json::Value| v.as_object().unwrap().clone();
/// let edit = ToolSchema::new("edit", "Edit a file", params(json!({"path": {"type": "string"}})));
/// let session = Session::new("s");
/// let header = RequestHeader::new(Config::new("p", "m"), vec![edit.clone()]);
/// session.append(Event::header(header, Reason::Initial))?;
/// session.append(Event::append(Message::user("u1", "fix it")))?;
/// let call = ContentBlock::tool_call("c1", "edit", r#"{"path":"a.rs"}"#)?;
/// let model = MessageSource::Model { provider: "p".into(), model: "m".into() };
/// session.append(Event::append(Message::new("a1", Role::Assistant, vec![call], model)))?;
///
/// assert!(session.check_tool(&edit).is_ok(), "the definition it was called with");
/// let dry_run = params(json!({"path": {"type": "string"}, "dry_run": {"type": "boolean"}}));
/// let changed = ToolSchema::new("edit", "Edit a file", dry_run);
/// let conflict = session.check_tool(&changed).unwrap_err();
/// assert_eq!(conflict.calls[0].call_id, "c1");
/// assert_eq!(conflict.calls[0].header, Seq(0));
/// assert_eq!(
///     conflict.to_string(),
///     "`edit` is already called on the surface under another definition: \
///      call c1 in message a1 (event 2, defined by header 0)"
/// );
/// # Ok::<(), mektpoy::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
#[error(
    "`{}` is already called on the surface under another definition: {}",
    .tool.name(),
    named_calls(.calls)
)]
pub struct SchemaConflict {
    /// The definition about to be registered.
    pub tool: ToolSchema,
    /// Every call on the surface it contradicts, in surface order (calls of one message in
    /// their order); never empty.
    pub calls: Vec<ConflictingCall>,
}

/// The calls of a conflict, the first few named, the rest counted.
fn named_calls(calls: &[ConflictingCall]) -> String {
    let mut text = calls
        .iter()
        .take(NAMED_CALLS)
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    match calls.len().saturating_sub(NAMED_CALLS) {
        0 => {}
        1 => text.push_str(" and 1 more call"),
        more => text.push_str(&format!(" and {more} more calls")),
    }
    text
}

/// The conflicts of a tool set about to be registered
/// ([`Session::check_tools`](super::Session::check_tools)): one per conflicting tool, in the
/// set's order; never empty.
///
/// ```
/// use mektpoy::{AgentLoop, Message, Session, ToolSchema, route_for};
/// let read = |d: &str| ToolSchema::no_input("read", d);
/// let mut agent = AgentLoop::builder(Session::new("s"), route_for("acme", "acme-1"))
///     .model("acme-1")
///     .tools([read("v1")])
///     .build()?;
/// agent.user_turn([Message::user("u1", "read it")])?;
/// let answer: Message = serde_json::from_str(r#"{"id":"a1","role":"assistant","content":[{"type":"tool-call","id":"c1","name":"read","arguments":"{}"}],"source":{"kind":"model","provider":"acme","model":"acme-1"}}"#)?;
/// agent.append(answer)?;
/// assert!(agent.check_tools(&[read("v1"), ToolSchema::no_input("grep", "")]).is_ok());
/// let conflicts = agent.check_tools(&[read("v2")]).unwrap_err();
/// assert_eq!(conflicts.conflicts[0].tool.name(), "read");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
#[error("{}", listed(.conflicts))]
pub struct SchemaConflicts {
    /// One conflict per tool of the set that has one.
    pub conflicts: Vec<SchemaConflict>,
}

/// Every conflict, after a count when there are several.
fn listed(conflicts: &[SchemaConflict]) -> String {
    match conflicts {
        [one] => one.to_string(),
        all => {
            let each: Vec<String> = all.iter().map(ToString::to_string).collect();
            format!(
                "{} tools are already called on the surface under other definitions; {}",
                all.len(),
                each.join("; ")
            )
        }
    }
}

impl LogState {
    /// The latest header before the event at `seq`. O(log n).
    fn header_before(&self, seq: Seq) -> Option<Seq> {
        let (Ok(i) | Err(i)) = self.header_seqs.binary_search(&seq.index());
        let i = i.checked_sub(1)?;
        self.header_seqs.get(i).map(|&h| Seq::from(h))
    }

    /// The calls on the surface that registering `tool` contradicts (see the module notes).
    pub(super) fn conflicting_calls(&self, tool: &ToolSchema) -> Vec<ConflictingCall> {
        let name = tool.name();
        let mut out = Vec::new();
        // The verdict for the latest header compared: calls come in surface order, and the
        // calls under one header are usually together, so one definition comparison serves
        // them all.
        let mut last: Option<(Seq, Option<ToolSchema>)> = None;
        for message in self.pairing.calls_named(name) {
            // Every message on the surface has its event's `Seq` recorded.
            let Some(&seq) = self.message_ids.get(message.id()) else {
                continue;
            };
            // Before the first header the log knows no definition.
            let Some(header) = self.header_before(seq) else {
                continue;
            };
            let differing = match &last {
                Some((h, verdict)) if *h == header => verdict.clone(),
                _ => {
                    let verdict = self
                        .tool_indexes
                        .get(&header)
                        .and_then(|index| index.get(name))
                        // Not declared by its header: an invalid call, not compared.
                        .filter(|defined| !defined.same_definition(tool))
                        .cloned();
                    last = Some((header, verdict.clone()));
                    verdict
                }
            };
            let Some(defined_as) = differing else {
                continue;
            };
            for call in message.tool_calls().filter(|c| c.name() == name) {
                out.push(ConflictingCall {
                    message_id: message.id().to_owned(),
                    call_id: call.id().to_owned(),
                    seq,
                    header,
                    defined_as: defined_as.clone(),
                });
            }
        }
        out
    }

    /// [`conflicting_calls`](Self::conflicting_calls) as a result.
    pub(super) fn check_tool(&self, tool: &ToolSchema) -> Result<(), SchemaConflict> {
        let calls = self.conflicting_calls(tool);
        if calls.is_empty() {
            Ok(())
        } else {
            Err(SchemaConflict {
                tool: tool.clone(),
                calls,
            })
        }
    }

    /// [`check_tool`](Self::check_tool) for each tool of a set, from one state.
    pub(super) fn check_tools(&self, tools: &[ToolSchema]) -> Result<(), SchemaConflicts> {
        let conflicts: Vec<SchemaConflict> = tools
            .iter()
            .filter_map(|t| self.check_tool(t).err())
            .collect();
        if conflicts.is_empty() {
            Ok(())
        } else {
            Err(SchemaConflicts { conflicts })
        }
    }
}
