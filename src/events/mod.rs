//! The event seam between the sources and the interpret stage.

pub mod sink;
pub mod watched;
