//! A measured miss checked against the attribution: the loop asks Anthropic's cache
//! diagnostics about every request (`agent::attribution::ask_cache_diagnostics`, the opt-in the
//! serializers do not send), decodes the stand-in's answer with the crate
//! (`Answer::diagnostics`), attaches its usage (`AgentLoop::observe_usage`), and compares the
//! reported first divergence with what its own attribution predicted (`Attribution::check`).
//!
//! On a route without a mode (`claude-fable-5-2`) a tool change is `tools_changed` and a system
//! prompt change `system_changed`, the caller's both; on an in-history route (`claude-opus-5`,
//! `claude-fable-5-1`) the same changes extend the previous request and nothing diverges. A
//! compaction is the caller's on every route: `messages_changed` without a mode, and
//! `tools_changed` in history, where it also removes the tool change and the prompt update, so
//! the new series declares the tools and sends the prompt anew. A request that extends the
//! previous one has no miss, and the provider says so (`diagnostics: null`). Under the random
//! churn of `random_churn`, on every Claude route, the report agrees with the prediction at
//! every sent request.

use mektpoy::agent::{Cause, Check};
use mektpoy::response::CacheMissKind;
use mektpoy::route_for;

use crate::agent::{Agent, Reply, Sent, arg_params, opus_by_reference, prompt, tool_of};
use crate::random_churn;

/// What a step should report: the vendor's miss kind and the attribution's cause, or neither.
type Expected = Option<(CacheMissKind, Cause)>;

/// Checks one answered step: the provider's report is `expected`, the attribution predicted
/// it (`Check::Agrees`), the estimates agree, and the measured cache read is what the meter
/// estimated.
fn checked(key: &str, sent: &Sent, expected: Expected, unit_tokens: u64) {
    let turn = sent.turn;
    let a = &sent.attribution;
    let diagnostics = sent.answer.diagnostics.as_ref();
    let reported = diagnostics
        .and_then(|d| d.cache_miss_reason.as_ref())
        .map(|r| r.kind.clone());
    assert_eq!(
        reported,
        expected.as_ref().map(|(kind, _)| kind.clone()),
        "{key} step {turn}: the provider's report ({a})"
    );
    assert_eq!(
        a.cause,
        expected.as_ref().map(|(_, cause)| *cause),
        "{key} step {turn}: {a}"
    );
    let check = a.check(diagnostics);
    assert_eq!(
        check,
        Check::Agrees {
            kind: expected.as_ref().map(|(kind, _)| kind.clone())
        },
        "{key} step {turn}: {a}: {check}"
    );
    if let Some(reason) = diagnostics.and_then(|d| d.cache_miss_reason.as_ref()) {
        // The stand-in counts from the first part that differs (a tool, `system`, a message),
        // the meter from the first byte: the same estimate, or more by less than one part.
        let missed = reason
            .cache_missed_input_tokens
            .expect("a *_changed reason");
        assert!(
            a.lost_tokens > 0 && a.lost_tokens <= missed && missed <= a.lost_tokens + unit_tokens,
            "{key} step {turn}: lost ~{} tokens, the provider says {missed}",
            a.lost_tokens
        );
    }
    let row = sent.measured.expect("the usage was attached");
    assert_eq!(row.unexplained_miss(), None, "{key} step {turn}");
}

/// Six steps: two that extend, a tool removed, the prompt changed, a compaction, one that
/// extends again; `no_mode` says what the tool and prompt changes cost on the route.
fn scenario(key: &str, model: &str, no_mode: bool, streaming: bool) {
    let mut agent = Agent::new(key, route_for("anthropic", model)).asking_diagnostics();
    if streaming {
        agent = agent.streaming();
    }
    let read = tool_of("read", 1, false, arg_params());
    let shell = tool_of("shell", 1, false, arg_params());
    let (p1, p2) = (
        prompt("You are a careful assistant."),
        prompt("You are a terse assistant."),
    );
    let both = [read.clone(), shell];
    let step = |agent: &mut Agent, prompt: &str, tools: &[_], expected: Expected| {
        let sent = agent
            .step(prompt, tools, Some("Carry on."), Reply::Text)
            .unwrap_or_else(|r| panic!("{key}: refused: {}", r.message));
        assert_eq!(sent.streamed, streaming);
        // The largest part a departure can sit in: the system prompt.
        checked(key, &sent, expected, (p1.len() as u64).div_ceil(4) + 1);
    };
    // The first request compares nothing; the second extends it.
    step(&mut agent, &p1, &both, None);
    step(&mut agent, &p1, &both, None);
    let on_no_mode = |kind, cause| no_mode.then_some((kind, cause));
    step(
        &mut agent,
        &p1,
        std::slice::from_ref(&read),
        on_no_mode(CacheMissKind::ToolsChanged, Cause::ToolsChanged),
    );
    step(
        &mut agent,
        &p2,
        std::slice::from_ref(&read),
        on_no_mode(CacheMissKind::SystemChanged, Cause::SystemPromptChanged),
    );
    // The compaction: on an in-history route it also removes the tool change and the prompt
    // update from the history, so the new series declares the tools and sends the prompt
    // anew, and the prefix diverges in the tools first.
    agent.compact();
    let compacted = match no_mode {
        true => CacheMissKind::MessagesChanged,
        false => CacheMissKind::ToolsChanged,
    };
    step(
        &mut agent,
        &p2,
        std::slice::from_ref(&read),
        Some((compacted, Cause::Compaction)),
    );
    step(&mut agent, &p2, std::slice::from_ref(&read), None);
}

#[test]
fn a_measured_miss_agrees_with_the_attribution_on_a_route_without_a_mode() {
    scenario("diagnostics-no-mode", "claude-fable-5-2", true, false);
    scenario("diagnostics-no-mode-sse", "claude-fable-5-2", true, true);
}

#[test]
fn on_an_in_history_route_tool_and_prompt_changes_extend_and_nothing_diverges() {
    scenario("diagnostics-in-history", "claude-opus-5", false, false);
    scenario(
        "diagnostics-in-history-binds",
        "claude-fable-5-1",
        false,
        true,
    );
}

/// The random churn of `random_churn` (additions, some deferred, removals, redefinitions,
/// prompt changes, compactions, tool calls, continuations) on every Claude route, asking for
/// the diagnostics: at every sent request the provider's report is what the attribution
/// predicted.
#[test]
fn under_random_churn_every_measured_miss_agrees_with_the_attribution() {
    // Per route, how many requests the provider reported a divergence for: the agreement
    // is not the vacuous one of two silences.
    let mut reported = std::collections::BTreeMap::<&str, usize>::new();
    for seed in random_churn::seeds() {
        for (name, route) in [
            ("no-mode", route_for("anthropic", "claude-fable-5-2")),
            ("inline", route_for("anthropic", "claude-opus-5")),
            ("inline-binds", route_for("anthropic", "claude-fable-5-1")),
            ("by-reference", opus_by_reference(true)),
            ("by-reference-no-placeholder", opus_by_reference(false)),
        ] {
            let key = format!("diagnostics-random/{seed}/{name}");
            let rows = random_churn::run(Agent::new(&key, route).asking_diagnostics(), seed);
            for row in &rows {
                let sent = &row.sent;
                let a = &sent.attribution;
                let diagnostics = sent.answer.diagnostics.as_ref();
                let check = a.check(diagnostics);
                assert!(
                    matches!(check, Check::Agrees { .. }),
                    "{key} step {}: {a}: {check}",
                    sent.turn
                );
                *reported.entry(name).or_default() += usize::from(diagnostics.is_some());
            }
        }
    }
    assert!(reported.values().all(|&n| n > 0), "{reported:?}");
}
