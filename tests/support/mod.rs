//! Fixtures shared by the integration tests: the examples' notation (tools, content blocks,
//! messages and snapshots, parsed and rendered in one place), event lines written by hand (in
//! the log's key order, independent of the crate's encoder), a `LogBuilder` for whole session
//! files, and a replay model of the surface.
//!
//! # Notation
//!
//! Tools: `"A"` is `{name: A, description: A, parameters: {}}`; a version digit gives another
//! description (`"A2"`: `A v2`), a trailing `d` adds `deferLoading: true` (`"Bd"`, `"A2d"`), a
//! trailing `'` writes the same definition with its keys in another order (`"A'"`). The
//! suffixes apply to a one-capital-letter name; any other spec (`"read"`, `"v1"`) is a plain
//! name. Every tool fixture is built by [`tool_of`].
//!
//! Content blocks: `+B` a `tool-addition`, `-A` a `tool-removal`, `~B` a `tool-redefinition`,
//! `?r` an unknown block `{"type":"image","ref":"r"}`, anything else a text block.
//!
//! Messages: `u1` user, `a1` assistant, `s1` system, `d1(+B,-A,note)` a developer message with
//! those blocks (`d1()`: none).
//!
//! Snapshots: `{[A,Bd],[[d1,[B]]]}` (tools, then each update's message id and additions; an
//! update with redefinitions adds `,~[B2]`).

// Each test crate uses a different subset of these helpers.
#![allow(dead_code)]

pub mod golden;
pub mod recorded;

use std::path::{Path, PathBuf};

use mektpoy::{
    ContentBlock, Event, Message, Session, ToolSchema,
    event::SurfaceOp,
    history::ToolHistory,
    vocab::{Role, Seq},
};
use serde_json::{Value, json};

/// The session line of a session called `id`, as this crate writes it (under the current
/// fold rules, `"rules":4`), without the newline.
pub fn session_line(id: &str) -> String {
    format!(r#"{{"type":"session","version":0,"id":"{id}","rules":4}}"#)
}

/// A tool spec of the notation, parsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ToolSpec<'a> {
    /// The tool's name.
    pub name: &'a str,
    /// The definition's version: 1 unless the spec has a digit.
    pub version: u32,
    /// `d`: declared with `deferLoading: true`.
    pub deferred: bool,
    /// `'`: the definition written with its keys in another order.
    pub reordered: bool,
}

/// Parses a tool spec (see the module notes).
pub fn parse_tool_spec(spec: &str) -> ToolSpec<'_> {
    let plain = ToolSpec {
        name: spec,
        version: 1,
        deferred: false,
        reordered: false,
    };
    if !spec.starts_with(|c: char| c.is_ascii_uppercase()) {
        return plain;
    }
    let (name, mut rest) = spec.split_at(1);
    let reordered = rest.ends_with('\'');
    if reordered {
        rest = &rest[..rest.len() - 1];
    }
    let deferred = rest.ends_with('d');
    if deferred {
        rest = &rest[..rest.len() - 1];
    }
    let version = match rest {
        "" => 1,
        digits => match digits.parse() {
            Ok(v) => v,
            Err(_) => return plain,
        },
    };
    ToolSpec {
        name,
        version,
        deferred,
        reordered,
    }
}

/// The description of version `version` of tool `name`: `name` for version 1, `name vN`
/// otherwise.
pub fn description(name: &str, version: u32) -> String {
    if version == 1 {
        name.to_owned()
    } else {
        format!("{name} v{version}")
    }
}

/// The one tool builder: `name` at definition version `version` (see [`description`]), with
/// `parameters`, deferred or not.
pub fn tool_of(name: &str, version: u32, deferred: bool, parameters: Value) -> ToolSchema {
    ToolSchema::new(name, description(name, version), obj(parameters)).with_defer_loading(deferred)
}

/// A tool spec as a `ToolSchema`, parameters `{"type":"object"}` (the smallest schema every
/// route takes).
pub fn tool(spec: &str) -> ToolSchema {
    tool_with(spec, json!({"type": "object"}))
}

/// A tool spec as a `ToolSchema`, parameters `{"type":"object"}` (what Anthropic routes
/// require at the root).
pub fn object_tool(spec: &str) -> ToolSchema {
    tool_with(spec, json!({"type": "object"}))
}

/// A tool spec as a `ToolSchema` with these `parameters`.
pub fn tool_with(spec: &str, parameters: Value) -> ToolSchema {
    let t = parse_tool_spec(spec);
    if t.reordered {
        let parameters = format!(r#""parameters":{parameters}"#);
        let text = tool_json(spec).replace(r#""parameters":{"type":"object"}"#, &parameters);
        return serde_json::from_str(&text).unwrap();
    }
    tool_of(t.name, t.version, t.deferred, parameters)
}

/// A tool from its JSON (for fixtures the notation cannot write: real schemas, unknown
/// fields).
pub fn tool_from(value: Value) -> ToolSchema {
    ToolSchema::from_value(value).unwrap()
}

/// Space-separated tool specs as `ToolSchema`s.
pub fn tools(specs: &str) -> Vec<ToolSchema> {
    specs.split_whitespace().map(tool).collect()
}

/// The JSON text of a tool spec, written by hand: keys `name`, `description`, `parameters`
/// (`{"type":"object"}`), `deferLoading` in that order, or reversed for a `'` spec.
pub fn tool_json(spec: &str) -> String {
    let t = parse_tool_spec(spec);
    let (name, description) = (t.name, description(t.name, t.version));
    let defer = if t.deferred {
        r#""deferLoading":true"#
    } else {
        ""
    };
    let mut fields = vec![
        format!(r#""name":"{name}""#),
        format!(r#""description":"{description}""#),
        r#""parameters":{"type":"object"}"#.to_owned(),
    ];
    if t.deferred {
        fields.push(defer.to_owned());
    }
    if t.reordered {
        fields.reverse();
    }
    format!("{{{}}}", fields.join(","))
}

/// A tool rendered as a spec: its name, its version when the description is not the
/// name's (`2` for `A v2`; `?` for a description of no version), `d` when deferred.
pub fn tool_spec(t: &ToolSchema) -> String {
    let mut spec = t.name().to_owned();
    if t.description() != t.name() {
        match t
            .description()
            .strip_prefix(t.name())
            .and_then(|d| d.strip_prefix(" v"))
        {
            Some(version) => spec.push_str(version),
            None => spec.push('?'),
        }
    }
    if t.defer_loading() {
        spec.push('d');
    }
    spec
}

/// Tools rendered as space-separated specs.
pub fn tools_spec(tools: &[ToolSchema]) -> String {
    tools.iter().map(tool_spec).collect::<Vec<_>>().join(" ")
}

/// A content block spec as a `ContentBlock`.
pub fn block(spec: &str) -> ContentBlock {
    match spec.split_at_checked(1) {
        Some(("+", n)) => ContentBlock::addition(n).unwrap(),
        Some(("-", n)) => ContentBlock::removal(n).unwrap(),
        Some(("~", n)) => ContentBlock::redefinition(n).unwrap(),
        Some(("?", r)) => ContentBlock::other(json!({"type": "image", "ref": r})).unwrap(),
        _ => ContentBlock::text(spec),
    }
}

/// The JSON text of a content block spec, written by hand.
pub fn block_json(spec: &str) -> String {
    match spec.split_at_checked(1) {
        Some(("+", n)) => format!(r#"{{"type":"tool-addition","toolName":"{n}"}}"#),
        Some(("-", n)) => format!(r#"{{"type":"tool-removal","toolName":"{n}"}}"#),
        Some(("~", n)) => format!(r#"{{"type":"tool-redefinition","toolName":"{n}"}}"#),
        Some(("?", r)) => format!(r#"{{"type":"image","ref":"{r}"}}"#),
        _ => format!(r#"{{"type":"text","text":"{spec}"}}"#),
    }
}

/// A content block rendered as a spec (`!` for a block the notation has no spec for).
pub fn block_spec(b: &ContentBlock) -> String {
    match b {
        ContentBlock::ToolAddition(r) => format!("+{}", r.tool_name()),
        ContentBlock::ToolRemoval(r) => format!("-{}", r.tool_name()),
        ContentBlock::ToolRedefinition(r) => format!("~{}", r.tool_name()),
        ContentBlock::Text { text } => text.clone(),
        ContentBlock::Other(v) => {
            format!("?{}", v.get("ref").and_then(|r| r.as_str()).unwrap_or(""))
        }
        _ => "!".to_owned(),
    }
}

/// A message spec as a `Message`: `u1` (text `text of u1`), `a1` (text `answer`, from
/// provider `p`, model `m`), `s1` (prompt `prompt`), `d1(…)` (a developer message).
pub fn msg(spec: &str) -> Message {
    if let Some((id, rest)) = spec.split_once('(') {
        let blocks = rest
            .strip_suffix(')')
            .unwrap_or_else(|| panic!("bad message {spec}"))
            .split(',')
            .filter(|b| !b.is_empty())
            .map(block)
            .collect();
        return Message::developer(id, blocks);
    }
    match &spec[..1] {
        "u" => Message::user(spec, format!("text of {spec}")),
        "a" => Message::assistant(spec, "answer", "p", "m"),
        "s" => Message::system(spec, "prompt"),
        _ => panic!("bad message {spec}"),
    }
}

/// An answer with a signed thinking block, as the provider returns it.
pub fn signed_answer(id: &str, model: &str) -> Message {
    let mut extra = indexmap::IndexMap::new();
    extra.insert("signature".to_owned(), json!(format!("sig-{id}")));
    Message::new(
        id,
        Role::Assistant,
        vec![
            ContentBlock::Reasoning {
                text: "let me think".into(),
                extra,
            },
            ContentBlock::text("done"),
        ],
        mektpoy::vocab::MessageSource::Model {
            provider: "anthropic".into(),
            model: model.into(),
        },
    )
}

/// Space-separated message specs as `Message`s.
pub fn msgs(specs: &str) -> Vec<Message> {
    specs.split_whitespace().map(msg).collect()
}

/// Messages rendered as space-separated specs: a developer message as `d1(+B,…)`, any other
/// message as its id.
pub fn msgs_spec<'m>(messages: impl IntoIterator<Item = &'m Message>) -> String {
    let one = |m: &Message| {
        if m.role() != Role::Developer {
            return m.id().to_owned();
        }
        let blocks: Vec<String> = m.content().iter().map(block_spec).collect();
        format!("{}({})", m.id(), blocks.join(","))
    };
    messages.into_iter().map(one).collect::<Vec<_>>().join(" ")
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

/// A `developer/message` line (appended to the surface) with `blocks` (block specs)
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

/// The surface after `events`, replayed from the log's rules (the model the session's
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

/// A snapshot rendered in the notation: `{[A,Bd],[[d1,[B]]]}`, an update with
/// redefinitions as `[d1,[],~[B2]]`.
pub fn summary(h: &ToolHistory) -> String {
    let specs = |tools: &mektpoy::vocab::List<ToolSchema>| {
        tools.iter().map(tool_spec).collect::<Vec<_>>().join(",")
    };
    let updates: Vec<String> = h
        .updates()
        .iter()
        .map(|u| {
            let adds = specs(u.additions());
            if u.redefinitions().is_empty() {
                format!("[{},[{adds}]]", u.message_id())
            } else {
                let redefs = specs(u.redefinitions());
                format!("[{},[{adds}],~[{redefs}]]", u.message_id())
            }
        })
        .collect();
    format!("{{[{}],[{}]}}", specs(h.tools()), updates.join(","))
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

/// The by-reference snapshot of `events` folded from scratch: a fresh session appends them and
/// is read once, so its fold has no cached state to reuse. The model the incremental and
/// cached folds are checked against.
pub fn refold<'a>(events: impl IntoIterator<Item = &'a Event>) -> ToolHistory {
    let session = Session::new("refold");
    for e in events {
        session.append(e.clone()).expect("a valid event");
    }
    session.tool_history()
}

/// A torn batch as plain values: `(line, announced, dropped_events)`.
pub type Batch = (usize, Option<u64>, usize);

/// A torn tail as plain values to compare with (the type is `#[non_exhaustive]`): `(offset,
/// len, batch)`, the batch as `(line, announced, dropped_events)`.
pub fn torn(tail: Option<mektpoy::store::TornTail>) -> Option<(u64, u64, Option<Batch>)> {
    tail.map(|t| {
        let batch = t.batch.map(|b| (b.line, b.announced, b.dropped_events));
        (t.offset, t.len, batch)
    })
}
