//! The worked W rows.

use super::*;

#[test]
fn examples_w1_to_w8() {
    /// (row, projected history, top-level system, wire messages, beta header)
    type Row = (
        &'static str,
        Vec<Message>,
        Option<&'static str>,
        Value,
        bool,
    );
    let rows: Vec<Row> = vec![
        (
            "W1",
            vec![
                u("u1", "hello"),
                d(
                    "d1",
                    vec![
                        add("search"),
                        remove("fetch"),
                        text(""),
                        text("search replaces fetch"),
                    ],
                ),
                a("a1", "ok"),
            ],
            None,
            json!([
                user_turn(json!([t("hello")])),
                system_turn(json!([
                    addition("search"),
                    removal("fetch"),
                    t("search replaces fetch")
                ])),
                assistant_turn(json!([t("ok")])),
            ]),
            true,
        ),
        (
            "W2",
            vec![d("d1", vec![add("X")]), u("u1", "hello")],
            None,
            json!([
                user_turn(json!([t("hello")])),
                system_turn(json!([addition("X")]))
            ]),
            true,
        ),
        (
            "W3",
            vec![u("u1", "hi"), a("a1", "ok"), d("d1", vec![add("X")])],
            None,
            json!([
                user_turn(json!([t("hi")])),
                assistant_turn(json!([t("ok")]))
            ]),
            false,
        ),
        (
            "W4",
            vec![u("u1", "hi"), d("d1", vec![text("")])],
            None,
            json!([user_turn(json!([t("hi")]))]),
            false,
        ),
        (
            "W7",
            vec![
                s("s0", "P1"),
                u("u1", "hi"),
                s("s1", "P2"),
                d("d1", vec![add("X")]),
            ],
            Some("P1"),
            json!([
                user_turn(json!([t("hi")])),
                system_turn(json!([t("P2"), addition("X")])),
            ]),
            true,
        ),
        (
            "W8",
            vec![u("u1", "hi"), s("s0", "P1")],
            None,
            json!([user_turn(json!([t("hi")])), system_turn(json!([t("P1")]))]),
            false,
        ),
    ];
    for (row, messages, system, expected, expect_beta) in rows {
        let req = wire(&flash(), messages).unwrap_or_else(|e| panic!("{row}: {e}"));
        let b = body(&req);
        assert_eq!(b["messages"], expected, "{row}");
        assert_eq!(b.get("system").and_then(Value::as_str), system, "{row}");
        assert_eq!(beta(&req), expect_beta, "{row}");
    }
}

#[test]
fn example_w5_tools_with_deferred_declaration() {
    let req = serialize(
        &config(),
        &projected(vec![u("u1", "hi")], Some(vec![tool("A"), tool("Bd")])),
        &flash(),
    )
    .unwrap();
    assert!(req.body().contains(
        r#""tools":[{"name":"A","description":"A","input_schema":{"type":"object"}},{"name":"B","description":"B","input_schema":{"type":"object"},"defer_loading":true}],"#
    ), "{}", req.body());
}

#[test]
fn example_w6_unknown_developer_block() {
    let err = wire(
        &flash(),
        vec![u("u1", "hi"), d("d1", vec![add("X"), other("image")])],
    )
    .unwrap_err();
    assert!(
        matches!(&err, WireError::Message { message_id, kind: MessageFault::DeveloperBlock { index: 1, block_type } }
            if message_id == "d1" && block_type == "image"),
        "{err:?}"
    );
    // Every block kind a developer message cannot carry.
    for block in [
        call("c1", "read", "{}"),
        ContentBlock::Reasoning {
            text: "r".into(),
            extra: IndexMap::new(),
        },
    ] {
        let err = wire(&flash(), vec![u("u1", "hi"), d("d1", vec![block])]).unwrap_err();
        assert!(
            matches!(
                &err,
                WireError::Message {
                    kind: MessageFault::DeveloperBlock { index: 0, .. },
                    ..
                }
            ),
            "{err:?}"
        );
    }
}
