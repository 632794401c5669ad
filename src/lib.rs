//! mektpoy (placeholder crate doc, rewritten below once the API settles).
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod event;
pub mod history;
pub mod project;
pub mod route;
pub mod session;
pub mod store;
pub mod vocab;

pub use event::{
    Config, DecodeError, Event, HeaderEvent, MessageEvent, OpaqueEvent, Reason, RequestHeader,
    SurfaceOp,
};
pub use history::{ToolHistory, ToolUpdate};
pub use project::{
    DEFERRED_PLACEHOLDER_NAME, ProjectedToolUpdates, ProjectionPath, UnknownTool,
    project_tool_updates, project_tool_updates_traced, validate_tool_call,
};
pub use route::{Evidence, Route, ToolUpdateMode, WireApi, catalog, route_for};
pub use session::{AppendError, ForkError, ParentRef, Session, SessionView, SurfaceNode};
pub use store::{JsonlSink, JsonlWriter, LoadError, Loaded, PersistError, TornTail, WriteError};
pub use vocab::{
    json_equivalent, ContentBlock, Message, MessageSource, Role, Seq, ToolError, ToolSchema,
};
