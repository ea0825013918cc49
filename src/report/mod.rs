//! Renderers of an `Analysis`, and the HTML flamegraph page.
pub mod choose;
pub mod csv;
pub mod csv_sites;
pub mod diff;
pub mod export;
pub mod folded;
pub mod html;
pub mod html_report;
pub mod job;
pub mod json;
mod json_arena_free;
mod json_census;
mod json_components;
mod json_mpi;
mod json_sites;
mod json_threads;
pub mod node_totals;
pub mod perfetto;
pub mod series;
pub mod size_classes;
#[cfg(test)]
pub(crate) mod test_data;
pub mod text;
