//! Issue 10 item 3, as a property: whatever JSON object text a model writes as a call's
//! arguments, the Messages-API body carries it token for token (only whitespace between tokens
//! removed), the chat body carries it byte for byte, and a key twice in one object is a typed
//! error instead of a silently different call.

use mektpoy::{
    Config, ContentBlock, Message,
    project::ProjectedToolUpdates,
    route_for,
    vocab::{MessageSource, Role},
    wire::{WireError, serialize},
};
use proptest::prelude::*;
use serde::Deserialize;
use serde_json::value::RawValue;

/// One JSON value as two texts: `spaced` (what the model wrote, with whitespace between
/// tokens) and `compact` (the same tokens without it).
#[derive(Clone, Debug)]
struct Text {
    spaced: String,
    compact: String,
}

fn space() -> impl Strategy<Value = &'static str> {
    prop_oneof![Just(""), Just(""), Just(" "), Just("\n  "), Just("\t")]
}

fn scalar() -> impl Strategy<Value = String> {
    prop_oneof![
        // Numbers beyond f64 and spellings a re-encoding would change.
        Just("123456789012345678901234567890".to_owned()),
        Just("-0".to_owned()),
        Just("1.50".to_owned()),
        Just("1e5".to_owned()),
        Just("2.5E-3".to_owned()),
        any::<i64>().prop_map(|n| n.to_string()),
        Just("true".to_owned()),
        Just("null".to_owned()),
        // Strings with escapes a re-encoding would rewrite, and spaces inside them.
        Just(r#""a b""#.to_owned()),
        Just(r#""\u00e9\n\"\\/""#.to_owned()),
        Just(r#""é ü""#.to_owned()),
        "[a-z ]{0,6}".prop_map(|s| format!("\"{s}\"")),
    ]
}

fn token(s: String) -> Text {
    Text {
        spaced: s.clone(),
        compact: s,
    }
}

fn value() -> impl Strategy<Value = Text> {
    scalar().prop_map(token).prop_recursive(4, 40, 5, |inner| {
        prop_oneof![
            (
                proptest::collection::vec((inner.clone(), space()), 0..4),
                space()
            )
                .prop_map(|(items, end)| array(items, end)),
            object(inner),
        ]
    })
}

fn array(items: Vec<(Text, &'static str)>, end: &str) -> Text {
    let spaced: Vec<String> = items
        .iter()
        .map(|(t, s)| format!("{s}{}{s}", t.spaced))
        .collect();
    let compact: Vec<&str> = items.iter().map(|(t, _)| t.compact.as_str()).collect();
    Text {
        spaced: format!("[{}{end}]", spaced.join(",")),
        compact: format!("[{}]", compact.join(",")),
    }
}

/// An object with unique keys, in a random (unsorted) order.
fn object(inner: impl Strategy<Value = Text>) -> impl Strategy<Value = Text> {
    (
        proptest::collection::vec(("[a-d]{1,2}", inner, space()), 0..5),
        space(),
    )
        .prop_map(|(entries, end)| {
            let mut seen = std::collections::HashSet::new();
            let entries: Vec<_> = entries
                .into_iter()
                .filter(|(k, _, _)| seen.insert(k.clone()))
                .collect();
            let spaced: Vec<String> = entries
                .iter()
                .map(|(k, v, s)| format!("{s}\"{k}\"{s}:{s}{}", v.spaced))
                .collect();
            let compact: Vec<String> = entries
                .iter()
                .map(|(k, v, _)| format!("\"{k}\":{}", v.compact))
                .collect();
            Text {
                spaced: format!("{{{}{end}}}", spaced.join(",")),
                compact: format!("{{{}}}", compact.join(",")),
            }
        })
}

fn arguments() -> impl Strategy<Value = Text> {
    object(value())
}

fn request(arguments: &str, provider: &str, model: &str) -> Result<String, WireError> {
    let messages = vec![
        Message::user("u1", "go"),
        Message::new(
            "a1",
            Role::Assistant,
            vec![ContentBlock::tool_call("c1", "read", arguments).unwrap()],
            MessageSource::Model {
                provider: provider.into(),
                model: model.into(),
            },
        ),
        Message::tool_result("t1", "c1", "ok"),
    ];
    let projected = ProjectedToolUpdates::new(messages);
    let config = Config::new(provider, model)
        .with("max_tokens", 64.into())
        .unwrap();
    serialize(&config, &projected, &route_for(provider, model)).map(|r| r.into_parts().0)
}

/// The raw text of the first `tool_use` block's `input` in a Messages body.
fn sent_input(body: &str) -> String {
    #[derive(Deserialize)]
    struct Body<'a> {
        #[serde(borrow)]
        messages: Vec<Turn<'a>>,
    }
    #[derive(Deserialize)]
    struct Turn<'a> {
        #[serde(borrow)]
        content: Vec<Block<'a>>,
    }
    #[derive(Deserialize)]
    struct Block<'a> {
        #[serde(borrow)]
        input: Option<&'a RawValue>,
    }
    let body: Body<'_> = serde_json::from_str(body).unwrap();
    body.messages
        .iter()
        .flat_map(|t| &t.content)
        .find_map(|b| b.input)
        .expect("a tool_use block")
        .get()
        .to_owned()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn arguments_reach_the_messages_body_token_for_token(args in arguments()) {
        let body = request(&args.spaced, "deepseek", "deepseek-flash").unwrap();
        prop_assert_eq!(sent_input(&body), args.compact.clone());
        // The chat body carries the model's text itself, whitespace included.
        let chat = request(&args.spaced, "acme", "acme-1").unwrap();
        let chat: serde_json::Value = serde_json::from_str(&chat).unwrap();
        prop_assert_eq!(
            &chat["messages"][1]["tool_calls"][0]["function"]["arguments"],
            &serde_json::Value::from(args.spaced.clone())
        );
    }

    #[test]
    fn a_repeated_key_is_sent_as_invalid_arguments_not_collapsed(args in arguments(), v in value()) {
        // The same key twice in the outer object: `{"k":v,"k":v, ...}`.
        let rest = args.compact.strip_prefix('{').unwrap();
        let sep = if rest == "}" { "" } else { "," };
        let text = format!(r#"{{"zz":{},"zz":{}{sep}{rest}"#, v.compact, v.compact);
        prop_assert_eq!(
            mektpoy::wire::arguments_fault(&text),
            Some(mektpoy::wire::ArgumentsFault::DuplicateKey { key: "zz".into() })
        );
        let body = request(&text, "deepseek", "deepseek-flash").unwrap();
        prop_assert_eq!(
            sent_input(&body),
            format!(r#"{{"invalid_arguments":{}}}"#, serde_json::to_string(&text).unwrap())
        );
    }
}
