//! Renderers of an `Analysis`.
pub mod folded;
pub mod json;
mod json_sites;
pub mod text;
