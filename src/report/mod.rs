//! Renderers of an `Analysis`.
pub mod json;
pub mod text;
