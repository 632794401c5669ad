//! reference §1 validation: every rule refuses the bad event with its typed error naming the
//! event's `Seq`, leaves the log unchanged, and refuses the same line when loading (naming the
//! 1-based line), unless the line is an unterminated last line, which is torn.

mod support;

use mektpoy::{
    Config, ContentBlock, Event, Message, Session,
    event::{
        DecodeError, MessageEvent, OpaqueError, OpaqueEvent, Reason, RequestHeader, SurfaceOp,
    },
    session::{AppendError, AppendErrorKind, LoadError},
    vocab::{BlockError, MessageSource, Role, Seq, SourceError, ToolError},
};
use serde_json::json;
use support::*;

/// The refused event: a JSON line (for shapes the typed API cannot express) or a typed event.
enum Bad {
    Json(String),
    Typed(Event),
}

impl Bad {
    fn line(&self) -> String {
        match self {
            Bad::Json(l) => l.clone(),
            Bad::Typed(e) => e.to_json(),
        }
    }
}

type Expect = fn(&AppendError) -> bool;

struct Case {
    name: &'static str,
    given: Vec<String>,
    bad: Bad,
    /// The refusal `append` / `append_json` must give.
    append: Expect,
    /// The refusal loading the same line must give (differs from `append` only for typed
    /// events whose fault the decoder sees first).
    load: Expect,
}

fn json_case(name: &'static str, given: Vec<String>, bad: String, expect: Expect) -> Case {
    Case {
        name,
        given,
        bad: Bad::Json(bad),
        append: expect,
        load: expect,
    }
}

fn typed_case(
    name: &'static str,
    given: Vec<String>,
    bad: Event,
    append: Expect,
    load: Expect,
) -> Case {
    Case {
        name,
        given,
        bad: Bad::Typed(bad),
        append,
        load,
    }
}

/// Runs one case through `append`, `load` (terminated bad line, in the middle, and as an
/// unterminated last line) and checks what reference §1 and §2 promise.
fn check(case: &Case) {
    let name = case.name;
    let log = LogBuilder::new("s").lines(case.given.iter().cloned());
    let session = log.session("s");
    let n = session.len();
    assert_eq!(n, case.given.len(), "{name}");
    let events = session.events();
    let surface = session.surface();
    let generation = session.surface_generation();

    // append
    let err = match &case.bad {
        Bad::Json(l) => session.append_json(l),
        Bad::Typed(e) => session.append(e.clone()),
    }
    .expect_err(name);
    assert!((case.append)(&err), "{name}: unexpected refusal {err:?}");
    assert_eq!(err.seq(), Seq(n as u64), "{name}");
    let shown = err.to_string();
    assert!(shown.contains(&format!("event {n}")), "{name}: {shown}");
    assert_eq!(session.len(), n, "{name}: the log grew");
    assert_eq!(session.events(), events, "{name}");
    assert_eq!(session.surface(), surface, "{name}");
    assert_eq!(session.surface_generation(), generation, "{name}");
    // Nothing of the refused event stays behind (e.g. its message id).
    let fresh = format!("fresh-after-{}", n);
    assert_eq!(
        session.append(fresh_user(&fresh)).unwrap(),
        Seq(n as u64),
        "{name}"
    );

    let bad = case.bad.line();
    let line_no = n + 2;
    let expect_load_err = |result: Result<mektpoy::session::Loaded, LoadError>, how: &str| {
        let err = match result {
            Ok(_) => panic!("{name} ({how}): loaded a file with a bad line"),
            Err(e) => e,
        };
        let shown = err.to_string();
        match err {
            LoadError::Event { line, source } => {
                assert_eq!(line, line_no, "{name} ({how})");
                assert_eq!(source.seq(), Seq(n as u64), "{name} ({how})");
                assert!((case.load)(&source), "{name} ({how}): {source:?}");
                assert!(
                    shown.contains(&format!("line {line_no}")),
                    "{name}: {shown}"
                );
                assert!(shown.contains(&format!("event {n}")), "{name}: {shown}");
            }
            other => panic!("{name} ({how}): unexpected {other:?}"),
        }
    };

    // load: the bad line terminated, as the last line and in the middle
    let last = log.clone().line(bad.clone());
    expect_load_err(Session::load_bytes(last.text().as_bytes()), "last line");
    let middle = last.line(user("after-the-bad-line"));
    let dir = tempfile::tempdir().unwrap();
    let path = middle.write(dir.path(), "middle.jsonl");
    expect_load_err(Session::load(&path), "middle line, from a file");

    // load: the bad line unterminated at the end is a torn tail, not an error
    let prefix = log.text();
    let torn = format!("{prefix}{bad}");
    let loaded = Session::load_bytes(torn.as_bytes()).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(
        support::torn(loaded.torn_tail),
        Some((prefix.len() as u64, bad.len() as u64, None)),
        "{name}"
    );
    assert!(!loaded.unterminated, "{name}");
    assert_eq!(loaded.session.events(), events, "{name}");
}

fn run(cases: &[Case]) {
    for case in cases {
        check(case);
    }
}

fn decode(e: &AppendError, f: impl Fn(&DecodeError) -> bool) -> bool {
    matches!(e.kind(), AppendErrorKind::Decode { source, .. } if f(source))
}

/// `line` with `op` (e.g. [`APPEND`]) added as its last envelope key.
fn with_surface_op(line: &str, op: &str) -> String {
    format!("{}{op}}}", line.strip_suffix('}').unwrap())
}

fn header_line(data: &str) -> String {
    format!(r#"{{"type":"request/header","data":{data}}}"#)
}

#[test]
fn header_reason_and_config() {
    let h = |data: &str| header_line(data);
    run(&[
        json_case(
            "missing reason",
            vec![],
            h(r#"{"header":{"config":{"provider":"p","model":"m"}}}"#),
            |e| decode(e, |d| matches!(d, DecodeError::MissingReason)),
        ),
        json_case(
            "unknown reason",
            vec![user("u1")],
            h(r#"{"header":{"config":{"provider":"p","model":"m"}},"reason":"restart"}"#),
            |e| {
                decode(
                    e,
                    |d| matches!(d, DecodeError::UnknownReason(r) if r == "restart"),
                )
            },
        ),
        json_case(
            "reason that is not a string",
            vec![],
            h(r#"{"header":{"config":{"provider":"p","model":"m"}},"reason":1}"#),
            |e| decode(e, |d| matches!(d, DecodeError::UnknownReason(_))),
        ),
        json_case(
            "reason in the wrong case",
            vec![],
            h(r#"{"header":{"config":{"provider":"p","model":"m"}},"reason":"Initial"}"#),
            |e| decode(e, |d| matches!(d, DecodeError::UnknownReason(_))),
        ),
        json_case(
            "config without provider",
            vec![header(&["A"], "initial")],
            h(r#"{"header":{"config":{"model":"m"}},"reason":"change"}"#),
            |e| decode(e, |d| matches!(d, DecodeError::MissingConfig("provider"))),
        ),
        json_case(
            "config without model",
            vec![],
            h(r#"{"header":{"config":{"provider":"p","max_tokens":5}},"reason":"initial"}"#),
            |e| decode(e, |d| matches!(d, DecodeError::MissingConfig("model"))),
        ),
        json_case(
            "provider that is not a string",
            vec![],
            h(r#"{"header":{"config":{"provider":null,"model":"m"}},"reason":"initial"}"#),
            |e| decode(e, |d| matches!(d, DecodeError::MissingConfig("provider"))),
        ),
        json_case(
            "header without config",
            vec![],
            h(r#"{"header":{"tools":[]},"reason":"initial"}"#),
            |e| decode(e, |d| matches!(d, DecodeError::Field { .. })),
        ),
        json_case(
            "startsSeries that is not a boolean",
            vec![],
            h(
                r#"{"header":{"config":{"provider":"p","model":"m"}},"reason":"initial","startsSeries":1}"#,
            ),
            |e| decode(e, |d| matches!(d, DecodeError::Field { .. })),
        ),
    ]);
}

#[test]
fn header_tools() {
    let with_tools = |tools: &str| {
        header_line(&format!(
            r#"{{"header":{{"config":{{"provider":"p","model":"m"}},"tools":[{tools}]}},"reason":"initial"}}"#
        ))
    };
    let a = tool_json("A");
    run(&[
        json_case(
            "tool without name",
            vec![],
            with_tools(&format!(r#"{a},{{"description":"d","parameters":{{}}}}"#)),
            |e| {
                decode(e, |d| {
                    matches!(
                        d,
                        DecodeError::Tool {
                            index: 1,
                            source: ToolError::Field("name")
                        }
                    )
                })
            },
        ),
        json_case(
            "tool without description",
            vec![user("u1")],
            with_tools(r#"{"name":"x","parameters":{}}"#),
            |e| {
                decode(e, |d| {
                    matches!(
                        d,
                        DecodeError::Tool {
                            index: 0,
                            source: ToolError::Field("description")
                        }
                    )
                })
            },
        ),
        json_case(
            "tool without parameters",
            vec![],
            with_tools(r#"{"name":"x","description":"d"}"#),
            |e| {
                decode(e, |d| {
                    matches!(
                        d,
                        DecodeError::Tool {
                            source: ToolError::Field("parameters"),
                            ..
                        }
                    )
                })
            },
        ),
        json_case(
            "tool with array parameters",
            vec![],
            with_tools(r#"{"name":"x","description":"d","parameters":[]}"#),
            |e| {
                decode(e, |d| {
                    matches!(
                        d,
                        DecodeError::Tool {
                            source: ToolError::Field("parameters"),
                            ..
                        }
                    )
                })
            },
        ),
        json_case(
            "tool with string parameters",
            vec![],
            with_tools(r#"{"name":"x","description":"d","parameters":"{}"}"#),
            |e| {
                decode(e, |d| {
                    matches!(
                        d,
                        DecodeError::Tool {
                            source: ToolError::Field("parameters"),
                            ..
                        }
                    )
                })
            },
        ),
        json_case(
            "tool that is not an object",
            vec![],
            with_tools(r#""read""#),
            |e| {
                decode(e, |d| {
                    matches!(
                        d,
                        DecodeError::Tool {
                            source: ToolError::NotAnObject,
                            ..
                        }
                    )
                })
            },
        ),
        json_case(
            "tools that are not an array",
            vec![],
            header_line(
                r#"{"header":{"config":{"provider":"p","model":"m"},"tools":{}},"reason":"initial"}"#,
            ),
            |e| decode(e, |d| matches!(d, DecodeError::Field { .. })),
        ),
        json_case(
            "two tools with one name (JSON)",
            vec![header(&["A"], "initial")],
            header(&["A", "B", "A2"], "change"),
            |e| matches!(e.kind(), AppendErrorKind::DuplicateToolName { tool, .. } if tool == "A"),
        ),
        typed_case(
            "two tools with one name (typed)",
            vec![],
            Event::header(
                RequestHeader::new(Config::new("p", "m"), vec![tool("B"), tool("Bd")]),
                Reason::Initial,
            ),
            |e| matches!(e.kind(), AppendErrorKind::DuplicateToolName { tool, .. } if tool == "B"),
            |e| matches!(e.kind(), AppendErrorKind::DuplicateToolName { tool, .. } if tool == "B"),
        ),
    ]);
}

#[test]
fn surface_op_forms() {
    let on_user = |op: &str| {
        format!(
            r#"{{"type":"user/message","data":{{"message":{{"id":"x","role":"user","content":[],"source":{{"kind":"user"}}}}}},"surfaceOp":{op}}}"#
        )
    };
    let invalid: Expect = |e| decode(e, |d| matches!(d, DecodeError::InvalidSurfaceOp(_)));
    let on_header: Expect = |e| decode(e, |d| matches!(d, DecodeError::SurfaceOpOnHeader));
    let given = || vec![user("u1"), user("u2")];
    run(&[
        json_case(
            "surfaceOp append on a header",
            given(),
            with_surface_op(&header(&["A"], "initial"), APPEND),
            on_header,
        ),
        json_case(
            "surfaceOp replace on a header",
            given(),
            with_surface_op(&header(&[], "initial"), &replace_op(0, 1)),
            on_header,
        ),
        json_case(
            "unknown string form",
            given(),
            on_user(r#""prepend""#),
            invalid,
        ),
        json_case("null", given(), on_user("null"), invalid),
        json_case(
            "replace without end",
            given(),
            on_user(r#"{"op":"replace","start":0}"#),
            invalid,
        ),
        json_case(
            "replace with start after end",
            given(),
            on_user(r#"{"op":"replace","start":1,"end":0}"#),
            invalid,
        ),
        json_case(
            "replace with a negative start",
            given(),
            on_user(r#"{"op":"replace","start":-1,"end":0}"#),
            invalid,
        ),
        json_case(
            "replace with a fractional end",
            given(),
            on_user(r#"{"op":"replace","start":0,"end":0.5}"#),
            invalid,
        ),
        json_case(
            "replace with an extra key",
            given(),
            on_user(r#"{"op":"replace","start":0,"end":0,"count":1}"#),
            invalid,
        ),
        json_case(
            "another op",
            given(),
            on_user(r#"{"op":"insert","start":0,"end":0}"#),
            invalid,
        ),
        json_case(
            "append spelled as an object",
            given(),
            on_user(r#"{"op":"append"}"#),
            invalid,
        ),
        json_case(
            "invalid form on an unknown event",
            given(),
            r#"{"type":"note/x","data":{},"surfaceOp":"push"}"#.to_owned(),
            invalid,
        ),
    ]);
}

#[test]
fn replace_ranges_outside_the_surface() {
    let out: Expect = |e| matches!(e.kind(), AppendErrorKind::ReplaceOutOfRange { .. });
    // Two surface nodes (u1, opaque); u0 is log-only and does not count.
    let given = || {
        vec![
            message("user", "u0", LOG_ONLY),
            user("u1"),
            opaque("note/x", APPEND),
        ]
    };
    run(&[
        json_case(
            "end at the surface length",
            given(),
            message("user", "r", &replace_op(0, 2)),
            |e| {
                matches!(
                    e.kind(),
                    AppendErrorKind::ReplaceOutOfRange {
                        start: 0,
                        end: 2,
                        len: 2,
                        ..
                    }
                )
            },
        ),
        json_case(
            "start past the end",
            given(),
            message("user", "r", &replace_op(5, 6)),
            out,
        ),
        json_case(
            "replace on an empty surface",
            vec![message("user", "u0", LOG_ONLY)],
            message("user", "r", &replace_op(0, 0)),
            |e| matches!(e.kind(), AppendErrorKind::ReplaceOutOfRange { len: 0, .. }),
        ),
        json_case(
            "opaque replace outside the surface",
            given(),
            opaque("note/x", &replace_op(1, 2)),
            out,
        ),
        typed_case(
            "typed replace with start after end",
            given(),
            Event::replace(Message::user("r", "x"), 1, 0),
            out,
            |e| decode(e, |d| matches!(d, DecodeError::InvalidSurfaceOp(_))),
        ),
    ]);
}

#[test]
fn message_shapes_and_roles() {
    let mismatch: Expect = |e| decode(e, |d| matches!(d, DecodeError::RoleMismatch { .. }));
    let mut cases = Vec::new();
    // Each event type carrying a message of the next role.
    let roles = ["system", "developer", "user", "assistant", "tool"];
    for (i, role) in roles.iter().enumerate() {
        let other = roles[(i + 1) % roles.len()];
        let line = message(other, "x", APPEND).replacen(event_type(other), event_type(role), 1);
        cases.push(json_case(
            "role not matching the event type",
            vec![],
            line,
            mismatch,
        ));
    }
    let msg = |fields: &str| {
        format!(
            r#"{{"type":"user/message","data":{{"message":{{{fields}}}}},"surfaceOp":"append"}}"#
        )
    };
    let field = |what: &'static str| -> Expect {
        match what {
            "id" => |e| decode(e, |d| matches!(d, DecodeError::MessageField { what: "id" })),
            "role" => |e| {
                decode(e, |d| {
                    matches!(d, DecodeError::MessageField { what: "role" })
                })
            },
            "content" => |e| {
                decode(e, |d| {
                    matches!(d, DecodeError::MessageField { what: "content" })
                })
            },
            _ => |e| {
                decode(e, |d| {
                    matches!(d, DecodeError::MessageField { what: "source" })
                })
            },
        }
    };
    cases.extend([
        json_case(
            "message without id",
            vec![],
            msg(r#""role":"user","content":[],"source":{"kind":"user"}"#),
            field("id"),
        ),
        json_case(
            "message with an unknown role",
            vec![],
            msg(r#""id":"x","role":"robot","content":[],"source":{"kind":"user"}"#),
            field("role"),
        ),
        json_case(
            "message without content",
            vec![],
            msg(r#""id":"x","role":"user","source":{"kind":"user"}"#),
            field("content"),
        ),
        json_case(
            "message without source",
            vec![],
            msg(r#""id":"x","role":"user","content":[]"#),
            field("source"),
        ),
        json_case(
            "known source kind without its fields",
            vec![],
            msg(r#""id":"x","role":"user","content":[],"source":{"kind":"model"}"#),
            |e| decode(e, |d| matches!(d, DecodeError::MalformedSource { .. })),
        ),
        json_case(
            "message event without data",
            vec![],
            r#"{"type":"user/message","surfaceOp":"append"}"#.to_owned(),
            |e| decode(e, |d| matches!(d, DecodeError::MissingData { .. })),
        ),
        json_case(
            "event without type",
            vec![],
            r#"{"data":{}}"#.to_owned(),
            |e| decode(e, |d| matches!(d, DecodeError::MissingType)),
        ),
        json_case(
            "event that is not an object",
            vec![],
            "[1]".to_owned(),
            |e| decode(e, |d| matches!(d, DecodeError::NotAnObject)),
        ),
        json_case(
            "malformed JSON",
            vec![],
            r#"{"type":"user/message","#.to_owned(),
            |e| decode(e, |d| matches!(d, DecodeError::Json(_))),
        ),
        json_case(
            "a number serde_json cannot hold",
            vec![],
            r#"{"type":"note/x","data":{"n":1e400}}"#.to_owned(),
            |e| decode(e, |d| matches!(d, DecodeError::Json(_))),
        ),
        json_case(
            "source of a known kind without its fields",
            vec![],
            r#"{"type":"user/message","data":{"message":{"id":"x","role":"user","content":[],"source":{"kind":"model"}}},"surfaceOp":"append"}"#.to_owned(),
            |e| decode(e, |d| matches!(d, DecodeError::MalformedSource { id, reason: SourceError::Field { kind: "model", field: "provider" } } if id == "x")),
        ),
    ]);
    run(&cases);
    // A source of a known kind cannot be built as `Other` (append used to refuse it as
    // `MalformedSource`).
    assert_eq!(
        MessageSource::other(json!({"kind": "model"})),
        Err(SourceError::KnownKind { kind: "model" })
    );
}

#[test]
fn malformed_known_content_blocks() {
    let with_block = |block: &str| {
        format!(
            r#"{{"type":"assistant/message","data":{{"message":{{"id":"x","role":"assistant","content":[{{"type":"text","text":"ok"}},{block}],"source":{{"kind":"model","provider":"p","model":"m"}}}}}},"surfaceOp":"append"}}"#
        )
    };
    let at_1: Expect = |e| {
        decode(
            e,
            |d| matches!(d, DecodeError::MalformedBlock { id, index: 1, .. } if id == "x"),
        )
    };
    let cases: Vec<Case> = [
        r#"{"type":"tool-call","name":"read","arguments":"{}"}"#,
        r#"{"type":"tool-call","id":"c1","name":"read","arguments":{}}"#,
        r#"{"type":"text"}"#,
        r#"{"type":"text","text":3}"#,
        r#"{"type":"reasoning","signature":"s"}"#,
        r#"{"type":"tool-addition","name":"A"}"#,
        r#"{"type":"tool-removal"}"#,
        r#"{"text":"a block without type"}"#,
        r#"{"type":7}"#,
        r#""text""#,
    ]
    .iter()
    .map(|b| json_case("malformed known block", vec![], with_block(b), at_1))
    .collect();
    run(&cases);
    // Blocks a log would refuse cannot be built as `Other` (append used to refuse them as
    // `MalformedBlock`); their lines are the JSON cases above.
    assert_eq!(
        ContentBlock::other(json!({"type": "text"})),
        Err(BlockError::KnownType { block_type: "text" })
    );
    assert_eq!(
        ContentBlock::other(json!("loose text")),
        Err(BlockError::NotAnObject)
    );
    assert_eq!(
        ContentBlock::other(json!({"text": "a block without type"})),
        Err(BlockError::MissingType)
    );
}

#[test]
fn duplicate_message_ids() {
    let dup: Expect =
        |e| matches!(e.kind(), AppendErrorKind::DuplicateMessageId { id, .. } if id == "u1");
    run(&[
        json_case(
            "same id, same role",
            vec![user("u1"), assistant("a1")],
            user("u1"),
            dup,
        ),
        json_case(
            "same id on another role, log-only",
            vec![header(&["A"], "initial"), user("u1")],
            message("assistant", "u1", LOG_ONLY),
            dup,
        ),
        json_case(
            "id of a message replaced off the surface",
            vec![user("u1"), message("user", "sum", &replace_op(0, 0))],
            user("u1"),
            dup,
        ),
        typed_case(
            "typed",
            vec![user("u1")],
            Event::developer(Message::developer("u1", vec![]), None),
            dup,
            dup,
        ),
    ]);
}

#[test]
fn header_references_and_tool_change_blocks() {
    let h0 = || header(&["A"], "initial");
    let unknown = |at: u64| -> Expect {
        match at {
            1 => |e| {
                matches!(
                    e.kind(),
                    AppendErrorKind::UnknownHeader { header: Seq(1), .. }
                )
            },
            2 => |e| {
                matches!(
                    e.kind(),
                    AppendErrorKind::UnknownHeader { header: Seq(2), .. }
                )
            },
            _ => |e| {
                matches!(
                    e.kind(),
                    AppendErrorKind::UnknownHeader { header: Seq(9), .. }
                )
            },
        }
    };
    run(&[
        json_case(
            "headerSeq naming a message",
            vec![h0(), user("u1")],
            dev("d1", &["+A"], Some(1)),
            unknown(1),
        ),
        json_case(
            "headerSeq naming the event itself",
            vec![h0(), user("u1")],
            dev("d1", &["+A"], Some(2)),
            unknown(2),
        ),
        json_case(
            "headerSeq naming a later position",
            vec![h0()],
            dev("d1", &["-A"], Some(9)),
            unknown(9),
        ),
        json_case(
            "headerSeq naming an unknown event",
            vec![h0(), opaque("request/headers", APPEND)],
            dev("d1", &[], Some(1)),
            unknown(1),
        ),
        json_case(
            "addition absent from the named header (reference example F10)",
            vec![h0(), header(&["A"], "change")],
            dev("d1", &["+B"], Some(1)),
            |e| matches!(e.kind(), AppendErrorKind::AdditionNotInHeader { id, tool, header: Seq(1), .. } if id == "d1" && tool == "B"),
        ),
        json_case(
            "addition present only in another header",
            vec![header(&["A", "B"], "initial"), header(&["A"], "change")],
            dev("d1", &["+B"], Some(1)),
            |e| matches!(e.kind(), AppendErrorKind::AdditionNotInHeader { .. }),
        ),
        json_case(
            "addition without headerSeq",
            vec![h0(), header(&["A", "B"], "change")],
            dev("d1", &["-A", "+B"], None),
            |e| matches!(e.kind(), AppendErrorKind::AdditionWithoutHeaderSeq { id, tool, .. } if id == "d1" && tool == "B"),
        ),
        json_case(
            "tool-addition in a user message",
            vec![h0()],
            user("u1").replace(
                r#"{"type":"text","text":"text of u1"}"#,
                r#"{"type":"tool-addition","toolName":"A"}"#,
            ),
            |e| {
                matches!(
                    e.kind(),
                    AppendErrorKind::ToolChangeOutsideDeveloper {
                        role: Role::User,
                        ..
                    }
                )
            },
        ),
        json_case(
            "tool-removal in an assistant message",
            vec![h0()],
            assistant("a1").replace(
                r#"{"type":"text","text":"text of a1"}"#,
                r#"{"type":"text","text":"x"},{"type":"tool-removal","toolName":"A"}"#,
            ),
            |e| {
                matches!(
                    e.kind(),
                    AppendErrorKind::ToolChangeOutsideDeveloper {
                        role: Role::Assistant,
                        ..
                    }
                )
            },
        ),
        typed_case(
            "tool-change block in a system message",
            vec![h0()],
            Event::append(Message::new(
                "s1",
                Role::System,
                vec![ContentBlock::removal("A").unwrap()],
                MessageSource::SystemPrompt,
            )),
            |e| {
                matches!(
                    e.kind(),
                    AppendErrorKind::ToolChangeOutsideDeveloper {
                        role: Role::System,
                        ..
                    }
                )
            },
            |e| {
                matches!(
                    e.kind(),
                    AppendErrorKind::ToolChangeOutsideDeveloper {
                        role: Role::System,
                        ..
                    }
                )
            },
        ),
        typed_case(
            "tool-change block in a tool result",
            vec![h0()],
            Event::append(Message::new(
                "t1",
                Role::Tool,
                vec![ContentBlock::addition("A").unwrap()],
                MessageSource::Tool {
                    call_id: "c1".into(),
                },
            )),
            |e| {
                matches!(
                    e.kind(),
                    AppendErrorKind::ToolChangeOutsideDeveloper {
                        role: Role::Tool,
                        ..
                    }
                )
            },
            |e| {
                matches!(
                    e.kind(),
                    AppendErrorKind::ToolChangeOutsideDeveloper {
                        role: Role::Tool,
                        ..
                    }
                )
            },
        ),
        typed_case(
            "headerSeq on a user message",
            vec![h0()],
            Event::Message(MessageEvent {
                header_seq: Some(Seq(0)),
                ..MessageEvent::new(Message::user("u1", "hi"), Some(SurfaceOp::Append))
            }),
            |e| {
                matches!(
                    e.kind(),
                    AppendErrorKind::HeaderSeqOutsideDeveloper {
                        role: Role::User,
                        ..
                    }
                )
            },
            |e| {
                matches!(
                    e.kind(),
                    AppendErrorKind::HeaderSeqOutsideDeveloper {
                        role: Role::User,
                        ..
                    }
                )
            },
        ),
    ]);
}

/// Events a typed caller can build but whose line would not read back as the same event: a
/// persisting session must not write a line that makes its own file unloadable.
#[test]
fn typed_events_that_would_not_read_back() {
    // An opaque event claiming a known type cannot be built (append used to refuse it as
    // `OpaqueKnownType`); its line does not decode.
    let mut cases = Vec::new();
    for ty in [
        "request/header",
        "user/message",
        "developer/message",
        "system/message",
        "assistant/message",
        "tool/result",
    ] {
        let fields = [("data".to_owned(), json!({}))].into_iter().collect();
        assert_eq!(
            OpaqueEvent::new(ty, fields, Some(SurfaceOp::Append)),
            Err(OpaqueError::KnownType {
                event_type: ty.to_owned()
            }),
            "{ty}"
        );
        cases.push(json_case(
            "line of an opaque event claiming a known type",
            vec![user("u1")],
            format!(r#"{{"type":"{ty}","data":{{}},"surfaceOp":"append"}}"#),
            |e| matches!(e.kind(), AppendErrorKind::Decode { .. }),
        ));
    }
    for ty in ["thinking/policy", "thinking/floor", "session"] {
        assert!(
            matches!(
                OpaqueEvent::new(ty, Default::default(), None),
                Err(OpaqueError::KnownType { .. })
            ),
            "{ty}"
        );
    }
    run(&cases);

    // Reserved keys in the maps of unknown fields would shadow the known ones. A config cannot
    // even hold one (issue 21: `Config::with` refuses it where it is written).
    assert_eq!(
        Config::new("p", "m").with("model", json!(5)).unwrap_err(),
        mektpoy::event::ConfigError::ReservedKey { key: "model" }
    );
    let s = Session::new("s");
    let mut header = RequestHeader::new(Config::new("p", "m"), vec![tool("A")]);
    header.extra.insert("tools".into(), json!(7));
    let err = s
        .append(Event::header(header, Reason::Initial))
        .unwrap_err();
    assert!(
        matches!(err.kind(), AppendErrorKind::ReservedKey { key, .. } if key == "tools"),
        "{err:?}"
    );
    // An opaque event's fields cannot shadow them: `OpaqueEvent::new` refuses the keys
    // (append used to refuse them as `ReservedKey`).
    for key in ["type", "surfaceOp"] {
        let fields = [(key.to_owned(), json!("append"))].into_iter().collect();
        assert_eq!(
            OpaqueEvent::new("note/x", fields, None),
            Err(OpaqueError::ReservedKey {
                key: key.to_owned()
            })
        );
    }
    let fine = [("data".to_owned(), json!({}))].into_iter().collect();
    s.append(OpaqueEvent::new("note/x", fine, None).unwrap().into())
        .unwrap();
    assert_eq!(s.len(), 1);
    let s = Session::new("s");
    let reasoning = ContentBlock::Reasoning {
        text: "r".into(),
        extra: [("type".to_owned(), json!("text"))].into_iter().collect(),
    };
    let err = s
        .append(Event::append(Message::new(
            "a1",
            Role::Assistant,
            vec![reasoning],
            MessageSource::User,
        )))
        .unwrap_err();
    assert!(
        matches!(err.kind(), AppendErrorKind::ReservedKey { key, .. } if key == "type"),
        "{err:?}"
    );
    assert_eq!(s.len(), 0);
    // An unknown key that shadows nothing is fine.
    let config = Config::new("p", "m").with("max_tokens", json!(5)).unwrap();
    s.append(Event::header(
        RequestHeader::new(config, vec![]),
        Reason::Initial,
    ))
    .unwrap();
}

#[test]
fn accepted_edge_cases() {
    let s = LogBuilder::new("s")
        .lines([
            header(&["A", "Cd"], "initial"),
            user("u1"),
            // reference §1: a headerSeq on a developer message without additions is accepted.
            dev("d0", &["-A"], Some(0)),
            dev("d1", &["just a note"], Some(0)),
            dev("d2", &[], Some(0)),
            // An addition pointing at the series' own first header (reference example F9).
            dev("d3", &["+C", "+A"], Some(0)),
            // startsSeries false reads as absent.
            header(&["A"], "resume").replace(
                r#""reason":"resume""#,
                r#""reason":"resume","startsSeries":false"#,
            ),
            // An unknown event with surfaceOp is a node replace ranges count.
            opaque("note/x", APPEND),
            // Replace exactly the last node.
            message("system", "s1", &replace_op(5, 5)),
            opaque("note/y", LOG_ONLY),
        ])
        .session("s");
    assert_eq!(s.len(), 10);
    let (_, h) = s.request_header().unwrap();
    assert!(!h.starts_series);
    assert_eq!(s.surface().len(), 6);
    assert_eq!(s.surface_generation(), 1);
    // And a replace may cover the whole surface.
    let seq = s
        .append_json(&message("user", "all", &replace_op(0, 5)))
        .unwrap();
    assert_eq!(seq, Seq(10));
    assert_eq!(s.surface().len(), 1);
    assert_eq!(s.messages()[0].id(), "all");
}

/// A by-value addition exists only in projections: appending a projected message is refused,
/// and its JSON does not decode back into a log block.
#[test]
fn a_by_value_addition_never_reaches_a_log() {
    use mektpoy::{
        ToolSchema,
        history::{ToolHistory, ToolUpdate},
        project::project_tool_updates_inline,
    };
    let a = ToolSchema::new("a", "a", serde_json::Map::new());
    let b = ToolSchema::new("b", "b", serde_json::Map::new());
    let messages = [
        Message::user("u1", "hi"),
        Message::developer("d1", vec![ContentBlock::addition("b").unwrap()]),
    ];
    let history = ToolHistory::new([a.clone()], [ToolUpdate::new("d1", [b.clone()])]);
    let tools = [a, b];
    let out = project_tool_updates_inline(&messages, Some(&tools), Some(&history));
    let projected = out.messages[1].clone();
    assert!(matches!(
        projected.content()[0],
        ContentBlock::InlineAddition(_)
    ));
    let session = Session::new("s");
    let err = session
        .append(Event::developer(projected.clone(), None))
        .unwrap_err();
    assert!(
        matches!(
            err.kind(),
            AppendErrorKind::ProjectionOnlyBlock { index: 0, .. }
        ),
        "{err}"
    );
    assert!(session.is_empty());
    let json = serde_json::to_value(&projected).unwrap();
    assert_eq!(
        json["content"][0],
        serde_json::json!({"type":"tool-addition","toolName":"b","definition":{"name":"b","description":"b","parameters":{}}})
    );
    assert!(serde_json::from_value::<Message>(json).is_err());
}

/// Issue 10 item 6: a key twice in one object, at any depth of the line, is refused instead of
/// read as the last one (`"reason":"bogus","reason":"change"` loaded as `change`).
#[test]
fn duplicate_keys_anywhere_in_a_line() {
    // A non-capturing closure, so that it is an `Expect`.
    macro_rules! dup {
        ($key:literal) => {
            |e: &AppendError| {
                decode(
                    e,
                    |d| matches!(d, DecodeError::DuplicateKey { key } if key == $key),
                )
            }
        };
    }
    let config = r#"{"provider":"p","model":"m"}"#;
    let user_with = |block: &str| {
        format!(
            r#"{{"type":"user/message","data":{{"message":{{"id":"x","role":"user","content":[{block}],"source":{{"kind":"user"}}}}}},"surfaceOp":"append"}}"#
        )
    };
    run(&[
        json_case(
            "the issue's line: reason twice",
            vec![header(&["A"], "initial")],
            header_line(&format!(
                r#"{{"header":{{"config":{config}}},"reason":"bogus","reason":"change"}}"#
            )),
            dup!("reason"),
        ),
        json_case(
            "reason twice, one spelled with an escape",
            vec![],
            header_line(&format!(
                r#"{{"header":{{"config":{config}}},"reason":"initial","\u0072eason":"change"}}"#
            )),
            dup!("reason"),
        ),
        json_case(
            "type twice in the envelope",
            vec![],
            r#"{"type":"user/message","type":"plugin/x","data":{}}"#.to_owned(),
            dup!("type"),
        ),
        json_case(
            "data twice in the envelope",
            vec![],
            header_line(&format!(r#"{{"header":{{"config":{config}}},"reason":"initial"}},"data":{{}}"#)),
            dup!("data"),
        ),
        json_case(
            "provider twice in a config",
            vec![],
            header_line(
                r#"{"header":{"config":{"provider":"p","model":"m","provider":"q"}},"reason":"initial"}"#,
            ),
            dup!("provider"),
        ),
        json_case(
            "a key twice deep inside tool parameters",
            vec![],
            header_line(
                r#"{"header":{"config":{"provider":"p","model":"m"},"tools":[{"name":"A","description":"A","parameters":{"properties":{"p":{"x":1,"x":2}}}}]},"reason":"initial"}"#,
            ),
            dup!("x"),
        ),
        json_case(
            "a tool's name twice",
            vec![],
            header_line(
                r#"{"header":{"config":{"provider":"p","model":"m"},"tools":[{"name":"A","name":"B","description":"A","parameters":{}}]},"reason":"initial"}"#,
            ),
            dup!("name"),
        ),
        json_case(
            "a message id twice",
            vec![],
            r#"{"type":"user/message","data":{"message":{"id":"a","id":"b","role":"user","content":[],"source":{"kind":"user"}}},"surfaceOp":"append"}"#.to_owned(),
            dup!("id"),
        ),
        json_case(
            "a block's text twice",
            vec![user("u1")],
            user_with(r#"{"type":"text","text":"safe","text":"unsafe"}"#),
            dup!("text"),
        ),
        json_case(
            "a key twice inside an unknown block",
            vec![],
            user_with(r#"{"type":"image","meta":{"x":1,"x":1}}"#),
            dup!("x"),
        ),
        json_case(
            "a key twice in an ignored data field",
            vec![],
            r#"{"type":"user/message","data":{"note":{"x":1,"x":2},"message":{"id":"a","role":"user","content":[],"source":{"kind":"user"}}},"surfaceOp":"append"}"#.to_owned(),
            dup!("x"),
        ),
        json_case(
            "a key twice in an opaque event",
            vec![],
            r#"{"type":"plugin/x","data":{"x":1,"x":2}}"#.to_owned(),
            dup!("x"),
        ),
        json_case(
            "a key twice in a data read before its type",
            vec![],
            format!(r#"{{"data":{{"header":{{"config":{config}}},"reason":"initial","reason":"change"}},"type":"request/header"}}"#),
            dup!("reason"),
        ),
        json_case(
            "many keys, the repeat far in (indexed, not scanned)",
            vec![],
            format!(
                r#"{{"type":"user/message","data":{{{},"message":{{"id":"a","role":"user","content":[],"source":{{"kind":"user"}}}},"k3":0}},"surfaceOp":"append"}}"#,
                (0..40).map(|i| format!(r#""k{i}":{i}"#)).collect::<Vec<_>>().join(",")
            ),
            dup!("k3"),
        ),
    ]);
}

/// A line whose `data` comes before its `type` decodes to the same event, and any JSON value
/// decodes the same from text and from a `Value`.
#[test]
fn key_order_does_not_change_the_decoded_event() {
    let lines = [
        header(&["A", "Bd"], "initial"),
        user("u1"),
        dev("d1", &["+B", "-A", "note"], Some(0)),
        opaque("plugin/x", APPEND),
    ];
    for line in lines {
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        let obj = v.as_object().unwrap();
        // Every key but `type` first, then `type`.
        let mut reordered = String::from("{");
        for (k, v) in obj.iter().filter(|(k, _)| *k != "type") {
            reordered.push_str(&format!("{}:{v},", serde_json::Value::from(k.as_str())));
        }
        reordered.push_str(&format!(r#""type":{}}}"#, obj["type"]));
        let a = Event::from_json(&line).unwrap();
        let b = Event::from_json(&reordered).unwrap_or_else(|e| panic!("{reordered}: {e}"));
        let c = Event::from_value(v.clone()).unwrap();
        assert_eq!(a, b, "{reordered}");
        assert_eq!(a, c, "{line}");
    }
    // Faults come out the same whatever the key order: here the missing reason, although the
    // malformed tool comes first in the line.
    let bad = r#"{"data":{"header":{"tools":[7],"config":{"provider":"p","model":"m"}}},"type":"request/header"}"#;
    assert!(matches!(
        Event::from_json(bad),
        Err(DecodeError::MissingReason)
    ));
}

/// Issue 10 item 6: names a provider cannot take, or that the serializer reserves, are refused
/// when appended or loaded, not found out when a request is built.
#[test]
fn empty_and_reserved_tool_names() {
    use mektpoy::{ToolSchema, vocab::DEFERRED_PLACEHOLDER_NAME};
    let header_with = |tools: &str| {
        header_line(&format!(
            r#"{{"header":{{"config":{{"provider":"p","model":"m"}},"tools":[{tools}]}},"reason":"initial"}}"#
        ))
    };
    let typed_header = |name: &str| {
        Event::header(
            RequestHeader::new(
                Config::new("p", "m"),
                vec![tool("A"), ToolSchema::new(name, "d", no_params())],
            ),
            Reason::Initial,
        )
    };
    let with_block = |block: &str| {
        format!(
            r#"{{"type":"assistant/message","data":{{"message":{{"id":"x","role":"assistant","content":[{{"type":"text","text":"ok"}},{block}],"source":{{"kind":"model","provider":"p","model":"m"}}}}}},"surfaceOp":"append"}}"#
        )
    };
    let dev_with = |block: &str| {
        format!(
            r#"{{"type":"developer/message","data":{{"message":{{"id":"x","role":"developer","content":[{{"type":"text","text":"ok"}},{block}],"source":{{"kind":"tool-registry"}}}},"headerSeq":0}},"surfaceOp":"append"}}"#
        )
    };
    let malformed_1: Expect = |e| {
        decode(e, |d| {
            matches!(
                d,
                DecodeError::MalformedBlock {
                    index: 1,
                    reason: BlockError::EmptyToolName { .. },
                    ..
                }
            )
        })
    };
    let a = tool_json("A");
    run(&[
        json_case(
            "a header tool with an empty name",
            vec![],
            header_with(&format!(
                r#"{a},{{"name":"","description":"d","parameters":{{}}}}"#
            )),
            |e| {
                decode(e, |d| {
                    matches!(
                        d,
                        DecodeError::Tool {
                            index: 1,
                            source: ToolError::EmptyName
                        }
                    )
                })
            },
        ),
        typed_case(
            "a typed header tool with an empty name",
            vec![],
            typed_header(""),
            |e| matches!(e.kind(), AppendErrorKind::EmptyToolName { index: 1, .. }),
            |e| {
                decode(e, |d| {
                    matches!(
                        d,
                        DecodeError::Tool {
                            index: 1,
                            source: ToolError::EmptyName
                        }
                    )
                })
            },
        ),
        json_case(
            "a header tool with the placeholder's name",
            vec![user("u1")],
            header_with(&format!(
                r#"{a},{{"name":"{DEFERRED_PLACEHOLDER_NAME}","description":"d","parameters":{{}}}}"#
            )),
            |e| matches!(e.kind(), AppendErrorKind::ReservedToolName { index: 1, .. }),
        ),
        typed_case(
            "a typed header tool with the placeholder's name",
            vec![],
            typed_header(DEFERRED_PLACEHOLDER_NAME),
            |e| matches!(e.kind(), AppendErrorKind::ReservedToolName { index: 1, .. }),
            |e| matches!(e.kind(), AppendErrorKind::ReservedToolName { index: 1, .. }),
        ),
        json_case(
            "a tool call with an empty name",
            vec![],
            with_block(r#"{"type":"tool-call","id":"c1","name":"","arguments":"{}"}"#),
            malformed_1,
        ),
        json_case(
            "an addition of an empty name",
            vec![header(&["A"], "initial")],
            dev_with(r#"{"type":"tool-addition","toolName":""}"#),
            malformed_1,
        ),
        json_case(
            "a removal of an empty name",
            vec![header(&["A"], "initial")],
            dev_with(r#"{"type":"tool-removal","toolName":""}"#),
            malformed_1,
        ),
    ]);
    // Code cannot build those blocks at all (issue 21): the constructors refuse what decoding
    // refuses, with the same fault.
    let decoded = |line: &str| ContentBlock::from_value(serde_json::from_str(line).unwrap());
    assert_eq!(
        ContentBlock::tool_call("c1", "", "{}"),
        decoded(r#"{"type":"tool-call","id":"c1","name":"","arguments":"{}"}"#)
    );
    for (built, line) in [
        (
            ContentBlock::addition(""),
            r#"{"type":"tool-addition","toolName":""}"#,
        ),
        (
            ContentBlock::removal(""),
            r#"{"type":"tool-removal","toolName":""}"#,
        ),
        (
            ContentBlock::redefinition(""),
            r#"{"type":"tool-redefinition","toolName":""}"#,
        ),
    ] {
        assert!(
            matches!(built, Err(BlockError::EmptyToolName { .. })),
            "{line}"
        );
        assert_eq!(built, decoded(line), "{line}");
    }
}

/// Issue 10 item 6: arguments nested deeper than `ContentBlock::ARGUMENTS_DEPTH_LIMIT` are
/// refused at append and load (no provider parses them inside a body); at the limit they are
/// accepted.
#[test]
fn tool_call_arguments_nested_too_deep() {
    let limit = ContentBlock::ARGUMENTS_DEPTH_LIMIT;
    let nested = |depth: usize| {
        // `{"a":[[...]]}`: the object, then depth - 1 arrays.
        format!(
            r#"{{"a":{}{}}}"#,
            "[".repeat(depth - 1),
            "]".repeat(depth - 1)
        )
    };
    let call = |id: &str, depth: usize| {
        Event::append(Message::new(
            id,
            Role::Assistant,
            vec![ContentBlock::tool_call("c1", "A", nested(depth)).unwrap()],
            MessageSource::Model {
                provider: "p".into(),
                model: "m".into(),
            },
        ))
    };
    let too_deep: Expect = |e| matches!(e.kind(), AppendErrorKind::ArgumentsTooDeep { id, call_id, limit, .. } if id == "x" && call_id == "c1" && *limit == ContentBlock::ARGUMENTS_DEPTH_LIMIT);
    run(&[
        typed_case(
            "arguments one level too deep",
            vec![user("u1")],
            call("x", limit + 1),
            too_deep,
            too_deep,
        ),
        typed_case(
            "arguments far too deep",
            vec![],
            call("x", 10_000),
            too_deep,
            too_deep,
        ),
    ]);
    let s = Session::new("s");
    s.append(call("ok", limit)).unwrap();
    assert_eq!(s.len(), 1);
}
