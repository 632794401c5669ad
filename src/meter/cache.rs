//! The provider's cache as the meter models it, per vendor ([decisions
//! 90–92](crate::manual::decisions#decision-90)): where a request writes entries, which earlier
//! entry it reads, and in what unit.
//!
//! Entries are prefixes of the meter's cut (its bytes, markers left out), kept as
//! `(length, hash)` pairs: a request's running hash, checkpointed at the offsets its rule can
//! read at, finds each candidate in one pass over its bytes (over its new bytes only on the
//! resumed path, which continues the previous cut's hash). A 64-bit hash may in principle
//! collide; the meter then credits a read the provider would not make, a risk far below the
//! estimate's own error (tokens are ⌈bytes / 4⌉).

use std::collections::BTreeSet;

use crate::route::{DEEPSEEK_CACHE_BLOCK_TOKENS, Route, WireApi};
use crate::wire::LOOKBACK_BLOCKS;

/// OpenAI's chat completions and Responses API cache prompts from this many tokens on, in
/// increments of [`OPENAI_CACHE_UNIT_TOKENS`] (the vendor's prompt-caching guide, read
/// 2026-12-02 through its "Prompt Caching 201" cookbook, which quotes it: "works automatically
/// for prompts containing 1024 tokens or more, with cache hits occurring in increments of 128
/// tokens"; the catalog's OpenAI entries cite the guide itself).
pub(crate) const OPENAI_CACHE_MIN_TOKENS: u32 = crate::route::OPENAI_MIN_CACHE_TOKENS;

/// OpenAI's cache hits come in increments of this many tokens.
const OPENAI_CACHE_UNIT_TOKENS: u32 = crate::route::OPENAI_CACHE_BLOCK_TOKENS;

/// The meter's bytes per token, as everywhere in the meter (tokens are ⌈bytes / 4⌉).
const BYTES_PER_TOKEN: usize = 4;

/// The end of one content block in a cut, and whether the request marks it with an explicit
/// `cache_control` (a breakpoint).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Bound {
    /// The cut offset just past the block: an entry there is the prefix up to it, the same
    /// whether its message ends there or goes on with more blocks.
    pub key: usize,
    /// What a read there credits: `key`, or for a message's last block its message's end
    /// (the closing bytes are shared too when a later request appends messages).
    pub end: usize,
    pub mark: bool,
}

/// One step of 64-bit FNV-1a: stable across builds, so saved entries match later requests.
fn feed(mut h: u64, bytes: &[u8]) -> u64 {
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

const FNV_START: u64 = 0xcbf2_9ce4_8422_2325;

/// The hashes of a cut's prefixes at the offsets its rule reads at, and of the whole cut:
/// what the next request, when it extends this one, continues from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Prints {
    points: Vec<(usize, u64)>,
    len: usize,
    end: u64,
}

impl Prints {
    /// Over `bytes`, at `offsets` (ascending, none past the end).
    pub fn of(bytes: &[u8], offsets: &[usize]) -> Prints {
        Prints {
            points: Vec::new(),
            len: 0,
            end: FNV_START,
        }
        .extended(bytes, offsets)
    }

    /// These prints, for a cut that goes on with `more` after this one's bytes, with points at
    /// `offsets` (ascending, each past this cut's end and within the longer one).
    pub fn extended(mut self, more: &[u8], offsets: &[usize]) -> Prints {
        let base = self.len;
        let (mut at, mut h) = (0, self.end);
        for &o in offsets {
            let Some(piece) = o
                .checked_sub(base)
                .filter(|&rel| rel > 0)
                .and_then(|rel| more.get(at..rel))
            else {
                continue;
            };
            h = feed(h, piece);
            at += piece.len();
            self.points.push((o, h));
        }
        self.end = feed(h, more.get(at..).unwrap_or_default());
        self.len = base + more.len();
        self
    }

    /// The hash of the prefix ending at `offset`, when it is a point.
    fn at(&self, offset: usize) -> Option<u64> {
        let i = self.points.partition_point(|p| p.0 < offset);
        self.points.get(i).filter(|p| p.0 == offset).map(|p| p.1)
    }

    pub fn len(&self) -> usize {
        self.len
    }
}

/// Which entries a vendor keeps and reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Rule {
    /// Anthropic: an entry at each breakpoint (a block with `cache_control`; with top-level
    /// automatic caching, the last block); a request reads the longest entry that ends at a
    /// block at or within the [`LOOKBACK_BLOCKS`] blocks ending at one of its breakpoints.
    Breakpoints,
    /// DeepSeek and OpenAI chat: every prefix of every earlier prompt, read in whole units.
    Units { unit_bytes: usize },
    /// A vendor whose cache is not documented: the common prefix with the previous request,
    /// to the byte (the meter's first rule).
    Previous,
}

/// The entries a route's provider holds, as far as the meter can tell.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Cache {
    rule: Rule,
    min_tokens: u32,
    entries: BTreeSet<(u64, u64)>,
    /// Whether the previous request is still an entry (the `Previous` rule).
    previous_alive: bool,
    /// Whether the entries were dropped since the last write.
    forgotten: bool,
}

impl Cache {
    /// The rule of `route`'s vendor: Messages routes of provider `anthropic`, and routes that
    /// cache only when asked, get breakpoints; provider `deepseek` its 64-token units; OpenAI
    /// chat and Responses routes 128-token units from 1,024 tokens; anything else the previous
    /// request.
    pub fn for_route(route: &Route) -> Cache {
        let units = |tokens: u32| Rule::Units {
            unit_bytes: (tokens as usize).max(1) * BYTES_PER_TOKEN,
        };
        let (rule, min_tokens) = if route.auto_cache()
            || (route.provider == "anthropic" && route.api == WireApi::Messages)
        {
            (Rule::Breakpoints, route.min_cache_tokens())
        } else if route.provider == "deepseek" {
            (units(DEEPSEEK_CACHE_BLOCK_TOKENS), route.min_cache_tokens())
        } else if matches!(route.api, WireApi::OpenAiChat | WireApi::Responses) {
            (
                units(OPENAI_CACHE_UNIT_TOKENS),
                route.min_cache_tokens().max(OPENAI_CACHE_MIN_TOKENS),
            )
        } else {
            (Rule::Previous, route.min_cache_tokens())
        };
        Cache {
            rule,
            min_tokens,
            entries: BTreeSet::new(),
            previous_alive: true,
            forgotten: false,
        }
    }

    /// The minimum cacheable length, in tokens.
    pub fn min_tokens(&self) -> u32 {
        self.min_tokens
    }

    /// `n` bytes when they reach the minimum cacheable length, else 0.
    fn long_enough(&self, n: u64) -> u64 {
        if n.div_ceil(BYTES_PER_TOKEN as u64) >= u64::from(self.min_tokens) {
            n
        } else {
            0
        }
    }

    /// The offsets past `from`, up to `len`, whose prefix hashes the rule reads or writes.
    pub fn offsets(&self, from: usize, len: usize, bounds: &[Bound]) -> Vec<usize> {
        match self.rule {
            Rule::Breakpoints => bounds
                .iter()
                .map(|b| b.key)
                .filter(|&e| e > from && e <= len)
                .collect(),
            Rule::Units { unit_bytes } => (from / unit_bytes + 1..=len / unit_bytes)
                .map(|k| k * unit_bytes)
                .collect(),
            Rule::Previous => Vec::new(),
        }
    }

    /// The indices of `bounds` that are breakpoints.
    fn breakpoints(bounds: &[Bound], top_level: bool) -> impl Iterator<Item = usize> + '_ {
        let last = bounds.len().checked_sub(1).filter(|_| top_level);
        bounds
            .iter()
            .enumerate()
            .filter(move |(i, b)| b.mark || Some(*i) == last)
            .map(|(i, _)| i)
    }

    /// The bytes a request reads: `prints` and `bounds` are its cut's, `top_level` whether it
    /// asks for automatic caching, `common` its common prefix with the previous request.
    pub fn read(&self, prints: &Prints, bounds: &[Bound], top_level: bool, common: u64) -> u64 {
        match self.rule {
            Rule::Previous => {
                if self.previous_alive {
                    self.long_enough(common)
                } else {
                    0
                }
            }
            Rule::Units { unit_bytes } => {
                let hit = (1..=prints.len() / unit_bytes).rev().find(|k| {
                    let o = k * unit_bytes;
                    prints
                        .at(o)
                        .is_some_and(|h| self.entries.contains(&(o as u64, h)))
                });
                self.long_enough(hit.map_or(0, |k| (k * unit_bytes) as u64))
            }
            Rule::Breakpoints => {
                // The blocks the lookback checks: each breakpoint's and the ones before it.
                let mut checked = vec![false; bounds.len()];
                for i in Self::breakpoints(bounds, top_level) {
                    let from = (i + 1).saturating_sub(LOOKBACK_BLOCKS);
                    checked[from..=i].iter_mut().for_each(|c| *c = true);
                }
                let hit = (0..bounds.len()).rev().filter(|&i| checked[i]).find(|&i| {
                    let o = bounds[i].key;
                    prints
                        .at(o)
                        .is_some_and(|h| self.entries.contains(&(o as u64, h)))
                });
                hit.map_or(0, |i| bounds[i].end as u64)
            }
        }
    }

    /// `kept` bytes of a prefix in whole units of the rule (all of them where reads are not
    /// in units).
    pub fn whole(&self, kept: u64) -> u64 {
        match self.rule {
            Rule::Units { unit_bytes } => kept / unit_bytes as u64 * unit_bytes as u64,
            Rule::Breakpoints | Rule::Previous => kept,
        }
    }

    /// What the best client reads of a request that keeps `kept` bytes of the previous one:
    /// the same rule's unit and minimum.
    pub fn best(&self, kept: u64) -> u64 {
        self.long_enough(self.whole(kept))
    }

    /// Writes the entries a request leaves: at its breakpoints (long enough), or every unit.
    pub fn write(&mut self, prints: &Prints, bounds: &[Bound], top_level: bool) {
        self.write_after(prints, bounds, top_level, 0);
    }

    /// [`write`](Self::write) for a request that extends one of `written` bytes, whose units
    /// are entries already unless they were forgotten since.
    pub fn write_after(
        &mut self,
        prints: &Prints,
        bounds: &[Bound],
        top_level: bool,
        written: usize,
    ) {
        let from = if self.forgotten { 0 } else { written };
        self.forgotten = false;
        match self.rule {
            Rule::Previous => self.previous_alive = true,
            Rule::Units { .. } => {
                // Every point is a unit boundary: a prefix of this prompt.
                let i = prints.points.partition_point(|p| p.0 <= from);
                self.entries
                    .extend(prints.points[i..].iter().map(|&(o, h)| (o as u64, h)));
            }
            Rule::Breakpoints => {
                for i in Self::breakpoints(bounds, top_level).collect::<Vec<_>>() {
                    let o = bounds[i].key;
                    if self.long_enough(o as u64) > 0
                        && let Some(h) = prints.at(o)
                    {
                        self.entries.insert((o as u64, h));
                    }
                }
            }
        }
    }

    /// The entries an old save's previous request left, for a save that did not keep entries:
    /// under breakpoints, one at `last` (its last block, automatic caching); under units,
    /// every unit of it.
    pub fn seed(&mut self, bytes: &[u8], last: Option<Bound>) {
        let last: Vec<Bound> = last.into_iter().collect();
        let prints = Prints::of(bytes, &self.offsets(0, bytes.len(), &last));
        self.write(&prints, &last, true);
    }

    /// Drops every entry: see `Meter::forget_cache`.
    pub fn forget(&mut self) {
        self.entries.clear();
        self.previous_alive = false;
        self.forgotten = true;
    }

    /// The entries, in order, for the saved form.
    pub fn entries(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.entries.iter().copied()
    }

    /// Entries read back from a save.
    pub fn restore(&mut self, entries: impl IntoIterator<Item = (u64, u64)>) {
        self.entries.extend(entries);
    }
}
