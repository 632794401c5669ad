//! Keep the provider's prompt cache alive while an LLM agent's tool set changes.
//!
//! Providers cache the unchanged prefix of each request (tools, then system, then messages).
//! When plugins and MCP servers add or remove tools mid-conversation, a changed tool list
//! rewrites the head of that prefix. mektpoy records every request in an append-only
//! [`Session`] log where headers hold the *effective* tools and tool changes are durable
//! developer messages; folds that log into an immutable [`ToolHistory`] snapshot; and maps the
//! snapshot to what each route may receive.
//!
//! Data flows one way: log ([`Session`]) → folds ([`ToolHistory`]) → projection → wire →
//! meter, with the loop ([`AgentLoop`]) on top: it records each attempt into the log and hands
//! back the [`Request`] to send.
//!
//! What you will **not** find here: async, an HTTP client, a provider SDK. The crate builds
//! requests; the agent loop sends them. The only I/O is JSONL persistence ([`store`]).
//!
//! ```
//! use mektpoy::{AgentLoop, Config, Message, Session, ToolSchema, route_for};
//!
//! let config = Config::new("deepseek", "deepseek-flash").with("max_tokens", 1024.into());
//! let read = ToolSchema::new("read", "Read a file", Default::default());
//! let mut agent = AgentLoop::new(Session::new("s1"), route_for("deepseek", "deepseek-flash"), config)
//!     .with_system_prompt("Be brief.")
//!     .with_tools([read.clone()]);
//!
//! for (turn, text) in ["hi", "and now?"].into_iter().enumerate() {
//!     if turn == 1 {
//!         // An MCP server connects: one more effective tool.
//!         agent.set_tools([read.clone(), ToolSchema::new("search", "Search", Default::default())]);
//!     }
//!     let request = agent.user_turn([Message::user(format!("u{turn}"), text)])?;
//!     let wire = request.to_wire()?;
//!     // ... send `wire.body` with `wire.headers`; once the provider accepted it:
//!     agent.observe(&wire)?;
//!     agent.append(Message::assistant(format!("a{turn}"), "ok", "deepseek", "deepseek-flash"))?;
//! }
//! // The second turn logged a `change` header and a developer message `+search`; on this
//! // addition-only route the first request stayed cached.
//! let history = agent.session().tool_history();
//! assert_eq!(history.updates()[0].additions()[0].name(), "search");
//! let rows = agent.meter().rows();
//! assert_eq!(rows[1].cached_bytes, rows[0].total_bytes);
//! # Ok::<(), mektpoy::Error>(())
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod agent;
pub mod error;
pub mod event;
pub mod history;
pub mod meter;
pub mod notice;
pub mod project;
pub mod response;
pub mod route;
pub mod session;
pub mod store;
pub mod vocab;
pub mod wire;

pub use agent::{AgentLoop, RecordError, Recorder, Request, Step};
pub use error::{Error, Result};
pub use event::{
    Config, DecodeError, Event, HeaderEvent, MessageEvent, OpaqueEvent, Reason, RequestHeader,
    Rewrite, SeriesStart, SurfaceOp, ThinkingEvent, ThinkingFloor, ThinkingPolicy,
};
pub use history::{ToolHistory, ToolUpdate};
pub use meter::{Meter, MeterError, MeterReport, MeterRow, Price};
pub use notice::{Locale, Notice, is_tool_notice, notice};
pub use project::{
    ProjectedToolUpdates, ProjectionPath, UnknownTool, project_tool_updates,
    project_tool_updates_inline, validate_tool_call,
};
pub use route::{
    Capability, Claim, Evidence, Route, RouteBuilder, RouteError, ToolUpdateMode, WireApi, catalog,
    route_for,
};
pub use session::{AppendError, ForkError, ParentRef, Session, SessionView, SurfaceNode};
pub use store::{
    FileOptions, FrameFault, JsonlSink, JsonlWriter, LoadError, Loaded, PersistError, TornBatch,
    TornTail, WriteError,
};
pub use vocab::{
    ContentBlock, DEFERRED_PLACEHOLDER_NAME, InlineAddition, List, Message, MessageSource, Role,
    Seq, ToolError, ToolSchema, json_equivalent,
};
pub use wire::{
    ThinkingPlan, ToolLimit, WireContext, WireError, WireReport, WireRequest, serialize,
    serialize_messages, serialize_openai_chat, serialize_with,
};

/// The READMEs' Rust examples run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

#[cfg(doctest)]
#[doc = include_str!("../README.zh.md")]
struct ReadmeZhDoctests;
