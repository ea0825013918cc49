//! Why memory stays resident, one line per cause memsup can show, each naming its knob.

use std::io::Write;

use super::components::short_bytes;
use super::{human_duration, LABEL_WIDTH};
use crate::analysis::ProcessAnalysis;

pub(super) fn render_resident_reasons(
    image: &ProcessAnalysis,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let Some(rise) = image.mmap_threshold else {
        return Ok(());
    };
    let blocks = match rise.blocks_from_arena {
        1 => "1 later block".to_string(),
        count => format!("{count} later blocks"),
    };
    writeln!(
        out,
        "  {:<LABEL_WIDTH$} glibc raised its mmap threshold to {} at {} (a mapped block that \
         size was freed): {blocks} ({}) came from the arena instead of a mapping of their own, \
         and the arena keeps what is freed there up to the trim threshold ({}); \
         MALLOC_MMAP_THRESHOLD_=131072 keeps the threshold where it starts",
        "why resident",
        short_bytes(rise.threshold_bytes),
        human_duration(rise.time_ns.saturating_sub(image.start_ns)),
        short_bytes(rise.bytes_from_arena),
        short_bytes(rise.trim_threshold_bytes()),
    )
}
