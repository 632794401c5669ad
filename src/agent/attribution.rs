//! Why a request missed the cache: for each request of a route, where it departs from the
//! previous one, named in the caller's terms, and who made that rewrite.
//!
//! The meter finds the first differing byte of two requests ([`Departure`]: a tool by name,
//! the deferred-tools section, `system`, a wire message and block). An [`Attribution`] adds
//! what the bytes cannot say:
//!
//! - **what changed, in the caller's terms** ([`Change`]): which tools (added, removed,
//!   redefined, reordered, deferred flag), the system prompt, or which logged message (its id
//!   and content block; the Messages serializer merges consecutive user content and
//!   consecutive assistant messages into one wire turn, so a wire index is not a log index),
//!   or the model;
//! - **who made it** ([`Cause`]): the caller (tools it changed, a system prompt it changed, a
//!   compaction or rewind it appended, a new series it asked for, another model) or one of the
//!   crate's rules (the prompt node replaced under [reference
//!   §4.1](crate::manual::reference#41-system-prompt-in-history), a declaration series under
//!   [reference §3](crate::manual::reference#3-toolhistory-the-cached-reducer) step 2, thinking
//!   left out by the `StripThinking` floor, consecutive user content merged into one wire turn);
//! - **what the provider should say** ([`Attribution::predicted`]): the [`CacheMissKind`] of
//!   Anthropic's cache diagnostics that the departure predicts, and
//!   [`Attribution::check`] to compare it with what a response reported.
//!
//! Its [`Display`](std::fmt::Display) is one line, e.g. `request 7 (turn 3, step 2):
//! tools_changed at byte 1,234 — tool `shell` removed by the caller (~2,100 tokens)`.
//!
//! # Vendor pages
//!
//! - Anthropic's cache diagnostics compare a request with the previous one and report the
//!   first divergence as the model, the system prompt, the tools or the message history
//!   (`model_changed`, `system_changed`, `tools_changed`, `messages_changed`), and are about
//!   request structure, independent of whether the cache hit:
//!   <https://platform.claude.com/docs/en/build-with-claude/cache-diagnostics>, read
//!   2026-12-01 (the whole page, in a copy fetched 2026-09-20). The page reports "the earliest
//!   divergence only" and is about "exactly where the prompt prefix diverged"; it states no
//!   order of checks, and its table lists `system_changed` before `tools_changed`. The
//!   prediction follows the prefix's order (tools, `system`, messages) with the model first,
//!   so a request that changes both the tools and `system` is where it may be wrong: a
//!   prediction that disagrees is reported as such, never hidden. The opt-in (the
//!   `diagnostics` object; generally available since 2026-09-23, the
//!   `cache-diagnosis-2026-04-07` beta no longer needed) is not sent by the serializers:
//!   [`ask_cache_diagnostics`] adds it to the copy that goes out.
//! - OpenAI documents `prompt_cache_diagnostics` for the Responses API only
//!   (<https://developers.openai.com/api/docs/guides/prompt-caching/diagnostics>, read
//!   2026-12-01). This crate sends chat completions, which carry none, so no mapping to
//!   OpenAI's reasons is encoded; their list of reason values was read only in third-party
//!   copies, not confirmed on the vendor page.

use std::collections::HashMap;
use std::fmt;

use super::Request;
use crate::event::{Rewrite, SeriesStart};
use crate::meter::{Departure, Meter, MeterError, MeterRow, Segment, ToolChange};
use crate::response::{CacheDiagnostics, CacheMissKind};
use crate::vocab::{ContentBlock, Message, Role};
use crate::wire::{Carried, WireRequest, is_bound_thinking};

/// The `anthropic-beta` value Anthropic's cache diagnostics needed while they were in beta.
/// The vendor's release notes of 2026-09-23 say the feature is out of beta on the Claude API
/// and no longer requires the header
/// (<https://platform.claude.com/docs/en/release-notes/overview>, read 2026-12-06; the
/// feature page's translated copies carry `status: ga` and describe the opt-in as the
/// `diagnostics` object alone). [`ask_cache_diagnostics`] no longer sends it; a caller that
/// still does is not refused.
pub const CACHE_DIAGNOSIS_BETA: &str = "cache-diagnosis-2026-04-07";

/// `wire` as it goes out when it asks Anthropic's cache diagnostics to compare it with the
/// request whose response had the id `previous_message_id` (the previous answer's
/// [`response_id`](crate::response::Answer::response_id); `None` on the first request, to opt
/// in with nothing to compare): the body gains `"diagnostics":{"previous_message_id":..}` as
/// its last key (an existing `diagnostics` is replaced in place; every other byte is kept);
/// the headers are kept as they are (the feature is generally available since 2026-09-23 and
/// needs no beta: see [`CACHE_DIAGNOSIS_BETA`]). The serializers do not send the opt-in (the
/// id changes with every request, and nothing in a log needs it), so a loop sends this copy
/// and observes `wire` itself: [`AgentLoop::observe`](super::AgentLoop::observe) names the
/// departure in the caller's terms only for the body it recorded. The response's
/// [`Answer::diagnostics`](crate::response::Answer::diagnostics) then goes to
/// [`Attribution::check`]. Vendor page:
/// <https://platform.claude.com/docs/en/build-with-claude/cache-diagnostics>, read 2026-12-01
/// (Claude API only: not on Amazon Bedrock or Google Cloud).
///
/// ```
/// use mektpoy::WireRequest;
/// use mektpoy::agent::attribution::ask_cache_diagnostics;
/// let wire = WireRequest::new(r#"{"model":"claude-opus-5","messages":[]}"#, vec![]);
/// let sent = ask_cache_diagnostics(&wire, Some("msg_01"))?;
/// assert_eq!(
///     sent.body(),
///     r#"{"model":"claude-opus-5","messages":[],"diagnostics":{"previous_message_id":"msg_01"}}"#
/// );
/// // Generally available: no beta header is added.
/// assert_eq!(sent.header("anthropic-beta"), None);
/// let first = ask_cache_diagnostics(&wire, None)?;
/// assert!(first.body().ends_with(r#""diagnostics":{"previous_message_id":null}}"#));
/// // Asked again: the object is replaced in place, the other headers are kept.
/// let inline = ("anthropic-beta".to_owned(), "inline-tools-2026-09-15".to_owned());
/// let beta = WireRequest::new(sent.body(), vec![inline]);
/// let again = ask_cache_diagnostics(&beta, Some("msg_02"))?;
/// assert_eq!(again.body(), sent.body().replace("msg_01", "msg_02"));
/// assert_eq!(again.headers(), beta.headers());
/// assert!(ask_cache_diagnostics(&WireRequest::new("[]", vec![]), None).is_err());
/// # Ok::<(), mektpoy::meter::MeterError>(())
/// ```
///
/// # Errors
/// [`MeterError::Body`] when the body is not a JSON object.
pub fn ask_cache_diagnostics(
    wire: &WireRequest,
    previous_message_id: Option<&str>,
) -> Result<WireRequest, MeterError> {
    use serde_json::value::RawValue;
    let mut body: indexmap::IndexMap<String, Box<RawValue>> =
        serde_json::from_str(&wire.body).map_err(MeterError::Body)?;
    let diagnostics = serde_json::json!({ "previous_message_id": previous_message_id });
    let raw = RawValue::from_string(diagnostics.to_string()).map_err(MeterError::Body)?;
    body.insert("diagnostics".to_owned(), raw);
    let mut sent = wire.clone();
    sent.body = serde_json::to_string(&body).map_err(MeterError::Body)?;
    // The serializer's notes describe the old bytes.
    sent.segments = None;
    Ok(sent)
}

/// What changed against the previous request of the route, in the caller's terms.
///
/// ```
/// use mektpoy::agent::{Attributor, Change};
/// use mektpoy::{Meter, WireRequest, route_for};
/// let route = route_for("deepseek", "deepseek-flash");
/// let (mut meter, mut attributor) = (Meter::new(&route), Attributor::new());
/// let body = |system: &str| WireRequest::new(format!(r#"{{"system":"{system}","messages":[]}}"#), vec![]);
/// assert_eq!(attributor.observe(&mut meter, None, &body("A"))?.1.change, Change::First);
/// assert_eq!(attributor.observe(&mut meter, None, &body("A"))?.1.change, Change::Extends);
/// assert_eq!(attributor.observe(&mut meter, None, &body("B"))?.1.change, Change::System);
/// # Ok::<(), mektpoy::meter::MeterError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Change {
    /// The route's first request: nothing was cached to depart from.
    First,
    /// The request extends the previous one (or repeats it): nothing departs.
    Extends,
    /// The model changed: the provider caches per model, so nothing is reused.
    Model {
        /// The previous request's model.
        from: String,
        /// This request's model.
        to: String,
    },
    /// The declarations changed (empty when the previous request's tools are not known by
    /// name, after a version-1 restore).
    Tools(Vec<ToolChange>),
    /// The deferred-tools section appeared or went away.
    DeferredSection,
    /// The top-level `system` (the system prompt) changed.
    System,
    /// A message changed.
    Message {
        /// The wire message (an index into the body's `messages`).
        wire: usize,
        /// Its first differing content block, when both requests have it as an array.
        wire_block: Option<usize>,
        /// The logged message there: its id, when it could be named.
        id: Option<String>,
        /// Its first differing content block in the log, when known.
        block: Option<usize>,
    },
}

/// Who made the rewrite, and by which rule. [`by_caller`](Self::by_caller) says whether the
/// loss was the caller's choice; the others are the crate's rules, each with its reference
/// section.
///
/// ```
/// use mektpoy::agent::Cause;
/// assert!(Cause::ToolsChanged.by_caller());
/// assert!(!Cause::PromptReplaced.by_caller());
/// assert_eq!(Cause::ToolsChanged.to_string(), "tools changed by the caller");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Cause {
    /// The caller changed the effective tools (`set_tools`) on a route that declares them in
    /// `tools`. A reorder is one too: declare tools in a stable order (`agent::ToolOrder`).
    ToolsChanged,
    /// The caller changed the system prompt.
    SystemPromptChanged,
    /// The caller appended a surface replace: a compaction or a rewind.
    Compaction,
    /// The caller asked for a new request series (`new_series`).
    NewSeries,
    /// The caller switched models (another loop over the same log, or a replay).
    ModelChanged,
    /// The recorder replaced the system prompt node ([reference
    /// §4.1](crate::manual::reference#41-system-prompt-in-history)): on a route that takes no
    /// prompt update in history, or at a new series.
    PromptReplaced,
    /// The route's fold opened a new declaration series ([reference
    /// §3](crate::manual::reference#3-toolhistory-the-cached-reducer) step 2): a changed definition
    /// on a by-reference route, a first usable tool.
    Redeclared,
    /// Signed thinking produced before the route's thinking floor was left out by the
    /// `StripThinking` policy (the floor moved with a rewrite; see
    /// [`Attribution::rewrite`]).
    ThinkingLeftOut,
    /// The Messages serializer merged new user content into the previous request's last user
    /// turn (the API alternates roles).
    TurnMerged,
    /// No cause was found: a departure nothing in the log or the rules explains, worth a bug
    /// report. Also a departure in the messages no series start explains when the previous
    /// or this request is not known (an [`Attributor`] fed bodies alone).
    Unexplained,
}

/// Reading a cause: whether the caller chose the loss, and the crate's rule behind it.
///
/// ```
/// use mektpoy::agent::Cause;
/// let rules: Vec<&str> = Cause::ALL.into_iter().filter_map(Cause::rule).collect();
/// assert_eq!(rules.len(), 4);
/// assert!(Cause::ALL.into_iter().filter(|c| c.rule().is_some()).all(|c| !c.by_caller()));
/// ```
impl Cause {
    /// Every cause, in report order.
    pub const ALL: [Cause; 10] = [
        Cause::ToolsChanged,
        Cause::SystemPromptChanged,
        Cause::Compaction,
        Cause::NewSeries,
        Cause::ModelChanged,
        Cause::PromptReplaced,
        Cause::Redeclared,
        Cause::ThinkingLeftOut,
        Cause::TurnMerged,
        Cause::Unexplained,
    ];

    /// Whether the caller made the rewrite (a loss it chose), rather than one of the crate's
    /// rules or nothing known.
    ///
    /// ```
    /// use mektpoy::agent::Cause;
    /// let chosen: Vec<Cause> = Cause::ALL.into_iter().filter(|c| c.by_caller()).collect();
    /// assert_eq!(chosen.len(), 5);
    /// assert!(!Cause::Unexplained.by_caller());
    /// ```
    pub fn by_caller(self) -> bool {
        matches!(
            self,
            Cause::ToolsChanged
                | Cause::SystemPromptChanged
                | Cause::Compaction
                | Cause::NewSeries
                | Cause::ModelChanged
        )
    }

    /// The crate's rule behind the rewrite, as a short name with its reference section, for
    /// the causes that are rules.
    ///
    /// ```
    /// use mektpoy::agent::Cause;
    /// assert_eq!(Cause::Redeclared.rule(), Some("new declaration series (reference §3 step 2)"));
    /// assert_eq!(Cause::NewSeries.rule(), None, "the caller's choice, not a rule");
    /// ```
    pub fn rule(self) -> Option<&'static str> {
        Some(match self {
            Cause::PromptReplaced => "prompt node replaced (reference §4.1)",
            Cause::Redeclared => "new declaration series (reference §3 step 2)",
            Cause::ThinkingLeftOut => "thinking floor, StripThinking (reference §7)",
            Cause::TurnMerged => "consecutive user content merged into one wire turn",
            _ => return None,
        })
    }
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Cause::ToolsChanged => "tools changed by the caller",
            Cause::SystemPromptChanged => "system prompt changed by the caller",
            Cause::Compaction => "history replaced by the caller (compaction or rewind)",
            Cause::NewSeries => "new series asked by the caller",
            Cause::ModelChanged => "model changed by the caller",
            Cause::PromptReplaced => "system prompt node replaced by the crate (reference §4.1)",
            Cause::Redeclared => "declarations reopened by the crate (reference §3 step 2)",
            Cause::ThinkingLeftOut => "thinking left out by the crate's StripThinking floor",
            Cause::TurnMerged => "user content merged into the previous wire turn by the crate",
            Cause::Unexplained => "unexplained",
        })
    }
}

/// One request's attribution: where it departs from the previous request of its route, what
/// changed in the caller's terms, and who made it.
///
/// ```
/// use mektpoy::agent::{Cause, Change};
/// use mektpoy::{AgentLoop, ContentBlock, Message, Session, route_for};
/// // DeepSeek V4 Pro takes no prompt update in history: a new prompt rewrites `system`.
/// let mut agent = AgentLoop::builder(Session::new("s"), route_for("deepseek", "deepseek-v4-pro"))
///     .option("max_tokens", 64.into())
///     .system_prompt("A")
///     .build()?;
/// let wire = agent.user_turn([Message::user("u1", "hi")])?.to_wire()?;
/// agent.observe(&wire)?;
/// agent.append(agent.assistant("a1", [ContentBlock::text("ok")]))?;
/// agent.set_system_prompt("B");
/// let wire = agent.user_turn([Message::user("u2", "again")])?.to_wire()?;
/// agent.observe(&wire)?;
/// let a = &agent.attributions()[1];
/// assert_eq!((a.request, a.position), (1, Some((2, 1, 0))));
/// assert_eq!((a.cause, &a.change), (Some(Cause::SystemPromptChanged), &Change::System));
/// assert!(a.lost_tokens > 0);
/// # Ok::<(), mektpoy::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Attribution {
    /// The request's index among the route's observed requests (its meter row), 0-based.
    pub request: usize,
    /// The loop's turn, step and attempt when the request was attributed, if known.
    pub position: Option<(u64, u64, u32)>,
    /// The byte-level departure, `None` when the request extends the previous one.
    pub departure: Option<Departure>,
    /// What changed.
    pub change: Change,
    /// Who made it; `None` when nothing departs (or for the first request).
    pub cause: Option<Cause>,
    /// What the request rewrote as the recorder saw it ([`Request::rewrite`]): on a route
    /// that binds thinking, what moved the thinking floor.
    pub rewrite: Option<Rewrite>,
    /// Estimated tokens the cache held and cannot serve: the previous request's bytes from
    /// the departure on, ⌈bytes / 4⌉ (all of them for a model change).
    pub lost_tokens: u64,
}

/// The wire spelling of a miss kind (`tools_changed`, ...).
fn kind_str(kind: &CacheMissKind) -> &str {
    match kind {
        CacheMissKind::ModelChanged => "model_changed",
        CacheMissKind::SystemChanged => "system_changed",
        CacheMissKind::ToolsChanged => "tools_changed",
        CacheMissKind::MessagesChanged => "messages_changed",
        CacheMissKind::PreviousMessageNotFound => "previous_message_not_found",
        CacheMissKind::Unavailable => "unavailable",
        CacheMissKind::Other(s) => s,
    }
}

/// Checking an attribution against what the provider reported.
///
/// ```
/// use mektpoy::agent::{Attributor, Check};
/// use mektpoy::response::CacheMissKind;
/// use mektpoy::{Meter, WireRequest, route_for};
/// let route = route_for("anthropic", "claude-opus-5");
/// let (mut meter, mut attributor) = (Meter::new(&route), Attributor::new());
/// let body = |system: &str| WireRequest::new(format!(r#"{{"system":"{system}","messages":[]}}"#), vec![]);
/// attributor.observe(&mut meter, None, &body("A"))?;
/// let (_, a) = attributor.observe(&mut meter, None, &body("B"))?;
/// assert_eq!(a.check(None), Check::Unreported { predicted: CacheMissKind::SystemChanged });
/// # Ok::<(), mektpoy::meter::MeterError>(())
/// ```
impl Attribution {
    /// The kind of Anthropic cache-diagnostics miss this attribution predicts: where the
    /// first divergence is in the provider's order (model, tools, `system`, messages).
    /// `None` when nothing departs.
    ///
    /// ```
    /// use mektpoy::agent::Attributor;
    /// use mektpoy::response::CacheMissKind;
    /// use mektpoy::{Meter, WireRequest, route_for};
    /// let route = route_for("anthropic", "claude-opus-5");
    /// let (mut meter, mut attributor) = (Meter::new(&route), Attributor::new());
    /// let body = |system: &str| WireRequest::new(format!(r#"{{"system":"{system}","messages":[]}}"#), vec![]);
    /// attributor.observe(&mut meter, None, &body("A"))?;
    /// let (_, a) = attributor.observe(&mut meter, None, &body("B"))?;
    /// assert_eq!(a.predicted(), Some(CacheMissKind::SystemChanged));
    /// # Ok::<(), mektpoy::meter::MeterError>(())
    /// ```
    pub fn predicted(&self) -> Option<CacheMissKind> {
        if matches!(self.change, Change::Model { .. }) {
            return Some(CacheMissKind::ModelChanged);
        }
        Some(match &self.departure.as_ref()?.segment {
            Segment::Tool { .. } | Segment::DeferredTools => CacheMissKind::ToolsChanged,
            Segment::System => CacheMissKind::SystemChanged,
            _ => CacheMissKind::MessagesChanged,
        })
    }

    /// Compares the prediction with the diagnostics of the request's response
    /// ([`Answer::diagnostics`](crate::response::Answer::diagnostics): `None` when the
    /// response carried none, which is also how a comparison that found no divergence
    /// reads).
    ///
    /// ```
    /// use mektpoy::agent::{Attributor, Check};
    /// use mektpoy::{Meter, WireRequest, route_for};
    /// let route = route_for("anthropic", "claude-opus-5");
    /// let (mut meter, mut attributor) = (Meter::new(&route), Attributor::new());
    /// let body = |tools: &str| format!(r#"{{"model":"claude-opus-5","tools":[{tools}],"messages":[]}}"#);
    /// let wire = |b: String| WireRequest::new(b, vec![]);
    /// attributor.observe(&mut meter, None, &wire(body(r#"{"name":"a"},{"name":"b"}"#)))?;
    /// let (_, a) = attributor.observe(&mut meter, None, &wire(body(r#"{"name":"b"},{"name":"a"}"#)))?;
    /// assert_eq!(a.to_string(), "request 1: tools_changed at byte 9 — tools reordered (`b` moved) by the caller (~4 tokens)");
    /// assert!(matches!(a.check(None), Check::Unreported { .. }));
    /// # Ok::<(), mektpoy::meter::MeterError>(())
    /// ```
    pub fn check(&self, diagnostics: Option<&CacheDiagnostics>) -> Check {
        let predicted = self.predicted();
        let Some(diagnostics) = diagnostics else {
            return match predicted {
                Some(predicted) => Check::Unreported { predicted },
                None => Check::Agrees { kind: None },
            };
        };
        let Some(reason) = &diagnostics.cache_miss_reason else {
            return Check::Pending;
        };
        match &reason.kind {
            CacheMissKind::ModelChanged
            | CacheMissKind::SystemChanged
            | CacheMissKind::ToolsChanged
            | CacheMissKind::MessagesChanged => {
                if predicted.as_ref() == Some(&reason.kind) {
                    Check::Agrees {
                        kind: Some(reason.kind.clone()),
                    }
                } else {
                    Check::Disagrees {
                        predicted,
                        reported: reason.kind.clone(),
                    }
                }
            }
            other => Check::Inconclusive {
                reported: other.clone(),
            },
        }
    }
}

/// A prediction checked against what the provider reported ([`Attribution::check`]).
///
/// ```
/// use mektpoy::agent::{Attributor, Check};
/// use mektpoy::{Meter, WireRequest, route_for};
/// let route = route_for("anthropic", "claude-opus-5");
/// let (mut meter, mut attributor) = (Meter::new(&route), Attributor::new());
/// let body = WireRequest::new(r#"{"system":"A","messages":[]}"#, vec![]);
/// attributor.observe(&mut meter, None, &body)?;
/// let (_, a) = attributor.observe(&mut meter, None, &body)?;
/// // Nothing departs and the response reports nothing: the two agree.
/// assert_eq!(a.check(None), Check::Agrees { kind: None });
/// # Ok::<(), mektpoy::meter::MeterError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Check {
    /// The provider reported the predicted kind (`None`: neither predicted nor reported a
    /// divergence).
    Agrees {
        /// The kind both name.
        kind: Option<CacheMissKind>,
    },
    /// The provider reported another divergence than the predicted one (or one where none
    /// was predicted): the miss is not explained by the crate's reading of the request.
    Disagrees {
        /// What the attribution predicted.
        predicted: Option<CacheMissKind>,
        /// What the provider reported.
        reported: CacheMissKind,
    },
    /// A departure was predicted but the response carried no diagnostics (not asked for, or
    /// no divergence found).
    Unreported {
        /// What the attribution predicted.
        predicted: CacheMissKind,
    },
    /// The provider's comparison was still pending.
    Pending,
    /// The provider could not compare (`previous_message_not_found`, `unavailable`, ...).
    Inconclusive {
        /// What it reported.
        reported: CacheMissKind,
    },
}

impl fmt::Display for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Check::Agrees { kind: Some(k) } => {
                write!(f, "explained: the provider reported {}", kind_str(k))
            }
            Check::Agrees { kind: None } => f.write_str("explained: no divergence either side"),
            Check::Disagrees {
                predicted,
                reported,
            } => write!(
                f,
                "not explained: predicted {}, the provider reported {}",
                predicted.as_ref().map_or("no divergence", kind_str),
                kind_str(reported)
            ),
            Check::Unreported { predicted } => write!(
                f,
                "predicted {}, the response carried no diagnostics",
                kind_str(predicted)
            ),
            Check::Pending => f.write_str("the provider's comparison is pending"),
            Check::Inconclusive { reported } => {
                write!(f, "the provider could not compare: {}", kind_str(reported))
            }
        }
    }
}

/// `1234567` as `1,234,567`.
fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Change::First => f.write_str("the route's first request"),
            Change::Extends => f.write_str("extends the previous request"),
            Change::Model { from, to } => write!(f, "model `{from}` → `{to}`"),
            Change::Tools(changes) if changes.is_empty() => f.write_str("the tools changed"),
            Change::Tools(changes) => {
                for (i, c) in changes.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{c}")?;
                }
                Ok(())
            }
            Change::DeferredSection => {
                f.write_str("the deferred-tools section appeared or went away")
            }
            Change::System => f.write_str("the system prompt changed"),
            Change::Message {
                wire,
                wire_block,
                id,
                block,
            } => {
                match id {
                    Some(id) => write!(f, "message `{id}`")?,
                    None => f.write_str("a message")?,
                }
                if let Some(b) = block {
                    write!(f, " block {b}")?;
                }
                write!(f, " (wire message {wire}")?;
                if let Some(b) = wire_block {
                    write!(f, ", block {b}")?;
                }
                f.write_str(") changed")
            }
        }
    }
}

impl fmt::Display for Attribution {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "request {}", self.request)?;
        if let Some((turn, step, attempt)) = self.position {
            write!(f, " (turn {turn}, step {step}")?;
            if attempt > 0 {
                write!(f, ", attempt {attempt}")?;
            }
            f.write_str(")")?;
        }
        f.write_str(": ")?;
        let Some(cause) = self.cause else {
            return write!(f, "{}", self.change);
        };
        let predicted = self.predicted();
        let kind = predicted.as_ref().map_or("no divergence", kind_str);
        match &self.departure {
            Some(d) if !matches!(self.change, Change::Model { .. }) => {
                write!(f, "{kind} at byte {}", grouped(d.offset))?;
            }
            _ => f.write_str(kind)?,
        }
        write!(f, " — {}", self.change)?;
        match cause {
            Cause::ToolsChanged
            | Cause::SystemPromptChanged
            | Cause::NewSeries
            | Cause::ModelChanged
            | Cause::Compaction => {
                let how = match cause {
                    Cause::Compaction => " by the caller's compaction or rewind",
                    Cause::NewSeries => " by the caller's new series",
                    _ => " by the caller",
                };
                f.write_str(how)?;
            }
            Cause::Unexplained => f.write_str(", cause unexplained")?,
            rule => {
                write!(
                    f,
                    " by the crate's rule: {}",
                    rule.rule().unwrap_or_default()
                )?;
                if let (Cause::ThinkingLeftOut, Some(r)) = (rule, self.rewrite) {
                    write!(f, ", after {r}")?;
                }
            }
        }
        write!(f, " (~{} tokens)", grouped(self.lost_tokens))
    }
}

/// What an [`Attributor`] keeps of the previous observed request of the route.
#[derive(Clone, Debug)]
struct Observed {
    request: Option<Request>,
    model: Option<String>,
    thinking_left_out: usize,
    /// Which projected messages each of its wire messages carried, as its serializer's pass
    /// recorded it (`None` for a body the serializer did not write).
    carried: Option<Carried>,
}

/// Attributes the requests of one route, in sending order, and keeps the attributions for a
/// session report. It reads the route's [`Meter`] (the byte-level departure) and keeps the
/// previous observed request (the caller's terms). [`AgentLoop`](super::AgentLoop) owns one;
/// a replay of a log can drive one with its own meter.
///
/// ```
/// use mektpoy::agent::{Attributor, Cause};
/// use mektpoy::{Meter, WireRequest, route_for};
/// // Bodies a proxy saw, without the log that made them.
/// let route = route_for("deepseek", "deepseek-flash");
/// let (mut meter, mut attributor) = (Meter::new(&route), Attributor::new());
/// let body = |system: &str| WireRequest::new(format!(r#"{{"system":"{system}","messages":[]}}"#), vec![]);
/// attributor.observe(&mut meter, None, &body("A"))?;
/// attributor.observe(&mut meter, None, &body("B"))?;
/// assert_eq!(attributor.attributions().len(), 2);
/// // Named from the bytes alone: the `system` changed.
/// assert_eq!(attributor.attributions()[1].cause, Some(Cause::SystemPromptChanged));
/// # Ok::<(), mektpoy::meter::MeterError>(())
/// ```
#[derive(Clone, Debug, Default)]
pub struct Attributor {
    previous: Option<Observed>,
    list: Vec<Attribution>,
}

/// The `model` of a request body.
fn body_model(body: &str) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct M {
        #[serde(default)]
        model: Option<String>,
    }
    serde_json::from_str::<M>(body).ok()?.model
}

/// Attributing a route's requests as they are sent, and the session's report.
///
/// ```
/// use mektpoy::agent::Attributor;
/// use mektpoy::{Meter, WireRequest, route_for};
/// let route = route_for("deepseek", "deepseek-flash");
/// let (mut meter, mut attributor) = (Meter::new(&route), Attributor::new());
/// let wire = WireRequest::new(r#"{"messages":[]}"#, vec![]);
/// let asked = attributor.attribute(&meter, None, &wire)?; // before sending: nothing kept
/// attributor.observe(&mut meter, None, &wire)?; // once sent
/// assert_eq!(attributor.attributions(), [asked]);
/// # Ok::<(), mektpoy::meter::MeterError>(())
/// ```
impl Attributor {
    /// An attributor with no previous request.
    ///
    /// ```
    /// use mektpoy::agent::Attributor;
    /// let attributor = Attributor::new();
    /// assert!(attributor.attributions().is_empty());
    /// assert_eq!(attributor.report().requests, 0);
    /// ```
    pub fn new() -> Self {
        Attributor::default()
    }

    /// Attributes `wire` (serialized from `request`, when the caller has it) against the
    /// route's previous observed request, without changing anything: what a loop asks before
    /// sending. `meter` must be the route's meter, not yet fed `wire`.
    ///
    /// ```
    /// use mektpoy::agent::{Attributor, Change};
    /// use mektpoy::{Meter, WireRequest, route_for};
    /// let route = route_for("deepseek", "deepseek-flash");
    /// let (mut meter, mut attributor) = (Meter::new(&route), Attributor::new());
    /// let body = |system: &str| WireRequest::new(format!(r#"{{"system":"{system}","messages":[]}}"#), vec![]);
    /// attributor.observe(&mut meter, None, &body("A"))?;
    /// // Asked before sending: nothing is kept, the meter is untouched.
    /// let a = attributor.attribute(&meter, None, &body("B"))?;
    /// assert_eq!(a.change, Change::System);
    /// assert_eq!((attributor.attributions().len(), meter.rows().len()), (1, 1));
    /// # Ok::<(), mektpoy::meter::MeterError>(())
    /// ```
    ///
    /// # Errors
    /// [`MeterError::Body`] for a body that is not a request body.
    pub fn attribute(
        &self,
        meter: &Meter,
        request: Option<&Request>,
        wire: &WireRequest,
    ) -> Result<Attribution, MeterError> {
        let departure = meter.departure_of(&wire.body)?;
        let previous_bytes = meter.rows().last().map(|r| r.total_bytes);
        Ok(self.build(
            meter.rows().len(),
            meter.has_previous(),
            departure,
            previous_bytes,
            request,
            wire,
        ))
    }

    /// Meters `wire` with `meter` (the route's meter) and keeps its attribution; `request` is
    /// the request it was serialized from, when the caller has it (without it the change is
    /// named from the bytes alone and the next request has no log to compare with).
    ///
    /// ```
    /// use mektpoy::agent::Attributor;
    /// use mektpoy::{Meter, WireRequest, route_for};
    /// let route = route_for("deepseek", "deepseek-flash");
    /// let (mut meter, mut attributor) = (Meter::new(&route), Attributor::new());
    /// let wire = WireRequest::new(r#"{"messages":[{"role":"user","content":"hi"}]}"#, vec![]);
    /// let (row, attribution) = attributor.observe(&mut meter, None, &wire)?;
    /// assert_eq!((row.cached_bytes, attribution.request), (0, 0));
    /// assert_eq!(meter.rows().len(), 1);
    /// # Ok::<(), mektpoy::meter::MeterError>(())
    /// ```
    ///
    /// # Errors
    /// [`MeterError::Body`] for a body that is not a request body; nothing changes.
    pub fn observe(
        &mut self,
        meter: &mut Meter,
        request: Option<&Request>,
        wire: &WireRequest,
    ) -> Result<(MeterRow, &Attribution), MeterError> {
        let previous_bytes = meter.rows().last().map(|r| r.total_bytes);
        let had_previous = meter.has_previous();
        let row = meter.observe(&wire.body, wire.series_start)?;
        let index = meter.rows().len() - 1;
        let departure = meter.departures().last().cloned().flatten();
        let attribution = self.build(
            index,
            had_previous,
            departure,
            previous_bytes,
            request,
            wire,
        );
        self.record(attribution, request, wire);
        Ok((row, self.list.last().expect("just pushed")))
    }

    /// Keeps an attribution built before metering (the loop's path: it meters itself).
    pub(crate) fn record(
        &mut self,
        attribution: Attribution,
        request: Option<&Request>,
        wire: &WireRequest,
    ) {
        self.previous = Some(Observed {
            request: request.map(Request::without_wire),
            model: request
                .map(|r| r.config.model.to_string())
                .or_else(|| body_model(&wire.body)),
            thinking_left_out: wire.report.thinking_left_out,
            carried: wire.segments.as_ref().map(|s| s.carried.clone()),
        });
        self.list.push(attribution);
    }

    /// The attribution of every observed request, in order.
    ///
    /// ```
    /// use mektpoy::agent::Attributor;
    /// use mektpoy::{Meter, WireRequest, route_for};
    /// let route = route_for("deepseek", "deepseek-flash");
    /// let (mut meter, mut attributor) = (Meter::new(&route), Attributor::new());
    /// let wire = WireRequest::new(r#"{"messages":[]}"#, vec![]);
    /// attributor.observe(&mut meter, None, &wire)?;
    /// attributor.observe(&mut meter, None, &wire)?;
    /// let indices: Vec<usize> = attributor.attributions().iter().map(|a| a.request).collect();
    /// assert_eq!(indices, [0, 1]);
    /// # Ok::<(), mektpoy::meter::MeterError>(())
    /// ```
    pub fn attributions(&self) -> &[Attribution] {
        &self.list
    }

    /// Totals over the observed requests: per cause, how many requests and how many
    /// estimated tokens lost.
    ///
    /// ```
    /// use mektpoy::agent::{Attributor, Cause};
    /// use mektpoy::{Meter, WireRequest, route_for};
    /// let route = route_for("deepseek", "deepseek-flash");
    /// let (mut meter, mut attributor) = (Meter::new(&route), Attributor::new());
    /// let body = |system: &str| WireRequest::new(format!(r#"{{"system":"{system}","messages":[]}}"#), vec![]);
    /// for system in ["A", "A", "B"] {
    ///     attributor.observe(&mut meter, None, &body(system))?;
    /// }
    /// let report = attributor.report();
    /// assert_eq!((report.requests, report.extended), (3, 1));
    /// assert_eq!(report.causes[0].cause, Cause::SystemPromptChanged);
    /// # Ok::<(), mektpoy::meter::MeterError>(())
    /// ```
    pub fn report(&self) -> AttributionReport {
        let mut by_cause: HashMap<Cause, (usize, u64)> = HashMap::new();
        let mut extended = 0;
        for a in &self.list {
            match a.cause {
                Some(c) => {
                    let e = by_cause.entry(c).or_default();
                    e.0 += 1;
                    e.1 = e.1.saturating_add(a.lost_tokens);
                }
                None if a.change == Change::Extends => extended += 1,
                None => {}
            }
        }
        let causes = Cause::ALL
            .iter()
            .filter_map(|c| {
                by_cause.get(c).map(|&(requests, lost_tokens)| CauseTotal {
                    cause: *c,
                    requests,
                    lost_tokens,
                })
            })
            .collect();
        AttributionReport {
            requests: self.list.len(),
            extended,
            causes,
        }
    }

    /// The attribution of request `index` whose body departs at `departure` from the
    /// meter's previous request (`had_previous`: the meter had one), `previous_bytes` long
    /// when it was a row.
    pub(crate) fn build(
        &self,
        index: usize,
        had_previous: bool,
        departure: Option<Departure>,
        previous_bytes: Option<u64>,
        request: Option<&Request>,
        wire: &WireRequest,
    ) -> Attribution {
        let rewrite = request.and_then(|r| r.rewrite);
        let mut attribution = Attribution {
            request: index,
            position: None,
            departure: None,
            change: Change::First,
            cause: None,
            rewrite,
            lost_tokens: 0,
        };
        if !had_previous {
            return attribution;
        }
        // A primed or restored meter has a previous request but no attribution history: the
        // bytes and the series start alone.
        let unknown = Observed {
            request: None,
            model: None,
            thinking_left_out: 0,
            carried: None,
        };
        let previous = self.previous.as_ref().unwrap_or(&unknown);
        let model = request
            .map(|r| r.config.model.to_string())
            .or_else(|| body_model(&wire.body));
        if let (Some(from), Some(to)) = (&previous.model, &model)
            && from != to
        {
            attribution.lost_tokens = previous_bytes.unwrap_or(0).div_ceil(4);
            attribution.change = Change::Model {
                from: from.clone(),
                to: to.clone(),
            };
            attribution.cause = Some(Cause::ModelChanged);
            attribution.departure = departure;
            return attribution;
        }
        let Some(d) = departure else {
            attribution.change = Change::Extends;
            return attribution;
        };
        attribution.lost_tokens = d.lost_tokens();
        let in_history = request.map(|r| r.route().system_prompt_in_history());
        let series = series_cause(wire.series_start, in_history);
        let before = previous.request.as_ref();
        let (change, cause) = match &d.segment {
            Segment::Tool { .. } | Segment::DeferredTools => {
                let change = if d.segment == Segment::DeferredTools && d.tools.is_empty() {
                    Change::DeferredSection
                } else {
                    Change::Tools(d.tools.clone())
                };
                let tools_changed = match (before, request) {
                    (Some(b), Some(r)) => b.tools != r.tools,
                    // Without the log, only the caller changes `tools` outside a series.
                    _ => true,
                };
                // On a route without a tool-change mode every change of the effective tools
                // opens a declaration series: no rule chose it, the caller's change did.
                let no_mode = request.is_some_and(|r| r.route().tool_update().is_none());
                let cause = match series {
                    Some(Cause::Redeclared) if no_mode && tools_changed => Cause::ToolsChanged,
                    Some(cause) => cause,
                    None if tools_changed => Cause::ToolsChanged,
                    None => Cause::Unexplained,
                };
                (change, cause)
            }
            Segment::System => {
                let cause = series.unwrap_or(Cause::SystemPromptChanged);
                (Change::System, cause)
            }
            Segment::Message { index: wire_index } => message_change(
                &d,
                *wire_index,
                before.map(|b| (b, previous.carried.as_ref())),
                request.map(|r| (r, wire.segments.as_deref().map(|s| &s.carried))),
                series,
                previous.thinking_left_out,
                wire.report.thinking_left_out,
            ),
        };
        attribution.change = change;
        attribution.cause = Some(cause);
        attribution.departure = Some(d);
        attribution
    }
}

/// The cause a series start names, when the request opened one. A prompt replaced on a route
/// that takes no prompt update in history (`in_history` false) is the caller's change: the
/// route offers no other way to send it. Unknown without the request: the rule's.
fn series_cause(start: Option<SeriesStart>, in_history: Option<bool>) -> Option<Cause> {
    match start? {
        SeriesStart::Asked => Some(Cause::NewSeries),
        SeriesStart::Rewound => Some(Cause::Compaction),
        SeriesStart::PromptReplaced if in_history == Some(false) => {
            Some(Cause::SystemPromptChanged)
        }
        SeriesStart::PromptReplaced => Some(Cause::PromptReplaced),
        SeriesStart::Redeclared => Some(Cause::Redeclared),
        _ => None,
    }
}

/// Which projected messages a request's wire messages carry: as its serializer's pass
/// recorded it, or, for a body the serializer did not write (a caller's own
/// [`WireRequest::new`]), as a pass over the request from its first message records it now.
/// Empty when the route refuses the request.
fn grouping(request: &Request, carried: Option<&Carried>) -> Carried {
    match carried {
        Some(carried) => carried.clone(),
        None => request
            .to_wire()
            .ok()
            .and_then(|w| w.segments.map(|s| s.carried.clone()))
            .unwrap_or_default(),
    }
}

/// A departure in wire message `wire`: the logged message there and who changed it. Each
/// request comes with what its wire messages carry, as the serializer grouped them.
fn message_change(
    d: &Departure,
    wire: usize,
    before: Option<(&Request, Option<&Carried>)>,
    now: Option<(&Request, Option<&Carried>)>,
    series: Option<Cause>,
    thinking_before: usize,
    thinking_now: usize,
) -> (Change, Cause) {
    let mut change = Change::Message {
        wire,
        wire_block: d.block,
        id: None,
        block: None,
    };
    let (Some((before, carried_before)), Some((now, carried_now))) = (before, now) else {
        return (change, series.unwrap_or(Cause::Unexplained));
    };
    let (pb, pn) = (before.project(), now.project());
    let (groups_before, groups_now) =
        (grouping(before, carried_before), grouping(now, carried_now));
    // A system prompt node is the system prompt in the caller's terms, wherever it is sent.
    let name = |change: &mut Change, m: &Message, block: Option<usize>| {
        if m.is_prompt() {
            *change = Change::System;
        } else if let Change::Message { id, block: b, .. } = change {
            *id = Some(m.id().to_owned());
            *b = block;
        }
    };
    // 1. The first logged message that differs, when it was in the previous request and
    // sits in the departing wire message: the caller's rewrite (new messages only extend).
    let first_diff = (0..pb.messages.len().max(pn.messages.len()))
        .find(|&i| pb.messages.get(i) != pn.messages.get(i))
        .filter(|&i| i < pb.messages.len());
    if let Some(i) = first_diff
        && (groups_now.wire_of(i) == Some(wire) || groups_before.wire_of(i) == Some(wire))
    {
        match (pb.messages.get(i), pn.messages.get(i)) {
            (Some(b), Some(n)) if b.id() == n.id() => {
                let block = first_block(b.content(), n.content());
                name(&mut change, n, block);
            }
            (_, Some(n)) => name(&mut change, n, None),
            (Some(b), None) => name(&mut change, b, None),
            (None, None) => {}
        }
        // Without a series start the surface changed by a replace the recorder did not see
        // as one (a resumed loop's first record): still the caller's.
        return (change, series.unwrap_or(Cause::Compaction));
    }
    // 2. Thinking the floor now leaves out.
    if thinking_now > thinking_before {
        let group = if wire < groups_now.turns() {
            &groups_now
        } else {
            &groups_before
        };
        let found = group.messages_of(wire).find_map(|i| {
            let m = pn.messages.get(i)?;
            let block = (m.role() == Role::Assistant)
                .then(|| m.content().iter().position(is_bound_thinking))??;
            Some((m.clone(), block))
        });
        if let Some((m, block)) = found {
            name(&mut change, &m, Some(block));
        }
        return (change, Cause::ThinkingLeftOut);
    }
    // 3. New content merged into the previous request's last wire turn: the new message
    // the departing wire block was written from (or the turn's first new one).
    if wire + 1 == groups_before.turns() && wire < groups_now.turns() {
        let new = |i: &usize| *i >= pb.messages.len();
        let found = d
            .block
            .and_then(|b| groups_now.block_of(wire, b))
            .filter(|(i, _)| new(i))
            .or_else(|| groups_now.messages_of(wire).find(new).map(|i| (i, 0)));
        if let Some((i, block)) = found
            && let Some(m) = pn.messages.get(i)
        {
            name(&mut change, m, Some(block));
            return (change, series.unwrap_or(Cause::TurnMerged));
        }
    }
    // 4. Name the wire message's first logged message; the cause is the series start's.
    if let Some(i) = groups_now.messages_of(wire).next()
        && let Some(m) = pn.messages.get(i)
    {
        name(&mut change, m, None);
    }
    (change, series.unwrap_or(Cause::Unexplained))
}

/// The first content block at which two logged messages differ.
fn first_block(a: &[ContentBlock], b: &[ContentBlock]) -> Option<usize> {
    let same = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    (same < a.len().max(b.len())).then_some(same)
}

/// One cause's totals in an [`AttributionReport`].
///
/// ```
/// use mektpoy::agent::{Attributor, Cause};
/// use mektpoy::{Meter, WireRequest, route_for};
/// let route = route_for("deepseek", "deepseek-flash");
/// let (mut meter, mut attributor) = (Meter::new(&route), Attributor::new());
/// let body = |system: &str| WireRequest::new(format!(r#"{{"system":"{system}","messages":[]}}"#), vec![]);
/// attributor.observe(&mut meter, None, &body("A"))?;
/// attributor.observe(&mut meter, None, &body("B"))?;
/// let total = attributor.report().causes[0];
/// assert_eq!((total.cause, total.requests), (Cause::SystemPromptChanged, 1));
/// assert!(total.lost_tokens > 0);
/// # Ok::<(), mektpoy::meter::MeterError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct CauseTotal {
    /// The cause.
    pub cause: Cause,
    /// Requests it explains.
    pub requests: usize,
    /// Σ estimated tokens lost.
    pub lost_tokens: u64,
}

/// Totals over a session's observed requests: which causes cost how much.
///
/// ```
/// use mektpoy::{AgentLoop, ContentBlock, Message, Session, route_for};
/// let mut agent = AgentLoop::builder(Session::new("s"), route_for("deepseek", "deepseek-flash"))
///     .option("max_tokens", 64.into())
///     .build()?;
/// for (i, text) in ["hi", "more"].into_iter().enumerate() {
///     let wire = agent.user_turn([Message::user(format!("u{i}"), text)])?.to_wire()?;
///     agent.observe(&wire)?;
///     agent.append(agent.assistant(format!("a{i}"), [ContentBlock::text("ok")]))?;
/// }
/// let report = agent.attribution_report();
/// assert_eq!((report.requests, report.extended), (2, 1));
/// assert!(report.causes.is_empty());
/// # Ok::<(), mektpoy::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct AttributionReport {
    /// Observed requests.
    pub requests: usize,
    /// Of those, the ones that extended the previous request.
    pub extended: usize,
    /// Per cause that occurred, in [`Cause::ALL`] order.
    pub causes: Vec<CauseTotal>,
}

/// The report's totals, split by who made the loss.
///
/// ```
/// use mektpoy::agent::Attributor;
/// use mektpoy::{Meter, WireRequest, route_for};
/// let route = route_for("deepseek", "deepseek-flash");
/// let (mut meter, mut attributor) = (Meter::new(&route), Attributor::new());
/// let body = |system: &str| WireRequest::new(format!(r#"{{"system":"{system}","messages":[]}}"#), vec![]);
/// attributor.observe(&mut meter, None, &body("A"))?;
/// attributor.observe(&mut meter, None, &body("B"))?;
/// let report = attributor.report();
/// let total: u64 = report.causes.iter().map(|c| c.lost_tokens).sum();
/// assert_eq!(report.lost_by_caller() + report.lost_otherwise(), total);
/// # Ok::<(), mektpoy::meter::MeterError>(())
/// ```
impl AttributionReport {
    /// Σ estimated tokens lost to the caller's rewrites.
    ///
    /// ```
    /// use mektpoy::{AgentLoop, ContentBlock, Message, Session, route_for};
    /// let mut agent = AgentLoop::builder(Session::new("s"), route_for("deepseek", "deepseek-v4-pro"))
    ///     .option("max_tokens", 64.into())
    ///     .system_prompt("A")
    ///     .build()?;
    /// let wire = agent.user_turn([Message::user("u1", "hi")])?.to_wire()?;
    /// agent.observe(&wire)?;
    /// agent.append(agent.assistant("a1", [ContentBlock::text("ok")]))?;
    /// agent.set_system_prompt("B"); // the caller's choice
    /// let wire = agent.user_turn([Message::user("u2", "more")])?.to_wire()?;
    /// agent.observe(&wire)?;
    /// let report = agent.attribution_report();
    /// assert!(report.lost_by_caller() > 0);
    /// assert_eq!(report.lost_otherwise(), 0);
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
    pub fn lost_by_caller(&self) -> u64 {
        self.causes
            .iter()
            .filter(|c| c.cause.by_caller())
            .map(|c| c.lost_tokens)
            .sum()
    }

    /// Σ estimated tokens lost to the crate's rules and to unexplained departures.
    ///
    /// ```
    /// use mektpoy::agent::{Attributor, Cause};
    /// use mektpoy::{Meter, WireRequest, route_for};
    /// let route = route_for("deepseek", "deepseek-flash");
    /// let (mut meter, mut attributor) = (Meter::new(&route), Attributor::new());
    /// let body = |text: &str| WireRequest::new(format!(r#"{{"messages":[{{"role":"user","content":"{text}"}}]}}"#), vec![]);
    /// attributor.observe(&mut meter, None, &body("a"))?;
    /// attributor.observe(&mut meter, None, &body("b"))?; // bodies alone: nothing explains it
    /// assert_eq!(attributor.attributions()[1].cause, Some(Cause::Unexplained));
    /// let report = attributor.report();
    /// assert_eq!(report.lost_otherwise(), attributor.attributions()[1].lost_tokens);
    /// assert!(report.lost_otherwise() > 0 && report.lost_by_caller() == 0);
    /// # Ok::<(), mektpoy::meter::MeterError>(())
    /// ```
    pub fn lost_otherwise(&self) -> u64 {
        self.causes
            .iter()
            .filter(|c| !c.cause.by_caller())
            .map(|c| c.lost_tokens)
            .sum()
    }
}

impl fmt::Display for AttributionReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{} requests, {} extended the previous one",
            self.requests, self.extended
        )?;
        for c in &self.causes {
            writeln!(
                f,
                "  {}: {} request{}, ~{} tokens lost",
                c.cause,
                c.requests,
                if c.requests == 1 { "" } else { "s" },
                grouped(c.lost_tokens)
            )?;
        }
        write!(
            f,
            "  lost by the caller ~{} tokens, by the crate's rules or unexplained ~{} tokens",
            grouped(self.lost_by_caller()),
            grouped(self.lost_otherwise())
        )
    }
}
