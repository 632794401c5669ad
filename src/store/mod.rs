//! JSONL persistence (SPEC §2): the only module that does I/O.
//!
//! Line 1 is the session line; line `k+2` is the event with `Seq` `k`. Loaded lines keep
//! their exact bytes and are written back verbatim, so load → save is byte-identical; only
//! events created in this process are serialized.

mod jsonl;
mod writer;

pub use jsonl::{LoadError, Loaded, PersistError, TornTail};
pub use writer::{JsonlSink, JsonlWriter, WriteError};
