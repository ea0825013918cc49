//! The collector on scripted messages: stack ids, symbols of unloaded libraries, copy windows.

use crossbeam_channel::unbounded;
use indicatif::ProgressDrawTarget;

use super::*;
use crate::symbols::elf::ElfFile;
use crate::trace::format::{AllocFunction, ExitKind, StartCause};

const LIBC: &str = "/lib/x86_64-linux-gnu/libc.so.6";
const LD_SO: &str = "/lib64/ld-linux-x86-64.so.2";
const PID: u32 = 7;

fn collector(output: Sender<Record>) -> Collector {
    let modules = Arc::new(ModuleStore::new());
    Collector {
        output,
        files: Arc::clone(&modules),
        images: HashMap::new(),
        live_blocks: HashMap::new(),
        peaks: RequestedPeaks::default(),
        symbolizer: ImageSymbolizer::new(
            MultiProgress::with_draw_target(ProgressDrawTarget::hidden()),
            modules,
        ),
        stats: Arc::new(LiveStats::default()),
        new_nodes: Vec::new(),
        costs: UnwindCosts::default(),
    }
}

fn module(path: &str, start: u64) -> Message {
    Message {
        record: Record::Module {
            time_ns: 0,
            pid: PID,
            path: path.to_string(),
            start,
            end: start + (4 << 20),
            bias: start,
        },
        stack: None,
    }
}

/// A library dlclose()d and replaced by another at the same address: the stacks recorded
/// while the first one was mapped are named from it, not from the newest module there.
#[test]
fn addresses_are_named_from_the_module_mapped_when_they_were_recorded() {
    const START: u64 = 0x7f00_0000_0000;
    let elf = ElfFile::open(LIBC).unwrap();
    let malloc = elf.find_functions(&["malloc"])[0].address;
    let (name, _) = elf.symbolize(malloc + 4).unwrap();
    let caller = START + malloc + 5;
    let (sender, receiver) = unbounded();
    let mut collector = collector(sender);
    let messages = [
        Message {
            record: Record::ProcessStart {
                time_ns: 0,
                pid: PID,
                parent_pid: None,
                cause: StartCause::Launch,
            },
            stack: None,
        },
        module(LIBC, START),
        Message {
            record: Record::Alloc {
                time_ns: 1,
                pid: PID,
                tid: PID,
                function: AllocFunction::Malloc,
                address: 0x1000,
                size: 10,
                stack: 0,
            },
            stack: Some(StackSource::Caller(caller)),
        },
        module(LD_SO, START),
        Message {
            record: Record::ProcessExit {
                time_ns: 2,
                pid: PID,
                status: ExitKind::Code(0),
                counters: Default::default(),
            },
            stack: None,
        },
    ];
    for message in messages {
        collector.take(message);
    }
    drop(collector);
    let symbols: Vec<(String, String)> = receiver
        .iter()
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

use crate::ptrace::capture::INITIAL_WINDOW;
use crate::unwind::StackSnapshot;
use std::sync::atomic::AtomicU32;

fn capture_of(window_limited: bool, length: usize) -> Capture {
    Capture {
        snapshot: StackSnapshot {
            ip: 0x1000,
            at_function_entry: false,
            sp: 0x7000_0000,
            bp: 0,
            stack: vec![0; length],
        },
        window_limited,
        trampoline: None,
        hijacked: Vec::new(),
        window: Arc::new(AtomicU32::new(INITIAL_WINDOW)),
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

#[test]
fn only_a_walk_that_ran_off_a_window_limited_copy_grows_the_window() {
    let window_of = |window_limited, stack: Stack| {
        let capture = capture_of(window_limited, INITIAL_WINDOW as usize);
        grow_window(&capture, &stack);
        capture.window.load(Ordering::Relaxed)
    };
    assert_eq!(window_of(true, walk(true, true)), 2 * INITIAL_WINDOW);
    // The whole mapping was copied: a larger window would not help.
    assert_eq!(window_of(false, walk(true, true)), INITIAL_WINDOW);
    // Stopped for another reason (unknown code, too deep): the copy was long enough.
    assert_eq!(window_of(true, walk(true, false)), INITIAL_WINDOW);
    assert_eq!(window_of(true, walk(false, false)), INITIAL_WINDOW);
}

#[test]
fn the_window_stops_growing_at_its_maximum() {
    let limited = capture_of(true, MAX_WINDOW as usize);
    grow_window(&limited, &walk(true, true));
    assert_eq!(limited.window.load(Ordering::Relaxed), MAX_WINDOW);
}

#[test]
fn a_walk_from_outside_every_module_is_truncated_and_the_window_kept() {
    let capture = capture_of(true, INITIAL_WINDOW as usize);
    let (frames, truncated, _) = unwind(&Unwinder::new(), &capture);
    assert!(truncated);
    assert_eq!(frames, [0x1000, TRUNCATED_FRAME]);
    assert_eq!(capture.window.load(Ordering::Relaxed), INITIAL_WINDOW);
}
