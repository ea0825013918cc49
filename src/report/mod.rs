//! Renderers of an `Analysis`, and the HTML flamegraph page.
pub mod html;
pub mod json;
pub mod text;
