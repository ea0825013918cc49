//! Writes a valid profile of N allocation events, to measure the report against the number
//! of events: one process of 4 threads churning malloc/free over 4096 slots (a bounded live
//! set), 8 call stacks of 3 frames with their symbols, a status sample every 1000 events, and
//! process start, exec, module, exit and end records. Deterministic for a given N.
//!
//! Usage: `cargo run --release --example synthetic_profile -- N PATH`

use std::path::Path;

use memsup::trace::format::{
    AllocFunction, ExitKind, Header, ProbeCounters, Record, RecordMode, SourceFrame, StartCause,
};
use memsup::trace::writer::ProfileWriter;

const PID: u32 = 4000;
const SLOTS: u64 = 4096;
const STACKS: u32 = 8;
const SIZES: [u64; 8] = [16, 24, 32, 64, 128, 256, 1024, 4000];
const MODULE_START: u64 = 0x5555_5555_0000;

/// xorshift64*: the same stream for the same N on every machine.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

fn main() {
    let arguments: Vec<String> = std::env::args().collect();
    let (Some(events), Some(path)) = (arguments.get(1), arguments.get(2)) else {
        eprintln!("usage: synthetic_profile N PATH");
        std::process::exit(2);
    };
    let events: u64 = events.parse().expect("N is a number of events");
    let header = Header {
        memsup_version: env!("CARGO_PKG_VERSION").to_string(),
        host: "synthetic".to_string(),
        mode: RecordMode::Run,
        target: vec!["churn".to_string()],
        start_unix_ns: 1_700_000_000_000_000_000,
        options: vec![format!("synthetic_events={events}")],
    };
    let _ = std::fs::remove_file(path);
    let mut writer = ProfileWriter::create(Path::new(path), &header).expect("creating the profile");
    let mut push = |record: Record| writer.push(&record).expect("writing a record");
    let time_ns = write_start(&mut push);
    let time_ns = write_churn(&mut push, events, time_ns);
    write_end(&mut push, time_ns);
    writer.finish().expect("finishing the profile");
}

fn write_start(push: &mut impl FnMut(Record)) -> u64 {
    push(Record::ProcessStart {
        time_ns: 1,
        pid: PID,
        parent_pid: None,
        cause: StartCause::Launch,
    });
    push(Record::Exec {
        time_ns: 2,
        pid: PID,
        exe: "/usr/bin/churn".to_string(),
        argv: vec!["churn".to_string()],
    });
    push(Record::Module {
        time_ns: 3,
        pid: PID,
        path: "/usr/bin/churn".to_string(),
        start: MODULE_START,
        end: MODULE_START + 0x10000,
        bias: MODULE_START,
    });
    // Stack s: main -> work_s -> alloc_s, nodes 1 (main), then 2 per stack.
    push(Record::StackNode {
        pid: PID,
        id: 1,
        parent: 0,
        address: MODULE_START + 0x100,
    });
    for stack in 0..STACKS {
        let work = 2 + 2 * stack;
        push(Record::StackNode {
            pid: PID,
            id: work,
            parent: 1,
            address: MODULE_START + 0x1000 + u64::from(stack) * 0x100,
        });
        push(Record::StackNode {
            pid: PID,
            id: work + 1,
            parent: work,
            address: MODULE_START + 0x1010 + u64::from(stack) * 0x100,
        });
    }
    10
}

fn write_churn(push: &mut impl FnMut(Record), events: u64, mut time_ns: u64) -> u64 {
    let mut random = Random(0x9e37_79b9_7f4a_7c15);
    let mut live = vec![false; SLOTS as usize];
    for event in 0..events {
        let draw = random.next();
        time_ns += 200 + draw % 1800;
        let slot = (draw >> 16) % SLOTS;
        let tid = PID + (draw >> 32) as u32 % 4;
        let address = 0x7f00_0000_0000 + slot * 0x1000;
        let record = if live[slot as usize] {
            Record::Free {
                time_ns,
                pid: PID,
                tid,
                address,
            }
        } else {
            let stack = 3 + 2 * ((draw >> 40) as u32 % STACKS);
            let size = SIZES[(draw >> 48) as usize % SIZES.len()];
            Record::Alloc {
                time_ns,
                pid: PID,
                tid,
                function: AllocFunction::Malloc,
                address,
                size,
                stack,
            }
        };
        live[slot as usize] = !live[slot as usize];
        push(record);
        if event % 1000 == 999 {
            let rss = 8 << 20 | (draw & 0xff000);
            push(Record::StatusSample {
                time_ns,
                pid: PID,
                rss,
                anon: rss / 2,
                file: rss / 2,
                shmem: 0,
                swap: 0,
            });
        }
    }
    time_ns
}

fn write_end(push: &mut impl FnMut(Record), time_ns: u64) {
    let symbol = |address: u64, function: String| Record::Symbol {
        pid: PID,
        address,
        function: function.clone(),
        offset: 0x10,
        module: "/usr/bin/churn".to_string(),
        frames: vec![SourceFrame {
            function: function.clone(),
            raw_name: function,
            file: Some("churn.c".to_string()),
            line: Some(10),
            column: None,
            inlined: false,
        }],
    };
    push(symbol(MODULE_START + 0x100, "main".to_string()));
    for stack in 0..u64::from(STACKS) {
        push(symbol(
            MODULE_START + 0x1000 + stack * 0x100,
            format!("work_{stack}"),
        ));
        push(symbol(
            MODULE_START + 0x1010 + stack * 0x100,
            format!("alloc_{stack}"),
        ));
    }
    push(Record::ProcessExit {
        time_ns: time_ns + 1,
        pid: PID,
        status: ExitKind::Code(0),
        counters: ProbeCounters::default(),
    });
    push(Record::End {
        time_ns: time_ns + 2,
    });
}
