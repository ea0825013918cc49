//! Reads profiles, up to the last whole block of one that was cut short.

use std::path::Path;

use crate::error::TraceError;
use crate::trace::format::{Header, Record};

/// A whole profile in memory.
#[derive(Debug, Clone)]
pub struct Profile {
    pub header: Header,
    pub records: Vec<Record>,
    /// The file ended inside a block or without an `End` record.
    pub truncated: bool,
}

/// Reads a profile file. Fails on a foreign file or a newer format version.
pub fn read_profile(path: &Path) -> Result<Profile, TraceError> {
    let _ = path;
    todo!()
}
