//! A snapshot's threads in the JSON report: each distinct stack with its threads.

use super::json_sites::{stack_json, FrameJson};
use crate::analysis::threads::activity_name;
use crate::analysis::{ProcessSnapshot, SnapshotThread, ThreadGroup};

#[derive(serde::Serialize)]
pub(super) struct ThreadsJson<'a> {
    stopped_ns: u64,
    groups: Vec<GroupJson<'a>>,
}

#[derive(serde::Serialize)]
struct GroupJson<'a> {
    /// Innermost first.
    stack: Vec<FrameJson<'a>>,
    threads: Vec<ThreadJson<'a>>,
}

#[derive(serde::Serialize)]
struct ThreadJson<'a> {
    tid: u32,
    /// `running`, `in system call NAME` or `stopped`.
    state: String,
    kernel_state: String,
    wchan: &'a str,
}

impl<'a> ThreadsJson<'a> {
    pub(super) fn new(snapshot: &'a ProcessSnapshot) -> Self {
        ThreadsJson {
            stopped_ns: snapshot.stopped_ns,
            groups: snapshot.groups.iter().map(GroupJson::new).collect(),
        }
    }
}

impl<'a> GroupJson<'a> {
    fn new(group: &'a ThreadGroup) -> Self {
        GroupJson {
            stack: stack_json(&group.stack),
            threads: group.threads.iter().map(ThreadJson::new).collect(),
        }
    }
}

impl<'a> ThreadJson<'a> {
    fn new(thread: &'a SnapshotThread) -> Self {
        ThreadJson {
            tid: thread.tid,
            state: activity_name(thread.activity),
            kernel_state: thread.kernel_state.to_string(),
            wchan: &thread.wchan,
        }
    }
}
