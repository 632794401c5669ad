//! Fixtures shared by the integration tests: event lines written by hand (in SPEC §1 key
//! order, independent of the crate's encoder), a `LogBuilder` for whole session files, and a
//! replay model of the surface.
//!
//! Tool specs follow EXAMPLES.md: `"A"` is `{name: A, description: A, parameters: {}}`, a
//! trailing `d` adds `deferLoading: true` (`"Bd"`), a trailing `2` changes the description
//! (`"A2"`).

// Each test crate uses a different subset of these helpers.
#![allow(dead_code)]

pub mod golden;
pub mod recorded;

use std::path::{Path, PathBuf};

use mektpoy::{
    Event, Message, Session, ToolSchema, event::SurfaceOp, history::ToolHistory, vocab::Seq,
};
use serde_json::{Value, json};

/// The session line of a session called `id`, without the newline.
pub fn session_line(id: &str) -> String {
    format!(r#"{{"type":"session","version":0,"id":"{id}"}}"#)
}

/// The JSON of an EXAMPLES.md tool spec.
pub fn tool_json(spec: &str) -> String {
    let (name, deferred, changed) = parse_tool_spec(spec);
    let description = if changed {
        format!("{name} v2")
    } else {
        name.to_owned()
    };
    let defer = if deferred {
        r#","deferLoading":true"#
    } else {
        ""
    };
    format!(r#"{{"name":"{name}","description":"{description}","parameters":{{}}{defer}}}"#)
}

fn parse_tool_spec(spec: &str) -> (&str, bool, bool) {
    let mut name = spec;
    let deferred = name.len() > 1 && name.ends_with('d');
    if deferred {
        name = &name[..name.len() - 1];
    }
    let changed = name.len() > 1 && name.ends_with('2');
    if changed {
        name = &name[..name.len() - 1];
    }
    (name, deferred, changed)
}

/// An EXAMPLES.md tool spec as a `ToolSchema`.
pub fn tool(spec: &str) -> ToolSchema {
    ToolSchema::from_value(serde_json::from_str(&tool_json(spec)).unwrap()).unwrap()
}

/// A `request/header` line with config `{"provider":"p","model":"m"}`.
pub fn header(tools: &[&str], reason: &str) -> String {
    header_with(tools, reason, false)
}

/// A `request/header` line with `startsSeries: true`.
pub fn header_ss(tools: &[&str], reason: &str) -> String {
    header_with(tools, reason, true)
}

fn header_with(tools: &[&str], reason: &str, starts_series: bool) -> String {
    let tools = if tools.is_empty() {
        String::new()
    } else {
        let list: Vec<String> = tools.iter().map(|t| tool_json(t)).collect();
        format!(r#","tools":[{}]"#, list.join(","))
    };
    let ss = if starts_series {
        r#","startsSeries":true"#
    } else {
        ""
    };
    format!(
        r#"{{"type":"request/header","data":{{"header":{{"config":{{"provider":"p","model":"m"}}{tools}}},"reason":"{reason}"{ss}}}}}"#
    )
}

/// The `source` a recorder would write for a message of `role`.
pub fn source_json(role: &str) -> &'static str {
    match role {
        "user" => r#"{"kind":"user"}"#,
        "assistant" => r#"{"kind":"model","provider":"p","model":"m"}"#,
        "tool" => r#"{"kind":"tool","callId":"c1"}"#,
        "developer" => r#"{"kind":"tool-registry"}"#,
        "system" => r#"{"kind":"system-prompt"}"#,
        other => panic!("no role {other}"),
    }
}

/// The event type that carries a message of `role`.
pub fn event_type(role: &str) -> &'static str {
    match role {
        "user" => "user/message",
        "assistant" => "assistant/message",
        "tool" => "tool/result",
        "developer" => "developer/message",
        "system" => "system/message",
        other => panic!("no role {other}"),
    }
}

/// `,"surfaceOp":"append"`.
pub const APPEND: &str = r#","surfaceOp":"append""#;
/// No `surfaceOp`: a log-only message.
pub const LOG_ONLY: &str = "";

/// `,"surfaceOp":{"op":"replace","start":s,"end":e}`.
pub fn replace_op(start: usize, end: usize) -> String {
    format!(r#","surfaceOp":{{"op":"replace","start":{start},"end":{end}}}"#)
}

/// A message event line of `role` with one text block `text of {id}`; `op` is [`APPEND`],
/// [`LOG_ONLY`] or a [`replace_op`].
pub fn message(role: &str, id: &str, op: &str) -> String {
    format!(
        r#"{{"type":"{ty}","data":{{"message":{{"id":"{id}","role":"{role}","content":[{{"type":"text","text":"text of {id}"}}],"source":{src}}}}}{op}}}"#,
        ty = event_type(role),
        src = source_json(role),
    )
}

/// A user message appended to the surface.
pub fn user(id: &str) -> String {
    message("user", id, APPEND)
}

/// An assistant message appended to the surface.
pub fn assistant(id: &str) -> String {
    message("assistant", id, APPEND)
}

/// A tool-change block from `"+B"` (addition) or `"-A"` (removal); anything else is a text
/// block.
pub fn block_json(block: &str) -> String {
    if let Some(name) = block.strip_prefix('+') {
        format!(r#"{{"type":"tool-addition","toolName":"{name}"}}"#)
    } else if let Some(name) = block.strip_prefix('-') {
        format!(r#"{{"type":"tool-removal","toolName":"{name}"}}"#)
    } else {
        format!(r#"{{"type":"text","text":"{block}"}}"#)
    }
}

/// A `developer/message` line (appended to the surface) with `blocks` (see [`block_json`])
/// and an optional `headerSeq`.
pub fn dev(id: &str, blocks: &[&str], header_seq: Option<u64>) -> String {
    let content: Vec<String> = blocks.iter().map(|b| block_json(b)).collect();
    let hs = header_seq.map_or(String::new(), |h| format!(r#","headerSeq":{h}"#));
    format!(
        r#"{{"type":"developer/message","data":{{"message":{{"id":"{id}","role":"developer","content":[{}],"source":{{"kind":"tool-registry"}}}}{hs}}},"surfaceOp":"append"}}"#,
        content.join(",")
    )
}

/// An event of unknown type `ty` with `{"data":{"n":1}}` and the given `op` suffix.
pub fn opaque(ty: &str, op: &str) -> String {
    format!(r#"{{"type":"{ty}","data":{{"n":1}}{op}}}"#)
}

/// Builds session files (and sessions) line by line.
#[derive(Clone, Debug)]
pub struct LogBuilder {
    first: String,
    lines: Vec<String>,
}

impl LogBuilder {
    /// A log of session `id` with no events.
    pub fn new(id: &str) -> Self {
        LogBuilder {
            first: session_line(id),
            lines: Vec::new(),
        }
    }

    /// A log whose session line is `first` (verbatim).
    pub fn with_session_line(first: impl Into<String>) -> Self {
        LogBuilder {
            first: first.into(),
            lines: Vec::new(),
        }
    }

    /// Adds one event line (verbatim).
    #[must_use]
    pub fn line(mut self, line: impl Into<String>) -> Self {
        self.lines.push(line.into());
        self
    }

    /// Adds several event lines.
    #[must_use]
    pub fn lines<I: IntoIterator<Item = S>, S: Into<String>>(mut self, lines: I) -> Self {
        self.lines.extend(lines.into_iter().map(Into::into));
        self
    }

    /// The event lines, without newlines.
    pub fn event_lines(&self) -> &[String] {
        &self.lines
    }

    /// Number of event lines.
    pub fn len(&self) -> usize {
        self.lines.len()
    }

    /// The file: the session line and every event line, each ending in `\n`.
    pub fn text(&self) -> String {
        let mut out = self.first.clone();
        out.push('\n');
        for l in &self.lines {
            out.push_str(l);
            out.push('\n');
        }
        out
    }

    /// Writes [`text`](Self::text) to `dir/name` and returns the path.
    pub fn write(&self, dir: &Path, name: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, self.text()).unwrap();
        path
    }

    /// A session holding these events, appended with `append_json` (panics, naming the
    /// line, on a refusal: a fixture must be valid).
    pub fn session(&self, id: &str) -> Session {
        let s = Session::new(id);
        for (i, l) in self.lines.iter().enumerate() {
            if let Err(e) = s.append_json(l) {
                panic!("fixture line {i} refused: {e}\n{l}");
            }
        }
        s
    }
}

/// One node of the surface as the model below replays it: a message, or an opaque node.
#[derive(Clone, Debug, PartialEq)]
pub enum Node {
    Message(Message),
    Opaque(Seq),
}

/// The surface after `events`, replayed from the rules of SPEC §1 (the model the session's
/// cached surface is compared against), and the number of replaces.
pub fn replay_surface<'a>(events: impl IntoIterator<Item = &'a Event>) -> (Vec<Node>, u64) {
    let mut surface = Vec::new();
    let mut generation = 0;
    for (i, e) in events.into_iter().enumerate() {
        let node = match e {
            Event::Message(m) => Node::Message(m.message.clone()),
            _ => Node::Opaque(Seq(i as u64)),
        };
        match e.surface_op() {
            None => {}
            Some(SurfaceOp::Append) => surface.push(node),
            Some(SurfaceOp::Replace { start, end }) => {
                surface.splice(start..=end, [node]);
                generation += 1;
            }
        }
    }
    (surface, generation)
}

/// The messages of a replayed surface, opaque nodes left out.
pub fn surface_messages(surface: &[Node]) -> Vec<Message> {
    surface
        .iter()
        .filter_map(|n| match n {
            Node::Message(m) => Some(m.clone()),
            Node::Opaque(_) => None,
        })
        .collect()
}

/// A snapshot in EXAMPLES.md notation: `{[A,Bd],[[d1,[B]]]}` (`d` = deferred, `2` = the
/// changed description).
pub fn summary(h: &ToolHistory) -> String {
    let name = |t: &ToolSchema| {
        let mut n = t.name().to_owned();
        if t.description().ends_with(" v2") {
            n.push('2');
        }
        if t.defer_loading() {
            n.push('d');
        }
        n
    };
    let tools: Vec<String> = h.tools().iter().map(name).collect();
    let updates: Vec<String> = h
        .updates()
        .iter()
        .map(|u| {
            let adds: Vec<String> = u.additions().iter().map(name).collect();
            format!("[{},[{}]]", u.message_id(), adds.join(","))
        })
        .collect();
    format!("{{[{}],[{}]}}", tools.join(","), updates.join(","))
}

/// A typed user message event with a fresh id, for "the session still works" checks.
pub fn fresh_user(id: &str) -> Event {
    Event::append(Message::user(id, "fresh"))
}

/// `value` as compact JSON text (for comparing snapshots as data).
pub fn to_value<T: serde::Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap()
}

/// `json!` re-export, so test files can build values without importing serde_json.
pub fn obj(v: Value) -> serde_json::Map<String, Value> {
    match v {
        Value::Object(m) => m,
        other => panic!("not an object: {other}"),
    }
}

/// `{}` as parameters.
pub fn no_params() -> serde_json::Map<String, Value> {
    obj(json!({}))
}
