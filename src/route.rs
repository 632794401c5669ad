//! Routes: what one provider endpoint and model accept ([reference
//! §6](crate::manual::reference#6-routes-catalog-decision-rule)).
//!
//! A route only supplies capabilities; the configuration that is logged comes from the loop.
//! Every built-in entry carries the evidence its capabilities rest on, and the decision rule
//! in `docs/capability-rule.md` says which evidence buys which mode.

use std::borrow::Cow;

mod admission;
mod catalog;
mod price;
pub(crate) use admission::has_object_root;
pub use admission::{ToolRefusal, ToolRefused};
pub use catalog::{ANY_MODEL, OPENAI_COMPATIBLE, catalog, route_for};
pub(crate) use catalog::{
    DEEPSEEK_CACHE_BLOCK_TOKENS, OPENAI_CACHE_BLOCK_TOKENS, OPENAI_MIN_CACHE_TOKENS, undated,
};
pub use price::Price;

use serde::{Deserialize, Serialize};

/// How a route takes tool changes in history ([reference
/// §5](crate::manual::reference#5-projection-project_tool_updates)). `None` where a route has no
/// mode.
///
/// ```
/// use mektpoy::route::ToolUpdateMode;
/// use mektpoy::route_for;
/// assert_eq!(route_for("anthropic", "claude-fable-5-1").tool_update(), Some(ToolUpdateMode::InHistory));
/// assert_eq!(route_for("deepseek", "deepseek-flash").tool_update(), Some(ToolUpdateMode::AdditionOnly));
/// assert_eq!(route_for("deepseek", "deepseek-v4-pro").tool_update(), None);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ToolUpdateMode {
    /// Additions of deferred declarations *and* removals are accepted in history and keep
    /// the cached prefix: removed definitions stay declared, removal blocks are sent.
    InHistory,
    /// Additions are accepted, removals are not: declarations of names that left the
    /// effective set are dropped, and so are removal blocks.
    AdditionOnly,
}

/// Spelling a mode.
///
/// ```
/// use mektpoy::route::ToolUpdateMode;
/// assert_eq!(ToolUpdateMode::AdditionOnly.as_str(), "addition-only");
/// ```
impl ToolUpdateMode {
    /// The JSON spelling (`"in-history"`, `"addition-only"`).
    ///
    /// ```
    /// use mektpoy::route::ToolUpdateMode;
    /// assert_eq!(ToolUpdateMode::InHistory.as_str(), "in-history");
    /// assert_eq!(serde_json::to_string(&ToolUpdateMode::AdditionOnly)?, r#""addition-only""#);
    /// # Ok::<(), serde_json::Error>(())
    /// ```
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
///
/// ```
/// use mektpoy::route::WireApi;
/// use mektpoy::route_for;
/// assert_eq!(route_for("anthropic", "claude-opus-5").api, WireApi::Messages);
/// assert_eq!(route_for("openai", "gpt-5.4").api, WireApi::Responses);
/// assert_eq!(route_for("acme", "acme-1").api, WireApi::OpenAiChat);
/// ```
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
///
/// ```
/// use mektpoy::route::Evidence;
/// use mektpoy::route_for;
/// match route_for("anthropic", "claude-fable-5-1").evidence() {
///     Evidence::VendorDoc { url, read_on } => {
///         assert!(url.starts_with("https://platform.claude.com/"));
///         assert_eq!(read_on, "2026-12-01");
///     }
///     other => panic!("{other:?}"),
/// }
/// // An unknown model claims nothing.
/// assert_eq!(route_for("acme", "acme-1").evidence(), &Evidence::None);
/// ```
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
///
/// ```
/// use mektpoy::route::{ToolUpdateMode, WireApi};
/// use mektpoy::route_for;
/// let route = route_for("deepseek", "deepseek-flash");
/// assert_eq!((&*route.provider, &*route.model), ("deepseek", "deepseek-flash"));
/// assert_eq!(route.api, WireApi::Messages);
/// assert_eq!(route.tool_update(), Some(ToolUpdateMode::AdditionOnly));
/// ```
#[derive(Clone, Debug, PartialEq)]
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
    /// The vendor's published prices, where a page gives them.
    price: Option<Price>,
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
///
/// ```
/// use mektpoy::route::{Capability, Evidence};
/// use mektpoy::route_for;
/// let fable = route_for("anthropic", "claude-fable-5-1");
/// assert!(matches!(fable.claim(Capability::BindsThinking), Some(Evidence::VendorDoc { .. })));
/// assert_eq!(route_for("deepseek", "deepseek-flash").claim(Capability::BindsThinking), None);
/// ```
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
///
/// ```
/// use mektpoy::route::Capability;
/// use mektpoy::route_for;
/// let route = route_for("deepseek", "deepseek-flash");
/// let claims = route.claims();
/// assert_eq!(claims.len(), 1);
/// assert_eq!(claims[0].capability, Capability::CacheBlockTokens);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Claim {
    /// The capability.
    pub capability: Capability,
    /// What it rests on.
    pub evidence: Evidence,
}

/// A capability combination no provider accepts ([reference
/// §6](crate::manual::reference#6-routes-catalog-decision-rule)).
///
/// ```
/// use mektpoy::route::{RouteError, WireApi};
/// use mektpoy::Route;
/// let refused = Route::builder("acme", "m", WireApi::Messages).beta_always(true).build();
/// assert_eq!(refused.unwrap_err(), RouteError::BetaWithoutMode);
/// ```
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

/// Building a route and reading its capabilities.
///
/// ```
/// use mektpoy::route::{ToolUpdateMode, WireApi};
/// use mektpoy::Route;
/// let route = Route::builder("acme", "acme-1", WireApi::Messages)
///     .tool_update(Some(ToolUpdateMode::AdditionOnly))
///     .build()?;
/// assert_eq!((route.tool_update(), route.auto_cache()), (Some(ToolUpdateMode::AdditionOnly), false));
/// # Ok::<(), mektpoy::route::RouteError>(())
/// ```
impl Route {
    /// A route with no mode, no prompts in history and no evidence: what an unknown model
    /// gets. The fallback is always correct, only dearer.
    /// `const`, for built-in tables; [`Route::new`] takes runtime strings.
    ///
    /// ```
    /// use mektpoy::route::WireApi;
    /// use mektpoy::Route;
    /// const FALLBACK: Route = Route::plain("acme", "acme-1", WireApi::OpenAiChat);
    /// assert_eq!(FALLBACK.tool_update(), None);
    /// assert!(FALLBACK.forced_tool_choice() && FALLBACK.assistant_prefill());
    /// ```
    pub const fn plain(provider: &'static str, model: &'static str, api: WireApi) -> Self {
        Route {
            provider: Cow::Borrowed(provider),
            model: Cow::Borrowed(model),
            api,
            caps: Capabilities::PLAIN,
            evidence: Evidence::None,
            claims: Cow::Borrowed(&[]),
            price: None,
        }
    }

    /// A route with no mode, no prompts in history and no evidence, for a provider and model
    /// known only at run time (read from a configuration file, say). Claim capabilities with
    /// [`Route::builder`], with the evidence they rest on.
    ///
    /// ```
    /// use mektpoy::route::WireApi;
    /// use mektpoy::Route;
    /// let model = String::from("acme-2"); // read from a configuration file, say
    /// let route = Route::new("acme", model, WireApi::OpenAiChat);
    /// assert_eq!(route.model, "acme-2");
    /// assert_eq!(route.tool_update(), None);
    /// assert!(route.claims().is_empty());
    /// ```
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
    ///
    /// ```
    /// use mektpoy::route_for;
    /// // The catalog entry, with automatic caching turned off.
    /// let route = route_for("anthropic", "claude-fable-5-1").into_builder().auto_cache(false).build()?;
    /// assert!(!route.auto_cache());
    /// assert!(route.binds_thinking(), "the rest is the entry's");
    /// # Ok::<(), mektpoy::route::RouteError>(())
    /// ```
    pub fn into_builder(self) -> RouteBuilder {
        RouteBuilder(self)
    }

    /// Tool-update mode; `None` = changes rewrite the declarations.
    ///
    /// ```
    /// use mektpoy::route::ToolUpdateMode;
    /// use mektpoy::route_for;
    /// assert_eq!(route_for("openai", "gpt-5.4").tool_update(), Some(ToolUpdateMode::AdditionOnly));
    /// assert_eq!(route_for("acme", "acme-1").tool_update(), None);
    /// ```
    pub fn tool_update(&self) -> Option<ToolUpdateMode> {
        self.caps.tool_update
    }

    /// Whether prompt updates may be appended to history as system nodes ([reference
    /// §4.1](crate::manual::reference#41-system-prompt-in-history)).
    ///
    /// ```
    /// use mektpoy::route_for;
    /// assert!(route_for("deepseek", "deepseek-flash").system_prompt_in_history());
    /// assert!(!route_for("deepseek", "deepseek-v4-pro").system_prompt_in_history());
    /// ```
    pub fn system_prompt_in_history(&self) -> bool {
        self.caps.system_prompt_in_history
    }

    /// Whether the tool-change beta header goes on every request.
    ///
    /// ```
    /// use mektpoy::route_for;
    /// assert!(route_for("anthropic", "claude-fable-5-1").beta_always());
    /// assert!(!route_for("deepseek", "deepseek-flash").beta_always());
    /// ```
    pub fn beta_always(&self) -> bool {
        self.caps.beta_always
    }

    /// Bytes the provider's deferred-tools section adds to the cached prefix ([reference
    /// §9](crate::manual::reference#9-prefix-cache-meter)).
    ///
    /// ```
    /// use mektpoy::route_for;
    /// assert_eq!(route_for("anthropic", "claude-fable-5-1").deferred_section_bytes(), 512);
    /// assert_eq!(route_for("deepseek", "deepseek-flash").deferred_section_bytes(), 0);
    /// ```
    pub fn deferred_section_bytes(&self) -> u32 {
        self.caps.deferred_section_bytes
    }

    /// Whether the serializer appends the reserved deferred placeholder ([reference
    /// §7](crate::manual::reference#7-wire-serialization)).
    ///
    /// ```
    /// use mektpoy::route::{ToolUpdateMode, WireApi};
    /// use mektpoy::{Route, route_for};
    /// assert!(!route_for("anthropic", "claude-fable-5-1").deferred_placeholder());
    /// let route = Route::builder("acme", "m", WireApi::Messages)
    ///     .tool_update(Some(ToolUpdateMode::InHistory))
    ///     .deferred_placeholder(true)
    ///     .build()?;
    /// assert!(route.deferred_placeholder());
    /// # Ok::<(), mektpoy::route::RouteError>(())
    /// ```
    pub fn deferred_placeholder(&self) -> bool {
        self.caps.deferred_placeholder
    }

    /// Whether additions and redefinitions may carry their definition by value
    /// (`inline-tools-2026-09-15`): the projection of [reference
    /// §5.1](crate::manual::reference#51-projection-on-inline-definition-routes), the by-value
    /// snapshot.
    ///
    /// ```
    /// use mektpoy::route_for;
    /// assert!(route_for("anthropic", "claude-fable-5-1").inline_definitions());
    /// assert!(!route_for("deepseek", "deepseek-flash").inline_definitions());
    /// ```
    pub fn inline_definitions(&self) -> bool {
        self.caps.inline_definitions
    }

    /// Whether the provider checks signed thinking blocks against the conversation before
    /// them, so that a rewrite before one is refused unless the thinking policy acts.
    ///
    /// ```
    /// use mektpoy::route_for;
    /// assert!(route_for("anthropic", "claude-fable-5-1").binds_thinking());
    /// assert!(!route_for("deepseek", "deepseek-flash").binds_thinking());
    /// ```
    pub fn binds_thinking(&self) -> bool {
        self.caps.binds_thinking
    }

    /// Whether the provider caches only when asked: the serializer adds automatic
    /// `cache_control` ([reference §7](crate::manual::reference#7-wire-serialization)).
    ///
    /// ```
    /// use mektpoy::route_for;
    /// assert!(route_for("anthropic", "claude-fable-5-1").auto_cache());
    /// assert!(!route_for("deepseek", "deepseek-flash").auto_cache(), "DeepSeek caches by default");
    /// ```
    pub fn auto_cache(&self) -> bool {
        self.caps.auto_cache
    }

    /// Whether a forced `tool_choice` (`any` / `tool`) is accepted.
    ///
    /// ```
    /// use mektpoy::route_for;
    /// assert!(!route_for("anthropic", "claude-fable-5-1").forced_tool_choice());
    /// assert!(route_for("deepseek", "deepseek-flash").forced_tool_choice());
    /// ```
    pub fn forced_tool_choice(&self) -> bool {
        self.caps.forced_tool_choice
    }

    /// Whether a request may end with an assistant turn (prefill).
    ///
    /// ```
    /// use mektpoy::route_for;
    /// assert!(!route_for("anthropic", "claude-fable-5-1").assistant_prefill());
    /// assert!(route_for("deepseek", "deepseek-flash").assistant_prefill());
    /// ```
    pub fn assistant_prefill(&self) -> bool {
        self.caps.assistant_prefill
    }

    /// The shortest prefix, in tokens, the provider caches (0 where none is documented): the
    /// meter counts no cache read below it.
    ///
    /// ```
    /// use mektpoy::route_for;
    /// assert_eq!(route_for("anthropic", "claude-fable-5-1").min_cache_tokens(), 512);
    /// assert_eq!(route_for("openai", "gpt-5.4").min_cache_tokens(), 1024);
    /// ```
    pub fn min_cache_tokens(&self) -> u32 {
        self.caps.min_cache_tokens
    }

    /// The granularity, in tokens, of the provider's cache read (0 where the route claims none): a
    /// measured read may fall short of the meter's estimate by up to one block before the meter
    /// flags the request ([reference §9](crate::manual::reference#9-prefix-cache-meter)). Only the
    /// meter reads it.
    ///
    /// ```
    /// use mektpoy::route_for;
    /// assert_eq!(route_for("deepseek", "deepseek-flash").cache_block_tokens(), 64);
    /// assert_eq!(route_for("openai", "gpt-5.4").cache_block_tokens(), 128);
    /// ```
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
    ///
    /// ```
    /// use mektpoy::route_for;
    /// assert!(route_for("openai", "gpt-5.4").prompt_cache_key());
    /// assert!(!route_for("anthropic", "claude-fable-5-1").prompt_cache_key());
    /// ```
    pub fn prompt_cache_key(&self) -> bool {
        self.caps.prompt_cache_key
    }

    /// What the tool-update mode and prompts in history rest on.
    ///
    /// ```
    /// use mektpoy::route::Evidence;
    /// use mektpoy::route_for;
    /// let evidence = route_for("deepseek", "deepseek-flash").evidence().clone();
    /// assert!(matches!(evidence, Evidence::UpstreamDefault { .. }));
    /// ```
    pub fn evidence(&self) -> &Evidence {
        &self.evidence
    }

    /// The evidence of each v4 capability this route claims.
    ///
    /// ```
    /// use mektpoy::route::Capability;
    /// use mektpoy::route_for;
    /// let route = route_for("openai", "gpt-5.4");
    /// let claimed: Vec<Capability> = route.claims().iter().map(|c| c.capability).collect();
    /// assert!(claimed.contains(&Capability::PromptCacheKey));
    /// ```
    pub fn claims(&self) -> &[Claim] {
        &self.claims
    }

    /// What the model's tokens cost, as the vendor's pricing page gave it on the date its
    /// evidence names; `None` where no page read gave a price (the meter then shows tokens
    /// only). Set on a built route with [`RouteBuilder::price`].
    ///
    /// ```
    /// use mektpoy::route_for;
    /// let opus = route_for("anthropic", "claude-opus-5-5");
    /// let p = opus.price().unwrap();
    /// assert_eq!((p.input_per_mtok, p.cache_read_per_mtok), (4.0, 0.2));
    /// let sonnet = route_for("anthropic", "claude-sonnet-5-5");
    /// assert_eq!(sonnet.price().unwrap().cache_read_per_mtok, 0.1, "since 2026-10-07");
    /// assert!(route_for("deepseek", "deepseek-flash").price().is_none());
    /// ```
    pub fn price(&self) -> Option<&Price> {
        self.price.as_ref()
    }

    /// The evidence `capability` rests on, if the route claims it.
    ///
    /// ```
    /// use mektpoy::route::{Capability, Evidence};
    /// use mektpoy::route_for;
    /// let route = route_for("openai", "gpt-5.4");
    /// assert!(matches!(route.claim(Capability::MinCacheTokens), Some(Evidence::VendorDoc { .. })));
    /// assert_eq!(route.claim(Capability::BindsThinking), None);
    /// ```
    pub fn claim(&self, capability: Capability) -> Option<&Evidence> {
        self.claims
            .iter()
            .find(|c| c.capability == capability)
            .map(|c| &c.evidence)
    }
}

/// Builds a [`Route`] whose capabilities are valid together.
///
/// ```
/// use mektpoy::route::{ToolUpdateMode, WireApi};
/// use mektpoy::Route;
/// let route = Route::builder("acme", "m", WireApi::Messages)
///     .tool_update(Some(ToolUpdateMode::InHistory))
///     .inline_definitions(true)
///     .build()?;
/// assert!(route.inline_definitions());
/// # Ok::<(), mektpoy::route::RouteError>(())
/// ```
#[derive(Clone, Debug)]
#[must_use]
pub struct RouteBuilder(Route);

/// Each setter's doc example sets `$example` on a mode route and reads it back.
macro_rules! setters {
    ($($(#[$doc:meta])* $name:ident: $ty:ty = $example:literal,)*) => {
        $(
            $(#[$doc])*
            ///
            /// ```
            /// use mektpoy::Route;
            /// use mektpoy::route::{ToolUpdateMode, WireApi};
            /// let route = Route::builder("acme", "m", WireApi::Messages)
            ///     .tool_update(Some(ToolUpdateMode::InHistory))
            #[doc = concat!("    .", stringify!($name), "(", $example, ")")]
            ///     .build()?;
            #[doc = concat!("assert_eq!(route.", stringify!($name), "(), ", $example, ");")]
            /// # Ok::<(), mektpoy::route::RouteError>(())
            /// ```
            pub fn $name(mut self, value: $ty) -> Self {
                self.0.caps.$name = value;
                self
            }
        )*
    };
}

/// Setting a route's capabilities.
///
/// ```
/// use mektpoy::route::{Capability, Evidence, WireApi};
/// use mektpoy::Route;
/// let route = Route::builder("acme", "acme-1", WireApi::OpenAiChat)
///     .prompt_cache_key(true)
///     .claim(Capability::PromptCacheKey, Evidence::MeasuredE2e { test: "acme_live::key".into() })
///     .build()?;
/// assert!(route.prompt_cache_key() && route.claim(Capability::PromptCacheKey).is_some());
/// # Ok::<(), mektpoy::route::RouteError>(())
/// ```
impl RouteBuilder {
    setters! {
        /// See [`Route::tool_update`].
        tool_update: Option<ToolUpdateMode> = "Some(ToolUpdateMode::AdditionOnly)",
        /// See [`Route::system_prompt_in_history`].
        system_prompt_in_history: bool = "true",
        /// See [`Route::beta_always`].
        beta_always: bool = "true",
        /// See [`Route::deferred_section_bytes`].
        deferred_section_bytes: u32 = "512",
        /// See [`Route::deferred_placeholder`].
        deferred_placeholder: bool = "true",
        /// See [`Route::inline_definitions`].
        inline_definitions: bool = "true",
        /// See [`Route::binds_thinking`].
        binds_thinking: bool = "true",
        /// See [`Route::auto_cache`].
        auto_cache: bool = "true",
        /// See [`Route::forced_tool_choice`].
        forced_tool_choice: bool = "false",
        /// See [`Route::assistant_prefill`].
        assistant_prefill: bool = "false",
        /// See [`Route::min_cache_tokens`].
        min_cache_tokens: u32 = "1024",
        /// See [`Route::cache_block_tokens`].
        cache_block_tokens: u32 = "128",
        /// See [`Route::prompt_cache_key`].
        prompt_cache_key: bool = "true",
    }

    /// What the mode and prompts in history rest on.
    ///
    /// ```
    /// use mektpoy::route::{Evidence, WireApi};
    /// use mektpoy::Route;
    /// let route = Route::builder("acme", "m", WireApi::OpenAiChat)
    ///     .evidence(Evidence::MeasuredE2e { test: "acme_live::tools".into() })
    ///     .build()?;
    /// assert!(matches!(route.evidence(), Evidence::MeasuredE2e { test } if test == "acme_live::tools"));
    /// # Ok::<(), mektpoy::route::RouteError>(())
    /// ```
    pub fn evidence(mut self, evidence: Evidence) -> Self {
        self.0.evidence = evidence;
        self
    }

    /// The model's prices (see [`Route::price`]); `None` removes them.
    ///
    /// ```
    /// use mektpoy::route_for;
    /// let unpriced = route_for("anthropic", "claude-opus-5-5").into_builder().price(None).build()?;
    /// assert!(unpriced.price().is_none());
    /// # Ok::<(), mektpoy::route::RouteError>(())
    /// ```
    pub fn price(mut self, price: Option<Price>) -> Self {
        self.0.price = price;
        self
    }

    /// Adds (or replaces) the evidence of one capability.
    ///
    /// ```
    /// use mektpoy::route::{Capability, Evidence, WireApi};
    /// use mektpoy::Route;
    /// let test = Evidence::MeasuredE2e { test: "acme_live::prefill".into() };
    /// let route = Route::builder("acme", "m", WireApi::OpenAiChat)
    ///     .assistant_prefill(false)
    ///     .claim(Capability::AssistantPrefill, test.clone())
    ///     .build()?;
    /// assert_eq!(route.claim(Capability::AssistantPrefill), Some(&test));
    /// # Ok::<(), mektpoy::route::RouteError>(())
    /// ```
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
    /// ```
    /// use mektpoy::route::{RouteError, ToolUpdateMode, WireApi};
    /// use mektpoy::Route;
    /// let builder = Route::builder("acme", "m", WireApi::Messages).inline_definitions(true);
    /// assert_eq!(builder.clone().build().unwrap_err(), RouteError::InlineWithoutInHistory);
    /// let route = builder.tool_update(Some(ToolUpdateMode::InHistory)).build()?;
    /// assert!(route.inline_definitions());
    /// # Ok::<(), mektpoy::route::RouteError>(())
    /// ```
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
