//! System prompts in history and the queue rules.

use super::*;

#[test]
fn system_prompts_and_queue_flushes() {
    /// (case, route, history, top-level system, wire messages)
    type Case = (
        &'static str,
        Route,
        Vec<Message>,
        Option<&'static str>,
        Value,
    );
    let cases: Vec<Case> = vec![
        (
            "not in history: only the latest node, as system",
            plain(),
            vec![
                s("s0", "P1"),
                u("u1", "hi"),
                a("a1", "ok"),
                s("s1", "P2"),
                u("u2", "more"),
            ],
            Some("P2"),
            json!([
                user_turn(json!([t("hi")])),
                assistant_turn(json!([t("ok")])),
                user_turn(json!([t("more")])),
            ]),
        ),
        (
            "not in history: a latest empty node sends no system",
            plain(),
            vec![s("s0", "P1"), u("u1", "hi"), s("s1", "")],
            None,
            json!([user_turn(json!([t("hi")]))]),
        ),
        (
            "empty node 0 is consumed, not queued",
            flash(),
            vec![s("s0", ""), u("u1", "hi")],
            None,
            json!([user_turn(json!([t("hi")]))]),
        ),
        (
            "empty later nodes are not queued",
            flash(),
            vec![s("s0", "P1"), u("u1", "hi"), s("s1", "")],
            Some("P1"),
            json!([user_turn(json!([t("hi")]))]),
        ),
        (
            "flush before the next assistant message",
            flash(),
            vec![s("s0", "P1"), u("u1", "hi"), s("s1", "P2"), a("a1", "ok")],
            Some("P1"),
            json!([
                user_turn(json!([t("hi")])),
                system_turn(json!([t("P2")])),
                assistant_turn(json!([t("ok")])),
            ]),
        ),
        (
            "a queue behind an assistant message waits for the next user turn",
            flash(),
            vec![
                u("u1", "hi"),
                a("a1", "ok"),
                d("d1", vec![add("X")]),
                s("s1", "P2"),
                u("u2", "more"),
                a("a2", "fine"),
            ],
            None,
            json!([
                user_turn(json!([t("hi")])),
                assistant_turn(json!([t("ok")])),
                user_turn(json!([t("more")])),
                system_turn(json!([addition("X"), t("P2")])),
                assistant_turn(json!([t("fine")])),
            ]),
        ),
        (
            "a queue before any turn waits for the first user turn",
            flash(),
            vec![d("d1", vec![add("X")]), a("a1", "prefill"), u("u1", "hi")],
            None,
            json!([
                assistant_turn(json!([t("prefill")])),
                user_turn(json!([t("hi")])),
                system_turn(json!([addition("X")])),
            ]),
        ),
        (
            "consecutive user messages are one turn, the queue after it",
            flash(),
            vec![u("u1", "a"), d("d1", vec![add("X")]), u("u2", "b")],
            None,
            json!([
                user_turn(json!([t("a"), t("b")])),
                system_turn(json!([addition("X")])),
            ]),
        ),
        (
            "flush after a tool-result turn",
            flash(),
            vec![
                u("u1", "go"),
                calls("a1", vec![call("c1", "read", "{}")]),
                d("d1", vec![add("X")]),
                result("t1", "c1", "out"),
                a("a2", "done"),
            ],
            None,
            json!([
                user_turn(json!([t("go")])),
                assistant_turn(
                    json!([{"type": "tool_use", "id": "c1", "name": "read", "input": {}}])
                ),
                user_turn(
                    json!([{"type": "tool_result", "tool_use_id": "c1", "content": [t("out")]}])
                ),
                system_turn(json!([addition("X")])),
                assistant_turn(json!([t("done")])),
            ]),
        ),
    ];
    for (name, route, messages, system, expected) in cases {
        let req = wire(&route, messages).unwrap_or_else(|e| panic!("{name}: {e}"));
        let b = body(&req);
        assert_eq!(b["messages"], expected, "{name}");
        assert_eq!(b.get("system").and_then(Value::as_str), system, "{name}");
    }
}
