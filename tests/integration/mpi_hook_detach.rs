//! `memsup attach --engine hooks --job` on a two-rank job (fixture mpi_recv_wait) whose rank 0
//! is inside a hooked MPI_Recv when memsup detaches: the detach sends the call back to its
//! caller past the hook, so the hook pages go with memsup, and the call, completed after the
//! detach, returns to the program as if it had never been hooked.

use std::time::Duration;

use crate::common::attach_cycle::maps;
use crate::common::live_process::{
    hook_mappings, thread_states, tracer_pid, wait_until, HOOK_AREA,
};
use crate::common::mpi::{mpi_fixture, mpi_libraries, MpiLibrary, MpiLinking};
use crate::common::report::{dump_records, processes, report_json};
use crate::common::run::wait_within;
use crate::mpi_job_attach::{attach_to_job, start, Job};

const LIMIT: Duration = Duration::from_secs(120);
/// Time for rank 0 to go from its "waits" line into MPI_Recv; that it did is checked in
/// the profile afterwards.
const SETTLE: Duration = Duration::from_millis(500);

/// Waits for the job's next line, which must be `expected` (rank 0's line before its first
/// MPI_Recv may come first: it can follow rank 1's ready line).
fn expect_line(job: &Job, expected: &str) {
    let mut line = job.lines.recv_timeout(LIMIT).expect("the job's next line");
    if line == "rank 0 waits for message 1" {
        line = job.lines.recv_timeout(LIMIT).expect("the job's next line");
    }
    assert_eq!(line, expected);
}

fn send_usr1(pid: u32) {
    // SAFETY: kill has no memory effects.
    assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGUSR1) }, 0);
}

/// The `MpiCall` and `MpiCalls` records of `pid` in the profile, in order: (function name,
/// "entry", "return" or "N summed").
fn mpi_call_records(profile: &std::path::Path, pid: u32) -> Vec<(String, String)> {
    let mut names = std::collections::HashMap::new();
    let mut calls = Vec::new();
    for (kind, fields) in dump_records(profile, u64::from(pid)) {
        match kind.as_str() {
            "MpiFunction" => {
                let name = fields["name"].as_str().unwrap().to_string();
                names.insert(fields["function"].as_u64().unwrap(), name);
            }
            "MpiCall" => {
                let name = names[&fields["function"].as_u64().unwrap()].clone();
                let what = if fields["entry"] == true {
                    "entry"
                } else {
                    "return"
                };
                calls.push((name, what.to_string()));
            }
            "MpiCalls" => {
                let name = names[&fields["function"].as_u64().unwrap()].clone();
                calls.push((name, format!("{} summed", fields["calls"])));
            }
            _ => {}
        }
    }
    calls
}

fn detach_inside_mpi_recv(library: MpiLibrary) {
    let what = format!("{library:?}");
    let fixture = mpi_fixture("mpi_recv_wait", library, MpiLinking::Dynamic);
    let mut job = start(library, &fixture);
    let (rank0, rank1) = (job.ranks[0], job.ranks[1]);
    let before = [hook_mappings(rank0), hook_mappings(rank1)];
    let directory = tempfile::tempdir().unwrap();
    let profile = directory.path().join("job.msup");
    let mut memsup = attach_to_job(library, rank1, &profile, &["-q", "--engine", "hooks"]);
    let memsup_pid = memsup.0.as_ref().unwrap().id();
    for rank in [rank0, rank1] {
        // Joined, hooked and let go: traced, the ring area mapped, no thread stopped.
        wait_until("memsup has hooked the rank", LIMIT, || {
            tracer_pid(rank) == memsup_pid
                && maps(rank).contains(HOOK_AREA)
                && !thread_states(rank).iter().any(|state| state == "t")
        });
    }
    send_usr1(rank1);
    expect_line(&job, "rank 0 got 41");
    expect_line(&job, "rank 0 waits for message 2");
    std::thread::sleep(SETTLE);
    // SAFETY: kill has no memory effects.
    unsafe { libc::kill(memsup_pid as i32, libc::SIGINT) };
    let output = wait_within(memsup.0.take().unwrap(), "memsup attach --job", LIMIT);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{what}: {stderr}");
    assert_eq!(stderr, "", "{what}: memsup had nothing to say");
    assert_eq!(tracer_pid(rank0), 0, "{what}");
    assert_eq!(
        [hook_mappings(rank0), hook_mappings(rank1)],
        before,
        "{what}: the hook pages went with memsup"
    );

    send_usr1(rank1);
    let mut rest: Vec<String> = (0..3)
        .map(|_| job.lines.recv_timeout(LIMIT).expect("the job's last lines"))
        .collect();
    let launcher = job.launcher.0.take().unwrap();
    let finished = wait_within(launcher, "the MPI job", LIMIT);
    rest.sort();
    assert_eq!(
        rest,
        [
            "rank 0 got 42",
            "rank 0 of 2 done, ok",
            "rank 1 of 2 done, ok"
        ],
        "{what}"
    );
    assert!(finished.status.success(), "{what}: {finished:?}");

    // Rank 0 was inside its hooked MPI_Recv: the call's entry is recorded, not its return.
    let recvs: Vec<(String, String)> = mpi_call_records(&profile, rank0)
        .into_iter()
        .filter(|(name, _)| name == "MPI_Recv")
        .collect();
    assert_eq!(
        recvs,
        [("MPI_Recv".to_string(), "entry".to_string())],
        "{what}"
    );
    let report = report_json(&profile);
    let image = processes(&report)
        .iter()
        .find(|image| image["pid"] == rank0)
        .unwrap();
    let recv_site = image["probe_sites"]
        .as_array()
        .unwrap()
        .iter()
        .find(|site| site["function"] == "MPI_Recv")
        .unwrap();
    assert_eq!(recv_site["implementation"], "hook", "{what}");
    // Rank 1's first send, made while memsup was there, is counted.
    // Its entry and return, or, when nothing happened between them in the same drain pass,
    // one summed call.
    let sends: Vec<String> = mpi_call_records(&profile, rank1)
        .into_iter()
        .filter(|(name, _)| name == "MPI_Send")
        .map(|(_, what)| what)
        .collect();
    assert!(
        sends == ["entry", "return"] || sends == ["1 summed"],
        "{what}: {sends:?}"
    );
}

#[test]
fn a_detach_sends_a_call_blocked_in_a_hooked_mpi_function_home() {
    for library in mpi_libraries() {
        detach_inside_mpi_recv(library);
    }
}
