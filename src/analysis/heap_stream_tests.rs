//! The event stream of each image of a PID that execs: its own events, stacks and symbols.

use std::path::Path;

use super::heap_stream::replay_image_heap;
use super::load::analyze_file;
use super::{ImageExit, ProbeCounters, RecordMode, Settings, SkipFrames, StartCause};
use crate::trace::format::{AllocFunction, ExitKind, Header, Record};
use crate::trace::stacks::{StackId, EMPTY_STACK};
use crate::trace::writer::ProfileWriter;

const PID: u32 = 11;

fn node(id: StackId, parent: StackId, address: u64) -> Record {
    Record::StackNode {
        pid: PID,
        id,
        parent,
        address,
    }
}

fn symbol(address: u64, function: &str) -> Record {
    Record::Symbol {
        pid: PID,
        address,
        function: function.to_string(),
        offset: 0,
        module: "/bin/app".to_string(),
        frames: Vec::new(),
    }
}

fn alloc(time_ns: u64, address: u64, size: u64, stack: StackId) -> Record {
    Record::Alloc {
        time_ns,
        pid: PID,
        tid: PID,
        function: AllocFunction::Malloc,
        address,
        size,
        stack,
    }
}

fn free(time_ns: u64, address: u64) -> Record {
    Record::Free {
        time_ns,
        pid: PID,
        tid: PID,
        address,
    }
}

/// Image 1 (0–20 ns): a block through an `xmalloc` wrapper from `first`, then an exec;
/// image 2 (20–40 ns): its own stack table (ids from 1 again) and a block from `second`,
/// freed, and a free of image 1's block, unknown to image 2.
fn records() -> Vec<Record> {
    vec![
        Record::ProcessStart {
            time_ns: 0,
            pid: PID,
            parent_pid: None,
            cause: StartCause::Launch,
        },
        node(1, EMPTY_STACK, 0xA0),
        node(2, 1, 0xF0),
        alloc(10, 0x100, 10, 2),
        symbol(0xA0, "first"),
        symbol(0xF0, "xmalloc"),
        Record::Exec {
            time_ns: 20,
            pid: PID,
            exe: "/bin/app".to_string(),
            argv: vec!["app".to_string()],
        },
        node(1, EMPTY_STACK, 0xB0),
        alloc(30, 0x200, 20, 1),
        free(35, 0x200),
        free(36, 0x100),
        symbol(0xB0, "second"),
        Record::ProcessExit {
            time_ns: 40,
            pid: PID,
            status: ExitKind::Code(0),
            counters: ProbeCounters::default(),
        },
        Record::End { time_ns: 40 },
    ]
}

/// (time, created size and site functions, released size) of each event of image `index`.
type Step = (u64, Option<(u64, Vec<String>)>, Option<u64>, bool);

fn steps(path: &Path, index: usize) -> Vec<Step> {
    let analysis = analyze_file(path, &Settings::default()).unwrap();
    let image = &analysis.processes[index];
    let mut steps = Vec::new();
    replay_image_heap(
        path,
        image,
        &SkipFrames::default(),
        &mut |time_ns, outcome, sites| {
            let created = outcome.created.map(|block| {
                let frames = sites.frames(block.stack);
                let names = frames.iter().map(|frame| frame.function.clone()).collect();
                (block.size, names)
            });
            let released = outcome.released.map(|block| block.size);
            steps.push((time_ns, created, released, outcome.unknown_free.is_some()));
        },
    )
    .unwrap();
    steps
}

#[test]
fn each_image_of_an_exec_streams_its_own_events_with_its_own_sites() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("exec.msup");
    let header = Header {
        memsup_version: "0.1.0".to_string(),
        host: "node17".to_string(),
        mode: RecordMode::Run,
        target: vec!["./app".to_string()],
        start_unix_ns: 0,
        options: Vec::new(),
    };
    let mut writer = ProfileWriter::create(&path, &header).unwrap();
    for record in records() {
        writer.push(&record).unwrap();
    }
    writer.finish().unwrap();
    let analysis = analyze_file(&path, &Settings::default()).unwrap();
    let exits: Vec<ImageExit> = analysis.processes.iter().map(|image| image.exit).collect();
    assert_eq!(exits, [ImageExit::Exec, ImageExit::Code(0)]);
    let first = vec!["first".to_string()];
    assert_eq!(steps(&path, 0), [(10, Some((10, first)), None, false)]);
    let second = vec!["second".to_string()];
    assert_eq!(
        steps(&path, 1),
        [
            (30, Some((20, second)), None, false),
            (35, None, Some(20), false),
            (36, None, None, true),
        ]
    );
}
