//! The incremental path: a request that extends the previous one is read from what is new,
//! through the serializer's spans or the messages the meter kept, instead of parsing it whole.

use super::*;

/// The incremental path of `observe`: a body that keeps the previous body's first messages.
///
/// ```
/// use mektpoy::{Meter, route_for};
/// let turn = |text: &str| format!(r#"{{"role":"user","content":"{text}"}}"#);
/// let first = format!(r#"{{"messages":[{}]}}"#, turn(&"x".repeat(1000)));
/// let second = format!(r#"{{"messages":[{},{}]}}"#, turn(&"x".repeat(1000)), turn("next"));
/// let mut meter = Meter::new(&route_for("deepseek", "deepseek-flash"));
/// meter.observe(&first, None)?;
/// // What the kept messages read is what the whole cut would read.
/// let mut whole = Meter::new(&route_for("deepseek", "deepseek-flash"));
/// whole.prime(&first)?;
/// assert_eq!(meter.observe(&second, None)?.cached_bytes, whole.observe(&second, None)?.cached_bytes);
/// # Ok::<(), mektpoy::meter::MeterError>(())
/// ```
impl Meter {
    /// The path of [`observe`](Self::observe) for a body that keeps the previous body's first
    /// wire messages: `None` leaves it to the whole cut (nothing kept, a meter restored or
    /// primed without counts, a body that is not a request body).
    ///
    /// A message is kept when its bytes are the previous cut's bytes of the message at its
    /// index and neither it nor the previous one holds a `cache_control` key: the cut of a
    /// message without markers is its bytes, and everything the cut counts of it (blocks,
    /// block ends, marks, definitions by value) is a function of them, so the kept messages'
    /// figures are the previous cut's.
    pub(super) fn observe_kept(
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
        let new = parsed.messages[kept..].iter().map(|m| m.get());
        let fresh = Cut::of_new_messages(base, kept, new, self.markers);
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
    pub(super) fn remember(&mut self, wire: &WireRequest) {
        if let Some(p) = self.previous.as_mut() {
            p.leaves = wire.segments.as_ref().and_then(|s| s.leaves.clone());
            p.mark = wire.report.lookback_breakpoint;
        }
    }

    /// The segment path of [`observe_wire`](Self::observe_wire); `None` leaves the request to
    /// the parsing path (no segments, kept wire messages not proven to be the previous
    /// request's, or spans that do not read as the slow path would).
    pub(super) fn observe_segments(&mut self, wire: &WireRequest) -> Option<(MeterRow, Path)> {
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
    pub(super) fn observe_after_kept(
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
    pub(super) fn extends_in_place(&self, head: &Cut, fresh: &Cut, kept: usize) -> bool {
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
}
