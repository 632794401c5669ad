//! The measured meter (reference §9 rules 7–9): the provider's usage attached to the rows and
//! summed, the unexplained-miss flag, and a meter carried over a restart (save / restore,
//! prime) producing exactly the rows the original would have.

use mektpoy::{
    Meter, Route,
    event::SeriesStart,
    meter::{DEFAULT_CACHE_BLOCK_TOKENS, Measured, MeterError, RestoreFault},
    response::{decode_chat, decode_messages},
    route::WireApi,
    route_for,
};
use proptest::prelude::*;

/// A chat body whose messages are `texts`, one user message each.
fn body(texts: &[&str]) -> String {
    let messages: Vec<String> = texts
        .iter()
        .map(|t| format!(r#"{{"role":"user","content":"{t}"}}"#))
        .collect();
    format!(r#"{{"messages":[{}]}}"#, messages.join(","))
}

/// One user message of `c`s whose cut is 8,192 bytes: 32 of DeepSeek's 64-token units at the
/// meter's four bytes a token, so that all of it can be read.
fn units(c: char) -> String {
    body(&[&c.to_string().repeat(8192 - 28)])
}

fn deepseek() -> Meter {
    Meter::new(&route_for("deepseek", "deepseek-flash"))
}

#[test]
fn measured_figures_are_attached_to_the_latest_row_and_summed() {
    let mut m = deepseek();
    let long = "x".repeat(4000);
    m.observe(&body(&[&long]), Some(SeriesStart::First))
        .unwrap();
    let first = m
        .observe_measured(Measured::new(1000, Some(0), None))
        .unwrap();
    assert_eq!(first.measured, Some(Measured::new(1000, Some(0), None)));
    m.observe(&body(&[&long, "more"]), None).unwrap();
    // The chat decoder's usage: DeepSeek's hit and miss figures.
    let answer = decode_chat(
        r#"{"id":"r","model":"deepseek-flash","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],
           "usage":{"prompt_tokens":1010,"completion_tokens":1,"prompt_cache_hit_tokens":1000,"prompt_cache_miss_tokens":10}}"#,
        "deepseek",
        None,
    )
    .unwrap();
    let second = m.observe_usage(&answer.usage.unwrap()).unwrap();
    assert_eq!(second.measured, Some(Measured::new(1010, Some(1000), None)));
    assert_eq!(
        second.unexplained_miss(),
        None,
        "the whole previous prompt was read"
    );
    // A third row without figures is not in the measured sums.
    m.observe(&body(&[&long, "more", "again"]), None).unwrap();
    let report = m.report();
    assert_eq!(report.requests, 3);
    assert_eq!(report.measured.requests, 2);
    assert_eq!(report.measured.prompt_tokens, 2010);
    assert_eq!(report.measured.cache_read_tokens, 1000);
    assert_eq!(
        (
            report.measured.read_reported,
            report.measured.write_reported
        ),
        (2, 0)
    );
    assert_eq!(report.measured.cache_write_tokens, 0);
    assert!((report.measured.hit_ratio() - 1000.0 / 2010.0).abs() < 1e-12);
    // The estimates are as before.
    assert_eq!(
        report.cached_bytes,
        m.rows()[1].cached_bytes + m.rows()[2].cached_bytes
    );
    assert_eq!(report.unexplained_misses, 0);
}

#[test]
fn messages_usage_carries_the_cache_write() {
    let mut m = Meter::new(&route_for("anthropic", "claude-opus-5"));
    m.observe(
        r#"{"cache_control":{"type":"ephemeral"},"messages":[{"role":"user","content":"hi"}]}"#,
        None,
    )
    .unwrap();
    let answer = decode_messages(
        r#"{"id":"msg","type":"message","role":"assistant","model":"claude-opus-5","content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn",
           "usage":{"input_tokens":3,"output_tokens":1,"cache_creation_input_tokens":600,"cache_read_input_tokens":0}}"#,
        "anthropic",
        None,
    )
    .unwrap();
    let row = m.observe_usage(&answer.usage.unwrap()).unwrap();
    assert_eq!(row.measured, Some(Measured::new(603, Some(0), Some(600))));
    let report = m.report();
    assert_eq!(
        (
            report.measured.cache_write_tokens,
            report.measured.write_reported
        ),
        (600, 1)
    );
}

#[test]
fn usage_without_a_request_or_twice_is_refused() {
    let mut m = deepseek();
    let figures = Measured::new(10, Some(0), None);
    assert!(matches!(
        m.observe_measured(figures),
        Err(MeterError::NoRequest)
    ));
    m.observe(&body(&["a"]), None).unwrap();
    m.observe_measured(figures).unwrap();
    let again = m.observe_measured(Measured::new(99, Some(99), None));
    assert!(matches!(again, Err(MeterError::AlreadyMeasured { row: 0 })));
    assert_eq!(
        m.rows()[0].measured,
        Some(figures),
        "a refused attach changes nothing"
    );
    assert_eq!(
        again.unwrap_err().to_string(),
        "request 0 already has measured usage"
    );
}

/// Two requests of the same long prompt, the second measured with `read` cached tokens.
fn repeat_with_read(read: u64) -> mektpoy::meter::MeterRow {
    let mut m = deepseek();
    let prompt = units('y');
    m.observe(&prompt, Some(SeriesStart::First)).unwrap();
    m.observe_measured(Measured::new(2000, Some(0), None))
        .unwrap();
    let row = m.observe(&prompt, None).unwrap();
    assert_eq!(
        row.cached_bytes, row.total_bytes,
        "the estimate: all cached"
    );
    m.observe_measured(Measured::new(2000, Some(read), None))
        .unwrap()
}

#[test]
fn a_read_short_by_more_than_one_block_is_an_unexplained_miss() {
    let miss = repeat_with_read(0);
    assert_eq!(miss.expected_read_tokens(), Some(2000));
    assert_eq!(
        miss.unexplained_miss(),
        Some(2000),
        "estimate cached, usage 0"
    );
    // DeepSeek's block is 64 tokens: 65 short is flagged, 64 short is within one block.
    assert_eq!(repeat_with_read(2000 - 65).unexplained_miss(), Some(65));
    assert_eq!(repeat_with_read(2000 - 64).unexplained_miss(), None);
    assert_eq!(repeat_with_read(2000).unexplained_miss(), None);
    assert_eq!(
        repeat_with_read(2100).unexplained_miss(),
        None,
        "more than estimated"
    );
}

#[test]
fn the_estimate_converts_at_the_measured_rate_not_four_bytes_a_token() {
    // 8,192 bytes the provider counts as 1,000 tokens: at ⌈bytes / 4⌉ the estimate would be
    // 2,048 and a full hit would look 1,048 short.
    let mut m = deepseek();
    let prompt = units('z');
    m.observe(&prompt, None).unwrap();
    m.observe_measured(Measured::new(1000, Some(0), None))
        .unwrap();
    m.observe(&prompt, None).unwrap();
    let row = m
        .observe_measured(Measured::new(1000, Some(1000), None))
        .unwrap();
    assert_eq!(row.expected_read_tokens(), Some(1000));
    assert_eq!(row.unexplained_miss(), None);
    // Without the previous request's figures, this request's own rate is used.
    let mut m = deepseek();
    m.observe(&prompt, None).unwrap();
    m.observe(&prompt, None).unwrap();
    let row = m
        .observe_measured(Measured::new(1000, Some(0), None))
        .unwrap();
    assert_eq!(row.expected_read_tokens(), Some(1000));
    assert_eq!(row.unexplained_miss(), Some(1000));
}

#[test]
fn a_series_the_caller_opened_or_a_zero_estimate_is_never_flagged() {
    let mut m = deepseek();
    let prompt = units('w');
    m.observe(&prompt, None).unwrap();
    m.observe_measured(Measured::new(2000, Some(0), None))
        .unwrap();
    for start in [SeriesStart::Asked, SeriesStart::Rewound] {
        assert!(start.by_caller());
        m.observe(&prompt, Some(start)).unwrap();
        let row = m
            .observe_measured(Measured::new(2000, Some(0), None))
            .unwrap();
        assert!(row.expected_read_tokens().unwrap() > 0);
        assert_eq!(
            row.unexplained_miss(),
            None,
            "{start:?}: the caller's choice"
        );
    }
    // A series the crate's rules opened is no excuse.
    m.observe(&prompt, Some(SeriesStart::Redeclared)).unwrap();
    let row = m
        .observe_measured(Measured::new(2000, Some(0), None))
        .unwrap();
    assert_eq!(row.unexplained_miss(), Some(2000));
    // An estimate of 0 (nothing in common) is never flagged, whatever the provider read.
    m.observe(r#"{"messages":["other"]}"#, None).unwrap();
    let row = m.observe_measured(Measured::new(5, Some(0), None)).unwrap();
    assert_eq!(row.cached_bytes, 0);
    assert_eq!(row.unexplained_miss(), None);
    // A provider that reports no cache read is not judged.
    m.observe(&body(&["other"]), None).unwrap();
    let row = m.observe_measured(Measured::new(5, None, None)).unwrap();
    assert_eq!(row.unexplained_miss(), None);
    assert_eq!(m.report().unexplained_misses, 1);
}

#[test]
fn a_route_without_a_documented_block_gets_the_default() {
    let route = Route::builder("p", "m", WireApi::OpenAiChat)
        .build()
        .unwrap();
    assert_eq!(route.cache_block_tokens(), 0);
    let mut m = Meter::new(&route);
    let prompt = body(&[&"v".repeat(40_000)]);
    m.observe(&prompt, None).unwrap();
    m.observe(&prompt, None).unwrap();
    let short = u64::from(DEFAULT_CACHE_BLOCK_TOKENS);
    let row = m
        .observe_measured(Measured::new(10_000, Some(10_000 - short), None))
        .unwrap();
    assert_eq!(row.unexplained_miss(), None, "within one default block");
}

#[test]
fn prime_makes_a_body_the_previous_request_without_a_row() {
    let (one, two) = (
        body(&["a long first message"]),
        body(&["a long first message", "b"]),
    );
    let mut original = deepseek();
    original.observe(&one, Some(SeriesStart::First)).unwrap();
    let expected = original.observe(&two, None).unwrap();
    let mut resumed = deepseek();
    resumed.prime(&one).unwrap();
    assert!(resumed.rows().is_empty());
    assert_eq!(resumed.observe(&two, None).unwrap(), expected);
    assert!(matches!(resumed.prime("[]"), Err(MeterError::Body(_))));
    assert_eq!(resumed.rows().len(), 1, "a refused body changes nothing");
    // A body primed after a row: the row's figures are not the primed body's rate.
    let prompt = units('p');
    let mut m = deepseek();
    m.observe(&body(&["short"]), None).unwrap();
    m.prime(&prompt).unwrap();
    m.observe_measured(Measured::new(1, Some(0), None)).unwrap();
    m.observe(&prompt, None).unwrap();
    let row = m
        .observe_measured(Measured::new(2000, Some(2000), None))
        .unwrap();
    assert_eq!(row.expected_read_tokens(), Some(2000), "its own rate");
}

#[test]
fn a_restored_meter_continues_where_the_saved_one_stopped() {
    let route = route_for("anthropic", "claude-opus-5");
    let mut m = Meter::new(&route);
    // A long first message, then (`more`) an answer and a second question.
    let prompt = |more: bool| {
        let more = if more {
            r#",{"role":"assistant","content":"ok"},{"role":"user","content":"and?"}"#
        } else {
            ""
        };
        format!(
            r#"{{"cache_control":{{"type":"ephemeral"}},"messages":[{{"role":"user","content":"{}"}}{more}]}}"#,
            "q".repeat(4000)
        )
    };
    m.observe(&prompt(false), Some(SeriesStart::First)).unwrap();
    m.observe_measured(Measured::new(1000, Some(0), Some(990)))
        .unwrap();
    let saved = m.save();
    assert!(saved.starts_with(r#"{"version":3,"route":"anthropic/claude-opus-5"#));
    let mut restored = Meter::restore(&route, &saved).unwrap();
    assert_eq!(restored.rows(), m.rows());
    assert_eq!(restored.report(), m.report());
    let next = prompt(true);
    assert_eq!(
        restored.observe(&next, None).unwrap(),
        m.observe(&next, None).unwrap()
    );
    let figures = Measured::new(1025, Some(0), Some(1020));
    let (a, b) = (
        restored.observe_measured(figures).unwrap(),
        m.observe_measured(figures).unwrap(),
    );
    assert_eq!(a, b);
    assert!(a.unexplained_miss().is_some(), "the rate came across too");
}

#[test]
fn a_saved_meter_for_another_route_or_version_is_refused() {
    let mut m = deepseek();
    m.observe(&body(&["a"]), None).unwrap();
    let saved = m.save();
    let other = route_for("deepseek", "deepseek-v4-pro");
    assert!(matches!(
        Meter::restore(&other, &saved),
        Err(MeterError::Restore {
            reason: RestoreFault::Route { .. }
        })
    ));
    let v4 = saved.replacen(r#""version":3"#, r#""version":4"#, 1);
    let flash = route_for("deepseek", "deepseek-flash");
    assert!(matches!(
        Meter::restore(&flash, &v4),
        Err(MeterError::Restore {
            reason: RestoreFault::Version(4)
        })
    ));
    for bad in [
        "",
        "[]",
        "{}",
        r#"{"version":1}"#,
        r#"{"version":2}"#,
        &saved[..saved.len() - 1],
    ] {
        assert!(
            matches!(
                Meter::restore(&flash, bad),
                Err(MeterError::Restore {
                    reason: RestoreFault::Malformed(_)
                })
            ),
            "{bad}"
        );
    }
    assert!(Meter::restore(&flash, &saved).is_ok());
    // The faults are cases, not text (issue 21): a cut-off save is the parser's end-of-input
    // fault, and departures that are not one per row say so with both counts.
    let Err(MeterError::Restore {
        reason: RestoreFault::Malformed(cut),
    }) = Meter::restore(&flash, &saved[..saved.len() - 1])
    else {
        panic!("a cut-off save is refused")
    };
    assert_eq!(cut.category(), serde_json::error::Category::Eof);
    let mut uneven: serde_json::Value = serde_json::from_str(&saved).unwrap();
    let rows = uneven["rows"].as_array().unwrap().len();
    assert!(rows > 0);
    uneven["departures"] = serde_json::json!([]);
    let err = Meter::restore(&flash, &uneven.to_string()).unwrap_err();
    assert!(
        matches!(
            &err,
            MeterError::Restore {
                reason: RestoreFault::DeparturesPerRow { rows: r, departures: 0 }
            } if *r == rows
        ),
        "{err}"
    );
    assert_eq!(
        err.to_string(),
        "the saved meter cannot be restored: not a saved meter (one departure per row expected)"
    );
}

/// One step of a random run: a body built from a few shared messages, a series start, and
/// perhaps measured figures (prompt, read).
type Step = (Vec<u8>, Option<u8>, Option<(u64, u64)>);

fn step() -> impl Strategy<Value = Step> {
    (
        proptest::collection::vec(0u8..4, 0..6),
        proptest::option::of(0u8..5),
        proptest::option::of((0u64..3000, 0u64..3000)),
    )
}

fn step_body(parts: &[u8], tools: bool) -> String {
    let texts: Vec<String> = parts
        .iter()
        .map(|p| format!("message {p} {}", "t".repeat(usize::from(*p) * 150)))
        .collect();
    let messages: Vec<String> = texts
        .iter()
        .map(|t| format!(r#"{{"role":"user","content":[{{"type":"text","text":"{t}"}}]}}"#))
        .collect();
    let tools = if tools {
        r#""tools":[{"name":"a"},{"name":"b","defer_loading":true}],"#
    } else {
        ""
    };
    format!(
        r#"{{"cache_control":{{"type":"ephemeral"}},{tools}"system":"s","messages":[{}]}}"#,
        messages.join(",")
    )
}

fn start(n: Option<u8>) -> Option<SeriesStart> {
    n.map(|n| match n {
        0 => SeriesStart::First,
        1 => SeriesStart::Asked,
        2 => SeriesStart::Rewound,
        3 => SeriesStart::PromptReplaced,
        _ => SeriesStart::Redeclared,
    })
}

fn run(meter: &mut Meter, steps: &[Step], tools: bool) {
    for (parts, s, figures) in steps {
        meter.observe(&step_body(parts, tools), start(*s)).unwrap();
        if let Some((prompt, read)) = figures {
            meter
                .observe_measured(Measured::new(*prompt, Some(*read), None))
                .unwrap();
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Save at a random point, restore, and feed both meters the same rest: the same rows,
    /// the same report, and the same saved text at the end.
    #[test]
    fn save_and_restore_at_any_point_gives_the_same_rows(
        route in 0usize..3,
        tools in any::<bool>(),
        steps in proptest::collection::vec(step(), 0..12),
        cut in any::<proptest::sample::Index>(),
    ) {
        let route = [
            route_for("deepseek", "deepseek-flash"),
            route_for("anthropic", "claude-opus-5"),
            route_for("openai-compatible", "x"),
        ][route].clone();
        let at = cut.index(steps.len() + 1);
        let mut original = Meter::new(&route);
        run(&mut original, &steps[..at], tools);
        let mut restored = Meter::restore(&route, &original.save()).unwrap();
        prop_assert_eq!(restored.rows(), original.rows());
        run(&mut original, &steps[at..], tools);
        run(&mut restored, &steps[at..], tools);
        prop_assert_eq!(restored.rows(), original.rows());
        prop_assert_eq!(restored.report(), original.report());
        prop_assert_eq!(restored.save(), original.save());
    }

    /// A saved text changed anywhere is refused or restored, never a panic.
    #[test]
    fn a_mangled_saved_meter_never_panics(
        steps in proptest::collection::vec(step(), 1..4),
        at in any::<proptest::sample::Index>(),
        byte in any::<u8>(),
    ) {
        let route = route_for("deepseek", "deepseek-flash");
        let mut m = Meter::new(&route);
        run(&mut m, &steps, false);
        let mut saved = m.save().into_bytes();
        let i = at.index(saved.len());
        saved[i] = byte;
        if let Ok(text) = std::str::from_utf8(&saved)
            && let Ok(mut restored) = Meter::restore(&route, text)
        {
            let _ = restored.report();
            let _ = restored.observe(&step_body(&[1, 2], false), None);
            let _ = restored.observe_measured(Measured::new(u64::MAX, Some(0), Some(u64::MAX)));
            let _ = restored.report();
        }
    }
}

/// A Messages body with top-level automatic caching: `system`, then one message per entry of
/// `messages` (alternating user / assistant, from a user turn), each with one text block per
/// string; `mark` puts an explicit breakpoint on block `(message, block)`.
fn claude(system: &str, messages: &[&[&str]], mark: Option<(usize, usize)>) -> String {
    let messages: Vec<serde_json::Value> = messages
        .iter()
        .enumerate()
        .map(|(i, blocks)| {
            let content: Vec<serde_json::Value> = blocks
                .iter()
                .enumerate()
                .map(|(j, t)| {
                    let mut b = serde_json::json!({"type": "text", "text": t});
                    if mark == Some((i, j)) {
                        b["cache_control"] = serde_json::json!({"type": "ephemeral"});
                    }
                    b
                })
                .collect();
            let role = if i % 2 == 0 { "user" } else { "assistant" };
            serde_json::json!({"role": role, "content": content})
        })
        .collect();
    serde_json::json!({
        "model": "m", "max_tokens": 8, "cache_control": {"type": "ephemeral"},
        "system": system, "messages": messages
    })
    .to_string()
}

/// A system prompt above every Claude model's minimum cacheable length.
fn long_system() -> String {
    "Be careful and brief. ".repeat(300)
}

#[test]
fn anthropic_reads_nothing_after_a_compaction_that_changes_an_early_block() {
    // The demo's `claude-opus-5` case: the byte prefix the compacted request shares with the
    // previous one (the system prompt and the start of the first message) ends at no block
    // any request wrote an entry at, so the provider reads nothing.
    let mut m = Meter::new(&route_for("anthropic", "claude-opus-5"));
    let s = long_system();
    m.observe(&claude(&s, &[&["read the files"]], None), None)
        .unwrap();
    let two = &[&["read the files"][..], &["done"], &["now the tests"]];
    let row = m.observe(&claude(&s, two, None), None).unwrap();
    assert!(row.cached_bytes > 4000, "an extension reads the entry");
    let compacted = &[&["read the files; summary: done"][..], &["ok"], &["go on"]];
    let row = m.observe(&claude(&s, compacted, None), None).unwrap();
    assert_eq!(
        row.cached_bytes, 0,
        "no entry ends where the prefix is shared"
    );
    assert_eq!(
        row.best_bytes,
        row.kept_bytes(),
        "the best client keeps it all"
    );
}

#[test]
fn anthropic_reads_the_longest_entry_at_a_block_not_the_longest_byte_prefix() {
    // A prompt change in the history: the previous request's entry is lost, an older one at
    // the end of the first message is still there and ends at a block of this request.
    let mut m = Meter::new(&route_for("anthropic", "claude-fable-5-2"));
    let s = long_system();
    let first = m
        .observe(&claude(&s, &[&["question one"]], None), None)
        .unwrap();
    let two = &[&["question one"][..], &["answer one"], &["question two"]];
    m.observe(&claude(&s, two, None), None).unwrap();
    let changed = &[
        &["question one"][..],
        &["answer one"],
        &["question two, reworded"],
        &["answer two"],
        &["question three"],
    ];
    let row = m.observe(&claude(&s, changed, None), None).unwrap();
    assert_eq!(
        row.cached_bytes, first.total_bytes,
        "the first request's entry, not the common prefix up to the reworded question"
    );
    assert!(row.kept_bytes() > row.cached_bytes);
}

/// `claude-opus-5`-like but without a minimum, for blocks too short to reach one.
fn anthropic_min0() -> Meter {
    Meter::new(
        &route_for("anthropic", "claude-opus-5")
            .into_builder()
            .min_cache_tokens(0)
            .build()
            .unwrap(),
    )
}

#[test]
fn a_breakpoint_looks_back_over_itself_and_the_nineteen_blocks_before_it() {
    let blocks: Vec<String> = (0..61).map(|i| format!("block {i}")).collect();
    let blocks: Vec<&str> = blocks.iter().map(String::as_str).collect();
    // The first request's entry ends at its block 1. A breakpoint on block 20 checks blocks
    // 1 to 20 (the 20th block back, counting its own, is block 1): read. On block 21 it
    // checks 2 to 21: not read, nor by the automatic breakpoint on block 60.
    for (mark, read) in [(20, true), (21, false)] {
        let mut m = anthropic_min0();
        let first = m
            .observe(&claude("s", &[&blocks[..2]], None), None)
            .unwrap();
        let row = m
            .observe(&claude("s", &[&blocks[..]], Some((0, mark))), None)
            .unwrap();
        // The first request's last block closed its message; here the message goes on: the
        // entry ends where its content array did.
        let cut = m.prefix_bytes(&claude("s", &[&blocks[..2]], None)).unwrap();
        let key = cut.iter().rposition(|&b| b == b']').unwrap() as u64;
        assert!(key < first.total_bytes);
        let expected = if read { key } else { 0 };
        assert_eq!(row.cached_bytes, expected, "breakpoint on block {mark}");
    }
}

#[test]
fn anthropic_writes_no_entry_below_the_minimum_cacheable_length() {
    // claude-opus-5: 512 tokens. A short first request writes nothing; the long one that
    // extends it reads nothing, and writes the entry the next one reads.
    let mut m = Meter::new(&route_for("anthropic", "claude-opus-5"));
    m.observe(&claude("s", &[&["short"]], None), None).unwrap();
    let long = "x".repeat(3000);
    let two = &[&["short"][..], &["ok"], &[long.as_str()]];
    let row = m.observe(&claude("s", two, None), None).unwrap();
    assert_eq!((row.cached_bytes, row.best_bytes), (0, 0));
    let three = &[
        &["short"][..],
        &["ok"],
        &[long.as_str()],
        &["ok"],
        &["more"],
    ];
    let next = m.observe(&claude("s", three, None), None).unwrap();
    assert_eq!(next.cached_bytes, row.total_bytes);
}

/// A chat body: `system`, then user messages `texts`.
fn chat(system: &str, texts: &[&str]) -> String {
    let mut messages = vec![serde_json::json!({"role": "system", "content": system})];
    messages.extend(
        texts
            .iter()
            .map(|t| serde_json::json!({"role": "user", "content": t})),
    );
    serde_json::json!({"model": "m", "messages": messages}).to_string()
}

#[test]
fn deepseek_reads_an_older_prompt_in_64_token_units() {
    // The newcomer's loop: a prompt change, then back. The provider still holds the first
    // prompt and reads it; the meter booked the request as a loss against the previous one.
    let mut m = deepseek();
    let (p1, p2) = (
        "You review code. ".repeat(100),
        "You write tests. ".repeat(100),
    );
    let first = m.observe(&chat(&p1, &["look at main.rs"]), None).unwrap();
    let other = m.observe(&chat(&p2, &["look at main.rs"]), None).unwrap();
    assert!(
        other.cached_bytes < 256,
        "another prompt from its first bytes"
    );
    let back = m
        .observe(&chat(&p1, &["look at main.rs", "and lib.rs"]), None)
        .unwrap();
    assert_eq!(back.cached_bytes, first.total_bytes / 256 * 256);
    assert!(
        back.cached_bytes > 1000,
        "not the previous request's few bytes"
    );
    assert_eq!(back.cached_bytes % 256, 0, "whole 64-token units");
    // A repeat reads whole units only: the last partial one is new.
    let again = m
        .observe(&chat(&p1, &["look at main.rs", "and lib.rs"]), None)
        .unwrap();
    assert_eq!(again.cached_bytes, again.total_bytes / 256 * 256);
    // Forgotten entries read nothing.
    m.forget_cache();
    let after = m
        .observe(&chat(&p1, &["look at main.rs", "and lib.rs"]), None)
        .unwrap();
    assert_eq!(after.cached_bytes, 0);
    assert!(
        after.best_bytes > 0,
        "the best client would not have waited"
    );
}

#[test]
fn openai_chat_reads_an_older_prompt_from_1024_tokens_in_128_token_units() {
    let mut m = Meter::new(&route_for("openai-compatible", "gpt-x"));
    let (p1, p2) = (
        "You review code. ".repeat(300),
        "You write tests. ".repeat(300),
    );
    let first = m.observe(&chat(&p1, &["look at main.rs"]), None).unwrap();
    assert!(first.total_bytes > 4096, "above 1,024 tokens");
    m.observe(&chat(&p2, &["look at main.rs"]), None).unwrap();
    let back = m
        .observe(&chat(&p1, &["look at main.rs", "and lib.rs"]), None)
        .unwrap();
    assert_eq!(back.cached_bytes, first.total_bytes / 512 * 512);
    // Below 1,024 tokens nothing is read, even the same prompt again.
    let mut m = Meter::new(&route_for("openai-compatible", "gpt-x"));
    let short = chat("Be brief.", &[&"x".repeat(3000)]);
    m.observe(&short, None).unwrap();
    let row = m.observe(&short, None).unwrap();
    assert_eq!((row.cached_bytes, row.best_bytes), (0, 0));
}

#[test]
fn a_version_2_save_still_restores_its_previous_request_as_the_entry() {
    let route = route_for("anthropic", "claude-opus-5");
    let s = long_system();
    let mut m = Meter::new(&route);
    m.observe(&claude(&s, &[&["read the files"]], None), None)
        .unwrap();
    let v3: serde_json::Value = serde_json::from_str(&m.save()).unwrap();
    let mut v2 = v3.clone();
    v2["version"] = 2.into();
    v2.as_object_mut().unwrap().remove("cache");
    for row in v2["rows"].as_array_mut().unwrap() {
        row.as_array_mut().unwrap().truncate(6);
    }
    let mut restored = Meter::restore(&route, &v2.to_string()).unwrap();
    let two = claude(
        &s,
        &[&["read the files"], &["done"], &["now the tests"]],
        None,
    );
    let row = restored.observe(&two, None).unwrap();
    assert_eq!(row, m.observe(&two, None).unwrap());
    assert!(row.cached_bytes > 0);
}

/// One request of a random run against the naive model: an operation on the running history
/// and perhaps an explicit breakpoint.
#[derive(Clone, Debug)]
enum Op {
    /// A message of this many blocks (1 to 4), each `len` bytes of text.
    Append(usize, usize),
    /// The first message's first block rewritten (a compaction or a prompt change).
    EditFirst,
    /// Only the last `n` messages kept.
    Keep(usize),
    /// The same history again.
    Same,
}

fn op() -> impl Strategy<Value = (Op, Option<(u8, u8)>)> {
    let op = prop_oneof![
        4 => (1usize..5, 1usize..300).prop_map(|(b, l)| Op::Append(b, l)),
        1 => Just(Op::EditFirst),
        1 => (1usize..4).prop_map(Op::Keep),
        1 => Just(Op::Same),
    ];
    (op, proptest::option::of((any::<u8>(), any::<u8>())))
}

/// A body of `history` (messages of text blocks, alternating roles) written by hand, so that
/// the test knows its cut and where each block ends in it without the crate: the cut and
/// `(block end, message end, marked)` per block.
fn hand_body(
    history: &[Vec<String>],
    mark: Option<(usize, usize)>,
) -> (String, Vec<u8>, Vec<(usize, usize, bool)>) {
    let system = r#""Be careful.""#;
    let mut cut = system.as_bytes().to_vec();
    let mut ends = Vec::new();
    let mut messages = Vec::new();
    for (i, blocks) in history.iter().enumerate() {
        let role = if i % 2 == 0 { "user" } else { "assistant" };
        let head = format!(r#"{{"role":"{role}","content":["#);
        let (mut sent, mut plain) = (head.clone(), head);
        let start = cut.len();
        let mut block_ends = Vec::new();
        for (j, t) in blocks.iter().enumerate() {
            let sep = if j > 0 { "," } else { "" };
            let block = format!(r#"{{"type":"text","text":"{t}"}}"#);
            let marked = mark == Some((i, j));
            let marker = r#","cache_control":{"type":"ephemeral"}"#;
            sent += &format!(
                "{sep}{}",
                if marked {
                    block.replace("\"}", &format!("\"{marker}}}"))
                } else {
                    block.clone()
                }
            );
            plain += &format!("{sep}{block}");
            block_ends.push((start + plain.len(), marked));
        }
        sent += "]}";
        plain += "]}";
        let message_end = start + plain.len();
        let last = block_ends.len() - 1;
        ends.extend(
            block_ends
                .iter()
                .enumerate()
                .map(|(j, &(e, m))| (e, if j == last { message_end } else { e }, m)),
        );
        cut.extend_from_slice(plain.as_bytes());
        messages.push(sent);
    }
    let body = format!(
        r#"{{"model":"m","max_tokens":8,"cache_control":{{"type":"ephemeral"}},"system":{system},"messages":[{}]}}"#,
        messages.join(",")
    );
    (body, cut, ends)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// The meter's index (hashes at block ends and units) reads what a naive model reads,
    /// comparing bytes: on Anthropic entries at breakpoints, read at the 20 blocks ending at
    /// one; on DeepSeek the longest common prefix with any earlier prompt, in 256-byte units;
    /// on OpenAI chat the same in 512-byte units from 4,096 bytes.
    #[test]
    fn the_cache_model_reads_what_comparing_bytes_reads(
        ops in proptest::collection::vec(op(), 1..24),
        route in 0u8..3,
    ) {
        let anthropic = route == 0;
        let (unit, min) = if route == 1 { (256, 0) } else { (512, 4096) };
        let mut m = match route {
            0 => anthropic_min0(),
            1 => deepseek(),
            _ => Meter::new(&route_for("openai-compatible", "any")),
        };
        let mut history: Vec<Vec<String>> = vec![vec!["start".to_owned()]];
        let (mut entries, mut prompts): (Vec<Vec<u8>>, Vec<Vec<u8>>) = (Vec::new(), Vec::new());
        for (k, (op, mark)) in ops.into_iter().enumerate() {
            match op {
                Op::Append(blocks, len) => history.push(
                    (0..blocks).map(|b| format!("m{k}b{b}{}", "x".repeat(len))).collect(),
                ),
                Op::EditFirst => history[0][0] = format!("edited {k}"),
                Op::Keep(n) => {
                    let drop = history.len().saturating_sub(n) / 2 * 2;
                    history.drain(..drop);
                }
                Op::Same => {}
            }
            // Chat bodies carry no markers: there a key named `cache_control` is prompt.
            let mark = mark.filter(|_| route != 2).map(|(i, j)| {
                let i = usize::from(i) % history.len();
                (i, usize::from(j) % history[i].len())
            });
            let (body, cut, ends) = hand_body(&history, mark);
            prop_assert_eq!(m.prefix_bytes(&body).unwrap(), cut.clone());
            let expected = if anthropic {
                let breakpoints: Vec<usize> = (0..ends.len())
                    .filter(|&i| ends[i].2 || i + 1 == ends.len())
                    .collect();
                let mut read = 0;
                for &i in &breakpoints {
                    for j in (i + 1).saturating_sub(20)..=i {
                        if entries.iter().any(|e| e[..] == cut[..ends[j].0]) {
                            read = read.max(ends[j].1);
                        }
                    }
                }
                for &i in &breakpoints {
                    let e = cut[..ends[i].0].to_vec();
                    if !entries.contains(&e) {
                        entries.push(e);
                    }
                }
                read
            } else {
                let common = prompts
                    .iter()
                    .map(|p| p.iter().zip(&cut).take_while(|(a, b)| a == b).count())
                    .max()
                    .unwrap_or(0);
                prompts.push(cut.clone());
                let read = common / unit * unit;
                if read >= min { read } else { 0 }
            };
            let row = m.observe(&body, None).unwrap();
            prop_assert_eq!(row.cached_bytes, expected as u64, "request {}", k);
        }
    }
}

/// Decision 105: a loop on a generic entry that sends a model id the catalog knows meters by
/// that model's cache facts. On `anthropic/*` (its minimum cacheable length the largest of
/// the vendor's, 1,024 tokens) sending `claude-opus-5` (512 tokens), a ~750-token prompt kept
/// whole is read from the cache, as the vendor reads it; the generic entry's own minimum would
/// read nothing.
#[test]
fn a_generic_entry_meters_by_the_cache_facts_of_the_model_it_sends() {
    use mektpoy::{AgentLoop, Config, Message, Session};
    let generic = route_for("anthropic", "claude-nova-6");
    assert_eq!(generic.model, "*");
    let config = Config::new("anthropic", "claude-opus-5")
        .with("max_tokens", 64.into())
        .unwrap();
    let mut agent = AgentLoop::builder(Session::new("s"), generic.clone())
        .config(config)
        .system_prompt("Rules. ".repeat(430))
        .build()
        .unwrap();
    let mut rows = Vec::new();
    for turn in 1..=2 {
        let request = agent
            .user_turn([Message::user(format!("u{turn}"), "go on")])
            .unwrap();
        let wire = request.to_wire().unwrap();
        rows.push(agent.observe(&wire).unwrap());
        agent
            .append(Message::assistant(
                format!("a{turn}"),
                "done",
                "anthropic",
                "claude-opus-5",
            ))
            .unwrap();
    }
    let tokens = rows[1].total_bytes.div_ceil(4);
    assert!((512..1024).contains(&tokens), "{tokens} tokens");
    assert!(rows[1].cached_bytes > 0, "{:?}", rows[1]);
    // The replay of the loop's log on the same generic entry meters the same.
    let replayed = mektpoy::agent::replay::Replay::new(generic)
        .run(agent.session())
        .unwrap();
    assert_eq!(replayed.meter.rows(), &rows[..]);
}
