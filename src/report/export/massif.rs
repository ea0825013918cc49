//! `memsup report --format massif`: one process image as Valgrind massif's `massif.out`
//! (ms_print, massif-visualizer). The snapshots are the image's timeline of live requested
//! bytes (`components.timeline.requested`, already downsampled), times in ms since the image
//! started; two carry heap trees, as they are the ones memsup knows site by site: the peak
//! (`heap_tree=peak`, each site's bytes live at the peak) and the end (`detailed`, what was
//! still live). Trees are massif's: the allocator's callers at the top, their callers below,
//! one node per return address. memsup records no allocator overhead or stacks, so
//! `mem_heap_extra_B` and `mem_stacks_B` are 0.

use std::collections::BTreeMap;
use std::io::Write;

use crate::analysis::{Frame, ProcessAnalysis, Site, SiteMetrics};

/// What one snapshot shows of the heap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tree {
    Empty,
    Peak,
    End,
}

/// Writes `image` of the profile at `profile_path`.
pub fn render(
    profile_path: &str,
    image: &ProcessAnalysis,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    writeln!(out, "desc: memsup report --format massif {profile_path}")?;
    writeln!(out, "cmd: {}", one_line(&image.argv.join(" ")))?;
    writeln!(out, "time_unit: ms")?;
    for (number, (time_ns, bytes, tree)) in snapshots(image).into_iter().enumerate() {
        writeln!(out, "#-----------\nsnapshot={number}\n#-----------")?;
        let since_start_ns = time_ns.saturating_sub(image.start_ns);
        writeln!(out, "time={:.3}", since_start_ns as f64 / 1e6)?;
        writeln!(out, "mem_heap_B={bytes}")?;
        writeln!(out, "mem_heap_extra_B=0\nmem_stacks_B=0")?;
        match tree {
            Tree::Empty => writeln!(out, "heap_tree=empty")?,
            Tree::Peak => {
                writeln!(out, "heap_tree=peak")?;
                write_tree(&image.sites, |metrics| metrics.peak_bytes, out)?;
            }
            Tree::End => {
                writeln!(out, "heap_tree=detailed")?;
                write_tree(&image.sites, |metrics| metrics.leaked_bytes, out)?;
            }
        }
    }
    Ok(())
}

/// (absolute time, live requested bytes, tree) in time order: the timeline, the peak in its
/// place (a timeline point at the same time and bytes is the peak itself), the end last.
fn snapshots(image: &ProcessAnalysis) -> Vec<(u64, u64, Tree)> {
    let peak = (
        image.start_ns + image.peak_time_ns,
        image.peak_live_bytes,
        Tree::Peak,
    );
    let end_ns = image.start_ns + image.duration_ns;
    let mut snapshots: Vec<(u64, u64, Tree)> = image
        .components
        .timeline
        .requested
        .iter()
        .map(|point| (point.time_ns, point.bytes, Tree::Empty))
        .filter(|&(time_ns, bytes, _)| (time_ns, bytes) != (peak.0, peak.1) && time_ns < end_ns)
        .collect();
    let after_peak = snapshots.partition_point(|&(time_ns, ..)| time_ns <= peak.0);
    snapshots.insert(after_peak, peak);
    snapshots.push((end_ns.max(peak.0), image.live_bytes_at_exit, Tree::End));
    snapshots
}

/// A node of a heap tree: the bytes of the sites through it, and its callers' nodes.
#[derive(Debug, Default)]
struct Node {
    bytes: u64,
    callers: BTreeMap<String, Node>,
}

impl Node {
    fn add(&mut self, frames: &[Frame], bytes: u64) {
        self.bytes += bytes;
        if let Some((frame, callers)) = frames.split_first() {
            let caller = self.callers.entry(frame_label(frame)).or_default();
            caller.add(callers, bytes);
        }
    }
}

/// The tree of the sites' `value`, sites without bytes left out.
fn write_tree(
    sites: &[Site],
    value: impl Fn(&SiteMetrics) -> u64,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let mut root = Node::default();
    for site in sites {
        let bytes = value(&site.metrics);
        if bytes > 0 {
            root.add(&site.stack, bytes);
        }
    }
    let label = "(heap allocation functions) malloc/new/new[], --alloc-fns, etc.";
    write_node(&root, label, 0, out)
}

/// A node's line, `nCHILDREN: BYTES LABEL` indented by its depth, then its callers by bytes
/// (then label).
fn write_node(node: &Node, label: &str, depth: usize, out: &mut dyn Write) -> std::io::Result<()> {
    let mut callers: Vec<(&String, &Node)> = node.callers.iter().collect();
    callers.sort_by(|left, right| right.1.bytes.cmp(&left.1.bytes).then(left.0.cmp(right.0)));
    let indent = " ".repeat(depth);
    writeln!(out, "{indent}n{}: {} {label}", callers.len(), node.bytes)?;
    for (caller_label, caller) in callers {
        write_node(caller, caller_label, depth + 1, out)?;
    }
    Ok(())
}

/// `0xADDRESS: function (file:line)` as massif writes a frame, `(in MODULE)` without a line.
fn frame_label(frame: &Frame) -> String {
    let function = match frame.function.as_str() {
        "" => "???".to_string(),
        function => one_line(function),
    };
    let file = frame
        .file
        .as_deref()
        .map(crate::platform::libraries::file_name);
    let place = match (file, frame.line) {
        (Some(file), Some(line)) => format!(" ({file}:{line})"),
        _ if !frame.module.is_empty() => format!(" (in {})", frame.module),
        _ => String::new(),
    };
    format!("{:#X}: {function}{place}", frame.address).replacen("0X", "0x", 1)
}

/// Line breaks would end the field early.
fn one_line(text: &str) -> String {
    text.replace(['\n', '\r'], " ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::components::TimePoint;
    use crate::report::test_data::components_analysis;

    fn frame(function: &str, address: u64, line: u32) -> Frame {
        Frame {
            function: function.to_string(),
            file: Some("/src/a.c".to_string()),
            line: Some(line),
            module: "/bin/app".to_string(),
            address,
            offset: 0,
            inlined: false,
        }
    }

    fn site(stack: Vec<Frame>, peak_bytes: u64, leaked_bytes: u64) -> Site {
        let metrics = SiteMetrics {
            peak_bytes,
            leaked_bytes,
            ..SiteMetrics::default()
        };
        Site { stack, metrics }
    }

    #[test]
    fn timeline_snapshots_with_the_peak_and_end_trees() {
        let mut analysis = components_analysis();
        let image = &mut analysis.processes[0];
        image.argv = vec!["./app".to_string(), "x".to_string()];
        image.start_ns = 1_000_000;
        image.duration_ns = 3_000_000;
        image.peak_time_ns = 1_000_000;
        image.peak_live_bytes = 300;
        image.live_bytes_at_exit = 100;
        image.components.timeline.requested = [(1_500_000, 100), (2_000_000, 300)]
            .iter()
            .map(|&(time_ns, bytes)| TimePoint { time_ns, bytes })
            .collect();
        let main = |address| frame("main", address, 9);
        image.sites = vec![
            site(vec![frame("make", 0x10, 4), main(0x20)], 200, 0),
            site(vec![frame("make", 0x10, 4), main(0x30)], 0, 100),
            site(vec![main(0x40)], 100, 0),
        ];
        let mut out = Vec::new();
        render("p.msup", image, &mut out).unwrap();
        let expected = "desc: memsup report --format massif p.msup\ncmd: ./app x\n\
            time_unit: ms\n#-----------\nsnapshot=0\n#-----------\ntime=0.500\n\
            mem_heap_B=100\nmem_heap_extra_B=0\nmem_stacks_B=0\nheap_tree=empty\n\
            #-----------\nsnapshot=1\n#-----------\ntime=1.000\nmem_heap_B=300\n\
            mem_heap_extra_B=0\nmem_stacks_B=0\nheap_tree=peak\n\
            n2: 300 (heap allocation functions) malloc/new/new[], --alloc-fns, etc.\n\
            \x20n1: 200 0x10: make (a.c:4)\n  n0: 200 0x20: main (a.c:9)\n\
            \x20n0: 100 0x40: main (a.c:9)\n\
            #-----------\nsnapshot=2\n#-----------\ntime=3.000\nmem_heap_B=100\n\
            mem_heap_extra_B=0\nmem_stacks_B=0\nheap_tree=detailed\n\
            n1: 100 (heap allocation functions) malloc/new/new[], --alloc-fns, etc.\n\
            \x20n1: 100 0x10: make (a.c:4)\n  n0: 100 0x30: main (a.c:9)\n";
        assert_eq!(String::from_utf8(out).unwrap(), expected);
    }
}
