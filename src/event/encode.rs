//! `Event` → compact JSON in the log's key order.
//!
//! Written through `serde::Serializer` from ordered fields (derived), never through `Value`,
//! whose key order depends on a Cargo feature another crate may turn on. Enum spellings are
//! the types' `as_str`, the tables decoding reads too.

use indexmap::IndexMap;
use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};
use serde_json::Value;

use super::{Event, HeaderEvent, MessageEvent, RequestHeader, SurfaceOp, ThinkingEvent};
use crate::vocab::{Message, Seq, ToolSchema};

pub(super) fn event(e: &Event) -> String {
    // Serializing owned strings, numbers and maps of them into a `Vec` cannot fail.
    serde_json::to_string(&Line::of(e)).expect("an event has string keys and finite numbers")
}

/// Whether `e` encodes to exactly `text`: the encoder's output is compared as it is written,
/// never collected, and the first differing byte stops it (loading asks this of every line,
/// [decision 76](crate::manual::decisions#decision-76)).
pub(super) fn encodes_as(e: &Event, text: &str) -> bool {
    /// The bytes still expected; a write that does not match them fails, ending the encoding.
    struct Compare<'t>(&'t [u8]);
    impl std::io::Write for Compare<'_> {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            match self.0.strip_prefix(buf) {
                Some(rest) => {
                    self.0 = rest;
                    Ok(buf.len())
                }
                None => Err(std::io::ErrorKind::InvalidData.into()),
            }
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut rest = Compare(text.as_bytes());
    serde_json::to_writer(&mut rest, &Line::of(e)).is_ok() && rest.0.is_empty()
}

/// `{"type", "data" | the opaque event's fields, "surfaceOp"?}`.
#[derive(Serialize)]
struct Line<'a> {
    #[serde(rename = "type")]
    event_type: &'a str,
    #[serde(flatten)]
    body: Body<'a>,
    #[serde(rename = "surfaceOp", skip_serializing_if = "Option::is_none")]
    surface_op: Option<SurfaceOp>,
}

#[derive(Serialize)]
#[serde(untagged)]
enum Body<'a> {
    Data {
        data: Data<'a>,
    },
    /// An opaque event's fields, verbatim and in order.
    Opaque(&'a IndexMap<String, Value>),
}

#[derive(Serialize)]
#[serde(untagged)]
enum Data<'a> {
    Header(HeaderData<'a>),
    Message(MessageData<'a>),
    Thinking(ThinkingData<'a>),
}

impl<'a> Line<'a> {
    fn of(e: &'a Event) -> Self {
        let data = |data| Body::Data { data };
        let body = match e {
            Event::Header(h) => data(Data::Header(HeaderData::of(h))),
            Event::Message(m) => data(Data::Message(MessageData::of(m))),
            Event::Thinking(t) => data(Data::Thinking(ThinkingData::of(t))),
            Event::Opaque(o) => Body::Opaque(&o.fields),
        };
        Line {
            event_type: e.event_type(),
            body,
            surface_op: e.surface_op(),
        }
    }
}

/// `{"policy"}` or `{"provider","model","rewrite","message"?}`.
#[derive(Serialize)]
#[serde(untagged)]
enum ThinkingData<'a> {
    Policy {
        policy: &'static str,
    },
    Floor {
        provider: &'a str,
        model: &'a str,
        rewrite: &'static str,
        #[serde(skip_serializing_if = "Option::is_none")]
        message: Option<usize>,
    },
}

impl<'a> ThinkingData<'a> {
    fn of(t: &'a ThinkingEvent) -> Self {
        match t {
            ThinkingEvent::Policy(p) => ThinkingData::Policy { policy: p.as_str() },
            ThinkingEvent::Floor(f) => ThinkingData::Floor {
                provider: &f.provider,
                model: &f.model,
                rewrite: f.rewrite.as_str(),
                message: match f.rewrite {
                    super::Rewrite::History { message } => Some(message),
                    _ => None,
                },
            },
        }
    }
}

/// `{"header","reason","startsSeries"?}` (`startsSeries` only when true).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct HeaderData<'a> {
    header: &'a RequestHeader,
    reason: &'static str,
    #[serde(skip_serializing_if = "is_false")]
    starts_series: bool,
}

impl<'a> HeaderData<'a> {
    fn of(h: &'a HeaderEvent) -> Self {
        HeaderData {
            header: &h.header,
            reason: h.reason.as_str(),
            starts_series: h.starts_series,
        }
    }
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// `RequestHeader`'s `tools`, omitted when empty (an `Arc<[_]>`, which serde writes only with
/// its `rc` feature).
pub(super) fn tools<S: Serializer>(tools: &[ToolSchema], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(tools)
}

pub(super) fn no_tools(tools: &[ToolSchema]) -> bool {
    tools.is_empty()
}

/// `{"turn"?,"step"?,"message","headerSeq"?}`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct MessageData<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    turn: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    step: Option<u64>,
    message: &'a Message,
    #[serde(skip_serializing_if = "Option::is_none")]
    header_seq: Option<Seq>,
}

impl<'a> MessageData<'a> {
    fn of(e: &'a MessageEvent) -> Self {
        MessageData {
            turn: e.turn,
            step: e.step,
            message: &e.message,
            header_seq: e.header_seq,
        }
    }
}

// Hand-written: `"append"` is a bare string and `replace` an object tagged by `op`; no one
// serde enum representation writes both.
impl Serialize for SurfaceOp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match *self {
            SurfaceOp::Append => s.serialize_str(SurfaceOp::APPEND),
            SurfaceOp::Replace { start, end } => {
                let mut m = s.serialize_map(Some(3))?;
                m.serialize_entry("op", SurfaceOp::REPLACE)?;
                m.serialize_entry("start", &start)?;
                m.serialize_entry("end", &end)?;
                m.end()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::event::{Config, Event, Reason, RequestHeader};
    use crate::vocab::{Message, ToolSchema};

    #[test]
    fn lines_round_trip_in_spec_key_order() {
        let lines = [
            r#"{"type":"request/header","data":{"header":{"config":{"provider":"p","model":"m","max_tokens":5},"tools":[{"name":"a","description":"d","parameters":{}}],"x":1},"reason":"change","startsSeries":true}}"#,
            r#"{"type":"request/header","data":{"header":{"config":{"provider":"p","model":"m"}},"reason":"initial"}}"#,
            r#"{"type":"developer/message","data":{"turn":1,"step":2,"message":{"id":"d1","role":"developer","content":[{"type":"tool-addition","toolName":"a"}],"source":{"kind":"tool-registry"}},"headerSeq":0},"surfaceOp":"append"}"#,
            r#"{"type":"user/message","data":{"message":{"id":"u1","role":"user","content":[],"source":{"kind":"user"}}},"surfaceOp":{"op":"replace","start":0,"end":2}}"#,
            r#"{"type":"tool/result","data":{"message":{"id":"t1","role":"tool","content":[{"type":"text","text":"ok"}],"source":{"kind":"tool","callId":"c"},"isError":false}}}"#,
            r#"{"type":"note/x","data":{"a":1},"surfaceOp":"append"}"#,
            r#"{"type":"thinking/policy","data":{"policy":"drop-block"}}"#,
            r#"{"type":"thinking/floor","data":{"provider":"anthropic","model":"m","rewrite":"tools"}}"#,
            r#"{"type":"thinking/floor","data":{"provider":"anthropic","model":"m","rewrite":"history","message":3}}"#,
        ];
        for line in lines {
            let e = Event::from_json(line).unwrap();
            assert_eq!(e.to_json(), line);
            assert!(e.encodes_as(line));
        }
    }

    /// `encodes_as` is `to_json() == text`: a byte changed anywhere, a prefix, or a longer text
    /// is not the encoding.
    #[test]
    fn encodes_as_is_equality_with_the_encoding() {
        let line = r#"{"type":"user/message","data":{"message":{"id":"u1","role":"user","content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}}},"surfaceOp":"append"}"#;
        let e = Event::from_json(line).unwrap();
        assert!(e.encodes_as(line));
        for i in 0..line.len() {
            let mut bytes = line.as_bytes().to_vec();
            bytes[i] = if bytes[i] == b'x' { b'y' } else { b'x' };
            let changed = String::from_utf8(bytes).unwrap();
            assert!(!e.encodes_as(&changed), "byte {i}");
            assert!(!e.encodes_as(&line[..i]), "prefix of {i} bytes");
        }
        assert!(!e.encodes_as(&format!("{line} ")));
        let respelled = line.replace(r#""surfaceOp":"append""#, r#""surfaceOp": "append""#);
        assert!(Event::from_json(&respelled).is_ok() && !e.encodes_as(&respelled));
    }

    #[test]
    fn created_header_omits_empty_tools() {
        let e = Event::header(
            RequestHeader::new(Config::new("p", "m"), vec![]),
            Reason::Initial,
        );
        assert_eq!(
            e.to_json(),
            r#"{"type":"request/header","data":{"header":{"config":{"provider":"p","model":"m"}},"reason":"initial"}}"#
        );
        let t = ToolSchema::new("a", "d", serde_json::Map::new());
        let e = Event::header(
            RequestHeader::new(Config::new("p", "m"), vec![t]),
            Reason::Resume,
        );
        assert!(e.to_json().contains(r#""tools":[{"name":"a""#));
        let e = Event::append(Message::user("u", "hi"));
        assert!(e.to_json().ends_with(r#""surfaceOp":"append"}"#));
    }
}
