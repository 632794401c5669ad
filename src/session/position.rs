//! Where a loop stands, read from the surface alone: what a process that reopens a session
//! does next.

use crate::vocab::{ContentBlock, MessageSource, MessagesRef, Role};

/// What a loop does next on a session, as [`Session::position`](super::Session::position)
/// reads it from the surface's last conversation turn (system and developer messages aside:
/// the recorder writes them in a request's batch).
///
/// The log does not say whether a request was sent: a process killed between recording a
/// request and reading its answer, and one killed before sending it, leave the same log, and
/// both resend ([`Resend`](Self::Resend)).
///
/// ```
/// use mektpoy::session::Position;
/// use mektpoy::{Event, Message, Session};
/// let session = Session::new("s");
/// session.append(Event::append(Message::user("u1", "read a.rs")))?;
/// let answer: Message = serde_json::from_str(r#"{"id":"a1","role":"assistant","content":[{"type":"tool-call","id":"c1","name":"read","arguments":"{\"path\":\"a.rs\"}"}],"source":{"kind":"model","provider":"p","model":"m"}}"#)?;
/// session.append(Event::append(answer))?;
/// // Killed here: the restarted process runs the pending call.
/// let Position::RunTools { pending } = session.position() else { panic!() };
/// assert_eq!((pending[0].id.as_str(), pending[0].name.as_str()), ("c1", "read"));
/// session.append(Event::append(Message::tool_result("r1", "c1", "fn main() {}")))?;
/// assert_eq!(session.position(), Position::Continue);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Position {
    /// Nothing on the surface yet: the loop's first turn.
    Start,
    /// The last request has no answer (the surface ends with the user's turn): send it again
    /// (`AgentLoop::retry`).
    Resend,
    /// The last answer made tool calls that have no result yet, in the answer's order: run
    /// them, append their results, then continue (`AgentLoop::next_step`).
    RunTools {
        /// The calls without a result: `(call id, tool name, arguments)`.
        pending: Vec<PendingCall>,
    },
    /// Every call of the last answer has its result: continue the turn
    /// (`AgentLoop::next_step`).
    Continue,
    /// The last answer is complete and made no call: the turn is over; wait for the user
    /// (`AgentLoop::user_turn`).
    AwaitUser,
}

/// A tool call of the last answer that has no result on the surface.
///
/// ```
/// use mektpoy::session::Position;
/// use mektpoy::{Event, Message, Session};
/// let session = Session::new("s");
/// session.append(Event::append(Message::user("u1", "read a.rs")))?;
/// let answer: Message = serde_json::from_str(r#"{"id":"a1","role":"assistant","content":[{"type":"tool-call","id":"c1","name":"read","arguments":"{\"path\":\"a.rs\"}"}],"source":{"kind":"model","provider":"p","model":"m"}}"#)?;
/// session.append(Event::append(answer))?;
/// let Position::RunTools { pending } = session.position() else { panic!() };
/// assert_eq!(pending[0].arguments, r#"{"path":"a.rs"}"#);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct PendingCall {
    /// The call's id, which its result names.
    pub id: String,
    /// The tool called.
    pub name: String,
    /// The arguments, as the model wrote them (JSON text).
    pub arguments: String,
}

/// The position after `messages` (the surface's messages in order).
pub(super) fn position(messages: MessagesRef<'_>) -> Position {
    let turns = || {
        messages
            .iter()
            .rev()
            .filter(|m| !matches!(m.role(), Role::System | Role::Developer))
    };
    let Some(last) = turns().next() else {
        return Position::Start;
    };
    match last.role() {
        Role::User => Position::Resend,
        Role::Assistant | Role::Tool => {
            // The last answer, and the results appended after it.
            let mut answered = Vec::new();
            let Some(answer) = turns().find(|m| match m.source() {
                MessageSource::Tool { call_id } if m.role() == Role::Tool => {
                    answered.push(call_id.as_str());
                    false
                }
                _ => m.role() == Role::Assistant,
            }) else {
                // Tool results with no answer before them: nothing to run, go on.
                return Position::Continue;
            };
            let calls: Vec<PendingCall> = answer
                .content()
                .iter()
                .filter_map(ContentBlock::as_tool_call)
                .map(|call| PendingCall {
                    id: call.id().to_owned(),
                    name: call.name().to_owned(),
                    arguments: call.arguments().to_owned(),
                })
                .collect();
            let any_call = !calls.is_empty();
            let pending: Vec<PendingCall> = calls
                .into_iter()
                .filter(|c| !answered.contains(&c.id.as_str()))
                .collect();
            if !pending.is_empty() {
                Position::RunTools { pending }
            } else if any_call {
                Position::Continue
            } else {
                Position::AwaitUser
            }
        }
        // Unreachable (filtered out); a future role reads as a finished turn.
        _ => Position::AwaitUser,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::Message;

    fn position(messages: &[Message]) -> Position {
        super::position(messages.into())
    }

    fn call(id: &str) -> ContentBlock {
        ContentBlock::tool_call(id, "read", "{}").unwrap()
    }

    fn answer(id: &str, content: Vec<ContentBlock>) -> Message {
        Message::new(
            id,
            Role::Assistant,
            content,
            MessageSource::Model {
                provider: "p".into(),
                model: "m".into(),
            },
        )
    }

    fn pending(p: &Position) -> Vec<&str> {
        match p {
            Position::RunTools { pending } => pending.iter().map(|c| c.id.as_str()).collect(),
            _ => Vec::new(),
        }
    }

    #[test]
    fn each_position_from_the_surface_tail() {
        let user = Message::user("u1", "hi");
        let prompt = Message::new(
            "s1",
            Role::System,
            vec![ContentBlock::text("P")],
            MessageSource::SystemPrompt,
        );
        let done = answer("a1", vec![ContentBlock::text("ok")]);
        let calls = answer(
            "a2",
            vec![ContentBlock::text("let me look"), call("c1"), call("c2")],
        );
        let r1 = Message::tool_result("t1", "c1", "one");
        let r2 = Message::tool_result("t2", "c2", "two");
        let dev = Message::developer("d1", vec![ContentBlock::addition("grep").unwrap()]);

        assert_eq!(position(&[]), Position::Start);
        assert_eq!(position(std::slice::from_ref(&prompt)), Position::Start);
        assert_eq!(position(&[prompt.clone(), user.clone()]), Position::Resend);
        assert_eq!(
            position(&[user.clone(), dev.clone()]),
            Position::Resend,
            "the batch's developer message is not a turn"
        );
        assert_eq!(position(&[user.clone(), done.clone()]), Position::AwaitUser);
        let asked = [user.clone(), calls.clone()];
        assert_eq!(pending(&position(&asked)), ["c1", "c2"]);
        let half = [user.clone(), calls.clone(), r1.clone()];
        assert_eq!(
            pending(&position(&half)),
            ["c2"],
            "between a call and its result"
        );
        let all = [user.clone(), calls.clone(), r2, r1.clone(), dev];
        assert_eq!(position(&all), Position::Continue, "any order of results");
        // An earlier answer's results do not answer the last answer's calls.
        let again = [
            user,
            calls.clone(),
            r1.clone(),
            answer("a3", vec![call("c1")]),
        ];
        assert_eq!(pending(&position(&again)), ["c1"]);
    }
}
