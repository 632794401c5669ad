//! [`Messages`]: the surface's messages as a list that grows by what is new.
//!
//! A loop's request holds the whole surface, and the next request holds the same messages and
//! a few more. A contiguous `Arc<[Message]>` per request costs a reference-count increment per
//! message to build (each on the message's own allocation, cold on a long history) and a
//! decrement per message to drop: O(history) per step. `Messages` keeps the messages in
//! chunks of [`CHUNK`] that requests share: a clone is O(1), appending a message costs O(1)
//! (amortized; at most one copy of the last, partial chunk when another list still shares
//! it), and reading stays a slice per chunk.

use std::fmt;
use std::iter::FusedIterator;
use std::ops::{Index, Range};
use std::sync::Arc;

use serde::{Serialize, Serializer};

use super::{Message, Role};

/// The number of messages in each full chunk of a [`Messages`].
pub(crate) const CHUNK: usize = 64;

/// An immutable list of messages that clones in O(1) and shares its chunks with the lists it
/// was grown from: [`Request::messages`](crate::Request::messages) and
/// [`Session::messages`](crate::Session::messages).
///
/// Read it like a slice ([`len`](Self::len), [`get`](Self::get), indexing in O(log n),
/// [`iter`](Self::iter)), borrow it as a [`MessagesRef`] for the projection, or copy it out
/// with [`to_vec`](Self::to_vec) (handle clones). Two lists are equal when their messages are.
///
/// ```
/// use mektpoy::{Message, vocab::Messages};
/// let mut messages: Messages = (0..100).map(|i| Message::user(format!("u{i}"), "hi")).collect();
/// let before = messages.clone(); // O(1)
/// messages.push(Message::user("u100", "one more"));
/// assert_eq!((before.len(), messages.len()), (100, 101));
/// assert_eq!(messages[100].id(), "u100");
/// assert_eq!(messages.iter().rev().nth(1).map(Message::id), Some("u99"));
/// assert_eq!(before, messages.iter().take(100).cloned().collect::<Messages>());
/// ```
#[derive(Clone, Default)]
pub struct Messages {
    /// Full chunks of exactly `CHUNK` messages, shared with the lists grown from this one.
    full: imbl::Vector<Arc<[Message]>>,
    /// The last `len % CHUNK` messages; copied on a push only when another list shares it.
    tail: Arc<Vec<Message>>,
    /// The positions of the developer messages, in order: the projection rewrites or drops
    /// only those, so it reads these instead of every message's role (a cache miss each on a
    /// long history).
    developer: imbl::Vector<usize>,
}

impl Messages {
    /// An empty list.
    ///
    /// ```
    /// use mektpoy::{Message, vocab::Messages};
    /// let mut messages = Messages::new();
    /// assert!(messages.is_empty());
    /// messages.push(Message::user("u1", "hi"));
    /// assert_eq!(messages.len(), 1);
    /// ```
    pub fn new() -> Self {
        Messages::default()
    }

    /// Number of messages.
    ///
    /// ```
    /// use mektpoy::{Message, vocab::Messages};
    /// let messages: Messages = (0..70).map(|i| Message::user(format!("u{i}"), "hi")).collect();
    /// assert_eq!(messages.len(), 70);
    /// ```
    #[inline]
    pub fn len(&self) -> usize {
        self.full.len() * CHUNK + self.tail.len()
    }

    /// Whether there is no message.
    ///
    /// ```
    /// use mektpoy::vocab::Messages;
    /// assert!(Messages::default().is_empty());
    /// ```
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.full.is_empty() && self.tail.is_empty()
    }

    /// The message at `index`, if any. O(log n), a single chunk lookup on a list of up to
    /// 4,096 messages.
    ///
    /// ```
    /// use mektpoy::{Message, vocab::Messages};
    /// let messages: Messages = (0..70).map(|i| Message::user(format!("u{i}"), "hi")).collect();
    /// assert_eq!(messages.get(65).map(Message::id), Some("u65"));
    /// assert!(messages.get(70).is_none());
    /// ```
    #[inline]
    pub fn get(&self, index: usize) -> Option<&Message> {
        self.as_ref().get(index)
    }

    /// The first message.
    ///
    /// ```
    /// use mektpoy::{Message, vocab::Messages};
    /// let messages: Messages = [Message::user("u1", "hi"), Message::user("u2", "there")].into_iter().collect();
    /// assert_eq!(messages.first().map(Message::id), Some("u1"));
    /// ```
    pub fn first(&self) -> Option<&Message> {
        self.get(0)
    }

    /// The last message.
    ///
    /// ```
    /// use mektpoy::{Message, vocab::Messages};
    /// let messages: Messages = (0..64).map(|i| Message::user(format!("u{i}"), "hi")).collect();
    /// assert_eq!(messages.last().map(Message::id), Some("u63"));
    /// ```
    pub fn last(&self) -> Option<&Message> {
        self.tail
            .last()
            .or_else(|| self.full.back().and_then(|c| c.last()))
    }

    /// The messages in order (double-ended, exact size; `nth` skips whole chunks).
    ///
    /// ```
    /// use mektpoy::{Message, vocab::Messages};
    /// let messages: Messages = (0..200).map(|i| Message::user(format!("u{i}"), "hi")).collect();
    /// assert_eq!(messages.iter().nth(130).map(Message::id), Some("u130"));
    /// assert_eq!(messages.iter().len(), 200);
    /// ```
    #[inline]
    pub fn iter(&self) -> MessageIter<'_> {
        self.as_ref().iter()
    }

    /// The list borrowed, as the projection takes it.
    ///
    /// ```
    /// use mektpoy::project::project_tool_updates;
    /// use mektpoy::{Message, vocab::Messages};
    /// let messages: Messages = [Message::user("u1", "hi")].into_iter().collect();
    /// // Projected without copying the list into one slice.
    /// let projected = project_tool_updates(messages.as_ref(), None, None, None);
    /// assert_eq!(projected.messages.len(), 1);
    /// ```
    #[inline]
    pub fn as_ref(&self) -> MessagesRef<'_> {
        MessagesRef(Source::Chunked(self))
    }

    /// The messages copied into a `Vec` (handle clones, never a deep copy).
    ///
    /// ```
    /// use mektpoy::{Message, vocab::Messages};
    /// let messages: Messages = [Message::user("u1", "hi")].into_iter().collect();
    /// let v: Vec<Message> = messages.to_vec();
    /// assert!(v[0].ptr_eq(&messages[0]), "handles, not copies");
    /// ```
    pub fn to_vec(&self) -> Vec<Message> {
        self.iter().cloned().collect()
    }

    /// Appends `message`. O(1) amortized: a full last chunk joins the shared ones; the
    /// partial one is copied (fewer than 64 handle clones) only when another list shares it.
    ///
    /// ```
    /// use mektpoy::{Message, vocab::Messages};
    /// let mut messages = Messages::new();
    /// messages.push(Message::user("u1", "hi"));
    /// messages.push(Message::user("u2", "there"));
    /// assert_eq!(messages.last().map(Message::id), Some("u2"));
    /// ```
    pub fn push(&mut self, message: Message) {
        if message.role() == Role::Developer {
            self.developer.push_back(self.len());
        }
        let tail = Arc::make_mut(&mut self.tail);
        if tail.capacity() == 0 {
            tail.reserve_exact(CHUNK);
        }
        tail.push(message);
        if tail.len() == CHUNK {
            let chunk: Arc<[Message]> = std::mem::take(tail).into();
            self.full.push_back(chunk);
        }
    }

    /// Whether `prefix`'s messages are the first of these (by value, as `==`; the chunks both
    /// share are not compared message by message).
    ///
    /// ```
    /// use mektpoy::{Message, vocab::Messages};
    /// let prefix: Messages = [Message::user("u1", "hi")].into_iter().collect();
    /// let mut longer = prefix.clone();
    /// longer.push(Message::user("u2", "there"));
    /// assert!(longer.starts_with(&prefix));
    /// assert!(!prefix.starts_with(&longer));
    /// ```
    pub fn starts_with(&self, prefix: &Messages) -> bool {
        let n = prefix.len();
        if n > self.len() {
            return false;
        }
        let shared = self.shared_full_prefix(prefix);
        self.as_ref()
            .iter_range(shared..n)
            .eq(prefix.as_ref().iter_range(shared..n))
    }

    /// Whether both lists share all their chunks: equal without comparing a message.
    pub(crate) fn ptr_eq(&self, other: &Messages) -> bool {
        self.full.ptr_eq(&other.full) && Arc::ptr_eq(&self.tail, &other.tail)
    }

    /// The number of leading messages the two lists hold in the same full chunks (a
    /// multiple of [`CHUNK`]); O(chunks), one pointer comparison each.
    pub(crate) fn shared_full_prefix(&self, other: &Messages) -> usize {
        let n = self
            .full
            .iter()
            .zip(other.full.iter())
            .take_while(|(a, b)| Arc::ptr_eq(a, b))
            .count();
        n * CHUNK
    }
}

impl Extend<Message> for Messages {
    fn extend<I: IntoIterator<Item = Message>>(&mut self, iter: I) {
        for m in iter {
            self.push(m);
        }
    }
}

impl FromIterator<Message> for Messages {
    fn from_iter<I: IntoIterator<Item = Message>>(iter: I) -> Self {
        let mut messages = Messages::new();
        messages.extend(iter);
        messages
    }
}

impl From<Vec<Message>> for Messages {
    #[inline]
    fn from(messages: Vec<Message>) -> Self {
        messages.into_iter().collect()
    }
}

impl From<&[Message]> for Messages {
    #[inline]
    fn from(messages: &[Message]) -> Self {
        messages.iter().cloned().collect()
    }
}

impl Index<usize> for Messages {
    type Output = Message;

    fn index(&self, index: usize) -> &Message {
        match self.get(index) {
            Some(m) => m,
            None => panic!("index {index} out of range for {} messages", self.len()),
        }
    }
}

impl<'a> IntoIterator for &'a Messages {
    type Item = &'a Message;
    type IntoIter = MessageIter<'a>;

    fn into_iter(self) -> MessageIter<'a> {
        self.iter()
    }
}

impl PartialEq for Messages {
    fn eq(&self, other: &Self) -> bool {
        self.ptr_eq(other) || self.as_ref() == other.as_ref()
    }
}

impl PartialEq<[Message]> for Messages {
    fn eq(&self, other: &[Message]) -> bool {
        self.as_ref() == MessagesRef::from(other)
    }
}

impl PartialEq<Vec<Message>> for Messages {
    fn eq(&self, other: &Vec<Message>) -> bool {
        self.as_ref() == MessagesRef::from(other)
    }
}

impl fmt::Debug for Messages {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// Serializes as the JSON array of its messages.
impl Serialize for Messages {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.iter())
    }
}

/// Messages borrowed for reading: a slice, or a [`Messages`] (read chunk by chunk). What the
/// projection functions take, so that a request's chunked list is projected without being
/// copied into one slice; `&[Message]`, `&Vec<Message>`, `&[Message; N]` and `&Messages` all
/// convert.
///
/// ```
/// use mektpoy::{Message, vocab::{Messages, MessagesRef}};
/// let slice = [Message::user("u1", "hi")];
/// let list: Messages = slice.iter().cloned().collect();
/// assert_eq!(MessagesRef::from(&slice[..]), MessagesRef::from(&list));
/// ```
#[derive(Clone, Copy)]
pub struct MessagesRef<'a>(Source<'a>);

#[derive(Clone, Copy)]
enum Source<'a> {
    Slice(&'a [Message]),
    Chunked(&'a Messages),
}

impl<'a> MessagesRef<'a> {
    /// Number of messages.
    ///
    /// ```
    /// use mektpoy::{Message, vocab::MessagesRef};
    /// let slice = [Message::user("u1", "hi"), Message::user("u2", "there")];
    /// assert_eq!(MessagesRef::from(&slice[..]).len(), 2);
    /// ```
    #[inline]
    pub fn len(&self) -> usize {
        match self.0 {
            Source::Slice(s) => s.len(),
            Source::Chunked(m) => m.len(),
        }
    }

    /// Whether there is no message.
    ///
    /// ```
    /// use mektpoy::{Message, vocab::MessagesRef};
    /// let none: [Message; 0] = [];
    /// assert!(MessagesRef::from(&none[..]).is_empty());
    /// ```
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The message at `index`, if any.
    ///
    /// ```
    /// use mektpoy::{Message, vocab::{Messages, MessagesRef}};
    /// let list: Messages = (0..70).map(|i| Message::user(format!("u{i}"), "hi")).collect();
    /// assert_eq!(MessagesRef::from(&list).get(64).map(Message::id), Some("u64"));
    /// ```
    #[inline]
    pub fn get(&self, index: usize) -> Option<&'a Message> {
        match self.0 {
            Source::Slice(s) => s.get(index),
            Source::Chunked(m) => {
                let full = m.full.len() * CHUNK;
                if index < full {
                    m.full.get(index / CHUNK).map(|c| &c[index % CHUNK])
                } else {
                    m.tail.get(index - full)
                }
            }
        }
    }

    /// The messages as one slice, when they are one (a slice, or a list of one chunk).
    ///
    /// ```
    /// use mektpoy::{Message, vocab::{Messages, MessagesRef}};
    /// let long: Messages = (0..200).map(|i| Message::user(format!("u{i}"), "hi")).collect();
    /// assert!(MessagesRef::from(&long).as_slice().is_none(), "several chunks");
    /// let short: Messages = [Message::user("u1", "hi")].into_iter().collect();
    /// assert_eq!(MessagesRef::from(&short).as_slice().map(<[Message]>::len), Some(1));
    /// ```
    #[inline]
    pub fn as_slice(&self) -> Option<&'a [Message]> {
        match self.0 {
            Source::Slice(s) => Some(s),
            Source::Chunked(m) if m.full.is_empty() => Some(&m.tail),
            Source::Chunked(m) if m.tail.is_empty() && m.full.len() == 1 => {
                m.full.front().map(|c| &c[..])
            }
            Source::Chunked(_) => None,
        }
    }

    /// The developer messages with their positions, in order: O(developer messages) on a
    /// [`Messages`], a scan of every role on a slice.
    #[inline]
    pub(crate) fn developer(&self) -> Developer<'a> {
        match self.0 {
            Source::Slice(s) => Developer::Slice(s.iter().enumerate()),
            Source::Chunked(m) => Developer::Chunked(*self, m.developer.iter()),
        }
    }

    /// The chunked list itself, when this borrows one.
    #[inline]
    pub(crate) fn chunked(&self) -> Option<&'a Messages> {
        match self.0 {
            Source::Slice(_) => None,
            Source::Chunked(m) => Some(m),
        }
    }

    /// The messages in order.
    ///
    /// ```
    /// use mektpoy::{Message, vocab::MessagesRef};
    /// let slice = [Message::user("u1", "hi"), Message::user("u2", "there")];
    /// let ids: Vec<&str> = MessagesRef::from(&slice[..]).iter().map(Message::id).collect();
    /// assert_eq!(ids, ["u1", "u2"]);
    /// ```
    #[inline]
    pub fn iter(&self) -> MessageIter<'a> {
        self.iter_range(0..self.len())
    }

    /// The messages of `range` in order. `range` must lie within `0..len()`.
    #[inline]
    pub(crate) fn iter_range(&self, range: Range<usize>) -> MessageIter<'a> {
        debug_assert!(range.start <= range.end && range.end <= self.len());
        MessageIter {
            source: *self,
            front: [].iter(),
            back: [].iter(),
            lo: range.start,
            hi: range.end,
        }
    }

    /// The longest slice starting at `index` that one chunk holds (`index < len()`).
    #[inline]
    fn run_from(&self, index: usize) -> &'a [Message] {
        match self.0 {
            Source::Slice(s) => &s[index..],
            Source::Chunked(m) => {
                let full = m.full.len() * CHUNK;
                if index < full {
                    &m.full[index / CHUNK][index % CHUNK..]
                } else {
                    &m.tail[index - full..]
                }
            }
        }
    }

    /// The longest slice ending before `end` that one chunk holds (`0 < end <= len()`).
    #[inline]
    fn run_to(&self, end: usize) -> &'a [Message] {
        match self.0 {
            Source::Slice(s) => &s[..end],
            Source::Chunked(m) => {
                let full = m.full.len() * CHUNK;
                if end > full {
                    &m.tail[..end - full]
                } else {
                    let last = end - 1;
                    &m.full[last / CHUNK][..last % CHUNK + 1]
                }
            }
        }
    }
}

impl<'a> From<&'a [Message]> for MessagesRef<'a> {
    #[inline]
    fn from(messages: &'a [Message]) -> Self {
        MessagesRef(Source::Slice(messages))
    }
}

impl<'a> From<&'a Vec<Message>> for MessagesRef<'a> {
    #[inline]
    fn from(messages: &'a Vec<Message>) -> Self {
        MessagesRef(Source::Slice(messages))
    }
}

impl<'a, const N: usize> From<&'a [Message; N]> for MessagesRef<'a> {
    #[inline]
    fn from(messages: &'a [Message; N]) -> Self {
        MessagesRef(Source::Slice(messages))
    }
}

impl<'a> From<&'a Arc<[Message]>> for MessagesRef<'a> {
    #[inline]
    fn from(messages: &'a Arc<[Message]>) -> Self {
        MessagesRef(Source::Slice(messages))
    }
}

impl<'a> From<&'a Messages> for MessagesRef<'a> {
    #[inline]
    fn from(messages: &'a Messages) -> Self {
        messages.as_ref()
    }
}

impl PartialEq for MessagesRef<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl fmt::Debug for MessagesRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// The iterator of [`MessagesRef::developer`].
pub(crate) enum Developer<'a> {
    Slice(std::iter::Enumerate<std::slice::Iter<'a, Message>>),
    Chunked(
        MessagesRef<'a>,
        imbl::vector::Iter<'a, usize, imbl::shared_ptr::DefaultSharedPtr>,
    ),
}

impl<'a> Iterator for Developer<'a> {
    type Item = (usize, &'a Message);

    #[inline]
    fn next(&mut self) -> Option<(usize, &'a Message)> {
        match self {
            Developer::Slice(it) => it.find(|(_, m)| m.role() == Role::Developer),
            Developer::Chunked(list, it) => {
                let i = *it.next()?;
                list.get(i).map(|m| (i, m))
            }
        }
    }
}

/// The messages of a [`Messages`] or [`MessagesRef`], in order: a slice iterator per chunk.
///
/// ```
/// use mektpoy::{Message, vocab::Messages};
/// let messages: Messages = (0..3).map(|i| Message::user(format!("u{i}"), "hi")).collect();
/// let mut iter = messages.iter();
/// assert_eq!(iter.next_back().map(Message::id), Some("u2"));
/// assert_eq!(iter.len(), 2);
/// ```
#[derive(Clone)]
pub struct MessageIter<'a> {
    source: MessagesRef<'a>,
    front: std::slice::Iter<'a, Message>,
    back: std::slice::Iter<'a, Message>,
    /// The positions between `front` and `back` not yet taken into either.
    lo: usize,
    hi: usize,
}

impl<'a> MessageIter<'a> {
    /// The next messages as one contiguous piece (the rest of a chunk), consuming them; read
    /// from the front only (`None` once the front meets what `next_back` took).
    #[inline]
    pub(crate) fn next_piece(&mut self) -> Option<&'a [Message]> {
        let front = std::mem::replace(&mut self.front, [].iter()).as_slice();
        if !front.is_empty() {
            return Some(front);
        }
        if self.lo < self.hi {
            let run = self.source.run_from(self.lo);
            let run = &run[..run.len().min(self.hi - self.lo)];
            self.lo += run.len();
            return Some(run);
        }
        let back = std::mem::replace(&mut self.back, [].iter()).as_slice();
        (!back.is_empty()).then_some(back)
    }
}

impl<'a> Iterator for MessageIter<'a> {
    type Item = &'a Message;

    #[inline]
    fn next(&mut self) -> Option<&'a Message> {
        if let Some(m) = self.front.next() {
            return Some(m);
        }
        if self.lo < self.hi {
            let run = self.source.run_from(self.lo);
            let run = &run[..run.len().min(self.hi - self.lo)];
            self.lo += run.len();
            self.front = run.iter();
            return self.front.next();
        }
        self.back.next()
    }

    #[inline]
    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.front.len() + (self.hi - self.lo) + self.back.len();
        (n, Some(n))
    }

    /// Skips whole chunks: O(log n), not O(n).
    #[inline]
    fn nth(&mut self, n: usize) -> Option<&'a Message> {
        let in_front = self.front.len();
        if n < in_front {
            return self.front.nth(n);
        }
        let n = n - in_front;
        self.front = [].iter();
        let between = self.hi - self.lo;
        if n < between {
            self.lo += n;
            return self.next();
        }
        self.lo = self.hi;
        self.back.nth(n - between)
    }
}

impl DoubleEndedIterator for MessageIter<'_> {
    #[inline]
    fn next_back(&mut self) -> Option<Self::Item> {
        if let Some(m) = self.back.next_back() {
            return Some(m);
        }
        if self.lo < self.hi {
            let run = self.source.run_to(self.hi);
            let run = &run[run.len().saturating_sub(self.hi - self.lo)..];
            self.hi -= run.len();
            self.back = run.iter();
            return self.back.next_back();
        }
        self.front.next_back()
    }
}

impl ExactSizeIterator for MessageIter<'_> {}

impl FusedIterator for MessageIter<'_> {}

impl fmt::Debug for MessageIter<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MessageIter")
            .field("remaining", &self.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn list(n: usize) -> Vec<Message> {
        (0..n)
            .map(|i| Message::user(format!("m{i}"), "x"))
            .collect()
    }

    fn ids<'m>(it: impl Iterator<Item = &'m Message>) -> Vec<String> {
        it.map(|m| m.id().to_owned()).collect()
    }

    proptest! {
        /// A chunked list reads as the vector it was built from, whatever its length and
        /// however it was grown (pushes onto shared clones included), from both ends, by
        /// index and by `nth`.
        #[test]
        fn a_list_reads_as_its_vector(
            n in 0usize..300,
            splits in proptest::collection::vec(0usize..300, 0..4),
            picks in proptest::collection::vec((0usize..310, 0usize..310), 0..8),
        ) {
            let v = list(n);
            let mut m = Messages::new();
            let mut keep = Vec::new();
            for (i, x) in v.iter().enumerate() {
                if splits.contains(&i) {
                    keep.push((i, m.clone()));
                }
                m.push(x.clone());
            }
            prop_assert_eq!(m.len(), n);
            prop_assert_eq!(ids(m.iter()), ids(v.iter()));
            prop_assert_eq!(ids(m.iter().rev()), ids(v.iter().rev()));
            for (i, old) in &keep {
                prop_assert_eq!(old.len(), *i, "a clone is not changed by later pushes");
                prop_assert_eq!(ids(old.iter()), ids(v[..*i].iter()));
                prop_assert_eq!(old.shared_full_prefix(&m), i / CHUNK * CHUNK);
            }
            for (i, x) in v.iter().enumerate() {
                prop_assert!(m[i].ptr_eq(x));
            }
            prop_assert!(m.get(n).is_none());
            prop_assert_eq!(m.last().map(Message::id), v.last().map(Message::id));
            for (a, b) in picks {
                let (lo, hi) = (a.min(b).min(n), a.max(b).min(n));
                let r = m.as_ref();
                prop_assert_eq!(ids(r.iter_range(lo..hi)), ids(v[lo..hi].iter()));
                prop_assert_eq!(ids(r.iter_range(lo..hi).rev()), ids(v[lo..hi].iter().rev()));
                let mut it = r.iter_range(lo..hi);
                let k = a % (hi - lo + 1);
                prop_assert_eq!(it.nth(k).map(Message::id), v[lo..hi].get(k).map(Message::id));
                prop_assert_eq!(it.len(), (hi - lo).saturating_sub(k + 1));
                prop_assert_eq!(ids(it), ids(v[lo..hi].iter().skip(k + 1)));
                // Both ends meet.
                let mut it = r.iter_range(lo..hi);
                let mut got = Vec::new();
                let mut back = Vec::new();
                let mut flip = b;
                loop {
                    let x = if flip % 2 == 0 { it.next().map(|m| (true, m)) } else { it.next_back().map(|m| (false, m)) };
                    flip /= 2;
                    if flip == 0 { flip = a + 1; }
                    match x {
                        Some((true, m)) => got.push(m.id().to_owned()),
                        Some((false, m)) => back.push(m.id().to_owned()),
                        None => break,
                    }
                }
                back.reverse();
                got.extend(back);
                prop_assert_eq!(got, ids(v[lo..hi].iter()));
            }
            prop_assert_eq!(&m, &v);
            prop_assert_eq!(Messages::from(v.clone()), m.clone());
            let dev = |r: MessagesRef<'_>| r.developer().map(|(i, m)| (i, m.id().to_owned())).collect::<Vec<_>>();
            prop_assert_eq!(dev(m.as_ref()), dev(MessagesRef::from(&v)));
            for (i, old) in &keep {
                prop_assert_eq!(dev(old.as_ref()), dev(MessagesRef::from(&v[..*i])));
            }
        }
    }

    #[test]
    fn a_push_onto_a_shared_list_leaves_the_other_as_it_was() {
        let mut a: Messages = list(CHUNK - 1).into();
        let b = a.clone();
        a.push(Message::user("x", "y"));
        assert_eq!((a.len(), b.len()), (CHUNK, CHUNK - 1));
        assert_eq!(a.shared_full_prefix(&b), 0);
        let c = a.clone();
        a.push(Message::user("z", "y"));
        assert_eq!(
            a.shared_full_prefix(&c),
            CHUNK,
            "full chunks are shared, not copied"
        );
        assert!(a.as_ref().as_slice().is_none() && c.as_ref().as_slice().is_some());
        assert_eq!(
            serde_json::to_value(&c).unwrap(),
            serde_json::to_value(c.to_vec()).unwrap()
        );
    }
}
