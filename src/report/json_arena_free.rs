//! JSON of the free memory inside glibc's arenas (`ArenaFree`).

use crate::analysis::components::{ArenaFree, ChunkGaps};

#[derive(serde::Serialize)]
pub(super) struct ArenaFreeJson {
    time_ns: u64,
    main: GapsJson,
    thread_arenas: u64,
    threads: GapsJson,
    thread_overhead_rss_bytes: u64,
}

#[derive(serde::Serialize)]
struct GapsJson {
    free_chunks: u64,
    free_bytes: u64,
    top_bytes: u64,
    /// [low, high) of the size class holding the most free bytes.
    main_class: Option<(u64, u64)>,
}

impl GapsJson {
    fn new(gaps: &ChunkGaps) -> Self {
        GapsJson {
            free_chunks: gaps.chunks,
            free_bytes: gaps.bytes,
            top_bytes: gaps.top,
            main_class: gaps.main_class(),
        }
    }
}

impl ArenaFreeJson {
    pub(super) fn new(free: &ArenaFree) -> Self {
        ArenaFreeJson {
            time_ns: free.time_ns,
            main: GapsJson::new(&free.main),
            thread_arenas: free.thread_arenas,
            threads: GapsJson::new(&free.threads),
            thread_overhead_rss_bytes: free.thread_overhead_rss,
        }
    }
}
