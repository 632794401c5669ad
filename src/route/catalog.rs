//! The built-in routes: one entry per model, holding what its vendor's pages say about it
//! (capabilities, each with its evidence, the cache's minimum and unit, and prices), and the
//! lookup from a provider and model id to the entry that applies.
//!
//! The addresses and dates the entries rest on are private: the entry carries them as
//! [`Evidence`], and that is where a reader finds them ([`Route::evidence`],
//! [`Route::claims`], [`Route::price`]).

use std::borrow::Cow;

use super::{Capabilities, Capability, Claim, Evidence, Price, Route, ToolUpdateMode, WireApi};

/// Where the Anthropic entries' capabilities are documented: the vendor's page on
/// mid-conversation system messages and tool changes, which lists the models the
/// `mid-conversation-tool-changes-2026-07-01` beta works on.
const ANTHROPIC_TOOL_CHANGES_DOC: &str =
    "https://platform.claude.com/docs/en/build-with-claude/mid-conversation-system-messages";

/// The date the Anthropic model list was read (see `docs/capability-rule.md`).
const ANTHROPIC_TOOL_CHANGES_READ_ON: &str = "2026-12-01";

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
const ANTHROPIC_DEFERRED_SECTION_BYTES: u32 = 512;

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
const ANTHROPIC_PROMPT_CACHING_DOC: &str =
    "https://platform.claude.com/docs/en/build-with-claude/prompt-caching";

/// The vendor's release notes; the entry of 2026-09-22 introduces the `inline-tools-2026-09-15`
/// beta (tool definitions by value inside a `tool_addition`, "in beta on the Claude API"), on
/// the models of the mid-conversation tool-changes page.
const ANTHROPIC_INLINE_TOOLS_DOC: &str =
    "https://platform.claude.com/docs/en/release-notes/overview";

/// The vendor's page on prefix checks of signed thinking blocks, which lists the models that
/// run the check.
const ANTHROPIC_THINKING_PREFIX_DOC: &str =
    "https://platform.claude.com/docs/en/build-with-claude/preserved-thinking/prefix-checks";

/// The vendor's migration guide: "Prefilling assistant messages returns a 400 error" (from the
/// Claude 4.6 models on; every model of the catalog is newer).
const ANTHROPIC_PREFILL_DOC: &str =
    "https://platform.claude.com/docs/en/about-claude/models/migration-guide";

/// Fable 5.1 / Mythos 5.1: forced `tool_choice` returns a 400.
const ANTHROPIC_FABLE_5_1_DOC: &str =
    "https://platform.claude.com/docs/en/models/fable-5-1/whats-new-fable-5-1";

/// Sonnet 5.5: "Forced tool use returns an error."
const ANTHROPIC_SONNET_5_5_DOC: &str =
    "https://platform.claude.com/docs/en/models/sonnet-5-5/whats-new-sonnet-5-5";

/// Fable 5.2 / Mythos 5.2: the changes from 5.1 (none lifts the forced tool choice refusal).
const ANTHROPIC_FABLE_5_2_DOC: &str =
    "https://platform.claude.com/docs/en/models/fable-5-2/whats-new-fable-5-2";

/// The date the v4 capability pages were read (see `docs/capability-rule.md`).
const ANTHROPIC_V4_READ_ON: &str = "2026-12-01";

/// DeepSeek's announcement of context caching (2024-08-02): "The cache system uses 64 tokens
/// as a storage unit; content less than 64 tokens will not be cached." The current guide
/// (<https://api-docs.deepseek.com/guides/kv_cache>, read 2026-12-01: caching is on by
/// default, a hit needs a request to match a whole persisted "cache prefix unit", on a
/// "best-effort" basis) says units are also carved "at fixed token intervals" without
/// giving the interval, so the announcement's figure is the one documented.
const DEEPSEEK_CACHE_UNIT_DOC: &str = "https://api-docs.deepseek.com/news/news0802";

/// The date the DeepSeek caching pages were read.
const DEEPSEEK_READ_ON: &str = "2026-12-01";

/// DeepSeek's documented cache storage unit, in tokens ([`DEEPSEEK_CACHE_UNIT_DOC`]).
pub(crate) const DEEPSEEK_CACHE_BLOCK_TOKENS: u32 = 64;

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
        price: None,
    }
}

/// OpenAI's API reference for `POST /v1/responses` (the create-response page, read through
/// the vendor's rendered references of 2026-12): `input` items, `instructions` ("a system (or
/// developer) message inserted into the model's context"), `tools`, `tool_choice`,
/// `parallel_tool_calls`, `store`, `include` (`reasoning.encrypted_content`),
/// `prompt_cache_key` ("used by OpenAI to cache responses for similar requests to optimize
/// your cache hit rates") and `prompt_cache_retention` (`in_memory` or `24h`).
const OPENAI_RESPONSES_DOC: &str =
    "https://developers.openai.com/api/reference/resources/responses/methods/create";

/// OpenAI's tool-search guide: "Only gpt-5.4 and later models support tool_search", and tools
/// discovered mid-conversation "are injected at the end of the context window" so that the
/// cache is kept. The only vendor page on tools arriving mid-conversation; it names the models.
/// The item that carries them is described by OpenAI's OpenAPI document, as rendered by the
/// `openai-client-base` 0.14.0 crate
/// (<https://docs.rs/crate/openai-client-base/0.14.0/source/docs/AdditionalToolsItemParam.md>:
/// `type: "additional_tools"`, `role`: "Only `developer` is supported", `tools`: "A list of
/// additional tools made available at this item", optional `id`; 0.16.0 names it
/// `BetaAdditionalToolsItemParam`). It describes additions only: no input item takes a tool
/// away. The models: OpenAI's "Using GPT-5.4" guide
/// (<https://developers.openai.com/api/docs/guides/latest-model?model=gpt-5.4>) names the
/// family `gpt-5.4`, `gpt-5.4-pro`, `gpt-5.4-mini` and `gpt-5.4-nano`.
const OPENAI_TOOL_SEARCH_DOC: &str =
    "https://developers.openai.com/api/docs/guides/tools-tool-search";

/// GPT-5.4's prices: its model page ("Text tokens, per 1M tokens: Input $2.50, Cached input
/// $0.25, Output $15.00"; prompts over 272K input tokens are priced at 2x input for the whole
/// session, which the meter's estimate leaves out), read 2026-12-07 ([decision
/// 144](crate::manual::decisions#decision-144)). Cache writes are free before the GPT-5.6
/// family (the prompt-caching guide).
const GPT_5_4_PRICE: Usd = Usd {
    input: 2.5,
    read: 0.25,
    page: "https://developers.openai.com/api/docs/models/gpt-5.4",
    read_on: "2026-12-07",
};

/// The date the OpenAI pages were read.
const OPENAI_READ_ON: &str = "2026-12-06";

/// OpenAI's documented minimum cacheable prompt ("enabled automatically for prompts that are
/// 1024 tokens or longer", the prompt-caching guide).
pub(crate) const OPENAI_MIN_CACHE_TOKENS: u32 = 1024;

/// OpenAI's cache-hit increment, in tokens (the prompt-caching guide, as the vendor's "Prompt
/// Caching 201" cookbook quotes it: "cache hits occurring in increments of 128 tokens").
pub(crate) const OPENAI_CACHE_BLOCK_TOKENS: u32 = 128;

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
const fn openai(model: &'static str, additions: bool, price: Option<Usd>) -> Route {
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
        // The prompt-caching guide: "Cache writes have no additional fee on models before the
        // GPT-5.6 family" (read 2026-12-07).
        price: priced_usd(price, 1.0),
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
    /// Input and cache-read prices from the vendor's pricing page, where it gives them.
    price: Option<Usd>,
}

/// `price` as a [`Price`], new input written to the cache billed at `write` × input.
const fn priced_usd(price: Option<Usd>, write: f64) -> Option<Price> {
    match price {
        Some(p) => Some(
            Price::usd(p.input, p.read, vendor(p.page, p.read_on))
                .with_cache_write_multiplier(write),
        ),
        None => None,
    }
}

/// Input and cache-read prices in US dollars per million tokens, and the page that gives them
/// (plain `Copy` data, so that the entries' `const` helpers can pass it along).
#[derive(Clone, Copy)]
struct Usd {
    input: f64,
    read: f64,
    page: &'static str,
    read_on: &'static str,
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
        // The pricing page gives every model a 5-minute cache write at 1.25 × input.
        price: match m.price {
            Some(p) => Some(
                Price::usd(p.input, p.read, vendor(p.page, p.read_on))
                    .with_cache_write_multiplier(1.25),
            ),
            None => None,
        },
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
        price: None,
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

/// The vendor's pricing page for Claude models: input, cache-write and cache-read prices per
/// model. Cache reads are 0.1× input on most models, 0.025× on Fable 5.1 / Mythos 5.1 and
/// 0.05× on Opus 5.5 and Sonnet 5.5.
const ANTHROPIC_PRICING_DOC: &str = "https://platform.claude.com/docs/en/about-claude/pricing";

/// Opus 5.5's overview page, which gives its prices.
const ANTHROPIC_OPUS_5_5_PRICE_DOC: &str =
    "https://platform.claude.com/docs/en/models/opus-5-5/overview";

/// The date the prices were read.
const ANTHROPIC_PRICES_READ_ON: &str = "2026-12-01";

/// Sonnet 5.5's cache reads were cut from $0.20 to $0.10 (0.05×) on 2026-10-07. The stored
/// copies of the vendor's pages read on 2026-12-06 do not show the row (the pricing page's copy
/// stops before it; the model page's translated copies still say $0.20, from before the cut);
/// the figure is the one every tracker re-reading the live pricing page reports from 2026-10-09
/// on ([decision 132](crate::manual::decisions#decision-132)).
const SONNET_5_5_CACHE_READ_CUT_READ_ON: &str = "2026-12-06";

/// `m` with the prices the pricing page gives (USD per million tokens), read on
/// [`ANTHROPIC_PRICES_READ_ON`].
const fn priced(m: AnthropicModel, input: f64, read: f64) -> AnthropicModel {
    priced_on(
        m,
        input,
        read,
        ANTHROPIC_PRICING_DOC,
        ANTHROPIC_PRICES_READ_ON,
    )
}

/// `m` with prices given by `page`, read on `read_on`.
const fn priced_on(
    m: AnthropicModel,
    input: f64,
    read: f64,
    page: &'static str,
    read_on: &'static str,
) -> AnthropicModel {
    AnthropicModel {
        price: Some(Usd {
            input,
            read,
            page,
            read_on,
        }),
        ..m
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
        price: None,
    },
    deepseek("deepseek-v4-pro"),
    // The models the vendor lists for mid-conversation tool changes, by exact API id.
    anthropic(
        "claude-fable-5-1",
        priced(
            newest(claims![
                InlineDefinitions => ANTHROPIC_INLINE_TOOLS_DOC,
                BindsThinking => ANTHROPIC_THINKING_PREFIX_DOC,
                ForcedToolChoice => ANTHROPIC_FABLE_5_1_DOC,
            ]),
            10.0,
            0.25,
        ),
    ),
    anthropic(
        "claude-mythos-5-1",
        priced(
            newest(claims![
                InlineDefinitions => ANTHROPIC_INLINE_TOOLS_DOC,
                BindsThinking => ANTHROPIC_THINKING_PREFIX_DOC,
                ForcedToolChoice => ANTHROPIC_FABLE_5_1_DOC,
            ]),
            10.0,
            0.25,
        ),
    ),
    anthropic(
        "claude-fable-5",
        priced(
            listed(claims![InlineDefinitions => ANTHROPIC_INLINE_TOOLS_DOC]),
            10.0,
            1.0,
        ),
    ),
    anthropic(
        "claude-mythos-5",
        priced(
            listed(claims![InlineDefinitions => ANTHROPIC_INLINE_TOOLS_DOC]),
            10.0,
            1.0,
        ),
    ),
    anthropic(
        "claude-opus-5-5",
        priced_on(
            newest(claims![
                InlineDefinitions => ANTHROPIC_INLINE_TOOLS_DOC,
                BindsThinking => ANTHROPIC_THINKING_PREFIX_DOC,
                ForcedToolChoice => ANTHROPIC_INLINE_TOOLS_DOC,
            ]),
            4.0,
            0.2,
            ANTHROPIC_OPUS_5_5_PRICE_DOC,
            ANTHROPIC_PRICES_READ_ON,
        ),
    ),
    anthropic(
        "claude-opus-4-8",
        priced(
            AnthropicModel {
                min_cache_tokens: 1024,
                ..listed(claims![InlineDefinitions => ANTHROPIC_INLINE_TOOLS_DOC])
            },
            5.0,
            0.5,
        ),
    ),
    anthropic(
        "claude-opus-5",
        priced(
            listed(claims![InlineDefinitions => ANTHROPIC_INLINE_TOOLS_DOC]),
            5.0,
            0.5,
        ),
    ),
    anthropic(
        "claude-sonnet-5-5",
        priced_on(
            newest(claims![
                InlineDefinitions => ANTHROPIC_INLINE_TOOLS_DOC,
                BindsThinking => ANTHROPIC_THINKING_PREFIX_DOC,
                ForcedToolChoice => ANTHROPIC_SONNET_5_5_DOC,
            ]),
            2.0,
            0.1,
            ANTHROPIC_PRICING_DOC,
            SONNET_5_5_CACHE_READ_CUT_READ_ON,
        ),
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
    openai("gpt-5.4", true, Some(GPT_5_4_PRICE)),
    openai("gpt-5.4-pro", true, None),
    openai("gpt-5.4-mini", true, None),
    openai("gpt-5.4-nano", true, None),
    // GPT-5.6 Sol and the alias its page documents (decision 144): later than GPT-5.4, so
    // named by the tool-search guide. Its model page
    // (<https://developers.openai.com/api/docs/models/gpt-5.6-sol>, read 2026-12-07 in the
    // vendor's Japanese and Portuguese renderings): "the flagship model of the GPT-5.6 family",
    // served on `v1/responses` and `v1/chat/completions`; "the gpt-5.6 alias routes requests
    // to GPT-5.6 Sol"; cache writes billed at 1.25x the uncached input rate; its prices are a
    // promotion "at least until 2026-11-21", past, so no price. Terra and Luna: no page read,
    // the generic entry.
    openai("gpt-5.6-sol", true, None),
    openai("gpt-5.6", true, None),
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
        price: None,
    },
    // An unknown OpenAI model: the Responses API, no mode (additions only where a page names
    // the model), the vendor-wide cache facts and `prompt_cache_key`.
    openai(ANY_MODEL, false, None),
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
                include_str!("../../docs/capability-rule.md"),
                "none",
                "yes",
                "no",
            ),
            (
                include_str!("../../docs/capability-rule.zh.md"),
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
                let price = r.price().map(|p| &p.evidence);
                for evidence in r
                    .claims()
                    .iter()
                    .map(|c| &c.evidence)
                    .chain([r.evidence()])
                    .chain(price)
                {
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

    /// Every price rests on a vendor page, and the notes' price lists (en, zh) say exactly the
    /// catalog's figures: an entry whose price changes fails here until both notes follow.
    #[test]
    fn prices_rest_on_a_vendor_page_and_the_notes_list_them() {
        let en = include_str!("../../docs/capability-rule.md");
        let zh = include_str!("../../docs/capability-rule.zh.md");
        let listed = |doc: &str| {
            doc.lines()
                .filter(|l| l.starts_with("- `") && (l.contains(": $") || l.contains("：输入 $")))
                .count()
        };
        let mut priced = 0;
        for r in catalog() {
            let Some(p) = r.price() else { continue };
            priced += 1;
            let id = format!("{}/{}", r.provider, r.model);
            let Evidence::VendorDoc { url, read_on } = &p.evidence else {
                panic!("{id}: a price without a vendor page");
            };
            assert!(
                p.cache_read_per_mtok < p.input_per_mtok,
                "{id}: a read costs less"
            );
            assert_eq!(&*p.currency, "USD", "{id}");
            let (input, read, write) = (
                p.input_per_mtok,
                p.cache_read_per_mtok,
                p.cache_write_multiplier,
            );
            let (write_en, write_zh) = if write == 1.0 {
                ("cache writes free".to_owned(), "缓存写入免费".to_owned())
            } else {
                (
                    format!("cache write {write}× input"),
                    format!("缓存写入为输入的 {write} 倍"),
                )
            };
            let line = format!(
                "- `{}`: ${input} input, ${read} cache read, {write_en}; <{url}>, read {read_on}",
                r.model
            );
            assert!(en.lines().any(|l| l == line), "{id}: {line}");
            let line = format!(
                "- `{}`：输入 ${input}，缓存读取 ${read}，{write_zh}；<{url}>，{read_on} 阅读",
                r.model
            );
            assert!(zh.lines().any(|l| l == line), "{id}: {line}");
        }
        assert_eq!(listed(en), priced, "one line per priced entry");
        assert_eq!(listed(zh), priced, "one line per priced entry (zh)");
        assert!(priced >= 9);
    }
}
