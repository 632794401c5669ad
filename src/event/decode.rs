//! JSON → `Event`, one typed error per shape fault.

use std::sync::Arc;

use indexmap::IndexMap;
use serde_json::{Map, Value};

use super::{
    Config, Event, HeaderEvent, MessageEvent, OpaqueEvent, Reason, RequestHeader, Rewrite,
    SurfaceOp, ThinkingEvent, ThinkingFloor, ThinkingPolicy,
};
use crate::vocab::{ContentBlock, Message, MessageSource, Role, Seq, ToolError, ToolSchema};

/// Why a JSON value is not a well-formed event. Carries no log position: the session wraps
/// it with the event's `Seq` and the file line.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The text is not one JSON value, or holds a number serde_json cannot represent.
    #[error("malformed JSON")]
    Json(#[source] serde_json::Error),
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
        reason: String,
    },
    /// A malformed message source.
    #[error("message {id}: malformed source: {reason}")]
    MalformedSource {
        /// The message id.
        id: String,
        /// What is wrong.
        reason: String,
    },
}

type Obj = Map<String, Value>;

pub(super) fn event(value: Value) -> Result<Event, DecodeError> {
    let Value::Object(mut obj) = value else {
        return Err(DecodeError::NotAnObject);
    };
    let event_type = match obj.remove("type") {
        Some(Value::String(t)) => t,
        _ => return Err(DecodeError::MissingType),
    };
    let surface_op = obj.remove("surfaceOp").map(surface_op).transpose()?;
    if event_type == "request/header" {
        if surface_op.is_some() {
            return Err(DecodeError::SurfaceOpOnHeader);
        }
        let data = data(&mut obj, &event_type)?;
        return Ok(Event::Header(Arc::new(header_event(data)?)));
    }
    if matches!(event_type.as_str(), "thinking/policy" | "thinking/floor") {
        if surface_op.is_some() {
            return Err(DecodeError::SurfaceOpOnLogEvent { event_type });
        }
        let data = data(&mut obj, &event_type)?;
        return Ok(Event::Thinking(Arc::new(thinking_event(
            &event_type,
            &data,
        )?)));
    }
    if let Some(role) = Role::for_event_type(&event_type) {
        let data = data(&mut obj, &event_type)?;
        return Ok(Event::Message(message_event(
            data,
            &event_type,
            role,
            surface_op,
        )?));
    }
    // The stored line keeps the bytes; the decoded fields follow `Map`'s key order.
    let fields: IndexMap<String, Value> = obj.into_iter().collect();
    Ok(Event::Opaque(Arc::new(OpaqueEvent {
        event_type,
        fields,
        surface_op,
    })))
}

fn thinking_event(event_type: &str, data: &Obj) -> Result<ThinkingEvent, DecodeError> {
    let text = |key: &str, what: &'static str| {
        data.get(key)
            .and_then(Value::as_str)
            .ok_or(DecodeError::Field { what })
    };
    if event_type == "thinking/policy" {
        let policy = text("policy", "data.policy")?;
        return ThinkingPolicy::from_str_opt(policy)
            .map(ThinkingEvent::Policy)
            .ok_or(DecodeError::Field {
                what: "data.policy",
            });
    }
    let rewrite = match text("rewrite", "data.rewrite")? {
        "tools" => Rewrite::Tools,
        "system" => Rewrite::System,
        "history" => Rewrite::History {
            message: data
                .get("message")
                .and_then(Value::as_u64)
                .and_then(|m| usize::try_from(m).ok())
                .ok_or(DecodeError::Field {
                    what: "data.message",
                })?,
        },
        _ => {
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

fn data(obj: &mut Obj, event_type: &str) -> Result<Obj, DecodeError> {
    match obj.remove("data") {
        Some(Value::Object(d)) => Ok(d),
        _ => Err(DecodeError::MissingData {
            event_type: event_type.to_owned(),
        }),
    }
}

fn surface_op(v: Value) -> Result<SurfaceOp, DecodeError> {
    if v.as_str() == Some("append") {
        return Ok(SurfaceOp::Append);
    }
    let parsed = (|| {
        let o = v.as_object()?;
        if o.len() != 3 || o.get("op")?.as_str()? != "replace" {
            return None;
        }
        let start = usize::try_from(o.get("start")?.as_u64()?).ok()?;
        let end = usize::try_from(o.get("end")?.as_u64()?).ok()?;
        (start <= end).then_some(SurfaceOp::Replace { start, end })
    })();
    parsed.ok_or(DecodeError::InvalidSurfaceOp(v))
}

fn header_event(mut data: Obj) -> Result<HeaderEvent, DecodeError> {
    let reason = match data.remove("reason") {
        None => return Err(DecodeError::MissingReason),
        Some(Value::String(r)) => match r.as_str() {
            "initial" => Reason::Initial,
            "resume" => Reason::Resume,
            "change" => Reason::Change,
            "series" => Reason::Series,
            _ => return Err(DecodeError::UnknownReason(r)),
        },
        Some(other) => return Err(DecodeError::UnknownReason(other.to_string())),
    };
    let starts_series = match data.remove("startsSeries") {
        None => false,
        Some(Value::Bool(b)) => b,
        Some(_) => {
            return Err(DecodeError::Field {
                what: "data.startsSeries",
            });
        }
    };
    let Some(Value::Object(mut header)) = data.remove("header") else {
        return Err(DecodeError::Field {
            what: "data.header",
        });
    };
    let Some(Value::Object(mut config)) = header.remove("config") else {
        return Err(DecodeError::Field {
            what: "data.header.config",
        });
    };
    let mut config_str = |key: &'static str| match config.remove(key) {
        Some(Value::String(s)) => Ok(s),
        _ => Err(DecodeError::MissingConfig(key)),
    };
    let provider = config_str("provider")?;
    let model = config_str("model")?;
    let tools: Arc<[ToolSchema]> = match header.remove("tools") {
        None => Arc::from([]),
        Some(Value::Array(items)) => items
            .into_iter()
            .enumerate()
            .map(|(index, t)| {
                ToolSchema::from_value(t).map_err(|source| DecodeError::Tool { index, source })
            })
            .collect::<Result<_, _>>()?,
        Some(_) => {
            return Err(DecodeError::Field {
                what: "data.header.tools",
            });
        }
    };
    Ok(HeaderEvent {
        header: RequestHeader {
            config: Config {
                provider,
                model,
                extra: config.into_iter().collect(),
            },
            tools,
            extra: header.into_iter().collect(),
        },
        reason,
        starts_series,
    })
}

fn optional_u64(data: &mut Obj, key: &str, what: &'static str) -> Result<Option<u64>, DecodeError> {
    match data.remove(key) {
        None => Ok(None),
        Some(v) => v.as_u64().map(Some).ok_or(DecodeError::Field { what }),
    }
}

fn message_event(
    mut data: Obj,
    event_type: &str,
    role: Role,
    surface_op: Option<SurfaceOp>,
) -> Result<MessageEvent, DecodeError> {
    let turn = optional_u64(&mut data, "turn", "data.turn")?;
    let step = optional_u64(&mut data, "step", "data.step")?;
    let header_seq = optional_u64(&mut data, "headerSeq", "data.headerSeq")?.map(Seq);
    let Some(Value::Object(m)) = data.remove("message") else {
        return Err(DecodeError::Field {
            what: "data.message",
        });
    };
    let message = message(m)?;
    if message.role() != role {
        return Err(DecodeError::RoleMismatch {
            event_type: event_type.to_owned(),
            role: message.role(),
        });
    }
    Ok(MessageEvent {
        message,
        turn,
        step,
        header_seq,
        surface_op,
    })
}

fn message(mut m: Obj) -> Result<Message, DecodeError> {
    let field = |what| DecodeError::MessageField { what };
    let Some(Value::String(id)) = m.remove("id") else {
        return Err(field("id"));
    };
    let role: Role = m
        .remove("role")
        .and_then(|r| serde_json::from_value(r).ok())
        .ok_or(field("role"))?;
    let Some(Value::Array(items)) = m.remove("content") else {
        return Err(field("content"));
    };
    let content = items
        .into_iter()
        .enumerate()
        .map(|(index, b)| {
            ContentBlock::from_value(b).map_err(|reason| DecodeError::MalformedBlock {
                id: id.clone(),
                index,
                reason,
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let source: MessageSource = match m.remove("source") {
        Some(s) => serde_json::from_value(s).map_err(|e| DecodeError::MalformedSource {
            id: id.clone(),
            reason: e.to_string(),
        })?,
        None => return Err(field("source")),
    };
    let is_error = match m.remove("isError") {
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
