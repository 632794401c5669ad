//! A recorded session with tool churn, shared by the benchmarks.

use mektpoy::{AgentLoop, Config, Message, Request, Session, ToolSchema, route_for};

/// Records `steps` steps on `model`'s route: eight tools always, four more rotating in and out
/// every `churn_every` steps, a user message and an answer per step (about five events a
/// step). Returns the session and its last request.
pub fn session_with_churn(model: &str, steps: u64, churn_every: u64) -> (Session, Request) {
    let provider = if model.starts_with("claude") {
        "anthropic"
    } else {
        "deepseek"
    };
    let route = route_for(provider, model);
    let config = Config::new(provider, model).with("max_tokens", 1024.into());
    let mut agent = AgentLoop::new(Session::new("bench"), route, config)
        .with_system_prompt("You are a careful assistant.");
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
        agent.set_tools(tools);
        let user = Message::user(format!("u{step}"), "next step");
        let request = agent.user_turn([user]).expect("record");
        last = Some(request);
        let answer = Message::assistant(format!("a{step}"), "ok", provider, model);
        agent.append(answer).expect("append");
    }
    (agent.into_session(), last.expect("at least one step"))
}
