//! The meter's saved form: what `Meter::save` writes and `Meter::restore` reads back.

use super::*;

/// Saving a meter and restoring it after a restart.
///
/// ```
/// use mektpoy::{Meter, route_for};
/// let route = route_for("deepseek", "deepseek-flash");
/// let mut meter = Meter::new(&route);
/// meter.observe(r#"{"messages":[{"role":"user","content":"hi"}]}"#, None)?;
/// let restored = Meter::restore(&route, &meter.save())?;
/// assert_eq!(restored.report(), meter.report());
/// # Ok::<(), mektpoy::meter::MeterError>(())
/// ```
impl Meter {
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
    ///
    /// ```
    /// use mektpoy::{Meter, route_for};
    /// let route = route_for("deepseek", "deepseek-flash");
    /// let body = format!(r#"{{"messages":[{{"role":"user","content":"{}"}}]}}"#, "x".repeat(1000));
    /// let mut meter = Meter::new(&route);
    /// meter.observe(&body, None)?;
    /// let mut restored = Meter::restore(&route, &meter.save())?;
    /// assert_eq!(restored.rows(), meter.rows());
    /// assert_eq!(restored.observe(&body, None)?, meter.observe(&body, None)?);
    /// # Ok::<(), mektpoy::meter::MeterError>(())
    /// ```
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
    /// ```
    /// use mektpoy::meter::{MeterError, RestoreFault};
    /// use mektpoy::{Meter, route_for};
    /// let route = route_for("deepseek", "deepseek-flash");
    /// let saved = Meter::new(&route).save();
    /// assert!(Meter::restore(&route, &saved)?.rows().is_empty());
    /// let newer = saved.replacen(r#""version":3"#, r#""version":9"#, 1);
    /// assert!(matches!(
    ///     Meter::restore(&route, &newer),
    ///     Err(MeterError::Restore { reason: RestoreFault::Version(9) })
    /// ));
    /// # Ok::<(), mektpoy::meter::MeterError>(())
    /// ```
    ///
    /// # Errors
    /// [`MeterError::Restore`] when `saved` is not a saved meter, has another version, or
    /// was saved for another route (or one whose meter rules have changed since).
    pub fn restore(route: &Route, saved: &str) -> Result<Meter, MeterError> {
        let fault = |reason| MeterError::Restore { reason };
        let version: SavedVersion = serde_json::from_str(saved)
            .map_err(|e| fault(RestoreFault::Malformed(JsonFault::from(&e))))?;
        if !(1..=SAVE_VERSION).contains(&version.version) {
            return Err(fault(RestoreFault::Version(version.version)));
        }
        let saved: Saved<'_> = serde_json::from_str(saved)
            .map_err(|e| fault(RestoreFault::Malformed(JsonFault::from(&e))))?;
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
            Some(d) => {
                return Err(fault(RestoreFault::DeparturesPerRow {
                    rows: meter.rows.len(),
                    departures: d.len(),
                }));
            }
            None => vec![None; meter.rows.len()],
        };
        Ok(meter)
    }
}

/// The saved form (versions 1 to 3). Field names are camelCase, as in the session log.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct Saved<'a> {
    pub(super) version: u64,
    #[serde(borrow)]
    pub(super) route: Cow<'a, str>,
    #[serde(borrow)]
    pub(super) previous: Option<SavedPrevious<'a>>,
    pub(super) rate_before: Option<Rate>,
    /// Version 3: the cache entries, `[length, hash]`, in order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) cache: Option<Vec<(u64, u64)>>,
    pub(super) rows: Vec<SavedRow>,
    /// Version 2: one per row.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) departures: Option<Vec<Option<SavedDeparture>>>,
}

/// Only the version, read first so that another version is refused as such.
#[derive(Deserialize)]
pub(super) struct SavedVersion {
    pub(super) version: u64,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct SavedPrevious<'a> {
    #[serde(borrow)]
    pub(super) prefix: Cow<'a, str>,
    pub(super) blocks: usize,
    pub(super) by_value: bool,
    pub(super) rate: Option<Rate>,
    pub(super) row: bool,
    /// Version 2: every tool of the body, `[name, hash, deferred]`.
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub(super) tools: Option<Vec<SavedTool<'a>>>,
}

/// A saved tool: `[name, hash, deferred]`.
pub(super) type SavedTool<'a> = (Cow<'a, str>, Option<u64>, bool);

/// A departure: `[offset, previous bytes, total bytes, segment, block, tool changes]`.
#[derive(Serialize, Deserialize)]
pub(super) struct SavedDeparture(
    u64,
    u64,
    u64,
    SavedSegment,
    Option<usize>,
    Vec<SavedToolChange>,
);

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(super) enum SavedSegment {
    Tool(usize, String),
    DeferredTools,
    System,
    Message(usize),
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(super) enum SavedToolChange {
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
pub(super) struct SavedRow(
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
pub(super) enum SavedSeriesStart {
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
