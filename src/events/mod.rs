//! The source-neutral event layer.

pub mod heap;
