//! The resume point: what a request's bytes depend on beyond its messages, and where the
//! next request of the same key may pick up writing instead of starting from its first message.

use super::*;

/// What a pass's bytes depend on beyond its messages: the route's rules and the thinking
/// plan (its policy and the floor that names the messages before it). A previous request's
/// [`Resume`] serves only a request with the same key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ResumeKey {
    pub(super) provider: String,
    pub(super) model: Option<String>,
    pub(super) prompts_in_history: bool,
    pub(super) inline: bool,
    pub(super) anthropic: bool,
    pub(super) limited: bool,
    /// `None` when no thinking plan applies; otherwise the policy and the floor's key, or
    /// `Err(())` for a plan without a key (never resumed from).
    pub(super) plan: Option<Result<(crate::event::ThinkingPolicy, u64), ()>>,
}

impl ResumeKey {
    pub(super) fn new(rules: &Rules<'_>, context: &WireContext<'_>) -> Self {
        ResumeKey {
            provider: rules.provider.to_owned(),
            model: rules.model.map(str::to_owned),
            prompts_in_history: rules.prompts_in_history,
            inline: rules.inline,
            anthropic: rules.anthropic,
            limited: rules.limited,
            plan: rules
                .binding
                .policy()
                .map(|policy| context.floor_key.map(|floor| (policy, floor)).ok_or(())),
        }
    }

    pub(super) fn resumable(&self) -> bool {
        !matches!(self.plan, Some(Err(())))
    }
}

/// Where a pass over a request's messages stood when its last assistant turn opened: the wire
/// messages before it, written once (without a cache mark), and the pass's state there.
///
/// The next request of the route resumes from here when its projected messages start with
/// [`messages`](Self::messages) (the same handles, or equal messages) and its [`ResumeKey`] is
/// this one's: the bytes of these wire messages are a function of those messages and the key
/// alone (a lookback breakpoint among them is spliced in when the body is written, never
/// stored), and so is the state (call ids seen, by-value definitions, counts), so a resumed
/// pass writes the bytes a pass from the first message would. Every debug build checks that.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Resume {
    pub(super) key: ResumeKey,
    /// The projected messages the prefix was built from, the opening assistant message last.
    pub(super) messages: HeldPrefix,
    /// The wire messages before the opening one, comma-joined.
    pub(super) bytes: String,
    pub(super) turns: Vec<TurnSpan>,
    pub(super) blocks: Vec<BlockSpan>,
    pub(super) last_role: Option<TurnRole>,
    /// The latest prompt node before the opening message (routes without prompts in history
    /// send it as `system`).
    pub(super) latest_prompt: Option<usize>,
    pub(super) seen: HashSet<String>,
    pub(super) state: Counts,
    /// What the wire messages before the opening one carry.
    pub(super) carried: Carried,
    /// Names this point (see `Segments::resumed`): minted anew whenever a pass leaves it, so
    /// two requests share a token only when one resumed from the point the other left.
    /// Equality ignores it (`()` == `()`): a fresh pass leaves the same state.
    pub(super) token: std::sync::Arc<()>,
}

/// The counts and by-value definitions of a pass at one point.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct Counts {
    pub(super) has_tool_change: bool,
    pub(super) unverifiable: usize,
    pub(super) stripped: usize,
    pub(super) bound_sent: usize,
    pub(super) by_value: ByValue,
}

/// The state of a pass where an assistant turn opened: the message's index, the number of
/// turns the pass had written before it, and the counts there.
#[derive(Debug)]
pub(super) struct Boundary {
    pub(super) index: usize,
    pub(super) turns: usize,
    pub(super) state: Counts,
}

impl Resume {
    /// The number of wire messages this prefix holds.
    pub(crate) fn turns(&self) -> usize {
        self.turns.len()
    }

    /// The number of messages this prefix was built from.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.messages.len()
    }

    /// Where this request's pass starts: the index of the opening assistant message, when the
    /// messages start with this prefix. O(chunks + parts) when both views read lists that share
    /// chunks (a request and the next of its route), not O(messages).
    pub(super) fn matches(&self, messages: &ProjectedMessages<'_>) -> Option<usize> {
        self.messages
            .starts(messages)
            .then(|| self.messages.len() - 1)
    }

    /// What the next request resumes from after a pass that started at message `start`
    /// (resuming from `old`, or from the first message) and wrote `tail`.
    pub(super) fn next(
        old: Option<Resume>,
        key: ResumeKey,
        messages: &ProjectedMessages<'_>,
        start: usize,
        tail: Tail,
    ) -> Option<Resume> {
        if !key.resumable() {
            return None;
        }
        let boundary = tail.boundary?;
        let mut r = old.unwrap_or_else(|| Resume {
            key,
            messages: HeldPrefix::empty(),
            bytes: String::new(),
            turns: Vec::new(),
            blocks: Vec::new(),
            last_role: None,
            latest_prompt: None,
            seen: HashSet::new(),
            state: Counts::default(),
            carried: Carried::default(),
            token: std::sync::Arc::new(()),
        });
        let new = messages.iter().skip(start).take(boundary.index + 1 - start);
        for (offset, m) in new.enumerate() {
            let index = start + offset;
            if index < boundary.index {
                if m.is_prompt() {
                    r.latest_prompt = Some(index);
                }
                if m.role() == Role::Assistant {
                    for block in m.content() {
                        if let ContentBlock::ToolCall(call) = block {
                            r.seen.insert(call.id().to_owned());
                        }
                    }
                }
            }
        }
        r.messages = HeldPrefix::of(messages, boundary.index + 1);
        if boundary.turns > 0 {
            let end = tail.turns[boundary.turns - 1].span.end;
            let sep = usize::from(!r.bytes.is_empty());
            let at = r.bytes.len() + sep;
            if sep == 1 {
                r.bytes.push(',');
            }
            // The cut falls between two wire messages.
            r.bytes.push_str(&tail.bytes[..end]);
            let shift = r.blocks.len();
            let last_block = tail.turns[boundary.turns - 1].blocks.end;
            for t in &tail.turns[..boundary.turns] {
                r.turns.push(TurnSpan {
                    span: t.span.start + at..t.span.end + at,
                    blocks: t.blocks.start + shift..t.blocks.end + shift,
                });
            }
            for b in &tail.blocks[..last_block] {
                r.blocks.push(BlockSpan {
                    span: b.span.start + at..b.span.end + at,
                    thinking: b.thinking,
                });
            }
            r.last_role = Some(tail.roles[boundary.turns - 1]);
        }
        r.state = boundary.state;
        r.carried = tail.carried;
        r.carried.truncate(r.turns.len());
        r.token = std::sync::Arc::new(());
        Some(r)
    }
}
