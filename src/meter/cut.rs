//! Cutting a request body into its cacheable parts (tools, system, messages, content blocks),
//! and what the meter keeps of the previous request to compare with the next.

use super::*;

/// One segment of a cut and its byte range.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Span {
    pub(super) segment: Segment,
    pub(super) start: usize,
    pub(super) end: usize,
}

/// One tool of a body, deferred or not: what a by-name comparison needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct ToolEntry {
    pub(super) name: String,
    /// FNV-1a of its bytes (markers left out): stable, so that it can be saved. `None` when
    /// unknown (a deferred tool of a version-1 save): never reported as redefined.
    pub(super) hash: Option<u64>,
    pub(super) deferred: bool,
}

/// 64-bit FNV-1a: stable across builds, unlike `std`'s hasher, so a saved meter compares
/// the tools of the next request with the ones it saved.
pub(super) fn hash_bytes(bytes: &[u8]) -> Option<u64> {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    Some(h)
}

/// What the cut knows of its wire messages up to and including one, counted from the first:
/// what a request that keeps that many of them takes over without reading them again.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Counted {
    /// Content blocks.
    pub(super) blocks: usize,
    /// Block ends the cache model reads at (a message without a content array has one).
    pub(super) bounds: usize,
    /// Messages whose bytes hold a `cache_control` key.
    pub(super) asks: usize,
    /// Messages with a content block that holds one.
    pub(super) block_marks: usize,
    /// Messages that hold a definition by value.
    pub(super) by_value: usize,
}

/// What the meter keeps of the previous request.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Previous {
    pub(super) bytes: Vec<u8>,
    /// The cut's segments, in order.
    pub(super) segments: Vec<Span>,
    /// Its block ends, in order.
    pub(super) bounds: Vec<Bound>,
    /// Its prefix hashes; `None` after a restore, which leaves the next request to the
    /// parsing path.
    pub(super) prints: Option<Prints>,
    /// One per wire message, cumulative; `None` after a restore (the saved form does not
    /// hold them), which leaves the next request to the parsing path.
    pub(super) counted: Option<Vec<Counted>>,
    /// The token of the resume point the request's pass left (`wire::Segments::leaves`),
    /// when it came through the loop's entry; equality ignores it.
    pub(super) leaves: Option<std::sync::Arc<()>>,
    /// The block the request's serializer spliced its lookback mark into, if any.
    pub(super) mark: Option<usize>,
    /// Every tool of the body.
    pub(super) tools: Vec<ToolEntry>,
    /// Content blocks over its messages.
    pub(super) blocks: usize,
    /// Whether it carried a tool defined by value.
    pub(super) by_value: bool,
    /// Its measured rate, once its usage was attached.
    pub(super) rate: Option<Rate>,
    /// Whether it is the latest row's request (not a primed body), so that the latest row's
    /// figures are its own.
    pub(super) row: bool,
}

/// A body cut into the provider's caching order, with what caching needs to know of it.
pub(super) struct Cut {
    pub(super) bytes: Vec<u8>,
    pub(super) segments: Vec<Span>,
    pub(super) tools: Vec<ToolEntry>,
    pub(super) blocks: usize,
    /// The ends of its message content blocks, with their breakpoints.
    pub(super) bounds: Vec<Bound>,
    /// One per wire message, cumulative.
    pub(super) counted: Vec<Counted>,
    /// Whether the body asks for automatic caching (a top-level `cache_control`).
    pub(super) top_level: bool,
    /// Whether a `tool_addition` carries a definition by value.
    pub(super) by_value: bool,
    /// Whether `tools` holds a tool without `defer_loading`.
    pub(super) immediate_tool: bool,
    /// Whether the wire has `cache_control` markers to leave out ([`Meter::markers`]).
    pub(super) markers: bool,
}

/// Which way the segment path metered a request (the unit tests check that the cheap one is
/// taken where it should be).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Path {
    /// Proven to keep the previous request's first wire messages and to extend it: only the
    /// head and the new wire messages were read, the previous cut grown in place.
    Extended,
    /// Cut from the spans (kept wire messages copied from the previous cut), compared whole.
    Whole,
}

#[derive(Deserialize)]
pub(super) struct Body<'a> {
    /// Top-level automatic caching: a breakpoint at the last block.
    #[serde(borrow, default)]
    pub(super) cache_control: Option<&'a RawValue>,
    #[serde(borrow, default)]
    pub(super) tools: Vec<&'a RawValue>,
    /// `system`, or a Responses body's `instructions`.
    #[serde(borrow, default, alias = "instructions")]
    pub(super) system: Option<&'a RawValue>,
    /// `messages`, or a Responses body's `input` items.
    #[serde(borrow, alias = "input")]
    pub(super) messages: Vec<&'a RawValue>,
}

/// A message's content blocks, kept raw.
#[derive(Deserialize)]
pub(super) struct Content<'a> {
    #[serde(borrow, default)]
    pub(super) content: Option<Vec<&'a RawValue>>,
}

/// The key the serializers write for a cache breakpoint.
pub(super) const MARKER: &str = "\"cache_control\":";

/// The type of a block carrying a tool definition by value.
pub(super) const BY_VALUE: &str = r#""type":"tool_definition""#;

impl Cut {
    /// The cut of a body's new messages, those after its first `kept` (which the previous
    /// cut holds), counted on from `base`, the previous cut's counts at the last kept one;
    /// `markers` as [`Cut::markers`]. Its `counted` holds one entry per new message.
    pub(super) fn of_new_messages<'m>(
        base: Counted,
        kept: usize,
        new: impl ExactSizeIterator<Item = &'m str>,
        markers: bool,
    ) -> Cut {
        let mut fresh = Cut {
            bytes: Vec::new(),
            segments: Vec::with_capacity(new.len()),
            tools: Vec::new(),
            blocks: base.blocks,
            bounds: Vec::new(),
            counted: vec![base],
            top_level: false,
            by_value: false,
            immediate_tool: false,
            markers,
        };
        for (j, text) in new.enumerate() {
            fresh.push_message(kept + j, text, content_ranges(text).as_deref());
        }
        fresh.counted.remove(0);
        fresh
    }

    pub(super) fn push(&mut self, segment: Segment, bytes: &[u8]) {
        let start = self.bytes.len();
        self.bytes.extend_from_slice(bytes);
        self.segments.push(Span {
            segment,
            start,
            end: self.bytes.len(),
        });
    }

    /// Appends wire message `index` (its body bytes `text`, with its content blocks at
    /// `blocks`, ranges in `text`; `None` when its content is not an array), markers left out.
    pub(super) fn push_message(
        &mut self,
        index: usize,
        text: &str,
        blocks: Option<&[(usize, usize)]>,
    ) {
        let before = self.counted.last().copied().unwrap_or_default();
        let blocks = blocks.unwrap_or_default();
        let marked = |&(s, e): &(usize, usize)| text.get(s..e).is_some_and(|b| b.contains(MARKER));
        let block_mark = self.markers && blocks.iter().any(marked);
        let stripped = self.unmarked(text);
        let at = self.bytes.len();
        let bounds = if self.markers {
            message_bounds(text, stripped.len(), blocks)
        } else {
            message_bounds(text, text.len(), &[])
        };
        self.blocks += blocks.len();
        self.counted.push(Counted {
            blocks: before.blocks + blocks.len(),
            bounds: before.bounds + bounds.len(),
            asks: before.asks + usize::from(self.markers && text.contains(MARKER)),
            block_marks: before.block_marks + usize::from(block_mark),
            by_value: before.by_value + usize::from(text.contains(BY_VALUE)),
        });
        self.bounds.extend(bounds.into_iter().map(|b| Bound {
            key: b.key + at,
            end: b.end + at,
            ..b
        }));
        self.push(Segment::Message { index }, stripped.as_bytes());
    }

    /// `text` with its markers left out, where the wire has markers: on chat a key named
    /// `cache_control` is a schema's property, part of the prompt.
    pub(super) fn unmarked<'t>(&self, text: &'t str) -> Cow<'t, str> {
        if self.markers {
            without_markers(text)
        } else {
            text.into()
        }
    }
}

/// Where a message's content blocks sit in its bytes `text`; `None` when its content is not
/// an array.
pub(super) fn content_ranges(text: &str) -> Option<Vec<(usize, usize)>> {
    let content = serde_json::from_str::<Content<'_>>(text).ok()?.content?;
    // Each block borrows from `text`: its offset is where it starts.
    let ranges = content.iter().map(|b| {
        let at = (b.get().as_ptr() as usize).saturating_sub(text.as_ptr() as usize);
        (at, at + b.get().len())
    });
    Some(ranges.collect())
}

/// The block ends of one message whose bytes are `text` (`stripped_len` once its markers are
/// left out), its content blocks at `blocks` (ranges in `text`): each block's end, markers
/// before it left out, the last one at the message's end (a later request that appends a
/// message keeps the closing bytes too). A message without blocks, or with a marker outside
/// them, has one end: its own.
pub(super) fn message_bounds(
    text: &str,
    stripped_len: usize,
    blocks: &[(usize, usize)],
) -> Vec<Bound> {
    let whole = |mark| {
        vec![Bound {
            key: stripped_len,
            end: stripped_len,
            mark,
        }]
    };
    let mut out = Vec::with_capacity(blocks.len());
    let mut removed = 0;
    for (k, &(s, e)) in blocks.iter().enumerate() {
        let Some(block) = text.get(s..e) else {
            return whole(false);
        };
        let mark = block.contains(MARKER);
        if mark {
            removed += block.len().saturating_sub(without_markers(block).len());
        }
        let key = e.saturating_sub(removed);
        let end = if k + 1 == blocks.len() {
            stripped_len
        } else {
            key
        };
        out.push(Bound { key, end, mark });
    }
    if out.is_empty() || text.len().saturating_sub(removed) != stripped_len {
        return whole(out.iter().any(|b| b.mark));
    }
    out
}

#[derive(Deserialize)]
pub(super) struct ToolFlags<'a> {
    #[serde(default)]
    pub(super) defer_loading: bool,
    /// Messages-API tools: `name` at the top.
    #[serde(borrow, default)]
    pub(super) name: Option<Cow<'a, str>>,
    /// Chat tools: `{"type":"function","function":{"name"}}`.
    #[serde(borrow, default)]
    pub(super) function: Option<FunctionName<'a>>,
    /// A Responses API tool without a name (`{"type":"local_shell"}`) is named by its type, as
    /// the log names it ([decision 139](crate::manual::decisions#decision-139)).
    #[serde(borrow, default, rename = "type")]
    pub(super) kind: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
pub(super) struct FunctionName<'a> {
    #[serde(borrow, default)]
    pub(super) name: Option<Cow<'a, str>>,
}

impl ToolFlags<'_> {
    pub(super) fn name(&self) -> String {
        self.name
            .as_deref()
            .or_else(|| self.function.as_ref().and_then(|f| f.name.as_deref()))
            .or(self.kind.as_deref())
            .unwrap_or_default()
            .to_owned()
    }
}

impl Previous {
    pub(super) fn of(cut: Cut, prints: Prints, row: bool) -> Self {
        Previous {
            bytes: cut.bytes,
            segments: cut.segments,
            bounds: cut.bounds,
            prints: Some(prints),
            tools: cut.tools,
            blocks: cut.blocks,
            counted: Some(cut.counted),
            leaves: None,
            mark: None,
            by_value: cut.by_value,
            rate: None,
            row,
        }
    }

    /// The number of segments before the first wire message.
    pub(super) fn head_spans(&self) -> usize {
        self.segments
            .iter()
            .position(|s| matches!(s.segment, Segment::Message { .. }))
            .unwrap_or(self.segments.len())
    }
}

/// The span of `spans` holding byte `offset`.
pub(super) fn span_at(spans: &[Span], offset: usize) -> Option<&Span> {
    let i = spans.partition_point(|s| s.end <= offset);
    spans.get(i).filter(|s| s.start <= offset && offset < s.end)
}

/// The segments of a saved cut, read back from its bytes: tool objects (no `role`), the
/// deferred section (`#`s), `system` (a string or an array), messages (objects with a
/// `role`). `saved` is every tool of the body in order (version 2), which gives the tools
/// their indices and names the deferred ones; without it (version 1) the tools are the ones
/// the bytes hold.
pub(super) fn resegment(
    bytes: &[u8],
    section: usize,
    saved: Option<Vec<ToolEntry>>,
) -> (Vec<Span>, Vec<ToolEntry>) {
    #[derive(Deserialize)]
    struct Role<'a> {
        #[serde(borrow, default)]
        role: Option<&'a RawValue>,
    }
    let mut segments = Vec::new();
    let mut read = Vec::new();
    let text = std::str::from_utf8(bytes).unwrap_or_default();
    // The body index of each immediate tool, in cut order.
    let indices: Option<Vec<usize>> = saved.as_ref().map(|tools| {
        tools
            .iter()
            .enumerate()
            .filter(|(_, t)| !t.deferred)
            .map(|(i, _)| i)
            .collect()
    });
    let mut pos = 0;
    let mut messages = 0;
    let mut section_seen = false;
    while pos < text.len() {
        if text.as_bytes()[pos] == b'#' && section > 0 && !section_seen {
            let end = (pos + section).min(text.len());
            segments.push(Span {
                segment: Segment::DeferredTools,
                start: pos,
                end,
            });
            section_seen = true;
            pos = end;
            continue;
        }
        let mut stream = serde_json::Deserializer::from_str(&text[pos..]).into_iter::<&RawValue>();
        let Some(Ok(value)) = stream.next() else {
            break;
        };
        let end = pos + stream.byte_offset();
        let raw = value.get();
        let segment = if !raw.starts_with('{') {
            Segment::System
        } else if serde_json::from_str::<Role<'_>>(raw).is_ok_and(|r| r.role.is_some()) {
            messages += 1;
            Segment::Message {
                index: messages - 1,
            }
        } else {
            let name = serde_json::from_str::<ToolFlags<'_>>(raw)
                .map(|f| f.name())
                .unwrap_or_default();
            let k = read.len();
            read.push(ToolEntry {
                name: name.clone(),
                hash: hash_bytes(raw.as_bytes()),
                deferred: false,
            });
            let index = indices
                .as_ref()
                .and_then(|ix| ix.get(k).copied())
                .unwrap_or(k);
            Segment::Tool { index, name }
        };
        segments.push(Span {
            segment,
            start: pos,
            end,
        });
        pos = end;
    }
    (segments, saved.unwrap_or(read))
}
