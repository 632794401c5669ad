//! JSON equivalence ([reference §1](crate::manual::reference#1-vocabulary-and-json)): two values
//! are equivalent when equal as data.
//!
//! Objects compare as unordered maps at every depth, arrays in order, numbers by value
//! (`1` ≡ `1.0` ≡ `1e0`). Key order or number spelling never makes a change; the original
//! system compared JSON text, which turned a re-serialized schema into a cache miss.

use std::fmt;

use indexmap::IndexMap;
use serde_json::error::Category;
use serde_json::{Number, Value};

/// Whether `a` and `b` are equal as data ([reference
/// §1](crate::manual::reference#1-vocabulary-and-json)).
///
/// Costs O(size of the smaller value). Integers and integral floats compare exactly (no
/// rounding through `f64`), so `9007199254740993` and `9007199254740992.0` differ.
///
/// ```
/// use mektpoy::vocab::json_equivalent;
/// use serde_json::json;
/// assert!(json_equivalent(&json!({"a": 1, "b": [1.0]}), &json!({"b": [1], "a": 1.0})));
/// assert!(!json_equivalent(&json!([1, 2]), &json!([2, 1])));
/// ```
pub fn json_equivalent(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => number_equivalent(x, y),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(v, w)| json_equivalent(v, w))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_equivalent(v, w)))
        }
        _ => a == b,
    }
}

/// Why a text is not the JSON a reader expected: the JSON parser's fault kept as data (what
/// kind, where) rather than as its message alone, so a caller can tell a cut-off file
/// ([`Category::Eof`]) from a corrupt one without reading text. Displays the parser's message.
///
/// ```
/// use mektpoy::session::{LoadError, SessionLineFault};
/// use mektpoy::Session;
/// let err = Session::load_bytes(b"{\"type\": \n").unwrap_err();
/// let LoadError::BadSessionLine { reason: SessionLineFault::Malformed(json) } = &err else {
///     panic!("{err}")
/// };
/// assert_eq!(json.category(), serde_json::error::Category::Eof);
/// assert_eq!(err.to_string(), format!("line 1 is not a session line: {json}"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JsonFault {
    category: Category,
    line: usize,
    column: usize,
    message: String,
}

impl JsonFault {
    /// What kind of fault: not JSON ([`Category::Syntax`]), cut off ([`Category::Eof`]), or
    /// JSON of another shape ([`Category::Data`]).
    ///
    /// ```
    /// use serde_json::error::Category;
    /// let fault = mektpoy::vocab::JsonFault::from(&serde_json::from_str::<serde_json::Value>("[").unwrap_err());
    /// assert_eq!(fault.category(), Category::Eof);
    /// ```
    #[must_use]
    pub fn category(&self) -> Category {
        self.category
    }

    /// The 1-based line of the fault in the text (0 when the parser names none).
    ///
    /// ```
    /// let fault = mektpoy::vocab::JsonFault::from(&serde_json::from_str::<serde_json::Value>("\n x").unwrap_err());
    /// assert_eq!((fault.line(), fault.column()), (2, 2));
    /// ```
    #[must_use]
    pub fn line(&self) -> usize {
        self.line
    }

    /// The 1-based column of the fault on its line (0 when the parser names none).
    ///
    /// ```
    /// let fault = mektpoy::vocab::JsonFault::from(&serde_json::from_str::<serde_json::Value>("x").unwrap_err());
    /// assert_eq!(fault.column(), 1);
    /// ```
    #[must_use]
    pub fn column(&self) -> usize {
        self.column
    }
}

impl From<&serde_json::Error> for JsonFault {
    fn from(e: &serde_json::Error) -> Self {
        JsonFault {
            category: e.classify(),
            line: e.line(),
            column: e.column(),
            message: e.to_string(),
        }
    }
}

impl fmt::Display for JsonFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for JsonFault {}

/// Equivalence of two ordered key maps, ignoring key order.
pub(crate) fn map_equivalent(a: &IndexMap<String, Value>, b: &IndexMap<String, Value>) -> bool {
    a.len() == b.len()
        && a.iter()
            .all(|(k, v)| b.get(k).is_some_and(|w| json_equivalent(v, w)))
}

/// Equivalence of two `serde_json::Map`s, ignoring key order.
pub(crate) fn object_equivalent(
    a: &serde_json::Map<String, Value>,
    b: &serde_json::Map<String, Value>,
) -> bool {
    a.len() == b.len()
        && a.iter()
            .all(|(k, v)| b.get(k).is_some_and(|w| json_equivalent(v, w)))
}

fn number_equivalent(x: &Number, y: &Number) -> bool {
    match (integral(x), integral(y)) {
        (Some(a), Some(b)) => a == b,
        (None, None) => x.as_f64() == y.as_f64(),
        _ => false,
    }
}

/// The exact integer a number denotes, if it denotes one that fits in `i128`.
fn integral(n: &Number) -> Option<i128> {
    if let Some(u) = n.as_u64() {
        return Some(i128::from(u));
    }
    if let Some(i) = n.as_i64() {
        return Some(i128::from(i));
    }
    let f = n.as_f64()?;
    // 1.0e38 < 2^127: every integral float below it converts exactly.
    (f.fract() == 0.0 && f.abs() < 1.0e38).then_some(f as i128)
}

/// How deep arrays and objects nest in `text`, counted outside strings (`{}` is 1, `{"a":[]}`
/// is 2). A byte scan, no parse: O(len), no allocation; for text that is not JSON it still
/// returns the deepest unclosed bracket run.
pub(crate) fn arguments_depth(text: &str) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    let (mut in_string, mut escaped) = (false, false);
    for b in text.bytes() {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'{' | b'[' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn arguments_depth_counts_brackets_outside_strings() {
        for (text, depth) in [
            ("{}", 1),
            (r#"{"a":[1,{"b":{}}]}"#, 4),
            (r#"{"a":"[[[{{{"}"#, 1),
            (r#"{"a":"\"[[","b":[]}"#, 2),
            (r#"{"a":"\\","b":[[]]}"#, 3),
            ("not json", 0),
            ("[[[", 3),
        ] {
            assert_eq!(arguments_depth(text), depth, "{text}");
        }
    }

    #[test]
    fn equivalence_table() {
        let cases = [
            (json!(1), json!(1.0), true),
            (
                json!(100),
                serde_json::from_str::<Value>("1.0e2").unwrap(),
                true,
            ),
            (json!(-0.0), json!(0), true),
            (json!(1.5), json!(1.5), true),
            (json!(1.5), json!(1), false),
            (json!(u64::MAX), json!(u64::MAX as f64), false),
            (json!(9007199254740993u64), json!(9007199254740992.0), false),
            (
                json!({"a": {"b": 1, "c": 2}}),
                json!({"a": {"c": 2.0, "b": 1}}),
                true,
            ),
            (json!({"a": 1}), json!({"a": 1, "b": null}), false),
            (json!([1, 2]), json!([2, 1]), false),
            (json!("1"), json!(1), false),
            (json!(null), json!(null), true),
        ];
        for (a, b, expect) in cases {
            assert_eq!(json_equivalent(&a, &b), expect, "{a} vs {b}");
            assert_eq!(json_equivalent(&b, &a), expect, "{b} vs {a} (symmetry)");
        }
    }
}
