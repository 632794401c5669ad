//! A 40-step scripted session with tool churn, recorded once per route and sent to the
//! stand-in; which requests lose the cached prefix is derived below from reference §3–§9 and
//! asserted exactly.
//!
//! Routes (all on the Messages API):
//! - **AO** `deepseek-flash` (catalog): addition-only, prompts in history, deferred section 0.
//! - **IH** `claude-opus-5` by reference, as Amazon Bedrock and Google Cloud serve it (the
//!   catalog entry with `inline_definitions` off): in-history, prompts in history, beta always,
//!   deferred section 512 bytes, deferred placeholder on.
//! - **IH⁻** the same without the placeholder.
//! - **NM** `deepseek-v4-pro` (catalog): no mode, prompts not in history.
//! - **IL** `claude-fable-5-1` (catalog): in-history with inline definitions (reference §5.1), binds
//!   thinking; its answers carry a signed `thinking` and a `redacted_thinking` block, which the
//!   loop sends back as they came.
//! - **NB** `claude-fable-5-2` (catalog): no mode, prompts not in history, binds thinking (same
//!   answers as IL). Every tool change rewrites `tools`, so the thinking policy (the default,
//!   `StripThinking`) leaves every earlier thinking block out from there on; the stand-in
//!   refuses any bound block sent after a rewrite, so the acceptance of all 40 steps is itself
//!   part of the test.
//!
//! Each step records one request, projects it for the route, prepares it for the wire
//! (`Request::to_wire`: automatic `cache_control` on the Claude routes, the thinking policy),
//! sends it and appends the assistant's reply as the stand-in returned it. "Lost" means the
//! stand-in's cached bytes are not the whole previous request (reference §9 segments); step 1 has no
//! previous request. The prompts are above the Claude models' minimum cacheable length (512
//! tokens, 2,048 bytes), so that minimum never cuts a kept prefix.
//!
//! Tools: `read`, `write` non-deferred; `grep*` declared with `deferLoading: true` (explicit
//! deferral); `search`, `fetch`, `lint`, `bash`, `mcp`, `notes` added later; `fetch2` is
//! `fetch` with another description.
//!
//! ```text
//! step  event                                       effective tools after it                AO    IH⁻   IH    NM    IL    NB
//!   1   first request, prompt P1                    read write grep*                        ·     ·     ·     ·     ·     ·   (series start, nothing before)
//!   2   nothing                                                                             ·     ·     ·     ·     ·     ·
//!   3   +search                                     read write grep* search                 ·     ·     ·     t     ·     t
//!   4   nothing; the model calls search                                                     ·     ·     ·     ·     ·     ·
//!   5   continuation: tool result, no user message                                          ·     ·     ·     ·     ·     ·
//!   6   +fetch +lint +bash (several at once)        read write grep* search fetch lint bash ·     ·     ·     t     ·     t
//!   7   nothing                                                                             ·     ·     ·     ·     ·     ·
//!   8   -search                                     read write grep* fetch lint bash        a     ·     ·     t     ·     t
//!   9   nothing                                                                             ·     ·     ·     ·     ·     ·
//!  10   +search (unchanged restore, added tool)     … bash search                           b     ·     ·     t     ·     t
//!  11   prompt P1 → P2                                                                      ·     ·     ·     p     ·     p
//!  12   -grep* (never offered)                      read write fetch lint bash search       ·g    ·     ·     t     ·     t
//!  13   +grep* (its addition activates it)          read write fetch lint bash search grep* ·g    ·     ·     t     ·     t
//!  14   -lint -bash +mcp (several at once)          read write fetch search grep* mcp       a     ·     ·     t     ·     t
//!  15   nothing                                                                             ·     ·     ·     ·     ·     ·
//!  16   -write -grep*                               read fetch search mcp                   a     ·     ·     t     ·     t
//!  17   nothing                                                                             ·     ·     ·     ·     ·     ·
//!  18   +write (unchanged restore, baseline tool)   read fetch search mcp write             r     ·     ·     t     ·     t
//!  19   nothing                                                                             ·     ·     ·     ·     ·     ·
//!  20   +lint (unchanged restore, added tool)       read fetch search mcp write lint        b     ·     ·     t     ·     t
//!  21   nothing; the model calls fetch                                                      ·     ·     ·     ·     ·     ·
//!  22   continuation with -fetch                    read search mcp write lint              a     ·     ·     t     ·     t
//!  23   nothing                                                                             ·     ·     ·     ·     ·     ·
//!  24   +fetch2 (changed restore)                   read search mcp write lint fetch2       s     s     s     t     ·     t
//!  25   nothing                                                                             ·     ·     ·     ·     ·     ·
//!  26   +bash                                       … fetch2 bash                           ·     d     ·     t     ·     t
//!  27   -bash                                       read search mcp write lint fetch2       a     ·     ·     t     ·     t
//!  28   nothing                                                                             ·     ·     ·     ·     ·     ·
//!  29   compaction (every node after the prompt)    (unchanged)                             s     s     s     s     s     s
//!  30   nothing                                                                             ·     ·     ·     ·     ·     ·
//!  31   +bash                                       read search mcp write lint fetch2 bash  ·     d     ·     t     ·     t
//!  32   nothing                                                                             ·     ·     ·     ·     ·     ·
//!  33   -read -search -mcp -write -lint -fetch2     bash                                    a     ·     ·     t     ·     t
//!  34   nothing                                                                             ·f    ·     ·     ·     ·     ·
//!  35   +notes                                      bash notes                              f     ·     ·     t     ·     t
//!  36   nothing                                                                             ·f    ·     ·     ·     ·     ·
//!  37   -bash                                       notes                                   f     ·     ·     t     ·     t
//!  38   +read (unchanged restore, baseline tool)    notes read                              r f   ·     ·     t     ·     t
//!  39   nothing                                                                             ·     ·     ·     ·     ·     ·
//!  40   +search (unchanged restore, baseline tool)  notes read search                       r     ·     ·     t     ·     t
//! ```
//!
//! `·` = the whole previous request is cached (`·g`, `·f`: cached, see g and f below); a letter
//! alone is a loss, for this reason:
//!
//! - **s** — a request- or declaration-series start (`Request::series_start`). By reference
//!   (AO, IH, IH⁻, and the folds of NM and NB) the series start at 1 (first header), 24
//!   (`fetch` is declared in series 1 with another definition: a declaration series, reference §3
//!   step 2) and 29 (the compaction's replace moves the surface generation, reference §4 step 4; on
//!   the in-history-prompt routes §4.1 then also replaces node 0 with P2, since the compaction
//!   dropped the P2 node). A new series sets the declarations to the header's tools, all
//!   non-deferred here, and drops the earlier series' developer messages (reference §5 rule 5), so
//!   the non-deferred tools or the messages change. A removed baseline tool that returns
//!   unchanged (`write` at 18, `read` at 38, `search` at 40) *continues* the series (v4 §3
//!   step 2): its recorded addition re-offers it. The by-value fold of IL starts a series only
//!   at request-series starts (v4 §3.1): 1 and 29; at 24 `fetch2` is an addition by value.
//! - **d** (IH⁻) — the first deferred declaration after a series start whose baseline has no
//!   deferred tool: the route's 512-byte deferred section appears after the non-deferred tools
//!   (reference §9) and everything after it moves (26 in series 2, 31 in series 3). In series 1 the
//!   section is there from step 1 (`grep*` is a deferred baseline tool), so series 1 has no such
//!   loss (20's `+lint` is no longer after a series start). On IH the placeholder keeps the
//!   section present from each series' first request (reference §7): no **d** losses.
//! - **a** (AO) — a name offered in the current declaration series left the effective set:
//!   AdditionOnly drops its declaration and every addition block naming it (reference §5 rules 4–5).
//!   8: `search`'s block in step 3's message; 14: `lint` and `bash` in step 6's; 16: `write`
//!   (non-deferred baseline) and `grep` (activated at 13); 22: `fetch`'s block in step 6's; 27:
//!   `bash` (added at 26); 33: every non-deferred baseline tool.
//! - **b** (AO) — a name added earlier in the series returned: its addition block, dropped since
//!   it left, is restored (the returning step's own addition is dropped as already offered).
//!   10: step 3's `+search`; 20: step 6's `+lint` (dropped since 14).
//! - **r** (AO) — a non-deferred baseline name returned: AdditionOnly declares it again, so the
//!   non-deferred tools at the head of the prefix change (its new addition block is dropped:
//!   baseline tools count as offered, reference §5 rule 5). 18: `write`; 38: `read`; 40: `search`
//!   (series 3's baseline).
//! - **f** (AO) — from 33 to 37 no non-deferred baseline tool is available, so every declaration
//!   would be deferred and the all-deferred fallback sends the tools as given without developer
//!   messages (reference §5 rule 4): steps that change the tool set lose (35, 37), the others (34,
//!   36) repeat the previous request and keep it. At 38 `read` makes a declaration
//!   non-deferred again: the main path is back (tools and developer messages change).
//! - **g** (AO) — no loss, on purpose: `grep*` was never offered (explicit deferral, never
//!   added), so its leaving at 12 drops only a deferred declaration (no bytes with a 0-byte
//!   section) and the removal block; its return at 13 brings the declaration back and appends
//!   a new `+grep` block at the end. The issue's wording "a name removed earlier in the series
//!   returned" would count 13; reference §5 and §9 do not, and the stand-in agrees.
//! - **t** (NM, NB) — the tool set changed: without a mode every change rewrites the tool list,
//!   the head of the prefix (reference §5 rule 1). **p** (NM, NB) — the prompt is not kept in
//!   history, so P1 → P2 replaces the prompt node and opens a request series (reference §4.1, §4
//!   step 4). On NB each of these is also a rewrite (reference §7 thinking policy): that request and
//!   every later one leave out the thinking blocks of the answers before it.
//!
//! IH and IH⁻ lose nothing at removals, restores or additions inside a series: removed
//! definitions and removal blocks stay (reference §5 rule 5), an unchanged restore re-adds the tool
//! by a new block (10, 18, 20, 38, 40), and `grep*`'s removal at 12 is dropped (never offered)
//! while its addition at 13 activates it.
//!
//! IL loses nothing but the compaction: within a request series `tools` is frozen (reference §5.1),
//! every addition of a tool that is not a baseline tool with that definition goes by value
//! (3, 6, 10, 14's `mcp`, 20, 24's `fetch2`, 26, 31, 35), an activation or re-offer of a
//! baseline tool goes by reference (13 `grep`, 18 `write`, 38 `read`, 40 `search`), and removal
//! blocks stay. No request rewrites inside a series, so its thinking blocks all go back.

use std::collections::{BTreeMap, BTreeSet};

use mektpoy::{Route, ToolSchema, event::SeriesStart, project::ProjectionPath, route_for};
use serde_json::Value;

use crate::standin::kept_by;

use crate::agent::{
    Agent, Reply, Sent, arg_params, assert_strip_thinking, opus_by_reference, prompt, tool_of,
};

/// What happens at a step besides its effective tools.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Event {
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

/// The prompts' first sentences; each prompt goes on with the house rules (above the minimum
/// cacheable length).
pub(crate) const P1: &str = "You are a careful coding agent. Use the tools you are given.";
pub(crate) const P2: &str =
    "You are a careful coding agent. Use the tools you are given. Prefer small diffs.";

/// The script: step, effective tools after the step's changes, event. `grep*` is deferred,
/// `fetch2` is `fetch` version 2.
pub(crate) const SCRIPT: [(usize, &str, Event); 40] = [
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
pub(crate) const TOOL_SET_CHANGED: [usize; 20] = [
    3, 6, 8, 10, 12, 13, 14, 16, 18, 20, 22, 24, 26, 27, 31, 33, 35, 37, 38, 40,
];
/// **s** on the by-reference folds after step 1: `fetch2` (a declaration series) and the
/// compaction (a request series). The unchanged restores at 18, 38 and 40 continue the series.
const SERIES_STARTS: [(usize, SeriesStart); 2] =
    [(24, SeriesStart::Redeclared), (29, SeriesStart::Rewound)];
/// **p** on the routes without prompts in history: P1 → P2 replaces the prompt node.
const PROMPT_REPLACED: (usize, SeriesStart) = (11, SeriesStart::PromptReplaced);
/// Series starts of the by-value fold (IL) after step 1: request-series starts only.
const INLINE_SERIES_STARTS: [(usize, SeriesStart); 1] = [(29, SeriesStart::Rewound)];
/// **d**: the first deferred declaration after each series start whose baseline has no
/// deferred tool, IH⁻ only.
const FIRST_DEFERRED: [usize; 2] = [26, 31];
/// **a**, **b**, **r**, **f** and **s** on AO.
pub(crate) const LOST_ADDITION_ONLY: [usize; 15] =
    [8, 10, 14, 16, 18, 20, 22, 24, 27, 29, 33, 35, 37, 38, 40];
/// AO's all-deferred fallback.
pub(crate) const ADDITION_ONLY_FALLBACK: [usize; 5] = [33, 34, 35, 36, 37];
/// **p** and the compaction on NM and NB, besides every tool-set change.
const NO_MODE_SERIES: [usize; 2] = [11, 29];

pub(crate) fn tools(spec: &str) -> Vec<ToolSchema> {
    spec.split_whitespace()
        .map(|t| {
            let (t, deferred) = t.strip_suffix('*').map_or((t, false), |n| (n, true));
            match t.strip_suffix('2') {
                Some(name) => tool_of(name, 2, deferred, arg_params()),
                None => tool_of(t, 1, deferred, arg_params()),
            }
        })
        .collect()
}

pub(crate) fn set(steps: impl IntoIterator<Item = usize>) -> BTreeSet<usize> {
    steps.into_iter().collect()
}

/// One scripted step as sent.
struct Row {
    step: usize,
    sent: Sent,
}

impl Row {
    fn body(&self) -> Value {
        serde_json::from_str(self.sent.wire.body()).unwrap()
    }

    /// The wire `tools` exactly as sent.
    fn tools_bytes(&self) -> String {
        self.body()["tools"].to_string()
    }
}

/// Runs the script twice over fresh sessions for `route`, the answers as JSON (key `key`),
/// then streamed as server-sent events (key `{key}/sse`); every request must be accepted. Both
/// runs send the same bytes but `"stream":true`, and the crate decodes the same answers from
/// the body and from the stream. The JSON run's rows.
fn run(key: &str, route: Route, redacted: bool) -> Vec<Row> {
    let agent = |key: &str| {
        let agent = Agent::new(key, route.clone());
        if redacted {
            agent.with_redacted_thinking()
        } else {
            agent
        }
    };
    let json = run_once(agent(key));
    let sse = run_once(agent(&format!("{key}/sse")).streaming());
    for (j, s) in json.iter().zip(&sse) {
        let step = j.step;
        assert_eq!(
            s.sent.wire.body().replacen(r#""stream":true,"#, "", 1),
            j.sent.wire.body(),
            "{key} step {step}: the streamed request is the same but `stream`"
        );
        assert!(s.sent.streamed && !j.sent.streamed, "{key} step {step}");
        assert_eq!(
            s.sent.answer, j.sent.answer,
            "{key} step {step}: the answers"
        );
        assert_eq!(s.sent.usage, j.sent.usage, "{key} step {step}");
        assert_eq!(s.sent.content, j.sent.content, "{key} step {step}");
    }
    assert_eq!(json.len(), sse.len(), "{key}");
    json
}

/// Runs the script over a fresh session for `agent`'s route; every request must be accepted.
fn run_once(mut agent: Agent) -> Vec<Row> {
    let key = agent.key().to_owned();
    let (p1, p2) = (prompt(P1), prompt(P2));
    let mut current = &p1;
    let mut rows = Vec::with_capacity(SCRIPT.len());
    for (step, spec, event) in SCRIPT {
        if let Compact = event {
            agent.compact();
        }
        if let Prompt = event {
            current = &p2;
        }
        let user = format!("Step {step}: carry on with the task.");
        let user = (!matches!(event, Continue)).then_some(user.as_str());
        let reply = match event {
            Call(name) => Reply::Call(name),
            _ => Reply::Text,
        };
        let sent = agent
            .step(current, &tools(spec), user, reply)
            .unwrap_or_else(|r| {
                panic!(
                    "{key} step {step}: the stand-in refused ({}): {}",
                    r.status, r.message
                )
            });
        // The top-level `system`: P1 until 11; then P2 where prompts are not kept in history
        // (node 0 replaced) but still P1 where they are (P2 appended), until the compaction at
        // 29 drops the P2 node and §4.1 replaces node 0 with it.
        let system = if step < 11 || (step < 29 && agent.route().system_prompt_in_history()) {
            &p1
        } else {
            &p2
        };
        let row = Row { step, sent };
        assert_eq!(
            row.body()["system"].as_str(),
            Some(system.as_str()),
            "{key} step {step}: system"
        );
        rows.push(row);
    }
    rows
}

/// Steps whose request does not cache the whole previous request (in DeepSeek's units).
fn lost(rows: &[Row]) -> BTreeSet<usize> {
    rows.windows(2)
        .filter(|w| {
            w[1].sent.usage.cached_bytes
                < kept_by(w[1].sent.wire.body(), w[0].sent.usage.total_bytes)
        })
        .map(|w| w[1].step)
        .collect()
}

/// Every series start with its reason; `Request::starts_series` says the same.
fn series_starts(rows: &[Row]) -> BTreeMap<usize, SeriesStart> {
    for r in rows {
        assert_eq!(
            r.sent.request.starts_series,
            r.sent.request.series_start.is_some(),
            "step {}",
            r.step
        );
    }
    rows.iter()
        .filter_map(|r| r.sent.request.series_start.map(|s| (r.step, s)))
        .collect()
}

fn starts(extra: impl IntoIterator<Item = (usize, SeriesStart)>) -> BTreeMap<usize, SeriesStart> {
    [(1, SeriesStart::First)].into_iter().chain(extra).collect()
}

fn paths(rows: &[Row], path: ProjectionPath) -> BTreeSet<usize> {
    rows.iter()
        .filter(|r| r.sent.path == path)
        .map(|r| r.step)
        .collect()
}

/// Steps whose request rewrote `tools`, `system` or the history against the previous one.
fn rewrites(rows: &[Row]) -> BTreeSet<usize> {
    rows.iter()
        .filter(|r| r.sent.request.rewrite.is_some())
        .map(|r| r.step)
        .collect()
}

/// step, total and cached bytes (and ⌈bytes / 4⌉ token estimates), lost or not.
fn table(rows: &[Row]) -> String {
    let mut out = String::from("step   total B  cached B  (~tokens: total/cached)  lost?\n");
    let mut previous = None;
    for r in rows {
        let u = r.sent.usage;
        let lost = previous.is_some_and(|p| u.cached_bytes < kept_by(r.sent.wire.body(), p));
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

/// The tool-change blocks of a request's wire messages, in order: `+name` by reference,
/// `+name=` by value, `-name`.
fn changes(row: &Row) -> Vec<String> {
    let body = row.body();
    let mut out = Vec::new();
    for m in body["messages"].as_array().unwrap() {
        for b in m["content"].as_array().into_iter().flatten() {
            let tool = &b["tool"];
            match (b["type"].as_str(), tool["type"].as_str()) {
                (Some("tool_addition"), Some("tool_reference")) => {
                    out.push(format!("+{}", tool["name"].as_str().unwrap()));
                }
                (Some("tool_addition"), Some("tool_definition")) => {
                    out.push(format!(
                        "+{}=",
                        tool["definition"]["name"].as_str().unwrap()
                    ));
                }
                (Some("tool_removal"), _) => {
                    out.push(format!("-{}", tool["name"].as_str().unwrap()));
                }
                _ => {}
            }
        }
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
    for p in [P1, P2] {
        assert!(prompt(p).len() > 2048, "above the minimum cacheable length");
    }
}

#[test]
fn churn_on_deepseek_flash_loses_only_at_series_starts_offered_names_leaving_or_returning_and_fallback_changes()
 {
    let route = route_for("deepseek", "deepseek-flash");
    let rows = run("churn/deepseek-flash", route, false);
    let t = table(&rows);
    assert_eq!(series_starts(&rows), starts(SERIES_STARTS), "{t}");
    assert_eq!(
        paths(&rows, ProjectionPath::AllDeferred),
        set(ADDITION_ONLY_FALLBACK),
        "{t}"
    );
    // Step 27 departs within the last 173 bytes of step 26, inside its last partial 64-token
    // unit: DeepSeek reads every whole unit of it all the same.
    let mut expected = set(LOST_ADDITION_ONLY);
    expected.remove(&27);
    assert_eq!(lost(&rows), expected, "{t}");
    // Addition-only never sends a removal.
    assert!(
        rows.iter()
            .all(|r| !r.sent.wire.body().contains("tool_removal"))
    );
}

#[test]
fn churn_on_anthropic_in_history_without_placeholder_loses_at_series_starts_and_first_deferred_declarations()
 {
    let rows = run(
        "churn/claude-opus-5/by-reference/no-placeholder",
        opus_by_reference(false),
        false,
    );
    let t = table(&rows);
    assert_eq!(series_starts(&rows), starts(SERIES_STARTS), "{t}");
    assert_eq!(
        paths(&rows, ProjectionPath::Main).len(),
        SCRIPT.len(),
        "{t}"
    );
    assert_eq!(
        lost(&rows),
        set(SERIES_STARTS.map(|s| s.0).into_iter().chain(FIRST_DEFERRED)),
        "{t}"
    );
    assert!(
        rows.iter()
            .all(|r| !r.sent.wire.body().contains("tool_definition"))
    );
}

#[test]
fn churn_on_anthropic_in_history_with_placeholder_loses_only_at_series_starts() {
    let route = opus_by_reference(true);
    assert!(!route.inline_definitions());
    let rows = run("churn/claude-opus-5/by-reference", route, false);
    let t = table(&rows);
    assert_eq!(series_starts(&rows), starts(SERIES_STARTS), "{t}");
    assert_eq!(
        paths(&rows, ProjectionPath::Main).len(),
        SCRIPT.len(),
        "{t}"
    );
    assert_eq!(lost(&rows), set(SERIES_STARTS.map(|s| s.0)), "{t}");
    for r in &rows {
        // The placeholder is declared on every request and never named by a block.
        assert_eq!(
            r.sent
                .wire
                .body()
                .matches(mektpoy::vocab::DEFERRED_PLACEHOLDER_NAME)
                .count(),
            1,
            "step {}",
            r.step
        );
        // By reference only: the by-value blocks need the inline beta, which this route lacks.
        assert!(
            !r.sent.wire.body().contains("tool_definition"),
            "step {}",
            r.step
        );
    }
}

#[test]
fn churn_on_deepseek_v4_pro_without_mode_loses_at_every_tool_change_prompt_change_and_compaction() {
    let route = route_for("deepseek", "deepseek-v4-pro");
    assert_eq!(route.tool_update(), None);
    let rows = run("churn/deepseek-v4-pro", route, false);
    let t = table(&rows);
    eprintln!(
        "deepseek-v4-pro (no mode), reference §9 bytes; tokens estimated as ⌈bytes / 4⌉\n{t}"
    );
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
        starts([PROMPT_REPLACED].into_iter().chain(SERIES_STARTS)),
        "{t}"
    );
    assert_eq!(paths(&rows, ProjectionPath::NoMode).len(), SCRIPT.len());
    assert!(
        rows.iter()
            .all(|r| !r.sent.wire.body().contains("defer_loading"))
    );
}

#[test]
fn churn_on_claude_fable_5_1_inline_loses_only_at_the_compaction_and_sends_every_thinking_block_back()
 {
    let route = route_for("anthropic", "claude-fable-5-1");
    assert!(route.inline_definitions() && route.binds_thinking());
    let rows = run("churn/claude-fable-5-1", route, true);
    let t = table(&rows);
    assert_eq!(series_starts(&rows), starts(INLINE_SERIES_STARTS), "{t}");
    assert_eq!(
        paths(&rows, ProjectionPath::Main).len(),
        SCRIPT.len(),
        "{t}"
    );
    assert_eq!(lost(&rows), set(INLINE_SERIES_STARTS.map(|s| s.0)), "{t}");
    // The compaction is the one rewrite: `system` (node 0 becomes P2) and the history.
    assert_eq!(rewrites(&rows), set([29]), "{t}");
    // `tools` is frozen for each request series (reference §5.1): series 1 declares its baseline,
    // series 2 the tools of the compaction's header.
    for r in &rows {
        let baseline = if r.step < 29 {
            SCRIPT[0].1
        } else {
            SCRIPT[28].1
        };
        let first = &rows[if r.step < 29 { 0 } else { 28 }];
        assert_eq!(r.tools_bytes(), first.tools_bytes(), "step {}", r.step);
        let declared: Vec<String> = r.body()["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                let star = if t["defer_loading"] == true { "*" } else { "" };
                format!("{}{star}", t["name"].as_str().unwrap())
            })
            .collect();
        let expected: Vec<String> = baseline
            .split_whitespace()
            .map(|n| n.strip_suffix('2').unwrap_or(n).to_owned())
            .collect();
        assert_eq!(declared, expected, "step {}", r.step);
        assert!(
            !r.sent
                .wire
                .body()
                .contains(mektpoy::vocab::DEFERRED_PLACEHOLDER_NAME),
            "step {}",
            r.step
        );
        let betas: Vec<&str> = r
            .sent
            .wire
            .headers()
            .iter()
            .filter(|(n, _)| n == "anthropic-beta")
            .flat_map(|(_, v)| v.split(','))
            .collect();
        assert!(
            betas.contains(&crate::standin::INLINE_BETA) && !betas.contains(&crate::standin::BETA),
            "step {}: {betas:?}",
            r.step
        );
    }
    // Additions of tools that are not baseline tools with that definition go by value; an
    // activation or re-offer of a baseline tool by reference; removals stay.
    assert_eq!(
        changes(&rows[27]),
        [
            "+search=", "+fetch=", "+lint=", "+bash=", "-search", "+search=", "+grep", "+mcp=",
            "-lint", "-bash", "-write", "-grep", "+write", "+lint=", "-fetch", "+fetch=", "+bash=",
            "-bash",
        ],
        "step 28"
    );
    assert!(
        rows[27]
            .sent
            .wire
            .body()
            .contains(r#""description":"fetch v2""#)
    );
    assert_eq!(
        changes(&rows[39]),
        [
            "+bash=", "-read", "-search", "-mcp", "-write", "-lint", "-fetch", "+notes=", "-bash",
            "+read", "+search",
        ],
        "step 40"
    );
    assert_strip_thinking("churn/claude-fable-5-1", rows.iter().map(|r| &r.sent), 2);
}

#[test]
fn churn_on_claude_fable_5_2_without_mode_loses_as_deepseek_v4_pro_and_leaves_out_thinking_after_each_rewrite()
 {
    let route = route_for("anthropic", "claude-fable-5-2");
    assert!(route.tool_update().is_none() && route.binds_thinking());
    assert!(!route.system_prompt_in_history());
    let rows = run("churn/claude-fable-5-2", route, true);
    let t = table(&rows);
    let lost_set = set(TOOL_SET_CHANGED.into_iter().chain(NO_MODE_SERIES));
    assert_eq!(lost(&rows), lost_set, "{t}");
    assert_eq!(
        series_starts(&rows),
        starts([PROMPT_REPLACED].into_iter().chain(SERIES_STARTS)),
        "{t}"
    );
    assert_eq!(paths(&rows, ProjectionPath::NoMode).len(), SCRIPT.len());
    // Every loss is a rewrite (`tools`, `system` or the history), and nothing else is.
    assert_eq!(rewrites(&rows), lost_set, "{t}");
    assert_strip_thinking("churn/claude-fable-5-2", rows.iter().map(|r| &r.sent), 2);
}
