//! `List<T>`: the immutable, O(1)-clone sequence the public API hands out.
//!
//! Snapshots and session reads share their structure with the log (a persistent vector
//! inside), so handing one out costs O(1) and nothing can change it afterwards. The
//! persistent-collection crate stays an implementation detail: no type of it appears in a
//! public signature, so replacing it is never a breaking change.

use std::fmt;
use std::ops::Index;

/// An immutable sequence that clones in O(1) and shares its structure with the log.
///
/// Index it, iterate it, or copy it out with [`to_vec`](Self::to_vec).
///
/// ```
/// use mektpoy::{Event, Message, Session};
/// let session = Session::new("s");
/// session.append(Event::append(Message::user("u1", "hi")))?;
/// let events = session.events();
/// assert_eq!(events.len(), 1);
/// assert!(matches!(&events[0], Event::Message(_)));
/// assert_eq!(events.iter().count(), 1);
/// # Ok::<(), mektpoy::session::AppendError>(())
/// ```
#[derive(Clone, PartialEq)]
pub struct List<T: Clone>(pub(crate) imbl::Vector<T>);

impl<T: Clone> List<T> {
    /// Number of items.
    ///
    /// ```
    /// use mektpoy::{Event, Message, Session};
    /// let session = Session::new("s");
    /// session.append(Event::append(Message::user("u1", "hi")))?;
    /// assert_eq!(session.events().len(), 1);
    /// # Ok::<(), mektpoy::session::AppendError>(())
    /// ```
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there is no item.
    ///
    /// ```
    /// use mektpoy::Session;
    /// assert!(Session::new("s").events().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The item at `index`, if any. O(log n).
    ///
    /// ```
    /// use mektpoy::{Event, Message, Session};
    /// let session = Session::new("s");
    /// session.append(Event::append(Message::user("u1", "hi")))?;
    /// assert_eq!(session.events().get(0).map(Event::event_type), Some("user/message"));
    /// assert!(session.events().get(1).is_none());
    /// # Ok::<(), mektpoy::session::AppendError>(())
    /// ```
    pub fn get(&self, index: usize) -> Option<&T> {
        self.0.get(index)
    }

    /// The first item.
    ///
    /// ```
    /// use mektpoy::ToolSchema;
    /// use mektpoy::history::ToolHistory;
    /// let history = ToolHistory::new([ToolSchema::no_input("read", ""), ToolSchema::no_input("grep", "")], []);
    /// assert_eq!(history.tools().first().map(ToolSchema::name), Some("read"));
    /// ```
    pub fn first(&self) -> Option<&T> {
        self.0.front()
    }

    /// The last item.
    ///
    /// ```
    /// use mektpoy::ToolSchema;
    /// use mektpoy::history::ToolHistory;
    /// let history = ToolHistory::new([ToolSchema::no_input("read", ""), ToolSchema::no_input("grep", "")], []);
    /// assert_eq!(history.tools().last().map(ToolSchema::name), Some("grep"));
    /// ```
    pub fn last(&self) -> Option<&T> {
        self.0.back()
    }

    /// The items in order.
    ///
    /// ```
    /// use mektpoy::ToolSchema;
    /// use mektpoy::history::ToolHistory;
    /// let history = ToolHistory::new([ToolSchema::no_input("read", ""), ToolSchema::no_input("grep", "")], []);
    /// let names: Vec<&str> = history.tools().iter().map(ToolSchema::name).collect();
    /// assert_eq!(names, ["read", "grep"]);
    /// ```
    pub fn iter(&self) -> Iter<'_, T> {
        Iter(self.0.iter())
    }

    /// The items copied into a `Vec` (each an O(1) clone for the crate's handle types).
    ///
    /// ```
    /// use mektpoy::ToolSchema;
    /// use mektpoy::history::ToolHistory;
    /// let read = ToolSchema::no_input("read", "");
    /// let history = ToolHistory::new([read.clone()], []);
    /// assert_eq!(history.tools().to_vec(), vec![read]);
    /// ```
    pub fn to_vec(&self) -> Vec<T> {
        self.0.iter().cloned().collect()
    }
}

impl<T: Clone> Default for List<T> {
    fn default() -> Self {
        List(imbl::Vector::new())
    }
}

impl<T: Clone> Index<usize> for List<T> {
    type Output = T;

    fn index(&self, index: usize) -> &T {
        &self.0[index]
    }
}

impl<'a, T: Clone> IntoIterator for &'a List<T> {
    type Item = &'a T;
    type IntoIter = Iter<'a, T>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

/// The iterator of [`List::iter`].
///
/// ```
/// use mektpoy::ToolSchema;
/// use mektpoy::history::ToolHistory;
/// let history = ToolHistory::new([ToolSchema::no_input("a", ""), ToolSchema::no_input("b", "")], []);
/// let mut iter = history.tools().iter();
/// assert_eq!(iter.len(), 2);
/// assert_eq!(iter.next_back().map(ToolSchema::name), Some("b"));
/// ```
pub struct Iter<'a, T: Clone>(imbl::vector::Iter<'a, T, imbl::shared_ptr::DefaultSharedPtr>);

impl<'a, T: Clone> Iterator for Iter<'a, T> {
    type Item = &'a T;

    fn next(&mut self) -> Option<&'a T> {
        self.0.next()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.0.size_hint()
    }
}

impl<T: Clone> DoubleEndedIterator for Iter<'_, T> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.0.next_back()
    }
}

impl<T: Clone> ExactSizeIterator for Iter<'_, T> {}

impl<T: Clone> FromIterator<T> for List<T> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        List(iter.into_iter().collect())
    }
}

impl<T: Clone + fmt::Debug> fmt::Debug for List<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.0.iter()).finish()
    }
}
