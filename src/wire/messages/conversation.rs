//! The pass over the projected messages that builds the wire turns: prompt updates and tool
//! changes wait in a queue flushed as one system message, and reasoning goes back where the
//! thinking rules let it.

use super::*;

/// The top-level `system` and the wire turns of one request, with what the pass counted.
pub(super) struct Conversation<'a> {
    pub(super) system: Option<String>,
    pub(super) turns: Vec<Turn<'a>>,
    pub(super) has_tool_change: bool,
    /// Reasoning left out because the provider could not verify it.
    pub(super) unverifiable: usize,
    /// Pre-floor thinking the `StripThinking` policy left out.
    pub(super) stripped: usize,
    /// Pre-floor thinking sent under the `DropBlock` policy.
    pub(super) bound_sent: usize,
    /// Where the last assistant turn opened.
    pub(super) boundary: Option<Boundary>,
    /// Which messages and blocks each wire message carries, the resumed prefix's included.
    pub(super) carried: Carried,
}

/// A queued block and the message it came from (to name in a limit error), with the
/// message's index and the block's.
pub(super) struct Queued<'a> {
    pub(super) block: Block<'a>,
    pub(super) from: &'a str,
    pub(super) source: (usize, usize),
}

/// The state of the single pass over the messages.
pub(super) struct Builder<'a, 'r> {
    pub(super) rules: &'r Rules<'r>,
    pub(super) turns: Vec<Turn<'a>>,
    /// Prompt updates and tool changes waiting for a flush, in order.
    pub(super) queue: Vec<Queued<'a>>,
    pub(super) calls: Calls<'a>,
    pub(super) has_tool_change: bool,
    pub(super) by_value: ByValue,
    pub(super) unverifiable: usize,
    pub(super) stripped: usize,
    pub(super) bound_sent: usize,
    /// The role of the last wire message before the point the pass resumed from.
    pub(super) prior_role: Option<TurnRole>,
    /// The index of the message the pass is at.
    pub(super) index: usize,
    /// The state where the latest assistant turn opened.
    pub(super) boundary: Option<Boundary>,
    /// What each wire message carries, from the resumed prefix's on: the pass records its
    /// own grouping as it makes it.
    pub(super) carried: Carried,
}

impl<'a> Conversation<'a> {
    /// The pass over `messages`, from the first one, or, with `prior` (what the route's
    /// previous request left, and the index of the opening assistant message it matched),
    /// from that message on with the state it left.
    pub(super) fn build(
        messages: &'a ProjectedMessages<'_>,
        rules: &Rules<'_>,
        prior: Option<(&'a Resume, usize)>,
    ) -> Result<Self, WireError> {
        let prompts_in_history = rules.prompts_in_history;
        let start = prior.map_or(0, |(_, start)| start);
        let mut skip = start;
        let system = match messages.first() {
            // In-history routes: node 0 is `system` only when it is the first surface node.
            Some(first) if prompts_in_history && first.role() == Role::System => {
                skip = skip.max(1);
                Some(system_text(first)?)
            }
            _ if prompts_in_history => None,
            _ => {
                // The latest prompt of the new messages, or of the prefix the pass resumes
                // from (its messages are these messages' first ones).
                let new = latest_prompt(messages.iter().skip(start));
                let latest = new.or_else(|| {
                    prior.and_then(|(r, _)| r.latest_prompt.and_then(|i| messages.get(i)))
                });
                latest.map(system_text).transpose()?
            }
        };
        let rest = messages.iter().skip(skip);
        let state = prior.map(|(r, _)| r.state.clone()).unwrap_or_default();
        let mut b = Builder {
            rules,
            turns: Vec::with_capacity(messages.len() - skip.min(messages.len())),
            queue: Vec::new(),
            calls: Calls {
                prior: prior.map(|(r, _)| &r.seen),
                ..Calls::default()
            },
            has_tool_change: state.has_tool_change,
            by_value: state.by_value,
            unverifiable: state.unverifiable,
            stripped: state.stripped,
            bound_sent: state.bound_sent,
            prior_role: prior.and_then(|(r, _)| r.last_role),
            index: skip,
            boundary: None,
            carried: prior.map(|(r, _)| r.carried.clone()).unwrap_or_default(),
        };
        for message in rest {
            match message.role() {
                Role::System if prompts_in_history => {
                    let text = system_text(message)?;
                    if !text.is_empty() {
                        b.queue.push(Queued {
                            block: Block::Text(Cow::Owned(text)),
                            from: message.id(),
                            source: (b.index, 0),
                        });
                    }
                }
                Role::System => check_system_without_history(message)?,
                Role::Developer => b.developer(message)?,
                Role::User => {
                    b.calls.require_answered()?;
                    let content = text_blocks(message)?;
                    let sources = message.content().iter().enumerate();
                    let sources = sources.filter(
                        |(_, c)| !matches!(c, ContentBlock::Text { text } if text.is_empty()),
                    );
                    b.push_user(message, content, sources.map(|(i, _)| i));
                }
                Role::Tool => {
                    let tool_use_id = b.calls.answer(message)?;
                    let block = Block::ToolResult {
                        tool_use_id,
                        content: text_blocks(message)?,
                        is_error: message.is_error() == Some(true),
                    };
                    b.push_user(message, vec![block], std::iter::once(0));
                }
                Role::Assistant => b.assistant(message)?,
            }
            b.index += 1;
        }
        b.calls.require_answered()?;
        // At the end the queue goes out only after a user turn; otherwise it waits for the
        // next request (a continuation right after an assistant message is not blocked).
        b.flush()?;
        // The API refuses a turn without content (empty text blocks are dropped above),
        // except a final assistant turn, which the model continues. An assistant message that
        // only leaving reasoning out empties opened no turn (`sends_nothing`).
        let last = b.turns.len().saturating_sub(1);
        for (i, turn) in b.turns.iter().enumerate() {
            if !turn.content.is_empty() {
                continue;
            }
            if !(i == last && turn.role == TurnRole::Assistant) {
                return Err(WireError::message(
                    turn.opened_by.to_owned(),
                    MessageFault::EmptyTurn,
                ));
            }
        }
        Ok(Conversation {
            system,
            turns: b.turns,
            has_tool_change: b.has_tool_change,
            unverifiable: b.unverifiable,
            stripped: b.stripped,
            bound_sent: b.bound_sent,
            boundary: b.boundary,
            carried: b.carried,
        })
    }
}

impl<'a> Builder<'a, '_> {
    pub(super) fn last_role(&self) -> Option<TurnRole> {
        self.turns.last().map(|t| t.role).or(self.prior_role)
    }

    /// Appends `content` (written from the message's blocks `sources`) to the current user
    /// turn, or opens one for `message`.
    pub(super) fn push_user(
        &mut self,
        message: &'a Message,
        content: Vec<Block<'a>>,
        sources: impl Iterator<Item = usize>,
    ) {
        match self.turns.last_mut() {
            Some(turn) if turn.role == TurnRole::User => turn.content.extend(content),
            _ => {
                self.carried.open();
                self.turns
                    .push(Turn::new(TurnRole::User, content, message.id()));
            }
        }
        self.carried.join(self.index);
        for block in sources {
            self.carried.block(self.index, block);
        }
    }

    /// Queues block `index` of `message`.
    pub(super) fn queue(&mut self, message: &'a Message, index: usize, block: Block<'a>) {
        self.queue.push(Queued {
            block,
            from: message.id(),
            source: (self.index, index),
        });
    }

    pub(super) fn developer(&mut self, message: &'a Message) -> Result<(), WireError> {
        for (index, block) in message.content().iter().enumerate() {
            match block {
                ContentBlock::ToolAddition(r) => {
                    let tool_name = r.tool_name();
                    self.queue(message, index, Block::ToolAddition(tool_name));
                }
                ContentBlock::ToolRemoval(r) => {
                    let tool_name = r.tool_name();
                    self.queue(message, index, Block::ToolRemoval(tool_name));
                }
                ContentBlock::InlineAddition(addition) => {
                    if !self.rules.inline {
                        return Err(WireError::message(
                            message.id().to_owned(),
                            MessageFault::InlineDefinitionUnsupported {
                                index,
                                tool: addition.tool_name().to_owned(),
                            },
                        ));
                    }
                    let definition = addition.definition();
                    check_tool_name(
                        definition.name(),
                        MESSAGES_MAX_TOOL_NAME,
                        Some(message.id()),
                        Some(index),
                    )?;
                    check_not_responses_only(definition, Some(message.id()), Some(index))?;
                    limits::check_schema_root(definition, Some(message.id()), Some(index))?;
                    self.queue(message, index, Block::ToolDefinition(definition));
                }
                ContentBlock::Text { text } if text.is_empty() => {}
                ContentBlock::Text { text } => {
                    self.queue(message, index, Block::Text(Cow::Borrowed(text)))
                }
                other => {
                    return Err(WireError::message(
                        message.id().to_owned(),
                        MessageFault::DeveloperBlock {
                            index,
                            block_type: block_type(other),
                        },
                    ));
                }
            }
        }
        Ok(())
    }

    /// Whether every block of assistant `message` is left out (reasoning this route may not send)
    /// or empty text, and at least one is left out: such a message sends nothing, and opens no turn
    /// ([decision 95](crate::manual::decisions#decision-95)). The API refuses an empty assistant
    /// turn, the policy that empties it applies to every later request, and the provider strips
    /// earlier thinking from what the model sees anyway; so the message is passed over and the user
    /// turns around it merge. A function of the message and the rules alone, so a resumed pass and
    /// a pass from the first message pass over the same messages. A block that would fail counts as
    /// sent, so the pass reports it as before.
    pub(super) fn sends_nothing(&self, message: &Message) -> bool {
        let verifiable = thinking::from_provider(message, self.rules.provider, self.rules.model);
        let stripped = |index| {
            matches!(
                self.rules.binding.verdict(message, index),
                Ok(Verdict::Strip)
            )
        };
        let mut left_out = false;
        for (index, block) in message.content().iter().enumerate() {
            let out = match block {
                ContentBlock::Text { text } if text.is_empty() => continue,
                ContentBlock::Reasoning { extra, .. } => {
                    !(verifiable && thinking::is_signed(extra))
                        || (!extra.contains_key("type")
                            && !extra.contains_key("thinking")
                            && stripped(index))
                }
                ContentBlock::Other(value) => {
                    thinking::redacted_thinking(value).is_some() && (!verifiable || stripped(index))
                }
                _ => false,
            };
            if !out {
                return false;
            }
            left_out = true;
        }
        left_out
    }

    pub(super) fn assistant(&mut self, message: &'a Message) -> Result<(), WireError> {
        let passed_over = self.sends_nothing(message);
        if !passed_over && self.last_role() != Some(TurnRole::Assistant) {
            self.calls.require_answered()?;
            self.flush()?;
            // Every call is answered; when nothing waits either (the queue goes out only after
            // a user turn, so before the first one it may still hold developer content, which
            // the resume point does not keep), the next request can resume here. Otherwise the
            // earlier boundary, if any, stays the resume point.
            if self.queue.is_empty() {
                self.boundary = Some(Boundary {
                    index: self.index,
                    turns: self.turns.len(),
                    state: Counts {
                        has_tool_change: self.has_tool_change,
                        unverifiable: self.unverifiable,
                        stripped: self.stripped,
                        bound_sent: self.bound_sent,
                        by_value: self.by_value.clone(),
                    },
                });
            }
            self.carried.open();
            self.turns.push(Turn::new(
                TurnRole::Assistant,
                Vec::with_capacity(message.content().len()),
                message.id(),
            ));
        }
        if !passed_over {
            self.carried.join(self.index);
        }
        // Only the provider that produced a signature can check it.
        let verifiable = thinking::from_provider(message, self.rules.provider, self.rules.model);
        let mut content = Vec::with_capacity(message.content().len());
        for (index, block) in message.content().iter().enumerate() {
            match block {
                ContentBlock::Text { text } if text.is_empty() => {}
                ContentBlock::Text { text } => {
                    if !passed_over {
                        self.carried.block(self.index, index);
                    }
                    content.push(Block::Text(Cow::Borrowed(text)));
                }
                ContentBlock::Reasoning { text, extra } => {
                    if !(verifiable && thinking::is_signed(extra)) {
                        self.unverifiable += 1;
                        continue;
                    }
                    if extra.contains_key("type") || extra.contains_key("thinking") {
                        // They would repeat a key the `thinking` block writes itself.
                        return Err(unsupported(message, index, block));
                    }
                    if self.keep_thinking(message, index)? {
                        if !passed_over {
                            self.carried.block(self.index, index);
                        }
                        content.push(Block::Thinking { text, extra });
                    }
                }
                ContentBlock::ToolCall(call) => {
                    let (id, name, arguments) = (call.id(), call.name(), call.arguments());
                    let input = arguments::input(arguments);
                    self.calls.call(message, id)?;
                    if !passed_over {
                        self.carried.block(self.index, index);
                    }
                    content.push(Block::ToolUse { id, name, input });
                }
                ContentBlock::Other(value) => {
                    let Some(fields) = thinking::redacted_thinking(value) else {
                        return Err(unsupported(message, index, block));
                    };
                    if !verifiable {
                        self.unverifiable += 1;
                        continue;
                    }
                    if self.keep_thinking(message, index)? {
                        if !passed_over {
                            self.carried.block(self.index, index);
                        }
                        content.push(Block::RedactedThinking(fields));
                    }
                }
                other => return Err(unsupported(message, index, other)),
            }
        }
        if !passed_over && let Some(turn) = self.turns.last_mut() {
            turn.content.extend(content);
        }
        Ok(())
    }

    /// Applies the thinking policy to verifiable thinking block `index` of `message`: whether
    /// it is sent.
    pub(super) fn keep_thinking(
        &mut self,
        message: &Message,
        index: usize,
    ) -> Result<bool, WireError> {
        Ok(match self.rules.binding.verdict(message, index)? {
            Verdict::Send => true,
            Verdict::SendBound => {
                self.bound_sent += 1;
                true
            }
            Verdict::Strip => {
                self.stripped += 1;
                false
            }
        })
    }

    /// Sends the queue as one system message, if it is non-empty and the last turn is a user
    /// / tool-result turn; otherwise it keeps waiting. Counts the tools it makes available
    /// against the provider's limits.
    pub(super) fn flush(&mut self) -> Result<(), WireError> {
        if self.queue.is_empty() || self.last_role() != Some(TurnRole::User) {
            return Ok(());
        }
        let queued = std::mem::take(&mut self.queue);
        let mut content = Vec::with_capacity(queued.len());
        self.carried.open();
        for Queued {
            block,
            from,
            source,
        } in queued
        {
            self.carried.block(source.0, source.1);
            if self.rules.limited {
                match &block {
                    Block::ToolDefinition(definition) => {
                        let bytes = limits::json_len(&Definition::new(definition));
                        self.by_value.define(definition.name(), bytes, from);
                    }
                    Block::ToolAddition(name) | Block::ToolRemoval(name) => {
                        self.by_value.withdraw(name);
                    }
                    _ => {}
                }
            }
            self.has_tool_change |= block.is_tool_change();
            content.push(block);
        }
        if self.rules.limited {
            self.by_value.check()?;
        }
        self.turns.push(Turn::new(TurnRole::System, content, ""));
        Ok(())
    }
}

/// The non-empty text blocks of a user or tool message, refusing any other block.
pub(super) fn text_blocks(message: &Message) -> Result<Vec<Block<'_>>, WireError> {
    let mut out = Vec::with_capacity(message.content().len());
    for (index, block) in message.content().iter().enumerate() {
        match block {
            ContentBlock::Text { text } if text.is_empty() => {}
            ContentBlock::Text { text } => out.push(Block::Text(Cow::Borrowed(text))),
            other => return Err(unsupported(message, index, other)),
        }
    }
    Ok(out)
}
