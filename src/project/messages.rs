//! [`ProjectedMessages`]: the messages of a projection as a view of the input.
//!
//! A projection keeps most messages as they are and drops or rewrites a few (developer
//! messages). Copying the kept ones into a `Vec` costs a reference-count increment and
//! decrement per message, which on a long history is most of the projection's cost; the view
//! holds runs of the input slice and the few rewritten messages instead.

use std::borrow::Cow;
use std::fmt;
use std::iter::FusedIterator;
use std::ops::Index;

use serde::{Serialize, Serializer};

use crate::vocab::{Message, MessageIter, Messages, MessagesRef};

/// The messages a route receives: the input's messages in order, without the dropped ones,
/// with the few rewritten ones in their place ([`ProjectedToolUpdates::messages`]).
///
/// A view, not a copy: kept messages are read from the input slice, so a projection costs
/// O(dropped + rewritten) on top of the walk that decides them, whatever the history's length.
/// Read it like a slice ([`len`](Self::len), [`iter`](Self::iter), indexing, [`get`](Self::get))
/// or copy it out with [`to_vec`](Self::to_vec) (handle clones). Indexing is O(log changes)
/// (on a request of at most 64 messages that only dropped some, a few bit operations per
/// position).
///
/// Serializes as the JSON array of its messages; two views are equal when their messages
/// are.
///
/// ```
/// use mektpoy::{Message, project::ProjectedMessages};
/// let input = [Message::user("u1", "hi"), Message::user("u2", "there")];
/// let view = ProjectedMessages::from(&input[..]);
/// assert!(view.is_borrowed());
/// assert_eq!(view.len(), 2);
/// assert_eq!(view[1].id(), "u2");
/// assert_eq!(view.iter().map(Message::id).collect::<Vec<_>>(), ["u1", "u2"]);
/// ```
///
/// [`ProjectedToolUpdates::messages`]: super::ProjectedToolUpdates::messages
#[derive(Clone)]
pub struct ProjectedMessages<'a> {
    base: Base<'a>,
    /// `false`: the output is the whole of `base` (and `parts` is empty).
    spliced: bool,
    /// When spliced, the output in order, each part with the output index it starts at (for
    /// indexing); empty when every message was dropped or when `kept` describes the output.
    parts: Vec<Part>,
    /// When spliced by removals alone from a base of at most 64 messages (every request
    /// but a long history's): the kept positions, one bit each, so that a projection that
    /// only drops developer messages allocates nothing. `parts` is then empty.
    kept: Option<u64>,
    len: usize,
}

/// The input a view reads its kept messages from: borrowed (a slice, or a request's chunked
/// list, read chunk by chunk), or a `Vec` given to it.
#[derive(Clone)]
enum Base<'a> {
    Borrowed(MessagesRef<'a>),
    Owned(Vec<Message>),
    /// A chunked list held, not borrowed: a view kept past its request (a serializer's resume
    /// point) shares the request's chunks. Boxed: a list is a few hundred bytes, and every
    /// projection moves its view by value.
    List(Box<Messages>),
}

impl Base<'_> {
    fn as_ref(&self) -> MessagesRef<'_> {
        match self {
            Base::Borrowed(r) => *r,
            Base::Owned(v) => MessagesRef::from(v),
            Base::List(m) => (**m).as_ref(),
        }
    }
}

#[derive(Clone)]
struct Part {
    /// The output index of the part's first message.
    at: usize,
    kind: PartKind,
}

#[derive(Clone)]
enum PartKind {
    /// `base[start..end]`, as it is.
    Run { start: usize, end: usize },
    /// A message of `base` whose blocks the projection changed.
    Rewritten(Message),
}

impl<'a> ProjectedMessages<'a> {
    /// Number of messages.
    ///
    /// ```
    /// use mektpoy::{Message, project::ProjectedMessages};
    /// let input = [Message::user("u1", "hi"), Message::user("u2", "there")];
    /// assert_eq!(ProjectedMessages::from(&input[..]).len(), 2);
    /// ```
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there is no message.
    ///
    /// ```
    /// use mektpoy::{Message, project::ProjectedMessages};
    /// let none: [Message; 0] = [];
    /// assert!(ProjectedMessages::from(&none[..]).is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether this is the borrowed input itself, unchanged: the projection dropped and
    /// rewrote nothing.
    ///
    /// ```
    /// use mektpoy::project::project_tool_updates;
    /// use mektpoy::Message;
    /// let dev: Message = serde_json::from_str(
    ///     r#"{"id":"d1","role":"developer","content":[{"type":"tool-addition","toolName":"grep"}],"source":{"kind":"tool-registry"}}"#,
    /// )?;
    /// let with_dev = [Message::user("u1", "hi"), dev.clone()];
    /// // No mode: the developer message is dropped, so the view is no longer the input.
    /// assert!(!project_tool_updates(&with_dev[..], None, None, None).messages.is_borrowed());
    /// let plain = [Message::user("u1", "hi")];
    /// assert!(project_tool_updates(&plain[..], None, None, None).messages.is_borrowed());
    /// # Ok::<(), serde_json::Error>(())
    /// ```
    pub fn is_borrowed(&self) -> bool {
        !self.spliced && matches!(self.base, Base::Borrowed(_))
    }

    /// The messages as one slice, when they are one: the input (or a given `Vec`) unchanged.
    /// `None` when some message was dropped or rewritten.
    /// A request's long history is a chunked list: `None` too when it spans more than one chunk
    /// (read it with [`iter`](Self::iter)).
    ///
    /// ```
    /// use mektpoy::project::project_tool_updates;
    /// use mektpoy::Message;
    /// let dev: Message = serde_json::from_str(
    ///     r#"{"id":"d1","role":"developer","content":[{"type":"tool-addition","toolName":"grep"}],"source":{"kind":"tool-registry"}}"#,
    /// )?;
    /// let plain = [Message::user("u1", "hi")];
    /// assert_eq!(project_tool_updates(&plain[..], None, None, None).messages.as_slice(), Some(&plain[..]));
    /// let with_dev = [Message::user("u1", "hi"), dev.clone()];
    /// assert_eq!(project_tool_updates(&with_dev[..], None, None, None).messages.as_slice(), None);
    /// # Ok::<(), serde_json::Error>(())
    /// ```
    pub fn as_slice(&self) -> Option<&[Message]> {
        if self.spliced {
            return None;
        }
        self.base.as_ref().as_slice()
    }

    /// This view, holding what it borrows: a chunked input is shared (O(1)), a slice copied
    /// (handle clones); the parts are copied (O(dropped + rewritten)).
    fn to_held(&self) -> ProjectedMessages<'static> {
        let base = match &self.base {
            Base::Borrowed(r) => match r.chunked() {
                Some(m) => Base::List(Box::new(m.clone())),
                None => Base::Owned(r.iter().cloned().collect()),
            },
            Base::Owned(v) => Base::Owned(v.clone()),
            Base::List(m) => Base::List(m.clone()),
        };
        ProjectedMessages {
            base,
            spliced: self.spliced,
            parts: self.parts.clone(),
            kept: self.kept,
            len: self.len,
        }
    }

    /// Whether the first `n` messages of this view are the first `n` of `prefix` (by value, as
    /// `==`; `n <= prefix.len()`). Read a contiguous piece at a time: two pieces at the same
    /// address are equal without comparing a message, so two views of lists that share
    /// chunks, cut the same way, compare in O(chunks + parts), not O(messages).
    fn starts_like(&self, prefix: &ProjectedMessages<'_>, n: usize) -> bool {
        if n > self.len || n > prefix.len {
            return false;
        }
        let (mut mine, mut theirs) = (self.pieces(), prefix.pieces());
        let (mut a, mut b): (&[Message], &[Message]) = (&[], &[]);
        let mut left = n;
        while left > 0 {
            if a.is_empty() {
                a = mine.next().unwrap_or_default();
            }
            if b.is_empty() {
                b = theirs.next().unwrap_or_default();
            }
            let k = a.len().min(b.len()).min(left);
            if k == 0 {
                // Lengths were checked: unreachable, but never loop.
                return false;
            }
            if !std::ptr::eq(a.as_ptr(), b.as_ptr())
                && !a[..k]
                    .iter()
                    .zip(&b[..k])
                    .all(|(x, y)| x.ptr_eq(y) || x == y)
            {
                return false;
            }
            (a, b, left) = (&a[k..], &b[k..], left - k);
        }
        true
    }

    /// The messages in order as contiguous pieces (a chunk of a run, a rewritten message).
    fn pieces(&self) -> Pieces<'_> {
        let base = self.base.as_ref();
        Pieces {
            base,
            parts: self.parts.iter(),
            kept: self.kept.unwrap_or(0),
            current: if self.spliced {
                base.iter_range(0..0)
            } else {
                base.iter()
            },
        }
    }

    /// The messages in order.
    ///
    /// ```
    /// use mektpoy::project::project_tool_updates;
    /// use mektpoy::Message;
    /// let dev: Message = serde_json::from_str(
    ///     r#"{"id":"d1","role":"developer","content":[{"type":"tool-addition","toolName":"grep"}],"source":{"kind":"tool-registry"}}"#,
    /// )?;
    /// let input = [
    ///     Message::user("u1", "hi"),
    ///     dev.clone(),
    ///     Message::user("u2", "go on"),
    /// ];
    /// let projected = project_tool_updates(&input[..], None, None, None);
    /// let ids: Vec<&str> = projected.messages.iter().map(Message::id).collect();
    /// assert_eq!(ids, ["u1", "u2"]);
    /// assert_eq!(projected.messages.iter().rev().next().map(Message::id), Some("u2"));
    /// # Ok::<(), serde_json::Error>(())
    /// ```
    pub fn iter(&self) -> MessagesIter<'_> {
        let base = self.base.as_ref();
        MessagesIter {
            base,
            parts: self.parts.iter(),
            kept: self.kept.unwrap_or(0),
            front: if !self.spliced {
                base.iter()
            } else {
                base.iter_range(0..0)
            },
            back: base.iter_range(0..0),
            remaining: self.len,
        }
    }

    /// The message at `index`, if any.
    ///
    /// ```
    /// use mektpoy::project::project_tool_updates;
    /// use mektpoy::Message;
    /// let dev: Message = serde_json::from_str(
    ///     r#"{"id":"d1","role":"developer","content":[{"type":"tool-addition","toolName":"grep"}],"source":{"kind":"tool-registry"}}"#,
    /// )?;
    /// let input = [dev.clone(), Message::user("u1", "hi")];
    /// let projected = project_tool_updates(&input[..], None, None, None);
    /// assert_eq!(projected.messages.get(0).map(Message::id), Some("u1"));
    /// assert!(projected.messages.get(1).is_none());
    /// # Ok::<(), serde_json::Error>(())
    /// ```
    pub fn get(&self, index: usize) -> Option<&Message> {
        if index >= self.len {
            return None;
        }
        let base = self.base.as_ref();
        if !self.spliced {
            return base.get(index);
        }
        if let Some(mut kept) = self.kept {
            // The `index`-th set bit (`index < len`, the number of set bits).
            for _ in 0..index {
                kept &= kept - 1;
            }
            return base.get(kept.trailing_zeros() as usize);
        }
        // The last part starting at or before `index` holds it.
        let part = &self.parts[self.parts.partition_point(|p| p.at <= index) - 1];
        match &part.kind {
            PartKind::Run { start, .. } => base.get(start + (index - part.at)),
            PartKind::Rewritten(m) => Some(m),
        }
    }

    /// The first message.
    ///
    /// ```
    /// use mektpoy::{Message, project::ProjectedMessages};
    /// let input = [Message::user("u1", "hi"), Message::user("u2", "there")];
    /// assert_eq!(ProjectedMessages::from(&input[..]).first().map(Message::id), Some("u1"));
    /// ```
    pub fn first(&self) -> Option<&Message> {
        self.get(0)
    }

    /// The last message.
    ///
    /// ```
    /// use mektpoy::{Message, project::ProjectedMessages};
    /// let input = [Message::user("u1", "hi"), Message::user("u2", "there")];
    /// assert_eq!(ProjectedMessages::from(&input[..]).last().map(Message::id), Some("u2"));
    /// ```
    pub fn last(&self) -> Option<&Message> {
        self.len.checked_sub(1).and_then(|i| self.get(i))
    }

    /// The messages copied into a `Vec` (handle clones, never a deep copy).
    ///
    /// ```
    /// use mektpoy::{Message, project::ProjectedMessages};
    /// let input = vec![Message::user("u1", "hi")];
    /// assert_eq!(ProjectedMessages::from(&input).to_vec(), input);
    /// ```
    pub fn to_vec(&self) -> Vec<Message> {
        self.iter().cloned().collect()
    }

    /// Whether `prefix`'s messages are the first of these (by value, as `==`).
    ///
    /// ```
    /// use mektpoy::{Message, project::ProjectedMessages};
    /// let input = [Message::user("u1", "hi"), Message::user("u2", "there")];
    /// let view = ProjectedMessages::from(&input[..]);
    /// assert!(view.starts_with(&ProjectedMessages::from(&input[..1])));
    /// assert!(!ProjectedMessages::from(&input[..1]).starts_with(&view));
    /// ```
    pub fn starts_with(&self, prefix: &ProjectedMessages<'_>) -> bool {
        prefix.len <= self.len && self.iter().zip(prefix).all(|(a, b)| a == b)
    }
}

impl<'a> From<&'a [Message]> for ProjectedMessages<'a> {
    fn from(messages: &'a [Message]) -> Self {
        MessagesRef::from(messages).into()
    }
}

impl<'a> From<&'a Vec<Message>> for ProjectedMessages<'a> {
    fn from(messages: &'a Vec<Message>) -> Self {
        MessagesRef::from(messages).into()
    }
}

impl<'a> From<&'a Messages> for ProjectedMessages<'a> {
    fn from(messages: &'a Messages) -> Self {
        MessagesRef::from(messages).into()
    }
}

impl<'a> From<MessagesRef<'a>> for ProjectedMessages<'a> {
    fn from(messages: MessagesRef<'a>) -> Self {
        ProjectedMessages::whole(Base::Borrowed(messages))
    }
}

impl From<Vec<Message>> for ProjectedMessages<'_> {
    fn from(messages: Vec<Message>) -> Self {
        ProjectedMessages::whole(Base::Owned(messages))
    }
}

impl<'a> From<Cow<'a, [Message]>> for ProjectedMessages<'a> {
    fn from(base: Cow<'a, [Message]>) -> Self {
        match base {
            Cow::Borrowed(s) => s.into(),
            Cow::Owned(v) => v.into(),
        }
    }
}

impl<'a> ProjectedMessages<'a> {
    fn whole(base: Base<'a>) -> Self {
        ProjectedMessages {
            len: base.as_ref().len(),
            base,
            spliced: false,
            parts: Vec::new(),
            kept: None,
        }
    }
}

impl Index<usize> for ProjectedMessages<'_> {
    type Output = Message;

    fn index(&self, index: usize) -> &Message {
        match self.get(index) {
            Some(m) => m,
            None => panic!(
                "index {index} out of range for {} projected messages",
                self.len
            ),
        }
    }
}

impl<'s> IntoIterator for &'s ProjectedMessages<'_> {
    type Item = &'s Message;
    type IntoIter = MessagesIter<'s>;

    fn into_iter(self) -> MessagesIter<'s> {
        self.iter()
    }
}

impl PartialEq for ProjectedMessages<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len && self.iter().eq(other.iter())
    }
}

impl PartialEq<[Message]> for ProjectedMessages<'_> {
    fn eq(&self, other: &[Message]) -> bool {
        self.len == other.len() && self.iter().eq(other.iter())
    }
}

impl fmt::Debug for ProjectedMessages<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl Serialize for ProjectedMessages<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.iter())
    }
}

/// The first `len` messages of a projected view, held past its request: what a serializer's
/// resume point was written from. Shares the request's chunks, so that the next request of the
/// route is checked against it in O(chunks + parts) ([`ProjectedMessages::starts_like`]).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct HeldPrefix {
    view: ProjectedMessages<'static>,
    len: usize,
}

impl HeldPrefix {
    /// No message.
    pub(crate) fn empty() -> Self {
        HeldPrefix {
            view: ProjectedMessages::from(Vec::new()),
            len: 0,
        }
    }

    /// The first `len` messages of `view` (`len <= view.len()`).
    pub(crate) fn of(view: &ProjectedMessages<'_>, len: usize) -> Self {
        debug_assert!(len <= view.len());
        HeldPrefix {
            view: view.to_held(),
            len,
        }
    }

    /// The number of messages held.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Whether `messages` start with these (by value, as `==`).
    pub(crate) fn starts(&self, messages: &ProjectedMessages<'_>) -> bool {
        messages.starts_like(&self.view, self.len)
    }
}

/// The iterator of [`ProjectedMessages::pieces`].
struct Pieces<'s> {
    base: MessagesRef<'s>,
    parts: std::slice::Iter<'s, Part>,
    kept: u64,
    current: MessageIter<'s>,
}

impl<'s> Iterator for Pieces<'s> {
    type Item = &'s [Message];

    fn next(&mut self) -> Option<&'s [Message]> {
        if self.kept != 0 {
            let i = self.kept.trailing_zeros() as usize;
            self.kept &= self.kept - 1;
            return self.base.get(i).map(std::slice::from_ref);
        }
        loop {
            if let Some(piece) = self.current.next_piece() {
                return Some(piece);
            }
            let part = self.parts.next()?;
            self.current = match &part.kind {
                PartKind::Run { start, end } => self.base.iter_range(*start..*end),
                PartKind::Rewritten(m) => MessagesRef::from(std::slice::from_ref(m)).iter(),
            };
        }
    }
}

/// The messages of a [`ProjectedMessages`], in order (double-ended, exact size).
///
/// ```
/// use mektpoy::{Message, project::ProjectedMessages};
/// let input = [Message::user("u1", "hi"), Message::user("u2", "there")];
/// let view = ProjectedMessages::from(&input[..]);
/// let mut iter = view.iter();
/// assert_eq!(iter.len(), 2);
/// assert_eq!(iter.next_back().map(Message::id), Some("u2"));
/// ```
#[derive(Clone, Debug)]
pub struct MessagesIter<'s> {
    base: MessagesRef<'s>,
    parts: std::slice::Iter<'s, Part>,
    /// The positions of `base` still to yield, when the view is a bit set of kept positions
    /// (`parts`, `front` and `back` are then empty).
    kept: u64,
    front: MessageIter<'s>,
    back: MessageIter<'s>,
    remaining: usize,
}

impl fmt::Debug for Part {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            PartKind::Run { start, end } => write!(f, "{start}..{end}"),
            PartKind::Rewritten(m) => write!(f, "rewritten {}", m.id()),
        }
    }
}

impl<'s> MessagesIter<'s> {
    fn slice(&self, part: &'s Part) -> MessageIter<'s> {
        match &part.kind {
            PartKind::Run { start, end } => self.base.iter_range(*start..*end),
            PartKind::Rewritten(m) => MessagesRef::from(std::slice::from_ref(m)).iter(),
        }
    }
}

impl<'s> Iterator for MessagesIter<'s> {
    type Item = &'s Message;

    fn next(&mut self) -> Option<&'s Message> {
        if self.kept != 0 {
            let i = self.kept.trailing_zeros() as usize;
            self.kept &= self.kept - 1;
            self.remaining -= 1;
            return self.base.get(i);
        }
        loop {
            if let Some(m) = self.front.next() {
                self.remaining -= 1;
                return Some(m);
            }
            match self.parts.next() {
                Some(part) => self.front = self.slice(part),
                None => {
                    let m = self.back.next()?;
                    self.remaining -= 1;
                    return Some(m);
                }
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }

    /// Skips whole runs and chunks: O(log n + parts skipped), not O(n) (a resumed serializer
    /// starts deep into a long history).
    fn nth(&mut self, mut n: usize) -> Option<&'s Message> {
        if self.kept != 0 {
            for _ in 0..n {
                if self.kept == 0 {
                    break;
                }
                self.kept &= self.kept - 1;
                self.remaining -= 1;
            }
            return self.next();
        }
        loop {
            let in_front = self.front.len();
            if n < in_front {
                self.remaining -= n + 1;
                return self.front.nth(n);
            }
            n -= in_front;
            self.remaining -= in_front;
            self.front = self.base.iter_range(0..0);
            match self.parts.next() {
                Some(part) => self.front = self.slice(part),
                None => {
                    let m = self.back.nth(n)?;
                    self.remaining -= n + 1;
                    return Some(m);
                }
            }
        }
    }
}

impl DoubleEndedIterator for MessagesIter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        if self.kept != 0 {
            let i = 63 - self.kept.leading_zeros() as usize;
            self.kept &= !(1 << i);
            self.remaining -= 1;
            return self.base.get(i);
        }
        loop {
            if let Some(m) = self.back.next_back() {
                self.remaining -= 1;
                return Some(m);
            }
            match self.parts.next_back() {
                Some(part) => self.back = self.slice(part),
                None => {
                    let m = self.front.next_back()?;
                    self.remaining -= 1;
                    return Some(m);
                }
            }
        }
    }
}

impl ExactSizeIterator for MessagesIter<'_> {}

impl FusedIterator for MessagesIter<'_> {}

/// Builds a [`ProjectedMessages`] from the positions of `base` that change, in increasing
/// order; every other position is kept.
pub(super) struct Splice<'a> {
    base: MessagesRef<'a>,
    parts: Vec<Part>,
    /// The first position of `base` not yet in `parts` (or in `removed`).
    next: usize,
    len: usize,
    /// The removed positions, while only removals came from a base of at most 64 messages:
    /// `parts` is then empty and built only if a replacement comes.
    removed: Option<u64>,
}

impl<'a> Splice<'a> {
    pub(super) fn new(base: impl Into<MessagesRef<'a>>) -> Self {
        let base = base.into();
        Splice {
            base,
            parts: Vec::new(),
            next: 0,
            len: 0,
            removed: (base.len() <= 64).then_some(0),
        }
    }

    /// Turns the removals recorded as bits into parts (a replacement is coming).
    fn removals_to_parts(&mut self) {
        if let Some(mut removed) = self.removed.take() {
            // Replayed in order: `next` ends where the last removal left it.
            self.next = 0;
            while removed != 0 {
                let i = removed.trailing_zeros() as usize;
                removed &= removed - 1;
                self.run_to(i);
                self.next = i + 1;
            }
        }
    }

    /// Keeps `base[self.next..to]` as it is.
    fn run_to(&mut self, to: usize) {
        debug_assert!(to >= self.next, "changes come in increasing order");
        if to > self.next {
            self.parts.push(Part {
                at: self.len,
                kind: PartKind::Run {
                    start: self.next,
                    end: to,
                },
            });
            self.len += to - self.next;
        }
    }

    /// Drops `base[index]`.
    pub(super) fn remove(&mut self, index: usize) {
        debug_assert!(index >= self.next, "changes come in increasing order");
        match &mut self.removed {
            Some(removed) => *removed |= 1 << index,
            None => self.run_to(index),
        }
        self.next = index + 1;
    }

    /// Puts `message` in the place of `base[index]`.
    pub(super) fn replace(&mut self, index: usize, message: Message) {
        self.removals_to_parts();
        self.run_to(index);
        self.parts.push(Part {
            at: self.len,
            kind: PartKind::Rewritten(message),
        });
        self.len += 1;
        self.next = index + 1;
    }

    pub(super) fn finish(mut self) -> ProjectedMessages<'a> {
        if self.next == 0 {
            // Nothing changed: the input itself.
            return ProjectedMessages::from(self.base);
        }
        if let Some(removed) = self.removed {
            let n = self.base.len();
            let all = if n == 64 { u64::MAX } else { (1 << n) - 1 };
            let kept = all & !removed;
            return ProjectedMessages {
                base: Base::Borrowed(self.base),
                spliced: true,
                parts: Vec::new(),
                kept: Some(kept),
                len: kept.count_ones() as usize,
            };
        }
        self.run_to(self.base.len());
        ProjectedMessages {
            base: Base::Borrowed(self.base),
            spliced: true,
            parts: self.parts,
            kept: None,
            len: self.len,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids<'m>(messages: impl Iterator<Item = &'m Message>) -> Vec<&'m str> {
        messages.map(Message::id).collect()
    }

    #[test]
    fn a_spliced_view_reads_like_the_vector_it_stands_for() {
        let base: Vec<Message> = (0..10)
            .map(|i| Message::user(format!("m{i}"), "x"))
            .collect();
        let mut splice = Splice::new(&base);
        splice.remove(0);
        splice.replace(3, Message::user("r3", "y"));
        splice.remove(4);
        splice.remove(5);
        splice.remove(9);
        let view = splice.finish();
        let expect = ["m1", "m2", "r3", "m6", "m7", "m8"];
        assert_eq!(ids(view.iter()), expect);
        assert_eq!(
            ids(view.iter().rev()),
            expect.iter().rev().copied().collect::<Vec<_>>()
        );
        assert_eq!(view.len(), expect.len());
        assert_eq!(view.iter().len(), expect.len());
        for (i, id) in expect.iter().enumerate() {
            assert_eq!(view[i].id(), *id, "index {i}");
        }
        assert!(view.get(expect.len()).is_none());
        assert_eq!(view.last().map(Message::id), Some("m8"));
        assert!(!view.is_borrowed() && view.as_slice().is_none());
        assert!(view[0].ptr_eq(&base[1]), "kept messages are the input's");
        // Both ends of one iterator meet in the middle.
        let mut it = view.iter();
        assert_eq!(
            (it.next().unwrap().id(), it.next_back().unwrap().id()),
            ("m1", "m8")
        );
        assert_eq!(ids(it), ["m2", "r3", "m6", "m7"]);
        let copy = ProjectedMessages::from(view.to_vec());
        assert_eq!(copy, view);
        assert!(copy.starts_with(&view) && view.starts_with(&ProjectedMessages::from(&base[1..3])));
        assert_eq!(
            serde_json::to_string(&view).unwrap(),
            serde_json::to_string(&view.to_vec()).unwrap()
        );
    }

    /// Removals alone from up to 64 messages are a bit set; beyond, or with a replacement,
    /// runs: every shape reads the same as the vector it stands for.
    #[test]
    fn every_shape_of_a_view_reads_like_its_vector() {
        for n in [1usize, 2, 7, 63, 64, 65, 130] {
            let base: Vec<Message> = (0..n)
                .map(|i| Message::user(format!("m{i}"), "x"))
                .collect();
            for (label, step) in [("every third", 3usize), ("every other", 2), ("all", 1)] {
                for replace_at in [None, Some(n / 2)] {
                    let mut splice = Splice::new(&base);
                    let mut expect: Vec<String> = Vec::new();
                    for (i, m) in base.iter().enumerate() {
                        if replace_at == Some(i) {
                            splice.replace(i, Message::user(format!("r{i}"), "y"));
                            expect.push(format!("r{i}"));
                        } else if i % step == 0 {
                            splice.remove(i);
                        } else {
                            expect.push(m.id().to_owned());
                        }
                    }
                    let view = splice.finish();
                    let case = format!("{n} messages, {label} removed, replaced {replace_at:?}");
                    assert_eq!(view.len(), expect.len(), "{case}");
                    assert_eq!(ids(view.iter()), expect, "{case}");
                    let mut back = ids(view.iter().rev());
                    back.reverse();
                    assert_eq!(back, expect, "{case}: from the back");
                    for (i, id) in expect.iter().enumerate() {
                        assert_eq!(view[i].id(), id, "{case}: index {i}");
                    }
                    assert!(view.get(expect.len()).is_none(), "{case}");
                    assert_eq!(view.iter().len(), expect.len(), "{case}");
                    let mut it = view.iter();
                    if let (Some(a), Some(b)) = (it.next(), it.next_back()) {
                        assert_eq!((a.id(), b.id()), (&*expect[0], &*expect[expect.len() - 1]));
                        assert_eq!(it.len(), expect.len() - 2, "{case}: both ends");
                        assert_eq!(ids(it), expect[1..expect.len() - 1], "{case}");
                    }
                    assert!(!view.is_borrowed() && view.as_slice().is_none(), "{case}");
                    assert_eq!(view, ProjectedMessages::from(view.to_vec()), "{case}");
                }
            }
        }
    }

    /// A view of a chunked list (a request's history) reads as the same view of a slice, from
    /// both ends, by index and by `nth` (which skips runs and chunks without walking them).
    #[test]
    fn a_view_of_a_chunked_list_reads_like_a_view_of_its_slice() {
        for n in [0usize, 1, 63, 64, 65, 130, 300] {
            let base: Vec<Message> = (0..n)
                .map(|i| Message::user(format!("m{i}"), "x"))
                .collect();
            let list: Messages = base.clone().into();
            for step in [0usize, 2, 7, 70] {
                let build = |input: MessagesRef<'_>| -> Vec<String> {
                    let mut splice = Splice::new(input);
                    for i in 0..n {
                        if step > 0 && i % step == 1 {
                            splice.remove(i);
                        } else if step > 0 && i % step == 3 {
                            splice.replace(i, Message::user(format!("r{i}"), "y"));
                        }
                    }
                    let view = splice.finish();
                    let all = ids(view.iter());
                    for k in 0..=view.len() {
                        let mut it = view.iter();
                        assert_eq!(
                            it.nth(k).map(Message::id),
                            all.get(k).copied(),
                            "{n}/{step}: nth({k})"
                        );
                        assert_eq!(it.len(), view.len().saturating_sub(k + 1));
                        assert_eq!(
                            ids(it),
                            all[(k + 1).min(all.len())..],
                            "{n}/{step}: after nth({k})"
                        );
                        assert_eq!(view.get(k).map(Message::id), all.get(k).copied());
                    }
                    let mut back = ids(view.iter().rev());
                    back.reverse();
                    assert_eq!(back, all, "{n}/{step}: from the back");
                    all.iter().map(|s| (*s).to_owned()).collect()
                };
                let from_slice = build(MessagesRef::from(&base));
                let from_list = build(list.as_ref());
                assert_eq!(from_slice, from_list, "{n} messages, step {step}");
            }
        }
    }

    #[test]
    fn an_unchanged_view_is_the_input() {
        let base = [Message::user("u1", "x")];
        let view = Splice::new(&base).finish();
        assert!(view.is_borrowed());
        assert_eq!(view.as_slice(), Some(&base[..]));
        let mut all = Splice::new(&base);
        all.remove(0);
        let empty = all.finish();
        assert!(empty.is_empty() && !empty.is_borrowed() && empty.iter().next().is_none());
    }
}
