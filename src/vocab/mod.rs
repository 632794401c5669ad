//! The JSON nouns of the log ([reference §1](crate::manual::reference#1-vocabulary-and-json)):
//! tools, messages, content blocks, sequence numbers.

mod json;
mod list;
mod message;
mod messages;
pub(crate) mod strict;
mod tool;

use std::fmt;

use serde::{Deserialize, Serialize};

pub use json::{JsonFault, json_equivalent};
pub(crate) use json::{arguments_depth, map_equivalent};
pub use list::{Iter, List};
pub(crate) use message::BlockSeed;
pub use message::{
    BlockError, ContentBlock, InlineAddition, Message, MessageSource, OtherBlock, OtherSource,
    Role, SourceError, ToolCall, ToolRef,
};
pub use messages::{MessageIter, Messages, MessagesRef};
pub use tool::{DEFERRED_PLACEHOLDER_NAME, ToolError, ToolSchema};
pub(crate) use tool::{NameKey, ToolIndex, ToolInterner, ToolSeed, same_tools};

/// The 0-based index of an event in a session log, inherited events included.
///
/// ```
/// use mektpoy::vocab::Seq;
/// use mektpoy::{Event, Message, Session};
/// let session = Session::new("s");
/// let seq = session.append(Event::append(Message::user("u1", "hi")))?;
/// assert_eq!(seq, Seq(0));
/// assert_eq!(seq.to_string(), "0");
/// # Ok::<(), mektpoy::session::AppendError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Seq(pub u64);

/// A `Seq` as an index into the log.
///
/// ```
/// use mektpoy::vocab::Seq;
/// assert_eq!(Seq::from(3usize).index(), 3);
/// ```
impl Seq {
    /// The index as `usize`, for slicing the log.
    ///
    /// ```
    /// use mektpoy::vocab::Seq;
    /// use mektpoy::{Event, Message, Session};
    /// let session = Session::new("s");
    /// let seq = session.append(Event::append(Message::user("u1", "hi")))?;
    /// assert_eq!(session.events()[seq.index()].event_type(), "user/message");
    /// assert_eq!(Seq(7).index(), 7);
    /// # Ok::<(), mektpoy::session::AppendError>(())
    /// ```
    pub fn index(self) -> usize {
        // A log never holds more events than fit in memory.
        usize::try_from(self.0).unwrap_or(usize::MAX)
    }
}

impl fmt::Display for Seq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl From<usize> for Seq {
    fn from(i: usize) -> Self {
        Seq(i as u64)
    }
}
