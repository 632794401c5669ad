//! The wire shapes of the Messages API: tools, turns, content blocks, and how each serializes.

use super::*;

/// A `tools` entry: `{name, description, input_schema, <Anthropic fields>?, defer_loading?}`;
/// other unknown tool fields are not sent (the API refuses extra keys).
#[derive(Serialize)]
#[serde(untagged)]
pub(super) enum WireTool<'a> {
    /// A projected declaration.
    Declared(DeclaredTool<'a>),
    /// The reserved deferred placeholder, never logged and never named by a block.
    Placeholder(PlaceholderTool),
}

/// A projected declaration on the wire.
#[derive(Serialize)]
pub(super) struct DeclaredTool<'a> {
    pub(super) name: &'a str,
    pub(super) description: &'a str,
    pub(super) input_schema: CanonicalObject<'a>,
    /// The tool, on Anthropic's routes: its [`ANTHROPIC_TOOL_FIELDS`] are sent.
    #[serde(flatten, serialize_with = "anthropic_fields")]
    pub(super) anthropic: Option<&'a ToolSchema>,
    #[serde(skip_serializing_if = "is_false")]
    pub(super) defer_loading: bool,
}

impl<'a> DeclaredTool<'a> {
    pub(super) fn new(tool: &'a ToolSchema, anthropic: bool) -> Self {
        DeclaredTool {
            name: tool.name(),
            description: tool.description(),
            input_schema: CanonicalObject(tool.parameters()),
            anthropic: anthropic.then_some(tool),
            defer_loading: tool.defer_loading(),
        }
    }
}

pub(super) fn is_false(b: &bool) -> bool {
    !*b
}

/// Hand-written: picks the [`ANTHROPIC_TOOL_FIELDS`] a tool's `extra` holds, in that order
/// (a derive cannot select keys of a map).
pub(super) fn anthropic_fields<S: Serializer>(
    tool: &Option<&ToolSchema>,
    s: S,
) -> Result<S::Ok, S::Error> {
    let fields = tool.iter().flat_map(|t| {
        ANTHROPIC_TOOL_FIELDS
            .iter()
            .filter_map(|key| Some((*key, Canonical(t.extra().get(*key)?))))
    });
    s.collect_map(fields)
}

/// The reserved deferred placeholder's declaration.
#[derive(Serialize)]
pub(super) struct PlaceholderTool {
    pub(super) name: &'static str,
    pub(super) description: &'static str,
    pub(super) input_schema: EmptyObjectSchema,
    pub(super) defer_loading: bool,
}

pub(super) const PLACEHOLDER_TOOL: PlaceholderTool = PlaceholderTool {
    name: DEFERRED_PLACEHOLDER_NAME,
    description: "Reserved; never call.",
    input_schema: EmptyObjectSchema {
        kind: "object",
        properties: EmptyMap {},
    },
    defer_loading: true,
};

/// `{"type":"object","properties":{}}`, in that key order (the bytes are fixed).
#[derive(Serialize)]
pub(super) struct EmptyObjectSchema {
    #[serde(rename = "type")]
    pub(super) kind: &'static str,
    pub(super) properties: EmptyMap,
}

/// `{}`.
#[derive(Serialize)]
pub(super) struct EmptyMap {}

/// A by-value definition: exactly `{name, description, input_schema}` (never `defer_loading`:
/// a by-value addition offers the tool at once).
#[derive(Serialize)]
pub(super) struct Definition<'a> {
    pub(super) name: &'a str,
    pub(super) description: &'a str,
    pub(super) input_schema: CanonicalObject<'a>,
}

impl<'a> Definition<'a> {
    pub(super) fn new(tool: &'a ToolSchema) -> Self {
        Definition {
            name: tool.name(),
            description: tool.description(),
            input_schema: CanonicalObject(tool.parameters()),
        }
    }
}

/// The `tool` of a tool-change block: `{"type":"tool_reference","name":N}` or
/// `{"type":"tool_definition","definition":{...}}`.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(super) enum ToolRef<'a> {
    ToolReference { name: &'a str },
    ToolDefinition { definition: Definition<'a> },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum TurnRole {
    User,
    Assistant,
    System,
}

/// One wire message: `{"role","content":[...]}`.
pub(super) struct Turn<'a> {
    pub(super) role: TurnRole,
    pub(super) content: Vec<Block<'a>>,
    /// The message that opened the turn, to name in errors.
    pub(super) opened_by: &'a str,
    /// A block of this turn (index in `content`) that carries this `cache_control` (set
    /// only by the debug builds' check, see [`mark`]).
    #[cfg_attr(not(debug_assertions), allow(dead_code))]
    pub(super) cache_mark: Option<(usize, Value)>,
}

impl<'a> Turn<'a> {
    pub(super) fn new(role: TurnRole, content: Vec<Block<'a>>, opened_by: &'a str) -> Self {
        Turn {
            role,
            content,
            opened_by,
            cache_mark: None,
        }
    }
}

/// Hand-written: `content` is written with the block `cache_mark` names marked, which a field
/// attribute cannot see.
impl Serialize for Turn<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry("role", &self.role)?;
        m.serialize_entry(
            "content",
            &Content {
                blocks: &self.content,
                mark: self.cache_mark.as_ref(),
            },
        )?;
        m.end()
    }
}

/// A content array, one block of which may carry a `cache_control`. Hand-written: one element
/// of the sequence is written marked.
pub(super) struct Content<'b, 'a> {
    pub(super) blocks: &'b [Block<'a>],
    pub(super) mark: Option<&'b (usize, Value)>,
}

impl Serialize for Content<'_, '_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.blocks.len()))?;
        for (i, block) in self.blocks.iter().enumerate() {
            match self.mark {
                Some((at, cache_control)) if *at == i => {
                    seq.serialize_element(&Marked(block, cache_control))?;
                }
                _ => seq.serialize_element(block)?,
            }
        }
        seq.end()
    }
}

/// A block with a `cache_control` written after its own fields (hand-written: it extends the
/// block's open map).
pub(super) struct Marked<'b, 'a>(&'b Block<'a>, &'b Value);

impl Serialize for Marked<'_, '_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        self.0.write_fields(&mut m)?;
        m.serialize_entry("cache_control", &Canonical(self.1))?;
        m.end()
    }
}

/// One wire content block.
pub(super) enum Block<'a> {
    Text(Cow<'a, str>),
    Thinking {
        text: &'a str,
        extra: &'a IndexMap<String, Value>,
    },
    /// A `redacted_thinking` block, sent back as it came (keys sorted).
    RedactedThinking(&'a Map<String, Value>),
    ToolUse {
        id: &'a str,
        name: &'a str,
        /// The call's arguments as the model wrote them (checked, whitespace between tokens
        /// removed), or `{"invalid_arguments":…}` around them when they fail the check.
        input: Box<RawValue>,
    },
    ToolResult {
        tool_use_id: &'a str,
        content: Vec<Block<'a>>,
        is_error: bool,
    },
    ToolAddition(&'a str),
    /// A `tool_addition` carrying the definition by value.
    ToolDefinition(&'a ToolSchema),
    ToolRemoval(&'a str),
}

impl Block<'_> {
    pub(super) fn is_tool_change(&self) -> bool {
        matches!(
            self,
            Block::ToolAddition(_) | Block::ToolDefinition(_) | Block::ToolRemoval(_)
        )
    }

    /// Whether the provider accepts a `cache_control` on this block (not on thinking).
    pub(super) fn can_carry_cache_control(&self) -> bool {
        !matches!(self, Block::Thinking { .. } | Block::RedactedThinking(_))
    }

    /// Writes the block's fields into an open map.
    pub(super) fn write_fields<M: SerializeMap>(&self, m: &mut M) -> Result<(), M::Error> {
        match self {
            Block::Text(text) => {
                m.serialize_entry("type", "text")?;
                m.serialize_entry("text", text)?;
            }
            Block::Thinking { text, extra } => {
                m.serialize_entry("type", "thinking")?;
                m.serialize_entry("thinking", text)?;
                // Sorted, so the bytes never depend on how the block was built or decoded.
                let mut fields: Vec<_> = extra.iter().collect();
                fields.sort_unstable_by(|a, b| a.0.cmp(b.0));
                for (k, v) in fields {
                    m.serialize_entry(k, &Canonical(v))?;
                }
            }
            Block::RedactedThinking(fields) => {
                let mut fields: Vec<_> = fields.iter().collect();
                fields.sort_unstable_by(|a, b| a.0.cmp(b.0));
                for (k, v) in fields {
                    m.serialize_entry(k, &Canonical(v))?;
                }
            }
            Block::ToolUse { id, name, input } => {
                m.serialize_entry("type", "tool_use")?;
                m.serialize_entry("id", id)?;
                m.serialize_entry("name", name)?;
                m.serialize_entry("input", &**input)?;
            }
            Block::ToolResult {
                tool_use_id,
                content,
                is_error,
            } => {
                m.serialize_entry("type", "tool_result")?;
                m.serialize_entry("tool_use_id", tool_use_id)?;
                m.serialize_entry("content", content)?;
                if *is_error {
                    m.serialize_entry("is_error", &true)?;
                }
            }
            Block::ToolAddition(name) => {
                m.serialize_entry("type", "tool_addition")?;
                m.serialize_entry("tool", &ToolRef::ToolReference { name })?;
            }
            Block::ToolDefinition(definition) => {
                m.serialize_entry("type", "tool_addition")?;
                let definition = Definition::new(definition);
                m.serialize_entry("tool", &ToolRef::ToolDefinition { definition })?;
            }
            Block::ToolRemoval(name) => {
                m.serialize_entry("type", "tool_removal")?;
                m.serialize_entry("tool", &ToolRef::ToolReference { name })?;
            }
        }
        Ok(())
    }
}

/// Hand-written: two variants share the `type` `tool_addition`, a redacted block writes its own
/// fields (sorted) and a thinking block its extra fields sorted, and [`Marked`] extends the map;
/// no serde enum representation does these.
impl Serialize for Block<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        self.write_fields(&mut m)?;
        m.end()
    }
}
