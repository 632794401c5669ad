//! JSON values written with object keys sorted at every depth.
//!
//! `serde_json::Map` iterates in key order by default and in insertion order when any crate in
//! the build enables `preserve_order`. Values from the log go through [`Canonical`] so that the
//! bytes sent are the default order whatever the feature set: same input, same bytes.

use serde::Serialize;
use serde::ser::{SerializeMap, SerializeSeq, Serializer};
use serde_json::{Map, Value};

/// A value serialized with sorted object keys at every depth.
pub(super) struct Canonical<'a>(pub(super) &'a Value);

/// An object serialized with sorted keys at every depth.
pub(super) struct CanonicalObject<'a>(pub(super) &'a Map<String, Value>);

impl Serialize for Canonical<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Value::Object(map) => CanonicalObject(map).serialize(s),
            Value::Array(items) => {
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(&Canonical(item))?;
                }
                seq.end()
            }
            scalar => scalar.serialize(s),
        }
    }
}

impl Serialize for CanonicalObject<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        serialize_sorted(s, self.0.iter())
    }
}

/// Writes `entries` as one JSON object with keys in byte order (the default `Map` order).
///
/// Cost: O(k log k) for k keys, on top of writing the values.
pub(super) fn serialize_sorted<'a, S: Serializer>(
    s: S,
    entries: impl Iterator<Item = (&'a String, &'a Value)>,
) -> Result<S::Ok, S::Error> {
    let mut entries: Vec<(&String, &Value)> = entries.collect();
    // Object keys are unique, so an unstable sort is deterministic.
    entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
    let mut m = s.serialize_map(Some(entries.len()))?;
    for (k, v) in entries {
        m.serialize_entry(k, &Canonical(v))?;
    }
    m.end()
}

#[cfg(test)]
mod tests {
    use super::*;
    use indexmap::IndexMap;
    use serde_json::json;

    struct Sorted<'a>(&'a IndexMap<String, Value>);
    impl Serialize for Sorted<'_> {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            serialize_sorted(s, self.0.iter())
        }
    }

    /// An `IndexMap` iterates in insertion order, which we control: build the reverse of the
    /// sorted order and check the writer sorts it, with nested values sorted too.
    #[test]
    fn insertion_order_does_not_leak() {
        let mut map = IndexMap::new();
        map.insert("zeta".to_owned(), json!([{"y": 1, "x": 2}]));
        map.insert("beta".to_owned(), json!(null));
        map.insert("Alpha".to_owned(), json!({"b": {"d": 1, "c": 2}, "a": 1.5}));
        let out = serde_json::to_string(&Sorted(&map)).unwrap();
        assert_eq!(
            out,
            r#"{"Alpha":{"a":1.5,"b":{"c":2,"d":1}},"beta":null,"zeta":[{"x":2,"y":1}]}"#
        );
    }

    /// Under default features `json!` already yields sorted maps; run
    /// `cargo test --features serde_json/preserve_order` to make this check the sorting of
    /// nested `Map`s, whose iteration order is then the literal's.
    #[test]
    fn nested_maps_sorted_whatever_the_feature_set() {
        let v = json!({"b": [{"z": 1, "a": {"n": 1, "m": 2}}], "a": "x"});
        assert_eq!(
            serde_json::to_string(&Canonical(&v)).unwrap(),
            r#"{"a":"x","b":[{"a":{"m":2,"n":1},"z":1}]}"#
        );
    }
}
