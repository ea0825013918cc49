//! /proc/PID/status, /proc/PID/task, /proc/PID/cmdline.

/// The fields of /proc/PID/status memsup needs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Status {
    pub name: String,
    pub tgid: i32,
    pub ppid: i32,
    /// 0 when not traced.
    pub tracer_pid: i32,
}

pub fn parse_status(text: &str) -> Status {
    let _ = text;
    todo!()
}

pub fn read_status(pid: i32) -> std::io::Result<Status> {
    let _ = pid;
    todo!()
}

/// Thread ids in /proc/PID/task.
pub fn read_tasks(pid: i32) -> std::io::Result<Vec<i32>> {
    let _ = pid;
    todo!()
}

/// /proc/PID/cmdline split at NULs (lossy UTF-8).
pub fn read_cmdline(pid: i32) -> std::io::Result<Vec<String>> {
    let _ = pid;
    todo!()
}
