//! Log events ([reference §1](crate::manual::reference#1-vocabulary-and-json)): the envelope
//! `{"type","data","surfaceOp"?}`, request headers, message events and opaque events of unknown
//! type.
//!
//! Decoding is hand-written so that every shape fault is its own typed [`DecodeError`] (serde's
//! derive would report strings, and inside a tagged enum without line numbers). Encoding writes
//! compact JSON in the key order of [reference §1](crate::manual::reference#1-vocabulary-and-json)
//! from ordered fields; it is used only for events created in this process, since loaded lines keep
//! their bytes.

mod decode;
mod encode;
mod series;

use std::sync::Arc;

use indexmap::IndexMap;
use serde_json::Value;

use crate::vocab::{Message, Seq, ToolSchema};

pub use decode::DecodeError;
pub use series::SeriesStart;

/// One event of a session log.
///
/// Cloning is O(1): every variant shares its content.
///
/// ```
/// use mektpoy::{Event, Message};
/// let event = Event::append(Message::user("u1", "hi"));
/// assert_eq!(event.event_type(), "user/message");
/// assert_eq!(Event::from_json(&event.to_json())?, event);
/// # Ok::<(), mektpoy::event::DecodeError>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Event {
    /// `request/header`: the effective configuration and tools of a request.
    Header(Arc<HeaderEvent>),
    /// `system/message`, `developer/message`, `user/message`, `assistant/message` or
    /// `tool/result`, by the message's role.
    Message(MessageEvent),
    /// `thinking/policy` or `thinking/floor`: how this session treats signed thinking blocks
    /// after a rewrite, and where each route's latest rewrite is. Log-only.
    Thinking(Arc<ThinkingEvent>),
    /// An event of a type this crate does not know, kept verbatim.
    Opaque(Arc<OpaqueEvent>),
}

/// The data of a `thinking/policy` or `thinking/floor` event.
///
/// JSON: `{"type":"thinking/policy","data":{"policy":"drop-block"}}` (at most once per session,
/// before any floor) and `{"type":"thinking/floor","data":{"provider","model","rewrite":
/// "tools"|"system"|"history","message"?:N}}`.
///
/// ```
/// use mektpoy::event::{ThinkingEvent, ThinkingPolicy};
/// use mektpoy::Event;
/// let event = Event::from_json(r#"{"type":"thinking/policy","data":{"policy":"drop-block"}}"#)?;
/// assert!(matches!(event, Event::Thinking(t) if *t == ThinkingEvent::Policy(ThinkingPolicy::DropBlock)));
/// # Ok::<(), mektpoy::event::DecodeError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ThinkingEvent {
    /// The session's thinking policy (the default, `StripThinking`, when absent).
    Policy(ThinkingPolicy),
    /// The route's latest rewriting request: signed thinking blocks of assistant messages
    /// appended before this event are subject to the policy on every later request of the
    /// route.
    Floor(ThinkingFloor),
}

/// Where a route's conversation was last rewritten before signed thinking blocks.
///
/// ```
/// use mektpoy::event::{Rewrite, ThinkingEvent};
/// use mektpoy::Event;
/// let line = r#"{"type":"thinking/floor","data":{"provider":"anthropic","model":"claude-fable-5-1","rewrite":"history","message":3}}"#;
/// let Event::Thinking(t) = Event::from_json(line)? else { panic!() };
/// let ThinkingEvent::Floor(floor) = &*t else { panic!() };
/// assert_eq!((floor.model.as_str(), floor.rewrite), ("claude-fable-5-1", Rewrite::History { message: 3 }));
/// # Ok::<(), mektpoy::event::DecodeError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThinkingFloor {
    /// The route's provider.
    pub provider: String,
    /// The route's model.
    pub model: String,
    /// What the rewriting request changed.
    pub rewrite: Rewrite,
}

/// What a rewriting request changed against the previous request of its route.
///
/// ```
/// use mektpoy::event::Rewrite;
/// assert_eq!(Rewrite::History { message: 2 }.as_str(), "history");
/// assert_eq!(Rewrite::Tools.to_string(), "the `tools` changed");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Rewrite {
    /// The serialized `tools`.
    Tools,
    /// The top-level `system`.
    System,
    /// The messages: the previous request's messages (thinking blocks ignored) are not a
    /// prefix of this one's.
    History {
        /// 0-based index of the first wire message that differs.
        message: usize,
    },
}

/// Spelling a rewrite.
///
/// ```
/// use mektpoy::event::Rewrite;
/// let kinds: Vec<&str> = [Rewrite::Tools, Rewrite::System, Rewrite::History { message: 0 }].iter().map(|r| r.as_str()).collect();
/// assert_eq!(kinds, ["tools", "system", "history"]);
/// ```
impl Rewrite {
    /// Every kind (`History` with message 0): decoding finds a spelling's kind here.
    pub(crate) const KINDS: [Rewrite; 3] = [
        Rewrite::Tools,
        Rewrite::System,
        Rewrite::History { message: 0 },
    ];

    /// The JSON spelling of the kind (`"tools"`, `"system"`, `"history"`).
    ///
    /// ```
    /// use mektpoy::event::Rewrite;
    /// assert_eq!(Rewrite::System.as_str(), "system");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            Rewrite::Tools => "tools",
            Rewrite::System => "system",
            Rewrite::History { .. } => "history",
        }
    }
}

impl std::fmt::Display for Rewrite {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Rewrite::Tools => f.write_str("the `tools` changed"),
            Rewrite::System => f.write_str("the top-level `system` changed"),
            Rewrite::History { message } => {
                write!(f, "the history changed at wire message {message}")
            }
        }
    }
}

/// The data of a `request/header` event.
///
/// ```
/// use mektpoy::event::{Reason, RequestHeader};
/// use mektpoy::{Config, Event};
/// let header = RequestHeader::new(Config::new("deepseek", "deepseek-flash"), vec![]);
/// let Event::Header(h) = Event::header(header, Reason::Initial) else { panic!() };
/// assert_eq!((h.reason, h.starts_series), (Reason::Initial, false));
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct HeaderEvent {
    /// The request header.
    pub header: RequestHeader,
    /// Why the header was logged.
    pub reason: Reason,
    /// Whether this header opens a request series (`startsSeries: true`; `false` reads as
    /// absent).
    pub starts_series: bool,
}

/// `{"config":{...},"tools"?:[...]}`: what a request was sent with.
///
/// ```
/// use mektpoy::event::{Reason, RequestHeader};
/// use mektpoy::{Config, Event, ToolSchema};
/// let header = RequestHeader::new(Config::new("p", "m"), vec![ToolSchema::no_input("read", "")]);
/// let line = Event::header(header, Reason::Initial).to_json();
/// assert!(line.starts_with(r#"{"type":"request/header","data":{"header":{"config":{"provider":"p","model":"m"},"tools":[{"name":"read""#), "{line}");
/// ```
#[derive(Clone, Debug, serde::Serialize)]
pub struct RequestHeader {
    /// Provider, model and the other request options.
    pub config: Config,
    /// The **effective** tools, never provider declarations. Shared with the fold.
    #[serde(
        skip_serializing_if = "encode::no_tools",
        serialize_with = "encode::tools"
    )]
    pub tools: Arc<[ToolSchema]>,
    /// Unknown `header` keys: kept, written back, ignored by comparisons.
    #[serde(flatten)]
    pub extra: IndexMap<String, Value>,
}

impl PartialEq for RequestHeader {
    /// [reference §4](crate::manual::reference#4-recording-a-request) step 5: §1 equivalence on
    /// `config` and on the tools in order; unknown header keys are ignored.
    fn eq(&self, other: &Self) -> bool {
        self.config == other.config && crate::vocab::same_tools(&self.tools, &other.tools)
    }
}

/// Building a header.
///
/// ```
/// use mektpoy::event::RequestHeader;
/// use mektpoy::Config;
/// let a = RequestHeader::new(Config::new("p", "m"), vec![]);
/// assert_eq!(a, RequestHeader::new(Config::new("p", "m"), vec![]));
/// ```
impl RequestHeader {
    /// A header with no unknown keys.
    ///
    /// ```
    /// use mektpoy::event::RequestHeader;
    /// use mektpoy::{Config, ToolSchema};
    /// let header = RequestHeader::new(Config::new("p", "m"), vec![ToolSchema::no_input("read", "")]);
    /// assert_eq!(header.tools[0].name(), "read");
    /// assert!(header.extra.is_empty());
    /// ```
    pub fn new(config: Config, tools: impl Into<Arc<[ToolSchema]>>) -> Self {
        RequestHeader {
            config,
            tools: tools.into(),
            extra: IndexMap::new(),
        }
    }
}

/// `{"provider","model",...}`: a request's configuration. Equality is §1 equivalence.
///
/// The options are written only through [`with`](Self::with), which refuses a key every
/// serializer writes itself, so a configuration holding one cannot be built (decoding a log
/// keeps what the log holds).
///
/// ```
/// use mektpoy::Config;
/// let a = Config::new("p", "m").with("max_tokens", 1024.into())?;
/// let b = Config::new("p", "m").with("max_tokens", serde_json::json!(1024.0))?;
/// assert_eq!(a, b, "equivalent JSON: the same configuration");
/// assert_eq!(serde_json::to_string(&a).unwrap(), r#"{"provider":"p","model":"m","max_tokens":1024}"#);
/// # Ok::<(), mektpoy::event::ConfigError>(())
/// ```
#[derive(Clone, Debug, serde::Serialize)]
pub struct Config {
    /// Provider id, e.g. `deepseek`.
    pub provider: String,
    /// Model id, e.g. `deepseek-flash`.
    pub model: String,
    /// Every other option (`max_tokens`, `temperature`, …), in order.
    #[serde(flatten)]
    pub(crate) extra: IndexMap<String, Value>,
}

/// Body keys every serializer writes itself (the Messages API, chat completions and the
/// Responses API alike): an option of one of these names would be a duplicate key on every
/// route, and `provider` or `model` would shadow the configuration's own field when its log
/// line is read back. The one table [`Config::with`] and the serializers read.
pub(crate) const RESERVED_OPTIONS: [&str; 5] = ["model", "provider", "system", "tools", "messages"];

/// Building a configuration.
///
/// ```
/// use mektpoy::Config;
/// let config = Config::new("deepseek", "deepseek-flash").with("max_tokens", 1024.into())?;
/// assert_eq!(config.extra()["max_tokens"], 1024);
/// # Ok::<(), mektpoy::event::ConfigError>(())
/// ```
impl Config {
    /// A configuration without options.
    ///
    /// ```
    /// let config = mektpoy::Config::new("deepseek", "deepseek-flash");
    /// assert_eq!((config.provider.as_str(), config.extra().len()), ("deepseek", 0));
    /// ```
    pub fn new(provider: impl Into<String>, model: impl Into<String>) -> Self {
        Config {
            provider: provider.into(),
            model: model.into(),
            extra: IndexMap::new(),
        }
    }

    /// The same configuration with the option `key` set to `value` (after the options set
    /// before; a key set again keeps its place and takes the new value).
    ///
    /// ```
    /// use mektpoy::{Config, event::ConfigError};
    /// let config = Config::new("deepseek", "deepseek-flash").with("max_tokens", 64.into())?;
    /// assert_eq!(config.extra()["max_tokens"], 64);
    /// assert_eq!(
    ///     config.with("system", "Be brief.".into()).unwrap_err(),
    ///     ConfigError::ReservedKey { key: "system" }
    /// );
    /// # Ok::<(), ConfigError>(())
    /// ```
    ///
    /// # Errors
    /// [`ConfigError::ReservedKey`] for `model`, `provider`, `system`, `tools` or `messages`:
    /// keys every serializer writes itself, which every request would refuse (and which the
    /// log could not read back as an option). Route-specific refusals (the Responses API's
    /// `instructions`, two names for one output limit, a forced `tool_choice`) depend on the
    /// route and stay with [`AgentLoop::set_options`](crate::AgentLoop::set_options) and the
    /// loop builder.
    pub fn with(mut self, key: impl Into<String>, value: Value) -> Result<Self, ConfigError> {
        let key = key.into();
        if let Some(&reserved) = RESERVED_OPTIONS.iter().find(|r| **r == key) {
            return Err(ConfigError::ReservedKey { key: reserved });
        }
        self.extra.insert(key, value);
        Ok(self)
    }

    /// [`with`](Self::with) for a key this crate names itself, none of them reserved.
    pub(crate) fn with_unreserved(mut self, key: &'static str, value: Value) -> Self {
        debug_assert!(!RESERVED_OPTIONS.contains(&key), "{key}");
        self.extra.insert(key.to_owned(), value);
        self
    }

    /// Every option (`max_tokens`, `temperature`, …), in the order set.
    ///
    /// ```
    /// let config = mektpoy::Config::new("p", "m").with("b", 1.into())?.with("a", 2.into())?;
    /// assert_eq!(config.extra().keys().collect::<Vec<_>>(), ["b", "a"]);
    /// # Ok::<(), mektpoy::event::ConfigError>(())
    /// ```
    #[must_use]
    pub fn extra(&self) -> &IndexMap<String, Value> {
        &self.extra
    }
}

/// Why [`Config::with`] refused an option.
///
/// ```
/// use mektpoy::{Config, event::ConfigError};
/// let err = Config::new("p", "m").with("tools", serde_json::json!([])).unwrap_err();
/// assert!(matches!(err, ConfigError::ReservedKey { key: "tools" }));
/// assert_eq!(err.to_string(), "`tools` is a body key every serializer writes itself, not an option");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// `model`, `provider`, `system`, `tools` or `messages`: a body key every serializer
    /// writes itself.
    #[error("`{key}` is a body key every serializer writes itself, not an option")]
    ReservedKey {
        /// The refused key.
        key: &'static str,
    },
}

impl PartialEq for Config {
    fn eq(&self, other: &Self) -> bool {
        self.provider == other.provider
            && self.model == other.model
            && crate::vocab::map_equivalent(&self.extra, &other.extra)
    }
}

/// How signed thinking blocks produced before a rewrite of the conversation are sent on a route
/// that binds thinking to the conversation before it ([reference
/// §7](crate::manual::reference#7-wire-serialization)). Chosen once per session and recorded in its
/// log, so a resumed loop applies the same policy.
///
/// ```
/// use mektpoy::event::ThinkingPolicy;
/// use mektpoy::Session;
/// assert_eq!(ThinkingPolicy::default(), ThinkingPolicy::StripThinking);
/// let session = Session::new("s");
/// session.set_thinking_policy(ThinkingPolicy::Refuse)?;
/// assert_eq!(session.thinking_policy(), ThinkingPolicy::Refuse);
/// # Ok::<(), mektpoy::session::AppendError>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ThinkingPolicy {
    /// Leave those blocks out of every later request of the route (the vendor accepts a
    /// history whose oldest thinking blocks are gone) and report how many were left out.
    #[default]
    StripThinking,
    /// Send them with `thinking.block_binding.prefix_mismatch_behavior: "drop_block"` and the
    /// `thinking-binding-controls-2026-08-01` beta. **Costly**: the vendor drops the failing
    /// block *and every thinking block after it*, so while a pre-floor block stays in the
    /// history every newer block is dropped too.
    DropBlock,
    /// Refuse the request with a typed error naming what the rewrite changed.
    Refuse,
}

/// Spelling a policy.
///
/// ```
/// use mektpoy::event::ThinkingPolicy;
/// let p = ThinkingPolicy::DropBlock;
/// assert_eq!(ThinkingPolicy::from_str_opt(p.as_str()), Some(p));
/// ```
impl ThinkingPolicy {
    /// The JSON spelling (`"strip-thinking"`, `"drop-block"`, `"refuse"`).
    ///
    /// ```
    /// use mektpoy::event::ThinkingPolicy;
    /// assert_eq!(ThinkingPolicy::DropBlock.as_str(), "drop-block");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            ThinkingPolicy::StripThinking => "strip-thinking",
            ThinkingPolicy::DropBlock => "drop-block",
            ThinkingPolicy::Refuse => "refuse",
        }
    }

    /// The policy of a JSON spelling.
    ///
    /// ```
    /// use mektpoy::event::ThinkingPolicy;
    /// assert_eq!(ThinkingPolicy::from_str_opt("refuse"), Some(ThinkingPolicy::Refuse));
    /// assert_eq!(ThinkingPolicy::from_str_opt("Refuse"), None);
    /// ```
    pub fn from_str_opt(s: &str) -> Option<Self> {
        [
            ThinkingPolicy::StripThinking,
            ThinkingPolicy::DropBlock,
            ThinkingPolicy::Refuse,
        ]
        .into_iter()
        .find(|p| p.as_str() == s)
    }
}

/// Why a header was logged (`reason`).
///
/// ```
/// use mektpoy::event::Reason;
/// use mektpoy::{AgentLoop, ContentBlock, Event, Message, Session, ToolSchema, route_for};
/// let mut agent = AgentLoop::builder(Session::new("s"), route_for("acme", "acme-1"))
///     .model("acme-1")
///     .build()?;
/// agent.user_turn([Message::user("u1", "hi")])?;
/// agent.append(agent.assistant("a1", [ContentBlock::text("ok")]))?;
/// agent.set_tools([ToolSchema::no_input("read", "")])?;
/// agent.user_turn([Message::user("u2", "more")])?;
/// let reasons: Vec<Reason> = agent.session().events().iter().filter_map(|e| match e {
///     Event::Header(h) => Some(h.reason),
///     _ => None,
/// }).collect();
/// assert_eq!(reasons, [Reason::Initial, Reason::Change]);
/// # Ok::<(), mektpoy::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reason {
    /// The first header of the log.
    Initial,
    /// The first header of a recorder over a log that already has one.
    Resume,
    /// The configuration or the tools changed.
    Change,
    /// Nothing changed but a request series starts.
    Series,
}

/// Spelling a reason.
///
/// ```
/// use mektpoy::event::Reason;
/// assert_eq!(Reason::Initial.as_str(), "initial");
/// ```
impl Reason {
    /// The JSON spelling.
    ///
    /// ```
    /// use mektpoy::event::Reason;
    /// assert_eq!(Reason::Change.as_str(), "change");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Initial => "initial",
            Reason::Resume => "resume",
            Reason::Change => "change",
            Reason::Series => "series",
        }
    }

    /// The reason of a JSON spelling (the inverse of [`as_str`](Self::as_str)).
    pub(crate) fn from_str_opt(s: &str) -> Option<Self> {
        [
            Reason::Initial,
            Reason::Resume,
            Reason::Change,
            Reason::Series,
        ]
        .into_iter()
        .find(|r| r.as_str() == s)
    }
}

/// The data of a message event plus its surface operation.
///
/// ```
/// use mektpoy::event::{MessageEvent, SurfaceOp};
/// use mektpoy::{Event, Message};
/// let event = MessageEvent { turn: Some(1), step: Some(1), ..MessageEvent::new(Message::user("u1", "hi"), Some(SurfaceOp::Append)) };
/// assert!(Event::from(event).to_json().contains(r#""turn":1,"step":1"#));
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct MessageEvent {
    /// The message; its role decides the event type.
    pub message: Message,
    /// The loop turn, when the loop records it.
    pub turn: Option<u64>,
    /// The step within the turn, when the loop records it.
    pub step: Option<u64>,
    /// On developer messages: the header whose tools the additions name.
    pub header_seq: Option<Seq>,
    /// How the message joins the surface; `None` = log-only.
    pub surface_op: Option<SurfaceOp>,
}

/// How a message event changes the model-visible history (the surface).
///
/// ```
/// use mektpoy::event::SurfaceOp;
/// use mektpoy::{Event, Message};
/// assert_eq!(Event::append(Message::user("u1", "hi")).surface_op(), Some(SurfaceOp::Append));
/// let compaction = Event::replace(Message::user("c1", "summary"), 0, 4);
/// assert_eq!(compaction.surface_op(), Some(SurfaceOp::Replace { start: 0, end: 4 }));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SurfaceOp {
    /// `"append"`: joins the end of the surface.
    Append,
    /// `{"op":"replace","start":i,"end":j}`: nodes `start..=end` are removed and this
    /// event's node takes their place.
    Replace {
        /// First replaced node (0-based).
        start: usize,
        /// Last replaced node (inclusive).
        end: usize,
    },
}

/// A surface operation, as an event carries it.
///
/// ```
/// use mektpoy::event::SurfaceOp;
/// use mektpoy::{Event, Message};
/// let line = Event::replace(Message::user("c1", "summary"), 0, 2).to_json();
/// assert!(line.ends_with(r#""surfaceOp":{"op":"replace","start":0,"end":2}}"#), "{line}");
/// assert_eq!(Event::from_json(&line)?.surface_op(), Some(SurfaceOp::Replace { start: 0, end: 2 }));
/// # Ok::<(), mektpoy::event::DecodeError>(())
/// ```
impl SurfaceOp {
    /// The spelling of `Append`.
    pub(crate) const APPEND: &'static str = "append";
    /// The `op` of `Replace`.
    pub(crate) const REPLACE: &'static str = "replace";
}

/// An event of unknown type, kept verbatim.
///
/// Built only by [`OpaqueEvent::new`] or decoding, so its line always reads back as the same
/// opaque event: its type is never one this crate decodes, and its fields never hold `type` or
/// `surfaceOp`.
///
/// ```
/// use mektpoy::Event;
/// let line = r#"{"type":"app/note","data":{"text":"kept"}}"#;
/// let Event::Opaque(o) = Event::from_json(line)? else { panic!() };
/// assert_eq!(o.event_type(), "app/note");
/// assert_eq!(Event::Opaque(o).to_json(), line, "written back as read");
/// # Ok::<(), mektpoy::event::DecodeError>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct OpaqueEvent {
    event_type: String,
    fields: IndexMap<String, Value>,
    surface_op: Option<SurfaceOp>,
}

/// Event types this crate decodes (and `session`, the session line's), which an opaque event
/// cannot have.
pub(crate) fn is_known_event_type(event_type: &str) -> bool {
    matches!(
        event_type,
        "request/header" | "thinking/policy" | "thinking/floor" | "session"
    ) || crate::vocab::Role::for_event_type(event_type).is_some()
}

/// Building and reading an event of a type this crate does not know.
///
/// ```
/// use mektpoy::event::OpaqueEvent;
/// use mektpoy::{Event, Session};
/// let note = OpaqueEvent::new("app/note", Default::default(), None)?;
/// let session = Session::new("s");
/// session.append(Event::from(note))?;
/// assert_eq!(session.events()[0].event_type(), "app/note");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
impl OpaqueEvent {
    /// An event of type `event_type` with `fields` (every key but `type` and `surfaceOp`, in
    /// order) and, when it is a surface node, its surface operation.
    ///
    /// ```
    /// use mektpoy::event::{OpaqueError, OpaqueEvent, SurfaceOp};
    /// let note = OpaqueEvent::new("note/x", Default::default(), Some(SurfaceOp::Append))?;
    /// assert_eq!(note.event_type(), "note/x");
    /// assert!(matches!(
    ///     OpaqueEvent::new("user/message", Default::default(), None),
    ///     Err(OpaqueError::KnownType { .. })
    /// ));
    /// # Ok::<(), OpaqueError>(())
    /// ```
    ///
    /// # Errors
    /// [`OpaqueError::KnownType`] when `event_type` is one this crate decodes, or `session`
    /// (the line would read back as another event, or as a second session line);
    /// [`OpaqueError::ReservedKey`] when `fields` holds `type` or `surfaceOp`, which the line
    /// writes itself.
    pub fn new(
        event_type: impl Into<String>,
        fields: IndexMap<String, Value>,
        surface_op: Option<SurfaceOp>,
    ) -> Result<Self, OpaqueError> {
        let event_type = event_type.into();
        if is_known_event_type(&event_type) {
            return Err(OpaqueError::KnownType { event_type });
        }
        if let Some(key) = fields.keys().find(|k| *k == "type" || *k == "surfaceOp") {
            return Err(OpaqueError::ReservedKey { key: key.clone() });
        }
        Ok(OpaqueEvent {
            event_type,
            fields,
            surface_op,
        })
    }

    /// A decoded event, which may have the type `session` (the session line's): loading and
    /// `append` refuse it.
    pub(crate) fn decoded(
        event_type: String,
        fields: IndexMap<String, Value>,
        surface_op: Option<SurfaceOp>,
    ) -> Self {
        OpaqueEvent {
            event_type,
            fields,
            surface_op,
        }
    }

    /// Its `type`.
    ///
    /// ```
    /// use mektpoy::event::OpaqueEvent;
    /// let note = OpaqueEvent::new("app/note", Default::default(), None)?;
    /// assert_eq!(note.event_type(), "app/note");
    /// # Ok::<(), mektpoy::event::OpaqueError>(())
    /// ```
    #[must_use]
    pub fn event_type(&self) -> &str {
        &self.event_type
    }

    /// Every key but `type` and `surfaceOp`, in order.
    ///
    /// ```
    /// use mektpoy::Event;
    /// let Event::Opaque(o) = Event::from_json(r#"{"type":"app/note","data":{"text":"kept"}}"#)? else { panic!() };
    /// assert_eq!(o.fields()["data"]["text"], "kept");
    /// # Ok::<(), mektpoy::event::DecodeError>(())
    /// ```
    #[must_use]
    pub fn fields(&self) -> &IndexMap<String, Value> {
        &self.fields
    }

    /// With a surface operation, the event is a surface node that contributes no message.
    ///
    /// ```
    /// use mektpoy::event::{OpaqueEvent, SurfaceOp};
    /// let marker = OpaqueEvent::new("app/marker", Default::default(), Some(SurfaceOp::Append))?;
    /// assert_eq!(marker.surface_op(), Some(SurfaceOp::Append));
    /// # Ok::<(), mektpoy::event::OpaqueError>(())
    /// ```
    #[must_use]
    pub fn surface_op(&self) -> Option<SurfaceOp> {
        self.surface_op
    }
}

/// Why [`OpaqueEvent::new`] refused its input.
///
/// ```
/// use mektpoy::event::{OpaqueError, OpaqueEvent};
/// let refused = OpaqueEvent::new("user/message", Default::default(), None).unwrap_err();
/// assert!(matches!(refused, OpaqueError::KnownType { .. }));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OpaqueError {
    /// The type is one this crate decodes, or `session`.
    #[error("an opaque event cannot have the known type `{event_type}`")]
    KnownType {
        /// The known type.
        event_type: String,
    },
    /// A field named `type` or `surfaceOp`, which would shadow the line's own.
    #[error("unknown field `{key}` shadows a field of the event")]
    ReservedKey {
        /// The shadowing key.
        key: String,
    },
}

impl From<OpaqueEvent> for Event {
    fn from(o: OpaqueEvent) -> Self {
        Event::Opaque(Arc::new(o))
    }
}

/// The `type` of a `request/header` event.
pub(crate) const HEADER_TYPE: &str = "request/header";
/// The `type` of a `thinking/policy` event.
pub(crate) const POLICY_TYPE: &str = "thinking/policy";
/// The `type` of a `thinking/floor` event.
pub(crate) const FLOOR_TYPE: &str = "thinking/floor";

/// Building events, and their JSON lines.
///
/// ```
/// use mektpoy::{Event, Message};
/// let event = Event::append(Message::user("u1", "hi"));
/// assert_eq!(Event::from_json(&event.to_json())?, event);
/// # Ok::<(), mektpoy::event::DecodeError>(())
/// ```
impl Event {
    /// A message event appended to the surface.
    ///
    /// ```
    /// use mektpoy::{Event, Message, Session};
    /// let session = Session::new("s");
    /// session.append(Event::append(Message::user("u1", "hi")))?;
    /// assert_eq!(session.messages().len(), 1);
    /// # Ok::<(), mektpoy::session::AppendError>(())
    /// ```
    pub fn append(message: Message) -> Self {
        Event::Message(MessageEvent::new(message, Some(SurfaceOp::Append)))
    }

    /// A message event replacing surface nodes `start..=end`.
    ///
    /// ```
    /// use mektpoy::{Event, Message, Session};
    /// let session = Session::new("s");
    /// for (i, text) in ["a", "b", "c"].into_iter().enumerate() {
    ///     session.append(Event::append(Message::user(format!("u{i}"), text)))?;
    /// }
    /// // A compaction: surface nodes 0..=1 become one summary.
    /// session.append(Event::replace(Message::user("c1", "a and b"), 0, 1))?;
    /// let ids: Vec<String> = session.messages().iter().map(|m| m.id().to_owned()).collect();
    /// assert_eq!(ids, ["c1", "u2"]);
    /// # Ok::<(), mektpoy::session::AppendError>(())
    /// ```
    pub fn replace(message: Message, start: usize, end: usize) -> Self {
        Event::Message(MessageEvent::new(
            message,
            Some(SurfaceOp::Replace { start, end }),
        ))
    }

    /// A `request/header` event.
    ///
    /// ```
    /// use mektpoy::event::{Reason, RequestHeader};
    /// use mektpoy::{Config, Event, Session};
    /// let session = Session::new("s");
    /// session.append(Event::header(RequestHeader::new(Config::new("p", "m"), vec![]), Reason::Initial))?;
    /// assert_eq!(session.request_header().map(|(seq, _)| seq.0), Some(0));
    /// # Ok::<(), mektpoy::session::AppendError>(())
    /// ```
    pub fn header(header: RequestHeader, reason: Reason) -> Self {
        Event::Header(Arc::new(HeaderEvent {
            header,
            reason,
            starts_series: false,
        }))
    }

    /// A developer message appended to the surface, naming `header_seq` when it has
    /// additions.
    ///
    /// ```
    /// use mektpoy::event::{Reason, RequestHeader};
    /// use mektpoy::{Config, Event, Message, Session, ToolSchema};
    /// let session = Session::new("s");
    /// let tools = vec![ToolSchema::no_input("grep", "")];
    /// let header = session.append(Event::header(RequestHeader::new(Config::new("p", "m"), tools), Reason::Initial))?;
    /// let note: Message = serde_json::from_str(r#"{"id":"d1","role":"developer","content":[{"type":"text","text":"note"}],"source":{"kind":"tool-registry"}}"#)?;
    /// session.append(Event::developer(note, Some(header)))?;
    /// assert!(session.events()[1].to_json().contains(r#""headerSeq":0"#));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn developer(message: Message, header_seq: Option<Seq>) -> Self {
        Event::Message(MessageEvent {
            header_seq,
            ..MessageEvent::new(message, Some(SurfaceOp::Append))
        })
    }

    /// The log `type` of this event.
    ///
    /// ```
    /// use mektpoy::{Event, Message};
    /// assert_eq!(Event::append(Message::tool_result("r1", "c1", "ok")).event_type(), "tool/result");
    /// ```
    pub fn event_type(&self) -> &str {
        match self {
            Event::Header(_) => HEADER_TYPE,
            Event::Message(m) => m.message.role().event_type(),
            Event::Thinking(t) => match **t {
                ThinkingEvent::Policy(_) => POLICY_TYPE,
                ThinkingEvent::Floor(_) => FLOOR_TYPE,
            },
            Event::Opaque(o) => &o.event_type,
        }
    }

    /// The event's surface operation, if it is a surface node.
    ///
    /// ```
    /// use mektpoy::event::{Reason, RequestHeader};
    /// use mektpoy::{Config, Event};
    /// let header = Event::header(RequestHeader::new(Config::new("p", "m"), vec![]), Reason::Initial);
    /// assert_eq!(header.surface_op(), None, "headers are not on the surface");
    /// ```
    pub fn surface_op(&self) -> Option<SurfaceOp> {
        match self {
            Event::Header(_) | Event::Thinking(_) => None,
            Event::Message(m) => m.surface_op,
            Event::Opaque(o) => o.surface_op,
        }
    }

    /// Decodes an event from its JSON line.
    ///
    /// The line is decoded straight into the event, without a `serde_json::Value` of the whole
    /// line: O(size of the line), allocating about what the event keeps.
    ///
    /// ```
    /// use mektpoy::event::DecodeError;
    /// use mektpoy::Event;
    /// let line = r#"{"type":"user/message","data":{"message":{"id":"u1","role":"user","content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}}},"surfaceOp":"append"}"#;
    /// assert_eq!(Event::from_json(line)?.to_json(), line);
    /// let twice = r#"{"type":"x","type":"y","data":{}}"#;
    /// assert!(matches!(Event::from_json(twice), Err(DecodeError::DuplicateKey { .. })));
    /// # Ok::<(), DecodeError>(())
    /// ```
    ///
    /// # Errors
    /// [`DecodeError::Json`] when the text is not one JSON value (or holds a number serde_json
    /// cannot represent, such as `1e400`); [`DecodeError::DuplicateKey`] when an object, at any
    /// depth, holds one key twice (`{"reason":"bogus","reason":"change"}` is refused, not read
    /// as `change`); otherwise the shape fault, see [`Event::from_value`].
    pub fn from_json(line: &str) -> Result<Self, DecodeError> {
        decode::from_json(line)
    }

    /// Decodes an event from a JSON value.
    ///
    /// A `Value` cannot hold a key twice (serde_json kept the last when it parsed one), so
    /// prefer [`Event::from_json`] for text.
    ///
    /// ```
    /// use mektpoy::event::DecodeError;
    /// use mektpoy::Event;
    /// let value = serde_json::json!({"type": "app/note", "data": {}});
    /// assert_eq!(Event::from_value(value)?.event_type(), "app/note");
    /// assert!(matches!(Event::from_value(serde_json::json!([])), Err(DecodeError::NotAnObject)));
    /// # Ok::<(), DecodeError>(())
    /// ```
    ///
    /// # Errors
    /// A [`DecodeError`] naming the first shape fault: a missing `type` or `data`, a missing or
    /// unknown `reason`, a header without `config.provider` / `config.model`, a malformed tool,
    /// a `surfaceOp` on a header or of another form, a role that does not match the event
    /// type, a malformed known content block.
    pub fn from_value(value: Value) -> Result<Self, DecodeError> {
        decode::from_value(value)
    }

    /// The compact JSON line of this event ([reference
    /// §1](crate::manual::reference#1-vocabulary-and-json) key order), without the newline.
    ///
    /// ```
    /// use mektpoy::{Event, Message};
    /// let line = Event::append(Message::user("u1", "hi")).to_json();
    /// assert_eq!(line, r#"{"type":"user/message","data":{"message":{"id":"u1","role":"user","content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}}},"surfaceOp":"append"}"#);
    /// ```
    pub fn to_json(&self) -> String {
        encode::event(self)
    }

    /// Whether [`to_json`](Self::to_json) is exactly `text`, without building it.
    pub(crate) fn encodes_as(&self, text: &str) -> bool {
        encode::encodes_as(self, text)
    }
}

/// `text` as one JSONL line: trimmed, and with JSON whitespace outside strings removed when it
/// holds a line break (inside strings a line break is always escaped). Other bytes are kept.
pub(crate) fn single_line(text: &str) -> std::borrow::Cow<'_, str> {
    let text = text.trim();
    if !text.contains(['\n', '\r']) {
        return text.into();
    }
    let mut out = String::with_capacity(text.len());
    let (mut in_string, mut escaped) = (false, false);
    for c in text.chars() {
        if in_string {
            out.push(c);
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
        } else if !matches!(c, ' ' | '\t' | '\n' | '\r') {
            in_string = c == '"';
            out.push(c);
        }
    }
    out.into()
}

/// Building a message event with its loop position.
///
/// ```
/// use mektpoy::event::{MessageEvent, SurfaceOp};
/// use mektpoy::Message;
/// let event = MessageEvent { step: Some(2), ..MessageEvent::new(Message::user("u1", "hi"), Some(SurfaceOp::Append)) };
/// assert_eq!((event.turn, event.step), (None, Some(2)));
/// ```
impl MessageEvent {
    /// A message event with no turn, step or header reference.
    ///
    /// ```
    /// use mektpoy::event::MessageEvent;
    /// use mektpoy::Message;
    /// let event = MessageEvent::new(Message::user("u1", "hi"), None);
    /// assert_eq!((event.turn, event.step, event.header_seq), (None, None, None));
    /// ```
    pub fn new(message: Message, surface_op: Option<SurfaceOp>) -> Self {
        MessageEvent {
            message,
            turn: None,
            step: None,
            header_seq: None,
            surface_op,
        }
    }
}

impl From<MessageEvent> for Event {
    fn from(m: MessageEvent) -> Self {
        Event::Message(m)
    }
}

impl From<HeaderEvent> for Event {
    fn from(h: HeaderEvent) -> Self {
        Event::Header(Arc::new(h))
    }
}
