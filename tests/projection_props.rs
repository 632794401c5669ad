//! Properties of `project_tool_updates` over sessions recorded by the rules of reference §4
//! (steps 5–6), in every mode, and the prefix property of reference §5.
//!
//! The properties are checked only where the projection took the main path
//! (`ProjectionPath::Main`); sessions built by `support::recorded::build_session` (the real `Recorder`) are never interrupted,
//! so their snapshots are never guards. The last tests pin one step of each kind the prefix
//! property excludes and show that the prefix is indeed not kept there.

mod support;

use std::collections::{BTreeSet, HashSet};

use mektpoy::{
    Config, ContentBlock, Event, Message, Session, ToolSchema,
    event::{Reason, RequestHeader},
    project::{
        ProjectedToolUpdates, ProjectionPath, project_tool_updates, project_tool_updates_inline,
    },
    route::ToolUpdateMode,
    vocab::{Role, Seq},
};
use proptest::prelude::*;
use support::recorded::{Change, NAMES, Request, StepOp, build_session};

const MODES: [Option<ToolUpdateMode>; 3] = [
    None,
    Some(ToolUpdateMode::InHistory),
    Some(ToolUpdateMode::AdditionOnly),
];

fn project(
    r: &Request,
    mode: Option<ToolUpdateMode>,
) -> (ProjectedToolUpdates<'_>, ProjectionPath) {
    let projected = project_tool_updates(&r.messages, Some(&r.tools), mode, Some(&r.snapshot));
    let path = projected.path;
    (projected, path)
}

fn names(tools: &[ToolSchema]) -> Vec<&str> {
    tools.iter().map(ToolSchema::name).collect()
}

fn developer_blocks<'m>(
    messages: impl IntoIterator<Item = &'m Message>,
) -> impl Iterator<Item = &'m ContentBlock> {
    messages
        .into_iter()
        .filter(|m| m.role() == Role::Developer)
        .flat_map(|m| m.content())
}

/// Replaying the kept blocks from the non-deferred declarations must offer exactly the
/// effective names, minus explicitly deferred baseline tools that no kept addition activated.
fn check_offered(r: &Request, out: &ProjectedToolUpdates<'_>) -> Result<(), TestCaseError> {
    let declared = out.tools.as_deref().unwrap_or_default();
    let mut offered: BTreeSet<&str> = declared
        .iter()
        .filter(|t| !t.defer_loading())
        .map(ToolSchema::name)
        .collect();
    let mut activated = HashSet::new();
    for block in developer_blocks(&out.messages) {
        match block {
            ContentBlock::ToolAddition(r) => {
                let tool_name = r.tool_name();
                prop_assert!(offered.insert(tool_name), "{tool_name} added twice");
                activated.insert(tool_name);
            }
            ContentBlock::ToolRemoval(r) => {
                let tool_name = r.tool_name();
                prop_assert!(offered.remove(tool_name), "{tool_name} not offered");
            }
            _ => {}
        }
    }
    let dormant: HashSet<&str> = r
        .snapshot
        .tools()
        .iter()
        .filter(|t| t.defer_loading() && !activated.contains(t.name()))
        .map(ToolSchema::name)
        .collect();
    let expected: BTreeSet<&str> = r
        .effective_names()
        .into_iter()
        .filter(|n| !dormant.contains(n))
        .collect();
    prop_assert_eq!(offered, expected);
    Ok(())
}

fn check_request(r: &Request) -> Result<(), TestCaseError> {
    let effective = r.effective_names();
    for mode in MODES {
        let (out, path) = project(r, mode);
        let declared = out.tools.as_deref().expect("tools were given");
        let Some(mode) = mode else {
            prop_assert_eq!(path, ProjectionPath::NoMode);
            prop_assert!(out.messages.iter().all(|m| m.role() != Role::Developer));
            prop_assert!(declared.iter().all(|t| !t.defer_loading()));
            prop_assert_eq!(names(declared), effective.clone());
            continue;
        };
        if !path.is_main() {
            continue;
        }
        // Only the series' developer messages, never an empty one.
        let updates: HashSet<&str> = r
            .snapshot
            .updates()
            .iter()
            .map(|u| u.message_id())
            .collect();
        for m in out.messages.iter().filter(|m| m.role() == Role::Developer) {
            prop_assert!(updates.contains(m.id()), "{} is not an update", m.id());
            prop_assert!(!m.content().is_empty());
        }
        // Declared once each.
        let unique: HashSet<&str> = names(declared).into_iter().collect();
        prop_assert_eq!(unique.len(), declared.len());
        match mode {
            ToolUpdateMode::InHistory => {
                for n in &effective {
                    prop_assert!(unique.contains(n), "{} is effective but not declared", n);
                }
            }
            ToolUpdateMode::AdditionOnly => {
                // Exactly the effective names: snapshot order, then first-seen additions.
                let mut expected: Vec<&str> = Vec::new();
                let candidates = r
                    .snapshot
                    .tools()
                    .iter()
                    .chain(r.snapshot.updates().iter().flat_map(|u| u.additions()));
                for t in candidates {
                    if effective.contains(&t.name()) && !expected.contains(&t.name()) {
                        expected.push(t.name());
                    }
                }
                prop_assert_eq!(names(declared), expected);
                prop_assert_eq!(unique, effective.iter().copied().collect::<HashSet<_>>());
                prop_assert!(
                    developer_blocks(&out.messages)
                        .all(|b| !matches!(b, ContentBlock::ToolRemoval(_))),
                    "addition-only sent a removal"
                );
            }
        }
        check_offered(r, &out)?;
    }
    Ok(())
}

/// The whole projected request keeps its prefix: declarations and messages of `before` are
/// prefixes of those of `after`.
fn prefix_kept(before: &ProjectedToolUpdates<'_>, after: &ProjectedToolUpdates<'_>) -> bool {
    let (b, a) = (
        before.tools.as_deref().unwrap_or_default(),
        after.tools.as_deref().unwrap_or_default(),
    );
    a.len() >= b.len()
        && a.iter().zip(b).all(|(x, y)| x.same_tool(y))
        && after.messages.starts_with(&before.messages)
}

/// Names that were declared in `before`'s series: baseline or addition.
fn declared_in_series(r: &Request) -> HashSet<&str> {
    r.snapshot
        .tools()
        .iter()
        .chain(r.snapshot.updates().iter().flat_map(|u| u.additions()))
        .map(ToolSchema::name)
        .collect()
}

/// The prefix property of reference §5 on consecutive requests; returns how many pairs it checked.
fn check_prefix(requests: &[Request]) -> Result<usize, TestCaseError> {
    let mut checked = 0;
    for pair in requests.windows(2) {
        let (n, next) = (&pair[0], &pair[1]);
        if next.starts_series || next.new_declaration_series {
            continue;
        }
        for mode in [ToolUpdateMode::InHistory, ToolUpdateMode::AdditionOnly] {
            let (before, p1) = project(n, Some(mode));
            let (after, p2) = project(next, Some(mode));
            if !(p1.is_main() && p2.is_main()) {
                continue;
            }
            if mode == ToolUpdateMode::AdditionOnly {
                let was: HashSet<&str> = n.effective_names().into_iter().collect();
                let now: HashSet<&str> = next.effective_names().into_iter().collect();
                let declared = declared_in_series(n);
                let left = was.iter().any(|x| !now.contains(x));
                let returned = now.iter().any(|x| !was.contains(x) && declared.contains(x));
                if left || returned {
                    continue;
                }
            }
            prop_assert!(
                after.messages.starts_with(&before.messages),
                "{:?}: messages lost their prefix",
                mode
            );
            prop_assert!(
                prefix_kept(&before, &after),
                "{:?}: declarations rewritten",
                mode
            );
            checked += 1;
        }
    }
    Ok(checked)
}

/// reference §5.1 on one request: the declarations are the by-value snapshot's tools, and replaying
/// the kept blocks from the non-deferred declarations offers exactly the effective tools, each
/// with its effective definition (minus deferred baseline tools no addition activated).
fn check_inline(r: &Request) -> Result<(), TestCaseError> {
    let out = project_tool_updates_inline(&r.messages, Some(&r.tools), Some(&r.by_value));
    let path = out.path;
    if !path.is_main() {
        return Ok(());
    }
    let declared = out.tools.as_deref().expect("tools were given");
    prop_assert_eq!(declared.len(), r.by_value.tools().len());
    for (d, s) in declared.iter().zip(r.by_value.tools()) {
        prop_assert!(d.same_tool(s), "the declarations are the snapshot's");
    }
    let mut offered: std::collections::BTreeMap<&str, ToolSchema> = declared
        .iter()
        .filter(|t| !t.defer_loading())
        .map(|t| (t.name(), t.clone()))
        .collect();
    let mut activated = HashSet::new();
    for block in developer_blocks(&out.messages) {
        match block {
            ContentBlock::ToolAddition(r) => {
                let tool_name = r.tool_name();
                let def = declared.iter().find(|t| t.name() == tool_name);
                prop_assert!(def.is_some(), "{tool_name} by reference but not declared");
                let def = def.unwrap().with_defer_loading(false);
                prop_assert!(
                    offered.insert(tool_name, def).is_none(),
                    "{tool_name} offered twice"
                );
                activated.insert(tool_name);
            }
            ContentBlock::InlineAddition(a) => {
                prop_assert!(!a.definition().defer_loading());
                offered.insert(a.tool_name(), a.definition().clone());
                activated.insert(a.tool_name());
            }
            ContentBlock::ToolRemoval(r) => {
                let tool_name = r.tool_name();
                prop_assert!(
                    offered.remove(tool_name).is_some(),
                    "{tool_name} not offered"
                );
            }
            ContentBlock::ToolRedefinition(_) => {
                prop_assert!(false, "a redefinition reached the wire unconverted")
            }
            _ => {}
        }
    }
    let dormant: HashSet<&str> = r
        .by_value
        .tools()
        .iter()
        .filter(|t| t.defer_loading() && !activated.contains(t.name()))
        .map(ToolSchema::name)
        .collect();
    let expected: std::collections::BTreeMap<&str, ToolSchema> = r
        .tools
        .iter()
        .filter(|t| !dormant.contains(t.name()))
        .map(|t| (t.name(), t.with_defer_loading(false)))
        .collect();
    prop_assert_eq!(
        offered.keys().collect::<Vec<_>>(),
        expected.keys().collect::<Vec<_>>()
    );
    for (name, def) in &expected {
        prop_assert!(
            offered[name].with_defer_loading(false).same_tool(def),
            "{name} is offered with a stale definition"
        );
    }
    Ok(())
}

/// reference §5.1's cache property: within a request series every tool change keeps `tools`
/// unchanged and the messages extended. Returns how many pairs it checked.
fn check_inline_prefix(requests: &[Request]) -> Result<usize, TestCaseError> {
    let mut checked = 0;
    for pair in requests.windows(2) {
        let (n, next) = (&pair[0], &pair[1]);
        if next.starts_series {
            continue;
        }
        let before = project_tool_updates_inline(&n.messages, Some(&n.tools), Some(&n.by_value));
        let p1 = before.path;
        let after =
            project_tool_updates_inline(&next.messages, Some(&next.tools), Some(&next.by_value));
        let p2 = after.path;
        if !(p1.is_main() && p2.is_main()) {
            continue;
        }
        let (b, a) = (
            before.tools.as_deref().unwrap_or_default(),
            after.tools.as_deref().unwrap_or_default(),
        );
        prop_assert!(
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.same_tool(y)),
            "tools changed within a request series"
        );
        prop_assert!(
            after.messages.starts_with(&before.messages),
            "messages lost their prefix"
        );
        checked += 1;
    }
    Ok(checked)
}

fn change() -> impl Strategy<Value = Change> {
    let name = 0..NAMES.len();
    prop_oneof![
        4 => (name.clone(), prop::bool::weighted(0.25))
            .prop_map(|(name, deferred)| Change::Add { name, deferred }),
        3 => name.clone().prop_map(|name| Change::Remove { name }),
        1 => name.prop_map(|name| Change::Redefine { name }),
    ]
}

fn step() -> impl Strategy<Value = StepOp> {
    (
        prop_oneof![3 => Just(Vec::new()), 2 => prop::collection::vec(change(), 1..3)],
        prop::bool::weighted(0.08),
        prop::bool::weighted(0.08),
    )
        .prop_map(|(changes, new_series, compact)| StepOp {
            changes,
            new_series,
            compact,
        })
}

fn session_ops() -> impl Strategy<Value = Vec<StepOp>> {
    // The first step registers at least one tool.
    (
        prop::collection::vec(change(), 1..4),
        prop::collection::vec(step(), 1..12),
    )
        .prop_map(|(first, mut rest)| {
            rest.insert(
                0,
                StepOp {
                    changes: first,
                    ..StepOp::default()
                },
            );
            rest
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn main_path_projections_offer_the_effective_tools(ops in session_ops()) {
        let (_, requests) = build_session(&ops);
        for r in &requests {
            check_request(r)?;
        }
    }

    #[test]
    fn consecutive_requests_keep_their_prefix(ops in session_ops()) {
        let (_, requests) = build_session(&ops);
        check_prefix(&requests)?;
    }

    #[test]
    fn inline_projections_offer_the_effective_definitions(ops in session_ops()) {
        let (_, requests) = build_session(&ops);
        for r in &requests {
            check_inline(r)?;
        }
    }

    #[test]
    fn inline_requests_of_one_series_keep_their_prefix_through_every_tool_change(ops in session_ops()) {
        let (_, requests) = build_session(&ops);
        check_inline_prefix(&requests)?;
    }
}

/// The inline prefix check is not vacuous: a session with additions, a removal, a return and
/// a redefinition keeps the prefix at every step.
#[test]
fn inline_prefix_property_is_exercised() {
    let ops = steps(&[
        &[add(0), add(1)],
        &[add(2)],
        &[Change::Remove { name: 1 }],
        &[add(1)],
        &[Change::Redefine { name: 0 }],
        &[Change::Remove { name: 2 }],
        &[add(2), Change::Redefine { name: 2 }],
    ]);
    let (_, requests) = build_session(&ops);
    for r in &requests {
        check_inline(r).unwrap();
    }
    assert_eq!(check_inline_prefix(&requests).unwrap(), requests.len() - 1);
}

fn add(name: usize) -> Change {
    Change::Add {
        name,
        deferred: false,
    }
}

fn steps(changes: &[&[Change]]) -> Vec<StepOp> {
    changes
        .iter()
        .map(|c| StepOp {
            changes: c.to_vec(),
            ..StepOp::default()
        })
        .collect()
}

/// A fixed session with additions, a removal and a restore: the properties hold, and the
/// prefix check is not vacuous.
#[test]
fn prefix_property_is_exercised() {
    let ops = steps(&[
        &[add(0)],
        &[],
        &[add(1)],
        &[],
        &[
            add(2),
            Change::Add {
                name: 3,
                deferred: true,
            },
        ],
        &[Change::Remove { name: 1 }],
        &[add(1)],
        &[],
    ]);
    let (_, requests) = build_session(&ops);
    for r in &requests {
        check_request(r).unwrap();
    }
    // 7 pairs on in-history; on addition-only the removal and the restore are excluded.
    assert_eq!(check_prefix(&requests).unwrap(), 7 + 5);
}

/// `(InHistory kept, AdditionOnly kept)` for requests `n` and `n + 1`.
fn kept_at(requests: &[Request], n: usize) -> (bool, bool) {
    let kept = |mode| {
        let (before, p1) = project(&requests[n], Some(mode));
        let (after, p2) = project(&requests[n + 1], Some(mode));
        assert!(p1.is_main() && p2.is_main(), "{mode:?}: {p1:?}, {p2:?}");
        prefix_kept(&before, &after)
    };
    (
        kept(ToolUpdateMode::InHistory),
        kept(ToolUpdateMode::AdditionOnly),
    )
}

#[test]
fn a_definition_change_rewrites_the_declarations() {
    let (_, requests) = build_session(&steps(&[
        &[add(0), add(1)],
        &[Change::Redefine { name: 0 }],
    ]));
    assert!(requests[1].new_declaration_series && !requests[1].starts_series);
    assert_eq!(kept_at(&requests, 0), (false, false));
}

#[test]
fn a_compaction_rewrites_the_messages() {
    let mut ops = steps(&[&[add(0)], &[add(1)], &[], &[]]);
    ops[3].compact = true;
    let (_, requests) = build_session(&ops);
    assert!(requests[3].starts_series && requests[3].new_declaration_series);
    assert_eq!(
        kept_at(&requests, 1),
        (true, true),
        "the step before is an ordinary one"
    );
    assert_eq!(kept_at(&requests, 2), (false, false));
    // The compacted request opens a new series: its developer messages are gone.
    let (out, _) = project(&requests[3], Some(ToolUpdateMode::InHistory));
    assert!(out.messages.iter().all(|m| m.role() != Role::Developer));
}

#[test]
fn a_removal_rewrites_on_addition_only_only() {
    let (_, requests) = build_session(&steps(&[
        &[add(0)],
        &[add(1)],
        &[Change::Remove { name: 1 }],
    ]));
    assert!(!requests[2].starts_series && !requests[2].new_declaration_series);
    assert_eq!(kept_at(&requests, 1), (true, false));
}

#[test]
fn a_restore_rewrites_on_addition_only_only() {
    let (_, requests) = build_session(&steps(&[
        &[add(0)],
        &[add(1)],
        &[Change::Remove { name: 1 }],
        &[add(1)],
    ]));
    assert!(!requests[3].starts_series && !requests[3].new_declaration_series);
    assert_eq!(kept_at(&requests, 2), (true, false));
}

/// A record interrupted between its header and its developer message leaves a guard
/// snapshot; the next record heals the log (reference §4 step 6) and the declarations change
/// although no series starts.
#[test]
fn a_guard_heal_rewrites_the_declarations() {
    let a = support::tool_of("read", 0, false, serde_json::json!({"type": "object"}));
    let b = support::tool_of("write", 0, false, serde_json::json!({"type": "object"}));
    let header = |tools: Vec<ToolSchema>, reason| {
        Event::header(
            RequestHeader::new(Config::new("deepseek", "deepseek-flash"), tools),
            reason,
        )
    };
    let session = Session::new("heal");
    session
        .append(header(vec![a.clone()], Reason::Initial))
        .unwrap();
    session
        .append(Event::append(Message::user("u1", "one")))
        .unwrap();
    // Interrupted: the header of [a, b] without its developer message.
    session
        .append(header(vec![a.clone(), b.clone()], Reason::Change))
        .unwrap();
    session
        .append(Event::append(Message::user("u2", "two")))
        .unwrap();
    let guard = session.view();
    // A new recorder: `resume` header, then +b diffed against the available names {a}.
    session
        .append(Event::append(Message::assistant("a2", "ok", "p", "m")))
        .unwrap();
    session
        .append(Event::append(Message::user("u3", "three")))
        .unwrap();
    let seq = session.append(header(vec![a, b], Reason::Resume)).unwrap();
    session
        .append(Event::developer(
            Message::developer("d3", vec![ContentBlock::addition("write").unwrap()]),
            Some(seq),
        ))
        .unwrap();
    assert_eq!(seq, Seq(6));
    let healed = session.view();

    let project_view = |v: &mektpoy::session::SessionView, tools: &[ToolSchema]| {
        let (_, h) = v.header.clone().unwrap();
        assert_eq!(&*h.header.tools, tools);
        (v.messages.clone(), v.tool_history.clone())
    };
    let tools = [
        support::tool_of("read", 0, false, serde_json::json!({"type": "object"})),
        support::tool_of("write", 0, false, serde_json::json!({"type": "object"})),
    ];
    let (m1, s1) = project_view(&guard, &tools);
    let (m2, s2) = project_view(&healed, &tools);
    // The guard snapshot holds the active tools and no update.
    assert_eq!(s1.tools().len(), 2);
    assert!(s1.updates().is_empty());
    for mode in [ToolUpdateMode::InHistory, ToolUpdateMode::AdditionOnly] {
        let before = project_tool_updates(&m1, Some(&tools), Some(mode), Some(&s1));
        let after = project_tool_updates(&m2, Some(&tools), Some(mode), Some(&s2));
        assert!(after.messages.starts_with(&before.messages), "{mode:?}");
        let declared = |p: &ProjectedToolUpdates<'_>| {
            p.tools
                .as_deref()
                .unwrap()
                .iter()
                .map(|t| (t.name().to_owned(), t.defer_loading()))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            declared(&before),
            [("read".into(), false), ("write".into(), false)]
        );
        assert_eq!(
            declared(&after),
            [("read".into(), false), ("write".into(), true)]
        );
        assert!(!prefix_kept(&before, &after), "{mode:?}");
    }
}
