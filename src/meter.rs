//! The prefix-cache meter (SPEC §9): how much of each request a provider could serve from its
//! prefix cache, and the best any client could have done.
//!
//! The meter reads wire bodies, not the log, so it measures exactly the bytes sent. It cuts a
//! body into segments in the provider's caching order — each non-deferred tool, a fixed
//! deferred-tools section when any declaration is deferred, `system`, each message — and
//! compares the concatenation with the previous request's byte by byte. Token figures are
//! estimates: ⌈bytes / 4⌉.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::route::Route;

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

/// One metered request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MeterRow {
    /// Bytes of the request's segments.
    pub total_bytes: u64,
    /// Bytes shared, as a prefix, with the previous request of the route.
    pub cached_bytes: u64,
    /// Bytes the best possible client would have had cached.
    pub best_bytes: u64,
    /// Whether the request opened a series (a rewrite by design).
    pub starts_series: bool,
}

impl MeterRow {
    /// Bytes not served from the cache.
    pub fn new_bytes(&self) -> u64 {
        self.total_bytes.saturating_sub(self.cached_bytes)
    }
}

/// Totals over the requests fed so far.
#[derive(Clone, Debug, PartialEq)]
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
}

/// Feeds on the requests of one route, in order.
#[derive(Clone, Debug)]
pub struct Meter {
    deferred_section_bytes: u32,
    price: Option<Price>,
    previous: Option<Vec<u8>>,
    rows: Vec<MeterRow>,
}

#[derive(Deserialize)]
struct Body<'a> {
    #[serde(borrow, default)]
    tools: Vec<&'a RawValue>,
    #[serde(borrow, default)]
    system: Option<&'a RawValue>,
    #[serde(borrow)]
    messages: Vec<&'a RawValue>,
}

#[derive(Deserialize)]
struct ToolFlags {
    #[serde(default)]
    defer_loading: bool,
}

impl Meter {
    /// A meter for `route`, whose deferred-tools section counts
    /// `route.deferred_section_bytes()`.
    pub fn new(route: &Route) -> Self {
        Meter {
            deferred_section_bytes: route.deferred_section_bytes(),
            price: None,
            previous: None,
            rows: Vec::new(),
        }
    }

    /// The same meter pricing tokens with `price`.
    #[must_use]
    pub fn with_price(mut self, price: Price) -> Self {
        self.price = Some(price);
        self
    }

    /// The segments of a body, concatenated in the provider's caching order.
    ///
    /// # Errors
    /// [`MeterError::Body`] when `body` is not an object with a `messages` array.
    pub fn prefix_bytes(&self, body: &str) -> Result<Vec<u8>, MeterError> {
        let body: Body<'_> = serde_json::from_str(body).map_err(MeterError::Body)?;
        let mut out = Vec::with_capacity(body.messages.iter().map(|m| m.get().len()).sum());
        let mut deferred = false;
        for tool in &body.tools {
            let flags: ToolFlags = serde_json::from_str(tool.get()).map_err(MeterError::Body)?;
            if flags.defer_loading {
                deferred = true;
            } else {
                out.extend_from_slice(tool.get().as_bytes());
            }
        }
        if deferred {
            // A fixed section: its bytes are the same whenever it is present.
            out.extend(std::iter::repeat_n(
                b'#',
                self.deferred_section_bytes as usize,
            ));
        }
        if let Some(system) = body.system {
            out.extend_from_slice(system.get().as_bytes());
        }
        for m in &body.messages {
            out.extend_from_slice(m.get().as_bytes());
        }
        Ok(out)
    }

    /// Meters the next request of the route; `starts_series` comes from
    /// `Request::starts_series`.
    ///
    /// # Errors
    /// [`MeterError::Body`] for a body that is not a request body; the meter is unchanged.
    pub fn observe(&mut self, body: &str, starts_series: bool) -> Result<MeterRow, MeterError> {
        let bytes = self.prefix_bytes(body)?;
        let total = bytes.len() as u64;
        let (cached, best) = match &self.previous {
            None => (0, 0),
            Some(prev) => {
                let cached = prev.iter().zip(&bytes).take_while(|(a, b)| a == b).count() as u64;
                let best = if starts_series {
                    cached
                } else {
                    (prev.len() as u64).min(total)
                };
                (cached, best)
            }
        };
        let row = MeterRow {
            total_bytes: total,
            cached_bytes: cached,
            best_bytes: best,
            starts_series,
        };
        self.previous = Some(bytes);
        self.rows.push(row);
        Ok(row)
    }

    /// Every row so far.
    pub fn rows(&self) -> &[MeterRow] {
        &self.rows
    }

    /// Totals, token estimates and, with a price, the estimated cost.
    pub fn report(&self) -> MeterReport {
        let tokens = |b: u64| b.div_ceil(4);
        let sum = |f: fn(&MeterRow) -> u64| self.rows.iter().map(f).sum::<u64>();
        let total_tokens = self.rows.iter().map(|r| tokens(r.total_bytes)).sum();
        let cached_tokens: u64 = self.rows.iter().map(|r| tokens(r.cached_bytes)).sum();
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
            total_bytes: sum(|r| r.total_bytes),
            cached_bytes: sum(|r| r.cached_bytes),
            best_bytes: sum(|r| r.best_bytes),
            total_tokens,
            cached_tokens,
            best_tokens: self.rows.iter().map(|r| tokens(r.best_bytes)).sum(),
            cost,
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
        let r1 = m.observe(one, true).unwrap();
        assert_eq!((r1.cached_bytes, r1.best_bytes), (0, 0));
        let r2 = m.observe(two, false).unwrap();
        assert_eq!((r2.total_bytes, r2.cached_bytes, r2.best_bytes), (14, 7, 7));
        let r3 = m.observe(rewritten, false).unwrap();
        assert_eq!(
            (r3.cached_bytes, r3.best_bytes),
            (5, 14),
            "a loss the design did not plan"
        );
        let r4 = m.observe(one, true).unwrap();
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
        assert!(m.observe("[]", false).is_err());
        assert_eq!(
            m.rows().len(),
            4,
            "a refused body leaves the meter unchanged"
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
        m.observe(&body, true).unwrap();
        m.observe(&body, false).unwrap();
        let cost = m.report().cost.unwrap();
        let expected = (1000.0 * 4.0 * 1.25 + 1000.0 * 0.4) / 1e6;
        assert!((cost - expected).abs() < 1e-12, "{cost} vs {expected}");
    }
}
