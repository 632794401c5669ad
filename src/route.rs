//! Routes: what one provider endpoint and model accept (SPEC §6).
//!
//! A route only supplies capabilities; the configuration that is logged comes from the loop.
//! Every built-in entry carries the evidence its capabilities rest on, and the decision rule
//! in `docs/capability-rule.md` says which evidence buys which mode.

use serde::{Deserialize, Serialize};

/// How a route takes tool changes in history (SPEC §5). `None` where a route has no mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ToolUpdateMode {
    /// Additions of deferred declarations *and* removals are accepted in history and keep
    /// the cached prefix: removed definitions stay declared, removal blocks are sent.
    InHistory,
    /// Additions are accepted, removals are not: declarations of names that left the
    /// effective set are dropped, and so are removal blocks.
    AdditionOnly,
}

impl ToolUpdateMode {
    /// The JSON spelling (`"in-history"`, `"addition-only"`).
    pub fn as_str(self) -> &'static str {
        match self {
            ToolUpdateMode::InHistory => "in-history",
            ToolUpdateMode::AdditionOnly => "addition-only",
        }
    }
}

/// The wire format a route speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WireApi {
    /// The Messages API (DeepSeek's Anthropic-compatible endpoint, Anthropic).
    Messages,
    /// OpenAI-compatible chat completions.
    OpenAiChat,
}

/// What a route's capabilities rest on.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Evidence {
    /// The vendor's documentation, read on a date.
    VendorDoc {
        /// Where.
        url: &'static str,
        /// When it was read (ISO date).
        read_on: &'static str,
    },
    /// An end-to-end test of this crate against the real endpoint.
    MeasuredE2e {
        /// The test that measures it.
        test: &'static str,
    },
    /// The original system's default entry, not verified here.
    UpstreamDefault {
        /// Where the default is recorded.
        reference: &'static str,
    },
    /// No evidence: the route gets no mode.
    None,
}

/// One provider endpoint and model, with its capabilities and their evidence.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Route {
    /// Provider id, as in `Config::provider`.
    pub provider: &'static str,
    /// Exact model id, or `"*"` for the generic entry of a provider.
    pub model: &'static str,
    /// Wire format.
    pub api: WireApi,
    /// Tool-update mode; `None` = changes rewrite the declarations.
    pub tool_update: Option<ToolUpdateMode>,
    /// Whether prompt updates may be appended to history as system nodes (SPEC §4.1).
    pub system_prompt_in_history: bool,
    /// Whether the tool-change beta header goes on every request.
    pub beta_always: bool,
    /// Bytes the provider's deferred-tools section adds to the cached prefix (SPEC §9).
    pub deferred_section_bytes: u32,
    /// Whether the serializer appends the reserved deferred placeholder (SPEC §7).
    pub deferred_placeholder: bool,
    /// What the capabilities rest on.
    pub evidence: Evidence,
}

impl Route {
    /// A route with no mode, no prompts in history and no evidence: what an unknown model
    /// gets. The fallback is always correct, only dearer.
    pub const fn plain(provider: &'static str, model: &'static str, api: WireApi) -> Self {
        Route {
            provider,
            model,
            api,
            tool_update: None,
            system_prompt_in_history: false,
            beta_always: false,
            deferred_section_bytes: 0,
            deferred_placeholder: false,
            evidence: Evidence::None,
        }
    }
}
