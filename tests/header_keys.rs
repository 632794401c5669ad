//! Unknown `header` keys are kept and written back, but they are not part of what a request
//! was sent with: comparisons ignore them, so a header written by a newer writer (or by hand)
//! with an extra key does not make the next step log a `change` header, which would cost the
//! route its cached declarations.

use mektpoy::{AgentLoop, Config, Event, Message, Session, ToolSchema, route_for};
use serde_json::json;

fn header_line(extra: Option<(&str, serde_json::Value)>) -> String {
    let mut header = json!({
        "config": {"provider": "deepseek", "model": "deepseek-flash"},
        "tools": [{"name": "read", "description": "read", "parameters": {"type": "object"}}],
    });
    if let Some((key, value)) = extra {
        header[key] = value;
    }
    json!({"type": "request/header", "data": {"header": header, "reason": "change"}}).to_string()
}

#[test]
fn unknown_header_keys_are_kept_but_not_compared() {
    let plain = Event::from_json(&header_line(None)).unwrap();
    let noted = Event::from_json(&header_line(Some(("note", json!({"by": "v9"}))))).unwrap();
    let (Event::Header(plain), Event::Header(noted)) = (&plain, &noted) else {
        panic!("two headers")
    };
    assert_eq!(noted.header.extra.len(), 1, "the unknown key is kept");
    assert_eq!(plain.header, noted.header, "and ignored by the comparison");
    assert!(
        Event::Header(noted.clone())
            .to_json()
            .contains(r#""note":{"by":"v9"}"#),
        "and written back"
    );
}

#[test]
fn a_header_differing_only_in_unknown_keys_is_not_a_change() {
    let read = ToolSchema::no_input("read", "read");
    let config = Config::new("deepseek", "deepseek-flash");
    let mut agent = AgentLoop::builder(Session::new("s"), route_for("deepseek", "deepseek-flash"))
        .config(config)
        .tools([read])
        .build()
        .unwrap();
    agent.user_turn([Message::user("u1", "hi")]).unwrap();
    agent
        .session()
        .append_json(&header_line(Some(("note", json!(1)))))
        .unwrap();
    let before = agent.session().len();
    let request = agent.user_turn([Message::user("u2", "again")]).unwrap();
    assert_eq!(request.header_seq, None, "no header appended");
    assert_eq!(agent.session().len(), before + 1, "only the user message");
}
