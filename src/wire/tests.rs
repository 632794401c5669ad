//! The one serializer test that needs a private item: `RouteBuilder::build_unchecked`, to
//! build a route no one can build. Everything else is in `tests/wire.rs`, over the public API.

use serde_json::{Value, json};

use super::*;
use crate::route::ToolUpdateMode;

fn anthropic() -> Route {
    Route::builder("anthropic", "claude-test", WireApi::Messages)
        .tool_update(Some(ToolUpdateMode::InHistory))
        .system_prompt_in_history(true)
        .beta_always(true)
        .deferred_section_bytes(64)
        .build()
        .unwrap()
}

fn otool(name: &str) -> ToolSchema {
    let mut parameters = serde_json::Map::new();
    parameters.insert("type".into(), json!("object"));
    ToolSchema::new(name, name, parameters)
}

/// Moved from `deferred_placeholder_appended_exactly_on_mode_routes_with_an_immediate_tool`
/// (tests/wire.rs): a route asking for the placeholder but without a tool-update mode (a
/// combination `build` refuses) gets no placeholder.
#[test]
fn deferred_placeholder_not_appended_without_a_mode() {
    let no_mode = anthropic()
        .into_builder()
        .deferred_placeholder(true)
        .tool_update(None)
        .beta_always(false)
        .build_unchecked();
    let config = Config::new("deepseek", "deepseek-flash").with("max_tokens", json!(1024));
    for tools in [
        vec![otool("A")],
        vec![otool("A"), otool("B").with_defer_loading(true)],
    ] {
        let n = tools.len();
        let p = ProjectedToolUpdates::new(vec![Message::user("u1", "hi")]).with_tools(tools);
        let body = serialize(&config, &p, &no_mode).unwrap().body;
        let got = serde_json::from_str::<Value>(&body).unwrap()["tools"].clone();
        assert_eq!(got.as_array().unwrap().len(), n);
    }
}
