//! `AgentLoop::builder`: the route supplies provider and model, and `build` reports every fault
//! at once (issue 21; decision 151).

use mektpoy::agent::BuildFault;
use mektpoy::route::ToolRefusal;
use mektpoy::vocab::MessageSource;
use mektpoy::wire::WireError;
use mektpoy::{AgentLoop, Config, ContentBlock, Message, Session, ToolSchema, route_for};
use proptest::prelude::*;
use serde_json::json;

fn rootless(name: &str) -> ToolSchema {
    ToolSchema::new(name, "", json!({}).as_object().unwrap().clone())
}

/// The case: an Anthropic route given a DeepSeek configuration. Before, the loop was
/// built and logged a DeepSeek header for bodies written by Anthropic's rules.
#[test]
fn an_anthropic_route_refuses_a_deepseek_configuration() {
    let session = Session::new("s");
    let err = AgentLoop::builder(&session, route_for("anthropic", "claude-opus-5"))
        .config(
            Config::new("deepseek", "deepseek-flash")
                .with("max_tokens", 64.into())
                .unwrap(),
        )
        .build()
        .unwrap_err();
    assert!(
        matches!(err.faults(), [
            BuildFault::ProviderMismatch { route, provider },
            BuildFault::ModelMismatch { route: m, model },
        ] if route == "anthropic" && provider == "deepseek" && m == "claude-opus-5" && model == "deepseek-flash"),
        "{err}"
    );
    assert_eq!(session.len(), 0);
}

#[test]
fn a_concrete_route_refuses_another_model_and_takes_its_own_or_a_dated_snapshot() {
    let route = route_for("anthropic", "claude-fable-5-1");
    assert_eq!(route.model, "claude-fable-5-1");
    let build = |model: &str| {
        AgentLoop::builder(Session::new("s"), route.clone())
            .model(model)
            .build()
            .map(|a| a.config().model.clone())
    };
    assert_eq!(build("claude-fable-5-1").unwrap(), "claude-fable-5-1");
    assert_eq!(
        build("claude-fable-5-1-20261001").unwrap(),
        "claude-fable-5-1-20261001"
    );
    let err = build("claude-opus-5").unwrap_err();
    assert!(
        matches!(err.faults(), [BuildFault::ModelMismatch { model, .. }] if model == "claude-opus-5"),
        "{err}"
    );
    // Without a model, the route's own.
    let agent = AgentLoop::builder(Session::new("s"), route)
        .build()
        .unwrap();
    assert_eq!(
        (
            agent.config().provider.as_str(),
            agent.config().model.as_str()
        ),
        ("anthropic", "claude-fable-5-1")
    );
}

#[test]
fn a_generic_route_asks_for_the_model() {
    let generic = route_for("openai", "gpt-9-unknown");
    assert_eq!(generic.model, "*");
    let err = AgentLoop::builder(Session::new("s"), generic.clone())
        .build()
        .unwrap_err();
    assert!(
        matches!(err.faults(), [BuildFault::ModelRequired { provider }] if provider == "openai"),
        "{err}"
    );
    let agent = AgentLoop::builder(Session::new("s"), generic)
        .model("gpt-9-unknown")
        .build()
        .unwrap();
    assert_eq!(agent.config().model, "gpt-9-unknown");
}

#[test]
fn only_the_generic_openai_compatible_route_takes_another_provider() {
    let any = route_for("acme", "acme-1");
    let agent = AgentLoop::builder(Session::new("s"), any)
        .provider("acme")
        .model("acme-1")
        .build()
        .unwrap();
    assert_eq!(agent.config().provider, "acme");
    let err = AgentLoop::builder(Session::new("s"), route_for("deepseek", "deepseek-flash"))
        .provider("acme")
        .build()
        .unwrap_err();
    assert!(
        matches!(err.faults(), [BuildFault::ProviderMismatch { .. }]),
        "{err}"
    );
}

/// Every fault at once, in a fixed order: model, options, then each refused tool.
#[test]
fn build_reports_every_fault_at_once() {
    let err = AgentLoop::builder(Session::new("s"), route_for("anthropic", "claude-opus-5"))
        .model("claude-sonnet-5")
        .option("max_tokens", 64.into())
        .option("messages", json!([]))
        .tools([
            ToolSchema::no_input("github.search", ""),
            ToolSchema::no_input("read", ""),
            rootless("grep"),
            ToolSchema::no_input("read", ""),
        ])
        .build()
        .unwrap_err();
    let faults = err.faults();
    assert_eq!(faults.len(), 5, "{err}");
    assert!(matches!(&faults[0], BuildFault::ModelMismatch { .. }));
    assert!(
        matches!(&faults[1], BuildFault::Option(WireError::ReservedConfigKey { key }) if key == "messages")
    );
    let tools: Vec<_> = faults[2..]
        .iter()
        .map(|f| match f {
            BuildFault::Tool(r) => (r.index, r.tool.as_str(), r.reason.clone()),
            other => panic!("not a tool fault: {other}"),
        })
        .collect();
    assert_eq!(
        tools,
        [
            (
                0,
                "github.search",
                ToolRefusal::InvalidName { max_len: 128 }
            ),
            (2, "grep", ToolRefusal::SchemaRootNotObject),
            (3, "read", ToolRefusal::DuplicateName),
        ]
    );
    let text = err.to_string();
    assert!(
        text.starts_with("the loop cannot be built (5 faults): "),
        "{text}"
    );
    assert!(text.contains("`messages` is reserved"), "{text}");
}

/// Two names for one output limit, which the Responses serializer refuses: a conflict of
/// options found at build, not at the first request.
#[test]
fn conflicting_options_are_refused_at_build() {
    let route = route_for("openai", "gpt-5.4");
    let err = AgentLoop::builder(Session::new("s"), route.clone())
        .option("max_tokens", 64.into())
        .option("max_output_tokens", 64.into())
        .build()
        .unwrap_err();
    assert!(
        matches!(
            err.faults(),
            [BuildFault::Option(WireError::ReservedConfigKey { .. })]
        ),
        "{err}"
    );
    // On OpenAI-compatible chat, a key the serializer writes itself.
    let err = AgentLoop::builder(Session::new("s"), route_for("acme", "acme-1"))
        .model("acme-1")
        .option("tools", json!([]))
        .build()
        .unwrap_err();
    assert!(
        matches!(err.faults(), [BuildFault::Option(WireError::ReservedConfigKey { key })] if key == "tools"),
        "{err}"
    );
    // One name is fine; a missing `max_tokens` on the Messages API is no conflict.
    AgentLoop::builder(Session::new("s"), route)
        .option("max_tokens", 64.into())
        .build()
        .unwrap();
    AgentLoop::builder(Session::new("s"), route_for("anthropic", "claude-opus-5"))
        .build()
        .unwrap();
}

#[test]
fn set_options_refuses_what_build_refuses_and_keeps_the_previous_options() {
    let mut agent = AgentLoop::builder(Session::new("s"), route_for("deepseek", "deepseek-flash"))
        .option("max_tokens", 64.into())
        .build()
        .unwrap();
    let err = agent
        .set_options([("model".to_owned(), json!("other"))])
        .unwrap_err();
    assert!(matches!(err.faults(), [BuildFault::Option(_)]), "{err}");
    assert_eq!(agent.config().extra()["max_tokens"], 64);
    assert_eq!(agent.config().model, "deepseek-flash");
}

/// `set_tools` refuses a schema without a root object with the fault the builder reports.
#[test]
fn set_tools_refuses_a_rootless_schema_with_the_builders_fault() {
    let route = route_for("anthropic", "claude-opus-5");
    let mut agent = AgentLoop::builder(Session::new("s"), route.clone())
        .build()
        .unwrap();
    let refused = agent.set_tools([rootless("grep")]).unwrap_err();
    assert_eq!(refused.reason, ToolRefusal::SchemaRootNotObject);
    assert!(agent.tools().is_empty(), "nothing set");
    let err = AgentLoop::builder(Session::new("s"), route)
        .tools([rootless("grep")])
        .build()
        .unwrap_err();
    assert!(
        matches!(err.faults(), [BuildFault::Tool(r)] if *r == refused),
        "{err}"
    );
}

/// Tools restored from a log that another route wrote are checked too: a loop reopened on a
/// Messages-API route over a chat route's log is refused, not left to fail at every request.
#[test]
fn tools_restored_from_the_log_are_checked_against_the_new_route() {
    let session = Session::new("s");
    let mut chat = AgentLoop::builder(&session, route_for("acme", "acme-1"))
        .provider("anthropic")
        .model("claude-opus-5")
        .tools([rootless("grep")])
        .build()
        .unwrap();
    chat.user_turn([Message::user("u1", "hi")]).unwrap();
    let err = AgentLoop::builder(&session, route_for("anthropic", "claude-opus-5"))
        .build()
        .unwrap_err();
    assert!(
        matches!(err.faults(), [BuildFault::Tool(r)] if r.reason == ToolRefusal::SchemaRootNotObject),
        "{err}"
    );
    // Setting the tools replaces the restored ones.
    AgentLoop::builder(&session, route_for("anthropic", "claude-opus-5"))
        .tools([])
        .build()
        .unwrap();
}

#[test]
fn assistant_stamps_the_loops_provider_and_model() {
    let mut agent = AgentLoop::builder(Session::new("s"), route_for("openai", "gpt-9-unknown"))
        .model("gpt-9-unknown")
        .build()
        .unwrap();
    agent.user_turn([Message::user("u1", "hi")]).unwrap();
    let answer = agent.assistant("a1", [ContentBlock::text("ok")]);
    assert_eq!(
        answer.source(),
        &MessageSource::Model {
            provider: "openai".into(),
            model: "gpt-9-unknown".into()
        }
    );
    assert_eq!(answer.text(), "ok");
    agent.append(answer).unwrap();
    assert_eq!(agent.session().messages().len(), 2);
}

fn tool_strategy() -> impl Strategy<Value = ToolSchema> {
    (
        prop_oneof![Just("read"), Just("grep"), Just("a.b"), Just("")],
        any::<bool>(),
    )
        .prop_map(|(name, rooted)| {
            if rooted {
                ToolSchema::no_input(name, "")
            } else {
                rootless(name)
            }
        })
}

proptest! {
    /// For any tool set on any API, `build` refuses exactly the tools `set_tools` would refuse
    /// (the first of them is `set_tools`' refusal), and builds when there is none.
    #[test]
    fn build_and_set_tools_agree(
        tools in proptest::collection::vec(tool_strategy(), 0..5),
        provider in prop_oneof![Just("anthropic"), Just("acme"), Just("openai")],
    ) {
        let model = match provider { "anthropic" => "claude-opus-5", "openai" => "gpt-5.4", _ => "acme-1" };
        let route = route_for(provider, model);
        let built = AgentLoop::builder(Session::new("s"), route.clone())
            .model(model)
            .tools(tools.clone())
            .build();
        let mut agent = AgentLoop::builder(Session::new("s"), route.clone()).model(model).build().unwrap();
        let set = agent.set_tools(tools.clone());
        match (built, set) {
            (Ok(a), Ok(())) => prop_assert_eq!(a.tools(), agent.tools()),
            (Err(e), Err(first)) => {
                let refused: Vec<_> = e.into_faults().into_iter().map(|f| match f {
                    BuildFault::Tool(r) => r,
                    other => panic!("not a tool fault: {other}"),
                }).collect();
                prop_assert_eq!(&refused[0], &first);
                prop_assert_eq!(refused, route.tool_refusals(&tools).collect::<Vec<_>>());
            }
            (built, set) => prop_assert!(false, "build {:?} but set_tools {:?}", built.err(), set.err()),
        }
    }
}
