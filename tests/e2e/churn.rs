//! A 40-step scripted session with tool churn, recorded once per route and sent to the
//! stand-in; which requests lose the cached prefix is derived below from SPEC §3–§9 and
//! asserted exactly.
//!
//! Routes (all on the Messages API):
//! - **AO** `deepseek-flash` (catalog): addition-only, prompts in history, deferred section 0.
//! - **IH** `claude-opus-5` (catalog): in-history, prompts in history, beta always, deferred
//!   section 512 bytes, deferred placeholder on.
//! - **IH⁻** a copy of that entry with `deferred_placeholder: false`.
//! - **NM** `deepseek-v4-pro` (catalog): no mode, prompts not in history.
//!
//! Each step records one request, projects it for the route, serializes it, sends it and
//! appends the assistant's reply. "Lost" means the stand-in's cached bytes are not the whole
//! previous request (SPEC §9 segments); step 1 has no previous request.
//!
//! Tools: `read`, `write` non-deferred; `grep*` declared with `deferLoading: true` (explicit
//! deferral); `search`, `fetch`, `lint`, `bash`, `mcp`, `notes` added later; `fetch2` is
//! `fetch` with another description.
//!
//! ```text
//! step  event                                       effective tools after it                AO    IH⁻   IH    NM
//!   1   first request, prompt P1                    read write grep*                        ·     ·     ·     ·    (series start, nothing before)
//!   2   nothing                                                                             ·     ·     ·     ·
//!   3   +search                                     read write grep* search                 ·     ·     ·     t
//!   4   nothing; the model calls search                                                     ·     ·     ·     ·
//!   5   continuation: tool result, no user message                                          ·     ·     ·     ·
//!   6   +fetch +lint +bash (several at once)        read write grep* search fetch lint bash ·     ·     ·     t
//!   7   nothing                                                                             ·     ·     ·     ·
//!   8   -search                                     read write grep* fetch lint bash        a     ·     ·     t
//!   9   nothing                                                                             ·     ·     ·     ·
//!  10   +search (unchanged restore, added tool)     … bash search                           b     ·     ·     t
//!  11   prompt P1 → P2                                                                      ·     ·     ·     p
//!  12   -grep* (never offered)                      read write fetch lint bash search       ·g    ·     ·     t
//!  13   +grep* (its addition activates it)          read write fetch lint bash search grep* ·g    ·     ·     t
//!  14   -lint -bash +mcp (several at once)          read write fetch search grep* mcp       a     ·     ·     t
//!  15   nothing                                                                             ·     ·     ·     ·
//!  16   -write -grep*                               read fetch search mcp                   a     ·     ·     t
//!  17   nothing                                                                             ·     ·     ·     ·
//!  18   +write (unchanged restore, baseline tool)   read fetch search mcp write             s     s     s     t
//!  19   nothing                                                                             ·     ·     ·     ·
//!  20   +lint                                       read fetch search mcp write lint        ·     d     ·     t
//!  21   nothing; the model calls fetch                                                      ·     ·     ·     ·
//!  22   continuation with -fetch                    read search mcp write lint              a     ·     ·     t
//!  23   nothing                                                                             ·     ·     ·     ·
//!  24   +fetch2 (changed restore)                   read search mcp write lint fetch2       s     s     s     t
//!  25   nothing                                                                             ·     ·     ·     ·
//!  26   +bash                                       … fetch2 bash                           ·     d     ·     t
//!  27   -bash                                       read search mcp write lint fetch2       a     ·     ·     t
//!  28   nothing                                                                             ·     ·     ·     ·
//!  29   compaction (every node after the prompt)    (unchanged)                             s     s     s     s
//!  30   nothing                                                                             ·     ·     ·     ·
//!  31   +bash                                       read search mcp write lint fetch2 bash  ·     d     ·     t
//!  32   nothing                                                                             ·     ·     ·     ·
//!  33   -read -search -mcp -write -lint -fetch2     bash                                    a     ·     ·     t
//!  34   nothing                                                                             ·f    ·     ·     ·
//!  35   +notes                                      bash notes                              f     ·     ·     t
//!  36   nothing                                                                             ·f    ·     ·     ·
//!  37   -bash                                       notes                                   a f   ·     ·     t
//!  38   +read (unchanged restore, baseline tool)    notes read                              s     s     s     t
//!  39   nothing                                                                             ·     ·     ·     ·
//!  40   +search                                     notes read search                       ·     d     ·     t
//! ```
//!
//! `·` = the whole previous request is cached (`·g`, `·f`: cached, see g and f below); a letter
//! alone is a loss, for this reason:
//!
//! - **s** — a request- or declaration-series start (`Request::starts_series`). 18 and 38: a
//!   baseline tool without `deferLoading` returns while not available (SPEC §3 step 2,
//!   departure); 24: `fetch` is declared in the series (series 2's baseline) with another
//!   definition; 29: the compaction's replace moves the surface generation (SPEC §4 step 4; on
//!   the in-history-prompt routes §4.1 then also replaces node 0 with P2, since the compaction
//!   dropped the P2 node). A new series sets the declarations to the header's tools, all
//!   non-deferred here, and drops the earlier series' developer messages (SPEC §5 rule 5), so
//!   the non-deferred tools or the messages change.
//! - **d** (IH⁻) — the first deferred declaration after a series start whose baseline has no
//!   deferred tool: the route's 512-byte deferred section appears after the non-deferred tools
//!   (SPEC §9) and everything after it moves. In series 1 the section is there from step 1
//!   (`grep*` is a deferred baseline tool), so series 1 has no such loss. On IH the placeholder
//!   keeps the section present from each series' first request (SPEC §7): no **d** losses.
//! - **a** (AO) — a name offered in the current declaration series left the effective set:
//!   AdditionOnly drops its declaration and every addition block naming it (SPEC §5 rules 4–5).
//!   8: `search`'s block in step 3's message; 14: `lint` and `bash` in step 6's; 16: `write`
//!   (non-deferred baseline) and `grep` (activated at 13); 22: `fetch` (series 2 baseline); 27
//!   and 37: `bash` (added at 26 / 31); 33: every non-deferred baseline tool.
//! - **b** (AO) — a name offered earlier in the series returned: step 3's `+search` block, dropped
//!   since 8, is restored (the new `+search` of step 10 is dropped as already offered).
//! - **f** (AO) — from 33 to 37 no non-deferred baseline tool is available, so every declaration
//!   would be deferred and the all-deferred fallback sends the tools as given without developer
//!   messages (SPEC §5 rule 4): steps that change the tool set lose (35, 37), the others (34,
//!   36) repeat the previous request and keep it. 38's return of `read` opens series 5.
//! - **g** (AO) — no loss, on purpose: `grep*` was never offered (explicit deferral, never
//!   added), so its leaving at 12 drops only a deferred declaration (no bytes with a 0-byte
//!   section) and the removal block; its return at 13 brings the declaration back and appends
//!   a new `+grep` block at the end. The issue's wording "a name removed earlier in the series
//!   returned" would count 13; SPEC §5 and §9 do not, and the stand-in agrees.
//! - **t** (NM) — the tool set changed: without a mode every change rewrites the tool list, the
//!   head of the prefix (SPEC §5 rule 1). **p** (NM) — the prompt is not kept in history, so
//!   P1 → P2 replaces the prompt node and opens a request series (SPEC §4.1, §4 step 4).
//!
//! IH and IH⁻ lose nothing at removals, restores or additions inside a series: removed
//! definitions and removal blocks stay (SPEC §5 rule 5), an unchanged restore of an added tool
//! re-adds it by a new block (10), and `grep*`'s removal at 12 is dropped (never offered) while
//! its addition at 13 activates it.

use std::collections::BTreeSet;

use mektpoy::{ProjectionPath, Route, ToolSchema, route_for};

use crate::agent::{Agent, Reply, Sent, tool};

/// What happens at a step besides its effective tools.
#[derive(Clone, Copy, Debug)]
enum Event {
    /// A user message and a text reply.
    Plain,
    /// A user message; the model calls this tool, whose result is appended.
    Call(&'static str),
    /// No user message: the step continues after a tool result.
    Continue,
    /// The prompt changes from P1 to P2 (and stays P2).
    Prompt,
    /// The surface after the prompt node is compacted into one summary before the step.
    Compact,
}

use Event::*;

const P1: &str = "You are a careful coding agent. Use the tools you are given.";
const P2: &str = "You are a careful coding agent. Use the tools you are given. Prefer small diffs.";

/// The script: step, effective tools after the step's changes, event. `grep*` is deferred,
/// `fetch2` is `fetch` version 2.
const SCRIPT: [(usize, &str, Event); 40] = [
    (1, "read write grep*", Plain),
    (2, "read write grep*", Plain),
    (3, "read write grep* search", Plain),
    (4, "read write grep* search", Call("search")),
    (5, "read write grep* search", Continue),
    (6, "read write grep* search fetch lint bash", Plain),
    (7, "read write grep* search fetch lint bash", Plain),
    (8, "read write grep* fetch lint bash", Plain),
    (9, "read write grep* fetch lint bash", Plain),
    (10, "read write grep* fetch lint bash search", Plain),
    (11, "read write grep* fetch lint bash search", Prompt),
    (12, "read write fetch lint bash search", Plain),
    (13, "read write fetch lint bash search grep*", Plain),
    (14, "read write fetch search grep* mcp", Plain),
    (15, "read write fetch search grep* mcp", Plain),
    (16, "read fetch search mcp", Plain),
    (17, "read fetch search mcp", Plain),
    (18, "read fetch search mcp write", Plain),
    (19, "read fetch search mcp write", Plain),
    (20, "read fetch search mcp write lint", Plain),
    (21, "read fetch search mcp write lint", Call("fetch")),
    (22, "read search mcp write lint", Continue),
    (23, "read search mcp write lint", Plain),
    (24, "read search mcp write lint fetch2", Plain),
    (25, "read search mcp write lint fetch2", Plain),
    (26, "read search mcp write lint fetch2 bash", Plain),
    (27, "read search mcp write lint fetch2", Plain),
    (28, "read search mcp write lint fetch2", Plain),
    (29, "read search mcp write lint fetch2", Compact),
    (30, "read search mcp write lint fetch2", Plain),
    (31, "read search mcp write lint fetch2 bash", Plain),
    (32, "read search mcp write lint fetch2 bash", Plain),
    (33, "bash", Plain),
    (34, "bash", Plain),
    (35, "bash notes", Plain),
    (36, "bash notes", Plain),
    (37, "notes", Plain),
    (38, "notes read", Plain),
    (39, "notes read", Plain),
    (40, "notes read search", Plain),
];

/// Steps whose effective tool set differs from the previous step's.
const TOOL_SET_CHANGED: [usize; 20] = [
    3, 6, 8, 10, 12, 13, 14, 16, 18, 20, 22, 24, 26, 27, 31, 33, 35, 37, 38, 40,
];
/// **s**: request- and declaration-series starts on the mode routes (the log is the same on
/// them: prompt updates are appended in history).
const SERIES_STARTS: [usize; 4] = [18, 24, 29, 38];
/// **d**: the first deferred declaration after each series start, IH⁻ only.
const FIRST_DEFERRED: [usize; 4] = [20, 26, 31, 40];
/// **a**, **b**, **f** and **s** on AO.
const LOST_ADDITION_ONLY: [usize; 13] = [8, 10, 14, 16, 18, 22, 24, 27, 29, 33, 35, 37, 38];
/// AO's all-deferred fallback.
const ADDITION_ONLY_FALLBACK: [usize; 5] = [33, 34, 35, 36, 37];
/// **p** and the compaction on NM, besides every tool-set change.
const NO_MODE_SERIES: [usize; 2] = [11, 29];

fn tools(spec: &str) -> Vec<ToolSchema> {
    spec.split_whitespace()
        .map(|t| {
            let (t, deferred) = t.strip_suffix('*').map_or((t, false), |n| (n, true));
            match t.strip_suffix('2') {
                Some(name) => tool(name, 2, deferred),
                None => tool(t, 1, deferred),
            }
        })
        .collect()
}

fn set(steps: impl IntoIterator<Item = usize>) -> BTreeSet<usize> {
    steps.into_iter().collect()
}

/// One scripted step as sent.
struct Row {
    step: usize,
    sent: Sent,
}

/// Runs the script over a fresh session for `route`; every request must be accepted.
fn run(key: &str, route: Route) -> Vec<Row> {
    let mut agent = Agent::new(key, route);
    let mut prompt = P1;
    let mut rows = Vec::with_capacity(SCRIPT.len());
    for (step, spec, event) in SCRIPT {
        if let Compact = event {
            agent.compact();
        }
        if let Prompt = event {
            prompt = P2;
        }
        let user = format!("Step {step}: carry on with the task.");
        let user = (!matches!(event, Continue)).then_some(user.as_str());
        let reply = match event {
            Call(name) => Reply::Call(name),
            _ => Reply::Text,
        };
        let sent = agent
            .step(prompt, &tools(spec), user, reply)
            .unwrap_or_else(|r| {
                panic!(
                    "{key} step {step}: the stand-in refused ({}): {}",
                    r.status, r.message
                )
            });
        // The top-level `system`: P1 until 11; then P2 where prompts are not kept in history
        // (node 0 replaced) but still P1 where they are (P2 appended), until the compaction at
        // 29 drops the P2 node and §4.1 replaces node 0 with it.
        let system = if step < 11 || (step < 29 && agent.route.system_prompt_in_history()) {
            P1
        } else {
            P2
        };
        assert!(
            sent.wire.body.contains(&format!(r#""system":{system:?}"#)),
            "{key} step {step}: system should be {system:?}"
        );
        rows.push(Row { step, sent });
    }
    rows
}

/// Steps whose request does not cache the whole previous request.
fn lost(rows: &[Row]) -> BTreeSet<usize> {
    rows.windows(2)
        .filter(|w| w[1].sent.usage.cached_bytes != w[0].sent.usage.total_bytes)
        .map(|w| w[1].step)
        .collect()
}

fn series_starts(rows: &[Row]) -> BTreeSet<usize> {
    rows.iter()
        .filter(|r| r.sent.request.starts_series)
        .map(|r| r.step)
        .collect()
}

fn paths(rows: &[Row], path: ProjectionPath) -> BTreeSet<usize> {
    rows.iter()
        .filter(|r| r.sent.path == path)
        .map(|r| r.step)
        .collect()
}

/// step, total and cached bytes (and ⌈bytes / 4⌉ token estimates), lost or not.
fn table(rows: &[Row]) -> String {
    let mut out = String::from("step   total B  cached B  (~tokens: total/cached)  lost?\n");
    let mut previous = None;
    for r in rows {
        let u = r.sent.usage;
        let lost = previous.is_some_and(|p| u.cached_bytes != p);
        out += &format!(
            "{:>4} {:>9} {:>9}   (~{:>5}/{:>5})             {}\n",
            r.step,
            u.total_bytes,
            u.cached_bytes,
            u.total_bytes.div_ceil(4),
            u.cached_bytes.div_ceil(4),
            if lost { "lost" } else { "" }
        );
        previous = Some(u.total_bytes);
    }
    out
}

#[test]
fn churn_script_table_matches_the_script() {
    let changed = set(SCRIPT
        .windows(2)
        .filter(|w| {
            let names = |spec| {
                tools(spec)
                    .iter()
                    .map(|t| {
                        (
                            t.name().to_owned(),
                            t.description().to_owned(),
                            t.defer_loading(),
                        )
                    })
                    .collect::<BTreeSet<_>>()
            };
            names(w[0].1) != names(w[1].1)
        })
        .map(|w| w[1].0));
    assert_eq!(changed, set(TOOL_SET_CHANGED));
    assert!(SCRIPT.iter().enumerate().all(|(i, s)| s.0 == i + 1));
}

#[test]
fn churn_on_deepseek_flash_loses_only_at_series_starts_offered_names_leaving_or_returning_and_fallback_changes()
 {
    let rows = run(
        "churn/deepseek-flash",
        route_for("deepseek", "deepseek-flash"),
    );
    let t = table(&rows);
    assert_eq!(
        series_starts(&rows),
        set([1].into_iter().chain(SERIES_STARTS)),
        "{t}"
    );
    assert_eq!(
        paths(&rows, ProjectionPath::AllDeferred),
        set(ADDITION_ONLY_FALLBACK),
        "{t}"
    );
    assert_eq!(lost(&rows), set(LOST_ADDITION_ONLY), "{t}");
    // Addition-only never sends a removal.
    assert!(
        rows.iter()
            .all(|r| !r.sent.wire.body.contains("tool_removal"))
    );
}

#[test]
fn churn_on_anthropic_in_history_without_placeholder_loses_at_series_starts_and_first_deferred_declarations()
 {
    let route = route_for("anthropic", "claude-opus-5")
        .into_builder()
        .deferred_placeholder(false)
        .build()
        .unwrap();
    let rows = run("churn/claude-opus-5/no-placeholder", route);
    let t = table(&rows);
    assert_eq!(
        series_starts(&rows),
        set([1].into_iter().chain(SERIES_STARTS)),
        "{t}"
    );
    assert_eq!(
        paths(&rows, ProjectionPath::Main).len(),
        SCRIPT.len(),
        "{t}"
    );
    assert_eq!(
        lost(&rows),
        set(SERIES_STARTS.into_iter().chain(FIRST_DEFERRED)),
        "{t}"
    );
}

#[test]
fn churn_on_anthropic_in_history_with_placeholder_loses_only_at_series_starts() {
    let route = route_for("anthropic", "claude-opus-5");
    assert!(route.deferred_placeholder(), "the catalog entry as is");
    let rows = run("churn/claude-opus-5", route);
    let t = table(&rows);
    assert_eq!(
        series_starts(&rows),
        set([1].into_iter().chain(SERIES_STARTS)),
        "{t}"
    );
    assert_eq!(
        paths(&rows, ProjectionPath::Main).len(),
        SCRIPT.len(),
        "{t}"
    );
    assert_eq!(lost(&rows), set(SERIES_STARTS), "{t}");
    // The placeholder is declared on every request and never named by a block.
    for r in &rows {
        assert!(
            r.sent
                .wire
                .body
                .contains(mektpoy::DEFERRED_PLACEHOLDER_NAME)
        );
        assert_eq!(
            r.sent
                .wire
                .body
                .matches(mektpoy::DEFERRED_PLACEHOLDER_NAME)
                .count(),
            1
        );
    }
}

#[test]
fn churn_on_deepseek_v4_pro_without_mode_loses_at_every_tool_change_prompt_change_and_compaction() {
    let route = route_for("deepseek", "deepseek-v4-pro");
    assert_eq!(route.tool_update(), None);
    let rows = run("churn/deepseek-v4-pro", route);
    let t = table(&rows);
    eprintln!("deepseek-v4-pro (no mode), SPEC §9 bytes; tokens estimated as ⌈bytes / 4⌉\n{t}");
    let lost = lost(&rows);
    let lost_bytes: u64 = rows
        .windows(2)
        .map(|w| {
            w[0].sent
                .usage
                .total_bytes
                .saturating_sub(w[1].sent.usage.cached_bytes)
        })
        .sum();
    eprintln!(
        "no-mode losses: {} of {} requests ({lost:?}); {lost_bytes} bytes of earlier requests not read from the cache",
        lost.len(),
        rows.len() - 1
    );
    assert!(lost.is_superset(&set(TOOL_SET_CHANGED)), "{t}");
    assert_eq!(
        lost,
        set(TOOL_SET_CHANGED.into_iter().chain(NO_MODE_SERIES)),
        "{t}"
    );
    assert_eq!(
        series_starts(&rows),
        set([1, 11].into_iter().chain(SERIES_STARTS)),
        "{t}"
    );
    assert_eq!(paths(&rows, ProjectionPath::NoMode).len(), SCRIPT.len());
    assert!(
        rows.iter()
            .all(|r| !r.sent.wire.body.contains("defer_loading"))
    );
}
