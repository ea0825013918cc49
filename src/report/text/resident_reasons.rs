//! Why memory stays resident, one line per cause memsup can show, each naming its knob.

use std::io::Write;

use super::components::short_bytes;
use super::{human_duration, plural, LABEL_WIDTH};
use crate::analysis::components::{ArenaFree, ChunkGaps};
use crate::analysis::ProcessAnalysis;

/// Free memory inside the arenas below this is no cause worth a line.
const WORTH_A_LINE: u64 = 1 << 20;

pub(super) fn render_resident_reasons(
    image: &ProcessAnalysis,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let mut lines = Vec::new();
    if let Some(rise) = image.mmap_threshold {
        let blocks = match rise.blocks_from_arena {
            1 => "1 later block".to_string(),
            count => format!("{count} later blocks"),
        };
        lines.push(format!(
            "glibc raised its mmap threshold to {} at {} (a mapped block that size was \
             freed): {blocks} ({}) came from the arena instead of a mapping of their own, and \
             the arena keeps what is freed there up to the trim threshold ({}); \
             MALLOC_MMAP_THRESHOLD_=131072 keeps the threshold where it starts",
            short_bytes(rise.threshold_bytes),
            human_duration(rise.time_ns.saturating_sub(image.start_ns)),
            short_bytes(rise.bytes_from_arena),
            short_bytes(rise.trim_threshold_bytes()),
        ));
    }
    if let Some(free) = &image.arena_free {
        lines.extend(arena_lines(free, image.start_ns));
    }
    for line in lines {
        writeln!(out, "  {:<LABEL_WIDTH$} {line}", "why resident")?;
    }
    Ok(())
}

fn arena_lines(free: &ArenaFree, start_ns: u64) -> Vec<String> {
    let at = human_duration(free.time_ns.saturating_sub(start_ns));
    let mut lines = Vec::new();
    if free.main.bytes >= WORTH_A_LINE {
        lines.push(format!(
            "{} among live blocks in the main arena at {at}: glibc reuses them for requests \
             that fit, but cannot give back a page a live block shares; malloc_trim(0) returns \
             their whole free pages",
            free_chunks(&free.main),
        ));
    }
    if free.thread_arenas > 0 && free.thread_overhead_rss >= WORTH_A_LINE {
        let arenas = match free.thread_arenas {
            1 => "1 thread arena holds".to_string(),
            count => format!("{count} thread arenas hold"),
        };
        let chunks = match free.threads.chunks {
            0 => String::new(),
            _ => format!(", {}", free_chunks(&free.threads)),
        };
        lines.push(format!(
            "{arenas} {} that no live block accounts for at {at}{chunks}: glibc gives \
             threads arenas of their own, up to 8 per core, and reuses free memory only within \
             its arena; MALLOC_ARENA_MAX caps how many there are (1: every thread shares the \
             main arena)",
            short_bytes(free.thread_overhead_rss),
        ));
    }
    lines
}

/// "8.01 MiB free in 512 chunks (most in 16 KiB–32 KiB ones)".
fn free_chunks(gaps: &ChunkGaps) -> String {
    let mut text = format!(
        "{} free in {}",
        short_bytes(gaps.bytes),
        plural(gaps.chunks, "chunk")
    );
    if let Some((low, high)) = gaps.main_class() {
        text += &format!(
            " (most in {}–{} ones)",
            power_of_two(low),
            power_of_two(high)
        );
    }
    text
}

/// A power of two in its largest whole unit: "512 bytes", "16 KiB", "1 MiB".
fn power_of_two(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["bytes", "KiB", "MiB", "GiB"];
    let unit = ((bytes.max(1).ilog2() / 10) as usize).min(UNITS.len() - 1);
    format!("{} {}", bytes >> (10 * unit), UNITS[unit])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gaps(chunks: u64, bytes: u64, classes: Vec<(u8, u64)>) -> ChunkGaps {
        ChunkGaps {
            chunks,
            bytes,
            top: 0,
            classes,
            heaps: 0,
            later_heaps: 0,
        }
    }

    #[test]
    fn each_cause_over_a_mebibyte_is_one_line_with_its_knob() {
        let free = ArenaFree {
            time_ns: 1_500_000_000,
            main: gaps(512, 8_396_800, vec![(14, 8_396_800)]),
            thread_arenas: 4,
            threads: gaps(3, 1_000, vec![(5, 100), (8, 900)]),
            thread_overhead_rss: 2 << 20,
        };
        assert_eq!(
            arena_lines(&free, 500_000_000),
            [
                "8.01 MiB free in 512 chunks (most in 16 KiB–32 KiB ones) among live blocks in \
                 the main arena at 1.00 s: glibc reuses them for requests that fit, but cannot \
                 give back a page a live block shares; malloc_trim(0) returns their whole free \
                 pages",
                "4 thread arenas hold 2.00 MiB that no live block accounts for at 1.00 s, \
                 1000 bytes free in 3 chunks (most in 256 bytes–512 bytes ones): glibc gives \
                 threads arenas of their own, up to 8 per core, and reuses free memory only \
                 within its arena; MALLOC_ARENA_MAX caps how many there are (1: every thread \
                 shares the main arena)",
            ]
        );
        let small = ArenaFree {
            main: gaps(1, (1 << 20) - 1, vec![(19, (1 << 20) - 1)]),
            thread_overhead_rss: (1 << 20) - 1,
            ..free
        };
        assert!(arena_lines(&small, 0).is_empty());
        // Arenas whose threads freed everything: no free chunks to name.
        let emptied = ArenaFree {
            main: ChunkGaps::default(),
            threads: ChunkGaps::empty(1 << 20),
            ..free
        };
        assert_eq!(
            arena_lines(&emptied, 500_000_000),
            [
                "4 thread arenas hold 2.00 MiB that no live block accounts for at 1.00 s: glibc \
              gives threads arenas of their own, up to 8 per core, and reuses free memory only \
              within its arena; MALLOC_ARENA_MAX caps how many there are (1: every thread \
              shares the main arena)"
            ]
        );
        // One arena: "holds".
        let one = ArenaFree {
            thread_arenas: 1,
            ..emptied
        };
        assert!(arena_lines(&one, 0)[0].starts_with("1 thread arena holds 2.00 MiB "));
        assert_eq!(power_of_two(1 << 30), "1 GiB");
        assert_eq!(power_of_two(32), "32 bytes");
    }
}
