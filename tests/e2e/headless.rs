//! The design note's headless scenario over the stand-in: a prompt appended and a deferred tool
//! added in the same step keep the first request's bytes, which the provider reads from cache.

use mektpoy::{ContentBlock, Event, Reason, Role, Route, route_for};
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::agent::{Agent, Reply, tool};

/// The parts of a Messages body the scenario compares, as raw bytes.
#[derive(Deserialize)]
struct Parts<'a> {
    #[serde(borrow)]
    system: Option<&'a RawValue>,
    #[serde(borrow, default)]
    tools: Vec<&'a RawValue>,
    #[serde(borrow)]
    messages: Vec<&'a RawValue>,
}

fn raw(values: &[&RawValue]) -> Vec<String> {
    values.iter().map(|v| v.get().to_owned()).collect()
}

/// Runs the scenario on `route`, adding `search` (declared with `deferLoading` or not).
fn prompt_and_deferred_addition_in_one_step(key: &str, route: Route, search_deferred: bool) {
    let mut agent = Agent::new(key, route);
    let p1 = "You are a headless agent.";
    let p2 = "You are a headless agent. Report progress after each tool call.";
    let read = tool("read", 1, false);
    let search = tool("search", 1, search_deferred);

    let first = agent
        .step(
            p1,
            std::slice::from_ref(&read),
            Some("List the files."),
            Reply::Text,
        )
        .unwrap_or_else(|r| panic!("{key}: first request refused: {}", r.message));
    let len_before = agent.session.len();
    let second = agent
        .step(
            p2,
            &[read, search],
            Some("Now search for TODOs."),
            Reply::Text,
        )
        .unwrap_or_else(|r| panic!("{key}: second request refused: {}", r.message));

    // The log: the new prompt is appended in history (not a replace), the header is a `change`
    // that opens no series, and one developer message adds `search` through it.
    let events = agent.session.events();
    let batch: Vec<&Event> = events
        .iter()
        .skip(len_before)
        .take_while(|e| !matches!(e, Event::Message(m) if m.message.role() == Role::Assistant))
        .collect();
    assert_eq!(
        batch.len(),
        4,
        "{key}: system node, user message, header, developer message"
    );
    match batch[0] {
        Event::Message(m) => {
            assert_eq!(m.message.role(), Role::System);
            assert_eq!(m.message.text(), p2);
            assert_eq!(m.surface_op, Some(mektpoy::SurfaceOp::Append), "{key}");
        }
        other => panic!("{key}: {other:?}"),
    }
    let header_seq = second.request.header_seq.expect("a header");
    match batch[2] {
        Event::Header(h) => {
            assert_eq!(h.reason, Reason::Change);
            assert!(!h.starts_series, "{key}");
        }
        other => panic!("{key}: {other:?}"),
    }
    match batch[3] {
        Event::Message(m) => {
            assert_eq!(m.message.content(), [ContentBlock::addition("search")]);
            assert_eq!(m.header_seq, Some(header_seq));
        }
        other => panic!("{key}: {other:?}"),
    }
    assert!(!second.request.starts_series, "{key}");
    assert!(first.path.is_main() && second.path.is_main(), "{key}");

    // The projected messages of the second request start with the first request's.
    let (m1, m2) = (&first.request.messages, &second.request.messages);
    assert!(
        m2.len() > m1.len() && m1.iter().zip(m2.iter()).all(|(a, b)| a.ptr_eq(b)),
        "{key}: the first request's messages are a prefix of the second's"
    );

    // On the wire: the same `system`, the first request's tools as the second's non-deferred
    // tools, the first request's messages as the start of the second's.
    let w1: Parts<'_> = serde_json::from_str(&first.wire.body).unwrap();
    let w2: Parts<'_> = serde_json::from_str(&second.wire.body).unwrap();
    assert_eq!(
        w1.system.map(RawValue::get),
        Some(format!("{p1:?}").as_str()),
        "{key}"
    );
    assert_eq!(
        w1.system.map(RawValue::get),
        w2.system.map(RawValue::get),
        "{key}"
    );
    let non_deferred = |tools: &[&RawValue]| {
        tools
            .iter()
            .filter(|t| !t.get().contains(r#""defer_loading":true"#))
            .map(|t| t.get().to_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(non_deferred(&w1.tools), non_deferred(&w2.tools), "{key}");
    assert!(
        w2.tools
            .iter()
            .any(|t| t.get().contains(r#""name":"search""#)
                && t.get().contains(r#""defer_loading":true"#)),
        "{key}: search is declared deferred"
    );
    let (r1, r2) = (raw(&w1.messages), raw(&w2.messages));
    assert_eq!(
        r2[..r1.len()],
        r1[..],
        "{key}: wire messages extend the first request's"
    );
    assert_eq!(
        r2.last().map(String::as_str),
        Some(format!(
            r#"{{"role":"system","content":[{{"type":"text","text":{p2:?}}},{{"type":"tool_addition","tool":{{"type":"tool_reference","name":"search"}}}}]}}"#
        ).as_str()),
        "{key}: the prompt update and the addition go out as one system message at the end"
    );

    // The stand-in read the whole first request from its cache.
    assert!(first.usage.total_bytes > 0);
    assert_eq!(second.usage.cached_bytes, first.usage.total_bytes, "{key}");
    assert_eq!(
        second.usage.cache_read_input_tokens,
        first.usage.total_bytes.div_ceil(4),
        "{key}"
    );
}

#[test]
fn headless_prompt_append_and_deferred_addition_on_deepseek_flash_keep_the_first_request_cached() {
    let flash = route_for("deepseek", "deepseek-flash");
    prompt_and_deferred_addition_in_one_step("headless/flash", flash.clone(), false);
    prompt_and_deferred_addition_in_one_step("headless/flash/declared-deferred", flash, true);
}

#[test]
fn headless_prompt_append_and_deferred_addition_on_anthropic_in_history_keep_the_first_request_cached()
 {
    let opus = route_for("anthropic", "claude-opus-5");
    prompt_and_deferred_addition_in_one_step("headless/opus", opus, false);
}
