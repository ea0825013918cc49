//! Renderers of an `Analysis`.
pub mod json;
mod json_sites;
pub mod text;
