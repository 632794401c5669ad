//! `ToolSchema`: one tool declaration as the log records it (reference §1).
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

/// One tool declaration: `{"name","description","parameters","deferLoading"?, ...}`.
///
/// Unknown fields (MCP `title`, `annotations`, …) are kept in [`extra`](Self::extra), in
/// their order, and written back. Cloning is O(1). Equality (`==`) is reference §1 equivalence:
/// *the same tool* when every field is equivalent, unknown ones included, so key order and
/// number spelling never make a change.
#[derive(Clone)]
pub struct ToolSchema {
    def: Arc<ToolDef>,
    defer_loading: bool,
}

struct ToolDef {
    name: String,
    description: String,
    parameters: Map<String, Value>,
    extra: IndexMap<String, Value>,
}

impl ToolSchema {
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
            def: Arc::new(ToolDef {
                name: name.into(),
                description: description.into(),
                parameters,
                extra: IndexMap::new(),
            }),
            defer_loading: false,
        }
    }

    /// Decodes a tool from its log JSON, keeping unknown fields.
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
            def: Arc::new(ToolDef {
                name: name.ok_or(ToolError::Field("name"))?,
                description: description.ok_or(ToolError::Field("description"))?,
                parameters: parameters.ok_or(ToolError::Field("parameters"))?,
                extra,
            }),
            defer_loading,
        })
    }

    /// The same definition with `defer_loading` set to `on`. O(1): the definition is shared.
    #[must_use]
    pub fn with_defer_loading(&self, on: bool) -> Self {
        ToolSchema {
            def: Arc::clone(&self.def),
            defer_loading: on,
        }
    }

    /// The tool's name, unique within one header.
    pub fn name(&self) -> &str {
        &self.def.name
    }

    /// The description sent to the model.
    pub fn description(&self) -> &str {
        &self.def.description
    }

    /// The JSON Schema of the arguments (always an object).
    pub fn parameters(&self) -> &Map<String, Value> {
        &self.def.parameters
    }

    /// Whether the declaration is deferred: declared, but offered only once a history
    /// addition activates it.
    pub fn defer_loading(&self) -> bool {
        self.defer_loading
    }

    /// Fields this crate does not know, kept and written back in their order.
    pub fn extra(&self) -> &IndexMap<String, Value> {
        &self.def.extra
    }

    /// Whether both have an equivalent definition, `defer_loading` aside.
    pub fn same_definition(&self, other: &ToolSchema) -> bool {
        Arc::ptr_eq(&self.def, &other.def)
            || (self.def.name == other.def.name
                && self.def.description == other.def.description
                && object_equivalent(&self.def.parameters, &other.def.parameters)
                && map_equivalent(&self.def.extra, &other.def.extra))
    }

    /// Whether both are *the same tool* (reference §1): every field equivalent.
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
    pub fn shares_definition_with(&self, other: &ToolSchema) -> bool {
        Arc::ptr_eq(&self.def, &other.def)
    }
}

/// The tool name the wire serializer reserves for its deferred placeholder declaration
/// (reference §7). Reserved on every route: the recorder refuses to register it, the serializers
/// refuse projected tools that carry it, and `validate_tool_call` treats a call of it as unknown.
pub const DEFERRED_PLACEHOLDER_NAME: &str = "mektpoy_deferred_placeholder";

/// The tools of one header by name, built once when the header joins the log and shared
/// (behind an `Arc`) by validation and by both folds: every developer message naming that header
/// then looks its tools up in O(1), however many tools the header has. Rebuilding an index per
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

/// Whether two tool lists are the same tools in the same order (reference §4 step 5).
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
