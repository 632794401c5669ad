//! What one request of a route owes to the previous request of the same route: whether it
//! rewrote the conversation (and so moves the route's thinking floor), and where the
//! automatic-caching lookback puts its breakpoint.
//!
//! The recorder serializes each Messages-API request inside its batch, so that a rewrite before
//! signed thinking blocks is recorded (a `thinking/floor` event) in the same all-or- nothing write
//! as the header that caused it: a resumed loop reads the floor from the log and sends the same
//! bytes as the loop that died. It serializes each OpenAI-compatible chat request there too, for
//! the one thing a chat request owes to the previous one: the wire messages it kept ([decision
//! 81](crate::manual::decisions#decision-81)). This is the one place where recording reaches into
//! projection and serialization.

use std::collections::HashSet;
use std::sync::Arc;

use super::{Request, project_for};
use crate::event::{Event, Rewrite, ThinkingEvent, ThinkingFloor, ThinkingPolicy};
use crate::history::FoldKind;
use crate::route::{Route, WireApi};
use crate::session::Transaction;
use crate::vocab::{Messages, Role, Seq};
use crate::wire::{
    Fingerprint, Resume, ThinkingPlan, WireContext, WireRequest, is_bound_thinking,
    serialize_resuming, serialize_with,
};

/// A route as the thinking floor and the recorder's memory key it.
pub(crate) type RouteKey = (String, String);

pub(crate) fn key(route: &Route) -> RouteKey {
    (route.provider.to_string(), route.model.to_string())
}

/// The wire request a record call prepared for its step's route, or, when the serializer
/// refused it, the context to refuse it again with the same typed error.
pub(crate) type Prepared = Result<WireRequest, Replay>;

/// What `serialize_with` was given for the step's route.
#[derive(Clone, Debug)]
pub(crate) struct Replay {
    previous_blocks: Option<usize>,
    thinking: Option<(ThinkingPolicy, Arc<HashSet<String>>, Rewrite)>,
    /// The floor's log position: names the messages of `thinking`'s set.
    floor: Option<Seq>,
}

impl Replay {
    pub fn context(&self) -> WireContext<'_> {
        WireContext {
            previous_blocks: self.previous_blocks,
            thinking: self
                .thinking
                .as_ref()
                .map(|(policy, before_floor, rewrite)| ThinkingPlan {
                    policy: *policy,
                    before_floor,
                    rewrite: *rewrite,
                }),
            floor_key: self.floor.map(|s| s.0),
            ..WireContext::default()
        }
    }
}

/// What preparing a request decided, applied to the recorder only after the commit.
pub(crate) struct Continuity {
    pub prepared: Option<Prepared>,
    pub rewrite: Option<Rewrite>,
    pub fingerprint: Option<Remembered>,
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
    resume: Option<Resume>,
    floor_ids: Option<FloorIds>,
) -> Continuity {
    let none = Continuity {
        prepared: None,
        rewrite: None,
        fingerprint: None,
    };
    if matches!(route.api, WireApi::OpenAiChat | WireApi::Responses) {
        return prepare_chat(route, request, resume);
    }
    let key = key(route);
    let recalled;
    let previous = match remembered {
        Some(fp) => Some(fp),
        None => {
            recalled = previous_from_log(tx, route, kind, &request.config);
            recalled.as_ref()
        }
    };
    let projected = request.project();
    let floor = tx.state().thinking_floor(&key.0, &key.1);
    let mut floor_ids = floor_ids;
    let replay = replay(
        tx,
        route,
        request,
        floor,
        previous.map(|p| p.blocks),
        &mut floor_ids,
    );
    let (first, mut resume, resumed) = serialize_resuming(
        &request.config,
        &projected,
        route,
        &replay.context(),
        resume,
    );
    let mut wire = match first {
        Ok(wire) => wire,
        // Refused as it stands: `to_wire` refuses it again; the previous request stays the
        // one the route last sent.
        Err(_) => {
            return Continuity {
                prepared: Some(Err(replay)),
                ..none
            };
        }
    };
    let split = resume.as_ref().map_or(0, Resume::turns);
    let shared = previous.zip(resumed);
    let Some(mut fingerprint) = Fingerprint::of_request(&wire, shared, split) else {
        return none;
    };
    let rewrite = previous.and_then(|p| fingerprint.rewrite_since(p));
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
        let replay = self::replay(tx, route, request, floor, None, &mut floor_ids);
        // A rewrite is not an extension: the pass starts from the first message.
        let (again, next, _) =
            serialize_resuming(&request.config, &projected, route, &replay.context(), None);
        resume = next;
        match again {
            Ok(w) => wire = w,
            Err(_) => {
                return Continuity {
                    prepared: Some(Err(replay)),
                    rewrite: Some(rewrite),
                    fingerprint: None,
                };
            }
        }
        let split = resume.as_ref().map_or(0, Resume::turns);
        fingerprint = match Fingerprint::of_request(&wire, None, split) {
            Some(f) => f,
            None => return none,
        };
    }
    Continuity {
        prepared: Some(Ok(wire)),
        rewrite,
        fingerprint: Some(Remembered {
            fingerprint: Some(fingerprint),
            resume,
            floor_ids,
        }),
    }
}

/// [`prepare`] on an OpenAI-compatible chat route: only the serialization, resumed from the
/// route's previous request. Nothing there depends on that request but which wire messages
/// are written again (no thinking floor, no lookback), so there is no rewrite detection.
fn prepare_chat(route: &Route, request: &Request, resume: Option<Resume>) -> Continuity {
    let projected = request.project();
    let context = WireContext {
        prompt_cache_key: request.prompt_cache_key(),
        ..WireContext::default()
    };
    let (wire, next, _) = serialize_resuming(&request.config, &projected, route, &context, resume);
    match wire {
        Ok(wire) => Continuity {
            prepared: Some(Ok(wire)),
            rewrite: None,
            fingerprint: Some(Remembered {
                fingerprint: None,
                resume: next,
                floor_ids: None,
            }),
        },
        // Refused as it stands: `to_wire` refuses it again.
        Err(_) => Continuity {
            prepared: Some(Err(Replay {
                previous_blocks: None,
                thinking: None,
                floor: None,
            })),
            rewrite: None,
            fingerprint: None,
        },
    }
}

/// The context of the request: the lookback and, on a route that binds thinking, the floor.
fn replay(
    tx: &Transaction<'_>,
    route: &Route,
    request: &Request,
    floor: Option<(Seq, Rewrite)>,
    previous_blocks: Option<usize>,
    floor_ids: &mut Option<FloorIds>,
) -> Replay {
    Replay {
        floor: floor.filter(|_| route.binds_thinking()).map(|(f, _)| f),
        previous_blocks,
        thinking: floor
            .filter(|_| route.binds_thinking())
            .map(|(f, rewrite)| {
                (
                    tx.state().thinking_policy().unwrap_or_default(),
                    floor_ids_for(tx, &request.messages, f, floor_ids),
                    rewrite,
                )
            }),
    }
}

/// The assistant messages appended before a floor, by the floor's log position: computed once
/// per floor (O(messages)), then shared by every request of the route until the floor moves.
/// Messages appended later are after the floor, and ids are unique in a session, so the set
/// of a floor never changes; a message a compaction removed since stays in it, unread.
pub(crate) type FloorIds = (Seq, Arc<HashSet<String>>);

fn floor_ids_for(
    tx: &Transaction<'_>,
    messages: &Messages,
    floor: Seq,
    cache: &mut Option<FloorIds>,
) -> Arc<HashSet<String>> {
    let ids = match cache {
        Some((f, ids)) if *f == floor => Arc::clone(ids),
        _ => {
            let ids = Arc::new(ids_before(tx, messages, floor));
            *cache = Some((floor, Arc::clone(&ids)));
            ids
        }
    };
    // Every debug build checks the kept set against the messages it reads.
    #[cfg(debug_assertions)]
    {
        let fresh = ids_before(tx, messages, floor);
        debug_assert!(fresh.is_subset(&ids), "a floor's kept set lacks a message");
        debug_assert!(
            messages
                .iter()
                .filter(|m| ids.contains(m.id()))
                .all(|m| fresh.contains(m.id())),
            "a floor's kept set holds a later message"
        );
    }
    ids
}

/// The previous request of the route as the log before this batch rebuilds it: the log as it
/// stood right before the latest answer of this configuration's provider and model (the last
/// request the provider accepted, as the loop's memory would hold it: a request left without
/// an answer is dropped by the retry), else, before any answer, right after the batch of the
/// latest header for them. So neither the answers appended since (the lookback counts from
/// that request's last block), nor an older request that logged the latest header (headers
/// are logged on changes only), nor another loop's later header (a log two routes share) is
/// taken for it.
fn previous_from_log(
    tx: &Transaction<'_>,
    route: &Route,
    kind: FoldKind,
    config: &crate::event::Config,
) -> Option<Fingerprint> {
    let key = key(route);
    let at = (key.0.as_str(), key.1.as_str());
    let (view, floor) = tx
        .view_before_answer(&config.provider, &config.model, at, kind)
        .or_else(|| tx.view_after_header(&config.provider, &config.model, at, kind))?;
    let (_, header) = view.header?;
    let projected = project_for(
        route,
        &view.messages,
        &header.header.tools,
        &view.tool_history,
        kind == FoldKind::ByValue,
    );
    // The thinking floor that request was serialized under: the blocks it left out are not
    // a difference (it left them out too).
    let floor = floor.filter(|_| route.binds_thinking());
    let before_floor = floor.map(|(f, _)| ids_before(tx, &view.messages, f));
    let context = WireContext {
        thinking: floor
            .zip(before_floor.as_ref())
            .map(|((_, rewrite), before_floor)| ThinkingPlan {
                policy: tx.state().thinking_policy().unwrap_or_default(),
                before_floor,
                rewrite,
            }),
        floor_key: floor.map(|(f, _)| f.0),
        ..WireContext::default()
    };
    let wire = serialize_with(&header.header.config, &projected, route, &context).ok()?;
    Fingerprint::of_request(&wire, None, 0)
}

/// Ids of the assistant messages of `messages` appended before `floor`.
fn ids_before(tx: &Transaction<'_>, messages: &Messages, floor: Seq) -> HashSet<String> {
    messages
        .iter()
        .filter(|m| m.role() == Role::Assistant)
        .filter(|m| tx.state().seq_of(m.id()).is_some_and(|seq| seq < floor))
        .map(|m| m.id().to_owned())
        .collect()
}

/// Whether an assistant message appended since the floor (or, without one, any) holds a
/// signed reasoning block or a `redacted_thinking` block: only then does a rewrite need a
/// new floor.
fn holds_unfloored_thinking(
    tx: &Transaction<'_>,
    messages: &Messages,
    floor: Option<(Seq, Rewrite)>,
) -> bool {
    messages
        .iter()
        .filter(|m| m.role() == Role::Assistant)
        .filter(|m| {
            let seq = tx.state().seq_of(m.id());
            floor.is_none_or(|(f, _)| seq.is_some_and(|s| s >= f))
        })
        .any(|m| m.content().iter().any(is_bound_thinking))
}

/// The recorder's memory of each route's previous request, keyed by the route itself (two
/// routes of one provider and model, say a catalog entry and its by-reference variant, send
/// different bytes).
///
/// A request the recorder prepared is *pending* until the loop moves on: the next attempt 0
/// of the route (a new step or turn) means the provider accepted it, and it becomes the
/// route's *accepted* previous request; a retry means it failed, and it is dropped. So a
/// retry is serialized against the last request the provider accepted (its lookback
/// breakpoint kept, its bytes the failed attempt's), and a refused attempt is never what
/// rewrite detection compares with.
#[derive(Default)]
pub(crate) struct Memory {
    accepted: Vec<(Route, Remembered)>,
    pending: Vec<(Route, Remembered)>,
}

impl Memory {
    /// The route's previous request for an attempt: `attempt` 0 accepts the pending one
    /// first, a retry drops it.
    pub fn previous(&mut self, route: &Route, attempt: u32) -> Option<&mut Remembered> {
        if let Some(i) = self.pending.iter().position(|(r, _)| r == route) {
            let (route, remembered) = self.pending.swap_remove(i);
            if attempt == 0 {
                self.remember(route, remembered);
            }
        }
        self.accepted
            .iter_mut()
            .find(|(r, _)| r == route)
            .map(|(_, m)| m)
    }

    /// What the recorder prepared for `route`, pending until the loop moves on.
    pub fn prepared(&mut self, route: Route, remembered: Remembered) {
        self.pending.retain(|(r, _)| *r != route);
        self.pending.push((route, remembered));
    }

    fn remember(&mut self, route: Route, remembered: Remembered) {
        match self.accepted.iter_mut().find(|(r, _)| *r == route) {
            Some((_, m)) => *m = remembered,
            None => self.accepted.push((route, remembered)),
        }
    }

    /// The route's accepted previous request (for tests).
    #[cfg(test)]
    pub fn accepted(&self, route: &Route) -> Option<&Remembered> {
        self.accepted
            .iter()
            .find(|(r, _)| r == route)
            .map(|(_, m)| m)
    }

    /// The route's latest prepared request, pending or accepted (for tests).
    #[cfg(test)]
    pub fn latest(&self, route: &Route) -> Option<&Remembered> {
        self.pending
            .iter()
            .chain(&self.accepted)
            .find(|(r, _)| r == route)
            .map(|(_, m)| m)
    }
}

/// What the recorder keeps of a route's previous request: what rewrite detection compares
/// (Messages-API routes; `None` on chat routes, which have none), and what the serializer
/// resumes from (taken out for the next request's batch).
pub(crate) struct Remembered {
    pub fingerprint: Option<Fingerprint>,
    pub resume: Option<Resume>,
    /// The assistant messages before the route's floor, kept with the floor they belong to.
    pub floor_ids: Option<FloorIds>,
}
