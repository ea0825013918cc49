//! Stack unwinding from a snapshot: the tracer copies registers and stack bytes at a stop,
//! resumes the thread, and a worker walks the copy later with the module files on disk.

pub mod modules;
pub mod snapshot;

pub use snapshot::StackSnapshot;
