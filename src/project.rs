//! `project_tool_updates`: what one route may receive of a request ([reference
//! §5](crate::manual::reference#5-projection-project_tool_updates)), and `validate_tool_call`, the
//! unknown-tool check on the model's calls.
//!
//! Projection is a pure function of (messages, current tools, route mode, snapshot). It never
//! sees a `Session` and never deep-copies a message or a schema: kept messages are read from
//! the input ([`ProjectedMessages`] is a view of it, so a long history costs no handle clone
//! per message), a message whose blocks changed is rebuilt with [`Message::with_content`],
//! and a declaration whose `defer_loading` flips is [`ToolSchema::with_defer_loading`] (the
//! definition stays shared). Whenever the input comes back unchanged it comes back borrowed.
//!
//! Small inputs are the common case (one request, a dozen tools), so the per-call lookups
//! (names, update ids) scan small vectors and hash only beyond a few entries.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};

use serde::Serialize;

use crate::event::RequestHeader;
use crate::history::{ToolHistory, ToolUpdate};
use crate::route::ToolUpdateMode;
use crate::vocab::{
    ContentBlock, DEFERRED_PLACEHOLDER_NAME, InlineAddition, List, Message, MessagesRef, NameKey,
    Role, ToolSchema,
};

mod messages;

pub(crate) use messages::HeldPrefix;
use messages::Splice;
pub use messages::{MessagesIter, ProjectedMessages};

/// A projected request: the messages and tool declarations one route receives.
///
/// Serializes as `{"messages":[...],"tools":[...]|null}` (the JSON the `project` example
/// prints), tools with `deferLoading` only when true.
///
/// ```
/// use mektpoy::project::{ProjectionPath, project_tool_updates};
/// use mektpoy::{Message, ToolSchema};
/// let dev: Message = serde_json::from_str(
///     r#"{"id":"d1","role":"developer","content":[{"type":"tool-addition","toolName":"grep"}],"source":{"kind":"tool-registry"}}"#,
/// )?;
/// let messages = [
///     Message::user("u1", "hi"),
///     dev.clone(),
/// ];
/// let tools = [ToolSchema::no_input("read", ""), ToolSchema::no_input("grep", "")];
/// // A route without a mode: the developer message goes, the tools are sent as given.
/// let projected = project_tool_updates(&messages[..], Some(&tools[..]), None, None);
/// assert_eq!(projected.path, ProjectionPath::NoMode);
/// assert_eq!(projected.messages.len(), 1);
/// assert_eq!(projected.tools.as_deref().map(<[ToolSchema]>::len), Some(2));
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Serialize)]
#[non_exhaustive]
pub struct ProjectedToolUpdates<'a> {
    /// The messages: a view of the input, [borrowed](ProjectedMessages::is_borrowed) when
    /// none was dropped or changed.
    pub messages: ProjectedMessages<'a>,
    /// The declarations; `None` when the input had none and a fallback was taken.
    pub tools: Option<Cow<'a, [ToolSchema]>>,
    /// Which rule produced this projection: a meter or a test can show why a request fell
    /// back. Not serialized.
    #[serde(skip)]
    pub path: ProjectionPath,
}

/// Building a request the caller projected itself.
///
/// ```
/// use mektpoy::project::ProjectedToolUpdates;
/// use mektpoy::{Message, ToolSchema};
/// let messages = [Message::user("u1", "hi")];
/// let tools = [ToolSchema::no_input("read", "")];
/// let projected = ProjectedToolUpdates::new(&messages[..]).with_tools(&tools[..]);
/// assert_eq!((projected.messages.len(), projected.tools.map(|t| t.len())), (1, Some(1)));
/// ```
impl<'a> ProjectedToolUpdates<'a> {
    /// A request the caller projected itself (path [`ProjectionPath::Given`]), without tools:
    /// serializers take it as it is, e.g. to send a prefix for an auxiliary call. `messages`
    /// is a slice, a `Vec` or a `Cow` of messages.
    ///
    /// ```
    /// use mektpoy::project::{ProjectedToolUpdates, ProjectionPath};
    /// use mektpoy::Message;
    /// let messages = vec![Message::user("u1", "summarize the above")];
    /// let projected = ProjectedToolUpdates::new(messages);
    /// assert_eq!(projected.path, ProjectionPath::Given);
    /// assert!(projected.tools.is_none());
    /// ```
    pub fn new(messages: impl Into<ProjectedMessages<'a>>) -> Self {
        ProjectedToolUpdates {
            messages: messages.into(),
            tools: None,
            path: ProjectionPath::Given,
        }
    }

    /// The same request declaring `tools`.
    ///
    /// ```
    /// use mektpoy::project::ProjectedToolUpdates;
    /// use mektpoy::{Message, ToolSchema};
    /// let messages = [Message::user("u1", "hi")];
    /// let tools = vec![ToolSchema::no_input("read", "")];
    /// let projected = ProjectedToolUpdates::new(&messages[..]).with_tools(tools);
    /// assert_eq!(projected.tools.unwrap()[0].name(), "read");
    /// ```
    #[must_use]
    pub fn with_tools(mut self, tools: impl Into<Cow<'a, [ToolSchema]>>) -> Self {
        self.tools = Some(tools.into());
        self
    }
}

/// Which rule of [reference §5](crate::manual::reference#5-projection-project_tool_updates)
/// produced a projection ([`ProjectedToolUpdates::path`]).
///
/// Only [`Main`](Self::Main) sends tool updates in history; every other path is a fallback
/// that drops developer messages and sends the tools as given (cleared of `defer_loading` on
/// [`NoMode`](Self::NoMode)). Fallbacks are always correct, only dearer: they give up the
/// cached prefix that updates in history would keep.
///
/// ```
/// use mektpoy::project::{ProjectionPath, project_tool_updates};
/// use mektpoy::route::ToolUpdateMode;
/// use mektpoy::{Message, ToolSchema};
/// let messages = [Message::user("u1", "hi")];
/// let tools = [ToolSchema::no_input("read", "")];
/// // A mode but no snapshot: the fallback.
/// let projected = project_tool_updates(&messages[..], Some(&tools[..]), Some(ToolUpdateMode::AdditionOnly), None);
/// assert_eq!(projected.path, ProjectionPath::NoHistory);
/// ```
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

/// Which rule made a projection.
///
/// ```
/// use mektpoy::project::{ProjectionPath, project_tool_updates};
/// use mektpoy::Message;
/// let messages = [Message::user("u1", "hi")];
/// let path = project_tool_updates(&messages[..], None, None, None).path;
/// assert_eq!((path, path.is_main()), (ProjectionPath::NoMode, false));
/// ```
impl ProjectionPath {
    /// Whether this is the main path (rules 4–5 without a fallback).
    ///
    /// ```
    /// use mektpoy::project::ProjectionPath;
    /// assert!(ProjectionPath::Main.is_main());
    /// assert!(!ProjectionPath::NoMode.is_main());
    /// ```
    pub fn is_main(self) -> bool {
        self == ProjectionPath::Main
    }
}

/// Projects a request for one route ([reference
/// §5](crate::manual::reference#5-projection-project_tool_updates)).
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
/// **Cost:** O(messages + blocks + declarations), never a deep copy, and no handle clone of a
/// kept message: `messages` is a view of the input, [borrowed](ProjectedMessages::is_borrowed)
/// when no message was dropped or changed; `tools` is `Cow::Borrowed` when it
/// is the input unchanged (on the main path too, when the declarations are the input's own
/// schemas, compared by allocation, with the same `defer_loading`).
///
/// ```
/// use mektpoy::{ContentBlock, Message, ToolSchema, history::{ToolHistory, ToolUpdate}, project::project_tool_updates, route::ToolUpdateMode};
///
/// let a = ToolSchema::new("a", "tool a", serde_json::Map::new());
/// let b = ToolSchema::new("b", "tool b", serde_json::Map::new());
/// let messages = [
///     Message::user("u1", "hello"),
///     Message::developer("d1", vec![ContentBlock::addition("b").unwrap()]),
/// ];
/// let history = ToolHistory::new([a.clone()], [ToolUpdate::new("d1", [b.clone()])]);
/// let tools = [a, b];
///
/// let out = project_tool_updates(&messages, Some(&tools), Some(ToolUpdateMode::InHistory),
///                                Some(&history));
/// assert!(out.messages.is_borrowed());
/// let declared: Vec<_> = out.tools.unwrap().iter()
///     .map(|t| (t.name().to_owned(), t.defer_loading())).collect();
/// assert_eq!(declared, [("a".to_owned(), false), ("b".to_owned(), true)]);
///
/// let plain = project_tool_updates(&messages, Some(&tools), None, Some(&history));
/// assert_eq!(plain.messages.len(), 1, "no mode: developer messages are dropped");
/// ```
pub fn project_tool_updates<'a>(
    messages: impl Into<MessagesRef<'a>>,
    tools: Option<&'a [ToolSchema]>,
    mode: Option<ToolUpdateMode>,
    history: Option<&ToolHistory>,
) -> ProjectedToolUpdates<'a> {
    // The generic shell converts; the body is compiled once, here, with its callees inlined.
    project(messages.into(), tools, mode, history)
}

fn project<'a>(
    messages: MessagesRef<'a>,
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
    // Rule 4: declarations (needed by rule 5's walk, checked after rule 3).
    let mut declarations = Declarations::of(history, tools, mode);
    let all_deferred = declarations.all_deferred();
    // Rules 3 and 5 in one pass; no walk when the all-deferred fallback is taken anyway.
    let kept = keep_series_messages(messages, history, |message, _| {
        if all_deferred {
            Kept::Same
        } else {
            walk_blocks(message, &mut declarations, mode)
        }
    });
    let Some(kept) = kept else {
        return fallback(messages, tools, ProjectionPath::MissingUpdate);
    };
    if all_deferred {
        return fallback(messages, tools, ProjectionPath::AllDeferred);
    }
    ProjectedToolUpdates {
        messages: kept,
        tools: Some(declarations.tools(tools)),
        path: ProjectionPath::Main,
    }
}

/// Projects a request for a route with inline definitions ([reference
/// §5.1](crate::manual::reference#51-projection-on-inline-definition-routes)); `history` is the
/// **by-value** snapshot
/// ([`Session::tool_history_by_value`](crate::Session::tool_history_by_value)).
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
///     Message::developer("d1", vec![ContentBlock::addition("b").unwrap()]),
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
    messages: impl Into<MessagesRef<'a>>,
    tools: Option<&'a [ToolSchema]>,
    history: Option<&ToolHistory>,
) -> ProjectedToolUpdates<'a> {
    project_inline(messages.into(), tools, history)
}

fn project_inline<'a>(
    messages: MessagesRef<'a>,
    tools: Option<&'a [ToolSchema]>,
    history: Option<&ToolHistory>,
) -> ProjectedToolUpdates<'a> {
    let Some(history) = history else {
        return fallback(messages, tools, ProjectionPath::NoHistory);
    };
    let mut walk = InlineWalk::of(history);
    let Some(kept) =
        keep_series_messages(messages, history, |message, met| walk.message(message, met))
    else {
        return fallback(messages, tools, ProjectionPath::MissingUpdate);
    };
    let snapshot = history.tools();
    let tools = match tools {
        Some(given)
            if given.len() == snapshot.len()
                && given
                    .iter()
                    .enumerate()
                    .all(|(k, y)| same_schema(&snapshot[k], y)) =>
        {
            Cow::Borrowed(given)
        }
        _ => Cow::Owned((0..snapshot.len()).map(|k| snapshot[k].clone()).collect()),
    };
    ProjectedToolUpdates {
        messages: kept,
        tools: Some(tools),
        path: ProjectionPath::Main,
    }
}

/// Below this many entries a name or id lookup scans a vector: on the small inputs most
/// requests are, hashing and a map's allocation cost more than the scan.
const SMALL: usize = 16;

/// Entries by name, in insertion order: scanned while small (comparing [`NameKey`]s, which
/// are the names themselves up to 15 bytes), hashed beyond [`SMALL`] (so a lookup stays O(1) on large tool sets).
struct Names<'n, T> {
    entries: Entries<(NameKey, &'n str, T)>,
    index: Option<HashMap<&'n str, usize>>,
}

/// How many entries [`Entries`] holds on the stack: a request's tool set, most of the time.
const INLINE_ENTRIES: usize = 8;

/// A vector whose first [`INLINE_ENTRIES`] entries sit on the stack: the per-call name table
/// of a small request then costs no allocation. Beyond, or when the expected size is larger,
/// a `Vec`.
struct Entries<E> {
    /// The entries while on the stack (`len` of them); `None` before the first push and once
    /// moved to `heap`.
    inline: Option<[E; INLINE_ENTRIES]>,
    len: usize,
    heap: Vec<E>,
}

impl<E: Copy> Entries<E> {
    fn with_capacity(n: usize) -> Self {
        Entries {
            inline: None,
            len: 0,
            heap: if n > INLINE_ENTRIES {
                Vec::with_capacity(n)
            } else {
                Vec::new()
            },
        }
    }

    fn len(&self) -> usize {
        self.len
    }

    fn on_stack(&self) -> bool {
        self.heap.capacity() == 0
    }

    fn push(&mut self, entry: E) {
        if self.on_stack() {
            match &mut self.inline {
                None => {
                    self.inline = Some([entry; INLINE_ENTRIES]);
                    self.len = 1;
                    return;
                }
                Some(inline) if self.len < INLINE_ENTRIES => {
                    inline[self.len] = entry;
                    self.len += 1;
                    return;
                }
                Some(inline) => {
                    self.heap = Vec::with_capacity(2 * INLINE_ENTRIES);
                    self.heap.extend_from_slice(&inline[..]);
                    self.inline = None;
                }
            }
        }
        self.heap.push(entry);
        self.len += 1;
    }

    fn as_slice(&self) -> &[E] {
        match &self.inline {
            Some(inline) => &inline[..self.len],
            None => &self.heap,
        }
    }

    fn as_mut_slice(&mut self) -> &mut [E] {
        match &mut self.inline {
            Some(inline) => &mut inline[..self.len],
            None => &mut self.heap,
        }
    }
}

impl<'n, T: Copy> Names<'n, T> {
    fn with_capacity(n: usize) -> Self {
        Names {
            entries: Entries::with_capacity(n),
            index: None,
        }
    }

    fn find(&self, name: &str) -> Option<usize> {
        match &self.index {
            Some(index) => index.get(name).copied(),
            None => self.scan(NameKey::of(name), name),
        }
    }

    /// [`find`](Self::find) with `name`'s key `f` computed by the caller (who needs
    /// it again to [`push`](Self::push) an absent name).
    fn find_keyed(&self, f: NameKey, name: &str) -> Option<usize> {
        match &self.index {
            Some(index) => index.get(name).copied(),
            None => self.scan(f, name),
        }
    }

    fn scan(&self, f: NameKey, name: &str) -> Option<usize> {
        self.entries
            .as_slice()
            .iter()
            .position(|(g, n, _)| g.same_name(f, n, name))
    }

    fn get(&self, name: &str) -> Option<&T> {
        self.find(name).map(|i| &self.entries.as_slice()[i].2)
    }

    fn get_mut(&mut self, name: &str) -> Option<&mut T> {
        self.find(name)
            .map(|i| &mut self.entries.as_mut_slice()[i].2)
    }

    /// The entry of `name`, inserted as `make()` when absent.
    #[cfg(test)]
    fn entry(&mut self, name: &'n str, make: impl FnOnce() -> T) -> &mut T {
        self.entry_keyed(NameKey::of(name), name, make)
    }

    /// The entry of `tool`'s name (by its own key: a name of up to 15 bytes is never read),
    /// inserted as `make()` when absent.
    fn tool_entry(&mut self, tool: &'n ToolSchema, make: impl FnOnce() -> T) -> &mut T {
        self.entry_keyed(tool.name_key(), tool.name(), make)
    }

    fn entry_keyed(&mut self, f: NameKey, name: &'n str, make: impl FnOnce() -> T) -> &mut T {
        let i = match self.find_keyed(f, name) {
            Some(i) => i,
            None => self.push(f, name, make()),
        };
        &mut self.entries.as_mut_slice()[i].2
    }

    /// Adds `name` (absent, of key `f`) as `value`; its index.
    fn push(&mut self, f: NameKey, name: &'n str, value: T) -> usize {
        let i = self.entries.len();
        self.entries.push((f, name, value));
        match &mut self.index {
            Some(index) => {
                index.insert(name, i);
            }
            None if self.entries.len() > SMALL => {
                let index = self.entries.as_slice().iter().enumerate();
                self.index = Some(index.map(|(i, (_, n, _))| (*n, i)).collect());
            }
            None => {}
        }
        i
    }

    fn values(&self) -> impl Iterator<Item = &T> {
        self.entries.as_slice().iter().map(|(_, _, v)| v)
    }
}

/// Rules 3 and 5 (and §5.1) in one pass: keeps the series' developer messages, each
/// rewritten by `walk` (from the offered tools, which `walk` tracks), and drops every other
/// developer message. `None` when some update of the snapshot is not a developer message of
/// `messages` (rule 3).
///
/// Updates are in log order, so on a recorded request each one is the next developer message
/// of the series: membership is one comparison with the next expected update; only a
/// developer message that is not (another series', or any on a hand-made snapshot) is looked
/// up.
fn keep_series_messages<'a>(
    messages: MessagesRef<'a>,
    history: &ToolHistory,
    mut walk: impl FnMut(&'a Message, Option<usize>) -> Kept,
) -> Option<ProjectedMessages<'a>> {
    let updates = history.updates();
    // The next update expected in order. Lists are read by index: small snapshots are one
    // chunk, and an index costs less than an iterator over the persistent vector.
    let mut next = 0;
    let mut index: Option<HashSet<&str>> = None;
    let mut splice = Splice::new(messages);
    // Only developer messages are kept, rewritten or dropped: a request's list says where they
    // are, so the walk never reads the other messages.
    for (i, message) in messages.developer() {
        let id = message.id();
        // `met`: the update met in order, whose id this message has (the walk need not look
        // it up again).
        let mut met = None;
        let in_series = if updates.get(next).is_some_and(|u| u.message_id() == id) {
            met = Some(next);
            next += 1;
            true
        } else if updates.len() <= SMALL {
            (0..updates.len()).any(|k| updates[k].message_id() == id)
        } else {
            index
                .get_or_insert_with(|| updates.iter().map(ToolUpdate::message_id).collect())
                .contains(id)
        };
        // A developer message of another series (or of no series) is dropped.
        match if in_series {
            walk(message, met)
        } else {
            Kept::Dropped
        } {
            Kept::Same => {}
            Kept::Dropped => splice.remove(i),
            Kept::Changed(m) => splice.replace(i, m),
        }
    }
    // Rule 3: the updates not met in order must still be developer messages of `messages`.
    let missing: Vec<&str> = (next..updates.len())
        .map(|k| updates[k].message_id())
        .collect();
    if !missing.is_empty() {
        let mut developer = messages.developer().map(|(_, m)| m);
        let present = if missing.len() <= SMALL {
            let mut found = vec![false; missing.len()];
            for m in developer {
                for (f, id) in found.iter_mut().zip(&missing) {
                    *f |= *id == m.id();
                }
            }
            found.iter().all(|f| *f)
        } else {
            let ids: HashSet<&str> = developer.by_ref().map(Message::id).collect();
            missing.iter().all(|id| ids.contains(id))
        };
        if !present {
            return None;
        }
    }
    Some(splice.finish())
}

/// What the walk decided for one developer message.
enum Kept {
    Same,
    Changed(Message),
    Dropped,
}

/// What the walk does with one block.
#[derive(Clone, Copy)]
enum Fate<'h> {
    Kept,
    Dropped,
    /// Replaced by a by-value addition of this definition (§5.1); the block is built only
    /// when the message is rebuilt.
    Inline(&'h ToolSchema),
}

/// Blocks a developer message has at most, on most requests: their fates sit on the stack.
const FEW_BLOCKS: usize = 8;

/// Runs `walk` on a buffer of `n` fates (initially [`Fate::Kept`]): on the stack up to
/// [`FEW_BLOCKS`], so walking a message allocates nothing.
fn with_fates<'h, R>(n: usize, walk: impl FnOnce(&mut [Fate<'h>]) -> R) -> R {
    if n <= FEW_BLOCKS {
        let mut fates = [Fate::Kept; FEW_BLOCKS];
        walk(&mut fates[..n])
    } else {
        walk(&mut vec![Fate::Kept; n])
    }
}

impl Kept {
    /// The outcome for `message` given each block's fate, in order. Blocks are cloned only
    /// when the message changes.
    fn of(message: &Message, fates: &[Fate<'_>]) -> Kept {
        if fates.iter().all(|f| matches!(f, Fate::Dropped)) {
            // A message left without blocks (or that had none) is dropped.
            return Kept::Dropped;
        }
        if fates.iter().all(|f| matches!(f, Fate::Kept)) {
            return Kept::Same;
        }
        // Sized once: the blocks that stay are counted already.
        let mut content =
            Vec::with_capacity(fates.iter().filter(|f| !matches!(f, Fate::Dropped)).count());
        for (block, fate) in message.content().iter().zip(fates) {
            match fate {
                Fate::Kept => content.push(block.clone()),
                Fate::Dropped => {}
                Fate::Inline(def) => {
                    content.push(ContentBlock::InlineAddition(InlineAddition::new(def)));
                }
            }
        }
        Kept::Changed(message.with_content(content))
    }
}

/// One name of rule 4's declarations (or a snapshot name the mode leaves undeclared).
#[derive(Clone, Copy)]
struct Declared<'h> {
    /// The name's first declaration: the snapshot's, or the first addition's.
    first: &'h ToolSchema,
    /// Declared by an addition (after the snapshot's tools, deferred).
    addition: bool,
    /// Among the declarations (`AdditionOnly` leaves out names not among `tools`).
    declared: bool,
    /// Rule 5's `offered`: the snapshot's non-deferred names to start with.
    offered: bool,
}

impl Declared<'_> {
    fn deferred(&self) -> bool {
        self.addition || self.first.defer_loading()
    }
}

/// Rule 4's declarations by name, in order, with rule 5's `offered` set.
struct Declarations<'h> {
    names: Names<'h, Declared<'h>>,
}

impl<'h> Declarations<'h> {
    /// The snapshot's tools in order, then each addition whose name is not declared yet (the
    /// first declaration of a name wins); `AdditionOnly` keeps only the names among `tools`.
    fn of(history: &'h ToolHistory, tools: Option<&[ToolSchema]>, mode: ToolUpdateMode) -> Self {
        let snapshot = history.tools();
        let mut names = Names::with_capacity(snapshot.len() + 4);
        for k in 0..snapshot.len() {
            let t = &snapshot[k];
            let d = names.tool_entry(t, || Declared {
                first: t,
                addition: false,
                declared: true,
                offered: false,
            });
            d.offered |= !t.defer_loading();
        }
        let updates = history.updates();
        for k in 0..updates.len() {
            let additions = updates[k].additions();
            for j in 0..additions.len() {
                let t = &additions[j];
                names.tool_entry(t, || Declared {
                    first: t,
                    addition: true,
                    declared: true,
                    offered: false,
                });
            }
        }
        if mode == ToolUpdateMode::AdditionOnly {
            for (_, _, d) in names.entries.as_mut_slice() {
                d.declared = false;
            }
            for t in tools.unwrap_or_default() {
                if let Some(i) = names.find_keyed(t.name_key(), t.name()) {
                    names.entries.as_mut_slice()[i].2.declared = true;
                }
            }
        }
        Declarations { names }
    }

    fn declared(&self) -> impl Iterator<Item = &Declared<'h>> {
        self.names.values().filter(|d| d.declared)
    }

    /// Providers need one immediately available tool: whether there are declarations and all
    /// are deferred.
    fn all_deferred(&self) -> bool {
        let mut any = false;
        for d in self.declared() {
            if !d.deferred() {
                return false;
            }
            any = true;
        }
        any
    }

    /// The declarations; `given` itself when they are its schemas with the same flags.
    fn tools<'a>(&self, given: Option<&'a [ToolSchema]>) -> Cow<'a, [ToolSchema]> {
        if let Some(given) = given {
            let mut g = given.iter();
            let same = self.declared().all(|d| {
                g.next().is_some_and(|y| {
                    d.first.shares_definition_with(y) && d.deferred() == y.defer_loading()
                })
            });
            if same && g.next().is_none() {
                return Cow::Borrowed(given);
            }
        }
        Cow::Owned(
            self.declared()
                .map(|d| {
                    if d.addition && !d.first.defer_loading() {
                        d.first.with_defer_loading(true)
                    } else {
                        d.first.clone()
                    }
                })
                .collect(),
        )
    }
}

/// Walks one developer message of the series (rule 5).
fn walk_blocks(
    message: &Message,
    declarations: &mut Declarations<'_>,
    mode: ToolUpdateMode,
) -> Kept {
    let content = message.content();
    with_fates(content.len(), |fates| {
        for (fate, block) in fates.iter_mut().zip(content) {
            let stays = match block {
                // Declared and not offered, deferred or not: a `tool_addition` also re-offers a
                // removed non-deferred tool.
                ContentBlock::ToolAddition(r) => {
                    let tool_name = r.tool_name();
                    match declarations.names.get_mut(tool_name) {
                        Some(d) if d.declared && !d.offered => {
                            d.offered = true;
                            true
                        }
                        _ => false,
                    }
                }
                ContentBlock::ToolRemoval(r) => match mode {
                    ToolUpdateMode::InHistory => match declarations.names.get_mut(r.tool_name()) {
                        Some(d) if d.offered => {
                            d.offered = false;
                            true
                        }
                        _ => false,
                    },
                    ToolUpdateMode::AdditionOnly => false,
                },
                // The by-reference fold opened a declaration series for it already.
                ContentBlock::ToolRedefinition(_) => false,
                _ => true,
            };
            if !stays {
                *fate = Fate::Dropped;
            }
        }
        Kept::of(message, fates)
    })
}

/// A name on an inline-definition route: its snapshot definition and what it is offered as.
#[derive(Clone, Copy, Default)]
struct Definitions<'h> {
    /// The snapshot's tool of this name (the last one, on a snapshot that repeats a name).
    snapshot: Option<&'h ToolSchema>,
    /// The definition the name is offered as; `None` when not offered.
    offered: Option<&'h ToolSchema>,
}

/// The walk of §5.1 over the series' developer messages, in order.
struct InlineWalk<'h> {
    history: &'h ToolHistory,
    names: Names<'h, Definitions<'h>>,
    /// Whether `names` holds the snapshot's tools yet.
    started: bool,
    /// The updates by message id (the last one for an id), built on the first lookup of a
    /// large snapshot.
    by_message: Option<HashMap<&'h str, &'h ToolUpdate>>,
    /// Which definitions of the current update's additions and redefinitions were handed
    /// out: scratch, reused across messages.
    taken: (Taken, Taken),
}

impl<'h> InlineWalk<'h> {
    fn of(history: &'h ToolHistory) -> Self {
        InlineWalk {
            history,
            names: Names::with_capacity(0),
            started: false,
            by_message: None,
            taken: (Taken::default(), Taken::default()),
        }
    }

    /// The update of `message_id` (the last one, on a snapshot that repeats an id). `met`:
    /// an update known to have that id, so only the later ones are read.
    fn update(&mut self, message_id: &str, met: Option<usize>) -> Option<&'h ToolUpdate> {
        let updates = self.history.updates();
        if updates.len() <= SMALL {
            let from = met.map_or(0, |k| k + 1);
            return (from..updates.len())
                .rev()
                .map(|k| &updates[k])
                .find(|u| u.message_id() == message_id)
                .or_else(|| met.map(|k| &updates[k]));
        }
        self.by_message
            .get_or_insert_with(|| updates.iter().map(|u| (u.message_id(), u)).collect())
            .get(message_id)
            .copied()
    }

    fn offered(&self, name: &str) -> Option<&'h ToolSchema> {
        self.names.get(name).and_then(|d| d.offered)
    }

    fn offer(&mut self, def: &'h ToolSchema) {
        self.names.tool_entry(def, Definitions::default).offered = Some(def);
    }

    /// The names of the snapshot's tools: built on the first message walked (a request
    /// without one never reads them).
    fn start(&mut self) {
        let snapshot = self.history.tools();
        self.names = Names::with_capacity(snapshot.len() + 4);
        for k in 0..snapshot.len() {
            let t = &snapshot[k];
            let d = self.names.tool_entry(t, Definitions::default);
            d.snapshot = Some(t);
            if !t.defer_loading() {
                d.offered = Some(t);
            }
        }
        self.started = true;
    }

    /// Walks one developer message of the series (§5.1).
    fn message(&mut self, message: &Message, met: Option<usize>) -> Kept {
        if !self.started {
            self.start();
        }
        let update = self.update(message.id(), met);
        let additions = update.map(ToolUpdate::additions);
        let redefinitions = update.map(ToolUpdate::redefinitions);
        let mut taken = std::mem::take(&mut self.taken);
        taken.0.reset(additions.map_or(0, List::len));
        taken.1.reset(redefinitions.map_or(0, List::len));
        let content = message.content();
        let kept = with_fates(content.len(), |fates| {
            for (slot, block) in fates.iter_mut().zip(content) {
                *slot = self.block(block, additions, redefinitions, &mut taken);
            }
            Kept::of(message, fates)
        });
        self.taken = taken;
        kept
    }

    /// The fate of one block of a series message (§5.1), offering what it adds.
    fn block(
        &mut self,
        block: &ContentBlock,
        additions: Option<&'h List<ToolSchema>>,
        redefinitions: Option<&'h List<ToolSchema>>,
        taken: &mut (Taken, Taken),
    ) -> Fate<'h> {
        {
            match block {
                ContentBlock::ToolAddition(r) => {
                    let tool_name = r.tool_name();
                    match next_definition(additions, &mut taken.0, tool_name) {
                        // A hand-made snapshot without the definition: nothing valid to send.
                        None => Fate::Dropped,
                        // One lookup of the name (`def` is named `tool_name`) serves the
                        // three questions and the offer.
                        Some(def) => {
                            let name = def.name();
                            let f = def.name_key();
                            let slot = self.names.find_keyed(f, name);
                            let (snapshot, offered_as) = match slot {
                                Some(i) => {
                                    let d = &self.names.entries.as_slice()[i].2;
                                    (d.snapshot, d.offered)
                                }
                                None => (None, None),
                            };
                            let fate = match offered_as {
                                Some(o) if o.same_tool(def) => Fate::Dropped,
                                None if snapshot.is_some_and(|s| s.same_tool(def)) => Fate::Kept,
                                _ => Fate::Inline(def),
                            };
                            if !matches!(fate, Fate::Dropped) {
                                match slot {
                                    Some(i) => {
                                        self.names.entries.as_mut_slice()[i].2.offered = Some(def);
                                    }
                                    None => {
                                        self.names.push(
                                            f,
                                            name,
                                            Definitions {
                                                snapshot: None,
                                                offered: Some(def),
                                            },
                                        );
                                    }
                                }
                            }
                            fate
                        }
                    }
                }
                ContentBlock::ToolRedefinition(r) => {
                    let tool_name = r.tool_name();
                    let def = next_definition(redefinitions, &mut taken.1, tool_name);
                    match (self.offered(tool_name), def) {
                        (Some(o), Some(def)) if !o.same_tool(def) => {
                            self.offer(def);
                            Fate::Inline(def)
                        }
                        _ => Fate::Dropped,
                    }
                }
                ContentBlock::ToolRemoval(r) => {
                    let tool_name = r.tool_name();
                    match self.names.get_mut(tool_name).and_then(|d| d.offered.take()) {
                        Some(_) => Fate::Kept,
                        None => Fate::Dropped,
                    }
                }
                _ => Fate::Kept,
            }
        }
    }
}

/// Which definitions of one update's list were handed out: a bit set in a word for up to 64
/// definitions (every update of a real session), a vector beyond.
#[derive(Default)]
struct Taken {
    bits: u64,
    more: Vec<bool>,
}

impl Taken {
    /// Nothing handed out, of `n` definitions.
    fn reset(&mut self, n: usize) {
        self.bits = 0;
        self.more.clear();
        if n > 64 {
            self.more.resize(n, false);
        }
    }

    fn is_taken(&self, k: usize) -> bool {
        if self.more.is_empty() {
            self.bits & (1 << k) != 0
        } else {
            self.more[k]
        }
    }

    fn take(&mut self, k: usize) {
        if self.more.is_empty() {
            self.bits |= 1 << k;
        } else {
            self.more[k] = true;
        }
    }
}

/// The next definition of `name` in `defs` not handed out yet (the fold lists them in block
/// order), marked as handed out.
fn next_definition<'h>(
    defs: Option<&'h List<ToolSchema>>,
    taken: &mut Taken,
    name: &str,
) -> Option<&'h ToolSchema> {
    let defs = defs?;
    let f = NameKey::of(name);
    let k = (0..defs.len())
        .find(|&k| !taken.is_taken(k) && f.same_name(defs[k].name_key(), name, defs[k].name()))?;
    taken.take(k);
    Some(&defs[k])
}

/// Rules 2–3 and the all-deferred fallback: developer messages dropped, tools as given.
fn fallback<'a>(
    messages: MessagesRef<'a>,
    tools: Option<&'a [ToolSchema]>,
    path: ProjectionPath,
) -> ProjectedToolUpdates<'a> {
    ProjectedToolUpdates {
        messages: without_developer(messages),
        tools: tools.map(as_given),
        path,
    }
}

/// Every message but developer ones; the input itself when there is none.
fn without_developer(messages: MessagesRef<'_>) -> ProjectedMessages<'_> {
    let mut splice = Splice::new(messages);
    match messages.as_slice() {
        // A slice's roles are read in one tight loop.
        Some(slice) => {
            for (i, m) in slice.iter().enumerate() {
                if m.role() == Role::Developer {
                    splice.remove(i);
                }
            }
        }
        None => {
            for (i, _) in messages.developer() {
                splice.remove(i);
            }
        }
    }
    splice.finish()
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

/// Whether two schemas are the same allocation with the same flag: definitions are compared
/// by pointer, never by content.
fn same_schema(x: &ToolSchema, y: &ToolSchema) -> bool {
    x.shares_definition_with(y) && x.defer_loading() == y.defer_loading()
}

/// A tool call naming a tool the model may not call ([reference
/// §5](crate::manual::reference#5-projection-project_tool_updates), §7).
///
/// ```
/// use mektpoy::event::RequestHeader;
/// use mektpoy::project::{UnknownTool, validate_tool_call};
/// use mektpoy::{Config, ToolSchema};
/// let header = RequestHeader::new(Config::new("acme", "acme-1"), vec![ToolSchema::no_input("read", "")]);
/// assert_eq!(validate_tool_call("", &header), Err(UnknownTool::EmptyName));
/// assert!(matches!(validate_tool_call("shell", &header), Err(UnknownTool::NotEffective { .. })));
/// assert_eq!(validate_tool_call("read", &header), Ok(()));
/// ```
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

/// The name an unknown call used.
///
/// ```
/// use mektpoy::project::UnknownTool;
/// assert_eq!(UnknownTool::Reserved { name: "mektpoy_deferred_placeholder".into() }.name(), "mektpoy_deferred_placeholder");
/// ```
impl UnknownTool {
    /// The called name.
    ///
    /// ```
    /// use mektpoy::project::UnknownTool;
    /// assert_eq!(UnknownTool::NotEffective { name: "shell".into() }.name(), "shell");
    /// assert_eq!(UnknownTool::EmptyName.name(), "");
    /// ```
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

    /// The name table reads the same on the stack, across the spill to the heap and past
    /// the hashed index, whatever capacity it was sized for.
    #[test]
    fn names_find_every_entry_on_the_stack_and_beyond() {
        let names: Vec<String> = (0..40).map(|i| format!("tool_{i}")).collect();
        for capacity in [0, 4, INLINE_ENTRIES, INLINE_ENTRIES + 1, 64] {
            let mut table: Names<'_, usize> = Names::with_capacity(capacity);
            for (i, name) in names.iter().enumerate() {
                assert!(
                    table.get(name).is_none(),
                    "{name} absent before its insertion"
                );
                *table.entry(name, || i) += 100;
                assert_eq!(table.entry(name, || usize::MAX), &mut (i + 100));
                for (j, earlier) in names[..=i].iter().enumerate() {
                    assert_eq!(table.get(earlier), Some(&(j + 100)), "{earlier} after {i}");
                }
                assert_eq!(table.entries.len(), i + 1);
            }
            *table.get_mut("tool_3").expect("present") = 7;
            let values: Vec<usize> = table.values().copied().collect();
            let mut expect: Vec<usize> = (0..40).map(|i| i + 100).collect();
            expect[3] = 7;
            assert_eq!(values, expect, "insertion order, capacity {capacity}");
        }
    }
}
