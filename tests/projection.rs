//! Projection: the worked rows of both projections, their paths, and `validate_tool_call`.

use std::borrow::Cow;

use mektpoy::history::ToolUpdate;
use mektpoy::*;
use mektpoy::{event::*, history::*, project::*, route::*, vocab::*};

mod support;
use ProjectionPath::*;
use ToolUpdateMode::{AdditionOnly, InHistory};
use serde_json::{Map, json};
use support::{msgs, msgs_spec, tools, tools_spec};

/// A snapshot: baseline tools, then `(message id, addition specs)`.
fn hist(baseline: &str, updates: &[(&str, &str)]) -> ToolHistory {
    ToolHistory::new(
        tools(baseline),
        updates
            .iter()
            .map(|(id, adds)| ToolUpdate::new(*id, tools(adds))),
    )
}

struct Case {
    name: &'static str,
    messages: &'static str,
    tools: Option<&'static str>,
    mode: Option<ToolUpdateMode>,
    history: Option<(&'static str, &'static [(&'static str, &'static str)])>,
    /// `same` = the input, borrowed; otherwise the rendered messages.
    out_messages: &'static str,
    /// `same` = the input, borrowed; `absent` = `None`; otherwise the rendered tools.
    out_tools: &'static str,
    path: ProjectionPath,
}

fn check(c: &Case) {
    let messages = msgs(c.messages);
    let tools = c.tools.map(tools);
    let history = c.history.map(|(t, u)| hist(t, u));
    let out = project_tool_updates(&messages, tools.as_deref(), c.mode, history.as_ref());
    let path = out.path;
    let name = c.name;
    assert_eq!(path, c.path, "{name}: path");
    match c.out_messages {
        "same" => {
            assert!(out.messages.is_borrowed(), "{name}: messages copied");
            assert_eq!(out.messages.as_slice(), Some(&messages[..]), "{name}");
        }
        expect => {
            assert_eq!(msgs_spec(&out.messages), expect, "{name}: messages");
            assert!(!out.messages.is_borrowed(), "{name}: changed but borrowed");
        }
    }
    match (c.out_tools, &out.tools) {
        ("absent", got) => assert!(got.is_none(), "{name}: tools {got:?}"),
        (_, None) => panic!("{name}: tools absent"),
        ("same", Some(got)) => {
            assert!(matches!(got, Cow::Borrowed(_)), "{name}: tools copied");
            assert_eq!(&**got, tools.as_deref().unwrap(), "{name}");
        }
        (expect, Some(got)) => assert_eq!(tools_spec(got), expect, "{name}: tools"),
    }
    // The plain entry point is the same function.
    let plain = project_tool_updates(&messages, tools.as_deref(), c.mode, history.as_ref());
    assert_eq!(plain, out, "{name}: traced and plain differ");
}

/// Every P row of the worked examples, in their order.
#[test]
fn examples_p_rows() {
    let cases = [
        Case {
            name: "P1 no mode drops developer messages and clears deferLoading",
            messages: "u1 d1(+B)",
            tools: Some("A Bd"),
            mode: None,
            history: Some(("A", &[("d1", "B")])),
            out_messages: "u1",
            out_tools: "A B",
            path: NoMode,
        },
        Case {
            name: "P2 no mode, nothing to change",
            messages: "u1",
            tools: Some("A B"),
            mode: None,
            history: None,
            out_messages: "same",
            out_tools: "same",
            path: NoMode,
        },
        Case {
            name: "P3 mode without history: tools as given",
            messages: "u1 d1(+B)",
            tools: Some("A Bd"),
            mode: Some(InHistory),
            history: None,
            out_messages: "u1",
            out_tools: "same",
            path: NoHistory,
        },
        Case {
            name: "P4 an update missing from the prefix",
            messages: "u1 d1(+B)",
            tools: Some("A B"),
            mode: Some(AdditionOnly),
            history: Some(("A", &[("d1", "B"), ("d2", "")])),
            out_messages: "u1",
            out_tools: "same",
            path: MissingUpdate,
        },
        Case {
            name: "P5 in-history defers the addition",
            messages: "u1 d1(+B) u2",
            tools: Some("A B"),
            mode: Some(InHistory),
            history: Some(("A", &[("d1", "B")])),
            out_messages: "same",
            out_tools: "A Bd",
            path: Main,
        },
        Case {
            name: "P6 addition-only defers the addition",
            messages: "u1 d1(+B) u2",
            tools: Some("A B"),
            mode: Some(AdditionOnly),
            history: Some(("A", &[("d1", "B")])),
            out_messages: "same",
            out_tools: "A Bd",
            path: Main,
        },
        Case {
            name: "P7 in-history keeps the removed definition",
            messages: "u1 d1(+B) u2 d2(-B) u3",
            tools: Some("A"),
            mode: Some(InHistory),
            history: Some(("A", &[("d1", "B"), ("d2", "")])),
            out_messages: "same",
            out_tools: "A Bd",
            path: Main,
        },
        Case {
            name: "P8 addition-only drops the removed name and its blocks",
            messages: "u1 d1(+B) u2 d2(-B) u3",
            tools: Some("A"),
            mode: Some(AdditionOnly),
            history: Some(("A", &[("d1", "B"), ("d2", "")])),
            out_messages: "u1 u2 u3",
            out_tools: "A",
            path: Main,
        },
        Case {
            name: "P9 in-history removal of a baseline tool",
            messages: "u1 d1(-A)",
            tools: Some("B"),
            mode: Some(InHistory),
            history: Some(("A B", &[("d1", "")])),
            out_messages: "same",
            out_tools: "A B",
            path: Main,
        },
        Case {
            name: "P10 addition-only drops the removal and the declaration",
            messages: "u1 d1(-A)",
            tools: Some("B"),
            mode: Some(AdditionOnly),
            history: Some(("A B", &[("d1", "")])),
            out_messages: "u1",
            out_tools: "B",
            path: Main,
        },
        Case {
            name: "P11 a developer message of an older series is dropped",
            messages: "u1 d0(+B) u2",
            tools: Some("A B"),
            mode: Some(InHistory),
            history: Some(("A B", &[])),
            out_messages: "u1 u2",
            out_tools: "A B",
            path: Main,
        },
        Case {
            name: "P12 the addition activates a deferred baseline tool",
            messages: "u1 d1(+C)",
            tools: Some("A Cd"),
            mode: Some(InHistory),
            history: Some(("A Cd", &[("d1", "Cd")])),
            out_messages: "same",
            out_tools: "A Cd",
            path: Main,
        },
        Case {
            name: "P13 addition-only keeps an explicitly deferred baseline tool",
            messages: "u1",
            tools: Some("A Cd"),
            mode: Some(AdditionOnly),
            history: Some(("A Cd", &[])),
            out_messages: "same",
            out_tools: "A Cd",
            path: Main,
        },
        Case {
            name: "P14a only a deferred declaration would remain",
            messages: "u1 d1(+B,note,-A)",
            tools: Some("B"),
            mode: Some(AdditionOnly),
            history: Some(("A", &[("d1", "B")])),
            out_messages: "u1",
            out_tools: "same",
            path: AllDeferred,
        },
        Case {
            name: "P14a' addition-only drops the removal block, keeps text",
            messages: "u1 d1(+B,note,-A)",
            tools: Some("B C"),
            mode: Some(AdditionOnly),
            history: Some(("A C", &[("d1", "B")])),
            out_messages: "u1 d1(+B,note)",
            out_tools: "C Bd",
            path: Main,
        },
        Case {
            name: "P14i in-history keeps every block",
            messages: "u1 d1(+B,note,-A)",
            tools: Some("B"),
            mode: Some(InHistory),
            history: Some(("A", &[("d1", "B")])),
            out_messages: "same",
            out_tools: "A Bd",
            path: Main,
        },
        Case {
            name: "P15 a redundant addition is dropped",
            messages: "u1 d1(+B) d2(+B)",
            tools: Some("A B"),
            mode: Some(InHistory),
            history: Some(("A", &[("d1", "B"), ("d2", "B")])),
            out_messages: "u1 d1(+B)",
            out_tools: "A Bd",
            path: Main,
        },
        Case {
            name: "P16i restore: declared once, every block kept",
            messages: "u1 d1(+B) u2 d2(-B) u3 d3(+B) u4",
            tools: Some("A B"),
            mode: Some(InHistory),
            history: Some(("A", &[("d1", "B"), ("d2", ""), ("d3", "B")])),
            out_messages: "same",
            out_tools: "A Bd",
            path: Main,
        },
        Case {
            name: "P16a restore on addition-only: removal and re-addition dropped",
            messages: "u1 d1(+B) u2 d2(-B) u3 d3(+B) u4",
            tools: Some("A B"),
            mode: Some(AdditionOnly),
            history: Some(("A", &[("d1", "B"), ("d2", ""), ("d3", "B")])),
            out_messages: "u1 d1(+B) u2 u3 u4",
            out_tools: "A Bd",
            path: Main,
        },
        Case {
            name: "P17 a removal of a name never offered is dropped",
            messages: "u1 d1(-Z)",
            tools: Some("A"),
            mode: Some(InHistory),
            history: Some(("A", &[("d1", "")])),
            out_messages: "u1",
            out_tools: "A",
            path: Main,
        },
        Case {
            name: "P18 absent tools, empty snapshot: empty declarations, not absent",
            messages: "u1",
            tools: None,
            mode: Some(InHistory),
            history: Some(("", &[])),
            out_messages: "same",
            out_tools: "",
            path: Main,
        },
        Case {
            name: "P19a addition-only keeps the surviving addition only",
            messages: "u1 d1(+B,+C) u2 d2(-C)",
            tools: Some("A B"),
            mode: Some(AdditionOnly),
            history: Some(("A", &[("d1", "B C"), ("d2", "")])),
            out_messages: "u1 d1(+B) u2",
            out_tools: "A Bd",
            path: Main,
        },
        Case {
            name: "P19i in-history keeps both additions and the removal",
            messages: "u1 d1(+B,+C) u2 d2(-C)",
            tools: Some("A B"),
            mode: Some(InHistory),
            history: Some(("A", &[("d1", "B C"), ("d2", "")])),
            out_messages: "same",
            out_tools: "A Bd Cd",
            path: Main,
        },
        Case {
            name: "P20 every declaration would be deferred",
            messages: "u1 d1(+B)",
            tools: Some("B"),
            mode: Some(InHistory),
            history: Some(("", &[("d1", "B")])),
            out_messages: "u1",
            out_tools: "same",
            path: AllDeferred,
        },
        Case {
            name: "P21 +A re-offers the non-deferred A (v4)",
            messages: "u1 d1(-A) u2 d2(+A) u3",
            tools: Some("A B"),
            mode: Some(InHistory),
            history: Some(("A B", &[("d1", ""), ("d2", "A")])),
            out_messages: "same",
            out_tools: "A B",
            path: Main,
        },
        Case {
            name: "P21a on addition-only -A and +A are dropped (A was never withdrawn there)",
            messages: "u1 d1(-A) u2 d2(+A) u3",
            tools: Some("A B"),
            mode: Some(AdditionOnly),
            history: Some(("A B", &[("d1", ""), ("d2", "A")])),
            out_messages: "u1 u2 u3",
            out_tools: "A B",
            path: Main,
        },
        Case {
            name: "P22 every given tool deferred: cleared",
            messages: "u1",
            tools: Some("Cd"),
            mode: Some(InHistory),
            history: Some(("Cd", &[])),
            out_messages: "same",
            out_tools: "C",
            path: AllDeferred,
        },
        Case {
            name: "P23 absent tools stay absent on a fallback",
            messages: "u1 d1(+B)",
            tools: None,
            mode: Some(InHistory),
            history: Some(("", &[("d1", "B")])),
            out_messages: "u1",
            out_tools: "absent",
            path: AllDeferred,
        },
    ];
    for c in &cases {
        check(c);
    }
}

/// Each rule of reference §5, in each of the three modes, beyond the P rows.
#[test]
fn rules_in_every_mode() {
    const H_B: &[(&str, &str)] = &[("d1", "B")];
    let cases = [
        // Rule 1.
        Case {
            name: "rule 1: absent tools stay absent",
            messages: "u1 d1(+B) a1",
            tools: None,
            mode: None,
            history: Some(("A", H_B)),
            out_messages: "u1 a1",
            out_tools: "absent",
            path: NoMode,
        },
        Case {
            name: "rule 1: no deferred tool, tools borrowed; other roles kept",
            messages: "s1 u1 a1",
            tools: Some("A B"),
            mode: None,
            history: Some(("A", &[])),
            out_messages: "same",
            out_tools: "same",
            path: NoMode,
        },
        // Rule 2.
        Case {
            name: "rule 2 in-history: every given tool deferred is cleared",
            messages: "u1",
            tools: Some("Ad Bd"),
            mode: Some(InHistory),
            history: None,
            out_messages: "same",
            out_tools: "A B",
            path: NoHistory,
        },
        Case {
            name: "rule 2 addition-only: one immediately available tool, as given",
            messages: "u1 d1(+B)",
            tools: Some("A Bd"),
            mode: Some(AdditionOnly),
            history: None,
            out_messages: "u1",
            out_tools: "same",
            path: NoHistory,
        },
        Case {
            name: "rule 2: absent tools stay absent, empty tools stay empty",
            messages: "u1",
            tools: None,
            mode: Some(AdditionOnly),
            history: None,
            out_messages: "same",
            out_tools: "absent",
            path: NoHistory,
        },
        Case {
            name: "rule 2: empty tools are as given",
            messages: "u1",
            tools: Some(""),
            mode: Some(InHistory),
            history: None,
            out_messages: "same",
            out_tools: "same",
            path: NoHistory,
        },
        // Rule 3.
        Case {
            name: "rule 3 in-history: a compacted surface lost an update",
            messages: "u9 d2(-B) u3",
            tools: Some("A"),
            mode: Some(InHistory),
            history: Some(("A", &[("d1", "B"), ("d2", "")])),
            out_messages: "u9 u3",
            out_tools: "same",
            path: MissingUpdate,
        },
        Case {
            name: "rule 3: the id must be a developer message's, not a user message's",
            messages: "u1 d2(+B)",
            tools: Some("A B"),
            mode: Some(InHistory),
            history: Some(("A", &[("u1", ""), ("d2", "B")])),
            out_messages: "u1",
            out_tools: "same",
            path: MissingUpdate,
        },
        Case {
            name: "rule 3 with every given tool deferred clears them",
            messages: "u1",
            tools: Some("Ad"),
            mode: Some(AdditionOnly),
            history: Some(("A", H_B)),
            out_messages: "same",
            out_tools: "A",
            path: MissingUpdate,
        },
        Case {
            name: "no mode ignores a missing update",
            messages: "u1",
            tools: Some("A B"),
            mode: None,
            history: Some(("A", H_B)),
            out_messages: "same",
            out_tools: "same",
            path: NoMode,
        },
        // Rule 4.
        Case {
            name: "rule 4: additions follow the snapshot in update order, first wins",
            messages: "u1 d1(+C,+B) d2(+B,+D)",
            tools: Some("A B C D"),
            mode: Some(InHistory),
            history: Some(("A", &[("d1", "C B"), ("d2", "B D")])),
            out_messages: "u1 d1(+C,+B) d2(+D)",
            out_tools: "A Cd Bd Dd",
            path: Main,
        },
        Case {
            name: "rule 4: an addition of a baseline name is not declared twice",
            messages: "u1 d1(+B)",
            tools: Some("A B"),
            mode: Some(InHistory),
            history: Some(("A Bd", &[("d1", "B")])),
            out_messages: "same",
            out_tools: "A Bd",
            path: Main,
        },
        Case {
            name: "rule 4 addition-only: absent tools remove every declaration",
            messages: "u1 d1(+B)",
            tools: None,
            mode: Some(AdditionOnly),
            history: Some(("A", H_B)),
            out_messages: "u1",
            out_tools: "",
            path: Main,
        },
        Case {
            name: "rule 4 in-history keeps declarations absent from tools",
            messages: "u1 d1(+B)",
            tools: None,
            mode: Some(InHistory),
            history: Some(("A", H_B)),
            out_messages: "same",
            out_tools: "A Bd",
            path: Main,
        },
        Case {
            name: "rule 4 addition-only: all-deferred after filtering, absent tools",
            messages: "u1 d1(+B)",
            tools: None,
            mode: Some(AdditionOnly),
            history: Some(("Ad", H_B)),
            out_messages: "u1",
            out_tools: "",
            path: Main,
        },
        Case {
            name: "rule 4: a deferred baseline and a deferred addition only",
            messages: "u1 d1(+B)",
            tools: Some("Ad B"),
            mode: Some(AdditionOnly),
            history: Some(("Ad", H_B)),
            out_messages: "u1",
            out_tools: "same",
            path: AllDeferred,
        },
        // Rule 5.
        Case {
            name: "rule 5: text and unknown blocks stay in place",
            messages: "u1 d1(x,+B,?img,-A)",
            tools: Some("B"),
            mode: Some(AdditionOnly),
            history: Some(("A B", &[("d1", "")])),
            out_messages: "u1 d1(x,?img)",
            out_tools: "B",
            path: Main,
        },
        Case {
            name: "rule 5: a developer message of the series without blocks is dropped",
            messages: "u1 d1() u2",
            tools: Some("A"),
            mode: Some(InHistory),
            history: Some(("A", &[("d1", "")])),
            out_messages: "u1 u2",
            out_tools: "A",
            path: Main,
        },
        Case {
            name: "rule 5 in-history: a second removal of a name is dropped",
            messages: "u1 d1(-A,-A) d2(-A)",
            tools: Some("B"),
            mode: Some(InHistory),
            history: Some(("A B", &[("d1", ""), ("d2", "")])),
            out_messages: "u1 d1(-A)",
            out_tools: "A B",
            path: Main,
        },
        Case {
            name: "rule 5 addition-only: removals never touch offered (P21 log)",
            messages: "u1 d1(-A) u2 d2(+A) u3",
            tools: Some("A B"),
            mode: Some(AdditionOnly),
            history: Some(("A B", &[("d1", ""), ("d2", "A")])),
            out_messages: "u1 u2 u3",
            out_tools: "A B",
            path: Main,
        },
        Case {
            name: "rule 5: deferred baseline tool removed then re-added in history",
            messages: "u1 d1(+C) d2(-C) d3(+C)",
            tools: Some("A C"),
            mode: Some(InHistory),
            history: Some(("A Cd", &[("d1", "C"), ("d2", ""), ("d3", "C")])),
            out_messages: "same",
            out_tools: "A Cd",
            path: Main,
        },
        Case {
            name: "rule 5: an addition of an undeclared name is dropped",
            messages: "u1 d1(+B) d2(+Z)",
            tools: Some("A B"),
            mode: Some(InHistory),
            history: Some(("A", &[("d1", "B"), ("d2", "")])),
            out_messages: "u1 d1(+B)",
            out_tools: "A Bd",
            path: Main,
        },
    ];
    for c in &cases {
        check(c);
    }
}

#[test]
fn never_deep_copies() {
    let messages = msgs("u1 d1(+B,-A) u2 d0(+X) u3");
    let given = tools("B C");
    let history = hist("A C", &[("d1", "B")]);
    let out = project_tool_updates(&messages, Some(&given), Some(AdditionOnly), Some(&history));
    let out_messages = &out.messages;
    assert_eq!(msgs_spec(out_messages), "u1 d1(+B) u2 u3");
    // Unchanged messages are handle clones of the input.
    for (got, input) in [(0, 0), (2, 2), (3, 4)] {
        assert!(
            out_messages[got].ptr_eq(&messages[input]),
            "message {got} was copied"
        );
    }
    // A changed message keeps its id, role and source.
    let d1 = &out_messages[1];
    assert!(!d1.ptr_eq(&messages[1]));
    assert_eq!(
        (d1.id(), d1.role(), d1.source()),
        ("d1", Role::Developer, &MessageSource::ToolRegistry)
    );
    assert_eq!(messages[1].content().len(), 2, "the input is untouched");
    // Declarations share the snapshot's definitions, deferred or not.
    let declared = out.tools.unwrap();
    assert_eq!(tools_spec(&declared), "C Bd");
    assert!(declared[0].shares_definition_with(&history.tools()[1]));
    assert!(declared[1].shares_definition_with(&history.updates()[0].additions()[0]));
    let in_history = project_tool_updates(&messages, Some(&given), Some(InHistory), Some(&history));
    let declared = in_history.tools.unwrap();
    assert_eq!(tools_spec(&declared), "A C Bd");
    assert!(
        declared
            .iter()
            .zip(
                history
                    .tools()
                    .iter()
                    .chain(history.updates()[0].additions())
            )
            .all(|(d, h)| d.shares_definition_with(h))
    );
    // Cleared flags share definitions too.
    let deferred = tools("Ad Bd");
    let cleared = project_tool_updates(&messages, Some(&deferred), None, None);
    assert!(
        cleared
            .tools
            .unwrap()
            .iter()
            .zip(&deferred)
            .all(|(c, d)| c.shares_definition_with(d) && !c.defer_loading())
    );
}

#[test]
fn main_path_borrows_tools_that_are_the_snapshots_own() {
    let given = tools("A B");
    let history = ToolHistory::new(given.iter().cloned(), []);
    let messages = msgs("u1");
    let out = project_tool_updates(&messages, Some(&given), Some(InHistory), Some(&history));
    assert!(matches!(out.tools, Some(Cow::Borrowed(_))));
    // Equal by value but another allocation: owned (comparing content would cost more
    // than the copy of handles it saves).
    let other = tools("A B");
    let out = project_tool_updates(&messages, Some(&other), Some(InHistory), Some(&history));
    assert!(matches!(out.tools, Some(Cow::Owned(_))));
    assert_eq!(out.tools.as_deref(), Some(&other[..]));
    // Same allocation, other flag: owned.
    let deferred: Vec<_> = given.iter().map(|t| t.with_defer_loading(true)).collect();
    let history = ToolHistory::new([given[0].clone(), deferred[1].clone()], []);
    let out = project_tool_updates(&messages, Some(&given), Some(InHistory), Some(&history));
    assert_eq!(tools_spec(out.tools.as_deref().unwrap()), "A Bd");
}

#[test]
fn projection_json_shape() {
    let messages = msgs("u1 d1(+B)");
    let given = tools("A B");
    let history = hist("A", &[("d1", "B")]);
    let out = project_tool_updates(&messages, Some(&given), Some(InHistory), Some(&history));
    let v = serde_json::to_value(&out).unwrap();
    assert_eq!(v["tools"][0].get("deferLoading"), None);
    assert_eq!(v["tools"][1]["deferLoading"], json!(true));
    assert_eq!(
        v["messages"][1]["content"][0],
        json!({"type":"tool-addition","toolName":"B"})
    );
    let none = project_tool_updates(&messages, None, Some(InHistory), None);
    assert_eq!(
        serde_json::to_string(&none).unwrap(),
        r#"{"messages":[{"id":"u1","role":"user","content":[{"type":"text","text":"text of u1"}],"source":{"kind":"user"}}],"tools":null}"#
    );
}

#[test]
fn validate_tool_call_table() {
    let header = |spec: &str| RequestHeader::new(Config::new("p", "m"), tools(spec));
    let placeholder = ToolSchema::new(DEFERRED_PLACEHOLDER_NAME, "x", Map::new());
    let with_placeholder = RequestHeader::new(Config::new("p", "m"), vec![placeholder]);
    let with_empty = RequestHeader::new(
        Config::new("p", "m"),
        vec![ToolSchema::new("", "x", Map::new())],
    );
    let not = |n: &str| Err(UnknownTool::NotEffective { name: n.into() });
    let reserved = Err(UnknownTool::Reserved {
        name: DEFERRED_PLACEHOLDER_NAME.into(),
    });
    for (name, header, call, expect) in [
        ("effective", header("A B"), "B", Ok(())),
        ("deferred effective tool", header("A Bd"), "B", Ok(())),
        ("absent", header("A"), "B", not("B")),
        ("no tools", header(""), "A", not("A")),
        ("names are case-sensitive", header("A"), "a", not("a")),
        (
            "placeholder",
            header("A"),
            DEFERRED_PLACEHOLDER_NAME,
            reserved.clone(),
        ),
        (
            "placeholder even if a header has it",
            with_placeholder,
            DEFERRED_PLACEHOLDER_NAME,
            reserved,
        ),
        ("empty name", header("A"), "", Err(UnknownTool::EmptyName)),
        (
            "empty name even if a header built by code has it",
            with_empty,
            "",
            Err(UnknownTool::EmptyName),
        ),
    ] {
        assert_eq!(validate_tool_call(call, &header), expect, "{name}");
    }
    let err = validate_tool_call("B", &header("A")).unwrap_err();
    assert_eq!(err.name(), "B");
    assert_eq!(
        err.to_string(),
        "unknown tool `B`: not among the effective tools"
    );
}

/// A tool removed in history stays declared on an in-history route but is not callable:
/// the check reads the header's effective tools, never the declarations.
#[test]
fn removed_but_declared_is_unknown() {
    let messages = msgs("u1 d1(-B)");
    let history = hist("A B", &[("d1", "")]);
    let effective = tools("A");
    let out = project_tool_updates(&messages, Some(&effective), Some(InHistory), Some(&history));
    assert_eq!(tools_spec(out.tools.as_deref().unwrap()), "A B");
    let header = RequestHeader::new(Config::new("p", "m"), effective);
    assert_eq!(
        validate_tool_call("B", &header),
        Err(UnknownTool::NotEffective { name: "B".into() })
    );
}

#[test]
fn a_projection_that_drops_every_message_is_empty() {
    let messages = msgs("d1(+B) d2(-B)");
    let given = tools("A B");
    let out = project_tool_updates(&messages, Some(&given), None, None);
    assert!(out.messages.is_empty(), "{:?}", out.messages);
    assert!(!out.messages.is_borrowed() && out.messages.as_slice().is_none());
    assert_eq!(out.messages.iter().count(), 0);
    assert_eq!(serde_json::to_value(&out.messages).unwrap(), json!([]));
}
