//! Tool-call arguments on the Messages API: the model's own JSON text, checked, then sent as it
//! is.
//!
//! The API takes a call's arguments as a JSON object (`input`) inside the body, where the chat
//! API takes them as a string. Parsing them into a map and writing it back would change what the
//! model sees of its own call: numbers beyond `f64` lose digits
//! (`123456789012345678901234567890` became `1.2345678901234568e+29`), and of two equal keys one
//! silently disappears (`{"path":"/safe","path":"/etc/passwd"}` went out as
//! `{"path":"/etc/passwd"}`). So the text is checked (one JSON object, no key twice in one
//! object at any depth, at most [`ContentBlock::ARGUMENTS_DEPTH_LIMIT`] levels) and written into
//! the body unchanged: every token (strings with their escapes, numbers as spelled, key order)
//! is the model's. Only whitespace between tokens is removed, so that the body stays compact JSON:
//! JSON gives it no meaning, and the API never returns any inside `input`.
//!
//! Arguments that fail the check ([`arguments_fault`]) are what a model wrote, so refusing them
//! stopped the session at every later request (issue 20, item 13). They go out as
//! `{"invalid_arguments":"<the text>"}` instead ([decision
//! 94](crate::manual::decisions#decision-94)).

use std::borrow::Cow;
use std::cell::Cell;
use std::fmt;

use serde::Deserializer;
use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;

use crate::vocab::ContentBlock;
use crate::vocab::strict::Key;

/// Why a tool call's arguments cannot go out as the model wrote them on the Messages API
/// ([`arguments_fault`]).
///
/// A model writes these; nothing in the session refuses them, so a loop answers such a call
/// with an error tool result rather than running it
/// ([`Answer::invalid_tool_calls`](crate::response::Answer::invalid_tool_calls)).
///
/// ```
/// use mektpoy::wire::{ArgumentsFault, arguments_fault};
/// assert_eq!(arguments_fault(r#"{"a":1,"a":2}"#), Some(ArgumentsFault::DuplicateKey { key: "a".into() }));
/// assert!(matches!(arguments_fault(r#"{"path":"/tm"#), Some(ArgumentsFault::NotJson { end_of_input: true, .. })));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ArgumentsFault {
    /// Not one JSON value: a syntax error, trailing characters, or a text cut short.
    #[error("not JSON (line {line}, column {column})")]
    NotJson {
        /// 1-based line of the error.
        line: usize,
        /// 1-based column of the error.
        column: usize,
        /// The text ended inside a value (a cut-off answer rather than a wrong one).
        end_of_input: bool,
    },
    /// A `\u` escape of a UTF-16 surrogate without its pair: no Unicode text holds it.
    #[error("a lone surrogate escape")]
    LoneSurrogate,
    /// A number no `f64` holds (`1e400`): the provider's parser refuses it.
    #[error("a number out of range")]
    NumberOutOfRange,
    /// JSON, but not an object (the API's `input` is an object).
    #[error("not a JSON object")]
    NotObject,
    /// One key twice in one object (at any depth): sent as JSON, the provider would keep one of
    /// them, so the model would see another call than the one it made.
    #[error("the key `{key}` twice in one object")]
    DuplicateKey {
        /// The repeated key (unescaped).
        key: String,
    },
    /// Nesting past the limit ([`ContentBlock::ARGUMENTS_DEPTH_LIMIT`]).
    #[error("nesting deeper than {limit} levels")]
    TooDeep {
        /// The limit.
        limit: usize,
    },
}

/// What keeps `arguments` from going out as the model wrote them on the Messages API, or
/// `None` when they can: one JSON object, no key twice in one object at any depth, at most
/// [`ContentBlock::ARGUMENTS_DEPTH_LIMIT`] levels. The serializers check with this same
/// function, so `None` here means the Messages serializer sends the text token for token.
///
/// O(length of the text).
///
/// ```
/// use mektpoy::wire::{ArgumentsFault, arguments_fault};
/// assert_eq!(arguments_fault(r#"{"path":"/tmp"}"#), None);
/// assert_eq!(arguments_fault("[1, 2]"), Some(ArgumentsFault::NotObject));
/// ```
pub fn arguments_fault(arguments: &str) -> Option<ArgumentsFault> {
    let fault = Cell::new(None);
    let mut de = serde_json::Deserializer::from_str(arguments);
    let parsed = Check {
        depth: 1,
        fault: &fault,
    }
    .deserialize(&mut de)
    .and_then(|is_object| de.end().map(|()| is_object));
    match (parsed, fault.take()) {
        (_, Some(Fault::Duplicate(key))) => Some(ArgumentsFault::DuplicateKey { key }),
        (_, Some(Fault::TooDeep)) => Some(ArgumentsFault::TooDeep {
            limit: ContentBlock::ARGUMENTS_DEPTH_LIMIT,
        }),
        (Err(source), None) => Some(parse_fault(&source)),
        (Ok(false), None) => Some(ArgumentsFault::NotObject),
        (Ok(true), None) => None,
    }
}

/// The kind of a parse error. serde_json names its error codes only in their messages (which
/// `arguments::tests` pins), so the two kinds that are valid JSON syntax to a reader but not to
/// the parser are told apart by them.
fn parse_fault(source: &serde_json::Error) -> ArgumentsFault {
    let message = source.to_string();
    if message.starts_with("number out of range") {
        ArgumentsFault::NumberOutOfRange
    } else if message.starts_with("lone leading surrogate")
        || message.starts_with("unexpected end of hex escape")
    {
        ArgumentsFault::LoneSurrogate
    } else {
        ArgumentsFault::NotJson {
            line: source.line(),
            column: source.column(),
            end_of_input: source.is_eof(),
        }
    }
}

/// The text to send as a call's `input`: the model's own tokens (whitespace between them
/// removed) when [`arguments_fault`] finds nothing, else `{"invalid_arguments":<the text as a
/// JSON string>}`. Arguments the provider would refuse never fail the request: the model sees
/// what it wrote, the same bytes every time (so the cache keeps), and the caller's tool result
/// tells it the call was bad.
///
/// O(length of the text).
pub(super) fn input(arguments: &str) -> Box<RawValue> {
    if arguments_fault(arguments).is_none()
        && let Ok(raw) = RawValue::from_string(compact(arguments).into_owned())
    {
        // Valid JSON without whitespace between tokens stays valid JSON.
        return raw;
    }
    invalid(arguments)
}

/// `{"invalid_arguments":<arguments as a JSON string>}`.
fn invalid(arguments: &str) -> Box<RawValue> {
    let mut map = serde_json::Map::new();
    map.insert(
        "invalid_arguments".to_owned(),
        serde_json::Value::String(arguments.to_owned()),
    );
    // A map of one string always serializes; the default keeps the path total.
    serde_json::value::to_raw_value(&map).unwrap_or_default()
}

/// `text` without the JSON whitespace between tokens (inside strings every byte is kept).
/// Borrowed when there is none.
pub(crate) fn compact(text: &str) -> Cow<'_, str> {
    let (mut in_string, mut escaped) = (false, false);
    let mut out: Option<String> = None;
    for (i, c) in text.char_indices() {
        let keep = if in_string {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
            true
        } else {
            in_string = c == '"';
            !matches!(c, ' ' | '\t' | '\n' | '\r')
        };
        match (&mut out, keep) {
            (Some(s), true) => s.push(c),
            (None, false) => out = Some(text[..i].to_owned()),
            _ => {}
        }
    }
    out.map_or(Cow::Borrowed(text), Cow::Owned)
}

enum Fault {
    Duplicate(String),
    TooDeep,
}

/// Walks the arguments without building them: `true` when the value is an object. Fails (and
/// records why in `fault`) at the first repeated key or at nesting past the limit.
#[derive(Clone, Copy)]
struct Check<'f> {
    /// The level of the value about to be read (the outer value is level 1).
    depth: usize,
    fault: &'f Cell<Option<Fault>>,
}

impl Check<'_> {
    /// The check of the values inside this array or object, failing when this container is
    /// past the limit (a scalar never is: it adds no level).
    fn inner<E: de::Error>(self) -> Result<Self, E> {
        if self.depth > ContentBlock::ARGUMENTS_DEPTH_LIMIT {
            self.fault.set(Some(Fault::TooDeep));
            return Err(E::custom("arguments nest too deep"));
        }
        Ok(Check {
            depth: self.depth + 1,
            fault: self.fault,
        })
    }
}

impl<'de> DeserializeSeed<'de> for Check<'_> {
    type Value = bool;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Check<'_> {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("JSON arguments")
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_unit<E: de::Error>(self) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<bool, A::Error> {
        let inner = self.inner()?;
        while seq.next_element_seed(inner)?.is_some() {}
        Ok(false)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
        let inner = self.inner()?;
        let mut keys = std::collections::HashSet::new();
        while let Some(Key(key)) = map.next_key::<Key<'de>>()? {
            if !keys.insert(key.clone()) {
                self.fault.set(Some(Fault::Duplicate(key.into_owned())));
                return Err(de::Error::custom("duplicate key"));
            }
            map.next_value_seed(inner)?;
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compact_removes_only_whitespace_between_tokens() {
        for (text, expect) in [
            (r#"{"a":1}"#, r#"{"a":1}"#),
            ("{ \"a\" : [1 , 2] }\n", r#"{"a":[1,2]}"#),
            (r#"{"a b": " x\t"}"#, r#"{"a b":" x\t"}"#),
            (r#"{"q": "\" ", "é": "ü ü"}"#, r#"{"q":"\" ","é":"ü ü"}"#),
            (r#"{"e": "\\", "f": 1}"#, r#"{"e":"\\","f":1}"#),
        ] {
            assert_eq!(compact(text), expect, "{text}");
        }
        assert!(matches!(compact(r#"{"a":1}"#), Cow::Borrowed(_)));
    }

    /// Pins the serde_json messages `parse_fault` reads.
    #[test]
    fn each_fault_has_its_kind() {
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        for (text, fault) in [
            (r#"{"a":1}"#, None),
            (r#"{"a":"\ud83d\ude00"}"#, None),
            (r#"{"a":123456789012345678901234567890}"#, None),
            (r#"{"a":1e400}"#, Some(ArgumentsFault::NumberOutOfRange)),
            (r#"{"a":-1e400}"#, Some(ArgumentsFault::NumberOutOfRange)),
            (r#"{"a":"\ud800"}"#, Some(ArgumentsFault::LoneSurrogate)),
            (r#"{"a":"\ud800x"}"#, Some(ArgumentsFault::LoneSurrogate)),
            (
                r#"{"a":"\ud800\u0041"}"#,
                Some(ArgumentsFault::LoneSurrogate),
            ),
            (r#"{"a":"\udc00"}"#, Some(ArgumentsFault::LoneSurrogate)),
            ("[1]", Some(ArgumentsFault::NotObject)),
            (
                r#"{"k":1,"\u006b":2}"#,
                Some(ArgumentsFault::DuplicateKey { key: "k".into() }),
            ),
            (
                &deep,
                Some(ArgumentsFault::TooDeep {
                    limit: ContentBlock::ARGUMENTS_DEPTH_LIMIT,
                }),
            ),
            (
                r#"{"a":"#,
                Some(ArgumentsFault::NotJson {
                    line: 1,
                    column: 5,
                    end_of_input: true,
                }),
            ),
            (
                "{\n x",
                Some(ArgumentsFault::NotJson {
                    line: 2,
                    column: 2,
                    end_of_input: false,
                }),
            ),
        ] {
            assert_eq!(arguments_fault(text), fault, "{text}");
        }
    }

    #[test]
    fn a_faulty_text_goes_out_wrapped_as_a_string() {
        assert_eq!(input("{ \"a\" : 1 }").get(), r#"{"a":1}"#);
        assert_eq!(
            input(r#"{"a":"\ud800"}"#).get(),
            r#"{"invalid_arguments":"{\"a\":\"\\ud800\"}"}"#
        );
        assert_eq!(input("").get(), r#"{"invalid_arguments":""}"#);
    }
}
