//! JSONL framing and files: the only module that does I/O.
//!
//! A log file is a head line, then one line per event, each batch of two or more lines after
//! a frame line `{"batch":N}`. `store` splits bytes into those lines and batches, enforces the
//! load limits, finds a torn end, and writes each batch with one write under the file's
//! exclusive lock. What a line means is not its business: `session` decodes the lines and
//! drives the reader, so `store` never names a session or an event. Loaded lines (frame lines
//! included) keep their exact bytes and are written back verbatim, so load → save is
//! byte-identical.

mod file;
mod frame;
mod reader;
mod writer;

pub use file::PersistError;
pub(crate) use file::{LockedFile, OpenError, WrapSink, create, read_file, replace};
pub use frame::FrameFault;
pub(crate) use frame::{Frame, Frames, file_text};
pub(crate) use reader::{Item, Limits, Lines, ReadError, Tail};
pub use reader::{TornBatch, TornTail};
pub(crate) use writer::JsonlWriter;
pub use writer::{JsonlSink, WriteError};
