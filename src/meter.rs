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
use crate::route::{Price, Route, WireApi};
use crate::vocab::JsonFault;
use crate::wire::{WireRequest, without_markers};

mod cache;
mod cut;
mod departure;
mod incremental;
mod read;
mod row;
mod saved;

use cache::{Bound, Cache, Prints};
use cut::*;
use departure::departure;
pub use departure::{Departure, Segment, ToolChange};
pub use read::ReadBody;
use row::*;
pub use row::{DEFAULT_CACHE_BLOCK_TOKENS, Measured, MeasuredTotals, MeterReport, MeterRow};

/// The minimum cacheable length, in tokens, the meter applies on `route`: the route's
/// [`Route::min_cache_tokens`], and on an OpenAI chat route at least
/// 1,024 tokens (the vendor caches no shorter prompt).
///
/// ```
/// use mektpoy::{route_for, meter::min_cache_tokens};
/// assert_eq!(min_cache_tokens(&route_for("openai-compatible", "any")), 1024);
/// assert_eq!(min_cache_tokens(&route_for("anthropic", "claude-opus-5")), 512);
/// ```
pub fn min_cache_tokens(route: &Route) -> u32 {
    Cache::for_route(route).min_tokens()
}

/// Why a body could not be metered.
///
/// ```
/// use mektpoy::meter::{MeterError, Measured};
/// use mektpoy::{Meter, route_for};
/// let mut meter = Meter::new(&route_for("deepseek", "deepseek-flash"));
/// assert!(matches!(meter.observe("[]", None), Err(MeterError::Body(_))));
/// let refused = meter.observe_measured(Measured::new(10, None, None)).unwrap_err();
/// assert!(matches!(refused, MeterError::NoRequest));
/// ```
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
///
/// ```
/// use mektpoy::meter::{MeterError, RestoreFault};
/// use mektpoy::{Meter, route_for};
/// let saved = Meter::new(&route_for("deepseek", "deepseek-flash")).save();
/// let elsewhere = Meter::restore(&route_for("openai", "gpt-5.4"), &saved).unwrap_err();
/// assert!(matches!(elsewhere, MeterError::Restore { reason: RestoreFault::Route { .. } }));
/// let garbage = Meter::restore(&route_for("deepseek", "deepseek-flash"), "{}").unwrap_err();
/// assert!(matches!(garbage, MeterError::Restore { reason: RestoreFault::Malformed(_) }));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RestoreFault {
    /// Not the JSON [`Meter::save`] writes: the parser's fault.
    #[error("not a saved meter ({0})")]
    Malformed(JsonFault),
    /// The saved departures are not one per row.
    #[error("not a saved meter (one departure per row expected)")]
    DeparturesPerRow {
        /// The saved rows.
        rows: usize,
        /// The saved departures.
        departures: usize,
    },
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
///
/// ```
/// use mektpoy::{Meter, route_for};
/// let mut meter = Meter::new(&route_for("deepseek", "deepseek-flash"));
/// let turn = |text: &str| format!(r#"{{"role":"user","content":"{text}"}}"#);
/// let first = format!(r#"{{"messages":[{}]}}"#, turn(&"x".repeat(1000)));
/// let second = format!(r#"{{"messages":[{},{}]}}"#, turn(&"x".repeat(1000)), turn("next"));
/// meter.observe(&first, None)?;
/// let row = meter.observe(&second, None)?;
/// // The second request extends the first: DeepSeek serves its whole 64-token units.
/// assert_eq!(row.cached_bytes, 1024);
/// assert_eq!(meter.departures()[1], None);
/// # Ok::<(), mektpoy::meter::MeterError>(())
/// ```
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

/// Feeding a meter and reading it.
///
/// ```
/// use mektpoy::{Meter, route_for};
/// let mut meter = Meter::new(&route_for("deepseek", "deepseek-flash"));
/// let row = meter.observe(r#"{"messages":[{"role":"user","content":"hi"}]}"#, None)?;
/// assert_eq!(meter.rows(), [row]);
/// assert_eq!(meter.report().requests, 1);
/// # Ok::<(), mektpoy::meter::MeterError>(())
/// ```
impl Meter {
    /// A meter for `route`, whose deferred-tools section counts
    /// `route.deferred_section_bytes()`.
    ///
    /// ```
    /// use mektpoy::{Meter, route_for};
    /// let meter = Meter::new(&route_for("anthropic", "claude-fable-5-1"));
    /// assert!(meter.rows().is_empty());
    /// assert!(!meter.has_previous());
    /// ```
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
    ///
    /// ```
    /// use mektpoy::route::{Evidence, Price};
    /// use mektpoy::{Meter, route_for};
    /// let price = Price::usd(1.0, 0.1, Evidence::None);
    /// let mut meter = Meter::new(&route_for("acme", "acme-1")).with_price(price);
    /// meter.observe(r#"{"messages":[{"role":"user","content":"hi"}]}"#, None)?;
    /// // 30 bytes ≈ 8 tokens, none cached, at $1 per million.
    /// assert!((meter.report().cost.unwrap() - 8e-6).abs() < 1e-12);
    /// # Ok::<(), mektpoy::meter::MeterError>(())
    /// ```
    #[must_use]
    pub fn with_price(mut self, price: Price) -> Self {
        self.price = Some(price);
        self
    }

    /// The segments of a body, concatenated in the provider's caching order, with each
    /// block's `cache_control` marker left out (a breakpoint moves from request to request
    /// without changing the prompt).
    ///
    /// ```
    /// use mektpoy::{Meter, route_for};
    /// let meter = Meter::new(&route_for("deepseek", "deepseek-flash"));
    /// let marked = r#"{"messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral"}}]}]}"#;
    /// let plain = r#"{"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}"#;
    /// // A breakpoint marker is not part of the prompt.
    /// assert_eq!(meter.prefix_bytes(marked)?, meter.prefix_bytes(plain)?);
    /// # Ok::<(), mektpoy::meter::MeterError>(())
    /// ```
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
    /// ```
    /// use mektpoy::{Meter, route_for};
    /// let mut meter = Meter::new(&route_for("deepseek", "deepseek-flash"));
    /// let body = format!(r#"{{"messages":[{{"role":"user","content":"{}"}}]}}"#, "x".repeat(1000));
    /// assert_eq!(meter.observe(&body, None)?.cached_bytes, 0, "nothing before it");
    /// let again = meter.observe(&body, None)?;
    /// assert_eq!(again.cached_bytes, 1024, "the same prompt: its whole 64-token units");
    /// assert!(meter.observe("not json", None).is_err());
    /// assert_eq!(meter.rows().len(), 2, "a refused body adds no row");
    /// # Ok::<(), mektpoy::meter::MeterError>(())
    /// ```
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
    ///
    /// ```
    /// use mektpoy::{Meter, route_for};
    /// let mut meter = Meter::new(&route_for("deepseek", "deepseek-flash"));
    /// assert!(!meter.has_previous());
    /// meter.prime(r#"{"messages":[{"role":"user","content":"hi"}]}"#)?;
    /// assert!(meter.has_previous());
    /// # Ok::<(), mektpoy::meter::MeterError>(())
    /// ```
    pub fn has_previous(&self) -> bool {
        self.previous.is_some()
    }

    /// Beside each row of [`rows`](Self::rows), at the same index: where its request departed
    /// from the previous request of the route, `None` when it extended it (or had none). Rows
    /// restored from a version-1 save have `None`: that version did not keep departures.
    ///
    /// ```
    /// use mektpoy::meter::Segment;
    /// use mektpoy::{Meter, route_for};
    /// let mut meter = Meter::new(&route_for("deepseek", "deepseek-flash"));
    /// meter.observe(r#"{"system":"A","messages":[{"role":"user","content":"hi"}]}"#, None)?;
    /// meter.observe(r#"{"system":"B","messages":[{"role":"user","content":"hi"}]}"#, None)?;
    /// let departure = meter.departures()[1].as_ref().unwrap();
    /// assert_eq!(departure.segment, Segment::System);
    /// assert_eq!(meter.departures()[0], None, "the first request departs from nothing");
    /// # Ok::<(), mektpoy::meter::MeterError>(())
    /// ```
    pub fn departures(&self) -> &[Option<Departure>] {
        &self.departures
    }

    /// Attaches the provider's usage for the latest observed request (decoded from its response,
    /// [reference §12](crate::manual::reference#12-provider-responses-and-usage)) and returns the
    /// row with it.
    ///
    /// ```
    /// use mektpoy::response::decode_chat;
    /// use mektpoy::{Meter, route_for};
    /// let mut meter = Meter::new(&route_for("acme", "acme-1"));
    /// meter.observe(r#"{"messages":[{"role":"user","content":"hi"}]}"#, None)?;
    /// let answer = decode_chat(
    ///     r#"{"id":"r1","model":"acme-1","choices":[{"index":0,"message":{"role":"assistant",
    ///     "content":"hello"}}],"usage":{"prompt_tokens":9,"completion_tokens":1}}"#,
    ///     "acme",
    ///     None,
    /// )?;
    /// let row = meter.observe_usage(&answer.usage.unwrap())?;
    /// assert_eq!(row.measured.unwrap().prompt_tokens, 9);
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
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
    /// ```
    /// use mektpoy::meter::{Measured, MeterError};
    /// use mektpoy::{Meter, route_for};
    /// let mut meter = Meter::new(&route_for("deepseek", "deepseek-flash"));
    /// meter.observe(r#"{"messages":[{"role":"user","content":"hi"}]}"#, None)?;
    /// let row = meter.observe_measured(Measured::new(9, Some(0), None))?;
    /// assert_eq!(row.measured, Some(Measured::new(9, Some(0), None)));
    /// let twice = meter.observe_measured(Measured::new(9, Some(0), None));
    /// assert!(matches!(twice, Err(MeterError::AlreadyMeasured { row: 0 })));
    /// # Ok::<(), mektpoy::meter::MeterError>(())
    /// ```
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
    /// ```
    /// use mektpoy::{Meter, route_for};
    /// let body = format!(r#"{{"messages":[{{"role":"user","content":"{}"}}]}}"#, "x".repeat(1000));
    /// // A restarted process rebuilds the last request it sent and primes a new meter with it.
    /// let mut meter = Meter::new(&route_for("deepseek", "deepseek-flash"));
    /// meter.prime(&body)?;
    /// assert!(meter.rows().is_empty());
    /// assert_eq!(meter.observe(&body, None)?.cached_bytes, 1024);
    /// # Ok::<(), mektpoy::meter::MeterError>(())
    /// ```
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
    ///
    /// ```
    /// use mektpoy::{Meter, route_for};
    /// let body = format!(r#"{{"messages":[{{"role":"user","content":"{}"}}]}}"#, "x".repeat(1000));
    /// let mut meter = Meter::new(&route_for("deepseek", "deepseek-flash"));
    /// meter.observe(&body, None)?;
    /// meter.forget_cache(); // the loop slept for a day
    /// assert_eq!(meter.observe(&body, None)?.cached_bytes, 0);
    /// # Ok::<(), mektpoy::meter::MeterError>(())
    /// ```
    pub fn forget_cache(&mut self) {
        self.cache.forget();
    }

    /// Every row so far.
    ///
    /// ```
    /// use mektpoy::{Meter, route_for};
    /// let mut meter = Meter::new(&route_for("deepseek", "deepseek-flash"));
    /// meter.observe(r#"{"messages":[{"role":"user","content":"hi"}]}"#, None)?;
    /// assert_eq!(meter.rows().len(), 1);
    /// assert_eq!(meter.rows()[0].total_bytes, 30, "the cut: the message, without the body around it");
    /// # Ok::<(), mektpoy::meter::MeterError>(())
    /// ```
    pub fn rows(&self) -> &[MeterRow] {
        &self.rows
    }

    /// Totals, token estimates and, with a price, the estimated cost; the measured figures
    /// summed over the rows that have them, and the number of unexplained misses.
    ///
    /// ```
    /// use mektpoy::{Meter, route_for};
    /// let body = format!(r#"{{"messages":[{{"role":"user","content":"{}"}}]}}"#, "x".repeat(1000));
    /// let mut meter = Meter::new(&route_for("deepseek", "deepseek-flash"));
    /// meter.observe(&body, None)?;
    /// meter.observe(&body, None)?;
    /// let report = meter.report();
    /// assert_eq!((report.requests, report.total_bytes, report.cached_bytes), (2, 2056, 1024));
    /// assert!(report.hit_ratio() < report.best_ratio() || report.best_bytes == report.cached_bytes);
    /// # Ok::<(), mektpoy::meter::MeterError>(())
    /// ```
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::route::{Evidence, WireApi};

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
        let mut m = meter(0)
            .with_price(Price::usd(4.0, 0.4, Evidence::None).with_cache_write_multiplier(1.25));
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
        let config = Config::new(route.provider.clone(), route.model.clone())
            .with("max_tokens", 64.into())
            .unwrap();
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
                        ContentBlock::tool_call(
                            format!("c{k}"),
                            "read",
                            format!(r#"{{"line":{k}}}"#),
                        )
                        .unwrap(),
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
        let config = Config::new("deepseek", "deepseek-flash")
            .with("max_tokens", 64.into())
            .unwrap();
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
