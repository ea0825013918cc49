//! The profile file: format, writer (its own thread) and reader.
pub mod block_decoder;
pub mod blocks;
pub mod census_format;
pub mod codec;
#[cfg(test)]
mod codec_tests;
#[cfg(test)]
mod damage_tests;
pub mod dump;
pub mod format;
pub mod frame;
pub mod output_file;
pub mod output_lock;
#[cfg(test)]
mod output_lock_tests;
pub mod output_name;
mod predict;
pub mod reader;
pub mod reader_v2;
mod recent;
pub mod sequence;
pub mod stacks;
#[cfg(test)]
mod stream_tests;
mod symbol_codec;
pub mod synthetic_rank;
pub mod varint;
pub mod writer;
