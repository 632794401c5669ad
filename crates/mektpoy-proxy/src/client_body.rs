//! A client body as it arrives: its head decoded, its messages and tools left as raw JSON and
//! keyed by their bytes; and what the previous request's messages and tools stood for in the
//! log. A harness re-sends its whole history with every request: the proxy decodes only what
//! is new (decision 118), extends what it knew of the previous request instead of rebuilding it
//! (decision 157), and reads the tools again only when their bytes changed (decision 158).

use std::collections::BTreeMap;
use std::hash::BuildHasher;
use std::sync::OnceLock;

use mektpoy::{Message, ToolSchema};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

/// A client body: every top-level key decoded but `messages` and `tools`, which stay raw.
#[derive(Debug)]
pub struct Body<'a> {
    /// The body without `messages` and `tools` when it is an object; otherwise the body as it
    /// is (the readers say what is wrong with it).
    pub head: Value,
    /// `messages`, each message's JSON as the client wrote it, when it is an array (`None`
    /// for anything else, which the readers refuse).
    pub messages: Option<Vec<&'a RawValue>>,
    /// `tools` as the client wrote it, when the body has the key: a harness sends the same
    /// bytes with every request, read once (decision 158).
    pub tools: Option<&'a RawValue>,
    /// `system` (else `instructions`) as the client wrote it, beside its decoded copy in
    /// `head`: the counterfactual meter cuts these bytes (decision 159).
    pub system: Option<&'a RawValue>,
}

/// Reads a body: one pass over its bytes, no message decoded.
///
/// # Errors
/// The body is not JSON.
pub fn parse(text: &str) -> Result<Body<'_>, serde_json::Error> {
    parse_list(text, List::Messages)
}

/// Reads a Responses-API body: `input` stays raw like `messages` (each item keyed by its
/// bytes); a string `input` is one raw item, which the reader takes as a user message.
///
/// # Errors
/// The body is not JSON.
pub fn parse_input(text: &str) -> Result<Body<'_>, serde_json::Error> {
    parse_list(text, List::Input)
}

/// The key whose items stay raw.
#[derive(Clone, Copy)]
enum List {
    /// `messages`: read as raw items on the same pass.
    Messages,
    /// `input`: an array or a string, taken raw, then its items split.
    Input,
}

fn parse_list(text: &str, list: List) -> Result<Body<'_>, serde_json::Error> {
    use serde::de::DeserializeSeed;
    let mut de = serde_json::Deserializer::from_str(text);
    let fields = match list.deserialize(&mut de).and_then(|f| de.end().map(|()| f)) {
        Ok(fields) => fields,
        // Not an object (or not JSON): read whole, for the readers' own messages.
        Err(_) => {
            return Ok(Body {
                head: serde_json::from_str(text)?,
                messages: None,
                tools: None,
                system: None,
            });
        }
    };
    let system = ["system", "instructions"]
        .iter()
        .find_map(|k| fields.head.get(*k).copied());
    let mut head = Map::new();
    let mut tools = None;
    for (key, raw) in fields.head {
        if key == "tools" {
            tools = Some(raw);
            continue;
        }
        head.insert(key, serde_json::from_str(raw.get())?);
    }
    Ok(Body {
        head: Value::Object(head),
        messages: fields.messages,
        tools,
        system,
    })
}

/// A body's keys, raw; `messages` read as a list of raw messages on the same pass when it is
/// an array (left out otherwise: the readers then answer that it must be one).
struct Fields<'a> {
    head: BTreeMap<String, &'a RawValue>,
    messages: Option<Vec<&'a RawValue>>,
}

impl<'de> serde::de::DeserializeSeed<'de> for List {
    type Value = Fields<'de>;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Fields<'de>, D::Error> {
        struct Visit(List);
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Fields<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Self::Value, A::Error> {
                let mut fields = Fields {
                    head: BTreeMap::new(),
                    messages: None,
                };
                let name = match self.0 {
                    List::Messages => "messages",
                    List::Input => "input",
                };
                // A repeated key keeps its last value, as `serde_json::Value` does.
                while let Some(key) = map.next_key::<String>()? {
                    if key != name {
                        fields.head.insert(key, map.next_value()?);
                        continue;
                    }
                    fields.head.remove(&key);
                    fields.messages = match self.0 {
                        List::Messages => map.next_value::<Messages<'de>>()?.0,
                        List::Input => {
                            let raw: &'de RawValue = map.next_value()?;
                            match raw.get().as_bytes().first() {
                                Some(b'[') => Some(
                                    serde_json::from_str::<Vec<&'de RawValue>>(raw.get())
                                        .map_err(serde::de::Error::custom)?,
                                ),
                                Some(b'"') => Some(vec![raw]),
                                _ => None,
                            }
                        }
                    };
                }
                Ok(fields)
            }
        }
        d.deserialize_map(Visit(self))
    }
}

/// `messages`: its items raw when it is an array, `None` when it is anything else.
struct Messages<'a>(Option<Vec<&'a RawValue>>);

impl<'de> serde::Deserialize<'de> for Messages<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Messages<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("any value")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Self::Value, A::Error> {
                let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0));
                while let Some(m) = seq.next_element::<&'de RawValue>()? {
                    out.push(m);
                }
                Ok(Messages(Some(out)))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Self::Value, A::Error> {
                use serde::de::IgnoredAny;
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Messages(None))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
                Ok(Messages(None))
            }
            fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
                Ok(Messages(None))
            }
            fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
                Ok(Messages(None))
            }
            fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
                Ok(Messages(None))
            }
            fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
                Ok(Messages(None))
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(Messages(None))
            }
        }
        d.deserialize_any(Visit)
    }
}

impl Body<'_> {
    /// The raw messages (none when `messages` is not an array).
    pub fn messages(&self) -> &[&RawValue] {
        self.messages.as_deref().unwrap_or_default()
    }
}

/// A message's bytes, keyed: their length and a hash keyed at random per process, so that a
/// client cannot make two different messages read as one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawKey {
    len: usize,
    hash: u64,
}

impl RawKey {
    /// The key of `raw`'s bytes.
    pub fn of(raw: &RawValue) -> RawKey {
        static KEYS: OnceLock<std::collections::hash_map::RandomState> = OnceLock::new();
        let bytes = raw.get().as_bytes();
        RawKey {
            len: bytes.len(),
            hash: KEYS.get_or_init(Default::default).hash_one(bytes),
        }
    }
}

/// One raw message of a request, as the next request finds it.
#[derive(Clone, Copy, Debug)]
pub struct Entry {
    /// Its bytes, keyed.
    pub key: RawKey,
    /// A message the reader takes apart each time (a system or developer message: the system
    /// prompt or tool changes), not one of the log's.
    pub read_again: bool,
    /// How many of the request's messages in the crate's shape the raw messages up to this one
    /// (included) are.
    pub end: usize,
    /// An item of a message that later items complete (a Responses answer is several items:
    /// reasoning, text, calls): a reuse stops before its message, never inside it.
    pub open: bool,
}

/// What the previous request's messages stand for in the log: its raw messages' keys, and
/// the log's visible messages (user, assistant, tool) after it, one for each of the client's
/// messages in the crate's shape, with their surface index. Lives only as long as the log
/// changes by the proxy's own hand; any other change drops it (the next request then reads
/// and compares every message). Each request extends it where the previous one left it
/// (decision 157): the entries and nodes of the messages it sent again are kept in place, not
/// copied.
#[derive(Debug, Default)]
pub struct Known {
    /// The previous request's raw messages.
    pub raw: Vec<Entry>,
    /// The log's visible messages after the previous request, with their surface index.
    pub nodes: Vec<(usize, Message)>,
    /// The surface length `nodes` covers: messages past it (the answer) are read from the
    /// log.
    pub surface_len: usize,
    /// The previous request's tools, when they read as the loop's own (decision 158).
    pub tools: Option<KnownTools>,
}

/// A request's `tools` bytes, keyed, and what they read as: the next request that sends the
/// same bytes to the same reader takes these instead of decoding its tools again.
#[derive(Clone, Debug)]
pub struct KnownTools {
    /// The key of the `tools` value's bytes.
    pub key: RawKey,
    /// Which API's reader read them (the same bytes read as another API's tools may be
    /// refused).
    pub reader: &'static str,
    /// The tools they read as: the loop's own copies, so that holding them costs a handle
    /// each.
    pub tools: Vec<ToolSchema>,
}

impl Known {
    /// How many leading raw messages of `raw` the previous request sent byte for byte,
    /// never the last one (the message a rewind logs again is always read from the client),
    /// and how many messages in the crate's shape they are. Each message is keyed as it is
    /// compared (its length first), into no list: a request keeps what it sent before in
    /// place (decision 157).
    pub fn reusable(&self, raw: &[&RawValue]) -> (usize, usize) {
        let same = raw
            .iter()
            .take(raw.len().saturating_sub(1))
            .zip(&self.raw)
            .take_while(|(m, e)| m.get().len() == e.key.len && RawKey::of(m) == e.key)
            .count();
        let same = self.raw[..same]
            .iter()
            .rposition(|e| !e.open)
            .map_or(0, |i| i + 1);
        let end = same.checked_sub(1).map_or(0, |i| self.raw[i].end);
        if end > self.nodes.len() {
            return (0, 0);
        }
        (same, end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_keeps_its_messages_raw_and_its_head_decoded() {
        let text = r#"{"model":"m","system":"s","tools":[ {"name":"t"} ],"messages":[{"role":"user","content":"hi"}, {"role" : "assistant","content":"ok"}],"max_tokens":3}"#;
        let body = parse(text).unwrap();
        assert_eq!(
            body.head,
            serde_json::json!({"model": "m", "system": "s", "max_tokens": 3}),
            "tools stay raw"
        );
        assert_eq!(body.tools.map(RawValue::get), Some(r#"[ {"name":"t"} ]"#));
        assert_eq!(body.system.map(RawValue::get), Some(r#""s""#));
        let raw: Vec<&str> = body.messages().iter().map(|m| m.get()).collect();
        assert_eq!(
            raw,
            [
                r#"{"role":"user","content":"hi"}"#,
                r#"{"role" : "assistant","content":"ok"}"#
            ]
        );
        for other in [
            r#"{"messages":{"a":[1]}}"#,
            r#"{"messages":"x"}"#,
            r#"{"messages":null}"#,
            r#"{"messages":1.5}"#,
        ] {
            let body = parse(other).unwrap();
            assert!(body.messages.is_none(), "{other}");
            assert_eq!(body.head, serde_json::json!({}));
        }
        let twice = parse(r#"{"messages":[1],"messages":{}}"#).unwrap();
        assert!(twice.messages.is_none(), "the last value counts");
        assert_eq!(parse("[1]").unwrap().head, serde_json::json!([1]));
        assert!(parse("{").is_err());
        assert!(parse(r#"{"messages": [1,}"#).is_err());
    }

    fn refs(v: &[Box<RawValue>]) -> Vec<&RawValue> {
        v.iter().map(|b| &**b).collect()
    }

    #[test]
    fn keys_tell_bytes_apart_and_reuse_stops_before_the_first_difference_and_the_last() {
        let raw = |t: &str| -> Box<RawValue> { RawValue::from_string(t.to_owned()).unwrap() };
        let a = raw(r#"{"a":1}"#);
        let b = raw(r#"{"a": 1}"#);
        assert_ne!(RawKey::of(&a), RawKey::of(&b), "other bytes, another key");
        assert_eq!(RawKey::of(&a), RawKey::of(&raw(r#"{"a":1}"#)));
        let values: Vec<Box<RawValue>> = ["1", "2", "3"].iter().map(|t| raw(t)).collect();
        let keys: Vec<RawKey> = values.iter().map(|v| RawKey::of(v)).collect();
        let known = Known {
            raw: keys
                .iter()
                .enumerate()
                .map(|(i, &key)| Entry {
                    key,
                    read_again: false,
                    end: i + 1,
                    open: false,
                })
                .collect(),
            nodes: (0..3)
                .map(|i| (i, Message::user(format!("u{i}"), "x")))
                .collect(),
            surface_len: 3,
            tools: None,
        };
        assert_eq!(known.reusable(&refs(&values)), (2, 2), "never the last");
        let mut more = values.clone();
        more.push(raw("4"));
        assert_eq!(known.reusable(&refs(&more)), (3, 3));
        more[1] = raw("9");
        assert_eq!(known.reusable(&refs(&more)), (1, 1));
        more[1] = raw("[2]");
        assert_eq!(
            known.reusable(&refs(&more)),
            (1, 1),
            "stops at the first difference, of another length too"
        );
    }
}
