//! The mapping of every content block kind.

use super::*;

#[test]
fn tool_calls_results_reasoning_and_merging() {
    let mut extra = IndexMap::new();
    extra.insert("signature".to_owned(), json!("sig=="));
    let messages = vec![
        u("u1", "go"),
        calls(
            "a1",
            vec![
                ContentBlock::Reasoning {
                    text: "think".into(),
                    extra,
                },
                text(""),
                text("calling"),
                call("c1", "read", r#"{"p":1}"#),
            ],
        ),
        // A second assistant message right after the first joins its turn.
        calls("a2", vec![call("c2", "grep", "{}")]),
        result("t1", "c1", "one").with_is_error(true),
        result("t2", "c2", "two").with_is_error(false),
        u("u2", "thanks"),
        msg("u3", Role::User, vec![text(""), text("and")]),
    ];
    let req = wire(&flash(), messages).unwrap();
    assert_eq!(
        body(&req)["messages"],
        json!([
            user_turn(json!([t("go")])),
            assistant_turn(json!([
                {"type": "thinking", "thinking": "think", "signature": "sig=="},
                t("calling"),
                {"type": "tool_use", "id": "c1", "name": "read", "input": {"p": 1}},
                {"type": "tool_use", "id": "c2", "name": "grep", "input": {}},
            ])),
            user_turn(json!([
                {"type": "tool_result", "tool_use_id": "c1", "content": [t("one")], "is_error": true},
                {"type": "tool_result", "tool_use_id": "c2", "content": [t("two")]},
                t("thanks"),
                t("and"),
            ])),
        ])
    );
    assert!(
        req.body()
            .contains(r#"{"type":"thinking","thinking":"think","signature":"sig=="}"#)
    );
}
