//! Reasoning sent back on the Messages API: which blocks the provider can verify, and the
//! session's thinking policy for blocks produced before a rewrite.
//!
//! **Verifiable reasoning.** A `thinking` block goes back to the provider only when it carries a
//! non-empty string `signature` and its message was produced by this route's provider
//! (`source: {"kind":"model","provider": <route provider>}`): any other reasoning (unsigned,
//! decoded from another vendor, written by hand) is left out and counted in
//! [`WireReport::unverifiable_reasoning_left_out`](super::WireReport). The same provenance rule
//! applies to `redacted_thinking` blocks, which are otherwise sent back verbatim.
//!
//! **Thinking policy.** On routes that bind thinking to the conversation
//! ([`Route::binds_thinking`]), the provider checks each thinking block it gets back against
//! everything before it; after a rewrite (changed `tools`, changed `system`, an earlier turn
//! changed) the blocks produced before it fail that check, and a block left out once may never
//! come back. The caller passes the ids of the messages appended before the latest rewrite (the
//! *floor*) in a [`ThinkingPlan`]; every signed thinking block and every `redacted_thinking`
//! block of those assistant messages is subject to the session's [`ThinkingPolicy`]:
//! - `StripThinking` leaves them out (the last assistant message included) and counts them;
//! - `DropBlock` sends them and asks the provider to drop the failing ones
//!   (`thinking.block_binding.prefix_mismatch_behavior: "drop_block"` plus the
//!   [`THINKING_BINDING_BETA`] beta). The provider then drops the failing block *and every
//!   thinking block after it*, so while a pre-floor block stays in the history no newer thinking
//!   survives either: that is why `StripThinking` is the default;
//! - `Refuse` refuses the request, naming what the rewrite changed.
//!
//! A request holding none of those blocks is sent exactly as without a plan, under every policy.
//! A plan passed for a route that does not bind thinking is ignored.

use indexmap::IndexMap;
use serde_json::{Map, Value};

use super::{MessageFault, ThinkingPlan, ThinkingPolicy, WireError};
use crate::event::Config;
use crate::route::Route;
use crate::vocab::{ContentBlock, Message, MessageSource, OtherBlock};

/// The beta that lets a request set `thinking.block_binding`.
pub(super) const THINKING_BINDING_BETA: &str = "thinking-binding-controls-2026-08-01";

/// The `type` of the provider's encrypted reasoning block, kept in the log as `Other`.
const REDACTED_THINKING: &str = "redacted_thinking";

/// The object of a `redacted_thinking` block, if `block` is one.
pub(super) fn redacted_thinking(block: &OtherBlock) -> Option<&Map<String, Value>> {
    (block.type_name() == REDACTED_THINKING).then(|| block.fields())
}

/// Whether a reasoning block's fields hold a non-empty string `signature`.
pub(super) fn is_signed(extra: &IndexMap<String, Value>) -> bool {
    extra
        .get("signature")
        .and_then(Value::as_str)
        .is_some_and(|s| !s.is_empty())
}

/// Whether the provider checks `block` against the conversation before it: a signed reasoning
/// block or a `redacted_thinking` block. The recorder asks it too, to decide whether a rewrite
/// needs a new thinking floor.
pub(crate) fn is_bound_thinking(block: &ContentBlock) -> bool {
    match block {
        ContentBlock::Reasoning { extra, .. } => is_signed(extra),
        ContentBlock::Other(v) => redacted_thinking(v).is_some(),
        _ => false,
    }
}

/// Whether `message` was produced by a model of `provider`, the only one that can verify its
/// signed reasoning, and, when `model` is given (a route that binds thinking), by that model's
/// family: a signature another model produced was bound to another conversation's bytes (a
/// replay on another route, a loop that switched models), and leaving it out costs no cache,
/// which is the model's own ([decision 102](crate::manual::decisions#decision-102)).
pub(super) fn from_provider(message: &Message, provider: &str, model: Option<&str>) -> bool {
    matches!(message.source(), MessageSource::Model { provider: p, model: m }
        if p == provider && model.is_none_or(|model| same_family(m, model)))
}

/// Whether two model ids name the same model, a snapshot date aside (`-YYYYMMDD`, `@YYYYMMDD`).
fn same_family(a: &str, b: &str) -> bool {
    crate::route::undated(a).unwrap_or(a) == crate::route::undated(b).unwrap_or(b)
}

/// What happens to one verifiable thinking block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Verdict {
    /// Sent as it is.
    Send,
    /// Sent, and the request needs `block_binding: drop_block` (the `DropBlock` policy).
    SendBound,
    /// Left out by the `StripThinking` policy.
    Strip,
}

/// The thinking policy of one request: `None` when no plan applies.
#[derive(Clone, Copy)]
pub(super) struct Binding<'p> {
    plan: Option<&'p ThinkingPlan<'p>>,
}

impl<'p> Binding<'p> {
    /// The policy for `route`: a plan counts only on routes that bind thinking.
    pub(super) fn new(plan: Option<&'p ThinkingPlan<'p>>, route: &Route) -> Self {
        Binding {
            plan: plan.filter(|_| route.binds_thinking()),
        }
    }

    /// The policy, when a plan applies.
    pub(super) fn policy(&self) -> Option<ThinkingPolicy> {
        self.plan.map(|p| p.policy)
    }

    /// Whether `message` was appended before the floor, so its thinking is subject to the
    /// policy.
    pub(super) fn binds(&self, message: &Message) -> bool {
        self.plan
            .is_some_and(|p| p.before_floor.contains(message.id()))
    }

    /// The verdict for verifiable thinking block `index` of `message`.
    ///
    /// # Errors
    /// [`MessageFault::ThinkingRewrite`] under [`ThinkingPolicy::Refuse`] for a pre-floor block.
    pub(super) fn verdict(&self, message: &Message, index: usize) -> Result<Verdict, WireError> {
        let Some(plan) = self.plan.filter(|_| self.binds(message)) else {
            return Ok(Verdict::Send);
        };
        match plan.policy {
            ThinkingPolicy::StripThinking => Ok(Verdict::Strip),
            ThinkingPolicy::DropBlock => Ok(Verdict::SendBound),
            ThinkingPolicy::Refuse => Err(WireError::message(
                message.id().to_owned(),
                MessageFault::ThinkingRewrite {
                    index,
                    rewrite: plan.rewrite,
                },
            )),
        }
    }
}

/// The config's `thinking` with `block_binding.prefix_mismatch_behavior: "drop_block"` added,
/// its `type` and every other field kept; `{"type":"adaptive","block_binding":…}` when the
/// config has none (`adaptive` is the type every binding model accepts).
///
/// # Errors
/// [`WireError::DropBlockThinkingType`] when the config's `thinking` is not an object whose
/// `type` is `adaptive` or `enabled` (the provider accepts `block_binding` with no other).
pub(super) fn drop_block_thinking(config: &Config) -> Result<Value, WireError> {
    let mut thinking = match config.extra.get("thinking") {
        None => {
            let mut m = Map::new();
            m.insert("type".to_owned(), Value::from("adaptive"));
            m
        }
        Some(Value::Object(m)) => match m.get("type") {
            Some(Value::String(t)) if t == "adaptive" || t == "enabled" => m.clone(),
            Some(Value::String(t)) => {
                return Err(WireError::DropBlockThinkingType {
                    found: format!("`{t}`"),
                });
            }
            Some(other) => {
                return Err(WireError::DropBlockThinkingType {
                    found: format!("the non-string {other}"),
                });
            }
            None => {
                return Err(WireError::DropBlockThinkingType {
                    found: "missing".to_owned(),
                });
            }
        },
        Some(other) => {
            return Err(WireError::DropBlockThinkingType {
                found: format!("missing (`thinking` is {other}, not an object)"),
            });
        }
    };
    let binding = thinking
        .entry("block_binding")
        .or_insert_with(|| Value::Object(Map::new()));
    if !binding.is_object() {
        *binding = Value::Object(Map::new());
    }
    if let Value::Object(b) = binding {
        b.insert(
            "prefix_mismatch_behavior".to_owned(),
            Value::from("drop_block"),
        );
    }
    Ok(Value::Object(thinking))
}
