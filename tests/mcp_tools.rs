//! reference §1 item 2: an MCP `tools/list` entry becomes a tool the log records and reads back
//! as the same tool, and the wires send only what they send of any tool.

use mektpoy::{
    Config, Event, Message, Route, Session, ToolSchema,
    event::{Reason, RequestHeader},
    project::ProjectedToolUpdates,
    route::WireApi,
    wire::serialize,
};
use serde_json::json;

fn entry() -> serde_json::Value {
    json!({
        "name": "search_issues",
        "title": "Search issues",
        "inputSchema": {"type": "object", "properties": {"query": {"type": "string"}}},
        "annotations": {"readOnlyHint": true},
        "_meta": {"vendor.example/rev": 3}
    })
}

#[test]
fn an_mcp_tool_is_logged_as_itself_and_sent_without_its_mcp_fields() {
    let tool = ToolSchema::from_mcp(entry()).unwrap();
    let session = Session::new("s");
    let header = RequestHeader::new(Config::new("anthropic", "m"), vec![tool.clone()]);
    session
        .append(Event::header(header, Reason::Initial))
        .unwrap();
    let loaded = Session::load_bytes(session.to_jsonl().as_bytes())
        .unwrap()
        .session;
    let (_, logged) = loaded.request_header().unwrap();
    assert!(logged.header.tools[0].same_tool(&tool));
    assert!(logged.header.tools[0].same_tool(&ToolSchema::from_mcp(entry()).unwrap()));
    assert_eq!(loaded.to_jsonl(), session.to_jsonl());

    let messages = [Message::user("u1", "find the crash")];
    let tools = [tool];
    let projected = ProjectedToolUpdates::new(&messages[..]).with_tools(&tools[..]);
    let config = Config::new("anthropic", "m")
        .with("max_tokens", 64.into())
        .unwrap();
    for api in [WireApi::Messages, WireApi::OpenAiChat] {
        let body = serialize(&config, &projected, &Route::plain("anthropic", "m", api))
            .unwrap()
            .into_parts()
            .0;
        assert!(
            body.contains(r#""name":"search_issues","description":"""#),
            "{body}"
        );
        for field in ["title", "annotations", "_meta", "readOnlyHint"] {
            assert!(!body.contains(field), "{field} sent: {body}");
        }
    }
}
