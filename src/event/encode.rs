//! `Event` → compact JSON in the key order of SPEC §1.
//!
//! Written against `serde::Serializer` with explicit maps, never through `Value`, whose key
//! order depends on a Cargo feature another crate may turn on.

use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};

use super::{
    Config, Event, HeaderEvent, MessageEvent, RequestHeader, Rewrite, SurfaceOp, ThinkingEvent,
};

pub(super) fn event(e: &Event) -> String {
    // Serializing owned strings, numbers and maps of them into a `Vec` cannot fail.
    serde_json::to_string(&Line(e)).expect("an event has string keys and finite numbers")
}

struct Line<'a>(&'a Event);

impl Serialize for Line<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("type", self.0.event_type())?;
        match self.0 {
            Event::Header(h) => m.serialize_entry("data", &HeaderData(h))?,
            Event::Message(me) => m.serialize_entry("data", &MessageData(me))?,
            Event::Thinking(t) => m.serialize_entry("data", &ThinkingData(t))?,
            Event::Opaque(o) => {
                for (k, v) in &o.fields {
                    m.serialize_entry(k, v)?;
                }
            }
        }
        if let Some(op) = self.0.surface_op() {
            m.serialize_entry("surfaceOp", &op)?;
        }
        m.end()
    }
}

struct ThinkingData<'a>(&'a ThinkingEvent);

impl Serialize for ThinkingData<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        match self.0 {
            ThinkingEvent::Policy(p) => m.serialize_entry("policy", p.as_str())?,
            ThinkingEvent::Floor(f) => {
                m.serialize_entry("provider", &f.provider)?;
                m.serialize_entry("model", &f.model)?;
                m.serialize_entry("rewrite", f.rewrite.as_str())?;
                if let Rewrite::History { message } = f.rewrite {
                    m.serialize_entry("message", &message)?;
                }
            }
        }
        m.end()
    }
}

struct HeaderData<'a>(&'a HeaderEvent);

impl Serialize for HeaderData<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("header", &self.0.header)?;
        m.serialize_entry("reason", self.0.reason.as_str())?;
        if self.0.starts_series {
            m.serialize_entry("startsSeries", &true)?;
        }
        m.end()
    }
}

impl Serialize for RequestHeader {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("config", &self.config)?;
        if !self.tools.is_empty() {
            m.serialize_entry("tools", &*self.tools)?;
        }
        for (k, v) in &self.extra {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

impl Serialize for Config {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(2 + self.extra.len()))?;
        m.serialize_entry("provider", &self.provider)?;
        m.serialize_entry("model", &self.model)?;
        for (k, v) in &self.extra {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

struct MessageData<'a>(&'a MessageEvent);

impl Serialize for MessageData<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let e = self.0;
        let mut m = s.serialize_map(None)?;
        if let Some(t) = e.turn {
            m.serialize_entry("turn", &t)?;
        }
        if let Some(t) = e.step {
            m.serialize_entry("step", &t)?;
        }
        m.serialize_entry("message", &e.message)?;
        if let Some(h) = e.header_seq {
            m.serialize_entry("headerSeq", &h)?;
        }
        m.end()
    }
}

impl Serialize for SurfaceOp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match *self {
            SurfaceOp::Append => s.serialize_str("append"),
            SurfaceOp::Replace { start, end } => {
                let mut m = s.serialize_map(Some(3))?;
                m.serialize_entry("op", "replace")?;
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
        }
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
