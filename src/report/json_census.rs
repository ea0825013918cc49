//! A snapshot's glibc heap census in the JSON report (`heap_census`, docs/report-json.md).

use crate::trace::census_format::{
    ArenaCensus, Blocks, CensusResidency, CensusTotals, HeapCensus, Mallinfo, SizeClass,
    SymbolSource,
};

#[derive(serde::Serialize)]
pub(super) struct CensusJson<'a> {
    /// False when the heap could not be read; `reason` says why.
    walked: bool,
    reason: Option<&'a str>,
    symbols: Option<&'static str>,
    totals: Option<TotalsJson>,
    arenas: &'a [ArenaCensus],
    histogram: &'a [SizeClass],
    mallinfo2: Option<&'a Mallinfo>,
    residency: Option<&'a CensusResidency>,
    doubts: &'a [String],
}

/// Every arena summed, with the mmapped chunks.
#[derive(serde::Serialize, Default)]
struct TotalsJson {
    system: u64,
    in_use: Blocks,
    tcache: Blocks,
    tcache_structs: Blocks,
    fastbins: Blocks,
    free: Blocks,
    top: u64,
    mmapped: Blocks,
}

impl<'a> CensusJson<'a> {
    pub(super) fn new(census: &'a HeapCensus) -> Self {
        match census {
            HeapCensus::Untrusted { reason } => CensusJson {
                walked: false,
                reason: Some(reason),
                symbols: None,
                totals: None,
                arenas: &[],
                histogram: &[],
                mallinfo2: None,
                residency: None,
                doubts: &[],
            },
            HeapCensus::Walked(totals) => CensusJson {
                walked: true,
                reason: None,
                symbols: Some(symbol_source_name(totals.symbols)),
                totals: Some(sum(totals)),
                arenas: &totals.arenas,
                histogram: &totals.histogram,
                mallinfo2: Some(&totals.mallinfo),
                residency: Some(&totals.residency),
                doubts: &totals.doubts,
            },
        }
    }
}

fn symbol_source_name(source: SymbolSource) -> &'static str {
    match source {
        SymbolSource::DebugFile => "debug file",
        SymbolSource::SymbolTable => "symbol table",
        SymbolSource::Heuristics => "heuristics",
    }
}

fn sum(totals: &CensusTotals) -> TotalsJson {
    let mut sum = TotalsJson {
        mmapped: totals.mmapped,
        ..TotalsJson::default()
    };
    for arena in &totals.arenas {
        sum.system += arena.system;
        sum.in_use.merge(arena.in_use);
        sum.tcache.merge(arena.tcache);
        sum.tcache_structs.merge(arena.tcache_structs);
        sum.fastbins.merge(arena.fastbins);
        sum.free.merge(arena.free);
        sum.top += arena.top;
    }
    sum
}
