//! What the meter reports: one row per request, the totals, and the provider's own figures.

use super::*;

/// What the provider reported for one request (its usage, [reference
/// §12](crate::manual::reference#12-provider-responses-and-usage)), beside the meter's estimate.
/// `None` in a cache figure means the provider does not report it, which is not zero.
///
/// ```
/// use mektpoy::meter::Measured;
/// let m = Measured::new(2000, Some(1536), None);
/// assert_eq!((m.prompt_tokens, m.cache_read_tokens, m.cache_write_tokens), (2000, Some(1536), None));
/// ```
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
    ///
    /// ```
    /// use mektpoy::meter::Measured;
    /// use mektpoy::{Meter, route_for};
    /// let mut meter = Meter::new(&route_for("deepseek", "deepseek-flash"));
    /// meter.observe(r#"{"messages":[{"role":"user","content":"hi"}]}"#, None)?;
    /// // Figures read from a vendor this crate does not decode.
    /// let row = meter.observe_measured(Measured::new(9, Some(0), None))?;
    /// assert_eq!(row.measured.map(|m| m.prompt_tokens), Some(9));
    /// # Ok::<(), mektpoy::meter::MeterError>(())
    /// ```
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
///
/// ```
/// use mektpoy::{Meter, route_for};
/// let mut meter = Meter::new(&route_for("deepseek", "deepseek-flash"));
/// let body = format!(r#"{{"messages":[{{"role":"user","content":"{}"}}]}}"#, "x".repeat(1000));
/// meter.observe(&body, None)?;
/// let row = meter.observe(&body, None)?;
/// assert_eq!((row.total_bytes, row.cached_bytes, row.best_bytes), (1028, 1024, 1024));
/// assert_eq!(row.series_start, None);
/// # Ok::<(), mektpoy::meter::MeterError>(())
/// ```
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
    pub(super) kept: u64,
    /// Why the request opened a series, if it did.
    pub series_start: Option<SeriesStart>,
    /// The provider's figures, once [`Meter::observe_usage`] attached them.
    pub measured: Option<Measured>,
    /// The estimated cached tokens at the measured rate, and the route's block: what
    /// [`unexplained_miss`](Self::unexplained_miss) compares. Set with `measured`.
    pub(super) expected: Option<Expected>,
}

/// The flag's inputs, fixed when the measured figures are attached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Expected {
    pub(super) read_tokens: u64,
    pub(super) block_tokens: u32,
}

impl MeterRow {
    /// Bytes not served from the cache.
    ///
    /// ```
    /// use mektpoy::{Meter, route_for};
    /// let mut meter = Meter::new(&route_for("deepseek", "deepseek-flash"));
    /// let body = format!(r#"{{"messages":[{{"role":"user","content":"{}"}}]}}"#, "x".repeat(1000));
    /// meter.observe(&body, None)?;
    /// let row = meter.observe(&body, None)?;
    /// assert_eq!(row.new_bytes(), row.total_bytes - row.cached_bytes);
    /// # Ok::<(), mektpoy::meter::MeterError>(())
    /// ```
    pub fn new_bytes(&self) -> u64 {
        self.total_bytes.saturating_sub(self.cached_bytes)
    }

    /// The bytes of the whole previous request of the route (as far as both go) in the
    /// vendor's read unit (DeepSeek 64 tokens, OpenAI 128; bytes elsewhere): a request
    /// reading less lost something, one reading this much lost nothing a client could keep
    /// (below the minimum cacheable length both read 0). 0 for the first request; for a row
    /// restored from a save before version 3, its best possible figure.
    ///
    /// ```
    /// use mektpoy::{Meter, route_for};
    /// let mut meter = Meter::new(&route_for("deepseek", "deepseek-flash"));
    /// let body = format!(r#"{{"messages":[{{"role":"user","content":"{}"}}]}}"#, "x".repeat(1000));
    /// assert_eq!(meter.observe(&body, None)?.kept_bytes(), 0, "the first request");
    /// let row = meter.observe(&body, None)?;
    /// assert_eq!(row.kept_bytes(), row.cached_bytes, "read all a client could keep");
    /// # Ok::<(), mektpoy::meter::MeterError>(())
    /// ```
    pub fn kept_bytes(&self) -> u64 {
        self.kept
    }

    /// The estimated cached amount in tokens at the measured rate, once measured figures are
    /// attached: `cached_bytes × P / B`, where `P / B` is the measured prompt tokens per byte
    /// of the route's previous request when it was measured (its prompt is what the cache
    /// holds), else of this request. Converting at ⌈bytes / 4⌉ would flag every full hit of a
    /// prompt whose tokenizer packs more than four bytes a token.
    ///
    /// ```
    /// use mektpoy::meter::Measured;
    /// use mektpoy::{Meter, route_for};
    /// let mut meter = Meter::new(&route_for("deepseek", "deepseek-flash"));
    /// let body = format!(r#"{{"messages":[{{"role":"user","content":"{}"}}]}}"#, "x".repeat(1000));
    /// meter.observe(&body, None)?;
    /// meter.observe_measured(Measured::new(257, Some(0), None))?;
    /// let row = meter.observe(&body, None)?;
    /// assert_eq!(row.expected_read_tokens(), None, "nothing measured yet");
    /// // 1,024 cached bytes at the previous request's 257 tokens per 1,028 bytes.
    /// let row = meter.observe_measured(Measured::new(257, Some(256), None))?;
    /// assert_eq!(row.expected_read_tokens(), Some(256));
    /// # Ok::<(), mektpoy::meter::MeterError>(())
    /// ```
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
///
/// ```
/// use mektpoy::{Meter, route_for};
/// let mut meter = Meter::new(&route_for("deepseek", "deepseek-flash"));
/// let body = format!(r#"{{"messages":[{{"role":"user","content":"{}"}}]}}"#, "x".repeat(1000));
/// meter.observe(&body, None)?;
/// meter.observe(&body, None)?;
/// let report = meter.report();
/// assert_eq!(report.requests, 2);
/// assert_eq!(report.cached_tokens, 256, "⌈1,024 / 4⌉");
/// assert_eq!(report.cost, None, "no price");
/// # Ok::<(), mektpoy::meter::MeterError>(())
/// ```
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
///
/// ```
/// use mektpoy::meter::Measured;
/// use mektpoy::{Meter, route_for};
/// let mut meter = Meter::new(&route_for("deepseek", "deepseek-flash"));
/// meter.observe(r#"{"messages":[{"role":"user","content":"hi"}]}"#, None)?;
/// meter.observe_measured(Measured::new(9, Some(0), None))?;
/// let totals = meter.report().measured;
/// assert_eq!((totals.requests, totals.prompt_tokens, totals.read_reported), (1, 9, 1));
/// # Ok::<(), mektpoy::meter::MeterError>(())
/// ```
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
    ///
    /// ```
    /// use mektpoy::meter::Measured;
    /// use mektpoy::{Meter, route_for};
    /// let mut meter = Meter::new(&route_for("deepseek", "deepseek-flash"));
    /// meter.observe(r#"{"messages":[{"role":"user","content":"hi"}]}"#, None)?;
    /// meter.observe_measured(Measured::new(100, Some(25), None))?;
    /// assert_eq!(meter.report().measured.hit_ratio(), 0.25);
    /// # Ok::<(), mektpoy::meter::MeterError>(())
    /// ```
    pub fn hit_ratio(&self) -> f64 {
        ratio(self.cache_read_tokens, self.prompt_tokens)
    }
}

impl MeterReport {
    /// Σ cached ÷ Σ total (0 when nothing was fed).
    ///
    /// ```
    /// use mektpoy::{Meter, route_for};
    /// let mut meter = Meter::new(&route_for("deepseek", "deepseek-flash"));
    /// assert_eq!(meter.report().hit_ratio(), 0.0, "nothing fed");
    /// let body = format!(r#"{{"messages":[{{"role":"user","content":"{}"}}]}}"#, "x".repeat(1000));
    /// meter.observe(&body, None)?;
    /// meter.observe(&body, None)?;
    /// assert_eq!(meter.report().hit_ratio(), 1024.0 / 2056.0);
    /// # Ok::<(), mektpoy::meter::MeterError>(())
    /// ```
    pub fn hit_ratio(&self) -> f64 {
        ratio(self.cached_bytes, self.total_bytes)
    }

    /// Best possible hit ratio: Σ best ÷ Σ total.
    ///
    /// ```
    /// use mektpoy::{Meter, route_for};
    /// let mut meter = Meter::new(&route_for("deepseek", "deepseek-flash"));
    /// meter.observe(r#"{"system":"A","messages":[{"role":"user","content":"hi"}]}"#, None)?;
    /// meter.observe(r#"{"system":"B","messages":[{"role":"user","content":"hi"}]}"#, None)?;
    /// // A changed system prompt: nothing a client could keep, nothing it should have.
    /// assert_eq!(meter.report().best_ratio(), 0.0);
    /// # Ok::<(), mektpoy::meter::MeterError>(())
    /// ```
    pub fn best_ratio(&self) -> f64 {
        ratio(self.best_bytes, self.total_bytes)
    }
}

pub(super) fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 { 0.0 } else { a as f64 / b as f64 }
}
