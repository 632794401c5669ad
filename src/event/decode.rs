//! JSON → `Event`, one typed error per shape fault.
//!
//! The text is decoded once, by visitors that build the typed event as they read it: no
//! `serde_json::Value` tree of the whole line is made first (a `Value` object costs a B-tree node
//! of about 600 bytes, which made a line of small content blocks take 20 times its size to
//! decode). Values whose shape this crate does not know (config options, tool parameters,
//! unknown blocks, opaque events) are still `Value`s. Every object, at every depth, is checked
//! for a key that appears twice ([`DecodeError::DuplicateKey`]).
//!
//! Each visitor collects its object's fields and checks them once the object is read, in the
//! order the checks are documented, so which fault is reported does not depend on the key
//! order of the line. A `data` that comes before `type` is kept as raw text (no allocation)
//! and decoded once `type` is known.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use indexmap::IndexMap;
use serde::Deserializer;
use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::{
    Config, Event, HeaderEvent, MessageEvent, OpaqueEvent, Reason, RequestHeader, Rewrite,
    SurfaceOp, ThinkingEvent, ThinkingFloor, ThinkingPolicy,
};
use crate::vocab::strict::{self, Key, Seen, Strict, StrictValue, Strictly, wrong_shape};
use crate::vocab::{
    BlockError, BlockSeed, ContentBlock, Message, MessageSource, Role, Seq, SourceError, ToolError,
    ToolSchema, ToolSeed,
};

/// Why a JSON value is not a well-formed event. Carries no log position: the session wraps
/// it with the event's `Seq` and the file line.
///
/// ```
/// use mektpoy::event::DecodeError;
/// use mektpoy::Event;
/// assert!(matches!(Event::from_json("{"), Err(DecodeError::Json(_))));
/// assert!(matches!(Event::from_json(r#"{"data":{}}"#), Err(DecodeError::MissingType)));
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The text is not one JSON value, or holds a number serde_json cannot represent.
    #[error("malformed JSON")]
    Json(#[source] serde_json::Error),
    /// An object, at any depth, holds one key twice. JSON parsers disagree on which one wins
    /// (serde_json keeps the last), so such a line would not mean one thing.
    #[error("an object holds the key `{key}` twice")]
    DuplicateKey {
        /// The repeated key (unescaped).
        key: String,
    },
    /// The event is not a JSON object.
    #[error("an event must be a JSON object")]
    NotAnObject,
    /// No string `type`.
    #[error("the event has no string `type`")]
    MissingType,
    /// A known event without an object `data`.
    #[error("`{event_type}` event has no object `data`")]
    MissingData {
        /// The event type.
        event_type: String,
    },
    /// A field has the wrong shape (`what` names it).
    #[error("`{what}` is missing or has the wrong type")]
    Field {
        /// The field, as a path such as `data.header.config`.
        what: &'static str,
    },
    /// A header without `reason`.
    #[error("request/header has no `reason`")]
    MissingReason,
    /// A header whose `reason` is not `initial`, `resume`, `change` or `series`.
    #[error("unknown reason `{0}`")]
    UnknownReason(String),
    /// A header whose config lacks `provider` or `model` (or has a non-string one).
    #[error("header config has no string `{0}`")]
    MissingConfig(&'static str),
    /// A malformed tool in a header.
    #[error("header tool {index} is malformed")]
    Tool {
        /// 0-based position in `tools`.
        index: usize,
        /// What is wrong with it.
        #[source]
        source: ToolError,
    },
    /// A `surfaceOp` on a `request/header`.
    #[error("a request/header cannot carry a surfaceOp")]
    SurfaceOpOnHeader,
    /// A `surfaceOp` on a log-only event (`thinking/policy`, `thinking/floor`).
    #[error("a {event_type} event cannot carry a surfaceOp")]
    SurfaceOpOnLogEvent {
        /// The event type.
        event_type: String,
    },
    /// A `surfaceOp` that is neither `"append"` nor `{"op":"replace","start":i,"end":j}` with
    /// `i <= j`.
    #[error("invalid surfaceOp {0}")]
    InvalidSurfaceOp(Value),
    /// A message whose role does not match its event type.
    #[error("`{event_type}` event carries a `{role}` message")]
    RoleMismatch {
        /// The event type.
        event_type: String,
        /// The message's role.
        role: Role,
    },
    /// A message field is missing or malformed.
    #[error("message field `{what}` is missing or malformed")]
    MessageField {
        /// The field.
        what: &'static str,
    },
    /// A malformed block of a known type.
    #[error("message {id}: content block {index} is malformed: {reason}")]
    MalformedBlock {
        /// The message id.
        id: String,
        /// 0-based block position.
        index: usize,
        /// What is wrong.
        reason: BlockError,
    },
    /// A malformed message source.
    #[error("message {id}: malformed source: {reason}")]
    MalformedSource {
        /// The message id.
        id: String,
        /// What is wrong.
        reason: SourceError,
    },
}

type Obj = Map<String, Value>;

/// What one decode shares: the duplicate-key record, and whether the input is text (so that a
/// `data` read before `type` can be kept as raw text) or a `Value`.
struct Ctx {
    strict: Strict,
    text: bool,
}

/// Decodes one event line.
pub(super) fn from_json(line: &str) -> Result<Event, DecodeError> {
    let ctx = Ctx {
        strict: Strict::default(),
        text: true,
    };
    match strict::from_str(line, EventSeed(&ctx)) {
        Ok(event) => event,
        Err(e) => Err(json_error(&ctx, e)),
    }
}

/// Decodes an event from a `Value` (whose objects cannot repeat a key).
pub(super) fn from_value(value: Value) -> Result<Event, DecodeError> {
    let ctx = Ctx {
        strict: Strict::default(),
        text: false,
    };
    EventSeed(&ctx)
        .deserialize(value)
        .unwrap_or_else(|e| Err(json_error(&ctx, e)))
}

fn json_error(ctx: &Ctx, e: serde_json::Error) -> DecodeError {
    match ctx.strict.duplicate() {
        Some(key) => DecodeError::DuplicateKey { key },
        None => DecodeError::Json(e),
    }
}

/// An object whose fields a [`Shape`] decodes as they come, checking for repeated keys.
/// Its value is `None` when the JSON value is not an object.
struct Object<'c, S>(S, &'c Ctx);

/// The fields of one kind of object.
trait Shape<'de> {
    type Out;
    /// Decodes the value of `key` (each key comes once).
    fn entry<A: MapAccess<'de>>(
        &mut self,
        key: Cow<'de, str>,
        map: &mut A,
        ctx: &Ctx,
    ) -> Result<(), A::Error>;
    /// Checks the collected fields.
    fn finish(self) -> Self::Out;
}

impl<'de, S: Shape<'de>> DeserializeSeed<'de> for Object<'_, S> {
    type Value = Option<S::Out>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<S> Strictly for Object<'_, S> {
    fn strict(&self) -> &Strict {
        &self.1.strict
    }
}

impl<'de, S: Shape<'de>> Visitor<'de> for Object<'_, S> {
    type Value = Option<S::Out>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let Object(mut shape, ctx) = self;
        let mut seen = Seen::default();
        while let Some(Key(key)) = map.next_key::<Key<'de>>()? {
            seen.check(&key, &ctx.strict)?;
            shape.entry(key, &mut map, ctx)?;
        }
        Ok(Some(shape.finish()))
    }
    wrong_shape!(object, |_| None);
}

/// Reads a value the caller checks itself.
fn value<'de, A: MapAccess<'de>>(map: &mut A, ctx: &Ctx) -> Result<Value, A::Error> {
    map.next_value_seed(StrictValue(&ctx.strict))
}

/// Reads a value nobody uses, still refusing a repeated key inside it.
fn skip<'de, A: MapAccess<'de>>(map: &mut A, ctx: &Ctx) -> Result<(), A::Error> {
    value(map, ctx).map(drop)
}

// ---- The envelope ----

#[derive(Clone, Copy)]
enum Kind {
    Header,
    Thinking,
    Message(Role),
    Opaque,
}

fn kind(event_type: &str) -> Kind {
    match event_type {
        super::HEADER_TYPE => Kind::Header,
        super::POLICY_TYPE | super::FLOOR_TYPE => Kind::Thinking,
        _ => Role::for_event_type(event_type).map_or(Kind::Opaque, Kind::Message),
    }
}

/// `data` as read: typed when `type` came first, otherwise kept until it is known.
enum Data<'de> {
    Header(Option<Result<HeaderEvent, DecodeError>>),
    Message(Option<Result<MessageParts, DecodeError>>),
    Value(Value),
    /// Read before `type`, from text: the raw slice, decoded later.
    Raw(&'de RawValue),
}

#[derive(Clone, Copy)]
struct EventSeed<'c>(&'c Ctx);

impl<'de> DeserializeSeed<'de> for EventSeed<'_> {
    type Value = Result<Event, DecodeError>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl Strictly for EventSeed<'_> {
    fn strict(&self) -> &Strict {
        &self.0.strict
    }
}

impl<'de> Visitor<'de> for EventSeed<'_> {
    type Value = Result<Event, DecodeError>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an event object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let ctx = self.0;
        let mut event_type: Option<Value> = None;
        let mut surface: Option<Value> = None;
        // `data` and its position among the other keys (an opaque event keeps their order).
        let mut data: Option<(usize, Data<'de>)> = None;
        let mut rest: IndexMap<String, Value> = IndexMap::new();
        let mut seen = Seen::default();
        while let Some(Key(key)) = map.next_key::<Key<'de>>()? {
            seen.check(&key, &ctx.strict)?;
            match key.as_ref() {
                "type" => event_type = Some(value(&mut map, ctx)?),
                "surfaceOp" => surface = Some(value(&mut map, ctx)?),
                "data" => {
                    let known = event_type.as_ref().map(|t| t.as_str().map(kind));
                    let d = match known {
                        Some(Some(Kind::Header)) => {
                            Data::Header(map.next_value_seed(Object(HeaderData::default(), ctx))?)
                        }
                        Some(Some(Kind::Message(_))) => {
                            Data::Message(map.next_value_seed(Object(MessageData::default(), ctx))?)
                        }
                        Some(_) => Data::Value(value(&mut map, ctx)?),
                        None if ctx.text => Data::Raw(map.next_value::<&'de RawValue>()?),
                        None => Data::Value(value(&mut map, ctx)?),
                    };
                    data = Some((rest.len(), d));
                }
                _ => {
                    let v = value(&mut map, ctx)?;
                    rest.insert(key.into_owned(), v);
                }
            }
        }
        finish_event(ctx, event_type, surface, data, rest)
    }

    wrong_shape!(object, |_| Err(DecodeError::NotAnObject));
}

/// Decodes `data` kept before `type` was known with `seed`.
fn decode_late<'de, S: DeserializeSeed<'de>, E: de::Error>(
    data: Data<'de>,
    seed: S,
) -> Result<Option<S::Value>, E> {
    match data {
        Data::Raw(raw) => strict::from_str(raw.get(), seed)
            .map(Some)
            .map_err(E::custom),
        Data::Value(v) => seed.deserialize(v).map(Some).map_err(E::custom),
        // Typed already, as another kind: cannot happen (the kind comes from the one `type`).
        Data::Header(_) | Data::Message(_) => Ok(None),
    }
}

fn finish_event<E: de::Error>(
    ctx: &Ctx,
    event_type: Option<Value>,
    surface: Option<Value>,
    data: Option<(usize, Data<'_>)>,
    mut rest: IndexMap<String, Value>,
) -> Result<Result<Event, DecodeError>, E> {
    let Some(Value::String(event_type)) = event_type else {
        return Ok(Err(DecodeError::MissingType));
    };
    let surface_op = match surface.map(surface_op).transpose() {
        Ok(op) => op,
        Err(e) => return Ok(Err(e)),
    };
    let missing = || DecodeError::MissingData {
        event_type: event_type.clone(),
    };
    Ok(match kind(&event_type) {
        Kind::Header => {
            if surface_op.is_some() {
                return Ok(Err(DecodeError::SurfaceOpOnHeader));
            }
            let header = match data {
                Some((_, Data::Header(h))) => h,
                Some((_, d)) => decode_late(d, Object(HeaderData::default(), ctx))?.flatten(),
                None => None,
            };
            match header {
                Some(h) => h.map(|h| Event::Header(Arc::new(h))),
                None => Err(missing()),
            }
        }
        Kind::Thinking => {
            if surface_op.is_some() {
                return Ok(Err(DecodeError::SurfaceOpOnLogEvent { event_type }));
            }
            let value = match data {
                Some((_, Data::Value(v))) => Some(v),
                Some((_, d)) => decode_late(d, StrictValue(&ctx.strict))?,
                None => None,
            };
            match value {
                Some(Value::Object(data)) => {
                    thinking_event(&event_type, &data).map(|t| Event::Thinking(Arc::new(t)))
                }
                _ => Err(missing()),
            }
        }
        Kind::Message(role) => {
            let parts = match data {
                Some((_, Data::Message(m))) => m,
                Some((_, d)) => decode_late(d, Object(MessageData::default(), ctx))?.flatten(),
                None => None,
            };
            match parts {
                Some(parts) => parts
                    .and_then(|p| message_event(p, &event_type, role, surface_op))
                    .map(Event::Message),
                None => Err(missing()),
            }
        }
        Kind::Opaque => {
            if let Some((at, d)) = data {
                let value = match d {
                    Data::Value(v) => Some(v),
                    d => decode_late(d, StrictValue(&ctx.strict))?,
                };
                if let Some(v) = value {
                    rest.shift_insert(at, "data".to_owned(), v);
                }
            }
            // Fields keep the line's key order; the map is kept, so without spare room.
            rest.shrink_to_fit();
            Ok(Event::Opaque(Arc::new(OpaqueEvent::decoded(
                event_type, rest, surface_op,
            ))))
        }
    })
}

fn thinking_event(event_type: &str, data: &Obj) -> Result<ThinkingEvent, DecodeError> {
    let text = |key: &str, what: &'static str| {
        data.get(key)
            .and_then(Value::as_str)
            .ok_or(DecodeError::Field { what })
    };
    if event_type == super::POLICY_TYPE {
        let policy = text("policy", "data.policy")?;
        return ThinkingPolicy::from_str_opt(policy)
            .map(ThinkingEvent::Policy)
            .ok_or(DecodeError::Field {
                what: "data.policy",
            });
    }
    let kind = text("rewrite", "data.rewrite")?;
    let rewrite = match Rewrite::KINDS.into_iter().find(|k| k.as_str() == kind) {
        Some(Rewrite::History { .. }) => Rewrite::History {
            message: data
                .get("message")
                .and_then(Value::as_u64)
                .and_then(|m| usize::try_from(m).ok())
                .ok_or(DecodeError::Field {
                    what: "data.message",
                })?,
        },
        Some(other) => other,
        None => {
            return Err(DecodeError::Field {
                what: "data.rewrite",
            });
        }
    };
    Ok(ThinkingEvent::Floor(ThinkingFloor {
        provider: text("provider", "data.provider")?.to_owned(),
        model: text("model", "data.model")?.to_owned(),
        rewrite,
    }))
}

fn surface_op(v: Value) -> Result<SurfaceOp, DecodeError> {
    if v.as_str() == Some(SurfaceOp::APPEND) {
        return Ok(SurfaceOp::Append);
    }
    let parsed = (|| {
        let o = v.as_object()?;
        if o.len() != 3 || o.get("op")?.as_str()? != SurfaceOp::REPLACE {
            return None;
        }
        let start = usize::try_from(o.get("start")?.as_u64()?).ok()?;
        let end = usize::try_from(o.get("end")?.as_u64()?).ok()?;
        (start <= end).then_some(SurfaceOp::Replace { start, end })
    })();
    parsed.ok_or(DecodeError::InvalidSurfaceOp(v))
}

// ---- request/header ----

/// `data` of a header: `{"header","reason","startsSeries"?}`; other keys are ignored.
#[derive(Default)]
struct HeaderData {
    reason: Option<Value>,
    starts_series: Option<Value>,
    header: Option<Option<Result<RequestHeader, DecodeError>>>,
}

impl<'de> Shape<'de> for HeaderData {
    type Out = Result<HeaderEvent, DecodeError>;

    fn entry<A: MapAccess<'de>>(
        &mut self,
        key: Cow<'de, str>,
        map: &mut A,
        ctx: &Ctx,
    ) -> Result<(), A::Error> {
        match key.as_ref() {
            "reason" => self.reason = Some(value(map, ctx)?),
            "startsSeries" => self.starts_series = Some(value(map, ctx)?),
            "header" => self.header = Some(map.next_value_seed(Object(Header::default(), ctx))?),
            _ => skip(map, ctx)?,
        }
        Ok(())
    }

    fn finish(self) -> Self::Out {
        let reason = match self.reason {
            None => return Err(DecodeError::MissingReason),
            Some(Value::String(r)) => match Reason::from_str_opt(&r) {
                Some(reason) => reason,
                None => return Err(DecodeError::UnknownReason(r)),
            },
            Some(other) => return Err(DecodeError::UnknownReason(other.to_string())),
        };
        let starts_series = match self.starts_series {
            None => false,
            Some(Value::Bool(b)) => b,
            Some(_) => {
                return Err(DecodeError::Field {
                    what: "data.startsSeries",
                });
            }
        };
        let Some(Some(header)) = self.header else {
            return Err(DecodeError::Field {
                what: "data.header",
            });
        };
        Ok(HeaderEvent {
            header: header?,
            reason,
            starts_series,
        })
    }
}

/// `{"config","tools"?, ...}`: unknown keys kept in order.
#[derive(Default)]
struct Header {
    config: Option<Option<Result<Config, DecodeError>>>,
    tools: Option<Option<Result<Arc<[ToolSchema]>, DecodeError>>>,
    extra: IndexMap<String, Value>,
}

impl<'de> Shape<'de> for Header {
    type Out = Result<RequestHeader, DecodeError>;

    fn entry<A: MapAccess<'de>>(
        &mut self,
        key: Cow<'de, str>,
        map: &mut A,
        ctx: &Ctx,
    ) -> Result<(), A::Error> {
        match key.as_ref() {
            "config" => {
                self.config = Some(map.next_value_seed(Object(ConfigShape::default(), ctx))?);
            }
            "tools" => self.tools = Some(map.next_value_seed(Tools(ctx))?),
            _ => {
                let v = value(map, ctx)?;
                self.extra.insert(key.into_owned(), v);
            }
        }
        Ok(())
    }

    fn finish(self) -> Self::Out {
        let Some(Some(config)) = self.config else {
            return Err(DecodeError::Field {
                what: "data.header.config",
            });
        };
        let config = config?;
        let tools = match self.tools {
            None => Arc::from([]),
            Some(Some(tools)) => tools?,
            Some(None) => {
                return Err(DecodeError::Field {
                    what: "data.header.tools",
                });
            }
        };
        Ok(RequestHeader {
            config,
            tools,
            extra: self.extra,
        })
    }
}

/// `{"provider","model", ...}`: the other options kept in order.
#[derive(Default)]
struct ConfigShape {
    provider: Option<Value>,
    model: Option<Value>,
    extra: IndexMap<String, Value>,
}

impl<'de> Shape<'de> for ConfigShape {
    type Out = Result<Config, DecodeError>;

    fn entry<A: MapAccess<'de>>(
        &mut self,
        key: Cow<'de, str>,
        map: &mut A,
        ctx: &Ctx,
    ) -> Result<(), A::Error> {
        let v = value(map, ctx)?;
        match key.as_ref() {
            "provider" => self.provider = Some(v),
            "model" => self.model = Some(v),
            _ => {
                self.extra.insert(key.into_owned(), v);
            }
        }
        Ok(())
    }

    fn finish(self) -> Self::Out {
        let text = |v: Option<Value>, key| match v {
            Some(Value::String(s)) => Ok(s),
            _ => Err(DecodeError::MissingConfig(key)),
        };
        Ok(Config {
            provider: text(self.provider, "provider")?,
            model: text(self.model, "model")?,
            extra: self.extra,
        })
    }
}

/// `tools`: an array of tools; the first malformed one is the error. `None` when not an array.
struct Tools<'c>(&'c Ctx);

impl<'de> DeserializeSeed<'de> for Tools<'_> {
    type Value = Option<Result<Arc<[ToolSchema]>, DecodeError>>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl Strictly for Tools<'_> {
    fn strict(&self) -> &Strict {
        &self.0.strict
    }
}

impl<'de> Visitor<'de> for Tools<'_> {
    type Value = Option<Result<Arc<[ToolSchema]>, DecodeError>>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of tools")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut tools = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
        let mut fault = None;
        while let Some(tool) = seq.next_element_seed(ToolSeed(&self.0.strict))? {
            match tool {
                Ok(t) if fault.is_none() => tools.push(t),
                Ok(_) => {}
                Err(source) => {
                    fault.get_or_insert(DecodeError::Tool {
                        index: tools.len(),
                        source,
                    });
                }
            }
        }
        Ok(Some(match fault {
            Some(e) => Err(e),
            None => Ok(tools.into()),
        }))
    }
    wrong_shape!(array, |_| None);
}

// ---- message events ----

/// A message event's data, checked, before its event type is compared.
struct MessageParts {
    turn: Option<u64>,
    step: Option<u64>,
    header_seq: Option<Seq>,
    message: Message,
}

/// `data` of a message event: `{"turn"?,"step"?,"message","headerSeq"?}`; other keys ignored.
#[derive(Default)]
struct MessageData {
    turn: Option<Value>,
    step: Option<Value>,
    header_seq: Option<Value>,
    message: Option<Option<Result<Message, DecodeError>>>,
}

impl<'de> Shape<'de> for MessageData {
    type Out = Result<MessageParts, DecodeError>;

    fn entry<A: MapAccess<'de>>(
        &mut self,
        key: Cow<'de, str>,
        map: &mut A,
        ctx: &Ctx,
    ) -> Result<(), A::Error> {
        match key.as_ref() {
            "turn" => self.turn = Some(value(map, ctx)?),
            "step" => self.step = Some(value(map, ctx)?),
            "headerSeq" => self.header_seq = Some(value(map, ctx)?),
            "message" => {
                self.message = Some(map.next_value_seed(Object(MessageShape::default(), ctx))?);
            }
            _ => skip(map, ctx)?,
        }
        Ok(())
    }

    fn finish(self) -> Self::Out {
        let optional_u64 = |v: Option<Value>, what| match v {
            None => Ok(None),
            Some(v) => v.as_u64().map(Some).ok_or(DecodeError::Field { what }),
        };
        let turn = optional_u64(self.turn, "data.turn")?;
        let step = optional_u64(self.step, "data.step")?;
        let header_seq = optional_u64(self.header_seq, "data.headerSeq")?.map(Seq);
        let Some(Some(message)) = self.message else {
            return Err(DecodeError::Field {
                what: "data.message",
            });
        };
        Ok(MessageParts {
            turn,
            step,
            header_seq,
            message: message?,
        })
    }
}

fn message_event(
    parts: MessageParts,
    event_type: &str,
    role: Role,
    surface_op: Option<SurfaceOp>,
) -> Result<MessageEvent, DecodeError> {
    if parts.message.role() != role {
        return Err(DecodeError::RoleMismatch {
            event_type: event_type.to_owned(),
            role: parts.message.role(),
        });
    }
    Ok(MessageEvent {
        message: parts.message,
        turn: parts.turn,
        step: parts.step,
        header_seq: parts.header_seq,
        surface_op,
    })
}

// The one message decoder: a message given alone (the `project` example's input, an
// application's JSON) is read as a log line's `data.message` is, a key repeated at any
// depth refused.
impl<'de> serde::Deserialize<'de> for Message {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let ctx = Ctx {
            strict: Strict::default(),
            text: false,
        };
        match Object(MessageShape::default(), &ctx).deserialize(d) {
            Ok(Some(Ok(message))) => Ok(message),
            Ok(Some(Err(e))) => Err(de::Error::custom(e)),
            Ok(None) => Err(de::Error::custom("a message must be a JSON object")),
            Err(e) => Err(match ctx.strict.duplicate() {
                Some(key) => de::Error::custom(DecodeError::DuplicateKey { key }),
                None => e,
            }),
        }
    }
}

/// `{"id","role","content","source","isError"?}`; other keys ignored.
#[derive(Default)]
struct MessageShape {
    id: Option<Value>,
    role: Option<Value>,
    content: Option<ContentRead>,
    source: Option<Value>,
    is_error: Option<Value>,
}

impl<'de> Shape<'de> for MessageShape {
    type Out = Result<Message, DecodeError>;

    fn entry<A: MapAccess<'de>>(
        &mut self,
        key: Cow<'de, str>,
        map: &mut A,
        ctx: &Ctx,
    ) -> Result<(), A::Error> {
        match key.as_ref() {
            "id" => self.id = Some(value(map, ctx)?),
            "role" => self.role = Some(value(map, ctx)?),
            "content" => self.content = Some(map.next_value_seed(Content(ctx))?),
            "source" => self.source = Some(value(map, ctx)?),
            "isError" => self.is_error = Some(value(map, ctx)?),
            _ => skip(map, ctx)?,
        }
        Ok(())
    }

    fn finish(self) -> Self::Out {
        let field = |what| DecodeError::MessageField { what };
        let Some(Value::String(id)) = self.id else {
            return Err(field("id"));
        };
        let role: Role = self
            .role
            .and_then(|r| serde_json::from_value(r).ok())
            .ok_or(field("role"))?;
        let content = match self.content {
            Some(Some(Ok(content))) => content,
            Some(Some(Err((index, reason)))) => {
                return Err(DecodeError::MalformedBlock { id, index, reason });
            }
            _ => return Err(field("content")),
        };
        let source = match self.source {
            Some(s) => {
                MessageSource::from_value(s).map_err(|reason| DecodeError::MalformedSource {
                    id: id.clone(),
                    reason,
                })?
            }
            None => return Err(field("source")),
        };
        let is_error = match self.is_error {
            None => None,
            Some(Value::Bool(b)) => Some(b),
            Some(_) => return Err(field("isError")),
        };
        let message = Message::new(id, role, content, source);
        Ok(match is_error {
            Some(e) => message.with_is_error(e),
            None => message,
        })
    }
}

/// `content`: an array of blocks; the first malformed one (index, reason) is the error.
/// `None` when not an array.
struct Content<'c>(&'c Ctx);

/// What [`Content`] read.
type ContentRead = Option<Result<Vec<ContentBlock>, (usize, BlockError)>>;

impl<'de> DeserializeSeed<'de> for Content<'_> {
    type Value = ContentRead;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl Strictly for Content<'_> {
    fn strict(&self) -> &Strict {
        &self.0.strict
    }
}

impl<'de> Visitor<'de> for Content<'_> {
    type Value = ContentRead;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of content blocks")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut blocks = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
        let mut fault = None;
        while let Some(block) = seq.next_element_seed(BlockSeed(&self.0.strict))? {
            match block {
                Ok(b) if fault.is_none() => blocks.push(b),
                Ok(_) => {}
                Err(reason) => {
                    fault.get_or_insert((blocks.len(), reason));
                }
            }
        }
        Ok(Some(match fault {
            Some(f) => Err(f),
            None => {
                // The message keeps the vector: no growth slack (up to half of it).
                blocks.shrink_to_fit();
                Ok(blocks)
            }
        }))
    }
    wrong_shape!(array, |_| None);
}
