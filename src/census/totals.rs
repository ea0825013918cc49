//! The census summed up, with glibc's own totals: `mallinfo2()` sums each arena's top,
//! fastbins and bins as free (`fordblks`, `ordblks` counting each top as one block), the
//! rest of its system bytes as in use (`uordblks`: thread caches and headers included),
//! and takes the mmapped chunks from `mp_`.

use super::tally::Tally;
use crate::trace::census_format::{Blocks, CensusTotals, Mallinfo, SymbolSource};

pub fn totals(
    symbols: SymbolSource,
    tally: Tally,
    cache_doubts: Vec<String>,
    mmapped: Blocks,
    parameters_mmaps: Option<(u64, u64)>,
) -> CensusTotals {
    let mut doubts = cache_doubts;
    doubts.extend(tally.doubts.iter().cloned());
    if let Some((count, bytes)) = parameters_mmaps {
        if (count, bytes) != (mmapped.count, mmapped.bytes) {
            doubts.push(format!(
                "mp_ counts {count} mmapped chunks of {bytes} bytes, the scan found {} of {}",
                mmapped.count, mmapped.bytes
            ));
        }
    }
    CensusTotals {
        symbols,
        mallinfo: mallinfo(&tally, mmapped),
        arenas: tally.arenas,
        mmapped,
        histogram: tally.histogram.into_values().collect(),
        residency: tally.residency,
        doubts,
    }
}

fn mallinfo(tally: &Tally, mmapped: Blocks) -> Mallinfo {
    let mut info = Mallinfo {
        hblks: mmapped.count,
        hblkhd: mmapped.bytes,
        ..Mallinfo::default()
    };
    for arena in &tally.arenas {
        let free = arena.top + arena.fastbins.bytes + arena.free.bytes;
        info.arena += arena.system;
        info.ordblks += 1 + arena.free.count;
        info.smblks += arena.fastbins.count;
        info.fsmblks += arena.fastbins.bytes;
        info.fordblks += free;
        info.uordblks += arena.system.saturating_sub(free);
        if arena.main {
            info.keepcost = arena.top;
        }
    }
    info
}
