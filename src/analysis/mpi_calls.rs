//! MPI calls of one process image, from its `MpiCall` records and the heap replay: per MPI
//! function the calls, the time inside, the blocks allocated inside a call (by any of the
//! calling thread's allocator calls between its entry and its return) and those still live
//! after `MPI_Finalize` returned (or at the image's end), and the change of the image's live
//! requested bytes across the calls. All of it exact. RSS and PSS around MPI_Init,
//! MPI_Init_thread and MPI_Finalize come from the smaps snapshots taken at their entry and
//! return stops; around other functions RSS comes from the nearest `/proc/PID/status`
//! samples, so it is only as close as the sampling interval.

use std::collections::HashMap;

use crate::analysis::components::SnapshotSummary;
use crate::events::heap::Outcome;
use crate::platform::mpi::FINALIZE;
use crate::trace::format::SnapshotReason;

/// What one MPI function did in one process image.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct MpiFunctionStats {
    /// `MPI_Init` (the `MPI_` name also for calls of the `PMPI_` one).
    pub function: String,
    /// Outermost calls (an MPI function called inside another counts as part of it).
    pub calls: u64,
    /// Sum of the time from entry to return.
    pub time_ns: u64,
    /// Blocks allocated by the calling thread inside the calls, and their requested bytes.
    pub allocations: u64,
    pub allocated_bytes: u64,
    /// Of those, still live once `MPI_Finalize` returned (at the image's end without it).
    pub live_blocks_at_finalize: u64,
    pub live_bytes_at_finalize: u64,
    /// Sum over the calls of the image's live requested bytes after the return minus before
    /// the entry (every thread's blocks), and the largest and smallest change of one call.
    pub delta_bytes: i64,
    pub largest_delta_bytes: i64,
    pub smallest_delta_bytes: i64,
    /// RSS before the first call's entry and after the last call's return: of the smaps
    /// snapshots taken at those stops when `residency_at_stops`, else VmRSS of the last
    /// status sample before and of the first after (None without such a sample).
    pub rss_before_bytes: Option<u64>,
    pub rss_after_bytes: Option<u64>,
    /// PSS at the same stops; snapshotted functions only.
    pub pss_before_bytes: Option<u64>,
    pub pss_after_bytes: Option<u64>,
    /// RSS and PSS before and after were read while the calling thread waited at the first
    /// entry and the last return (MPI_Init, MPI_Init_thread, MPI_Finalize).
    pub residency_at_stops: bool,
}

/// A thread's MPI call in progress.
#[derive(Debug, Clone, Copy)]
struct OpenCall {
    function: u32,
    entry_ns: u64,
    live_bytes_before: u64,
}

/// The replay's MPI state of one open image.
#[derive(Debug, Default)]
pub(super) struct MpiTracker {
    stats: HashMap<u32, MpiFunctionStats>,
    /// Order of first calls, for the report.
    first_called: Vec<u32>,
    open: HashMap<u32, OpenCall>,
    /// Live blocks allocated inside an MPI call, by address: (function, requested bytes).
    blocks: HashMap<u64, (u32, u64)>,
    /// Taken when `MPI_Finalize` returns.
    at_finalize: Option<HashMap<u32, (u64, u64)>>,
    last_rss: Option<u64>,
    /// Functions whose last return has not been followed by a status sample yet.
    waiting_rss: Vec<u32>,
}

impl MpiTracker {
    /// Thread `tid` entered `function` (named `name`) at `time_ns`, with `live_bytes`
    /// requested bytes live in the image.
    /// A call still open on the thread returned unseen (a record dropped with
    /// `--ring-full drop`): it is left out, not counted with the next call's return.
    pub fn enter(&mut self, tid: u32, function: u32, name: &str, time_ns: u64, live_bytes: u64) {
        self.stats_of(function, name);
        let call = OpenCall {
            function,
            entry_ns: time_ns,
            live_bytes_before: live_bytes,
        };
        self.open.insert(tid, call);
    }

    /// Thread `tid` left its MPI call. A return without an entry (a fork child returning
    /// from its parent's call) is not counted.
    pub fn leave(&mut self, tid: u32, time_ns: u64, live_bytes: u64) {
        let Some(call) = self.open.remove(&tid) else {
            return;
        };
        let stats = self.stats.get_mut(&call.function).expect("entered");
        let delta = live_bytes as i64 - call.live_bytes_before as i64;
        if stats.calls == 0 {
            stats.largest_delta_bytes = delta;
            stats.smallest_delta_bytes = delta;
        }
        stats.calls += 1;
        stats.time_ns += time_ns.saturating_sub(call.entry_ns);
        stats.delta_bytes += delta;
        stats.largest_delta_bytes = stats.largest_delta_bytes.max(delta);
        stats.smallest_delta_bytes = stats.smallest_delta_bytes.min(delta);
        self.returned(call.function);
    }

    /// Thread `tid` made `calls` calls of `function` in which nothing happened (the image's
    /// live bytes unchanged across each), `inside_ns` in all. Ignored inside an open call,
    /// of which they are part.
    pub fn add_calls(&mut self, tid: u32, function: u32, name: &str, calls: u64, inside_ns: u64) {
        if calls == 0 || self.open.contains_key(&tid) {
            return;
        }
        let stats = self.stats_of(function, name);
        stats.calls += calls;
        stats.time_ns += inside_ns;
        stats.largest_delta_bytes = stats.largest_delta_bytes.max(0);
        stats.smallest_delta_bytes = stats.smallest_delta_bytes.min(0);
        self.returned(function);
    }

    /// The statistics of `function`, named `name`, created at its first call.
    fn stats_of(&mut self, function: u32, name: &str) -> &mut MpiFunctionStats {
        let stats = self.stats.entry(function).or_insert_with(|| {
            self.first_called.push(function);
            MpiFunctionStats {
                function: name.to_string(),
                rss_before_bytes: self.last_rss,
                ..MpiFunctionStats::default()
            }
        });
        stats.function = name.to_string();
        stats
    }

    /// A call of `function` returned: the next status sample is RSS after it, and the image's
    /// live blocks once the first `MPI_Finalize` returned are those still live at it.
    fn returned(&mut self, function: u32) {
        if !self.waiting_rss.contains(&function) {
            self.waiting_rss.push(function);
        }
        let finalized = self
            .stats
            .get(&function)
            .is_some_and(|s| s.function == FINALIZE);
        if finalized && self.at_finalize.is_none() {
            self.at_finalize = Some(self.live_by_function());
        }
    }

    /// An allocator call of thread `tid` did `outcome`: a block it created inside an MPI
    /// call is that call's function's; a block released is no longer anyone's.
    pub fn heap(&mut self, tid: u32, outcome: &Outcome) {
        for block in [outcome.released, outcome.replaced].into_iter().flatten() {
            self.blocks.remove(&block.address);
        }
        let (Some(created), Some(call)) = (outcome.created, self.open.get(&tid)) else {
            return;
        };
        let stats = self.stats.get_mut(&call.function).expect("entered");
        stats.allocations += 1;
        stats.allocated_bytes += created.size;
        self.blocks
            .insert(created.address, (call.function, created.size));
    }

    /// A status sample's VmRSS at its time (samples come in time order with the records).
    pub fn rss(&mut self, rss: u64) {
        self.last_rss = Some(rss);
        for function in self.waiting_rss.drain(..) {
            if let Some(stats) = self.stats.get_mut(&function) {
                stats.rss_after_bytes = Some(rss);
            }
        }
    }

    /// The image ended at `time_ns`: calls still open end there, and what was never
    /// released after `MPI_Finalize` (or now) is counted.
    pub fn finish(mut self, time_ns: u64, live_bytes: u64) -> Vec<MpiFunctionStats> {
        let mut threads: Vec<u32> = self.open.keys().copied().collect();
        threads.sort_unstable();
        for tid in threads {
            self.leave(tid, time_ns, live_bytes);
        }
        let live = match self.at_finalize.take() {
            Some(live) => live,
            None => self.live_by_function(),
        };
        self.first_called
            .iter()
            .filter_map(|function| {
                let mut stats = self.stats.remove(function)?;
                let (blocks, bytes) = live.get(function).copied().unwrap_or_default();
                stats.live_blocks_at_finalize = blocks;
                stats.live_bytes_at_finalize = bytes;
                Some(stats)
            })
            .collect()
    }

    fn live_by_function(&self) -> HashMap<u32, (u64, u64)> {
        let mut live: HashMap<u32, (u64, u64)> = HashMap::new();
        for &(function, size) in self.blocks.values() {
            let entry = live.entry(function).or_default();
            entry.0 += 1;
            entry.1 += size;
        }
        live
    }
}

/// Replaces the sampled RSS around the snapshotted functions by the snapshots taken at
/// their first entry and last return (in time order), with their PSS. `names` numbers the
/// recording's MPI functions.
pub fn residency_at_stops(
    functions: &mut [MpiFunctionStats],
    snapshots: &[SnapshotSummary],
    names: &HashMap<u32, String>,
) {
    for snapshot in snapshots {
        let (function, entry) = match snapshot.reason {
            SnapshotReason::MpiEntry { function } => (function, true),
            SnapshotReason::MpiReturn { function } => (function, false),
            _ => continue,
        };
        let Some(name) = names.get(&function) else {
            continue;
        };
        let Some(stats) = functions.iter_mut().find(|stats| &stats.function == name) else {
            continue;
        };
        if !stats.residency_at_stops {
            stats.residency_at_stops = true;
            stats.rss_before_bytes = None;
            stats.rss_after_bytes = None;
        }
        if entry && stats.pss_before_bytes.is_none() {
            stats.rss_before_bytes = Some(snapshot.rss);
            stats.pss_before_bytes = Some(snapshot.pss);
        } else if !entry {
            stats.rss_after_bytes = Some(snapshot.rss);
            stats.pss_after_bytes = Some(snapshot.pss);
        }
    }
}

#[cfg(test)]
#[path = "mpi_calls_tests.rs"]
mod tests;
