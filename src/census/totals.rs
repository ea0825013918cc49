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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::census_format::ArenaCensus;

    #[test]
    fn mallinfo_counts_each_top_as_a_free_block_and_the_rest_of_system_as_used() {
        let arena = |main, system, top, fast: (u64, u64), free: (u64, u64)| ArenaCensus {
            main,
            system,
            top,
            fastbins: Blocks {
                count: fast.0,
                bytes: fast.1,
            },
            free: Blocks {
                count: free.0,
                bytes: free.1,
            },
            ..ArenaCensus::default()
        };
        let tally = Tally {
            arenas: vec![
                arena(true, 135_168, 1000, (3, 144), (2, 6016)),
                arena(false, 135_168, 5000, (0, 0), (1, 64)),
            ],
            ..Tally::default()
        };
        let mmapped = Blocks {
            count: 3,
            bytes: 602_112,
        };
        let info = mallinfo(&tally, mmapped);
        assert_eq!(
            info,
            Mallinfo {
                arena: 270_336,
                ordblks: 5,
                smblks: 3,
                hblks: 3,
                hblkhd: 602_112,
                fsmblks: 144,
                uordblks: 270_336 - (1000 + 144 + 6016) - (5000 + 64),
                fordblks: 1000 + 144 + 6016 + 5000 + 64,
                keepcost: 1000,
            }
        );
    }
}
