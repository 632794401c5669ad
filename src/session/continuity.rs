//! What one request of a route owes to the previous request of the same route: whether it
//! rewrote the conversation (and so moves the route's thinking floor), and where the
//! automatic-caching lookback puts its breakpoint.
//!
//! The recorder serializes each Messages-API request inside its batch, so that a rewrite
//! before signed thinking blocks is recorded (a `thinking/floor` event) in the same all-or-
//! nothing write as the header that caused it: a resumed loop reads the floor from the log and
//! sends the same bytes as the loop that died. This is the one place where recording reaches
//! into projection and serialization.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::{Request, Transaction};
use crate::event::{Event, Rewrite, ThinkingEvent, ThinkingFloor};
use crate::history::FoldKind;
use crate::route::{Route, WireApi};
use crate::vocab::{ContentBlock, Message, Role, Seq};
use crate::wire::{Fingerprint, ThinkingPlan, WireContext, WireRequest, serialize_with};

/// A route as the thinking floor and the recorder's memory key it.
pub(crate) type RouteKey = (String, String);

pub(crate) fn key(route: &Route) -> RouteKey {
    (route.provider.to_string(), route.model.to_string())
}

/// The wire request a record call prepared for its step's route.
#[derive(Clone, Debug)]
pub(crate) struct Prepared {
    pub route: Route,
    pub wire: WireRequest,
}

/// What preparing a request decided, applied to the recorder only after the commit.
pub(crate) struct Continuity {
    pub prepared: Option<Prepared>,
    pub rewrite: Option<Rewrite>,
    pub fingerprint: Option<(RouteKey, Fingerprint)>,
}

/// Serializes `request` for `route` against the route's previous request (`remembered`, or,
/// for a recorder's first request of the route, the log as the batch found it), pushing a
/// `thinking/floor` event onto the batch when the request rewrites before signed thinking
/// blocks on a route that binds thinking.
pub(crate) fn prepare(
    tx: &mut Transaction<'_>,
    route: &Route,
    kind: FoldKind,
    request: &Request,
    remembered: Option<&Fingerprint>,
) -> Continuity {
    let none = Continuity {
        prepared: None,
        rewrite: None,
        fingerprint: None,
    };
    if route.api != WireApi::Messages {
        return none;
    }
    let key = key(route);
    let recalled;
    let (previous, unseen_replace) = match remembered {
        Some(fp) => (Some(fp), false),
        None => {
            recalled = previous_from_log(tx, route, kind);
            // A replace after the latest header (a compaction the dead process appended
            // before its next record) rewrote what the previous request sent.
            let before = &tx.before;
            let replaced = match (before.last_replace, &before.latest_header) {
                (Some(r), Some((h, _))) => r > *h,
                _ => false,
            };
            (recalled.as_ref(), replaced)
        }
    };
    let projected = request.project(route);
    let attempt = |tx: &Transaction<'_>, floor: Option<(Seq, Rewrite)>, blocks: Option<usize>| {
        serialize_for(tx, route, request, &projected, floor, blocks)
    };
    let floor = tx
        .state()
        .thinking_floors
        .get(&(Arc::from(key.0.as_str()), Arc::from(key.1.as_str())))
        .copied();
    let Ok(mut wire) = attempt(tx, floor, previous.map(|p| p.blocks)) else {
        return none;
    };
    let Some(mut fingerprint) = Fingerprint::of(&wire.body) else {
        return none;
    };
    let rewrite = match previous {
        _ if unseen_replace => Some(Rewrite::History { message: 0 }),
        Some(p) => fingerprint.rewrite_since(p),
        None => None,
    };
    if let Some(rewrite) = rewrite {
        let mut floor = floor;
        if route.binds_thinking() && holds_unfloored_thinking(tx, &request.messages, floor) {
            let seq = tx.next_seq();
            let event = Event::Thinking(Arc::new(ThinkingEvent::Floor(ThinkingFloor {
                provider: key.0.clone(),
                model: key.1.clone(),
                rewrite,
            })));
            // A log-only event with owned strings: the check cannot refuse it.
            if tx.push(event).is_ok() {
                floor = Some((seq, rewrite));
            }
        }
        // After a rewrite the previous request's last block is not in this one.
        match attempt(tx, floor, None) {
            Ok(w) => wire = w,
            Err(_) => return none,
        }
        fingerprint = match Fingerprint::of(&wire.body) {
            Some(f) => f,
            None => return none,
        };
    }
    Continuity {
        prepared: Some(Prepared {
            route: route.clone(),
            wire,
        }),
        rewrite,
        fingerprint: Some((key, fingerprint)),
    }
}

/// The request serialized with the route's floor (if any) and the lookback.
fn serialize_for(
    tx: &Transaction<'_>,
    route: &Route,
    request: &Request,
    projected: &crate::project::ProjectedToolUpdates<'_>,
    floor: Option<(Seq, Rewrite)>,
    previous_blocks: Option<usize>,
) -> Result<WireRequest, crate::wire::WireError> {
    let before_floor = floor
        .map(|(f, _)| ids_before(tx, &request.messages, f))
        .unwrap_or_default();
    let context = WireContext {
        previous_blocks,
        thinking: (route.binds_thinking() && floor.is_some()).then(|| ThinkingPlan {
            policy: tx.state().thinking_policy.unwrap_or_default(),
            before_floor: &before_floor,
            rewrite: floor.map_or(Rewrite::Tools, |(_, r)| r),
        }),
    };
    serialize_with(&request.config, projected, route, &context)
}

/// The previous request of the route as the log before this batch rebuilds it: the latest
/// header's configuration and tools with the surface as it stood (the previous request plus
/// the answers appended since).
fn previous_from_log(tx: &Transaction<'_>, route: &Route, kind: FoldKind) -> Option<Fingerprint> {
    let view = tx.view_before(kind);
    let (_, header) = view.header?;
    let previous = Request {
        config: header.header.config.clone(),
        messages: view.messages,
        tools: Arc::clone(&header.header.tools),
        tool_history: view.tool_history,
        header_seq: None,
        starts_series: false,
        series_start: None,
        by_value: kind == FoldKind::ByValue,
        rewrite: None,
        prepared: None,
    };
    let wire = serialize_with(
        &previous.config,
        &previous.project(route),
        route,
        &WireContext::default(),
    )
    .ok()?;
    Fingerprint::of(&wire.body)
}

/// Ids of the assistant messages of `messages` appended before `floor`.
fn ids_before(tx: &Transaction<'_>, messages: &[Message], floor: Seq) -> HashSet<String> {
    messages
        .iter()
        .filter(|m| m.role() == Role::Assistant)
        .filter(|m| {
            tx.state()
                .message_ids
                .get(m.id())
                .is_some_and(|seq| *seq < floor)
        })
        .map(|m| m.id().to_owned())
        .collect()
}

/// Whether an assistant message appended since the floor (or, without one, any) holds a
/// signed reasoning block or a `redacted_thinking` block: only then does a rewrite need a
/// new floor.
fn holds_unfloored_thinking(
    tx: &Transaction<'_>,
    messages: &[Message],
    floor: Option<(Seq, Rewrite)>,
) -> bool {
    messages
        .iter()
        .filter(|m| m.role() == Role::Assistant)
        .filter(|m| {
            let seq = tx.state().message_ids.get(m.id()).copied();
            floor.is_none_or(|(f, _)| seq.is_some_and(|s| s >= f))
        })
        .any(|m| m.content().iter().any(is_bound_thinking))
}

/// A block the provider checks against the conversation before it.
pub(crate) fn is_bound_thinking(block: &ContentBlock) -> bool {
    match block {
        ContentBlock::Reasoning { extra, .. } => extra
            .get("signature")
            .and_then(|s| s.as_str())
            .is_some_and(|s| !s.is_empty()),
        ContentBlock::Other(v) => {
            v.get("type").and_then(|t| t.as_str()) == Some("redacted_thinking")
        }
        _ => false,
    }
}

/// The recorder's memory of each route's previous request.
#[derive(Default)]
pub(crate) struct Memory(pub HashMap<RouteKey, Fingerprint>);
