//! JSONL persistence (SPEC §2): the only module that does I/O.
//!
//! Line 1 is the session line; then one line per event, in `Seq` order, each batch of two or
//! more events after a frame line `{"batch":N}` that takes no `Seq`. Loaded lines (frame
//! lines included) keep their exact bytes and are written back verbatim, so load → save is
//! byte-identical; only events and frames created in this process are serialized.

mod jsonl;
mod writer;

pub use jsonl::{FileOptions, FrameFault, LoadError, Loaded, PersistError, TornBatch, TornTail};
pub(crate) use jsonl::{Frame, Frames};
pub use writer::{JsonlSink, JsonlWriter, WriteError};
