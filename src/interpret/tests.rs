//! The interpret stage on scripted events: stack ids, known and walked stacks, symbols of
//! unloaded libraries, copy windows, time, and the watched set.

use crossbeam_channel::unbounded;
use indicatif::ProgressDrawTarget;

use super::stacks::{report_short_copy, unwind};
use super::*;
use crate::events::{StackCopy, StatusCounters};
use crate::module::MappedInode;
use crate::symbols::elf::ElfFile;
use crate::trace::format::{AllocFunction, ExitKind, StartCause, TRUNCATED_FRAME};
use crate::unwind::{Stack, StackSnapshot, Unwinder};

const LIBC: &str = "/lib/x86_64-linux-gnu/libc.so.6";
const LD_SO: &str = "/lib64/ld-linux-x86-64.so.2";
const PID: u32 = 7;
const ORIGIN: u64 = 1_000_000;

fn interpreter(output: Sender<RecordBatch>, watched: &Arc<Watched>) -> Interpreter {
    Interpreter::new(
        output,
        Shared {
            stats: Arc::default(),
            bars: MultiProgress::with_draw_target(ProgressDrawTarget::hidden()),
            copies: Arc::default(),
            windows: Arc::default(),
            watched: Arc::clone(watched),
            modules: Arc::default(),
            origin_ns: ORIGIN,
            time_unit_ns: 1,
        },
    )
}

/// Runs `events` (times relative to the origin) through a fresh stage; returns its records.
fn interpret(events: Vec<(u64, EventKind)>, watched: &Arc<Watched>) -> Vec<Record> {
    let (sender, receiver) = unbounded();
    let mut stage = interpreter(sender, watched);
    for (time_ns, kind) in events {
        stage.take(Event {
            time_ns: ORIGIN + time_ns,
            pid: PID,
            tid: PID,
            kind,
        });
    }
    drop(stage);
    receiver.try_iter().flatten().collect()
}

fn start() -> EventKind {
    EventKind::ProcessStart {
        parent_pid: None,
        cause: StartCause::Launch,
    }
}

fn exit() -> EventKind {
    EventKind::ProcessExit {
        status: ExitKind::Code(0),
        counters: Default::default(),
    }
}

fn module(path: &str, start: u64) -> EventKind {
    EventKind::Module {
        path: path.to_string(),
        inode: MappedInode::default(),
        start,
        end: start + (4 << 20),
        bias: start,
    }
}

fn malloc(address: u64, stack: RawStack) -> EventKind {
    EventKind::Alloc {
        function: AllocFunction::Malloc,
        address,
        size: 10,
        stack,
    }
}

/// (id, parent, address) of the stack nodes, and the stack ids of the allocations.
fn stacks_of(records: &[Record]) -> (Vec<(u32, u32, u64)>, Vec<u32>) {
    let nodes = records
        .iter()
        .filter_map(|record| match *record {
            Record::StackNode {
                id,
                parent,
                address,
                ..
            } => Some((id, parent, address)),
            _ => None,
        })
        .collect();
    let ids = records
        .iter()
        .filter_map(|record| match *record {
            Record::Alloc { stack, .. } => Some(stack),
            _ => None,
        })
        .collect();
    (nodes, ids)
}

/// A library dlclose()d and replaced by another at the same address: the stacks recorded
/// while the first one was mapped are named from it, not from the newest module there.
#[test]
fn addresses_are_named_from_the_module_mapped_when_they_were_recorded() {
    const START: u64 = 0x7f00_0000_0000;
    let elf = ElfFile::open(LIBC).unwrap();
    let malloc_address = elf.find_functions(&["malloc"])[0].address;
    let (name, _) = elf.symbolize(malloc_address + 4).unwrap();
    let caller = START + malloc_address + 5;
    let events = vec![
        (0, start()),
        (0, module(LIBC, START)),
        (1, malloc(0x1000, RawStack::Caller(caller))),
        (1, module(LD_SO, START)),
        (2, exit()),
    ];
    let symbols: Vec<(String, String)> = interpret(events, &Arc::default())
        .into_iter()
        .filter_map(|record| match record {
            Record::Symbol {
                address,
                function,
                module,
                ..
            } if address == caller => Some((function, module)),
            _ => None,
        })
        .collect();
    assert_eq!(symbols, [(name, LIBC.to_string())]);
}

/// Frames a source walked itself share the tree with unwound ones; a known stack is named by
/// the id its source registered, and one never registered is recorded as truncated.
#[test]
fn walked_and_known_stacks_are_interned_in_the_image_tree() {
    let registered = EventKind::KnownStack {
        id: 42,
        frames: vec![0x10, 0x20, 0x30],
    };
    let events = vec![
        (0, start()),
        (1, malloc(0x1000, RawStack::Frames(vec![0x10, 0x20]))),
        (2, registered),
        (3, malloc(0x2000, RawStack::Known(42))),
        (4, malloc(0x3000, RawStack::Known(42))),
        (5, malloc(0x4000, RawStack::Known(9))),
    ];
    let records = interpret(events, &Arc::default());
    let (nodes, ids) = stacks_of(&records);
    // Nodes hang from the outermost frame inwards: 0x20 <- 0x10 first, then 0x30 <- 0x20 <- 0x10.
    assert_eq!(
        nodes,
        [
            (1, 0, 0x20),
            (2, 1, 0x10),
            (3, 0, 0x30),
            (4, 3, 0x20),
            (5, 4, 0x10),
            (6, 0, TRUNCATED_FRAME)
        ]
    );
    assert_eq!(ids, [2, 5, 5, 6]);
    // Registering writes no record of its own.
    assert_eq!(records.len(), 1 + nodes.len() + ids.len());
}

/// Time 0 is the pipeline's origin, and no record goes back in time, whatever a source's
/// clock said.
#[test]
fn record_times_start_at_the_origin_and_never_go_back() {
    let events = vec![
        (5, start()),
        (9, EventKind::ThreadStart),
        (7, EventKind::ThreadExit),
        (12, EventKind::End),
    ];
    let times: Vec<u64> = interpret(events, &Arc::default())
        .iter()
        .filter_map(Record::time_ns)
        .collect();
    assert_eq!(times, [5, 9, 9, 12]);
}

/// A recording's times are whole microseconds, truncated, so their order stays.
#[test]
fn record_times_are_truncated_to_the_time_unit() {
    let (sender, receiver) = unbounded();
    let mut stage = interpreter(sender, &Arc::default());
    stage.time_unit_ns = 1000;
    for (time_ns, kind) in [
        (5_999, start()),
        (6_000, EventKind::ThreadStart),
        (6_999, EventKind::ThreadExit),
        (1_000_001, EventKind::End),
    ] {
        stage.take(Event {
            time_ns: ORIGIN + time_ns,
            pid: PID,
            tid: PID,
            kind,
        });
    }
    drop(stage);
    let times: Vec<u64> = receiver
        .try_iter()
        .flatten()
        .filter_map(|r| r.time_ns())
        .collect();
    assert_eq!(times, [5_000, 6_000, 6_000, 1_000_000]);
}

/// A sample is recorded only within the lifetime the stream gives its process: one that
/// arrives before its start or after its exit is not.
#[test]
fn samples_are_kept_within_the_process_lifetime() {
    let sample = |rss| {
        EventKind::StatusSample(StatusCounters {
            rss,
            ..StatusCounters::default()
        })
    };
    let watched = Arc::new(Watched::default());
    let events = vec![
        (0, sample(1)),
        (1, start()),
        (2, sample(2)),
        (3, exit()),
        (4, sample(3)),
    ];
    let rss: Vec<u64> = interpret(events, &watched)
        .iter()
        .filter_map(|record| match *record {
            Record::StatusSample { rss, .. } => Some(rss),
            _ => None,
        })
        .collect();
    assert_eq!(rss, [2]);
}

/// The tracer snapshots each new program at its exec stop: an exec asks the sampler for no
/// snapshot, and tells it that the process's highs start over.
#[test]
fn an_exec_starts_the_highs_over_and_asks_for_no_snapshot() {
    let exec = || EventKind::Exec {
        exe: "/bin/true".into(),
        argv: Vec::new(),
    };
    let watched = Arc::new(Watched::default());
    let (sender, _receiver) = unbounded();
    let mut stage = interpreter(sender, &watched);
    let mut take = |time_ns, kind| {
        stage.take(Event {
            time_ns: ORIGIN + time_ns,
            pid: PID,
            tid: PID,
            kind,
        })
    };
    let (mut snapshots, mut peaks) = (Vec::new(), Vec::new());
    watched.insert(PID as i32);
    take(0, start());
    assert!(watched.take_new_images().is_empty());
    take(1, exec());
    take(2, exec());
    watched.take_requests(&mut snapshots, &mut peaks);
    assert_eq!(snapshots, []);
    assert_eq!(
        watched.take_new_images(),
        std::collections::BTreeSet::from([PID as i32])
    );
}

/// New highs of live requested bytes reach the sampler once per high: a realloc in place
/// releases before it adds, a block handed out again at a live address replaces it, a
/// failed realloc changes nothing, and an exec starts from nothing.
#[test]
fn requested_peaks_follow_the_heap_model() {
    const MIB: u64 = 1 << 20;
    let watched = Arc::new(Watched::default());
    let (sender, _receiver) = unbounded();
    let mut stage = interpreter(sender, &watched);
    // As the sink does when it sends the start.
    watched.insert(PID as i32);
    let alloc = |address, size| EventKind::Alloc {
        function: AllocFunction::Malloc,
        address,
        size,
        stack: RawStack::Caller(0x401000),
    };
    let realloc = |old_address, new_address, size| EventKind::Realloc {
        function: AllocFunction::Realloc,
        old_address,
        new_address,
        size,
        stack: RawStack::Caller(0x401000),
    };
    let mut peaks_after = |kinds: Vec<EventKind>| {
        for kind in kinds {
            stage.take(Event {
                time_ns: ORIGIN,
                pid: PID,
                tid: PID,
                kind,
            });
        }
        let (mut snapshots, mut peaks) = (Vec::new(), Vec::new());
        watched.take_requests(&mut snapshots, &mut peaks);
        // Each high carries the time of the allocation that made it.
        assert!(peaks.iter().all(|(_, high)| high.time_ns == ORIGIN));
        let bytes: Vec<(i32, u64)> = peaks.iter().map(|(pid, high)| (*pid, high.bytes)).collect();
        bytes
    };
    assert_eq!(
        peaks_after(vec![start(), alloc(0xa000, MIB)]),
        [(PID as i32, MIB)]
    );
    // In place: 2 MiB live, not 3.
    assert_eq!(
        peaks_after(vec![realloc(0xa000, 0xa000, 2 * MIB)]),
        [(PID as i32, 2 * MIB)]
    );
    // The same address again without a free: the old block is gone, no new high.
    assert_eq!(peaks_after(vec![alloc(0xa000, 2 * MIB)]), []);
    // A failed realloc keeps the block: 3 MiB is the next high.
    assert_eq!(
        peaks_after(vec![realloc(0xa000, 0, 8 * MIB), alloc(0xb000, MIB)]),
        [(PID as i32, 3 * MIB)]
    );
    let exec = EventKind::Exec {
        exe: "/bin/true".into(),
        argv: Vec::new(),
    };
    assert_eq!(
        peaks_after(vec![exec, alloc(0xa000, MIB)]),
        [(PID as i32, MIB)]
    );
}

use crate::ptrace::capture::{INITIAL_WINDOW, MAX_WINDOW};

fn copy_of(window_limited: bool, length: usize) -> StackCopy {
    StackCopy {
        snapshot: StackSnapshot {
            ip: 0x1000,
            at_function_entry: false,
            sp: 0x7000_0000,
            bp: 0,
            stack: vec![0; length],
        },
        window_limited,
        substitute: None,
        substituted: Vec::new(),
    }
}

fn walk(truncated: bool, ran_off_copy: bool) -> Stack {
    Stack {
        frames: vec![0x1000],
        truncated,
        signal_frames: Vec::new(),
        ran_off_copy,
    }
}

fn reports(copy: &StackCopy, stack: Stack) -> Vec<(u32, u32)> {
    let windows = CopyWindows::default();
    report_short_copy(copy, &stack, &windows, 3);
    let mut seen = Vec::new();
    windows.take(|tid, length| seen.push((tid, length)));
    seen
}

#[test]
fn only_a_walk_that_ran_off_a_window_limited_copy_is_reported() {
    let length = INITIAL_WINDOW as usize;
    let limited = copy_of(true, length);
    assert_eq!(reports(&limited, walk(true, true)), [(3, INITIAL_WINDOW)]);
    // The whole mapping was copied: a larger window would not help.
    assert!(reports(&copy_of(false, length), walk(true, true)).is_empty());
    // Stopped for another reason (unknown code, too deep): the copy was long enough.
    assert!(reports(&limited, walk(true, false)).is_empty());
    assert!(reports(&limited, walk(false, false)).is_empty());
    let largest = copy_of(true, MAX_WINDOW as usize);
    assert_eq!(reports(&largest, walk(true, true)), [(3, MAX_WINDOW)]);
}

#[test]
fn a_walk_from_outside_every_module_is_truncated_and_not_reported() {
    let copy = copy_of(true, INITIAL_WINDOW as usize);
    let windows = CopyWindows::default();
    let (frames, truncated, _) = unwind(&Unwinder::new(), &copy, &windows, 3);
    assert!(truncated);
    assert_eq!(frames, [0x1000, TRUNCATED_FRAME]);
    let mut reported = false;
    windows.take(|_, _| reported = true);
    assert!(!reported);
}

/// The first stack address in a module has its debug information loaded on another thread
/// while the program runs, once, from the one copy of the file the recording reads.
#[test]
fn a_module_in_the_stacks_has_its_debug_information_loaded_in_the_background() {
    let store = Arc::new(ModuleStore::new());
    let mut preloader = symbolize::DebugPreloader::new(Arc::clone(&store));
    let libc = ModuleRange {
        path: LIBC.to_string(),
        inode: MappedInode::default(),
        start: 0,
        end: 0,
        bias: 0,
    };
    preloader.request(&libc);
    preloader.request(&libc);
    let file = store.get(LIBC).unwrap();
    let deadline = Instant::now() + std::time::Duration::from_secs(20);
    while !file.has_debug_info() && Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert!(file.has_debug_info(), "not loaded within 20 s");
    assert_eq!(store.reads(LIBC), 1);
}

/// Sums of MPI calls made inside an open call of the same thread are part of it and
/// dropped; before its entry, after its return and on another thread they are kept.
#[test]
fn summed_mpi_calls_inside_an_open_call_are_dropped() {
    let call = |entry| EventKind::MpiCall {
        function: 1,
        entry,
        stack_pointer: 0,
    };
    let sum = |calls| EventKind::MpiCalls {
        function: 2,
        calls,
        inside_ns: 10 * calls,
    };
    let (sender, receiver) = unbounded();
    let mut stage = interpreter(sender, &Arc::default());
    let events = [
        (PID, start()),
        (PID, sum(3)),
        (PID, call(true)),
        (PID, sum(5)),
        (PID + 1, sum(7)),
        (PID, call(false)),
        (PID, sum(11)),
    ];
    for (time_ns, (tid, kind)) in (1..).zip(events) {
        stage.take(Event {
            time_ns: ORIGIN + time_ns,
            pid: PID,
            tid,
            kind,
        });
    }
    drop(stage);
    let kept: Vec<(u32, u64)> = receiver
        .try_iter()
        .flatten()
        .filter_map(|record| match record {
            Record::MpiCalls { tid, calls, .. } => Some((tid, calls)),
            _ => None,
        })
        .collect();
    assert_eq!(kept, [(PID, 3), (PID + 1, 7), (PID, 11)]);
}
