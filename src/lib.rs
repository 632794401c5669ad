//! Keep the provider's prompt cache alive while an LLM agent's tool set changes.
//!
//! Providers cache the unchanged prefix of each request (tools, then system, then messages).
//! When plugins and MCP servers add or remove tools mid-conversation, a changed tool list
//! rewrites the head of that prefix. mektpoy records every request in an append-only
//! [`Session`] log where headers hold the *effective* tools and tool changes are durable
//! developer messages; folds that log into an immutable [`ToolHistory`] snapshot; and maps the
//! snapshot to what each route may receive.
//!
//! Data flows one way: log ([`Session`], [`Recorder`]) → folds ([`ToolHistory`]) →
//! projection → wire.
//!
//! What you will **not** find here: async, an HTTP client, a provider SDK. The crate builds
//! requests; the agent loop sends them. The only I/O is JSONL persistence ([`store`]).
//!
//! ```
//! use mektpoy::{Config, Message, Recorder, Route, Session, Step, ToolSchema, ToolUpdateMode, WireApi};
//!
//! let session = Session::new("s1");
//! let mut recorder = Recorder::attach(&session);
//! let config = Config::new("deepseek", "deepseek-flash");
//! let route = Route::builder("deepseek", "deepseek-flash", WireApi::Messages)
//!     .tool_update(Some(ToolUpdateMode::AdditionOnly))
//!     .build()?;
//! let read = ToolSchema::new("read", "Read a file", Default::default());
//! let search = ToolSchema::new("search", "Search", Default::default());
//!
//! for (turn, tools) in [vec![read.clone()], vec![read, search]].iter().enumerate() {
//!     let request = recorder.record(&session, Step {
//!         config: &config, system_prompt: "Be brief.", tools, route: &route,
//!         new_series: false, turn: turn as u64, step: 0, attempt: 0,
//!         user_messages: &[Message::user(format!("u{turn}"), "hi")],
//!     })?;
//!     assert_eq!(request.tools.len(), turn + 1);
//! }
//! // The second step logged a `change` header and a developer message `+search`:
//! let history = session.tool_history();
//! assert_eq!(history.tools().len(), 1); // the series' baseline: `read`
//! assert_eq!(history.updates()[0].additions()[0].name(), "search");
//! # Ok::<(), mektpoy::Error>(())
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod error;
pub mod event;
pub mod history;
pub mod meter;
pub mod notice;
pub mod project;
pub mod route;
pub mod session;
pub mod store;
pub mod vocab;
pub mod wire;

pub use error::Error;
pub use event::{
    Config, DecodeError, Event, HeaderEvent, MessageEvent, OpaqueEvent, Reason, RequestHeader,
    Rewrite, SurfaceOp, ThinkingEvent, ThinkingFloor, ThinkingPolicy,
};
pub use history::{ToolHistory, ToolUpdate};
pub use meter::{Meter, MeterError, MeterReport, MeterRow, Price};
pub use notice::{Locale, Notice, is_tool_notice, notice};
pub use project::{
    ProjectedToolUpdates, ProjectionPath, UnknownTool, project_tool_updates,
    project_tool_updates_inline, project_tool_updates_inline_traced, project_tool_updates_traced,
    validate_tool_call,
};
pub use route::{
    Capability, Claim, Evidence, Route, RouteBuilder, RouteError, ToolUpdateMode, WireApi, catalog,
    route_for,
};
pub use session::{
    AppendError, FileOptions, ForkError, LoadError, Loaded, ParentRef, RecordError, Recorder,
    Request, SeriesStart, Session, SessionLineFault, SessionView, Step, SurfaceNode,
};
pub use store::{FrameFault, JsonlSink, PersistError, TornBatch, TornTail, WriteError};
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
