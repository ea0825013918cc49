//! The vocabulary every source speaks and the interpret stage reads: an `Event` is something a
//! source saw happen to a process, with a common envelope (when, which process, which thread)
//! and stacks as raw data. Sources (the ptrace tracer, the residency sampler, later a ring of
//! injected hooks or a snapshot) send events through one `EventSink`; only `interpret` turns
//! them into profile records. Nothing here knows which source made an event.

pub mod calls;
pub mod heap;
pub mod made;
pub mod mpi_nesting;
pub mod sink;
pub mod stack;
pub mod unmapped;
pub mod watched;

pub use sink::{monotonic_ns, CopiesInFlight, EventBatch, EventSink};
pub use stack::{CopyWindows, RawStack, StackCopy};
pub use watched::{RequestedHigh, Watched};

use crate::module::MappedInode;
use crate::trace::format::{
    AllocFunction, Engine, ExitKind, HookCallCosts, HookCounters, HookStackCosts, MapCall,
    MappingResidency, ProbeCounters, ProbeSite, ProcessRole, SamplerCosts, SnapshotReason,
    StartCause, ThreadActivity,
};

/// One thing a source saw. `time_ns` is a raw CLOCK_MONOTONIC reading, the clock code inside
/// a target can read too; the pipeline keeps the recording's origin. Process-wide events
/// carry the process id as `tid`; `End` carries 0 for both.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub time_ns: u64,
    pub pid: u32,
    pub tid: u32,
    pub kind: EventKind,
}

#[derive(Debug, Clone, PartialEq)]
pub enum EventKind {
    /// A process came under supervision.
    ProcessStart {
        parent_pid: Option<u32>,
        cause: StartCause,
    },
    /// The process now runs this program: a new image begins.
    Exec {
        exe: String,
        argv: Vec<String>,
    },
    ThreadStart,
    ThreadExit,
    /// Where the thread's stack is (its clone's stack pointer, or its rsp when joined).
    ThreadStack {
        address: u64,
    },
    /// A file mapped into the process image.
    Module {
        path: String,
        /// The file mapped: with the path, what finds it in the module store.
        inode: MappedInode,
        start: u64,
        end: u64,
        bias: u64,
    },
    /// memsup's scratch page in this process.
    ScratchPage {
        address: u64,
    },
    /// An allocation returned `address` (0 when it failed).
    Alloc {
        function: AllocFunction,
        address: u64,
        size: u64,
        stack: RawStack,
    },
    Free {
        address: u64,
    },
    Realloc {
        function: AllocFunction,
        old_address: u64,
        new_address: u64,
        size: u64,
        stack: RawStack,
    },
    /// A mapping system call and its result.
    Mapping {
        call: MapCall,
        args: [u64; 6],
        result: i64,
        stack: RawStack,
    },
    /// A probed call that never returned (longjmp, or the thread died in it).
    AbandonedCall {
        function: AllocFunction,
    },
    Warning {
        message: String,
    },
    /// What watching the current image cost, just before an exec replaces it.
    ImageCounters {
        counters: ProbeCounters,
    },
    ProcessExit {
        status: ExitKind,
        counters: ProbeCounters,
    },
    /// A stack a source names by `id` from now on in this process image (`RawStack::Known`).
    KnownStack {
        id: u64,
        frames: Vec<u64>,
    },
    /// /proc/PID/status memory counters (bytes).
    StatusSample(StatusCounters),
    /// /proc/PID/smaps_rollup (bytes).
    RollupSample(RollupCounters),
    /// Every mapping of /proc/PID/smaps with its residency.
    SmapsSnapshot {
        reason: SnapshotReason,
        cost_ns: u64,
        mappings: Vec<MappingResidency>,
    },
    SamplerCosts(SamplerCosts),
    /// What the hooks' stack walks cost (sent at the image's end, after `ProbeSites`).
    HookStacks(HookStackCosts),
    /// What the hooks' calls cost (sent at the image's end, after `ProbeSites`).
    HookCalls(HookCallCosts),
    /// How the image's allocator calls were recorded (sent at its end).
    ProbeSites {
        engine: Engine,
        sites: Vec<ProbeSite>,
        hooks: HookCounters,
    },
    /// A thread as a snapshot found it (see `Record::ThreadState`).
    ThreadState {
        activity: ThreadActivity,
        kernel_state: char,
        wchan: String,
        stack: RawStack,
    },
    /// How long a snapshot held the process stopped.
    SnapshotStop {
        stopped_ns: u64,
        threads: u32,
    },
    /// Who the process image is in an MPI job (see `Record::ProcessRole`).
    ProcessRole(ProcessRole),
    /// The name of MPI function number `function` (see `Record::MpiFunction`).
    MpiFunction {
        function: u32,
        name: String,
    },
    /// A thread entered or left an MPI call (see `Record::MpiCall`), with its stack pointer
    /// at the function's entry (both the hook's records carry it; 0 from the int3 engine,
    /// which sends outermost calls only).
    MpiCall {
        function: u32,
        entry: bool,
        stack_pointer: u64,
    },
    /// Outermost calls of an MPI function by this thread in which nothing happened (see
    /// `Record::MpiCalls`).
    MpiCalls {
        function: u32,
        calls: u64,
        inside_ns: u64,
    },
    /// The glibc heap census a snapshot took (see `Record::HeapCensus`).
    HeapCensus(crate::trace::census_format::HeapCensus),
    /// The blocks an attach's census found in use (see `Record::BlocksAtAttach`).
    BlocksAtAttach(crate::trace::census_format::LiveBlocks),
    /// The recording ends: nothing follows.
    End,
}

/// VmRSS and its parts RssAnon, RssFile, RssShmem, and VmSwap.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StatusCounters {
    pub rss: u64,
    pub anon: u64,
    pub file: u64,
    pub shmem: u64,
    pub swap: u64,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RollupCounters {
    pub rss: u64,
    pub pss: u64,
    pub pss_anon: u64,
    pub pss_file: u64,
    pub pss_shmem: u64,
    pub swap: u64,
    pub swap_pss: u64,
}

impl EventKind {
    /// The stack the event carries, if any.
    pub fn stack(&self) -> Option<&RawStack> {
        match self {
            EventKind::Alloc { stack, .. }
            | EventKind::Realloc { stack, .. }
            | EventKind::Mapping { stack, .. }
            | EventKind::ThreadState { stack, .. } => Some(stack),
            _ => None,
        }
    }

    /// A residency sample: meaningful only while its process is supervised.
    pub fn is_sample(&self) -> bool {
        matches!(
            self,
            EventKind::StatusSample(_)
                | EventKind::RollupSample(_)
                | EventKind::SmapsSnapshot { .. }
        )
    }
}

/// What a source may ask of the residency sampler without knowing it: snapshots at its next
/// round, or one taken now on the caller's thread (a process held at its exit stop).
pub trait Residency {
    /// A snapshot of `pid` at the sampler's next wake (at once: a request wakes it).
    fn request(&self, pid: i32, reason: SnapshotReason);
    fn request_all(&self, reason: SnapshotReason);
    /// What to run before each snapshot of a process the sampler takes (the hook engine's
    /// flush of its records).
    fn before_snapshots(&self, flush: crate::hooks::drain::Flusher);
    /// The smaps snapshot of `pid` as an event kind; None when it has no address space left.
    fn snapshot_now(&self, pid: i32, reason: SnapshotReason) -> Option<EventKind>;
    /// `pid` stopped at an exec, whose events are not sent yet: samples the sampler read
    /// before are of the image it leaves, and are dropped.
    fn exec_begins(&self, pid: i32);
    /// `pid` runs `exe`, as recorded at its launch, attach or exec.
    fn program_is(&self, pid: i32, exe: &str);
    /// Fork child `child` runs its parent's program.
    fn forked(&self, parent: i32, child: i32);
}
