//! A body its caller has read already: metered from its parts, with the first messages the
//! caller knows to be the previous body's taken as they were cut, without a second parse of the
//! body ([decision 159](crate::manual::decisions#decision-159)).

use super::*;

/// A request body as its caller read it, every part borrowed from the body's text: what
/// [`Meter::observe_read`] meters without parsing the body again. A proxy that parsed a
/// client's body once, keeping its messages raw, and knows by its own comparison which leading
/// messages the previous body held byte for byte, meters the body for the cost of its new
/// messages.
///
/// ```
/// use mektpoy::{Meter, route_for, meter::ReadBody};
/// use serde_json::value::RawValue;
/// #[derive(serde::Deserialize)]
/// struct Read<'a> {
///     #[serde(borrow)]
///     messages: Vec<&'a RawValue>,
/// }
/// let route = route_for("anthropic", "claude-opus-5");
/// let (mut read, mut parsed) = (Meter::new(&route), Meter::new(&route));
/// let first = r#"{"messages":[{"role":"user","content":"hi"}]}"#;
/// let next = r#"{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"ok"},{"role":"user","content":"go"}]}"#;
/// for (body, kept) in [(first, 0), (next, 1)] {
///     let r: Read<'_> = serde_json::from_str(body)?;
///     // The caller knows the first message is the previous body's: it is not read again.
///     let row = read.observe_read(ReadBody::new(body, &r.messages).kept(kept), None)?;
///     assert_eq!(row, parsed.observe(body, None)?);
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct ReadBody<'a> {
    body: &'a str,
    messages: &'a [&'a RawValue],
    tools: Option<&'a RawValue>,
    system: Option<&'a RawValue>,
    cache_control: bool,
    kept: usize,
}

/// Building a read body from a body parsed once, its messages kept raw.
///
/// ```
/// use mektpoy::{Meter, route_for, meter::ReadBody};
/// use serde_json::value::RawValue;
/// let body = r#"{"system":"Be brief.","messages":[{"role":"user","content":"hi"}]}"#;
/// let parts: std::collections::HashMap<&str, &RawValue> = serde_json::from_str(body)?;
/// let messages: Vec<&RawValue> = serde_json::from_str(parts["messages"].get())?;
/// let read = ReadBody::new(body, &messages).system(parts["system"]);
/// let route = route_for("deepseek", "deepseek-flash");
/// assert_eq!(Meter::new(&route).observe_read(read, None)?, Meter::new(&route).observe(body, None)?);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
impl<'a> ReadBody<'a> {
    /// The body `body`, whose `messages` (a Responses body's `input`) array holds `messages`,
    /// in order, each a slice of `body` (as `serde_json` borrows them); no tools, no
    /// `system`, no top-level `cache_control`, nothing kept, until said.
    ///
    /// ```
    /// use mektpoy::{Meter, route_for, meter::ReadBody};
    /// use serde_json::value::RawValue;
    /// let body = r#"{"messages":[{"role":"user","content":"hi"}]}"#;
    /// let read: std::collections::HashMap<&str, Vec<&RawValue>> = serde_json::from_str(body)?;
    /// let route = route_for("deepseek", "deepseek-flash");
    /// let row = Meter::new(&route).observe_read(ReadBody::new(body, &read["messages"]), None)?;
    /// assert_eq!(row, Meter::new(&route).observe(body, None)?);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new(body: &'a str, messages: &'a [&'a RawValue]) -> Self {
        ReadBody {
            body,
            messages,
            tools: None,
            system: None,
            cache_control: false,
            kept: 0,
        }
    }

    /// The body's `tools` value.
    ///
    /// ```
    /// use mektpoy::{Meter, route_for, meter::ReadBody};
    /// use serde_json::value::RawValue;
    /// #[derive(serde::Deserialize)]
    /// struct Read<'a> {
    ///     #[serde(borrow)]
    ///     tools: &'a RawValue,
    ///     #[serde(borrow)]
    ///     messages: Vec<&'a RawValue>,
    /// }
    /// let tools = r#""tools":[{"name":"read","description":"","input_schema":{"type":"object"}}]"#;
    /// let first = format!(r#"{{{tools},"messages":[{{"role":"user","content":"hi"}}]}}"#);
    /// let next = format!(r#"{{{tools},"messages":[{{"role":"user","content":"hi"}},{{"role":"user","content":"go"}}]}}"#);
    /// let route = route_for("anthropic", "claude-opus-5");
    /// let (mut read, mut parsed) = (Meter::new(&route), Meter::new(&route));
    /// for (body, kept) in [(&first, 0), (&next, 1)] {
    ///     let r: Read<'_> = serde_json::from_str(body)?;
    ///     let row = read.observe_read(ReadBody::new(body, &r.messages).tools(r.tools).kept(kept), None)?;
    ///     assert_eq!(row, parsed.observe(body, None)?, "the tools count as the parsed body's");
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn tools(mut self, tools: &'a RawValue) -> Self {
        self.tools = Some(tools);
        self
    }

    /// The body's `system` value (a Responses body's `instructions`).
    ///
    /// ```
    /// use mektpoy::{Meter, route_for, meter::ReadBody};
    /// use serde_json::value::RawValue;
    /// #[derive(serde::Deserialize)]
    /// struct Read<'a> {
    ///     #[serde(borrow)]
    ///     system: &'a RawValue,
    ///     #[serde(borrow)]
    ///     messages: Vec<&'a RawValue>,
    /// }
    /// let first = r#"{"system":"Be brief.","messages":[{"role":"user","content":"hi"}]}"#;
    /// let next = r#"{"system":"Be brief.","messages":[{"role":"user","content":"hi"},{"role":"user","content":"go"}]}"#;
    /// let route = route_for("deepseek", "deepseek-flash");
    /// let (mut read, mut parsed) = (Meter::new(&route), Meter::new(&route));
    /// for (body, kept) in [(first, 0), (next, 1)] {
    ///     let r: Read<'_> = serde_json::from_str(body)?;
    ///     let row = read.observe_read(ReadBody::new(body, &r.messages).system(r.system).kept(kept), None)?;
    ///     assert_eq!(row, parsed.observe(body, None)?);
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn system(mut self, system: &'a RawValue) -> Self {
        self.system = Some(system);
        self
    }

    /// Whether the body has a top-level `cache_control` that is not `null` (automatic
    /// caching).
    ///
    /// ```
    /// use mektpoy::{Meter, route_for, meter::ReadBody};
    /// use serde_json::value::RawValue;
    /// let first = r#"{"cache_control":{"type":"ephemeral"},"messages":[{"role":"user","content":"hi"}]}"#;
    /// let next = r#"{"cache_control":{"type":"ephemeral"},"messages":[{"role":"user","content":"hi"},{"role":"user","content":"go"}]}"#;
    /// let route = route_for("anthropic", "claude-opus-5");
    /// let (mut read, mut parsed) = (Meter::new(&route), Meter::new(&route));
    /// for (body, kept) in [(first, 0), (next, 1)] {
    ///     let r: std::collections::HashMap<&str, &RawValue> = serde_json::from_str(body)?;
    ///     let messages: Vec<&RawValue> = serde_json::from_str(r["messages"].get())?;
    ///     let body_read = ReadBody::new(body, &messages).cache_control(true).kept(kept);
    ///     assert_eq!(read.observe_read(body_read, None)?, parsed.observe(body, None)?);
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn cache_control(mut self, present: bool) -> Self {
        self.cache_control = present;
        self
    }

    /// How many leading messages are, byte for byte, the first messages of the body the
    /// meter observed last: the caller's word (a comparison of its own, by keyed hashes or
    /// bytes). They are neither read nor compared again; a wrong count meters a wrong figure,
    /// never fails.
    ///
    /// A count beyond what the previous body held is bounded by it:
    ///
    /// ```
    /// use mektpoy::{Meter, route_for, meter::ReadBody};
    /// use serde_json::value::RawValue;
    /// let first = r#"{"messages":[{"role":"user","content":"hi"}]}"#;
    /// let next = r#"{"messages":[{"role":"user","content":"hi"},{"role":"user","content":"go"}]}"#;
    /// let route = route_for("deepseek", "deepseek-flash");
    /// let (mut read, mut parsed) = (Meter::new(&route), Meter::new(&route));
    /// for body in [first, next] {
    ///     let r: std::collections::HashMap<&str, Vec<&RawValue>> = serde_json::from_str(body)?;
    ///     let row = read.observe_read(ReadBody::new(body, &r["messages"]).kept(usize::MAX), None)?;
    ///     assert_eq!(row, parsed.observe(body, None)?);
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn kept(mut self, kept: usize) -> Self {
        self.kept = kept;
        self
    }

    /// Where `m` sits in the body: its byte range, when it is a slice of it.
    fn range_of(&self, m: &RawValue) -> Option<std::ops::Range<usize>> {
        let text = m.get();
        let at = (text.as_ptr() as usize).checked_sub(self.body.as_ptr() as usize)?;
        let end = at.checked_add(text.len())?;
        // In bounds, it is in the body: another allocation cannot overlap it.
        self.body.get(at..end).map(|_| at..end)
    }
}

/// Metering a body its caller has read.
///
/// ```
/// use mektpoy::{Meter, route_for, meter::ReadBody};
/// use serde_json::value::RawValue;
/// let route = route_for("deepseek", "deepseek-flash");
/// let (mut read, mut parsed) = (Meter::new(&route), Meter::new(&route));
/// let first = r#"{"messages":[{"role":"user","content":"hi"}]}"#;
/// let next = r#"{"messages":[{"role":"user","content":"hi"},{"role":"user","content":"go"}]}"#;
/// for (body, kept) in [(first, 0), (next, 1)] {
///     let r: std::collections::HashMap<&str, Vec<&RawValue>> = serde_json::from_str(body)?;
///     let row = read.observe_read(ReadBody::new(body, &r["messages"]).kept(kept), None)?;
///     assert_eq!(row, parsed.observe(body, None)?);
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
impl Meter {
    /// [`observe`](Self::observe) on a body its caller has read ([`ReadBody`]), with the same
    /// results when the parts are the body's: the kept messages are taken from the previous
    /// cut as it counted them (what [`observe`](Self::observe) finds comparing their bytes),
    /// the new ones cut, the head cut from the given `tools` and `system`; nothing else of the
    /// body is read but what lies outside its messages. When nothing is kept, the meter has
    /// no counts of its previous body (a restored or primed meter) or a part is not a slice
    /// of the body, the body is metered by [`observe`](Self::observe).
    ///
    /// # Errors
    /// [`MeterError::Body`] when the body goes to [`observe`](Self::observe) and is not a
    /// request body; the meter is unchanged.
    ///
    /// ```
    /// use mektpoy::{Meter, route_for, meter::ReadBody};
    /// use serde_json::value::RawValue;
    /// let route = route_for("deepseek", "deepseek-flash");
    /// let mut meter = Meter::new(&route);
    /// let body = r#"{"messages":[{"role":"user","content":"hi"}]}"#;
    /// let read: std::collections::HashMap<&str, Vec<&RawValue>> = serde_json::from_str(body)?;
    /// let row = meter.observe_read(ReadBody::new(body, &read["messages"]), None)?;
    /// assert!(row.total_bytes > 0 && row.cached_bytes == 0, "a first request reads nothing");
    /// assert_eq!(meter.rows().len(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn observe_read(
        &mut self,
        read: ReadBody<'_>,
        series_start: Option<SeriesStart>,
    ) -> Result<MeterRow, MeterError> {
        #[cfg(debug_assertions)]
        let before = self.clone();
        let Some(row) = self.observe_read_kept(&read, series_start) else {
            return self.observe(read.body, series_start);
        };
        // Nothing of a loop's pass proves this body's messages: as the whole cut leaves it.
        if let Some(p) = self.previous.as_mut() {
            p.leaves = None;
            p.mark = None;
        }
        // A body the parsing path takes (not one with a repeated key, which it refuses), whose
        // kept messages are the previous body's as the caller said, is metered as that path
        // meters it.
        #[cfg(debug_assertions)]
        {
            let mut slow = before;
            let kept = slow.kept_of(&read);
            let vouched = slow.previous.as_ref().is_some_and(|p| {
                let hc = p.head_spans();
                read.messages[..kept].iter().enumerate().all(|(i, m)| {
                    let span = &p.segments[hc + i];
                    p.bytes.get(span.start..span.end) == Some(m.get().as_bytes())
                })
            });
            if let (true, Ok(slow_row)) = (vouched, slow.observe_parsed(read.body, series_start)) {
                debug_assert_eq!(slow_row, row, "the read path's row departs");
                debug_assert_eq!(slow.departures, self.departures, "departures depart");
                debug_assert_eq!(slow.previous, self.previous, "the kept cut departs");
                debug_assert_eq!(slow.rate_before, self.rate_before, "the rate departs");
                debug_assert_eq!(slow.cache, self.cache, "the cache entries depart");
            }
        }
        Ok(row)
    }

    /// How many of `read`'s kept messages the previous cut takes over as the parsing path
    /// would keep them: up to the first one it counted a `cache_control` key in (the same
    /// bytes hold it now), within its messages (one segment each, in order, after the head);
    /// 0 when it has no counts.
    fn kept_of(&self, read: &ReadBody<'_>) -> usize {
        let Some((prev, counted)) = self
            .previous
            .as_ref()
            .filter(|p| p.prints.is_some())
            .and_then(|p| Some((p, p.counted.as_deref()?)))
        else {
            return 0;
        };
        let hc = prev.head_spans();
        let kept = read
            .kept
            .min(read.messages.len())
            .min(counted.len())
            .min(prev.segments.len().saturating_sub(hc))
            .min(counted.partition_point(|c| c.asks == 0));
        match kept.checked_sub(1).map(|i| &prev.segments[hc + i].segment) {
            Some(Segment::Message { index }) if *index == kept - 1 => kept,
            _ => 0,
        }
    }

    /// The path of [`observe_read`](Self::observe_read) that takes the kept messages from the
    /// previous cut; `None` leaves the body to [`observe`](Self::observe).
    fn observe_read_kept(
        &mut self,
        read: &ReadBody<'_>,
        series_start: Option<SeriesStart>,
    ) -> Option<MeterRow> {
        let kept = self.kept_of(read);
        if kept == 0 {
            return None;
        }
        let base = *self.previous.as_ref()?.counted.as_deref()?.get(kept - 1)?;
        // The body outside its messages: the head before them, the rest after them.
        let first = read.range_of(read.messages.first()?)?;
        let last = read.range_of(read.messages.last()?)?;
        let outside = [read.body.get(..first.start)?, read.body.get(last.end..)?];
        let tools: Vec<&RawValue> = match read.tools {
            Some(t) => serde_json::from_str(t.get()).ok()?,
            None => Vec::new(),
        };
        let mut cut = self.head(&tools, read.system.map(RawValue::get)).ok()?;
        let new = &read.messages[kept..];
        if !new.iter().all(|m| read.range_of(m).is_some()) {
            return None;
        }
        let fresh = Cut::of_new_messages(base, kept, new.iter().map(|m| m.get()), self.markers);
        let last_counted = fresh.counted.last().copied().unwrap_or(base);
        cut.blocks = last_counted.blocks;
        cut.top_level = self.markers && read.cache_control;
        // The definition's type cannot straddle a message's bounds (it holds no brace):
        // it is in a message (counted) or outside them.
        cut.by_value = last_counted.by_value > 0 || outside.iter().any(|t| t.contains(BY_VALUE));
        self.observe_after_kept(cut, fresh, (kept, base), series_start)
            .map(|(row, _)| row)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::route_for;

    #[derive(Deserialize)]
    struct Parts<'a> {
        #[serde(borrow, default)]
        tools: Option<&'a RawValue>,
        #[serde(borrow, default)]
        system: Option<&'a RawValue>,
        #[serde(borrow)]
        messages: Vec<&'a RawValue>,
        #[serde(borrow, default)]
        cache_control: Option<&'a RawValue>,
    }

    fn body(turns: usize, marked: Option<usize>) -> String {
        let messages: Vec<String> = (0..turns)
            .map(|i| {
                let role = if i % 2 == 0 { "user" } else { "assistant" };
                let mark = if marked == Some(i) {
                    r#","cache_control":{"type":"ephemeral"}"#
                } else {
                    ""
                };
                format!(
                    r#"{{"role":"{role}","content":[{{"type":"text","text":"turn {i} {}"{mark}}}]}}"#,
                    "x".repeat(300)
                )
            })
            .collect();
        format!(
            r#"{{"model":"claude-opus-5","system":"Be brief.","tools":[{{"name":"read","input_schema":{{"type":"object"}}}}],"messages":[{}]}}"#,
            messages.join(",")
        )
    }

    /// The rows, departures and cut of a conversation metered by `observe` and by
    /// `observe_read` with `kept` each time (the caller's word), side by side.
    fn both(bodies: &[String], kept: impl Fn(usize) -> usize) -> (Meter, Meter) {
        let route = route_for("anthropic", "claude-opus-5");
        let (mut slow, mut read) = (Meter::new(&route), Meter::new(&route));
        for (n, b) in bodies.iter().enumerate() {
            let parts: Parts<'_> = serde_json::from_str(b).unwrap();
            let mut r = ReadBody::new(b, &parts.messages)
                .kept(kept(n))
                .cache_control(parts.cache_control.is_some());
            if let Some(t) = parts.tools {
                r = r.tools(t);
            }
            if let Some(s) = parts.system {
                r = r.system(s);
            }
            // The kept messages are taken from the previous cut, not left to the parse.
            let taken = read.clone().observe_read_kept(&r, None).is_some();
            assert_eq!(taken, kept(n) > 0, "request {n}");
            let a = slow.observe(b, None).unwrap();
            let z = read.observe_read(r, None).unwrap();
            assert_eq!(a, z, "request {n}");
        }
        (slow, read)
    }

    #[test]
    fn a_read_body_meters_as_the_parsed_one() {
        // Growing, then a marked message among the kept ones, then a rewrite the caller
        // reports (nothing kept).
        let bodies = vec![
            body(3, None),
            body(5, None),
            body(7, Some(6)),
            body(9, Some(2)),
            body(9, None),
            body(4, None),
        ];
        // What each body keeps of the one before, byte for byte (a marker moved at 3, a
        // shrink at 5).
        let kept = [0, 3, 5, 2, 2, 3];
        let (slow, read) = both(&bodies, |n| kept[n]);
        assert_eq!(slow.previous, read.previous);
        assert_eq!(slow.departures, read.departures);
        assert_eq!(slow.cache, read.cache);
    }

    #[test]
    fn parts_that_are_not_the_bodys_go_to_the_parsing_path() {
        let route = route_for("anthropic", "claude-opus-5");
        let mut meter = Meter::new(&route);
        let first = body(3, None);
        meter.observe(&first, None).unwrap();
        let next = body(5, None);
        // Messages read from another copy of the body: not slices of `next`.
        let copy = next.clone();
        let parts: Parts<'_> = serde_json::from_str(&copy).unwrap();
        let row = meter
            .observe_read(ReadBody::new(&next, &parts.messages).kept(3), None)
            .unwrap();
        let mut slow = Meter::new(&route);
        slow.observe(&first, None).unwrap();
        assert_eq!(row, slow.observe(&next, None).unwrap());
        assert!(
            Meter::new(&route)
                .observe_read(ReadBody::new("{", &[]).kept(1), None)
                .is_err(),
            "not a body: the parsing path's error"
        );
    }
}
