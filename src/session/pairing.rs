//! Where the surface's tool calls and results are, for the pairing rules.

use std::ops::{Bound, RangeBounds};
use std::sync::Arc;

use super::SurfaceNode;
use crate::event::SurfaceOp;
use crate::vocab::{ContentBlock, Message, MessageSource, Role};

/// Where the surface's tool calls and results are, kept as the surface changes so that the pairing
/// rules ([reference §1](crate::manual::reference#1-vocabulary-and-json) items 17 and 18) cost
/// O(log n) per call or result they look at, never a walk of the surface.
///
/// Each surface node has a *key*, strictly increasing along the surface: an appended node
/// takes its event's `Seq` (larger than every key), and a replace's node takes the key of the
/// first node it replaces (between its neighbours'). So a range of positions is a range of
/// keys, and the keys of the nodes that stay never change.
#[derive(Clone, Default)]
pub(crate) struct Pairing {
    /// The key of each surface node, in surface order (parallel to `LogState::surface`).
    pub(super) keys: imbl::Vector<usize>,
    /// Each call id on the surface: the keys of the assistant messages holding it.
    pub(super) calls: imbl::HashMap<Arc<str>, Keys<()>>,
    /// Each call id results on the surface name: their keys and message ids.
    pub(super) results: imbl::HashMap<Arc<str>, Keys<Arc<str>>>,
    /// Each tool name called on the surface: the keys of the assistant messages holding a
    /// call of it, with the message (the registration guard reads it).
    pub(super) named: imbl::HashMap<Arc<str>, Keys<Message>>,
}

/// The keys of one call id's calls (or results), each with a value: almost always one, which
/// then costs no map of its own.
#[derive(Clone)]
pub(super) enum Keys<V: Clone> {
    One(usize, V),
    Many(imbl::OrdMap<usize, V>),
}

impl<V: Clone> Keys<V> {
    pub(super) fn insert(&mut self, key: usize, value: V) {
        match self {
            Keys::One(k, v) if *k == key => *v = value,
            Keys::One(k, v) => {
                let mut many = imbl::OrdMap::new();
                many.insert(*k, v.clone());
                many.insert(key, value);
                *self = Keys::Many(many);
            }
            Keys::Many(many) => {
                many.insert(key, value);
            }
        }
    }

    /// Removes `key`; whether no key is left.
    pub(super) fn remove(&mut self, key: usize) -> bool {
        match self {
            Keys::One(k, _) => *k == key,
            Keys::Many(many) => {
                many.remove(&key);
                many.is_empty()
            }
        }
    }

    /// The lowest key in `range`, with its value. O(log n).
    pub(super) fn first_in(&self, range: (Bound<usize>, Bound<usize>)) -> Option<(usize, &V)> {
        match self {
            Keys::One(k, v) => range.contains(k).then_some((*k, v)),
            Keys::Many(many) => many.range(range).next().map(|(k, v)| (*k, v)),
        }
    }
}

/// Keys below `key`.
pub(super) fn below(key: usize) -> (Bound<usize>, Bound<usize>) {
    (Bound::Unbounded, Bound::Excluded(key))
}

/// The call id a surface tool result names.
pub(super) fn result_call_id(message: &Message) -> Option<&str> {
    match (message.role(), message.source()) {
        (Role::Tool, MessageSource::Tool { call_id }) => Some(call_id),
        _ => None,
    }
}

/// The calls an assistant message holds (calls in other messages answer nothing: the
/// serializers refuse them): its tool calls, and the Responses API calls of tools that are
/// not functions it keeps verbatim ([decision 140](crate::manual::decisions#decision-140)).
pub(super) fn assistant_calls(message: &Message) -> impl Iterator<Item = &str> {
    (message.role() == Role::Assistant)
        .then(|| {
            message.tool_calls().map(|c| c.id()).chain(
                message
                    .content()
                    .iter()
                    .filter_map(ContentBlock::kept_call_id),
            )
        })
        .into_iter()
        .flatten()
}

/// The tool names an assistant message calls, as [`assistant_calls`] counts calls (a name
/// called twice in one message comes twice; recording it twice at one key is harmless).
pub(super) fn assistant_call_names(message: &Message) -> impl Iterator<Item = &str> {
    (message.role() == Role::Assistant)
        .then(|| message.tool_calls().map(|c| c.name()))
        .into_iter()
        .flatten()
}

impl Pairing {
    /// The assistant messages on the surface holding a call named `name`, in surface order.
    /// O(log n) to start, O(1) per message.
    pub(crate) fn calls_named(&self, name: &str) -> impl Iterator<Item = &Message> {
        let keys = self.named.get(name);
        let one = match keys {
            Some(Keys::One(_, m)) => Some(m),
            _ => None,
        };
        let many = match keys {
            Some(Keys::Many(many)) => Some(many.values()),
            _ => None,
        };
        one.into_iter().chain(many.into_iter().flatten())
    }

    /// Whether an assistant message holding `call_id` sits at a key below `limit` (anywhere
    /// on the surface for `None`). O(log n).
    pub(super) fn call_before(&self, call_id: &str, limit: Option<usize>) -> bool {
        let range = limit.map_or((Bound::Unbounded, Bound::Unbounded), below);
        self.calls
            .get(call_id)
            .is_some_and(|keys| keys.first_in(range).is_some())
    }

    /// The first tool call the replace of `start..=end` of `surface` by `node` would leave a
    /// result of on the surface without any call before it: (call id, result message id).
    /// O(1) per node the range removes and O(log n) per call among them, or, when it removes
    /// more than it keeps, O(1) per node after it and O(log n) per result among them.
    pub(super) fn orphaned_by_replace(
        &self,
        surface: &imbl::Vector<SurfaceNode>,
        start: usize,
        end: usize,
        node: Option<&Message>,
    ) -> Option<(String, String)> {
        let (Some(&first), Some(&last)) = (self.keys.get(start), self.keys.get(end)) else {
            return None;
        };
        let len = surface.len().min(self.keys.len());
        let range = start..(end + 1).min(len);
        if range.is_empty() {
            // `Focus::narrow` panics on an empty range; a checked replace is never empty.
            return None;
        }
        let put_back =
            |call_id: &str| node.is_some_and(|n| assistant_calls(n).any(|c| c == call_id));
        // Whether a call of `call_id` stays before the result at `result`.
        let kept = |call_id: &str, result: usize| {
            self.calls.get(call_id).is_some_and(|keys| {
                keys.first_in(below(first)).is_some()
                    || keys
                        .first_in((Bound::Excluded(last), Bound::Excluded(result)))
                        .is_some()
            })
        };
        if range.len() > len - range.len() {
            // A compaction that removes most of the surface: walk the results after it.
            let after = (range.end < len).then(|| {
                surface
                    .focus()
                    .narrow(range.end..len)
                    .into_iter()
                    .zip(self.keys.focus().narrow(range.end..len))
            });
            for (node_after, &result) in after.into_iter().flatten() {
                let SurfaceNode::Message(message) = node_after else {
                    continue;
                };
                let Some(call_id) = result_call_id(message) else {
                    continue;
                };
                let removed = self.calls.get(call_id).is_some_and(|keys| {
                    keys.first_in((Bound::Included(first), Bound::Included(last)))
                        .is_some()
                });
                if removed && !put_back(call_id) && !kept(call_id, result) {
                    return Some((call_id.to_owned(), message.id().to_owned()));
                }
            }
            return None;
        }
        for removed in surface.focus().narrow(range) {
            let SurfaceNode::Message(message) = removed else {
                continue;
            };
            for call_id in assistant_calls(message) {
                // The first result of the call after the range: a later one has at least
                // the calls this one has before it.
                let Some((result, result_id)) = self
                    .results
                    .get(call_id)
                    .and_then(|r| r.first_in((Bound::Excluded(last), Bound::Unbounded)))
                else {
                    continue;
                };
                if !put_back(call_id) && !kept(call_id, result) {
                    return Some((call_id.to_owned(), result_id.to_string()));
                }
            }
        }
        None
    }

    /// Records `node`, placed by `op` on `surface` (as it was before the change), `seq` being
    /// its event's. O(log n) per call or result it adds; a replace also walks the nodes it
    /// removes (O(1) each, O(log n) per call or result among them), or, when it removes more
    /// than it keeps, the nodes it keeps, rebuilding the index from them.
    pub(super) fn apply(
        &mut self,
        surface: &imbl::Vector<SurfaceNode>,
        seq: usize,
        op: SurfaceOp,
        node: &SurfaceNode,
    ) {
        let key = match op {
            SurfaceOp::Append => {
                self.keys.push_back(seq);
                seq
            }
            SurfaceOp::Replace { start, end } => {
                let key = self.keys.get(start).copied().unwrap_or(seq);
                let len = surface.len().min(self.keys.len());
                let range = start..(end + 1).min(len);
                let all_keys = self.keys.clone(); // O(1): the loops below borrow `self`
                let nodes = |r: std::ops::Range<usize>| {
                    (!r.is_empty())
                        .then(|| {
                            surface
                                .focus()
                                .narrow(r.clone())
                                .into_iter()
                                .zip(all_keys.focus().narrow(r))
                        })
                        .into_iter()
                        .flatten()
                };
                if range.len() <= len - range.len() {
                    for (removed, key) in nodes(range.clone()) {
                        if let SurfaceNode::Message(message) = removed {
                            self.forget(message, *key);
                        }
                    }
                } else {
                    // A compaction that removes most of the surface: rebuilding from the nodes
                    // that stay costs less than forgetting the removed ones one by one.
                    self.calls = imbl::HashMap::new();
                    self.results = imbl::HashMap::new();
                    self.named = imbl::HashMap::new();
                    for (kept, key) in nodes(0..range.start).chain(nodes(range.end..len)) {
                        if let SurfaceNode::Message(message) = kept {
                            self.record(message, *key);
                        }
                    }
                }
                let tail = self.keys.split_off((end + 1).min(self.keys.len()));
                self.keys.truncate(start.min(self.keys.len()));
                self.keys.push_back(key);
                self.keys.append(tail);
                key
            }
        };
        if let SurfaceNode::Message(message) = node {
            self.record(message, key);
        }
    }

    /// Records the calls and the result of `message`, the node at `key`.
    pub(super) fn record(&mut self, message: &Message, key: usize) {
        if let Some(call_id) = result_call_id(message) {
            let id: Arc<str> = Arc::from(message.id());
            match self.results.get_mut(call_id) {
                Some(keys) => keys.insert(key, id),
                None => {
                    self.results.insert(Arc::from(call_id), Keys::One(key, id));
                }
            }
        }
        for call_id in assistant_calls(message) {
            match self.calls.get_mut(call_id) {
                Some(keys) => keys.insert(key, ()),
                None => {
                    self.calls.insert(Arc::from(call_id), Keys::One(key, ()));
                }
            }
        }
        for name in assistant_call_names(message) {
            match self.named.get_mut(name) {
                Some(keys) => keys.insert(key, message.clone()),
                None => {
                    self.named
                        .insert(Arc::from(name), Keys::One(key, message.clone()));
                }
            }
        }
    }

    /// Forgets the calls and the result of `message`, the node at `key`.
    pub(super) fn forget(&mut self, message: &Message, key: usize) {
        for call_id in assistant_calls(message) {
            if self.calls.get_mut(call_id).is_some_and(|k| k.remove(key)) {
                self.calls.remove(call_id);
            }
        }
        for name in assistant_call_names(message) {
            if self.named.get_mut(name).is_some_and(|k| k.remove(key)) {
                self.named.remove(name);
            }
        }
        if let Some(call_id) = result_call_id(message)
            && self.results.get_mut(call_id).is_some_and(|k| k.remove(key))
        {
            self.results.remove(call_id);
        }
    }
}
