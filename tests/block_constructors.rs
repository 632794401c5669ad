//! Issue 21: the tool-call and tool-change payloads sit behind checked constructors, and
//! decoding a log goes through the same check. What a constructor accepts round-trips through
//! the log and appends without error; what it refuses, decoding refuses with the same fault, and
//! a log holding it names its line.

use mektpoy::event::{Reason, RequestHeader};
use mektpoy::session::{AppendErrorKind, LoadError};
use mektpoy::vocab::{BlockError, MessageSource, Role, Seq};
use mektpoy::{Config, ContentBlock, Event, Message, Session, ToolSchema};
use proptest::prelude::*;
use serde_json::{Value, json};

/// Which constructor, and the log's `type` it builds.
#[derive(Clone, Copy, Debug)]
enum Kind {
    Call,
    Addition,
    Removal,
    Redefinition,
}

impl Kind {
    fn block_type(self) -> &'static str {
        match self {
            Kind::Call => "tool-call",
            Kind::Addition => "tool-addition",
            Kind::Removal => "tool-removal",
            Kind::Redefinition => "tool-redefinition",
        }
    }

    /// The block as the constructor builds it.
    fn build(self, id: &str, name: &str, arguments: &str) -> Result<ContentBlock, BlockError> {
        match self {
            Kind::Call => ContentBlock::tool_call(id, name, arguments),
            Kind::Addition => ContentBlock::addition(name),
            Kind::Removal => ContentBlock::removal(name),
            Kind::Redefinition => ContentBlock::redefinition(name),
        }
    }

    /// The same block as a log line writes it.
    fn json(self, id: &str, name: &str, arguments: &str) -> Value {
        match self {
            Kind::Call => {
                json!({"type": "tool-call", "id": id, "name": name, "arguments": arguments})
            }
            _ => json!({"type": self.block_type(), "toolName": name}),
        }
    }
}

fn kind() -> impl Strategy<Value = Kind> {
    prop_oneof![
        Just(Kind::Call),
        Just(Kind::Addition),
        Just(Kind::Removal),
        Just(Kind::Redefinition),
    ]
}

/// A name: empty a quarter of the time, else any printable text (quotes, backslashes and
/// non-ASCII included: the log's escaping is part of the round trip).
fn name() -> impl Strategy<Value = String> {
    prop_oneof![1 => Just(String::new()), 3 => "\\PC{1,12}"]
}

/// A session in which `block` is one an append accepts: for a call, after a user turn in an
/// assistant message; for a change, in a developer message naming a header that declares the
/// tool (a removal of a tool never added is accepted as such).
fn append_block(session: &Session, kind: Kind, name: &str, block: ContentBlock) {
    let model = || MessageSource::Model {
        provider: "p".into(),
        model: "m".into(),
    };
    match kind {
        Kind::Call => {
            session
                .append(Event::append(Message::user("u1", "go")))
                .unwrap();
            session
                .append(Event::append(Message::new(
                    "a1",
                    Role::Assistant,
                    vec![block],
                    model(),
                )))
                .unwrap();
        }
        _ => {
            let header =
                RequestHeader::new(Config::new("p", "m"), vec![ToolSchema::no_input(name, "")]);
            let seq = session
                .append(Event::header(header, Reason::Initial))
                .unwrap();
            session
                .append(Event::developer(
                    Message::developer("d1", vec![block]),
                    Some(seq),
                ))
                .unwrap();
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// A constructor and decoding agree on every input: both build the same block, or both
    /// refuse with the same fault. What is built appends without error (arguments of at most
    /// 40 characters nest at most 40 levels, under `ARGUMENTS_DEPTH_LIMIT`, the one append rule
    /// on calls left outside the constructor), and the log's text reads back as the same block.
    #[test]
    fn constructors_and_decoding_agree_and_what_is_built_round_trips(
        kind in kind(),
        id in "\\PC{0,8}",
        name in name(),
        arguments in "\\PC{0,40}",
    ) {
        let built = kind.build(&id, &name, &arguments);
        let decoded = ContentBlock::from_value(kind.json(&id, &name, &arguments));
        prop_assert_eq!(&built, &decoded);
        let block = match built {
            Err(fault) => {
                prop_assert!(name.is_empty(), "refused a named tool: {}", fault);
                let refused_here = matches!(
                    fault,
                    BlockError::EmptyToolName { block_type, .. } if block_type == kind.block_type()
                );
                prop_assert!(refused_here, "{}", fault);
                return Ok(());
            }
            Ok(block) => block,
        };
        prop_assert!(!name.is_empty());
        // Written as the log writes it, byte for byte the JSON a log line holds.
        prop_assert_eq!(serde_json::to_value(&block).unwrap(), kind.json(&id, &name, &arguments));
        let session = Session::new("s");
        append_block(&session, kind, &name, block.clone());
        let back = Session::load_bytes(session.to_jsonl().as_bytes()).unwrap().session;
        let messages = back.messages();
        let last = messages.iter().next_back().unwrap();
        prop_assert_eq!(last.content(), std::slice::from_ref(&block));
        prop_assert_eq!(back.to_jsonl(), session.to_jsonl());
    }
}

/// A log line holding what no constructor builds (a block naming an empty tool) fails to load
/// with its line and `Seq` named, and the decode fault the constructor gives; nothing panics.
#[test]
fn a_log_holding_an_unbuildable_block_names_its_line() {
    for (kind, block) in [
        (
            Kind::Call,
            r#"{"type":"tool-call","id":"c1","name":"","arguments":"{}"}"#,
        ),
        (Kind::Removal, r#"{"type":"tool-removal","toolName":""}"#),
    ] {
        let session = Session::new("s");
        session
            .append(Event::append(Message::user("u1", "go")))
            .unwrap();
        let (role, source) = match kind {
            Kind::Call => (
                "assistant",
                r#"{"kind":"model","provider":"p","model":"m"}"#,
            ),
            _ => ("developer", r#"{"kind":"tool-registry"}"#),
        };
        let line = format!(
            r#"{{"type":"{role}/message","data":{{"message":{{"id":"x","role":"{role}","content":[{{"type":"text","text":"ok"}},{block}],"source":{source}}}}},"surfaceOp":"append"}}"#
        );
        let text = format!("{}{line}\n", session.to_jsonl());
        let err = Session::load_bytes(text.as_bytes()).unwrap_err();
        let LoadError::Event { line: at, source } = &err else {
            panic!("{err}")
        };
        assert_eq!(*at, 3, "the session line, the user's, then this one: {err}");
        assert_eq!(source.seq(), Seq(1));
        let AppendErrorKind::Decode { source: decode } = source.kind() else {
            panic!("{err}")
        };
        let expected = kind.build("c1", "", "{}").unwrap_err();
        assert!(
            matches!(decode, mektpoy::event::DecodeError::MalformedBlock { id, index: 1, reason } if id == "x" && *reason == expected),
            "{decode}"
        );
    }
}
