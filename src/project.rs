//! `project_tool_updates`: what one route may receive of a request (reference §5), and
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
#[derive(Clone, Debug, PartialEq, Serialize)]
#[non_exhaustive]
pub struct ProjectedToolUpdates<'a> {
    /// The messages, borrowed when none was dropped or changed.
    pub messages: Cow<'a, [Message]>,
    /// The declarations; `None` when the input had none and a fallback was taken.
    pub tools: Option<Cow<'a, [ToolSchema]>>,
    /// Which rule produced this projection: a meter or a test can show why a request fell
    /// back. Not serialized.
    #[serde(skip)]
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

/// Which rule of reference §5 produced a projection ([`ProjectedToolUpdates::path`]).
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

/// Projects a request for one route (reference §5).
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
    // reference §5 rule 1.
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

/// Projects a request for a route with inline definitions (reference §5.1); `history` is the
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

/// A tool call naming a tool the model may not call (reference §5, §7).
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
