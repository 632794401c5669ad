//! The crate-wide error: every module's error converts into it, so an application can use `?`
//! across the whole pipeline and still match the concern it cares about.

use crate::agent::RecordError;
use crate::agent::replay::ReplayError;
use crate::event::{ConfigError, DecodeError, OpaqueError};
use crate::meter::MeterError;
use crate::project::UnknownTool;
use crate::route::RouteError;
use crate::session::{AppendError, ForkError, LoadError, SchemaConflict, SchemaConflicts};
use crate::store::{PersistError, WriteError};
use crate::vocab::{BlockError, SourceError, ToolError};
use crate::wire::WireError;

/// `Result` with the crate's [`Error`] as the default error type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Any error of this crate, by concern. Each variant wraps the module's own typed error.
///
/// ```
/// use mektpoy::{AgentLoop, Error, Message, Session, route_for};
/// fn turn(agent: &mut AgentLoop) -> mektpoy::Result<String> {
///     let request = agent.user_turn([Message::user("u1", "hi")])?; // an AppendError
///     Ok(request.to_wire()?.body().to_owned()) // a WireError
/// }
/// let mut agent = AgentLoop::builder(Session::new("s"), route_for("deepseek", "deepseek-flash")).build()?;
/// // The Messages API needs `max_tokens`: the wire error, by concern.
/// assert!(matches!(turn(&mut agent), Err(Error::Wire(_))));
/// # Ok::<(), Error>(())
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A tool declaration is malformed.
    #[error(transparent)]
    Tool(#[from] ToolError),
    /// A content block is malformed, or a known type was given to [`ContentBlock::other`].
    ///
    /// [`ContentBlock::other`]: crate::ContentBlock::other
    #[error(transparent)]
    Block(#[from] BlockError),
    /// A message source is malformed, or a known kind was given to [`MessageSource::other`].
    ///
    /// [`MessageSource::other`]: crate::vocab::MessageSource::other
    #[error(transparent)]
    Source(#[from] SourceError),
    /// [`OpaqueEvent::new`](crate::event::OpaqueEvent::new) refused its input.
    #[error(transparent)]
    Opaque(#[from] OpaqueError),
    /// An event's JSON is malformed.
    #[error(transparent)]
    Decode(#[from] DecodeError),
    /// [`Config::with`](crate::Config::with) refused an option.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The session refused an event.
    #[error(transparent)]
    Append(#[from] AppendError),
    /// A fork point is out of range.
    #[error(transparent)]
    Fork(#[from] ForkError),
    /// A tool about to be registered conflicts with calls on the surface (the schema guard).
    #[error(transparent)]
    SchemaConflict(#[from] SchemaConflict),
    /// Tools about to be registered conflict with calls on the surface (the schema guard).
    #[error(transparent)]
    SchemaConflicts(#[from] SchemaConflicts),
    /// The recorder refused a step.
    #[error(transparent)]
    Record(#[from] RecordError),
    /// A loop could not be built, or its options were refused: every fault at once.
    #[error(transparent)]
    Build(#[from] crate::agent::BuildError),
    /// The route refused a tool as it was set ([`Route::check_tools`](crate::Route::check_tools)).
    #[error(transparent)]
    ToolRefused(#[from] crate::route::ToolRefused),
    /// A recorded session could not be replayed.
    #[error(transparent)]
    Replay(#[from] ReplayError),
    /// A session file could not be loaded.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// A session file could not be created or saved.
    #[error(transparent)]
    Persist(#[from] PersistError),
    /// A batch could not be written.
    #[error(transparent)]
    Write(#[from] WriteError),
    /// A call names a tool outside the effective tools.
    #[error(transparent)]
    UnknownTool(#[from] UnknownTool),
    /// A projected request cannot be represented on the wire.
    #[error(transparent)]
    Wire(#[from] WireError),
    /// A route's capabilities are not valid together.
    #[error(transparent)]
    Route(#[from] RouteError),
    /// A body could not be metered.
    #[error(transparent)]
    Meter(#[from] MeterError),
    /// A provider response could not be decoded.
    #[error(transparent)]
    Response(#[from] crate::response::ResponseError),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::AppendErrorKind;

    fn pipeline() -> Result<(), Error> {
        let session = crate::Session::new("s");
        session.append_json("{}")?;
        Ok(())
    }

    #[test]
    fn module_errors_convert_and_keep_their_message() {
        let err = pipeline().unwrap_err();
        assert!(
            matches!(&err, Error::Append(e) if matches!(e.kind(), AppendErrorKind::Decode { .. })),
            "{err:?}"
        );
        assert!(err.to_string().starts_with("event 0"), "{err}");
    }
}
