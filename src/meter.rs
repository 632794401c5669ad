//! The prefix-cache meter ([reference §9](crate::manual::reference#9-prefix-cache-meter)): how much
//! of each request a provider could serve from its prefix cache, and the best any client could have
//! done.
//!
//! The meter reads wire bodies, not the log, so it measures exactly the bytes sent. It cuts a body
//! into segments in the provider's caching order — each non-deferred tool, a fixed deferred-tools
//! section when any declaration is deferred, `system`, each message — and reads the concatenation
//! against a model of the provider's cache, per vendor ([decision
//! 90](crate::manual::decisions#decision-90)): on Anthropic, entries written at breakpoints and
//! read at the 20-block lookback, from the model's minimum length; on DeepSeek and OpenAI chat,
//! every prefix of every earlier prompt in the vendor's units; elsewhere the common prefix with the
//! previous request. Entries live as long as the meter ([`Meter::forget_cache`]). Token figures are
//! estimates: ⌈bytes / 4⌉. `AgentLoop::observe` gets the same results for the cost of what is new:
//! it cuts a Messages-API body by the spans its serializer noted and, where the serializer proves
//! the first wire messages are the previous request's, neither reads nor compares them again.
//!
//! After a response, [`Meter::observe_usage`] attaches the provider's measured figures to the
//! latest row ([`Measured`]); [`MeterRow::unexplained_miss`] flags a request whose measured
//! read falls short of the estimate by more than one cache block
//! ([`Route::cache_block_tokens`]). [`Meter::save`] / [`Meter::restore`] and [`Meter::prime`]
//! carry the meter over a restart.
//!
//! When a request does not extend the previous one, [`Meter::observe`] also records where it
//! departs ([`Departure`], read with [`Meter::departures`]): the first differing byte of the
//! two cuts, the segment it falls in (a tool by name, the deferred-tools section, `system`, a
//! wire message and its content block), and, in the tools, what changed by name (added,
//! removed, redefined, reordered, deferred flag flipped). [`Meter::departure_of`] answers the
//! same for a body not sent yet, without changing the meter. The agent loop names the change
//! in the caller's terms and says who made it (`agent::Attribution`).

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::event::SeriesStart;
use crate::response::Usage;
use crate::route::{Route, WireApi};
use crate::wire::{WireRequest, without_markers};

mod cache;

use cache::{Bound, Cache, Prints};
pub use cache::{OPENAI_CACHE_MIN_TOKENS, OPENAI_CACHE_UNIT_TOKENS, OPENAI_PROMPT_CACHING_DOC};

/// The minimum cacheable length, in tokens, the meter applies on `route`: the route's
/// [`Route::min_cache_tokens`], and on an OpenAI chat route at least
/// [`OPENAI_CACHE_MIN_TOKENS`] (the vendor caches no shorter prompt).
///
/// ```
/// use mektpoy::{route_for, meter::min_cache_tokens};
/// assert_eq!(min_cache_tokens(&route_for("openai-compatible", "any")), 1024);
/// assert_eq!(min_cache_tokens(&route_for("anthropic", "claude-opus-5")), 512);
/// ```
pub fn min_cache_tokens(route: &Route) -> u32 {
    Cache::for_route(route).min_tokens()
}

/// Prices for one route, each with where it was read. The meter shows tokens only without one.
#[derive(Clone, Debug, PartialEq)]
pub struct Price {
    /// Price of one million new input tokens.
    pub input_per_mtok: f64,
    /// Price of one million cache-read input tokens.
    pub cache_read_per_mtok: f64,
    /// Surcharge factor on new input tokens written to the cache (Anthropic: 1.25), 1.0 where
    /// writing is free.
    pub cache_write_multiplier: f64,
    /// Currency, e.g. `USD`.
    pub currency: Cow<'static, str>,
    /// Where the prices were published and when they were read.
    pub source: Cow<'static, str>,
}

/// The vendor's pricing page for Claude models (input, cache-write and cache-read prices
/// per model).
pub const ANTHROPIC_PRICING_DOC: &str = "https://platform.claude.com/docs/en/about-claude/pricing";

/// OpenAI's model page for GPT-5.4 ("Text tokens, per 1M tokens: Input $2.50, Cached input
/// $0.25, Output $15.00"; prompts over 272K input tokens are priced at 2x input for the whole
/// session, which this estimate leaves out), read 2026-12-07.
pub const OPENAI_GPT_5_4_PRICE_DOC: &str = "https://developers.openai.com/api/docs/models/gpt-5.4";

/// OpenAI's prompt-caching guide: "Cache writes have no additional fee on models before the
/// GPT-5.6 family. For GPT-5.6 models and later model families, cache writes cost 1.25x the
/// uncached input token rate", read 2026-12-07 ([decision
/// 144](crate::manual::decisions#decision-144)).
pub const OPENAI_CACHE_WRITE_DOC: &str =
    "https://developers.openai.com/api/docs/guides/prompt-caching";

impl Price {
    /// The published price of a built-in route's model: Claude models read 2026-12-01, with a
    /// 5-minute cache write (1.25× input); OpenAI's `gpt-5.4` read 2026-12-07, whose cache
    /// writes cost nothing extra (the prompt-caching guide: no fee before the GPT-5.6 family).
    /// `None` where no price was verified on the vendor's page (DeepSeek, Claude Fable 5.2 /
    /// Mythos 5.2, Claude Haiku 5.5, the rest of the GPT-5.4 family, GPT-5.6, unknown models;
    /// [decision 144](crate::manual::decisions#decision-144)): the meter then shows tokens only.
    ///
    /// ```
    /// use mektpoy::{route_for, meter::Price};
    /// let p = Price::for_route(&route_for("anthropic", "claude-opus-5-5")).unwrap();
    /// assert_eq!((p.input_per_mtok, p.cache_read_per_mtok), (4.0, 0.2));
    /// let sonnet = Price::for_route(&route_for("anthropic", "claude-sonnet-5-5")).unwrap();
    /// assert_eq!(sonnet.cache_read_per_mtok, 0.1, "since 2026-10-07");
    /// let gpt = Price::for_route(&route_for("openai", "gpt-5.4")).unwrap();
    /// assert_eq!((gpt.input_per_mtok, gpt.cache_read_per_mtok), (2.5, 0.25));
    /// assert_eq!(gpt.cache_write_multiplier, 1.0);
    /// assert!(Price::for_route(&route_for("deepseek", "deepseek-flash")).is_none());
    /// assert!(Price::for_route(&route_for("openai", "gpt-5.4-mini")).is_none());
    /// ```
    pub fn for_route(route: &Route) -> Option<Price> {
        if route.provider == "openai" {
            // Only the model whose own page was read; a price is per model, and a family
            // member's page that was not read is not assumed.
            return (route.model == "gpt-5.4").then(|| Price {
                input_per_mtok: 2.5,
                cache_read_per_mtok: 0.25,
                cache_write_multiplier: 1.0,
                currency: "USD".into(),
                source: format!(
                    "{OPENAI_GPT_5_4_PRICE_DOC}, read 2026-12-07; cache writes: \
                     {OPENAI_CACHE_WRITE_DOC}, read 2026-12-07"
                )
                .into(),
            });
        }
        if route.provider != "anthropic" {
            return None;
        }
        // (input, cache read) in USD per million tokens. Cache reads are 0.1× input on most
        // models, 0.025× on Fable 5.1 / Mythos 5.1 and 0.05× on Opus 5.5 and Sonnet 5.5.
        let (input, read, page) = match &*route.model {
            "claude-fable-5-1" | "claude-mythos-5-1" => (10.0, 0.25, ANTHROPIC_PRICING_DOC),
            "claude-fable-5" | "claude-mythos-5" => (10.0, 1.0, ANTHROPIC_PRICING_DOC),
            "claude-opus-5" | "claude-opus-4-8" => (5.0, 0.5, ANTHROPIC_PRICING_DOC),
            "claude-opus-5-5" => (
                4.0,
                0.2,
                "https://platform.claude.com/docs/en/models/opus-5-5/overview",
            ),
            // Cache reads cut from $0.20 to $0.10 (0.05x) on 2026-10-07. The stored copies of
            // the vendor's pages read on 2026-12-06 do not show the row (the pricing page's copy
            // stops before it; the model page's translated copies still say $0.20, from before
            // the cut); the figure is the one every tracker re-reading the live pricing page
            // reports from 2026-10-09 on, and the issue that asked for it (decision 132).
            "claude-sonnet-5-5" => (2.0, 0.1, ANTHROPIC_PRICING_DOC),
            _ => return None,
        };
        let read_on = if route.model == "claude-sonnet-5-5" {
            "2026-12-06"
        } else {
            "2026-12-01"
        };
        Some(Price {
            input_per_mtok: input,
            cache_read_per_mtok: read,
            cache_write_multiplier: 1.25,
            currency: "USD".into(),
            source: format!("{page}, read {read_on}").into(),
        })
    }
}

/// What the provider reported for one request (its usage, [reference
/// §12](crate::manual::reference#12-provider-responses-and-usage)), beside the meter's estimate.
/// `None` in a cache figure means the provider does not report it, which is not zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Measured {
    /// Every prompt token of the request, cached or not ([`Usage::prompt_tokens`]).
    pub prompt_tokens: u64,
    /// Of those, the tokens read from the provider's cache.
    pub cache_read_tokens: Option<u64>,
    /// Of those, the tokens written to the provider's cache (Messages API only).
    pub cache_write_tokens: Option<u64>,
}

impl Measured {
    /// Measured figures given by hand (from a log, or a vendor this crate does not decode).
    pub fn new(
        prompt_tokens: u64,
        cache_read_tokens: Option<u64>,
        cache_write_tokens: Option<u64>,
    ) -> Self {
        Measured {
            prompt_tokens,
            cache_read_tokens,
            cache_write_tokens,
        }
    }
}

impl From<&Usage> for Measured {
    fn from(usage: &Usage) -> Self {
        Measured::new(
            usage.prompt_tokens,
            usage.cache_read_tokens,
            usage.cache_write_tokens,
        )
    }
}

/// The block a route without [`Route::cache_block_tokens`] gets, in tokens: 1,024, the
/// largest minimum cacheable length in the catalog (Claude Opus 4.8, on the vendor's
/// prompt-caching page). A conservative choice: a larger block flags fewer requests.
pub const DEFAULT_CACHE_BLOCK_TOKENS: u32 = 1024;

/// One metered request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct MeterRow {
    /// Bytes of the request's segments.
    pub total_bytes: u64,
    /// Bytes the provider would serve from its cache, by the model of its vendor's cache
    /// (see the module doc): on Anthropic the longest entry written at a breakpoint that
    /// ends at a block the request's breakpoints look back to (0 when the body asks for no
    /// caching, or every entry is out of the lookback); on DeepSeek and OpenAI chat the
    /// longest common prefix with any earlier prompt, in whole units; 0 below the minimum
    /// cacheable length.
    pub cached_bytes: u64,
    /// Bytes the best possible client would have had cached.
    pub best_bytes: u64,
    /// What reading the whole previous request (as far as both go) would give by the same
    /// rule: [`kept_bytes`](Self::kept_bytes).
    kept: u64,
    /// Why the request opened a series, if it did.
    pub series_start: Option<SeriesStart>,
    /// The provider's figures, once [`Meter::observe_usage`] attached them.
    pub measured: Option<Measured>,
    /// The estimated cached tokens at the measured rate, and the route's block: what
    /// [`unexplained_miss`](Self::unexplained_miss) compares. Set with `measured`.
    expected: Option<Expected>,
}

/// The flag's inputs, fixed when the measured figures are attached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Expected {
    read_tokens: u64,
    block_tokens: u32,
}

impl MeterRow {
    /// Bytes not served from the cache.
    pub fn new_bytes(&self) -> u64 {
        self.total_bytes.saturating_sub(self.cached_bytes)
    }

    /// The bytes of the whole previous request of the route (as far as both go) in the
    /// vendor's read unit (DeepSeek 64 tokens, OpenAI 128; bytes elsewhere): a request
    /// reading less lost something, one reading this much lost nothing a client could keep
    /// (below the minimum cacheable length both read 0). 0 for the first request; for a row
    /// restored from a save before version 3, its best possible figure.
    pub fn kept_bytes(&self) -> u64 {
        self.kept
    }

    /// The estimated cached amount in tokens at the measured rate, once measured figures are
    /// attached: `cached_bytes × P / B`, where `P / B` is the measured prompt tokens per byte
    /// of the route's previous request when it was measured (its prompt is what the cache
    /// holds), else of this request. Converting at ⌈bytes / 4⌉ would flag every full hit of a
    /// prompt whose tokenizer packs more than four bytes a token.
    pub fn expected_read_tokens(&self) -> Option<u64> {
        self.expected.map(|e| e.read_tokens)
    }

    /// The unexplained miss: how many tokens the provider's measured cache read falls short
    /// of [`expected_read_tokens`](Self::expected_read_tokens), when it falls short by more
    /// than one cache block ([`Route::cache_block_tokens`], else
    /// [`DEFAULT_CACHE_BLOCK_TOKENS`]). `None` without measured figures, when the provider
    /// reports no cache read, when the estimate is 0, and for a series the caller opened
    /// ([`SeriesStart::by_caller`]): a loss the caller chose is not unexplained.
    ///
    /// ```
    /// use mektpoy::{Meter, route_for, meter::Measured};
    /// let mut meter = Meter::new(&route_for("deepseek", "deepseek-flash"));
    /// // 4,096 bytes cut: 16 of DeepSeek's 64-token units at four bytes a token.
    /// let body = format!(r#"{{"messages":[{{"role":"user","content":"{}"}}]}}"#, "x".repeat(4068));
    /// meter.observe(&body, None)?;
    /// meter.observe_measured(Measured::new(1000, Some(0), None))?;
    /// let row = meter.observe(&body, None)?; // the same prompt: all of it should be cached
    /// assert_eq!(row.unexplained_miss(), None, "nothing measured yet");
    /// let row = meter.observe_measured(Measured::new(1000, Some(0), None))?;
    /// assert_eq!(row.unexplained_miss(), Some(1000), "the provider read nothing");
    /// # Ok::<(), mektpoy::meter::MeterError>(())
    /// ```
    pub fn unexplained_miss(&self) -> Option<u64> {
        if self.series_start.is_some_and(SeriesStart::by_caller) {
            return None;
        }
        let expected = self.expected?;
        let read = self.measured?.cache_read_tokens?;
        let short = expected.read_tokens.saturating_sub(read);
        (expected.read_tokens > 0 && short > u64::from(expected.block_tokens)).then_some(short)
    }
}

/// Totals over the requests fed so far.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct MeterReport {
    /// Number of requests.
    pub requests: usize,
    /// Σ total bytes.
    pub total_bytes: u64,
    /// Σ cached bytes.
    pub cached_bytes: u64,
    /// Σ best possible cached bytes.
    pub best_bytes: u64,
    /// Σ ⌈total / 4⌉: estimated input tokens.
    pub total_tokens: u64,
    /// Σ ⌈cached / 4⌉: estimated cached tokens.
    pub cached_tokens: u64,
    /// Σ ⌈best / 4⌉: estimated best possible cached tokens.
    pub best_tokens: u64,
    /// The estimated cost, when the meter has a price.
    pub cost: Option<f64>,
    /// Σ of the measured figures, over the rows that have them.
    pub measured: MeasuredTotals,
    /// Requests flagged with an [unexplained miss](MeterRow::unexplained_miss).
    pub unexplained_misses: usize,
}

/// The provider's figures summed over the rows that carry them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct MeasuredTotals {
    /// Rows with measured figures.
    pub requests: usize,
    /// Σ measured prompt tokens.
    pub prompt_tokens: u64,
    /// Σ measured cache reads, over the rows whose provider reports them.
    pub cache_read_tokens: u64,
    /// Σ measured cache writes, over the rows whose provider reports them.
    pub cache_write_tokens: u64,
    /// Rows whose provider reported a cache read.
    pub read_reported: usize,
    /// Rows whose provider reported a cache write.
    pub write_reported: usize,
}

impl MeasuredTotals {
    /// The measured hit ratio: Σ cache read ÷ Σ prompt tokens (0 when nothing was measured).
    pub fn hit_ratio(&self) -> f64 {
        ratio(self.cache_read_tokens, self.prompt_tokens)
    }
}

impl MeterReport {
    /// Σ cached ÷ Σ total (0 when nothing was fed).
    pub fn hit_ratio(&self) -> f64 {
        ratio(self.cached_bytes, self.total_bytes)
    }

    /// Best possible hit ratio: Σ best ÷ Σ total.
    pub fn best_ratio(&self) -> f64 {
        ratio(self.best_bytes, self.total_bytes)
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 { 0.0 } else { a as f64 / b as f64 }
}

/// Why a body could not be metered.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MeterError {
    /// The body is not a Messages-API or chat body.
    #[error("the request body is not a JSON object with a `messages` array")]
    Body(#[source] serde_json::Error),
    /// Measured figures came before any request was observed.
    #[error("no observed request to attach the measured usage to")]
    NoRequest,
    /// The latest request already has measured figures.
    #[error("request {row} already has measured usage")]
    AlreadyMeasured {
        /// The row's index in [`Meter::rows`].
        row: usize,
    },
    /// A saved meter that [`Meter::restore`] cannot take.
    #[error("the saved meter cannot be restored: {reason}")]
    Restore {
        /// What is wrong with it.
        reason: RestoreFault,
    },
}

/// Why a saved meter was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RestoreFault {
    /// Not the JSON [`Meter::save`] writes.
    #[error("not a saved meter ({0})")]
    Malformed(String),
    /// A version this crate does not read.
    #[error("version {0} is not one of 1 to {SAVE_VERSION}")]
    Version(u64),
    /// Saved for another route, or a route whose meter rules changed since.
    #[error("saved for {saved}, restored for {route}")]
    Route {
        /// The route and rules it was saved with.
        saved: String,
        /// The route given to `restore`.
        route: String,
    },
}

/// The version [`Meter::save`] writes: 3, which adds the cache entries the meter models
/// (version 2 added the previous request's tools by name and each row's [`Departure`]).
/// [`Meter::restore`] also reads versions 1 and 2, whose previous request then stands for the
/// entries (under Anthropic's rule one at its end, under a unit rule each of its units).
pub const SAVE_VERSION: u64 = 3;

/// Feeds on the requests of one route, in order.
#[derive(Clone, Debug)]
pub struct Meter {
    deferred_section_bytes: u32,
    block_tokens: u32,
    /// `provider/model` and the rules above, for [`Meter::restore`] to check.
    fingerprint: String,
    price: Option<Price>,
    previous: Option<Previous>,
    /// The provider's cache entries, by the route's vendor rule.
    cache: Cache,
    /// Whether the route's wire marks breakpoints with `cache_control` (the Messages API),
    /// which the meter leaves out of the prompt; on OpenAI-compatible chat there are none, and
    /// a tool's schema property of that name is prompt like any other.
    markers: bool,
    /// The measured prompt tokens and bytes of the request before the latest one, when it
    /// was measured: the rate [`MeterRow::expected_read_tokens`] converts at.
    rate_before: Option<Rate>,
    rows: Vec<MeterRow>,
    /// Beside each row: where its request departed from the previous one, if it did.
    departures: Vec<Option<Departure>>,
}

/// Measured prompt tokens over the bytes they were measured on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Rate {
    tokens: u64,
    bytes: u64,
}

impl Rate {
    /// `bytes` converted at this rate (`None` for a rate over no bytes).
    fn convert(self, bytes: u64) -> Option<u64> {
        if self.bytes == 0 {
            return None;
        }
        let tokens = u128::from(bytes) * u128::from(self.tokens) / u128::from(self.bytes);
        Some(u64::try_from(tokens).unwrap_or(u64::MAX))
    }
}

/// Where a byte of a request's cut belongs, in the provider's caching order.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Segment {
    /// A tool sent in full (not deferred).
    Tool {
        /// Its 0-based index in the body's `tools` array (deferred tools counted).
        index: usize,
        /// Its name (`name`, or `function.name` on a chat body).
        name: String,
    },
    /// The fixed deferred-tools section ([`Route::deferred_section_bytes`]).
    DeferredTools,
    /// The top-level `system`.
    System,
    /// A wire message. The Messages serializer merges consecutive user content and
    /// consecutive assistant messages into one turn, so this is not an index into the log.
    Message {
        /// Its 0-based index in the body's `messages` array.
        index: usize,
    },
}

impl Segment {
    /// The provider's caching order: tools, then `system`, then messages.
    fn rank(&self) -> (u8, usize) {
        match self {
            Segment::Tool { index, .. } => (0, *index),
            Segment::DeferredTools => (1, 0),
            Segment::System => (2, 0),
            Segment::Message { index } => (3, *index),
        }
    }
}

impl std::fmt::Display for Segment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Segment::Tool { name, .. } => write!(f, "tool `{name}`"),
            Segment::DeferredTools => f.write_str("the deferred-tools section"),
            Segment::System => f.write_str("`system`"),
            Segment::Message { index } => write!(f, "wire message {index}"),
        }
    }
}

/// What changed in the tools between two requests, found by comparing them by name.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ToolChange {
    /// A tool the previous request did not have.
    Added {
        /// The tool's name.
        name: String,
    },
    /// A tool of the previous request this one lacks.
    Removed {
        /// The tool's name.
        name: String,
    },
    /// The same name with other bytes (description, schema, fields).
    Redefined {
        /// The tool's name.
        name: String,
    },
    /// The same tools in another order: the first one out of its previous place.
    Reordered {
        /// The tool now at the first position whose tool differs.
        name: String,
    },
    /// The `defer_loading` flag flipped.
    Deferred {
        /// The tool's name.
        name: String,
        /// Whether it is deferred now.
        deferred: bool,
    },
}

impl ToolChange {
    /// The tool's name.
    pub fn name(&self) -> &str {
        match self {
            ToolChange::Added { name }
            | ToolChange::Removed { name }
            | ToolChange::Redefined { name }
            | ToolChange::Reordered { name }
            | ToolChange::Deferred { name, .. } => name,
        }
    }
}

impl std::fmt::Display for ToolChange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ToolChange::Added { name } => write!(f, "tool `{name}` added"),
            ToolChange::Removed { name } => write!(f, "tool `{name}` removed"),
            ToolChange::Redefined { name } => write!(f, "tool `{name}` redefined"),
            ToolChange::Reordered { name } => write!(f, "tools reordered (`{name}` moved)"),
            ToolChange::Deferred {
                name,
                deferred: true,
            } => write!(f, "tool `{name}` deferred"),
            ToolChange::Deferred {
                name,
                deferred: false,
            } => write!(f, "tool `{name}` no longer deferred"),
        }
    }
}

/// Where a request departs from the previous request of its route: the first byte of its cut
/// ([`Meter::prefix_bytes`]) that differs, and what lies there. Everything from that byte on
/// is out of the provider's prefix cache.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Departure {
    /// The first differing byte, as an offset into the cuts (also the length of their common
    /// prefix).
    pub offset: u64,
    /// The previous request's cut length.
    pub previous_bytes: u64,
    /// This request's cut length.
    pub total_bytes: u64,
    /// The segment the byte falls in: of this request, or of the previous one where that
    /// segment comes first in caching order (a removed tool is named, not the `system` that
    /// now sits at its offset) or where this request ends at the byte.
    pub segment: Segment,
    /// In a wire message present in both requests, the 0-based index of the first content
    /// block that differs (the length of the shorter array when one extends the other);
    /// `None` elsewhere, or when a content is a string.
    pub block: Option<usize>,
    /// When the departure is in the tools: every change found by name, in this order:
    /// removed, added, redefined, deferred flag, reordered. Empty elsewhere, and after a
    /// restore from a version-1 save for deferred tools (their names were not saved; the
    /// previous request's tool indices then count its immediate tools only).
    pub tools: Vec<ToolChange>,
}

impl Departure {
    /// The previous request's bytes from the departure on: what the cache held and cannot
    /// serve.
    pub fn lost_bytes(&self) -> u64 {
        self.previous_bytes.saturating_sub(self.offset)
    }

    /// [`lost_bytes`](Self::lost_bytes) as estimated tokens, ⌈bytes / 4⌉.
    pub fn lost_tokens(&self) -> u64 {
        self.lost_bytes().div_ceil(4)
    }
}

/// One segment of a cut and its byte range.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Span {
    segment: Segment,
    start: usize,
    end: usize,
}

/// One tool of a body, deferred or not: what a by-name comparison needs.
#[derive(Clone, Debug, PartialEq, Eq)]
struct ToolEntry {
    name: String,
    /// FNV-1a of its bytes (markers left out): stable, so that it can be saved. `None` when
    /// unknown (a deferred tool of a version-1 save): never reported as redefined.
    hash: Option<u64>,
    deferred: bool,
}

/// 64-bit FNV-1a: stable across builds, unlike `std`'s hasher, so a saved meter compares
/// the tools of the next request with the ones it saved.
fn hash_bytes(bytes: &[u8]) -> Option<u64> {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    Some(h)
}

/// What the cut knows of its wire messages up to and including one, counted from the first:
/// what a request that keeps that many of them takes over without reading them again.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Counted {
    /// Content blocks.
    blocks: usize,
    /// Block ends the cache model reads at (a message without a content array has one).
    bounds: usize,
    /// Messages whose bytes hold a `cache_control` key.
    asks: usize,
    /// Messages with a content block that holds one.
    block_marks: usize,
    /// Messages that hold a definition by value.
    by_value: usize,
}

/// What the meter keeps of the previous request.
#[derive(Clone, Debug, PartialEq)]
struct Previous {
    bytes: Vec<u8>,
    /// The cut's segments, in order.
    segments: Vec<Span>,
    /// Its block ends, in order.
    bounds: Vec<Bound>,
    /// Its prefix hashes; `None` after a restore, which leaves the next request to the
    /// parsing path.
    prints: Option<Prints>,
    /// One per wire message, cumulative; `None` after a restore (the saved form does not
    /// hold them), which leaves the next request to the parsing path.
    counted: Option<Vec<Counted>>,
    /// The token of the resume point the request's pass left (`wire::Segments::leaves`),
    /// when it came through the loop's entry; equality ignores it.
    leaves: Option<std::sync::Arc<()>>,
    /// The block the request's serializer spliced its lookback mark into, if any.
    mark: Option<usize>,
    /// Every tool of the body.
    tools: Vec<ToolEntry>,
    /// Content blocks over its messages.
    blocks: usize,
    /// Whether it carried a tool defined by value.
    by_value: bool,
    /// Its measured rate, once its usage was attached.
    rate: Option<Rate>,
    /// Whether it is the latest row's request (not a primed body), so that the latest row's
    /// figures are its own.
    row: bool,
}

/// A body cut into the provider's caching order, with what caching needs to know of it.
struct Cut {
    bytes: Vec<u8>,
    segments: Vec<Span>,
    tools: Vec<ToolEntry>,
    blocks: usize,
    /// The ends of its message content blocks, with their breakpoints.
    bounds: Vec<Bound>,
    /// One per wire message, cumulative.
    counted: Vec<Counted>,
    /// Whether the body asks for automatic caching (a top-level `cache_control`).
    top_level: bool,
    /// Whether a `tool_addition` carries a definition by value.
    by_value: bool,
    /// Whether `tools` holds a tool without `defer_loading`.
    immediate_tool: bool,
    /// Whether the wire has `cache_control` markers to leave out ([`Meter::markers`]).
    markers: bool,
}

/// Which way the segment path metered a request (the unit tests check that the cheap one is
/// taken where it should be).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Path {
    /// Proven to keep the previous request's first wire messages and to extend it: only the
    /// head and the new wire messages were read, the previous cut grown in place.
    Extended,
    /// Cut from the spans (kept wire messages copied from the previous cut), compared whole.
    Whole,
}

#[derive(Deserialize)]
struct Body<'a> {
    /// Top-level automatic caching: a breakpoint at the last block.
    #[serde(borrow, default)]
    cache_control: Option<&'a RawValue>,
    #[serde(borrow, default)]
    tools: Vec<&'a RawValue>,
    /// `system`, or a Responses body's `instructions`.
    #[serde(borrow, default, alias = "instructions")]
    system: Option<&'a RawValue>,
    /// `messages`, or a Responses body's `input` items.
    #[serde(borrow, alias = "input")]
    messages: Vec<&'a RawValue>,
}

/// A message's content blocks, kept raw.
#[derive(Deserialize)]
struct Content<'a> {
    #[serde(borrow, default)]
    content: Option<Vec<&'a RawValue>>,
}

/// The key the serializers write for a cache breakpoint.
const MARKER: &str = "\"cache_control\":";

/// The type of a block carrying a tool definition by value.
const BY_VALUE: &str = r#""type":"tool_definition""#;

impl Cut {
    fn push(&mut self, segment: Segment, bytes: &[u8]) {
        let start = self.bytes.len();
        self.bytes.extend_from_slice(bytes);
        self.segments.push(Span {
            segment,
            start,
            end: self.bytes.len(),
        });
    }

    /// Appends wire message `index` (its body bytes `text`, with its content blocks at
    /// `blocks`, ranges in `text`; `None` when its content is not an array), markers left out.
    fn push_message(&mut self, index: usize, text: &str, blocks: Option<&[(usize, usize)]>) {
        let before = self.counted.last().copied().unwrap_or_default();
        let blocks = blocks.unwrap_or_default();
        let marked = |&(s, e): &(usize, usize)| text.get(s..e).is_some_and(|b| b.contains(MARKER));
        let block_mark = self.markers && blocks.iter().any(marked);
        let stripped = self.unmarked(text);
        let at = self.bytes.len();
        let bounds = if self.markers {
            message_bounds(text, stripped.len(), blocks)
        } else {
            message_bounds(text, text.len(), &[])
        };
        self.blocks += blocks.len();
        self.counted.push(Counted {
            blocks: before.blocks + blocks.len(),
            bounds: before.bounds + bounds.len(),
            asks: before.asks + usize::from(self.markers && text.contains(MARKER)),
            block_marks: before.block_marks + usize::from(block_mark),
            by_value: before.by_value + usize::from(text.contains(BY_VALUE)),
        });
        self.bounds.extend(bounds.into_iter().map(|b| Bound {
            key: b.key + at,
            end: b.end + at,
            ..b
        }));
        self.push(Segment::Message { index }, stripped.as_bytes());
    }

    /// `text` with its markers left out, where the wire has markers: on chat a key named
    /// `cache_control` is a schema's property, part of the prompt.
    fn unmarked<'t>(&self, text: &'t str) -> Cow<'t, str> {
        if self.markers {
            without_markers(text)
        } else {
            text.into()
        }
    }
}

/// Where a message's content blocks sit in its bytes `text`; `None` when its content is not
/// an array.
fn content_ranges(text: &str) -> Option<Vec<(usize, usize)>> {
    let content = serde_json::from_str::<Content<'_>>(text).ok()?.content?;
    // Each block borrows from `text`: its offset is where it starts.
    let ranges = content.iter().map(|b| {
        let at = (b.get().as_ptr() as usize).saturating_sub(text.as_ptr() as usize);
        (at, at + b.get().len())
    });
    Some(ranges.collect())
}

/// The block ends of one message whose bytes are `text` (`stripped_len` once its markers are
/// left out), its content blocks at `blocks` (ranges in `text`): each block's end, markers
/// before it left out, the last one at the message's end (a later request that appends a
/// message keeps the closing bytes too). A message without blocks, or with a marker outside
/// them, has one end: its own.
fn message_bounds(text: &str, stripped_len: usize, blocks: &[(usize, usize)]) -> Vec<Bound> {
    let whole = |mark| {
        vec![Bound {
            key: stripped_len,
            end: stripped_len,
            mark,
        }]
    };
    let mut out = Vec::with_capacity(blocks.len());
    let mut removed = 0;
    for (k, &(s, e)) in blocks.iter().enumerate() {
        let Some(block) = text.get(s..e) else {
            return whole(false);
        };
        let mark = block.contains(MARKER);
        if mark {
            removed += block.len().saturating_sub(without_markers(block).len());
        }
        let key = e.saturating_sub(removed);
        let end = if k + 1 == blocks.len() {
            stripped_len
        } else {
            key
        };
        out.push(Bound { key, end, mark });
    }
    if out.is_empty() || text.len().saturating_sub(removed) != stripped_len {
        return whole(out.iter().any(|b| b.mark));
    }
    out
}

#[derive(Deserialize)]
struct ToolFlags<'a> {
    #[serde(default)]
    defer_loading: bool,
    /// Messages-API tools: `name` at the top.
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
    /// Chat tools: `{"type":"function","function":{"name"}}`.
    #[serde(borrow, default)]
    function: Option<FunctionName<'a>>,
}

#[derive(Deserialize)]
struct FunctionName<'a> {
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
}

impl ToolFlags<'_> {
    fn name(&self) -> String {
        self.name
            .as_deref()
            .or_else(|| self.function.as_ref().and_then(|f| f.name.as_deref()))
            .unwrap_or_default()
            .to_owned()
    }
}

impl Previous {
    fn of(cut: Cut, prints: Prints, row: bool) -> Self {
        Previous {
            bytes: cut.bytes,
            segments: cut.segments,
            bounds: cut.bounds,
            prints: Some(prints),
            tools: cut.tools,
            blocks: cut.blocks,
            counted: Some(cut.counted),
            leaves: None,
            mark: None,
            by_value: cut.by_value,
            rate: None,
            row,
        }
    }

    /// The number of segments before the first wire message.
    fn head_spans(&self) -> usize {
        self.segments
            .iter()
            .position(|s| matches!(s.segment, Segment::Message { .. }))
            .unwrap_or(self.segments.len())
    }
}

/// The span of `spans` holding byte `offset`.
fn span_at(spans: &[Span], offset: usize) -> Option<&Span> {
    let i = spans.partition_point(|s| s.end <= offset);
    spans.get(i).filter(|s| s.start <= offset && offset < s.end)
}

/// Where `cut` departs from `prev`, if it does not extend it.
fn departure(prev: &Previous, cut: &Cut) -> Option<Departure> {
    let common = prev
        .bytes
        .iter()
        .zip(&cut.bytes)
        .take_while(|(a, b)| a == b)
        .count();
    if common == prev.bytes.len() {
        return None;
    }
    let before = span_at(&prev.segments, common);
    let now = span_at(&cut.segments, common);
    // The earlier segment in caching order names the change; on a tie, this request's.
    let span = match (before, now) {
        (Some(b), Some(n)) if b.segment.rank().0 < n.segment.rank().0 => b,
        (_, Some(n)) => n,
        (Some(b), None) => b,
        // Only when a restored cut could not be read back in full and this request ends at
        // the byte: what the previous request had next is past this one's last message.
        (None, None) => {
            let index = cut
                .segments
                .iter()
                .filter(|s| matches!(s.segment, Segment::Message { .. }))
                .count();
            return Some(Departure {
                offset: common as u64,
                previous_bytes: prev.bytes.len() as u64,
                total_bytes: cut.bytes.len() as u64,
                segment: Segment::Message { index },
                block: None,
                tools: Vec::new(),
            });
        }
    };
    let segment = span.segment.clone();
    let block = match &segment {
        Segment::Message { .. } => {
            let find = |spans: &[Span]| {
                spans
                    .iter()
                    .find(|s| s.segment == segment)
                    .map(|s| (s.start, s.end))
            };
            match (find(&prev.segments), find(&cut.segments)) {
                (Some((a, b)), Some((c, d))) => first_block(&prev.bytes[a..b], &cut.bytes[c..d]),
                _ => None,
            }
        }
        _ => None,
    };
    let tools = match segment {
        Segment::Tool { .. } | Segment::DeferredTools => tool_changes(&prev.tools, &cut.tools),
        _ => Vec::new(),
    };
    Some(Departure {
        offset: common as u64,
        previous_bytes: prev.bytes.len() as u64,
        total_bytes: cut.bytes.len() as u64,
        segment,
        block,
        tools,
    })
}

/// The first content block at which two messages differ, when both contents are arrays.
fn first_block(before: &[u8], now: &[u8]) -> Option<usize> {
    let parse = |b: &[u8]| {
        std::str::from_utf8(b)
            .ok()
            .and_then(|t| serde_json::from_str::<Content<'_>>(t).ok())
            .and_then(|c| c.content)
            .map(|c| c.iter().map(|b| b.get().to_owned()).collect::<Vec<_>>())
    };
    let (a, b) = (parse(before)?, parse(now)?);
    let same = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    // Equal arrays: the message differs outside its content (its role).
    (same < a.len().max(b.len())).then_some(same)
}

/// The tool changes between two bodies, by name.
fn tool_changes(before: &[ToolEntry], now: &[ToolEntry]) -> Vec<ToolChange> {
    let find = |list: &[ToolEntry], name: &str| list.iter().position(|t| t.name == name);
    let mut out = Vec::new();
    for t in before {
        if find(now, &t.name).is_none() {
            out.push(ToolChange::Removed {
                name: t.name.clone(),
            });
        }
    }
    let mut flips = Vec::new();
    for t in now {
        match find(before, &t.name).map(|i| &before[i]) {
            None => out.push(ToolChange::Added {
                name: t.name.clone(),
            }),
            Some(b) if b.deferred != t.deferred => flips.push(ToolChange::Deferred {
                name: t.name.clone(),
                deferred: t.deferred,
            }),
            Some(b) if b.hash.zip(t.hash).is_some_and(|(x, y)| x != y) => {
                out.push(ToolChange::Redefined {
                    name: t.name.clone(),
                })
            }
            Some(_) => {}
        }
    }
    out.extend(flips);
    // The tools both have, in each one's order.
    let common = |list: &[ToolEntry], other: &[ToolEntry]| -> Vec<String> {
        list.iter()
            .filter(|t| find(other, &t.name).is_some())
            .map(|t| t.name.clone())
            .collect()
    };
    let (a, b) = (common(before, now), common(now, before));
    if let Some((_, name)) = a.iter().zip(&b).find(|(x, y)| x != y) {
        out.push(ToolChange::Reordered { name: name.clone() });
    }
    out
}

/// The segments of a saved cut, read back from its bytes: tool objects (no `role`), the
/// deferred section (`#`s), `system` (a string or an array), messages (objects with a
/// `role`). `saved` is every tool of the body in order (version 2), which gives the tools
/// their indices and names the deferred ones; without it (version 1) the tools are the ones
/// the bytes hold.
fn resegment(
    bytes: &[u8],
    section: usize,
    saved: Option<Vec<ToolEntry>>,
) -> (Vec<Span>, Vec<ToolEntry>) {
    #[derive(Deserialize)]
    struct Role<'a> {
        #[serde(borrow, default)]
        role: Option<&'a RawValue>,
    }
    let mut segments = Vec::new();
    let mut read = Vec::new();
    let text = std::str::from_utf8(bytes).unwrap_or_default();
    // The body index of each immediate tool, in cut order.
    let indices: Option<Vec<usize>> = saved.as_ref().map(|tools| {
        tools
            .iter()
            .enumerate()
            .filter(|(_, t)| !t.deferred)
            .map(|(i, _)| i)
            .collect()
    });
    let mut pos = 0;
    let mut messages = 0;
    let mut section_seen = false;
    while pos < text.len() {
        if text.as_bytes()[pos] == b'#' && section > 0 && !section_seen {
            let end = (pos + section).min(text.len());
            segments.push(Span {
                segment: Segment::DeferredTools,
                start: pos,
                end,
            });
            section_seen = true;
            pos = end;
            continue;
        }
        let mut stream = serde_json::Deserializer::from_str(&text[pos..]).into_iter::<&RawValue>();
        let Some(Ok(value)) = stream.next() else {
            break;
        };
        let end = pos + stream.byte_offset();
        let raw = value.get();
        let segment = if !raw.starts_with('{') {
            Segment::System
        } else if serde_json::from_str::<Role<'_>>(raw).is_ok_and(|r| r.role.is_some()) {
            messages += 1;
            Segment::Message {
                index: messages - 1,
            }
        } else {
            let name = serde_json::from_str::<ToolFlags<'_>>(raw)
                .map(|f| f.name())
                .unwrap_or_default();
            let k = read.len();
            read.push(ToolEntry {
                name: name.clone(),
                hash: hash_bytes(raw.as_bytes()),
                deferred: false,
            });
            let index = indices
                .as_ref()
                .and_then(|ix| ix.get(k).copied())
                .unwrap_or(k);
            Segment::Tool { index, name }
        };
        segments.push(Span {
            segment,
            start: pos,
            end,
        });
        pos = end;
    }
    (segments, saved.unwrap_or(read))
}

impl Meter {
    /// A meter for `route`, whose deferred-tools section counts
    /// `route.deferred_section_bytes()`.
    pub fn new(route: &Route) -> Self {
        let block_tokens = match route.cache_block_tokens() {
            0 => DEFAULT_CACHE_BLOCK_TOKENS,
            n => n,
        };
        Meter {
            deferred_section_bytes: route.deferred_section_bytes(),
            block_tokens,
            fingerprint: format!(
                "{}/{} (deferred {}, auto cache {}, min {}, block {})",
                route.provider,
                route.model,
                route.deferred_section_bytes(),
                route.auto_cache(),
                route.min_cache_tokens(),
                block_tokens
            ),
            price: None,
            previous: None,
            cache: Cache::for_route(route),
            markers: route.api == WireApi::Messages,
            rate_before: None,
            rows: Vec::new(),
            departures: Vec::new(),
        }
    }

    /// The same meter pricing tokens with `price`.
    #[must_use]
    pub fn with_price(mut self, price: Price) -> Self {
        self.price = Some(price);
        self
    }

    /// The segments of a body, concatenated in the provider's caching order, with each
    /// block's `cache_control` marker left out (a breakpoint moves from request to request
    /// without changing the prompt).
    ///
    /// # Errors
    /// [`MeterError::Body`] when `body` is not an object with a `messages` array.
    pub fn prefix_bytes(&self, body: &str) -> Result<Vec<u8>, MeterError> {
        Ok(self.cut(body)?.bytes)
    }

    fn cut(&self, body: &str) -> Result<Cut, MeterError> {
        let parsed: Body<'_> = serde_json::from_str(body).map_err(MeterError::Body)?;
        let mut cut = self.head(&parsed.tools, parsed.system.map(RawValue::get))?;
        cut.bytes
            .reserve(parsed.messages.iter().map(|m| m.get().len()).sum());
        cut.segments.reserve(parsed.messages.len());
        cut.counted.reserve(parsed.messages.len());
        for (index, m) in parsed.messages.iter().enumerate() {
            let text = m.get();
            cut.push_message(index, text, content_ranges(text).as_deref());
        }
        cut.top_level = self.markers && parsed.cache_control.is_some();
        // Inside JSON strings quotes are escaped: this can only be a block's type.
        cut.by_value = body.contains(BY_VALUE);
        Ok(cut)
    }

    /// The cut of a body's `tools` and `system` (its messages to follow): each non-deferred
    /// tool without markers, the deferred-tools section when a tool is deferred, `system`.
    fn head(&self, body_tools: &[&RawValue], system: Option<&str>) -> Result<Cut, MeterError> {
        let mut cut = Cut {
            bytes: Vec::new(),
            segments: Vec::with_capacity(body_tools.len() + 2),
            tools: Vec::with_capacity(body_tools.len()),
            blocks: 0,
            bounds: Vec::new(),
            counted: Vec::new(),
            top_level: false,
            by_value: false,
            immediate_tool: false,
            markers: self.markers,
        };
        let mut deferred = false;
        for (index, tool) in body_tools.iter().enumerate() {
            let flags: ToolFlags = serde_json::from_str(tool.get()).map_err(MeterError::Body)?;
            let text = cut.unmarked(tool.get());
            let name = flags.name();
            cut.tools.push(ToolEntry {
                name: name.clone(),
                hash: hash_bytes(text.as_bytes()),
                deferred: flags.defer_loading,
            });
            if flags.defer_loading {
                deferred = true;
            } else {
                cut.immediate_tool = true;
                cut.push(Segment::Tool { index, name }, text.as_bytes());
            }
        }
        if deferred {
            // A fixed section: its bytes are the same whenever it is present.
            let section = vec![b'#'; self.deferred_section_bytes as usize];
            cut.push(Segment::DeferredTools, &section);
        }
        if let Some(system) = system {
            cut.push(Segment::System, system.as_bytes());
        }
        Ok(cut)
    }

    /// Meters the next request of the route; `series_start` comes from
    /// `Request::series_start`.
    ///
    /// Best possible: 0 for the first request; the actual cached amount when the caller
    /// opened the series (asked, or a replace it appended); otherwise (a prompt the recorder
    /// replaced and every declaration series included) what the vendor's rule reads of a
    /// request that keeps the smaller of the previous request and this one (its unit and
    /// minimum applied), or more when an older entry gave more, so that a loss a route's
    /// rules impose shows as a miss.
    ///
    /// # Errors
    /// [`MeterError::Body`] for a body that is not a request body; the meter is unchanged.
    ///
    /// A body that keeps the previous body's first messages byte for byte (neither marking them) is
    /// compared and hashed from the first message that differs ([decision
    /// 119](crate::manual::decisions#decision-119)): the kept ones are compared with the previous
    /// cut's bytes, not read, cut or hashed again.
    pub fn observe(
        &mut self,
        body: &str,
        series_start: Option<SeriesStart>,
    ) -> Result<MeterRow, MeterError> {
        #[cfg(debug_assertions)]
        let before = self.clone();
        if let Some((row, _)) = self.observe_kept(body, series_start) {
            // Nothing of a loop's pass proves this body's messages: as the whole cut leaves it.
            if let Some(p) = self.previous.as_mut() {
                p.leaves = None;
                p.mark = None;
            }
            #[cfg(debug_assertions)]
            {
                let mut slow = before;
                let slow_row = slow.observe_parsed(body, series_start).ok();
                debug_assert_eq!(slow_row, Some(row), "the kept path's row departs");
                debug_assert_eq!(slow.departures, self.departures, "departures depart");
                debug_assert_eq!(slow.previous, self.previous, "the kept cut departs");
                debug_assert_eq!(slow.rate_before, self.rate_before, "the rate departs");
                debug_assert_eq!(slow.cache, self.cache, "the cache entries depart");
            }
            return Ok(row);
        }
        self.observe_parsed(body, series_start)
    }

    /// [`observe`](Self::observe) by cutting the whole body.
    fn observe_parsed(
        &mut self,
        body: &str,
        series_start: Option<SeriesStart>,
    ) -> Result<MeterRow, MeterError> {
        let cut = self.cut(body)?;
        Ok(self.observe_cut(cut, series_start))
    }

    /// The path of [`observe`](Self::observe) for a body that keeps the previous body's first
    /// wire messages: `None` leaves it to the whole cut (nothing kept, a meter restored or
    /// primed without counts, a body that is not a request body).
    ///
    /// A message is kept when its bytes are the previous cut's bytes of the message at its
    /// index and neither it nor the previous one holds a `cache_control` key: the cut of a
    /// message without markers is its bytes, and everything the cut counts of it (blocks,
    /// block ends, marks, definitions by value) is a function of them, so the kept messages'
    /// figures are the previous cut's.
    fn observe_kept(
        &mut self,
        body: &str,
        series_start: Option<SeriesStart>,
    ) -> Option<(MeterRow, Path)> {
        let prev = self.previous.as_ref()?;
        let counted = prev.counted.as_deref()?;
        prev.prints.as_ref()?;
        let parsed: Body<'_> = serde_json::from_str(body).ok()?;
        let hc = prev.head_spans();
        let mut kept = 0;
        for (i, m) in parsed.messages.iter().enumerate() {
            let (Some(span), Some(at)) = (prev.segments.get(hc + i), counted.get(i)) else {
                break;
            };
            let before = i.checked_sub(1).map_or(0, |j| counted[j].asks);
            let text = m.get();
            let same = matches!(span.segment, Segment::Message { index } if index == i)
                && at.asks == before
                && prev.bytes.get(span.start..span.end) == Some(text.as_bytes())
                && !text.contains(MARKER);
            if !same {
                break;
            }
            kept += 1;
        }
        if kept == 0 {
            return None;
        }
        let base = counted[kept - 1];
        let mut cut = self
            .head(&parsed.tools, parsed.system.map(RawValue::get))
            .ok()?;
        let mut fresh = Cut {
            bytes: Vec::new(),
            segments: Vec::with_capacity(parsed.messages.len() - kept),
            tools: Vec::new(),
            blocks: base.blocks,
            bounds: Vec::new(),
            counted: vec![base],
            top_level: false,
            by_value: false,
            immediate_tool: false,
            markers: self.markers,
        };
        for (j, m) in parsed.messages[kept..].iter().enumerate() {
            let text = m.get();
            fresh.push_message(kept + j, text, content_ranges(text).as_deref());
        }
        fresh.counted.remove(0);
        let last = fresh.counted.last().copied().unwrap_or(base);
        cut.blocks = last.blocks;
        cut.top_level = self.markers && parsed.cache_control.is_some();
        // Inside JSON strings quotes are escaped: this can only be a block's type.
        cut.by_value = body.contains(BY_VALUE);
        self.observe_after_kept(cut, fresh, (kept, base), series_start)
    }

    /// [`observe`](Self::observe) on a request the loop serialized, with the same results
    /// (every debug build checks it against `observe` on the body): a Messages-API request is
    /// cut by the spans its serializer noted instead of being parsed, and when its pass kept
    /// the first wire messages of the meter's previous request, those are not read again and
    /// the comparison starts after them.
    ///
    /// That they are the previous request's bytes is proven, not assumed: the serializer took
    /// them from the resume point whose token (`wire::Segments::resumed`) is the one the
    /// previous request's pass left (`leaves`), held alive by the meter so that pointer
    /// equality names that very point; and neither request spliced its lookback mark among
    /// them, so they are the point's bytes, unmarked, in both bodies.
    pub(crate) fn observe_wire(&mut self, wire: &WireRequest) -> Result<MeterRow, MeterError> {
        #[cfg(debug_assertions)]
        let before = wire.segments.is_some().then(|| self.clone());
        let row = match self.observe_segments(wire) {
            Some((row, _)) => row,
            None => self.observe(&wire.body, wire.series_start)?,
        };
        self.remember(wire);
        #[cfg(debug_assertions)]
        if let Some(mut slow) = before {
            let slow_row = slow.observe_parsed(&wire.body, wire.series_start).ok();
            slow.remember(wire);
            debug_assert_eq!(slow_row, Some(row), "the segment path's row departs");
            debug_assert_eq!(slow.departures, self.departures, "departures depart");
            debug_assert_eq!(slow.previous, self.previous, "the kept cut departs");
            debug_assert_eq!(slow.rate_before, self.rate_before, "the rate departs");
            debug_assert_eq!(slow.cache, self.cache, "the cache entries depart");
        }
        Ok(row)
    }

    /// The previous request's cut (for the invariant test of [decision
    /// 106](crate::manual::decisions#decision-106)).
    #[cfg(test)]
    pub(crate) fn previous_bytes(&self) -> Option<&[u8]> {
        self.previous.as_ref().map(|p| p.bytes.as_slice())
    }

    /// Notes what the next request of the loop proves its kept wire messages by.
    fn remember(&mut self, wire: &WireRequest) {
        if let Some(p) = self.previous.as_mut() {
            p.leaves = wire.segments.as_ref().and_then(|s| s.leaves.clone());
            p.mark = wire.report.lookback_breakpoint;
        }
    }

    /// The segment path of [`observe_wire`](Self::observe_wire); `None` leaves the request to
    /// the parsing path (no segments, kept wire messages not proven to be the previous
    /// request's, or spans that do not read as the slow path would).
    fn observe_segments(&mut self, wire: &WireRequest) -> Option<(MeterRow, Path)> {
        let segs = wire.segments.as_deref()?;
        let body = wire.body.as_str();
        // A body edited after the serializer wrote it is read by the parsing path. A Responses
        // body's items are its `input` (read as `messages`, as the parsing path does).
        let framed = body.len() == segs.body_len
            && body.ends_with("]}")
            && body
                .get(..segs.messages_at)
                .is_some_and(|h| h.ends_with("\"messages\":[") || h.ends_with("\"input\":["));
        if !framed {
            return None;
        }
        let kept = segs.first;
        let base = if kept == 0 {
            Counted::default()
        } else {
            let prev = self.previous.as_ref()?;
            let counted = prev.counted.as_deref()?;
            let same = matches!((&prev.leaves, &segs.resumed),
                (Some(a), Some(b)) if std::sync::Arc::ptr_eq(a, b));
            let unmarked = |mark: Option<usize>| mark.is_none_or(|m| m >= segs.first_block);
            let at = *counted.get(kept - 1)?;
            if !same
                || !unmarked(prev.mark)
                || !unmarked(wire.report.lookback_breakpoint)
                || at.blocks != segs.first_block
            {
                return None;
            }
            at
        };
        let tools: Vec<&RawValue> = match &segs.tools {
            Some(r) => serde_json::from_str(body.get(r.clone())?).ok()?,
            None => Vec::new(),
        };
        let system = match &segs.system {
            Some(r) => Some(body.get(r.clone())?),
            None => None,
        };
        let mut cut = self.head(&tools, system).ok()?;
        // The new wire messages, cut on their own (offsets from 0), counted on from the kept.
        let mut fresh = Cut {
            bytes: Vec::with_capacity(segs.messages.iter().map(|t| t.span.len()).sum::<usize>()),
            segments: Vec::with_capacity(segs.messages.len()),
            tools: Vec::new(),
            blocks: base.blocks,
            bounds: Vec::with_capacity(segs.blocks.len()),
            counted: vec![base],
            top_level: false,
            by_value: false,
            immediate_tool: false,
            markers: self.markers,
        };
        for (j, t) in segs.messages.iter().enumerate() {
            let text = body
                .get(t.span.clone())
                .filter(|t| t.starts_with('{') && t.ends_with('}'))?;
            let blocks = segs.blocks.get(
                t.blocks.start.checked_sub(segs.first_block)?..t.blocks.end - segs.first_block,
            )?;
            let ranges = blocks
                .iter()
                .map(|b| {
                    Some((
                        b.span.start.checked_sub(t.span.start)?,
                        b.span.end.checked_sub(t.span.start)?,
                    ))
                })
                .collect::<Option<Vec<_>>>()?;
            fresh.push_message(kept + j, text, Some(&ranges));
        }
        fresh.counted.remove(0);
        let last = fresh.counted.last().copied().unwrap_or(base);
        // Everything outside the messages array is its head (and the closing `]}`); neither
        // key can straddle a message's bounds (they hold no bracket, brace or comma).
        let head_text = body.get(..segs.messages_at)?;
        let markers = |t: &str| t.matches(MARKER).count();
        let inner = |r: &Option<std::ops::Range<usize>>| {
            r.as_ref()
                .and_then(|r| body.get(r.clone()))
                .map_or(0, markers)
        };
        cut.blocks = last.blocks;
        cut.top_level = markers(head_text) > inner(&segs.tools) + inner(&segs.system);
        cut.by_value = head_text.contains(BY_VALUE) || last.by_value > 0;
        self.observe_after_kept(cut, fresh, (kept, base), wire.series_start)
    }

    /// The end of [`observe_segments`](Self::observe_segments) and of
    /// [`observe_kept`](Self::observe_kept): the request whose head is cut as `cut`, whose
    /// first `kept` wire messages are the previous request's (`base` counts them) and whose
    /// new ones are cut as `fresh` (offsets from 0), metered without reading the kept ones.
    fn observe_after_kept(
        &mut self,
        mut cut: Cut,
        fresh: Cut,
        (kept, base): (usize, Counted),
        series_start: Option<SeriesStart>,
    ) -> Option<(MeterRow, Path)> {
        if kept > 0 && self.extends_in_place(&cut, &fresh, kept) {
            let (hc, at, kb) = {
                let prev = self.previous.as_ref()?;
                let hc = prev.head_spans();
                let at = prev
                    .segments
                    .get(hc + kept)
                    .map_or(prev.bytes.len(), |s| s.start);
                (hc, at, base.bounds)
            };
            let total = at + fresh.bytes.len();
            // The kept messages' ends, then the new ones'; the hashes go on from the
            // previous cut's, which this one extends. Both are taken over, not copied: only
            // what is new is read.
            let (bounds, prints, written) = {
                let prev = self.previous.as_mut()?;
                let grown = prev.bytes.len() - at;
                let more = fresh.bytes.get(grown..)?;
                if prev.bounds.len() < kb || prev.prints.is_none() {
                    return None;
                }
                let mut bounds = std::mem::take(&mut prev.bounds);
                bounds.truncate(kb);
                bounds.extend(fresh.bounds.iter().map(|b| Bound {
                    key: b.key + at,
                    end: b.end + at,
                    ..*b
                }));
                let offsets = self.cache.offsets(prev.bytes.len(), total, &bounds);
                let prints = prev.prints.take()?.extended(more, &offsets);
                (bounds, prints, prev.bytes.len())
            };
            cut.bounds = bounds;
            let row = self.row(&cut, total as u64, None, &prints, series_start);
            // The previous request wrote its own units already, unless they were forgotten.
            self.cache
                .write_after(&prints, &cut.bounds, cut.top_level, written);
            let mut prev = self.previous.take()?;
            self.rate_before = prev.rate;
            // The previous cut is a prefix of this one: append what follows it.
            let grown = prev.bytes.len() - at;
            prev.bytes.extend_from_slice(&fresh.bytes[grown..]);
            prev.bounds = std::mem::take(&mut cut.bounds);
            prev.prints = Some(prints);
            if hc == cut.segments.len() {
                prev.segments[..hc].clone_from_slice(&cut.segments);
            } else {
                prev.segments.splice(..hc, cut.segments.iter().cloned());
            }
            let hc = cut.segments.len();
            prev.segments.truncate(hc + kept);
            prev.segments
                .extend(fresh.segments.into_iter().map(|s| Span {
                    start: s.start + at,
                    end: s.end + at,
                    ..s
                }));
            let counted = prev.counted.get_or_insert_with(Vec::new);
            counted.truncate(kept);
            counted.extend(fresh.counted);
            prev.tools = cut.tools;
            prev.blocks = cut.blocks;
            prev.by_value = cut.by_value;
            prev.rate = None;
            prev.row = true;
            self.previous = Some(prev);
            self.rows.push(row);
            self.departures.push(None);
            return Some((row, Path::Extended));
        }
        // Otherwise the whole cut: the kept wire messages copied from the previous cut.
        if kept > 0 {
            let prev = self.previous.as_ref()?;
            let hc = prev.head_spans();
            let from = prev.segments.get(hc).map_or(prev.bytes.len(), |s| s.start);
            let to = prev
                .segments
                .get(hc + kept)
                .map_or(prev.bytes.len(), |s| s.start);
            let shift = cut.bytes.len() as isize - from as isize;
            cut.bytes.extend_from_slice(&prev.bytes[from..to]);
            cut.segments
                .extend(prev.segments[hc..hc + kept].iter().map(|s| Span {
                    segment: s.segment.clone(),
                    start: (s.start as isize + shift) as usize,
                    end: (s.end as isize + shift) as usize,
                }));
            cut.counted
                .extend_from_slice(prev.counted.as_deref()?.get(..kept)?);
            cut.bounds
                .extend(prev.bounds.get(..base.bounds)?.iter().map(|b| Bound {
                    key: (b.key as isize + shift) as usize,
                    end: (b.end as isize + shift) as usize,
                    ..*b
                }));
        }
        let at = cut.bytes.len();
        cut.bytes.extend_from_slice(&fresh.bytes);
        cut.segments
            .extend(fresh.segments.into_iter().map(|s| Span {
                start: s.start + at,
                end: s.end + at,
                ..s
            }));
        cut.counted.extend(fresh.counted);
        cut.bounds.extend(fresh.bounds.into_iter().map(|b| Bound {
            key: b.key + at,
            end: b.end + at,
            ..b
        }));
        Some((self.observe_cut(cut, series_start), Path::Whole))
    }

    /// Whether the request whose head is `head` and whose new wire messages are `fresh`,
    /// after `kept` wire messages proven to be the previous request's, extends the previous
    /// request: its head is the previous head, byte for byte, and the previous cut's bytes
    /// after the kept messages are a prefix of `fresh`. Reads the head and the previous
    /// request's own new messages only.
    fn extends_in_place(&self, head: &Cut, fresh: &Cut, kept: usize) -> bool {
        let Some(prev) = self.previous.as_ref().filter(|p| p.prints.is_some()) else {
            return false;
        };
        let hc = prev.head_spans();
        let from = prev.segments.get(hc).map_or(prev.bytes.len(), |s| s.start);
        let Some(to) = prev
            .segments
            .get(hc + kept)
            .map(|s| s.start)
            .or((prev.segments.len() == hc + kept).then_some(prev.bytes.len()))
        else {
            return false;
        };
        prev.bytes[..from] == head.bytes[..] && fresh.bytes.starts_with(&prev.bytes[to..])
    }

    /// [`observe`](Self::observe) on a body already cut.
    fn observe_cut(&mut self, cut: Cut, series_start: Option<SeriesStart>) -> MeterRow {
        let departure = self.previous.as_ref().and_then(|p| departure(p, &cut));
        let total = cut.bytes.len() as u64;
        let prints = self.prints(&cut);
        let row = self.row(
            &cut,
            total,
            departure.as_ref().map(|d| d.offset),
            &prints,
            series_start,
        );
        self.cache.write(&prints, &cut.bounds, cut.top_level);
        self.rate_before = self.previous.take().and_then(|p| p.rate);
        self.previous = Some(Previous::of(cut, prints, true));
        self.rows.push(row);
        self.departures.push(departure);
        row
    }

    /// The prefix hashes of `cut` its vendor's rule reads at.
    fn prints(&self, cut: &Cut) -> Prints {
        let offsets = self.cache.offsets(0, cut.bytes.len(), &cut.bounds);
        Prints::of(&cut.bytes, &offsets)
    }

    /// The row of a request whose cut is `total` bytes long with `cut`'s flags and block
    /// ends, and whose prefix hashes are `prints`, against the cache and the previous
    /// request: `common` is where they depart (`None`: it extends the previous one).
    fn row(
        &self,
        cut: &Cut,
        total: u64,
        common: Option<u64>,
        prints: &Prints,
        series_start: Option<SeriesStart>,
    ) -> MeterRow {
        let (cached, best, kept) = match &self.previous {
            None => (0, 0, 0),
            Some(prev) => {
                let common = common.unwrap_or(prev.bytes.len() as u64);
                let cached = self.cache.read(prints, &cut.bounds, cut.top_level, common);
                // The best client asks for caching, marks the lookback and keeps the previous
                // request, read by the same rule: its unit and minimum length still apply,
                // and an older entry this request reads counts too.
                let shared = (prev.bytes.len() as u64).min(total);
                let kept = self.cache.whole(shared);
                let best = if series_start.is_some_and(SeriesStart::by_caller) {
                    cached
                } else {
                    cached.max(self.cache.best(shared))
                };
                // Without a tool that is immediately available, the first tool defined by value
                // changes the start of the rendered prompt: a full miss no client avoids once
                // its declarations are so (the vendor's advice: keep one non-deferred tool).
                if cut.by_value && !prev.by_value && !cut.immediate_tool {
                    (0, 0, kept)
                } else {
                    (cached, best, kept)
                }
            }
        };
        MeterRow {
            total_bytes: total,
            cached_bytes: cached,
            best_bytes: best,
            kept,
            series_start,
            measured: None,
            expected: None,
        }
    }

    /// Where `body` would depart from the route's previous request, without metering it:
    /// what a loop asks before sending. `None` when there is no previous request or `body`
    /// extends it (an identical body included). The offset is the first byte where the two
    /// cuts ([`prefix_bytes`](Self::prefix_bytes)) differ.
    ///
    /// ```
    /// use mektpoy::{Meter, route_for, meter::{Segment, ToolChange}};
    /// let mut meter = Meter::new(&route_for("deepseek", "deepseek-flash"));
    /// let tools = r#"[{"type":"function","function":{"name":"read"}},{"type":"function","function":{"name":"shell"}}]"#;
    /// meter.observe(&format!(r#"{{"tools":{tools},"messages":[]}}"#), None)?;
    /// let fewer = r#"{"tools":[{"type":"function","function":{"name":"read"}}],"messages":[]}"#;
    /// let d = meter.departure_of(fewer)?.unwrap();
    /// assert_eq!(d.segment, Segment::Tool { index: 1, name: "shell".into() });
    /// assert_eq!(d.tools, [ToolChange::Removed { name: "shell".into() }]);
    /// assert_eq!(meter.rows().len(), 1, "nothing metered");
    /// # Ok::<(), mektpoy::meter::MeterError>(())
    /// ```
    ///
    /// # Errors
    /// [`MeterError::Body`] for a body that is not a request body.
    pub fn departure_of(&self, body: &str) -> Result<Option<Departure>, MeterError> {
        let cut = self.cut(body)?;
        Ok(self.previous.as_ref().and_then(|p| departure(p, &cut)))
    }

    /// Whether the meter has a previous request to compare the next one with (an observed
    /// or [primed](Self::prime) body).
    pub fn has_previous(&self) -> bool {
        self.previous.is_some()
    }

    /// Beside each row of [`rows`](Self::rows), at the same index: where its request departed
    /// from the previous request of the route, `None` when it extended it (or had none). Rows
    /// restored from a version-1 save have `None`: that version did not keep departures.
    pub fn departures(&self) -> &[Option<Departure>] {
        &self.departures
    }

    /// Attaches the provider's usage for the latest observed request (decoded from its response,
    /// [reference §12](crate::manual::reference#12-provider-responses-and-usage)) and returns the
    /// row with it.
    ///
    /// # Errors
    /// [`MeterError::NoRequest`] before any request was observed;
    /// [`MeterError::AlreadyMeasured`] when the latest row already has figures. The meter is
    /// unchanged either way.
    pub fn observe_usage(&mut self, usage: &Usage) -> Result<MeterRow, MeterError> {
        self.observe_measured(Measured::from(usage))
    }

    /// [`observe_usage`](Self::observe_usage) with the figures given by hand.
    ///
    /// # Errors
    /// As [`observe_usage`](Self::observe_usage).
    pub fn observe_measured(&mut self, measured: Measured) -> Result<MeterRow, MeterError> {
        let index = self
            .rows
            .len()
            .checked_sub(1)
            .ok_or(MeterError::NoRequest)?;
        let row = &mut self.rows[index];
        if row.measured.is_some() {
            return Err(MeterError::AlreadyMeasured { row: index });
        }
        let own = Rate {
            tokens: measured.prompt_tokens,
            bytes: row.total_bytes,
        };
        // The cache holds the previous prompt: its own rate converts the shared bytes best.
        let read_tokens = self
            .rate_before
            .and_then(|r| r.convert(row.cached_bytes))
            .or_else(|| own.convert(row.cached_bytes))
            .unwrap_or(0);
        row.measured = Some(measured);
        row.expected = Some(Expected {
            read_tokens,
            block_tokens: self.block_tokens,
        });
        if let Some(previous) = self.previous.as_mut().filter(|p| p.row) {
            previous.rate = Some(own);
        }
        Ok(*row)
    }

    /// Makes `previous_body` the route's previous request without adding a row: what a
    /// resumed process calls with the last request it rebuilds from the log, so that the
    /// next request is compared with it. The rows stay as they are (empty in a new meter).
    ///
    /// # Errors
    /// [`MeterError::Body`] for a body that is not a request body; the meter is unchanged.
    pub fn prime(&mut self, previous_body: &str) -> Result<(), MeterError> {
        let cut = self.cut(previous_body)?;
        let prints = self.prints(&cut);
        // It was sent: the provider holds what it wrote.
        self.cache.write(&prints, &cut.bounds, cut.top_level);
        self.rate_before = None;
        self.previous = Some(Previous::of(cut, prints, false));
        Ok(())
    }

    /// Drops every cache entry the meter models, keeping its rows and the previous request
    /// (departures still compare with it): the next request reads nothing. Entries otherwise
    /// live as long as the meter, because the meter never sees the clock and vendors keep
    /// them for minutes (Anthropic 5 minutes or an hour, refreshed on each read; DeepSeek and
    /// OpenAI unspecified, usually minutes to hours): a loop that paused longer than its
    /// vendor's lifetime calls this before its next request.
    pub fn forget_cache(&mut self) {
        self.cache.forget();
    }

    /// The meter's state as a small versioned JSON text: the route it meters (with the rules
    /// that shape a row), the previous request's cut (its concatenated segment bytes, block
    /// count, whether it defined a tool by value, and its tools by name with a stable hash of
    /// each), the cache entries (`[length, hash]`) and every row with its departure.
    /// [`Meter::restore`] gives back a meter whose next rows are exactly this one's. The price
    /// is not saved: set it again with [`with_price`](Self::with_price).
    ///
    /// The previous request's bytes are the bulk, kept once: departures and, on a vendor
    /// without a documented cache, the next estimate are the common prefix with them, which no
    /// digest short of the bytes determines to the byte. A caller that can rebuild that request (from the log) may instead start a new
    /// meter and [`prime`](Self::prime) it, keeping only the rows it wants.
    pub fn save(&self) -> String {
        let saved = Saved {
            version: SAVE_VERSION,
            route: Cow::Borrowed(&self.fingerprint),
            previous: self.previous.as_ref().map(|p| SavedPrevious {
                // The segments are slices of a JSON text and `#`: always UTF-8.
                prefix: String::from_utf8_lossy(&p.bytes),
                blocks: p.blocks,
                by_value: p.by_value,
                rate: p.rate,
                row: p.row,
                tools: Some(
                    p.tools
                        .iter()
                        .map(|t| (Cow::Borrowed(t.name.as_str()), t.hash, t.deferred))
                        .collect(),
                ),
            }),
            rate_before: self.rate_before,
            cache: Some(self.cache.entries().collect()),
            rows: self.rows.iter().map(SavedRow::from).collect(),
            departures: Some(
                self.departures
                    .iter()
                    .map(|d| d.as_ref().map(SavedDeparture::from))
                    .collect(),
            ),
        };
        serde_json::to_string(&saved).unwrap_or_default()
    }

    /// A meter for `route` from what [`save`](Self::save) wrote, without a price.
    ///
    /// # Errors
    /// [`MeterError::Restore`] when `saved` is not a saved meter, has another version, or
    /// was saved for another route (or one whose meter rules have changed since).
    pub fn restore(route: &Route, saved: &str) -> Result<Meter, MeterError> {
        let fault = |reason| MeterError::Restore { reason };
        let version: SavedVersion = serde_json::from_str(saved)
            .map_err(|e| fault(RestoreFault::Malformed(e.to_string())))?;
        if !(1..=SAVE_VERSION).contains(&version.version) {
            return Err(fault(RestoreFault::Version(version.version)));
        }
        let saved: Saved<'_> = serde_json::from_str(saved)
            .map_err(|e| fault(RestoreFault::Malformed(e.to_string())))?;
        let mut meter = Meter::new(route);
        if saved.route != meter.fingerprint {
            return Err(fault(RestoreFault::Route {
                saved: saved.route.into_owned(),
                route: meter.fingerprint,
            }));
        }
        let section = meter.deferred_section_bytes as usize;
        meter.previous = saved.previous.map(|p| {
            let bytes = p.prefix.into_owned().into_bytes();
            let tools = p.tools.map(|tools| {
                tools
                    .into_iter()
                    .map(|(name, hash, deferred)| ToolEntry {
                        name: name.into_owned(),
                        hash,
                        deferred,
                    })
                    .collect()
            });
            let (segments, tools) = resegment(&bytes, section, tools);
            Previous {
                bytes,
                segments,
                bounds: Vec::new(),
                prints: None,
                tools,
                counted: None,
                leaves: None,
                mark: None,
                blocks: p.blocks,
                by_value: p.by_value,
                rate: p.rate,
                row: p.row,
            }
        });
        match (saved.cache, &meter.previous) {
            (Some(entries), _) => meter.cache.restore(entries),
            (None, Some(p)) => {
                // Its last block: where automatic caching wrote.
                let last = p.segments.last().and_then(|s| {
                    let text = std::str::from_utf8(p.bytes.get(s.start..s.end)?).ok()?;
                    let ranges = content_ranges(text).unwrap_or_default();
                    let b = *message_bounds(text, text.len(), &ranges).last()?;
                    Some(Bound {
                        key: b.key + s.start,
                        end: b.end + s.start,
                        mark: false,
                    })
                });
                meter.cache.seed(&p.bytes, last);
            }
            (None, None) => {}
        }
        meter.rate_before = saved.rate_before;
        meter.rows = saved.rows.into_iter().map(MeterRow::from).collect();
        meter.departures = match saved.departures {
            Some(d) if d.len() == meter.rows.len() => {
                d.into_iter().map(|d| d.map(Departure::from)).collect()
            }
            Some(_) => {
                return Err(fault(RestoreFault::Malformed(
                    "one departure per row expected".to_owned(),
                )));
            }
            None => vec![None; meter.rows.len()],
        };
        Ok(meter)
    }

    /// Every row so far.
    pub fn rows(&self) -> &[MeterRow] {
        &self.rows
    }

    /// Totals, token estimates and, with a price, the estimated cost; the measured figures
    /// summed over the rows that have them, and the number of unexplained misses.
    pub fn report(&self) -> MeterReport {
        let tokens = |b: u64| b.div_ceil(4);
        let sum =
            |f: &dyn Fn(&MeterRow) -> u64| self.rows.iter().map(f).fold(0u64, u64::saturating_add);
        let total_tokens = sum(&|r| tokens(r.total_bytes));
        let cached_tokens = sum(&|r| tokens(r.cached_bytes));
        let mut measured = MeasuredTotals::default();
        for m in self.rows.iter().filter_map(|r| r.measured) {
            measured.requests += 1;
            measured.prompt_tokens = measured.prompt_tokens.saturating_add(m.prompt_tokens);
            if let Some(read) = m.cache_read_tokens {
                measured.read_reported += 1;
                measured.cache_read_tokens = measured.cache_read_tokens.saturating_add(read);
            }
            if let Some(write) = m.cache_write_tokens {
                measured.write_reported += 1;
                measured.cache_write_tokens = measured.cache_write_tokens.saturating_add(write);
            }
        }
        let cost = self.price.as_ref().map(|p| {
            self.rows
                .iter()
                .map(|r| {
                    let cached = tokens(r.cached_bytes) as f64;
                    let new = tokens(r.total_bytes) as f64 - cached;
                    (new * p.input_per_mtok * p.cache_write_multiplier
                        + cached * p.cache_read_per_mtok)
                        / 1e6
                })
                .sum()
        });
        MeterReport {
            requests: self.rows.len(),
            total_bytes: sum(&|r| r.total_bytes),
            cached_bytes: sum(&|r| r.cached_bytes),
            best_bytes: sum(&|r| r.best_bytes),
            total_tokens,
            cached_tokens,
            best_tokens: sum(&|r| tokens(r.best_bytes)),
            cost,
            measured,
            unexplained_misses: self
                .rows
                .iter()
                .filter(|r| r.unexplained_miss().is_some())
                .count(),
        }
    }
}

/// The saved form (versions 1 to 3). Field names are camelCase, as in the session log.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Saved<'a> {
    version: u64,
    #[serde(borrow)]
    route: Cow<'a, str>,
    #[serde(borrow)]
    previous: Option<SavedPrevious<'a>>,
    rate_before: Option<Rate>,
    /// Version 3: the cache entries, `[length, hash]`, in order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cache: Option<Vec<(u64, u64)>>,
    rows: Vec<SavedRow>,
    /// Version 2: one per row.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    departures: Option<Vec<Option<SavedDeparture>>>,
}

/// Only the version, read first so that another version is refused as such.
#[derive(Deserialize)]
struct SavedVersion {
    version: u64,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SavedPrevious<'a> {
    #[serde(borrow)]
    prefix: Cow<'a, str>,
    blocks: usize,
    by_value: bool,
    rate: Option<Rate>,
    row: bool,
    /// Version 2: every tool of the body, `[name, hash, deferred]`.
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    tools: Option<Vec<SavedTool<'a>>>,
}

/// A saved tool: `[name, hash, deferred]`.
type SavedTool<'a> = (Cow<'a, str>, Option<u64>, bool);

/// A departure: `[offset, previous bytes, total bytes, segment, block, tool changes]`.
#[derive(Serialize, Deserialize)]
struct SavedDeparture(
    u64,
    u64,
    u64,
    SavedSegment,
    Option<usize>,
    Vec<SavedToolChange>,
);

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum SavedSegment {
    Tool(usize, String),
    DeferredTools,
    System,
    Message(usize),
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum SavedToolChange {
    Added(String),
    Removed(String),
    Redefined(String),
    Reordered(String),
    Deferred(String, bool),
}

impl From<&Departure> for SavedDeparture {
    fn from(d: &Departure) -> Self {
        let segment = match &d.segment {
            Segment::Tool { index, name } => SavedSegment::Tool(*index, name.clone()),
            Segment::DeferredTools => SavedSegment::DeferredTools,
            Segment::System => SavedSegment::System,
            Segment::Message { index } => SavedSegment::Message(*index),
        };
        let tools = d
            .tools
            .iter()
            .map(|t| match t.clone() {
                ToolChange::Added { name } => SavedToolChange::Added(name),
                ToolChange::Removed { name } => SavedToolChange::Removed(name),
                ToolChange::Redefined { name } => SavedToolChange::Redefined(name),
                ToolChange::Reordered { name } => SavedToolChange::Reordered(name),
                ToolChange::Deferred { name, deferred } => {
                    SavedToolChange::Deferred(name, deferred)
                }
            })
            .collect();
        SavedDeparture(
            d.offset,
            d.previous_bytes,
            d.total_bytes,
            segment,
            d.block,
            tools,
        )
    }
}

impl From<SavedDeparture> for Departure {
    fn from(
        SavedDeparture(offset, previous_bytes, total_bytes, segment, block, tools): SavedDeparture,
    ) -> Self {
        Departure {
            offset,
            previous_bytes,
            total_bytes,
            segment: match segment {
                SavedSegment::Tool(index, name) => Segment::Tool { index, name },
                SavedSegment::DeferredTools => Segment::DeferredTools,
                SavedSegment::System => Segment::System,
                SavedSegment::Message(index) => Segment::Message { index },
            },
            block,
            tools: tools
                .into_iter()
                .map(|t| match t {
                    SavedToolChange::Added(name) => ToolChange::Added { name },
                    SavedToolChange::Removed(name) => ToolChange::Removed { name },
                    SavedToolChange::Redefined(name) => ToolChange::Redefined { name },
                    SavedToolChange::Reordered(name) => ToolChange::Reordered { name },
                    SavedToolChange::Deferred(name, deferred) => {
                        ToolChange::Deferred { name, deferred }
                    }
                })
                .collect(),
        }
    }
}

/// One row: `[total, cached, best, series start, measured, expected, kept]`, where measured
/// is `[prompt, read, write]` and expected `[read, block]`; kept is version 3's.
#[derive(Serialize, Deserialize)]
struct SavedRow(
    u64,
    u64,
    u64,
    Option<SavedSeriesStart>,
    Option<(u64, Option<u64>, Option<u64>)>,
    Option<(u64, u32)>,
    #[serde(default)] Option<u64>,
);

#[derive(Clone, Copy, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum SavedSeriesStart {
    First,
    Asked,
    Rewound,
    PromptReplaced,
    Redeclared,
}

impl From<&MeterRow> for SavedRow {
    fn from(r: &MeterRow) -> Self {
        let start = r.series_start.map(|s| match s {
            SeriesStart::First => SavedSeriesStart::First,
            SeriesStart::Asked => SavedSeriesStart::Asked,
            SeriesStart::Rewound => SavedSeriesStart::Rewound,
            SeriesStart::PromptReplaced => SavedSeriesStart::PromptReplaced,
            SeriesStart::Redeclared => SavedSeriesStart::Redeclared,
        });
        SavedRow(
            r.total_bytes,
            r.cached_bytes,
            r.best_bytes,
            start,
            r.measured
                .map(|m| (m.prompt_tokens, m.cache_read_tokens, m.cache_write_tokens)),
            r.expected.map(|e| (e.read_tokens, e.block_tokens)),
            Some(r.kept),
        )
    }
}

impl From<SavedRow> for MeterRow {
    fn from(SavedRow(total, cached, best, start, measured, expected, kept): SavedRow) -> Self {
        MeterRow {
            total_bytes: total,
            cached_bytes: cached,
            best_bytes: best,
            kept: kept.unwrap_or(best),
            series_start: start.map(|s| match s {
                SavedSeriesStart::First => SeriesStart::First,
                SavedSeriesStart::Asked => SeriesStart::Asked,
                SavedSeriesStart::Rewound => SeriesStart::Rewound,
                SavedSeriesStart::PromptReplaced => SeriesStart::PromptReplaced,
                SavedSeriesStart::Redeclared => SeriesStart::Redeclared,
            }),
            measured: measured.map(|(p, r, w)| Measured::new(p, r, w)),
            expected: expected.map(|(read_tokens, block_tokens)| Expected {
                read_tokens,
                block_tokens,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::route::WireApi;

    fn meter(section: u32) -> Meter {
        let r = Route::builder("p", "m", WireApi::Messages)
            .deferred_section_bytes(section)
            .build()
            .unwrap();
        Meter::new(&r)
    }

    #[test]
    fn segments_in_provider_order_with_a_fixed_deferred_section() {
        let m = meter(3);
        let body = r#"{"model":"m","max_tokens":1,"system":"S","tools":[{"name":"a"},{"name":"b","defer_loading":true}],"messages":[{"role":"user","content":"hi"}]}"#;
        assert_eq!(
            String::from_utf8(m.prefix_bytes(body).unwrap()).unwrap(),
            r#"{"name":"a"}###"S"{"role":"user","content":"hi"}"#
        );
        let no_deferred = r#"{"tools":[{"name":"a"}],"messages":[]}"#;
        assert_eq!(m.prefix_bytes(no_deferred).unwrap(), br#"{"name":"a"}"#);
    }

    #[test]
    fn cached_is_the_common_prefix_and_best_follows_the_series_rule() {
        let mut m = meter(0);
        let one = r#"{"messages":[{"a":1}]}"#;
        let two = r#"{"messages":[{"a":1},{"b":2}]}"#;
        let rewritten = r#"{"messages":[{"a":9},{"b":2}]}"#;
        let r1 = m.observe(one, Some(SeriesStart::Asked)).unwrap();
        assert_eq!((r1.cached_bytes, r1.best_bytes), (0, 0));
        let r2 = m.observe(two, None).unwrap();
        assert_eq!((r2.total_bytes, r2.cached_bytes, r2.best_bytes), (14, 7, 7));
        let r3 = m.observe(rewritten, None).unwrap();
        assert_eq!(
            (r3.cached_bytes, r3.best_bytes),
            (5, 14),
            "a loss the design did not plan"
        );
        let r4 = m.observe(one, Some(SeriesStart::Asked)).unwrap();
        assert_eq!(
            (r4.cached_bytes, r4.best_bytes),
            (5, 5),
            "a series start: best = actual"
        );
        let report = m.report();
        assert_eq!(report.requests, 4);
        assert_eq!(report.cached_bytes, 17);
        assert_eq!(report.total_tokens, 2 + 4 + 4 + 2);
        assert_eq!(report.cost, None);
        assert!(m.observe("[]", None).is_err());
        assert_eq!(
            m.rows().len(),
            4,
            "a refused body leaves the meter unchanged"
        );
    }

    fn anthropic_like(min_cache_tokens: u32) -> Meter {
        Meter::new(
            &Route::builder("anthropic", "m", WireApi::Messages)
                .auto_cache(true)
                .min_cache_tokens(min_cache_tokens)
                .build()
                .unwrap(),
        )
    }

    fn body(blocks: usize, marker_on: Option<usize>, top_level: bool) -> String {
        let blocks: Vec<String> = (0..blocks)
            .map(|i| {
                let mark = if marker_on == Some(i) {
                    r#","cache_control":{"type":"ephemeral"}"#
                } else {
                    ""
                };
                format!(r#"{{"type":"text","text":"block {i} with some words"{mark}}}"#)
            })
            .collect();
        let top = if top_level {
            r#""cache_control":{"type":"ephemeral"},"#
        } else {
            ""
        };
        format!(
            r#"{{"model":"m",{top}"messages":[{{"role":"user","content":[{}]}}]}}"#,
            blocks.join(",")
        )
    }

    #[test]
    fn breakpoints_are_cut_wherever_the_key_sits() {
        for (marked, plain) in [
            (
                r#"{"type":"text","text":"hi","cache_control":{"type":"ephemeral"}}"#,
                r#"{"type":"text","text":"hi"}"#,
            ),
            (
                r#"{"cache_control":{"type":"ephemeral","ttl":"1h"},"text":"hi","type":"text"}"#,
                r#"{"text":"hi","type":"text"}"#,
            ),
            (
                r#"{"text":"a \"cache_control\":{ in a string"}"#,
                r#"{"text":"a \"cache_control\":{ in a string"}"#,
            ),
            // A schema's property of that name is prompt; the tool's own breakpoint is not.
            (
                r#"{"name":"m","input_schema":{"properties":{"cache_control":{"type":"string"}}},"cache_control":{"type":"ephemeral"}}"#,
                r#"{"name":"m","input_schema":{"properties":{"cache_control":{"type":"string"}}}}"#,
            ),
            (
                r#"{"input_schema":{"properties":{"cache_control":{"type":"object","properties":{}}}}}"#,
                r#"{"input_schema":{"properties":{"cache_control":{"type":"object","properties":{}}}}}"#,
            ),
        ] {
            assert_eq!(without_markers(marked), plain);
        }
    }

    /// Chat has no markers: a tool whose schema has a property named `cache_control` is
    /// metered whole, as the vendor counts it (the random loop's first chat finding: the meter
    /// left the property out, 52 bytes short of the stand-in's prompt).
    #[test]
    fn a_chat_schema_property_named_cache_control_is_prompt() {
        let tool = r#"{"type":"function","function":{"name":"marked","parameters":{"type":"object","properties":{"cache_control":{"type":"string","description":"v1"}}}}}"#;
        let body = format!(
            r#"{{"model":"gpt-5.5","messages":[{{"role":"user","content":"hi"}}],"tools":[{tool}]}}"#
        );
        let user = r#"{"role":"user","content":"hi"}"#;
        let route = crate::route_for("openai-compatible", "gpt-5.5");
        let row = Meter::new(&route).observe(&body, None).unwrap();
        assert_eq!(row.total_bytes, (tool.len() + user.len()) as u64);
        let deepseek = Route::builder("deepseek", "deepseek-v4-pro", WireApi::OpenAiChat)
            .build()
            .unwrap();
        let row = Meter::new(&deepseek).observe(&body, None).unwrap();
        assert_eq!(row.total_bytes, (tool.len() + user.len()) as u64);
    }

    #[test]
    fn an_opt_in_cache_reads_nothing_unless_asked() {
        let mut m = anthropic_like(0);
        m.observe(&body(2, None, false), Some(SeriesStart::First))
            .unwrap();
        let row = m.observe(&body(3, None, false), None).unwrap();
        assert_eq!(row.cached_bytes, 0, "no cache_control: nothing cached");
        assert!(row.best_bytes > 0, "the best client asks: a miss");
        let row = m.observe(&body(4, None, true), None).unwrap();
        assert_eq!(
            row.cached_bytes, 0,
            "asked, but no earlier request wrote an entry"
        );
        let row = m.observe(&body(5, None, true), None).unwrap();
        assert!(row.cached_bytes > 0, "the entry the previous request wrote");
    }

    #[test]
    fn automatic_caching_looks_back_twenty_blocks_unless_a_breakpoint_marks_the_entry() {
        let mut m = anthropic_like(0);
        m.observe(&body(2, None, true), Some(SeriesStart::First))
            .unwrap();
        let within = m.observe(&body(21, None, true), None).unwrap();
        assert!(within.cached_bytes > 0, "19 new blocks: found");
        let beyond = m.observe(&body(41, None, true), None).unwrap();
        assert_eq!(beyond.cached_bytes, 0, "20 new blocks: out of the window");
        assert!(beyond.best_bytes > 0);
        let marked = m.observe(&body(61, Some(40), true), None).unwrap();
        assert!(marked.cached_bytes > 0, "the previous last block is marked");
        // The marker itself is not part of the prompt: the next request still extends it.
        let next = m.observe(&body(62, None, true), None).unwrap();
        // Everything up to the message's closing `]}` is shared.
        assert_eq!(next.cached_bytes, marked.total_bytes - 2);
    }

    #[test]
    fn the_first_by_value_definition_without_an_immediate_tool_is_a_full_miss() {
        let body = |tools: &str, definition: bool| {
            let def = if definition {
                r#",{"role":"system","content":[{"type":"tool_addition","tool":{"type":"tool_definition","definition":{"name":"b"}}}]}"#
            } else {
                ""
            };
            format!(
                r#"{{"tools":[{tools}],"messages":[{{"role":"user","content":"a long enough prompt"}}{def}]}}"#
            )
        };
        let deferred_only = r#"{"name":"c","defer_loading":true}"#;
        let mut m = meter(0);
        m.observe(&body(deferred_only, false), Some(SeriesStart::First))
            .unwrap();
        let first = m.observe(&body(deferred_only, true), None).unwrap();
        assert_eq!((first.cached_bytes, first.best_bytes), (0, 0));
        let later = m.observe(&body(deferred_only, true), None).unwrap();
        assert_eq!(
            later.cached_bytes, later.total_bytes,
            "only the first one misses"
        );
        // With an immediately available tool the definition extends the prefix.
        let mut m = meter(0);
        m.observe(&body(r#"{"name":"a"}"#, false), Some(SeriesStart::First))
            .unwrap();
        let row = m.observe(&body(r#"{"name":"a"}"#, true), None).unwrap();
        assert!(row.cached_bytes > 0);
    }

    #[test]
    fn below_the_minimum_cacheable_length_nothing_is_cached() {
        let mut m = anthropic_like(512);
        m.observe(&body(2, None, true), Some(SeriesStart::First))
            .unwrap();
        let row = m.observe(&body(3, None, true), None).unwrap();
        assert_eq!((row.cached_bytes, row.best_bytes), (0, 0));
        let mut m = anthropic_like(10);
        m.observe(&body(2, None, true), Some(SeriesStart::First))
            .unwrap();
        assert!(m.observe(&body(3, None, true), None).unwrap().cached_bytes > 0);
    }

    #[test]
    fn only_a_series_the_caller_opened_excuses_a_loss() {
        let mut m = meter(0);
        m.observe(r#"{"messages":[{"a":1}]}"#, None).unwrap();
        let redeclared = m
            .observe(r#"{"messages":[{"a":2}]}"#, Some(SeriesStart::Redeclared))
            .unwrap();
        assert!(
            redeclared.best_bytes > redeclared.cached_bytes,
            "a rule's loss is a miss"
        );
        let rewound = m
            .observe(r#"{"messages":[{"a":3}]}"#, Some(SeriesStart::Rewound))
            .unwrap();
        assert_eq!(
            rewound.best_bytes, rewound.cached_bytes,
            "the caller's choice"
        );
    }

    #[test]
    fn cost_uses_new_and_cached_tokens_with_the_write_surcharge() {
        let mut m = meter(0).with_price(Price {
            input_per_mtok: 4.0,
            cache_read_per_mtok: 0.4,
            cache_write_multiplier: 1.25,
            currency: "USD".into(),
            source: "test".into(),
        });
        let body = format!(r#"{{"messages":["{}"]}}"#, "x".repeat(3998)); // 4000 bytes
        m.observe(&body, Some(SeriesStart::First)).unwrap();
        m.observe(&body, None).unwrap();
        let cost = m.report().cost.unwrap();
        let expected = (1000.0 * 4.0 * 1.25 + 1000.0 * 0.4) / 1e6;
        assert!((cost - expected).abs() < 1e-12, "{cost} vs {expected}");
    }

    /// A loop's requests serialized as the recorder serializes them (resuming from the
    /// route's previous request), `jump` rounds appended before request `n` when
    /// `jump(n) > 1`; each metered through the segment path and by the parsing path on the
    /// body. Returns the path each request took (`None`: the parsing path).
    fn drive(route: &Route, requests: usize, jump: impl Fn(usize) -> usize) -> Vec<Option<Path>> {
        use crate::event::Config;
        use crate::project::project_tool_updates;
        use crate::vocab::{ContentBlock, Message, MessageSource, Role, ToolSchema};
        use crate::wire::{WireContext, serialize_resuming};
        let config =
            Config::new(route.provider.clone(), route.model.clone()).with("max_tokens", 64.into());
        let mut parameters = serde_json::Map::new();
        parameters.insert("type".into(), "object".into());
        let tools = vec![ToolSchema::new("read", "Read a file", parameters)];
        let mut messages = vec![Message::user("u0", "Read the files.")];
        let (mut resume, mut previous_blocks) = (None, None);
        let (mut fast, mut slow) = (Meter::new(route), Meter::new(route));
        let mut paths = Vec::new();
        let mut k = 0;
        for n in 0..requests {
            for _ in 0..jump(n).max(1) {
                messages.push(Message::new(
                    format!("a{k}"),
                    Role::Assistant,
                    vec![
                        ContentBlock::text(format!("part {k}")),
                        ContentBlock::ToolCall {
                            id: format!("c{k}"),
                            name: "read".into(),
                            arguments: format!(r#"{{"line":{k}}}"#),
                        },
                    ],
                    MessageSource::Model {
                        provider: route.provider.to_string(),
                        model: route.model.to_string(),
                    },
                ));
                messages.push(Message::tool_result(format!("r{k}"), format!("c{k}"), "ok"));
                k += 1;
            }
            let projected =
                project_tool_updates(&messages, Some(&tools), route.tool_update(), None);
            let context = WireContext {
                previous_blocks,
                ..WireContext::default()
            };
            let (wire, next, _) =
                serialize_resuming(&config, &projected, route, &context, resume.take());
            let wire = wire.unwrap();
            resume = next;
            let segs = wire.segments.as_deref().unwrap();
            previous_blocks = Some(segs.first_block + segs.blocks.len());
            let path = fast.observe_segments(&wire).map(|(_, p)| p);
            if path.is_none() {
                fast.observe(&wire.body, wire.series_start).unwrap();
            }
            fast.remember(&wire);
            slow.observe(&wire.body, wire.series_start).unwrap();
            assert_eq!(fast.rows(), slow.rows(), "request {n}");
            assert_eq!(fast.departures(), slow.departures(), "request {n}");
            assert_eq!(fast.save(), slow.save(), "request {n}");
            paths.push(path);
        }
        paths
    }

    #[test]
    fn a_resumed_request_is_metered_from_what_is_new() {
        let paths = drive(
            &crate::route::route_for("deepseek", "deepseek-flash"),
            8,
            |_| 1,
        );
        assert_eq!(
            paths[0],
            Some(Path::Whole),
            "nothing kept: cut whole, from the spans"
        );
        assert!(
            paths[2..].iter().all(|p| *p == Some(Path::Extended)),
            "{paths:?}"
        );
    }

    #[test]
    fn a_body_keeping_the_previous_ones_messages_is_metered_from_the_first_that_differs() {
        // A harness's own bodies (the proxy's counterfactual): each re-sends the history and
        // marks its last message; the mark moves on.
        let body = |n: usize, first: &str, marks: &[usize]| {
            let messages: Vec<serde_json::Value> = (0..n)
                .map(|i| {
                    let text = if i == 0 {
                        first.to_owned()
                    } else {
                        format!("turn {i} {}", "x".repeat(300))
                    };
                    let mut block = serde_json::json!({"type": "text", "text": text});
                    if marks.contains(&i) || (i + 1 == n && marks.is_empty()) {
                        block["cache_control"] = serde_json::json!({"type": "ephemeral"});
                    }
                    let role = if i % 2 == 0 { "user" } else { "assistant" };
                    serde_json::json!({"role": role, "content": [block]})
                })
                .collect();
            serde_json::json!({"model": "deepseek-flash", "max_tokens": 8, "system": "s",
                "tools": [{"name": "read", "input_schema": {"type": "object"}}], "messages": messages})
            .to_string()
        };
        let route = crate::route::route_for("deepseek", "deepseek-flash");
        let mut meter = Meter::new(&route);
        let mut parsed = Meter::new(&route);
        let mut paths = Vec::new();
        for n in 1..=12 {
            let b = body(n, "hello", &[]);
            paths.push(meter.clone().observe_kept(&b, None).map(|(_, p)| p));
            assert_eq!(
                meter.observe(&b, None).unwrap(),
                parsed.observe_parsed(&b, None).unwrap()
            );
            assert_eq!(meter.previous, parsed.previous);
        }
        assert_eq!(paths[0], None, "no previous request");
        assert!(
            paths[2..].iter().all(|p| *p == Some(Path::Extended)),
            "{paths:?}"
        );
        let edited = body(13, "edited", &[]);
        assert_eq!(
            meter.clone().observe_kept(&edited, None).map(|(_, p)| p),
            None,
            "the first message differs: nothing kept"
        );
        let early_mark = body(13, "hello", &[0]);
        assert_eq!(
            meter
                .clone()
                .observe_kept(&early_mark, None)
                .map(|(_, p)| p),
            None,
            "a marked first message is cut again"
        );
        assert_eq!(
            meter.clone().observe(&edited, None).unwrap(),
            parsed.clone().observe_parsed(&edited, None).unwrap()
        );
        // A shorter body (a rewind) keeps what it re-sends and departs after it.
        let rewind = body(6, "hello", &[]);
        assert_eq!(
            meter.clone().observe_kept(&rewind, None).map(|(_, p)| p),
            Some(Path::Whole)
        );
        assert_eq!(
            meter.observe(&rewind, None).unwrap(),
            parsed.observe_parsed(&rewind, None).unwrap()
        );
        assert_eq!(meter.departures, parsed.departures);
    }

    #[test]
    fn a_resumed_chat_request_is_metered_from_what_is_new() {
        // A chat pass leaves its point at its end: from the second request on, everything the
        // previous request sent is kept and only the new wire messages are read.
        let paths = drive(
            &crate::route::route_for("openai-compatible", "any"),
            8,
            |n| {
                if n == 5 { 12 } else { 1 }
            },
        );
        assert_eq!(
            paths[0],
            Some(Path::Whole),
            "nothing kept: cut from the spans"
        );
        assert!(
            paths[1..].iter().all(|p| *p == Some(Path::Extended)),
            "{paths:?}"
        );
    }

    #[test]
    fn a_resumed_responses_request_is_metered_from_what_is_new() {
        // A Responses pass leaves its point at its end as a chat pass does (decision 143):
        // its body's items (`input`) are cut by the spans, and from the second request on only
        // the new items are read. Without the `"input":[` head the meter parsed every body.
        for model in ["gpt-5.4", "gpt-0-unknown"] {
            let route = crate::route::route_for("openai", model);
            let paths = drive(&route, 8, |n| if n == 5 { 12 } else { 1 });
            assert_eq!(paths[0], Some(Path::Whole), "{model}: cut from the spans");
            assert!(
                paths[1..].iter().all(|p| *p == Some(Path::Extended)),
                "{model}: {paths:?}"
            );
        }
    }

    #[test]
    fn a_lookback_mark_among_the_kept_messages_takes_the_parsing_path() {
        // 12 rounds at once: 36 blocks after the previous request's last one, which gets
        // the lookback mark; the next request keeps the marked message.
        let route = crate::route::route_for("anthropic", "claude-sonnet-5-5");
        let paths = drive(&route, 8, |n| if n == 4 { 12 } else { 1 });
        assert!(
            paths[2..4].iter().all(|p| *p == Some(Path::Extended)),
            "{paths:?}"
        );
        assert!(
            paths[4..].contains(&None),
            "a mark among the kept: {paths:?}"
        );
        assert_eq!(paths[7], Some(Path::Extended), "{paths:?}");
    }

    #[test]
    fn a_request_not_resumed_from_the_meters_previous_one_is_not_trusted() {
        use crate::event::Config;
        use crate::project::project_tool_updates;
        use crate::vocab::Message;
        use crate::wire::{WireContext, serialize_resuming};
        let route = crate::route::route_for("deepseek", "deepseek-flash");
        let config = Config::new("deepseek", "deepseek-flash").with("max_tokens", 64.into());
        let mut messages = vec![Message::user("u0", "hi ".repeat(300))];
        let mut wires = Vec::new();
        let mut resume = None;
        for k in 0..3 {
            messages.push(Message::assistant(
                format!("a{k}"),
                "ok",
                "deepseek",
                "deepseek-flash",
            ));
            messages.push(Message::user(format!("u{}", k + 1), "go on"));
            let projected = project_tool_updates(&messages, None, route.tool_update(), None);
            let (wire, next, _) = serialize_resuming(
                &config,
                &projected,
                &route,
                &WireContext::default(),
                resume.take(),
            );
            wires.push(wire.unwrap());
            resume = next;
        }
        assert!(wires[2].segments.as_ref().unwrap().first > 0);
        // The meter saw the first request only: the third kept wire messages of the second.
        let mut meter = Meter::new(&route);
        meter.observe_wire(&wires[0]).unwrap();
        assert_eq!(meter.observe_segments(&wires[2]).map(|(_, p)| p), None);
        // After the second, the third is proven.
        let mut meter = Meter::new(&route);
        meter.observe_wire(&wires[0]).unwrap();
        meter.observe_wire(&wires[1]).unwrap();
        let mut slow = meter.clone();
        assert_eq!(
            meter.observe_segments(&wires[2]).map(|(_, p)| p),
            Some(Path::Extended)
        );
        slow.observe(&wires[2].body, None).unwrap();
        assert_eq!(meter.rows(), slow.rows());
        // A body edited after it was written is read by the parsing path.
        let mut meter = Meter::new(&route);
        meter.observe_wire(&wires[0]).unwrap();
        meter.observe_wire(&wires[1]).unwrap();
        let mut edited = wires[2].clone();
        edited.body = edited.body.replacen("go on", "go on, please", 1);
        assert_eq!(meter.observe_segments(&edited).map(|(_, p)| p), None);
        let row = meter.observe_wire(&edited).unwrap();
        let mut slow = Meter::new(&route);
        slow.observe(&wires[0].body, None).unwrap();
        slow.observe(&wires[1].body, None).unwrap();
        assert_eq!(Ok(row), slow.observe(&edited.body, None).map_err(|_| ()));
        // Forgotten entries: the resumed path reads nothing and writes every unit again (every
        // debug build checks its entries against the parsing path's).
        let mut meter = Meter::new(&route);
        meter.observe_wire(&wires[0]).unwrap();
        meter.observe_wire(&wires[1]).unwrap();
        meter.forget_cache();
        let mut slow = meter.clone();
        let (row, path) = meter.observe_segments(&wires[2]).unwrap();
        assert_eq!((row.cached_bytes, path), (0, Path::Extended));
        slow.observe(&wires[2].body, None).unwrap();
        assert_eq!(meter.cache, slow.cache);
        assert!(
            meter.cache.entries().count() >= 3,
            "the units were written again"
        );
        // The public entry (a body without its token) never proves anything.
        let mut meter = Meter::new(&route);
        meter.observe(&wires[0].body, None).unwrap();
        meter.observe(&wires[1].body, None).unwrap();
        assert_eq!(meter.observe_segments(&wires[2]).map(|(_, p)| p), None);
    }
}
