//! What one model's tokens cost: a fact of its catalog entry, read by the meter.

use std::borrow::Cow;

use super::Evidence;

/// Prices of one model, with the page they were read on. The meter shows tokens only without
/// one. Catalog entries carry the vendor's published figures ([`Route::price`]); a caller
/// prices any other route with [`Meter::with_price`](crate::meter::Meter::with_price).
///
/// [`Route::price`]: super::Route::price
///
/// ```
/// use mektpoy::route_for;
/// let route = route_for("openai", "gpt-5.4");
/// let price = route.price().unwrap();
/// assert_eq!((price.input_per_mtok, price.cache_read_per_mtok), (2.5, 0.25));
/// assert_eq!(price.currency, "USD");
/// ```
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
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
    pub evidence: Evidence,
}

impl Price {
    /// Prices in US dollars per million tokens, cache writes free (multiply with
    /// [`with_cache_write_multiplier`](Self::with_cache_write_multiplier) where they are not).
    ///
    /// ```
    /// use mektpoy::route::{Evidence, Price};
    /// let p = Price::usd(3.0, 0.3, Evidence::None).with_cache_write_multiplier(1.25);
    /// assert_eq!((p.input_per_mtok, p.cache_write_multiplier), (3.0, 1.25));
    /// ```
    pub const fn usd(input_per_mtok: f64, cache_read_per_mtok: f64, evidence: Evidence) -> Self {
        Price {
            input_per_mtok,
            cache_read_per_mtok,
            cache_write_multiplier: 1.0,
            currency: Cow::Borrowed("USD"),
            evidence,
        }
    }

    /// The same prices with new input tokens written to the cache billed at `factor` × input.
    ///
    /// ```
    /// use mektpoy::route::{Evidence, Price};
    /// assert_eq!(Price::usd(3.0, 0.3, Evidence::None).cache_write_multiplier, 1.0);
    /// let anthropic = Price::usd(3.0, 0.3, Evidence::None).with_cache_write_multiplier(1.25);
    /// assert_eq!(anthropic.cache_write_multiplier, 1.25);
    /// ```
    #[must_use]
    pub const fn with_cache_write_multiplier(mut self, factor: f64) -> Self {
        self.cache_write_multiplier = factor;
        self
    }
}
