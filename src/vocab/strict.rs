//! Decoding JSON that refuses a key twice in one object, at every depth.
//!
//! serde_json's `Value` keeps the last of two equal keys, so `{"reason":"bogus","reason":
//! "change"}` would read as `change` while the log line says both. Every value this crate
//! decodes from text goes through [`StrictValue`] (or a typed visitor that checks its keys the
//! same way), which fails on the second key instead. Keys compare after unescaping (`"a"` and
//! `"\u0061"` are one key), as every JSON parser compares them.
//!
//! The visitors decode straight from the text, without building a `Value` tree first where the
//! shape is known (events, messages, content blocks, tools): a `Value` object is a B-tree whose
//! smallest node is about 600 bytes, which made a line of small blocks take 20 times its size
//! to decode.

use std::borrow::Cow;
use std::cell::Cell;
use std::fmt;

use serde::Deserializer;
use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// The first duplicate key a decode met, so that the caller can report it as a typed error
/// (a visitor can only fail with the deserializer's own error type).
#[derive(Default)]
pub(crate) struct Strict {
    duplicate: Cell<Option<String>>,
}

impl Strict {
    /// The error for a second `key` in one object; the key is kept for [`duplicate`].
    ///
    /// [`duplicate`]: Self::duplicate
    pub fn duplicate_key<E: de::Error>(&self, key: &str) -> E {
        let first = self.duplicate.take();
        self.duplicate
            .set(Some(first.unwrap_or_else(|| key.to_owned())));
        E::custom(format_args!("duplicate key `{key}`"))
    }

    /// The first duplicate key met, if any.
    pub fn duplicate(&self) -> Option<String> {
        self.duplicate.take()
    }
}

/// An object key, borrowed from the text when it has no escapes.
pub(crate) struct Key<'de>(pub Cow<'de, str>);

impl<'de> de::Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object key")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v)))
            }
        }
        d.deserialize_str(V)
    }
}

/// serde_json hands a number to visitors as this one-key map when a crate in the build turns on
/// its `arbitrary_precision` feature (features unify); [`StrictValue`] turns it back into a
/// number, as `Value`'s own visitor does.
const NUMBER_TOKEN: &str = "$serde_json::private::Number";

/// A seed that decodes any JSON value into a `Value`, refusing duplicate keys at every depth.
#[derive(Clone, Copy)]
pub(crate) struct StrictValue<'c>(pub &'c Strict);

impl<'de> DeserializeSeed<'de> for StrictValue<'_> {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for StrictValue<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1024));
        while let Some(item) = seq.next_element_seed(self)? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(Key(key)) = map.next_key::<Key<'de>>()? {
            if out.is_empty() && key == NUMBER_TOKEN {
                let digits: String = map.next_value()?;
                return serde_json::from_str::<Number>(&digits)
                    .map(Value::Number)
                    .map_err(de::Error::custom);
            }
            if out.contains_key(key.as_ref()) {
                return Err(self.0.duplicate_key(&key));
            }
            let value = map.next_value_seed(self)?;
            out.insert(key.into_owned(), value);
        }
        Ok(Value::Object(out))
    }
}

/// The entries of one object in document order, keys checked for duplicates: a linear scan
/// while the object is small (the common case, a content block), a hash set beyond.
pub(crate) struct Entries<'de> {
    pub list: Vec<(Cow<'de, str>, Value)>,
    index: Option<std::collections::HashSet<String>>,
}

/// How many keys an object holds before [`Entries`] indexes them.
const SCAN_LIMIT: usize = 16;

impl<'de> Entries<'de> {
    /// Reads every entry of `map` as a strict value.
    pub fn read<A: MapAccess<'de>>(mut map: A, strict: &Strict) -> Result<Self, A::Error> {
        let mut entries = Entries {
            list: Vec::with_capacity(map.size_hint().unwrap_or(4).min(SCAN_LIMIT)),
            index: None,
        };
        while let Some(Key(key)) = map.next_key::<Key<'de>>()? {
            if entries.list.is_empty() && key == NUMBER_TOKEN {
                // A number under `arbitrary_precision`: not an object.
                let _: de::IgnoredAny = map.next_value()?;
                return Ok(Entries {
                    list: Vec::new(),
                    index: None,
                });
            }
            if entries.contains(&key) {
                return Err(strict.duplicate_key(&key));
            }
            if let Some(index) = entries.index.as_mut() {
                index.insert(key.clone().into_owned());
            } else if entries.list.len() == SCAN_LIMIT {
                let mut index: std::collections::HashSet<String> =
                    entries.list.iter().map(|(k, _)| k.to_string()).collect();
                index.insert(key.clone().into_owned());
                entries.index = Some(index);
            }
            let value = map.next_value_seed(StrictValue(strict))?;
            entries.list.push((key, value));
        }
        Ok(entries)
    }

    fn contains(&self, key: &str) -> bool {
        match &self.index {
            Some(index) => index.contains(key),
            None => self.list.iter().any(|(k, _)| k == key),
        }
    }
}

/// The keys of one object seen so far, for visitors that decode each value as it comes (and
/// so keep no entry list): a linear scan while the object is small, a hash set beyond.
#[derive(Default)]
pub(crate) struct Seen<'de> {
    keys: Vec<Cow<'de, str>>,
    index: Option<std::collections::HashSet<String>>,
}

impl<'de> Seen<'de> {
    /// Records `key`, failing when the object already had it.
    // A `&Cow`, not a `&str`: a borrowed key is kept by cloning the `Cow` (no copy of the text).
    #[allow(clippy::ptr_arg)]
    pub fn check<E: de::Error>(&mut self, key: &Cow<'de, str>, strict: &Strict) -> Result<(), E> {
        let repeated = match self.index.as_mut() {
            Some(index) => !index.insert(key.to_string()),
            None if self.keys.iter().any(|k| k == key) => true,
            None if self.keys.len() == SCAN_LIMIT => {
                let mut index: std::collections::HashSet<String> =
                    self.keys.drain(..).map(Cow::into_owned).collect();
                index.insert(key.to_string());
                self.index = Some(index);
                false
            }
            None => {
                self.keys.push(key.clone());
                false
            }
        };
        if repeated {
            Err(strict.duplicate_key(key))
        } else {
            Ok(())
        }
    }
}

/// A visitor that has the decode's [`Strict`] at hand (for [`wrong_shape!`]).
pub(crate) trait Strictly {
    /// The decode's duplicate-key record.
    fn strict(&self) -> &Strict;
}

/// Reads the rest of a sequence as strict values, dropping them (the caller already knows the
/// value has the wrong shape, but a duplicate key inside it is still refused).
pub(crate) fn drain_seq<'de, A: SeqAccess<'de>>(
    mut seq: A,
    strict: &Strict,
) -> Result<(), A::Error> {
    while seq.next_element_seed(StrictValue(strict))?.is_some() {}
    Ok(())
}

/// Reads the rest of a map as strict values, dropping them.
pub(crate) fn drain_map<'de, A: MapAccess<'de>>(map: A, strict: &Strict) -> Result<(), A::Error> {
    Entries::read(map, strict).map(drop)
}

/// The `Visitor` methods of a seed that wants one shape (an object or an array) for every
/// other JSON value: each returns `Ok($wrong)` (`self` is in scope), so that a value of the wrong
/// type is the caller's typed error, not a serde error. `object` also fills in `visit_seq`,
/// `array` fills in `visit_map`; both drain what they skip with strict values (the visitor
/// implements [`Strictly`]).
macro_rules! wrong_shape {
    (@scalars $wrong:expr) => {
        fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<Self::Value, E> {
            Ok($wrong(self))
        }
        fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<Self::Value, E> {
            Ok($wrong(self))
        }
        fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<Self::Value, E> {
            Ok($wrong(self))
        }
        fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<Self::Value, E> {
            Ok($wrong(self))
        }
        fn visit_str<E: serde::de::Error>(self, _: &str) -> Result<Self::Value, E> {
            Ok($wrong(self))
        }
        fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok($wrong(self))
        }
        fn visit_none<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok($wrong(self))
        }
    };
    (object, $wrong:expr) => {
        $crate::vocab::strict::wrong_shape!(@scalars $wrong);
        fn visit_seq<A: serde::de::SeqAccess<'de>>(
            self,
            seq: A,
        ) -> Result<Self::Value, A::Error> {
            $crate::vocab::strict::drain_seq(seq, $crate::vocab::strict::Strictly::strict(&self))?;
            Ok($wrong(self))
        }
    };
    (array, $wrong:expr) => {
        $crate::vocab::strict::wrong_shape!(@scalars $wrong);
        fn visit_map<A: serde::de::MapAccess<'de>>(
            self,
            map: A,
        ) -> Result<Self::Value, A::Error> {
            $crate::vocab::strict::drain_map(map, $crate::vocab::strict::Strictly::strict(&self))?;
            Ok($wrong(self))
        }
    };
}
pub(crate) use wrong_shape;

/// Decodes `text` as one strict JSON value with `seed`, then requires the end of the text.
///
/// # Errors
/// serde_json's error; when it came from a duplicate key, `strict` names the key.
pub(crate) fn from_str<'de, S: DeserializeSeed<'de>>(
    text: &'de str,
    seed: S,
) -> Result<S::Value, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_str(text);
    let value = seed.deserialize(&mut de)?;
    de.end()?;
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strict(text: &str) -> Result<Value, Option<String>> {
        let s = Strict::default();
        from_str(text, StrictValue(&s)).map_err(|_| s.duplicate())
    }

    #[test]
    fn duplicate_keys_are_refused_at_every_depth() {
        for (text, key) in [
            (r#"{"a":1,"a":2}"#, "a"),
            (r#"{"x":{"b":[{"c":1,"c":1}]}}"#, "c"),
            (r#"[1,{"k":{},"k":{}}]"#, "k"),
            (r#"{"a":1,"\u0061":2}"#, "a"),
        ] {
            assert_eq!(strict(text), Err(Some(key.to_owned())), "{text}");
        }
    }

    #[test]
    fn strict_values_equal_serde_json_values() {
        for text in [
            r#"{"a":1,"b":[1.5,-2,"s\n",null,true,{}],"c":{"d":1e5}}"#,
            "123456789012345678901234567890",
            r#""\ud83d\ude00""#,
            "[]",
        ] {
            let expect: Value = serde_json::from_str(text).unwrap();
            assert_eq!(strict(text).unwrap(), expect, "{text}");
        }
        // A syntax error is no duplicate.
        assert_eq!(strict(r#"{"a":1,"#), Err(None));
    }

    #[test]
    fn entries_index_large_objects() {
        let s = Strict::default();
        let keys: Vec<String> = (0..40).map(|i| format!("\"k{i}\":{i}")).collect();
        let ok = format!("{{{}}}", keys.join(","));
        let dup = format!("{{{},\"k3\":0}}", keys.join(","));
        struct Seed<'c>(&'c Strict);
        impl<'de> DeserializeSeed<'de> for Seed<'_> {
            type Value = usize;
            fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<usize, D::Error> {
                d.deserialize_map(self)
            }
        }
        impl<'de> Visitor<'de> for Seed<'_> {
            type Value = usize;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<usize, A::Error> {
                Ok(Entries::read(map, self.0)?.list.len())
            }
        }
        assert_eq!(from_str(&ok, Seed(&s)).unwrap(), 40);
        assert!(from_str(&dup, Seed(&s)).is_err());
        assert_eq!(s.duplicate().as_deref(), Some("k3"));
    }
}
