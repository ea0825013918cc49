//! A snapshot's glibc heap census in the text report: the classes of chunks, each arena,
//! the size classes, glibc's own mallinfo2 totals and what of the arenas' RSS is free.

use std::io::Write;

use super::components::short_bytes;
use crate::report::json_census::symbol_source_name;
use crate::trace::census_format::{Blocks, CensusTotals, HeapCensus};

pub fn render_census(census: &HeapCensus, out: &mut dyn Write) -> std::io::Result<()> {
    let totals = match census {
        HeapCensus::Untrusted { reason } => {
            return writeln!(out, "\n  Heap: not read: {reason}");
        }
        HeapCensus::Walked(totals) => totals,
    };
    let arenas = totals.arenas.len();
    writeln!(
        out,
        "\n  Heap (glibc, {arenas} arena{}, symbols from the {}):",
        if arenas == 1 { "" } else { "s" },
        symbol_source_name(totals.symbols)
    )?;
    let sum = |pick: fn(&crate::trace::census_format::ArenaCensus) -> Blocks| {
        let mut all = Blocks::default();
        totals
            .arenas
            .iter()
            .for_each(|arena| all.merge(pick(arena)));
        all
    };
    let top: u64 = totals.arenas.iter().map(|arena| arena.top).sum();
    let structs = sum(|arena| arena.tcache_structs);
    let rows = [
        ("in use", sum(|arena| arena.in_use), String::new()),
        (
            "tcache",
            sum(|arena| arena.tcache),
            format!(" (+{} thread cache structs)", structs.count),
        ),
        ("fastbins", sum(|arena| arena.fastbins), String::new()),
        ("free in bins", sum(|arena| arena.free), String::new()),
        ("mmapped", totals.mmapped, String::new()),
    ];
    for (label, blocks, note) in rows {
        writeln!(out, "    {label:<13}{}{note}", counted(blocks))?;
    }
    writeln!(out, "    {:<13}{:>14} {}", "top", "", short_bytes(top))?;
    render_arenas(totals, out)?;
    render_size_classes(totals, out)?;
    let info = &totals.mallinfo;
    writeln!(
        out,
        "    mallinfo2: arena {} uordblks {} fordblks {} ordblks {} smblks {} fsmblks {} \
         hblks {} hblkhd {} keepcost {}",
        info.arena,
        info.uordblks,
        info.fordblks,
        info.ordblks,
        info.smblks,
        info.fsmblks,
        info.hblks,
        info.hblkhd,
        info.keepcost
    )?;
    let resident = &totals.residency;
    writeln!(
        out,
        "    of {} resident in arenas, {} are free chunks glibc holds ({} in use, {} in caches, \
         {} top); malloc_trim would return about {}",
        short_bytes(resident.resident),
        short_bytes(resident.free),
        short_bytes(resident.in_use),
        short_bytes(resident.cache),
        short_bytes(resident.top),
        short_bytes(resident.trimmable)
    )?;
    for doubt in &totals.doubts {
        writeln!(out, "    doubt: {doubt}")?;
    }
    Ok(())
}

/// "   12 blocks   1.50 KiB".
fn counted(blocks: Blocks) -> String {
    format!("{:>7} blocks {}", blocks.count, short_bytes(blocks.bytes))
}

fn render_arenas(totals: &CensusTotals, out: &mut dyn Write) -> std::io::Result<()> {
    for arena in &totals.arenas {
        let name = if arena.main { " (main)" } else { "" };
        writeln!(
            out,
            "    arena {:#x}{name}: {} heap{}, system {}, in use {}, free {}, top {}",
            arena.address,
            arena.heaps,
            if arena.heaps == 1 { "" } else { "s" },
            short_bytes(arena.system),
            short_bytes(arena.in_use.bytes),
            short_bytes(arena.free.bytes),
            short_bytes(arena.top)
        )?;
    }
    Ok(())
}

fn render_size_classes(totals: &CensusTotals, out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(out, "    chunk size      in use     cached       free")?;
    for class in &totals.histogram {
        writeln!(
            out,
            "    <= {:<10} {:>9} {:>10} {:>10}",
            class.up_to, class.in_use.count, class.cached.count, class.free.count
        )?;
    }
    Ok(())
}
