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
pub use project::ProjectedToolUpdates;
pub use route::{Evidence, Route, ToolUpdateMode, WireApi};
pub use session::{
    AppendError, DEFERRED_PLACEHOLDER_NAME, ForkError, ParentRef, RecordError, Recorder, Request,
    Session, SessionView, Step, SurfaceNode,
};
pub use store::{JsonlSink, JsonlWriter, LoadError, Loaded, PersistError, TornTail, WriteError};
pub use vocab::{
    ContentBlock, Message, MessageSource, Role, Seq, ToolError, ToolSchema, json_equivalent,
};
