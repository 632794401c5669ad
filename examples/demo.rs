//! The newcomer's demo: an agent loop whose tool set changes mid-conversation, recorded into
//! a JSONL session file, then read back.
//!
//! Run: `cargo run --release --example demo`

use std::error::Error;

use mektpoy::{
    Config, Event, Message, Recorder, Route, Session, Step, ToolSchema, ToolUpdateMode, WireApi,
};

fn tool(name: &str, description: &str) -> ToolSchema {
    let parameters =
        serde_json::json!({"type": "object", "properties": {"path": {"type": "string"}}});
    let serde_json::Value::Object(parameters) = parameters else {
        unreachable!()
    };
    ToolSchema::new(name, description, parameters)
}

fn main() -> Result<(), Box<dyn Error>> {
    let dir = std::env::temp_dir().join(format!("mektpoy-demo-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let path = dir.join("session.jsonl");

    let session = Session::create(&path, "demo")?;
    let mut recorder = Recorder::attach(&session);
    let config = Config::new("deepseek", "deepseek-flash").with("max_tokens", 1024.into());
    let mut route = Route::plain("deepseek", "deepseek-flash", WireApi::Messages);
    route.tool_update = Some(ToolUpdateMode::AdditionOnly);
    route.system_prompt_in_history = true;

    let read = tool("read", "Read a file");
    let search = tool(
        "mcp_search",
        "Search the web (an MCP server connected mid-session)",
    );
    let steps: [(&str, Vec<ToolSchema>); 3] = [
        ("What is in README.md?", vec![read.clone()]),
        ("Search for the crate's docs.", vec![read.clone(), search]),
        ("Thanks, that is all.", vec![read]),
    ];
    for (turn, (question, tools)) in steps.iter().enumerate() {
        let turn = turn as u64 + 1;
        let request = recorder.record(
            &session,
            Step {
                config: &config,
                system_prompt: "You are a careful assistant.",
                tools,
                route: &route,
                new_series: false,
                turn,
                step: 1,
                attempt: 0,
                user_messages: &[Message::user(format!("u{turn}"), *question)],
            },
        )?;
        println!(
            "turn {turn}: {} messages, {} tools, header {:?}, new series: {}",
            request.messages.len(),
            request.tools.len(),
            request.header_seq.map(|s| s.0),
            request.starts_series
        );
        session.append(Event::append(Message::assistant(
            format!("a{turn}"),
            "Done.",
            "deepseek",
            "deepseek-flash",
        )))?;
    }

    println!("\n{}:", path.display());
    print!("{}", std::fs::read_to_string(&path)?);
    let loaded = Session::load(&path)?;
    println!(
        "\ntool_history() of the reloaded file:\n{}",
        loaded.session.tool_history().to_json()
    );
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
