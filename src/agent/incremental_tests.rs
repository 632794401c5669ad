//! The recorder's serializer resumes from the route's previous request (issue 13, [decisions
//! 77](crate::manual::decisions#decision-77) and 81; the Responses API, [decision
//! 143](crate::manual::decisions#decision-143)): over random loops (tool churn, compactions,
//! thinking, prompt changes, new series, retries) a loop whose serializer resumes, and whose
//! recorder scans only the new surface nodes for prompt nodes, sends exactly the requests of a loop
//! that starts from the first message and scans the whole surface every time. (Every debug build
//! also checks each resumed pass against a pass from the first message, inside the serializer.)

use proptest::prelude::*;

use super::AgentLoop;
use crate::event::{Event, MessageEvent, SurfaceOp, ThinkingPolicy};
use crate::vocab::{ContentBlock, Message, MessageSource, Role, ToolSchema};
use crate::{Config, Session, route_for};

#[derive(Clone, Debug)]
enum Action {
    /// A user turn with this text.
    User(String),
    /// The model's answer (with signed thinking or not, with this many tool calls), the
    /// results of its calls, then the next step.
    Answer {
        thinking: bool,
        calls: u8,
    },
    /// The effective tools become these of the pool.
    Tools(u8),
    /// A compaction: the surface's nodes `from..` become one summary message.
    Compact(u8),
    /// The system prompt becomes variant `n`.
    Prompt(u8),
    NewSeries,
    Retry,
}

fn action() -> impl Strategy<Value = Action> {
    prop_oneof![
        3 => "[a-z \"\\\\{}<>]{0,12}".prop_map(Action::User),
        6 => (any::<bool>(), 0u8..3).prop_map(|(thinking, calls)| Action::Answer { thinking, calls }),
        2 => any::<u8>().prop_map(Action::Tools),
        1 => (0u8..4).prop_map(Action::Compact),
        1 => (0u8..3).prop_map(Action::Prompt),
        1 => Just(Action::NewSeries),
        1 => Just(Action::Retry),
    ]
}

fn tool(i: usize) -> ToolSchema {
    let mut parameters = serde_json::Map::new();
    parameters.insert("type".into(), "object".into());
    ToolSchema::new(format!("t{i}"), format!("tool {i}"), parameters)
}

fn answer(n: usize, thinking: bool, calls: u8, provider: &str, model: &str) -> Vec<Message> {
    let mut content = Vec::new();
    if thinking {
        let mut extra = indexmap::IndexMap::new();
        if provider == "openai" {
            // A Responses reasoning item, as the decoder keeps it (decision 128).
            extra.insert("id".to_owned(), serde_json::json!(format!("rs_{n}")));
            extra.insert("summary".to_owned(), serde_json::json!([]));
            extra.insert(
                "encrypted_content".to_owned(),
                serde_json::json!(format!("enc{n}")),
            );
        }
        extra.insert("signature".to_owned(), serde_json::json!(format!("sig{n}")));
        content.push(ContentBlock::Reasoning {
            text: format!("think {n}"),
            extra,
        });
    }
    content.push(ContentBlock::text(format!("answer {n}")));
    for c in 0..calls {
        content.push(
            ContentBlock::tool_call(
                format!("c{n}-{c}"),
                "t0",
                format!(r#"{{"n": {n}, "c": {c}}}"#),
            )
            .unwrap(),
        );
    }
    let source = MessageSource::Model {
        provider: provider.into(),
        model: model.into(),
    };
    let mut out = vec![Message::new(
        format!("a{n}"),
        Role::Assistant,
        content,
        source,
    )];
    for c in 0..calls {
        out.push(Message::tool_result(
            format!("r{n}-{c}"),
            format!("c{n}-{c}"),
            format!("result {n} {c}"),
        ));
    }
    out
}

/// Applies action `a` (the `n`th) to `agent`: the request it records, if it records one
/// (`answered`: whether the loop's last request was answered).
fn record(
    agent: &mut AgentLoop,
    a: &Action,
    n: usize,
    answered: bool,
    provider: &str,
    model: &str,
) -> Option<Result<crate::Request, String>> {
    let request = match a {
        Action::User(text) if answered => agent.user_turn([Message::user(format!("u{n}"), text)]),
        Action::Answer { thinking, calls } if !answered || n.is_multiple_of(2) => {
            for m in answer(n, *thinking, *calls, provider, model) {
                agent.append(m).expect("append");
            }
            agent.next_step()
        }
        Action::Tools(mask) => {
            let tools: Vec<ToolSchema> = (0..6)
                .filter(|i| *i == 0 || mask & (1 << i) != 0)
                .map(tool)
                .collect();
            agent.set_tools(tools).unwrap();
            return None;
        }
        Action::Compact(from) => {
            let len = agent.session().surface().len();
            let start = usize::from(*from).min(len.saturating_sub(1));
            if len == 0 {
                return None;
            }
            let summary = Message::user(format!("sum{n}"), "summary");
            let op = SurfaceOp::Replace {
                start,
                end: len - 1,
            };
            let event = Event::Message(MessageEvent::new(summary, Some(op)));
            agent.session().append(event).ok()?;
            agent.next_step()
        }
        Action::Prompt(k) => {
            agent.set_system_prompt(format!("Be brief, variant {k}."));
            return None;
        }
        Action::NewSeries => {
            agent.new_series();
            return None;
        }
        Action::Retry => agent.retry(),
        _ => return None,
    };
    Some(request.map_err(|e| e.to_string()))
}

/// Runs `actions` on `route`'s loop; returns each recorded request's bytes (or refusal) and
/// the number of requests whose route memory held a prefix to resume from.
fn run(
    provider: &str,
    model: &str,
    policy: ThinkingPolicy,
    actions: &[Action],
    resume: bool,
) -> (Vec<String>, usize) {
    let route = route_for(provider, model);
    let session = Session::new("s");
    if policy != ThinkingPolicy::StripThinking {
        session.set_thinking_policy(policy).expect("policy");
    }
    let config = Config::new(provider, model)
        .with("max_tokens", 256.into())
        .unwrap();
    let mut agent = AgentLoop::builder(session, route.clone())
        .config(config)
        .system_prompt("Be brief.")
        .tools([tool(0), tool(1)])
        .build()
        .unwrap();
    agent.recorder.set_resume(resume);
    let mut sent = Vec::new();
    let mut resumable = 0;
    let mut n = 0;
    let mut answered = true;
    for a in actions {
        n += 1;
        let Some(request) = record(&mut agent, a, n, answered, provider, model) else {
            continue;
        };
        let request = request.expect("record");
        answered = false;
        resumable += usize::from(agent.recorder.resumable_messages(&route).is_some());
        sent.push(match request.to_wire() {
            Ok(w) => format!("{:?}\n{}\n{:?}", w.headers, w.body, w.report),
            Err(e) => format!("refused: {e:?}"),
        });
        if let Action::Answer { .. } | Action::User(_) = a {
            answered = matches!(a, Action::User(_));
        }
    }
    (sent, resumable)
}

/// The incremental path is taken: in a plain loop each request leaves a longer prefix.
#[test]
fn a_loop_resumes_from_a_growing_prefix() {
    let actions: Vec<Action> = std::iter::once(Action::User("go".into()))
        .chain((0..6).map(|_| Action::Answer {
            thinking: false,
            calls: 1,
        }))
        .collect();
    let route = route_for("deepseek", "deepseek-flash");
    let session = Session::new("s");
    let config = Config::new("deepseek", "deepseek-flash")
        .with("max_tokens", 256.into())
        .unwrap();
    let mut agent = AgentLoop::builder(session, route.clone())
        .config(config)
        .tools([tool(0)])
        .build()
        .unwrap();
    let mut lens = Vec::new();
    for (n, a) in actions.iter().enumerate() {
        match a {
            Action::User(t) => agent.user_turn([Message::user("u", t.as_str())]),
            _ => {
                for m in answer(n, false, 1, "deepseek", "deepseek-flash") {
                    agent.append(m).unwrap();
                }
                agent.next_step()
            }
        }
        .unwrap();
        lens.push(agent.recorder.resumable_messages(&route));
    }
    // No assistant message before the first answer: nothing to resume from yet.
    assert_eq!(lens[0], None);
    let grown: Vec<usize> = lens[1..].iter().map(|l| l.expect("a prefix")).collect();
    assert!(grown.windows(2).all(|w| w[1] == w[0] + 2), "{lens:?}");
}

/// On a chat route a request leaves its point at its end ([decision
/// 81](crate::manual::decisions#decision-81)): from the first request on, each step resumes after
/// every message the previous one sent.
#[test]
fn a_chat_loop_resumes_after_every_message_sent() {
    let route = route_for("openai-compatible", "any");
    let config = Config::new("openai-compatible", "any");
    let mut agent = AgentLoop::builder(Session::new("s"), route.clone())
        .config(config)
        .system_prompt("Be brief.")
        .tools([tool(0)])
        .build()
        .unwrap();
    agent.user_turn([Message::user("u", "go")]).unwrap();
    let mut lens = vec![agent.recorder.resumable_messages(&route)];
    for n in 0..5 {
        for m in answer(n, n % 2 == 0, 1, "openai-compatible", "any") {
            agent.append(m).unwrap();
        }
        let request = agent.next_step().unwrap();
        lens.push(agent.recorder.resumable_messages(&route));
        assert_eq!(lens.last().copied().flatten(), Some(request.messages.len()));
    }
    // The system node and the user's message, then two messages a step.
    assert_eq!(lens[0], Some(2));
    assert!(
        lens.windows(2).all(|w| w[1] == w[0].map(|l| l + 2)),
        "{lens:?}"
    );
}

/// On a Responses route a request leaves its point at its end too ([decision
/// 143](crate::manual::decisions#decision-143)), `additional_tools` items included: each step
/// resumes after every message the previous one sent, and the loop's meter cuts it by the
/// serializer's spans, from what is new.
#[test]
fn a_responses_loop_resumes_after_every_message_sent() {
    let route = route_for("openai", "gpt-5.4");
    let mut agent = AgentLoop::builder(Session::new("s"), route.clone())
        .system_prompt("Be brief.")
        .tools([tool(0)])
        .build()
        .unwrap();
    let first = agent.user_turn([Message::user("u", "go")]).unwrap();
    agent.observe(&first.to_wire().unwrap()).unwrap();
    let mut lens = vec![agent.recorder.resumable_messages(&route)];
    for n in 0..5 {
        if n == 2 {
            // An addition: a developer message, an `additional_tools` item at the end.
            agent.set_tools([tool(0), tool(1)]).unwrap();
        }
        for m in answer(n, n % 2 == 0, 1, "openai", "gpt-5.4") {
            agent.append(m).unwrap();
        }
        let request = agent.next_step().unwrap();
        let wire = request.to_wire().unwrap();
        let segments = wire.segments.as_deref().unwrap();
        assert!(segments.resumed.is_some(), "step {n}");
        assert!(segments.first > 0, "step {n}");
        let before = agent.meter.rows().len();
        agent.observe(&wire).unwrap();
        assert_eq!(agent.meter.rows().len(), before + 1);
        if n == 2 {
            assert!(wire.body().contains(r#""type":"additional_tools""#));
        }
        lens.push(agent.recorder.resumable_messages(&route));
        assert_eq!(lens.last().copied().flatten(), Some(request.messages.len()));
    }
    // The system node and the user's message, then two messages a step (three with the
    // developer message of the addition).
    assert_eq!(lens[0], Some(2));
    let steps: Vec<usize> = lens
        .windows(2)
        .map(|w| w[1].unwrap() - w[0].unwrap())
        .collect();
    assert_eq!(steps, [2, 2, 3, 2, 2], "{lens:?}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn resumed_requests_are_the_requests_of_a_fresh_pass(
        actions in proptest::collection::vec(action(), 1..40),
        route in 0usize..7,
        drop_block in any::<bool>(),
    ) {
        let (provider, model) = [
            ("deepseek", "deepseek-flash"),
            ("anthropic", "claude-opus-5-5"),
            ("anthropic", "claude-opus-5"),
            ("deepseek", "deepseek-v4-pro"),
            ("openai-compatible", "any"),
            // The Responses API, with `additional_tools` items and without (decision 143).
            ("openai", "gpt-5.4"),
            ("openai", "gpt-0-unknown"),
        ][route];
        let policy = if drop_block { ThinkingPolicy::DropBlock } else { ThinkingPolicy::StripThinking };
        let (incremental, _) = run(provider, model, policy, &actions, true);
        let (fresh, none) = run(provider, model, policy, &actions, false);
        prop_assert_eq!(none, 0);
        prop_assert_eq!(incremental, fresh);
    }
}

/// [Decision 106](crate::manual::decisions#decision-106): the recorder's and the meter's copies of
/// the route's previous request stay the request the provider last accepted. Over random loops
/// (tool churn, compactions, prompt changes, new series, thinking, failed attempts and their
/// retries) on Messages and chat routes, each time a new step is recorded, the recorder's
/// rewrite-check fingerprint of its accepted previous request reads as the fingerprint of the last
/// body the loop observed (the last one the provider accepted: an attempt followed by a retry is
/// never observed), each extending the other; and the meter's previous cut is that body's cut.
fn copies_stay_in_step(provider: &str, model: &str, actions: &[Action]) -> Result<(), String> {
    let route = route_for(provider, model);
    let config = Config::new(provider, model)
        .with("max_tokens", 256.into())
        .unwrap();
    let mut agent = AgentLoop::builder(Session::new("s"), route.clone())
        .config(config)
        .system_prompt("Be brief.")
        .tools([tool(0), tool(1)])
        .build()
        .unwrap();
    let mut observed: Option<String> = None;
    let mut unobserved: Option<crate::WireRequest> = None;
    let mut n = 0;
    let mut answered = true;
    for (k, a) in actions.iter().enumerate() {
        n += 1;
        let Some(request) = record(&mut agent, a, n, answered, provider, model) else {
            continue;
        };
        let request = request.map_err(|e| format!("record: {e}"))?;
        let retry = matches!(a, Action::Retry);
        if !retry {
            // The loop moved on: the request before was accepted (observed just below).
            if let Some(wire) = unobserved.take() {
                observed = Some(wire.body().to_owned());
                agent.observe(&wire).map_err(|e| format!("observe: {e}"))?;
            }
            if let Some(body) = &observed {
                if route.api == crate::route::WireApi::Messages {
                    let of_body = crate::wire::Fingerprint::of(body).ok_or("not a body")?;
                    let kept = agent
                        .recorder
                        .accepted_fingerprint(&route)
                        .ok_or(format!("action {k}: no accepted fingerprint"))?;
                    if kept.rewrite_since(&of_body).is_some()
                        || of_body.rewrite_since(kept).is_some()
                        || kept.blocks != of_body.blocks
                    {
                        return Err(format!(
                            "action {k}: the recorder's previous request departs"
                        ));
                    }
                }
                let cut = agent.meter.prefix_bytes(body).map_err(|e| e.to_string())?;
                if agent.meter.previous_bytes() != Some(&cut[..]) {
                    return Err(format!("action {k}: the meter's previous cut departs"));
                }
            }
        }
        answered = false;
        // Sent; accepted unless the next action retries it (then it failed and is dropped).
        unobserved = request.to_wire().ok();
        if let Action::Answer { .. } | Action::User(_) = a {
            answered = matches!(a, Action::User(_));
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn the_recorders_and_the_meters_copies_are_the_last_accepted_request(
        actions in proptest::collection::vec(action(), 1..40),
        route in 0usize..7,
    ) {
        let (provider, model) = [
            ("deepseek", "deepseek-flash"),
            ("anthropic", "claude-opus-5-5"),
            ("anthropic", "claude-opus-5"),
            ("anthropic", "claude-fable-5-2"),
            ("openai-compatible", "any"),
            ("openai", "gpt-5.4"),
            ("openai", "gpt-0-unknown"),
        ][route];
        prop_assert_eq!(copies_stay_in_step(provider, model, &actions), Ok(()));
    }
}
