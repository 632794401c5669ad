//! Messages and their content blocks ([reference
//! §1](crate::manual::reference#1-vocabulary-and-json)).
//!
//! `Message` is a shared handle: the surface, snapshots and projections pass messages around on
//! every step, and a projection must never deep-copy one. Decoding is strict for the block
//! types this crate knows (a `tool-call` without an `id` is an error, not an unknown block) and
//! keeps every other block verbatim, in place.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use indexmap::IndexMap;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, Visitor};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::ToolSchema;
use super::strict::{Entries, Strict, StrictValue, Strictly, wrong_shape};

/// Who speaks a message. The event type follows from it (`tool` → `tool/result`).
///
/// ```
/// use mektpoy::Message;
/// use mektpoy::vocab::Role;
/// assert_eq!(Message::user("u1", "hi").role(), Role::User);
/// assert_eq!(Role::Tool.event_type(), "tool/result");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    /// A system prompt node (`system/message`).
    System,
    /// A durable note to the model, such as a tool change (`developer/message`).
    Developer,
    /// The user (`user/message`).
    User,
    /// The model (`assistant/message`).
    Assistant,
    /// A tool result (`tool/result`).
    Tool,
}

impl Role {
    /// The log event type that carries a message of this role.
    ///
    /// ```
    /// use mektpoy::vocab::Role;
    /// assert_eq!(Role::Assistant.event_type(), "assistant/message");
    /// ```
    pub fn event_type(self) -> &'static str {
        match self {
            Role::System => "system/message",
            Role::Developer => "developer/message",
            Role::User => "user/message",
            Role::Assistant => "assistant/message",
            Role::Tool => "tool/result",
        }
    }

    /// The role a message event type carries, if it is one (the log decoder's).
    pub(crate) fn for_event_type(event_type: &str) -> Option<Role> {
        Role::ALL.into_iter().find(|r| r.event_type() == event_type)
    }

    /// The JSON spelling.
    ///
    /// ```
    /// use mektpoy::vocab::Role;
    /// assert_eq!(Role::System.as_str(), "system");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::Developer => "developer",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }

    const ALL: [Role; 5] = [
        Role::System,
        Role::Developer,
        Role::User,
        Role::Assistant,
        Role::Tool,
    ];

    /// The role of a JSON spelling (the inverse of [`as_str`](Self::as_str)).
    pub(crate) fn from_str_opt(s: &str) -> Option<Role> {
        Role::ALL.into_iter().find(|r| r.as_str() == s)
    }
}

// Hand-written, as is `Deserialize`: the spelling is [`Role::as_str`], the one table
// decoding reads too.
impl Serialize for Role {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Role {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = Cow::<str>::deserialize(d)?;
        Role::from_str_opt(&s).ok_or_else(|| de::Error::custom(format_args!("unknown role `{s}`")))
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a message came from: `{"kind": ...}`.
///
/// ```
/// use mektpoy::Message;
/// use mektpoy::vocab::MessageSource;
/// let answer = Message::assistant("a1", "hi", "deepseek", "deepseek-flash");
/// assert_eq!(answer.source(), &MessageSource::Model { provider: "deepseek".into(), model: "deepseek-flash".into() });
/// assert_eq!(Message::tool_result("r1", "c1", "ok").source(), &MessageSource::Tool { call_id: "c1".into() });
/// ```
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum MessageSource {
    /// `{"kind":"user"}`.
    User,
    /// `{"kind":"model","provider","model"}`.
    Model {
        /// Provider that produced the message.
        provider: String,
        /// Model that produced the message.
        model: String,
    },
    /// `{"kind":"tool","callId"}`: the result of the call with this id.
    Tool {
        /// The `tool-call` block's id.
        call_id: String,
    },
    /// `{"kind":"tool-registry"}`: a tool change written by the recorder.
    ToolRegistry,
    /// `{"kind":"system-prompt"}`: a system prompt node.
    SystemPrompt,
    /// Any other kind, kept verbatim. Built only by [`MessageSource::other`] or decoding, so
    /// its `kind` is never a known one.
    Other(OtherSource),
}

/// A message source of a kind this crate does not know: a JSON object whose `kind` is a string
/// other than the known kinds, kept verbatim (key order included).
///
/// There is no way to build one holding a known kind: [`MessageSource::other`] refuses it, and
/// decoding reads a known kind as its typed variant.
///
/// ```
/// use mektpoy::vocab::MessageSource;
/// let source = MessageSource::from_value(serde_json::json!({"kind": "cron", "job": "nightly"}))?;
/// let MessageSource::Other(other) = source else { panic!() };
/// assert_eq!((other.kind(), other.get("job")), ("cron", Some(&serde_json::json!("nightly"))));
/// # Ok::<(), mektpoy::vocab::SourceError>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct OtherSource {
    fields: Map<String, Value>,
}

impl OtherSource {
    /// Its `kind`.
    ///
    /// ```
    /// use mektpoy::vocab::MessageSource;
    /// let MessageSource::Other(other) = MessageSource::from_value(serde_json::json!({"kind": "cron"}))? else { panic!() };
    /// assert_eq!(other.kind(), "cron");
    /// # Ok::<(), mektpoy::vocab::SourceError>(())
    /// ```
    #[must_use]
    pub fn kind(&self) -> &str {
        // Checked when built: `kind` is a string.
        self.fields
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or("")
    }

    /// Every field, `kind` included, in order.
    ///
    /// ```
    /// use mektpoy::vocab::MessageSource;
    /// let value = serde_json::json!({"kind": "cron", "job": "nightly"});
    /// let MessageSource::Other(other) = MessageSource::from_value(value)? else { panic!() };
    /// assert_eq!((other.fields().len(), &other.fields()["job"]), (2, &serde_json::json!("nightly")));
    /// # Ok::<(), mektpoy::vocab::SourceError>(())
    /// ```
    #[must_use]
    pub fn fields(&self) -> &Map<String, Value> {
        &self.fields
    }

    /// The field `key`, if present.
    ///
    /// ```
    /// use mektpoy::vocab::MessageSource;
    /// let value = serde_json::json!({"kind": "cron", "job": "nightly"});
    /// let MessageSource::Other(other) = MessageSource::from_value(value)? else { panic!() };
    /// assert_eq!(other.get("job"), Some(&serde_json::json!("nightly")));
    /// assert_eq!(other.get("missing"), None);
    /// # Ok::<(), mektpoy::vocab::SourceError>(())
    /// ```
    #[must_use]
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.fields.get(key)
    }

    /// The source as a JSON object.
    ///
    /// ```
    /// use mektpoy::vocab::MessageSource;
    /// let value = serde_json::json!({"kind": "cron", "job": "nightly"});
    /// let MessageSource::Other(other) = MessageSource::from_value(value.clone())? else { panic!() };
    /// assert_eq!(other.into_value(), value);
    /// # Ok::<(), mektpoy::vocab::SourceError>(())
    /// ```
    #[must_use]
    pub fn into_value(self) -> Value {
        Value::Object(self.fields)
    }
}

/// Why a value is not a message source.
///
/// ```
/// use mektpoy::vocab::{MessageSource, SourceError};
/// assert_eq!(MessageSource::from_value(serde_json::json!({"who": "me"})), Err(SourceError::MissingKind));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SourceError {
    /// The value is not an object with a string `kind`.
    #[error("message source needs a string `kind`")]
    MissingKind,
    /// A known kind lacks a field, or has one that is not a string.
    #[error("`{kind}` source needs a string `{field}`")]
    Field {
        /// The source's `kind`.
        kind: &'static str,
        /// The missing or malformed field.
        field: &'static str,
    },
    /// [`MessageSource::other`] was given a kind this crate decodes into a typed variant.
    #[error("`{kind}` is a known source kind, not another one")]
    KnownKind {
        /// The known kind.
        kind: &'static str,
    },
}

/// The `kind` spellings of [`MessageSource`]: the one table encoding and decoding read.
mod kind {
    pub(super) const USER: &str = "user";
    pub(super) const MODEL: &str = "model";
    pub(super) const TOOL: &str = "tool";
    pub(super) const TOOL_REGISTRY: &str = "tool-registry";
    pub(super) const SYSTEM_PROMPT: &str = "system-prompt";
}

// Hand-written: the `kind` spellings are the table the strict decoder reads, and `Other` is
// written verbatim.
impl Serialize for MessageSource {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let kind = |s: S, k: &str| {
            let mut m = s.serialize_map(Some(1))?;
            m.serialize_entry("kind", k)?;
            m.end()
        };
        match self {
            MessageSource::User => kind(s, kind::USER),
            MessageSource::ToolRegistry => kind(s, kind::TOOL_REGISTRY),
            MessageSource::SystemPrompt => kind(s, kind::SYSTEM_PROMPT),
            MessageSource::Model { provider, model } => {
                let mut m = s.serialize_map(Some(3))?;
                m.serialize_entry("kind", kind::MODEL)?;
                m.serialize_entry("provider", provider)?;
                m.serialize_entry("model", model)?;
                m.end()
            }
            MessageSource::Tool { call_id } => {
                let mut m = s.serialize_map(Some(2))?;
                m.serialize_entry("kind", kind::TOOL)?;
                m.serialize_entry("callId", call_id)?;
                m.end()
            }
            MessageSource::Other(o) => o.fields.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for MessageSource {
    /// Refuses a key that appears twice in one object.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = StrictValue(&Strict::default()).deserialize(d)?;
        MessageSource::from_value(value).map_err(de::Error::custom)
    }
}

impl MessageSource {
    /// Decodes a source: a known kind as its typed variant, any other as [`MessageSource::Other`].
    ///
    /// ```
    /// use mektpoy::vocab::{MessageSource, SourceError};
    /// use serde_json::json;
    /// assert_eq!(MessageSource::from_value(json!({"kind": "user"}))?, MessageSource::User);
    /// let other = MessageSource::from_value(json!({"kind": "cron", "job": "nightly"}))?;
    /// assert!(matches!(other, MessageSource::Other(o) if o.kind() == "cron"));
    /// assert_eq!(MessageSource::from_value(json!({"kind": "tool"})), Err(SourceError::Field { kind: "tool", field: "callId" }));
    /// # Ok::<(), SourceError>(())
    /// ```
    ///
    /// # Errors
    /// A [`SourceError`] when the value is not an object with a string `kind`, or a known kind
    /// lacks one of its string fields.
    pub fn from_value(value: Value) -> Result<Self, SourceError> {
        let Value::Object(fields) = value else {
            return Err(SourceError::MissingKind);
        };
        let Some(kind) = fields.get("kind").and_then(Value::as_str) else {
            return Err(SourceError::MissingKind);
        };
        let Some(&kind) = KNOWN_SOURCE_KINDS.iter().find(|k| **k == kind) else {
            return Ok(MessageSource::Other(OtherSource { fields }));
        };
        let field = |field: &'static str| {
            fields
                .get(field)
                .and_then(Value::as_str)
                .map(str::to_owned)
                .ok_or(SourceError::Field { kind, field })
        };
        Ok(match kind {
            kind::USER => MessageSource::User,
            kind::TOOL_REGISTRY => MessageSource::ToolRegistry,
            kind::SYSTEM_PROMPT => MessageSource::SystemPrompt,
            kind::MODEL => MessageSource::Model {
                provider: field("provider")?,
                model: field("model")?,
            },
            _ => MessageSource::Tool {
                call_id: field("callId")?,
            },
        })
    }

    /// A source of a kind this crate does not know, kept verbatim.
    ///
    /// ```
    /// use mektpoy::vocab::{MessageSource, SourceError};
    /// let note = MessageSource::other(serde_json::json!({"kind": "compaction"}))?;
    /// assert!(matches!(&note, MessageSource::Other(o) if o.kind() == "compaction"));
    /// assert_eq!(
    ///     MessageSource::other(serde_json::json!({"kind": "user"})),
    ///     Err(SourceError::KnownKind { kind: "user" })
    /// );
    /// # Ok::<(), SourceError>(())
    /// ```
    ///
    /// # Errors
    /// [`SourceError::KnownKind`] for a kind this crate knows (build the typed variant, or use
    /// [`MessageSource::from_value`]); [`SourceError::MissingKind`] when the value is not an
    /// object with a string `kind`.
    pub fn other(value: Value) -> Result<Self, SourceError> {
        let known = value
            .get("kind")
            .and_then(Value::as_str)
            .and_then(|k| KNOWN_SOURCE_KINDS.iter().find(|known| **known == k));
        if let Some(&kind) = known {
            return Err(SourceError::KnownKind { kind });
        }
        MessageSource::from_value(value)
    }
}

const KNOWN_SOURCE_KINDS: [&str; 5] = [
    kind::USER,
    kind::MODEL,
    kind::TOOL,
    kind::TOOL_REGISTRY,
    kind::SYSTEM_PROMPT,
];

/// One block of message content.
///
/// JSON: `{"type":"text","text"}`, `{"type":"reasoning","text",...}`,
/// `{"type":"tool-call","id","name","arguments"}`, `{"type":"tool-addition","toolName"}`,
/// `{"type":"tool-removal","toolName"}`, `{"type":"tool-redefinition","toolName"}`; any other
/// `type` is kept verbatim as `Other` (an [`OtherBlock`], built only by [`ContentBlock::other`]
/// or decoding, so never of a known type).
/// The tool-call and tool-change variants hold payloads with private fields ([`ToolCall`],
/// [`ToolRef`]), built only by [`ContentBlock::tool_call`], [`ContentBlock::addition`],
/// [`ContentBlock::removal`], [`ContentBlock::redefinition`] or decoding, which share one check,
/// so a block code builds is one a log can hold.
/// **A known type that is malformed is an error, not `Other`.** Unknown fields on known
/// blocks other than `reasoning` are ignored (the log line keeps them; see `docs/decisions.md`).
///
/// ```
/// use mektpoy::{ContentBlock, Message};
/// let answer: Message = serde_json::from_str(r#"{"id":"a1","role":"assistant","content":[
///   {"type":"reasoning","text":"Look first.","signature":"sig"},{"type":"text","text":"Reading."},
///   {"type":"image","url":"x"}],"source":{"kind":"model","provider":"p","model":"m"}}"#)?;
/// assert!(matches!(&answer.content()[0], ContentBlock::Reasoning { extra, .. } if extra["signature"] == "sig"));
/// assert_eq!(answer.content()[1], ContentBlock::text("Reading."));
/// assert!(matches!(&answer.content()[2], ContentBlock::Other(o) if o.type_name() == "image"));
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum ContentBlock {
    /// Plain text.
    Text {
        /// The text.
        text: String,
    },
    /// Model reasoning; `extra` keeps fields such as a signature, in order.
    Reasoning {
        /// The reasoning text.
        text: String,
        /// Other fields of the block (e.g. `signature`).
        extra: IndexMap<String, Value>,
    },
    /// A call of a tool by the model: built by [`ContentBlock::tool_call`] or decoding, which
    /// refuse an empty tool name.
    ToolCall(ToolCall),
    /// A tool added in history (developer messages only): built by
    /// [`ContentBlock::addition`] or decoding.
    ToolAddition(ToolRef),
    /// A tool removed in history (developer messages only): built by
    /// [`ContentBlock::removal`] or decoding.
    ToolRemoval(ToolRef),
    /// An available tool takes the definition of the header its message names (developer
    /// messages only): built by [`ContentBlock::redefinition`] or decoding. Routes that take
    /// definitions by value send it as an addition carrying the new definition; by-reference
    /// routes open a declaration series instead.
    ToolRedefinition(ToolRef),
    /// An addition carrying its definition by value: made only by the projection for routes
    /// with inline definitions, never decoded from a log and refused by `append`.
    InlineAddition(InlineAddition),
    /// A block of another type, kept verbatim in place.
    Other(OtherBlock),
}

/// A content block of a type this crate does not know: a JSON object whose `type` is a string
/// other than the known types, kept verbatim (key order included).
///
/// There is no way to build one holding a known type: [`ContentBlock::other`] refuses it, and
/// decoding reads a known type as its typed variant.
///
/// ```
/// use mektpoy::ContentBlock;
/// let block = ContentBlock::other(serde_json::json!({"type": "image", "url": "x"}))?;
/// let ContentBlock::Other(image) = block else { panic!() };
/// assert_eq!((image.type_name(), image.get("url")), ("image", Some(&serde_json::json!("x"))));
/// # Ok::<(), mektpoy::vocab::BlockError>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct OtherBlock {
    fields: Map<String, Value>,
}

impl OtherBlock {
    /// Its `type`.
    ///
    /// ```
    /// use mektpoy::ContentBlock;
    /// let ContentBlock::Other(image) = ContentBlock::other(serde_json::json!({"type": "image"}))? else { panic!() };
    /// assert_eq!(image.type_name(), "image");
    /// # Ok::<(), mektpoy::vocab::BlockError>(())
    /// ```
    #[must_use]
    pub fn type_name(&self) -> &str {
        // Checked when built: `type` is a string.
        self.fields
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("")
    }

    /// Every field, `type` included, in order.
    ///
    /// ```
    /// use mektpoy::ContentBlock;
    /// let value = serde_json::json!({"type": "image", "url": "x", "size": 2});
    /// let ContentBlock::Other(image) = ContentBlock::other(value)? else { panic!() };
    /// assert_eq!(image.fields().len(), 3);
    /// assert_eq!(image.fields()["size"], 2);
    /// # Ok::<(), mektpoy::vocab::BlockError>(())
    /// ```
    #[must_use]
    pub fn fields(&self) -> &Map<String, Value> {
        &self.fields
    }

    /// The field `key`, if present.
    ///
    /// ```
    /// use mektpoy::ContentBlock;
    /// let ContentBlock::Other(image) = ContentBlock::other(serde_json::json!({"type": "image", "url": "x"}))? else { panic!() };
    /// assert_eq!(image.get("url"), Some(&serde_json::json!("x")));
    /// # Ok::<(), mektpoy::vocab::BlockError>(())
    /// ```
    #[must_use]
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.fields.get(key)
    }

    /// The block as a JSON object.
    ///
    /// ```
    /// use mektpoy::ContentBlock;
    /// let value = serde_json::json!({"type": "image", "url": "x"});
    /// let ContentBlock::Other(image) = ContentBlock::other(value.clone())? else { panic!() };
    /// assert_eq!(image.into_value(), value);
    /// # Ok::<(), mektpoy::vocab::BlockError>(())
    /// ```
    #[must_use]
    pub fn into_value(self) -> Value {
        Value::Object(self.fields)
    }
}

/// The payload of a [`ContentBlock::ToolCall`]: a call of a tool by the model.
///
/// Built only by [`ContentBlock::tool_call`] or decoding, which both refuse an empty tool name,
/// so a session never meets a call it could not pair or send. Also what
/// [`Message::tool_calls`] yields.
///
/// ```
/// use mektpoy::ContentBlock;
/// let block = ContentBlock::tool_call("c1", "read", r#"{"path":"a.rs"}"#)?;
/// let ContentBlock::ToolCall(call) = &block else { unreachable!() };
/// assert_eq!((call.id(), call.name(), call.arguments()), ("c1", "read", r#"{"path":"a.rs"}"#));
/// # Ok::<(), mektpoy::vocab::BlockError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolCall {
    id: String,
    name: String,
    arguments: String,
}

impl ToolCall {
    /// The call's id, which the result's source (`{"kind":"tool","callId"}`) names.
    ///
    /// ```
    /// let block = mektpoy::ContentBlock::tool_call("c1", "read", "{}")?;
    /// assert_eq!(block.as_tool_call().map(|c| c.id()), Some("c1"));
    /// # Ok::<(), mektpoy::vocab::BlockError>(())
    /// ```
    #[must_use]
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The called tool's name, never empty.
    ///
    /// ```
    /// let block = mektpoy::ContentBlock::tool_call("c1", "read", "{}")?;
    /// assert_eq!(block.as_tool_call().map(|c| c.name()), Some("read"));
    /// # Ok::<(), mektpoy::vocab::BlockError>(())
    /// ```
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The arguments as the model wrote them: a JSON text, not parsed (see
    /// [`validate_tool_call`](crate::project::validate_tool_call) to check them).
    ///
    /// ```
    /// let block = mektpoy::ContentBlock::tool_call("c1", "read", "{\"a\": ")?;
    /// assert_eq!(block.as_tool_call().map(|c| c.arguments()), Some("{\"a\": "));
    /// # Ok::<(), mektpoy::vocab::BlockError>(())
    /// ```
    #[must_use]
    pub fn arguments(&self) -> &str {
        &self.arguments
    }
}

/// The payload of a [`ContentBlock::ToolAddition`], [`ContentBlock::ToolRemoval`] or
/// [`ContentBlock::ToolRedefinition`]: the tool it names, by name.
///
/// Built only by [`ContentBlock::addition`], [`ContentBlock::removal`],
/// [`ContentBlock::redefinition`] or decoding, which all refuse an empty name.
///
/// ```
/// use mektpoy::ContentBlock;
/// let block = ContentBlock::removal("grep")?;
/// let ContentBlock::ToolRemoval(removed) = &block else { unreachable!() };
/// assert_eq!(removed.tool_name(), "grep");
/// # Ok::<(), mektpoy::vocab::BlockError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolRef {
    tool_name: String,
}

impl ToolRef {
    fn named(tool_name: impl Into<String>, block_type: &'static str) -> Result<Self, BlockError> {
        Ok(ToolRef {
            tool_name: nonempty_tool_name(tool_name.into(), block_type, "toolName")?,
        })
    }

    /// The tool's name, never empty.
    ///
    /// ```
    /// use mektpoy::ContentBlock;
    /// let ContentBlock::ToolAddition(added) = ContentBlock::addition("read")? else { unreachable!() };
    /// assert_eq!(added.tool_name(), "read");
    /// # Ok::<(), mektpoy::vocab::BlockError>(())
    /// ```
    #[must_use]
    pub fn tool_name(&self) -> &str {
        &self.tool_name
    }
}

/// `name`, unless it is empty (`block_type`'s field `field` would name no tool): the one check
/// the constructors and decoding share.
fn nonempty_tool_name(
    name: String,
    block_type: &'static str,
    field: &'static str,
) -> Result<String, BlockError> {
    if name.is_empty() {
        Err(BlockError::EmptyToolName { block_type, field })
    } else {
        Ok(name)
    }
}

/// Why a value is not a content block.
///
/// ```
/// use mektpoy::ContentBlock;
/// use mektpoy::vocab::BlockError;
/// assert_eq!(ContentBlock::from_value(serde_json::json!("text")), Err(BlockError::NotAnObject));
/// assert_eq!(ContentBlock::from_value(serde_json::json!({"text": "hi"})), Err(BlockError::MissingType));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BlockError {
    /// The value is not a JSON object.
    #[error("a content block must be a JSON object")]
    NotAnObject,
    /// The object has no string `type`.
    #[error("a content block needs a string `type`")]
    MissingType,
    /// A known type lacks a field, or has one that is not a string.
    #[error("`{block_type}` block needs a string `{field}`")]
    Field {
        /// The block's `type`.
        block_type: &'static str,
        /// The missing or malformed field.
        field: &'static str,
    },
    /// A tool call or tool change naming a tool with an empty name.
    #[error("`{block_type}` block names a tool with an empty `{field}`")]
    EmptyToolName {
        /// The block's `type`.
        block_type: &'static str,
        /// The field holding the name (`name` or `toolName`).
        field: &'static str,
    },
    /// A `tool-addition` carrying a `definition`: the by-value addition only projections make
    /// ([`ContentBlock::InlineAddition`]).
    #[error("a `tool-addition` carrying a `definition` is projection output, never a log block")]
    ProjectionOnly,
    /// [`ContentBlock::other`] was given a type this crate decodes into a typed variant.
    #[error("`{block_type}` is a known block type, not another one")]
    KnownType {
        /// The known type.
        block_type: &'static str,
    },
}

/// The `type` spellings of the known blocks: the one table encoding, decoding and error
/// messages read.
mod block_type {
    pub(super) const TEXT: &str = "text";
    pub(super) const REASONING: &str = "reasoning";
    pub(super) const TOOL_CALL: &str = "tool-call";
    pub(super) const TOOL_ADDITION: &str = "tool-addition";
    pub(super) const TOOL_REMOVAL: &str = "tool-removal";
    pub(super) const TOOL_REDEFINITION: &str = "tool-redefinition";
}

const KNOWN_BLOCK_TYPES: [&str; 6] = [
    block_type::TEXT,
    block_type::REASONING,
    block_type::TOOL_CALL,
    block_type::TOOL_ADDITION,
    block_type::TOOL_REMOVAL,
    block_type::TOOL_REDEFINITION,
];

/// A tool addition that carries the tool's definition (`deferLoading` cleared: a by-value
/// addition offers the tool at once).
///
/// Only the projection builds one (there is no public constructor), so a by-value block can
/// never be decoded from a log; `Session::append` refuses a message holding one.
/// JSON: `{"type":"tool-addition","toolName":N,"definition":{...}}`.
///
/// ```
/// use mektpoy::{AgentLoop, ContentBlock, Message, Session, ToolSchema, route_for};
/// // Claude Fable 5.1 takes definitions inline: an added tool travels in the history by value.
/// let mut agent = AgentLoop::builder(Session::new("s"), route_for("anthropic", "claude-fable-5-1"))
///     .tools([ToolSchema::no_input("read", "Read a file")])
///     .build()?;
/// agent.user_turn([Message::user("u1", "hi")])?;
/// agent.append(agent.assistant("a1", [ContentBlock::text("ok")]))?;
/// agent.set_tools([ToolSchema::no_input("read", "Read a file"), ToolSchema::no_input("grep", "Search")])?;
/// let request = agent.user_turn([Message::user("u2", "go on")])?;
/// let projected = request.project();
/// let inline = projected.messages.iter().flat_map(|m| m.content()).find_map(|b| match b {
///     ContentBlock::InlineAddition(a) => Some(a.clone()),
///     _ => None,
/// });
/// let inline = inline.unwrap();
/// assert_eq!((inline.tool_name(), inline.definition().description()), ("grep", "Search"));
/// # Ok::<(), mektpoy::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct InlineAddition {
    definition: ToolSchema,
}

impl InlineAddition {
    pub(crate) fn new(definition: &ToolSchema) -> Self {
        InlineAddition {
            definition: definition.with_defer_loading(false),
        }
    }

    /// The added tool's name.
    ///
    /// ```
    /// use mektpoy::{AgentLoop, ContentBlock, Message, Session, ToolSchema, route_for};
    /// let mut agent = AgentLoop::builder(Session::new("s"), route_for("anthropic", "claude-fable-5-1")).build()?;
    /// agent.user_turn([Message::user("u1", "hi")])?;
    /// agent.append(agent.assistant("a1", [ContentBlock::text("ok")]))?;
    /// agent.set_tools([ToolSchema::no_input("grep", "Search")])?;
    /// let request = agent.user_turn([Message::user("u2", "go on")])?;
    /// let names: Vec<String> = request.project().messages.iter().flat_map(|m| m.content().to_vec())
    ///     .filter_map(|b| match b { ContentBlock::InlineAddition(a) => Some(a.tool_name().to_owned()), _ => None })
    ///     .collect();
    /// assert_eq!(names, ["grep"]);
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
    pub fn tool_name(&self) -> &str {
        self.definition.name()
    }

    /// The definition sent with the addition (never deferred).
    ///
    /// ```
    /// use mektpoy::{AgentLoop, ContentBlock, Message, Session, ToolSchema, route_for};
    /// let grep = ToolSchema::no_input("grep", "Search").with_defer_loading(true);
    /// let mut agent = AgentLoop::builder(Session::new("s"), route_for("anthropic", "claude-fable-5-1")).build()?;
    /// agent.user_turn([Message::user("u1", "hi")])?;
    /// agent.append(agent.assistant("a1", [ContentBlock::text("ok")]))?;
    /// agent.set_tools([grep])?;
    /// let request = agent.user_turn([Message::user("u2", "go on")])?;
    /// let projected = request.project();
    /// let definition = projected.messages.iter().flat_map(|m| m.content()).find_map(|b| match b {
    ///     ContentBlock::InlineAddition(a) => Some(a.definition().clone()),
    ///     _ => None,
    /// });
    /// // A by-value addition offers the tool at once: `deferLoading` cleared.
    /// assert!(!definition.unwrap().defer_loading());
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
    pub fn definition(&self) -> &ToolSchema {
        &self.definition
    }
}

impl ContentBlock {
    /// A text block.
    ///
    /// ```
    /// use mektpoy::ContentBlock;
    /// assert_eq!(ContentBlock::text("hi"), ContentBlock::Text { text: "hi".into() });
    /// ```
    pub fn text(text: impl Into<String>) -> Self {
        ContentBlock::Text { text: text.into() }
    }

    /// A `tool-call` block: the model calls `name` with `arguments` (its JSON text, kept as
    /// written), answered by the tool result whose source names `id`.
    ///
    /// ```
    /// use mektpoy::{ContentBlock, vocab::BlockError};
    /// let call = ContentBlock::tool_call("c1", "read", r#"{"path":"a.rs"}"#)?;
    /// assert_eq!(call.as_tool_call().map(|c| c.name()), Some("read"));
    /// assert_eq!(
    ///     ContentBlock::tool_call("c2", "", "{}"),
    ///     Err(BlockError::EmptyToolName { block_type: "tool-call", field: "name" })
    /// );
    /// # Ok::<(), BlockError>(())
    /// ```
    ///
    /// # Errors
    /// [`BlockError::EmptyToolName`] for an empty `name`, which no provider takes and no
    /// header can declare (decoding a log refuses it alike).
    pub fn tool_call(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<String>,
    ) -> Result<Self, BlockError> {
        Ok(ContentBlock::ToolCall(ToolCall {
            id: id.into(),
            name: nonempty_tool_name(name.into(), block_type::TOOL_CALL, "name")?,
            arguments: arguments.into(),
        }))
    }

    /// A `tool-addition` block: `tool_name`, declared by the header its developer message
    /// names, is offered from here on.
    ///
    /// ```
    /// use mektpoy::{ContentBlock, vocab::BlockError};
    /// assert_eq!(ContentBlock::addition("read")?.tool_change_name(), Some("read"));
    /// assert!(matches!(ContentBlock::addition(""), Err(BlockError::EmptyToolName { .. })));
    /// # Ok::<(), BlockError>(())
    /// ```
    ///
    /// # Errors
    /// [`BlockError::EmptyToolName`] for an empty name (decoding a log refuses it alike).
    pub fn addition(tool_name: impl Into<String>) -> Result<Self, BlockError> {
        ToolRef::named(tool_name, block_type::TOOL_ADDITION).map(ContentBlock::ToolAddition)
    }

    /// A `tool-removal` block: `tool_name` is no longer offered.
    ///
    /// ```
    /// use mektpoy::{ContentBlock, vocab::BlockError};
    /// assert_eq!(ContentBlock::removal("grep")?.tool_change_name(), Some("grep"));
    /// assert!(matches!(ContentBlock::removal(""), Err(BlockError::EmptyToolName { .. })));
    /// # Ok::<(), BlockError>(())
    /// ```
    ///
    /// # Errors
    /// [`BlockError::EmptyToolName`] for an empty name (decoding a log refuses it alike).
    pub fn removal(tool_name: impl Into<String>) -> Result<Self, BlockError> {
        ToolRef::named(tool_name, block_type::TOOL_REMOVAL).map(ContentBlock::ToolRemoval)
    }

    /// A `tool-redefinition` block: `tool_name` takes the definition of the header its
    /// developer message names.
    ///
    /// ```
    /// use mektpoy::{ContentBlock, vocab::BlockError};
    /// assert_eq!(ContentBlock::redefinition("edit")?.tool_change_name(), Some("edit"));
    /// assert!(matches!(ContentBlock::redefinition(""), Err(BlockError::EmptyToolName { .. })));
    /// # Ok::<(), BlockError>(())
    /// ```
    ///
    /// # Errors
    /// [`BlockError::EmptyToolName`] for an empty name (decoding a log refuses it alike).
    pub fn redefinition(tool_name: impl Into<String>) -> Result<Self, BlockError> {
        ToolRef::named(tool_name, block_type::TOOL_REDEFINITION).map(ContentBlock::ToolRedefinition)
    }

    /// The call, when this is a `tool-call` block.
    ///
    /// ```
    /// use mektpoy::ContentBlock;
    /// assert_eq!(ContentBlock::tool_call("c1", "read", "{}")?.as_tool_call().map(|c| c.id()), Some("c1"));
    /// assert!(ContentBlock::text("hi").as_tool_call().is_none());
    /// # Ok::<(), mektpoy::vocab::BlockError>(())
    /// ```
    #[must_use]
    pub fn as_tool_call(&self) -> Option<&ToolCall> {
        match self {
            ContentBlock::ToolCall(call) => Some(call),
            _ => None,
        }
    }

    /// The `call_id` of a call the crate keeps verbatim that waits for an output: a Responses API
    /// `custom_tool_call` or `local_shell_call` ([decision
    /// 140](crate::manual::decisions#decision-140)). The session pairs its result as it pairs a
    /// tool call's; `None` for every other block.
    ///
    /// ```
    /// use mektpoy::ContentBlock;
    /// let call = ContentBlock::other(serde_json::json!(
    ///     {"type": "custom_tool_call", "call_id": "c1", "name": "apply_patch", "input": "x"}))?;
    /// assert_eq!(call.kept_call_id(), Some("c1"));
    /// assert_eq!(ContentBlock::text("c1").kept_call_id(), None);
    /// # Ok::<(), mektpoy::vocab::BlockError>(())
    /// ```
    pub fn kept_call_id(&self) -> Option<&str> {
        match self {
            ContentBlock::Other(o)
                if matches!(o.type_name(), "custom_tool_call" | "local_shell_call") =>
            {
                o.get("call_id").and_then(Value::as_str)
            }
            _ => None,
        }
    }

    /// Whether this is a tool-addition, tool-removal or tool-redefinition block (by value
    /// included).
    ///
    /// ```
    /// use mektpoy::ContentBlock;
    /// let addition: ContentBlock = serde_json::from_str(r#"{"type":"tool-addition","toolName":"grep"}"#)?;
    /// assert!(addition.is_tool_change());
    /// assert!(!ContentBlock::text("hi").is_tool_change());
    /// # Ok::<(), serde_json::Error>(())
    /// ```
    pub fn is_tool_change(&self) -> bool {
        matches!(
            self,
            ContentBlock::ToolAddition(_)
                | ContentBlock::ToolRemoval(_)
                | ContentBlock::ToolRedefinition(_)
                | ContentBlock::InlineAddition(_)
        )
    }

    /// The tool a tool-change block names.
    ///
    /// ```
    /// use mektpoy::ContentBlock;
    /// let removal: ContentBlock = serde_json::from_str(r#"{"type":"tool-removal","toolName":"shell"}"#)?;
    /// assert_eq!(removal.tool_change_name(), Some("shell"));
    /// assert_eq!(ContentBlock::text("hi").tool_change_name(), None);
    /// # Ok::<(), serde_json::Error>(())
    /// ```
    pub fn tool_change_name(&self) -> Option<&str> {
        match self {
            ContentBlock::ToolAddition(r)
            | ContentBlock::ToolRemoval(r)
            | ContentBlock::ToolRedefinition(r) => Some(r.tool_name()),
            ContentBlock::InlineAddition(a) => Some(a.tool_name()),
            _ => None,
        }
    }

    /// The deepest nesting the `arguments` of a tool call may have: the outer object is level 1,
    /// each array or object inside it one more. `append` and loading refuse deeper arguments
    /// ([`AppendErrorKind::ArgumentsTooDeep`](crate::session::AppendErrorKind::ArgumentsTooDeep));
    /// the Messages-API serializer sends deeper ones as a string (`{"invalid_arguments":…}`,
    /// [decision 94](crate::manual::decisions#decision-94)): there the arguments are a JSON value
    /// inside the body, five levels down, and a provider's parser stops somewhere past a hundred
    /// levels (serde_json's default limit is 128).
    pub const ARGUMENTS_DEPTH_LIMIT: usize = 100;

    /// Decodes one block: a known type as its typed variant, any other as
    /// [`ContentBlock::Other`].
    ///
    /// ```
    /// use mektpoy::ContentBlock;
    /// let block = ContentBlock::from_value(serde_json::json!({"type": "text", "text": "hi"}))?;
    /// assert_eq!(block, ContentBlock::text("hi"));
    /// assert!(ContentBlock::from_value(serde_json::json!({"type": "text"})).is_err());
    /// # Ok::<(), mektpoy::vocab::BlockError>(())
    /// ```
    ///
    /// # Errors
    /// A [`BlockError`] when the value is not an object with a string `type`, or when a known
    /// type lacks a field, has one of the wrong type, or names a tool with an empty name.
    pub fn from_value(value: Value) -> Result<Self, BlockError> {
        let Value::Object(map) = value else {
            return Err(BlockError::NotAnObject);
        };
        Self::from_entries(map.into_iter().map(|(k, v)| (Cow::Owned(k), v)).collect())
    }

    /// A block of a type this crate does not know, kept verbatim.
    ///
    /// ```
    /// use mektpoy::{ContentBlock, vocab::BlockError};
    /// let image = ContentBlock::other(serde_json::json!({"type": "image", "url": "x"}))?;
    /// assert!(matches!(&image, ContentBlock::Other(o) if o.type_name() == "image"));
    /// assert_eq!(
    ///     ContentBlock::other(serde_json::json!({"type": "text", "text": "hi"})),
    ///     Err(BlockError::KnownType { block_type: "text" })
    /// );
    /// # Ok::<(), BlockError>(())
    /// ```
    ///
    /// # Errors
    /// [`BlockError::KnownType`] for a type this crate knows (build the typed variant, or use
    /// [`ContentBlock::from_value`]); [`BlockError::NotAnObject`] or
    /// [`BlockError::MissingType`] when the value is not an object with a string `type`.
    pub fn other(value: Value) -> Result<Self, BlockError> {
        let known = value
            .get("type")
            .and_then(Value::as_str)
            .and_then(|t| KNOWN_BLOCK_TYPES.iter().find(|known| **known == t));
        if let Some(&block_type) = known {
            return Err(BlockError::KnownType { block_type });
        }
        ContentBlock::from_value(value)
    }

    /// Decodes one block from its entries in document order (keys already unique).
    pub(crate) fn from_entries(
        mut entries: Vec<(Cow<'_, str>, Value)>,
    ) -> Result<Self, BlockError> {
        let position = |entries: &[(Cow<'_, str>, Value)], name: &str| {
            entries.iter().position(|(k, _)| k == name)
        };
        let ty = match position(&entries, "type").map(|i| &entries[i].1) {
            Some(Value::String(t)) => t,
            _ => return Err(BlockError::MissingType),
        };
        let Some(&ty) = KNOWN_BLOCK_TYPES.iter().find(|k| **k == ty.as_str()) else {
            let fields = entries.into_iter().map(|(k, v)| (k.into_owned(), v));
            return Ok(ContentBlock::Other(OtherBlock {
                fields: fields.collect(),
            }));
        };
        let has_definition = position(&entries, "definition").is_some();
        let missing = |field| BlockError::Field {
            block_type: ty,
            field,
        };
        // Moves a string field out (the block is rebuilt from the fields it knows).
        let mut take = |name: &'static str| match position(&entries, name) {
            Some(i) => match std::mem::take(&mut entries[i].1) {
                Value::String(s) => Ok(s),
                _ => Err(missing(name)),
            },
            None => Err(missing(name)),
        };
        Ok(match ty {
            block_type::TEXT => ContentBlock::Text {
                text: take("text")?,
            },
            // The constructors' own checks: a log holds no block code could not build.
            block_type::TOOL_CALL => {
                let id = take("id")?;
                let name = nonempty_tool_name(take("name")?, ty, "name")?;
                ContentBlock::ToolCall(ToolCall {
                    id,
                    name,
                    arguments: take("arguments")?,
                })
            }
            block_type::TOOL_ADDITION if has_definition => return Err(BlockError::ProjectionOnly),
            block_type::TOOL_ADDITION => {
                ContentBlock::ToolAddition(ToolRef::named(take("toolName")?, ty)?)
            }
            block_type::TOOL_REDEFINITION => {
                ContentBlock::ToolRedefinition(ToolRef::named(take("toolName")?, ty)?)
            }
            block_type::TOOL_REMOVAL => {
                ContentBlock::ToolRemoval(ToolRef::named(take("toolName")?, ty)?)
            }
            _ => {
                let text = take("text")?;
                let extra = entries
                    .into_iter()
                    .filter(|(k, _)| k != "type" && k != "text")
                    .map(|(k, v)| (k.into_owned(), v))
                    .collect();
                ContentBlock::Reasoning { text, extra }
            }
        })
    }

    /// The `type` of a known block as the log spells it (a by-value addition's too); `None`
    /// for `Other`.
    pub(crate) fn known_type(&self) -> Option<&'static str> {
        Some(match self {
            ContentBlock::Text { .. } => block_type::TEXT,
            ContentBlock::Reasoning { .. } => block_type::REASONING,
            ContentBlock::ToolCall(_) => block_type::TOOL_CALL,
            ContentBlock::ToolAddition(_) | ContentBlock::InlineAddition(_) => {
                block_type::TOOL_ADDITION
            }
            ContentBlock::ToolRemoval(_) => block_type::TOOL_REMOVAL,
            ContentBlock::ToolRedefinition(_) => block_type::TOOL_REDEFINITION,
            ContentBlock::Other(_) => return None,
        })
    }
}

// Hand-written: the `type` spellings are the table the strict decoder reads, a by-value
// addition shares `tool-addition` with the by-reference one, and `Other` is written verbatim.
impl Serialize for ContentBlock {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let ty = self.known_type().unwrap_or_default();
        match self {
            ContentBlock::Text { text } => {
                let mut m = s.serialize_map(Some(2))?;
                m.serialize_entry("type", ty)?;
                m.serialize_entry("text", text)?;
                m.end()
            }
            ContentBlock::Reasoning { text, extra } => {
                let mut m = s.serialize_map(Some(2 + extra.len()))?;
                m.serialize_entry("type", ty)?;
                m.serialize_entry("text", text)?;
                for (k, v) in extra {
                    m.serialize_entry(k, v)?;
                }
                m.end()
            }
            ContentBlock::ToolCall(call) => {
                let mut m = s.serialize_map(Some(4))?;
                m.serialize_entry("type", ty)?;
                m.serialize_entry("id", &call.id)?;
                m.serialize_entry("name", &call.name)?;
                m.serialize_entry("arguments", &call.arguments)?;
                m.end()
            }
            ContentBlock::ToolAddition(r)
            | ContentBlock::ToolRemoval(r)
            | ContentBlock::ToolRedefinition(r) => {
                let mut m = s.serialize_map(Some(2))?;
                m.serialize_entry("type", ty)?;
                m.serialize_entry("toolName", &r.tool_name)?;
                m.end()
            }
            ContentBlock::InlineAddition(a) => {
                let mut m = s.serialize_map(Some(3))?;
                m.serialize_entry("type", ty)?;
                m.serialize_entry("toolName", a.tool_name())?;
                m.serialize_entry("definition", &a.definition)?;
                m.end()
            }
            ContentBlock::Other(o) => o.fields.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for ContentBlock {
    /// Decodes a block as [`ContentBlock::from_value`] does, refusing a key that appears twice
    /// in one object.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        BlockSeed(&Strict::default())
            .deserialize(d)?
            .map_err(de::Error::custom)
    }
}

/// Decodes one content block straight from the text, without a `Value` of the block:
/// `Ok(Err(reason))` when it is malformed, `Err` for a syntax fault or a duplicate key.
#[derive(Clone, Copy)]
pub(crate) struct BlockSeed<'c>(pub &'c Strict);

impl<'de> DeserializeSeed<'de> for BlockSeed<'_> {
    type Value = Result<ContentBlock, BlockError>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl Strictly for BlockSeed<'_> {
    fn strict(&self) -> &Strict {
        self.0
    }
}

impl<'de> Visitor<'de> for BlockSeed<'_> {
    type Value = Result<ContentBlock, BlockError>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a content block")
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        Ok(ContentBlock::from_entries(Entries::read(map, self.0)?.list))
    }
    wrong_shape!(object, |_| Err(BlockError::NotAnObject));
}

/// A message: `{"id","role","content","source","isError"?}`. Ids are unique in a session.
///
/// A cheap handle: cloning is O(1) and clones share their content.
///
/// ```
/// use mektpoy::Message;
/// let m = Message::user("u1", "hi");
/// let copy = m.clone(); // O(1): the same content
/// assert!(m.ptr_eq(&copy));
/// assert_eq!(serde_json::to_string(&m).unwrap(), r#"{"id":"u1","role":"user","content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}}"#);
/// ```
#[derive(Clone, PartialEq)]
pub struct Message(Arc<MessageData>);

#[derive(Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
struct MessageData {
    id: String,
    role: Role,
    content: Vec<ContentBlock>,
    source: MessageSource,
    #[serde(skip_serializing_if = "Option::is_none")]
    is_error: Option<bool>,
}

impl Message {
    /// A message without `isError`.
    ///
    /// ```
    /// use mektpoy::vocab::{MessageSource, Role};
    /// use mektpoy::{ContentBlock, Message};
    /// let m = Message::new("s1", Role::System, vec![ContentBlock::text("Summary so far.")], MessageSource::User);
    /// assert_eq!((m.role(), m.text()), (Role::System, "Summary so far.".to_owned()));
    /// assert_eq!(m.is_error(), None);
    /// ```
    pub fn new(
        id: impl Into<String>,
        role: Role,
        content: Vec<ContentBlock>,
        source: MessageSource,
    ) -> Self {
        Message(Arc::new(MessageData {
            id: id.into(),
            role,
            content,
            source,
            is_error: None,
        }))
    }

    /// A user message with one text block.
    ///
    /// ```
    /// use mektpoy::vocab::{MessageSource, Role};
    /// use mektpoy::Message;
    /// let m = Message::user("u1", "hi");
    /// assert_eq!((m.id(), m.role(), m.source()), ("u1", Role::User, &MessageSource::User));
    /// ```
    pub fn user(id: impl Into<String>, text: impl Into<String>) -> Self {
        Message::new(
            id,
            Role::User,
            vec![ContentBlock::text(text)],
            MessageSource::User,
        )
    }

    /// An assistant message with one text block, from `provider`/`model`.
    ///
    /// ```
    /// use mektpoy::vocab::Role;
    /// use mektpoy::Message;
    /// let m = Message::assistant("a1", "Hello.", "deepseek", "deepseek-flash");
    /// assert_eq!((m.role(), m.text()), (Role::Assistant, "Hello.".to_owned()));
    /// ```
    pub fn assistant(
        id: impl Into<String>,
        text: impl Into<String>,
        provider: impl Into<String>,
        model: impl Into<String>,
    ) -> Self {
        Message::new(
            id,
            Role::Assistant,
            vec![ContentBlock::text(text)],
            MessageSource::Model {
                provider: provider.into(),
                model: model.into(),
            },
        )
    }

    /// A tool-registry developer message holding `content` (tool-change blocks, text).
    ///
    /// ```
    /// use mektpoy::vocab::{MessageSource, Role};
    /// use mektpoy::{ContentBlock, Message};
    /// let note = Message::developer("d1", vec![ContentBlock::text("The repository moved.")]);
    /// assert_eq!((note.role(), note.source()), (Role::Developer, &MessageSource::ToolRegistry));
    /// ```
    pub fn developer(id: impl Into<String>, content: Vec<ContentBlock>) -> Self {
        Message::new(id, Role::Developer, content, MessageSource::ToolRegistry)
    }

    /// A system-prompt node with one text block.
    ///
    /// ```
    /// use mektpoy::vocab::{MessageSource, Role};
    /// use mektpoy::Message;
    /// let prompt = Message::system("p1", "Be brief.");
    /// assert_eq!((prompt.role(), prompt.source()), (Role::System, &MessageSource::SystemPrompt));
    /// ```
    pub fn system(id: impl Into<String>, text: impl Into<String>) -> Self {
        Message::new(
            id,
            Role::System,
            vec![ContentBlock::text(text)],
            MessageSource::SystemPrompt,
        )
    }

    /// A tool result for the call `call_id`.
    ///
    /// ```
    /// use mektpoy::vocab::Role;
    /// use mektpoy::Message;
    /// let result = Message::tool_result("r1", "c1", "fn main() {}");
    /// assert_eq!((result.role(), result.text()), (Role::Tool, "fn main() {}".to_owned()));
    /// ```
    pub fn tool_result(
        id: impl Into<String>,
        call_id: impl Into<String>,
        text: impl Into<String>,
    ) -> Self {
        Message::new(
            id,
            Role::Tool,
            vec![ContentBlock::text(text)],
            MessageSource::Tool {
                call_id: call_id.into(),
            },
        )
    }

    /// The same message with `isError` set.
    ///
    /// ```
    /// use mektpoy::Message;
    /// let failed = Message::tool_result("r1", "c1", "no such file").with_is_error(true);
    /// assert_eq!(failed.is_error(), Some(true));
    /// assert!(serde_json::to_string(&failed).unwrap().ends_with(r#""isError":true}"#));
    /// ```
    #[must_use]
    pub fn with_is_error(&self, is_error: bool) -> Self {
        self.rebuilt(self.0.content.clone(), Some(is_error))
    }

    /// A message with this one's id, role and source and other content. Projection uses it
    /// to drop blocks; the original is untouched.
    ///
    /// ```
    /// use mektpoy::{ContentBlock, Message};
    /// let m = Message::user("u1", "hi");
    /// let shorter = m.with_content(vec![ContentBlock::text("h")]);
    /// assert_eq!((shorter.id(), shorter.text()), ("u1", "h".to_owned()));
    /// assert_eq!(m.text(), "hi", "the original is untouched");
    /// ```
    #[must_use]
    pub fn with_content(&self, content: Vec<ContentBlock>) -> Self {
        self.rebuilt(content, self.0.is_error)
    }

    fn rebuilt(&self, content: Vec<ContentBlock>, is_error: Option<bool>) -> Self {
        Message(Arc::new(MessageData {
            id: self.0.id.clone(),
            role: self.0.role,
            content,
            source: self.0.source.clone(),
            is_error,
        }))
    }

    /// The id, unique within a session.
    ///
    /// ```
    /// use mektpoy::Message;
    /// assert_eq!(Message::user("u1", "hi").id(), "u1");
    /// ```
    pub fn id(&self) -> &str {
        &self.0.id
    }

    /// Who speaks.
    ///
    /// ```
    /// use mektpoy::{Message, vocab::Role};
    /// assert_eq!(Message::system("p", "Be brief.").role(), Role::System);
    /// ```
    pub fn role(&self) -> Role {
        self.0.role
    }

    /// The blocks, in order.
    ///
    /// ```
    /// use mektpoy::{ContentBlock, Message};
    /// assert_eq!(Message::user("u1", "hi").content(), [ContentBlock::text("hi")]);
    /// ```
    pub fn content(&self) -> &[ContentBlock] {
        &self.0.content
    }

    /// Where it came from.
    ///
    /// ```
    /// use mektpoy::{Message, vocab::MessageSource};
    /// assert_eq!(Message::system("p", "x").source(), &MessageSource::SystemPrompt);
    /// ```
    pub fn source(&self) -> &MessageSource {
        &self.0.source
    }

    /// `isError`, when present (tool results).
    ///
    /// ```
    /// use mektpoy::Message;
    /// assert_eq!(Message::tool_result("r1", "c1", "ok").is_error(), None);
    /// ```
    pub fn is_error(&self) -> Option<bool> {
        self.0.is_error
    }

    /// The text blocks concatenated without separator (how a system node's prompt is read).
    ///
    /// ```
    /// use mektpoy::{ContentBlock, Message};
    /// let m = Message::developer("d1", vec![ContentBlock::text("a"), ContentBlock::text("b")]);
    /// assert_eq!(m.text(), "ab");
    /// ```
    pub fn text(&self) -> String {
        self.0
            .content
            .iter()
            .filter_map(|b| match b {
                ContentBlock::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }

    /// The tool calls of the message, in order, borrowed: what a loop runs after an answer,
    /// without matching on [`ContentBlock`]. O(blocks); nothing is copied.
    ///
    /// ```
    /// use mektpoy::{ContentBlock, Message, vocab::{MessageSource, Role}};
    /// let answer = Message::new(
    ///     "a1",
    ///     Role::Assistant,
    ///     vec![
    ///         ContentBlock::text("Reading both."),
    ///         ContentBlock::tool_call("c1", "read", r#"{"path":"a.rs"}"#)?,
    ///         ContentBlock::tool_call("c2", "read", r#"{"path":"b.rs"}"#)?,
    ///     ],
    ///     MessageSource::Model { provider: "anthropic".into(), model: "m".into() },
    /// );
    /// let calls: Vec<_> = answer.tool_calls().map(|c| (c.id(), c.name())).collect();
    /// assert_eq!(calls, [("c1", "read"), ("c2", "read")]);
    /// assert_eq!(answer.tool_calls().next().unwrap().arguments(), r#"{"path":"a.rs"}"#);
    /// assert_eq!(Message::user("u1", "hi").tool_calls().count(), 0);
    /// # Ok::<(), mektpoy::vocab::BlockError>(())
    /// ```
    pub fn tool_calls(&self) -> impl Iterator<Item = &ToolCall> + Clone {
        self.0.content.iter().filter_map(ContentBlock::as_tool_call)
    }

    /// Whether this is a prompt node: a system message with source `system-prompt` (other
    /// system messages, such as a compaction summary, are not prompts).
    pub(crate) fn is_prompt(&self) -> bool {
        self.0.role == Role::System && self.0.source == MessageSource::SystemPrompt
    }

    /// Whether two handles share one allocation (a clone, not a copy).
    ///
    /// ```
    /// use mektpoy::Message;
    /// let m = Message::user("u1", "hi");
    /// assert!(m.ptr_eq(&m.clone()));
    /// assert!(!m.ptr_eq(&Message::user("u1", "hi")), "equal, but another allocation");
    /// ```
    pub fn ptr_eq(&self, other: &Message) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl fmt::Debug for Message {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

// `{"id","role","content","source","isError"?}` (derived on the shared data). The one
// decoder, `Deserialize`, is the log's (`event/decode.rs`).
impl Serialize for Message {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn blocks_round_trip_and_unknown_kept_in_place() {
        let content = json!([
            {"type":"text","text":"a"},
            {"type":"image","url":"x","n":1},
            {"type":"reasoning","text":"r","signature":"sig"},
            {"type":"tool-call","id":"c1","name":"read","arguments":"{\"p\":1}"},
            {"type":"tool-addition","toolName":"B"},
            {"type":"tool-removal","toolName":"A"}
        ]);
        let blocks: Vec<ContentBlock> = serde_json::from_value(content.clone()).unwrap();
        assert!(matches!(&blocks[1], ContentBlock::Other(o) if o.type_name() == "image"));
        assert_eq!(serde_json::to_value(&blocks).unwrap(), content);
    }

    #[test]
    fn malformed_known_blocks_are_errors() {
        for bad in [
            json!({"type":"tool-call","name":"read","arguments":"{}"}),
            json!({"type":"text"}),
            json!({"type":"text","text":3}),
            json!({"type":"tool-addition","name":"x"}),
            json!({"type":"reasoning"}),
            json!({"text":"no type"}),
            json!("text"),
        ] {
            assert!(
                serde_json::from_value::<ContentBlock>(bad.clone()).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn message_json_shape() {
        let m = Message::tool_result("m1", "c1", "ok").with_is_error(true);
        assert_eq!(
            serde_json::to_string(&m).unwrap(),
            r#"{"id":"m1","role":"tool","content":[{"type":"text","text":"ok"}],"source":{"kind":"tool","callId":"c1"},"isError":true}"#
        );
        let back: Message = serde_json::from_str(&serde_json::to_string(&m).unwrap()).unwrap();
        assert_eq!(back, m);
        let other: MessageSource = serde_json::from_value(json!({"kind":"plugin","x":1})).unwrap();
        assert_eq!(
            other,
            MessageSource::other(json!({"kind":"plugin","x":1})).unwrap()
        );
        assert!(matches!(&other, MessageSource::Other(o) if o.kind() == "plugin"));
        assert!(serde_json::from_value::<MessageSource>(json!({"kind":"model"})).is_err());
    }

    #[test]
    fn tool_calls_are_the_call_blocks_in_order() {
        let m: Message = serde_json::from_value(json!({
            "id": "a1", "role": "assistant",
            "content": [
                {"type": "reasoning", "text": "r", "signature": "s"},
                {"type": "tool-call", "id": "c1", "name": "read", "arguments": "{\"p\":1}"},
                {"type": "text", "text": "and"},
                {"type": "tool-call", "id": "c2", "name": "grep", "arguments": "{}"}
            ],
            "source": {"kind": "model", "provider": "p", "model": "m"}
        }))
        .unwrap();
        let calls: Vec<_> = m
            .tool_calls()
            .map(|c| (c.id(), c.name(), c.arguments()))
            .collect();
        assert_eq!(calls, [("c1", "read", "{\"p\":1}"), ("c2", "grep", "{}")]);
        // Borrowed from the message: the same bytes, not copies.
        let ContentBlock::ToolCall(call) = &m.content()[1] else {
            panic!("{m:?}")
        };
        assert!(std::ptr::eq(m.tool_calls().next().unwrap(), call));
        assert_eq!(
            Message::tool_result("t", "c1", "ok").tool_calls().count(),
            0
        );
    }

    #[test]
    fn other_constructors_refuse_known_kinds() {
        for ty in KNOWN_BLOCK_TYPES {
            assert_eq!(
                ContentBlock::other(json!({"type": ty, "text": "t", "toolName": "a"})),
                Err(BlockError::KnownType { block_type: ty }),
                "{ty}"
            );
        }
        assert_eq!(
            ContentBlock::other(json!({"text": "no type"})),
            Err(BlockError::MissingType)
        );
        assert_eq!(
            ContentBlock::other(json!("loose")),
            Err(BlockError::NotAnObject)
        );
        let image = ContentBlock::other(json!({"type": "image", "url": "x"})).unwrap();
        let ContentBlock::Other(o) = &image else {
            panic!("{image:?}")
        };
        assert_eq!(o.type_name(), "image");
        assert_eq!(o.get("url"), Some(&json!("x")));
        assert_eq!(o.clone().into_value(), json!({"type": "image", "url": "x"}));

        for kind in KNOWN_SOURCE_KINDS {
            assert_eq!(
                MessageSource::other(json!({"kind": kind})),
                Err(SourceError::KnownKind { kind }),
                "{kind}"
            );
        }
        assert_eq!(
            MessageSource::other(json!({"no": "kind"})),
            Err(SourceError::MissingKind)
        );
        assert_eq!(
            MessageSource::from_value(json!({"kind": "tool"})),
            Err(SourceError::Field {
                kind: "tool",
                field: "callId"
            })
        );
    }

    #[test]
    fn decoding_reports_typed_block_faults() {
        let fault = |v: Value| ContentBlock::from_value(v).unwrap_err();
        assert_eq!(
            fault(json!({"type": "text"})),
            BlockError::Field {
                block_type: "text",
                field: "text"
            }
        );
        assert_eq!(
            fault(json!({"type": "tool-removal", "toolName": ""})),
            BlockError::EmptyToolName {
                block_type: "tool-removal",
                field: "toolName"
            }
        );
        assert_eq!(
            fault(json!({"type": "tool-addition", "toolName": "a", "definition": {}})),
            BlockError::ProjectionOnly
        );
        // The text is what the reason was when it was a string.
        assert_eq!(
            fault(json!({"type": "tool-call", "id": "c", "name": "n"})).to_string(),
            "`tool-call` block needs a string `arguments`"
        );
    }
}
