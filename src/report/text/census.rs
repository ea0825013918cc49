//! A snapshot's glibc heap census in the text report: the classes of chunks, each arena,
//! the size classes, glibc's own mallinfo2 totals and what of the arenas' RSS is free.

use std::io::Write;

use super::components::short_bytes;
use crate::trace::census_format::{Blocks, CensusTotals, HeapCensus, SymbolSource};

pub fn render_census(census: &HeapCensus, out: &mut dyn Write) -> std::io::Result<()> {
    let totals = match census {
        HeapCensus::Untrusted { reason } => {
            return writeln!(out, "\n  Heap: not read: {reason}");
        }
        HeapCensus::Walked(totals) => totals,
    };
    let arenas = totals.arenas.len();
    let found = match totals.symbols {
        SymbolSource::DebugFile => "found through libc's debug file",
        SymbolSource::SymbolTable => "found through the program's symbols",
        SymbolSource::Heuristics => "found by their shape, without symbols",
    };
    writeln!(
        out,
        "\n  Heap (glibc, {arenas} arena{} {found}):",
        if arenas == 1 { "" } else { "s" },
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
            "    <= {:<9} {:>9} {:>10} {:>10}",
            class.up_to, class.in_use.count, class.cached.count, class.free.count
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::census_format::{ArenaCensus, CensusResidency, Mallinfo, SizeClass};

    fn blocks(count: u64, bytes: u64) -> Blocks {
        Blocks { count, bytes }
    }

    fn text(census: &HeapCensus) -> String {
        let mut out = Vec::new();
        render_census(census, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn a_census_shows_its_classes_arenas_size_classes_totals_and_residency() {
        let arena = ArenaCensus {
            address: 0x7f00_0000_0c60,
            main: true,
            heaps: 1,
            system: 135_168,
            in_use: blocks(17, 14_160),
            tcache: blocks(10, 960),
            tcache_structs: blocks(1, 656),
            fastbins: blocks(3, 144),
            free: blocks(2, 6016),
            top: 113_232,
            largest_free: 3008,
        };
        let census = HeapCensus::Walked(Box::new(CensusTotals {
            symbols: SymbolSource::Heuristics,
            arenas: vec![arena],
            mmapped: blocks(3, 602_112),
            histogram: vec![SizeClass {
                up_to: 4096,
                in_use: blocks(1, 4000),
                cached: blocks(0, 0),
                free: blocks(2, 6016),
            }],
            mallinfo: Mallinfo {
                arena: 135_168,
                ordblks: 3,
                smblks: 3,
                hblks: 3,
                hblkhd: 602_112,
                fsmblks: 144,
                uordblks: 15_776,
                fordblks: 119_392,
                keepcost: 113_232,
            },
            residency: CensusResidency {
                resident: 1 << 20,
                in_use: 700 << 10,
                free: 300 << 10,
                cache: 4 << 10,
                top: 20 << 10,
                trimmable: 256 << 10,
            },
            doubts: vec!["thread 7's tcache: bin 1 is shorter than its count 2".to_string()],
        }));
        assert_eq!(
            text(&census),
            "\n  Heap (glibc, 1 arena found by their shape, without symbols):\n\
             \x20   in use            17 blocks 13.83 KiB\n\
             \x20   tcache            10 blocks 960 bytes (+1 thread cache structs)\n\
             \x20   fastbins           3 blocks 144 bytes\n\
             \x20   free in bins       2 blocks 5.88 KiB\n\
             \x20   mmapped            3 blocks 588.00 KiB\n\
             \x20   top                         110.58 KiB\n\
             \x20   arena 0x7f0000000c60 (main): 1 heap, system 132.00 KiB, in use 13.83 KiB, \
             free 5.88 KiB, top 110.58 KiB\n\
             \x20   chunk size      in use     cached       free\n\
             \x20   <= 4096              1          0          2\n\
             \x20   mallinfo2: arena 135168 uordblks 15776 fordblks 119392 ordblks 3 smblks 3 \
             fsmblks 144 hblks 3 hblkhd 602112 keepcost 113232\n\
             \x20   of 1.00 MiB resident in arenas, 300.00 KiB are free chunks glibc holds \
             (700.00 KiB in use, 4.00 KiB in caches, 20.00 KiB top); malloc_trim would return \
             about 256.00 KiB\n\
             \x20   doubt: thread 7's tcache: bin 1 is shorter than its count 2\n"
        );
        let untrusted = HeapCensus::Untrusted {
            reason: "malloc is libjemalloc.so.2's, not glibc's".to_string(),
        };
        assert_eq!(
            text(&untrusted),
            "\n  Heap: not read: malloc is libjemalloc.so.2's, not glibc's\n"
        );
    }
}
