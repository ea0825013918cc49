//! The profile file: format, writer (its own thread) and reader.
pub mod format;
pub mod output_file;
pub mod reader;
pub mod stacks;
pub mod writer;
