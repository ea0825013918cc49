//! The flame graphs' stacks of a profile with their details: the sites merged by source
//! location (`ProcessAnalysis::source_sites`), as in `folded::stacks`, each frame with its
//! module and source line, each stack with its block count.

use super::merge::{DetailedGraph, DetailedStack, FrameLabel};
use crate::analysis::{Analysis, Frame, ProcessAnalysis, SiteMetrics};
use crate::report::folded::{image_frame, Metric, NO_STACK};
use crate::trace::format::MapCall;

/// (bytes, blocks) of `metric`, and what the blocks are.
fn measure(metric: Metric, metrics: &SiteMetrics) -> (u64, u64) {
    match metric {
        Metric::Peak => (metrics.peak_bytes, metrics.peak_blocks),
        Metric::Leaked => (metrics.leaked_bytes, metrics.leaked_blocks),
        Metric::Allocated => (metrics.bytes_allocated, metrics.allocations),
        Metric::Temporary => (metrics.temporary_bytes, metrics.temporary_allocations),
    }
}

pub fn count_label(metric: Metric) -> &'static str {
    match metric {
        Metric::Peak => "blocks live at the peak",
        Metric::Leaked => "blocks leaked",
        Metric::Allocated => "allocations",
        Metric::Temporary => "temporary allocations",
    }
}

/// The graph of `metric` over every image of `analysis`; with more than one image, each
/// stack starts with a frame naming its image.
pub fn detailed_graph(analysis: &Analysis, metric: Metric, description: &str) -> DetailedGraph {
    let name_images = analysis.processes.len() > 1;
    let mut stacks = Vec::new();
    for image in &analysis.processes {
        for site in &image.source_sites {
            let (value, count) = measure(metric, &site.metrics);
            if value == 0 {
                continue;
            }
            stacks.push(DetailedStack {
                frames: labels(image, &site.stack, name_images),
                value,
                count,
            });
        }
    }
    DetailedGraph {
        metric: metric.name().to_string(),
        description: description.to_string(),
        count_label: count_label(metric).to_string(),
        stacks,
        moment: None,
    }
}

/// The "mapped" graph: anonymous mapped bytes live at each image's peak of them, by the
/// stack of the call that mapped them (`MappingStats::peak_bytes`), with the mmap calls.
pub fn mapped_graph(analysis: &Analysis) -> DetailedGraph {
    let name_images = analysis.processes.len() > 1;
    let mut stacks = Vec::new();
    for image in &analysis.processes {
        for site in &image.mapping_sites {
            let mappings = &site.mappings;
            if mappings.peak_bytes == 0 {
                continue;
            }
            stacks.push(DetailedStack {
                frames: labels(image, &site.stack, name_images),
                value: mappings.peak_bytes,
                count: mappings.calls.get(&MapCall::Mmap).copied().unwrap_or(0),
            });
        }
    }
    DetailedGraph {
        metric: "mapped".to_string(),
        description: "anonymous mapped bytes (mmap) live at the peak of mapped memory, by the \
                      mapping call's stack"
            .to_string(),
        count_label: "mmap calls".to_string(),
        stacks,
        moment: None,
    }
}

/// The frames of `stack` (innermost first) root first, after the image's frame if asked.
pub fn labels(image: &ProcessAnalysis, stack: &[Frame], name_image: bool) -> Vec<FrameLabel> {
    let mut frames = Vec::with_capacity(stack.len() + 1);
    let plain = |name: String| FrameLabel {
        name,
        module: String::new(),
        location: String::new(),
    };
    if name_image {
        frames.push(plain(image_frame(image)));
    }
    if stack.is_empty() {
        frames.push(plain(NO_STACK.to_string()));
    }
    frames.extend(stack.iter().rev().map(label));
    frames
}

pub fn label(frame: &Frame) -> FrameLabel {
    FrameLabel {
        name: frame.name(),
        module: frame.module_file_name().to_string(),
        location: location(frame),
    }
}

/// "file:line" with the file's name alone, "file" without a line, "" without a file.
pub fn location(frame: &Frame) -> String {
    let Some(file) = &frame.file else {
        return String::new();
    };
    let name = file.rsplit('/').next().unwrap_or(file);
    match frame.line {
        Some(line) => format!("{name}:{line}"),
        None => name.to_string(),
    }
}
