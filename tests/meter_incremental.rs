//! The loop's meter (`AgentLoop::observe`) meters a request from what is new: it cuts the body
//! by the serializer's spans and, when the request keeps the previous request's first wire
//! messages, compares only what follows them (decision 79 on Messages-API routes, decision 81
//! on chat routes). Its results
//! must be exactly the parsing meter's (`Meter::observe` on the body): the property below runs
//! random loops (rounds, user turns, jumps past the automatic-caching lookback, tool and
//! prompt changes, new series, retries, requests recorded but not observed, observed twice,
//! meters saved and restored) and compares the two after every request. Every debug build
//! also checks each request inside the loop's entry itself.

use mektpoy::vocab::{MessageSource, Role};
use mektpoy::{AgentLoop, Config, ContentBlock, Message, Meter, Route, Session, ToolSchema};
use mektpoy::{WireRequest, route_for};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    /// `n` answers with a tool call and their results, then the next step.
    Rounds(usize),
    /// A plain answer, then a user turn.
    UserTurn,
    /// The tools become this subset of the four (by bit).
    Tools(u8),
    /// Another system prompt.
    Prompt(u8),
    /// The caller opens a new series.
    NewSeries,
    /// The latest attempt again.
    Retry,
}

/// What happens to the request an op records.
#[derive(Clone, Copy, Debug)]
enum Seen {
    Observed,
    Twice,
    /// Recorded and sent, never metered (the next request resumes from a point this one
    /// left, which the meter never saw).
    Skipped,
    /// Observed, then the meter is saved and restored (the restored meter keeps no tokens).
    Restored,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (1usize..3).prop_map(Op::Rounds),
        1 => (8usize..14).prop_map(Op::Rounds),
        2 => Just(Op::UserTurn),
        1 => (0u8..16).prop_map(Op::Tools),
        1 => (0u8..3).prop_map(Op::Prompt),
        1 => Just(Op::NewSeries),
        1 => Just(Op::Retry),
    ]
}

fn seen() -> impl Strategy<Value = Seen> {
    prop_oneof![
        8 => Just(Seen::Observed),
        1 => Just(Seen::Twice),
        1 => Just(Seen::Skipped),
        1 => Just(Seen::Restored),
    ]
}

fn tool(name: &str) -> ToolSchema {
    let mut parameters = serde_json::Map::new();
    parameters.insert("type".into(), "object".into());
    ToolSchema::new(name, format!("the {name} tool"), parameters)
}

/// `read` always (the answers call it), and the others by bit.
fn tools(bits: u8) -> Vec<ToolSchema> {
    let mut out = vec![tool("read")];
    for (i, name) in ["grep", "shell", "edit", "web"].iter().enumerate() {
        if bits & (1 << i) != 0 {
            out.push(tool(name));
        }
    }
    out
}

struct Run {
    agent: AgentLoop,
    /// The parsing meter, fed the same bodies.
    slow: Meter,
    route: Route,
    next: usize,
}

impl Run {
    fn new(route: Route) -> Self {
        let config = Config::new(route.provider.clone(), route.model.clone())
            .with("max_tokens", 256.into())
            .unwrap();
        let mut agent = AgentLoop::builder(Session::new("s"), route.clone())
            .config(config)
            .system_prompt("You are careful.")
            .tools(tools(0))
            .build()
            .unwrap();
        let first = agent.user_turn([Message::user("u0", "Read the files.")]);
        let wire = first.expect("record").to_wire().expect("wire");
        let mut run = Run {
            agent,
            slow: Meter::new(&route),
            route,
            next: 1,
        };
        run.see(&wire, Seen::Observed);
        run
    }

    fn answer(&mut self, call: bool) {
        let k = self.next;
        self.next += 1;
        let mut content = vec![ContentBlock::text(format!("part {k}"))];
        if call {
            content.push(
                ContentBlock::tool_call(format!("c{k}"), "read", format!(r#"{{"line":{k}}}"#))
                    .unwrap(),
            );
        }
        let source = MessageSource::Model {
            provider: self.route.provider.to_string(),
            model: self.route.model.to_string(),
        };
        let answer = Message::new(format!("a{k}"), Role::Assistant, content, source);
        self.agent.append(answer).expect("append");
        if call {
            let result = Message::tool_result(format!("r{k}"), format!("c{k}"), "fn x() {}");
            self.agent.append(result).expect("append");
        }
    }

    fn apply(&mut self, op: &Op) -> WireRequest {
        let request = match op {
            Op::Rounds(n) => {
                for _ in 0..*n {
                    self.answer(true);
                }
                self.agent.next_step()
            }
            Op::UserTurn | Op::Tools(_) | Op::Prompt(_) | Op::NewSeries => {
                match op {
                    Op::Tools(bits) => self.agent.set_tools(tools(*bits)).unwrap(),
                    Op::Prompt(p) => self.agent.set_system_prompt(format!("Prompt {p}.")),
                    Op::NewSeries => self.agent.new_series(),
                    _ => {}
                }
                self.answer(false);
                let id = format!("u{}", self.next);
                self.agent.user_turn([Message::user(id, "Go on.")])
            }
            Op::Retry => self.agent.retry(),
        };
        request.expect("record").to_wire().expect("wire")
    }

    fn see(&mut self, wire: &WireRequest, seen: Seen) {
        let times = match seen {
            Seen::Skipped => 0,
            Seen::Twice => 2,
            Seen::Observed | Seen::Restored => 1,
        };
        for _ in 0..times {
            let fast = self.agent.observe(wire).expect("loop observe");
            let slow = self
                .slow
                .observe(wire.body(), wire.series_start())
                .expect("observe");
            assert_eq!(fast, slow);
        }
        if let Seen::Restored = seen {
            let saved = self.agent.meter().save();
            let meter = Meter::restore(&self.route, &saved).expect("restore");
            // The process restarts: a new loop over the same log, counting on from the meter.
            let config = self.agent.config().clone();
            let placeholder = AgentLoop::builder(Session::new("x"), self.route.clone())
                .config(config.clone())
                .build()
                .unwrap();
            let session = std::mem::replace(&mut self.agent, placeholder).into_session();
            self.agent = AgentLoop::builder(session, self.route.clone())
                .config(config)
                .meter(meter)
                .build()
                .unwrap();
            self.slow = Meter::restore(&self.route, &self.slow.save()).expect("restore");
        }
        let meter = self.agent.meter();
        assert_eq!(meter.rows(), self.slow.rows());
        assert_eq!(meter.departures(), self.slow.departures());
        assert_eq!(meter.save(), self.slow.save());
    }
}

fn check(route: Route, ops: &[(Op, Seen)]) {
    let mut run = Run::new(route);
    for (op, seen) in ops {
        let wire = run.apply(op);
        run.see(&wire, *seen);
    }
    // The next request after the loop is also compared before it is sent.
    let wire = run.apply(&Op::Rounds(1));
    run.see(&wire, Seen::Observed);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn the_loops_meter_gives_the_parsing_meters_rows_on_messages_routes(
        ops in prop::collection::vec((op(), seen()), 1..14),
        anthropic in any::<bool>(),
    ) {
        // Anthropic routes cache automatically: a jump past 20 blocks gets a lookback mark.
        let route = if anthropic {
            route_for("anthropic", "claude-sonnet-5-5")
        } else {
            route_for("deepseek", "deepseek-flash")
        };
        check(route, &ops);
    }

    #[test]
    fn the_loops_meter_gives_the_parsing_meters_rows_on_chat_routes(
        ops in prop::collection::vec((op(), seen()), 1..14),
    ) {
        check(route_for("openai-compatible", "any"), &ops);
    }
}

/// A long loop on a Messages route: the segment path on every request (the debug build's
/// check inside the loop's entry compares each with the parsing path).
#[test]
fn a_long_messages_loop_meters_as_the_parsing_meter() {
    let ops: Vec<(Op, Seen)> = (0..60)
        .map(|i| {
            let op = match i % 17 {
                5 => Op::UserTurn,
                9 => Op::Rounds(11),
                13 => Op::Tools(3),
                _ => Op::Rounds(1),
            };
            (op, Seen::Observed)
        })
        .collect();
    check(route_for("anthropic", "claude-sonnet-5-5"), &ops);
    check(route_for("deepseek", "deepseek-flash"), &ops);
}

/// The same long loop on an OpenAI-compatible chat route, whose requests carry spans and
/// resume from the whole previous request since decision 81.
#[test]
fn a_long_chat_loop_meters_as_the_parsing_meter() {
    let ops: Vec<(Op, Seen)> = (0..60)
        .map(|i| {
            let op = match i % 17 {
                5 => Op::UserTurn,
                9 => Op::Rounds(11),
                13 => Op::Tools(3),
                15 => Op::Prompt(1),
                _ => Op::Rounds(1),
            };
            let seen = match i % 23 {
                7 => Seen::Skipped,
                11 => Seen::Twice,
                19 => Seen::Restored,
                _ => Seen::Observed,
            };
            (op, seen)
        })
        .collect();
    check(route_for("openai-compatible", "any"), &ops);
}
