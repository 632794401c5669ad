//! The newcomer's demo: one agent loop whose tool set changes mid-conversation, run on three
//! routes, with the prefix-cache meter showing what each route keeps cached.
//!
//! Run: `cargo run --release --example demo`

use mektpoy::{
    Config, Error, Event, Message, Meter, Recorder, Session, Step, ToolSchema, route_for,
};

/// A paragraph-sized answer, so the history outweighs the tool list as in real sessions.
const ANSWER: &str = "I read the relevant files, applied the change to the parser and ran the \
    tests; two of them needed their fixtures updated because the error message now names the \
    line. Everything passes. Next I would look at the retry logic in the client, which still \
    swallows the cause of a failed request.";

fn tool(name: &str, description: &str) -> Result<ToolSchema, Error> {
    Ok(ToolSchema::from_value(serde_json::json!({
        "name": name,
        "description": description,
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}},
    }))?)
}

/// The tools in effect at each step: an MCP server connects at step 4, a plugin is disabled
/// at step 7 and enabled again at step 10.
fn tools_at(step: usize, base: &[ToolSchema], mcp: &ToolSchema) -> Vec<ToolSchema> {
    let mut tools: Vec<ToolSchema> = base
        .iter()
        .filter(|t| !(t.name() == "shell" && (7..10).contains(&step)))
        .cloned()
        .collect();
    if step >= 4 {
        tools.push(mcp.clone());
    }
    tools
}

fn main() -> Result<(), Error> {
    let base = [
        tool("read", "Read a file of the workspace")?,
        tool("edit", "Apply an edit to a file")?,
        tool("shell", "Run a shell command (plugin)")?,
    ];
    let mcp = tool(
        "mcp_search",
        "Search the web (an MCP server connected mid-session)",
    )?;
    let path = std::env::temp_dir().join(format!("mektpoy-demo-{}.jsonl", std::process::id()));

    println!("12 steps; tools change at steps 4 (+mcp_search), 7 (-shell) and 10 (+shell).");
    println!("Token figures are estimates: ceil(bytes / 4).\n");
    println!(
        "{:<34} {:>8} {:>8} {:>7} {:>9} {:>14}",
        "route (mode)", "input", "cached", "hit", "best hit", "missed cache"
    );
    for (provider, model) in [
        ("deepseek", "deepseek-v4-pro"),
        ("deepseek", "deepseek-flash"),
        ("anthropic", "claude-opus-5"),
    ] {
        let route = route_for(provider, model);
        let config = Config::new(provider, model).with("max_tokens", 1024.into());
        let session = if model == "deepseek-flash" {
            Session::create(&path, "demo")?
        } else {
            Session::new("demo")
        };
        let mut recorder = Recorder::attach(&session);
        let mut meter = Meter::new(&route);
        for step in 0..12 {
            let tools = tools_at(step, &base, &mcp);
            let user = [Message::user(
                format!("u{step}"),
                format!("Step {step}: carry on."),
            )];
            let request = recorder.record(
                &session,
                Step {
                    config: &config,
                    system_prompt: "You are a careful coding assistant.",
                    tools: &tools,
                    route: &route,
                    new_series: false,
                    turn: step as u64,
                    step: 0,
                    attempt: 0,
                    user_messages: &user,
                },
            )?;
            // Project for the route and serialize: what the loop would send.
            let wire = request.to_wire(&route)?;
            meter.observe(&wire.body, request.series_start)?;
            let reply = Message::assistant(format!("a{step}"), ANSWER, provider, model);
            session.append(Event::append(reply))?;
        }
        let r = meter.report();
        let mode = route.tool_update().map_or("no mode", |m| m.as_str());
        println!(
            "{:<34} {:>8} {:>8} {:>6.1}% {:>8.1}% {:>14}",
            format!("{model} ({mode})"),
            r.total_tokens,
            r.cached_tokens,
            100.0 * r.hit_ratio(),
            100.0 * r.best_ratio(),
            r.best_tokens.saturating_sub(r.cached_tokens)
        );
    }

    let loaded = Session::load(&path)?;
    println!(
        "\nThe deepseek-flash session was written to {} ({} events).",
        path.display(),
        loaded.session.len()
    );
    println!(
        "Its ToolHistory: {}",
        loaded.session.tool_history().to_json()
    );
    println!("\nIts tool changes, as durable developer messages:");
    for event in loaded.session.events() {
        if let Event::Message(m) = &event
            && m.message.role() == mektpoy::Role::Developer
        {
            println!("  {}", event.to_json());
        }
    }
    let _ = std::fs::remove_file(&path);
    Ok(())
}
