//! The newcomer's demo: one agent loop whose tool set changes mid-conversation, run on five
//! routes (four on the Messages API, one on OpenAI's Responses API), and once more on the
//! no-mode route with a first-seen tool order, with the prefix-cache meter showing what each
//! route keeps cached, and the loop's attributions naming each request that rewrote the cached
//! prefix: what changed, and whether the caller or a rule of the crate made it.
//!
//! Run: `cargo run --release --example demo [-- --logs DIR]`. Each route's session log and
//! saved meter go to `DIR` (default: `mektpoy-demo-logs` in the temporary directory), for
//! `examples/replay.rs` to replay and check.

use mektpoy::agent::ToolOrder;
use mektpoy::agent::replay::miss_lines;
use mektpoy::{
    AgentLoop, Config, ContentBlock, Error, Event, Message, Route, ToolSchema, route_for,
    vocab::{MessageSource, Role},
};
use serde_json::json;

/// A paragraph-sized answer, so the history outweighs the tool list as in real sessions.
const ANSWER: &str = "I read the relevant files, applied the change to the parser and ran the \
    tests; two of them needed their fixtures updated because the error message now names the \
    line. Everything passes. Next I would look at the retry logic in the client, which still \
    swallows the cause of a failed request.";

/// A system prompt of realistic size (about 700 tokens), so that every request is above the
/// providers' minimum cacheable length from the first step on.
fn system_prompt() -> String {
    let rule = "Read the relevant files before you change them, keep each edit small and \
                focused, run the tests after every change, and explain what you did and why \
                in two or three sentences. ";
    format!("You are a careful coding assistant. {}", rule.repeat(14))
}

const STEPS: usize = 14;
const MCP_CONNECTS: usize = 3;
const PLUGIN_OFF: usize = 5;
const PLUGIN_ON: usize = 7;
const SCHEMA_CHANGES: usize = 9;
const COMPACTION: usize = 11;
const MCP_RECONNECTS: usize = 12;

fn tool(name: &str, description: &str, properties: serde_json::Value) -> Result<ToolSchema, Error> {
    Ok(ToolSchema::from_value(json!({
        "name": name,
        "description": description,
        "parameters": {"type": "object", "properties": properties},
    }))?)
}

/// The tools in effect at each step: an MCP server connects, a plugin (`shell`) is disabled
/// and enabled again, `edit` gains a parameter, and the MCP server reconnects, its tool now
/// listed first (the same tools in another order).
fn tools_at(step: usize) -> Result<Vec<ToolSchema>, Error> {
    let query = json!({"query": {"type": "string"}});
    let mut tools = vec![tool("read", "Read a file of the workspace", query.clone())?];
    tools.push(if step >= SCHEMA_CHANGES {
        tool(
            "edit",
            "Apply an edit to a file",
            json!({"query": {"type": "string"}, "dry_run": {"type": "boolean"}}),
        )?
    } else {
        tool("edit", "Apply an edit to a file", query.clone())?
    });
    if !(PLUGIN_OFF..PLUGIN_ON).contains(&step) {
        tools.push(tool(
            "shell",
            "Run a shell command (plugin)",
            query.clone(),
        )?);
    }
    if step >= MCP_CONNECTS {
        tools.push(tool(
            "mcp_search",
            "Search the web (an MCP server connected mid-session)",
            query,
        )?);
    }
    if step >= MCP_RECONNECTS {
        tools.rotate_right(1);
    }
    Ok(tools)
}

/// The model's answer; Anthropic models sign their thinking.
fn answer(step: usize, route: &Route) -> Message {
    let mut content = Vec::new();
    if route.provider == "anthropic" {
        let mut extra = indexmap::IndexMap::new();
        extra.insert("signature".to_owned(), json!(format!("sig-{step}")));
        content.push(ContentBlock::Reasoning {
            text: "Check the failing test first.".into(),
            extra,
        });
    }
    content.push(ContentBlock::text(ANSWER));
    Message::new(
        format!("a{step}"),
        Role::Assistant,
        content,
        MessageSource::Model {
            provider: route.provider.to_string(),
            model: route.model.to_string(),
        },
    )
}

struct Run {
    label: String,
    agent: AgentLoop,
    stripped: Vec<(usize, usize)>,
}

fn run(label: &str, route: Route, order: ToolOrder) -> Result<Run, Error> {
    let config = Config::new(route.provider.to_string(), route.model.to_string())
        .with("max_tokens", 1024.into())?;
    let mut agent = AgentLoop::builder(mektpoy::Session::new("demo"), route)
        .config(config)
        .system_prompt(system_prompt())
        .tool_order(order)
        .build()?;
    let mut stripped = Vec::new();
    for step in 0..STEPS {
        if step == COMPACTION {
            // Compaction: the first four turns become one summary.
            let summary = Message::user("summary", "Summary: we fixed the parser together.");
            agent.session().append(Event::replace(summary, 1, 8))?;
        }
        agent.set_tools(tools_at(step)?)?;
        let user = Message::user(format!("u{step}"), format!("Step {step}: carry on."));
        let request = agent.user_turn([user])?;
        // What the loop sends: projected for the route, serialized, thinking policy applied.
        let wire = request.to_wire()?;
        // ... sent; the meter observes it once the provider accepted it, and the loop keeps
        // its attribution: where it departs from the previous request, and who made that.
        agent.observe(&wire)?;
        if wire.report().thinking_left_out > 0 {
            stripped.push((step, wire.report().thinking_left_out));
        }
        let answer = answer(step, agent.route());
        agent.append(answer)?;
    }
    Ok(Run {
        label: label.to_owned(),
        agent,
        stripped,
    })
}

fn main() -> Result<(), Error> {
    let logs = logs_dir();
    println!(
        "{STEPS} steps: +mcp_search at step {MCP_CONNECTS}, the shell plugin off at {PLUGIN_OFF} \
         and on again at {PLUGIN_ON},\n`edit` gains a parameter at {SCHEMA_CHANGES}, a \
         compaction at {COMPACTION},\nthe MCP server reconnects at {MCP_RECONNECTS} (same \
         tools, mcp_search now listed first). Token figures are estimates: ceil(bytes / 4).\n"
    );
    // The by-reference Anthropic route: claude-opus-5 as Bedrock or Google Cloud serve it
    // (tools named by reference only, the deferred placeholder keeping the section stable).
    let by_reference = route_for("anthropic", "claude-opus-5")
        .into_builder()
        .inline_definitions(false)
        .deferred_placeholder(true)
        .build()?;
    let routes = [
        (
            "deepseek-v4-pro (no mode)",
            route_for("deepseek", "deepseek-v4-pro"),
        ),
        (
            "deepseek-flash (addition-only)",
            route_for("deepseek", "deepseek-flash"),
        ),
        ("claude-opus-5 (in-history, by reference)", by_reference),
        (
            "claude-fable-5-1 (in-history, inline)",
            route_for("anthropic", "claude-fable-5-1"),
        ),
        (
            "gpt-5.4 (Responses, addition-only)",
            route_for("openai", "gpt-5.4"),
        ),
    ];
    let mut runs = Vec::new();
    let mut inline_session = None;
    for (label, route) in routes {
        let inline = route.inline_definitions();
        let r = run(label, route, ToolOrder::AsGiven)?;
        if inline {
            inline_session = Some(runs.len());
        }
        runs.push(r);
    }
    // The no-mode route again, its tools logged in first-seen order: the reordering at the
    // reconnect no longer rewrites the cached prefix.
    runs.push(run(
        "deepseek-v4-pro (no mode, first-seen order)",
        route_for("deepseek", "deepseek-v4-pro"),
        ToolOrder::FirstSeen,
    )?);

    println!(
        "{:<44} {:>7} {:>7} {:>7} {:>9} {:>7} {:>10}",
        "route (mode)", "input", "cached", "hit", "best hit", "missed", "est. cost"
    );
    for r in &runs {
        let rep = r.agent.meter().report();
        let cost = rep.cost.map_or("-".to_owned(), |c| format!("${c:.4}"));
        println!(
            "{:<44} {:>7} {:>7} {:>6.1}% {:>8.1}% {:>7} {:>10}",
            r.label,
            rep.total_tokens,
            rep.cached_tokens,
            100.0 * rep.hit_ratio(),
            100.0 * rep.best_ratio(),
            rep.best_tokens.saturating_sub(rep.cached_tokens),
            cost
        );
    }

    // The loop's own attributions: one line per request that did not find the previous one
    // in the cache (request n is step n), naming the change and who made it.
    println!(
        "\nRequests that did not find the previous request in the cache, and why (request n is step n):"
    );
    for r in &runs {
        let agent = &r.agent;
        let lines = miss_lines(agent.route(), agent.meter().rows(), agent.attributions());
        if lines.is_empty() {
            println!("  {}: none", r.label);
            continue;
        }
        println!("  {}:", r.label);
        for line in lines {
            println!("    {line}");
        }
    }
    println!("\nEstimated tokens lost, by the caller and by the crate's rules:");
    for r in &runs {
        let report = r.agent.attribution_report();
        println!(
            "  {:<44} caller ~{}, crate's rules or unexplained ~{}",
            r.label,
            report.lost_by_caller(),
            report.lost_otherwise()
        );
    }
    println!(
        "\nThe MCP server's reconnect (step {MCP_RECONNECTS}: the same tools in another order), \
         what its request found cached:"
    );
    for r in &runs {
        let row = &r.agent.meter().rows()[MCP_RECONNECTS];
        let hit = 100.0 * row.cached_bytes as f64 / row.total_bytes as f64;
        let (cached, total) = (row.cached_bytes, row.total_bytes);
        println!("  {:<44} {hit:>5.1}% ({cached} of {total} bytes)", r.label);
    }
    println!("\nThe thinking policy (StripThinking, the default) on routes that bind thinking:");
    for r in runs.iter().filter(|r| !r.stripped.is_empty()) {
        for (step, n) in &r.stripped {
            println!(
                "  {}: step {step} left out {n} signed thinking block(s) produced before the rewrite",
                r.label
            );
        }
    }

    if let Some(session) = inline_session.map(|i| runs[i].agent.session()) {
        println!("\nOn the inline route, the tool changes are durable developer messages:");
        for event in session.events().iter() {
            if let Event::Message(m) = event
                && m.message.role() == Role::Developer
            {
                println!("  {}", event.to_json());
            }
        }
        println!(
            "Its by-value ToolHistory: {}",
            session.tool_history_by_value().to_json()
        );
    }
    write_logs(&logs, &runs)?;
    Ok(())
}

/// `--logs DIR`, else `mektpoy-demo-logs` in the temporary directory.
fn logs_dir() -> std::path::PathBuf {
    let args: Vec<String> = std::env::args().collect();
    match args.iter().position(|a| a == "--logs") {
        Some(i) => args.get(i + 1).map_or_else(
            || {
                eprintln!("--logs needs a directory");
                std::process::exit(2)
            },
            Into::into,
        ),
        None => std::env::temp_dir().join("mektpoy-demo-logs"),
    }
}

/// Writes each row's session log (`NAME.jsonl`), its saved meter (`NAME.meter.json`) and
/// the route's name for the replay (`NAME.route`), then prints the command that checks them.
fn write_logs(dir: &std::path::Path, runs: &[Run]) -> Result<(), Error> {
    use mektpoy::agent::replay::route_name;
    let io = |path: &std::path::Path| {
        let path = path.to_owned();
        move |source| Error::from(mektpoy::store::PersistError::Io { path, source })
    };
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    for r in runs {
        let name = route_name(r.agent.route());
        // Named for the row, not the route: two rows may run one route (the tool orders).
        let file: String = r
            .label
            .split(|c: char| !c.is_ascii_alphanumeric() && c != '-' && c != '.')
            .filter(|w| !w.is_empty())
            .collect::<Vec<_>>()
            .join("_");
        let path = |ext: &str| dir.join(format!("{file}.{ext}"));
        r.agent.session().save(path("jsonl"))?;
        let meter = path("meter.json");
        std::fs::write(&meter, r.agent.meter().save()).map_err(io(&meter))?;
        if let Some(name) = name {
            let route = path("route");
            std::fs::write(&route, name + "\n").map_err(io(&route))?;
        }
    }
    // Routes outside the catalog (the by-reference variant) join the catalog's by name.
    let extra: String = runs
        .iter()
        .filter_map(|r| route_name(r.agent.route()))
        .filter(|n| n.contains(':'))
        .map(|n| format!("--route {n} "))
        .collect();
    println!(
        "\nEach route's log and meter are in {dir}. Replay them on every route with\n  \
         cargo run --release --example replay -- {extra}{dir}/*.jsonl\nand check that a \
         replay equals this run's meter with\n  \
         cargo run --release --example replay -- --check {dir}/NAME.meter.json {dir}/NAME.jsonl",
        dir = dir.display()
    );
    Ok(())
}
