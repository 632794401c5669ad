//! What a Messages-API body looks like to the provider's prefix checks: the serialized
//! `tools`, `system` and each message with thinking blocks and cache breakpoints ignored.
//!
//! Two requests of a route compare by these: a request *rewrites* when its `tools` or
//! `system` differ from the previous request's, or when the previous request's messages are
//! not a prefix of its own. Thinking blocks are ignored because the thinking policy decides
//! them; the lookback breakpoint because it moves without changing the prompt. `tools` and
//! `system` compare byte for byte (by a keyed hash of their bytes, as the messages do): the serializer puts no breakpoint there, and a schema may
//! well have a property named `cache_control`, whose change is a change of the prompt.

use std::borrow::Cow;
use std::hash::BuildHasher;
use std::sync::{Arc, OnceLock};

use serde::Deserialize;
use serde_json::value::RawValue;

use super::{Rewrite, Segments, WireRequest};

/// A Messages-API body cut into what rewrite detection and the lookback compare.
///
/// The wire messages are kept in two parts: `prefix`, the ones the serializer's resume point
/// holds (shared, as a chain of chunks, with the requests of the route that extended it), and
/// `tail`, the rest. A request that resumed from the previous request's resume point shares
/// its prefix chain, so comparing the two skips that part: its bytes are the same by
/// construction (see `messages::Resume`).
///
/// Each part is kept as a [`TextKey`] of its bytes, not the bytes: rewrite detection only asks
/// whether two parts are equal, and a copy of every turn's text, a route's whole conversation
/// once more, was the largest thing a held conversation kept after its log ([decision
/// 150](crate::manual::decisions#decision-150)).
#[derive(Clone, Debug)]
pub(crate) struct Fingerprint {
    tools: TextKey,
    system: TextKey,
    prefix: Option<Arc<Chunk>>,
    tail: Vec<TextKey>,
    /// Content blocks over the wire messages, in order (thinking included): what the
    /// automatic-caching lookback counts.
    pub blocks: usize,
}

/// Wire messages `len - turns.len() .. len` of a request, after those of `parent`.
#[derive(Debug)]
pub(crate) struct Chunk {
    parent: Option<Arc<Chunk>>,
    turns: Vec<TextKey>,
    len: usize,
}

/// A text's bytes, keyed: their length and a 64-bit hash keyed at random per process
/// (SipHash-1-3, std's `RandomState`), so that no input can be written to make two different
/// texts compare equal without knowing the key. Two texts of one length collide with a
/// probability of about 2⁻⁶⁴ per comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) struct TextKey {
    len: usize,
    hash: u64,
}

impl TextKey {
    /// The key of `text`'s bytes.
    fn of(text: &str) -> TextKey {
        static KEYS: OnceLock<std::collections::hash_map::RandomState> = OnceLock::new();
        TextKey {
            len: text.len(),
            hash: KEYS.get_or_init(Default::default).hash_one(text.as_bytes()),
        }
    }
}

/// A chain is one chunk per request: dropped iteratively, not by recursion.
impl Drop for Chunk {
    fn drop(&mut self) {
        let mut parent = self.parent.take();
        while let Some(p) = parent {
            match Arc::try_unwrap(p) {
                Ok(mut chunk) => parent = chunk.parent.take(),
                Err(_) => break,
            }
        }
    }
}

impl Fingerprint {
    fn prefix_len(&self) -> usize {
        self.prefix.as_ref().map_or(0, |c| c.len)
    }

    fn len(&self) -> usize {
        self.prefix_len() + self.tail.len()
    }

    /// The wire messages from `from` on, in order.
    fn turns_from(&self, from: usize) -> impl Iterator<Item = &TextKey> {
        let mut chunks = Vec::new();
        let mut next = self.prefix.as_deref();
        while let Some(c) = next.filter(|c| c.len > from) {
            chunks.push(c);
            next = c.parent.as_deref();
        }
        chunks
            .into_iter()
            .rev()
            .flat_map(move |c| {
                let start = c.len - c.turns.len();
                c.turns[from.saturating_sub(start)..].iter()
            })
            .chain(self.tail[from.saturating_sub(self.prefix_len())..].iter())
    }

    /// Whether `self`'s prefix chain holds `previous`'s (the same chunk).
    fn shares_prefix_of(&self, previous: &Fingerprint) -> bool {
        let Some(p) = &previous.prefix else {
            return true;
        };
        let mut next = self.prefix.as_ref();
        while let Some(c) = next.filter(|c| c.len >= p.len) {
            if Arc::ptr_eq(c, p) {
                return true;
            }
            next = c.parent.as_ref();
        }
        false
    }
}

#[derive(Deserialize)]
struct Body<'a> {
    #[serde(borrow, default)]
    tools: Option<&'a RawValue>,
    #[serde(borrow, default)]
    system: Option<&'a RawValue>,
    #[serde(borrow)]
    messages: Vec<&'a RawValue>,
}

#[derive(Deserialize)]
struct Turn<'a> {
    #[serde(borrow)]
    content: &'a RawValue,
}

#[derive(Deserialize)]
struct BlockType<'a> {
    #[serde(rename = "type", borrow)]
    ty: Cow<'a, str>,
}

impl Fingerprint {
    /// The fingerprint of a body the serializer wrote; `None` for a body that is not a
    /// Messages-API request. Works on the raw bytes (no tree is built), so two requests that
    /// send a message the same way compare equal byte for byte.
    pub fn of(body: &str) -> Option<Fingerprint> {
        let parsed: Body<'_> = serde_json::from_str(body).ok()?;
        let mut blocks = 0;
        let mut messages = Vec::with_capacity(parsed.messages.len());
        for m in &parsed.messages {
            let text = m.get();
            let turn: Turn<'_> = serde_json::from_str(text).ok()?;
            let content: Vec<&RawValue> = serde_json::from_str(turn.content.get()).ok()?;
            blocks += content.len();
            let marked = content.iter().any(|b| marker_at(b.get()).is_some());
            let kept = if marked || text.contains("thinking\"") {
                // Leave out thinking blocks and the breakpoint, keeping every other byte.
                let start = turn.content.get().as_ptr() as usize - text.as_ptr() as usize;
                let end = start + turn.content.get().len();
                let others: Vec<&str> = content
                    .iter()
                    .filter(|b| {
                        serde_json::from_str::<BlockType<'_>>(b.get())
                            .is_ok_and(|t| !matches!(&*t.ty, "thinking" | "redacted_thinking"))
                    })
                    .map(|b| b.get())
                    .collect();
                Cow::Owned(rejoin(&text[..start], &others, &text[end..]))
            } else {
                Cow::Borrowed(text)
            };
            messages.push(TextKey::of(&kept));
        }
        let part = |v: Option<&RawValue>| TextKey::of(v.map_or("", RawValue::get));
        Some(Fingerprint {
            tools: part(parsed.tools),
            system: part(parsed.system),
            prefix: None,
            tail: messages,
            blocks,
        })
    }

    /// The fingerprint of a Messages-API request the serializer wrote, from the segments it
    /// noted while writing (no parse): the same wire messages as [`of`](Self::of) on its body,
    /// which every debug build checks. `resumed`: the previous request's fingerprint and the
    /// number of wire messages this request's pass took from its resume point, when it
    /// resumed (those are shared, not copied); `split`: the number of wire messages the resume
    /// point this request leaves holds. `None` for a body that is not a Messages-API request.
    pub fn of_request(
        wire: &WireRequest,
        resumed: Option<(&Fingerprint, usize)>,
        split: usize,
    ) -> Option<Fingerprint> {
        let Some(segments) = wire.segments.as_deref() else {
            return Fingerprint::of(&wire.body);
        };
        let body = &wire.body;
        let n = segments.first + segments.messages.len();
        let split = split.min(n);
        // The previous request's prefix is this one's first wire messages only when this pass
        // resumed from the point that came with it.
        let base = resumed.filter(|(p, turns)| p.prefix_len() == *turns && *turns <= split);
        let from = base.map_or(0, |(_, turns)| turns);
        if from < segments.first {
            // The kept wire messages have no spans here and no shared chunk: read the body.
            return Fingerprint::of(body);
        }
        let parent = base.and_then(|(p, _)| p.prefix.clone());
        let prefix = if split > from {
            Some(Arc::new(Chunk {
                parent,
                turns: turn_texts(body, segments, from..split),
                len: split,
            }))
        } else {
            parent
        };
        let part =
            |r: &Option<std::ops::Range<usize>>| TextKey::of(r.clone().map_or("", |r| &body[r]));
        let fingerprint = Fingerprint {
            tools: part(&segments.tools),
            system: part(&segments.system),
            prefix,
            tail: turn_texts(body, segments, split..n),
            blocks: segments.first_block + segments.blocks.len(),
        };
        #[cfg(debug_assertions)]
        {
            let parsed = Fingerprint::of(body).expect("a Messages-API body");
            debug_assert_eq!(
                (&fingerprint.tools, &fingerprint.system, fingerprint.blocks),
                (&parsed.tools, &parsed.system, parsed.blocks)
            );
            debug_assert!(
                fingerprint.turns_from(0).eq(parsed.turns_from(0)),
                "the segments' fingerprint departs from the body's"
            );
        }
        Some(fingerprint)
    }

    /// What `self` (a later request) rewrote against `previous`, if anything.
    pub fn rewrite_since(&self, previous: &Fingerprint) -> Option<Rewrite> {
        if self.tools != previous.tools {
            return Some(Rewrite::Tools);
        }
        if self.system != previous.system {
            return Some(Rewrite::System);
        }
        // A shared prefix is the same wire messages: compare from where it ends.
        let from = if self.shares_prefix_of(previous) {
            previous.prefix_len()
        } else {
            0
        };
        if self.len() < previous.len() {
            // A shorter request does not extend the previous one; report the first
            // difference, or where this one ends.
            let first = previous
                .turns_from(from)
                .zip(self.turns_from(from))
                .position(|(p, n)| p != n);
            return Some(Rewrite::History {
                message: from + first.unwrap_or(self.len() - from),
            });
        }
        previous
            .turns_from(from)
            .zip(self.turns_from(from))
            .position(|(p, n)| p != n)
            .map(|i| Rewrite::History { message: from + i })
    }
}

/// The wire messages `range` of `body` as rewrite detection compares them, keyed: thinking
/// blocks left out (every other byte kept as sent) and cache breakpoints removed.
fn turn_texts(body: &str, segments: &Segments, range: std::ops::Range<usize>) -> Vec<TextKey> {
    const CONTENT: &str = "\"content\":";
    let mut out = Vec::with_capacity(range.len());
    let turns = range.start - segments.first..range.end - segments.first;
    for turn in &segments.messages[turns] {
        let text = &body[turn.span.clone()];
        let first = segments.first_block;
        let blocks = &segments.blocks[turn.blocks.start - first..turn.blocks.end - first];
        let marked = blocks
            .iter()
            .any(|b| marker_at(&body[b.span.clone()]).is_some());
        let kept = if marked || blocks.iter().any(|b| b.thinking) {
            // `{"role":R,"content":[…]}`: the role is a plain word, so the first `"content":`
            // is the key.
            let start = text.find(CONTENT).map_or(0, |i| i + CONTENT.len());
            let others: Vec<&str> = blocks
                .iter()
                .filter(|b| !b.thinking)
                .map(|b| &body[b.span.clone()])
                .collect();
            Cow::Owned(rejoin(&text[..start], &others, "}"))
        } else {
            Cow::Borrowed(text)
        };
        out.push(TextKey::of(&kept));
    }
    out
}

/// `head[blocks…]tail`, each block without the lookback breakpoint.
fn rejoin(head: &str, blocks: &[&str], tail: &str) -> String {
    let mut out = String::with_capacity(head.len() + tail.len() + blocks.len() * 64);
    out.push_str(head);
    out.push('[');
    for (i, block) in blocks.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        match marker_at(block) {
            Some(at) => {
                out.push_str(&block[..at]);
                out.push('}');
            }
            None => out.push_str(block),
        }
    }
    out.push(']');
    out.push_str(tail);
    out
}

/// Where the lookback breakpoint starts in a content block's JSON, if it carries one: the
/// serializer writes it as the block's last entry, `,"cache_control":{…}}`, its value a flat
/// object. Only that position counts: a `cache_control` key nested in a tool call's input,
/// or anywhere but last, is part of the prompt. A quote inside a JSON string is escaped, so
/// the unescaped key can only be a key.
fn marker_at(block: &str) -> Option<usize> {
    const KEY: &str = ",\"cache_control\":{";
    let at = block.rfind(KEY)?;
    let value = block[at + KEY.len()..].strip_suffix("}}")?;
    (!value.contains(['{', '}'])).then_some(at)
}

/// `text` without its `"cache_control":{...}` breakpoints (and the comma that joins each to its
/// neighbour): a cache breakpoint is not part of the prompt. A quote inside a JSON string is
/// escaped, so the unescaped key can only be a key. A breakpoint's value is the vendor's flat
/// `{"type":"ephemeral"}` (with an optional `ttl`:
/// <https://platform.claude.com/docs/en/build-with-claude/prompt-caching>,
/// read 2026-12-06); a key of that name with another value (a tool schema's property, a
/// model's tool input) is prompt and stays.
pub(crate) fn without_markers(text: &str) -> Cow<'_, str> {
    const KEY: &str = "\"cache_control\":{";
    if !text.contains(KEY) {
        return text.into();
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find(KEY) {
        let after = &rest[i + KEY.len()..];
        let Some(j) = after.find('}') else { break };
        if after[..j].contains('{') || !after[..j].contains(r#""type":"ephemeral""#) {
            // Not a breakpoint: keep the key and look on after it.
            let kept = i + KEY.len();
            out.push_str(&rest[..kept]);
            rest = &rest[kept..];
            continue;
        }
        let tail = &after[j + 1..];
        if rest[..i].ends_with(',') {
            // `,"cache_control":{...}`: the entry and the comma before it.
            out.push_str(&rest[..i - 1]);
            rest = tail;
        } else if let Some(tail) = tail.strip_prefix(',') {
            // `{"cache_control":{...},`: the entry and the comma after it.
            out.push_str(&rest[..i]);
            rest = tail;
        } else {
            out.push_str(&rest[..i]);
            rest = tail;
        }
    }
    out.push_str(rest);
    out.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fp(body: &str) -> Fingerprint {
        Fingerprint::of(body).unwrap_or_else(|| panic!("not a body: {body}"))
    }

    #[test]
    fn rewrites_are_tools_system_or_a_broken_message_prefix() {
        let base = fp(
            r#"{"model":"m","system":"s","tools":[{"name":"a"}],"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}"#,
        );
        let longer = fp(
            r#"{"model":"m","system":"s","tools":[{"name":"a"}],"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]},{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"x"},{"type":"text","text":"ok"}]}]}"#,
        );
        assert_eq!(longer.rewrite_since(&base), None);
        assert_eq!(longer.blocks, 3);
        let tools = fp(
            r#"{"model":"m","system":"s","tools":[{"name":"b"}],"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}"#,
        );
        assert_eq!(tools.rewrite_since(&base), Some(Rewrite::Tools));
        let system = fp(
            r#"{"model":"m","system":"t","tools":[{"name":"a"}],"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}"#,
        );
        assert_eq!(system.rewrite_since(&base), Some(Rewrite::System));
        let history = fp(
            r#"{"model":"m","system":"s","tools":[{"name":"a"}],"messages":[{"role":"user","content":[{"type":"text","text":"summary"}]}]}"#,
        );
        assert_eq!(
            history.rewrite_since(&base),
            Some(Rewrite::History { message: 0 })
        );
        // A shorter request does not extend the previous one.
        assert_eq!(
            base.rewrite_since(&longer),
            Some(Rewrite::History { message: 1 })
        );
    }

    #[test]
    fn thinking_blocks_and_cache_breakpoints_are_ignored() {
        let with = fp(
            r#"{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral"}}]},{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"x"},{"type":"text","text":"ok"}]}]}"#,
        );
        let without = fp(
            r#"{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]},{"role":"assistant","content":[{"type":"text","text":"ok"}]}]}"#,
        );
        assert_eq!(with.rewrite_since(&without), None);
        assert_eq!(without.rewrite_since(&with), None);
        assert_eq!((with.blocks, without.blocks), (3, 2));
    }

    /// Issue 20, item 1: only the breakpoint the serializer writes is ignored; a schema
    /// property or a tool input named `cache_control` is prompt.
    #[test]
    fn a_cache_control_key_that_is_not_the_breakpoint_is_compared() {
        let tools = |d: &str| {
            fp(&format!(
                r#"{{"model":"m","tools":[{{"name":"a","input_schema":{{"type":"object","properties":{{"cache_control":{{"type":"string","description":"{d}"}}}}}}}}],"messages":[]}}"#
            ))
        };
        assert_eq!(
            tools("v2").rewrite_since(&tools("v1")),
            Some(Rewrite::Tools)
        );
        assert_eq!(tools("v1").rewrite_since(&tools("v1")), None);
        let call = |v: &str| {
            fp(&format!(
                r#"{{"model":"m","messages":[{{"role":"assistant","content":[{{"type":"tool_use","id":"c","name":"a","input":{{"cache_control":{{"type":"{v}"}}}}}}]}}]}}"#
            ))
        };
        assert_eq!(
            call("y").rewrite_since(&call("x")),
            Some(Rewrite::History { message: 0 })
        );
        let system = |s: &str| fp(&format!(r#"{{"model":"m","system":"{s}","messages":[]}}"#));
        let quoted = r#"a \"cache_control\":{\"type\":\"ephemeral\"} b"#;
        assert_eq!(
            system(quoted).rewrite_since(&system("a  b")),
            Some(Rewrite::System)
        );
    }
}
