//! A client's Messages-API body, read as the crate's vocabulary: its tools, system prompt,
//! messages and the rest of its parameters; and which of its messages the log already holds.

use mektpoy::response::{decode_chat, decode_messages, decode_responses};
use mektpoy::vocab::{MessageSource, Role};
use mektpoy::{ContentBlock, Message, ToolSchema};
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use crate::client_body::{Body, Entry, Known, RawKey};

/// Why a client body cannot be taken: answered as the provider's `invalid_request_error`.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Invalid(pub String);

fn invalid(message: impl Into<String>) -> Invalid {
    Invalid(message.into())
}

/// A client request, taken apart.
#[derive(Clone, Debug)]
pub struct ClientRequest {
    /// `model`.
    pub model: String,
    /// `system`, its text blocks joined (an absent system is the empty prompt).
    pub system: String,
    /// `tools`, as the crate's schemas (the client's `cache_control` left out: the crate
    /// places its own breakpoints).
    pub tools: Vec<ToolSchema>,
    /// `messages` from the first one not taken from the log on (the `reused` before them are
    /// the log's first visible messages), in the crate's shape: a user message's
    /// `tool_result` blocks become tool messages before the rest of it.
    pub messages: Vec<Message>,
    /// Every other top-level key (`max_tokens`, `stream`, `thinking`, `tool_choice`, ...),
    /// sent on as the route's configuration.
    pub params: Map<String, Value>,
    /// The request's raw messages from `same` on, keyed, for the next request (those before
    /// are the previous request's, kept where they are: decision 157).
    pub raw: Vec<Entry>,
    /// How many leading raw messages the previous request sent byte for byte.
    pub same: usize,
    /// How many leading messages were not read but taken from the log: the previous request
    /// sent their bytes, and the log holds them as its first visible messages.
    pub reused: usize,
    /// The key of the `tools` bytes and the reader that read them, when `tools` are what
    /// they read as (no tool change in history): what the next request may take them by
    /// (decision 158).
    pub tools_key: Option<(RawKey, &'static str)>,
}

impl ClientRequest {
    /// How many messages the request holds in the crate's shape, those taken from the log
    /// included.
    pub fn len(&self) -> usize {
        self.reused + self.messages.len()
    }

    /// Whether the request holds no message in the crate's shape.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Which raw messages of a request are read, and which are taken from what the previous
/// request's stood for.
struct Reading<'k, 'r> {
    raw: &'r [&'r RawValue],
    known: Option<&'k Known>,
    /// Raw messages the previous request sent byte for byte, from the first.
    same: usize,
    /// How many messages in the crate's shape they are.
    reused: usize,
    /// How many messages in the crate's shape were taken so far (never pushed: the log's
    /// own, `reused` at most).
    taken: usize,
    /// The entries of the raw messages from `same` on.
    entries: Vec<Entry>,
}

impl<'k, 'r> Reading<'k, 'r> {
    fn new(raw: &'r [&'r RawValue], known: Option<&'k Known>) -> Self {
        let (same, reused) = known.map_or((0, 0), |k| k.reusable(raw));
        Reading {
            entries: Vec::with_capacity(raw.len() - same),
            raw,
            known,
            same,
            reused,
            taken: 0,
        }
    }

    /// Raw message `i` as the previous request sent it: its messages are the log's, counted,
    /// not copied. `false`: it is to be read.
    fn take(&mut self, i: usize) -> bool {
        let Some(known) = self.known.filter(|_| i < self.same) else {
            return false;
        };
        let entry = known.raw[i];
        if entry.read_again {
            return false;
        }
        self.taken = entry.end;
        true
    }

    /// How many messages in the crate's shape the request holds so far, with `messages` read.
    fn so_far(&self, messages: &[Message]) -> usize {
        self.taken + messages.len()
    }

    /// Raw message `i` was read: `end` messages in the crate's shape so far. Before `same`
    /// its entry is the previous request's (the same bytes, read the same way), kept.
    fn read(&mut self, i: usize, read_again: bool, end: usize) {
        if i < self.same {
            return;
        }
        self.entries.push(Entry {
            key: RawKey::of(self.raw[i]),
            read_again,
            end,
            open: false,
        });
    }

    /// Raw items `items` were read as one message, the last of `end` so far. A message that
    /// ends the request stays open: the next request may add items to it.
    fn read_group(&mut self, items: impl ExactSizeIterator<Item = usize>, end: usize) {
        let last = items.len().saturating_sub(1);
        for (n, i) in items.enumerate() {
            if i < self.same {
                continue;
            }
            let closed = n == last && i + 1 < self.raw.len();
            self.entries.push(Entry {
                key: RawKey::of(self.raw[i]),
                read_again: false,
                end: if n == last { end } else { end - 1 },
                open: !closed,
            });
        }
    }

    /// Raw message `i` as a value.
    fn value(raw: &RawValue) -> Result<Value, Invalid> {
        serde_json::from_str(raw.get()).map_err(|e| invalid(e.to_string()))
    }
}

/// Keys the crate writes itself; a client's top-level `cache_control` is replaced by the
/// route's own breakpoints.
const OWN_KEYS: [&str; 5] = ["model", "system", "tools", "messages", "cache_control"];

/// Reads a Messages-API request body. `provider` names the answers' source for assistant
/// messages the log does not hold yet; `known`, what the conversation's previous request
/// stood for, spares reading the messages it sent already.
///
/// # Errors
/// [`Invalid`] for a body of another shape: not an object, no string `model`, `messages` not
/// an array, a message without a known role, a block without a `type`, a tool without a
/// `name` or an object `input_schema`.
pub fn read(
    body: &Body<'_>,
    provider: &str,
    known: Option<&Known>,
) -> Result<ClientRequest, Invalid> {
    let (object, model, (tools, tools_key), raw) =
        head(body, known, ("messages", tool), |i| format!("tools.{i}"))?;
    let system = match object.get("system") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(blocks)) => {
            let mut texts = Vec::new();
            for (i, b) in blocks.iter().enumerate() {
                match (b.get("type").and_then(Value::as_str), b.get("text")) {
                    (Some("text"), Some(Value::String(t))) => texts.push(t.as_str()),
                    _ => return Err(invalid(format!("system.{i}: a text block is expected"))),
                }
            }
            texts.join("\n\n")
        }
        Some(_) => return Err(invalid("system: a string or text blocks are expected")),
    };
    let mut messages = Vec::new();
    let mut changes = ClientChanges::default();
    let mut reading = Reading::new(raw, known);
    for (i, m) in raw.iter().enumerate() {
        if reading.take(i) {
            continue;
        }
        let at = |e: Invalid| invalid(format!("messages.{i}: {}", e.0));
        let m = Reading::value(m).map_err(at)?;
        let system = m.get("role").and_then(Value::as_str) == Some("system");
        if system {
            changes.apply(&m, &tools).map_err(at)?;
        } else {
            message(&m, i, provider, &model, &mut messages).map_err(at)?;
        }
        reading.read(i, system, reading.so_far(&messages));
    }
    let params = params_of(object, &OWN_KEYS);
    // Tools a change in history altered are not what their bytes read as.
    let tools_key = tools_key.filter(|_| !changes.seen);
    Ok(ClientRequest {
        model,
        system,
        tools: changes.effective(tools),
        messages,
        params,
        raw: reading.entries,
        same: reading.same,
        reused: reading.reused,
        tools_key,
    })
}

/// A client that already announces its tool changes in history (`system` messages holding
/// `tool_addition` / `tool_removal` blocks, by reference or with a definition by value):
/// its `tools` are the declarations, and what it offers now is those changes applied in
/// order. The proxy takes that as the effective tools and logs the changes its own way, so
/// they are not sent twice.
#[derive(Default)]
struct ClientChanges {
    /// Declared names, offered or not, in order (listed at the first change).
    offered: Vec<(String, bool)>,
    /// Tools defined by value in history, in order.
    defined: Vec<ToolSchema>,
    seen: bool,
}

impl ClientChanges {
    /// Applies the changes of system message `m` to the declarations `tools`.
    fn apply(&mut self, m: &Value, tools: &[ToolSchema]) -> Result<(), Invalid> {
        if !self.seen {
            self.offered = tools
                .iter()
                .map(|t| (t.name().to_owned(), !t.defer_loading()))
                .collect();
        }
        let blocks = m
            .get("content")
            .and_then(Value::as_array)
            .ok_or_else(|| invalid("content: a system message holds tool-change blocks"))?;
        for (j, b) in blocks.iter().enumerate() {
            let at = |e: &str| invalid(format!("content.{j}: {e}"));
            let add = match b.get("type").and_then(Value::as_str) {
                Some("tool_addition") => true,
                Some("tool_removal") => false,
                _ => {
                    return Err(at(
                        "mektpoy-proxy takes tool_addition and tool_removal blocks in a system message, nothing else",
                    ));
                }
            };
            self.seen = true;
            match b.pointer("/tool/type").and_then(Value::as_str) {
                Some("tool_reference") => {
                    let name = b
                        .pointer("/tool/name")
                        .and_then(Value::as_str)
                        .ok_or_else(|| at("tool.name: Field required"))?;
                    match self.offered.iter_mut().find(|(n, _)| n == name) {
                        Some((_, on)) => *on = add,
                        None => match self.defined.iter().position(|t| t.name() == name) {
                            Some(i) if !add => {
                                self.defined.remove(i);
                            }
                            Some(_) => {}
                            None => return Err(at(&format!("`{name}` names no declared tool"))),
                        },
                    }
                }
                Some("tool_definition") if add => {
                    let definition = b
                        .pointer("/tool/definition")
                        .ok_or_else(|| at("tool.definition: Field required"))?;
                    let schema = tool(&without_cache_control(definition))
                        .map_err(|e| at(&e.0))?
                        .with_defer_loading(false);
                    self.defined.retain(|t| t.name() != schema.name());
                    if let Some((_, on)) = self.offered.iter_mut().find(|(n, _)| n == schema.name())
                    {
                        // A declared tool redefined in history: the new definition is offered.
                        *on = false;
                    }
                    self.defined.push(schema);
                }
                _ => {
                    return Err(at(
                        "tool: a tool_reference, or for an addition a tool_definition",
                    ));
                }
            }
        }
        Ok(())
    }

    /// The tools in force after the client's changes: the declarations still offered (or
    /// still deferred), then the definitions given in history.
    fn effective(self, tools: Vec<ToolSchema>) -> Vec<ToolSchema> {
        if !self.seen {
            return tools;
        }
        let mut out: Vec<ToolSchema> = tools
            .into_iter()
            .filter_map(|t| match self.offered.iter().find(|(n, _)| n == t.name()) {
                Some((_, true)) => Some(t.with_defer_loading(false)),
                Some((_, false)) if t.defer_loading() => Some(t),
                _ => None,
            })
            .filter(|t| !self.defined.iter().any(|d| d.name() == t.name()))
            .collect();
        out.extend(self.defined);
        out
    }
}

/// A Messages-API tool as the crate's schema: `name`, `description`, `input_schema` as the
/// parameters, `defer_loading` kept; `cache_control` left out.
fn tool(t: &Value) -> Result<ToolSchema, Invalid> {
    let name = t
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| invalid("name: Field required"))?;
    if let Some(kind) = t.get("type").and_then(Value::as_str)
        && kind != "custom"
    {
        return Err(invalid(format!(
            "tool type `{kind}` is not supported by mektpoy-proxy (custom tools only)"
        )));
    }
    let description = t.get("description").and_then(Value::as_str).unwrap_or("");
    let parameters = match t.get("input_schema") {
        Some(Value::Object(schema)) => schema.clone(),
        _ => return Err(invalid("input_schema: Field required")),
    };
    let schema = ToolSchema::new(name, description, parameters);
    Ok(match t.get("defer_loading").and_then(Value::as_bool) {
        Some(true) => schema.with_defer_loading(true),
        _ => schema,
    })
}

/// One client message into `out` (a user message may become tool messages and a user one).
fn message(
    m: &Value,
    index: usize,
    provider: &str,
    model: &str,
    out: &mut Vec<Message>,
) -> Result<(), Invalid> {
    let id = |part: usize| format!("client-{index}-{part}");
    let blocks: Vec<Value> = match m.get("content") {
        Some(Value::String(text)) => vec![json!({"type": "text", "text": text})],
        Some(Value::Array(blocks)) => blocks.iter().map(without_cache_control).collect(),
        _ => return Err(invalid("content: a string or an array is expected")),
    };
    match m.get("role").and_then(Value::as_str) {
        Some("user") => {
            let mut rest = Vec::new();
            for (j, b) in blocks.into_iter().enumerate() {
                if b.get("type").and_then(Value::as_str) == Some("tool_result") {
                    out.push(
                        tool_result(&b, id(j))
                            .map_err(|e| invalid(format!("content.{j}: {}", e.0)))?,
                    );
                } else {
                    rest.push(block(b).map_err(|e| invalid(format!("content.{j}: {}", e.0)))?);
                }
            }
            if !rest.is_empty() {
                out.push(Message::new(id(0), Role::User, rest, MessageSource::User));
            }
            Ok(())
        }
        Some("assistant") => {
            // The crate's own decoder reads an answer's blocks (thinking and its signature,
            // tool calls and their exact arguments): an echoed answer reads as the answer.
            let response = json!({
                "id": id(0), "type": "message", "role": "assistant", "model": model,
                "content": blocks, "stop_reason": null, "stop_sequence": null,
                "usage": {"input_tokens": 0, "output_tokens": 0},
            });
            let message = decode_messages(&response.to_string(), provider, Some(&id(0)))
                .map(|answer| answer.message)
                .map_err(|e| invalid(e.to_string()))?;
            out.push(message);
            Ok(())
        }
        Some(other) => Err(invalid(format!(
            "role: `{other}` is not one of `user`, `assistant`"
        ))),
        None => Err(invalid("role: Field required")),
    }
}

fn tool_result(b: &Value, id: String) -> Result<Message, Invalid> {
    let call = b
        .get("tool_use_id")
        .and_then(Value::as_str)
        .ok_or_else(|| invalid("tool_use_id: Field required"))?;
    let content = match b.get("content") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(text)) => vec![ContentBlock::text(text.as_str())],
        Some(Value::Array(blocks)) => blocks
            .iter()
            .map(|b| block(without_cache_control(b)))
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(invalid("content: a string or an array is expected")),
    };
    let message = Message::new(
        id,
        Role::Tool,
        content,
        MessageSource::Tool {
            call_id: call.to_owned(),
        },
    );
    Ok(match b.get("is_error").and_then(Value::as_bool) {
        Some(e) => message.with_is_error(e),
        None => message,
    })
}

/// A user block: text as text, anything else (images, documents) kept verbatim.
fn block(b: Value) -> Result<ContentBlock, Invalid> {
    match (b.get("type").and_then(Value::as_str), b.get("text")) {
        (Some("text"), Some(Value::String(t))) => Ok(ContentBlock::text(t.as_str())),
        (Some("text"), _) => Err(invalid("text: Field required")),
        (Some(_), _) => ContentBlock::other(b).map_err(|e| invalid(e.to_string())),
        (None, _) => Err(invalid("type: Field required")),
    }
}

fn without_cache_control(b: &Value) -> Value {
    let mut b = b.clone();
    if let Some(o) = b.as_object_mut() {
        o.remove("cache_control");
    }
    b
}

/// Keys of a chat body the crate writes itself.
const OWN_CHAT_KEYS: [&str; 3] = ["model", "tools", "messages"];

/// Reads an OpenAI-compatible chat completions body: the leading `system` / `developer`
/// messages are the system prompt; function tools become the crate's schemas.
///
/// # Errors
/// [`Invalid`] for a body of another shape, and for a `system` / `developer` message after the
/// conversation started (the crate keeps one system prompt; this release does not place a
/// client's later instructions).
pub fn read_chat(
    body: &Body<'_>,
    provider: &str,
    known: Option<&Known>,
) -> Result<ClientRequest, Invalid> {
    let (object, model, (tools, tools_key), raw) =
        head(body, known, ("chat", chat_tool), |i| format!("tools[{i}]"))?;
    let mut system = Vec::new();
    let mut messages = Vec::new();
    let mut reading = Reading::new(raw, known);
    for (i, m) in raw.iter().enumerate() {
        if reading.take(i) {
            continue;
        }
        let at = |e: Invalid| invalid(format!("messages[{i}]: {}", e.0));
        let m = &Reading::value(m).map_err(at)?;
        let id = format!("client-{i}-0");
        let role = m.get("role").and_then(Value::as_str);
        match role {
            Some("system" | "developer") if reading.so_far(&messages) == 0 => {
                system.push(chat_text(m.get("content")).map_err(at)?);
                reading.read(i, true, 0);
                continue;
            }
            Some("system" | "developer") => {
                return Err(at(invalid(
                    "a system message after the first user message is not supported by mektpoy-proxy",
                )));
            }
            Some("user") => {
                let content = chat_parts(m.get("content")).map_err(at)?;
                messages.push(Message::new(id, Role::User, content, MessageSource::User));
            }
            Some("assistant") => {
                let mut message = m.clone();
                if let Some(o) = message.as_object_mut() {
                    o.remove("cache_control");
                }
                let response = json!({
                    "id": id, "object": "chat.completion", "created": 0, "model": model,
                    "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
                });
                let read = decode_chat(&response.to_string(), provider, Some(&id))
                    .map(|answer| answer.message)
                    .map_err(|e| at(invalid(e.to_string())))?;
                messages.push(read);
            }
            Some("tool") => {
                let call = m
                    .get("tool_call_id")
                    .and_then(Value::as_str)
                    .ok_or_else(|| at(invalid("tool_call_id: a string is required")))?;
                let content = chat_parts(m.get("content")).map_err(at)?;
                messages.push(Message::new(
                    id,
                    Role::Tool,
                    content,
                    MessageSource::Tool {
                        call_id: call.to_owned(),
                    },
                ));
            }
            Some(other) => {
                return Err(at(invalid(format!(
                    "role: `{other}` is not one of system, developer, user, assistant, tool"
                ))));
            }
            None => return Err(at(invalid("role: a string is required"))),
        }
        reading.read(i, false, reading.so_far(&messages));
    }
    let params = params_of(object, &OWN_CHAT_KEYS);
    Ok(ClientRequest {
        model,
        system: system.join("\n\n"),
        tools,
        messages,
        params,
        raw: reading.entries,
        same: reading.same,
        reused: reading.reused,
        tools_key,
    })
}

/// `{"type":"function","function":{"name","description","parameters"}}`.
fn chat_tool(t: &Value) -> Result<ToolSchema, Invalid> {
    if t.get("type").and_then(Value::as_str) != Some("function") {
        return Err(invalid(
            "only `function` tools are supported by mektpoy-proxy",
        ));
    }
    let f = t
        .get("function")
        .ok_or_else(|| invalid("function: an object is required"))?;
    let (name, description, parameters) = function(f, "function.")?;
    Ok(ToolSchema::new(name, description, parameters))
}

/// A function's `name`, `description` (empty when absent) and `parameters` (empty when absent
/// or null), the fields both OpenAI APIs give a function tool; `at` prefixes the field names in
/// the refusals (`function.` where chat nests them).
fn function<'v>(f: &'v Value, at: &str) -> Result<(&'v str, &'v str, Map<String, Value>), Invalid> {
    let name = f
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| invalid(format!("{at}name: a string is required")))?;
    let description = f.get("description").and_then(Value::as_str).unwrap_or("");
    let parameters = match f.get("parameters") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(p)) => p.clone(),
        Some(_) => return Err(invalid(format!("{at}parameters: an object is required"))),
    };
    Ok((name, description, parameters))
}

/// A chat message's text, from a string or text parts.
fn chat_text(content: Option<&Value>) -> Result<String, Invalid> {
    let parts = chat_parts(content)?;
    let mut text = Vec::new();
    for p in &parts {
        match p {
            ContentBlock::Text { text: t } => text.push(t.as_str()),
            _ => return Err(invalid("content: text parts are expected")),
        }
    }
    Ok(text.join("\n\n"))
}

/// A chat message's content: a string, or parts (text as text, others kept verbatim).
fn chat_parts(content: Option<&Value>) -> Result<Vec<ContentBlock>, Invalid> {
    match content {
        Some(Value::String(t)) => Ok(vec![ContentBlock::text(t.as_str())]),
        Some(Value::Array(parts)) => parts
            .iter()
            .map(|p| block(without_cache_control(p)))
            .collect(),
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(_) => Err(invalid("content: a string or an array is expected")),
    }
}

/// Keys of a Responses body the crate writes itself.
const OWN_RESPONSES_KEYS: [&str; 4] = ["model", "tools", "input", "instructions"];

/// Keys a Responses body may not hold: the proxy keeps the conversation itself and sends
/// `store: false`, so a server-side one would be prepended to the one it sends (decision 133).
const REFUSED_RESPONSES_KEYS: [&str; 2] = ["previous_response_id", "conversation"];

/// Reads an OpenAI Responses body: `instructions` and the leading `developer` / `system`
/// messages are the system prompt; the items of one answer (reasoning, assistant messages with
/// their `phase`, function calls, the calls the log keeps verbatim) one assistant message, as
/// the decoder reads the answer; an output a tool message (its text, or the item verbatim); a
/// later `developer` / `system` message the item verbatim in a user-role message (decision
/// 142); flat function tools the crate's schemas, other tools kept whole (decision 139).
///
/// # Errors
/// [`Invalid`] for a body of another shape, for `previous_response_id` or `conversation`, an
/// `additional_tools` or `item_reference` item or another item type not listed in
/// `KEPT_CALLS`, and a part other than text, image or file.
pub fn read_responses(
    body: &Body<'_>,
    provider: &str,
    known: Option<&Known>,
) -> Result<ClientRequest, Invalid> {
    if let Some(key) = body
        .head
        .as_object()
        .and_then(|o| REFUSED_RESPONSES_KEYS.iter().find(|k| o.contains_key(**k)))
    {
        return Err(invalid(format!(
            "{key}: mektpoy-proxy keeps the conversation itself (it sends `store: false`); send the whole input instead"
        )));
    }
    if body.messages.is_none() {
        return Err(invalid("input: a string or an array of items is required"));
    }
    let (object, model, (tools, tools_key), raw) =
        head(body, known, ("responses", responses_tool), |i| {
            format!("tools[{i}]")
        })?;
    let mut system = Vec::new();
    match object.get("instructions") {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) => system.push(s.clone()),
        Some(_) => return Err(invalid("instructions: a string is expected")),
    }
    let mut messages = Vec::new();
    let mut reading = Reading::new(raw, known);
    // The items of the answer being read: raw index and value.
    let mut answer: Vec<(usize, Value)> = Vec::new();
    let flush = |answer: &mut Vec<(usize, Value)>,
                 messages: &mut Vec<Message>,
                 reading: &mut Reading<'_, '_>|
     -> Result<(), Invalid> {
        let Some(&(first, _)) = answer.first() else {
            return Ok(());
        };
        let id = format!("client-{first}-0");
        let items: Vec<Value> = answer.iter().map(|(_, v)| v.clone()).collect();
        let response = json!({
            "id": id, "object": "response", "model": model, "status": "completed",
            "output": items,
            "usage": {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0},
        });
        let read = decode_responses(&response.to_string(), provider, Some(&id))
            .map_err(|e| invalid(format!("input[{first}]: {e}")))?;
        messages.push(read.message);
        let end = reading.so_far(messages);
        reading.read_group(answer.drain(..).map(|(i, _)| i), end);
        Ok(())
    };
    for (i, m) in raw.iter().enumerate() {
        if reading.take(i) {
            continue;
        }
        let at = |e: Invalid| invalid(format!("input[{i}]: {}", e.0));
        let item = if raw_is_string(m) {
            json!({"type": "message", "role": "user", "content": Reading::value(m).map_err(at)?})
        } else {
            Reading::value(m).map_err(at)?
        };
        let kind = match item.get("type") {
            None if item.get("role").is_some() => "message",
            Some(Value::String(t)) => t.as_str(),
            _ => return Err(at(invalid("type: a string is required"))),
        };
        let role = item.get("role").and_then(Value::as_str);
        match (kind, role) {
            ("message", Some("assistant")) => {
                let content = match item.get("content") {
                    Some(Value::String(t)) => json!([{"type": "output_text", "text": t}]),
                    Some(Value::Array(parts)) => Value::Array(
                        parts
                            .iter()
                            .map(|p| match p.get("type").and_then(Value::as_str) {
                                Some("input_text") => {
                                    json!({"type": "output_text", "text": p.get("text")})
                                }
                                _ => p.clone(),
                            })
                            .collect(),
                    ),
                    _ => return Err(at(invalid("content: a string or an array is expected"))),
                };
                let mut message =
                    json!({"type": "message", "role": "assistant", "content": content});
                // Sent back as it came: gpt-5.3-codex and later read it (decision 141).
                if let Some(phase) = item.get("phase").filter(|p| !p.is_null()) {
                    message["phase"] = phase.clone();
                }
                answer.push((i, message));
                continue;
            }
            ("reasoning" | "function_call", _) => {
                answer.push((i, item));
                continue;
            }
            // The model's items the log keeps verbatim (decisions 128 and 140).
            (kind, _) if KEPT_CALLS.contains(&kind) => {
                answer.push((i, item));
                continue;
            }
            _ => {}
        }
        flush(&mut answer, &mut messages, &mut reading)?;
        let id = format!("client-{i}-0");
        match (kind, role) {
            ("message", Some("system" | "developer")) if reading.so_far(&messages) == 0 => {
                system.push(responses_text(item.get("content")).map_err(at)?);
                reading.read(i, true, 0);
                continue;
            }
            // Kept in its place, verbatim, carried by a user-role message: the API takes
            // them anywhere in `input`, and the log's developer role is the crate's channel of
            // tool changes, which projections drop or rewrite (decision 142).
            ("message", Some("system" | "developer")) => {
                if !matches!(
                    item.get("content"),
                    Some(Value::String(_) | Value::Array(_))
                ) {
                    return Err(at(invalid(
                        "content: a string or an array of parts is expected",
                    )));
                }
                let mut kept = item;
                if let Some(o) = kept.as_object_mut() {
                    o.remove("id");
                }
                let block = ContentBlock::other(kept).map_err(|e| at(invalid(e.to_string())))?;
                messages.push(Message::new(
                    id,
                    Role::User,
                    vec![block],
                    MessageSource::User,
                ));
            }
            ("message", Some("user")) => {
                let content = user_blocks(item.get("content")).map_err(at)?;
                messages.push(Message::new(id, Role::User, content, MessageSource::User));
            }
            ("message", Some(other)) => {
                return Err(at(invalid(format!(
                    "role: `{other}` is not one of user, assistant, system, developer"
                ))));
            }
            ("message", None) => return Err(at(invalid("role: a string is required"))),
            ("function_call_output" | "custom_tool_call_output" | "local_shell_call_output", _) => {
                // A local shell call's output names its call by `id` (the call's `call_id`).
                let key = if kind == "local_shell_call_output" {
                    "id"
                } else {
                    "call_id"
                };
                let call = item
                    .get(key)
                    .and_then(Value::as_str)
                    .ok_or_else(|| at(invalid(format!("{key}: a string is required"))))?
                    .to_owned();
                // Text when the wire writes it back the same; else the item verbatim
                // (decision 140).
                let text = match (kind, item.get("output")) {
                    ("local_shell_call_output", _) => None,
                    ("custom_tool_call_output", Some(Value::String(t))) => Some(t.clone()),
                    ("custom_tool_call_output", _) => None,
                    (_, output) => match responses_text(output) {
                        Ok(text) => Some(text),
                        Err(_) if kept_output(output) => None,
                        Err(e) => return Err(at(invalid(format!("output: {}", e.0)))),
                    },
                };
                let content = match text {
                    Some(text) => ContentBlock::text(text),
                    None => ContentBlock::other(item).map_err(|e| at(invalid(e.to_string())))?,
                };
                messages.push(Message::new(
                    id,
                    Role::Tool,
                    vec![content],
                    MessageSource::Tool { call_id: call },
                ));
            }
            (other, _) => {
                return Err(at(invalid(format!(
                    "an item of type `{other}` is not supported by mektpoy-proxy (message, reasoning, function_call and its output, custom_tool_call and its output, local_shell_call and its output, web_search_call, file_search_call, image_generation_call, code_interpreter_call)"
                ))));
            }
        }
        reading.read(i, false, reading.so_far(&messages));
    }
    flush(&mut answer, &mut messages, &mut reading)?;
    let params = params_of(object, &OWN_RESPONSES_KEYS);
    Ok(ClientRequest {
        model,
        system: system.join("\n\n"),
        tools,
        messages,
        params,
        raw: reading.entries,
        same: reading.same,
        reused: reading.reused,
        tools_key,
    })
}

/// The model's output items the log keeps verbatim and the Responses wire sends back (decision
/// 140): the calls of tools that are not functions, and the built-in tools' calls.
const KEPT_CALLS: [&str; 6] = [
    "custom_tool_call",
    "local_shell_call",
    "web_search_call",
    "file_search_call",
    "image_generation_call",
    "code_interpreter_call",
];

/// Message parts the crate cannot type but the Responses wire writes back verbatim.
const KEPT_PARTS: [&str; 2] = ["input_image", "input_file"];

/// Whether a function's `output` is an array of text and kept parts, one at least kept: then
/// the item goes back verbatim rather than be refused.
fn kept_output(output: Option<&Value>) -> bool {
    let Some(Value::Array(parts)) = output else {
        return false;
    };
    let kind = |p: &Value| p.get("type").and_then(Value::as_str).map(str::to_owned);
    parts
        .iter()
        .any(|p| kind(p).is_some_and(|k| KEPT_PARTS.contains(&k.as_str())))
        && parts
            .iter()
            .all(|p| kind(p).is_some_and(|k| k == "input_text" || KEPT_PARTS.contains(&k.as_str())))
}

/// A user message's blocks: its text as one block, as [`responses_text`] joins it; or, when
/// it holds an image or a file, a text block per text part and each such part verbatim, in
/// order (decision 140).
fn user_blocks(content: Option<&Value>) -> Result<Vec<ContentBlock>, Invalid> {
    let Some(Value::Array(parts)) = content else {
        return Ok(vec![ContentBlock::text(responses_text(content)?)]);
    };
    let kept = |p: &Value| {
        p.get("type")
            .and_then(Value::as_str)
            .is_some_and(|k| KEPT_PARTS.contains(&k))
    };
    if !parts.iter().any(kept) {
        return Ok(vec![ContentBlock::text(responses_text(content)?)]);
    }
    parts
        .iter()
        .enumerate()
        .map(|(j, p)| {
            if kept(p) {
                ContentBlock::other(p.clone()).map_err(|e| invalid(format!("content[{j}]: {e}")))
            } else {
                responses_text(Some(&Value::Array(vec![p.clone()]))).map(ContentBlock::text)
            }
        })
        .collect()
}

fn raw_is_string(raw: &RawValue) -> bool {
    raw.get().starts_with('"')
}

/// A Responses message's text (or a function output's): a string, or `input_text` /
/// `output_text` parts joined. Other parts (images, files) are refused: the crate's
/// Responses wire writes text parts only.
fn responses_text(content: Option<&Value>) -> Result<String, Invalid> {
    match content {
        Some(Value::String(t)) => Ok(t.clone()),
        Some(Value::Array(parts)) => {
            let mut texts = Vec::with_capacity(parts.len());
            for (j, p) in parts.iter().enumerate() {
                match (p.get("type").and_then(Value::as_str), p.get("text")) {
                    (Some("input_text" | "output_text"), Some(Value::String(t))) => {
                        texts.push(t.as_str());
                    }
                    (Some(kind @ ("input_text" | "output_text")), _) => {
                        return Err(invalid(format!(
                            "content[{j}]: {kind} without a string `text`"
                        )));
                    }
                    (kind, _) => {
                        return Err(invalid(format!(
                            "content[{j}]: a part of type `{}` is not supported by mektpoy-proxy (text parts only)",
                            kind.unwrap_or("(none)")
                        )));
                    }
                }
            }
            Ok(texts.join("\n\n"))
        }
        _ => Err(invalid(
            "content: a string or an array of parts is expected",
        )),
    }
}

/// `{"type":"function","name","description","parameters","strict"}`: `strict` kept in the
/// schema's extra, which the Responses wire reads. A tool of another type (Codex's `custom`
/// grammar tools, `local_shell`, `web_search`, ...) is kept whole and sent as it came
/// (decision 139).
fn responses_tool(t: &Value) -> Result<ToolSchema, Invalid> {
    match (t.get("type").and_then(Value::as_str), t) {
        (Some("function"), _) => {}
        (Some(_), Value::Object(definition)) => {
            return ToolSchema::from_responses_tool(definition.clone())
                .map_err(|e| invalid(e.to_string()));
        }
        _ => return Err(invalid("type: a string is required")),
    }
    let (name, description, parameters) = function(t, "")?;
    let mut log = json!({"name": name, "description": description, "parameters": parameters});
    if let Some(strict @ Value::Bool(_)) = t.get("strict") {
        log["strict"] = strict.clone();
    }
    ToolSchema::from_value(log).map_err(|e| invalid(e.to_string()))
}

/// The body's object, its `model`, its `tools` read by `tool` (each error named by `at`) with
/// the key they may be taken by next time, its `messages`: the part of a body both APIs share.
type Head<'v> = (
    &'v Map<String, Value>,
    String,
    (Vec<ToolSchema>, Option<(RawKey, &'static str)>),
    &'v [&'v RawValue],
);

/// Reads the part of `body` every API shares. `tools` is read by `reader`'s `tool`, unless its
/// bytes are those of the previous request's tools, read by the same reader (`known`): then
/// they read as they did, and the previous reading is taken (decision 158).
fn head<'v>(
    body: &'v Body<'_>,
    known: Option<&Known>,
    (reader, tool): (&'static str, impl Fn(&Value) -> Result<ToolSchema, Invalid>),
    at: impl Fn(usize) -> String,
) -> Result<Head<'v>, Invalid> {
    let object = body
        .head
        .as_object()
        .ok_or_else(|| invalid("the body is not a JSON object"))?;
    let model = object
        .get("model")
        .and_then(Value::as_str)
        .filter(|m| !m.is_empty())
        .ok_or_else(|| invalid("model: a non-empty string is required"))?
        .to_owned();
    let tools = match body.tools {
        None => (Vec::new(), None),
        Some(raw) => {
            let key = RawKey::of(raw);
            match known.and_then(|k| k.tools.as_ref()) {
                Some(k) if k.key == key && k.reader == reader => {
                    (k.tools.clone(), Some((key, reader)))
                }
                _ => (read_tools(raw, tool, at)?, Some((key, reader))),
            }
        }
    };
    let messages = body
        .messages
        .as_deref()
        .ok_or_else(|| invalid("messages: an array is required"))?;
    Ok((object, model, tools, messages))
}

/// A `tools` value, each tool read by `tool`: `null` is none.
fn read_tools(
    raw: &RawValue,
    tool: impl Fn(&Value) -> Result<ToolSchema, Invalid>,
    at: impl Fn(usize) -> String,
) -> Result<Vec<ToolSchema>, Invalid> {
    match serde_json::from_str(raw.get()).map_err(|e| invalid(e.to_string()))? {
        Value::Null => Ok(Vec::new()),
        Value::Array(tools) => tools
            .iter()
            .enumerate()
            .map(|(i, t)| tool(t).map_err(|e| invalid(format!("{}: {}", at(i), e.0))))
            .collect(),
        _ => Err(invalid("tools: an array is expected")),
    }
}

/// Every key but `own`, as the route's configuration.
fn params_of(object: &Map<String, Value>, own: &[&str]) -> Map<String, Value> {
    object
        .iter()
        .filter(|(k, _)| !own.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Whether a client's message is one the log holds, as clients send echoed turns back:
/// thinking dropped or kept, whitespace trimmed, tool-call arguments re-spelled as JSON.
pub fn same_message(client: &Message, logged: &Message) -> bool {
    if client.ptr_eq(logged) {
        return true;
    }
    if client.role() != logged.role() {
        return false;
    }
    if let (MessageSource::Tool { call_id: a }, MessageSource::Tool { call_id: b }) =
        (client.source(), logged.source())
        && a != b
    {
        return false;
    }
    let mut a = comparable(client.content());
    let mut b = comparable(logged.content());
    loop {
        match (a.next(), b.next()) {
            (None, None) => return true,
            (Some(x), Some(y)) if same_block(x, y) => {}
            _ => return false,
        }
    }
}

/// The blocks a client keeps stable: thinking (which clients drop or keep at will) left out.
fn comparable(blocks: &[ContentBlock]) -> impl Iterator<Item = &ContentBlock> {
    blocks.iter().filter(|b| match b {
        ContentBlock::Reasoning { .. } => false,
        ContentBlock::Other(o) => o.type_name() != "redacted_thinking",
        _ => true,
    })
}

/// Text trimmed; tool-call arguments as JSON values when their spelling differs.
fn same_block(a: &ContentBlock, b: &ContentBlock) -> bool {
    match (a, b) {
        (ContentBlock::Text { text: x }, ContentBlock::Text { text: y }) => x.trim() == y.trim(),
        (ContentBlock::ToolCall(a), ContentBlock::ToolCall(b)) => {
            let (x, y) = (a.arguments(), b.arguments());
            a.id() == b.id()
                && a.name() == b.name()
                && (x == y
                    || matches!(
                        (serde_json::from_str::<Value>(x), serde_json::from_str::<Value>(y)),
                        (Ok(p), Ok(q)) if p == q
                    ))
        }
        // A kept item the client sends without the `id` the answer gave it (decision 140).
        (ContentBlock::Other(x), ContentBlock::Other(y)) => {
            let fields = |o: &mektpoy::vocab::OtherBlock| {
                o.fields()
                    .iter()
                    .filter(|(k, _)| k.as_str() != "id")
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect::<Map<String, Value>>()
            };
            x == y || (x.type_name() == y.type_name() && fields(x) == fields(y))
        }
        (x, y) => x == y,
    }
}

/// What a client request does to the log's conversation.
#[derive(Debug, PartialEq, Eq)]
pub enum Plan {
    /// The log holds every client message: the same request again.
    Retry,
    /// The client's messages from `new` on extend the log.
    Extend {
        /// The first client message the log does not hold.
        new: usize,
    },
    /// The client's history differs from the log's at `client` (a compaction, an edit, a
    /// rewind): the log's surface is replaced from node `node` on by the client's messages
    /// from `client` on.
    Replace {
        /// The first client message to log.
        client: usize,
        /// The first surface node to replace.
        node: usize,
    },
}

/// Compares the client's messages with the log's visible messages (`nodes`: each user,
/// assistant or tool message of the surface with its node index, as the conversation keeps
/// them; the crate's own tool-change and system-prompt nodes are not among them, as clients
/// never see them). The client's messages are the first `reused` visible ones (the previous
/// request sent them byte for byte, and the log has not changed before them since: they are
/// not compared again, nor listed, decision 157), then `new`; the plan's indices count both.
pub fn plan(new: &[Message], reused: usize, nodes: &[(usize, Message)]) -> Plan {
    let reused = reused.min(nodes.len());
    let client_len = reused + new.len();
    let matched = reused
        + new
            .iter()
            .zip(&nodes[reused..])
            .take_while(|(c, (_, l))| same_message(c, l))
            .count();
    match (matched == nodes.len(), matched == client_len) {
        (true, true) => Plan::Retry,
        (true, false) => Plan::Extend { new: matched },
        // The client dropped what the log holds after its last message (a rewind, or a retry
        // of a request whose answer it never saw): its last message is logged again in place.
        (false, true) => match matched.checked_sub(1) {
            Some(last) => Plan::Replace {
                client: last,
                node: nodes[last].0,
            },
            None => Plan::Replace {
                client: 0,
                node: nodes[0].0,
            },
        },
        (false, false) => Plan::Replace {
            client: matched,
            node: nodes[matched].0,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `read` on a body given as a value, nothing known of an earlier request.
    fn read_v(body: &Value) -> Result<ClientRequest, Invalid> {
        let text = body.to_string();
        read(
            &crate::client_body::parse(&text).unwrap(),
            "anthropic",
            None,
        )
    }

    fn body(messages: Value) -> Value {
        json!({"model": "claude-opus-5", "max_tokens": 10, "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
            "tools": [{"name": "read", "description": "Read", "input_schema": {"type": "object"}, "cache_control": {"type": "ephemeral"}}],
            "messages": messages})
    }

    #[test]
    fn a_body_reads_as_the_crates_vocabulary() {
        let b = body(json!([
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [{"type": "thinking", "thinking": "t", "signature": "s"}, {"type": "text", "text": "ok"}, {"type": "tool_use", "id": "c1", "name": "read", "input": {"p": 1}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "done"}, {"type": "text", "text": "next", "cache_control": {"type": "ephemeral"}}]},
        ]));
        let r = read_v(&b).unwrap();
        assert_eq!(r.model, "claude-opus-5");
        assert_eq!(r.system, "Be brief.");
        assert_eq!(r.tools.len(), 1);
        assert!(r.tools[0].extra().is_empty(), "cache_control left out");
        let roles: Vec<_> = r.messages.iter().map(Message::role).collect();
        assert_eq!(roles, [Role::User, Role::Assistant, Role::Tool, Role::User]);
        assert_eq!(r.params.keys().collect::<Vec<_>>(), ["max_tokens"]);
    }

    #[test]
    fn bodies_of_another_shape_are_invalid() {
        for bad in [
            json!([]),
            json!({"messages": []}),
            json!({"model": "m", "messages": {}}),
            json!({"model": "m", "messages": [{"role": "robot", "content": "x"}]}),
            json!({"model": "m", "messages": [{"role": "user", "content": 3}]}),
            json!({"model": "m", "messages": [{"role": "user", "content": [{"text": "x"}]}]}),
            json!({"model": "m", "messages": [], "tools": [{"name": "t"}]}),
            json!({"model": "m", "messages": [], "tools": [{"type": "web_search_20250305", "name": "w"}]}),
        ] {
            assert!(read_v(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn echoed_answers_match_without_thinking_and_re_spelled() {
        let logged = read_v(&body(json!([{"role": "assistant", "content": [{"type": "thinking", "thinking": "t", "signature": "s"}, {"type": "text", "text": "ok"}, {"type": "tool_use", "id": "c1", "name": "read", "input": {"a": 1, "b": 2}}]}])))
        .unwrap()
        .messages;
        let echoed = read_v(&body(json!([{"role": "assistant", "content": [{"type": "text", "text": "ok\n"}, {"type": "tool_use", "id": "c1", "name": "read", "input": {"b": 2, "a": 1}}]}])))
        .unwrap()
        .messages;
        assert!(same_message(&echoed[0], &logged[0]));
        let edited = read_v(&body(
            json!([{"role": "assistant", "content": [{"type": "text", "text": "OK"}]}]),
        ))
        .unwrap()
        .messages;
        assert!(!same_message(&edited[0], &logged[0]));
    }

    #[test]
    fn a_clients_own_tool_changes_become_the_effective_tools_and_are_not_sent_twice() {
        let mut b = body(json!([
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "ok"},
            {"role": "system", "content": [
                {"type": "tool_addition", "tool": {"type": "tool_reference", "name": "search"}},
                {"type": "tool_removal", "tool": {"type": "tool_reference", "name": "read"}},
                {"type": "tool_addition", "tool": {"type": "tool_definition", "definition": {"name": "lint", "description": "Lint", "input_schema": {"type": "object"}, "cache_control": {"type": "ephemeral"}}}},
            ]},
            {"role": "user", "content": "go on"},
        ]));
        b["tools"] = json!([
            {"name": "read", "description": "Read", "input_schema": {"type": "object"}},
            {"name": "search", "description": "Search", "input_schema": {"type": "object"}, "defer_loading": true},
            {"name": "later", "description": "Later", "input_schema": {"type": "object"}, "defer_loading": true},
        ]);
        let r = read_v(&b).unwrap();
        let tools: Vec<(&str, bool)> = r
            .tools
            .iter()
            .map(|t| (t.name(), t.defer_loading()))
            .collect();
        assert_eq!(tools, [("search", false), ("later", true), ("lint", false)]);
        assert!(
            r.tools[2].extra().is_empty(),
            "the client's breakpoint left out"
        );
        let roles: Vec<_> = r.messages.iter().map(Message::role).collect();
        assert_eq!(
            roles,
            [Role::User, Role::Assistant, Role::User],
            "no change message doubled"
        );

        b["messages"][2]["content"] = json!([{"type": "text", "text": "be brief"}]);
        assert!(read_v(&b).is_err());
        b["messages"][2]["content"] = json!([{"type": "tool_addition", "tool": {"type": "tool_reference", "name": "nowhere"}}]);
        assert!(read_v(&b).is_err());
    }

    #[test]
    fn messages_the_last_request_sent_are_taken_from_the_log_and_the_rest_read() {
        let history = |text: &str, more: bool| {
            let mut m = vec![
                json!({"role": "user", "content": "hi"}),
                json!({"role": "assistant", "content": [{"type": "thinking", "thinking": "t", "signature": "s"}, {"type": "text", "text": text}]}),
                json!({"role": "system", "content": [{"type": "tool_removal", "tool": {"type": "tool_reference", "name": "read"}}]}),
                json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "r"}, {"type": "text", "text": "next"}]}),
            ];
            if more {
                m.push(json!({"role": "assistant", "content": "fine"}));
                m.push(json!({"role": "user", "content": "go"}));
            }
            body(Value::Array(m)).to_string()
        };
        let first_text = history("ok", false);
        let first = read(
            &crate::client_body::parse(&first_text).unwrap(),
            "anthropic",
            None,
        )
        .unwrap();
        assert_eq!(first.reused, 0);
        // What a prepared request leaves: the log's visible messages, one for each.
        let logged: Vec<(usize, Message)> = first.messages.iter().cloned().enumerate().collect();
        let known = Known {
            raw: first.raw.clone(),
            nodes: logged.clone(),
            surface_len: logged.len(),
            tools: None,
        };
        let again_text = history("ok", true);
        let again = read(
            &crate::client_body::parse(&again_text).unwrap(),
            "anthropic",
            Some(&known),
        )
        .unwrap();
        assert_eq!(
            again.reused, 4,
            "user, answer, tool result, user: the log's"
        );
        assert_eq!(again.same, 4, "the raw messages before the answer");
        assert_eq!(again.raw.len(), 2, "entries for the new raw messages only");
        assert!(again.tools.is_empty(), "the system message is read again");
        assert_eq!(
            (again.len(), again.messages.len()),
            (6, 2),
            "the new ones listed"
        );
        assert_eq!(again.messages[1].text(), "go");
        assert_eq!(
            plan(&again.messages, again.reused, &logged),
            Plan::Extend { new: 4 }
        );

        let edited_text = history("edited", true);
        let edited = read(
            &crate::client_body::parse(&edited_text).unwrap(),
            "anthropic",
            Some(&known),
        )
        .unwrap();
        assert_eq!(edited.reused, 1, "read from the first message that differs");
        assert_eq!(edited.messages[0].text(), "edited");
        assert_eq!(
            plan(&edited.messages, edited.reused, &logged),
            Plan::Replace { client: 1, node: 1 }
        );
        // The same history again: nothing reused past the last message, which is always read.
        let same = read(
            &crate::client_body::parse(&first_text).unwrap(),
            "anthropic",
            Some(&known),
        )
        .unwrap();
        assert_eq!(same.reused, 2);
        assert!(!same.messages[1].ptr_eq(&logged[3].1));
        assert_eq!(plan(&same.messages, same.reused, &logged), Plan::Retry);
    }

    /// A request whose `tools` are the previous request's bytes, read by the same reader,
    /// takes the previous reading (the same definitions, not decoded again); other bytes,
    /// another reader or a tool change in history read them again (decision 158).
    #[test]
    fn tools_of_the_same_bytes_are_taken_not_read_again() {
        let text = body(json!([{"role": "user", "content": "hi"}])).to_string();
        let parsed = crate::client_body::parse(&text).unwrap();
        let first = read(&parsed, "anthropic", None).unwrap();
        let (key, reader) = first.tools_key.expect("tools read as they are");
        let known = |reader: &'static str| Known {
            tools: Some(crate::client_body::KnownTools {
                key,
                reader,
                tools: first.tools.clone(),
            }),
            ..Known::default()
        };
        let again = read(&parsed, "anthropic", Some(&known(reader))).unwrap();
        assert!(
            again.tools[0].shares_definition_with(&first.tools[0]),
            "taken"
        );
        let other = read(&parsed, "anthropic", Some(&known("chat"))).unwrap();
        assert!(
            !other.tools[0].shares_definition_with(&first.tools[0]),
            "another reader"
        );
        let mut respaced = body(json!([{"role": "user", "content": "hi"}]));
        respaced["tools"][0]["description"] = json!("Read ");
        let respaced = respaced.to_string();
        let changed = read(
            &crate::client_body::parse(&respaced).unwrap(),
            "anthropic",
            Some(&known(reader)),
        )
        .unwrap();
        assert_eq!(
            changed.tools[0].description(),
            "Read ",
            "other bytes, read again"
        );
        // A tool change in history: the tools in force are not what the bytes read as.
        let removal = body(json!([
            {"role": "system", "content": [{"type": "tool_removal", "tool": {"type": "tool_reference", "name": "read"}}]},
            {"role": "user", "content": "hi"},
        ]))
        .to_string();
        let r = read(
            &crate::client_body::parse(&removal).unwrap(),
            "anthropic",
            None,
        )
        .unwrap();
        assert!(r.tools.is_empty());
        assert_eq!(r.tools_key, None);
        // A `tools` that is not an array is refused, whatever is known.
        let bad = json!({"model": "m", "tools": {"a": 1}, "messages": []}).to_string();
        let err = read(&crate::client_body::parse(&bad).unwrap(), "anthropic", None).unwrap_err();
        assert_eq!(err.0, "tools: an array is expected");
    }

    /// `read_responses` on a body given as text.
    fn read_r(text: &str, known: Option<&Known>) -> Result<ClientRequest, Invalid> {
        read_responses(
            &crate::client_body::parse_input(text).unwrap(),
            "openai",
            known,
        )
    }

    fn responses_body(input: &Value) -> String {
        json!({"model": "gpt-5.4", "instructions": "Be brief.", "store": false,
            "tools": [{"type": "function", "name": "read", "description": "Read",
                "parameters": {"type": "object"}, "strict": true}],
            "input": input})
        .to_string()
    }

    fn answer_items(n: usize) -> Vec<Value> {
        vec![
            json!({"type": "reasoning", "id": format!("rs_{n}"), "summary": [], "encrypted_content": "e"}),
            json!({"type": "message", "id": format!("msg_{n}"), "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": "ok", "annotations": []}]}),
            json!({"type": "function_call", "id": format!("fc_{n}"), "call_id": format!("call_{n}"),
                "name": "read", "arguments": "{}"}),
        ]
    }

    #[test]
    fn a_responses_body_reads_one_answer_per_run_of_answer_items() {
        let mut input = vec![
            json!({"role": "developer", "content": "Use tools."}),
            json!({"role": "user", "content": [{"type": "input_text", "text": "hi"}]}),
        ];
        input.extend(answer_items(1));
        input.push(json!({"type": "function_call_output", "call_id": "call_1", "output": "done"}));
        let r = read_r(&responses_body(&Value::Array(input)), None).unwrap();
        assert_eq!(r.system, "Be brief.\n\nUse tools.");
        let roles: Vec<_> = r.messages.iter().map(Message::role).collect();
        assert_eq!(roles, [Role::User, Role::Assistant, Role::Tool]);
        assert_eq!(r.messages[1].content().len(), 3, "reasoning, text, call");
        assert_eq!(r.tools[0].extra()["strict"], true);
        assert_eq!(r.params.keys().collect::<Vec<_>>(), ["store"]);
        let string = read_r(r#"{"model":"gpt-5.4","input":"hi"}"#, None).unwrap();
        assert_eq!(string.messages[0].text(), "hi");
    }

    /// Codex's body: its tools that are not functions kept whole, its custom and local shell
    /// calls and their outputs, a web search, a phase, a developer message mid-way and an
    /// image read into the log's vocabulary, and written back by the Responses wire as they
    /// came (decisions 139 to 142).
    #[test]
    fn a_codex_body_is_read_without_loss_and_written_back() {
        let patch = "*** Begin Patch\n+\t\"é\" \\ 😀\n*** End Patch\n";
        let grammar = json!({"type": "custom", "name": "apply_patch", "description": "Edit files.",
            "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"}});
        let body = json!({"model": "gpt-5.3-codex", "instructions": "You are Codex.", "store": false,
        "tools": [{"type": "function", "name": "shell", "description": "Run", "parameters": {"type": "object"}, "strict": false},
            grammar, {"type": "local_shell"}, {"type": "web_search"}],
        "input": [
            {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "sandbox"}]},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "fix"},
                {"type": "input_image", "image_url": "data:image/png;base64,AA=="}]},
            {"type": "message", "role": "assistant", "phase": "commentary",
                "content": [{"type": "output_text", "text": "Patching."}]},
            {"type": "custom_tool_call", "status": "completed", "call_id": "c1", "name": "apply_patch", "input": patch},
            {"type": "custom_tool_call_output", "call_id": "c1", "output": "Done."},
            {"type": "local_shell_call", "status": "completed", "call_id": "c2",
                "action": {"type": "exec", "command": ["ls"]}},
            {"type": "function_call_output", "call_id": "c2", "output": "a.txt"},
            {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "approval: never"}]},
            {"type": "web_search_call", "status": "completed", "action": {"type": "search", "query": "q"}},
            {"type": "message", "role": "assistant", "phase": "final_answer",
                "content": [{"type": "output_text", "text": "Fixed."}]},
            {"type": "custom_tool_call", "call_id": "c3", "name": "apply_patch", "input": "x"},
            {"type": "custom_tool_call_output", "call_id": "c3",
                "output": [{"type": "input_text", "text": "see"}, {"type": "input_image", "image_url": "data:image/png;base64,AA=="}]},
            {"type": "local_shell_call", "call_id": "c4", "status": "completed",
                "action": {"type": "exec", "command": ["pwd"]}},
            {"type": "local_shell_call_output", "id": "c4", "output": "/"},
            {"type": "message", "role": "user", "content": "thanks"},
        ]});
        let r = read_r(&body.to_string(), None).unwrap();
        assert_eq!(r.system, "You are Codex.\n\nsandbox");
        let names: Vec<_> = r.tools.iter().map(ToolSchema::name).collect();
        assert_eq!(names, ["shell", "apply_patch", "local_shell", "web_search"]);
        assert_eq!(
            r.tools[1].responses_tool().unwrap()["format"]["syntax"],
            "lark"
        );
        let roles: Vec<_> = r.messages.iter().map(Message::role).collect();
        use Role::{Assistant as A, Tool as T, User as U};
        assert_eq!(roles, [U, A, T, A, T, U, A, T, A, T, U]);

        // Written back on the Responses route: every request the crate sends from this log.
        let route = mektpoy::route_for("openai", "gpt-5.3-codex");
        let config = mektpoy::Config::new("openai", "gpt-5.3-codex");
        let projected = mektpoy::project::ProjectedToolUpdates::new(r.messages.as_slice())
            .with_tools(r.tools.as_slice());
        let wire = mektpoy::wire::serialize_responses(
            &config,
            &projected,
            &route,
            &mektpoy::wire::WireContext::default(),
        )
        .unwrap();
        let sent: Value = serde_json::from_str(wire.body()).unwrap();
        let tools = sent["tools"].as_array().unwrap();
        assert_eq!(
            tools[1], body["tools"][1],
            "the grammar tool as the client sent it"
        );
        assert_eq!(tools[2], json!({"type": "local_shell"}));
        let items = sent["input"].as_array().unwrap();
        let kinds: Vec<_> = items.iter().map(|i| i["type"].as_str().unwrap()).collect();
        assert_eq!(
            kinds,
            [
                "message",
                "message",
                "custom_tool_call",
                "custom_tool_call_output",
                "local_shell_call",
                "function_call_output",
                "message",
                "web_search_call",
                "message",
                "custom_tool_call",
                "custom_tool_call_output",
                "local_shell_call",
                "local_shell_call_output",
                "message"
            ]
        );
        assert_eq!(
            items[2]["input"], patch,
            "the custom call's input byte for byte"
        );
        assert!(wire.body().contains(&serde_json::to_string(patch).unwrap()));
        assert_eq!(
            items[0]["content"][1], body["input"][1]["content"][1],
            "the image"
        );
        assert_eq!(items[1]["phase"], "commentary");
        assert_eq!(items[8]["phase"], "final_answer");
        assert_eq!(
            items[3],
            json!({"type": "custom_tool_call_output", "call_id": "c1", "output": "Done."})
        );
        assert_eq!(
            items[6], body["input"][7],
            "the developer message, in its place"
        );
        assert_eq!(
            items[10], body["input"][11],
            "an output with an image, verbatim"
        );
        assert_eq!(items[12], body["input"][13]);
        // The same body read again against what it logged compares equal, ids aside.
        let mut echoed = body.clone();
        echoed["input"][3]["id"] = json!("ctc_1");
        let again = read_r(&echoed.to_string(), None).unwrap();
        assert!(same_message(&again.messages[1], &r.messages[1]));
    }

    #[test]
    fn a_responses_reuse_stops_before_an_answer_not_yet_whole() {
        let mut first = vec![json!({"role": "user", "content": "hi"})];
        first.extend(answer_items(1));
        first.push(json!({"type": "function_call_output", "call_id": "call_1", "output": "done"}));
        let first_text = responses_body(&Value::Array(first.clone()));
        let read = read_r(&first_text, None).unwrap();
        let logged: Vec<(usize, Message)> = read.messages.iter().cloned().enumerate().collect();
        let known = Known {
            raw: read.raw.clone(),
            nodes: logged.clone(),
            surface_len: logged.len(),
            tools: None,
        };
        let mut more = first.clone();
        more.push(json!({"role": "user", "content": "next"}));
        let again = read_r(&responses_body(&Value::Array(more)), Some(&known)).unwrap();
        assert_eq!(again.reused, 3, "user, answer, output: the log's");
        assert_eq!(again.messages.len(), 1, "only the new message listed");
        assert_eq!(
            plan(&again.messages, again.reused, &logged),
            Plan::Extend { new: 3 }
        );
        // A request that ends inside an answer: the next one reads that answer again whole.
        let cut = &first[..3];
        let cut_read = read_r(&responses_body(&Value::Array(cut.to_vec())), None).unwrap();
        let nodes: Vec<(usize, Message)> = cut_read.messages.iter().cloned().enumerate().collect();
        let cut_known = Known {
            raw: cut_read.raw.clone(),
            nodes: nodes.clone(),
            surface_len: nodes.len(),
            tools: None,
        };
        let whole = read_r(&first_text, Some(&cut_known)).unwrap();
        assert_eq!(whole.reused, 1, "the user message only");
        assert_eq!(whole.len(), 3);
        assert_eq!(whole.messages[0].content().len(), 3);
    }

    /// An input of `turns`: 0 a user message, 1 an answer with a call and its output, 2 an
    /// answer of reasoning and text, 3 text alone.
    fn items_of(turns: &[u8]) -> Vec<Value> {
        let mut items = Vec::new();
        for (n, t) in turns.iter().enumerate() {
            match t {
                0 => items.push(json!({"role": "user", "content": format!("u{n}")})),
                1 => {
                    items.extend(answer_items(n));
                    items.push(json!({"type": "function_call_output", "call_id": format!("call_{n}"), "output": "r"}));
                }
                2 => items.extend(answer_items(n).into_iter().take(2)),
                _ => items.push(json!({"role": "assistant", "content": format!("a{n}")})),
            }
        }
        items
    }

    proptest::proptest! {
        /// Reading a request with what its previous request stood for gives the messages that
        /// reading it alone gives, wherever the previous request ended (inside an answer too).
        #[test]
        fn a_responses_reuse_reads_what_a_whole_reading_reads(
            turns in proptest::collection::vec(0u8..4, 1..12),
            cut in 1usize..40,
        ) {
            let items = items_of(&turns);
            let cut = cut.min(items.len());
            let before = responses_body(&Value::Array(items[..cut].to_vec()));
            let Ok(first) = read_r(&before, None) else { return Ok(()) };
            let nodes: Vec<(usize, Message)> = first.messages.iter().cloned().enumerate().collect();
            let known = Known { raw: first.raw.clone(), nodes: nodes.clone(), surface_len: nodes.len(), tools: None };
            let text = responses_body(&Value::Array(items));
            let whole = read_r(&text, None).unwrap();
            let again = read_r(&text, Some(&known)).unwrap();
            // The messages taken from the log, then those read.
            let again_all: Vec<Message> = nodes[..again.reused].iter().map(|(_, m)| m.clone()).chain(again.messages.iter().cloned()).collect();
            proptest::prop_assert_eq!(whole.messages.len(), again_all.len());
            for (a, b) in whole.messages.iter().zip(&again_all) {
                proptest::prop_assert!(same_message(a, b), "{:?} / {:?}", a, b);
                proptest::prop_assert_eq!(a.content().len(), b.content().len());
            }
        }
    }

    #[test]
    fn the_plan_extends_retries_or_replaces() {
        let m = |spec: &str| -> Vec<Message> {
            spec.split_whitespace()
                .map(|t| match t.split_at(1) {
                    ("u", x) => Message::user(format!("u{x}"), x),
                    ("a", x) => Message::assistant(format!("a{x}"), x, "p", "m"),
                    ("d", x) => Message::developer(
                        format!("d{x}"),
                        vec![ContentBlock::addition(x).unwrap()],
                    ),
                    _ => unreachable!(),
                })
                .collect()
        };
        // The visible nodes, with their surface index (the developer node is not among them).
        let nodes = |spec: &str| -> Vec<(usize, Message)> {
            m(spec)
                .into_iter()
                .enumerate()
                .filter(|(_, m)| m.role() != Role::Developer)
                .collect()
        };
        let log = nodes("u1 a1 dx u2 a2");
        assert_eq!(plan(&m("u1 a1 u2 a2 u3"), 0, &log), Plan::Extend { new: 4 });
        assert_eq!(plan(&m("u1 a1 u2 a2"), 0, &log), Plan::Retry);
        assert_eq!(
            plan(&m("u1 a1 u2"), 0, &log),
            Plan::Replace { client: 2, node: 3 },
            "a rewind logs the client's last message again in place"
        );
        assert_eq!(
            plan(&m("u9 u3"), 0, &log),
            Plan::Replace { client: 0, node: 0 },
            "a compaction replaces from the first message that differs"
        );
        assert_eq!(plan(&m("u1"), 0, &[]), Plan::Extend { new: 0 });
        // The first `reused` client messages are the log's: only the rest is compared, and
        // the plan counts both.
        assert_eq!(plan(&m("u3"), 4, &log), Plan::Extend { new: 4 });
        assert_eq!(plan(&m(""), 4, &log), Plan::Retry);
        assert_eq!(
            plan(&m("u7"), 3, &log),
            Plan::Replace { client: 3, node: 4 },
            "the client's fourth message differs from the log's"
        );
        assert_eq!(
            plan(&m(""), 3, &log),
            Plan::Replace { client: 2, node: 3 },
            "a rewind behind what is reused"
        );
    }
}
