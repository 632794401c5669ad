//! The prefix-cache meter (reference §9): how much of each request a provider could serve from its
//! prefix cache, and the best any client could have done.
//!
//! The meter reads wire bodies, not the log, so it measures exactly the bytes sent. It cuts a
//! body into segments in the provider's caching order — each non-deferred tool, a fixed
//! deferred-tools section when any declaration is deferred, `system`, each message — and
//! compares the concatenation with the previous request's byte by byte. Token figures are
//! estimates: ⌈bytes / 4⌉.
//!
//! After a response, [`Meter::observe_usage`] attaches the provider's measured figures to the
//! latest row ([`Measured`]); [`MeterRow::unexplained_miss`] flags a request whose measured
//! read falls short of the estimate by more than one cache block
//! ([`Route::cache_block_tokens`]). [`Meter::save`] / [`Meter::restore`] and [`Meter::prime`]
//! carry the meter over a restart.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::event::SeriesStart;
use crate::response::Usage;
use crate::route::Route;
use crate::wire::without_markers;

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

impl Price {
    /// The published price of a built-in route's model, read 2026-12-01, with a 5-minute
    /// cache write (1.25× input). `None` where no price was verified on the vendor's page
    /// (DeepSeek, Claude Fable 5.2 / Mythos 5.2, Claude Haiku 5.5, unknown models): the
    /// meter then shows tokens only.
    ///
    /// ```
    /// use mektpoy::{route_for, meter::Price};
    /// let p = Price::for_route(&route_for("anthropic", "claude-opus-5-5")).unwrap();
    /// assert_eq!((p.input_per_mtok, p.cache_read_per_mtok), (4.0, 0.2));
    /// assert!(Price::for_route(&route_for("deepseek", "deepseek-flash")).is_none());
    /// ```
    pub fn for_route(route: &Route) -> Option<Price> {
        if route.provider != "anthropic" {
            return None;
        }
        // (input, cache read) in USD per million tokens. Cache reads are 0.1× input on most
        // models, 0.025× on Fable 5.1 / Mythos 5.1 and 0.05× on Opus 5.5.
        let (input, read, page) = match &*route.model {
            "claude-fable-5-1" | "claude-mythos-5-1" => (10.0, 0.25, ANTHROPIC_PRICING_DOC),
            "claude-fable-5" | "claude-mythos-5" => (10.0, 1.0, ANTHROPIC_PRICING_DOC),
            "claude-opus-5" | "claude-opus-4-8" => (5.0, 0.5, ANTHROPIC_PRICING_DOC),
            "claude-opus-5-5" => (
                4.0,
                0.2,
                "https://platform.claude.com/docs/en/models/opus-5-5/overview",
            ),
            "claude-sonnet-5-5" => (
                2.0,
                0.2,
                "https://platform.claude.com/docs/en/models/sonnet-5-5/overview",
            ),
            _ => return None,
        };
        Some(Price {
            input_per_mtok: input,
            cache_read_per_mtok: read,
            cache_write_multiplier: 1.25,
            currency: "USD".into(),
            source: format!("{page}, read 2026-12-01").into(),
        })
    }
}

/// What the provider reported for one request (its usage, reference §12), beside the
/// meter's estimate. `None` in a cache figure means the provider does not report it, which is
/// not zero.
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
    /// Bytes the provider would serve from its cache: the common prefix with the previous
    /// request of the route, or 0 when the route caches only when asked and the body does
    /// not ask, when the previous entry is out of the automatic-caching lookback, or when
    /// the prefix is below the model's minimum cacheable length.
    pub cached_bytes: u64,
    /// Bytes the best possible client would have had cached.
    pub best_bytes: u64,
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
    /// let body = format!(r#"{{"messages":[{{"role":"user","content":"{}"}}]}}"#, "x".repeat(4000));
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
    #[error("version {0} is not {SAVE_VERSION}")]
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

/// The version [`Meter::save`] writes.
pub const SAVE_VERSION: u64 = 1;

/// Feeds on the requests of one route, in order.
#[derive(Clone, Debug)]
pub struct Meter {
    deferred_section_bytes: u32,
    auto_cache: bool,
    min_cache_tokens: u32,
    block_tokens: u32,
    /// `provider/model` and the rules above, for [`Meter::restore`] to check.
    fingerprint: String,
    price: Option<Price>,
    previous: Option<Previous>,
    /// The measured prompt tokens and bytes of the request before the latest one, when it
    /// was measured: the rate [`MeterRow::expected_read_tokens`] converts at.
    rate_before: Option<Rate>,
    rows: Vec<MeterRow>,
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

/// What the meter keeps of the previous request.
#[derive(Clone, Debug)]
struct Previous {
    bytes: Vec<u8>,
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
    blocks: usize,
    /// Whether the body asks for caching (a `cache_control` anywhere).
    asks: bool,
    /// Whether a content block carries an explicit breakpoint.
    block_breakpoint: bool,
    /// Whether a `tool_addition` carries a definition by value.
    by_value: bool,
    /// Whether `tools` holds a tool without `defer_loading`.
    immediate_tool: bool,
}

/// How far back the provider's automatic caching looks for an earlier entry, in blocks.
const LOOKBACK_BLOCKS: usize = 20;

#[derive(Deserialize)]
struct Body<'a> {
    #[serde(borrow, default)]
    tools: Vec<&'a RawValue>,
    #[serde(borrow, default)]
    system: Option<&'a RawValue>,
    #[serde(borrow)]
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

#[derive(Deserialize)]
struct ToolFlags {
    #[serde(default)]
    defer_loading: bool,
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
            auto_cache: route.auto_cache(),
            min_cache_tokens: route.min_cache_tokens(),
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
            rate_before: None,
            rows: Vec::new(),
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
        let mut out = Vec::with_capacity(parsed.messages.iter().map(|m| m.get().len()).sum());
        let mut deferred = false;
        let mut immediate_tool = false;
        for tool in &parsed.tools {
            let flags: ToolFlags = serde_json::from_str(tool.get()).map_err(MeterError::Body)?;
            if flags.defer_loading {
                deferred = true;
            } else {
                immediate_tool = true;
                out.extend_from_slice(without_markers(tool.get()).as_bytes());
            }
        }
        if deferred {
            // A fixed section: its bytes are the same whenever it is present.
            out.extend(std::iter::repeat_n(
                b'#',
                self.deferred_section_bytes as usize,
            ));
        }
        if let Some(system) = parsed.system {
            out.extend_from_slice(system.get().as_bytes());
        }
        let mut blocks = 0;
        let mut block_breakpoint = false;
        for m in &parsed.messages {
            let text = m.get();
            if let Ok(content) = serde_json::from_str::<Content<'_>>(text)
                && let Some(content) = content.content
            {
                blocks += content.len();
                block_breakpoint |= content.iter().any(|b| b.get().contains(MARKER));
            }
            out.extend_from_slice(without_markers(text).as_bytes());
        }
        Ok(Cut {
            bytes: out,
            blocks,
            asks: body.contains(MARKER),
            block_breakpoint,
            // Inside JSON strings quotes are escaped: this can only be a block's type.
            by_value: body.contains(r#""type":"tool_definition""#),
            immediate_tool,
        })
    }

    /// Meters the next request of the route; `series_start` comes from
    /// `Request::series_start`.
    ///
    /// Best possible: 0 for the first request; the actual cached amount when the caller
    /// opened the series (asked, or a replace it appended); otherwise (a prompt the recorder
    /// replaced and every declaration series included) the smaller of the previous request
    /// and this one, so that a loss a route's rules impose shows as a miss.
    ///
    /// # Errors
    /// [`MeterError::Body`] for a body that is not a request body; the meter is unchanged.
    pub fn observe(
        &mut self,
        body: &str,
        series_start: Option<SeriesStart>,
    ) -> Result<MeterRow, MeterError> {
        let cut = self.cut(body)?;
        let bytes = &cut.bytes;
        let total = bytes.len() as u64;
        let (cached, best) = match &self.previous {
            None => (0, 0),
            Some(prev) => {
                let common = prev
                    .bytes
                    .iter()
                    .zip(bytes)
                    .take_while(|(a, b)| a == b)
                    .count() as u64;
                // Automatic caching finds the previous entry only within the lookback
                // window, unless a block breakpoint marks it.
                let in_window = cut.blocks < prev.blocks.saturating_add(LOOKBACK_BLOCKS)
                    || cut.block_breakpoint;
                let long_enough = |n: u64| {
                    if n.div_ceil(4) >= u64::from(self.min_cache_tokens) {
                        n
                    } else {
                        0
                    }
                };
                let asked = !self.auto_cache || (cut.asks && in_window);
                let cached = if asked { long_enough(common) } else { 0 };
                // The best client asks for caching and marks the lookback; nothing beats the
                // minimum length.
                let best = if series_start.is_some_and(SeriesStart::by_caller) {
                    cached
                } else {
                    long_enough((prev.bytes.len() as u64).min(total))
                };
                // Without a tool that is immediately available, the first tool defined by value
                // changes the start of the rendered prompt: a full miss no client avoids once
                // its declarations are so (the vendor's advice: keep one non-deferred tool).
                if cut.by_value && !prev.by_value && !cut.immediate_tool {
                    (0, 0)
                } else {
                    (cached, best)
                }
            }
        };
        let row = MeterRow {
            total_bytes: total,
            cached_bytes: cached,
            best_bytes: best,
            series_start,
            measured: None,
            expected: None,
        };
        self.rate_before = self.previous.take().and_then(|p| p.rate);
        self.previous = Some(Previous {
            bytes: cut.bytes,
            blocks: cut.blocks,
            by_value: cut.by_value,
            rate: None,
            row: true,
        });
        self.rows.push(row);
        Ok(row)
    }

    /// Attaches the provider's usage for the latest observed request (decoded from its
    /// response, reference §12) and returns the row with it.
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
        self.rate_before = None;
        self.previous = Some(Previous {
            bytes: cut.bytes,
            blocks: cut.blocks,
            by_value: cut.by_value,
            rate: None,
            row: false,
        });
        Ok(())
    }

    /// The meter's state as a small versioned JSON text: the route it meters (with the rules
    /// that shape a row), the previous request's cut (its concatenated segment bytes, block
    /// count and whether it defined a tool by value) and every row. [`Meter::restore`] gives
    /// back a meter whose next rows are exactly this one's. The price is not saved: set it
    /// again with [`with_price`](Self::with_price).
    ///
    /// The previous request's bytes are the bulk, kept once: the next estimate is the length
    /// of the common prefix with them, which no digest short of the bytes determines to the
    /// byte. A caller that can rebuild that request (from the log) may instead start a new
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
            }),
            rate_before: self.rate_before,
            rows: self.rows.iter().map(SavedRow::from).collect(),
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
        if version.version != SAVE_VERSION {
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
        meter.previous = saved.previous.map(|p| Previous {
            bytes: p.prefix.into_owned().into_bytes(),
            blocks: p.blocks,
            by_value: p.by_value,
            rate: p.rate,
            row: p.row,
        });
        meter.rate_before = saved.rate_before;
        meter.rows = saved.rows.into_iter().map(MeterRow::from).collect();
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

/// The saved form (version 1). Field names are camelCase, as in the session log.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Saved<'a> {
    version: u64,
    #[serde(borrow)]
    route: Cow<'a, str>,
    #[serde(borrow)]
    previous: Option<SavedPrevious<'a>>,
    rate_before: Option<Rate>,
    rows: Vec<SavedRow>,
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
}

/// One row: `[total, cached, best, series start, measured, expected]`, where measured is
/// `[prompt, read, write]` and expected `[read, block]`.
#[derive(Serialize, Deserialize)]
struct SavedRow(
    u64,
    u64,
    u64,
    Option<SavedSeriesStart>,
    Option<(u64, Option<u64>, Option<u64>)>,
    Option<(u64, u32)>,
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
        )
    }
}

impl From<SavedRow> for MeterRow {
    fn from(SavedRow(total, cached, best, start, measured, expected): SavedRow) -> Self {
        MeterRow {
            total_bytes: total,
            cached_bytes: cached,
            best_bytes: best,
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
        ] {
            assert_eq!(without_markers(marked), plain);
        }
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
        assert!(row.cached_bytes > 0, "asked: the common prefix");
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
}
