//! Keep the provider's prompt cache alive while an LLM agent's tool set changes.
//!
//! Providers cache the unchanged prefix of each request (tools, then system, then messages).
//! When plugins and MCP servers add or remove tools mid-conversation, a changed tool list
//! rewrites the head of that prefix. mektpoy records every request in an append-only
//! [`Session`] log where headers hold the *effective* tools and tool changes are durable
//! developer messages; folds that log into an immutable [`ToolHistory`](history::ToolHistory)
//! snapshot; and maps the
//! snapshot to what each route may receive.
//!
//! Data flows one way, and each module uses only the modules listed before it:
//!
//! | module | holds |
//! |---|---|
//! | [`vocab`] | the JSON nouns: [`Message`], [`ContentBlock`], [`ToolSchema`], `Seq`, `List` |
//! | [`event`] | the log's events ([`Event`], [`Config`], headers, surface operations) |
//! | [`history`] | the tool folds and their immutable `ToolHistory` snapshots |
//! | [`route`] | [`Route`], its capabilities with their evidence, the catalog ([`route_for`]) |
//! | [`store`] | JSONL framing and the single writer of a file |
//! | [`session`] | [`Session`]: the log, all validation, its caches, files and forks |
//! | [`project`] | what one route may receive of a request; unknown-tool checks |
//! | [`wire`] | request bodies for the Messages API and OpenAI-compatible chat ([`WireRequest`]) |
//! | [`response`] | the way back: provider answers (JSON and streamed) decoded into a [`Message`], usage normalized |
//! | [`notice`] | tool-change notices (en, zh) |
//! | [`meter`] | the prefix-cache [`Meter`] |
//! | [`agent`] | [`AgentLoop`] and the [`Request`] it hands back; the `Recorder` for replays |
//! | [`error`] | the crate-wide [`Error`] and [`Result`] |
//! | [`manual`] | no code: the reference, the design decisions and the departures |
//!
//! The root re-exports what a loop calls; everything else lives at one module path.
//!
//! # Terms
//!
//! The nouns the documentation uses, each in one sentence (the [reference's
//! terms](manual::reference#terms) give every one of them and the rules that use them):
//!
//! - **Effective tools**: the tools the loop really offers the model at a step. A request
//!   header in the log records them, never what a provider was sent.
//! - **Surface**: the model-visible history, the messages a request carries. Compaction and
//!   rewinds *replace* part of it; the log keeps everything.
//! - **Request series**: a run of requests meant to share one cached prefix. A new series is a
//!   rewrite by design (a new model, a compaction the caller asked for).
//! - **Declared**: the tools of the series' first request plus every tool added in the series,
//!   removed ones included. On a route with a mode the request's tool list declares them all,
//!   so a later change goes into the history and never rewrites the head of the prefix.
//! - **Offered**: the declared tools the model may call at a given point of the history, once
//!   the tool-change messages before that point are applied.
//! - **Mode**: how a [`Route`] takes tool changes in the history: in-history (additions and
//!   removals), addition-only, or none (every change goes to the tool list).
//!
//! The [`manual`] holds the reference (every rule with the test that holds it), the design
//! decisions and the departures; rustdoc across the crate links to them as "reference §n" and
//! "decision N".
//!
//! What you will **not** find here: async, an HTTP client, a provider SDK. The crate builds
//! requests; the agent loop sends them. The only I/O is JSONL persistence ([`store`]).
//!
//! ```
//! use mektpoy::{AgentLoop, ContentBlock, Message, Session, ToolSchema, route_for};
//!
//! let read = ToolSchema::no_input("read", "Read a file");
//! let mut agent = AgentLoop::builder(Session::new("s1"), route_for("deepseek", "deepseek-flash"))
//!     .option("max_tokens", 1024.into())
//!     .system_prompt("Be brief.")
//!     .tools([read.clone()])
//!     .build()?;
//!
//! for (turn, text) in ["hi", "and now?"].into_iter().enumerate() {
//!     if turn == 1 {
//!         // An MCP server connects: one more effective tool.
//!         agent.set_tools([read.clone(), ToolSchema::no_input("search", "Search")])?;
//!     }
//!     let request = agent.user_turn([Message::user(format!("u{turn}"), text)])?;
//!     let wire = request.to_wire()?;
//!     // ... send `wire.body()` with `wire.headers()`; once the provider accepted it:
//!     agent.observe(&wire)?;
//!     agent.append(agent.assistant(format!("a{turn}"), [ContentBlock::text("ok")]))?;
//! }
//! // The second turn logged a `change` header and a developer message `+search`; on this
//! // addition-only route the first request stayed cached.
//! let history = agent.session().tool_history();
//! assert_eq!(history.updates()[0].additions()[0].name(), "search");
//! let rows = agent.meter().rows();
//! assert_eq!(rows[1].cached_bytes, rows[1].kept_bytes()); // every whole 64-token unit
//! # Ok::<(), mektpoy::Error>(())
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod agent;
pub mod error;
pub mod event;
pub mod history;
pub mod manual;
pub mod meter;
pub mod notice;
pub mod project;
pub mod response;
pub mod route;
pub mod session;
pub mod store;
pub mod vocab;
pub mod wire;

pub use agent::{AgentLoop, Request};
pub use error::{Error, Result};
pub use event::{Config, Event};
pub use meter::Meter;
pub use route::{Route, route_for};
pub use session::Session;
pub use vocab::{ContentBlock, Message, ToolSchema};
pub use wire::WireRequest;

/// The READMEs' Rust examples run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

#[cfg(doctest)]
#[doc = include_str!("../README.zh.md")]
struct ReadmeZhDoctests;
