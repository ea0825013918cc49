//! The threads a snapshot found, grouped like `gdb thread apply all bt` folded: threads
//! whose symbolised stacks read the same (the same functions, innermost first) are one
//! entry, so a thousand threads waiting on one condition are one stack shown once.

use std::collections::HashMap;

use super::frames::{address_frames, Frame};
use super::sites::ImageStacks;
use crate::trace::census_format::HeapCensus;
use crate::trace::format::ThreadActivity;
use crate::trace::stacks::StackId;

/// One thread as the snapshot recorded it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotThread {
    pub tid: u32,
    pub activity: ThreadActivity,
    /// The /proc stat state letter before the stop; `?` when unknown.
    pub kernel_state: char,
    /// The kernel function it slept in; "" when none.
    pub wchan: String,
}

/// Threads with one stack.
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadGroup {
    /// Innermost first: the function the threads were stopped in, then its callers (those of
    /// the group's first thread: file:line may differ between its threads).
    pub stack: Vec<Frame>,
    /// By thread id.
    pub threads: Vec<SnapshotThread>,
}

/// What a snapshot saw of one process.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ProcessSnapshot {
    /// How long the process was stopped.
    pub stopped_ns: u64,
    /// By number of threads (most first), then by lowest thread id.
    pub groups: Vec<ThreadGroup>,
    /// What its glibc heap held; None in profiles written before the census existed.
    pub heap_census: Option<HeapCensus>,
}

/// A thread's record before its stack is symbolised.
#[derive(Debug, Clone)]
pub(super) struct RecordedThread {
    pub thread: SnapshotThread,
    pub stack: StackId,
}

/// The symbolised stack of each recorded thread, then the groups.
pub(super) fn thread_groups(threads: &[RecordedThread], stacks: &ImageStacks) -> Vec<ThreadGroup> {
    let symbolised = threads.iter().map(|recorded| {
        let frames = stacks
            .table
            .frames(recorded.stack)
            .into_iter()
            .flat_map(|address| address_frames(address, &stacks.symbols))
            .collect();
        (recorded.thread.clone(), frames)
    });
    group_threads(symbolised)
}

/// Threads whose stacks name the same functions in the same order are one group.
pub fn group_threads(
    threads: impl IntoIterator<Item = (SnapshotThread, Vec<Frame>)>,
) -> Vec<ThreadGroup> {
    let mut groups: Vec<ThreadGroup> = Vec::new();
    let mut by_names: HashMap<Vec<String>, usize> = HashMap::new();
    for (thread, stack) in threads {
        let names: Vec<String> = stack.iter().map(Frame::name).collect();
        let index = *by_names.entry(names).or_insert_with(|| {
            groups.push(ThreadGroup {
                stack,
                threads: Vec::new(),
            });
            groups.len() - 1
        });
        groups[index].threads.push(thread);
    }
    for group in &mut groups {
        group.threads.sort_by_key(|thread| thread.tid);
    }
    groups.sort_by(|left, right| {
        right
            .threads
            .len()
            .cmp(&left.threads.len())
            .then_with(|| left.threads[0].tid.cmp(&right.threads[0].tid))
    });
    groups
}

/// As reports spell it: `running`, `in system call NAME`, `stopped`.
pub fn activity_name(activity: ThreadActivity) -> String {
    match activity {
        ThreadActivity::Running => "running".to_string(),
        ThreadActivity::SystemCall(number) => format!(
            "in system call {}",
            crate::platform::system_calls::system_call_name(number)
        ),
        ThreadActivity::Stopped => "stopped".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(function: &str, address: u64) -> Frame {
        Frame {
            function: function.to_string(),
            file: None,
            line: None,
            module: "/bin/x".to_string(),
            address,
            offset: 0,
            inlined: false,
        }
    }

    fn thread(tid: u32, activity: ThreadActivity) -> SnapshotThread {
        SnapshotThread {
            tid,
            activity,
            kernel_state: 'S',
            wchan: String::new(),
        }
    }

    #[test]
    fn threads_with_the_same_functions_are_one_group_by_count_then_thread_id() {
        let wait = ThreadActivity::SystemCall(202);
        let groups = group_threads([
            (
                thread(12, ThreadActivity::Running),
                vec![frame("spin", 0x10), frame("main", 0x50)],
            ),
            (
                thread(14, wait),
                vec![frame("futex_wait", 0x20), frame("worker", 0x30)],
            ),
            // Another address in the same functions: the same stack to a reader.
            (
                thread(13, wait),
                vec![frame("futex_wait", 0x21), frame("worker", 0x31)],
            ),
            (
                thread(11, ThreadActivity::Stopped),
                vec![frame("read", 0x40)],
            ),
            (
                thread(15, wait),
                vec![frame("futex_wait", 0x20), frame("worker", 0x30)],
            ),
        ]);
        let summary: Vec<(Vec<String>, Vec<u32>)> = groups
            .iter()
            .map(|group| {
                let names = group.stack.iter().map(Frame::name).collect();
                let tids = group.threads.iter().map(|thread| thread.tid).collect();
                (names, tids)
            })
            .collect();
        let names = |list: &[&str]| list.iter().map(|name| name.to_string()).collect::<Vec<_>>();
        assert_eq!(
            summary,
            [
                (names(&["futex_wait", "worker"]), vec![13, 14, 15]),
                (names(&["read"]), vec![11]),
                (names(&["spin", "main"]), vec![12]),
            ]
        );
        // The group shows its first member's frames.
        assert_eq!(groups[0].stack[0].address, 0x20);
    }

    #[test]
    fn a_stack_that_differs_in_one_caller_is_another_group() {
        let wait = ThreadActivity::SystemCall(202);
        let groups = group_threads([
            (
                thread(1, wait),
                vec![frame("futex_wait", 0x20), frame("a", 0x30)],
            ),
            (
                thread(2, wait),
                vec![frame("futex_wait", 0x20), frame("b", 0x60)],
            ),
        ]);
        assert_eq!(groups.len(), 2);
        assert_eq!(groups[0].threads, [thread(1, wait)]);
        assert_eq!(groups[1].threads, [thread(2, wait)]);
    }

    #[test]
    fn a_snapshot_profile_replays_into_groups_named_by_its_symbols() {
        use crate::trace::format::{ExitKind, Header, Record, RecordMode, StartCause};
        use crate::trace::reader::Profile;
        let pid = 30;
        let node = |id, parent, address| Record::StackNode {
            pid,
            id,
            parent,
            address,
        };
        let symbol = |address, function: &str| Record::Symbol {
            pid,
            address,
            function: function.to_string(),
            offset: 4,
            module: "/app".to_string(),
            frames: Vec::new(),
        };
        let state = |tid, activity, stack| Record::ThreadState {
            time_ns: 20,
            pid,
            tid,
            activity,
            kernel_state: 'S',
            wchan: "futex_wait_queue".to_string(),
            stack,
        };
        let wait = ThreadActivity::SystemCall(202);
        let records = vec![
            Record::ProcessStart {
                time_ns: 10,
                pid,
                parent_pid: None,
                cause: StartCause::Attach,
            },
            // main <- worker <- futex_wait at two addresses; main <- spin.
            node(1, 0, 0x100),
            node(2, 1, 0x200),
            node(3, 2, 0x300),
            node(4, 2, 0x304),
            node(5, 1, 0x400),
            state(31, wait, 3),
            state(32, ThreadActivity::Running, 5),
            state(33, wait, 4),
            Record::SnapshotStop {
                time_ns: 21,
                pid,
                stopped_ns: 1_500,
                threads: 3,
            },
            symbol(0x100, "main"),
            symbol(0x200, "worker"),
            symbol(0x300, "futex_wait"),
            symbol(0x304, "futex_wait"),
            symbol(0x400, "spin"),
            Record::ProcessExit {
                time_ns: 22,
                pid,
                status: ExitKind::Detached,
                counters: Default::default(),
            },
            Record::End { time_ns: 23 },
        ];
        let profile = Profile {
            header: Header {
                memsup_version: "0.1.0".to_string(),
                host: "node17".to_string(),
                mode: RecordMode::Snapshot,
                target: vec![pid.to_string()],
                start_unix_ns: 0,
                options: Vec::new(),
            },
            records,
            truncated: false,
            damage: Vec::new(),
        };
        let analysis = crate::analysis::analyze(&profile, std::path::Path::new("s.msup"));
        let snapshot = analysis.processes[0].snapshot.as_ref().expect("a snapshot");
        assert_eq!(snapshot.stopped_ns, 1_500);
        let summary: Vec<(Vec<String>, Vec<u32>)> = snapshot
            .groups
            .iter()
            .map(|group| {
                let names = group.stack.iter().map(Frame::name).collect();
                (names, group.threads.iter().map(|t| t.tid).collect())
            })
            .collect();
        let names = |list: &[&str]| list.iter().map(|name| name.to_string()).collect::<Vec<_>>();
        assert_eq!(
            summary,
            [
                (names(&["futex_wait", "worker", "main"]), vec![31, 33]),
                (names(&["spin", "main"]), vec![32]),
            ]
        );
        assert_eq!(snapshot.groups[0].threads[0].wchan, "futex_wait_queue");
    }

    #[test]
    fn activities_read_as_the_report_spells_them() {
        assert_eq!(activity_name(ThreadActivity::Running), "running");
        assert_eq!(
            activity_name(ThreadActivity::SystemCall(0)),
            "in system call read"
        );
        assert_eq!(
            activity_name(ThreadActivity::SystemCall(230)),
            "in system call clock_nanosleep"
        );
        assert_eq!(activity_name(ThreadActivity::Stopped), "stopped");
    }
}
