//! `project_tool_updates`: what one route may receive of a request (SPEC §5), and
//! `validate_tool_call`, the unknown-tool check on the model's calls.
//!
//! Projection is a pure function of (messages, current tools, route mode, snapshot). It never
//! sees a `Session` and never deep-copies a message or a schema: kept messages are handle
//! clones, a message whose blocks changed is rebuilt with [`Message::with_content`], and a
//! declaration whose `defer_loading` flips is [`ToolSchema::with_defer_loading`] (the
//! definition stays shared). Whenever the input comes back unchanged it comes back borrowed.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};

use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};

use crate::event::RequestHeader;
use crate::history::{ToolHistory, ToolUpdate};
use crate::route::ToolUpdateMode;
use crate::vocab::{
    ContentBlock, DEFERRED_PLACEHOLDER_NAME, InlineAddition, Message, Role, ToolSchema,
};

/// A projected request: the messages and tool declarations one route receives.
///
/// Serializes as `{"messages":[...],"tools":[...]|null}` (the JSON the `project` example
/// prints), tools with `deferLoading` only when true.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct ProjectedToolUpdates<'a> {
    /// The messages, borrowed when none was dropped or changed.
    pub messages: Cow<'a, [Message]>,
    /// The declarations; `None` when the input had none and a fallback was taken.
    pub tools: Option<Cow<'a, [ToolSchema]>>,
    /// Which rule produced this projection: a meter or a test can show why a request fell
    /// back. Not serialized.
    pub path: ProjectionPath,
}

impl<'a> ProjectedToolUpdates<'a> {
    /// A request the caller projected itself (path [`ProjectionPath::Given`]), without tools:
    /// serializers take it as it is, e.g. to send a prefix for an auxiliary call.
    pub fn new(messages: impl Into<Cow<'a, [Message]>>) -> Self {
        ProjectedToolUpdates {
            messages: messages.into(),
            tools: None,
            path: ProjectionPath::Given,
        }
    }

    /// The same request declaring `tools`.
    #[must_use]
    pub fn with_tools(mut self, tools: impl Into<Cow<'a, [ToolSchema]>>) -> Self {
        self.tools = Some(tools.into());
        self
    }
}

impl Serialize for ProjectedToolUpdates<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry("messages", &*self.messages)?;
        m.serialize_entry("tools", &self.tools.as_deref())?;
        m.end()
    }
}

/// Which rule of SPEC §5 produced a projection ([`ProjectedToolUpdates::path`]).
///
/// Only [`Main`](Self::Main) sends tool updates in history; every other path is a fallback
/// that drops developer messages and sends the tools as given (cleared of `defer_loading` on
/// [`NoMode`](Self::NoMode)). Fallbacks are always correct, only dearer: they give up the
/// cached prefix that updates in history would keep.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ProjectionPath {
    /// Rule 1: the route has no tool-update mode.
    NoMode,
    /// Rule 2: the route has a mode but no snapshot was given.
    NoHistory,
    /// Rule 3: an update of the snapshot names a message id that is not a developer message
    /// of `messages` (an auxiliary call sending a prefix, a compaction request, a rewound
    /// surface).
    MissingUpdate,
    /// Rule 4: every declaration would be deferred, and providers need one immediately
    /// available tool.
    AllDeferred,
    /// Rules 4–5 (or, on an inline-definition route, §5.1): declarations from the snapshot,
    /// developer messages of the series kept.
    Main,
    /// Built by the caller with [`ProjectedToolUpdates::new`]: no rule was applied.
    Given,
}

impl ProjectionPath {
    /// Whether this is the main path (rules 4–5 without a fallback).
    pub fn is_main(self) -> bool {
        self == ProjectionPath::Main
    }
}

/// Projects a request for one route (SPEC §5).
///
/// - `mode: None` (rule 1): every developer message is dropped and `defer_loading` is
///   cleared on the tools.
/// - No `history` (rule 2), or an update whose message is not a developer message of
///   `messages` (rule 3): developer messages are dropped and the tools go *as given*.
/// - Otherwise (rule 4) the declarations are the snapshot's tools in order, then each
///   addition (update order) whose name is not declared yet, deferred; `AdditionOnly` keeps
///   only names among `tools`. If every remaining declaration is deferred, the all-deferred
///   fallback is taken (as rule 2).
/// - Rule 5 keeps the developer messages of the snapshot's updates and walks their blocks
///   from the snapshot's non-deferred tools (`offered`): an addition stays iff declared and
///   not offered, deferred or not (a `tool_addition` also re-offers a removed tool); on
///   `InHistory` a removal stays iff offered; on `AdditionOnly` removals are dropped; a
///   redefinition is dropped (the by-reference fold opened a declaration series for it). A
///   message left without blocks is dropped.
///
/// Routes with inline definitions use [`project_tool_updates_inline`] instead.
///
/// "As given" is the input unchanged, except that when every given tool is deferred,
/// `defer_loading` is cleared on all of them. `tools: None` stays `None` on every fallback;
/// the main path returns `Some` (possibly empty).
///
/// **Cost:** O(messages + blocks + declarations), never a deep copy. `messages` is
/// `Cow::Borrowed` when no message was dropped or changed; `tools` is `Cow::Borrowed` when it
/// is the input unchanged (on the main path too, when the declarations are the input's own
/// schemas, compared by allocation, with the same `defer_loading`).
///
/// ```
/// use std::borrow::Cow;
/// use mektpoy::{ContentBlock, Message, ToolSchema, history::{ToolHistory, ToolUpdate}, project::project_tool_updates, route::ToolUpdateMode};
///
/// let a = ToolSchema::new("a", "tool a", serde_json::Map::new());
/// let b = ToolSchema::new("b", "tool b", serde_json::Map::new());
/// let messages = [
///     Message::user("u1", "hello"),
///     Message::developer("d1", vec![ContentBlock::addition("b")]),
/// ];
/// let history = ToolHistory::new([a.clone()], [ToolUpdate::new("d1", [b.clone()])]);
/// let tools = [a, b];
///
/// let out = project_tool_updates(&messages, Some(&tools), Some(ToolUpdateMode::InHistory),
///                                Some(&history));
/// assert!(matches!(out.messages, Cow::Borrowed(_)));
/// let declared: Vec<_> = out.tools.unwrap().iter()
///     .map(|t| (t.name().to_owned(), t.defer_loading())).collect();
/// assert_eq!(declared, [("a".to_owned(), false), ("b".to_owned(), true)]);
///
/// let plain = project_tool_updates(&messages, Some(&tools), None, Some(&history));
/// assert_eq!(plain.messages.len(), 1, "no mode: developer messages are dropped");
/// ```
pub fn project_tool_updates<'a>(
    messages: &'a [Message],
    tools: Option<&'a [ToolSchema]>,
    mode: Option<ToolUpdateMode>,
    history: Option<&ToolHistory>,
) -> ProjectedToolUpdates<'a> {
    // SPEC §5 rule 1.
    let Some(mode) = mode else {
        return ProjectedToolUpdates {
            messages: without_developer(messages),
            tools: tools.map(cleared),
            path: ProjectionPath::NoMode,
        };
    };
    // Rule 2.
    let Some(history) = history else {
        return fallback(messages, tools, ProjectionPath::NoHistory);
    };
    // Rule 3: every update must be a developer message of this request.
    if missing_update(messages, history) {
        return fallback(messages, tools, ProjectionPath::MissingUpdate);
    }

    // Rule 4: declarations.
    let Some(declarations) = declarations(history, tools, mode) else {
        return fallback(messages, tools, ProjectionPath::AllDeferred);
    };

    // Rule 5: developer messages.
    let messages = keep_series_messages(messages, history, |message, offered| {
        walk_blocks(message, &declarations, mode, offered)
    });

    let tools = match tools {
        Some(given) if same_schemas(&declarations.tools, given) => Cow::Borrowed(given),
        _ => Cow::Owned(declarations.tools),
    };
    ProjectedToolUpdates {
        messages,
        tools: Some(tools),
        path: ProjectionPath::Main,
    }
}

/// Projects a request for a route with inline definitions (SPEC §5.1); `history` is the
/// **by-value** snapshot ([`Session::tool_history_by_value`](crate::Session::tool_history_by_value)).
///
/// Rules 2–3 fall back as in [`project_tool_updates`]. On the main path the declarations are
/// the snapshot's tools, unchanged (never an appended deferred declaration, never the
/// all-deferred fallback: the inline beta accepts declarations that are all deferred, or
/// none), so within a request series `tools` never changes. The developer messages of the
/// snapshot's updates are walked from the offered definitions (the snapshot's non-deferred
/// tools):
/// - an addition of `N` resolved to `D` is dropped when `N` is offered as `D`; kept **by
///   reference** when `N` is a snapshot tool defined as `D` and not offered (an activation or
///   a re-offer); otherwise kept **by value** carrying `D` ([`ContentBlock::InlineAddition`],
///   `deferLoading` cleared). `N` is then offered as `D`;
/// - a redefinition of an offered `N` to `D` is dropped when `N` is offered as `D`, else kept
///   as a by-value addition of `D`; a redefinition of a name not offered is dropped (its next
///   addition carries the definition in force then);
/// - a removal stays iff `N` is offered; other blocks stay; a message left without blocks is
///   dropped.
///
/// **Cost:** as [`project_tool_updates`].
///
/// ```
/// use mektpoy::{ContentBlock, Message, ToolSchema, history::{ToolHistory, ToolUpdate}, project::project_tool_updates_inline};
///
/// let a = ToolSchema::new("a", "tool a", serde_json::Map::new());
/// let b = ToolSchema::new("b", "tool b", serde_json::Map::new());
/// let messages = [
///     Message::user("u1", "hello"),
///     Message::developer("d1", vec![ContentBlock::addition("b")]),
/// ];
/// let history = ToolHistory::new([a.clone()], [ToolUpdate::new("d1", [b.clone()])]);
/// let tools = [a, b];
///
/// let out = project_tool_updates_inline(&messages, Some(&tools), Some(&history));
/// assert_eq!(out.tools.unwrap().len(), 1, "the declarations stay the snapshot's");
/// let ContentBlock::InlineAddition(added) = &out.messages[1].content()[0] else { panic!() };
/// assert_eq!(added.definition().name(), "b");
/// ```
pub fn project_tool_updates_inline<'a>(
    messages: &'a [Message],
    tools: Option<&'a [ToolSchema]>,
    history: Option<&ToolHistory>,
) -> ProjectedToolUpdates<'a> {
    let Some(history) = history else {
        return fallback(messages, tools, ProjectionPath::NoHistory);
    };
    if missing_update(messages, history) {
        return fallback(messages, tools, ProjectionPath::MissingUpdate);
    }
    let resolved = Resolved::of(history);
    let snapshot: HashMap<&str, &ToolSchema> =
        history.tools().iter().map(|t| (t.name(), t)).collect();
    let messages = keep_series_messages(messages, history, |message, offered| {
        walk_inline(message, &resolved, &snapshot, offered)
    });
    let declarations: Vec<ToolSchema> = history.tools().to_vec();
    let tools = match tools {
        Some(given) if same_schemas(&declarations, given) => Cow::Borrowed(given),
        _ => Cow::Owned(declarations),
    };
    ProjectedToolUpdates {
        messages,
        tools: Some(tools),
        path: ProjectionPath::Main,
    }
}

/// Rule 3: some update names a message id that is not a developer message of `messages`.
fn missing_update(messages: &[Message], history: &ToolHistory) -> bool {
    let developer_ids: HashSet<&str> = messages
        .iter()
        .filter(|m| m.role() == Role::Developer)
        .map(Message::id)
        .collect();
    history
        .updates()
        .iter()
        .any(|u| !developer_ids.contains(u.message_id()))
}

/// The updates of a snapshot by message id, to resolve each block to its definition.
struct Resolved<'h> {
    by_message: HashMap<&'h str, &'h ToolUpdate>,
}

impl<'h> Resolved<'h> {
    fn of(history: &'h ToolHistory) -> Self {
        Resolved {
            by_message: history
                .updates()
                .iter()
                .map(|u| (u.message_id(), u))
                .collect(),
        }
    }

    /// A cursor over the definitions of `message_id`'s additions and redefinitions.
    fn cursor(&self, message_id: &str) -> Cursor<'h> {
        let update = self.by_message.get(message_id).copied();
        let defs = |f: fn(&'h ToolUpdate) -> &'h crate::vocab::List<ToolSchema>| {
            update.map_or_else(Vec::new, |u| f(u).iter().map(Some).collect())
        };
        Cursor {
            additions: defs(ToolUpdate::additions),
            redefinitions: defs(ToolUpdate::redefinitions),
        }
    }
}

/// Hands out, for each block naming `N`, the next unused definition of `N` of its kind (the
/// fold lists them in block order).
struct Cursor<'h> {
    additions: Vec<Option<&'h ToolSchema>>,
    redefinitions: Vec<Option<&'h ToolSchema>>,
}

impl<'h> Cursor<'h> {
    fn next(&mut self, name: &str, redefinition: bool) -> Option<&'h ToolSchema> {
        let defs = if redefinition {
            &mut self.redefinitions
        } else {
            &mut self.additions
        };
        defs.iter_mut()
            .find(|d| d.is_some_and(|d| d.name() == name))
            .and_then(Option::take)
    }
}

/// Walks one developer message of the series on an inline-definition route (§5.1).
fn walk_inline<'h>(
    message: &Message,
    resolved: &Resolved<'h>,
    snapshot: &HashMap<&str, &ToolSchema>,
    offered: &mut OfferedDefinitions<'h>,
) -> Kept {
    let mut cursor = resolved.cursor(message.id());
    let mut fates = Vec::with_capacity(message.content().len());
    for block in message.content() {
        let fate = match block {
            ContentBlock::ToolAddition { tool_name } => match cursor.next(tool_name, false) {
                // A hand-made snapshot without the definition: nothing valid to send.
                None => Fate::Dropped,
                Some(def) => {
                    let offered_as = offered.get(def.name());
                    if offered_as.is_some_and(|o| o.same_tool(def)) {
                        Fate::Dropped
                    } else if offered_as.is_none()
                        && snapshot.get(def.name()).is_some_and(|s| s.same_tool(def))
                    {
                        offered.insert(def.name(), def);
                        Fate::Kept
                    } else {
                        offered.insert(def.name(), def);
                        Fate::Replaced(ContentBlock::InlineAddition(InlineAddition::new(def)))
                    }
                }
            },
            ContentBlock::ToolRedefinition { tool_name } => {
                let def = cursor.next(tool_name, true);
                match (offered.get(tool_name.as_str()), def) {
                    (Some(o), Some(def)) if !o.same_tool(def) => {
                        offered.insert(def.name(), def);
                        Fate::Replaced(ContentBlock::InlineAddition(InlineAddition::new(def)))
                    }
                    _ => Fate::Dropped,
                }
            }
            ContentBlock::ToolRemoval { tool_name } => {
                if offered.remove(tool_name.as_str()).is_some() {
                    Fate::Kept
                } else {
                    Fate::Dropped
                }
            }
            _ => Fate::Kept,
        };
        fates.push(fate);
    }
    Kept::of(message, fates)
}

/// The declarations of rule 4 and, by name, whether each is deferred.
struct Declarations<'h> {
    tools: Vec<ToolSchema>,
    deferred: HashMap<&'h str, bool>,
}

/// Rule 4, or `None` for the all-deferred fallback.
fn declarations<'h>(
    history: &'h ToolHistory,
    tools: Option<&[ToolSchema]>,
    mode: ToolUpdateMode,
) -> Option<Declarations<'h>> {
    let mut all: Vec<&'h ToolSchema> = Vec::with_capacity(history.tools().len());
    let mut seen: HashSet<&'h str> = HashSet::with_capacity(history.tools().len());
    for t in history.tools() {
        if seen.insert(t.name()) {
            all.push(t);
        }
    }
    // Additions come after, deferred; the first declaration of a name wins.
    let first_addition = all.len();
    for u in history.updates() {
        for t in u.additions() {
            if seen.insert(t.name()) {
                all.push(t);
            }
        }
    }
    let given: Option<HashSet<&str>> = (mode == ToolUpdateMode::AdditionOnly).then(|| {
        tools
            .unwrap_or_default()
            .iter()
            .map(ToolSchema::name)
            .collect()
    });

    let mut out = Declarations {
        tools: Vec::with_capacity(all.len()),
        deferred: HashMap::with_capacity(all.len()),
    };
    for (i, t) in all.into_iter().enumerate() {
        if given.as_ref().is_some_and(|g| !g.contains(t.name())) {
            continue;
        }
        let schema = if i >= first_addition && !t.defer_loading() {
            t.with_defer_loading(true)
        } else {
            t.clone()
        };
        out.deferred.insert(t.name(), schema.defer_loading());
        out.tools.push(schema);
    }
    // Providers need one immediately available tool.
    if !out.tools.is_empty() && out.tools.iter().all(ToolSchema::defer_loading) {
        return None;
    }
    Some(out)
}

/// Rule 5 (and §5.1): keeps the series' developer messages, each rewritten by `walk` from
/// the offered tools (the snapshot's non-deferred tools to start with), and drops every other
/// developer message. Borrowed while every message is kept unchanged.
fn keep_series_messages<'a: 'x, 'h: 'x, 'x, O: Offered<'x>>(
    messages: &'a [Message],
    history: &'h ToolHistory,
    mut walk: impl FnMut(&'a Message, &mut O) -> Kept,
) -> Cow<'a, [Message]> {
    let updates: HashSet<&str> = history.updates().iter().map(|u| u.message_id()).collect();
    let mut offered = O::from_snapshot(history);
    // Built lazily: `None` while every message so far is kept unchanged.
    let mut out: Option<Vec<Message>> = None;
    for (i, message) in messages.iter().enumerate() {
        let kept = if message.role() != Role::Developer {
            Kept::Same
        } else if !updates.contains(message.id()) {
            // A developer message of another series (or of no series).
            Kept::Dropped
        } else {
            walk(message, &mut offered)
        };
        match kept {
            Kept::Same => {
                if let Some(out) = out.as_mut() {
                    out.push(message.clone());
                }
            }
            Kept::Dropped | Kept::Changed(_) => {
                let out = out.get_or_insert_with(|| {
                    let mut v = Vec::with_capacity(messages.len());
                    v.extend(messages[..i].iter().cloned());
                    v
                });
                if let Kept::Changed(m) = kept {
                    out.push(m);
                }
            }
        }
    }
    match out {
        Some(v) => Cow::Owned(v),
        None => Cow::Borrowed(messages),
    }
}

/// What the walk of rule 5 tracks as offered: names by reference, definitions by value.
trait Offered<'h> {
    fn from_snapshot(history: &'h ToolHistory) -> Self;
}

impl<'h> Offered<'h> for HashSet<&'h str> {
    fn from_snapshot(history: &'h ToolHistory) -> Self {
        history
            .tools()
            .iter()
            .filter(|t| !t.defer_loading())
            .map(ToolSchema::name)
            .collect()
    }
}

/// By value, the definition each offered name is offered as (borrowed from the snapshot).
type OfferedDefinitions<'h> = HashMap<&'h str, &'h ToolSchema>;

impl<'h> Offered<'h> for OfferedDefinitions<'h> {
    fn from_snapshot(history: &'h ToolHistory) -> Self {
        history
            .tools()
            .iter()
            .filter(|t| !t.defer_loading())
            .map(|t| (t.name(), t))
            .collect()
    }
}

enum Kept {
    Same,
    Changed(Message),
    Dropped,
}

/// What the walk does with one block.
enum Fate {
    Kept,
    Dropped,
    Replaced(ContentBlock),
}

impl Kept {
    /// The outcome for `message` given each block's fate, in order. Blocks are cloned only
    /// when the message changes.
    fn of(message: &Message, fates: Vec<Fate>) -> Kept {
        if fates.iter().all(|f| matches!(f, Fate::Dropped)) {
            // A message left without blocks (or that had none) is dropped.
            return Kept::Dropped;
        }
        if fates.iter().all(|f| matches!(f, Fate::Kept)) {
            return Kept::Same;
        }
        let content = message
            .content()
            .iter()
            .zip(fates)
            .filter_map(|(block, fate)| match fate {
                Fate::Kept => Some(block.clone()),
                Fate::Dropped => None,
                Fate::Replaced(b) => Some(b),
            })
            .collect();
        Kept::Changed(message.with_content(content))
    }
}

/// Walks one developer message of the series (rule 5).
fn walk_blocks<'m>(
    message: &'m Message,
    declarations: &Declarations<'_>,
    mode: ToolUpdateMode,
    offered: &mut HashSet<&'m str>,
) -> Kept {
    let blocks = message.content();
    let mut keep = Vec::with_capacity(blocks.len());
    for block in blocks {
        let stays = match block {
            // Declared and not offered, deferred or not: a `tool_addition` also re-offers a
            // removed non-deferred tool.
            ContentBlock::ToolAddition { tool_name } => {
                declarations.deferred.contains_key(tool_name.as_str()) && offered.insert(tool_name)
            }
            ContentBlock::ToolRemoval { tool_name } => match mode {
                ToolUpdateMode::InHistory => offered.remove(tool_name.as_str()),
                ToolUpdateMode::AdditionOnly => false,
            },
            // The by-reference fold opened a declaration series for it already.
            ContentBlock::ToolRedefinition { .. } => false,
            _ => true,
        };
        keep.push(if stays { Fate::Kept } else { Fate::Dropped });
    }
    Kept::of(message, keep)
}

/// Rules 2–3 and the all-deferred fallback: developer messages dropped, tools as given.
fn fallback<'a>(
    messages: &'a [Message],
    tools: Option<&'a [ToolSchema]>,
    path: ProjectionPath,
) -> ProjectedToolUpdates<'a> {
    ProjectedToolUpdates {
        messages: without_developer(messages),
        tools: tools.map(as_given),
        path,
    }
}

/// Every message but developer ones; borrowed when there is none.
fn without_developer(messages: &[Message]) -> Cow<'_, [Message]> {
    if messages.iter().any(|m| m.role() == Role::Developer) {
        Cow::Owned(
            messages
                .iter()
                .filter(|m| m.role() != Role::Developer)
                .cloned()
                .collect(),
        )
    } else {
        Cow::Borrowed(messages)
    }
}

/// "Tools as given": unchanged, unless every tool is deferred, in which case all are cleared
/// (providers need one immediately available tool; departure).
fn as_given(tools: &[ToolSchema]) -> Cow<'_, [ToolSchema]> {
    if !tools.is_empty() && tools.iter().all(ToolSchema::defer_loading) {
        cleared(tools)
    } else {
        Cow::Borrowed(tools)
    }
}

/// The tools with `defer_loading` cleared; borrowed when none was deferred.
fn cleared(tools: &[ToolSchema]) -> Cow<'_, [ToolSchema]> {
    if tools.iter().any(ToolSchema::defer_loading) {
        Cow::Owned(tools.iter().map(|t| t.with_defer_loading(false)).collect())
    } else {
        Cow::Borrowed(tools)
    }
}

/// Whether two lists hold the same schema allocations with the same flags, in order. O(n):
/// definitions are compared by pointer, never by content.
fn same_schemas(a: &[ToolSchema], b: &[ToolSchema]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| x.shares_definition_with(y) && x.defer_loading() == y.defer_loading())
}

/// A tool call naming a tool the model may not call (SPEC §5, §7).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UnknownTool {
    /// The name is not among the effective tools of the latest header. A tool removed but
    /// still declared (on an in-history route) is unknown too.
    #[error("unknown tool `{name}`: not among the effective tools")]
    NotEffective {
        /// The called name.
        name: String,
    },
    /// The reserved placeholder name ([`DEFERRED_PLACEHOLDER_NAME`]).
    #[error("unknown tool `{name}`: the name is reserved")]
    Reserved {
        /// The called name.
        name: String,
    },
    /// The call names no tool (the empty name), which no header can hold.
    #[error("the tool call names no tool (its name is empty)")]
    EmptyName,
}

impl UnknownTool {
    /// The called name.
    pub fn name(&self) -> &str {
        match self {
            UnknownTool::NotEffective { name } | UnknownTool::Reserved { name } => name,
            UnknownTool::EmptyName => "",
        }
    }
}

/// Checks a tool call against the *effective* tools of a request header.
///
/// Declarations are not effective tools: on an in-history route a removed tool stays
/// declared (so the cached prefix survives), but calling it is an error. O(tools).
///
/// # Errors
/// [`UnknownTool::EmptyName`] for `""` and [`UnknownTool::Reserved`] for
/// [`DEFERRED_PLACEHOLDER_NAME`], whatever the header holds (a header built by code may hold
/// either; `append` refuses such a header); [`UnknownTool::NotEffective`] for any other name
/// absent from `header.tools`.
///
/// ```
/// use mektpoy::{Config, ToolSchema, event::RequestHeader, project::{UnknownTool, validate_tool_call}};
/// let header = RequestHeader::new(
///     Config::new("anthropic", "claude-opus-5"),
///     vec![ToolSchema::new("read", "read a file", serde_json::Map::new())],
/// );
/// assert!(validate_tool_call("read", &header).is_ok());
/// let err = validate_tool_call("write", &header).unwrap_err();
/// assert_eq!(err, UnknownTool::NotEffective { name: "write".into() });
/// ```
pub fn validate_tool_call(name: &str, header: &RequestHeader) -> Result<(), UnknownTool> {
    validate_tool_name(name, &header.tools)
}

/// [`validate_tool_call`] against the effective `tools`.
pub(crate) fn validate_tool_name(name: &str, tools: &[ToolSchema]) -> Result<(), UnknownTool> {
    if name.is_empty() {
        return Err(UnknownTool::EmptyName);
    }
    if name == DEFERRED_PLACEHOLDER_NAME {
        return Err(UnknownTool::Reserved {
            name: name.to_owned(),
        });
    }
    if tools.iter().any(|t| t.name() == name) {
        Ok(())
    } else {
        Err(UnknownTool::NotEffective {
            name: name.to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Config;
    use crate::history::ToolUpdate;
    use crate::vocab::MessageSource;
    use ProjectionPath::*;
    use ToolUpdateMode::{AdditionOnly, InHistory};
    use serde_json::{Map, json};

    // Notation of EXAMPLES.md: `A` is {name: A, description: A, parameters: {}}; a `d` suffix
    // defers it, a `2` suffix gives it another description.
    fn tool(spec: &str) -> ToolSchema {
        let (name, flags) = spec.split_at(1);
        let description = if flags.contains('2') {
            format!("{name} v2")
        } else {
            name.to_owned()
        };
        ToolSchema::new(name, description, Map::new()).with_defer_loading(flags.contains('d'))
    }

    fn tools(spec: &str) -> Vec<ToolSchema> {
        spec.split_whitespace().map(tool).collect()
    }

    /// `u1` user, `a1` assistant, `s1` system, `d1(+B,-A,~note)` developer with an
    /// addition, a removal and a text block; `d1()` has no block.
    fn msg(spec: &str) -> Message {
        if let Some((id, rest)) = spec.split_once('(') {
            let blocks = rest
                .trim_end_matches(')')
                .split(',')
                .filter(|b| !b.is_empty())
                .map(|b| match b.split_at(1) {
                    ("+", n) => ContentBlock::addition(n),
                    ("-", n) => ContentBlock::removal(n),
                    ("~", t) => ContentBlock::text(t),
                    ("?", t) => ContentBlock::other(json!({"type": "image", "ref": t})).unwrap(),
                    _ => panic!("bad block {b}"),
                })
                .collect();
            return Message::developer(id, blocks);
        }
        match &spec[..1] {
            "u" => Message::user(spec, format!("text of {spec}")),
            "a" => Message::assistant(spec, "answer", "p", "m"),
            "s" => Message::system(spec, "prompt"),
            _ => panic!("bad message {spec}"),
        }
    }

    fn msgs(spec: &str) -> Vec<Message> {
        spec.split_whitespace().map(msg).collect()
    }

    /// A snapshot: baseline tools, then `(message id, addition specs)`.
    fn hist(baseline: &str, updates: &[(&str, &str)]) -> ToolHistory {
        ToolHistory::new(
            tools(baseline),
            updates
                .iter()
                .map(|(id, adds)| ToolUpdate::new(*id, tools(adds))),
        )
    }

    fn render_msgs(messages: &[Message]) -> String {
        let one = |m: &Message| {
            if m.role() != Role::Developer {
                return m.id().to_owned();
            }
            let blocks: Vec<String> = m
                .content()
                .iter()
                .map(|b| match b {
                    ContentBlock::ToolAddition { tool_name } => format!("+{tool_name}"),
                    ContentBlock::ToolRemoval { tool_name } => format!("-{tool_name}"),
                    ContentBlock::Text { text } => format!("~{text}"),
                    ContentBlock::Other(v) => {
                        format!("?{}", v.get("ref").and_then(|r| r.as_str()).unwrap_or(""))
                    }
                    _ => "!".to_owned(),
                })
                .collect();
            format!("{}({})", m.id(), blocks.join(","))
        };
        messages.iter().map(one).collect::<Vec<_>>().join(" ")
    }

    fn render_tools(tools: &[ToolSchema]) -> String {
        let one = |t: &ToolSchema| {
            let mut s = t.name().to_owned();
            if t.description().ends_with("v2") {
                s.push('2');
            }
            if t.defer_loading() {
                s.push('d');
            }
            s
        };
        tools.iter().map(one).collect::<Vec<_>>().join(" ")
    }

    struct Case {
        name: &'static str,
        messages: &'static str,
        tools: Option<&'static str>,
        mode: Option<ToolUpdateMode>,
        history: Option<(&'static str, &'static [(&'static str, &'static str)])>,
        /// `same` = the input, borrowed; otherwise the rendered messages.
        out_messages: &'static str,
        /// `same` = the input, borrowed; `absent` = `None`; otherwise the rendered tools.
        out_tools: &'static str,
        path: ProjectionPath,
    }

    fn check(c: &Case) {
        let messages = msgs(c.messages);
        let tools = c.tools.map(tools);
        let history = c.history.map(|(t, u)| hist(t, u));
        let out = project_tool_updates(&messages, tools.as_deref(), c.mode, history.as_ref());
        let path = out.path;
        let name = c.name;
        assert_eq!(path, c.path, "{name}: path");
        match c.out_messages {
            "same" => {
                assert!(
                    matches!(out.messages, Cow::Borrowed(_)),
                    "{name}: messages copied"
                );
                assert_eq!(&*out.messages, &messages[..], "{name}");
            }
            expect => {
                assert_eq!(render_msgs(&out.messages), expect, "{name}: messages");
                assert!(
                    matches!(out.messages, Cow::Owned(_)),
                    "{name}: changed but borrowed"
                );
            }
        }
        match (c.out_tools, &out.tools) {
            ("absent", got) => assert!(got.is_none(), "{name}: tools {got:?}"),
            (_, None) => panic!("{name}: tools absent"),
            ("same", Some(got)) => {
                assert!(matches!(got, Cow::Borrowed(_)), "{name}: tools copied");
                assert_eq!(&**got, tools.as_deref().unwrap(), "{name}");
            }
            (expect, Some(got)) => assert_eq!(render_tools(got), expect, "{name}: tools"),
        }
        // The plain entry point is the same function.
        let plain = project_tool_updates(&messages, tools.as_deref(), c.mode, history.as_ref());
        assert_eq!(plain, out, "{name}: traced and plain differ");
    }

    /// Every P row of EXAMPLES.md, in its order.
    #[test]
    fn examples_p_rows() {
        let cases = [
            Case {
                name: "P1 no mode drops developer messages and clears deferLoading",
                messages: "u1 d1(+B)",
                tools: Some("A Bd"),
                mode: None,
                history: Some(("A", &[("d1", "B")])),
                out_messages: "u1",
                out_tools: "A B",
                path: NoMode,
            },
            Case {
                name: "P2 no mode, nothing to change",
                messages: "u1",
                tools: Some("A B"),
                mode: None,
                history: None,
                out_messages: "same",
                out_tools: "same",
                path: NoMode,
            },
            Case {
                name: "P3 mode without history: tools as given",
                messages: "u1 d1(+B)",
                tools: Some("A Bd"),
                mode: Some(InHistory),
                history: None,
                out_messages: "u1",
                out_tools: "same",
                path: NoHistory,
            },
            Case {
                name: "P4 an update missing from the prefix",
                messages: "u1 d1(+B)",
                tools: Some("A B"),
                mode: Some(AdditionOnly),
                history: Some(("A", &[("d1", "B"), ("d2", "")])),
                out_messages: "u1",
                out_tools: "same",
                path: MissingUpdate,
            },
            Case {
                name: "P5 in-history defers the addition",
                messages: "u1 d1(+B) u2",
                tools: Some("A B"),
                mode: Some(InHistory),
                history: Some(("A", &[("d1", "B")])),
                out_messages: "same",
                out_tools: "A Bd",
                path: Main,
            },
            Case {
                name: "P6 addition-only defers the addition",
                messages: "u1 d1(+B) u2",
                tools: Some("A B"),
                mode: Some(AdditionOnly),
                history: Some(("A", &[("d1", "B")])),
                out_messages: "same",
                out_tools: "A Bd",
                path: Main,
            },
            Case {
                name: "P7 in-history keeps the removed definition",
                messages: "u1 d1(+B) u2 d2(-B) u3",
                tools: Some("A"),
                mode: Some(InHistory),
                history: Some(("A", &[("d1", "B"), ("d2", "")])),
                out_messages: "same",
                out_tools: "A Bd",
                path: Main,
            },
            Case {
                name: "P8 addition-only drops the removed name and its blocks",
                messages: "u1 d1(+B) u2 d2(-B) u3",
                tools: Some("A"),
                mode: Some(AdditionOnly),
                history: Some(("A", &[("d1", "B"), ("d2", "")])),
                out_messages: "u1 u2 u3",
                out_tools: "A",
                path: Main,
            },
            Case {
                name: "P9 in-history removal of a baseline tool",
                messages: "u1 d1(-A)",
                tools: Some("B"),
                mode: Some(InHistory),
                history: Some(("A B", &[("d1", "")])),
                out_messages: "same",
                out_tools: "A B",
                path: Main,
            },
            Case {
                name: "P10 addition-only drops the removal and the declaration",
                messages: "u1 d1(-A)",
                tools: Some("B"),
                mode: Some(AdditionOnly),
                history: Some(("A B", &[("d1", "")])),
                out_messages: "u1",
                out_tools: "B",
                path: Main,
            },
            Case {
                name: "P11 a developer message of an older series is dropped",
                messages: "u1 d0(+B) u2",
                tools: Some("A B"),
                mode: Some(InHistory),
                history: Some(("A B", &[])),
                out_messages: "u1 u2",
                out_tools: "A B",
                path: Main,
            },
            Case {
                name: "P12 the addition activates a deferred baseline tool",
                messages: "u1 d1(+C)",
                tools: Some("A Cd"),
                mode: Some(InHistory),
                history: Some(("A Cd", &[("d1", "Cd")])),
                out_messages: "same",
                out_tools: "A Cd",
                path: Main,
            },
            Case {
                name: "P13 addition-only keeps an explicitly deferred baseline tool",
                messages: "u1",
                tools: Some("A Cd"),
                mode: Some(AdditionOnly),
                history: Some(("A Cd", &[])),
                out_messages: "same",
                out_tools: "A Cd",
                path: Main,
            },
            Case {
                name: "P14a only a deferred declaration would remain",
                messages: "u1 d1(+B,~note,-A)",
                tools: Some("B"),
                mode: Some(AdditionOnly),
                history: Some(("A", &[("d1", "B")])),
                out_messages: "u1",
                out_tools: "same",
                path: AllDeferred,
            },
            Case {
                name: "P14a' addition-only drops the removal block, keeps text",
                messages: "u1 d1(+B,~note,-A)",
                tools: Some("B C"),
                mode: Some(AdditionOnly),
                history: Some(("A C", &[("d1", "B")])),
                out_messages: "u1 d1(+B,~note)",
                out_tools: "C Bd",
                path: Main,
            },
            Case {
                name: "P14i in-history keeps every block",
                messages: "u1 d1(+B,~note,-A)",
                tools: Some("B"),
                mode: Some(InHistory),
                history: Some(("A", &[("d1", "B")])),
                out_messages: "same",
                out_tools: "A Bd",
                path: Main,
            },
            Case {
                name: "P15 a redundant addition is dropped",
                messages: "u1 d1(+B) d2(+B)",
                tools: Some("A B"),
                mode: Some(InHistory),
                history: Some(("A", &[("d1", "B"), ("d2", "B")])),
                out_messages: "u1 d1(+B)",
                out_tools: "A Bd",
                path: Main,
            },
            Case {
                name: "P16i restore: declared once, every block kept",
                messages: "u1 d1(+B) u2 d2(-B) u3 d3(+B) u4",
                tools: Some("A B"),
                mode: Some(InHistory),
                history: Some(("A", &[("d1", "B"), ("d2", ""), ("d3", "B")])),
                out_messages: "same",
                out_tools: "A Bd",
                path: Main,
            },
            Case {
                name: "P16a restore on addition-only: removal and re-addition dropped",
                messages: "u1 d1(+B) u2 d2(-B) u3 d3(+B) u4",
                tools: Some("A B"),
                mode: Some(AdditionOnly),
                history: Some(("A", &[("d1", "B"), ("d2", ""), ("d3", "B")])),
                out_messages: "u1 d1(+B) u2 u3 u4",
                out_tools: "A Bd",
                path: Main,
            },
            Case {
                name: "P17 a removal of a name never offered is dropped",
                messages: "u1 d1(-Z)",
                tools: Some("A"),
                mode: Some(InHistory),
                history: Some(("A", &[("d1", "")])),
                out_messages: "u1",
                out_tools: "A",
                path: Main,
            },
            Case {
                name: "P18 absent tools, empty snapshot: empty declarations, not absent",
                messages: "u1",
                tools: None,
                mode: Some(InHistory),
                history: Some(("", &[])),
                out_messages: "same",
                out_tools: "",
                path: Main,
            },
            Case {
                name: "P19a addition-only keeps the surviving addition only",
                messages: "u1 d1(+B,+C) u2 d2(-C)",
                tools: Some("A B"),
                mode: Some(AdditionOnly),
                history: Some(("A", &[("d1", "B C"), ("d2", "")])),
                out_messages: "u1 d1(+B) u2",
                out_tools: "A Bd",
                path: Main,
            },
            Case {
                name: "P19i in-history keeps both additions and the removal",
                messages: "u1 d1(+B,+C) u2 d2(-C)",
                tools: Some("A B"),
                mode: Some(InHistory),
                history: Some(("A", &[("d1", "B C"), ("d2", "")])),
                out_messages: "same",
                out_tools: "A Bd Cd",
                path: Main,
            },
            Case {
                name: "P20 every declaration would be deferred",
                messages: "u1 d1(+B)",
                tools: Some("B"),
                mode: Some(InHistory),
                history: Some(("", &[("d1", "B")])),
                out_messages: "u1",
                out_tools: "same",
                path: AllDeferred,
            },
            Case {
                name: "P21 +A re-offers the non-deferred A (v4)",
                messages: "u1 d1(-A) u2 d2(+A) u3",
                tools: Some("A B"),
                mode: Some(InHistory),
                history: Some(("A B", &[("d1", ""), ("d2", "A")])),
                out_messages: "same",
                out_tools: "A B",
                path: Main,
            },
            Case {
                name: "P21a on addition-only -A and +A are dropped (A was never withdrawn there)",
                messages: "u1 d1(-A) u2 d2(+A) u3",
                tools: Some("A B"),
                mode: Some(AdditionOnly),
                history: Some(("A B", &[("d1", ""), ("d2", "A")])),
                out_messages: "u1 u2 u3",
                out_tools: "A B",
                path: Main,
            },
            Case {
                name: "P22 every given tool deferred: cleared",
                messages: "u1",
                tools: Some("Cd"),
                mode: Some(InHistory),
                history: Some(("Cd", &[])),
                out_messages: "same",
                out_tools: "C",
                path: AllDeferred,
            },
            Case {
                name: "P23 absent tools stay absent on a fallback",
                messages: "u1 d1(+B)",
                tools: None,
                mode: Some(InHistory),
                history: Some(("", &[("d1", "B")])),
                out_messages: "u1",
                out_tools: "absent",
                path: AllDeferred,
            },
        ];
        for c in &cases {
            check(c);
        }
    }

    /// Each rule of SPEC §5, in each of the three modes, beyond the P rows.
    #[test]
    fn rules_in_every_mode() {
        const H_B: &[(&str, &str)] = &[("d1", "B")];
        let cases = [
            // Rule 1.
            Case {
                name: "rule 1: absent tools stay absent",
                messages: "u1 d1(+B) a1",
                tools: None,
                mode: None,
                history: Some(("A", H_B)),
                out_messages: "u1 a1",
                out_tools: "absent",
                path: NoMode,
            },
            Case {
                name: "rule 1: no deferred tool, tools borrowed; other roles kept",
                messages: "s1 u1 a1",
                tools: Some("A B"),
                mode: None,
                history: Some(("A", &[])),
                out_messages: "same",
                out_tools: "same",
                path: NoMode,
            },
            // Rule 2.
            Case {
                name: "rule 2 in-history: every given tool deferred is cleared",
                messages: "u1",
                tools: Some("Ad Bd"),
                mode: Some(InHistory),
                history: None,
                out_messages: "same",
                out_tools: "A B",
                path: NoHistory,
            },
            Case {
                name: "rule 2 addition-only: one immediately available tool, as given",
                messages: "u1 d1(+B)",
                tools: Some("A Bd"),
                mode: Some(AdditionOnly),
                history: None,
                out_messages: "u1",
                out_tools: "same",
                path: NoHistory,
            },
            Case {
                name: "rule 2: absent tools stay absent, empty tools stay empty",
                messages: "u1",
                tools: None,
                mode: Some(AdditionOnly),
                history: None,
                out_messages: "same",
                out_tools: "absent",
                path: NoHistory,
            },
            Case {
                name: "rule 2: empty tools are as given",
                messages: "u1",
                tools: Some(""),
                mode: Some(InHistory),
                history: None,
                out_messages: "same",
                out_tools: "same",
                path: NoHistory,
            },
            // Rule 3.
            Case {
                name: "rule 3 in-history: a compacted surface lost an update",
                messages: "u9 d2(-B) u3",
                tools: Some("A"),
                mode: Some(InHistory),
                history: Some(("A", &[("d1", "B"), ("d2", "")])),
                out_messages: "u9 u3",
                out_tools: "same",
                path: MissingUpdate,
            },
            Case {
                name: "rule 3: the id must be a developer message's, not a user message's",
                messages: "u1 d2(+B)",
                tools: Some("A B"),
                mode: Some(InHistory),
                history: Some(("A", &[("u1", ""), ("d2", "B")])),
                out_messages: "u1",
                out_tools: "same",
                path: MissingUpdate,
            },
            Case {
                name: "rule 3 with every given tool deferred clears them",
                messages: "u1",
                tools: Some("Ad"),
                mode: Some(AdditionOnly),
                history: Some(("A", H_B)),
                out_messages: "same",
                out_tools: "A",
                path: MissingUpdate,
            },
            Case {
                name: "no mode ignores a missing update",
                messages: "u1",
                tools: Some("A B"),
                mode: None,
                history: Some(("A", H_B)),
                out_messages: "same",
                out_tools: "same",
                path: NoMode,
            },
            // Rule 4.
            Case {
                name: "rule 4: additions follow the snapshot in update order, first wins",
                messages: "u1 d1(+C,+B) d2(+B,+D)",
                tools: Some("A B C D"),
                mode: Some(InHistory),
                history: Some(("A", &[("d1", "C B"), ("d2", "B D")])),
                out_messages: "u1 d1(+C,+B) d2(+D)",
                out_tools: "A Cd Bd Dd",
                path: Main,
            },
            Case {
                name: "rule 4: an addition of a baseline name is not declared twice",
                messages: "u1 d1(+B)",
                tools: Some("A B"),
                mode: Some(InHistory),
                history: Some(("A Bd", &[("d1", "B")])),
                out_messages: "same",
                out_tools: "A Bd",
                path: Main,
            },
            Case {
                name: "rule 4 addition-only: absent tools remove every declaration",
                messages: "u1 d1(+B)",
                tools: None,
                mode: Some(AdditionOnly),
                history: Some(("A", H_B)),
                out_messages: "u1",
                out_tools: "",
                path: Main,
            },
            Case {
                name: "rule 4 in-history keeps declarations absent from tools",
                messages: "u1 d1(+B)",
                tools: None,
                mode: Some(InHistory),
                history: Some(("A", H_B)),
                out_messages: "same",
                out_tools: "A Bd",
                path: Main,
            },
            Case {
                name: "rule 4 addition-only: all-deferred after filtering, absent tools",
                messages: "u1 d1(+B)",
                tools: None,
                mode: Some(AdditionOnly),
                history: Some(("Ad", H_B)),
                out_messages: "u1",
                out_tools: "",
                path: Main,
            },
            Case {
                name: "rule 4: a deferred baseline and a deferred addition only",
                messages: "u1 d1(+B)",
                tools: Some("Ad B"),
                mode: Some(AdditionOnly),
                history: Some(("Ad", H_B)),
                out_messages: "u1",
                out_tools: "same",
                path: AllDeferred,
            },
            // Rule 5.
            Case {
                name: "rule 5: text and unknown blocks stay in place",
                messages: "u1 d1(~x,+B,?img,-A)",
                tools: Some("B"),
                mode: Some(AdditionOnly),
                history: Some(("A B", &[("d1", "")])),
                out_messages: "u1 d1(~x,?img)",
                out_tools: "B",
                path: Main,
            },
            Case {
                name: "rule 5: a developer message of the series without blocks is dropped",
                messages: "u1 d1() u2",
                tools: Some("A"),
                mode: Some(InHistory),
                history: Some(("A", &[("d1", "")])),
                out_messages: "u1 u2",
                out_tools: "A",
                path: Main,
            },
            Case {
                name: "rule 5 in-history: a second removal of a name is dropped",
                messages: "u1 d1(-A,-A) d2(-A)",
                tools: Some("B"),
                mode: Some(InHistory),
                history: Some(("A B", &[("d1", ""), ("d2", "")])),
                out_messages: "u1 d1(-A)",
                out_tools: "A B",
                path: Main,
            },
            Case {
                name: "rule 5 addition-only: removals never touch offered (P21 log)",
                messages: "u1 d1(-A) u2 d2(+A) u3",
                tools: Some("A B"),
                mode: Some(AdditionOnly),
                history: Some(("A B", &[("d1", ""), ("d2", "A")])),
                out_messages: "u1 u2 u3",
                out_tools: "A B",
                path: Main,
            },
            Case {
                name: "rule 5: deferred baseline tool removed then re-added in history",
                messages: "u1 d1(+C) d2(-C) d3(+C)",
                tools: Some("A C"),
                mode: Some(InHistory),
                history: Some(("A Cd", &[("d1", "C"), ("d2", ""), ("d3", "C")])),
                out_messages: "same",
                out_tools: "A Cd",
                path: Main,
            },
            Case {
                name: "rule 5: an addition of an undeclared name is dropped",
                messages: "u1 d1(+B) d2(+Z)",
                tools: Some("A B"),
                mode: Some(InHistory),
                history: Some(("A", &[("d1", "B"), ("d2", "")])),
                out_messages: "u1 d1(+B)",
                out_tools: "A Bd",
                path: Main,
            },
        ];
        for c in &cases {
            check(c);
        }
    }

    #[test]
    fn never_deep_copies() {
        let messages = msgs("u1 d1(+B,-A) u2 d0(+X) u3");
        let given = tools("B C");
        let history = hist("A C", &[("d1", "B")]);
        let out = project_tool_updates(&messages, Some(&given), Some(AdditionOnly), Some(&history));
        let out_messages = &*out.messages;
        assert_eq!(render_msgs(out_messages), "u1 d1(+B) u2 u3");
        // Unchanged messages are handle clones of the input.
        for (got, input) in [(0, 0), (2, 2), (3, 4)] {
            assert!(
                out_messages[got].ptr_eq(&messages[input]),
                "message {got} was copied"
            );
        }
        // A changed message keeps its id, role and source.
        let d1 = &out_messages[1];
        assert!(!d1.ptr_eq(&messages[1]));
        assert_eq!(
            (d1.id(), d1.role(), d1.source()),
            ("d1", Role::Developer, &MessageSource::ToolRegistry)
        );
        assert_eq!(messages[1].content().len(), 2, "the input is untouched");
        // Declarations share the snapshot's definitions, deferred or not.
        let declared = out.tools.unwrap();
        assert_eq!(render_tools(&declared), "C Bd");
        assert!(declared[0].shares_definition_with(&history.tools()[1]));
        assert!(declared[1].shares_definition_with(&history.updates()[0].additions()[0]));
        let in_history =
            project_tool_updates(&messages, Some(&given), Some(InHistory), Some(&history));
        let declared = in_history.tools.unwrap();
        assert_eq!(render_tools(&declared), "A C Bd");
        assert!(
            declared
                .iter()
                .zip(
                    history
                        .tools()
                        .iter()
                        .chain(history.updates()[0].additions())
                )
                .all(|(d, h)| d.shares_definition_with(h))
        );
        // Cleared flags share definitions too.
        let deferred = tools("Ad Bd");
        let cleared = project_tool_updates(&messages, Some(&deferred), None, None);
        assert!(
            cleared
                .tools
                .unwrap()
                .iter()
                .zip(&deferred)
                .all(|(c, d)| c.shares_definition_with(d) && !c.defer_loading())
        );
    }

    #[test]
    fn main_path_borrows_tools_that_are_the_snapshots_own() {
        let given = tools("A B");
        let history = ToolHistory::new(given.iter().cloned(), []);
        let messages = msgs("u1");
        let out = project_tool_updates(&messages, Some(&given), Some(InHistory), Some(&history));
        assert!(matches!(out.tools, Some(Cow::Borrowed(_))));
        // Equal by value but another allocation: owned (comparing content would cost more
        // than the copy of handles it saves).
        let other = tools("A B");
        let out = project_tool_updates(&messages, Some(&other), Some(InHistory), Some(&history));
        assert!(matches!(out.tools, Some(Cow::Owned(_))));
        assert_eq!(out.tools.as_deref(), Some(&other[..]));
        // Same allocation, other flag: owned.
        let deferred: Vec<_> = given.iter().map(|t| t.with_defer_loading(true)).collect();
        let history = ToolHistory::new([given[0].clone(), deferred[1].clone()], []);
        let out = project_tool_updates(&messages, Some(&given), Some(InHistory), Some(&history));
        assert_eq!(render_tools(out.tools.as_deref().unwrap()), "A Bd");
    }

    #[test]
    fn projection_json_shape() {
        let messages = msgs("u1 d1(+B)");
        let given = tools("A B");
        let history = hist("A", &[("d1", "B")]);
        let out = project_tool_updates(&messages, Some(&given), Some(InHistory), Some(&history));
        let v = serde_json::to_value(&out).unwrap();
        assert_eq!(v["tools"][0].get("deferLoading"), None);
        assert_eq!(v["tools"][1]["deferLoading"], json!(true));
        assert_eq!(
            v["messages"][1]["content"][0],
            json!({"type":"tool-addition","toolName":"B"})
        );
        let none = project_tool_updates(&messages, None, Some(InHistory), None);
        assert_eq!(
            serde_json::to_string(&none).unwrap(),
            r#"{"messages":[{"id":"u1","role":"user","content":[{"type":"text","text":"text of u1"}],"source":{"kind":"user"}}],"tools":null}"#
        );
    }

    #[test]
    fn validate_tool_call_table() {
        let header = |spec: &str| RequestHeader::new(Config::new("p", "m"), tools(spec));
        let placeholder = ToolSchema::new(DEFERRED_PLACEHOLDER_NAME, "x", Map::new());
        let with_placeholder = RequestHeader::new(Config::new("p", "m"), vec![placeholder]);
        let with_empty = RequestHeader::new(
            Config::new("p", "m"),
            vec![ToolSchema::new("", "x", Map::new())],
        );
        let not = |n: &str| Err(UnknownTool::NotEffective { name: n.into() });
        let reserved = Err(UnknownTool::Reserved {
            name: DEFERRED_PLACEHOLDER_NAME.into(),
        });
        for (name, header, call, expect) in [
            ("effective", header("A B"), "B", Ok(())),
            ("deferred effective tool", header("A Bd"), "B", Ok(())),
            ("absent", header("A"), "B", not("B")),
            ("no tools", header(""), "A", not("A")),
            ("names are case-sensitive", header("A"), "a", not("a")),
            (
                "placeholder",
                header("A"),
                DEFERRED_PLACEHOLDER_NAME,
                reserved.clone(),
            ),
            (
                "placeholder even if a header has it",
                with_placeholder,
                DEFERRED_PLACEHOLDER_NAME,
                reserved,
            ),
            ("empty name", header("A"), "", Err(UnknownTool::EmptyName)),
            (
                "empty name even if a header built by code has it",
                with_empty,
                "",
                Err(UnknownTool::EmptyName),
            ),
        ] {
            assert_eq!(validate_tool_call(call, &header), expect, "{name}");
        }
        let err = validate_tool_call("B", &header("A")).unwrap_err();
        assert_eq!(err.name(), "B");
        assert_eq!(
            err.to_string(),
            "unknown tool `B`: not among the effective tools"
        );
    }

    /// A tool removed in history stays declared on an in-history route but is not callable:
    /// the check reads the header's effective tools, never the declarations.
    #[test]
    fn removed_but_declared_is_unknown() {
        let messages = msgs("u1 d1(-B)");
        let history = hist("A B", &[("d1", "")]);
        let effective = tools("A");
        let out =
            project_tool_updates(&messages, Some(&effective), Some(InHistory), Some(&history));
        assert_eq!(render_tools(out.tools.as_deref().unwrap()), "A B");
        let header = RequestHeader::new(Config::new("p", "m"), effective);
        assert_eq!(
            validate_tool_call("B", &header),
            Err(UnknownTool::NotEffective { name: "B".into() })
        );
    }
}
