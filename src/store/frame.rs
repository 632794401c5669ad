//! Batch frames: the `{"batch":N}` line before a batch of two or more lines, how a frame line
//! is told from a line that only starts like one, and the text of framed batches and files.

use std::sync::Arc;

use serde::de::{Deserialize, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::Value;

use crate::vocab::JsonFault;

/// The key of a frame line, `{"batch":N}`.
const FRAME_KEY: &str = "batch";

/// A batch frame as the log keeps it: how many lines it announces, and its exact bytes when
/// it was loaded.
#[derive(Clone, Debug)]
pub(crate) struct Frame {
    /// Number of lines the frame announces (at least 2 when the crate writes it).
    pub events: usize,
    /// The loaded line's exact bytes, without `\n`; `None` for a frame made in this process.
    pub line: Option<Arc<str>>,
}

impl Frame {
    /// The frame a batch of `lines` lines made in this process gets: none for a single line,
    /// which a reader never sees half-written as a batch.
    pub(crate) fn announcing(lines: usize) -> Option<Self> {
        (lines > 1).then_some(Frame {
            events: lines,
            line: None,
        })
    }

    /// Appends the frame line (without `\n`) to `out`.
    pub(crate) fn render(&self, out: &mut String) {
        match &self.line {
            Some(l) => out.push_str(l),
            None => out.push_str(&frame_line(self.events)),
        }
    }
}

/// The frames of a log, by the index of the first line of their batch (0 = the first line
/// after the head line).
pub(crate) type Frames = imbl::OrdMap<usize, Frame>;

/// The frame line the crate writes before a batch of `events` lines.
fn frame_line(events: usize) -> String {
    format!("{{\"{FRAME_KEY}\":{events}}}")
}

/// One batch's bytes as the writer writes them in one go: its frame line, if any, then each
/// line, each ending in `\n`.
pub(crate) fn batch_text<S: AsRef<str>>(
    frame: Option<&Frame>,
    lines: impl IntoIterator<Item = S>,
) -> String {
    let mut out = String::new();
    if let Some(frame) = frame {
        frame.render(&mut out);
        out.push('\n');
    }
    for line in lines {
        out.push_str(line.as_ref());
        out.push('\n');
    }
    out
}

/// A whole file's text: `head`, then `lines` with each frame of `frames` before the line its
/// batch starts at; a final `\n` unless `terminated` is false (a loaded file that ended
/// without one keeps it that way, so load → save is byte-identical).
pub(crate) fn file_text<S: AsRef<str>>(
    head: &str,
    frames: &Frames,
    lines: impl IntoIterator<Item = S>,
    terminated: bool,
) -> String {
    let mut out = head.to_owned();
    let mut frames = frames.iter().peekable();
    for (i, line) in lines.into_iter().enumerate() {
        if let Some((_, frame)) = frames.next_if(|(start, _)| **start == i) {
            out.push('\n');
            frame.render(&mut out);
        }
        out.push('\n');
        out.push_str(line.as_ref());
    }
    if terminated {
        out.push('\n');
    }
    out
}

/// What is wrong with a frame line (`{"batch":N}`) that is not cut short.
///
/// ```
/// use mektpoy::session::LoadError;
/// use mektpoy::store::FrameFault;
/// use mektpoy::Session;
/// let mut bytes = Session::new("s").to_jsonl().into_bytes();
/// bytes.extend_from_slice(b"{\"batch\":0}\n");
/// let err = Session::load_bytes(&bytes).unwrap_err();
/// assert!(matches!(err, LoadError::BadFrame { line: 2, fault: FrameFault::Count }));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FrameFault {
    /// The line starts like a frame line but is not a JSON object.
    #[error("it is not a JSON object ({0})")]
    Malformed(JsonFault),
    /// `batch` is not an integer of at least 1.
    #[error("`batch` is not a positive integer")]
    Count,
    /// The object holds a key other than `batch`, or `batch` twice.
    #[error("a frame line holds exactly one key, `batch`")]
    Keys,
    /// The frame stands among the event lines another frame announced.
    #[error("it stands inside the batch framed on line {outer}")]
    Nested {
        /// 1-based line of the enclosing frame.
        outer: usize,
    },
}

/// What a line that starts like a frame line turned out to be.
pub(crate) enum Probe {
    /// An object with a `type`: an event line whose first key happens to be `batch`.
    Event,
    /// A frame line, and its count or what is wrong with it.
    Frame(Result<u64, FrameFault>),
}

impl Probe {
    /// Reads `text`, which [`looks_like_frame`] or [`cut_frame`].
    pub(crate) fn of(text: &str) -> Self {
        serde_json::from_str::<Probe>(text)
            .unwrap_or_else(|e| Probe::Frame(Err(FrameFault::Malformed(JsonFault::from(&e)))))
    }
}

impl<'de> Deserialize<'de> for Probe {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Probe;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Probe, A::Error> {
                let (mut has_type, mut count, mut keys_ok) = (false, None::<Value>, true);
                while let Some(key) = map.next_key::<String>()? {
                    match key.as_str() {
                        "type" => {
                            has_type = true;
                            map.next_value::<IgnoredAny>()?;
                        }
                        FRAME_KEY if count.is_none() => count = Some(map.next_value()?),
                        _ => {
                            keys_ok = false;
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(if has_type {
                    Probe::Event
                } else if !keys_ok {
                    Probe::Frame(Err(FrameFault::Keys))
                } else {
                    match count.as_ref().and_then(Value::as_u64) {
                        Some(n) if n >= 1 => Probe::Frame(Ok(n)),
                        _ => Probe::Frame(Err(FrameFault::Count)),
                    }
                })
            }
        }
        d.deserialize_map(V)
    }
}

const JSON_WS: [char; 4] = [' ', '\t', '\n', '\r'];

/// What follows `{` when `text` starts like an object, else `None`.
fn after_brace(text: &str) -> Option<&str> {
    text.trim_start_matches(JSON_WS)
        .strip_prefix('{')
        .map(|t| t.trim_start_matches(JSON_WS))
}

/// Whether `text` starts like a frame line: an object whose first key is `batch`.
pub(crate) fn looks_like_frame(text: &str) -> bool {
    after_brace(text).is_some_and(|t| t.starts_with("\"batch\""))
}

/// Whether a line cut short (`text`, no `\n`) was a frame line: it starts like one, or is cut
/// inside the key itself (`{"bat`).
pub(crate) fn cut_frame(text: &str) -> bool {
    after_brace(text).is_some_and(|t| t.len() >= 2 && "\"batch\"".starts_with(t))
        || looks_like_frame(text)
}
