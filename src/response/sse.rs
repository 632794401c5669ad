//! Server-sent-event framing: lines in, `(event, data)` pairs out.
//!
//! Only what both streams use: `event:` and `data:` fields (several `data:` lines join with
//! `\n`), comments (`:`) and other fields ignored, one optional space after the colon, `\r\n`
//! line ends, a blank line ending an event. Text pushed in pieces is buffered up to the next
//! line end, so a caller can feed network chunks as they come.

/// One event: its `event:` name (if any) and its data.
pub(super) type Frame = (Option<String>, String);

#[derive(Debug, Default)]
pub(super) struct Framer {
    /// Text after the last line end.
    partial: String,
    event: Option<String>,
    data: Option<String>,
}

impl Framer {
    /// One line without its line end; the event it completes, if any.
    pub(super) fn line(&mut self, line: &str) -> Option<Frame> {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.is_empty() {
            return self.dispatch();
        }
        if line.starts_with(':') {
            return None;
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match field {
            "event" => self.event = Some(value.to_owned()),
            "data" => match &mut self.data {
                Some(data) => {
                    data.push('\n');
                    data.push_str(value);
                }
                None => self.data = Some(value.to_owned()),
            },
            _ => {}
        }
        None
    }

    /// Text as it arrives: the events its complete lines finish, in order.
    pub(super) fn text(&mut self, text: &str) -> Vec<Frame> {
        let mut frames = Vec::new();
        let mut rest = text;
        while let Some(end) = rest.find('\n') {
            let piece = &rest[..end];
            rest = &rest[end + 1..];
            let frame = if self.partial.is_empty() {
                self.line(piece)
            } else {
                let mut line = std::mem::take(&mut self.partial);
                line.push_str(piece);
                self.line(&line)
            };
            frames.extend(frame);
        }
        self.partial.push_str(rest);
        frames
    }

    /// The end of the input: the last line and the event it leaves open, if any (a stream that
    /// ends without a blank line still delivers its last event).
    pub(super) fn end(&mut self) -> Option<Frame> {
        let line = std::mem::take(&mut self.partial);
        if let Some(frame) = self.line(&line) {
            return Some(frame);
        }
        self.dispatch()
    }

    fn dispatch(&mut self) -> Option<Frame> {
        let event = self.event.take();
        let data = self.data.take()?;
        Some((event, data))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_split_anywhere() {
        let text =
            "event: ping\r\ndata: {\"type\": \"ping\"}\r\n\r\n: comment\ndata:a\ndata: b\n\n";
        for cut in 0..text.len() {
            let mut f = Framer::default();
            let mut frames = f.text(&text[..cut]);
            frames.extend(f.text(&text[cut..]));
            frames.extend(f.end());
            assert_eq!(
                frames,
                vec![
                    (Some("ping".to_owned()), "{\"type\": \"ping\"}".to_owned()),
                    (None, "a\nb".to_owned()),
                ],
                "cut at {cut}"
            );
        }
    }
}
