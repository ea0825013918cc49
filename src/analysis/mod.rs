//! Replays a profile's records into per-process statistics. Renderers only see `Analysis`.

pub mod components;
pub mod diff;
mod frames;
mod heap;
pub mod heap_stream;
#[cfg(test)]
mod heap_stream_tests;
pub mod job;
pub mod live_end;
pub mod load;
mod local_peak;
mod mapped_peak;
mod mappings;
pub mod mmap_threshold;
pub mod moments;
pub mod mpi_calls;
mod replay;
mod residency;
pub mod roles;
mod site_metrics;
#[cfg(test)]
pub(crate) mod site_tests;
mod sites;
pub mod size_histogram;
pub mod skip;
pub mod source_location;
pub mod suppress;
mod temporary;
#[cfg(test)]
pub(crate) mod tests;
pub mod threads;
pub mod unknown_frees;

pub use components::{ComponentRule, ComponentRules};
pub use frames::{Frame, TRUNCATED_NAME};
pub use site_metrics::SiteMetrics;
pub use skip::SkipFrames;
pub use threads::{ProcessSnapshot, SnapshotThread, ThreadGroup};

use std::collections::BTreeMap;
use std::path::Path;

pub use residency::ResidencySummary;

use crate::trace::format::{
    AllocFunction, Engine, Header, HookCallCosts, HookCounters, HookStackCosts, MapCall,
    ProbeCounters, ProbeSite, ProcessRole, Record, RecordMode, RecorderCosts, SamplerCosts,
    StartCause, UnwindCosts,
};
use crate::trace::reader::Profile;

/// Every mapping call, in report order (`format.rs` has no list of them).
pub const MAP_CALLS: [MapCall; 6] = [
    MapCall::Mmap,
    MapCall::Munmap,
    MapCall::Mremap,
    MapCall::Brk,
    MapCall::Shmat,
    MapCall::Shmdt,
];

/// Everything the reports show.
#[derive(Debug, Clone)]
pub struct Analysis {
    pub profile: ProfileInfo,
    /// One entry per process image, in the order they started (an exec starts a new one).
    pub processes: Vec<ProcessAnalysis>,
}

#[cfg(test)]
impl Analysis {
    /// The analysis of a run recorded at `path` holding `processes`, its header empty.
    pub(crate) fn of_run(path: &str, processes: Vec<ProcessAnalysis>) -> Analysis {
        let profile = ProfileInfo {
            path: path.to_string(),
            truncated: false,
            damage: Vec::new(),
            mode: RecordMode::Run,
            target: Vec::new(),
            memsup_version: String::new(),
            host: String::new(),
            start_unix_ns: 0,
            options: Vec::new(),
            unwind_costs: None,
            sampler_costs: None,
            recorder_costs: None,
        };
        Analysis { profile, processes }
    }
}

/// What the profile says about the recording as a whole.
#[derive(Debug, Clone)]
pub struct ProfileInfo {
    /// The profile file, as the user named it.
    pub path: String,
    /// The file ended inside a block or without its end record.
    pub truncated: bool,
    /// What the reader found wrong in the file, one line each.
    pub damage: Vec<String>,
    pub mode: RecordMode,
    /// The command memsup ran, or the PIDs it attached to.
    pub target: Vec<String>,
    pub memsup_version: String,
    pub host: String,
    /// Wall clock of time 0 (ns since the Unix epoch).
    pub start_unix_ns: u64,
    pub options: Vec<String>,
    /// What unwinding and symbolising cost (absent in a profile cut short).
    pub unwind_costs: Option<UnwindCosts>,
    /// What the residency sampler cost (absent in a profile cut short).
    pub sampler_costs: Option<SamplerCosts>,
    /// What memsup itself used (absent in a profile cut short or written before it was).
    pub recorder_costs: Option<RecorderCosts>,
}

/// How a process image's recording ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageExit {
    /// exit(code)
    Code(i32),
    /// Killed by this signal.
    Signal(i32),
    /// Replaced by an exec; the next image of the same PID carries on.
    Exec,
    /// memsup detached and the process ran on.
    Detached,
    /// The recording ended without seeing the end.
    Unknown,
}

/// Statistics of one process image: a PID between its start (or exec) and its exit (or next exec).
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessAnalysis {
    pub pid: u32,
    pub parent_pid: Option<u32>,
    pub cause: StartCause,
    pub exe: String,
    pub argv: Vec<String>,
    pub exit: ImageExit,
    /// Relative to the start of the recording.
    pub start_ns: u64,
    pub duration_ns: u64,
    /// Every probed function, zero included.
    pub calls: BTreeMap<AllocFunction, u64>,
    /// Blocks created (malloc, calloc, realloc's new block, memalign ...).
    pub allocations: u64,
    /// Sum of their requested sizes.
    pub bytes_allocated: u64,
    /// Blocks released (free of a known block, realloc's old block).
    pub frees: u64,
    pub null_frees: u64,
    /// Frees of pointers never seen allocated (allocated before attach, or inherited).
    pub unknown_frees: u64,
    /// memsup joined an address space that was running already (attached to it, or to the
    /// process it was forked from): blocks from before then are unknown.
    pub joined_running: bool,
    /// Every block live in the image was seen allocated: it was launched, or an exec began
    /// it (a fork child's inherited blocks, and an attached process's, were not).
    pub every_block_seen: bool,
    /// Where those unknown frees come from (`unknown_frees`).
    pub unknown_free_sources: unknown_frees::UnknownFrees,
    /// What leak suppressions took out of the live blocks at the end (`suppress`).
    pub suppressed: suppress::Suppressed,
    /// Its allocations by power-of-two size class.
    pub size_histogram: size_histogram::SizeHistogram,
    /// The allocator returned NULL for a non-zero request.
    pub failed_allocations: u64,
    /// Highest sum of live requested bytes.
    pub peak_live_bytes: u64,
    pub peak_live_blocks: u64,
    /// When the peak was first reached, relative to `start_ns`.
    pub peak_time_ns: u64,
    pub live_bytes_at_exit: u64,
    pub live_blocks_at_exit: u64,
    pub largest_allocation: u64,
    pub mappings: MappingStats,
    /// What watching this image cost.
    pub probes: ProbeCounters,
    /// What recorded its allocator calls, each probe site's implementation, and what the
    /// hook rings counted.
    pub engine: Engine,
    pub probe_sites: Vec<ProbeSite>,
    pub hooks: HookCounters,
    /// What the hooks' stack walks cost (hook engine, full stacks).
    pub hook_stacks: Option<HookStackCosts>,
    /// What the hooks' calls cost (hook engine).
    pub hook_calls: Option<HookCallCosts>,
    /// Every heap call site, by bytes live at the peak, then bytes allocated.
    pub sites: Vec<Site>,
    /// glibc's mmap threshold rose and later blocks came from the arena because of it: a
    /// reason freed memory stays resident (`mmap_threshold`).
    pub mmap_threshold: Option<mmap_threshold::MmapThresholdRise>,
    /// Free memory inside glibc's arenas where it was most: more reasons memory stays
    /// resident (`components::arena_free`). None for an attached image.
    pub arena_free: Option<components::ArenaFree>,
    /// glibc's heap as `attach` found it, before memsup joined (a snapshot's is in
    /// `snapshot`).
    pub census_at_attach: Option<crate::trace::census_format::HeapCensus>,
    /// The same merged by source location (`source_location`): sites whose kept frames name
    /// one (function, file, line) chain are one, their numbers added and their local peak
    /// that of their blocks together; what people read (text, HTML, folded, pprof, diff),
    /// where `sites` keeps the detail per address (JSON).
    pub source_sites: Vec<Site>,
    /// Every mapping call site, by bytes mapped (mmap and break growth).
    pub mapping_sites: Vec<MappingSite>,
    /// The files the image mapped as modules, in the order recorded (a fork inherits its
    /// parent's); what pprof's mappings are made of.
    pub modules: Vec<ModuleSpan>,
    pub warnings: Vec<String>,
    /// What the residency samples taken during the image saw.
    pub residency: ResidencySummary,
    /// Who held the memory, over time.
    pub components: components::Components,
    /// Where its threads were, in a profile of `memsup snapshot`.
    pub snapshot: Option<ProcessSnapshot>,
    /// Its part in an MPI job, from the image's `ProcessRole` records (`roles::merge_role`).
    pub role: Option<ProcessRole>,
    /// Its MPI functions, in the order of their first calls (`mpi_calls`).
    pub mpi_calls: Vec<mpi_calls::MpiFunctionStats>,
    /// What was live at the peak, the RSS peak and evenly spaced times (`moments`).
    pub moments: Vec<moments::Moment>,
}

/// Mapping system calls of one process image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MappingStats {
    /// Every recorded call, zero included.
    pub calls: BTreeMap<MapCall, u64>,
    /// Sum of lengths of successful mmap calls.
    pub mmap_bytes: u64,
    pub munmap_bytes: u64,
    /// Sum of upward break movements.
    pub brk_growth_bytes: u64,
    /// Anonymous mapped bytes live at the image's peak of them (`mapped_peak`): of the image,
    /// that peak; of a mapping site, its share.
    pub peak_bytes: u64,
}

/// A call stack of the allocator, less its allocator frames, and what its blocks did.
#[derive(Debug, Clone, PartialEq)]
pub struct Site {
    /// Innermost first: the function that called the allocator, then its callers.
    pub stack: Vec<Frame>,
    pub metrics: SiteMetrics,
}

/// A module of a process image and the runtime addresses its mappings cover.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModuleSpan {
    pub path: String,
    /// Lowest and highest runtime addresses of its mappings.
    pub start: u64,
    pub end: u64,
}

/// A call stack of mapping system calls, less the C library's frames, and its calls.
#[derive(Debug, Clone, PartialEq)]
pub struct MappingSite {
    /// Innermost first.
    pub stack: Vec<Frame>,
    pub mappings: MappingStats,
}

impl ProcessAnalysis {
    /// The highest RSS, PSS and swap seen, by the status samples or by an smaps snapshot
    /// (not an estimate: its unchanged mappings are as an earlier snapshot had them).
    pub fn peak_resident(&self) -> (u64, u64, u64) {
        let residency = &self.residency;
        let highest = |sampled: u64, of_snapshot: fn(&components::SnapshotSummary) -> u64| {
            (self.components.snapshots.iter())
                .filter(|snapshot| snapshot.pagemap_mappings.is_none())
                .map(of_snapshot)
                .fold(sampled, u64::max)
        };
        (
            highest(residency.peak_rss_bytes, |snapshot| snapshot.rss),
            highest(residency.peak_pss_bytes, |snapshot| snapshot.pss),
            highest(residency.peak_swap_bytes, |snapshot| snapshot.swap),
        )
    }

    /// An image with nothing counted yet.
    pub fn new(pid: u32, parent_pid: Option<u32>, cause: StartCause, start_ns: u64) -> Self {
        ProcessAnalysis {
            pid,
            parent_pid,
            cause,
            exe: String::new(),
            argv: Vec::new(),
            exit: ImageExit::Unknown,
            start_ns,
            duration_ns: 0,
            calls: AllocFunction::ALL
                .iter()
                .map(|&function| (function, 0))
                .collect(),
            allocations: 0,
            bytes_allocated: 0,
            frees: 0,
            null_frees: 0,
            unknown_frees: 0,
            joined_running: cause == StartCause::Attach,
            every_block_seen: cause == StartCause::Launch,
            unknown_free_sources: unknown_frees::UnknownFrees::default(),
            suppressed: suppress::Suppressed::default(),
            size_histogram: size_histogram::SizeHistogram::default(),
            failed_allocations: 0,
            peak_live_bytes: 0,
            peak_live_blocks: 0,
            peak_time_ns: 0,
            live_bytes_at_exit: 0,
            live_blocks_at_exit: 0,
            largest_allocation: 0,
            mappings: MappingStats::default(),
            probes: ProbeCounters::default(),
            engine: Engine::Int3,
            probe_sites: Vec::new(),
            hooks: HookCounters::default(),
            hook_stacks: None,
            hook_calls: None,
            sites: Vec::new(),
            source_sites: Vec::new(),
            mmap_threshold: None,
            arena_free: None,
            census_at_attach: None,
            mapping_sites: Vec::new(),
            modules: Vec::new(),
            warnings: Vec::new(),
            residency: ResidencySummary::default(),
            components: components::Components::default(),
            snapshot: None,
            role: None,
            mpi_calls: Vec::new(),
            moments: Vec::new(),
        }
    }

    /// How many times `function` was called.
    pub fn call_count(&self, function: AllocFunction) -> u64 {
        self.calls.get(&function).copied().unwrap_or(0)
    }
}

impl ImageExit {
    /// The JSON `exit.kind`.
    pub fn kind(self) -> &'static str {
        match self {
            ImageExit::Code(_) => "code",
            ImageExit::Signal(_) => "signal",
            ImageExit::Exec => "exec",
            ImageExit::Detached => "detached",
            ImageExit::Unknown => "unknown",
        }
    }

    /// The exit code or signal number; None for the other kinds.
    pub fn value(self) -> Option<i32> {
        match self {
            ImageExit::Code(value) | ImageExit::Signal(value) => Some(value),
            ImageExit::Exec | ImageExit::Detached | ImageExit::Unknown => None,
        }
    }
}

/// "launch", "fork", "vfork" or "attach", as reports spell it.
pub fn cause_name(cause: StartCause) -> &'static str {
    match cause {
        StartCause::Launch => "launch",
        StartCause::Fork => "fork",
        StartCause::Vfork => "vfork",
        StartCause::Attach => "attach",
    }
}

/// "run", "attach" or "snapshot", as reports spell it.
pub fn mode_name(mode: RecordMode) -> &'static str {
    match mode {
        RecordMode::Run => "run",
        RecordMode::Attach => "attach",
        RecordMode::Snapshot => "snapshot",
    }
}

impl Default for MappingStats {
    fn default() -> Self {
        MappingStats {
            calls: MAP_CALLS.iter().map(|&call| (call, 0)).collect(),
            mmap_bytes: 0,
            munmap_bytes: 0,
            brk_growth_bytes: 0,
            peak_bytes: 0,
        }
    }
}

/// Replays the records of `profile`, read from `path`, with the default skip lists.
pub fn analyze(profile: &Profile, path: &Path) -> Analysis {
    analyze_with(profile, path, &SkipFrames::default())
}

/// Replays the records of `profile`, read from `path`; call sites drop the frames `skip` names.
pub fn analyze_with(profile: &Profile, path: &Path, skip: &SkipFrames) -> Analysis {
    let settings = Settings {
        skip: skip.clone(),
        components: ComponentRules::default(),
    };
    analyze_configured(profile, path, &settings)
}

/// How a profile is analysed.
#[derive(Debug, Clone, Default)]
pub struct Settings {
    /// Frames dropped from the innermost end of call stacks (also before classifying them).
    pub skip: SkipFrames,
    /// User rules naming components, tried before the built-in ones.
    pub components: ComponentRules,
}

/// Where a profile's residency samples (status, rollup, smaps snapshots) lie among its other
/// records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SampleOrder {
    /// Written apart from the tracer's records (format version 2): a sample may come before
    /// tracer records of earlier times, so it is held until a tracer record passes its time.
    Apart,
    /// In time order with each process's other records (format version 3): each sample is
    /// counted as it is read.
    InTimeOrder,
}

impl SampleOrder {
    /// How a profile of format `version` orders its samples.
    pub fn of_version(version: u32) -> Self {
        if version >= 3 {
            SampleOrder::InTimeOrder
        } else {
            SampleOrder::Apart
        }
    }
}

/// Replays the records of `profile`, read from `path`, with `settings`. The samples are held
/// until their time is reached, as version 2 needs; version 3 gives the same analysis so.
pub fn analyze_configured(profile: &Profile, path: &Path, settings: &Settings) -> Analysis {
    let records = profile.records.iter().cloned();
    let header = &profile.header;
    let mut analysis = analyze_records(header, records, SampleOrder::Apart, path, settings);
    analysis.profile.truncated = profile.truncated;
    analysis.profile.damage = profile.damage.clone();
    analysis
}

/// Replays `records`, in file order, of the profile at `path` with `header`, its samples
/// placed as `order` says. Memory grows with the live state (blocks, stacks, sites, images),
/// not with the number of records. `profile.truncated` says whether the records ended
/// without an `End` record; a reader that saw a block cut short marks it too.
pub fn analyze_records(
    header: &Header,
    records: impl IntoIterator<Item = Record>,
    order: SampleOrder,
    path: &Path,
    settings: &Settings,
) -> Analysis {
    let mut replay = replay::Replay::new(header.mode, order);
    let mut unwind_costs = None;
    let mut sampler_costs = None;
    let mut recorder_costs = None;
    let mut ended = false;
    for record in records {
        match record {
            Record::UnwindCosts(costs) => unwind_costs = Some(costs),
            Record::SamplerCosts(costs) => sampler_costs = Some(costs),
            Record::RecorderCosts(costs) => recorder_costs = Some(costs),
            _ => {}
        }
        ended = matches!(record, Record::End { .. });
        replay.apply(record);
    }
    Analysis {
        profile: ProfileInfo {
            path: path.display().to_string(),
            truncated: !ended,
            damage: Vec::new(),
            mode: header.mode,
            target: header.target.clone(),
            memsup_version: header.memsup_version.clone(),
            host: header.host.clone(),
            start_unix_ns: header.start_unix_ns,
            options: header.options.clone(),
            unwind_costs,
            sampler_costs,
            recorder_costs,
        },
        processes: replay.finish(settings),
    }
}
