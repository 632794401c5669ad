//! async-openai's Responses request type (`CreateResponse`, 0.43) deserializes every body the
//! library's Responses serializer writes on a loop with tool churn, reasoning sent back and a
//! multi-part tool output: the Rust counterpart of `clients/responses_types.py` and `.mjs`
//! (the official SDKs), which check the same kinds of bodies. A body it refuses (an unknown
//! item type, a call without `call_id`) fails here.

use async_openai::types::responses::CreateResponse;
use mektpoy::vocab::{MessageSource, Role};
use mektpoy::{AgentLoop, Config, ContentBlock, Message, Session, ToolSchema, route_for};
use serde_json::json;

fn tool(name: &str) -> ToolSchema {
    let serde_json::Value::Object(params) = json!({"type": "object"}) else {
        unreachable!()
    };
    ToolSchema::new(name, format!("{name} a file"), params)
}

fn accepted(body: &str) {
    if let Err(e) = serde_json::from_str::<CreateResponse>(body) {
        panic!("async-openai refuses {body}: {e}");
    }
}

#[test]
fn async_openai_deserializes_every_body_of_a_churn_loop() {
    for model in ["gpt-5.4", "gpt-5.6-terra"] {
        let mut agent = AgentLoop::builder(Session::new("s"), route_for("openai", model))
            .config(
                Config::new("openai", model)
                    .with("tool_choice", json!("auto"))
                    .unwrap(),
            )
            .system_prompt("Be brief.")
            .tools([tool("read"), tool("edit")])
            .build()
            .unwrap();
        let sets = [
            vec![tool("read"), tool("edit")],
            vec![tool("read"), tool("edit"), tool("grep")],
            vec![tool("edit"), tool("grep")],
        ];
        for (i, tools) in sets.into_iter().enumerate() {
            agent.set_tools(tools).unwrap();
            let request = agent
                .user_turn([Message::user(format!("u{i}"), "go on")])
                .unwrap();
            accepted(request.to_wire().unwrap().body());
            let extra = [
                ("id", json!(format!("rs_{i}"))),
                ("summary", json!([{"type": "summary_text", "text": "plan"}])),
                ("encrypted_content", json!("gAAAA")),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect();
            let answer = Message::new(
                format!("a{i}"),
                Role::Assistant,
                vec![
                    ContentBlock::Reasoning {
                        text: "plan".into(),
                        extra,
                    },
                    ContentBlock::text("reading"),
                    ContentBlock::tool_call(format!("call_{i}"), "edit", r#"{"path": "x"}"#)
                        .unwrap(),
                ],
                MessageSource::Model {
                    provider: "openai".into(),
                    model: model.into(),
                },
            );
            agent.append(answer).unwrap();
            agent
                .append(Message::new(
                    format!("t{i}"),
                    Role::Tool,
                    vec![ContentBlock::text("line 1"), ContentBlock::text("line 2")],
                    MessageSource::Tool {
                        call_id: format!("call_{i}"),
                    },
                ))
                .unwrap();
            let request = agent.next_step().unwrap();
            let body = request.to_wire().unwrap().into_parts().0;
            assert!(body.contains(r#""type":"reasoning""#), "{body}");
            accepted(&body);
            agent
                .append(Message::assistant(format!("b{i}"), "done", "openai", model))
                .unwrap();
        }
    }
}

#[test]
fn async_openai_refuses_an_unknown_item() {
    let bad = r#"{"model":"gpt-5.4","input":[{"type":"bogus_item"}]}"#;
    assert!(serde_json::from_str::<CreateResponse>(bad).is_err());
}
