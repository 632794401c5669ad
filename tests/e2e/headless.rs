//! The design note's headless scenario over the stand-in: a prompt appended and a deferred tool
//! added in the same step keep the first request's bytes, which the provider reads from cache —
//! on every route that takes tool changes and prompts in history, by reference (DeepSeek flash,
//! `claude-opus-5` as Bedrock and Google Cloud serve it) and by value (`claude-opus-5` and
//! `claude-fable-5-1` on the Claude API). On a route without a mode (`claude-fable-5-2`) the
//! same step rewrites `tools` and `system`, so it loses the cache, and the thinking policy
//! leaves out the first answer's signed thinking.
//!
//! Three shapes of the addition:
//! - `search` is new, declared without `deferLoading`;
//! - `search` is new, declared with `deferLoading` (its addition activates it);
//! - `search` is a deferred tool of the first header (a *baseline* tool), withdrawn before it
//!   was ever offered and declared again in the step (reference §3: it continues the series).
//!
//! On an inline-definition route `tools` is frozen (reference §5.1): the first two shapes add
//! `search` **by value** (its definition inside the block, `deferLoading` cleared), the third
//! **by reference** (`search` is one of the series' declarations with that definition).

use mektpoy::{
    ContentBlock, Event, Route,
    event::{Reason, SeriesStart, SurfaceOp},
    route_for,
    vocab::Role,
};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};

use crate::agent::{Agent, Reply, Sent, arg_params, opus_by_reference, prompt, tool_of};

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

fn parsed(raw: &RawValue) -> Value {
    serde_json::from_str(raw.get()).unwrap()
}

/// How `search` comes in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Search {
    /// New in the step, without `deferLoading`.
    New,
    /// New in the step, declared with `deferLoading`.
    NewDeferred,
    /// A deferred tool of the first header, withdrawn before the compared requests (never
    /// offered) and declared again in the step.
    DeferredBaseline,
}

/// Runs the scenario on `route`.
fn prompt_and_deferred_addition_in_one_step(key: &str, route: Route, search: Search) {
    let key = &format!("{key}/{search:?}");
    let mode = route.tool_update().is_some();
    let inline = route.inline_definitions();
    let binds = route.binds_thinking();
    let mut agent = Agent::new(key, route);
    let p1 = prompt("You are a headless agent.");
    let p2 = prompt("You are a headless agent. Report progress after each tool call.");
    let read = tool_of("read", 1, false, arg_params());
    let searched = tool_of("search", 1, search != Search::New, arg_params());
    let refused = |what: &'static str| {
        move |r: crate::standin::Refused| -> Sent {
            panic!(
                "{key}: {what} request refused ({}): {}",
                r.status, r.message
            )
        }
    };

    if search == Search::DeferredBaseline {
        agent
            .step(
                &p1,
                &[read.clone(), searched.clone()],
                Some("Look around."),
                Reply::Text,
            )
            .unwrap_or_else(refused("opening"));
    }
    let first = agent
        .step(
            &p1,
            std::slice::from_ref(&read),
            Some("List the files."),
            Reply::Text,
        )
        .unwrap_or_else(refused("first"));
    let len_before = agent.session().len();
    let second = agent
        .step(
            &p2,
            &[read, searched],
            Some("Now search for TODOs."),
            Reply::Text,
        )
        .unwrap_or_else(refused("second"));

    // The log: the new prompt is appended in history (not a replace), the header is a `change`
    // that opens no series, and one developer message adds `search` through it. Without
    // prompts in history (the route without a mode) the prompt node is replaced instead,
    // which opens a request series; the log still records the addition, and, on a model that
    // binds thinking, the route's new thinking floor (the request rewrites `tools`).
    let events = agent.session().events();
    let batch: Vec<&Event> = events
        .iter()
        .skip(len_before)
        .take_while(|e| !matches!(e, Event::Message(m) if m.message.role() == Role::Assistant))
        .collect();
    let floor = !mode && binds;
    assert_eq!(
        batch.len(),
        4 + usize::from(floor),
        "{key}: system node, user message, header, developer message (, thinking floor)"
    );
    if floor {
        match batch[4] {
            Event::Thinking(t) => match &**t {
                mektpoy::event::ThinkingEvent::Floor(f) => {
                    assert_eq!(
                        (f.provider.as_str(), f.model.as_str()),
                        ("anthropic", "claude-fable-5-2")
                    );
                    assert_eq!(Some(f.rewrite), second.request.rewrite, "{key}");
                }
                other => panic!("{key}: {other:?}"),
            },
            other => panic!("{key}: {other:?}"),
        }
    }
    match batch[0] {
        Event::Message(m) => {
            assert_eq!(m.message.role(), Role::System);
            assert_eq!(m.message.text(), p2);
            let op = if mode {
                SurfaceOp::Append
            } else {
                SurfaceOp::Replace { start: 0, end: 0 }
            };
            assert_eq!(m.surface_op, Some(op), "{key}");
        }
        other => panic!("{key}: {other:?}"),
    }
    let header_seq = second.request.header_seq.expect("a header");
    match batch[2] {
        Event::Header(h) => {
            assert_eq!(h.reason, Reason::Change);
            assert_eq!(h.starts_series, !mode, "{key}");
        }
        other => panic!("{key}: {other:?}"),
    }
    match batch[3] {
        Event::Message(m) => {
            assert_eq!(
                m.message.content(),
                [ContentBlock::addition("search").unwrap()]
            );
            assert_eq!(m.header_seq, Some(header_seq));
        }
        other => panic!("{key}: {other:?}"),
    }

    // The projected messages of the second request start with the first request's.
    let (m1, m2) = (&first.request.messages, &second.request.messages);
    let kept = usize::from(!mode); // node 0 was replaced
    assert!(
        m2.len() > m1.len()
            && m1
                .iter()
                .skip(kept)
                .zip(m2.iter().skip(kept))
                .all(|(a, b)| a.ptr_eq(b)),
        "{key}: the first request's messages are a prefix of the second's"
    );

    let w1: Parts<'_> = serde_json::from_str(first.wire.body()).unwrap();
    let w2: Parts<'_> = serde_json::from_str(second.wire.body()).unwrap();
    let (r1, r2) = (raw(&w1.messages), raw(&w2.messages));
    let p1_json = Some(json!(p1));
    assert_eq!(w1.system.map(parsed), p1_json, "{key}");
    if !mode {
        let answers = 1 + usize::from(search == Search::DeferredBaseline);
        no_mode_rewrites(key, &first, &second, &p2, answers);
        return;
    }
    assert_eq!(second.request.series_start, None, "{key}");
    assert!(first.path.is_main() && second.path.is_main(), "{key}");

    // On the wire: the same `system`, the first request's tools as the second's non-deferred
    // tools (all of them, frozen, on an inline route), the first request's messages as the
    // start of the second's.
    assert_eq!(w2.system.map(parsed), p1_json, "{key}");
    let non_deferred = |tools: &[&RawValue]| {
        tools
            .iter()
            .filter(|t| !t.get().contains(r#""defer_loading":true"#))
            .map(|t| t.get().to_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(non_deferred(&w1.tools), non_deferred(&w2.tools), "{key}");
    if inline {
        assert_eq!(raw(&w1.tools), raw(&w2.tools), "{key}: tools are frozen");
    }
    let declared_deferred = w2.tools.iter().any(|t| {
        t.get().contains(r#""name":"search""#) && t.get().contains(r#""defer_loading":true"#)
    });
    assert_eq!(
        declared_deferred,
        !inline || search == Search::DeferredBaseline,
        "{key}: search is declared deferred (by reference), or not at all (by value)"
    );
    assert_eq!(
        r2[..r1.len()],
        r1[..],
        "{key}: wire messages extend the first request's"
    );
    let by_value = inline && search != Search::DeferredBaseline;
    let addition = if by_value {
        json!({"type": "tool_addition", "tool": {"type": "tool_definition", "definition": {
            "name": "search",
            "description": "search",
            "input_schema": {"type": "object", "properties": {"arg": {"type": "string"}}}
        }}})
    } else {
        json!({"type": "tool_addition", "tool": {"type": "tool_reference", "name": "search"}})
    };
    assert_eq!(
        w2.messages.last().map(|m| parsed(m)),
        Some(json!({"role": "system", "content": [{"type": "text", "text": p2}, addition]})),
        "{key}: the prompt update and the addition go out as one system message at the end"
    );

    // The first answer's signed thinking goes back as it came: nothing was rewritten.
    if binds {
        assert_eq!(second.request.rewrite, None, "{key}");
        assert_eq!(second.wire.report().thinking_left_out, 0, "{key}");
        let answer = json!({"role": "assistant", "content": first.content});
        assert_eq!(parsed(w2.messages[r1.len()]), answer, "{key}");
        assert_eq!(first.content[0]["type"], "thinking", "{key}");
    }

    // The stand-in read the whole first request from its cache.
    assert!(first.usage.total_bytes > 2048, "{key}: above the minimum");
    let kept = crate::standin::kept_by(second.wire.body(), first.usage.total_bytes);
    assert_eq!(second.usage.cached_bytes, kept, "{key}");
    assert_eq!(
        second.usage.cache_read_input_tokens,
        kept.div_ceil(4),
        "{key}"
    );
}

/// Without a mode the step rewrites: `system` is P2 (node 0 replaced), `search` is declared
/// as an ordinary tool in `tools`, no system message goes out, and (the model binds thinking)
/// the thinking blocks of every earlier answer (`answers`) are left out from here on. The
/// cached prefix ends inside the tools, below the minimum cacheable length: nothing is read
/// from the cache.
fn no_mode_rewrites(key: &str, first: &Sent, second: &Sent, p2: &str, answers: usize) {
    let w1: Parts<'_> = serde_json::from_str(first.wire.body()).unwrap();
    let w2: Parts<'_> = serde_json::from_str(second.wire.body()).unwrap();
    let (r1, r2) = (raw(&w1.messages), raw(&w2.messages));
    assert_eq!(
        second.request.series_start,
        Some(SeriesStart::PromptReplaced),
        "{key}"
    );
    assert!(second.request.rewrite.is_some(), "{key}");
    assert_eq!(w2.system.map(parsed), Some(json!(p2)), "{key}");
    let tools: Vec<Value> = w2.tools.iter().map(|t| parsed(t)).collect();
    assert_eq!(
        tools.iter().map(|t| &t["name"]).collect::<Vec<_>>(),
        ["read", "search"],
        "{key}"
    );
    assert!(
        tools.iter().all(|t| t.get("defer_loading").is_none()),
        "{key}"
    );
    assert_eq!(r2[..r1.len()], r1[..], "{key}");
    assert_eq!(
        r2.len(),
        r1.len() + 2,
        "{key}: the answer and the user message"
    );
    assert!(!second.wire.body().contains("tool_addition"), "{key}");
    // The first answer goes back as its text only; so does the opening one, if any.
    assert_eq!(first.content[0]["type"], "thinking", "{key}");
    assert_eq!(second.wire.report().thinking_left_out, answers, "{key}");
    assert!(
        !second.wire.body().contains(r#""type":"thinking""#),
        "{key}"
    );
    let answer = json!({"role": "assistant", "content": [first.content.last().unwrap()]});
    assert_eq!(
        serde_json::from_str::<Value>(&r2[r1.len()]).unwrap(),
        answer,
        "{key}"
    );
    assert_eq!(second.usage.cached_bytes, 0, "{key}");
}

const SHAPES: [Search; 3] = [Search::New, Search::NewDeferred, Search::DeferredBaseline];

#[test]
fn headless_prompt_append_and_deferred_addition_on_deepseek_flash_keep_the_first_request_cached() {
    for search in SHAPES {
        let flash = route_for("deepseek", "deepseek-flash");
        prompt_and_deferred_addition_in_one_step("headless/flash", flash, search);
    }
}

#[test]
fn headless_prompt_append_and_deferred_addition_on_anthropic_by_reference_keep_the_first_request_cached()
 {
    for search in SHAPES {
        let opus = opus_by_reference(true);
        prompt_and_deferred_addition_in_one_step("headless/opus/by-reference", opus, search);
    }
}

#[test]
fn headless_prompt_append_and_addition_by_value_on_anthropic_inline_keep_the_first_request_cached()
{
    for search in SHAPES {
        let opus = route_for("anthropic", "claude-opus-5");
        assert!(opus.inline_definitions() && !opus.deferred_placeholder());
        prompt_and_deferred_addition_in_one_step("headless/opus", opus, search);
        let fable = route_for("anthropic", "claude-fable-5-1");
        assert!(fable.inline_definitions() && fable.binds_thinking());
        prompt_and_deferred_addition_in_one_step("headless/fable-5-1", fable, search);
    }
}

#[test]
fn headless_prompt_change_and_addition_on_anthropic_without_mode_rewrite_and_leave_out_thinking() {
    for search in SHAPES {
        let fable = route_for("anthropic", "claude-fable-5-2");
        assert!(fable.tool_update().is_none() && fable.binds_thinking());
        prompt_and_deferred_addition_in_one_step("headless/fable-5-2", fable, search);
    }
}
