//! Routes: what one provider endpoint and model accept ([reference
//! §6](crate::manual::reference#6-routes-catalog-decision-rule)).
//!
//! A route only supplies capabilities; the configuration that is logged comes from the loop.
//! Every built-in entry carries the evidence its capabilities rest on, and the decision rule
//! in `docs/capability-rule.md` says which evidence buys which mode.

use std::borrow::Cow;

mod admission;
pub(crate) use admission::has_object_root;
pub use admission::{ToolRefusal, ToolRefused};

use serde::{Deserialize, Serialize};

/// How a route takes tool changes in history ([reference
/// §5](crate::manual::reference#5-projection-project_tool_updates)). `None` where a route has no
/// mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
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

// Hand-written, as is `Deserialize`: the spelling is [`ToolUpdateMode::as_str`], defined once.
impl Serialize for ToolUpdateMode {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for ToolUpdateMode {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = Cow::<str>::deserialize(d)?;
        [ToolUpdateMode::InHistory, ToolUpdateMode::AdditionOnly]
            .into_iter()
            .find(|m| m.as_str() == s)
            .ok_or_else(|| serde::de::Error::custom(format_args!("unknown mode `{s}`")))
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
    /// OpenAI's Responses API (`POST /v1/responses`), stateless (`store: false`).
    Responses,
}

/// What a route's capabilities rest on.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Evidence {
    /// The vendor's documentation, read on a date.
    VendorDoc {
        /// Where.
        url: Cow<'static, str>,
        /// When it was read (ISO date).
        read_on: Cow<'static, str>,
    },
    /// An end-to-end test of this crate against the real endpoint.
    MeasuredE2e {
        /// The test that measures it.
        test: Cow<'static, str>,
    },
    /// The original system's default entry, not verified here.
    UpstreamDefault {
        /// Where the default is recorded.
        reference: Cow<'static, str>,
    },
    /// No evidence: the route gets no mode.
    None,
}

/// One provider endpoint and model, with its capabilities and their evidence.
///
/// The identity (`provider`, `model`, `api`) is plain data; the capabilities are read through
/// methods and set only through [`RouteBuilder`], which refuses combinations no provider accepts
/// ([reference §6](crate::manual::reference#6-routes-catalog-decision-rule)), so an impossible
/// route cannot be built.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Route {
    /// Provider id, as in `Config::provider`.
    pub provider: Cow<'static, str>,
    /// Exact model id, or `"*"` for the generic entry of a provider.
    pub model: Cow<'static, str>,
    /// Wire format.
    pub api: WireApi,
    caps: Capabilities,
    evidence: Evidence,
    /// Evidence for the v4 capabilities, one entry per claim.
    claims: Cow<'static, [Claim]>,
}

/// The capability flags, valid together (checked by [`RouteBuilder::build`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Capabilities {
    tool_update: Option<ToolUpdateMode>,
    system_prompt_in_history: bool,
    beta_always: bool,
    deferred_section_bytes: u32,
    deferred_placeholder: bool,
    inline_definitions: bool,
    binds_thinking: bool,
    auto_cache: bool,
    forced_tool_choice: bool,
    assistant_prefill: bool,
    min_cache_tokens: u32,
    cache_block_tokens: u32,
    prompt_cache_key: bool,
}

impl Capabilities {
    /// What an unknown model gets: nothing claimed, and what every wire accepts.
    const PLAIN: Capabilities = Capabilities {
        tool_update: None,
        system_prompt_in_history: false,
        beta_always: false,
        deferred_section_bytes: 0,
        deferred_placeholder: false,
        inline_definitions: false,
        binds_thinking: false,
        auto_cache: false,
        forced_tool_choice: true,
        assistant_prefill: true,
        min_cache_tokens: 0,
        cache_block_tokens: 0,
        prompt_cache_key: false,
    };

    const fn check(&self) -> Result<(), RouteError> {
        if self.inline_definitions && !matches!(self.tool_update, Some(ToolUpdateMode::InHistory)) {
            return Err(RouteError::InlineWithoutInHistory);
        }
        if self.deferred_placeholder && self.tool_update.is_none() {
            return Err(RouteError::PlaceholderWithoutMode);
        }
        if self.beta_always && self.tool_update.is_none() {
            return Err(RouteError::BetaWithoutMode);
        }
        Ok(())
    }
}

/// A route capability that rests on its own vendor evidence ([reference
/// §6](crate::manual::reference#6-routes-catalog-decision-rule), v4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Capability {
    /// [`Route::inline_definitions`].
    InlineDefinitions,
    /// [`Route::binds_thinking`].
    BindsThinking,
    /// [`Route::auto_cache`].
    AutoCache,
    /// [`Route::forced_tool_choice`] (the claim is usually that it is refused).
    ForcedToolChoice,
    /// [`Route::assistant_prefill`] (the claim is usually that it is refused).
    AssistantPrefill,
    /// [`Route::min_cache_tokens`].
    MinCacheTokens,
    /// [`Route::cache_block_tokens`].
    CacheBlockTokens,
    /// [`Route::prompt_cache_key`].
    PromptCacheKey,
}

/// One capability and the evidence it rests on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Claim {
    /// The capability.
    pub capability: Capability,
    /// What it rests on.
    pub evidence: Evidence,
}

/// A capability combination no provider accepts ([reference
/// §6](crate::manual::reference#6-routes-catalog-decision-rule)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RouteError {
    /// Inline definitions ride on in-history tool changes; without `InHistory` there is no
    /// block to carry them.
    #[error("inline definitions need the in-history tool-update mode")]
    InlineWithoutInHistory,
    /// The deferred placeholder exists only to keep a mode route's deferred section stable.
    #[error("the deferred placeholder needs a tool-update mode")]
    PlaceholderWithoutMode,
    /// The tool-change beta header means nothing on a route that never sends a tool change.
    #[error("the tool-change beta on every request needs a tool-update mode")]
    BetaWithoutMode,
}

impl Route {
    /// A route with no mode, no prompts in history and no evidence: what an unknown model
    /// gets. The fallback is always correct, only dearer.
    /// `const`, for built-in tables; [`Route::new`] takes runtime strings.
    pub const fn plain(provider: &'static str, model: &'static str, api: WireApi) -> Self {
        Route {
            provider: Cow::Borrowed(provider),
            model: Cow::Borrowed(model),
            api,
            caps: Capabilities::PLAIN,
            evidence: Evidence::None,
            claims: Cow::Borrowed(&[]),
        }
    }

    /// A route with no mode, no prompts in history and no evidence, for a provider and model
    /// known only at run time (read from a configuration file, say). Claim capabilities with
    /// [`Route::builder`], with the evidence they rest on.
    pub fn new(
        provider: impl Into<Cow<'static, str>>,
        model: impl Into<Cow<'static, str>>,
        api: WireApi,
    ) -> Self {
        Route {
            provider: provider.into(),
            model: model.into(),
            ..Route::plain("", "", api)
        }
    }

    /// A builder for a route with capabilities; [`RouteBuilder::build`] refuses an impossible
    /// combination.
    ///
    /// ```
    /// use mektpoy::{Route, route::{Evidence, ToolUpdateMode, WireApi}};
    /// let model = String::from("my-model");
    /// let route = Route::builder("acme", model, WireApi::Messages)
    ///     .tool_update(Some(ToolUpdateMode::AdditionOnly))
    ///     .evidence(Evidence::MeasuredE2e { test: "acme_live::addition".into() })
    ///     .build()?;
    /// assert_eq!(route.model, "my-model");
    /// assert_eq!(route.tool_update(), Some(ToolUpdateMode::AdditionOnly));
    ///
    /// // Inline definitions without the in-history mode: refused.
    /// assert!(Route::builder("acme", "m", WireApi::Messages).inline_definitions(true).build().is_err());
    /// # Ok::<(), mektpoy::route::RouteError>(())
    /// ```
    pub fn builder(
        provider: impl Into<Cow<'static, str>>,
        model: impl Into<Cow<'static, str>>,
        api: WireApi,
    ) -> RouteBuilder {
        Route::new(provider, model, api).into_builder()
    }

    /// A builder starting from this route's capabilities (to vary a catalog entry).
    pub fn into_builder(self) -> RouteBuilder {
        RouteBuilder(self)
    }

    /// Tool-update mode; `None` = changes rewrite the declarations.
    pub fn tool_update(&self) -> Option<ToolUpdateMode> {
        self.caps.tool_update
    }

    /// Whether prompt updates may be appended to history as system nodes ([reference
    /// §4.1](crate::manual::reference#41-system-prompt-in-history)).
    pub fn system_prompt_in_history(&self) -> bool {
        self.caps.system_prompt_in_history
    }

    /// Whether the tool-change beta header goes on every request.
    pub fn beta_always(&self) -> bool {
        self.caps.beta_always
    }

    /// Bytes the provider's deferred-tools section adds to the cached prefix ([reference
    /// §9](crate::manual::reference#9-prefix-cache-meter)).
    pub fn deferred_section_bytes(&self) -> u32 {
        self.caps.deferred_section_bytes
    }

    /// Whether the serializer appends the reserved deferred placeholder ([reference
    /// §7](crate::manual::reference#7-wire-serialization)).
    pub fn deferred_placeholder(&self) -> bool {
        self.caps.deferred_placeholder
    }

    /// Whether additions and redefinitions may carry their definition by value
    /// (`inline-tools-2026-09-15`): the projection of [reference
    /// §5.1](crate::manual::reference#51-projection-on-inline-definition-routes), the by-value
    /// snapshot.
    pub fn inline_definitions(&self) -> bool {
        self.caps.inline_definitions
    }

    /// Whether the provider checks signed thinking blocks against the conversation before
    /// them, so that a rewrite before one is refused unless the thinking policy acts.
    pub fn binds_thinking(&self) -> bool {
        self.caps.binds_thinking
    }

    /// Whether the provider caches only when asked: the serializer adds automatic
    /// `cache_control` ([reference §7](crate::manual::reference#7-wire-serialization)).
    pub fn auto_cache(&self) -> bool {
        self.caps.auto_cache
    }

    /// Whether a forced `tool_choice` (`any` / `tool`) is accepted.
    pub fn forced_tool_choice(&self) -> bool {
        self.caps.forced_tool_choice
    }

    /// Whether a request may end with an assistant turn (prefill).
    pub fn assistant_prefill(&self) -> bool {
        self.caps.assistant_prefill
    }

    /// The shortest prefix, in tokens, the provider caches (0 where none is documented): the
    /// meter counts no cache read below it.
    pub fn min_cache_tokens(&self) -> u32 {
        self.caps.min_cache_tokens
    }

    /// The granularity, in tokens, of the provider's cache read (0 where the route claims none): a
    /// measured read may fall short of the meter's estimate by up to one block before the meter
    /// flags the request ([reference §9](crate::manual::reference#9-prefix-cache-meter)). Only the
    /// meter reads it.
    pub fn cache_block_tokens(&self) -> u32 {
        self.caps.cache_block_tokens
    }

    /// The route whose cache facts a meter applies to the requests this route sends with model id
    /// `model` ([decision 105](crate::manual::decisions#decision-105)): this route, unless it is a
    /// generic entry (model [`ANY_MODEL`]) and the catalog knows `model` — under this route's
    /// provider (a dated Anthropic id by its family, as [`route_for`] resolves it), or, on the
    /// generic OpenAI-compatible chat route, as a DeepSeek model — in which case this route with
    /// that entry's provider, model and cache facts (automatic caching, minimum cacheable length,
    /// cache block). A generic entry sends the caller's model id, and the provider caches by that
    /// model's rules, not by the most restrictive ones the generic entry assumes for what it sends
    /// (those stay for what it refuses). DeepSeek's context caching is "enabled by default for all
    /// users" of its API, chat completions included
    /// (<https://api-docs.deepseek.com/guides/kv_cache>, read 2026-12-06). Everything else (wire
    /// API, mode, refusals) stays this route's.
    ///
    /// ```
    /// use mektpoy::route_for;
    /// let generic = route_for("anthropic", "claude-nova-6"); // the generic entry
    /// let facts = generic.metered_for("claude-fable-5-1-20261001");
    /// assert_eq!(facts.model, "claude-fable-5-1");
    /// assert_eq!(facts.min_cache_tokens(), 512);
    /// assert_eq!(generic.metered_for("claude-nova-6").min_cache_tokens(), 1024);
    /// let chat = route_for("openai-compatible", "deepseek-v4-pro");
    /// assert_eq!(chat.metered_for("deepseek-v4-pro").provider, "deepseek");
    /// ```
    pub fn metered_for(&self, model: &str) -> Route {
        if self.model != ANY_MODEL {
            return self.clone();
        }
        let known = |provider: &str| {
            let entry = route_for(provider, model);
            (entry.model != ANY_MODEL && entry.provider == provider).then_some(entry)
        };
        let entry = match known(&self.provider) {
            Some(entry) => Some(entry),
            None if self.provider == OPENAI_COMPATIBLE && self.api == WireApi::OpenAiChat => {
                known("deepseek")
            }
            None => None,
        };
        let Some(entry) = entry else {
            return self.clone();
        };
        let mut facts = self.clone();
        facts.provider = entry.provider;
        facts.model = entry.model;
        facts.caps.auto_cache = entry.caps.auto_cache;
        facts.caps.min_cache_tokens = entry.caps.min_cache_tokens;
        facts.caps.cache_block_tokens = entry.caps.cache_block_tokens;
        facts
    }

    /// Whether the provider takes a `prompt_cache_key` that routes requests sharing a prefix
    /// to the same cache: the loop sends the session id as the key, so that a session's
    /// requests meet the entries its earlier requests wrote.
    pub fn prompt_cache_key(&self) -> bool {
        self.caps.prompt_cache_key
    }

    /// What the tool-update mode and prompts in history rest on.
    pub fn evidence(&self) -> &Evidence {
        &self.evidence
    }

    /// The evidence of each v4 capability this route claims.
    pub fn claims(&self) -> &[Claim] {
        &self.claims
    }

    /// The evidence `capability` rests on, if the route claims it.
    pub fn claim(&self, capability: Capability) -> Option<&Evidence> {
        self.claims
            .iter()
            .find(|c| c.capability == capability)
            .map(|c| &c.evidence)
    }
}

/// Builds a [`Route`] whose capabilities are valid together.
#[derive(Clone, Debug)]
#[must_use]
pub struct RouteBuilder(Route);

macro_rules! setters {
    ($($(#[$doc:meta])* $name:ident: $ty:ty,)*) => {
        $(
            $(#[$doc])*
            pub fn $name(mut self, value: $ty) -> Self {
                self.0.caps.$name = value;
                self
            }
        )*
    };
}

impl RouteBuilder {
    setters! {
        /// See [`Route::tool_update`].
        tool_update: Option<ToolUpdateMode>,
        /// See [`Route::system_prompt_in_history`].
        system_prompt_in_history: bool,
        /// See [`Route::beta_always`].
        beta_always: bool,
        /// See [`Route::deferred_section_bytes`].
        deferred_section_bytes: u32,
        /// See [`Route::deferred_placeholder`].
        deferred_placeholder: bool,
        /// See [`Route::inline_definitions`].
        inline_definitions: bool,
        /// See [`Route::binds_thinking`].
        binds_thinking: bool,
        /// See [`Route::auto_cache`].
        auto_cache: bool,
        /// See [`Route::forced_tool_choice`].
        forced_tool_choice: bool,
        /// See [`Route::assistant_prefill`].
        assistant_prefill: bool,
        /// See [`Route::min_cache_tokens`].
        min_cache_tokens: u32,
        /// See [`Route::cache_block_tokens`].
        cache_block_tokens: u32,
        /// See [`Route::prompt_cache_key`].
        prompt_cache_key: bool,
    }

    /// What the mode and prompts in history rest on.
    pub fn evidence(mut self, evidence: Evidence) -> Self {
        self.0.evidence = evidence;
        self
    }

    /// Adds (or replaces) the evidence of one capability.
    pub fn claim(mut self, capability: Capability, evidence: Evidence) -> Self {
        let claims = self.0.claims.to_mut();
        claims.retain(|c| c.capability != capability);
        claims.push(Claim {
            capability,
            evidence,
        });
        self
    }

    /// The route.
    ///
    /// # Errors
    /// A [`RouteError`] for a combination no provider accepts: inline definitions without
    /// `InHistory`, a placeholder or `beta_always` without a mode.
    pub fn build(self) -> Result<Route, RouteError> {
        self.0.caps.check()?;
        Ok(self.0)
    }

    /// The route without the combination check: for tests that show what the serializer does
    /// with a route no one can build.
    #[cfg(test)]
    pub(crate) fn build_unchecked(self) -> Route {
        self.0
    }
}

/// Where the Anthropic entries' capabilities are documented: the vendor's page on
/// mid-conversation system messages and tool changes, which lists the models the
/// `mid-conversation-tool-changes-2026-07-01` beta works on.
pub const ANTHROPIC_TOOL_CHANGES_DOC: &str =
    "https://platform.claude.com/docs/en/build-with-claude/mid-conversation-system-messages";

/// The date the Anthropic model list was read (see `docs/capability-rule.md`).
pub const ANTHROPIC_TOOL_CHANGES_READ_ON: &str = "2026-12-01";

/// An **estimate**, not a documented figure: bytes the deferred-tools part of an Anthropic request
/// adds to the cached prefix, for the meter ([reference
/// §9](crate::manual::reference#9-prefix-cache-meter)).
///
/// The vendor documents that deferred declarations stay out of the cached prefix until a
/// `tool_addition` surfaces them, but not the size of what the rendered prompt holds because
/// deferred declarations exist. 512 bytes (≈ 128 tokens at ⌈bytes / 4⌉) is the order of one
/// rendered paragraph; what matters to the meter is that it is non-zero, so that a section
/// appearing or disappearing counts as a rewrite. Replace it with a measured figure once a
/// live test measures one.
pub const ANTHROPIC_DEFERRED_SECTION_BYTES: u32 = 512;

/// The model id of a generic entry: what a provider's unknown models get.
pub const ANY_MODEL: &str = "*";

/// The provider id of the generic OpenAI-compatible chat route, which unknown providers get.
pub const OPENAI_COMPATIBLE: &str = "openai-compatible";

/// The vendor's page on prompt caching: caching is opt-in (`cache_control`), automatic
/// caching with a top-level `cache_control`, the minimum cacheable length per model. A read
/// is a whole cached prefix ending at a content-block boundary; the page gives no token
/// granularity for `cache_read_input_tokens`, so [`Route::cache_block_tokens`] takes the
/// model's minimum cacheable length (the shortest entry the cache holds), a conservative
/// block for the meter's flag.
pub const ANTHROPIC_PROMPT_CACHING_DOC: &str =
    "https://platform.claude.com/docs/en/build-with-claude/prompt-caching";

/// The vendor's release notes; the entry of 2026-09-22 introduces the `inline-tools-2026-09-15`
/// beta (tool definitions by value inside a `tool_addition`, "in beta on the Claude API"), on
/// the models of the mid-conversation tool-changes page.
pub const ANTHROPIC_INLINE_TOOLS_DOC: &str =
    "https://platform.claude.com/docs/en/release-notes/overview";

/// The vendor's page on prefix checks of signed thinking blocks, which lists the models that
/// run the check.
pub const ANTHROPIC_THINKING_PREFIX_DOC: &str =
    "https://platform.claude.com/docs/en/build-with-claude/preserved-thinking/prefix-checks";

/// The vendor's migration guide: "Prefilling assistant messages returns a 400 error" (from the
/// Claude 4.6 models on; every model of the catalog is newer).
pub const ANTHROPIC_PREFILL_DOC: &str =
    "https://platform.claude.com/docs/en/about-claude/models/migration-guide";

/// Fable 5.1 / Mythos 5.1: forced `tool_choice` returns a 400.
pub const ANTHROPIC_FABLE_5_1_DOC: &str =
    "https://platform.claude.com/docs/en/models/fable-5-1/whats-new-fable-5-1";

/// Sonnet 5.5: "Forced tool use returns an error."
pub const ANTHROPIC_SONNET_5_5_DOC: &str =
    "https://platform.claude.com/docs/en/models/sonnet-5-5/whats-new-sonnet-5-5";

/// Fable 5.2 / Mythos 5.2: the changes from 5.1 (none lifts the forced tool choice refusal).
pub const ANTHROPIC_FABLE_5_2_DOC: &str =
    "https://platform.claude.com/docs/en/models/fable-5-2/whats-new-fable-5-2";

/// The date the v4 capability pages were read (see `docs/capability-rule.md`).
pub const ANTHROPIC_V4_READ_ON: &str = "2026-12-01";

/// DeepSeek's announcement of context caching (2024-08-02): "The cache system uses 64 tokens
/// as a storage unit; content less than 64 tokens will not be cached." The current guide
/// ([`DEEPSEEK_KV_CACHE_DOC`]) says units are also carved "at fixed token intervals" without
/// giving the interval, so the announcement's figure is the one documented.
pub const DEEPSEEK_CACHE_UNIT_DOC: &str = "https://api-docs.deepseek.com/news/news0802";

/// DeepSeek's context-caching guide: caching is on by default, a hit needs a request to match
/// a whole persisted "cache prefix unit" (units at the end of the user input and of the model
/// output, at a detected common prefix, and at fixed token intervals), on a "best-effort"
/// basis.
pub const DEEPSEEK_KV_CACHE_DOC: &str = "https://api-docs.deepseek.com/guides/kv_cache";

/// The date the DeepSeek caching pages were read.
pub const DEEPSEEK_READ_ON: &str = "2026-12-01";

/// DeepSeek's documented cache storage unit, in tokens ([`DEEPSEEK_CACHE_UNIT_DOC`]).
pub const DEEPSEEK_CACHE_BLOCK_TOKENS: u32 = 64;

/// What every DeepSeek route rests on: the cache's storage unit.
const DEEPSEEK_CLAIMS: &[Claim] = &[Claim {
    capability: Capability::CacheBlockTokens,
    evidence: vendor(DEEPSEEK_CACHE_UNIT_DOC, DEEPSEEK_READ_ON),
}];

/// A DeepSeek route without a mode: the vendor-wide cache unit and nothing else.
const fn deepseek(model: &'static str) -> Route {
    Route {
        provider: Cow::Borrowed("deepseek"),
        model: Cow::Borrowed(model),
        api: WireApi::Messages,
        caps: Capabilities {
            cache_block_tokens: DEEPSEEK_CACHE_BLOCK_TOKENS,
            ..Capabilities::PLAIN
        },
        evidence: Evidence::None,
        claims: Cow::Borrowed(DEEPSEEK_CLAIMS),
    }
}

/// OpenAI's API reference for `POST /v1/responses` (the create-response page, read through
/// the vendor's rendered references of 2026-12): `input` items, `instructions` ("a system (or
/// developer) message inserted into the model's context"), `tools`, `tool_choice`,
/// `parallel_tool_calls`, `store`, `include` (`reasoning.encrypted_content`),
/// `prompt_cache_key` ("used by OpenAI to cache responses for similar requests to optimize
/// your cache hit rates") and `prompt_cache_retention` (`in_memory` or `24h`).
pub const OPENAI_RESPONSES_DOC: &str =
    "https://developers.openai.com/api/reference/resources/responses/methods/create";

/// OpenAI's OpenAPI description of the `additional_tools` input item, as rendered by the
/// `openai-client-base` 0.14.0 crate (`AdditionalToolsItemParam`: `type: "additional_tools"`,
/// `role`: "Only `developer` is supported", `tools`: "A list of additional tools made
/// available at this item", optional `id`; 0.16.0 names it `BetaAdditionalToolsItemParam`).
/// It describes additions only: no input item takes a tool away.
pub const OPENAI_ADDITIONAL_TOOLS_DOC: &str =
    "https://docs.rs/crate/openai-client-base/0.14.0/source/docs/AdditionalToolsItemParam.md";

/// OpenAI's tool-search guide: "Only gpt-5.4 and later models support tool_search", and tools
/// discovered mid-conversation "are injected at the end of the context window" so that the
/// cache is kept. The only vendor page on tools arriving mid-conversation; it names the models.
pub const OPENAI_TOOL_SEARCH_DOC: &str =
    "https://developers.openai.com/api/docs/guides/tools-tool-search";

/// OpenAI's "Using GPT-5.4" guide: the GPT-5.4 family is `gpt-5.4`, `gpt-5.4-pro`,
/// `gpt-5.4-mini` and `gpt-5.4-nano`.
pub const OPENAI_GPT_5_4_DOC: &str =
    "https://developers.openai.com/api/docs/guides/latest-model?model=gpt-5.4";

/// OpenAI's model page for GPT-5.6 Sol (read 2026-12-07 in the vendor's Japanese and
/// Portuguese renderings): "the flagship model of the GPT-5.6 family", served on
/// `v1/responses` and `v1/chat/completions`; "the gpt-5.6 alias routes requests to GPT-5.6
/// Sol"; cache writes billed at 1.25x the uncached input rate. A model after GPT-5.4, so the
/// tool-search guide's "gpt-5.4 and later" names it ([decision
/// 144](crate::manual::decisions#decision-144)).
pub const OPENAI_GPT_5_6_SOL_DOC: &str =
    "https://developers.openai.com/api/docs/models/gpt-5.6-sol";

/// The date the OpenAI pages were read.
pub const OPENAI_READ_ON: &str = "2026-12-06";

/// OpenAI's documented minimum cacheable prompt ("enabled automatically for prompts that are
/// 1024 tokens or longer", the prompt-caching guide).
pub const OPENAI_MIN_CACHE_TOKENS: u32 = 1024;

/// OpenAI's cache-hit increment, in tokens (the prompt-caching guide, as the vendor's "Prompt
/// Caching 201" cookbook quotes it: "cache hits occurring in increments of 128 tokens").
pub const OPENAI_CACHE_BLOCK_TOKENS: u32 = 128;

/// The prompt-caching guide (`https://developers.openai.com/api/docs/guides/prompt-caching`).
const OPENAI_CACHING_GUIDE: &str = "https://developers.openai.com/api/docs/guides/prompt-caching";

/// What every OpenAI Responses route rests on: the cache's minimum and increment, and the
/// `prompt_cache_key` parameter.
const OPENAI_CLAIMS: &[Claim] = &[
    Claim {
        capability: Capability::MinCacheTokens,
        evidence: vendor(OPENAI_CACHING_GUIDE, OPENAI_READ_ON),
    },
    Claim {
        capability: Capability::CacheBlockTokens,
        evidence: vendor(OPENAI_CACHING_GUIDE, OPENAI_READ_ON),
    },
    Claim {
        capability: Capability::PromptCacheKey,
        evidence: vendor(OPENAI_RESPONSES_DOC, OPENAI_READ_ON),
    },
];

/// One OpenAI model on the Responses API. `additions`: the tool-search guide names the model
/// for tools arriving mid-conversation, so additions go as `additional_tools` items
/// (addition-only: no item removes a tool, a removal rewrites `tools`). Without it, a tool
/// change rewrites `tools`.
const fn openai(model: &'static str, additions: bool) -> Route {
    Route {
        provider: Cow::Borrowed("openai"),
        model: Cow::Borrowed(model),
        api: WireApi::Responses,
        caps: Capabilities {
            tool_update: if additions {
                Some(ToolUpdateMode::AdditionOnly)
            } else {
                None
            },
            min_cache_tokens: OPENAI_MIN_CACHE_TOKENS,
            cache_block_tokens: OPENAI_CACHE_BLOCK_TOKENS,
            prompt_cache_key: true,
            ..Capabilities::PLAIN
        },
        evidence: if additions {
            vendor(OPENAI_TOOL_SEARCH_DOC, OPENAI_READ_ON)
        } else {
            Evidence::None
        },
        claims: Cow::Borrowed(OPENAI_CLAIMS),
    }
}

const fn vendor(url: &'static str, read_on: &'static str) -> Evidence {
    Evidence::VendorDoc {
        url: Cow::Borrowed(url),
        read_on: Cow::Borrowed(read_on),
    }
}

const fn claim(capability: Capability, url: &'static str) -> Claim {
    Claim {
        capability,
        evidence: vendor(url, ANTHROPIC_V4_READ_ON),
    }
}

/// What every Anthropic route rests on, whatever the model (caching is opt-in, a request may
/// not end with an assistant turn), then the model's own claims.
macro_rules! claims {
    ($($capability:ident => $url:expr),* $(,)?) => {{
        const CLAIMS: &[Claim] = &[
            claim(Capability::AutoCache, ANTHROPIC_PROMPT_CACHING_DOC),
            claim(Capability::AssistantPrefill, ANTHROPIC_PREFILL_DOC),
            claim(Capability::MinCacheTokens, ANTHROPIC_PROMPT_CACHING_DOC),
            claim(Capability::CacheBlockTokens, ANTHROPIC_PROMPT_CACHING_DOC),
            $(claim(Capability::$capability, $url),)*
        ];
        CLAIMS
    }};
}

/// What one Anthropic model's pages say about it.
struct AnthropicModel {
    /// On the mid-conversation tool-changes list: in-history mode and prompts, and (Claude
    /// API) inline definitions.
    tool_changes: bool,
    binds: bool,
    forced_tool_choice: bool,
    /// The vendor's minimum cacheable prompt length (512 on most current models).
    min_cache_tokens: u32,
    claims: &'static [Claim],
}

/// One Anthropic model: automatic caching and no prefill everywhere; in-history tool changes
/// and prompts when the vendor lists the model for them, with inline definitions (these are
/// Claude API routes); thinking binding and forced tool choice as its own pages say.
const fn anthropic(model: &'static str, m: AnthropicModel) -> Route {
    Route {
        provider: Cow::Borrowed("anthropic"),
        model: Cow::Borrowed(model),
        api: WireApi::Messages,
        caps: Capabilities {
            tool_update: if m.tool_changes {
                Some(ToolUpdateMode::InHistory)
            } else {
                None
            },
            system_prompt_in_history: m.tool_changes,
            beta_always: m.tool_changes,
            deferred_section_bytes: if m.tool_changes {
                ANTHROPIC_DEFERRED_SECTION_BYTES
            } else {
                0
            },
            // The inline beta accepts declarations that are all deferred, or none: no
            // placeholder is needed there (reference §7).
            deferred_placeholder: false,
            inline_definitions: m.tool_changes,
            binds_thinking: m.binds,
            auto_cache: true,
            forced_tool_choice: m.forced_tool_choice,
            assistant_prefill: false,
            min_cache_tokens: m.min_cache_tokens,
            // No token granularity is documented: the model's minimum cacheable length is
            // the block (see `ANTHROPIC_PROMPT_CACHING_DOC`'s note on reads).
            cache_block_tokens: m.min_cache_tokens,
            prompt_cache_key: false,
        },
        evidence: if m.tool_changes {
            vendor(ANTHROPIC_TOOL_CHANGES_DOC, ANTHROPIC_TOOL_CHANGES_READ_ON)
        } else {
            Evidence::None
        },
        claims: Cow::Borrowed(m.claims),
    }
}

/// On the tool-changes list; no thinking binding or forced tool choice refusal documented.
const fn listed(claims: &'static [Claim]) -> AnthropicModel {
    AnthropicModel {
        tool_changes: true,
        binds: false,
        forced_tool_choice: true,
        min_cache_tokens: 512,
        claims,
    }
}

/// On the tool-changes list, on the prefix-check list, forced tool choice refused.
const fn newest(claims: &'static [Claim]) -> AnthropicModel {
    AnthropicModel {
        binds: true,
        forced_tool_choice: false,
        ..listed(claims)
    }
}

/// What an unknown Anthropic model rests on: vendor-wide facts, and the most restrictive behaviour
/// a known model of the vendor has ([decision 87](crate::manual::decisions#decision-87)). A model
/// the catalog does not know may be a newer one, and the newest models bind thinking and refuse
/// forced tool choice; the longest minimum cacheable length of the catalog keeps the meter from
/// crediting a prefix the model would not cache.
const GENERIC_ANTHROPIC_CLAIMS: &[Claim] = &[
    claim(Capability::AutoCache, ANTHROPIC_PROMPT_CACHING_DOC),
    claim(Capability::AssistantPrefill, ANTHROPIC_PREFILL_DOC),
    claim(Capability::MinCacheTokens, ANTHROPIC_PROMPT_CACHING_DOC),
    claim(Capability::CacheBlockTokens, ANTHROPIC_PROMPT_CACHING_DOC),
    claim(Capability::BindsThinking, ANTHROPIC_THINKING_PREFIX_DOC),
    claim(Capability::ForcedToolChoice, ANTHROPIC_FABLE_5_2_DOC),
];

/// The longest minimum cacheable prompt length of the catalog's Anthropic models.
const ANTHROPIC_MAX_MIN_CACHE_TOKENS: u32 = 1024;

static CATALOG: &[Route] = &[
    // The original system's default entry (deepseek-harness 0.1.7-rc.2). Its real-endpoint
    // test reportedly asserts an addition followed by a cache read; a later discussion
    // reportedly says its tool_addition path breaks sessions on the official endpoint. Both
    // are reported, neither is verified here. DeepSeek caches by itself (no `cache_control`).
    Route {
        provider: Cow::Borrowed("deepseek"),
        model: Cow::Borrowed("deepseek-flash"),
        api: WireApi::Messages,
        caps: Capabilities {
            tool_update: Some(ToolUpdateMode::AdditionOnly),
            system_prompt_in_history: true,
            cache_block_tokens: DEEPSEEK_CACHE_BLOCK_TOKENS,
            ..Capabilities::PLAIN
        },
        evidence: Evidence::UpstreamDefault {
            reference: Cow::Borrowed(
                "deepseek-harness 0.1.7-rc.2, commit bc8c0dbf40 (PR #4844): default \
                        deepseek-flash catalog entry, addition-only (reported, not verified here)",
            ),
        },
        claims: Cow::Borrowed(DEEPSEEK_CLAIMS),
    },
    deepseek("deepseek-v4-pro"),
    // The models the vendor lists for mid-conversation tool changes, by exact API id.
    anthropic(
        "claude-fable-5-1",
        newest(claims![
            InlineDefinitions => ANTHROPIC_INLINE_TOOLS_DOC,
            BindsThinking => ANTHROPIC_THINKING_PREFIX_DOC,
            ForcedToolChoice => ANTHROPIC_FABLE_5_1_DOC,
        ]),
    ),
    anthropic(
        "claude-mythos-5-1",
        newest(claims![
            InlineDefinitions => ANTHROPIC_INLINE_TOOLS_DOC,
            BindsThinking => ANTHROPIC_THINKING_PREFIX_DOC,
            ForcedToolChoice => ANTHROPIC_FABLE_5_1_DOC,
        ]),
    ),
    anthropic(
        "claude-fable-5",
        listed(claims![InlineDefinitions => ANTHROPIC_INLINE_TOOLS_DOC]),
    ),
    anthropic(
        "claude-mythos-5",
        listed(claims![InlineDefinitions => ANTHROPIC_INLINE_TOOLS_DOC]),
    ),
    anthropic(
        "claude-opus-5-5",
        newest(claims![
            InlineDefinitions => ANTHROPIC_INLINE_TOOLS_DOC,
            BindsThinking => ANTHROPIC_THINKING_PREFIX_DOC,
            ForcedToolChoice => ANTHROPIC_INLINE_TOOLS_DOC,
        ]),
    ),
    anthropic(
        "claude-opus-4-8",
        AnthropicModel {
            min_cache_tokens: 1024,
            ..listed(claims![InlineDefinitions => ANTHROPIC_INLINE_TOOLS_DOC])
        },
    ),
    anthropic(
        "claude-opus-5",
        listed(claims![InlineDefinitions => ANTHROPIC_INLINE_TOOLS_DOC]),
    ),
    anthropic(
        "claude-sonnet-5-5",
        newest(claims![
            InlineDefinitions => ANTHROPIC_INLINE_TOOLS_DOC,
            BindsThinking => ANTHROPIC_THINKING_PREFIX_DOC,
            ForcedToolChoice => ANTHROPIC_SONNET_5_5_DOC,
        ]),
    ),
    anthropic(
        "claude-haiku-5-5",
        AnthropicModel {
            binds: true,
            ..listed(claims![
                InlineDefinitions => ANTHROPIC_INLINE_TOOLS_DOC,
                BindsThinking => ANTHROPIC_THINKING_PREFIX_DOC,
            ])
        },
    ),
    // Not on the tool-changes list (no mode), but on the prefix-check list: a tool change
    // rewrites `tools`, so the thinking policy must act on every one.
    anthropic(
        "claude-fable-5-2",
        AnthropicModel {
            tool_changes: false,
            ..newest(claims![
                BindsThinking => ANTHROPIC_THINKING_PREFIX_DOC,
                ForcedToolChoice => ANTHROPIC_FABLE_5_2_DOC,
            ])
        },
    ),
    anthropic(
        "claude-mythos-5-2",
        AnthropicModel {
            tool_changes: false,
            ..newest(claims![
                BindsThinking => ANTHROPIC_THINKING_PREFIX_DOC,
                ForcedToolChoice => ANTHROPIC_FABLE_5_2_DOC,
            ])
        },
    ),
    // The GPT-5.4 family ("Using GPT-5.4"), the models the tool-search guide names ("gpt-5.4
    // and later"); later models are not named by a page read here, so they get the generic
    // entry until one is.
    openai("gpt-5.4", true),
    openai("gpt-5.4-pro", true),
    openai("gpt-5.4-mini", true),
    openai("gpt-5.4-nano", true),
    // GPT-5.6 Sol and the alias its page documents (decision 144): later than GPT-5.4, so
    // named by the tool-search guide. Terra and Luna: no page read, the generic entry.
    openai("gpt-5.6-sol", true),
    openai("gpt-5.6", true),
    // Generic entries: what unknown models get. No evidence, no mode; an unknown Anthropic
    // model gets what the vendor documents for every model, and the refusals of its newest.
    deepseek(ANY_MODEL),
    Route {
        provider: Cow::Borrowed("anthropic"),
        model: Cow::Borrowed(ANY_MODEL),
        api: WireApi::Messages,
        caps: Capabilities {
            auto_cache: true,
            assistant_prefill: false,
            binds_thinking: true,
            forced_tool_choice: false,
            min_cache_tokens: ANTHROPIC_MAX_MIN_CACHE_TOKENS,
            cache_block_tokens: ANTHROPIC_MAX_MIN_CACHE_TOKENS,
            ..Capabilities::PLAIN
        },
        evidence: Evidence::None,
        claims: Cow::Borrowed(GENERIC_ANTHROPIC_CLAIMS),
    },
    // An unknown OpenAI model: the Responses API, no mode (additions only where a page names
    // the model), the vendor-wide cache facts and `prompt_cache_key`.
    openai(ANY_MODEL, false),
    Route::plain(OPENAI_COMPATIBLE, ANY_MODEL, WireApi::OpenAiChat),
];

/// The built-in routes ([reference §6](crate::manual::reference#6-routes-catalog-decision-rule)),
/// each with the evidence its capabilities rest on.
///
/// Exact model entries first, then one generic entry (model [`ANY_MODEL`]) per provider and
/// the generic OpenAI-compatible chat route; generic entries have no mode. Which evidence buys
/// which mode is the decision rule of `docs/capability-rule.md`:
/// [`InHistory`](ToolUpdateMode::InHistory) only with vendor documentation or a measured
/// end-to-end test, [`AdditionOnly`](ToolUpdateMode::AdditionOnly) when additions are
/// evidenced and removals are not, no mode without evidence.
///
/// ```
/// use mektpoy::route::{ToolUpdateMode, catalog};
/// let flash = catalog().iter().find(|r| r.model == "deepseek-flash").unwrap();
/// assert_eq!(flash.tool_update(), Some(ToolUpdateMode::AdditionOnly));
/// ```
pub fn catalog() -> &'static [Route] {
    CATALOG
}

/// The route for a provider and model: the catalog entry with this exact provider and model
/// id, else the provider's generic entry, else the generic OpenAI-compatible chat route.
///
/// Ids are matched exactly, with one exception: an Anthropic id that ends in a snapshot date
/// (`-YYYYMMDD`, or `@YYYYMMDD` as Google Cloud spells it) resolves to the entry of the id
/// without it. The vendor's page on model ids says that such ids name a dated snapshot of
/// the minor version the shorter id names, so both have the same rules; treating the dated
/// id as unknown would lose the model's refusals (a model that binds thinking would get a
/// rewrite resent before its signed thinking). Any other spelling is an unknown model and
/// gets its provider's generic entry. The returned route names the entry that applies, so
/// `provider` and `model` may be the family's or the generic ones; the logged configuration
/// comes from the loop, not from the route. O(catalog).
///
/// Evidence: <https://platform.claude.com/docs/en/about-claude/models/model-ids-and-versions>
/// (read 2026-12-02): "Models before the 4.6 generation include a snapshot date in the ID:
/// `claude-{name}-{major}-{minor}-{YYYYMMDD}`", on Vertex AI "the date is separated with `@`".
///
/// ```
/// use mektpoy::{route_for, route::ToolUpdateMode};
/// assert_eq!(route_for("anthropic", "claude-opus-5").tool_update(), Some(ToolUpdateMode::InHistory));
/// assert_eq!(route_for("anthropic", "claude-sonnet-5").tool_update(), None);
/// assert_eq!(route_for("anthropic", "claude-fable-5-1-20261001").model, "claude-fable-5-1");
/// assert_eq!(route_for("acme", "acme-1").provider, "openai-compatible");
/// ```
pub fn route_for(provider: &str, model: &str) -> Route {
    let find = |p: &str, m: &str| CATALOG.iter().find(|r| r.provider == p && r.model == m);
    find(provider, model)
        .or_else(|| {
            let family = (provider == "anthropic")
                .then(|| undated(model))
                .flatten()?;
            find(provider, family)
        })
        .or_else(|| find(provider, ANY_MODEL))
        .or_else(|| find(OPENAI_COMPATIBLE, ANY_MODEL))
        .cloned()
        .unwrap_or(Route::plain(
            OPENAI_COMPATIBLE,
            ANY_MODEL,
            WireApi::OpenAiChat,
        ))
}

/// `model` without a trailing snapshot date (`-YYYYMMDD` or `@YYYYMMDD`), if it has one.
pub(crate) fn undated(model: &str) -> Option<&str> {
    let split = model.len().checked_sub(9)?;
    let (family, date) = (model.get(..split)?, model.get(split..)?);
    let digits = date.strip_prefix(['-', '@'])?;
    (!family.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())).then_some(family)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn a_dated_anthropic_id_resolves_to_its_family() {
        for dated in ["claude-fable-5-1-20261001", "claude-fable-5-1@20261001"] {
            let route = route_for("anthropic", dated);
            assert_eq!(route.model, "claude-fable-5-1", "{dated}");
            assert!(route.binds_thinking(), "{dated}");
        }
        assert_eq!(
            undated("claude-opus-5-2026100"),
            None,
            "seven digits are no date"
        );
        assert_eq!(undated("claude-opus-5-2026100x"), None);
        assert_eq!(undated("-20261001"), None, "no family");
        assert_eq!(undated("é-20261001"), Some("é"));
        assert_eq!(undated("20261001"), None);
        assert_eq!(
            route_for("anthropic", "claude-unknown-9-20261001").model,
            ANY_MODEL
        );
        assert_eq!(
            route_for("deepseek", "deepseek-flash-20261001").model,
            ANY_MODEL,
            "only Anthropic ids carry dates"
        );
    }

    fn evidence_kind(e: &Evidence) -> &'static str {
        match e {
            Evidence::VendorDoc { .. } => "VendorDoc",
            Evidence::MeasuredE2e { .. } => "MeasuredE2e",
            Evidence::UpstreamDefault { .. } => "UpstreamDefault",
            Evidence::None => "None",
        }
    }

    /// The decision rule of `docs/capability-rule.md`, checked on every built-in entry.
    #[test]
    fn every_entry_follows_the_decision_rule() {
        for r in catalog() {
            let id = format!("{}/{}", r.provider, r.model);
            let evidenced = *r.evidence() != Evidence::None;
            match r.tool_update() {
                Some(ToolUpdateMode::InHistory) => assert!(
                    matches!(
                        r.evidence(),
                        Evidence::VendorDoc { .. } | Evidence::MeasuredE2e { .. }
                    ),
                    "{id}: in-history needs vendor documentation or a measured test"
                ),
                Some(ToolUpdateMode::AdditionOnly) => {
                    assert!(evidenced, "{id}: addition-only needs evidence")
                }
                None => {}
            }
            if r.system_prompt_in_history() {
                assert!(evidenced, "{id}: prompts in history need evidence");
            }
            if r.beta_always() || r.deferred_placeholder() {
                assert!(
                    r.tool_update().is_some(),
                    "{id}: beta/placeholder without a mode"
                );
            }
            if r.deferred_placeholder() {
                assert!(
                    r.deferred_section_bytes() > 0,
                    "{id}: placeholder for no section"
                );
            }
            if r.model == ANY_MODEL {
                assert_eq!(r.tool_update(), None, "{id}: a generic entry has no mode");
                assert!(!r.system_prompt_in_history(), "{id}");
            }
            match &r.evidence() {
                Evidence::VendorDoc { url, read_on } => {
                    assert!(url.starts_with("https://"), "{id}: {url}");
                    let date: Vec<_> = read_on.split('-').collect();
                    assert!(
                        date.len() == 3
                            && [4, 2, 2].iter().zip(&date).all(|(n, p)| {
                                p.len() == *n && p.bytes().all(|b| b.is_ascii_digit())
                            }),
                        "{id}: read_on {read_on} is not an ISO date"
                    );
                }
                Evidence::UpstreamDefault { reference } => {
                    assert!(reference.contains("reported, not verified here"), "{id}")
                }
                Evidence::MeasuredE2e { test } => assert!(!test.is_empty(), "{id}"),
                Evidence::None => {}
            }
        }
    }

    #[test]
    fn entries_are_unique_and_every_provider_has_a_generic_entry() {
        let mut seen = HashSet::new();
        for r in catalog() {
            assert!(
                seen.insert((&*r.provider, &*r.model)),
                "{}/{} twice",
                r.provider,
                r.model
            );
        }
        for r in catalog() {
            assert!(
                seen.contains(&(&*r.provider, ANY_MODEL)),
                "{} has no generic entry",
                r.provider
            );
        }
    }

    #[test]
    fn deepseek_entries() {
        let flash = route_for("deepseek", "deepseek-flash");
        assert_eq!(
            (
                flash.api,
                flash.tool_update(),
                flash.system_prompt_in_history()
            ),
            (WireApi::Messages, Some(ToolUpdateMode::AdditionOnly), true)
        );
        assert_eq!(
            (flash.beta_always(), flash.deferred_section_bytes()),
            (false, 0)
        );
        let Evidence::UpstreamDefault { reference } = flash.evidence() else {
            panic!("deepseek-flash rests on the upstream default");
        };
        for part in ["deepseek-harness", "0.1.7-rc.2", "bc8c0dbf40", "#4844"] {
            assert!(reference.contains(part), "{part}");
        }
        let pro = route_for("deepseek", "deepseek-v4-pro");
        assert_eq!(pro.model, "deepseek-v4-pro");
        assert_eq!(
            (pro.tool_update(), pro.system_prompt_in_history()),
            (None, false)
        );
    }

    /// The vendor's list for mid-conversation tool changes, by exact id (read 2026-12-01: the
    /// current page adds Sonnet 5.5 and Haiku 5.5), then the two models only on the
    /// prefix-check list.
    #[test]
    fn anthropic_entries_are_the_vendor_list() {
        let listed: Vec<&str> = catalog()
            .iter()
            .filter(|r| r.provider == "anthropic" && r.model != ANY_MODEL)
            .map(|r| &*r.model)
            .collect();
        let with_mode = [
            "claude-fable-5-1",
            "claude-mythos-5-1",
            "claude-fable-5",
            "claude-mythos-5",
            "claude-opus-5-5",
            "claude-opus-4-8",
            "claude-opus-5",
            "claude-sonnet-5-5",
            "claude-haiku-5-5",
        ];
        let binding_only = ["claude-fable-5-2", "claude-mythos-5-2"];
        assert_eq!(listed, [&with_mode[..], &binding_only[..]].concat());
        for model in with_mode {
            let r = route_for("anthropic", model);
            assert_eq!(r.model, model);
            assert_eq!(r.api, WireApi::Messages);
            assert_eq!(r.tool_update(), Some(ToolUpdateMode::InHistory), "{model}");
            assert!(r.system_prompt_in_history() && r.beta_always(), "{model}");
            assert!(r.deferred_section_bytes() > 0, "{model}");
            // Claude API routes: by value, so no placeholder is needed.
            assert!(
                r.inline_definitions() && !r.deferred_placeholder(),
                "{model}"
            );
            assert_eq!(
                *r.evidence(),
                Evidence::VendorDoc {
                    url: ANTHROPIC_TOOL_CHANGES_DOC.into(),
                    read_on: ANTHROPIC_TOOL_CHANGES_READ_ON.into()
                }
            );
        }
        for model in binding_only {
            let r = route_for("anthropic", model);
            assert_eq!(r.model, model);
            assert_eq!(
                r.tool_update(),
                None,
                "{model}: not on the tool-changes list"
            );
            assert!(r.binds_thinking() && !r.forced_tool_choice(), "{model}");
        }
    }

    /// [reference §6](crate::manual::reference#6-routes-catalog-decision-rule) (v4): which models
    /// bind thinking and which refuse a forced tool choice, per the vendor pages read 2026-12-01;
    /// automatic caching and no prefill on every Anthropic route.
    #[test]
    fn v4_capabilities_per_anthropic_model() {
        let binds = [
            "claude-fable-5-2",
            "claude-mythos-5-2",
            "claude-fable-5-1",
            "claude-mythos-5-1",
            "claude-opus-5-5",
            "claude-sonnet-5-5",
            "claude-haiku-5-5",
            // Unknown models: the most restrictive known behaviour (decision 87).
            ANY_MODEL,
        ];
        let refuses_forced = [
            "claude-fable-5-1",
            "claude-mythos-5-1",
            "claude-opus-5-5",
            "claude-sonnet-5-5",
            "claude-fable-5-2",
            "claude-mythos-5-2",
            ANY_MODEL,
        ];
        for r in catalog().iter().filter(|r| r.provider == "anthropic") {
            let id = &*r.model;
            assert_eq!(r.binds_thinking(), binds.contains(&id), "{id}");
            assert_eq!(
                r.forced_tool_choice(),
                !refuses_forced.contains(&id),
                "{id}"
            );
            assert!(r.auto_cache() && !r.assistant_prefill(), "{id}");
            for (flag, capability) in [
                (r.inline_definitions(), Capability::InlineDefinitions),
                (r.binds_thinking(), Capability::BindsThinking),
                (!r.forced_tool_choice(), Capability::ForcedToolChoice),
                (r.auto_cache(), Capability::AutoCache),
                (!r.assistant_prefill(), Capability::AssistantPrefill),
                (r.min_cache_tokens() > 0, Capability::MinCacheTokens),
                (r.cache_block_tokens() > 0, Capability::CacheBlockTokens),
            ] {
                let evidence = r.claim(capability);
                assert_eq!(
                    flag,
                    evidence.is_some(),
                    "{id}: {capability:?} and its evidence"
                );
                if let Some(Evidence::VendorDoc { url, read_on }) = evidence {
                    assert!(url.starts_with("https://platform.claude.com/"), "{id}");
                    assert_eq!(read_on, ANTHROPIC_V4_READ_ON, "{id}");
                } else {
                    assert!(
                        evidence.is_none(),
                        "{id}: {capability:?} needs a vendor page"
                    );
                }
            }
        }
        for r in catalog().iter().filter(|r| r.provider != "anthropic") {
            assert!(
                !r.binds_thinking() && !r.auto_cache() && !r.inline_definitions(),
                "{}/{}: DeepSeek caches by itself and binds nothing",
                r.provider,
                r.model
            );
            assert!(r.forced_tool_choice() && r.assistant_prefill());
        }
    }

    /// [reference §9](crate::manual::reference#9-prefix-cache-meter): the cache's read granularity
    /// is a vendor fact with its page: DeepSeek's documented 64-token storage unit on every
    /// DeepSeek route; on Anthropic, which documents none, the model's minimum cacheable length;
    /// nothing elsewhere.
    #[test]
    fn cache_block_tokens_rest_on_the_vendor_pages() {
        for r in catalog() {
            let id = format!("{}/{}", r.provider, r.model);
            let expected = match &*r.provider {
                "deepseek" => DEEPSEEK_CACHE_BLOCK_TOKENS,
                "anthropic" => r.min_cache_tokens(),
                "openai" => OPENAI_CACHE_BLOCK_TOKENS,
                _ => 0,
            };
            assert_eq!(r.cache_block_tokens(), expected, "{id}");
            let evidence = r.claim(Capability::CacheBlockTokens);
            assert_eq!(evidence.is_some(), expected > 0, "{id}");
            if r.provider == "deepseek" {
                assert_eq!(
                    evidence,
                    Some(&vendor(DEEPSEEK_CACHE_UNIT_DOC, DEEPSEEK_READ_ON)),
                    "{id}"
                );
            }
        }
        assert_eq!(DEEPSEEK_CACHE_BLOCK_TOKENS, 64);
    }

    #[test]
    fn impossible_combinations_are_refused_at_construction() {
        let b = || Route::builder("p", "m", WireApi::Messages);
        assert_eq!(
            b().inline_definitions(true).build(),
            Err(RouteError::InlineWithoutInHistory)
        );
        assert_eq!(
            b().tool_update(Some(ToolUpdateMode::AdditionOnly))
                .inline_definitions(true)
                .build(),
            Err(RouteError::InlineWithoutInHistory)
        );
        assert_eq!(
            b().deferred_placeholder(true).build(),
            Err(RouteError::PlaceholderWithoutMode)
        );
        assert_eq!(
            b().beta_always(true).build(),
            Err(RouteError::BetaWithoutMode)
        );
        let ok = b()
            .tool_update(Some(ToolUpdateMode::InHistory))
            .inline_definitions(true)
            .binds_thinking(true)
            .claim(
                Capability::BindsThinking,
                Evidence::MeasuredE2e { test: "t".into() },
            )
            .build()
            .unwrap();
        assert!(ok.inline_definitions() && ok.binds_thinking());
        assert_eq!(ok.claims().len(), 1);
        // Every catalog entry passes the same check.
        for r in catalog() {
            assert_eq!(r.caps.check(), Ok(()), "{}/{}", r.provider, r.model);
        }
    }

    #[test]
    fn unknown_models_get_no_mode() {
        for (provider, model, expect_provider, api) in [
            // Excluded by the vendor's page.
            (
                "anthropic",
                "claude-sonnet-5",
                "anthropic",
                WireApi::Messages,
            ),
            // Not on the vendor's list.
            (
                "anthropic",
                "claude-haiku-5",
                "anthropic",
                WireApi::Messages,
            ),
            // Another spelling is unknown (a dated snapshot resolves to its family:
            // `a_dated_anthropic_id_resolves_to_its_family`).
            (
                "anthropic",
                "claude-opus-5-2026",
                "anthropic",
                WireApi::Messages,
            ),
            ("anthropic", "Claude-Opus-5", "anthropic", WireApi::Messages),
            (
                "deepseek",
                "deepseek-flash-2",
                "deepseek",
                WireApi::Messages,
            ),
            ("deepseek", "*", "deepseek", WireApi::Messages),
            ("acme", "acme-large", OPENAI_COMPATIBLE, WireApi::OpenAiChat),
            (
                "Anthropic",
                "claude-opus-5",
                OPENAI_COMPATIBLE,
                WireApi::OpenAiChat,
            ),
            ("", "", OPENAI_COMPATIBLE, WireApi::OpenAiChat),
        ] {
            let r = route_for(provider, model);
            assert_eq!(r.tool_update(), None, "{provider}/{model}");
            assert!(
                !r.system_prompt_in_history() && !r.beta_always(),
                "{provider}/{model}"
            );
            assert_eq!(
                (&*r.provider, &*r.model, r.api),
                (expect_provider, ANY_MODEL, api)
            );
            assert_eq!(*r.evidence(), Evidence::None);
        }
    }

    /// The tables of `docs/capability-rule.md` and its Chinese twin list every entry, in
    /// catalog order, with every capability and the evidence kind of its mode; the sources of
    /// both notes cite every page an entry's evidence or claims rest on (a staleness guard: a
    /// changed entry fails here until both notes follow).
    #[test]
    fn capability_rule_docs_list_every_entry() {
        const COLUMNS: usize = 17;
        for (doc, none, yes, no) in [
            (
                include_str!("../docs/capability-rule.md"),
                "none",
                "yes",
                "no",
            ),
            (
                include_str!("../docs/capability-rule.zh.md"),
                "无",
                "是",
                "否",
            ),
        ] {
            let rows: Vec<Vec<&str>> = doc
                .lines()
                .filter(|l| l.starts_with("| `"))
                .map(|l| l.split('|').map(str::trim).collect())
                .collect();
            assert_eq!(rows.len(), catalog().len(), "one table row per entry");
            let header = doc
                .lines()
                .find(|l| l.starts_with("| provider | model |"))
                .expect("the table's header row");
            assert_eq!(header.split('|').count(), COLUMNS + 2, "{header}");
            let flag = |b: bool| if b { yes } else { no };
            for (row, r) in rows.iter().zip(catalog()) {
                let id = format!("{}/{}", r.provider, r.model);
                // `| a | … | q |` splits into an empty cell, the 17 columns, an empty cell.
                assert_eq!(row.len(), COLUMNS + 2, "{id}: {COLUMNS} columns");
                let cell = |i: usize| row[i + 1].trim_matches('`');
                // A number cell may carry a note after the figure: `512 (estimate)`.
                let number = |i: usize| {
                    let c = cell(i);
                    c[..c.find(|ch: char| !ch.is_ascii_digit()).unwrap_or(c.len())].to_owned()
                };
                let api = match r.api {
                    WireApi::Messages => "Messages",
                    WireApi::OpenAiChat => "OpenAI chat",
                    WireApi::Responses => "Responses",
                };
                let mode = r.tool_update().map_or(none, ToolUpdateMode::as_str);
                let expected = [
                    (0, r.provider.to_string()),
                    (1, r.model.to_string()),
                    (2, api.to_owned()),
                    (3, mode.to_owned()),
                    (4, flag(r.system_prompt_in_history()).to_owned()),
                    (5, flag(r.beta_always()).to_owned()),
                    (7, flag(r.deferred_placeholder()).to_owned()),
                    (8, flag(r.inline_definitions()).to_owned()),
                    (9, flag(r.binds_thinking()).to_owned()),
                    (10, flag(r.auto_cache()).to_owned()),
                    (11, flag(r.forced_tool_choice()).to_owned()),
                    (12, flag(r.assistant_prefill()).to_owned()),
                    (15, evidence_kind(r.evidence()).to_owned()),
                ];
                for (i, want) in expected {
                    assert_eq!(cell(i), want, "{id}: column {}", i + 1);
                }
                assert_eq!(number(6), r.deferred_section_bytes().to_string(), "{id}");
                assert_eq!(number(13), r.min_cache_tokens().to_string(), "{id}");
                assert_eq!(number(14), r.cache_block_tokens().to_string(), "{id}");
                assert!(!cell(16).is_empty(), "{id}: a reason");
                for evidence in r.claims().iter().map(|c| &c.evidence).chain([r.evidence()]) {
                    if let Evidence::VendorDoc { url, read_on } = evidence {
                        assert!(
                            doc.contains(&format!("<{url}>")),
                            "{id}: {url} is not cited"
                        );
                        assert!(doc.contains(&**read_on), "{id}: read {read_on}");
                    }
                }
            }
        }
    }
}
