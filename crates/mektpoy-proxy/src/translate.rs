//! A client's Messages-API body, read as the crate's vocabulary: its tools, system prompt,
//! messages and the rest of its parameters; and which of its messages the log already holds.

use mektpoy::response::{decode_chat, decode_messages};
use mektpoy::vocab::{MessageSource, Role};
use mektpoy::{ContentBlock, Message, ToolSchema};
use serde_json::{Map, Value, json};

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
    /// `messages`, in the crate's shape: a user message's `tool_result` blocks become tool
    /// messages before the rest of it.
    pub messages: Vec<Message>,
    /// Every other top-level key (`max_tokens`, `stream`, `thinking`, `tool_choice`, ...),
    /// sent on as the route's configuration.
    pub params: Map<String, Value>,
}

/// Keys the crate writes itself; a client's top-level `cache_control` is replaced by the
/// route's own breakpoints.
const OWN_KEYS: [&str; 5] = ["model", "system", "tools", "messages", "cache_control"];

/// Reads a Messages-API request body. `provider` names the answers' source for assistant
/// messages the log does not hold yet.
///
/// # Errors
/// [`Invalid`] for a body of another shape: not an object, no string `model`, `messages` not
/// an array, a message without a known role, a block without a `type`, a tool without a
/// `name` or an object `input_schema`.
pub fn read(body: &Value, provider: &str, memo: &mut Memo) -> Result<ClientRequest, Invalid> {
    let (object, model, tools, raw) = head(body, tool, |i| format!("tools.{i}"))?;
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
    let mut changes = ClientChanges::new(&tools);
    for (i, m) in raw.iter().enumerate() {
        let at = |e: Invalid| invalid(format!("messages.{i}: {}", e.0));
        if m.get("role").and_then(Value::as_str) == Some("system") {
            changes.apply(m).map_err(at)?;
        } else {
            message(m, i, provider, &model, &mut messages, memo).map_err(at)?;
        }
    }
    let params = params_of(object, &OWN_KEYS);
    Ok(ClientRequest {
        model,
        system,
        tools: changes.effective(tools),
        messages,
        params,
    })
}

/// A client that already announces its tool changes in history (`system` messages holding
/// `tool_addition` / `tool_removal` blocks, by reference or with a definition by value):
/// its `tools` are the declarations, and what it offers now is those changes applied in
/// order. The proxy takes that as the effective tools and logs the changes its own way, so
/// they are not sent twice.
struct ClientChanges {
    /// Declared names, offered or not, in order.
    offered: Vec<(String, bool)>,
    /// Tools defined by value in history, in order.
    defined: Vec<ToolSchema>,
    seen: bool,
}

impl ClientChanges {
    fn new(tools: &[ToolSchema]) -> Self {
        ClientChanges {
            offered: tools
                .iter()
                .map(|t| (t.name().to_owned(), !t.defer_loading()))
                .collect(),
            defined: Vec::new(),
            seen: false,
        }
    }

    fn apply(&mut self, m: &Value) -> Result<(), Invalid> {
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
    memo: &mut Memo,
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
            let message = memo.get_or_read(m, || {
                let response = json!({
                    "id": id(0), "type": "message", "role": "assistant", "model": model,
                    "content": blocks, "stop_reason": null, "stop_sequence": null,
                    "usage": {"input_tokens": 0, "output_tokens": 0},
                });
                decode_messages(&response.to_string(), provider, Some(&id(0)))
                    .map(|answer| answer.message)
                    .map_err(|e| invalid(e.to_string()))
            })?;
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
pub fn read_chat(body: &Value, provider: &str, memo: &mut Memo) -> Result<ClientRequest, Invalid> {
    let (object, model, tools, raw) = head(body, chat_tool, |i| format!("tools[{i}]"))?;
    let mut system = Vec::new();
    let mut messages = Vec::new();
    for (i, m) in raw.iter().enumerate() {
        let at = |e: Invalid| invalid(format!("messages[{i}]: {}", e.0));
        let id = format!("client-{i}-0");
        let role = m.get("role").and_then(Value::as_str);
        match role {
            Some("system" | "developer") if messages.is_empty() => {
                system.push(chat_text(m.get("content")).map_err(at)?);
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
                let read = memo
                    .get_or_read(m, || {
                        let mut message = m.clone();
                        if let Some(o) = message.as_object_mut() {
                            o.remove("cache_control");
                        }
                        let response = json!({
                            "id": id, "object": "chat.completion", "created": 0, "model": model,
                            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
                        });
                        decode_chat(&response.to_string(), provider, Some(&id))
                            .map(|answer| answer.message)
                            .map_err(|e| invalid(e.to_string()))
                    })
                    .map_err(at)?;
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
    }
    let params = params_of(object, &OWN_CHAT_KEYS);
    Ok(ClientRequest {
        model,
        system: system.join("\n\n"),
        tools,
        messages,
        params,
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
    let name = f
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| invalid("function.name: a string is required"))?;
    let description = f.get("description").and_then(Value::as_str).unwrap_or("");
    let parameters = match f.get("parameters") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(p)) => p.clone(),
        Some(_) => return Err(invalid("function.parameters: an object is required")),
    };
    Ok(ToolSchema::new(name, description, parameters))
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

/// The body's object, its `model`, its `tools` read by `tool` (each error named by `at`), its
/// `messages`: the part of a body both APIs share.
type Head<'v> = (
    &'v Map<String, Value>,
    String,
    Vec<ToolSchema>,
    &'v Vec<Value>,
);

fn head<'v>(
    body: &'v Value,
    tool: impl Fn(&Value) -> Result<ToolSchema, Invalid>,
    at: impl Fn(usize) -> String,
) -> Result<Head<'v>, Invalid> {
    let object = body
        .as_object()
        .ok_or_else(|| invalid("the body is not a JSON object"))?;
    let model = object
        .get("model")
        .and_then(Value::as_str)
        .filter(|m| !m.is_empty())
        .ok_or_else(|| invalid("model: a non-empty string is required"))?
        .to_owned();
    let tools = match object.get("tools") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(tools)) => tools
            .iter()
            .enumerate()
            .map(|(i, t)| tool(t).map_err(|e| invalid(format!("{}: {}", at(i), e.0))))
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(invalid("tools: an array is expected")),
    };
    let messages = object
        .get("messages")
        .and_then(Value::as_array)
        .ok_or_else(|| invalid("messages: an array is required"))?;
    Ok((object, model, tools, messages))
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
        (
            ContentBlock::ToolCall {
                id: i,
                name: n,
                arguments: x,
            },
            ContentBlock::ToolCall {
                id: j,
                name: m,
                arguments: y,
            },
        ) => {
            i == j
                && n == m
                && (x == y
                    || matches!(
                        (serde_json::from_str::<Value>(x), serde_json::from_str::<Value>(y)),
                        (Ok(p), Ok(q)) if p == q
                    ))
        }
        (x, y) => x == y,
    }
}

/// Assistant messages already read, by a hash of their JSON: a harness re-sends every earlier
/// answer on every request, and reading one goes through the crate's decoder.
#[derive(Debug, Default)]
pub struct Memo {
    read: std::collections::HashMap<u64, Message>,
    used: std::collections::HashMap<u64, Message>,
}

impl Memo {
    /// Keeps only what the last request used: the memo holds one history, not every one.
    pub fn rotate(&mut self) {
        self.read = std::mem::take(&mut self.used);
    }

    fn get_or_read(
        &mut self,
        raw: &Value,
        read: impl FnOnce() -> Result<Message, Invalid>,
    ) -> Result<Message, Invalid> {
        use std::hash::Hasher as _;
        let mut h = std::collections::hash_map::DefaultHasher::new();
        hash_value(raw, &mut h);
        let key = h.finish();
        let message = match self.read.get(&key) {
            Some(m) => m.clone(),
            None => read()?,
        };
        self.used.insert(key, message.clone());
        Ok(message)
    }
}

fn hash_value(v: &Value, h: &mut impl std::hash::Hasher) {
    use std::hash::Hash as _;
    match v {
        Value::Null => h.write_u8(0),
        Value::Bool(b) => (1u8, *b).hash(h),
        Value::Number(n) => (2u8, n.as_u64(), n.as_i64(), n.as_f64().map(f64::to_bits)).hash(h),
        Value::String(s) => (3u8, s).hash(h),
        Value::Array(a) => {
            (4u8, a.len()).hash(h);
            for x in a {
                hash_value(x, h);
            }
        }
        Value::Object(o) => {
            (5u8, o.len()).hash(h);
            for (k, x) in o {
                k.hash(h);
                hash_value(x, h);
            }
        }
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

/// Compares the client's messages with the log's surface (`nodes`: each surface message
/// with its node index; the crate's own tool-change and system-prompt nodes are passed over,
/// as clients never see them).
pub fn plan(client: &[Message], nodes: &[(usize, Message)]) -> Plan {
    let visible: Vec<&(usize, Message)> = nodes
        .iter()
        .filter(|(_, m)| matches!(m.role(), Role::User | Role::Assistant | Role::Tool))
        .collect();
    let matched = client
        .iter()
        .zip(&visible)
        .take_while(|(c, (_, l))| same_message(c, l))
        .count();
    match (matched == visible.len(), matched == client.len()) {
        (true, true) => Plan::Retry,
        (true, false) => Plan::Extend { new: matched },
        // The client dropped what the log holds after its last message (a rewind, or a retry
        // of a request whose answer it never saw): its last message is logged again in place.
        (false, true) => match matched.checked_sub(1) {
            Some(last) => Plan::Replace {
                client: last,
                node: visible[last].0,
            },
            None => Plan::Replace {
                client: 0,
                node: visible[0].0,
            },
        },
        (false, false) => Plan::Replace {
            client: matched,
            node: visible[matched].0,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let r = read(&b, "anthropic", &mut Memo::default()).unwrap();
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
            assert!(
                read(&bad, "anthropic", &mut Memo::default()).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn echoed_answers_match_without_thinking_and_re_spelled() {
        let logged = read(
            &body(json!([{"role": "assistant", "content": [{"type": "thinking", "thinking": "t", "signature": "s"}, {"type": "text", "text": "ok"}, {"type": "tool_use", "id": "c1", "name": "read", "input": {"a": 1, "b": 2}}]}])),
            "anthropic",
            &mut Memo::default(),
        )
        .unwrap()
        .messages;
        let echoed = read(
            &body(json!([{"role": "assistant", "content": [{"type": "text", "text": "ok\n"}, {"type": "tool_use", "id": "c1", "name": "read", "input": {"b": 2, "a": 1}}]}])),
            "anthropic",
            &mut Memo::default(),
        )
        .unwrap()
        .messages;
        assert!(same_message(&echoed[0], &logged[0]));
        let edited = read(
            &body(json!([{"role": "assistant", "content": [{"type": "text", "text": "OK"}]}])),
            "anthropic",
            &mut Memo::default(),
        )
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
        let r = read(&b, "anthropic", &mut Memo::default()).unwrap();
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
        assert!(read(&b, "anthropic", &mut Memo::default()).is_err());
        b["messages"][2]["content"] = json!([{"type": "tool_addition", "tool": {"type": "tool_reference", "name": "nowhere"}}]);
        assert!(read(&b, "anthropic", &mut Memo::default()).is_err());
    }

    #[test]
    fn the_memo_serves_an_unchanged_answer_and_reads_a_changed_one() {
        let answer = |text: &str| {
            body(json!([
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": [{"type": "thinking", "thinking": "t", "signature": "s"}, {"type": "text", "text": text}]},
                {"role": "user", "content": "next"},
            ]))
        };
        let mut memo = Memo::default();
        let first = read(&answer("ok"), "anthropic", &mut memo)
            .unwrap()
            .messages;
        memo.rotate();
        let again = read(&answer("ok"), "anthropic", &mut memo)
            .unwrap()
            .messages;
        assert!(first[1].ptr_eq(&again[1]), "served from the memo");
        memo.rotate();
        let edited = read(&answer("edited"), "anthropic", &mut memo)
            .unwrap()
            .messages;
        assert_eq!(edited[1].text(), "edited");
        memo.rotate();
        assert!(memo.read.len() == 1, "the memo holds the last history only");
        let fresh = read(&answer("ok"), "anthropic", &mut memo)
            .unwrap()
            .messages;
        assert!(!first[1].ptr_eq(&fresh[1]), "read again once forgotten");
        assert!(same_message(&fresh[1], &first[1]));
    }

    #[test]
    fn the_plan_extends_retries_or_replaces() {
        let m = |spec: &str| -> Vec<Message> {
            spec.split_whitespace()
                .map(|t| match t.split_at(1) {
                    ("u", x) => Message::user(format!("u{x}"), x),
                    ("a", x) => Message::assistant(format!("a{x}"), x, "p", "m"),
                    ("d", x) => {
                        Message::developer(format!("d{x}"), vec![ContentBlock::addition(x)])
                    }
                    _ => unreachable!(),
                })
                .collect()
        };
        let nodes =
            |spec: &str| -> Vec<(usize, Message)> { m(spec).into_iter().enumerate().collect() };
        let log = nodes("u1 a1 dx u2 a2");
        assert_eq!(plan(&m("u1 a1 u2 a2 u3"), &log), Plan::Extend { new: 4 });
        assert_eq!(plan(&m("u1 a1 u2 a2"), &log), Plan::Retry);
        assert_eq!(
            plan(&m("u1 a1 u2"), &log),
            Plan::Replace { client: 2, node: 3 },
            "a rewind logs the client's last message again in place"
        );
        assert_eq!(
            plan(&m("u9 u3"), &log),
            Plan::Replace { client: 0, node: 0 },
            "a compaction replaces from the first message that differs"
        );
        assert_eq!(plan(&m("u1"), &[]), Plan::Extend { new: 0 });
    }
}
