//! Splitting a file's bytes into its head line, event lines and batches.
//!
//! The reader owns the file's structure: where lines end, which lines are frames, the load
//! limits, and where a torn end starts. What a line *means* is its driver's: the reader yields
//! each event line raw, and the driver decodes it and either goes on (the line is kept),
//! [`tear`](Lines::tear)s (the line was the file's unterminated end, cut short by a write) or
//! stops with its own error. A driver therefore never repeats the torn-tail rules, and the
//! reader never needs to know what an event is.

use std::str::Utf8Error;
use std::sync::Arc;

use super::frame::{Frame, FrameFault, Probe, cut_frame, looks_like_frame};

/// A dropped end of the file: its last line had no `\n` and did not parse or validate, or its
/// last batch is incomplete (a write cut short).
///
/// ```
/// use mektpoy::Session;
/// let mut bytes = Session::new("s").to_jsonl().into_bytes();
/// let end = bytes.len() as u64;
/// bytes.extend_from_slice(b"{\"type\":"); // cut short
/// let torn = Session::load_bytes(&bytes)?.torn_tail.unwrap();
/// assert_eq!((torn.offset, torn.len, torn.batch), (end, 8, None));
/// # Ok::<(), mektpoy::session::LoadError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct TornTail {
    /// Byte offset where the dropped bytes start (the file's length once they are dropped).
    pub offset: u64,
    /// Their length in bytes: from `offset` to the end of the file.
    pub len: u64,
    /// Set when what was dropped is a framed batch (or a frame line cut short), `None` when
    /// it is a single torn line.
    pub batch: Option<TornBatch>,
}

/// A framed batch dropped because the file does not hold all of it.
///
/// ```
/// use mektpoy::{Event, Message, Session};
/// let session = Session::new("s");
/// session.append(Event::append(Message::user("u1", "hi")))?;
/// let mut bytes = session.to_jsonl().into_bytes();
/// // A batch of two events whose second line never reached the disk.
/// let line = Event::append(Message::user("u2", "x")).to_json();
/// bytes.extend_from_slice(format!("{{\"batch\":2}}\n{line}\n").as_bytes());
/// let loaded = Session::load_bytes(&bytes)?;
/// let batch = loaded.torn_tail.unwrap().batch.unwrap();
/// assert_eq!((batch.line, batch.announced, batch.dropped_events), (3, Some(2), 1));
/// assert_eq!(loaded.session.len(), 1, "the whole batch is dropped");
/// # Ok::<(), mektpoy::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct TornBatch {
    /// 1-based line number of its frame line.
    pub line: usize,
    /// The number of event lines the frame announces; `None` when the frame line itself was
    /// cut before its end.
    pub announced: Option<u64>,
    /// Whole event lines of the batch that were in the file and are dropped with it.
    pub dropped_events: usize,
}

/// Load limits, for files from elsewhere: a line is refused by its length before anyone
/// parses it, so a hostile line costs its bytes, not a parser's tree.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Limits {
    /// The longest line, in bytes without its `\n`.
    pub max_line_bytes: Option<usize>,
    /// The most event lines the file may keep (a torn tail's are not counted).
    pub max_events: Option<usize>,
}

/// What the file's structure refuses. Its driver turns these into its own error type.
#[derive(Debug)]
pub(crate) enum ReadError {
    /// No line at all: the file is empty.
    NoLines,
    /// A line longer than [`Limits::max_line_bytes`].
    LineTooLong { line: usize, len: usize, max: usize },
    /// More event lines than [`Limits::max_events`]; `line` is the first beyond the limit.
    TooManyEvents { line: usize, max: usize },
    /// An empty line.
    EmptyLine { line: usize },
    /// A `\n`-terminated frame line that is malformed, or a frame inside another's batch.
    BadFrame { line: usize, fault: FrameFault },
}

/// Line 1, which the driver reads as it likes.
pub(crate) struct Head<'a> {
    /// Its text, when it is UTF-8.
    pub text: Result<&'a str, Utf8Error>,
    /// Whether it ends in `\n`. An unterminated head is the file's only line.
    pub terminated: bool,
}

/// An event line, for the driver to decode.
pub(crate) struct EventLine<'a> {
    /// 1-based line number in the file.
    pub line: usize,
    /// How many event lines precede it (its index among them), batches not yet whole included.
    pub index: usize,
    /// Its text without `\n`, when it is UTF-8.
    pub text: Result<&'a str, Utf8Error>,
}

/// What the reader found next.
pub(crate) enum Item<'a> {
    /// A frame line: the event lines up to the matching [`Item::End`] stand or fall together.
    Begin,
    /// An event line. Asking for the next item keeps it; [`Lines::tear`] drops it.
    Event(EventLine<'a>),
    /// The open batch is whole; its frame, loaded bytes included.
    End(Frame),
}

/// How the file ends once read: what was dropped, and whether the last kept line lacks `\n`.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Tail {
    /// The dropped end, if the file was torn.
    pub torn_tail: Option<TornTail>,
    /// Whether the last kept line has no `\n` (it is kept all the same).
    pub unterminated: bool,
}

/// A batch whose frame line was read and whose event lines are still being read.
struct Open {
    /// 1-based line of the frame.
    line: usize,
    /// Byte offset of the frame line.
    offset: usize,
    announced: u64,
    frame: Arc<str>,
    /// Event lines of the batch kept so far.
    present: usize,
    /// The first line of the batch beyond `max_events`.
    over_limit: Option<usize>,
}

/// The event line yielded last, kept once the driver asks for the next item.
#[derive(Clone, Copy)]
struct Last {
    line: usize,
    offset: usize,
    terminated: bool,
}

/// The lines after the head, as [`Item`]s (see the module documentation for the protocol).
pub(crate) struct Lines<'a> {
    bytes: &'a [u8],
    limits: Limits,
    /// Offset of the next line.
    pos: usize,
    /// Number of the last line read.
    line: usize,
    /// Event lines kept outside an open batch.
    kept: usize,
    open: Option<Open>,
    last: Option<Last>,
    tail: Tail,
    done: bool,
}

impl<'a> Lines<'a> {
    /// Reads line 1 of `bytes` and readies the rest.
    ///
    /// # Errors
    /// [`ReadError::NoLines`] for empty bytes; [`ReadError::LineTooLong`] and
    /// [`ReadError::EmptyLine`] for line 1.
    pub(crate) fn new(bytes: &'a [u8], limits: Limits) -> Result<(Head<'a>, Self), ReadError> {
        let mut lines = Lines {
            bytes,
            limits,
            pos: 0,
            line: 0,
            kept: 0,
            open: None,
            last: None,
            tail: Tail::default(),
            done: false,
        };
        let (_, raw, terminated) = lines.segment().ok_or(ReadError::NoLines)?;
        lines.check(raw)?;
        lines.tail.unterminated = !terminated;
        let head = Head {
            text: std::str::from_utf8(raw),
            terminated,
        };
        Ok((head, lines))
    }

    /// Drops the event line yielded last as the file's torn end, when it is the unterminated
    /// last line (a write cut short), and ends the reading. `false` when it is `\n`-terminated:
    /// then whatever is wrong with it is the file's fault, and the driver refuses the file.
    pub(crate) fn tear(&mut self) -> bool {
        match self.last {
            Some(last) if !last.terminated => {
                self.last = None;
                self.torn_at(last.offset, None);
                true
            }
            _ => false,
        }
    }

    /// How the file ends. Call once the items are exhausted or after a [`tear`](Self::tear).
    pub(crate) fn finish(self) -> Tail {
        self.tail
    }

    /// The next line: its offset, bytes without `\n`, and whether it had one.
    fn segment(&mut self) -> Option<(usize, &'a [u8], bool)> {
        let start = self.pos;
        let rest = self.bytes.get(start..).filter(|r| !r.is_empty())?;
        self.line += 1;
        Some(match rest.iter().position(|b| *b == b'\n') {
            Some(i) => {
                self.pos = start + i + 1;
                (start, &rest[..i], true)
            }
            None => {
                self.pos = self.bytes.len();
                (start, rest, false)
            }
        })
    }

    /// The structural checks every line passes before anyone parses it.
    fn check(&self, raw: &[u8]) -> Result<(), ReadError> {
        let line = self.line;
        match self.limits.max_line_bytes {
            Some(max) if raw.len() > max => Err(ReadError::LineTooLong {
                line,
                len: raw.len(),
                max,
            }),
            _ if raw.is_empty() => Err(ReadError::EmptyLine { line }),
            _ => Ok(()),
        }
    }

    /// Ends the reading with the file torn at `offset`, or at the open batch's frame.
    fn torn_at(&mut self, offset: usize, frame_cut: Option<usize>) {
        let end = self.bytes.len();
        self.tail.torn_tail = Some(match &self.open {
            Some(b) => TornTail {
                offset: b.offset as u64,
                len: (end - b.offset) as u64,
                batch: Some(TornBatch {
                    line: b.line,
                    announced: Some(b.announced),
                    dropped_events: b.present,
                }),
            },
            None => TornTail {
                offset: offset as u64,
                len: (end - offset) as u64,
                batch: frame_cut.map(|line| TornBatch {
                    line,
                    announced: None,
                    dropped_events: 0,
                }),
            },
        });
        self.done = true;
    }

    /// Keeps the event line yielded last (the driver asked for more, so it took it): counts
    /// it against `max_events`, and closes its batch when it was the batch's last line.
    fn keep_last(&mut self) -> Result<Option<Frame>, ReadError> {
        let Some(last) = self.last.take() else {
            return Ok(None);
        };
        let index = self.kept + self.open.as_ref().map_or(0, |b| b.present);
        let beyond = self.limits.max_events.filter(|max| index >= *max);
        let Some(b) = self.open.as_mut() else {
            if let Some(max) = beyond {
                return Err(ReadError::TooManyEvents {
                    line: last.line,
                    max,
                });
            }
            self.kept += 1;
            self.tail.unterminated = !last.terminated;
            return Ok(None);
        };
        b.present += 1;
        if beyond.is_some() {
            b.over_limit.get_or_insert(last.line);
        }
        if b.present as u64 != b.announced {
            return Ok(None);
        }
        let Some(b) = self.open.take() else {
            return Ok(None);
        };
        if let (Some(line), Some(max)) = (b.over_limit, self.limits.max_events) {
            return Err(ReadError::TooManyEvents { line, max });
        }
        self.kept += b.present;
        self.tail.unterminated = !last.terminated;
        Ok(Some(Frame {
            events: b.present,
            line: Some(b.frame),
        }))
    }

    fn step(&mut self) -> Result<Option<Item<'a>>, ReadError> {
        if let Some(frame) = self.keep_last()? {
            return Ok(Some(Item::End(frame)));
        }
        let Some((offset, raw, terminated)) = self.segment() else {
            if self.open.is_some() {
                // The frame announces more lines than the file holds.
                self.torn_at(0, None);
            }
            self.done = true;
            return Ok(None);
        };
        self.check(raw)?;
        let line = self.line;
        let text = std::str::from_utf8(raw);
        if let Ok(t) = text
            && (looks_like_frame(t) || (!terminated && cut_frame(t)))
        {
            match Probe::of(t) {
                Probe::Event => {}
                // Only the last line can be unterminated; a fault there is a write cut short.
                Probe::Frame(_) if !terminated && self.open.is_some() => {
                    self.torn_at(offset, None);
                    return Ok(None);
                }
                Probe::Frame(Ok(announced)) => {
                    if let Some(outer) = &self.open {
                        return Err(ReadError::BadFrame {
                            line,
                            fault: FrameFault::Nested { outer: outer.line },
                        });
                    }
                    self.open = Some(Open {
                        line,
                        offset,
                        announced,
                        frame: Arc::from(t),
                        present: 0,
                        over_limit: None,
                    });
                    return Ok(Some(Item::Begin));
                }
                Probe::Frame(Err(_)) if !terminated => {
                    self.torn_at(offset, Some(line));
                    return Ok(None);
                }
                Probe::Frame(Err(fault)) => return Err(ReadError::BadFrame { line, fault }),
            }
        }
        self.last = Some(Last {
            line,
            offset,
            terminated,
        });
        Ok(Some(Item::Event(EventLine {
            line,
            index: self.kept + self.open.as_ref().map_or(0, |b| b.present),
            text,
        })))
    }
}

impl<'a> Iterator for Lines<'a> {
    type Item = Result<Item<'a>, ReadError>;

    /// The next item; `None` once the file is read, torn or refused.
    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let item = self.step();
        if item.is_err() {
            self.done = true;
        }
        item.transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads `bytes` keeping every line whose text is not `bad`, as a driver would that
    /// refuses `bad`; returns the kept lines (batches marked) and how the file ended.
    fn drive(bytes: &[u8], limits: Limits) -> Result<(Vec<String>, Tail), String> {
        let (_, mut lines) = Lines::new(bytes, limits).map_err(|e| format!("{e:?}"))?;
        let mut kept = Vec::new();
        while let Some(item) = lines.next() {
            match item.map_err(|e| format!("{e:?}"))? {
                Item::Begin => kept.push("[".to_owned()),
                Item::End(frame) => kept.push(format!("]{}", frame.events)),
                Item::Event(line) => match line.text {
                    Ok("bad") | Err(_) if lines.tear() => break,
                    Ok("bad") | Err(_) => return Err(format!("line {} refused", line.line)),
                    Ok(text) => kept.push(format!("{}@{}:{text}", line.line, line.index)),
                },
            }
        }
        Ok((kept, lines.finish()))
    }

    #[test]
    fn lines_and_batches_without_knowing_what_a_line_means() {
        let (kept, tail) = drive(b"h\na\n{\"batch\":2}\nb\nc\nd", Limits::default()).unwrap();
        assert_eq!(kept, ["2@0:a", "[", "4@1:b", "5@2:c", "]2", "6@3:d"]);
        assert!(tail.unterminated && tail.torn_tail.is_none());
    }

    #[test]
    fn the_driver_decides_and_the_reader_finds_the_torn_end() {
        // A refused unterminated last line is a torn tail, and so is an incomplete batch.
        let (kept, tail) = drive(b"h\na\nbad", Limits::default()).unwrap();
        assert_eq!(kept, ["2@0:a"]);
        let torn = tail.torn_tail.unwrap();
        assert_eq!((torn.offset, torn.len, torn.batch), (4, 3, None));
        assert!(!tail.unterminated);
        let bytes = b"h\n{\"batch\":3}\na\nb\n";
        let torn = drive(bytes, Limits::default())
            .unwrap()
            .1
            .torn_tail
            .unwrap();
        assert_eq!(torn.offset, 2);
        assert_eq!(
            torn.batch,
            Some(TornBatch {
                line: 2,
                announced: Some(3),
                dropped_events: 2
            })
        );
        // A refused terminated line cannot be torn: the driver refuses the file.
        assert_eq!(
            drive(b"h\nbad\na\n", Limits::default()).unwrap_err(),
            "line 2 refused"
        );
    }

    #[test]
    fn limits_are_the_readers() {
        let limits = Limits {
            max_events: Some(1),
            ..Limits::default()
        };
        let err = drive(b"h\na\nb\n", limits).unwrap_err();
        assert_eq!(err, "TooManyEvents { line: 3, max: 1 }");
        // The events of a torn batch are dropped, not counted.
        assert!(drive(b"h\na\n{\"batch\":2}\nb\n", limits).is_ok());
        let limits = Limits {
            max_line_bytes: Some(1),
            ..Limits::default()
        };
        assert_eq!(
            drive(b"h\nab", limits).unwrap_err(),
            "LineTooLong { line: 2, len: 2, max: 1 }"
        );
    }
}
