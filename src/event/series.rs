//! Why a request opens a series: the recorder's verdict, read by the meter and the thinking
//! policy.

/// Why a request opens a series ([reference §4](crate::manual::reference#4-recording-a-request)
/// step 7). The meter and the thinking policy need the difference: a series the caller opened is a
/// loss the caller chose; one the crate's rules opened is a loss a better route could have avoided.
///
/// ```
/// use mektpoy::event::SeriesStart;
/// use mektpoy::{AgentLoop, ContentBlock, Message, Session, route_for};
/// let mut agent = AgentLoop::builder(Session::new("s"), route_for("deepseek", "deepseek-flash")).build()?;
/// assert_eq!(agent.user_turn([Message::user("u1", "hi")])?.series_start, Some(SeriesStart::First));
/// agent.append(agent.assistant("a1", [ContentBlock::text("ok")]))?;
/// agent.new_series();
/// assert_eq!(agent.user_turn([Message::user("u2", "more")])?.series_start, Some(SeriesStart::Asked));
/// # Ok::<(), mektpoy::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SeriesStart {
    /// The session's first header.
    First,
    /// The loop asked for a new series (`new_series` on attempt 0).
    Asked,
    /// A surface replace was appended since this recorder's previous record (a compaction or
    /// a rewind by the caller).
    Rewound,
    /// The recorder replaced a system prompt node ([reference
    /// §4.1](crate::manual::reference#41-system-prompt-in-history)).
    PromptReplaced,
    /// The route's fold opened a new declaration series ([reference
    /// §3](crate::manual::reference#3-toolhistory-the-cached-reducer) step 2): a changed definition
    /// on a by-reference route, a first usable tool.
    Redeclared,
}

impl SeriesStart {
    /// Whether the caller chose this series (asked, or a replace it appended), so that its
    /// lost cache is not the route's fault.
    ///
    /// ```
    /// use mektpoy::event::SeriesStart;
    /// assert!(SeriesStart::Rewound.by_caller(), "a compaction the caller appended");
    /// assert!(!SeriesStart::Redeclared.by_caller(), "the route's rules");
    /// ```
    pub fn by_caller(self) -> bool {
        matches!(self, SeriesStart::Asked | SeriesStart::Rewound)
    }
}
