//! Tools a route cannot send are refused when they are set, so they never reach the log
//! (issue 20, items 2, 4 and 14; decision 86).

use mektpoy::agent::BuildFault;
use mektpoy::route::ToolRefusal;
use mektpoy::{AgentLoop, Config, Event, Message, Session, ToolSchema, route_for};
use serde_json::json;

fn tool(name: &str, parameters: serde_json::Value) -> ToolSchema {
    ToolSchema::new(name, name, parameters.as_object().unwrap().clone())
}

fn agent(provider: &str, model: &str) -> AgentLoop {
    let config = Config::new(provider, model)
        .with("max_tokens", 64.into())
        .unwrap();
    AgentLoop::builder(Session::new("s"), route_for(provider, model))
        .config(config)
        .build()
        .unwrap()
}

/// Every tool name any header of the log declares.
fn logged_tools(session: &Session) -> Vec<String> {
    let mut names: Vec<String> = session
        .events()
        .iter()
        .filter_map(|e| match e {
            Event::Header(h) => Some(h.header.tools.iter().map(|t| t.name().to_owned())),
            _ => None,
        })
        .flatten()
        .collect();
    names.sort();
    names.dedup();
    names
}

#[test]
fn a_deepseek_messages_route_refuses_a_schema_without_a_root_object() {
    let mut agent = agent("deepseek", "deepseek-flash");
    let refused = agent.set_tools([tool("read", json!({}))]).unwrap_err();
    assert_eq!(refused.reason, ToolRefusal::SchemaRootNotObject);
    assert!(agent.tools().is_empty());
    agent
        .set_tools([ToolSchema::no_input("read", "read")])
        .unwrap();
    let wire = agent
        .user_turn([Message::user("u1", "hi")])
        .unwrap()
        .to_wire()
        .unwrap();
    assert!(
        wire.body().contains(r#""input_schema":{"type":"object"}"#),
        "{}",
        wire.body()
    );
}

#[test]
fn a_builder_set_the_route_cannot_send_is_refused_at_build_with_nothing_logged() {
    let mcp = ToolSchema::no_input("github.search_issues", "Search issues");
    let session = Session::new("s");
    let err = AgentLoop::builder(&session, route_for("anthropic", "claude-opus-5"))
        .option("max_tokens", 64.into())
        .tools([mcp])
        .build()
        .unwrap_err();
    assert!(
        matches!(err.faults(), [BuildFault::Tool(r)]
            if r.tool == "github.search_issues" && r.reason == ToolRefusal::InvalidName { max_len: 128 }),
        "{err}"
    );
    assert_eq!(session.len(), 0, "nothing logged");
}

/// Item 14: on an in-history route a removed tool stays declared for the rest of its series;
/// a tool the route cannot send was offered, then every later request failed.
#[test]
fn a_tool_the_route_cannot_send_never_enters_a_declaration_series() {
    let mut agent = agent("anthropic", "claude-opus-5");
    let read = ToolSchema::no_input("read", "Read");
    agent.set_tools([read.clone()]).unwrap();
    agent
        .user_turn([Message::user("u1", "hi")])
        .unwrap()
        .to_wire()
        .unwrap();
    agent
        .append(Message::assistant("a1", "ok", "anthropic", "claude-opus-5"))
        .unwrap();
    for bad in [
        tool("shell", json!({})),
        tool("shell", json!({"type": "string"})),
        tool(&"x".repeat(129), json!({"type": "object"})),
        tool("mcp/shell", json!({"type": "object"})),
    ] {
        assert!(agent.set_tools([read.clone(), bad]).is_err());
    }
    for turn in 2..5 {
        agent.set_tools([read.clone()]).unwrap();
        let request = agent
            .user_turn([Message::user(format!("u{turn}"), "go on")])
            .unwrap();
        request.to_wire().unwrap();
        agent
            .append(Message::assistant(
                format!("a{turn}"),
                "ok",
                "anthropic",
                "claude-opus-5",
            ))
            .unwrap();
    }
    assert_eq!(logged_tools(agent.session()), ["read"]);
}

#[test]
fn chat_takes_an_empty_schema_and_refuses_names_over_64_bytes() {
    let mut agent = agent("acme", "acme-1");
    agent.set_tools([tool("read", json!({}))]).unwrap();
    let refused = agent
        .set_tools([tool(&"r".repeat(65), json!({}))])
        .unwrap_err();
    assert_eq!(refused.reason, ToolRefusal::InvalidName { max_len: 64 });
    assert_eq!(agent.tools()[0].name(), "read");
}
