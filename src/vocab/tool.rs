//! `ToolSchema`: one tool declaration as the log records it ([reference
//! §1](crate::manual::reference#1-vocabulary-and-json)).
//!
//! The definition sits behind an `Arc` so that snapshots, projections and requests clone a
//! schema in O(1); `defer_loading` sits outside it because projection flips it on every step
//! and must not deep-copy the schema to do so.

use std::fmt;
use std::sync::Arc;

use indexmap::IndexMap;
use serde::de::{self, DeserializeSeed, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use super::json::{map_equivalent, object_equivalent};
use super::strict::{Entries, Strict, Strictly, wrong_shape};

/// The unknown field holding a Responses API tool that is not a function
/// ([`ToolSchema::from_responses_tool`]).
pub(crate) const RESPONSES_TOOL: &str = "responsesTool";

/// One tool declaration: `{"name","description","parameters","deferLoading"?, ...}`.
///
/// Unknown fields (MCP `title`, `annotations`, …) are kept in [`extra`](Self::extra), in their
/// order, and written back. Cloning is O(1). Equality (`==`) is [reference
/// §1](crate::manual::reference#1-vocabulary-and-json) equivalence: *the same tool* when every
/// field is equivalent, unknown ones included, so key order and number spelling never make a
/// change.
///
/// ```
/// use mektpoy::ToolSchema;
/// let a = ToolSchema::from_value(serde_json::json!({"name": "read", "description": "Read", "parameters": {"type": "object", "required": []}, "title": "Read"}))?;
/// let b = ToolSchema::from_value(serde_json::json!({"title": "Read", "parameters": {"required": [], "type": "object"}, "description": "Read", "name": "read"}))?;
/// assert_eq!(a, b, "key order makes no change");
/// assert_eq!(a.extra()["title"], "Read", "an unknown field, kept");
/// # Ok::<(), mektpoy::vocab::ToolError>(())
/// ```
#[derive(Clone)]
pub struct ToolSchema {
    def: Arc<ToolDef>,
    defer_loading: bool,
}

struct ToolDef {
    name: String,
    /// [`NameKey`] of `name`, computed once: the projection's name tables compare it instead of the
    /// bytes (which it is, for a name of up to 15 bytes), so a lookup never reads or hashes this
    /// name's bytes. Measured alone ([decision 154](crate::manual::decisions#decision-154)):
    /// without it the conformance vectors project 7–18 % slower (`addition-only` 84 → 100 µs),
    /// beyond the 0–5 % between two runs of the same build.
    name_key: NameKey,
    description: String,
    parameters: Map<String, Value>,
    extra: IndexMap<String, Value>,
}

impl ToolDef {
    fn new(
        name: String,
        description: String,
        parameters: Map<String, Value>,
        extra: IndexMap<String, Value>,
    ) -> Self {
        ToolDef {
            name_key: NameKey::of(&name),
            name,
            description,
            parameters,
            extra,
        }
    }
}

/// A tool name as the projection's name tables compare it: the name itself, packed with its
/// length, when it has at most 15 bytes (most tool names), so that equal keys are equal names
/// and no byte of either is read; else a hash of it (marked apart from every packed name),
/// where equal keys still compare the names. Different names of up to 15 bytes never share a
/// key; a collision of hashes costs a comparison, never a wrong answer.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub(crate) struct NameKey(u128);

impl NameKey {
    /// The key of `name`.
    pub(crate) fn of(name: &str) -> Self {
        let bytes = name.as_bytes();
        let mut word = [0u8; 16];
        if let Some(len) = u8::try_from(bytes.len()).ok().filter(|&n| n < 16) {
            // The bytes, zero-padded, then the length in the last byte (0..=15).
            word[..bytes.len()].copy_from_slice(bytes);
            word[15] = len;
            return NameKey(u128::from_le_bytes(word));
        }
        // The last byte 0xff, which no packed name has.
        NameKey(u128::from(long_name_hash(bytes)) | (0xff << 120))
    }

    /// Whether this key is its name (at most 15 bytes): then equal keys are equal names.
    fn is_exact(self) -> bool {
        (self.0 >> 120) < 16
    }

    /// Whether `a` (of key `self`) and `b` (of key `other`) are the same name; reads the
    /// bytes only for two long names with one hash.
    pub(crate) fn same_name(self, other: NameKey, a: &str, b: &str) -> bool {
        self == other && (self.is_exact() || a == b)
    }
}

/// A hash of a name longer than 15 bytes, eight bytes a step.
fn long_name_hash(bytes: &[u8]) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let mix = |h: u64, w: u64| {
        let h = (h ^ w).wrapping_mul(K);
        h ^ (h >> 29)
    };
    let mut h = 0xcbf2_9ce4_8422_2325 ^ bytes.len() as u64;
    let mut words = bytes.chunks_exact(8);
    for w in &mut words {
        let mut word = [0u8; 8];
        word.copy_from_slice(w);
        h = mix(h, u64::from_le_bytes(word));
    }
    let rest = words.remainder();
    if !rest.is_empty() {
        let mut word = [0u8; 8];
        word[..rest.len()].copy_from_slice(rest);
        h = mix(h, u64::from_le_bytes(word));
    }
    h ^ (h >> 32)
}

impl ToolSchema {
    /// A tool that takes no input: its schema is `{"type": "object"}`, the smallest one every
    /// route takes (the Messages API requires an object at the root of `input_schema`, so an
    /// empty schema `{}` is refused there).
    ///
    /// ```
    /// use mektpoy::ToolSchema;
    /// let t = ToolSchema::no_input("clock", "The current time");
    /// assert_eq!(serde_json::Value::Object(t.parameters().clone()), serde_json::json!({"type": "object"}));
    /// assert!(mektpoy::route_for("anthropic", "claude-opus-5").check_tools(&[t]).is_ok());
    /// ```
    pub fn no_input(name: impl Into<String>, description: impl Into<String>) -> Self {
        let mut parameters = Map::new();
        parameters.insert("type".to_owned(), Value::String("object".to_owned()));
        ToolSchema::new(name, description, parameters)
    }

    /// A tool with no unknown fields and `defer_loading` off.
    ///
    /// ```
    /// use mektpoy::ToolSchema;
    /// let t = ToolSchema::new("read", "read a file", serde_json::Map::new());
    /// assert_eq!(t.name(), "read");
    /// assert!(!t.defer_loading());
    /// ```
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        parameters: Map<String, Value>,
    ) -> Self {
        ToolSchema {
            def: Arc::new(ToolDef::new(
                name.into(),
                description.into(),
                parameters,
                IndexMap::new(),
            )),
            defer_loading: false,
        }
    }

    /// Decodes a tool from its log JSON, keeping unknown fields.
    ///
    /// ```
    /// use mektpoy::ToolSchema;
    /// use mektpoy::vocab::ToolError;
    /// let t = ToolSchema::from_value(serde_json::json!({"name": "read", "description": "", "parameters": {}, "deferLoading": true}))?;
    /// assert!(t.defer_loading());
    /// let nameless = serde_json::json!({"name": "", "description": "", "parameters": {}});
    /// assert_eq!(ToolSchema::from_value(nameless).unwrap_err(), ToolError::EmptyName);
    /// # Ok::<(), ToolError>(())
    /// ```
    ///
    /// # Errors
    /// A [`ToolError`] when `name` or `description` is missing or not a string, when
    /// `parameters` is missing or not an object, when `deferLoading` is not a boolean, when the
    /// name is empty, or when the value is not an object.
    pub fn from_value(value: Value) -> Result<Self, ToolError> {
        let Value::Object(map) = value else {
            return Err(ToolError::NotAnObject);
        };
        Self::from_entries(map)
    }

    /// A tool from one entry of an MCP server's `tools/list` result.
    ///
    /// The entry is the MCP `Tool` of the Model Context Protocol specification, revision
    /// 2025-11-25, *Server Features › Tools › Data Types › Tool*
    /// (<https://modelcontextprotocol.io/specification/2025-11-25/server/tools>, read
    /// 2026-12-01): `name`, an optional `title` (for display), `description`, `inputSchema` (a
    /// JSON Schema object, never `null`), an optional `outputSchema` and optional
    /// `annotations`; like every MCP object it may carry `_meta` (and servers add fields of
    /// newer revisions, such as `icons`). The page does not require `description`, and
    /// servers omit it.
    ///
    /// - `name` becomes the name, `inputSchema` the `parameters`.
    /// - A missing `description` becomes the empty string: every wire serializer writes a
    ///   description field, [`ToolSchema::new`] accepts an empty one, and the `title` is for
    ///   display (using it would send the model text the server did not write for it). A
    ///   server that adds a description later changes what the model reads, so that is a
    ///   definition change.
    /// - Every other field (`title`, `outputSchema`, `annotations`, `_meta`, any newer one) is kept
    ///   as an unknown field, in the order the `Value`'s map holds them (sorted, unless
    ///   serde_json's `preserve_order` is on), and written back to the log ([reference
    ///   §1](crate::manual::reference#1-vocabulary-and-json) item 2); no wire sends them (the
    ///   Messages API only its own tool fields). They are part of the definition, as every unknown
    ///   field is: a server that changes its annotations changes the tool.
    ///
    /// The result depends on the entry alone: the same entry gives an equal schema
    /// ([`same_definition`](Self::same_definition), key order and number spelling aside),
    /// and its log line reads back as the same tool.
    ///
    /// ```
    /// use mektpoy::{ToolSchema, vocab::ToolError};
    /// let entry = serde_json::json!({
    ///     "name": "get_weather",
    ///     "title": "Weather",
    ///     "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}}},
    ///     "annotations": {"readOnlyHint": true}
    /// });
    /// let tool = ToolSchema::from_mcp(entry.clone())?;
    /// assert_eq!(tool.name(), "get_weather");
    /// assert_eq!(tool.description(), "");
    /// assert_eq!(tool.parameters()["type"], "object");
    /// assert_eq!(tool.extra()["title"], "Weather");
    /// assert_eq!(tool.extra()["annotations"]["readOnlyHint"], true);
    /// assert!(tool.same_definition(&ToolSchema::from_mcp(entry)?));
    /// assert_eq!(
    ///     ToolSchema::from_mcp(serde_json::json!({"name": "x", "inputSchema": null})),
    ///     Err(ToolError::McpField("inputSchema"))
    /// );
    /// # Ok::<(), ToolError>(())
    /// ```
    ///
    /// # Errors
    /// [`ToolError::NotAnObject`] when the entry is not an object; [`ToolError::McpField`]
    /// when `name` is missing or not a string, `description` is present and not a string, or
    /// `inputSchema` is missing or not an object; [`ToolError::EmptyName`] for an empty name;
    /// [`ToolError::McpReservedKey`] for a `parameters`, `deferLoading` or `input_schema` key,
    /// which no MCP tool has and which would, kept, shadow a field of the log's tool (or be
    /// read as the schema by the Messages API).
    pub fn from_mcp(value: Value) -> Result<Self, ToolError> {
        let Value::Object(map) = value else {
            return Err(ToolError::NotAnObject);
        };
        let mut name = None;
        let mut description = None;
        let mut parameters = None;
        let mut extra = IndexMap::new();
        for (key, value) in map {
            match key.as_str() {
                "name" => match value {
                    Value::String(s) if s.is_empty() => return Err(ToolError::EmptyName),
                    Value::String(s) => name = Some(s),
                    _ => return Err(ToolError::McpField("name")),
                },
                "description" => match value {
                    Value::String(s) => description = Some(s),
                    _ => return Err(ToolError::McpField("description")),
                },
                "inputSchema" => match value {
                    Value::Object(o) => parameters = Some(o),
                    _ => return Err(ToolError::McpField("inputSchema")),
                },
                "parameters" | "deferLoading" | "input_schema" | RESPONSES_TOOL => {
                    return Err(ToolError::McpReservedKey(key));
                }
                _ => {
                    extra.insert(key, value);
                }
            }
        }
        Ok(ToolSchema {
            def: Arc::new(ToolDef::new(
                name.ok_or(ToolError::McpField("name"))?,
                description.unwrap_or_default(),
                parameters.ok_or(ToolError::McpField("inputSchema"))?,
                extra,
            )),
            defer_loading: false,
        })
    }

    /// Decodes a tool from its fields in document order (unknown ones keep that order; keys
    /// already unique).
    pub(crate) fn from_entries<K: AsRef<str> + Into<String>>(
        map: impl IntoIterator<Item = (K, Value)>,
    ) -> Result<Self, ToolError> {
        let mut name = None;
        let mut description = None;
        let mut parameters = None;
        let mut defer_loading = false;
        let mut extra = IndexMap::new();
        for (key, value) in map {
            match key.as_ref() {
                "name" => match value {
                    Value::String(s) if s.is_empty() => return Err(ToolError::EmptyName),
                    Value::String(s) => name = Some(s),
                    _ => return Err(ToolError::Field("name")),
                },
                "description" => match value {
                    Value::String(s) => description = Some(s),
                    _ => return Err(ToolError::Field("description")),
                },
                "parameters" => match value {
                    Value::Object(o) => parameters = Some(o),
                    _ => return Err(ToolError::Field("parameters")),
                },
                "deferLoading" => match value {
                    Value::Bool(b) => defer_loading = b,
                    _ => return Err(ToolError::Field("deferLoading")),
                },
                _ => {
                    extra.insert(key.into(), value);
                }
            }
        }
        Ok(ToolSchema {
            def: Arc::new(ToolDef::new(
                name.ok_or(ToolError::Field("name"))?,
                description.ok_or(ToolError::Field("description"))?,
                parameters.ok_or(ToolError::Field("parameters"))?,
                extra,
            )),
            defer_loading,
        })
    }

    /// A tool of the Responses API that is not a function (Codex's `custom` tools with a grammar
    /// `format`, `local_shell`, `web_search`, ...), kept whole: the crate cannot type it, so the
    /// Responses wire sends `definition` as it is and every other wire refuses it
    /// ([`WireError::ResponsesOnlyTool`](crate::wire::WireError::ResponsesOnlyTool)) rather than
    /// send a function the vendor never declared ([decision
    /// 139](crate::manual::decisions#decision-139)).
    ///
    /// The name is the definition's `name`, else its `type` (`local_shell` and `web_search`
    /// have none, and one of each is all a request can declare); the description its
    /// `description` or empty; `parameters` `{"type": "object"}`, never sent. The definition
    /// sits in [`extra`](Self::extra) under `responsesTool`, so the log keeps it and a changed
    /// grammar is a changed tool.
    ///
    /// ```
    /// use mektpoy::ToolSchema;
    /// let def = serde_json::json!({"type": "custom", "name": "apply_patch", "format": {"type": "text"}});
    /// let t = ToolSchema::from_responses_tool(def.as_object().unwrap().clone())?;
    /// assert_eq!(t.name(), "apply_patch");
    /// assert_eq!(t.responses_tool(), def.as_object());
    /// let shell = ToolSchema::from_responses_tool(serde_json::json!({"type": "local_shell"}).as_object().unwrap().clone())?;
    /// assert_eq!(shell.name(), "local_shell");
    /// # Ok::<(), mektpoy::vocab::ToolError>(())
    /// ```
    ///
    /// # Errors
    /// [`ToolError::Field`] when `type` is not a string or is `function` (a function is an
    /// ordinary schema), or when `name` or `description` is present and not a string;
    /// [`ToolError::EmptyName`] for an empty name.
    pub fn from_responses_tool(definition: Map<String, Value>) -> Result<Self, ToolError> {
        let name = match (definition.get("name"), definition.get("type")) {
            (_, Some(Value::String(t))) if t == "function" => return Err(ToolError::Field("type")),
            (Some(Value::String(n)), Some(Value::String(_))) => n.clone(),
            (Some(_), Some(Value::String(_))) => return Err(ToolError::Field("name")),
            (None, Some(Value::String(t))) => t.clone(),
            (_, _) => return Err(ToolError::Field("type")),
        };
        if name.is_empty() {
            return Err(ToolError::EmptyName);
        }
        let description = match definition.get("description") {
            None => String::new(),
            Some(Value::String(d)) => d.clone(),
            Some(_) => return Err(ToolError::Field("description")),
        };
        let mut parameters = Map::new();
        parameters.insert("type".to_owned(), Value::String("object".to_owned()));
        let mut extra = IndexMap::new();
        extra.insert(RESPONSES_TOOL.to_owned(), Value::Object(definition));
        Ok(ToolSchema {
            def: Arc::new(ToolDef::new(name, description, parameters, extra)),
            defer_loading: false,
        })
    }

    /// The Responses API definition of a tool made by
    /// [`from_responses_tool`](Self::from_responses_tool) (or read back from its log line),
    /// `None` for a function.
    ///
    /// ```
    /// use mektpoy::ToolSchema;
    /// let def = serde_json::json!({"type": "web_search"});
    /// let search = ToolSchema::from_responses_tool(def.as_object().unwrap().clone())?;
    /// assert_eq!(search.responses_tool(), def.as_object());
    /// assert_eq!(ToolSchema::no_input("read", "").responses_tool(), None, "a function");
    /// # Ok::<(), mektpoy::vocab::ToolError>(())
    /// ```
    pub fn responses_tool(&self) -> Option<&Map<String, Value>> {
        self.def
            .extra
            .get(RESPONSES_TOOL)
            .and_then(Value::as_object)
    }

    /// The same definition with `defer_loading` set to `on`. O(1): the definition is shared.
    ///
    /// ```
    /// use mektpoy::ToolSchema;
    /// let read = ToolSchema::no_input("read", "Read a file");
    /// let deferred = read.with_defer_loading(true);
    /// assert!(deferred.defer_loading() && deferred.shares_definition_with(&read));
    /// assert!(!deferred.same_tool(&read) && deferred.same_definition(&read));
    /// ```
    #[must_use]
    pub fn with_defer_loading(&self, on: bool) -> Self {
        ToolSchema {
            def: Arc::clone(&self.def),
            defer_loading: on,
        }
    }

    /// The tool's name, unique within one header.
    ///
    /// ```
    /// use mektpoy::ToolSchema;
    /// assert_eq!(ToolSchema::no_input("read", "Read a file").name(), "read");
    /// ```
    pub fn name(&self) -> &str {
        &self.def.name
    }

    /// [`NameKey`] of the name, computed when the schema was built.
    pub(crate) fn name_key(&self) -> NameKey {
        self.def.name_key
    }

    /// The description sent to the model.
    ///
    /// ```
    /// use mektpoy::ToolSchema;
    /// assert_eq!(ToolSchema::no_input("read", "Read a file").description(), "Read a file");
    /// ```
    pub fn description(&self) -> &str {
        &self.def.description
    }

    /// The JSON Schema of the arguments (always an object).
    ///
    /// ```
    /// use mektpoy::ToolSchema;
    /// assert_eq!(ToolSchema::no_input("read", "").parameters()["type"], "object");
    /// ```
    pub fn parameters(&self) -> &Map<String, Value> {
        &self.def.parameters
    }

    /// Whether the declaration is deferred: declared, but offered only once a history
    /// addition activates it.
    ///
    /// ```
    /// use mektpoy::ToolSchema;
    /// assert!(!ToolSchema::no_input("read", "").defer_loading());
    /// ```
    pub fn defer_loading(&self) -> bool {
        self.defer_loading
    }

    /// Fields this crate does not know, kept and written back in their order.
    ///
    /// ```
    /// use mektpoy::ToolSchema;
    /// let t = ToolSchema::from_value(serde_json::json!({"name": "read", "description": "", "parameters": {}, "annotations": {"readOnlyHint": true}}))?;
    /// assert_eq!(t.extra()["annotations"]["readOnlyHint"], true);
    /// # Ok::<(), mektpoy::vocab::ToolError>(())
    /// ```
    pub fn extra(&self) -> &IndexMap<String, Value> {
        &self.def.extra
    }

    /// Whether both have an equivalent definition, `defer_loading` aside.
    ///
    /// O(1) when they share an allocation (interned definitions do) or have different names;
    /// else it walks both, stopping at the first difference. A cached hash of each definition
    /// used to tell different ones apart first; measured alone it stayed within the run-to-run
    /// spread ([decision 154](crate::manual::decisions#decision-154)), so it went.
    ///
    /// ```
    /// use mektpoy::ToolSchema;
    /// let one = ToolSchema::from_value(serde_json::json!({"name": "n", "description": "", "parameters": {"max": 1}}))?;
    /// let spelled = ToolSchema::from_value(serde_json::json!({"name": "n", "description": "", "parameters": {"max": 1.0}}))?;
    /// assert!(one.same_definition(&spelled), "number spelling makes no change");
    /// assert!(!one.same_definition(&ToolSchema::no_input("n", "")));
    /// # Ok::<(), mektpoy::vocab::ToolError>(())
    /// ```
    pub fn same_definition(&self, other: &ToolSchema) -> bool {
        Arc::ptr_eq(&self.def, &other.def)
            || (self
                .def
                .name_key
                .same_name(other.def.name_key, &self.def.name, &other.def.name)
                && self.def.description == other.def.description
                && object_equivalent(&self.def.parameters, &other.def.parameters)
                && map_equivalent(&self.def.extra, &other.def.extra))
    }

    /// Whether both are *the same tool* ([reference
    /// §1](crate::manual::reference#1-vocabulary-and-json)): every field equivalent.
    ///
    /// ```
    /// use mektpoy::ToolSchema;
    /// let read = ToolSchema::no_input("read", "");
    /// assert!(read.same_tool(&ToolSchema::no_input("read", "")));
    /// assert!(!read.same_tool(&read.with_defer_loading(true)));
    /// ```
    pub fn same_tool(&self, other: &ToolSchema) -> bool {
        self.defer_loading == other.defer_loading && self.same_definition(other)
    }

    /// Whether two schemas share one definition allocation (one is a clone of the other, or
    /// both were taken from the same snapshot), whatever their `defer_loading`. O(1): a cheap
    /// identity check before a [`same_definition`](Self::same_definition) comparison, e.g. to
    /// reuse what was computed for a definition last time, as [`Message::ptr_eq`] does for
    /// messages.
    ///
    /// [`Message::ptr_eq`]: crate::Message::ptr_eq
    ///
    /// ```
    /// use mektpoy::ToolSchema;
    /// let read = ToolSchema::no_input("read", "");
    /// assert!(read.shares_definition_with(&read.clone()));
    /// assert!(!read.shares_definition_with(&ToolSchema::no_input("read", "")), "equal, not shared");
    /// ```
    pub fn shares_definition_with(&self, other: &ToolSchema) -> bool {
        Arc::ptr_eq(&self.def, &other.def)
    }
}

/// The tool name the wire serializer reserves for its deferred placeholder declaration ([reference
/// §7](crate::manual::reference#7-wire-serialization)). Reserved on every route: the recorder
/// refuses to register it, the serializers refuse projected tools that carry it, and
/// `validate_tool_call` treats a call of it as unknown.
pub const DEFERRED_PLACEHOLDER_NAME: &str = "mektpoy_deferred_placeholder";

/// The tools of one header by name, built once when the header joins the log and shared
/// (behind an `Arc`) by validation and by the fold records (a developer message's names are
/// resolved through it once, at append): every developer message naming that header then looks
/// its tools up in O(1), however many tools the header has. Rebuilding an index per
/// message made checking one cost O(tools of the header) (115 µs against 10,000 tools).
///
/// The set holds the schemas themselves (an O(1) clone each), hashed and compared by name, so
/// no name is copied: about 20 bytes per tool, the order of the header's own tool slice. It is
/// built eagerly (O(tools), the size of the header event) rather than on the first message that
/// names the header, so that no single check costs more than its event.
#[derive(Default)]
pub(crate) struct ToolIndex {
    tools: std::collections::HashSet<ByName>,
}

impl ToolIndex {
    /// Indexes `tools`. O(tools). Of two tools with one name the first stays (validation
    /// refuses such a header before it is indexed).
    pub fn new(tools: &[ToolSchema]) -> Self {
        let mut index = std::collections::HashSet::with_capacity(tools.len());
        for t in tools {
            if !index.contains(t.name()) {
                index.insert(ByName(t.clone()));
            }
        }
        ToolIndex { tools: index }
    }

    /// The tool named `name`. O(1).
    pub fn get(&self, name: &str) -> Option<&ToolSchema> {
        self.tools.get(name).map(|b| &b.0)
    }

    /// Whether a tool is named `name`. O(1).
    pub fn contains(&self, name: &str) -> bool {
        self.tools.contains(name)
    }
}

/// A schema hashed and compared by its name alone, so that a set of them is looked up by `&str`.
struct ByName(ToolSchema);

impl std::borrow::Borrow<str> for ByName {
    fn borrow(&self) -> &str {
        self.0.name()
    }
}

impl std::hash::Hash for ByName {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        // As `str` hashes, which `Borrow<str>` requires.
        self.0.name().hash(state);
    }
}

impl PartialEq for ByName {
    fn eq(&self, other: &Self) -> bool {
        self.0.name() == other.0.name()
    }
}

impl Eq for ByName {}

/// The tool definitions of one log, one allocation each: a header's tool whose definition is
/// written exactly as one already in the log shares that one's allocation, and its own is
/// dropped ([decision 76](crate::manual::decisions#decision-76)).
///
/// Sharing is decided on the *written form*, not on [reference
/// §1](crate::manual::reference#1-vocabulary-and-json) equivalence alone: two equivalent
/// definitions spelled differently (unknown fields in another order, `1.0` for `1`, or, with
/// serde_json's `preserve_order`, object keys in another order) keep their own allocations, because
/// a definition is written back from its allocation (an appended event's line, every wire's tool
/// list) and sharing would change those bytes. The written form implies §1 equivalence, so sharing
/// never changes what the folds decide.
///
/// Persistent (`imbl`), so that it clones in O(1) with the log's state and a refused batch
/// leaves no definition behind.
#[derive(Clone, Default)]
pub(crate) struct ToolInterner {
    /// The interned definitions by the hash of their written form (one per hash but for
    /// collisions).
    by_form: imbl::HashMap<u64, imbl::Vector<ToolSchema>>,
    /// The addresses of the interned definitions: a tool found here is interned already, in
    /// O(1) and without hashing its definition (the interner holds each of them, so no other
    /// allocation can have its address while it is here).
    interned: imbl::HashSet<usize>,
}

impl ToolInterner {
    /// The schema to keep for `tool`: `None` when `tool` keeps its own definition (already
    /// interned, or the first of its written form, now interned), or the same tool (its own
    /// `defer_loading`) on the interned definition written as its own. O(1) when the
    /// definition is interned already, else O(size of the definition).
    pub fn intern(&mut self, tool: &ToolSchema) -> Option<ToolSchema> {
        let address = Arc::as_ptr(&tool.def) as usize;
        if self.interned.contains(&address) {
            return None;
        }
        let hash = form_hash(&tool.def);
        let bucket = self.by_form.entry(hash).or_default();
        if let Some(shared) = bucket.iter().find(|s| same_form(&s.def, &tool.def)) {
            return Some(shared.with_defer_loading(tool.defer_loading));
        }
        bucket.push_back(tool.with_defer_loading(false));
        self.interned.insert(address);
        None
    }

    /// The number of definitions interned.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.interned.len()
    }
}

/// A hash of how `def` is written: equal for definitions [`same_form`] finds the same.
fn form_hash(def: &ToolDef) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    def.name.hash(&mut h);
    def.description.hash(&mut h);
    hash_entries(def.parameters.iter(), def.parameters.len(), &mut h);
    hash_entries(def.extra.iter(), def.extra.len(), &mut h);
    h.finish()
}

fn hash_entries<'a, H: std::hash::Hasher>(
    entries: impl Iterator<Item = (&'a String, &'a Value)>,
    len: usize,
    h: &mut H,
) {
    use std::hash::Hash;
    len.hash(h);
    for (k, v) in entries {
        k.hash(h);
        hash_value(v, h);
    }
}

fn hash_value<H: std::hash::Hasher>(v: &Value, h: &mut H) {
    use std::hash::Hash;
    match v {
        Value::Null => 0u8.hash(h),
        Value::Bool(b) => (1u8, b).hash(h),
        Value::Number(n) => {
            2u8.hash(h);
            // Integers by value, floats by their bits (so `-0.0` is not `0.0`); under
            // `arbitrary_precision`, spellings of one float hash alike and `same_form` parts
            // them.
            match (n.as_u64(), n.as_i64()) {
                (Some(u), _) => (0u8, u).hash(h),
                (None, Some(i)) => (1u8, i).hash(h),
                _ => (2u8, n.as_f64().map(f64::to_bits)).hash(h),
            }
        }
        Value::String(s) => (3u8, s).hash(h),
        Value::Array(items) => {
            (4u8, items.len()).hash(h);
            for item in items {
                hash_value(item, h);
            }
        }
        Value::Object(map) => {
            5u8.hash(h);
            hash_entries(map.iter(), map.len(), h);
        }
    }
}

/// Whether `a` and `b` are written alike: the same fields in the same order, numbers of the same
/// kind and spelling. Stricter than [reference §1](crate::manual::reference#1-vocabulary-and-json)
/// equivalence (which it implies).
fn same_form(a: &ToolDef, b: &ToolDef) -> bool {
    a.name == b.name
        && a.description == b.description
        && same_entries(
            a.parameters.iter(),
            b.parameters.iter(),
            a.parameters.len(),
            b.parameters.len(),
        )
        && same_entries(a.extra.iter(), b.extra.iter(), a.extra.len(), b.extra.len())
}

fn same_entries<'a>(
    a: impl Iterator<Item = (&'a String, &'a Value)>,
    b: impl Iterator<Item = (&'a String, &'a Value)>,
    a_len: usize,
    b_len: usize,
) -> bool {
    a_len == b_len
        && a.zip(b)
            .all(|((ka, va), (kb, vb))| ka == kb && same_value(va, vb))
}

fn same_value(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            // `==` compares the kind (integer or float) and, under `arbitrary_precision`, the
            // spelling; the bits tell `-0.0` from `0.0`, which `==` does not.
            x == y && (!x.is_f64() || x.as_f64().map(f64::to_bits) == y.as_f64().map(f64::to_bits))
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same_value(a, b))
        }
        (Value::Object(x), Value::Object(y)) => same_entries(x.iter(), y.iter(), x.len(), y.len()),
        (Value::Null, Value::Null) => true,
        (Value::Bool(x), Value::Bool(y)) => x == y,
        (Value::String(x), Value::String(y)) => x == y,
        _ => false,
    }
}

/// Whether two tool lists are the same tools in the same order ([reference
/// §4](crate::manual::reference#4-recording-a-request) step 5).
pub(crate) fn same_tools(a: &[ToolSchema], b: &[ToolSchema]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.same_tool(y))
}

impl PartialEq for ToolSchema {
    fn eq(&self, other: &Self) -> bool {
        self.same_tool(other)
    }
}

impl fmt::Debug for ToolSchema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("ToolSchema");
        d.field("name", &self.def.name);
        if self.defer_loading {
            d.field("defer_loading", &true);
        }
        d.finish_non_exhaustive()
    }
}

/// `{"name","description","parameters","deferLoading"?,...unknown fields}`: the log's order.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ToolLine<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a Map<String, Value>,
    #[serde(skip_serializing_if = "is_false")]
    defer_loading: bool,
    #[serde(flatten)]
    extra: &'a IndexMap<String, Value>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

// Derived on [`ToolLine`] (the definition is shared behind an `Arc` apart from
// `deferLoading`).
impl Serialize for ToolSchema {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let def = &self.def;
        ToolLine {
            name: &def.name,
            description: &def.description,
            parameters: &def.parameters,
            defer_loading: self.defer_loading,
            extra: &def.extra,
        }
        .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for ToolSchema {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // Read keys in document order so unknown fields keep theirs.
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = ToolSchema;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a tool object")
            }
            fn visit_map<A: MapAccess<'de>>(self, access: A) -> Result<ToolSchema, A::Error> {
                let entries = Entries::read(access, &Strict::default())?;
                ToolSchema::from_entries(entries.list).map_err(de::Error::custom)
            }
        }
        deserializer.deserialize_map(V)
    }
}

/// Decodes one tool straight from the text, without a `Value` of the tool: `Ok(Err(..))` when
/// it is malformed, `Err` for a syntax fault or a duplicate key.
#[derive(Clone, Copy)]
pub(crate) struct ToolSeed<'c>(pub &'c Strict);

impl<'de> DeserializeSeed<'de> for ToolSeed<'_> {
    type Value = Result<ToolSchema, ToolError>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl Strictly for ToolSeed<'_> {
    fn strict(&self) -> &Strict {
        self.0
    }
}

impl<'de> Visitor<'de> for ToolSeed<'_> {
    type Value = Result<ToolSchema, ToolError>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a tool object")
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        Ok(ToolSchema::from_entries(Entries::read(map, self.0)?.list))
    }
    wrong_shape!(object, |_| Err(ToolError::NotAnObject));
}

/// Why a value is not a tool declaration.
///
/// ```
/// use mektpoy::ToolSchema;
/// use mektpoy::vocab::ToolError;
/// assert_eq!(ToolSchema::from_value(serde_json::json!([])).unwrap_err(), ToolError::NotAnObject);
/// let no_params = serde_json::json!({"name": "read", "description": ""});
/// assert_eq!(ToolSchema::from_value(no_params).unwrap_err(), ToolError::Field("parameters"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ToolError {
    /// The tool is not a JSON object.
    #[error("a tool must be a JSON object")]
    NotAnObject,
    /// A required field is missing or has the wrong type.
    #[error(
        "tool field `{0}` is missing or has the wrong type (name and description are strings, parameters an object, deferLoading a boolean)"
    )]
    Field(&'static str),
    /// The name is the empty string, which no provider accepts and no call can name.
    #[error("the tool name is empty")]
    EmptyName,
    /// An MCP tool entry ([`ToolSchema::from_mcp`]) whose field is missing or has the wrong
    /// type.
    #[error(
        "MCP tool field `{0}` is missing or has the wrong type (name is a string, description a string when present, inputSchema an object)"
    )]
    McpField(&'static str),
    /// An MCP tool entry ([`ToolSchema::from_mcp`]) holding a key that is not an MCP tool
    /// field but one of the log's own (`parameters`, `deferLoading`) or the Messages API's
    /// schema key (`input_schema`): kept as an unknown field, it would shadow that field.
    #[error("MCP tool entry holds `{0}`, which is not an MCP tool field but the log's or a wire's")]
    McpReservedKey(String),
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(v: Value) -> ToolSchema {
        ToolSchema::from_value(v).unwrap()
    }

    #[test]
    fn unknown_fields_kept_in_order_and_written_back() {
        let text = r#"{"name":"a","zeta":1,"description":"d","parameters":{},"alpha":{"x":2}}"#;
        let t: ToolSchema = serde_json::from_str(text).unwrap();
        assert_eq!(t.extra().keys().collect::<Vec<_>>(), ["zeta", "alpha"]);
        assert_eq!(
            serde_json::to_string(&t).unwrap(),
            r#"{"name":"a","description":"d","parameters":{},"zeta":1,"alpha":{"x":2}}"#
        );
    }

    #[test]
    fn defer_loading_written_only_when_true() {
        let t = tool(json!({"name":"a","description":"d","parameters":{},"deferLoading":false}));
        assert!(!serde_json::to_string(&t).unwrap().contains("deferLoading"));
        let d = t.with_defer_loading(true);
        assert!(
            serde_json::to_string(&d)
                .unwrap()
                .ends_with(r#""deferLoading":true}"#)
        );
        assert!(d.shares_definition_with(&t));
        assert!(!d.same_tool(&t) && d.same_definition(&t));
    }

    /// The definition as [reference §1](crate::manual::reference#1-vocabulary-and-json) compares
    /// it, walking both definitions: what `same_definition` must answer.
    fn equivalent_by_walk(a: &ToolSchema, b: &ToolSchema) -> bool {
        a.name() == b.name()
            && a.description() == b.description()
            && object_equivalent(a.parameters(), b.parameters())
            && map_equivalent(a.extra(), b.extra())
    }

    /// A JSON value of a few levels, with small numbers (so that spellings collide often).
    fn json_value() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            (-3i64..4).prop_map(|i| json!(i)),
            prop_oneof![Just(0.5f64), Just(-0.0), Just(2.0), Just(1e300)].prop_map(|f| json!(f)),
            "[ab]{0,2}".prop_map(Value::String),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
                proptest::collection::btree_map("[abc]", inner, 0..3)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    /// The same value respelled: integers as floats where exact, object keys reversed (which
    /// changes the order under `preserve_order`).
    fn respelled(v: &Value) -> Value {
        match v {
            Value::Number(n) => match n.as_i64() {
                Some(i) if i.unsigned_abs() < 1 << 52 => json!(i as f64),
                _ => v.clone(),
            },
            Value::Array(items) => Value::Array(items.iter().map(respelled).collect()),
            Value::Object(map) => Value::Object(
                map.iter()
                    .rev()
                    .map(|(k, v)| (k.clone(), respelled(v)))
                    .collect(),
            ),
            _ => v.clone(),
        }
    }

    fn tool_of(name: &str, parameters: &Value, extra: &Value) -> ToolSchema {
        let mut fields = vec![
            ("name".to_owned(), json!(name)),
            ("description".to_owned(), json!("d")),
            ("parameters".to_owned(), json!({ "p": parameters })),
        ];
        fields.push(("x".to_owned(), extra.clone()));
        ToolSchema::from_entries(fields).unwrap()
    }

    proptest::proptest! {
        /// `same_definition` answers exactly as the walk over both definitions does, for
        /// equivalent (respelled, in another key order) and unrelated pairs alike.
        #[test]
        fn same_definition_answers_as_the_walk_does(
            a in json_value(),
            b in json_value(),
            x in json_value(),
            same_name in proptest::bool::ANY,
        ) {
            let left = tool_of("t", &a, &x);
            let right = tool_of("t", &respelled(&a), &respelled(&x));
            proptest::prop_assert!(equivalent_by_walk(&left, &right));
            proptest::prop_assert!(left.same_definition(&right) && right.same_definition(&left));
            let other = tool_of(if same_name { "t" } else { "u" }, &b, &x);
            proptest::prop_assert_eq!(left.same_definition(&other), equivalent_by_walk(&left, &other));
            proptest::prop_assert_eq!(other.same_definition(&left), equivalent_by_walk(&other, &left));
        }
    }

    #[test]
    fn name_keys_are_the_names_and_tell_them_apart() {
        let long = "a_tool_name_of_more_than_fifteen_bytes";
        let names: Vec<String> = (0..300)
            .map(|i| format!("tool_{i}"))
            .chain((0..300).map(|i| format!("{long}_{i}")))
            .chain(
                [
                    "",
                    "a",
                    "a\0",
                    "b",
                    "ab",
                    "ba",
                    "fifteen_bytes_x",
                    "sixteen_bytes_xy",
                ]
                .map(String::from),
            )
            .collect();
        let mut seen = std::collections::HashMap::new();
        for n in &names {
            let key = NameKey::of(n);
            assert_eq!(key.is_exact(), n.len() < 16, "{n:?}");
            assert!(key.same_name(NameKey::of(&n.clone()), n, &n.clone()));
            if !n.is_empty() {
                let t = ToolSchema::new(n.clone(), "", Map::new());
                assert_eq!(t.name_key(), key, "{n}");
                assert_eq!(t.with_defer_loading(true).name_key(), key);
            }
            assert_eq!(seen.insert(key, n), None, "{n:?} shares a key");
        }
        // Distinct names are never the same name, even on a (forced) equal key.
        for (a, b) in [("a", "a\0"), ("", "\0"), (long, "x")] {
            assert!(
                !NameKey::of(a).same_name(NameKey::of(b), a, b),
                "{a:?} {b:?}"
            );
        }
        let (x, y) = (format!("{long}1"), format!("{long}2"));
        assert!(
            !NameKey::of(&x).same_name(NameKey::of(&x), &x, &y),
            "a long key compares the bytes"
        );
    }

    #[test]
    fn sameness_ignores_key_order_and_number_spelling() {
        let a =
            tool(json!({"name":"a","description":"d","parameters":{"m":1,"n":{"p":[1]}},"x":1}));
        let b: ToolSchema = serde_json::from_str(
            r#"{"x":1.0,"parameters":{"n":{"p":[1.0e0]},"m":1.0},"description":"d","name":"a"}"#,
        )
        .unwrap();
        assert_eq!(a, b);
        let c =
            tool(json!({"name":"a","description":"d","parameters":{"m":1,"n":{"p":[1]}},"x":2}));
        assert_ne!(a, c, "an unknown field is part of the tool");
    }

    #[test]
    fn the_interner_shares_definitions_written_alike_and_only_those() {
        let text = r#"{"name":"a","description":"d","parameters":{"m":1,"n":{"p":[1.5,-2]}},"x":1,"y":null}"#;
        let parse = |t: &str| serde_json::from_str::<ToolSchema>(t).unwrap();
        let mut interner = ToolInterner::default();
        let first = parse(text);
        assert!(
            interner.intern(&first).is_none(),
            "the first of its form is kept"
        );
        assert!(interner.intern(&first).is_none(), "interned already");
        assert!(interner.intern(&first.clone()).is_none());
        // An equal copy (another header's) gets the first one's allocation, with its own
        // deferLoading.
        let copy = parse(text);
        let shared = interner.intern(&copy).expect("a copy is replaced");
        assert!(shared.shares_definition_with(&first) && shared.same_tool(&copy));
        let deferred = parse(&text.replace(r#""y":null"#, r#""deferLoading":true,"y":null"#));
        let shared = interner
            .intern(&deferred)
            .expect("deferLoading aside, the same form");
        assert!(shared.shares_definition_with(&first) && shared.defer_loading());
        assert_eq!(
            serde_json::to_string(&shared).unwrap(),
            serde_json::to_string(&deferred).unwrap()
        );
        // Equivalent but written otherwise (reference §1): kept apart, so that writing either
        // gives its own bytes.
        for respelled in [
            r#"{"name":"a","description":"d","parameters":{"m":1,"n":{"p":[1.5,-2]}},"y":null,"x":1}"#,
            r#"{"name":"a","description":"d","parameters":{"m":1.0,"n":{"p":[1.5,-2]}},"x":1,"y":null}"#,
            r#"{"name":"a","description":"d","parameters":{"m":1,"n":{"p":[1.5,-2]}},"x":1.0,"y":null}"#,
        ] {
            let other = parse(respelled);
            assert!(other.same_definition(&first), "{respelled}");
            assert!(
                interner.intern(&other).is_none(),
                "{respelled} is a form of its own"
            );
            let written = serde_json::to_string(&other).unwrap();
            let again = interner.intern(&parse(respelled)).expect("then interned");
            assert_eq!(serde_json::to_string(&again).unwrap(), written);
        }
        // Zero and minus zero are written apart; other definitions are not shared.
        let zero = parse(r#"{"name":"z","description":"","parameters":{"v":0.0}}"#);
        let minus = parse(r#"{"name":"z","description":"","parameters":{"v":-0.0}}"#);
        assert!(interner.intern(&zero).is_none() && interner.intern(&minus).is_none());
        for other in [
            r#"{"name":"b","description":"d","parameters":{"m":1,"n":{"p":[1.5,-2]}},"x":1,"y":null}"#,
            r#"{"name":"a","description":"e","parameters":{"m":1,"n":{"p":[1.5,-2]}},"x":1,"y":null}"#,
            r#"{"name":"a","description":"d","parameters":{"m":1,"n":{"p":[-2,1.5]}},"x":1,"y":null}"#,
            r#"{"name":"a","description":"d","parameters":{"m":1,"n":{"p":[1.5,-2]}},"x":1}"#,
        ] {
            assert!(interner.intern(&parse(other)).is_none(), "{other}");
        }
        assert_eq!(interner.len(), 1 + 3 + 2 + 4);
    }

    /// A `tools/list` entry as an MCP server sends it: no description, a title, annotations,
    /// an output schema and `_meta`.
    fn mcp_entry() -> Value {
        json!({
            "name": "search_issues",
            "title": "Search issues",
            "inputSchema": {
                "type": "object",
                "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}},
                "required": ["query"],
                "additionalProperties": false
            },
            "outputSchema": {"type": "object", "properties": {"total": {"type": "number"}}},
            "annotations": {"title": "Search", "readOnlyHint": true, "openWorldHint": true},
            "_meta": {"vendor.example/rev": 3}
        })
    }

    #[test]
    fn mcp_entries_become_tools_and_stay_stable() {
        let t = ToolSchema::from_mcp(mcp_entry()).unwrap();
        assert_eq!(t.name(), "search_issues");
        assert_eq!(
            t.description(),
            "",
            "a missing description is the empty string"
        );
        assert_eq!(t.parameters()["required"], json!(["query"]));
        assert!(!t.defer_loading());
        let mut kept: Vec<_> = t.extra().keys().map(String::as_str).collect();
        kept.sort_unstable();
        assert_eq!(kept, ["_meta", "annotations", "outputSchema", "title"]);
        // Same entry, same tool; its log line reads back as the same tool.
        let again = ToolSchema::from_mcp(mcp_entry()).unwrap();
        assert!(t.same_tool(&again) && t.same_definition(&again));
        let line = serde_json::to_string(&t).unwrap();
        assert!(line.starts_with(r#"{"name":"search_issues","description":"","parameters":{"#));
        let back: ToolSchema = serde_json::from_str(&line).unwrap();
        assert!(back.same_tool(&t));
        assert_eq!(serde_json::to_string(&back).unwrap(), line);
        // Key order and number spelling make no change; a changed annotation does.
        let respelled: Value = serde_json::from_str(
            r#"{"_meta":{"vendor.example/rev":3.0},"annotations":{"openWorldHint":true,"readOnlyHint":true,"title":"Search"},
                "outputSchema":{"properties":{"total":{"type":"number"}},"type":"object"},
                "inputSchema":{"additionalProperties":false,"required":["query"],"type":"object",
                  "properties":{"limit":{"type":"integer"},"query":{"type":"string"}}},
                "title":"Search issues","name":"search_issues"}"#,
        )
        .unwrap();
        assert!(ToolSchema::from_mcp(respelled).unwrap().same_definition(&t));
        let mut changed = mcp_entry();
        changed["annotations"]["readOnlyHint"] = json!(false);
        assert!(!ToolSchema::from_mcp(changed).unwrap().same_definition(&t));
        // A description, when the server gives one, is the description.
        let mut described = mcp_entry();
        described["description"] = json!("Full-text search");
        assert_eq!(
            ToolSchema::from_mcp(described).unwrap().description(),
            "Full-text search"
        );
    }

    #[test]
    fn malformed_mcp_entries_are_typed_errors() {
        let with = |key: &str, value: Value| {
            let mut e = mcp_entry();
            e[key] = value;
            ToolSchema::from_mcp(e).unwrap_err()
        };
        assert_eq!(with("name", json!(7)), ToolError::McpField("name"));
        assert_eq!(with("name", json!("")), ToolError::EmptyName);
        assert_eq!(
            with("description", json!(null)),
            ToolError::McpField("description")
        );
        assert_eq!(
            with("inputSchema", json!(null)),
            ToolError::McpField("inputSchema")
        );
        assert_eq!(
            with("inputSchema", json!([])),
            ToolError::McpField("inputSchema")
        );
        for key in ["parameters", "deferLoading", "input_schema"] {
            assert_eq!(
                with(key, json!({})),
                ToolError::McpReservedKey(key.to_owned())
            );
        }
        let mut no_schema = mcp_entry();
        no_schema.as_object_mut().unwrap().remove("inputSchema");
        assert_eq!(
            ToolSchema::from_mcp(no_schema).unwrap_err(),
            ToolError::McpField("inputSchema")
        );
        let mut no_name = mcp_entry();
        no_name.as_object_mut().unwrap().remove("name");
        assert_eq!(
            ToolSchema::from_mcp(no_name).unwrap_err(),
            ToolError::McpField("name")
        );
        assert_eq!(
            ToolSchema::from_mcp(json!("search_issues")).unwrap_err(),
            ToolError::NotAnObject
        );
    }

    #[test]
    fn malformed_tools_are_typed_errors() {
        for (v, e) in [
            (
                json!({"description":"d","parameters":{}}),
                ToolError::Field("name"),
            ),
            (
                json!({"name":"a","parameters":{}}),
                ToolError::Field("description"),
            ),
            (
                json!({"name":"a","description":"d"}),
                ToolError::Field("parameters"),
            ),
            (
                json!({"name":"a","description":"d","parameters":[]}),
                ToolError::Field("parameters"),
            ),
            (
                json!({"name":1,"description":"d","parameters":{}}),
                ToolError::Field("name"),
            ),
            (
                json!({"name":"a","description":"d","parameters":{},"deferLoading":"yes"}),
                ToolError::Field("deferLoading"),
            ),
            (json!("a"), ToolError::NotAnObject),
        ] {
            assert_eq!(ToolSchema::from_value(v.clone()).unwrap_err(), e, "{v}");
        }
    }
}
