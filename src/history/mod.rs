//! `ToolHistory`: the immutable snapshot of tool declarations and updates ([reference
//! §3](crate::manual::reference#3-toolhistory-the-cached-reducer)), and the incremental fold that
//! produces it.
//!
//! Two folds read the same log: **by reference** (`Session::tool_history`), for routes that
//! name tools in history and must open a new declaration series for a changed definition, and
//! **by value**, for routes that may carry a definition inside the history (a changed or
//! returning tool never rewrites the declarations there).
//!
//! Snapshots are values: persistent vectors of O(1)-clone schemas, so handing one out per request
//! costs O(1) and nothing can change it afterwards. The fold never fails: every event it sees
//! was validated at append.

mod record;
mod reducer;

use std::fmt;
use std::sync::Arc;

use serde::de::{self, Deserializer};
use serde::ser::Serializer;
use serde::{Deserialize, Serialize};

use crate::vocab::{List, ToolSchema};

pub(crate) use record::{DeveloperRecord, FoldRecord, HeaderRecord, NameId, Previous, ToolNames};
pub(crate) use reducer::{FoldKind, FoldLog, ToolFold};

/// Tool declarations and updates a route may rely on ([reference
/// §3](crate::manual::reference#3-toolhistory-the-cached-reducer)).
///
/// JSON: `{"tools":[...],"updates":[{"messageId":...,"additions":[...],"redefinitions"?:[...]}]}`
/// (`redefinitions` only when non-empty). Cloning is O(1).
///
/// ```
/// use mektpoy::{AgentLoop, Message, Session, ToolSchema, route_for};
/// let read = ToolSchema::no_input("read", "Read a file");
/// let grep = ToolSchema::no_input("grep", "Search files");
/// let mut agent = AgentLoop::builder(Session::new("s"), route_for("deepseek", "deepseek-flash"))
///     .tools([read.clone()])
///     .build()?;
/// agent.user_turn([Message::user("u1", "hi")])?;
/// agent.append(agent.assistant("a1", [mektpoy::ContentBlock::text("ok")]))?;
/// agent.set_tools([read.clone(), grep.clone()])?;
/// agent.user_turn([Message::user("u2", "go on")])?;
/// let history = agent.session().tool_history();
/// assert_eq!(history.tools().to_vec(), vec![read]);
/// assert_eq!(history.updates()[0].additions().to_vec(), vec![grep]);
/// # Ok::<(), mektpoy::Error>(())
/// ```
#[derive(Clone, Default, PartialEq, Serialize)]
pub struct ToolHistory {
    #[serde(serialize_with = "array")]
    tools: List<ToolSchema>,
    #[serde(serialize_with = "array")]
    updates: List<ToolUpdate>,
}

/// One developer message of the current declaration series and the definitions it added or
/// redefined, each resolved through the header the message named. Cloning is O(1).
///
/// What an update holds depends on its message and the header it names alone, not on the rest
/// of the log, so the log builds each once, when the message joins it, and every snapshot of
/// either fold shares it ([decision 80](crate::manual::decisions#decision-80)).
///
/// ```
/// use mektpoy::ToolSchema;
/// use mektpoy::history::ToolUpdate;
/// let update = ToolUpdate::new("d1", [ToolSchema::no_input("grep", "")]);
/// assert_eq!(update.message_id(), "d1");
/// assert_eq!(update.additions()[0].name(), "grep");
/// assert!(update.redefinitions().is_empty());
/// ```
#[derive(Clone, PartialEq)]
pub struct ToolUpdate(Arc<Update>);

#[derive(Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
struct Update {
    /// Shared with the log's own copy of the id.
    #[serde(serialize_with = "id")]
    message_id: Arc<str>,
    #[serde(serialize_with = "array")]
    additions: List<ToolSchema>,
    #[serde(serialize_with = "array", skip_serializing_if = "List::is_empty")]
    redefinitions: List<ToolSchema>,
}

impl Serialize for ToolUpdate {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

/// Building and reading a snapshot.
///
/// ```
/// use mektpoy::ToolSchema;
/// use mektpoy::history::{ToolHistory, ToolUpdate};
/// let history = ToolHistory::new([ToolSchema::no_input("read", "")], [ToolUpdate::new("d1", [])]);
/// assert_eq!((history.tools().len(), history.updates().len()), (1, 1));
/// ```
impl ToolHistory {
    /// A snapshot from its parts (for callers that carry snapshots across a process boundary;
    /// sessions build their own).
    ///
    /// ```
    /// use mektpoy::ToolSchema;
    /// use mektpoy::history::{ToolHistory, ToolUpdate};
    /// let read = ToolSchema::no_input("read", "");
    /// let history = ToolHistory::new([read], [ToolUpdate::new("d1", [ToolSchema::no_input("grep", "")])]);
    /// assert_eq!(history.tools().len(), 1);
    /// assert_eq!(history.updates()[0].message_id(), "d1");
    /// ```
    pub fn new(
        tools: impl IntoIterator<Item = ToolSchema>,
        updates: impl IntoIterator<Item = ToolUpdate>,
    ) -> Self {
        ToolHistory {
            tools: tools.into_iter().collect(),
            updates: updates.into_iter().collect(),
        }
    }

    /// The tools of the header that opened the current declaration series, in order, with
    /// their own `deferLoading` (or, under the guard, the latest header's tools).
    ///
    /// ```
    /// use mektpoy::ToolSchema;
    /// use mektpoy::history::ToolHistory;
    /// let history = ToolHistory::new([ToolSchema::no_input("read", "")], []);
    /// assert_eq!(history.tools().iter().map(|t| t.name()).collect::<Vec<_>>(), ["read"]);
    /// ```
    pub fn tools(&self) -> &List<ToolSchema> {
        &self.tools
    }

    /// The developer messages of the series, in log order.
    ///
    /// ```
    /// use mektpoy::ToolSchema;
    /// use mektpoy::history::{ToolHistory, ToolUpdate};
    /// let updates = [ToolUpdate::new("d1", []), ToolUpdate::new("d2", [])];
    /// let history = ToolHistory::new([ToolSchema::no_input("read", "")], updates);
    /// let ids: Vec<&str> = history.updates().iter().map(|u| u.message_id()).collect();
    /// assert_eq!(ids, ["d1", "d2"]);
    /// ```
    pub fn updates(&self) -> &List<ToolUpdate> {
        &self.updates
    }

    /// The compact JSON form.
    ///
    /// ```
    /// use mektpoy::history::{ToolHistory, ToolUpdate};
    /// let history = ToolHistory::new([], [ToolUpdate::new("d1", [])]);
    /// assert_eq!(history.to_json(), r#"{"tools":[],"updates":[{"messageId":"d1","additions":[]}]}"#);
    /// ```
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a snapshot has string keys and finite numbers")
    }
}

/// Building and reading an update.
///
/// ```
/// use mektpoy::ToolSchema;
/// use mektpoy::history::ToolUpdate;
/// let update = ToolUpdate::new("d1", [ToolSchema::no_input("grep", "")]);
/// assert_eq!((update.message_id(), update.additions().len()), ("d1", 1));
/// ```
impl ToolUpdate {
    /// An update for the developer message `message_id`.
    ///
    /// ```
    /// use mektpoy::ToolSchema;
    /// use mektpoy::history::ToolUpdate;
    /// let update = ToolUpdate::new("d1", [ToolSchema::no_input("grep", "Search")]);
    /// assert_eq!(update.additions().len(), 1);
    /// ```
    pub fn new(
        message_id: impl Into<String>,
        additions: impl IntoIterator<Item = ToolSchema>,
    ) -> Self {
        ToolUpdate::of(
            Arc::from(message_id.into()),
            additions.into_iter().collect(),
            List::default(),
        )
    }

    /// The update of the message whose id the log holds as `message_id`.
    pub(crate) fn of(
        message_id: Arc<str>,
        additions: List<ToolSchema>,
        redefinitions: List<ToolSchema>,
    ) -> Self {
        ToolUpdate(Arc::new(Update {
            message_id,
            additions,
            redefinitions,
        }))
    }

    /// The same update with these redefinitions (`tool-redefinition` blocks, resolved).
    ///
    /// ```
    /// use mektpoy::ToolSchema;
    /// use mektpoy::history::ToolUpdate;
    /// let update = ToolUpdate::new("d1", []).with_redefinitions([ToolSchema::no_input("read", "v2")]);
    /// assert_eq!(update.redefinitions()[0].description(), "v2");
    /// ```
    #[must_use]
    pub fn with_redefinitions(
        mut self,
        redefinitions: impl IntoIterator<Item = ToolSchema>,
    ) -> Self {
        Arc::make_mut(&mut self.0).redefinitions = redefinitions.into_iter().collect();
        self
    }

    /// The developer message's id.
    ///
    /// ```
    /// use mektpoy::history::ToolUpdate;
    /// assert_eq!(ToolUpdate::new("dev-7", []).message_id(), "dev-7");
    /// ```
    pub fn message_id(&self) -> &str {
        &self.0.message_id
    }

    /// Each addition's full definition, resolved through the header the message named.
    ///
    /// ```
    /// use mektpoy::ToolSchema;
    /// use mektpoy::history::ToolUpdate;
    /// let update = ToolUpdate::new("d1", [ToolSchema::no_input("a", ""), ToolSchema::no_input("b", "")]);
    /// assert_eq!(update.additions().iter().map(|t| t.name()).collect::<Vec<_>>(), ["a", "b"]);
    /// ```
    pub fn additions(&self) -> &List<ToolSchema> {
        &self.0.additions
    }

    /// Each redefinition's full definition, resolved through the header the message named.
    ///
    /// ```
    /// use mektpoy::ToolSchema;
    /// use mektpoy::history::ToolUpdate;
    /// let update = ToolUpdate::new("d1", []);
    /// assert!(update.redefinitions().is_empty());
    /// let update = update.with_redefinitions([ToolSchema::no_input("read", "")]);
    /// assert_eq!(update.redefinitions().len(), 1);
    /// ```
    pub fn redefinitions(&self) -> &List<ToolSchema> {
        &self.0.redefinitions
    }
}

impl fmt::Debug for ToolHistory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolHistory")
            .field(
                "tools",
                &self.tools.iter().map(ToolSchema::name).collect::<Vec<_>>(),
            )
            .field("updates", &self.updates)
            .finish()
    }
}

impl fmt::Debug for ToolUpdate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<_> = self.additions().iter().map(ToolSchema::name).collect();
        write!(f, "{}{:?}", self.message_id(), names)?;
        if !self.redefinitions().is_empty() {
            let names: Vec<_> = self.redefinitions().iter().map(ToolSchema::name).collect();
            write!(f, "~{names:?}")?;
        }
        Ok(())
    }
}

/// Writes a message id as a JSON string.
fn id<S: Serializer>(id: &Arc<str>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(id)
}

/// Writes a `List` as a JSON array.
fn array<T: Serialize + Clone, S: Serializer>(list: &List<T>, s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(list.iter())
}

impl<'de> Deserialize<'de> for ToolHistory {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Repr {
            tools: Vec<ToolSchema>,
            updates: Vec<ToolUpdate>,
        }
        let r = Repr::deserialize(d)?;
        Ok(ToolHistory::new(r.tools, r.updates))
    }
}

impl<'de> Deserialize<'de> for ToolUpdate {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase", deny_unknown_fields)]
        struct Repr {
            message_id: String,
            additions: Vec<ToolSchema>,
            #[serde(default)]
            redefinitions: Vec<ToolSchema>,
        }
        let r = Repr::deserialize(d).map_err(de::Error::custom)?;
        Ok(ToolUpdate::new(r.message_id, r.additions).with_redefinitions(r.redefinitions))
    }
}
