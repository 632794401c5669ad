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

use std::borrow::Cow;
use std::cell::Cell;
use std::fmt;

use serde::Deserializer;
use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;

use super::{MessageFault, WireError};
use crate::vocab::strict::Key;
use crate::vocab::{ContentBlock, Message};

/// Checks `arguments` and returns the text to send as `input`.
///
/// O(length of the text).
pub(super) fn checked(
    message: &Message,
    call_id: &str,
    arguments: &str,
) -> Result<Box<RawValue>, WireError> {
    let ids = || (message.id().to_owned(), call_id.to_owned());
    let fault = Cell::new(None);
    let mut de = serde_json::Deserializer::from_str(arguments);
    let parsed = Check {
        depth: 1,
        fault: &fault,
    }
    .deserialize(&mut de)
    .and_then(|is_object| de.end().map(|()| is_object));
    match (parsed, fault.take()) {
        (_, Some(Fault::Duplicate(key))) => {
            let (message_id, call_id) = ids();
            return Err(WireError::message(
                message_id,
                MessageFault::DuplicateArgumentKey { call_id, key },
            ));
        }
        (_, Some(Fault::TooDeep)) => {
            let (message_id, call_id) = ids();
            return Err(WireError::message(
                message_id,
                MessageFault::ArgumentsTooDeep {
                    call_id,
                    limit: ContentBlock::ARGUMENTS_DEPTH_LIMIT,
                },
            ));
        }
        (Err(source), None) => {
            let (message_id, call_id) = ids();
            return Err(WireError::message(
                message_id,
                MessageFault::InvalidArguments { call_id, source },
            ));
        }
        (Ok(false), None) => {
            let (message_id, call_id) = ids();
            return Err(WireError::message(
                message_id,
                MessageFault::ArgumentsNotObject { call_id },
            ));
        }
        (Ok(true), None) => {}
    }
    // Valid JSON without whitespace between tokens stays valid JSON.
    RawValue::from_string(compact(arguments).into_owned()).map_err(|source| {
        let (message_id, call_id) = ids();
        WireError::message(
            message_id,
            MessageFault::InvalidArguments { call_id, source },
        )
    })
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
}
