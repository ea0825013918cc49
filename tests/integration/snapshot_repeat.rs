//! A hundred `memsup snapshot`s in a row of fixtures/chaos_threads.c (four threads that keep
//! allocating and checking their blocks) while it runs: each lets every thread go, the
//! program's executable bytes are unchanged after them, and its output and exit status are
//! a native run's.

use crate::chaos::{finish_chaos_threads, start_chaos_threads};
use crate::common::live_process::{assert_code_unchanged, executable_mappings, tracer_pid};
use crate::common::report::report_json;
use crate::common::run::{
    clean_command, memsup_binary, spawn_piped, split_stderr, wait_with_timeout,
};
use crate::common::*;

const SNAPSHOTS: usize = 100;
/// chaos_threads' main thread and its four workers.
const THREADS: usize = 5;

#[test]
fn a_hundred_snapshots_in_a_row_leave_a_running_program_as_it_was() {
    for_each_variant("chaos_threads", |variant, fixture| {
        let (native, process) = start_chaos_threads(fixture);
        let pid = process.pid;
        let code_before = executable_mappings(pid);
        let directory = tempfile::tempdir().unwrap();
        let profile = directory.path().join("snapshot.msup");
        for index in 0..SNAPSHOTS {
            let mut command = clean_command(memsup_binary());
            command.args(["snapshot", "-q", "-f", "-o"]);
            command.arg(&profile).arg(pid.to_string());
            let (child, description) = spawn_piped(command);
            let output = wait_with_timeout(child, &description);
            let (other, memsup_lines) = split_stderr(&output.stderr);
            let what = format!("{variant:?}: snapshot {index}");
            assert_eq!(output.status.code(), Some(0), "{what}: {memsup_lines:?}");
            assert!(memsup_lines.is_empty(), "{what}: {memsup_lines:?}");
            assert_eq!(other, "", "{what}");
            assert_eq!(tracer_pid(pid), 0, "{what}: every thread let go");
        }
        assert_code_unchanged(pid, &code_before);
        // The last snapshot saw every thread.
        let report = report_json(&profile);
        let groups = report["processes"][0]["threads"]["groups"]
            .as_array()
            .expect("thread groups");
        let seen: usize = groups
            .iter()
            .map(|group| group["threads"].as_array().map_or(0, Vec::len))
            .sum();
        assert_eq!(seen, THREADS, "{variant:?}: {groups:#?}");
        finish_chaos_threads(process, &native, &format!("{variant:?}"));
    });
}
