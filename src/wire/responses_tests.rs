//! The Responses serializer's resume point ([decision 143](crate::manual::decisions#decision-143)):
//! over random histories a chain of resumed passes sends what a pass from the first message
//! sends, and a plain extension does resume.

use std::borrow::Cow;

use proptest::prelude::*;

use super::*;
use crate::route::route_for;
use crate::vocab::MessageSource;

/// One step of building a Responses history.
#[derive(Clone, Debug)]
enum Op {
    /// A user message with these text blocks.
    User(Vec<String>),
    /// An answer: text blocks, a reasoning block (0 none, 1 sendable, 2 from another
    /// provider, 3 without `encrypted_content`), this many tool calls, and their results right
    /// after it or not.
    Answer(Vec<String>, u8, u8, bool),
    /// The result of the oldest unanswered call, if any.
    Result(String),
    /// The result of a call no one made.
    Orphan,
    /// A prompt node with this text (empty included).
    Prompt(String),
    /// A system message that is not a prompt (refused).
    Note,
    /// A developer message: text or not, then additions of these tools (`t{n % 4}`; `t3` is
    /// never declared: refused).
    Developer(bool, Vec<u8>),
    /// A call reusing the id of the first call made (refused).
    Duplicate,
    /// Message `n` (modulo the length) is replaced by another: not an extension.
    Rewrite(usize),
    /// Every message becomes an equal message in another allocation.
    Copy,
    /// The declarations become variant `n`: the same definitions in other allocations, another
    /// description of `t1`, an equivalent `t1` spelled with other bytes, or `t2` left out.
    Tools(u8),
    /// The route becomes `gpt-5.4` (which sends `additional_tools`) or an unknown model
    /// (which does not).
    Route(bool),
}

fn text() -> impl Strategy<Value = String> {
    "[a-z \"\\\\\u{e9}\u{1f600}]{0,6}"
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => prop::collection::vec(text(), 0..3).prop_map(Op::User),
        6 => (prop::collection::vec(text(), 0..3), 0u8..4, 0u8..3, prop::bool::weighted(0.8))
            .prop_map(|(t, r, c, a)| Op::Answer(t, r, c, a)),
        2 => text().prop_map(Op::Result),
        1 => Just(Op::Orphan),
        1 => prop_oneof![Just(String::new()), Just("Be brief.".to_owned()), text()]
            .prop_map(Op::Prompt),
        1 => Just(Op::Note),
        3 => (any::<bool>(), prop::collection::vec(0u8..4, 1..3))
            .prop_map(|(t, a)| Op::Developer(t, a)),
        1 => Just(Op::Duplicate),
        1 => any::<usize>().prop_map(Op::Rewrite),
        1 => Just(Op::Copy),
        2 => (0u8..4).prop_map(Op::Tools),
        1 => any::<bool>().prop_map(Op::Route),
    ]
}

/// The declarations of variant `v` (see [`Op::Tools`]); `t1` and `t2` are deferred (the
/// projection's main path declares an added name deferred).
fn tools(v: u8) -> Vec<ToolSchema> {
    let tool = |name: &str, description: &str, max: serde_json::Value| {
        let mut parameters = serde_json::Map::new();
        parameters.insert("type".into(), "object".into());
        parameters.insert("maxProperties".into(), max);
        ToolSchema::new(name, description, parameters)
    };
    let mut out = vec![tool("t0", "Read a file", 2.into())];
    out.push(match v {
        1 => tool("t1", "Write a file, carefully", 2.into()),
        // Equivalent (reference §1), other bytes: `2.0` is not `2` on the wire.
        2 => tool("t1", "Write a file", serde_json::json!(2.0)),
        _ => tool("t1", "Write a file", 2.into()),
    });
    if v != 3 {
        out.push(tool("t2", "List files", 2.into()));
    }
    out.into_iter()
        .map(|t| {
            let deferred = t.name() != "t0";
            t.with_defer_loading(deferred)
        })
        .collect()
}

/// Applies `op` to `messages`; `n` names the new messages, `pending` the unanswered calls,
/// `first_call` the first call id made.
fn apply(
    op: &Op,
    n: usize,
    messages: &mut Vec<Message>,
    pending: &mut Vec<String>,
    first_call: &mut Option<String>,
) {
    let model = |provider: &str| MessageSource::Model {
        provider: provider.into(),
        model: "gpt-5.4".into(),
    };
    let texts = |t: &[String]| t.iter().map(ContentBlock::text).collect::<Vec<_>>();
    match op {
        Op::User(t) => messages.push(Message::new(
            format!("u{n}"),
            Role::User,
            texts(t),
            MessageSource::User,
        )),
        Op::Answer(t, reasoning, calls, answered) => {
            let mut content = texts(t);
            if *reasoning > 0 {
                let mut extra = indexmap::IndexMap::new();
                extra.insert("id".to_owned(), Value::from(format!("rs_{n}")));
                extra.insert("summary".to_owned(), serde_json::json!([]));
                if *reasoning != 3 {
                    extra.insert(
                        "encrypted_content".to_owned(),
                        Value::from(format!("enc{n}")),
                    );
                }
                content.insert(
                    0,
                    ContentBlock::Reasoning {
                        text: String::new(),
                        extra,
                    },
                );
            }
            for c in 0..*calls {
                let id = format!("c{n}-{c}");
                first_call.get_or_insert_with(|| id.clone());
                pending.push(id.clone());
                content
                    .push(ContentBlock::tool_call(id, "t0", format!(r#"{{"n": {n}}}"#)).unwrap());
            }
            let provider = if *reasoning == 2 {
                "deepseek"
            } else {
                "openai"
            };
            messages.push(Message::new(
                format!("a{n}"),
                Role::Assistant,
                content,
                model(provider),
            ));
            while *answered && !pending.is_empty() {
                let call = pending.remove(0);
                messages.push(Message::tool_result(format!("r{n}-{call}"), call, "ok"));
            }
        }
        Op::Result(t) => {
            if !pending.is_empty() {
                let call = pending.remove(0);
                messages.push(Message::tool_result(format!("r{n}"), call, t.as_str()));
            }
        }
        Op::Orphan => messages.push(Message::tool_result(format!("r{n}"), "nobody", "?")),
        Op::Prompt(t) => messages.push(Message::new(
            format!("p{n}"),
            Role::System,
            (!t.is_empty())
                .then(|| ContentBlock::text(t.as_str()))
                .into_iter()
                .collect(),
            MessageSource::SystemPrompt,
        )),
        Op::Note => messages.push(Message::new(
            format!("s{n}"),
            Role::System,
            vec![ContentBlock::text("a note")],
            MessageSource::User,
        )),
        Op::Developer(text, added) => {
            let mut content = Vec::new();
            if *text {
                content.push(ContentBlock::text("Tools changed."));
            }
            content.extend(
                added
                    .iter()
                    .map(|a| ContentBlock::addition(format!("t{}", a % 4)).unwrap()),
            );
            messages.push(Message::developer(format!("d{n}"), content));
        }
        Op::Duplicate => {
            if let Some(id) = first_call.clone() {
                let call = ContentBlock::tool_call(id, "t0", "{}").unwrap();
                messages.push(Message::new(
                    format!("a{n}"),
                    Role::Assistant,
                    vec![call],
                    model("openai"),
                ));
            }
        }
        Op::Rewrite(i) => {
            if !messages.is_empty() {
                let i = i % messages.len();
                let other = messages[i].with_content(vec![ContentBlock::text("rewritten")]);
                messages[i] = other;
            }
        }
        Op::Copy => {
            for m in messages.iter_mut() {
                *m = m.with_content(m.content().to_vec());
            }
        }
        Op::Tools(_) | Op::Route(_) => {}
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// A chain of requests, each serialized resuming from the point the previous one left,
    /// sends exactly what a pass from the first message sends (bytes, headers, report,
    /// refusals), over histories with prompt changes, tool additions (declared, undeclared,
    /// on a route with and without the mode), redefinitions and removals of the added tools,
    /// reasoning items kept and left out, refused messages, rewrites and equal copies; and a
    /// plain extension with the same declarations on the same route does resume. In a release
    /// build (no debug check in the serializer) this is the only check.
    #[test]
    fn resumed_responses_requests_are_fresh_requests(
        steps in prop::collection::vec(prop::collection::vec(op(), 0..4), 1..12),
    ) {
        let config = Config::new("openai", "gpt-5.4").with("max_tokens", 64.into()).unwrap();
        let context = WireContext {
            prompt_cache_key: Some("s"),
            ..WireContext::default()
        };
        let (mut messages, mut pending, mut first_call) = (Vec::new(), Vec::new(), None);
        let (mut variant, mut mode) = (0u8, true);
        let mut resume: Option<Resume> = None;
        let mut n = 0;
        for ops in &steps {
            let before = messages.clone();
            let (pending_before, first_before) = (pending.clone(), first_call.clone());
            let (variant_before, mode_before) = (variant, mode);
            let mut rewritten = false;
            for op in ops {
                n += 1;
                rewritten |= matches!(op, Op::Rewrite(_)) && !messages.is_empty();
                match op {
                    Op::Tools(v) => variant = *v,
                    Op::Route(m) => mode = *m,
                    _ => {}
                }
                apply(op, n, &mut messages, &mut pending, &mut first_call);
            }
            let route = route_for("openai", if mode { "gpt-5.4" } else { "gpt-0-unknown" });
            prop_assert_eq!(route.tool_update().is_some(), mode);
            let declared = tools(variant);
            let projected = ProjectedToolUpdates {
                tools: Some(Cow::Borrowed(&declared[..])),
                ..ProjectedToolUpdates::new(&messages[..])
            };
            let had = resume.is_some();
            let (resumed, next, kept) =
                resumed_pass(&config, &projected, &route, &context, resume.take(), true);
            let fresh = serialize_responses(&config, &projected, &route, &context);
            match (&resumed, &fresh) {
                (Ok(r), Ok(f)) => {
                    prop_assert_eq!(&r.body, &f.body);
                    prop_assert_eq!(&r.headers, &f.headers);
                    prop_assert_eq!(&r.report, &f.report);
                    let segs = r.segments.as_deref().unwrap();
                    let fresh_segs = f.segments.as_deref().unwrap();
                    prop_assert_eq!(segs.first, kept.unwrap_or(0));
                    prop_assert_eq!(segs.body_len, r.body.len());
                    prop_assert_eq!(
                        segs.first + segs.messages.len(),
                        fresh_segs.messages.len()
                    );
                    prop_assert_eq!(
                        segs.first_block + segs.blocks.len(),
                        fresh_segs.blocks.len()
                    );
                    prop_assert_eq!(&segs.carried, &fresh_segs.carried);
                    for (t, f) in segs.messages.iter().zip(&fresh_segs.messages[segs.first..]) {
                        prop_assert_eq!(t, f);
                    }
                    for (t, f) in segs.blocks.iter().zip(&fresh_segs.blocks[segs.first_block..]) {
                        prop_assert_eq!(t, f);
                    }
                    // Every extension of a request that left a point, on the same route with
                    // the same declarations, resumes from it.
                    let extends = had
                        && !rewritten
                        && messages.starts_with(&before)
                        && variant == variant_before
                        && mode == mode_before;
                    if extends {
                        prop_assert!(kept.is_some(), "an extension did not resume");
                    }
                    prop_assert!(next.is_some());
                }
                (r, f) => {
                    prop_assert_eq!(
                        format!("{:?}", r.as_ref().err()),
                        format!("{:?}", f.as_ref().err())
                    );
                    prop_assert!(next.is_none());
                }
            }
            resume = next;
            if resumed.is_err() {
                // A refused request is fixed by the caller: the next step goes on from the
                // last request that was sent (without a point to resume from).
                messages = before;
                (pending, first_call) = (pending_before, first_before);
                (variant, mode) = (variant_before, mode_before);
            }
        }
    }
}

/// A plain loop resumes from the whole previous request each step (its items byte for byte),
/// and a redefinition of a tool an `additional_tools` item carried makes the next pass start
/// from the first message.
#[test]
fn a_responses_loop_resumes_from_the_whole_previous_request() {
    let config = Config::new("openai", "gpt-5.4");
    let route = route_for("openai", "gpt-5.4");
    let context = WireContext::default();
    let mut declared = tools(0);
    let mut messages = vec![
        Message::system("p", "Be brief."),
        Message::user("u", "Read the files."),
        Message::developer("d", vec![ContentBlock::addition("t1").unwrap()]),
    ];
    let mut resume = None;
    let mut previous: Option<String> = None;
    for k in 0..5 {
        let projected = ProjectedToolUpdates {
            tools: Some(Cow::Borrowed(&declared[..])),
            ..ProjectedToolUpdates::new(&messages[..])
        };
        let (wire, next, kept) =
            serialize_responses_resuming(&config, &projected, &route, &context, resume.take());
        let wire = wire.unwrap();
        let segs = wire.segments.as_deref().unwrap();
        if let Some(p) = &previous {
            // The user's message and the addition, then three items per earlier round.
            assert_eq!(kept, Some(2 + 3 * (k - 1)), "round {k}");
            assert_eq!(segs.first, 2 + 3 * (k - 1));
            assert_eq!(segs.messages.len(), 3);
            let items = &p[p.find(r#""input":["#).unwrap()..p.len() - 2];
            assert!(wire.body.contains(items), "round {k}");
            assert!(segs.resumed.is_some());
        } else {
            assert_eq!(kept, None);
        }
        assert!(segs.leaves.is_some());
        previous = Some(wire.body.clone());
        resume = next;
        let mut extra = indexmap::IndexMap::new();
        extra.insert("id".to_owned(), Value::from(format!("rs_{k}")));
        extra.insert("encrypted_content".to_owned(), Value::from("enc"));
        messages.push(Message::new(
            format!("a{k}"),
            Role::Assistant,
            vec![
                ContentBlock::Reasoning {
                    text: "hmm".into(),
                    extra,
                },
                ContentBlock::tool_call(format!("c{k}"), "t1", "{}").unwrap(),
            ],
            MessageSource::Model {
                provider: "openai".into(),
                model: "gpt-5.4".into(),
            },
        ));
        messages.push(Message::tool_result(format!("r{k}"), format!("c{k}"), "ok"));
    }
    // `t1`, which the kept `additional_tools` item carries, now says something else.
    declared = tools(1);
    let projected = ProjectedToolUpdates {
        tools: Some(Cow::Borrowed(&declared[..])),
        ..ProjectedToolUpdates::new(&messages[..])
    };
    let (wire, _, kept) =
        serialize_responses_resuming(&config, &projected, &route, &context, resume);
    assert_eq!(kept, None);
    assert!(wire.unwrap().body.contains("Write a file, carefully"));
}
