//! The call sites of the JSON report: their stacks and numbers, in the documented key order.

use super::json::MappingsJson;
use crate::analysis::{Frame, MappingSite, Site};

#[derive(serde::Serialize)]
pub(super) struct FrameJson<'a> {
    function: &'a str,
    file: Option<&'a str>,
    line: Option<u32>,
    module: &'a str,
    address: u64,
    inlined: bool,
}

pub(super) fn stack_json(stack: &[Frame]) -> Vec<FrameJson<'_>> {
    stack
        .iter()
        .map(|frame| FrameJson {
            function: &frame.function,
            file: frame.file.as_deref(),
            line: frame.line,
            module: &frame.module,
            address: frame.address,
            inlined: frame.inlined,
        })
        .collect()
}

#[derive(serde::Serialize)]
pub(super) struct SiteJson<'a> {
    stack: Vec<FrameJson<'a>>,
    allocations: u64,
    bytes_allocated: u64,
    min_size: u64,
    average_size: u64,
    max_size: u64,
    freed_blocks: u64,
    min_lifetime_ns: Option<u64>,
    average_lifetime_ns: Option<u64>,
    max_lifetime_ns: Option<u64>,
    peak_bytes: u64,
    peak_blocks: u64,
    local_peak_bytes: u64,
    recycling_ratio: Option<f64>,
    temporary_allocations: u64,
    temporary_bytes: u64,
    leaked_bytes: u64,
    leaked_blocks: u64,
}

impl<'a> SiteJson<'a> {
    pub(super) fn new(site: &'a Site) -> Self {
        let metrics = &site.metrics;
        let lifetimes = metrics.lifetimes_ns();
        SiteJson {
            stack: stack_json(&site.stack),
            allocations: metrics.allocations,
            bytes_allocated: metrics.bytes_allocated,
            min_size: metrics.min_size,
            average_size: metrics.average_size(),
            max_size: metrics.max_size,
            freed_blocks: metrics.freed_blocks,
            min_lifetime_ns: lifetimes.map(|(min, _, _)| min),
            average_lifetime_ns: lifetimes.map(|(_, average, _)| average),
            max_lifetime_ns: lifetimes.map(|(_, _, max)| max),
            peak_bytes: metrics.peak_bytes,
            peak_blocks: metrics.peak_blocks,
            local_peak_bytes: metrics.local_peak_bytes,
            recycling_ratio: metrics.recycling_ratio(),
            temporary_allocations: metrics.temporary_allocations,
            temporary_bytes: metrics.temporary_bytes,
            leaked_bytes: metrics.leaked_bytes,
            leaked_blocks: metrics.leaked_blocks,
        }
    }
}

#[derive(serde::Serialize)]
pub(super) struct MappingSiteJson<'a> {
    stack: Vec<FrameJson<'a>>,
    #[serde(flatten)]
    mappings: MappingsJson,
}

impl<'a> MappingSiteJson<'a> {
    pub(super) fn new(site: &'a MappingSite) -> Self {
        MappingSiteJson {
            stack: stack_json(&site.stack),
            mappings: MappingsJson::new(&site.mappings),
        }
    }
}
