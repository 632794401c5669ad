//! Where a request left the previous one: the segment, the byte, and the tool changes that
//! explain it.

use super::*;

/// Where a byte of a request's cut belongs, in the provider's caching order.
///
/// ```
/// use mektpoy::meter::Segment;
/// use mektpoy::{Meter, route_for};
/// let mut meter = Meter::new(&route_for("deepseek", "deepseek-flash"));
/// let turn = |text: &str| format!(r#"{{"role":"user","content":"{text}"}}"#);
/// meter.observe(&format!(r#"{{"messages":[{},{}]}}"#, turn("a"), turn("b")), None)?;
/// meter.observe(&format!(r#"{{"messages":[{},{}]}}"#, turn("a"), turn("c")), None)?;
/// let segment = &meter.departures()[1].as_ref().unwrap().segment;
/// assert_eq!(segment, &Segment::Message { index: 1 });
/// assert_eq!(segment.to_string(), "wire message 1");
/// # Ok::<(), mektpoy::meter::MeterError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Segment {
    /// A tool sent in full (not deferred).
    Tool {
        /// Its 0-based index in the body's `tools` array (deferred tools counted).
        index: usize,
        /// Its name (`name`, or `function.name` on a chat body).
        name: String,
    },
    /// The fixed deferred-tools section ([`Route::deferred_section_bytes`]).
    DeferredTools,
    /// The top-level `system`.
    System,
    /// A wire message. The Messages serializer merges consecutive user content and
    /// consecutive assistant messages into one turn, so this is not an index into the log.
    Message {
        /// Its 0-based index in the body's `messages` array.
        index: usize,
    },
}

impl Segment {
    /// The provider's caching order: tools, then `system`, then messages.
    pub(super) fn rank(&self) -> (u8, usize) {
        match self {
            Segment::Tool { index, .. } => (0, *index),
            Segment::DeferredTools => (1, 0),
            Segment::System => (2, 0),
            Segment::Message { index } => (3, *index),
        }
    }
}

impl std::fmt::Display for Segment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Segment::Tool { name, .. } => write!(f, "tool `{name}`"),
            Segment::DeferredTools => f.write_str("the deferred-tools section"),
            Segment::System => f.write_str("`system`"),
            Segment::Message { index } => write!(f, "wire message {index}"),
        }
    }
}

/// What changed in the tools between two requests, found by comparing them by name.
///
/// ```
/// use mektpoy::meter::ToolChange;
/// use mektpoy::{Meter, route_for};
/// let mut meter = Meter::new(&route_for("acme", "acme-1")); // chat bodies
/// let tool = |name: &str| format!(r#"{{"type":"function","function":{{"name":"{name}"}}}}"#);
/// let msg = r#"{"role":"user","content":"hi"}"#;
/// meter.observe(&format!(r#"{{"tools":[{}],"messages":[{msg}]}}"#, tool("read")), None)?;
/// meter.observe(&format!(r#"{{"tools":[{},{}],"messages":[{msg}]}}"#, tool("read"), tool("grep")), None)?;
/// let changes = &meter.departures()[1].as_ref().unwrap().tools;
/// assert_eq!(changes, &[ToolChange::Added { name: "grep".into() }]);
/// assert_eq!(changes[0].to_string(), "tool `grep` added");
/// # Ok::<(), mektpoy::meter::MeterError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ToolChange {
    /// A tool the previous request did not have.
    Added {
        /// The tool's name.
        name: String,
    },
    /// A tool of the previous request this one lacks.
    Removed {
        /// The tool's name.
        name: String,
    },
    /// The same name with other bytes (description, schema, fields).
    Redefined {
        /// The tool's name.
        name: String,
    },
    /// The same tools in another order: the first one out of its previous place.
    Reordered {
        /// The tool now at the first position whose tool differs.
        name: String,
    },
    /// The `defer_loading` flag flipped.
    Deferred {
        /// The tool's name.
        name: String,
        /// Whether it is deferred now.
        deferred: bool,
    },
}

impl ToolChange {
    /// The tool's name.
    ///
    /// ```
    /// use mektpoy::meter::ToolChange;
    /// let change = ToolChange::Removed { name: "shell".into() };
    /// assert_eq!(change.name(), "shell");
    /// ```
    pub fn name(&self) -> &str {
        match self {
            ToolChange::Added { name }
            | ToolChange::Removed { name }
            | ToolChange::Redefined { name }
            | ToolChange::Reordered { name }
            | ToolChange::Deferred { name, .. } => name,
        }
    }
}

impl std::fmt::Display for ToolChange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ToolChange::Added { name } => write!(f, "tool `{name}` added"),
            ToolChange::Removed { name } => write!(f, "tool `{name}` removed"),
            ToolChange::Redefined { name } => write!(f, "tool `{name}` redefined"),
            ToolChange::Reordered { name } => write!(f, "tools reordered (`{name}` moved)"),
            ToolChange::Deferred {
                name,
                deferred: true,
            } => write!(f, "tool `{name}` deferred"),
            ToolChange::Deferred {
                name,
                deferred: false,
            } => write!(f, "tool `{name}` no longer deferred"),
        }
    }
}

/// Where a request departs from the previous request of its route: the first byte of its cut
/// ([`Meter::prefix_bytes`]) that differs, and what lies there. Everything from that byte on
/// is out of the provider's prefix cache.
///
/// ```
/// use mektpoy::meter::Segment;
/// use mektpoy::{Meter, route_for};
/// let mut meter = Meter::new(&route_for("deepseek", "deepseek-flash"));
/// meter.observe(r#"{"system":"A","messages":[{"role":"user","content":"hi"}]}"#, None)?;
/// let departure = meter.departure_of(r#"{"system":"B","messages":[{"role":"user","content":"hi"}]}"#)?.unwrap();
/// // The cuts differ at byte 1, inside `system` (byte 0 is its opening quote).
/// assert_eq!((departure.segment, departure.offset), (Segment::System, 1));
/// assert_eq!(departure.previous_bytes, departure.total_bytes);
/// # Ok::<(), mektpoy::meter::MeterError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Departure {
    /// The first differing byte, as an offset into the cuts (also the length of their common
    /// prefix).
    pub offset: u64,
    /// The previous request's cut length.
    pub previous_bytes: u64,
    /// This request's cut length.
    pub total_bytes: u64,
    /// The segment the byte falls in: of this request, or of the previous one where that
    /// segment comes first in caching order (a removed tool is named, not the `system` that
    /// now sits at its offset) or where this request ends at the byte.
    pub segment: Segment,
    /// In a wire message present in both requests, the 0-based index of the first content
    /// block that differs (the length of the shorter array when one extends the other);
    /// `None` elsewhere, or when a content is a string.
    pub block: Option<usize>,
    /// When the departure is in the tools: every change found by name, in this order:
    /// removed, added, redefined, deferred flag, reordered. Empty elsewhere, and after a
    /// restore from a version-1 save for deferred tools (their names were not saved; the
    /// previous request's tool indices then count its immediate tools only).
    pub tools: Vec<ToolChange>,
}

impl Departure {
    /// The previous request's bytes from the departure on: what the cache held and cannot
    /// serve.
    ///
    /// ```
    /// use mektpoy::{Meter, route_for};
    /// let mut meter = Meter::new(&route_for("deepseek", "deepseek-flash"));
    /// meter.observe(r#"{"system":"A","messages":[{"role":"user","content":"hi"}]}"#, None)?;
    /// let departure = meter.departure_of(r#"{"system":"B","messages":[]}"#)?.unwrap();
    /// // Lost: every byte of the previous cut from the departure on.
    /// assert_eq!((departure.previous_bytes, departure.offset, departure.lost_bytes()), (33, 1, 32));
    /// # Ok::<(), mektpoy::meter::MeterError>(())
    /// ```
    pub fn lost_bytes(&self) -> u64 {
        self.previous_bytes.saturating_sub(self.offset)
    }

    /// [`lost_bytes`](Self::lost_bytes) as estimated tokens, ⌈bytes / 4⌉.
    ///
    /// ```
    /// use mektpoy::{Meter, route_for};
    /// let mut meter = Meter::new(&route_for("deepseek", "deepseek-flash"));
    /// meter.observe(r#"{"system":"A","messages":[{"role":"user","content":"hi"}]}"#, None)?;
    /// let departure = meter.departure_of(r#"{"system":"B","messages":[]}"#)?.unwrap();
    /// assert_eq!(departure.lost_tokens(), departure.lost_bytes().div_ceil(4));
    /// # Ok::<(), mektpoy::meter::MeterError>(())
    /// ```
    pub fn lost_tokens(&self) -> u64 {
        self.lost_bytes().div_ceil(4)
    }
}

/// Where `cut` departs from `prev`, if it does not extend it.
pub(super) fn departure(prev: &Previous, cut: &Cut) -> Option<Departure> {
    let common = prev
        .bytes
        .iter()
        .zip(&cut.bytes)
        .take_while(|(a, b)| a == b)
        .count();
    if common == prev.bytes.len() {
        return None;
    }
    let before = span_at(&prev.segments, common);
    let now = span_at(&cut.segments, common);
    // The earlier segment in caching order names the change; on a tie, this request's.
    let span = match (before, now) {
        (Some(b), Some(n)) if b.segment.rank().0 < n.segment.rank().0 => b,
        (_, Some(n)) => n,
        (Some(b), None) => b,
        // Only when a restored cut could not be read back in full and this request ends at
        // the byte: what the previous request had next is past this one's last message.
        (None, None) => {
            let index = cut
                .segments
                .iter()
                .filter(|s| matches!(s.segment, Segment::Message { .. }))
                .count();
            return Some(Departure {
                offset: common as u64,
                previous_bytes: prev.bytes.len() as u64,
                total_bytes: cut.bytes.len() as u64,
                segment: Segment::Message { index },
                block: None,
                tools: Vec::new(),
            });
        }
    };
    let segment = span.segment.clone();
    let block = match &segment {
        Segment::Message { .. } => {
            let find = |spans: &[Span]| {
                spans
                    .iter()
                    .find(|s| s.segment == segment)
                    .map(|s| (s.start, s.end))
            };
            match (find(&prev.segments), find(&cut.segments)) {
                (Some((a, b)), Some((c, d))) => first_block(&prev.bytes[a..b], &cut.bytes[c..d]),
                _ => None,
            }
        }
        _ => None,
    };
    let tools = match segment {
        Segment::Tool { .. } | Segment::DeferredTools => tool_changes(&prev.tools, &cut.tools),
        _ => Vec::new(),
    };
    Some(Departure {
        offset: common as u64,
        previous_bytes: prev.bytes.len() as u64,
        total_bytes: cut.bytes.len() as u64,
        segment,
        block,
        tools,
    })
}

/// The first content block at which two messages differ, when both contents are arrays.
pub(super) fn first_block(before: &[u8], now: &[u8]) -> Option<usize> {
    let parse = |b: &[u8]| {
        std::str::from_utf8(b)
            .ok()
            .and_then(|t| serde_json::from_str::<Content<'_>>(t).ok())
            .and_then(|c| c.content)
            .map(|c| c.iter().map(|b| b.get().to_owned()).collect::<Vec<_>>())
    };
    let (a, b) = (parse(before)?, parse(now)?);
    let same = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    // Equal arrays: the message differs outside its content (its role).
    (same < a.len().max(b.len())).then_some(same)
}

/// The tool changes between two bodies, by name.
pub(super) fn tool_changes(before: &[ToolEntry], now: &[ToolEntry]) -> Vec<ToolChange> {
    let find = |list: &[ToolEntry], name: &str| list.iter().position(|t| t.name == name);
    let mut out = Vec::new();
    for t in before {
        if find(now, &t.name).is_none() {
            out.push(ToolChange::Removed {
                name: t.name.clone(),
            });
        }
    }
    let mut flips = Vec::new();
    for t in now {
        match find(before, &t.name).map(|i| &before[i]) {
            None => out.push(ToolChange::Added {
                name: t.name.clone(),
            }),
            Some(b) if b.deferred != t.deferred => flips.push(ToolChange::Deferred {
                name: t.name.clone(),
                deferred: t.deferred,
            }),
            Some(b) if b.hash.zip(t.hash).is_some_and(|(x, y)| x != y) => {
                out.push(ToolChange::Redefined {
                    name: t.name.clone(),
                })
            }
            Some(_) => {}
        }
    }
    out.extend(flips);
    // The tools both have, in each one's order.
    let common = |list: &[ToolEntry], other: &[ToolEntry]| -> Vec<String> {
        list.iter()
            .filter(|t| find(other, &t.name).is_some())
            .map(|t| t.name.clone())
            .collect()
    };
    let (a, b) = (common(before, now), common(now, before));
    if let Some((_, name)) = a.iter().zip(&b).find(|(x, y)| x != y) {
        out.push(ToolChange::Reordered { name: name.clone() });
    }
    out
}
