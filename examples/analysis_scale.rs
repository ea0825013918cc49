//! Report time and memory against the number of heap events: a synthetic churn profile is
//! generated in memory (never stored) and analysed as `memsup report` analyses a file.
//!
//! `cargo run --release --example analysis_scale -- 20000000`, under `/usr/bin/time -v` for
//! the peak RSS. Prints the events, the wall and CPU seconds and the events per second.

use std::path::Path;
use std::time::Instant;

use memsup::analysis::{analyze_records, SampleOrder, Settings};
use memsup::trace::format::{
    AllocFunction, ExitKind, Header, ProbeCounters, Record, RecordMode, StartCause,
};

const PID: u32 = 100;
/// Distinct allocating stacks (one node each).
const STACKS: u32 = 16;
/// Blocks in the ring; about half are live at any time.
const SLOTS: u64 = 4096;
const BASE_ADDRESS: u64 = 0x5555_0000_0000;
/// A status sample every so many events, as a 10 ms sampler would see a busy program.
const SAMPLE_EVERY: u64 = 10_000;

fn main() {
    let events: u64 = std::env::args()
        .nth(1)
        .map(|text| text.parse().expect("a number of events"))
        .unwrap_or(2_000_000);
    let header = Header {
        memsup_version: "synthetic".to_string(),
        host: "synthetic".to_string(),
        mode: RecordMode::Run,
        target: vec!["churn".to_string()],
        start_unix_ns: 0,
        options: Vec::new(),
    };
    let started = Instant::now();
    let path = Path::new("synthetic.msp");
    let order = SampleOrder::InTimeOrder;
    let analysis = analyze_records(&header, churn(events), order, path, &Settings::default());
    let seconds = started.elapsed().as_secs_f64();
    let cpu_seconds = cpu_seconds();
    let image = &analysis.processes[0];
    println!(
        "events {events} seconds {seconds:.2} cpu_seconds {cpu_seconds:.2} events/s {:.0} \
         events/cpu_s {:.0} peak_live_bytes {} sites {}",
        events as f64 / seconds,
        events as f64 / cpu_seconds,
        image.peak_live_bytes,
        image.sites.len()
    );
}

/// User and system CPU time of this process so far: on a shared machine, wall time says
/// more about the neighbours than about the analysis.
fn cpu_seconds() -> f64 {
    // SAFETY: getrusage only writes the struct it is given.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let seconds = |time: libc::timeval| time.tv_sec as f64 + time.tv_usec as f64 / 1e6;
    seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

/// The records of one process that allocates into a ring of slots and frees the slot half a
/// ring behind, `events` heap events in all.
fn churn(events: u64) -> impl Iterator<Item = Record> {
    let start = Record::ProcessStart {
        time_ns: 0,
        pid: PID,
        parent_pid: None,
        cause: StartCause::Launch,
    };
    let nodes = (1..=STACKS).map(|id| Record::StackNode {
        pid: PID,
        id,
        parent: 0,
        address: code_address(id),
    });
    let heap = (0..events).flat_map(heap_event);
    let end_ns = events * 100 + 100;
    let symbols = (1..=STACKS).map(|id| Record::Symbol {
        pid: PID,
        address: code_address(id),
        function: format!("work_{id}"),
        offset: 4,
        module: "/usr/bin/churn".to_string(),
        frames: Vec::new(),
    });
    let end = [
        Record::ProcessExit {
            time_ns: end_ns,
            pid: PID,
            status: ExitKind::Code(0),
            counters: ProbeCounters::default(),
        },
        Record::End { time_ns: end_ns },
    ];
    std::iter::once(start)
        .chain(nodes)
        .chain(heap)
        .chain(symbols)
        .chain(end)
}

fn code_address(stack: u32) -> u64 {
    0x40_1000 + u64::from(stack) * 0x40
}

/// Event `index`: even ones allocate slot `index / 2`, odd ones free the slot half a ring
/// ahead; every `SAMPLE_EVERY`th is followed by a status sample.
fn heap_event(index: u64) -> Vec<Record> {
    let time_ns = index * 100 + 50;
    let allocation = index / 2;
    let slot_address = |slot: u64| BASE_ADDRESS + (slot % SLOTS) * 0x100;
    let event = if index % 2 == 0 {
        Record::Alloc {
            time_ns,
            pid: PID,
            tid: PID,
            function: AllocFunction::Malloc,
            address: slot_address(allocation),
            size: 16 + (allocation % 200),
            stack: 1 + (allocation % u64::from(STACKS)) as u32,
        }
    } else {
        Record::Free {
            time_ns,
            pid: PID,
            tid: PID,
            address: slot_address(allocation + SLOTS / 2),
        }
    };
    let mut records = vec![event];
    if index % SAMPLE_EVERY == 0 {
        records.push(Record::StatusSample {
            time_ns,
            pid: PID,
            rss: 1 << 20,
            anon: 0,
            file: 0,
            shmem: 0,
            swap: 0,
        });
    }
    records
}
