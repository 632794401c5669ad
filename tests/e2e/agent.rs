//! A minimal agent loop over the stand-in: record → fold → project → serialize → send, then the
//! assistant's reply goes back into the log, as a real loop would do.

use mektpoy::{
    Config, ContentBlock, Event, Message, MessageSource, Meter, ProjectionPath, Recorder, Request,
    Role, Route, Session, Step, SurfaceNode, ToolSchema, WireRequest, project_tool_updates_traced,
    serialize, validate_tool_call,
};
use serde_json::json;

use crate::standin::{self, Refused, Usage};

/// What the assistant does after a request.
#[derive(Clone, Copy, Debug)]
pub enum Reply {
    /// Answers with the stand-in's text.
    Text,
    /// Answers with the stand-in's text and a call of this tool; the tool's result is appended
    /// right after, so the next step can be a continuation without a user message.
    Call(&'static str),
}

/// One request of the loop, as sent and as answered.
#[derive(Debug)]
pub struct Sent {
    pub request: Request,
    pub path: ProjectionPath,
    pub wire: WireRequest,
    pub usage: Usage,
}

/// One loop instance over one session, sending to the stand-in under its own key.
pub struct Agent {
    pub session: Session,
    recorder: Recorder,
    pub route: Route,
    config: Config,
    key: String,
    /// The crate's meter, fed on the client side: it must agree with the stand-in's own count.
    meter: Meter,
    turn: u64,
}

/// A tool with a small object schema and a description derived from its name.
pub fn tool(name: &str, version: u32, deferred: bool) -> ToolSchema {
    let parameters = json!({"type": "object", "properties": {"arg": {"type": "string"}}});
    let description = match version {
        1 => format!("The {name} test tool."),
        v => format!("The {name} test tool, version {v}."),
    };
    ToolSchema::new(name, description, parameters.as_object().unwrap().clone())
        .with_defer_loading(deferred)
}

impl Agent {
    /// A new session `key` (also the stand-in key) for `route`, with config
    /// `{provider, model, max_tokens: 1024}` taken from the route.
    pub fn new(key: &str, route: Route) -> Self {
        let session = Session::new(key);
        let recorder = Recorder::attach(&session);
        let config = Config::new(route.provider.clone(), route.model.clone())
            .with("max_tokens", json!(1024));
        let meter = Meter::new(&route);
        Agent {
            session,
            recorder,
            route,
            config,
            key: key.to_owned(),
            meter,
            turn: 0,
        }
    }

    /// One step: records the attempt with `prompt`, `tools` and (when given) a user message,
    /// projects it for the route, serializes it, sends it, and appends the reply.
    ///
    /// Panics if the crate refuses the step; returns the stand-in's refusal as an error.
    pub fn step(
        &mut self,
        prompt: &str,
        tools: &[ToolSchema],
        user: Option<&str>,
        reply: Reply,
    ) -> Result<Sent, Refused> {
        self.turn += 1;
        let turn = self.turn;
        let user_messages: Vec<Message> = user
            .map(|text| Message::user(format!("u{turn}"), text))
            .into_iter()
            .collect();
        let request = self
            .recorder
            .record(
                &self.session,
                Step {
                    config: &self.config,
                    system_prompt: prompt,
                    tools,
                    route: &self.route,
                    new_series: false,
                    turn,
                    step: 0,
                    attempt: 0,
                    user_messages: &user_messages,
                },
            )
            .unwrap_or_else(|e| panic!("step {turn}: record refused: {e}"));
        let (projected, path) = project_tool_updates_traced(
            &request.messages,
            Some(&request.tools),
            self.route.tool_update(),
            Some(&request.tool_history),
        );
        // A name that is declared but not effective (removed, kept for the cache) is never
        // callable.
        let header = self.session.request_header().expect("a header").1;
        for t in projected.tools.iter().flat_map(|t| t.iter()) {
            let effective = tools.iter().any(|e| e.name() == t.name());
            assert_eq!(
                validate_tool_call(t.name(), &header.header).is_ok(),
                effective,
                "step {turn}: `{}` is declared; callable iff effective",
                t.name()
            );
        }
        let wire = serialize(&request.config, &projected, &self.route)
            .unwrap_or_else(|e| panic!("step {turn}: serialize refused: {e}"));
        drop(projected); // it borrows `request`, which `Sent` takes
        let answer = standin::send(&self.key, self.route.deferred_section_bytes(), &wire)?;

        let row = self
            .meter
            .observe(&wire.body, request.series_start)
            .expect("a Messages body");
        assert_eq!(
            (row.total_bytes, row.cached_bytes),
            (answer.usage.total_bytes, answer.usage.cached_bytes),
            "step {turn}: the crate's Meter and the stand-in's SPEC §9 count disagree"
        );

        let source = MessageSource::Model {
            provider: self.config.provider.clone(),
            model: self.config.model.clone(),
        };
        let mut content = vec![ContentBlock::text(answer.text)];
        if let Reply::Call(name) = reply {
            validate_tool_call(name, &header.header)
                .unwrap_or_else(|e| panic!("step {turn}: scripted call: {e}"));
            content.push(ContentBlock::ToolCall {
                id: format!("call{turn}"),
                name: name.to_owned(),
                arguments: r#"{"arg":"x"}"#.to_owned(),
            });
        }
        let assistant = Message::new(format!("a{turn}"), Role::Assistant, content, source);
        self.session.append(Event::append(assistant)).unwrap();
        if let Reply::Call(name) = reply {
            let result = Message::tool_result(
                format!("t{turn}"),
                format!("call{turn}"),
                format!("{name} done"),
            );
            self.session.append(Event::append(result)).unwrap();
        }
        Ok(Sent {
            request,
            path,
            wire,
            usage: answer.usage,
        })
    }

    /// A compaction: every surface node after the system prompt (node 0) is replaced by one
    /// summary of the turns so far, which opens a request series at the next step.
    pub fn compact(&self) {
        let surface = self.session.surface();
        assert!(
            matches!(&surface[0], SurfaceNode::Message(m) if m.role() == Role::System),
            "node 0 is the system prompt"
        );
        let turn = self.turn;
        let summary = Message::user(format!("c{turn}"), format!("Summary of turns 1 to {turn}."));
        self.session
            .append(Event::replace(summary, 1, surface.len() - 1))
            .unwrap();
    }
}
