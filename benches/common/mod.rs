//! A recorded session with tool churn, shared by the benchmarks.

use mektpoy::{AgentLoop, Config, Message, Request, Session, ToolSchema, route_for};

/// Records `steps` steps on `model`'s route: eight tools always, four more rotating in and out
/// every `churn_every` steps, a user message and an answer per step (about five events a
/// step). Returns the session and its last request.
#[allow(dead_code)]
pub fn session_with_churn(model: &str, steps: u64, churn_every: u64) -> (Session, Request) {
    let provider = if model.starts_with("claude") {
        "anthropic"
    } else {
        "deepseek"
    };
    let route = route_for(provider, model);
    let config = Config::new(provider, model)
        .with("max_tokens", 1024.into())
        .unwrap();
    let mut agent = AgentLoop::builder(Session::new("bench"), route)
        .config(config)
        .system_prompt("You are a careful assistant.")
        .build()
        .expect("the loop builds");
    let pool: Vec<ToolSchema> = (0..12)
        .map(|i| {
            let mut parameters = serde_json::Map::new();
            parameters.insert("type".into(), "object".into());
            ToolSchema::new(format!("tool{i}"), format!("tool number {i}"), parameters)
        })
        .collect();
    let mut last = None;
    for step in 0..steps {
        let tools: Vec<ToolSchema> = pool
            .iter()
            .enumerate()
            .filter(|(i, _)| *i < 8 || (*i as u64 + step / churn_every).is_multiple_of(3))
            .map(|(_, t)| t.clone())
            .collect();
        agent.set_tools(tools).unwrap();
        let user = Message::user(format!("u{step}"), "next step");
        let request = agent.user_turn([user]).expect("record");
        last = Some(request);
        let answer = Message::assistant(format!("a{step}"), "ok", provider, model);
        agent.append(answer).expect("append");
    }
    (agent.into_session(), last.expect("at least one step"))
}

/// A log of about `events` events appended directly (no recorder, so 100k events take
/// seconds, not the recorder's quadratic minutes), shaped like [`session_with_churn`]'s with
/// tools changing every step: per step a `change` header, the developer message announcing the
/// change (additions naming that header, removals), a user message and an answer: four events
/// a step.
#[allow(dead_code)]
pub fn log_with_churn(events: usize) -> Session {
    use mektpoy::event::{Config, Reason, RequestHeader};
    use mektpoy::{ContentBlock, Event};
    let session = Session::new("bench");
    let pool: Vec<ToolSchema> = (0..12)
        .map(|i| {
            let mut parameters = serde_json::Map::new();
            parameters.insert("type".into(), "object".into());
            ToolSchema::new(format!("tool{i}"), format!("tool number {i}"), parameters)
        })
        .collect();
    let offered = |step: usize| (0..12).filter(move |i| *i < 8 || (i + step).is_multiple_of(3));
    let mut step = 0;
    while session.len() < events {
        let tools: Vec<ToolSchema> = offered(step).map(|i| pool[i].clone()).collect();
        let reason = if step == 0 {
            Reason::Initial
        } else {
            Reason::Change
        };
        let config = Config::new("anthropic", "claude-opus-5");
        let seq = session
            .append(Event::header(RequestHeader::new(config, tools), reason))
            .expect("header");
        {
            // The first step's message announces the first tools, so that every step has four
            // events and a log of a multiple of four ends with a whole step.
            let before: Vec<usize> = match step {
                0 => Vec::new(),
                _ => offered(step - 1).collect(),
            };
            let now: Vec<usize> = offered(step).collect();
            let mut blocks: Vec<ContentBlock> = now
                .iter()
                .filter(|i| !before.contains(i))
                .map(|i| ContentBlock::addition(format!("tool{i}")).unwrap())
                .collect();
            blocks.extend(
                before
                    .iter()
                    .filter(|i| !now.contains(i))
                    .map(|i| ContentBlock::removal(format!("tool{i}")).unwrap()),
            );
            session
                .append(Event::developer(
                    Message::developer(format!("d{step}"), blocks),
                    Some(seq),
                ))
                .expect("developer");
        }
        session
            .append(Event::append(Message::user(
                format!("u{step}"),
                "next step",
            )))
            .expect("user");
        session
            .append(Event::append(Message::assistant(
                format!("a{step}"),
                "ok",
                "anthropic",
                "claude-opus-5",
            )))
            .expect("assistant");
        step += 1;
    }
    session
}
